"""The output stage of the AMX int8 engine (simd_amx): the int32 blocks the tiles leave in an L1 scratch, requantized
as ruy's x86 kernels do (simd_int8.requantize_vector's arithmetic and bytes), on AVX-512 only (the amx level implies
it), with fewer operations per 16 channels: 64-bit lanes shifted arithmetically (vpsravq), so no logical-shift
correction; the input zero point in the rounding term; the left shift and the second int32 shift (channels shifting
right by more than 21) only in layers that have them (`general`, decided per call from the parameters).

    x = (acc + offset) << left                      (int32, wrapping)
    y = (x * m + R) >> s                            (int64 lanes, even / odd channels apart: vpmuldq)
    y = (y >> q) + zq                               (general layers only)
    out = clamp(y, qmin, qmax)

with s = 31 + min(right, 21), q = right - min(right, 21), R = 2^30 + 2^(right - 1) * 2^31 (the nudge of the second
rounding, 0 for right = 0) + (q == 0 ? zp_out * 2^s : 0) and zq = (q > 0 ? zp_out : 0): ruy's two roundings half up
as one floor of a floor (simd_int8.requantize_vector's proof), |x * m| <= 2^62 and R < 2^61, no overflow.

Parameters, per block of 16 channels (PRM_BLOCK = 128 int32 slots, as the VNNI layout): offset, left shift,
multiplier, s, q, zq (16 int32 each, channel order), then the rounding terms R of the even channels and of the odd
channels (8 int64 each). Padding channels are zero."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.llvm_ir import I8, I64, V16I, data_ptr, store_live
from lite_numba.kernels.base.llvm_ir import i64 as const64
from lite_numba.kernels.base.llvm_ir import splat as splat_vector
from lite_numba.kernels.linear.simd_int8 import PRM_BLOCK
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

SLOT_OFF, SLOT_LEFT, SLOT_M, SLOT_S, SLOT_Q, SLOT_ZQ, SLOT_RE, SLOT_RO = 0, 16, 32, 48, 64, 80, 96, 112
C_STRIDE_I32 = 32  # int32 per row of the C scratch (amx.C_STRIDE bytes)

_V8I64 = ir.VectorType(I64, 8)
_EVEN_ODD = [i if i % 2 == 0 else 15 + i for i in range(16)]  # low dwords of even / odd int64 lanes, channel order


def _channel_terms(shift, zp_out):
    """(left, s, q, zq, R) of channels with these shifts (numpy int64 arrays)."""
    sh = np.asarray(shift, np.int64)
    right = np.maximum(-sh, 0)
    r1 = np.minimum(right, 21)
    q = right - r1
    rnd = (np.int64(1) << 30) + (((np.int64(1) << right) >> 1) << 31)
    rnd = rnd + np.where(q == 0, np.int64(zp_out) << (31 + r1), 0)
    return np.maximum(sh, 0), 31 + r1, q, np.where(q > 0, np.int64(zp_out), 0), rnd


def output_params_amx(off: np.ndarray, mult, shift, zp_out: int, nvalid: int, nblocks: int) -> np.ndarray:
    """The parameters (module doc) at prepare, flat int32 [nblocks * PRM_BLOCK]: channel c < nvalid with the int32
    offset off[c] (bias included), mult[c], shift[c] (in [-31, 31]); zeros elsewhere."""
    prm = np.zeros((nblocks, PRM_BLOCK), np.int32)
    p64 = prm.view(np.int64)
    c = np.arange(nvalid)
    b, lane = c // 16, c % 16
    left, s, q, zq, rnd = _channel_terms(np.asarray(shift)[:nvalid], zp_out)
    prm[b, SLOT_OFF + lane] = np.asarray(off, np.int32)[:nvalid]
    prm[b, SLOT_LEFT + lane] = left
    prm[b, SLOT_M + lane] = np.asarray(mult, np.int32)[:nvalid]
    prm[b, SLOT_S + lane] = s
    prm[b, SLOT_Q + lane] = q
    prm[b, SLOT_ZQ + lane] = zq
    p64[b, SLOT_RE // 2 + (lane % 2) * 8 + lane // 2] = rnd
    return prm.reshape(-1)


@njit(cache=True, inline="always")
def fill_params(prm, offs, bias, mult, shift, zp_out, nb):
    """output_params_amx in the kernel, for a bias known only at run time: prm flat int32 [nb * PRM_BLOCK], the
    channel offsets offs [nb * 16] (int32, without the bias), bias [CO]."""
    p64 = prm.view(np.int64)
    for c in range(nb * 16):
        b, lane = c // 16, c % 16
        base = b * PRM_BLOCK
        valid = c < bias.size
        sh = np.int64(shift[c]) if valid else np.int64(0)
        right = max(-sh, 0)
        r1 = min(right, 21)
        q = right - r1
        rnd = (np.int64(1) << 30) + (((np.int64(1) << right) >> 1) << 31)
        if q == 0:
            rnd += np.int64(zp_out) << (31 + r1)
        prm[base + SLOT_OFF + lane] = np.int32(offs[c] + bias[c]) if valid else 0
        prm[base + SLOT_LEFT + lane] = max(sh, 0)
        prm[base + SLOT_M + lane] = mult[c] if valid else 0
        prm[base + SLOT_S + lane] = 31 + r1
        prm[base + SLOT_Q + lane] = q
        prm[base + SLOT_ZQ + lane] = zp_out if q > 0 else 0
        p64[base // 2 + SLOT_RE // 2 + (lane % 2) * 8 + lane // 2] = rnd if valid else 0


@njit(cache=True, inline="always")
def is_general(prm, nb):
    """Whether any channel shifts left or right by more than 21 (the general form of the output stage)."""
    for b in range(nb):
        for lane in range(16):
            if prm[b * PRM_BLOCK + SLOT_LEFT + lane] != 0 or prm[b * PRM_BLOCK + SLOT_Q + lane] != 0:
                return 1
    return 0


def _params(builder, pp, c):
    """The parameter vectors of channels c..c+15 (c a multiple of 16): off, left, me, mo (sign-extended even / odd
    multipliers, <8 x i64>), se, so (their shifts), q, zq, re, ro."""
    base = builder.gep(pp, [builder.mul(c, const64(PRM_BLOCK // 16))], inbounds=True)

    def row(slot, ty):
        p = builder.gep(base, [const64(slot)], inbounds=True)
        return builder.load(builder.bitcast(p, ty.as_pointer()), align=4)

    c32 = ir.Constant(_V8I64, [32] * 8)
    m = builder.bitcast(row(SLOT_M, V16I), _V8I64)
    s = builder.bitcast(row(SLOT_S, V16I), _V8I64)
    me = builder.ashr(builder.shl(m, c32), c32)
    mo = builder.ashr(m, c32)
    se = builder.and_(s, ir.Constant(_V8I64, [0xFFFFFFFF] * 8))
    so = builder.lshr(s, c32)
    return (row(SLOT_OFF, V16I), row(SLOT_LEFT, V16I), me, mo, se, so, row(SLOT_Q, V16I), row(SLOT_ZQ, V16I),
            row(SLOT_RE, _V8I64), row(SLOT_RO, _V8I64))


def _requantize(builder, acc, params, lo, hi, general: bool):
    """The module doc's output stage on 16 int32 lanes; <16 x i32>."""
    off, left, me, mo, se, so, q, zq, re, ro = params
    c32 = ir.Constant(_V8I64, [32] * 8)
    x = builder.add(acc, off)
    if general:
        x = builder.shl(x, left)
    xq = builder.bitcast(x, _V8I64)
    te = builder.mul(builder.ashr(builder.shl(xq, c32), c32), me)
    to = builder.mul(builder.ashr(xq, c32), mo)
    ye = builder.bitcast(builder.ashr(builder.add(te, re), se), V16I)
    yo = builder.bitcast(builder.ashr(builder.add(to, ro), so), V16I)
    y = builder.shuffle_vector(ye, yo, ir.Constant(V16I, _EVEN_ODD))
    if general:
        y = builder.add(builder.ashr(y, q), zq)
    y = builder.select(builder.icmp_signed("<", y, lo), lo, y)
    return builder.select(builder.icmp_signed(">", y, hi), hi, y)


def for_live_blocks(builder, pc, pd, nb, c0, d0, rows, ncols, tile_fn, row_fn):
    """The loops of a store_block* intrinsic over a C block (pc: its int32, C_STRIDE_I32 per row; pd: the int64 row
    table): for each tile v of nb (16 channels from v16 = 16 v) with count = ncols - v16 > 0 channels, ctx =
    tile_fn(cv = c0 + v16); then for each of the first `rows` rows r with d = dst[d0 + r] >= 0, row_fn(ctx, r, d,
    acc, cv, count) with acc the row's 16 int32 of the tile (<16 x i32>)."""
    with cgutils.for_range(builder, nb) as vl:
        v16 = builder.mul(vl.index, const64(16))
        count = builder.sub(ncols, v16)
        with builder.if_then(builder.icmp_signed(">", count, const64(0))):
            cv = builder.add(c0, v16)
            ctx = tile_fn(cv)
            with cgutils.for_range(builder, rows) as rl:
                r = rl.index
                d = builder.load(builder.gep(pd, [builder.add(d0, r)], inbounds=True))
                with builder.if_then(builder.icmp_signed(">=", d, const64(0))):
                    src = builder.gep(pc, [builder.add(builder.mul(r, const64(C_STRIDE_I32)), v16)], inbounds=True)
                    acc = builder.load(builder.bitcast(src, V16I.as_pointer()), align=4)
                    row_fn(ctx, r, d, acc, cv, count)


@intrinsic
def store_block(typingctx, c, rows, nb, prm, c0, out, dst, d0, ncols, qmin, qmax, general):
    """store_block(c, rows, nb, prm, c0, out, dst, d0, ncols, qmin, qmax, general): requantize the first `rows` rows
    of a C block (int32 array, C_STRIDE_I32 per row) over nb tiles of 16 channels with the parameters of channels
    c0.. (prm flat int32, this module's layout) and store row r's first min(ncols, 16 nb) channels as bytes at
    out[dst[d0 + r] + c0 ..] (out flat int8, dst int64; rows with dst < 0 are skipped). general != 0: the general
    form (module doc). Loops, not unrolled: two copies of the output stage in all."""
    ip = types.intp
    sig = types.void(c, ip, ip, prm, ip, out, dst, ip, ip, types.int32, types.int32, ip)

    def codegen(context, builder, sig, args):
        c_, rows_, nb_, prm_, c0_, out_, dst_, d0_, ncols_, qmin_, qmax_, general_ = args
        pc = data_ptr(context, builder, sig.args[0], c_)
        pp = data_ptr(context, builder, sig.args[3], prm_)
        po = data_ptr(context, builder, sig.args[5], out_)
        pd = data_ptr(context, builder, sig.args[6], dst_)
        lo, hi = splat_vector(builder, qmin_, V16I), splat_vector(builder, qmax_, V16I)
        v16i8 = ir.VectorType(I8, 16)

        def body(general: bool):
            def row(params, r, d, acc, cv, count):
                y = builder.trunc(_requantize(builder, acc, params, lo, hi, general), v16i8)
                store_live(builder, y, builder.gep(po, [builder.add(d, cv)], inbounds=True), count)

            for_live_blocks(builder, pc, pd, nb_, c0_, d0_, rows_, ncols_, lambda cv: _params(builder, pp, cv), row)

        with builder.if_else(builder.icmp_signed("!=", general_, const64(0))) as (gen, fast):
            with gen:
                body(True)
            with fast:
                body(False)
        return context.get_dummy_value()

    return sig, codegen



@intrinsic
def store_block_i32(typingctx, c, rows, nb, coff, c0, acc, dst, d0, ncols, rterm):
    """store_block_i32(c, rows, nb, coff, c0, acc, dst, d0, ncols, rterm): the first `rows` rows of a C block
    (int32, C_STRIDE_I32 per row) as int32 sums: acc[dst[d0 + r] + c0 + j] = C[r, j] + coff[c0 + j] +
    rterm[d0 + r] (wrapping) for j < min(ncols, 16 nb); rows with dst < 0 are skipped. The zero-point terms of an
    integer GEMM whose output stage runs elsewhere (BATCH_MATMUL's requantize)."""
    ip = types.intp
    sig = types.void(c, ip, ip, coff, ip, acc, dst, ip, ip, rterm)

    def codegen(context, builder, sig, args):
        c_, rows_, nb_, coff_, c0_, acc_, dst_, d0_, ncols_, rterm_ = args
        pc = data_ptr(context, builder, sig.args[0], c_)
        pco = data_ptr(context, builder, sig.args[3], coff_)
        pa = data_ptr(context, builder, sig.args[5], acc_)
        pd = data_ptr(context, builder, sig.args[6], dst_)
        pr = data_ptr(context, builder, sig.args[9], rterm_)

        def tile(cv):
            return builder.load(builder.bitcast(builder.gep(pco, [cv], inbounds=True), V16I.as_pointer()), align=4)

        def row(co, r, d, v, cv, count):
            t = splat_vector(builder, builder.load(builder.gep(pr, [builder.add(d0_, r)], inbounds=True)), V16I)
            v = builder.add(builder.add(v, co), t)
            store_live(builder, v, builder.gep(pa, [builder.add(d, cv)], inbounds=True), count)

        for_live_blocks(builder, pc, pd, nb_, c0_, d0_, rows_, ncols_, tile, row)
        return context.get_dummy_value()

    return sig, codegen
