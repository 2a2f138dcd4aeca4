"""Sparse constants (the schema's SparsityParameters: traversal_order, block_map and per-level dim_metadata, DENSE
or SPARSE_CSR with segments/indices) expanded to their dense shape, once at prepare time (numpy, vectorised level by
level in traversal order, like TFLite's FormatConverter::SparseToDense). DENSIFY and FULLY_CONNECTED's sparse
weights use it.
"""

from __future__ import annotations

import numpy as np

from lite_numba.ops import PrepareContext

DIM_DENSE, DIM_SPARSE_CSR = 0, 1


def densify_values(dense_shape, sparsity: dict, values: np.ndarray) -> np.ndarray:
    """The dense array of `dense_shape` whose nonzeros `values` are laid out as `sparsity` describes.

    Raises ValueError (with what is wrong) for inconsistent metadata, indices outside the dense shape or too few
    values; paths whose segments or indices run past their arrays are skipped, as TFLite's converter does."""
    shape = [int(d) for d in dense_shape]
    rank = len(shape)
    order = [int(v) for v in sparsity.get("traversal_order") or []]
    block_map = [int(v) for v in sparsity.get("block_map") or []]
    dims = list(sparsity.get("dim_metadata") or [])
    levels = len(order)
    if levels != len(dims) or levels < rank:
        raise ValueError(f"sparsity has {levels} traversal levels and {len(dims)} dim_metadata for rank {rank}")
    if sorted(order[:rank]) != list(range(rank)) or sorted(order[rank:]) != list(range(rank, levels)):
        raise ValueError(f"traversal_order {order} is not a permutation of the {levels} levels")
    if len(block_map) != levels - rank or any(not 0 <= d < rank for d in block_map):
        raise ValueError(f"block_map {block_map} does not match {levels - rank} block dimensions of rank {rank}")
    dense_size = [int(d.get("dense_size", 0)) for d in dims]
    block_size = [dense_size[order[rank + i]] for i in range(len(block_map))]

    prev = np.zeros(1, np.int64)
    coords: list[np.ndarray] = []
    for level, dm in enumerate(dims):
        fmt = int(dm.get("format", DIM_DENSE))
        if fmt == DIM_DENSE:
            size = dense_size[level]
            if size < 0:
                raise ValueError(f"level {level} has negative dense_size {size}")
            coords = [c.repeat(size) for c in coords] + [np.tile(np.arange(size, dtype=np.int64), prev.size)]
            prev = (prev[:, None] * size + np.arange(size, dtype=np.int64)).reshape(-1)
        elif fmt == DIM_SPARSE_CSR:
            seg = np.asarray(dm.get("segments", np.zeros(0)), np.int64)
            idx = np.asarray(dm.get("indices", np.zeros(0)), np.int64)
            ok = prev + 1 < seg.size
            safe = np.where(ok, prev, 0)
            starts = np.where(ok, seg[safe] if seg.size else 0, 0)
            ends = np.where(ok, seg[np.minimum(safe + 1, max(seg.size - 1, 0))] if seg.size else 0, 0)
            counts = np.maximum(ends - starts, 0)
            parent = np.repeat(np.arange(prev.size), counts)
            child = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
            child += np.repeat(starts, counts)
            keep = (child >= 0) & (child < idx.size)
            parent, child = parent[keep], child[keep]
            coords = [c[parent] for c in coords] + [idx[child]]
            prev = child
        else:
            raise ValueError(f"level {level} has unknown dimension format {fmt}")

    n = prev.size
    if n > values.size:
        raise ValueError(f"sparse tensor lists {n} elements but has only {values.size} values")
    orig = [None] * rank
    for level in range(rank):
        orig[order[level]] = coords[level] if coords else np.zeros(0, np.int64)
    for level in range(rank, levels):
        b = order[level] - rank
        d = block_map[b]
        orig[d] = orig[d] * block_size[b] + coords[level]
    dense = np.zeros(shape, values.dtype)
    if n:
        for d in range(rank):
            if orig[d].min() < 0 or orig[d].max() >= shape[d]:
                raise ValueError(f"sparse indices reach {int(orig[d].max())} in dimension {d} of size {shape[d]}")
        dense[tuple(orig)] = values[:n]
    return dense


def sparse_values(t) -> np.ndarray | None:
    """The stored values of a sparse constant (the loader keeps them as the tensor's data or in its sparsity)."""
    sp = t.spec.sparsity if t.spec is not None else None
    if sp and sp.get("values") is not None:
        return np.asarray(sp["values"]).reshape(-1)
    return None if t.data is None else np.asarray(t.data).reshape(-1)


def densify_constant(ctx: PrepareContext, t) -> np.ndarray:
    """The dense contents of the sparse constant tensor t (fails naming the op on bad sparsity)."""
    values = sparse_values(t)
    ctx.check(values is not None, f"sparse tensor {t.name!r} is not a constant")
    try:
        return densify_values(t.shape, t.spec.sparsity, values.astype(t.dtype, copy=False))
    except ValueError as e:
        ctx.fail(f"sparse tensor {t.name!r}: {e}")
