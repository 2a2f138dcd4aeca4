"""Comparisons (EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER, GREATER_EQUAL -> bool), LOGICAL_AND/OR/NOT and
SELECT/SELECT_V2.

Comparisons and logical ops reuse elementwise.make_binary (non-clamping, bool output). Quantized int8/uint8 inputs
(and quantized int16 for EQUAL/NOT_EQUAL) are compared as the official kernel does: each side is first rescaled to
int32 by ((q - zero_point) << 8) * scale as a fixed-point multiplier (ComparisonWithScaling), so values closer than
the rescaled resolution compare equal. LESS/GREATER on int16 compare raw values even when quantized, as TFLite does.
SELECT is a conditional copy of raw bytes: one compiled loop per element size, whatever the dtype.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.copy import WORDS
from lite_numba.kernels.base.fixedpoint import (
    quantize_multiplier,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
)
from lite_numba.kernels.base.shapes import broadcast_shape, broadcast_strides, padded_shape, two_inputs_of_one_type
from lite_numba.kernels.base.sort import upper_bound
from lite_numba.kernels.base.strided import box_walk, next_row
from lite_numba.kernels.elementwise.arithmetic import (
    binary_inputs,
    check_broadcast_rank,
    make_binary,
    no_limits,
    scalar,
    schedule_binary,
)
from lite_numba.kernels.elementwise.unary import unary_op
from numba import njit

from lite_numba.ops import PrepareContext, kernel

# --- comparisons -------------------------------------------------------------------------------------------------


@scalar
def _eq(a, b):
    return a == b


@scalar
def _ne(a, b):
    return a != b


@scalar
def _lt(a, b):
    return a < b


@scalar
def _le(a, b):
    return a <= b


@scalar
def _gt(a, b):
    return a > b


@scalar
def _ge(a, b):
    return a >= b


@scalar
def _and(a, b):
    return a and b


@scalar
def _or(a, b):
    return a or b


BOOL_BINARY = {name: make_binary(f, clamp=False) for name, f in (
    ("EQUAL", _eq), ("NOT_EQUAL", _ne), ("LESS", _lt), ("LESS_EQUAL", _le), ("GREATER", _gt),
    ("GREATER_EQUAL", _ge), ("LOGICAL_AND", _and), ("LOGICAL_OR", _or))}


@njit(cache=True, nogil=True)
def rescale_for_comparison(x, out, offset, q, shift, sar, mask):
    """out = MultiplyByQuantizedMultiplierSmallerThanOneExp((x + offset) << 8, q, shift) (int32).

    A positive `shift` (a scale above 1) reaches gemmlowp's RoundingDivideByPOT with the negative exponent -shift,
    undefined in C++; the official x86 build's scalar code then computes (s >> sar) + (remainder > threshold) with
    sar = -shift mod 32 (the 32-bit shift count) and the remainder mask `mask` = int32(2^(-shift mod 64) - 1) (the
    64-bit one), which _comparison_shift only lets through where it equals its vectorized loop's answer."""
    for i in range(out.size):
        v = (np.int64(x[i]) + offset) * 256
        s = saturating_rounding_doubling_high_mul(v, q)
        if shift <= 0:
            out[i] = rounding_divide_by_pot(s, -shift)
        else:
            neg = 1 if s < 0 else 0
            out[i] = (s >> sar) + (1 if (s & mask) > (mask >> 1) + neg else 0)


def _comparison_shift(ctx: PrepareContext, t, q: int, shift: int) -> tuple[int, int]:
    """(sar, mask) for rescale_for_comparison; refuses a positive shift whose outcome depends on the element.

    With a negative exponent the official kernel's vectorized loop shifts arithmetically by a count its vector
    instructions take as >= 32 (the sign: 0 or -1) while its scalar tail (and its loops over a broadcast) shift by
    -shift mod 32; the rounding term is the same in both. So its answer is the same for every element only when
    every rescaled value s in the input's range has s >> (-shift mod 32) in {0, -1}; otherwise an element's result
    depends on its position (measured: up to 88 of 268 outputs at shifts 17..32 and 50..64), and no answer is
    right."""
    if shift <= 0:
        return 0, 0
    sar = (-shift) % 32
    mask = ((1 << ((-shift) % 64)) - 1) & 0xFFFFFFFF
    mask -= (1 << 32) if mask >= (1 << 31) else 0
    info = np.iinfo(t.dtype)
    zp = int(t.zero_point)
    lo, hi = (int(saturating_rounding_doubling_high_mul((int(v) - zp) * 256, q)) for v in (info.min, info.max))
    ctx.check(-(1 << sar) <= lo and hi < (1 << sar),
              f"quantized input {t.name!r} (scale {float(np.float32(t.scale)):g}, zero point {zp}) is rescaled with "
              f"a multiplier needing a left shift of {shift} bits, which the official kernel applies as a right shift "
              f"by {-shift} bits (undefined in C++): for its rescaled values in [{lo}, {hi}] its vectorized loop and "
              f"its scalar tail disagree, so the result depends on the element's position")
    return sar, mask


def _rescaled(ctx: PrepareContext, t):
    """An int32 temp with t's values rescaled for comparison (see rescale_for_comparison)."""
    scale = float(np.float32(t.scale))
    ctx.check(scale > 0, f"quantized input {t.name!r} needs a positive scale, got {scale}")
    # the official kernel quantizes scales >= 1 with QuantizeMultiplierGreaterThanOne, which aborts on exactly 1
    ctx.check(scale != 1.0, f"quantized input {t.name!r} has scale 1.0, which the official kernel rejects")
    q, shift = quantize_multiplier(scale)
    sar, mask = _comparison_shift(ctx, t, q, shift)
    tmp = ctx.temp(t.shape, np.int32)
    if t.size:
        ctx.call(rescale_for_comparison, ctx.view(t, (t.size,)), ctx.view(tmp, (t.size,)), -int(t.zero_point), q,
                 shift, sar, mask)
    return tmp


def comparison(name: str, equality: bool):
    """Prepare of a comparison; `equality` ops (EQUAL, NOT_EQUAL) also accept bool and rescale quantized int16."""
    raw_types = [np.float32, np.int16, np.int32, np.int64] + ([np.bool_] if equality else [])
    raw_types = tuple(np.dtype(d) for d in raw_types)

    def prepare(ctx: PrepareContext) -> None:
        x, y, shape = binary_inputs(ctx)
        scaled = x.dtype in (np.int8, np.uint8) or (x.dtype == np.int16 and equality and x.quantization.scales.size)
        if scaled:
            ctx.check(x.quantization.scales.size > 0 and y.quantization.scales.size > 0,
                      f"{x.dtype.name} inputs must be quantized (scale and zero point)")
        else:
            ctx.check_dtype(x, *raw_types)
        out = ctx.set_output(0, shape, np.bool_)
        if scaled:
            x, y = _rescaled(ctx, x), _rescaled(ctx, y)
        schedule_binary(ctx, BOOL_BINARY[name], x, y, shape, out, no_limits(np.bool_))

    return kernel(name)(prepare)


EQUAL = comparison("EQUAL", True)
NOT_EQUAL = comparison("NOT_EQUAL", True)
LESS = comparison("LESS", False)
LESS_EQUAL = comparison("LESS_EQUAL", False)
GREATER = comparison("GREATER", False)
GREATER_EQUAL = comparison("GREATER_EQUAL", False)


# --- logical -----------------------------------------------------------------------------------------------------

def logical(name: str):
    """Prepare of LOGICAL_AND / LOGICAL_OR on bool inputs with broadcasting."""

    def prepare(ctx: PrepareContext) -> None:
        x, y, shape = binary_inputs(ctx)
        ctx.check_dtype(x, np.bool_)
        out = ctx.set_output(0, shape, np.bool_)
        schedule_binary(ctx, BOOL_BINARY[name], x, y, shape, out, no_limits(np.bool_))

    return kernel(name)(prepare)


LOGICAL_AND = logical("LOGICAL_AND")
LOGICAL_OR = logical("LOGICAL_OR")


@scalar
def _not(v, p):
    return not v


LOGICAL_NOT = unary_op("LOGICAL_NOT", _not, (np.bool_,), quantized=False)


# --- select ------------------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def select_same(c, x, y, out):
    for i in range(out.size):
        out[i] = x[i] if c[i] else y[i]


@njit(cache=True, nogil=True)
def select_bcast(c, x, y, out, cs, xs, ys, shp):
    n5, sc, sx, sy = shp[5], cs[5], xs[5], ys[5]
    walk, at = box_walk(shp, cs, xs, ys)
    for r in range(walk[0]):
        cb, xb, yb = at[1], at[2], at[3]
        for i5 in range(n5):
            out[r * n5 + i5] = x[xb + i5 * sx] if c[cb + i5 * sc] else y[yb + i5 * sy]
        at = next_row(at, walk)


_RAW = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def select(name: str, v2: bool):
    """SELECT (condition same shape, rank 1 over the first dimension, or scalar) and SELECT_V2 (broadcast of all
    three). The values are copied as raw bytes of their element size."""

    def prepare(ctx: PrepareContext) -> None:
        ctx.check_num(inputs=3, outputs=1)
        c, x, y = ctx.input(0), ctx.input(1), ctx.input(2)
        ctx.check(c is not None and x is not None and y is not None, "all three inputs are required")
        ctx.check_dtype(c, np.bool_)
        ctx.check(x.dtype == y.dtype, f"input types differ: {x.dtype.name} and {y.dtype.name}")
        ctx.check(x.dtype.itemsize in _RAW and x.dtype.kind != "O", f"type {x.dtype.name} is not supported")
        out_t = ctx.output(0)
        if c.size == 1 and x.size == 1 and y.size == 1 and out_t.size == 1:
            shape = out_t.shape  # official: a mixed-shape scalar select keeps the model's output shape
            c_shape = x_shape = y_shape = shape
        elif c.shape == x.shape == y.shape:
            shape = c_shape = x_shape = y_shape = x.shape
        elif v2:
            shape = broadcast_shape(ctx, c.shape, x.shape, y.shape)
            c_shape, x_shape, y_shape = c.shape, x.shape, y.shape
        else:
            low_rank = c.ndim == 0 or (c.ndim == 1 and x.ndim >= 1 and c.shape[0] == x.shape[0])
            ctx.check(low_rank, f"condition of shape {list(c.shape)} must match the inputs' shape "
                                f"{list(x.shape)}, be a scalar, or be rank 1 over their first dimension")
            ctx.check(x.shape == y.shape, f"inputs must have the same shape, got {list(x.shape)} and "
                                          f"{list(y.shape)}")
            shape = x_shape = y_shape = x.shape
            # the rank-1 condition runs along the first dimension: align it there
            c_shape = () if c.ndim == 0 else (c.shape[0],) + (1,) * (x.ndim - 1)
        out = ctx.set_output(0, shape, x.dtype)
        n = out.size
        if n == 0:
            return
        raw = _RAW[x.dtype.itemsize]
        cf, xf, yf = ctx.view(c, (c.size,)), ctx.view(x, (x.size,), raw), ctx.view(y, (y.size,), raw)
        of = ctx.view(out, (n,), raw)
        if c.size == n and x.size == n and y.size == n:
            ctx.call(select_same, cf, xf, yf, of)
        else:
            check_broadcast_rank(ctx, c_shape, x_shape, y_shape, shape)
            ctx.call(select_bcast, cf, xf, yf, of, broadcast_strides(c_shape, shape),
                     broadcast_strides(x_shape, shape), broadcast_strides(y_shape, shape), padded_shape(shape))

    return kernel(name)(prepare)


SELECT = select("SELECT", v2=False)
SELECT_V2 = select("SELECT_V2", v2=True)

__all__ = ["EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "LOGICAL_AND", "LOGICAL_OR",
           "LOGICAL_NOT", "SELECT", "SELECT_V2"]


@scalar
def _xor(a, b):
    return a ^ b


@scalar
def _rshift8(a, b):
    return np.int64(a) >> min(max(np.int64(b), 0), 7)


@scalar
def _rshift16(a, b):
    return np.int64(a) >> min(max(np.int64(b), 0), 15)


@scalar
def _rshift32(a, b):
    return np.int64(a) >> min(max(np.int64(b), 0), 31)


XOR_LOOPS = make_binary(_xor, clamp=False)


RSHIFT_LOOPS = {1: make_binary(_rshift8, clamp=False), 2: make_binary(_rshift16, clamp=False),
                4: make_binary(_rshift32, clamp=False)}


def _int_binary_shape(ctx: PrepareContext):
    a, b = two_inputs_of_one_type(ctx, (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32))
    if a.shape == b.shape:
        return a, b, a.shape
    try:
        shape = tuple(int(d) for d in np.broadcast_shapes(a.shape, b.shape))
    except ValueError:
        ctx.fail(f"shapes {list(a.shape)} and {list(b.shape)} cannot be broadcast")
    return a, b, shape


@kernel("BITWISE_XOR")
def BITWISE_XOR(ctx: PrepareContext) -> None:
    """out = a ^ b (8/16/32-bit integers, signed or not: computed on the unsigned words)."""
    a, b, shape = _int_binary_shape(ctx)
    out = ctx.set_output(0, shape, a.dtype)
    w = WORDS[a.dtype.itemsize]
    schedule_binary(ctx, XOR_LOOPS, a, b, shape, out, no_limits(w), word=w)


@kernel("RIGHT_SHIFT")
def RIGHT_SHIFT(ctx: PrepareContext) -> None:
    """out = a >> clamp(b, 0, bits - 1) (arithmetic for signed types, logical for unsigned)."""
    a, b, shape = _int_binary_shape(ctx)
    out = ctx.set_output(0, shape, a.dtype)
    schedule_binary(ctx, RSHIFT_LOOPS[a.dtype.itemsize], a, b, shape, out, no_limits(a.dtype))


@njit(cache=True, nogil=True)
def bucketize(x, bounds, out):
    """out[i] = the number of boundaries <= x[i] (std::upper_bound's halving search, so unordered or NaN boundaries
    give the official answer too); int inputs are compared as float32 as C++ converts them."""
    nb = bounds.size
    for i in range(x.size):
        out[i] = upper_bound(bounds, nb, x[i])


@njit(cache=True, nogil=True)
def to_float32(x, out):
    for i in range(x.size):
        out[i] = np.float32(x[i])


@kernel("BUCKETIZE")
def BUCKETIZE(ctx: PrepareContext) -> None:
    """out (int32) = index of the bucket of each input value among the sorted float boundaries."""
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check_dtype(x, np.float32, np.float64, np.int32, np.int64)
    bounds = np.asarray(ctx.options.get("boundaries") or [], np.float32).reshape(-1)
    ctx.check(not bool(np.any(bounds[1:] < bounds[:-1])), "boundaries must be sorted")
    out = ctx.set_output(0, x.shape, np.int32)
    if out.size == 0:
        return
    flat = ctx.view(x, (x.size,))
    of = ctx.view(out, (out.size,))
    if x.dtype == np.float64:  # float vs double: C++ widens the float boundary (exact)
        ctx.call(bucketize, flat, bounds.astype(np.float64), of)
    elif x.dtype == np.float32:
        ctx.call(bucketize, flat, bounds, of)
    else:  # int32/int64 vs float: C++ converts the integer to float
        tmp = ctx.temp((x.size,), np.float32)
        ctx.call(to_float32, flat, tmp)
        ctx.call(bucketize, tmp, bounds, of)
