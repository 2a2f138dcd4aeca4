"""CAST between bool, int8/16/32/64, uint8/16/32, float16/32/64 and complex64, as TFLite converts.

TFLite's rules (cast.cc): integer -> integer wraps (static_cast); float -> integer truncates toward zero and
saturates (NaN -> the type's maximum, SafeCast); anything -> bool is `!= 0` (NaN -> true); complex -> real types
takes the real part; integers -> float16/complex64 go through float32, float64 -> float16 too.

Each (source, destination) pair is composed from a few type-generic loops so that the number of compiled
signatures stays small: integers are widened/narrowed as little-endian bytes (one loop for every integer pair),
floating sources are read through float32/float64 (complex64 as its float32 pairs with step 2), and float16 is
converted bit by bit (Numba has no float16 arithmetic).
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.copy import schedule_copy
from numba import njit

from lite_numba.ops import PrepareContext, TensorView, kernel

_INTS = tuple(np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64))
_F16, _F32, _F64, _C64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64, np.complex64))
SUPPORTED = _INTS + (_F16, _F32, _F64, _C64)


# --- loops -------------------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def int_bytes(x, out, signed, to_bool):
    """Integer resize on little-endian bytes: x [n, in bytes] -> out [n, out bytes]; sign- or zero-extends,
    truncates (wraps) when narrowing; to_bool writes 1 for any non-zero value."""
    n, isz = x.shape
    osz = out.shape[1]
    top = isz - 1
    for i in range(n):
        if to_bool:
            nz = 0
            for j in range(isz):
                nz |= x[i, j]
            out[i, 0] = 1 if nz != 0 else 0
            continue
        fill = 255 if signed and x[i, top] >= 128 else 0
        for j in range(osz):
            out[i, j] = x[i, j] if j < isz else fill


@njit(cache=True, nogil=True)
def to_f32(x, xstep, out, ostep):
    """out[i*ostep] = float32(x[i*xstep]) (round to nearest even); the other ostep-1 slots (imaginary part) are 0."""
    n = out.size // ostep
    for i in range(n):
        out[i * ostep] = np.float32(x[i * xstep])
        for j in range(1, ostep):
            out[i * ostep + j] = 0


@njit(cache=True, nogil=True)
def to_f64(x, xstep, out):
    """out[i] = float64(x[i*xstep])."""
    for i in range(out.size):
        out[i] = np.float64(x[i * xstep])


@njit(cache=True, nogil=True)
def to_int_saturate(x, xstep, out, lo, hi, lo_f, hi_excl_f):
    """TFLite's SafeCast of floats to an integer range [lo, hi], written as int64: NaN -> hi, x < lo -> lo,
    x >= hi + 1 -> hi, otherwise truncation toward zero."""
    for i in range(out.size):
        v = x[i * xstep]
        if v != v:
            out[i] = hi
        elif v < lo_f:
            out[i] = lo
        elif v >= hi_excl_f:
            out[i] = hi
        else:
            out[i] = np.int64(v)


@njit(cache=True, nogil=True)
def float_to_bool(x, xstep, out):
    """out[i] = x[i*xstep] != 0 (NaN is true), as bytes."""
    for i in range(out.size):
        out[i] = 1 if x[i * xstep] != 0 else 0


@njit(cache=True, nogil=True)
def f32_to_f16_bits(x, xstep, out):
    """IEEE float32 bits -> float16 bits, round to nearest even; overflow -> inf, NaN -> quiet NaN 0x7e00."""
    for i in range(out.size):
        b = np.int64(x[i * xstep])
        sign = (b >> 16) & 0x8000
        a = b & 0x7FFFFFFF
        if a >= 0x7F800000:
            h = 0x7E00 if a > 0x7F800000 else 0x7C00
        elif a >= 0x477FF000:  # >= 65520 rounds to infinity
            h = 0x7C00
        elif a >= 0x38800000:  # normal float16 range: rebias the exponent, round the 13 dropped bits to even
            h = (a - (112 << 23) + 0xFFF + ((a >> 13) & 1)) >> 13
        else:  # subnormal or zero: the value in units of 2^-24 (exact in float64), rounded to nearest even
            e = a >> 23
            m = a & 0x7FFFFF
            v = np.float64(m | (1 << 23)) * 2.0 ** (e - 126) if e > 0 else np.float64(m) * 2.0 ** -125
            h = np.int64(np.rint(v))
        out[i] = h | sign


@njit(cache=True, nogil=True)
def f16_bits_to_f32(x, out, ostep):
    """float16 bits -> float32 bits (exact); the other ostep-1 slots (imaginary part) are 0."""
    n = out.size // ostep
    for i in range(n):
        h = np.int64(x[i])
        sign = (h & 0x8000) << 16
        e = (h >> 10) & 0x1F
        m = h & 0x3FF
        if e == 31:
            bits = sign | 0x7F800000 | (m << 13)
        elif e == 0 and m == 0:
            bits = sign
        else:
            if e == 0:  # subnormal: normalise the mantissa
                e = 1
                while (m & 0x400) == 0:
                    m = m << 1
                    e -= 1
                m = m & 0x3FF
            bits = sign | ((e + 112) << 23) | (m << 13)
        out[i * ostep] = bits
        for j in range(1, ostep):
            out[i * ostep + j] = 0


# --- prepare -----------------------------------------------------------------------------------------------------

@kernel("CAST")
def CAST(ctx: PrepareContext) -> None:
    """Converts every element to the output type (see the module docstring for the rules)."""
    ctx.check_num(inputs=1, outputs=1)
    x, out = ctx.input(0), ctx.output(0)
    ctx.check(x.dtype in SUPPORTED, f"input type {x.dtype.name} is not supported")
    ctx.check(out.dtype in SUPPORTED, f"output type {out.dtype.name} is not supported")
    out = ctx.set_output(0, x.shape)
    n = x.size
    if n == 0:
        return
    src, dst = x.dtype, out.dtype
    if src == dst:
        schedule_copy(ctx, x, out)
        return

    def int_resize(t, td, o, od, to_bool=False):
        ctx.call(int_bytes, ctx.view(t, (n, td.itemsize), np.uint8), ctx.view(o, (n, od.itemsize), np.uint8),
                 td.kind == "i", to_bool)

    # 1. the source as a float32/float64/int64 sequence (array, step)
    if src in _INTS:
        if dst in _INTS:
            int_resize(x, src, out, dst, to_bool=dst == np.bool_)
            return
        wide = ctx.temp((n,), np.int64)
        int_resize(x, src, wide, np.dtype(np.int64))
        seq, step = wide, 1
    elif src == _F16:
        if dst in (_F32, _C64):
            k = 2 if dst == _C64 else 1
            ctx.call(f16_bits_to_f32, ctx.view(x, (n,), np.uint16), ctx.view(out, (n * k,), np.uint32), k)
            return
        f = ctx.temp((n,), np.float32)
        ctx.call(f16_bits_to_f32, ctx.view(x, (n,), np.uint16), ctx.view(f, (n,), np.uint32), 1)
        seq, step = f, 1
    elif src == _C64:
        seq, step = ctx.view(x, (2 * n,), np.float32), 2
    else:
        seq, step = ctx.view(x, (n,)), 1
    seq_dtype = seq.dtype

    # 2. the destination
    if dst == np.bool_:
        ctx.call(float_to_bool, seq, step, ctx.view(out, (n,), np.uint8))
    elif dst in _INTS:
        info = np.iinfo(dst)
        lo, hi = int(info.min), int(info.max)
        target = ctx.view(out, (n,)) if dst == np.int64 else ctx.temp((n,), np.int64)
        ctx.call(to_int_saturate, seq, step, target, lo, hi, float(lo), float(hi) + 1.0)
        if dst != np.int64:
            int_resize(target, np.dtype(np.int64), out, dst)
    elif dst == _F32:
        ctx.call(to_f32, seq, step, ctx.view(out, (n,)), 1)
    elif dst == _C64:
        ctx.call(to_f32, seq, step, ctx.view(out, (2 * n,), np.float32), 2)
    elif dst == _F64:
        ctx.call(to_f64, seq, step, ctx.view(out, (n,)))
    else:  # float16: from float32 bits (int64 and float64 sources are rounded to float32 first, as TFLite does)
        if seq_dtype != np.float32:
            f = ctx.temp((n,), np.float32)
            ctx.call(to_f32, seq, step, f, 1)
            seq, step = f, 1
        t = seq.tensor if isinstance(seq, TensorView) else seq
        src_bits = ctx.view(t, (t.nbytes // 4,), np.uint32)
        ctx.call(f32_to_f16_bits, src_bits, step, ctx.view(out, (n,), np.uint16))


__all__ = ["CAST"]
