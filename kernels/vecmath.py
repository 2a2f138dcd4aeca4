"""Float32 exp and erfc written so that LLVM vectorizes loops calling them (np.exp / math.erfc are one libm call per
element, which no loop vectorizer can widen).

exp: exp(t) = p(f) * 2**k with k = round(t / ln 2), f = t - k ln 2 (|f| <= ln 2 / 2, ln 2 split in two parts so
k ln 2 is exact), p a degree-6 Taylor polynomial (truncation ~1e-7 relative) and 2**k built from its exponent bits.
erfc: the Chebyshev-fitted form t exp(-z^2 + poly(t)), t = 1 / (1 + z/2), whose fractional error is below 1.2e-7
for every z >= 0 (Press et al., Numerical Recipes, section 6.2). Both are compared with the official runtime's libm
results by the activation and softmax tests."""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from .llvm_ir import F32, I32


@intrinsic
def f32_from_bits(typingctx, bits):
    """The float32 whose IEEE bits are the low 32 bits of the integer `bits` (a bitcast, no conversion)."""
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        v = args[0]
        if bits.bitwidth > 32:
            v = builder.trunc(v, I32)
        elif bits.bitwidth < 32:
            v = builder.sext(v, I32)
        return builder.bitcast(v, F32)

    return types.float32(bits), codegen


@intrinsic
def fdiv(typingctx, a, b):
    """a / b for float32 without Numba's division-by-zero check (which the default error model adds to every
    division, and whose branch stops loop vectorization): IEEE results, inf or NaN for a zero divisor."""
    if a != types.float32 or b != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.fdiv(args[0], args[1])

    return types.float32(types.float32, types.float32), codegen


_LOG2E = np.float32(1.44269504)
_LN2_HI = np.float32(0.693359375)  # 355/512: k * _LN2_HI is exact for |k| < 2**15
_LN2_LO = np.float32(-2.12194440e-4)


@njit(cache=True, inline="always")
def exp_f32(t):
    """exp(t) for float32 t: ~2e-7 relative error; 0 below -87.3 (where float32's normal range ends), exp(88.7)
    above 88.7 (not inf), NaN for NaN."""
    c = min(max(t, np.float32(-87.3)), np.float32(88.7))
    k = np.floor(c * _LOG2E + np.float32(0.5))
    f = c - k * _LN2_HI - k * _LN2_LO
    p = np.float32(1.0 / 720)
    p = p * f + np.float32(1.0 / 120)
    p = p * f + np.float32(1.0 / 24)
    p = p * f + np.float32(1.0 / 6)
    p = p * f + np.float32(0.5)
    p = p * f + np.float32(1.0)
    p = p * f + np.float32(1.0)
    # 2**k as 2**h * 2**(k - h), h = k // 2: both factors are normal floats for every k in [-126, 128]
    i = np.int32(k)
    h = i >> 1
    r = p * f32_from_bits((h + 127) << 23) * f32_from_bits((i - h + 127) << 23)
    r = r if t >= np.float32(-87.3) else np.float32(0.0)
    return r if t == t else t


@njit(cache=True, inline="always")
def erfc_f32(z):
    """erfc(z) for float32 z (both signs): fractional error ~1.2e-7 plus float32 rounding."""
    a = abs(z)
    t = fdiv(np.float32(1.0), np.float32(1.0) + np.float32(0.5) * a)
    q = np.float32(0.17087277)
    q = q * t + np.float32(-0.82215223)
    q = q * t + np.float32(1.48851587)
    q = q * t + np.float32(-1.13520398)
    q = q * t + np.float32(0.27886807)
    q = q * t + np.float32(-0.18628806)
    q = q * t + np.float32(0.09678418)
    q = q * t + np.float32(0.37409196)
    q = q * t + np.float32(1.00002368)
    q = q * t + np.float32(-1.26551223)
    e = t * exp_f32(q - a * a)
    return e if z >= 0 else np.float32(2.0) - e


@njit(cache=True, inline="always")
def tanh_f32(x):
    """tanh(x) for float32 x: the odd Taylor series to x**9 for |x| < 0.25 (next term below 3e-9), else
    1 - 2 / (exp(2|x|) + 1) (absolute error ~1e-7, relative ~4e-7 at |x| = 0.25); NaN for NaN, +-1 at +-inf."""
    a = abs(x)
    s = x * x
    p = np.float32(62.0 / 2835)
    p = p * s + np.float32(-17.0 / 315)
    p = p * s + np.float32(2.0 / 15)
    p = p * s + np.float32(-1.0 / 3)
    small = x + x * s * p
    big = np.float32(1.0) - fdiv(np.float32(2.0), exp_f32(np.float32(2.0) * a) + np.float32(1.0))
    big = big if x >= 0 else -big
    r = small if a < np.float32(0.25) else big
    return r if x == x else x


@njit(cache=True, inline="always")
def sigmoid_f32(x):
    """1 / (1 + exp(-x)), as exp(x) / (1 + exp(x)) for negative x (no overflow); NaN for NaN."""
    e = exp_f32(-abs(x))
    r = fdiv(np.float32(1.0), np.float32(1.0) + e)
    return r if x >= 0 else e * r
