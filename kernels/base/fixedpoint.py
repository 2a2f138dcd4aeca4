"""TFLite's integer requantization arithmetic, implemented once for every quantized kernel.

A real multiplier m is represented as q * 2^(shift - 31) with q an int32 in [2^30, 2^31) (quantize_multiplier).
Applying it to an int32 accumulator x is a rounding doubling high multiply followed by a rounding right shift
(multiply_by_quantized_multiplier), both rounding half away from zero, as the optimized builtin kernels built
without TFLITE_SINGLE_ROUNDING (the official x86 wheels) do.

Three flavours of the same arithmetic live here:

- prepare-time scalars in plain Python (multipliers, activation ranges, softmax scaling);
- `*_array` functions over int64 numpy arrays that hold int32/int16 values, used at prepare time to tabulate a
  quantized unary op over every possible input value (256 or 65536 entries), so the kernel is a table lookup;
- `@njit` scalar functions used inside kernels whose result depends on two inputs (ADD, MUL, ...).

Float look-up tables (LUTPopulate) are computed with the C library's float functions (expf, tanhf, ...) through
ctypes, in float32 arithmetic, exactly as the official kernels compute them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math

import numpy as np
from numba import njit

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1

# ActivationFunctionType values (schema): NONE, RELU, RELU_N1_TO_1, RELU6
_ACT_NONE, _ACT_RELU, _ACT_RELU_N1_TO_1, _ACT_RELU6 = 0, 1, 2, 3


# --- prepare-time scalars -------------------------------------------------------------------------------------

def tflite_round(x: float) -> float:
    """std::round: half away from zero (Python's round() rounds half to even)."""
    a = abs(x)
    if not math.isfinite(a):
        return x
    r = math.floor(a)
    if a - r >= 0.5:  # exact: a and floor(a) are doubles of the same binade or a < 1
        r += 1.0
    return math.copysign(r, x)


def quantize_multiplier(m: float) -> tuple[int, int]:
    """(q, shift) with m ≈ q * 2^(shift - 31), |q| in [2^30, 2^31) or 0; double precision, like TFLite's
    QuantizeMultiplier (round half away from zero; no saturation of large shifts in the double-rounding build)."""
    if m == 0.0:
        return 0, 0
    mant, shift = math.frexp(m)
    q = int(tflite_round(mant * (1 << 31)))
    if q == (1 << 31):
        q //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q, shift


def quantize_multiplier_smaller_than_one_exp(m: float) -> tuple[int, int]:
    """quantize_multiplier for 0 < m < 1 (shift <= 0); ValueError otherwise (TFLite aborts)."""
    if not 0.0 < m < 1.0:
        raise ValueError(f"multiplier {m!r} is not in (0, 1)")
    return quantize_multiplier(m)


def quantize_multiplier_greater_than_one(m: float) -> tuple[int, int]:
    """quantize_multiplier for m > 1 (shift >= 0); ValueError otherwise."""
    if not m > 1.0:
        raise ValueError(f"multiplier {m!r} is not > 1")
    return quantize_multiplier(m)


def quantize_multiplier_smaller_than_one(m: float) -> tuple[int, int]:
    """As quantize_multiplier for 0 <= m < 1; shift <= 0."""
    if not 0.0 <= m < 1.0:
        raise ValueError(f"multiplier {m} is not in [0, 1)")
    return quantize_multiplier(m)


def quantize_multipliers(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (q, shift) arrays (int32, int32) for an array of real multipliers."""
    qs = np.zeros(len(scales), np.int32)
    ss = np.zeros(len(scales), np.int32)
    ms = np.asarray(scales, np.float64)
    if ms.ndim == 1 and np.isfinite(ms).all():
        # quantize_multiplier's arithmetic over the whole array (a per-channel conv has hundreds of channels: the
        # Python loop was ~40 ms of MobileNetV2's warm start); frexp and the scaling by 2^31 are exact
        mant, shift = np.frexp(ms)
        x = mant * float(1 << 31)
        a = np.abs(x)
        r = np.floor(a)
        q = np.copysign(r + (a - r >= 0.5), x).astype(np.int64)  # tflite_round: half away from zero
        top = q == (1 << 31)
        q[top] //= 2
        shift = shift.astype(np.int64) + top
        under = shift < -31
        q[under] = 0
        shift[under] = 0
        qs[:] = q
        ss[:] = shift
        return qs, ss
    for i, m in enumerate(ms):
        qs[i], ss[i] = quantize_multiplier(float(m))
    return qs, ss


def _check_shift(ctx, shifts, what: str, limit: int, stage: str) -> None:
    sh = int(np.max(shifts)) if np.size(shifts) else 0
    ctx.check(sh <= limit, f"{what} needs a left shift of {sh} > {limit} bits (a real multiplier of 2^{sh - 1} or "
                           f"more): the {stage} cannot apply it")


def check_left_shift(ctx, shifts, what: str) -> None:
    """Refuse (ctx.check) fixed-point multipliers whose shift is above 31: a real multiplier of 2^31 or more (an
    output scale far below the input's). TFLite's int32 output stage shifts an int32 left by that many bits, which
    C++ leaves undefined, and its kernels give whatever their shift instructions make of it; no answer is right."""
    _check_shift(ctx, shifts, what, 31, "int32 fixed-point output stage")


def check_int64_left_shift(ctx, shifts, what: str) -> None:
    """Refuse multipliers whose shift is above 14 for TFLite's int64-accumulator MultiplyByQuantizedMultiplier
    (16-bit activation kernels with an int64 bias): it rounds with 1 << (14 - shift) and shifts right by 15 - shift,
    negative shift counts (undefined in C++) from a shift of 15 on, i.e. a real multiplier of 2^14 or more."""
    _check_shift(ctx, shifts, what, 14, "int64-accumulator output stage (rounding by 1 << (14 - shift))")


def downscale_multiplier_to_int16(q: int) -> int:
    """An int32 fixed-point multiplier rounded to its int16 counterpart (DownScaleInt32ToInt16Multiplier)."""
    if q >= INT32_MAX - (1 << 15):
        return (1 << 15) - 1
    return (q + (1 << 15)) >> 16


def checked_log2(x: float) -> tuple[bool, int]:
    """(is x a power of two, rounded log2 x), computed in float32 like TFLite's CheckedLog2."""
    f32 = np.float32
    log2 = f32(libm_logf(f32(x))) * (f32(1.0) / f32(libm_logf(f32(2.0))))
    rounded = f32(tflite_round(float(log2)))
    return bool(abs(f32(log2 - rounded)) < f32(1e-3)), int(rounded)


def calculate_input_radius(input_integer_bits: int, input_left_shift: int, total_signed_bits: int = 31) -> int:
    """Largest |input| (in input units) whose rescaled difference stays representable (CalculateInputRadius)."""
    v = (1.0 * ((1 << input_integer_bits) - 1) * (1 << (total_signed_bits - input_integer_bits))
         / (1 << input_left_shift))
    return int(math.floor(v))


def quantize_scalar(f: float, scale: float, zero_point: int) -> int:
    """zero_point + round(f / scale) in float32, as TFLite quantizes activation bounds (kernel_util Quantize)."""
    t = tflite_round(float(np.float32(f) / np.float32(scale)))
    if not INT32_MIN <= t <= INT32_MAX:
        raise ValueError(f"{f} / {scale} overflows int32")
    return zero_point + int(t)


def activation_range_quantized(act: int, dtype, scale: float, zero_point: int) -> tuple[int, int]:
    """(min, max) clamp of a fused activation on a quantized output (CalculateActivationRangeQuantized).

    Raises ValueError for activations that have no quantized clamp (TANH, SIGN_BIT)."""
    info = np.iinfo(dtype)
    qmin, qmax = int(info.min), int(info.max)
    if act == _ACT_NONE:
        return qmin, qmax
    if act == _ACT_RELU:
        return max(qmin, quantize_scalar(0.0, scale, zero_point)), qmax
    if act == _ACT_RELU6:
        return (max(qmin, quantize_scalar(0.0, scale, zero_point)),
                min(qmax, quantize_scalar(6.0, scale, zero_point)))
    if act == _ACT_RELU_N1_TO_1:
        return (max(qmin, quantize_scalar(-1.0, scale, zero_point)),
                min(qmax, quantize_scalar(1.0, scale, zero_point)))
    raise ValueError(f"fused activation {act} is not supported on quantized outputs")


# --- the C library's float functions (the official kernels call them when they build tables) ------------------

def _load_libm():
    name = ctypes.util.find_library("m") or "libm.so.6"
    lib = ctypes.CDLL(name)
    fns = {}
    for fname, ctype in (("expf", ctypes.c_float), ("tanhf", ctypes.c_float), ("expm1f", ctypes.c_float),
                         ("erfcf", ctypes.c_float), ("logf", ctypes.c_float), ("exp", ctypes.c_double)):
        f = getattr(lib, fname)
        f.restype = ctype
        f.argtypes = [ctype]
        fns[fname] = f
    return fns


_LIBM = _load_libm()


def libm_expf(x) -> np.float32:
    """expf(x) of the C library."""
    return np.float32(_LIBM["expf"](float(x)))


def libm_tanhf(x) -> np.float32:
    """tanhf(x) of the C library."""
    return np.float32(_LIBM["tanhf"](float(x)))


def libm_expm1f(x) -> np.float32:
    """expm1f(x) of the C library."""
    return np.float32(_LIBM["expm1f"](float(x)))


def libm_erfcf(x) -> np.float32:
    """erfcf(x) of the C library."""
    return np.float32(_LIBM["erfcf"](float(x)))


def libm_logf(x) -> np.float32:
    """logf(x) of the C library."""
    return np.float32(_LIBM["logf"](float(x)))


def libm_exp(x) -> float:
    """exp(x) (double) of the C library."""
    return float(_LIBM["exp"](float(x)))


def roundf_array(x: np.ndarray) -> np.ndarray:
    """Elementwise std::round (half away from zero), exact for float32/float64 arrays."""
    t = np.trunc(x)
    frac = np.abs(x - t)  # exact: x and trunc(x) share the exponent range
    return t + np.where(frac >= 0.5, np.sign(x), 0).astype(x.dtype)


def lut_populate_8bit(input_scale: float, input_zero_point: int, output_scale: float, output_zero_point: int,
                      transform, dtype) -> np.ndarray:
    """A 256-entry table of quantize(transform(dequantize(v))) for every int8/uint8 value v (LUTPopulateInt8).

    `transform` maps a np.float32 to a np.float32 (float32 arithmetic). The table is indexed by the byte of v
    (int8 values cast to uint8) and holds output bytes, so one uint8 lookup kernel serves int8 and uint8."""
    f32 = np.float32
    info = np.iinfo(dtype)
    inverse_scale = f32(1.0) / f32(output_scale)
    table = np.zeros(256, np.uint8)
    for v in range(int(info.min), int(info.max) + 1):
        dequantized = f32(input_scale) * f32(v - input_zero_point)
        transformed = f32(transform(dequantized))
        rescaled = f32(tflite_round(float(f32(transformed * inverse_scale))))
        # the official build clamps in float before converting (an out-of-range float-to-int cast is undefined
        # behaviour, so the compiler may do so): +-inf saturate instead of becoming INT32_MIN
        q = float(f32(rescaled + f32(output_zero_point)))
        q = int(min(max(q, float(info.min)), float(info.max))) if not math.isnan(q) else int(info.min)
        table[v & 0xFF] = q & 0xFF
    return table


def lut_populate_int16(input_scale: float, input_zero_point: int, output_scale: float, output_zero_point: int,
                       transform, float_type=np.float32) -> np.ndarray:
    """The 513-entry interpolation table of an int16 -> int16 function (LUTPopulateInt16), computed in
    `float_type` (float32, or float64 for the few kernels that use the double version)."""
    ft = float_type
    input_min = ft(input_scale) * ft(-32768 - input_zero_point)
    input_max = ft(input_scale) * ft(32767 - input_zero_point)
    output_min = ft(output_scale) * ft(-32768 - output_zero_point)
    output_max = ft(output_scale) * ft(32767 - output_zero_point)
    nb_steps = 512
    step = ft((input_max - input_min) / ft(nb_steps))
    half_step = ft(step / ft(2))
    output_scaling_inv = ft(ft(65536) / ft(output_max - output_min))
    lut = np.zeros(nb_steps + 1, np.int16)
    with np.errstate(over="ignore", invalid="ignore"):
        return _lut_int16_steps(ft, transform, input_min, input_max, step, half_step, output_scaling_inv, lut)


def _lut_int16_steps(ft, transform, input_min, input_max, step, half_step, output_scaling_inv, lut):
    nb_steps = len(lut) - 1

    def rnd(x):
        """TfLiteRound in float_type."""
        return ft(tflite_round(float(x))) if math.isfinite(x) else ft(x)

    for i in range(nb_steps):
        val = ft(transform(ft(input_min + ft(ft(i) * step))))
        val_midpoint = ft(transform(ft(ft(input_min + ft(ft(i) * step)) + half_step)))
        val_next = ft(transform(ft(input_min + ft(ft(i + 1) * step))))
        sample_val = rnd(val * output_scaling_inv)
        midpoint_interp_val = rnd(ft(ft(val_next * output_scaling_inv) + rnd(val * output_scaling_inv)) / ft(2))
        midpoint_val = rnd(val_midpoint * output_scaling_inv)
        midpoint_err = ft(midpoint_interp_val - midpoint_val)
        bias = rnd(midpoint_err / ft(2))
        lut[i] = _clamp_to_int16(ft(sample_val - bias))
    lut[nb_steps] = _clamp_to_int16(rnd(ft(transform(input_max)) * output_scaling_inv))
    return lut


def _clamp_to_int16(v) -> int:
    """static_cast<int16_t>(std::min(std::max(v, -32768), 32767)): NaN passes both (and converts to 0 on x86)."""
    if math.isnan(v):
        return 0
    return int(min(max(v, -32768.0), 32767.0))


def lut_lookup_int16_array(values: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """LUTLookup over an array of int16 values: the 513-entry table interpolated on the low 7 bits."""
    v = values.astype(np.int64)
    index = 256 + (v >> 7)
    offset = v & 0x7F
    base = lut.astype(np.int64)[index]
    slope = wrap_array(lut.astype(np.int64)[index + 1] - base, 16)  # an int16 difference, wrapping
    return wrap_array(base + ((slope * offset + 64) >> 7), 16)


# --- integer arithmetic over int64 arrays (prepare-time tabulation) -------------------------------------------

def wrap_array(v: np.ndarray, bits: int = 32) -> np.ndarray:
    """Two's-complement wrap of int64 values to `bits` bits (C's conversion to int32/int16)."""
    half = np.int64(1) << (bits - 1)
    return ((np.asarray(v, np.int64) + half) & ((half << 1) - 1)) - half


def _trunc_div_pot(s: np.ndarray, bits: int) -> np.ndarray:
    """C integer division by 2^bits (truncates toward zero)."""
    return np.where(s >= 0, s >> bits, -((-s) >> bits))


def saturating_rounding_doubling_high_mul_array(a, b, bits: int = 32) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul for int32 (bits=32) or int16 (bits=16) raw values."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    lo = -(1 << (bits - 1))
    ab = a * b
    nudge = np.where(ab >= 0, np.int64(1 << (bits - 2)), np.int64(1 - (1 << (bits - 2))))
    r = wrap_array(_trunc_div_pot(ab + nudge, bits - 1), bits)
    return np.where((a == b) & (a == lo), np.int64((1 << (bits - 1)) - 1), r)


def rounding_divide_by_pot_array(x, exponent) -> np.ndarray:
    """gemmlowp RoundingDivideByPOT: x / 2^exponent rounded half away from zero (exponent >= 0)."""
    x = np.asarray(x, np.int64)
    e = np.asarray(exponent, np.int64)
    mask = (np.int64(1) << e) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + (remainder > threshold)


def multiply_by_quantized_multiplier_array(x, q: int, shift: int) -> np.ndarray:
    """MultiplyByQuantizedMultiplier (double rounding) over an array of int32 values."""
    left = shift if shift > 0 else 0
    right = -shift if shift < 0 else 0
    v = wrap_array(np.asarray(x, np.int64) * (np.int64(1) << left), 32)
    return rounding_divide_by_pot_array(saturating_rounding_doubling_high_mul_array(v, q), right)


# The official x86 build compiles TFLite's NEON code paths through an SSE translation (neon_check.h defines
# USE_NEON when SSE4.1 is available), so vector blocks of several kernels round like the ARM instructions:

def vqrdmulh_array(a, b) -> np.ndarray:
    """NEON vqrdmulh on int32: (2ab + 2^31) >> 32, i.e. the doubling high multiply rounded half *up*."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    r = (a * b + (np.int64(1) << 30)) >> 31
    return np.where((a == b) & (a == INT32_MIN), np.int64(INT32_MAX), r)


def rounding_shift_right_array(x, n: int) -> np.ndarray:
    """NEON vrshl by -n: x / 2^n rounded half up."""
    x = np.asarray(x, np.int64)
    return (x + (np.int64(1) << (n - 1))) >> n if n > 0 else x


def multiply_by_quantized_multiplier_simd_array(x, q: int, shift: int) -> np.ndarray:
    """MultiplyByQuantizedMultiplier4Rows (NEON): left shift, vqrdmulh, rounding right shift (half up)."""
    left = shift if shift > 0 else 0
    right = -shift if shift < 0 else 0
    v = wrap_array(np.asarray(x, np.int64) << left, 32)
    return rounding_shift_right_array(vqrdmulh_array(v, q), right)


def saturating_rounding_multiply_by_pot_array(x, exponent: int, bits: int = 32) -> np.ndarray:
    """gemmlowp SaturatingRoundingMultiplyByPOT<exponent> on `bits`-bit raw values."""
    x = np.asarray(x, np.int64)
    if exponent == 0:
        return x
    if exponent < 0:
        return rounding_divide_by_pot_array(x, -exponent)
    hi = (1 << (bits - 1)) - 1
    threshold = (1 << (bits - 1 - exponent)) - 1
    r = wrap_array(x << exponent, bits)
    r = np.where(x > threshold, hi, r)
    return np.where(x < -threshold, -hi - 1, r)


# --- gemmlowp fixed-point functions over arrays (int16/int32 raw values, FixedPoint<raw, integer_bits>) ------

class FixedPointArrays:
    """gemmlowp's scalar FixedPoint arithmetic over int64 arrays of raw `bits`-bit values.

    Addition and subtraction wrap like the raw C type, products are SaturatingRoundingDoublingHighMul and the
    constants are gemmlowp's int32 constants rescaled to the raw width (RescaleConstantInitializer).

    `simd=True` gives gemmlowp's SSE int16x8 semantics (used by the official x86 build on 8-element blocks): the
    doubling high multiply is _mm_mulhrs_epi16 (rounds half up) and RoundingHalfSum is an unsigned average."""

    def __init__(self, bits: int, simd: bool = False):
        self.bits = bits
        self.simd = simd
        self.raw_max = (1 << (bits - 1)) - 1
        self.raw_min = -(1 << (bits - 1))

    def wrap(self, v):
        """Wrap to the raw width."""
        return wrap_array(v, self.bits)

    def add(self, a, b):
        """a + b, wrapping like the raw type."""
        return self.wrap(np.asarray(a, np.int64) + b)

    def sub(self, a, b):
        """a - b, wrapping like the raw type."""
        return self.wrap(np.asarray(a, np.int64) - b)

    def neg(self, a):
        """-a, wrapping like the raw type."""
        return self.wrap(-np.asarray(a, np.int64))

    def mul(self, a, b):
        """Fixed-point product (SaturatingRoundingDoublingHighMul of the raws)."""
        if self.simd:
            a = np.asarray(a, np.int64)
            r = (a * b + (np.int64(1) << (self.bits - 2))) >> (self.bits - 1)
            return np.where(r == -self.raw_min, self.raw_max, r)
        return saturating_rounding_doubling_high_mul_array(a, b, self.bits)

    def rescale(self, x, src_integer_bits: int, dst_integer_bits: int):
        """gemmlowp Rescale<dst>(x) of a value with src integer bits."""
        return saturating_rounding_multiply_by_pot_array(x, src_integer_bits - dst_integer_bits, self.bits)

    def constant(self, raw_int32: int) -> int:
        """A gemmlowp constant given as its int32 raw value, in this raw width."""
        return int(rounding_divide_by_pot_array(np.int64(raw_int32), 32 - self.bits))

    def one(self, integer_bits: int) -> int:
        """The raw of 1.0 (the maximum raw when there are no integer bits)."""
        return self.raw_max if integer_bits == 0 else 1 << (self.bits - 1 - integer_bits)

    def constant_pot(self, integer_bits: int, exponent: int) -> int:
        """The raw of 2^exponent."""
        return 1 << (self.bits - 1 - integer_bits + exponent)

    def saturating_add(self, a, b):
        """a + b saturated to the raw range."""
        return np.clip(np.asarray(a, np.int64) + b, self.raw_min, self.raw_max)

    def add_saturating_if_16bit(self, a, b):
        """Saturating for int16 raws, wrapping for int32 (gemmlowp AddSaturatingIf16Bit)."""
        return self.saturating_add(a, b) if self.bits == 16 else self.add(a, b)

    def rounding_half_sum(self, a, b):
        """(a + b) / 2 rounded (gemmlowp RoundingHalfSum)."""
        s = np.asarray(a, np.int64) + b
        if self.simd:
            return (s + 1) >> 1
        return self.wrap(_trunc_div_pot(s + np.where(s >= 0, 1, -1), 1))

    def exp_on_interval_between_negative_one_quarter_and_0_excl(self, a):
        """exp(a) for a in [-1/4, 0) on F0 by a polynomial around -1/8."""
        constant_term = self.constant(1895147668)
        constant_1_over_3 = self.constant(715827883)
        x = self.add(a, self.constant_pot(0, -3))
        x2 = self.mul(x, x)
        x3 = self.mul(x2, x)
        x4 = self.mul(x2, x2)
        x4_over_4 = saturating_rounding_multiply_by_pot_array(x4, -2, self.bits)
        poly = saturating_rounding_multiply_by_pot_array(
            self.add(self.mul(self.add(x4_over_4, x3), constant_1_over_3), x2), -1, self.bits)
        return self.add_saturating_if_16bit(constant_term, self.mul(constant_term, self.add(x, poly)))

    def exp_on_negative_values(self, a, integer_bits: int):
        """exp(a) for a <= 0 given with `integer_bits`, as F0 (barrel shifter over exp(-2^k))."""
        fractional_bits = self.bits - 1 - integer_bits
        one_quarter = self.constant_pot(integer_bits, -2)
        mask = one_quarter - 1
        a = np.asarray(a, np.int64)
        a_mod_quarter_minus_one_quarter = self.sub(a & mask, one_quarter)
        result = self.exp_on_interval_between_negative_one_quarter_and_0_excl(
            self.rescale(a_mod_quarter_minus_one_quarter, integer_bits, 0))
        remainder = self.sub(a_mod_quarter_minus_one_quarter, a)
        for exponent, multiplier in ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
                                     (2, 39332535), (3, 720401), (4, 242)):
            if integer_bits > exponent:
                shift = fractional_bits + exponent
                k = self.constant(multiplier)
                result = np.where((remainder & (1 << shift)) != 0, self.mul(result, k), result)
        if integer_bits > 5:
            clamp = self.constant(-(1 << (36 - integer_bits)))
            result = np.where(a < clamp, 0, result)
        return np.where(a == 0, self.one(0), result)

    def _newton_one_over(self, a):
        """x ≈ 1 / (1 + a) on F2 via three Newton-Raphson steps (shared by the two gemmlowp functions)."""
        half_denominator = self.rounding_half_sum(a, self.one(0))
        c48_17 = self.constant(1515870810)
        cneg32_17 = self.constant(-1010580540)
        x = self.add(c48_17, self.mul(half_denominator, cneg32_17))
        one_f2 = self.one(2)
        for _ in range(3):
            half_denominator_times_x = self.mul(half_denominator, x)
            one_minus = self.sub(one_f2, half_denominator_times_x)
            x = self.add(x, self.rescale(self.mul(x, one_minus), 2 + 2, 2))
        return x

    def one_over_one_plus_x_for_x_in_0_1(self, a):
        """1 / (1 + a) for a in [0, 1] on F0."""
        x = self._newton_one_over(a)
        return self.rescale(x, 2 - 1, 0)  # ExactMulByPot<-1> keeps the raw, one integer bit less

    def one_minus_x_over_one_plus_x_for_x_in_0_1(self, a):
        """(1 - a) / (1 + a) for a in [0, 1] on F0."""
        x = self._newton_one_over(a)
        return self.rescale(self.sub(x, self.one(2)), 2, 0)

    def logistic(self, a, integer_bits: int):
        """logistic(a) as F0 for a given with `integer_bits`."""
        a = np.asarray(a, np.int64)
        positive = a > 0
        abs_input = np.where(positive, a, self.neg(a))
        result_if_positive = self.one_over_one_plus_x_for_x_in_0_1(
            self.exp_on_negative_values(self.neg(abs_input), integer_bits))
        result_if_negative = self.sub(self.one(0), result_if_positive)
        one_half = self.constant(1 << 30)
        return np.where(a == 0, one_half, np.where(positive, result_if_positive, result_if_negative))

    def tanh(self, a, integer_bits: int):
        """tanh(a) as F0 for a given with `integer_bits`."""
        a = np.asarray(a, np.int64)
        negative = a < 0
        n = np.where(negative, a, self.neg(a))
        # ExactMulByPot<1>: same raw, one more integer bit
        t = self.one_minus_x_over_one_plus_x_for_x_in_0_1(self.exp_on_negative_values(n, integer_bits + 1))
        return np.where(a == 0, 0, np.where(negative, self.neg(t), t))


def inv_sqrt_quantized_multiplier_exp(value: int, reverse_shift: int = -1) -> tuple[int, int]:
    """(multiplier, shift) of 1/sqrt(value) (GetInvSqrtQuantizedMultiplierExp), integer Newton-Raphson."""
    if value <= 1:
        return INT32_MAX, 0
    fp = FixedPointArrays(32)
    output_shift = 11
    while value >= (1 << 29):
        value //= 4
        output_shift += 1
    max_left_shift_bits = (32 - value.bit_length()) - 1
    left_shift_bit_pairs = max_left_shift_bits // 2 - 1
    output_shift -= left_shift_bit_pairs
    value <<= 2 * left_shift_bit_pairs
    fixedpoint_input = np.int64(value >> 1)  # F3
    half_input = saturating_rounding_multiply_by_pot_array(fixedpoint_input, -1)
    half_three = fp.constant((1 << 28) + (1 << 27))
    x = np.int64(fp.one(3))
    for _ in range(5):
        x3 = fp.rescale(fp.mul(fp.mul(x, x), x), 9, 3)
        x = fp.rescale(fp.sub(fp.mul(half_three, x), fp.mul(half_input, x3)), 6, 3)
    half_sqrt_2 = fp.constant(1518500250)
    inv = int(fp.mul(x, half_sqrt_2))
    if output_shift < 0:
        inv = int(wrap_array(np.int64(inv) << -output_shift, 32))
        output_shift = 0
    return inv, output_shift * reverse_shift


# sigmoid(i / 24), i = 0..255, in unsigned 0.16 fixed point: the constant table of the official int16 LOGISTIC and
# TANH kernels (tflite/kernels/internal/common.h). Its entries are tuned for interpolation (44 of them differ from
# round(65536 * sigmoid(i / 24))), so bit-exact results need the published values themselves.
SIGMOID_TABLE_UINT16 = np.array([
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794, 41432,
    42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443, 48964, 49475,
    49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169, 53581, 53983, 54374, 54755, 55125, 55485,
    55834, 56174, 56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519,
    59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279, 61441, 61599, 61750, 61896, 62036,
    62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186, 63279, 63368, 63454, 63536,
    63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308, 64357, 64405,
    64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900,
    64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179,
    65194, 65208, 65221, 65234, 65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337,
    65345, 65352, 65360, 65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425,
    65429, 65433, 65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474,
    65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498, 65500, 65501,
    65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516, 65517,
    65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524, 65525, 65525,
    65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530,
    65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533,
    65533, 65533, 65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534,
    65534, 65534, 65534, 65535,
], np.int64)


# --- kernels' scalar arithmetic (njit) ------------------------------------------------------------------------

@njit(cache=True)
def saturating_rounding_doubling_high_mul(a, b):
    """High 32 bits of 2*a*b, rounded half away from zero; saturates the one overflow case."""
    a = np.int64(a)
    b = np.int64(b)
    if a == b and a == INT32_MIN:
        return np.int64(INT32_MAX)
    ab = a * b
    # (ab + nudge) / 2^31 with C's truncating division, written with shifts
    if ab >= 0:
        return (ab + (np.int64(1) << 30)) >> 31
    return -((-ab + ((np.int64(1) << 30) - 1)) >> 31)


@njit(cache=True)
def rounding_divide_by_pot(x, exponent):
    """x / 2^exponent rounded half away from zero."""
    x = np.int64(x)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


@njit(cache=True)
def multiply_by_quantized_multiplier(x, q, shift):
    """round(x * q * 2^(shift - 31)) the way TFLite's MultiplyByQuantizedMultiplier rounds (int32 semantics)."""
    left = shift if shift > 0 else 0
    right = -shift if shift < 0 else 0
    v = np.int64(x) * (np.int64(1) << left)
    # the left-shifted value is an int32 in TFLite; wrap like it does
    v = np.int64(np.int32(v))
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(v, q), right)


@njit(cache=True)
def multiply_by_quantized_multiplier_int64(x, q, shift):
    """MultiplyByQuantizedMultiplier for an int64 accumulator (|x| < 2^47; 16-bit activation kernels): the
    multiplier is reduced to 16 bits and one rounding shift is applied."""
    reduced = (np.int64(q) + (1 << 15)) >> 16 if q < 0x7FFF0000 else np.int64(0x7FFF)
    total_shift = 15 - shift
    v = np.int64(x) * reduced + (np.int64(1) << (total_shift - 1))
    return np.int64(np.int32(v >> total_shift))


@njit(cache=True)
def clamp(v, lo, hi):
    """min(max(v, lo), hi)."""
    return min(max(v, lo), hi)


@njit(cache=True)
def round_half_away(v):
    """std::round on a float (exact; np.round rounds half to even)."""
    t = np.trunc(v)
    if abs(v - t) >= 0.5:
        t += 1.0 if v > 0 else -1.0
    return t
