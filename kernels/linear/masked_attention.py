"""MASKED_ATTENTION: BATCH_MATMUL -> ADD(mask) -> SOFTMAX -> BATCH_MATMUL as one kernel that skips the key positions
the mask excludes (lite_numba/runtime/fusion.py fuse_masked_attention writes the node; issue 39).

litert-torch's export_hf attention multiplies the queries by the whole KV cache (1,024 positions) at every call, adds
a mask (0 where the key position <= the query's, -inf elsewhere; -FLT_MAX in Gemma 3's sliding-window layers, whose
ADD of the window clamps -inf), takes the SOFTMAX over the keys and multiplies by the V cache. At run time this kernel
finds J = 1 + the last key column holding a mask value above SKIP_MASK = -2**100 in any row (rounded up to 16, the
row maximum's lane count and a multiple of the exponential sum's 8-lane step), and computes the scores, the mask
addition, the SOFTMAX and the second product over the first J columns only, with the routines the unfused nodes run:
the float GEMM drivers of simd_f32 / simd_f32_narrow (fc_loops.gemm_f32 on the portable level), ADD's clamp to
[-FLT_MAX, FLT_MAX], SOFTMAX's steps (vecmath: the row maximum in 16 lanes, the shift and scale, Eigen's exponential
and packet sum with the row's alignment in the full tensor, the scale by 1 / sum).

Why it is exact: every skipped score s is at most Bs = H max|q| max|k| (widened by the sums' rounding; q and the
skipped K rows are scanned), so ADD stores x = clamp(s + c) <= U = clamp(Bs + SKIP_MASK) for a mask value c <= SKIP_MASK
(rounding is monotonic; -inf gives -FLT_MAX). When (U - m) * beta < -104 for the row maximum m over the first J
columns (checked per row), x < m never wins the maximum (m is the unfused one: the maximum picks a value, the same
lanes see the same values), its exponential is exactly +0 (Eigen's exp is 0 below -104), which changes no lane of
the packet sum (every partial sum is >= +0), its probability is +0 * (1 / sum) = +0 and its products with the finite
skipped V values are +-0, which change no sum that starts from +0 (such a sum is never -0). The GEMMs sum every output
over k in order, so a computed column of the first product is the same whichever columns are computed beside it, and
the second product's sums over j < J are its sums over all j.

The fallback (the whole computation, J = S) when a condition fails: a query or skipped K / V value not finite, Bs
>= FLT_MAX / 4, a row whose (U - m) * beta is not below -104 (a row masked everywhere: the unfused SOFTMAX spreads it
evenly over all S columns, as ADD clamped its -inf). The scans read q and the skipped K and V rows once (an integer
maximum of the values' magnitude bits, which vectorizes). Key lengths S not a multiple of 16 are never skipped.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.threads import CHUNKS_PER_THREAD, bands, threads_for
from lite_numba.kernels.base.vecmath import (
    eigen_exp_normalize,
    f32_bits,
    f32_from_bits,
    row_max_f32,
    row_shift_scale_f32,
    wide_vectors,
)
from lite_numba.kernels.linear import simd_f32, simd_f32_narrow
from lite_numba.kernels.linear.batch_matmul import batch_offsets, strides_of
from lite_numba.kernels.linear.fc_loops import gemm_f32
from lite_numba.kernels.linear.simd_f32 import NR, pad_bias, panel_count
from numba import njit

from lite_numba.ops import PrepareContext, kernel

SPAN = 16  # J is a multiple of this: row_max_f32's lanes (and a multiple of eigen_sum_f32's 8-lane step)
F32_MAX = float(np.finfo(np.float32).max)
EXP_ZERO = -104.0  # vecmath.eigen_exp_f32 returns +0 below this
# mask values at or below this are skippable: -inf (the causal mask), -FLT_MAX (ADD's clamp of -inf + a finite
# value: Gemma 3's sliding-window layers add their window to the causal mask), float min fills; not -1e9 or -10000
SKIP_MASK = -(2.0 ** 100)
INF_BITS = 0x7F800000


# --- the GEMMs: one call shape for every level -------------------------------------------------------------------


@njit(cache=True, inline="always")
def _zmm(a, a_off, rows, segs, b, b_off, sk, sn, K, bp, bias, c, N, lim, ascr, z1, ch, cnt, T):
    simd_f32.batch_gemm(a, a_off, rows, b, b_off, sk, sn, K, bp, bias, c, N, lim, segs)


@njit(cache=True, inline="always")
def _ymm(a, a_off, rows, segs, b, b_off, sk, sn, K, bp, bias, c, N, lim, ascr, z1, ch, cnt, T):
    simd_f32_narrow.batch_gemm(a, a_off, rows, b, b_off, sk, sn, K, bp, bias, c, N, lim, segs)


# the parallel drivers (num_threads > 1), in entries of their own: where they are parallel=True (threads.PARALLEL),
# code that calls one needs the threading layer's symbols when it loads, which a 1-thread process does not start
@njit(cache=True, inline="always")
def _zmm_par(a, a_off, rows, segs, b, b_off, sk, sn, K, bp, bias, c, N, lim, ascr, z1, ch, cnt, T):
    simd_f32.batch_gemm_par(a, a_off, rows, b, b_off, sk, sn, K, bp, bias, c, N, lim, segs, ch, cnt, T)


@njit(cache=True, inline="always")
def _ymm_par(a, a_off, rows, segs, b, b_off, sk, sn, K, bp, bias, c, N, lim, ascr, z1, ch, cnt, T):
    simd_f32_narrow.batch_gemm_par(a, a_off, rows, b, b_off, sk, sn, K, bp, bias, c, N, lim, segs, ch, cnt, T)


@njit(cache=True, inline="always")
def _portable(a, a_off, rows, segs, b, b_off, sk, sn, K, bp, bias, c, N, lim, ascr, z1, ch, cnt, T):
    """batch_gemm's contract on the portable loops (fc_loops.gemm_f32, what BATCH_MATMUL runs there): per batch, A
    gathered into ascr [M, K] and B into bp [K, N], then the same sums (k in order from 0, then the bias)."""
    M = rows.size
    for i in range(a_off.size):
        for m in range(M):
            base = a_off[i] + rows[m]
            for k in range(K):
                ascr[m * K + k] = a[base + (segs[0] + k if segs.size == 1 else segs[k])]
        for k in range(K):
            for n in range(N):
                bp[k * N + n] = b[b_off[i] + k * sk + n * sn]
        gemm_f32(ascr, z1, bp, z1, bias, c[i * M * N:(i + 1) * M * N], M, K, N, lim)


# --- the checks -------------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _absmax(x, lo, n):
    """The largest |x[lo:lo + n]| as the IEEE bits of a float32 (an integer maximum, which vectorizes): at least
    INF_BITS when one of them is inf or NaN."""
    m = np.int32(0)
    for i in range(n):
        m = max(m, f32_bits(x[lo + i]) & np.int32(0x7FFFFFFF))
    return m


@njit(cache=True, inline="always")
def _absmax_rows(x, offs, J, S, W, sj, sw):
    """_absmax over x[o + j * sj + w * sw] for o in offs, J <= j < S, w < W (sj or sw is 1)."""
    m = np.int32(0)
    for o in offs:
        if sw == 1:
            if sj == W:
                m = max(m, _absmax(x, o + J * W, (S - J) * W))
            else:
                for j in range(J, S):
                    m = max(m, _absmax(x, o + j * sj, W))
        elif sj == 1:
            for w in range(W):
                m = max(m, _absmax(x, o + w * sw + J, S - J))
        else:
            for j in range(J, S):
                for w in range(W):
                    m = max(m, f32_bits(x[o + j * sj + w * sw]) & np.int32(0x7FFFFFFF))
    return m


@njit(cache=True, inline="always")
def _span(mask, rows, S):
    """1 + the last column of mask [rows, S] holding a value above SKIP_MASK (or NaN) in any row, rounded up to
    SPAN (at least SPAN), at most S. Rows from the last (the causal mask's longest) first; each only past the span
    found so far."""
    c = np.float32(SKIP_MASK)
    J = 0
    for r in range(rows - 1, -1, -1):
        lo = r * S
        live = 0
        for j in range(J, S):
            live += not (mask[lo + j] <= c)
        if live:
            j = S - 1
            while mask[lo + j] <= c:
                j -= 1
            J = j + 1
            if J >= S:
                return S
    return min(S, max(SPAN, (J + SPAN - 1) // SPAN * SPAN))


@njit(cache=True, inline="always")
def _skipped_bound(q, kc, kscan, st, v, vscan, J, S, H, N2, lo, hi):
    """An upper bound U of what ADD stores in a skipped column (score + mask, clamped), or NaN when the columns J..
    may not be skipped (the module docstring's value checks): U = clamp(Bs + SKIP_MASK) with Bs >= every skipped
    score (H max|q| max|k| widened by the sums' rounding), rounding being monotonic."""
    qb = _absmax(q, 0, q.size)
    kb = _absmax_rows(kc, kscan, J, S, H, st[1], st[0])
    vb = _absmax_rows(v, vscan, J, S, N2, st[2], st[3])
    nan = np.float32(np.nan)
    if qb >= INF_BITS or kb >= INF_BITS or vb >= INF_BITS:
        return nan
    bound = H * float(f32_from_bits(qb)) * float(f32_from_bits(kb)) * (1.0 + (H + 4) * 2.0 ** -23)
    if bound >= F32_MAX / 4:
        return nan
    u = np.float32(bound) + np.float32(SKIP_MASK)
    return min(max(u, lo), hi)


# --- the driver ------------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _run(gemm, q, qo, rows1, segs1, kc, ko, mask, mrow, v, vo, st, out, sc, mx, bp, bias, lim, scr, pidx, scans, dims,
         beta, state, ascr, z1, ch, cnt):
    """The kernel (module docstring) on the GEMM `gemm` (batch_gemm's arguments, plus the portable scratch and the
    parallel driver's chunks). st = the strides (k, n) of both products' right-hand sides; scr: the second
    product's row table and batch offsets; scans: the distinct K matrices' offsets, then the V ones'; ch: the
    chunks of both products."""
    wide_vectors()
    M, S, H, N2, T, can_skip, mask_first, mrows = dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6], \
        dims[7]
    nk, nc = dims[8], dims[9]
    rows = ko.size * M
    lo, hi = lim[2], lim[3]
    J = _span(mask, mrows, S) if can_skip else S
    u = _skipped_bound(q, kc, scans[:nk], st, v, scans[nk:], J, S, H, N2, lo, hi) if J < S else np.float32(0.0)
    if u != u:
        J = S
    b = np.float32(beta)
    while True:
        # scores [rows, J] = q k^T over the first J keys, + mask, clamped as ADD stores them
        gemm(q, qo, rows1, segs1, kc, ko, st[0], st[1], H, bp, bias, sc, J, lim, ascr, z1, ch[:nc], cnt, T)
        for r in range(rows):
            o, mo = r * J, mrow[r]
            if mask_first:
                for j in range(J):
                    sc[o + j] = min(max(mask[mo + j] + sc[o + j], lo), hi)
            else:
                for j in range(J):
                    sc[o + j] = min(max(sc[o + j] + mask[mo + j], lo), hi)
        ok = True
        for r in range(rows):
            m = row_max_f32(sc, r * J, J)
            mx[r] = m
            if J < S and not ((u - m) * b < np.float32(EXP_ZERO)):
                ok = False
        if ok:
            break
        J = S  # a skipped column would not be 0 after the SOFTMAX: everything
    state[0] = J
    # SOFTMAX (softmax.softmax_f32's steps, each row's alignment its place in the unfused [rows, S] tensor)
    for r in range(rows):
        row_shift_scale_f32(sc, sc, r * J, J, mx[r], b)
    # J < S: S and J are multiples of 16, every exponential is a packet's, as in the unfused tensor
    eigen_exp_normalize(sc, rows, J, S)
    # out = probabilities [.., M, J] x V over the first J keys
    rows2, ao2 = scr[:M], scr[M:]
    for m in range(M):
        rows2[m] = m * J
    for i in range(ao2.size):
        ao2[i] = pidx[i] * M * J
    gemm(sc, ao2, rows2, z1, v, vo, st[2], st[3], J, bp, bias, out, N2, lim, ascr, z1, ch[nc:], cnt, T)


@njit(cache=True, nogil=True)
def masked_attention_zmm(q, qo, rows1, segs1, kc, ko, mask, mrow, v, vo, st, out, sc, mx, bp, bias, lim, scr, pidx,
                         scans, dims, beta, state, ascr, z1, ch, cnt):
    _run(_zmm, q, qo, rows1, segs1, kc, ko, mask, mrow, v, vo, st, out, sc, mx, bp, bias, lim, scr, pidx, scans,
         dims, beta, state, ascr, z1, ch, cnt)


@njit(cache=True, nogil=True)
def masked_attention_zmm_par(q, qo, rows1, segs1, kc, ko, mask, mrow, v, vo, st, out, sc, mx, bp, bias, lim, scr, pidx,
                             scans, dims, beta, state, ascr, z1, ch, cnt):
    _run(_zmm_par, q, qo, rows1, segs1, kc, ko, mask, mrow, v, vo, st, out, sc, mx, bp, bias, lim, scr, pidx, scans,
         dims, beta, state, ascr, z1, ch, cnt)


@njit(cache=True, nogil=True)
def masked_attention_ymm(q, qo, rows1, segs1, kc, ko, mask, mrow, v, vo, st, out, sc, mx, bp, bias, lim, scr, pidx,
                         scans, dims, beta, state, ascr, z1, ch, cnt):
    _run(_ymm, q, qo, rows1, segs1, kc, ko, mask, mrow, v, vo, st, out, sc, mx, bp, bias, lim, scr, pidx, scans,
         dims, beta, state, ascr, z1, ch, cnt)


@njit(cache=True, nogil=True)
def masked_attention_ymm_par(q, qo, rows1, segs1, kc, ko, mask, mrow, v, vo, st, out, sc, mx, bp, bias, lim, scr, pidx,
                             scans, dims, beta, state, ascr, z1, ch, cnt):
    _run(_ymm_par, q, qo, rows1, segs1, kc, ko, mask, mrow, v, vo, st, out, sc, mx, bp, bias, lim, scr, pidx, scans,
         dims, beta, state, ascr, z1, ch, cnt)


@njit(cache=True, nogil=True)
def masked_attention_portable(q, qo, rows1, segs1, kc, ko, mask, mrow, v, vo, st, out, sc, mx, bp, bias, lim, scr, pidx,
                              scans, dims, beta, state, ascr, z1, ch, cnt):
    _run(_portable, q, qo, rows1, segs1, kc, ko, mask, mrow, v, vo, st, out, sc, mx, bp, bias, lim, scr, pidx, scans,
         dims, beta, state, ascr, z1, ch, cnt)


# --- prepare ---------------------------------------------------------------------------------------------------


def _broadcast_offsets(shape, out_b) -> np.ndarray:
    """Element offset, in a C-contiguous tensor of `shape`, of the matrix each batch of out_b (row-major) reads
    (shape's batch dimensions padded with ones to out_b's rank; broadcast ones stay at 0)."""
    b = (1,) * (len(out_b) + 2 - len(shape)) + tuple(shape)
    return np.ascontiguousarray(batch_offsets(b, strides_of(b), out_b))


def _batch(ctx: PrepareContext, a, b, what: str) -> tuple:
    ctx.check(2 <= len(a) <= 5 and 2 <= len(b) <= 5, f"{what}: ranks must be 2 to 5, got {len(a)} and {len(b)}")
    rank = max(len(a), len(b))
    ab, bb = (1,) * (rank - len(a)) + tuple(a[:-2]), (1,) * (rank - len(b)) + tuple(b[:-2])
    ctx.check(all(x == y or 1 in (x, y) for x, y in zip(ab, bb)),
              f"{what}: batch dimensions of {list(a)} and {list(b)} cannot be broadcast")
    return tuple(max(x, y) for x, y in zip(ab, bb))


@kernel("MASKED_ATTENTION")
def MASKED_ATTENTION(ctx: PrepareContext) -> None:
    """q, k, mask, v -> BATCH_MATMUL(SOFTMAX(ADD(BATCH_MATMUL(q, k), mask)), v) (options: the two products' adj_x /
    adj_y, mask_first: the mask is ADD's first input, beta: SOFTMAX's), float32."""
    ctx.check_num(inputs=4, outputs=1)
    q, k, mask, v = (ctx.input(i) for i in range(4))
    for t in (q, k, mask, v):
        ctx.check_dtype(t, np.float32)
    o = ctx.options
    adj_x, adj_y, adj_y2 = bool(o.get("adj_x", False)), bool(o.get("adj_y", False)), bool(o.get("adj_y2", False))
    b1 = _batch(ctx, q.shape, k.shape, "first product")
    M, H = (q.shape[-1], q.shape[-2]) if adj_x else (q.shape[-2], q.shape[-1])
    H2, S = (k.shape[-1], k.shape[-2]) if adj_y else (k.shape[-2], k.shape[-1])
    ctx.check(H == H2, f"inner dimensions differ: {H} (q {list(q.shape)}) and {H2} (k {list(k.shape)})")
    scores = b1 + (M, S)
    ms = (1,) * (len(scores) - mask.ndim) + tuple(mask.shape)
    ctx.check(mask.ndim <= len(scores) and ms[-1] == S and all(a in (1, w) for a, w in zip(ms, scores)),
              f"mask of shape {list(mask.shape)} does not broadcast to the scores {list(scores)} along every key")
    b2 = _batch(ctx, scores, v.shape, "second product")
    S2, N2 = (v.shape[-1], v.shape[-2]) if adj_y2 else (v.shape[-2], v.shape[-1])
    ctx.check(S2 == S, f"the values' {S2} positions do not match the keys' {S}")
    ctx.check(min(M, H, S, N2) > 0, "empty attention dimensions")
    out = ctx.set_output(0, b2 + (M, N2), np.float32)
    if out.size == 0:
        return
    d = simd_f32_narrow.float_drivers()
    # the first product: A = q (rows m * am, k at ak), B[k, n] = k[h * ksk + j * ksn]
    qs = strides_of(q.shape)
    am, ak = (qs[-1], qs[-2]) if adj_x else (qs[-2], qs[-1])
    ks = strides_of(k.shape)
    ksk, ksn = (ks[-1], ks[-2]) if adj_y else (ks[-2], ks[-1])
    vs = strides_of(v.shape)
    vsk, vsn = (vs[-1], vs[-2]) if adj_y2 else (vs[-2], vs[-1])
    rows1 = np.arange(M, dtype=np.int64) * am
    segs1 = np.arange(H, dtype=np.int64) * ak if ak != 1 else np.zeros(1, np.int64)
    ko = _broadcast_offsets(k.shape, b1)
    vo = _broadcast_offsets(v.shape, b2)
    n1, n2 = ko.size, vo.size
    pidx = _broadcast_offsets(scores, b2) // (M * S)  # the scores' batch each output batch reads
    mo = _broadcast_offsets(ms, b1)  # the mask's matrix per scores batch, then its rows (or row 0 if broadcast)
    mrow = (mo[:, None] + np.arange(M, dtype=np.int64) * (S if ms[-2] != 1 else 0)).reshape(-1).astype(np.int64)
    t = threads_for(ctx, n1 * M * H * S)
    mr = d.mr if d is not None else 1
    if d is None:
        t = 1

    def chunks(B):
        if t > 1 and (B >= t or M >= 2 * mr * t):
            ch = [(i0, i1, 0, M) for i0, i1 in bands(B, CHUNKS_PER_THREAD * t)] if B >= t else \
                [(0, B, r0, r1) for r0, r1 in bands(M, CHUNKS_PER_THREAD * t, mr)]
            return np.array(ch, np.int64).reshape(-1), t
        return np.zeros(4, np.int64), 1
    ch1, t1 = chunks(n1)
    ch2, t2 = chunks(n2)
    T = min(t1, t2)
    fn = masked_attention_portable if d is None else \
        (masked_attention_zmm_par if T > 1 else masked_attention_zmm) if d is simd_f32.ZMM else \
        (masked_attention_ymm_par if T > 1 else masked_attention_ymm)
    if d is None:
        pack = max(H * S, S * N2)
    else:
        pack = max(panel_count(S) * H, panel_count(N2) * S) * NR * T
    sc = ctx.temp((n1 * M * S,), np.float32)
    lim = np.array([-np.inf, np.inf, -F32_MAX, F32_MAX], np.float32)
    kscan, vscan = np.unique(ko), np.unique(vo)
    dims = np.array([M, S, H, N2, T, S % SPAN == 0, bool(o.get("mask_first", False)), mask.size // S, kscan.size,
                     ch1.size], np.int64)
    flat = lambda x: ctx.view(x, (x.size,))  # noqa: E731
    ctx.call(fn, flat(q), _broadcast_offsets(q.shape, b1), rows1, segs1, flat(k), ko, flat(mask), mrow, flat(v), vo,
             np.array([ksk, ksn, vsk, vsn], np.int64), ctx.view(out, (out.size,)), sc, ctx.temp((n1 * M,), np.float32),
             ctx.temp((pack,), np.float32), pad_bias(None, max(S, N2)), lim, ctx.temp((M + n2,), np.int64),
             pidx.astype(np.int64), np.concatenate([kscan, vscan]).astype(np.int64), dims,
             float(o.get("beta", 1.0)), ctx.temp((2,), np.int64),
             ctx.temp((M * max(H, S) if d is None else 1,), np.float32), np.zeros(1, np.int64),
             np.concatenate([ch1, ch2]), ctx.temp((1,), np.int64))

__all__ = ["MASKED_ATTENTION", "masked_attention_zmm", "masked_attention_zmm_par", "masked_attention_ymm",
           "masked_attention_ymm_par", "masked_attention_portable", "SPAN"]
