"""SOFTMAX and LOG_SOFTMAX over the last axis (float32; quantized paths in quantized modules)."""

from __future__ import annotations

import numpy as np
from numba import njit

from lite_numba.ops import PrepareContext, kernel


@njit(cache=True, nogil=True)
def softmax_f32(x, out, beta):
    rows, n = x.shape
    b = np.float32(beta)
    for r in range(rows):
        m = x[r, 0]
        for i in range(1, n):
            m = max(m, x[r, i])
        s = np.float32(0.0)
        for i in range(n):
            e = np.exp((x[r, i] - m) * b)
            out[r, i] = e
            s += e
        inv = np.float32(1.0) / s
        for i in range(n):
            out[r, i] = out[r, i] * inv


@njit(cache=True, nogil=True)
def log_softmax_f32(x, out):
    rows, n = x.shape
    for r in range(rows):
        m = x[r, 0]
        for i in range(1, n):
            m = max(m, x[r, i])
        s = np.float32(0.0)
        for i in range(n):
            s += np.exp(x[r, i] - m)
        ls = np.log(s)
        for i in range(n):
            out[r, i] = x[r, i] - m - ls


def _rows(ctx: PrepareContext):
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check(x.ndim >= 1, "input must have rank >= 1")
    n = x.shape[-1]
    rows = x.size // n if n else 0
    return x, rows, n


@kernel("SOFTMAX")
def SOFTMAX(ctx: PrepareContext) -> None:
    x, rows, n = _rows(ctx)
    if x.dtype != np.float32:
        from .quantized_elementwise import prepare_quantized

        return prepare_quantized(ctx)
    out = ctx.set_output(0, x.shape, np.float32)
    if x.size:
        ctx.call(softmax_f32, ctx.view(x, (rows, n)), ctx.view(out, (rows, n)), float(ctx.options.get("beta", 1.0)))


@kernel("LOG_SOFTMAX")
def LOG_SOFTMAX(ctx: PrepareContext) -> None:
    x, rows, n = _rows(ctx)
    if x.dtype != np.float32:
        from .quantized_elementwise import prepare_quantized

        return prepare_quantized(ctx)
    out = ctx.set_output(0, x.shape, np.float32)
    if x.size:
        ctx.call(log_softmax_f32, ctx.view(x, (rows, n)), ctx.view(out, (rows, n)))
