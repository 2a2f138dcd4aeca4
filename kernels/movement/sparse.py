"""SPARSE_TO_DENSE, UNIQUE and EMBEDDING_LOOKUP_SPARSE: ops whose indices, or whose output shape, come from data.

- SPARSE_TO_DENSE: the output shape is an input read with ctx.value(); indices exist only at run time, so the kernel
  checks every one against the output shape and raises (the official kernel fails the invoke the same way).
- UNIQUE: the number of distinct values decides the output shape, so the input is read with ctx.value() (the node is
  dynamic unless the input is constant). Values are grouped as std::map groups them (equal under <, so -0.0 and 0.0
  are one value, the first occurrence's bits kept), in order of first occurrence. NaN keys make std::map's order
  undefined; lite-numba keeps all NaNs as one value.
- EMBEDDING_LOOKUP_SPARSE: the output shape comes from dense_shape (ctx.value()); the kernel follows the official
  loop (rows combined in input order, SUM / MEAN / SQRTN applied when the output bucket changes), raises for ids
  outside the table, and skips output elements outside the output as the official loop does (also when finishing a
  bucket, where the official kernel does not check).
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.copy import WORDS
from lite_numba.kernels.base.sort import stable_sort
from lite_numba.kernels.movement.gather import index_offset
from numba import njit

from lite_numba.ops import PrepareContext, kernel

# --- SPARSE_TO_DENSE ---------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def sparse_to_dense(idx, values, scalar_value, default, out, dims, strides):
    """out = default; out[idx[i, :] . strides] = values[i] (or values[0] when scalar_value), in order (the last
    duplicate wins). idx is [n * d] flat, d = dims.size."""
    for i in range(out.size):
        out[i] = default[0]
    d = dims.size
    n = idx.size // d if d else 0
    for i in range(n):
        pos = index_offset(idx, i, dims, strides)
        if pos < 0:
            raise ValueError("SPARSE_TO_DENSE: index out of range")
        out[pos] = values[0] if scalar_value else values[i]


@kernel("SPARSE_TO_DENSE")
def SPARSE_TO_DENSE(ctx: PrepareContext) -> None:
    """A dense tensor of output_shape filled with default_value, with values written at the sparse indices."""
    ctx.check_num(inputs=4, outputs=1)
    idx, shape_t, values, default = ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3)
    ctx.check_dtype(idx, np.int32, np.int64)
    ctx.check_dtype(shape_t, np.int32, np.int64)
    ctx.check_dtype(values, np.int32, np.int64, np.int8, np.uint8, np.float32)
    ctx.check(default.dtype == values.dtype,
              f"default_value type {default.dtype.name} differs from values type {values.dtype.name}")
    ctx.check(idx.ndim < 3, f"indices must have rank 0, 1 or 2, got {idx.ndim}")
    ctx.check(shape_t.ndim == 1, f"output_shape must be a vector, got shape {list(shape_t.shape)}")
    ctx.check(values.ndim < 2, f"values must be a scalar or a vector, got shape {list(values.shape)}")
    ctx.check(default.size == 1, f"default_value must have one element, got shape {list(default.shape)}")
    if idx.ndim < 2:
        n, d = idx.size, 1
        ctx.check(shape_t.size == 1, f"1-D indices need a 1-D output shape, got {shape_t.size} dimensions")
    else:
        n, d = idx.shape
        ctx.check(d == shape_t.size, f"indices have {d} coordinates, the output shape {shape_t.size} dimensions")
    if values.ndim:
        ctx.check(values.size == n, f"{values.size} values for {n} indices")
    ctx.check(shape_t.size <= 4, f"output rank {shape_t.size} > 4 is not supported (as the official kernel)")
    shape = [int(v) for v in np.asarray(ctx.value(1)).reshape(-1)]
    ctx.check(all(s >= 0 for s in shape), f"output shape {shape} has a negative dimension")
    out = ctx.set_output(0, shape, values.dtype)
    if out.size == 0:
        if n:  # every index is out of range of an empty output
            ctx.call(_raise_sparse_index, 0)
        return
    dims = np.array(shape if shape else [1], np.int64)
    strides = np.ones(dims.size, np.int64)
    for j in range(dims.size - 2, -1, -1):
        strides[j] = strides[j + 1] * dims[j + 1]
    if d == 0:  # a scalar output: every index row is empty and names the one element
        idx_arg, dims, strides = np.zeros(n, np.int32), np.ones(1, np.int64), np.zeros(1, np.int64)
    else:
        idx_arg = ctx.view(idx, (idx.size,))
    w = WORDS[values.dtype.itemsize]
    vals = ctx.view(values, (max(values.size, 1),), w) if values.size else np.zeros(1, w)
    ctx.call(sparse_to_dense, idx_arg, vals, int(values.ndim == 0), ctx.view(default, (1,), w),
             ctx.view(out, (out.size,), w), dims, strides)


@njit(cache=True, nogil=True)
def _raise_sparse_index(dummy):
    raise ValueError("SPARSE_TO_DENSE: index out of range")


# --- UNIQUE ------------------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _value_less(v, a, b):
    return v[a] < v[b]


@njit(cache=True, nogil=True)
def unique(x, out, idx_out, perm, tmp, group):
    """out = the distinct values of x in order of first occurrence; idx_out[i] = position of x[i] in out.
    perm, tmp, group: int64 scratch of x.size."""
    n = x.size
    for i in range(n):
        perm[i] = i
    stable_sort(perm, tmp, n, 1, _value_less, x)  # perm = a stable ordering of x's indices by value
    # groups of equal values in sorted order; tmp[g] = first (smallest) original index of group g
    g = -1
    for j in range(n):
        p = perm[j]
        if j == 0 or x[perm[j - 1]] < x[p]:
            g += 1
            tmp[g] = p
        group[p] = g
    # number the groups by first occurrence: perm[g] = unique position of group g
    u = 0
    for i in range(n):
        gi = group[i]
        if tmp[gi] == i:
            perm[gi] = u
            out[u] = x[i]
            u += 1
    for i in range(n):
        idx_out[i] = perm[group[i]]


def _count_unique(v: np.ndarray) -> int:
    if v.size == 0:
        return 0
    s = np.sort(v, kind="stable")
    return 1 + int(np.count_nonzero(s[:-1] < s[1:]))


@kernel("UNIQUE")
def UNIQUE(ctx: PrepareContext) -> None:
    """(distinct values in order of first occurrence, index of each input value among them)."""
    ctx.check_num(inputs=1, outputs=2)
    x = ctx.input(0)
    ctx.check_dtype(x, np.int8, np.int16, np.int32, np.int64, np.float32, np.uint8)
    ctx.check(x.ndim == 1, f"the input must be a vector, got shape {list(x.shape)}")
    idx_type = {2: np.int32, 4: np.int64}.get(int(ctx.options.get("idx_out_type", 2)))
    ctx.check(idx_type is not None, f"idx_out_type {ctx.options.get('idx_out_type')} must be INT32 or INT64")
    ctx.check(ctx.output(1).dtype == idx_type,
              f"index output type {ctx.output(1).dtype.name} differs from idx_out_type {np.dtype(idx_type).name}")
    k = _count_unique(np.asarray(ctx.value(0)).reshape(-1))
    out = ctx.set_output(0, (k,), x.dtype)
    idx_out = ctx.set_output(1, x.shape, idx_type)
    n = x.size
    if n == 0:
        return
    # integers compare equal exactly when their bits do: group them as unsigned words (fewer compiled loops)
    xv = ctx.view(x, (n,)) if x.dtype.kind == "f" else ctx.view(x, (n,), WORDS[x.dtype.itemsize])
    ov = ctx.view(out, (k,)) if x.dtype.kind == "f" else ctx.view(out, (k,), WORDS[x.dtype.itemsize])
    ctx.call(unique, xv, ov, idx_out, ctx.temp((n,), np.int64), ctx.temp((n,), np.int64), ctx.temp((n,), np.int64))


# --- EMBEDDING_LOOKUP_SPARSE -------------------------------------------------------------------------------------

SUM, MEAN, SQRTN = 0, 1, 2


@njit(cache=True, nogil=True, error_model="numpy")
def _finalize(out, off, emb, combiner, count, total, squares):
    if combiner != SUM and count > 0:
        m = total if combiner == MEAN else np.sqrt(squares)
        for k in range(emb):
            if 0 <= off + k < out.size:
                out[off + k] /= m


@njit(cache=True, nogil=True, error_model="numpy")
def embedding_lookup_sparse(ids, indices, dense, weights, value, out, rows, emb, combiner):
    """The official loop: indices [n, lookup_rank] pick the output bucket (row-major over dense[:-1]), value rows
    ids[i] scaled by weights[i] are summed into it, and the combiner divides a bucket's sum when the bucket changes."""
    for i in range(out.size):
        out[i] = 0.0
    n = ids.size
    lr = dense.size
    cur = 0
    count = 0
    total = np.float32(0.0)
    squares = np.float32(0.0)
    vsize = value.size
    for i in range(n):
        idx = np.int64(ids[i])
        if idx < 0 or idx >= rows:
            raise ValueError("EMBEDDING_LOOKUP_SPARSE: index out of range")
        bucket = 0
        stride = 1
        for k in range(lr - 2, -1, -1):
            bucket += np.int64(indices[i * lr + k]) * stride
            stride *= np.int64(dense[k])
        off = bucket * emb
        if off != cur:
            _finalize(out, cur, emb, combiner, count, total, squares)
            count = 0
            total = np.float32(0.0)
            squares = np.float32(0.0)
            cur = off
        count += 1
        w = weights[i]
        squares += w * w
        total += w
        base = idx * emb
        for k in range(emb):
            o = cur + k
            s = base + k
            if o < 0 or o >= out.size or s < 0 or s >= vsize:
                continue
            out[o] += value[s] * w
    _finalize(out, cur, emb, combiner, count, total, squares)


@kernel("EMBEDDING_LOOKUP_SPARSE")
def EMBEDDING_LOOKUP_SPARSE(ctx: PrepareContext) -> None:
    """Weighted sums (or means / sqrt-n means) of embedding rows, grouped by sparse indices into dense_shape."""
    ctx.check_num(inputs=5, outputs=1)
    ids, indices, dense_t, weights, value = (ctx.input(i) for i in range(5))
    ctx.check(ids.ndim == 1 and ids.dtype == np.int32, f"ids must be an int32 vector, got {ids.dtype.name}"
              f"{list(ids.shape)}")
    ctx.check(indices.ndim == 2 and indices.dtype == np.int32,
              f"indices must be a 2-D int32 tensor, got {indices.dtype.name}{list(indices.shape)}")
    ctx.check(dense_t.ndim == 1 and dense_t.dtype == np.int32,
              f"dense_shape must be an int32 vector, got {dense_t.dtype.name}{list(dense_t.shape)}")
    ctx.check(weights.ndim == 1 and weights.dtype == np.float32,
              f"weights must be a float32 vector, got {weights.dtype.name}{list(weights.shape)}")
    ctx.check(indices.shape[0] == ids.shape[0] == weights.shape[0],
              f"ids {list(ids.shape)}, indices {list(indices.shape)} and weights {list(weights.shape)} disagree")
    ctx.check(value.ndim >= 2 and value.dtype == np.float32,
              f"value must be a float32 tensor of rank >= 2, got {value.dtype.name}{list(value.shape)}")
    ctx.check(ctx.output(0).dtype == np.float32, "the output must be float32")
    lookup_rank = indices.shape[1]
    ctx.check(dense_t.shape[0] == lookup_rank,
              f"dense_shape has {dense_t.shape[0]} elements, indices {lookup_rank} coordinates")
    ctx.check(lookup_rank >= 1, "indices need at least one coordinate")
    combiner = int(ctx.options.get("combiner", SUM))
    ctx.check(combiner in (SUM, MEAN, SQRTN), f"combiner {combiner} is not SUM, MEAN or SQRTN")
    dense = [int(v) for v in np.asarray(ctx.value(2)).reshape(-1)]
    ctx.check(all(v >= 0 for v in dense[:-1]), f"dense_shape {dense} has a negative dimension")
    shape = dense[:-1] + list(value.shape[1:])
    out = ctx.set_output(0, shape, np.float32)
    emb = int(np.prod(value.shape[1:], dtype=np.int64))
    ctx.call(embedding_lookup_sparse, ids, ctx.view(indices, (indices.size,)), dense_t, weights,
             ctx.view(value, (value.size,)), ctx.view(out, (max(out.size, 0),)), value.shape[0], emb, combiner)


__all__ = ["SPARSE_TO_DENSE", "UNIQUE", "EMBEDDING_LOOKUP_SPARSE"]
