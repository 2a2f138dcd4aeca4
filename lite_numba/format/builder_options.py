"""The builtin options tables of the .tflite schema, for writing: which fields a table has (derived from the
generated `tflite` modules), how a Python value becomes a field's value (enums by name, vectors, strings), and
writing a table with ``flatbuffers.Builder`` (ModelBuilder's `add_op(options=...)`)."""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import flatbuffers
import numpy as np
from tflite.ActivationFunctionType import ActivationFunctionType
from tflite.CombinerType import CombinerType
from tflite.CustomOptionsFormat import CustomOptionsFormat
from tflite.FullyConnectedOptionsWeightsFormat import FullyConnectedOptionsWeightsFormat
from tflite.LSHProjectionType import LSHProjectionType
from tflite.LSTMKernelType import LSTMKernelType
from tflite.MirrorPadMode import MirrorPadMode
from tflite.Padding import Padding
from tflite.ReduceWindowFunction import ReduceWindowFunction
from tflite.RngAlgorithm import RngAlgorithm
from tflite.StablehloComparisonDirection import StablehloComparisonDirection
from tflite.StablehloComparisonType import StablehloComparisonType
from tflite.StablehloPrecisionConfig import StablehloPrecisionConfig
from tflite.TensorType import TensorType

from . import schema_extra
from .schema import numpy_to_tensor_type, snake_case

__all__ = ["OptionField", "OptionsSpec", "enum_members", "normalize_options", "options_fields", "options_spec",
           "write_options"]

def enum_members(enum_cls: type) -> dict[str, int]:
    return {k: v for k, v in vars(enum_cls).items() if not k.startswith("_") and isinstance(v, int)}

# ---------------------------------------------------------------------------
# Options table introspection (derived from the generated tflite modules)
# ---------------------------------------------------------------------------

# Enum-valued scalar option fields (by snake_case field name) -> enum class.
_ENUM_FIELDS: dict[str, type] = {
    "fused_activation_function": ActivationFunctionType,
    "padding": Padding,
    "weights_format": FullyConnectedOptionsWeightsFormat,
    "combiner": CombinerType,
    "kernel_type": LSTMKernelType,
    "mode": MirrorPadMode,
    "composite_attributes_format": CustomOptionsFormat,
    "algorithm": RngAlgorithm,
    "comparison_direction": StablehloComparisonDirection,
    "compare_type": StablehloComparisonType,
    "reduce_function": ReduceWindowFunction,
    "quantized_bias_type": TensorType,
    "output_type": TensorType,
    "out_type": TensorType,
    "in_data_type": TensorType,
    "out_data_type": TensorType,
    "idx_out_type": TensorType,
    "key_dtype": TensorType,
    "value_dtype": TensorType,
}
# Vector fields whose elements are enum values.
_ENUM_VECTOR_FIELDS: dict[str, type] = {
    "precision_config": StablehloPrecisionConfig,
}
_ENUM_FIELDS_BY_TABLE: dict[tuple[str, str], type] = {
    ("LSHProjectionOptions", "type"): LSHProjectionType,
}

_FLAGS_TO_NUMPY = {
    "Bool": np.bool_,
    "Int8": np.int8,
    "Uint8": np.uint8,
    "Int16": np.int16,
    "Uint16": np.uint16,
    "Int32": np.int32,
    "Uint32": np.uint32,
    "Int64": np.int64,
    "Uint64": np.uint64,
    "Float32": np.float32,
    "Float64": np.float64,
}


@dataclass(frozen=True)
class OptionField:
    """One field of an options table."""

    name: str  # snake_case
    kind: str  # "scalar" | "vector" | "string"
    ctype: str  # flatbuffers scalar type ("Int32", "Bool", ...) or vector element type
    adder: Callable
    enum: type | None = None


@dataclass(frozen=True)
class OptionsSpec:
    table: str
    start: Callable
    end: Callable
    fields: dict[str, OptionField]


@functools.cache
def options_spec(table: str) -> OptionsSpec:
    try:
        mod = importlib.import_module(f"tflite.{table}")
    except ModuleNotFoundError:  # a table newer than the tflite package, written by hand
        mod = schema_extra
    reader_cls = getattr(mod, table)
    prefix = f"{table}Add"
    fields: dict[str, OptionField] = {}
    for fn_name in dir(mod):
        if not fn_name.startswith(prefix):
            continue
        camel = fn_name[len(prefix):]
        adder = getattr(mod, fn_name)
        src = inspect.getsource(adder)
        m = re.search(r"builder\.Prepend(\w+)Slot\(", src)
        if m is None:  # pragma: no cover - generated code always matches
            continue
        slot_type = m.group(1)
        name = snake_case(camel)
        enum = _ENUM_FIELDS_BY_TABLE.get((table, name), _ENUM_FIELDS.get(name))
        if slot_type != "UOffsetTRelative":
            fields[name] = OptionField(name, "scalar", slot_type, adder, enum)
            continue
        reader_src = inspect.getsource(getattr(reader_cls, camel))
        if hasattr(mod, f"{table}Start{camel}Vector"):
            em = re.search(r"number_types\.(\w+)Flags,\s*a\b", reader_src)
            if em is None or em.group(1) not in _FLAGS_TO_NUMPY:
                continue  # vectors of tables are not supported (none exist in options)
            fields[name] = OptionField(name, "vector", em.group(1), adder, _ENUM_VECTOR_FIELDS.get(name))
        elif ".String(" in reader_src:
            fields[name] = OptionField(name, "string", "String", adder, None)
    return OptionsSpec(
        table=table,
        start=getattr(mod, f"{table}Start"),
        end=getattr(mod, f"{table}End"),
        fields=fields,
    )


def options_fields(table: str) -> list[str]:
    """snake_case field names accepted for the options table ``table``."""
    return sorted(options_spec(table).fields)


def _enum_value(enum_cls: type, value: Any, fld: str, table: str) -> int:
    if enum_cls is TensorType and not isinstance(value, (str, int, np.integer)):
        return numpy_to_tensor_type(value)  # numpy dtype / type object
    if isinstance(value, str):
        members = enum_members(enum_cls)
        if value.upper() in members:
            return members[value.upper()]
        if value in members:
            return members[value]
        raise ValueError(
            f"invalid value {value!r} for field {fld!r} of {table}; "
            f"expected one of {sorted(members)} or an int"
        )
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"invalid value {value!r} for enum field {fld!r} of {table}")
    return int(value)


def _coerce_scalar(f: OptionField, value: Any, table: str) -> Any:
    if f.enum is not None:
        return _enum_value(f.enum, value, f.name, table)
    if f.ctype == "Bool":
        return bool(value)
    if f.ctype.startswith("Float"):
        return float(value)
    if isinstance(value, str):
        raise TypeError(f"field {f.name!r} of {table} expects a number, got {value!r}")
    return int(value)


def normalize_options(table: str, options: Mapping[str, Any]) -> list[tuple[OptionField, Any]]:
    spec = options_spec(table)
    out: list[tuple[OptionField, Any]] = []
    for key, value in options.items():
        f = spec.fields.get(key)
        if f is None:
            raise ValueError(
                f"unknown field {key!r} for options table {table}; "
                f"known fields: {sorted(spec.fields)}"
            )
        if f.kind == "scalar":
            out.append((f, _coerce_scalar(f, value, table)))
        elif f.kind == "string":
            if isinstance(value, bytes):
                value = value.decode("utf-8")
            out.append((f, str(value)))
        else:
            if isinstance(value, (bytes, bytearray)) and f.ctype == "Uint8":
                arr = np.frombuffer(bytes(value), dtype=np.uint8)
            else:
                seq = np.atleast_1d(np.asarray(value, dtype=object)).ravel().tolist()
                if f.enum is not None:
                    seq = [_enum_value(f.enum, v, f.name, table) for v in seq]
                arr = np.asarray(seq, dtype=_FLAGS_TO_NUMPY[f.ctype])
            out.append((f, arr))
    return out


def write_options(fb: flatbuffers.Builder, table: str, values: list[tuple[OptionField, Any]]) -> int:
    spec = options_spec(table)
    offsets: dict[str, int] = {}
    for f, v in values:  # vectors and strings before the table starts
        if f.kind == "vector":
            offsets[f.name] = fb.CreateNumpyVector(v.astype(v.dtype.newbyteorder("<")))
        elif f.kind == "string":
            offsets[f.name] = fb.CreateString(v)
    spec.start(fb)
    for f, v in values:
        f.adder(fb, offsets.get(f.name, v))
    return spec.end(fb)
