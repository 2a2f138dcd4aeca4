"""int8 GEMM and convolution on Intel AMX tiles (kernels/base/isa.py level "amx"), bit-exact with the official x86
build's ruy path like the VNNI kernels of simd_int8 (read its module doc first): the same C[m, n] = sum_k A[m, k] *
W[n, k] + per-channel offset, the same output stage (simd_int8.requantize_params / requantize_vector, parameters from
output_params_host), the same int32 wrap-around; only the products run on the tiles (kernels/base/amx.py).

- Weights are packed once in prepare (pack_weights_amx) into the tile layout: panels of 32 output channels (16 for a
  last odd one; N padded to 16), each the sequence of its 64-byte steps of the depth, one 1 KiB tile per 16
  channels and step (16 groups of 4 k-bytes x 16 channels x 4: B[k / 4][4n + k % 4]). The depth is padded to 64 per
  run: one run for a GEMM, one per filter row for a K x K convolution read in place (pad_runs's runs).
- Activations are multiplied as the signed bytes they are (TDPBSSD): no +128 flip. The input zero point folds into
  the per-channel offset, -zp_in * sum_k w + bias (channel_offsets with flip 0); a tap outside the image holds
  zp_in, whose term that offset cancels, as on VNNI.
- A tile reads 16 rows of 64 bytes at any row stride, so the rows are read where they are:
  mode 0 (a pointwise convolution, FULLY_CONNECTED): the input itself, row stride K. The bytes past K of a row's
  last step meet zero weights; the last rows, whose reads would pass the tensor's end, are copied to abuf first.
  mode 1 (K x K, dilation 1 along x): an implicit GEMM: the input copied once, padded with zp_in, to abuf
  (int8_rows.pad_flipped without the flip); output pixel (oy, ox)'s window is KH runs of KW * CI bytes at
  ((oy * sh + ky * dh) * WP + ox * sw) * CI, so a tile's rows are consecutive pixels sw * CI bytes apart. With
  stride 1, a block of rows runs on across output rows (the padded row's WP - OW extra pixels are computed, not
  stored), so small images fill the 16-row tiles; with stride 2 a block stays in one output row.
  mode 2 (any other convolution): im2col rows packed into abuf per block (int8_rows.pack_rows, no flip).
  prepare picks mode 1 or 2 for a K x K layer by an estimate of tile steps plus copied bytes.
- Loops: groups of up to MG rows (geo[14]; the group's activations stay in L2), within a group every panel of
  weights, within a panel blocks of 32 rows: the tiles compute a 32 x 32 (or 16-row / 16-column) int32 block into an
  L1 scratch, which the AVX-512 output stage requantizes row by row into the output (a table gives each row's output
  offset, -1 for the rows not stored).

Threads: the serial driver qconv_amx has qconv_vnni's arguments, so qgemm.qconv_par runs it on bands of images or
output rows by native address; every worker loads the tile configuration itself (amx.load_config) and releases the
tiles when done. uint8 models (TFLite's asymmetric per-tensor scheme) stay on the VNNI kernels.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base import amx
from lite_numba.kernels.linear.amx_output import fill_params, is_general, output_params_amx, store_block
from lite_numba.kernels.linear.int8_rows import copy_flipped, pack_rows, pad_flipped
from lite_numba.kernels.linear.simd_int8 import PRM_BLOCK, channel_offsets, const_values
from numba import njit

TM = 32  # rows of a block (2 A tiles)
TN = 32  # output channels of a weight panel (2 B tiles)
KSTEP = amx.TILE_BYTES  # depth bytes per tile step
AMX_MIN_ROWS = 32  # fewer output rows stay on the VNNI tiles (their 8-row / 1-row shapes)
AMX_MIN_MACS = 300_000  # padded multiply-adds below which a layer stays on the VNNI tiles (amx_pays)
AMX_MIN_DEPTH = 40  # depth (K, or one filter row's KW * CI read in place) below which layers stay on VNNI
IM2COL_MIN_DEPTH = 256  # K x K windows at least this deep run on the tiles even through im2col blocks (amx_pays)
GROUP_BYTES = 512 * 1024  # activation bytes of a group of rows (L2-resident while every panel passes over it)
MODE_GEMM, MODE_WINDOWS, MODE_IM2COL = 0, 1, 2
C_SIZE = TM * amx.C_STRIDE // 4  # int32 of one C block
SCRATCH_HEAD = 2 * C_SIZE + 16  # int32 before the row table in split_scratch's layout
C_ROWS = 2 * C_SIZE // PRM_BLOCK  # scratch rows (of PRM_BLOCK int32) holding two C blocks (one being stored)
EXTRA_ROWS = C_ROWS + 1  # the C blocks and the tile configuration, after the output-stage parameters


_block_2_2 = amx.make_block(2, 2)
_block_2_1 = amx.make_block(2, 1)
_block_1_2 = amx.make_block(1, 2)
_block_1_1 = amx.make_block(1, 1)


@njit(cache=True, inline="always")
def block_products(ma, nb, a, lda, rstride, nrun, ks, b, c, a2):
    """The products of one block of ma x nb tiles into c (A tile 1 a2 bytes after tile 0)."""
    if ma == 2:
        if nb == 2:
            _block_2_2(a, lda, rstride, nrun, ks, b, c, a2)
        else:
            _block_2_1(a, lda, rstride, nrun, ks, b, c, a2)
    elif nb == 2:
        _block_1_2(a, lda, rstride, nrun, ks, b, c, a2)
    else:
        _block_1_1(a, lda, rstride, nrun, ks, b, c, a2)


@njit(cache=True, inline="always")
def _panels(a, lda, a2, rstride, nrun, ks, rows, wa, kpad, Np, CO, c, prm, out, dst, lo, hi, gen):
    """Every weight panel over `rows` rows of A (row r at byte address a + r // 16 * a2 + r % 16 * lda: a2 = 16 lda
    for evenly spaced rows, the next output row's offset when two short rows share a block; dst[r] its output
    offset). The blocks alternate between the two C buffers of c: a block's output stage runs after the next
    block's tiles are issued, so the CPU overlaps the vector work with the tiles' products."""
    c_a = c[:C_SIZE]
    c_b = c[C_SIZE:2 * C_SIZE]
    k = 0
    pj, pi, pma, pnb = 0, 0, 0, 0
    for j0 in range(0, Np, TN):
        nb = 2 if Np - j0 >= TN else 1
        b = wa + j0 * kpad
        for i in range(0, rows, TM):
            ma = 2 if rows - i > 16 else 1
            block_products(ma, nb, a + i // 16 * a2, lda, rstride, nrun, ks, b, c_a if k % 2 == 0 else c_b, a2)
            if k > 0:
                store_block(c_b if k % 2 == 0 else c_a, 16 * pma, pnb, prm, pj, out, dst, pi, CO - pj, lo, hi, gen)
            pj, pi, pma, pnb = j0, i, ma, nb
            k += 1
    if k > 0:
        store_block(c_b if k % 2 == 0 else c_a, 16 * pma, pnb, prm, pj, out, dst, pi, CO - pj, lo, hi, gen)


@njit(cache=True, inline="always")
def _row_offsets(dst, rows, first, CO):
    """dst[r] = (first + r) * CO for the block's rows, -1 for the 32 after them."""
    for r in range(rows):
        dst[r] = (first + r) * CO
    for r in range(rows, rows + TM):
        dst[r] = -1


@njit(cache=True, inline="always")
def prepare_source(x, out, geo, zp_in, abuf):
    """Mode 1's padded copy of the input (padding zp_in) into abuf; nothing in the other modes."""
    if geo[13] == MODE_WINDOWS:
        N, H, W, CI = x.shape
        _, OH, OW, _ = out.shape
        sh, sw, dh, KH, KW = geo[0], geo[1], geo[2], geo[6], geo[7]
        HP = (OH - 1) * sh + (KH - 1) * dh + 1
        WP = (OW - 1) * sw + KW
        pad_flipped(abuf.reshape(abuf.size), x.reshape(x.size), N, H, W, CI, HP, WP, geo[4], geo[5],
                    np.uint8(zp_in & 0xFF), np.uint8(0))


@njit(cache=True, inline="always")
def groups_of(x, out, geo, abuf):
    """The groups of rows of qconv_amx's mode: (count, rows read in place before the copied tail in mode 0, output
    rows per group in mode 1)."""
    N, H, W, CI = x.shape
    _, OH, OW, CO = out.shape
    mode, MG = geo[13], geo[14]
    if mode == MODE_GEMM:
        M = N * H * W
        kp = (CI + KSTEP - 1) // KSTEP * KSTEP
        # rows [0, u): read in place (the last block's last row ends before the tensor does); the rest via abuf
        u = max(0, min(M, M + 1 - (kp + CI - 1) // CI)) // TM * TM
        return (u + MG - 1) // MG + (1 if u < M else 0), u, 0
    if mode == MODE_WINDOWS:
        WP = (OW - 1) * geo[1] + geo[7]
        per = max(1, MG // WP) if geo[0] == 1 and geo[1] == 1 else 2 if OW <= 16 else 1
        return N * ((OH + per - 1) // per), 0, per
    return (N * OH * OW + abuf.shape[0] - 1) // abuf.shape[0], 0, 0


@njit(cache=True, inline="always")
def start_group(g, x, out, geo, zp_in, abuf, dst, u, per):
    """Group g made ready (mode 0's tail copied, mode 2's im2col rows packed, dst filled): returns (A's byte address,
    lda, A tile 1's offset from tile 0, run stride, runs, 64-byte steps per run, rows)."""
    N, H, W, CI = x.shape
    _, OH, OW, CO = out.shape
    mode, MG = geo[13], geo[14]
    ab = np.int64(abuf.ctypes.data)
    if mode == MODE_GEMM:
        ks = (CI + KSTEP - 1) // KSTEP
        g0 = g * MG
        if g0 < u:
            rows = min(MG, u - g0)
            _row_offsets(dst, rows, g0, CO)
            return np.int64(x.ctypes.data) + g0 * CI, CI, 16 * CI, 0, 1, ks, rows
        rows = N * H * W - u
        Kp = abuf.shape[1]
        af = abuf.reshape(abuf.size)
        xf = x.reshape(x.size)
        for r in range(rows):
            copy_flipped(af, r * Kp, xf, (u + r) * CI, CI, np.uint8(0))
        _row_offsets(dst, rows, u, CO)
        return ab, Kp, 16 * Kp, 0, 1, ks, rows
    if mode == MODE_WINDOWS:
        sh, sw, dh, KH, KW = geo[0], geo[1], geo[2], geo[6], geo[7]
        HP = (OH - 1) * sh + (KH - 1) * dh + 1
        WP = (OW - 1) * sw + KW
        # rows per output row: WP at stride 1 (blocks run on across output rows), else OW, or 16 when two output
        # rows of at most 16 pixels share a block (A tile 1 = the next output row)
        strided = sh > 1 or sw > 1
        VW = (16 if OW <= 16 else OW) if strided else WP
        gpi = (OH + per - 1) // per
        n, oy0 = g // gpi, g % gpi * per
        noy = min(per, OH - oy0)
        rows = (noy - 1) * VW + OW
        for p in range(rows):
            ox = p % VW
            dst[p] = ((n * OH + oy0 + p // VW) * OW + ox) * CO if ox < OW else -1
        for p in range(rows, rows + TM):
            dst[p] = -1
        ks = (KW * CI + KSTEP - 1) // KSTEP
        a2 = sh * WP * CI if strided and OW <= 16 else 16 * sw * CI
        return ab + ((n * HP + oy0 * sh) * WP) * CI, sw * CI, a2, dh * WP * CI, KH, ks, rows
    MB, Kp = abuf.shape
    m0 = g * MB
    rows = min(MB, N * OH * OW - m0)
    pack_rows(x, abuf, m0, rows, geo, 0, zp_in)
    _row_offsets(dst, rows, m0, CO)
    return ab, Kp, 16 * Kp, 0, 1, Kp // KSTEP, rows


@njit(cache=True, inline="always")
def split_scratch(scratch):
    """(c, cfg, dst) of the BATCH_MATMUL and hybrid drivers' flat int32 scratch: two C blocks (c: the first, C_SIZE
    int32), the tile configuration (cfg: 16 int32, 64 bytes), then the row table (dst: int64)."""
    c = scratch[:C_SIZE]
    cfg = scratch[2 * C_SIZE:2 * C_SIZE + 16]
    t = scratch[2 * C_SIZE + 16:]
    return c, cfg, t.reshape(t.size).view(np.int64)


@njit(cache=True, inline="always")
def configure_tiles(cfg):
    """Fill the tile configuration in cfg (int32 [16]) and load it on this thread (amx.release undoes it)."""
    amx.fill_config(cfg.view(np.uint8))
    amx.load_config(cfg)


@njit(cache=True, nogil=True, _nrt=False)
def qconv_amx(x, wp, offs, bias, out, geo, flip, zp_in, mult, shift, zp_out, qmin, qmax, abuf, scratch):
    """Quantized CONV_2D (one group) / FULLY_CONNECTED of int8 activations on the AMX tiles: simd_int8.qconv_vnni's
    arguments (flip unused: 0), with wp packed by pack_weights_amx (pad_runs(w, KH) in mode 1), offs the channel
    offsets of flip 0 (or amx_output's parameters when the bias is constant), geo[12] the output stage's form (1
    general, 0 fast, -1 decide here from the parameters), geo[13] the mode and geo[14] the rows of a group (module
    doc), abuf the mode's byte buffer (mode 0: the last rows, [rows, Kp]; mode 1: the padded
    input, flat; mode 2: an im2col block [MB, Kp]) and scratch int32 [Np / 16 + EXTRA_ROWS + table rows,
    PRM_BLOCK]: parameters, the C block, the tile configuration, the row table."""
    N, H, W, CI = x.shape
    _, OH, OW, CO = out.shape
    Np = (CO + 15) // 16 * 16
    nbp = Np // 16
    pf = scratch[:nbp].reshape(nbp * PRM_BLOCK)
    if offs.size == nbp * PRM_BLOCK:  # computed at prepare (a constant bias)
        prm = offs
    else:
        fill_params(pf, offs, bias, mult, shift, zp_out, nbp)
        prm = pf
    gen = geo[12] if geo[12] >= 0 else is_general(prm, nbp)  # the output stage's form, known at prepare or not
    c = scratch[nbp:nbp + C_ROWS].reshape(C_ROWS * PRM_BLOCK)
    cfg = scratch[nbp + C_ROWS]
    t = scratch[nbp + EXTRA_ROWS:]
    dst = t.reshape(t.size).view(np.int64)
    o = out.reshape(out.size)
    lo, hi = np.int32(qmin), np.int32(qmax)
    prepare_source(x, out, geo, zp_in, abuf)
    configure_tiles(cfg)
    wa = np.int64(wp.ctypes.data)
    ngroups, u, per = groups_of(x, out, geo, abuf)
    for g in range(ngroups):
        a, lda, a2, rstride, nrun, ks, rows = start_group(g, x, out, geo, zp_in, abuf, dst, u, per)
        _panels(a, lda, a2, rstride, nrun, ks, rows, wa, nrun * ks * KSTEP, Np, CO, c, prm, o, dst, lo, hi, gen)
    amx.release()


# --- prepare (numpy) ------------------------------------------------------------------------------------------------


def pack_weights_amx(w: np.ndarray, runs: int = 1) -> np.ndarray:
    """w [N, K] int8 (K = runs * L) -> the flat tile layout (module doc): panel j0 at byte j0 * runs * Lp (Lp = L
    rounded up to 64) holds, for each 64-byte step s of the runs in order and each of its tiles t (16 channels),
    1 KiB with byte (g * 16 + n) * 4 + i = w[j0 + 16 t + n, run * L + 64 s' + 4 g + i] (zero past N and L)."""
    N, K = w.shape
    L = K // runs
    Lp = -(-L // KSTEP) * KSTEP
    Np = -(-N // 16) * 16
    steps = runs * Lp // KSTEP
    wp = np.zeros((Np, runs, Lp), np.int8)
    wp[:N, :, :L] = np.asarray(w, np.int8).reshape(N, runs, L)
    out = []
    for j0 in range(0, Np, TN):
        width = min(TN, Np - j0)
        p = wp[j0:j0 + width].reshape(width // 16, 16, steps, KSTEP // 4, 4)  # [t, n, step, g, i]
        out.append(p.transpose(2, 0, 3, 1, 4).reshape(-1))
    return np.ascontiguousarray(np.concatenate(out))


def choose_mode(N, H, W, CI, CO, OH, OW, geo_conv) -> int:
    """MODE_GEMM for a pointwise layer, else MODE_WINDOWS or MODE_IM2COL by an estimate of the cycles: one per row,
    16 channels and 64-byte step on the tiles (the rows the blocks compute, stored or not), a cycle per 16 bytes
    copied (the padded input, or every im2col row)."""
    sh, sw, dh, dw, pt, pl, KH, KW = (int(v) for v in geo_conv)
    if KH == 1 and KW == 1 and sh == 1 and sw == 1 and pt == 0 and pl == 0:
        return MODE_GEMM
    if dw != 1:
        return MODE_IM2COL
    panels = -(-CO // 16)
    K = KH * KW * CI
    P = N * OH * OW
    im2col = -(-P // 16) * 16 * -(-K // KSTEP) * panels + 2 * P * K // 16
    HP, WP = (OH - 1) * sh + (KH - 1) * dh + 1, (OW - 1) * sw + KW
    rows = N * ((OH - 1) * WP + OW) if sh == 1 and sw == 1 else N * OH * -(-OW // 16) * 16
    windows = rows * KH * -(-KW * CI // KSTEP) * panels + N * HP * WP * CI // 16
    return MODE_WINDOWS if windows <= im2col else MODE_IM2COL


def amx_pays(x_shape, out_shape, geo_conv) -> bool:
    """Whether a layer runs on the tiles rather than the VNNI kernels (both exact, both at the amx level; one thread,
    CPU time, Xeon model 207):
    - enough output rows (AMX_MIN_ROWS) and work (AMX_MIN_MACS, rows x depth and channels padded to the tiles): a
      17 x 64 x 192 FULLY_CONNECTED 2.2 us on VNNI, 2.4 on the tiles; a 6 x 6 x 144 -> 24 pointwise layer 1.7 vs 2.2;
      the tiles' fixed cost (a call, a tile configuration, a C block stored and read back) outweighs their speed;
    - enough depth per 64-byte step (AMX_MIN_DEPTH): below it the output stage dominates and VNNI's, in registers,
      is cheaper (MobileNetV2's expansions of 8 or 16 channels 1.1-1.3x slower on the tiles, of 48 or more
      0.7-0.85x);
    - rows read in place (modes 0 and 1), a strided 1 x 1 layer (which VNNI packs too) or deep windows
      (IM2COL_MIN_DEPTH). Where the tiles would need im2col blocks of a shallow window (3 input channels, dilation
      along x) the VNNI kernel reads the windows in place and wins (MobileNetV2's 224x224x3 stem 105 vs 182 us,
      ResNet-18's 7x7x3 one 395 vs 527 us); ResNet-18's 3x3 stride-2 layer of 7 x 7 outputs (K = 2304) is 3x faster
      packed on the tiles."""
    N, H, W, CI = x_shape
    _, OH, OW, CO = out_shape
    KH, KW = geo_conv[6], geo_conv[7]
    if N * OH * OW < AMX_MIN_ROWS or N * OH * OW * -(-KH * KW * CI // KSTEP) * KSTEP * -(-CO // 16) * 16 < AMX_MIN_MACS:
        return False
    mode = choose_mode(N, H, W, CI, CO, OH, OW, geo_conv)
    if (KW * CI if mode == MODE_WINDOWS else KH * KW * CI) < AMX_MIN_DEPTH:
        return False
    return mode != MODE_IM2COL or (KH == 1 and KW == 1) or KH * KW * CI >= IM2COL_MIN_DEPTH


def gemm_pays(rows: int, K: int, N: int, min_depth: int = 1) -> bool:
    """Whether a GEMM of `rows` rows, depth K and N channels pays on the tiles (the FULLY_CONNECTED / BATCH_MATMUL
    users; amx_pays for convolutions): AMX_MIN_ROWS rows, AMX_MIN_MACS multiply-adds with K and N padded to the
    tiles, and a depth of at least min_depth."""
    Kp, Np = -(-K // KSTEP) * KSTEP, -(-N // 16) * 16
    return rows >= AMX_MIN_ROWS and K >= max(min_depth, 1) and rows * Kp * Np >= AMX_MIN_MACS


def group_rows(row_bytes: int) -> int:
    """Rows per group (a multiple of TM): about GROUP_BYTES of activations."""
    return max(TM, GROUP_BYTES // max(row_bytes, 1) // TM * TM)


def schedule_amx(ctx, x, w: np.ndarray, zp_in: int, bias, out, geo_conv, mult, shift, zp_out: int, qmin: int,
                 qmax: int) -> None:
    """Schedule qconv_amx for x [N, H, W, CI] int8 (tensor or view), constant weights w [CO, K] int8 (OHWI
    flattened), int32 bias argument, out [N, OH, OW, CO] (qgemm.schedule_qgemm's arguments without zp_w; shifts in
    [-31, 31])."""
    N, H, W, CI = x.shape
    _, OH, OW, CO = out.shape
    Np = -(-CO // 16) * 16
    offs = channel_offsets(w, 0, zp_in, Np)
    bias_values = const_values(bias)
    general = -1  # the output stage's general form (amx_output): decided in the kernel when the bias is not known
    if bias_values is not None:  # the output-stage parameters once, at prepare
        off = offs[:CO].astype(np.int64) + np.asarray(bias_values, np.int64)
        offs = output_params_amx(((off + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32), mult, shift,
                                 zp_out, CO, Np // 16)
        general = int(np.max(shift) > 0 or np.min(shift) < -21)
    geo, abuf_shape, wp, table = layer_plan((N, H, W, CI), (N, OH, OW, CO), w, geo_conv)
    geo[12] = general
    scratch = ctx.temp((Np // 16 + EXTRA_ROWS + -(-table * 2 // PRM_BLOCK), PRM_BLOCK), np.int32)
    ctx.call(qconv_amx, x, ctx.const(wp), ctx.const(offs), bias, out, geo, 0, int(zp_in),
             np.asarray(mult, np.int32), np.asarray(shift, np.int32), int(zp_out), int(qmin), int(qmax),
             ctx.temp(abuf_shape, np.uint8), scratch)


def layer_plan(x_shape, out_shape, w: np.ndarray, geo_conv):
    """A layer on the tiles: (geo for the drivers, with geo[12] = -1; abuf's shape; the packed weights; the entries
    of the row table: a group's rows, mode 1's whole output rows of WP or OW pixels, and a block's slack)."""
    N, H, W, CI = x_shape
    _, OH, OW, CO = out_shape
    K = w.shape[1]
    sh, sw, dh, dw, pt, pl, KH, KW = (int(v) for v in geo_conv)
    mode = choose_mode(N, H, W, CI, CO, OH, OW, geo_conv)
    if mode == MODE_GEMM:
        kp = -(-K // KSTEP) * KSTEP
        MG = min(group_rows(kp), -(-N * H * W // TM) * TM)
        tail = -(-(2 * TM + -(-kp // K)) // TM) * TM  # the rows copied to abuf at most (see qconv_amx)
        abuf, wp = (tail, kp), pack_weights_amx(w)
    elif mode == MODE_WINDOWS:
        HP, WP = (OH - 1) * sh + (KH - 1) * dh + 1, (OW - 1) * sw + KW
        kp = -(-KW * CI // KSTEP) * KSTEP
        MG = group_rows(KH * kp)
        abuf, wp = (1, N * HP * WP * CI + TM * sw * CI + kp + 64), pack_weights_amx(w, KH)
    else:
        kp = -(-K // KSTEP) * KSTEP
        MG = min(group_rows(kp), -(-N * OH * OW // TM) * TM)
        abuf, wp = (MG, kp), pack_weights_amx(w)
    geo = np.array([sh, sw, dh, dw, pt, pl, KH, KW, OH, OW, int(mode == MODE_GEMM), 0, -1, mode, MG], np.int64)
    return geo, abuf, wp, max(MG, (OW - 1) * sw + KW) + 2 * TM
