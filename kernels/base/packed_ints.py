"""Sub-byte integers read where they lie: INT4 and INT2 values packed 8 / bits to a byte, the first value in the
lowest bits, two's complement (the INT4 nibble 0x8 is -8, the INT2 value 0b10 is -2), as the schema stores them and
the official kernels read them (UnpackPackedIntToInt8, SignExtendInt4). The blockwise FULLY_CONNECTED and
EMBEDDING_LOOKUP kernels decode a row or a block at a time into a small scratch, so no widened copy of the weights
is ever held."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def packed_value(packed, i, bits):
    """Signed value i of the packed array (bits 4 or 2), as an int64."""
    if bits == 4:
        v = (np.int64(packed[i >> 1]) >> ((i & 1) * 4)) & 15
        return (v ^ 8) - 8
    v = (np.int64(packed[i >> 2]) >> ((i & 3) * 2)) & 3
    return (v ^ 2) - 2


@njit(cache=True, nogil=True, inline="always")
def unpack_run(packed, start, n, bits, out):
    """out[0:n] = signed values start .. start + n - 1 of the packed array; whole bytes at a time when the run
    starts on a byte."""
    per = 8 // bits
    if start % per != 0:
        for j in range(n):
            out[j] = packed_value(packed, start + j, bits)
        return
    b0 = start // per
    whole = n // per
    if bits == 4:
        for j in range(whole):
            v = np.int64(packed[b0 + j])
            out[2 * j] = ((v & 15) ^ 8) - 8
            out[2 * j + 1] = (((v >> 4) & 15) ^ 8) - 8
    else:
        for j in range(whole):
            v = np.int64(packed[b0 + j])
            out[4 * j] = ((v & 3) ^ 2) - 2
            out[4 * j + 1] = (((v >> 2) & 3) ^ 2) - 2
            out[4 * j + 2] = (((v >> 4) & 3) ^ 2) - 2
            out[4 * j + 3] = (((v >> 6) & 3) ^ 2) - 2
    for j in range(whole * per, n):
        out[j] = packed_value(packed, start + j, bits)
