"""ADD_N, BROADCAST_ARGS, ATAN2, REVERSE_SEQUENCE, BITCAST, BITWISE_XOR, RIGHT_SHIFT, MATRIX_DIAG, MATRIX_SET_DIAG and
BUCKETIZE against the official runtime (integers and data movement bit-exact, float to 1e-6), plus the inputs the
official kernels read out of bounds on (or abort on), which lite-numba refuses with an error naming the op."""

from __future__ import annotations

import numpy as np
import pytest

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close, one_op, require_official, run_official, run_ours
from lite_numba.testing import random_array as rand

require_official()


def check_same(data, inputs, tol=None):
    ours = run_ours(data, inputs)
    ref = run_official(data, inputs)
    assert len(ours) == len(ref)
    for o, r in zip(ours, ref):
        assert (o.dtype, o.shape) == (r.dtype, r.shape)
        if tol is None:
            assert o.tobytes() == r.tobytes()
        else:
            assert_close(o, r, tol)


def refused(data, pattern):
    it = Interpreter(model_content=data)
    with pytest.raises(ValueError, match=pattern):
        it.allocate_tensors()
        it.invoke()


# --- ADD_N -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,n", [(np.float32, 2), (np.float32, 5), (np.int32, 3)])
def test_add_n(dtype, n):
    rng = np.random.default_rng(n)
    shape = (2, 3, 4)
    data = one_op("ADD_N", [(dtype, shape)] * n, (dtype, shape))
    xs = [rand(rng, dtype, shape) for _ in range(n)]
    if dtype == np.float32:
        for x in xs:
            x.flat[0] = -0.0  # -0.0 + -0.0 stays -0.0 in the official kernel
            x.flat[1] = np.float32(3e38)  # each partial sum saturates at FLT_MAX
            x.flat[2] = np.inf
            x.flat[3] = np.nan
        xs[-1].flat[4] = -np.inf
        xs[-1].flat[5] = -3e38
    check_same(data, xs)


def test_add_n_refuses_shape_mismatch():
    refused(one_op("ADD_N", [(np.float32, (2, 3)), (np.float32, (3, 2))], (np.float32, (2, 3))), "ADD_N.*shape")


# --- BROADCAST_ARGS ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_broadcast_args(dtype):
    for s1, s2 in [([2, 1, 3], [4, 1]), ([1], [5, 6, 7]), ([3, 4], [3, 4]), ([0, 1], [1]), ([2, 1, 1, 5], [7, 1])]:
        s1, s2 = np.array(s1, dtype), np.array(s2, dtype)
        data = one_op("BROADCAST_ARGS", [(dtype, s1.shape), (dtype, s2.shape)], (dtype, (max(s1.size, s2.size),)))
        check_same(data, [s1, s2])


def test_broadcast_args_from_shapes_keeps_broadcast_to_static():
    """SHAPE -> BROADCAST_ARGS -> BROADCAST_TO (the converter's dynamic broadcast): every value is known at prepare,
    so the graph stays one compiled call and matches the official runtime."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [3, 1])
    y = b.add_input("y", np.float32, [1, 4])
    sx, sy = b.add_tensor("sx", np.int32, [2]), b.add_tensor("sy", np.int32, [2])
    s = b.add_tensor("s", np.int32, [2])
    o = b.add_tensor("o", np.float32, [3, 4])
    b.add_op("SHAPE", [x], [sx], options={"out_type": "INT32"})
    b.add_op("SHAPE", [y], [sy], options={"out_type": "INT32"})
    b.add_op("BROADCAST_ARGS", [sx, sy], [s])
    b.add_op("BROADCAST_TO", [x, s], [o], version=2)
    b.mark_output(o)
    data = b.build()
    rng = np.random.default_rng(15)
    ins = [rand(rng, np.float32, (3, 1)), rand(rng, np.float32, (1, 4))]
    check_same(data, ins)
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    assert not it.runtime.main.dynamic_nodes


def test_broadcast_args_incompatible():
    """The official kernel aborts the process (TFLITE_CHECK); lite-numba raises."""
    data = one_op("BROADCAST_ARGS", [(np.int32, (2,)), (np.int32, (2,))], (np.int32, (2,)))
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.array([2, 3], np.int32))
    it.set_tensor(it.get_input_details()[1]["index"], np.array([4, 3], np.int32))
    with pytest.raises(ValueError, match="BROADCAST_ARGS"):
        it.invoke()


# --- ATAN2 -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_atan2(dtype):
    rng = np.random.default_rng(1)
    shape = (3, 17)
    y, x = rand(rng, dtype, shape) * 10, rand(rng, dtype, shape)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1.0], dtype)
    y[0, :7], x[0, :7] = special, special[::-1]
    y[1, :7], x[1, :7] = special, special
    data = one_op("ATAN2", [(dtype, shape), (dtype, shape)], (dtype, shape))
    check_same(data, [y, x], tol=1e-6)


def test_atan2_pairs_by_flat_index():
    """The official kernel checks only the ranks: same-size inputs of another shape pair elements by flat index."""
    rng = np.random.default_rng(14)
    y, x = rand(rng, np.float32, (2, 6)), rand(rng, np.float32, (4, 3))
    check_same(one_op("ATAN2", [(np.float32, (2, 6)), (np.float32, (4, 3))], (np.float32, (2, 6))), [y, x])


def test_atan2_refuses_fewer_elements():
    refused(one_op("ATAN2", [(np.float32, (2, 3)), (np.float32, (2, 1))], (np.float32, (2, 3))), "ATAN2.*element count")


# --- BITWISE_XOR / RIGHT_SHIFT -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,shapes", [(np.int8, ((3, 4), (3, 4))), (np.uint16, ((2, 3, 4), (3, 1))),
                                          (np.int32, ((5,), (1,))), (np.uint32, ((1,), (2, 2, 2, 3)))])
def test_bitwise_xor(dtype, shapes):
    rng = np.random.default_rng(4)
    a, b = rand(rng, dtype, shapes[0]), rand(rng, dtype, shapes[1])
    out = np.broadcast_shapes(shapes[0], shapes[1])
    check_same(one_op("BITWISE_XOR", [(dtype, shapes[0]), (dtype, shapes[1])], (dtype, out)), [a, b])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32])
def test_right_shift(dtype):
    rng = np.random.default_rng(5)
    bits = np.dtype(dtype).itemsize * 8
    shape = (4, bits + 8)
    a = rand(rng, dtype, shape)
    lo = -4 if np.dtype(dtype).kind == "i" else 0
    b = np.tile(np.arange(lo, lo + shape[1]), (4, 1)).astype(dtype)  # every shift, below 0 and past bits - 1
    check_same(one_op("RIGHT_SHIFT", [(dtype, shape), (dtype, shape)], (dtype, shape)), [a, b])
    # broadcast shift amount
    s = np.array([[3]], dtype)
    check_same(one_op("RIGHT_SHIFT", [(dtype, shape), (dtype, (1, 1))], (dtype, shape)), [a, s])


@pytest.mark.parametrize("op", ["BITWISE_XOR", "RIGHT_SHIFT"])
def test_bitwise_rank5_and_6_broadcast(op):
    rng = np.random.default_rng(13)
    for sa, sb in [((2, 1, 3, 1, 2), (4, 1, 5, 1)), ((2, 1, 3, 1, 2, 3), (1, 4, 1, 5, 1, 1))]:
        a, b = rand(rng, np.int16, sa), rng.integers(-2, 18, sb).astype(np.int16)
        out = np.broadcast_shapes(sa, sb)
        check_same(one_op(op, [(np.int16, sa), (np.int16, sb)], (np.int16, out)), [a, b])


def test_bitwise_refuses_rank7_broadcast():
    shape = (2, 1, 1, 1, 1, 1, 3)
    refused(one_op("BITWISE_XOR", [(np.int32, shape), (np.int32, (3,))], (np.int32, shape)), "BITWISE_XOR.*rank")


# --- REVERSE_SEQUENCE --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,lens_type,shape,seq_dim,batch_dim", [
    (np.float32, np.int32, (4, 6), 1, 0),
    (np.int64, np.int64, (5, 3, 2), 0, 1),
    (np.int16, np.int32, (2, 3, 5, 4), 2, 0),
    (np.uint8, np.int64, (2, 6, 3, 4), 1, 3),
    (np.int32, np.int32, (3, 2, 4), 2, 1),
])
def test_reverse_sequence(dtype, lens_type, shape, seq_dim, batch_dim):
    rng = np.random.default_rng(6)
    x = rand(rng, dtype, shape)
    n, nb = shape[seq_dim], shape[batch_dim]
    data = one_op("REVERSE_SEQUENCE", [(dtype, shape), (lens_type, (nb,))], (dtype, shape),
                  options={"seq_dim": seq_dim, "batch_dim": batch_dim})
    for _ in range(3):
        lens = rng.integers(-1, n + 1, nb).astype(lens_type)
        lens[0] = n
        check_same(data, [x, lens])


def test_reverse_sequence_refuses_long_sequences():
    """The official kernel checks only the first length and reads out of bounds for the others."""
    data = one_op("REVERSE_SEQUENCE", [(np.float32, (3, 4)), (np.int32, (3,))], (np.float32, (3, 4)),
                  options={"seq_dim": 1, "batch_dim": 0})
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.zeros((3, 4), np.float32))
    it.set_tensor(it.get_input_details()[1]["index"], np.array([4, 5, 1], np.int32))
    with pytest.raises(ValueError, match="REVERSE_SEQUENCE"):
        it.invoke()


# --- BITCAST -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("src,dst,shape,out", [
    (np.float32, np.int8, (2, 3), (2, 3, 4)),
    (np.uint8, np.float32, (3, 4), (3,)),
    (np.int32, np.uint32, (2, 5), (2, 5)),
    (np.float64, np.int16, (3,), (3, 4)),
    (np.int16, np.int64, (2, 4), (2,)),
])
def test_bitcast(src, dst, shape, out):
    rng = np.random.default_rng(8)
    x = rand(rng, src, shape)
    check_same(one_op("BITCAST", [(src, shape)], (dst, out)), [x])


def test_bitcast_refuses_bad_last_dim():
    refused(one_op("BITCAST", [(np.uint8, (2, 3))], (np.float32, (2,))), "BITCAST.*end in 4")


# --- MATRIX_DIAG / MATRIX_SET_DIAG -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype,shape", [(np.float32, (4,)), (np.int8, (2, 3)), (np.int64, (2, 2, 5)),
                                         (np.uint8, (3, 1))])
def test_matrix_diag(dtype, shape):
    rng = np.random.default_rng(9)
    x = rand(rng, dtype, shape)
    check_same(one_op("MATRIX_DIAG", [(dtype, shape)], (dtype, shape + (shape[-1],))), [x])


@pytest.mark.parametrize("dtype,shape", [(np.float32, (3, 3)), (np.int16, (2, 3, 5)), (np.uint8, (2, 2, 5, 3)),
                                         (np.int32, (1, 4))])
def test_matrix_set_diag(dtype, shape):
    rng = np.random.default_rng(10)
    x = rand(rng, dtype, shape)
    d = rand(rng, dtype, shape[:-2] + (min(shape[-2:]),))
    check_same(one_op("MATRIX_SET_DIAG", [(dtype, shape), (dtype, d.shape)], (dtype, shape)), [x, d])


def test_matrix_set_diag_refuses_short_diagonal():
    refused(one_op("MATRIX_SET_DIAG", [(np.float32, (2, 3, 4)), (np.float32, (2, 2))], (np.float32, (2, 3, 4))),
            "MATRIX_SET_DIAG.*fewer than")


# --- BUCKETIZE ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_bucketize(dtype):
    rng = np.random.default_rng(12)
    bounds = [-3.5, -1.0, 0.0, 0.0, 0.1, 2.0, 16777217.0, 1e10]
    if np.dtype(dtype).kind == "f":
        x = (rng.standard_normal(40) * 3).astype(dtype)
        x[:8] = np.array(bounds, dtype)
        x[8:12] = np.array([np.nan, np.inf, -np.inf, -0.0], dtype)
        x[12] = np.float64(0.1)  # above float32(0.1) as a double
    else:
        x = rng.integers(-5, 5, 40).astype(dtype)
        x[:4] = np.array([16777216, 16777217, 16777218, 2 ** 31 - 1], dtype)  # float32 rounding decides
        if dtype == np.int64:
            x[4] = 10 ** 10
    data = one_op("BUCKETIZE", [(dtype, x.shape)], (np.int32, x.shape), options={"boundaries": bounds})
    check_same(data, [x])


def test_bucketize_refuses_unsorted_boundaries():
    refused(one_op("BUCKETIZE", [(np.float32, (3,))], (np.int32, (3,)), options={"boundaries": [1.0, 0.0]}),
            "BUCKETIZE.*sorted")
