"""STABLEHLO_REDUCE_WINDOW and REDUCE_WINDOW (tflite/kernels/stablehlo_reduce_window.cc).

The input is dilated by base_dilations and padded (a negative padding crops), both with the init value; each window
of window_dimensions (its elements window_dilations apart, windows window_strides apart) is reduced from the init
value in row-major order with the body's op: add, multiply, min (a <= b ? a : b), max (a >= b ? a : b), logical
and / or (1 or 0 in the type). STABLEHLO_REDUCE_WINDOW names the op by its body subgraph, which must hold one
ADD / MUL / MINIMUM / MAXIMUM / LOGICAL_AND / LOGICAL_OR (or its STABLEHLO_ twin), as officially; REDUCE_WINDOW by
its reduce_function option and its window shape, strides and dilations in constant int64 inputs. bool is reduced as
int8, as officially. Types: bool, int8, int16, int32, int64, uint8, float32, float64.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lite_numba.ops import PrepareContext, kernel

MAX_RANK = 6
TYPES = tuple(np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.float32,
                                    np.float64))
# body op -> reduction kind of reduce_window's loop
BODY_KINDS = {"ADD": 0, "STABLEHLO_ADD": 0, "MUL": 1, "STABLEHLO_MULTIPLY": 1, "MINIMUM": 2, "STABLEHLO_MINIMUM": 2,
              "MAXIMUM": 3, "STABLEHLO_MAXIMUM": 3, "LOGICAL_AND": 4, "STABLEHLO_AND": 4, "LOGICAL_OR": 5,
              "STABLEHLO_OR": 5}
# REDUCE_WINDOW's reduce_function (the schema's ReduceWindowFunction: ADD 1, MUL 2, MINIMUM 3, MAXIMUM 4, ALL 5, ANY 6)
FUNCTION_KINDS = {1: 0, 2: 1, 3: 2, 4: 3, 5: 4, 6: 5}


@njit(cache=True, nogil=True)
def reduce_window(x, out, init, kind, consts, oshape, ostride, wshape, wdil, tab, toff, xstride):
    """out[o] = init op v(w0) op v(w1) ... over the window elements w in row-major order, where v reads the padded,
    dilated input at o * ostride + w * wdil through the per-dimension tables tab[toff[d] + p] (the input index of
    padded position p, or -1: the init value)."""
    r = oshape.size
    nw = 1
    for d in range(r):
        nw *= wshape[d]
    zero, one = consts[0], consts[1]
    for k in range(out.size):
        acc = init[0]
        for w in range(nw):
            # the padded position of window element w of output k
            ok = k
            wk = w
            src = 0
            pad = False
            for d in range(r - 1, -1, -1):
                o = ok % oshape[d]
                ok //= oshape[d]
                c = wk % wshape[d]
                wk //= wshape[d]
                i = tab[toff[d] + o * ostride[d] + c * wdil[d]]
                if i < 0:
                    pad = True
                src += i * xstride[d]
            v = init[0] if pad else x[src]
            if kind == 0:
                acc = acc + v
            elif kind == 1:
                acc = acc * v
            elif kind == 2:
                acc = acc if acc <= v else v
            elif kind == 3:
                acc = acc if acc >= v else v
            elif kind == 4:
                acc = one if (acc != 0 and v != 0) else zero
            else:
                acc = one if (acc != 0 or v != 0) else zero
        out[k] = acc


def _schedule(ctx: PrepareContext, x, init, kind: int, window, strides, base_dil, window_dil, padding) -> None:
    r = x.ndim
    ctx.check(init.dtype == x.dtype and init.size == 1,
              f"init value must be one {x.dtype.name}, is {init.dtype.name} of shape {list(init.shape)}")
    ctx.check(x.dtype in TYPES, f"unsupported kernel data type {x.dtype.name}")
    ctx.check(1 <= r <= MAX_RANK, f"input rank {r} is outside [1, {MAX_RANK}]")
    for key, v in (("window_dimensions", window), ("window_strides", strides), ("base_dilations", base_dil),
                   ("window_dilations", window_dil)):
        ctx.check(len(v) == r and all(d > 0 for d in v), f"{key} {list(v)} must be {r} positive values")
    ctx.check(len(padding) == 2 * r, f"padding {list(padding)} must hold {2 * r} values (low, high per dim)")
    tables, oshape = [], []
    for d in range(r):
        n, bd, lo, hi = x.shape[d], base_dil[d], padding[2 * d], padding[2 * d + 1]
        dilated = (n - 1) * bd + 1 if n > 0 else 0
        size = dilated + lo + hi
        ctx.check(size > 0 or (lo == 0 and hi == 0 and n == 0),
                  "The padding specification of stablehlo.reduce_window gives an empty tensor.")
        q = np.arange(max(size, 0), dtype=np.int64) - lo
        tables.append(np.where((q >= 0) & (q < dilated) & (q % bd == 0), q // bd, -1).astype(np.int64))
        span = (window[d] - 1) * window_dil[d] + 1
        oshape.append(0 if size < span else (size - span) // strides[d] + 1)
    out = ctx.set_output(0, oshape, x.dtype)
    if out.size == 0:
        return
    toff = np.cumsum([0] + [t.size for t in tables[:-1]]).astype(np.int64)
    xstride = [1] * r
    for d in range(r - 2, -1, -1):
        xstride[d] = xstride[d + 1] * x.shape[d + 1]
    word = np.int8 if x.dtype == np.bool_ else x.dtype
    view = lambda t: ctx.view(t, (t.size,), word)  # noqa: E731
    i64 = lambda v: np.array(v, np.int64)  # noqa: E731
    ctx.call(reduce_window, view(x), view(out), view(init), kind, np.array([0, 1], word), i64(oshape), i64(strides),
             i64(window), i64(window_dil), np.concatenate(tables), toff, i64(xstride))


@kernel("STABLEHLO_REDUCE_WINDOW")
def STABLEHLO_REDUCE_WINDOW(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=2, outputs=1)
    x, init = ctx.input(0), ctx.input(1)
    ops = tuple(ctx.options.get("subgraph_ops", ()))
    ctx.check(len(ops) == 1, f"Only one kernel is allowed within stablehlo.reduce_window body. ({len(ops)}) kernels "
                             f"found.")
    ctx.check(ops[0] in BODY_KINDS, f"unsupported reduction body {ops[0]}")
    r = x.ndim
    opt = lambda key, default: [int(v) for v in (ctx.options.get(key) or [default] * r)]  # noqa: E731
    _schedule(ctx, x, init, BODY_KINDS[ops[0]], opt("window_dimensions", 1), opt("window_strides", 1),
              opt("base_dilations", 1), opt("window_dilations", 1),
              [int(v) for v in (ctx.options.get("padding") or [0] * (2 * r))])


STABLEHLO_REDUCE_WINDOW.meta["subgraph_ops"] = "body_subgraph_index"


@kernel("REDUCE_WINDOW")
def REDUCE_WINDOW(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=5, outputs=1)
    x, init = ctx.input(0), ctx.input(1)
    fn = int(ctx.options.get("reduce_function", 0))
    ctx.check(fn in FUNCTION_KINDS, f"reduce_function {fn} is not supported")
    params = []
    for i, key in ((2, "window shape"), (3, "window strides"), (4, "window dilations")):
        t = ctx.input(i)
        ctx.check(t.is_const and t.dtype == np.int64, f"the {key} (input {i}) must be a constant int64 tensor")
        params.append([int(v) for v in np.asarray(t.data).reshape(-1)])
    r = x.ndim
    _schedule(ctx, x, init, FUNCTION_KINDS[fn], params[0], params[1], [1] * r, params[2], [0] * (2 * r))


__all__ = ["REDUCE_WINDOW", "STABLEHLO_REDUCE_WINDOW", "reduce_window"]
