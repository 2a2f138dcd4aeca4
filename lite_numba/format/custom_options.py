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

__all__ = ["decode_composite_attributes", "decode_custom_options", "unpack_struct"]


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


def decode_composite_attributes(data, attributes_format: int = 0) -> dict:
    """A STABLEHLO_COMPOSITE's `composite_attributes` (its options' byte vector): a flexbuffer map of scalars,
    strings and vectors -> dict (empty bytes: no attributes). ValueError naming what is wrong when the bytes are not
    such a map or the format is not FLEXBUFFERS (0, the schema's only CompositeAttributesFormat)."""
    if attributes_format != 0:
        raise ValueError(f"composite_attributes_format is {attributes_format}; only 0 (FLEXBUFFERS) is defined")
    raw = bytes(bytearray(data or b""))
    if not raw:
        return {}
    try:
        value = flexbuffers.Loads(raw)
    except Exception as e:  # flexbuffers raises ValueError, KeyError, IndexError, struct.error on bad bytes
        raise ValueError(f"composite_attributes ({len(raw)} bytes) are not a flexbuffer: {type(e).__name__}: {e}") \
            from None
    if not isinstance(value, dict):
        raise ValueError(f"composite_attributes ({len(raw)} bytes) hold a {type(value).__name__}, not a flexbuffer "
                         f"map")
    for key, v in value.items():
        if not isinstance(key, str) or not _plain(v):
            raise ValueError(f"composite_attributes: entry {key!r} holds a {type(v).__name__}, not a number, bool, "
                             f"string or vector of them")
    return value


def _plain(v, depth: int = 0) -> bool:
    if isinstance(v, (bool, int, float, str, bytes)) or v is None:
        return True
    if isinstance(v, (list, tuple)) and depth < 2:
        return all(_plain(x, depth + 1) for x in v)
    return False
