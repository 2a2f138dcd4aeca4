"""SEGMENT_SUM and UNSORTED_SEGMENT_SUM / PROD / MAX / MIN against the official runtime (bit-exact): float32 and int32
data, constant and run-time segment ids, empty segments (initial values), negative ids (skipped), wrap-around, and
ids the official kernel refuses (an error naming the op, never an out-of-bounds write)."""

from __future__ import annotations

import numpy as np
import pytest

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import check_same, require_official, run_official, run_ours

require_official()


def data_values(rng, dtype, shape):
    if dtype == np.int32:
        return rng.integers(-(2 ** 31), 2 ** 31, shape, dtype=np.int64).astype(np.int32)
    x = rng.standard_normal(shape).astype(np.float32)
    x.flat[0] = -0.0
    return x


def segment_sum_model(dtype, shape, ids=None, out_rows=None):
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape)
    i = b.add_input("ids", np.int32, [shape[0]]) if ids is None else b.add_const("ids", np.asarray(ids, np.int32))
    rows = out_rows if out_rows is not None else (int(ids[-1]) + 1 if ids is not None and len(ids) else 1)
    y = b.add_tensor("y", dtype, [rows] + list(shape[1:]))
    b.add_op("SEGMENT_SUM", [x, i], [y])
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_segment_sum_const_ids(dtype):
    rng = np.random.default_rng(1)
    for shape, ids in [((5, 3), [0, 0, 1, 2, 2]), ((4,), [0, 1, 2, 3]), ((6, 2, 2), [0, 0, 0, 0, 0, 0])]:
        check_same(segment_sum_model(dtype, shape, ids), [data_values(rng, dtype, shape)])


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_segment_sum_runtime_ids(dtype):
    """Ids computed at run time: the output's first dimension follows them (dynamic node)."""
    rng = np.random.default_rng(2)
    shape = (7, 3)
    data = segment_sum_model(dtype, shape)
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    for ids in ([0, 0, 1, 1, 2, 3, 3], [0, 1, 2, 3, 4, 5, 6], [0] * 7, [0, 0, 1, 1, 2, 3, 3]):
        x = data_values(rng, dtype, shape)
        ids = np.array(ids, np.int32)
        for d, v in zip(it.get_input_details(), [x, ids]):
            it.set_tensor(d["index"], v)
        it.invoke()
        ours = it.get_tensor(it.get_output_details()[0]["index"])
        ref = run_official(data, [x, ids])[0]
        assert ours.shape == ref.shape and ours.tobytes() == ref.tobytes()


@pytest.mark.parametrize("ids", [[1, 1, 2], [0, 2, 2], [0, 1, 0]])
def test_segment_sum_refuses_bad_ids(ids):
    data = segment_sum_model(np.float32, (3, 2))
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.ones((3, 2), np.float32))
    it.set_tensor(it.get_input_details()[1]["index"], np.array(ids, np.int32))
    with pytest.raises(ValueError, match="SEGMENT_SUM"):
        it.invoke()
    with pytest.raises(Exception, match="segment_sum"):  # the official kernel refuses them too
        run_official(data, [np.ones((3, 2), np.float32), np.array(ids, np.int32)])


def unsorted_model(op, dtype, shape, ids_shape, num, ids=None, num_runtime=False):
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape)
    i = b.add_input("ids", np.int32, list(ids_shape)) if ids is None else b.add_const("ids", ids)
    n = b.add_input("num", np.int32, [1]) if num_runtime else b.add_const("num", np.array(num, np.int32))
    y = b.add_tensor("y", dtype, [int(np.asarray(num).reshape(-1)[0])] + list(shape[len(ids_shape):]))
    b.add_op(op, [x, i, n], [y])
    b.mark_output(y)
    return b.build()


OPS = ["UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX", "UNSORTED_SEGMENT_MIN"]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_unsorted_segment(op, dtype):
    rng = np.random.default_rng(3)
    for shape, ids_shape, num in [((6, 3), (6,), 4), ((2, 3, 4), (2, 3), 5), ((5,), (5,), 7)]:
        data = unsorted_model(op, dtype, shape, ids_shape, np.array(num, np.int32))
        for _ in range(2):
            x = data_values(rng, dtype, shape)
            if dtype == np.float32:
                x.flat[1] = np.nan
            ids = rng.integers(-2, num, ids_shape).astype(np.int32)  # negative ids are skipped; some segments empty
            check_same(data, [x, ids])


def test_unsorted_segment_runtime_num_segments_and_const_ids():
    rng = np.random.default_rng(4)
    ids = np.array([3, 0, 3, -1, 1], np.int32)
    data = unsorted_model("UNSORTED_SEGMENT_SUM", np.float32, (5, 2), (5,), [4], ids=ids, num_runtime=True)
    for num in (4, 6):
        x = data_values(rng, np.float32, (5, 2))
        ours = run_ours(data, [x, np.array([num], np.int32)])[0]
        ref = run_official(data, [x, np.array([num], np.int32)])[0]
        assert ours.shape == ref.shape and ours.tobytes() == ref.tobytes()


@pytest.mark.parametrize("op", OPS[:1])
def test_unsorted_segment_refuses_large_id(op):
    data = unsorted_model(op, np.float32, (3, 2), (3,), np.array(2, np.int32))
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.ones((3, 2), np.float32))
    it.set_tensor(it.get_input_details()[1]["index"], np.array([0, 2, 1], np.int32))
    with pytest.raises(ValueError, match="UNSORTED_SEGMENT.*out of range"):
        it.invoke()


def test_unsorted_segment_refuses_large_constant_id_at_allocate():
    data = unsorted_model("UNSORTED_SEGMENT_MAX", np.float32, (3, 2), (3,), np.array(2, np.int32),
                          ids=np.array([0, 2, 1], np.int32))
    with pytest.raises(ValueError, match="UNSORTED_SEGMENT_MAX.*out of range"):
        Interpreter(model_content=data).allocate_tensors()
