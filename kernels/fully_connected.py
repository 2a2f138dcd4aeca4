"""FULLY_CONNECTED: out[b, u] = act(sum_k x[b, k] * w[u, k] + bias[u]) (float32; quantized/hybrid elsewhere)."""

from __future__ import annotations

import numpy as np
from numba import njit

from lite_numba.ops import PrepareContext, kernel

from .common import float_activation_range


@njit(cache=True, nogil=True)
def fc_f32(x, w, bias, out, lim):
    """x [B, K], w [U, K] (TFLite layout, already 'transposed B'), bias [U] -> out [B, U]."""
    B, K = x.shape
    U = w.shape[0]
    lo, hi = lim[0], lim[1]
    for b in range(B):
        for u in range(U):
            acc = np.float32(0.0)
            for k in range(K):
                acc += x[b, k] * w[u, k]
            v = acc + bias[u]
            out[b, u] = min(max(v, lo), hi)


def fc_output_shape(ctx: PrepareContext, x, units: int, k: int) -> tuple[tuple[int, ...], int]:
    """Output shape and batch size of FULLY_CONNECTED for input x with `units` outputs and depth k."""
    ctx.check(k > 0 and x.size % k == 0, f"input of shape {list(x.shape)} is not a multiple of weights depth {k}")
    batch = x.size // k
    if ctx.options.get("keep_num_dims", False):
        ctx.check(x.shape[-1] == k, f"keep_num_dims needs the last input dimension {x.shape[-1]} == {k}")
        return x.shape[:-1] + (units,), batch
    return (batch, units), batch


@kernel("FULLY_CONNECTED")
def FULLY_CONNECTED(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=(2, 3), outputs=1)
    x, w, b = ctx.input(0), ctx.input(1), ctx.input(2)
    ctx.check(w.ndim == 2, f"weights must be 2-D, got shape {list(w.shape)}")
    if x.dtype != np.float32 or w.dtype != np.float32:
        from .quantized_fully_connected import prepare_quantized_fc

        return prepare_quantized_fc(ctx)
    ctx.check(ctx.options.get("weights_format", 0) == 0, "only DEFAULT weights format is supported")
    units, k = w.shape
    shape, batch = fc_output_shape(ctx, x, units, k)
    out = ctx.set_output(0, shape, np.float32)
    if b is not None:
        ctx.check_dtype(b, np.float32)
        ctx.check(b.size == units, f"bias has {b.size} elements, expected {units}")
        bias = b
    else:
        bias = np.zeros(units, np.float32)
    lo, hi = float_activation_range(ctx, ctx.options.get("fused_activation_function", 0))
    if out.size:
        bias_arg = ctx.view(bias, (units,)) if not isinstance(bias, np.ndarray) else bias
        ctx.call(fc_f32, ctx.view(x, (batch, k)), w, bias_arg, ctx.view(out, (batch, units)),
                 np.array([lo, hi], np.float32))
