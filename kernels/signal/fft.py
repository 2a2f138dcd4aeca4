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
def _butterfly(re, im, a, half, wr, wi):
    b = a + half
    tr = re[b] * wr - im[b] * wi
    ti = re[b] * wi + im[b] * wr
    re[b] = re[a] - tr
    im[b] = im[a] - ti
    re[a] += tr
    im[a] += ti


@njit(cache=True, inline="always")
def fft_inplace(re, im, n, rev, twr, twi):
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
        if half >= step:  # few long blocks: butterflies of a block in the inner loop
            for start in range(0, n, size):
                for k in range(half):
                    _butterfly(re, im, start + k, half, twr[k * step], twi[k * step])
        else:  # many short blocks (the early stages): one twiddle per outer pass, blocks in the inner loop
            for k in range(half):
                wr = twr[k * step]
                wi = twi[k * step]
                for a in range(k, n, size):
                    _butterfly(re, im, a, half, wr, wi)
        size *= 2


@njit(cache=True, inline="always")
def real_fft_bin(re, im, h, k, wr, wi):
    """Bin k (0 <= k <= h) of the FFT of a real sequence of length 2h, from the complex FFT (re, im) of length h of
    its (even, odd) sample pairs; wr/wi = cos/-sin(2 pi k / 2h). Returns (real, imaginary), float64."""
    p = k % h
    q = (h - k) % h
    er = 0.5 * (re[p] + re[q])  # FFT of the even samples
    ei = 0.5 * (im[p] - im[q])
    orr = 0.5 * (im[p] + im[q])  # FFT of the odd samples
    oi = -0.5 * (re[p] - re[q])
    return er + (orr * wr[k] - oi * wi[k]), ei + (orr * wi[k] + oi * wr[k])


@njit(cache=True, nogil=True)
def rfft2d(x, out, H_in, W_in, H, W, wre, wim, cre, cim, rev_h, twr_h, twi_h, zre, zim, rev_z, twr_z, twi_z, wr,
           wi):
    """x: flat float32 slices [S, H_in, W_in]; out: flat float32 (re, im) pairs of [S, H, W // 2 + 1];
    wre/wim: float64 [H * W] scratch; cre/cim: float64 [H] scratch. Each row is a real FFT: one complex FFT of
    length W / 2 (zre/zim scratch, tables rev_z/twr_z/twi_z) over (even, odd) pairs, then split (real_fft_bin
    with wr/wi); W = 1 is the row itself."""
    n_cols = W // 2 + 1
    h2 = W // 2
    slices = out.size // (2 * H * n_cols)
    hv = min(H, H_in)
    wv = min(W, W_in)
    for s in range(slices):
        xb = s * H_in * W_in
        for h in range(H):
            row_re = wre[h * W:(h + 1) * W]
            row_im = wim[h * W:(h + 1) * W]
            if W == 1:
                row_re[0] = np.float64(x[xb + h * W_in]) if h < hv else 0.0
                row_im[0] = 0.0
                continue
            for j in range(h2):
                zre[j] = 0.0
                zim[j] = 0.0
            if h < hv:
                xr = x[xb + h * W_in:xb + h * W_in + wv]
                for w in range(wv):
                    if w % 2 == 0:
                        zre[w // 2] = np.float64(xr[w])
                    else:
                        zim[w // 2] = np.float64(xr[w])
            fft_inplace(zre, zim, h2, rev_z, twr_z, twi_z)
            for c in range(n_cols):
                row_re[c], row_im[c] = real_fft_bin(zre, zim, h2, c, wr, wi)
        ob = s * H * n_cols
        if H == 1:  # the column transforms are identities
            for c in range(n_cols):
                out[2 * (ob + c)] = np.float32(wre[c])
                out[2 * (ob + c) + 1] = np.float32(wim[c])
            continue
        for c in range(n_cols):
            for h in range(H):
                cre[h] = wre[h * W + c]
                cim[h] = wim[h * W + c]
            fft_inplace(cre, cim, H, rev_h, twr_h, twi_h)
            for h in range(H):
                o = 2 * (ob + h * n_cols + c)
                out[o] = np.float32(cre[h])
                out[o + 1] = np.float32(cim[h])


def fft_tables(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
    rev_h, twr_h, twi_h = fft_tables(H)
    h2 = max(W // 2, 1)
    rev_z, twr_z, twi_z = fft_tables(h2)
    ang = 2.0 * np.pi * np.arange(h2 + 1) / W
    wr, wi = np.cos(ang), -np.sin(ang)
    wr[-1], wi[-1] = (-1.0, 0.0) if W > 1 else (wr[-1], wi[-1])  # the Nyquist bin's twiddle exactly (sin(pi) != 0)
    x_arg = ctx.view(x, (x.size,)) if x.size else np.zeros(0, np.float32)
    ctx.call(rfft2d, x_arg, ctx.view(out, (2 * out.size,), np.float32), x.shape[-2], x.shape[-1], H, W,
             ctx.temp((H * W,), np.float64), ctx.temp((H * W,), np.float64), ctx.temp((H,), np.float64),
             ctx.temp((H,), np.float64), rev_h, twr_h, twi_h, ctx.temp((h2,), np.float64),
             ctx.temp((h2,), np.float64), rev_z, twr_z, twi_z, wr, wi)


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
