"""Elementwise ops as tables of scalar definitions: binary arithmetic with broadcasting and fused activations,
and unary maths. One loop nest per shape class, instantiated per op by a factory (cached by Numba)."""

from __future__ import annotations

import numpy as np
from numba import njit

from lite_numba.ops import PrepareContext, kernel

from .common import broadcast_shape, broadcast_strides, float_activation_range, int_activation_range, padded_shape


def make_binary(op):
    """Kernels for out = clamp(op(x, y)) over same-shape, scalar-y and broadcast inputs; lim = [lo, hi] typed as out."""

    @njit(cache=True, nogil=True)
    def same(x, y, out, lim):
        lo, hi = lim[0], lim[1]
        for i in range(out.size):
            v = op(x[i], y[i])
            out[i] = min(max(v, lo), hi)

    @njit(cache=True, nogil=True)
    def scalar_y(x, y, out, lim):
        lo, hi = lim[0], lim[1]
        b = y[0]
        for i in range(out.size):
            v = op(x[i], b)
            out[i] = min(max(v, lo), hi)

    @njit(cache=True, nogil=True)
    def scalar_x(x, y, out, lim):
        lo, hi = lim[0], lim[1]
        a = x[0]
        for i in range(out.size):
            v = op(a, y[i])
            out[i] = min(max(v, lo), hi)

    @njit(cache=True, nogil=True)
    def bcast(x, y, out, xs, ys, shp, lim):
        lo, hi = lim[0], lim[1]
        o = 0
        for i0 in range(shp[0]):
            for i1 in range(shp[1]):
                for i2 in range(shp[2]):
                    for i3 in range(shp[3]):
                        for i4 in range(shp[4]):
                            xb = i0 * xs[0] + i1 * xs[1] + i2 * xs[2] + i3 * xs[3] + i4 * xs[4]
                            yb = i0 * ys[0] + i1 * ys[1] + i2 * ys[2] + i3 * ys[3] + i4 * ys[4]
                            for i5 in range(shp[5]):
                                v = op(x[xb + i5 * xs[5]], y[yb + i5 * ys[5]])
                                out[o] = min(max(v, lo), hi)
                                o += 1

    return same, scalar_y, scalar_x, bcast


def schedule_binary(ctx: PrepareContext, kernels, x, y, out_shape, out, lim: np.ndarray) -> None:
    """Pick the loop for the shapes and schedule it (flattened views; broadcast strides precomputed)."""
    same, scalar_y, scalar_x, bcast = kernels
    n = int(np.prod(out_shape, dtype=np.int64))
    if n == 0:
        return
    xf, yf, of = ctx.view(x, (x.size,)), ctx.view(y, (y.size,)), ctx.view(out, (n,))
    if x.shape == y.shape:
        ctx.call(same, xf, yf, of, lim)
    elif y.size == 1 and x.size == n:
        ctx.call(scalar_y, xf, yf, of, lim)
    elif x.size == 1 and y.size == n:
        ctx.call(scalar_x, xf, yf, of, lim)
    else:
        ctx.call(bcast, xf, yf, of, broadcast_strides(x.shape, out_shape), broadcast_strides(y.shape, out_shape),
                 padded_shape(out_shape), lim)


@njit(cache=True, inline="always")
def _add(a, b):
    return a + b


@njit(cache=True, inline="always")
def _sub(a, b):
    return a - b


@njit(cache=True, inline="always")
def _mul(a, b):
    return a * b


@njit(cache=True, inline="always")
def _div(a, b):
    return a / b


@njit(cache=True, inline="always")
def _idiv(a, b):
    # TFLite's integer DIV truncates toward zero (C semantics); division by zero is caught at run time
    if b == 0:
        raise ZeroDivisionError("DIV: integer division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


BINARY = {name: make_binary(f) for name, f in
          (("ADD", _add), ("SUB", _sub), ("MUL", _mul), ("DIV", _div), ("IDIV", _idiv))}


def arithmetic(op: str, dtypes):
    """Prepare for float/int ADD, SUB, MUL, DIV with broadcasting and fused activation."""

    def prepare(ctx: PrepareContext) -> None:
        ctx.check_num(inputs=2, outputs=1)
        x, y = ctx.input(0), ctx.input(1)
        ctx.check(x.dtype == y.dtype, f"input types differ: {x.dtype.name} and {y.dtype.name}")
        if x.quantization.scales.size and x.dtype in (np.int8, np.uint8, np.int16):
            from .quantized_elementwise import prepare_quantized

            return prepare_quantized(ctx)
        ctx.check_dtype(x, *dtypes)
        shape = broadcast_shape(ctx, x.shape, y.shape)
        out = ctx.set_output(0, shape, x.dtype)
        act = ctx.options.get("fused_activation_function", 0)
        if x.dtype.kind == "f":
            lo, hi = float_activation_range(ctx, act)
        else:
            lo, hi = int_activation_range(ctx, act, x.dtype)
        name = "IDIV" if op == "DIV" and x.dtype.kind == "i" else op
        schedule_binary(ctx, BINARY[name], x, y, shape, out, np.array([lo, hi], x.dtype))

    return kernel(op)(prepare)


ADD = arithmetic("ADD", (np.float32, np.int32, np.int64, np.int16))
SUB = arithmetic("SUB", (np.float32, np.int32, np.int64, np.int16))
MUL = arithmetic("MUL", (np.float32, np.int32, np.int64, np.int16, np.complex64))
DIV = arithmetic("DIV", (np.float32, np.int32))


# --- unary -------------------------------------------------------------------------------------------------------

def make_unary(f):
    """out[i] = f(x[i]) over flat arrays."""

    @njit(cache=True, nogil=True)
    def unary(x, out):
        for i in range(out.size):
            out[i] = f(x[i])

    return unary


def unary_op(name: str, f, dtypes=(np.float32,)):
    """A unary elementwise op: output has the input's shape and dtype."""
    loop = make_unary(f)

    def prepare(ctx: PrepareContext) -> None:
        ctx.check_num(inputs=1, outputs=1)
        x = ctx.input(0)
        if x.quantization.scales.size and x.dtype in (np.int8, np.uint8, np.int16):
            from .quantized_elementwise import prepare_quantized

            return prepare_quantized(ctx)
        ctx.check_dtype(x, *dtypes)
        out = ctx.set_output(0, x.shape, x.dtype)
        if x.size:
            ctx.call(loop, ctx.view(x, (x.size,)), ctx.view(out, (out.size,)))

    return kernel(name)(prepare)


@njit(cache=True, inline="always")
def _relu(v):
    return max(v, 0)


@njit(cache=True, inline="always")
def _relu6(v):
    return min(max(v, 0), 6)


@njit(cache=True, inline="always")
def _relu_n1_to_1(v):
    return min(max(v, -1), 1)


@njit(cache=True, inline="always")
def _logistic(v):
    if v >= 0:
        return np.float32(1.0) / (np.float32(1.0) + np.exp(-v))
    e = np.exp(v)
    return e / (np.float32(1.0) + e)


@njit(cache=True, inline="always")
def _tanh(v):
    return np.tanh(v)


@njit(cache=True, inline="always")
def _hard_swish(v):
    return v * min(max(v + np.float32(3.0), np.float32(0.0)), np.float32(6.0)) / np.float32(6.0)


RELU = unary_op("RELU", _relu)
RELU6 = unary_op("RELU6", _relu6)
RELU_N1_TO_1 = unary_op("RELU_N1_TO_1", _relu_n1_to_1)
LOGISTIC = unary_op("LOGISTIC", _logistic)
TANH = unary_op("TANH", _tanh)
HARD_SWISH = unary_op("HARD_SWISH", _hard_swish)

__all__ = ["ADD", "SUB", "MUL", "DIV", "RELU", "RELU6", "RELU_N1_TO_1", "LOGISTIC", "TANH", "HARD_SWISH"]
