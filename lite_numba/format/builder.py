"""Programmatic writer for TFLite flatbuffer models.

:class:`ModelBuilder` assembles tensors, operators, subgraphs and signatures
in plain Python records and serializes them with ``flatbuffers.Builder`` and
the flatc-generated builder functions of the ``tflite`` package.  The output
is a ``.tflite`` file (file identifier ``"TFL3"``, schema version 3) that the
official LiteRT runtime loads.

Example::

    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 4])
    w = b.add_const("w", np.ones([1, 4], np.float32))
    y = b.add_tensor("y", np.float32, [1, 4])
    b.add_op("ADD", [x, w], [y], options={"fused_activation_function": "RELU"})
    b.mark_output(y)
    model_bytes = b.build()
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import flatbuffers
import numpy as np
from flatbuffers import flexbuffers
from tflite.BuiltinOperator import BuiltinOperator
from tflite.CustomOptionsFormat import CustomOptionsFormat

from . import strings
from .builder_options import normalize_options, options_fields, write_options
from .schema import (
    BUILTIN_CODES,
    BUILTIN_NAMES,
    PACKED_BITS,
    PACKED_TYPE_CODES,
    numpy_to_tensor_type,
    options_table_for,
    tensor_type_to_numpy,
)


def _tfl_module(name: str):
    # ``tflite/__init__`` star-imports each submodule, so ``tflite.Buffer`` is the
    # reader class; fetch the module object itself.
    return importlib.import_module(f"tflite.{name}")


_Buffer = _tfl_module("Buffer")
_Metadata = _tfl_module("Metadata")
_Model = _tfl_module("Model")
_Operator = _tfl_module("Operator")
_OperatorCode = _tfl_module("OperatorCode")
_Quant = _tfl_module("QuantizationParameters")
_SignatureDef = _tfl_module("SignatureDef")
_SubGraph = _tfl_module("SubGraph")
_Tensor = _tfl_module("Tensor")
_TensorMap = _tfl_module("TensorMap")


__all__ = [
    "FILE_IDENTIFIER",
    "SCHEMA_VERSION",
    "ModelBuilder",
    "SubgraphBuilder",
    "builtin_code",
    "builtin_options_table",
    "numpy_to_tensor_type",
    "options_fields",
    "tensor_type_to_numpy",
]

FILE_IDENTIFIER = b"TFL3"
SCHEMA_VERSION = 3

Quant = tuple | Mapping[str, Any] | None
DTypeLike = Any

# ---------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------

def builtin_code(op: str | int) -> int:
    """Resolve a builtin operator given by name (``"CONV_2D"``) or code to its code."""
    if isinstance(op, (int, np.integer)) and not isinstance(op, bool):
        if int(op) not in BUILTIN_NAMES:
            raise ValueError(f"unknown builtin operator code {op}")
        return int(op)
    if isinstance(op, str):
        key = op.upper()
        if key in BUILTIN_CODES:
            return BUILTIN_CODES[key]
        raise ValueError(f"unknown builtin operator {op!r}")
    raise TypeError(f"builtin operator must be a name or an int, got {type(op).__name__}")


# ---------------------------------------------------------------------------
# Builtin operator -> options table
# ---------------------------------------------------------------------------

def builtin_options_table(op: str | int) -> str | None:
    """Name of the options table (e.g. ``"Conv2DOptions"``) of a builtin op, or None."""
    entry = options_table_for(BUILTIN_NAMES[builtin_code(op)])
    return entry[0] if entry else None


# ---------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------


def _normalize_quant(quant: Quant) -> dict | None:
    if quant is None:
        return None
    if isinstance(quant, tuple):
        if len(quant) != 2:
            raise ValueError("per-tensor quant must be a (scale, zero_point) tuple")
        scale, zp = quant
        return {"scales": [float(scale)], "zero_points": [int(zp)], "quantized_dimension": 0,
                "min": None, "max": None}
    if isinstance(quant, Mapping):
        unknown = set(quant) - {"scales", "scale", "zero_points", "zero_point",
                                "quantized_dimension", "min", "max", "blockwise"}
        if unknown:
            raise ValueError(f"unknown quantization keys {sorted(unknown)}")
        if "blockwise" in quant:  # {"scales": tensor index, "zero_points": tensor index or -1, "block_size": n}
            bw = dict(quant["blockwise"])
            if set(bw) - {"scales", "zero_points", "block_size"}:
                raise ValueError(f"unknown blockwise keys {sorted(set(bw) - {'scales', 'zero_points', 'block_size'})}")
            return {"scales": [], "zero_points": [], "quantized_dimension": int(quant.get("quantized_dimension", 0)),
                    "min": None, "max": None,
                    "blockwise": (int(bw["scales"]), int(bw.get("zero_points", -1)), int(bw["block_size"]))}
        scales = quant.get("scales", quant.get("scale"))
        scales = [] if scales is None else [float(s) for s in np.atleast_1d(scales)]
        zps = quant.get("zero_points", quant.get("zero_point"))
        if zps is None:
            zps = [0] * len(scales)
        elif np.ndim(zps) == 0:
            zps = [int(zps)] * len(scales)
        else:
            zps = [int(z) for z in np.asarray(zps).ravel()]
        mn, mx = quant.get("min"), quant.get("max")
        return {
            "scales": scales,
            "zero_points": zps,
            "quantized_dimension": int(quant.get("quantized_dimension", 0)),
            "min": None if mn is None else [float(v) for v in np.atleast_1d(mn)],
            "max": None if mx is None else [float(v) for v in np.atleast_1d(mx)],
        }
    raise TypeError("quant must be None, a (scale, zero_point) tuple or a dict")


@dataclass
class _TensorRec:
    name: str
    dtype: np.dtype
    shape: list[int]
    buffer: int
    quant: dict | None
    shape_signature: list[int] | None
    is_variable: bool
    type_code: int | None = None  # the TensorType when not the dtype's own (INT4, INT2, UINT4)


@dataclass
class _OpRec:
    opcode_key: tuple
    inputs: list[int]
    outputs: list[int]
    options_table: str | None = None
    options_union: int = 0
    options_type: int = 0
    options_values: list = field(default_factory=list)
    custom_options: bytes | None = None
    intermediates: list[int] | None = None


def _int_list(values: Sequence[int] | None, what: str) -> list[int] | None:
    if values is None:
        return None
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{what} must contain ints, got {v!r}")
        out.append(int(v))
    return out


class SubgraphBuilder:
    """Builds one subgraph: its tensors, operators, inputs and outputs.

    Create through :meth:`ModelBuilder.add_subgraph` (or use ``ModelBuilder.main``).
    Tensor-creating methods return the tensor index within this subgraph.
    """

    def __init__(self, model: ModelBuilder, index: int, name: str) -> None:
        self.model = model
        self.index = index
        self.name = name
        self.tensors: list[_TensorRec] = []
        self.operators: list[_OpRec] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    # -- tensors -----------------------------------------------------------
    def add_tensor(
        self,
        name: str,
        dtype: DTypeLike,
        shape: Sequence[int],
        quant: Quant = None,
        shape_signature: Sequence[int] | None = None,
        is_variable: bool = False,
    ) -> int:
        """Add a non-constant tensor and return its index.

        ``shape_signature`` may contain -1 for dynamic dimensions; ``quant`` is
        ``(scale, zero_point)`` or ``{"scales", "zero_points", "quantized_dimension"}``.
        """
        return self._add(name, dtype, shape, 0, quant, shape_signature, is_variable)

    def add_input(
        self,
        name: str,
        dtype: DTypeLike,
        shape: Sequence[int],
        shape_signature: Sequence[int] | None = None,
        quant: Quant = None,
    ) -> int:
        """Add a tensor and append it to the subgraph inputs; returns its index."""
        t = self.add_tensor(name, dtype, shape, quant=quant, shape_signature=shape_signature)
        self.inputs.append(t)
        return t

    def add_const(self, name: str, array: Any, quant: Quant = None) -> int:
        """Add a constant tensor backed by its own buffer (dtype/shape from ``array``; an array of bytes or str, dtype
        object, S or U, is a STRING tensor in the packed layout, str encoded as UTF-8)."""
        arr = np.asarray(array)
        if arr.dtype.kind in "OSU":
            buf = self.model._add_buffer(strings.from_array(arr, f"constant {name!r}").tobytes())
            return self._add(name, object, list(arr.shape), buf, quant, None, False)
        numpy_to_tensor_type(arr.dtype)  # validate dtype
        # asarray, not ascontiguousarray: the latter turns 0-d arrays into shape [1]
        arr = np.asarray(arr, dtype=arr.dtype.newbyteorder("<"))
        buf = self.model._add_buffer(arr.tobytes(order="C"))
        return self._add(name, arr.dtype, list(arr.shape), buf, quant, None, False)

    def add_packed_const(self, name: str, values: Any, type_name: str = "INT4", quant: Quant = None,
                         shape: Sequence[int] | None = None) -> int:
        """Add a constant INT4, INT2 or UINT4 tensor from its values (any integer array in the type's range, of the
        tensor's shape), packed as the schema stores them: 8 / bits values to a byte, the first in the lowest bits,
        two's complement for the signed types. `shape` declares another shape than the values' (a malformed file,
        for tests of the loader)."""
        if type_name not in PACKED_BITS:
            raise ValueError(f"type_name must be one of {sorted(PACKED_BITS)}, got {type_name!r}")
        bits = PACKED_BITS[type_name]
        v = np.asarray(values)
        lo, hi = (0, (1 << bits) - 1) if type_name == "UINT4" else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        if v.dtype.kind not in "iu" or (v.size and (v.min() < lo or v.max() > hi)):
            raise ValueError(f"{type_name} values must be integers in [{lo}, {hi}]")
        per = 8 // bits
        flat = (v.reshape(-1).astype(np.int64) & ((1 << bits) - 1)).astype(np.uint8)
        flat = np.concatenate([flat, np.zeros(-flat.size % per, np.uint8)]).reshape(-1, per)
        packed = np.zeros(flat.shape[0], np.uint8)
        for j in range(per):
            packed |= flat[:, j] << np.uint8(j * bits)
        buf = self.model._add_buffer(packed.tobytes())
        dt = np.uint8 if type_name == "UINT4" else np.int8
        t = self._add(name, dt, list(v.shape if shape is None else shape), buf, quant, None, False)
        self.tensors[t].type_code = PACKED_TYPE_CODES[type_name]
        return t

    def add_blockwise_const(self, name: str, values: Any, scales: Any, block_size: int, type_name: str = "INT4",
                            zero_points: Any = None) -> int:
        """Add blockwise-quantized constant weights: `values` [rows, columns] (INT4 or INT2, packed), the FLOAT16
        constant `scales` [rows, columns / block_size] (tensor "<name>/scales") and, when given, a zero-point
        tensor ("<name>/zero_points", int32) named by the BlockwiseQuantization; returns the weights' index."""
        s = self.add_const(f"{name}/scales", np.asarray(scales, np.float16))
        z = -1 if zero_points is None else self.add_const(f"{name}/zero_points", np.asarray(zero_points, np.int32))
        quant = {"blockwise": {"scales": s, "zero_points": z, "block_size": int(block_size)}}
        return self.add_packed_const(name, values, type_name, quant)

    def _add(self, name, dtype, shape, buffer, quant, shape_signature, is_variable) -> int:
        dt = np.dtype(dtype)
        if dt.kind in "OSU":  # bytes / str / object: a STRING tensor
            dt = np.dtype(object)
        numpy_to_tensor_type(dt)
        shape_l = _int_list(list(shape), "shape")
        sig = _int_list(list(shape_signature), "shape_signature") if shape_signature is not None else None
        if sig is not None and len(sig) != len(shape_l):
            raise ValueError(f"shape_signature {sig} has a different rank than shape {shape_l}")
        self.tensors.append(
            _TensorRec(str(name), dt.newbyteorder("="), shape_l, buffer,
                       _normalize_quant(quant), sig, bool(is_variable))
        )
        return len(self.tensors) - 1

    def mark_input(self, tensor: int) -> None:
        """Append an existing tensor to the subgraph inputs."""
        self._check_tensor(tensor, allow_absent=False)
        self.inputs.append(int(tensor))

    def mark_output(self, tensor: int) -> None:
        """Append an existing tensor to the subgraph outputs."""
        self._check_tensor(tensor, allow_absent=False)
        self.outputs.append(int(tensor))

    def _check_tensor(self, t: int, allow_absent: bool) -> None:
        if allow_absent and t == -1:
            return
        if not 0 <= t < len(self.tensors):
            raise IndexError(f"tensor index {t} out of range in subgraph {self.index} "
                             f"({len(self.tensors)} tensors)")

    # -- operators ---------------------------------------------------------
    def add_op(
        self,
        op: str | int,
        inputs: Sequence[int],
        outputs: Sequence[int],
        options: Mapping[str, Any] | None = None,
        version: int = 1,
        intermediates: Sequence[int] | None = None,
    ) -> int:
        """Add a builtin operator (name like ``"CONV_2D"`` or BuiltinOperator int).

        ``options`` holds snake_case fields of the op's options table; enum fields
        take member names (``"SAME"``, ``"RELU6"``) or ints.  -1 in ``inputs``
        marks an absent optional input.  Returns the operator index.
        """
        code = builtin_code(op)
        if code == BuiltinOperator.CUSTOM:
            raise ValueError("use add_custom_op for custom operators")
        ins, outs = self._operands(inputs, outputs)
        rec = _OpRec(("builtin", code, int(version)), ins, outs,
                     intermediates=_int_list(intermediates, "intermediates"))
        entry = options_table_for(BUILTIN_NAMES[code])
        if entry is None:
            if options:
                raise ValueError(f"builtin op {BUILTIN_NAMES[code]} has no options table, "
                                 f"got options {sorted(options)}")
        else:
            rec.options_table, rec.options_union, rec.options_type = entry
            rec.options_values = normalize_options(rec.options_table, options or {})
        self.model._register_opcode(rec.opcode_key)
        self.operators.append(rec)
        return len(self.operators) - 1

    def _operands(self, inputs: Sequence[int], outputs: Sequence[int]) -> tuple[list[int], list[int]]:
        """An op's input and output tensor indices, checked (-1: an absent optional input)."""
        ins = _int_list(inputs, "inputs")
        outs = _int_list(outputs, "outputs")
        for t in ins:
            self._check_tensor(t, allow_absent=True)
        for t in outs:
            self._check_tensor(t, allow_absent=False)
        return ins, outs

    def add_custom_op(
        self,
        name: str,
        inputs: Sequence[int],
        outputs: Sequence[int],
        options: Mapping[str, Any] | bytes | None = None,
        version: int = 1,
    ) -> int:
        """Add a custom operator; dict options are serialized as a flexbuffer map."""
        ins, outs = self._operands(inputs, outputs)
        if options is None:
            custom = None
        elif isinstance(options, (bytes, bytearray, memoryview)):
            custom = bytes(options)
        elif isinstance(options, Mapping):
            custom = bytes(flexbuffers.Dumps(dict(options)))
        else:
            raise TypeError("custom options must be a dict, bytes or None")
        rec = _OpRec(("custom", str(name), int(version)), ins, outs, custom_options=custom)
        self.model._register_opcode(rec.opcode_key)
        self.operators.append(rec)
        return len(self.operators) - 1

    # -- serialization -----------------------------------------------------
    def _serialize(self, fb: flatbuffers.Builder, opcode_index: dict[tuple, int]) -> int:
        tensor_offs = [_write_tensor(fb, t) for t in self.tensors]
        op_offs = [_write_operator(fb, op, opcode_index[op.opcode_key]) for op in self.operators]
        tensors_vec = _offset_vector(fb, tensor_offs)
        ops_vec = _offset_vector(fb, op_offs)
        ins_vec = fb.CreateNumpyVector(np.asarray(self.inputs, dtype="<i4"))
        outs_vec = fb.CreateNumpyVector(np.asarray(self.outputs, dtype="<i4"))
        name = fb.CreateString(self.name)
        return _table(fb, _SubGraph, "SubGraph", Tensors=tensors_vec, Inputs=ins_vec, Outputs=outs_vec,
                      Operators=ops_vec, Name=name)


def _table(fb: flatbuffers.Builder, module, name: str, **fields) -> int:
    """Write table `name` of a generated `tflite` module with its fields in the order given (None: left out)."""
    getattr(module, f"{name}Start")(fb)
    for field_name, value in fields.items():
        if value is not None:
            getattr(module, f"{name}Add{field_name}")(fb, value)
    return getattr(module, f"{name}End")(fb)


def _offset_vector(fb: flatbuffers.Builder, offsets: Sequence[int]) -> int:
    fb.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        fb.PrependUOffsetTRelative(off)
    return fb.EndVector()


def _write_blockwise(fb: flatbuffers.Builder, scales: int, zero_points: int, block_size: int) -> int:
    """The schema's BlockwiseQuantization table (scales, zero_points, block_size: int32 fields 0-2; the tflite
    package's schema predates it)."""
    fb.StartObject(3)
    fb.PrependInt32Slot(2, block_size, 0)
    fb.PrependInt32Slot(1, zero_points, 0)
    fb.PrependInt32Slot(0, scales, 0)
    return fb.EndObject()


def _write_quant(fb: flatbuffers.Builder, q: dict) -> int:
    if q.get("blockwise") is not None:
        details = _write_blockwise(fb, *q["blockwise"])
        return _table(fb, _Quant, "QuantizationParameters", DetailsType=2, Details=details,
                      QuantizedDimension=q["quantized_dimension"])
    scale = fb.CreateNumpyVector(np.asarray(q["scales"], dtype="<f4"))
    zp = fb.CreateNumpyVector(np.asarray(q["zero_points"], dtype="<i8"))
    mn = fb.CreateNumpyVector(np.asarray(q["min"], dtype="<f4")) if q["min"] is not None else None
    mx = fb.CreateNumpyVector(np.asarray(q["max"], dtype="<f4")) if q["max"] is not None else None
    return _table(fb, _Quant, "QuantizationParameters", Min=mn, Max=mx, Scale=scale, ZeroPoint=zp,
                  QuantizedDimension=q["quantized_dimension"])


def _write_tensor(fb: flatbuffers.Builder, t: _TensorRec) -> int:
    shape = fb.CreateNumpyVector(np.asarray(t.shape, dtype="<i4"))
    sig = (fb.CreateNumpyVector(np.asarray(t.shape_signature, dtype="<i4"))
           if t.shape_signature is not None else None)
    name = fb.CreateString(t.name)
    quant = _write_quant(fb, t.quant) if t.quant is not None else None
    ttype = t.type_code if t.type_code is not None else numpy_to_tensor_type(t.dtype)
    return _table(fb, _Tensor, "Tensor", Shape=shape, Type=ttype, Buffer=t.buffer,
                  Name=name, Quantization=quant, IsVariable=True if t.is_variable else None, ShapeSignature=sig,
                  HasRank=True)


def _write_operator(fb: flatbuffers.Builder, op: _OpRec, opcode_index: int) -> int:
    ins = fb.CreateNumpyVector(np.asarray(op.inputs, dtype="<i4"))
    outs = fb.CreateNumpyVector(np.asarray(op.outputs, dtype="<i4"))
    inter = (fb.CreateNumpyVector(np.asarray(op.intermediates, dtype="<i4"))
             if op.intermediates is not None else None)
    opts = (write_options(fb, op.options_table, op.options_values)
            if op.options_table is not None else None)
    custom = fb.CreateByteVector(op.custom_options) if op.custom_options is not None else None
    union = "BuiltinOptions" if op.options_union == 1 else "BuiltinOptions2"
    options = {f"{union}Type": op.options_type, union: opts} if opts is not None else {}
    return _table(fb, _Operator, "Operator", OpcodeIndex=opcode_index, Inputs=ins, Outputs=outs, **options,
                  CustomOptions=custom, CustomOptionsFormat=CustomOptionsFormat.FLEXBUFFERS if custom is not None
                  else None, Intermediates=inter)


class ModelBuilder:
    """Builds a complete ``.tflite`` model.

    Subgraph 0 (``self.main``) is created up front; ``add_input``, ``add_const``,
    ``add_tensor``, ``add_op``, ``add_custom_op``, ``mark_input`` and
    ``mark_output`` are forwarded to it.  Call :meth:`build` for the bytes.
    """

    def __init__(self, description: str = "lite-numba ModelBuilder") -> None:
        self.description = description
        self.subgraphs: list[SubgraphBuilder] = []
        self.buffers: list[bytes] = [b""]  # buffer 0: empty sentinel
        self.opcodes: list[tuple] = []
        self._opcode_index: dict[tuple, int] = {}
        self.signatures: list[tuple[str, dict[str, int], dict[str, int], int]] = []
        self.metadata: list[tuple[str, int]] = []
        self.main = self.add_subgraph("main")

    # -- model-level -------------------------------------------------------
    def add_subgraph(self, name: str = "") -> SubgraphBuilder:
        """Append a new subgraph; its index is ``.index``."""
        sg = SubgraphBuilder(self, len(self.subgraphs), name or f"subgraph_{len(self.subgraphs)}")
        self.subgraphs.append(sg)
        return sg

    def add_signature(
        self,
        key: str,
        inputs: Mapping[str, int],
        outputs: Mapping[str, int],
        subgraph: int | SubgraphBuilder = 0,
    ) -> None:
        """Add a SignatureDef mapping names to tensor indices of ``subgraph``."""
        sg_index = subgraph.index if isinstance(subgraph, SubgraphBuilder) else int(subgraph)
        if not 0 <= sg_index < len(self.subgraphs):
            raise IndexError(f"subgraph index {sg_index} out of range")
        sg = self.subgraphs[sg_index]
        for t in list(inputs.values()) + list(outputs.values()):
            sg._check_tensor(int(t), allow_absent=False)
        self.signatures.append((str(key), {str(k): int(v) for k, v in inputs.items()},
                                {str(k): int(v) for k, v in outputs.items()}, sg_index))

    def add_metadata(self, name: str, data: bytes) -> None:
        """Attach a named metadata entry whose payload is stored in its own buffer."""
        self.metadata.append((str(name), self._add_buffer(bytes(data))))

    def _add_buffer(self, data: bytes) -> int:
        self.buffers.append(data)
        return len(self.buffers) - 1

    def _register_opcode(self, key: tuple) -> int:
        if key not in self._opcode_index:
            self._opcode_index[key] = len(self.opcodes)
            self.opcodes.append(key)
        return self._opcode_index[key]

    # -- forwarding to the main subgraph -----------------------------------
    def add_input(self, name: str, dtype: DTypeLike, shape: Sequence[int],
                  shape_signature: Sequence[int] | None = None, quant: Quant = None) -> int:
        """Add an input tensor to the main subgraph (see SubgraphBuilder.add_input)."""
        return self.main.add_input(name, dtype, shape, shape_signature=shape_signature, quant=quant)

    def add_const(self, name: str, array: Any, quant: Quant = None) -> int:
        """Add a constant tensor to the main subgraph (see SubgraphBuilder.add_const)."""
        return self.main.add_const(name, array, quant=quant)

    def add_packed_const(self, name: str, values: Any, type_name: str = "INT4", quant: Quant = None,
                         shape: Sequence[int] | None = None) -> int:
        """Add a packed INT4 / INT2 / UINT4 constant to the main subgraph (see SubgraphBuilder.add_packed_const)."""
        return self.main.add_packed_const(name, values, type_name, quant, shape)

    def add_blockwise_const(self, name: str, values: Any, scales: Any, block_size: int, type_name: str = "INT4",
                            zero_points: Any = None) -> int:
        """Add blockwise-quantized weights to the main subgraph (see SubgraphBuilder.add_blockwise_const)."""
        return self.main.add_blockwise_const(name, values, scales, block_size, type_name, zero_points)

    def add_tensor(self, name: str, dtype: DTypeLike, shape: Sequence[int], quant: Quant = None,
                   shape_signature: Sequence[int] | None = None, is_variable: bool = False) -> int:
        """Add a tensor to the main subgraph (see SubgraphBuilder.add_tensor)."""
        return self.main.add_tensor(name, dtype, shape, quant=quant,
                                    shape_signature=shape_signature, is_variable=is_variable)

    def add_op(self, op: str | int, inputs: Sequence[int], outputs: Sequence[int],
               options: Mapping[str, Any] | None = None, version: int = 1,
               intermediates: Sequence[int] | None = None) -> int:
        """Add a builtin op to the main subgraph (see SubgraphBuilder.add_op)."""
        return self.main.add_op(op, inputs, outputs, options=options, version=version,
                                intermediates=intermediates)

    def add_custom_op(self, name: str, inputs: Sequence[int], outputs: Sequence[int],
                      options: Mapping[str, Any] | bytes | None = None, version: int = 1) -> int:
        """Add a custom op to the main subgraph (see SubgraphBuilder.add_custom_op)."""
        return self.main.add_custom_op(name, inputs, outputs, options=options, version=version)

    def mark_input(self, tensor: int) -> None:
        """Append a main-subgraph tensor to its inputs."""
        self.main.mark_input(tensor)

    def mark_output(self, tensor: int) -> None:
        """Append a main-subgraph tensor to its outputs."""
        self.main.mark_output(tensor)

    # -- serialization -----------------------------------------------------
    def build(self) -> bytes:
        """Serialize the model to ``.tflite`` flatbuffer bytes."""
        size_hint = 1024 + sum(len(b) + 32 for b in self.buffers)
        fb = flatbuffers.Builder(size_hint)

        buffer_offs = []
        for data in self.buffers:
            data_off = None
            if data:
                # 16-byte aligned payload, like the converter, so that any
                # element type can be read in place.
                fb.StartVector(1, len(data), 16)
                fb.head = fb.head - len(data)
                fb.Bytes[fb.head: fb.head + len(data)] = data
                data_off = fb.EndVector()
            buffer_offs.append(_table(fb, _Buffer, "Buffer", Data=data_off))

        subgraph_offs = [sg._serialize(fb, self._opcode_index) for sg in self.subgraphs]

        opcode_offs = []
        for key in self.opcodes:
            kind, ident, version = key
            custom = fb.CreateString(ident) if kind == "custom" else None
            code = BuiltinOperator.CUSTOM if kind == "custom" else ident
            opcode_offs.append(_table(fb, _OperatorCode, "OperatorCode", DeprecatedBuiltinCode=min(code, 127),
                                      BuiltinCode=code, CustomCode=custom, Version=version))

        sig_offs = [_write_signature(fb, *sig) for sig in self.signatures]

        meta_offs = []
        for name, buf in self.metadata:
            name_off = fb.CreateString(name)
            meta_offs.append(_table(fb, _Metadata, "Metadata", Name=name_off, Buffer=buf))

        opcodes_vec = _offset_vector(fb, opcode_offs)
        subgraphs_vec = _offset_vector(fb, subgraph_offs)
        buffers_vec = _offset_vector(fb, buffer_offs)
        sigs_vec = _offset_vector(fb, sig_offs)
        meta_vec = _offset_vector(fb, meta_offs) if meta_offs else None
        desc = fb.CreateString(self.description)

        root = _table(fb, _Model, "Model", Version=SCHEMA_VERSION, OperatorCodes=opcodes_vec,
                      Subgraphs=subgraphs_vec, Description=desc, Buffers=buffers_vec, Metadata=meta_vec,
                      SignatureDefs=sigs_vec)
        fb.Finish(root, file_identifier=FILE_IDENTIFIER)
        return bytes(fb.Output())


def _write_signature(fb: flatbuffers.Builder, key: str, inputs: dict[str, int],
                     outputs: dict[str, int], subgraph: int) -> int:
    def tensor_maps(mapping: dict[str, int]) -> int:
        offs = []
        for name, idx in mapping.items():
            name_off = fb.CreateString(name)
            offs.append(_table(fb, _TensorMap, "TensorMap", Name=name_off, TensorIndex=idx))
        return _offset_vector(fb, offs)

    ins = tensor_maps(inputs)
    outs = tensor_maps(outputs)
    key_off = fb.CreateString(key)
    return _table(fb, _SignatureDef, "SignatureDef", Inputs=ins, Outputs=outs, SignatureKey=key_off,
                  SubgraphIndex=subgraph)
