"""int8 VNNI convolution with the shorter output stage (AVX-512): `qconv_vnni_plain`, which kernels/linear/qgemm.py
schedules instead of simd_int8.qconv_vnni for a layer whose channels all have shifts in [-21, 0] (`plain_shifts`:
no left shift, no second int32 shift; every int8 convolution of the bundled and shared models).

simd_int8.requantize_vector, shared with the 256-bit tiles, shifts the int64 lanes logically (AVX2 has no arithmetic
shift of 64-bit lanes) and corrects with a zero-point term, shifts left and right again in int32 lanes and adds the
offset: 15 vector operations per 16 outputs. With vpsravq (AVX-512) and plain shifts the arithmetic shift of x * m + R
is the output itself (the zero point is in R), and the offsets start the accumulators: 11 operations, the same bytes.
On a Zen 4 the output stage had been ~60 % of a 112 x 112 x 16 -> 96 1x1 layer (1.19 -> 1.04x XNNPACK). The tiles are
simd_int8's (make_vnni_tile with this stage) and the driver its conv_blocks, so both kernels compute the same sums.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.llvm_ir import I64 as _i64
from lite_numba.kernels.base.llvm_ir import V16I as _v16i
from lite_numba.kernels.linear.simd_int8 import EVEN_ODD, MR, NR, conv_blocks, make_vnni_tile
from llvmlite import ir
from numba import njit


def plain_shifts(shift) -> bool:
    """Whether every channel's shift lies in [-21, 0]: no left shift and no second (int32) right shift, so the
    output stage is requantize_plain's (the VNNI tiles of qconv_vnni_plain). Nearly every layer; one channel with an
    effective scale of 1 or more, or below 2^-22 (a nearly dead channel, as in efficientnet_lite0), makes the layer
    take qconv_vnni."""
    s = np.asarray(shift)
    return s.size == 0 or (-21 <= int(s.min()) and int(s.max()) <= 0)


def requantize_plain(builder, x, params, lo, hi):
    """requantize_vector for channels with plain_shifts, on AVX-512 (vpsravq), x already holding acc + offset: the
    int64 arithmetic shift of x * m + R (R the rounding term with the output zero point folded in, the parameter
    slots' value XOR 2^63) is the value itself, whose low 32 bits requantize_vector's logical-shift form gives
    (its proof): the same bytes, without the offset add, the left shift, the zero point term and the int32 shift."""
    v8i64 = ir.VectorType(_i64, 8)
    _, _, me, mo, re, ro, se, so, _, _ = params
    c32 = ir.Constant(v8i64, [32] * 8)
    top = ir.Constant(v8i64, [-(1 << 63)] * 8)

    def sext_low(v):  # as requantize_vector's (vpmuldq)
        return builder.ashr(builder.shl(v, c32), c32)

    xq = builder.bitcast(x, v8i64)
    te = builder.mul(sext_low(xq), sext_low(me))
    to = builder.mul(builder.ashr(xq, c32), sext_low(mo))
    ye = builder.bitcast(builder.ashr(builder.add(te, builder.xor(re, top)), se), _v16i)
    yo = builder.bitcast(builder.ashr(builder.add(to, builder.xor(ro, top)), so), _v16i)
    y = builder.shuffle_vector(ye, yo, ir.Constant(_v16i, EVEN_ODD))
    y = builder.select(builder.icmp_signed("<", y, lo), lo, y)
    return builder.select(builder.icmp_signed(">", y, hi), hi, y)


_plain_mr_2 = make_vnni_tile(MR, 2, requantize_plain)
_plain_mr_1 = make_vnni_tile(MR, 1, requantize_plain)
_plain_1_2 = make_vnni_tile(1, 2, requantize_plain)
_plain_1_1 = make_vnni_tile(1, 1, requantize_plain)


@njit(cache=True, inline="always")
def _plain_tiles(scheme, mr, width, a, a_off, lda, kg, nrun, rstride, nrun2, rstride2, b, boff, prm, j0, out, o_off,
                 ldo, nrows, ncols, qmin, qmax, rs_on, rs_off):
    """simd_int8._vnni_tiles with requantize_plain: the tile of mr rows (MR or 1) over the panel of `width`
    channels (NR, or 16 for a last odd panel) at j0."""
    args = (a, a_off, lda, kg, nrun, rstride, nrun2, rstride2, b, boff, prm, j0, out, o_off, ldo, nrows, ncols, qmin,
            qmax, rs_on, rs_off)
    if mr == MR:
        if width == NR:
            _plain_mr_2(*args)
        else:
            _plain_mr_1(*args)
    elif width == NR:
        _plain_1_2(*args)
    else:
        _plain_1_1(*args)


@njit(cache=True, nogil=True, _nrt=False)
def qconv_vnni_plain(x, wp, offs, bias, out, geo, flip, zp_in, mult, shift, zp_out, qmin, qmax, abuf, prm):
    """qconv_vnni for layers whose shifts all lie in [-21, 0] (plain_shifts: nearly all), with the shorter output
    stage (requantize_plain); the same arguments and bytes. Scheduled instead of qconv_vnni, which stays for the
    other layers (so a model compiles one of the two, rarely both)."""
    conv_blocks(x, wp, offs, bias, out, geo, flip, zp_in, mult, shift, zp_out, qmin, qmax, abuf, prm, MR, 3,
                _plain_tiles, 1)
