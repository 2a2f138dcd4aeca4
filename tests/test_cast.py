"""CAST between every pair of bool, int8/16/32/64, uint8/16/32, float16/32/64 and complex64, against the official
runtime: bit-exact, including saturation of out-of-range floats, NaN, infinities, float16 rounding and subnormals.

One model per source type holds a CAST to every destination type. Every pair runs with the executor in python
mode (each kernel called on its own: no fused runner to compile per model, the kernels are the same compiled
loops); a few source types also run through the compiled runner.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import require_official, run_both, run_official

require_official()

TYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
                               np.float16, np.float32, np.float64, np.complex64)]


def cast_all_model(src: np.dtype, n: int) -> bytes:
    """x (src) -> CAST to every type in TYPES; outputs in that order."""
    b = ModelBuilder()
    x = b.add_input("x", src, [n])
    for dst in TYPES:
        y = b.add_tensor(f"y_{dst.name}", dst, [n])
        version = 5 if {src, dst} & {np.dtype(np.float16), np.dtype(np.float64)} else 4 if np.dtype(np.uint16) in (
            src, dst) else 3 if np.dtype(np.int8) in (src, dst) else 2 if np.dtype(np.uint32) in (src, dst) else 1
        b.add_op("CAST", [x], [y], version=version)
        b.mark_output(y)
    return b.build()


SPECIAL_FLOATS = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.9, -2.9, 127.5, 128.0, -128.7, -129.0, 255.9, 256.0,
                  32767.9, 32768.0, -32769.0, 65504.0, 65519.9, 65520.0, 65535.5, 70000.5, 2147483520.0, 2147483648.0,
                  -2147483648.0, -2147483904.0, 4294967040.0, 4294967296.0, 9.2233715e18, 9.223372e18, -9.223373e18,
                  1e30, -1e30, np.inf, -np.inf, np.nan, -np.nan, 1e-5, 6.1e-5, 6.0e-8, 3.0e-8, 2.98e-8, 1e-40,
                  5.960464477539063e-08, 2.980232238769531e-08, 0.00012207031, 1.0009765625, 1.00048828125,
                  1.00146484375, 2049.0, 2051.0, 16777217.0]


def source_values(src: np.dtype, rng: np.random.Generator, n: int) -> np.ndarray:
    """n values of type src: the type's corner cases, then random ones (of every magnitude for floats)."""
    if src == np.bool_:
        return rng.integers(0, 2, n).astype(np.bool_)
    if src.kind in "iu":
        info = np.iinfo(src)
        corners = [info.min, info.max, 0, 1, -1, 127, 128, 255, 256, -129, 32767, 32768, 65535, 65536,
                   2**31 - 1, 2**31, 2**32 - 1, 2**24 + 1, 2**53 + 1, 2**62 + 2**39 + 1]
        corners = [c for c in corners if info.min <= c <= info.max]
        rand = rng.integers(info.min, int(info.max) + 1, n, dtype=np.int64)
        return np.concatenate([np.array(corners, np.int64), rand])[:n].astype(src)
    mags = 10.0 ** rng.uniform(-9, 21, n) * rng.choice([-1, 1], n)
    base = np.concatenate([np.array(SPECIAL_FLOATS), mags])[:n]
    if src.kind == "c":
        imag = rng.normal(size=n)
        return (base + 1j * imag).astype(np.complex64)
    with np.errstate(over="ignore"):
        return base.astype(src)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype.kind in "fc":
        return np.array_equal(a.view(f"u{a.dtype.itemsize if a.dtype.kind == 'f' else 4}"),
                              b.view(f"u{b.dtype.itemsize if b.dtype.kind == 'f' else 4}"))
    return np.array_equal(a, b)


N = 96


def check_all_casts(src: np.dtype, seed: int) -> None:
    data = cast_all_model(src, N)
    x = source_values(src, np.random.default_rng(seed), N)
    ours, refs = run_both(data, [x])
    for dst, got, ref in zip(TYPES, ours, refs):
        assert got.dtype == ref.dtype and got.shape == ref.shape
        if not same_bits(got, ref):
            bad = np.flatnonzero(~((got == ref) | ((got != got) & (ref != ref))))
            raise AssertionError(f"{src.name} -> {dst.name}: {bad.size} differ, e.g. x={x[bad[:4]]} "
                                 f"ours={got[bad[:4]]} ref={ref[bad[:4]]}" if bad.size else
                                 f"{src.name} -> {dst.name}: NaN bits differ")


@pytest.mark.parametrize("src", TYPES, ids=lambda t: t.name)
@settings(max_examples=scaled(5), deadline=None)
@given(seed=st.integers(0, 2**31))
def test_cast_all_pairs(src, seed):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LITE_NUMBA_EXECUTOR", "python")
        check_all_casts(src, seed)


@pytest.mark.parametrize("src", [np.dtype(np.float32), np.dtype(np.int16), np.dtype(np.float16)], ids=str)
def test_cast_compiled_runner(src):
    check_all_casts(src, 11)


def test_cast_shapes_and_empty():
    """CAST keeps the input shape (any rank, empty tensors too) and follows a batch resize."""
    for shape in ([2, 3, 4], [0, 3], []):
        b = ModelBuilder()
        x = b.add_input("x", np.float32, shape)
        y = b.add_tensor("y", np.int32, shape)
        b.add_op("CAST", [x], [y])
        b.mark_output(y)
        data = b.build()
        v = (np.random.default_rng(0).normal(size=shape) * 100).astype(np.float32)
        it = Interpreter(model_content=data)
        it.allocate_tensors()
        it.set_tensor(0, v)
        it.invoke()
        got, ref = it.get_tensor(1), run_official(data, [v])[0]
        assert got.shape == ref.shape and np.array_equal(got, ref)
        if shape and shape[0]:
            v2 = np.full([5] + shape[1:], -7.9, np.float32)
            it.resize_tensor_input(0, v2.shape)
            it.allocate_tensors()
            it.set_tensor(0, v2)
            it.invoke()
            assert np.array_equal(it.get_tensor(1), np.full(v2.shape, -7, np.int32))


def test_cast_errors():
    b = ModelBuilder()
    x = b.add_input("x", np.uint64, [3])
    y = b.add_tensor("y", np.float32, [3])
    b.add_op("CAST", [x], [y])
    b.mark_output(y)
    with pytest.raises((ValueError, RuntimeError), match="CAST.*uint64"):
        Interpreter(model_content=b.build()).allocate_tensors()
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [3])
    y = b.add_tensor("y", np.float32, [3])
    b.add_op("CAST", [x, x], [y])
    b.mark_output(y)
    with pytest.raises((ValueError, RuntimeError), match="CAST.*inputs"):
        Interpreter(model_content=b.build()).allocate_tensors()
