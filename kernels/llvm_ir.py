"""LLVM IR building blocks shared by the explicit-SIMD kernels (simd_f32, simd_int8, dwconv_simd).

They are used inside Numba `@intrinsic` code generators: pointers into Numba arrays, in-bounds element addressing,
vector broadcasts and i64 constants."""

from __future__ import annotations

from llvmlite import ir

F32 = ir.FloatType()
I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
V16F = ir.VectorType(F32, 16)
V16I = ir.VectorType(I32, 16)
V16B = ir.VectorType(I1, 16)


def data_ptr(context, builder, ty, val):
    """Pointer to the first element of a Numba array value."""
    return context.make_array(ty)(context, builder, val).data


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
