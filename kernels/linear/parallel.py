"""Parallel drivers of the portable (plain Numba) float32 kernels, for num_threads > 1 (see kernels/base/threads.py).

Each driver runs the serial kernel on a fixed list of chunks computed in prepare, taken in turn by the workers,
with views of the chunk's rows and the worker's own slice of scratch, so every output is computed by the same code
as with one thread (identical results for any thread count): CONV_2D (conv_loops.conv2d_f32: ranges of images x
bands of output rows, the top padding moved per chunk; conv_loops.gemm_f32 for pointwise layers: bands of rows),
FULLY_CONNECTED (fully_connected.gemm_f32: bands of rows), and DEPTHWISE_CONV_2D (dwconv.dw3x3_f32 /
dwconv_f32_padded over the input, dwconv_f32_banded over a band scratch per worker).
"""

from __future__ import annotations

from lite_numba.kernels.base.threads import CHUNKS_PER_THREAD, bands, next_chunk
from lite_numba.kernels.linear.conv_loops import conv2d_f32, gemm_f32
from lite_numba.kernels.linear.dwconv_loops import dw3x3_f32, dwconv_f32_banded, dwconv_f32_padded, pad_band
from lite_numba.kernels.linear.fc_loops import gemm_f32 as fc_gemm_f32
from numba import njit, prange


@njit(cache=True, nogil=True, parallel=True)
def conv2d_f32_par(x, w, bias, out, acc, geos, lim, ch, cnt, T):
    """conv2d_f32 over the chunks ch = [n0, n1, y0, y1] * n (geos[j]: chunk j's geometry), taken in turn by T
    workers (cnt: a counter scratch); acc: T slices."""
    N, H, W, CI = x.shape
    _, OH, OW, CO = out.shape
    nch = ch.size // 4
    A = acc.size // T
    xf = x.reshape(x.size)
    of = out.reshape(out.size)
    cnt[0] = 0
    for wk in prange(T):
        ac = acc[wk * A:(wk + 1) * A]
        j = next_chunk(cnt)
        while j < nch:
            n0, n1, y0, y1 = ch[4 * j], ch[4 * j + 1], ch[4 * j + 2], ch[4 * j + 3]
            xs = xf[n0 * H * W * CI:n1 * H * W * CI].reshape((n1 - n0, H, W, CI))
            os = of[(n0 * OH + y0) * OW * CO:((n1 - 1) * OH + y1) * OW * CO].reshape((n1 - n0, y1 - y0, OW, CO))
            conv2d_f32(xs, w, bias, os, ac, geos[j], lim)
            j = next_chunk(cnt)


@njit(cache=True, nogil=True, parallel=True)
def gemm_f32_par(x, w, bias, out, lim, ch, cnt, T):
    """conv_loops.gemm_f32 over the row bands ch = [r0, r1] * n, taken in turn by T workers."""
    nch = ch.size // 2
    cnt[0] = 0
    for _w in prange(T):
        j = next_chunk(cnt)
        while j < nch:
            r0, r1 = ch[2 * j], ch[2 * j + 1]
            gemm_f32(x[r0:r1], w, bias, out[r0:r1], lim)
            j = next_chunk(cnt)


@njit(cache=True, nogil=True, parallel=True)
def fc_gemm_f32_par(a, a_off, b, b_off, bias, out, M, K, N, lim, ch, cnt, T):
    """fully_connected.gemm_f32 of one matrix (a_off.size == 1) over the row bands ch = [r0, r1, a_off + r0 * K]
    * n, taken in turn by T workers."""
    nch = ch.size // 3
    cnt[0] = 0
    for _w in prange(T):
        j = next_chunk(cnt)
        while j < nch:
            r0, r1 = ch[3 * j], ch[3 * j + 1]
            fc_gemm_f32(a, ch[3 * j + 2:3 * j + 3], b, b_off, bias, out[r0 * N:r1 * N], r1 - r0, K, N, lim)
            j = next_chunk(cnt)


@njit(cache=True, inline="always")
def _dw_rows(xp, out, geo, n, y0, y1):
    """Image n's padded input from the rows output rows [y0, y1) read, and those output rows (C-contiguous)."""
    N, HP, WP, C = xp.shape
    _, OH, OW, CO = out.shape
    sh = geo[0]
    xf = xp.reshape(xp.size)
    of = out.reshape(out.size)
    xs = xf[(n * HP + y0 * sh) * WP * C:(n + 1) * HP * WP * C].reshape((1, HP - y0 * sh, WP, C))
    os = of[(n * OH + y0) * OW * CO:(n * OH + y1) * OW * CO].reshape((1, y1 - y0, OW, CO))
    return xs, os


@njit(cache=True, nogil=True, parallel=True)
def dwconv_f32_padded_par(xp, w, bias, out, geo, lim, ch, cnt, T):
    """dw3x3_f32 (3x3 windows) or dwconv_f32_padded over the chunks ch = [n0, n1, y0, y1] * n, taken in turn by T
    workers."""
    nch = ch.size // 4
    KH, KW = w.shape[0], w.shape[1]
    cnt[0] = 0
    for _w in prange(T):
        j = next_chunk(cnt)
        while j < nch:
            for n in range(ch[4 * j], ch[4 * j + 1]):
                xs, os = _dw_rows(xp, out, geo, n, ch[4 * j + 2], ch[4 * j + 3])
                if KH == 3 and KW == 3:
                    dw3x3_f32(xs, w, bias, os, geo, lim)
                else:
                    dwconv_f32_padded(xs, w, bias, os, geo, lim)
            j = next_chunk(cnt)


@njit(cache=True, nogil=True, parallel=True)
def dwconv_f32_banded_par(xb, sb, s, w, bias, out, geo, lim, ch, cnt, T):
    """dwconv_f32_banded over the chunks ch = [n0, n1, y0, y1] * n, taken in turn by T workers: worker k pads its
    bands into s[k] (sb: its bytes, T * R rows)."""
    nch = ch.size // 4
    _, OH, OW, C = out.shape
    KH, KW = w.shape[0], w.shape[1]
    band = geo[9]
    R = sb.shape[0] // T
    cnt[0] = 0
    for wk in prange(T):
        sj = s[wk:wk + 1]
        sbj = sb[wk * R:(wk + 1) * R]
        j = next_chunk(cnt)
        while j < nch:
            for n in range(ch[4 * j], ch[4 * j + 1]):
                y1 = ch[4 * j + 3]
                for oy0 in range(ch[4 * j + 2], y1, band):
                    nb = min(band, y1 - oy0)
                    pad_band(xb, sbj, geo, KH, n, oy0, nb)
                    ob = out[n, oy0:oy0 + nb].reshape((1, nb, OW, C))
                    if KH == 3 and KW == 3:
                        dw3x3_f32(sj, w, bias, ob, geo, lim)
                    else:
                        dwconv_f32_padded(sj, w, bias, ob, geo, lim)
            j = next_chunk(cnt)


# the parallel driver of each serial depthwise kernel (one driver serves both unbanded kernels)
DW_PAR = {dw3x3_f32: dwconv_f32_padded_par, dwconv_f32_padded: dwconv_f32_padded_par,
          dwconv_f32_banded: dwconv_f32_banded_par}


def image_row_chunks(N: int, OH: int, t: int, align: int = 1) -> list[tuple[int, int, int, int]]:
    """(n0, n1, y0, y1) chunks: ranges of whole images when there are at least t, else bands of each image's
    output rows (starts multiples of align)."""
    parts = CHUNKS_PER_THREAD * t
    if N >= t:
        return [(n0, n1, 0, OH) for n0, n1 in bands(N, parts)]
    return [(n, n + 1, y0, y1) for n in range(N) for y0, y1 in bands(OH, -(-parts // N), align)]


