"""A custom op and worker functions for tests/test_conformance.py that other processes import by name (a
multiprocessing "spawn" child unpickles an Interpreter whose custom op lives here)."""

from __future__ import annotations

import numpy as np

from lite_numba import custom_op
from lite_numba.builder import ModelBuilder
from lite_numba.testing import invoke_with


@custom_op("ConformanceTriple")
def conformance_triple(x, out):
    for i in range(x.size):
        out.flat[i] = x.flat[i] * np.float32(3.0)


def triple_model() -> bytes:
    """x [2, 4] -> ConformanceTriple -> ADD a constant: a custom op inside a builtin graph."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 4])
    t = b.add_tensor("t", np.float32, [2, 4])
    b.add_custom_op("ConformanceTriple", [x], [t])
    c = b.add_const("c", np.arange(8, dtype=np.float32).reshape(2, 4))
    y = b.add_tensor("y", np.float32, [2, 4])
    b.add_op("ADD", [t, c], [y])
    b.mark_output(y)
    return b.build()


def run_steps(args) -> list[np.ndarray]:
    """(interpreter, inputs): set each input, invoke, collect output 0 (runs in a pool worker)."""
    interp, inputs = args
    return [invoke_with(interp, [x])[0] for x in inputs]
