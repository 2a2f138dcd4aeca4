"""DENSIFY: a sparse constant expanded to its dense shape (kernels/base/sparsity.py) once in prepare; invoke copies
the dense bytes into the output.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.copy import write_const
from lite_numba.kernels.base.sparsity import densify_constant

from lite_numba.ops import PrepareContext, kernel


@kernel("DENSIFY")
def DENSIFY(ctx: PrepareContext) -> None:
    """Expand the sparse constant input once; each invoke copies the dense bytes to the output."""
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check(x is not None and x.spec is not None and bool(x.spec.sparsity),
              "input must be a constant tensor with sparsity parameters")
    ctx.check_dtype(x, np.float32, np.float16, np.int8)
    dense = densify_constant(ctx, x)
    write_const(ctx, ctx.set_output(0, x.shape, x.dtype), dense)
