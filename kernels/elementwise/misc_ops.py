"""Small builtin ops real converter output uses: ADD_N, BROADCAST_ARGS, ATAN2, REVERSE_SEQUENCE, BITCAST,
BITWISE_XOR, RIGHT_SHIFT, MATRIX_DIAG, MATRIX_SET_DIAG, BUCKETIZE.

Semantics follow the official kernels (tensorflow/lite/kernels/<op>.cc); where those read out of bounds on bad input
(REVERSE_SEQUENCE checks only the first sequence length, ATAN2 only the ranks, MATRIX_SET_DIAG not the diagonal's
size, BROADCAST_ARGS aborts the process) these kernels raise a clear error instead. Data movement (BITCAST,
MATRIX_DIAG, MATRIX_SET_DIAG, REVERSE_SEQUENCE) moves raw words, so one compiled loop serves every dtype.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.common import broadcast_strides, padded_shape
from lite_numba.kernels.elementwise.arithmetic import (
    check_broadcast_rank,
    make_binary,
    no_limits,
    scalar,
    schedule_binary,
)
from lite_numba.kernels.movement.gather import elem_word
from lite_numba.kernels.movement.reshape import schedule_copy
from lite_numba.kernels.movement.transpose import WORDS, schedule_fill, schedule_strided_copy
from numba import njit

from lite_numba.ops import NeedsValue, PrepareContext, kernel

# --- ADD_N -------------------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def add_n_step(a, b, out, lim):
    """out = clamp(a + b, lim[0], lim[1]): the official kernel adds the inputs pairwise in order, each sum stored in
    the type (int32 wraps) and clamped to the type's [lowest, max] (a float overflow gives +-FLT_MAX, not inf; NaN
    stays NaN)."""
    lo, hi = lim[0], lim[1]
    for i in range(out.size):
        out[i] = a[i] + b[i]
        v = out[i]
        if v > hi:
            out[i] = hi
        elif v < lo:
            out[i] = lo


@kernel("ADD_N")
def ADD_N(ctx: PrepareContext) -> None:
    """out = x0 + x1 + ... (float32 or int32, same shapes; int32 wraps, float saturates at +-FLT_MAX)."""
    ctx.check(ctx.num_inputs >= 2, f"ADD_N needs at least 2 inputs, got {ctx.num_inputs}")
    ctx.check_num(outputs=1)
    xs = ctx.inputs
    ctx.check(all(x is not None for x in xs), "every input is required")
    x0 = xs[0]
    ctx.check_dtype(x0, np.float32, np.int32)
    for i, x in enumerate(xs[1:], 1):
        ctx.check(x.shape == x0.shape, f"input {i} has shape {list(x.shape)}, input 0 {list(x0.shape)}")
        ctx.check(x.dtype == x0.dtype, f"input {i} has type {x.dtype.name}, input 0 {x0.dtype.name}")
    out = ctx.set_output(0, x0.shape, x0.dtype)
    n = x0.size
    if n == 0:
        return
    info = np.finfo(x0.dtype) if x0.dtype.kind == "f" else np.iinfo(x0.dtype)
    lim = np.array([info.min, info.max], x0.dtype)
    of = ctx.view(out, (n,))
    ctx.call(add_n_step, ctx.view(x0, (n,)), ctx.view(xs[1], (n,)), of, lim)
    for x in xs[2:]:
        ctx.call(add_n_step, of, ctx.view(x, (n,)), of, lim)


# --- BROADCAST_ARGS ----------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def broadcast_args(s1, s2, out):
    n = out.size
    for i in range(n):
        a = s1[s1.size - 1 - i] if i < s1.size else 1
        b = s2[s2.size - 1 - i] if i < s2.size else 1
        if a == 1:
            out[n - 1 - i] = b
        elif b == 1 or a == b:
            out[n - 1 - i] = a
        else:
            raise ValueError("BROADCAST_ARGS: the shapes cannot be broadcast")


@kernel("BROADCAST_ARGS")
def BROADCAST_ARGS(ctx: PrepareContext) -> None:
    """The broadcast shape of two shape vectors (int32 or int64)."""
    ctx.check_num(inputs=2, outputs=1)
    s1, s2 = ctx.input(0), ctx.input(1)
    ctx.check_dtype(s1, np.int32, np.int64)
    ctx.check(s2.dtype == s1.dtype, f"shape types differ: {s1.dtype.name} and {s2.dtype.name}")
    ctx.check(s1.ndim == 1 and s2.ndim == 1, f"shapes must be vectors, got {list(s1.shape)} and {list(s2.shape)}")
    out = ctx.set_output(0, (max(s1.shape[0], s2.shape[0]),), s1.dtype)
    # shapes known at prepare (constants, SHAPE of static tensors): the result is known too, so a BROADCAST_TO
    # reading it stays static (reading an unknown value here must not make this node dynamic)
    try:
        v1, v2 = ctx.value(0), ctx.value(1)
    except NeedsValue:
        v1 = v2 = None
    if v1 is not None:
        a, b = [int(v) for v in np.asarray(v1).reshape(-1)], [int(v) for v in np.asarray(v2).reshape(-1)]
        n = out.size
        a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
        ctx.check(all(p == q or p == 1 or q == 1 for p, q in zip(a, b)), f"shapes {a} and {b} cannot be broadcast")
        ctx.set_known_value(0, [q if p == 1 else p for p, q in zip(a, b)])
    if out.size:
        ctx.call(broadcast_args, s1, s2, out)


# --- ATAN2, BITWISE_XOR, RIGHT_SHIFT (elementwise binary loops of elementwise.py) -------------------------------


@scalar
def _atan2(y, x):
    return np.arctan2(y, x)


@scalar
def _xor(a, b):
    return a ^ b


@scalar
def _rshift8(a, b):
    return np.int64(a) >> min(max(np.int64(b), 0), 7)


@scalar
def _rshift16(a, b):
    return np.int64(a) >> min(max(np.int64(b), 0), 15)


@scalar
def _rshift32(a, b):
    return np.int64(a) >> min(max(np.int64(b), 0), 31)


ATAN2_LOOPS = make_binary(_atan2, clamp=False)
XOR_LOOPS = make_binary(_xor, clamp=False)
RSHIFT_LOOPS = {1: make_binary(_rshift8, clamp=False), 2: make_binary(_rshift16, clamp=False),
                4: make_binary(_rshift32, clamp=False)}


@kernel("ATAN2")
def ATAN2(ctx: PrepareContext) -> None:
    """out = atan2(y, x) elementwise (float32 / float64, same shapes, libm's atan2f / atan2 as the official kernel)."""
    ctx.check_num(inputs=2, outputs=1)
    y, x = ctx.input(0), ctx.input(1)
    ctx.check_dtype(y, np.float32, np.float64)
    ctx.check(x.dtype == y.dtype, f"input types differ: {y.dtype.name} and {x.dtype.name}")
    # the official kernel checks only the ranks and pairs elements by flat index: equal element counts suffice
    ctx.check(x.ndim == y.ndim and x.size == y.size, f"input shapes {list(y.shape)} and {list(x.shape)} differ in "
              "rank or element count")
    out = ctx.set_output(0, y.shape, y.dtype)
    if out.size:
        n = out.size
        ctx.call(ATAN2_LOOPS[0], ctx.view(y, (n,)), ctx.view(x, (n,)), ctx.view(out, (n,)), no_limits(y.dtype))


def _int_binary_shape(ctx: PrepareContext):
    ctx.check_num(inputs=2, outputs=1)
    a, b = ctx.input(0), ctx.input(1)
    ctx.check_dtype(a, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32)
    ctx.check(b.dtype == a.dtype, f"input types differ: {a.dtype.name} and {b.dtype.name}")
    if a.shape == b.shape:
        return a, b, a.shape
    try:
        shape = tuple(int(d) for d in np.broadcast_shapes(a.shape, b.shape))
    except ValueError:
        ctx.fail(f"shapes {list(a.shape)} and {list(b.shape)} cannot be broadcast")
    return a, b, shape


@kernel("BITWISE_XOR")
def BITWISE_XOR(ctx: PrepareContext) -> None:
    """out = a ^ b (8/16/32-bit integers, signed or not: computed on the unsigned words)."""
    a, b, shape = _int_binary_shape(ctx)
    out = ctx.set_output(0, shape, a.dtype)
    _schedule_words(ctx, XOR_LOOPS, a, b, shape, out, WORDS[a.dtype.itemsize])


def _schedule_words(ctx: PrepareContext, loops, a, b, shape, out, w) -> None:
    """schedule_binary on the tensors' bytes read as unsigned words of their element size."""
    same, scalar_y, scalar_x, bcast = loops
    n = int(np.prod(shape, dtype=np.int64))
    if n == 0:
        return
    af, bf, of = ctx.view(a, (a.size,), w), ctx.view(b, (b.size,), w), ctx.view(out, (n,), w)
    lim = no_limits(w)
    if a.shape == b.shape:
        ctx.call(same, af, bf, of, lim)
    elif b.size == 1 and a.size == n:
        ctx.call(scalar_y, af, bf, of, lim)
    elif a.size == 1 and b.size == n:
        ctx.call(scalar_x, af, bf, of, lim)
    else:
        check_broadcast_rank(ctx, a.shape, b.shape, shape)
        ctx.call(bcast, af, bf, of, broadcast_strides(a.shape, shape), broadcast_strides(b.shape, shape),
                 padded_shape(shape), lim)


@kernel("RIGHT_SHIFT")
def RIGHT_SHIFT(ctx: PrepareContext) -> None:
    """out = a >> clamp(b, 0, bits - 1) (arithmetic for signed types, logical for unsigned)."""
    a, b, shape = _int_binary_shape(ctx)
    out = ctx.set_output(0, shape, a.dtype)
    schedule_binary(ctx, RSHIFT_LOOPS[a.dtype.itemsize], a, b, shape, out, no_limits(a.dtype))


# --- REVERSE_SEQUENCE --------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def reverse_sequence(x, lens, out, A, B, C, D, E, batch_first):
    """x and out are [A, B, C, D, E] words; batch is dimension B and sequence D when batch_first, else the reverse.
    Positions s < L (L the batch's sequence length) take position L - 1 - s; the rest are copied."""
    seq_n = D if batch_first else B
    for i in range(lens.size):
        if np.int64(lens[i]) > seq_n:
            raise ValueError("REVERSE_SEQUENCE: a sequence length exceeds the sequence dimension")
    for a in range(A):
        for b in range(B):
            for c in range(C):
                for d in range(D):
                    if batch_first:
                        L = np.int64(lens[b])
                        sb, sd = b, (L - 1 - d if d < L else d)
                    else:
                        L = np.int64(lens[d])
                        sb, sd = (L - 1 - b if b < L else b), d
                    src = x[(((a * B + sb) * C + c) * D + sd) * E:(((a * B + sb) * C + c) * D + sd + 1) * E]
                    o = (((a * B + b) * C + c) * D + d) * E
                    dst = out[o:o + E]
                    for e in range(E):
                        dst[e] = src[e]


@kernel("REVERSE_SEQUENCE")
def REVERSE_SEQUENCE(ctx: PrepareContext) -> None:
    """Reverse the first seq_lengths[b] elements along seq_dim of each slice b along batch_dim."""
    ctx.check_num(inputs=2, outputs=1)
    x, lens = ctx.input(0), ctx.input(1)
    ctx.check(x.dtype.itemsize in (1, 2, 4, 8, 16), f"input type {x.dtype.name} is not supported")
    ctx.check_dtype(lens, np.int32, np.int64)
    ctx.check(lens.ndim == 1, f"seq_lengths must be a vector, got shape {list(lens.shape)}")
    seq_dim, batch_dim = int(ctx.options.get("seq_dim", 0)), int(ctx.options.get("batch_dim", 0))
    ctx.check(0 <= seq_dim < x.ndim and 0 <= batch_dim < x.ndim and seq_dim != batch_dim,
              f"seq_dim {seq_dim} and batch_dim {batch_dim} must differ and lie in [0, {x.ndim})")
    ctx.check(lens.shape[0] == x.shape[batch_dim],
              f"seq_lengths has {lens.shape[0]} elements, batch dimension {x.shape[batch_dim]}")
    out = ctx.set_output(0, x.shape, x.dtype)
    if out.size == 0:
        return
    lo, hi = min(seq_dim, batch_dim), max(seq_dim, batch_dim)
    w = elem_word(x)
    A = int(np.prod(x.shape[:lo], dtype=np.int64))
    C = int(np.prod(x.shape[lo + 1:hi], dtype=np.int64))
    E = int(np.prod(x.shape[hi + 1:], dtype=np.int64)) * (x.dtype.itemsize // w)
    ctx.call(reverse_sequence, ctx.view(x, (x.nbytes // w,), WORDS[w]), lens,
             ctx.view(out, (out.nbytes // w,), WORDS[w]), A, x.shape[lo], C, x.shape[hi], E,
             int(batch_dim < seq_dim))


# --- BITCAST -----------------------------------------------------------------------------------------------------


@kernel("BITCAST")
def BITCAST(ctx: PrepareContext) -> None:
    """The same bytes as another type: a wider input gains a last dimension, a narrower one loses it."""
    ctx.check_num(inputs=1, outputs=1)
    x, out_t = ctx.input(0), ctx.output(0)
    for t in (x, out_t):
        ctx.check(t.dtype.kind in "biufc" and t.dtype.itemsize in (1, 2, 4, 8, 16),
                  f"type {t.dtype.name} is not supported")
    si, so = x.dtype.itemsize, out_t.dtype.itemsize
    if si > so:
        shape = x.shape + (si // so,)
    elif si < so:
        ctx.check(x.ndim >= 1 and x.shape[-1] == so // si,
                  f"input shape {list(x.shape)} must end in {so // si} to become {out_t.dtype.name}")
        shape = x.shape[:-1]
    else:
        shape = x.shape
    out = ctx.set_output(0, shape, out_t.dtype)
    schedule_copy(ctx, x, out)


# --- MATRIX_DIAG, MATRIX_SET_DIAG --------------------------------------------------------------------------------


@kernel("MATRIX_DIAG")
def MATRIX_DIAG(ctx: PrepareContext) -> None:
    """[..., n] -> [..., n, n] with the input on the diagonals and zeros elsewhere."""
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check(x.ndim >= 1, "the input must have rank 1 or more")
    ctx.check(x.dtype.itemsize in (1, 2, 4, 8, 16), f"input type {x.dtype.name} is not supported")
    n = x.shape[-1]
    out = ctx.set_output(0, x.shape + (n,), x.dtype)
    if out.size == 0:
        return
    batch = x.size // n
    schedule_fill(ctx, out, 0)
    schedule_strided_copy(ctx, x, out, (batch, n), (n, 1), (n * n, n + 1))


@kernel("MATRIX_SET_DIAG")
def MATRIX_SET_DIAG(ctx: PrepareContext) -> None:
    """out = input with the main diagonal of each [rows, cols] matrix replaced by diagonal[..., :min(rows, cols)]."""
    ctx.check_num(inputs=2, outputs=1)
    x, diag = ctx.input(0), ctx.input(1)
    ctx.check(x.ndim >= 2, "the input must have rank 2 or more")
    ctx.check(x.dtype.itemsize in (1, 2, 4, 8, 16), f"input type {x.dtype.name} is not supported")
    ctx.check(diag.dtype == x.dtype, f"diagonal type {diag.dtype.name} differs from input type {x.dtype.name}")
    r, c = x.shape[-2], x.shape[-1]
    m = min(r, c)
    batch = int(np.prod(x.shape[:-2], dtype=np.int64))
    # the official kernel reads batch * min(rows, cols) diagonal values in order, whatever the diagonal's shape
    ctx.check(diag.size >= batch * m, f"diagonal shape {list(diag.shape)} has fewer than the "
              f"{batch * m} values of shape {list(x.shape[:-2]) + [m]}")
    out = ctx.set_output(0, x.shape, x.dtype)
    if out.size == 0:
        return
    schedule_copy(ctx, x, out)
    if m:
        schedule_strided_copy(ctx, diag, out, (batch, m), (m, 1), (r * c, c + 1))


# --- BUCKETIZE ---------------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def bucketize(x, bounds, out):
    """out[i] = the number of boundaries <= x[i] (std::upper_bound's halving search, so unordered or NaN boundaries
    give the official answer too); int inputs are compared as float32 as C++ converts them."""
    nb = bounds.size
    for i in range(x.size):
        v = x[i]
        first = 0
        n = nb
        while n > 0:
            half = n >> 1
            if v < bounds[first + half]:
                n = half
            else:
                first += half + 1
                n -= half + 1
        out[i] = first


@njit(cache=True, nogil=True)
def to_float32(x, out):
    for i in range(x.size):
        out[i] = np.float32(x[i])


@kernel("BUCKETIZE")
def BUCKETIZE(ctx: PrepareContext) -> None:
    """out (int32) = index of the bucket of each input value among the sorted float boundaries."""
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check_dtype(x, np.float32, np.float64, np.int32, np.int64)
    bounds = np.asarray(ctx.options.get("boundaries") or [], np.float32).reshape(-1)
    ctx.check(not bool(np.any(bounds[1:] < bounds[:-1])), "boundaries must be sorted")
    out = ctx.set_output(0, x.shape, np.int32)
    if out.size == 0:
        return
    flat = ctx.view(x, (x.size,))
    of = ctx.view(out, (out.size,))
    if x.dtype == np.float64:  # float vs double: C++ widens the float boundary (exact)
        ctx.call(bucketize, flat, bounds.astype(np.float64), of)
    elif x.dtype == np.float32:
        ctx.call(bucketize, flat, bounds, of)
    else:  # int32/int64 vs float: C++ converts the integer to float
        tmp = ctx.temp((x.size,), np.float32)
        ctx.call(to_float32, flat, tmp)
        ctx.call(bucketize, tmp, bounds, of)


__all__ = ["ADD_N", "BROADCAST_ARGS", "ATAN2", "BITWISE_XOR", "RIGHT_SHIFT", "REVERSE_SEQUENCE", "BITCAST",
           "MATRIX_DIAG", "MATRIX_SET_DIAG", "BUCKETIZE"]
