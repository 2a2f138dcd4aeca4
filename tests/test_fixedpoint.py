"""The fixed-point helpers (kernels/base/fixedpoint.py) checked against the official runtime through one-op models.

quantize_multiplier + multiply_by_quantized_multiplier are exercised by requantizing every int8 value with random
scale ratios over nine decades (QUANTIZE int8 -> int8, int16 -> int8), and by int8 ADD / MUL with random scales;
the helpers themselves are compared with each other (scalar njit vs array versions) and with a few known values.
"""

from __future__ import annotations

import math

import numpy as np
from conftest import scaled
from hypothesis import given, settings
from hypothesis import strategies as st
from lite_numba.kernels.base import fixedpoint as fx

from lite_numba.builder import ModelBuilder
from lite_numba.testing import require_official, run_official, run_ours

require_official()


def assert_same(model: bytes, inputs) -> None:
    ref = run_official(model, inputs)[0]
    ours = run_ours(model, inputs)[0]
    diff = np.abs(ours.astype(np.int64) - ref.astype(np.int64))
    assert diff.max(initial=0) == 0, (f"{int((diff > 0).sum())} differ: ours {ours[diff > 0][:5]}, "
                                      f"ref {ref[diff > 0][:5]}")


def requantize_model(din, dout, n, qin, qout) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", din, [n], quant=qin)
    y = b.add_tensor("y", dout, [n], quant=qout)
    b.add_op("QUANTIZE", [x], [y], version=1)
    b.mark_output(y)
    return b.build()


def int8_values(extra: int, rng) -> np.ndarray:
    """All 256 int8 values (so both the 16-element blocks and a scalar tail see every value) plus extras."""
    return np.concatenate([np.arange(-128, 128), rng.integers(-128, 128, extra)]).astype(np.int8)


@settings(max_examples=scaled(25), deadline=None)
@given(log_in=st.floats(-6, 3), log_out=st.floats(-6, 3), zin=st.integers(-128, 127), zout=st.integers(-128, 127),
       seed=st.integers(0, 2 ** 16))
def test_requantize_int8_multipliers(log_in, log_out, zin, zout, seed):
    """Scale ratios from 1e-9 to 1e9: multipliers flushed to zero, exact powers of two and huge left shifts."""
    rng = np.random.default_rng(seed)
    x = int8_values(11, rng)
    model = requantize_model(np.int8, np.int8, x.size, (10.0 ** log_in, zin), (10.0 ** log_out, zout))
    assert_same(model, [x])


@settings(max_examples=scaled(20), deadline=None)
@given(log_in=st.floats(-6, -1), log_out=st.floats(-4, 1), zout=st.integers(-128, 127), seed=st.integers(0, 2 ** 16))
def test_requantize_int16_to_int8_multipliers(log_in, log_out, zout, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-32768, 32768, 500).astype(np.int16)
    model = requantize_model(np.int16, np.int8, x.size, (10.0 ** log_in, 0), (10.0 ** log_out, zout))
    assert_same(model, [x])


@settings(max_examples=scaled(20), deadline=None)
@given(op=st.sampled_from(["ADD", "MUL"]), logs=st.tuples(st.floats(-3, 0), st.floats(-3, 0), st.floats(-3, 0)),
       zps=st.tuples(st.integers(-128, 127), st.integers(-128, 127), st.integers(-128, 127)),
       seed=st.integers(0, 2 ** 16))
def test_add_mul_random_scales(op, logs, zps, seed):
    """Every pair of int8 values (256 x 256) through ADD / MUL with random scales and zero points."""
    b = ModelBuilder()
    x = b.add_input("x", np.int8, [256, 256], quant=(10.0 ** logs[0], zps[0]))
    y = b.add_input("y", np.int8, [256, 256], quant=(10.0 ** logs[1], zps[1]))
    z = b.add_tensor("z", np.int8, [256, 256], quant=(10.0 ** logs[2], zps[2]))
    b.add_op(op, [x, y], [z], version=2)
    b.mark_output(z)
    v = np.arange(-128, 128, dtype=np.int8)
    assert_same(b.build(), [np.repeat(v, 256).reshape(256, 256), np.tile(v, 256).reshape(256, 256)])


# --- helper-level checks --------------------------------------------------------------------------------------

def test_tflite_round_is_half_away_from_zero():
    assert [fx.tflite_round(v) for v in (0.5, 1.5, 2.5, -0.5, -2.5, 0.49999999999999994)] == [1, 2, 3, -1, -3, 0]
    assert math.isinf(fx.tflite_round(math.inf)) and math.isnan(fx.tflite_round(math.nan))


def test_quantize_multiplier_known_values():
    assert fx.quantize_multiplier(0.5) == (1 << 30, 0)
    assert fx.quantize_multiplier(1.0) == (1 << 30, 1)
    assert fx.quantize_multiplier(0.0) == (0, 0)
    assert fx.quantize_multiplier(2.0 ** -40) == (0, 0)  # flushed: shift < -31
    # mantissa * 2^31 ending in exactly .5 rounds away from zero (Python's round() would go to even)
    m = ((1 << 30) + 0.5) / (1 << 31)
    assert fx.quantize_multiplier(m) == ((1 << 30) + 1, 0)
    q, s = fx.quantize_multiplier(-0.3)
    assert q < 0 and (q, s) == (-fx.quantize_multiplier(0.3)[0], fx.quantize_multiplier(0.3)[1])


def _quantize_one_by_one(scales):
    out = [fx.quantize_multiplier(float(m)) for m in np.asarray(scales, np.float64)]
    return np.array([q for q, _ in out], np.int32).reshape(-1), np.array([s for _, s in out], np.int32).reshape(-1)


@settings(max_examples=scaled(25), deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False) | st.floats(0, 1e-9), max_size=40))
def test_quantize_multipliers_is_quantize_multiplier_per_element(scales):
    # the array version computes with numpy: the same (q, shift) as the scalar one for every element
    edge = [0.0, -0.0, 0.5, 1.0, 2.0 ** -40, 5e-324, 1e300, 1 - 2.0 ** -33, -(1 - 2.0 ** -33), 1 - 2.0 ** -31,
            ((1 << 30) + 0.5) / (1 << 31), -((1 << 30) + 0.5) / (1 << 31)]
    for arr in (np.array(scales, np.float64), np.array(edge), np.float32(scales)):
        q, s = fx.quantize_multipliers(arr)
        rq, rs = _quantize_one_by_one(arr)
        assert q.dtype == s.dtype == np.int32
        assert np.array_equal(q, rq) and np.array_equal(s, rs)


@settings(max_examples=scaled(25), deadline=None)
@given(st.lists(st.integers(-(1 << 31), (1 << 31) - 1), min_size=2, max_size=2),
       st.floats(1e-9, 1e3), st.integers(0, 31))
def test_scalar_and_array_helpers_agree(ab, m, e):
    a, b = ab
    assert fx.saturating_rounding_doubling_high_mul(a, b) == fx.saturating_rounding_doubling_high_mul_array(a, b)
    assert fx.saturating_rounding_doubling_high_mul(-(1 << 31), -(1 << 31)) == (1 << 31) - 1
    assert fx.rounding_divide_by_pot(a, e) == fx.rounding_divide_by_pot_array(a, e)
    q, s = fx.quantize_multiplier(m)
    x = a >> 12
    assert fx.multiply_by_quantized_multiplier(x, q, s) == fx.multiply_by_quantized_multiplier_array(x, q, s)
    exact = x * m
    if abs(exact) < (1 << 30) and s <= 0:
        assert abs(fx.multiply_by_quantized_multiplier(x, q, s) - exact) <= 1


def test_activation_range_quantized_uses_float_division_and_half_away_rounding():
    # 6 / 0.0470588 rounds differently in float32 and double; ties round away from zero
    assert fx.activation_range_quantized(3, np.int8, 6.0 / 255, -128) == (-128, 127)
    assert fx.activation_range_quantized(1, np.uint8, 0.5, 10) == (10, 255)
    assert fx.quantize_scalar(1.25, 0.5, 0) == 3  # 2.5 -> 3, not 2
