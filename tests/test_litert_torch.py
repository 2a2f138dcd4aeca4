"""The litert-torch / ai-edge-quantizer models of tests/data/litert_torch/ (issue 29) against their recorded oracles.

Made by scripts/make_litert_torch_models.py (never run here: no torch in CI); its docstring says what each `.npz`
holds. Criteria (lite_numba.testing.assert_close, relative to each output's largest magnitude):

- float models: within 1e-5 of torch eager per output;
- quantized models: integer outputs exactly the official builtin kernels'; float outputs of dynamic-range models
  within 1e-6 of them;
- KV-cache models: prefill_<N> on the recorded inputs (its caches within the criterion above of the builtin
  kernels'), then 32 greedy decode steps through our SignatureRunner, each step fed the previous step's output
  caches (kv_cache_* out -> kv_cache_* in, as the official signature runners are driven): the same 32 tokens as
  recorded, and the recorded steps' logits close (torch eager's for float models, the builtin kernels' for
  quantized ones).

Every model is a case; models that need what this installation lacks fail (they are not skipped).
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from lite_numba.interpreter import Interpreter
from lite_numba.testing import assert_close

DATA = pathlib.Path(__file__).parent / "data" / "litert_torch"
MODELS = sorted(json.loads((DATA / "manifest.json").read_text())["models"])
FLOAT_TOL = 1e-5  # float models against torch eager
DYNAMIC_TOL = 1e-6  # float outputs of quantized models against the builtin kernels


def _load(name: str) -> tuple[dict, dict]:
    with np.load(DATA / f"{name}.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    return arrays, json.loads(str(arrays.pop("meta")))


def _check_output(ours: np.ndarray, ref: np.ndarray, tol: float, what: str) -> None:
    if ref.dtype.kind in "iub":
        np.testing.assert_array_equal(ours, ref, err_msg=what)
    else:
        assert_close(ours, ref, tol, what=what)


def _mask_row(positions: np.ndarray, cache: int) -> np.ndarray:
    """export_hf's float mask input [1, 1, T, cache]: 0 where key position <= query position, -inf elsewhere."""
    m = np.where(np.arange(cache)[None, :] <= positions[:, None], 0.0, -np.inf).astype(np.float32)
    return m[None, None]


def _param_row(start: int, length: int) -> np.ndarray:
    """export_hf's param_tensor [1, 1, 1, 7]: [start, end, end, length, 0, 0, 0]."""
    return np.array([start, start + length, start + length, length, 0, 0, 0], np.int32).reshape(1, 1, 1, 7)


def run_single(name: str, arrays: dict, meta: dict) -> None:
    it = Interpreter(model_path=str(DATA / f"{name}.tflite"))
    it.allocate_tensors()
    for i, d in enumerate(it.get_input_details()):
        it.set_tensor(d["index"], arrays[f"in_{i}"])
    it.invoke()
    float_model = meta["expected"] == "torch"
    for j, d in enumerate(it.get_output_details()):
        ref = arrays[f"torch_{j}" if float_model else f"builtin_{j}"]
        _check_output(it.get_tensor(d["index"]), ref, FLOAT_TOL if float_model else DYNAMIC_TOL,
                      f"{name} output {j} vs {'torch' if float_model else 'builtin'}")


def run_generation(name: str, arrays: dict, meta: dict) -> None:
    float_model = meta["recipe"] is None
    tol = FLOAT_TOL if float_model else DYNAMIC_TOL
    it = Interpreter(model_path=str(DATA / f"{name}.tflite"))
    prefill = it.get_signature_runner(meta["prefill_signature"])
    decode = it.get_signature_runner(meta["decode_signature"])
    inputs = {k[len("prefill_in_"):]: v for k, v in arrays.items() if k.startswith("prefill_in_")}
    out = prefill(**inputs)
    for k, v in out.items():
        if k.startswith("kv_cache"):
            _check_output(v, arrays[f"prefill_out_{k}"], tol, f"{name} prefill {k} vs builtin")
        elif float_model and "torch_prefill_logits" in arrays:
            assert_close(v, arrays["torch_prefill_logits"], FLOAT_TOL, what=f"{name} prefill {k} vs torch")
        else:
            _check_output(v, arrays[f"prefill_out_{k}"], tol, f"{name} prefill {k} vs builtin")
    caches = {k: v for k, v in out.items() if k.startswith("kv_cache")}
    wanted = decode.get_input_details()
    start, cache_len = meta["prefill_len"], meta["cache_len"]
    token = int(arrays["prompt"][start])
    tokens, logits = [], []
    for step in range(meta["decode_steps"]):
        p = start + step
        feed = dict(caches, tokens=np.array([[token]], np.int32), input_pos=np.array([p], np.int32))
        if "mask" in wanted:
            feed["mask"] = _mask_row(np.array([p]), cache_len)
        if "param_tensor" in wanted:
            feed["param_tensor"] = _param_row(p, 1)
        out = decode(**feed)
        row = out["logits"].reshape(-1)
        token = int(np.argmax(row))
        tokens.append(token)
        if step < meta["logit_steps"]:
            logits.append(row.copy())
        caches = {k: v for k, v in out.items() if k.startswith("kv_cache")}
    np.testing.assert_array_equal(np.array(tokens, np.int32), arrays["tokens"],
                                  err_msg=f"{name}: greedy tokens differ from the official signature runners'")
    ref = arrays["torch_decode_logits"] if float_model else arrays["decode_logits"]
    oracle = "torch" if float_model else "builtin"
    for step, (ours, want) in enumerate(zip(logits, ref)):
        assert_close(ours, want, tol, what=f"{name} decode step {step} logits vs {oracle}")


@pytest.mark.parametrize("name", MODELS)
def test_litert_torch_model(name):
    arrays, meta = _load(name)
    if meta["kind"] == "generation":
        run_generation(name, arrays, meta)
    else:
        run_single(name, arrays, meta)


def test_every_model_is_recorded():
    """Each manifest entry has its model and oracle file (and nothing else lies there unlisted)."""
    stems = {p.stem for p in DATA.glob("*.tflite")}
    assert stems == set(MODELS)
    assert {p.stem for p in DATA.glob("*.npz")} == stems
