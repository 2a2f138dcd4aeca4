"""The layer-norm and RMS-norm patterns converters write out of elementwise ops, as one kernel each (issue 30):
lite_numba/runtime/fusion.py recognises the node patterns and puts FUSED_NORM in place of the last node (the others
become FUSED_AWAY). Each kernel replays its pattern's nodes per row, every step rounded (and, for ADD / SUB / MUL,
clamped to the finite float32 range, as those kernels do) exactly as the node computes it, so the outputs are the
unfused graph's bit for bit; what goes is ten to twelve kernel calls and their [rows] and [rows, C] intermediates.

Patterns (x [..., C] seen as [R, C]; each MEAN over the last axis, summed as MEAN sums: Eigen's packet order from the
row's offset over several rows of several values, in order from -0.0 otherwise):
- "mean_shift" (litert-torch's LayerNorm without affine): m = MEAN(x), v = MEAN(SQUARED_DIFFERENCE(x, m)),
  r = RSQRT(v + eps), b = c0 - r * m, y = x * r + b;
- "gamma" (the TF converter's): m = MEAN(x), v = MEAN(SQUARED_DIFFERENCE(x, m)), r = RSQRT(v + eps), g = r * gamma,
  y = x * g + (-m) * g;
- "rms" (an RMSNorm): v = MEAN(x * x), r = RSQRT(v + eps), y = (x * r) * w.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.activation import F32_MAX
from lite_numba.kernels.base.vecmath import eigen_sum_f32, eigen_sum_sq_f32, norm_row_f32, wide_vectors
from numba import njit

from lite_numba.ops import PrepareContext, kernel

KINDS = {"mean_shift": 0, "gamma": 1, "rms": 2}


@njit(cache=True, inline="always")
def _fin(v):
    """An ADD / SUB / MUL result as those kernels store it: clamped to [-FLT_MAX, FLT_MAX]."""
    return min(max(v, np.float32(-F32_MAX)), np.float32(F32_MAX))


@njit(cache=True, nogil=True, error_model="numpy")
def fused_norm_f32(x, xf, w, of, kind, eps, c0, s):
    """of (flat [rows * n]) = the pattern `kind` over x [rows, n] (xf: flat); w: gamma or the RMS weight
    (n values); s: 2 * rows floats of scratch (each row's mean and reciprocal deviation). Two passes: first every
    row's sums (the squares computed as they are summed, eigen_sum_sq_f32: no scratch row) and 1 / sqrt, rows
    independent of each other so that the CPU overlaps one row's chains of additions with the next row's; then the
    outputs, a row at a time in vectors (norm_row_f32). Rows indexed two-dimensionally and the sums through
    intrinsics: no array view or helper call per row (Numba reference-counts those)."""
    wide_vectors()
    rows, n = x.shape
    e, z = np.float32(eps), np.float32(c0)
    d = np.float32(n)
    packets = rows > 1 and n > 1  # MEAN's Eigen order, else in order from -0.0
    one = np.float32(1.0)
    for j in range(rows):
        m = np.float32(0.0)
        if kind != 2:
            if packets:
                m = eigen_sum_f32(xf, j * n, n, j * n) / d
                v = eigen_sum_sq_f32(xf, j * n, n, j * n, m, False) / d
            else:
                m = np.float32(-0.0)
                for i in range(n):
                    m += x[j, i]
                m = m / d
                v = np.float32(-0.0)
                for i in range(n):
                    t = x[j, i] - m
                    v += t * t
                v = v / d
        elif packets:
            v = eigen_sum_sq_f32(xf, j * n, n, j * n, m, True) / d
        else:
            v = np.float32(-0.0)
            for i in range(n):
                v += _fin(x[j, i] * x[j, i])
            v = v / d
        s[2 * j] = m
        s[2 * j + 1] = one / np.sqrt(_fin(v + e))
    for j in range(rows):
        m = s[2 * j]
        r = s[2 * j + 1]
        c = _fin(z - _fin(r * m)) if kind == 0 else -m
        norm_row_f32(of, xf, w, j * n, n, kind, r, c)


@kernel("FUSED_NORM")
def FUSED_NORM(ctx: PrepareContext) -> None:
    """x [..., C] (and for "gamma" / "rms" a constant [C] weight) -> the pattern's output, x's shape (options: kind,
    eps, c0, the rows R and width C the pattern was matched with)."""
    x, w = ctx.input(0), ctx.input(1)
    ctx.check_dtype(x, np.float32)
    if "shape" in ctx.options:  # the pattern's RESHAPEs / reduced size-1 axes fixed the shape it was matched for
        want = tuple(ctx.options["shape"])
        ctx.check(tuple(x.shape) == want, f"input shape {list(x.shape)} differs from the {list(want)} that the "
                                          f"normalization's RESHAPE / MEAN nodes were written for")
    n = x.shape[-1] if x.ndim else 1
    rows = x.size // n if n else 0
    kind = KINDS[ctx.options["kind"]]
    out = ctx.set_output(0, x.shape, np.float32)
    if out.size == 0:
        return
    weights = ctx.const(np.zeros(n, np.float32)) if w is None else ctx.view(w, (n,))
    ctx.call(fused_norm_f32, ctx.view(x, (rows, n)), ctx.view(x, (x.size,)), weights, ctx.view(out, (out.size,)),
             kind, float(ctx.options["eps"]), float(ctx.options.get("c0", 0.0)), ctx.temp((2 * rows,), np.float32))


__all__ = ["FUSED_NORM", "KINDS", "fused_norm_f32"]
