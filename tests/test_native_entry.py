"""Interpreter.invoke through the native entry (lite_numba.runtime.rows.install_entry): a model whose whole invoke is
compiled runners runs as one call of a compiled wrapper with its table's address, no Python frame or array unboxing
between. The entry must follow every change of the runtime (resize and allocate, clone, re-planning) and give
kernels' errors as invoke() gives them; models that cannot take it run invoke() as before."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import invoke_with, official_interpreter

F32 = np.float32


def _model() -> bytes:
    """y = (x + 1) * 2; g = GATHER(table, idx): idx is checked at run time."""
    b = ModelBuilder()
    x = b.add_input("x", F32, [1, 4], shape_signature=[-1, 4])
    idx = b.add_input("idx", np.int32, [2])
    s = b.add_tensor("s", F32, [1, 4], shape_signature=[-1, 4])
    b.add_op("ADD", [x, b.add_const("one", np.ones(4, F32))], [s])
    y = b.add_tensor("y", F32, [1, 4], shape_signature=[-1, 4])
    b.add_op("MUL", [s, b.add_const("two", np.full(4, 2.0, F32))], [y])
    g = b.add_tensor("g", F32, [2, 3])
    b.add_op("GATHER", [b.add_const("table", np.arange(15, dtype=F32).reshape(5, 3)), idx], [g],
             options={"axis": 0})
    b.mark_output(y)
    b.mark_output(g)
    return b.build()


def _entry(it: Interpreter):
    run = it.runtime.main.__dict__.get("run")
    return run if isinstance(run, functools.partial) else None


def test_entry_follows_resize_and_clone(official):
    data = _model()
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    first = _entry(it)
    assert first is not None
    theirs = official_interpreter(data)
    rng = np.random.default_rng(5)
    for rows in (1, 3, 1):
        feed = [rng.standard_normal((rows, 4)).astype(F32), np.array([4, 0], np.int32)]
        for interp in (it, theirs):
            interp.resize_tensor_input(0, [rows, 4])
            interp.allocate_tensors()
        for a, b in zip(invoke_with(it, feed), invoke_with(theirs, feed)):
            np.testing.assert_array_equal(a, b)
        assert _entry(it) is not None
        assert _entry(it).table[2] == it.runtime.main.arena.ctypes.data  # the arena of the plan in force
    assert _entry(it) is first  # (1 row again: the first plan and its entry back from the plan cache)
    twin = it.clone()
    feed = [np.ones((1, 4), F32), np.array([1, 2], np.int32)]
    mine = invoke_with(twin, feed)
    other = invoke_with(it, [np.zeros((1, 4), F32), np.array([3, 3], np.int32)])
    np.testing.assert_array_equal(twin.get_tensor(twin.get_output_details()[0]["index"]), mine[0])
    np.testing.assert_array_equal(mine[0], np.full((1, 4), 4.0, F32))
    np.testing.assert_array_equal(other[0], np.full((1, 4), 2.0, F32))


def test_entry_gives_kernel_errors_as_invoke_does():
    it = Interpreter(model_content=_model())
    it.allocate_tensors()
    assert _entry(it) is not None
    it.set_tensor(0, np.ones((1, 4), F32))
    it.set_tensor(1, np.array([0, 7], np.int32))
    with pytest.raises(RuntimeError, match=r"GATHER: index out of range\nNode failed to invoke \(subgraph 0\)\."):
        it.invoke()
    it.set_tensor(1, np.array([0, 4], np.int32))
    it.invoke()  # usable afterwards
    np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[1]["index"])[1], [12.0, 13.0, 14.0])


def test_not_ready_and_python_mode_run_invoke(monkeypatch):
    it = Interpreter(model_content=_model())
    it.allocate_tensors()
    it.resize_tensor_input(0, [2, 4])
    assert _entry(it) is None  # invalidated: invoke() and its message
    with pytest.raises(RuntimeError, match="Invoke called on model that is not ready"):
        it.invoke()
    monkeypatch.setenv("LITE_NUMBA_EXECUTOR", "python")
    py = Interpreter(model_content=_model())
    py.allocate_tensors()
    assert _entry(py) is None
    out = invoke_with(py, [np.ones((1, 4), F32), np.array([0, 1], np.int32)])
    np.testing.assert_array_equal(out[0], np.full((1, 4), 4.0, F32))
