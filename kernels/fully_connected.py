"""FULLY_CONNECTED: out[b, u] = act(sum_k x[b, k] * w[u, k] + bias[u]).

Float32 here; quantized (int8/uint8/int16) and hybrid (float input, int8 weights) in quantized_fully_connected.py.
The float GEMM is shared with BATCH_MATMUL: it takes B as [K, N] (TFLite's FC weights transposed once in prepare),
vectorises over N and sums over k in order, one float32 accumulator per output, without fastmath: the result is
that of the sequential float32 dot product (as TFLite's reference kernels compute it).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lite_numba.ops import PrepareContext, kernel

from .common import float_activation_range
from .simd_f32 import schedule_fully_connected
from .simd_f32_narrow import float_drivers

# output columns kept in L1 while the k loop runs over them: four rows at a time, or one row (a matrix-vector
# product, where a long chunk keeps the reads of B sequential)
_CHUNK4 = 512
_CHUNK1 = 2048


@njit(cache=True, nogil=True)
def gemm_f32(a, a_off, b, b_off, bias, out, M, K, N, lim):
    """For every batch i: out[i] = clamp(A_i @ B_i + bias) with A_i = a[a_off[i]:][:M*K] as [M, K],
    B_i = b[b_off[i]:][:K*N] as [K, N], out[i] the i-th [M, N] block of out, bias [N], lim = [lo, hi].

    Four rows share each load of B and k is unrolled by four; every output is still summed over k in order
    ((((0 + t0) + t1) + t2) ...), so the vectorisation over N needs no reassociation (no fastmath)."""
    lo, hi = lim[0], lim[1]
    K4 = K - K % 4
    zero = np.float32(0.0)
    for i in range(a_off.size):
        ab = a_off[i]
        bb = b_off[i]
        ob = i * M * N
        m = 0
        while m < M:
            rows = 4 if M - m >= 4 else 1
            r0 = ab + m * K
            r1 = r0 + K if rows == 4 else r0
            r2 = r1 + K if rows == 4 else r0
            r3 = r2 + K if rows == 4 else r0
            chunk = _CHUNK4 if rows == 4 else _CHUNK1
            for nb in range(0, N, chunk):
                n = min(chunk, N - nb)
                o0 = out[ob + m * N + nb:ob + m * N + nb + n]
                # with one row, o1..o3 alias o0 and are never written
                o1 = out[ob + (m + 1) * N + nb:ob + (m + 1) * N + nb + n] if rows == 4 else o0
                o2 = out[ob + (m + 2) * N + nb:ob + (m + 2) * N + nb + n] if rows == 4 else o0
                o3 = out[ob + (m + 3) * N + nb:ob + (m + 3) * N + nb + n] if rows == 4 else o0
                for j in range(n):
                    o0[j] = zero
                if rows == 4:
                    for j in range(n):
                        o1[j] = zero
                        o2[j] = zero
                        o3[j] = zero
                    for k in range(0, K4, 4):
                        w0 = b[bb + k * N + nb:bb + k * N + nb + n]
                        w1 = b[bb + (k + 1) * N + nb:bb + (k + 1) * N + nb + n]
                        w2 = b[bb + (k + 2) * N + nb:bb + (k + 2) * N + nb + n]
                        w3 = b[bb + (k + 3) * N + nb:bb + (k + 3) * N + nb + n]
                        x00, x01, x02, x03 = a[r0 + k], a[r0 + k + 1], a[r0 + k + 2], a[r0 + k + 3]
                        x10, x11, x12, x13 = a[r1 + k], a[r1 + k + 1], a[r1 + k + 2], a[r1 + k + 3]
                        x20, x21, x22, x23 = a[r2 + k], a[r2 + k + 1], a[r2 + k + 2], a[r2 + k + 3]
                        x30, x31, x32, x33 = a[r3 + k], a[r3 + k + 1], a[r3 + k + 2], a[r3 + k + 3]
                        for j in range(n):
                            y0, y1, y2, y3 = w0[j], w1[j], w2[j], w3[j]
                            o0[j] = (((o0[j] + x00 * y0) + x01 * y1) + x02 * y2) + x03 * y3
                            o1[j] = (((o1[j] + x10 * y0) + x11 * y1) + x12 * y2) + x13 * y3
                            o2[j] = (((o2[j] + x20 * y0) + x21 * y1) + x22 * y2) + x23 * y3
                            o3[j] = (((o3[j] + x30 * y0) + x31 * y1) + x32 * y2) + x33 * y3
                    for k in range(K4, K):
                        w0 = b[bb + k * N + nb:bb + k * N + nb + n]
                        x00, x10, x20, x30 = a[r0 + k], a[r1 + k], a[r2 + k], a[r3 + k]
                        for j in range(n):
                            y0 = w0[j]
                            o0[j] += x00 * y0
                            o1[j] += x10 * y0
                            o2[j] += x20 * y0
                            o3[j] += x30 * y0
                else:
                    for k in range(0, K4, 4):
                        w0 = b[bb + k * N + nb:bb + k * N + nb + n]
                        w1 = b[bb + (k + 1) * N + nb:bb + (k + 1) * N + nb + n]
                        w2 = b[bb + (k + 2) * N + nb:bb + (k + 2) * N + nb + n]
                        w3 = b[bb + (k + 3) * N + nb:bb + (k + 3) * N + nb + n]
                        x00, x01, x02, x03 = a[r0 + k], a[r0 + k + 1], a[r0 + k + 2], a[r0 + k + 3]
                        for j in range(n):
                            o0[j] = (((o0[j] + x00 * w0[j]) + x01 * w1[j]) + x02 * w2[j]) + x03 * w3[j]
                    for k in range(K4, K):
                        w0 = b[bb + k * N + nb:bb + k * N + nb + n]
                        x00 = a[r0 + k]
                        for j in range(n):
                            o0[j] += x00 * w0[j]
                for r in range(rows):
                    o = out[ob + (m + r) * N + nb:ob + (m + r) * N + nb + n]
                    bs = bias[nb:nb + n]
                    for j in range(n):
                        o[j] = min(max(o[j] + bs[j], lo), hi)
            m += rows


@njit(cache=True, nogil=True)
def transpose_batches(x, out, R, C):
    """out[i] = x[i].T for consecutive [R, C] blocks of the flat x (out blocks are [C, R])."""
    for i in range(x.size // max(R * C, 1)):
        base = i * R * C
        for r in range(R):
            for c in range(C):
                out[base + c * R + r] = x[base + r * C + c]


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


def weights_array(ctx: PrepareContext, w) -> np.ndarray | None:
    """Constant weights as a dense [units, depth] array (sparse constants densified), or None if not constant."""
    sparsity = w.spec.sparsity if w.spec is not None else None
    if sparsity:
        from .densify import densify_constant

        return densify_constant(ctx, w)
    return None if w.data is None else np.asarray(w.data)


def schedule_zero_fill(ctx: PrepareContext, out) -> None:
    """Weights of depth 0: TFLite zeroes the output bytes (no bias, no zero point)."""
    from .reshape import copy_bytes

    ctx.call(copy_bytes, np.zeros(out.nbytes, np.uint8), ctx.view(out, (out.nbytes,), np.uint8))


def schedule_gemm_f32(ctx: PrepareContext, x, w_t, bias, out, batch: int, k: int, units: int, lim) -> None:
    """out [batch, units] = clamp(x [batch, k] @ w_t [k, units] + bias) for a single matrix product."""
    zero = np.zeros(1, np.int64)
    ctx.call(gemm_f32, ctx.view(x, (x.size,)), zero, w_t, zero, bias, ctx.view(out, (out.size,)),
             batch, k, units, lim)


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def fc_rows_f32(x, w, bias, out, batch, k, units, lim):
    """out[b, n] = clamp(dot(w[n, :], x[b, :]) + bias[n]) straight from row-major weights [units, k]: for weights
    known only at run time (e.g. a constant passed into an IF branch or WHILE body) with few rows, where packing
    them at every invoke would cost more than the product. The dots sum in vector lanes."""
    lo, hi = lim[0], lim[1]
    for b in range(batch):
        xr = x[b * k:(b + 1) * k]
        for n in range(units):
            wr = w[n * k:(n + 1) * k]
            s = np.float32(0.0)
            for i in range(k):
                s += wr[i] * xr[i]
            out[b * units + n] = min(max(s + bias[n], lo), hi)


_GEMV_ROWS = 4  # runtime weights with at most this many input rows: fc_rows_f32 instead of packing them


@kernel("FULLY_CONNECTED")
def FULLY_CONNECTED(ctx: PrepareContext) -> None:
    """Float32 FULLY_CONNECTED (quantized and hybrid weights go to quantized_fully_connected)."""
    ctx.check_num(inputs=(2, 3), outputs=1)
    x, w, b = ctx.input(0), ctx.input(1), ctx.input(2)
    ctx.check(x is not None and w is not None, "input and weights are required")
    ctx.check(w.ndim == 2, f"weights must be 2-D, got shape {list(w.shape)}")
    ctx.check(ctx.options.get("weights_format", 0) == 0, "only the DEFAULT weights format is supported")
    if x.dtype != np.float32 or w.dtype != np.float32:
        from .quantized_fully_connected import prepare_quantized_fc

        return prepare_quantized_fc(ctx)
    ctx.check_dtype(ctx.output(0), np.float32)
    units, k = w.shape
    shape, batch = fc_output_shape(ctx, x, units, k)
    out = ctx.set_output(0, shape, np.float32)
    if b is not None:
        ctx.check_dtype(b, np.float32)
        ctx.check(b.size == units, f"bias has {b.size} elements, expected {units}")
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
    from .par_portable import schedule_fc_gemm_f32  # schedule_gemm_f32, or parallel (num_threads > 1)

    schedule_fc_gemm_f32(ctx, x, w_t, bias, out, batch, k, units, lim)
