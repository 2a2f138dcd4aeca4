"""Compiled loops of the convolution family (CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV, CONV_3D).

Layouts (prepared by linear/conv.py): activations NHWC (NDHWC for 3-D); CONV_2D and TRANSPOSE_CONV weights repacked
to [KH, KW, CI_per_group, CO] so that the innermost loop is a contiguous multiply-accumulate over output channels;
depthwise weights [KH, KW, CO]; CONV_3D weights are DHWIO as stored. Padding is handled by computing, per output
position, the range of filter taps that fall inside the image (no per-tap branch).

Float loops accumulate in float32 starting from 0 and add the bias last, like the official GEMM-based kernels
(depthwise starts from the bias, like the official depthwise kernel). Quantized loops accumulate
(x - input_zero_point) * (w - filter_zero_point) in int32 (int64 for int16 activations with int64 bias) and
requantize per output channel.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.fixedpoint import multiply_by_quantized_multiplier, multiply_by_quantized_multiplier_int64
from numba import njit, types
from numba.extending import overload

# --- helpers ------------------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _tap_range(origin, dilation, size, taps):
    """Taps t in [t0, t1) with 0 <= origin + t * dilation < size."""
    t0 = 0
    if origin < 0:
        t0 = (-origin + dilation - 1) // dilation
    room = size - origin
    if room <= 0:
        return t0, 0
    t1 = (room + dilation - 1) // dilation
    if t1 > taps:
        t1 = taps
    return t0, t1


@njit(cache=True, inline="always")
def _window(o, stride, pad, dilation, size, taps):
    """The window of coordinate o along one dimension: (the position o * stride - pad that tap 0 reaches, and the
    taps [t0, t1), dilation apart, that land inside [0, size)); an output pixel's input window, or for the
    transposed conv an input pixel's output window."""
    origin = o * stride - pad
    t0, t1 = _tap_range(origin, dilation, size, taps)
    return origin, t0, t1


# Output stages. The official x86 build compiles TFLite's NEON code through NEON_2_SSE, so which rounding an output
# value gets depends on the code path and even on its position: vectorized blocks use NEON's rounding doubling
# multiply and rounding shift (both round half up), leftover scalars use TFLite's MultiplyByQuantizedMultiplier
# (half away from zero).


@njit(cache=True, inline="always")
def mbqm_away(acc, q, shift):
    # the official kernels add the bias to an int32 accumulator (wrapping) before requantizing
    return multiply_by_quantized_multiplier(np.int32(acc), q, shift)


@njit(cache=True, inline="always")
def mbqm_half_up(acc, q, shift):
    """Left shift (int32 wrap), doubling high multiply rounded half up, rounding right shift rounded half up:
    NEON vqrdmulh + vrshl, and ruy's x86 (AVX2/AVX-512) integer GEMM output stage."""
    left = max(shift, 0)
    right = max(-shift, 0)
    x = np.int64(np.int32(np.int64(np.int32(acc)) << left))
    v = (x * np.int64(q) + (np.int64(1) << 30)) >> 31
    # branch-free (vectorizable): the nudge is 0 when right == 0
    return (v + ((np.int64(1) << right) >> 1)) >> right


# Requantization modes (the `rq_mode` argument of the quantized loops). Mode constants are plain ints, and the
# loops branch on them rather than being instantiated per mode by a factory: a closure over a dispatcher changes
# its cache key in every process (the dispatcher pickles with a fresh uuid), so it would never be cached.
RQ_NEON = 0  # values with index < nvec: half up (NEON vqrdmulh + vrshl, ruy x86); others: half away from zero
RQ_INT64 = 1  # TFLite's int64-accumulator MultiplyByQuantizedMultiplier (int16 reference kernels, int64 bias)


@njit(cache=True, inline="always")
def _store_requantized(acc, bias, mult, shift, orow, c0, count, ibase, nvec, rq_mode, zp_out, qmin, qmax):
    """orow[c0 + j] = clamp(requantize(acc[j] + bias[c0 + j]) + zp_out, qmin, qmax) for j < count, channel c0 + j
    using mult/shift[c0 + j]. In RQ_NEON mode the value's index is ibase + j (its channel, or its flat position
    for a per-tensor Quantize); indices below nvec round half up, the others half away from zero. Each case is a
    branch-free loop, so that it vectorizes."""
    if rq_mode == RQ_INT64:
        for j in range(count):
            c = c0 + j
            r = multiply_by_quantized_multiplier_int64(acc[j] + bias[c], mult[c], shift[c]) + zp_out
            orow[c] = min(max(r, qmin), qmax)
        return
    split = min(max(nvec - ibase, 0), count)
    for j in range(split):
        c = c0 + j
        r = mbqm_half_up(acc[j] + bias[c], mult[c], shift[c]) + zp_out
        orow[c] = min(max(r, qmin), qmax)
    for j in range(split, count):
        c = c0 + j
        r = mbqm_away(acc[j] + bias[c], mult[c], shift[c]) + zp_out
        orow[c] = min(max(r, qmin), qmax)


@njit(cache=True, nogil=True)
def repack_to_channels_last(w, out, zp):
    """out[k, o] = w[o, k] - zp: OHWI filters (viewed [O, K]) to [K, O] (and uint8 filters offset by their zero
    point into int16) for filters known only at run time."""
    rows, K = w.shape
    for o in range(rows):
        for k in range(K):
            out[k, o] = w[o, k] - zp


@njit(cache=True, nogil=True)
def channel_sums(w, out):
    """out[c] = sum_k w[k, c] (depthwise filters known only at run time, viewed [KH * KW, CO])."""
    K, C = w.shape
    for c in range(C):
        out[c] = 0
    for k in range(K):
        for c in range(C):
            out[c] += w[k, c]


@njit(cache=True, inline="always")
def _hybrid_value(acc, cs, s, mode):
    """Rescale an integer accumulator to float32 with the association of each official hybrid kernel:
    0: acc * (channel_scale * input_scale) (optimized conv), 1: (acc * channel_scale) * input_scale (grouped /
    reference conv, transpose conv), 2: (acc * input_scale) * channel_scale (depthwise)."""
    a = np.float32(acc)
    if mode == 0:
        return a * np.float32(cs * s)
    if mode == 1:
        return np.float32(a * cs) * s
    return np.float32(a * s) * cs


# --- CONV_2D --------------------------------------------------------------------------------------------------------


# Loop-structure notes (measured on the generated code): the group loop is outermost, so the innermost loop is a
# plain contiguous range over one group's output channels (a group loop inside the tap loops kept LLVM from
# vectorizing: 10x slower); arrays are indexed in full rather than through row views. Integer inner loops are
# written `acc[c] += xv * w[...]` with xv an int32 scalar and no other arithmetic: LLVM then narrows Numba's int64
# arithmetic to 32-bit vector multiplies, while e.g. subtracting a filter zero point inside the loop leaves 64-bit
# multiplies. So quantized filters come with their zero point already subtracted (uint8 filters as int16), and the
# input zero point is subtracted from the scalar xv, or, where the input is the vector operand (depthwise with
# depth multiplier 1), folded in as zp_in * (sum of the filter taps used).


def widen(v):
    """A value as the conv loops multiply it: float as it is, integers as int32 (so products are int32 lanes)."""


@overload(widen, inline="always")
def _widen_overload(v):
    if isinstance(v, types.Float):
        return lambda v: v
    return lambda v: np.int32(v)


@njit(cache=True, inline="always")
def _pixels(x, OH, OW, KH, KW, G, geo, zero, pixel, params):
    """Every output pixel of a 2-D convolution of x [N, H, W, CI], group by group (the group loop outermost, see the
    notes above): pixel(params, n, g, oy, ox, taps, zi) with taps = (iy0, ix0, ky0, ky1, kx0, kx1, dh, dw), (iy0,
    ix0) the input position of tap (0, 0) and [ky0, ky1) x [kx0, kx1) the taps inside the image, and zi =
    zero(params, n) the input zero point of image n. geo = [sh, sw, dh, dw, pad_t, pad_l]."""
    N, H, W = x.shape[0], x.shape[1], x.shape[2]
    sh, sw, dh, dw, pt, pl = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5]
    for n in range(N):
        zi = zero(params, n)
        for g in range(G):
            for oy in range(OH):
                iy0, ky0, ky1 = _window(oy, sh, pt, dh, H, KH)
                for ox in range(OW):
                    ix0, kx0, kx1 = _window(ox, sw, pl, dw, W, KW)
                    pixel(params, n, g, oy, ox, (iy0, ix0, ky0, ky1, kx0, kx1, dh, dw), zi)


# the input zero point of image n: none (float), one (params ends with it), one per image (params ends with them)
@njit(cache=True, inline="always")
def _no_zero(params, n):
    return np.float32(0.0)


@njit(cache=True, inline="always")
def _tensor_zero(params, n):
    return np.int32(params[-1])


@njit(cache=True, inline="always")
def _image_zero(params, n):
    return np.int32(params[-1][n])


@njit(cache=True, inline="always")
def _conv_accumulate(x, w, acc, n, taps, ci0, c0, zi):
    """acc[co] = sum over the taps inside the image and the group's input channels of
    (x[n, iy, ix, ci0 + ci] - zi) * w[ky, kx, ci, c0 + co], for one output pixel of a CONV_2D (float: zi = 0, and
    the sum runs in the official order, tap by tap and channel by channel; integers: int32 products)."""
    iy0, ix0, ky0, ky1, kx0, kx1, dh, dw = taps
    CIG = w.shape[2]
    COG = acc.shape[0]
    for co in range(COG):
        acc[co] = 0
    for ky in range(ky0, ky1):
        iy = iy0 + ky * dh
        for kx in range(kx0, kx1):
            ix = ix0 + kx * dw
            for ci in range(CIG):
                xv = widen(x[n, iy, ix, ci0 + ci]) - zi
                for co in range(COG):
                    acc[co] += xv * w[ky, kx, ci, c0 + co]


@njit(cache=True, inline="always")
def _conv_f32_pixel(params, n, g, oy, ox, taps, zi):
    x, w, bias, out, acc, lo, hi = params
    c0 = g * acc.shape[0]
    _conv_accumulate(x, w, acc, n, taps, g * w.shape[2], c0, zi)
    for co in range(acc.shape[0]):
        v = acc[co] + bias[c0 + co]
        out[n, oy, ox, c0 + co] = min(max(v, lo), hi)


@njit(cache=True, nogil=True)
def conv2d_f32(x, w, bias, out, acc, geo, lim):
    """x [N,H,W,CI] float32, w [KH,KW,CIG,CO], bias [CO] -> out [N,OH,OW,CO]; acc [CO // groups] scratch;
    geo = [sh, sw, dh, dw, pad_t, pad_l]."""
    KH, KW, CIG, _ = w.shape
    _pixels(x, out.shape[1], out.shape[2], KH, KW, x.shape[3] // CIG, geo, _no_zero, _conv_f32_pixel,
            (x, w, bias, out, acc, lim[0], lim[1]))


@njit(cache=True, nogil=True)
def gemm_f32(x, w, bias, out, lim):
    """1x1 stride-1 CONV_2D as a GEMM: x [P, CI], w [CI, CO], bias [CO] -> out [P, CO] (accumulated in place)."""
    P, CI = x.shape
    CO = w.shape[1]
    lo, hi = lim[0], lim[1]
    for p in range(P):
        for co in range(CO):
            out[p, co] = 0.0
        for ci in range(CI):
            xv = x[p, ci]
            for co in range(CO):
                out[p, co] += xv * w[ci, co]
        for co in range(CO):
            v = out[p, co] + bias[co]
            out[p, co] = min(max(v, lo), hi)


@njit(cache=True, inline="always")
def _conv_q_pixel(params, n, g, oy, ox, taps, zi):
    x, w, bias, out, acc, mult, shift, zp_out, qmin, qmax, nvec, rq_mode, _zp_in = params
    COG = acc.shape[0]
    c0 = g * COG
    _conv_accumulate(x, w, acc, n, taps, g * w.shape[2], c0, zi)
    _store_requantized(acc, bias, mult, shift, out[n, oy, ox], c0, COG, c0, nvec, rq_mode, zp_out, qmin, qmax)


@njit(cache=True, nogil=True)
def conv2d_q(x, w, bias, out, acc, geo, zp_in, mult, shift, zp_out, qmin, qmax, nvec, rq_mode):
    """Quantized CONV_2D: acc = sum (x - zp_in) * w + bias (w: filter minus its zero point), requantized per output
    channel. acc [CO // groups] is int32 (int64 for int16 activations with int64 bias)."""
    KH, KW, CIG, _ = w.shape
    _pixels(x, out.shape[1], out.shape[2], KH, KW, x.shape[3] // CIG, geo, _tensor_zero, _conv_q_pixel,
            (x, w, bias, out, acc, mult, shift, zp_out, qmin, qmax, nvec, rq_mode, zp_in))


@njit(cache=True, nogil=True)
def gemm_q(x, w, bias, out, acc, zp_in, mult, shift, zp_out, qmin, qmax, nvec, rq_mode):
    """Quantized 1x1 stride-1 CONV_2D as a GEMM: x [P, CI], w [CI, CO] -> out [P, CO]."""
    P, CI = x.shape
    CO = w.shape[1]
    for p in range(P):
        for co in range(CO):
            acc[co] = 0
        for ci in range(CI):
            xv = np.int32(x[p, ci] - zp_in)
            for co in range(CO):
                acc[co] += xv * w[ci, co]
        _store_requantized(acc, bias, mult, shift, out[p], 0, CO, 0, nvec, rq_mode, zp_out, qmin, qmax)


@njit(cache=True, inline="always")
def _conv_hybrid_pixel(params, n, g, oy, ox, taps, zi):
    q, w, bias, out, acc, sf, cs, mode, lo, hi, _zpb = params
    COG = acc.shape[0]
    c0 = g * COG
    _conv_accumulate(q, w, acc, n, taps, g * w.shape[2], c0, zi)
    s = sf[n]
    for co in range(COG):
        c = c0 + co
        v = _hybrid_value(acc[co], cs[c], s, mode) + bias[c]
        out[n, oy, ox, c] = min(max(v, lo), hi)


@njit(cache=True, nogil=True)
def conv2d_hybrid(q, w, bias, out, acc, geo, sf, zpb, cs, mode, lim):
    """Hybrid CONV_2D: q [N,H,W,CI] int8 (input quantized per batch with scale sf[n], zero point zpb[n]), w int8
    [KH,KW,CIG,CO] with per-channel scales cs [CO]; integer accumulation, float32 rescale, + bias, clamp."""
    KH, KW, CIG, _ = w.shape
    _pixels(q, out.shape[1], out.shape[2], KH, KW, q.shape[3] // CIG, geo, _image_zero, _conv_hybrid_pixel,
            (q, w, bias, out, acc, sf, cs, mode, lim[0], lim[1], zpb))


# --- DEPTHWISE_CONV_2D ----------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _dw_accumulate(x, w, acc, n, taps, zi, dm):
    """acc[c] += sum over the valid taps of (x - zi) * w, for one output pixel of a depthwise conv with depth
    multiplier dm (computed once per layer: a division here would be one per pixel). With dm == 1 the input is the
    vector operand and zi is not subtracted here (see _dw_zero_point)."""
    iy0, ix0, ky0, ky1, kx0, kx1, dh, dw = taps
    CI = x.shape[3]
    CO = w.shape[2]
    for ky in range(ky0, ky1):
        iy = iy0 + ky * dh
        for kx in range(kx0, kx1):
            ix = ix0 + kx * dw
            if dm == 1:
                for c in range(CO):
                    acc[c] += x[n, iy, ix, c] * w[ky, kx, c]
            else:
                for ci in range(CI):
                    xv = widen(x[n, iy, ix, ci] - zi)
                    for m in range(dm):
                        acc[ci * dm + m] += xv * w[ky, kx, ci * dm + m]


@njit(cache=True, inline="always")
def _dw_zero_point(acc, w, wsum, taps, zi, dm):
    """With dm == 1, _dw_accumulate summed x * w: subtract zi * (the sum of the taps used); wsum holds the
    full-window sums."""
    _, _, ky0, ky1, kx0, kx1, _, _ = taps
    KH, KW, CO = w.shape
    if dm == 1 and zi != 0:
        if ky1 - ky0 == KH and kx1 - kx0 == KW:
            for c in range(CO):
                acc[c] -= zi * wsum[c]
        else:
            for ky in range(ky0, ky1):
                for kx in range(kx0, kx1):
                    for c in range(CO):
                        acc[c] -= zi * w[ky, kx, c]


@njit(cache=True, inline="always")
def _dw_f32_pixel(params, n, g, oy, ox, taps, zi):
    x, w, bias, out, dm, lo, hi = params
    o = out[n, oy, ox]
    for c in range(o.size):
        o[c] = bias[c]
    _dw_accumulate(x, w, o, n, taps, zi, dm)
    for c in range(o.size):
        o[c] = min(max(o[c], lo), hi)


@njit(cache=True, nogil=True)
def dwconv_f32(x, w, bias, out, geo, lim):
    """x [N,H,W,CI] float32, w [KH,KW,CO] (CO = CI * depth multiplier) -> out [N,OH,OW,CO], accumulated in place
    from the bias (the official depthwise kernel's order)."""
    _pixels(x, out.shape[1], out.shape[2], w.shape[0], w.shape[1], 1, geo, _no_zero, _dw_f32_pixel,
            (x, w, bias, out, w.shape[2] // x.shape[3], lim[0], lim[1]))


@njit(cache=True, inline="always")
def _dw_q_pixel(params, n, g, oy, ox, taps, zi):
    x, w, bias, out, acc, wsum, dm, mult, shift, zp_out, qmin, qmax, nvec, rq_mode, _zp_in = params
    for c in range(acc.size):
        acc[c] = 0
    _dw_accumulate(x, w, acc, n, taps, zi, dm)
    _dw_zero_point(acc, w, wsum, taps, zi, dm)
    _store_requantized(acc, bias, mult, shift, out[n, oy, ox], 0, acc.shape[0], 0, nvec, rq_mode, zp_out, qmin,
                       qmax)


@njit(cache=True, nogil=True)
def dwconv_q(x, w, bias, out, acc, wsum, geo, zp_in, mult, shift, zp_out, qmin, qmax, nvec, rq_mode):
    """Quantized DEPTHWISE_CONV_2D with per-channel requantization: w [KH,KW,CO] minus its zero point, wsum [CO] its
    sums over the window; acc [CO] int32 (int64 for int16 activations)."""
    _pixels(x, out.shape[1], out.shape[2], w.shape[0], w.shape[1], 1, geo, _tensor_zero, _dw_q_pixel,
            (x, w, bias, out, acc, wsum, w.shape[2] // x.shape[3], mult, shift, zp_out, qmin, qmax, nvec, rq_mode,
             zp_in))


@njit(cache=True, nogil=True)
def dwconv_hybrid(q, w, bias, out, acc, wsum, geo, sf, zpb, cs, nvec, lim):
    """Hybrid DEPTHWISE_CONV_2D: per-batch quantized input, int8 weights [KH,KW,CO] with per-channel scales.
    Channels below nvec are rescaled as (acc * channel_scale) * input_scale (the vector code), the others as
    (acc * input_scale) * channel_scale.

    The clamp to the activation range differs the same way for a NaN (an infinite input scale times a zero
    accumulator, a NaN bias): the official vector code clamps with vmaxq_f32 / vminq_f32, which the x86 build
    runs as _mm_max_ps / _mm_min_ps (a > b ? a : b, a < b ? a : b), so a NaN comes out as the activation minimum
    (-FLT_MAX, 0 for RELU / RELU6, -1 for RELU_N1_TO_1); the scalar tail's std::max / std::min keep it.

    Its own loop nest rather than _pixels: there Numba's reference counts of the nine arrays a pixel reads are not
    pruned, and the kernel runs 1.5x slower (Xeon model 207)."""
    N, H, W, CI = q.shape
    KH, KW, CO = w.shape
    OH, OW = out.shape[1], out.shape[2]
    sh, sw, dh, dw, pt, pl = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5]
    lo, hi = lim[0], lim[1]
    dm = CO // CI
    for n in range(N):
        zi = np.int32(zpb[n])
        s = sf[n]
        for oy in range(OH):
            iy0, ky0, ky1 = _window(oy, sh, pt, dh, H, KH)
            for ox in range(OW):
                ix0, kx0, kx1 = _window(ox, sw, pl, dw, W, KW)
                taps = (iy0, ix0, ky0, ky1, kx0, kx1, dh, dw)
                for c in range(CO):
                    acc[c] = 0
                _dw_accumulate(q, w, acc, n, taps, zi, dm)
                _dw_zero_point(acc, w, wsum, taps, zi, dm)
                for c in range(nvec):
                    v = _hybrid_value(acc[c], cs[c], s, 1) + bias[c]
                    v = v if v > lo else lo  # _mm_max_ps(v, lo): lo for a NaN
                    out[n, oy, ox, c] = v if v < hi else hi
                for c in range(nvec, CO):
                    v = _hybrid_value(acc[c], cs[c], s, 2) + bias[c]
                    v = lo if v < lo else v  # std::max(v, lo): NaN stays
                    out[n, oy, ox, c] = hi if hi < v else v


# --- TRANSPOSE_CONV -------------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def tconv_f32(x, w, bias, out, acc, geo, lim):
    """Transposed conv as a scatter: every input pixel adds x[n,iy,ix,:] . w[ky,kx,:,co] to
    out[n, iy*sh - pad_t + ky, ix*sw - pad_l + kx, co] (in input-pixel order, like the official GEMM + col2im);
    then bias and clamp. x [N,H,W,CI], w [KH,KW,CI,CO], acc [CO] scratch; geo = [sh, sw, pad_t, pad_l]."""
    N, H, W, CI = x.shape
    KH, KW, _, CO = w.shape
    OH, OW = out.shape[1], out.shape[2]
    sh, sw, pt, pl = geo[0], geo[1], geo[2], geo[3]
    lo, hi = lim[0], lim[1]
    for n in range(N):
        for oy in range(OH):
            for ox in range(OW):
                o = out[n, oy, ox]
                for c in range(CO):
                    o[c] = 0.0
        for iy in range(H):
            oy0, ky0, ky1 = _window(iy, sh, pt, 1, OH, KH)
            for ix in range(W):
                ox0, kx0, kx1 = _window(ix, sw, pl, 1, OW, KW)
                xp = x[n, iy, ix]
                for ky in range(ky0, ky1):
                    for kx in range(kx0, kx1):
                        wt = w[ky, kx]
                        for c in range(CO):
                            acc[c] = 0.0
                        for ci in range(CI):
                            xv = xp[ci]
                            wr = wt[ci]
                            for c in range(CO):
                                acc[c] += xv * wr[c]
                        o = out[n, oy0 + ky, ox0 + kx]
                        for c in range(CO):
                            o[c] += acc[c]
        for oy in range(OH):
            for ox in range(OW):
                o = out[n, oy, ox]
                for c in range(CO):
                    v = o[c] + bias[c]
                    o[c] = min(max(v, lo), hi)


@njit(cache=True, nogil=True)
def tconv_accumulate_int(x, w, scratch, geo, zp_in):
    """Integer transposed-conv scatter: scratch [N,OH,OW,CO] (int32 or int64) = sum (x - zp_in[n]) * w, w being
    the filter minus its zero point; zp_in [N] holds the input zero point of each batch (per batch for hybrid)."""
    N, H, W, CI = x.shape
    KH, KW, _, CO = w.shape
    OH, OW = scratch.shape[1], scratch.shape[2]
    sh, sw, pt, pl = geo[0], geo[1], geo[2], geo[3]
    for n in range(N):
        zi = np.int32(zp_in[n])
        for oy in range(OH):
            for ox in range(OW):
                for c in range(CO):
                    scratch[n, oy, ox, c] = 0
        for iy in range(H):
            oy0, ky0, ky1 = _window(iy, sh, pt, 1, OH, KH)
            for ix in range(W):
                ox0, kx0, kx1 = _window(ix, sw, pl, 1, OW, KW)
                for ky in range(ky0, ky1):
                    for kx in range(kx0, kx1):
                        for ci in range(CI):
                            xv = np.int32(x[n, iy, ix, ci] - zi)
                            for c in range(CO):
                                scratch[n, oy0 + ky, ox0 + kx, c] += xv * w[ky, kx, ci, c]


@njit(cache=True, nogil=True)
def requant_rows(scratch, bias, out, mult, shift, zp_out, qmin, qmax, nvec, per_element, rq_mode):
    """out[p, c] = clamp(requantize(scratch[p, c] + bias[c]) + zp_out) over [P, CO] views; in RQ_NEON mode a
    value's index is its channel (per-channel Quantize) or, when per_element, its flat position."""
    P, CO = scratch.shape
    for p in range(P):
        _store_requantized(scratch[p], bias, mult, shift, out[p], 0, CO, p * CO if per_element else 0, nvec,
                           rq_mode, zp_out, qmin, qmax)


@njit(cache=True, nogil=True)
def hybrid_rows(scratch, bias, out, sf, cs, mode, lim):
    """Hybrid rescale of integer accumulators [B, P, CO] (batch b uses input scale sf[b]) to float32 out."""
    B, P, CO = scratch.shape
    lo, hi = lim[0], lim[1]
    for b in range(B):
        s = sf[b]
        for p in range(P):
            a = scratch[b, p]
            o = out[b, p]
            for c in range(CO):
                v = _hybrid_value(a[c], cs[c], s, mode) + bias[c]
                o[c] = min(max(v, lo), hi)


# --- CONV_3D --------------------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def conv3d_f32(x, w, bias, out, geo, lim):
    """x [N,D,H,W,CI] float32, w [KD,KH,KW,CI,CO] -> out [N,OD,OH,OW,CO];
    geo = [sd, sh, sw, dd, dh, dw, pad_front, pad_top, pad_left].

    As the official kernel (im2col, then a ruy GEMM): a tap in the padding multiplies a zero, so a NaN or infinite
    weight there makes the output NaN (0 * inf); the clamp is min(v, hi) then max(., lo) with the x86 SIMD min/max
    (the second operand when one is NaN), so a NaN comes out hi (FLT_MAX without an activation, 6 for RELU6).
    Found by the fuzzing campaign (run 101, case 180: a NaN weight gave FLT_MAX officially in every output of its
    channel)."""
    N, D, H, W, CI = x.shape
    KD, KH, KW, _, CO = w.shape
    OD, OH, OW = out.shape[1], out.shape[2], out.shape[3]
    sd, sh, sw = geo[0], geo[1], geo[2]
    dd, dh, dw = geo[3], geo[4], geo[5]
    pf, pt, pl = geo[6], geo[7], geo[8]
    lo, hi = lim[0], lim[1]
    nonfinite = False  # a padded tap then adds 0 * w = NaN, else +-0 (skipped)
    for v in w.ravel():
        if not np.isfinite(v):
            nonfinite = True
            break
    zero = np.float32(0.0)
    for n in range(N):
        for od in range(OD):
            iz0, kz0, kz1 = _window(od, sd, pf, dd, D, KD)
            for oy in range(OH):
                iy0, ky0, ky1 = _window(oy, sh, pt, dh, H, KH)
                for ox in range(OW):
                    ix0, kx0, kx1 = _window(ox, sw, pl, dw, W, KW)
                    o = out[n, od, oy, ox]
                    for co in range(CO):
                        o[co] = 0.0
                    for kz in range(kz0, kz1):
                        xplane = x[n, iz0 + kz * dd]
                        for ky in range(ky0, ky1):
                            xrow = xplane[iy0 + ky * dh]
                            for kx in range(kx0, kx1):
                                xp = xrow[ix0 + kx * dw]
                                wt = w[kz, ky, kx]
                                for ci in range(CI):
                                    xv = xp[ci]
                                    wr = wt[ci]
                                    for co in range(CO):
                                        o[co] += xv * wr[co]
                    if nonfinite and (kz1 - kz0) * (ky1 - ky0) * (kx1 - kx0) < KD * KH * KW:
                        for kz in range(KD):
                            for ky in range(KH):
                                for kx in range(KW):
                                    if kz0 <= kz < kz1 and ky0 <= ky < ky1 and kx0 <= kx < kx1:
                                        continue
                                    for ci in range(CI):
                                        wr = w[kz, ky, kx, ci]
                                        for co in range(CO):
                                            o[co] += zero * wr[co]
                    for co in range(CO):
                        v = o[co] + bias[co]
                        v = v if v < hi else hi
                        o[co] = lo if v < lo else v
