"""The compiled loops of the reductions (reduce.py's prepares schedule them): the running reductions over
(outer, reduced, inner) views and over scattered axes (make_reducer), MEAN's and the quantized MEAN / SUM's finishing
steps, the quantized REDUCE_PROD, ARG_MAX / ARG_MIN (make_arg) and CUMSUM. The orders and roundings they follow are
described in reduce.py."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.fixedpoint import (
    INT32_MAX,
    INT32_MIN,
    multiply_by_quantized_multiplier,
    multiply_by_quantized_multiplier_int64,
)
from lite_numba.kernels.base.hybrid_quant import std_round_i32
from lite_numba.kernels.base.strided import box_walk, next_row
from numba import njit

# --- running reductions --------------------------------------------------------------------------------------------


def make_reducer(op):
    """Loops computing out[j] = op(...op(op(init, x_first), x_next)...) over the inputs of each output j, in order."""

    @njit(cache=True, nogil=True)
    def reduce3(x, out, init, outer, n, inner):
        """x viewed as (outer, n, inner), out as (outer, inner), both flat."""
        if inner == 1:
            for o in range(outer):
                acc = init[0]
                base = o * n
                for r in range(n):
                    acc = op(acc, x[base + r])
                out[o] = acc
            return
        for o in range(outer):
            ob = o * inner
            for i in range(inner):
                out[ob + i] = init[0]
            for r in range(n):
                xb = (o * n + r) * inner
                for i in range(inner):
                    out[ob + i] = op(out[ob + i], x[xb + i])

    @njit(cache=True, nogil=True)
    def reduce_nd(x, out, init, shp, ostr):
        """x of shape shp (rank 6); output offset of an input index = dot(index, ostr) (0 on reduced dims)."""
        for j in range(out.size):
            out[j] = init[0]
        n5, s5 = shp[5], ostr[5]
        walk, at = box_walk(shp, ostr, ostr, ostr)
        for r in range(walk[0]):
            for i5 in range(n5):
                j = at[1] + i5 * s5
                out[j] = op(out[j], x[r * n5 + i5])
            at = next_row(at, walk)

    return reduce3, reduce_nd


@njit(cache=True, inline="always")
def _sum(a, b):
    return a + b


@njit(cache=True, inline="always")
def _prod(a, b):
    return a * b


@njit(cache=True, inline="always")
def _max(a, b):
    # TFLite's MaxOp(current, in): (current > in) ? current : in -- the same NaN behaviour
    return a if a > b else b


@njit(cache=True, inline="always")
def _min(a, b):
    return a if a < b else b


@njit(cache=True, inline="always")
def _any(a, b):
    return a or b


@njit(cache=True, inline="always")
def _all(a, b):
    return a and b


REDUCERS = {name: make_reducer(f) for name, f in
            (("sum", _sum), ("prod", _prod), ("max", _max), ("min", _min), ("any", _any), ("all", _all))}


@njit(cache=True, nogil=True)
def fill(out, value):
    """out[:] = value[0] (what TFLite writes for reductions of an empty input)."""
    for j in range(out.size):
        out[j] = value[0]


# --- finishing steps of MEAN and the quantized MEAN / SUM ----------------------------------------------------------


@njit(cache=True, nogil=True)
def mean_float(out, n):
    """In place: float32 sum / float32 count."""
    d = np.float32(n)
    for j in range(out.size):
        out[j] = out[j] / d


@njit(cache=True, nogil=True)
def mean_int(acc, out, n):
    """out = int64 sum / count, truncated toward zero (C division)."""
    for j in range(out.size):
        a = acc[j]
        q = abs(a) // n
        out[j] = q if a >= 0 else -q


@njit(cache=True, nogil=True)
def requantize_mbqm(acc, out, c, m, s, b, lo, hi):
    """out = clamp(MultiplyByQuantizedMultiplier(int32(acc - c), m, s) + b) (TFLite's integer MEAN)."""
    for j in range(out.size):
        v = np.int64(acc[j]) - c
        v = np.int64(np.int32(v))  # the shifted sum is an int32 in TFLite
        r = np.int64(np.int32(multiply_by_quantized_multiplier(v, m, s) + b))  # int32 addition, wrapping
        out[j] = min(max(r, lo), hi)


@njit(cache=True, inline="always")
def _mbqm_simd(x, q, shift):
    """MultiplyByQuantizedMultiplier4Rows: the NEON lanes (vshl, vqrdmulh, vrshl) round ties up, not away from zero.
    The official x86 wheels run these NEON paths through an SSE translation (neon_check.h)."""
    left = shift if shift > 0 else 0
    right = -shift if shift < 0 else 0
    v = np.int64(np.int32(np.int64(x) << left))
    if v == INT32_MIN and q == INT32_MIN:
        h = np.int64(INT32_MAX)
    else:
        h = (v * q + (np.int64(1) << 30)) >> 31
    if right > 0:
        h = (h + (np.int64(1) << (right - 1))) >> right
    return h


@njit(cache=True, nogil=True)
def requantize_mean4d(acc, out, simd, depth, m, s, b, lo, hi):
    """Optimized Mean4D: out = clamp(MBQM(sum, m, s) + b); channels with simd[c] took the 16-lane NEON path."""
    for j in range(out.size):
        if simd[j % depth]:
            r = _mbqm_simd(acc[j], m, s) + b
        else:
            r = multiply_by_quantized_multiplier(acc[j], m, s) + b
        r = np.int64(np.int32(r))  # int32 addition (C and vaddq_s32), wrapping
        out[j] = min(max(r, lo), hi)


@njit(cache=True, nogil=True)
def requantize_float(acc, out, scale, bias, zp, lo, hi):
    """out = clamp(int32(round(float32(acc) * scale + bias)) + zp) in float32 (TFLite's optimized quantized SUM).
    A rounded value outside int32 converts as x86 does it (cvttss2si: INT32_MIN) and the int32 addition of the
    zero point wraps, as in the official kernel."""
    sc = np.float32(scale)
    bi = np.float32(bias)
    for j in range(out.size):
        v = np.float32(acc[j]) * sc + bi
        r = np.int64(np.int32(std_round_i32(v) + zp))
        out[j] = min(max(r, lo), hi)


# --- quantized REDUCE_PROD -----------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def fill_copy(x, out):
    """out[:] = x[:] (same dtype and size)."""
    for j in range(out.size):
        out[j] = x[j]


@njit(cache=True, nogil=True)
def qprod3(x, acc, outer, n, inner, zp, m, s):
    """int32 running products of (x - zp) over the middle axis of (outer, n, inner), rescaled by (m, s) at every
    step after the first (TFLite's ReducerFirst / ReducerNext)."""
    for o in range(outer):
        for i in range(inner):
            base = o * n * inner + i
            p = np.int64(x[base]) - zp
            for r in range(1, n):
                p = multiply_by_quantized_multiplier_int64(p * (np.int64(x[base + r * inner]) - zp), m, s)
            acc[o * inner + i] = p


@njit(cache=True, nogil=True)
def qprod_nd(x, acc, seen, shp, ostr, zp, m, s):
    """qprod3 for scattered reduced axes: the input is walked in memory order; `seen` marks started outputs."""
    for j in range(seen.size):
        seen[j] = 0
    n5, s5 = shp[5], ostr[5]
    walk, at = box_walk(shp, ostr, ostr, ostr)
    for r in range(walk[0]):
        for i5 in range(n5):
            j = at[1] + i5 * s5
            d = np.int64(x[r * n5 + i5]) - zp
            if seen[j]:
                acc[j] = multiply_by_quantized_multiplier_int64(np.int64(acc[j]) * d, m, s)
            else:
                acc[j] = d
                seen[j] = 1
        at = next_row(at, walk)


@njit(cache=True, nogil=True)
def qprod_finish(acc, out, zp, m, s, lo, hi):
    """out = clamp(MultiplyByQuantizedMultiplier(int64 product, m, s) + zp), the product's last rescale."""
    for j in range(out.size):
        r = multiply_by_quantized_multiplier_int64(np.int64(acc[j]), m, s) + zp
        out[j] = min(max(r, lo), hi)


# --- ARG_MAX / ARG_MIN ---------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _wins(c, cur, greater, nan_rules):
    """Whether c replaces the extreme cur: a strict comparison; with nan_rules a NaN never wins and any number
    replaces a NaN."""
    if nan_rules:
        if np.isnan(c):
            return False
        if np.isnan(cur):
            return True
    return c > cur if greater else c < cur


@njit(cache=True, inline="always")
def _pair(a, b, greater):
    """The SSE max / min of a and b: the second operand unless the comparison holds (a NaN a gives b)."""
    if greater:
        return b if a < b else a
    return b if a > b else a


def make_arg(greater: bool, nan_rules: bool):
    """out[o, i] = first index r of the extreme value of x[o, :, i] (strict comparisons, as TFLite).

    nan_rules: ARG_MAX / ARG_MIN of float32 with the official NaN handling: a NaN never wins and any number
    replaces a NaN (reference kernel, inner size > 1). Over the last axis the official kernel keeps 4 lanes
    (elements i mod 4 of the first n // 4 * 4), reduces them pairwise with an SSE max/min that returns its first
    argument when it is NaN, finishes the tail serially, and answers 0 if the extreme is still NaN; that is replayed
    here."""

    @njit(cache=True, nogil=True)
    def arg(x, out, outer, n, inner):
        for o in range(outer):
            for i in range(inner):
                base = o * n * inner + i
                best = x[base]
                idx = 0
                r = 1
                if nan_rules and inner == 1 and n >= 4:
                    v0, v1, v2, v3 = x[base], x[base + 1], x[base + 2], x[base + 3]
                    i0, i1, i2, i3 = 0, 1, 2, 3
                    r = 4
                    while r <= n - 4:
                        if _wins(x[base + r], v0, greater, True):
                            v0, i0 = x[base + r], r
                        if _wins(x[base + r + 1], v1, greater, True):
                            v1, i1 = x[base + r + 1], r + 1
                        if _wins(x[base + r + 2], v2, greater, True):
                            v2, i2 = x[base + r + 2], r + 2
                        if _wins(x[base + r + 3], v3, greater, True):
                            v3, i3 = x[base + r + 3], r + 3
                        r += 4
                    best = _pair(_pair(v0, v1, greater), _pair(v2, v3, greater), greater)
                    idx = 2147483647
                    if v0 == best:
                        idx = min(idx, i0)
                    if v1 == best:
                        idx = min(idx, i1)
                    if v2 == best:
                        idx = min(idx, i2)
                    if v3 == best:
                        idx = min(idx, i3)
                for k in range(r, n):
                    v = x[base + k * inner]
                    if _wins(v, best, greater, nan_rules):
                        best = v
                        idx = k
                out[o * inner + i] = 0 if (nan_rules and inner == 1 and np.isnan(best)) else idx

    return arg


ARG_LOOPS = {(greater, nan_rules): make_arg(greater, nan_rules) for greater in (True, False)
             for nan_rules in (True, False)}


# --- CUMSUM --------------------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def cumsum(x, out, zero, outer, n, inner, exclusive, reverse):
    """Running sums along the middle axis of (outer, n, inner), from +0 like Eigen's scan."""
    for o in range(outer):
        for i in range(inner):
            base = o * n * inner + i
            acc = zero[0]
            for r in range(n):
                k = base + ((n - 1 - r) if reverse else r) * inner
                v = x[k]
                if exclusive:
                    out[k] = acc
                    acc = acc + v
                else:
                    acc = acc + v
                    out[k] = acc
