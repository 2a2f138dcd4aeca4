"""int8 BATCH_MATMUL's products on the AMX tiles (isa level "amx"): acc[i] = sum_k (A_i - azp) (B_i - bzp) per output
batch, int32 and wrapping like the official accumulator, for BATCH_MATMUL's own output stages (batch_matmul: the
requantization of REQUANT_FIXED, or the raw int32 output). The products are simd_amx's tiles (block_products, weights
in pack_weights_amx's layout: B_i transposed, 64-byte steps, 16-channel tiles); the zero points fold into per-column
terms -azp * sum_k B[k, n] + K * azp * bzp and per-row terms -bzp * sum_k A[m, k], added as the int32 blocks leave the
L1 scratch (amx_output.store_block_i32). A constant rhs is packed once at prepare; a run-time one (attention's keys and
values) per output batch, into a scratch. The rows of A are read in place (a block whose 64-byte steps would run past
the lhs is copied first). Used from AMX_MIN_ROWS rows and AMX_MIN_MACS padded multiply-adds per batch, as the
convolutions."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base import amx
from lite_numba.kernels.base.isa import has
from lite_numba.kernels.linear.amx_output import store_block_i32
from lite_numba.kernels.linear.int8_rows import copy_flipped
from lite_numba.kernels.linear.simd_amx import (
    KSTEP,
    SCRATCH_HEAD,
    TM,
    TN,
    block_products,
    configure_tiles,
    gemm_pays,
    pack_weights_amx,
    split_scratch,
)
from numba import njit

_WRAP = 1 << 32


def _wrap32(v: np.ndarray) -> np.ndarray:
    return ((np.asarray(v, np.int64) + (1 << 31)) % _WRAP - (1 << 31)).astype(np.int32)


@njit(cache=True, inline="always")
def _pack_rhs(b, base, K, N, bp, Kp, Np, coff, azp, bzp):
    """bp = the [K, N] int8 matrix at b[base:] in pack_weights_amx's layout (its transpose), zero past K and N;
    coff = its column terms -azp * sum_k B[k, n] + K * azp * bzp (int32, wrapping), zero past N."""
    for i in range(Np * Kp):
        bp[i] = 0
    kzz = np.int64(K) * azp * bzp
    for n in range(Np):
        coff[n] = np.int32(kzz) if n < N else 0
    for k in range(K):
        row = b[base + k * N:base + (k + 1) * N]
        for n in range(N):  # contiguous: vectorizes
            coff[n] = np.int32(coff[n] - azp * np.int64(row[n]))
    for j0 in range(0, Np, TN):
        tiles = 2 if Np - j0 >= TN else 1
        for k in range(K):
            row = b[base + k * N:base + (k + 1) * N]
            d = j0 * Kp + (k // KSTEP) * tiles * 1024 + (k % KSTEP) // 4 * 64 + k % 4
            for nn in range(min(16 * tiles, N - j0)):  # tile t = nn // 16 starts 1 KiB after tile 0
                bp[d + nn // 16 * 1024 + nn % 16 * 4] = row[j0 + nn]


@njit(cache=True, nogil=True)
def bmm_amx(a, a_off, azp, b, b_off, bzp, acc, M, K, N, bpc, bp_off, coffc, cf_off, bp, coff, rterm, abuf, scratch):
    """acc[i] ([M, N], flat) = sum_k (A_i - azp)(B_i - bzp) (int32, wrapping) for every output batch i: A_i at
    a[a_off[i]:] ([M, K] int8), B_i at b[b_off[i]:] ([K, N] int8), or when bpc is not empty packed at prepare at
    bpc[bp_off[i]:] with its column terms at coffc[cf_off[i]:]. Scratch: bp (Np * Kp int8) and coff (Np int32) for a
    run-time rhs, rterm (int32, M + 2 TM), abuf ([2 TM, Kp] uint8: rows copied), scratch (int32: two C blocks, the
    tile configuration, the row table of M + 2 TM int64)."""
    ks = (K + KSTEP - 1) // KSTEP
    Kp = ks * KSTEP
    Np = (N + 15) // 16 * 16
    c, cfg, dst = split_scratch(scratch)
    af = abuf.reshape(abuf.size)
    configure_tiles(cfg)
    aa = np.int64(a.ctypes.data)
    ab = np.int64(abuf.ctypes.data)
    for bi in range(a_off.size):
        if bpc.size > 0:
            wa = np.int64(bpc.ctypes.data) + bp_off[bi]
            co = coffc[cf_off[bi]:cf_off[bi] + Np]
        else:
            _pack_rhs(b, b_off[bi], K, N, bp, Kp, Np, coff, azp, bzp)
            wa = np.int64(bp.ctypes.data)
            co = coff
        a0 = a_off[bi]
        for r in range(M):
            s = np.int64(0)
            if bzp != 0:
                row = a[a0 + r * K:a0 + (r + 1) * K]
                for k in range(K):  # a row view: vectorizes
                    s += np.int64(row[k])
            rterm[r] = np.int32(-bzp * s)
            dst[r] = (bi * M + r) * N
        for r in range(M, M + 2 * TM):
            dst[r] = -1
        for i in range(0, M, TM):
            ma = 2 if M - i > 16 else 1
            base = a0 + i * K
            if base + (16 * ma - 1) * K + Kp <= a.size:
                pa, lda = aa + base, K
            else:  # the block's last steps would read past the lhs: its rows copied
                for r in range(min(16 * ma, M - i)):
                    copy_flipped(af, r * Kp, a, base + r * K, K, np.uint8(0))
                pa, lda = ab, Kp
            for j0 in range(0, Np, TN):
                nb = 2 if Np - j0 >= TN else 1
                block_products(ma, nb, pa, lda, 0, 1, ks, wa + j0 * Kp, c, 16 * lda)
                store_block_i32(c, 16 * ma, nb, co, j0, acc, dst, i, N - j0, rterm)
    amx.release()


@njit(cache=True, nogil=True)
def requantize_fixed(acc, out, q, shift, ozp, lo, hi):
    """out = clamp(MultiplyByQuantizedMultiplier(acc, q, shift) + ozp, lo, hi) with one multiplier for every element
    (BATCH_MATMUL's REQUANT_FIXED: TFLite's rounding, half away from zero), written without branches so that it
    vectorizes: fully_connected_quantized.requantize's bytes (~9 ns an element there, per-channel parameters and the
    mode looked up per element)."""
    left = shift if shift > 0 else 0
    right = -shift if shift < 0 else 0
    mask = (np.int64(1) << right) - 1
    half = mask >> 1
    q64 = np.int64(q)
    for i in range(acc.size):
        v = np.int64(np.int32(np.int64(acc[i]) << left))
        ab = v * q64
        t = ab + (np.int64(1 << 30) if ab >= 0 else np.int64(1 - (1 << 30)))
        h = (t + ((t >> 63) & np.int64((1 << 31) - 1))) >> 31  # C's truncating division by 2^31
        if v == -2147483648 and q64 == -2147483648:
            h = np.int64(2147483647)
        y = (h >> right) + (1 if (h & mask) > half - (h >> 63) else 0) + ozp
        out[i] = min(max(y, lo), hi)


def schedule_bmm_amx(ctx, a, a_off, azp: int, a_dtype, b, b_const, b_off, bzp: int, acc, M: int, K: int,
                     N: int) -> bool:
    """Schedule bmm_amx for fully_connected_quantized.schedule_igemm's arguments (a, b flat [M, K] / [K, N] blocks
    at the offsets, b None with b_const the constant rhs) when the level is amx, both operands are int8, the
    accumulator int32 and a batch's products big enough; False otherwise (nothing scheduled)."""
    b_dtype = b_const.dtype if b_const is not None else b.dtype
    Kp, Np = -(-K // KSTEP) * KSTEP, -(-N // 16) * 16
    if not (has("amx") and np.dtype(a_dtype) == np.int8 and np.dtype(b_dtype) == np.int8 and acc.dtype == np.int32):
        return False
    if not gemm_pays(M, K, N):
        return False
    a_off = np.asarray(a_off, np.int64)
    b_off = np.asarray(b_off, np.int64)
    if b_const is not None:
        flat = np.asarray(b_const).reshape(-1)
        mats = sorted(set(int(o) for o in b_off))
        where = {o: j for j, o in enumerate(mats)}
        packs, terms = [], []
        for o in mats:
            bm = flat[o:o + K * N].reshape(K, N).astype(np.int64)
            packs.append(pack_weights_amx(np.ascontiguousarray(bm.T).astype(np.int8)))
            t = np.zeros(Np, np.int64)
            t[:N] = -azp * bm.sum(axis=0) + K * azp * bzp
            terms.append(_wrap32(t))
        bpc, coffc = ctx.const(np.concatenate(packs)), ctx.const(np.concatenate(terms))
        bp_off = np.array([where[int(o)] * Np * Kp for o in b_off], np.int64)
        cf_off = np.array([where[int(o)] * Np for o in b_off], np.int64)
        b, bp, coff = np.zeros(1, np.int8), np.zeros(1, np.int8), np.zeros(1, np.int32)
    else:
        bpc, coffc = np.zeros(0, np.int8), np.zeros(0, np.int32)
        bp_off = cf_off = np.zeros(1, np.int64)
        bp, coff = ctx.temp((Np * Kp,), np.int8), ctx.temp((Np,), np.int32)
    table = -(-(M + 2 * TM) * 2 // 16) * 16
    ctx.call(bmm_amx, a, a_off, int(azp), b, b_off, int(bzp), acc, M, K, N, bpc, bp_off, coffc, cf_off, bp, coff,
             ctx.temp((M + 2 * TM,), np.int32), ctx.temp((2 * TM, Kp), np.uint8),
             ctx.temp((SCRATCH_HEAD + table,), np.int32))
    return True
