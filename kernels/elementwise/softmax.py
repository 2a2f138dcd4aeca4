"""SOFTMAX and LOG_SOFTMAX over the last axis (float32; quantized paths in quantized modules)."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.vecmath import exp_f32
from numba import njit

from lite_numba.ops import PrepareContext, kernel

# The loops vectorize: exp_f32 replaces np.exp's libm call per element, and fastmath only allows re-associating
# the sums.
_FM = {"reassoc", "nsz"}


@njit(cache=True, nogil=True, fastmath=_FM, error_model="numpy", inline="always")
def _exp_row(x, r, m, b, out):
    """out[i] = exp((x[r, i] - m) * b); returns their sum."""
    s = np.float32(0.0)
    for i in range(x.shape[1]):
        e = exp_f32((x[r, i] - m) * b)
        out[i] = e
        s += e
    return s


@njit(cache=True, nogil=True, fastmath=_FM, error_model="numpy")
def softmax_f32(x, out, beta):
    rows, n = x.shape
    b = np.float32(beta)
    for r in range(rows):
        m = x[r, 0]
        for i in range(1, n):
            m = max(m, x[r, i])
        # the row maximum whatever beta's sign, as the official kernel: with beta < 0, (x - m) * beta >= 0 and
        # exp overflows to inf once it passes ln(FLT_MAX) (the outputs are then NaN, inf / inf, and 0)
        o = out[r]
        inv = np.float32(1.0) / _exp_row(x, r, m, b, o)
        for i in range(n):
            o[i] = o[i] * inv


@njit(cache=True, nogil=True, fastmath=_FM, error_model="numpy")
def log_softmax_f32(x, out):
    rows, n = x.shape
    for r in range(rows):
        m = x[r, 0]
        for i in range(1, n):
            m = max(m, x[r, i])
        o = out[r]
        ls = np.log(_exp_row(x, r, m, np.float32(1.0), o))
        for i in range(n):
            o[i] = x[r, i] - m - ls


def softmax_rows(ctx: PrepareContext):
    """SOFTMAX / LOG_SOFTMAX's one input and its (rows, last dimension), float or quantized."""
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check(x.ndim >= 1, "input must have rank >= 1")
    n = x.shape[-1]
    rows = x.size // n if n else 0
    return x, rows, n


def _prepare_f32(ctx: PrepareContext, fn, *extra) -> None:
    """Schedule fn(x [rows, n], out [rows, n], *extra) for a float32 input; a quantized one goes to the op's
    quantized variant."""
    x, rows, n = softmax_rows(ctx)
    if x.dtype != np.float32:
        return ctx.prepare_quantized()
    out = ctx.set_output(0, x.shape, np.float32)
    if x.size:
        ctx.call(fn, ctx.view(x, (rows, n)), ctx.view(out, (rows, n)), *extra)


@kernel("SOFTMAX")
def SOFTMAX(ctx: PrepareContext) -> None:
    """exp(beta * (x - max)) / sum over the last axis."""
    _prepare_f32(ctx, softmax_f32, float(ctx.options.get("beta", 1.0)))


@kernel("LOG_SOFTMAX")
def LOG_SOFTMAX(ctx: PrepareContext) -> None:
    """x - max - log(sum of exp(x - max)) over the last axis."""
    _prepare_f32(ctx, log_softmax_f32)
