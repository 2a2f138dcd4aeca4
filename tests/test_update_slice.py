"""DYNAMIC_UPDATE_SLICE against the official runtime (bit-exact): every dtype the kernel moves, int32 and int64 start
indices, constant and run-time indices, indices out of range (clamped, never an out-of-bounds write), a KV-cache-like
loop of updates, and shapes the official kernel refuses."""

from __future__ import annotations

import numpy as np
import pytest

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import check_same, require_official, run_official
from lite_numba.testing import random_array as rand

require_official()


def version_for(dtype, index_type):
    dtype = np.dtype(dtype)
    if dtype == np.int16:
        return 4
    if dtype == np.float16:
        return 3
    return 2 if np.dtype(index_type) == np.int64 else 1


def dus_model(dtype, shape, ushape, start=None, index_type=np.int32):
    """start None: the start indices are a graph input; otherwise a constant."""
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape)
    u = b.add_input("u", dtype, ushape)
    if start is None:
        i = b.add_input("start", index_type, [len(shape)])
    else:
        i = b.add_const("start", np.array(start, index_type).reshape(len(shape)))
    y = b.add_tensor("y", dtype, shape)
    b.add_op("DYNAMIC_UPDATE_SLICE", [x, u, i], [y], version=version_for(dtype, index_type))
    b.mark_output(y)
    return b.build()


# (dtype, index type, indices at run time)
COMBOS = [(np.float32, np.int32, True), (np.int8, np.int64, True), (np.int16, np.int32, False),
          (np.int64, np.int64, False), (np.bool_, np.int32, True), (np.float16, np.int32, True),
          (np.int32, np.int32, False)]


@pytest.mark.parametrize("dtype,index_type,runtime", COMBOS)
def test_dus_dtypes(dtype, index_type, runtime):
    rng = np.random.default_rng(7)
    cases = [((4, 5), (2, 3), [1, 2]), ((2, 3, 4), (1, 3, 2), [1, 0, 2]), ((6,), (2,), [3]),
             ((2, 3, 4), (2, 3, 4), [0, 0, 0]), ((3, 4), (0, 2), [1, 1])]
    for shape, ushape, start in cases:
        x, u = rand(rng, dtype, shape), rand(rng, dtype, ushape)
        s = np.array(start, index_type)
        if runtime:
            check_same(dus_model(dtype, shape, ushape, index_type=index_type), [x, u, s])
        else:
            check_same(dus_model(dtype, shape, ushape, start, index_type), [x, u])


@pytest.mark.parametrize("index_type", [np.int32, np.int64])
def test_dus_clamps_start_indices(index_type):
    """Negative and too-large start indices are clamped per dimension (also int64 values beyond int32)."""
    rng = np.random.default_rng(3)
    shape, ushape = (3, 5, 4), (2, 2, 3)
    data = dus_model(np.float32, shape, ushape, index_type=index_type)
    info = np.iinfo(index_type)
    starts = [[-1, 0, 0], [5, 9, 9], [info.min, info.max, 1], [2, -7, 3], [1, 3, 1], [-2, 4, 100]]
    for start in starts:
        x, u = rand(rng, np.float32, shape), rand(rng, np.float32, ushape)
        check_same(data, [x, u, np.array(start, index_type)])


def test_dus_rank_one_to_six():
    rng = np.random.default_rng(11)
    for rank in range(1, 7):
        shape = tuple(int(v) for v in rng.integers(1, 4, rank))
        ushape = tuple(int(rng.integers(0 if d == rank - 1 else 1, s + 1)) for d, s in enumerate(shape))
        data = dus_model(np.float32, shape, ushape)
        for _ in range(3):
            start = rng.integers(-2, 4, rank).astype(np.int32)
            check_same(data, [rand(rng, np.float32, shape), rand(rng, np.float32, ushape), start])


def test_dus_kv_cache_steps():
    """A KV-cache write: [1, heads, max_len, dim] cache, one position per step, the same model invoked repeatedly."""
    rng = np.random.default_rng(5)
    shape, ushape = (1, 2, 8, 4), (1, 2, 1, 4)
    data = dus_model(np.float32, shape, ushape)
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    cache = np.zeros(shape, np.float32)
    for pos in range(10):  # positions 8 and 9 clamp to 7
        u = rand(rng, np.float32, ushape)
        start = np.array([0, 0, pos, 0], np.int32)
        ins = [cache, u, start]
        for d, v in zip(it.get_input_details(), ins):
            it.set_tensor(d["index"], v)
        it.invoke()
        ours = it.get_tensor(it.get_output_details()[0]["index"])
        ref = run_official(data, ins)[0]
        assert ours.tobytes() == ref.tobytes()
        cache = ours


def test_dus_complex128_words():
    """16-byte elements move as two 8-byte words."""
    rng = np.random.default_rng(2)
    shape, ushape = (3, 4), (2, 2)
    b = ModelBuilder()
    x = b.add_input("x", np.complex64, shape)
    u = b.add_input("u", np.complex64, ushape)
    i = b.add_input("start", np.int32, [2])
    y = b.add_tensor("y", np.complex64, shape)
    b.add_op("DYNAMIC_UPDATE_SLICE", [x, u, i], [y])
    b.mark_output(y)
    data = b.build()
    xs = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    us = (rng.standard_normal(ushape) + 1j * rng.standard_normal(ushape)).astype(np.complex64)
    check_same(data, [xs, us, np.array([2, 1], np.int32)])


@pytest.mark.parametrize("ushape,start_shape,msg", [
    ((2, 6), (2,), "exceeds operand shape"),
    ((2,), (2,), "rank"),
    ((2, 2), (3,), "start_indices"),
])
def test_dus_refuses_bad_shapes(ushape, start_shape, msg):
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [3, 4])
    u = b.add_input("u", np.float32, list(ushape))
    i = b.add_input("start", np.int32, list(start_shape))
    y = b.add_tensor("y", np.float32, [3, 4])
    b.add_op("DYNAMIC_UPDATE_SLICE", [x, u, i], [y])
    b.mark_output(y)
    it = Interpreter(model_content=b.build())
    with pytest.raises(ValueError, match=f"DYNAMIC_UPDATE_SLICE.*{msg}"):
        it.allocate_tensors()
