"""RFFT2D (float32 -> complex64) and the complex helpers COMPLEX_ABS, REAL, IMAG.

RFFT2D takes the 2-D real FFT of the innermost two dimensions, each slice cropped or zero-padded to fft_length
(powers of two), in float64 like TFLite's fft2d, rounded to complex64 at the end. Complex tensors are passed to the
kernels as interleaved (re, im) float arrays.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lite_numba.ops import PrepareContext, kernel


@njit(cache=True, inline="always")
def _fft_inplace(re, im, n, rev, twr, twi):
    """In-place radix-2 FFT (forward, e^{-2 pi i jk/n}) of the length-n complex vector (re, im)."""
    for i in range(n):
        j = rev[i]
        if j > i:
            re[i], re[j] = re[j], re[i]
            im[i], im[j] = im[j], im[i]
    size = 2
    while size <= n:
        half = size // 2
        step = n // size
        for start in range(0, n, size):
            for k in range(half):
                wr = twr[k * step]
                wi = twi[k * step]
                a = start + k
                b = a + half
                tr = re[b] * wr - im[b] * wi
                ti = re[b] * wi + im[b] * wr
                re[b] = re[a] - tr
                im[b] = im[a] - ti
                re[a] += tr
                im[a] += ti
        size *= 2


@njit(cache=True, nogil=True)
def rfft2d(x, out, H_in, W_in, H, W, wre, wim, cre, cim, rev_h, twr_h, twi_h, rev_w, twr_w, twi_w):
    """x: flat float32 slices [S, H_in, W_in]; out: flat float32 (re, im) pairs of [S, H, W // 2 + 1];
    wre/wim: float64 [H * W] scratch; cre/cim: float64 [H] scratch."""
    n_cols = W // 2 + 1
    slices = out.size // (2 * H * n_cols)
    hv = min(H, H_in)
    wv = min(W, W_in)
    for s in range(slices):
        xb = s * H_in * W_in
        for h in range(H):
            row_re = wre[h * W:(h + 1) * W]
            row_im = wim[h * W:(h + 1) * W]
            for w in range(W):
                row_re[w] = 0.0
                row_im[w] = 0.0
            if h < hv:
                for w in range(wv):
                    row_re[w] = np.float64(x[xb + h * W_in + w])
            _fft_inplace(row_re, row_im, W, rev_w, twr_w, twi_w)
        ob = s * H * n_cols
        for c in range(n_cols):
            for h in range(H):
                cre[h] = wre[h * W + c]
                cim[h] = wim[h * W + c]
            _fft_inplace(cre, cim, H, rev_h, twr_h, twi_h)
            for h in range(H):
                o = 2 * (ob + h * n_cols + c)
                out[o] = np.float32(cre[h])
                out[o + 1] = np.float32(cim[h])


def _fft_tables(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bit-reversal permutation and forward twiddles cos/-sin(2 pi k / n), k < n / 2 (at least one entry)."""
    bits = n.bit_length() - 1
    rev = np.array([int(format(i, f"0{bits}b")[::-1], 2) if bits else 0 for i in range(n)], np.int64)
    k = np.arange(max(n // 2, 1), dtype=np.float64)
    ang = 2.0 * np.pi * k / n
    return rev, np.cos(ang), -np.sin(ang)


@kernel("RFFT2D")
def RFFT2D(ctx: PrepareContext) -> None:
    """Output [..., fft_length[0], fft_length[1] / 2 + 1] complex64; fft_length may be known at run time only."""
    ctx.check_num(inputs=2, outputs=1)
    x, fl = ctx.input(0), ctx.input(1)
    ctx.check_dtype(x, np.float32)
    ctx.check_dtype(fl, np.int32)
    ctx.check(x.ndim >= 2, f"input must have rank >= 2, got shape {list(x.shape)}")
    ctx.check(fl.shape == (2,), f"fft_length must have shape [2], got {list(fl.shape)}")
    H, W = (int(v) for v in np.asarray(ctx.value(1)).reshape(-1))
    for n in (H, W):
        ctx.check(n > 0 and n & (n - 1) == 0, f"fft_length {[H, W]} must be powers of two")
    out = ctx.set_output(0, x.shape[:-2] + (H, W // 2 + 1), np.complex64)
    if out.size == 0:
        return
    rev_h, twr_h, twi_h = _fft_tables(H)
    rev_w, twr_w, twi_w = _fft_tables(W)
    x_arg = ctx.view(x, (x.size,)) if x.size else np.zeros(0, np.float32)
    ctx.call(rfft2d, x_arg, ctx.view(out, (2 * out.size,), np.float32), x.shape[-2], x.shape[-1], H, W,
             ctx.temp((H * W,), np.float64), ctx.temp((H * W,), np.float64), ctx.temp((H,), np.float64),
             ctx.temp((H,), np.float64), rev_h, twr_h, twi_h, rev_w, twr_w, twi_w)


# --- complex parts ------------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def pick_part(x, out, which):
    """out[i] = x[2 * i + which] over interleaved (re, im) pairs."""
    for i in range(out.size):
        out[i] = x[2 * i + which]


@njit(cache=True, nogil=True)
def complex_abs(x, out):
    """out[i] = |x[2 i] + j x[2 i + 1]| without overflow for large parts (std::abs of a complex)."""
    for i in range(out.size):
        out[i] = np.hypot(x[2 * i], x[2 * i + 1])


def _complex_prepare(ctx: PrepareContext):
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check_dtype(x, np.complex64, np.complex128)
    part = np.float32 if x.dtype == np.complex64 else np.float64
    out = ctx.set_output(0, x.shape, part)
    return x, out, part


def _part_kernel(name: str, which: int):
    """REAL (which=0) or IMAG (which=1): one part of each complex value, as raw floats."""
    def prepare(ctx: PrepareContext) -> None:
        x, out, part = _complex_prepare(ctx)
        if out.size:
            ctx.call(pick_part, ctx.view(x, (2 * x.size,), part), ctx.view(out, (out.size,)), which)

    return kernel(name)(prepare)


REAL = _part_kernel("REAL", 0)
IMAG = _part_kernel("IMAG", 1)


@kernel("COMPLEX_ABS")
def COMPLEX_ABS(ctx: PrepareContext) -> None:
    """|x| of complex64 (-> float32) or complex128 (-> float64) values."""
    x, out, part = _complex_prepare(ctx)
    if out.size:
        ctx.call(complex_abs, ctx.view(x, (2 * x.size,), part), ctx.view(out, (out.size,)))
