"""TILE and BROADCAST_TO against the official runtime (bit-exact)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import check_same, require_official
from lite_numba.testing import random_array as rand

require_official()


def tile_model(dtype, shape, multiples, mult_type=np.int32, runtime=False):
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape)
    m = np.array(multiples, mult_type)
    mt = b.add_input("multiples", mult_type, [len(shape)]) if runtime else b.add_const("multiples", m)
    y = b.add_tensor("y", dtype, [max(n * k, 0) for n, k in zip(shape, multiples)])
    b.add_op("TILE", [x, mt], [y], version=3 if dtype == np.int8 else 1)
    b.mark_output(y)
    return b.build()


@settings(max_examples=scaled(25), deadline=None)
@given(st.data())
def test_tile(data):
    rank = data.draw(st.integers(1, 5))
    shape = data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    multiples = data.draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    dtype = data.draw(st.sampled_from([np.float32, np.int8, np.int16, np.int64, np.bool_]))
    mult_type = data.draw(st.sampled_from([np.int32, np.int64]))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    check_same(tile_model(dtype, shape, multiples, mult_type), [rand(rng, dtype, shape)])


def test_tile_runtime_multiples_zero_and_errors():
    rng = np.random.default_rng(0)
    x = rand(rng, np.float32, [2, 3])
    m = np.array([3, 2], np.int32)
    check_same(tile_model(np.float32, [2, 3], m, runtime=True), [x, m])
    check_same(tile_model(np.float32, [2, 3], [0, 2]), [x])
    with pytest.raises((ValueError, RuntimeError), match="TILE.*must be non-negative"):
        Interpreter(model_content=tile_model(np.float32, [2, 3], [1, -1])).allocate_tensors()
    b = ModelBuilder()
    xi = b.add_input("x", np.float32, [2, 3])
    y = b.add_tensor("y", np.float32, [2, 3])
    b.add_op("TILE", [xi, b.add_const("m", np.array([1], np.int32))], [y])
    b.mark_output(y)
    with pytest.raises((ValueError, RuntimeError), match="TILE.*multiples has 1 entries"):
        Interpreter(model_content=b.build()).allocate_tensors()


def broadcast_model(dtype, shape, out_shape, shape_type=np.int32):
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape)
    s = b.add_const("shape", np.array(out_shape, shape_type))
    y = b.add_tensor("y", dtype, out_shape)
    b.add_op("BROADCAST_TO", [x, s], [y], version=3 if dtype in (np.int8, np.int16) else 2)
    b.mark_output(y)
    return b.build()


@settings(max_examples=scaled(25), deadline=None)
@given(st.data())
def test_broadcast_to(data):
    out_rank = data.draw(st.integers(1, 5))
    out_shape = data.draw(st.lists(st.integers(1, 4), min_size=out_rank, max_size=out_rank))
    rank = data.draw(st.integers(0, out_rank))
    shape = [n if data.draw(st.booleans()) else 1 for n in out_shape[out_rank - rank:]]
    dtype = data.draw(st.sampled_from([np.float32, np.int8, np.int16, np.int64, np.bool_]))
    shape_type = data.draw(st.sampled_from([np.int32, np.int64]))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    check_same(broadcast_model(dtype, shape, out_shape, shape_type), [rand(rng, dtype, shape)])


def test_broadcast_to_errors():
    with pytest.raises((ValueError, RuntimeError), match="BROADCAST_TO.*cannot be broadcast"):
        Interpreter(model_content=broadcast_model(np.float32, [3, 2], [3, 4])).allocate_tensors()
    with pytest.raises((ValueError, RuntimeError), match="BROADCAST_TO.*more dimensions"):
        Interpreter(model_content=broadcast_model(np.float32, [1, 3, 2], [3, 2])).allocate_tensors()
