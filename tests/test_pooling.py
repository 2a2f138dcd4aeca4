"""AVERAGE_POOL_2D, MAX_POOL_2D and L2_POOL_2D against the official runtime's builtin kernels.

Float results must agree within 1e-5 (relative to max(1, |ref|)); quantized results must be bit-exact."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close, prepare_error, require_official, run_official, run_ours

require_official()


# derandomized: the same examples every run, so the compiled runners are all cached after the first run
SETTINGS = settings(max_examples=scaled(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
ACTIVATIONS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]
VERSION = {np.dtype(np.float32): 1, np.dtype(np.uint8): 1, np.dtype(np.int8): 2, np.dtype(np.int16): 3}


def out_size(padding: str, size: int, filt: int, stride: int) -> int:
    """The declared output size (at least 1, so models with invalid parameters can still be written)."""
    stride = max(stride, 1)
    if padding == "SAME":
        return -(-size // stride)
    return max((size - filt) // stride + 1, 1)


def pool_model(op, dtype, shape, filt, stride, padding, act, quant=None, version=None):
    fh, fw = filt
    sh, sw = stride
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape, quant=quant)
    oshape = [shape[0], out_size(padding, shape[1], fh, sh), out_size(padding, shape[2], fw, sw), shape[3]]
    y = b.add_tensor("y", dtype, oshape, quant=quant)
    b.add_op(op, [x], [y], options={"padding": padding, "stride_h": sh, "stride_w": sw, "filter_height": fh,
                                    "filter_width": fw, "fused_activation_function": act},
             version=version or VERSION[np.dtype(dtype)])
    b.mark_output(y)
    return b.build()


@st.composite
def pool_params(draw):
    shape = [draw(st.integers(1, 2)), draw(st.integers(1, 9)), draw(st.integers(1, 9)), draw(st.integers(1, 20))]
    padding = draw(st.sampled_from(["SAME", "VALID"]))
    fmax_h = shape[1] if padding == "VALID" else 5
    fmax_w = shape[2] if padding == "VALID" else 5
    filt = (draw(st.integers(1, min(fmax_h, 5))), draw(st.integers(1, min(fmax_w, 5))))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    return shape, filt, stride, padding


@SETTINGS
@given(op=st.sampled_from(["AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D"]), p=pool_params(),
       act=st.sampled_from(ACTIVATIONS), seed=st.integers(0, 2**31))
def test_float_pooling(op, p, act, seed):
    shape, filt, stride, padding = p
    x = np.random.default_rng(seed).uniform(-3, 3, shape).astype(np.float32)
    data = pool_model(op, np.float32, shape, filt, stride, padding, act)
    (ours,), (ref,) = run_ours(data, [x]), run_official(data, [x])
    assert_close(ours, ref, 1e-5)


@SETTINGS
@given(op=st.sampled_from(["AVERAGE_POOL_2D", "MAX_POOL_2D"]), dtype=st.sampled_from([np.int8, np.uint8, np.int16]),
       p=pool_params(), act=st.sampled_from(ACTIVATIONS), scale=st.floats(0.005, 0.1), zp=st.integers(-40, 40),
       seed=st.integers(0, 2**31))
def test_quantized_pooling(op, dtype, p, act, scale, zp, seed):
    shape, filt, stride, padding = p
    dt = np.dtype(dtype)
    zp = 0 if dt == np.int16 else zp + (128 if dt == np.uint8 else 0)
    info = np.iinfo(dt)
    x = np.random.default_rng(seed).integers(int(info.min), int(info.max), shape, endpoint=True).astype(dt)
    data = pool_model(op, dtype, shape, filt, stride, padding, act, quant=(scale, zp))
    (ours,), (ref,) = run_ours(data, [x]), run_official(data, [x])
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    assert np.array_equal(ours, ref), f"max step {np.max(np.abs(ours.astype(np.int64) - ref.astype(np.int64)))}"


def test_large_window_and_depth():
    """A global pool (window = input) over many channels, and a window clipped on every side by SAME padding."""
    rng = np.random.default_rng(7)
    for shape, filt, stride, padding in (([1, 7, 5, 300], (7, 5), (1, 1), "VALID"),
                                         ([2, 4, 4, 17], (5, 5), (1, 1), "SAME")):
        for dtype in (np.float32, np.int8):
            x = (rng.uniform(-3, 3, shape) if dtype == np.float32 else rng.integers(-128, 128, shape)).astype(dtype)
            q = (0.05, -3) if dtype == np.int8 else None
            for op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
                data = pool_model(op, dtype, shape, filt, stride, padding, "NONE", quant=q)
                (ours,), (ref,) = run_ours(data, [x]), run_official(data, [x])
                assert_close(ours, ref, 1e-5 if dtype == np.float32 else 0)


@pytest.mark.parametrize("channels", [16, 19, 32, 53])
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.uint8, np.int16])
def test_max_pool_channel_vectors(channels, dtype):
    """MAX_POOL_2D's 16-channel vector path (pooling.vmax_into) and its scalar tail, with NaN and infinities among
    float inputs (a NaN never replaces the running maximum, as in the official kernel) and the extremes of each
    integer type, 2x2 stride 2 SAME as MediaPipe's models use."""
    rng = np.random.default_rng(channels)
    shape = [1, 9, 8, channels]
    if dtype == np.float32:
        x = rng.uniform(-3, 3, shape).astype(np.float32)
        x.flat[rng.choice(x.size, 40, replace=False)] = np.nan
        x.flat[rng.choice(x.size, 10, replace=False)] = np.inf
        x.flat[rng.choice(x.size, 10, replace=False)] = -np.inf
        q = None
    else:
        info = np.iinfo(dtype)
        x = rng.integers(int(info.min), int(info.max), shape, endpoint=True).astype(dtype)
        q = (0.05, 0) if dtype == np.int16 else (0.05, 3)
    for act in ("NONE", "RELU6"):
        data = pool_model("MAX_POOL_2D", dtype, shape, (2, 2), (2, 2), "SAME", act, quant=q)
        (ours,), (ref,) = run_ours(data, [x]), run_official(data, [x])
        np.testing.assert_array_equal(ours, ref)


def test_errors():
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [4, 4, 3])
    y = b.add_tensor("y", np.float32, [4, 4, 3])
    b.add_op("MAX_POOL_2D", [x], [y], options={"padding": "SAME", "stride_h": 1, "stride_w": 1, "filter_height": 2,
                                                "filter_width": 2})
    b.mark_output(y)
    prepare_error(b.build(), r"MAX_POOL_2D .*4-D", invoke=True)
    prepare_error(pool_model("L2_POOL_2D", np.int8, [1, 4, 4, 2], (2, 2), (1, 1), "SAME", "NONE", quant=(0.1, 0),
                             version=1), r"L2_POOL_2D .*int8", invoke=True)
    prepare_error(pool_model("AVERAGE_POOL_2D", np.float32, [1, 4, 4, 2], (2, 2), (0, 1), "SAME", "NONE"),
                  r"AVERAGE_POOL_2D .*strides must be positive", invoke=True)
    prepare_error(pool_model("AVERAGE_POOL_2D", np.float32, [1, 4, 4, 2], (2, 0), (1, 1), "SAME", "NONE"),
                  r"AVERAGE_POOL_2D .*filter sizes must be positive", invoke=True)
    prepare_error(pool_model("MAX_POOL_2D", np.float32, [1, 2, 2, 2], (4, 4), (1, 1), "VALID", "NONE"),
                  r"MAX_POOL_2D .*does not fit", invoke=True)
    prepare_error(pool_model("AVERAGE_POOL_2D", np.float32, [1, 4, 4, 2], (2, 2), (1, 1), "SAME", "TANH"),
                  r"AVERAGE_POOL_2D .*activation", invoke=True)
