"""A float CONV_2D's fused successors (lite_numba/runtime/fusion.py fuse_conv_epilogues): the residual ADD that
alone reads its output, the ADD's and its activation's clamp, and a PRELU with per-channel slopes, computed on each
output value as it leaves the convolution's tiles instead of in passes of their own over the activation.

The node then has inputs (x, filter, bias, r, alpha) (-1 where absent) and options["epilogue"] = (lo2, hi2[, c0,
fill]): r may be padded along the channels (BlazeFace's ADD(PAD(x), conv)), its channels then the output's
[c0, c0 + its count) and `fill` the others'. Every output is v = clamp(conv + bias, the conv's own limits), then
v + r, clamped to [lo2, hi2] (the intersection of the
ADD's fused activation and a following RELU-family node: the composition of two such clamps, all of which contain
[0, 1]), then v >= 0 ? v : v * alpha[c]: the unfused nodes' float32 operations in their order, so the bytes are
theirs. On the SIMD paths the GEMM tiles apply it (simd_f32.make_tiles' `ep`), an absent residual or slope vector
passed as a one-byte placeholder, whose type leaves its operations out of the compiled tile (each is a few vector
operations an output vector, as much as a pass over a small activation costs); the portable and grouped
convolutions run `epilogue_pass` after the convolution, on its output in place."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.linear.simd_f32 import NR, pack_panels, pad_bias, panel_count
from numba import njit

from lite_numba.ops import PrepareContext, Tensor


@njit(cache=True, nogil=True, error_model="numpy")
def epilogue_pass(out, r, ldr, alpha, lim, C, parts):
    """out [M, C] (flat) <- the epilogue of every value in place (module doc): with parts & 1, + r[i * ldr + c - c0]
    (lim[5] outside [c0, c0 + ldr), c0 = lim[4]) and the clamp to [lim[2], lim[3]] (min / max: NaN passes, as the
    unfused nodes); with parts & 2, PRELU by alpha[c]."""
    lo, hi, fill = lim[2], lim[3], lim[5]
    c0 = np.int64(lim[4])
    for i in range(out.size // C):
        o = out[i * C:(i + 1) * C]
        for c in range(C):
            v = o[c]
            if parts & 1:
                k = c - c0
                v = min(max(v + (r[i * ldr + k] if 0 <= k < ldr else fill), lo), hi)
            o[c] = v if v >= 0 or not parts & 2 else v * alpha[c]


def epilogue_terms(ctx: PrepareContext, out: Tensor, limits) -> tuple:
    """(r, ldr, alpha, (lo2, hi2)) for the node's epilogue option: the residual input 3 read in place, the slopes of
    input 4 padded to whole panels (float32, or a float16 constant a DEQUANTIZE would have converted: the same
    values; copied at every invoke when computed at run time); an absent one as a uint8 placeholder."""
    C = out.shape[-1]
    r, a = ctx.input(3), ctx.input(4)
    res, ldr, slopes = ctx.const(np.zeros(1, np.uint8)), 0, ctx.const(np.zeros(1, np.uint8))
    lo, hi, c0, fill = (*limits, 0, 0.0)[:4]
    if r is not None:
        nc = r.shape[-1] if r.shape else 0
        ctx.check(r.dtype == np.float32 and tuple(r.shape[:-1]) == tuple(out.shape[:-1]) and 0 <= c0
                  and c0 + nc <= C and (nc == C or len(limits) == 4),
                  f"fused residual {list(r.shape)} {r.dtype} does not match the output {list(out.shape)}")
        # (2-D: a residual padded along the channels, simd_f32._epilogue_terms)
        res, ldr = ctx.view(r, (r.size // max(nc, 1), nc) if len(limits) == 4 else (r.size,)), nc
    if a is not None:
        ctx.check(a.size == C and a.dtype in (np.float32, np.float16), f"fused PRELU slopes {list(a.shape)} "
                  f"{a.dtype} are not {C} float values")
        if a.is_const:
            slopes = pad_bias(np.asarray(a.data).astype(np.float32).reshape(-1), C)
        else:
            ctx.check(a.dtype == np.float32, "fused PRELU slopes computed at run time must be float32")
            slopes = ctx.temp((panel_count(C) * NR,), np.float32)
            ctx.call(pack_panels, ctx.view(a, (C,)), 0, 1, C, 0, 1, slopes)
    return res, ldr, slopes, (float(lo), float(hi), float(c0), float(fill))


def schedule_epilogue_pass(ctx: PrepareContext, out: Tensor, ep: tuple, lim: np.ndarray) -> None:
    """epilogue_pass after a convolution that applied its own limits `lim` only."""
    res, ldr, slopes, extra = ep
    C = out.shape[-1]
    r = ctx.input(3)
    parts = (r is not None) | 2 * (ctx.input(4) is not None)
    f32 = ctx.const(np.zeros(C, np.float32))
    ctx.call(epilogue_pass, ctx.view(out, (out.size,)), ctx.view(r, (r.size,)) if parts & 1 else f32, ldr,
             slopes if parts & 2 else f32, np.array([lim[0], lim[1], *extra], np.float32), C, parts)


__all__ = ["epilogue_pass", "epilogue_terms", "schedule_epilogue_pass"]
