"""LLVM IR building blocks shared by the explicit-SIMD kernels (simd_f32, simd_int8, dwconv_simd).

They are used inside Numba `@intrinsic` code generators: pointers into Numba arrays, in-bounds element addressing,
vector broadcasts and i64 constants.

In the checked mode (LITE_NUMBA_BOUNDSCHECK=1, see lite_numba/jit/numba_cache.py) every pointer `data_ptr` returns
carries its array's byte range, every pointer derived from it (gep, bitcast) inherits the range, and every plain
load and store through such a pointer first checks that all the bytes it touches lie inside the array, raising
IndexError otherwise: the generators' address computations are checked without changing them. Masked vector loads
and stores (llvm.masked.*, which touch only their live lanes) are not checked."""

from __future__ import annotations

import os

from lite_numba.kernels.base import isa
from llvmlite import ir
from numba.core import cgutils

F32 = ir.FloatType()
I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
V16F = ir.VectorType(F32, 16)
V16I = ir.VectorType(I32, 16)
V16B = ir.VectorType(I1, 16)


CHECKED = os.environ.get("LITE_NUMBA_BOUNDSCHECK", "") not in ("", "0")
_RANGES: dict[int, tuple] = {}  # checked mode: id(pointer value) -> (pointer, context, first byte, end byte)


def data_ptr(context, builder, ty, val):
    """Pointer to the first element of a Numba array value."""
    ary = context.make_array(ty)(context, builder, val)
    ptr = ary.data
    if CHECKED:
        lo = builder.ptrtoint(ptr, I64)
        _RANGES[id(ptr)] = (ptr, context, lo, builder.add(lo, builder.mul(ary.nitems, ary.itemsize)))
    return ptr


def _range_of(value):
    r = _RANGES.get(id(value))
    return r if r is not None and r[0] is value else None


def _inherit(out, value):
    r = _range_of(value)
    if r is not None:
        _RANGES[id(out)] = (out,) + r[1:]
    return out


def _check_access(builder, ptr, ltype) -> None:
    r = _range_of(ptr)
    if r is None:
        return
    _, context, lo, hi = r
    addr = builder.ptrtoint(ptr, I64)
    end = builder.add(addr, i64(context.get_abi_sizeof(ltype)))
    bad = builder.or_(builder.icmp_unsigned("<", addr, lo), builder.icmp_unsigned(">", end, hi))
    with cgutils.if_unlikely(builder, bad):
        context.call_conv.return_user_exc(builder, IndexError, ("SIMD kernel accessed memory outside its array",))


if CHECKED:
    _gep, _bitcast, _load, _store = ir.IRBuilder.gep, ir.IRBuilder.bitcast, ir.IRBuilder.load, ir.IRBuilder.store

    def _checked_gep(self, ptr, indices, inbounds=False, name="", source_etype=None):
        return _inherit(_gep(self, ptr, indices, inbounds=inbounds, name=name, source_etype=source_etype), ptr)

    def _checked_bitcast(self, value, typ, name=""):
        return _inherit(_bitcast(self, value, typ, name), value)

    def _checked_load(self, ptr, name="", align=None, typ=None):
        _check_access(self, ptr, typ if typ is not None else ptr.type.pointee)
        return _load(self, ptr, name, align, typ)

    def _checked_store(self, value, ptr, align=None):
        _check_access(self, ptr, value.type)
        return _store(self, value, ptr, align)

    # only pointers data_ptr registered are checked: Numba's own code generation is unaffected
    ir.IRBuilder.gep, ir.IRBuilder.bitcast = _checked_gep, _checked_bitcast
    ir.IRBuilder.load, ir.IRBuilder.store = _checked_load, _checked_store


def gep(builder, ptr, idx, etype):
    """ptr + idx elements of `etype` (in bounds)."""
    return builder.gep(ptr, [idx], inbounds=True, source_etype=etype)


def splat(builder, x, vtype):
    """A vector of `vtype` with every lane equal to the scalar x."""
    v = builder.insert_element(ir.Constant(vtype, ir.Undefined), x, ir.Constant(I32, 0))
    return builder.shuffle_vector(v, ir.Constant(vtype, ir.Undefined),
                                  ir.Constant(ir.VectorType(I32, vtype.count), [0] * vtype.count))


def i64(v):
    """An i64 constant."""
    return ir.Constant(I64, v)


def _masked_stores(vtype) -> bool:
    """Whether the target stores a vector of vtype under a lane mask in one instruction: AVX-512 F (32 / 64-bit
    lanes) or BW (8 / 16-bit lanes), from the features Numba compiles for; not in the checked mode, which checks
    plain stores only."""
    feats = isa.cpu_features()
    width = vtype.element.width if isinstance(vtype.element, ir.IntType) else 32
    return not CHECKED and bool(feats.get("avx512f") and (width >= 32 or feats.get("avx512bw")))


def store_live(builder, y, dst, count):
    """Store the vector y at dst (a pointer to its element type): whole when at least as many lanes as y has are
    live (count, an i64), else its first count lanes (no byte past them is written): under a mask
    (llvm.masked.store) where the target has masked stores of that width (_masked_stores), else one by one."""
    lanes = y.type.count
    with builder.if_else(builder.icmp_signed(">=", count, i64(lanes))) as (whole, part):
        with whole:
            builder.store(y, builder.bitcast(dst, y.type.as_pointer()), align=1)
        with part:
            if _masked_stores(y.type):
                vt, vi = y.type, ir.VectorType(I32, lanes)
                n = builder.trunc(builder.select(builder.icmp_signed("<", count, i64(0)), i64(0), count), I32)
                live = builder.icmp_signed("<", ir.Constant(vi, list(range(lanes))), splat(builder, n, vi))
                name = f"v{lanes}f32" if isinstance(vt.element, ir.FloatType) else f"v{lanes}i{vt.element.width}"
                fn = cgutils.get_or_insert_function(
                    builder.module, ir.FunctionType(ir.VoidType(), [vt, vt.as_pointer(), I32, live.type]),
                    f"llvm.masked.store.{name}.p0")
                builder.call(fn, [y, builder.bitcast(dst, vt.as_pointer()), ir.Constant(I32, 1), live])
            else:
                with cgutils.for_range(builder, count) as lane:
                    e = builder.extract_element(y, builder.trunc(lane.index, I32))
                    builder.store(e, builder.gep(dst, [lane.index], inbounds=True))


def byte_ptr(builder, base, offset):
    """i8* base + offset (offset an i64 in elements of a 1-byte array)."""
    return builder.gep(base, [offset], inbounds=True)


def load(builder, ptr, ty):
    """Unaligned load of `ty` from a byte or int32 pointer."""
    return builder.load(builder.bitcast(ptr, ty.as_pointer()), align=1)
