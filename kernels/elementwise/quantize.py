"""QUANTIZE and DEQUANTIZE, bit-exact with TFLite's builtin kernels.

QUANTIZE float32 -> int8/uint8/int16 divides by the scale in double and rounds half away from zero (the optimized
AffineQuantize); per-channel output scales divide in float (PerChannelQuantize). Integer inputs are requantized
with multiply_by_quantized_multiplier: an 8/16-bit input is tabulated over all its values, so the kernel is a
table lookup; int32 inputs are requantized per element.

DEQUANTIZE int8/uint8/int16 computes float(double(scale) * (q - zero_point)) per tensor and scale * (q - zero_point)
in float per channel; float16 converts exactly. Constant inputs (float16 or int8 weights) are converted once at
prepare time and copied at invoke.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base import fixedpoint as fx
from lite_numba.kernels.base.copy import write_const
from lite_numba.kernels.elementwise.arithmetic_quantized import all_values, raw_view_dtype, schedule_lookup
from numba import njit

from lite_numba.ops import PrepareContext, Tensor, kernel

_INT_OUT = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16))


@njit(cache=True)
def _to_int32(r):
    """Float -> int32 as x86 converts: NaN and out-of-range values give INT32_MIN."""
    if not (-2147483648.0 <= r <= 2147483647.0):
        return np.int64(-2147483648)
    return np.int64(r)


@njit(cache=True, nogil=True)
def quantize_f32(x, out, scale, reciprocal, zero_point, lo, hi, split):
    """out = clamp(round(x / scale) + zero_point) (out is a raw unsigned view).

    Elements before `split` (the official kernel's vector blocks) multiply by the float reciprocal and round half
    to even; the rest divide in double and round half away from zero. The zero point is added with int32
    wrap-around, as there."""
    r32 = np.float32(reciprocal)
    for i in range(x.size):
        if i < split:
            q = _to_int32(np.rint(x[i] * r32))
        else:
            q = _to_int32(fx.round_half_away(np.float64(x[i]) / scale))
        q = np.int64(np.int32(q + zero_point))
        out[i] = min(max(q, lo), hi)


@njit(cache=True, nogil=True)
def quantize_per_channel_f32(x, out, scales, zero_points, lo, hi):
    """x, out: (outer, channels, inner); q = clamp(round(x / scale[c]) + zero_point[c]) in float."""
    n0, nc, n1 = x.shape
    for a in range(n0):
        for c in range(nc):
            s = scales[c]
            z = zero_points[c]
            for b in range(n1):
                q = np.int64(np.int32(_to_int32(fx.round_half_away(x[a, c, b] / s)) + z))
                out[a, c, b] = min(max(q, lo), hi)


@njit(cache=True, nogil=True)
def requantize_int32(x, out, multiplier, shift, input_zero_point, output_zero_point, lo, hi):
    """out = clamp(MultiplyByQuantizedMultiplier(x - zin) + zout) for int32 x (out is a raw unsigned view)."""
    for i in range(x.size):
        v = np.int64(np.int32(np.int64(x[i]) - input_zero_point))
        q = fx.multiply_by_quantized_multiplier(v, multiplier, shift) + output_zero_point
        out[i] = min(max(q, lo), hi)


@njit(cache=True, nogil=True)
def lookup_per_channel(x, tables, out):
    """x: (outer, channels, inner) raw indices; out[a, c, b] = tables[c, x[a, c, b]]."""
    n0, nc, n1 = x.shape
    for a in range(n0):
        for c in range(nc):
            for b in range(n1):
                out[a, c, b] = tables[c, x[a, c, b]]


def _channel_layout(ctx: PrepareContext, t: Tensor) -> tuple[int, int, int, int]:
    """(quantized dimension, outer, channels, inner) of a per-channel quantized tensor."""
    q = t.quantization
    ctx.check(t.ndim > 0, f"per-channel tensor {t.name!r} must have rank >= 1")
    d = q.quantized_dimension
    ctx.check(0 <= d < t.ndim, f"quantized dimension {d} is out of range for {t.name!r} of rank {t.ndim}")
    ctx.check(q.scales.size == t.shape[d],
              f"{t.name!r} has {q.scales.size} scales for {t.shape[d]} channels (dimension {d})")
    outer = int(np.prod(t.shape[:d], dtype=np.int64))
    inner = int(np.prod(t.shape[d + 1:], dtype=np.int64))
    return d, outer, t.shape[d], inner


def _channel_zero_points(t: Tensor) -> np.ndarray:
    q = t.quantization
    z = np.asarray(q.zero_points, np.int64)
    return z if z.size == q.scales.size else np.full(q.scales.size, int(z[0]) if z.size else 0, np.int64)


@kernel("QUANTIZE")
def QUANTIZE(ctx: PrepareContext) -> None:
    """float32 -> int8/uint8/int16 (per tensor or per channel); requantize between int8/uint8/int16/int32."""
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    out = ctx.set_output(0, x.shape)
    oq = out.quantization
    ctx.check(oq.scales.size >= 1 and float(oq.scales.min()) > 0,
              f"output {out.name!r} has no quantization parameters")
    info = np.iinfo(out.dtype) if out.dtype.kind in "iu" else None
    if x.dtype == np.float32:
        ctx.check(out.dtype in _INT_OUT, f"float32 input cannot be quantized to {out.dtype.name}")
        lo, hi = int(info.min), int(info.max)
        if out.size == 0:
            return
        if oq.per_channel:
            _, outer, nc, inner = _channel_layout(ctx, out)
            ctx.call(quantize_per_channel_f32, ctx.view(x, (outer, nc, inner)),
                     ctx.view(out, (outer, nc, inner), raw_view_dtype(out.dtype)),
                     np.asarray(oq.scales, np.float32), _channel_zero_points(out), lo, hi)
        else:
            ctx.call(quantize_f32, ctx.view(x, (x.size,)), ctx.view(out, (out.size,), raw_view_dtype(out.dtype)),
                     out.scale, float(np.float32(1.0 / out.scale)), out.zero_point, lo, hi, x.size - x.size % 8)
        return
    allowed = {np.dtype(np.int8): _INT_OUT, np.dtype(np.uint8): _INT_OUT,
               np.dtype(np.int16): (np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32)),
               np.dtype(np.int32): (np.dtype(np.int8), np.dtype(np.int16))}
    ctx.check(x.dtype in allowed, f"input type {x.dtype.name} is not supported")
    ctx.check(out.dtype in allowed[x.dtype], f"cannot requantize {x.dtype.name} to {out.dtype.name}")
    ctx.check(x.quantization.scales.size >= 1 and x.scale > 0, f"input {x.name!r} has no quantization parameters")
    ctx.check(not oq.per_channel and not x.quantization.per_channel, "requantization must be per tensor")
    if x.dtype == np.int16 and out.dtype == np.int16:
        ctx.check(x.zero_point == 0 and out.zero_point == 0, "int16 input and output must have zero point 0")
    q, sh = fx.quantize_multiplier(float(np.float64(x.scale) / np.float64(out.scale)))
    # the official Requantize shifts the int32 value left by `sh` in C (and SSE lanes): undefined past 31 bits
    fx.check_left_shift(ctx, sh, f"requantizing input {x.name!r} (scale {x.scale:.6g}) to output {out.name!r} "
                                 f"(scale {out.scale:.6g})")
    lo, hi = int(info.min), int(info.max)
    if x.dtype == np.int32:
        if out.size:
            ctx.call(requantize_int32, ctx.view(x, (x.size,)), ctx.view(out, (out.size,), raw_view_dtype(out.dtype)),
                     q, sh, x.zero_point, out.zero_point, lo, hi)
        return
    values = fx.wrap_array(all_values(x.dtype) - x.zero_point, 32)
    table = np.clip(fx.multiply_by_quantized_multiplier_array(values, q, sh) + out.zero_point, lo, hi)
    if x.dtype.itemsize == 1 and out.dtype.itemsize == 1:
        # 8-bit <-> 8-bit requantization runs 16-element NEON blocks (rounding half up) before a scalar tail
        block = np.clip(fx.multiply_by_quantized_multiplier_simd_array(values, q, sh) + out.zero_point, lo, hi)
        schedule_lookup(ctx, x, out, block.astype(out.dtype), table.astype(out.dtype), 16)
    else:
        schedule_lookup(ctx, x, out, table.astype(out.dtype))


def dequantize_tables(x: Tensor, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(vector-block, scalar-tail) float32 results of per-tensor DEQUANTIZE for the given quantized values: the
    official kernel computes float(q) * scale + float(-zero_point * scale) in float in blocks of 8 and
    float(double(scale) * (q - zero_point)) for the tail."""
    scale = np.float64(x.scale)
    q = values.astype(np.int64)
    block = q.astype(np.float32) * np.float32(scale) + np.float32(-x.zero_point * scale)
    tail = (scale * (q - x.zero_point)).astype(np.float32)
    return block, tail


def dequantize_values(x: Tensor, data: np.ndarray) -> np.ndarray:
    """The float32 values of quantized (or float16) data, as the official DEQUANTIZE computes them."""
    if x.dtype == np.float16:
        return data.astype(np.float32)
    q = x.quantization
    if q.per_channel:
        shape = [1] * data.ndim
        shape[q.quantized_dimension] = -1
        scales = np.asarray(q.scales, np.float32).reshape(shape)
        zps = _channel_zero_points(x).reshape(shape)
        return scales * (data.astype(np.int64) - zps).astype(np.float32)
    flat = data.reshape(-1)
    block, tail = dequantize_tables(x, flat)
    split = flat.size - flat.size % 8
    return np.concatenate([block[:split], tail[split:]]).reshape(data.shape)


@kernel("DEQUANTIZE")
def DEQUANTIZE(ctx: PrepareContext) -> None:
    """int8/uint8/int16 (per tensor; int8/uint8 per channel) and float16 -> float32."""
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check_dtype(x, np.int8, np.uint8, np.int16, np.float16)
    out = ctx.set_output(0, x.shape, np.float32)
    q = x.quantization
    if x.dtype != np.float16:
        ctx.check(q.scales.size >= 1, f"input {x.name!r} has no quantization parameters")
        if x.dtype == np.int16:
            ctx.check(x.zero_point == 0, "int16 input must have zero point 0")
        if q.per_channel:
            ctx.check(x.dtype != np.int16, "per-channel dequantization supports int8 and uint8 only")
            _channel_layout(ctx, x)
    if out.size == 0:
        return
    if x.is_const:
        # weights: convert once, copy at invoke (as the official kernel keeps them dequantized)
        values = dequantize_values(x, np.asarray(x.data).reshape(x.shape))
        write_const(ctx, out, values)
        return
    if x.dtype == np.float16:
        raw = np.arange(1 << 16, dtype=np.int64).astype(np.uint16)
        schedule_lookup(ctx, x, out, raw.view(np.float16).astype(np.float32))
        return
    if q.per_channel:
        _, outer, nc, inner = _channel_layout(ctx, x)
        values = all_values(x.dtype)
        scales = np.asarray(q.scales, np.float32)[:, None]
        tables = scales * (values[None, :] - _channel_zero_points(x)[:, None]).astype(np.float32)
        ctx.call(lookup_per_channel, ctx.view(x, (outer, nc, inner), raw_view_dtype(x.dtype)),
                 np.ascontiguousarray(tables, np.float32), ctx.view(out, (outer, nc, inner)))
        return
    block, tail = dequantize_tables(x, all_values(x.dtype))
    schedule_lookup(ctx, x, out, block, tail, 8)
