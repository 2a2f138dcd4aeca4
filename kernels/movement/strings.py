"""The STRING variants of the data-movement ops, and the two builtins that only exist for text (HASHTABLE_LOOKUP's
string values, SKIP_GRAM): host kernels in plain Python and numpy over packed strings (lite_numba/format/strings.py),
since Numba has no string type. The resolver gives a node of these ops the variant when one of its tensors is
STRING (kernels/registry.py, with_strings), so the numeric kernels and the compiled segments never see strings; a
graph's numeric nodes around them stay compiled.

Every op is an index map: prepare (or the host function, for gather indices known only at run time) works out which
input element each output element is — numpy's own take / slicing / tile / broadcast_to applied to the element
numbers 0..n-1 of the input — and the host function copies those strings with one vectorised `strings.take` into
the output's storage, sized for exactly those bytes. Bytes are never decoded.

What the official kernels accept (ai-edge-litert 2.3.0, probed with builder models; tests/test_strings.py): GATHER
(1-D params), GATHER_ND, RESHAPE, SQUEEZE, EXPAND_DIMS, SLICE, STRIDED_SLICE, TILE, FILL, HASHTABLE_LOOKUP,
SKIP_GRAM, at every version they register. Beyond them, as TensorFlow computes them: GATHER of params of any rank
(axis, batch_dims) and BROADCAST_TO (the official kernels refuse both for strings).
"""

from __future__ import annotations

import math

import numpy as np
from lite_numba.kernels.base.shapes import index_vector, normalize_axis
from lite_numba.kernels.movement.gather import gather_shape
from lite_numba.kernels.movement.reshape import infer_shape, squeeze_shape
from lite_numba.kernels.movement.slice import expand_masks, slice_box

from lite_numba.format import strings
from lite_numba.ops import PrepareContext, kernel

INDEX_TYPES = (np.int16, np.int32, np.int64)


def _take_host(ctx: PrepareContext) -> None:
    """Output 0 = the input-0 strings at the flat element numbers prepare put in ctx.host_data (None: all, in
    order)."""
    buf, offs = ctx.input_strings(0)
    shape, index = ctx.host_data
    write_take(ctx, 0, shape, buf, offs, index)


def write_take(ctx: PrepareContext, i: int, shape, buf, offs, index) -> None:
    """STRING output i (shape) = the strings of (buf, offs) at the flat element numbers `index` (None: all)."""
    if index is None:
        ctx.string_output(i, shape, buf.size)[:] = buf
        return
    strings.take(buf, offs, index, ctx.string_output(i, shape, strings.take_size(offs, index)))


def _index_map(ctx: PrepareContext, shape, index: np.ndarray | None) -> None:
    """Declare output 0's shape and the element numbers it takes (None: the input as it is)."""
    ctx.set_output(0, shape)
    ctx.host_data = (tuple(int(d) for d in shape), None if index is None else np.ascontiguousarray(index, np.int64))


def _numbers(x) -> np.ndarray:
    """The element numbers of tensor x, in its shape."""
    return np.arange(x.size, dtype=np.int64).reshape(x.shape)


def _check_string_io(ctx: PrepareContext, inputs=(0,), outputs=(0,)) -> None:
    for i in inputs:
        t = ctx.input(i)
        ctx.check(t is not None and t.dtype == object, f"input {i} must be a STRING tensor")
    for i in outputs:
        t = ctx.output(i)
        ctx.check(t.dtype == object, f"output {i} ({t.name!r}) must be a STRING tensor, got {t.dtype.name}")


# --- the shape ops: the packed value as it is ------------------------------------------------------------------

def _reshape(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=(1, 2), outputs=1)
    _check_string_io(ctx)
    x, shape_t = ctx.input(0), ctx.input(1)
    opt = ctx.options.get("new_shape")
    if shape_t is not None and shape_t.ndim == 1 and not (shape_t.size == 0 and opt):
        ctx.check_dtype(shape_t, np.int32, np.int64)
        new_shape = ctx.value(1).reshape(-1)
    elif opt is not None:
        new_shape = opt
    elif shape_t is not None:
        ctx.check_dtype(shape_t, np.int32, np.int64)
        new_shape = ctx.value(1).reshape(-1)
    else:
        new_shape = ctx.output(0).shape
    _index_map(ctx, infer_shape(ctx, x.size, new_shape), None)


def _squeeze(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=1, outputs=1)
    _check_string_io(ctx)
    _index_map(ctx, squeeze_shape(ctx, ctx.input(0)), None)


def _expand_dims(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=2, outputs=1)
    _check_string_io(ctx)
    x, axis_t = ctx.input(0), ctx.input(1)
    ctx.check_dtype(axis_t, np.int32, np.int64)
    ctx.check(axis_t.size == 1, f"axis must hold one value, got shape {list(axis_t.shape)}")
    axis = int(np.asarray(ctx.value(1)).reshape(-1)[0])
    a = axis + x.ndim + 1 if axis < 0 else axis
    ctx.check(0 <= a <= x.ndim, f"axis {axis} out of range for rank {x.ndim}")
    _index_map(ctx, x.shape[:a] + (1,) + x.shape[a:], None)


# --- slicing, tiling, broadcasting, filling: an index map fixed at prepare -------------------------------------------

def _slice(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=3, outputs=1)
    _check_string_io(ctx)
    x = ctx.input(0)
    begin, size = slice_box(ctx, x)
    index = _numbers(x)[tuple(slice(b, b + s) for b, s in zip(begin, size))]
    _index_map(ctx, index.shape, index)


def _strided_slice(ctx: PrepareContext) -> None:
    """TFLite's masks (movement/slice.expand_masks: ellipsis and new axes over the effective input), then per
    dimension Python's slice rules, which clamp begin and end as TFLite does (negative counts from the end, into
    [0, n] for a positive stride, [-1, n - 1] for a negative one)."""
    ctx.check_num(inputs=4, outputs=1)
    _check_string_io(ctx)
    x = ctx.input(0)
    begin, end, strides = (index_vector(ctx, i, w) for i, w in ((1, "begin"), (2, "end"), (3, "strides")))
    ctx.check(len(begin) == len(end) == len(strides),
              f"begin, end and strides differ in length ({len(begin)}, {len(end)}, {len(strides)})")
    ctx.check(len(begin) <= 31, "at most 31 slice indices are supported")
    offset = bool(ctx.options.get("offset", False))
    if offset:
        ctx.check(not ctx.options.get("ellipsis_mask") and not ctx.options.get("new_axis_mask")
                  and len(begin) == x.ndim,
                  "offset=True needs one begin/end/stride per input dimension and no ellipsis or new axis")
    dims = expand_masks(ctx, x.ndim, begin, end, strides, ctx.options)
    numbers = _numbers(x).reshape([d["size"] for d in dims])
    spec = []
    for k, d in enumerate(dims):
        stride, size = d["stride"], d["size"]
        ctx.check(stride != 0, f"stride of dimension {k} is zero")
        ctx.check(-(1 << 31) < stride < 1 << 31, f"stride {stride} of dimension {k} is out of range")
        start = d["start"]
        if d["s"]:  # one element, the axis dropped
            ctx.check(stride > 0, f"shrink axis {k} has stride {stride}: a shrinking axis needs a positive stride "
                                  f"(the official kernel writes no element there; TensorFlow refuses it)")
            start = 0 if d["b"] else start + size if start < 0 else start  # (the begin mask applies, as in TFLite)
            ctx.check(0 <= start < size, f"shrink index {d['start']} is out of range for dimension {k} of size {size}")
            spec.append(start)
            continue
        stop = d["stop"]
        if offset:
            start_abs = min(max(start + size if start < 0 else start, 0), size)
            stop = start_abs + stop
            ctx.check(0 <= stop <= size, f"begin {d['start']} + size {d['stop']} exceeds dimension {k} of size {size}")
        spec.append(slice(None if d["b"] else start, None if d["e"] else stop, stride))
    index = numbers[tuple(spec)]
    _index_map(ctx, index.shape, index)


def _tile(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=2, outputs=1)
    _check_string_io(ctx)
    x = ctx.input(0)
    reps = index_vector(ctx, 1, "multiples")
    ctx.check(len(reps) == x.ndim, f"multiples {reps} must have one entry per input dimension ({x.ndim})")
    ctx.check(all(r >= 0 for r in reps), f"multiples {reps} must not be negative")
    shape = [n * r for n, r in zip(x.shape, reps)]
    ctx.set_output(0, shape)  # (checks the element count against the memory limit before np.tile)
    index = np.tile(_numbers(x), reps) if x.ndim else _numbers(x)
    _index_map(ctx, shape, index)


def _broadcast_to(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=2, outputs=1)
    _check_string_io(ctx)
    x = ctx.input(0)
    shape = index_vector(ctx, 1, "shape")
    ctx.check(len(shape) >= x.ndim and all(d >= 0 for d in shape), f"cannot broadcast {list(x.shape)} to {shape}")
    for a, b in zip(x.shape[::-1], shape[::-1]):
        ctx.check(a in (1, b), f"cannot broadcast {list(x.shape)} to {shape}")
    ctx.set_output(0, shape)
    _index_map(ctx, shape, np.broadcast_to(_numbers(x), shape))


def _fill(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=2, outputs=1)
    dims_t, value = ctx.input(0), ctx.input(1)
    _check_string_io(ctx, inputs=(1,))
    ctx.check(dims_t.ndim == 1, f"dims must be 1-D, got shape {list(dims_t.shape)}")
    ctx.check(value.ndim == 0, f"value must be a scalar, got shape {list(value.shape)}")
    shape = index_vector(ctx, 0, "dims")
    ctx.check(all(d >= 0 for d in shape), f"dims {shape} must not be negative")
    ctx.set_output(0, shape)
    ctx.host_data = (tuple(shape), np.zeros(math.prod(shape), np.int64))


def _fill_host(ctx: PrepareContext) -> None:
    buf, offs = ctx.input_strings(1)
    shape, index = ctx.host_data
    write_take(ctx, 0, shape, buf, offs, index)


RESHAPE = kernel("RESHAPE", host=_take_host)(_reshape)
SQUEEZE = kernel("SQUEEZE", host=_take_host)(_squeeze)
EXPAND_DIMS = kernel("EXPAND_DIMS", host=_take_host)(_expand_dims)
SLICE = kernel("SLICE", host=_take_host)(_slice)
STRIDED_SLICE = kernel("STRIDED_SLICE", host=_take_host)(_strided_slice)
TILE = kernel("TILE", host=_take_host)(_tile)
BROADCAST_TO = kernel("BROADCAST_TO", host=_take_host)(_broadcast_to)
FILL = kernel("FILL", host=_fill_host)(_fill)


# --- GATHER, GATHER_ND: indices known at run time ----------------------------------------------------------------

def _gather_inputs(ctx: PrepareContext):
    """(params, indices) of the STRING GATHER / GATHER_ND: STRING params of rank 1 or more, integer indices."""
    ctx.check_num(inputs=2, outputs=1)
    _check_string_io(ctx)
    x, idx = ctx.input(0), ctx.input(1)
    ctx.check_dtype(idx, *INDEX_TYPES)
    ctx.check(x.ndim >= 1, "params must be at least a vector")
    return x, idx


def _gather(ctx: PrepareContext) -> None:
    x, idx = _gather_inputs(ctx)
    axis = normalize_axis(ctx, int(ctx.options.get("axis", 0)), x.ndim)
    shape, bd = gather_shape(ctx, x, idx, axis)
    ctx.set_output(0, shape)
    ctx.host_data = (tuple(shape), axis, bd)


def _gather_host(ctx: PrepareContext) -> None:
    buf, offs = ctx.input_strings(0)
    x = ctx.input(0)
    shape, axis, bd = ctx.host_data
    idx = np.asarray(ctx.input_array(1)).astype(np.int64)
    n = x.shape[axis]
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = int(idx[(idx < 0) | (idx >= n)].reshape(-1)[0])
        ctx.fail(f"gather index {bad} is outside axis {axis} (size {n}) of the params (input {ctx.input(1).name!r})")
    numbers = _numbers(x)
    if bd == 0:
        index = np.take(numbers, idx, axis=axis)
    else:  # batch dimensions shared by params and indices
        batch = int(np.prod(x.shape[:bd], dtype=np.int64))
        nb = numbers.reshape((batch,) + x.shape[bd:])
        ib = idx.reshape((batch,) + idx.shape[bd:])
        index = np.stack([np.take(nb[b], ib[b], axis=axis - bd) for b in range(batch)]) if batch else \
            np.zeros((0,), np.int64)
    write_take(ctx, 0, shape, buf, offs, index.reshape(-1))


def _gather_nd(ctx: PrepareContext) -> None:
    x, idx = _gather_inputs(ctx)
    ctx.check(idx.ndim >= 1, "indices must be at least a vector")
    nd = idx.shape[-1]
    ctx.check(0 <= nd <= x.ndim, f"indices innermost dimension {nd} must be in [0, {x.ndim}]")
    shape = list(idx.shape[:-1]) + list(x.shape[nd:])
    ctx.set_output(0, shape)
    ctx.host_data = (tuple(shape), nd)


def _gather_nd_host(ctx: PrepareContext) -> None:
    buf, offs = ctx.input_strings(0)
    x = ctx.input(0)
    shape, nd = ctx.host_data
    idx = np.asarray(ctx.input_array(1)).astype(np.int64).reshape(-1, nd) if nd else None
    numbers = _numbers(x)
    if idx is None:
        rows = int(np.prod(shape[:len(shape) - x.ndim], dtype=np.int64))
        index = np.broadcast_to(numbers.reshape(1, -1), (rows, x.size))
    else:
        dims = np.asarray(x.shape[:nd], np.int64)
        bad = (idx < 0) | (idx >= dims)
        if bad.any():
            row = int(np.nonzero(bad.any(axis=1))[0][0])
            ctx.fail(f"gather_nd index {idx[row].tolist()} is outside the params of shape {list(x.shape)} "
                     f"(input {ctx.input(1).name!r})")
        index = numbers[tuple(idx.T)]
    write_take(ctx, 0, shape, buf, offs, np.ascontiguousarray(index).reshape(-1))


GATHER = kernel("GATHER", host=_gather_host)(_gather)
GATHER_ND = kernel("GATHER_ND", host=_gather_nd_host)(_gather_nd)


# --- HASHTABLE_LOOKUP: rows of a table by int32 key, found by the official binary search --------------------------

def _lookup(ctx: PrepareContext) -> None:
    """HASHTABLE_LOOKUP(lookup int32 [n], keys int32 [k], values [k, ...]) -> (values of the keys found, hits uint8
    [n]); values of any numeric type or STRING (1-D). Rows not found are zeros / empty strings, hits 0."""
    ctx.check_num(inputs=3, outputs=2)
    lookup, keys, values = ctx.input(0), ctx.input(1), ctx.input(2)
    ctx.check(lookup.ndim == 1 and lookup.dtype == np.int32, "lookup must be a 1-D int32 tensor")
    ctx.check(keys.ndim == 1 and keys.dtype == np.int32, "keys must be a 1-D int32 tensor")
    ctx.check(values.ndim >= 1 and values.shape[0] == keys.shape[0],
              f"values {list(values.shape)} must have one row per key ({keys.shape[0]})")
    out, hits = ctx.output(0), ctx.output(1)
    ctx.check(hits.dtype == np.uint8, f"hits must be uint8, got {hits.dtype.name}")
    ctx.check(out.dtype == values.dtype, f"output type {out.dtype.name} differs from values {values.dtype.name}")
    if values.dtype == object:
        ctx.check(values.ndim == 1, "STRING values must be 1-D")
    ctx.set_output(0, (lookup.shape[0],) + values.shape[1:])
    ctx.set_output(1, (lookup.shape[0],))


def bsearch(table: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """glibc's bsearch of every key in `table` with the official comparator (int32 a - b, wrapping), vectorised:
    the position found, or -1. Keys are sorted in a valid model; an unsorted table gives what the official gives."""
    keys = keys.astype(np.int64)
    table = table.astype(np.int64)
    lo = np.zeros(keys.size, np.int64)
    hi = np.full(keys.size, table.size, np.int64)
    found = np.full(keys.size, -1, np.int64)
    active = lo < hi
    while active.any():
        mid = (lo + hi) // 2
        diff = keys - table[np.minimum(mid, table.size - 1)]
        cmp = (diff + (1 << 31)) % (1 << 32) - (1 << 31)  # the comparator's int32 subtraction
        hit = active & (cmp == 0)
        found[hit] = mid[hit]
        hi = np.where(active & (cmp < 0), mid, hi)
        lo = np.where(active & (cmp > 0), mid + 1, lo)
        active = active & ~hit & (lo < hi)
    return found


def _lookup_host(ctx: PrepareContext) -> None:
    lookup, keys = ctx.input_array(0).reshape(-1), ctx.input_array(1).reshape(-1)
    values = ctx.input(2)
    if values.shape[0] == 0:
        ctx.fail("the table has no rows")
    pos = bsearch(keys, lookup)
    hit = pos >= 0
    ctx.set_output_array(1, hit.astype(np.uint8))
    if values.dtype == object:
        buf, offs = ctx.input_strings(2)
        lens = strings.lengths(offs)[np.where(hit, pos, 0)] * hit
        data_pos = np.repeat(offs[:-1][np.where(hit, pos, 0)] - (np.cumsum(lens) - lens), lens)
        data = np.asarray(buf)[data_pos + np.arange(int(lens.sum()), dtype=np.int64)]
        out = ctx.string_output(0, (lookup.size,), strings.header_bytes(lookup.size) + data.size)
        strings.build(lens, data, out)
        return
    rows = ctx.input_array(2).reshape(values.shape[0], -1)
    out = np.zeros((lookup.size, rows.shape[1]), rows.dtype)
    out[hit] = rows[pos[hit]]
    ctx.set_output_array(0, out.reshape((lookup.size,) + values.shape[1:]))


HASHTABLE_LOOKUP = kernel("HASHTABLE_LOOKUP", host=_lookup_host)(_lookup)


# --- SKIP_GRAM: the n-grams of one sentence with up to max_skip_size words skipped between neighbours --------------

_SPACE = frozenset(b" \t\n\v\f\r")  # C's isspace in the "C" locale


def split_words(sentence: bytes) -> list[bytes]:
    """The official kernel's split: runs of non-space bytes (its loop starts at byte 1 and checks the word's first
    byte, so a leading space is skipped the same way)."""
    words, prev = [], 0
    for i in range(1, len(sentence)):
        if sentence[i] in _SPACE:
            if i > prev and sentence[prev] not in _SPACE:
                words.append(sentence[prev:i])
            prev = i + 1
    if len(sentence) > prev:
        words.append(sentence[prev:])
    return words


def skip_grams(words: list[bytes], n: int, skip: int, include_all: bool) -> list[bytes]:
    """The official enumeration order: a depth-first walk over word positions (stack[0] starts at 0 and is only ever
    advanced at depth 0 through its +1 step), emitting when the depth equals n (or is 1..n with include_all)."""
    out: list[bytes] = []
    if len(words) < n:
        return out
    stack = [0] * n
    depth = 1
    while depth >= 0:
        step = depth < n and stack[depth] + 1 < len(words) and (
            depth == 0 or stack[depth] - stack[depth - 1] <= skip)
        if step:
            stack[depth] += 1
            depth += 1
            if depth < n:
                stack[depth] = stack[depth - 1]
        else:
            if depth > 0 and (depth <= n if include_all else depth == n):
                out.append(b" ".join(words[stack[k]] for k in range(depth)))
            depth -= 1
    return out


def _skip_gram(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=1, outputs=1)
    _check_string_io(ctx)
    n = int(ctx.options.get("ngram_size", 0) or 0)
    ctx.check(n >= 1, f"ngram_size {n} must be at least 1")
    ctx.check(int(ctx.options.get("max_skip_size", 0) or 0) >= 0, "max_skip_size must not be negative")
    ctx.check(ctx.input(0).size >= 1, "the input holds no sentence (the official kernel reads string 0)")
    ctx.defer()  # the number of n-grams depends on the sentence


def _skip_gram_host(ctx: PrepareContext) -> None:
    sentence = ctx.input_items(0)[0]
    grams = skip_grams(split_words(sentence), int(ctx.options["ngram_size"]),
                       int(ctx.options.get("max_skip_size", 0) or 0), bool(ctx.options.get("include_all_ngrams")))
    ctx.set_output_items(0, (len(grams),), grams)


SKIP_GRAM = kernel("SKIP_GRAM", host=_skip_gram_host)(_skip_gram)

__all__ = ["GATHER", "GATHER_ND", "RESHAPE", "SQUEEZE", "EXPAND_DIMS", "SLICE", "STRIDED_SLICE", "TILE",
           "BROADCAST_TO", "FILL", "HASHTABLE_LOOKUP", "SKIP_GRAM", "bsearch", "split_words", "skip_grams",
           "write_take"]
