"""SHAPE, RANK, FILL, ZEROS_LIKE, RANGE, ONE_HOT, WHERE and TOPK_V2 against the official runtime (bit-exact).

Value inputs (FILL's dims, RANGE's bounds, ONE_HOT's depth, TOPK's k) are tested both as constants (static
prepare) and as model inputs (prepared at invoke time); more dynamic-shape graphs are in test_dynamic.py.
"""

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


def assert_same(data: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    ours, ref = run_ours(data, inputs), run_official(data, inputs)
    assert len(ours) == len(ref)
    for o, r in zip(ours, ref):
        assert o.dtype == r.dtype and o.shape == r.shape, (o.dtype, o.shape, r.dtype, r.shape)
        assert np.array_equal(o, r, equal_nan=o.dtype.kind == "f"), (o, r)
    return ours


def prepare_error(data: bytes, match: str):
    with pytest.raises((ValueError, RuntimeError), match=match):
        Interpreter(model_content=data).allocate_tensors()


def tensor(b: ModelBuilder, name: str, value: np.ndarray, const: bool):
    return b.add_const(name, value) if const else b.add_input(name, value.dtype, list(value.shape))


def feeds(values, consts):
    return [v for v, c in zip(values, consts) if not c]


# --- SHAPE, RANK -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [[], [3], [2, 1, 4], [1, 2, 3, 4, 5]])
@pytest.mark.parametrize("out_type", [np.int32, np.int64])
def test_shape_and_rank(shape, out_type):
    b = ModelBuilder()
    x = b.add_input("x", np.float32, shape)
    s = b.add_tensor("s", out_type, [len(shape)])
    r = b.add_tensor("r", np.int32, [])
    b.add_op("SHAPE", [x], [s], options={"out_type": "INT32" if out_type == np.int32 else "INT64"})
    b.add_op("RANK", [x], [r])
    b.mark_output(s)
    b.mark_output(r)
    if not shape:  # the official runtime cannot return the empty SHAPE of a scalar ("Invalid tensor size")
        s_out, r_out = run_ours(b.build(), [np.zeros(shape, np.float32)])
        assert s_out.dtype == out_type and s_out.shape == (0,) and r_out.shape == () and r_out == 0
        return
    assert_same(b.build(), [np.zeros(shape, np.float32)])


def test_shape_errors():
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2])
    s = b.add_tensor("s", np.float32, [1])
    b.add_op("SHAPE", [x], [s], options={"out_type": "FLOAT32"})
    b.mark_output(s)
    prepare_error(b.build(), "SHAPE.*output data type")


# --- FILL, ZEROS_LIKE --------------------------------------------------------------------------------------------

FILL_VALUES = {np.float32: np.float32(-2.5), np.int32: np.int32(-7), np.int64: np.int64(2**40 + 3),
               np.bool_: np.bool_(True), np.int8: np.int8(-100), np.uint8: np.uint8(200), np.int16: np.int16(-3000),
               np.float16: np.float16(1.5)}
FILL_VERSION = {np.bool_: 2, np.int8: 3, np.int16: 3, np.float16: 4}


@settings(max_examples=scaled(25), deadline=None)
@given(st.lists(st.integers(0, 4), min_size=0, max_size=4), st.sampled_from([np.int32, np.int64]),
       st.sampled_from(list(FILL_VALUES)), st.booleans(), st.booleans())
def test_fill(dims, dims_type, value_type, const_dims, const_value):
    value = np.array(FILL_VALUES[value_type])
    dims = np.array(dims, dims_type)
    b = ModelBuilder()
    d = tensor(b, "dims", dims, const_dims)
    v = tensor(b, "value", value, const_value)
    y = b.add_tensor("y", value.dtype, list(dims))
    b.add_op("FILL", [d, v], [y], version=FILL_VERSION.get(value_type, 1))
    b.mark_output(y)
    assert_same(b.build(), feeds([dims, value], [const_dims, const_value]))


def test_fill_errors():
    b = ModelBuilder()
    d = b.add_const("dims", np.array([2, -1], np.int32))
    v = b.add_const("v", np.array(1.0, np.float32))
    y = b.add_tensor("y", np.float32, [2, 1])
    b.add_op("FILL", [d, v], [y])
    b.mark_output(y)
    prepare_error(b.build(), "FILL.*>= 0")
    b = ModelBuilder()
    d = b.add_const("dims", np.array([2], np.int32))
    v = b.add_const("v", np.array([1.0], np.float32))
    y = b.add_tensor("y", np.float32, [2])
    b.add_op("FILL", [d, v], [y])
    b.mark_output(y)
    prepare_error(b.build(), "FILL.*scalar")


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_zeros_like(dtype):
    b = ModelBuilder()
    x = b.add_input("x", dtype, [2, 3])
    y = b.add_tensor("y", dtype, [2, 3])
    b.add_op("ZEROS_LIKE", [x], [y])
    b.mark_output(y)
    assert_same(b.build(), [np.arange(6).reshape(2, 3).astype(dtype) - 2])


def test_zeros_like_errors():
    b = ModelBuilder()
    x = b.add_input("x", np.int8, [2])
    y = b.add_tensor("y", np.int8, [2])
    b.add_op("ZEROS_LIKE", [x], [y])
    b.mark_output(y)
    prepare_error(b.build(), "ZEROS_LIKE.*int8")


# --- RANGE -------------------------------------------------------------------------------------------------------

@st.composite
def range_cases(draw):
    dtype = draw(st.sampled_from([np.int32, np.int64, np.float32]))
    if dtype == np.float32:
        start = draw(st.floats(-20, 20, width=32))
        delta = draw(st.floats(0.125, 5, width=32)) * draw(st.sampled_from([-1, 1]))
        steps = draw(st.floats(0, 30, width=32))
        limit = np.float32(start + delta * steps)
    else:
        start = draw(st.integers(-50, 50))
        delta = draw(st.integers(1, 7)) * draw(st.sampled_from([-1, 1]))
        limit = start + delta * draw(st.integers(0, 20)) + draw(st.integers(0, abs(delta) - 1)) * np.sign(delta)
    return [np.array(v, dtype) for v in (start, limit, delta)]


@settings(max_examples=scaled(25), deadline=None)
@given(range_cases(), st.lists(st.booleans(), min_size=3, max_size=3))
def test_range(values, consts):
    b = ModelBuilder()
    ins = [tensor(b, name, v, c) for name, v, c in zip(("start", "limit", "delta"), values, consts)]
    y = b.add_tensor("y", values[0].dtype, [1])
    b.add_op("RANGE", ins, [y], version=2 if values[0].dtype == np.int64 else 1)
    b.mark_output(y)
    assert_same(b.build(), feeds(values, consts))


def test_range_errors():
    for start, limit, delta, match in ((0, 5, 0, "delta must not be 0"), (5, 0, 1, "negative length")):
        b = ModelBuilder()
        ins = [b.add_const(n, np.array(v, np.int32)) for n, v in (("s", start), ("l", limit), ("d", delta))]
        y = b.add_tensor("y", np.int32, [1])
        b.add_op("RANGE", ins, [y])
        b.mark_output(y)
        prepare_error(b.build(), f"RANGE.*{match}")
    b = ModelBuilder()
    ins = [b.add_const("s", np.array(0, np.int32)), b.add_const("l", np.array(3.0, np.float32)),
           b.add_const("d", np.array(1, np.int32))]
    y = b.add_tensor("y", np.int32, [3])
    b.add_op("RANGE", ins, [y])
    b.mark_output(y)
    prepare_error(b.build(), "RANGE.*types differ")


# --- ONE_HOT -----------------------------------------------------------------------------------------------------

ON_OFF = {np.float32: (2.5, -1.0), np.int32: (7, -3), np.int64: (2**40, -1), np.int8: (-5, 9), np.uint8: (255, 1),
          np.bool_: (True, False)}


@settings(max_examples=scaled(25), deadline=None)
@given(st.lists(st.integers(1, 3), min_size=0, max_size=3), st.sampled_from([np.int32, np.int64]),
       st.sampled_from(list(ON_OFF)), st.integers(0, 6), st.data(), st.booleans(), st.integers(0, 2**31))
def test_one_hot(ind_shape, ind_type, out_type, depth, data, const_depth, seed):
    rank = len(ind_shape) + 1
    axis = data.draw(st.sampled_from([-1] + list(range(rank))))
    rng = np.random.default_rng(seed)
    indices = rng.integers(-2, depth + 2, size=ind_shape).astype(ind_type)
    if ind_type == np.int64 and indices.size:
        indices.flat[0] = 2**32 + 1  # TFLite compares the index truncated to int32
    on, off = (np.array(v, out_type) for v in ON_OFF[out_type])
    depth_v = np.array(depth, np.int32)
    b = ModelBuilder()
    i = b.add_input("indices", ind_type, ind_shape)
    d = tensor(b, "depth", depth_v, const_depth)
    a, o = b.add_const("on", on), b.add_const("off", off)
    a_ = axis if axis >= 0 else rank - 1
    y = b.add_tensor("y", out_type, ind_shape[:a_] + [depth] + ind_shape[a_:])
    b.add_op("ONE_HOT", [i, d, a, o], [y], options={"axis": axis})
    b.mark_output(y)
    assert_same(b.build(), [indices] + feeds([depth_v], [const_depth]))


def test_one_hot_errors():
    b = ModelBuilder()
    i = b.add_input("i", np.int32, [3])
    d = b.add_const("d", np.array(4, np.int32))
    on, off = b.add_const("on", np.array(1.0, np.float32)), b.add_const("off", np.array(0, np.int32))
    y = b.add_tensor("y", np.float32, [3, 4])
    b.add_op("ONE_HOT", [i, d, on, off], [y], options={"axis": -1})
    b.mark_output(y)
    prepare_error(b.build(), "ONE_HOT.*off_value")
    b = ModelBuilder()
    i = b.add_input("i", np.int32, [3])
    d = b.add_const("d", np.array(4, np.int32))
    on, off = b.add_const("on", np.array(1.0, np.float32)), b.add_const("off", np.array(0.0, np.float32))
    y = b.add_tensor("y", np.float32, [3, 4])
    b.add_op("ONE_HOT", [i, d, on, off], [y], options={"axis": 2})
    b.mark_output(y)
    prepare_error(b.build(), "ONE_HOT.*axis 2")


# --- WHERE -------------------------------------------------------------------------------------------------------

WHERE_TYPES = [np.bool_, np.float32, np.int64, np.int32, np.int8, np.uint8, np.uint32]


@settings(max_examples=scaled(25), deadline=None)
@given(st.sampled_from(WHERE_TYPES), st.lists(st.integers(1, 4), min_size=1, max_size=4), st.integers(0, 2**31))
def test_where(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    cond = rng.integers(0, 3, size=shape) * rng.integers(0, 2, size=shape)
    if dtype == np.int8:
        cond = cond * -1
    cond = cond.astype(dtype)
    if dtype == np.float32 and cond.size > 1:
        cond.flat[0], cond.flat[1] = -0.0, np.nan
    b = ModelBuilder()
    x = b.add_input("cond", dtype, shape)
    y = b.add_tensor("y", np.int64, [1, len(shape)])
    b.add_op("WHERE", [x], [y], version=1 if dtype == np.bool_ else 2)
    b.mark_output(y)
    assert_same(b.build(), [cond])


# --- TOPK_V2 -----------------------------------------------------------------------------------------------------

TOPK_TYPES = [np.float32, np.uint8, np.int8, np.int16, np.int32, np.int64]


def topk_model(dtype, shape, k, const_k=True, index_type=np.int32, k_type=np.int32) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape)
    kv = np.array(k, k_type)
    kt = b.add_const("k", kv) if const_k else b.add_input("k", k_type, [])
    out_shape = list(shape[:-1]) + [max(k, 0)]
    v = b.add_tensor("values", dtype, out_shape)
    i = b.add_tensor("indices", index_type, out_shape)
    version = 3 if np.int16 in (np.dtype(dtype), np.dtype(index_type), np.dtype(k_type)) else \
        2 if dtype == np.int8 else 1
    b.add_op("TOPK_V2", [x, kt], [v, i], version=version)
    b.mark_output(v)
    b.mark_output(i)
    return b.build()


@settings(max_examples=scaled(25), deadline=None)
@given(st.sampled_from(TOPK_TYPES), st.lists(st.integers(1, 4), min_size=0, max_size=2), st.integers(1, 40),
       st.data(), st.booleans(), st.integers(0, 2**31))
def test_topk(dtype, lead, n, data, const_k, seed):
    k = data.draw(st.integers(0, n))
    rng = np.random.default_rng(seed)
    shape = lead + [n]
    # few distinct values: many ties, which TFLite breaks by the lower index
    x = rng.integers(-4, 5, size=shape)
    x = (x * 0.5).astype(np.float32) if dtype == np.float32 else (x + (4 if dtype == np.uint8 else 0)).astype(dtype)
    if dtype == np.float32 and x.size > 3:
        x.flat[1] = np.nan
        x.flat[2] = -np.inf
    data_ = topk_model(dtype, shape, k, const_k)
    assert_same(data_, [x] if const_k else [x, np.array(k, np.int32)])


@pytest.mark.parametrize("n,k", [(100, 1), (100, 17), (300, 300), (33, 16)])
def test_topk_large_and_int16(n, k):
    """Both selection strategies (insertion for small k, merge sort beyond), int16 k and indices (version 3)."""
    rng = np.random.default_rng(n + k)
    x = rng.integers(-20, 20, size=(3, n)).astype(np.float32)
    assert_same(topk_model(np.float32, [3, n], k), [x])
    assert_same(topk_model(np.float32, [3, n], k, index_type=np.int16, k_type=np.int16), [x])


def test_topk_errors():
    prepare_error(topk_model(np.float32, [2, 3], 4), "TOPK_V2.*higher than the last dimension")
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [3])
    k = b.add_const("k", np.array(2, np.int64))
    v = b.add_tensor("v", np.float32, [2])
    i = b.add_tensor("i", np.int32, [2])
    b.add_op("TOPK_V2", [x, k], [v, i])
    b.mark_output(v)
    b.mark_output(i)
    prepare_error(b.build(), "TOPK_V2.*int64")
