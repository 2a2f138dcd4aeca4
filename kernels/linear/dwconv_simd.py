"""Explicit-SIMD DEPTHWISE_CONV_2D tiles (LLVM vector IR through Numba intrinsics), the "avx512" path of
kernels/linear/dwconv.py.

A tile computes PT output pixels of one output row x one block of 16 channels over a padded NHWC input: the
accumulators (PT vectors of 16 lanes) stay in registers for the whole window; for each tap t the 16 weights are
loaded once and multiplied with the PT pixels' inputs at x[xoff + p * xstep + toff[t]]. A block of fewer than 16
channels needs no scalar tail: masked loads and stores, or without native masks dwconv_lanes.py's forms.

Numerics are the portable loops': float32 adds fmul(x, w) to the bias tap by tap (no FMA), then clamps; integers
sum ext(x) * sext(w) in wrapping int32 lanes (any order) from bias - zp_in * window_sum, requantized as there.
"""

from __future__ import annotations

from lite_numba.kernels.base.llvm_ir import F32 as _f32
from lite_numba.kernels.base.llvm_ir import I32 as _i32
from lite_numba.kernels.base.llvm_ir import I64 as _i64
from lite_numba.kernels.base.llvm_ir import V16B as _v16b
from lite_numba.kernels.base.llvm_ir import V16F as _v16f
from lite_numba.kernels.base.llvm_ir import V16I as _v16i
from lite_numba.kernels.base.llvm_ir import data_ptr as _data_ptr
from lite_numba.kernels.base.llvm_ir import gep as _gep
from lite_numba.kernels.base.llvm_ir import i64 as _i
from lite_numba.kernels.base.llvm_ir import splat as _splat
from lite_numba.kernels.linear.dwconv_lanes import (
    VL,
    emit_split,
    lane_mask,
    masked_load,
    masked_store,
    masks_native,
    tail_load,
    vec_name,
)
from lite_numba.kernels.linear.dwconv_loops import bias_minus_zp, each_band, pad_band, pad_band_edges
from lite_numba.kernels.linear.simd_int8 import channel_params, params64, requantize_params, requantize_vector
from lite_numba.kernels.linear.simd_int8_narrow import maddwd
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

_v8i, _v16s = ir.VectorType(ir.IntType(32), 8), ir.VectorType(ir.IntType(16), VL)
_HALVES = (0xFFFF, -65536)  # the even / odd int16 of an int32 lane
_INTERLEAVE = ir.Constant(_v16i, [i // 2 + 8 * (i % 2) for i in range(VL)])  # channels from even / odd lanes

assert VL == _v16f.count == _v16i.count == _v16b.count


def _llvm_int(nbt):
    return ir.IntType(nbt.bitwidth)


def _make_f32_tile(pt: int):
    """tile(x, xoff, xstep, toff, ntap, w, wstride, bias, c0, out, ooff, ostep, lo, hi, nch): float32 out[ooff + p *
    ostep + j] = clamp(bias[c0 + j] + sum_t x[xoff + p * xstep + toff[t] + j] * w[t * wstride + c0 + j]) in order;
    wstride an int64 array instead: w[wstride[t] + c0 + j] (a table of the taps' weight offsets)."""

    @intrinsic
    def tile(typingctx, x, xoff, xstep, toff, ntap, w, wstride, bias, c0, out, ooff, ostep, lo, hi, nch):
        i64, f32 = types.int64, types.float32
        table = isinstance(wstride, types.Array)
        sig = types.void(x, i64, i64, toff, i64, w, wstride if table else i64, bias, i64, out, i64, i64, f32, f32, i64)

        def codegen(context, builder, sig, args):
            x_, xoff_, xstep_, toff_, ntap_, w_, wstride_, bias_, c0_, out_, ooff_, ostep_, lo_, hi_, nch_ = args
            px = _data_ptr(context, builder, sig.args[0], x_)
            ptoff = _data_ptr(context, builder, sig.args[3], toff_)
            pw = _gep(builder, _data_ptr(context, builder, sig.args[5], w_), c0_, _f32)
            pbias = _gep(builder, _data_ptr(context, builder, sig.args[7], bias_), c0_, _f32)
            po = _data_ptr(context, builder, sig.args[9], out_)
            mask = lane_mask(builder, nch_)

            def emit(mode):  # "full" / "half": all 16 / 8 lanes live, plain loads and stores (see emit_split)
                plain = mode in ("full", "half")
                vt = ir.VectorType(_f32, VL // 2) if mode == "half" else _v16f

                def ld(ptr):
                    if plain:
                        return builder.load(builder.bitcast(ptr, ir.PointerType(vt)), align=4)
                    return masked_load(builder, ptr, _v16f, mask)

                b = ld(pbias)
                accs = [cgutils.alloca_once_value(builder, b) for _ in range(pt)]
                xs = [_gep(builder, px, builder.add(xoff_, builder.mul(xstep_, _i(p))), _f32) for p in range(pt)]
                with cgutils.for_range(builder, ntap_) as loop:
                    t = loop.index
                    to = builder.load(_gep(builder, ptoff, t, _i64))
                    wo = builder.load(_gep(builder, _data_ptr(context, builder, sig.args[6], wstride_), t, _i64)) \
                        if table else builder.mul(t, wstride_)
                    wv = ld(_gep(builder, pw, wo, _f32))
                    for p in range(pt):
                        xv = ld(_gep(builder, xs[p], to, _f32))
                        builder.store(builder.fadd(builder.load(accs[p]), builder.fmul(xv, wv)), accs[p])
                lov = _splat(builder, lo_, vt)
                hiv = _splat(builder, hi_, vt)
                for p in range(pt):
                    v = builder.load(accs[p])
                    # min(max(v, lo), hi) as the portable loop computes it
                    v = builder.select(builder.fcmp_ordered("<", v, lov), lov, v)
                    v = builder.select(builder.fcmp_ordered("<", hiv, v), hiv, v)
                    ptr = _gep(builder, po, builder.add(ooff_, builder.mul(ostep_, _i(p))), _f32)
                    if plain:
                        builder.store(v, builder.bitcast(ptr, ir.PointerType(vt)), align=4)
                    else:
                        masked_store(builder, v, ptr, mask)

            # 8 channels (MediaPipe's segmentation heads: 256 x 256 x 8) as one 8-lane vector: without AVX-512 the
            # masked 16-lane form is two vmaskmovps a load and store (2.4x XNNPACK on AVX2)
            emit_split(builder, nch_, emit, half=True)
            return context.get_dummy_value()

        return sig, codegen

    tile.__name__ = tile.__qualname__ = f"dw_f32_tile{pt}"
    return tile


def _requantize(builder, a, q, left, right, kind, upmask):
    """RQ_NEON on 16 int32 lanes `a` (int64 out, before the zero point): "up" conv_loops.mbqm_half_up, "away"
    mbqm_away, "mixed" upmask's lanes up, the others away; q, left, right: per-lane multiplier, shifts (int64)."""
    v16l = ir.VectorType(_i64, VL)

    def c(v):
        return ir.Constant(v16l, [v] * VL)

    x = builder.sext(builder.trunc(builder.shl(builder.sext(a, v16l), left), _v16i), v16l)
    ab = builder.mul(x, q)
    res_up = res_away = None
    if kind in ("up", "mixed"):
        v = builder.ashr(builder.add(ab, c(1 << 30)), c(31))
        nudge = builder.ashr(builder.shl(c(1), right), c(1))
        res_up = builder.ashr(builder.add(v, nudge), right)
    if kind in ("away", "mixed"):
        pos = builder.icmp_signed(">=", ab, c(0))
        hp = builder.ashr(builder.add(ab, c(1 << 30)), c(31))
        hn = builder.sub(c(0), builder.ashr(builder.add(builder.sub(c(0), ab), c((1 << 30) - 1)), c(31)))
        h = builder.select(pos, hp, hn)
        mask = builder.sub(builder.shl(c(1), right), c(1))
        rem = builder.and_(h, mask)
        thr = builder.add(builder.ashr(mask, c(1)), builder.zext(builder.icmp_signed("<", h, c(0)), v16l))
        res_away = builder.add(builder.ashr(h, right), builder.zext(builder.icmp_signed(">", rem, thr), v16l))
    if kind == "up":
        return res_up
    if kind == "away":
        return res_away
    return builder.select(upmask, res_up, res_away)


def _make_int_tile(pt: int, kind: str):
    """tile(x, xoff, xstep, toff, ntap, w, wstride, be, c0, mult, shift, nvec, zp_out, qmin, qmax, out, ooff, ostep,
    nch, prm): acc = be[c0 + j] + sum_t ext(x[xoff + p * xstep + toff[t] + j]) * sext(w[t * wstride + c0 + j]) in
    wrapping int32; out[ooff + p * ostep + j] = clamp(requantize(acc, ...) + zp_out, qmin, qmax) for p < pt,
    j < nch; x int8 / uint8, w int8 / int16 (or int8 values widened to int32, dwconv.schedule_q), out int8 / uint8.
    kind, the block's rounding: "up", "away", "mixed" (half up below nvec) or "auto" (_q_pixels', whose blocks never
    straddle nvec: "up" below nvec, else "away", at run time). "up" takes its parameters from prm (simd_int8's
    output stage, channel_params); "up" and "auto" tiles start from 0 and add be in the "away" stage."""

    @intrinsic
    def tile(typingctx, x, xoff, xstep, toff, ntap, w, wstride, be, c0, mult, shift, nvec, zp_out, qmin, qmax, out,
             ooff, ostep, nch, prm):
        i64 = types.int64
        sig = types.void(x, i64, i64, toff, i64, w, i64, be, i64, mult, shift, i64, i64, i64, i64, out, i64, i64,
                         i64, prm)
        x_signed = x.dtype.signed
        xt = _llvm_int(x.dtype)
        wt = _llvm_int(w.dtype)
        ot = _llvm_int(out.dtype)

        def codegen(context, builder, sig, args):
            (x_, xoff_, xstep_, toff_, ntap_, w_, wstride_, be_, c0_, mult_, shift_, nvec_, zpo_, qmin_, qmax_,
             out_, ooff_, ostep_, nch_, prm_) = args
            v16l = ir.VectorType(_i64, VL)
            px = _data_ptr(context, builder, sig.args[0], x_)
            ptoff = _data_ptr(context, builder, sig.args[3], toff_)
            pw = _gep(builder, _data_ptr(context, builder, sig.args[5], w_), c0_, wt)
            pbe = _gep(builder, _data_ptr(context, builder, sig.args[7], be_), c0_, _i32)
            pm = _gep(builder, _data_ptr(context, builder, sig.args[9], mult_), c0_, _i32)
            ps = _gep(builder, _data_ptr(context, builder, sig.args[10], shift_), c0_, _i32)
            po = _data_ptr(context, builder, sig.args[15], out_)
            mask = lane_mask(builder, nch_)

            def emit(mode):  # "full": all 16 lanes live, plain loads and stores (see emit_split)
                full = mode == "full"

                def ld(ptr, vt, m):
                    if full:
                        return builder.load(builder.bitcast(ptr, ir.PointerType(vt)), align=1)
                    return masked_load(builder, ptr, vt, m)

                def ld_tap(ptr, vt):  # a tap's input or weight bytes
                    if mode == "tail" and vt.element.width == 8:
                        return tail_load(builder, ptr, nch_)
                    return ld(ptr, vt, mask)

                def st(v, ptr):
                    if full:
                        builder.store(v, builder.bitcast(ptr, ir.PointerType(v.type)), align=1)
                    else:
                        builder.call(store, [v, builder.bitcast(ptr, ir.PointerType(v.type)), ir.Constant(_i32, 1),
                                             mask])

                vx = ir.VectorType(xt, VL)
                vw = ir.VectorType(wt, VL)
                b = ir.Constant(_v16i, None) if kind in ("up", "auto") else ld(pbe, _v16i, mask)
                accs = [cgutils.alloca_once_value(builder, b) for _ in range(pt)]
                xs = [_gep(builder, px, builder.add(xoff_, builder.mul(xstep_, _i(p))), xt) for p in range(pt)]
                # no AVX-512: vpmaddwd on int16 lanes, odd / even weights zeroed, sums even / odd channels (half the
                eo = [[cgutils.alloca_once_value(builder, ir.Constant(_v8i, None)) for _ in range(2)]
                      for _ in range(pt)] if not masks_native() else None  # extensions, no vpmulld; interleaved)
                with cgutils.for_range(builder, ntap_) as loop:
                    t = loop.index
                    to = builder.load(_gep(builder, ptoff, t, _i64))
                    wraw = ld_tap(_gep(builder, pw, builder.mul(t, wstride_), wt), vw)
                    w16 = wraw if wt.width == 16 else (builder.trunc(wraw, _v16s) if wt.width == 32 else
                                                         builder.sext(wraw, _v16s))
                    w32 = builder.bitcast(w16, _v8i)
                    wh = [builder.bitcast(builder.and_(w32, ir.Constant(_v8i, [m] * 8)), _v16s) for m in _HALVES]
                    wv = wraw if wt.width == 32 else builder.sext(wraw, _v16i)
                    for p in range(pt):
                        raw = ld_tap(_gep(builder, xs[p], to, xt), vx)
                        if eo is not None:
                            x16 = builder.sext(raw, _v16s) if x_signed else builder.zext(raw, _v16s)
                            for h in range(2):
                                m = maddwd(builder, x16, wh[h])
                                builder.store(builder.add(builder.load(eo[p][h]), m), eo[p][h])
                            continue
                        xv = builder.sext(raw, _v16i) if x_signed else builder.zext(raw, _v16i)
                        builder.store(builder.add(builder.load(accs[p]), builder.mul(xv, wv)), accs[p])
                for p in range(pt if eo is not None else 0):
                    v = builder.shuffle_vector(builder.load(eo[p][0]), builder.load(eo[p][1]), _INTERLEAVE)
                    builder.store(builder.add(builder.load(accs[p]), v), accs[p])
                vo = ir.VectorType(ot, VL)
                store = cgutils.get_or_insert_function(
                    builder.module, ir.FunctionType(ir.VoidType(), [vo, ir.PointerType(vo), _i32, _v16b]),
                    f"llvm.masked.store.{vec_name(vo)}.p0")
                def up_stage():
                    params = requantize_params(builder, _data_ptr(context, builder, sig.args[19], prm_), c0_)
                    lo32 = _splat(builder, builder.trunc(qmin_, _i32), _v16i)
                    hi32 = _splat(builder, builder.trunc(qmax_, _i32), _v16i)
                    for p in range(pt):
                        r = requantize_vector(builder, builder.load(accs[p]), params, lo32, hi32)
                        ptr = _gep(builder, po, builder.add(ooff_, builder.mul(ostep_, _i(p))), ot)
                        st(builder.trunc(r, vo), ptr)

                def int64_stage(k):  # the output stage in int64 lanes, per channel ("away" / "mixed")
                    q = builder.sext(ld(pm, _v16i, mask), v16l)
                    sh = builder.sext(ld(ps, _v16i, mask), v16l)
                    zero = ir.Constant(v16l, None)
                    left = builder.select(builder.icmp_signed(">", sh, zero), sh, zero)
                    nsh = builder.sub(zero, sh)
                    right = builder.select(builder.icmp_signed(">", nsh, zero), nsh, zero)
                    lane = builder.add(ir.Constant(v16l, list(range(VL))), _splat(builder, c0_, v16l))
                    upmask = builder.icmp_signed("<", lane, _splat(builder, nvec_, v16l))
                    zpv = _splat(builder, zpo_, v16l)
                    lov = _splat(builder, qmin_, v16l)
                    hiv = _splat(builder, qmax_, v16l)
                    for p in range(pt):
                        r = builder.add(_requantize(builder, builder.load(accs[p]), q, left, right, k, upmask), zpv)
                        r = builder.select(builder.icmp_signed("<", r, lov), lov, r)
                        r = builder.select(builder.icmp_signed(">", r, hiv), hiv, r)
                        ptr = _gep(builder, po, builder.add(ooff_, builder.mul(ostep_, _i(p))), ot)
                        st(builder.trunc(r, vo), ptr)

                if kind == "up":
                    up_stage()
                elif kind == "auto":  # a block below nvec: half up (prm); else + be, rounded half away from zero
                    with builder.if_else(builder.icmp_signed("<", c0_, nvec_)) as (then, otherwise):
                        with then:
                            up_stage()
                        with otherwise:
                            bev = ld(pbe, _v16i, mask)
                            for p in range(pt):
                                builder.store(builder.add(builder.load(accs[p]), bev), accs[p])
                            int64_stage("away")
                else:
                    int64_stage(kind)

            # a last block (c0 + nch >= 16: channels of the same pixel before it) loads its tap bytes by tail_load
            emit_split(builder, nch_, emit, builder.icmp_signed(">=", builder.add(c0_, nch_), _i(VL)))
            return context.get_dummy_value()

        return sig, codegen

    tile.__name__ = tile.__qualname__ = f"dw_int_tile{pt}_{kind}"
    return tile


def _make_int_rows3_tile(pt: int, sw: int):
    """tile(x, xoff, C, ys, nrow, w, c0, out, ooff, prm, qmin, qmax): the "up" int8 tile for windows of nrow rows of
    3 adjacent taps, stride sw along x, 16 whole channels: a window row's (pt - 1) * sw + 3 input vectors loaded
    once for the pt pixels (row ky of pixel p at x[xoff + ky * ys + p * sw * C]); weights w[(ky * 3 + kx) * C + c0
    + j]; out[ooff + p * C + j]. The generic tile's int32 products (wrapping sums: any order)."""
    ncol = (pt - 1) * sw + 3

    @intrinsic
    def tile(typingctx, x, xoff, C, ys, nrow, w, c0, out, ooff, prm, qmin, qmax):
        i64 = types.int64
        sig = types.void(x, i64, i64, i64, i64, w, i64, out, i64, prm, i64, i64)

        def codegen(context, builder, sig, args):
            x_, xoff_, C_, ys_, nrow_, w_, c0_, out_, ooff_, prm_, qmin_, qmax_ = args
            i8p = ir.IntType(8).as_pointer()
            v16i8 = ir.VectorType(ir.IntType(8), VL)
            # (int8 x, w and out; the bitcasts keep the IR valid for other types, which never reach this tile)
            px = builder.bitcast(_data_ptr(context, builder, sig.args[0], x_), i8p)
            wt = _llvm_int(sig.args[5].dtype)
            pw = _gep(builder, builder.bitcast(_data_ptr(context, builder, sig.args[5], w_), wt.as_pointer()), c0_, wt)
            po = builder.bitcast(_data_ptr(context, builder, sig.args[7], out_), i8p)

            def load16(ptr, width=8):  # 16 lanes as int32: int8 bytes sign-extended, int32 weights as they are
                if width == 32:
                    return builder.load(builder.bitcast(ptr, _v16i.as_pointer()), align=4)
                return builder.sext(builder.load(builder.bitcast(ptr, v16i8.as_pointer()), align=1), _v16i)

            accs = [cgutils.alloca_once_value(builder, ir.Constant(_v16i, None)) for _ in range(pt)]
            with cgutils.for_range(builder, nrow_) as loop:
                ky = loop.index
                xr = _gep(builder, px, builder.add(xoff_, builder.mul(ky, ys_)), ir.IntType(8))
                wr = _gep(builder, pw, builder.mul(builder.mul(ky, _i(3)), C_), wt)
                wv = [load16(_gep(builder, wr, builder.mul(C_, _i(k)), wt), wt.width) for k in range(3)]
                cols = [load16(_gep(builder, xr, builder.mul(C_, _i(j)), ir.IntType(8))) for j in range(ncol)]
                for p in range(pt):
                    acc = builder.load(accs[p])
                    for k in range(3):
                        acc = builder.add(acc, builder.mul(cols[p * sw + k], wv[k]))
                    builder.store(acc, accs[p])
            params = requantize_params(builder, _data_ptr(context, builder, sig.args[9], prm_), c0_)
            lo32 = _splat(builder, builder.trunc(qmin_, _i32), _v16i)
            hi32 = _splat(builder, builder.trunc(qmax_, _i32), _v16i)
            for p in range(pt):
                r = builder.trunc(requantize_vector(builder, builder.load(accs[p]), params, lo32, hi32), v16i8)
                ptr = _gep(builder, po, builder.add(ooff_, builder.mul(C_, _i(p))), ir.IntType(8))
                builder.store(r, builder.bitcast(ptr, v16i8.as_pointer()), align=1)
            return context.get_dummy_value()

        return sig, codegen

    tile.__name__ = tile.__qualname__ = f"dw_int_rows3_tile{pt}_s{sw}"
    return tile


PT = 4  # pixels per tile
dw_rows3_s1 = _make_int_rows3_tile(PT, 1)
dw_rows3_s2 = _make_int_rows3_tile(PT, 2)
# (a row's last 1-3 pixels: tiles of their own instead of a PT tile moved back over pixels already computed)
dw_rows3_s1_1, dw_rows3_s1_2, dw_rows3_s1_3 = (_make_int_rows3_tile(pt, 1) for pt in (1, 2, 3))
dw_rows3_s2_1, dw_rows3_s2_2, dw_rows3_s2_3 = (_make_int_rows3_tile(pt, 2) for pt in (1, 2, 3))
dw_f32_tile4 = _make_f32_tile(PT)
dw_f32_tile1, dw_f32_tile2, dw_f32_tile3 = (_make_f32_tile(pt) for pt in (1, 2, 3))
dw_int_tile4, dw_int_tile1 = _make_int_tile(PT, "auto"), _make_int_tile(1, "auto")


@njit(cache=True, nogil=True)
def dwconv_f32_simd(xp, w, bias, out, geo, toff, lim):
    """Float32 depthwise over a padded input xp [N, HP, WP, C] (see dwconv.dw3x3_f32), any window: w [KH, KW, C],
    toff [KH * KW] the taps' element offsets from a window's corner, geo = [sh, sw, dh, dw]."""
    N, HP, WP, C = xp.shape
    OH, OW = out.shape[1], out.shape[2]
    xf, wf, of = xp.reshape(xp.size), w.reshape(w.size), out.reshape(out.size)
    z = OW - OW  # 0 as a run-time int64
    for n in range(N):
        for oy in range(OH):  # tiles of PT pixels, the last 1-3 by a tile of their size (f32_pixels)
            xrow, orow = ((n * HP + oy * geo[0]) * WP) * C, ((n * OH + oy) * OW) * C
            f32_pixels(xf, xrow, geo[1] * C, toff, wf, C, C, bias, of, orow, z, OW, lim)


@njit(cache=True, inline="always")
def _int_tile(pt4, xf, xoff, xstep, toff, T, wf, C, be, c0, mult, shift, nvec, zp_out, qmin, qmax, of, ooff, nch,
              prm):
    if pt4:  # a generic integer tile of PT pixels or one ("auto": half up below nvec, half away from zero from it)
        dw_int_tile4(xf, xoff, xstep, toff, T, wf, C, be, c0, mult, shift, nvec, zp_out, qmin, qmax, of, ooff, C, nch,
                     prm)
    else:
        dw_int_tile1(xf, xoff, xstep, toff, T, wf, C, be, c0, mult, shift, nvec, zp_out, qmin, qmax, of, ooff, C, nch,
                     prm)


@njit(cache=True, inline="always")
def _q_params(bias, wsum, zp_in, mult, shift, zp_out, nvec, be, prm):
    """be = bias - zp_in * wsum (int32, wrapping) and the half-up blocks' output-stage parameters in prm (once per
    call of a driver)."""
    bias_minus_zp(bias, wsum, zp_in, be)
    p64 = params64(prm)
    for c in range(prm.shape[0] * VL):
        if c < nvec:
            channel_params(prm, p64, c, be[c], mult[c], shift[c], zp_out)
        else:
            channel_params(prm, p64, c, 0, 0, 0, 0)


def _rows3_types(xf, wf):
    """Whether the rows3 tiles take these operands (known at compile time): int8 inputs with int8 weights or with
    int8 weights widened to int32 (dwconv.schedule_q's constant filters)."""


@overload(_rows3_types, inline="always")
def _rows3_types_impl(xf, wf):
    ok = xf.dtype == wf.dtype or (xf.dtype == types.int8 and wf.dtype == types.int32)
    return lambda xf, wf: ok


@njit(cache=True, nogil=True, _nrt=False)
def _q_pixels(xf, xrow, xstep, toff, wf, C, be, mult, shift, nvec, zp_out, qmin, qmax, of, orow, a, b, lo, prm):
    """Output pixels ox in [a, b) of a row (pixel 0 at of[orow]), windows at xf[xrow + ox * xstep] + toff, PT pixels
    at a time through every channel block (pixels outer: a tile's input columns are read as whole pixels, which the
    hardware prefetchers follow; blocks outer had walked the image once per block at a pitch of C bytes, 1.6x
    XNNPACK's time on MobileNetV2's 112 x 112 x 96 layer), then the row's last 1-3 pixels: whole half-up blocks of
    3-tap window rows (stride 1 or 2 along x; row step ys read off toff) use the rows3 tiles, the last pixels by a
    tile of their size (each pixel once); other blocks the generic tiles, the last one moved back to end at b, not
    before lo (recomputing pixels; single pixels when b - lo < PT). Same tiles, same bytes, whatever the order."""
    T = toff.size
    ys = 0
    if T % 3 == 0 and (xstep == C or xstep == 2 * C) and _rows3_types(xf, wf):
        ys = toff[3] if T > 3 else 1
        for t in range(T):
            if toff[t] != (t // 3) * ys + (t % 3) * C:
                ys = 0
    ox = a
    while ox + PT <= b:
        _q_blocks(xf, xrow, xstep, toff, T, ys, wf, C, be, mult, shift, nvec, zp_out, qmin, qmax, of, orow, ox, PT,
                  False, prm)
        ox += PT
    if ox < b:  # the generic blocks' last tile moved back, or single pixels if fewer than PT since lo
        _q_blocks(xf, xrow, xstep, toff, T, ys, wf, C, be, mult, shift, nvec, zp_out, qmin, qmax, of, orow, ox, b - ox,
                  b - lo < PT, prm)


@njit(cache=True, inline="always")
def _q_blocks(xf, xrow, xstep, toff, T, ys, wf, C, be, mult, shift, nvec, zp_out, qmin, qmax, of, orow, ox, r,
              single, prm):
    """Pixels [ox, ox + r) (r <= PT) of every channel piece: blocks of 16, one straddling nvec as two pieces (each
    tile rounds one way). Whole half-up blocks with rows3 windows (ys != 0) run a rows3 tile of r pixels; the others
    a generic tile of PT pixels ending at ox + r (moved back over computed pixels) or, if single, r single pixels."""
    c0 = 0
    while c0 < C:
        nch = min(VL, C - c0)
        if c0 < nvec < c0 + nch:
            nch = nvec - c0
        if c0 < nvec and nch == VL and ys != 0:
            _rows3_tile(xf, xrow + ox * xstep + c0, xstep, C, ys, T // 3, wf, c0, of, orow + ox * C + c0, r, prm,
                        qmin, qmax)
        elif single:
            for g in range(ox, ox + r):
                _int_tile(False, xf, xrow + g * xstep + c0, xstep, toff, T, wf, C, be, c0, mult, shift, nvec, zp_out,
                          qmin, qmax, of, orow + g * C + c0, nch, prm)
        else:
            g = ox + r - PT
            _int_tile(True, xf, xrow + g * xstep + c0, xstep, toff, T, wf, C, be, c0, mult, shift, nvec, zp_out,
                      qmin, qmax, of, orow + g * C + c0, nch, prm)
        c0 += nch


@njit(cache=True, inline="always")
def _rows3_tile(xf, xoff, xstep, C, ys, nrow, wf, c0, of, ooff, r, prm, qmin, qmax):
    """The rows3 tile of r (1 to PT) pixels for stride xstep / C (1 or 2): a row's last 1-3 pixels by a tile of their
    size (a moved-back tile had cost MobileNetV2's 6 x 6 and 3 x 3 layers 1.2-1.6x XNNPACK's time)."""
    if xstep == C:
        if r == PT:
            dw_rows3_s1(xf, xoff, C, ys, nrow, wf, c0, of, ooff, prm, qmin, qmax)
        elif r == 1:
            dw_rows3_s1_1(xf, xoff, C, ys, nrow, wf, c0, of, ooff, prm, qmin, qmax)
        elif r == 2:
            dw_rows3_s1_2(xf, xoff, C, ys, nrow, wf, c0, of, ooff, prm, qmin, qmax)
        else:
            dw_rows3_s1_3(xf, xoff, C, ys, nrow, wf, c0, of, ooff, prm, qmin, qmax)
    elif r == PT:
        dw_rows3_s2(xf, xoff, C, ys, nrow, wf, c0, of, ooff, prm, qmin, qmax)
    elif r == 1:
        dw_rows3_s2_1(xf, xoff, C, ys, nrow, wf, c0, of, ooff, prm, qmin, qmax)
    elif r == 2:
        dw_rows3_s2_2(xf, xoff, C, ys, nrow, wf, c0, of, ooff, prm, qmin, qmax)
    else:
        dw_rows3_s2_3(xf, xoff, C, ys, nrow, wf, c0, of, ooff, prm, qmin, qmax)


@njit(cache=True, inline="always")
def _q_rows(xp, w, out, be, geo, toff, mult, shift, zp_out, qmin, qmax, nvec, prm):
    """The output rows of dwconv_q_simd over xp, with be and prm filled (_q_params)."""
    N, HP, WP, C = xp.shape
    OH, OW = out.shape[1], out.shape[2]
    sh, sw = geo[0], geo[1]
    xf = xp.reshape(xp.size)
    wf = w.reshape(w.size)
    of = out.reshape(out.size)
    z = OW - OW  # 0 as a run-time int64: a literal 0 argument would compile another _q_pixels
    for n in range(N):
        for oy in range(OH):
            _q_pixels(xf, ((n * HP + oy * sh) * WP) * C, sw * C, toff, wf, C, be, mult, shift, nvec, zp_out, qmin,
                      qmax, of, ((n * OH + oy) * OW) * C, z, OW, z, prm)


@njit(cache=True, nogil=True, _nrt=False)
def dwconv_q_simd(xp, w, bias, wsum, out, be, geo, toff, zp_in, mult, shift, zp_out, qmin, qmax, nvec, prm, fill):
    """Integer depthwise over a padded input (dwconv.dw3x3_q), any window, requantized in the tile (RQ_NEON: half up
    below nvec, else half away); be [C], prm [max(ceil(nvec / 16), 1), PRM_BLOCK] int32: the blocks' output-stage
    parameters below nvec (shifts in [-21, 31], prepare checks), filled here unless fill = 0 (schedule_q did)."""
    if fill:
        _q_params(bias, wsum, zp_in, mult, shift, zp_out, nvec, be, prm)
    _q_rows(xp, w, out, be, geo, toff, mult, shift, zp_out, qmin, qmax, nvec, prm)


@njit(cache=True, inline="always")
def last_block(c0, C):
    """(first channel, channels) of the float tiles' block at c0: with more than VL channels the last block is moved
    back to end at C (whole vectors, no masked tail; the channels it shares with the block before are computed again
    by the same operations and stored again with the same bytes)."""
    if C > VL and c0 + VL > C:
        return C - VL, VL
    return c0, min(VL, C - c0)


@njit(cache=True, nogil=True)
def f32_pixels(xf, xrow, xstep, toff, wf, ws, C, bias, of, orow, a, b, lim):
    """Float32 output pixels ox in [a, b) of one output row whose windows start at xf[xrow + ox * xstep]: tiles of PT
    pixels through every channel block (pixels outer, as _q_pixels), then the last 1-3 by a tile of their size (every
    pixel computed once; the same operations in the same order whatever the tile); tap t's weights at t * ws, or at
    ws[t] when ws is an array (dwconv_direct's tables)."""
    T = toff.size
    ox = a
    while ox + PT <= b:
        for c in range(0, C, VL):
            c0, nch = last_block(c, C)
            dw_f32_tile4(xf, xrow + ox * xstep + c0, xstep, toff, T, wf, ws, bias, c0, of, orow + ox * C + c0, C,
                         lim[0], lim[1], nch)
        ox += PT
    r = b - ox
    for c in range(0, C, VL):
        c0, nch = last_block(c, C)
        xoff, ooff = xrow + ox * xstep + c0, orow + ox * C + c0
        if r == 1:
            dw_f32_tile1(xf, xoff, xstep, toff, T, wf, ws, bias, c0, of, ooff, C, lim[0], lim[1], nch)
        elif r == 2:
            dw_f32_tile2(xf, xoff, xstep, toff, T, wf, ws, bias, c0, of, ooff, C, lim[0], lim[1], nch)
        elif r == 3:
            dw_f32_tile3(xf, xoff, xstep, toff, T, wf, ws, bias, c0, of, ooff, C, lim[0], lim[1], nch)


@njit(cache=True, inline="always")
def _interior(H, W, KH, KW, OH, OW, WP, geo):
    """Where a banded driver reads the input in place: output rows [y0, y1), pixels [xa, xe) (at least PT) whose
    windows lie inside the image; the others read padded columns [0, c_lo), [c_hi, WP): the edge pixels' windows
    (y1 = y0, nothing in place, for a depth multiplier other than 1 or fewer than PT such pixels). (The interior
    had started at pixel PT or later and ended on a whole tile: the edges' scratch columns, copied for every band,
    had cost stride-2 layers without left padding 9 + 9 columns a row where 0 + 3 are needed.)"""
    sh, sw, dh, dw, pt, pl, dm = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6]
    y0 = (pt + sh - 1) // sh
    y1 = max(min((H - 1 + pt - (KH - 1) * dh) // sh + 1, OH), y0)
    xa = min((pl + sw - 1) // sw, OW)
    xe = max(min((W - 1 + pl - (KW - 1) * dw) // sw + 1, OW), xa)
    if dm != 1 or xe - xa < PT:
        y1 = y0
    c_lo = (xa - 1) * sw + (KW - 1) * dw + 1 if xa > 0 else 0
    c_hi = xe * sw if xe < OW else WP
    return y0, y1, xa, xe, c_lo, c_hi


@njit(cache=True, inline="always")
def _banded_geometry(x, s, w, out, geo):
    """(N, OH, OW, C, H, W, KH, WP) of out, x, w and the band scratch s, then _interior's six values."""
    N, OH, OW, C = out.shape
    H, W = x.shape[1], x.shape[2]
    KH, KW = w.shape[0], w.shape[1]
    WP = s.shape[2]
    y0, y1, xa, xe, c_lo, c_hi = _interior(H, W, KH, KW, OH, OW, WP, geo)
    return N, OH, OW, C, H, W, KH, WP, y0, y1, xa, xe, c_lo, c_hi


@njit(cache=True, inline="always")
def _flat(a):
    return a.reshape(a.size)


@njit(cache=True, inline="always")
def _pad_for(xb, sb, geo, KH, n, oy0, end, y0, y1, c_lo, c_hi):
    """(nb, inner): the band scratch of nb = min(band, end - oy0) output rows from oy0 of image n built, only its edge
    columns [0, c_lo), [c_hi, WP) when inner (rows within [y0, y1): the interior is read in place, _interior)."""
    nb = min(geo[9], end - oy0)
    inner = oy0 >= y0 and oy0 + nb <= y1
    if inner:
        pad_band_edges(xb, sb, geo, KH, n, oy0, nb, c_lo, c_hi)
    else:
        pad_band(xb, sb, geo, KH, n, oy0, nb)
    return nb, inner


@njit(cache=True, inline="always")
def _row_offsets(n, oy, r, geo, H, W, WP, OH, OW, C):
    """(band scratch, output, input) element offsets of output row oy of image n, row r of its band (the input
    offset: where the row's windows start in x, for the pixels read in place)."""
    sh, pt, pl = geo[0], geo[4], geo[5]
    return r * sh * WP * C, ((n * OH + oy) * OW) * C, ((n * H + oy * sh - pt) * W - pl) * C


@njit(cache=True, nogil=True, _nrt=False)
def dwconv_f32_simd_banded(x, xb, sb, s, w, bias, out, geo, toff, toff_x, lim):
    """dwconv_f32_simd one band of output rows at a time over a band scratch (see dwconv.dwconv_f32_banded), the
    interior of the image read where it is (as dwconv_q_simd_banded: edge columns padded, toff_x the taps' offsets
    in x). Every output is computed by the same tile arithmetic either way."""
    N, OH, OW, C, H, W, KH, WP, y0, y1, xa, xe, c_lo, c_hi = _banded_geometry(x, s, w, out, geo)
    xf, sf, wf, of = _flat(x), _flat(s), _flat(w), _flat(out)
    xstep = geo[1] * C
    z = OW - OW  # 0 as a run-time int64
    for n in range(N):
        for oy0 in range(0, OH, geo[9]):
            nb, inner = _pad_for(xb, sb, geo, KH, n, oy0, OH, y0, y1, c_lo, c_hi)
            for r in range(nb):
                srow, orow, xrow = _row_offsets(n, oy0 + r, r, geo, H, W, WP, OH, OW, C)
                if inner:
                    f32_pixels(sf, srow, xstep, toff, wf, C, C, bias, of, orow, z, xa, lim)
                    f32_pixels(xf, xrow, xstep, toff_x, wf, C, C, bias, of, orow, xa, xe, lim)
                    f32_pixels(sf, srow, xstep, toff, wf, C, C, bias, of, orow, xe, OW, lim)
                else:
                    f32_pixels(sf, srow, xstep, toff, wf, C, C, bias, of, orow, z, OW, lim)


@njit(cache=True, nogil=True, _nrt=False)
def dwconv_q_simd_banded(x, xb, sb, s, w, bias, wsum, out, be, geo, toff, toff_x, zp_in, mult, shift, zp_out, qmin,
                         qmax, nvec, prm, fill, n0, n1, r0, r1):
    """dwconv_q_simd one band of output rows at a time over a band scratch (see dwconv.dwconv_f32_banded), the
    interior read in place: a band whose windows all lie in the image rows gets only its edge columns padded
    (pad_band_edges: pixels left of xa and from xe on, in tiles, the last one moved back), its pixels [xa, xe) read x
    (toff_x: the taps' offsets in x; depth multiplier 1 only); other bands read the padded band. The same tile
    arithmetic either way. Images [n0, n1), output rows [r0, r1) (schedule_q: all; a parallel chunk its range, its
    own scratch, fill = 0). One function, not a wrapper of a row driver (which LLVM would re-optimise: ~1.5 s)."""
    if fill:
        _q_params(bias, wsum, zp_in, mult, shift, zp_out, nvec, be, prm)
    N, OH, OW, C, H, W, KH, WP, y0, y1, xa, xe, c_lo, c_hi = _banded_geometry(x, s, w, out, geo)
    xf, sf, wf, of = _flat(x), _flat(s), _flat(w), _flat(out)
    xstep = geo[1] * C
    z = OW - OW  # 0 as a run-time int64: a literal 0 argument would compile another _q_pixels
    for n in range(n0, n1):
        for oy0 in range(r0, r1, geo[9]):
            nb, inner = _pad_for(xb, sb, geo, KH, n, oy0, r1, y0, y1, c_lo, c_hi)
            for r in range(nb):
                srow, orow, xrow = _row_offsets(n, oy0 + r, r, geo, H, W, WP, OH, OW, C)
                if inner:
                    _q_pixels(sf, srow, xstep, toff, wf, C, be, mult, shift, nvec, zp_out, qmin, qmax, of, orow, z,
                              xa, z, prm)
                    _q_pixels(xf, xrow, xstep, toff_x, wf, C, be, mult, shift, nvec, zp_out, qmin, qmax, of, orow,
                              xa, xe, xa, prm)
                    _q_pixels(sf, srow, xstep, toff, wf, C, be, mult, shift, nvec, zp_out, qmin, qmax, of, orow, xe,
                              OW, xe, prm)
                else:
                    _q_pixels(sf, srow, xstep, toff, wf, C, be, mult, shift, nvec, zp_out, qmin, qmax, of, orow, z,
                              OW, z, prm)


# --- multi-threaded float32 drivers (num_threads > 1, see kernels/base/threads.py) ------------------------------------
# Appended apart from the single-thread code above, which they only call: each chunk of a fixed list (ranges of
# images x ranges of output rows), taken in turn by the workers, runs the serial driver on its rows with the
# worker's own band scratch, so every output is computed by the same code as with one thread.

from lite_numba.kernels.base.threads import PARALLEL  # noqa: E402
from lite_numba.kernels.base.threads import call_at as _call_at  # noqa: E402
from lite_numba.kernels.base.threads import run_chunks as _run_chunks  # noqa: E402


@njit(cache=True, inline="always")
def _call_band(args, s, ob):
    addr, w, bias, geo, toff, lim = args
    _call_at(addr, (s, w, bias, ob, geo, toff, lim))


@njit(cache=True, inline="always")
def _f32_bands_chunk(args, wk, j):
    addr, xb, sb, s, w, bias, out, geo, toff, lim, ch, T = args
    R = sb.shape[0] // T
    for n in range(ch[4 * j], ch[4 * j + 1]):
        each_band(xb, sb[wk * R:(wk + 1) * R], s[wk:wk + 1], w, out, geo, n, ch[4 * j + 2], ch[4 * j + 3],
                  _call_band, (addr, w, bias, geo, toff, lim))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def dwconv_f32_simd_banded_par(addr, xb, sb, s, w, bias, out, geo, toff, lim, ch, cnt, T):
    """dwconv_f32_simd_banded over the chunks ch = [n0, n1, y0, y1] * n, taken in turn by T workers: worker k
    pads its bands into s[k] (sb: its bytes, T * R rows) and runs dwconv_f32_simd (at addr) on them."""
    _run_chunks(T, cnt, ch.size // 4, _f32_bands_chunk, (addr, xb, sb, s, w, bias, out, geo, toff, lim, ch, T))


@njit(cache=True, inline="always")
def _q_bands_chunk(args, wk, j):
    addr, x, xb, sb, s, w, bias, wsum, out, be, geo, toff, toff_x, zp_in, mult, shift, zp_out, qmin, qmax, nvec, prm, \
        ch, T = args
    R = sb.shape[0] // T
    _call_at(addr, (x, xb, sb[wk * R:(wk + 1) * R], s[wk:wk + 1], w, bias, wsum, out, be, geo, toff, toff_x, zp_in,
                    mult, shift, zp_out, qmin, qmax, nvec, prm, T - T, ch[4 * j], ch[4 * j + 1], ch[4 * j + 2],
                    ch[4 * j + 3]))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def dwconv_q_simd_banded_par(addr, x, xb, sb, s, w, bias, wsum, out, be, geo, toff, toff_x, zp_in, mult, shift,
                             zp_out, qmin, qmax, nvec, prm, ch, cnt, T):
    """dwconv_q_simd_banded (with be and prm computed at prepare) over the chunks ch = [n0, n1, y0, y1] * n, taken
    in turn by T workers: worker k runs dwconv_q_simd_banded (at addr, fill = 0 as a run-time int64, the type
    serial_address compiled it for) on its chunks with its own band scratch s[k] (sb: its bytes, T * R rows). Every
    output is computed by the serial code."""
    # (one flat tuple: a parallel region takes no tuple nested in another)
    _run_chunks(T, cnt, ch.size // 4, _q_bands_chunk, (addr, x, xb, sb, s, w, bias, wsum, out, be, geo, toff, toff_x,
                                                       zp_in, mult, shift, zp_out, qmin, qmax, nvec, prm, ch, T))
