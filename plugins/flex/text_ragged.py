"""Flex text ops that make or read ragged tensors: StringSplitV2 (TF's SplitV2), StringNGrams and
RaggedTensorToTensor (row splits, value row ids, first dim size; any ragged rank; numeric or string values). Host
functions of the text ops' kernel (text_ops.py, whose table `OPS` lists them), over packed strings
(lite_numba/format/strings.py). Also the few input helpers both modules use."""

from __future__ import annotations

import numpy as np

from lite_numba.format import strings

WHITESPACE = b" \t\n\v\f\r"  # absl's ascii_isspace, C's isspace in the "C" locale


def items(ctx, i: int) -> list[bytes]:
    """STRING input i's strings, as bytes."""
    return ctx.input_items(i)


def scalar_bytes(ctx, i: int, what: str) -> bytes:
    """STRING input i, which must hold one string."""
    t = ctx.input(i)
    if t.dtype != object or t.size != 1:
        ctx.fail(f"{what} must be a scalar string, got {t.dtype.name} {list(t.shape)}")
    return ctx.input_items(i)[0]


def int_values(ctx, i: int) -> np.ndarray:
    """Integer input i's values as int64 (another type refused naming the input)."""
    a = np.asarray(ctx.input_array(i))
    if a.dtype.kind not in "iu":
        ctx.fail(f"input {i} must be integers, got {a.dtype.name}")
    return a.astype(np.int64)


def string_input(ctx, i: int = 0) -> None:
    """Refuse input i unless it is a STRING tensor."""
    t = ctx.input(i)
    if t is None or t.dtype != object:
        ctx.fail(f"input {i} must be a STRING tensor")


# --- splitting, n-grams, ragged to dense ----------------------------------------------------------------------------

def split_v2(s: bytes, sep: bytes, maxsplit: int) -> list[bytes]:
    """TF's SplitV2: a separator splits exactly (empty fields kept); none splits on runs of ASCII whitespace
    (none kept empty); at most maxsplit splits, the rest being the last field (maxsplit 0: the string itself)."""
    if maxsplit == 0:
        return [s]
    out = []
    if not sep:
        text = s.lstrip(WHITESPACE)
        while text:
            n = len(text)
            end = next((k for k in range(n) if text[k] in WHITESPACE), n)
            out.append(text[:end])
            text = text[end:].lstrip(WHITESPACE)
            if 0 < maxsplit == len(out):
                out.append(text)
                return out
        return out
    text = s
    while True:
        k = text.find(sep)
        if k < 0:
            break
        out.append(text[:k])
        text = text[k + len(sep):]
        if 0 < maxsplit == len(out):
            break
    out.append(text)
    return out


def split_prepare(ctx, node):
    string_input(ctx)
    if ctx.input(0).ndim != 1:
        ctx.fail(f"input must be a vector, got shape: {list(ctx.input(0).shape)}")
    if ctx.input(1).size != 1:
        ctx.fail(f"sep must be a scalar, got shape: {list(ctx.input(1).shape)}")
    ctx.defer()  # how many tokens: known from the data only


def split_host(ctx, node):
    sep = scalar_bytes(ctx, 1, "sep")
    maxsplit = int(node.attr("maxsplit", -1, "i"))
    rows = [split_v2(s, sep, maxsplit) for s in items(ctx, 0)]
    counts = np.array([len(r) for r in rows], np.int64)
    tokens = [t for r in rows for t in r]
    row = np.repeat(np.arange(len(rows), dtype=np.int64), counts)
    col = np.arange(len(tokens), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    ctx.set_output_array(0, np.stack([row, col], axis=1).reshape(len(tokens), 2))
    ctx.set_output_items(1, (len(tokens),), tokens)
    ctx.set_output_array(2, np.array([len(rows), counts.max(initial=0)], np.int64))


def _check_splits(ctx, splits: np.ndarray, n: int, what: str) -> None:
    if splits.size == 0 or splits[0] != 0 or np.any(np.diff(splits) < 0) or splits[-1] != n:
        ctx.fail(f"{what} {splits.tolist()[:8]}{'...' if splits.size > 8 else ''} are not valid row splits of "
                 f"{n} values (first 0, non-decreasing, last {n})")


def ngrams(data: list[bytes], width: int, sep: bytes, left: bytes, right: bytes, pad: int) -> list[bytes]:
    """TF's CreateNgrams for one row, one width (pad: the pad width in force for this width)."""
    num = max(0, len(data) + 2 * pad - width + 1)
    out = []
    for k in range(num):
        lp = max(0, pad - k)
        rp = max(0, pad - (num - (k + 1)))
        ntok = width - lp - rp
        start = 0 if lp > 0 else k - pad
        out.append(sep.join([left] * lp + data[start:start + ntok] + [right] * rp))
    return out


def ngrams_prepare(ctx, node):
    string_input(ctx)
    widths = node.attr("ngram_widths", [])
    if any(int(w) <= 0 for w in widths):
        ctx.fail("ngram_widths must contain positive values")
    ctx.defer()


def ngrams_host(ctx, node):
    data = items(ctx, 0)
    splits = int_values(ctx, 1).reshape(-1)
    sep, left, right = (node.attr(k, b"", "s") for k in ("separator", "left_pad", "right_pad"))
    widths = [int(w) for w in node.attr("ngram_widths", [])]
    pad_width = int(node.attr("pad_width", 0, "i"))
    short = bool(node.attr("preserve_short_sequences", False, "b"))
    if splits.size:
        _check_splits(ctx, splits, len(data), "data_splits")
    out, out_splits = [], [0]
    if data and splits.size:
        for i in range(splits.size - 1):
            row = data[splits[i]:splits[i + 1]]
            start = len(out)
            for w in widths:
                pad = min(w - 1 if pad_width < 0 else pad_width, w - 1)
                out += ngrams(row, w, sep, left, right, pad)
            if short and len(out) == start and row:
                if pad_width < 0:
                    ctx.fail(f"Pad width should be >= 0 when preserve_short_sequences is True and ngram_widths are "
                             f"not provided, got {pad_width}")
                w = len(row) + 2 * pad_width
                out += ngrams(row, w, sep, left, right, min(pad_width, w - 1))[:1]
            out_splits.append(len(out))
    else:
        out_splits = [0] * max(splits.size, 1)
    ctx.set_output_items(0, (len(out),), out)
    ctx.set_output_array(1, np.array(out_splits[:max(splits.size, 1)] if splits.size else [], ctx.input(1).dtype))


def _partitions(ctx, node, nvalues: int) -> list[np.ndarray]:
    """The row splits of every ragged level, outermost first, from the op's row partitions."""
    types = [bytes(t) for t in node.attr("row_partition_types", [])]
    tensors = [int_values(ctx, 3 + k).reshape(-1) for k in range(ctx.num_inputs - 3)]
    if len(types) != len(tensors) or not types:
        ctx.fail(f"row_partition_types {types} do not match the {len(tensors)} row partition tensors")
    k, nrows, splits = 0, None, []
    if types[0] == b"FIRST_DIM_SIZE":
        if tensors[0].size != 1:
            ctx.fail("FIRST_DIM_SIZE must be a scalar")
        nrows = int(tensors[0][0])
        k = 1
    levels = list(zip(types[k:], tensors[k:]))
    for j, (kind, t) in enumerate(levels):
        last = j == len(levels) - 1
        below = nvalues if last else None
        if kind == b"ROW_SPLITS":
            s = t
        elif kind == b"VALUE_ROWIDS":
            if nrows is None:
                ctx.fail("VALUE_ROWIDS needs the number of rows (FIRST_DIM_SIZE or an outer partition)")
            if t.size and (np.any(np.diff(t) < 0) or t[0] < 0 or t[-1] >= nrows):
                ctx.fail(f"value_rowids must be sorted and in [0, {nrows})")
            s = np.concatenate([[0], np.cumsum(np.bincount(t, minlength=nrows))]).astype(np.int64)
        else:
            ctx.fail(f"row partition type {kind!r} is not supported")
        n = int(s[-1]) if s.size else 0
        _check_splits(ctx, s, below if below is not None else n, f"level {j} row partition")
        if nrows is not None and s.size - 1 != nrows:
            ctx.fail(f"level {j} row partition describes {s.size - 1} rows, expected {nrows}")
        splits.append(s)
        nrows = n
    return splits


def to_tensor_prepare(ctx, node):
    ctx.defer()  # the dense shape follows the row partitions' values


def to_tensor_host(ctx, node):
    values_t, default_t = ctx.input(1), ctx.input(2)
    nvalues = values_t.shape[0] if values_t.ndim else 1
    splits = _partitions(ctx, node, nvalues)
    inner = tuple(values_t.shape[1:])
    # each value's coordinates: row of each level, position within its row
    coords = [np.arange(nvalues, dtype=np.int64)]
    for s in reversed(splits):
        parent = np.repeat(np.arange(s.size - 1, dtype=np.int64), np.diff(s))
        child = coords[0]
        coords[0] = child - s[parent[child]] if child.size else child
        coords.insert(0, parent[child] if child.size else child)
    dims = [splits[0].size - 1] + [int(np.diff(s).max(initial=0)) for s in splits] + list(inner)
    shape_in = int_values(ctx, 0).reshape(-1)
    if shape_in.size and not (shape_in.size == 1 and ctx.input(0).ndim == 0):  # (a scalar -1: unknown rank)
        if shape_in.size != len(dims):
            ctx.fail(f"shape {shape_in.tolist()} has rank {shape_in.size}, the ragged tensor {len(dims)}")
        dims = [int(w) if w >= 0 else d for w, d in zip(shape_in.tolist(), dims)]
        if tuple(dims[len(splits) + 1:]) != inner:
            ctx.fail(f"shape {shape_in.tolist()} does not match the values' inner shape {list(inner)}")
    keep = np.ones(nvalues, bool)
    for c, d in zip(coords, dims):
        keep &= c < d
    flat = np.zeros(nvalues, np.int64)
    for c, d in zip(coords, dims[:len(coords)]):
        flat = flat * d + c
    outer = int(np.prod(dims[:len(coords)], dtype=np.int64))
    source = np.full(outer, -1, np.int64)  # which value each outer cell takes, -1: the default
    source[flat[keep]] = np.nonzero(keep)[0]
    if values_t.dtype == object:
        if inner or default_t.size != 1:
            ctx.fail("string values must be 1-D with a scalar default")
        buf, offs = ctx.input_strings(1)
        dbuf, doffs = ctx.input_strings(2)
        both = strings.pack(strings.items(buf, offs) + strings.items(dbuf, doffs))
        index = np.where(source < 0, nvalues, source)
        ctx.set_output_items(0, dims, strings.items(strings.take(both, strings.offsets(both), index)))
        return
    values = np.asarray(ctx.input_array(1)).reshape((nvalues,) + inner)
    try:
        default = np.broadcast_to(np.asarray(ctx.input_array(2)), inner)
    except ValueError:
        ctx.fail(f"default_value of shape {list(default_t.shape)} does not broadcast to {list(inner)}")
    out = np.empty((outer,) + inner, values.dtype)
    out[...] = default
    out[source >= 0] = values[source[source >= 0]]
    ctx.set_output_array(0, out.reshape(dims))
