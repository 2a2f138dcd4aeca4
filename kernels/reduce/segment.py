"""SEGMENT_SUM and UNSORTED_SEGMENT_SUM / PROD / MAX / MIN (float32, int32).

SEGMENT_SUM's output has max(segment id) + 1 rows, so its segment ids are read with ctx.value() (a computed ids
tensor makes the node dynamic) and validated in prepare as the official kernel does: the first id is 0 and each next
one repeats or adds 1. UNSORTED_SEGMENT_* take their row count from num_segments (ctx.value()); their ids are only
known at run time, so the kernel skips negative ids (as the official kernel) and raises for an id >= num_segments
instead of writing out of bounds. Segments no id names keep the initial value: 0 (sum), 1 (prod), the type's lowest
(max: -FLT_MAX, not -inf) or highest (min) value. Integer sums and products wrap; float max/min follow std::max/min
(a NaN already in the output stays, a NaN input is ignored).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lite_numba.ops import PrepareContext, kernel

SUM, PROD, MAX, MIN = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def segment_reduce(x, ids, out, init, kind, inner):
    """out = init; for each row i of x ([len(ids), inner]) with ids[i] >= 0: out[ids[i]] = op(out[ids[i]], x[i])."""
    nseg = out.size // inner if inner else 0
    for i in range(out.size):
        out[i] = init[0]
    for i in range(ids.size):
        s = np.int64(ids[i])
        if s < 0:
            continue
        if s >= nseg:
            raise ValueError("UNSORTED_SEGMENT: segment id out of range")
        src = x[i * inner:(i + 1) * inner]
        dst = out[s * inner:(s + 1) * inner]
        if kind == SUM:
            for j in range(inner):
                dst[j] = dst[j] + src[j]
        elif kind == PROD:
            for j in range(inner):
                dst[j] = dst[j] * src[j]
        elif kind == MAX:
            for j in range(inner):
                if dst[j] < src[j]:
                    dst[j] = src[j]
        else:
            for j in range(inner):
                if src[j] < dst[j]:
                    dst[j] = src[j]


def _init(kind: int, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
    value = {SUM: 0, PROD: 1, MAX: info.min, MIN: info.max}[kind]
    return np.array([value], dtype)


@kernel("SEGMENT_SUM")
def SEGMENT_SUM(ctx: PrepareContext) -> None:
    """out[k] = sum of the rows of data whose sorted segment id is k."""
    ctx.check_num(inputs=2, outputs=1)
    x, ids_t = ctx.input(0), ctx.input(1)
    ctx.check_dtype(x, np.float32, np.int32)
    ctx.check_dtype(ids_t, np.int32)
    ctx.check(x.ndim >= 1, "data must have rank 1 or more")
    ctx.check(ids_t.ndim == 1 and ids_t.shape[0] == x.shape[0],
              f"segment_ids must be a vector of {x.shape[0]} elements, got shape {list(ids_t.shape)}")
    ids = np.asarray(ctx.value(1)).reshape(-1).astype(np.int64)
    if ids.size:
        ctx.check(ids[0] == 0, f"the first segment id must be 0, got {ids[0]}")
        steps = np.diff(ids)
        ctx.check(bool(np.all((steps == 0) | (steps == 1))),
                  "segment ids must be sorted and consecutive (each id equal to the previous or one more)")
    nseg = int(ids[-1]) + 1 if ids.size else 0
    out = ctx.set_output(0, (nseg,) + x.shape[1:], x.dtype)
    inner = int(np.prod(x.shape[1:], dtype=np.int64))
    if out.size == 0:
        return
    ctx.call(segment_reduce, ctx.view(x, (x.size,)), ctx.view(ids_t, (ids_t.size,)), ctx.view(out, (out.size,)),
             _init(SUM, x.dtype), SUM, inner)


def unsorted_segment(name: str, kind: int):
    def prepare(ctx: PrepareContext) -> None:
        ctx.check_num(inputs=3, outputs=1)
        x, ids, num_t = ctx.input(0), ctx.input(1), ctx.input(2)
        ctx.check_dtype(x, np.float32, np.int32)
        ctx.check_dtype(ids, np.int32)
        ctx.check_dtype(num_t, np.int32)
        ctx.check(ids.ndim <= x.ndim and x.shape[:ids.ndim] == ids.shape,
                  f"segment_ids shape {list(ids.shape)} must be a prefix of data shape {list(x.shape)}")
        ctx.check(num_t.size == 1 and num_t.ndim <= 1,
                  f"num_segments must be a scalar or a 1-element vector, got shape {list(num_t.shape)}")
        nseg = int(np.asarray(ctx.value(2)).reshape(-1)[0])
        ctx.check(nseg >= 0, f"num_segments must be >= 0, got {nseg}")
        if ids.is_const and ids.size:  # as the official prepare: constant ids are checked before any invoke
            top = int(np.max(ids.data))
            ctx.check(top < nseg, f"segment id {top} is out of range for {nseg} segments")
        out = ctx.set_output(0, (nseg,) + x.shape[ids.ndim:], x.dtype)
        if out.size == 0:
            return
        inner = int(np.prod(x.shape[ids.ndim:], dtype=np.int64))
        ctx.call(segment_reduce, ctx.view(x, (x.size,)), ctx.view(ids, (ids.size,)), ctx.view(out, (out.size,)),
                 _init(kind, x.dtype), kind, inner)

    prepare.__name__ = name
    prepare.__doc__ = f"{name}: out[k] = reduction of the data rows whose segment id is k (ids in any order)."
    return kernel(name)(prepare)


UNSORTED_SEGMENT_SUM = unsorted_segment("UNSORTED_SEGMENT_SUM", SUM)
UNSORTED_SEGMENT_PROD = unsorted_segment("UNSORTED_SEGMENT_PROD", PROD)
UNSORTED_SEGMENT_MAX = unsorted_segment("UNSORTED_SEGMENT_MAX", MAX)
UNSORTED_SEGMENT_MIN = unsorted_segment("UNSORTED_SEGMENT_MIN", MIN)

__all__ = ["SEGMENT_SUM", "UNSORTED_SEGMENT_SUM", "UNSORTED_SEGMENT_PROD", "UNSORTED_SEGMENT_MAX",
           "UNSORTED_SEGMENT_MIN"]
