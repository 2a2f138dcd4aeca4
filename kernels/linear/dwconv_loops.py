"""DEPTHWISE_CONV_2D loops (float32, int8, uint8): the portable kernels and the band padding the SIMD tiles share.

See dwconv.py for how the kernels read a padded input and for their numerics."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.linear.conv_loops import mbqm_away, mbqm_half_up, widen
from numba import njit


@njit(cache=True, nogil=True, _nrt=False)
def pad_rows(x, xp, n, y0, pt, pl, dm, B, fill):
    """Rows y0 .. y0 + R - 1 of image n of the padded input, on raw bytes: xp[y, x, c * dm + m] = x[n, y0 + y - pt,
    x - pl, c] inside the image, else the padding value; x [N, H, W, CI * B] and xp [R, WP, CI * dm * B] uint8, B the
    element size, fill the padding byte (every byte of the padding value is `fill`: 0.0 for float, the zero point for
    8-bit integers)."""
    N, H, W, CIB = x.shape
    R, WP, COB = xp.shape
    CI = CIB // B
    left = min(pl, WP) * COB  # bytes of left padding in a row
    inner = max(min(W, WP - pl), 0) * COB  # bytes of the image part of a row
    for y in range(R):
        iy = y0 + y - pt
        row = xp[y].reshape(WP * COB)
        if iy < 0 or iy >= H:
            for k in range(WP * COB):
                row[k] = fill
            continue
        for k in range(left):
            row[k] = fill
        src = x[n, iy].reshape(W * CIB)
        dst = row[left:]  # (indices from 0: the copy loops vectorize)
        if dm == 1:
            for k in range(inner):
                dst[k] = src[k]
        elif B == 4:  # float32: whole elements (byte by byte, a 2 x 2 x 32 input took 2.6 us of 3.2)
            s4 = src.view(np.uint32)
            d4 = dst[:inner].view(np.uint32)
            for i in range(inner // COB):
                for c in range(CI):
                    v = s4[i * CI + c]
                    for m in range(dm):
                        d4[(i * CI + c) * dm + m] = v
        else:
            for i in range(inner // COB):
                d = dst[i * COB:]
                sp = src[i * CIB:]
                for c in range(CI):
                    for m in range(dm):
                        for b in range(B):
                            d[(c * dm + m) * B + b] = sp[c * B + b]
        tail = row[left + inner:]
        for k in range(WP * COB - left - inner):
            tail[k] = fill


@njit(cache=True, inline="always")
def band_rows(geo, KH, oy0, nb):
    """Padded input rows that output rows oy0 .. oy0 + nb - 1 read (geo = [sh, sw, dh, dw, ...])."""
    return (nb - 1) * geo[0] + (KH - 1) * geo[2] + 1


@njit(cache=True, inline="always")
def pad_band(xb, sb, geo, KH, n, oy0, nb):
    """Fill the band scratch sb [R, WP, CO * B] uint8 with the padded rows output rows oy0 .. oy0 + nb - 1 of image n
    read; geo = [sh, sw, dh, dw, pt, pl, dm, B, fill, band]."""
    pad_rows(xb, sb[:band_rows(geo, KH, oy0, nb)], n, oy0 * geo[0], geo[4], geo[5], geo[6], geo[7], geo[8])


@njit(cache=True, inline="always")
def _pad_span(src, dst, j0, j1, pl, W, CB, fill):
    """Padded columns [j0, j1) of one row (flat bytes, CB per pixel): input pixels j - pl inside [0, W) copied,
    the others the padding byte."""
    a = min(max(j0, pl), j1)
    b = max(min(j1, pl + W), a)
    d = dst[j0 * CB:a * CB]
    for k in range(d.size):
        d[k] = fill
    d = dst[a * CB:b * CB]
    sp = src[(a - pl) * CB:(b - pl) * CB]
    for k in range(d.size):
        d[k] = sp[k]
    d = dst[b * CB:j1 * CB]
    for k in range(d.size):
        d[k] = fill


@njit(cache=True, nogil=True, _nrt=False)
def pad_band_edges(xb, sb, geo, KH, n, oy0, nb, c_lo, c_hi):
    """pad_band for a band whose input rows are all inside the image and depth multiplier 1, but only the padded
    columns [0, c_lo) and [c_hi, WP) (the columns the band's edge pixels read); xb [N, H, W, C * B] and
    sb [R, WP, C * B] uint8."""
    N, H, W, CB = xb.shape
    WP = sb.shape[1]
    y0 = oy0 * geo[0] - geo[4]
    pl, fill = geo[5], np.uint8(geo[8])
    for y in range(band_rows(geo, KH, oy0, nb)):
        src = xb[n, y0 + y].reshape(W * CB)
        dst = sb[y].reshape(WP * CB)
        _pad_span(src, dst, 0, min(c_lo, WP), pl, W, CB, fill)
        _pad_span(src, dst, max(c_hi, 0), WP, pl, W, CB, fill)


# The official float kernel (optimized_ops::DepthwiseConv) accumulates a row of output pixels in chunks of
# DW_ACC_BUFFER // CO pixels and clamps each chunk's CO * pixels values with NEON code (through NEON_2_SSE on x86)
# in blocks of 16 and 4, which keep a NaN, then the last (CO * pixels) % 4 values one by one with
# std::max(lo, std::min(hi, v)), which turns a NaN into hi. Past DW_ACC_BUFFER channels it has no whole pixel per
# chunk and never returns.
DW_ACC_BUFFER = 4832


@njit(cache=True, nogil=True)
def dw_nan_tail_f32(out, hi, chunk):
    """out [N, OH, OW, CO] after a float depthwise kernel (clamped, NaN kept): NaN -> hi in the last
    (CO * pixels) % 4 values of every chunk of `chunk` output pixels of a row (DW_ACC_BUFFER); scheduled only when
    CO % 4 != 0 (otherwise there are none). Found by the fuzzing campaign (run 101, cases 500 and 2014: RELU6 with
    NaN inputs, 6.0 officially where we gave NaN)."""
    N, OH, OW, CO = out.shape
    for n in range(N):
        for oy in range(OH):
            row = out[n, oy].reshape(OW * CO)
            for x0 in range(0, OW, chunk):
                end = min(x0 + chunk, OW) * CO
                for k in range(end - (end - x0 * CO) % 4, end):
                    if np.isnan(row[k]):
                        row[k] = hi


@njit(cache=True, nogil=True)
def dw3x3_f32(xp, w, bias, out, geo, lim):
    """3x3 depthwise over a padded input: xp [N, HP, WP, C], w [3, 3, C], out [N, OH, OW, C];
    geo = [sh, sw, dh, dw] (padded coordinates: output (oy, ox) reads xp[oy * sh + ky * dh, ox * sw + kx * dw])."""
    N, HP, WP, C = xp.shape
    OH, OW = out.shape[1], out.shape[2]
    sh, sw, dh, dw = geo[0], geo[1], geo[2], geo[3]
    lo, hi = lim[0], lim[1]
    for n in range(N):
        for oy in range(OH):
            r0 = xp[n, oy * sh]
            r1 = xp[n, oy * sh + dh]
            r2 = xp[n, oy * sh + 2 * dh]
            o = out[n, oy]
            for ox in range(OW):
                i0 = ox * sw
                i1 = i0 + dw
                i2 = i1 + dw
                for c in range(C):
                    v = (bias[c] + r0[i0, c] * w[0, 0, c] + r0[i1, c] * w[0, 1, c] + r0[i2, c] * w[0, 2, c]
                         + r1[i0, c] * w[1, 0, c] + r1[i1, c] * w[1, 1, c] + r1[i2, c] * w[1, 2, c]
                         + r2[i0, c] * w[2, 0, c] + r2[i1, c] * w[2, 1, c] + r2[i2, c] * w[2, 2, c])
                    o[ox, c] = min(max(v, lo), hi)


@njit(cache=True, inline="always")
def _row_taps(xp, w, start, acc, n, oy, geo):
    """acc [OW, C] = start[c] + the sum over the window's taps (ky, kx in order) of x * w, for output row oy of
    image n of a padded input xp: one pass over the row per tap (the row stays in L1); float as it is, integers as
    int32 products (widen)."""
    OW, C = acc.shape
    sh, sw, dh, dw = geo[0], geo[1], geo[2], geo[3]
    for ox in range(OW):
        for c in range(C):
            acc[ox, c] = start[c]
    for ky in range(w.shape[0]):
        r = xp[n, oy * sh + ky * dh]
        for kx in range(w.shape[1]):
            wt = w[ky, kx]
            for ox in range(OW):
                ix = ox * sw + kx * dw
                for c in range(C):
                    acc[ox, c] += widen(r[ix, c]) * wt[c]


@njit(cache=True, nogil=True)
def dwconv_f32_padded(xp, w, bias, out, geo, lim):
    """Any KH x KW window over a padded input (see dw3x3_f32): per output row, the bias, then one pass over the
    row per tap (the row stays in L1), then the activation clamp."""
    N, OH, OW, C = out.shape
    lo, hi = lim[0], lim[1]
    for n in range(N):
        for oy in range(OH):
            o = out[n, oy]
            _row_taps(xp, w, bias, o, n, oy, geo)
            for ox in range(OW):
                for c in range(C):
                    o[ox, c] = min(max(o[ox, c], lo), hi)


@njit(cache=True, inline="always")
def _requantize_row(acc, out, mult, shift, nvec, zp_out, qmin, qmax):
    """out[p, c] = clamp(requantize(acc[p, c]) + zp_out) over a row [P, C]; channels below nvec rounded half up
    (the NEON blocks), the others half away from zero (RQ_NEON)."""
    P, C = acc.shape
    for p in range(P):
        a = acc[p]
        o = out[p]
        for c in range(nvec):
            r = mbqm_half_up(a[c], mult[c], shift[c]) + zp_out
            o[c] = min(max(r, qmin), qmax)
        for c in range(nvec, C):
            r = mbqm_away(a[c], mult[c], shift[c]) + zp_out
            o[c] = min(max(r, qmin), qmax)


@njit(cache=True, inline="always")
def bias_minus_zp(bias, wsum, zp_in, be):
    """be[c] = bias[c] - zp_in * wsum[c] in wrapping int32."""
    for c in range(be.shape[0]):
        be[c] = np.int32(bias[c] - zp_in * wsum[c])


@njit(cache=True, nogil=True)
def dw3x3_q(xp, w, bias, wsum, out, acc, be, geo, zp_in, mult, shift, zp_out, qmin, qmax, nvec):
    """Integer 3x3 depthwise over a padded input (padding = zp_in): xp [N, HP, WP, C] int8/uint8, w [3, 3, C]
    (int8, or int16 = uint8 filter minus its zero point), wsum [C] the window sums of w, acc [OW, C] int32 and
    be [C] int32 scratch; geo as in dw3x3_f32."""
    N, HP, WP, C = xp.shape
    OH, OW = out.shape[1], out.shape[2]
    sh, sw, dh, dw = geo[0], geo[1], geo[2], geo[3]
    bias_minus_zp(bias, wsum, zp_in, be)
    for n in range(N):
        for oy in range(OH):
            r0 = xp[n, oy * sh]
            r1 = xp[n, oy * sh + dh]
            r2 = xp[n, oy * sh + 2 * dh]
            for ox in range(OW):
                i0 = ox * sw
                i1 = i0 + dw
                i2 = i1 + dw
                a = acc[ox]
                for c in range(C):
                    a[c] = np.int32(be[c] + np.int32(r0[i0, c]) * w[0, 0, c] + np.int32(r0[i1, c]) * w[0, 1, c]
                                    + np.int32(r0[i2, c]) * w[0, 2, c] + np.int32(r1[i0, c]) * w[1, 0, c]
                                    + np.int32(r1[i1, c]) * w[1, 1, c] + np.int32(r1[i2, c]) * w[1, 2, c]
                                    + np.int32(r2[i0, c]) * w[2, 0, c] + np.int32(r2[i1, c]) * w[2, 1, c]
                                    + np.int32(r2[i2, c]) * w[2, 2, c])
            _requantize_row(acc, out[n, oy], mult, shift, nvec, zp_out, qmin, qmax)


@njit(cache=True, nogil=True)
def dwconv_q_padded(xp, w, bias, wsum, out, acc, be, geo, zp_in, mult, shift, zp_out, qmin, qmax, nvec):
    """Integer depthwise, any KH x KW window over a padded input (see dw3x3_q): per output row, taps accumulated
    one pass each over the int32 row acc [OW, C], then requantized."""
    bias_minus_zp(bias, wsum, zp_in, be)
    for n in range(out.shape[0]):
        for oy in range(out.shape[1]):
            _row_taps(xp, w, be, acc, n, oy, geo)
            _requantize_row(acc, out[n, oy], mult, shift, nvec, zp_out, qmin, qmax)


@njit(cache=True, inline="always")
def dw_rows(xp, out, geo, n, y0, y1):
    """Image n's padded input from the rows output rows [y0, y1) read, and those output rows (C-contiguous)."""
    N, HP, WP, C = xp.shape
    _, OH, OW, CO = out.shape
    sh = geo[0]
    xf = xp.reshape(xp.size)
    of = out.reshape(out.size)
    xs = xf[(n * HP + y0 * sh) * WP * C:(n + 1) * HP * WP * C].reshape((1, HP - y0 * sh, WP, C))
    os = of[(n * OH + y0) * OW * CO:(n * OH + y1) * OW * CO].reshape((1, y1 - y0, OW, CO))
    return xs, os


@njit(cache=True, inline="always")
def dw_f32_rows(xp, w, bias, out, geo, lim):
    """The float kernel for the window over a padded input: dw3x3_f32 for 3x3, else dwconv_f32_padded."""
    if w.shape[0] == 3 and w.shape[1] == 3:
        dw3x3_f32(xp, w, bias, out, geo, lim)
    else:
        dwconv_f32_padded(xp, w, bias, out, geo, lim)


@njit(cache=True, inline="always")
def each_band(xb, sb, s, w, out, geo, n, r0, r1, run, args):
    """Output rows [r0, r1) of image n, band by band (geo[9] rows): the band scratch sb (s: the same bytes as the
    padded rows) filled with the rows the band reads (pad_band), then run(args, s, the band's output rows as
    [1, nb, OW, C])."""
    _, OH, OW, C = out.shape
    for oy0 in range(r0, r1, geo[9]):
        nb = min(geo[9], r1 - oy0)
        pad_band(xb, sb, geo, w.shape[0], n, oy0, nb)
        run(args, s, out.reshape(out.size)[(n * OH + oy0) * OW * C:(n * OH + oy0 + nb) * OW * C].reshape(
            (1, nb, OW, C)))


@njit(cache=True, inline="always")
def dw_f32_band(args, s, ob):
    """each_band's run for the float kernels."""
    w, bias, geo, lim = args
    dw_f32_rows(s, w, bias, ob, geo, lim)


@njit(cache=True, inline="always")
def _dw_q_band(args, s, ob):
    w, bias, wsum, acc, be, geo, zp_in, mult, shift, zp_out, qmin, qmax, nvec = args
    if w.shape[0] == 3 and w.shape[1] == 3:
        dw3x3_q(s, w, bias, wsum, ob, acc, be, geo, zp_in, mult, shift, zp_out, qmin, qmax, nvec)
    else:
        dwconv_q_padded(s, w, bias, wsum, ob, acc, be, geo, zp_in, mult, shift, zp_out, qmin, qmax, nvec)


@njit(cache=True, nogil=True)
def dwconv_f32_banded(xb, sb, s, w, bias, out, geo, lim):
    """The float kernels over a band scratch, one band of output rows at a time (see dwconv.py)."""
    for n in range(out.shape[0]):
        each_band(xb, sb, s, w, out, geo, n, 0, out.shape[1], dw_f32_band, (w, bias, geo, lim))


@njit(cache=True, nogil=True)
def dwconv_q_banded(xb, sb, s, w, bias, wsum, out, acc, be, geo, zp_in, mult, shift, zp_out, qmin, qmax, nvec):
    """The integer kernels over a band scratch, one band of output rows at a time (see dwconv.py)."""
    for n in range(out.shape[0]):
        each_band(xb, sb, s, w, out, geo, n, 0, out.shape[1], _dw_q_band,
                  (w, bias, wsum, acc, be, geo, zp_in, mult, shift, zp_out, qmin, qmax, nvec))
