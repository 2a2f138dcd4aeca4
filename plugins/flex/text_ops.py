"""Flex text ops: what Keras `TextVectorization` and the `tf.strings` basics convert to with SELECT_TF_OPS, without
TensorFlow. Host ops (`TEXT`, registered by exact name for each `Flex<TfOp>` of `OPS`): plain Python / numpy over
packed strings (lite_numba/format/strings.py) at invoke time, since Numba has no string type; the numeric nodes
around them stay in compiled segments.

- StringLower, StringUpper (encoding "": ASCII letters only, as absl's AsciiStrToLower; "utf-8": Unicode case
  mapping of the decoded text, invalid bytes becoming U+FFFD and the text ending at a NUL, as TF's ICU call makes
  them), StringStrip (ASCII whitespace),
  StringLength (bytes, or UTF-8 characters), StringJoin, ReduceJoin, Substr (BYTE and UTF8_CHAR units, TF's
  position rules and errors).
- StaticRegexReplace, RegexReplace, StaticRegexFullMatch, RegexFullMatch: RE2 itself (the google-re2 binding), as
  TensorFlow uses RE2; replacement is RE2's GlobalReplace / Replace loop (the empty-match rule included) with its
  rewrite syntax (\\0-\\9, \\\\).
- StringSplitV2 (TF's SplitV2: a separator splits exactly, none splits on runs of ASCII whitespace; maxsplit),
  StringNGrams (padding, widths, short sequences), RaggedTensorToTensor (ROW_SPLITS, VALUE_ROWIDS and
  FIRST_DIM_SIZE partitions, any ragged rank, numeric or string values).
- StringToHashBucketFast: FarmHash's Fingerprint64 (pyfarmhash) modulo the buckets.
- HashTableV2, LookupTableImportV2, LookupTableFindV2, LookupTableSizeV2 (the tables the converter leaves to TF:
  key or value types other than string <-> int64), tables named by shared_name as TF shares them.

google-re2 and pyfarmhash are the optional extra `lite-numba[text]`; an op needing a missing one fails at
allocate_tensors() naming the extra.
"""

from __future__ import annotations

import numpy as np

from lite_numba.format import strings
from lite_numba.ops import OpKernel

from .nodedef import FlexNode, TfDataType

EXTRA = "pip install 'lite-numba[text]'"
WHITESPACE = b" \t\n\v\f\r"  # absl's ascii_isspace, C's isspace in the "C" locale


def _need(module: str, package: str, ctx, op: str):
    try:
        return __import__(module)
    except ImportError:
        ctx.fail(f"the Flex op {op} needs the {package} package, which is not installed: {EXTRA} (the optional extra "
                 f"'text' of lite-numba)")


def _items(ctx, i: int) -> list[bytes]:
    return ctx.input_items(i)


def _scalar_bytes(ctx, i: int, what: str) -> bytes:
    t = ctx.input(i)
    if t.dtype != object or t.size != 1:
        ctx.fail(f"{what} must be a scalar string, got {t.dtype.name} {list(t.shape)}")
    return ctx.input_items(i)[0]


def _ints(ctx, i: int) -> np.ndarray:
    a = np.asarray(ctx.input_array(i))
    if a.dtype.kind not in "iu":
        ctx.fail(f"input {i} must be integers, got {a.dtype.name}")
    return a.astype(np.int64)


def _same_shape(ctx, node: FlexNode, i: int = 0, out_dtype=None) -> None:
    """An elementwise op: output 0 has input i's shape."""
    ctx.set_output(0, ctx.input(i).shape, out_dtype)


def _string_input(ctx, i: int = 0) -> None:
    t = ctx.input(i)
    if t is None or t.dtype != object:
        ctx.fail(f"input {i} must be a STRING tensor")


# --- case, strip, length ------------------------------------------------------------------------------------------

_LOWER = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")
_UPPER = bytes.maketrans(b"abcdefghijklmnopqrstuvwxyz", b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _case(upper: bool):
    def prepare(ctx, node):
        _string_input(ctx)
        enc = node.attr("encoding", b"", "s").lower()
        if enc not in (b"", b"utf-8", b"utf8"):
            ctx.fail(f"encoding {enc!r} is not supported (TensorFlow: '' or 'utf-8')")
        _same_shape(ctx, node)

    def host(ctx, node):
        enc = node.attr("encoding", b"", "s")
        items = _items(ctx, 0)
        if enc:  # TF hands ICU a C string: the text ends at its first NUL
            conv = str.upper if upper else str.lower
            out = [conv(s.split(b"\x00", 1)[0].decode("utf-8", "replace")).encode("utf-8") for s in items]
        else:
            table = _UPPER if upper else _LOWER
            out = [s.translate(table) for s in items]
        ctx.set_output_items(0, ctx.input(0).shape, out)

    return prepare, host


def _strip_host(ctx, node):
    ctx.set_output_items(0, ctx.input(0).shape, [s.strip(WHITESPACE) for s in _items(ctx, 0)])


def _length_prepare(ctx, node):
    _string_input(ctx)
    unit = node.attr("unit", b"BYTE", "s")
    if unit not in (b"BYTE", b"UTF8_CHAR"):
        ctx.fail(f"unit {unit!r} is not BYTE or UTF8_CHAR")
    _same_shape(ctx, node, out_dtype=np.int32)


def _length_host(ctx, node):
    items = _items(ctx, 0)
    if node.attr("unit", b"BYTE") == b"UTF8_CHAR":  # characters: the bytes that are not UTF-8 continuation bytes
        n = [len(s) - sum(1 for b in s if 0x80 <= b < 0xC0) for s in items]
    else:
        n = [len(s) for s in items]
    ctx.set_output_array(0, np.array(n, np.int32).reshape(ctx.input(0).shape))


def _string_prepare(ctx, node):
    _string_input(ctx)
    _same_shape(ctx, node)


# --- joins ----------------------------------------------------------------------------------------------------------

def _join_prepare(ctx, node):
    shapes = []
    for i in range(ctx.num_inputs):
        _string_input(ctx, i)
        shapes.append(ctx.input(i).shape)
    full = [s for s in shapes if len(s)]
    if any(s != full[0] for s in full):
        ctx.fail(f"StringJoin inputs must be scalars or of one shape, got {[list(s) for s in shapes]}")
    ctx.set_output(0, full[0] if full else ())


def _join_host(ctx, node):
    sep = node.attr("separator", b"", "s")
    shape = ctx.output(0).shape
    n = int(np.prod(shape, dtype=np.int64))
    cols = [_items(ctx, i) for i in range(ctx.num_inputs)]
    cols = [c * n if len(c) == 1 and n != 1 else c for c in cols]
    ctx.set_output_items(0, shape, [sep.join(parts) for parts in zip(*cols)] if cols else [b""] * n)


def _reduce_join_prepare(ctx, node):
    _string_input(ctx)
    x = ctx.input(0)
    axes = [int(a) for a in np.asarray(ctx.value(1)).reshape(-1)]
    seen = set()
    for a in axes:
        if not -x.ndim <= a < x.ndim:
            ctx.fail(f"Invalid reduction dimension {a} for input with {x.ndim} dimension(s)")
        a = a + x.ndim if a < 0 else a
        if a in seen:
            ctx.fail(f"Duplicate reduction dimension {a}")
        seen.add(a)
    keep = bool(node.attr("keep_dims", False, "b"))
    shape = [1 if d in seen else n for d, n in enumerate(x.shape) if keep or d not in seen]
    ctx.set_output(0, shape)
    # TF joins in the order of its LinearSubIndexToFullIndex: the first listed axis varies fastest
    reduced = [a + x.ndim if a < 0 else a for a in reversed(axes)]
    ctx.host_data = ([d for d in range(x.ndim) if d not in seen] + reduced, len(reduced))


def _reduce_join_host(ctx, node):
    x = ctx.input(0)
    perm, nred = ctx.host_data
    arr = np.empty(x.size, object)
    arr[:] = _items(ctx, 0)
    arr = arr.reshape(x.shape).transpose(perm)
    r = int(np.prod(arr.shape[len(arr.shape) - nred:], dtype=np.int64))
    rows = arr.reshape(-1, r) if arr.size else np.empty((int(np.prod(ctx.output(0).shape)), r), object)
    sep = node.attr("separator", b"", "s")
    ctx.set_output_items(0, ctx.output(0).shape, [sep.join(row) for row in rows.tolist()])


# --- Substr ---------------------------------------------------------------------------------------------------------

def _substr_prepare(ctx, node):
    _string_input(ctx)
    pos, ln = ctx.input(1), ctx.input(2)
    if pos.shape != ln.shape:
        ctx.fail(f"pos and len should have the same shape, got: {list(pos.shape)} vs. {list(ln.shape)}")
    if pos.size == 0:
        ctx.fail("received empty tensor pos_tensor")
    unit = node.attr("unit", b"BYTE", "s")
    if unit not in (b"BYTE", b"UTF8_CHAR"):
        ctx.fail(f"unit {unit!r} is not BYTE or UTF8_CHAR")
    try:
        shape = np.broadcast_shapes(ctx.input(0).shape, pos.shape)
    except ValueError:
        ctx.fail(f"Incompatible shapes: {list(ctx.input(0).shape)} vs. {list(pos.shape)}")
    ctx.set_output(0, shape)


def _trail(b: int) -> bool:
    return 0x80 <= b < 0xC0


def _forward(s: bytes, n: int, p: int) -> tuple[bool, int]:
    """TF's ForwardNUTF8CharPositions: move p over n characters; whether all n were there."""
    k = 0
    while k < n and p < len(s):
        p += 1
        while p < len(s) and _trail(s[p]):
            p += 1
        k += 1
    return k == n, p


def _back(s: bytes, n: int, p: int) -> tuple[bool, int]:
    k = 0
    while k < n and p > 0:
        p -= 1
        while _trail(s[p]) and p > 0:
            p -= 1
        k += 1
    return k == n, p


def _substr_one(s: bytes, pos: int, ln: int, utf8: bool) -> bytes | None:
    """One substring by TF's rules, None when pos is out of range."""
    if not utf8:
        p = len(s) + pos if pos < 0 else pos
        if not 0 <= p <= len(s):
            return None
        return s[p:] if ln < 0 else s[p:p + ln]  # (a negative length is a huge size_t: to the end)
    if pos >= 0:
        ok, start = _forward(s, pos, 0)
        if not ok:
            return None
        _, end = _forward(s, ln, start)
        return s[start:end]
    skip = max(-pos - ln, 0)
    ok, end = _back(s, skip, len(s))
    if not ok:
        return None
    ok, start = _back(s, -pos - skip, end)
    return s[start:end] if ok else None


def _substr_host(ctx, node):
    x = ctx.input(0)
    shape = ctx.output(0).shape
    arr = np.empty(x.size, object)
    arr[:] = _items(ctx, 0)
    strs = np.broadcast_to(arr.reshape(x.shape), shape).reshape(-1)
    pos = np.broadcast_to(_ints(ctx, 1).reshape(ctx.input(1).shape), shape).reshape(-1)
    ln = np.broadcast_to(_ints(ctx, 2).reshape(ctx.input(2).shape), shape).reshape(-1)
    utf8 = node.attr("unit", b"BYTE") == b"UTF8_CHAR"
    out = []
    for i, (s, p, n) in enumerate(zip(strs.tolist(), pos.tolist(), ln.tolist())):
        sub = _substr_one(s, p, n, utf8)
        if sub is None:
            ctx.fail(f"pos {p} out of range for string at index {i}")
        out.append(sub)
    ctx.set_output_items(0, shape, out)


# --- regular expressions (RE2) ----------------------------------------------------------------------------------

def _compile(ctx, node, pattern: bytes):
    re2 = _need("re2", "google-re2", ctx, node.op)
    opts = re2.Options()
    opts.log_errors = False
    r = re2._re2.RE2(pattern, opts)
    if not r.ok():
        ctx.fail(f"Invalid pattern: {pattern.decode('utf-8', 'replace')}, error: {r.error()}")
    return re2, r


def _rewrite_pieces(ctx, rewrite: bytes, groups: int) -> list:
    """RE2's rewrite string as [bytes | group number]: \\0-\\9 a group, \\\\ a backslash; anything else after a
    backslash, or a group the pattern does not have, is refused as RE2's CheckRewriteString refuses it."""
    pieces, lit, i = [], bytearray(), 0
    while i < len(rewrite):
        c = rewrite[i]
        if c != 0x5C:
            lit.append(c)
            i += 1
            continue
        nxt = rewrite[i + 1] if i + 1 < len(rewrite) else None
        if nxt == 0x5C:
            lit.append(0x5C)
        elif nxt is not None and 0x30 <= nxt <= 0x39:
            n = nxt - 0x30
            if n > groups:
                ctx.fail(f"Rewrite schema requests {n} matches, but the regexp only has {groups} parenthesized "
                         f"subexpressions")
            if lit:
                pieces.append(bytes(lit))
                lit = bytearray()
            pieces.append(n)
        else:
            ctx.fail("Rewrite schema error: '\\' not allowed at end." if nxt is None else
                     "Rewrite schema error: '\\' must be followed by a digit or '\\'.")
        i += 2
    if lit:
        pieces.append(bytes(lit))
    return pieces


def _rune_length(s: bytes, p: int) -> int:
    """Bytes of the UTF-8 character at p (RE2's fullrune / chartorune); 0 when it is not a valid one."""
    b = s[p]
    n = 1 if b < 0x80 else 2 if 0xC0 <= b < 0xE0 else 3 if 0xE0 <= b < 0xF0 else 4 if 0xF0 <= b < 0xF8 else 0
    if n <= 1 or p + n > len(s):
        return n if n == 1 else 0
    if any(not _trail(s[p + k]) for k in range(1, n)):
        return 0
    cp = int.from_bytes(s[p:p + n], "big")
    value = {2: ((cp >> 8) & 0x1F) << 6 | cp & 0x3F,
             3: ((cp >> 16) & 0x0F) << 12 | ((cp >> 8) & 0x3F) << 6 | cp & 0x3F,
             4: ((cp >> 24) & 0x07) << 18 | ((cp >> 16) & 0x3F) << 12 | ((cp >> 8) & 0x3F) << 6 | cp & 0x3F}[n]
    low = {2: 0x80, 3: 0x800, 4: 0x10000}[n]
    return n if low <= value <= 0x10FFFF else 0


def regex_replace(re2, r, s: bytes, pieces: list, global_: bool) -> bytes:
    """RE2::GlobalReplace (global_) or RE2::Replace of s."""
    unanchored = re2._re2.RE2.Anchor.UNANCHORED

    def rewrite(spans) -> bytes:
        return b"".join(p if isinstance(p, bytes) else s[spans[p][0]:spans[p][1]] if spans[p][0] >= 0 else b""
                        for p in pieces)

    if not global_:
        spans = r.Match(unanchored, s, 0, len(s))
        if spans[0][0] < 0:
            return s
        return s[:spans[0][0]] + rewrite(spans) + s[spans[0][1]:]
    out, p, lastend, count = [], 0, -1, 0
    while p <= len(s):
        spans = r.Match(unanchored, s, p, len(s))
        a, b = spans[0]
        if a < 0:
            break
        if p < a:
            out.append(s[p:a])
        if a == lastend and a == b:  # no empty match right after the previous match: step one character
            n = _rune_length(s, p) if p < len(s) else 0
            step = n if n > 0 else 1
            if p < len(s):
                out.append(s[p:p + step])
            p += step
            continue
        out.append(rewrite(spans))
        p = lastend = b
        count += 1
    if count == 0:
        return s
    out.append(s[p:])
    return b"".join(out)


def _regex_prepare(static: bool, match: bool):
    def prepare(ctx, node):
        _string_input(ctx)
        if static:
            pattern = node.attr("pattern", None, "s")
            if pattern is None:
                ctx.fail("the pattern attribute is missing")
            re2, r = _compile(ctx, node, pattern)
            pieces = None if match else _rewrite_pieces(ctx, node.attr("rewrite", b"", "s"),
                                                        r.NumberOfCapturingGroups())
            ctx.host_data = (re2, r, pieces)
        else:
            _need("re2", "google-re2", ctx, node.op)
            ctx.host_data = None
        _same_shape(ctx, node, out_dtype=np.bool_ if match else None)

    return prepare


def _regex_host(match: bool):
    def host(ctx, node):
        if ctx.host_data is not None:
            re2, r, pieces = ctx.host_data
        else:  # the pattern (and rewrite) are inputs
            re2, r = _compile(ctx, node, _scalar_bytes(ctx, 1, "pattern"))
            pieces = None if match else _rewrite_pieces(ctx, _scalar_bytes(ctx, 2, "rewrite"),
                                                        r.NumberOfCapturingGroups())
        items = _items(ctx, 0)
        shape = ctx.input(0).shape
        if match:
            both = re2._re2.RE2.Anchor.ANCHOR_BOTH
            ok = [r.Match(both, s, 0, len(s))[0][0] >= 0 for s in items]
            ctx.set_output_array(0, np.array(ok, np.bool_).reshape(shape))
            return
        glob = bool(node.attr("replace_global", True, "b"))
        ctx.set_output_items(0, shape, [regex_replace(re2, r, s, pieces, glob) for s in items])

    return host


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


def _split_prepare(ctx, node):
    _string_input(ctx)
    if ctx.input(0).ndim != 1:
        ctx.fail(f"input must be a vector, got shape: {list(ctx.input(0).shape)}")
    if ctx.input(1).size != 1:
        ctx.fail(f"sep must be a scalar, got shape: {list(ctx.input(1).shape)}")
    ctx.defer()  # how many tokens: known from the data only


def _split_host(ctx, node):
    sep = _scalar_bytes(ctx, 1, "sep")
    maxsplit = int(node.attr("maxsplit", -1, "i"))
    rows = [split_v2(s, sep, maxsplit) for s in _items(ctx, 0)]
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


def _ngrams_prepare(ctx, node):
    _string_input(ctx)
    widths = node.attr("ngram_widths", [])
    if any(int(w) <= 0 for w in widths):
        ctx.fail("ngram_widths must contain positive values")
    ctx.defer()


def _ngrams_host(ctx, node):
    data = _items(ctx, 0)
    splits = _ints(ctx, 1).reshape(-1)
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
    tensors = [_ints(ctx, 3 + k).reshape(-1) for k in range(ctx.num_inputs - 3)]
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


def _to_tensor_prepare(ctx, node):
    ctx.defer()  # the dense shape follows the row partitions' values


def _to_tensor_host(ctx, node):
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
    shape_in = _ints(ctx, 0).reshape(-1)
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


# --- hashing ----------------------------------------------------------------------------------------------------------

def _hash_prepare(ctx, node):
    _string_input(ctx)
    _need("farmhash", "pyfarmhash", ctx, node.op)
    if int(node.attr("num_buckets", 0, "i")) < 1:
        ctx.fail(f"num_buckets must be positive, got {node.attr('num_buckets')}")
    _same_shape(ctx, node, out_dtype=np.int64)


def _hash_host(ctx, node):
    import farmhash  # lazy: the optional extra, checked at prepare

    n = int(node.attr("num_buckets"))
    out = [farmhash.fingerprint64(s) % n for s in _items(ctx, 0)]
    ctx.set_output_array(0, np.array(out, np.uint64).astype(np.int64).reshape(ctx.input(0).shape))


# --- lookup tables (TF's HashTableV2: a static table named by shared_name) -----------------------------------------

def _tables(ctx) -> dict:
    return ctx.resources.setdefault("flex_tables", {})


def _table_prepare(ctx, node):
    ctx.set_output(0, ctx.output(0).shape)


def _table_host(ctx, node):
    name = node.attr("shared_name", b"", "s") or node.name.encode()
    names = ctx.resources.setdefault("flex_table_names", {})
    rid = names.setdefault(name, len(names) + 1)
    _tables(ctx).setdefault(rid, {"key": node.attr("key_dtype"), "value": node.attr("value_dtype"), "map": {}})
    ctx.set_output_array(0, np.full(ctx.output(0).shape, rid, ctx.output(0).dtype))


def _lookup_table(ctx, node) -> dict:
    rid = int(_ints(ctx, 0).reshape(-1)[0]) if ctx.input(0).size else -1
    table = _tables(ctx).get(rid)
    if table is None:
        ctx.fail(f"input 0 ({ctx.input(0).name!r}) is not a lookup table handle (value {rid})")
    return table


def _values(ctx, i: int) -> list:
    return _items(ctx, i) if ctx.input(i).dtype == object else np.asarray(ctx.input_array(i)).reshape(-1).tolist()


def _check_type(ctx, i: int, want, what: str) -> None:
    t = ctx.input(i)
    have = TfDataType(7) if t.dtype == object else t.dtype
    if want is not None and have != want:
        ctx.fail(f"{what} {t.name!r} are {have}, the table's are {want}")


def _import_host(ctx, node):
    table = _lookup_table(ctx, node)
    _check_type(ctx, 1, table["key"], "keys")
    _check_type(ctx, 2, table["value"], "values")
    if ctx.input(1).shape != ctx.input(2).shape:
        ctx.fail(f"keys {list(ctx.input(1).shape)} and values {list(ctx.input(2).shape)} differ in shape")
    m = table["map"]
    for k, v in zip(_values(ctx, 1), _values(ctx, 2)):
        have = m.setdefault(k, v)
        if have != v:
            ctx.fail(f"HashTable has different value for same key. Key {k!r} has {have!r} and trying to add value "
                     f"{v!r}")


def _find_prepare(ctx, node):
    ctx.set_output(0, ctx.input(1).shape, ctx.input(2).dtype)


def _find_host(ctx, node):
    table = _lookup_table(ctx, node)
    _check_type(ctx, 1, table["key"], "keys")
    _check_type(ctx, 2, table["value"], "default values")
    default = _values(ctx, 2)
    if not default:
        ctx.fail("the default value is empty")
    get = table["map"].get
    found = [get(k, default[0]) for k in _values(ctx, 1)]
    shape = ctx.input(1).shape
    if ctx.output(0).dtype == object:
        ctx.set_output_items(0, shape, found)
    else:
        ctx.set_output_array(0, np.array(found, ctx.output(0).dtype).reshape(shape))


def _size_host(ctx, node):
    ctx.set_output_array(0, np.full(ctx.output(0).shape, len(_lookup_table(ctx, node)["map"]), np.int64))


def _nothing(ctx, node):
    pass


def _out_int64_scalar(ctx, node):
    ctx.set_output(0, ctx.output(0).shape, np.int64)


# TF op -> (prepare(ctx, node), host(ctx, node))
OPS = {
    "StringLower": _case(False),
    "StringUpper": _case(True),
    "StringStrip": (_string_prepare, _strip_host),
    "StringLength": (_length_prepare, _length_host),
    "StringJoin": (_join_prepare, _join_host),
    "ReduceJoin": (_reduce_join_prepare, _reduce_join_host),
    "Substr": (_substr_prepare, _substr_host),
    "StaticRegexReplace": (_regex_prepare(True, False), _regex_host(False)),
    "RegexReplace": (_regex_prepare(False, False), _regex_host(False)),
    "StaticRegexFullMatch": (_regex_prepare(True, True), _regex_host(True)),
    "RegexFullMatch": (_regex_prepare(False, True), _regex_host(True)),
    "StringSplitV2": (_split_prepare, _split_host),
    "StringNGrams": (_ngrams_prepare, _ngrams_host),
    "RaggedTensorToTensor": (_to_tensor_prepare, _to_tensor_host),
    "StringToHashBucketFast": (_hash_prepare, _hash_host),
    "HashTableV2": (_table_prepare, _table_host),
    "LookupTableImportV2": (_nothing, _import_host),
    "LookupTableFindV2": (_find_prepare, _find_host),
    "LookupTableSizeV2": (_out_int64_scalar, _size_host),
}


def make_kernel(flex_node, op_status) -> OpKernel:
    """The host kernel of every op of OPS (registered by the exact name Flex<TfOp>): prepare decodes the node (kept
    in its state) and runs the op's prepare; host runs the op at invoke."""

    def prepare(ctx) -> None:
        node = flex_node(ctx)
        impl = OPS.get(node.op)
        if impl is None:
            ctx.fail(f"TensorFlow op {node.op!r} is not a text op")
        impl[0](ctx, node)

    def host(ctx) -> None:
        node = flex_node(ctx)
        OPS[node.op][1](ctx, node)

    return OpKernel("FlexText", prepare, init=lambda options: {}, host=host,
                    meta={"op_status": op_status, "runs_on": "host"})
