"""int8 GEMM / convolution scheduling: which kernel runs a layer (the AMX tiles of simd_amx, AVX-512 VNNI, the
256-bit AVX2 / AVX-VNNI / NEON tiles of simd_int8_narrow, or the portable tiles) and, with num_threads > 1, its
parallel driver. Above the kernel modules, so none imports another's scheduler."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base import threads
from lite_numba.kernels.base.isa import has
from lite_numba.kernels.base.threads import (
    CHUNKS_PER_THREAD,
    PARALLEL,
    Recorder,
    bands,
    call_at,
    run_chunks,
    serial_address,
    team_limit,
    threads_for,
)
from lite_numba.kernels.linear.simd_amx import amx_pays, qconv_amx, schedule_amx
from lite_numba.kernels.linear.simd_int8 import (
    MR,
    PR,
    PRM_BLOCK,
    block_rows,
    channel_offsets,
    const_values,
    output_params_host,
    pack_weights_portable,
    pack_weights_vnni,
    pad_runs,
    padded_sizes,
    qconv_portable,
    qconv_vnni,
)
from lite_numba.kernels.linear.simd_int8_narrow import qconv_narrow, schedule_narrow
from lite_numba.kernels.linear.simd_int8_plain import plain_shifts, qconv_vnni_plain
from numba import njit

# --- the multi-threaded driver (num_threads > 1, see kernels/base/threads.py) ----------------------------------------
# Each chunk of a fixed list (ranges of images, or bands of output rows of one image), taken in turn by the workers,
# runs the serial driver (simd_int8 or simd_int8_narrow, by native address) on views of its rows with the worker's
# own slice of abuf and scratch, so every output byte is computed by the same code as with one thread.


@njit(cache=True, inline="always")
def _chunk_views(x, out, geos, ch, j):
    """The input, output and geometry of chunk j = images [n0, n1) x output rows [y0, y1) (C-contiguous views)."""
    N, H, W, CI = x.shape
    _, OH, OW, CO = out.shape
    n0, n1, y0, y1 = ch[4 * j], ch[4 * j + 1], ch[4 * j + 2], ch[4 * j + 3]
    g = geos[j]
    of = out.reshape(out.size)
    xf = x.reshape(x.size)
    o = of[(n0 * OH + y0) * OW * CO:((n1 - 1) * OH + y1) * OW * CO].reshape((n1 - n0, y1 - y0, OW, CO))
    if g[10] != 0:  # pointwise: input row = output row
        xs = xf[(n0 * H + y0) * W * CI:((n1 - 1) * H + y1) * W * CI].reshape((n1 - n0, y1 - y0, W, CI))
    else:  # the whole images; geos[j] moves the top padding up by y0 rows
        xs = xf[n0 * H * W * CI:n1 * H * W * CI].reshape((n1 - n0, H, W, CI))
    return xs, o, g


@njit(cache=True, inline="always")
def _qconv_chunk(args, w, j):
    addr, x, wp, offs, bias, out, geos, flip, zp_in, mult, shift, zp_out, qmin, qmax, abuf, scratch, ch, T = args
    A = abuf.shape[0] // T
    S = scratch.shape[0] // T
    xs, o, g = _chunk_views(x, out, geos, ch, j)
    call_at(addr, (xs, wp, offs, bias, o, g, flip, zp_in, mult, shift, zp_out, qmin, qmax, abuf[w * A:(w + 1) * A],
                    scratch[w * S:(w + 1) * S]))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def qconv_par(addr, x, wp, offs, bias, out, geos, geo, flip, zp_in, mult, shift, zp_out, qmin, qmax, abuf, scratch,
              ch, cnt, T):
    """The serial driver at native address addr (qconv_vnni or qconv_portable, called with
    threads.call_at) over the chunks ch = [n0, n1, y0, y1] * n, taken in turn by T workers (cnt: a counter
    scratch); worker w uses the w-th of T equal slices (first axis) of abuf (xpad) and scratch. With the team limit
    at 1 (jit/team.py: one core busy) one call of the serial driver over the whole layer (geo: its geometry), as
    with num_threads=1: the chunks one after the other had cost ~1 us a layer (small_cnn int8 at 2 threads with
    the workers off 28 us against 26 at one thread)."""
    if team_limit() == 1:
        call_at(addr, (x, wp, offs, bias, out, geo, flip, zp_in, mult, shift, zp_out, qmin, qmax,
                       abuf[:abuf.shape[0] // T], scratch[:scratch.shape[0] // T]))
        return
    run_chunks(T, cnt, ch.size // 4, _qconv_chunk, (addr, x, wp, offs, bias, out, geos, flip, zp_in, mult, shift,
                                                     zp_out, qmin, qmax, abuf, scratch, ch, T))


def schedule_qgemm(ctx, x, w: np.ndarray, zp_in: int, bias, out, geo_conv, mult, shift, zp_out: int, qmin: int,
                   qmax: int, zp_w: int | None = None) -> None:
    """Schedule the int8 GEMM / convolution of x [N, H, W, CI] (a tensor or view) with the constant weights
    w [CO, K] (OHWI flattened, int8) into out [N, OH, OW, CO] (tensor or view).

    geo_conv = [sh, sw, dh, dw, pad_t, pad_l, KH, KW] (FULLY_CONNECTED: x as [B, 1, 1, K], 1x1 geometry); bias an
    int32 [CO] kernel argument; mult/shift int32 [CO]. Uses the VNNI kernels when kernels/base/isa.py allows them.

    zp_w given: x and w are uint8 (TFLite's asymmetric per-tensor scheme) with the weight zero point zp_w; packed as
    w - 128 with the per-row term 128 - zp_w (see qconv_vnni)."""
    N, OH, OW, CO = out.shape
    K = w.shape[1]
    P = N * OH * OW
    shifts_ok = -31 <= int(np.min(shift)) and int(np.max(shift)) <= 31
    if has("amx") and zp_w is None and x.dtype == np.int8 and shifts_ok and amx_pays(x.shape, out.shape, geo_conv):
        # the AMX tiles (simd_amx): int8 activations as they are, the same output stage
        return schedule_amx(ctx, x, w, zp_in, bias, out, geo_conv, mult, shift, zp_out, qmin, qmax)
    Kp, Np = padded_sizes(K, CO)
    flip = 128 if x.dtype == np.int8 else 0
    d = 0
    if zp_w is not None:
        w16 = np.asarray(w, np.int16)
        w, d = (w16 - 128).astype(np.int8), 128 - int(zp_w)
        offs = channel_offsets(w16 - int(zp_w), 0, zp_in, Np)
    else:
        offs = channel_offsets(w, flip, zp_in, Np)
    # the VNNI output stage shifts int32 lanes left by at most 31 and right by at most 31 (requantize_vector);
    # other layers take the portable path; shifts in [-21, 0] (nearly every layer) the shorter stage of
    # qconv_vnni_plain
    vnni = has("avx512vnni") and shifts_ok
    vnni_fn = qconv_vnni_plain if plain_shifts(shift) else qconv_vnni
    # 256-bit tiles (AVX2 / AVX-VNNI; on NEON their generic-IR twins), simd_int8_narrow
    narrow = not vnni and (has("avx2") or has("neon")) and shifts_ok
    bias_values = const_values(bias)
    if (vnni or narrow) and bias_values is not None:  # the output-stage parameters once, at prepare
        off = offs[:CO].astype(np.int64) + np.asarray(bias_values, np.int64)
        offs = output_params_host(((off + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32), mult, shift,
                                  zp_out, CO, Np // 16)
    sh, sw, _, _, pt, pl, KH, KW = geo_conv
    pointwise = KH == 1 and KW == 1 and sh == 1 and sw == 1 and pt == 0 and pl == 0
    geo = np.array(list(geo_conv) + [OH, OW, int(pointwise), d], np.int64)
    if narrow:
        return schedule_narrow(ctx, x, w, offs, bias, out, geo, flip, zp_in, mult, shift, zp_out, qmin, qmax)
    wp = pack_weights_vnni(w) if vnni else pack_weights_portable(w)
    MB = block_rows(Kp, P, MR if vnni else PR)
    # prm rows for the per-row terms of uint8 weights (pixels of a block, or of an output row, plus a tile's slack)
    rs_blocks = -(-(max(MB, OW) + MR) // PRM_BLOCK) if d != 0 else 0
    dh, dw = geo_conv[2], geo_conv[3]
    if vnni and not pointwise and (KH > 1 or KW > 1):
        # KxK: read the windows in place from a padded copy of the input (no im2col)
        HP = (OH - 1) * sh + (KH - 1) * dh + 1
        WP = (OW - 1) * sw + (KW - 1) * dw + 1
        CI = x.shape[3]
        xpad = ctx.temp((1, N * HP * WP * CI + MR * sw * CI + 64), np.uint8)  # 2-D: abuf's type, one kernel
        runs = KH if dw == 1 else KH * KW
        ctx.call(vnni_fn, x, ctx.const(pack_weights_vnni(pad_runs(w, runs))), ctx.const(offs), bias, out,
                 np.append(geo, [0, 1]), flip, int(zp_in), np.asarray(mult, np.int32), np.asarray(shift, np.int32),
                 int(zp_out), int(qmin), int(qmax), xpad, ctx.temp((Np // 16 + rs_blocks, PRM_BLOCK), np.int32))
        return
    abuf = ctx.temp((MB, Kp), np.uint8)
    scratch = ctx.temp((Np // 16 + rs_blocks, PRM_BLOCK), np.int32) if vnni else ctx.temp((MB, Np), np.int32)
    fn = vnni_fn if vnni else qconv_portable
    ctx.call(fn, x, ctx.const(wp), ctx.const(offs), bias, out, geo, flip, int(zp_in), np.asarray(mult, np.int32),
             np.asarray(shift, np.int32), int(zp_out), int(qmin), int(qmax), abuf, scratch)


def schedule_qgemm_mt(ctx, x, w: np.ndarray, zp_in: int, bias, out, geo_conv, mult, shift, zp_out: int, qmin: int,
                      qmax: int, zp_w: int | None = None) -> None:
    """schedule_qgemm, or (ctx.num_threads > 1 and enough work) its parallel driver over ranges of images or, for
    one image, bands of output rows (schedule_qgemm's preparation, recorded and replayed with one abuf (xpad) and
    scratch slice per worker). Same arguments. (The chunks' geometries keep geo[11], the uint8 per-row weight.)"""
    rec = Recorder(ctx)
    schedule_qgemm(rec, x, w, zp_in, bias, out, geo_conv, mult, shift, zp_out, qmin, qmax, zp_w)
    N, OH, OW, CO = out.shape
    t = threads_for(ctx, N * OH * OW * CO * w.shape[1], threads.MIN_Q8_MACS)
    if t > 1 and N >= t:
        ch = [(n0, n1, 0, OH) for n0, n1 in bands(N, CHUNKS_PER_THREAD * t)]
    elif t > 1 and N == 1 and OH >= t:
        ch = [(0, 1, y0, y1) for y0, y1 in bands(OH, CHUNKS_PER_THREAD * t)]
    else:
        ch = []
    par = {fn: qconv_par for fn in (qconv_vnni, qconv_vnni_plain, qconv_portable, qconv_narrow, qconv_amx)}
    if len(ch) < 2 or not all(fn in par for fn, _ in rec.calls):
        return rec.replay()

    def edit(fn, args):
        addr = serial_address(fn, args)  # the serial driver, compiled for the types the chunks call it with
        geo = np.asarray(args[5], np.int64)  # [sh, sw, dh, dw, pad_t, pad_l, KH, KW, OH, OW, pointwise]
        geos = np.repeat(geo[None, :], len(ch), axis=0)
        for j, (_, _, y0, y1) in enumerate(ch):
            geos[j, 4] = geo[4] - y0 * geo[0]
            geos[j, 8] = y1 - y0
        return [addr] + args[:5] + [geos, geo] + args[6:]

    rec.replay(t, par, (np.array(ch, np.int64).reshape(-1), ctx.temp((1,), np.int64), t), edit)
