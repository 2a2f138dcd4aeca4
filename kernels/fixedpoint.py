"""TFLite's integer requantization arithmetic, implemented once for every quantized kernel.

A real multiplier m > 0 is represented as q * 2^(shift - 31) with q an int32 in [2^30, 2^31) (quantize_multiplier).
Applying it to an int32 accumulator x is a rounding doubling high multiply followed by a rounding right shift
(multiply_by_quantized_multiplier), both rounding half away from zero, as the optimized builtin kernels do.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


def quantize_multiplier(m: float) -> tuple[int, int]:
    """(q, shift) with m ≈ q * 2^(shift - 31); q in [2^30, 2^31) or 0. Double-precision, like TFLite."""
    if m == 0.0:
        return 0, 0
    mant, shift = math.frexp(m)
    q = int(round(mant * (1 << 31)))
    if q == (1 << 31):
        q //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if shift > 30:
        return INT32_MAX, 30
    return q, shift


def quantize_multiplier_smaller_than_one(m: float) -> tuple[int, int]:
    """As quantize_multiplier for 0 <= m < 1; shift <= 0."""
    if not 0.0 <= m < 1.0:
        raise ValueError(f"multiplier {m} is not in [0, 1)")
    return quantize_multiplier(m)


def quantize_multipliers(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (q, shift) arrays (int32, int32) for an array of real multipliers."""
    qs = np.zeros(len(scales), np.int32)
    ss = np.zeros(len(scales), np.int32)
    for i, m in enumerate(np.asarray(scales, np.float64)):
        qs[i], ss[i] = quantize_multiplier(float(m))
    return qs, ss


@njit(cache=True, inline="always")
def saturating_rounding_doubling_high_mul(a, b):
    """High 32 bits of 2*a*b, rounded half away from zero; saturates the one overflow case."""
    a = np.int64(a)
    b = np.int64(b)
    if a == b and a == INT32_MIN:
        return np.int64(INT32_MAX)
    ab = a * b
    nudge = np.int64(1 << 30) if ab >= 0 else np.int64(1 - (1 << 30))
    s = ab + nudge
    # C++ integer division truncates toward zero
    q = s // np.int64(1 << 31)
    if s < 0 and q * np.int64(1 << 31) != s:
        q += 1
    return q


@njit(cache=True, inline="always")
def rounding_divide_by_pot(x, exponent):
    """x / 2^exponent rounded half away from zero."""
    x = np.int64(x)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


@njit(cache=True, inline="always")
def multiply_by_quantized_multiplier(x, q, shift):
    """round(x * q * 2^(shift - 31)) the way TFLite's MultiplyByQuantizedMultiplier rounds (int32 semantics)."""
    left = shift if shift > 0 else 0
    right = -shift if shift < 0 else 0
    v = np.int64(x) * (np.int64(1) << left)
    # the left-shifted value is an int32 in TFLite; wrap like it does
    v = np.int64(np.int32(v))
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(v, q), right)


@njit(cache=True, inline="always")
def clamp(v, lo, hi):
    return min(max(v, lo), hi)
