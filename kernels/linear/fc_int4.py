"""INT4 blockwise FULLY_CONNECTED (the official EvalBlockwise4Bit, see fc_blockwise) on int8 dot-product tiles whose
weights stay 4-bit: the nibbles are unpacked in registers inside the micro-kernel and each block's integer sums are
scaled into float32 accumulators between block passes.

Layout (prepared once from the file's packed bytes, `prepare_int4`; the same size, 4 bits a weight): units in panels
of 32 (16 for a last odd panel); per 8 depths ("chunk") of the panel, per 16 units, 64 bytes whose byte 4j + i holds
unit j's weights at depths 8c + i (low nibble) and 8c + 4 + i (high nibble), stored as w + 8 (0 .. 15). A chunk of a
32-unit panel is 128 bytes (two such 16-unit halves).

The tile (rows r, units j of one vector of lanes), per block b:

    acc = -8 * sum_{k in b} q[r, k]                         (int32, the row's block sum, computed once per row)
    acc += sum_k (w[j, k] + 8) * q[r, k]                    (vpdpbusd: the nibbles unsigned, the activations signed)
    out[r, j] += float32(float(acc) * scale[j, b])          (acc is the official block dot sum q * w, exact)

then out = (out - float32(float(zp_r) * kf_j)) * sf_r (+ bias_j when the layer has one), kf_j the unit's
sum_b scale * float(sum w) (computed at prepare, in block order, as the official kernel does), every step a float32
operation in the official order. The block's dot is the exact integer the official int32-through-float32 sum gives
(|sum| < 2^24 for block sizes up to 16384, fc_blockwise); the 4-bit path needs block sizes that are multiples of 8.

The dot products: "wide" vpdpbusd on zmm (avx512vnni), "vnni" on ymm (avxvnni), "maddubs" on ymm for AVX2, AVX-512
without VNNI and NEON (vpmaddubsw's int16 pair sums do not saturate here: |2 * 15 * 128| < 2^15; then vpmaddwd
with ones; generic-IR twins where the instructions are missing). Tiles of 4 rows (wide) or 2 (256-bit) over 32 / 16
units, and 1-row tiles (matrix-vector products) whose low and high nibbles feed two accumulators.
"""

from __future__ import annotations

import platform

import numpy as np
from lite_numba.kernels.base import isa
from lite_numba.kernels.base.hybrid_rows import quantize_row
from lite_numba.kernels.base.llvm_ir import F32, I8, I16, I32, byte_ptr, data_ptr, i64, load, splat, store_live
from lite_numba.kernels.linear import simd_int8_narrow
from lite_numba.kernels.linear.simd_int8_narrow import dpbusd, pick_tile
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

WIDE_MR = 4
NARROW_MR = 2
_X86 = platform.machine().lower() in ("x86_64", "amd64")


def _dot(builder, kind, acc, w, a, lanes):
    """acc + per int32 lane the 4 products of w's unsigned bytes (0 .. 15) and a's signed bytes: vpdpbusd on zmm
    ("wide") or ymm ("vnni", simd_int8_narrow.dpbusd, a generic twin where the target lacks it)."""
    vi = ir.VectorType(I32, lanes)
    if kind == "wide":
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vi, [vi, vi, vi]),
                                            "llvm.x86.avx512.vpdpbusd.512")
        return builder.call(fn, [acc, w, a])
    return dpbusd(builder, acc, w, a)


def _maddubs(builder, w, a):
    """Per int16 lane the 2 products of w's unsigned bytes (0 .. 15) and a's signed bytes, summed (<32 x i8> ->
    <16 x i16>; exact, |2 * 15 * 128| < 2^15): vpmaddubsw, else generic vector IR."""
    vb = ir.VectorType(I8, 32)
    vs = ir.VectorType(I16, 16)
    if _X86 and not simd_int8_narrow.GENERIC and isa.supports("avx2"):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vs, [vb, vb]), "llvm.x86.avx2.pmadd.ub.sw")
        return builder.call(fn, [builder.bitcast(w, vb), builder.bitcast(a, vb)])
    p = builder.mul(builder.zext(builder.bitcast(w, vb), ir.VectorType(I16, 32)),
                    builder.sext(builder.bitcast(a, vb), ir.VectorType(I16, 32)))
    even = builder.shuffle_vector(p, p, ir.Constant(ir.VectorType(I32, 16), list(range(0, 32, 2))))
    odd = builder.shuffle_vector(p, p, ir.Constant(ir.VectorType(I32, 16), list(range(1, 32, 2))))
    return builder.add(even, odd)


def _chunks_int16(builder, mr, nv, lanes, accs, arow, pw, w_off, cstride, b, nch, low, four):
    """The chunks of block b for the "maddubs" tiles: vpmaddubsw sums of up to 4 chunks (8 products of at most
    15 * 128 each: below 2^15) kept in int16 lanes, then widened into the int32 accumulators by one vpmaddwd with
    ones, instead of one vpmaddwd per vpmaddubsw."""
    vi = ir.VectorType(I32, lanes)
    vs = ir.VectorType(I16, 2 * lanes)
    vb = ir.VectorType(I8, 4 * lanes)
    ones = ir.Constant(vs, [1] * (2 * lanes))
    s16 = [[cgutils.alloca_once(builder, vs) for _ in range(nv)] for _ in range(mr)]
    with cgutils.for_range(builder, builder.sdiv(builder.add(nch, i64(3)), i64(4))) as grp:
        for r in range(mr):
            for v in range(nv):
                builder.store(ir.Constant(vs, None), s16[r][v])
        for u in range(4):
            cin = builder.add(builder.mul(grp.index, i64(4)), i64(u))
            with builder.if_then(builder.icmp_signed("<", cin, nch)):
                c = builder.add(builder.mul(b, nch), cin)  # chunk index within the row
                pc = byte_ptr(builder, pw, builder.add(w_off, builder.mul(c, cstride)))
                wl, wh = [], []
                for v in range(nv):
                    raw = load(builder, byte_ptr(builder, pc, i64(4 * lanes * v)), vb)
                    wl.append(builder.and_(raw, low))
                    wh.append(builder.and_(builder.lshr(raw, four), low))
                d0 = builder.mul(c, i64(8))
                for r in range(mr):
                    a0 = builder.bitcast(splat(builder, load(builder, byte_ptr(builder, arow[r], d0), I32), vi), vb)
                    a1 = builder.bitcast(splat(builder, load(builder, byte_ptr(builder, arow[r], builder.add(
                        d0, i64(4))), I32), vi), vb)
                    for v in range(nv):
                        t = builder.add(_maddubs(builder, wl[v], a0), _maddubs(builder, wh[v], a1))
                        builder.store(builder.add(builder.load(s16[r][v]), t), s16[r][v])
        for r in range(mr):
            for v in range(nv):
                wide = _widen(builder, builder.load(s16[r][v]), ones)
                builder.store(builder.add(builder.load(accs[r][v]), wide), accs[r][v])


def _widen(builder, s, ones):
    """Per int32 lane the sum of two int16 lanes of s (<16 x i16> -> <8 x i32>): vpmaddwd with ones, else generic."""
    vi = ir.VectorType(I32, 8)
    if _X86 and not simd_int8_narrow.GENERIC and isa.supports("avx2"):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vi, [s.type, s.type]),
                                            "llvm.x86.avx2.pmadd.wd")
        return builder.call(fn, [s, ones])
    p = builder.sext(s, ir.VectorType(I32, 16))
    even = builder.shuffle_vector(p, p, ir.Constant(vi, list(range(0, 16, 2))))
    odd = builder.shuffle_vector(p, p, ir.Constant(vi, list(range(1, 16, 2))))
    return builder.add(even, odd)


def _make_tile(mr: int, nv: int, kind: str):
    """An intrinsic computing an [mr, lanes * nv] tile of the INT4 blockwise FULLY_CONNECTED (module doc):

    tile(q, q_off, ldq, nb, bs, qs, qs_off, ldqs, w, w_off, cstride, st, ldst, kf, bb, n0, out, o_off, ldo, nrows,
    ncols, rzp, rsf, r_off, has_bias)

    row r of the int8 activations at q[q_off + r * ldq], its blocks' -8 * sums at qs[qs_off + r * ldqs + b]
    (int32), its float32(zp) and sf at rzp / rsf[r_off + r]; the tile's weights from byte w_off of w, chunks cstride
    bytes apart (the lanes * nv units' 4 * lanes * nv bytes first); scales st[b * ldst + n0 + j], kf[n0 + j], bias
    bb[n0 + j] (float32, padded); rows r < nrows and units j < ncols stored at out[o_off + r * ldo + j]."""
    lanes = 16 if kind == "wide" else 8
    vi = ir.VectorType(I32, lanes)
    vf = ir.VectorType(F32, lanes)
    vb = ir.VectorType(I8, 4 * lanes)
    split = mr == 1  # two accumulator sets (low / high nibbles): twice the independent vpdpbusd chains

    @intrinsic
    def tile(typingctx, q, q_off, ldq, nb, bs, qs, qs_off, ldqs, w, w_off, cstride, st, ldst, kf, bb, n0, out, o_off,
             ldo, nrows, ncols, rzp, rsf, r_off, has_bias):
        ip = types.intp
        sig = types.void(q, ip, ip, ip, ip, qs, ip, ip, w, ip, ip, st, ip, kf, bb, ip, out, ip, ip, ip, ip, rzp, rsf,
                         ip, ip)

        def codegen(context, builder, sig, args):
            (q_, q_off_, ldq_, nb_, bs_, qs_, qs_off_, ldqs_, w_, w_off_, cstride_, st_, ldst_, kf_, bb_, n0_, out_,
             o_off_, ldo_, nrows_, ncols_, rzp_, rsf_, r_off_, has_bias_) = args
            pq = data_ptr(context, builder, sig.args[0], q_)
            pqs = builder.gep(data_ptr(context, builder, sig.args[5], qs_), [qs_off_], inbounds=True)
            pw = data_ptr(context, builder, sig.args[8], w_)
            pst = data_ptr(context, builder, sig.args[11], st_)
            pkf = data_ptr(context, builder, sig.args[13], kf_)
            pbb = data_ptr(context, builder, sig.args[14], bb_)
            po = data_ptr(context, builder, sig.args[16], out_)
            prz = builder.gep(data_ptr(context, builder, sig.args[21], rzp_), [r_off_], inbounds=True)
            prs = builder.gep(data_ptr(context, builder, sig.args[22], rsf_), [r_off_], inbounds=True)
            facc = [[cgutils.alloca_once_value(builder, ir.Constant(vf, None)) for _ in range(nv)] for _ in range(mr)]
            nsets = 2 if split else 1
            accs = [[[cgutils.alloca_once(builder, vi) for _ in range(nv)] for _ in range(mr)] for _ in range(nsets)]
            arow = [byte_ptr(builder, pq, builder.add(q_off_, builder.mul(ldq_, i64(r)))) for r in range(mr)]
            low = ir.Constant(vb, [15] * (4 * lanes))
            four = ir.Constant(vb, [4] * (4 * lanes))
            nch = builder.sdiv(bs_, i64(8))
            with cgutils.for_range(builder, nb_) as blk:
                b = blk.index
                for r in range(mr):
                    t = splat(builder, builder.load(builder.gep(pqs, [builder.add(builder.mul(ldqs_, i64(r)), b)],
                                                                inbounds=True)), vi)
                    for v in range(nv):
                        builder.store(t, accs[0][r][v])
                        if split:
                            builder.store(ir.Constant(vi, None), accs[1][r][v])
                if kind == "maddubs":
                    _chunks_int16(builder, mr, nv, lanes, accs[0], arow, pw, w_off_, cstride_, b, nch, low, four)
                else:
                    with cgutils.for_range(builder, nch) as ch:
                        c = builder.add(builder.mul(b, nch), ch.index)  # chunk index within the row
                        pc = byte_ptr(builder, pw, builder.add(w_off_, builder.mul(c, cstride_)))
                        wl, wh = [], []
                        for v in range(nv):
                            raw = load(builder, byte_ptr(builder, pc, i64(4 * lanes * v)), vb)
                            wl.append(builder.bitcast(builder.and_(raw, low), vi))
                            wh.append(builder.bitcast(builder.and_(builder.lshr(raw, four), low), vi))
                        d0 = builder.mul(c, i64(8))
                        for r in range(mr):
                            a0 = splat(builder, load(builder, byte_ptr(builder, arow[r], d0), I32), vi)
                            a1 = splat(builder, load(builder, byte_ptr(builder, arow[r], builder.add(d0, i64(4))), I32),
                                       vi)
                            for v in range(nv):
                                x = _dot(builder, kind, builder.load(accs[0][r][v]), wl[v], a0, lanes)
                                if split:
                                    builder.store(x, accs[0][r][v])
                                    y = _dot(builder, kind, builder.load(accs[1][r][v]), wh[v], a1, lanes)
                                    builder.store(y, accs[1][r][v])
                                else:
                                    builder.store(_dot(builder, kind, x, wh[v], a1, lanes), accs[0][r][v])
                prow = builder.gep(pst, [builder.add(builder.mul(b, ldst_), n0_)], inbounds=True)
                for v in range(nv):
                    sc = builder.load(builder.bitcast(builder.gep(prow, [i64(lanes * v)], inbounds=True),
                                                      vf.as_pointer()), align=4)
                    for r in range(mr):
                        a = builder.load(accs[0][r][v])
                        if split:
                            a = builder.add(a, builder.load(accs[1][r][v]))
                        f = builder.fmul(builder.sitofp(a, vf), sc)
                        builder.store(builder.fadd(builder.load(facc[r][v]), f), facc[r][v])
            with_bias = builder.icmp_signed("!=", has_bias_, i64(0))
            for v in range(nv):
                first = lanes * v
                unit = builder.add(n0_, i64(first))
                kfv = builder.load(builder.bitcast(builder.gep(pkf, [unit], inbounds=True), vf.as_pointer()), align=4)
                bv = builder.load(builder.bitcast(builder.gep(pbb, [unit], inbounds=True), vf.as_pointer()), align=4)
                count = builder.sub(ncols_, i64(first))
                for r in range(mr):
                    live = builder.and_(builder.icmp_signed("<", i64(r), nrows_),
                                        builder.icmp_signed(">", count, i64(0)))
                    with builder.if_then(live):
                        zp = splat(builder, builder.load(builder.gep(prz, [i64(r)], inbounds=True)), vf)
                        sf = splat(builder, builder.load(builder.gep(prs, [i64(r)], inbounds=True)), vf)
                        o = builder.fsub(builder.load(facc[r][v]), builder.fmul(zp, kfv))
                        o = builder.fmul(o, sf)
                        o = builder.select(with_bias, builder.fadd(o, bv), o)
                        dst = builder.gep(po, [builder.add(builder.add(o_off_, builder.mul(ldo_, i64(r))),
                                                           i64(first))], inbounds=True)
                        store_live(builder, o, dst, count)
            return context.get_dummy_value()

        return sig, codegen

    tile.__name__ = tile.__qualname__ = f"int4_{kind}_tile_{mr}x{lanes * nv}"
    return tile


_w42, _w41, _w12, _w11 = (_make_tile(m, v, "wide") for m, v in ((WIDE_MR, 2), (WIDE_MR, 1), (1, 2), (1, 1)))
_v22, _v21, _v12, _v11 = (_make_tile(m, v, "vnni") for m, v in ((NARROW_MR, 2), (NARROW_MR, 1), (1, 2), (1, 1)))
_m22, _m21, _m12, _m11 = (_make_tile(m, v, "maddubs") for m, v in ((NARROW_MR, 2), (NARROW_MR, 1), (1, 2), (1, 1)))


@njit(cache=True, inline="always")
def _panel(kind, mr, width, q, q_off, ldq, nb, bs, qs, qs_off, ldqs, w, w_off, st, ldst, kf, bb, n0, out, o_off, ldo,
           nrows, ncols, rzp, rsf, r_off, has_bias):
    """The tile(s) of mr rows over the panel of `width` units (32 or 16) at unit n0 (ncols live units from n0)."""
    cstride = 4 * width
    if kind == 2:
        wide = (q, q_off, ldq, nb, bs, qs, qs_off, ldqs, w, w_off, cstride, st, ldst, kf, bb, n0, out, o_off, ldo,
                nrows, ncols, rzp, rsf, r_off, has_bias)
        pick_tile(WIDE_MR, mr, width // 16, _w42, _w41, _w12, _w11, wide)
        return
    for h in range(width // 16):  # 16-unit halves
        live = ncols - 16 * h
        if live <= 0:
            break
        args = (q, q_off, ldq, nb, bs, qs, qs_off, ldqs, w, w_off + 64 * h, cstride, st, ldst, kf, bb, n0 + 16 * h,
                out, o_off + 16 * h, ldo, nrows, live, rzp, rsf, r_off, has_bias)
        nv = 2 if live > 8 else 1
        if kind == 1:
            pick_tile(NARROW_MR, mr, nv, _v22, _v21, _v12, _v11, args)
        else:
            pick_tile(NARROW_MR, mr, nv, _m22, _m21, _m12, _m11, args)


@njit(cache=True, inline="always")
def fc4_body(kind, x, wq, st, kf, bias, out, geo, qbuf, qs, rzp, rsf, bb, scratch):
    """EvalBlockwise4Bit on the tiles of `kind` (a constant in each driver, as hybrid_gemm.fc_body): x float32
    [M * K], wq prepare_int4's weights, st the scales [K / bs, Np] and kf [Np] (float32), bias float32 [N] (ignored
    unless geo[4]), out float32 [M * N]; geo = [M, K, N, bs, has_bias, m_begin, m_end, n_begin, n_end] (rows and
    units computed, n_begin a multiple of 32: a chunk of the parallel driver, hybrid_par). Scratch: qbuf int8
    [MB, K], qs int32 [MB * K / bs], rzp / rsf float32 [MB], bb float32 [Np], scratch int8 [K]."""
    K, N, bs, has_bias = geo[1], geo[2], geo[3], geo[4]
    nb = K // bs
    Np = bb.size
    for n in range(N):
        bb[n] = bias[n] if has_bias else np.float32(0.0)
    MB = qbuf.shape[0]
    qf = qbuf.reshape(qbuf.size)
    mr = WIDE_MR if kind == 2 else NARROW_MR
    for m0 in range(geo[5], geo[6], MB):
        rows = min(MB, geo[6] - m0)
        for r in range(rows):
            sf, zp = quantize_row(x, (m0 + r) * K, K, True, qf, r * K, 0, scratch)
            rzp[r] = np.float32(zp)
            rsf[r] = sf
            for b in range(nb):
                s = 0
                for i in range(b * bs, (b + 1) * bs):
                    s += np.int32(qf[r * K + i])
                qs[r * nb + b] = np.int32(-8 * s)
        full = rows // mr * mr
        for j0 in range(geo[7], min(Np, geo[8]), 32):
            width = min(32, Np - j0)
            w_off = j0 * (K // 2)
            for i in range(0, full, mr):
                _panel(kind, mr, width, qf, i * K, K, nb, bs, qs, i * nb, nb, wq, w_off, st, Np, kf, bb, j0, out,
                       (m0 + i) * N + j0, N, rows - i, N - j0, rzp, rsf, i, has_bias)
            for i in range(full, rows):
                _panel(kind, 1, width, qf, i * K, K, nb, bs, qs, i * nb, nb, wq, w_off, st, Np, kf, bb, j0, out,
                       (m0 + i) * N + j0, N, 1, N - j0, rzp, rsf, i, has_bias)


@njit(cache=True, nogil=True)
def fc_int4_wide(x, wq, st, kf, bias, out, geo, qbuf, qs, rzp, rsf, bb, scratch):
    """fc4_body on zmm vpdpbusd."""
    fc4_body(2, x, wq, st, kf, bias, out, geo, qbuf, qs, rzp, rsf, bb, scratch)


@njit(cache=True, nogil=True)
def fc_int4_vnni256(x, wq, st, kf, bias, out, geo, qbuf, qs, rzp, rsf, bb, scratch):
    """fc4_body on ymm vpdpbusd."""
    fc4_body(1, x, wq, st, kf, bias, out, geo, qbuf, qs, rzp, rsf, bb, scratch)


@njit(cache=True, nogil=True)
def fc_int4_maddubs(x, wq, st, kf, bias, out, geo, qbuf, qs, rzp, rsf, bb, scratch):
    """fc4_body on ymm vpmaddubsw + vpmaddwd (or their generic twins)."""
    fc4_body(0, x, wq, st, kf, bias, out, geo, qbuf, qs, rzp, rsf, bb, scratch)


DRIVERS = {2: fc_int4_wide, 1: fc_int4_vnni256, 0: fc_int4_maddubs}


# --- prepare ----------------------------------------------------------------------------------------------------------


def _nibbles(b: np.ndarray) -> np.ndarray:
    """The file's INT4 bytes [R, K / 2] as the unsigned values w + 8 [R, K] (uint8; (v ^ 8) = v + 8 for the two's
    complement nibble v)."""
    u = np.empty((b.shape[0], 2 * b.shape[1]), np.uint8)
    u[:, 0::2] = (b & 15) ^ 8
    u[:, 1::2] = (b >> 4) ^ 8
    return u


def prepare_int4(packed: np.ndarray, scales: np.ndarray, N: int, K: int, bs: int):
    """From the file's INT4 bytes ([N, K] values, two a byte, low nibble first, two's complement) and the block
    scales [N * K / bs]: (the weights in the tiles' layout (module doc), uint8 [Np * K / 2] with Np = N rounded up to
    16, padding units holding 8, the weight 0; the scales [K / bs, Np]; kf [Np]: per unit the official
    kfsum = sum_b float32(scale * float(sum of the block's weights)), summed in block order in float32). Made a
    panel at a time: the temporaries stay small (an INT4 layer's point is its memory)."""
    nb = K // bs
    Np = -(-N // 16) * 16
    src = np.asarray(packed, np.uint8).reshape(-1)[:N * K // 2].reshape(N, K // 2)
    sc = np.asarray(scales, np.float32).reshape(N, nb)
    out = np.empty(Np * K // 2, np.uint8)
    st = np.zeros((nb, Np), np.float32)
    st[:, :N] = sc.T
    kf = np.zeros(Np, np.float32)
    for j0 in range(0, Np, 32):
        width = min(32, Np - j0)
        live = max(0, min(width, N - j0))
        up = np.full((width, K), 8, np.uint8)
        up[:live] = _nibbles(src[j0:j0 + live])
        p = up.reshape(width // 16, 16, K // 8, 2, 4)  # [half, unit, chunk, lo/hi, i]
        byte = p[:, :, :, 0, :] | (p[:, :, :, 1, :] << 4)
        out[j0 * K // 2:(j0 + width) * K // 2] = byte.transpose(2, 0, 1, 3).reshape(-1)
        ks = (up[:live].reshape(live, nb, bs).sum(axis=2, dtype=np.int64) - 8 * bs).astype(np.float32)
        acc = np.zeros(live, np.float32)
        for j in range(nb):
            acc = (acc + (sc[j0:j0 + live, j] * ks[:, j]).astype(np.float32)).astype(np.float32)
        kf[j0:j0 + live] = acc
    return out, st.reshape(-1), kf
