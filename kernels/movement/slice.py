"""SLICE and STRIDED_SLICE: index arithmetic in Python (TFLite's rules), then one strided copy of raw words."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.shapes import index_vector
from lite_numba.kernels.movement.transpose import (
    contiguous_strides,
    copy_strided,
    schedule_strided_copy,
    simplify_box,
    word_size,
    words,
)
from numba import njit

from lite_numba.ops import PrepareContext, Tensor, kernel

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


def slice_box(ctx: PrepareContext, x: Tensor) -> tuple[list, list]:
    """(begin, size) of SLICE with constant inputs 1 and 2, checked against x; a size of -1 resolved to "to the end"
    (numeric and STRING SLICE)."""
    begin = index_vector(ctx, 1, "begin")
    size = index_vector(ctx, 2, "size")
    ctx.check(len(begin) == len(size) == x.ndim,
              f"begin {begin} and size {size} must have one entry per input dimension ({x.ndim})")
    shape = []
    for d, (b, s) in enumerate(zip(begin, size)):
        n = x.shape[d]
        ctx.check(0 <= b <= n, f"begin {b} is out of range for dimension {d} of size {n}")
        if s == -1:
            s = n - b
        ctx.check(0 <= s and b + s <= n, f"begin {b} + size {s} exceeds dimension {d} of size {n}")
        shape.append(s)
    return begin, shape


@kernel("SLICE")
def SLICE(ctx: PrepareContext) -> None:
    """out = x[begin : begin + size] per dimension; size -1 means "to the end"."""
    ctx.check_num(inputs=3, outputs=1)
    x = ctx.input(0)
    if _runtime_index(ctx, 1, "begin"):
        size = index_vector(ctx, 2, "size")
        if x.ndim and len(size) == x.ndim and all(s >= 0 for s in size):
            # the output shape is `size` whatever begin is: stay static, read and check begin at run time
            ctx.check(ctx.input(1).shape == (x.ndim,),
                      f"begin and size {size} must have one entry per input dimension ({x.ndim})")
            for d, (s, n) in enumerate(zip(size, x.shape)):
                ctx.check(s <= n, f"size {s} exceeds dimension {d} of size {n}")
            es = contiguous_strides(x.shape)
            rows = [(d, MODE_SLICE, n, es[d], 1, s, s) for d, (n, s) in enumerate(zip(x.shape, size))]
            _schedule_at(ctx, x, ctx.set_output(0, size, x.dtype), size, [es[d] for d in range(x.ndim)], rows, 0)
            return
    begin, shape = slice_box(ctx, x)
    out = ctx.set_output(0, shape, x.dtype)
    xs = contiguous_strides(x.shape)
    schedule_strided_copy(ctx, x, out, shape, xs, contiguous_strides(shape), xb=sum(b * s for b, s in zip(begin, xs)))


# --- STRIDED_SLICE ------------------------------------------------------------------------------------------------

def _bit(mask: int, i: int) -> bool:
    return bool((mask >> i) & 1)


def _clamp(v: int, lo: int, hi: int) -> int:
    return lo if v < lo else hi if v > hi else v


def _steps(span: int, stride: int) -> int:
    """How many elements a span walked with `stride` covers (0 when it points the other way)."""
    if (span < 0) != (stride < 0) or span == 0:
        return 0
    return (abs(span) + abs(stride) - 1) // abs(stride)


def _count(start: int, stop: int, stride: int, size: int, to_end: bool) -> int:
    """Elements of a STRIDED_SLICE dimension from `start` (resolved) to `stop` (as given: negative counts from the
    end, clamped into the dimension; to_end: the end mask)."""
    if stop < 0:
        stop += size
    stop = _clamp(stop, 0, size) if stride > 0 else _clamp(stop, -1, size - 1)
    if to_end:
        stop = size if stride > 0 else -1
    return _steps(stop - start, stride)


def expand_masks(ctx: PrepareContext, rank: int, begin, end, strides, opts):
    """Resolve ellipsis and new axes into per-dimension (start index, stop index, stride, begin/end/shrink flags,
    dimension size) over the "effective" input (the input with the new unit axes inserted), as TFLite does."""
    n = len(begin)
    ell = int(opts.get("ellipsis_mask", 0) or 0)
    new = int(opts.get("new_axis_mask", 0) or 0)
    bmask = int(opts.get("begin_mask", 0) or 0)
    emask = int(opts.get("end_mask", 0) or 0)
    smask = int(opts.get("shrink_axis_mask", 0) or 0)
    num_add = sum(1 for i in range(n) if not _bit(ell, i) and _bit(new, i))
    eff = rank + num_add
    # which effective dimensions the ellipsis covers and which are new axes
    eff_ell = set()
    eff_new = set()
    ell_start, expanded = eff, 0
    i = 0
    while i < eff:
        if _bit(ell, i):
            ell_start = i
            ell_end = max(i + 1, min(i + 1 + num_add + rank - n, eff))
            expanded = ell_end - ell_start - 1
            while i < ell_end:
                eff_ell.add(i)
                i += 1
            continue
        if i - expanded >= 0 and _bit(new, i - expanded):
            eff_new.add(i)
        i += 1
    dims = []
    added_ell = added_axes = 0
    for i in range(eff):
        if i in eff_ell:
            added_ell = max(0, i - ell_start)
            src = i - added_axes
            ctx.check(0 <= src < rank, "ellipsis does not match the input rank")
            dims.append(dict(start=0, stop=0, stride=1, b=True, e=True, s=False, size=x_dim(ctx, src)))
        elif i in eff_new:
            dims.append(dict(start=0, stop=1, stride=1, b=False, e=False, s=False, size=1))
            added_axes += 1
        elif i >= n + expanded:
            src = i - added_axes
            ctx.check(0 <= src < rank, "slice specification does not match the input rank")
            dims.append(dict(start=0, stop=0, stride=1, b=True, e=True, s=False, size=x_dim(ctx, src)))
        else:
            o = i - added_ell
            src = i - added_axes
            ctx.check(0 <= o < n and 0 <= src < rank, "slice specification does not match the input rank")
            dims.append(dict(start=begin[o], stop=end[o], stride=strides[o], b=_bit(bmask, o), e=_bit(emask, o),
                             s=_bit(smask, o), size=x_dim(ctx, src)))
    return dims


def _stride_and_size(ctx: PrepareContext, k: int, d: dict) -> tuple[int, int]:
    """Dimension k's stride (checked: not 0, not INT32_MIN) and size, from expand_masks' entry d."""
    stride = d["stride"]
    ctx.check(stride != 0, f"stride of dimension {k} is zero")
    ctx.check(stride != INT32_MIN, "stride INT32_MIN is not supported")
    return stride, d["size"]


def _check_shrink_stride(ctx: PrepareContext, k: int, stride: int) -> None:
    """A shrinking axis takes the one element at begin; with a negative stride the official kernel's loop (from
    begin to begin + 1) runs no step and leaves the output unwritten (what it returns is whatever the memory held),
    and TensorFlow refuses it ("only stride 1 allowed on non-range indexing")."""
    ctx.check(stride > 0, f"shrink axis {k} has stride {stride}: a shrinking axis needs a positive stride (the "
              f"official kernel writes no element there; TensorFlow refuses it)")


def x_dim(ctx: PrepareContext, d: int) -> int:
    return ctx.input(0).shape[d]


@kernel("STRIDED_SLICE")
def STRIDED_SLICE(ctx: PrepareContext) -> None:
    """x[begin:end:strides] with begin/end/ellipsis/new-axis/shrink-axis masks and the `offset` option (end is a
    size relative to begin). Output element order is row-major over the slice, like TFLite's writer."""
    ctx.check_num(inputs=4, outputs=1)
    x = ctx.input(0)
    if _runtime_index(ctx, 1, "begin") and _strided_slice_at(ctx, x):
        return
    begin = index_vector(ctx, 1, "begin")
    end = index_vector(ctx, 2, "end")
    strides = index_vector(ctx, 3, "strides")
    ctx.check(len(begin) == len(end) == len(strides),
              f"begin, end and strides differ in length ({len(begin)}, {len(end)}, {len(strides)})")
    ctx.check(len(begin) <= 31, "at most 31 slice indices are supported")
    opts = ctx.options
    offset = bool(opts.get("offset", False))
    if offset:
        # TFLite reads the output size from `end` per effective dimension: only a full specification is defined
        ctx.check(not opts.get("ellipsis_mask") and not opts.get("new_axis_mask") and len(begin) == x.ndim,
                  "offset=True needs one begin/end/stride per input dimension and no ellipsis or new axis")
    dims = expand_masks(ctx, x.ndim, begin, end, strides, opts)
    eff_shape = [d["size"] for d in dims]
    eff_strides = contiguous_strides(eff_shape)
    out_shape, box, xs = [], [], []
    base = 0
    for k, d in enumerate(dims):
        stride, size = _stride_and_size(ctx, k, d)
        start = d["start"]
        if start < 0:
            start += size
        start = _clamp(start, 0, size) if stride > 0 else _clamp(start, -1, size - 1)
        if d["b"]:
            start = 0 if stride > 0 else size - 1
        if d["s"]:
            # one element at `start`; TFLite writes nothing (leaves the output unset) when it is out of range
            _check_shrink_stride(ctx, k, stride)
            ctx.check(0 <= start < size, f"shrink index {d['start']} is out of range for dimension {k} of size {size}")
            box.append(1)
            xs.append(eff_strides[k])
            base += start * eff_strides[k]
            continue
        count = _count(start, d["stop"] + (start if offset else 0), stride, size, d["e"])
        if offset:
            ctx.check(_steps(d["stop"], stride) == count,
                      f"begin {d['start']} + size {d['stop']} exceeds dimension {k} of size {size}")
        ctx.check(count <= INT32_MAX, f"output dimension {k} overflows")
        out_shape.append(count)
        box.append(count)
        xs.append(eff_strides[k] * stride)
        if count:
            base += start * eff_strides[k]
    out = ctx.set_output(0, out_shape, x.dtype)
    if not box:  # 0-d input, no new axis: copy the element
        box, xs = [1], [1]
    schedule_strided_copy(ctx, x, out, box, xs, contiguous_strides(box), xb=base)


__all__ = ["SLICE", "STRIDED_SLICE"]


# --- begin read at run time -----------------------------------------------------------------------------------------
# When only `begin` is computed (a loop counter) and the output shape does not depend on it — SLICE with a constant
# size without -1, STRIDED_SLICE whose begin-dependent dimensions are shrunk or sized by `end` (offset) — the node
# stays static: `slice_at` reads begin at run time, applies the same rules as prepare does for a constant begin
# (negative indices, clamping, range checks) and raises where prepare would fail.

MODE_SHRINK, MODE_OFFSET, MODE_SLICE = 0, 1, 2


def _runtime_index(ctx: PrepareContext, i: int, what: str) -> bool:
    """Whether index input i is computed (not a constant): validated like index_vector."""
    t = ctx.input(i)
    ctx.check(t is not None, f"{what} input is missing")
    ctx.check(t.dtype in (np.int32, np.int64), f"{what} has type {t.dtype.name}, expected int32 or int64")
    ctx.check(t.ndim == 1, f"{what} must be 1-D, got shape {list(t.shape)}")
    return t.data is None


@njit(cache=True, nogil=True)
def slice_at(x, out, shp, xs, os, begin, rows, base, scale):
    """Copy the box `shp` of x from the base fixed at prepare plus, per row (begin entry, mode, dimension size,
    element stride, stride, end, count), the start the run-time begin gives on that dimension."""
    for r in range(rows.shape[0]):
        size = rows[r, 2]
        stride = rows[r, 4]
        start = np.int64(begin[rows[r, 0]])
        mode = rows[r, 1]
        if mode == 2:  # SLICE: 0 <= begin and begin + size <= dimension
            if start < 0 or start > size or start + rows[r, 5] > size:
                raise ValueError("SLICE: begin out of range for the input dimension")
            base += start * rows[r, 3]
            continue
        if start < 0:
            start += size
        lo, hi = (0, size) if stride > 0 else (-1, size - 1)
        start = lo if start < lo else hi if start > hi else start
        if mode == 0:  # shrink: one element at start
            if start < 0 or start >= size:
                raise ValueError("STRIDED_SLICE: shrink index out of range for the input dimension")
            base += start * rows[r, 3]
            continue
        stop = rows[r, 5] + start  # offset: end is a size relative to begin
        if stop < 0:
            stop += size
        stop = lo if stop < lo else hi if stop > hi else stop
        span = stop - start
        count = 0
        if span != 0 and (span < 0) == (stride < 0):
            count = (abs(span) + abs(stride) - 1) // abs(stride)
        if count != rows[r, 6]:
            raise ValueError("STRIDED_SLICE: begin + size exceeds the input dimension")
        if count:
            base += start * rows[r, 3]
    copy_strided(x, out, shp, xs, os, base * scale, 0)


def _schedule_at(ctx: PrepareContext, x, out, box, xs, rows, base: int) -> None:
    """Schedule slice_at: out (contiguous, shape `box` after unit dims) = x[base + run-time starts + i.xs]."""
    elem = word_size(ctx, x)
    if not box:
        box, xs = [1], [1]
    shp, sx, so, _, _, word = simplify_box(box, xs, contiguous_strides(box), 0, 0, elem)
    ctx.call(slice_at, words(ctx, x, word), words(ctx, out, word), np.array(shp, np.int64), np.array(sx, np.int64),
             np.array(so, np.int64), ctx.input(1), np.array(rows, np.int64).reshape(-1, 7), int(base),
             elem // word)


def _strided_slice_at(ctx: PrepareContext, x) -> bool:
    """STRIDED_SLICE with a computed begin: schedule slice_at if the output shape does not depend on begin."""
    if ctx.input(3) is None or ctx.input(3).data is None:
        return False  # computed strides: the general (dynamic) path
    strides = index_vector(ctx, 3, "strides")
    n = len(strides)
    end_t = ctx.input(2)
    ctx.check(end_t is not None and end_t.dtype in (np.int32, np.int64) and end_t.ndim == 1,
              "end must be a 1-D int32/int64 tensor")
    end = index_vector(ctx, 2, "end") if end_t.data is not None else [None] * n
    opts = ctx.options
    offset = bool(opts.get("offset", False))
    if (ctx.input(1).shape != (n,) or len(end) != n or n > 31
            or (offset and (opts.get("ellipsis_mask") or opts.get("new_axis_mask") or n != x.ndim))):
        return False  # the general path reports these
    dims = expand_masks(ctx, x.ndim, [("begin", o) for o in range(n)], end, strides, opts)
    eff_strides = contiguous_strides([d["size"] for d in dims])
    out_shape, box, xs, rows = [], [], [], []
    base = 0
    for k, d in enumerate(dims):
        stride, size = _stride_and_size(ctx, k, d)
        start = d["start"]
        if d["s"]:
            _check_shrink_stride(ctx, k, stride)
        if isinstance(start, tuple) and not d["b"]:  # from the run-time begin
            if d["s"]:
                rows.append((start[1], MODE_SHRINK, size, eff_strides[k], stride, 0, 1))
                box.append(1)
                xs.append(eff_strides[k])
                continue
            if not offset or d["e"] or d["stop"] is None:
                return False  # the count depends on begin
            declared = d["stop"]
            count = 0 if (declared < 0) != (stride < 0) or declared == 0 else \
                (abs(declared) + abs(stride) - 1) // abs(stride)
            rows.append((start[1], MODE_OFFSET, size, eff_strides[k], stride, declared, count))
        else:
            if isinstance(start, tuple) or d["b"]:
                start = 0 if stride > 0 else size - 1
            else:
                if start < 0:
                    start += size
                start = _clamp(start, 0, size) if stride > 0 else _clamp(start, -1, size - 1)
            if d["s"]:
                ctx.check(0 <= start < size, f"shrink index {start} is out of range for dimension {k} of size {size}")
                box.append(1)
                xs.append(eff_strides[k])
                base += start * eff_strides[k]
                continue
            if d["stop"] is None and not d["e"]:
                return False
            count = _count(start, 0 if d["e"] else d["stop"] + (start if offset else 0), stride, size, d["e"])
            if offset:
                ctx.check(_steps(d["stop"], stride) == count,
                          f"begin + size {d['stop']} exceeds dimension {k} of size {size}")
            if count:
                base += start * eff_strides[k]
        ctx.check(count <= INT32_MAX, f"output dimension {k} overflows")
        out_shape.append(count)
        box.append(count)
        xs.append(eff_strides[k] * stride)
    out = ctx.set_output(0, out_shape, x.dtype)
    _schedule_at(ctx, x, out, box, xs, rows, base)
    return True


# --- SLICE, SLICE -> CONCATENATION fused into one static copy (lite_numba/runtime/fusion.py) ---------------------
# Keras 3 loop bodies write step t of the output sequence as concat(x[0:t], y, x[t+1:]) with two SLICEs whose begin
# or size come from the loop counter. Each SLICE's output shape depends on the counter, so unfused the SLICEs and the
# CONCATENATION are prepared again from Python at every iteration. The fusion replaces the CONCATENATION by
# SLICE_UPDATE (inputs: x, y and the SLICEs' begin and size vectors) when the slices take all of x outside the
# concatenation axis: the output keeps x's shape, and the counter values are read and checked at run time.


@njit(cache=True, nogil=True)
def _slice_range(begin, size, n):
    """SLICE's rules for one dimension: (start, length) or (-1, -1) when out of range."""
    if begin < 0 or begin > n:
        return -1, -1
    if size == -1:
        size = n - begin
    if size < 0 or begin + size > n:
        return -1, -1
    return begin, size


@njit(cache=True, nogil=True)
def slice_update(x, y, out, a_begin, a_size, b_begin, b_size, axis):
    """out = concat(x[a], y, x[b]) along the middle axis of the (outer, n, inner-bytes) views, where a and b are the
    ranges SLICE(begin, size) selects on `axis`; the result must keep x's length."""
    n = x.shape[1]
    m = y.shape[1]
    a0, an = _slice_range(a_begin[axis], a_size[axis], n)
    b0, bn = _slice_range(b_begin[axis], b_size[axis], n)
    if an < 0 or bn < 0:
        raise ValueError("SLICE: begin or size out of range for the input dimension")
    if an + m + bn != n:
        raise ValueError("CONCATENATION: the sliced pieces do not add up to the input's length (the fused slice "
                         "update keeps the tensor's shape)")
    w = x.shape[2]
    for o in range(x.shape[0]):
        xo = x[o].reshape(-1)
        oo = out[o].reshape(-1)
        yo = y[o].reshape(-1)
        oo[0:an * w] = xo[a0 * w:(a0 + an) * w]
        oo[an * w:(an + m) * w] = yo
        oo[(an + m) * w:n * w] = xo[b0 * w:(b0 + bn) * w]


def _prepare_slice_update(ctx: PrepareContext) -> None:
    """Inputs: x, y, a_begin, a_size, b_begin, b_size; option `axis` (runtime/fusion.py checked the pattern)."""
    x, y = ctx.input(0), ctx.input(1)
    axis = int(ctx.options["axis"])
    ctx.check(y.dtype == x.dtype and y.ndim == x.ndim,
              f"input {y.name!r} ({y.dtype.name}{list(y.shape)}) does not match {x.name!r} ({x.dtype.name})")
    for d in range(x.ndim):
        ctx.check(d == axis or y.shape[d] == x.shape[d],
                  f"input {y.name!r} has shape {list(y.shape)}, incompatible with {list(x.shape)} outside axis {axis}")
    for i in range(2, 6):
        t = ctx.input(i)
        ctx.check(t.dtype in (np.int32, np.int64) and t.shape == (x.ndim,),
                  f"slice index {t.name!r} must be an int32/int64 vector of {x.ndim} entries")
    out = ctx.set_output(0, x.shape, x.dtype)
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64)) * x.dtype.itemsize
    ctx.call(slice_update, ctx.view(x, (outer, x.shape[axis], inner), np.uint8),
             ctx.view(y, (outer, y.shape[axis], inner), np.uint8),
             ctx.view(out, (outer, x.shape[axis], inner), np.uint8),
             ctx.input(2), ctx.input(3), ctx.input(4), ctx.input(5), axis)


SLICE_UPDATE = kernel("SLICE_UPDATE")(_prepare_slice_update)


def _prepare_fused_away(ctx: PrepareContext) -> None:
    """A node whose work another node does (lite_numba/runtime/fusion.py): its outputs are never written nor read
    (the fused node reads the pattern's inputs); they keep the shape the model gives them, which the tensor details
    report as the official runtime does (an unknown dimension, -1, as 0: no storage)."""
    for i in range(ctx.num_outputs):
        ctx.set_output(i, tuple(max(int(d), 0) for d in ctx.output(i).shape))


FUSED_AWAY = kernel("FUSED_AWAY")(_prepare_fused_away)
