"""A float inverted-residual chain run in bands of rows: [1x1 CONV_2D ->] DEPTHWISE_CONV_2D [-> 1x1 CONV_2D] (the
projection maybe with its fused residual ADD / clamp / PRELU), one node FUSED_CONV_BANDS (made by
lite_numba/runtime/fusion_bands.py).

Run op by op, a MobileNetV2 block writes its expanded activation whole (112 x 112 x 96 floats: 4.8 MB) before the
depthwise layer reads it, and the depthwise output whole before the projection reads it. Here each stage's node is
prepared as it would be alone (the same kernels, the same packed weights); then, with one thread and when every stage
scheduled its one SIMD call (gemm_packed / gemm_packed_ep of the path's drivers, dwconv_f32_direct), one driver runs
them band by band: for a band of depthwise output rows, the expanded rows it needs are computed into a band scratch
(the rows it shares with the previous band moved to the scratch's start, the others computed after them), the
depthwise layer reads that scratch and writes the band's rows to a second one, and the projection writes their
pixels to the output. Each stage's kernel runs at its native address (threads.call_at) on a contiguous range of its
rows, the depthwise kernel with its top padding moved by the band's offsets so each row's taps inside the image are
the whole image's: every output value is computed by the same tile code from the same operands in the same order, so
the bytes are the unfused nodes' (tests/test_conv_bands.py runs both). The intermediates keep their storage (the
node's outputs) but are not written then: nothing reads them (experimental_preserve_all_tensors turns the rewrite
off).

Bands are taken when the intermediates would not fit in L2 (the L2 the machine reports, simd_f32.L2_BYTES) and make
more than one band of the budget: as many depthwise output rows as keep the band's expanded, depthwise and projected
rows within half of L2, at least MIN_BAND_PIXELS pixels, and no stage call of GEMV_ROWS rows or fewer (those take
the GEMM's matrix-vector tiles, another summation). Otherwise (threads, the portable path, a depthwise layer that
takes another kernel, a residual padded along the channels) the stages' calls run one after the other: the unfused
nodes' schedule exactly. On the Zen 4 VM (1 MB L2, 32 MB L3) the bands measured neutral, whole models 0.98-1.00x
the unbanded time (the 1x1 GEMMs there are compute-bound; the 112 x 112 blocks' chains 0.82-0.86x per node); two
threads (row parts, each recomputing the expanded rows its windows need) measured no better, so they run unbanded
(docs/performance.md, the twenty-eighth session).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from lite_numba.kernels.base.threads import call_at, serial_address
from lite_numba.kernels.linear import simd_f32
from lite_numba.kernels.linear.dwconv_direct import dwconv_f32_direct
from lite_numba.kernels.linear.simd_f32_narrow import YMM
from numba import njit

from lite_numba.ops import ConstArg, PrepareContext, Tensor, TensorView, kernel

MIN_BAND_PIXELS = 8
BAND_BYTES: int | None = None  # the band's budget (None: half of L2); tests set a small one for many bands


@njit(cache=True, nogil=True)
def conv_bands_f32(ga, a, rows, segs, seglen, bp, bias, lim1, da, e4, w, dbias, d4, geo, dlim,
                   pa, prows, psegs, pseglen, pbp, pbias, out, N3, plim, r, ldr, alpha, ep,
                   sched, es, ds, g2, tl):
    """For each band j, sched[j] = [n, y0, y1, lo, hi, new]: the depthwise output rows [y0, y1) of image
    n, which read its input rows [lo, hi). With the expansion (its kernel at address ga; 0: none) those rows are in
    the band scratch es from its start: the rows [lo, new) the previous band computed are moved there, the rows
    [new, hi) computed after them; else they are read from e4. The depthwise kernel (at da) reads them with its top
    padding moved by the band's offsets (g2, from geo; tl its tap tables) and writes the band's rows to the scratch
    ds when the projection (at pa; 0: none; ep: with the epilogue's residual r, ldr floats a row, and slopes alpha)
    follows, which writes their pixels to out; else to d4."""
    H, W, C = e4.shape[1], e4.shape[2], e4.shape[3]
    OH, OW, DC = d4.shape[1], d4.shape[2], d4.shape[3]
    image = H * W * C
    g2[:] = geo
    prev = 0
    for j in range(sched.shape[0]):
        n, y0, y1, lo, hi, new = sched[j, 0], sched[j, 1], sched[j, 2], sched[j, 3], sched[j, 4], sched[j, 5]
        if ga != 0:
            src = (lo - prev) * W * C
            for i in range((new - lo) * W * C):  # forward: the destination starts before the source
                es[i] = es[src + i]
            if hi > new:
                q0, q1 = (n * H + new) * W, (n * H + hi) * W
                off = (new - lo) * W * C
                call_at(ga, (a, rows[q0:q1], segs, seglen, bp, bias, es[off:off + (q1 - q0) * C], C, lim1))
            xv = es[:(hi - lo) * W * C].reshape(1, hi - lo, W, C)
            top = lo
            prev = lo
        else:
            xv = e4.reshape(-1)[n * image:(n + 1) * image].reshape(1, H, W, C)
            top = 0
        if pa != 0:
            ov = ds[:(y1 - y0) * OW * DC].reshape(1, y1 - y0, OW, DC)
            first = y0
        else:
            ov = d4.reshape(-1)[n * OH * OW * DC:(n + 1) * OH * OW * DC].reshape(1, OH, OW, DC)
            first = 0
        g2[4] = geo[4] + top - first * geo[0]
        call_at(da, (xv, w, dbias, ov, g2, dlim, tl, 0, 1, y0 - first, y1 - first))
        if pa != 0:
            p0, p1 = (n * OH + y0) * OW, (n * OH + y1) * OW
            head = (ds, prows[:p1 - p0], psegs, pseglen, pbp, pbias, out[p0 * N3:p1 * N3], N3, plim)
            if ep:
                call_at(pa, head + (r[p0 * ldr:p1 * ldr], ldr, alpha))
            else:
                call_at(pa, head)


def band_schedule(N: int, H: int, OH: int, geo, KH: int, rows: int) -> np.ndarray:
    """[n, y0, y1, lo, hi, new] per band of at most `rows` depthwise output rows of each image n: [lo, hi) the input
    rows its windows reach inside the image, [new, hi) those no earlier band of the image reached."""
    sh, dh, pt = int(geo[0]), int(geo[2]), int(geo[4])
    out = []
    for n in range(N):
        done = 0
        for y0 in range(0, OH, rows):
            y1 = min(y0 + rows, OH)
            lo = min(max(y0 * sh - pt, 0), H)
            hi = max(min((y1 - 1) * sh - pt + (KH - 1) * dh + 1, H), lo)
            new = min(max(lo, done), hi)
            out.append((n, y0, y1, lo, hi, new))
            done = max(done, hi)
    return np.array(out, np.int64).reshape(-1, 6)


def _stage_contexts(ctx: PrepareContext) -> list[PrepareContext]:
    """Each stage's node prepared alone by its builtin kernel (options["stages"]: (op, version, builtin code, input
    count, output, options) per stage; the fused node's inputs are theirs, in order)."""
    from lite_numba.kernels.registry import BUILTINS  # lazy: the registry imports this module

    kernels = {row[0]: row[3] for row in BUILTINS if row[0] in ("CONV_2D", "DEPTHWISE_CONV_2D")}
    subs, pos = [], 0
    for op, version, code, n_in, out, options in ctx.options["stages"]:
        node = dataclasses.replace(ctx.node, op_name=op, version=version, builtin_code=code,
                                   inputs=ctx.node.inputs[pos:pos + n_in], outputs=(out,), options=options)
        sub = ctx.for_node(node, kernels[op])
        kernels[op].prepare(sub)
        ctx.check(not (sub.in_place or sub.views or sub.sets_outputs), f"stage {op} cannot run in bands")
        subs.append(sub)
        pos += n_in
    return subs


def _arg_tensor(a):
    return a.tensor if isinstance(a, TensorView) else a


def _identity_rows(rows, pixels: int, width: int) -> bool:
    """A pointwise GEMM's row table: pixel i at i * width."""
    v = rows.array if isinstance(rows, ConstArg) else None
    return v is not None and v.size == pixels and np.array_equal(v, np.arange(pixels, dtype=np.int64) * width)


def _gemm_call(sub: PrepareContext, reads: Tensor, writes: Tensor):
    """(fn, args) when the stage is one pointwise gemm_packed[_ep] of a SIMD path reading `reads` row by row into
    `writes` (a residual, if any, one row of ldr floats per pixel), else None."""
    if len(sub.calls) != 1:
        return None
    fn, args = sub.calls[0].fn, sub.calls[0].args
    plain = fn in (simd_f32.ZMM.gemm_packed, YMM.gemm_packed)
    if not plain and fn not in (simd_f32.ZMM.gemm_packed_ep, YMM.gemm_packed_ep):
        return None
    a, rows, segs, seglen, _bp, _bias, c, N = args[:8]
    if (_arg_tensor(a) is not reads or _arg_tensor(c) is not writes or not isinstance(segs, ConstArg)
            or segs.array.size != 1 or seglen != reads.shape[-1] or N != writes.shape[-1]
            or not _identity_rows(rows, reads.size // reads.shape[-1], reads.shape[-1])):
        return None
    if not plain and not (isinstance(args[9], ConstArg) or len(args[9].shape) == 1 and args[10] == N):
        return None  # a residual padded along the channels: rows of another pitch
    return fn, list(args)


def _bands(ctx: PrepareContext, subs: list[PrepareContext]):
    """conv_bands_f32's arguments running the stages' one-thread calls in bands, or None when the stages did not
    schedule what it runs or when bands would not pay (module doc)."""
    first = subs[0].op_name == "CONV_2D"
    dw = subs[1 if first else 0]
    proj = subs[-1] if subs[-1].op_name == "CONV_2D" and subs[-1] is not subs[0] else None
    x, dout = dw.input(0), dw.output(0)
    if len(dw.calls) != 1 or dw.calls[0].fn is not dwconv_f32_direct:
        return None
    dargs = list(dw.calls[0].args)
    if _arg_tensor(dargs[0]) is not x or dargs[3] is not dout:
        return None
    g1 = _gemm_call(subs[0], subs[0].input(0), x) if first else None
    g3 = _gemm_call(proj, dout, proj.output(0)) if proj is not None else None
    if (first and g1 is None) or (proj is not None and g3 is None):
        return None
    N, H, W, C = x.shape
    _, OH, OW, DC = dout.shape
    KH = dw.input(1).shape[1]
    CO = proj.output(0).shape[-1] if proj else 0
    geo = dargs[4].array
    sh = int(geo[0])
    # the band's expanded rows and depthwise rows (scratch) and projected rows within half of L2
    row_bytes = 4 * ((sh * W * C if first else 0) + OW * DC + OW * CO)
    budget = BAND_BYTES if BAND_BYTES is not None else simd_f32.L2_BYTES // 2
    rows = max(budget // max(row_bytes, 1), -(-MIN_BAND_PIXELS // OW), 1)
    whole = 4 * (N * H * W * C * first + N * OH * OW * DC * (proj is not None))
    if rows >= OH or whole <= budget * 2:
        return None  # one band, or the intermediates fit in L2 anyway
    sched = band_schedule(N, H, OH, geo, KH, rows)
    sizes = [(sched[:, 2] - sched[:, 1]) * OW] if proj is not None else []
    if first:
        sizes.append((sched[:, 4] - sched[:, 5]) * W)
    if any(int(s[s > 0].min(initial=simd_f32.GEMV_ROWS + 1)) <= simd_f32.GEMV_ROWS for s in sizes):
        return None  # a call of GEMV_ROWS rows or fewer would take the matrix-vector tiles
    f1 = ctx.const(np.zeros(1, np.float32))
    R = int((sched[:, 4] - sched[:, 3]).max()) if first else 0
    es = ctx.temp((max(R * W * C, 1),), np.float32) if first else f1
    ds = ctx.temp((rows * OW * DC,), np.float32) if proj is not None else f1
    g2 = ctx.temp((6,), np.int64)
    tl = dargs[6]  # the depthwise stage's own tap tables ([4, KH * KW] at one thread)
    if g1 is not None:  # gemm_packed(a, rows, segs, seglen, bp, bias, c, N, lim), c: a band of the scratch
        fn1, a1 = g1
        head = [serial_address(fn1, [*a1[:6], es, a1[7], a1[8]]), *a1[:6], a1[8]]
    else:
        head = [0, *_placeholder_gemm(ctx)]
    xv = ctx.const(np.zeros((1, 1, 1, 1), np.float32))
    dcall = [xv, dargs[1], dargs[2], xv, dargs[4], dargs[5], tl, 0, 1, 0, 1]
    dpart = [serial_address(dwconv_f32_direct, dcall), dargs[0], dargs[1], dargs[2], dargs[3], dargs[4], dargs[5]]
    if g3 is not None:  # (ds, rows, segs, seglen, bp, bias, out, N, lim[, r, ldr, alpha])
        fn3, a3 = g3
        ep = len(a3) > 9
        tail = [serial_address(fn3, [ds, *a3[1:]]), *a3[1:9], *(a3[9:12] if ep else _placeholder_ep(ctx)), int(ep)]
    else:
        tail = [0, *_placeholder_gemm(ctx)[1:6], f1, 1, ctx.const(np.zeros(2, np.float32)), *_placeholder_ep(ctx), 0]
    return [*head, *dpart, *tail, sched, es, ds, g2, tl]


def _placeholder_gemm(ctx: PrepareContext) -> list:
    """(a, rows, segs, seglen, bp, bias, lim) of the types of an absent expansion's call (never made)."""
    f1 = ctx.const(np.zeros(1, np.float32))
    i1 = ctx.const(np.zeros(1, np.int64))
    return [f1, i1, i1, 1, f1, f1, ctx.const(np.zeros(2, np.float32))]


def _placeholder_ep(ctx: PrepareContext) -> list:
    f1 = ctx.const(np.zeros(1, np.float32))
    return [f1, 1, f1]


def _prepare(ctx: PrepareContext) -> None:
    subs = _stage_contexts(ctx)
    # one thread only: with two, banding measured no faster and its row parts recompute expanded rows
    args = _bands(ctx, subs) if ctx.num_threads == 1 else None
    for sub in subs:  # the stages' scratch (banded: the depthwise tap tables the driver passes on)
        ctx.temps.extend(sub.temps)
    if args is None:
        for sub in subs:
            ctx.calls.extend(sub.calls)
        return
    ctx.call(conv_bands_f32, *args)


FUSED_CONV_BANDS = kernel("FUSED_CONV_BANDS")(_prepare)

__all__ = ["FUSED_CONV_BANDS", "conv_bands_f32", "band_schedule", "MIN_BAND_PIXELS"]
