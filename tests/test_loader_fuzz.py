"""1,000 corrupted variants of three models: each gives a Python exception or a run that agrees with the official
runtime — never a crash (run in a subprocess, so a segfault fails the test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MODELS

from lite_numba.model import ModelError, load_model

HERE = Path(__file__).parent
FUZZ_MODELS = ["op_softmax_beta", "seed_atan", "op_add_broadcast"]


def test_corrupted_models_raise_or_run_correctly(tmp_path, official):
    models = [str(MODELS / f"{m}.tflite") for m in FUZZ_MODELS]
    proc = subprocess.run([sys.executable, str(HERE / "fuzz_models.py"), str(tmp_path), "1000", *models],
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, \
        f"fuzz process died (rc {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
    print(proc.stdout)
    replay = subprocess.run([sys.executable, str(HERE / "official_replay.py"), str(tmp_path)],
                            capture_output=True, text=True, timeout=1200)
    if replay.returncode != 0:
        pytest.fail(f"official replay died (rc {replay.returncode}) — the official runtime crashed on a variant "
                    f"we ran:\n{replay.stderr[-3000:]}")
    print(replay.stdout)
    assert "mismatched 0" in replay.stdout, replay.stdout


@pytest.mark.parametrize("data, message", [
    (b"", "too short"),
    (b"\x10\x00\x00\x00TFL2" + b"\x00" * 32, "file identifier"),
    (b"\xff\xff\xff\x7fTFL3" + b"\x00" * 32, "root table offset"),
])
def test_malformed_headers_are_named(data, message):
    with pytest.raises(ModelError, match=message):
        load_model(data)


def test_truncated_model_raises_value_error():
    data = (MODELS / "op_add.tflite").read_bytes()
    for cut in range(0, len(data), max(1, len(data) // 50)):
        with pytest.raises(ValueError):
            load_model(data[:cut])
