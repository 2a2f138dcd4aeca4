"""The .tflite schema's name and type tables, in one place: tensor types <-> numpy dtypes and type names, builtin
operator names <-> codes, each builtin's options table, and the snake_case spelling of schema field names.

The loader (model.py), the options reader (options.py), the model builder (builder.py) and the Python API
(interpreter.py) all read these; none keeps a table of its own.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import numpy as np
import tflite
from tflite.BuiltinOperator import BuiltinOperator
from tflite.BuiltinOptions import BuiltinOptions
from tflite.BuiltinOptions2 import BuiltinOptions2

from . import schema_extra

# TensorType code -> (numpy dtype, type name): how the loader holds each type (RESOURCE and VARIANT tensors are int32
# handles, STRING is raw bytes; INT4, INT2 and UINT4 hold their values in int8 / uint8: unpacked at load, or kept
# packed when blockwise quantized, see PACKED_BITS).
TENSOR_TYPES: dict[int, tuple[np.dtype, str]] = {
    0: (np.dtype(np.float32), "FLOAT32"), 1: (np.dtype(np.float16), "FLOAT16"), 2: (np.dtype(np.int32), "INT32"),
    3: (np.dtype(np.uint8), "UINT8"), 4: (np.dtype(np.int64), "INT64"), 5: (np.dtype(np.object_), "STRING"),
    6: (np.dtype(np.bool_), "BOOL"), 7: (np.dtype(np.int16), "INT16"), 8: (np.dtype(np.complex64), "COMPLEX64"),
    9: (np.dtype(np.int8), "INT8"), 10: (np.dtype(np.float64), "FLOAT64"), 11: (np.dtype(np.complex128), "COMPLEX128"),
    12: (np.dtype(np.uint64), "UINT64"), 13: (np.dtype(np.int32), "RESOURCE"), 14: (np.dtype(np.int32), "VARIANT"),
    15: (np.dtype(np.uint32), "UINT32"), 16: (np.dtype(np.uint16), "UINT16"), 17: (np.dtype(np.int8), "INT4"),
    19: (np.dtype(np.int8), "INT2"), 20: (np.dtype(np.uint8), "UINT4"),
}
# bits per value of the sub-byte types: stored packed, the first value in the lowest bits of each byte
PACKED_BITS: dict[str, int] = {"INT4": 4, "INT2": 2, "UINT4": 4}
# their TensorType codes, for the builder (which writes them from int8 / uint8 values)
PACKED_TYPE_CODES: dict[str, int] = {"INT4": 17, "INT2": 19, "UINT4": 20}
_HANDLES = ("RESOURCE", "VARIANT", *PACKED_BITS)
# numpy dtype -> TensorType code and type name, for the dtypes a tensor of that type is written from
DTYPE_TO_TENSOR_TYPE: dict[np.dtype, int] = {dt: code for code, (dt, name) in TENSOR_TYPES.items()
                                              if name not in _HANDLES}  # STRING: object (bytes), packed
TENSOR_TYPE_TO_DTYPE: dict[int, np.dtype] = {code: dt for dt, code in DTYPE_TO_TENSOR_TYPE.items()}
TYPE_NAMES: dict[np.dtype, str] = {dt: name for code, (dt, name) in TENSOR_TYPES.items() if name not in _HANDLES}


def type_name(dtype) -> str:
    """The schema's name of a numpy dtype ("FLOAT32", ...), or the dtype's own name in capitals."""
    dt = np.dtype(dtype)
    return TYPE_NAMES.get(dt, dt.name.upper())


# the tflite package's tables, plus the newer entries schema_extra.py writes by hand (STABLEHLO_CASE)
BUILTIN_NAMES: dict[int, str] = {**{v: k for k, v in vars(BuiltinOperator).items() if not k.startswith("_")},
                                 **schema_extra.BUILTIN_OPERATORS}
BUILTIN_CODES: dict[str, int] = {v: k for k, v in BUILTIN_NAMES.items()}
OPTIONS_UNION1: dict[int, str] = {v: k for k, v in vars(BuiltinOptions).items() if not k.startswith("_")}
OPTIONS_UNION2: dict[int, str] = {**{v: k for k, v in vars(BuiltinOptions2).items() if not k.startswith("_")},
                                  **schema_extra.OPTIONS2_MEMBERS}


def options_class(table: str) -> type:
    """The reader class of an options table: the tflite package's, or schema_extra's for newer tables."""
    return getattr(tflite, table, None) or schema_extra.TABLES[table]

# Ops whose options table is not simply "<CamelName>Options".
_OPTIONS_EXCEPTIONS = {
    "CONV_2D": "Conv2DOptions", "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions", "CONV_3D": "Conv3DOptions",
    "CONV_3D_TRANSPOSE": "Conv3DOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions", "MAX_POOL_2D": "Pool2DOptions",
    "L2_POOL_2D": "Pool2DOptions", "L2_NORMALIZATION": "L2NormOptions", "LSH_PROJECTION": "LSHProjectionOptions",
    "LSTM": "LSTMOptions", "RNN": "RNNOptions", "SVDF": "SVDFOptions",
    "UNIDIRECTIONAL_SEQUENCE_RNN": "SequenceRNNOptions",
    "BIDIRECTIONAL_SEQUENCE_RNN": "BidirectionalSequenceRNNOptions",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTMOptions",
    "BIDIRECTIONAL_SEQUENCE_LSTM": "BidirectionalSequenceLSTMOptions", "BATCH_TO_SPACE_ND": "BatchToSpaceNDOptions",
    "SPACE_TO_BATCH_ND": "SpaceToBatchNDOptions", "TOPK_V2": "TopKV2Options", "MAXIMUM": "MaximumMinimumOptions",
    "MINIMUM": "MaximumMinimumOptions", "PADV2": "PadV2Options", "BATCH_MATMUL": "BatchMatMulOptions",
    "MEAN": "ReducerOptions", "SUM": "ReducerOptions", "REDUCE_PROD": "ReducerOptions", "REDUCE_MAX": "ReducerOptions",
    "REDUCE_MIN": "ReducerOptions", "REDUCE_ANY": "ReducerOptions", "REDUCE_ALL": "ReducerOptions",
    "ATAN2": "ATan2Options", "RANDOM_STANDARD_NORMAL": "RandomOptions", "RANDOM_UNIFORM": "RandomOptions",
    "MULTINOMIAL": "RandomOptions", "STABLEHLO_COMPOSITE": "StableHLOCompositeOptions",
}


def _camel(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("_"))


@lru_cache(maxsize=None)
def options_table_for(op_name: str) -> tuple[str, int, int] | None:
    """(options table name, union (1 or 2), union type value) for a builtin op, or None if it has no options."""
    table = _OPTIONS_EXCEPTIONS.get(op_name, _camel(op_name) + "Options")
    for union, members in ((1, OPTIONS_UNION1), (2, OPTIONS_UNION2)):
        for value, member in members.items():
            if member == table:
                return table, union, value
    return None


def snake_case(camel: str) -> str:
    """A schema field's accessor name in snake_case (StrideH -> stride_h, LSHProjection -> lsh_projection)."""
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", camel)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


def numpy_to_tensor_type(dtype: Any) -> int:
    """Return the ``tflite.TensorType`` value for a numpy dtype (or dtype-like)."""
    dt = np.dtype(dtype)
    try:
        return DTYPE_TO_TENSOR_TYPE[dt.newbyteorder("=")]
    except KeyError:
        raise ValueError(f"unsupported tensor dtype {dt}") from None


def tensor_type_to_numpy(tensor_type: int) -> np.dtype:
    """Return the numpy dtype for a ``tflite.TensorType`` value."""
    try:
        return TENSOR_TYPE_TO_DTYPE[int(tensor_type)]
    except KeyError:
        raise ValueError(f"unsupported tflite TensorType {tensor_type}") from None
