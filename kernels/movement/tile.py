"""TILE and BROADCAST_TO as replication: copy the input once, then double up the output dimension by dimension.

The input goes to the first tile of the output; then, from the innermost dimension out, the filled block of each
dimension (a contiguous run of the output) is copied to the other multiples along it, as TFLite's TILE does. Every
copy moves long contiguous runs, and the number of copies depends on the rank only.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.shapes import index_vector
from lite_numba.kernels.movement.transpose import contiguous_strides, schedule_strided_copy

from lite_numba.ops import PrepareContext, Tensor, kernel


def schedule_tile(ctx: PrepareContext, x: Tensor, out: Tensor, shape, multiples) -> None:
    """out (shape[d] * multiples[d] per dimension) = x (viewed with `shape`) repeated `multiples` times."""
    rank = len(shape)
    out_shape = [n * m for n, m in zip(shape, multiples)]
    if 0 in out_shape:  # a zero multiple: nothing to write (copying the input first would write past the output)
        return
    os = contiguous_strides(out_shape)
    schedule_strided_copy(ctx, x, out, shape, contiguous_strides(shape), os)
    for d in range(rank - 1, -1, -1):
        # the block [0, shape[d]) of dimension d (inner dimensions already complete) is a run of shape[d] * os[d]
        run = shape[d] * os[d]
        box = list(shape[:d]) + [max(multiples[d] - 1, 0), run]
        schedule_strided_copy(ctx, out, out, box, list(os[:d]) + [0, 1], list(os[:d]) + [run, 1], 0, run)


@kernel("TILE")
def TILE(ctx: PrepareContext) -> None:
    """out = x repeated multiples[d] times along each dimension d."""
    ctx.check_num(inputs=2, outputs=1)
    x, m = ctx.input(0), ctx.input(1)
    ctx.check(m.dtype in (np.int32, np.int64), f"multiples have type {m.dtype.name}, expected int32 or int64")
    ctx.check(m.size == x.ndim, f"multiples has {m.size} entries for an input of rank {x.ndim}")
    mult = [int(v) for v in np.asarray(ctx.value(1)).reshape(-1)]
    ctx.check(all(v >= 0 for v in mult), f"multiples {mult} must be non-negative")
    shape = [n * k for n, k in zip(x.shape, mult)]
    ctx.check(all(s < (1 << 31) for s in shape), f"output shape {shape} overflows int32")
    out = ctx.set_output(0, shape, x.dtype)
    schedule_tile(ctx, x, out, list(x.shape), mult)


@kernel("BROADCAST_TO")
def BROADCAST_TO(ctx: PrepareContext) -> None:
    """out = x broadcast to `shape` (NumPy rules: x's dimensions, aligned right, equal or 1)."""
    ctx.check_num(inputs=2, outputs=1)
    x = ctx.input(0)
    shape = index_vector(ctx, 1, "shape")
    ctx.check(x.ndim <= len(shape), f"input shape {list(x.shape)} has more dimensions than {shape}")
    ctx.check(all(v >= 0 for v in shape), f"shape {shape} has a negative dimension")
    padded = [1] * (len(shape) - x.ndim) + list(x.shape)
    for n, t in zip(padded, shape):
        ctx.check(n == 1 or n == t, f"input shape {list(x.shape)} cannot be broadcast to {shape}")
    out = ctx.set_output(0, shape, x.dtype)
    # broadcasting is tiling the unit dimensions
    schedule_tile(ctx, x, out, padded, [t if n == 1 else 1 for n, t in zip(padded, shape)])


__all__ = ["TILE", "BROADCAST_TO"]
