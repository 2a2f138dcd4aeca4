"""Hybrid (dynamic-range: float32 activations, constant int8 weights) FULLY_CONNECTED and CONV_2D on the AMX tiles
(isa level "amx"): hybrid_gemm's computation (read its module doc and hybrid_tiles') with simd_amx's products.

The input rows (FULLY_CONNECTED) or images (CONV_2D) are quantized at run time exactly as on the other tiles
(base/hybrid_rows.quantize_row), but stored as the signed bytes they are (no +128 flip: TDPBSSD multiplies signed
bytes), so the epilogue subtracts zp * sum_k w instead of (128 + zp) * sum_k w: the same exact int32 dot product
(q - zp) . w, then hybrid_tiles' float32 epilogue in the official operation order, from the int32 blocks the tiles
leave in the L1 scratch (store_block_hybrid). A CONV_2D image is then read as an int8 convolution's input is
(simd_amx's modes: rows in place, windows of a padded copy whose padding is the image's zero point, im2col
blocks). Weights are packed as simd_amx packs them; the channel parameters are hybrid_tiles.hybrid_params'.

A FULLY_CONNECTED whose depth is a multiple of 64 runs transposed instead (hybrid_fc_amx_t: C^T = W X^T, the
weights read in place as the A operand, the input rows packed per call as B), so no packed copy of its weights
exists.

Chosen by hybrid_schedule.schedule_hybrid before the other tile families when the level is amx and the layer pays on
the tiles (simd_amx.amx_pays for a CONV_2D; AMX_MIN_ROWS rows and AMX_MIN_MACS for a FULLY_CONNECTED). With
num_threads > 1 a FULLY_CONNECTED read in place runs hybrid_fc_amx_t_par (kernels/base/threads.py's chunks): each
block of input rows quantized and packed once, in row chunks, then its C^T blocks in chunks of whole 32-channel panels
(x 32-row blocks when the panels are fewer than the chunks), every worker loading its own tile configuration and
releasing the tiles at the end of each chunk; every output is one thread's block product and epilogue, so the bytes
are one thread's. The other hybrid layers go to the other families' parallel drivers."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base import amx
from lite_numba.kernels.base.hybrid_rows import quantize_row
from lite_numba.kernels.base.llvm_ir import F32, I32, data_ptr, store_live
from lite_numba.kernels.base.llvm_ir import i64 as const64
from lite_numba.kernels.base.llvm_ir import splat as splat_vector
from lite_numba.kernels.base.threads import CHUNKS_PER_THREAD, PARALLEL, call_at, run_chunks, serial_address
from lite_numba.kernels.linear.amx_output import C_STRIDE_I32, for_live_blocks
from lite_numba.kernels.linear.hybrid_gemv import const_bias, weight_rows
from lite_numba.kernels.linear.hybrid_tiles import HP_BLOCK, fill_bias, hybrid_params, weight_sums
from lite_numba.kernels.linear.simd_amx import (
    AMX_MIN_DEPTH,
    KSTEP,
    SCRATCH_HEAD,
    TM,
    TN,
    amx_pays,
    block_products,
    configure_tiles,
    gemm_pays,
    groups_of,
    layer_plan,
    pack_weights_amx,
    prepare_source,
    split_scratch,
    start_group,
)
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

_V16F = ir.VectorType(F32, 16)
_V16I = ir.VectorType(I32, 16)
_V16I32 = ir.VectorType(I32, 16)  # (shuffle masks)


@intrinsic
def store_block_hybrid(typingctx, c, rows, nb, hp, c0, out, dst, d0, ncols, rz, rsf, rs_off, rs_step, lim):
    """store_block_hybrid(c, rows, nb, hp, c0, out, dst, d0, ncols, rz, rsf, rs_off, rs_step, lim): the first `rows`
    rows of a C block (int32, C_STRIDE_I32 per row) through hybrid_tiles' epilogue into the float32 out at
    dst[d0 + r] + c0 .. (rows with dst < 0 skipped; channels < min(ncols, 16 nb)): dot = acc - z * ws (int32,
    wrapping), v = float32(dot) * (cs * sf) + bias, clamped by lim = [lo, hi, nan-to-lo], with row r's zero point
    z and scaling factor sf at rz / rsf[rs_off + r * rs_step] and the channels' ws, cs, bias from hp (hybrid_params'
    layout)."""
    ip = types.intp
    sig = types.void(c, ip, ip, hp, ip, out, dst, ip, ip, rz, rsf, ip, ip, lim)

    def codegen(context, builder, sig, args):
        _, rows_, nb_, _, c0_, _, _, d0_, ncols_, _, _, rs_off_, rs_step_, _ = args
        pc, php, po, pd, prz, prs, plim = (data_ptr(context, builder, sig.args[k], args[k])
                                           for k in (0, 3, 5, 6, 9, 10, 13))
        lo, hi, nl = (builder.load(builder.gep(plim, [const64(k)], inbounds=True)) for k in range(3))
        lo, hi = splat_vector(builder, lo, _V16F), splat_vector(builder, hi, _V16F)
        nan_lo = splat_vector(builder, builder.fcmp_unordered("!=", nl, ir.Constant(F32, 0.0)),
                              ir.VectorType(ir.IntType(1), 16))

        def tile(cv):
            base = builder.mul(builder.sdiv(cv, const64(16)), const64(HP_BLOCK))

            def param(k, ty):
                p = builder.gep(php, [builder.add(base, const64(16 * k))], inbounds=True)
                return builder.load(builder.bitcast(p, ty.as_pointer()), align=4)

            return param(0, _V16I), param(1, _V16F), param(2, _V16F)

        def row(wcb, r, d, acc, cv, count):
            ws, cs, bias = wcb
            at = builder.add(rs_off_, builder.mul(rs_step_, r))
            z = splat_vector(builder, builder.load(builder.gep(prz, [at], inbounds=True)), _V16I)
            s = splat_vector(builder, builder.load(builder.gep(prs, [at], inbounds=True)), _V16F)
            dot = builder.sub(acc, builder.mul(z, ws))
            y = builder.fadd(builder.fmul(builder.sitofp(dot, _V16F), builder.fmul(cs, s)), bias)
            m = builder.select(builder.fcmp_ordered(">", lo, y), lo, y)
            m = builder.select(builder.fcmp_ordered("<", hi, m), hi, m)
            m = builder.select(builder.and_(builder.fcmp_unordered("uno", y, y), nan_lo), lo, m)
            store_live(builder, m, builder.gep(po, [builder.add(d, cv)], inbounds=True), count)

        for_live_blocks(builder, pc, pd, nb_, c0_, d0_, rows_, ncols_, tile, row)
        return context.get_dummy_value()

    return sig, codegen


def _transpose16(builder, v):
    """16 vectors of 16 int32 (rows) -> the 16 columns: four stages of two-input shuffles swapping blocks of 8, 4, 2
    and 1 lanes between rows b apart."""
    v = list(v)
    for b in (8, 4, 2, 1):
        m1 = ir.Constant(_V16I32, [j if j & b == 0 else 16 + j - b for j in range(16)])
        m2 = ir.Constant(_V16I32, [j + b if j & b == 0 else 16 + j for j in range(16)])
        for i in range(16):
            if i & b == 0:
                v[i], v[i + b] = (builder.shuffle_vector(v[i], v[i + b], m1),
                                  builder.shuffle_vector(v[i], v[i + b], m2))
    return v


@intrinsic
def transpose_rows16(typingctx, src, s0, stride, dst, d0):
    """transpose_rows16(src, s0, stride, dst, d0): dst[d0 + 16 g + i] = src[s0 + i * stride + g] for i, g < 16 (int32
    arrays): 16 rows of 16 int32 loaded as vectors, transposed in registers (_transpose16), stored as 16 vectors."""
    ip = types.intp
    sig = types.void(src, ip, ip, dst, ip)

    def codegen(context, builder, sig, args):
        _, s0_, st_, _, d0_ = args
        ps = data_ptr(context, builder, sig.args[0], args[0])
        pd = data_ptr(context, builder, sig.args[3], args[3])
        rows = [builder.load(builder.bitcast(builder.gep(ps, [builder.add(s0_, builder.mul(st_, const64(i)))],
                                                         inbounds=True), _V16I.as_pointer()), align=4)
                for i in range(16)]
        for g, v in enumerate(_transpose16(builder, rows)):
            builder.store(v, builder.bitcast(builder.gep(pd, [builder.add(d0_, const64(16 * g))], inbounds=True),
                                             _V16I.as_pointer()), align=4)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def store_block_t(typingctx, c, nch, ntok, hp, c0, out, o_row0, N, rz, rsf, r0, lim):
    """store_block_t(c, nch, ntok, hp, c0, out, o_row0, N, rz, rsf, r0, lim): a transposed C block (rows: nch <= 32
    channels c0.., columns: ntok <= 32 input rows; C_STRIDE_I32 int32 per row) through hybrid_tiles' epilogue (as
    store_block_hybrid) into out[(o_row0 + t) * N + c0 + j] for channels < N; row t's zero point and scaling factor
    at rz / rsf[r0 + t]. Each 16 x 16 quarter is transposed in registers, so the stores are 16 channels wide."""
    ip = types.intp
    sig = types.void(c, ip, ip, hp, ip, out, ip, ip, rz, rsf, ip, lim)

    def codegen(context, builder, sig, args):
        _, nch_, ntok_, _, c0_, _, orow_, N_, _, _, r0_, _ = args
        pc, php, po, prz, prs, plim = (data_ptr(context, builder, sig.args[k], args[k]) for k in (0, 3, 5, 8, 9, 11))
        lo, hi, nl = (builder.load(builder.gep(plim, [const64(k)], inbounds=True)) for k in range(3))
        lo, hi = splat_vector(builder, lo, _V16F), splat_vector(builder, hi, _V16F)
        nan_lo = splat_vector(builder, builder.fcmp_unordered("!=", nl, ir.Constant(F32, 0.0)),
                              ir.VectorType(ir.IntType(1), 16))
        for q in range(2):  # channels 16 q ..
            live_q = builder.icmp_signed(">", nch_, const64(16 * q))
            with builder.if_then(live_q):
                cq = builder.add(c0_, const64(16 * q))
                base = builder.mul(builder.sdiv(cq, const64(16)), const64(HP_BLOCK))

                def param(k, ty, base=base):
                    p = builder.gep(php, [builder.add(base, const64(16 * k))], inbounds=True)
                    return builder.load(builder.bitcast(p, ty.as_pointer()), align=4)

                ws, cs, bias = param(0, _V16I), param(1, _V16F), param(2, _V16F)
                count = builder.sub(N_, cq)
                for h in range(2):  # input rows 16 h ..
                    with builder.if_then(builder.icmp_signed(">", ntok_, const64(16 * h))):
                        rows = [builder.load(builder.bitcast(builder.gep(pc, [const64((16 * q + r) * C_STRIDE_I32
                                                                                      + 16 * h)], inbounds=True),
                                                             _V16I.as_pointer()), align=4) for r in range(16)]
                        cols = _transpose16(builder, rows)
                        for t in range(16):
                            with builder.if_then(builder.icmp_signed(">", ntok_, const64(16 * h + t))):
                                at = builder.add(r0_, const64(16 * h + t))
                                z = splat_vector(builder, builder.load(builder.gep(prz, [at], inbounds=True)), _V16I)
                                s = splat_vector(builder, builder.load(builder.gep(prs, [at], inbounds=True)), _V16F)
                                dot = builder.sub(cols[t], builder.mul(z, ws))
                                y = builder.fadd(builder.fmul(builder.sitofp(dot, _V16F), builder.fmul(cs, s)), bias)
                                m = builder.select(builder.fcmp_ordered(">", lo, y), lo, y)
                                m = builder.select(builder.fcmp_ordered("<", hi, m), hi, m)
                                m = builder.select(builder.and_(builder.fcmp_unordered("uno", y, y), nan_lo), lo, m)
                                d = builder.add(builder.mul(builder.add(orow_, const64(16 * h + t)), N_), cq)
                                store_live(builder, m, builder.gep(po, [d], inbounds=True), count)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, inline="always")
def _weight_blocks(a0, c0, c1, K, xa, r0, r1, c, prm, out, m0, N, rz, rsf, lim):
    """Channels [c0, c1) of weight rows read at a0 (channel c0's row; K bytes apart, in place) over the packed input
    rows r0 .. r1 - 1 (r0 a multiple of TM) of xa (panels of 32 rows, 32 K bytes apart): C^T blocks through
    store_block_t."""
    ks = K // KSTEP
    for j in range(c0, c1, TN):
        ma = 2 if c1 - j >= TN else 1
        a = a0 + (j - c0) * K
        for p in range(r0, r1, TM):
            nb = 2 if r1 - p > 16 else 1
            block_products(ma, nb, a, K, 0, 1, ks, xa + p * K, c, 16 * K)
            store_block_t(c, 16 * ma, min(TM, r1 - p), prm, j, out, m0 + p, N, rz, rsf, p, lim)


@njit(cache=True, inline="always")
def _pack_rows(x, m0, rows, r0, r1, K, asym, xb, rz, rsf, qrow, qscratch):
    """Rows r0 .. r1 - 1 (r0 a multiple of 16) of the block of `rows` input rows at m0 quantized (signed bytes) and
    packed into xb as the B tiles (hybrid_fc_amx_t's layout), their zero points and scaling factors in rz / rsf[r].
    Per 16 rows: quantized into qrow ([16, K]), then per 64 bytes of depth their 16 x 16 int32 transposed in
    registers and stored as 16 whole lines of xb (row by row, each row touched all K / 4 lines of its tiles: 128 x
    2,048 took 128 us, 57 of them quantizing)."""
    ks = K // KSTEP
    K4 = K // 4
    q32 = qrow.view(np.int32)
    x32 = xb.view(np.int32)
    for g0 in range(r0, r1, 16):
        n = min(16, r1 - g0)
        for i in range(n):
            sf, zp = quantize_row(x, (m0 + g0 + i) * K, K, asym, qrow, i * K, 0, qscratch)
            rz[g0 + i] = zp
            rsf[g0 + i] = sf
        p, j = g0 // TM, g0 % TM // 16
        nb = 2 if rows - p * TM > 16 else 1
        for s in range(ks):
            d0 = (p * TM * K + (s * nb + j) * 1024) // 4
            if n == 16:
                transpose_rows16(q32, s * 16, K4, x32, d0)
            else:
                for g in range(16):
                    for i in range(n):
                        x32[d0 + 16 * g + i] = q32[i * K4 + s * 16 + g]


@njit(cache=True, inline="always")
def _channel_range(w, wtail, c0, c1, K, xb, r0, r1, c, prm, out, m0, N, rz, rsf, lim):
    """Channels [c0, c1) (c0 a multiple of 16) over packed rows r0 .. r1 - 1: those below N16 from w in place, the
    last N % 16 from wtail."""
    N16 = N // 16 * 16
    xa = np.int64(xb.ctypes.data)
    if c0 < min(c1, N16):
        _weight_blocks(np.int64(w.ctypes.data) + c0 * K, c0, min(c1, N16), K, xa, r0, r1, c, prm, out, m0, N, rz,
                       rsf, lim)
    if c1 > N16:
        _weight_blocks(np.int64(wtail.ctypes.data), N16, c1, K, xa, r0, r1, c, prm, out, m0, N, rz, rsf, lim)


@njit(cache=True, nogil=True, _nrt=False)
def hybrid_fc_amx_t(x, w, wtail, hpc, bias, out, geo, lim, xb, rz, rsf, hp, qrow, qscratch, scratch):
    """Hybrid FULLY_CONNECTED on the tiles with the weights in place, w [N * K] int8 (K a multiple of 64) as the A
    operand: C^T = W . X^T, 16 channels x 64 bytes of depth per A tile read with stride K where the model keeps
    them, the input rows quantized (signed, as hybrid_fc_amx) and packed per call as B tiles (xb uint8 [MB * K]:
    panels of 32 rows, per 64 bytes of depth their 16-row tiles of 1 KiB, row n's bytes 4g..4g+3 at 64 g + 4 n).
    wtail: the last N % 16 weight rows zero-padded to 16 ([16 * K]; read instead of past the end of w). hpc / hp /
    bias as hybrid_gemv (hp shorter than hpc: the bias is in hpc); geo = [M, K, N, asymmetric]; qrow int8 [16 K],
    qscratch int8 [K], scratch int32 (simd_amx.split_scratch: the C block and the tile configuration)."""
    M, K, N, asym = geo[0], geo[1], geo[2], geo[3] != 0
    prm = hpc
    if hp.size >= hpc.size:
        fill_bias(hp, hpc, bias)
        prm = hp
    MB = rz.size
    c, cfg, _ = split_scratch(scratch)
    configure_tiles(cfg)
    for m0 in range(0, M, MB):
        rows = min(MB, M - m0)
        _pack_rows(x, m0, rows, 0, rows, K, asym, xb, rz, rsf, qrow, qscratch)
        _channel_range(w, wtail, 0, N, K, xb, 0, rows, c, prm, out, m0, N, rz, rsf, lim)
    amx.release()


# --- hybrid_fc_amx_t with num_threads > 1 (kernels/base/threads.py) --------------------------------------------------


@njit(cache=True, nogil=True, _nrt=False)
def amx_t_pack(x, geo, xb, rz, rsf, qrow, qscratch, m0, rows, r0, r1):
    """_pack_rows by native address: rows r0 .. r1 - 1 of the block at m0 (a chunk of hybrid_fc_amx_t_par)."""
    _pack_rows(x, m0, rows, r0, r1, geo[1], geo[3] != 0, xb, rz, rsf, qrow, qscratch)


@njit(cache=True, nogil=True, _nrt=False)
def amx_t_block(w, wtail, prm, out, geo, lim, xb, rz, rsf, scratch, m0, r0, r1, c0, c1):
    """Channels [c0, c1) of packed rows r0 .. r1 - 1 of the block at m0 (a chunk of hybrid_fc_amx_t_par), with this
    worker's own tile configuration (loaded here, the tiles released at the end) and C block (scratch)."""
    c, cfg, _ = split_scratch(scratch)
    configure_tiles(cfg)
    _channel_range(w, wtail, c0, c1, geo[1], xb, r0, r1, c, prm, out, m0, geo[2], rz, rsf, lim)
    amx.release()


@njit(cache=True, inline="always")
def _pack_chunk(args, wk, j):
    addr, x, geo, xb, rz, rsf, qrow, qscratch, m0, rows, nch, T = args
    K, Q = qscratch.size // T, qrow.size // T
    g = (rows + 15) // 16  # groups of 16 rows
    call_at(addr, (x, geo, xb, rz, rsf, qrow[wk * Q:(wk + 1) * Q], qscratch[wk * K:(wk + 1) * K], m0, rows,
                   g * j // nch * 16, min(rows, g * (j + 1) // nch * 16)))


@njit(cache=True, inline="always")
def _block_chunk(args, wk, j):
    addr, w, wtail, prm, out, geo, lim, xb, rz, rsf, scratch, m0, rows, nr, nc, T = args
    S = scratch.size // T
    nrb, ncb = (rows + TM - 1) // TM, (geo[2] + TN - 1) // TN  # row blocks and channel panels of 32
    jr, jc = j // nc, j % nc
    r0, r1 = nrb * jr // nr * TM, min(rows, nrb * (jr + 1) // nr * TM)
    c0, c1 = ncb * jc // nc * TN, min(geo[2], ncb * (jc + 1) // nc * TN)
    call_at(addr, (w, wtail, prm, out, geo, lim, xb, rz, rsf, scratch[wk * S:(wk + 1) * S], m0, r0, r1, c0, c1))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def hybrid_fc_amx_t_par(addr_pack, addr_block, x, w, wtail, hpc, bias, out, geo, lim, xb, rz, rsf, hp, qrow,
                        qscratch, scratch, cnt, T):
    """hybrid_fc_amx_t (its arguments; qrow, qscratch and scratch T times longer: one slice per worker) in T
    workers, per block of input rows: the rows quantized and packed once, in row chunks (amx_t_pack at addr_pack),
    then the C^T blocks in chunks of whole 32-channel panels, of whole 32-row blocks when the panels are too few for
    the chunks (amx_t_block at addr_block). Every output is the one thread's block product and epilogue: the same
    bytes for any thread count."""
    M, N = geo[0], geo[2]
    prm = hpc
    if hp.size >= hpc.size:
        fill_bias(hp, hpc, bias)
        prm = hp
    MB = rz.size
    parts = CHUNKS_PER_THREAD * T
    for m0 in range(0, M, MB):
        rows = min(MB, M - m0)
        npk = min(parts, (rows + 15) // 16)
        run_chunks(T, cnt, npk, _pack_chunk, (addr_pack, x, geo, xb, rz, rsf, qrow, qscratch, m0, rows, npk, T))
        ncb = (N + TN - 1) // TN
        nc = min(parts, ncb)
        nr = min((rows + TM - 1) // TM, max(1, parts // nc))
        run_chunks(T, cnt, nr * nc, _block_chunk, (addr_block, w, wtail, prm, out, geo, lim, xb, rz, rsf, scratch,
                                                   m0, rows, nr, nc, T))


@njit(cache=True, inline="always")
def _blocks(a, lda, a2, rstride, nrun, ks, rows, wa, kpad, Np, N, c, hp, out, dst, rz, rsf, rs_off, rs_step, lim):
    """Every weight panel over `rows` rows of A (simd_amx's addressing), each block through the hybrid epilogue; row
    r's zero point and scaling factor at rs_off + r * rs_step."""
    for i in range(0, rows, TM):
        ma = 2 if rows - i > 16 else 1
        for j0 in range(0, Np, TN):
            nb = 2 if Np - j0 >= TN else 1
            block_products(ma, nb, a + i // 16 * a2, lda, rstride, nrun, ks, wa + j0 * kpad, c, a2)
            store_block_hybrid(c, 16 * ma, nb, hp, j0, out, dst, i, N - j0, rz, rsf, rs_off + i * rs_step, rs_step,
                               lim)


@njit(cache=True, nogil=True)
def hybrid_fc_amx(x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, qscratch, scratch):
    """Hybrid FULLY_CONNECTED on the tiles: x the float32 rows (flat [M * K]), wp packed by pack_weights_amx, hpc
    hybrid_params (the bias, float32 [N], written into hp each call), out flat [M * N] float32, geo = [M, K, N,
    asymmetric], lim = [lo, hi, nan-to-lo]. Scratch: abuf [MB, Kp] (MB a multiple of TM: the rows of a block,
    quantized), rz int32 / rsf float32 [MB], hp like hpc, qscratch int8 [K], scratch int32 (two C blocks, the tile
    configuration, the row table: MB + 2 TM int64)."""
    M, K, N, asym = geo[0], geo[1], geo[2], geo[3] != 0
    MB, Kp = abuf.shape
    Np = (N + 15) // 16 * 16
    fill_bias(hp, hpc, bias)
    c, cfg, dst = split_scratch(scratch)
    af = abuf.reshape(abuf.size)
    configure_tiles(cfg)
    ab = np.int64(abuf.ctypes.data)
    wa = np.int64(wp.ctypes.data)
    for m0 in range(0, M, MB):
        rows = min(MB, M - m0)
        for r in range(rows):
            sf, zp = quantize_row(x, (m0 + r) * K, K, asym, af, r * Kp, 0, qscratch)
            rz[r] = zp
            rsf[r] = sf
            dst[r] = (m0 + r) * N
        for r in range(rows, rows + 2 * TM):
            dst[r] = -1
        _blocks(ab, Kp, 16 * Kp, 0, 1, Kp // KSTEP, rows, wa, Kp, Np, N, c, hp, out, dst, rz, rsf, 0, 1, lim)
    amx.release()


@njit(cache=True, nogil=True, _nrt=False)
def hybrid_conv_amx(x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, qimg, qscratch, scratch):
    """Hybrid CONV_2D with one group on the tiles: x [N, H, W, CI] float32, wp packed as simd_amx.layer_plan packs
    them, out [N, OH, OW, CO] float32, geo simd_amx's (layer_plan of one image) with geo[15] the asymmetric option,
    lim = [lo, hi, nan-to-lo]. Each image is quantized into qimg (int8 [H * W * CI]; its zero point pads its windows)
    and runs as an int8 convolution's input. Scratch: abuf (the mode's, layer_plan), rz int32 / rsf float32 [N], hp,
    qscratch int8 [H * W * CI], scratch int32 (two C blocks, the tile configuration, the row table)."""
    N, H, W, CI = x.shape
    _, OH, OW, CO = out.shape
    per = H * W * CI
    Np = (CO + 15) // 16 * 16
    asym = geo[15] != 0
    fill_bias(hp, hpc, bias)
    c, cfg, dst = split_scratch(scratch)
    xf = x.reshape(x.size)
    q4 = qimg.reshape((1, H, W, CI))
    wa = np.int64(wp.ctypes.data)
    for n in range(N):
        sf, zp = quantize_row(xf, n * per, per, asym, qimg, 0, 0, qscratch)
        rz[n] = zp
        rsf[n] = sf
        o1 = out[n:n + 1]
        of = o1.reshape(o1.size)
        prepare_source(q4, o1, geo, zp, abuf)
        configure_tiles(cfg)
        ngroups, u, pr = groups_of(q4, o1, geo, abuf)
        for g in range(ngroups):
            a, lda, a2, rstride, nrun, ks, rows = start_group(g, q4, o1, geo, zp, abuf, dst, u, pr)
            _blocks(a, lda, a2, rstride, nrun, ks, rows, wa, nrun * ks * KSTEP, Np, CO, c, hp, of, dst, rz, rsf, n,
                    0, lim)
        amx.release()


def schedule_hybrid_amx(ctx, kind: str, x, w: np.ndarray, scales: np.ndarray, bias, out, lims: np.ndarray, *,
                        rows: int = 0, asymmetric: bool = False, geo_conv=None, threads: int = 1) -> bool:
    """Schedule a hybrid layer on the tiles (hybrid_schedule.schedule_hybrid's arguments; lims the float32 [lo, hi,
    nan-to-lo] it computed); False when the tiles do not pay (nothing scheduled). threads > 1: hybrid_fc_amx_t_par
    in that many workers, for a FULLY_CONNECTED read in place only (else False). The FULLY_CONNECTED's all-zero
    shortcut is the caller's."""
    N, K = w.shape
    Kp, Np = -(-K // KSTEP) * KSTEP, -(-N // 16) * 16
    if threads > 1 and (kind != "fc" or K % KSTEP != 0):
        return False
    hpc = ctx.const(hybrid_params(weight_sums(w), scales, bias if isinstance(bias, np.ndarray) else None, Np))
    hp = ctx.temp((Np // 16 * HP_BLOCK,), np.int32)
    if kind == "fc":
        if not gemm_pays(rows, K, N, AMX_MIN_DEPTH):
            return False
        if K % KSTEP == 0:  # the weights read in place as the A operand (hybrid_fc_amx_t)
            cb = const_bias(bias)
            if cb is not None:
                hpc = ctx.const(hybrid_params(weight_sums(w), scales, cb, Np))
                hp = ctx.temp((16,), np.int32)
            n16 = N // 16 * 16
            wtail = np.zeros((16, K), np.int8)
            wtail[:N - n16] = w[n16:]
            MB = min(-(-rows // TM) * TM, max(TM, (1 << 20) // K // TM * TM))
            args = [x, weight_rows(ctx, w), ctx.const(wtail.reshape(-1)), hpc, bias, out,
                    np.array([rows, K, N, int(asymmetric)], np.int64), lims, ctx.temp((MB * K,), np.uint8),
                    ctx.temp((MB,), np.int32), ctx.temp((MB,), np.float32), hp]
            S = SCRATCH_HEAD + 16  # (a multiple of 16 int32: each worker's slice 64-byte aligned)
            if threads <= 1:
                ctx.call(hybrid_fc_amx_t, *args, ctx.temp((16 * K,), np.int8), ctx.temp((K,), np.int8),
                         ctx.temp((S,), np.int32))
                return True
            q, scr = np.zeros(K, np.int8), np.zeros(S, np.int32)  # (the serial kernels' argument types)
            x_, wr, wt, _, _, out_, geo, _, xb, rz, rsf, _ = args
            a_pack = serial_address(amx_t_pack, (x_, geo, xb, rz, rsf, q, q, 0, 0, 0, 0))
            a_block = serial_address(amx_t_block, (wr, wt, hp, out_, geo, lims, xb, rz, rsf, scr, 0, 0, 0, 0, 0))
            ctx.call(hybrid_fc_amx_t_par, a_pack, a_block, *args, ctx.temp((16 * K * threads,), np.int8),
                     ctx.temp((K * threads,), np.int8), ctx.temp((S * threads,), np.int32), ctx.temp((1,), np.int64),
                     threads)
            return True
        MB = min(max(TM, (64 * 1024 // Kp) // TM * TM), -(-rows // TM) * TM)
        ctx.call(hybrid_fc_amx, x, ctx.const(pack_weights_amx(w)), hpc, bias, out,
                 np.array([rows, K, N, int(asymmetric)], np.int64), lims, ctx.temp((MB, Kp), np.uint8),
                 ctx.temp((MB,), np.int32), ctx.temp((MB,), np.float32), hp, ctx.temp((K,), np.int8),
                 ctx.temp((SCRATCH_HEAD + 2 * (MB + 2 * TM),), np.int32))
        return True
    B, H, W, CI = x.shape
    if not amx_pays((1, H, W, CI), (1,) + tuple(out.shape[1:]), geo_conv):
        return False
    geo, abuf_shape, wp, table = layer_plan((1, H, W, CI), (1,) + tuple(out.shape[1:]), w, geo_conv)
    geo = np.append(geo, int(asymmetric))
    per = H * W * CI
    ctx.call(hybrid_conv_amx, x, ctx.const(wp), hpc, bias, out, geo, lims, ctx.temp(abuf_shape, np.uint8),
             ctx.temp((B,), np.int32), ctx.temp((B,), np.float32), hp, ctx.temp((per,), np.int8),
             ctx.temp((per,), np.int8), ctx.temp((SCRATCH_HEAD + 2 * table,), np.int32))
    return True
