"""Elementwise maths as tables of scalar definitions: binary ops with broadcasting (arithmetic with fused activation,
SQUARED_DIFFERENCE, POW, FLOOR_DIV, FLOOR_MOD, MINIMUM, MAXIMUM, ATAN2, ADD_N); unary maths is in unary.py.

One loop nest per shape class (same shape, scalar operand, strided 6-D broadcast), instantiated per scalar op by a
factory (make_binary here, make_unary in unary.py); the scalar ops are plain functions marked @scalar so that
Numba's disk cache of the closures works across processes (see `scalar`). A loop is compiled only for the (op,
dtypes) pairs a model uses. Activations live in activations.py, comparisons/logic/select in logic.py; all of them
reuse these factories.

Integer semantics follow the official kernels: arithmetic wraps in the tensor's type (Numba widens to int64, and the
store into the output truncates back), then the fused activation clamps. Float results of ADD/SUB/MUL/DIV are
clamped to the finite float32 range even without an activation, as TFLite's CalculateActivationRange does."""

from __future__ import annotations

import hashlib
import inspect
import math
from pathlib import Path

import numpy as np
from lite_numba.kernels.base.activation import F32_MAX, float_activation_range, int_activation_range
from lite_numba.kernels.base.shapes import (
    MAX_BROADCAST_RANK,
    broadcast_shape,
    collapse_broadcast,
    two_inputs_of_one_type,
)
from lite_numba.kernels.base.strided import box_walk, next_row
from lite_numba.kernels.base.threads import PARALLEL, call_at, element_parts, run_chunks, serial_address
from lite_numba.kernels.base.vecmath import wide_vectors
from numba import njit
from numba.extending import register_jitable

from lite_numba.ops import PrepareContext, kernel

QUANTIZED_TYPES = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16))


def is_quantized(t) -> bool:
    """True for an int8/uint8/int16 tensor with quantization scales: its maths lives in the op's quantized variant."""
    return t is not None and t.dtype in QUANTIZED_TYPES and t.quantization.scales.size > 0


def scalar(fn):
    """Decorator for the scalar definitions the kernel factories capture: a plain function Numba compiles where it
    is called (numpy error model: float x/0 gives inf/nan as in C; integer ops check their divisors themselves).

    Factory closures must capture plain module-level functions, not @njit dispatchers: Numba keys its disk cache
    of a closure on the pickle of its cells, and a dispatcher pickles differently in every process (so the loops
    would recompile in every process), while a module-level function pickles by reference."""
    return register_jitable(error_model="numpy")(fn)


def source_tag(fn) -> str:
    """module.qualname@hash of fn's file. The factories capture it so that a closure's Numba cache key changes when
    the file defining its scalar op changes (the key otherwise only follows the factory's own file)."""
    fn = getattr(fn, "py_func", fn)  # an @njit op also works (but its closures then miss the disk cache)
    try:
        digest = hashlib.sha256(Path(inspect.getsourcefile(fn)).read_bytes()).hexdigest()[:16]
    except (TypeError, OSError):
        digest = "nosource"
    return f"{fn.__module__}.{fn.__qualname__}@{digest}"


# --- binary ------------------------------------------------------------------------------------------------------

@scalar
def _put_clamped(out, o, v, lo, hi):
    out[o] = v  # wraps integers to the output type first
    out[o] = min(max(out[o], lo), hi)


@scalar
def _put_plain(out, o, v, lo, hi):
    out[o] = v


def make_binary(op, clamp: bool = True):
    """Kernels for out = op(x, y) over same-shape, scalar-y, scalar-x and broadcast inputs; op is a @scalar function.

    With `clamp`, the result is first stored (which wraps integers to the output type, as the official kernels
    compute in that type) and then clamped to lim = [lo, hi] (typed as out). Without it, lim is ignored and op may
    return another type than its inputs (comparisons -> bool). The loops use Numba's numpy error model: a float
    division by zero gives inf/nan as in C instead of raising (integer ops check their divisors themselves)."""

    put = _put_clamped if clamp else _put_plain
    tag = source_tag(op)

    @njit(cache=True, nogil=True, error_model="numpy")
    def same(x, y, out, lim):
        tag  # noqa: B018 (a closure cell: see source_tag)
        wide_vectors()
        lo, hi = lim[0], lim[1]  # locals: LLVM cannot prove out does not alias lim
        for i in range(out.size):
            put(out, i, op(x[i], y[i]), lo, hi)

    @njit(cache=True, nogil=True, error_model="numpy")
    def scalar_y(x, y, out, lim):
        tag  # noqa: B018
        wide_vectors()
        lo, hi = lim[0], lim[1]
        b = y[0]
        for i in range(out.size):
            put(out, i, op(x[i], b), lo, hi)

    @njit(cache=True, nogil=True, error_model="numpy")
    def scalar_x(x, y, out, lim):
        tag  # noqa: B018
        wide_vectors()
        lo, hi = lim[0], lim[1]
        a = x[0]
        for i in range(out.size):
            put(out, i, op(a, y[i]), lo, hi)

    @njit(cache=True, nogil=True, error_model="numpy", inline="always")
    def rows2(x, y, out, R, C, rx, ry, sx, sy, lo, hi):
        if sx == 1 and sy == 1:
            for r in range(R):
                orow, xr, yr = out[r * C:(r + 1) * C], x[r * rx:r * rx + C], y[r * ry:r * ry + C]
                for k in range(C):
                    put(orow, k, op(xr[k], yr[k]), lo, hi)
        elif sx == 1:
            for r in range(R):
                orow, xr, b = out[r * C:(r + 1) * C], x[r * rx:r * rx + C], y[r * ry]
                for k in range(C):
                    put(orow, k, op(xr[k], b), lo, hi)
        else:
            for r in range(R):
                orow, a, yr = out[r * C:(r + 1) * C], x[r * rx], y[r * ry:r * ry + C]
                for k in range(C):
                    put(orow, k, op(a, yr[k]), lo, hi)

    @njit(cache=True, nogil=True, error_model="numpy", _nrt=False)
    def bcast(x, y, out, xs, ys, shp, lim):
        # shp/xs/ys come from collapse_broadcast: each row is specialised for unit and zero strides so that it
        # vectorizes (the common [.., n] op [n] and [.., n] op [.., 1] cases)
        tag  # noqa: B018
        wide_vectors()
        lo, hi = lim[0], lim[1]
        n5, sx, sy = shp[5], xs[5], ys[5]
        if shp[0] * shp[1] * shp[2] * shp[3] == 1 and (sx == 1 or sy == 1):
            # two dimensions (a row or a column broadcast over a matrix: a layer norm's [T, C] op [T, 1]): plain
            # row offsets, no odometer (which cost ~50 ns a row: [17, 64] * [17, 1] 0.86 -> 0.15 us)
            rows2(x, y, out, shp[4], n5, xs[4], ys[4], sx, sy, lo, hi)
            return
        walk, at = box_walk(shp, xs, ys, ys)
        for r in range(walk[0]):
            xb, yb = at[1], at[2]
            # row views: indices from range() are known non-negative, so no wraparound select is emitted and the
            # loops vectorize
            orow = out[r * n5:(r + 1) * n5]
            if sx == 1 and sy == 1:
                xr, yr = x[xb:xb + n5], y[yb:yb + n5]
                for k in range(n5):
                    put(orow, k, op(xr[k], yr[k]), lo, hi)
            elif sx == 1 and sy == 0:
                xr, b = x[xb:xb + n5], y[yb]
                for k in range(n5):
                    put(orow, k, op(xr[k], b), lo, hi)
            elif sx == 0 and sy == 1:
                a, yr = x[xb], y[yb:yb + n5]
                for k in range(n5):
                    put(orow, k, op(a, yr[k]), lo, hi)
            else:
                for k in range(n5):
                    put(orow, k, op(x[xb + k * sx], y[yb + k * sy]), lo, hi)
            at = next_row(at, walk)

    return same, scalar_y, scalar_x, bcast


def check_broadcast_rank(ctx: PrepareContext, *shapes) -> None:
    """The strided loops run over at most 6 dimensions (TFLite's own broadcast limit for ADD/MUL)."""
    worst = max(len(s) for s in shapes)
    ctx.check(worst <= MAX_BROADCAST_RANK,
              f"broadcasting is supported up to rank {MAX_BROADCAST_RANK}, got rank {worst}")


# --- num_threads > 1: parts of the output on the workers (kernels/base/threads.py), each by the serial loop ----------


@njit(cache=True, inline="always")
def _same_chunk(args, wk, j):
    addr, x, y, out, lim, ch = args
    a, b = ch[2 * j], ch[2 * j + 1]
    call_at(addr, (x[a:b], y[a:b], out[a:b], lim))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def same_par(addr, x, y, out, lim, ch, cnt, T):
    """The same-shape loop at `addr` over the element ranges ch = [a, b] * n, taken in turn by T workers."""
    run_chunks(T, cnt, ch.size // 2, _same_chunk, (addr, x, y, out, lim, ch))


@njit(cache=True, inline="always")
def _bcast_chunk(args, wk, j):
    addr, x, y, out, xs, ys, shps, offs, lim = args
    call_at(addr, (x[offs[4 * j]:], y[offs[4 * j + 1]:], out[offs[4 * j + 2]:offs[4 * j + 3]], xs, ys, shps[j], lim))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def bcast_par(addr, x, y, out, xs, ys, shps, offs, lim, cnt, T):
    """The broadcast loop at `addr` over parts of the output's first dimension of more than one index: part j
    has the loop shape shps[j] and starts at offs[4j], offs[4j + 1] in x, y and spans [offs[4j + 2], offs[4j + 3])
    of out."""
    run_chunks(T, cnt, shps.shape[0], _bcast_chunk, (addr, x, y, out, xs, ys, shps, offs, lim))


def _schedule_bcast(ctx: PrepareContext, bcast, xf, yf, of, xs, ys, shp, lim, n: int) -> None:
    """bcast over the whole output, or (num_threads > 1, enough elements) bcast_par over parts of the loop's
    first dimension with more than one index (every dimension before it is 1)."""
    d = next((i for i in range(shp.size) if shp[i] > 1), shp.size - 1)
    inner = int(np.prod(shp[d + 1:], dtype=np.int64))
    ch, t = element_parts(ctx, n, int(shp[d]), max(1, 64 // max(inner, 1)))
    if not ch:
        return ctx.call(bcast, xf, yf, of, xs, ys, shp, lim)
    shps = np.repeat(shp[None, :], len(ch), axis=0)
    offs = np.zeros((len(ch), 4), np.int64)
    for j, (a, b) in enumerate(ch):
        shps[j, d] = b - a
        offs[j] = (a * xs[d], a * ys[d], a * inner, b * inner)
    addr = serial_address(bcast, [xf, yf, of, xs, ys, shp, lim])
    ctx.call(bcast_par, addr, xf, yf, of, xs, ys, shps, offs.reshape(-1), lim, ctx.temp((1,), np.int64), t)


def schedule_binary(ctx: PrepareContext, kernels, x, y, out_shape, out, lim: np.ndarray, word=None) -> None:
    """Pick the loop for the shapes and schedule it (flattened views; broadcast strides precomputed). With `word`,
    the tensors are read as that dtype (their bytes as unsigned words of their element size). With num_threads > 1
    and enough elements, the same-shape and broadcast loops run in parts on the workers (each part by the serial
    loop: the same bytes)."""
    same, scalar_y, scalar_x, bcast = kernels
    n = int(np.prod(out_shape, dtype=np.int64))
    if n == 0:
        return
    xf, yf, of = ctx.view(x, (x.size,), word), ctx.view(y, (y.size,), word), ctx.view(out, (n,), word)
    if x.shape == y.shape:
        ch, t = element_parts(ctx, n, n, 64)
        if not ch:
            return ctx.call(same, xf, yf, of, lim)
        addr = serial_address(same, [xf, yf, of, lim])
        ctx.call(same_par, addr, xf, yf, of, lim, np.array(ch, np.int64).reshape(-1), ctx.temp((1,), np.int64), t)
    elif y.size == 1 and x.size == n:
        ctx.call(scalar_y, xf, yf, of, lim)
    elif x.size == 1 and y.size == n:
        ctx.call(scalar_x, xf, yf, of, lim)
    else:
        check_broadcast_rank(ctx, x.shape, y.shape, out_shape)
        shp, (xs, ys) = collapse_broadcast(out_shape, x.shape, y.shape)
        wide = _widen_rows(shp, xs, ys, x, y)
        if wide is not None:
            shp, xs, ys, xc, yc = wide
            xf = ctx.const(xc.view(word or xc.dtype)) if xc is not None else xf
            yf = ctx.const(yc.view(word or yc.dtype)) if yc is not None else yf
        _schedule_bcast(ctx, bcast, xf, yf, of, xs, ys, shp, lim, n)


# LLVM vectorizes the inner loops 8 lanes x 4 at a time, so rows shorter than 32 run scalar, and every row costs
# a loop setup: rows of 256 are 2.8-4.9x faster than rows of 16 ([1, 32, 32, 16] + [16]: 13.4 -> 2.7 us)
_WIDE_ROW = 256
_MAX_TILE = 2048  # elements of a repeated constant row (8 KiB of float32) per node


def _widen_rows(shp, xs, ys, x, y):
    """[R, C] op [C] (or [C] op [R, C]) with C < 256 and the row operand constant — a bias, a PRELU alpha, a
    layer-norm gamma: the row repeated t times (t dividing R) so the loop runs R/t rows of C·t elements, each element
    computed exactly as before. Returns (shape, x strides, y strides, tiled x or None, tiled y or None) or None."""
    if shp[:4].max() != 1 or shp[5] >= _WIDE_ROW:
        return None
    R, C = int(shp[4]), int(shp[5])
    for full_s, row_s, row_t, row_is_y in ((xs, ys, y, True), (ys, xs, x, False)):
        if not (full_s[4] == C and full_s[5] == 1 and row_s[4] == 0 and row_s[5] == 1 and row_t.data is not None):
            continue
        t = next((t for t in range(-(-_WIDE_ROW // C), min(R, _MAX_TILE // C) + 1) if R % t == 0), None)
        if t is None:
            t = next((t for t in range(min(R, _MAX_TILE // C), 1, -1) if R % t == 0), None)  # the widest that fits
        if t is None:
            return None
        tiled = np.tile(np.asarray(row_t.data).reshape(-1), t)
        shape = np.array([1, 1, 1, 1, R // t, C * t], np.int64)
        full = np.array([0, 0, 0, 0, C * t, 1], np.int64)
        row = np.array([0, 0, 0, 0, 0, 1], np.int64)
        return (shape, full, row, None, tiled) if row_is_y else (shape, row, full, tiled, None)
    return None


def no_limits(dtype) -> np.ndarray:
    """The (ignored) lim argument of non-clamping kernels, typed as their output."""
    return np.zeros(2, dtype)


def binary_inputs(ctx: PrepareContext, same_type: bool = True):
    """The two inputs of a binary op (checked to share a type) and their broadcast output shape."""
    ctx.check_num(inputs=2, outputs=1)
    x, y = ctx.input(0), ctx.input(1)
    ctx.check(x is not None and y is not None, "both inputs are required")
    if same_type:
        ctx.check(x.dtype == y.dtype, f"input types differ: {x.dtype.name} and {y.dtype.name}")
    return x, y, broadcast_shape(ctx, x.shape, y.shape)


# --- scalar definitions of binary ops ----------------------------------------------------------------------------

INT32_MIN = -(1 << 31)
TWO31 = float(1 << 31)


@njit(cache=True)
def f64_to_int32(d):
    """C's double -> int32 conversion as x86 does it: out-of-range and NaN give INT32_MIN."""
    if not (-TWO31 <= d < TWO31):
        return np.int64(INT32_MIN)
    return np.int64(d)


@scalar
def _add(a, b):
    return a + b


@scalar
def _sub(a, b):
    return a - b


@scalar
def _mul(a, b):
    return a * b


@scalar
def _div(a, b):
    return a / b


@scalar
def _idiv(a, b):
    # TFLite's integer DIV truncates toward zero (C semantics); division by zero is caught at run time
    if b == 0:
        raise ValueError("DIV: integer division by zero")
    a64 = np.int64(a)
    b64 = np.int64(b)
    q = abs(a64) // abs(b64)  # in int64: abs(INT32_MIN) must not wrap
    return q if (a64 >= 0) == (b64 >= 0) else -q


@scalar
def _squared_difference(a, b):
    d = a - b
    return d * d


@scalar
def _maximum(a, b):
    # the official ternary: a NaN in `a` loses, a NaN in `b` wins
    return a if a > b else b


@scalar
def _minimum(a, b):
    return a if a < b else b


@scalar
def _floor_div_f(a, b):
    # floor(double(a) / double(b)) rounded back to float32, as reference_ops::FloorDiv; np.floor, not math.floor:
    # Numba's math.floor returns an int64 (NaN, inf and quotients past 2^63 became -2^63)
    if b == 0:
        raise ValueError("FLOOR_DIV: division by zero")
    return np.float32(np.floor(np.float64(a) / np.float64(b)))


@scalar
def _floor_div_i(a, b):
    # same double computation, converted to int32 like C (then the store wraps int8/int16)
    if b == 0:
        raise ValueError("FLOOR_DIV: division by zero")
    return f64_to_int32(math.floor(np.float64(a) / np.float64(b)))


@scalar
def _floor_mod_f(a, b):
    r = np.float32(np.fmod(np.float64(a), np.float64(b)))  # fmod is exact: double == float fmod
    if r != 0 and (b < 0) != (r < 0):
        r = r + b
    return r


@scalar
def _floor_mod_i(a, b):
    if b == 0:
        raise ValueError("FLOOR_MOD: division by zero")
    # Python's integer % is floor-mod: the official trunc-mod-then-adjust gives the same result
    a64 = np.int64(a)
    b64 = np.int64(b)
    if b64 == -1:
        return np.int64(0)  # avoids INT64_MIN % -1
    return a64 % b64


@scalar
def _pow_f(a, b):
    return a ** b


@scalar
def _pow_i(a, b):
    # std::pow(int, int) runs in double, converted back like C
    if b < 0:
        raise ValueError("POW: negative exponent for int32")
    return f64_to_int32(math.pow(np.float64(a), np.float64(b)))


@scalar
def _int_exponent(b):
    """The exponent the optimized broadcast POW treats as an integer (>= 1 and within 1e-5), else 0."""
    d = np.float64(b)
    if not (-TWO31 < d < TWO31):
        return 0
    r = math.floor(d + 0.5) if d >= 0 else -math.floor(-d + 0.5)  # std::round
    if abs(np.float32(b) - np.float32(r)) < np.float32(1e-5) and r >= 1:
        return int(r)
    return 0


@scalar
def _pow_f_scalar(a, b):
    # optimized BroadcastPow4D with a single exponent: repeated squaring through MUL, which clamps to +-FLT_MAX
    e = _int_exponent(b)
    if e == 0:
        return a ** b
    hi = np.float32(F32_MAX)
    top = 0
    while (e >> (top + 1)) > 0:
        top += 1
    r = a
    for bit in range(top - 1, -1, -1):
        r = min(max(r * r, -hi), hi)
        if (e >> bit) & 1:
            r = min(max(a * r, -hi), hi)
    return r


@scalar
def _pow_i_scalar(a, b):
    if b < 0:
        raise ValueError("POW: negative exponent for int32")
    e = _int_exponent(b)
    if e == 0:
        return f64_to_int32(math.pow(np.float64(a), np.float64(b)))
    top = 0
    while (e >> (top + 1)) > 0:
        top += 1
    r = np.int32(a)
    for bit in range(top - 1, -1, -1):
        r = np.int32(np.int64(r) * np.int64(r))  # int32 multiply wraps
        if (e >> bit) & 1:
            r = np.int32(np.int64(a) * np.int64(r))
    return r


class LazyKernels(dict):
    """name -> the kernels of make_binary(...), made on first use: each entry is four Numba dispatchers, and a model
    uses a few of the 17 (making them all cost ~7 ms of every start-up that imports this module). Entries may also
    be set directly. Each entry is compiled lazily too, only for the dtypes a model uses."""

    def __init__(self, makers: dict):
        super().__init__()
        self._makers = makers

    def __missing__(self, name: str):
        made = self._makers[name]()  # KeyError for a name that was never registered, as a plain dict
        return self.setdefault(name, made)  # two threads: the first one's kernels (the same code either way)


def _binary(op, clamp: bool = True):
    return lambda: make_binary(op, clamp)


def _with_scalar_y(kernels, scalar_kernels):
    """The loops of `kernels` with the scalar-y loop of `scalar_kernels` (POW's single-exponent special case)."""
    return kernels[0], scalar_kernels[1], kernels[2], kernels[3]


# the float scalar definitions of ADD, SUB and MUL and their clamped store, for the kernels that fuse them with
# other nodes (fused.py): the same functions, so the same instructions
FLOAT_OPS = {"ADD": _add, "SUB": _sub, "MUL": _mul}
put_clamped = _put_clamped

BINARY = LazyKernels({name: _binary(f) for name, f in
                      (("ADD", _add), ("SUB", _sub), ("MUL", _mul), ("DIV", _div), ("IDIV", _idiv))})
BINARY_PLAIN = LazyKernels({name: _binary(f, clamp=False) for name, f in (
    ("MUL", _mul),  # complex64: no activation
    ("SQUARED_DIFFERENCE", _squared_difference), ("MAXIMUM", _maximum), ("MINIMUM", _minimum),
    ("FLOOR_DIV_F", _floor_div_f), ("FLOOR_DIV_I", _floor_div_i),
    ("FLOOR_MOD_F", _floor_mod_f), ("FLOOR_MOD_I", _floor_mod_i),
)} | {
    "POW_F": lambda: _with_scalar_y(make_binary(_pow_f, False), make_binary(_pow_f_scalar, False)),
    "POW_I": lambda: _with_scalar_y(make_binary(_pow_i, False), make_binary(_pow_i_scalar, False)),
})


def arithmetic(op: str, dtypes):
    """Prepare for non-quantized ADD, SUB, MUL, DIV with broadcasting and fused activation."""
    dtypes = tuple(np.dtype(d) for d in dtypes)

    def prepare(ctx: PrepareContext) -> None:
        x, y, shape = binary_inputs(ctx)
        # one quantized operand makes the op quantized: the quantized kernel then refuses an operand that lacks
        # quantization (the official kernel divides by its scale 0: an abort for input 1, garbage for input 0)
        if any(is_quantized(t) for t in (x, y, ctx.output(0))):
            return ctx.prepare_quantized()
        ctx.check_dtype(x, *dtypes)
        out = ctx.set_output(0, shape, x.dtype)
        act = ctx.options.get("fused_activation_function", 0)
        if x.dtype.kind == "c":
            ctx.check(act == 0, "no fused activation is allowed on complex64")
            return schedule_binary(ctx, BINARY_PLAIN[op], x, y, shape, out, no_limits(x.dtype))
        if x.dtype.kind == "f":
            lo, hi = float_activation_range(ctx, act)
            lo, hi = max(lo, -F32_MAX), min(hi, F32_MAX)  # TFLite clamps to the finite range even without one
        else:
            lo, hi = int_activation_range(ctx, act, x.dtype)
        name = "IDIV" if op == "DIV" and x.dtype.kind in "iu" else op
        schedule_binary(ctx, BINARY[name], x, y, shape, out, np.array([lo, hi], x.dtype))

    return kernel(op)(prepare)


ADD = arithmetic("ADD", (np.float32, np.int32, np.int64, np.int16))
SUB = arithmetic("SUB", (np.float32, np.int32, np.int64))
MUL = arithmetic("MUL", (np.float32, np.int32, np.int64, np.int16, np.uint32, np.complex64))
DIV = arithmetic("DIV", (np.float32, np.int32))


def binary_op(name: str, table: dict, quantized: bool = False):
    """Prepare of a binary op without activation: table maps an input dtype to a BINARY_PLAIN key.

    With `quantized`, quantized int8/uint8/int16 inputs go to the quantized kernels; otherwise integer inputs are
    computed on their raw values whatever their quantization (as the official kernel does)."""
    table = {np.dtype(k): v for k, v in table.items()}

    def prepare(ctx: PrepareContext) -> None:
        x, y, shape = binary_inputs(ctx)
        if quantized and is_quantized(x):
            return ctx.prepare_quantized()
        ctx.check_dtype(x, *table)
        out = ctx.set_output(0, shape, x.dtype)
        schedule_binary(ctx, BINARY_PLAIN[table[x.dtype]], x, y, shape, out, no_limits(x.dtype))

    return kernel(name)(prepare)


_MINMAX_TYPES = (np.float32, np.int8, np.uint8, np.int16, np.int32, np.int64)
SQUARED_DIFFERENCE = binary_op("SQUARED_DIFFERENCE", {np.float32: "SQUARED_DIFFERENCE", np.int32: "SQUARED_DIFFERENCE"},
                               quantized=True)
MAXIMUM = binary_op("MAXIMUM", {t: "MAXIMUM" for t in _MINMAX_TYPES}, quantized=True)
MINIMUM = binary_op("MINIMUM", {t: "MINIMUM" for t in _MINMAX_TYPES}, quantized=True)
POW = binary_op("POW", {np.float32: "POW_F", np.int32: "POW_I"})
FLOOR_DIV = binary_op("FLOOR_DIV", {np.float32: "FLOOR_DIV_F", np.int32: "FLOOR_DIV_I", np.int16: "FLOOR_DIV_I",
                                    np.int8: "FLOOR_DIV_I"})
FLOOR_MOD = binary_op("FLOOR_MOD", {np.float32: "FLOOR_MOD_F", np.int8: "FLOOR_MOD_I", np.int16: "FLOOR_MOD_I",
                                    np.int32: "FLOOR_MOD_I", np.int64: "FLOOR_MOD_I"})


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


@scalar
def _atan2(y, x):
    return np.arctan2(y, x)


@kernel("ATAN2")
def ATAN2(ctx: PrepareContext) -> None:
    """out = atan2(y, x) elementwise (float32 / float64, same shapes, libm's atan2f / atan2 as the official kernel)."""
    y, x = two_inputs_of_one_type(ctx, (np.float32, np.float64))
    # the official kernel checks only the ranks and pairs elements by flat index: equal element counts suffice
    ctx.check(x.ndim == y.ndim and x.size == y.size, f"input shapes {list(y.shape)} and {list(x.shape)} differ in "
              "rank or element count")
    out = ctx.set_output(0, y.shape, y.dtype)
    if out.size:
        n = out.size
        ctx.call(ATAN2_LOOPS[0], ctx.view(y, (n,)), ctx.view(x, (n,)), ctx.view(out, (n,)), no_limits(y.dtype))


ATAN2_LOOPS = make_binary(_atan2, clamp=False)
