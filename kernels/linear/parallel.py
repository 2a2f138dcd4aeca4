"""Parallel drivers of the portable (plain Numba) float32 kernels, for num_threads > 1 (see kernels/base/threads.py).

Each driver runs the serial kernel on a fixed list of chunks computed in prepare, taken in turn by the workers,
with views of the chunk's rows and the worker's own slice of scratch, so every output is computed by the same code
as with one thread (identical results for any thread count): CONV_2D (conv_loops.conv2d_f32: ranges of images x
bands of output rows, the top padding moved per chunk; conv_loops.gemm_f32 for pointwise layers: bands of rows),
FULLY_CONNECTED (fully_connected.gemm_f32: bands of rows), and DEPTHWISE_CONV_2D (dwconv.dw3x3_f32 /
dwconv_f32_padded over the input, dwconv_f32_banded over a band scratch per worker).
"""

from __future__ import annotations

from lite_numba.kernels.base.threads import PARALLEL, run_chunks
from lite_numba.kernels.linear.conv_loops import conv2d_f32, gemm_f32
from lite_numba.kernels.linear.dwconv_loops import (
    dw3x3_f32,
    dw_f32_band,
    dw_f32_rows,
    dw_rows,
    dwconv_f32_banded,
    dwconv_f32_padded,
    each_band,
)
from lite_numba.kernels.linear.fc_loops import gemm_f32 as fc_gemm_f32
from numba import njit


@njit(cache=True, inline="always")
def _conv2d_chunk(args, wk, j):
    x, w, bias, out, acc, geos, lim, ch, T = args
    N, H, W, CI = x.shape
    _, OH, OW, CO = out.shape
    A = acc.size // T
    n0, n1, y0, y1 = ch[4 * j], ch[4 * j + 1], ch[4 * j + 2], ch[4 * j + 3]
    xs = x.reshape(x.size)[n0 * H * W * CI:n1 * H * W * CI].reshape((n1 - n0, H, W, CI))
    os = out.reshape(out.size)[(n0 * OH + y0) * OW * CO:((n1 - 1) * OH + y1) * OW * CO].reshape(
        (n1 - n0, y1 - y0, OW, CO))
    conv2d_f32(xs, w, bias, os, acc[wk * A:(wk + 1) * A], geos[j], lim)


@njit(cache=True, nogil=True, parallel=PARALLEL)
def conv2d_f32_par(x, w, bias, out, acc, geos, lim, ch, cnt, T):
    """conv2d_f32 over the chunks ch = [n0, n1, y0, y1] * n (geos[j]: chunk j's geometry), taken in turn by T
    workers (cnt: a counter scratch); acc: T slices."""
    run_chunks(T, cnt, ch.size // 4, _conv2d_chunk, (x, w, bias, out, acc, geos, lim, ch, T))


@njit(cache=True, inline="always")
def _gemm_chunk(args, wk, j):
    x, w, bias, out, lim, ch = args
    r0, r1 = ch[2 * j], ch[2 * j + 1]
    gemm_f32(x[r0:r1], w, bias, out[r0:r1], lim)


@njit(cache=True, nogil=True, parallel=PARALLEL)
def gemm_f32_par(x, w, bias, out, lim, ch, cnt, T):
    """conv_loops.gemm_f32 over the row bands ch = [r0, r1] * n, taken in turn by T workers."""
    run_chunks(T, cnt, ch.size // 2, _gemm_chunk, (x, w, bias, out, lim, ch))


@njit(cache=True, inline="always")
def _fc_chunk(args, wk, j):
    a, b, b_off, bias, out, K, N, lim, ch = args
    r0, r1 = ch[3 * j], ch[3 * j + 1]
    fc_gemm_f32(a, ch[3 * j + 2:3 * j + 3], b, b_off, bias, out[r0 * N:r1 * N], r1 - r0, K, N, lim)


@njit(cache=True, nogil=True, parallel=PARALLEL)
def fc_gemm_f32_par(a, a_off, b, b_off, bias, out, M, K, N, lim, ch, cnt, T):
    """fully_connected.gemm_f32 of one matrix (a_off.size == 1) over the row bands ch = [r0, r1, a_off + r0 * K]
    * n, taken in turn by T workers."""
    run_chunks(T, cnt, ch.size // 3, _fc_chunk, (a, b, b_off, bias, out, K, N, lim, ch))


@njit(cache=True, inline="always")
def _dw_padded_chunk(args, wk, j):
    xp, w, bias, out, geo, lim, ch = args
    for n in range(ch[4 * j], ch[4 * j + 1]):
        xs, os = dw_rows(xp, out, geo, n, ch[4 * j + 2], ch[4 * j + 3])
        dw_f32_rows(xs, w, bias, os, geo, lim)


@njit(cache=True, nogil=True, parallel=PARALLEL)
def dwconv_f32_padded_par(xp, w, bias, out, geo, lim, ch, cnt, T):
    """dw3x3_f32 (3x3 windows) or dwconv_f32_padded over the chunks ch = [n0, n1, y0, y1] * n, taken in turn by T
    workers."""
    run_chunks(T, cnt, ch.size // 4, _dw_padded_chunk, (xp, w, bias, out, geo, lim, ch))


@njit(cache=True, inline="always")
def _dw_banded_chunk(args, wk, j):
    xb, sb, s, w, bias, out, geo, lim, ch, T = args
    R = sb.shape[0] // T
    for n in range(ch[4 * j], ch[4 * j + 1]):
        each_band(xb, sb[wk * R:(wk + 1) * R], s[wk:wk + 1], w, out, geo, n, ch[4 * j + 2], ch[4 * j + 3],
                  dw_f32_band, (w, bias, geo, lim))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def dwconv_f32_banded_par(xb, sb, s, w, bias, out, geo, lim, ch, cnt, T):
    """dwconv_f32_banded over the chunks ch = [n0, n1, y0, y1] * n, taken in turn by T workers: worker k pads its
    bands into s[k] (sb: its bytes, T * R rows)."""
    run_chunks(T, cnt, ch.size // 4, _dw_banded_chunk, (xb, sb, s, w, bias, out, geo, lim, ch, T))


# the parallel driver of each serial depthwise kernel (one driver serves both unbanded kernels)
DW_PAR = {dw3x3_f32: dwconv_f32_padded_par, dwconv_f32_padded: dwconv_f32_padded_par,
          dwconv_f32_banded: dwconv_f32_banded_par}


