"""FULLY_CONNECTED: out[b, u] = act(sum_k x[b, k] * w[u, k] + bias[u]).

Float32 here; quantized (int8/uint8/int16) and hybrid (float input, int8 weights) in fully_connected_quantized.py.
The float GEMM is shared with BATCH_MATMUL: it takes B as [K, N] (TFLite's FC weights transposed once in prepare),
vectorises over N and sums over k in order, one float32 accumulator per output, without fastmath: the result is
that of the sequential float32 dot product (as TFLite's reference kernels compute it).
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.activation import float_activation_range
from lite_numba.kernels.base.copy import write_const
from lite_numba.kernels.base.sparsity import densify_constant
from lite_numba.kernels.base.threads import CHUNKS_PER_THREAD, bands, threads_for
from lite_numba.kernels.linear.fc_loops import fc_rows_f32, gemm_f32, transpose_batches
from lite_numba.kernels.linear.parallel import fc_gemm_f32_par
from lite_numba.kernels.linear.simd_f32 import schedule_fully_connected
from lite_numba.kernels.linear.simd_f32_narrow import float_drivers

from lite_numba.ops import PrepareContext, kernel


def fc_output_shape(ctx: PrepareContext, x, units: int, k: int) -> tuple[tuple[int, ...], int]:
    """Output shape and batch size of FULLY_CONNECTED for input x with `units` outputs and depth k."""
    keep = ctx.options.get("keep_num_dims", False)
    if k == 0:
        # TFLite sizes the output from the input's leading dimensions when the weights have depth 0
        batch = int(np.prod(x.shape[:-1], dtype=np.int64)) if x.ndim else 1
        return ((x.shape[:-1] + (units,)) if keep else (batch, units)), batch
    ctx.check(x.size % k == 0, f"input of shape {list(x.shape)} is not a multiple of weights depth {k}")
    batch = x.size // k
    if keep:
        ctx.check(x.ndim >= 1 and x.shape[-1] == k,
                  f"keep_num_dims needs the last input dimension {x.shape[-1] if x.ndim else None} == {k}")
        return x.shape[:-1] + (units,), batch
    return (batch, units), batch


def float_fc_output(ctx: PrepareContext, x, w, b):
    """(output, units, depth, batch) of a FULLY_CONNECTED with a float32 output (float and blockwise weights): the
    output shaped (fc_output_shape) and the optional bias checked (float32, one value per unit)."""
    units, k = w.shape
    shape, batch = fc_output_shape(ctx, x, units, k)
    out = ctx.set_output(0, shape, np.float32)
    if b is not None:
        ctx.check_dtype(b, np.float32)
        ctx.check(b.size == units, f"bias has {b.size} elements, expected {units}")
    return out, units, k, batch


def weights_array(ctx: PrepareContext, w) -> np.ndarray | None:
    """Constant weights as a dense [units, depth] array (sparse constants densified), or None if not constant."""
    sparsity = w.spec.sparsity if w.spec is not None else None
    if sparsity:
        return densify_constant(ctx, w)
    return None if w.data is None else np.asarray(w.data)


def schedule_zero_fill(ctx: PrepareContext, out) -> None:
    """Weights of depth 0: TFLite zeroes the output bytes (no bias, no zero point)."""
    write_const(ctx, out, np.zeros(out.size, out.dtype))


def schedule_gemm_f32(ctx: PrepareContext, x, w_t, bias, out, batch: int, k: int, units: int, lim) -> None:
    """out [batch, units] = clamp(x [batch, k] @ w_t [k, units] + bias) for a single matrix product."""
    zero = np.zeros(1, np.int64)
    ctx.call(gemm_f32, ctx.view(x, (x.size,)), zero, w_t, zero, bias, ctx.view(out, (out.size,)),
             batch, k, units, lim)


_GEMV_ROWS = 4  # runtime weights with at most this many input rows: fc_rows_f32 instead of packing them


@kernel("FULLY_CONNECTED")
def FULLY_CONNECTED(ctx: PrepareContext) -> None:
    """Float32 FULLY_CONNECTED (quantized and hybrid weights: the quantized variant, fully_connected_quantized)."""
    ctx.check_num(inputs=(2, 3), outputs=1)
    x, w, b = ctx.input(0), ctx.input(1), ctx.input(2)
    ctx.check(x is not None and w is not None, "input and weights are required")
    ctx.check(w.ndim == 2, f"weights must be 2-D, got shape {list(w.shape)}")
    ctx.check(ctx.options.get("weights_format", 0) == 0, "only the DEFAULT weights format is supported")
    if x.dtype != np.float32 or w.dtype != np.float32:
        return ctx.prepare_quantized()
    ctx.check_dtype(ctx.output(0), np.float32)
    out, units, k, batch = float_fc_output(ctx, x, w, b)
    lo, hi = float_activation_range(ctx, ctx.options.get("fused_activation_function", 0))
    if out.size == 0:
        return
    if k == 0:
        return schedule_zero_fill(ctx, out)
    bias = ctx.view(b, (units,)) if b is not None else np.zeros(units, np.float32)
    lim = np.array([lo, hi], np.float32)
    dense = weights_array(ctx, w)
    if dense is None and batch <= _GEMV_ROWS:
        return ctx.call(fc_rows_f32, ctx.view(x, (x.size,)), ctx.view(w, (w.size,)), bias, ctx.view(out, (out.size,)),
                        batch, k, units, lim)
    drivers = float_drivers()
    if drivers is not None:
        return schedule_fully_connected(ctx, x, w, dense, b, out, batch, k, units, drivers)
    if dense is not None:
        w_t = ctx.const(np.ascontiguousarray(dense.T).reshape(-1))
    else:
        w_t = ctx.temp((k * units,), np.float32)
        ctx.call(transpose_batches, ctx.view(w, (w.size,)), w_t, units, k)
    schedule_fc_gemm_f32(ctx, x, w_t, bias, out, batch, k, units, lim)


def schedule_fc_gemm_f32(ctx, x, w_t, bias, out, batch: int, k: int, units: int, lim) -> None:
    """schedule_gemm_f32, or (num_threads > 1 and enough work) its parallel driver over bands of rows."""
    t = threads_for(ctx, batch * k * units)
    # starts multiples of 4: the kernel's 4-row groups stay the same
    ch = bands(batch, CHUNKS_PER_THREAD * t, 4) if t > 1 else []
    if len(ch) < 2:
        return schedule_gemm_f32(ctx, x, w_t, bias, out, batch, k, units, lim)
    zero = np.zeros(1, np.int64)
    tab = np.array([(r0, r1, r0 * k) for r0, r1 in ch], np.int64).reshape(-1)
    ctx.call(fc_gemm_f32_par, ctx.view(x, (x.size,)), zero, w_t, zero, bias, ctx.view(out, (out.size,)), batch, k,
             units, lim, tab, ctx.temp((1,), np.int64), t)
