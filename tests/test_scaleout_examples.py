"""The examples/ of issue 18, each run end to end as a user would (a subprocess on demo data), and their results
compared with a plain loop of Interpreter.invoke over the same inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from batch_models import plain_loop
from conftest import require_module

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(EXAMPLES))  # the examples' own readers (PPM, WAV, JSON lines)


def run_example(name: str, *args) -> str:
    out = subprocess.run([sys.executable, str(EXAMPLES / name), *map(str, args)], capture_output=True, text=True,
                         timeout=600, env=dict(os.environ, LITE_NUMBA_PROGRESS="0"), cwd=ROOT)
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stdout


def test_ray_image_folder(tmp_path):
    require_module("ray")
    import ray_image_folder as ex

    stdout = run_example("ray_image_folder.py", tmp_path / "img", "--demo", 24, "--batch-size", 8, "--out",
                         tmp_path / "r.npz")
    assert stdout.startswith("24 images; class counts:")
    res = np.load(tmp_path / "r.npz")
    paths = sorted(str(p) for p in (tmp_path / "img").glob("*.ppm"))
    assert list(res["paths"]) == paths
    x = np.stack([ex.preprocess({"path": p}) for p in paths])
    np.testing.assert_array_equal(res["logits"], plain_loop(ex.MODEL, {"image": x})["Identity"])


def test_dask_long_audio(tmp_path):
    require_module("distributed")
    import dask_long_audio as ex

    wav = tmp_path / "long.wav"
    stdout = run_example("dask_long_audio.py", wav, "--demo", 4, "--frames-per-chunk", 100, "--out",
                         tmp_path / "e.npz")
    assert stdout.startswith("4.0 s, 249 frames;")
    res = np.load(tmp_path / "e.npz")
    audio = ex.read_wav(wav)
    frames = np.stack([audio[s:s + ex.FRAME] for s in res["frames_start"]])
    ref = plain_loop(res["model"].tobytes(), {"frames": frames})["energy"]
    np.testing.assert_array_equal(res["energy"], ref)
    # the demo's chirp rises: the loudest band of the last second is above the first second's
    assert np.bincount(ref[-62:].argmax(1)).argmax() > np.bincount(ref[:62].argmax(1)).argmax()


def test_beam_sensor_records(tmp_path):
    require_module("apache_beam")
    records = tmp_path / "rec.jsonl"
    stdout = run_example("beam_sensor_records.py", records, tmp_path / "scores", "--demo", 120, "--batch-size", 16)
    assert "scores written to" in stdout
    scored = {}
    for f in tmp_path.glob("scores-*.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            scored[r["id"]] = r["score"]
    recs = [json.loads(line) for line in records.read_text().splitlines()]
    assert sorted(scored) == sorted(r["id"] for r in recs)
    x = np.array([r["readings"] for r in recs], np.int8)
    ref = plain_loop((tmp_path / "scores.model.tflite").read_bytes(), {"readings": x})["score"]
    got = np.array([scored[r["id"]] for r in recs], np.int8)
    assert np.array_equal(got, ref)
