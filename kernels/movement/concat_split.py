"""CONCATENATION, PACK, SPLIT, SPLIT_V, UNPACK: block copies of raw words along one axis.

Each input (or output) is a (outer, rows of the axis x inner) block of the concatenated tensor, so every one is a
single 2-D strided copy. Quantized CONCATENATION requantizes the inputs whose scale or zero point differ from the
output's, with TFLite's float formula (ConcatenationWithScaling), and applies a fused activation as a clamp.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.activation import ACT_NONE, float_activation_range, quantized_activation_range
from lite_numba.kernels.base.shapes import normalize_axis
from lite_numba.kernels.movement.transpose import schedule_strided_copy
from numba import njit

from lite_numba.ops import PrepareContext, Tensor, kernel


@njit(cache=True, inline="always")
def round_half_away(v):
    """TfLiteRound (std::round) of a float32: half away from zero (exact in float64)."""
    f = np.float64(v)
    r = np.floor(abs(f) + 0.5)
    return np.int64(r) if f >= 0 else -np.int64(r)


@njit(cache=True, nogil=True)
def concat_requant(x, out, rows, n, row_out, off, scale, bias, zp, lo, hi):
    """out[r, off + j] = clamp(round(x[r, j] * scale + bias) + zp) in float32, like ConcatenationWithScaling."""
    s = np.float32(scale)
    b = np.float32(bias)
    for r in range(rows):
        src = x[r * n:(r + 1) * n]
        dst = out[r * row_out + off:r * row_out + off + n]
        for j in range(n):
            q = round_half_away(np.float32(src[j]) * s + b) + zp
            dst[j] = min(max(q, lo), hi)


@njit(cache=True, nogil=True)
def clamp_inplace(out, lim):
    """out = min(max(out, lim[0]), lim[1]) (a fused activation)."""
    lo, hi = lim[0], lim[1]
    for i in range(out.size):
        out[i] = min(max(out[i], lo), hi)


def is_quantized(t: Tensor) -> bool:
    return t.quantization.scales.size > 0 and t.dtype in (np.int8, np.uint8, np.int16)


def axis_blocks(shape, axis: int) -> tuple[int, int]:
    """(outer, inner) element counts around `axis`."""
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    return outer, inner


def schedule_activation(ctx: PrepareContext, out: Tensor, act: int) -> None:
    """Clamp the output in place for a fused activation (float32 or quantized outputs)."""
    if act == ACT_NONE:
        return
    if out.dtype == np.float32:
        lo, hi = float_activation_range(ctx, act)
        lim = np.array([lo, hi], np.float32)
    elif is_quantized(out):
        lim = np.array(quantized_activation_range(ctx, act, out), out.dtype)
    else:
        ctx.fail(f"fused activation on {out.dtype.name} output is not supported")
    ctx.call(clamp_inplace, ctx.view(out, (out.size,)), lim)


@kernel("CONCATENATION")
def CONCATENATION(ctx: PrepareContext) -> None:
    """Concatenate inputs along `axis`; quantized inputs with other scales are requantized; fused activation."""
    ctx.check(ctx.num_inputs >= 1, "expected at least one input")
    ctx.check_num(outputs=1)
    inputs = ctx.inputs
    ctx.check(all(t is not None for t in inputs), "an input is missing")
    t0 = inputs[0]
    rank = t0.ndim
    axis = normalize_axis(ctx, int(ctx.options.get("axis", 0)), rank)
    act = int(ctx.options.get("fused_activation_function", 0) or 0)
    total = 0
    for k, t in enumerate(inputs):
        ctx.check(t.dtype == t0.dtype, f"input {k} has type {t.dtype.name}, expected {t0.dtype.name}")
        ctx.check(t.ndim == rank, f"input {k} has rank {t.ndim}, expected {rank}")
        for d in range(rank):
            ctx.check(d == axis or t.shape[d] == t0.shape[d],
                      f"input {k} has shape {list(t.shape)}, incompatible with {list(t0.shape)} outside axis {axis}")
        total += t.shape[axis] if rank else 1
    shape = list(t0.shape)
    if rank:
        shape[axis] = total
    else:  # scalars concatenate into a vector
        shape = [total]
    out = ctx.set_output(0, shape, t0.dtype)
    outer, inner = axis_blocks(shape, axis)
    row_out = total * inner
    quantized = is_quantized(out)
    if out.dtype == np.int16 and quantized:
        # TFLite's int16 concatenation is symmetric and copies values as they are
        for t in inputs + [out]:
            ctx.check(t.zero_point == 0, f"int16 tensor {t.name!r} must have zero point 0")
    off = 0
    for t in inputs:
        n = (t.shape[axis] if rank else 1) * inner
        rescale = quantized and out.dtype != np.int16 and (
            t.zero_point != out.zero_point or np.float32(t.scale) != np.float32(out.scale))
        if rescale:
            ctx.check(out.scale > 0, f"output {out.name!r} has no quantization scale")
            scale = np.float32(t.scale) * (np.float32(1.0) / np.float32(out.scale))
            bias = np.float32(-t.zero_point) * scale
            lo, hi = quantized_activation_range(ctx, act, out)
            ctx.call(concat_requant, ctx.view(t, (t.size,)), ctx.view(out, (out.size,)), outer, n, row_out, off,
                     float(scale), float(bias), out.zero_point, lo, hi)
        else:
            schedule_strided_copy(ctx, t, out, (outer, n), (n, 1), (row_out, 1), 0, off)
        off += n
    schedule_activation(ctx, out, act)


@kernel("PACK")
def PACK(ctx: PrepareContext) -> None:
    """Stack `values_count` same-shape inputs along a new axis."""
    ctx.check_num(outputs=1)
    n = int(ctx.options.get("values_count", ctx.num_inputs))
    ctx.check(ctx.num_inputs == n and n >= 1, f"values_count {n} differs from the {ctx.num_inputs} inputs")
    inputs = ctx.inputs
    ctx.check(all(t is not None for t in inputs), "an input is missing")
    t0 = inputs[0]
    axis = normalize_axis(ctx, int(ctx.options.get("axis", 0)), t0.ndim + 1)
    for k, t in enumerate(inputs):
        ctx.check(t.dtype == t0.dtype and t.shape == t0.shape,
                  f"input {k} is {t.dtype.name}{list(t.shape)}, expected {t0.dtype.name}{list(t0.shape)}")
    shape = list(t0.shape[:axis]) + [n] + list(t0.shape[axis:])
    out = ctx.set_output(0, shape, t0.dtype)
    for k, t in enumerate(inputs):
        ctx.check(t.zero_point == out.zero_point and np.float32(t.scale) == np.float32(out.scale),
                  f"input {k} quantization differs from the output's")
    outer, inner = axis_blocks(shape, axis)
    for k, t in enumerate(inputs):
        schedule_strided_copy(ctx, t, out, (outer, inner), (inner, 1), (n * inner, 1), 0, k * inner)


def schedule_split(ctx: PrepareContext, x: Tensor, axis: int, sizes: list[int]) -> None:
    """Set output k to x's slice of `sizes[k]` rows along axis and schedule the copies."""
    outer, inner = axis_blocks(x.shape, axis)
    row_in = x.shape[axis] * inner
    off = 0
    for k, s in enumerate(sizes):
        shape = list(x.shape)
        shape[axis] = s
        out = ctx.set_output(k, shape, x.dtype)
        schedule_strided_copy(ctx, x, out, (outer, s * inner), (row_in, 1), (s * inner, 1), off, 0)
        off += s * inner


def scalar_axis(ctx: PrepareContext, i: int, rank: int) -> int:
    t = ctx.input(i)
    ctx.check(t.dtype in (np.int32, np.int64) and t.size == 1, f"axis must be one int32, got {t.dtype.name}"
              f"{list(t.shape)}")
    return normalize_axis(ctx, int(np.asarray(ctx.value(i)).reshape(-1)[0]), rank)


@kernel("SPLIT")
def SPLIT(ctx: PrepareContext) -> None:
    """Split input 1 into `num_splits` equal parts along the axis given by input 0."""
    ctx.check_num(inputs=2)
    n = int(ctx.options.get("num_splits", ctx.num_outputs))
    ctx.check(ctx.num_outputs == n and n > 0, f"num_splits {n} differs from the {ctx.num_outputs} outputs")
    x = ctx.input(1)
    ctx.check(x.ndim >= 1, "the input to split is a scalar (rank 0): there is no axis to split along")
    axis = scalar_axis(ctx, 0, x.ndim)
    ctx.check(x.shape[axis] % n == 0, f"dimension {axis} of size {x.shape[axis]} does not split evenly in {n}")
    schedule_split(ctx, x, axis, [x.shape[axis] // n] * n)


@kernel("SPLIT_V")
def SPLIT_V(ctx: PrepareContext) -> None:
    """Split input 0 along axis (input 2) into parts of size_splits (input 1; one entry may be -1)."""
    ctx.check_num(inputs=3)
    x = ctx.input(0)
    st = ctx.input(1)
    ctx.check(st.dtype in (np.int32, np.int64) and st.ndim == 1,
              f"size_splits must be a 1-D int32/int64 tensor, got {st.dtype.name}{list(st.shape)}")
    ctx.check(st.size == ctx.num_outputs, f"size_splits has {st.size} entries for {ctx.num_outputs} outputs")
    ctx.check(x.ndim >= 1, "the input to split is a scalar (rank 0): there is no axis to split along")
    axis = scalar_axis(ctx, 2, x.ndim)
    sizes = [int(v) for v in np.asarray(ctx.value(1)).reshape(-1)]
    unknown = [k for k, s in enumerate(sizes) if s == -1]
    ctx.check(len(unknown) <= 1, f"size_splits {sizes} has more than one -1")
    ctx.check(all(s >= 0 for k, s in enumerate(sizes) if k not in unknown), f"size_splits {sizes} has a negative size")
    known = sum(s for k, s in enumerate(sizes) if k not in unknown)
    n = x.shape[axis]
    if unknown:
        ctx.check(known <= n, f"size_splits {sizes} sum above dimension {axis} of size {n}")
        sizes[unknown[0]] = n - known
    else:
        ctx.check(known == n, f"size_splits {sizes} must sum to dimension {axis} of size {n}")
    schedule_split(ctx, x, axis, sizes)


@kernel("UNPACK")
def UNPACK(ctx: PrepareContext) -> None:
    """Split the input along `axis` into `num` outputs with that axis removed."""
    ctx.check_num(inputs=1)
    x = ctx.input(0)
    ctx.check(x.ndim >= 1, "input must have rank 1 or more")
    axis = normalize_axis(ctx, int(ctx.options.get("axis", 0)), x.ndim)
    num = int(ctx.options.get("num", ctx.num_outputs) or ctx.num_outputs)
    ctx.check(num == x.shape[axis] == ctx.num_outputs,
              f"num {num}, dimension {axis} of size {x.shape[axis]} and {ctx.num_outputs} outputs differ")
    outer, inner = axis_blocks(x.shape, axis)
    shape = list(x.shape[:axis]) + list(x.shape[axis + 1:])
    for k in range(num):
        out = ctx.set_output(k, shape, x.dtype)
        ctx.check(out.zero_point == x.zero_point and np.float32(out.scale) == np.float32(x.scale),
                  f"output {k} quantization differs from the input's")
        schedule_strided_copy(ctx, x, out, (outer, inner), (num * inner, 1), (inner, 1), k * inner, 0)


__all__ = ["CONCATENATION", "PACK", "SPLIT", "SPLIT_V", "UNPACK"]
