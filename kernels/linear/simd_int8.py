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
- uint8 weights (TFLite's asymmetric per-tensor scheme, uint8 activations, weight zero point zp_w) are packed as
  w - 128 (int8, exact): sum (x - zp_in)(w - zp_w) = sum x (w - 128) + (128 - zp_w) * sum x - zp_in * sum (w - zp_w),
  the last term in the channel offset, the middle one a per-row (per output pixel) term that the drivers compute
  from the packed row (or the window in place) and the tiles add to every channel of the row (geo[11] =
  128 - zp_w, 0 for int8; see qconv_vnni).
- VNNI path (AVX-512 VNNI, base/isa.py level "avx512vnni"): weights as panels of NR = 32 output channels (16 for a
  last odd panel), each [Kp / 4, NR, 4] bytes, so that one `vpdpbusd` multiplies a 4-byte group of one activation
  row (broadcast) with 16 channels x 4 bytes and adds to 16 int32 lanes. The micro-kernel keeps an MR x NR tile of
  C in 2 * MR zmm registers (MR = 8; a 1-row variant for a few leftover rows and for matrix-vector products), then
  requantizes the lanes itself (ruy's output stage in int64 lanes, see requantize_vector) and stores bytes. Rows
  past the end of a block are computed on stale buffer rows and not stored.
- Portable path: the same packing of activations, weights as [Np, Kp] rows, a plain Numba 4 x 4 tile of int32 dot
  products (LLVM keeps the lanes 32-bit because every update is wrapped in np.int32) into an int32 buffer
  `cbuf [MB, Np]`, and a Numba requantization loop (conv_loops.mbqm_half_up, the RQ_NEON mode for every channel).

Both output stages compute out = clamp(rq(int32(C + offset + bias)) + zp_out) with rq the double rounding half up of
ruy's x86 kernels, which the official runtime applies to every channel of a one-group int8 convolution and of an
int8 FULLY_CONNECTED.

prepare chooses the path from kernels/base/isa.py; the choice only changes which function is scheduled.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.llvm_ir import I8 as _i8
from lite_numba.kernels.base.llvm_ir import I32 as _i32
from lite_numba.kernels.base.llvm_ir import I64 as _i64
from lite_numba.kernels.base.llvm_ir import V16I as _v16i
from lite_numba.kernels.base.llvm_ir import byte_ptr, load, store_live
from lite_numba.kernels.base.llvm_ir import data_ptr as _data_ptr
from lite_numba.kernels.base.llvm_ir import i64 as _const
from lite_numba.kernels.base.llvm_ir import splat as _splat
from lite_numba.kernels.linear.conv_loops import mbqm_half_up
from lite_numba.kernels.linear.int8_rows import (
    byte_sum,
    pack_rows,
    pad_flipped,
    row_term,
    row_weight,
    window_row_terms,
)
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

MR = 8  # rows of a VNNI tile
NR = 32  # output channels of a packed weight panel (two zmm registers of int32)
PR = 4  # rows and columns of a portable tile
ABUF_BYTES = 48 * 1024  # activation rows packed per block (kept in L1/L2 while every weight panel passes over them)


# --- IR helpers -------------------------------------------------------------------------------------------------------


def _splat16(builder, x):
    return _splat(builder, x, _v16i)


PRM_BLOCK = 128  # int32 slots of output-stage parameters per 16 output channels (see output_params)


EVEN_ODD = [i if i % 2 == 0 else 15 + i for i in range(16)]  # lanes from the low halves of even / odd int64 lanes


def requantize_params(builder, prm_ptr, c):
    """The output-stage parameter vectors of channels c..c+15 (c a multiple of 16) from their block of `prm`
    (output_params): offset, left shift (<16 x i32>), multipliers of the even and odd channels, rounding terms
    (+ 2^63), int64 right shifts (<8 x i64> each), then the second (int32) right shift and the output zero point
    term (<16 x i32>; the shift from the left-shift slots' bits 8.., the zero point term from the high halves of
    the multipliers' int64 slots)."""
    v8i64 = ir.VectorType(_i64, 8)
    base = builder.gep(prm_ptr, [builder.mul(c, _const(PRM_BLOCK // 16))], inbounds=True)

    def row(k, ty):  # 16 int32 slots k*16.. of the block as `ty`
        p = builder.gep(base, [_const(16 * k)], inbounds=True)
        return builder.load(builder.bitcast(p, ty.as_pointer()), align=4)

    shifts = row(1, _v16i)
    left = builder.and_(shifts, ir.Constant(_v16i, [0xFF] * 16))
    q = builder.lshr(shifts, ir.Constant(_v16i, [8] * 16))
    rows = (row(0, _v16i), left) + tuple(row(k, v8i64) for k in range(2, 8))
    c32 = ir.Constant(v8i64, [32] * 8)
    he = builder.bitcast(builder.lshr(rows[2], c32), _v16i)
    ho = builder.bitcast(builder.lshr(rows[3], c32), _v16i)
    zp = builder.shuffle_vector(he, ho, ir.Constant(_v16i, EVEN_ODD))
    return rows + (q, zp)


def requantize_vector(builder, acc, params, lo, hi):
    """ruy's x86 output stage on 16 int32 lanes with the parameters of their channels (requantize_params) and the
    limits lo, hi (<16 x i32>): x = (acc + offset) << left (int32, wrapping), then in int64 lanes
    (x * multiplier + round) >> (31 + min(right, 21)), then in int32 lanes >> max(right - 21, 0), + zp, clamped;
    returns <16 x i32>.

    This is conv_loops.mbqm_half_up + zp_out in one rounding shift: floor(floor(a / 2^31) / 2^r) =
    floor(a / 2^(31 + r)), so ((x * m + 2^30) >> 31 + nudge) >> r, + zp, equals
    (x * m + 2^30 + nudge * 2^31 + zp * 2^(31 + r)) >> (31 + r) exactly for r <= 21 (no int64 overflow; the
    int32 shift is 0 and its zp 0). For 21 < r <= 31 the zp term would overflow: the channel's parameters then
    leave it out of the rounding term ((x * m + 2^30 + nudge * 2^31) >> 52, |x * m| <= 2^62, nudge * 2^31 <= 2^61)
    and give the int32 shift r - 21 and zp (a floor of a floor again; zp a whole multiple of the divisor). Even
    and odd channels are multiplied in separate 8 x i64 halves (vpmuldq reads the low 32 bits of each 64-bit
    lane), so no lane is widened.

    The int64 arithmetic shift is done as a logical one, which AVX2 has (vpsrlvq; vpsravq is AVX-512 only, and
    LLVM's emulation of it costs 3 more instructions a vector): p >> s = ((p + 2^63) >>> s) - 2^(63 - s) exactly
    (mod 2^64), the 2^63 is in the rounding term (output_params) and the subtraction in the zero point term: only
    the low 32 bits of the result are kept, and for s = 52 (the only case with an int32 shift q > 0) the low
    word of 2^(63 - s) = 2^11 is a multiple of 2^q and the shifted value lies in [0, 2^12), so
    ((l - 2^11) >> q) + zp = (l >> q) + (zp - 2^(11 - q)). Same bytes as the arithmetic form on every input."""
    v8i64 = ir.VectorType(_i64, 8)
    off, left, me, mo, re, ro, se, so, q2, zp = params
    c32 = ir.Constant(v8i64, [32] * 8)

    def sext_low(v):  # sign-extend the low 32 bits of every 64-bit lane (lets LLVM pick vpmuldq)
        return builder.ashr(builder.shl(v, c32), c32)

    x = builder.shl(builder.add(acc, off), left)
    xq = builder.bitcast(x, v8i64)
    te = builder.mul(sext_low(xq), sext_low(me))
    to = builder.mul(builder.ashr(xq, c32), sext_low(mo))
    ye = builder.bitcast(builder.lshr(builder.add(te, re), se), _v16i)
    yo = builder.bitcast(builder.lshr(builder.add(to, ro), so), _v16i)
    y = builder.shuffle_vector(ye, yo, ir.Constant(_v16i, EVEN_ODD))
    y = builder.add(builder.ashr(y, q2), zp)
    y = builder.select(builder.icmp_signed("<", y, lo), lo, y)
    return builder.select(builder.icmp_signed(">", y, hi), hi, y)


def vnni_accumulate(builder, mr: int, nv: int, pa, a_off, lda, kg, nrun, rstride, nrun2, rstride2, pb, b_off,
                    init=None):
    """The vpdpbusd loops of an [mr, 16 * nv] tile (the contract of make_vnni_tile's tile, from i8 pointers pa and
    pb): returns the mr x nv allocas of its <16 x i32> accumulators, C = init[v] + A . panel over every run and
    group (init: a <16 x i32> per column vector; zeros when None)."""
    dp = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_v16i, [_v16i, _v16i, _v16i]),
                                        "llvm.x86.avx512.vpdpbusd.512")
    accs = [[cgutils.alloca_once(builder, _v16i) for _ in range(nv)] for _ in range(mr)]
    for row in accs:
        for v, acc in enumerate(row):
            builder.store(ir.Constant(_v16i, None) if init is None else init[v], acc)
    with cgutils.for_range(builder, nrun) as run, cgutils.for_range(builder, nrun2) as run2:
        u, u2 = run.index, run2.index
        a0 = builder.add(a_off, builder.add(builder.mul(u, rstride), builder.mul(u2, rstride2)))
        arow = [byte_ptr(builder, pa, builder.add(a0, builder.mul(lda, _const(r)))) for r in range(mr)]
        k0 = builder.mul(builder.add(builder.mul(u, nrun2), u2), kg)  # groups before this run
        pb0 = byte_ptr(builder, pb, builder.add(b_off, builder.mul(k0, _const(64 * nv))))
        with cgutils.for_range(builder, kg) as loop:
            g = loop.index
            boff = builder.mul(g, _const(64 * nv))
            bv = [load(builder, byte_ptr(builder, pb0, builder.add(boff, _const(64 * v))), _v16i) for v in range(nv)]
            aoff = builder.mul(g, _const(4))
            for r in range(mr):
                av = _splat16(builder, load(builder, byte_ptr(builder, arow[r], aoff), _i32))
                for v in range(nv):
                    builder.store(builder.call(dp, [builder.load(accs[r][v]), av, bv[v]]), accs[r][v])
    return accs


def make_vnni_tile(mr: int, nv: int, stage=None):
    """An intrinsic computing an [mr, 16 * nv] tile of the quantized output with vpdpbusd:
    C = A[mr, 4 * kg * nrun * nrun2] (uint8) . panel (int8, [kg * nrun * nrun2, 16 * nv, 4]), requantized by
    requantize_vector, or given `stage` (simd_int8_plain.requantize_plain: same arguments, the offset already in the
    lanes) with the offsets as the accumulators' start and that stage.

    tile(a, a_off, lda, kg, nrun, rstride, nrun2, rstride2, b, b_off, prm, c0, out, o_off, ldo, nrows, ncols, qmin,
    qmax): row r of A is nrun * nrun2 runs of 4 * kg bytes, run (u, v) starting at byte
    a_off + u * rstride + v * rstride2 + r * lda of the uint8 array a (an im2col matrix: one run; a padded image
    read in place: one run per filter row, or per tap when the filter is dilated along x); the panel starts at
    byte b_off of the int8 array b; prm holds the output-stage parameters (_output_params, flat) of which those of
    channels c0.. are used; rows r < nrows and channels j < ncols of the result are stored as bytes at
    out[o_off + r * ldo + j]. When rs_on != 0, the int32 prm[rs_off + r] is added to every channel of row r before
    requantization (the per-row term of uint8 weights with a zero point other than 128, see qconv_vnni).
    """

    @intrinsic
    def tile(typingctx, a, a_off, lda, kg, nrun, rstride, nrun2, rstride2, b, b_off, prm, c0, out, o_off, ldo, nrows,
             ncols, qmin, qmax, rs_on, rs_off):
        ip = types.intp
        sig = types.void(a, ip, ip, ip, ip, ip, ip, ip, b, ip, prm, ip, out, ip, ip, ip, ip, types.int32, types.int32,
                         ip, ip)

        def codegen(context, builder, sig, args):
            (a_, a_off_, lda_, kg_, nrun_, rstride_, nrun2_, rstride2_, b_, b_off_, prm_, c0_, out_, o_off_, ldo_,
             nrows_, ncols_, qmin_, qmax_, rs_on_, rs_off_) = args
            pa = _data_ptr(context, builder, sig.args[0], a_)
            pb = _data_ptr(context, builder, sig.args[8], b_)
            pp = _data_ptr(context, builder, sig.args[10], prm_)
            po = _data_ptr(context, builder, sig.args[12], out_)
            init = None
            if stage is not None:  # the offsets (slots 0..15 of each block of parameters)
                init = [builder.load(builder.bitcast(builder.gep(pp, [builder.mul(builder.add(c0_, _const(16 * v)),
                                                                                  _const(PRM_BLOCK // 16))]),
                                                     _v16i.as_pointer()), align=4) for v in range(nv)]
            accs = vnni_accumulate(builder, mr, nv, pa, a_off_, lda_, kg_, nrun_, rstride_, nrun2_, rstride2_, pb,
                                   b_off_, init)
            requantize = stage or requantize_vector
            with builder.if_then(builder.icmp_signed("!=", rs_on_, _const(0))):  # per-row terms prm[rs_off + r]
                for r in range(mr):
                    t = _splat16(builder, builder.load(builder.gep(pp, [builder.add(rs_off_, _const(r))],
                                                                   inbounds=True)))
                    for v in range(nv):
                        builder.store(builder.add(builder.load(accs[r][v]), t), accs[r][v])
            v16i8 = ir.VectorType(_i8, 16)
            lo, hi = _splat16(builder, qmin_), _splat16(builder, qmax_)
            for v in range(nv):
                count = builder.sub(ncols_, _const(16 * v))  # valid channels of this vector (may be <= 0 or > 16)
                params = requantize_params(builder, pp, builder.add(c0_, _const(16 * v)))
                for r in range(mr):
                    with builder.if_then(builder.and_(builder.icmp_signed("<", _const(r), nrows_),
                                                      builder.icmp_signed(">", count, _const(0)))):
                        y = builder.trunc(requantize(builder, builder.load(accs[r][v]), params, lo, hi), v16i8)
                        dst = builder.gep(po, [builder.add(builder.add(o_off_, builder.mul(ldo_, _const(r))),
                                                           _const(16 * v))], inbounds=True)
                        store_live(builder, y, dst, count)
            return context.get_dummy_value()

        return sig, codegen

    return tile


_tile_mr_2 = make_vnni_tile(MR, 2)
_tile_mr_1 = make_vnni_tile(MR, 1)
_tile_1_2 = make_vnni_tile(1, 2)
_tile_1_1 = make_vnni_tile(1, 1)


# --- weight packing (prepare time, numpy) -----------------------------------------------------------------------------


def padded_sizes(K: int, N: int) -> tuple[int, int]:
    """(Kp, Np): depth rounded up to 4 bytes, output channels to 16."""
    return -(-K // 4) * 4, -(-N // 16) * 16


def pack_panels_int8(w: np.ndarray, arrange) -> np.ndarray:
    """w [N, K] int8 -> flat int8 panels: panel j0 (NR channels, 16 for a last odd panel) at byte j0 * Kp holds
    arrange(its rows w[j0:j0 + width] as [width, Kp]) in row-major order; zero beyond N and K. `arrange` takes a
    batch of panels [P, width, Kp] and arranges each (numpy, one call for all the full panels: a 262,144-channel
    logits layer is 8,192 panels)."""
    N, K = w.shape
    Kp, Np = padded_sizes(K, N)
    if (N, K) == (Np, Kp) and w.dtype == np.int8 and w.flags.c_contiguous:
        wp = w
    else:
        wp = np.zeros((Np, Kp), np.int8)
        wp[:N, :K] = w
    out = np.empty(Np * Kp, np.int8)
    full = Np // NR * NR
    if full:
        out[:full * Kp] = arrange(wp[:full].reshape(full // NR, NR, Kp)).reshape(-1)
    if full < Np:
        out[full * Kp:] = arrange(wp[full:].reshape(1, Np - full, Kp)).reshape(-1)
    return out


def pack_weights_vnni(w: np.ndarray) -> np.ndarray:
    """The panels of the vpdpbusd tiles: w[j0 + j, 4 * g + i] at (g * width + j) * 4 + i of panel j0."""
    return pack_panels_int8(w, lambda p: p.reshape(p.shape[0], p.shape[1], -1, 4).transpose(0, 2, 1, 3))


def pad_runs(w: np.ndarray, runs: int) -> np.ndarray:
    """w [N, K] with K = runs * L -> [N, runs * Lp], each run of L columns zero-padded to Lp = L rounded up to 4
    (the filter rows of a KxK convolution read in place from a padded image: see qconv_vnni, direct)."""
    N, K = w.shape
    L = K // runs
    Lp = -(-L // 4) * 4
    out = np.zeros((N, runs, Lp), w.dtype)
    out[:, :, :L] = w.reshape(N, runs, L)
    return out.reshape(N, runs * Lp)


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
    s = w.sum(axis=1, dtype=np.int64) * -(int(flip) + int(zp_in))  # (no int64 copy of the weights)
    out = np.zeros(Np, np.int64)
    out[:w.shape[0]] = s
    return ((out + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


def block_rows(Kp: int, P: int, mr: int) -> int:
    """Rows packed per block: a multiple of `mr`, at most ABUF_BYTES of activations, no more than P needs."""
    rows = max(mr, (ABUF_BYTES // Kp) // mr * mr)
    return min(rows, -(-P // mr) * mr)


# --- epilogue (shared by both paths) ------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _requantize_rows(cbuf, o, m0, rows, offs, bias, mult, shift, zp_out, qmin, qmax):
    """o[m0 + r, c] = clamp(rq(int32(cbuf[r, c] + offs[c] + bias[c])) + zp_out) (ruy's x86 output stage)."""
    CO = o.shape[1]
    for r in range(rows):
        crow = cbuf[r]
        orow = o[m0 + r]
        for c in range(CO):
            v = mbqm_half_up(np.int32(crow[c] + offs[c] + bias[c]), mult[c], shift[c]) + zp_out
            orow[c] = min(max(v, qmin), qmax)


@njit(cache=True, inline="always")
def channel_params(prm, p64, c, off, m, sh, zp_out):
    """Channel c's slots of the output-stage parameters (see _output_params); p64 is prm's bytes as int64
    [Np / 16, PRM_BLOCK / 2]. off is the int32 added to the accumulator, m and sh the multiplier and shift."""
    b, lane = c // 16, c % 16
    j = 16 + (lane % 2) * 8 + lane // 2  # int64 slot of the multiplier
    right = max(-sh, 0)
    r1 = min(right, 21)
    q = right - r1  # the int32 shift after the int64 one (zp_out added after it, not in the rounding term)
    zterm = np.int64(0) if q > 0 else np.int64(zp_out) << (31 + r1)
    low = (np.int64(1) << (32 - r1)) & np.int64(0xFFFFFFFF)  # low word of 2^(63 - s), s = 31 + r1
    zp = (np.int64(zp_out) if q > 0 else np.int64(0)) - (low >> q)
    prm[b, lane] = off
    prm[b, 16 + lane] = max(sh, 0) | (q << 8)
    p64[b, j] = (zp << 32) | (np.int64(m) & np.int64(0xFFFFFFFF))
    p64[b, j + 16] = ((np.int64(1) << 30) + ((np.int64(1) << right) >> 1 << 31) + zterm) ^ np.int64(-(1 << 63))
    p64[b, j + 32] = 31 + r1


@njit(cache=True, inline="always")
def params64(prm):
    """prm [Np / 16, PRM_BLOCK] int32 as int64 [Np / 16, PRM_BLOCK / 2]."""
    nb = prm.shape[0]
    return prm.reshape(nb * PRM_BLOCK).view(np.int64).reshape(nb, PRM_BLOCK // 2)


@njit(cache=True, inline="always")
def _output_params(prm, offs, bias, mult, shift, zp_out, nb):
    """Fill prm [Np / 16, PRM_BLOCK] int32 with the VNNI output stage's parameters (requantize_params): per block of
    16 channels, int32 slots 0..15 offset + bias, 16..31 left shift | q << 8; then as int64 (8 each, even channels
    before odd ones) the multipliers, the rounding terms 2^30 + nudge * 2^31 + zp_out * 2^(31 + right) + 2^63
    (wrapping) and the shifts 31 + right, with q = 0; for right > 21 (where zp_out * 2^(31 + right) would
    overflow), the rounding term without zp_out, the shift 52 and q = right - 21. The high half of the
    multiplier's slot holds the zero point term, zp_out (if q > 0) - (low word of 2^(32 - min(right, 21))) >> q
    (requantize_vector's logical-shift form). Channels from
    bias.size on (padding) get zeros. Only the first nb blocks are filled (rows of prm past them hold per-row
    terms, see qconv_vnni). Shifts must lie in [-31, 31] (prepare checks)."""
    CO = bias.size
    p64 = params64(prm)
    for c in range(nb * 16):
        if c < CO:
            channel_params(prm, p64, c, np.int32(offs[c] + bias[c]), mult[c], shift[c], zp_out)
        else:
            channel_params(prm, p64, c, 0, 0, 0, 0)


def output_params_host(off: np.ndarray, mult, shift, zp_out: int, nvalid: int, nblocks: int) -> np.ndarray:
    """_output_params computed at prepare (numpy), flat int32 [nblocks * PRM_BLOCK]: channel c < nvalid gets the
    offset off[c] (int32, offset + bias already summed), mult[c], shift[c]; the others zeros. The same values as
    channel_params / _output_params."""
    prm = np.zeros((nblocks, PRM_BLOCK), np.int32)
    p64 = prm.view(np.int64)
    c = np.arange(nvalid)
    b, lane = c // 16, c % 16
    j = 16 + (lane % 2) * 8 + lane // 2
    sh = np.asarray(shift, np.int64)[:nvalid]
    right = np.maximum(-sh, 0)
    r1 = np.minimum(right, 21)
    q = right - r1
    zterm = np.where(q > 0, 0, np.int64(zp_out) << (31 + r1))
    low = (np.int64(1) << (32 - r1)) & 0xFFFFFFFF
    zp = np.where(q > 0, np.int64(zp_out), 0) - (low >> q)
    prm[b, lane] = np.asarray(off, np.int32)[:nvalid]
    prm[b, 16 + lane] = np.maximum(sh, 0) | (q << 8)
    p64[b, j] = (zp << 32) | (np.asarray(mult, np.int64)[:nvalid] & 0xFFFFFFFF)
    p64[b, j + 16] = ((1 << 30) + (((1 << right) >> 1) << 31) + zterm) ^ np.int64(-(1 << 63))
    p64[b, j + 32] = 31 + r1
    return prm.reshape(-1)


def const_values(a):
    """The values of a kernel argument known at prepare (a numpy array, a ConstArg, or a view of / a constant
    tensor), else None."""
    if isinstance(a, np.ndarray):
        return a
    arr = getattr(a, "array", None)
    if isinstance(arr, np.ndarray):
        return arr
    t = getattr(a, "tensor", a)
    data = getattr(t, "data", None)
    if data is None:
        return None
    dt = getattr(a, "dtype", None) or t.dtype
    return np.ascontiguousarray(data).view(np.uint8).view(dt).reshape(-1)


# --- drivers ----------------------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def params_or_offsets(prm, offs, bias, mult, shift, zp_out, Np, rows):
    """The flat output-stage parameters: offs itself when prepare computed them (output_params_host, constant
    bias: offs then has Np / 16 * PRM_BLOCK elements), else filled into prm from the channel offsets offs [Np].
    With per-row terms (rows != 0: uint8 weights, see qconv_vnni) always prm, whose int32 slots from
    Np / 16 * PRM_BLOCK on then hold those terms (prm has rows for them); precomputed parameters are copied."""
    nb = Np // 16
    npb = nb * PRM_BLOCK
    pf = prm.reshape(prm.size)
    if offs.size == npb:
        if rows == 0:
            return offs
        for i in range(npb):
            pf[i] = offs[i]
        return pf
    _output_params(prm, offs, bias, mult, shift, zp_out, nb)
    return pf


@njit(cache=True, inline="always")
def a_source(x, abuf, geo, flip, zp_in, fill=True):
    """The A operand's geometry for the tiles (see qconv_vnni): (flat buffer, direct, lda, kg, nrun, rstride, nrun2,
    rstride2, panel bytes per channel, HP, WP, blocks). Direct (geo[13] != 0): abuf (flat) receives the padded,
    flipped input here (unless fill is False: the caller did it), a block is one output row; else abuf [MB, Kp] is
    the im2col block and a block MB pixels."""
    N, H, W, CI = x.shape
    sh, sw, dh, dw, pt, pl, KH, KW = geo[0], geo[1], geo[2], geo[3], geo[4], geo[5], geo[6], geo[7]
    OH, OW = geo[8], geo[9]
    buf = abuf.reshape(abuf.size)
    if geo.size > 13 and geo[13] != 0:
        HP = (OH - 1) * sh + (KH - 1) * dh + 1
        WP = (OW - 1) * sw + (KW - 1) * dw + 1
        if fill:
            pad_flipped(buf, x.reshape(x.size), N, H, W, CI, HP, WP, pt, pl, np.uint8((zp_in + flip) & 0xFF),
                        np.uint8(flip))
        # runs: one per filter row of KW * CI contiguous bytes, or with dilation along x one per tap of CI bytes
        nrun2 = 1 if dw == 1 else KW
        kg = ((KW * CI if dw == 1 else CI) + 3) // 4  # 4-byte groups per run
        return buf, True, sw * CI, kg, KH, dh * WP * CI, nrun2, dw * CI, kg * 4 * KH * nrun2, HP, WP, N * OH
    MB, Kp = abuf.shape
    return buf, False, Kp, Kp // 4, 1, 0, 1, 0, Kp, 0, 0, (N * OH * OW + MB - 1) // MB


@njit(cache=True, inline="always")
def start_block(x, abuf, a, geo, flip, zp_in, blk, direct, HP, WP, lda, rstride, rstride2, rsf, npb, d, OH, OW, CO):
    """Block blk of qconv_vnni / qconv_narrow made ready for the tiles (a_source's geometry): its im2col rows packed
    (im2col), and with uint8 weights (d != 0) its rows' per-row terms in rsf from npb on. Returns (byte offset of its
    first row in a, flat offset of its first output, rows)."""
    CI = x.shape[3]
    if direct:  # block = output row oy of image n
        n, oy = blk // OH, blk % OH
        a0 = ((n * HP + oy * geo[0]) * WP) * CI
        if d != 0:
            window_row_terms(a, rsf, npb, a0, OW, geo[6], geo[7], CI, lda, rstride, rstride2, geo[3], d)
        return a0, ((n * OH + oy) * OW) * CO, OW
    MB = abuf.shape[0]
    m0 = blk * MB
    rows = min(MB, x.shape[0] * OH * OW - m0)
    pack_rows(x, abuf, m0, rows, geo, flip, zp_in)
    if d != 0:
        K = geo[6] * geo[7] * CI
        for r in range(rows):
            rsf[npb + r] = row_term(d, byte_sum(a, r * lda, K))
    return 0, m0 * CO, rows


@njit(cache=True, nogil=True, _nrt=False)
def qconv_vnni(x, wp, offs, bias, out, geo, flip, zp_in, mult, shift, zp_out, qmin, qmax, abuf, prm):
    """Quantized CONV_2D (one group) / FULLY_CONNECTED on VNNI: x [N, H, W, CI] (int8 or uint8), wp weights packed
    by pack_weights_vnni, offs [Np] channel_offsets (or, when the bias is constant, the whole output-stage
    parameters from output_params_host, then used as they are), bias [CO] int32, out [N, OH, OW, CO];
    geo = [sh, sw, dh, dw, pad_t, pad_l, KH, KW, OH, OW, pointwise, d, (unused), direct] (the last three
    optional: 0); abuf [MB, Kp] uint8 and prm [Np / 16, PRM_BLOCK] int32 scratch. Shifts must lie in [-31, 31]
    (prepare checks).

    Two ways of feeding the tiles, one kernel (so their tiles compile once):
    - im2col (direct 0): blocks of MB output pixels are packed into abuf as rows of the im2col matrix (pack_rows).
    - direct (geo[13] = 1, a KxK convolution): no im2col matrix. The input is copied once, flipped to uint8 and
      padded with the input zero point, into abuf (any 2-D shape, used flat: [N, HP, WP, CI] plus at least
      MR * sw * CI + 4 slack bytes), where the KW taps of a filter row are KW * CI contiguous bytes (dilation 1
      along x); the tiles read each output pixel's window in place as KH runs of those bytes (rounded up to 4:
      the extra bytes meet zero weights), wp packed from pad_runs(w, KH); with dilation along x, as KH * KW runs
      of CI bytes (pad_runs(w, KH * KW)). Tiles of MR pixels of one output row (rows past the row's end are
      computed on whatever follows and not stored).

    uint8 weights with a per-tensor zero point zp_w are packed as w - 128 (int8, exact), with geo[11] = d =
    128 - zp_w and x uint8 (flip 0): sum (x - zp_in)(w - zp_w) = sum x (w - 128) + d * sum x - zp_in sum (w - zp_w),
    the last term in offs (channel_offsets of w - zp_w), the middle one a per-row term: d times the sum of the
    row's K bytes (padded taps hold zp_in, whose terms cancel), kept in prm's rows past Np / 16 (prm then has
    ceil((max(MB, OW) + MR) / PRM_BLOCK) more, see schedule_qgemm) and added to the row's accumulators by the
    tiles."""
    conv_blocks(x, wp, offs, bias, out, geo, flip, zp_in, mult, shift, zp_out, qmin, qmax, abuf, prm, MR, 3,
                _vnni_tiles, 1)


@njit(cache=True, inline="always")
def _vnni_tiles(scheme, mr, width, a, a_off, lda, kg, nrun, rstride, nrun2, rstride2, b, boff, prm, j0, out, o_off,
                ldo, nrows, ncols, qmin, qmax, rs_on, rs_off):
    """The tile of mr rows (MR or 1) over the panel of `width` channels (NR, or 16 for a last odd panel) at j0."""
    args = (a, a_off, lda, kg, nrun, rstride, nrun2, rstride2, b, boff, prm, j0, out, o_off, ldo, nrows, ncols, qmin,
            qmax, rs_on, rs_off)
    if mr == MR:
        if width == NR:
            _tile_mr_2(*args)
        else:
            _tile_mr_1(*args)
    elif width == NR:
        _tile_1_2(*args)
    else:
        _tile_1_1(*args)


@njit(cache=True, inline="always")
def conv_blocks(x, wp, offs, bias, out, geo, flip, zp_in, mult, shift, zp_out, qmin, qmax, abuf, prm, mr, max_rest,
                tiles, scheme):
    """The body of the convolution drivers of either width (qconv_vnni's arguments): blocks of output pixels
    (start_block), each as tiles of mr rows over every panel of channels, tiles(scheme, mr, width, a, a_off, lda, kg,
    nrun, rstride, nrun2, rstride2, wp, boff, prm, j0, out, o_off, ldo, nrows, ncols, qmin, qmax, rs_on, rs_off),
    then the rows left as 1-row tiles; a last tile over stale rows (computed, not stored) replaces more than
    max_rest of those, and always when the windows are read in place."""
    _, OH, OW, CO = out.shape
    Np = (CO + 15) // 16 * 16
    d = row_weight(geo)
    rs_on = 1 if d != 0 else 0
    npb = Np // 16 * PRM_BLOCK
    pf = params_or_offsets(prm, offs, bias, mult, shift, zp_out, Np, rs_on)
    rsf = prm.reshape(prm.size)
    o = out.reshape(out.size)
    lo, hi = np.int32(qmin), np.int32(qmax)
    a, direct, lda, kg, nrun, rstride, nrun2, rstride2, wstride, HP, WP, nblocks = a_source(x, abuf, geo, flip, zp_in)
    for blk in range(nblocks):
        a0, ob0, rows = start_block(x, abuf, a, geo, flip, zp_in, blk, direct, HP, WP, lda, rstride, rstride2, rsf,
                                    npb, d, OH, OW, CO)
        full = rows // mr * mr
        rest = rows - full
        if rest > max_rest or (direct and rest > 0):
            full += mr
            rest = 0
        for j0 in range(0, Np, NR):
            width = min(NR, Np - j0)
            boff = j0 * wstride
            ncols = CO - j0
            for i in range(0, full, mr):
                tiles(scheme, mr, width, a, a0 + i * lda, lda, kg, nrun, rstride, nrun2, rstride2, wp, boff, pf, j0, o,
                      ob0 + i * CO + j0, CO, rows - i, ncols, lo, hi, rs_on, npb + i)
            for i in range(full, full + rest):
                tiles(scheme, 1, width, a, a0 + i * lda, lda, kg, nrun, rstride, nrun2, rstride2, wp, boff, pf, j0, o,
                      ob0 + i * CO + j0, CO, 1, ncols, lo, hi, rs_on, npb + i)


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
    d = row_weight(geo)
    K = geo[6] * geo[7] * x.shape[3]
    for m0 in range(0, P, MB):
        rows = min(MB, P - m0)
        pack_rows(x, abuf, m0, rows, geo, flip, zp_in)
        for j in range(0, Np, PR):
            for i in range(0, rows, PR):
                _dot_tile(a, i * Kp, wp, j * Kp, Kp, c, i * Np + j, Np)
        if d != 0:  # uint8 weights: the per-row term (see qconv_vnni)
            for r in range(rows):
                t = row_term(d, byte_sum(a, r * Kp, K))
                for j in range(Np):
                    c[r * Np + j] = np.int32(c[r * Np + j] + t)
        _requantize_rows(cbuf, o, m0, rows, offs, bias, mult, shift, zp_out, qmin, qmax)


# --- prepare helper ---------------------------------------------------------------------------------------------------
