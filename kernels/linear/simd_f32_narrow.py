"""Explicit-SIMD float32 GEMM and direct convolution for narrower vector registers: AVX2 (16 x 256-bit ymm) on x86,
NEON (32 x 128-bit) on aarch64.

The micro-kernels come from the same width-generic generator as the AVX-512 ones (simd_f32.make_tiles: LLVM generic
vector IR, the vector width a parameter), only the tile shape follows the register file. A 6 x 32 tile needs 12
accumulators of 16 floats; at 8 lanes the same shape needs 24 registers and spills (measured on a Zen 3:
36 GFLOP/s against 69 for a 4 x 16 tile, ../shared/spikes README). Here a tile is MR x 16 columns (two ymm
vectors per row), MR from the register count (`tile_rows`): 6 on x86 (12 accumulators, 2 vectors of B, the
broadcast of A and the product fill the 16 ymm registers; the loop's addresses live in general registers), 4 on
aarch64 (an 8-lane vector is two q registers there, so the tile takes 16 of the 32; the masked stores of the
epilogue become per-lane stores).

The packed operands are those of the AVX-512 path (panels of 32 columns, kernels/simd_f32.py); a panel is computed
as two halves of 16 columns (the tile's B rows are 32 floats apart), so packing, tables and scheduling are shared,
and only the drivers below differ. Every output is the same sum as on the AVX-512 path (k in order from 0, each
product rounded before it is added, then the bias), so both paths give the same bytes, and the same bytes as the
official builtin kernels where the AVX-512 path does.

`float_drivers()` is what the prepare functions ask: the drivers of the best SIMD path in force, or None for the
portable loops.
"""

from __future__ import annotations

import platform

from lite_numba.kernels.base.isa import has
from lite_numba.kernels.base.threads import PARALLEL, run_chunks
from lite_numba.kernels.linear import simd_f32
from lite_numba.kernels.linear.simd_f32 import (
    GEMV_ROWS,
    L1D_BYTES,
    L2_BYTES,
    NR,
    GemmDrivers,
    batch_chunk,
    each_batch,
    epilogue_of,
    gemv_tiles_32,
    make_tiles,
    panel_chunk,
    run_tiles,
)
from numba import njit


def tile_rows(vector_registers: int, nv: int) -> int:
    """Rows of an outer-product tile of nv vectors per row that fits in `vector_registers`: nv per row for the
    accumulators, nv for the row of B, one for the broadcast A value and one for the product (rounded before it is
    added, so it is a register of its own)."""
    return (vector_registers - nv - 2) // nv


LANES = 8  # floats per vector (ymm)
HALF = 16  # columns of a tile: half a packed panel
# x86 without AVX-512 has 16 ymm registers: 6 rows x 2 vectors (12 accumulators), measured 2-5 % faster than 4 rows
# on the Xeon (AVX2 code generation); fewer loads and loop instructions per product should also help where dispatch
# is the limit (a Zen 3 by our estimate, not measured there). On aarch64 (8 lanes = two of the 32 q registers) the
# 4-row tile stays: not measured on a core.
MR = tile_rows(16, 2) if platform.machine().lower() in ("x86_64", "amd64") else 4

ymm_tiles_8 = make_tiles(MR, LANES, 1)
ymm_tiles_16 = make_tiles(MR, LANES, 2)


@njit(cache=True, inline="always")
def _half_panels(a, abase, rows, g0, g1, segs, seglen, bp, boff, bias, n0, c, c_off, N, lo, hi, ncols, ep):
    """Rows [g0, g1) of one panel (its first column n0), as two 16-column halves, each over the whole group of
    bands in one tile call (simd_f32.make_tiles' nband). 1-2 rows left after the bands of MR share the last band
    (two tiles of about (MR + left) / 2 rows): a 1-row tile is bound by the latency of its two chains of adds."""
    nb = (g1 - g0) // MR
    h0 = 0
    h1 = g1 - g0 - nb * MR
    if nb > 0 and 0 < 2 * h1 < MR:
        nb -= 1
        h0 = (MR + h1 + 1) // 2
        h1 = MR + h1 - h0
    i = g0 + nb * MR
    for q in range(2):
        live = ncols - HALF * q
        if live > 0:
            width = HALF if live > 8 else 8
            col = c_off + n0 + HALF * q
            bq = boff + HALF * q
            # a half panel is at most 16 columns wide: the 32-column slot is never taken
            if nb > 0:
                run_tiles(ymm_tiles_16, ymm_tiles_16, ymm_tiles_8, MR, width, a, abase, rows, g0, nb, segs, seglen,
                          bp, bq, c, col + g0 * N, N, bias, n0 + HALF * q, lo, hi, live, ep)
            if h0 > 0:
                run_tiles(ymm_tiles_16, ymm_tiles_16, ymm_tiles_8, h0, width, a, abase, rows, i, 1, segs, seglen,
                          bp, bq, c, col + i * N, N, bias, n0 + HALF * q, lo, hi, live, ep)
            if h1 > 0:
                run_tiles(ymm_tiles_16, ymm_tiles_16, ymm_tiles_8, h1, width, a, abase, rows, i + h0, 1, segs,
                          seglen, bp, bq, c, col + (i + h0) * N, N, bias, n0 + HALF * q, lo, hi, live, ep)


@njit(cache=True, inline="always")
def _gemm_part(a, abase, rows, r0, r1, segs, seglen, bp, bp_off, bias, c, c_off, N, lim, p0, p1, ep):
    """C rows [r0, r1) x panels [p0, p1) of clamp(A @ B + bias) (simd_f32._gemm_part's contract), blocked by the
    caches the machine reports (simd_f32.L1D_BYTES, L2_BYTES): blocks of rows whose A values fit half of L2 (every
    panel of B passes over a block: A is read from memory once, not once per panel, when it is larger than L2), and
    in a block, per panel, groups of bands whose A values fit in L1 beside the half panel of B each band reads (they
    stay there between the two halves)."""
    lo, hi = lim[0], lim[1]
    K = segs.size * seglen
    panel = K * NR
    if r1 - r0 <= GEMV_ROWS:  # simd_f32.gemv_tiles_32
        for p in range(p0, p1):
            n0 = p * NR
            ncols = min(NR, N - n0)
            width = 32 if ncols > 16 else (16 if ncols > 8 else 8)
            if r1 > r0:
                run_tiles(gemv_tiles_32, ymm_tiles_16, ymm_tiles_8, r1 - r0, width, a, abase, rows, r0, 1, segs,
                          seglen, bp, bp_off + p * panel, c, c_off + n0 + r0 * N, N, bias, n0, lo, hi, ncols, ep)
        return
    arow = 4 * max(K, 1)
    room = max(L1D_BYTES - K * HALF * 4, L1D_BYTES // 4)
    group = max(room // (arow * MR), 1) * MR
    block = max(L2_BYTES // 2 // (arow * group), 1) * group
    for b0 in range(r0, r1, block):
        b1 = min(b0 + block, r1)
        for p in range(p0, p1):
            n0 = p * NR
            ncols = min(NR, N - n0)
            boff = bp_off + p * panel
            for g0 in range(b0, b1, group):
                _half_panels(a, abase, rows, g0, min(g0 + group, b1), segs, seglen, bp, boff, bias, n0, c, c_off, N,
                             lo, hi, ncols, ep)


@njit(cache=True, nogil=True)
def gemm_packed(a, rows, segs, seglen, bp, bias, c, N, lim):
    """simd_f32.gemm_packed on ymm tiles (same arguments, same results)."""
    _gemm_part(a, 0, rows, 0, rows.size, segs, seglen, bp, 0, bias, c, 0, N, lim, 0, (N + NR - 1) // NR, None)


@njit(cache=True, nogil=True)
def gemm_packed_ep(a, rows, segs, seglen, bp, bias, c, N, lim, r, ldr, alpha):
    """simd_f32.gemm_packed_ep on ymm tiles (same arguments, same results)."""
    _gemm_part(a, 0, rows, 0, rows.size, segs, seglen, bp, 0, bias, c, 0, N, lim, 0, (N + NR - 1) // NR,
               (r, ldr, lim[2], lim[3], alpha, lim[4], lim[5]))


@njit(cache=True, nogil=True, _nrt=False)
def batch_gemm(a, a_off, rows, b, b_off, sk, sn, K, bp, bias, c, N, lim, segs):
    """simd_f32.batch_gemm on ymm tiles (same arguments, same results)."""
    each_batch(_gemm_part, a, a_off, rows, b, b_off, sk, sn, K, bp, bias, c, N, lim, segs, 0, a_off.size, 0, rows.size)


@njit(cache=True, inline="always")
def _panel_chunk(args, wk, j):
    panel_chunk(_gemm_part, args, wk, j, None)


@njit(cache=True, inline="always")
def _panel_chunk_ep(args, wk, j):
    panel_chunk(_gemm_part, args, wk, j, epilogue_of(args))


@njit(cache=True, inline="always")
def _batch_chunk(args, wk, j):
    batch_chunk(_gemm_part, args, wk, j)


@njit(cache=True, nogil=True, parallel=PARALLEL)
def gemm_packed_par(a, rows, segs, seglen, bp, bias, c, N, lim, ch, cnt, T):
    """simd_f32.gemm_packed_par on ymm tiles (chunks [r0, r1, p0, p1] * n taken in turn by T workers)."""
    run_chunks(T, cnt, ch.size // 4, _panel_chunk, (a, rows, segs, seglen, bp, bias, c, N, lim, ch))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def gemm_packed_ep_par(a, rows, segs, seglen, bp, bias, c, N, lim, r, ldr, alpha, ch, cnt, T):
    """simd_f32.gemm_packed_ep_par on ymm tiles."""
    run_chunks(T, cnt, ch.size // 4, _panel_chunk_ep, (a, rows, segs, seglen, bp, bias, c, N, lim, ch, r, ldr, alpha))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def batch_gemm_par(a, a_off, rows, b, b_off, sk, sn, K, bp, bias, c, N, lim, segs, ch, cnt, T):
    """simd_f32.batch_gemm_par on ymm tiles (chunks [i0, i1, r0, r1] * n, one slice of bp per worker)."""
    run_chunks(T, cnt, ch.size // 4, _batch_chunk,
               (a, a_off, rows, b, b_off, sk, sn, K, bp, bias, c, N, lim, segs, ch, T))


YMM = GemmDrivers(MR, gemm_packed, gemm_packed_par, batch_gemm, batch_gemm_par, gemm_packed_ep, gemm_packed_ep_par)


def float_drivers() -> GemmDrivers | None:
    """The float GEMM drivers of the path in force (kernels/base/isa.py): zmm tiles with AVX-512, the 8-lane tiles with
    AVX2 (ymm) or NEON (each 8-lane vector a pair of 128-bit registers: 16 of NEON's 32 hold the accumulators),
    None (the portable loops) otherwise."""
    if has("avx512"):
        return simd_f32.ZMM
    if has("avx2") or has("neon"):
        return YMM
    return None


__all__ = ["gemm_packed", "gemm_packed_ep", "batch_gemm", "gemm_packed_par", "batch_gemm_par", "float_drivers", "YMM",
           "MR", "LANES"]
