"""The activation side of the int8 GEMM / convolution kernels (simd_int8, simd_int8_narrow): rows of the im2col
matrix packed into the block buffer with their bytes flipped to uint8 (pack_rows), the padded, flipped copy of the
input that the in-place K x K convolution reads (pad_flipped), and the per-row terms of uint8 weights (the byte sums
of a row or window, row_term). The buffers are uint8, or uint16 for the vpmaddwd tiles (the flipped bytes
zero-extended, so the tiles broadcast depth pairs as they lie: simd_int8_narrow); offsets count elements."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.llvm_ir import I8 as _i8
from lite_numba.kernels.base.llvm_ir import byte_ptr, load
from lite_numba.kernels.base.llvm_ir import data_ptr as _data_ptr
from lite_numba.kernels.base.llvm_ir import splat as _splat
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic


@intrinsic
def _copy16(typingctx, dst, d, src, s, flip):
    """dst[d:d + 16] = src[s:s + 16] ^ flip (src bytes of a uint8/int8 array, one unaligned 16-byte vector; dst
    elements of a uint8 array, or of a uint16 one, which receives the bytes zero-extended: plain IR that any target
    lowers)."""
    sig = types.void(dst, types.intp, src, types.intp, types.uint8)

    def codegen(context, builder, sig, args):
        dst_, d_, src_, s_, flip_ = args
        v16i8 = ir.VectorType(_i8, 16)
        pd = byte_ptr(builder, _data_ptr(context, builder, sig.args[0], dst_), d_)
        ps = byte_ptr(builder, _data_ptr(context, builder, sig.args[2], src_), s_)
        v = builder.xor(load(builder, ps, v16i8), _splat(builder, flip_, v16i8))
        if sig.args[0].dtype.bitwidth == 16:
            v = builder.zext(v, ir.VectorType(ir.IntType(16), 16))
        builder.store(v, builder.bitcast(pd, v.type.as_pointer()), align=1)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, inline="always")
def copy_flipped(af, d, xf, s, n, fl):
    """af[d:d + n] = xf[s:s + n] ^ fl as bytes (unsigned indices, so that LLVM vectorizes the loop)."""
    for i in range(n):
        af[np.uint64(d + i)] = np.uint8(xf[np.uint64(s + i)]) ^ fl


@njit(cache=True, inline="always")
def copy_flipped_long(af, d, xf, s, n, fl):
    """copy_flipped in 16-byte vectors, then bytes: for pad_flipped's image rows, where LLVM left copy_flipped's loop
    scalar (~18 % of a 32x32x16 -> 16 3x3 int8 layer's samples). (Used for every copy it had cost the AVX2 path's
    pointwise layers, whose short rows of 8 or 16 bytes LLVM does vectorize: 1.5-2x on MobileNetV2 0.35's.)"""
    i = 0
    while i + 16 <= n:
        _copy16(af, d + i, xf, s + i, fl)
        i += 16
    copy_flipped(af, d + i, xf, s + i, n - i, fl)


@njit(cache=True, inline="always")
def fill(af, d, n, v):
    for i in range(n):
        af[np.uint64(d + i)] = v


@njit(cache=True, inline="always")
def pack_rows(x, abuf, m0, rows, geo, flip, zp_in):
    """abuf[r, :K] = row m0 + r of x's im2col matrix, bytes flipped by `flip`; taps outside the image hold zp_in.
    geo[10] != 0 marks a pointwise layer (1x1, stride 1, no padding), whose im2col rows are the rows of x.

    A row whose taps are all inside the image (dilation 1 along x) is KH runs of KW * CI contiguous bytes of x,
    copied in 16-byte vectors that may write up to 15 bytes past a run (the next runs and rows of the block are
    written after it; bytes K.. of a row meet zero weights) and read up to 15 bytes past it, when both arrays have
    room for that; other rows go tap by tap."""
    N, H, W, CI = x.shape
    sh, sw, dh, dw, pt, pl, KH, KW = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6], geo[7]
    OH, OW = geo[8], geo[9]
    Kp = abuf.shape[1]
    fl = np.uint8(flip)
    pad = np.uint8((zp_in + flip) & 0xFF)
    xf = x.reshape(N * H * W * CI)
    af = abuf.reshape(abuf.size)
    if geo[10] != 0:
        if CI == Kp:
            copy_flipped(af, 0, xf, m0 * CI, rows * CI, fl)
        else:
            for r in range(rows):
                copy_flipped(af, r * Kp, xf, (m0 + r) * CI, CI, fl)
        return
    ox = m0 % OW
    t = m0 // OW
    oy = t % OH
    n = t // OH
    KWC = KW * CI
    ystep = dh * W * CI
    xlast = xf.size - KWC - 16  # last run start with 16 readable bytes past the run
    alast = af.size - (KH - 1) * KWC - KWC - 16  # last row start with 16 writable bytes past its last run
    for r in range(rows):
        iy0 = oy * sh - pt
        ix0 = ox * sw - pl
        d0 = r * Kp
        row_inside = dw == 1 and ix0 >= 0 and ix0 + KW <= W
        iyl = iy0 + (KH - 1) * dh
        s0 = ((n * H + iy0) * W + ix0) * CI
        if row_inside and iy0 >= 0 and iyl < H and d0 <= alast and s0 + (KH - 1) * ystep <= xlast:
            for _ky in range(KH):
                i = 0
                while i < KWC:
                    _copy16(af, d0 + i, xf, s0 + i, fl)
                    i += 16
                d0 += KWC
                s0 += ystep
        else:
            for ky in range(KH):
                iy = iy0 + ky * dh
                k = d0 + ky * KWC
                if iy < 0 or iy >= H:
                    fill(af, k, KWC, pad)
                    continue
                base = (n * H + iy) * W
                if row_inside:
                    copy_flipped(af, k, xf, (base + ix0) * CI, KWC, fl)
                    continue
                for kx in range(KW):
                    ix = ix0 + kx * dw
                    if 0 <= ix < W:
                        copy_flipped(af, k + kx * CI, xf, (base + ix) * CI, CI, fl)
                    else:
                        fill(af, k + kx * CI, CI, pad)
        ox += 1
        if ox == OW:
            ox = 0
            oy += 1
            if oy == OH:
                oy = 0
                n += 1


@njit(cache=True, inline="always")
def row_term(d, s):
    """int32(d * s) wrapped like the int32 accumulator."""
    return np.int32(((np.int64(d) * np.int64(s) + (np.int64(1) << 31)) & np.int64(0xFFFFFFFF)) - (np.int64(1) << 31))


@njit(cache=True, inline="always")
def byte_sum(xf, s, n):
    """sum of the bytes xf[s:s + n] (uint8 array), int64."""
    t = np.int64(0)
    for i in range(n):
        t += np.int64(xf[np.uint64(s + i)])
    return t


@njit(cache=True, inline="always")
def row_weight(geo):
    """geo[11]: 128 - zp_w for uint8 weights of zero point zp_w (packed as w - 128), 0 for int8 ones (older
    11-element geometries included)."""
    return geo[11] if geo.size > 11 else 0


@njit(cache=True, inline="always")
def pad_flipped(xpad, xf, N, H, W, CI, HP, WP, pt, pl, pad, fl):
    """xpad = the input x (flat xf, [N, H, W, CI]) padded to [N, HP, WP, CI] with the byte `pad` and every byte
    XOR fl (the int8 -> uint8 flip), the rest of xpad (the tiles' overrun) padded too: the in-place K x K drivers'
    input."""
    used = N * HP * WP * CI
    for n in range(N):
        for yp in range(HP):
            iy = yp - pt
            d0 = ((n * HP + yp) * WP) * CI
            if iy < 0 or iy >= H:
                fill(xpad, d0, WP * CI, pad)
                continue
            a = min(pl, WP)  # padded columns [a, b) are the image's columns a - pl .. b - pl - 1
            b = max(min(WP, pl + W), a)
            fill(xpad, d0, a * CI, pad)
            copy_flipped_long(xpad, d0 + a * CI, xf, ((n * H + iy) * W + a - pl) * CI, (b - a) * CI, fl)
            fill(xpad, d0 + b * CI, (WP - b) * CI, pad)
    fill(xpad, used, xpad.size - used, pad)


@njit(cache=True, inline="always")
def window_row_terms(xpad, rsf, npb, arow, OW, KH, KW, CI, lda, rstride, rstride2, dw, d):
    """rsf[npb + ox] = the uint8-weight per-row term of output pixel ox of one output row (arow: the row's first
    window in xpad), from the byte sum of its window."""
    for ox in range(OW):
        s = np.int64(0)
        for ky in range(KH):
            b0 = arow + ox * lda + ky * rstride
            if dw == 1:
                s += byte_sum(xpad, b0, KW * CI)
            else:
                for kx in range(KW):
                    s += byte_sum(xpad, b0 + kx * rstride2, CI)
        rsf[npb + ox] = row_term(d, s)
