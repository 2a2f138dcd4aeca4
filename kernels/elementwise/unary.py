"""Float and integer unary elementwise ops (EXP, LOG, SQRT, RSQRT, SQUARE, ABS, NEG, SIGN, SIN, COS, FLOOR, CEIL,
ROUND): one flat loop per function, compiled from a @scalar definition; quantized inputs go to the op's quantized
variant (arithmetic_quantized.py) through ctx.prepare_quantized(). With num_threads > 1 and enough elements the loop
runs on element ranges on the workers (unary_par), each by the serial loop: the same bytes.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.threads import PARALLEL, call_at, element_parts, run_chunks, serial_address
from lite_numba.kernels.base.vecmath import wide_vectors
from lite_numba.kernels.elementwise.arithmetic import is_quantized, scalar, source_tag
from numba import njit

from lite_numba.ops import PrepareContext, kernel


def make_unary(f):
    """out[i] = f(x[i], p) over flat arrays (f a @scalar function); p is a small float32 array of op parameters."""

    tag = source_tag(f)

    @njit(cache=True, nogil=True, error_model="numpy")
    def unary(x, out, p):
        tag  # noqa: B018 (a closure cell: see source_tag)
        wide_vectors()
        for i in range(out.size):
            out[i] = f(x[i], p)

    return unary


NO_PARAMS = np.zeros(1, np.float32)


@njit(cache=True, inline="always")
def _unary_chunk(args, wk, j):
    addr, x, out, p, ch = args
    a, b = ch[2 * j], ch[2 * j + 1]
    call_at(addr, (x[a:b], out[a:b], p))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def unary_par(addr, x, out, p, ch, cnt, T):
    """The flat loop at `addr` over the element ranges ch = [a, b] * n, taken in turn by T workers."""
    run_chunks(T, cnt, ch.size // 2, _unary_chunk, (addr, x, out, p, ch))


def schedule_unary(ctx: PrepareContext, loop, x, out, p: np.ndarray) -> None:
    """loop(x, out, p) over flat views, or with num_threads > 1 and enough elements unary_par."""
    xf, of = ctx.view(x, (x.size,)), ctx.view(out, (out.size,))
    ch, t = element_parts(ctx, out.size, out.size, 64)
    if not ch:
        return ctx.call(loop, xf, of, p)
    ctx.call(unary_par, serial_address(loop, [xf, of, p]), xf, of, p, np.array(ch, np.int64).reshape(-1),
             ctx.temp((1,), np.int64), t)


def unary_op(name: str, f, dtypes=(np.float32,), quantized: bool = True, params=None):
    """A unary elementwise op: the output has the input's shape and dtype.

    `f(v, p)` is the scalar definition; `params(ctx)` (optional) returns the float32 values passed as p.
    With `quantized`, a quantized int8/uint8/int16 input goes to the quantized kernels; otherwise integer inputs
    are computed on their raw values (NEG)."""
    loop = make_unary(f)
    dtypes = tuple(np.dtype(d) for d in dtypes)

    def prepare(ctx: PrepareContext) -> None:
        ctx.check_num(inputs=1, outputs=1)
        x = ctx.input(0)
        ctx.check(x is not None, "input 0 is required")
        if quantized and is_quantized(x):
            return ctx.prepare_quantized()
        ctx.check_dtype(x, *dtypes)
        out = ctx.set_output(0, x.shape, x.dtype)
        p = NO_PARAMS if params is None else np.asarray(params(ctx), np.float32).reshape(-1)
        if x.size:
            schedule_unary(ctx, loop, x, out, p)

    return kernel(name)(prepare)


@scalar
def _exp(v, p):
    return np.exp(v)


@scalar
def _log(v, p):
    return np.log(v)


@scalar
def _sqrt(v, p):
    return np.sqrt(v)


@scalar
def _rsqrt(v, p):
    return np.float32(1.0) / np.sqrt(v)


@scalar
def _square(v, p):
    return v * v


@scalar
def _abs(v, p):
    return abs(v)  # int: abs(INT_MIN) wraps back to INT_MIN on store, like std::abs


@scalar
def _neg(v, p):
    return -v


@scalar
def _sign(v, p):
    if v != v:  # NaN stays NaN
        return v
    if v > 0:
        return 1
    if v < 0:
        return -1
    return 0


@scalar
def _sin(v, p):
    return np.sin(v)


@scalar
def _cos(v, p):
    return np.cos(v)


@scalar
def _floor(v, p):
    return np.floor(v)


@scalar
def _ceil(v, p):
    return np.ceil(v)


@scalar
def _round(v, p):
    # round half to even, written as reference_ops::RoundToNearest
    fl = np.floor(v)
    d = v - fl
    if d < 0.5 or (d == 0.5 and int(fl) % 2 == 0):
        return fl
    return fl + np.float32(1.0)


EXP = unary_op("EXP", _exp)
LOG = unary_op("LOG", _log)
SQRT = unary_op("SQRT", _sqrt)
RSQRT = unary_op("RSQRT", _rsqrt)
SQUARE = unary_op("SQUARE", _square)
ABS = unary_op("ABS", _abs, (np.float32, np.int16, np.int32))
NEG = unary_op("NEG", _neg, (np.float32, np.int8, np.int16, np.int32, np.int64), quantized=False)
SIGN = unary_op("SIGN", _sign, (np.float32, np.float64, np.int32))
SIN = unary_op("SIN", _sin)
COS = unary_op("COS", _cos)
FLOOR = unary_op("FLOOR", _floor)
CEIL = unary_op("CEIL", _ceil)
ROUND = unary_op("ROUND", _round)
