"""The official x86 runtime's dynamic (hybrid) input quantization of float rows to int8, its all-zero input test,
and the weights it refuses, for the hybrid kernels (float activations, int8 weights: FULLY_CONNECTED, CONV_2D, the
LSTM, RNN and SVDF).

The official x86 wheel builds TFLite's NEON tensor utilities through the NEON_2_SSE translation header
(tensorflow/lite/kernels/internal/optimized/neon_tensor_utils.cc). For finite rows the quantization is the usual
symmetric / asymmetric int8 scheme (`quantize_rows`); a NaN or an infinity changes it in three places, which this
module reproduces (measured against ai-edge-litert 2.3.0; the asymmetric variant is described at
quantize_row_asymmetric_nonfinite):

- The range. NeonSymmetricQuantizeFloats takes min and max with `std::minmax_element` (libstdc++: pairs of
  elements, the first smallest and the *last* largest under `<`) and the range as `std::max(|min|, |max|)`. Every
  comparison with a NaN is false, so a NaN can be picked as the minimum or the maximum or be skipped, by its
  position: [0.17, NaN, 0.11] has the range 0.11 (the NaN is the maximum, `std::max(0.11, NaN)` keeps 0.11), so the
  row quantizes to [127, -127, 127] with a finite scale, and the output is finite.
- The conversion to int32. The vector loop (blocks of 8) rounds as RoundToNearest (v +- 0.5, then
  vcvtq_s32_f32 = cvttps2dq with values >= 2^31 flipped to INT32_MAX); the tail is
  `static_cast<int32_t>(std::round(v))`, cvttss2si. A NaN, and in the tail any value outside int32 (+inf
  included), becomes INT32_MIN, which the clamp turns into -127.
- The all-zero test (NeonIsZeroVector, which the hybrid FULLY_CONNECTED uses to skip the product and return the
  bias): blocks of four test |v| > 0, false for a NaN, the tail tests v != 0, true for a NaN. So [NaN, 0, 0, 0]
  counts as zero there and gives the bias, while [NaN, 0, 0] does not.

None of this is arithmetic anyone would define on purpose, but it is deterministic, the official runtime's answer
is finite where the NaN was skipped, and a model fed such a row (a NaN from an earlier op, a MAX_POOL of
FLT_MAX ...) gets that answer; we give the same one rather than a different garbage value.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.fixedpoint import round_half_away
from numba import njit

from lite_numba.ops import PrepareContext

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_TWO31 = 2147483648.0


@njit(cache=True, inline="always")
def cvtt_i32(v):
    """static_cast<int32_t>(v) as x86 executes it (cvttss2si): truncation; NaN and values outside int32 give
    INT32_MIN."""
    if v >= -_TWO31 and v < _TWO31:
        return np.int64(v)
    return np.int64(_INT32_MIN)


@njit(cache=True, inline="always")
def neon_round_i32(p):
    """RoundToNearest of the NEON_2_SSE build: p + (p < 0 ? -0.5 : 0.5) in float32, then vcvtq_s32_f32
    (cvttps2dq, values >= 2^31 flipped to INT32_MAX; NaN and values below -2^31 give INT32_MIN)."""
    half = np.float32(-0.5) if p < 0 else np.float32(0.5)
    t = np.float32(p + half)
    if t >= _TWO31:
        return np.int64(_INT32_MAX)
    return cvtt_i32(t)


@njit(cache=True, inline="always")
def std_round_f(p):
    """std::round(p) (half away from zero) as a float64; NaN and infinities pass through."""
    v = np.float64(p)
    if not (abs(v) < 4503599627370496.0):  # NaN, infinities, and values already integral
        return v
    return round_half_away(v)


@njit(cache=True, inline="always")
def std_round_i32(p):
    """static_cast<int32_t>(std::round(p)) on x86: half away from zero; NaN and values outside int32 (infinities
    included) give INT32_MIN."""
    return cvtt_i32(std_round_f(p))


@njit(cache=True, inline="always")
def stl_minmax(x, start, n):
    """Indices of libstdc++'s std::minmax_element(x + start, x + start + n) (n >= 1): pairs compared first, the first
    smallest and the last largest under `<`."""
    if n == 1:
        return start, start
    if x[start + 1] < x[start]:
        mn, mx = start + 1, start
    else:
        mn, mx = start, start + 1
    i = start + 2
    end = start + n
    while i < end:
        if i + 1 == end:
            if x[i] < x[mn]:
                mn = i
            elif not (x[i] < x[mx]):
                mx = i
            break
        if x[i + 1] < x[i]:
            if x[i + 1] < x[mn]:
                mn = i + 1
            if not (x[i] < x[mx]):
                mx = i
        else:
            if x[i] < x[mn]:
                mn = i
            if not (x[i + 1] < x[mx]):
                mx = i + 1
        i += 2
    return mn, mx


@njit(cache=True, inline="always")
def asymmetric_zero_point(lo, hi, scale):
    """NeonAsymmetricQuantizeFloats' int8 zero point for the range [lo, hi] (float64) and its scale: from the end
    whose error is smaller, clamped to [-128, 127], else rounded half away from zero (std::round); 0 for a NaN, which
    only a NaN scale gives (every output is NaN then, whatever the zero point). Finite and non-finite rows alike."""
    zp_from_min = -128.0 - lo / scale
    zp_from_max = 127.0 - hi / scale
    err_min = 128.0 + abs(lo / scale)
    err_max = 127.0 + abs(hi / scale)
    zpd = zp_from_min if err_min < err_max else zp_from_max
    if zpd <= -128.0:
        return -128
    if zpd >= 127.0:
        return 127
    if zpd != zpd:
        return 0
    return int(round_half_away(zpd))


@njit(cache=True, nogil=True, error_model="numpy")
def quantize_row_symmetric_nonfinite(x, base, K, q):
    """Quantize x[base:base + K] (K >= 1, holding a NaN or an infinity) symmetrically into q[base:base + K] as the
    official x86 build does (NeonSymmetricQuantizeFloats); returns the scaling factor."""
    nvec = K - K % 8
    mn, mx = stl_minmax(x, base, K)
    a = abs(x[mn])
    b = abs(x[mx])
    rng = b if a < b else a  # std::max(a, b)
    if rng == 0:
        for k in range(K):
            q[base + k] = 0
        return np.float32(1.0)
    sf = np.float32(rng / np.float32(127.0))
    inv = np.float32(np.float32(127.0) / rng)
    for k in range(K):
        p = np.float32(x[base + k] * inv)
        c = neon_round_i32(p) if k < nvec else std_round_i32(p)
        q[base + k] = np.int8(min(127, max(-127, c)))
    return sf


@njit(cache=True, nogil=True, error_model="numpy")
def quantize_row_asymmetric_nonfinite(x, base, K, q):
    """Quantize x[base:base + K] (K >= 1, holding a NaN or an infinity) asymmetrically into q[base:base + K] as the
    official x86 build does (NeonAsymmetricQuantizeFloats); returns (scaling factor, zero point).

    Measured (ai-edge-litert 2.3.0, 7,200 rows of 1-24 values with NaN, +-inf, +-FLT_MAX and +-1e30 mixed in, all
    agreeing): NeonMinMax folds blocks of four (`a < b ? a : b`, pairs then halves), then the tail's
    std::minmax_element, each merged into the range that starts at 0 so that a NaN never replaces it (the
    compiled merge keeps the running value); the range is a float32 difference (+-FLT_MAX give an infinite scale).
    Values are quantized as for a finite row in the vector loop (RoundToNearest, zero point added in int32,
    wrapping; a NaN is INT32_MIN there); in the tail a NaN becomes 0 and anything else is clamped as a float."""
    post = K - K % 4
    rmin = 0.0
    rmax = 0.0
    if post:
        m0, m1, m2, m3 = x[base], x[base + 1], x[base + 2], x[base + 3]
        h0, h1, h2, h3 = m0, m1, m2, m3
        for i in range(4, post, 4):
            v0, v1, v2, v3 = x[base + i], x[base + i + 1], x[base + i + 2], x[base + i + 3]
            m0 = m0 if m0 < v0 else v0
            m1 = m1 if m1 < v1 else v1
            m2 = m2 if m2 < v2 else v2
            m3 = m3 if m3 < v3 else v3
            h0 = h0 if h0 > v0 else v0
            h1 = h1 if h1 > v1 else v1
            h2 = h2 if h2 > v2 else v2
            h3 = h3 if h3 > v3 else v3
        l0 = m0 if m0 < m2 else m2
        l1 = m1 if m1 < m3 else m3
        fmin = l1 if l0 > l1 else l0
        g0 = h0 if h0 > h2 else h2
        g1 = h1 if h1 > h3 else h3
        fmax = g1 if g0 < g1 else g0
        if fmin < rmin:
            rmin = np.float64(fmin)
        if fmax > rmax:
            rmax = np.float64(fmax)
    if post < K:
        i1, i2 = stl_minmax(x, base + post, K - post)
        if x[i1] < rmin:
            rmin = np.float64(x[i1])
        if x[i2] > rmax:
            rmax = np.float64(x[i2])
    lo32 = np.float32(rmin)
    hi32 = np.float32(rmax)
    if lo32 == hi32:
        for k in range(K):
            q[base + k] = 0
        return np.float32(1.0), 0
    lo = np.float64(lo32)
    hi = np.float64(hi32)
    scale = np.float64(np.float32(hi32 - lo32)) / 255.0
    off = asymmetric_zero_point(lo, hi, scale)
    sf = np.float32(scale)
    inv = np.float32(0.0) if sf == 0 else np.float32(1.0 / np.float64(sf))
    nvec = K - K % 8
    for k in range(K):
        p = np.float32(x[base + k] * inv)
        if k < nvec:
            c = np.int64(np.int32(neon_round_i32(p) + off))  # vaddq_s32 wraps
            q[base + k] = np.int8(min(127, max(-128, c)))
        else:
            v = np.float32(np.float32(off) + np.float32(std_round_f(p)))
            if v != v:
                q[base + k] = 0
            else:
                q[base + k] = np.int8(np.int64(min(np.float32(127.0), max(np.float32(-128.0), v))))
    return sf, off


@njit(cache=True, nogil=True, inline="always")
def official_is_zero_vector(x, start, n):
    """NeonIsZeroVector(x + start, n) of the official x86 build: blocks of four test |v| > 0 (false for a NaN), the
    tail v != 0 (true for a NaN)."""
    post = n - n % 4
    for k in range(start, start + post):
        if abs(x[k]) > 0:
            return False
    for k in range(start + post, start + n):
        if x[k] != 0:
            return False
    return True


@njit(cache=True, inline="always")
def round_neon(v):
    """The official RoundToNearest of NEON_2_SSE builds: trunc(v +- 0.5) in float32 (ties away from zero, but
    v + 0.5 itself rounds, e.g. 0.49999997 -> 1)."""
    half = np.float32(-0.5) if v < 0 else np.float32(0.5)
    return np.float64(np.trunc(np.float32(v + half)))


@njit(cache=True, inline="always")
def _round_f(v):
    # TfLiteRound (std::round) of a float
    return round_half_away(np.float64(v))


@njit(cache=True, nogil=True)
def quantize_rows(x, rows, K, asymmetric, q, sf, zp):
    """Quantize each row of the flat [rows, K] float32 x to int8 like TFLite's BatchQuantizeFloats: scaling factor
    sf[r] and zero point zp[r] (0 when symmetric).

    As the official x86 build computes it (NeonSymmetricQuantizeFloats / NeonAsymmetricQuantizeFloats through
    NEON_2_SSE): blocks of 8 values are rounded by the vector code (round_neon: trunc(v +- 0.5) in float32), the
    tail by std::round; the asymmetric zero point is added after rounding, the asymmetric range is a float32
    difference and its inverse scale a double division. A row holding a NaN or an infinity goes to
    quantize_row_symmetric_nonfinite / quantize_row_asymmetric_nonfinite, which reproduce what the official build
    does with it."""
    nvec = (K // 8) * 8
    for r in range(rows):
        base = r * K
        if K == 0:
            sf[r] = np.float32(1.0)
            zp[r] = 0
            continue
        mn = x[base]
        mx = x[base]
        nonfinite = x[base] * np.float32(0.0)  # stays 0 unless a value is NaN or infinite
        for k in range(1, K):
            v = x[base + k]
            mn = min(mn, v)
            mx = max(mx, v)
            nonfinite += v * np.float32(0.0)
        if nonfinite != 0:  # NaN: the official NaN- and inf-dependent range and conversions
            if asymmetric:
                sf[r], zp[r] = quantize_row_asymmetric_nonfinite(x, base, K, q)
            else:
                sf[r] = quantize_row_symmetric_nonfinite(x, base, K, q)
                zp[r] = 0
            continue
        if not asymmetric:
            rng = max(abs(mn), abs(mx))
            zp[r] = 0
            if rng == 0:
                sf[r] = np.float32(1.0)
                for k in range(K):
                    q[base + k] = 0
                continue
            sf[r] = rng / np.float32(127.0)
            inv = np.float32(127.0) / rng
            for k in range(K):
                p = x[base + k] * inv
                v = round_neon(p) if k < nvec else _round_f(p)
                q[base + k] = np.int8(min(127.0, max(-127.0, v)))
        else:
            rmin = np.float64(min(np.float32(0.0), mn))
            rmax = np.float64(max(np.float32(0.0), mx))
            if rmin == rmax:
                sf[r] = np.float32(1.0)
                zp[r] = 0
                for k in range(K):
                    q[base + k] = 0
                continue
            scale = np.float64(np.float32(rmax - rmin)) / 255.0
            off = asymmetric_zero_point(rmin, rmax, scale)
            sf[r] = np.float32(scale)
            zp[r] = off
            inv = np.float32(1.0 / np.float64(np.float32(scale)))
            for k in range(K):
                p = x[base + k] * inv
                v = off + (round_neon(p) if k < nvec else _round_f(p))
                q[base + k] = np.int8(min(127.0, max(-128.0, v)))


def refuse_minus_128(ctx: PrepareContext, name: str, values) -> None:
    """Hybrid weights that the official x86 build multiplies in its int8 matrix-vector product (FULLY_CONNECTED and
    the LSTM, RNN and SVDF matrices) must lie in [-127, 127], as TFLite's int8 quantization spec says: that product
    takes |input| and moves the input's sign onto the weight, and -128 has no positive counterpart, so its products
    with negative inputs come out with the wrong sign there. A -128 is refused rather than answered differently."""
    # the minimum, a reduction: no boolean copy of the weights (160 MiB for Gemma 3 270M's logits layer)
    v = None if values is None else np.asarray(values).view(np.int8)
    if v is not None and v.size and v.min() == -128:
        ctx.fail(f"{name} holds -128: hybrid (dynamic-range) int8 weights must lie in [-127, 127] (TFLite's int8 "
                 f"quantization spec; the official kernels compute -128 times a negative input with the wrong sign)")
