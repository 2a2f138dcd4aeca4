"""Float32 products of a few rows by a matrix stored along the depth: C[m, n] = sum_k A[m, k] * B[n, k], with B's rows
contiguous in k and at most 8 rows of A per pass (BATCH_MATMUL with adj_y and a run-time right-hand side: a decode
step's queries times its K cache, its probabilities times a transposed V cache; batch_matmul.py routes them here).

The GEMM (simd_f32) wants B as panels of columns, which for this layout is a transpose of the whole of B (the cache)
per call, and computed the other way round (B's rows as the GEMM's rows, A as a one-panel right-hand side) it spends
a broadcast, a multiply and an add per element of B for at most 8 useful lanes. Here a tile takes `lanes` rows of B
(16 with AVX-512, else 8: dot_lanes, chosen in prepare), loads `lanes` values of each, transposes the square in
registers (shuffles, copy.transpose_rows) and then, column by column, adds A[m, k] * B[r0:r0 + lanes, k] into one
accumulator vector per row of A: B is read once, in order, and the transpose costs about as much as the products.

Numerics: every output is summed over k in order, from +0, each product rounded before it is added (fmul then
fadd, never a fused multiply-add), exactly as the GEMM and the official builtin kernel sum: bit-identical results.
A last block of fewer than `lanes` k values is loaded with a mask (no byte past a row is read) and only its live
columns are added; rows past the end reuse the last row's address and are not stored.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base import isa
from lite_numba.kernels.base.copy import transpose_rows
from lite_numba.kernels.base.llvm_ir import F32, I1, I32, data_ptr, gep, i64, splat, store_live
from lite_numba.kernels.base.threads import PARALLEL, run_chunks
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

MAX_ROWS = 8  # rows of A per tile: 8 accumulators beside a 16 x 16 square fit the 32 vector registers


def dot_lanes() -> int:
    """Rows of B per tile on the path in force: 16 with AVX-512 (a 16 x 16 square in 16 zmm), else 8 (an 8 x 8 one
    in 8 ymm: 16 registers on AVX2; NEON splits each 8-lane vector in two of its 32)."""
    return 16 if isa.has("avx512") else 8


def _emit_dot(context, builder, argtys, args, mr: int, lanes: int) -> None:
    """One tile of mr rows of A x `lanes` rows of B (the dot_tiles contract), at the builder's position."""
    a_, aoff_, am_, ak_, b_, boff_, bn_, nr_, K_, c_, coff_, ldc_ = args
    vf = ir.VectorType(F32, lanes)
    vb = ir.VectorType(I1, lanes)
    pa = data_ptr(context, builder, argtys[0], a_)
    pb = data_ptr(context, builder, argtys[4], b_)
    pc = data_ptr(context, builder, argtys[9], c_)
    mload = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(vf, [vf.as_pointer(), I32, vb, vf]), f"llvm.masked.load.v{lanes}f32.p0")
    last = builder.sub(nr_, i64(1))
    rows = []
    for r in range(lanes):  # rows past nr read the last live row again (their sums are not stored)
        idx = builder.select(builder.icmp_signed("<", i64(r), nr_), i64(r), last)
        rows.append(gep(builder, pb, builder.add(boff_, builder.mul(idx, bn_)), F32))
    arow = [builder.add(aoff_, builder.mul(am_, i64(m))) for m in range(mr)]
    accs = [cgutils.alloca_once_value(builder, ir.Constant(vf, [0.0] * lanes)) for _ in range(mr)]

    def products(cols, k0, live=None):
        for kk, col in enumerate(cols):
            def body(kk=kk, col=col):
                k = builder.add(k0, i64(kk))
                for m in range(mr):
                    av = builder.load(gep(builder, pa, builder.add(arow[m], builder.mul(k, ak_)), F32))
                    # rounded product, then the add (not llvm.fma): the official kernel's arithmetic
                    prod = builder.fmul(col, splat(builder, av, vf))
                    builder.store(builder.fadd(builder.load(accs[m]), prod), accs[m])
            if live is None:
                body()
            else:
                with builder.if_then(builder.icmp_signed("<", i64(kk), live)):
                    body()

    nblocks = builder.sdiv(K_, i64(lanes))
    with cgutils.for_range(builder, nblocks) as blk:
        k0 = builder.mul(blk.index, i64(lanes))
        vs = [builder.load(builder.bitcast(gep(builder, p, k0, F32), vf.as_pointer()), align=4) for p in rows]
        products(transpose_rows(builder, vs), k0)
    k0 = builder.mul(nblocks, i64(lanes))
    rem = builder.sub(K_, k0)
    with builder.if_then(builder.icmp_signed(">", rem, i64(0))):
        mask = builder.icmp_signed("<", ir.Constant(ir.VectorType(I32, lanes), list(range(lanes))),
                                   splat(builder, builder.trunc(rem, I32), ir.VectorType(I32, lanes)))
        zero = ir.Constant(vf, [0.0] * lanes)
        vs = [builder.call(mload, [builder.bitcast(gep(builder, p, k0, F32), vf.as_pointer()), ir.Constant(I32, 4),
                                   mask, zero]) for p in rows]
        products(transpose_rows(builder, vs), k0, rem)
    for m in range(mr):
        dst = gep(builder, pc, builder.add(coff_, builder.mul(ldc_, i64(m))), F32)
        store_live(builder, builder.load(accs[m]), dst, nr_)


def make_dot_tiles(lanes: int):
    """dot_tiles(mr, a, a_off, am, ak, b, b_off, bn, nr, K, c, c_off, ldc): for m < mr (1..MAX_ROWS), r < nr
    (1..lanes): c[c_off + m * ldc + r] = sum_{k < K} a[a_off + m * am + k * ak] * b[b_off + r * bn + k], one
    intrinsic with a case per mr (a switch, each case its own code)."""

    @intrinsic
    def dot_tiles(typingctx, mr, a, a_off, am, ak, b, b_off, bn, nr, K, c, c_off, ldc):
        i = types.int64
        sig = types.void(i, a, i, i, i, b, i, i, i, i, c, i, i)

        def codegen(context, builder, sig, args):
            end = builder.append_basic_block("dot.end")
            switch = builder.switch(args[0], end)
            for m in range(1, MAX_ROWS + 1):
                case = builder.append_basic_block(f"dot.mr{m}")
                switch.add_case(ir.Constant(args[0].type, m), case)
                builder.position_at_end(case)
                _emit_dot(context, builder, sig.args[1:], args[1:], m, lanes)
                builder.branch(end)
            builder.position_at_end(end)
            return context.get_dummy_value()

        return sig, codegen

    dot_tiles.__name__ = dot_tiles.__qualname__ = f"dot_tiles_{lanes}"
    return dot_tiles


dot_tiles_16 = make_dot_tiles(16)
dot_tiles_8 = make_dot_tiles(8)


@njit(cache=True, inline="always")
def _dot_part(lanes, a, a_off, am, ak, b, b_off, bn, c, M, K, N, i0, i1, r0, r1):
    """Batches [i0, i1), B rows (output columns) [r0, r1) in tiles of `lanes` rows (16 or 8): every row of A in
    passes of MAX_ROWS."""
    for i in range(i0, i1):
        for m0 in range(0, M, MAX_ROWS):
            mr = min(MAX_ROWS, M - m0)
            for r in range(r0, r1, lanes):
                nr, boff, coff = min(lanes, r1 - r), b_off[i] + r * bn, (i * M + m0) * N + r
                if lanes == 16:
                    dot_tiles_16(mr, a, a_off[i] + m0 * am, am, ak, b, boff, bn, nr, K, c, coff, N)
                else:
                    dot_tiles_8(mr, a, a_off[i] + m0 * am, am, ak, b, boff, bn, nr, K, c, coff, N)


@njit(cache=True, nogil=True, _nrt=False)
def bmm_dot(lanes, a, a_off, am, ak, b, b_off, bn, c, M, K, N):
    """c[i, m, n] = sum_k a[a_off[i] + m * am + k * ak] * b[b_off[i] + n * bn + k] for every batch i (a, b, c
    flat float32; c batch i at i * M * N), in tiles of `lanes` (dot_lanes()) rows of b."""
    _dot_part(lanes, a, a_off, am, ak, b, b_off, bn, c, M, K, N, 0, a_off.size, 0, N)


@njit(cache=True, inline="always")
def _dot_chunk(args, wk, j):
    lanes, a, a_off, am, ak, b, b_off, bn, c, M, K, N, ch = args
    _dot_part(lanes, a, a_off, am, ak, b, b_off, bn, c, M, K, N, ch[4 * j], ch[4 * j + 1], ch[4 * j + 2],
              ch[4 * j + 3])


@njit(cache=True, nogil=True, parallel=PARALLEL)
def bmm_dot_par(lanes, a, a_off, am, ak, b, b_off, bn, c, M, K, N, ch, cnt, T):
    """bmm_dot over the chunks ch = [i0, i1, r0, r1] * n (batch ranges x bands of whole tiles of B rows), taken in
    turn by T workers (kernels/base/threads.py)."""
    run_chunks(T, cnt, ch.size // 4, _dot_chunk, (lanes, a, a_off, am, ak, b, b_off, bn, c, M, K, N, ch))


def dot_chunks(B: int, N: int, parts: int, lanes: int) -> np.ndarray:
    """Chunks [i0, i1, r0, r1] for bmm_dot_par: ranges of batches when there are enough, else bands of whole tiles
    of B rows of each batch."""
    if B >= parts:
        edges = np.linspace(0, B, parts + 1).round().astype(np.int64)
        ch = [(edges[j], edges[j + 1], 0, N) for j in range(parts) if edges[j] < edges[j + 1]]
    else:
        tiles = -(-N // lanes)
        per = max(1, -(-tiles * B // parts))  # tiles per chunk
        ch = [(i, i + 1, t * lanes, min(N, (t + per) * lanes)) for i in range(B) for t in range(0, tiles, per)]
    return np.array(ch, np.int64).reshape(-1)
