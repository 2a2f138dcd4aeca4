"""hybrid_quant.quantize_rows in vector code, one row at a time into the buffer a GEMM reads: the hybrid kernels'
run-time input quantization inside their own compiled call (the int8 GEMM tiles of kernels/linear/hybrid_gemm.py
and the INT4 blockwise ones of kernels/linear/fc_int4.py).

Same bytes as quantize_rows (which stays the reference and serves the portable path), by the same steps:

- the range: min and max over the row in 16 float32 lanes, then across the lanes. For a finite row the minimum and
  maximum are the same values in any order (only the sign of a zero may differ, and the range is taken from their
  absolute values or against 0, which hides it); a NaN or an infinity anywhere is detected as before (the lanes
  sum v * 0, which is NaN exactly when some v is not finite) and sends the row to hybrid_quant's non-finite
  quantizers, whose bytes are copied.
- the scale, inverse scale and zero point: quantize_rows' scalar code, unchanged.
- the values: blocks of 8 as the official vector code rounds them (trunc(p +- 0.5) in float32; here 16 lanes at a
  time, the same per-lane arithmetic), the tail by std::round; the zero point added and the clamp taken in float32
  with quantize_rows' comparisons (max(lo, v) = v > lo ? v : lo, min(hi, m) = m < hi ? m : hi, so a NaN lands on
  lo as there) before the conversion, which is then exact. All of these values are small integers, so float32 and
  quantize_rows' float64 give the same ones.

The bytes are stored XOR `flip` (128: the uint8 form the vpdpbusd tiles read, 0: int8 as it is)."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.fixedpoint import round_half_away
from lite_numba.kernels.base.hybrid_quant import (
    asymmetric_zero_point,
    quantize_row_asymmetric_nonfinite,
    quantize_row_symmetric_nonfinite,
    round_neon,
)
from lite_numba.kernels.base.llvm_ir import F32, I8, I32, byte_ptr, data_ptr, i64, splat
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

LANES = 16
_SETS = 4  # independent accumulator sets of vector_range
_V16F = ir.VectorType(F32, LANES)
_V16I = ir.VectorType(I32, LANES)
_V16B8 = ir.VectorType(I8, LANES)
_V16H = ir.VectorType(ir.IntType(16), LANES)


def _f32_ptr(context, builder, ty, val, base):
    p = data_ptr(context, builder, ty, val)
    return builder.gep(p, [base], inbounds=True)


def _vload(builder, p):
    return builder.load(builder.bitcast(p, _V16F.as_pointer()), align=4)


@intrinsic
def vector_range(typingctx, x, base, n):
    """(min, max, bad) of the float32 x[base:base + n], n a positive multiple of 16, in 16 lanes: min and max as
    quantize_rows' `min(mn, v)` / `max(mx, v)` per lane and then across the lanes (a finite row's values in any
    order), bad the lanes' sums of v * 0 summed (NaN exactly when a value is NaN or infinite)."""
    f = types.float32
    sig = types.UniTuple(f, 3)(x, types.intp, types.intp)

    def codegen(context, builder, sig, args):
        x_, base_, n_ = args
        px = _f32_ptr(context, builder, sig.args[0], x_, base_)
        zero = ir.Constant(_V16F, None)
        first = _vload(builder, px)
        # SETS independent accumulator sets over the groups of SETS vectors (the chains' latency, not their
        # operations, bounds a single set), then the vectors left over in set 0
        sets = [tuple(cgutils.alloca_once_value(builder, v) for v in (first, first, builder.fmul(first, zero)))
                for _ in range(_SETS)]

        def step(acc, v):
            mn, mx, bad = acc
            a = builder.load(mn)
            builder.store(builder.select(builder.fcmp_ordered("<", v, a), v, a), mn)
            b = builder.load(mx)
            builder.store(builder.select(builder.fcmp_ordered(">", v, b), v, b), mx)
            builder.store(builder.fadd(builder.load(bad), builder.fmul(v, zero)), bad)

        count = builder.udiv(n_, i64(LANES))
        groups = builder.udiv(count, i64(_SETS))
        with cgutils.for_range(builder, groups) as loop:
            g0 = builder.mul(loop.index, i64(_SETS * LANES))
            for k in range(_SETS):
                step(sets[k], _vload(builder, builder.gep(px, [builder.add(g0, i64(k * LANES))], inbounds=True)))
        done = builder.mul(groups, i64(_SETS))
        with cgutils.for_range(builder, builder.sub(count, done)) as loop:
            at = builder.mul(builder.add(done, loop.index), i64(LANES))
            step(sets[0], _vload(builder, builder.gep(px, [at], inbounds=True)))
        vmn, vmx, vbad = (builder.load(p) for p in sets[0])
        for k in range(1, _SETS):
            a, b, c = (builder.load(p) for p in sets[k])
            vmn = builder.select(builder.fcmp_ordered("<", a, vmn), a, vmn)
            vmx = builder.select(builder.fcmp_ordered(">", b, vmx), b, vmx)
            vbad = builder.fadd(vbad, c)
        half = LANES
        while half > 1:  # halving steps across the lanes (any order: finite values; a NaN stays a NaN in the sum)
            half //= 2
            idx = ir.Constant(ir.VectorType(I32, LANES), list(range(half, 2 * half)) + list(range(LANES - half)))
            e = builder.shuffle_vector(vmn, vmn, idx)
            vmn = builder.select(builder.fcmp_ordered("<", e, vmn), e, vmn)
            e = builder.shuffle_vector(vmx, vmx, idx)
            vmx = builder.select(builder.fcmp_ordered(">", e, vmx), e, vmx)
            vbad = builder.fadd(vbad, builder.shuffle_vector(vbad, vbad, idx))
        first = ir.Constant(I32, 0)
        return context.make_tuple(builder, sig.return_type, (builder.extract_element(vmn, first),
                                                             builder.extract_element(vmx, first),
                                                             builder.extract_element(vbad, first)))

    return sig, codegen


@intrinsic
def vector_quantize(typingctx, x, base, n, inv, off, qlo, qhi, dst, dbase, flip):
    """dst[dbase + k] = q ^ flip for k < n (a multiple of 16) with q the official vector rounding of x[base + k] *
    inv (module doc): trunc(p + (p < 0 ? -0.5 : 0.5)) + off, clamped to [qlo, qhi] as quantize_rows clamps. dst
    holds bytes, or 16-bit values (the byte q ^ flip zero-extended: the int16 activations of the vpmaddwd tiles)."""
    f = types.float32
    sig = types.void(x, types.intp, types.intp, f, f, f, f, dst, types.intp, types.uint8)
    wide = dst.dtype.bitwidth == 16

    def codegen(context, builder, sig, args):
        x_, base_, n_, inv_, off_, qlo_, qhi_, dst_, dbase_, flip_ = args
        px = _f32_ptr(context, builder, sig.args[0], x_, base_)
        pd = byte_ptr(builder, data_ptr(context, builder, sig.args[7], dst_), dbase_)
        vinv, voff = splat(builder, inv_, _V16F), splat(builder, off_, _V16F)
        lo, hi = splat(builder, qlo_, _V16F), splat(builder, qhi_, _V16F)
        vflip = splat(builder, flip_, _V16B8)
        half = ir.Constant(_V16F, [0.5] * LANES)
        mhalf = ir.Constant(_V16F, [-0.5] * LANES)
        zero = ir.Constant(_V16F, None)
        trunc = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_V16F, [_V16F]), "llvm.trunc.v16f32")
        with cgutils.for_range(builder, builder.udiv(n_, i64(LANES))) as loop:
            k = builder.mul(loop.index, i64(LANES))
            p = builder.fmul(_vload(builder, builder.gep(px, [k], inbounds=True)), vinv)
            t = builder.call(trunc, [builder.fadd(p, builder.select(builder.fcmp_ordered("<", p, zero), mhalf,
                                                                     half))])
            v = builder.fadd(t, voff)
            m = builder.select(builder.fcmp_ordered(">", v, lo), v, lo)
            m = builder.select(builder.fcmp_ordered("<", m, hi), m, hi)
            q = builder.xor(builder.trunc(builder.fptosi(m, _V16I), _V16B8), vflip)
            if wide:
                q = builder.zext(q, _V16H)
            builder.store(q, builder.bitcast(builder.gep(pd, [k], inbounds=True), q.type.as_pointer()), align=1)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, inline="always")
def _store(dst, i, c, flip):
    dst[i] = (np.int64(c) & 0xFF) ^ flip


@njit(cache=True, inline="always")
def quantize_row(x, base, K, asymmetric, dst, dbase, flip, scratch):
    """Quantize the float32 x[base:base + K] (K >= 1) like hybrid_quant.quantize_rows does a row, storing the int8
    values XOR flip at dst[dbase:dbase + K] (a uint8 or int8 array, or uint16: the byte zero-extended); returns
    (scaling factor, zero point). scratch: an int8 array of at least K values (the non-finite quantizers write
    there)."""
    nvec = (K // 8) * 8
    n16 = (K // LANES) * LANES
    fl = np.int64(flip)
    if n16 > 0:
        mn, mx, bad = vector_range(x, base, n16)
    else:
        mn, mx, bad = x[base], x[base], x[base] * np.float32(0.0)
    for k in range(n16, K):
        v = x[base + k]
        mn = min(mn, v)
        mx = max(mx, v)
        bad += v * np.float32(0.0)
    if bad != 0:  # NaN: the official NaN- and inf-dependent range and conversions (hybrid_quant)
        if asymmetric:
            sf, zp = quantize_row_asymmetric_nonfinite(x[base:base + K], 0, K, scratch)
        else:
            sf = quantize_row_symmetric_nonfinite(x[base:base + K], 0, K, scratch)
            zp = 0
        for k in range(K):
            _store(dst, dbase + k, scratch[k], fl)
        return sf, zp
    if not asymmetric:
        rng = max(abs(mn), abs(mx))
        if rng == 0:
            for k in range(K):
                _store(dst, dbase + k, 0, fl)
            return np.float32(1.0), 0
        sf = rng / np.float32(127.0)
        inv = np.float32(127.0) / rng
        off = 0
        qlo = -127.0
    else:
        rmin = np.float64(min(np.float32(0.0), mn))
        rmax = np.float64(max(np.float32(0.0), mx))
        if rmin == rmax:
            for k in range(K):
                _store(dst, dbase + k, 0, fl)
            return np.float32(1.0), 0
        scale = np.float64(np.float32(rmax - rmin)) / 255.0
        off = asymmetric_zero_point(rmin, rmax, scale)
        sf = np.float32(scale)
        inv = np.float32(1.0 / np.float64(np.float32(scale)))
        qlo = -128.0
    if n16 > 0:
        vector_quantize(x, base, n16, inv, np.float32(off), np.float32(qlo), np.float32(127.0), dst, dbase,
                        np.uint8(flip))
    for k in range(n16, K):
        p = x[base + k] * inv
        v = off + (round_neon(p) if k < nvec else round_half_away(np.float64(p)))
        _store(dst, dbase + k, np.int64(min(127.0, max(qlo, v))), fl)
    return sf, off


@njit(cache=True, inline="always")
def quantize_block(x, m0, rows, K, asymmetric, dst, dstride, rz, rsf, scratch):
    """Input rows m0 .. m0 + rows - 1 of x (K floats each) quantized by quantize_row into dst as unsigned bytes
    (q + 128; row r at r * dstride), each row's zero point + 128 in rz[r] and scaling factor in rsf[r]: a block of
    rows for the hybrid tiles (hybrid_gemm) and matrix-vector tiles (hybrid_gemv)."""
    for r in range(rows):
        sf, zp = quantize_row(x, (m0 + r) * K, K, asymmetric, dst, r * dstride, 128, scratch)
        rz[r] = 128 + zp
        rsf[r] = sf
