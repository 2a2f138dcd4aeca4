"""The strided-copy engine shared by the data-movement kernels, and TRANSPOSE.

Every dtype-agnostic data-movement op (transpose, slices, concatenation, split, pack, pad, tile, broadcast, reverse)
is a copy `out[o_base + sum(i_d * os_d)] = x[x_base + sum(i_d * xs_d)]` over an index box `shape`, with element
strides that may be zero (broadcast) or negative (reverse, mirror). `schedule_strided_copy` simplifies the box in
Python (drops unit dimensions, merges dimensions that are contiguous on both sides) and schedules `copy_strided` over
the tensors' bytes viewed as unsigned words of the element size: one compiled loop per element size (1, 2, 4, 8
bytes; 16-byte elements are pairs of 8-byte words) serves every dtype and every rank. Shapes, strides and offsets are
arguments, so the executor's fused runner does not depend on them and a resized model is not recompiled.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.copy import WORDS
from lite_numba.kernels.base.shapes import index_vector
from lite_numba.kernels.base.vecmath import wide_vectors
from numba import njit

from lite_numba.ops import PrepareContext, Tensor, kernel


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
    a1]: rows of n1 along the output's contiguous last dimension (plain or broadcast rows vectorize), or, when the
    input is contiguous along the other dimension and not along this one (a transpose), columns of that dimension
    in blocks of 32: each read is a run of 32 consecutive words, and the 32 output lines it writes stay in L1
    while the block is done. The outer dimensions are walked by decomposing the block number (rank - 2 divisions
    per block). One function body, no helper taking the arrays: Numba reference-counts arrays passed into a
    function at every call."""
    wide_vectors()  # a copy: the same words whatever the vector width
    rank = shp.size
    n1, a1, b1 = shp[rank - 1], xs[rank - 1], os[rank - 1]
    n0, a0, b0 = (shp[rank - 2], xs[rank - 2], os[rank - 2]) if rank > 1 else (1, 0, 0)
    if n1 == 0 or n0 == 0:
        return
    blocks = 1
    for d in range(rank - 2):
        blocks *= shp[d]
    columns = b1 == 1 and a1 != 1 and a0 == 1 and n0 > 1
    for r in range(blocks):
        rem = r
        xo = xb
        oo = ob
        for d in range(rank - 3, -1, -1):
            q = rem // shp[d]
            i = rem - q * shp[d]
            rem = q
            xo += i * xs[d]
            oo += i * os[d]
        if columns:
            for c0 in range(0, n0, 32):
                m = min(32, n0 - c0)
                for i1 in range(n1):
                    xv = x[xo + c0 + i1 * a1:xo + c0 + i1 * a1 + m]
                    o1 = oo + c0 * b0 + i1
                    for k in range(m):
                        out[np.uint64(o1 + k * b0)] = xv[k]
            continue
        for i0 in range(n0):
            xr = xo + i0 * a0
            orow = oo + i0 * b0
            # slices and unsigned indices: Numba then skips negative-index wraparound and vectorizes the copy
            if b1 == 1:
                ov = out[orow:orow + n1]
                if a1 == 1:
                    xv = x[xr:xr + n1]
                    for j in range(n1):
                        ov[j] = xv[j]
                elif a1 == 0:
                    v = x[xr]
                    for j in range(n1):
                        ov[j] = v
                else:
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


