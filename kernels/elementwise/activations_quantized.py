"""Quantized activations (int8 / uint8 / int16), bit-exact with TFLite's optimized builtin kernels.

Elementwise activations are tabulated over every input value at prepare time (see arithmetic_quantized.py) with the
official arithmetic: float look-up tables (LUTPopulate) for LOGISTIC, TANH, ELU and GELU on 8-bit data, the
integer reference code for RELU*, LEAKY_RELU and HARD_SWISH, and the int16 fixed-point LOGISTIC / TANH. PRELU
runs through the shared binary kernel. SOFTMAX and LOG_SOFTMAX on 8-bit data use the optimized kernels' float
exp table; int16 SOFTMAX uses the exp and 1/(1+x) int16 tables with integer normalisation.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base import fixedpoint as fx
from lite_numba.kernels.base.shapes import broadcast_shape
from lite_numba.kernels.elementwise.arithmetic_quantized import (
    MODE_PRELU,
    all_values,
    check_per_tensor,
    float_function_table,
    prepare_unary_common,
    raw_view_dtype,
    schedule_binary_table_op,
    schedule_lookup,
    to_output_table,
)
from lite_numba.kernels.elementwise.softmax import softmax_rows
from numba import njit

from lite_numba.ops import PrepareContext, kernel

f32 = np.float32


def _logistic_f32(v):
    return f32(f32(1.0) / f32(f32(1.0) + fx.libm_expf(-v)))


def _elu_f32(v):
    return fx.libm_expm1f(v) if v < 0 else v


_SQRT1_2 = f32(np.sqrt(0.5))
_SQRT_2_OVER_PI = f32(2.0 / np.sqrt(np.pi) * np.sqrt(0.5))


def _gelu_f32(v):
    return f32(f32(f32(0.5) * v) * fx.libm_erfcf(f32(v * -_SQRT1_2)))


def _gelu_tanh_f32(v):
    cube = f32(f32(f32(f32(0.044715) * v) * v) * v)
    return f32(f32(f32(0.5) * v) * f32(f32(1.0) + fx.libm_tanhf(f32(_SQRT_2_OVER_PI * f32(v + cube)))))


# --- int16 LOGISTIC / TANH ------------------------------------------------------------------------------------

def _int16_scaling(ctx: PrepareContext, input_scale: float, pot_left_shift_ok) -> tuple[int, int]:
    """(input multiplier, input left shift) of int16 LOGISTIC/TANH; multiplier 0 means a power-of-two scale."""
    ok, log2 = fx.checked_log2(input_scale)
    left_shift = (15 - 3) + log2
    if ok and pot_left_shift_ok(left_shift):
        return 0, left_shift
    multiplier = input_scale * 4096.0 * 3.0
    left_shift = 0
    while multiplier <= 32767.0 / 2.0 and left_shift <= 30:
        left_shift += 1
        multiplier *= 2.0
    return int(multiplier), left_shift


def _int16_sigmoid_table_path(values: np.ndarray, multiplier: int, left_shift: int, tanh: bool) -> np.ndarray:
    """reference_integer_ops Logistic / Tanh on int16: rescale, interpolate the sigmoid table, round."""
    if multiplier == 0:
        multiplier, left_shift = 3 << left_shift, 0
    rnd = (1 << (left_shift - 1)) if left_shift > 0 else 0
    x = fx.wrap_array((values * multiplier + rnd) >> left_shift, 32)
    a = np.abs(x)
    table = fx.SIGMOID_TABLE_UINT16
    if tanh:
        uh = a >> 8
        idx = np.minimum(uh, 254)
        ua, ub = table[idx], table[idx + 1]
        ut = a & 0xFF
        r = np.where(uh >= 255, 0xFFFF << 8, (ua << 8) + ut * (ub - ua))
        r = np.where(x >= 0, r - (1 << (14 + 9)) + (1 << (9 - 2)), -r + (1 << (14 + 9)) + (1 << (9 - 2)) - 1)
        return fx.wrap_array(r >> (9 - 1), 16)
    uh = a >> 9
    idx = np.minimum(uh, 254)
    ua, ub = table[idx], table[idx + 1]
    ut = a & 0x1FF
    r = np.where(uh >= 255, 0x7FFF << 10, (ua << 9) + ut * (ub - ua))
    r = np.where(x >= 0, r + (1 << 9), (1 << (16 + 9)) - r + (1 << 9) - 1) & 0xFFFFFFFF
    return fx.wrap_array(r >> 10, 16)


def _int16_gemmlowp(values: np.ndarray, left_shift: int, tanh: bool, simd: bool) -> np.ndarray:
    """optimized_ops Logistic / Tanh on int16 with power-of-two scales: gemmlowp on FixedPoint<int16, 3>
    (SSE semantics on 8-element blocks, scalar on the tail)."""
    fp = fx.FixedPointArrays(16, simd=simd)
    v = values
    if tanh and left_shift == 1:
        v = fx.saturating_rounding_multiply_by_pot_array(v, 1, 16)
    return fp.tanh(v, 3) if tanh else fp.logistic(v, 3)


def _logistic_tanh(ctx: PrepareContext) -> None:
    tanh = ctx.op_name == "TANH"
    x, out = prepare_unary_common(ctx, (np.int8, np.uint8, np.int16))
    if x.dtype == np.int16:
        ok, out_log2 = fx.checked_log2(out.scale)
        ctx.check(ok and out_log2 == -15, f"int16 output scale must be 2^-15, got {out.scale}")
        multiplier, left_shift = _int16_scaling(ctx, x.scale, (lambda s: s in (0, 1)) if tanh else (lambda s: s == 0))
        values = all_values(np.int16)
        if multiplier > 0:
            table = _int16_sigmoid_table_path(values, multiplier, left_shift, tanh)
            schedule_lookup(ctx, x, out, table.astype(np.int16))
        else:
            block = _int16_gemmlowp(values, left_shift, tanh, simd=True)
            tail = _int16_gemmlowp(values, left_shift, tanh, simd=False)
            schedule_lookup(ctx, x, out, block.astype(np.int16), tail.astype(np.int16), 8)
        return
    if not tanh:
        ctx.check(np.float32(out.scale) == np.float32(1.0 / 256), f"output scale must be 1/256, got {out.scale}")
    fn = fx.libm_tanhf if tanh else _logistic_f32
    schedule_lookup(ctx, x, out, float_function_table(ctx, x, out, fn))


def _elu(ctx: PrepareContext) -> None:
    x, out = prepare_unary_common(ctx, (np.int8,))
    schedule_lookup(ctx, x, out, float_function_table(ctx, x, out, _elu_f32))


def _gelu(ctx: PrepareContext) -> None:
    x, out = prepare_unary_common(ctx, (np.int8, np.uint8, np.int16))
    fn = _gelu_tanh_f32 if ctx.options.get("approximate", False) else _gelu_f32
    schedule_lookup(ctx, x, out, float_function_table(ctx, x, out, fn))


# --- RELU family, LEAKY_RELU, HARD_SWISH ----------------------------------------------------------------------

_RELU_BOUNDS = {"RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0), "RELU_0_TO_1": (0.0, 1.0)}


def _relu(ctx: PrepareContext) -> None:
    """ReluX: requantize (x - zin) * sin / sout, then clamp to the quantized activation bounds."""
    dtypes = (np.int8, np.uint8, np.int16) if ctx.op_name in ("RELU", "RELU6") else (np.int8, np.uint8)
    x, out = prepare_unary_common(ctx, dtypes)
    info = np.iinfo(x.dtype)
    q, sh = fx.quantize_multiplier(float(f32(x.scale) / f32(out.scale)))
    # the official ReluX shifts (x - zin) left by `sh` in C int32 arithmetic: undefined past 31 bits
    fx.check_left_shift(ctx, sh, f"input {x.name!r} scale {x.scale:.6g} over output {out.name!r} scale "
                                 f"{out.scale:.6g}")
    act_min, act_max = _RELU_BOUNDS[ctx.op_name]
    lo = max(int(info.min), out.zero_point + int(fx.tflite_round(float(f32(act_min) / f32(out.scale)))))
    hi = int(info.max) if act_max is None else min(
        int(info.max), out.zero_point + int(fx.tflite_round(float(f32(act_max) / f32(out.scale)))))
    v = fx.multiply_by_quantized_multiplier_array(all_values(x.dtype) - x.zero_point, q, sh) + out.zero_point
    schedule_lookup(ctx, x, out, np.clip(np.clip(v, lo, None), None, hi).astype(x.dtype))


def _leaky_relu(ctx: PrepareContext) -> None:
    """x >= zin: requantize by sin / sout; else by sin * alpha / sout (both computed in float)."""
    x, out = prepare_unary_common(ctx, (np.int8, np.uint8, np.int16))
    alpha = f32(ctx.options.get("alpha", 0.0))
    q_alpha, s_alpha = fx.quantize_multiplier(float(f32(f32(x.scale) * alpha) / f32(out.scale)))
    q_id, s_id = fx.quantize_multiplier(float(f32(x.scale) / f32(out.scale)))
    # both branches shift (x - zin) left by their multiplier's shift in C int32 arithmetic: undefined past 31 bits
    fx.check_left_shift(ctx, s_id, f"input {x.name!r} scale {x.scale:.6g} over output {out.name!r} scale "
                                   f"{out.scale:.6g}")
    fx.check_left_shift(ctx, s_alpha, f"input {x.name!r} scale {x.scale:.6g} x alpha {float(alpha):.6g} over "
                                      f"output {out.name!r} scale {out.scale:.6g}")
    values = all_values(x.dtype) - x.zero_point
    pos = fx.multiply_by_quantized_multiplier_array(values, q_id, s_id)
    neg = fx.multiply_by_quantized_multiplier_array(values, abs(q_alpha), s_alpha)
    neg = -neg if q_alpha < 0 else neg
    schedule_lookup(ctx, x, out, to_output_table(np.where(values >= 0, pos, neg) + out.zero_point, x.dtype))


def _hard_swish(ctx: PrepareContext) -> None:
    """The reference int16 fixed-point HARD_SWISH (the x86 build does not use the NEON path)."""
    x, out = prepare_unary_common(ctx, (np.int8, np.uint8))
    hires_input_scale = f32(f32(1.0 / 128.0) * f32(x.scale))
    reluish_scale = f32(f32(3.0) / f32(32768.0))
    q_out, e_out = fx.quantize_multiplier(float(f32(hires_input_scale / f32(out.scale))))
    ctx.check(e_out <= 0, f"output scale {out.scale} is too small for input scale {x.scale}")
    m_out = fx.downscale_multiplier_to_int16(q_out)
    q_rel, e_rel = fx.quantize_multiplier(float(f32(hires_input_scale / reluish_scale)))
    # the official kernel multiplies the int16 reluish value by 1 << (e_rel - 1) in C int arithmetic before its
    # saturation: undefined from e_rel = 32 on (its results are garbage there)
    fx.check_left_shift(ctx, e_rel, f"input {x.name!r} scale {x.scale:.6g} over the reluish scale 3/32768 (x 1/128)")
    m_rel = fx.downscale_multiplier_to_int16(q_rel)
    srdhm16 = fx.saturating_rounding_doubling_high_mul_array
    v = fx.wrap_array(all_values(x.dtype) - x.zero_point, 16)
    hires = fx.wrap_array(v * (1 << 7), 16)
    preshift = srdhm16(hires, m_out, 16)
    reluish = hires
    if e_rel > 0:
        reluish = np.clip(reluish * (1 << (e_rel - 1)), -32768, 32767)
    reluish = srdhm16(reluish, m_rel, 16)
    if e_rel > 0:
        reluish = np.clip(reluish * 2, -32768, 32767)
    if e_rel < 0:
        reluish = fx.rounding_divide_by_pot_array(reluish, -e_rel)
    reluish = fx.wrap_array((reluish + (1 << 15)) >> 1, 16)
    # SaturatingDoublingHighMul (C division, truncating) of the reluish factor and the pre-shift output
    prod = reluish * preshift
    high = fx.wrap_array(np.where(prod < 0, -((-prod) >> 15), prod >> 15), 16)
    pre_out = np.where((reluish == preshift) & (reluish == -32768), 32767, high)
    o = fx.wrap_array(fx.rounding_divide_by_pot_array(pre_out, -e_out) + out.zero_point, 16)
    schedule_lookup(ctx, x, out, to_output_table(o, x.dtype))


def _prelu(ctx: PrepareContext) -> None:
    """x >= zin: requantize by sin / sout; else (x - zin) * (alpha - za) by sin * sa / sout."""
    ctx.check_num(inputs=2, outputs=1)
    x, alpha = ctx.input(0), ctx.input(1)
    ctx.check(x.dtype in (np.int8, np.uint8, np.int16), f"quantized {x.dtype.name} input is not supported")
    ctx.check(alpha.dtype == (np.dtype(np.int8) if x.dtype == np.int16 else x.dtype),
              f"alpha type {alpha.dtype.name} does not match input type {x.dtype.name}")
    shape = broadcast_shape(ctx, x.shape, alpha.shape)
    ctx.check(shape == x.shape, f"alpha of shape {list(alpha.shape)} would change the input shape {list(x.shape)}")
    out = ctx.set_output(0, shape, x.dtype)
    check_per_tensor(ctx, x, alpha, out)
    m1 = float(f32(x.scale) / f32(out.scale))
    m2 = float(f32(f32(x.scale) * f32(alpha.scale)) / f32(out.scale))
    ctx.check(np.isfinite(m1) and np.isfinite(m2),
              f"input {x.name!r} scale {x.scale}, alpha {alpha.name!r} scale {alpha.scale} and output {out.name!r} "
              f"scale {out.scale} give an infinite multiplier")
    q1, s1 = fx.quantize_multiplier(m1)
    q2, s2 = fx.quantize_multiplier(m2)
    # the official kernel multiplies by 2^shift in C int32 arithmetic: undefined from 32 bits on (the CPU takes the
    # count mod 32), refused as for MUL
    for sh, what in ((s1, f"input {x.name!r} scale {x.scale}"),
                     (s2, f"input {x.name!r} scale {x.scale} x alpha {alpha.name!r} scale {alpha.scale}")):
        ctx.check(sh <= 31, f"{what} over output {out.name!r} scale {out.scale} needs a left shift of {sh} > 31 bits")
    info = np.iinfo(x.dtype)
    schedule_binary_table_op(ctx, x, alpha, out, all_values(x.dtype) - x.zero_point,
                             all_values(alpha.dtype) - alpha.zero_point,
                             [MODE_PRELU, q1, s1, q2, s2, out.zero_point, int(info.min), int(info.max)])


# --- SOFTMAX / LOG_SOFTMAX ------------------------------------------------------------------------------------

@njit(cache=True, inline="always")
def _byte_value(b, signed):
    """A raw byte of an 8-bit row as the value it holds (int8 data is read through an unsigned view)."""
    v = np.int64(b)
    if signed and v > 127:
        v -= 256
    return v


@njit(cache=True, inline="always")
def _row_base(row, signed):
    """(max value, table base 255 - max) of one row: the first pass of the optimized 8-bit SOFTMAX and LOG_SOFTMAX
    (the table holds the exponentials by value + 255)."""
    mx = -1000
    for j in range(row.shape[0]):
        mx = max(mx, _byte_value(row[j], signed))
    return mx, 255 - mx


@njit(cache=True, inline="always")
def _row_max_and_sum(row, table, signed):
    """(max value, table base, float32 sum of table[base + v]) over one row: _row_base, then the sum."""
    mx, base = _row_base(row, signed)
    s = np.float32(0.0)
    for j in range(row.shape[0]):
        s += table[base + _byte_value(row[j], signed)]
    return mx, base, s


@njit(cache=True, nogil=True, _nrt=False)
def softmax_q8(x, out, table, signed, out_scale, zero_point, lo, hi, truncate, e):
    """Optimized 8-bit SOFTMAX: float exp table indexed by (255 - row max + x), float32 normalisation.

    x: (rows, n) raw bytes (signed: int8 data); out: raw unsigned view of the output type. `truncate` selects
    the uint8-output rounding (add 0.5 and truncate, no zero point) instead of std::round + zero point. e: a float32
    scratch of n: the row's table values, kept by the (sequential) sum so that the last loop has no table lookups
    and vectorizes. Every p = e * inv is >= 0 (e > 0, inv > 0): std::round is trunc, + 1 from a fraction of 0.5; p
    is limited to 2^16 before its integer conversion (any value from there clamps to hi)."""
    rows, n = x.shape
    scale = np.float32(out_scale)
    cap = np.float32(65536.0)
    for r in range(rows):
        _, base = _row_base(x[r], signed)
        s = np.float32(0.0)
        for j in range(n):  # _row_max_and_sum's sum, each value kept
            v = table[base + _byte_value(x[r, j], signed)]
            e[j] = v
            s += v
        inv = np.float32(1.0) / (s * scale)
        if truncate:
            for j in range(n):
                q = np.int32(min(e[j] * inv + np.float32(0.5), cap))
                out[r, j] = min(max(q, lo), hi)
        else:
            for j in range(n):
                p = min(e[j] * inv, cap)
                t = np.trunc(p)
                t = t + np.float32(1.0) if p - t >= np.float32(0.5) else t
                out[r, j] = min(max(np.int32(t) + zero_point, lo), hi)


@njit(cache=True, nogil=True)
def log_softmax_q8(x, out, table, signed, input_scale, out_scale, zero_point, lo, hi):
    """Optimized 8-bit LOG_SOFTMAX: (x - max) * sin - log(sum exp) in float, rounded half to even."""
    rows, n = x.shape
    sin = np.float32(input_scale)
    sout = np.float32(out_scale)
    for r in range(rows):
        mx, base, s = _row_max_and_sum(x[r], table, signed)
        log_sum = np.log(s)
        scale = sin / sout
        precomputed = (sin * np.float32(mx) + log_sum) / sout
        for j in range(n):
            v = _byte_value(x[r, j], signed)
            lp = scale * np.float32(v) - precomputed
            q = np.int64(np.rint(lp)) + zero_point
            out[r, j] = min(max(q, lo), hi)


@njit(cache=True)
def _lut_lookup16(value, lut):
    index = 256 + (value >> 7)
    offset = value & 0x7F
    base = np.int64(lut[index])
    slope = np.int64(np.int16(np.int64(lut[index + 1]) - base))
    return np.int64(np.int16(base + ((slope * offset + 64) >> 7)))


@njit(cache=True, nogil=True)
def softmax_int16(x, out, exp_lut, recip_lut, multiplier, shift):
    """Reference int16 SOFTMAX: exp via an int16 table on the rescaled difference to the row max, sum in Q16.15,
    reciprocal via a 1/(1+x) table, then a rounding shift."""
    rows, n = x.shape
    for r in range(rows):
        mx = np.int64(-32768)
        for j in range(n):
            mx = max(mx, np.int64(x[r, j]))
        total = np.int64(0)
        for j in range(n):
            d = np.int64(x[r, j]) - mx
            scaled = fx.multiply_by_quantized_multiplier(d, multiplier, shift)
            sym = min(max(scaled + 32767, -32768), 32767)
            e = _lut_lookup16(sym, exp_lut)
            out[r, j] = e
            total = np.int64(np.int32(total + e))
        # count leading zeros of the (positive) uint32 sum
        clz = 32
        t = np.uint32(total)
        while t != 0:
            t >>= np.uint32(1)
            clz -= 1
        shifted = np.int64(np.int32(((total << (clz - 1)) + (1 << 13)) >> 14))
        sym_sum = min(max(shifted - ((1 << 15) + (1 << 16)), -32768), 32767)
        recip = _lut_lookup16(sym_sum, recip_lut)
        right = 31 - clz
        rnd = np.int64(1) << (right - 1)
        for j in range(n):
            v = np.int64(np.int32((np.int64(out[r, j]) * recip + rnd) >> right))
            out[r, j] = min(max(v, 0), 32767)


def _exp_table(input_scale: float, beta: float) -> np.ndarray:
    """table[255 - d] = expf(-input_scale * beta * d), d = 0..255 (PopulateSoftmaxLookupTable), in float."""
    scale = f32(-f32(input_scale) * f32(beta))
    table = np.zeros(256, np.float32)
    for d in range(256):
        table[255 - d] = fx.libm_expf(f32(scale * f32(d)))
    return table


def _softmax(ctx: PrepareContext) -> None:
    x, rows, n = softmax_rows(ctx)
    out = ctx.output(0)
    beta = float(ctx.options.get("beta", 1.0))
    if x.dtype == np.int16:
        ctx.check(out.dtype == np.int16, f"int16 input needs an int16 output, got {out.dtype.name}")
        out = ctx.set_output(0, x.shape, np.int16)
        check_per_tensor(ctx, x, out)
        ctx.check(x.zero_point == 0 and out.zero_point == 0, "int16 input and output must have zero point 0")
        ctx.check(abs(f32(out.scale) - f32(1.0 / 32768)) <= f32(0.001 / 32768),
                  f"int16 output scale must be 1/32768, got {out.scale}")
        rng = 65535
        exp_lut = fx.lut_populate_int16(10.0 / rng, 32767, 2.0 / rng, 0, fx.libm_exp, np.float64)
        recip_lut = fx.lut_populate_int16(1.0 / rng, -32768, 2.0 / rng, 0, lambda v: 1.0 / (1.0 + v), np.float64)
        q, sh = fx.quantize_multiplier(float(f32(f32(x.scale) * f32(beta))) / (10.0 / 65535.0))
        # the official kernel shifts the int32 difference left by `sh` in C (undefined from 32 on; x86 and ARM take
        # the count mod 32, so its results are garbage there): refuse instead of answering differently
        ctx.check(sh <= 31, f"input scale {x.scale} x beta {beta} is too large for int16 SOFTMAX (its fixed-point "
                            f"multiplier needs a left shift of {sh} > 31 bits)")
        if out.size:
            ctx.call(softmax_int16, ctx.view(x, (rows, n)), ctx.view(out, (rows, n)), exp_lut, recip_lut, q, sh)
        return
    ctx.check(x.dtype in (np.int8, np.uint8), f"quantized {x.dtype.name} input is not supported")
    allowed = (np.dtype(np.int8), np.dtype(np.int16)) if x.dtype == np.int8 else (np.dtype(np.uint8),
                                                                                   np.dtype(np.int16))
    ctx.check(out.dtype in allowed, f"{x.dtype.name} input needs an output of type "
              + " or ".join(d.name for d in allowed) + f", got {out.dtype.name}")
    out = ctx.set_output(0, x.shape, out.dtype)
    check_per_tensor(ctx, x, out)
    if x.dtype == np.int8 and out.dtype == np.int8:
        ctx.check(out.zero_point == -128, f"int8 output zero point must be -128, got {out.zero_point}")
        ctx.check(abs(f32(out.scale) - f32(1.0 / 256)) <= f32(0.001 / 256),
                  f"int8 output scale must be 1/256, got {out.scale}")
    if out.size == 0:
        return
    info = np.iinfo(out.dtype)
    ctx.call(softmax_q8, ctx.view(x, (rows, n), np.uint8), ctx.view(out, (rows, n), raw_view_dtype(out.dtype)),
             _exp_table(x.scale, float(f32(beta))), int(x.dtype == np.int8), out.scale, out.zero_point,
             int(info.min), int(info.max), int(out.dtype == np.uint8), ctx.temp((n,), np.float32))


def _log_softmax(ctx: PrepareContext) -> None:
    x, rows, n = softmax_rows(ctx)
    ctx.check(x.dtype in (np.int8, np.uint8), f"quantized {x.dtype.name} input is not supported")
    out = ctx.set_output(0, x.shape, x.dtype)
    check_per_tensor(ctx, x, out)
    ctx.check(f32(out.scale) == f32(16.0 / 256), f"output scale must be 16/256, got {out.scale}")
    want_zp = 127 if x.dtype == np.int8 else 255
    ctx.check(out.zero_point == want_zp, f"output zero point must be {want_zp}, got {out.zero_point}")
    # the official kernel computes (x - max) x input scale / output scale and input scale x max / output scale in
    # float32 and converts the result to int32: past FLT_MAX these are inf - inf = NaN, whose conversion is undefined
    # in C (its vector block and its scalar tail give different bytes for the same value), so such scales are refused
    bound = float(f32(x.scale)) * 256.0 / float(f32(out.scale))
    ctx.check(bound <= float(np.finfo(np.float32).max),
              f"input {x.name!r} scale {x.scale} is too large for 8-bit LOG_SOFTMAX: 256 x input scale / output "
              f"scale = {bound:.3g} overflows float32 in the official kernel")
    if out.size == 0:
        return
    info = np.iinfo(out.dtype)
    ctx.call(log_softmax_q8, ctx.view(x, (rows, n), np.uint8), ctx.view(out, (rows, n), np.uint8),
             _exp_table(x.scale, 1.0), int(x.dtype == np.int8), x.scale, out.scale, out.zero_point,
             int(info.min), int(info.max))


# The quantized variants, named by op: the `quantized=` kernels of the activation and softmax rows of the registry.
LOGISTIC = kernel("LOGISTIC")(_logistic_tanh)
TANH = kernel("TANH")(_logistic_tanh)
ELU = kernel("ELU")(_elu)
GELU = kernel("GELU")(_gelu)
RELU = kernel("RELU")(_relu)
RELU6 = kernel("RELU6")(_relu)
RELU_N1_TO_1 = kernel("RELU_N1_TO_1")(_relu)
RELU_0_TO_1 = kernel("RELU_0_TO_1")(_relu)
LEAKY_RELU = kernel("LEAKY_RELU")(_leaky_relu)
HARD_SWISH = kernel("HARD_SWISH")(_hard_swish)
PRELU = kernel("PRELU")(_prelu)
SOFTMAX = kernel("SOFTMAX")(_softmax)
LOG_SOFTMAX = kernel("LOG_SOFTMAX")(_log_softmax)
