"""Fast DEPTHWISE_CONV_2D loops (float32, int8, uint8), scheduled by kernels/conv.py.

The kernels read a padded (and, for a depth multiplier > 1, channel-expanded) input: border taps read the padding
value (0.0 for float, the input zero point for integers) and every output pixel uses the full KH x KW window with no
per-pixel tap ranges. When the geometry needs no padding and the depth multiplier is 1, the input is used as it is;
otherwise the banded drivers build the padded rows one band of output rows at a time (`pad_rows`, one raw-byte loop
for every dtype) in a small arena scratch of about BAND_BYTES, rather than a padded copy of the whole input that
would live in the arena beside the input and the output.

Numerics are those of kernels/conv_loops.py, exactly:

- float: each output starts from the bias and adds x * w tap by tap in (ky, kx) order (no FMA contraction, no
  reassociation); a padded tap adds 0 * w = +-0, which leaves every finite sum unchanged;
- integers: acc = sum x * w - zp_in * (sum of the window's taps) + bias in wrapping int32. A padded tap contributes
  zp_in * w - zp_in * w = 0, so this equals the per-pixel valid-tap sum of conv_loops._dw_accumulate modulo 2^32,
  and the requantization takes the int32 value (RQ_NEON: channels below nvec rounded half up, the others half away
  from zero).

Two paths (kernels/isa.py): the portable one is plain Numba loops vectorized across channels by LLVM (3x3 written
as one expression per channel, other windows tap by tap over an output row); the "avx512" one computes tiles of
output pixels x 16 channels in explicit LLVM vector IR (`kernels/dwconv_simd.py`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .conv_loops import _mbqm_away, _mbqm_half_up
from .isa import has


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
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


# --- float32 --------------------------------------------------------------------------------------------------------


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


@njit(cache=True, nogil=True)
def dwconv_f32_padded(xp, w, bias, out, geo, lim):
    """Any KH x KW window over a padded input (see dw3x3_f32): per output row, the bias, then one pass over the
    row per tap (the row stays in L1), then the activation clamp."""
    N, HP, WP, C = xp.shape
    KH, KW = w.shape[0], w.shape[1]
    OH, OW = out.shape[1], out.shape[2]
    sh, sw, dh, dw = geo[0], geo[1], geo[2], geo[3]
    lo, hi = lim[0], lim[1]
    for n in range(N):
        for oy in range(OH):
            o = out[n, oy]
            for ox in range(OW):
                for c in range(C):
                    o[ox, c] = bias[c]
            for ky in range(KH):
                r = xp[n, oy * sh + ky * dh]
                for kx in range(KW):
                    wt = w[ky, kx]
                    for ox in range(OW):
                        ix = ox * sw + kx * dw
                        for c in range(C):
                            o[ox, c] += r[ix, c] * wt[c]
            for ox in range(OW):
                for c in range(C):
                    o[ox, c] = min(max(o[ox, c], lo), hi)


# --- integers -------------------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _requantize_row(acc, out, mult, shift, nvec, zp_out, qmin, qmax):
    """out[p, c] = clamp(requantize(acc[p, c]) + zp_out) over a row [P, C]; channels below nvec rounded half up
    (the NEON blocks), the others half away from zero (RQ_NEON)."""
    P, C = acc.shape
    for p in range(P):
        a = acc[p]
        o = out[p]
        for c in range(nvec):
            r = _mbqm_half_up(a[c], mult[c], shift[c]) + zp_out
            o[c] = min(max(r, qmin), qmax)
        for c in range(nvec, C):
            r = _mbqm_away(a[c], mult[c], shift[c]) + zp_out
            o[c] = min(max(r, qmin), qmax)


@njit(cache=True, inline="always")
def _bias_minus_zp(bias, wsum, zp_in, be):
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
    _bias_minus_zp(bias, wsum, zp_in, be)
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
    N, HP, WP, C = xp.shape
    KH, KW = w.shape[0], w.shape[1]
    OH, OW = out.shape[1], out.shape[2]
    sh, sw, dh, dw = geo[0], geo[1], geo[2], geo[3]
    _bias_minus_zp(bias, wsum, zp_in, be)
    for n in range(N):
        for oy in range(OH):
            for ox in range(OW):
                for c in range(C):
                    acc[ox, c] = be[c]
            for ky in range(KH):
                r = xp[n, oy * sh + ky * dh]
                for kx in range(KW):
                    wt = w[ky, kx]
                    for ox in range(OW):
                        ix = ox * sw + kx * dw
                        for c in range(C):
                            acc[ox, c] += np.int32(r[ix, c]) * wt[c]
            _requantize_row(acc, out[n, oy], mult, shift, nvec, zp_out, qmin, qmax)


# --- banded drivers: the padded input one band of output rows at a time -------------------------------------------
#
# xb [N, H, W, CI * B] is the input's bytes; sb [R, WP, CO * B] uint8 and s [1, R, WP, CO] are the same arena scratch
# (R padded rows: one band); geo = [sh, sw, dh, dw, pt, pl, dm, B, fill, band]. Per image and band of `band` output
# rows, the band's padded rows are built in the scratch, then the kernel above runs on them with the band's output
# rows (row offsets relative to the band), so every output value is computed exactly as over the whole padded input.


@njit(cache=True, nogil=True)
def dwconv_f32_banded(xb, sb, s, w, bias, out, geo, lim):
    N, OH, OW, C = out.shape
    KH, KW = w.shape[0], w.shape[1]
    band = geo[9]
    for n in range(N):
        for oy0 in range(0, OH, band):
            nb = min(band, OH - oy0)
            pad_band(xb, sb, geo, KH, n, oy0, nb)
            ob = out[n, oy0:oy0 + nb].reshape((1, nb, OW, C))
            if KH == 3 and KW == 3:
                dw3x3_f32(s, w, bias, ob, geo, lim)
            else:
                dwconv_f32_padded(s, w, bias, ob, geo, lim)


@njit(cache=True, nogil=True)
def dwconv_q_banded(xb, sb, s, w, bias, wsum, out, acc, be, geo, zp_in, mult, shift, zp_out, qmin, qmax, nvec):
    N, OH, OW, C = out.shape
    KH, KW = w.shape[0], w.shape[1]
    band = geo[9]
    for n in range(N):
        for oy0 in range(0, OH, band):
            nb = min(band, OH - oy0)
            pad_band(xb, sb, geo, KH, n, oy0, nb)
            ob = out[n, oy0:oy0 + nb].reshape((1, nb, OW, C))
            if KH == 3 and KW == 3:
                dw3x3_q(s, w, bias, wsum, ob, acc, be, geo, zp_in, mult, shift, zp_out, qmin, qmax, nvec)
            else:
                dwconv_q_padded(s, w, bias, wsum, ob, acc, be, geo, zp_in, mult, shift, zp_out, qmin, qmax, nvec)


# --- scheduling (called from conv.DEPTHWISE_CONV_2D's prepare) -----------------------------------------------------


# The band scratch: about BAND_BYTES of padded rows, but at least MIN_BAND output rows per band (a band re-pads the
# (KH - 1) * dh rows it shares with the previous one: one-row bands made MobileNetV2 224 int8 ~3% slower; with these
# values it is within ~1% and the MobileNetV2 arenas within 1.08x of the official runtime's).
BAND_BYTES = 16 * 1024
MIN_BAND = 2


def _padded_input(ctx, x, KH: int, KW: int, dm: int, geo, OH: int, OW: int, fill):
    """How the padded kernels read the input: (x, None, geo) when the window never leaves the image and dm == 1 (the
    input used as it is), else (s, (xb, sb), geo10): s [1, R, WP, CI * dm] a band scratch of R padded rows, sb its
    bytes, xb the input's bytes and geo10 = [sh, sw, dh, dw, pt, pl, dm, B, fill byte, band] for the banded drivers
    (fill: the padding value)."""
    N, H, W, CI = x.shape
    sh, sw, dh, dw, pt, pl = (int(v) for v in geo)
    HP = (OH - 1) * sh + (KH - 1) * dh + 1
    WP = (OW - 1) * sw + (KW - 1) * dw + 1
    g = np.ascontiguousarray(np.asarray(geo[:4], np.int64))
    if dm == 1 and pt == 0 and pl == 0 and HP <= H and WP <= W:
        return x, None, g
    B = x.dtype.itemsize
    fill_bytes = np.asarray(fill, x.dtype).reshape(1).view(np.uint8)
    assert np.all(fill_bytes == fill_bytes[0])  # 0.0 or an 8-bit zero point
    row = WP * CI * dm * B
    band = min(max((BAND_BYTES // row - (KH - 1) * dh - 1) // sh + 1, MIN_BAND, 1), OH)
    R = (band - 1) * sh + (KH - 1) * dh + 1
    s = ctx.temp((1, R, WP, CI * dm), x.dtype)
    xb = ctx.view(x, (N, H, W, CI * B), np.uint8)
    sb = ctx.view(s, (R, WP, CI * dm * B), np.uint8)
    g10 = np.array([sh, sw, dh, dw, pt, pl, dm, B, int(fill_bytes[0]), band], np.int64)
    return s, (xb, sb), g10


def _tap_offsets(xp, KH: int, KW: int, dh: int, dw: int) -> np.ndarray:
    """Element offsets of the window's taps from its corner in the (padded) input xp [N, HP, WP, C]."""
    WP, C = xp.shape[2], xp.shape[3]
    return np.array([(ky * dh * WP + kx * dw) * C for ky in range(KH) for kx in range(KW)], np.int64)


def schedule_f32(ctx, x, w, bias, out, geo, lim) -> None:
    """Schedule a float32 depthwise conv: x [N, H, W, CI] tensor, w the [KH, KW, CO] filter argument, geo =
    [sh, sw, dh, dw, pad_top, pad_left] (original coordinates)."""
    KH, KW, CO = ctx.input(1).shape[1:]
    N, OH, OW, _ = out.shape
    xp, bands, g = _padded_input(ctx, x, KH, KW, CO // x.shape[3], geo, OH, OW, 0.0)
    if has("avx2"):  # 16-lane tiles: one zmm, or two ymm on AVX2
        from .dwconv_simd import dwconv_f32_simd, dwconv_f32_simd_banded

        toff = _tap_offsets(xp, KH, KW, int(g[2]), int(g[3]))
        if bands is None:
            ctx.call(dwconv_f32_simd, xp, w, bias, out, g, toff, lim)
        else:
            ctx.call(dwconv_f32_simd_banded, *bands, xp, w, bias, out, g, toff, lim)
        return
    if bands is not None:
        ctx.call(dwconv_f32_banded, *bands, xp, w, bias, out, g, lim)
        return
    fn = dw3x3_f32 if (KH, KW) == (3, 3) else dwconv_f32_padded
    ctx.call(fn, xp, w, bias, out, g, lim)


def schedule_q(ctx, x, w, bias, wsum, out, geo, zp_in, mult, shift, zp_out, qmin, qmax, nvec) -> None:
    """Schedule an int8/uint8 depthwise conv (RQ_NEON requantization, channels below nvec rounded half up):
    w the [KH, KW, CO] filter argument minus its zero point, wsum its window sums."""
    KH, KW, CO = ctx.input(1).shape[1:]
    N, OH, OW, _ = out.shape
    xp, bands, g = _padded_input(ctx, x, KH, KW, CO // x.shape[3], geo, OH, OW, zp_in)
    quant = (int(zp_in), mult, shift, int(zp_out), int(qmin), int(qmax), int(nvec))
    # the AVX-512 tiles' half-up output stage (simd_int8's) needs the shifts of channels below nvec in [-31, 31]
    sv = np.asarray(shift)[:nvec]
    if has("avx2") and (nvec == 0 or (-31 <= int(sv.min()) and int(sv.max()) <= 31)):
        from .dwconv_simd import dwconv_q_simd, dwconv_q_simd_banded
        from .simd_int8 import PRM_BLOCK, const_values, output_params_host

        toff = _tap_offsets(xp, KH, KW, int(g[2]), int(g[3]))
        nblocks = max(-(-nvec // 16), 1)
        bv, wv = const_values(bias), const_values(wsum)
        if bv is not None and wv is not None:  # bias - zp_in * wsum and the output-stage parameters at prepare
            e = np.asarray(bv, np.int64) - int(zp_in) * np.asarray(wv, np.int64)
            e = ((e + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)
            be = ctx.const(e)
            prm = ctx.const(output_params_host(e, mult, shift, zp_out, nvec, nblocks).reshape(nblocks, PRM_BLOCK))
            fill = 0
        else:
            be = ctx.temp((CO,), np.int32)
            prm = ctx.temp((nblocks, PRM_BLOCK), np.int32)
            fill = 1
        if bands is None:
            ctx.call(dwconv_q_simd, xp, w, bias, wsum, out, be, g, toff, *quant, prm, fill)
        else:
            toff_x = _tap_offsets(x, KH, KW, int(g[2]), int(g[3]))  # taps in the unpadded input (interior pixels)
            ctx.call(dwconv_q_simd_banded, x, *bands, xp, w, bias, wsum, out, be, g, toff, toff_x, *quant, prm, fill)
        return
    be = ctx.temp((CO,), np.int32)
    acc = ctx.temp((OW, CO), np.int32)
    if bands is not None:
        ctx.call(dwconv_q_banded, *bands, xp, w, bias, wsum, out, acc, be, g, *quant)
        return
    fn = dw3x3_q if (KH, KW) == (3, 3) else dwconv_q_padded
    ctx.call(fn, xp, w, bias, wsum, out, acc, be, g, *quant)
