"""Scheduling of the hybrid (dynamic-range) layers on the int8 tiles: which engine runs a hybrid FULLY_CONNECTED /
CONV_2D (hybrid_gemm) or an INT4 blockwise FULLY_CONNECTED (fc_int4) on the level in force, and with
num_threads > 1 their parallel drivers. Above the kernel modules, as qgemm is for the int8 layers.

`engine()` is the one place that maps a level to a tile family; on the amx level a layer that pays on the AMX tiles
runs there first (amx_hybrid; with num_threads > 1 only a FULLY_CONNECTED read in place, by amx_hybrid's own parallel
driver). A FULLY_CONNECTED otherwise runs hybrid_gemv's tiles over its weights
read in place (weight_rows), or from 2 rows with small weights (PACKED_MAX_BYTES) the packed tiles of hybrid_gemm,
as BATCH_MATMUL and CONV_2D do. The callers
(conv.py, fully_connected_quantized.py, fc_blockwise.py) keep their portable loops when it answers None.

Parallel drivers (kernels/base/threads.py: chunks taken in turn by the workers, each chunk running a serial driver
by native address on its part with the worker's own scratch): FULLY_CONNECTED and INT4 split the rows into chunks
when there are enough (each chunk quantizes its own rows), else the output channels into ranges of whole panels
(each chunk then quantizes the few rows itself: no chunk waits for another); CONV_2D quantizes (and pads) each
image once, then splits its blocks of output pixels. Every output element is computed by the same operations in
every split (the int32 sums are exact, the float32 epilogue per element fixed), so the bytes are those of one
thread for any thread count.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base import threads
from lite_numba.kernels.base.activation import ACT_NONE, ACT_RELU, ACT_RELU6, ACT_RELU_N1_TO_1
from lite_numba.kernels.base.isa import has
from lite_numba.kernels.base.threads import (
    CHUNKS_PER_THREAD,
    PARALLEL,
    bands,
    call_at,
    run_chunks,
    serial_address,
    threads_for,
)
from lite_numba.kernels.linear import fc_int4
from lite_numba.kernels.linear.amx_hybrid import schedule_hybrid_amx
from lite_numba.kernels.linear.hybrid_gemm import (
    BLOCK_DRIVERS,
    BMM_DRIVERS,
    CONV_DRIVERS,
    FC_DRIVERS,
    conv_image,
    hybrid_fc_zero,
)
from lite_numba.kernels.linear.hybrid_gemv import CHUNK, GEMV_DRIVERS, PF_BLOCKS, const_bias, rows_of, weight_rows
from lite_numba.kernels.linear.hybrid_tiles import HP_BLOCK, NARROW_MR, WIDE_MR, fill_bias, hybrid_params, weight_sums
from lite_numba.kernels.linear.simd_int8 import NR, block_rows, pack_weights_vnni, pad_runs, padded_sizes
from lite_numba.kernels.linear.simd_int8_narrow import pack_weights_pairs
from numba import njit

from lite_numba.ops import PrepareContext

# the hybrid FULLY_CONNECTED's clamps (std::max / std::min: a NaN becomes the lower limit), [lo, hi, nan-to-lo]
_FC_LIMITS = {ACT_NONE: (-np.inf, np.inf, 0.0), ACT_RELU: (0.0, np.inf, 1.0), ACT_RELU_N1_TO_1: (-1.0, 1.0, 1.0),
              ACT_RELU6: (0.0, 6.0, 1.0)}


def engine() -> int | None:
    """The tile family for the level in force: 2 the zmm vpdpbusd tiles (avx512vnni and above), 1 the 256-bit
    vpdpbusd ones (avxvnni), 0 the 256-bit vpmaddwd / vpmaddubsw ones (avx2, avx512, and on NEON their generic
    twins); None on the portable level."""
    if has("avx512vnni"):
        return 2
    if has("avxvnni"):
        return 1
    if has("avx2") or has("neon"):
        return 0
    return None


# --- parallel drivers -------------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _fc_chunk(args, w, j):
    addr, x, wp, hpc, bias, out, geos, lim, abuf, rz, rsf, hp, scratch, T = args
    MB, R, H, S = abuf.shape[0] // T, rz.size // T, hp.size // T, scratch.size // T
    call_at(addr, (x, wp, hpc, bias, out, geos[j], lim, abuf[w * MB:(w + 1) * MB], rz[w * R:(w + 1) * R],
                   rsf[w * R:(w + 1) * R], hp[w * H:(w + 1) * H], scratch[w * S:(w + 1) * S]))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def hybrid_fc_par(addr, x, wp, hpc, bias, out, geos, lim, abuf, rz, rsf, hp, scratch, cnt, T):
    """The serial hybrid FULLY_CONNECTED driver at native address addr (hybrid_gemm.hybrid_fc_*) on the chunks
    geos [n, 10] (its geometry with a row range and a channel range each), taken in turn by T workers; worker w uses
    the w-th of T equal slices of abuf (first axis), rz, rsf, hp and scratch."""
    run_chunks(T, cnt, geos.shape[0], _fc_chunk, (addr, x, wp, hpc, bias, out, geos, lim, abuf, rz, rsf, hp, scratch,
                                                  T))


@njit(cache=True, inline="always")
def _int4_chunk(args, w, j):
    addr, x, wq, st, kf, bias, out, geos, qbuf, qs, rzp, rsf, bb, scratch, T = args
    MB, Q, R, B, S = qbuf.shape[0] // T, qs.size // T, rzp.size // T, bb.size // T, scratch.size // T
    call_at(addr, (x, wq, st, kf, bias, out, geos[j], qbuf[w * MB:(w + 1) * MB], qs[w * Q:(w + 1) * Q],
                   rzp[w * R:(w + 1) * R], rsf[w * R:(w + 1) * R], bb[w * B:(w + 1) * B], scratch[w * S:(w + 1) * S]))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def fc_int4_par(addr, x, wq, st, kf, bias, out, geos, qbuf, qs, rzp, rsf, bb, scratch, cnt, T):
    """The serial INT4 driver at native address addr (fc_int4.fc_int4_*) on the chunks geos [n, 9], as
    hybrid_fc_par."""
    run_chunks(T, cnt, geos.shape[0], _int4_chunk, (addr, x, wq, st, kf, bias, out, geos, qbuf, qs, rzp, rsf, bb,
                                                    scratch, T))


@njit(cache=True, inline="always")
def _conv_chunk(args, w, j):
    addr, q4, src, abuf, wp, hp, out, geo, lim, rz, rsf, n, zp, ch, T = args
    MB = abuf.shape[0] // T
    call_at(addr, (q4, src, abuf[w * MB:(w + 1) * MB], wp, hp, out, geo, lim, rz, rsf, n, zp, ch[2 * j],
                   ch[2 * j + 1]))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def hybrid_conv_par(addr, x, wp, hpc, bias, out, geo, lim, src, abuf, rz, rsf, hp, q4, scratch, ch, cnt, T):
    """Hybrid CONV_2D (hybrid_gemm.conv_body's arguments) with each image quantized (and, direct, padded) once
    here, then its blocks of output pixels, the ranges ch = [b0, b1] * n, run by the serial blocks driver at
    native address addr (hybrid_gemm.conv_blocks_*) in T workers; worker w packs its im2col blocks into the w-th of
    T slices of abuf."""
    fill_bias(hp, hpc, bias)
    for n in range(x.shape[0]):
        zp = conv_image(x, n, src, q4, rz, rsf, geo, scratch)
        run_chunks(T, cnt, ch.size // 2, _conv_chunk, (addr, q4, src, abuf, wp, hp, out, geo, lim, rz, rsf, n, zp, ch,
                                                       T))


# --- prepare ----------------------------------------------------------------------------------------------------------


def _pack(w: np.ndarray, scheme: int) -> np.ndarray:
    return pack_weights_pairs(w) if scheme in (0, 3) else pack_weights_vnni(w)


def _row_chunks(ctx: PrepareContext, rows: int, units: int, depth: int, mr: int, geo: np.ndarray, m_at: int):
    """The chunks of a parallel FULLY_CONNECTED (module doc) as copies of geo with rows [m_at, m_at + 1] and units
    [m_at + 2, m_at + 3] set, and the number of workers; no chunks (serial) when one thread or too little work."""
    t = threads_for(ctx, rows * units * depth, threads.MIN_Q8_MACS)
    if t <= 1:
        return [], 1
    parts = CHUNKS_PER_THREAD * t
    if rows >= mr * parts:
        ranges = [(m0, m1, 0, units) for m0, m1 in bands(rows, parts, mr)]
    else:
        ranges = [(0, rows, min(n0 * NR, units), min(n1 * NR, units))
                  for n0, n1 in bands(-(-units // NR), parts)]
    geos = []
    for r in ranges:
        g = geo.copy()
        g[m_at:m_at + 4] = r
        geos.append(g)
    return (geos if len(geos) > 1 else []), t


def _call_parallel(ctx: PrepareContext, par, serial, args: list, at: int, geos: list, parts: tuple, t: int) -> None:
    """Schedule `par` over `geos` with the serial driver's address: args are the serial call's (its geometry at
    index `at`), `parts` the indices of the per-worker scratch (_Shape), made t times longer."""
    args = list(args)
    addr = serial_address(serial, args)
    for i in parts:
        a = args[i]
        args[i] = ctx.temp((a.shape[0] * t,) + tuple(a.shape[1:]), a.dtype)
    args[at] = np.array(geos, np.int64)
    ctx.call(par, addr, *args, ctx.temp((1,), np.int64), t)


def _schedule_gemv(ctx: PrepareContext, scheme: int, x, w: np.ndarray, scales, bias, out, rows: int, act: int,
                   asymmetric: bool) -> None:
    """The hybrid FULLY_CONNECTED over the weights in place (hybrid_gemv), serial or split by channels."""
    N, K = w.shape
    Np = -(-N // 16) * 16
    cb = const_bias(bias)
    hpc = ctx.const(hybrid_params(weight_sums(w), scales, cb, Np))
    R = rows_of(scheme)
    Kp = -(-max(K, 1) // CHUNK) * CHUNK
    MB = max(1, min(rows, 64 * 1024 // Kp))
    geo = np.array([rows, K, N, int(asymmetric), scheme, act, 0, rows, 0, N, PF_BLOCKS * R * K], np.int64)
    args = [x, weight_rows(ctx, w), hpc, bias, out, geo, np.array(_FC_LIMITS[act], np.float32),
            _Shape((MB, Kp), np.uint16 if scheme in (0, 3) else np.uint8), _Shape((MB,), np.int32),
            _Shape((MB,), np.float32), _Shape(((Np // 16 * HP_BLOCK) if cb is None else 16,), np.int32),
            _Shape(((K + 3) // 4 * 4 + 64,), np.int8)]
    driver = GEMV_DRIVERS[scheme]
    geos, t = _row_chunks(ctx, rows, N, K, 64, geo, 6)
    if geos:
        _call_parallel(ctx, hybrid_fc_par, driver, args, 5, geos, (7, 8, 9, 10, 11), t)
    else:
        ctx.call(driver, *(ctx.temp(a.shape, a.dtype) if isinstance(a, _Shape) else a for a in args))
    ctx.call(hybrid_fc_zero, x, bias, out, N, act)


# hybrid FULLY_CONNECTED weights of at most this many bytes run on hybrid_gemm's packed tiles (a packed copy) from 2
# rows on; larger ones, and one row, on hybrid_gemv over the weights in place. Measured (Xeon model 167, amx level,
# avx512vnni tiles, 1 thread, CPU time, weights cache-resident, load ~3): packed / in place at 1 row 0.77-1.02 (64-640
# x 64-192), at 2 rows 0.80-0.98, 4 rows 0.71-0.95, 8 rows 0.46-0.71, 17 rows 0.48-0.70 (vit_dynamic's 17 x 64 ->
# 192: 3.1 vs 6.1 us; the in-place tiles load a weight vector per vpdpbusd and sum each row's lanes across, the
# packed ones broadcast 8 rows against one); 17 x 2,048 -> 1,024 0.35. So the in-place kernel is for memory, not speed
# in cache: the cap keeps the LLMs' layers (Gemma 3 270M's smallest 640 x 256 = 160 KiB) in place, one copy of the
# model's weights; one row (a decode step) stays in place whatever the size (the weights streamed once).
PACKED_MAX_BYTES = 128 * 1024


def gemv_first(rows: int, K: int, N: int) -> bool:
    """Whether a hybrid FULLY_CONNECTED of `rows` rows, depth K and N channels runs hybrid_gemv over its weights in
    place (else hybrid_gemm's packed tiles): PACKED_MAX_BYTES."""
    return rows < 2 or K * N > PACKED_MAX_BYTES


class _Shape:
    """A scratch shape and dtype (serial_address reads only these), made a real temp by _call_parallel."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)


def schedule_hybrid(ctx: PrepareContext, kind: str, x, w: np.ndarray, scales: np.ndarray, bias, out, *, rows: int = 0,
                    act: int = ACT_NONE, asymmetric: bool = False, geo_conv=None, lim=None) -> bool:
    """Schedule a hybrid layer on the int8 tiles of the level in force; False (nothing scheduled) on the portable
    level or for what the tiles do not compute (FULLY_CONNECTED's TANH and SIGN_BIT activations).

    kind "fc": x the input as `rows` rows of K = w.shape[1] floats (flat view), w [N, K] int8, out flat [rows * N],
    act the fused activation, asymmetric the option. kind "bmm": the same with BATCH_MATMUL's epilogue (its
    reference kernel's zero-point correction, no bias nor activation; bias ignored). kind "conv": x [N, H, W, CI],
    w [CO, KH * KW * CI] (OHWI), out [N, OH, OW, CO], geo_conv [sh, sw, dh, dw, pad_t, pad_l, KH, KW], lim the
    float limits [lo, hi]. scales float32 per output channel; bias a float32 [N] argument (array or view)."""
    scheme = engine()
    if scheme is None or (kind == "fc" and act not in _FC_LIMITS):
        return False
    if has("amx") and kind in ("fc", "conv"):  # the AMX tiles (amx_hybrid) when they pay
        lims = np.array(_FC_LIMITS[act] if kind == "fc" else (lim[0], lim[1], 0.0), np.float32)
        work = rows * w.size if kind == "fc" else int(np.prod(out.shape[:3])) * w.size
        t = threads_for(ctx, work, threads.MIN_Q8_MACS)  # t > 1: a FULLY_CONNECTED read in place only
        if schedule_hybrid_amx(ctx, kind, x, w, scales, bias, out, lims, rows=rows, asymmetric=asymmetric,
                               geo_conv=geo_conv, threads=t):
            if kind == "fc":
                ctx.call(hybrid_fc_zero, x, bias, out, w.shape[0], act)
            return True
    if kind == "fc" and gemv_first(rows, w.shape[1], w.shape[0]):
        _schedule_gemv(ctx, scheme, x, w, scales, bias, out, rows, act, asymmetric)
        return True
    N, K = w.shape
    Kp, Np = padded_sizes(K, N)
    mr = WIDE_MR if scheme == 2 else NARROW_MR
    hpc = ctx.const(hybrid_params(weight_sums(w), scales, None, Np))
    if kind == "bmm":  # the bias slots hold the weight sums as float32 (hybrid_tiles._bmm_value)
        bias = ctx.const(weight_sums(w).astype(np.float32))
        act = ACT_NONE
    if kind in ("fc", "bmm"):
        drivers = FC_DRIVERS if kind == "fc" else BMM_DRIVERS
        if scheme == 0:  # the vpmaddwd tiles read the rows as 16-bit values (hybrid_gemm's scheme 3)
            scheme = 3
        lims = np.array(_FC_LIMITS[act], np.float32)
        geo = np.array([rows, K, N, int(asymmetric), scheme, act, 0, rows, 0, N], np.int64)
        MB = block_rows(Kp, rows, mr)
        args = [x, ctx.const(_pack(w, scheme)), hpc, bias, out, geo, lims,
                _Shape((MB, Kp), np.uint16 if scheme == 3 else np.uint8),
                _Shape((MB,), np.int32), _Shape((MB,), np.float32), _Shape((Np // 16 * HP_BLOCK,), np.int32),
                _Shape((K,), np.int8)]
        geos, t = _row_chunks(ctx, rows, N, K, mr, geo, 6)
        if geos:
            _call_parallel(ctx, hybrid_fc_par, drivers[scheme], args, 5, geos, (7, 8, 9, 10, 11), t)
        else:
            ctx.call(drivers[scheme], *(ctx.temp(a.shape, a.dtype) if isinstance(a, _Shape) else a for a in args))
        if kind == "fc":
            ctx.call(hybrid_fc_zero, x, bias, out, N, act)
        return True
    B, H, W, CI = x.shape
    _, OH, OW, _ = out.shape
    sh, sw, dh, dw, pt, pl, KH, KW = (int(v) for v in geo_conv)
    pointwise = KH == 1 and KW == 1 and sh == 1 and sw == 1 and pt == 0 and pl == 0
    direct = not pointwise and (KH > 1 or KW > 1)
    if scheme == 0 and direct:  # the padded image as 16-bit values for the vpmaddwd tiles (hybrid_gemm's scheme 3)
        scheme = 3
    a_dtype = np.uint16 if scheme == 3 else np.uint8
    geo = np.array([sh, sw, dh, dw, pt, pl, KH, KW, OH, OW, int(pointwise), 0, scheme, int(direct), int(asymmetric)],
                   np.int64)
    if direct:
        HP = (OH - 1) * sh + (KH - 1) * dh + 1
        WP = (OW - 1) * sw + (KW - 1) * dw + 1
        src = ctx.temp((1, HP * WP * CI + mr * sw * CI + 64), a_dtype)
        MB, abuf = 0, ctx.temp((1, 4), a_dtype)
        wp = _pack(pad_runs(w, KH if dw == 1 else KH * KW), scheme)
        nblocks = OH
    t = threads_for(ctx, OH * OW * N * K, threads.MIN_Q8_MACS)
    if not direct:
        src = ctx.temp((1, 4), np.uint8)
        MB = block_rows(Kp, OH * OW, mr)
        if t > 1:  # enough blocks for the workers' chunks
            MB = max(mr, min(MB, -(-OH * OW // (CHUNKS_PER_THREAD * t * mr)) * mr))
        wp = _pack(w, scheme)
        nblocks = -(-OH * OW // MB)
    lims = np.array([lim[0], lim[1], 0.0], np.float32)
    ch = bands(nblocks, CHUNKS_PER_THREAD * t) if t > 1 else []
    if not direct:
        abuf = ctx.temp((MB * (t if len(ch) > 1 else 1), Kp), np.uint8)
    args = (x, ctx.const(wp), hpc, bias, out, geo, lims, src, abuf, ctx.temp((B,), np.int32),
            ctx.temp((B,), np.float32), ctx.temp((Np // 16 * HP_BLOCK,), np.int32), ctx.temp((1, H, W, CI), np.int8),
            ctx.temp((H * W * CI,), np.int8))
    if len(ch) > 1:
        blocks = BLOCK_DRIVERS[scheme]
        blk_args = (args[12], src, _Shape((MB if not direct else 1, Kp if not direct else 4), a_dtype), args[1],
                    args[11], out, geo, lims, args[9], args[10], 0, 0, 0, 0)
        ctx.call(hybrid_conv_par, serial_address(blocks, blk_args), *args, np.array(ch, np.int64).reshape(-1),
                 ctx.temp((1,), np.int64), t)
    else:
        ctx.call(CONV_DRIVERS[scheme], *args)
    return True


def schedule_int4(ctx: PrepareContext, x, packed: np.ndarray, scales: np.ndarray, bias, has_bias: bool, out, M: int,
                  K: int, N: int, bs: int) -> bool:
    """Schedule the INT4 blockwise FULLY_CONNECTED (EvalBlockwise4Bit) on fc_int4's tiles (x flat float32 [M * K],
    packed the file's INT4 bytes, scales float32 [N * K / bs], bias float32 [N], out flat [M * N]); False (nothing
    scheduled) on the portable level or for block sizes the tiles do not take (not a multiple of 8, or above
    16384)."""
    kind = engine()
    if kind is None or bs % 8 != 0 or bs > 16384 or K % bs != 0:
        return False
    wq, st, kf = fc_int4.prepare_int4(packed, scales, N, K, bs)
    mr = fc_int4.WIDE_MR if kind == 2 else fc_int4.NARROW_MR
    MB = min(max(mr, (32 * 1024 // K) // mr * mr), -(-M // mr) * mr)
    geo = np.array([M, K, N, bs, int(has_bias), 0, M, 0, N], np.int64)
    args = [x, ctx.const(wq), ctx.const(st), ctx.const(kf), bias, out, geo, _Shape((MB, K), np.int8),
            _Shape((MB * (K // bs),), np.int32), _Shape((MB,), np.float32), _Shape((MB,), np.float32),
            _Shape((len(kf),), np.float32), _Shape((K,), np.int8)]
    geos, t = _row_chunks(ctx, M, N, K, mr, geo, 5)
    if geos:
        _call_parallel(ctx, fc_int4_par, fc_int4.DRIVERS[kind], args, 6, geos, (7, 8, 9, 10, 11, 12), t)
    else:
        ctx.call(fc_int4.DRIVERS[kind], *(ctx.temp(a.shape, a.dtype) if isinstance(a, _Shape) else a for a in args))
    return True
