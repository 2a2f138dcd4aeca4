"""EMBEDDING_LOOKUP of a table kept packed with BlockwiseQuantization (INT4 / INT2 values, FLOAT16 block scales),
to float32: gather.EMBEDDING_LOOKUP hands such nodes here.

The official kernel (embedding_lookup.cc EvalBlockwise, ai-edge-litert 2.3.0): for each looked-up row and each block
j of block_size values, the float32 scale s = scales[row, j] (float16 widened) is divided by 16 (INT4) or 64 (INT2)
and every value is taken as the int8 its bits make when shifted to the top of a byte (v * 16, v * 64), so the
output is float32(v * 16) * (s / 16), which is float32(v * s) rounded once. Each block is read from the byte its
first value starts on, so block sizes must be whole bytes (even for INT4, a multiple of 4 for INT2; others are
refused: the official kernel would read the wrong values). A lookup index outside the table fails the invoke.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.packed_ints import unpack_run
from numba import njit

from lite_numba.ops import PrepareContext


@njit(cache=True, nogil=True)
def embedding_blockwise(lookup, packed, scales, out, rows, cols, bs, bits, blk):
    """out[i, :] = the packed row lookup[i] of the [rows, cols] table dequantized by its block scales (float32
    [rows, cols / bs]); blk is a scratch of bs int32."""
    nb = cols // bs
    shift = np.float32(16.0) if bits == 4 else np.float32(64.0)
    up = 16 if bits == 4 else 64
    for i in range(lookup.size):
        c = np.int64(lookup[i])
        if c < 0 or c >= rows:
            raise ValueError("EMBEDDING_LOOKUP: index out of range")
        for j in range(nb):
            s0 = np.float32(scales[c * nb + j] / shift)
            unpack_run(packed, c * cols + j * bs, bs, bits, blk)
            o = i * cols + j * bs
            for t in range(bs):
                out[o + t] = np.float32(np.float32(blk[t] * up) * s0)


def prepare_blockwise_lookup(ctx: PrepareContext, lookup, value, shape) -> None:
    """Prepare EMBEDDING_LOOKUP whose table `value` is packed and blockwise quantized (module doc); `shape` is the
    output shape."""
    spec = value.spec
    bits = spec.packed_bits
    bs = value.quantization.block_size
    out_t = ctx.output(0)
    what = f"value {value.name!r} ({spec.type_name}, blockwise block_size {bs})"
    ctx.check(out_t.dtype == np.float32, f"{what}: the output must be float32, got {out_t.dtype.name} (a float16 "
                                         f"output of a blockwise table is not supported)")
    per = 8 // bits
    ctx.check(bs % per == 0, f"{what}: block_size must be a multiple of {per} ({spec.type_name} values per byte); "
                             f"the official kernel reads every block from a byte boundary")
    out = ctx.set_output(0, shape, np.float32)
    if out.size == 0:
        return
    rows, cols = value.shape
    scales = value.quantization.block_scales.astype(np.float32).reshape(-1)
    ctx.call(embedding_blockwise, ctx.view(lookup, (lookup.size,)), ctx.const(value.data), scales,
             ctx.view(out, (out.size,)), rows, cols, bs, bits, ctx.temp((bs,), np.int32))
