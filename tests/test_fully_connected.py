"""FULLY_CONNECTED against the official runtime: float32, int8 (per-tensor/per-channel), uint8, int16x8 (int32 and
int64 bias), int16x16, hybrid (int8 weights, symmetric/asymmetric input quantization), keep_num_dims, optional bias,
fused activations, non-constant weights, and errors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import given, settings
from hypothesis import strategies as st
from linear_models import fc_model

# imported under the names the hypothesis tests' bodies use: a derandomized test's examples are seeded by its source
from linear_models import fc_quant_case as _quantized_case

from lite_numba.testing import assert_close, prepare_error, require_official
from lite_numba.testing import run_both_single as both

require_official()

ACTS = ["NONE", "RELU", "RELU_N1_TO_1", "RELU6"]


def assert_exact(ours, ref):
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    diff = np.abs(ours.astype(np.int64) - ref.astype(np.int64))
    assert diff.max(initial=0) == 0, f"{int((diff > 0).sum())} of {diff.size} differ, max step {diff.max()}"


# --- float32 ------------------------------------------------------------------------------------------------------

@settings(max_examples=scaled(25), deadline=None)
@given(batch=st.lists(st.integers(1, 5), min_size=0, max_size=2), k=st.integers(1, 70), units=st.integers(1, 40),
       act=st.sampled_from(ACTS), keep=st.booleans(), with_bias=st.booleans(), seed=st.integers(0, 2**16))
def test_float(batch, k, units, act, keep, with_bias, seed):
    rng = np.random.default_rng(seed)
    x_shape = batch + [k]
    w = rng.standard_normal((units, k)).astype(np.float32)
    bias = rng.standard_normal(units).astype(np.float32) if with_bias else None
    data = fc_model(x_shape, w, bias=bias, act=act, keep=keep, version=5 if keep else (1 if with_bias else 6))
    x = rng.standard_normal(x_shape).astype(np.float32)
    ours, ref = both(data, [x])
    assert_close(ours, ref, 1e-5)


def test_float_flattens_input_and_large_depth():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((130, 12)).astype(np.float32)
    data = fc_model([3, 2, 6], w, bias=rng.standard_normal(130).astype(np.float32))  # 36 values -> 3 rows of 12
    x = rng.standard_normal((3, 2, 6)).astype(np.float32)
    ours, ref = both(data, [x])
    assert ours.shape == (3, 130)
    assert_close(ours, ref, 1e-5)
    w = rng.standard_normal((9, 1000)).astype(np.float32)
    data = fc_model([5, 1000], w)
    x = rng.standard_normal((5, 1000)).astype(np.float32)
    ours, ref = both(data, [x])
    assert_close(ours, ref, 1e-5)


def test_float_non_constant_weights():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((7, 10)).astype(np.float32)
    data = fc_model([6, 10], w, bias=rng.standard_normal(7).astype(np.float32), const_weights=False, act="RELU")
    inputs = [rng.standard_normal((6, 10)).astype(np.float32), w]
    ours, ref = both(data, inputs)
    assert_close(ours, ref, 1e-5)


def test_float_zero_depth_gives_zeros():
    w = np.zeros((4, 0), np.float32)
    data = fc_model([3, 0], w, bias=np.ones(4, np.float32))
    x = np.zeros((3, 0), np.float32)
    ours, ref = both(data, [x])
    assert_close(ours, ref, 0)


# --- quantized ------------------------------------------------------------------------------------------------------

@settings(max_examples=scaled(20), deadline=None)
@given(batch=st.integers(1, 9), k=st.integers(1, 80), units=st.integers(1, 33), per_channel=st.booleans(),
       with_bias=st.booleans(), act=st.sampled_from(ACTS), seed=st.integers(0, 2**16))
def test_int8(batch, k, units, per_channel, with_bias, act, seed):
    rng = np.random.default_rng(seed)
    data, x = _quantized_case(rng, np.int8, np.int8, batch, k, units, per_channel,
                              np.int32 if with_bias else None, act)
    assert_exact(*both(data, [x]))


@pytest.mark.parametrize("x_dtype, w_dtype, per_channel, bias_dtype, bias_type", [
    (np.uint8, np.uint8, False, np.int32, None),
    (np.int16, np.int8, False, np.int32, None),
    (np.int16, np.int8, True, np.int32, None),
    (np.int16, np.int8, True, None, None),
    (np.int16, np.int8, False, np.int64, "INT64"),
    (np.int16, np.int8, True, np.int64, "INT64"),
    (np.int16, np.int16, False, np.int32, None),
    (np.int16, np.int16, True, np.int64, "INT64"),
])
def test_other_quantized(x_dtype, w_dtype, per_channel, bias_dtype, bias_type):
    rng = np.random.default_rng(7)
    # (200, 3, 16): many small results, so requantization ties (where the rounding rules differ) occur
    for batch, k, units in ((3, 37, 11), (5, 600, 9), (200, 3, 16)):
        data, x = _quantized_case(rng, x_dtype, w_dtype, batch, k, units, per_channel, bias_dtype, "RELU",
                                  bias_type)
        assert_exact(*both(data, [x]))


def test_int8_rounds_ties_like_ruy():
    """The optimized int8 kernel requantizes through ruy, whose roundings go half up (not away from zero)."""
    rng = np.random.default_rng(11)
    data, x = _quantized_case(rng, np.int8, np.int8, 300, 3, 16, False, np.int32, "NONE")
    assert_exact(*both(data, [x]))


def test_int8_keep_num_dims_and_non_constant_weights():
    rng = np.random.default_rng(3)
    w = rng.integers(-127, 128, (6, 8)).astype(np.int8)
    data = fc_model([2, 3, 8], w, x_dtype=np.int8, x_quant=(0.05, 3), w_quant=(0.01, 0), out_dtype=np.int8,
                    out_quant=(0.1, -2), keep=True, const_weights=False, version=5)
    inputs = [rng.integers(-128, 128, (2, 3, 8)).astype(np.int8), w]
    ours, ref = both(data, inputs)
    assert ours.shape == (2, 3, 6)
    assert_exact(ours, ref)


# --- hybrid ---------------------------------------------------------------------------------------------------------

@settings(max_examples=scaled(20), deadline=None)
@given(batch=st.integers(1, 6), k=st.integers(1, 90), units=st.integers(1, 30), per_channel=st.booleans(),
       asymmetric=st.booleans(), with_bias=st.booleans(),
       act=st.sampled_from(ACTS + ["TANH", "SIGN_BIT"]), seed=st.integers(0, 2**16))
def test_hybrid(batch, k, units, per_channel, asymmetric, with_bias, act, seed):
    rng = np.random.default_rng(seed)
    w = rng.integers(-127, 128, (units, k)).astype(np.int8)
    if per_channel:
        w_quant = {"scales": rng.uniform(0.002, 0.02, units).astype(np.float32), "zero_points": [0] * units,
                   "quantized_dimension": 0}
    else:
        w_quant = (0.01, 0)
    bias = rng.standard_normal(units).astype(np.float32) if with_bias else None
    version = 12 if per_channel else (9 if asymmetric else 3)
    data = fc_model([batch, k], w, w_quant=w_quant, bias=bias, act=act, version=version,
                    extra_options={"asymmetric_quantize_inputs": asymmetric})
    x = (rng.standard_normal((batch, k)) + rng.uniform(-1, 1)).astype(np.float32)
    x[0] *= 0 if batch > 1 and seed % 3 == 0 else 1  # an all-zero row takes the bias-only path
    ours, ref = both(data, [x])
    assert_close(ours, ref, 1e-5)


@pytest.mark.parametrize("asymmetric", [False, True])
def test_hybrid_input_rounding(asymmetric):
    """The official x86 build quantizes hybrid inputs with the NEON code (through NEON_2_SSE): blocks of 8 values
    round as trunc(v +- 0.5) in float32 (0.49999997 -> 1), the tail with std::round (-> 0), ties away from zero;
    identity weights of scale 1 and a range of exactly 255 (127) make the quantized values the outputs."""
    h = np.float32(0.5) - np.float32(2.0 ** -25)
    lo = -128.0 if asymmetric else -127.0
    x = np.array([[127.0, lo, h, 2.5, -h, 1.5, -0.5, 4.0, h, -h, 2.5]], np.float32)
    w = np.eye(x.shape[1], dtype=np.int8)
    data = fc_model(list(x.shape), w, w_quant=(1.0, 0), version=9 if asymmetric else 3,
                    extra_options={"asymmetric_quantize_inputs": asymmetric})
    ours, ref = both(data, [x])
    np.testing.assert_array_equal(ref, [[127, lo, 1, 3, -1, 2, -1, 4, 0, 0, 3]])
    np.testing.assert_array_equal(ours, ref)


# --- errors ---------------------------------------------------------------------------------------------------------

def _prepare_error(data):
    return prepare_error(data, "FULLY_CONNECTED")


def test_errors():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((4, 6)).astype(np.float32)
    assert "bias" in _prepare_error(fc_model([2, 6], w, bias=np.zeros(5, np.float32)))
    assert "multiple" in _prepare_error(fc_model([2, 5], w))
    assert "keep_num_dims" in _prepare_error(fc_model([3, 4], w, keep=True))
    w8 = rng.integers(-127, 128, (4, 6)).astype(np.int8)
    msg = _prepare_error(fc_model([2, 6], w8, x_dtype=np.int8, x_quant=(0.1, 0), w_quant=(0.1, 0),
                                  out_dtype=np.int8, out_quant=(0.1, 0), act="TANH"))
    assert "activation" in msg
    msg = _prepare_error(fc_model([2, 6], w8, x_dtype=np.int8, x_quant=(0.1, 0), w_quant=(0.1, 0),
                                  out_dtype=np.int16, out_quant=(0.1, 0)))
    assert "type" in msg


@pytest.mark.parametrize("x_shape,units,act", [([1, 1536], 64, "NONE"), ([3, 37], 5, "RELU6"),
                                               ([2, 2, 300], 11, "RELU")])
def test_float_runtime_weights_few_rows(x_shape, units, act):
    """Weights known only at run time with at most 4 input rows take the direct row-dot kernel (fc_rows_f32)."""
    rng = np.random.default_rng(4)
    k = x_shape[-1]
    w = rng.standard_normal((units, k)).astype(np.float32)
    data = fc_model(x_shape, w, bias=rng.standard_normal(units).astype(np.float32), const_weights=False, act=act)
    inputs = [rng.standard_normal(x_shape).astype(np.float32), w]
    ours, ref = both(data, inputs)
    assert_close(ours, ref, 1e-5)
