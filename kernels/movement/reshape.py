"""RESHAPE, SQUEEZE, EXPAND_DIMS, BITCAST: the data as is, only the shape (or type) changes. COPY: the input as is
(graph rewrites' copies, e.g. an inlined composite returning one of its inputs).

Each declares its output a view of its input (ctx.view_of): the memory plan then puts both in one storage and the
copy does not run, unless the graph forbids it (a graph input or output, a constant, a variable, a called
subgraph's argument or result: lite_numba/runtime/arena.py, plan_aliases), where the copy stays."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.copy import schedule_copy

from lite_numba.ops import PrepareContext, Tensor, kernel


def view_or_copy(ctx: PrepareContext, x, out) -> None:
    """out = x's bytes: a view when the memory plan allows it (then nothing runs), else a copy."""
    schedule_copy(ctx, x, out)
    ctx.view_of(0, 0)


def infer_shape(ctx: PrepareContext, size: int, new_shape) -> tuple[int, ...]:
    new_shape = [int(d) for d in new_shape]
    unknown = [i for i, d in enumerate(new_shape) if d == -1]
    ctx.check(len(unknown) <= 1, f"new shape {new_shape} has more than one -1")
    ctx.check(all(d >= -1 for d in new_shape), f"new shape {new_shape} has a negative dimension")
    known = int(np.prod([d for d in new_shape if d != -1], dtype=np.int64))
    if unknown:
        ctx.check(known > 0 and size % known == 0, f"cannot reshape {size} elements to {new_shape}")
        new_shape[unknown[0]] = size // known
    ctx.check(int(np.prod(new_shape, dtype=np.int64)) == size, f"cannot reshape {size} elements to {new_shape}")
    return tuple(new_shape)


@kernel("RESHAPE")
def RESHAPE(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=(1, 2), outputs=1)
    x = ctx.input(0)
    shape_t = ctx.input(1)
    if shape_t is not None and shape_t.dtype.kind not in "iu" and not ctx.options.get("new_shape"):
        ctx.fail(f"the shape input {shape_t.name!r} has type {shape_t.dtype.name}; a shape must be integers "
                 f"(int32 or int64)")
    if shape_t is not None and shape_t.ndim == 1 and not (shape_t.size == 0 and ctx.options.get("new_shape")):
        new_shape = ctx.value(1).reshape(-1)
    elif ctx.options.get("new_shape") is not None and (shape_t is None or ctx.options.get("new_shape")):
        new_shape = ctx.options["new_shape"]
    elif shape_t is not None:
        new_shape = ctx.value(1).reshape(-1)
    else:
        new_shape = ctx.output(0).shape
    out = ctx.set_output(0, infer_shape(ctx, x.size, new_shape))
    ctx.check(out.dtype == x.dtype, f"output type {out.dtype.name} differs from input type {x.dtype.name}")
    view_or_copy(ctx, x, out)


@kernel("COPY")
def COPY(ctx: PrepareContext) -> None:
    """output = input, same shape and dtype (no model names this op: lite_numba.runtime.composites puts it in)."""
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    view_or_copy(ctx, x, ctx.set_output(0, x.shape, x.dtype))


@kernel("SQUEEZE")
def SQUEEZE(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    view_or_copy(ctx, x, ctx.set_output(0, squeeze_shape(ctx, x), x.dtype))


def squeeze_shape(ctx: PrepareContext, x: Tensor) -> tuple:
    """SQUEEZE's output shape: x without the `squeeze_dims` (negative: from the end; each must have size 1), or
    without every size-1 dimension when the option names none (numeric and STRING SQUEEZE)."""
    dims = ctx.options.get("squeeze_dims") or []
    if not dims:
        return tuple(s for s in x.shape if s != 1)
    axes = set()
    for d in dims:
        a = d + x.ndim if d < 0 else d
        ctx.check(0 <= a < x.ndim, f"squeeze dim {d} out of range for rank {x.ndim}")
        ctx.check(x.shape[a] == 1, f"cannot squeeze dimension {d} of size {x.shape[a]}")
        axes.add(a)
    return tuple(s for i, s in enumerate(x.shape) if i not in axes)


@kernel("EXPAND_DIMS")
def EXPAND_DIMS(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=2, outputs=1)
    x = ctx.input(0)
    axis = int(np.asarray(ctx.value(1)).reshape(-1)[0])
    a = axis + x.ndim + 1 if axis < 0 else axis
    ctx.check(0 <= a <= x.ndim, f"axis {axis} out of range for rank {x.ndim}")
    shape = x.shape[:a] + (1,) + x.shape[a:]
    view_or_copy(ctx, x, ctx.set_output(0, shape, x.dtype))


@kernel("BITCAST")
def BITCAST(ctx: PrepareContext) -> None:
    """The same bytes as another type: a wider input gains a last dimension, a narrower one loses it."""
    ctx.check_num(inputs=1, outputs=1)
    x, out_t = ctx.input(0), ctx.output(0)
    for t in (x, out_t):
        ctx.check(t.dtype.kind in "biufc" and t.dtype.itemsize in (1, 2, 4, 8, 16),
                  f"type {t.dtype.name} is not supported")
    si, so = x.dtype.itemsize, out_t.dtype.itemsize
    if si > so:
        shape = x.shape + (si // so,)
    elif si < so:
        ctx.check(x.ndim >= 1 and x.shape[-1] == so // si,
                  f"input shape {list(x.shape)} must end in {so // si} to become {out_t.dtype.name}")
        shape = x.shape[:-1]
    else:
        shape = x.shape
    out = ctx.set_output(0, shape, out_t.dtype)
    view_or_copy(ctx, x, out)
