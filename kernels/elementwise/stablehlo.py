"""The StableHLO elementwise builtins the official runtime registers: STABLEHLO_ADD, STABLEHLO_MULTIPLY,
STABLEHLO_MAXIMUM, STABLEHLO_MINIMUM, STABLEHLO_AND, STABLEHLO_SHIFT_LEFT (tflite/kernels/stablehlo_*.cc).

Two inputs of one type and one shape (no broadcasting), the output of that shape and type, computed in the type:
integers wrap, bool ADD / MULTIPLY / MAXIMUM / MINIMUM are or / and / or / and, MAXIMUM and MINIMUM are
std::max / std::min (a NaN first operand is returned, a NaN second one is not), float16 goes through float32 and
is rounded back as Eigen::half does. AND is bitwise on integers and logical on bool (floats refused, as
officially); SHIFT_LEFT takes int8 / int16 / int32 and shifts the value promoted to int (counts outside [0, 31],
undefined in C++, give 0).
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.elementwise.arithmetic import make_binary, no_limits, scalar
from lite_numba.kernels.elementwise.cast import f16_bits_to_f32, f32_to_f16_bits

from lite_numba.ops import PrepareContext, kernel

_INTS = tuple(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64))
_ALL = (*_INTS, np.dtype(np.bool_), np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


@scalar
def _add(a, b):
    return a + b


@scalar
def _mul(a, b):
    return a * b


@scalar
def _max(a, b):
    return b if a < b else a  # std::max


@scalar
def _min(a, b):
    return b if b < a else a  # std::min


@scalar
def _and(a, b):
    return a & b


@scalar
def _shift_left(a, b):
    s = np.int64(b)
    return np.int64(a) << s if 0 <= s < 32 else np.int64(0)


def stablehlo_binary(name: str, op, dtypes: tuple) -> object:
    loops = make_binary(op, clamp=False)

    def prepare(ctx: PrepareContext) -> None:
        ctx.check_num(inputs=2, outputs=1)
        x, y = ctx.input(0), ctx.input(1)
        ctx.check(x is not None and y is not None, "both inputs are required")
        ctx.check(x.dtype == y.dtype, f"input types differ: {x.dtype.name} and {y.dtype.name}")
        ctx.check(x.shape == y.shape, f"input shapes differ: {list(x.shape)} and {list(y.shape)} (no broadcasting)")
        ctx.check(x.dtype in dtypes, f"type {x.dtype.name} is not supported (supported: "
                                     f"{', '.join(d.name for d in dtypes)})")
        out = ctx.set_output(0, x.shape, x.dtype)
        n = x.size
        if n == 0:
            return
        if x.dtype == np.float16:  # Eigen::half: through float32, rounded back to nearest even
            xs, ys, r = (ctx.temp((n,), np.float32) for _ in range(3))
            for src, dst in ((x, xs), (y, ys)):
                ctx.call(f16_bits_to_f32, ctx.view(src, (n,), np.uint16), ctx.view(dst, (n,), np.uint32), 1)
            ctx.call(loops[0], xs, ys, r, no_limits(np.float32))
            ctx.call(f32_to_f16_bits, ctx.view(r, (n,), np.uint32), 1, ctx.view(out, (n,), np.uint16))
            return
        ctx.call(loops[0], ctx.view(x, (n,)), ctx.view(y, (n,)), ctx.view(out, (n,)), no_limits(x.dtype))

    return kernel(name)(prepare)


STABLEHLO_ADD = stablehlo_binary("STABLEHLO_ADD", _add, _ALL)
STABLEHLO_MULTIPLY = stablehlo_binary("STABLEHLO_MULTIPLY", _mul, _ALL)
STABLEHLO_MAXIMUM = stablehlo_binary("STABLEHLO_MAXIMUM", _max, _ALL)
STABLEHLO_MINIMUM = stablehlo_binary("STABLEHLO_MINIMUM", _min, _ALL)
STABLEHLO_AND = stablehlo_binary("STABLEHLO_AND", _and, (*_INTS, np.dtype(np.bool_)))
STABLEHLO_SHIFT_LEFT = stablehlo_binary("STABLEHLO_SHIFT_LEFT", _shift_left,
                                        tuple(np.dtype(t) for t in (np.int8, np.int16, np.int32)))

__all__ = ["STABLEHLO_ADD", "STABLEHLO_AND", "STABLEHLO_MAXIMUM", "STABLEHLO_MINIMUM", "STABLEHLO_MULTIPLY",
           "STABLEHLO_SHIFT_LEFT"]
