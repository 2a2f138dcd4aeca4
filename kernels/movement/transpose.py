"""The strided-copy engine shared by the data-movement kernels, and TRANSPOSE.

Every dtype-agnostic data-movement op (transpose, slices, concatenation, split, pack, pad, tile, broadcast, reverse)
is a copy `out[o_base + sum(i_d * os_d)] = x[x_base + sum(i_d * xs_d)]` over an index box `shape`, with element
strides that may be zero (broadcast) or negative (reverse, mirror). `schedule_strided_copy` simplifies the box in
Python (drops unit dimensions, merges dimensions that are contiguous on both sides) and schedules `copy_strided` over
the tensors' bytes viewed as unsigned words of the element size: one compiled loop per element size (1, 2, 4, 8
bytes; 16-byte elements are pairs of 8-byte words) serves every dtype and every rank. Shapes, strides and offsets are
arguments, so the executor's fused runner does not depend on them and a resized model is not recompiled. Its moves
are vector IR (issue 30): runs of consecutive words as 64-byte vectors (a run of 16 floats: one load and one store,
where LLVM's vectorized loop left it to its scalar remainder), transposes as 8 x 8 tiles of shuffles, NCHW -> NHWC
with few channels as interleaving shuffles. Xeon model 167, vit_f32's copies: the q / k / v split's 12 x 17 runs of
16 floats 0.69 -> 0.32 us, the 3 x 32 x 32 input's NCHW -> NHWC 1.46 -> 0.20 us, a 64 x 16 transpose 0.28 -> 0.08.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.copy import TILE, WORDS, transpose_tile, word_arrays
from lite_numba.kernels.base.llvm_ir import I8, I32, data_ptr, gep, i64
from lite_numba.kernels.base.shapes import index_vector
from lite_numba.kernels.base.vecmath import wide_vectors
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from lite_numba.ops import PrepareContext, Tensor, kernel

# --- vector moves (LLVM IR): runs of bytes, 8 x 8 tiles, interleaved planes ------------------------------------------


def _move(builder, dst, src, off, ty):
    """Copy one `ty` (a vector or integer type) from src + off to dst + off (i8 pointers, unaligned)."""
    p = ty.as_pointer()
    v = builder.load(builder.bitcast(gep(builder, src, off, I8), p), align=1)
    builder.store(v, builder.bitcast(gep(builder, dst, off, I8), p), align=1)


def emit_copy_rows(builder, dst, dstep, src, sstep, rows, nbytes):
    """Copy `rows` runs of nbytes (i64 values) from the i8 pointer src to dst, run i at src + i * sstep and
    dst + i * dstep (bytes), no run overlapping another or itself. The size class is chosen once, and each row
    loop moves its runs as small memcpys do: from 64 bytes on, 64-byte vectors with the last one ending at the
    run's end (overlapping the one before: the same values); under 64, two moves of the largest power of two that
    fits, the second ending at the run's end. No loop of single words, no masked moves."""
    v64 = ir.VectorType(I8, 64)
    done = builder.append_basic_block("rows.done")

    def row_loop(body):
        with cgutils.for_range(builder, rows) as loop:
            body(gep(builder, dst, builder.mul(loop.index, dstep), I8), gep(builder, src, builder.mul(loop.index,
                                                                                                         sstep), I8))
        builder.branch(done)

    def long_rows(d, s_):
        last = builder.sub(nbytes, i64(64))
        with cgutils.for_range(builder, builder.lshr(builder.add(last, i64(63)), i64(6))) as chunk:
            _move(builder, d, s_, builder.shl(chunk.index, i64(6)), v64)
        _move(builder, d, s_, last, v64)

    nxt = builder.append_basic_block("rows.lt64")
    here = builder.append_basic_block("rows.64")
    builder.cbranch(builder.icmp_unsigned(">=", nbytes, i64(64)), here, nxt)
    builder.position_at_end(here)
    row_loop(long_rows)
    builder.position_at_end(nxt)
    for size in (32, 16, 8, 4, 2, 1):
        ty = ir.VectorType(I8, size) if size >= 16 else ir.IntType(8 * size)
        here = builder.append_basic_block(f"rows.{size}")
        nxt = builder.append_basic_block(f"rows.lt{size}")
        builder.cbranch(builder.icmp_unsigned(">=", nbytes, i64(size)), here, nxt)
        builder.position_at_end(here)

        def short_rows(d, s_, ty=ty, size=size):
            _move(builder, d, s_, i64(0), ty)
            if size > 1:
                _move(builder, d, s_, builder.sub(nbytes, i64(size)), ty)

        row_loop(short_rows)
        builder.position_at_end(nxt)
    builder.branch(done)  # nbytes == 0
    builder.position_at_end(done)


def _byte_ptr(context, builder, aty, arr, idx):
    """i8 pointer to element idx (i64) of the 1-D array arr."""
    et = context.get_value_type(aty.dtype)
    return builder.bitcast(gep(builder, data_ptr(context, builder, aty, arr), idx, et), I8.as_pointer())


@intrinsic
def copy_rows(typingctx, out, o, os, x, xi, xs, rows, n):
    """out[o + r * os:o + r * os + n] = x[xi + r * xs:xi + r * xs + n] for r < rows: 1-D integer (word) arrays of
    one type, no two of the ranges overlapping; vector moves (emit_copy_rows)."""
    if not (word_arrays(out, x) and out.dtype == x.dtype):
        return None
    sig = types.none(out, types.int64, types.int64, x, types.int64, types.int64, types.int64, types.int64)

    def codegen(context, builder, sig, args):
        out_v, o_v, os_v, x_v, xi_v, xs_v, rows_v, n_v = args
        size = i64(context.get_abi_sizeof(context.get_value_type(sig.args[0].dtype)))
        with builder.if_then(builder.icmp_signed(">", n_v, i64(0))):
            emit_copy_rows(builder, _byte_ptr(context, builder, sig.args[0], out_v, o_v), builder.mul(os_v, size),
                           _byte_ptr(context, builder, sig.args[3], x_v, xi_v), builder.mul(xs_v, size), rows_v,
                           builder.mul(n_v, size))
        return context.get_dummy_value()

    return sig, codegen


def _concat(builder, vs):
    """One vector of all lanes of vs (equal types), padded with undefined lanes to a power-of-two count of parts."""
    while len(vs) > 1:
        if len(vs) % 2:
            vs = vs + [ir.Constant(vs[0].type, ir.Undefined)]
        n = vs[0].type.count
        mask = ir.Constant(ir.VectorType(I32, 2 * n), list(range(2 * n)))
        vs = [builder.shuffle_vector(vs[i], vs[i + 1], mask) for i in range(0, len(vs), 2)]
    return vs[0]


@intrinsic
def interleave_planes(typingctx, out, o, x, xi, xs, planes):
    """out[o + c * planes + p] = x[xi + p * xs + c] for c < TILE and p < planes (2 to 7): TILE pixels of `planes`
    channel planes into TILE * planes consecutive words (NCHW -> NHWC with few channels)."""
    if not (word_arrays(out, x) and out.dtype == x.dtype):
        return None
    sig = types.none(out, types.int64, x, types.int64, types.int64, types.int64)

    def codegen(context, builder, sig, args):
        out_v, o_v, x_v, xi_v, xs_v, p_v = args
        et = context.get_value_type(sig.args[0].dtype)
        vt = ir.VectorType(et, TILE)
        src = gep(builder, data_ptr(context, builder, sig.args[2], x_v), xi_v, et)
        dst = gep(builder, data_ptr(context, builder, sig.args[0], out_v), o_v, et)
        done = builder.append_basic_block("planes.done")
        switch = builder.switch(p_v, done)
        for planes in range(2, TILE):
            block = builder.append_basic_block(f"planes.{planes}")
            switch.add_case(ir.Constant(p_v.type, planes), block)
            builder.position_at_end(block)
            vs = [builder.load(builder.bitcast(gep(builder, src, builder.mul(xs_v, i64(p)), et), vt.as_pointer()),
                               align=1) for p in range(planes)]
            whole = _concat(builder, vs)
            mask = [p * TILE + c for c in range(TILE) for p in range(planes)]
            y = builder.shuffle_vector(whole, ir.Constant(whole.type, ir.Undefined),
                                       ir.Constant(ir.VectorType(I32, len(mask)), mask))
            for p in range(planes):  # TILE lanes a store (a 24-lane vector's ABI size would be 128 bytes)
                part = builder.shuffle_vector(y, y, ir.Constant(ir.VectorType(I32, TILE),
                                                                list(range(p * TILE, (p + 1) * TILE))))
                builder.store(part, builder.bitcast(gep(builder, dst, i64(p * TILE), et), vt.as_pointer()), align=1)
            builder.branch(done)
        builder.position_at_end(done)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, inline="always")
def box_rows(shp):
    """(rank, row length, number of rows) of the index box shp, walked in rows along its last dimension."""
    rank = shp.size
    rows = 1
    for d in range(rank - 1):
        rows *= shp[d]
    return rank, shp[rank - 1], rows


@njit(cache=True, nogil=True, _nrt=False)
def copy_strided(x, out, shp, xs, os, xb, ob):
    """Copy the box `shp` from x (strides xs, base xb) to out (strides os, base ob); flat word arrays.

    The two innermost dimensions (n0, n1) are one 2-D block, out[oo + i0 * b0 + i1 * b1] = x[xo + i0 * a0 + i1 *
    a1], walked as:
    - a transpose (out contiguous along i1, x along i0): TILE x TILE tiles of vector loads, shuffles and vector
      stores (transpose_tile; the last tile of each dimension moved back to end at its edge, rewriting a few
      values), 64 output rows at a time so that they stay in L1; with 2 to 7 output columns and contiguous output
      rows, TILE rows at a time from the column planes (interleave_planes: NCHW -> NHWC); smaller blocks in blocks
      of 32 columns, each read a run of consecutive words;
    - otherwise rows along the output's last dimension: runs of consecutive words as vector moves (copy_rows),
      broadcast rows as fills, other strides word by word.
    The outer dimensions: the third from the end in a loop, the others by decomposing a block number. One function
    body, no helper taking the arrays: Numba reference-counts arrays passed into a function at every call."""
    wide_vectors()  # a copy: the same words whatever the vector width
    rank = shp.size
    n1, a1, b1 = shp[rank - 1], xs[rank - 1], os[rank - 1]
    n0, a0, b0 = (shp[rank - 2], xs[rank - 2], os[rank - 2]) if rank > 1 else (1, 0, 0)
    if n1 == 0 or n0 == 0:
        return
    # the third dimension from the end is walked by a loop, the ones before it by decomposing a block number
    n2, a2, b2 = (shp[rank - 3], xs[rank - 3], os[rank - 3]) if rank > 2 else (1, 0, 0)
    blocks = 1
    for d in range(rank - 3):
        blocks *= shp[d]
    columns = b1 == 1 and a1 != 1 and a0 == 1 and n0 > 1
    tiles = columns and n0 >= TILE and n1 >= TILE
    planes = columns and n0 >= TILE and 1 < n1 < TILE and b0 == n1
    for r in range(blocks):
        rem = r
        xo2 = xb
        oo2 = ob
        for d in range(rank - 4, -1, -1):
            q = rem // shp[d]
            i = rem - q * shp[d]
            rem = q
            xo2 += i * xs[d]
            oo2 += i * os[d]
        for i2 in range(n2):
            xo = xo2 + i2 * a2
            oo = oo2 + i2 * b2
            if tiles:
                for c0 in range(0, n0, 64):
                    for t1 in range(0, n1, TILE):
                        s1 = min(t1, n1 - TILE)
                        for t0 in range(c0, min(c0 + 64, n0), TILE):
                            s0 = min(t0, n0 - TILE)
                            transpose_tile(out, oo + s0 * b0 + s1, b0, x, xo + s0 + s1 * a1, a1)
                continue
            if planes:
                for t0 in range(0, n0, TILE):
                    s0 = min(t0, n0 - TILE)
                    interleave_planes(out, oo + s0 * b0, x, xo + s0, a1, n1)
                continue
            if columns:
                for c0 in range(0, n0, 32):
                    m = min(32, n0 - c0)
                    for i1 in range(n1):
                        xv = x[xo + c0 + i1 * a1:xo + c0 + i1 * a1 + m]
                        o1 = oo + c0 * b0 + i1
                        for k in range(m):
                            out[np.uint64(o1 + k * b0)] = xv[k]
                continue
            if b1 == 1 and a1 == 1:
                copy_rows(out, oo, b0, x, xo, a0, n0, n1)
                continue
            for i0 in range(n0):
                xr = xo + i0 * a0
                orow = oo + i0 * b0
                # slices and unsigned indices: Numba then skips negative-index wraparound and vectorizes the copy
                if b1 == 1:
                    if a1 == 0:
                        ov = out[orow:orow + n1]
                        v = x[xr]
                        for j in range(n1):
                            ov[j] = v
                    else:
                        ov = out[orow:orow + n1]
                        for j in range(n1):
                            ov[j] = x[np.uint64(xr + j * a1)]
                else:
                    for j in range(n1):
                        out[np.uint64(orow + j * b1)] = x[np.uint64(xr + j * a1)]


def word_size(ctx: PrepareContext, t: Tensor) -> int:
    """Bytes per element as a word size; 16-byte elements are handled as two 8-byte words by the planner."""
    e = t.dtype.itemsize
    if e not in WORDS and e != 16:
        ctx.fail(f"tensor {t.name!r} has unsupported element type {t.dtype.name}")
    return e


def contiguous_strides(shape) -> list[int]:
    """Row-major element strides of `shape`."""
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * int(shape[d + 1])
    return strides


def simplify_box(shape, xs, os, xb: int, ob: int, elem: int):
    """Drop unit dims and merge dims that are contiguous on both sides; 16-byte elements become two 8-byte words.

    Strides and bases are in elements of `elem` bytes; returns (shape, xs, os, xb, ob, word bytes). The word size
    depends on the dtype only (never on shapes), so a resized model reuses its compiled runner."""
    dims = [(int(n), int(a), int(b)) for n, a, b in zip(shape, xs, os) if int(n) != 1]
    if elem == 16:  # an extra innermost dimension of two 8-byte words
        dims = [(n, 2 * a, 2 * b) for n, a, b in dims] + [(2, 1, 1)]
        xb, ob, elem = 2 * xb, 2 * ob, 8
    merged: list[tuple[int, int, int]] = []
    for n, a, b in dims:
        if merged:
            pn, pa, pb = merged[-1]
            if pa == a * n and pb == b * n:
                merged[-1] = (pn * n, a, b)
                continue
        merged.append((n, a, b))
    if not merged:
        merged = [(1, 1, 1)]
    return [m[0] for m in merged], [m[1] for m in merged], [m[2] for m in merged], xb, ob, elem


def words(ctx: PrepareContext, t: Tensor, word: int):
    """t's bytes as a flat array of `word`-byte unsigned words."""
    return ctx.view(t, (t.nbytes // word,), WORDS[word])


def schedule_strided_copy(ctx: PrepareContext, x: Tensor, out: Tensor, shape, xs, os, xb: int = 0,
                          ob: int = 0) -> None:
    """Schedule out[ob + i.os] = x[xb + i.xs] for every index i of `shape` (strides, bases in elements).

    x and out must have the same element size; x may be out itself (regions must not overlap)."""
    # empty boxes are scheduled too: the runner then does not depend on which tensors happen to be empty
    elem = word_size(ctx, x)
    ctx.check(out.dtype.itemsize == elem, f"element sizes of {x.name!r} and {out.name!r} differ")
    shp, sx, so, xb, ob, word = simplify_box(shape, xs, os, xb, ob, elem)
    xv = words(ctx, x, word)
    ov = xv if out is x else words(ctx, out, word)
    ctx.call(copy_strided, xv, ov, np.array(shp, np.int64), np.array(sx, np.int64), np.array(so, np.int64),
             int(xb), int(ob))


def schedule_fill(ctx: PrepareContext, out: Tensor, value) -> None:
    """Fill out with one element: `value` is a Python/numpy scalar (cast to out's dtype) or a 1-element Tensor.

    A fill is a copy whose source has stride 0, so it runs in copy_strided too (no extra compiled loop)."""
    elem = word_size(ctx, out)
    if isinstance(value, Tensor):
        ctx.check(value.dtype.itemsize == elem and value.size == 1, f"fill value {value.name!r} is not one element")
        schedule_strided_copy(ctx, value, out, (out.size,), (0,), (1,))
        return
    raw = np.ascontiguousarray(np.asarray(value).astype(out.dtype).reshape(1))
    word = min(elem, 8)
    pattern = raw.view(WORDS[word])  # one word, or two for 16-byte elements
    k = pattern.size
    n = out.nbytes // word
    shp, xs, os = ([n], [0], [1]) if k == 1 else ([n // k, k], [0, 1], [k, 1])
    ctx.call(copy_strided, pattern, words(ctx, out, word), np.array(shp, np.int64), np.array(xs, np.int64),
             np.array(os, np.int64), 0, 0)


# --- TRANSPOSE --------------------------------------------------------------------------------------------------

MAX_TRANSPOSE_RANK = 8


@kernel("TRANSPOSE")
def TRANSPOSE(ctx: PrepareContext) -> None:
    """out = x with dimensions permuted by perm (negative entries count from the end); any dtype, up to 8-D."""
    ctx.check_num(inputs=2, outputs=1)
    x = ctx.input(0)
    rank = x.ndim
    ctx.check(rank <= MAX_TRANSPOSE_RANK, f"input rank {rank} is above {MAX_TRANSPOSE_RANK}")
    perm_t = ctx.input(1)
    ctx.check(perm_t.dtype in (np.int32, np.int64), f"perm has type {perm_t.dtype.name}, expected int32 or int64")
    ctx.check(perm_t.ndim == 1 and perm_t.size == rank,
              f"perm has shape {list(perm_t.shape)}, expected [{rank}] for an input of rank {rank}")
    perm = [int(p) for p in np.asarray(ctx.value(1)).reshape(-1)]
    for p in perm:
        ctx.check(-rank <= p < rank, f"perm {perm} is out of range for rank {rank}")
    perm = [p + rank if p < 0 else p for p in perm]
    ctx.check(len(set(perm)) == rank, f"perm {perm} is not a permutation")
    out = ctx.set_output(0, [x.shape[p] for p in perm], x.dtype)
    xs = contiguous_strides(x.shape)
    schedule_strided_copy(ctx, x, out, out.shape, [xs[p] for p in perm], contiguous_strides(out.shape))


@kernel("REVERSE_V2")
def REVERSE_V2(ctx: PrepareContext) -> None:
    """out = x reversed along the given axes (negative strides)."""
    ctx.check_num(inputs=2, outputs=1)
    x = ctx.input(0)
    ctx.check(x.ndim <= MAX_TRANSPOSE_RANK, f"input rank {x.ndim} is above {MAX_TRANSPOSE_RANK}")
    axes = []
    for v in index_vector(ctx, 1, "axis"):
        ctx.check(-x.ndim <= v < x.ndim, f"axis {v} is out of range for rank {x.ndim}")
        axes.append(v + x.ndim if v < 0 else v)
    ctx.check(len(set(axes)) == len(axes), f"axis {axes} has duplicates")
    out = ctx.set_output(0, x.shape, x.dtype)
    xs = contiguous_strides(x.shape)
    base = sum((x.shape[d] - 1) * xs[d] for d in axes if x.shape[d] > 0)
    schedule_strided_copy(ctx, x, out, x.shape, [-s if d in axes else s for d, s in enumerate(xs)], xs, xb=base)


__all__ = ["TRANSPOSE", "REVERSE_V2", "schedule_strided_copy", "schedule_fill", "contiguous_strides", "copy_strided"]


