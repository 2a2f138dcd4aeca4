"""int8 GEMM and convolution (CONV_2D with one group, FULLY_CONNECTED) on 256-bit vectors: AVX2 and AVX-VNNI (and,
through the generic-IR twins of the two instructions, NEON).

The layer, the activation packing, the folded constant terms, the uint8-weight per-row term and the output stage
are those of kernels/simd_int8.py (read its module doc first); only the micro-kernels and their weight layout
differ, so every output byte is the one the AVX-512 VNNI path and the official runtime give.

- The tile is MR = 4 rows x 16 output channels (two vectors of 8 int32 lanes per row: 8 accumulators of the 16 ymm
  registers), or 8 channels (one vector) for a last panel half with at most 8 live channels, or one row for a few
  leftover rows and matrix-vector products (16 channels, or a whole 32-channel panel: one activation broadcast for
  4 vectors; a 1-row tile sums the depth in several accumulator sets, narrow_accumulate). Weights are packed in
  panels of 32 channels (16 for a last odd panel) like the VNNI path; a panel is computed as two 16-channel halves.
- AVX-VNNI (level "avxvnni"): the VNNI layout (simd_int8.pack_weights_vnni: per 4-byte group of the depth, each
  channel's 4 bytes) and `vpdpbusd` on ymm registers (the VEX encoding; LLVM's intrinsic is the AVX-512 VL one,
  selected as AVX-VNNI on CPUs without AVX-512). When the target lacks both, the intrinsic's generic twin computes
  the same sums (widening multiplies and adds in generic vector IR).
- AVX2 (levels "avx2" and "avx512" without VNNI): per 4-byte group, the channels' bytes of depths (4g, 4g+1) then
  those of (4g+2, 4g+3) (pack_weights_pairs), sign-extended to int16 on load; the activations are packed (im2col
  block, or the padded copy the K x K windows are read from) as uint16, the flipped bytes zero-extended, so each
  depth pair is one 32-bit broadcast as it lies, and `vpmaddwd` multiplies the pairs and adds each pair into an
  int32 lane: exact, as every product of an unsigned byte and a signed one fits 16 bits and a pair sum fits 32
  (unlike `vpmaddubsw`, whose int16 pair sums saturate). Generic twin for other targets. (The tiles also take byte
  activations, zero-extending each broadcast group by two byte shuffles: the form before the twenty-fourth
  session, whose shuffles shared the vector ports with the multiplies; uint16 blocks took MobileNetV2 1.0/224
  int8's 1x1 layers from 1.14x to 0.84x XNNPACK's time on the AVX2 stand-in.)
- The output stage is simd_int8's (requantize_params / requantize_vector on 16 lanes, LLVM splits them into
  ymm halves), so it is bit-exact with the VNNI path by construction.

Which scheme a driver runs is geo[12] (1: vpdpbusd layout, 0: pairs), so the parallel driver of the int8 kernels
(qgemm.qconv_par, which calls a serial driver with a fixed argument list) serves these drivers unchanged.
"""

from __future__ import annotations

import platform

import numpy as np
from lite_numba.kernels.base import isa
from lite_numba.kernels.base.llvm_ir import I8 as _i8
from lite_numba.kernels.base.llvm_ir import I16 as _i16
from lite_numba.kernels.base.llvm_ir import I32 as _i32
from lite_numba.kernels.base.llvm_ir import byte_ptr, load, store_live
from lite_numba.kernels.base.llvm_ir import data_ptr as _data_ptr
from lite_numba.kernels.base.llvm_ir import i64 as _const
from lite_numba.kernels.base.llvm_ir import splat as _splat
from lite_numba.kernels.linear.simd_int8 import (
    PRM_BLOCK,
    block_rows,
    conv_blocks,
    pack_panels_int8,
    pack_weights_vnni,
    pad_runs,
    padded_sizes,
    requantize_params,
    requantize_vector,
)
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

MR = 4  # rows of a tile
HALF = 16  # channels of a tile: half a panel
NSETS = 4  # accumulator sets of a 1-row tile (narrow_accumulate)

_V8I = ir.VectorType(_i32, 8)
_V16I = ir.VectorType(_i32, 16)
_V16S = ir.VectorType(_i16, 16)
_V16B = ir.VectorType(_i8, 16)
_V32B = ir.VectorType(_i8, 32)
_X86 = platform.machine().lower() in ("x86_64", "amd64")
GENERIC = False  # True: emit the generic twins even on x86 (read at code generation; the tests set it to check them)


def dpbusd(builder, acc, a, b):
    """acc + (per int32 lane) the sum of the 4 products of a's unsigned bytes and b's signed bytes (<8 x i32>):
    vpdpbusd on ymm when the target has AVX-VNNI or AVX-512 VNNI, else the same sums in generic vector IR."""
    if _X86 and not GENERIC and (isa.supports("avxvnni") or isa.supports("avx512vnni")):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_V8I, [_V8I, _V8I, _V8I]),
                                            "llvm.x86.avx512.vpdpbusd.256")
        return builder.call(fn, [acc, a, b])
    v32i = ir.VectorType(_i32, 32)
    p = builder.mul(builder.zext(builder.bitcast(a, _V32B), v32i), builder.sext(builder.bitcast(b, _V32B), v32i))
    for i in range(4):
        part = builder.shuffle_vector(p, p, ir.Constant(_V8I, [4 * j + i for j in range(8)]))
        acc = builder.add(acc, part)
    return acc


def maddwd(builder, a, b):
    """Per int32 lane, a[2i] * b[2i] + a[2i + 1] * b[2i + 1] of int16 vectors (<16 x i16> -> <8 x i32>), exact:
    vpmaddwd on AVX2, else generic vector IR."""
    if _X86 and not GENERIC and isa.supports("avx2"):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_V8I, [_V16S, _V16S]),
                                            "llvm.x86.avx2.pmadd.wd")
        return builder.call(fn, [a, b])
    p = builder.mul(builder.sext(a, _V16I), builder.sext(b, _V16I))
    even = builder.shuffle_vector(p, p, ir.Constant(_V8I, list(range(0, 16, 2))))
    odd = builder.shuffle_vector(p, p, ir.Constant(_V8I, list(range(1, 16, 2))))
    return builder.add(even, odd)


# byte shuffles of a broadcast 4-byte group [a0 a1 a2 a3] * 8 into int16 pairs (a0, a1) * 8 and (a2, a3) * 8, zero
# bytes taken from the second (zero) operand
_PAIR01 = ir.Constant(ir.VectorType(_i32, 32), [0, 32, 1, 32] * 8)
_PAIR23 = ir.Constant(ir.VectorType(_i32, 32), [2, 32, 3, 32] * 8)


def narrow_accumulate(builder, mr: int, nv: int, vnni: bool, pa, a_off, lda, kg, nrun, rstride, nrun2, rstride2, pb,
                      b_off, gs, a16: bool = False):
    """The loops of an [mr, 8 * nv] tile (the contract of _make_tile's tile, from i8 pointers pa and pb; vnni: the
    vpdpbusd layout, else the int16 pairs): returns the mr x nv allocas of its <8 x i32> accumulators. a16: pa
    points to 16-bit activations (the bytes zero-extended; offsets count them), whose pairs the pairs scheme
    broadcasts as they lie instead of shuffling them out of a byte group (the vpdpbusd scheme narrows them back)."""
    zero32 = ir.Constant(_V32B, None)
    half = builder.ashr(gs, _const(1))  # bytes from a group's first depth pair to its second
    # a 1-row tile has only nv chains of dependent sums (vpdpbusd's latency is ~5 cycles): NSETS accumulator sets
    # take the groups in turn and are added at the end (wrapping int32 sums: the same result in any order)
    nset = min(NSETS, 8 // nv) if mr == 1 else 1  # at most 8 accumulators
    sets = [[[cgutils.alloca_once_value(builder, ir.Constant(_V8I, None)) for _ in range(nv)] for _ in range(mr)]
            for _ in range(nset)]

    def group(g, arow, pb0, accs):
        pg = byte_ptr(builder, pb0, builder.mul(g, gs))
        aoff = builder.mul(g, _const(4))
        if vnni:
            bv = [load(builder, byte_ptr(builder, pg, _const(32 * v)), _V8I) for v in range(nv)]
        else:
            bv = [[builder.sext(load(builder, byte_ptr(builder, pg, builder.add(
                builder.mul(half, _const(h)), _const(16 * v))), _V16B), _V16S) for v in range(nv)]
                for h in range(2)]
        for r in range(mr):
            if vnni and a16:  # (the schedules give 16-bit activations to the pairs tiles only; exact anyway)
                four = builder.trunc(load(builder, byte_ptr(builder, arow[r], aoff), ir.VectorType(_i16, 4)),
                                     ir.VectorType(_i8, 4))
                av = _splat(builder, builder.bitcast(four, _i32), _V8I)
            else:
                av = _splat(builder, load(builder, byte_ptr(builder, arow[r], aoff), _i32), _V8I)
            if vnni:
                for v in range(nv):
                    builder.store(dpbusd(builder, builder.load(accs[r][v]), av, bv[v]), accs[r][v])
                continue
            if a16:
                p01 = builder.bitcast(av, _V16S)
                p23 = builder.bitcast(_splat(builder, load(builder, byte_ptr(builder, arow[r], builder.add(
                    aoff, _const(2))), _i32), _V8I), _V16S)
            else:
                ab = builder.bitcast(av, _V32B)
                p01 = builder.bitcast(builder.shuffle_vector(ab, zero32, _PAIR01), _V16S)
                p23 = builder.bitcast(builder.shuffle_vector(ab, zero32, _PAIR23), _V16S)
            for v in range(nv):
                s = builder.add(maddwd(builder, p01, bv[0][v]), maddwd(builder, p23, bv[1][v]))
                builder.store(builder.add(builder.load(accs[r][v]), s), accs[r][v])

    with cgutils.for_range(builder, nrun) as run, cgutils.for_range(builder, nrun2) as run2:
        u, u2 = run.index, run2.index
        a0 = builder.add(a_off, builder.add(builder.mul(u, rstride), builder.mul(u2, rstride2)))
        arow = [byte_ptr(builder, pa, builder.add(a0, builder.mul(lda, _const(r)))) for r in range(mr)]
        k0 = builder.mul(builder.add(builder.mul(u, nrun2), u2), kg)  # groups before this run
        pb0 = byte_ptr(builder, pb, builder.add(b_off, builder.mul(k0, gs)))
        whole = builder.sdiv(kg, _const(nset)) if nset > 1 else kg
        with cgutils.for_range(builder, whole) as loop:
            for i in range(nset):
                group(builder.add(builder.mul(loop.index, _const(nset)), _const(i)), arow, pb0, sets[i])
        if nset > 1:
            with cgutils.for_range(builder, builder.srem(kg, _const(nset))) as loop:
                group(builder.add(builder.mul(whole, _const(nset)), loop.index), arow, pb0, sets[0])
    accs = sets[0]
    for extra in sets[1:]:
        for r in range(mr):
            for v in range(nv):
                builder.store(builder.add(builder.load(accs[r][v]), builder.load(extra[r][v])), accs[r][v])
    return accs


def _make_tile(mr: int, nv: int, vnni: bool):
    """An intrinsic computing an [mr, 8 * nv] tile of the quantized output (nv = 1 or 2 vectors of 8 channels, or 4
    for one row: two 16-channel pieces, the second with ncols - 16 live):

    tile(a, a_off, lda, kg, nrun, rstride, nrun2, rstride2, b, b_off, gs, prm, c0, out, o_off, ldo, nrows, ncols,
    qmin, qmax, rs_on, rs_off)

    simd_int8.make_vnni_tile's contract, except that the panel's 4-byte groups are gs bytes apart (4 x the panel's
    channels) and b_off points at the tile's first channel within the first group; c0 (a multiple of 16) is the
    tile's first channel. vnni: the vpdpbusd layout, else the int16-pair layout (module doc)."""

    @intrinsic
    def tile(typingctx, a, a_off, lda, kg, nrun, rstride, nrun2, rstride2, b, b_off, gs, prm, c0, out, o_off, ldo,
             nrows, ncols, qmin, qmax, rs_on, rs_off):
        ip = types.intp
        sig = types.void(a, ip, ip, ip, ip, ip, ip, ip, b, ip, ip, prm, ip, out, ip, ip, ip, ip, types.int32,
                         types.int32, ip, ip)

        def codegen(context, builder, sig, args):
            (a_, a_off_, lda_, kg_, nrun_, rstride_, nrun2_, rstride2_, b_, b_off_, gs_, prm_, c0_, out_, o_off_,
             ldo_, nrows_, ncols_, qmin_, qmax_, rs_on_, rs_off_) = args
            pa = _data_ptr(context, builder, sig.args[0], a_)
            pb = _data_ptr(context, builder, sig.args[8], b_)
            pp = _data_ptr(context, builder, sig.args[11], prm_)
            po = _data_ptr(context, builder, sig.args[13], out_)
            a16 = sig.args[0].dtype.bitwidth == 16  # activations zero-extended to 16 bits (module doc)
            accs = narrow_accumulate(builder, mr, nv, vnni, pa, a_off_, lda_, kg_, nrun_, rstride_, nrun2_, rstride2_,
                                     pb, b_off_, gs_, a16)
            with builder.if_then(builder.icmp_signed("!=", rs_on_, _const(0))):  # per-row terms prm[rs_off + r]
                for r in range(mr):
                    t = _splat(builder, builder.load(builder.gep(pp, [builder.add(rs_off_, _const(r))],
                                                                 inbounds=True)), _V8I)
                    for v in range(nv):
                        builder.store(builder.add(builder.load(accs[r][v]), t), accs[r][v])
            lo, hi = _splat(builder, qmin_, _V16I), _splat(builder, qmax_, _V16I)
            for q in range(max(nv // 2, 1)):  # 16-channel pieces (a 1 x 32 tile: two, the second one live)
                params = requantize_params(builder, pp, builder.add(c0_, _const(HALF * q)))
                for r in range(mr):
                    with builder.if_then(builder.icmp_signed("<", _const(r), nrows_)):
                        hi8 = builder.load(accs[r][2 * q + 1]) if nv >= 2 else ir.Constant(_V8I, None)
                        acc = builder.shuffle_vector(builder.load(accs[r][2 * q]), hi8,
                                                     ir.Constant(_V16I, list(range(16))))
                        y = builder.trunc(requantize_vector(builder, acc, params, lo, hi), _V16B)
                        if nv == 1:
                            y = builder.shuffle_vector(y, y, ir.Constant(_V8I, list(range(8))))
                        dst = builder.gep(po, [builder.add(o_off_, builder.add(builder.mul(ldo_, _const(r)),
                                                                               _const(HALF * q)))], inbounds=True)
                        store_live(builder, y, dst, builder.sub(ncols_, _const(HALF * q)))
            return context.get_dummy_value()

        return sig, codegen

    tile.__name__ = tile.__qualname__ = f"{'vnni' if vnni else 'pairs'}_tile_{mr}x{8 * nv}"
    return tile


_vnni_4x16, _vnni_4x8, _vnni_1x16, _vnni_1x8 = (_make_tile(m, v, True) for m, v in ((MR, 2), (MR, 1), (1, 2), (1, 1)))
_pairs_4x16, _pairs_4x8, _pairs_1x16, _pairs_1x8 = (_make_tile(m, v, False)
                                                    for m, v in ((MR, 2), (MR, 1), (1, 2), (1, 1)))
# a whole 32-channel panel in one 1-row tile (matrix-vector products: one activation broadcast for 4 vectors)
_vnni_1x32, _pairs_1x32 = _make_tile(1, 4, True), _make_tile(1, 4, False)


# --- weight packing (prepare time, numpy) -----------------------------------------------------------------------------


def pack_weights_pairs(w: np.ndarray) -> np.ndarray:
    """The panels of the vpmaddwd tiles: per 4-byte group g, the bytes w[j0 + j, 4g + 2h + i] at
    g * 4 * width + (h * width + j) * 2 + i of panel j0 (h: the group's first or second depth pair)."""
    return pack_panels_int8(w, lambda p: p.reshape(p.shape[0], p.shape[1], -1, 2, 2).transpose(0, 2, 3, 1, 4))


# --- drivers ----------------------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def pick_tile(mr_big, mr, nv, t_big2, t_big1, t_1x2, t_1x1, args):
    """Call, among one scheme's four tiles, the one of mr rows (mr_big or 1) and nv vectors (2 or 1) on args (the
    int8, hybrid and INT4 drivers' common dispatch; inlined, so the tiles stay direct calls)."""
    if mr == mr_big:
        if nv == 2:
            t_big2(*args)
        else:
            t_big1(*args)
    elif nv == 2:
        t_1x2(*args)
    else:
        t_1x1(*args)


@njit(cache=True, inline="always")
def _tile(vnni, mr, nv, a, a_off, lda, kg, nrun, rstride, nrun2, rstride2, b, b_off, gs, prm, c0, out, o_off, ldo,
          nrows, ncols, qmin, qmax, rs_on, rs_off):
    """The tile of scheme vnni (1/0), mr rows (MR or 1) and nv vectors of 8 channels."""
    args = (a, a_off, lda, kg, nrun, rstride, nrun2, rstride2, b, b_off, gs, prm, c0, out, o_off, ldo, nrows, ncols,
            qmin, qmax, rs_on, rs_off)
    if vnni:
        pick_tile(MR, mr, nv, _vnni_4x16, _vnni_4x8, _vnni_1x16, _vnni_1x8, args)
    else:
        pick_tile(MR, mr, nv, _pairs_4x16, _pairs_4x8, _pairs_1x16, _pairs_1x8, args)


@njit(cache=True, inline="always")
def _panel_halves(vnni, mr, width, a, a_off, lda, kg, nrun, rstride, nrun2, rstride2, b, boff, prm, j0, out, o_off,
                  ldo, nrows, ncols, qmin, qmax, rs_on, rs_off):
    """The (one or two) 16-channel halves of the panel of `width` channels starting at channel j0 (ncols = live
    channels from j0), mr rows."""
    gs = 4 * width
    hq = 64 if vnni else 32  # bytes from a group's first channel to its 17th, in either layout
    if mr == 1 and width == 2 * HALF and ncols > HALF:
        args = (a, a_off, lda, kg, nrun, rstride, nrun2, rstride2, b, boff, gs, prm, j0, out, o_off, ldo, nrows, ncols,
                qmin, qmax, rs_on, rs_off)
        if vnni:
            _vnni_1x32(*args)
        else:
            _pairs_1x32(*args)
        return
    for q in range(width // HALF):
        live = ncols - HALF * q
        if live <= 0:
            break
        _tile(vnni, mr, 2 if live > 8 else 1, a, a_off, lda, kg, nrun, rstride, nrun2, rstride2, b, boff + hq * q, gs,
              prm, j0 + HALF * q, out, o_off + HALF * q, ldo, nrows, live, qmin, qmax, rs_on, rs_off)


@njit(cache=True, nogil=True, _nrt=False)  # no reference counting of the views it makes (as qconv_vnni)
def qconv_narrow(x, wp, offs, bias, out, geo, flip, zp_in, mult, shift, zp_out, qmin, qmax, abuf, prm):
    """simd_int8.qconv_vnni on 256-bit tiles: the same arguments, both ways of feeding the tiles (im2col blocks, or
    with geo[13] = 1 the windows of a KxK convolution read in place from the padded input in abuf), and the same
    results; wp packed by pack_weights_vnni when geo[12] is 1, by pack_weights_pairs when 0 (from pad_runs(w, runs)
    for the direct way)."""
    # windows read in place run a last tile over stale rows; an output row of 1 or 2 pixels (the streaming models'
    # convolutions over one time step) runs 1-row tiles instead, a quarter or half of the work
    mr = 1 if geo.size > 13 and geo[13] != 0 and geo[9] <= 2 else MR
    conv_blocks(x, wp, offs, bias, out, geo, flip, zp_in, mult, shift, zp_out, qmin, qmax, abuf, prm, mr, 2,
                _panel_halves, geo[12])


# --- prepare helper ---------------------------------------------------------------------------------------------------


def schedule_narrow(ctx, x, w: np.ndarray, offs: np.ndarray, bias, out, geo: np.ndarray, flip: int, zp_in: int, mult,
                    shift, zp_out: int, qmin: int, qmax: int) -> None:
    """Schedule qconv_narrow for qgemm.schedule_qgemm, which has prepared w (int8 [CO, K]), offs and geo ([sh, sw, dh,
    dw, pad_t, pad_l, KH, KW, OH, OW, pointwise, d]; here + [scheme] and, for a KxK convolution read in place from
    a padded copy of the input, + [1]). The vpdpbusd scheme when the path in force has AVX-VNNI, else vpmaddwd."""
    vnni = 1 if isa.has("avxvnni") else 0
    pack = pack_weights_vnni if vnni else pack_weights_pairs
    adt = np.uint8 if vnni else np.uint16  # the pairs tiles read the activations zero-extended (module doc)
    geo = np.array(list(geo) + [vnni], np.int64)
    N, OH, OW, CO = out.shape
    sh, sw, dh, dw, _, _, KH, KW = (int(v) for v in geo[:8])
    Kp, Np = padded_sizes(w.shape[1], CO)
    MB = block_rows(Kp, N * OH * OW, MR)
    # prm rows for the per-row terms of uint8 weights (pixels of a block, or of an output row, plus a tile's slack)
    rs_blocks = -(-(max(MB, OW) + MR) // PRM_BLOCK) if geo[11] != 0 else 0
    prm = ctx.temp((Np // 16 + rs_blocks, PRM_BLOCK), np.int32)
    args = (flip, int(zp_in), np.asarray(mult, np.int32), np.asarray(shift, np.int32), int(zp_out), int(qmin),
            int(qmax))
    if geo[10] == 0 and (KH > 1 or KW > 1):  # KxK: windows read in place from a padded copy of the input
        HP = (OH - 1) * sh + (KH - 1) * dh + 1
        WP = (OW - 1) * sw + (KW - 1) * dw + 1
        CI = x.shape[3]
        xpad = ctx.temp((1, N * HP * WP * CI + MR * sw * CI + 64), adt)  # 2-D: abuf's type, one kernel
        runs = KH if dw == 1 else KH * KW
        ctx.call(qconv_narrow, x, ctx.const(pack(pad_runs(w, runs))), ctx.const(offs), bias, out, np.append(geo, 1),
                 *args, xpad, prm)
        return
    ctx.call(qconv_narrow, x, ctx.const(pack(w)), ctx.const(offs), bias, out, geo, *args, ctx.temp((MB, Kp), adt), prm)
