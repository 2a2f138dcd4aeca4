"""Copies of raw bytes: a tensor's bytes moved as unsigned words, so one compiled loop serves every dtype; and the
8 x 8 tile transpose (vector loads, shuffles, stores) shared by TRANSPOSE and the float GEMM's packing.

RESHAPE and its kin, CAST to the same type, constants written at invoke (SHAPE's value, DENSIFY's and DEQUANTIZE's
prepared arrays, a zero fill) and the word-typed views of the data-movement kernels all use these.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.llvm_ir import I32, data_ptr, gep, i64
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from lite_numba.ops import PrepareContext, Tensor

# the unsigned word of each element size: a view of a tensor's bytes as these moves any dtype of that size
WORDS = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}


@njit(cache=True, nogil=True)
def copy_bytes(x, out):
    """out[i] = x[i] over out's length (flat word arrays of one type)."""
    for i in range(out.size):
        out[i] = x[i]


def _unit(nbytes: int):
    return np.int64 if nbytes % 8 == 0 else np.uint8


def schedule_copy(ctx: PrepareContext, x, out) -> None:
    """Copy x into out (same number of elements) as raw bytes: one compiled loop serves every dtype."""
    if x.size == 0:
        return
    dt = _unit(x.nbytes)
    n = x.nbytes // np.dtype(dt).itemsize
    ctx.call(copy_bytes, ctx.view(x, (n,), dt), ctx.view(out, (n,), dt))


def write_const(ctx: PrepareContext, out: Tensor, values: np.ndarray) -> None:
    """Schedule writing values known at prepare time (a shape, a densified or dequantized constant) into out."""
    data = np.ascontiguousarray(values, dtype=out.dtype).reshape(-1)
    if data.size == 0:
        return
    unit = _unit(data.nbytes)
    n = data.nbytes // np.dtype(unit).itemsize
    ctx.call(copy_bytes, data.view(unit), ctx.view(out, (n,), unit))


# --- 8 x 8 tile transposes (LLVM IR) ---------------------------------------------------------------------------------


def word_arrays(*arrays) -> bool:
    """Whether every argument is the Numba type of a 1-D integer (word) array."""
    return all(isinstance(a, types.Array) and a.ndim == 1 and isinstance(a.dtype, types.Integer) for a in arrays)


TILE = 8


def transpose_rows(builder, rows):
    """The TILE x TILE transpose of `rows` (TILE vectors of TILE lanes): log2(TILE) rounds of two-vector shuffles,
    each swapping the off-diagonal blocks of the block size (4, 2, 1)."""
    n = len(rows)
    rows = list(rows)
    b = n // 2
    while b >= 1:
        lo_mask, hi_mask = [], []
        for k in range(0, n, 2 * b):
            lo_mask += list(range(k, k + b)) + list(range(n + k, n + k + b))
            hi_mask += list(range(k + b, k + 2 * b)) + list(range(n + k + b, n + k + 2 * b))
        lo_c = ir.Constant(ir.VectorType(I32, n), lo_mask)
        hi_c = ir.Constant(ir.VectorType(I32, n), hi_mask)
        new = list(rows)
        for i in range(n):
            if i & b:
                continue
            new[i] = builder.shuffle_vector(rows[i], rows[i + b], lo_c)
            new[i + b] = builder.shuffle_vector(rows[i], rows[i + b], hi_c)
        rows = new
        b //= 2
    return rows


@intrinsic
def transpose_tile(typingctx, out, o, os, x, xi, xs):
    """out[o + c * os + r] = x[xi + r * xs + c] for r, c < TILE (TILE vector loads, shuffles, TILE vector stores)."""
    if not (word_arrays(out, x) and out.dtype == x.dtype):
        return None
    sig = types.none(out, types.int64, types.int64, x, types.int64, types.int64)

    def codegen(context, builder, sig, args):
        out_v, o_v, os_v, x_v, xi_v, xs_v = args
        et = context.get_value_type(sig.args[0].dtype)
        vt = ir.VectorType(et, TILE)
        src = gep(builder, data_ptr(context, builder, sig.args[3], x_v), xi_v, et)
        dst = gep(builder, data_ptr(context, builder, sig.args[0], out_v), o_v, et)
        rows = [builder.load(builder.bitcast(gep(builder, src, builder.mul(xs_v, i64(r)), et), vt.as_pointer()),
                             align=1) for r in range(TILE)]
        for c, v in enumerate(transpose_rows(builder, rows)):
            builder.store(v, builder.bitcast(gep(builder, dst, builder.mul(os_v, i64(c)), et), vt.as_pointer()),
                          align=1)
        return context.get_dummy_value()

    return sig, codegen
