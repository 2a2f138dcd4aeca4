"""Custom options: the bytes a custom op carries in the model, turned into values in this one place.

The executor decodes a custom node's options once, when its kernel has an `init`, and hands the result to
`init(options)`; the kernel keeps what it needs in its state (`ctx.state`). What the converter writes (and most
custom ops read) is a flexbuffer map, which becomes a dict. Some producers write a raw C struct instead
(MediaPipe's Convolution2DTransposeBias: TfLiteTransposeConvParams); such a kernel has no `init` and reads its
fields from the node's bytes with `unpack_struct`. Flex ops' options (a flexbuffer vector holding a serialized
NodeDef) are decoded by their own decoder, lite_numba.plugins.flex.nodedef.
"""

from __future__ import annotations

import struct

from flatbuffers import flexbuffers

__all__ = ["decode_custom_options", "unpack_struct"]


def decode_custom_options(data: bytes | None):
    """Custom options as the converter writes them: a flexbuffer map -> dict; other bytes returned as-is."""
    if not data:
        return {}
    try:
        return flexbuffers.Loads(data)
    except Exception:
        return data


def unpack_struct(data: bytes | None, fmt: str) -> tuple | None:
    """The fields of custom options written as a raw C struct, by `fmt` (the struct module's syntax, e.g. "<3i" for
    three little-endian int32), from the start of `data`; None when `data` is shorter than the struct."""
    size = struct.calcsize(fmt)
    if data is None or len(data) < size:
        return None
    return struct.unpack_from(fmt, bytes(data[:size]))
