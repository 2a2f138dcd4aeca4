"""The layouts the float GEMM (kernels/linear/simd_f32.py) reads: B in panels of NR columns (`pack_panels`, at run
time for weights that are not constant), and the zero-padded NHWC copy a direct convolution reads its windows from
(`pad_nhwc`, and `pad_nhwc_par` splitting it over the workers by image rows)."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.copy import TILE, transpose_tile
from lite_numba.kernels.base.threads import PARALLEL, run_chunks
from numba import njit

NR = 32  # columns of a packed panel (two 16-float vectors)


@njit(cache=True, nogil=True)
def pack_panels(src, off, K, N, sk, sn, bp):
    """bp <- B in panels of 32 columns (zero-padded), B[k, n] = src[off + k * sk + n * sn]. Rows of B contiguous in
    src (sn == 1: a plain right-hand side) are copied as slices; columns contiguous (sk == 1: a transposed one, an
    adj_y BATCH_MATMUL or the keys of an attention) are read along k. Unsigned offsets: no negative-index checks,
    so the copies vectorize."""
    bw, sw = bp.view(np.uint32), src.view(np.uint32)
    for p in range((N + NR - 1) // NR):
        n0 = p * NR
        base = p * K * NR
        live = min(NR, N - n0)
        if sn == 1:
            for k in range(K):
                row = bp[base + k * NR:base + (k + 1) * NR]
                s = off + k * sk + n0
                srow = src[s:s + live]
                for j in range(live):
                    row[j] = srow[j]
                for j in range(live, NR):
                    row[j] = 0.0
        elif sk == 1:
            for k in range(K):
                for j in range(live, NR):
                    bp[base + k * NR + j] = 0.0
            # 8 columns x 8 k at a time as a tile transpose (vector loads, shuffles, stores), the rest one by one
            j8, k8 = live // TILE * TILE, K // TILE * TILE
            for j0 in range(0, j8, TILE):
                for k0 in range(0, k8, TILE):
                    transpose_tile(bw, base + k0 * NR + j0, NR, sw, off + (n0 + j0) * sn + k0, sn)
            for j in range(live):
                col = src[off + (n0 + j) * sn:off + (n0 + j) * sn + K]
                for k in range(k8 if j < j8 else 0, K):
                    bp[np.uint64(base + k * NR + j)] = col[k]
        else:
            for k in range(K):
                row = bp[base + k * NR:base + (k + 1) * NR]
                s = np.uint64(off + k * sk + n0 * sn)
                for j in range(live):
                    row[j] = src[s + np.uint64(j * sn)]
                for j in range(live, NR):
                    row[j] = 0.0


@njit(cache=True, inline="always")
def _pad_rows(x, xp, n, r0, r1, H, W, C, Hp, Wp, top, left):
    """Rows [r0, r1) of padded image n: xp [N, Hp, Wp, C] <- x [N, H, W, C] placed at (top, left), zeros around
    (both flat). Only the border is zeroed (the interior is written once, by the copy)."""
    row = W * C
    prow = Wp * C
    lead = left * C
    trail = prow - lead - row
    img = xp[n * Hp * prow:(n + 1) * Hp * prow]
    for hp in range(r0, r1):
        d = img[hp * prow:(hp + 1) * prow]
        h = hp - top
        if h < 0 or h >= H:
            for i in range(prow):
                d[i] = 0.0
            continue
        s = x[(n * H + h) * row:(n * H + h + 1) * row]
        for j in range(lead):
            d[j] = 0.0
        inner = d[lead:lead + row]
        for j in range(row):
            inner[j] = s[j]
        for j in range(lead + row, lead + row + trail):
            d[j] = 0.0


@njit(cache=True, nogil=True)
def pad_nhwc(x, xp, N, H, W, C, Hp, Wp, top, left):
    """xp [N, Hp, Wp, C] <- x [N, H, W, C] placed at (top, left), zeros around (both flat)."""
    for n in range(N):
        _pad_rows(x, xp, n, 0, Hp, H, W, C, Hp, Wp, top, left)


@njit(cache=True, inline="always")
def _pad_chunk(args, wk, j):
    x, xp, H, W, C, Hp, Wp, top, left, ch = args
    for n in range(ch[4 * j], ch[4 * j + 1]):
        _pad_rows(x, xp, n, ch[4 * j + 2], ch[4 * j + 3], H, W, C, Hp, Wp, top, left)


@njit(cache=True, nogil=True, parallel=PARALLEL)
def pad_nhwc_par(x, xp, H, W, C, Hp, Wp, top, left, ch, cnt, T):
    """pad_nhwc over the chunks ch = [n0, n1, first padded row, end row] * n (threads.image_row_chunks), taken in
    turn by T workers (a large input's copy is otherwise a serial step before the parallel convolution:
    MediaPipe's 192 x 192 x 3 stems)."""
    run_chunks(T, cnt, ch.size // 4, _pad_chunk, (x, xp, H, W, C, Hp, Wp, top, left, ch))


__all__ = ["NR", "pack_panels", "pad_nhwc", "pad_nhwc_par"]
