"""TRANSPOSE and REVERSE_V2 against the official runtime (bit-exact: these ops only move bytes)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import require_official, run_official, run_ours

require_official()

DTYPES = [np.float32, np.int8, np.int16, np.int64, np.bool_, np.uint8, np.float16]


def rand(rng, dtype, shape):
    """Random values of any dtype (full range for integers)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(shape).astype(dtype)


def check_same(data, inputs):
    """Ours and the official outputs are identical (dtype, shape and bytes)."""
    ours = run_ours(data, inputs)
    ref = run_official(data, inputs)
    assert len(ours) == len(ref)
    for o, r in zip(ours, ref):
        assert (o.dtype, o.shape) == (r.dtype, r.shape)
        assert o.tobytes() == r.tobytes()


def transpose_version(dtype, rank):
    dtype = np.dtype(dtype)
    if dtype == np.float16:
        return 9
    if rank > 6:
        return 8
    if rank > 5:
        return 6
    if dtype == np.int16:
        return 5
    if rank > 4:
        return 4
    return {np.dtype(np.bool_): 3, np.dtype(np.int8): 2}.get(dtype, 1)


def transpose_model(dtype, shape, perm, quant=None, version=None):
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape, quant=quant)
    p = b.add_const("perm", np.array(perm, np.int32))
    out_shape = [shape[(q + len(shape)) % len(shape)] for q in perm]
    y = b.add_tensor("y", dtype, out_shape, quant=quant)
    b.add_op("TRANSPOSE", [x, p], [y], version=version or transpose_version(dtype, len(shape)))
    b.mark_output(y)
    return b.build()


@settings(max_examples=scaled(25), deadline=None)
@given(st.data())
def test_transpose(data):
    rank = data.draw(st.integers(1, 6))
    shape = data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    perm = data.draw(st.permutations(range(rank)))
    # negative entries count from the end
    perm = [p - rank if data.draw(st.booleans()) else p for p in perm]
    dtype = data.draw(st.sampled_from(DTYPES))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    check_same(transpose_model(dtype, shape, perm), [rand(rng, dtype, shape)])


@pytest.mark.parametrize("dtype,shape,perm", [(np.float32, [1, 3, 32, 32], [0, 2, 3, 1]),  # ViT's NCHW input
                                               (np.float32, [1, 4, 17, 16], [0, 1, 3, 2]),
                                               (np.float32, [1, 17, 3, 4, 16], [2, 0, 3, 1, 4]),
                                               (np.int8, [70, 37], [1, 0]), (np.float16, [5, 33, 66], [2, 1, 0])])
def test_transpose_blocks(dtype, shape, perm):
    # shapes where the kernel walks 2-D blocks: columns of the input's contiguous dimension in blocks of 32 (more
    # than one block, a partial block), rows of a contiguous inner dimension
    check_same(transpose_model(dtype, shape, perm), [rand(np.random.default_rng(len(shape)), dtype, shape)])


@pytest.mark.parametrize("dtype", [np.int8, np.float16, np.float32, np.int64])
@pytest.mark.parametrize("shape,perm", [([1, 2, 9, 11], [0, 2, 3, 1]), ([1, 5, 4, 2], [0, 2, 3, 1]),
                                        ([3, 7, 17], [0, 2, 1]), ([4, 6, 8], [0, 2, 1]), ([12, 9], [1, 0]),
                                        ([2, 9, 33, 8], [0, 2, 1, 3]), ([8, 8], [1, 0]),
                                        ([2, 3, 70, 37], [0, 1, 3, 2])])
def test_transpose_tiles_and_planes(dtype, shape, perm):
    # 8 x 8 tiles of vector loads and shuffles (the last tile of a dimension moved back to end at its edge) and
    # 2 to 7 channel planes interleaved 8 pixels at a time, for each word size; runs of 8 words between them
    check_same(transpose_model(dtype, shape, perm), [rand(np.random.default_rng(7), dtype, shape)])


def test_transpose_int8_quantized_and_8d():
    rng = np.random.default_rng(1)
    check_same(transpose_model(np.int8, [1, 4, 6, 3], [0, 2, 3, 1], quant=(0.05, -3)),
               [rand(rng, np.int8, [1, 4, 6, 3])])
    shape = [2, 1, 3, 2, 1, 2, 3, 2]
    check_same(transpose_model(np.float32, shape, [7, 0, 5, 2, 6, 1, 4, 3]), [rand(rng, np.float32, shape)])


def test_transpose_complex_and_zero_size():
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))).astype(np.complex64)
    assert np.array_equal(run_ours(transpose_model(np.complex64, [2, 3], [1, 0]), [x])[0], x.T)
    x = rng.standard_normal((2, 0, 3)).astype(np.float32)
    check_same(transpose_model(np.float32, [2, 0, 3], [2, 0, 1]), [x])


@pytest.mark.parametrize("perm, msg", [([0, 0, 1], "not a permutation"), ([0, 1, 3], "out of range"),
                                       ([0, 1], "perm has shape")])
def test_transpose_bad_perm(perm, msg):
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 3, 4])
    p = b.add_const("perm", np.array(perm, np.int32))
    y = b.add_tensor("y", np.float32, [2, 3, 4])
    b.add_op("TRANSPOSE", [x, p], [y])
    b.mark_output(y)
    with pytest.raises((ValueError, RuntimeError), match=f"TRANSPOSE.*{msg}"):
        Interpreter(model_content=b.build()).allocate_tensors()


def reverse_model(dtype, shape, axes, runtime_axes=False):
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape)
    a = b.add_input("axis", np.int32, [len(axes)]) if runtime_axes else b.add_const("axis", np.array(axes, np.int32))
    y = b.add_tensor("y", dtype, shape)
    version = {np.dtype(np.int8): 3, np.dtype(np.bool_): 2}.get(np.dtype(dtype), 1)
    b.add_op("REVERSE_V2", [x, a], [y], version=version)
    b.mark_output(y)
    return b.build()


@settings(max_examples=scaled(25), deadline=None)
@given(st.data())
def test_reverse_v2(data):
    rank = data.draw(st.integers(1, 5))
    shape = data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    # the official kernel supports contiguous axes only
    first = data.draw(st.integers(0, rank - 1))
    count = data.draw(st.integers(1, rank - first))
    axes = [a - rank if data.draw(st.booleans()) else a for a in range(first, first + count)]
    dtype = data.draw(st.sampled_from([np.float32, np.int8, np.bool_, np.int64, np.int16]))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    check_same(reverse_model(dtype, shape, axes), [rand(rng, dtype, shape)])


def test_reverse_v2_runtime_axes_and_errors():
    rng = np.random.default_rng(3)
    x = rand(rng, np.float32, [3, 4, 5])
    data = reverse_model(np.float32, [3, 4, 5], [1, 2], runtime_axes=True)
    check_same(data, [x, np.array([1, 2], np.int32)])
    with pytest.raises((ValueError, RuntimeError), match="REVERSE_V2.*out of range"):
        Interpreter(model_content=reverse_model(np.float32, [3, 4], [2])).allocate_tensors()
    with pytest.raises((ValueError, RuntimeError), match="REVERSE_V2.*duplicates"):
        Interpreter(model_content=reverse_model(np.float32, [3, 4], [1, -1])).allocate_tensors()
