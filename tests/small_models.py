"""Small models several test files build the same way: an ADD of two inputs (the API tests: test_interpreter,
test_conformance) and a short chain of cheap kernels (the compile-cache tests: test_compile_lock,
test_startup_cache). Not a test file."""

from __future__ import annotations

import numpy as np

from lite_numba.builder import ModelBuilder


def add_model(*, version: int = 1, signature: bool = False) -> bytes:
    """x [2, 3] + y [2, 3] -> z, float32; ADD of the given version (99: one no runtime has); with `signature`, the
    signature "serving_default" (inputs "a", "b", output "out")."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 3])
    y = b.add_input("y", np.float32, [2, 3])
    z = b.add_tensor("z", np.float32, [2, 3])
    b.add_op("ADD", [x, y], [z], version=version)
    b.mark_output(z)
    if signature:
        b.add_signature("serving_default", {"a": x, "b": y}, {"out": z})
    return b.build()


def kernel_chain_model(with_tanh: bool = False) -> bytes:
    """x [2, 8] -> ADD a constant -> MUL a constant (-> TANH) -> the concatenation of those results along axis 1:
    several kernels to compile, each a compile of its own (about a second each cold), two of them closures of one
    factory (ADD and MUL), whose symbol names must survive the trip through another process."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 8])
    a = b.add_tensor("a", np.float32, [2, 8])
    m = b.add_tensor("m", np.float32, [2, 8])
    t = b.add_tensor("t", np.float32, [2, 8]) if with_tanh else None
    y = b.add_tensor("y", np.float32, [2, 24 if with_tanh else 16])
    b.add_op("ADD", [x, b.add_const("c", np.linspace(-1, 1, 8, dtype=np.float32))], [a])
    b.add_op("MUL", [a, b.add_const("k", np.full(8, 3.0, np.float32))], [m])
    if with_tanh:
        b.add_op("TANH", [m], [t])
    b.add_op("CONCATENATION", [a, m, t] if with_tanh else [a, m], [y], options={"axis": 1})
    b.mark_output(y)
    return b.build()
