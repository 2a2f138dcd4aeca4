"""int8 GEMM and convolution (CONV_2D with one group, FULLY_CONNECTED) on packed weights, bit-exact with the official
x86 build's ruy path.

Design. Every such layer is C[m, n] = sum_k A[m, k] * W[n, k] over the rows m of an im2col matrix A (one row per
output pixel, k = (ky, kx, ci) in the filter's OHWI order; for a 1x1 stride-1 conv or a FULLY_CONNECTED the input
itself), followed by ruy's requantization of C + bias per output channel.

- Activations are packed, a block of `MB` rows at a time, into a small uint8 buffer `abuf [MB, Kp]` (Kp = K rounded
  up to 4, so a row is a whole number of 4-byte groups; the tail bytes are left as they are since the matching
  weights are zero). int8 activations are flipped to unsigned (x ^ 0x80 = x + 128), uint8 ones copied; taps outside
  the image take the input zero point, which contributes nothing once the zero point is subtracted.
- Weights are packed once in prepare, with the sums that fold every constant term into one per-channel int32 offset:
  sum_k (x - zp_in) * w = sum_k xu * w - (128 + zp_in) * sum_k w for xu = x + 128 (int32 arithmetic wraps, so
  computing it modulo 2^32 gives the official wrapped accumulator exactly, in any summation order).
- VNNI path (AVX-512 VNNI, kernels/isa.py level "avx512vnni"): weights as panels of NR = 32 output channels (16 for a
  last odd panel), each [Kp / 4, NR, 4] bytes, so that one `vpdpbusd` multiplies a 4-byte group of one activation
  row (broadcast) with 16 channels x 4 bytes and adds to 16 int32 lanes. The micro-kernel keeps an MR x NR tile of
  C in 2 * MR zmm registers (MR = 8; a 1-row variant for a few leftover rows and for matrix-vector products), then
  requantizes the lanes itself (ruy's output stage in int64 lanes, see _requantize_vector) and stores bytes. Rows
  past the end of a block are computed on stale buffer rows and not stored.
- Portable path: the same packing of activations, weights as [Np, Kp] rows, a plain Numba 4 x 4 tile of int32 dot
  products (LLVM keeps the lanes 32-bit because every update is wrapped in np.int32) into an int32 buffer
  `cbuf [MB, Np]`, and a Numba requantization loop (conv_loops._mbqm_half_up, the RQ_NEON mode for every channel).

Both output stages compute out = clamp(rq(int32(C + offset + bias)) + zp_out) with rq the double rounding half up of
ruy's x86 kernels, which the official runtime applies to every channel of a one-group int8 convolution and of an
int8 FULLY_CONNECTED.

prepare chooses the path from kernels/isa.py; the choice only changes which function is scheduled.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .conv_loops import _mbqm_half_up
from .llvm_ir import I8 as _i8
from .llvm_ir import I32 as _i32
from .llvm_ir import I64 as _i64
from .llvm_ir import V16I as _v16i
from .llvm_ir import data_ptr as _data_ptr
from .llvm_ir import i64 as _const
from .llvm_ir import splat as _splat

MR = 8  # rows of a VNNI tile
NR = 32  # output channels of a packed weight panel (two zmm registers of int32)
PR = 4  # rows and columns of a portable tile
ABUF_BYTES = 48 * 1024  # activation rows packed per block (kept in L1/L2 while every weight panel passes over them)



# --- IR helpers -------------------------------------------------------------------------------------------------------


def _byte_ptr(builder, base, offset):
    """i8* base + offset (offset an i64 in elements of a 1-byte array)."""
    return builder.gep(base, [offset], inbounds=True)


def _load(builder, ptr, ty):
    """Unaligned load of `ty` from a byte or int32 pointer."""
    return builder.load(builder.bitcast(ptr, ty.as_pointer()), align=1)


def _splat16(builder, x):
    return _splat(builder, x, _v16i)


def _requantize_vector(builder, acc, prm_ptr, c, Np, zp_out, qmin, qmax):
    """ruy's x86 output stage on 16 int32 lanes (channels c..c+15): with the parameter rows of `prm` (int32 [4, Np]:
    offset + bias, multiplier, left shift, right shift), x = (acc + offset) << left (int32, wrapping), then
    h = (x * multiplier + 2^30) >> 31 and (h + (1 << right >> 1)) >> right in int64, + zp_out, clamped.
    The same arithmetic as conv_loops._mbqm_half_up; returns <16 x i32>."""
    v16i64 = ir.VectorType(_i64, 16)

    def row(k):
        p = builder.gep(prm_ptr, [builder.add(builder.mul(Np, _const(k)), c)], inbounds=True)
        return builder.load(builder.bitcast(p, _v16i.as_pointer()), align=4)

    x = builder.shl(builder.add(acc, row(0)), row(2))
    h = builder.mul(builder.sext(x, v16i64), builder.sext(row(1), v16i64))
    h = builder.ashr(builder.add(h, ir.Constant(v16i64, [1 << 30] * 16)), ir.Constant(v16i64, [31] * 16))
    right = builder.sext(row(3), v16i64)
    one = ir.Constant(v16i64, [1] * 16)
    nudge = builder.ashr(builder.shl(one, right), one)
    y = builder.trunc(builder.ashr(builder.add(h, nudge), right), _v16i)
    y = builder.add(y, _splat16(builder, zp_out))
    lo, hi = _splat16(builder, qmin), _splat16(builder, qmax)
    y = builder.select(builder.icmp_signed("<", y, lo), lo, y)
    return builder.select(builder.icmp_signed(">", y, hi), hi, y)


def _make_vnni_tile(mr: int, nv: int):
    """An intrinsic computing an [mr, 16 * nv] tile of the quantized output with vpdpbusd:
    C = A[mr, 4 * kg] (uint8) . panel (int8, [kg, 16 * nv, 4]), requantized by _requantize_vector.

    tile(a, a_off, lda, kg, b, b_off, prm, c0, Np, out, o_off, ldo, nrows, ncols, zp_out, qmin, qmax): row r of A
    starts at byte a_off + r * lda of the uint8 array a, the panel at byte b_off of the int8 array b; prm holds the
    output-stage parameters of channels c0.. (int32 [4, Np] flat); rows r < nrows and channels j < ncols of the
    result are stored as bytes at out[o_off + r * ldo + j].
    """

    @intrinsic
    def tile(typingctx, a, a_off, lda, kg, b, b_off, prm, c0, Np, out, o_off, ldo, nrows, ncols, zp_out, qmin,
             qmax):
        ip = types.intp
        sig = types.void(a, ip, ip, ip, b, ip, prm, ip, ip, out, ip, ip, ip, ip, types.int32, types.int32,
                         types.int32)

        def codegen(context, builder, sig, args):
            (a_, a_off_, lda_, kg_, b_, b_off_, prm_, c0_, np_, out_, o_off_, ldo_, nrows_, ncols_, zp_, qmin_,
             qmax_) = args
            pa = _data_ptr(context, builder, sig.args[0], a_)
            pb = _data_ptr(context, builder, sig.args[4], b_)
            pp = _data_ptr(context, builder, sig.args[6], prm_)
            po = _data_ptr(context, builder, sig.args[9], out_)
            dp = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_v16i, [_v16i, _v16i, _v16i]),
                                                "llvm.x86.avx512.vpdpbusd.512")
            accs = [[cgutils.alloca_once(builder, _v16i) for _ in range(nv)] for _ in range(mr)]
            for row in accs:
                for acc in row:
                    builder.store(ir.Constant(_v16i, None), acc)
            arow = [_byte_ptr(builder, pa, builder.add(a_off_, builder.mul(lda_, _const(r)))) for r in range(mr)]
            pb0 = _byte_ptr(builder, pb, b_off_)
            with cgutils.for_range(builder, kg_) as loop:
                g = loop.index
                boff = builder.mul(g, _const(64 * nv))
                bv = [_load(builder, _byte_ptr(builder, pb0, builder.add(boff, _const(64 * v))), _v16i)
                      for v in range(nv)]
                aoff = builder.mul(g, _const(4))
                for r in range(mr):
                    av = _splat16(builder, _load(builder, _byte_ptr(builder, arow[r], aoff), _i32))
                    for v in range(nv):
                        builder.store(builder.call(dp, [builder.load(accs[r][v]), av, bv[v]]), accs[r][v])
            v16i8 = ir.VectorType(_i8, 16)
            for v in range(nv):
                cv = builder.add(c0_, _const(16 * v))
                count = builder.sub(ncols_, _const(16 * v))  # valid channels of this vector (may be <= 0 or > 16)
                for r in range(mr):
                    with builder.if_then(builder.and_(builder.icmp_signed("<", _const(r), nrows_),
                                                      builder.icmp_signed(">", count, _const(0)))):
                        y = builder.trunc(_requantize_vector(builder, builder.load(accs[r][v]), pp, cv, np_, zp_,
                                                             qmin_, qmax_), v16i8)
                        dst = builder.gep(po, [builder.add(builder.add(o_off_, builder.mul(ldo_, _const(r))),
                                                           _const(16 * v))], inbounds=True)
                        with builder.if_else(builder.icmp_signed(">=", count, _const(16))) as (whole, part):
                            with whole:
                                builder.store(y, builder.bitcast(dst, v16i8.as_pointer()), align=1)
                            with part:
                                with cgutils.for_range(builder, count) as lane:
                                    e = builder.extract_element(y, builder.trunc(lane.index, _i32))
                                    builder.store(e, builder.gep(dst, [lane.index], inbounds=True))
            return context.get_dummy_value()

        return sig, codegen

    return tile


_tile_mr_2 = _make_vnni_tile(MR, 2)
_tile_mr_1 = _make_vnni_tile(MR, 1)
_tile_1_2 = _make_vnni_tile(1, 2)
_tile_1_1 = _make_vnni_tile(1, 1)


# --- weight packing (prepare time, numpy) -----------------------------------------------------------------------------


def padded_sizes(K: int, N: int) -> tuple[int, int]:
    """(Kp, Np): depth rounded up to 4 bytes, output channels to 16."""
    return -(-K // 4) * 4, -(-N // 16) * 16


def pack_weights_vnni(w: np.ndarray) -> np.ndarray:
    """w [N, K] int8 -> flat int8 panels: panel j0 (NR channels, 16 for a last odd panel) at byte j0 * Kp holds
    w[j0 + j, 4 * g + i] at (g * width + j) * 4 + i; zero beyond N and K."""
    N, K = w.shape
    Kp, Np = padded_sizes(K, N)
    wp = np.zeros((Np, Kp), np.int8)
    wp[:N, :K] = w
    out = np.empty(Np * Kp, np.int8)
    for j0 in range(0, Np, NR):
        width = min(NR, Np - j0)
        panel = wp[j0:j0 + width].reshape(width, Kp // 4, 4).transpose(1, 0, 2)
        out[j0 * Kp:(j0 + width) * Kp] = panel.reshape(-1)
    return out


def pack_weights_portable(w: np.ndarray) -> np.ndarray:
    """w [N, K] int8 -> [Np, Kp] zero-padded, flattened."""
    N, K = w.shape
    Kp, Np = padded_sizes(K, N)
    wp = np.zeros((Np, Kp), np.int8)
    wp[:N, :K] = w
    return wp.reshape(-1)


def channel_offsets(w: np.ndarray, flip: int, zp_in: int, Np: int) -> np.ndarray:
    """Per-channel int32 offset -(flip + zp_in) * sum_k w[n, k] (wrapped like the int32 accumulator), padded to Np.

    `flip` is 128 when int8 activations are packed as x + 128, 0 for uint8."""
    s = w.astype(np.int64).sum(axis=1) * -(int(flip) + int(zp_in))
    out = np.zeros(Np, np.int64)
    out[:w.shape[0]] = s
    return ((out + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


def block_rows(Kp: int, P: int, mr: int) -> int:
    """Rows packed per block: a multiple of `mr`, at most ABUF_BYTES of activations, no more than P needs."""
    rows = max(mr, (ABUF_BYTES // Kp) // mr * mr)
    return min(rows, -(-P // mr) * mr)


# --- activation packing and epilogue (shared by both paths) -----------------------------------------------------------


@njit(cache=True, inline="always")
def _copy_flipped(dst, src, flip):
    """dst[i] = src[i] ^ flip as bytes (slices, so that LLVM vectorizes the copy)."""
    for i in range(dst.size):
        dst[i] = np.uint8(src[i]) ^ flip


@njit(cache=True, inline="always")
def _fill(dst, v):
    for i in range(dst.size):
        dst[i] = v


@njit(cache=True, inline="always")
def _pack_rows(x, abuf, m0, rows, geo, flip, zp_in):
    """abuf[r, :K] = row m0 + r of x's im2col matrix, bytes flipped by `flip`; taps outside the image hold zp_in.
    geo[10] != 0 marks a pointwise layer (1x1, stride 1, no padding), whose im2col rows are the rows of x."""
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
            _copy_flipped(af[:rows * CI], xf[m0 * CI:(m0 + rows) * CI], fl)
        else:
            for r in range(rows):
                _copy_flipped(af[r * Kp:r * Kp + CI], xf[(m0 + r) * CI:(m0 + r + 1) * CI], fl)
        return
    ox = m0 % OW
    t = m0 // OW
    oy = t % OH
    n = t // OH
    KWC = KW * CI
    for r in range(rows):
        iy0 = oy * sh - pt
        ix0 = ox * sw - pl
        dst = af[r * Kp:(r + 1) * Kp]
        # with dilation 1 and every column tap inside the image, the KW taps of a filter row are contiguous in x
        row_inside = dw == 1 and ix0 >= 0 and ix0 + KW <= W
        for ky in range(KH):
            iy = iy0 + ky * dh
            k = ky * KWC
            if iy < 0 or iy >= H:
                _fill(dst[k:k + KWC], pad)
                continue
            base = (n * H + iy) * W
            if row_inside:
                _copy_flipped(dst[k:k + KWC], xf[(base + ix0) * CI:(base + ix0 + KW) * CI], fl)
                continue
            for kx in range(KW):
                ix = ix0 + kx * dw
                d = dst[k + kx * CI:k + (kx + 1) * CI]
                if 0 <= ix < W:
                    _copy_flipped(d, xf[(base + ix) * CI:(base + ix + 1) * CI], fl)
                else:
                    _fill(d, pad)
        ox += 1
        if ox == OW:
            ox = 0
            oy += 1
            if oy == OH:
                oy = 0
                n += 1


@njit(cache=True, inline="always")
def _requantize_rows(cbuf, o, m0, rows, offs, bias, mult, shift, zp_out, qmin, qmax):
    """o[m0 + r, c] = clamp(rq(int32(cbuf[r, c] + offs[c] + bias[c])) + zp_out) (ruy's x86 output stage)."""
    CO = o.shape[1]
    for r in range(rows):
        crow = cbuf[r]
        orow = o[m0 + r]
        for c in range(CO):
            v = _mbqm_half_up(np.int32(crow[c] + offs[c] + bias[c]), mult[c], shift[c]) + zp_out
            orow[c] = min(max(v, qmin), qmax)


# --- drivers ----------------------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def qconv_vnni(x, wp, offs, bias, out, geo, flip, zp_in, mult, shift, zp_out, qmin, qmax, abuf, prm):
    """Quantized CONV_2D (one group) / FULLY_CONNECTED on VNNI: x [N, H, W, CI] (int8 or uint8), wp weights packed
    by pack_weights_vnni, offs [Np] channel_offsets, bias [CO] int32, out [N, OH, OW, CO];
    geo = [sh, sw, dh, dw, pad_t, pad_l, KH, KW, OH, OW, pointwise]; abuf [MB, Kp] uint8 and prm [4, Np] int32
    scratch. Shifts must lie in [-62, 31] (prepare checks)."""
    N, OH, OW, CO = out.shape
    P = N * OH * OW
    MB, Kp = abuf.shape
    Np = prm.shape[1]
    kg = Kp // 4
    a = abuf.reshape(MB * Kp)
    o = out.reshape(P * CO)
    for c in range(Np):
        inside = c < CO
        prm[0, c] = np.int32(offs[c] + (bias[c] if inside else 0))
        prm[1, c] = mult[c] if inside else 0
        prm[2, c] = max(shift[c], 0) if inside else 0
        prm[3, c] = max(-shift[c], 0) if inside else 0
    pf = prm.reshape(4 * Np)
    zo, lo, hi = np.int32(zp_out), np.int32(qmin), np.int32(qmax)
    for m0 in range(0, P, MB):
        rows = min(MB, P - m0)
        _pack_rows(x, abuf, m0, rows, geo, flip, zp_in)
        full = rows // MR * MR
        rest = rows - full
        if rest > 3:  # a tile over stale rows is cheaper than several 1-row passes
            full += MR
            rest = 0
        for j0 in range(0, Np, NR):
            boff = j0 * Kp
            ncols = CO - j0
            for i in range(0, full, MR):
                ob = (m0 + i) * CO + j0
                nrows = rows - i
                if Np - j0 >= NR:
                    _tile_mr_2(a, i * Kp, Kp, kg, wp, boff, pf, j0, Np, o, ob, CO, nrows, ncols, zo, lo, hi)
                else:
                    _tile_mr_1(a, i * Kp, Kp, kg, wp, boff, pf, j0, Np, o, ob, CO, nrows, ncols, zo, lo, hi)
            for i in range(full, full + rest):
                ob = (m0 + i) * CO + j0
                if Np - j0 >= NR:
                    _tile_1_2(a, i * Kp, Kp, kg, wp, boff, pf, j0, Np, o, ob, CO, 1, ncols, zo, lo, hi)
                else:
                    _tile_1_1(a, i * Kp, Kp, kg, wp, boff, pf, j0, Np, o, ob, CO, 1, ncols, zo, lo, hi)


@njit(cache=True, inline="always")
def _dot_tile(a, a0, b, b0, Kp, c, c0, Np):
    """c[c0 + r * Np + j] = sum_k a[a0 + r * Kp + k] * b[b0 + j * Kp + k] for a 4 x 4 tile (uint8 x int8, int32)."""
    c00 = c01 = c02 = c03 = np.int32(0)
    c10 = c11 = c12 = c13 = np.int32(0)
    c20 = c21 = c22 = c23 = np.int32(0)
    c30 = c31 = c32 = c33 = np.int32(0)
    a_0 = a[a0:a0 + Kp]
    a_1 = a[a0 + Kp:a0 + 2 * Kp]
    a_2 = a[a0 + 2 * Kp:a0 + 3 * Kp]
    a_3 = a[a0 + 3 * Kp:a0 + 4 * Kp]
    b_0 = b[b0:b0 + Kp]
    b_1 = b[b0 + Kp:b0 + 2 * Kp]
    b_2 = b[b0 + 2 * Kp:b0 + 3 * Kp]
    b_3 = b[b0 + 3 * Kp:b0 + 4 * Kp]
    for k in range(Kp):
        x0 = np.int32(a_0[k])
        x1 = np.int32(a_1[k])
        x2 = np.int32(a_2[k])
        x3 = np.int32(a_3[k])
        y0 = np.int32(b_0[k])
        y1 = np.int32(b_1[k])
        y2 = np.int32(b_2[k])
        y3 = np.int32(b_3[k])
        c00 = np.int32(c00 + x0 * y0)
        c01 = np.int32(c01 + x0 * y1)
        c02 = np.int32(c02 + x0 * y2)
        c03 = np.int32(c03 + x0 * y3)
        c10 = np.int32(c10 + x1 * y0)
        c11 = np.int32(c11 + x1 * y1)
        c12 = np.int32(c12 + x1 * y2)
        c13 = np.int32(c13 + x1 * y3)
        c20 = np.int32(c20 + x2 * y0)
        c21 = np.int32(c21 + x2 * y1)
        c22 = np.int32(c22 + x2 * y2)
        c23 = np.int32(c23 + x2 * y3)
        c30 = np.int32(c30 + x3 * y0)
        c31 = np.int32(c31 + x3 * y1)
        c32 = np.int32(c32 + x3 * y2)
        c33 = np.int32(c33 + x3 * y3)
    c[c0] = c00
    c[c0 + 1] = c01
    c[c0 + 2] = c02
    c[c0 + 3] = c03
    c[c0 + Np] = c10
    c[c0 + Np + 1] = c11
    c[c0 + Np + 2] = c12
    c[c0 + Np + 3] = c13
    c[c0 + 2 * Np] = c20
    c[c0 + 2 * Np + 1] = c21
    c[c0 + 2 * Np + 2] = c22
    c[c0 + 2 * Np + 3] = c23
    c[c0 + 3 * Np] = c30
    c[c0 + 3 * Np + 1] = c31
    c[c0 + 3 * Np + 2] = c32
    c[c0 + 3 * Np + 3] = c33


@njit(cache=True, nogil=True)
def qconv_portable(x, wp, offs, bias, out, geo, flip, zp_in, mult, shift, zp_out, qmin, qmax, abuf, cbuf):
    """qconv_vnni in plain Numba: the same arguments, with wp packed by pack_weights_portable ([Np, Kp])."""
    N, OH, OW, CO = out.shape
    P = N * OH * OW
    MB, Kp = abuf.shape
    Np = cbuf.shape[1]
    o = out.reshape(P, CO)
    a = abuf.reshape(MB * Kp)
    c = cbuf.reshape(MB * Np)
    for m0 in range(0, P, MB):
        rows = min(MB, P - m0)
        _pack_rows(x, abuf, m0, rows, geo, flip, zp_in)
        for j in range(0, Np, PR):
            for i in range(0, rows, PR):
                _dot_tile(a, i * Kp, wp, j * Kp, Kp, c, i * Np + j, Np)
        _requantize_rows(cbuf, o, m0, rows, offs, bias, mult, shift, zp_out, qmin, qmax)


# --- prepare helper ---------------------------------------------------------------------------------------------------


def schedule_qgemm(ctx, x, w: np.ndarray, zp_in: int, bias, out, geo_conv, mult, shift, zp_out: int, qmin: int,
                   qmax: int) -> None:
    """Schedule the int8 GEMM / convolution of x [N, H, W, CI] (a tensor or view) with the constant weights
    w [CO, K] (OHWI flattened, int8) into out [N, OH, OW, CO] (tensor or view).

    geo_conv = [sh, sw, dh, dw, pad_t, pad_l, KH, KW] (FULLY_CONNECTED: x as [B, 1, 1, K], 1x1 geometry); bias an
    int32 [CO] kernel argument; mult/shift int32 [CO]. Uses the VNNI kernels when kernels/isa.py allows them."""
    from .isa import has

    N, OH, OW, CO = out.shape
    K = w.shape[1]
    P = N * OH * OW
    Kp, Np = padded_sizes(K, CO)
    flip = 128 if x.dtype == np.int8 else 0
    # the VNNI output stage shifts int32 lanes left by at most 31 and int64 lanes right by at most 62
    vnni = has("avx512vnni") and -62 <= int(np.min(shift)) and int(np.max(shift)) <= 31
    wp = pack_weights_vnni(w) if vnni else pack_weights_portable(w)
    offs = channel_offsets(w, flip, zp_in, Np)
    MB = block_rows(Kp, P, MR if vnni else PR)
    abuf = ctx.temp((MB, Kp), np.uint8)
    scratch = ctx.temp((4, Np), np.int32) if vnni else ctx.temp((MB, Np), np.int32)
    sh, sw, _, _, pt, pl, KH, KW = geo_conv
    pointwise = KH == 1 and KW == 1 and sh == 1 and sw == 1 and pt == 0 and pl == 0
    geo = np.array(list(geo_conv) + [OH, OW, int(pointwise)], np.int64)
    fn = qconv_vnni if vnni else qconv_portable
    ctx.call(fn, x, ctx.const(wp), ctx.const(offs), bias, out, geo, flip, int(zp_in), np.asarray(mult, np.int32),
             np.asarray(shift, np.int32), int(zp_out), int(qmin), int(qmax), abuf, scratch)
