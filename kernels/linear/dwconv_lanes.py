"""Lane masks of the depthwise SIMD tiles (dwconv_simd.py): a block of fewer than 16 channels loaded and stored
under a mask where the target has native masked loads and stores (AVX-512 F and BW), else behind branches: whole
blocks with plain loads and stores, a block of exactly 8 float lanes as one 8-lane vector, byte blocks through a
shuffled plain load (x86), masked loads and stores (LLVM's expansion) for the rest."""

from __future__ import annotations

import platform

from lite_numba.kernels.base import isa
from lite_numba.kernels.base.llvm_ir import I32 as _i32
from lite_numba.kernels.base.llvm_ir import V16B as _v16b
from lite_numba.kernels.base.llvm_ir import V16I as _v16i
from lite_numba.kernels.base.llvm_ir import i64 as _i
from lite_numba.kernels.base.llvm_ir import splat as _splat
from llvmlite import ir
from numba.core import cgutils

VL = 16  # lanes per vector (one zmm of float32 / int32)
X86 = platform.machine().lower() in ("x86_64", "amd64")


def vec_name(vt):
    el = vt.element
    return f"v{vt.count}f32" if isinstance(el, ir.FloatType) else f"v{vt.count}i{el.width}"


def masked_load(builder, ptr, vt, mask):
    """vt loaded from ptr where mask is set (zero elsewhere); nothing is read outside the mask."""
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(vt, [ir.PointerType(vt), _i32, _v16b, vt]),
        f"llvm.masked.load.{vec_name(vt)}.p0")
    align = max(vt.element.width // 8 if not isinstance(vt.element, ir.FloatType) else 4, 1)
    return builder.call(fn, [builder.bitcast(ptr, ir.PointerType(vt)), ir.Constant(_i32, align), mask,
                             ir.Constant(vt, None)])


def masked_store(builder, v, ptr, mask):
    vt = v.type
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [vt, ir.PointerType(vt), _i32, _v16b]),
        f"llvm.masked.store.{vec_name(vt)}.p0")
    builder.call(fn, [v, builder.bitcast(ptr, ir.PointerType(vt)), ir.Constant(_i32, 4), mask])


def masks_native() -> bool:
    """True when the target has cheap masked loads and stores of every lane width (AVX-512 F and BW); elsewhere a
    masked byte load or store is one branch per lane and a float32 one vmaskmovps (slow stores on AMD): see
    emit_split (read at code generation, from the features Numba compiles for)."""
    feats = isa.cpu_features()
    return bool(feats.get("avx512f") and feats.get("avx512bw"))


def emit_split(builder, nch, emit, tail=None, half=False):
    """emit("masked") once (targets with native masks), or behind a branch emit("full") when nch >= 16, else
    emit("half") when `half` and nch == 8 (8 lanes, plain loads and stores), else emit("tail") where the i1 `tail`
    holds (tail_load, x86 only), else emit("masked")."""
    if masks_native():
        emit("masked")
        return
    with builder.if_else(builder.icmp_signed(">=", nch, _i(VL))) as (whole, part):
        with whole:
            emit("full")
        with part:
            if half:
                with builder.if_else(builder.icmp_signed("==", nch, _i(VL // 2))) as (eight, other):
                    with eight:
                        emit("half")
                    with other:
                        emit_split_part(builder, emit, tail)
                return
            emit_split_part(builder, emit, tail)


def emit_split_part(builder, emit, tail):
    """The fewer-than-16-lanes part of emit_split."""
    if tail is None or not X86:
        emit("masked")
        return
    with builder.if_else(tail) as (last, first):
        with last:
            emit("tail")
        with first:
            emit("masked")


def tail_load(builder, ptr, nch):
    """What a masked load of nch (< 16) bytes at ptr gives (zeros above), on x86 targets without masked byte loads
    (LLVM emits 16 branches there): a plain load of the 16 bytes ending at ptr + nch (the caller knows them inside
    the array) and a byte shuffle (pshufb: lane j < nch takes byte j + 16 - nch, the others 0x80, a zero)."""
    v = ir.VectorType(ir.IntType(8), VL)
    iota = ir.Constant(v, list(range(VL)))
    n8 = _splat(builder, builder.trunc(nch, ir.IntType(8)), v)
    shuf = builder.select(builder.icmp_signed("<", iota, n8), builder.sub(builder.add(iota, ir.Constant(v, [VL] * VL)),
                                                                           n8), ir.Constant(v, [-128] * VL))
    start = builder.gep(builder.bitcast(ptr, ir.IntType(8).as_pointer()), [builder.sub(nch, _i(VL))])
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v, [v, v]), "llvm.x86.ssse3.pshuf.b.128")
    return builder.call(fn, [builder.load(builder.bitcast(start, v.as_pointer()), align=1), shuf])


def lane_mask(builder, nch):
    iota = ir.Constant(_v16i, list(range(VL)))
    return builder.icmp_signed("<", iota, _splat(builder, builder.trunc(nch, _i32), _v16i))


__all__ = ["VL", "X86", "vec_name", "masked_load", "masked_store", "masks_native", "emit_split", "tail_load",
           "lane_mask"]
