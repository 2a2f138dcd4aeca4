"""L2_NORMALIZATION (float32, int8, uint8) and LOCAL_RESPONSE_NORMALIZATION (float32), over the last axis; the fused
kernel of the odml.rms_norm composite (float32).

L2: float rows are divided by max(sqrt(sum of squares), 1e-6); quantized rows are scaled by a fixed-point inverse
square root of the integer sum of squares (gemmlowp's Newton-Raphson, `inv_sqrt_multiplier`), with the output
fixed at scale 1/128. LRN follows the optimized builtin kernel: a sliding window sum of alpha * x^2 over
[c - radius, c + radius], output x * (bias + window)^-beta.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.fixedpoint import (
    INT32_MAX,
    multiply_by_quantized_multiplier,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
)
from lite_numba.kernels.base.vecmath import eigen_sum_f32, wide_vectors
from numba import njit

from lite_numba.ops import PrepareContext, kernel

# --- fixed-point inverse square root --------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _wrap32(v):
    return np.int64(np.int32(v))


@njit(cache=True, inline="always")
def _sat_shl(x, exponent):
    """gemmlowp SaturatingRoundingMultiplyByPOT<exponent> for exponent > 0 on int32 values."""
    threshold = (np.int64(1) << (31 - exponent)) - 1
    if x > threshold:
        return np.int64(INT32_MAX)
    if x < -threshold:
        return np.int64(-INT32_MAX - 1)
    return _wrap32(x << exponent)


@njit(cache=True, nogil=True)
def inv_sqrt_multiplier(x):
    """TFLite's GetInvSqrtQuantizedMultiplierExp(x, kReverseShift): (multiplier, left shift) with
    multiplier * 2^(shift - 31) ~= 1 / sqrt(x), for the int32 x >= 0 (0 and 1 give (INT32_MAX, 0))."""
    if x <= 1:
        return np.int64(INT32_MAX), np.int64(0)
    shift = 11
    while x >= (1 << 29):
        x //= 4
        shift += 1
    # count leading zeros of a positive int32
    clz = 0
    probe = np.int64(1) << 31
    while (x & probe) == 0:
        clz += 1
        probe >>= 1
    left_shift_bit_pairs = (clz - 1) // 2 - 1
    shift -= left_shift_bit_pairs
    x <<= 2 * left_shift_bit_pairs
    # Newton-Raphson on Q3.28 fixed point: x_{k+1} = 1.5 x - (a / 2) x^3
    fp_input = x >> 1
    fp_half_input = rounding_divide_by_pot(fp_input, 1)
    fp_half_three = np.int64((1 << 28) + (1 << 27))
    r = np.int64(1 << 28)  # 1.0 in Q3.28
    for _ in range(5):
        # x*x*x in Q9.22, rescaled to Q3.28
        x3 = _sat_shl(saturating_rounding_doubling_high_mul(saturating_rounding_doubling_high_mul(r, r), r), 6)
        t = _wrap32(saturating_rounding_doubling_high_mul(fp_half_three, r)
                    - saturating_rounding_doubling_high_mul(fp_half_input, x3))
        r = _sat_shl(t, 3)
    # times sqrt(2)/2 in Q0.31
    r = saturating_rounding_doubling_high_mul(r, 1518500250)
    if shift < 0:
        r = _wrap32(r << -shift)
        shift = 0
    return r, np.int64(-shift)


@njit(cache=True, nogil=True)
def l2norm_q8(x, out, zp, unsigned):
    """x, out (rows, depth) 8-bit, as the official kernels: int8 output with scale 1/128 and zero point 0, or (unsigned)
    uint8 output with scale 1/128 and zero point 128 (each rescales the row's 1/norm its own way)."""
    rows, depth = x.shape
    for r in range(rows):
        acc = np.int64(0)
        for c in range(depth):
            d = np.int64(x[r, c]) - zp
            acc += d * d
        m, s = inv_sqrt_multiplier(_wrap32(acc))
        for c in range(depth):
            d = np.int64(x[r, c]) - zp
            if unsigned:
                out[r, c] = min(max(128 + multiply_by_quantized_multiplier(128 * d, m, s), 0), 255)
            else:
                out[r, c] = min(max(multiply_by_quantized_multiplier(d, m, s + 7), -128), 127)


@njit(cache=True, nogil=True)
def l2norm_f32(x, out, eps):
    """x, out (rows, depth) float32: x / max(sqrt(sum of squares), eps), summed in order."""
    rows, depth = x.shape
    e = np.float32(eps)
    for r in range(rows):
        sq = np.float32(0.0)
        for c in range(depth):
            v = x[r, c]
            sq += v * v
        norm = max(np.sqrt(sq), e)
        for c in range(depth):
            out[r, c] = x[r, c] / norm


def _rows(x) -> tuple[int, int]:
    """(rows, depth) of x seen as a matrix over its last axis."""
    depth = x.shape[-1]
    return (x.size // depth if depth else 0), depth


@kernel("L2_NORMALIZATION")
def L2_NORMALIZATION(ctx: PrepareContext) -> None:
    """Rows of the last axis scaled to unit L2 norm; quantized outputs have scale 1/128 (zero point 0 / 128)."""
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check(x.ndim >= 1, "input must have rank >= 1")
    ctx.check_dtype(x, np.float32, np.int8, np.uint8)
    ctx.check(ctx.options.get("fused_activation_function", 0) == 0, "fused activations are not supported")
    out = ctx.set_output(0, x.shape, x.dtype)
    if x.dtype != np.float32:
        ctx.check(out.quantization.scales.size > 0 and out.scale == 1.0 / 128.0,
                  f"the output scale must be 1/128, got {out.scale}")
        want_zp = 0 if x.dtype == np.int8 else 128
        ctx.check(out.zero_point == want_zp, f"the output zero point must be {want_zp}, got {out.zero_point}")
    if x.size == 0:
        return
    rows, depth = _rows(x)
    xv, ov = ctx.view(x, (rows, depth)), ctx.view(out, (rows, depth))
    if x.dtype == np.float32:
        ctx.call(l2norm_f32, xv, ov, 1e-6)
    elif x.dtype == np.int8:
        ctx.call(l2norm_q8, xv, ov, x.zero_point, 0)
    else:
        ctx.call(l2norm_q8, xv, ov, x.zero_point, 1)


# --- LOCAL_RESPONSE_NORMALIZATION ------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def lrn_f32(x, out, sq, radius, bias, alpha, beta):
    """x, out (rows, depth); sq is scratch of depth + 2 * radius (zero padded squares)."""
    rows, depth = x.shape
    a = np.float32(alpha)
    b = np.float32(bias)
    be = np.float32(beta)
    neg_beta = -be
    two_r = 2 * radius
    for j in range(sq.size):
        sq[j] = np.float32(0.0)
    for r in range(rows):
        for c in range(depth):
            v = x[r, c]
            sq[radius + c] = v * v * a
        # sliding window sum, added and subtracted in TFLite's order
        acc = np.float32(0.0)
        for i in range(two_r):
            acc += sq[i]
        for c in range(depth):
            acc += sq[c + two_r]
            out[r, c] = b + acc
            acc -= sq[c]
        for c in range(depth):
            d = out[r, c]
            if be == np.float32(1.0):
                out[r, c] = x[r, c] * (np.float32(1.0) / d)
            elif be == np.float32(0.5):
                out[r, c] = x[r, c] * (np.float32(1.0) / np.sqrt(d))
            else:
                out[r, c] = x[r, c] * d ** neg_beta


@kernel("LOCAL_RESPONSE_NORMALIZATION")
def LOCAL_RESPONSE_NORMALIZATION(ctx: PrepareContext) -> None:
    """Float32 4-D input normalized across channels by a window of 2 * radius + 1."""
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check(x.ndim == 4, f"input must be 4-D, got shape {list(x.shape)}")
    ctx.check_dtype(x, np.float32)
    o = ctx.options
    radius = int(o.get("radius", 0))
    ctx.check(radius >= 0, f"radius must be >= 0, got {radius}")
    out = ctx.set_output(0, x.shape, np.float32)
    if x.size == 0:
        return
    rows, depth = _rows(x)
    sq = ctx.temp((depth + 2 * radius,), np.float32)
    ctx.call(lrn_f32, ctx.view(x, (rows, depth)), ctx.view(out, (rows, depth)), sq, radius,
             float(np.float32(o.get("bias", 1.0))), float(np.float32(o.get("alpha", 1.0))),
             float(np.float32(o.get("beta", 0.5))))


# --- odml.rms_norm (STABLEHLO_COMPOSITE, litert-torch's RMSNorm): x * rsqrt(mean(x^2, last axis) + eps) * w -----


@njit(cache=True, nogil=True, error_model="numpy")
def rms_norm_f32(x, w, eps, out, rows, n, sq):
    """The odml.rms_norm decomposition in one pass per row: sq = x * x (the MUL), its MEAN (Eigen's packet order
    from the row's alignment in the squares tensor over several rows of several values, in order from -0.0 over
    one: vecmath.eigen_sum_f32, reduce.mean_last_axis_f32's order), r = 1 / sqrt(mean + eps) (ADD, RSQRT), then
    (x * r) * w (MUL, MUL), each step rounded to float32 as the decomposition's nodes round it. sq: n floats."""
    wide_vectors()
    e = np.float32(eps)
    d = np.float32(n)
    packets = rows > 1 and n > 1
    for j in range(rows):
        xr = x[j * n:(j + 1) * n]
        for i in range(n):
            sq[i] = xr[i] * xr[i]
        if packets:
            acc = eigen_sum_f32(sq, 0, n, j * n)
        else:
            acc = np.float32(-0.0)
            for i in range(n):
                acc += sq[i]
        r = np.float32(1.0) / np.sqrt(acc / d + e)
        o = out[j * n:(j + 1) * n]
        for i in range(n):
            o[i] = (xr[i] * r) * w[i]


def _rms_norm_accepts(attributes: dict, specs: list) -> bool:
    return (set(attributes) <= {"epsilon"} and isinstance(attributes.get("epsilon", 1e-6), (int, float))
            and len(specs) == 2 and all(s is not None and s.dtype == np.float32 for s in specs)
            and len(specs[1].shape) == 1)


@kernel("odml.rms_norm")
def RMS_NORM(ctx: PrepareContext) -> None:
    """The odml.rms_norm composite {epsilon} fused: inputs x (float32, normalized over its last axis) and w
    (float32 [n]). Bit for bit its decomposition (MUL x x, MEAN over the last axis, ADD eps, RSQRT, MUL, MUL): the
    squares are averaged by MEAN's own summation (Eigen's 4-lane order over several rows, in order over one)."""
    ctx.check_num(inputs=2, outputs=1)
    x, w = ctx.input(0), ctx.input(1)
    ctx.check_dtype(x, np.float32)
    ctx.check_dtype(w, np.float32)
    ctx.check(x.ndim >= 1, "x must have rank >= 1")
    n = x.shape[-1]
    ctx.check(w.shape == (n,), f"weight shape {list(w.shape)} is not [{n}] (x's last dimension)")
    out = ctx.set_output(0, x.shape, np.float32)
    if x.size == 0:
        return
    rows = x.size // n
    eps = float(np.float32(ctx.options["attributes"].get("epsilon", 1e-6)))
    ctx.call(rms_norm_f32, ctx.view(x, (x.size,)), w, eps, ctx.view(out, (out.size,)), rows, n,
             ctx.temp((n,), np.float32))


RMS_NORM.meta["accepts"] = _rms_norm_accepts

__all__ = ["L2_NORMALIZATION", "LOCAL_RESPONSE_NORMALIZATION", "RMS_NORM", "inv_sqrt_multiplier"]
