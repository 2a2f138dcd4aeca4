"""DYNAMIC_UPDATE_SLICE: out = operand with `update` written at `start_indices` (transformer KV caches).

Semantics of the official kernel (XLA's DynamicUpdateSlice): the output has the operand's shape; every start index is
clamped to [0, operand_dim - update_dim] (computed in int64), so the write never leaves the operand and an index is
never an error; an update as large as the operand replaces it whole. Update dimensions larger than the operand's are
refused at prepare. The data is moved as raw words of the element size, so one loop serves every dtype (float32,
int8, int16, int32, int64, bool, float16, ...); only the index type (int32 / int64) adds a compiled signature.

The output may share the operand's storage (ctx.share_storage; runtime/arena.py decides): then only the update is
written, which is what makes a KV-cache step cost the new position instead of the whole cache (docs/design/llm.md).
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.copy import WORDS
from lite_numba.kernels.movement.gather import elem_word
from numba import njit

from lite_numba.ops import PrepareContext, kernel


@njit(cache=True, nogil=True)
def dynamic_update_slice(x, upd, idx, out, ishape, ushape, f):
    """x, upd, out: flat words; idx: start indices (one per dimension, clamped here); ishape/ushape: the operand's
    and update's shapes; f: words per element."""
    n = out.size
    if upd.size == n:  # the update covers the whole operand
        for i in range(n):
            out[i] = upd[i]
        return
    if x.ctypes.data != out.ctypes.data:  # (the same memory when the plan let the output live in the operand)
        for i in range(n):
            out[i] = x[i]
    if upd.size == 0:
        return
    rank = ishape.size
    base = 0
    stride = f
    for d in range(rank - 1, -1, -1):
        s = min(max(np.int64(0), np.int64(idx[d])), ishape[d] - ushape[d])
        base += s * stride
        stride *= ishape[d]
    row = ushape[rank - 1] * f
    nrows = upd.size // row
    for r in range(nrows):
        off = base
        rem = r
        ostride = ishape[rank - 1] * f
        for d in range(rank - 2, -1, -1):
            c = rem % ushape[d]
            rem //= ushape[d]
            off += c * ostride
            ostride *= ishape[d]
        src = upd[r * row:(r + 1) * row]
        dst = out[off:off + row]
        for j in range(row):
            dst[j] = src[j]


@kernel("DYNAMIC_UPDATE_SLICE")
def DYNAMIC_UPDATE_SLICE(ctx: PrepareContext) -> None:
    """out = operand; out[start:start + update.shape] = update, start clamped into the operand."""
    ctx.check_num(inputs=3, outputs=1)
    x, upd, idx = ctx.input(0), ctx.input(1), ctx.input(2)
    ctx.check(x is not None and upd is not None and idx is not None, "operand, update and start_indices are required")
    ctx.check(x.dtype.itemsize in (1, 2, 4, 8, 16) and x.dtype.kind in "biufc",
              f"operand type {x.dtype.name} is not supported")
    ctx.check(upd.dtype == x.dtype, f"update type {upd.dtype.name} differs from operand type {x.dtype.name}")
    ctx.check_dtype(idx, np.int32, np.int64)
    ctx.check(idx.ndim == 1 and idx.shape[0] == x.ndim,
              f"start_indices must be a vector of {x.ndim} elements (the operand's rank), got shape {list(idx.shape)}")
    ctx.check(upd.ndim == x.ndim, f"update rank {upd.ndim} differs from operand rank {x.ndim}")
    for d in range(x.ndim):
        ctx.check(upd.shape[d] <= x.shape[d],
                  f"update shape {list(upd.shape)} exceeds operand shape {list(x.shape)} in dimension {d}")
    out = ctx.set_output(0, x.shape, x.dtype)
    if out.size == 0:
        return
    ctx.share_storage(0, 0)  # a KV cache updated where it lives when nothing reads the operand afterwards
    w = elem_word(x)
    ishape = np.array(x.shape if x.ndim else (1,), np.int64)
    ushape = np.array(upd.shape if upd.ndim else (1,), np.int64)
    idx_arg = ctx.view(idx, (idx.size,)) if x.ndim else np.zeros(1, idx.dtype)
    ctx.call(dynamic_update_slice, ctx.view(x, (x.nbytes // w,), WORDS[w]),
             ctx.view(upd, (upd.nbytes // w,), WORDS[w]), idx_arg,
             ctx.view(out, (out.nbytes // w,), WORDS[w]), ishape, ushape, x.dtype.itemsize // w)


__all__ = ["DYNAMIC_UPDATE_SLICE"]
