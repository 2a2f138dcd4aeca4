"""set_tensor / get_tensor as built-in functions (lite_numba.api.fast_io): the common case in native code, every
other case through the Python methods. Values and errors must be the official runtime's either way."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import numpy as np
import pytest

from lite_numba import Interpreter
from lite_numba.api import fast_io
from lite_numba.builder import ModelBuilder
from lite_numba.testing import official_interpreter

F32 = np.float32


def _model() -> bytes:
    """y = x * 2 + 1 (float32 [2, 3]); q = n + n (int64 [4]); s = a scalar int32 + 1."""
    b = ModelBuilder()
    x = b.add_input("x", F32, [2, 3])
    n = b.add_input("n", np.int64, [4])
    a = b.add_input("a", np.int32, [])
    m = b.add_tensor("m", F32, [2, 3])
    b.add_op("MUL", [x, b.add_const("two", np.full((2, 3), 2.0, F32))], [m])
    y = b.add_tensor("y", F32, [2, 3])
    b.add_op("ADD", [m, b.add_const("one", np.ones((2, 3), F32))], [y])
    q = b.add_tensor("q", np.int64, [4])
    b.add_op("ADD", [n, n], [q])
    s = b.add_tensor("s", np.int32, [])
    b.add_op("ADD", [a, b.add_const("i1", np.array(1, np.int32))], [s])
    for t in (y, q, s):
        b.mark_output(t)
    return b.build()


@pytest.fixture(autouse=True, scope="module")
def _compiled():
    """The built-ins' code compiled (a cold cache compiles it along with the first kernels it compiles)."""
    assert fast_io.prepare()


def _builtin(it) -> bool:
    return type(vars(it).get("set_tensor")).__name__ == "builtin_function_or_method"


@pytest.fixture
def slow_calls(monkeypatch):
    """The calls that reach the Python methods (the built-ins' fallback looks them up on Interpreter at each call)."""
    calls = []
    for name in ("set_tensor", "get_tensor"):
        method = getattr(Interpreter, name)

        def counted(self, *args, _m=method, _n=name, **kwargs):
            calls.append(_n)
            return _m(self, *args, **kwargs)
        monkeypatch.setattr(Interpreter, name, counted)
    return calls


def _feed(rng):
    return [rng.standard_normal((2, 3)).astype(F32), rng.integers(-60, 60, 4).astype(np.int64),
            np.array(rng.integers(-9, 9), np.int32)]


def test_common_case_native_and_as_official(official, slow_calls):
    data = _model()
    it = Interpreter(model_content=data)
    assert _builtin(it) and _builtin(it.clone())
    it.allocate_tensors()
    theirs = official_interpreter(data)
    rng = np.random.default_rng(3)
    ins = [d["index"] for d in it.get_input_details()]
    outs = [d["index"] for d in it.get_output_details()]
    for _ in range(3):
        feed = _feed(rng)
        for interp in (it, theirs):
            for i, v in zip(ins, feed):
                interp.set_tensor(i, v)
            interp.invoke()
        for o in outs:
            got, want = it.get_tensor(o), theirs.get_tensor(o)
            assert type(got) is np.ndarray and got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
            got[...] = 0  # a copy, not a view of the arena
        for i, v in zip(ins, feed):
            np.testing.assert_array_equal(it.get_tensor(i), v)
    assert slow_calls == []  # every call above was the built-ins' own


def test_other_cases_take_the_methods(official, slow_calls):
    data = _model()
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    theirs = official_interpreter(data)
    x = np.arange(12, dtype=F32).reshape(2, 6)[:, ::2]  # not contiguous
    cases = [(0, x), (1, [1, 2, 3, 4]), (np.int64(0), np.ones((2, 3), F32)), (True, np.ones(4, np.int64)),
             (2, np.int32(5))]  # (a numpy scalar: not an array, its fields not an array's)
    for i, v in cases:
        for interp in (it, theirs):
            interp.set_tensor(i, v)
        np.testing.assert_array_equal(it.get_tensor(i), theirs.get_tensor(i))
    assert slow_calls.count("set_tensor") == len(cases)
    np.testing.assert_array_equal(it.get_tensor(0, subgraph_index=0), theirs.get_tensor(0))
    np.testing.assert_array_equal(it.get_tensor(0, 0), theirs.get_tensor(0))
    assert slow_calls.count("get_tensor") == 4  # (np.int64(0) and True above, then these two)


@pytest.mark.parametrize("index, value", [
    (0, np.ones((2, 3), np.float64)),  # dtype
    (0, np.ones((3, 2), F32)),  # shape
    (0, np.ones((2, 3, 1), F32)),  # rank
    (1, np.ones(5, np.int64)),
    (99, np.ones(4, np.int64)),  # no such tensor
    (-1, np.ones(4, np.int64)),
    (2, 7), (2, np.float32(7)), (0, None), (0, b"not an array"), (1, "1234"), (1, [[1, 2, 3, 4]]),
])
def test_bad_set_tensor_as_official(official, index, value):
    data = _model()
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    theirs = official_interpreter(data)
    with pytest.raises(Exception) as want:
        theirs.set_tensor(index, value)
    with pytest.raises(type(want.value)) as got:
        it.set_tensor(index, value)
    assert str(got.value) == str(want.value)


def test_busy_and_deleted():
    it = Interpreter(model_content=_model())
    it.allocate_tensors()
    out = it.get_output_details()[0]["index"]
    it._slot.pop()  # as while another thread is inside
    try:
        for call, args in ((it.set_tensor, (0, np.ones((2, 3), F32))), (it.get_tensor, (out,))):
            with pytest.raises(RuntimeError, match="another thread"):
                call(*args)
    finally:
        it._slot.append(None)
    set_tensor = it.set_tensor
    del it
    gc.collect()
    with pytest.raises(RuntimeError, match="deleted"):
        set_tensor(0, np.ones((2, 3), np.float64))  # (not the common case: the Python method, whose object is gone)


def test_not_installed_when_overridden_or_off(monkeypatch):
    class Mine(Interpreter):
        def set_tensor(self, tensor_index, value):
            self.seen = True
            super().set_tensor(tensor_index, value)

    it = Mine(model_content=_model())
    it.allocate_tensors()
    assert not _builtin(it)
    it.set_tensor(0, np.ones((2, 3), F32))
    assert it.seen
    monkeypatch.setattr(fast_io, "_STATE", {})
    monkeypatch.setenv("LITE_NUMBA_FAST_IO", "0")
    assert not _builtin(Interpreter(model_content=_model()))


COLD = """
import numpy as np, sys
sys.path.insert(0, {tests!r})
from test_fast_io import _model
from lite_numba import Interpreter
first = Interpreter(model_content=_model())
assert type(vars(first).get("set_tensor")).__name__ != "builtin_function_or_method"  # not compiled: not made here
first.allocate_tensors()  # the kernels' compile, fast_io's entry along
second = Interpreter(model_content=_model())
assert type(vars(second).get("set_tensor")).__name__ == "builtin_function_or_method"
second.allocate_tensors()
second.set_tensor(0, np.ones((2, 3), np.float32))
print("ok")
"""


def test_cold_cache_compiles_it_along_with_the_kernels(tmp_path):
    env = dict(os.environ, LITE_NUMBA_CACHE_DIR=str(tmp_path), LITE_NUMBA_PRECOMPILED="0", NUMBA_CACHE_DIR="")
    env.pop("NUMBA_CACHE_DIR")
    r = subprocess.run([sys.executable, "-c", COLD.format(tests=os.path.dirname(__file__))], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]
