"""Explicit-SIMD float32 GEMM and direct convolution (AVX-512 FMA micro-kernels written as LLVM IR).

The micro-kernel computes a tile of up to MR = 6 rows x NR = 32 columns of C = A @ B as an outer product: for each
k it broadcasts one A value per row, loads one or two 16-float vectors of B and issues MR x NV multiplies and adds
into accumulators that live in zmm registers for the whole reduction. The product is rounded before it is added (a
separate fmul and fadd, not `llvm.fma`), like the official builtin kernels: a fused multiply-add changed results in
the last bits (5e-4 relative at the output of MediaPipe's pose_landmark_full), the separate pair keeps single
convolutions bit-identical to the official ones, and on Zen 4 it costs little (multiplies and adds issue on
different pipes). The epilogue adds the
bias, clamps to the fused activation range [lo, hi] (NaN passes through, as TFLite's min/max) and stores with a
column mask (`llvm.masked.store`), so a partial panel writes no byte past the output row and nothing makes a second
pass over the output.

Operands are 1-D arrays plus offsets, so one compiled kernel serves every shape:

- A rows start at `a[abase + rows[ri + r]]` (a row-offset table computed once in prepare). The reduction runs over
  `nseg` segments of `seglen` consecutive A values, segment s starting `segs[s]` after the row start. A GEMM has
  one segment of length K and rows i * lda; a direct convolution over a (padded) NHWC input has one row per output
  pixel (its receptive field's corner) and one segment per filter row kh (the KW * CI values of a row of taps are
  contiguous when the width dilation is 1) or per tap (kh, kw).
- B is packed once (in prepare for constant weights, by `pack_panels` otherwise) into panels of 32 columns:
  panel p holds B[k, 32p:32p + 32] for k = 0..K-1 contiguously, zero-padded past N; the bias is padded alike.

Rows left over at the end (M not a multiple of 6) get a smaller tile (MR = 1..5): one kernel per (MR, NV) pair is
generated, and narrower ones (16 columns in one zmm, 8 in one ymm) for a panel with at most 16 or 8 live columns.

Numerics: every output is summed over k in order (rounded products), starting from 0, then the bias is added.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
from lite_numba.kernels.base import isa
from lite_numba.kernels.base.activation import float_activation_range
from lite_numba.kernels.base.llvm_ir import F32 as _f32
from lite_numba.kernels.base.llvm_ir import I1 as _i1
from lite_numba.kernels.base.llvm_ir import I32 as _i32
from lite_numba.kernels.base.llvm_ir import I64 as _i64
from lite_numba.kernels.base.llvm_ir import data_ptr as _data_ptr
from lite_numba.kernels.base.llvm_ir import gep as _gep
from lite_numba.kernels.base.llvm_ir import i64 as _i
from lite_numba.kernels.base.llvm_ir import splat as _splat
from lite_numba.kernels.base.threads import (
    CHUNKS_PER_THREAD,
    PARALLEL,
    bands,
    image_row_parts,
    run_chunks,
    threads_for,
)
from lite_numba.kernels.linear.f32_layout import NR, pack_panels, pad_nhwc, pad_nhwc_par
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from lite_numba.ops import PrepareContext, Tensor

MR = 6  # rows of the largest tile (12 zmm accumulators with two vectors per row)



def data_cache_sizes() -> tuple[int, int]:
    """(L1d, L2) bytes per core as the operating system reports them (sysconf, else Linux's sysfs cache entries),
    32 KiB / 512 KiB when it reports nothing: what the drivers' row blocks are sized from. Read once at import, so
    the values are constants of the compiled drivers (a driver cached on a machine with other caches is only slower,
    never wrong)."""
    sizes = {1: 0, 2: 0}
    for level, name in ((1, "SC_LEVEL1_DCACHE_SIZE"), (2, "SC_LEVEL2_CACHE_SIZE")):
        try:
            sizes[level] = max(int(os.sysconf(name)), 0)
        except (ValueError, OSError, AttributeError):
            pass
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for entry in sorted(base.glob("index[0-9]*")) if not all(sizes.values()) else ():
        try:
            level = int((entry / "level").read_text())
            kind = (entry / "type").read_text().strip()
            text = (entry / "size").read_text().strip().upper()
        except (OSError, ValueError):
            continue
        if level in sizes and not sizes[level] and kind in ("Data", "Unified") and text[:-1].isdigit():
            sizes[level] = int(text[:-1]) * {"K": 1024, "M": 1 << 20}.get(text[-1], 1)
    return sizes[1] or 32 * 1024, sizes[2] or 512 * 1024


L1D_BYTES, L2_BYTES = data_cache_sizes()


# --- IR helpers -----------------------------------------------------------------------------------------------------


def masked_stores_native() -> bool:
    """True when the target has cheap masked vector stores (AVX-512 F); elsewhere (AVX2's vmaskmovps, slow on AMD
    cores, or per-lane stores on NEON) a tile whose columns are all live stores plainly (read at code generation,
    from the features Numba compiles for)."""
    return bool(isa.cpu_features().get("avx512f"))


def _vload(builder, ptr, vtype):
    return builder.load(builder.bitcast(ptr, vtype.as_pointer()), align=4)


def _epilogue_terms(context, builder, ty, ep, biasoff, masks, lanes: int, nv: int):
    """make_tiles' `ep` tuple (r, ldr, lo2, hi2, alpha, c0, fill) unpacked: the residual's data pointer (moved back
    by c0) and row stride, the second clamp's limits as vectors, the PRELU slopes of the tile's columns (loaded
    once, like the bias) and, for a 2-D r (a residual padded along the channels: its ldr channels are the output's
    [c0, c0 + ldr), `fill` elsewhere), the lanes to read per column vector and the fill. A part whose array is not
    float32 (conv_epilogue's placeholder) is absent: None, its operations not emitted."""
    vf = ir.VectorType(_f32, lanes)
    r, ldr, lo2, hi2, alpha, c0, fill = (builder.extract_value(ep, i) for i in range(7))
    slopes = pr = pad = None
    if ty.types[4].dtype == types.float32:
        palpha = _data_ptr(context, builder, ty.types[4], alpha)
        slopes = [_vload(builder, _gep(builder, palpha, builder.add(biasoff, _i(lanes * h)), _f32), vf)
                  for h in range(nv)]
    if ty.types[0].dtype == types.float32:
        pr = _data_ptr(context, builder, ty.types[0], r)
    if pr is not None and ty.types[0].ndim == 2:
        vi = ir.VectorType(_i32, lanes)
        first = builder.fptosi(c0, _i64)
        pr = builder.gep(pr, [builder.neg(first)], source_etype=_f32)  # (read only where the lanes say)
        j0 = builder.trunc(builder.sub(biasoff, first), _i32)  # a vector's channels from the residual's first
        n32 = builder.trunc(ldr, _i32)
        lanes_of = []
        for h in range(nv):
            j = builder.add(_splat(builder, j0, vi), ir.Constant(vi, [lanes * h + i for i in range(lanes)]))
            inside = builder.and_(builder.icmp_signed(">=", j, ir.Constant(vi, None)),
                                  builder.icmp_signed("<", j, _splat(builder, n32, vi)))
            lanes_of.append(builder.and_(inside, masks[h]))
        pad = (lanes_of, _splat(builder, fill, vf))
    return pr, ldr, _splat(builder, lo2, vf), _splat(builder, hi2, vf), slopes, pad


def _epilogue(builder, v, rv, terms, h):
    """ep's steps after the tile's own clamp, as the fused nodes compute them: + the residual rv (ADD) and the ADD's
    and its activation's clamp (one range, their intersection; a NaN passes), then PRELU (v >= 0 ? v : v * slope)."""
    _, _, lo2, hi2, slopes, _ = terms
    if rv is not None:
        v = builder.fadd(v, rv)
        v = builder.select(builder.fcmp_ordered("<", v, lo2), lo2, v)
        v = builder.select(builder.fcmp_ordered("<", hi2, v), hi2, v)
    if slopes is None:
        return v
    keep = builder.fcmp_ordered(">=", v, ir.Constant(v.type, None))
    return builder.select(keep, v, builder.fmul(v, slopes[h]))


def _emit_tile(context, builder, argtys, args, mr: int, lanes: int, nv: int) -> None:
    """The IR of one (mr x lanes*nv) tile call (make_tiles' contract), at the builder's position."""
    vf = ir.VectorType(_f32, lanes)
    vi = ir.VectorType(_i32, lanes)
    vb = ir.VectorType(_i1, lanes)
    (a_, abase_, rows_, ri_, nband_, segs_, nseg_, seglen_, b_, boff_, c_, coff_, ldc_, bias_, biasoff_, lo_, hi_,
     ncols_, ep_) = args
    mload = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(vf, [vf.as_pointer(), _i32, vb, vf]), f"llvm.masked.load.v{lanes}f32.p0")
    pa = _data_ptr(context, builder, argtys[0], a_)
    prows = _data_ptr(context, builder, argtys[2], rows_)
    psegs = _data_ptr(context, builder, argtys[5], segs_)
    pb = _gep(builder, _data_ptr(context, builder, argtys[8], b_), boff_, _f32)
    pc = _data_ptr(context, builder, argtys[10], c_)
    pbias = _data_ptr(context, builder, argtys[13], bias_)
    mstore = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [vf, vf.as_pointer(), _i32, vb]),
        f"llvm.masked.store.v{lanes}f32.p0")
    lov = _splat(builder, lo_, vf)
    hiv = _splat(builder, hi_, vf)
    iota = ir.Constant(vi, list(range(lanes)))
    ncols32 = builder.trunc(ncols_, _i32)
    masks, biases = [], []
    for h in range(nv):
        live = builder.sub(ncols32, ir.Constant(_i32, lanes * h))
        masks.append(builder.icmp_signed("<", iota, _splat(builder, live, vi)))
        biases.append(_vload(builder, _gep(builder, pbias, builder.add(biasoff_, _i(lanes * h)), _f32), vf))
    terms = None if isinstance(argtys[-1], types.NoneType) else \
        _epilogue_terms(context, builder, argtys[-1], ep_, biasoff_, masks, lanes, nv)
    with cgutils.for_range(builder, nband_) as band:
        ri = builder.add(ri_, builder.mul(band.index, _i(mr)))
        coff = builder.add(coff_, builder.mul(band.index, builder.mul(ldc_, _i(mr))))
        arow = []
        for r in range(mr):
            off = builder.load(_gep(builder, prows, builder.add(ri, _i(r)), _i64))
            arow.append(_gep(builder, pa, builder.add(abase_, off), _f32))
        # the next band's output lines, for writing (a large output starts in no cache: its lines are read for
        # ownership while this band computes, not when its stores reach them)
        pf = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [ir.PointerType(ir.IntType(8)), _i32, _i32, _i32]),
            "llvm.prefetch.p0")
        for r in range(mr):  # (past the last band these point past the output: no `inbounds`; prefetches never fault)
            nxt = builder.add(coff, builder.mul(ldc_, _i(mr + r)))
            for h in range(0, nv * lanes, 16):
                at = builder.gep(pc, [builder.add(nxt, _i(h))], source_etype=_f32)
                builder.call(pf, [builder.bitcast(at, ir.PointerType(ir.IntType(8))), ir.Constant(_i32, 1),
                                  ir.Constant(_i32, 3), ir.Constant(_i32, 1)])
        accs = [[cgutils.alloca_once_value(builder, ir.Constant(vf, None)) for _ in range(nv)]
                for _ in range(mr)]
        with cgutils.for_range(builder, nseg_) as seg:
            soff = builder.load(_gep(builder, psegs, seg.index, _i64))
            srow = [_gep(builder, p, soff, _f32) for p in arow]
            pbs = _gep(builder, pb, builder.mul(builder.mul(seg.index, seglen_), _i(NR)), _f32)
            with cgutils.for_range(builder, seglen_) as kk:
                k = kk.index
                pbk = _gep(builder, pbs, builder.mul(k, _i(NR)), _f32)
                bv = [_vload(builder, _gep(builder, pbk, _i(lanes * h), _f32), vf) for h in range(nv)]
                for r in range(mr):
                    av = _splat(builder, builder.load(_gep(builder, srow[r], k, _f32)), vf)
                    for h in range(nv):
                        # a separate multiply and add (not llvm.fma): the official kernels round the
                        # product before adding it, and a fused multiply-add differs in the last bits
                        prod = builder.fmul(av, bv[h])
                        builder.store(builder.fadd(builder.load(accs[r][h]), prod), accs[r][h])
        # epilogue: + bias, clamp to [lo, hi] (a NaN compares false and passes), store
        # (with ep, then its steps on a row r of the residual at r * ldr: the tile's rows are ri + band * mr + r)
        outs = []
        for r in range(mr):
            prow = _gep(builder, pc, builder.add(coff, builder.mul(ldc_, _i(r))), _f32)
            rrow = None if terms is None or terms[0] is None else _gep(builder, terms[0], builder.add(
                builder.mul(builder.add(ri, _i(r)), terms[1]), biasoff_), _f32)
            for h in range(nv):
                v = builder.fadd(builder.load(accs[r][h]), biases[h])
                v = builder.select(builder.fcmp_ordered("<", v, lov), lov, v)
                v = builder.select(builder.fcmp_ordered("<", hiv, v), hiv, v)
                rptr = None if rrow is None else builder.bitcast(_gep(builder, rrow, _i(lanes * h), _f32),
                                                                 vf.as_pointer())
                outs.append((v, builder.bitcast(_gep(builder, prow, _i(lanes * h), _f32), vf.as_pointer()), h,
                             rptr))

        def residual(rptr, h, whole):
            if rptr is None:
                return None
            if terms[5] is not None:  # padded: the channels it has, the fill elsewhere
                return builder.call(mload, [rptr, ir.Constant(_i32, 4), terms[5][0][h], terms[5][1]])
            if whole:
                return builder.load(rptr, align=4)
            # (the residual's rows end at the output's width: masked like the stores)
            return builder.call(mload, [rptr, ir.Constant(_i32, 4), masks[h], ir.Constant(vf, None)])

        def masked():
            for v, ptr, h, rptr in outs:
                if terms is not None:
                    v = _epilogue(builder, v, residual(rptr, h, False), terms, h)
                builder.call(mstore, [v, ptr, ir.Constant(_i32, 4), masks[h]])

        if masked_stores_native():
            masked()
        else:  # a whole tile (the common case) with plain stores: vmaskmovps stores are slow on AMD cores
            with builder.if_else(builder.icmp_signed(">=", ncols_, _i(lanes * nv))) as (whole, part):
                with whole:
                    for v, ptr, h, rptr in outs:
                        if terms is not None:
                            v = _epilogue(builder, v, residual(rptr, h, True), terms, h)
                        builder.store(v, ptr, align=4)
                with part:
                    masked()


def make_tiles(max_mr: int, lanes: int, nv: int, heights: tuple[int, ...] | None = None):
    """The micro-kernels of up to max_mr rows x lanes*nv columns (vectors of `lanes` floats, nv of them per row) as
    one Numba intrinsic, the tile height chosen by its first argument (a switch over the heights, each case its own
    code), run over nband consecutive bands of mr rows:

    tiles(mr, a, abase, rows, ri, nband, segs, nseg, seglen, b, b_off, c, c_off, ldc, bias, bias_off, lo, hi, ncols,
          ep)

    c[c_off + r * ldc + j] = clamp(sum_k A[r, k] * b[b_off + k * 32 + j] + bias[bias_off + j], lo, hi) for
    r < mr * nband, j < min(ncols, lanes * nv), where A[r, s * seglen + t] = a[abase + rows[ri + r] + segs[s] + t].
    The bands share one call: the bias, the limits and the column masks are loaded once (with K = 8, a pointwise
    convolution of 8 input channels, the per-call set-up had cost as much as the products). `heights`: the tile
    heights compiled (default 1..max_mr); another height does nothing. `ep`: None, or (r, ldr, lo2, hi2, alpha, c0,
    fill) for a convolution with fused successors (conv.py's epilogue option): each clamped value then goes through
    _epilogue with r[(ri + row) * ldr + bias_off + j] (a 2-D r: its channel j - c0, the fill outside its ldr) and
    alpha[bias_off + j] (alpha padded like the bias); see _epilogue_terms."""

    @intrinsic
    def tiles(typingctx, mr, a, abase, rows, ri, nband, segs, nseg, seglen, b, b_off, c, c_off, ldc, bias, bias_off,
              lo, hi, ncols, ep):
        i64, f32 = types.int64, types.float32
        if not isinstance(ep, types.NoneType):
            ep = types.Tuple((ep.types[0], i64, f32, f32, ep.types[4], f32, f32))
        sig = types.void(i64, a, i64, rows, i64, i64, segs, i64, i64, b, i64, c, i64, i64, bias, i64, f32, f32, i64,
                         ep)

        def codegen(context, builder, sig, args):
            end = builder.append_basic_block("tiles.end")
            switch = builder.switch(args[0], end)
            for m in heights or range(1, max_mr + 1):
                case = builder.append_basic_block(f"tiles.mr{m}")
                switch.add_case(ir.Constant(args[0].type, m), case)
                builder.position_at_end(case)
                _emit_tile(context, builder, sig.args[1:], args[1:], m, lanes, nv)
                builder.branch(end)
            builder.position_at_end(end)
            return context.get_dummy_value()

        return sig, codegen

    tiles.__name__ = tiles.__qualname__ = f"fma_tiles_{lanes}x{nv}" + (f"_h{max(heights)}" if heights else "")
    return tiles


# one kernel per tile width, every height up to MR in it: 32 columns (2 x 16 lanes), 16 (zmm) and 8 (ymm: on CPUs
# that split 512-bit operations in two, such as Zen 4, a narrow last panel then runs at full rate)
fma_tiles_8 = make_tiles(MR, 8, 1)
fma_tiles_16 = make_tiles(MR, 16, 1)
fma_tiles_32 = make_tiles(MR, 16, 2)
# Bands of TALL rows x 16 columns (one zmm accumulator a row): each A value is used by one multiply, which reads it
# from memory as an embedded broadcast ({1to16}) instead of a separate broadcast, and B is one vector a step. On a
# Zen 4 (512-bit operations split in two halves; that its broadcasts take FP pipes is our guess, not measured: no
# hardware counters in its VM), 3x3 layers of 16-64 channels went from 1.22-1.33x to 0.92-0.98x XNNPACK's time and
# 1x1 ones from 1.43-1.52x to 1.03-1.22x (6 x 32 tiles before); 12 to 16 rows measured alike, 8 rows slower.
# Leftover rows keep the 6 x 32 tiles.
TALL = 12
fma_tiles_tall = make_tiles(TALL, 16, 1, (TALL,))
# 1-2 rows (FULLY_CONNECTED of one or two rows, a matrix-vector product bound by reading the weights): a whole
# 32-column panel per tile as 4 vectors of 8 lanes (8 accumulators at most, so also on 16 registers), 4 independent
# chains of adds per row instead of 2, each panel read once, in order. On the AVX2 path always (1 x 1280 x 1000:
# 262 -> 204 us, 20 -> 25 GB/s of weights); on AVX-512 when the weights do not fit in half of L2 (from L2 the
# 2 x 16-lane tile is faster: 256 x 256 4.6 against 5.4 us; from L3 1 x 1280 x 1000 242 -> 213 us).
GEMV_ROWS = 2
gemv_tiles_32 = make_tiles(GEMV_ROWS, 8, 4)


# --- drivers --------------------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def run_tiles(t32, t16, t8, mr, width, a, abase, rows, ri, nb, segs, seglen, b, b_off, c, c_off, ldc, bias, bias_off,
              lo, hi, ncols, ep):
    """nb bands of tiles of mr rows and the first 32, 16 or 8 (width) columns of a panel, by the tile intrinsic of
    that width (make_tiles: t32, t16, t8)."""
    ns = segs.size
    if width == 32:
        t32(mr, a, abase, rows, ri, nb, segs, ns, seglen, b, b_off, c, c_off, ldc, bias, bias_off, lo, hi, ncols, ep)
    elif width == 16:
        t16(mr, a, abase, rows, ri, nb, segs, ns, seglen, b, b_off, c, c_off, ldc, bias, bias_off, lo, hi, ncols, ep)
    else:
        t8(mr, a, abase, rows, ri, nb, segs, ns, seglen, b, b_off, c, c_off, ldc, bias, bias_off, lo, hi, ncols, ep)


@njit(cache=True, inline="always")
def _bands(mr, width, a, abase, rows, r0, r1, segs, seglen, b, b_off, c, c_off, ldc, bias, bias_off, lo, hi, ncols,
           ep):
    """Rows [r0, r1) of one panel's columns (c_off: the panel's first column in row 0): the whole bands of mr rows
    in one tile call, then the leftover rows."""
    nb = (r1 - r0) // mr
    if nb > 0:
        run_tiles(fma_tiles_32, fma_tiles_16, fma_tiles_8, mr, width, a, abase, rows, r0, nb, segs, seglen, b, b_off,
                  c, c_off + r0 * ldc, ldc, bias, bias_off, lo, hi, ncols, ep)
    i = r0 + nb * mr
    if i < r1:
        run_tiles(fma_tiles_32, fma_tiles_16, fma_tiles_8, r1 - i, width, a, abase, rows, i, 1, segs, seglen, b,
                  b_off, c, c_off + i * ldc, ldc, bias, bias_off, lo, hi, ncols, ep)


@njit(cache=True, inline="always")
def each_batch(part, a, a_off, rows, b, b_off, sk, sn, K, bp, bias, c, N, lim, segs, i0, i1, r0, r1):
    """Batches [i0, i1), rows [r0, r1) of batch_gemm, through the driver's part (_gemm_part): batch i's right-hand
    side packed into bp when it differs from the previous batch's."""
    M = rows.size
    last = -1
    seglen = K // segs.size  # K, or 1 with one segment per k (a transposed left-hand side, read in place)
    for i in range(i0, i1):
        if b_off[i] != last:
            pack_panels(b, b_off[i], K, N, sk, sn, bp)
            last = b_off[i]
        part(a, a_off[i], rows, r0, r1, segs, seglen, bp, 0, bias, c, i * M * N, N, lim, 0, (N + NR - 1) // NR, None)


@njit(cache=True, inline="always")
def panel_chunk(part, args, wk, j, ep):
    """Chunk j of gemm_packed_par, ch = [r0, r1, p0, p1] * n (row band x panel range), through the driver's part
    (args: its first ten arguments)."""
    a, rows, segs, seglen, bp, bias, c, N, lim, ch = args[:10]
    part(a, 0, rows, ch[4 * j], ch[4 * j + 1], segs, seglen, bp, 0, bias, c, 0, N, lim, ch[4 * j + 2], ch[4 * j + 3],
         ep)


@njit(cache=True, inline="always")
def epilogue_of(args):
    """make_tiles' ep from gemm_packed_ep_par's chunk arguments (r, ldr and alpha after the ten of gemm_packed_par;
    lim = [lo, hi, lo2, hi2, c0, fill])."""
    lim = args[8]
    return args[10], args[11], lim[2], lim[3], args[12], lim[4], lim[5]


@njit(cache=True, inline="always")
def batch_chunk(part, args, wk, j):
    """Chunk j of batch_gemm_par, ch = [i0, i1, r0, r1] * n (batch range x row band), through the driver's part:
    worker wk packs the right-hand sides into its own slice of bp (T slices of whole panels)."""
    a, a_off, rows, b, b_off, sk, sn, K, bp, bias, c, N, lim, segs, ch, T = args
    size = bp.size // T
    each_batch(part, a, a_off, rows, b, b_off, sk, sn, K, bp[wk * size:(wk + 1) * size], bias, c, N, lim, segs,
               ch[4 * j], ch[4 * j + 1], ch[4 * j + 2], ch[4 * j + 3])


# the chunks of this module's parallel drivers (threads.run_chunks: a chunk function names its part, which a tuple of
# arguments could not carry without making the driver uncacheable)
@njit(cache=True, inline="always")
def _panel_chunk(args, wk, j):
    panel_chunk(_gemm_part, args, wk, j, None)


@njit(cache=True, inline="always")
def _panel_chunk_ep(args, wk, j):
    panel_chunk(_gemm_part, args, wk, j, epilogue_of(args))


@njit(cache=True, inline="always")
def _batch_chunk(args, wk, j):
    batch_chunk(_gemm_part, args, wk, j)


@njit(cache=True, nogil=True)
def gemm_packed(a, rows, segs, seglen, bp, bias, c, N, lim):
    """c [M, N] = clamp(A @ B + bias, lim) with A rows at a[rows[i]] (one reduction segment per entry of segs,
    each seglen long), B packed in panels (bp, see module doc), bias padded to whole panels, lim = [lo, hi].
    Serves pointwise/strided/KxK convolution (rows = pixels) and FULLY_CONNECTED (rows = batches)."""
    _gemm_part(a, 0, rows, 0, rows.size, segs, seglen, bp, 0, bias, c, 0, N, lim, 0, (N + NR - 1) // NR, None)


@njit(cache=True, nogil=True)
def gemm_packed_ep(a, rows, segs, seglen, bp, bias, c, N, lim, r, ldr, alpha):
    """gemm_packed with the fused successors of conv.py's epilogue option (make_tiles' ep): each output then also
    gets + r (rows ldr apart; 2-D: padded along the channels, lim[4] = c0, lim[5] = fill), the clamp to
    [lim[2], lim[3]] and PRELU by alpha (padded like the bias)."""
    _gemm_part(a, 0, rows, 0, rows.size, segs, seglen, bp, 0, bias, c, 0, N, lim, 0, (N + NR - 1) // NR,
               (r, ldr, lim[2], lim[3], alpha, lim[4], lim[5]))


@njit(cache=True, nogil=True, _nrt=False)
def batch_gemm(a, a_off, rows, b, b_off, sk, sn, K, bp, bias, c, N, lim, segs):
    """For every batch i: c[i] [M, N] = clamp(A_i @ B_i + bias) with A_i rows at a[a_off[i] + rows[m]] (M =
    rows.size, segs = [0], K values each) and B_i[k, n] = b[b_off[i] + k * sk + n * sn], packed into the scratch
    bp (whole panels of K x 32) when it differs from the previous batch's."""
    each_batch(_gemm_part, a, a_off, rows, b, b_off, sk, sn, K, bp, bias, c, N, lim, segs, 0, a_off.size, 0, rows.size)


# --- prepare-time helpers (numpy) -----------------------------------------------------------------------------------


def panel_count(n: int) -> int:
    return (n + NR - 1) // NR


def pack_weights(w_kn: np.ndarray) -> np.ndarray:
    """A constant B [K, N] as packed panels (flat float32, panel_count(N) * K * 32)."""
    K, N = w_kn.shape
    P = panel_count(N)
    padded = np.zeros((K, P * NR), np.float32)
    padded[:, :N] = w_kn
    return np.ascontiguousarray(padded.reshape(K, P, NR).transpose(1, 0, 2)).reshape(-1)


def pad_bias(bias: np.ndarray | None, n: int) -> np.ndarray:
    """The bias (or zeros) padded to whole panels."""
    out = np.zeros(panel_count(n) * NR, np.float32)
    if bias is not None:
        out[:n] = bias
    return out


def conv_tables(N: int, OH: int, OW: int, C: int, KH: int, KW: int, Hp: int, Wp: int, sh: int, sw: int, dh: int,
                dw: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(rows, segs, seglen) of a direct convolution over a padded NHWC input [N, Hp, Wp, C]: one row per output
    pixel (the offset of its receptive field's corner), one segment per filter row (KW * C contiguous values)
    when dw == 1 or KW == 1, else per tap (C values). The reduction order (kh, kw, c) is that of the packed
    [KH, KW, C, CO] filter."""
    n = np.arange(N, dtype=np.int64)[:, None, None]
    oh = np.arange(OH, dtype=np.int64)[None, :, None]
    ow = np.arange(OW, dtype=np.int64)[None, None, :]
    rows = (((n * Hp + oh * sh) * Wp + ow * sw) * C).reshape(-1)
    if dw == 1 or KW == 1:
        segs = np.arange(KH, dtype=np.int64) * (dh * Wp * C)
        seglen = KW * C
    else:
        kh = np.arange(KH, dtype=np.int64)[:, None]
        kw = np.arange(KW, dtype=np.int64)[None, :]
        segs = ((kh * dh * Wp + kw * dw) * C).reshape(-1)
        seglen = C
    return np.ascontiguousarray(rows), np.ascontiguousarray(segs), seglen


# --- scheduling (called from the prepare functions of CONV_2D, FULLY_CONNECTED, BATCH_MATMUL) ------------------------


def _packed_bias(ctx: PrepareContext, b: Tensor | None, n: int):
    """The bias padded to whole panels: in prepare when constant (or absent), else by a scheduled copy."""
    if b is None or b.is_const:
        return pad_bias(None if b is None else np.asarray(b.data, np.float32).reshape(-1), n)
    padded = ctx.temp((panel_count(n) * NR,), np.float32)
    ctx.call(pack_panels, ctx.view(b, (n,)), 0, 1, n, 0, 1, padded)
    return padded


def _packed_weights(ctx: PrepareContext, w_const: np.ndarray | None, w: Tensor, K: int, N: int):
    """Weights stored [N, K] (FULLY_CONNECTED, OHWI filters) packed as B = W^T in panels: now when constant, else
    by a scheduled pack_panels."""
    if w_const is not None:
        return ctx.const(pack_weights(np.asarray(w_const, np.float32).reshape(N, K).T))
    bp = ctx.temp((panel_count(N) * K * NR,), np.float32)
    ctx.call(pack_panels, ctx.view(w, (w.size,)), 0, K, N, 1, K, bp)
    return bp


def schedule_conv2d(ctx: PrepareContext, x: Tensor, f: Tensor, b: Tensor | None, out: Tensor, geo,
                    drivers: GemmDrivers | None = None, ep: tuple | None = None) -> None:
    """CONV_2D (one group) as a direct convolution: the input is copied into a zero-padded temporary when the
    padding (or a window reaching past the input) needs it, then gemm_packed runs with one row per output pixel.
    `drivers`: the vector width's drivers (default ZMM; simd_f32_narrow.float_drivers()). `ep`: (r, ldr, alpha,
    (lo2, hi2, c0, fill)), the fused successors (gemm_packed_ep; alpha padded to whole panels)."""
    N, H, W, CI = x.shape
    CO, KH, KW, _ = f.shape
    _, OH, OW, _ = out.shape
    sh, sw, dh, dw, pt, pl = (int(v) for v in geo)
    Hp = max(H + pt, (OH - 1) * sh + (KH - 1) * dh + 1)
    Wp = max(W + pl, (OW - 1) * sw + (KW - 1) * dw + 1)
    xin = ctx.view(x, (x.size,))
    if (Hp, Wp) != (H, W):
        xp = ctx.temp((N * Hp * Wp * CI,), np.float32)
        ch, t = image_row_parts(ctx, N * Hp * Wp * CI, N, Hp)
        if ch:
            ctx.call(pad_nhwc_par, xin, xp, H, W, CI, Hp, Wp, pt, pl, np.array(ch, np.int64).reshape(-1),
                     ctx.temp((1,), np.int64), t)
        else:
            ctx.call(pad_nhwc, xin, xp, N, H, W, CI, Hp, Wp, pt, pl)
        xin = xp
    rows, segs, seglen = conv_tables(N, OH, OW, CI, KH, KW, Hp, Wp, sh, sw, dh, dw)
    K = KH * KW * CI
    bp = _packed_weights(ctx, f.data, f, K, CO)
    lim = _limits(ctx) if ep is None else np.concatenate([_limits(ctx), np.asarray(ep[3], np.float32)])
    _schedule_gemm(ctx, xin, rows, segs, seglen, bp, _packed_bias(ctx, b, CO), ctx.view(out, (out.size,)), CO,
                   lim, drivers, ep and ep[:3])


def schedule_fully_connected(ctx: PrepareContext, x: Tensor, w: Tensor, w_dense: np.ndarray | None,
                             b: Tensor | None, out: Tensor, batch: int, K: int, units: int,
                             drivers: GemmDrivers | None = None) -> None:
    """FULLY_CONNECTED: weights [units, K] packed as B = W^T; one row per batch (with one row, each panel of
    the weights is streamed once)."""
    bp = _packed_weights(ctx, w_dense, w, K, units)
    rows = np.arange(batch, dtype=np.int64) * K
    _schedule_gemm(ctx, ctx.view(x, (x.size,)), rows, np.zeros(1, np.int64), K, bp, _packed_bias(ctx, b, units),
                   ctx.view(out, (out.size,)), units, _limits(ctx), drivers)


def schedule_batch_matmul(ctx: PrepareContext, a, a_off: np.ndarray, b, b_off: np.ndarray, out, M: int, K: int,
                          N: int, drivers: GemmDrivers | None = None, a_strides: tuple[int, int] | None = None,
                          b_strides: tuple[int, int] | None = None) -> None:
    """BATCH_MATMUL: a, b flat with A_i[m, k] = a[a_off[i] + m * sm + k * sk] ((sm, sk) = a_strides, default
    (K, 1)) and B_i[k, n] = b[b_off[i] + k * sk + n * sn] ((sk, sn) = b_strides, default (N, 1)); out the flat
    output. A is read in place: rows from a row table, k contiguous (one reduction segment) or else one segment of
    one value per k (a transposed or strided lhs); B is packed at run time from where it is, once per distinct rhs
    matrix. So transposed operands (adj_x, adj_y, a TRANSPOSE folded into the node) need no copy."""
    d = drivers or ZMM
    lim = np.array([-np.inf, np.inf], np.float32)
    am, ak = a_strides or (K, 1)
    rows = np.arange(M, dtype=np.int64) * am
    segs = np.arange(K, dtype=np.int64) * ak if ak != 1 and K > 0 else np.zeros(1, np.int64)
    sk, sn = b_strides or (N, 1)
    B = a_off.size
    t = threads_for(ctx, B * M * K * N)
    if t > 1 and (B >= t or M >= 2 * d.mr * t):
        # batch ranges when there are enough batches, else row bands of each batch (each chunk packs its own B)
        parts = CHUNKS_PER_THREAD * t
        ch = [(i0, i1, 0, M) for i0, i1 in bands(B, parts)] if B >= t else \
            [(0, B, r0, r1) for r0, r1 in bands(M, parts, d.mr)]
        bp = ctx.temp((t * panel_count(N) * K * NR,), np.float32)
        ctx.call(d.batch_gemm_par, a, a_off, rows, b, b_off, sk, sn, K, bp, pad_bias(None, N), out, N, lim,
                 segs, np.array(ch, np.int64).reshape(-1), ctx.temp((1,), np.int64), t)
        return
    bp = ctx.temp((panel_count(N) * K * NR,), np.float32)
    ctx.call(d.batch_gemm, a, a_off, rows, b, b_off, sk, sn, K, bp, pad_bias(None, N), out, N, lim, segs)


def _limits(ctx: PrepareContext) -> np.ndarray:
    lo, hi = float_activation_range(ctx, ctx.options.get("fused_activation_function", 0))
    return np.array([lo, hi], np.float32)


# --- multi-threaded drivers (num_threads > 1, see kernels/base/threads.py) --------------------------------------------


@njit(cache=True, inline="always")
def _gemm_part(a, abase, rows, r0, r1, segs, seglen, bp, bp_off, bias, c, c_off, N, lim, p0, p1, ep):
    """C rows [r0, r1) x panels [p0, p1) of clamp(A @ B + bias) (rows of N floats from c[c_off], a packed B from
    bp[bp_off]): per panel, the whole bands of MR rows in one tile call, then the leftover rows. ep: make_tiles'."""
    lo, hi = lim[0], lim[1]
    panel = segs.size * seglen * NR
    if 0 < r1 - r0 <= GEMV_ROWS and 4 * panel * (p1 - p0) > L2_BYTES // 2:
        for p in range(p0, p1):
            n0 = p * NR
            ncols = min(NR, N - n0)
            width = 32 if ncols > 16 else (16 if ncols > 8 else 8)
            run_tiles(gemv_tiles_32, fma_tiles_16, fma_tiles_8, r1 - r0, width, a, abase, rows, r0, 1, segs, seglen,
                      bp, bp_off + p * panel, c, c_off + n0 + r0 * N, N, bias, n0, lo, hi, ncols, ep)
        return
    # the whole bands of TALL rows in groups whose A values fit in L1 beside the half panel of B (both halves of
    # every panel pass over a group while it is there), then the leftover rows on the 6 x 32 tiles
    K = segs.size * seglen
    room = max(L1D_BYTES - K * 64, L1D_BYTES // 4)
    group = max(room // (4 * max(K, 1) * TALL), 1) * TALL
    end = r0 + (r1 - r0) // TALL * TALL
    for g0 in range(r0, end, group):
        nb = (min(g0 + group, end) - g0) // TALL
        for p in range(p0, p1):
            n0 = p * NR
            ncols = min(NR, N - n0)
            for q in range(2):
                if ncols > 16 * q:
                    fma_tiles_tall(TALL, a, abase, rows, g0, nb, segs, segs.size, seglen, bp, bp_off + p * panel
                                   + 16 * q, c, c_off + n0 + 16 * q + g0 * N, N, bias, n0 + 16 * q, lo, hi,
                                   ncols - 16 * q, ep)
    for p in range(p0, p1):
        n0 = p * NR
        ncols = min(NR, N - n0)
        width = 32 if ncols > 16 else (16 if ncols > 8 else 8)
        _bands(MR, width, a, abase, rows, end, r1, segs, seglen, bp, bp_off + p * panel, c, c_off + n0, N, bias, n0,
               lo, hi, ncols, ep)


@njit(cache=True, nogil=True, parallel=PARALLEL)
def gemm_packed_par(a, rows, segs, seglen, bp, bias, c, N, lim, ch, cnt, T):
    """gemm_packed over the chunks ch = [r0, r1, p0, p1] * n (row band x panel range), taken in turn by T workers
    (threads.run_chunks; cnt: a one-int64 counter scratch)."""
    run_chunks(T, cnt, ch.size // 4, _panel_chunk, (a, rows, segs, seglen, bp, bias, c, N, lim, ch))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def gemm_packed_ep_par(a, rows, segs, seglen, bp, bias, c, N, lim, r, ldr, alpha, ch, cnt, T):
    """gemm_packed_ep over the chunks of gemm_packed_par."""
    run_chunks(T, cnt, ch.size // 4, _panel_chunk_ep, (a, rows, segs, seglen, bp, bias, c, N, lim, ch, r, ldr, alpha))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def batch_gemm_par(a, a_off, rows, b, b_off, sk, sn, K, bp, bias, c, N, lim, segs, ch, cnt, T):
    """batch_gemm over the chunks ch = [i0, i1, r0, r1] * n (batch range x row band), taken in turn by T workers,
    each packing into its own slice of bp."""
    run_chunks(T, cnt, ch.size // 4, _batch_chunk,
               (a, a_off, rows, b, b_off, sk, sn, K, bp, bias, c, N, lim, segs, ch, T))


def gemm_chunks(M: int, P: int, threads: int, mr: int = MR) -> np.ndarray:
    """[r0, r1, p0, p1] per chunk: row bands (multiples of the tile height mr) when there are enough rows, else
    panel ranges."""
    parts = CHUNKS_PER_THREAD * threads
    if M >= 2 * mr * threads or P < threads:
        ch = [(r0, r1, 0, P) for r0, r1 in bands(M, parts, mr)]
    else:
        ch = [(0, M, p0, p1) for p0, p1 in bands(P, parts)]
    return np.array(ch, np.int64).reshape(-1)


def _schedule_gemm(ctx: PrepareContext, a, rows: np.ndarray, segs: np.ndarray, seglen: int, bp, bias, c, N: int,
                   lim: np.ndarray, drivers: GemmDrivers | None = None, ep: tuple | None = None) -> None:
    """gemm_packed, or its parallel driver when ctx.num_threads > 1 and the GEMM is big enough (of `drivers`,
    default ZMM); with ep = (r, ldr, alpha) gemm_packed_ep (lim: four limits)."""
    d = drivers or ZMM
    M, P = rows.size, panel_count(N)
    t = threads_for(ctx, M * N * segs.size * seglen)
    ch = gemm_chunks(M, P, t, d.mr) if t > 1 else None
    args = (a, rows, segs, seglen, bp, bias, c, N, lim, *(ep or ()))
    if ch is None or ch.size <= 4:
        ctx.call(d.gemm_packed_ep if ep else d.gemm_packed, *args)
    else:
        ctx.call(d.gemm_packed_ep_par if ep else d.gemm_packed_par, *args, ch, ctx.temp((1,), np.int64), t)


class GemmDrivers(NamedTuple):
    """The compiled drivers of one vector width (same arguments, same results): what the schedule functions call."""

    mr: int  # rows of the largest tile (the row bands of the parallel drivers are multiples of it)
    gemm_packed: Callable
    gemm_packed_par: Callable
    batch_gemm: Callable
    batch_gemm_par: Callable
    gemm_packed_ep: Callable
    gemm_packed_ep_par: Callable


ZMM = GemmDrivers(MR, gemm_packed, gemm_packed_par, batch_gemm, batch_gemm_par, gemm_packed_ep, gemm_packed_ep_par)


__all__ = ["GemmDrivers", "ZMM", "gemm_packed", "gemm_packed_ep", "batch_gemm", "gemm_packed_par", "batch_gemm_par",
           "pack_panels", "pad_nhwc", "pad_nhwc_par", "pack_weights", "pad_bias", "conv_tables", "panel_count", "MR",
           "NR"]
