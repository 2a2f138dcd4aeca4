"""Decoding a Flex op's custom options without TensorFlow.

A `Flex<TfOp>` custom op (a model converted with SELECT_TF_OPS) carries as custom options a flexbuffer vector
[tf_op_name, serialized NodeDef]. The NodeDef is a protobuf message; this module reads the few messages it needs
over the protobuf wire format (varint keys, wire types 0/1/2/5) — no generated classes, no `protobuf` package.
Field numbers (facts from tensorflow/core/framework/{node_def,attr_value,tensor_shape,types}.proto):

    NodeDef          name=1 op=2 input=3 (repeated) device=4 attr=5 (map<string, AttrValue>: key=1 value=2)
    AttrValue        list=1 s=2 i=3 f=4 b=5 type=6 shape=7 tensor=8 placeholder=9 func=10
    AttrValue.List   s=2 i=3 f=4 b=5 type=6 shape=7 (numeric lists packed or not)
    TensorShapeProto dim=2 (Dim: size=1 name=2) unknown_rank=3

Attribute values become Python values: ints, floats, bools, bytes (s), numpy dtypes (type; `DataType` number when
numpy has none), shapes as tuples with -1 for unknown dimensions (None for unknown rank), lists as lists. `tensor`
and `func` attributes are kept as raw bytes (no supported op reads them).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np
from flatbuffers import flexbuffers

# tensorflow DataType enum values -> numpy dtypes (DT_BFLOAT16=14, DT_RESOURCE=20, DT_VARIANT=21 have none)
TF_DTYPES = {
    1: np.dtype(np.float32), 2: np.dtype(np.float64), 3: np.dtype(np.int32), 4: np.dtype(np.uint8),
    5: np.dtype(np.int16), 6: np.dtype(np.int8), 8: np.dtype(np.complex64), 9: np.dtype(np.int64),
    10: np.dtype(np.bool_), 17: np.dtype(np.uint16), 18: np.dtype(np.complex128), 19: np.dtype(np.float16),
    22: np.dtype(np.uint32), 23: np.dtype(np.uint64),
}
TF_DTYPE_NAMES = {7: "string", 14: "bfloat16", 20: "resource", 21: "variant"}


class FlexDecodeError(ValueError):
    """The custom options of a Flex op are not a [name, NodeDef] flexbuffer vector or the NodeDef is malformed."""


@dataclass(frozen=True)
class TfDataType:
    """A TensorFlow DataType without a numpy equivalent (string, bfloat16, resource, variant)."""

    code: int

    def __repr__(self) -> str:
        return f"DT_{TF_DTYPE_NAMES.get(self.code, str(self.code)).upper()}"


@dataclass(frozen=True)
class FlexNode:
    """A decoded Flex op: the TensorFlow op name and its NodeDef (name, inputs, attributes)."""

    op: str
    name: str = ""
    inputs: tuple[str, ...] = ()
    attrs: dict = field(default_factory=dict)

    def attr(self, key: str, default=None, kind: str | None = None):
        """Attribute `key`, or `default` when the NodeDef does not set it (TF then uses the op's default). `kind`
        ("s" bytes, "i" int, "f" float, "b" bool, "type" dtype: the AttrValue field the op declares) checks a set
        value: another kind raises FlexDecodeError naming the op, the attribute and the value, as TensorFlow refuses
        a NodeDef whose attribute has the wrong type."""
        if key not in self.attrs:
            return default
        value = self.attrs[key]
        if kind is not None and not _is_kind(value, kind):
            got = "type" if isinstance(value, (np.dtype, TfDataType)) else type(value).__name__
            raise FlexDecodeError(f"Flex op {self.op} (node {self.name!r}): attribute {key!r} is {got} "
                                  f"{value!r:.80}, expected {_KIND_NAMES[kind]}")
        return value

    def describe_attrs(self) -> str:
        """The attributes as `key=value` text for error messages (internal `_` attributes left out)."""
        items = [f"{k}={v!r}" for k, v in sorted(self.attrs.items()) if not k.startswith("_")]
        return "{" + ", ".join(items) + "}"


_KIND_NAMES = {"s": "a string", "i": "an int", "f": "a float", "b": "a bool", "type": "a data type"}


def _is_kind(value, kind: str) -> bool:
    if kind == "s":
        return isinstance(value, bytes)
    if kind == "i":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "f":
        return isinstance(value, float)
    if kind == "b":
        return isinstance(value, bool)
    if kind == "type":
        return isinstance(value, (np.dtype, TfDataType))
    raise ValueError(f"unknown attribute kind {kind!r}")


# --- the wire format ------------------------------------------------------------------------------------------

def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise FlexDecodeError("NodeDef: truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise FlexDecodeError("NodeDef: varint longer than 10 bytes")


def _signed64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def _fields(buf: bytes):
    """Yield (field number, wire type, value) of a message: ints for types 0/1/5 (raw bits), bytes for type 2."""
    pos, n = 0, len(buf)
    while pos < n:
        key, pos = _varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = _varint(buf, pos)
        elif wt == 1:
            if pos + 8 > n:
                raise FlexDecodeError("NodeDef: truncated 64-bit field")
            v = int.from_bytes(buf[pos:pos + 8], "little")
            pos += 8
        elif wt == 2:
            ln, pos = _varint(buf, pos)
            if pos + ln > n:
                raise FlexDecodeError(f"NodeDef: field {num} of length {ln} runs past the message end")
            v = bytes(buf[pos:pos + ln])
            pos += ln
        elif wt == 5:
            if pos + 4 > n:
                raise FlexDecodeError("NodeDef: truncated 32-bit field")
            v = int.from_bytes(buf[pos:pos + 4], "little")
            pos += 4
        else:
            raise FlexDecodeError(f"NodeDef: unsupported wire type {wt} (field {num})")
        yield num, wt, v


def _f32(bits: int) -> float:
    return struct.unpack("<f", bits.to_bytes(4, "little"))[0]


def _packed(wt: int, v, kind: str) -> list:
    """A repeated numeric field element (wire type 0/5) or a packed run of them (wire type 2)."""
    if wt != 2:
        return [_f32(v) if kind == "f" else v]
    if kind == "f":
        if len(v) % 4:
            raise FlexDecodeError("NodeDef: packed float list of odd length")
        return list(struct.unpack(f"<{len(v) // 4}f", v))
    out, pos = [], 0
    while pos < len(v):
        x, pos = _varint(v, pos)
        out.append(x)
    return out


def _dtype(code: int):
    return TF_DTYPES.get(code, TfDataType(code))


def _shape(buf: bytes):
    dims, unknown_rank = [], False
    for num, _, v in _fields(buf):
        if num == 2:
            size = 0
            for dn, _, dv in _fields(v):
                if dn == 1:
                    size = _signed64(dv)
            dims.append(size)
        elif num == 3:
            unknown_rank = bool(v)
    return None if unknown_rank else tuple(dims)


def _list(buf: bytes) -> list:
    out: list = []
    for num, wt, v in _fields(buf):
        if num == 2:
            out.append(v)
        elif num == 3:
            out.extend(_signed64(x) for x in _packed(wt, v, "i"))
        elif num == 4:
            out.extend(_packed(wt, v, "f"))
        elif num == 5:
            out.extend(bool(x) for x in _packed(wt, v, "i"))
        elif num == 6:
            out.extend(_dtype(x) for x in _packed(wt, v, "i"))
        elif num == 7:
            out.append(_shape(v))
        else:
            out.append(v)  # tensors, functions: raw
    return out


# the wire type each AttrValue field is written with (list, s, shape: bytes; i, b, type: varint; f: 32-bit)
_ATTR_WIRE = {1: 2, 2: 2, 3: 0, 4: 5, 5: 0, 6: 0, 7: 2}


def _attr_value(buf: bytes):
    value = None
    for num, wt, v in _fields(buf):
        if _ATTR_WIRE.get(num, wt) != wt:  # (campaign seed 3701 case 1145: an int attribute's bytes reached & 2**64-1)
            raise FlexDecodeError(f"NodeDef: attribute value field {num} has wire type {wt}, expected "
                                  f"{_ATTR_WIRE[num]}")
        if num == 1:
            value = _list(v)
        elif num == 2:
            value = v
        elif num == 3:
            value = _signed64(v)
        elif num == 4:
            value = _f32(v)
        elif num == 5:
            value = bool(v)
        elif num == 6:
            value = _dtype(v)
        elif num == 7:
            value = _shape(v)
        else:
            value = v  # tensor, placeholder, func: raw
    return value


def decode_node_def(buf: bytes) -> FlexNode:
    """Decode a serialized tensorflow NodeDef."""
    name, op, inputs, attrs = "", "", [], {}
    for num, wt, v in _fields(buf):
        if num == 1 and wt == 2:
            name = v.decode("utf-8", "replace")
        elif num == 2 and wt == 2:
            op = v.decode("utf-8", "replace")
        elif num == 3 and wt == 2:
            inputs.append(v.decode("utf-8", "replace"))
        elif num == 5 and wt == 2:
            key, value = "", None
            for en, ewt, ev in _fields(v):
                if en == 1 and ewt == 2:
                    key = ev.decode("utf-8", "replace")
                elif en == 2 and ewt == 2:
                    value = _attr_value(ev)
            attrs[key] = value
    return FlexNode(op, name, tuple(inputs), attrs)


def _ref_bytes(ref) -> bytes:
    # the converter writes both entries as flexbuffer strings; a blob holds the same bytes
    return bytes(ref.AsBlob if ref.IsBlob else ref.AsStringBytes)


def decode_flex_options(custom_options: bytes | None) -> FlexNode:
    """The TF op name and NodeDef of a Flex op's custom options (a flexbuffer vector [name, NodeDef bytes])."""
    if not custom_options:
        raise FlexDecodeError("a Flex op needs custom options (the TF op name and its NodeDef); there are none")
    try:
        vec = flexbuffers.GetRoot(bytearray(custom_options)).AsVector
        tf_op = _ref_bytes(vec[0]).decode("utf-8")
        node_def = _ref_bytes(vec[1])
    except FlexDecodeError:
        raise
    except Exception as e:  # the flexbuffers reader raises assorted errors on foreign bytes
        raise FlexDecodeError(f"a Flex op's custom options are not a flexbuffer vector [op name, NodeDef]: "
                              f"{e}") from None
    node = decode_node_def(node_def)
    if node.op and node.op != tf_op:
        raise FlexDecodeError(f"Flex op name {tf_op!r} disagrees with its NodeDef's op {node.op!r}")
    return FlexNode(tf_op, node.name, node.inputs, node.attrs)
