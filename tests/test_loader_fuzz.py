"""1,000 corrupted variants of three models: each gives a Python exception or a run that agrees with the official
runtime — never a crash (run in a subprocess, so a segfault fails the test).

Every variant we ran and the official runtime also ran is compared (whole-model tolerance, integers exact); at least
MIN_COMPARED must be, so a loader that refused everything (or a replay that compared nothing) fails. Variants only we
ran (the official runtime refused them: seed_atan's custom op always, some corrupted options) are counted per model
and printed (pytest -s)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MODELS

from lite_numba.format.model import ModelError, load_model

HERE = Path(__file__).parent
FUZZ_MODELS = ["op_softmax_beta", "seed_atan", "op_add_broadcast"]
COUNT = 1000
# ~110 of the 1000 variants run in both runtimes today (seed 1234); far fewer means the loader or the replay broke
MIN_COMPARED = 60


def test_corrupted_models_raise_or_run_correctly(tmp_path, official):
    models = [str(MODELS / f"{m}.tflite") for m in FUZZ_MODELS]
    proc = subprocess.run([sys.executable, str(HERE / "fuzz_models.py"), str(tmp_path), str(COUNT), *models],
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, \
        f"fuzz process died (rc {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
    ran = json.loads(proc.stdout.strip().splitlines()[-1])
    replay = subprocess.run([sys.executable, str(HERE / "official_replay.py"), str(tmp_path)],
                            capture_output=True, text=True, timeout=1200)
    if replay.returncode != 0:
        pytest.fail(f"official replay died (rc {replay.returncode}) — the official runtime crashed on a variant "
                    f"we ran:\n{replay.stderr[-3000:]}")
    result = json.loads(replay.stdout.strip().splitlines()[-1])
    only_ours = sum(result["only_ours"].values())
    print(f"fuzz: {COUNT} variants, {ran['error']} raised, {ran['ran']} ran ({ran['ran_by_model']}); compared with "
          f"the official runtime: {result['compared']}; ran only in ours (official refused): {only_ours} "
          f"{result['only_ours']}")
    assert not result["mismatched"], result["mismatched"][:10]
    assert ran["ran"] == result["compared"] + only_ours, (ran, result)
    assert result["compared"] >= MIN_COMPARED, f"only {result['compared']} variants compared: {ran}, {result}"
    for name in FUZZ_MODELS:  # each model contributes variants that ran (a loader refusing one model fails)
        assert ran["ran_by_model"].get(name, 0) > 0, ran


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


@pytest.mark.parametrize("name", ["tfkeras_lstm_int8", "keras_lstm", "lstm_text_tfkeras"])
def test_vectors_read_at_schema_slots_match_the_generated_accessors(name):
    """The loader reads shapes, shape signatures and operator inputs / outputs / intermediates at their schema
    slots (lite_numba.format.model.VECTOR_SLOTS) instead of through the generated `tflite` accessors: both give
    the same vectors (the integer LSTM has intermediates, the Keras models dynamic shape signatures)."""
    import tflite  # lazy: only this test reads the model through the generated accessors

    data = (MODELS / f"{name}.tflite").read_bytes()
    plan = load_model(data)
    m = tflite.Model.GetRootAs(data, 0)

    def vec(obj, field):
        return () if getattr(obj, field + "IsNone")() else tuple(int(v) for v in getattr(obj, field + "AsNumpy")())

    seen = set()
    for si, sub in enumerate(plan.subgraphs):
        sg = m.Subgraphs(si)
        assert (sub.inputs, sub.outputs) == (vec(sg, "Inputs"), vec(sg, "Outputs"))
        for t in sub.tensors:
            ft = sg.Tensors(t.index)
            assert t.shape == vec(ft, "Shape")
            assert t.shape_signature == (vec(ft, "ShapeSignature") or t.shape)
            seen.add("signature" if vec(ft, "ShapeSignature") else "shape")
        for ni, node in enumerate(n for n in sub.nodes if not n.origin):
            op = sg.Operators(ni)
            assert (node.inputs, node.outputs) == (vec(op, "Inputs"), vec(op, "Outputs"))
            assert node.intermediates == vec(op, "Intermediates")
            seen.update("intermediates" for _ in node.intermediates[:1])
    assert "shape" in seen
