"""Hybrid (dynamic-range: float32 activations, constant int8 weights) FULLY_CONNECTED and CONV_2D on the int8 GEMM
tiles, bit-exact with the official builtin kernels: one compiled call quantizes the input rows at run time
(base/hybrid_rows.quantize_row: quantize_rows' bytes), multiplies them with the packed weights in the int8 tiles and
rescales the exact int32 sums to float32 in the tiles' epilogue (hybrid_tiles, the official operation order).

- FULLY_CONNECTED (hybrid_fc): blocks of input rows are quantized straight into the tiles' activation buffer (as
  uint8, q + 128), each row with its own scaling factor and zero point; then every weight panel passes over the
  block. Afterwards, the official all-zero-input shortcut (fc_hybrid.hybrid_fc_zero_input's test) replaces the
  output by act(bias) when it applies.
- CONV_2D with one group (hybrid_conv): each image is quantized (one scaling factor and zero point per image, as
  the official EvalHybrid / EvalHybridPerChannel) into an int8 scratch, then runs as an int8 convolution would: K x K
  windows read in place from the padded, flipped copy (padded taps hold the image's zero point, contributing
  nothing), 1 x 1 strided layers through im2col blocks (simd_int8.a_source / start_block).

The weights are packed once at prepare as the int8 kernels pack them (pack_weights_vnni / pack_weights_pairs, the
K x K convolutions' filter rows padded by pad_runs). schedule_hybrid is the one place that picks the engine for a
level: the zmm vpdpbusd tiles (avx512vnni), the 256-bit vpdpbusd (avxvnni) or vpmaddwd (avx2, avx512, and on NEON
their generic twins) tiles; on the portable level it answers False and the callers keep their plain loops.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.activation import ACT_NONE, ACT_RELU, ACT_RELU6, ACT_RELU_N1_TO_1
from lite_numba.kernels.base.hybrid_quant import official_is_zero_vector
from lite_numba.kernels.base.hybrid_rows import quantize_row
from lite_numba.kernels.base.isa import has
from lite_numba.kernels.linear.fc_hybrid import apply_float_activation
from lite_numba.kernels.linear.hybrid_tiles import NARROW_MR, WIDE_MR, fill_bias, hybrid_params, panel_tiles
from lite_numba.kernels.linear.simd_int8 import (
    NR,
    a_source,
    block_rows,
    pack_weights_vnni,
    pad_runs,
    padded_sizes,
    start_block,
)
from lite_numba.kernels.linear.simd_int8_narrow import pack_weights_pairs
from numba import njit

from lite_numba.ops import PrepareContext

# the hybrid FULLY_CONNECTED's clamps (std::max / std::min: a NaN becomes the lower limit), [lo, hi, nan-to-lo]
_FC_LIMITS = {ACT_NONE: (-np.inf, np.inf, 0.0), ACT_RELU: (0.0, np.inf, 1.0), ACT_RELU_N1_TO_1: (-1.0, 1.0, 1.0),
              ACT_RELU6: (0.0, 6.0, 1.0)}


def engine() -> int | None:
    """The tile scheme for the level in force: 2 the zmm vpdpbusd tiles, 1 the 256-bit vpdpbusd ones, 0 the 256-bit
    vpmaddwd ones (or their generic twins on NEON), None on the portable level (the callers' plain loops)."""
    if has("avx512vnni"):
        return 2
    if has("avxvnni"):
        return 1
    if has("avx2") or has("neon"):
        return 0
    return None


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
def _block_tiles(scheme, a, a0, lda, kg, nrun, rstride, nrun2, rstride2, wstride, wp, hp, out, ob0, N, rows, rz, rsf,
                 rs_off, rs_step, lim, stale_ok):
    """Every tile of one block of rows (their A rows from byte a0 of a, lda apart) over every weight panel."""
    mr = WIDE_MR if scheme == 2 else NARROW_MR
    full, rest = _tile_rows(rows, mr, 3 if scheme == 2 else 2, stale_ok)
    Np = (N + 15) // 16 * 16
    for j0 in range(0, Np, NR):
        width = min(NR, Np - j0)
        boff = j0 * wstride
        for i in range(0, full, mr):
            panel_tiles(scheme, mr, width, a, a0 + i * lda, lda, kg, nrun, rstride, nrun2, rstride2, wp, boff, hp,
                        j0, out, ob0 + i * N + j0, N, rows - i, N - j0, rz, rsf, rs_off + i * rs_step, rs_step, lim)
        for i in range(full, full + rest):
            panel_tiles(scheme, 1, width, a, a0 + i * lda, lda, kg, nrun, rstride, nrun2, rstride2, wp, boff, hp, j0,
                        out, ob0 + i * N + j0, N, 1, N - j0, rz, rsf, rs_off + i * rs_step, rs_step, lim)


@njit(cache=True, inline="always")
def fc_body(scheme, x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch):
    """Hybrid FULLY_CONNECTED (module doc) on the tiles of `scheme` (a constant in each driver: with the scheme
    chosen at run time the tiles' array arguments keep their reference counting, 4x slower on small layers): x the
    float32 input rows (flat [M * K]), wp the packed weights, hpc the constant channel parameters
    (hybrid_tiles.hybrid_params; the bias, a float32 [N] argument, is written into hp each call), out flat [M * N]
    float32; geo = [M, K, N, asymmetric, scheme, act, m_begin, m_end] (rows [m_begin, m_end) are computed: a chunk
    of the parallel driver); lim = [lo, hi, nan-to-lo]. Scratch: abuf [MB, Kp] uint8, rz int32 [M], rsf float32 [M],
    hp like hpc, scratch int8 [K]."""
    K, N, asym = geo[1], geo[2], geo[3] != 0
    fill_bias(hp, hpc, bias)
    MB, Kp = abuf.shape
    a = abuf.reshape(abuf.size)
    for m0 in range(geo[6], geo[7], MB):
        rows = min(MB, geo[7] - m0)
        for r in range(rows):
            sf, zp = quantize_row(x, (m0 + r) * K, K, asym, a, r * Kp, 128, scratch)
            rz[m0 + r] = 128 + zp
            rsf[m0 + r] = sf
        _block_tiles(scheme, a, 0, Kp, Kp // 4, 1, 0, 1, 0, Kp, wp, hp, out, m0 * N, N, rows, rz, rsf, m0, 1, lim,
                     False)


@njit(cache=True, nogil=True)
def hybrid_fc_zero(x, bias, out, N, act):
    """EvalHybrid's shortcut: when the official all-zero test passes on the whole input, every output row is
    act(bias) (fc_hybrid.hybrid_fc_zero_input; the product computed above differs from it only for a NaN that the
    test counts as zero, and in the sign of a zero)."""
    if official_is_zero_vector(x, 0, x.size):
        for r in range(out.size // N):
            for n in range(N):
                out[r * N + n] = apply_float_activation(bias[n], act)


@njit(cache=True, inline="always")
def conv_body(scheme, x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, qimg, scratch):
    """Hybrid CONV_2D with one group (module doc) on the tiles of `scheme` (a constant in each driver, see
    fc_body): x [N, H, W, CI] float32, wp packed (pad_runs for the direct way),
    out [N, OH, OW, CO] float32; geo = [sh, sw, dh, dw, pad_t, pad_l, KH, KW, OH, OW, pointwise, 0, scheme, direct,
    asymmetric, n_begin, n_end] (images [n_begin, n_end) are computed); abuf the im2col block [MB, Kp] or, direct,
    the padded image (2-D, at least HP * WP * CI + MR * sw * CI + 64 bytes); rz int32 / rsf float32 [N] receive the
    images' 128 + zp and scaling factors; qimg int8 [H * W * CI], scratch int8 [H * W * CI]."""
    N, H, W, CI = x.shape
    _, OH, OW, CO = out.shape
    per = H * W * CI
    asym = geo[14] != 0
    fill_bias(hp, hpc, bias)
    xf = x.reshape(x.size)
    o = out.reshape(out.size)
    q4 = qimg.reshape((1, H, W, CI))
    for n in range(geo[15], geo[16]):
        sf, zp = quantize_row(xf, n * per, per, asym, qimg, 0, 0, scratch)
        rz[n] = 128 + zp
        rsf[n] = sf
        a, direct, lda, kg, nrun, rstride, nrun2, rstride2, wstride, HP, WP, nblocks = a_source(q4, abuf, geo, 128, zp)
        for blk in range(nblocks):
            a0, ob0, rows = start_block(q4, abuf, a, geo, 128, zp, blk, direct, HP, WP, lda, rstride, rstride2, rz, 0,
                                        0, OH, OW, CO)
            _block_tiles(scheme, a, a0, lda, kg, nrun, rstride, nrun2, rstride2, wstride, wp, hp, o,
                         n * OH * OW * CO + ob0, CO, rows, rz, rsf, n, 0, lim, direct)


# one driver per tile scheme (fc_body's note)
@njit(cache=True, nogil=True)
def hybrid_fc_wide(x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch):
    """fc_body on the zmm vpdpbusd tiles."""
    fc_body(2, x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch)


@njit(cache=True, nogil=True)
def hybrid_fc_vnni256(x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch):
    """fc_body on the 256-bit vpdpbusd tiles."""
    fc_body(1, x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch)


@njit(cache=True, nogil=True)
def hybrid_fc_pairs(x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch):
    """fc_body on the 256-bit vpmaddwd tiles (and their generic twins)."""
    fc_body(0, x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, scratch)


@njit(cache=True, nogil=True)
def hybrid_conv_wide(x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, qimg, scratch):
    """conv_body on the zmm vpdpbusd tiles."""
    conv_body(2, x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, qimg, scratch)


@njit(cache=True, nogil=True)
def hybrid_conv_vnni256(x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, qimg, scratch):
    """conv_body on the 256-bit vpdpbusd tiles."""
    conv_body(1, x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, qimg, scratch)


@njit(cache=True, nogil=True)
def hybrid_conv_pairs(x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, qimg, scratch):
    """conv_body on the 256-bit vpmaddwd tiles (and their generic twins)."""
    conv_body(0, x, wp, hpc, bias, out, geo, lim, abuf, rz, rsf, hp, qimg, scratch)


FC_DRIVERS = {2: hybrid_fc_wide, 1: hybrid_fc_vnni256, 0: hybrid_fc_pairs}
CONV_DRIVERS = {2: hybrid_conv_wide, 1: hybrid_conv_vnni256, 0: hybrid_conv_pairs}


# --- prepare ----------------------------------------------------------------------------------------------------------


def _pack(w: np.ndarray, scheme: int) -> np.ndarray:
    return pack_weights_pairs(w) if scheme == 0 else pack_weights_vnni(w)


def _weight_sums(w: np.ndarray) -> np.ndarray:
    s = w.astype(np.int64).sum(axis=1)
    return ((s + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


def _bias_values(bias):
    return bias if isinstance(bias, np.ndarray) else None


def schedule_hybrid(ctx: PrepareContext, kind: str, x, w: np.ndarray, scales: np.ndarray, bias, out, *, rows: int = 0,
                    act: int = ACT_NONE, asymmetric: bool = False, geo_conv=None, lim=None) -> bool:
    """Schedule a hybrid layer on the int8 tiles of the level in force; False (nothing scheduled) on the portable
    level or for what the tiles do not compute (FULLY_CONNECTED's TANH and SIGN_BIT activations).

    kind "fc": x the input as `rows` rows of K = w.shape[1] floats (flat view), w [N, K] int8, out flat [rows * N],
    act the fused activation, asymmetric the option. kind "conv": x [N, H, W, CI], w [CO, KH * KW * CI] (OHWI),
    out [N, OH, OW, CO], geo_conv [sh, sw, dh, dw, pad_t, pad_l, KH, KW], lim the float limits [lo, hi]. scales
    float32 per output channel; bias a float32 [N] argument (array or view)."""
    scheme = engine()
    if scheme is None or (kind == "fc" and act not in _FC_LIMITS):
        return False
    N, K = w.shape
    Kp, Np = padded_sizes(K, N)
    mr = WIDE_MR if scheme == 2 else NARROW_MR
    hpc = ctx.const(hybrid_params(_weight_sums(w), scales, _bias_values(bias), Np))
    hp = ctx.temp((Np // 16 * 48,), np.int32)
    if kind == "fc":
        lims = np.array(_FC_LIMITS[act], np.float32)
        geo = np.array([rows, K, N, int(asymmetric), scheme, act, 0, rows], np.int64)
        abuf = ctx.temp((block_rows(Kp, rows, mr), Kp), np.uint8)
        ctx.call(FC_DRIVERS[scheme], x, ctx.const(_pack(w, scheme)), hpc, bias, out, geo, lims, abuf,
                 ctx.temp((rows,), np.int32), ctx.temp((rows,), np.float32), hp, ctx.temp((K,), np.int8))
        ctx.call(hybrid_fc_zero, x, bias, out, N, act)
        return True
    B, H, W, CI = x.shape
    _, OH, OW, _ = out.shape
    sh, sw, dh, dw, pt, pl, KH, KW = (int(v) for v in geo_conv)
    pointwise = KH == 1 and KW == 1 and sh == 1 and sw == 1 and pt == 0 and pl == 0
    direct = not pointwise and (KH > 1 or KW > 1)
    geo = np.array([sh, sw, dh, dw, pt, pl, KH, KW, OH, OW, int(pointwise), 0, scheme, int(direct), int(asymmetric),
                    0, B], np.int64)
    if direct:
        HP = (OH - 1) * sh + (KH - 1) * dh + 1
        WP = (OW - 1) * sw + (KW - 1) * dw + 1
        abuf = ctx.temp((1, HP * WP * CI + mr * sw * CI + 64), np.uint8)
        wp = _pack(pad_runs(w, KH if dw == 1 else KH * KW), scheme)
    else:
        abuf = ctx.temp((block_rows(Kp, OH * OW, mr), Kp), np.uint8)
        wp = _pack(w, scheme)
    lims = np.array([lim[0], lim[1], 0.0], np.float32)
    per = H * W * CI
    ctx.call(CONV_DRIVERS[scheme], x, ctx.const(wp), hpc, bias, out, geo, lims, abuf, ctx.temp((B,), np.int32),
             ctx.temp((B,), np.float32), hp, ctx.temp((per,), np.int8), ctx.temp((per,), np.int8))
    return True
