"""Quantized FULLY_CONNECTED (int8, uint8, int16x8, int16x16) and hybrid FULLY_CONNECTED (float input, int8 weights),
plus the integer GEMM, requantization and input quantization that BATCH_MATMUL shares.

Integer results are bit-exact with TFLite's builtin kernels, which requantize in one of four ways:
- REQUANT_RUY: int32 accumulator (wrapping), the fixed-point multiplier applied as ruy's x86 kernels do (both
  roundings half up; the optimized int8/uint8 and int16x8 FULLY_CONNECTED go through ruy);
- REQUANT_FIXED: int32 accumulator (wrapping), TFLite's MultiplyByQuantizedMultiplier (both roundings half away from
  zero; the reference int8 BATCH_MATMUL). The two differ on negative ties only;
- REQUANT_FLOAT: int64 accumulator, round(acc * (s_in * s_w / s_out)) in double (int16x8 with int64 bias);
- REQUANT_FIXED64: int64 accumulator, the int64 MultiplyByQuantizedMultiplier (multiplier reduced to 16 bits; int16
  weights, int16 BATCH_MATMUL).
Hybrid kernels quantize each input row to int8 on the fly (symmetric, or asymmetric with a zero point) and scale the
int32 dot products back to float, as TFLite's EvalHybrid does (fc_hybrid); blockwise INT4 / INT2 weights, kept
packed, go to fc_blockwise.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.activation import (
    ACT_NONE,
    ACT_RELU,
    ACT_RELU6,
    ACT_RELU_N1_TO_1,
    ACT_SIGN_BIT,
    ACT_TANH,
)
from lite_numba.kernels.base.fixedpoint import (
    activation_range_quantized,
    check_int64_left_shift,
    check_left_shift,
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_int64,
    quantize_multiplier,
    round_half_away,
)
from lite_numba.kernels.base.hybrid_quant import refuse_minus_128
from lite_numba.kernels.linear.fc_blockwise import (
    INT4_TILE_DOTS_MAX_K,
    float_as_int32,
    int4_channel_finish,
    int8_as_float,
    prepare_blockwise_fc,
    quantize_rows_4bit,
    uses_int4_channel_path,
)
from lite_numba.kernels.linear.fc_hybrid import hybrid_fc_finish, hybrid_fc_zero_input, schedule_hybrid_rows
from lite_numba.kernels.linear.fc_loops import row_block, transpose_batches
from lite_numba.kernels.linear.fully_connected import fc_output_shape, schedule_zero_fill, weights_array
from lite_numba.kernels.linear.hybrid_schedule import schedule_hybrid
from lite_numba.kernels.linear.qgemm import schedule_qgemm_mt
from numba import njit

from lite_numba.ops import PrepareContext, kernel

REQUANT_FIXED, REQUANT_FLOAT, REQUANT_FIXED64, REQUANT_RUY = 0, 1, 2, 3
TYPE_INT32, TYPE_INT64 = 2, 4  # schema TensorType values used by quantized_bias_type


# --- integer maths ------------------------------------------------------------------------------------------------

@njit(cache=True, inline="always")
def multiply_by_quantized_multiplier_ruy(x, q, shift):
    """ruy's x86 requantization of an int32: (x << left) * q rounded half up to the high 32 bits, then a rounding
    right shift that also rounds half up (saturating to 2^(31 - right) where x + nudge would overflow)."""
    left = shift if shift > 0 else 0
    right = -shift if shift < 0 else 0
    v = np.int64(np.int32(np.int64(x) << left))
    h = (v * np.int64(q) + (np.int64(1) << 30)) >> 31
    if right > 0:
        nudge = np.int64(1) << (right - 1)
        if h > 0x7FFFFFFF - nudge:
            return np.int64(1) << (31 - right)
        return (h + nudge) >> right
    return h


@njit(cache=True, nogil=True)
def igemm(a, a_off, azp, b, b_off, bzp, acc, M, K, N):
    """For every batch i: acc[i] ([M, N] block) = sum_k (A_i[m, k] - azp) * (B_i[k, n] - bzp), with
    A_i = a[a_off[i]:] as [M, K] and B_i = b[b_off[i]:] as [K, N]; acc's dtype (int32 or int64) sets the wrap."""
    K4 = K - K % 4
    for i in range(a_off.size):
        ab = a_off[i]
        bb = b_off[i]
        for m in range(M):
            r = ab + m * K
            p = acc[(i * M + m) * N:(i * M + m + 1) * N]
            for j in range(N):
                p[j] = 0
            row_sum = 0
            for k in range(0, K4, 4):
                x0 = np.int32(a[r + k] - azp)
                x1 = np.int32(a[r + k + 1] - azp)
                x2 = np.int32(a[r + k + 2] - azp)
                x3 = np.int32(a[r + k + 3] - azp)
                row_sum += x0 + x1 + x2 + x3
                w0 = b[bb + k * N:bb + (k + 1) * N]
                w1 = b[bb + (k + 1) * N:bb + (k + 2) * N]
                w2 = b[bb + (k + 2) * N:bb + (k + 3) * N]
                w3 = b[bb + (k + 3) * N:bb + (k + 4) * N]
                for j in range(N):
                    p[j] += x0 * np.int32(w0[j]) + x1 * np.int32(w1[j]) + x2 * np.int32(w2[j]) + x3 * np.int32(w3[j])
            for k in range(K4, K):
                x0 = np.int32(a[r + k] - azp)
                row_sum += x0
                w0 = b[bb + k * N:bb + (k + 1) * N]
                for j in range(N):
                    p[j] += x0 * np.int32(w0[j])
            if bzp != 0:
                corr = bzp * row_sum
                for j in range(N):
                    p[j] -= corr


@njit(cache=True, nogil=True)
def offset_to_f32(x, zp, out):
    """out[i] = float32(x[i] - zp): integer operands for igemm_f32."""
    for i in range(out.size):
        out[i] = np.float32(np.int64(x[i]) - zp)


_ICHUNK = 512  # int32 outputs per row kept in L1 by igemm_f32


@njit(cache=True, nogil=True, _nrt=False)
def igemm_f32(a, a_off, azp, bf, b_off, acc, M, K, N, group):
    """igemm for int32 results through float32 vector maths: acc[i] += sum_k (A_i[m, k] - azp) * Bf_i[k, n], with
    Bf holding the rhs minus its zero point as float32. Products are taken in float32 and summed `group` (4 or 1) at a
    time before being added to acc; prepare picks group so that each partial sum is an integer below 2^24, hence
    exact, and acc wraps like TFLite's int32 accumulators. Four rows share each load of Bf."""
    KG = K - K % group
    for i in range(a_off.size):
        ab = a_off[i]
        bb = b_off[i]
        m = 0
        while m < M:
            rows, r0, r1, r2, r3 = row_block(ab, m, M, K)
            ob = (i * M + m) * N
            for nb in range(0, N, _ICHUNK):
                n = min(_ICHUNK, N - nb)
                o0 = acc[ob + nb:ob + nb + n]
                o1 = acc[ob + N + nb:ob + N + nb + n] if rows == 4 else o0
                o2 = acc[ob + 2 * N + nb:ob + 2 * N + nb + n] if rows == 4 else o0
                o3 = acc[ob + 3 * N + nb:ob + 3 * N + nb + n] if rows == 4 else o0
                for j in range(n):
                    o0[j] = 0
                if rows == 4:
                    for j in range(n):
                        o1[j] = 0
                        o2[j] = 0
                        o3[j] = 0
                if group == 4:
                    for k in range(0, KG, 4):
                        w0 = bf[bb + k * N + nb:bb + k * N + nb + n]
                        w1 = bf[bb + (k + 1) * N + nb:bb + (k + 1) * N + nb + n]
                        w2 = bf[bb + (k + 2) * N + nb:bb + (k + 2) * N + nb + n]
                        w3 = bf[bb + (k + 3) * N + nb:bb + (k + 3) * N + nb + n]
                        x00 = np.float32(a[r0 + k] - azp)
                        x01 = np.float32(a[r0 + k + 1] - azp)
                        x02 = np.float32(a[r0 + k + 2] - azp)
                        x03 = np.float32(a[r0 + k + 3] - azp)
                        if rows == 4:
                            x10 = np.float32(a[r1 + k] - azp)
                            x11 = np.float32(a[r1 + k + 1] - azp)
                            x12 = np.float32(a[r1 + k + 2] - azp)
                            x13 = np.float32(a[r1 + k + 3] - azp)
                            x20 = np.float32(a[r2 + k] - azp)
                            x21 = np.float32(a[r2 + k + 1] - azp)
                            x22 = np.float32(a[r2 + k + 2] - azp)
                            x23 = np.float32(a[r2 + k + 3] - azp)
                            x30 = np.float32(a[r3 + k] - azp)
                            x31 = np.float32(a[r3 + k + 1] - azp)
                            x32 = np.float32(a[r3 + k + 2] - azp)
                            x33 = np.float32(a[r3 + k + 3] - azp)
                            for j in range(n):
                                y0, y1, y2, y3 = w0[j], w1[j], w2[j], w3[j]
                                o0[j] += np.int32(x00 * y0 + x01 * y1 + x02 * y2 + x03 * y3)
                                o1[j] += np.int32(x10 * y0 + x11 * y1 + x12 * y2 + x13 * y3)
                                o2[j] += np.int32(x20 * y0 + x21 * y1 + x22 * y2 + x23 * y3)
                                o3[j] += np.int32(x30 * y0 + x31 * y1 + x32 * y2 + x33 * y3)
                        else:
                            for j in range(n):
                                o0[j] += np.int32(x00 * w0[j] + x01 * w1[j] + x02 * w2[j] + x03 * w3[j])
                for k in range(KG, K):
                    w0 = bf[bb + k * N + nb:bb + k * N + nb + n]
                    x00 = np.float32(a[r0 + k] - azp)
                    if rows == 4:
                        x10 = np.float32(a[r1 + k] - azp)
                        x20 = np.float32(a[r2 + k] - azp)
                        x30 = np.float32(a[r3 + k] - azp)
                        for j in range(n):
                            y0 = w0[j]
                            o0[j] += np.int32(x00 * y0)
                            o1[j] += np.int32(x10 * y0)
                            o2[j] += np.int32(x20 * y0)
                            o3[j] += np.int32(x30 * y0)
                    else:
                        for j in range(n):
                            o0[j] += np.int32(x00 * w0[j])
            m += rows


def schedule_igemm(ctx: PrepareContext, a, a_off, azp: int, a_dtype, b, b_const, b_off, bzp: int, acc, M, K, N):
    """acc = sum_k (A - azp) (B - bzp) per batch. `b` is the rhs as [K, N] blocks (a tensor/view) or None with
    `b_const` its constant array. int32 results whose products fit float32 exactly use igemm_f32 (vectorised in
    float32, about twice as fast) when there are at least four rows; matrix-vector products keep the rhs in its
    integer type (a quarter of the memory traffic), as do int64 results and wide products."""
    b_dtype = (b_const.dtype if b_const is not None else b.dtype)
    a_range = int(np.iinfo(a_dtype).max - np.iinfo(a_dtype).min)
    b_range = int(np.iinfo(b_dtype).max - np.iinfo(b_dtype).min)
    a_max = max(abs(np.iinfo(a_dtype).min - azp), abs(np.iinfo(a_dtype).max - azp), a_range // 2)
    b_max = max(abs(np.iinfo(b_dtype).min - bzp), abs(np.iinfo(b_dtype).max - bzp), b_range // 2)
    if acc.dtype == np.int32 and a_max * b_max <= 1 << 24 and M >= 4:
        group = 4 if 4 * a_max * b_max <= 1 << 24 else 1
        if b_const is not None:
            bf = ctx.const((np.asarray(b_const, np.int64) - bzp).astype(np.float32).reshape(-1))
        else:
            bf = ctx.temp((int(np.prod(b.shape, dtype=np.int64)),), np.float32)
            ctx.call(offset_to_f32, b, bzp, bf)
        ctx.call(igemm_f32, a, a_off, azp, bf, b_off, acc, M, K, N, group)
        return
    if b_const is not None:
        b = ctx.const(np.asarray(b_const).reshape(-1))
    ctx.call(igemm, a, a_off, azp, b, b_off, bzp, acc, M, K, N)


@njit(cache=True, nogil=True)
def requantize(acc, bias, out, N, mode, qm, qs, fscale, ozp, lo, hi):
    """out[r, n] = clamp(requant(acc[r, n] + bias[n]) + ozp, lo, hi) over the flat [R, N] acc (see module doc)."""
    for r in range(acc.size // N):
        base = r * N
        for n in range(N):
            v = np.int64(acc[base + n]) + np.int64(bias[n])
            if mode == REQUANT_RUY:
                y = multiply_by_quantized_multiplier_ruy(np.int32(v), qm[n], qs[n])
            elif mode == REQUANT_FIXED:
                y = np.int64(multiply_by_quantized_multiplier(np.int32(v), qm[n], qs[n]))
            elif mode == REQUANT_FLOAT:
                y = np.int64(np.int32(round_half_away(np.float64(v) * fscale[n])))
            else:
                y = multiply_by_quantized_multiplier_int64(v, qm[n], qs[n])
            y += ozp
            out[base + n] = min(max(y, lo), hi)


# --- prepare ---------------------------------------------------------------------------------------------------

def channel_scales(ctx: PrepareContext, w, units: int) -> tuple[np.ndarray, bool]:
    """Per-output-channel weight scales (float32 [units]) and whether the weights are per-channel."""
    q = w.quantization
    ctx.check(q.scales.size >= 1, f"weights {w.name!r} are not quantized")
    if q.scales.size > 1:
        ctx.check(q.quantized_dimension == 0,
                  f"per-channel weights must be quantized along dimension 0, got {q.quantized_dimension}")
        ctx.check(q.scales.size == units, f"weights have {q.scales.size} scales for {units} output channels")
        return q.scales.astype(np.float32), True
    return np.full(units, q.scales[0], np.float32), False


def fixed_multipliers(reals) -> tuple[np.ndarray, np.ndarray]:
    """(multiplier, shift) int64 arrays for each real multiplier (TFLite's QuantizeMultiplier)."""
    qm = np.zeros(len(reals), np.int64)
    qs = np.zeros(len(reals), np.int64)
    for i, m in enumerate(reals):
        qm[i], qs[i] = quantize_multiplier(float(m))
    return qm, qs


def schedule_transpose(ctx: PrepareContext, t, rows: int, cols: int):
    """A temp holding the flat transpose of tensor t seen as consecutive [rows, cols] blocks."""
    out = ctx.temp((t.size,), t.dtype)
    ctx.call(transpose_batches, ctx.view(t, (t.size,)), out, rows, cols)
    return out


@kernel("FULLY_CONNECTED")
def FULLY_CONNECTED(ctx: PrepareContext) -> None:
    """FULLY_CONNECTED with quantized weights: integer kernels, or hybrid when the input is float32."""
    x, w, b, out = ctx.input(0), ctx.input(1), ctx.input(2), ctx.output(0)
    if w.spec is not None and w.spec.packed_bits:  # blockwise INT4 / INT2, kept packed
        return prepare_blockwise_fc(ctx, x, w, b, out)
    units, k = w.shape
    ctx.check_dtype(w, np.int8, np.uint8, np.int16)
    if x.dtype == np.float32:
        return _prepare_hybrid_fc(ctx, x, w, b, out, units, k)
    act = ctx.options.get("fused_activation_function", 0)
    ctx.check(act in (ACT_NONE, ACT_RELU, ACT_RELU_N1_TO_1, ACT_RELU6),
              f"fused activation {act} is not supported by quantized FULLY_CONNECTED")
    ctx.check(x.quantization.scales.size >= 1 and out.quantization.scales.size >= 1,
              "quantized FULLY_CONNECTED needs quantization parameters on input and output")
    combos = {(np.int8, np.int8, np.int8), (np.uint8, np.uint8, np.uint8), (np.int16, np.int8, np.int16),
              (np.int16, np.int16, np.int16)}
    combo = (x.dtype.type, w.dtype.type, out.dtype.type)
    ctx.check(combo in combos, f"unsupported type combination input {x.dtype.name}, weights {w.dtype.name}, "
                               f"output {out.dtype.name}")
    scales, per_channel = channel_scales(ctx, w, units)
    ctx.check(not per_channel or x.dtype != np.uint8, "per-channel weights need int8 or int16 input")
    shape, batch = fc_output_shape(ctx, x, units, k)
    ctx.set_output(0, shape, out.dtype)

    bias_type = ctx.options.get("quantized_bias_type", 0)
    if x.dtype == np.int16:
        ctx.check(x.zero_point == 0 and out.zero_point == 0, "int16 input and output need zero point 0")
        ctx.check(bias_type in (0, TYPE_INT32, TYPE_INT64), f"quantized_bias_type {bias_type} must be INT32 or INT64")
    if b is not None:
        ctx.check(b.size == units, f"bias has {b.size} elements, expected {units}")
        wide_ok = x.dtype == np.int16
        ctx.check_dtype(b, *((np.int32, np.int64) if wide_ok else (np.int32,)))
        if bias_type in (TYPE_INT32, TYPE_INT64):
            ctx.check(b.dtype == (np.int64 if bias_type == TYPE_INT64 else np.int32),
                      f"bias type {b.dtype.name} differs from quantized_bias_type")
    wzp = int(w.quantization.zero_points[0]) if w.quantization.zero_points.size else 0
    if per_channel:
        wzp = 0  # per-channel weights are symmetric by spec; TFLite ignores their zero points
    require_per_tensor(ctx, ("input", x), ("output", out))
    in_s, out_s = np.float32(x.scale), np.float32(out.scale)
    if per_channel:
        reals = [np.float64(in_s) * np.float64(s) / np.float64(out_s) for s in scales]
    else:
        prod = np.float64(in_s * scales[0])  # the float32 product, as GetQuantizedConvolutionMultipler computes it
        if b is not None:
            b_s = np.float64(np.float32(b.scale))
            ctx.check(abs(np.float64(in_s) * np.float64(scales[0]) - b_s) / np.float64(out_s) <= 0.02,
                      "bias scale differs from input scale * weights scale")
        reals = [prod / np.float64(out_s)] * units
    if w.dtype == np.int16:
        ctx.check(wzp == 0, "int16 weights need zero point 0")
        mode = REQUANT_FIXED64
    elif x.dtype == np.int16:
        ctx.check(wzp == 0, "int16 input with int8 weights needs weights zero point 0")
        wide_bias = (b is not None and b.dtype == np.int64) or bias_type == TYPE_INT64
        mode = REQUANT_FLOAT if wide_bias else REQUANT_RUY
    else:
        mode = REQUANT_RUY
    qm, qs = fixed_multipliers(reals)
    what = (f"output {out.name!r} (scale {out_s:.6g}; input scale {in_s:.6g}, weights {w.name!r} scale up to "
            f"{float(np.max(scales)):.6g})")
    if mode != REQUANT_FLOAT:
        check_left_shift(ctx, qs, what)
    if mode == REQUANT_FIXED64:
        check_int64_left_shift(ctx, qs, what)
    fscale = np.array([np.float64(in_s) * np.float64(s) / np.float64(out_s) for s in scales], np.float64)
    lo, hi = activation_range_quantized(act, out.dtype, out.scale, out.zero_point)
    o = ctx.output(0)
    if o.size == 0:
        return
    if k == 0:
        return schedule_zero_fill(ctx, o)
    dense = weights_array(ctx, w)
    if x.dtype == np.int8 and w.dtype == np.int8 and wzp == 0 and dense is not None:
        # constant int8 weights: packed once for the int8 GEMM kernels (VNNI or portable); ruy's output stage
        return schedule_qgemm_mt(ctx, ctx.view(x, (batch, 1, 1, k)), np.asarray(dense, np.int8).reshape(units, k),
                                 int(x.zero_point), _bias(ctx, b, units, np.int32), ctx.view(o, (batch, 1, 1, units)),
                                 [1, 1, 1, 1, 0, 0, 1, 1], qm.astype(np.int32), qs.astype(np.int32),
                                 int(out.zero_point), lo, hi)
    acc = ctx.temp((batch * units,), np.int32 if mode == REQUANT_RUY else np.int64)
    zero = np.zeros(1, np.int64)
    if dense is not None:
        w_t, w_const = None, np.ascontiguousarray(dense.T)
    else:
        w_t, w_const = schedule_transpose(ctx, w, units, k), None
    schedule_igemm(ctx, ctx.view(x, (x.size,)), zero, int(x.zero_point), x.dtype, w_t, w_const, zero, wzp, acc,
                   batch, k, units)
    ctx.call(requantize, acc, _bias(ctx, b, units, np.int64), ctx.view(o, (o.size,)), units, mode, qm, qs, fscale,
             int(out.zero_point), lo, hi)


def _bias(ctx: PrepareContext, b, units: int, dtype):
    """The bias argument: zeros without one, a constant bias widened to dtype, else the tensor as it is."""
    if b is None:
        return np.zeros(units, dtype)
    if b.is_const:
        return np.asarray(b.data, dtype).reshape(-1)
    return ctx.view(b, (units,))


def require_per_tensor(ctx: PrepareContext, *named) -> None:
    """Each (label, tensor) carries at most one scale: the official integer GEMM-family kernels read a tensor's
    single scale, which a per-channel quantized activation does not have (0 there: every output would be the output
    zero point), so such a tensor is refused rather than read with its first scale."""
    for what, t in named:
        ctx.check(t.quantization.scales.size <= 1, f"{what} {t.name!r} must be quantized per tensor, not per "
                                                   f"channel ({t.quantization.scales.size} scales)")


def _prepare_hybrid_fc(ctx: PrepareContext, x, w, b, out, units: int, k: int) -> None:
    ctx.check(w.dtype == np.int8, f"hybrid FULLY_CONNECTED needs int8 weights, got {w.dtype.name}")
    ctx.check_dtype(out, np.float32)
    act = ctx.options.get("fused_activation_function", 0)
    ctx.check(act in (ACT_NONE, ACT_RELU, ACT_RELU_N1_TO_1, ACT_RELU6, ACT_TANH, ACT_SIGN_BIT),
              f"fused activation {act} is not supported")
    scales, _ = channel_scales(ctx, w, units)
    shape, batch = fc_output_shape(ctx, x, units, k)
    o = ctx.set_output(0, shape, np.float32)
    if b is not None:
        ctx.check_dtype(b, np.float32)
        ctx.check(b.size == units, f"bias has {b.size} elements, expected {units}")
    dense = weights_array(ctx, w)
    ctx.check(dense is not None, "hybrid FULLY_CONNECTED needs constant weights")
    refuse_minus_128(ctx, f"weights {w.name!r}", dense)
    if o.size == 0:
        return
    if k == 0:
        return schedule_zero_fill(ctx, o)
    bias = ctx.view(b, (units,)) if b is not None else np.zeros(units, np.float32)
    zero = np.zeros(1, np.int64)
    if w.spec is not None and uses_int4_channel_path(w.spec.type_name, batch, k, units):
        # INT4 weights widened at load: the official optimized 4-bit path's arithmetic (fc_blockwise); the value -8,
        # which that path's packing garbles, is read as the reference kernels read it (docs/design/llm.md)
        q, sf, offs = ctx.temp((batch * k,), np.int8), ctx.temp((batch,), np.float32), ctx.temp((batch,), np.int32)
        ctx.call(quantize_rows_4bit, ctx.view(x, (x.size,)), batch, k, q, sf, offs)
        acc = ctx.temp((batch * units,), np.int32)
        # The exact int32 products on the hybrid int8 tiles: q as floats quantizes back to itself there (symmetric,
        # max |q| = 127: scale 127 / 127 = 1), and their epilogue with unit scales and zero bias stores
        # float(sum q * w), exact while |sum| < 2**24; else (or without tiles: portable) schedule_igemm.
        qf, accf = ctx.temp((batch * k,), np.float32), ctx.temp((batch * units,), np.float32)
        ctx.call(int8_as_float, q, qf)
        if k <= INT4_TILE_DOTS_MAX_K and schedule_hybrid(
                ctx, "fc", qf, np.asarray(dense, np.int8).reshape(units, k), np.ones(units, np.float32),
                np.zeros(units, np.float32), accf, rows=batch, act=ACT_NONE, asymmetric=False):
            ctx.call(float_as_int32, accf, acc)
        else:
            schedule_igemm(ctx, q, zero, 0, np.int8, None, np.ascontiguousarray(dense.reshape(units, k).T), zero, 0,
                           acc, batch, k, units)
        ctx.call(int4_channel_finish, acc, sf, offs, scales, bias, int(b is not None), ctx.view(o, (o.size,)),
                 units, act)
        return
    asym = bool(ctx.options.get("asymmetric_quantize_inputs", False))
    if schedule_hybrid(ctx, "fc", ctx.view(x, (x.size,)), np.asarray(dense, np.int8).reshape(units, k), scales, bias,
                       ctx.view(o, (o.size,)), rows=batch, act=act, asymmetric=asym):
        return  # the int8 tiles of the level in force (hybrid_gemm), else the portable loops below
    q, sf, zp = schedule_hybrid_rows(ctx, x, batch, k)
    acc = ctx.temp((batch * units,), np.int32)
    schedule_igemm(ctx, q, zero, 0, np.int8, None, np.ascontiguousarray(dense.T), zero, 0, acc, batch, k, units)
    row_sums = dense.sum(axis=1, dtype=np.int64).astype(np.int32)
    ctx.call(hybrid_fc_finish, acc, sf, zp, row_sums, scales, bias, ctx.view(o, (o.size,)), units, act)
    ctx.call(hybrid_fc_zero_input, ctx.view(x, (x.size,)), bias, ctx.view(o, (o.size,)), units, act)
