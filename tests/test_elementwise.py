"""Elementwise maths, comparison, logic and select kernels against the official runtime (builtin kernels).

One-op models are built with ModelBuilder and run in both runtimes on the same inputs: float outputs must agree
within 1e-5 (relative to max|ref|), integer and bool outputs exactly. Hypothesis varies shapes (broadcasting up to
rank 4), values (with NaN/inf/halves mixed in) and parameters; structurally different cases are kept few because
each (kernel, dtype, loop) combination compiles once, and Hypothesis runs derandomized so that a second run finds
every compiled kernel and runner in the caches.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from lite_numba import Interpreter
from lite_numba.testing import assert_close, one_op, run_both_single, run_official, run_ours

SPECIAL = np.array([0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1.0, -1.0, np.nan, np.inf, -np.inf], np.float32)


def op_model(op, inputs, out_dtype, out_shape, options=None, version=1, out_quant=None) -> bytes:
    """A model of one op (lite_numba.testing.one_op). `inputs`: (dtype, shape) or (dtype, shape, quant) for graph
    inputs, arrays for constants."""
    return one_op(op, inputs, (out_dtype, out_shape, out_quant), options, version)


def check(op, arrays, out_dtype, options=None, version=1, quants=None, out_shape=None, tol=1e-5):
    """Run `op` on graph inputs `arrays` in both runtimes and compare."""
    quants = quants or [None] * len(arrays)
    if out_shape is None:
        out_shape = np.broadcast_shapes(*[a.shape for a in arrays])
    data = op_model(op, [(a.dtype, a.shape, q) for a, q in zip(arrays, quants)], out_dtype, out_shape, options,
                  version)
    ours, ref = run_both_single(data, arrays)
    if ref.dtype.kind in "fc":
        assert ours.shape == ref.shape, (ours.shape, ref.shape)
        assert_close(ours.reshape(-1), ref.reshape(-1), tol)  # reshaped: assert_close fails on 0-d arrays
    else:
        assert ours.dtype == ref.dtype and ours.shape == ref.shape, (ours.dtype, ours.shape, ref.dtype, ref.shape)
        assert np.array_equal(ours, ref), f"{op}: ours {ours} vs ref {ref}"
    return ours


def floats(rng, shape, lo=-4.0, hi=4.0, special=True) -> np.ndarray:
    a = np.asarray(rng.uniform(lo, hi, size=shape), np.float32)
    if special and a.size:
        idx = rng.choice(a.size, size=min(a.size, 3), replace=False)
        a.flat[idx] = rng.choice(SPECIAL, size=len(idx))
    return a


def ints(rng, shape, dtype, lo=None, hi=None) -> np.ndarray:
    info = np.iinfo(dtype)
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    return np.asarray(rng.integers(lo, hi, size=shape, endpoint=True), dtype)


@st.composite
def broadcast_shapes(draw, n=2, max_rank=4):
    """n shapes that broadcast together (leading dims dropped, some dims 1)."""
    out = draw(st.lists(st.integers(1, 4), min_size=0, max_size=max_rank))
    shapes = []
    for _ in range(n):
        drop = draw(st.integers(0, len(out)))
        shapes.append(tuple(d if draw(st.booleans()) else 1 for d in out[drop:]))
    return shapes


SEEDS = st.integers(0, 2**31 - 1)
SHAPES = st.lists(st.integers(1, 5), min_size=0, max_size=4).map(tuple)


# --- unary maths -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["EXP", "LOG", "SQRT", "RSQRT", "SQUARE", "ABS", "NEG", "SIGN", "SIN", "COS", "FLOOR",
                                "CEIL", "ROUND"])
@settings(max_examples=scaled(5), deadline=None)
@given(shape=SHAPES, seed=SEEDS)
def test_unary_float(op, shape, seed):
    rng = np.random.default_rng(seed)
    check(op, [floats(rng, shape, -6, 6)], np.float32)


@pytest.mark.parametrize("op,dtype,version", [
    ("ABS", np.int32, 5), ("ABS", np.int16, 4), ("NEG", np.int8, 1), ("NEG", np.int16, 1), ("NEG", np.int32, 1),
    ("NEG", np.int64, 1), ("SIGN", np.int32, 2), ("SIGN", np.float64, 1)])
def test_unary_integer_and_double(op, dtype, version):
    rng = np.random.default_rng(7)
    if np.dtype(dtype).kind == "f":
        x = np.concatenate([rng.normal(size=20), [0.0, -0.0, np.inf, -np.inf]]).astype(dtype)
    else:
        info = np.iinfo(dtype)
        x = np.concatenate([ints(rng, 19, dtype), np.array([0, 1, -1, info.min, info.max], dtype)])
    check(op, [x.reshape(4, 6)], dtype, version=version)


def test_round_is_half_to_even():
    x = np.array([-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 2.4999998, 8388609.0, 1e30, np.nan, -np.inf],
                 np.float32)
    out = check("ROUND", [x], np.float32)
    assert list(out[:8]) == [-4, -2, -2, -0, 0, 2, 2, 4]


def test_neg_of_quantized_int8_is_raw():
    # the official NEG negates the stored int8 values whatever the quantization
    x = np.array([-128, -5, 0, 7, 127], np.int8)
    data = op_model("NEG", [(np.int8, [5], (0.5, 3))], np.int8, [5], out_quant=(0.25, -1))
    assert np.array_equal(run_ours(data, [x])[0], run_official(data, [x])[0])


# --- arithmetic --------------------------------------------------------------------------------------------------

ACTS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]


@settings(max_examples=scaled(25), deadline=None)
@given(op=st.sampled_from(["ADD", "SUB", "MUL", "DIV"]), act=st.sampled_from(ACTS), shapes=broadcast_shapes(),
       seed=SEEDS)
def test_arithmetic_float(op, act, shapes, seed):
    rng = np.random.default_rng(seed)
    x, y = (floats(rng, s) for s in shapes)
    check(op, [x, y], np.float32, {"fused_activation_function": act})


def test_float_results_clamp_to_float_max():
    # TFLite clamps float ADD/SUB/MUL/DIV to [-FLT_MAX, FLT_MAX] even without activation: 1/0 is FLT_MAX, not inf
    x = np.array([3e38, 1, -1, 0, np.nan, 1, 2e38, -3e38], np.float32)
    y = np.array([3e38, 0, 0, 0, 1, np.inf, 3, 3e38], np.float32)
    for op in ("ADD", "SUB", "MUL", "DIV"):
        for act in ("NONE", "RELU"):
            check(op, [x, y], np.float32, {"fused_activation_function": act})


@settings(max_examples=scaled(20), deadline=None)
@given(case=st.sampled_from([("ADD", np.int32, 1), ("ADD", np.int64, 4), ("ADD", np.int16, 5), ("SUB", np.int32, 1),
                             ("SUB", np.int64, 4), ("MUL", np.int32, 1), ("MUL", np.int64, 5),
                             ("MUL", np.int16, 7), ("MUL", np.uint32, 7)]),
       act=st.sampled_from(ACTS), shapes=broadcast_shapes(), small=st.booleans(), seed=SEEDS)
def test_arithmetic_integer_wraps_then_clamps(case, act, shapes, small, seed):
    op, dtype, version = case
    rng = np.random.default_rng(seed)
    lo, hi = (-9, 9) if small else (None, None)  # full range: the official kernels wrap in the tensor's type
    if np.dtype(dtype).kind == "u":
        lo = 0
    x, y = (ints(rng, s, dtype, lo, hi) for s in shapes)
    check(op, [x, y], dtype, {"fused_activation_function": act}, version=version)


@settings(max_examples=scaled(10), deadline=None)
@given(act=st.sampled_from(ACTS), shapes=broadcast_shapes(), seed=SEEDS)
def test_div_int32_truncates(act, shapes, seed):
    rng = np.random.default_rng(seed)
    x = ints(rng, shapes[0], np.int32, -(2**31) + 1)  # INT_MIN / -1 traps in the official runtime
    y = ints(rng, shapes[1], np.int32, -50, 50)
    y[y == 0] = 3
    check("DIV", [x, y], np.int32, {"fused_activation_function": act})


def test_mul_complex64():
    rng = np.random.default_rng(3)
    x = (rng.normal(size=(2, 3)) + 1j * rng.normal(size=(2, 3))).astype(np.complex64)
    y = (rng.normal(size=(3,)) + 1j * rng.normal(size=(3,))).astype(np.complex64)
    check("MUL", [x, y], np.complex64, version=6)
    check("MUL", [x, x], np.complex64, version=6)


# --- other binary ops --------------------------------------------------------------------------------------------

@settings(max_examples=scaled(25), deadline=None)
@given(case=st.sampled_from([
    ("SQUARED_DIFFERENCE", np.float32, 1), ("SQUARED_DIFFERENCE", np.int32, 1),
    ("MAXIMUM", np.float32, 1), ("MINIMUM", np.float32, 1), ("MAXIMUM", np.int64, 1), ("MINIMUM", np.int8, 2),
    ("MAXIMUM", np.int16, 4),
    ("FLOOR_DIV", np.float32, 2), ("FLOOR_DIV", np.int32, 1), ("FLOOR_DIV", np.int8, 3), ("FLOOR_DIV", np.int16, 3),
    ("FLOOR_MOD", np.float32, 1), ("FLOOR_MOD", np.int32, 1), ("FLOOR_MOD", np.int64, 1), ("FLOOR_MOD", np.int8, 2),
]), shapes=broadcast_shapes(), seed=SEEDS)
def test_binary_maths(case, shapes, seed):
    op, dtype, version = case
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        x = floats(rng, shapes[0], -20, 20, special=op.startswith("M"))
        y = floats(rng, shapes[1], -6, 6, special=op.startswith("M"))
        if op.startswith("FLOOR"):
            y[np.abs(y) < 0.01] = 1.25  # FLOOR_DIV traps on 0 (FLOOR_MOD gives NaN: covered below)
    else:
        info = np.iinfo(dtype)
        x = ints(rng, shapes[0], dtype, info.min + 1)  # INT_MIN % -1 traps in the official runtime
        y = ints(rng, shapes[1], dtype, -9, 9) if op.startswith("FLOOR") else ints(rng, shapes[1], dtype)
        if op.startswith("FLOOR"):
            y[y == 0] = -4
    check(op, [x, y], dtype, version=version)


def test_floor_mod_float_by_zero_is_nan_and_signs_follow_divisor():
    x = np.array([7, -7, 7, -7, 7.5, -0.0, 5], np.float32)
    y = np.array([2, 2, -2, -2, -2, 3, 0], np.float32)
    check("FLOOR_MOD", [x, y], np.float32)


def test_maximum_minimum_nan_follow_the_official_ternary():
    x = np.array([np.nan, 1, np.nan, -0.0, 0.0], np.float32)
    y = np.array([1, np.nan, np.nan, 0.0, -0.0], np.float32)
    for op in ("MAXIMUM", "MINIMUM"):
        check(op, [x, y], np.float32)


@settings(max_examples=scaled(20), deadline=None)
@given(shapes=broadcast_shapes(), exp_kind=st.sampled_from(["tensor", "int", "near_int", "fraction", "zero"]),
       dtype=st.sampled_from([np.float32, np.int32]), seed=SEEDS)
def test_pow(shapes, exp_kind, dtype, seed):
    rng = np.random.default_rng(seed)
    if exp_kind != "tensor":
        shapes = [shapes[0] or (3,), (1,)]  # a single exponent: the optimized kernel's repeated-squaring path
    if dtype == np.float32:
        x = floats(rng, shapes[0], 0.1, 4, special=False)
        x.flat[::3] *= -1
        e = {"tensor": rng.uniform(-3, 3, shapes[1]), "int": rng.integers(1, 6, shapes[1]),
             "near_int": rng.integers(1, 6, shapes[1]) + 4e-6, "fraction": rng.uniform(0.1, 3, shapes[1]),
             "zero": np.zeros(shapes[1])}[exp_kind]
        y = np.asarray(e, np.float32)
    else:
        x = ints(rng, shapes[0], np.int32, -12, 12)
        y = ints(rng, shapes[1], np.int32, 0, 8)
        if exp_kind == "zero":
            y[...] = 0
    check("POW", [x, y], dtype, tol=1e-5)


def test_pow_int32_overflow_like_the_official_kernel():
    x = np.array([3, -2, 5, 2, 7], np.int32)
    check("POW", [x, np.array([31], np.int32)], np.int32)  # repeated squaring: wraps
    check("POW", [x, np.array([31, 33, 14, 31, 2], np.int32)], np.int32)  # double pow: INT_MIN on overflow
    check("POW", [np.array([1e20, -2, 5], np.float32), np.array([2], np.float32)], np.float32)  # clamps


# --- comparisons and logic ---------------------------------------------------------------------------------------

COMPARISONS = ["EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"]


@settings(max_examples=scaled(25), deadline=None)
@given(op=st.sampled_from(COMPARISONS), dtype=st.sampled_from([np.float32, np.int32, np.int64, np.int16, np.bool_]),
       shapes=broadcast_shapes(), seed=SEEDS)
def test_comparison_raw(op, dtype, shapes, seed):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_ and op not in ("EQUAL", "NOT_EQUAL"):
        dtype = np.int32
    if dtype == np.int16 and op == "NOT_EQUAL":
        dtype = np.int64  # the official NOT_EQUAL leaves a non-quantized int16 output unwritten
    version = {np.int16: 5 if op == "EQUAL" else 3}.get(dtype, 1)
    if op in ("GREATER", "LESS_EQUAL") and version == 3:
        version = 1  # their int16 support has no version of its own
    x, y = (np.asarray(rng.integers(-2, 3, size=s), dtype) for s in shapes)
    if dtype == np.float32 and x.size:
        x.flat[0] = np.nan
    check(op, [x, y], np.bool_, version=version)


@settings(max_examples=scaled(25), deadline=None)
@given(op=st.sampled_from(COMPARISONS), dtype=st.sampled_from([np.int8, np.uint8]), shapes=broadcast_shapes(),
       scales=st.tuples(st.floats(1e-3, 6.0), st.floats(1e-3, 6.0)).filter(lambda s: 1.0 not in s),
       zps=st.tuples(st.integers(-20, 20), st.integers(-20, 20)), seed=SEEDS)
def test_comparison_quantized_rescales(op, dtype, shapes, scales, zps, seed):
    # int8/uint8 comparisons rescale both sides ((q - zp) << 8 times a fixed-point scale) before comparing
    rng = np.random.default_rng(seed)
    off = 128 if dtype == np.uint8 else 0
    x, y = (ints(rng, s, dtype) for s in shapes)
    if x.size and y.size:
        y.flat[0] = x.flat[0]
    quants = [(scales[0], zps[0] + off), (scales[1], zps[1] + off)]
    check(op, [x, y], np.bool_, version=2 if dtype == np.int8 else 1, quants=quants)


def test_quantized_int16_equality_rescales_ordering_is_raw():
    rng = np.random.default_rng(5)
    x = ints(rng, (3, 8), np.int16, -3000, 3000)
    y = (x + rng.integers(-2, 3, size=(3, 8))).astype(np.int16)
    for op in ("EQUAL", "NOT_EQUAL"):
        check(op, [x, y], np.bool_, version=5 if op == "EQUAL" else 4, quants=[(0.001, 0), (0.0011, 0)])
    # ...while the ordering comparisons on int16 compare the raw values, quantized or not
    check("LESS", [x, y], np.bool_, version=3, quants=[(0.5, 0), (0.001, 0)])


@settings(max_examples=scaled(10), deadline=None)
@given(op=st.sampled_from(["LOGICAL_AND", "LOGICAL_OR"]), shapes=broadcast_shapes(), seed=SEEDS)
def test_logical_binary(op, shapes, seed):
    rng = np.random.default_rng(seed)
    check(op, [rng.random(s) < 0.5 for s in shapes], np.bool_)


@settings(max_examples=scaled(5), deadline=None)
@given(shape=SHAPES, seed=SEEDS)
def test_logical_not(shape, seed):
    check("LOGICAL_NOT", [np.random.default_rng(seed).random(shape) < 0.5], np.bool_)


# --- select ------------------------------------------------------------------------------------------------------

def _values(rng, shape, dtype):
    if np.dtype(dtype).kind == "f":
        return floats(rng, shape)
    if np.dtype(dtype).kind == "b":
        return rng.random(shape) < 0.5
    return ints(rng, shape, dtype)


@settings(max_examples=scaled(20), deadline=None)
@given(shapes=broadcast_shapes(n=3), dtype=st.sampled_from([np.float32, np.int8, np.int16, np.int64, np.bool_]),
       seed=SEEDS)
def test_select_v2_broadcasts_all_three(shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    c = rng.random(shapes[0]) < 0.5
    check("SELECT_V2", [c, _values(rng, shapes[1], dtype), _values(rng, shapes[2], dtype)], dtype)


@settings(max_examples=scaled(12), deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple),
       cond=st.sampled_from(["same", "rank1", "scalar"]), dtype=st.sampled_from([np.float32, np.int32, np.uint8]),
       seed=SEEDS)
def test_select_v1_condition_forms(shape, cond, dtype, seed):
    rng = np.random.default_rng(seed)
    c_shape = {"same": shape, "rank1": shape[:1], "scalar": ()}[cond]
    c = rng.random(c_shape) < 0.5
    check("SELECT", [c, _values(rng, shape, dtype), _values(rng, shape, dtype)], dtype, out_shape=shape)


def test_select_of_quantized_int8_copies_raw_values():
    rng = np.random.default_rng(2)
    c = rng.random((2, 5)) < 0.5
    x, y = ints(rng, (2, 5), np.int8), ints(rng, (1, 5), np.int8)
    data = op_model("SELECT_V2", [(np.bool_, [2, 5]), (np.int8, [2, 5], (0.1, 3)), (np.int8, [1, 5], (0.1, 3))],
                  np.int8, [2, 5], out_quant=(0.1, 3))
    assert np.array_equal(run_ours(data, [c, x, y])[0], run_official(data, [c, x, y])[0])


# --- errors ------------------------------------------------------------------------------------------------------

def _prepare_fails(op, inputs, out_dtype, out_shape, match, options=None, version=1):
    data = op_model(op, inputs, out_dtype, out_shape, options, version)
    with pytest.raises((ValueError, RuntimeError), match=match):
        Interpreter(model_content=data).allocate_tensors()


def _invoke_fails(op, arrays, out_dtype, match, version=1):
    data = op_model(op, [(a.dtype, a.shape) for a in arrays], out_dtype,
                    np.broadcast_shapes(*[a.shape for a in arrays]), version=version)
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    for d, a in zip(it.get_input_details(), arrays):
        it.set_tensor(d["index"], a)
    with pytest.raises(ValueError, match=match):
        it.invoke()


def test_prepare_errors_name_the_op():
    f32, i32 = np.float32, np.int32
    _prepare_fails("ADD", [(f32, [2, 3]), (f32, [4])], f32, [2, 3], "ADD.*cannot be broadcast")
    _prepare_fails("MUL", [(f32, [2, 3]), (i32, [2, 3])], f32, [2, 3], "MUL.*input types differ")
    _prepare_fails("SUB", [(np.int16, [3]), (np.int16, [3])], np.int16, [3], "SUB.*int16")
    _prepare_fails("ADD", [(f32, [2, 1, 1, 1, 1, 1, 2]), (f32, [1, 2, 1, 1, 1, 1, 1])], f32, [2, 2, 1, 1, 1, 1, 2],
                   "ADD.*rank 6")
    _prepare_fails("MUL", [(np.complex64, [2]), (np.complex64, [2])], np.complex64, [2], "MUL.*complex64",
                   {"fused_activation_function": "RELU"}, 6)
    _prepare_fails("ADD", [(f32, [3]), (f32, [3])], i32, [3], "ADD.*expected float32")
    _prepare_fails("EXP", [(i32, [3])], i32, [3], "EXP.*int32")
    _prepare_fails("LESS", [(np.bool_, [3]), (np.bool_, [3])], np.bool_, [3], "LESS.*bool")
    _prepare_fails("EQUAL", [(np.int8, [3]), (np.int8, [3])], np.bool_, [3], "EQUAL.*quantized", version=2)
    _prepare_fails("EQUAL", [(np.int8, [3], (1.0, 0)), (np.int8, [3], (1.0, 0))], np.bool_, [3], "EQUAL.*scale 1.0",
                   version=2)
    _prepare_fails("LOGICAL_AND", [(f32, [3]), (f32, [3])], np.bool_, [3], "LOGICAL_AND.*float32")
    _prepare_fails("SELECT", [(f32, [3]), (f32, [3]), (f32, [3])], f32, [3], "SELECT.*float32")
    _prepare_fails("SELECT", [(np.bool_, [2, 3]), (f32, [3, 3]), (f32, [3, 3])], f32, [3, 3], "SELECT.*condition")
    _prepare_fails("SELECT_V2", [(np.bool_, [2]), (f32, [3]), (f32, [3])], f32, [3], "SELECT_V2.*broadcast")
    _prepare_fails("POW", [(np.int64, [3]), (np.int64, [3])], np.int64, [3], "POW.*int64")


def test_runtime_errors_are_value_errors_naming_the_op():
    _invoke_fails("DIV", [np.array([1, 2, 3], np.int32), np.array([1, 0, 3], np.int32)], np.int32, "DIV")
    _invoke_fails("FLOOR_DIV", [np.array([1, 2], np.float32), np.array([0, 1], np.float32)], np.float32, "FLOOR_DIV",
                  version=2)
    _invoke_fails("FLOOR_MOD", [np.array([1, 2], np.int32), np.array([2, 0], np.int32)], np.int32, "FLOOR_MOD")
    _invoke_fails("POW", [np.array([2, 2], np.int32), np.array([1, -1], np.int32)], np.int32, "POW")


@pytest.mark.parametrize("op,dtype,shape,row_shape,row_first,act", [
    ("ADD", np.float32, (1, 32, 32, 16), (16,), False, "RELU6"),  # rows of 16 widened 16x (elementwise._widen_rows)
    ("MUL", np.float32, (2, 7, 24), (1, 24), False, "NONE"),  # 14 rows: t = 14 (rows of 336)
    ("SUB", np.float32, (13, 40), (40,), True, "NONE"),  # the constant row first; 13 rows (prime): one row of 520
    ("SUB", np.float32, (1031, 8), (8,), False, "NONE"),  # 1031 rows (prime, > the tile limit): not widened
    ("ADD", np.int32, (6, 10, 12), (12,), True, "RELU"),
    ("PRELU", np.float32, (1, 9, 9, 24), (1, 1, 24), False, None),
])
def test_broadcast_constant_row(op, dtype, shape, row_shape, row_first, act):
    """A constant row broadcast over many short rows (bias, PRELU alpha): the loop is widened by repeating the row;
    every element must still equal the official result exactly."""
    rng = np.random.default_rng(7)
    if dtype == np.int32:
        x, row = rng.integers(-1000, 1000, shape).astype(dtype), rng.integers(-1000, 1000, row_shape).astype(dtype)
    else:
        x, row = rng.standard_normal(shape).astype(dtype), rng.standard_normal(row_shape).astype(dtype)
    options = {} if act is None else {"fused_activation_function": act}
    inputs = [row, (x.dtype, x.shape)] if row_first else [(x.dtype, x.shape), row]
    data = op_model(op, inputs, dtype, shape, options)
    ours, ref = run_both_single(data, [x])
    assert ours.shape == ref.shape and ours.tobytes() == ref.tobytes()


@pytest.mark.parametrize("op,x_shape,y_shape,act", [
    ("MUL", (1, 17, 64), (1, 17, 1), "NONE"),  # a layer norm's rows times their scale (two dimensions)
    ("SQUARED_DIFFERENCE", (1, 17, 64), (1, 17, 1), None),
    ("SUB", (16, 1), (16, 32), "RELU"),  # the column first
    ("ADD", (9, 40), (40,), "RELU6"),  # a row computed at run time (not widened)
    ("DIV", (3, 5, 7), (3, 1, 7), "NONE"),  # three dimensions: the general walk
])
def test_broadcast_run_time_operands(op, x_shape, y_shape, act):
    """Both operands computed at run time: rows against a column or a row (kernels/elementwise/arithmetic.py's
    two-dimensional loops), bit for bit."""
    rng = np.random.default_rng(11)
    x, y = rng.standard_normal(x_shape).astype(np.float32), rng.standard_normal(y_shape).astype(np.float32)
    shape = np.broadcast_shapes(x_shape, y_shape)
    options = {} if act is None else {"fused_activation_function": act}
    data = op_model(op, [(np.float32, x_shape), (np.float32, y_shape)], np.float32, shape, options)
    ours, ref = run_both_single(data, [x, y])
    assert ours.shape == ref.shape and ours.tobytes() == ref.tobytes()
