"""Fused activations: the clamp ranges of TFLite's ActivationFunctionType for float, integer and quantized outputs."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.fixedpoint import activation_range_quantized
from numba import njit

from lite_numba.ops import PrepareContext, Tensor

# ActivationFunctionType: NONE, RELU, RELU_N1_TO_1, RELU6, TANH, SIGN_BIT
ACT_NONE, ACT_RELU, ACT_RELU_N1_TO_1, ACT_RELU6, ACT_TANH, ACT_SIGN_BIT = range(6)


F32_MAX = float(np.finfo(np.float32).max)


@njit(cache=True, nogil=True, inline="always")
def std_clamp_activation(v, act):
    """RELU, RELU_N1_TO_1 and RELU6 of one float32 value as TFLite's ApplyActivationToVector computes them (the
    hybrid FULLY_CONNECTED and the sequence ops): std::max(0.0f, v), std::max(-1.0f, std::min(v, 1.0f)),
    std::max(0.0f, std::min(v, 6.0f)), where std::max(a, b) is (a < b) ? b : a and std::min(a, b) is (b < a) ? b : a.
    A NaN compares false, so RELU and RELU6 give 0 and RELU_N1_TO_1 gives -1 (measured with ai-edge-litert 2.3); the
    clamps of the float CONV_2D and FULLY_CONNECTED (ActivationFunctionWithMinMax) keep NaN instead, CONV_3D's gives
    the upper bound (conv_loops.conv3d_f32), DEPTHWISE_CONV_2D's keeps it except in each row chunk's scalar tail
    (dwconv_loops.dw_nan_tail_f32). Other codes return v."""
    if act == ACT_RELU:
        return v if np.float32(0.0) < v else np.float32(0.0)
    if act == ACT_RELU_N1_TO_1:
        m = np.float32(1.0) if np.float32(1.0) < v else v
        return m if np.float32(-1.0) < m else np.float32(-1.0)
    if act == ACT_RELU6:
        m = np.float32(6.0) if np.float32(6.0) < v else v
        return m if np.float32(0.0) < m else np.float32(0.0)
    return v


def float_activation_range(ctx: PrepareContext, act: int) -> tuple[float, float]:
    """(min, max) clamp of a fused activation on float outputs."""
    # TFLite clamps to the finite float range even without an activation (inf becomes FLT_MAX)
    if act == ACT_NONE:
        return -F32_MAX, F32_MAX
    if act == ACT_RELU:
        return 0.0, F32_MAX
    if act == ACT_RELU_N1_TO_1:
        return -1.0, 1.0
    if act == ACT_RELU6:
        return 0.0, 6.0
    ctx.fail(f"fused activation {act} is not supported")


def int_activation_range(ctx: PrepareContext, act: int, dtype) -> tuple[int, int]:
    """(min, max) clamp of a fused activation on integer (non-quantized) outputs."""
    info = np.iinfo(dtype)
    lo, hi = float_activation_range(ctx, act)
    return int(max(lo, info.min)), int(min(hi, info.max))


def quantized_activation_range(ctx: PrepareContext, act: int, out: Tensor) -> tuple[int, int]:
    """(min, max) clamp of a fused activation on a quantized output, as TFLite computes it (float32 division,
    rounding half away from zero: fixedpoint.activation_range_quantized)."""
    try:
        return activation_range_quantized(act, out.dtype, out.scale, out.zero_point)
    except ValueError as e:
        ctx.fail(str(e))
