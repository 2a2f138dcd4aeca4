"""The documented custom-op examples: Atan (the official custom-op guide's op, a plain function made a custom op) and
HardSwish (a custom name served by an existing kernel: the builtin HARD_SWISH's, so there is one HardSwish).

Importing this module registers nothing; `register(ops)` adds both to an op set (lite_numba.plugins.register calls
it for the default one).
"""

import numpy as np
from lite_numba.kernels.registry import BUILTINS

from lite_numba.ops import custom_op, kernel


def _float_only(ctx):
    x = ctx.input(0)
    ctx.check_num(inputs=1, outputs=1)
    ctx.check_dtype(x, np.float32)
    ctx.set_output(0, x.shape, np.float32)


@custom_op("Atan", version=1, prepare=_float_only, register=False)
def atan(x, out):
    """y = atan(x), elementwise, float32."""
    for i in range(x.size):
        out.flat[i] = np.arctan(x.flat[i])


(_BUILTIN_HARD_SWISH,) = [k for op, _, _, k in BUILTINS if op == "HARD_SWISH"]


@kernel("HardSwish")
def hard_swish(ctx):
    """y = x * relu6(x + 3) / 6, elementwise, float32: the builtin HARD_SWISH's prepare and compiled loop (one
    HardSwish in lite-numba, not a second copy of its maths)."""
    _BUILTIN_HARD_SWISH.prepare(ctx)


def register(ops) -> None:
    """Add Atan and HardSwish (version 1) to `ops` (a CustomOpRegistry or a MutableOpResolver)."""
    ops.add_custom(atan.name, atan, *atan.meta["versions"])
    ops.add_custom("HardSwish", hard_swish, 1, 1)
