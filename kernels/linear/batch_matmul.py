"""BATCH_MATMUL: out[..., m, n] = sum_k lhs[..., m, k] * rhs[..., k, n] with broadcast batch dimensions (rank 2-5),
adj_x / adj_y transposing the last two dimensions of lhs / rhs.

float32 (summed over k in order, as TFLite's reference kernel), int8 (int8 or raw int32 output), int16, int16 x int8,
and hybrid (float32 lhs, int8 rhs with per-tensor or per-column scales). The maths is the FULLY_CONNECTED GEMMs:
B is taken as [K, N], so rhs is used as stored unless adj_y (then transposed once into a temp, or in prepare when
constant). Every output batch gets the offsets of its lhs and rhs matrices, precomputed here. A float32 product of
at most SWAP_ROWS rows by a run-time rhs whose k runs contiguously (adj_y: a decode step's queries times its K cache,
its probabilities times a transposed V cache) runs on simd_f32_dot's tiles (_schedule_swapped): the rhs rows read
in place and transposed in registers, square by square, where the GEMM would pack the whole rhs to use each value
SWAP_ROWS times at most.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.fixedpoint import check_int64_left_shift, check_left_shift
from lite_numba.kernels.base.threads import CHUNKS_PER_THREAD, threads_for
from lite_numba.kernels.linear.amx_bmm import requantize_fixed, schedule_bmm_amx
from lite_numba.kernels.linear.fc_loops import gemm_f32, transpose_batches
from lite_numba.kernels.linear.fully_connected_quantized import (
    REQUANT_FIXED,
    REQUANT_FIXED64,
    fixed_multipliers,
    requantize,
    require_per_tensor,
    schedule_hybrid_rows,
    schedule_igemm,
)
from lite_numba.kernels.linear.hybrid_schedule import schedule_hybrid
from lite_numba.kernels.linear.simd_f32 import schedule_batch_matmul
from lite_numba.kernels.linear.simd_f32_dot import bmm_dot, bmm_dot_par, dot_chunks, dot_lanes
from lite_numba.kernels.linear.simd_f32_narrow import float_drivers
from numba import njit

from lite_numba.ops import PrepareContext, kernel


@njit(cache=True, nogil=True)
def bmm_hybrid_finish(acc, sf, zp, row_sums, scales, out, M, N, sf_base, rs_base):
    """Hybrid BATCH_MATMUL: scale the int32 products back to float as TFLite's reference kernel does, including
    its float zero-point correction truncated to int32. Output batch i reads its row scaling factors and zero points
    from sf_base[i] and its weight row sums from rs_base[i]."""
    for i in range(sf_base.size):
        for m in range(M):
            row = sf_base[i] + m
            s = sf[row]
            off = np.float32(zp[row])
            base = (i * M + m) * N
            for n in range(N):
                rs = np.float32(row_sums[rs_base[i] + n])
                total = np.int32(np.float32(acc[base + n]) - rs * off)
                out[base + n] = (s * scales[n]) * np.float32(total)


def _tflite_hybrid_bases(lhs_shape, rhs_shape, out_batch, M: int, N: int):
    """Where TFLite's hybrid kernel looks up each output batch's input scaling factors and weight row sums.

    Its reference loop advances these by one matrix (M rows, N row sums) per step of *each* non-broadcast batch
    dimension instead of by the dimension's stride, so with two or more such dimensions it reads other rows' factors.
    We reproduce that to match the official results."""
    ext = lambda s: (1,) * (5 - len(s)) + tuple(s)  # noqa: E731
    lb, rb = ext(lhs_shape)[:3], ext(rhs_shape)[:3]
    ob = (1,) * (3 - len(out_batch)) + tuple(out_batch)
    n = int(np.prod(ob, dtype=np.int64))
    coords = np.indices(ob).reshape(3, n) if n else np.zeros((3, 0), np.int64)
    sf_base = sum(coords[d] * (M if lb[d] != 1 else 0) for d in range(3))
    rs_base = sum(coords[d] * (N if rb[d] != 1 else 0) for d in range(3))
    return np.asarray(sf_base, np.int64).reshape(-1), np.asarray(rs_base, np.int64).reshape(-1)


def _batch_indices(lhs_b: tuple[int, ...], rhs_b: tuple[int, ...], out_b: tuple[int, ...]):
    """For each output batch (row-major), the flat batch index of its lhs and rhs matrices."""
    n = int(np.prod(out_b, dtype=np.int64))
    if not out_b:
        return np.zeros(1, np.int64), np.zeros(1, np.int64)
    coords = np.indices(out_b).reshape(len(out_b), n)
    lhs_c = np.where(np.array(lhs_b)[:, None] == 1, 0, coords)
    rhs_c = np.where(np.array(rhs_b)[:, None] == 1, 0, coords)
    return (np.ravel_multi_index(lhs_c, lhs_b).astype(np.int64),
            np.ravel_multi_index(rhs_c, rhs_b).astype(np.int64))


def strides_of(shape) -> list[int]:
    """Element strides of a C-contiguous tensor of `shape`."""
    st = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        st[d] = st[d + 1] * int(shape[d + 1])
    return st


def _operand(ctx: PrepareContext, slot: int):
    """(tensor, shape, element strides) of input `slot`: the tensor as it is, or, when lite_numba/runtime/fusion.py
    folded a TRANSPOSE (and RESHAPEs adding or dropping unit dimensions) into this node (options["views"][slot] =
    (perm, shape)), the transpose's input seen through the permutation, with that node's output shape."""
    t = ctx.input(slot)
    view = (ctx.options.get("views") or {}).get(slot)
    if view is None or t is None:
        return t, t.shape if t is not None else (), strides_of(t.shape) if t is not None else []
    perm, shape = view
    src = strides_of(t.shape)
    dims = [(t.shape[p], src[p]) for p in perm if t.shape[p] != 1]
    ctx.check([n for n, _ in dims] == [n for n in shape if n != 1],
              f"input {slot} of shape {list(t.shape)} permuted by {list(perm)} does not fit the shape "
              f"{list(shape)} the folded TRANSPOSE / RESHAPE nodes were written for")
    it = iter(dims)
    return t, tuple(shape), [next(it)[1] if n != 1 else 0 for n in shape]


def batch_offsets(shape, strides, out_b) -> np.ndarray:
    """Element offset of each output batch's matrix (row-major over out_b) in an operand of `shape` / `strides`
    (both padded to out_b's rank + 2), broadcast dimensions staying at 0."""
    n = int(np.prod(out_b, dtype=np.int64))
    if not out_b:
        return np.zeros(1, np.int64)
    coords = np.indices(out_b).reshape(len(out_b), n)
    st = np.array([0 if d == 1 else s for d, s in zip(shape[:-2], strides[:-2])], np.int64)
    return (coords * st[:, None]).sum(axis=0).astype(np.int64)


@njit(cache=True, nogil=True)
def gather6(src, shp, st, out):
    """out (row-major over shp, 6-D) = src at sum_d i_d * st[d]: a folded operand made contiguous (the paths that
    take contiguous blocks only)."""
    o = 0
    for i0 in range(shp[0]):
        for i1 in range(shp[1]):
            for i2 in range(shp[2]):
                for i3 in range(shp[3]):
                    for i4 in range(shp[4]):
                        base = i0 * st[0] + i1 * st[1] + i2 * st[2] + i3 * st[3] + i4 * st[4]
                        for i5 in range(shp[5]):
                            out[o] = src[base + i5 * st[5]]
                            o += 1


def _contiguous(ctx: PrepareContext, t, shape, strides):
    """A folded operand as a contiguous temporary of `shape` (a plain tensor as it is)."""
    if list(strides) == strides_of(shape):
        return t
    pad = 6 - len(shape)
    out = ctx.temp(tuple(shape), t.dtype)
    ctx.call(gather6, ctx.view(t, (t.size,)), np.array((1,) * pad + tuple(shape), np.int64),
             np.array((0,) * pad + tuple(strides), np.int64), ctx.view(out, (out.size,)))
    return out


# rows of a float32 product by a transposed run-time rhs computed as its transpose (above): Gemma 3 270M's decode step
# (4 query rows, 1 MiB caches) spent ~0.35 / 0.6 ms per K / V product packing the cache for the GEMM
SWAP_ROWS = 16
# at most this many output batches (three calls and a row table each; attention has one per KV head)
SWAP_BATCHES = 64


def _schedule_swapped(ctx: PrepareContext, lhs, a_off, a_strides, rhs, b_off, bn, o, M: int, K: int, N: int) -> None:
    """out_i = A_i @ B_i with B_i^T's rows (k contiguous, bn apart) read in place: simd_f32_dot's tiles transpose
    squares of them in registers and add each rounded product in k order (the same sums, in the same order, as the
    GEMM and the official kernel: bit-identical), without packing the whole rhs."""
    a, b, c = ctx.view(lhs, (lhs.size,)), ctx.view(rhs, (rhs.size,)), ctx.view(o, (o.size,))
    am, ak = a_strides
    lanes = dot_lanes()
    t = threads_for(ctx, a_off.size * M * K * N)
    ch = dot_chunks(a_off.size, N, CHUNKS_PER_THREAD * t, lanes) if t > 1 else np.zeros(0, np.int64)
    if ch.size > 4:
        ctx.call(bmm_dot_par, lanes, a, a_off, am, ak, b, b_off, bn, c, M, K, N, ch, ctx.temp((1,), np.int64), t)
    else:
        ctx.call(bmm_dot, lanes, a, a_off, am, ak, b, b_off, bn, c, M, K, N)


@kernel("BATCH_MATMUL")
def BATCH_MATMUL(ctx: PrepareContext) -> None:
    """Validate types, ranks and broadcasting, size the output and schedule the GEMM for the input types."""
    ctx.check_num(inputs=2, outputs=1)
    (lhs, lshape, lst), (rhs, rshape, rst) = _operand(ctx, 0), _operand(ctx, 1)
    out = ctx.output(0)
    ctx.check(lhs is not None and rhs is not None, "both inputs are required")
    ctx.check_dtype(lhs, np.float32, np.int8, np.int16)
    ctx.check_dtype(rhs, np.float32, np.int8, np.int16)
    pair = (lhs.dtype.type, rhs.dtype.type)
    ctx.check(pair in {(np.float32, np.float32), (np.float32, np.int8), (np.int8, np.int8), (np.int16, np.int16),
                       (np.int16, np.int8)},
              f"unsupported input types {lhs.dtype.name} and {rhs.dtype.name}")
    ctx.check(2 <= len(lshape) <= 5 and 2 <= len(rshape) <= 5,
              f"inputs must have rank 2 to 5, got {len(lshape)} and {len(rshape)}")
    adj_x = bool(ctx.options.get("adj_x", False))
    adj_y = bool(ctx.options.get("adj_y", False))
    rank = max(len(lshape), len(rshape))
    ls = (1,) * (rank - len(lshape)) + tuple(lshape)
    rs = (1,) * (rank - len(rshape)) + tuple(rshape)
    lst, rst = [0] * (rank - len(lshape)) + list(lst), [0] * (rank - len(rshape)) + list(rst)
    lhs_b, rhs_b = ls[:-2], rs[:-2]
    for a, b in zip(lhs_b, rhs_b):
        ctx.check(a == b or a == 1 or b == 1,
                  f"batch dimensions of {list(lhs.shape)} and {list(rhs.shape)} cannot be broadcast")
    out_b = tuple(max(a, b) if min(a, b) != 0 else 0 for a, b in zip(lhs_b, rhs_b))
    M, K = (ls[-1], ls[-2]) if adj_x else (ls[-2], ls[-1])
    K2, N = (rs[-1], rs[-2]) if adj_y else (rs[-2], rs[-1])
    ctx.check(K == K2, f"inner dimensions differ: {K} (lhs {list(lhs.shape)}) and {K2} (rhs {list(rhs.shape)})")

    quantized = lhs.dtype != np.float32
    if quantized:
        allowed = (np.int8, np.int32) if lhs.dtype == np.int8 else (np.int16,)
        ctx.check_dtype(out, *allowed)
    else:
        ctx.check_dtype(out, np.float32)
    o = ctx.set_output(0, out_b + (M, N))
    if o.size == 0:
        return
    drivers = float_drivers()
    am, ak = (lst[-1], lst[-2]) if adj_x else (lst[-2], lst[-1])
    bk, bn = (rst[-1], rst[-2]) if adj_y else (rst[-2], rst[-1])
    if (not quantized and rhs.dtype == np.float32 and drivers is not None and not rhs.is_const and M <= SWAP_ROWS
            and bk == 1 and K > 0 and int(np.prod(out_b, dtype=np.int64)) <= SWAP_BATCHES):
        _schedule_swapped(ctx, lhs, batch_offsets(ls, lst, out_b), (am, ak), rhs, batch_offsets(rs, rst, out_b), bn,
                          o, M, K, N)
        return
    if not quantized and rhs.dtype == np.float32 and drivers is not None and not rhs.is_const:
        # the SIMD GEMM reads a transposed or folded lhs in place and packs the rhs from where it is: no copies
        schedule_batch_matmul(ctx, ctx.view(lhs, (lhs.size,)), batch_offsets(ls, lst, out_b),
                              ctx.view(rhs, (rhs.size,)), batch_offsets(rs, rst, out_b), ctx.view(o, (o.size,)),
                              M, K, N, drivers, (lst[-1], lst[-2]) if adj_x else (lst[-2], lst[-1]),
                              (rst[-1], rst[-2]) if adj_y else (rst[-2], rst[-1]))
        return
    lhs, rhs = _contiguous(ctx, lhs, lshape, lst[rank - len(lshape):]), _contiguous(ctx, rhs, rshape,
                                                                                 rst[rank - len(rshape):])
    a_idx, b_idx = _batch_indices(lhs_b, rhs_b, out_b)
    a_off, b_off = a_idx * (M * K), b_idx * (K * N)
    # lhs as [M, K] blocks, rhs as [K, N] blocks (a constant rhs as an array: the integer GEMMs repack it)
    a_t = lhs
    if adj_x and lhs.size:
        a_t = ctx.temp((lhs.size,), lhs.dtype)
        ctx.call(transpose_batches, ctx.view(lhs, (lhs.size,)), a_t, K, M)
    a = ctx.view(a_t, (a_t.size,)) if a_t.size else np.zeros(0, lhs.dtype)
    b_const = None
    if rhs.is_const:
        b_const = np.ascontiguousarray(np.swapaxes(np.asarray(rhs.data), -1, -2) if adj_y else rhs.data).reshape(-1)
        b = ctx.const(b_const)
    elif not adj_y:
        b = ctx.view(rhs, (rhs.size,)) if rhs.size else np.zeros(0, rhs.dtype)
    else:
        b = ctx.temp((rhs.size,), rhs.dtype)
        ctx.call(transpose_batches, ctx.view(rhs, (rhs.size,)), b, N, K)
    of = ctx.view(o, (o.size,))
    if not quantized and rhs.dtype == np.float32 and drivers is not None:
        schedule_batch_matmul(ctx, a, a_off, b, b_off, of, M, K, N, drivers)
    elif not quantized and rhs.dtype == np.float32:
        lim = np.array([-np.inf, np.inf], np.float32)
        ctx.call(gemm_f32, a, a_off, b, b_off, np.zeros(N, np.float32), of, M, K, N, lim)
    elif not quantized:
        _hybrid(ctx, lhs, rhs, a_t, b_const, of, M, K, N, adj_x)
    elif o.dtype == np.int32:
        # int8 x int8 -> int32: the raw products, zero points ignored (as TFLite's EvalInt8Int32); on the AMX tiles
        # when the level is amx and the products are big enough (amx_bmm)
        args = (ctx, a, a_off, 0, lhs.dtype, None if b_const is not None else b, b_const, b_off, 0, of, M, K, N)
        if not schedule_bmm_amx(*args):
            schedule_igemm(*args)
    else:
        _quantized(ctx, lhs, rhs, o, a, a_off, b, b_const, b_off, of, M, K, N)


def _quantized(ctx: PrepareContext, lhs, rhs, o, a, a_off, b, b_const, b_off, of, M, K, N) -> None:
    for t in (lhs, rhs, o):
        ctx.check(t.quantization.scales.size >= 1, f"tensor {t.name!r} is not quantized")
    require_per_tensor(ctx, ("tensor", lhs), ("tensor", rhs), ("tensor", o))
    if lhs.dtype == np.int16:
        ctx.check(lhs.zero_point == 0 and rhs.zero_point == 0 and o.zero_point == 0,
                  "int16 BATCH_MATMUL needs zero points 0")
    # GetQuantizedConvolutionMultipler: the float32 product of the input scales, then double
    real = np.float64(np.float32(lhs.scale) * np.float32(rhs.scale)) / np.float64(np.float32(o.scale))
    qm, qs = fixed_multipliers([real] * N)
    what = f"output {o.name!r} (scale {o.scale:.6g}; input scales {lhs.scale:.6g}, {rhs.scale:.6g})"
    check_left_shift(ctx, qs, what)
    mode = REQUANT_FIXED if lhs.dtype == np.int8 else REQUANT_FIXED64
    if mode == REQUANT_FIXED64:
        check_int64_left_shift(ctx, qs, what)
    acc = ctx.temp((o.size,), np.int32 if mode == REQUANT_FIXED else np.int64)
    args = (ctx, a, a_off, int(lhs.zero_point), lhs.dtype, None if b_const is not None else b, b_const, b_off,
            int(rhs.zero_point), acc, M, K, N)
    info = np.iinfo(o.dtype)
    if not schedule_bmm_amx(*args):  # int8 on the AMX tiles (amx_bmm), else the integer GEMM
        schedule_igemm(*args)
    if mode == REQUANT_FIXED:  # int8: one multiplier, the branch-free loop that vectorizes (~9 -> ~1 ns an element)
        ctx.call(requantize_fixed, acc, of, int(qm[0]), int(qs[0]), int(o.zero_point), int(info.min), int(info.max))
        return
    ctx.call(requantize, acc, np.zeros(N, np.int64), of, N, mode, qm, qs, np.zeros(N), int(o.zero_point),
             int(info.min), int(info.max))


def _hybrid(ctx: PrepareContext, lhs, rhs, a_t, b_const, of, M, K, N, adj_x: bool) -> None:
    q = rhs.quantization
    ctx.check(q.scales.size >= 1, f"int8 rhs {rhs.name!r} of a hybrid BATCH_MATMUL is not quantized")
    if q.scales.size > 1:
        ctx.check(q.scales.size == N, f"rhs has {q.scales.size} scales for {N} output columns")
        scales = q.scales.astype(np.float32)
    else:
        scales = np.full(N, q.scales[0], np.float32)
    ctx.check(rhs.is_const, "the int8 rhs of a hybrid BATCH_MATMUL must be constant")
    w = np.asarray(rhs.data, np.int64)
    w = w.reshape(-1, *w.shape[-2:])
    if ctx.options.get("adj_y", False):
        w = np.swapaxes(w, -1, -2)
    row_sums = w.sum(axis=1).astype(np.int32).reshape(-1)  # per rhs matrix, per output column
    lhs_rows = int(np.prod(lhs.shape[:-2], dtype=np.int64)) * M
    # TFLite folds lhs [..., Q, R, K] x rhs [..., 1, K, N] into [..., Q * R, K] x [..., K, N] before this kernel;
    # the result is the same, but the factor lookups below follow the folded shapes
    ls, rs = lhs.shape, rhs.shape
    if not adj_x and len(ls) > 2 and len(rs) > 2 and rs[-3] == 1:
        ls, rs = ls[:-3] + (ls[-3] * ls[-2], ls[-1]), rs[:-3] + rs[-2:]
        M = ls[-2]
    rank = max(len(ls), len(rs))
    lb = (1,) * (rank - len(ls)) + ls[:-2]
    rb = (1,) * (rank - len(rs)) + rs[:-2]
    out_b = tuple(max(x, y) for x, y in zip(lb, rb))
    a_idx, b_idx = _batch_indices(lb, rb, out_b)
    sf_base, rs_base = _tflite_hybrid_bases(ls, rs, out_b, M, N)
    n_out = sf_base.size
    if (w.shape[0] == 1 and not rs_base.any() and np.array_equal(sf_base, np.arange(n_out) * M)
            and n_out * M == lhs_rows and schedule_hybrid(
                ctx, "bmm", ctx.view(a_t, (a_t.size,)), np.ascontiguousarray(w[0].T).astype(np.int8), scales, None,
                of, rows=lhs_rows, asymmetric=bool(ctx.options.get("asymmetric_quantize_inputs", False)))):
        return  # one rhs matrix, every row its own factors: the int8 tiles (hybrid_schedule)
    qa, sf, zp = schedule_hybrid_rows(ctx, a_t, lhs_rows, K)
    acc = ctx.temp((of.tensor.size,), np.int32)
    schedule_igemm(ctx, qa, a_idx * (M * K), 0, np.int8, None, b_const, b_idx * (K * N), 0, acc, M, K, N)
    ctx.call(bmm_hybrid_finish, acc, sf, zp, row_sums, scales, of, M, N, sf_base, rs_base)
