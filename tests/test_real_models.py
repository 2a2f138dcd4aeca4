"""Parity with the official runtime on real .tflite files that nobody in this project wrote (tests/data/real).

Sources, versions and licenses: tests/data/real/README.md. The models come from PyPI wheels (MediaPipe, pymicro-
wakeword); `scripts/real_models.py DIR` surveys any folder of such files.

Each model runs on seeded random inputs in lite-numba and in the official runtime's builtin kernels (no delegates),
over a few consecutive invokes (the streaming wake-word model carries state in resource variables), with every
tensor preserved: the outputs and every intermediate tensor the official runtime exposes are compared (floats by
lite_numba.testing.assert_close, family "model"; integers bit-exact). The wake-word model's int8 output saturates on
random features, so its intermediates are what make the test bite.

Every model runs through both executors: the compiled runner (the default, what users get) and
LITE_NUMBA_EXECUTOR=python (each kernel called from Python); both must match the official runtime, and each other.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lite_numba import Interpreter
from lite_numba.testing import assert_close, official_interpreter

REAL = Path(__file__).parent / "data" / "real"

# name -> invokes
MODELS = {
    "microwakeword_okay_nabu": 4,  # int8 streaming: VAR_HANDLE/READ/ASSIGN_VARIABLE, CALL_ONCE, SPLIT_V
    "mediapipe_hand_recrop": 1,  # float: PRELU, STRIDED_SLICE, DEPTHWISE, MAX_POOL
    "mediapipe_face_detection_short_range": 1,  # float16 weights (DEQUANTIZE), PAD, CONCATENATION
    "mediapipe_face_detection_full_range_sparse": 1,  # DENSIFY, DEPTH_TO_SPACE, RESIZE_BILINEAR
}
EXECUTORS = ("compiled", "python")


def _inputs(details: list[dict], rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for d in details:
        shape = tuple(int(s) for s in d["shape"])
        dt = np.dtype(d["dtype"])
        if dt.kind == "f":
            out.append(rng.uniform(-1.0, 1.0, shape).astype(dt))
        else:
            info = np.iinfo(dt)
            out.append(rng.integers(info.min, info.max + 1, shape).astype(dt))
    return out


def _check(name: str, what: str, ours: np.ndarray, ref: np.ndarray) -> None:
    assert_close(ours, ref, family="model", what=f"{name} {what}")


def _ours(path: str, mode: str, monkeypatch) -> Interpreter:
    monkeypatch.setenv("LITE_NUMBA_EXECUTOR", mode)
    it = Interpreter(model_path=path, experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    return it


@pytest.mark.parametrize("name", list(MODELS))
def test_real_model_matches_official(name, official, monkeypatch):
    invokes = MODELS[name]
    path = str(REAL / f"{name}.tflite")
    ref_it = official_interpreter(path, allocate=False, experimental_preserve_all_tensors=True)
    ref_it.allocate_tensors()
    runs = {mode: _ours(path, mode, monkeypatch) for mode in EXECUTORS}
    for ours in runs.values():
        assert [(d["index"], tuple(d["shape"])) for d in ours.get_input_details()] == \
            [(d["index"], tuple(d["shape"])) for d in ref_it.get_input_details()]

    # intermediate tensors: every op output in subgraph 0 that the official runtime can hand back
    kinds = {d["index"]: np.dtype(d["dtype"]).kind for d in ref_it.get_tensor_details()}
    op_outputs = [(op["index"], op["op_name"], int(t)) for op in ref_it._get_ops_details() for t in op["outputs"]
                  if kinds.get(int(t)) != "O"]  # resource handles (VAR_HANDLE) have no values
    rng = np.random.default_rng(20261130)
    compared = 0
    for step in range(invokes):
        for d, x in zip(ref_it.get_input_details(), _inputs(ref_it.get_input_details(), rng)):
            ref_it.set_tensor(d["index"], x)
            for ours in runs.values():
                ours.set_tensor(d["index"], x)
        ref_it.invoke()
        for ours in runs.values():
            ours.invoke()
        for mode, ours in runs.items():
            for k, d in enumerate(ref_it.get_output_details()):
                _check(name, f"{mode} executor, invoke {step}: output {k}", ours.get_tensor(d["index"]),
                       ref_it.get_tensor(d["index"]))
            for node, op, t in op_outputs:
                ref = ref_it.get_tensor(t)
                _check(name, f"{mode} executor, invoke {step}: node {node} ({op}) output tensor {t}",
                       ours.get_tensor(t), ref)
                compared += 1
        for k, d in enumerate(runs["compiled"].get_output_details()):  # the two executors against each other
            _check(name, f"compiled vs python executor, invoke {step}: output {k}",
                   runs["compiled"].get_tensor(d["index"]), runs["python"].get_tensor(d["index"]))
    assert compared > 0
