"""ADD and 8-bit MUL as the official x86 build runs them (part of the elementwise family; the prepares are in
arithmetic_quantized.py): TFLite's optimized kernels are NEON code compiled through an SSE translation, so vector
blocks round and narrow differently from the scalar tail, and broadcasting follows TFLite's "fivefold" loop
structure (process_broadcast_shapes), which decides which elements fall in a block. `binary_neon_op` runs the
stages per element; from PAIR_TABLE_MIN_SIZE elements the stages are tabulated once per value pair at prepare
(`pair_tables`) and `binary_pair_lookup` / `binary_pair_broadcast` look them up."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base import fixedpoint as fx
from lite_numba.kernels.base.shapes import broadcast_strides, padded_shape
from lite_numba.kernels.base.strided import box_walk, next_row
from lite_numba.kernels.base.threads import (
    CHUNKS_PER_THREAD,
    PARALLEL,
    bands,
    call_at,
    run_chunks,
    serial_address,
    threads_for,
)
from numba import njit

from lite_numba.ops import PrepareContext, Tensor, call_compiled


def raw_view_dtype(dtype) -> np.dtype:
    """The unsigned type whose values index a table over every value of `dtype` (uint8 or uint16)."""
    return np.dtype(np.uint8) if np.dtype(dtype).itemsize == 1 else np.dtype(np.uint16)


# narrowing of the NEON output stage before the zero point is added (int16 lanes) and the final saturation
NARROW_WRAP, NARROW_SATURATE, NARROW_NONE = 0, 1, 2


def process_broadcast_shapes(shape0, shape1) -> tuple[str, list[int]]:
    """TFLite's ProcessBroadcastShapes: ('none' | 'first' | 'second' | 'generic', fivefold sizes y0..y4).

    'first' / 'second' name the input that broadcasts fast (has size 1 in the inner broadcast dimension)."""
    n = max(len(shape0), len(shape1))
    a = (1,) * (n - len(shape0)) + tuple(shape0)
    b = (1,) * (n - len(shape1)) + tuple(shape1)
    if a == b:
        return "none", [1, 1, 1, 1, 1]
    category = "generic"
    for i in range(n - 1, -1, -1):
        if a[i] == b[i]:
            continue
        if a[i] == 1:
            category = "first"
        elif b[i] == 1:
            category = "second"
        else:
            return "generic", [1, 1, 1, 1, 1]
        break
    sa, sb = (b, a) if category == "second" else (a, b)
    y = [1, 1, 1, 1, 1]
    i = n - 1
    # from the innermost dimension out: equal sizes, sa broadcast (size 1), equal, sb broadcast, equal
    for slot, ones in ((4, ""), (3, "a"), (2, ""), (1, "b"), (0, "")):
        while i >= 0 and (sa[i] == 1 if ones == "a" else sb[i] == 1 if ones == "b" else sa[i] == sb[i]):
            y[slot] *= sa[i] if ones == "b" else sb[i]
            i -= 1
    return ("generic" if i >= 0 else category), y


@njit(cache=True)
def _scalar_stage(a, b, p):
    """The scalar code path: ADD sums the rescaled inputs, MUL multiplies the offset inputs; requantize, clamp."""
    v = a + b if p[0] == 0 else np.int64(np.int32(a * b))
    v = fx.multiply_by_quantized_multiplier(v, p[1], p[2]) + p[3]
    return min(max(v, p[4]), p[5])


@njit(cache=True)
def _neon_stage(a, b, p, narrow):
    """The NEON code path: vqrdmulh (rounds half up) and a rounding shift, then int16 narrowing (wrapping or
    saturating), the zero point added in int16 and saturation to the output type, as the vector code does."""
    if p[0] == 0:
        v = np.int64(np.int32(a + b))
        left = 0
    else:
        v = np.int64(np.int32(a * b))
        left = p[2] if p[2] > 0 else 0
    v = np.int64(np.int32(v << left))
    if v == -2147483648 and p[1] == -2147483648:
        v = np.int64(2147483647)
    else:
        v = (v * p[1] + (np.int64(1) << 30)) >> 31
    right = -p[2] if p[2] < 0 else 0
    v = fx.rounding_divide_by_pot(v, right)
    if narrow == NARROW_NONE:
        v = v + p[3]
    else:
        if narrow == NARROW_SATURATE:
            v = min(max(v, -32768), 32767)
        v = np.int64(np.int16(np.int16(v) + np.int16(p[3])))
    v = min(max(v, p[6]), p[7])
    return min(max(v, p[4]), p[5])


@njit(cache=True, nogil=True, _nrt=False)
def binary_neon_op(x, y, out, tables, cfg, p, xs, ys, shp):
    """ADD / MUL over raw (unsigned) views with the official kernel's code-path structure.

    tables[0|1]: per-value terms of x|y for the scalar path, [2|3] for NEON element-wise runs, [4|5] for NEON
    scalar-broadcast runs. cfg = [kind (0 flat, 1 fivefold broadcast, 2 generic broadcast), swap, y0..y4,
    element-wise block, scalar-broadcast block, element-wise narrowing, scalar-broadcast narrowing].
    p = [op (0 ADD, 1 MUL), multiplier, shift, output zero point, min, max, type min, type max]."""
    kind = cfg[0]
    if kind == 2:
        n5, sx, sy = shp[5], xs[5], ys[5]
        walk, at = box_walk(shp, xs, ys, ys)
        for r in range(walk[0]):
            xb, yb = at[1], at[2]
            for i5 in range(n5):
                out[r * n5 + i5] = _scalar_stage(tables[0, x[xb + i5 * sx]], tables[1, y[yb + i5 * sy]], p)
            at = next_row(at, walk)
        return
    block_e, block_s, narrow_e, narrow_s = cfg[7], cfg[8], cfg[9], cfg[10]
    if kind == 0:
        n = out.size
        split = n - n % block_e
        for k in range(n):
            if k < split:
                out[k] = _neon_stage(tables[2, x[k]], tables[3, y[k]], p, narrow_e)
            else:
                out[k] = _scalar_stage(tables[0, x[k]], tables[1, y[k]], p)
        return
    # fivefold broadcast: `a` is the input that broadcasts fast (TFLite swaps the inputs to make it input 1)
    swap = cfg[1]
    a = y if swap else x
    b = x if swap else y
    ra = 1 if swap else 0
    rb = 1 - ra
    y0, y1, y2, y3, y4 = cfg[2], cfg[3], cfg[4], cfg[5], cfg[6]
    ia = 0
    ib = 0
    ib_reset = 0
    o = 0
    if y4 > 1:
        split = y4 - y4 % block_e
        for _i0 in range(y0):
            for _i1 in range(y1):
                ib = ib_reset
                for _i2 in range(y2):
                    for _i3 in range(y3):
                        for k in range(y4):
                            if k < split:
                                out[o + k] = _neon_stage(tables[2 + ra, a[ia + k]], tables[2 + rb, b[ib + k]], p,
                                                         narrow_e)
                            else:
                                out[o + k] = _scalar_stage(tables[ra, a[ia + k]], tables[rb, b[ib + k]], p)
                        ib += y4
                        o += y4
                    ia += y4
            ib_reset = ib
    else:
        split = y3 - y3 % block_s
        for _i0 in range(y0):
            for _i1 in range(y1):
                ib = ib_reset
                for _i2 in range(y2):
                    va = a[ia]
                    for k in range(y3):
                        if k < split:
                            out[o + k] = _neon_stage(tables[4 + ra, va], tables[4 + rb, b[ib + k]], p, narrow_s)
                        else:
                            out[o + k] = _scalar_stage(tables[ra, va], tables[rb, b[ib + k]], p)
                    ib += y3
                    o += y3
                    ia += 1
            ib_reset = ib


@njit(cache=True, nogil=True)
def pair_tables(tables, p, narrow, tneon, tscalar):
    """Every (x, y) pair of 8-bit raw values through the NEON stage (tneon) and the scalar stage (tscalar) of
    binary_neon_op, stored like its output (int64 -> 8-bit wrap): the same arithmetic, evaluated once."""
    for a in range(256):
        for b in range(256):
            tneon[a * 256 + b] = _neon_stage(tables[2, a], tables[3, b], p, narrow)
            tscalar[a * 256 + b] = _scalar_stage(tables[0, a], tables[1, b], p)


@njit(cache=True, nogil=True)
def binary_pair_lookup(x, y, out, tneon, tscalar, split):
    """Element-wise 8-bit ADD / MUL by table: out[k] = tneon[x[k], y[k]] in the vector blocks (k < split) and
    tscalar[x[k], y[k]] in the scalar tail, as binary_neon_op computes them (kind 0: same shapes)."""
    for k in range(split):
        out[k] = tneon[(np.int64(x[k]) << 8) | np.int64(y[k])]
    for k in range(split, out.size):
        out[k] = tscalar[(np.int64(x[k]) << 8) | np.int64(y[k])]


@njit(cache=True, nogil=True, _nrt=False)
def binary_pair_broadcast(x, y, out, tvec, tsc, cfg):
    """binary_neon_op's fivefold broadcast (kind 1) of 8-bit inputs by table: its loops, each element looked up as
    tvec[a, b] in the vector blocks (the element-wise runs' stage when y4 > 1, the scalar-broadcast runs' stage
    otherwise) and tsc[a, b] in the scalar tails, with a the input that broadcasts fast (pair tables built with the
    inputs' roles swapped as binary_neon_op swaps them)."""
    swap = cfg[1]
    a = y if swap else x
    b = x if swap else y
    y0, y1, y2, y3, y4 = cfg[2], cfg[3], cfg[4], cfg[5], cfg[6]
    ia = 0
    ib_reset = 0
    o = 0
    if y4 > 1:
        split = y4 - y4 % cfg[7]
        for _i0 in range(y0):
            for _i1 in range(y1):
                ib = ib_reset
                for _i2 in range(y2):
                    for _i3 in range(y3):
                        for k in range(split):
                            out[o + k] = tvec[(np.int64(a[ia + k]) << 8) | np.int64(b[ib + k])]
                        for k in range(split, y4):
                            out[o + k] = tsc[(np.int64(a[ia + k]) << 8) | np.int64(b[ib + k])]
                        ib += y4
                        o += y4
                    ia += y4
            ib_reset = ib
        return
    split = y3 - y3 % cfg[8]
    for _i0 in range(y0):
        for _i1 in range(y1):
            ib = ib_reset
            for _i2 in range(y2):
                row = np.int64(a[ia]) << 8
                for k in range(split):
                    out[o + k] = tvec[row | np.int64(b[ib + k])]
                for k in range(split, y3):
                    out[o + k] = tsc[row | np.int64(b[ib + k])]
                ib += y3
                o += y3
                ia += 1
        ib_reset = ib


# From this size on a table replaces the per-element arithmetic (~3.5 ns an element vs ~0.3): building it takes
# ~0.1 ms at prepare and 64 KiB of constants (a second one only when there is a scalar tail).
PAIR_TABLE_MIN_SIZE = 256
# num_threads > 1: same-shape lookups of at least this many elements run in parts on the workers (one lookup is
# ~0.45 ns on a Zen 4 core, so 8192 elements ~3.7 us against a region's ~1 us; the float elementwise loops, ~10x
# cheaper an element, start at threads.MIN_ELEMENTS)
PAIR_PAR_MIN_ELEMENTS = 8192


@njit(cache=True, inline="always")
def _pair_chunk(args, wk, j):
    addr, x, y, out, tneon, tscalar, split, ch = args
    a, b = ch[2 * j], ch[2 * j + 1]
    call_at(addr, (x[a:b], y[a:b], out[a:b], tneon, tscalar, min(max(split - a, 0), b - a)))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def pair_lookup_par(addr, x, y, out, tneon, tscalar, split, ch, cnt, T):
    """binary_pair_lookup (at addr) over the element ranges ch = [a, b] * n, taken in turn by T workers: each
    element looked up in the table it uses with one thread (tneon below split), so the same bytes."""
    run_chunks(T, cnt, ch.size // 2, _pair_chunk, (addr, x, y, out, tneon, tscalar, split, ch))


def vshl_array(v: np.ndarray, shift: int) -> np.ndarray:
    """NEON vshl by a signed amount: left shift (wrapping) or truncating arithmetic right shift."""
    return fx.wrap_array(v << shift, 32) if shift >= 0 else v >> -shift


def schedule_binary_neon_op(ctx: PrepareContext, x: Tensor, y: Tensor, out: Tensor, tables: np.ndarray,
                            blocks: tuple[int, int], narrowing: tuple[int, int], params,
                            broadcast: bool = True) -> None:
    """Schedule binary_neon_op; `broadcast=False` runs every broadcast through the scalar generic path."""
    if out.size == 0:
        return
    category, ys5 = process_broadcast_shapes(x.shape, y.shape)
    if category != "none" and not broadcast:
        category = "generic"
    kind = {"none": 0, "first": 1, "second": 1, "generic": 2}[category]
    cfg = np.array([kind, int(category == "second")] + ys5 + list(blocks) + list(narrowing), np.int64)
    if kind == 2:
        xs, ys, shp = broadcast_strides(x.shape, out.shape), broadcast_strides(y.shape, out.shape), \
            padded_shape(out.shape)
    else:
        xs = ys = shp = np.zeros(6, np.int64)
    if kind == 0 and x.dtype.itemsize == 1 and y.dtype.itemsize == 1 and out.size >= PAIR_TABLE_MIN_SIZE:
        rv = raw_view_dtype(out.dtype)
        split = out.size - out.size % int(blocks[0])
        tneon, tscalar = np.zeros(65536, rv), np.zeros(65536, rv)
        call_compiled(pair_tables, np.ascontiguousarray(tables, np.int64), np.asarray(params, np.int64),
                      int(narrowing[0]), tneon, tscalar)
        if split == out.size:  # no scalar tail: its table is never read
            tscalar = tneon
        args = [ctx.view(x, (x.size,), raw_view_dtype(x.dtype)), ctx.view(y, (y.size,), raw_view_dtype(y.dtype)),
                ctx.view(out, (out.size,), rv), tneon, tscalar, split]
        t = threads_for(ctx, out.size, PAIR_PAR_MIN_ELEMENTS)
        ch = bands(out.size, CHUNKS_PER_THREAD * t, 64) if t > 1 else []
        if len(ch) < 2:
            return ctx.call(binary_pair_lookup, *args)
        ctx.call(pair_lookup_par, serial_address(binary_pair_lookup, args), *args,
                 np.array(ch, np.int64).reshape(-1), ctx.temp((1,), np.int64), t)
        return
    if kind == 1 and x.dtype.itemsize == 1 and y.dtype.itemsize == 1 and out.size >= PAIR_TABLE_MIN_SIZE:
        # fivefold broadcast (a LayerNorm's x * rsqrt(var), a scalar scale): the same tables with the inputs in
        # binary_neon_op's roles, for its element-wise runs (y4 > 1) or its scalar-broadcast runs
        rv = raw_view_dtype(out.dtype)
        ra = int(category == "second")
        t = np.ascontiguousarray(tables, np.int64)
        stage = 2 if ys5[4] > 1 else 4
        tvec, tsc = np.zeros(65536, rv), np.zeros(65536, rv)
        call_compiled(pair_tables, np.ascontiguousarray(t[[ra, 1 - ra, stage + ra, stage + 1 - ra]]),
                      np.asarray(params, np.int64), int(narrowing[0 if stage == 2 else 1]), tvec, tsc)
        ctx.call(binary_pair_broadcast, ctx.view(x, (x.size,), raw_view_dtype(x.dtype)),
                 ctx.view(y, (y.size,), raw_view_dtype(y.dtype)), ctx.view(out, (out.size,), rv), tvec, tsc, cfg)
        return
    ctx.call(binary_neon_op, ctx.view(x, (x.size,), raw_view_dtype(x.dtype)),
             ctx.view(y, (y.size,), raw_view_dtype(y.dtype)), ctx.view(out, (out.size,), raw_view_dtype(out.dtype)),
             np.ascontiguousarray(tables, np.int64), cfg, np.asarray(params, np.int64), xs, ys, shp)
