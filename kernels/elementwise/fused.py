"""FUSED_ELEMENTWISE: a float32 ADD, SUB or MUL whose one operand may be a PAD of the last axis and whose result may
go through a clamping activation node (RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1), in one pass
(lite_numba/runtime/fusion.py fuse_elementwise puts it in place of the nodes).

BlazeFace-style residual blocks write `RELU(ADD(PAD(x, channels), conv))`: three passes over the activation and a
padded copy, where one suffices. Every output element is computed by the same scalar definitions as the unfused
nodes, in the same order (arithmetic.FLOAT_OPS with the ADD's own clamp, then activations.CLAMPS), and a padded
channel reads the PAD's fill value exactly as the PAD would have written it, so the bytes are the unfused ones.

Layout: rows of C elements (the last axis); the padded operand has nc elements a row, placed at [c0, c0 + nc),
`fill` elsewhere; side = -1 (no pad: the rows are one flat run), 0 (x padded) or 1 (y padded). With
num_threads > 1 and enough elements, row bands are split over the workers (threads.run_chunks), each running the
serial kernel, which the driver calls by address (threads.call_at).
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base import threads
from lite_numba.kernels.base.activation import F32_MAX, float_activation_range
from lite_numba.kernels.base.threads import (
    CHUNKS_PER_THREAD,
    PARALLEL,
    bands,
    call_at,
    run_chunks,
    serial_address,
    threads_for,
)
from lite_numba.kernels.base.vecmath import wide_vectors
from lite_numba.kernels.elementwise.activations import CLAMPS
from lite_numba.kernels.elementwise.arithmetic import FLOAT_OPS, put_clamped, scalar, source_tag
from lite_numba.kernels.elementwise.unary import NO_PARAMS
from numba import njit

from lite_numba.ops import PrepareContext, kernel


@scalar
def _no_activation(v, p):
    return v


def make_fused(op, act):
    """rows(x, y, out, r0, r1, C, side, c0, nc, fill, lim, p): out rows [r0, r1) of act(clamp(op(x, y), lim), p),
    one operand padded as the module doc says."""
    tag = (source_tag(op), source_tag(act))

    # each element: the binary node's store and clamp (put_clamped), then the activation node's on what it stored
    @njit(cache=True, nogil=True, error_model="numpy")
    def rows(x, y, out, r0, r1, C, side, c0, nc, fill, lim, p):
        tag  # noqa: B018 (a closure cell: see arithmetic.source_tag)
        wide_vectors()
        lo, hi = lim[0], lim[1]
        f = np.float32(fill)
        if side < 0:
            o, a, b = out[r0 * C:r1 * C], x[r0 * C:r1 * C], y[r0 * C:r1 * C]
            for k in range(o.size):
                put_clamped(o, k, op(a[k], b[k]), lo, hi)
                o[k] = act(o[k], p)
            return
        # every element as a padded one first (one flat, vectorized pass), then each row's live part again from
        # the padded operand (rows of a few dozen channels do not vectorize: two passes are ~2x faster than one)
        o, full = out[r0 * C:r1 * C], (y if side == 0 else x)[r0 * C:r1 * C]
        for k in range(o.size):
            if side == 0:
                put_clamped(o, k, op(f, full[k]), lo, hi)
            else:
                put_clamped(o, k, op(full[k], f), lo, hi)
            o[k] = act(o[k], p)
        for r in range(r0, r1):
            om, fm = out[r * C + c0:r * C + c0 + nc], (y if side == 0 else x)[r * C + c0:r * C + c0 + nc]
            part = (x if side == 0 else y)[r * nc:(r + 1) * nc]
            for k in range(nc):
                if side == 0:
                    put_clamped(om, k, op(part[k], fm[k]), lo, hi)
                else:
                    put_clamped(om, k, op(fm[k], part[k]), lo, hi)
                om[k] = act(om[k], p)

    return rows


_KERNELS: dict = {}


def fused_kernel(op_name: str, act_name: str):
    """The compiled rows kernel of (op, activation), made on first use."""
    key = (op_name, act_name)
    if key not in _KERNELS:
        _KERNELS[key] = make_fused(FLOAT_OPS[op_name], CLAMPS[act_name] if act_name else _no_activation)
    return _KERNELS[key]


@njit(cache=True, inline="always")
def _rows_chunk(args, wk, j):
    addr, x, y, out, C, side, c0, nc, fill, lim, p, ch = args
    call_at(addr, (x, y, out, ch[2 * j], ch[2 * j + 1], C, side, c0, nc, fill, lim, p))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def fused_rows_par(addr, x, y, out, C, side, c0, nc, fill, lim, p, ch, cnt, T):
    """The rows kernel at `addr` over the row bands ch = [r0, r1] * n, taken in turn by T workers."""
    run_chunks(T, cnt, ch.size // 2, _rows_chunk, (addr, x, y, out, C, side, c0, nc, fill, lim, p, ch))


@kernel("FUSED_ELEMENTWISE")
def FUSED_ELEMENTWISE(ctx: PrepareContext) -> None:
    """Inputs x, y (the binary node's, the padded one replaced by the PAD's input); options: op, activation ("" for
    none), fused_activation_function (the binary node's), pad = (side, before, after) or absent, fill."""
    ctx.check_num(inputs=2, outputs=1)
    x, y = ctx.input(0), ctx.input(1)
    ctx.check(x is not None and y is not None, "both inputs are required")
    ctx.check_dtype(x, np.float32)
    ctx.check_dtype(y, np.float32)
    side, before, after = ctx.options.get("pad", (-1, 0, 0))
    full, part = (y, x) if side == 0 else (x, y)
    want = tuple(part.shape)
    if side >= 0 and part.ndim:
        want = want[:-1] + (want[-1] + before + after,)
    ctx.check(tuple(full.shape) == want and full.ndim >= 1 and (side < 0 or part.ndim >= 1),
              f"input shapes {list(x.shape)} and {list(y.shape)} do not match the pattern's: the operands of "
              f"{ctx.options['op']} must have the same shape once input {side} is padded by ({before}, {after}) "
              f"on its last axis")
    out = ctx.set_output(0, full.shape, np.float32)
    if out.size == 0:
        return
    lo, hi = float_activation_range(ctx, int(ctx.options.get("fused_activation_function", 0)))
    lim = np.array([max(lo, -F32_MAX), min(hi, F32_MAX)], np.float32)  # TFLite's finite range, as ADD's
    C = full.shape[-1]
    R = full.size // C
    rows = fused_kernel(ctx.options["op"], ctx.options.get("activation", ""))
    args = [ctx.view(x, (x.size,)), ctx.view(y, (y.size,)), ctx.view(out, (out.size,))]
    rest = [C, side, before, C - before - after, float(ctx.options.get("fill", 0.0)), lim, NO_PARAMS]
    t = threads_for(ctx, out.size, threads.MIN_ELEMENTS)
    ch = bands(R, CHUNKS_PER_THREAD * t) if t > 1 else []
    if len(ch) < 2:
        return ctx.call(rows, *args, 0, R, *rest)
    addr = serial_address(rows, args + [0, R] + rest)
    ctx.call(fused_rows_par, addr, *args, *rest, np.array(ch, np.int64).reshape(-1), ctx.temp((1,), np.int64), t)


__all__ = ["FUSED_ELEMENTWISE", "fused_kernel", "fused_rows_par"]
