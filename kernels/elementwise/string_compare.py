"""EQUAL and NOT_EQUAL of STRING tensors (the official kernels' StringRefEqualFn: same length, same bytes), with numpy
broadcasting: host kernels over packed strings (lite_numba/format/strings.py), chosen by the resolver for a node
whose inputs are STRING (kernels/registry.py, with_strings). The bool output lives in the arena like any other, so
the numeric nodes reading it stay compiled."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.shapes import broadcast_shape

from lite_numba.format import strings
from lite_numba.ops import PrepareContext, kernel


def _compare(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=2, outputs=1)
    a, b = ctx.input(0), ctx.input(1)
    ctx.check(a.dtype == object and b.dtype == object,
              f"both inputs must be STRING tensors, got {a.dtype.name} and {b.dtype.name}")
    shape = broadcast_shape(ctx, a.shape, b.shape)
    ctx.set_output(0, shape, np.bool_)


def _keys(buf: np.ndarray, offs: np.ndarray, shape) -> np.ndarray:
    """The strings as an object array of bytes (Python compares bytes by length and content)."""
    out = np.empty(len(offs) - 1, object)
    out[:] = strings.items(buf, offs)
    return out.reshape(shape)


def _host(negate: bool):
    def host(ctx: PrepareContext) -> None:
        a = _keys(*ctx.input_strings(0), ctx.input(0).shape)
        b = _keys(*ctx.input_strings(1), ctx.input(1).shape)
        eq = np.equal(a, b, dtype=object).astype(np.bool_) if a.size and b.size else \
            np.zeros(np.broadcast_shapes(a.shape, b.shape), np.bool_)
        ctx.set_output_array(0, ~eq if negate else eq)

    return host


EQUAL = kernel("EQUAL", host=_host(False))(_compare)
NOT_EQUAL = kernel("NOT_EQUAL", host=_host(True))(_compare)

__all__ = ["EQUAL", "NOT_EQUAL"]
