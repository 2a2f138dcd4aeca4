"""The custom op `aeq.hadamard_rotation` of ai-edge-quantizer's HADAMARD_ROTATION algorithm (the official builtin
resolver registers it; semantics from the official runtime's tflite/kernels/hadamard_rotation.cc, read for meaning,
not copied).

Input float32 [features, size] or [batch, features, size] -> output of the same shape: every run of
`hadamard_size` consecutive values of the last axis goes through the fast Walsh-Hadamard transform (the butterflies
(x + y, x - y) over spans 1, 2, 4, ..., in float32) and is multiplied by 1 / sqrt(hadamard_size) rounded to float32
(computed in double for sizes >= 16, in float below, as the official kernel does). The options' `random_binary_vector`
is not applied at run time: the quantizer folded those signs into the weights, and the official kernel only reads it.
Refused with a message: another dtype (the official prepare lets int32 through, then reads its bytes as floats),
another rank, a size that is not a power of two, a last axis that is not a multiple of it (the official kernel would
then run transforms across rows).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lite_numba.ops import PrepareContext, kernel


@njit(cache=True, nogil=True)
def hadamard_rows(x, out, norm):
    """x, out [rows, n] float32, n a power of two: out = the normalised Walsh-Hadamard transform of each row."""
    rows, n = x.shape
    scale = np.float32(norm)
    for r in range(rows):
        for k in range(n):
            out[r, k] = x[r, k]
        h = 1
        while h < n:
            for i in range(0, n, 2 * h):
                for j in range(i, i + h):
                    a = out[r, j]
                    b = out[r, j + h]
                    out[r, j] = a + b
                    out[r, j + h] = a - b
            h *= 2
        for k in range(n):
            out[r, k] = out[r, k] * scale


def norm_factor(size: int) -> float:
    """1 / sqrt(size) as the official kernel rounds it: float32 arithmetic below 16, double then float32 from 16."""
    if size < 16:
        return float(np.float32(1.0) / np.sqrt(np.float32(size)))
    return float(np.float32(1.0 / np.sqrt(np.float64(size))))


def _keep_options(options):
    """init: the decoded custom options, checked by prepare (which can name the node)."""
    return options


@kernel("aeq.hadamard_rotation", init=_keep_options)
def HADAMARD_ROTATION(ctx: PrepareContext) -> None:
    """The normalised Walsh-Hadamard transform of every `hadamard_size` run of the last axis."""
    opts = ctx.state
    ctx.check(isinstance(opts, dict), "custom options are not a flexbuffer map")
    ctx.check(opts.get("hadamard_size") is not None, "custom options lack hadamard_size")
    size = opts["hadamard_size"]
    ctx.check(isinstance(size, int) and not isinstance(size, bool), f"hadamard_size must be an integer, got {size!r}")
    ctx.check(size >= 1 and size & (size - 1) == 0, f"hadamard_size must be a power of two, got {size}")
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check_dtype(x, np.float32)
    ctx.check(x.ndim in (2, 3), f"input must have rank 2 [features, size] or 3 [batch, features, size], "
                                f"got shape {list(x.shape)}")
    last = x.shape[-1]
    ctx.check(last % size == 0, f"the input's last dimension ({last}) is not a multiple of hadamard_size ({size})")
    out = ctx.set_output(0, x.shape, np.float32)
    if out.size == 0:
        return
    rows = out.size // size
    ctx.call(hadamard_rows, ctx.view(x, (rows, size)), ctx.view(out, (rows, size)), norm_factor(size))


__all__ = ["HADAMARD_ROTATION", "hadamard_rows", "norm_factor"]
