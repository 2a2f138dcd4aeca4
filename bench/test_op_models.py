"""Every bundled model against the official builtin kernels (issue 3's bound: single ops within 10x, whole models
within 3x). Prints one ratio per model; never asserts on time."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import MODEL_DIRS, ROWS

from lite_numba import Interpreter

NAMES = sorted({p.stem for d in MODEL_DIRS if d.exists() for p in d.glob("*.tflite")})


def _median_us(fn, inner: int, rounds: int = 9) -> float:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner * 1e6)
    return float(np.median(samples))


@pytest.mark.parametrize("name", NAMES)
def test_vs_builtin(benchmark, name):
    from ai_edge_litert.interpreter import Interpreter as Official
    from ai_edge_litert.interpreter import OpResolverType

    path = next(d / f"{name}.tflite" for d in MODEL_DIRS if (d / f"{name}.tflite").exists())
    ours = Interpreter(model_path=str(path))
    ours.allocate_tensors()
    try:
        theirs = Official(model_path=str(path), num_threads=1,
                          experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        theirs.allocate_tensors()
    except (RuntimeError, ValueError) as e:
        pytest.skip(f"the official runtime cannot run {name}: {e}")
    rng = np.random.default_rng(0)
    for d in ours.get_input_details():
        dt = np.dtype(d["dtype"])
        x = rng.integers(1, 4, size=d["shape"]).astype(dt) if dt.kind in "iub" else \
            rng.standard_normal(d["shape"]).astype(dt)
        ours.set_tensor(d["index"], x)
        theirs.set_tensor(d["index"], x)
    ours.invoke()
    theirs.invoke()
    t0 = time.perf_counter()
    theirs.invoke()
    inner = max(1, int(1e-3 / max(time.perf_counter() - t0, 1e-7)))
    a, b = _median_us(ours.invoke, inner), _median_us(theirs.invoke, inner)
    ROWS.append({"case": f"{name} (vs builtin)", "ours": a, "builtin": b})
    benchmark.extra_info.update({"ours_us": a, "builtin_us": b, "ratio": a / b})
    benchmark.pedantic(ours.invoke, rounds=1)
