"""Flex complex64 ops: RFFT, IRFFT, FFT, IFFT, RFFT2D, IRFFT2D, ComplexAbs, Angle, Real, Imag, Complex, Conj, and the
complex forms of AddV2/Add, Sub, Mul, RealDiv, Exp, Neg (chosen when an input is complex), all in the table `OPS`.

Transforms follow TensorFlow: the transformed axis is cropped or zero-padded to fft_length; IFFT/IRFFT divide by
the length; IRFFT reads bins 0..n/2 (cropped or zero-padded) and ignores the imaginary parts of the DC and Nyquist
bins (a complex-to-real transform). Every transform runs in float64 (radix 2 for powers of two, the FFT of
kernels/signal/fft.py; a direct DFT otherwise) and rounds once to complex64/float32. Complex tensors reach the kernels
as interleaved (re, im) float32 arrays.
"""

from __future__ import annotations

import math

import numpy as np
from lite_numba.kernels.signal.fft import fft_inplace
from numba import njit

from .math_ops import broadcast_offsets, broadcast_strides
from .nodedef import FlexNode

_C64, _F32 = np.dtype(np.complex64), np.dtype(np.float32)


def fft_tables(n: int) -> tuple[np.ndarray, ...]:
    """(is power of two, bit reversal, forward twiddles cos/-sin(2 pi k/n) for k < n/2, cos/sin(2 pi k/n) for k < n)
    for a length-n transform."""
    pow2 = n & (n - 1) == 0
    bits = n.bit_length() - 1
    rev = np.array([int(format(i, f"0{bits}b")[::-1], 2) if bits and pow2 else i for i in range(n)], np.int64)
    k = np.arange(max(n // 2, 1), dtype=np.float64)
    ang = 2.0 * np.pi * np.arange(n, dtype=np.float64) / n
    return (int(pow2), rev, np.cos(2.0 * np.pi * k / n), -np.sin(2.0 * np.pi * k / n), np.cos(ang), np.sin(ang))


@njit(cache=True, nogil=True)
def _transform(re, im, n, pow2, rev, twr, twi, cs, sn, tre, tim, inverse):
    """In-place complex DFT of (re, im) (float64, length n); the inverse is unscaled. tre/tim: scratch [n]."""
    if inverse:
        for i in range(n):
            im[i] = -im[i]
    if pow2:
        fft_inplace(re, im, n, rev, twr, twi)
    else:
        for k in range(n):
            sr = 0.0
            si = 0.0
            idx = 0
            for j in range(n):  # e^{-2 pi i jk/n}, the angle index jk mod n kept exact
                sr += re[j] * cs[idx] + im[j] * sn[idx]
                si += im[j] * cs[idx] - re[j] * sn[idx]
                idx += k
                if idx >= n:
                    idx -= n
            tre[k] = sr
            tim[k] = si
        for k in range(n):
            re[k] = tre[k]
            im[k] = tim[k]
    if inverse:
        for i in range(n):
            im[i] = -im[i]


@njit(cache=True, nogil=True)
def cfft_axis(x, out, outer, n_in, inner, n, inverse, pow2, rev, twr, twi, cs, sn, re, im, tre, tim):
    """x: pairs [outer, n_in, inner]; out: pairs [outer, n, inner]; complex transform along the middle axis (cropped or
    zero-padded to n), scaled by 1/n when inverse."""
    m = min(n, n_in)
    scale = 1.0 / n if inverse else 1.0
    for o in range(outer):
        for c in range(inner):
            for j in range(n):
                if j < m:
                    p = 2 * ((o * n_in + j) * inner + c)
                    re[j] = x[p]
                    im[j] = x[p + 1]
                else:
                    re[j] = 0.0
                    im[j] = 0.0
            _transform(re, im, n, pow2, rev, twr, twi, cs, sn, tre, tim, inverse)
            for j in range(n):
                p = 2 * ((o * n + j) * inner + c)
                out[p] = re[j] * scale
                out[p + 1] = im[j] * scale


@njit(cache=True, nogil=True)
def rfft_rows(x, out, n, pow2, rev, twr, twi, cs, sn, re, im, tre, tim):
    """x: real [R, L]; out: pairs [R, n // 2 + 1]; bins 0..n/2 of each row cropped or zero-padded to n."""
    rows, length = x.shape
    bins = n // 2 + 1
    m = min(n, length)
    for r in range(rows):
        for j in range(n):
            re[j] = np.float64(x[r, j]) if j < m else 0.0
            im[j] = 0.0
        _transform(re, im, n, pow2, rev, twr, twi, cs, sn, tre, tim, False)
        for k in range(bins):
            out[r, 2 * k] = re[k]
            out[r, 2 * k + 1] = im[k]


@njit(cache=True, nogil=True)
def irfft_rows(z, out, n, pow2, rev, twr, twi, cs, sn, re, im, tre, tim):
    """z: pairs [R, M]; out: real [R, n]: the inverse of a real transform from bins 0..n/2 (Hermitian symmetry)."""
    rows = z.shape[0]
    m = z.shape[1] // 2
    half = n // 2
    for r in range(rows):
        for k in range(half + 1):
            if k < m:
                re[k] = z[r, 2 * k]
                im[k] = z[r, 2 * k + 1]
            else:
                re[k] = 0.0
                im[k] = 0.0
        im[0] = 0.0
        if n % 2 == 0:
            im[half] = 0.0
        for k in range(half + 1, n):
            re[k] = re[n - k]
            im[k] = -im[n - k]
        _transform(re, im, n, pow2, rev, twr, twi, cs, sn, tre, tim, True)
        for j in range(n):
            out[r, j] = re[j] / n


def _fft_length(ctx, count: int) -> list[int]:
    fl = ctx.input(1)
    ctx.check(fl is not None and fl.dtype == np.int32, "fft_length must be an int32 input")
    v = [int(a) for a in np.asarray(ctx.value(1)).reshape(-1)]
    ctx.check(len(v) == count and all(a > 0 for a in v), f"fft_length must hold {count} positive values, got {v}")
    return v


def _scratch(ctx, n: int) -> tuple:
    return tuple(ctx.temp((n,), np.float64) for _ in range(4))


def _pairs(ctx, t, shape):
    return ctx.view(t, tuple(shape[:-1]) + (2 * shape[-1],), np.float32)


def _rfft(ctx, node: FlexNode) -> None:
    ctx.check_num(inputs=2, outputs=1)
    x = ctx.input(0)
    ctx.check_dtype(x, np.float32)
    ctx.check(x.ndim >= 1, "RFFT needs an input of rank >= 1")
    (n,) = _fft_length(ctx, 1)
    out = ctx.set_output(0, x.shape[:-1] + (n // 2 + 1,), _C64)
    if out.size == 0:
        return
    rows = out.size // (n // 2 + 1)
    x_arg = ctx.view(x, (rows, x.shape[-1])) if x.size else np.zeros((rows, 1), np.float32)
    ctx.call(rfft_rows, x_arg, _pairs(ctx, out, (rows, n // 2 + 1)), n, *fft_tables(n), *_scratch(ctx, n))


def _irfft(ctx, node: FlexNode) -> None:
    ctx.check_num(inputs=2, outputs=1)
    z = ctx.input(0)
    ctx.check_dtype(z, _C64)
    ctx.check(z.ndim >= 1, "IRFFT needs an input of rank >= 1")
    (n,) = _fft_length(ctx, 1)
    out = ctx.set_output(0, z.shape[:-1] + (n,), _F32)
    if out.size == 0:
        return
    rows = out.size // n
    z_arg = _pairs(ctx, z, (rows, z.shape[-1])) if z.size else np.zeros((rows, 2), np.float32)
    ctx.call(irfft_rows, z_arg, ctx.view(out, (rows, n)), n, *fft_tables(n), *_scratch(ctx, n))


def _cfft(ctx, node: FlexNode) -> None:
    ctx.check_num(inputs=1, outputs=1)
    z = ctx.input(0)
    ctx.check_dtype(z, _C64)
    ctx.check(z.ndim >= 1, f"{node.op} needs an input of rank >= 1")
    out = ctx.set_output(0, z.shape, _C64)
    if out.size == 0:
        return
    n = z.shape[-1]
    ctx.call(cfft_axis, ctx.view(z, (2 * z.size,), np.float32), ctx.view(out, (2 * out.size,), np.float32),
             z.size // n, n, 1, n, node.op == "IFFT", *fft_tables(n), *_scratch(ctx, n))


def _rfft2d(ctx, node: FlexNode) -> None:
    ctx.check_num(inputs=2, outputs=1)
    x = ctx.input(0)
    ctx.check_dtype(x, np.float32)
    ctx.check(x.ndim >= 2, "RFFT2D needs an input of rank >= 2")
    h, w = _fft_length(ctx, 2)
    bins = w // 2 + 1
    out = ctx.set_output(0, x.shape[:-2] + (h, bins), _C64)
    if out.size == 0:
        return
    s, h_in = out.size // (h * bins), x.shape[-2]
    rows = ctx.temp((s * h_in, bins), _C64)
    x_arg = ctx.view(x, (s * h_in, x.shape[-1])) if x.size else np.zeros((s * h_in, 1), np.float32)
    ctx.call(rfft_rows, x_arg, _pairs(ctx, rows, (s * h_in, bins)), w, *fft_tables(w), *_scratch(ctx, w))
    ctx.call(cfft_axis, ctx.view(rows, (2 * rows.size,), np.float32), ctx.view(out, (2 * out.size,), np.float32),
             s, h_in, bins, h, False, *fft_tables(h), *_scratch(ctx, h))


def _irfft2d(ctx, node: FlexNode) -> None:
    ctx.check_num(inputs=2, outputs=1)
    z = ctx.input(0)
    ctx.check_dtype(z, _C64)
    ctx.check(z.ndim >= 2, "IRFFT2D needs an input of rank >= 2")
    h, w = _fft_length(ctx, 2)
    out = ctx.set_output(0, z.shape[:-2] + (h, w), _F32)
    if out.size == 0:
        return
    s, h_in, w_in = out.size // (h * w), z.shape[-2], z.shape[-1]
    cols = ctx.temp((s * h, w_in), _C64)
    ctx.call(cfft_axis, ctx.view(z, (2 * z.size,), np.float32), ctx.view(cols, (2 * cols.size,), np.float32),
             s, h_in, w_in, h, True, *fft_tables(h), *_scratch(ctx, h))
    ctx.call(irfft_rows, _pairs(ctx, cols, (s * h, w_in)), ctx.view(out, (s * h, w)), w, *fft_tables(w),
             *_scratch(ctx, w))


# --- complex elementwise ------------------------------------------------------------------------------------------

UNARY_CODES = {"ComplexAbs": 0, "Angle": 1, "Real": 2, "Imag": 3, "Conj": 4, "Exp": 5, "Neg": 6}


@njit(cache=True, nogil=True)
def complex_unary(z, out, code):
    """z: pairs [n]; out: float32 [n] (ComplexAbs, Angle, Real, Imag) or pairs [n] (Conj, Exp, Neg)."""
    n = z.size // 2
    for i in range(n):
        a = np.float64(z[2 * i])
        b = np.float64(z[2 * i + 1])
        if code == 0:
            out[i] = math.hypot(a, b)
        elif code == 1:
            out[i] = math.atan2(b, a)
        elif code == 2:
            out[i] = a
        elif code == 3:
            out[i] = b
        elif code == 4:
            out[2 * i] = a
            out[2 * i + 1] = -b
        elif code == 5:
            e = math.exp(a)
            out[2 * i] = e * math.cos(b)
            out[2 * i + 1] = e * math.sin(b)
        else:
            out[2 * i] = -a
            out[2 * i + 1] = -b


def _complex_unary(ctx, node: FlexNode) -> None:
    ctx.check_num(inputs=1, outputs=1)
    z = ctx.input(0)
    ctx.check_dtype(z, _C64)
    code = UNARY_CODES[node.op]
    out = ctx.set_output(0, z.shape, _F32 if code < 4 else _C64)
    if out.size:
        ctx.call(complex_unary, ctx.view(z, (2 * z.size,), np.float32),
                 ctx.view(out, ((1 if code < 4 else 2) * out.size,), np.float32), code)


BINARY_CODES = {"AddV2": 0, "Add": 0, "Sub": 1, "Mul": 2, "RealDiv": 3, "Complex": 4}


@njit(cache=True, nogil=True)
def complex_binary(x, y, out, xo, yo, code):
    """out (pairs) = x op y over broadcast operands: complex pairs, or (Complex) two real arrays -> re + i im."""
    n = xo.size
    for i in range(n):
        if code == 4:
            out[2 * i] = x[xo[i]]
            out[2 * i + 1] = y[yo[i]]
            continue
        a = np.float64(x[2 * xo[i]])
        b = np.float64(x[2 * xo[i] + 1])
        c = np.float64(y[2 * yo[i]])
        d = np.float64(y[2 * yo[i] + 1])
        if code == 0:
            re, im = a + c, b + d
        elif code == 1:
            re, im = a - c, b - d
        elif code == 2:
            re, im = a * c - b * d, a * d + b * c
        else:
            den = c * c + d * d
            re, im = (a * c + b * d) / den, (b * c - a * d) / den
        out[2 * i] = re
        out[2 * i + 1] = im


def _complex_binary(ctx, node: FlexNode) -> None:
    ctx.check_num(inputs=2, outputs=1)
    x, y = ctx.input(0), ctx.input(1)
    code = BINARY_CODES[node.op]
    part = _F32 if code == 4 else _C64
    ctx.check_dtype(x, part)
    ctx.check_dtype(y, part)
    shape, (xs, ys) = broadcast_strides(ctx, [x.shape, y.shape])
    out = ctx.set_output(0, shape, _C64)
    if out.size == 0:
        return
    k = 1 if code == 4 else 2
    xo, yo = broadcast_offsets(shape, xs, ys)
    ctx.call(complex_binary, ctx.view(x, (k * x.size,), np.float32), ctx.view(y, (k * y.size,), np.float32),
             ctx.view(out, (2 * out.size,), np.float32), xo, yo, code)


# The family's table. Exp, Neg, AddV2, Add, Sub, Mul and RealDiv also exist for real types (builtin_map): the Flex
# kernel looks here first when an input is complex, and last otherwise (plugins/flex/__init__.py, find_op).
OPS = {"RFFT": _rfft, "IRFFT": _irfft, "FFT": _cfft, "IFFT": _cfft, "RFFT2D": _rfft2d, "IRFFT2D": _irfft2d,
       "ComplexAbs": _complex_unary, "Angle": _complex_unary, "Real": _complex_unary, "Imag": _complex_unary,
       "Conj": _complex_unary, "Exp": _complex_unary, "Neg": _complex_unary, "Complex": _complex_binary,
       "AddV2": _complex_binary, "Add": _complex_binary, "Sub": _complex_binary, "Mul": _complex_binary,
       "RealDiv": _complex_binary}
