"""Hybrid (dynamic-range: float32 activations, constant int8 weights) FULLY_CONNECTED and CONV_2D on the int8 GEMM
tiles, bit-exact with the official builtin kernels: one compiled call quantizes the input rows at run time
(base/hybrid_rows.quantize_row: quantize_rows' bytes), multiplies them with the packed weights in the int8 tiles and
rescales the exact int32 sums to float32 in the tiles' epilogue (hybrid_tiles, the official operation order).

- FULLY_CONNECTED (hybrid_fc; layers of 2 rows or more whose weights are small, hybrid_schedule.PACKED_MAX_BYTES,
  the others running hybrid_gemv's tiles over their weights in place; also BATCH_MATMUL's epilogue): blocks of input
  rows are quantized straight into the tiles' activation buffer (as uint8, q + 128), each row with its own scaling
  factor and zero point; then every weight panel passes over the block. Afterwards, the official all-zero-input
  shortcut (fc_hybrid.hybrid_fc_zero_input's test) replaces the output by act(bias) when it applies.
- CONV_2D with one group (hybrid_conv): each image is quantized (one scaling factor and zero point per image, as
  the official EvalHybrid / EvalHybridPerChannel) into an int8 scratch, then runs as an int8 convolution would: K x K
  windows read in place from the padded, flipped copy (padded taps hold the image's zero point, contributing
  nothing), 1 x 1 strided layers through im2col blocks (simd_int8.a_source / start_block).

The weights are packed once at prepare as the int8 kernels pack them (pack_weights_vnni / pack_weights_pairs, the
K x K convolutions' filter rows padded by pad_runs): hybrid_schedule picks the tiles for the level and, with
num_threads > 1, the parallel driver. Every driver here exists once per tile scheme, so the scheme is a constant
in its code (fc_body's note).
"""

from __future__ import annotations

from lite_numba.kernels.base.hybrid_quant import official_is_zero_vector
from lite_numba.kernels.base.hybrid_rows import quantize_block, quantize_row
from lite_numba.kernels.linear.fc_hybrid import apply_float_activation
from lite_numba.kernels.linear.hybrid_tiles import NARROW_MR, WIDE_MR, fill_bias, panel_tiles
from lite_numba.kernels.linear.simd_int8 import NR, a_source, start_block
from numba import njit


@njit(cache=True, inline="always")
def _tile_rows(rows, mr, max_rest, stale_ok):
    """(rows computed by mr-row tiles, rows left to 1-row tiles): a last tile over stale rows (computed, not stored)
    replaces more than max_rest leftover rows, and always when stale_ok says the rows past the end can be read."""
    full = rows // mr * mr
    rest = rows - full
    if rest > max_rest or (stale_ok and rest > 0):
        return full + mr, 0
    return full, rest


@njit(cache=True, inline="always")
def _block_tiles(scheme, mode, a, a0, lda, kg, nrun, rstride, nrun2, rstride2, wstride, wp, hp, out, ob0, N, rows, rz,
                 rsf, rs_off, rs_step, lim, stale_ok, n_begin, n_end):
    """Every tile of one block of rows (their A rows from byte a0 of a, lda apart) over the weight panels of the
    channels [n_begin, n_end) (n_begin a multiple of NR)."""
    mr = WIDE_MR if scheme == 2 else NARROW_MR
    full, rest = _tile_rows(rows, mr, 3 if scheme == 2 else 2, stale_ok)
    Np = (min(N, n_end) + 15) // 16 * 16
    for j0 in range(n_begin, Np, NR):
        width = min(NR, Np - j0)
        boff = j0 * wstride
        for i in range(0, full, mr):
            panel_tiles(scheme, mode, mr, width, a, a0 + i * lda, lda, kg, nrun, rstride, nrun2, rstride2, wp, boff,
                        hp, j0, out, ob0 + i * N + j0, N, rows - i, N - j0, rz, rsf, rs_off + i * rs_step, rs_step,
                        lim)
        for i in range(full, full + rest):
            panel_tiles(scheme, mode, 1, width, a, a0 + i * lda, lda, kg, nrun, rstride, nrun2, rstride2, wp, boff,
                        hp, j0, out, ob0 + i * N + j0, N, 1, N - j0, rz, rsf, rs_off + i * rs_step, rs_step, lim)


@njit(cache=True, inline="always")
def fc_body(scheme, mode, x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch):
    """Hybrid FULLY_CONNECTED (module doc; mode 1: BATCH_MATMUL's epilogue, hybrid_tiles) on the tiles of `scheme`
    (scheme and mode are constants in each driver: with the scheme chosen at run time the tiles' array arguments
    keep their reference counting, 4x slower on small layers): x the float32 input rows (flat [M * K]), wp the
    packed weights, hpc the constant channel parameters (hybrid_tiles.hybrid_params; the bias, a float32 [N]
    argument, is written into hp each call), out flat [M * N] float32; geo = [M, K, N, asymmetric, scheme, act,
    m_begin, m_end, n_begin, n_end] (rows [m_begin, m_end) and channels [n_begin, n_end) are computed: a chunk of
    the parallel driver, hybrid_schedule); lim = [lo, hi, nan-to-lo]. Scratch: abuf [MB, Kp] uint8, rz int32 /
    rsf float32 [MB] (the block's rows), hp like hpc, scratch int8 [K]."""
    K, N, asym = geo[1], geo[2], geo[3] != 0
    fill_bias(hp, hpc, bias)
    MB, Kp = abuf.shape
    a = abuf.reshape(abuf.size)
    for m0 in range(geo[6], geo[7], MB):
        rows = min(MB, geo[7] - m0)
        quantize_block(x, m0, rows, K, asym, a, Kp, rz, rsf, scratch)
        _block_tiles(scheme, mode, a, 0, Kp, Kp // 4, 1, 0, 1, 0, Kp, wp, hp, out, m0 * N, N, rows, rz, rsf, 0, 1,
                     lim, False, geo[8], geo[9])


@njit(cache=True, nogil=True, _nrt=False)
def hybrid_fc_zero(x, bias, out, N, act):
    """EvalHybrid's shortcut: when the official all-zero test passes on the whole input, every output row is
    act(bias) (fc_hybrid.hybrid_fc_zero_input; the product computed above differs from it only for a NaN that the
    test counts as zero, and in the sign of a zero)."""
    if official_is_zero_vector(x, 0, x.size):
        for r in range(out.size // N):
            for n in range(N):
                out[r * N + n] = apply_float_activation(bias[n], act)


@njit(cache=True, inline="always")
def conv_image(x, n, src, q4, rz, rsf, geo, scratch):
    """Quantize image n of the float32 x [N, H, W, CI] into q4 (int8 [1, H, W, CI]; its 128 + zp and scaling factor
    into rz[n] / rsf[n]) and, for the direct way (geo[13]), copy it padded and flipped into src; returns zp."""
    per = q4.size
    sf, zp = quantize_row(x.reshape(x.size), n * per, per, geo[14] != 0, q4.reshape(per), 0, 0, scratch)
    rz[n] = 128 + zp
    rsf[n] = sf
    if geo[13] != 0:
        a_source(q4, src, geo, 128, zp)
    return zp


@njit(cache=True, inline="always")
def conv_blocks(scheme, q4, src, abuf, wp, hp, out, geo, lim, rz, rsf, n, zp, blk0, blk1):
    """Blocks [blk0, blk1) of image n (conv_image's q4 and src; a block is an output row read in place from src,
    direct, or MB pixels packed into the im2col block abuf) through the tiles of `scheme`."""
    _, OH, OW, CO = out.shape
    direct = geo[13] != 0
    a, _, lda, kg, nrun, rstride, nrun2, rstride2, wstride, HP, WP, nblocks = a_source(q4, src if direct else abuf,
                                                                                        geo, 128, zp, False)
    o = out.reshape(out.size)
    for blk in range(blk0, min(blk1, nblocks)):
        a0, ob0, rows = start_block(q4, abuf, a, geo, 128, zp, blk, direct, HP, WP, lda, rstride, rstride2, rz, 0, 0,
                                    OH, OW, CO)
        _block_tiles(scheme, 0, a, a0, lda, kg, nrun, rstride, nrun2, rstride2, wstride, wp, hp, o,
                     n * OH * OW * CO + ob0, CO, rows, rz, rsf, n, 0, lim, direct, 0, CO)


@njit(cache=True, inline="always")
def conv_body(scheme, x, wp, hpc, bias, out, geo, lim, src, abuf, rz, rsf, hp, q4, scratch):
    """Hybrid CONV_2D with one group (module doc) on the tiles of `scheme` (a constant in each driver, see
    fc_body): x [N, H, W, CI] float32, wp packed (pad_runs for the direct way), out [N, OH, OW, CO] float32;
    geo = [sh, sw, dh, dw, pad_t, pad_l, KH, KW, OH, OW, pointwise, 0, scheme, direct, asymmetric]; src the padded
    image of the direct way (2-D, at least HP * WP * CI + MR * sw * CI + 64 bytes), abuf the im2col block
    [MB, Kp] (either may be a dummy when the other is used); rz int32 / rsf float32 [N] receive the images'
    128 + zp and scaling factors; q4 int8 [1, H, W, CI], scratch int8 [H * W * CI]."""
    fill_bias(hp, hpc, bias)
    for n in range(x.shape[0]):
        zp = conv_image(x, n, src, q4, rz, rsf, geo, scratch)
        conv_blocks(scheme, q4, src, abuf, wp, hp, out, geo, lim, rz, rsf, n, zp, 0, out.shape[1] * out.shape[2])


# one driver per tile scheme (fc_body's note)
@njit(cache=True, nogil=True, _nrt=False)
def hybrid_fc_wide(x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch):
    """fc_body on the zmm vpdpbusd tiles."""
    fc_body(2, 0, x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch)


@njit(cache=True, nogil=True)
def hybrid_fc_vnni256(x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch):
    """fc_body on the 256-bit vpdpbusd tiles."""
    fc_body(1, 0, x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch)


@njit(cache=True, nogil=True)
def hybrid_fc_pairs(x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch):
    """fc_body on the 256-bit vpmaddwd tiles (and their generic twins)."""
    fc_body(0, 0, x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch)


@njit(cache=True, nogil=True, _nrt=False)
def hybrid_conv_wide(x, wp, hpc, bias, out, geo, lim, src, abuf, rz, rsf, hp, q4, scratch):
    """conv_body on the zmm vpdpbusd tiles."""
    conv_body(2, x, wp, hpc, bias, out, geo, lim, src, abuf, rz, rsf, hp, q4, scratch)


@njit(cache=True, nogil=True)
def hybrid_conv_vnni256(x, wp, hpc, bias, out, geo, lim, src, abuf, rz, rsf, hp, q4, scratch):
    """conv_body on the 256-bit vpdpbusd tiles."""
    conv_body(1, x, wp, hpc, bias, out, geo, lim, src, abuf, rz, rsf, hp, q4, scratch)


@njit(cache=True, nogil=True)
def hybrid_conv_pairs(x, wp, hpc, bias, out, geo, lim, src, abuf, rz, rsf, hp, q4, scratch):
    """conv_body on the 256-bit vpmaddwd tiles (and their generic twins)."""
    conv_body(0, x, wp, hpc, bias, out, geo, lim, src, abuf, rz, rsf, hp, q4, scratch)


# the blocks of one image, for the parallel driver (hybrid_schedule.hybrid_conv_par calls them by address)
@njit(cache=True, nogil=True)
def conv_blocks_wide(q4, src, abuf, wp, hp, out, geo, lim, rz, rsf, n, zp, blk0, blk1):
    """conv_blocks on the zmm vpdpbusd tiles."""
    conv_blocks(2, q4, src, abuf, wp, hp, out, geo, lim, rz, rsf, n, zp, blk0, blk1)


@njit(cache=True, nogil=True)
def conv_blocks_vnni256(q4, src, abuf, wp, hp, out, geo, lim, rz, rsf, n, zp, blk0, blk1):
    """conv_blocks on the 256-bit vpdpbusd tiles."""
    conv_blocks(1, q4, src, abuf, wp, hp, out, geo, lim, rz, rsf, n, zp, blk0, blk1)


@njit(cache=True, nogil=True)
def conv_blocks_pairs(q4, src, abuf, wp, hp, out, geo, lim, rz, rsf, n, zp, blk0, blk1):
    """conv_blocks on the 256-bit vpmaddwd tiles (and their generic twins)."""
    conv_blocks(0, q4, src, abuf, wp, hp, out, geo, lim, rz, rsf, n, zp, blk0, blk1)


@njit(cache=True, nogil=True)
def hybrid_bmm_wide(x, wp, hpc, rs, out, geo, lim, abuf, rz, rsf, hp, scratch):
    """fc_body with BATCH_MATMUL's epilogue (rs: the weight sums as float32, in the bias slots) on zmm vpdpbusd."""
    fc_body(2, 1, x, wp, hpc, rs, out, geo, lim, abuf, rz, rsf, hp, scratch)


@njit(cache=True, nogil=True)
def hybrid_bmm_vnni256(x, wp, hpc, rs, out, geo, lim, abuf, rz, rsf, hp, scratch):
    """hybrid_bmm_wide on the 256-bit vpdpbusd tiles."""
    fc_body(1, 1, x, wp, hpc, rs, out, geo, lim, abuf, rz, rsf, hp, scratch)


@njit(cache=True, nogil=True)
def hybrid_bmm_pairs(x, wp, hpc, rs, out, geo, lim, abuf, rz, rsf, hp, scratch):
    """hybrid_bmm_wide on the 256-bit vpmaddwd tiles (and their generic twins)."""
    fc_body(0, 1, x, wp, hpc, rs, out, geo, lim, abuf, rz, rsf, hp, scratch)


# scheme 3: the vpmaddwd tiles reading 16-bit activations (abuf / src uint16: the quantized bytes zero-extended,
# so the loop broadcasts pairs as they lie instead of shuffling them out of bytes)
@njit(cache=True, nogil=True)
def hybrid_fc_pairs16(x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch):
    """fc_body on the vpmaddwd tiles with 16-bit activations."""
    fc_body(3, 0, x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch)


@njit(cache=True, nogil=True)
def hybrid_bmm_pairs16(x, wp, hpc, rs, out, geo, lim, abuf, rz, rsf, hp, scratch):
    """hybrid_bmm_wide on the vpmaddwd tiles with 16-bit activations."""
    fc_body(3, 1, x, wp, hpc, rs, out, geo, lim, abuf, rz, rsf, hp, scratch)


@njit(cache=True, nogil=True)
def hybrid_conv_pairs16(x, wp, hpc, bias, out, geo, lim, src, abuf, rz, rsf, hp, q4, scratch):
    """conv_body on the vpmaddwd tiles with 16-bit activations (the direct way only: src uint16)."""
    conv_body(3, x, wp, hpc, bias, out, geo, lim, src, abuf, rz, rsf, hp, q4, scratch)


@njit(cache=True, nogil=True)
def conv_blocks_pairs16(q4, src, abuf, wp, hp, out, geo, lim, rz, rsf, n, zp, blk0, blk1):
    """conv_blocks on the vpmaddwd tiles with 16-bit activations (direct)."""
    conv_blocks(3, q4, src, abuf, wp, hp, out, geo, lim, rz, rsf, n, zp, blk0, blk1)


FC_DRIVERS = {2: hybrid_fc_wide, 1: hybrid_fc_vnni256, 0: hybrid_fc_pairs, 3: hybrid_fc_pairs16}
BMM_DRIVERS = {2: hybrid_bmm_wide, 1: hybrid_bmm_vnni256, 0: hybrid_bmm_pairs, 3: hybrid_bmm_pairs16}
CONV_DRIVERS = {2: hybrid_conv_wide, 1: hybrid_conv_vnni256, 0: hybrid_conv_pairs, 3: hybrid_conv_pairs16}
BLOCK_DRIVERS = {2: conv_blocks_wide, 1: conv_blocks_vnni256, 0: conv_blocks_pairs, 3: conv_blocks_pairs16}
