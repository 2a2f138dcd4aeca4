"""Fast DEPTHWISE_CONV_2D loops (float32, int8, uint8), scheduled by kernels/linear/conv.py.

Float32 with depth multiplier 1 on the SIMD paths reads the input in place, padding included, each pixel summing the
taps its window has in the image (`dwconv_direct.py`). The other kernels read a padded (and, for a depth multiplier
> 1, channel-expanded) input: border taps read the padding value (0.0 for float, the input zero point for integers)
and every output pixel uses the full KH x KW window with no per-pixel tap ranges. When the geometry needs no padding
and the depth multiplier is 1, the input is used as it is; otherwise the banded drivers build the padded rows one
band of output rows at a time (`pad_rows`, one raw-byte loop for every dtype) in a small arena scratch of about
BAND_BYTES, rather than a padded copy of the whole input that would live in the arena beside the input and the output.

Numerics are those of kernels/linear/conv_loops.py, exactly:

- float: each output starts from the bias and adds x * w tap by tap in (ky, kx) order (no FMA contraction, no
  reassociation); a padded tap adds 0 * w = +-0, which leaves every finite sum unchanged (a constant filter with a
  NaN or infinite weight, where 0 * w is NaN, takes the tap-range loop conv_loops.dwconv_f32 instead: the official
  kernel skips padded taps); the official clamp's NaN handling in its scalar tail is dwconv_loops.dw_nan_tail_f32;
- integers: acc = sum x * w - zp_in * (sum of the window's taps) + bias in wrapping int32. A padded tap contributes
  zp_in * w - zp_in * w = 0, so this equals the per-pixel valid-tap sum of conv_loops._dw_accumulate modulo 2^32,
  and the requantization takes the int32 value (RQ_NEON: channels below nvec rounded half up, the others half away
  from zero).

Two paths (kernels/base/isa.py): the portable one is plain Numba loops vectorized across channels by LLVM (3x3 written
as one expression per channel, other windows tap by tap over an output row); the "avx512" one computes tiles of
output pixels x 16 channels in explicit LLVM vector IR (`kernels/linear/dwconv_simd.py`).
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base import threads
from lite_numba.kernels.base.isa import has
from lite_numba.kernels.base.threads import CHUNKS_PER_THREAD, Recorder, bands, serial_address, threads_for
from lite_numba.kernels.linear.conv_loops import dwconv_f32
from lite_numba.kernels.linear.dwconv_direct import dwconv_f32_direct, dwconv_f32_direct_par
from lite_numba.kernels.linear.dwconv_loops import (
    DW_ACC_BUFFER,
    dw3x3_f32,
    dw3x3_q,
    dw_nan_tail_f32,
    dwconv_f32_banded,
    dwconv_f32_padded,
    dwconv_q_banded,
    dwconv_q_padded,
)
from lite_numba.kernels.linear.dwconv_simd import (
    dwconv_f32_simd,
    dwconv_f32_simd_banded,
    dwconv_f32_simd_banded_par,
    dwconv_q_simd,
    dwconv_q_simd_banded,
    dwconv_q_simd_banded_par,
)
from lite_numba.kernels.linear.parallel import DW_PAR
from lite_numba.kernels.linear.simd_int8 import PRM_BLOCK, const_values, output_params_host

# --- float32 --------------------------------------------------------------------------------------------------------


# --- integers -------------------------------------------------------------------------------------------------------


# --- banded drivers: the padded input one band of output rows at a time -------------------------------------------
#
# xb [N, H, W, CI * B] is the input's bytes; sb [R, WP, CO * B] uint8 and s [1, R, WP, CO] are the same arena scratch
# (R padded rows: one band); geo = [sh, sw, dh, dw, pt, pl, dm, B, fill, band]. Per image and band of `band` output
# rows, the band's padded rows are built in the scratch, then the kernel above runs on them with the band's output
# rows (row offsets relative to the band), so every output value is computed exactly as over the whole padded input.


# --- scheduling (called from conv.DEPTHWISE_CONV_2D's prepare) -----------------------------------------------------


# The band scratch: about BAND_BYTES of padded rows, but at least MIN_BAND output rows per band (a band re-pads the
# (KH - 1) * dh rows it shares with the previous one: one-row bands made MobileNetV2 224 int8 ~3% slower; with these
# values it is within ~1% and the MobileNetV2 arenas within 1.08x of the official runtime's).
BAND_BYTES = 16 * 1024
MIN_BAND = 2
# Float layers with a depth multiplier above 1 and fewer multiply-adds than this take the reference tap-range loop
# (conv_loops.dwconv_f32): small_cnn's [1, 2, 2, 32] -> 64 layer 0.7 -> 0.8 us, and no banded SIMD kernel to compile
# (~2.8 CPU s cold with its padding helpers); larger ones keep the banded SIMD driver (the reference loop is 4-8x
# slower there: 28 x 28 x 32 -> 64 74 -> 352 us).
SMALL_DM_MACS = 1 << 16


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
    wv = const_values(w)
    tiny = CO != x.shape[3] and N * OH * OW * CO * KH * KW < SMALL_DM_MACS
    if (wv is not None and not np.isfinite(wv).all()) or tiny:
        # the official kernel skips the taps in the padding; a padded tap's 0 * w is NaN for a NaN or infinite
        # weight: the per-pixel tap-range loop (run 101's NaN weights); also a small layer with a depth multiplier
        # above 1, whose SIMD driver (banded, channels repeated) would cost more to compile than it saves
        ctx.call(dwconv_f32, x, w, bias, out, geo, lim)
        return
    if has("avx2") and CO == x.shape[3]:  # depth multiplier 1: the input read in place, padding included
        tl = ctx.temp((4 * max(1, ctx.num_threads), KH * KW), np.int64)
        ctx.call(dwconv_f32_direct, x, w, bias, out, np.asarray(geo[:6], np.int64), lim, tl, 0, N, 0, OH)
        return
    xp, bands, g = _padded_input(ctx, x, KH, KW, CO // x.shape[3], geo, OH, OW, 0.0)
    if has("avx2"):  # depth multiplier > 1 (always banded: channels repeated): 16-lane tiles, zmm or ymm pairs
        toff = _tap_offsets(xp, KH, KW, int(g[2]), int(g[3]))
        toff_x = _tap_offsets(x, KH, KW, int(g[2]), int(g[3]))  # taps in the unpadded input (interior pixels)
        ctx.call(dwconv_f32_simd_banded, x, *bands, xp, w, bias, out, g, toff, toff_x, lim)
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
        toff = _tap_offsets(xp, KH, KW, int(g[2]), int(g[3]))
        nblocks = max(-(-nvec // 16), 1)
        fv = const_values(w)
        if fv is not None and fv.dtype == np.int8 and x.dtype == np.int8:
            # widened once here: the tiles load the 16 weights of a tap as int32 lanes instead of sign-extending
            # them in every tile (a shuffle each on x86, beside the inputs' own)
            w = ctx.const(np.ascontiguousarray(fv, np.int32))
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
            ctx.call(dwconv_q_simd_banded, x, *bands, xp, w, bias, wsum, out, be, g, toff, toff_x, *quant, prm, fill,
                     0, N, 0, OH)
        return
    be = ctx.temp((CO,), np.int32)
    acc = ctx.temp((OW, CO), np.int32)
    if bands is not None:
        ctx.call(dwconv_q_banded, *bands, xp, w, bias, wsum, out, acc, be, g, *quant)
        return
    fn = dw3x3_q if (KH, KW) == (3, 3) else dwconv_q_padded
    ctx.call(fn, xp, w, bias, wsum, out, acc, be, g, *quant)


def schedule_q_mt(ctx, x, w, bias, wsum, out, geo, zp_in, mult, shift, zp_out, qmin, qmax, nvec) -> None:
    """dwconv.schedule_q, or (ctx.num_threads > 1, enough work, the banded SIMD driver with its output-stage
    parameters computed at prepare) its parallel driver over ranges of images or bands of output rows, each worker
    with its own band scratch (schedule_q's preparation recorded and replayed). Same arguments."""
    rec = Recorder(ctx)
    schedule_q(rec, x, w, bias, wsum, out, geo, zp_in, mult, shift, zp_out, qmin, qmax, nvec)
    N, OH, OW, C = out.shape
    KH, KW = ctx.input(1).shape[1:3]
    t = threads_for(ctx, N * OH * OW * C * KH * KW, threads.MIN_DW_MACS)
    ch = _row_chunks(N, OH, t)
    if len(ch) < 2 or [fn for fn, _ in rec.calls] != [dwconv_q_simd_banded] or rec.calls[0][1][20] != 0:
        return rec.replay()

    def edit(fn, args):  # (x, xb, sb, s, w, bias, wsum, out, be, g, toff, toff_x, zp_in, mult, shift, zp_out, qmin,
        # qmax, nvec, prm, fill = 0, n0, n1, r0, r1) -> dwconv_q_simd_banded_par's arguments, the kernel itself
        # called by address on each chunk
        head = list(args[:20])
        return [serial_address(dwconv_q_simd_banded, head + [0, 1, 0, 1, 0])] + head

    rec.replay(t, {dwconv_q_simd_banded: dwconv_q_simd_banded_par},
               (np.array(ch, np.int64).reshape(-1), ctx.temp((1,), np.int64), t), edit)


def _row_chunks(N: int, OH: int, t: int) -> list[tuple[int, int, int, int]]:
    """The chunks [n0, n1, y0, y1] of a parallel depthwise driver: ranges of images, or of output rows of each
    image when there are fewer images than threads (a chunk runs its own bands from its first row); none for
    t = 1."""
    if t > 1 and N >= t:
        return [(n0, n1, 0, OH) for n0, n1 in bands(N, CHUNKS_PER_THREAD * t)]
    if t > 1:
        return [(n, n + 1, y0, y1) for n in range(N) for y0, y1 in bands(OH, -(-CHUNKS_PER_THREAD * t // N))]
    return []


def schedule_f32_mt(ctx, x, w, bias, out, geo, lim) -> None:
    """dwconv.schedule_f32, or (ctx.num_threads > 1 and enough work) its parallel driver (AVX-512 or portable,
    parallel.py) over ranges of images or bands of output rows (schedule_f32's preparation recorded and replayed
    with a band scratch per worker). Same arguments. Then, when CO % 4 != 0, the official kernel's scalar clamp of
    the values its vector blocks leave (dw_nan_tail_f32: a NaN there becomes the activation's upper bound; the
    kernels' own clamp keeps NaN, as the official vector blocks do)."""
    _schedule_f32_mt(ctx, x, w, bias, out, geo, lim)
    CO = out.shape[3]
    if CO % 4 and CO <= DW_ACC_BUFFER:
        ctx.call(dw_nan_tail_f32, out, float(np.asarray(lim)[1]), DW_ACC_BUFFER // CO)


def _schedule_f32_mt(ctx, x, w, bias, out, geo, lim) -> None:
    rec = Recorder(ctx)
    schedule_f32(rec, x, w, bias, out, geo, lim)
    N, OH, OW, C = out.shape
    KH, KW = ctx.input(1).shape[1:3]
    t = threads_for(ctx, N * OH * OW * C * KH * KW, threads.MIN_DW_MACS)
    par = {dwconv_f32_simd_banded: dwconv_f32_simd_banded_par, dwconv_f32_direct: dwconv_f32_direct_par}
    if t > 1 and not all(fn in par for fn, _ in rec.calls):  # the portable loops
        par = DW_PAR
    ch = _row_chunks(N, OH, t)
    if len(ch) < 2 or not all(fn in par for fn, _ in rec.calls):
        return rec.replay()

    def edit(fn, args):  # the SIMD drivers call dwconv_f32_simd by address (compiled for the chunks' types)
        if fn is dwconv_f32_direct:  # (x, w, bias, out, geo, lim, tl, n0, n1, y0, y1): the range per chunk
            return [serial_address(dwconv_f32_direct, args)] + args[:7]
        if fn is dwconv_f32_simd_banded:  # (x, xb, sb, s, w, bias, out, g, toff, toff_x, lim): pads whole bands
            xb, sb, s, w_, b_, o_, g_, toff, _toff_x, lim_ = args[1:]
            return [serial_address(dwconv_f32_simd, [s, w_, b_, o_, g_, toff, lim_]), xb, sb, s, w_, b_, o_, g_, toff,
                    lim_]
        return args

    rec.replay(t, par, (np.array(ch, np.int64).reshape(-1), ctx.temp((1,), np.int64), t), edit)
