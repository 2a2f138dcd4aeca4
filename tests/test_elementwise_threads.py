"""Elementwise ops with num_threads > 1 (kernels/elementwise/arithmetic.py same_par / bcast_par, unary.py
unary_par): the output is split into parts, each computed by the serial loop on the workers, so the bytes are the
one-thread bytes for every shape class the drivers split (same shapes; a broadcast split along its first dimension
of more than one index, a row broadcast over a matrix included), every dtype, ops without the clamp (comparisons)
and unary ops; the official runtime agrees."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import kernel_names
from lite_numba.kernels.base import threads

from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close, require_official, run_interpreter, run_official

require_official()

# (op, dtype, x shape, y shape, fused activation); every output has >= 2 * 64 elements, so each splits in two
CASES = [
    ("ADD", np.float32, [1, 20, 20, 24], [1, 20, 20, 24], "RELU6"),
    ("MUL", np.float32, [2, 9, 7, 16], [2, 9, 7, 16], "NONE"),
    ("SUB", np.int32, [1, 33, 40], [1, 33, 40], "NONE"),
    ("ADD", np.float32, [1, 16, 16, 32], [32], "RELU"),  # [.., C] + [C]: rows over one row
    ("MUL", np.float32, [2, 8, 8, 16], [2, 1, 1, 16], "NONE"),  # per image and channel
    ("SUB", np.float32, [3, 50, 1], [3, 50, 17], "NONE"),  # a column broadcast
    ("PRELU", np.float32, [1, 24, 24, 32], [1, 1, 32], None),
    ("GREATER", np.float32, [1, 30, 30, 8], [1, 30, 30, 8], None),  # bool output, no clamp
    ("MAXIMUM", np.float32, [4, 30, 20], [1, 30, 20], None),
]


def _ids(case):
    return f"{case[0]}-{np.dtype(case[1]).name}-{'x'.join(map(str, case[2]))}-{'x'.join(map(str, case[3]))}"


def _model(op, dtype, xs, ys, act):
    mb = ModelBuilder()
    a = mb.add_input("a", dtype, xs)
    b = mb.add_input("b", dtype, ys)
    shape = list(np.broadcast_shapes(tuple(xs), tuple(ys)))
    out = mb.add_tensor("out", np.bool_ if op == "GREATER" else dtype, shape)
    opts = {"fused_activation_function": act} if act else {}
    mb.add_op(op, [a, b], [out], options=opts)
    mb.mark_output(out)
    return mb.build()


def _inputs(dtype, shapes, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        return [rng.integers(-1000, 1000, s).astype(dtype) for s in shapes]
    xs = [(rng.standard_normal(s) * 4).astype(dtype) for s in shapes]
    xs[0].reshape(-1)[:6] = [np.nan, np.inf, -np.inf, -0.0, 3e38, -3e38]
    return xs


def _one_and_two(data, inputs):
    """(the output with 1 thread, with 2 threads, the kernels the 2-thread interpreter scheduled)."""
    (one,), _ = run_interpreter(data, inputs, num_threads=1)
    (two,), it = run_interpreter(data, inputs, num_threads=2)
    return one, two, kernel_names(it)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_two_threads_give_the_one_thread_bytes(case, monkeypatch):
    op, dtype, xs, ys, act = case
    monkeypatch.setattr(threads, "MIN_ELEMENTS", 0)
    data = _model(op, dtype, xs, ys, act)
    inputs = _inputs(dtype, [xs, ys], seed=len(xs) + xs[-1])
    one, two, calls = _one_and_two(data, inputs)
    assert calls & {"same_par", "bcast_par"}, calls
    assert one.tobytes() == two.tobytes()
    (ref,) = run_official(data, inputs)
    assert_close(two, ref, family="elementwise")


def test_small_outputs_stay_serial():
    """Below threads.MIN_ELEMENTS the serial loop runs even with num_threads = 2 (starting the workers costs more)."""
    data = _model("ADD", np.float32, [1, 8, 8, 16], [1, 8, 8, 16], "NONE")
    inputs = _inputs(np.float32, [[1, 8, 8, 16]] * 2, seed=5)
    one, two, calls = _one_and_two(data, inputs)
    assert not calls & {"same_par", "bcast_par"}, calls
    assert one.tobytes() == two.tobytes()


@pytest.mark.parametrize("op", ["RELU", "RELU6", "LOGISTIC", "TANH", "EXP", "NEG"])
def test_unary_two_threads_give_the_one_thread_bytes(op, monkeypatch):
    monkeypatch.setattr(threads, "MIN_ELEMENTS", 0)
    mb = ModelBuilder()
    shape = [1, 19, 23, 16]
    a = mb.add_input("a", np.float32, shape)
    out = mb.add_tensor("out", np.float32, shape)
    mb.add_op(op, [a], [out])
    mb.mark_output(out)
    data = mb.build()
    (x,) = _inputs(np.float32, [shape], seed=7)
    one, two, calls = _one_and_two(data, [x])
    assert "unary_par" in calls, calls
    assert one.tobytes() == two.tobytes()
    (ref,) = run_official(data, [x])
    assert_close(two, ref, family="transcendental" if op in ("LOGISTIC", "TANH", "EXP") else "elementwise")
