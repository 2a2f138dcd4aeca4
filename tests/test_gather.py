"""GATHER, GATHER_ND, SCATTER_ND and EMBEDDING_LOOKUP against the official runtime (bit-exact), including indices
that are only known at run time and out-of-range indices (an error, never an out-of-bounds read)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import check_same, require_official, run_official
from lite_numba.testing import random_array as rand

require_official()


# (data type, index type, indices given at run time): a few combinations covering every value, so the number of
# distinct compiled runners (one per structure) stays small
COMBOS = [(np.float32, np.int32, True), (np.int8, np.int64, False), (np.int64, np.int16, True),
          (np.bool_, np.int32, False), (np.int16, np.int32, True), (np.float32, np.int64, False)]


def index_input(b, name, values, runtime):
    return b.add_input(name, values.dtype, list(values.shape)) if runtime else b.add_const(name, values)


# --- GATHER -------------------------------------------------------------------------------------------------------

def gather_model(dtype, shape, indices, axis, batch_dims=0, runtime=False, quant=None):
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape, quant=quant)
    i = index_input(b, "indices", indices, runtime)
    a = axis % len(shape)
    bd = batch_dims % indices.ndim if batch_dims < 0 else batch_dims
    out_shape = list(shape[:a]) + list(indices.shape[bd:]) + list(shape[a + 1:])
    y = b.add_tensor("y", dtype, out_shape, quant=quant)
    if indices.dtype == np.int16:
        version = 6
    elif batch_dims:
        version = 5
    else:
        version = {np.dtype(np.int16): 4, np.dtype(np.bool_): 3, np.dtype(np.int8): 2}.get(np.dtype(dtype), 1)
    b.add_op("GATHER", [x, i], [y], options={"axis": axis, "batch_dims": batch_dims}, version=version)
    b.mark_output(y)
    return b.build()


@settings(max_examples=scaled(25), deadline=None)
@given(st.data())
def test_gather(data):
    rank = data.draw(st.integers(1, 4))
    shape = data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    axis = data.draw(st.integers(0, rank - 1))
    bd = data.draw(st.integers(0, axis))
    idx_extra = data.draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))
    idx_shape = shape[:bd] + idx_extra
    dtype, idx_type, runtime = data.draw(st.sampled_from(COMBOS))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    indices = rng.integers(0, shape[axis], idx_shape).astype(idx_type)
    neg_axis = data.draw(st.booleans())
    model = gather_model(dtype, shape, indices, axis - rank if neg_axis else axis, bd, runtime)
    x = rand(rng, dtype, shape)
    check_same(model, [x, indices] if runtime else [x])


def test_gather_quantized_and_negative_batch_dims():
    rng = np.random.default_rng(0)
    x = rand(rng, np.int8, [2, 5, 3])
    indices = np.array([[4, 0], [1, 1]], np.int32)
    check_same(gather_model(np.int8, [2, 5, 3], indices, 1, batch_dims=-1, quant=(0.1, 4)), [x])


@pytest.mark.parametrize("bad", [5, -1])
def test_gather_index_out_of_range(bad):
    x = np.arange(20, dtype=np.float32).reshape(5, 4)
    indices = np.array([0, bad], np.int32)
    it = Interpreter(model_content=gather_model(np.float32, [5, 4], indices, 0, runtime=True))
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.set_tensor(it.get_input_details()[1]["index"], indices)
    with pytest.raises((ValueError, RuntimeError), match="GATHER: index out of range"):
        it.invoke()
    with pytest.raises(RuntimeError):  # the official runtime fails too
        run_official(gather_model(np.float32, [5, 4], indices, 0, runtime=True), [x, indices])


def test_gather_errors():
    with pytest.raises((ValueError, RuntimeError), match="GATHER.*indices have type float32"):
        Interpreter(model_content=gather_model(np.float32, [5, 4], np.zeros(2, np.float32), 0)).allocate_tensors()
    with pytest.raises((ValueError, RuntimeError), match="GATHER.*axis 2 is out of range"):
        Interpreter(model_content=gather_model(np.float32, [5, 4], np.zeros(2, np.int32), 2)).allocate_tensors()


# --- GATHER_ND ----------------------------------------------------------------------------------------------------

def gather_nd_model(dtype, shape, indices, runtime=False):
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape)
    i = index_input(b, "indices", indices, runtime)
    y = b.add_tensor("y", dtype, list(indices.shape[:-1]) + list(shape[indices.shape[-1]:]))
    version = 4 if indices.dtype == np.int16 else {np.dtype(np.bool_): 5, np.dtype(np.int16): 3}.get(np.dtype(dtype), 1)
    b.add_op("GATHER_ND", [x, i], [y], version=version)
    b.mark_output(y)
    return b.build()


@settings(max_examples=scaled(25), deadline=None)
@given(st.data())
def test_gather_nd(data):
    rank = data.draw(st.integers(1, 4))
    shape = data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    nd = data.draw(st.integers(1, rank))
    batch = data.draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    dtype, idx_type, runtime = data.draw(st.sampled_from([c for c in COMBOS if c[0] != np.bool_]))
    indices = np.stack([rng.integers(0, shape[j], batch) for j in range(nd)], axis=-1).astype(idx_type)
    x = rand(rng, dtype, shape)
    check_same(gather_nd_model(dtype, shape, indices, runtime), [x, indices] if runtime else [x])


def test_gather_nd_index_out_of_range():
    indices = np.array([[0, 1], [2, 0]], np.int32)
    it = Interpreter(model_content=gather_nd_model(np.float32, [2, 3, 4], indices, runtime=True))
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[1]["index"], indices)
    with pytest.raises((ValueError, RuntimeError), match="GATHER_ND: index out of range"):
        it.invoke()


# --- SCATTER_ND ---------------------------------------------------------------------------------------------------

def scatter_nd_model(dtype, indices, upd_shape, shape, runtime=False):
    b = ModelBuilder()
    i = index_input(b, "indices", indices, runtime)
    u = b.add_input("updates", dtype, upd_shape)
    s = b.add_const("shape", np.array(shape, np.int32))
    y = b.add_tensor("y", dtype, shape)
    b.add_op("SCATTER_ND", [i, u, s], [y])
    b.mark_output(y)
    return b.build()


@settings(max_examples=scaled(25), deadline=None)
@given(st.data())
def test_scatter_nd(data):
    rank = data.draw(st.integers(1, 3))
    shape = data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    nd = data.draw(st.integers(1, rank))
    n = data.draw(st.integers(1, 6))  # duplicates accumulate
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    indices = np.stack([rng.integers(0, shape[j], n) for j in range(nd)], axis=-1).astype(np.int32)
    dtype, runtime = data.draw(st.sampled_from([(np.float32, True), (np.int8, False), (np.uint8, True),
                                                (np.int32, False), (np.int64, True), (np.bool_, False)]))
    upd_shape = [n] + shape[nd:]
    model = scatter_nd_model(dtype, indices, upd_shape, shape, runtime)
    u = rand(rng, dtype, upd_shape)
    check_same(model, [indices, u] if runtime else [u])


def test_scatter_nd_errors():
    indices = np.array([[1], [7]], np.int32)
    it = Interpreter(model_content=scatter_nd_model(np.float32, indices, [2, 3], [4, 3], runtime=True))
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], indices)
    with pytest.raises((ValueError, RuntimeError), match="SCATTER_ND: index out of range"):
        it.invoke()
    data = scatter_nd_model(np.float32, np.array([[1]], np.int32), [1, 2], [4, 3])
    with pytest.raises((ValueError, RuntimeError), match="SCATTER_ND.*do not match shape"):
        Interpreter(model_content=data).allocate_tensors()


# --- EMBEDDING_LOOKUP ---------------------------------------------------------------------------------------------

def embedding_model(value, out_dtype, n, quant=None, version=1):
    b = ModelBuilder()
    ids = b.add_input("ids", np.int32, [n])
    v = b.add_const("value", value, quant=quant)
    y = b.add_tensor("y", out_dtype, [n] + list(value.shape[1:]))
    b.add_op("EMBEDDING_LOOKUP", [ids, v], [y], version=version)
    b.mark_output(y)
    return b.build()


def test_embedding_lookup():
    rng = np.random.default_rng(7)
    ids = rng.integers(0, 10, 6).astype(np.int32)
    check_same(embedding_model(rand(rng, np.float32, [10, 3, 2]), np.float32, 6), [ids])
    check_same(embedding_model(rand(rng, np.int8, [10, 4]), np.int8, 6, quant=(0.1, 2)), [ids])
    # hybrid: int8 or uint8 values, float output (TFLite reads the bytes as int8 even for uint8)
    check_same(embedding_model(rand(rng, np.int8, [10, 5]), np.float32, 6, quant=(0.037, 0)), [ids])
    check_same(embedding_model(rand(rng, np.uint8, [10, 5]), np.float32, 6, quant=(0.02, 0)), [ids])
    per_row = {"scales": list(rng.uniform(0.01, 0.1, 10)), "zero_points": [0] * 10, "quantized_dimension": 0}
    check_same(embedding_model(rand(rng, np.int8, [10, 5]), np.float32, 6, quant=per_row, version=4), [ids])


def test_embedding_lookup_out_of_range():
    it = Interpreter(model_content=embedding_model(np.ones((4, 2), np.float32), np.float32, 2))
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.array([1, 4], np.int32))
    with pytest.raises((ValueError, RuntimeError), match="EMBEDDING_LOOKUP: index out of range"):
        it.invoke()
