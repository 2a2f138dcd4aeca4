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
    """A STABLEHLO_COMPOSITE's `composite_attributes` (its options' byte vector): a flexbuffer map of numbers,
    bools, strings and vectors of them -> dict (empty bytes: no attributes). ValueError naming what is wrong when
    the bytes are not such a map or the format is not FLEXBUFFERS (0, the schema's only CompositeAttributesFormat).

    The map is walked before it is converted, so hostile bytes cost at most their own length: nested maps and
    vectors of vectors (which flexbuffers may share, making a full conversion exponential) are refused, and every
    vector must fit in the bytes."""
    if attributes_format != 0:
        raise ValueError(f"composite_attributes_format is {attributes_format}; only 0 (FLEXBUFFERS) is defined")
    raw = bytes(bytearray(data or b""))
    if not raw:
        return {}
    what = f"composite_attributes ({len(raw)} bytes)"
    try:
        root = flexbuffers.GetRoot(raw)
        if not root.IsMap:
            raise ValueError(f"{what} are not a flexbuffer map")
        entries = root.AsMap
        n = len(entries)
        if n > len(raw):
            raise ValueError(f"{what} claim {n} entries")
        keys, values = entries.Keys, entries.Values
        out = {}
        for k in range(n):
            key, v = keys[k].AsKey, values[k]
            if v.IsMap:
                raise ValueError(f"{what}: entry {key!r} is a map; only numbers, bools, strings and vectors of them "
                                 f"are attributes")
            if _is_vector(v):
                vec = v.AsVector if v.IsVector else v.AsTypedVector if v.IsTypedVector else v.AsFixedTypedVector
                if len(vec) * max(vec.ByteWidth, 1) > len(raw):
                    raise ValueError(f"{what}: entry {key!r} claims {len(vec)} elements")
                if v.IsVector and any(_is_vector(vec[i]) or vec[i].IsMap for i in range(len(vec))):
                    raise ValueError(f"{what}: entry {key!r} nests vectors or maps")
            out[key] = v.Value
    except ValueError as e:
        if str(e).startswith(what):
            raise
        raise ValueError(f"{what} are not a flexbuffer: ValueError: {e}") from None
    except Exception as e:  # flexbuffers raises KeyError, IndexError, struct.error, ... on bad bytes
        raise ValueError(f"{what} are not a flexbuffer: {type(e).__name__}: {e}") from None
    return out


def _is_vector(ref) -> bool:
    # (flexbuffers' own Ref.IsAnyVector calls a property and raises for every non-vector)
    return ref.IsVector or ref.IsTypedVector or ref.IsFixedTypedVector
