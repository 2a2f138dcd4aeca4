"""FULLY_CONNECTED's float32 loops: the packed-weights GEMM, the row-dot kernel for run-time weights, batch
transposes (and the one BATCH_MATMUL's transposed product writes its output with)."""

from __future__ import annotations

import numpy as np
from numba import njit

# output columns kept in L1 while the k loop runs over them: four rows at a time, or one row (a matrix-vector
# product, where a long chunk keeps the reads of B sequential)
_CHUNK4 = 512
_CHUNK1 = 2048


@njit(cache=True, inline="always")
def row_block(ab, m, M, K):
    """The rows a GEMM step takes from row m of an [M, K] operand starting at ab: four when four are left, else one
    (r1..r3 then repeat r0, and their results are never written); (rows, r0, r1, r2, r3) are the rows' offsets."""
    rows = 4 if M - m >= 4 else 1
    r0 = ab + m * K
    r1 = r0 + K if rows == 4 else r0
    r2 = r1 + K if rows == 4 else r0
    r3 = r2 + K if rows == 4 else r0
    return rows, r0, r1, r2, r3


@njit(cache=True, nogil=True)
def gemm_f32(a, a_off, b, b_off, bias, out, M, K, N, lim):
    """For every batch i: out[i] = clamp(A_i @ B_i + bias) with A_i = a[a_off[i]:][:M*K] as [M, K],
    B_i = b[b_off[i]:][:K*N] as [K, N], out[i] the i-th [M, N] block of out, bias [N], lim = [lo, hi].

    Four rows share each load of B and k is unrolled by four; every output is still summed over k in order
    ((((0 + t0) + t1) + t2) ...), so the vectorisation over N needs no reassociation (no fastmath)."""
    lo, hi = lim[0], lim[1]
    K4 = K - K % 4
    zero = np.float32(0.0)
    for i in range(a_off.size):
        ab = a_off[i]
        bb = b_off[i]
        ob = i * M * N
        m = 0
        while m < M:
            rows, r0, r1, r2, r3 = row_block(ab, m, M, K)
            chunk = _CHUNK4 if rows == 4 else _CHUNK1
            for nb in range(0, N, chunk):
                n = min(chunk, N - nb)
                o0 = out[ob + m * N + nb:ob + m * N + nb + n]
                # with one row, o1..o3 alias o0 and are never written
                o1 = out[ob + (m + 1) * N + nb:ob + (m + 1) * N + nb + n] if rows == 4 else o0
                o2 = out[ob + (m + 2) * N + nb:ob + (m + 2) * N + nb + n] if rows == 4 else o0
                o3 = out[ob + (m + 3) * N + nb:ob + (m + 3) * N + nb + n] if rows == 4 else o0
                for j in range(n):
                    o0[j] = zero
                if rows == 4:
                    for j in range(n):
                        o1[j] = zero
                        o2[j] = zero
                        o3[j] = zero
                    for k in range(0, K4, 4):
                        w0 = b[bb + k * N + nb:bb + k * N + nb + n]
                        w1 = b[bb + (k + 1) * N + nb:bb + (k + 1) * N + nb + n]
                        w2 = b[bb + (k + 2) * N + nb:bb + (k + 2) * N + nb + n]
                        w3 = b[bb + (k + 3) * N + nb:bb + (k + 3) * N + nb + n]
                        x00, x01, x02, x03 = a[r0 + k], a[r0 + k + 1], a[r0 + k + 2], a[r0 + k + 3]
                        x10, x11, x12, x13 = a[r1 + k], a[r1 + k + 1], a[r1 + k + 2], a[r1 + k + 3]
                        x20, x21, x22, x23 = a[r2 + k], a[r2 + k + 1], a[r2 + k + 2], a[r2 + k + 3]
                        x30, x31, x32, x33 = a[r3 + k], a[r3 + k + 1], a[r3 + k + 2], a[r3 + k + 3]
                        for j in range(n):
                            y0, y1, y2, y3 = w0[j], w1[j], w2[j], w3[j]
                            o0[j] = (((o0[j] + x00 * y0) + x01 * y1) + x02 * y2) + x03 * y3
                            o1[j] = (((o1[j] + x10 * y0) + x11 * y1) + x12 * y2) + x13 * y3
                            o2[j] = (((o2[j] + x20 * y0) + x21 * y1) + x22 * y2) + x23 * y3
                            o3[j] = (((o3[j] + x30 * y0) + x31 * y1) + x32 * y2) + x33 * y3
                    for k in range(K4, K):
                        w0 = b[bb + k * N + nb:bb + k * N + nb + n]
                        x00, x10, x20, x30 = a[r0 + k], a[r1 + k], a[r2 + k], a[r3 + k]
                        for j in range(n):
                            y0 = w0[j]
                            o0[j] += x00 * y0
                            o1[j] += x10 * y0
                            o2[j] += x20 * y0
                            o3[j] += x30 * y0
                else:
                    for k in range(0, K4, 4):
                        w0 = b[bb + k * N + nb:bb + k * N + nb + n]
                        w1 = b[bb + (k + 1) * N + nb:bb + (k + 1) * N + nb + n]
                        w2 = b[bb + (k + 2) * N + nb:bb + (k + 2) * N + nb + n]
                        w3 = b[bb + (k + 3) * N + nb:bb + (k + 3) * N + nb + n]
                        x00, x01, x02, x03 = a[r0 + k], a[r0 + k + 1], a[r0 + k + 2], a[r0 + k + 3]
                        for j in range(n):
                            o0[j] = (((o0[j] + x00 * w0[j]) + x01 * w1[j]) + x02 * w2[j]) + x03 * w3[j]
                    for k in range(K4, K):
                        w0 = b[bb + k * N + nb:bb + k * N + nb + n]
                        x00 = a[r0 + k]
                        for j in range(n):
                            o0[j] += x00 * w0[j]
                for r in range(rows):
                    o = out[ob + (m + r) * N + nb:ob + (m + r) * N + nb + n]
                    bs = bias[nb:nb + n]
                    for j in range(n):
                        o[j] = min(max(o[j] + bs[j], lo), hi)
            m += rows


@njit(cache=True, nogil=True)
def transpose_batches(x, out, R, C):
    """out[i] = x[i].T for consecutive [R, C] blocks of the flat x (out blocks are [C, R])."""
    for i in range(x.size // max(R * C, 1)):
        base = i * R * C
        for r in range(R):
            for c in range(C):
                out[base + c * R + r] = x[base + r * C + c]


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def fc_rows_f32(x, w, bias, out, batch, k, units, lim):
    """out[b, n] = clamp(dot(w[n, :], x[b, :]) + bias[n]) straight from row-major weights [units, k]: for weights
    known only at run time (e.g. a constant passed into an IF branch or WHILE body) with few rows, where packing
    them at every invoke would cost more than the product. The dots sum in vector lanes."""
    lo, hi = lim[0], lim[1]
    for b in range(batch):
        xr = x[b * k:(b + 1) * k]
        for n in range(units):
            wr = w[n * k:(n + 1) * k]
            s = np.float32(0.0)
            for i in range(k):
                s += wr[i] * xr[i]
            out[b * units + n] = min(max(s + bias[n], lo), hi)
