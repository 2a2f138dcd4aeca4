"""QUANTIZE and DEQUANTIZE against the official runtime, bit-exact.

The official x86 kernels process vector blocks (8 floats, 16 requantized bytes) and a scalar tail with different
rounding, so sizes below are chosen to cover both.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close, prepare_error, require_official, run_official, run_ours

require_official()

OFFSET = {np.int8: 0, np.uint8: 128, np.int16: 0, np.int32: 0}


def assert_same(model: bytes, inputs) -> None:
    ref = run_official(model, inputs)
    ours = run_ours(model, inputs)
    for o, r in zip(ours, ref):
        assert o.dtype == r.dtype and o.shape == r.shape
        if o.dtype.kind == "f":
            # exact, NaN where NaN
            assert np.array_equal(o, r, equal_nan=True), f"max diff {np.nanmax(np.abs(o - r))}"
        else:
            diff = np.abs(o.astype(np.int64) - r.astype(np.int64))
            assert diff.max(initial=0) == 0, (f"{int((diff > 0).sum())}/{diff.size} differ at "
                                              f"{np.argwhere(diff > 0)[:5].tolist()}")


def op_model(op, din, dout, shape, qin, qout, version) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", din, shape, quant=qin)
    y = b.add_tensor("y", dout, shape, quant=qout)
    b.add_op(op, [x], [y], version=version)
    b.mark_output(y)
    return b.build()


def random_values(rng, dtype, shape):
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), -(1 << 24)), min(int(info.max), 1 << 24)
    return rng.integers(lo, hi + 1, size=shape).astype(dtype)


@settings(max_examples=scaled(25), deadline=None)
@given(data=st.data())
def test_quantize_float(data):
    """float32 -> int8/uint8/int16, including exact halves (ties), out-of-range values, inf and NaN."""
    dtype = data.draw(st.sampled_from([np.int8, np.uint8, np.int16]))
    n = data.draw(st.sampled_from([1, 5, 8, 13, 64, 67]))
    scale = 10.0 ** data.draw(st.floats(-4, 1))
    zp = data.draw(st.integers(-20, 20)) + OFFSET[dtype]
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    s32 = np.float32(scale)
    x = ((rng.integers(-200, 200, n) + rng.choice([0.5, 0.0, 0.3], n)) * s32).astype(np.float32)
    if data.draw(st.booleans()):
        x[: min(n, 4)] = np.array([np.inf, -np.inf, np.nan, 1e30], np.float32)[: min(n, 4)]
    model = op_model("QUANTIZE", np.float32, dtype, [n], None, (scale, zp), 2 if dtype == np.int16 else 1)
    assert_same(model, [x])


def test_quantize_float_per_channel():
    rng = np.random.default_rng(1)
    scales = (10.0 ** rng.uniform(-3, 0, 3)).astype(np.float32)
    quant = {"scales": scales, "zero_points": [1, -2, 3], "quantized_dimension": 1}
    model = op_model("QUANTIZE", np.float32, np.int8, [2, 3, 5], None, quant, 3)
    x = (rng.standard_normal((2, 3, 5)) * 2).astype(np.float32)
    x[0, :, 0] = np.float32(2.5) * scales
    assert_same(model, [x])


REQUANT_PAIRS = [(np.int8, np.int8), (np.int8, np.uint8), (np.uint8, np.int8), (np.uint8, np.uint8),
                 (np.int8, np.int16), (np.uint8, np.int16), (np.int16, np.int8), (np.int16, np.int16),
                 (np.int16, np.int32), (np.int32, np.int8), (np.int32, np.int16)]


@settings(max_examples=scaled(25), deadline=None)
@given(data=st.data())
def test_requantize(data):
    din, dout = data.draw(st.sampled_from(REQUANT_PAIRS))

    def q(dtype):
        lo, hi = {np.int8: (-3, 0), np.uint8: (-3, 0), np.int16: (-5, -2), np.int32: (-6, -3)}[dtype]
        zp = 0 if din == dout == np.int16 else data.draw(st.integers(-20, 20)) + OFFSET[dtype]
        return 10.0 ** data.draw(st.floats(lo, hi)), zp

    n = data.draw(st.sampled_from([7, 16, 40, 300]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    model = op_model("QUANTIZE", din, dout, [n], q(din), q(dout), 2 if dout == np.int16 else 1)
    assert_same(model, [random_values(rng, din, [n])])


@settings(max_examples=scaled(20), deadline=None)
@given(data=st.data())
def test_dequantize(data):
    dtype = data.draw(st.sampled_from([np.int8, np.uint8, np.int16]))
    n = data.draw(st.sampled_from([3, 8, 21, 300]))
    scale = 10.0 ** data.draw(st.floats(-5, 1))
    zp = 0 if dtype == np.int16 else data.draw(st.integers(-30, 30)) + OFFSET[dtype]
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16)))
    version = {np.uint8: 1, np.int8: 2, np.int16: 3}[dtype]
    model = op_model("DEQUANTIZE", dtype, np.float32, [n], (scale, zp), None, version)
    assert_same(model, [random_values(rng, dtype, [n])])


def test_dequantize_float16_input():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 1 << 16, 300).astype(np.uint16).view(np.float16)
    assert_same(op_model("DEQUANTIZE", np.float16, np.float32, [300], None, None, 3), [x])


@pytest.mark.parametrize("weights", ["float16", "int8", "int8_per_channel", "uint8_per_channel"])
def test_dequantize_constant_weights(weights):
    """Constant weights (float16 and int8 models) feeding a float op, converted once at prepare time."""
    rng = np.random.default_rng(3)
    shape = [3, 37]
    if weights == "float16":
        w, quant, version = (rng.standard_normal(shape) * 3).astype(np.float16), None, 3
    elif weights == "int8":
        w, quant, version = rng.integers(-128, 128, shape).astype(np.int8), (0.0123, 3), 2
    else:
        dtype = np.int8 if weights == "int8_per_channel" else np.uint8
        w = rng.integers(np.iinfo(dtype).min, int(np.iinfo(dtype).max) + 1, shape).astype(dtype)
        quant = {"scales": [0.1, 0.02, 0.3], "zero_points": [0, 1, 2], "quantized_dimension": 0}
        version = 5
    b = ModelBuilder()
    x = b.add_input("x", np.float32, shape)
    wc = b.add_const("w", w, quant=quant)
    wd = b.add_tensor("wd", np.float32, shape)
    b.add_op("DEQUANTIZE", [wc], [wd], version=version)
    y = b.add_tensor("y", np.float32, shape)
    b.add_op("ADD", [x, wd], [y])
    b.mark_output(y)
    model = b.build()
    inp = rng.standard_normal(shape).astype(np.float32)
    assert_close(run_ours(model, [inp])[0], run_official(model, [inp])[0], 0.0)


def test_dequantize_per_channel_input():
    rng = np.random.default_rng(4)
    quant = {"scales": [0.5, 0.25, 0.125, 0.3], "zero_points": [0, 0, 0, 0], "quantized_dimension": 1}
    model = op_model("DEQUANTIZE", np.int8, np.float32, [2, 4, 3], quant, None, 5)
    assert_same(model, [random_values(rng, np.int8, [2, 4, 3])])


# --- errors ---------------------------------------------------------------------------------------------------

def _prepare_error(model: bytes) -> str:
    return prepare_error(model, invoke=True)  # built, allocated and invoked with no input set


def test_error_quantize_to_float():
    msg = _prepare_error(op_model("QUANTIZE", np.float32, np.float32, [4], None, (0.1, 0), 1))
    assert "QUANTIZE" in msg and "cannot be quantized to float32" in msg


def test_error_quantize_without_output_parameters():
    msg = _prepare_error(op_model("QUANTIZE", np.float32, np.int8, [4], None, None, 1))
    assert "QUANTIZE" in msg and "no quantization parameters" in msg


def test_error_requantize_unsupported_pair():
    msg = _prepare_error(op_model("QUANTIZE", np.uint8, np.int32, [4], (0.1, 128), (0.1, 0), 1))
    assert "QUANTIZE" in msg and "cannot requantize uint8 to int32" in msg


def test_error_dequantize_int16_zero_point():
    msg = _prepare_error(op_model("DEQUANTIZE", np.int16, np.float32, [4], (0.1, 3), None, 3))
    assert "DEQUANTIZE" in msg and "zero point 0" in msg


def test_error_dequantize_float32_input():
    msg = _prepare_error(op_model("DEQUANTIZE", np.float32, np.float32, [4], None, None, 1))
    assert "DEQUANTIZE" in msg and "float32" in msg
