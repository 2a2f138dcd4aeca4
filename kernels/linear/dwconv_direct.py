"""Float32 DEPTHWISE_CONV_2D with depth multiplier 1 read in place, padding included: no padded copy of the input.

Every output pixel sums only the taps its window has inside the image (the official kernels' semantics: a padded tap
is skipped, not added as 0 * w), in (ky, kx) order from the bias, with dwconv_simd's float tiles (PT pixels or one x
16 channels), which take the taps' input offsets from one table and their weight offsets from another. Per output
row the rows of taps inside the image are the same for every pixel: the pixels whose windows lie inside the image
horizontally share the row's table (tiles of PT pixels, the last one moved back to end at the interior's edge), and
each pixel at the left or right edge gets its own (one-pixel tiles). The tables are built per row in a small int64
scratch (`tl`, 4 x KH * KW per worker), so any window, stride and dilation is served by one compiled kernel.

Against the banded drivers (dwconv_simd.dwconv_f32_simd_banded: the rows a band of outputs needs copied, padded,
into a scratch, their edge columns where the interior is read in place), this copies nothing: on small images with
many channels (14 x 14 x 288, 28 x 28 x 144 at stride 2), where the edge columns were most of every row, the copies
had cost as much as the products. A tap skipped or a padded tap adding 0 * w = +-0 give the same sums (the banded
drivers' argument, kernels/linear/dwconv.py), and here a filter with a NaN or infinite weight needs no other path.
"""

from __future__ import annotations

from lite_numba.kernels.base.threads import PARALLEL, call_at, run_chunks
from lite_numba.kernels.linear.dwconv_simd import VL, dw_f32_tile1, f32_pixels, last_block
from numba import njit


@njit(cache=True, inline="always")
def _taps(tl, r, KW, C, W, dh, dw, kyl, kyh, kxl, kxh):
    """Rows r (input offsets from tap (kyl, kxl)) and r + 1 (weight offsets (ky * KW + kx) * C) of the scratch tl,
    for the taps ky in [kyl, kyh), kx in [kxl, kxh) in order; returns their count."""
    T = 0
    for ky in range(kyl, kyh):
        for kx in range(kxl, kxh):
            tl[r, T] = ((ky - kyl) * dh * W + (kx - kxl) * dw) * C
            tl[r + 1, T] = (ky * KW + kx) * C
            T += 1
    return T


@njit(cache=True, inline="always")
def _valid(i0, size, d, K):
    """The taps k in [lo, hi) of a window starting at input index i0 (dilation d, K taps) inside [0, size)."""
    lo = (-i0 + d - 1) // d if i0 < 0 else 0
    hi = (size - 1 - i0) // d + 1 if size - 1 - i0 >= 0 else 0
    return min(lo, K), max(min(hi, K), min(lo, K))


@njit(cache=True, nogil=True, _nrt=False)
def dwconv_f32_direct(x, w, bias, out, geo, lim, tl, n0, n1, y0, y1):
    """out [N, OH, OW, C] images [n0, n1) x output rows [y0, y1) of the depthwise convolution of x [N, H, W, C]
    with w [KH, KW, C] (depth multiplier 1), geo = [sh, sw, dh, dw, pad_top, pad_left], lim = [lo, hi] the fused
    activation's limits, tl an int64 scratch of at least 4 rows of KH * KW (see module doc)."""
    H, W, C = x.shape[1], x.shape[2], x.shape[3]
    KH, KW = w.shape[0], w.shape[1]
    OH, OW = out.shape[1], out.shape[2]
    sh, sw, dh, dw, pt, pl = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5]
    xf, wf, of = x.reshape(x.size), w.reshape(w.size), out.reshape(out.size)
    lo, hi = lim[0], lim[1]  # (the edge pixels' one-pixel tiles)
    xstep = sw * C
    # interior pixels [xa, xe): their windows lie inside the image horizontally
    xa = min((pl + sw - 1) // sw, OW)
    xe = max(min((W - 1 + pl - (KW - 1) * dw) // sw + 1, OW), xa) if W - 1 + pl - (KW - 1) * dw >= 0 else xa
    for n in range(n0, n1):
        for oy in range(y0, y1):
            iy0 = oy * sh - pt
            kyl, kyh = _valid(iy0, H, dh, KH)
            T = _taps(tl, 0, KW, C, W, dh, dw, kyl, kyh, 0, KW)
            xrow = (n * H + iy0 + kyl * dh) * W  # the pixel index of the first tap row's column 0
            orow = (n * OH + oy) * OW * C
            f32_pixels(xf, (xrow - pl) * C, xstep, tl[0, :T], wf, tl[1, :T], C, bias, of, orow, xa, xe, lim)
            for ox in range(OW):  # the edge pixels, each with its own taps
                if xa <= ox < xe:
                    continue
                ix0 = ox * sw - pl
                kxl, kxh = _valid(ix0, W, dw, KW)
                T2 = _taps(tl, 2, KW, C, W, dh, dw, kyl, kyh, kxl, kxh)
                xo = (xrow + ix0 + kxl * dw) * C
                for c in range(0, C, VL):
                    c0, nch = last_block(c, C)
                    dw_f32_tile1(xf, xo + c0, xstep, tl[2], T2, wf, tl[3], bias, c0, of, orow + ox * C + c0, C, lo,
                                 hi, nch)


@njit(cache=True, inline="always")
def _chunk(args, wk, j):
    addr, x, w, bias, out, geo, lim, tl, ch = args
    call_at(addr, (x, w, bias, out, geo, lim, tl[4 * wk:4 * wk + 4], ch[4 * j], ch[4 * j + 1], ch[4 * j + 2],
                   ch[4 * j + 3]))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def dwconv_f32_direct_par(addr, x, w, bias, out, geo, lim, tl, ch, cnt, T):
    """dwconv_f32_direct (at native address addr, called with threads.call_at) over the chunks
    ch = [n0, n1, y0, y1] * n, taken in turn by T workers, worker k with its own rows 4k..4k+3 of the scratch tl."""
    run_chunks(T, cnt, ch.size // 4, _chunk, (addr, x, w, bias, out, geo, lim, tl, ch))
