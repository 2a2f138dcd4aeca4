"""The hybrid (dynamic-range) FULLY_CONNECTED's float side, shared by fully_connected_quantized, fc_blockwise and
batch_matmul: the input rows quantized to int8 (schedule_hybrid_rows), the int32 dot products scaled back to float
with the bias and the fused activation (hybrid_fc_finish), and the official all-zero-input shortcut
(hybrid_fc_zero_input), as TFLite's EvalHybridDense computes them."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.activation import (
    ACT_RELU,
    ACT_RELU6,
    ACT_RELU_N1_TO_1,
    ACT_SIGN_BIT,
    ACT_TANH,
    std_clamp_activation,
)
from lite_numba.kernels.base.hybrid_quant import official_is_zero_vector, quantize_rows
from lite_numba.kernels.base.vecmath import tanh_f32
from numba import njit

from lite_numba.ops import PrepareContext


@njit(cache=True, inline="always")
def apply_float_activation(v, act):
    """The fused activations the hybrid kernel accepts (all of ActivationFunctionType), on a float32 value, as the
    official ApplyActivationToVector: the clamps with std::max / std::min, so a NaN becomes 0 (RELU, RELU6) or -1
    (RELU_N1_TO_1) (std_clamp_activation)."""
    if act == ACT_RELU or act == ACT_RELU_N1_TO_1 or act == ACT_RELU6:
        return std_clamp_activation(v, act)
    if act == ACT_TANH:  # ApplyTanhToVector: Eigen's tanh, as vecmath's
        return tanh_f32(v)
    if act == ACT_SIGN_BIT:
        return np.float32(1.0) if np.signbit(v) else np.float32(0.0)
    return v


@njit(cache=True, nogil=True)
def hybrid_fc_zero_input(x, bias, out, N, act):
    """The official EvalHybrid skips the product and returns act(bias) in every row when its all-zero test passes on
    the whole input. That test (official_is_zero_vector) counts NaNs in blocks of four as zeros, so it differs from
    computing the product only there: [NaN, 0, 0, 0] gives the bias, not NaN."""
    if official_is_zero_vector(x, 0, x.size):
        for r in range(out.size // N):
            for n in range(N):
                out[r * N + n] = apply_float_activation(bias[n], act)


@njit(cache=True, nogil=True)
def hybrid_fc_finish(acc, sf, zp, row_sums, scales, bias, out, N, act):
    """out[b, u] = act(bias[u] + float(acc[b, u] - zp[b] * row_sums[u]) * (scales[u] * sf[b])) (EvalHybridDense)."""
    for r in range(acc.size // N):
        base = r * N
        s = sf[r]
        off = zp[r]
        for n in range(N):
            dot = np.int32(acc[base + n] - np.int32(off * row_sums[n]))
            v = bias[n] + np.float32(dot) * (scales[n] * s)
            out[base + n] = apply_float_activation(v, act)


def schedule_hybrid_rows(ctx: PrepareContext, x, rows: int, k: int):
    """Quantize x as `rows` rows of k floats into int8 temps; returns the temps (q, scaling factors, zero points)."""
    asym = bool(ctx.options.get("asymmetric_quantize_inputs", False))
    q = ctx.temp((max(rows * k, 1),), np.int8)
    sf = ctx.temp((max(rows, 1),), np.float32)
    zp = ctx.temp((max(rows, 1),), np.int32)
    x_arg = ctx.view(x, (x.size,)) if x.size else np.zeros(0, np.float32)
    ctx.call(quantize_rows, x_arg, rows, k, asym, q, sf, zp)
    return q, sf, zp
