"""SOFTMAX and LOG_SOFTMAX over the last axis (float32; quantized paths in quantized modules).

SOFTMAX is the official x86 build's Eigen expression, step by step, so it is bit-exact: per row the maximum, then
t = (x - max) * beta and exp(t) over the whole tensor as one linear Eigen assignment (packets of 4 from the aligned
start: kernels/base/vecmath.eigen_exp_f32; the last size % 4 elements by the scalar std::exp, libm's expf), each
row's sum in Eigen's packet order (vecmath.eigen_sum_f32, the row's alignment being its offset in the tensor), its
inverse 1 / sum, and every exponential times it. The elementwise loops are maps (vectorized at the widest width);
the sums are the only ordered part."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.vecmath import (
    eigen_exp_normalize,
    exp_f32,
    row_max_f32,
    row_shift_scale_f32,
    wide_vectors,
)
from numba import njit

from lite_numba.ops import PrepareContext, kernel

# LOG_SOFTMAX's loops vectorize: exp_f32 replaces np.exp's libm call per element, and fastmath only allows
# re-associating the sums.
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


@njit(cache=True, nogil=True, error_model="numpy")
def softmax_f32(x, out, beta):
    """out = softmax(beta * x) over the last axis of x [rows, n] (both C-contiguous), as the official kernel. Rows
    are indexed two-dimensionally (no row views: Numba reference-counts each view, ~0.1 us a row)."""
    wide_vectors()
    rows, n = x.shape
    xf = x.reshape(-1)
    of = out.reshape(-1)
    b = np.float32(beta)
    for r in range(rows):
        row_shift_scale_f32(of, xf, r * n, n, row_max_f32(xf, r * n, n), b)
    # one flat exp pass (short rows would each end in a scalar remainder), as Eigen's one linear assignment
    eigen_exp_normalize(of, rows, n, n)


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
