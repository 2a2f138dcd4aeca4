"""Hybrid (dynamic-range) FULLY_CONNECTED over the weights as the model stores them, [N, K] int8 row-major, read in
place (where the runner finds them: the mapped model file, codegen's IN_PLACE_CONST) instead of a packed copy: each
output channel is a dot product along K of its weight row with the quantized input row. Made for a decode step's
matrix-vector products, which stream the weights once; it serves any number of rows (each block of weight rows is
read from memory once and from cache for the other input rows).

A tile takes R weight rows (16 on zmm, 8 on ymm) and one quantized input row: per 64 bytes of depth, one load of the
input bytes shared by the R rows, and per row one weight load, a prefetch `pf` bytes ahead in the same row (the
rows of a later block: the matrix is one contiguous stream) and the products:

- scheme 2, vpdpbusd on zmm: the input as unsigned bytes q + 128 (hybrid_rows.quantize_row's flip), 16 int32 lanes
  per row;
- scheme 1, vpdpbusd on ymm (AVX-VNNI; its generic twin elsewhere), 8 lanes, two steps per 64 bytes;
- scheme 0 / 3, vpmaddwd (AVX2, and on NEON its generic twin): the input as 16-bit values q + 128, the weights
  sign-extended to 16 bits, four steps per 64 bytes.

The lanes of the R rows are then summed across (a tree of two-input shuffles: R vectors -> one vector of R sums),
the depth left over past the last 64 bytes added (summed by the driver) and hybrid_tiles' epilogue applied in
registers (dot = acc - (128 + zp) * ws, then float32(dot) * (cs * sf) + bias and the clamp: the official operation
order), R channels stored at once. The int32 sums are exact, so the bytes are those of the packed tiles.

The driver has the packed drivers' arguments (hybrid_gemm.fc_body), so hybrid_schedule's parallel driver splits it
the same way; its weights are [N * K] int8 (the model's tensor, or a copy when it was widened or densified), its
channel parameters hybrid_tiles.hybrid_params' with the bias inside when it is constant (hp then shorter than them:
nothing is copied per call)."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.hybrid_rows import quantize_block
from lite_numba.kernels.base.llvm_ir import F32, I8, I32, byte_ptr, data_ptr, i64, load, splat, store_live
from lite_numba.kernels.linear.hybrid_tiles import HP_BLOCK, fill_bias
from lite_numba.kernels.linear.simd_int8_narrow import dpbusd, maddwd
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from lite_numba.ops import PrepareContext

CHUNK = 64  # depth bytes per step of a tile
PF_BLOCKS = 2  # prefetch distance in blocks of R rows (the driver passes pf = PF_BLOCKS * R * K bytes)


def rows_of(scheme: int) -> int:
    """Weight rows per tile: 16 on zmm, 8 on the 256-bit schemes."""
    return 16 if scheme == 2 else 8


def _reduce(builder, vecs):
    """R vectors of R int32 lanes -> one vector whose lane r is the sum of vector r's lanes (two-input shuffles:
    at each level a vector holds 2^j rows, each in a segment of R / 2^j lanes, and two such vectors fold into one)."""
    R = len(vecs)
    vt = ir.VectorType(I32, R)
    level = 1
    while len(vecs) > 1:
        seg = R // (2 * level)  # lanes per row after this level
        lo, hi = [], []
        for t in range(R):
            i, off = t // seg, t % seg
            src = 0 if i < level else R
            row = i if i < level else i - level
            lo.append(src + row * 2 * seg + off)
            hi.append(src + row * 2 * seg + seg + off)
        lo_c, hi_c = ir.Constant(vt, lo), ir.Constant(vt, hi)
        vecs = [builder.add(builder.shuffle_vector(a, b, lo_c), builder.shuffle_vector(a, b, hi_c))
                for a, b in zip(vecs[0::2], vecs[1::2])]
        level *= 2
    return vecs[0]


def _make_tile(scheme: int):
    """gemv_tile(a, a_off, w, n0, K, nchunks, N, hp, out, o_off, count, rz, rsf, ri, lim, tail, pf): channels
    n0 .. n0 + R - 1 (rows past N - 1 read row N - 1 and are not stored) of input row ri, whose quantized bytes
    (q + 128; 16-bit for the vpmaddwd scheme) start at element a_off of a; nchunks steps of 64 bytes of depth
    (weight row n at byte n * K of w), tail[0:R] int32 added to the sums (the depth past them); stores the first
    `count` (<= R) results at out[o_off ..]."""
    R = rows_of(scheme)
    wide = scheme == 2
    pairs = scheme in (0, 3)
    vi = ir.VectorType(I32, R)
    vf = ir.VectorType(F32, R)

    @intrinsic
    def gemv_tile(typingctx, a, a_off, w, n0, K, nchunks, N, hp, out, o_off, count, rz, rsf, ri, lim, tail, pf):
        ip = types.intp
        sig = types.void(a, ip, w, ip, ip, ip, ip, hp, out, ip, ip, rz, rsf, ip, lim, tail, ip)

        def codegen(context, builder, sig, args):
            (a_, a_off_, w_, n0_, K_, nch_, N_, hp_, out_, o_off_, count_, rz_, rsf_, ri_, lim_, tail_, pf_) = args
            pa = data_ptr(context, builder, sig.args[0], a_)
            pw = data_ptr(context, builder, sig.args[2], w_)
            php = data_ptr(context, builder, sig.args[7], hp_)
            po = data_ptr(context, builder, sig.args[8], out_)
            prz = data_ptr(context, builder, sig.args[11], rz_)
            prs = data_ptr(context, builder, sig.args[12], rsf_)
            plim = data_ptr(context, builder, sig.args[14], lim_)
            ptl = data_ptr(context, builder, sig.args[15], tail_)
            pfetch = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer(), I32, I32, I32]),
                "llvm.prefetch.p0")
            last = builder.sub(N_, i64(1))
            rows = []
            for r in range(R):
                n = builder.add(n0_, i64(r))
                n = builder.select(builder.icmp_signed(">", n, last), last, n)
                rows.append(byte_ptr(builder, builder.bitcast(pw, ir.IntType(8).as_pointer()), builder.mul(n, K_)))
            lane_t = ir.VectorType(I32, 16 if wide else 8)
            accs = [cgutils.alloca_once_value(builder, ir.Constant(lane_t, None)) for _ in range(R)]
            xbase = builder.gep(pa, [a_off_], inbounds=True)
            xb = builder.bitcast(xbase, ir.IntType(8).as_pointer())
            with cgutils.for_range(builder, nch_) as loop:
                k = builder.mul(loop.index, i64(CHUNK))
                if wide:
                    xs = [load(builder, byte_ptr(builder, xb, k), lane_t)]
                elif pairs:  # 16-bit inputs: 128 bytes of x per 64 weights
                    x16 = ir.VectorType(ir.IntType(16), 16)
                    xs = [load(builder, byte_ptr(builder, xb, builder.add(builder.mul(k, i64(2)), i64(32 * s))), x16)
                          for s in range(4)]
                else:
                    xs = [load(builder, byte_ptr(builder, xb, builder.add(k, i64(32 * s))), lane_t) for s in range(2)]
                for r in range(R):
                    p = byte_ptr(builder, rows[r], k)
                    builder.call(pfetch, [byte_ptr(builder, p, pf_), ir.Constant(I32, 0), ir.Constant(I32, 3),
                                          ir.Constant(I32, 1)])
                    acc = builder.load(accs[r])
                    if wide:
                        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(lane_t, [lane_t] * 3),
                                                            "llvm.x86.avx512.vpdpbusd.512")
                        acc = builder.call(fn, [acc, xs[0], load(builder, p, lane_t)])
                    elif pairs:
                        for s in range(4):
                            wv = builder.sext(load(builder, byte_ptr(builder, p, i64(16 * s)),
                                                   ir.VectorType(I8, 16)), ir.VectorType(ir.IntType(16), 16))
                            acc = builder.add(acc, maddwd(builder, xs[s], wv))
                    else:
                        for s in range(2):
                            acc = dpbusd(builder, acc, xs[s], load(builder, byte_ptr(builder, p, i64(32 * s)), lane_t))
                    builder.store(acc, accs[r])
            tot = _reduce(builder, [builder.load(p) for p in accs])  # R rows of R lanes -> R sums
            tot = builder.add(tot, builder.load(builder.bitcast(ptl, vi.as_pointer()), align=4))
            # the epilogue (hybrid_tiles' operation order), channels n0.. in hybrid_params' blocks of 16
            base = builder.add(builder.mul(builder.sdiv(n0_, i64(16)), i64(HP_BLOCK)), builder.srem(n0_, i64(16)))

            def param(kk, ty):
                p = builder.gep(php, [builder.add(base, i64(16 * kk))], inbounds=True)
                return builder.load(builder.bitcast(p, ty.as_pointer()), align=4)

            ws, cs, bias = param(0, vi), param(1, vf), param(2, vf)
            z = splat(builder, builder.load(builder.gep(prz, [ri_], inbounds=True)), vi)
            s = splat(builder, builder.load(builder.gep(prs, [ri_], inbounds=True)), vf)
            lo = splat(builder, builder.load(plim), vf)
            hi = splat(builder, builder.load(builder.gep(plim, [i64(1)], inbounds=True)), vf)
            nan_lo = builder.fcmp_unordered("!=", builder.load(builder.gep(plim, [i64(2)], inbounds=True)),
                                            ir.Constant(F32, 0.0))
            dot = builder.sub(tot, builder.mul(z, ws))
            y = builder.fadd(builder.fmul(builder.sitofp(dot, vf), builder.fmul(cs, s)), bias)
            m = builder.select(builder.fcmp_ordered(">", lo, y), lo, y)
            m = builder.select(builder.fcmp_ordered("<", hi, m), hi, m)
            isnan = builder.fcmp_unordered("uno", y, y)
            m = builder.select(builder.and_(isnan, splat(builder, nan_lo, ir.VectorType(ir.IntType(1), R))), lo, m)
            store_live(builder, m, builder.gep(po, [o_off_], inbounds=True), count_)
            return context.get_dummy_value()

        return sig, codegen

    gemv_tile.__name__ = gemv_tile.__qualname__ = f"hybrid_gemv_tile_{scheme}"
    return gemv_tile


_tile2, _tile1, _tile0 = _make_tile(2), _make_tile(1), _make_tile(0)


@njit(cache=True, inline="always")
def gemv_body(scheme, x, w, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch):
    """Hybrid FULLY_CONNECTED (module doc) over w [N * K] int8: hybrid_gemm.fc_body's arguments and geo, with
    geo[10] the prefetch distance in bytes; abuf [MB, Kp] (Kp a multiple of 64; uint16 for scheme 0 / 3), scratch
    int8 [K + 64] (the non-finite quantizers' row, then the tails' int32). hp shorter than hpc: hpc holds the bias."""
    K, N, asym = geo[1], geo[2], geo[3] != 0
    prm = hpc
    if hp.size >= hpc.size:
        fill_bias(hp, hpc, bias)
        prm = hp
    R = 16 if scheme == 2 else 8
    MB, Kp = abuf.shape
    a = abuf.reshape(abuf.size)
    K64 = K // 64 * 64
    k4 = (K + 3) // 4 * 4
    tl = scratch[k4:k4 + 64].view(np.int32)
    for i in range(16):
        tl[i] = 0
    n_end = min(geo[9], N)
    for m0 in range(geo[6], geo[7], MB):
        rows = min(MB, geo[7] - m0)
        quantize_block(x, m0, rows, K, asym, a, Kp, rz, rsf, scratch)
        for n0 in range(geo[8], n_end, R):
            for r in range(rows):
                if K64 < K:
                    for i in range(R):
                        n = min(n0 + i, N - 1)
                        t = np.int32(0)
                        for k in range(K64, K):
                            t += np.int32(a[r * Kp + k]) * np.int32(w[n * K + k])
                        tl[i] = t
                cnt = min(R, n_end - n0)
                if scheme == 2:
                    _tile2(a, r * Kp, w, n0, K, K64 // 64, N, prm, out, (m0 + r) * N + n0, cnt, rz, rsf, r, lim, tl,
                           geo[10])
                elif scheme == 1:
                    _tile1(a, r * Kp, w, n0, K, K64 // 64, N, prm, out, (m0 + r) * N + n0, cnt, rz, rsf, r, lim, tl,
                           geo[10])
                else:
                    _tile0(a, r * Kp, w, n0, K, K64 // 64, N, prm, out, (m0 + r) * N + n0, cnt, rz, rsf, r, lim, tl,
                           geo[10])


def weight_rows(ctx: PrepareContext, w: np.ndarray):
    """The [N, K] int8 weights w as a flat argument read where they are: the node's constant input tensor whose bytes
    w is (the runner reads a large one in the mapped model file, codegen's IN_PLACE_CONST), else a copy (weights
    widened or densified at prepare)."""
    for t in ctx.inputs:
        d = None if t is None else t.data
        if (isinstance(d, np.ndarray) and d.dtype == np.int8 and d.size == w.size and d.flags.c_contiguous
                and w.flags.c_contiguous and d.size and d.ctypes.data == w.ctypes.data):
            return ctx.view(t, (w.size,))
    return ctx.const(np.ascontiguousarray(w, np.int8).reshape(-1))


def const_bias(bias) -> np.ndarray | None:
    """The float32 bias values when known at prepare (an array, or a view of a constant tensor), else None."""
    if isinstance(bias, np.ndarray):
        return bias
    t = getattr(bias, "tensor", bias)
    d = getattr(t, "data", None)
    return None if d is None else np.asarray(d, np.float32).reshape(-1)


# one driver per scheme (the scheme a constant in its code, as hybrid_gemm's drivers)
@njit(cache=True, nogil=True, _nrt=False)
def hybrid_gemv_wide(x, w, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch):
    """gemv_body on zmm vpdpbusd."""
    gemv_body(2, x, w, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch)


@njit(cache=True, nogil=True, _nrt=False)
def hybrid_gemv_vnni256(x, w, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch):
    """gemv_body on ymm vpdpbusd."""
    gemv_body(1, x, w, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch)


@njit(cache=True, nogil=True, _nrt=False)
def hybrid_gemv_pairs(x, w, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch):
    """gemv_body on vpmaddwd with 16-bit inputs."""
    gemv_body(0, x, w, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch)


GEMV_DRIVERS = {2: hybrid_gemv_wide, 1: hybrid_gemv_vnni256, 0: hybrid_gemv_pairs, 3: hybrid_gemv_pairs}
