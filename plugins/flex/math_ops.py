"""Flex ops without a TFLite builtin: special functions (Erf, Tan, Atan, Sinh, Cosh, Softplus, ...), Cumprod, Roll,
DenseBincount, Identity, and float binary ops with TF-only semantics (DivNoNan, MulNoNan, Xlogy, Xdivy; Atan2,
which TF broadcasts and TFLite's ATAN2 does not).

Unary maths is computed in float64 and rounded once (TensorFlow's float32 kernels are Eigen approximations within a
few ulp of that); its table `UNARY` maps each TF op name to its scalar function. Broadcasting binary ops use
`broadcast_strides` (numpy rules, as TF's BCast).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numba.extending import register_jitable

from .nodedef import FlexNode

_FLOATS = (np.float32, np.float64)

# --- unary maths --------------------------------------------------------------------------------------------------
# One table, UNARY: TF op name -> its scalar function of a float64 value; `float64_loop` compiles one flat loop per
# function for the dtypes a model uses. TF's converter refuses Erfc, Erfinv, Lgamma, Digamma, Expm1, Log1p, Asin, Acos,
# Asinh, Acosh, Atanh, Rint as Flex ops ("neither a custom op nor a flex op"), so no model holds them and they are
# left out.

_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_ALPHA = 1.6732632423543772848170429916717


@register_jitable
def _erf(v):
    return math.erf(v)


@register_jitable
def _reciprocal(v):
    return 1.0 / v if v != 0.0 else math.copysign(np.inf, v)


@register_jitable
def _tan(v):
    return math.tan(v)


@register_jitable
def _atan(v):
    return math.atan(v)


@register_jitable
def _sinh(v):
    return math.sinh(v) if abs(v) < 710.0 else math.copysign(np.inf, v)


@register_jitable
def _cosh(v):
    return math.cosh(v) if abs(v) < 710.0 else np.inf


@register_jitable
def _softplus(v):
    return v if v > 30.0 else math.log1p(math.exp(v))


@register_jitable
def _softsign(v):
    return v / (1.0 + abs(v))


@register_jitable
def _selu(v):
    return _SELU_SCALE * (v if v > 0.0 else _SELU_ALPHA * math.expm1(v))


UNARY = {"Erf": _erf, "Reciprocal": _reciprocal, "Inv": _reciprocal, "Tan": _tan, "Atan": _atan, "Sinh": _sinh,
         "Cosh": _cosh, "Softplus": _softplus, "Softsign": _softsign, "Selu": _selu}


def float64_loop(f):
    """The kernel out[i] = f(x[i]) over flat arrays, computed in float64 and rounded once to out's type. `f` is a
    module-level @register_jitable function: the closure's cells then pickle the same in every process, which
    Numba's disk cache of the closure needs."""

    @njit(cache=True, nogil=True)
    def loop(x, out):
        for i in range(out.size):
            out[i] = f(np.float64(x[i]))

    return loop


_UNARY_LOOPS = {f: float64_loop(f) for f in dict.fromkeys(UNARY.values())}


def _float_map(ctx, out_dtype, loop, *args) -> None:
    """Output 0 (input 0's shape, `out_dtype` or None for the input's) = loop(flat x, flat out, *args) over a float
    input: the Flex elementwise ops of one float input."""
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check_dtype(x, *_FLOATS)
    out = ctx.set_output(0, x.shape, x.dtype if out_dtype is None else out_dtype)
    if x.size:
        ctx.call(loop, ctx.view(x, (x.size,)), ctx.view(out, (out.size,)), *args)


def _unary(ctx, node: FlexNode) -> None:
    _float_map(ctx, None, _UNARY_LOOPS[UNARY[node.op]])


PREDICATE_CODES = {"IsNan": 0, "IsFinite": 2}  # IsInf: refused by the converter as a Flex op


@njit(cache=True, nogil=True)
def float_predicate(x, out, code):
    """out[i] = isnan (code 0) / isfinite (code 2) of x[i] (bool)."""
    for i in range(out.size):
        v = x[i]
        if code == 0:
            out[i] = v != v
        else:
            out[i] = v == v and v != np.inf and v != -np.inf


def _predicate(ctx, node: FlexNode) -> None:
    _float_map(ctx, np.bool_, float_predicate, PREDICATE_CODES[node.op])


@njit(cache=True, nogil=True)
def copy_flat(x, out):
    """out = x (same size, flat)."""
    for i in range(out.size):
        out[i] = x[i]


def _identity(ctx, node: FlexNode) -> None:
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    out = ctx.set_output(0, x.shape, x.dtype)
    if x.size:
        ctx.call(copy_flat, ctx.view(x, (x.size,)), ctx.view(out, (out.size,)))


# --- broadcasting binary ops --------------------------------------------------------------------------------------

def broadcast_strides(ctx, shapes: list[tuple[int, ...]]) -> tuple[tuple[int, ...], list[np.ndarray]]:
    """The numpy-broadcast output shape of `shapes` and, per input, its element strides over the output's
    dimensions (0 where the input is broadcast)."""
    try:
        shape = tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        ctx.fail(f"incompatible shapes for broadcasting: {', '.join(str(list(s)) for s in shapes)}")
    strides = []
    for s in shapes:
        padded = (1,) * (len(shape) - len(s)) + tuple(s)
        st, acc = [0] * len(shape), 1
        for d in range(len(shape) - 1, -1, -1):
            st[d] = 0 if padded[d] == 1 else acc
            acc *= padded[d]
        strides.append(np.array(st or [0], np.int64))
    return shape, strides


def broadcast_offsets(shape: tuple[int, ...], xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(xo, yo): the element offsets in x and y of every output element (row-major over `shape`), from the strides
    broadcast_strides gives. They depend on shapes only, so prepare computes them once."""
    dims = shape or (1,)
    grid = np.indices(dims, dtype=np.int64).reshape(len(dims), -1)
    return np.ascontiguousarray(xs @ grid), np.ascontiguousarray(ys @ grid)


BINARY_CODES = {"DivNoNan": 0, "Xlogy": 1, "Xdivy": 2, "MulNoNan": 5, "Atan2": 6}


@njit(cache=True, nogil=True)
def binary_broadcast(x, y, out, xo, yo, code):
    """out[i] = f_code(x[xo[i]], y[yo[i]]): broadcast operands through their offset tables (broadcast_offsets)."""
    for i in range(out.size):
        a = x[xo[i]]
        b = y[yo[i]]
        if code == 0:
            out[i] = a / b if b != 0 else 0
        elif code == 1:
            out[i] = a * np.log(b) if a != 0 else 0
        elif code == 2:
            out[i] = a / b if a != 0 else 0
        elif code == 5:
            out[i] = a * b if b != 0 else 0
        else:  # TFLite's ATAN2 does not broadcast, TF's does
            out[i] = math.atan2(np.float64(a), np.float64(b))


def schedule_binary(ctx, fn, x, y, out_dtype, *extra) -> None:
    """Broadcast x, y; set output 0; schedule fn(x, y, out, xo, yo, *extra) (xo/yo: broadcast_offsets)."""
    shape, (xs, ys) = broadcast_strides(ctx, [x.shape, y.shape])
    out = ctx.set_output(0, shape, out_dtype)
    if out.size == 0:
        return
    xo, yo = broadcast_offsets(shape, xs, ys)
    ctx.call(fn, ctx.view(x, (x.size,)), ctx.view(y, (y.size,)), ctx.view(out, (out.size,)), xo, yo, *extra)


def _binary(ctx, node: FlexNode) -> None:
    ctx.check_num(inputs=2, outputs=1)
    x, y = ctx.input(0), ctx.input(1)
    ctx.check_dtype(x, *_FLOATS)
    ctx.check_dtype(y, x.dtype)
    schedule_binary(ctx, binary_broadcast, x, y, x.dtype, BINARY_CODES[node.op])


# --- Cumprod, Roll, DenseBincount ------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def cumprod(x, out, exclusive, reverse):
    """x, out: [outer, n, inner]; running product along n (TF's order: from the start, or the end if reverse)."""
    outer, n, inner = x.shape
    for o in range(outer):
        for j in range(inner):
            acc = x.dtype.type(1)
            for k in range(n):
                i = n - 1 - k if reverse else k
                if exclusive:
                    out[o, i, j] = acc
                    acc = acc * x[o, i, j]
                else:
                    acc = acc * x[o, i, j]
                    out[o, i, j] = acc


def _axis(ctx, i: int, rank: int) -> int:
    a = np.asarray(ctx.value(i)).reshape(-1)
    ctx.check(a.size == 1, f"axis must be a scalar, got {a.size} values")
    axis = int(a[0])
    ctx.check(-rank <= axis < max(rank, 1), f"axis {axis} is out of range for rank {rank}")
    return axis % max(rank, 1)


def _cumprod(ctx, node: FlexNode) -> None:
    ctx.check_num(inputs=2, outputs=1)
    x = ctx.input(0)
    ctx.check_dtype(x, np.float32, np.float64, np.int32, np.int64)
    ctx.check(x.ndim >= 1, "Cumprod needs an input of rank >= 1")
    axis = _axis(ctx, 1, x.ndim)
    out = ctx.set_output(0, x.shape, x.dtype)
    if x.size:
        v = (int(np.prod(x.shape[:axis])), x.shape[axis], int(np.prod(x.shape[axis + 1:])))
        ctx.call(cumprod, ctx.view(x, v), ctx.view(out, v), node.attr("exclusive", False, "b"),
                 node.attr("reverse", False, "b"))


@njit(cache=True, nogil=True)
def roll(x, out, shape, shifts, strides, idx):
    """out[(i + shift) mod n per dimension] = x[i], flat row-major arrays over `shape` (element `strides`); idx:
    int64 scratch of the rank."""
    rank = shape.size
    for d in range(rank):
        idx[d] = 0
    for i in range(x.size):
        o = 0
        for d in range(rank):
            j = idx[d] + shifts[d]
            if j >= shape[d]:
                j -= shape[d]
            o += j * strides[d]
        out[o] = x[i]
        d = rank - 1
        while d >= 0:
            idx[d] += 1
            if idx[d] < shape[d]:
                break
            idx[d] = 0
            d -= 1


def _roll(ctx, node: FlexNode) -> None:
    ctx.check_num(inputs=3, outputs=1)
    x = ctx.input(0)
    shift = np.asarray(ctx.value(1)).reshape(-1).astype(np.int64)
    axes = np.asarray(ctx.value(2)).reshape(-1).astype(np.int64)
    ctx.check(shift.size == axes.size, f"shift and axis must have the same size, got {shift.size} and {axes.size}")
    out = ctx.set_output(0, x.shape, x.dtype)
    total = [0] * x.ndim
    for s, a in zip(shift, axes):
        ctx.check(-x.ndim <= a < x.ndim, f"axis {int(a)} is out of range for rank {x.ndim}")
        total[int(a) % x.ndim] += int(s)
    shifts = np.array([t % n if n else 0 for t, n in zip(total, x.shape)] or [0], np.int64)
    if x.size:
        dims = np.array(x.shape or (1,), np.int64)
        strides = np.ones(dims.size, np.int64)
        strides[:-1] = np.cumprod(dims[::-1])[:-1][::-1]
        ctx.call(roll, ctx.view(x, (x.size,)), ctx.view(out, (out.size,)), dims, shifts, strides,
                 ctx.temp((dims.size,), np.int64))


@njit(cache=True, nogil=True)
def dense_bincount(arr, weights, out, binary, weighted):
    """arr: [rows, n] int; out: [rows, size]; counts (or weight sums, or 0/1 with binary) of each value < size;
    values >= size are dropped, negative values refused (as TensorFlow)."""
    rows, n = arr.shape
    size = out.shape[1]
    for r in range(rows):
        for k in range(size):
            out[r, k] = 0
        for j in range(n):
            v = arr[r, j]
            if v < 0:
                raise ValueError("Input arr must be non-negative!")
            if v >= size:
                continue
            if binary:
                out[r, v] = 1
            elif weighted:
                out[r, v] += weights[r, j]
            else:
                out[r, v] += 1


def _dense_bincount(ctx, node: FlexNode) -> None:
    ctx.check_num(inputs=3, outputs=1)
    arr, w = ctx.input(0), ctx.input(2)
    ctx.check_dtype(arr, np.int32, np.int64)
    ctx.check(arr.ndim in (1, 2), f"DenseBincount input must be 1-D or 2-D, got shape {list(arr.shape)}")
    size = np.asarray(ctx.value(1)).reshape(-1)
    ctx.check(size.size == 1 and int(size[0]) >= 0, f"size must be a non-negative scalar, got {size.tolist()}")
    size = int(size[0])
    dtype = ctx.output(0).dtype
    ctx.check_dtype(ctx.output(0), np.float32, np.float64, np.int32, np.int64)
    weighted = w is not None and w.size > 0
    if weighted:
        ctx.check(w.shape == arr.shape, f"weights shape {list(w.shape)} must equal the input's {list(arr.shape)}")
        ctx.check_dtype(w, dtype)
    rows, n = (1, arr.size) if arr.ndim == 1 else arr.shape
    out = ctx.set_output(0, (size,) if arr.ndim == 1 else (rows, size), dtype)
    if out.size == 0:
        return
    arr_arg = ctx.view(arr, (rows, n)) if arr.size else np.zeros((rows, 0), arr.dtype)
    w_arg = ctx.view(w, (rows, n)) if weighted else np.zeros((1, 1), dtype)
    ctx.call(dense_bincount, arr_arg, w_arg, ctx.view(out, (rows, size)), node.attr("binary_output", False, "b"),
             weighted)


OPS = {name: _unary for name in UNARY}
OPS.update({name: _predicate for name in PREDICATE_CODES})
OPS.update({name: _binary for name in BINARY_CODES})
OPS.update({"Identity": _identity, "StopGradient": _identity, "Snapshot": _identity, "Cumprod": _cumprod,
            "Roll": _roll, "DenseBincount": _dense_bincount})
