"""The two documented custom-op examples: Atan (the official custom-op guide) and HardSwish."""

import numpy as np

from lite_numba.ops import custom_op


def _float_only(ctx):
    x = ctx.input(0)
    ctx.check_num(inputs=1, outputs=1)
    ctx.check_dtype(x, np.float32)
    ctx.set_output(0, x.shape, np.float32)


@custom_op("Atan", version=1, prepare=_float_only)
def atan(x, out):
    """y = atan(x), elementwise, float32."""
    for i in range(x.size):
        out.flat[i] = np.arctan(x.flat[i])


@custom_op("HardSwish", version=1, prepare=_float_only)
def hard_swish(x, out):
    """y = x * relu6(x + 3) / 6, elementwise, float32."""
    for i in range(x.size):
        v = x.flat[i]
        r = min(max(v + np.float32(3.0), np.float32(0.0)), np.float32(6.0))
        out.flat[i] = v * r / np.float32(6.0)
