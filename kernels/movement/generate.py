"""Ops that generate values: SHAPE, RANK, FILL, ZEROS_LIKE, RANGE, ONE_HOT, WHERE.

Their output shapes often depend on input *values* (FILL's dims, RANGE's bounds, ONE_HOT's depth, WHERE's
condition): prepare reads them with `ctx.value(i)`, so a node whose value inputs are computed at run time is
re-prepared at invoke time by the executor. Element types are handled as raw bytes wherever the op only moves
values (FILL, ZEROS_LIKE, ONE_HOT), so one compiled loop serves every type.
"""

from __future__ import annotations

import math

import numpy as np
from lite_numba.kernels.base.copy import schedule_copy, write_const
from lite_numba.kernels.base.shapes import two_inputs_of_one_type
from lite_numba.kernels.movement.space import row_unit
from lite_numba.kernels.movement.transpose import schedule_fill, schedule_strided_copy
from numba import njit

from lite_numba.ops import NeedsValue, PrepareContext, Tensor, kernel

# schema TensorType values of SHAPE's out_type option
_TENSOR_TYPE_INT32, _TENSOR_TYPE_INT64 = 2, 4


# --- loops -------------------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def repeat_units(value, out):
    """out[i, :] = value[:] for every row i (a value of k units repeated)."""
    n, k = out.shape
    for i in range(n):
        for j in range(k):
            out[i, j] = value[j]


@njit(cache=True, nogil=True)
def range_fill(start, delta, out):
    """out[i] = start + delta + ... (i times), accumulated in the output type as TFLite does."""
    v = start[0]
    d = delta[0]
    for i in range(out.size):
        out[i] = v
        v += d


@njit(cache=True, nogil=True)
def one_hot(indices, on, off, out):
    """indices [P, S], on/off [k] (bytes of one value), out [P, depth, S, k]:
    out[p, j, s] = on if int32(indices[p, s]) == j else off."""
    P, D, S, K = out.shape
    for p in range(P):
        for j in range(D):
            for s in range(S):
                # TFLite compares static_cast<int>(index): int64 indices are truncated to 32 bits
                hit = np.int32(indices[p, s]) == j
                for k in range(K):
                    out[p, j, s, k] = on[k] if hit else off[k]


@njit(cache=True, nogil=True)
def where_coords(cond, strides, out):
    """Row-major coordinates of the non-zero elements of cond (flat), written as rows of out [count, rank]."""
    rank = strides.size
    row = 0
    for i in range(cond.size):
        if cond[i] != 0:
            if row >= out.shape[0]:
                raise ValueError("WHERE: more true elements than counted in prepare")
            rem = i
            for d in range(rank):
                out[row, d] = rem // strides[d]
                rem = rem % strides[d]
            row += 1


# --- helpers -----------------------------------------------------------------------------------------------------

def fill_value(ctx: PrepareContext, out: Tensor, value) -> None:
    """Schedule filling out with one value: a 1-element tensor (read at run time) or a numpy scalar."""
    if out.size == 0:
        return
    size = out.dtype.itemsize
    unit = row_unit(size)
    k = size // np.dtype(unit).itemsize
    if isinstance(value, Tensor):
        src = ctx.view(value, (k,), unit)
    else:
        src = np.array([value], out.dtype).view(unit)
    ctx.call(repeat_units, src, ctx.view(out, (out.size, k), unit))


def _scalar(ctx: PrepareContext, i: int):
    return np.asarray(ctx.value(i)).reshape(-1)[0]


# --- SHAPE, RANK -------------------------------------------------------------------------------------------------

@kernel("SHAPE")
def SHAPE(ctx: PrepareContext) -> None:
    """The input's shape as a 1-D int32/int64 tensor (known at prepare time)."""
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    out_type = ctx.options.get("out_type", 0)
    types = {_TENSOR_TYPE_INT32: np.int32, _TENSOR_TYPE_INT64: np.int64}
    ctx.check(out_type in types, f"unknown shape output data type {out_type} (expected INT32 or INT64)")
    out = ctx.set_output(0, (x.ndim,), types[out_type])
    write_const(ctx, out, np.array(x.shape, np.int64))
    ctx.set_known_value(0, x.shape)


@kernel("RANK")
def RANK(ctx: PrepareContext) -> None:
    """The input's rank as an int32 scalar."""
    ctx.check_num(inputs=1, outputs=1)
    out = ctx.set_output(0, (), np.int32)
    write_const(ctx, out, np.array([ctx.input(0).ndim], np.int32))
    ctx.set_known_value(0, ctx.input(0).ndim)


# --- FILL, ZEROS_LIKE --------------------------------------------------------------------------------------------

@kernel("FILL")
def FILL(ctx: PrepareContext) -> None:
    """A tensor of shape `dims` filled with the scalar `value` (any 8/16/32/64-bit type)."""
    ctx.check_num(inputs=2, outputs=1)
    dims_t, value = ctx.input(0), ctx.input(1)
    ctx.check(dims_t.ndim == 1, f"dims must be 1-D, got shape {list(dims_t.shape)}")
    ctx.check_dtype(dims_t, np.int32, np.int64)
    ctx.check(value.ndim == 0, f"value must be a scalar, got shape {list(value.shape)}")
    ctx.check(value.dtype.itemsize in (1, 2, 4, 8) and value.dtype.kind in "fiubc",
              f"value type {value.dtype.name} is not supported")
    out = ctx.output(0)
    ctx.check(out.scale == value.scale and out.zero_point == value.zero_point,
              "output and value must have the same scale and zero point")
    if value.dtype == np.int16:
        ctx.check(value.zero_point == 0, "int16 value must have zero point 0")
    dims = [int(d) for d in np.asarray(ctx.value(0)).reshape(-1)]
    ctx.check(all(d >= 0 for d in dims), f"fill dimensions must be >= 0, got {dims}")
    out = ctx.set_output(0, dims, value.dtype)
    fill_value(ctx, out, value)


@kernel("ZEROS_LIKE")
def ZEROS_LIKE(ctx: PrepareContext) -> None:
    """Zeros of the input's shape and type (int32, int64, float32)."""
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check_dtype(x, np.int64, np.int32, np.float32)
    out = ctx.set_output(0, x.shape, x.dtype)
    fill_value(ctx, out, x.dtype.type(0))


# --- RANGE -------------------------------------------------------------------------------------------------------

def range_size(ctx: PrepareContext, start, limit, delta) -> int:
    """Number of elements of RANGE, computed in the element type as TFLite does."""
    ctx.check(delta != 0, "delta must not be 0")
    ctx.check((start >= limit and delta < 0) or (start <= limit and delta > 0),
              f"start {start}, limit {limit} and delta {delta} give a negative length")
    if isinstance(start, np.floating):
        return int(math.ceil(abs(float(np.float32(np.float32(limit) - np.float32(start)) / np.float32(delta)))))
    info = np.iinfo(np.asarray(start).dtype)
    start, limit, delta = int(start), int(limit), int(delta)
    # the official size, (|limit - start| + |delta| - 1) / |delta|, is computed in the element type: where a step
    # of it overflows, its answer is wrapped garbage (undefined in C), so such a range is refused, not answered
    span = abs(limit - start) + abs(delta) - 1
    ctx.check(span <= info.max and abs(delta) <= info.max,
              f"start {start}, limit {limit} and delta {delta}: |limit - start| + |delta| - 1 = {span} overflows "
              f"{info.dtype.name}")
    return span // abs(delta)


@kernel("RANGE")
def RANGE(ctx: PrepareContext) -> None:
    """start, start + delta, ... up to (excluding) limit; int32, int64 or float32."""
    ctx.check_num(inputs=3, outputs=1)
    start_t, limit_t, delta_t = ctx.input(0), ctx.input(1), ctx.input(2)
    for name, t in (("start", start_t), ("limit", limit_t), ("delta", delta_t)):
        ctx.check(t.ndim == 0, f"{name} must be a scalar, got shape {list(t.shape)}")
    ctx.check_dtype(start_t, np.int32, np.int64, np.float32)
    ctx.check(limit_t.dtype == start_t.dtype and delta_t.dtype == start_t.dtype,
              f"start, limit and delta types differ: {start_t.dtype.name}, {limit_t.dtype.name}, "
              f"{delta_t.dtype.name}")
    n = range_size(ctx, _scalar(ctx, 0), _scalar(ctx, 1), _scalar(ctx, 2))
    out = ctx.set_output(0, (n,), start_t.dtype)
    if n:
        ctx.call(range_fill, start_t, delta_t, out)


# --- ONE_HOT -----------------------------------------------------------------------------------------------------

@kernel("ONE_HOT")
def ONE_HOT(ctx: PrepareContext) -> None:
    """on_value where indices == j along the new `axis` of size depth, off_value elsewhere."""
    ctx.check_num(inputs=4, outputs=1)
    indices, depth_t, on, off = ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3)
    ctx.check_dtype(indices, np.int32, np.int64)
    ctx.check_dtype(on, np.float32, np.int32, np.int64, np.int8, np.uint8, np.bool_)
    ctx.check(off.dtype == on.dtype, f"on_value type {on.dtype.name} differs from off_value type {off.dtype.name}")
    ctx.check_dtype(depth_t, np.int32)
    for name, t in (("depth", depth_t), ("on_value", on), ("off_value", off)):
        ctx.check(t.size == 1, f"{name} must have one element, got shape {list(t.shape)}")
    axis = int(ctx.options.get("axis", -1))
    rank = indices.ndim + 1
    axis = rank - 1 if axis == -1 else axis
    ctx.check(0 <= axis < rank, f"axis {ctx.options.get('axis')} is out of range for output rank {rank}")
    depth = int(_scalar(ctx, 1))
    ctx.check(depth >= 0, f"depth must be >= 0, got {depth}")
    shape = indices.shape[:axis] + (depth,) + indices.shape[axis:]
    out = ctx.set_output(0, shape, on.dtype)
    if out.size == 0:
        return
    prefix = int(np.prod(indices.shape[:axis], dtype=np.int64))
    suffix = indices.size // prefix
    k = on.dtype.itemsize
    ctx.call(one_hot, ctx.view(indices, (prefix, suffix)), ctx.view(on, (k,), np.uint8),
             ctx.view(off, (k,), np.uint8), ctx.view(out, (prefix, depth, suffix, k), np.uint8))


# --- WHERE -------------------------------------------------------------------------------------------------------

@kernel("WHERE")
def WHERE(ctx: PrepareContext) -> None:
    """The coordinates (int64, [count, rank]) of the non-zero elements of the condition, row-major."""
    ctx.check_num(inputs=1, outputs=1)
    cond = ctx.input(0)
    ctx.check_dtype(cond, np.bool_, np.float32, np.int64, np.int32, np.int8, np.uint8, np.uint32)
    ctx.check(cond.ndim > 0, "WHERE requires a condition of rank > 0")
    count = int(np.count_nonzero(ctx.value(0)))
    out = ctx.set_output(0, (count, cond.ndim), np.int64)
    if out.size == 0:
        return
    strides = np.array([int(np.prod(cond.shape[d + 1:], dtype=np.int64)) for d in range(cond.ndim)], np.int64)
    # non-zero tests on integers and bools do not depend on signedness: read them as unsigned bytes / int32
    view = {1: np.uint8, 4: np.int32, 8: np.int64}[cond.dtype.itemsize] if cond.dtype.kind != "f" else np.float32
    ctx.call(where_coords, ctx.view(cond, (cond.size,), view), strides, out)


__all__ = ["SHAPE", "RANK", "FILL", "ZEROS_LIKE", "RANGE", "ONE_HOT", "WHERE"]


@njit(cache=True, nogil=True)
def broadcast_args(s1, s2, out):
    n = out.size
    for i in range(n):
        a = s1[s1.size - 1 - i] if i < s1.size else 1
        b = s2[s2.size - 1 - i] if i < s2.size else 1
        if a == 1:
            out[n - 1 - i] = b
        elif b == 1 or a == b:
            out[n - 1 - i] = a
        else:
            raise ValueError("BROADCAST_ARGS: the shapes cannot be broadcast")


@kernel("BROADCAST_ARGS")
def BROADCAST_ARGS(ctx: PrepareContext) -> None:
    """The broadcast shape of two shape vectors (int32 or int64)."""
    s1, s2 = two_inputs_of_one_type(ctx, (np.int32, np.int64), "shape")
    ctx.check(s1.ndim == 1 and s2.ndim == 1, f"shapes must be vectors, got {list(s1.shape)} and {list(s2.shape)}")
    out = ctx.set_output(0, (max(s1.shape[0], s2.shape[0]),), s1.dtype)
    # shapes known at prepare (constants, SHAPE of static tensors): the result is known too, so a BROADCAST_TO
    # reading it stays static (reading an unknown value here must not make this node dynamic)
    try:
        v1, v2 = ctx.value(0), ctx.value(1)
    except NeedsValue:
        v1 = v2 = None
    if v1 is not None:
        a, b = [int(v) for v in np.asarray(v1).reshape(-1)], [int(v) for v in np.asarray(v2).reshape(-1)]
        n = out.size
        a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
        ctx.check(all(p == q or p == 1 or q == 1 for p, q in zip(a, b)), f"shapes {a} and {b} cannot be broadcast")
        ctx.set_known_value(0, [q if p == 1 else p for p, q in zip(a, b)])
    if out.size:
        ctx.call(broadcast_args, s1, s2, out)


@kernel("MATRIX_DIAG")
def MATRIX_DIAG(ctx: PrepareContext) -> None:
    """[..., n] -> [..., n, n] with the input on the diagonals and zeros elsewhere."""
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check(x.ndim >= 1, "the input must have rank 1 or more")
    ctx.check(x.dtype.itemsize in (1, 2, 4, 8, 16), f"input type {x.dtype.name} is not supported")
    n = x.shape[-1]
    out = ctx.set_output(0, x.shape + (n,), x.dtype)
    if out.size == 0:
        return
    batch = x.size // n
    schedule_fill(ctx, out, 0)
    schedule_strided_copy(ctx, x, out, (batch, n), (n, 1), (n * n, n + 1))


@kernel("MATRIX_SET_DIAG")
def MATRIX_SET_DIAG(ctx: PrepareContext) -> None:
    """out = input with the main diagonal of each [rows, cols] matrix replaced by diagonal[..., :min(rows, cols)]."""
    ctx.check_num(inputs=2, outputs=1)
    x, diag = ctx.input(0), ctx.input(1)
    ctx.check(x.ndim >= 2, "the input must have rank 2 or more")
    ctx.check(x.dtype.itemsize in (1, 2, 4, 8, 16), f"input type {x.dtype.name} is not supported")
    ctx.check(diag.dtype == x.dtype, f"diagonal type {diag.dtype.name} differs from input type {x.dtype.name}")
    r, c = x.shape[-2], x.shape[-1]
    m = min(r, c)
    batch = int(np.prod(x.shape[:-2], dtype=np.int64))
    # the official kernel reads batch * min(rows, cols) diagonal values in order, whatever the diagonal's shape
    ctx.check(diag.size >= batch * m, f"diagonal shape {list(diag.shape)} has fewer than the "
              f"{batch * m} values of shape {list(x.shape[:-2]) + [m]}")
    out = ctx.set_output(0, x.shape, x.dtype)
    if out.size == 0:
        return
    schedule_copy(ctx, x, out)
    if m:
        schedule_strided_copy(ctx, diag, out, (batch, m), (m, 1), (r * c, c + 1))
