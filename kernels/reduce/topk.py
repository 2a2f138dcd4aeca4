"""TOPK_V2: the k largest values of every row (last axis), sorted descending, with their int32/int16 indices.

Order as TFLite's TopContainer: larger values first, NaN after every number, ties by the lower index. The result
is fully determined by that order, so any correct selection matches it: small k keep a sorted insertion buffer,
larger k sort the row's indices with a stable merge sort in a scratch buffer.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.sort import stable_sort
from numba import njit

from lite_numba.ops import PrepareContext, kernel

# up to this k, insertion into the k-element result is cheaper than sorting the row
_INSERTION_MAX_K = 16


@njit(cache=True, nogil=True, inline="always")
def _before(x, r, a, b):
    """True when element a of row r comes before element b (a < b) in the output order."""
    va = x[r, a]
    vb = x[r, b]
    a_nan = va != va
    b_nan = vb != vb
    if a_nan != b_nan:
        return b_nan
    if vb < va:
        return True
    if vb > va:
        return False
    return a < b


@njit(cache=True, inline="always")
def _row_before(row, a, b):
    x, r = row
    return _before(x, r, a, b)


@njit(cache=True, nogil=True)
def topk(x, values, indices, scratch):
    """x [rows, n] -> values, indices [rows, k]; scratch holds 2*n int32 (used when k is large)."""
    rows, n = x.shape
    k = values.shape[1]
    for r in range(rows):
        if k <= _INSERTION_MAX_K:
            m = 0
            for c in range(n):
                if m == k and not _before(x, r, c, indices[r, k - 1]):
                    continue
                j = m if m < k else k - 1
                # shift worse elements right; c is the latest index, so it goes after equal values
                while j > 0 and _before(x, r, c, indices[r, j - 1]):
                    indices[r, j] = indices[r, j - 1]
                    j -= 1
                indices[r, j] = c
                if m < k:
                    m += 1
        else:
            order = scratch[:n]
            for c in range(n):
                order[c] = c
            stable_sort(order, scratch[n:2 * n], n, 1, _row_before, (x, r))
            for c in range(k):
                indices[r, c] = order[c]
        for c in range(k):
            values[r, c] = x[r, indices[r, c]]


@kernel("TOPK_V2")
def TOPK_V2(ctx: PrepareContext) -> None:
    """The k largest values of every row with their indices (values, indices outputs)."""
    ctx.check_num(inputs=2, outputs=2)
    x, k_t = ctx.input(0), ctx.input(1)
    ctx.check_dtype(x, np.float32, np.uint8, np.int8, np.int16, np.int32, np.int64)
    ctx.check_dtype(k_t, np.int32, np.int16)
    ctx.check(k_t.size == 1, f"k must have one element, got shape {list(k_t.shape)}")
    ctx.check(x.ndim >= 1, "input must have rank >= 1")
    ctx.check(ctx.output(0).dtype == x.dtype,
              f"values output type {ctx.output(0).dtype.name} differs from input type {x.dtype.name}")
    ctx.check_dtype(ctx.output(1), np.int32, np.int16)
    k = int(np.asarray(ctx.value(1)).reshape(-1)[0])
    n = x.shape[-1]
    ctx.check(k <= n, f"k = {k} is higher than the last dimension {n}")
    k = max(k, 0)
    ctx.check(n <= np.iinfo(ctx.output(1).dtype).max or k == 0,
              f"row size {n} exceeds the range of the {ctx.output(1).dtype.name} indices")
    shape = x.shape[:-1] + (k,)
    values = ctx.set_output(0, shape)
    indices = ctx.set_output(1, shape)
    rows = x.size // n if n else 0
    if rows == 0 or k == 0:
        return
    scratch = ctx.temp((2 * n if k > _INSERTION_MAX_K else 1,), np.int32)
    ctx.call(topk, ctx.view(x, (rows, n)), ctx.view(values, (rows, k)), ctx.view(indices, (rows, k)), scratch)


__all__ = ["TOPK_V2"]
