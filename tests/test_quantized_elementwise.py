"""Quantized elementwise ops and activations (int8 / uint8 / int16) against the official runtime, bit-exact.

Every model is a one-op model run in the official runtime (BUILTIN_WITHOUT_DEFAULT_DELEGATES) and in ours through
the default resolver (the registry's kernels and version table: what users get; a version the table does not
accept fails the test). Sizes are chosen so that both the official kernels' vector blocks and their scalar tails are
exercised.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import given, settings
from hypothesis import strategies as st
from lite_numba.kernels.elementwise.arithmetic_quantized import process_broadcast_shapes

from lite_numba.builder import ModelBuilder
from lite_numba.testing import prepare_error, require_official, run_official, run_ours

require_official()


def assert_same(model: bytes, inputs) -> None:
    """Ours equals the official runtime bit for bit."""
    ref = run_official(model, inputs)
    ours = run_ours(model, inputs)
    for o, r in zip(ours, ref):
        assert o.dtype == r.dtype and o.shape == r.shape
        diff = np.abs(o.astype(np.int64) - r.astype(np.int64))
        assert diff.max(initial=0) == 0, (
            f"{int((diff > 0).sum())}/{diff.size} elements differ (max step {diff.max()}) at "
            f"{np.argwhere(diff > 0)[:5].tolist()}: ours {o[diff > 0][:5]}, official {r[diff > 0][:5]}")


def unary_model(op, dtype, shape, qin, qout, out_dtype=None, options=None, version=1) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape, quant=qin)
    y = b.add_tensor("y", out_dtype or dtype, shape, quant=qout)
    b.add_op(op, [x], [y], options=options, version=version)
    b.mark_output(y)
    return b.build()


def binary_model(op, dtype, s1, s2, q1, q2, qout, options=None, version=1) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", dtype, s1, quant=q1)
    y = b.add_input("y", dtype, s2, quant=q2)
    z = b.add_tensor("z", dtype, list(np.broadcast_shapes(tuple(s1), tuple(s2))), quant=qout)
    b.add_op(op, [x, y], [z], options=options, version=version)
    b.mark_output(z)
    return b.build()


def random_values(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, size=shape).astype(dtype)


def all_values(dtype, extra=0, rng=None):
    """Every value of an 8-bit type (plus `extra` random ones, so the size is not a multiple of the blocks)."""
    info = np.iinfo(dtype)
    v = np.arange(info.min, int(info.max) + 1)
    if extra:
        v = np.concatenate([v, rng.integers(info.min, int(info.max) + 1, extra)])
    return v.astype(dtype)


VERSION = {np.int8: 2, np.uint8: 1, np.int16: 3}
# op versions the official runtime registers for 8-bit and int16 quantized unary ops
VERSION8 = {"ELU": 1, "HARD_SWISH": 1, "RELU_N1_TO_1": 1, "RELU_0_TO_1": 1, "LEAKY_RELU": 1}
VERSION16 = {"EXP": 2, "GELU": 2, "LOG": 2, "SQRT": 2, "LEAKY_RELU": 2}
OFFSET = {np.int8: 0, np.uint8: 128, np.int16: 0}


def qparams(draw, dtype, lo=-2.3, hi=-0.3):
    """(scale, zero point) for `dtype`: int16 is symmetric with smaller scales."""
    if dtype == np.int16:
        return (10.0 ** draw(st.floats(lo - 2, hi - 2)), 0)
    return (10.0 ** draw(st.floats(lo, hi)), draw(st.integers(-40, 40)) + OFFSET[dtype])


# pairs of shapes covering the official kernels' broadcast categories (none, fivefold both ways, generic)
SHAPE_PAIRS = [
    ([2, 3, 37], [2, 3, 37]), ([4, 40], [1, 40]), ([4, 40], [4, 1]), ([3, 33], [1]), ([1], [3, 33]),
    ([2, 3, 20], [3, 1]), ([2, 1, 21], [1, 5, 21]), ([3, 1, 5], [1, 7, 1]), ([17], [1, 17]), ([6], [6]),
]


@settings(max_examples=scaled(25), deadline=None)
@given(data=st.data())
def test_add_sub_mul_all_types(data):
    """ADD/SUB/MUL int8/uint8/int16 with broadcasting and fused activations."""
    op = data.draw(st.sampled_from(["ADD", "SUB", "MUL"]))
    dtype = data.draw(st.sampled_from([np.int8, np.uint8, np.int16]))
    s1, s2 = data.draw(st.sampled_from(SHAPE_PAIRS))
    q1, q2, qo = (qparams(data.draw, dtype) for _ in range(3))
    act = data.draw(st.sampled_from(["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]))
    options = {"fused_activation_function": act}
    if dtype == np.int16 and op != "MUL":
        options["pot_scale_int16"] = False
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    model = binary_model(op, dtype, s1, s2, q1, q2, qo, options, VERSION[dtype])
    assert_same(model, [random_values(rng, dtype, s1), random_values(rng, dtype, s2)])


@settings(max_examples=scaled(20), deadline=None)
@given(data=st.data())
def test_add_mul_saturating_output(data):
    """Tiny output scales: the official vector code narrows to int16 (wrapping or saturating) before adding the
    zero point, so out-of-range results differ from a plain clamp."""
    op = data.draw(st.sampled_from(["ADD", "MUL"]))
    dtype = data.draw(st.sampled_from([np.int8, np.uint8]))
    s1, s2 = data.draw(st.sampled_from(SHAPE_PAIRS[:6]))
    q1, q2 = qparams(data.draw, dtype), qparams(data.draw, dtype)
    qo = qparams(data.draw, dtype, -5.0, -3.5)
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    model = binary_model(op, dtype, s1, s2, q1, q2, qo, None, VERSION[dtype])
    assert_same(model, [random_values(rng, dtype, s1), random_values(rng, dtype, s2)])


@pytest.mark.parametrize("op", ["ADD", "SUB"])
@pytest.mark.parametrize("shifts", [(0, 0), (-1, 0), (0, -3)])
def test_add_sub_int16_power_of_two_scales(op, shifts):
    rng = np.random.default_rng(3)
    q1, q2, qo = (2.0 ** (-12 + shifts[0]), 0), (2.0 ** (-12 + shifts[1]), 0), (2.0 ** -12, 0)
    model = binary_model(op, np.int16, [3, 41], [3, 41], q1, q2, qo, {"pot_scale_int16": True}, 3)
    assert_same(model, [random_values(rng, np.int16, [3, 41]), random_values(rng, np.int16, [3, 41])])


@settings(max_examples=scaled(20), deadline=None)
@given(data=st.data())
def test_squared_difference_maximum_minimum(data):
    op = data.draw(st.sampled_from(["SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM"]))
    dtype = np.int8 if op == "SQUARED_DIFFERENCE" else data.draw(st.sampled_from([np.int8, np.uint8, np.int16]))
    s1, s2 = data.draw(st.sampled_from(SHAPE_PAIRS))
    q1, q2, qo = (qparams(data.draw, dtype) for _ in range(3))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    model = binary_model(op, dtype, s1, s2, q1, q2, qo, None, VERSION[dtype] if op != "SQUARED_DIFFERENCE" else 2)
    assert_same(model, [random_values(rng, dtype, s1), random_values(rng, dtype, s2)])


@settings(max_examples=scaled(25), deadline=None)
@given(data=st.data())
def test_table_activations_8bit(data):
    """LUT and integer activations over every input value of int8/uint8."""
    op = data.draw(st.sampled_from(["LOGISTIC", "TANH", "ELU", "GELU", "RELU", "RELU6", "RELU_N1_TO_1",
                                    "RELU_0_TO_1", "LEAKY_RELU", "HARD_SWISH", "EXP", "LOG", "RSQRT", "SQRT",
                                    "ABS"]))
    int8_only = op in ("ELU", "EXP", "LOG", "RSQRT", "SQRT", "ABS")
    dtype = np.int8 if int8_only else data.draw(st.sampled_from([np.int8, np.uint8]))
    qin, qout = qparams(data.draw, dtype), qparams(data.draw, dtype)
    if op == "LOGISTIC":
        qout = (1.0 / 256, -128 if dtype == np.int8 else 0)
    if op in ("RSQRT", "SQRT", "LOG"):
        qin = (qin[0], -128)  # every input in the domain
    options = None
    if op == "GELU":
        options = {"approximate": data.draw(st.booleans())}
    if op == "LEAKY_RELU":
        options = {"alpha": data.draw(st.floats(-0.9, 0.9))}
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    x = all_values(dtype, extra=7, rng=rng)
    assert_same(unary_model(op, dtype, [x.size], qin, qout, options=options, version=VERSION8.get(op, 2)), [x])


@settings(max_examples=scaled(20), deadline=None)
@given(data=st.data())
def test_int16_activations(data):
    """int16: LOGISTIC/TANH (power-of-two and general input scales), LUT ops, RELU*, LEAKY_RELU."""
    op = data.draw(st.sampled_from(["LOGISTIC", "TANH", "EXP", "GELU", "RSQRT", "LOG", "SQRT", "ABS", "RELU",
                                    "RELU6", "LEAKY_RELU"]))
    qin, qout = qparams(data.draw, np.int16), qparams(data.draw, np.int16)
    if op in ("LOGISTIC", "TANH"):
        qout = (2.0 ** -15, 0)
        if data.draw(st.booleans()):
            qin = (2.0 ** data.draw(st.sampled_from([-12, -11] if op == "TANH" else [-12])), 0)
    options = {"alpha": data.draw(st.floats(-0.9, 0.9))} if op == "LEAKY_RELU" else None
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    x = random_values(rng, np.int16, [data.draw(st.integers(1, 70))])
    if op in ("RSQRT", "SQRT"):
        x = np.abs(x.astype(np.int32)).astype(np.int16)
    model = unary_model(op, np.int16, list(x.shape), qin, qout, options=options, version=VERSION16.get(op, 3))
    assert_same(model, [x])


@settings(max_examples=scaled(25), deadline=None)
@given(data=st.data())
def test_softmax(data):
    """SOFTMAX int8/uint8 -> 8-bit or int16, int16 -> int16, with beta; LOG_SOFTMAX int8/uint8."""
    kind = data.draw(st.sampled_from(["i8", "u8", "i8->i16", "u8->i16", "i16", "log_i8", "log_u8"]))
    shape = data.draw(st.sampled_from([[2, 10], [1, 1000], [3, 4, 17], [5, 1]]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    beta = data.draw(st.sampled_from([1.0, 0.5, 2.7]))
    din = {"i8": np.int8, "u8": np.uint8, "i8->i16": np.int8, "u8->i16": np.uint8, "i16": np.int16,
           "log_i8": np.int8, "log_u8": np.uint8}[kind]
    qin = qparams(data.draw, din, -2.0, 0.0)
    x = random_values(rng, din, shape)
    if kind.startswith("log"):
        qout = (16.0 / 256, 127 if din == np.int8 else 255)
        assert_same(unary_model("LOG_SOFTMAX", din, shape, qin, qout, version=2), [x])
        return
    dout = np.int16 if kind.endswith("16") else din
    qout = {np.int8: (1 / 256, -128), np.uint8: (1 / 256, 0), np.int16: (1 / 32768, 0)}[dout]
    model = unary_model("SOFTMAX", din, shape, qin, qout, out_dtype=dout, options={"beta": beta}, version=2)
    assert_same(model, [x])


@settings(max_examples=scaled(15), deadline=None)
@given(data=st.data())
def test_prelu(data):
    dtype = data.draw(st.sampled_from([np.int8, np.uint8, np.int16]))
    alpha_dtype = np.int8 if dtype == np.int16 else dtype
    alpha_shape = data.draw(st.sampled_from([[1, 1, 3], [4, 6, 3], [3], [6, 1]]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    qin, qout, qa = qparams(data.draw, dtype), qparams(data.draw, dtype), qparams(data.draw, alpha_dtype)
    b = ModelBuilder()
    x = b.add_input("x", dtype, [1, 4, 6, 3], quant=qin)
    a = b.add_const("alpha", random_values(rng, alpha_dtype, alpha_shape), quant=qa)
    y = b.add_tensor("y", dtype, [1, 4, 6, 3], quant=qout)
    b.add_op("PRELU", [x, a], [y])
    b.mark_output(y)
    assert_same(b.build(), [random_values(rng, dtype, [1, 4, 6, 3])])


def test_process_broadcast_shapes():
    assert process_broadcast_shapes((2, 3), (2, 3)) == ("none", [1, 1, 1, 1, 1])
    assert process_broadcast_shapes((3,), (1, 3)) == ("none", [1, 1, 1, 1, 1])
    assert process_broadcast_shapes((4, 40), (1, 40)) == ("second", [1, 1, 1, 4, 40])
    assert process_broadcast_shapes((4, 1), (4, 40)) == ("first", [1, 1, 4, 40, 1])
    assert process_broadcast_shapes((3, 1, 5), (1, 7, 1))[0] == "generic"


# --- errors ---------------------------------------------------------------------------------------------------

def _prepare_error(model: bytes) -> str:
    return prepare_error(model, invoke=True)  # built, allocated and invoked with no input set


def test_error_softmax_int8_output_zero_point():
    b = ModelBuilder()
    x = b.add_input("x", np.int8, [2, 5], quant=(0.1, 0))
    y = b.add_tensor("y", np.int8, [2, 5], quant=(1 / 256, 0))
    b.add_op("SOFTMAX", [x], [y], options={"beta": 1.0}, version=2)
    b.mark_output(y)
    msg = _prepare_error(b.build())
    assert "SOFTMAX" in msg and "zero point must be -128" in msg


def test_error_int16_add_nonzero_zero_point():
    msg = _prepare_error(binary_model("ADD", np.int16, [4], [4], (0.01, 3), (0.01, 0), (0.01, 0), None, 3))
    assert "ADD" in msg and "zero point 0" in msg


def test_error_add_output_scale_too_small():
    msg = _prepare_error(binary_model("ADD", np.int8, [4], [4], (1.0, 0), (1.0, 0), (1e-7, 0), None, 2))
    assert "ADD" in msg and "output multiplier" in msg


def test_error_log_softmax_output_scale():
    msg = _prepare_error(unary_model("LOG_SOFTMAX", np.int8, [2, 4], (0.1, 0), (0.1, 127), version=2))
    assert "LOG_SOFTMAX" in msg and "16/256" in msg


def test_error_squared_difference_uint8():
    msg = _prepare_error(binary_model("SQUARED_DIFFERENCE", np.uint8, [4], [4], (0.1, 128), (0.1, 128),
                                      (0.1, 128)))
    assert "SQUARED_DIFFERENCE" in msg and "uint8" in msg


def test_error_rsqrt_negative_input_at_run_time():
    model = unary_model("RSQRT", np.int8, [8], (0.05, 0), (0.05, 0), version=2)
    x = np.array([1, 2, 3, -4, 5, 6, 7, 8], np.int8)
    with pytest.raises(RuntimeError, match="Rsqrt is only defined for positive values"):
        run_official(model, [x])
    with pytest.raises((ValueError, RuntimeError), match="RSQRT: input is negative"):
        run_ours(model, [x])


@settings(max_examples=scaled(12), deadline=None)
@given(data=st.data())
def test_add_mul_8bit_pair_tables(data):
    """Same-shape 8-bit ADD / MUL of at least PAIR_TABLE_MIN_SIZE elements run as a 256 x 256 table of the same
    arithmetic (vector blocks and scalar tail tables); every pair of values occurs, results equal the official."""
    op = data.draw(st.sampled_from(["ADD", "MUL"]))
    dtype = data.draw(st.sampled_from([np.int8, np.uint8]))
    q1, q2 = qparams(data.draw, dtype), qparams(data.draw, dtype)
    qo = qparams(data.draw, dtype, -5.0, -0.3)
    act = data.draw(st.sampled_from(["NONE", "RELU", "RELU6"]))
    shape = [1, 257, 259]  # 66563 elements: every pair once and more, and a scalar tail (not a multiple of 16)
    raw = np.arange(257 * 259, dtype=np.int64)
    x = (raw // 256 % 256).astype(np.uint8).view(dtype).reshape(shape)
    y = (raw % 256).astype(np.uint8).view(dtype).reshape(shape)
    model = binary_model(op, dtype, shape, shape, q1, q2, qo, {"fused_activation_function": act}, VERSION[dtype])
    assert_same(model, [x, y])


@settings(max_examples=scaled(16), deadline=None)
@given(data=st.data())
def test_add_mul_8bit_broadcast_pair_tables(data):
    """Fivefold-broadcast 8-bit ADD / MUL of at least PAIR_TABLE_MIN_SIZE elements (a LayerNorm's x * rsqrt(var)
    [17, 64] x [17, 1], a scalar scale, a row broadcast over rows, either input broadcasting, runs with scalar tails)
    run as tables of binary_neon_op's stages (binary_pair_broadcast); results equal the official."""
    op = data.draw(st.sampled_from(["ADD", "MUL"]))
    dtype = data.draw(st.sampled_from([np.int8, np.uint8]))
    s1, s2 = data.draw(st.sampled_from([([17, 64], [17, 1]), ([17, 1], [17, 64]), ([4, 17, 17], [1]),
                                        ([1], [4, 17, 17]), ([4, 80], [1, 80]), ([1, 80], [4, 80]),
                                        ([5, 67], [1, 67]), ([3, 99], [3, 1])]))
    q1, q2 = qparams(data.draw, dtype), qparams(data.draw, dtype)
    qo = qparams(data.draw, dtype, data.draw(st.sampled_from([-5.0, -2.0])), -0.3)
    act = data.draw(st.sampled_from(["NONE", "RELU", "RELU6"]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    model = binary_model(op, dtype, s1, s2, q1, q2, qo, {"fused_activation_function": act}, VERSION[dtype])
    assert_same(model, [random_values(rng, dtype, s1), random_values(rng, dtype, s2)])
