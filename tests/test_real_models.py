"""Parity with the official runtime on real .tflite files that nobody in this project wrote (tests/data/real).

Sources, versions and licenses: tests/data/real/README.md. The models come from PyPI wheels (MediaPipe, pymicro-
wakeword); `scripts/real_models.py DIR` surveys any folder of such files.

Each model runs on seeded random inputs in lite-numba and in the official runtime's builtin kernels (no delegates),
over a few consecutive invokes (the streaming wake-word model carries state in resource variables), with every
tensor preserved: the outputs and every intermediate tensor the official runtime exposes are compared — float
within 1e-4 * max(1, max|ref|) (whole models; single ops are held to 1e-5 elsewhere), integers bit-exact.
The wake-word model's int8 output saturates on random features, so its intermediates are what make the test bite.

The large float graphs run with LITE_NUMBA_EXECUTOR=python (each kernel called from Python: the same kernels and
numerics, without compiling a several-hundred-call runner, which costs minutes cold); the small int8 graph runs
through the compiled runner.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lite_numba import Interpreter

REAL = Path(__file__).parent / "data" / "real"

# name -> (executor mode, invokes)
MODELS = {
    "microwakeword_okay_nabu": ("compiled", 4),  # int8 streaming: VAR_HANDLE/READ/ASSIGN_VARIABLE, CALL_ONCE, SPLIT_V
    "mediapipe_hand_recrop": ("python", 1),  # float: PRELU, STRIDED_SLICE, DEPTHWISE, MAX_POOL
    "mediapipe_face_detection_short_range": ("python", 1),  # float16 weights (DEQUANTIZE), PAD, CONCATENATION
    "mediapipe_face_detection_full_range_sparse": ("python", 1),  # DENSIFY, DEPTH_TO_SPACE, RESIZE_BILINEAR
}
FLOAT_TOL = 1e-4


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
    assert ours.shape == ref.shape and ours.dtype == ref.dtype, \
        f"{name} {what}: ours {ours.dtype}{ours.shape} vs official {ref.dtype}{ref.shape}"
    if ref.size == 0:
        return
    if ref.dtype.kind in "iub":
        bad = int(np.count_nonzero(ours != ref))
        step = int(np.max(np.abs(ours.astype(np.int64) - ref.astype(np.int64))))
        assert bad == 0, f"{name} {what}: {bad}/{ref.size} elements differ (max step {step})"
    else:
        err = float(np.max(np.abs(ours.astype(np.float64) - ref)))
        scale = max(1.0, float(np.max(np.abs(ref))))
        assert err <= FLOAT_TOL * scale, f"{name} {what}: max abs error {err:.3g}, max|ref| {scale:.3g}"


@pytest.mark.parametrize("name", list(MODELS))
def test_real_model_matches_official(name, official, monkeypatch):
    mode, invokes = MODELS[name]
    monkeypatch.setenv("LITE_NUMBA_EXECUTOR", mode)
    path = str(REAL / f"{name}.tflite")
    ref_it = official.Interpreter(
        model_path=path, num_threads=1, experimental_preserve_all_tensors=True,
        experimental_op_resolver_type=official.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    ref_it.allocate_tensors()
    ours = Interpreter(model_path=path, experimental_preserve_all_tensors=True)
    ours.allocate_tensors()
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
            ours.set_tensor(d["index"], x)
        ref_it.invoke()
        ours.invoke()
        for k, d in enumerate(ref_it.get_output_details()):
            _check(name, f"invoke {step}: output {k}", ours.get_tensor(d["index"]), ref_it.get_tensor(d["index"]))
        for node, op, t in op_outputs:
            ref = ref_it.get_tensor(t)
            _check(name, f"invoke {step}: node {node} ({op}) output tensor {t}", ours.get_tensor(t), ref)
            compared += 1
    assert compared > 0
