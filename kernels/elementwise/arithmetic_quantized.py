"""Quantized (int8 / uint8 / int16) elementwise ops, bit-exact with TFLite's optimized builtin kernels.

Each op's quantized variant is a kernel named like the op (`ADD`, `EXP`, ...), the `quantized=` kernel of its row in
the registry; the float prepare hands a quantized node to it with ctx.prepare_quantized() (activations' variants live
in activations_quantized.py). Three compiled loops do the work:

- `lookup_bytes`: a unary op of an 8- or 16-bit input is a function of one of 256 / 65536 values, so prepare
  tabulates it (with the exact integer or float arithmetic of the official kernel, see fixedpoint.py) and the
  kernel is a table lookup on the input's raw bytes. EXP, LOGISTIC, TANH, ELU, GELU, HARD_SWISH, LEAKY_RELU,
  RELU*, RSQRT, ABS, LOG, SQRT, QUANTIZE (requantize) and DEQUANTIZE all run through it.
- `binary_table_op`: a binary op maps each input through a per-value table (offset, left shift and input
  multiplier folded in), then combines, requantizes and clamps per element, with 6-D broadcasting: SUB,
  SQUARED_DIFFERENCE, MAXIMUM, MINIMUM, PRELU, int16 MUL and power-of-two int16 ADD.
- `binary_neon_op`: ADD and 8-bit MUL, whose official x86 kernels are NEON code compiled through an SSE
  translation: vector blocks round and narrow differently from the scalar tail, and broadcasting follows TFLite's
  "fivefold" loop structure, which decides which elements fall in a block.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base import fixedpoint as fx
from lite_numba.kernels.base.shapes import broadcast_shape, broadcast_strides, padded_shape
from lite_numba.kernels.base.strided import box_walk, next_row
from lite_numba.kernels.elementwise.binary_neon import (
    NARROW_NONE,
    NARROW_SATURATE,
    NARROW_WRAP,
    process_broadcast_shapes,
    raw_view_dtype,
    schedule_binary_neon_op,
    vshl_array,
)
from numba import njit

from lite_numba.ops import PrepareContext, Tensor, kernel

# --- table lookup ---------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def lookup_bytes(x, table, out, width, split, second):
    """out[i] = table[x[i]] with `width`-byte entries; elements from `split` on use the table starting at entry
    `second` (the official kernels run SIMD blocks and a scalar tail with different rounding). x: uint8/uint16."""
    if width == 1:
        for i in range(split):
            out[i] = table[x[i]]
        for i in range(split, x.size):
            out[i] = table[np.int64(x[i]) + second]
        return
    for i in range(x.size):
        b = (np.int64(x[i]) + (second if i >= split else 0)) * width
        o = i * width
        for j in range(width):
            out[o + j] = table[b + j]


def make_checked_lookup(message: str):
    """lookup_bytes that raises ValueError(message) for inputs flagged invalid (outside the op's domain)."""

    @njit(cache=True, nogil=True)
    def checked_lookup(x, table, invalid, out):
        """out[i] = table[x[i]], or ValueError(message) where invalid[x[i]]."""
        for i in range(x.size):
            if invalid[x[i]]:
                raise ValueError(message)
            out[i] = table[x[i]]

    return checked_lookup


RSQRT_CHECKED = make_checked_lookup("RSQRT: input is negative (Rsqrt is only defined for positive values)")
SQRT_CHECKED = make_checked_lookup("SQRT: input is negative (Sqrt is only defined for non-negative values)")


def all_values(dtype) -> np.ndarray:
    """Every value of an 8/16-bit integer dtype as int64, ordered by its raw (unsigned) bit pattern."""
    raw = np.arange(1 << (8 * np.dtype(dtype).itemsize), dtype=np.int64).astype(raw_view_dtype(dtype))
    return raw.view(dtype).astype(np.int64)


def schedule_lookup(ctx: PrepareContext, x: Tensor, out: Tensor, table: np.ndarray,
                    tail_table: np.ndarray | None = None, block: int = 1) -> None:
    """Schedule out = table[x] for table values of out's dtype, indexed like all_values(x.dtype).

    With `tail_table`, the elements after the last whole `block` (the official kernel's scalar tail) use it."""
    if out.size == 0:
        return
    table = np.ascontiguousarray(table, dtype=out.dtype)
    split, second = 0, 0
    if tail_table is not None:
        split, second = x.size - x.size % block, len(table)
        table = np.concatenate([table, np.ascontiguousarray(tail_table, dtype=out.dtype)])
    xv = raw_view_dtype(x.dtype)
    ctx.call(lookup_bytes, ctx.view(x, (x.size,), xv), table.view(np.uint8),
             ctx.view(out, (out.nbytes,), np.uint8), out.dtype.itemsize, split, second)


def schedule_checked_lookup(ctx: PrepareContext, kernel, x: Tensor, out: Tensor, table: np.ndarray,
                            invalid: np.ndarray) -> None:
    """Schedule out = table[x] that fails at run time on inputs where `invalid` is set (same dtype as x/out)."""
    if out.size == 0:
        return
    xv = raw_view_dtype(x.dtype)
    ctx.call(kernel, ctx.view(x, (x.size,), xv), np.ascontiguousarray(table, out.dtype).view(xv),
             invalid.astype(np.uint8), ctx.view(out, (out.size,), xv))


def to_output_table(values: np.ndarray, dtype) -> np.ndarray:
    """Clamped int64 values -> a table in `dtype`."""
    info = np.iinfo(dtype)
    return np.clip(values, info.min, info.max).astype(dtype)


# --- binary ops -----------------------------------------------------------------------------------------------

# combine modes of binary_table_op
MODE_SUB, MODE_SQUARED_DIFFERENCE, MODE_MUL, MODE_MAX, MODE_MIN, MODE_PRELU, MODE_ADD_RAW, MODE_SUB_RAW = range(8)


@njit(cache=True)
def _combine(a, b, p):
    mode = p[0]
    if mode == MODE_SUB:
        return fx.multiply_by_quantized_multiplier(a - b, p[1], p[2]) + p[5]
    if mode == MODE_SQUARED_DIFFERENCE:
        d = a - b
        return fx.multiply_by_quantized_multiplier(np.int64(np.int32(d * d)), p[1], p[2]) + p[5]
    if mode == MODE_MUL:
        return fx.multiply_by_quantized_multiplier(np.int64(np.int32(a * b)), p[1], p[2]) + p[5]
    if mode == MODE_MAX:
        return max(a, b)
    if mode == MODE_MIN:
        return min(a, b)
    if mode == MODE_PRELU:
        if a >= 0:
            return fx.multiply_by_quantized_multiplier(a, p[1], p[2]) + p[5]
        return fx.multiply_by_quantized_multiplier(np.int64(np.int32(a * b)), p[3], p[4]) + p[5]
    if mode == MODE_ADD_RAW:
        return a + b
    return a - b


@njit(cache=True, nogil=True, _nrt=False)
def binary_table_op(x, y, out, t1, t2, xs, ys, shp, p):
    """out = clamp(combine(t1[x], t2[y])) with 6-D broadcasting; x, y, out are raw (unsigned) views.

    p = [mode, multiplier, shift, multiplier2, shift2, output zero point, min, max]."""
    lo, hi = p[6], p[7]
    n5, sx, sy = shp[5], xs[5], ys[5]
    walk, at = box_walk(shp, xs, ys, ys)
    for r in range(walk[0]):
        xb, yb = at[1], at[2]
        for i5 in range(n5):
            v = _combine(t1[x[xb + i5 * sx]], t2[y[yb + i5 * sy]], p)
            out[r * n5 + i5] = min(max(v, lo), hi)
        at = next_row(at, walk)


def schedule_binary_table_op(ctx: PrepareContext, x: Tensor, y: Tensor, out: Tensor, t1: np.ndarray,
                             t2: np.ndarray, params) -> None:
    """Schedule binary_table_op over x and y broadcast to out's shape (tables indexed like all_values)."""
    if out.size == 0:
        return
    shape = out.shape
    if x.shape == y.shape:
        xs = ys = np.array([0, 0, 0, 0, 0, 1], np.int64)
        shp = np.array([1, 1, 1, 1, 1, out.size], np.int64)
    else:
        xs, ys, shp = broadcast_strides(x.shape, shape), broadcast_strides(y.shape, shape), padded_shape(shape)
    ctx.call(binary_table_op, ctx.view(x, (x.size,), raw_view_dtype(x.dtype)),
             ctx.view(y, (y.size,), raw_view_dtype(y.dtype)), ctx.view(out, (out.size,), raw_view_dtype(out.dtype)),
             np.asarray(t1, np.int64), np.asarray(t2, np.int64), xs, ys, shp, np.asarray(params, np.int64))


def check_per_tensor(ctx: PrepareContext, *tensors: Tensor) -> None:
    """Every tensor must carry per-tensor affine quantization with a positive scale."""
    for t in tensors:
        q = t.quantization
        ctx.check(q.scales.size >= 1 and float(q.scales[0]) > 0,
                  f"tensor {t.name!r} ({t.dtype.name}) has no quantization parameters")
        ctx.check(q.scales.size == 1, f"tensor {t.name!r} must be quantized per tensor, not per channel")


def check_zero_point_range(ctx: PrepareContext, dtype, *tensors: Tensor) -> None:
    """Every zero point must be a value of `dtype` (as the official ADD / SUB check)."""
    info = np.iinfo(dtype)
    for t in tensors:
        ctx.check(info.min <= t.zero_point <= info.max,
                  f"zero point {t.zero_point} of {t.name!r} is outside the {np.dtype(dtype).name} range")


def _smaller_than_one(ctx: PrepareContext, m: float, what: str) -> tuple[int, int]:
    try:
        return fx.quantize_multiplier_smaller_than_one_exp(m)
    except ValueError:
        ctx.fail(f"{what} multiplier {m:.6g} must be in (0, 1): scales are too far apart")


def _activation_range(ctx: PrepareContext, out: Tensor) -> tuple[int, int]:
    act = ctx.options.get("fused_activation_function", 0)
    try:
        return fx.activation_range_quantized(act, out.dtype, out.scale, out.zero_point)
    except ValueError as e:
        ctx.fail(str(e))


def _prepare_binary_common(ctx: PrepareContext, dtypes) -> tuple[Tensor, Tensor, Tensor]:
    ctx.check_num(inputs=2, outputs=1)
    x, y = ctx.input(0), ctx.input(1)
    ctx.check(x.dtype == y.dtype, f"input types differ: {x.dtype.name} and {y.dtype.name}")
    ctx.check(x.dtype in [np.dtype(d) for d in dtypes],
              f"quantized {x.dtype.name} inputs are not supported (supported: "
              + ", ".join(np.dtype(d).name for d in dtypes) + ")")
    out = ctx.set_output(0, broadcast_shape(ctx, x.shape, y.shape), x.dtype)
    check_per_tensor(ctx, x, y, out)
    return x, y, out


def _add_sub(ctx: PrepareContext) -> None:
    """ADD / SUB: int8/uint8 (and int16 with general scales) rescale both inputs to a common scale with a left
    shift of 20 (15 for int16); int16 with power-of-two scales (pot_scale_int16) shifts one input."""
    is_sub = ctx.op_name == "SUB"
    x, y, out = _prepare_binary_common(ctx, (np.int8, np.uint8, np.int16))
    check_zero_point_range(ctx, x.dtype, x, y, out)
    lo, hi = _activation_range(ctx, out)
    values = all_values(x.dtype)
    if x.dtype == np.int16:
        ctx.check(x.zero_point == 0 and y.zero_point == 0 and out.zero_point == 0,
                  "int16 inputs and output must have zero point 0")
        pot = bool(ctx.options.get("pot_scale_int16", True))
        if pot:
            logs = [fx.checked_log2(t.scale) for t in (x, y, out)]
            pot = all(ok for ok, _ in logs)
        if pot:
            s1, s2 = logs[0][1] - logs[2][1], logs[1][1] - logs[2][1]
            ctx.check(s1 == 0 or s2 == 0, "with power-of-two int16 scales one input must have the output's scale")
            ctx.check(s1 <= 0 and s2 <= 0, "with power-of-two int16 scales inputs may not be coarser than the output")
            ctx.check(process_broadcast_shapes(x.shape, y.shape)[0] == "none",
                      "broadcasting is not supported for int16 inputs with power-of-two scales")
            t1 = fx.rounding_divide_by_pot_array(values, -s1)
            t2 = fx.rounding_divide_by_pot_array(values, -s2)
            mode = MODE_SUB_RAW if is_sub else MODE_ADD_RAW
            schedule_binary_table_op(ctx, x, y, out, t1, t2, [mode, 0, 0, 0, 0, 0, lo, hi])
            return
    left_shift = 15 if x.dtype == np.int16 else 20
    twice_max = 2.0 * max(x.scale, y.scale)
    q1, sh1 = _smaller_than_one(ctx, x.scale / twice_max, "input 0")
    q2, sh2 = _smaller_than_one(ctx, y.scale / twice_max, "input 1")
    real_out = twice_max / ((1 << left_shift) * out.scale)
    if is_sub and real_out > 1:
        # the official kernel then applies a negative rounding shift (undefined); refuse instead of guessing
        ctx.fail(f"output multiplier {real_out:.6g} > 1: the output scale is too small for the input scales")
    qo, sho = _smaller_than_one(ctx, real_out, "output")
    v1 = (values - x.zero_point) << left_shift
    v2 = (values - y.zero_point) << left_shift
    t1 = fx.multiply_by_quantized_multiplier_array(v1, q1, sh1)
    t2 = fx.multiply_by_quantized_multiplier_array(v2, q2, sh2)
    if is_sub:
        # SUB runs the scalar reference code for every type
        schedule_binary_table_op(ctx, x, y, out, t1, t2, [MODE_SUB, qo, sho, 0, 0, out.zero_point, lo, hi])
        return
    # NEON element-wise terms: int8/int16 shift by (left shift + input shift) before vqrdmulh; uint8 and the
    # scalar-broadcast loops shift by the left shift, vqrdmulh, then shift right (truncating) by the input shift
    if x.dtype == np.uint8:
        e1 = vshl_array(fx.vqrdmulh_array(v1, q1), sh1)
        e2 = vshl_array(fx.vqrdmulh_array(v2, q2), sh2)
    else:
        e1 = fx.vqrdmulh_array(vshl_array(values - x.zero_point, left_shift + sh1), q1)
        e2 = fx.vqrdmulh_array(vshl_array(values - y.zero_point, left_shift + sh2), q2)
    b1 = vshl_array(fx.vqrdmulh_array(v1, q1), sh1)
    b2 = vshl_array(fx.vqrdmulh_array(v2, q2), sh2)
    info = np.iinfo(x.dtype)
    params = [0, qo, sho, out.zero_point, lo, hi, int(info.min), int(info.max)]
    tables = np.stack([t1, t2, e1, e2, b1, b2])
    if x.dtype == np.int16:
        # int16: vector blocks of 16 with the zero point added in int32; broadcasts use the scalar reference
        schedule_binary_neon_op(ctx, x, y, out, tables, (16, 16), (NARROW_NONE, NARROW_NONE), params,
                                broadcast=False)
    elif x.dtype == np.int8:
        schedule_binary_neon_op(ctx, x, y, out, tables, (16, 8), (NARROW_WRAP, NARROW_WRAP), params)
    else:
        schedule_binary_neon_op(ctx, x, y, out, tables, (8, 8), (NARROW_WRAP, NARROW_WRAP), params)


def _mul(ctx: PrepareContext) -> None:
    """MUL: (x - zx) * (y - zy) requantized by sx * sy / so."""
    x, y, out = _prepare_binary_common(ctx, (np.int8, np.uint8, np.int16))
    if x.dtype == np.int16:
        ctx.check(x.zero_point == 0 and y.zero_point == 0 and out.zero_point == 0,
                  "int16 inputs and output must have zero point 0")
    lo, hi = _activation_range(ctx, out)
    # float arithmetic, as in the official Prepare
    f32 = np.float32
    q, sh = fx.quantize_multiplier(float(f32(f32(x.scale) * f32(y.scale)) / f32(out.scale)))
    # the official kernels shift left by `sh` in C and in SSE lanes: undefined from 32 bits on (and the two give
    # different garbage), so such scales are refused, as for int16 SOFTMAX
    ctx.check(sh <= 31, f"input scales {x.scale} x {y.scale} over output scale {out.scale} need a left shift of "
                        f"{sh} > 31 bits")
    values = all_values(x.dtype)
    t1, t2 = values - x.zero_point, values - y.zero_point
    if x.dtype == np.int16:
        schedule_binary_table_op(ctx, x, y, out, t1, t2, [MODE_MUL, q, sh, 0, 0, out.zero_point, lo, hi])
        return
    info = np.iinfo(x.dtype)
    params = [1, q, sh, out.zero_point, lo, hi, int(info.min), int(info.max)]
    tables = np.stack([t1, t2, t1, t2, t1, t2])
    if x.dtype == np.int8:
        schedule_binary_neon_op(ctx, x, y, out, tables, (16, 16), (NARROW_SATURATE, NARROW_SATURATE), params)
    else:
        # uint8's scalar-broadcast loop narrows without saturation
        schedule_binary_neon_op(ctx, x, y, out, tables, (8, 8), (NARROW_SATURATE, NARROW_WRAP), params)


def _squared_difference(ctx: PrepareContext) -> None:
    """SQUARED_DIFFERENCE int8: inputs rescaled with a left shift of 7, the squared difference requantized."""
    x, y, out = _prepare_binary_common(ctx, (np.int8,))
    check_zero_point_range(ctx, np.int8, x, y, out)
    left_shift = 7
    twice_max = 2.0 * max(x.scale, y.scale)
    q1, sh1 = _smaller_than_one(ctx, x.scale / twice_max, "input 0")
    q2, sh2 = _smaller_than_one(ctx, y.scale / twice_max, "input 1")
    qo, sho = _smaller_than_one(ctx, twice_max * twice_max / ((1 << (2 * left_shift)) * out.scale), "output")
    values = all_values(np.int8)
    t1 = fx.multiply_by_quantized_multiplier_array((values - x.zero_point) << left_shift, q1, sh1)
    t2 = fx.multiply_by_quantized_multiplier_array((values - y.zero_point) << left_shift, q2, sh2)
    schedule_binary_table_op(ctx, x, y, out, t1, t2, [MODE_SQUARED_DIFFERENCE, qo, sho, 0, 0, out.zero_point,
                                                      -128, 127])


def _maximum_minimum(ctx: PrepareContext) -> None:
    """MAXIMUM / MINIMUM compare the raw quantized values (the official kernel ignores the scales)."""
    ctx.check_num(inputs=2, outputs=1)
    x, y = ctx.input(0), ctx.input(1)
    ctx.check(x.dtype == y.dtype, f"input types differ: {x.dtype.name} and {y.dtype.name}")
    out = ctx.set_output(0, broadcast_shape(ctx, x.shape, y.shape), x.dtype)
    values = all_values(x.dtype)
    info = np.iinfo(x.dtype)
    mode = MODE_MAX if ctx.op_name == "MAXIMUM" else MODE_MIN
    schedule_binary_table_op(ctx, x, y, out, values, values, [mode, 0, 0, 0, 0, 0, int(info.min), int(info.max)])


# --- unary ops ------------------------------------------------------------------------------------------------

def prepare_unary_common(ctx: PrepareContext, dtypes) -> tuple[Tensor, Tensor]:
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check(x.dtype in [np.dtype(d) for d in dtypes],
              f"quantized {x.dtype.name} input is not supported (supported: "
              + ", ".join(np.dtype(d).name for d in dtypes) + ")")
    out = ctx.set_output(0, x.shape, x.dtype)
    check_per_tensor(ctx, x, out)
    if x.dtype == np.int16:
        ctx.check(x.zero_point == 0 and out.zero_point == 0, "int16 input and output must have zero point 0")
    return x, out


def float_function_table(ctx: PrepareContext, x: Tensor, out: Tensor, transform) -> np.ndarray:
    """The output table of a float function on 8-bit (LUTPopulateInt8) or int16 (interpolated LUT) data."""
    if x.dtype == np.int16:
        lut = fx.lut_populate_int16(x.scale, x.zero_point, out.scale, out.zero_point, transform)
        return fx.lut_lookup_int16_array(all_values(np.int16), lut).astype(np.int16)
    return fx.lut_populate_8bit(x.scale, x.zero_point, out.scale, out.zero_point, transform, x.dtype)


def _exp(ctx: PrepareContext) -> None:
    x, out = prepare_unary_common(ctx, (np.int8, np.int16))
    schedule_lookup(ctx, x, out, float_function_table(ctx, x, out, fx.libm_expf))


def _log(ctx: PrepareContext) -> None:
    x, out = prepare_unary_common(ctx, (np.int8, np.int16))
    output_min = np.float32(np.float32(np.iinfo(x.dtype).min - out.zero_point) * np.float32(out.scale))

    def log(v):
        """logf, with the output minimum for non-positive inputs."""
        return output_min if v <= 0 else fx.libm_logf(v)

    schedule_lookup(ctx, x, out, float_function_table(ctx, x, out, log))


def _rsqrt(ctx: PrepareContext) -> None:
    """RSQRT int8: 1/sqrt of (x - zero point) by integer Newton-Raphson, then requantized; int16: LUT."""
    x, out = prepare_unary_common(ctx, (np.int8, np.int16))
    values = all_values(x.dtype)
    invalid = values < x.zero_point
    if x.dtype == np.int16:
        big = np.float32(np.float32(32767) * np.float32(out.scale))

        def rsqrt(v):
            """1 / sqrtf, with the int16 maximum for non-positive inputs."""
            return big if v <= 0 else np.float32(np.float32(1.0) / np.sqrt(np.float32(v)))

        table = float_function_table(ctx, x, out, rsqrt)
    else:
        # 1 / (sqrtf(input scale) * output scale): the product in float, the quotient in double
        denom = float(np.sqrt(np.float32(x.scale)) * np.float32(out.scale))
        shift_up = 20  # keeps the intermediate an integer
        ctx.check(denom > 0.0, f"input {x.name!r} scale {x.scale} and output {out.name!r} scale {out.scale} give "
                               f"sqrt(input scale) x output scale = 0 in float: the int8 RSQRT multiplier is infinite")
        q, sh = fx.quantize_multiplier(1.0 / denom)
        # the official kernel multiplies by 2^(shift - 20) in C int32 arithmetic: undefined from 32 bits on (the CPU
        # takes the count mod 32, so its results are garbage there), refused as for MUL and int16 SOFTMAX
        ctx.check(sh - shift_up <= 31,
                  f"input {x.name!r} scale {x.scale} and output {out.name!r} scale {out.scale} are too far apart for "
                  f"int8 RSQRT (its fixed-point multiplier needs a left shift of {sh - shift_up} > 31 bits)")
        table = np.zeros(256, np.int64)
        for i, v in enumerate(values):
            value = int(v) - x.zero_point
            if value < 0:
                continue
            if value == 0:
                table[i] = 127
                continue
            m, s = fx.inv_sqrt_quantized_multiplier_exp(value, -1)
            data = fx.multiply_by_quantized_multiplier_array(np.int64(1), m, s + shift_up)
            table[i] = int(fx.multiply_by_quantized_multiplier_array(data, q, sh - shift_up)) + out.zero_point
        table = to_output_table(table, np.int8)
    schedule_checked_lookup(ctx, RSQRT_CHECKED, x, out, table, invalid)


def _sqrt(ctx: PrepareContext) -> None:
    """SQRT: dequantize, sqrtf, divide by the output scale and truncate (the official kernel does not round)."""
    x, out = prepare_unary_common(ctx, (np.int8, np.int16))
    f32 = np.float32
    values = all_values(x.dtype)
    deq = f32(x.scale) * (values - x.zero_point).astype(f32)
    invalid = deq < 0
    r = np.sqrt(np.maximum(deq, f32(0))) / f32(out.scale)
    table = to_output_table(np.trunc(r).astype(np.int64) + out.zero_point, x.dtype)
    schedule_checked_lookup(ctx, SQRT_CHECKED, x, out, table, invalid)


def _abs(ctx: PrepareContext) -> None:
    x, out = prepare_unary_common(ctx, (np.int8, np.int16))
    values = np.abs(all_values(x.dtype) - x.zero_point)
    if np.float32(x.scale) != np.float32(out.scale):
        q, sh = fx.quantize_multiplier(float(np.float32(x.scale) / np.float32(out.scale)))
        # the official kernel shifts |x - zin| left by `sh` in C int32 arithmetic: undefined past 31 bits
        fx.check_left_shift(ctx, sh, f"input {x.name!r} scale {x.scale:.6g} over output {out.name!r} scale "
                                     f"{out.scale:.6g}")
        values = fx.multiply_by_quantized_multiplier_array(values, q, sh)
    schedule_lookup(ctx, x, out, to_output_table(values + out.zero_point, x.dtype))


# The quantized variants, named by op: each is the `quantized=` kernel of its op's registry row, reached from the
# float prepare (arithmetic.py) through ctx.prepare_quantized().
ADD = kernel("ADD")(_add_sub)
SUB = kernel("SUB")(_add_sub)
MUL = kernel("MUL")(_mul)
SQUARED_DIFFERENCE = kernel("SQUARED_DIFFERENCE")(_squared_difference)
MAXIMUM = kernel("MAXIMUM")(_maximum_minimum)
MINIMUM = kernel("MINIMUM")(_maximum_minimum)
EXP = kernel("EXP")(_exp)
LOG = kernel("LOG")(_log)
RSQRT = kernel("RSQRT")(_rsqrt)
SQRT = kernel("SQRT")(_sqrt)
ABS = kernel("ABS")(_abs)
