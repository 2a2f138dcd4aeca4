"""SOFTMAX and LOG_SOFTMAX over the last axis (float32; quantized paths in quantized modules)."""

from __future__ import annotations

import numpy as np
from numba import njit

from lite_numba.ops import PrepareContext, kernel


# exp(t) for t <= 0 as exp(r) * 2**k with k = round(t / ln 2), |r| <= ln 2 / 2: a degree-6 Taylor polynomial
# (relative error ~1e-7, below float32's ulp at 1e-6 of the row) and the power of two built from its exponent bits.
# Unlike np.exp (one libm call per element) every loop below vectorizes; fastmath only allows re-associating the sums.
_FM = {"reassoc", "nsz"}


@njit(cache=True, nogil=True, fastmath=_FM, inline="always")
def _exp_row(x, r, m, b, out, bits):
    """out[i] = exp((x[r, i] - m) * b), for values with x[r, i] <= m; returns their sum. bits: n int32 scratch."""
    n = x.shape[1]
    for i in range(n):
        t = max((x[r, i] - m) * b, np.float32(-87.0))
        k = np.floor(t * np.float32(1.44269504) + np.float32(0.5))
        f = t - k * np.float32(0.693359375) - k * np.float32(-2.12194440e-4)
        p = np.float32(1.0 / 720)
        p = p * f + np.float32(1.0 / 120)
        p = p * f + np.float32(1.0 / 24)
        p = p * f + np.float32(1.0 / 6)
        p = p * f + np.float32(0.5)
        p = p * f + np.float32(1.0)
        out[i] = p * f + np.float32(1.0)
        bits[i] = (np.int32(k) + np.int32(127)) << 23
    scale = bits.view(np.float32)
    s = np.float32(0.0)
    for i in range(n):
        e = out[i] * scale[i]
        out[i] = e
        s += e
    return s


@njit(cache=True, nogil=True, fastmath=_FM)
def softmax_f32(x, out, beta, bits):
    rows, n = x.shape
    b = np.float32(beta)
    for r in range(rows):
        m = x[r, 0]
        for i in range(1, n):
            m = max(m, x[r, i])
        if b < 0:  # the largest value of (x - m) * b is then at the minimum of x
            m = x[r, 0]
            for i in range(1, n):
                m = min(m, x[r, i])
        o = out[r]
        inv = np.float32(1.0) / _exp_row(x, r, m, b, o, bits)
        for i in range(n):
            o[i] = o[i] * inv


@njit(cache=True, nogil=True, fastmath=_FM)
def log_softmax_f32(x, out, bits):
    rows, n = x.shape
    for r in range(rows):
        m = x[r, 0]
        for i in range(1, n):
            m = max(m, x[r, i])
        o = out[r]
        ls = np.log(_exp_row(x, r, m, np.float32(1.0), o, bits))
        for i in range(n):
            o[i] = x[r, i] - m - ls


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
        ctx.call(softmax_f32, ctx.view(x, (rows, n)), ctx.view(out, (rows, n)), float(ctx.options.get("beta", 1.0)),
                 ctx.temp((n,), np.int32))


@kernel("LOG_SOFTMAX")
def LOG_SOFTMAX(ctx: PrepareContext) -> None:
    x, rows, n = _rows(ctx)
    if x.dtype != np.float32:
        from .quantized_elementwise import prepare_quantized

        return prepare_quantized(ctx)
    out = ctx.set_output(0, x.shape, np.float32)
    if x.size:
        ctx.call(log_softmax_f32, ctx.view(x, (rows, n)), ctx.view(out, (rows, n)), ctx.temp((n,), np.int32))
