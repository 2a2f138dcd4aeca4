"""Reductions: MEAN, SUM, REDUCE_PROD, REDUCE_MAX, REDUCE_MIN, REDUCE_ANY, REDUCE_ALL; ARG_MAX, ARG_MIN; CUMSUM.

Reduced axes are resolved as TFLite does (negative axes wrap, repeats are ignored), then size-1 dimensions are
dropped and neighbouring dimensions that are both reduced or both kept are merged. When the reduced dimensions
form one block, the input is seen as (outer, reduced, inner); otherwise a general loop walks the input (padded to
rank 6) in memory order and accumulates into output offsets. Either way every output accumulates its inputs in
increasing input order, the order of TFLite's optimized ReduceImpl, so float sums match bit for bit.

Quantized MEAN and SUM sum into an int32 scratch and then requantize with the rounding of the official optimized
builtin path for each case (see `_prepare_quantized_mean_sum`). Two official code paths are replayed exactly
because they round differently from the scalar code: the SSE-translated NEON blocks of Mean4D (16 channels at a
time, ties rounded up) and Eigen's 4-lane float sum of a MEAN over the last axis.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.fixedpoint import (
    INT32_MAX,
    check_int64_left_shift,
    check_left_shift,
    quantize_multiplier,
)
from lite_numba.kernels.base.vecmath import eigen_sum_f32
from lite_numba.kernels.reduce.reduce_loops import (
    ARG_LOOPS,
    REDUCERS,
    cumsum,
    fill,
    fill_copy,
    mean_float,
    mean_int,
    qprod3,
    qprod_finish,
    qprod_nd,
    requantize_float,
    requantize_mbqm,
    requantize_mean4d,
)
from numba import njit

from lite_numba.ops import PrepareContext, kernel

MAX_RANK = 6


# --- finishing steps ----------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def mean_last_axis_f32(x, out, outer, n):
    """Float MEAN over the last (merged) axis, summed like the official kernel's Eigen colwise().sum() with SSE
    packets of 4: from the first 16-byte aligned element of each row (the tensor base is aligned), two packet
    accumulators, a horizontal (p0 + p2) + (p1 + p3), then the unaligned head and the tail elements
    (vecmath.eigen_sum_f32, SOFTMAX's sums too)."""
    d = np.float32(n)
    for j in range(outer):
        out[j] = eigen_sum_f32(x, j * n, n, j * n) / d


def simd_channels(depth: int, num_threads: int, lanes: int = 16, min_per_thread: int = 8) -> np.ndarray:
    """Which channels an optimized depth-parallel kernel handles in `lanes`-wide vector blocks: depth is split
    into as many tasks as TFLite would start (depth // min_per_thread, capped by the thread count) and each task
    runs vector blocks from its start while `lanes` channels remain, then scalar code."""
    tasks = max(depth // min_per_thread, 1)
    tasks = max(min(tasks, num_threads), 1)
    flags = np.zeros(depth, np.uint8)
    start = 0
    for i in range(tasks):
        end = start + (depth - start) // (tasks - i)
        d = start
        while d <= end - lanes:
            flags[d:d + lanes] = 1
            d += lanes
        start = end
    return flags


# --- axes and loop plans --------------------------------------------------------------------------------------


def resolve_axes(ctx: PrepareContext, rank: int) -> list[int]:
    """The reduction axes from input 1: negative axes wrap, repeats are dropped, order of first appearance."""
    axis_t = ctx.input(1)
    ctx.check(axis_t is not None, "the axis input is missing")
    ctx.check_dtype(axis_t, np.int32)
    values = np.asarray(ctx.value(1)).reshape(-1)
    if rank == 0:
        return []
    axes: list[int] = []
    for v in values:
        a = int(v) + rank if int(v) < 0 else int(v)
        ctx.check(0 <= a < rank, f"axis {int(v)} is out of range for input rank {rank}")
        if a not in axes:
            axes.append(a)
    return axes


def reduced_shape(shape: tuple[int, ...], axes: list[int], keep_dims: bool) -> tuple[int, ...]:
    """The output shape: reduced dimensions become 1 (keep_dims) or disappear."""
    if keep_dims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def loop_plan(ctx: PrepareContext, shape: tuple[int, ...], axes: list[int]):
    """("3d", outer, n, inner) when the reduced dims (size-1 dims ignored) form one block, else
    ("nd", shape6, out_strides6). Assumes no zero-size dimension."""
    merged: list[list] = []
    for i, d in enumerate(shape):
        if d == 1:
            continue
        red = i in axes
        if merged and merged[-1][1] == red:
            merged[-1][0] *= d
        else:
            merged.append([d, red])
    blocks = [k for k, (_, red) in enumerate(merged) if red]
    if len(blocks) <= 1:
        if not blocks:
            return "3d", int(np.prod([d for d, _ in merged], dtype=np.int64)), 1, 1
        k = blocks[0]
        outer = int(np.prod([d for d, _ in merged[:k]], dtype=np.int64))
        inner = int(np.prod([d for d, _ in merged[k + 1:]], dtype=np.int64))
        return "3d", outer, merged[k][0], inner
    ctx.check(len(merged) <= MAX_RANK,
              f"reducing axes {axes} of shape {list(shape)} needs {len(merged)} alternating dimensions "
              f"(at most {MAX_RANK} supported)")
    merged = [[1, False]] * (MAX_RANK - len(merged)) + merged
    shp = np.array([d for d, _ in merged], np.int64)
    ostr = np.zeros(MAX_RANK, np.int64)
    acc = 1
    for k in range(MAX_RANK - 1, -1, -1):
        if not merged[k][1]:
            ostr[k] = acc
            acc *= merged[k][0]
    return "nd", shp, ostr


def schedule_reduce(ctx: PrepareContext, name: str, x, out, init, plan) -> None:
    """Schedule the reduction `name` of x into out (a Tensor or temp, any accumulator dtype), init typed as out."""
    reduce3, reduce_nd = REDUCERS[name]
    xf = ctx.view(x, (x.size,))
    of = ctx.view(out, (out.size,))
    if plan[0] == "3d":
        ctx.call(reduce3, xf, of, init, plan[1], plan[2], plan[3])
    else:
        ctx.call(reduce_nd, xf, of, init, plan[1], plan[2])


# --- prepares ---------------------------------------------------------------------------------------------------


def _common(ctx: PrepareContext):
    """Validate a reducer node; resolve axes and set the output shape. Returns (x, out, axes, plan or None)."""
    ctx.check_num(inputs=2, outputs=1)
    x = ctx.input(0)
    axes = resolve_axes(ctx, x.ndim)
    shape = reduced_shape(x.shape, axes, bool(ctx.options.get("keep_dims", False)))
    out = ctx.set_output(0, shape)
    ctx.check(out.dtype == x.dtype, f"output type {out.dtype.name} differs from input type {x.dtype.name}")
    plan = loop_plan(ctx, x.shape, axes) if x.size else None
    return x, out, axes, plan


def _is_quantized(t) -> bool:
    return t.dtype in (np.int8, np.uint8, np.int16) and t.quantization.scales.size > 0


def _neutral(name: str, dtype) -> np.ndarray:
    dt = np.dtype(dtype)
    if name == "sum":
        # -0.0 + x == x for every float x (TFLite starts from the first element, not from +0.0)
        v = -0.0 if dt.kind == "f" else 0
    elif name == "prod":
        v = 1
    elif name == "max":
        v = -np.inf if dt.kind == "f" else (False if dt.kind == "b" else np.iinfo(dt).min)
    elif name == "min":
        v = np.inf if dt.kind == "f" else (True if dt.kind == "b" else np.iinfo(dt).max)
    elif name == "any":
        v = False
    else:
        v = True
    return np.array([v], dt)


def _empty_fill(name: str, dtype) -> np.ndarray:
    """What TFLite writes for reductions of an empty input (its neutral elements; lowest()/max() for max/min)."""
    dt = np.dtype(dtype)
    if name == "sum":
        return np.zeros(1, dt)
    if name in ("max", "min") and dt.kind == "f":
        fi = np.finfo(dt)
        return np.array([fi.min if name == "max" else fi.max], dt)
    return _neutral(name, dt)


def generic_reducer(op_name: str, name: str, dtypes):
    """A plain reduction (no requantization): SUM, REDUCE_PROD, REDUCE_MAX, REDUCE_MIN, REDUCE_ANY, REDUCE_ALL."""

    def prepare(ctx: PrepareContext) -> None:
        x, out, axes, plan = _common(ctx)
        ctx.check_dtype(x, *dtypes)
        if name in ("max", "min") and _is_quantized(x):
            ctx.check(x.scale == out.scale and x.zero_point == out.zero_point,
                      f"input and output quantization differ (scale {x.scale} vs {out.scale}, "
                      f"zero point {x.zero_point} vs {out.zero_point})")
        if out.size == 0:
            return
        if x.size == 0:
            ctx.call(fill, ctx.view(out, (out.size,)), _empty_fill(name, x.dtype))
            return
        schedule_reduce(ctx, name, x, out, _neutral(name, x.dtype), plan)

    return kernel(op_name)(prepare)


@kernel("SUM")
def SUM(ctx: PrepareContext) -> None:
    """float32/int32/int64 sums (wrapping integers); int8/uint8/int16 sums are requantized."""
    x = ctx.input(0)
    if x is not None and x.dtype in (np.int8, np.uint8, np.int16):
        return _prepare_quantized_mean_sum(ctx, compute_sum=True)
    return _SUM_PLAIN.prepare(ctx)


_SUM_PLAIN = generic_reducer("SUM", "sum", (np.float32, np.int32, np.int64))


@kernel("MEAN")
def MEAN(ctx: PrepareContext) -> None:
    """float32 means (float32 sum / count); int32/int64 means truncate; int8/uint8/int16 means are requantized."""
    x = ctx.input(0)
    if x is not None and x.dtype in (np.int8, np.uint8, np.int16):
        return _prepare_quantized_mean_sum(ctx, compute_sum=False)
    x, out, axes, plan = _common(ctx)
    ctx.check_dtype(x, np.float32, np.int32, np.int64)
    if out.size == 0:
        return
    of = ctx.view(out, (out.size,))
    if x.size == 0:
        # TFLite fills the output with quiet_NaN<T>() (0 for integers)
        ctx.call(fill, of, np.array([np.nan if x.dtype.kind == "f" else 0], x.dtype))
        return
    n = x.size // out.size
    if x.dtype == np.float32 and plan[0] == "3d" and plan[3] == 1 and plan[1] > 1 and plan[2] > 1:
        # only the last of several (merged) dimensions is reduced: TFLite sums the rows with Eigen
        ctx.call(mean_last_axis_f32, ctx.view(x, (x.size,)), of, plan[1], plan[2])
    elif x.dtype == np.float32:
        schedule_reduce(ctx, "sum", x, out, _neutral("sum", np.float32), plan)
        ctx.call(mean_float, of, n)
    else:
        acc = ctx.temp((out.size,), np.int64)
        schedule_reduce(ctx, "sum", x, acc, np.zeros(1, np.int64), plan)
        ctx.call(mean_int, acc, of, n)


def _prepare_quantized_mean_sum(ctx: PrepareContext, compute_sum: bool) -> None:
    """int8/uint8/int16 MEAN and SUM: int32 sums, then the official optimized builtin's requantization:

    - SUM (all three types): optimized QuantizedMeanOrSum, float32 maths:
      round(sum * (s_in / s_out) + (-zp_in * (s_in / s_out) * n)) + zp_out;
    - MEAN int8/uint8 with keep_dims over axes {1, 2} of a 4-D input: optimized Mean4D,
      MultiplyByQuantizedMultiplier(sum, QuantizeMultiplier(s_in / (n * s_out)))
      + (zp_out - round(zp_in * s_in / s_out));
    - other MEAN: reference QuantizedMeanOrSum, MultiplyByQuantizedMultiplier(sum - zp_in * n, multiplier of
      s_in / s_out with 1/n folded in by (multiplier << k) / n, shift - k with k = floor(log2 n) clamped).
    """
    x, out, axes, plan = _common(ctx)
    ctx.check(_is_quantized(x) and _is_quantized(out),
              f"{x.dtype.name} input and output must be quantized (scale and zero point)")
    if x.dtype == np.int16:
        ctx.check(x.zero_point == 0 and out.zero_point == 0,
                  f"int16 zero points must be 0, got {x.zero_point} and {out.zero_point}")
    if out.size == 0:
        return
    of = ctx.view(out, (out.size,))
    info = np.iinfo(x.dtype)
    lo, hi = int(info.min), int(info.max)
    if x.size == 0:
        ctx.call(fill, of, np.zeros(1, x.dtype))
        return
    n = x.size // out.size
    s_in, s_out = np.float32(x.scale), np.float32(out.scale)
    zp_in, zp_out = int(x.zero_point), int(out.zero_point)
    acc = ctx.temp((out.size,), np.int32)
    schedule_reduce(ctx, "sum", x, acc, np.zeros(1, np.int32), plan)
    if compute_sum:
        scale = np.float32(s_in / s_out)
        bias = np.float32(np.float32(-zp_in) * scale) * np.float32(n)
        ctx.call(requantize_float, acc, of, float(scale), float(bias), zp_out, lo, hi)
        return
    hw_mean = (x.dtype in (np.int8, np.uint8) and ctx.options.get("keep_dims", False) and x.ndim == 4
               and sorted(axes) == [1, 2] and len(axes) == 2)
    if hw_mean:
        temp = np.float32(np.float32(zp_in) * s_in) / s_out
        temp = temp + np.float32(0.5) if temp > 0 else temp - np.float32(0.5)
        # static_cast<int32_t>(temp) is undefined in C++ outside int32 (the official answer is then garbage)
        ctx.check(bool(-2.0 ** 31 <= temp < 2.0 ** 31),
                  f"input {x.name!r} zero point {zp_in} x scale {float(s_in):.6g} over output {out.name!r} scale "
                  f"{float(s_out):.6g} is {float(temp):.6g}, outside int32: the int8 MEAN output offset cannot be "
                  "computed")
        bias = (zp_out - int(temp) + (1 << 31)) % (1 << 32) - (1 << 31)  # static_cast<int32_t> truncates; int32 wraps
        real_scale = s_in / (np.float32(n) * s_out)
        m, s = quantize_multiplier(float(real_scale))
        check_left_shift(ctx, s, f"input {x.name!r} scale {float(s_in):.6g} over {n} x output {out.name!r} scale "
                                 f"{float(s_out):.6g}")
        depth = x.shape[3]
        ctx.call(requantize_mean4d, acc, of, simd_channels(depth, ctx.num_threads), depth, m, s, bias, lo, hi)
        return
    m, s = quantize_multiplier(float(s_in) / float(s_out))
    k = min(n.bit_length() - 1, 32, 31 + s)
    m = (m << k) // n
    # the official kernel shifts the int32 sum left by s - k in C: undefined past 31 bits
    check_left_shift(ctx, s - k, f"input {x.name!r} scale {float(s_in):.6g} over output {out.name!r} scale "
                                 f"{float(s_out):.6g} (the sum of {n} values)")
    ctx.check(m <= INT32_MAX, "MEAN: requantization multiplier overflows")
    ctx.call(requantize_mbqm, acc, of, zp_in * n, m, s - k, zp_out, lo, hi)


# --- quantized REDUCE_PROD ---------------------------------------------------------------------------------------

_PROD_PLAIN = generic_reducer("REDUCE_PROD", "prod", (np.float32, np.int32, np.int64, np.int8, np.uint8, np.int16))


@kernel("REDUCE_PROD")
def REDUCE_PROD(ctx: PrepareContext) -> None:
    """Products of float32/int32/int64 (and non-quantized 8/16-bit integers, wrapping); quantized int8/int16."""
    x = ctx.input(0)
    if x is None or x.quantization.scales.size == 0:
        return _PROD_PLAIN.prepare(ctx)
    # quantized int8/int16: each step's product is rescaled by s_in / s_out^(1/n) so the int32 never overflows
    x, out, axes, plan = _common(ctx)
    ctx.check_dtype(x, np.int8, np.int16)
    ctx.check(_is_quantized(out), "the output must be quantized like the input")
    if x.dtype == np.int16:
        ctx.check(x.zero_point == 0 and out.zero_point == 0,
                  f"int16 zero points must be 0, got {x.zero_point} and {out.zero_point}")
    if x.size == 0 or out.size == 0:
        return  # TFLite leaves the output as it is
    of = ctx.view(out, (out.size,))
    if plan[0] == "3d" and plan[2] == 1:
        # nothing is reduced: TFLite copies the input as is (no requantization)
        ctx.call(fill_copy, ctx.view(x, (x.size,)), of)
        return
    n = x.size // out.size
    m, s = quantize_multiplier(float(x.scale) / float(out.scale) ** (1.0 / n))
    # every step and the final scaling run TFLite's int64-accumulator MultiplyByQuantizedMultiplier, defined up to
    # a shift of 14 (its debug-only check asks for < 8; the release build computes shifts 8..14 like any other)
    check_int64_left_shift(ctx, s, f"input {x.name!r} scale {float(x.scale):.6g} over output {out.name!r} scale "
                                   f"{float(out.scale):.6g}^(1/{n}) (the product rescaling)")
    acc = ctx.temp((out.size,), np.int32)
    xf = ctx.view(x, (x.size,))
    if plan[0] == "3d":
        ctx.call(qprod3, xf, acc, plan[1], plan[2], plan[3], x.zero_point, m, s)
    else:
        seen = ctx.temp((out.size,), np.uint8)
        ctx.call(qprod_nd, xf, acc, seen, plan[1], plan[2], x.zero_point, m, s)
    info = np.iinfo(x.dtype)
    ctx.call(qprod_finish, acc, of, out.zero_point, m, s, int(info.min), int(info.max))


REDUCE_MAX = generic_reducer("REDUCE_MAX", "max", (np.float32, np.int32, np.int64, np.int8, np.uint8, np.int16))
REDUCE_MIN = generic_reducer("REDUCE_MIN", "min", (np.float32, np.int32, np.int64, np.int8, np.uint8, np.int16))
REDUCE_ANY = generic_reducer("REDUCE_ANY", "any", (np.bool_,))
REDUCE_ALL = generic_reducer("REDUCE_ALL", "all", (np.bool_,))


# --- ARG_MAX / ARG_MIN ------------------------------------------------------------------------------------------


_TENSOR_TYPE_INT32, _TENSOR_TYPE_INT64 = 2, 4


def arg_op(op_name: str, greater: bool):
    """ARG_MAX (greater) or ARG_MIN over one axis given by a 1-element int32/int64 tensor; int32/int64 output."""
    def prepare(ctx: PrepareContext) -> None:
        ctx.check_num(inputs=2, outputs=1)
        x, axis_t = ctx.input(0), ctx.input(1)
        ctx.check_dtype(x, np.float32, np.uint8, np.int8, np.int32, np.bool_)
        ctx.check(x.ndim >= 1, "input must have rank >= 1")
        ctx.check(axis_t.size == 1, f"axis must have one element, got shape {list(axis_t.shape)}")
        ctx.check_dtype(axis_t, np.int32, np.int64)
        out_type = int(ctx.options.get("output_type", _TENSOR_TYPE_INT64))
        ctx.check(out_type in (_TENSOR_TYPE_INT32, _TENSOR_TYPE_INT64),
                  f"output_type must be INT32 or INT64, got TensorType {out_type}")
        out_dtype = np.int32 if out_type == _TENSOR_TYPE_INT32 else np.int64
        v = int(np.asarray(ctx.value(1)).reshape(-1)[0])
        a = v + x.ndim if v < 0 else v
        ctx.check(0 <= a < x.ndim, f"axis {v} is out of range for input rank {x.ndim}")
        n = x.shape[a]
        ctx.check(n > 0, "cannot compute ArgMin/ArgMax over an empty axis")
        out = ctx.set_output(0, x.shape[:a] + x.shape[a + 1:], out_dtype)
        if out.size == 0:
            return
        outer = int(np.prod(x.shape[:a], dtype=np.int64))
        inner = int(np.prod(x.shape[a + 1:], dtype=np.int64))
        # bool compares like uint8 (False < True); one compiled loop serves both
        xv = ctx.view(x, (x.size,), np.uint8 if x.dtype == np.bool_ else None)
        fn = ARG_LOOPS[greater, x.dtype == np.float32]
        ctx.call(fn, xv, ctx.view(out, (out.size,)), outer, n, inner)

    return kernel(op_name)(prepare)


ARG_MAX = arg_op("ARG_MAX", True)
ARG_MIN = arg_op("ARG_MIN", False)


# --- CUMSUM ----------------------------------------------------------------------------------------------------


@kernel("CUMSUM")
def CUMSUM(ctx: PrepareContext) -> None:
    """Inclusive or exclusive, forward or reverse running sums of float32/int32/int64 along one axis."""
    ctx.check_num(inputs=2, outputs=1)
    x, axis_t = ctx.input(0), ctx.input(1)
    ctx.check_dtype(x, np.float32, np.int32, np.int64)
    ctx.check_dtype(axis_t, np.int32)
    ctx.check(axis_t.size == 1, f"axis must have one element, got shape {list(axis_t.shape)}")
    ctx.check(x.ndim >= 1, "input must have rank >= 1")
    v = int(np.asarray(ctx.value(1)).reshape(-1)[0])
    a = v + x.ndim if v < 0 else v
    ctx.check(0 <= a < x.ndim, f"axis {v} is out of range for input rank {x.ndim}")
    out = ctx.set_output(0, x.shape, x.dtype)
    if x.size == 0:
        return
    outer = int(np.prod(x.shape[:a], dtype=np.int64))
    inner = int(np.prod(x.shape[a + 1:], dtype=np.int64))
    ctx.call(cumsum, ctx.view(x, (x.size,)), ctx.view(out, (out.size,)), np.zeros(1, x.dtype), outer, x.shape[a],
             inner, bool(ctx.options.get("exclusive", False)), bool(ctx.options.get("reverse", False)))


__all__ = ["MEAN", "SUM", "REDUCE_PROD", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_ANY", "REDUCE_ALL", "ARG_MAX",
           "ARG_MIN", "CUMSUM", "loop_plan", "resolve_axes"]
