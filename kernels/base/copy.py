"""Copies of raw bytes: a tensor's bytes moved as unsigned words, so one compiled loop serves every dtype.

RESHAPE and its kin, CAST to the same type, constants written at invoke (SHAPE's value, DENSIFY's and DEQUANTIZE's
prepared arrays, a zero fill) and the word-typed views of the data-movement kernels all use these.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lite_numba.ops import PrepareContext, Tensor

# the unsigned word of each element size: a view of a tensor's bytes as these moves any dtype of that size
WORDS = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}


@njit(cache=True, nogil=True)
def copy_bytes(x, out):
    """out[i] = x[i] over out's length (flat word arrays of one type)."""
    for i in range(out.size):
        out[i] = x[i]


def _unit(nbytes: int):
    return np.int64 if nbytes % 8 == 0 else np.uint8


def schedule_copy(ctx: PrepareContext, x, out) -> None:
    """Copy x into out (same number of elements) as raw bytes: one compiled loop serves every dtype."""
    if x.size == 0:
        return
    dt = _unit(x.nbytes)
    n = x.nbytes // np.dtype(dt).itemsize
    ctx.call(copy_bytes, ctx.view(x, (n,), dt), ctx.view(out, (n,), dt))


def write_const(ctx: PrepareContext, out: Tensor, values: np.ndarray) -> None:
    """Schedule writing values known at prepare time (a shape, a densified or dequantized constant) into out."""
    data = np.ascontiguousarray(values, dtype=out.dtype).reshape(-1)
    if data.size == 0:
        return
    unit = _unit(data.nbytes)
    n = data.nbytes // np.dtype(unit).itemsize
    ctx.call(copy_bytes, data.view(unit), ctx.view(out, (n,), unit))
