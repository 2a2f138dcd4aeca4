"""GATHER, GATHER_ND, EMBEDDING_LOOKUP (row copies of raw words picked by run-time indices) and SCATTER_ND;
STABLEHLO_GATHER and STABLEHLO_SCATTER (element by element, as tflite/kernels/stablehlo_gather.cc / _scatter.cc).

Indices exist only at run time, so the kernels check every one and raise instead of reading out of bounds (the
official runtime fails the invoke the same way). Rows are copied as unsigned words of the element size.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.copy import WORDS, schedule_copy
from lite_numba.kernels.base.shapes import normalize_axis
from lite_numba.kernels.movement.embedding_blockwise import prepare_blockwise_lookup
from numba import njit

from lite_numba.ops import PrepareContext, Tensor, kernel

INDEX_TYPES = (np.int16, np.int32, np.int64)


@njit(cache=True, nogil=True)
def _check_gather_index(c, n):
    if c < 0 or c >= n:
        raise ValueError("GATHER: index out of range")


@njit(cache=True, nogil=True)
def _check_embedding_index(c, n):
    if c < 0 or c >= n:
        raise ValueError("EMBEDDING_LOOKUP: index out of range")


def make_row_gather(check):
    """The GATHER loop, raising check's "<op>: index out of range": x is [batch, outer, axis_n, inner] and out is
    [batch, outer, n_idx, inner] (words); idx is [batch, n_idx]. `check` is a module-level function, so each variant
    has its own stable name and disk-cache key (see lite_numba/jit/symbols.py)."""

    @njit(cache=True, nogil=True, _nrt=False)
    def gather_rows(x, idx, out, batch, outer, axis_n, inner, n_idx):
        for b in range(batch):
            for o in range(outer):
                xrow = (b * outer + o) * axis_n
                orow = (b * outer + o) * n_idx
                for i in range(n_idx):
                    c = np.int64(idx[b * n_idx + i])
                    check(c, axis_n)
                    # slices: Numba then skips negative-index handling and vectorizes the row copy
                    src = x[(xrow + c) * inner:(xrow + c + 1) * inner]
                    dst = out[(orow + i) * inner:(orow + i + 1) * inner]
                    for j in range(inner):
                        dst[j] = src[j]

    return gather_rows


GATHER_ROWS = make_row_gather(_check_gather_index)
EMBEDDING_ROWS = make_row_gather(_check_embedding_index)


def elem_word(t: Tensor) -> int:
    """Word size for t's elements (16-byte elements are two 8-byte words): fixed by the dtype, so the compiled runner
    does not depend on shapes."""
    return min(t.dtype.itemsize, 8)


def check_indices(ctx: PrepareContext, t: Tensor, types=INDEX_TYPES) -> None:
    ctx.check(t.dtype in [np.dtype(d) for d in types],
              f"indices have type {t.dtype.name}, expected one of " + ", ".join(np.dtype(d).name for d in types))


def schedule_row_gather(ctx: PrepareContext, loop, x: Tensor, idx: Tensor, out: Tensor, batch: int, outer: int,
                        axis_n: int, inner: int, n_idx: int) -> None:
    w = elem_word(x)
    ctx.call(loop, ctx.view(x, (x.nbytes // w,), WORDS[w]), ctx.view(idx, (idx.size,)),
             ctx.view(out, (out.nbytes // w,), WORDS[w]), batch, outer, axis_n,
             inner * x.dtype.itemsize // w, n_idx)


def _gather_inputs(ctx: PrepareContext, what: str):
    """(x, indices) of GATHER / GATHER_ND: integer indices (check_indices) into x of any 1, 2, 4, 8 or 16-byte type."""
    ctx.check_num(inputs=2, outputs=1)
    x, idx = ctx.input(0), ctx.input(1)
    check_indices(ctx, idx)
    ctx.check(x.dtype.itemsize in (1, 2, 4, 8, 16), f"{what} type {x.dtype.name} is not supported")
    return x, idx


def gather_shape(ctx: PrepareContext, x: Tensor, idx: Tensor, axis: int) -> tuple[list, int]:
    """(GATHER's output shape, batch_dims): the `batch_dims` option (negative: from the end of the indices' rank)
    checked against the axis and the leading dimensions x and the indices share (numeric and STRING GATHER)."""
    bd = int(ctx.options.get("batch_dims", 0) or 0)
    if bd < 0:
        bd += idx.ndim
    ctx.check(0 <= bd <= axis and bd < x.ndim and bd <= idx.ndim,
              f"batch_dims {ctx.options.get('batch_dims')} is invalid for axis {axis}, input rank {x.ndim} and "
              f"indices rank {idx.ndim}")
    for d in range(bd):
        ctx.check(x.shape[d] == idx.shape[d], f"batch dimension {d} differs: {x.shape[d]} vs {idx.shape[d]}")
    return list(x.shape[:axis]) + list(idx.shape[bd:]) + list(x.shape[axis + 1:]), bd


@kernel("GATHER")
def GATHER(ctx: PrepareContext) -> None:
    """out = x.take(indices, axis) with `batch_dims` leading dimensions shared by x and indices."""
    x, idx = _gather_inputs(ctx, "input")
    axis = normalize_axis(ctx, int(ctx.options.get("axis", 0)), x.ndim)
    shape, bd = gather_shape(ctx, x, idx, axis)
    out = ctx.set_output(0, shape, x.dtype)
    batch = int(np.prod(x.shape[:bd], dtype=np.int64))
    outer = int(np.prod(x.shape[bd:axis], dtype=np.int64))
    inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    n_idx = int(np.prod(idx.shape[bd:], dtype=np.int64))
    schedule_row_gather(ctx, GATHER_ROWS, x, idx, out, batch, outer, x.shape[axis], inner, n_idx)


@njit(cache=True, inline="always")
def index_offset(idx, i, dims, strides):
    """The offset idx[i, :] . strides of index tuple i (idx flat [n * d], d = dims.size), or -1 when one of its
    coordinates lies outside [0, dims)."""
    nd = dims.size
    pos = 0
    for j in range(nd):
        c = np.int64(idx[i * nd + j])
        if c < 0 or c >= dims[j]:
            return -1
        pos += c * strides[j]
    return pos


@njit(cache=True, nogil=True)
def gather_nd(x, idx, out, dims, strides, n_slices, slice_len):
    """out[i] = x[idx[i, :] . strides : + slice_len] (words); every coordinate is checked against dims."""
    for i in range(n_slices):
        pos = index_offset(idx, i, dims, strides)
        if pos < 0:
            raise ValueError("GATHER_ND: index out of range")
        src = x[pos:pos + slice_len]
        dst = out[i * slice_len:(i + 1) * slice_len]
        for k in range(slice_len):
            dst[k] = src[k]


def nd_layout(shape, nd: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(dims, element strides) of the first nd dimensions of `shape`, and the element count of the rest."""
    rest = int(np.prod(shape[nd:], dtype=np.int64))
    strides = np.zeros(nd, np.int64)
    acc = rest
    for d in range(nd - 1, -1, -1):
        strides[d] = acc
        acc *= shape[d]
    return np.array(shape[:nd], np.int64), strides, rest


@kernel("GATHER_ND")
def GATHER_ND(ctx: PrepareContext) -> None:
    """out[i...] = params[indices[i..., :]] (slices of the remaining dimensions)."""
    x, idx = _gather_inputs(ctx, "params")
    ctx.check(x.ndim >= 1, "params must be at least a vector")
    ctx.check(idx.ndim >= 1, "indices must be at least a vector")
    nd = idx.shape[-1]
    ctx.check(0 <= nd <= x.ndim, f"indices innermost dimension {nd} must be in [0, {x.ndim}]")
    shape = list(idx.shape[:-1]) + list(x.shape[nd:])
    out = ctx.set_output(0, shape, x.dtype)
    n_slices = int(np.prod(idx.shape[:-1], dtype=np.int64))
    dims, strides, rest = nd_layout(x.shape, nd)
    w = elem_word(x)
    wstrides = strides * (x.dtype.itemsize // w)
    if nd == 0:  # every slice is the whole params tensor
        dims, wstrides = np.zeros(1, np.int64) + 1, np.zeros(1, np.int64)
        idx_arg = np.zeros(n_slices, np.int32)
    else:
        idx_arg = ctx.view(idx, (idx.size,))
    ctx.call(gather_nd, ctx.view(x, (x.nbytes // w,), WORDS[w]), idx_arg, ctx.view(out, (out.nbytes // w,), WORDS[w]),
             dims, wstrides, n_slices, rest * x.dtype.itemsize // w)


def make_scatter(combine):
    """SCATTER_ND's loop: zero the output, then out[idx[i] . strides + k] = combine(out, upd[i, k])."""

    @njit(cache=True, nogil=True)
    def scatter_nd(idx, upd, out, dims, strides, n_slices, slice_len):
        for i in range(out.size):
            out[i] = 0
        for i in range(n_slices):
            pos = index_offset(idx, i, dims, strides)
            if pos < 0:
                raise ValueError("SCATTER_ND: index out of range")
            src = upd[i * slice_len:(i + 1) * slice_len]
            dst = out[pos:pos + slice_len]
            for k in range(slice_len):
                dst[k] = combine(dst[k], src[k])

    return scatter_nd


@njit(cache=True, inline="always")
def _add(a, b):
    return a + b


@njit(cache=True, inline="always")
def _or(a, b):
    return a | b


SCATTER_ADD = make_scatter(_add)
SCATTER_OR = make_scatter(_or)


@kernel("SCATTER_ND")
def SCATTER_ND(ctx: PrepareContext) -> None:
    """out = zeros(shape); out[indices[i]] += updates[i] (integers wrap around; bool ORs)."""
    ctx.check_num(inputs=3, outputs=1)
    idx, upd, shape_t = ctx.input(0), ctx.input(1), ctx.input(2)
    ctx.check_dtype(upd, np.float32, np.uint8, np.bool_, np.int8, np.int32, np.int64)
    check_indices(ctx, idx, (np.int32,))
    ctx.check(shape_t.dtype == idx.dtype, "indices and shape must have the same type")
    ctx.check(idx.ndim >= 1 and upd.ndim >= 1 and shape_t.ndim == 1,
              f"indices {list(idx.shape)}, updates {list(upd.shape)} or shape {list(shape_t.shape)} has a bad rank")
    shape = [int(v) for v in np.asarray(ctx.value(2)).reshape(-1)]
    ctx.check(all(s >= 0 for s in shape), f"shape {shape} has a negative dimension")
    outer = idx.ndim - 1
    nd = idx.shape[-1]
    ctx.check(nd <= len(shape), f"indices innermost dimension {nd} exceeds the output rank {len(shape)}")
    ctx.check(list(idx.shape[:outer]) == list(upd.shape[:outer]),
              f"indices {list(idx.shape)} and updates {list(upd.shape)} differ in the leading dimensions")
    ctx.check(list(upd.shape[outer:]) == shape[nd:],
              f"updates {list(upd.shape)} do not match shape {shape} after {nd} indexed dimensions")
    out = ctx.set_output(0, shape, upd.dtype)
    dims, strides, rest = nd_layout(shape, nd)
    n_slices = int(np.prod(idx.shape[:outer], dtype=np.int64))
    if upd.dtype == np.bool_:
        loop, u, o = SCATTER_OR, ctx.view(upd, (upd.size,), np.uint8), ctx.view(out, (out.size,), np.uint8)
    else:
        loop, u, o = SCATTER_ADD, ctx.view(upd, (upd.size,)), ctx.view(out, (out.size,))
    if nd == 0:
        dims, strides = np.ones(1, np.int64), np.zeros(1, np.int64)
        idx_arg = np.zeros(n_slices, np.int32)
    else:
        idx_arg = ctx.view(idx, (idx.size,))
    ctx.call(loop, idx_arg, u, o, dims, strides, n_slices, rest)


@njit(cache=True, nogil=True)
def embedding_hybrid(lookup, value, out, rows, cols, scales):
    """out[i, :] = float32(value[lookup[i], :]) * scale of that row (int8 bytes, as TFLite reads them)."""
    per_row = scales.size > 1
    for i in range(lookup.size):
        c = np.int64(lookup[i])
        if c < 0 or c >= rows:
            raise ValueError("EMBEDDING_LOOKUP: index out of range")
        s = scales[c] if per_row else scales[0]
        src = value[c * cols:(c + 1) * cols]
        dst = out[i * cols:(i + 1) * cols]
        for j in range(cols):
            dst[j] = np.float32(src[j]) * s


@kernel("EMBEDDING_LOOKUP")
def EMBEDDING_LOOKUP(ctx: PrepareContext) -> None:
    """out[i] = value[lookup[i]]; int8/uint8 (or unpacked int4) values with float32 output are dequantized
    (per-tensor or per-row scale, zero point 0) the way TFLite's hybrid path does."""
    ctx.check_num(inputs=2, outputs=1)
    lookup, value = ctx.input(0), ctx.input(1)
    ctx.check(lookup.ndim == 1 and lookup.dtype == np.int32,
              f"lookup must be a 1-D int32 tensor, got {lookup.dtype.name}{list(lookup.shape)}")
    ctx.check(value.ndim >= 2, f"value must have rank 2 or more, got {list(value.shape)}")
    out_t = ctx.output(0)
    shape = [lookup.shape[0]] + list(value.shape[1:])
    rows = value.shape[0]
    cols = int(np.prod(value.shape[1:], dtype=np.int64))
    q = value.quantization
    if value.spec is not None and value.spec.packed_bits:  # blockwise INT4 / INT2 table, kept packed
        return prepare_blockwise_lookup(ctx, lookup, value, shape)
    if out_t.dtype != value.dtype and out_t.dtype == np.float32:
        ctx.check(value.dtype in (np.int8, np.uint8), f"cannot dequantize {value.dtype.name} values")
        ctx.check(q.scales.size in (1, rows) and q.scales.size > 0, "value needs one scale or one per row")
        ctx.check(bool(np.all(q.zero_points == 0)) or q.scales.size == 0,
                  "hybrid lookup needs zero point 0")
        if q.scales.size > 1:
            ctx.check(q.quantized_dimension == 0, "per-row scales must be on dimension 0")
        out = ctx.set_output(0, shape, np.float32)
        # TFLite reads the value bytes as int8 whatever the declared type
        ctx.call(embedding_hybrid, ctx.view(lookup, (lookup.size,)), ctx.view(value, (value.size,), np.int8),
                 ctx.view(out, (out.size,)), rows, cols, q.scales.astype(np.float32))
        return
    ctx.check(out_t.dtype == value.dtype, f"output type {out_t.dtype.name} differs from value type {value.dtype.name}")
    ctx.check(value.dtype.itemsize in (1, 2, 4, 8, 16), f"value type {value.dtype.name} is not supported")
    out = ctx.set_output(0, shape, value.dtype)
    schedule_row_gather(ctx, EMBEDDING_ROWS, value, lookup, out, 1, 1, rows, cols, lookup.shape[0])


__all__ = ["GATHER", "GATHER_ND", "SCATTER_ND", "EMBEDDING_LOOKUP", "STABLEHLO_GATHER", "STABLEHLO_SCATTER"]


@njit(cache=True, nogil=True)
def reverse_sequence(x, lens, out, A, B, C, D, E, batch_first):
    """x and out are [A, B, C, D, E] words; batch is dimension B and sequence D when batch_first, else the reverse.
    Positions s < L (L the batch's sequence length) take position L - 1 - s; the rest are copied."""
    seq_n = D if batch_first else B
    for i in range(lens.size):
        if np.int64(lens[i]) > seq_n:
            raise ValueError("REVERSE_SEQUENCE: a sequence length exceeds the sequence dimension")
    for a in range(A):
        for b in range(B):
            for c in range(C):
                for d in range(D):
                    if batch_first:
                        L = np.int64(lens[b])
                        sb, sd = b, (L - 1 - d if d < L else d)
                    else:
                        L = np.int64(lens[d])
                        sb, sd = (L - 1 - b if b < L else b), d
                    src = x[(((a * B + sb) * C + c) * D + sd) * E:(((a * B + sb) * C + c) * D + sd + 1) * E]
                    o = (((a * B + b) * C + c) * D + d) * E
                    dst = out[o:o + E]
                    for e in range(E):
                        dst[e] = src[e]


@kernel("REVERSE_SEQUENCE")
def REVERSE_SEQUENCE(ctx: PrepareContext) -> None:
    """Reverse the first seq_lengths[b] elements along seq_dim of each slice b along batch_dim."""
    ctx.check_num(inputs=2, outputs=1)
    x, lens = ctx.input(0), ctx.input(1)
    ctx.check(x.dtype.itemsize in (1, 2, 4, 8, 16), f"input type {x.dtype.name} is not supported")
    ctx.check_dtype(lens, np.int32, np.int64)
    ctx.check(lens.ndim == 1, f"seq_lengths must be a vector, got shape {list(lens.shape)}")
    seq_dim, batch_dim = int(ctx.options.get("seq_dim", 0)), int(ctx.options.get("batch_dim", 0))
    ctx.check(0 <= seq_dim < x.ndim and 0 <= batch_dim < x.ndim and seq_dim != batch_dim,
              f"seq_dim {seq_dim} and batch_dim {batch_dim} must differ and lie in [0, {x.ndim})")
    ctx.check(lens.shape[0] == x.shape[batch_dim],
              f"seq_lengths has {lens.shape[0]} elements, batch dimension {x.shape[batch_dim]}")
    out = ctx.set_output(0, x.shape, x.dtype)
    if out.size == 0:
        return
    lo, hi = min(seq_dim, batch_dim), max(seq_dim, batch_dim)
    w = elem_word(x)
    A = int(np.prod(x.shape[:lo], dtype=np.int64))
    C = int(np.prod(x.shape[lo + 1:hi], dtype=np.int64))
    E = int(np.prod(x.shape[hi + 1:], dtype=np.int64)) * (x.dtype.itemsize // w)
    ctx.call(reverse_sequence, ctx.view(x, (x.nbytes // w,), WORDS[w]), lens,
             ctx.view(out, (out.nbytes // w,), WORDS[w]), A, x.shape[lo], C, x.shape[hi], E,
             int(batch_dim < seq_dim))


# --- STABLEHLO_GATHER / STABLEHLO_SCATTER ------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _decode(k, shape, strides_a, strides_b, n):
    """Offsets of the row-major multi-index k of `shape` (its first n dims) along two sets of strides."""
    a = 0
    b = 0
    for d in range(n - 1, -1, -1):
        c = k % shape[d]
        k //= shape[d]
        a += c * strides_a[d]
        b += c * strides_b[d]
    return a, b


@njit(cache=True, nogil=True)
def stablehlo_gather(x, idx, out, bshape, bidx, bout, nvec, ivs, sim, opshape, opstr, sizes, oshape, ox, oout,
                     start):
    """For each batch position: the start index read from idx (nvec values, stride ivs), scattered to the operand
    dims sim, clamped to [0, dim - slice size]; then the slice copied, offset dims walking the operand by ox and
    the result by oout."""
    nb = bshape.size
    no = oshape.size
    nbatch = 1
    for d in range(nb):
        nbatch *= bshape[d]
    noff = 1
    for d in range(no):
        noff *= oshape[d]
    for b in range(nbatch):
        ioff, roff = _decode(b, bshape, bidx, bout, nb)
        for d in range(start.size):
            start[d] = 0
        for i in range(nvec):
            start[sim[i]] = idx[ioff + i * ivs]
        base = 0
        for d in range(start.size):
            s = min(start[d], opshape[d] - sizes[d])
            base += max(s, 0) * opstr[d]
        for o in range(noff):
            xo, ro = _decode(o, oshape, ox, oout, no)
            out[roff + ro] = x[base + xo]


def _int_list(ctx: PrepareContext, key: str) -> list[int]:
    return [int(v) for v in (ctx.options.get(key) or [])]


def _index_vector(ctx: PrepareContext, idx: Tensor, ivd: int) -> tuple[list[int], list[int], int, int]:
    """(batch dims of the indices, their strides, index vector size, its stride): the vector runs along
    index_vector_dim; at the indices' rank it is implicit, one value per position."""
    ctx.check(0 <= ivd <= idx.ndim, f"index_vector_dim {ivd} is outside [0, {idx.ndim}]")
    st = [1] * idx.ndim
    for d in range(idx.ndim - 2, -1, -1):
        st[d] = st[d + 1] * idx.shape[d + 1]
    dims = [d for d in range(idx.ndim) if d != ivd]
    if ivd == idx.ndim:
        return [idx.shape[d] for d in dims], [st[d] for d in dims], 1, 0
    return [idx.shape[d] for d in dims], [st[d] for d in dims], idx.shape[ivd], st[ivd]


def _strides(shape) -> list[int]:
    st = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        st[d] = st[d + 1] * int(shape[d + 1])
    return st


def _i64(v) -> np.ndarray:
    return np.array(v, np.int64).reshape(-1)


@kernel("STABLEHLO_GATHER")
def STABLEHLO_GATHER(ctx: PrepareContext) -> None:
    """stablehlo.gather: slices of slice_sizes at start indices read along index_vector_dim of the indices (int32 or
    int64), placed by start_index_map and clamped into the operand; collapsed_slice_dims dropped, the rest at
    offset_dims of the result, whose other dims are the indices' batch dims. Any 1/2/4/8-byte type."""
    ctx.check_num(inputs=2, outputs=1)
    x, idx = ctx.input(0), ctx.input(1)
    ctx.check(idx.dtype in (np.int32, np.int64), f"(Index Type: {idx.dtype.name}) currently not supported")
    ctx.check(x.dtype.itemsize in WORDS, f"(Data Type: {x.dtype.name}) currently not supported")
    r = x.ndim
    offset_dims, collapsed = _int_list(ctx, "offset_dims"), _int_list(ctx, "collapsed_slice_dims")
    sim, sizes = _int_list(ctx, "start_index_map"), _int_list(ctx, "slice_sizes")
    ivd = int(ctx.options.get("index_vector_dim", 0))
    ctx.check(len(sizes) == r, f"slice_sizes {sizes} has {len(sizes)} values for an operand of rank {r}")
    ctx.check(all(0 <= s <= n for s, n in zip(sizes, x.shape)),
              f"slice_sizes {sizes} do not fit the operand {list(x.shape)}")
    ctx.check(all(0 <= d < r for d in collapsed) and len(set(collapsed)) == len(collapsed)
              and all(sizes[d] <= 1 for d in collapsed), f"collapsed_slice_dims {collapsed} are not dims of size 1")
    kept = [d for d in range(r) if d not in collapsed]
    ctx.check(len(offset_dims) == len(kept), f"offset_dims {offset_dims} must name {len(kept)} dims (the slice dims "
                                             f"not collapsed)")
    bdims, bstr, nvec, ivs = _index_vector(ctx, idx, ivd)
    ctx.check(len(sim) == nvec and all(0 <= d < r for d in sim) and len(set(sim)) == len(sim),
              f"start_index_map {sim} must name {nvec} distinct operand dims (the index vector's size)")
    rank = len(offset_dims) + len(bdims)
    ctx.check(sorted(offset_dims) == offset_dims and len(set(offset_dims)) == len(offset_dims)
              and all(0 <= d < rank for d in offset_dims), f"offset_dims {offset_dims} are not increasing dims of "
                                                           f"the result (rank {rank})")
    shape, b_it, o_it = [], iter(bdims), iter(sizes[d] for d in kept)
    for d in range(rank):
        shape.append(next(o_it) if d in offset_dims else next(b_it))
    out = ctx.set_output(0, shape, x.dtype)
    if out.size == 0 or x.size == 0:
        return
    rs, xs = _strides(shape), _strides(x.shape)
    batch_result_dims = [d for d in range(rank) if d not in offset_dims]
    word = WORDS[x.dtype.itemsize]
    ctx.call(stablehlo_gather, ctx.view(x, (x.size,), word), ctx.view(idx, (idx.size,)),
             ctx.view(out, (out.size,), word), _i64(bdims), _i64(bstr), _i64([rs[d] for d in batch_result_dims]),
             nvec, ivs, _i64(sim), _i64(x.shape), _i64(xs), _i64(sizes), _i64([sizes[d] for d in kept]),
             _i64([xs[d] for d in kept]), _i64([rs[d] for d in offset_dims]), ctx.temp((r,), np.int64))


@njit(cache=True, nogil=True, error_model="numpy")
def stablehlo_scatter(upd, idx, out, kind, ushape, ubatch, uwin, nvec, ivs, sdto, opshape, opstr, pos):
    """In row-major order over the updates: the result index = the start index (read from idx at the update's
    batch position, scattered to the operand dims sdto) + the update's window index (uwin: the operand dim of
    each update dim, -1 for batch dims); out of bounds: skipped; else out = update (kind 0) or out + / * / max /
    min update (1-4), in the updates' order."""
    nu = ushape.size
    r = opshape.size
    n = 1
    for d in range(nu):
        n *= ushape[d]
    for k in range(n):
        rem = k
        ioff = 0
        for d in range(r):
            pos[d] = 0
        for d in range(nu - 1, -1, -1):
            c = rem % ushape[d]
            rem //= ushape[d]
            if uwin[d] < 0:
                ioff += c * ubatch[d]
            else:
                pos[uwin[d]] += c
        for i in range(nvec):
            pos[sdto[i]] += idx[ioff + i * ivs]
        flat = 0
        inside = True
        for d in range(r):
            if pos[d] < 0 or pos[d] >= opshape[d]:
                inside = False
            flat += pos[d] * opstr[d]
        if not inside:
            continue
        a = out[flat]
        b = upd[k]
        if kind == 0:
            out[flat] = b
        elif kind == 1:
            out[flat] = a + b
        elif kind == 2:
            out[flat] = a * b
        elif kind == 3:
            out[flat] = b if a < b else a
        else:
            out[flat] = b if b < a else a


SCATTER_COMBINERS = {(): 0, ("STABLEHLO_ADD",): 1, ("STABLEHLO_MULTIPLY",): 2, ("STABLEHLO_MAXIMUM",): 3,
                     ("STABLEHLO_MINIMUM",): 4}


def _scatter_kind(ctx: PrepareContext) -> int:
    """How updates combine, from the update computation subgraph's ops (options["subgraph_ops"], filled at load by
    lite_numba.runtime.composites): none (the update replaces), or one STABLEHLO_ADD / MULTIPLY / MAXIMUM / MINIMUM."""
    ops = tuple(ctx.options.get("subgraph_ops", ()))
    ctx.check(len(ops) <= 1, f"Only one kernel allowed within the stablehlo region. ({len(ops)}) kernels found.")
    ctx.check(ops in SCATTER_COMBINERS, f"the update computation is {ops[0] if ops else ''}: Only update, Add, "
                                        f"Multiply, Maximum and Minimum operations are currently supported for "
                                        f"stablehlo.scatter.")
    return SCATTER_COMBINERS[ops]


@kernel("STABLEHLO_SCATTER")
def STABLEHLO_SCATTER(ctx: PrepareContext) -> None:
    """stablehlo.scatter: the operand, with each update element combined into it at the start index read along
    index_vector_dim of the indices (int32 / int64, placed by scatter_dims_to_operand_dims) plus its window index
    (update_window_dims, with inserted_window_dims added); elements landing outside the operand are skipped, as
    the official kernel and StableHLO's reference interpreter do. Float16 only replaces (no arithmetic here)."""
    ctx.check_num(inputs=3, outputs=1)
    x, idx, upd = ctx.input(0), ctx.input(1), ctx.input(2)
    ctx.check(idx.dtype in (np.int32, np.int64), f"(Index Type: {idx.dtype.name}) currently not supported")
    ctx.check(upd.dtype == x.dtype, f"updates have type {upd.dtype.name}, the operand {x.dtype.name}")
    kind = _scatter_kind(ctx)
    ctx.check(x.dtype.kind in "biuf" and (x.dtype != np.float16 or kind == 0),
              f"(Data Type: {x.dtype.name}) currently not supported" +
              (" for arithmetic combinations" if x.dtype == np.float16 else ""))
    r = x.ndim
    uwd, inserted = _int_list(ctx, "update_window_dims"), _int_list(ctx, "inserted_window_dims")
    sdto = _int_list(ctx, "scatter_dims_to_operand_dims")
    ivd = int(ctx.options.get("index_vector_dim", 0))
    bdims, bstr, nvec, ivs = _index_vector(ctx, idx, ivd)
    ctx.check(len(sdto) == nvec and all(0 <= d < r for d in sdto),
              f"scatter_dims_to_operand_dims {sdto} must name {nvec} operand dims (the index vector's size)")
    ctx.check(all(0 <= d < upd.ndim for d in uwd) and len(set(uwd)) == len(uwd),
              f"update_window_dims {uwd} are not distinct dims of the updates (rank {upd.ndim})")
    window_dims = [d for d in range(r) if d not in inserted]
    ctx.check(all(0 <= d < r for d in inserted) and len(window_dims) == len(uwd),
              f"inserted_window_dims {inserted} and update_window_dims {uwd} do not cover the operand's rank {r}")
    scatter_dims = [d for d in range(upd.ndim) if d not in uwd]
    ctx.check(len(scatter_dims) == len(bdims) and all(upd.shape[d] == n for d, n in zip(scatter_dims, bdims)),
              f"updates {list(upd.shape)}: their scatter dims {scatter_dims} must match the indices' batch dims "
              f"{bdims}")
    out = ctx.set_output(0, x.shape, x.dtype)
    if out.size == 0:
        return
    schedule_copy(ctx, x, out)
    word = WORDS[x.dtype.itemsize] if kind == 0 else x.dtype
    if upd.size == 0:
        return
    ubatch, uwin = [0] * upd.ndim, [-1] * upd.ndim
    for d, s in zip(scatter_dims, bstr):
        ubatch[d] = s
    for d, od in zip(uwd, window_dims):
        uwin[d] = od
    ctx.call(stablehlo_scatter, ctx.view(upd, (upd.size,), word), ctx.view(idx, (idx.size,)),
             ctx.view(out, (out.size,), word), kind, _i64(upd.shape), _i64(ubatch), _i64(uwin), nvec, ivs,
             _i64(sdto), _i64(x.shape), _i64(_strides(x.shape)), ctx.temp((r,), np.int64))


STABLEHLO_SCATTER.meta["subgraph_ops"] = "update_computation_subgraph_index"
