"""The int8 GEMM tiles of the hybrid (dynamic-range) kernels: the accumulation of the int8 tiles (simd_int8's
vpdpbusd zmm tiles, simd_int8_narrow's 256-bit vpdpbusd / vpmaddwd tiles: the same loops, the same weight panels)
followed by a float32 epilogue in registers instead of the requantization.

Per output row r (one quantized input row of a FULLY_CONNECTED, one output pixel of a CONV_2D) and channel c, from
the exact int32 accumulator acc = sum_k (q + 128) * w (the activations flipped to uint8, as the int8 tiles read
them), the row's zero point zp and scaling factor sf, and the channel's weight sum ws, scale cs and bias:

    dot = acc - (128 + zp) * ws                          (int32, wrapping: the official int32 sum (q - zp) . w)
    v   = float32(dot) * float32(cs * sf) + bias         (separate float32 multiply and add, no FMA)
    out = clamp(v)

which is the official hybrid kernels' epilogue (EvalHybridDense's `bias + dot * (scale * sf)`, the optimized hybrid
CONV_2D's `acc * (cs * sf) + bias`) in their operation order; the row's (128 + zp, sf) are read from two arrays at
rs_off + r * rs_step (step 1: one per row; 0: one per image, the convolutions). The clamp is
m = lo > v ? lo : v, then hi < m ? hi : m (the float convolutions' min(max(v, lo), hi): a NaN stays), and with
lim[2] != 0 a NaN becomes lo (TFLite's ApplyActivationToVector, std::max / std::min: hybrid FULLY_CONNECTED's RELU
family; NONE there is lo = -inf, hi = +inf, which passes everything through).

Channel parameters: per block of 16 channels, 48 int32 slots (hybrid_params): weight sums, then the scales' and the
biases' float32 bits; zeros past the last channel.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.llvm_ir import F32, I32, data_ptr, i64, splat, store_live
from lite_numba.kernels.linear.simd_int8 import vnni_accumulate
from lite_numba.kernels.linear.simd_int8_narrow import narrow_accumulate, pick_tile
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

HP_BLOCK = 48  # int32 slots of channel parameters per 16 channels
WIDE_MR = 8  # rows of a zmm tile
NARROW_MR = 4  # rows of a 256-bit tile


def _param_row(builder, php, base, k, ty):
    """Row k of the channel parameters (16 int32 slots from slot base + 16 k of hp) as `ty`."""
    p = builder.gep(php, [builder.add(base, i64(16 * k))], inbounds=True)
    return builder.load(builder.bitcast(p, ty.as_pointer()), align=4)


def _epilogue(context, builder, sig, args, accs, lanes, mode):
    """Store the tile's rows (accs: mr x nv allocas of <lanes x i32>) as float32 through the hybrid epilogue of
    `mode` (module doc; 1: BATCH_MATMUL's). args are the tile's (see _make_tile)."""
    (_, _, _, _, _, _, _, _, _, _, _, hp_, c0_, out_, o_off_, ldo_, nrows_, ncols_, rz_, rsf_, rs_off_, rs_step_,
     lim_) = args
    vi = ir.VectorType(I32, lanes)
    vf = ir.VectorType(F32, lanes)
    php = data_ptr(context, builder, sig.args[11], hp_)
    po = data_ptr(context, builder, sig.args[13], out_)
    prz = data_ptr(context, builder, sig.args[18], rz_)
    prs = data_ptr(context, builder, sig.args[19], rsf_)
    plim = data_ptr(context, builder, sig.args[22], lim_)
    lo = splat(builder, builder.load(plim), vf)
    hi = splat(builder, builder.load(builder.gep(plim, [i64(1)], inbounds=True)), vf)
    nan_lo = builder.fcmp_unordered("!=", builder.load(builder.gep(plim, [i64(2)], inbounds=True)),
                                    ir.Constant(F32, 0.0))
    blk0 = builder.mul(builder.sdiv(c0_, i64(16)), i64(HP_BLOCK))
    for v in range(len(accs[0])):
        first = lanes * v
        base = builder.add(blk0, i64(first // 16 * HP_BLOCK + first % 16))

        ws, cs, bias = (_param_row(builder, php, base, k, ty) for k, ty in ((0, vi), (1, vf), (2, vf)))
        count = builder.sub(ncols_, i64(first))
        for r in range(len(accs)):
            live = builder.and_(builder.icmp_signed("<", i64(r), nrows_), builder.icmp_signed(">", count, i64(0)))
            with builder.if_then(live):
                at = builder.add(rs_off_, builder.mul(rs_step_, i64(r)))
                z = splat(builder, builder.load(builder.gep(prz, [at], inbounds=True)), vi)
                s = splat(builder, builder.load(builder.gep(prs, [at], inbounds=True)), vf)
                dst = builder.gep(po, [builder.add(builder.add(o_off_, builder.mul(ldo_, i64(r))), i64(first))],
                                  inbounds=True)
                if mode == 1:
                    store_live(builder, _bmm_value(builder, builder.load(accs[r][v]), z, s, ws, cs, bias, vi, vf),
                               dst, count)
                    continue
                dot = builder.sub(builder.load(accs[r][v]), builder.mul(z, ws))
                y = builder.fadd(builder.fmul(builder.sitofp(dot, vf), builder.fmul(cs, s)), bias)
                m = builder.select(builder.fcmp_ordered(">", lo, y), lo, y)
                m = builder.select(builder.fcmp_ordered("<", hi, m), hi, m)
                isnan = builder.fcmp_unordered("uno", y, y)
                m = builder.select(builder.and_(isnan, splat(builder, nan_lo, ir.VectorType(ir.IntType(1), lanes))),
                                   lo, m)
                store_live(builder, m, dst, count)


def _bmm_value(builder, acc, z, s, ws, cs, rs, vi, vf):
    """BATCH_MATMUL's hybrid epilogue (batch_matmul.bmm_hybrid_finish, the official reference kernel):
    total = int32(float(sum q * w) - float(row sum) * float(zp)) (truncated), out = (sf * scale) * float(total);
    acc is sum (q + 128) * w, z the row's 128 + zp, ws the weight sums, rs their float32 values."""
    c128 = ir.Constant(vi, [128] * vi.count)
    dot = builder.sub(acc, builder.mul(ws, c128))
    u = builder.fsub(builder.sitofp(dot, vf), builder.fmul(rs, builder.sitofp(builder.sub(z, c128), vf)))
    return builder.fmul(builder.fmul(s, cs), builder.sitofp(builder.fptosi(u, vi), vf))


def _make_tile(mr: int, nv: int, scheme: str, mode: int = 0):
    """An intrinsic computing an [mr, lanes * nv] tile of a hybrid layer's float32 output, scheme "wide" (vpdpbusd
    on zmm, 16 lanes, weights by simd_int8.pack_weights_vnni), "vnni" (vpdpbusd on ymm, 8 lanes, the same panels)
    or "pairs" (vpmaddwd, 8 lanes, simd_int8_narrow.pack_weights_pairs; "pairs16" the same with the activations as
    16-bit values, a a uint16 array: no byte shuffles in the loop):

    tile(a, a_off, lda, kg, nrun, rstride, nrun2, rstride2, b, b_off, gs, hp, c0, out, o_off, ldo, nrows, ncols,
    rz, rsf, rs_off, rs_step, lim)

    The A operand, the runs and the panel as in simd_int8.make_vnni_tile (gs: the 256-bit tiles' group stride,
    simd_int8_narrow._make_tile; unused by "wide"); hp the channel parameters (hybrid_params) of which those of
    channels c0.. (a multiple of 16) are used; rows r < nrows and channels j < ncols are stored as float32 at
    out[o_off + r * ldo + j]; the rows' 128 + zp and sf at rz / rsf[rs_off + r * rs_step]; lim = [lo, hi,
    nan-to-lo] (module doc). mode 1: BATCH_MATMUL's epilogue (_bmm_value; the bias slots hold the weight sums as
    float32, lim is unused)."""
    lanes = 16 if scheme == "wide" else 8

    @intrinsic
    def tile(typingctx, a, a_off, lda, kg, nrun, rstride, nrun2, rstride2, b, b_off, gs, hp, c0, out, o_off, ldo,
             nrows, ncols, rz, rsf, rs_off, rs_step, lim):
        ip = types.intp
        sig = types.void(a, ip, ip, ip, ip, ip, ip, ip, b, ip, ip, hp, ip, out, ip, ip, ip, ip, rz, rsf, ip, ip, lim)

        def codegen(context, builder, sig, args):
            a_, a_off_, lda_, kg_, nrun_, rstride_, nrun2_, rstride2_, b_, b_off_, gs_ = args[:11]
            pa = data_ptr(context, builder, sig.args[0], a_)
            pb = data_ptr(context, builder, sig.args[8], b_)
            if scheme == "wide":
                accs = vnni_accumulate(builder, mr, nv, pa, a_off_, lda_, kg_, nrun_, rstride_, nrun2_, rstride2_,
                                       pb, b_off_)
            else:
                accs = narrow_accumulate(builder, mr, nv, scheme == "vnni", pa, a_off_, lda_, kg_, nrun_, rstride_,
                                         nrun2_, rstride2_, pb, b_off_, gs_, scheme == "pairs16")
            _epilogue(context, builder, sig, args, accs, lanes, mode)
            return context.get_dummy_value()

        return sig, codegen

    tile.__name__ = tile.__qualname__ = f"hybrid{'_bmm' if mode else ''}_{scheme}_tile_{mr}x{lanes * nv}"
    return tile


_wide = {(m, v): _make_tile(m, v, "wide") for m in (WIDE_MR, 1) for v in (2, 1)}
_nvnni = {(m, v): _make_tile(m, v, "vnni") for m in (NARROW_MR, 1) for v in (2, 1)}
_npairs = {(m, v): _make_tile(m, v, "pairs") for m in (NARROW_MR, 1) for v in (2, 1)}
_w82, _w81, _w12, _w11 = _wide[(8, 2)], _wide[(8, 1)], _wide[(1, 2)], _wide[(1, 1)]
_v42, _v41, _v12, _v11 = _nvnni[(4, 2)], _nvnni[(4, 1)], _nvnni[(1, 2)], _nvnni[(1, 1)]
_p42, _p41, _p12, _p11 = _npairs[(4, 2)], _npairs[(4, 1)], _npairs[(1, 2)], _npairs[(1, 1)]
# BATCH_MATMUL's epilogue (mode 1)
_bw82, _bw81, _bw12, _bw11 = (_make_tile(m, v, "wide", 1) for m, v in ((WIDE_MR, 2), (WIDE_MR, 1), (1, 2), (1, 1)))
_bv42, _bv41, _bv12, _bv11 = (_make_tile(m, v, "vnni", 1) for m, v in ((NARROW_MR, 2), (NARROW_MR, 1), (1, 2), (1, 1)))
_bp42, _bp41, _bp12, _bp11 = (_make_tile(m, v, "pairs", 1)
                              for m, v in ((NARROW_MR, 2), (NARROW_MR, 1), (1, 2), (1, 1)))
# 16-bit activations (scheme 3)
_h42, _h41, _h12, _h11 = (_make_tile(m, v, "pairs16") for m, v in ((NARROW_MR, 2), (NARROW_MR, 1), (1, 2), (1, 1)))
_bh42, _bh41, _bh12, _bh11 = (_make_tile(m, v, "pairs16", 1)
                              for m, v in ((NARROW_MR, 2), (NARROW_MR, 1), (1, 2), (1, 1)))


@njit(cache=True, inline="always")
def panel_tiles(scheme, mode, mr, width, a, a_off, lda, kg, nrun, rstride, nrun2, rstride2, b, boff, hp, j0, out,
                o_off, ldo, nrows, ncols, rz, rsf, rs_off, rs_step, lim):
    """The hybrid tile(s) of mr rows over the weight panel of `width` channels (32, or 16 for a last odd panel) at
    channel j0, ncols live channels from j0: scheme 2 the zmm tiles (mr 8 or 1), 1 / 0 / 3 the 256-bit vpdpbusd /
    vpmaddwd / vpmaddwd-on-16-bit-activations tiles (mr 4 or 1), a panel as two 16-channel halves; mode 0 the
    FULLY_CONNECTED / CONV_2D epilogue, 1 BATCH_MATMUL's (scheme and mode constants of the driver)."""
    if scheme == 2:
        args = (a, a_off, lda, kg, nrun, rstride, nrun2, rstride2, b, boff, 0, hp, j0, out, o_off, ldo, nrows, ncols,
                rz, rsf, rs_off, rs_step, lim)
        if mode == 1:
            pick_tile(WIDE_MR, mr, width // 16, _bw82, _bw81, _bw12, _bw11, args)
        else:
            pick_tile(WIDE_MR, mr, width // 16, _w82, _w81, _w12, _w11, args)
        return
    gs = 4 * width
    hq = 64 if scheme == 1 else 32  # bytes from a group's first channel to its 17th, in either layout (3: pairs)
    for q in range(width // 16):
        live = ncols - 16 * q
        if live <= 0:
            break
        args = (a, a_off, lda, kg, nrun, rstride, nrun2, rstride2, b, boff + hq * q, gs, hp, j0 + 16 * q, out,
                o_off + 16 * q, ldo, nrows, live, rz, rsf, rs_off, rs_step, lim)
        nv = 2 if live > 8 else 1
        if scheme == 1 and mode == 1:
            pick_tile(NARROW_MR, mr, nv, _bv42, _bv41, _bv12, _bv11, args)
        elif scheme == 1:
            pick_tile(NARROW_MR, mr, nv, _v42, _v41, _v12, _v11, args)
        elif scheme == 3 and mode == 1:
            pick_tile(NARROW_MR, mr, nv, _bh42, _bh41, _bh12, _bh11, args)
        elif scheme == 3:
            pick_tile(NARROW_MR, mr, nv, _h42, _h41, _h12, _h11, args)
        elif mode == 1:
            pick_tile(NARROW_MR, mr, nv, _bp42, _bp41, _bp12, _bp11, args)
        else:
            pick_tile(NARROW_MR, mr, nv, _p42, _p41, _p12, _p11, args)


def weight_sums(w: np.ndarray) -> np.ndarray:
    """Each weight row's sum, wrapped to int32 as the accumulator wraps (summed as int64 without an int64 copy of the
    weights: 8x their size, 1.3 GB for Gemma 3 270M's logits layer)."""
    s = w.sum(axis=1, dtype=np.int64)
    return ((s + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


def hybrid_params(ws: np.ndarray, scales: np.ndarray, bias, Np: int) -> np.ndarray:
    """The channel parameters of the hybrid tiles (module doc), flat int32 [Np / 16 * HP_BLOCK]: weight sums ws
    (int32), scales (float32) and bias (float32, or None to leave zeros for fill_bias)."""
    n = len(ws)
    hp = np.zeros((Np // 16, 3, 16), np.int32)
    c = np.arange(n)
    hp[c // 16, 0, c % 16] = np.asarray(ws, np.int32)
    hp[c // 16, 1, c % 16] = np.asarray(scales, np.float32).view(np.int32)
    if bias is not None:
        hp[c // 16, 2, c % 16] = np.asarray(bias, np.float32).view(np.int32)
    return hp.reshape(-1)


@njit(cache=True, inline="always")
def fill_bias(hp, hpc, bias):
    """hp = the constant channel parameters hpc with the (run-time) bias's float32 bits in their slots."""
    for i in range(hp.size):
        hp[i] = hpc[i]
    bb = bias.view(np.int32)
    for c in range(bias.size):
        hp[c // 16 * HP_BLOCK + 32 + c % 16] = bb[c]
