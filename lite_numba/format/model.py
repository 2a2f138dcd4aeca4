"""Loader: .tflite bytes or a memory-mapped file -> validated ModelPlan.

Everything read from the file is checked before use: the identifier, the schema version, every vector length against
the file size, every tensor/buffer/opcode/subgraph index, buffer ranges (also buffers stored by offset/size after
the flatbuffer), shapes and dtypes. Anything wrong raises ValueError naming it; the flatbuffer accessors are pure
Python, so a hostile file cannot crash the process, and lengths are checked before any loop or allocation.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
from dataclasses import replace

import flatbuffers
import numpy as np
import tflite

from . import strings
from .builtin_options import parse_options
from .plan import NO_QUANTIZATION, ModelPlan, Node, Quantization, Signature, SubgraphPlan, TensorSpec
from .schema import BUILTIN_NAMES, PACKED_BITS, TENSOR_TYPES

# Declared shapes beyond 256 TiB are corruption (no machine holds them) and are refused here; smaller ones that do
# not fit this machine are refused by allocate_tensors() with arena.ArenaLimitError, a MemoryError.
MAX_TENSOR_BYTES = 1 << 48
# zero points a tensor of each type can hold (the official runtime runs others and returns garbage)
ZERO_POINT_RANGES = {"INT8": (-128, 127), "UINT8": (0, 255), "INT16": (-32768, 32767), "INT4": (-8, 7),
                     "UINT16": (0, 65535), "INT32": (-(2**31), 2**31 - 1), "INT2": (-2, 1), "UINT4": (0, 15)}
CUSTOM_CODE = 32
BLOCKWISE_DETAILS = 2  # QuantizationDetails.BlockwiseQuantization
# the types whose BlockwiseQuantization the official kernels read, and the only inputs that read it (the official
# builtin kernels handle kTfLiteBlockwiseQuantization in fully_connected.cc and embedding_lookup.cc only; anywhere
# else a blockwise tensor would be taken for plain bytes)
BLOCKWISE_TYPES = ("INT4", "INT2")
BLOCKWISE_READERS = {"FULLY_CONNECTED": 1, "EMBEDDING_LOOKUP": 1}


class ModelError(ValueError):
    """The model file is malformed or unsupported."""


def _builtin_code_field(oc) -> int:
    """OperatorCode.builtin_code as stored (0 when absent). The tflite package's BuiltinCode() answers the
    deprecated int8 field instead whenever the stored value is below 127, so a file whose deprecated field is 0 and
    whose builtin_code is PRELU read as ADD; the official runtime takes max(builtin_code, deprecated_builtin_code)
    of the stored values."""
    o = oc._tab.Offset(10)
    return int(oc._tab.Get(flatbuffers.number_types.Int32Flags, o + oc._tab.Pos)) if o else 0


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise ModelError(f"Invalid model: {msg}")


# the official runtime's text for a buffer its flatbuffer verifier refuses (code matches on it); our detail follows
# vtable offsets (4 + 2 x field id in schema.fbs) of the int32 vectors int_tuple reads without the generated accessors
VECTOR_SLOTS = {("Tensor", "Shape"): 4, ("Tensor", "ShapeSignature"): 18, ("Operator", "Inputs"): 6,
                ("Operator", "Outputs"): 8, ("Operator", "Intermediates"): 20, ("SubGraph", "Inputs"): 6,
                ("SubGraph", "Outputs"): 8}
NOT_A_FLATBUFFER = "The model is not a valid Flatbuffer buffer"


def _check_flatbuffer(cond: bool, msg: str) -> None:
    if not cond:
        raise ModelError(f"{NOT_A_FLATBUFFER}: {msg}")


def read_model_bytes(path: str | os.PathLike):
    """Memory-map a model file (read-only); returns a buffer usable as zero-copy bytes."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise ModelError(f"Invalid model: file {os.fspath(path)!r} is empty")
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def model_buffer(content, what: str = "model_content"):
    """A model held in memory as the loader keeps it: bytes and read-only memory maps as they are (nothing can change
    them under the loaded plan, so they are not copied: a .litertlm bundle's model section, a mapped file), any other
    buffer (bytearray, memoryview, a writable map) copied to bytes. Not a buffer: TypeError naming `what`."""
    if isinstance(content, bytes):
        return content
    try:
        view = memoryview(content)
    except TypeError:
        raise TypeError(f"{what} must be bytes, got {type(content).__name__}") from None
    with view:
        return content if isinstance(content, mmap.mmap) and view.readonly else view.tobytes()


def load_model(data) -> ModelPlan:
    """Parse and validate a .tflite flatbuffer (bytes, bytearray, memoryview or mmap)."""
    buf = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else data
    try:
        return _Loader(buf).load()
    except ModelError:
        raise
    except (ValueError, IndexError, TypeError, OverflowError, UnicodeDecodeError, AttributeError, KeyError) as e:
        raise ModelError(f"{NOT_A_FLATBUFFER}: malformed flatbuffer ({type(e).__name__}: {e})") from None
    except Exception as e:  # struct.error and other accessor failures on corrupted offsets
        raise ModelError(f"{NOT_A_FLATBUFFER}: malformed flatbuffer ({type(e).__name__}: {e})") from None


class _Loader:
    def __init__(self, buf):
        self.buf = buf
        self.np_buf = np.frombuffer(buf, dtype=np.uint8)
        self.n = len(self.np_buf)

    def vec_len(self, obj, field: str, elem_size: int = 4) -> int:
        if getattr(obj, field + "IsNone")():
            return 0
        n = getattr(obj, field + "Length")()
        _check(0 <= n * elem_size <= self.n, f"{field} vector length {n} exceeds the file size")
        return n

    def int_tuple(self, obj, field: str, table: tuple[int, int, int] | None = None) -> tuple[int, ...]:
        """An int32 vector field as a tuple of ints. The hot fields (shapes, operator inputs and outputs: an LLM
        has thousands) are read straight from the buffer at their schema slot (`VECTOR_SLOTS`; `table`: the
        object's slots() when the caller has them), several times faster than the generated accessors; their
        length is checked against the file as vec_len does."""
        slot = VECTOR_SLOTS.get((type(obj).__name__, field))
        if slot is None:
            return tuple(int(v) for v in self.int_vec(obj, field))
        at = self.field(table or self.slots(obj), slot)
        if not at:
            return ()
        pos = at + self.u32(at)
        n = self.u32(pos)
        _check(n * 4 <= self.n, f"{field} vector length {n} exceeds the file size")
        return struct.unpack_from(f"<{n}i", self.buf, pos + 4)

    def u32(self, pos: int) -> int:
        return struct.unpack_from("<I", self.buf, pos)[0]

    def slots(self, obj) -> tuple[int, int, int]:
        """(table position, vtable position, vtable bytes) of a generated table object, for field()."""
        pos = obj._tab.Pos
        vt = pos - struct.unpack_from("<i", self.buf, pos)[0]
        return pos, vt, struct.unpack_from("<H", self.buf, vt)[0]

    def field(self, table: tuple[int, int, int], slot: int) -> int:
        """The position of the field at vtable offset `slot` of `table` (slots()), or 0 when it is absent (its
        default applies), as the generated accessors' Offset(slot) finds it."""
        pos, vt, vlen = table
        if slot >= vlen:
            return 0
        o = struct.unpack_from("<H", self.buf, vt + slot)[0]
        return pos + o if o else 0

    def string_at(self, at: int) -> bytes:
        """The flatbuffer string whose offset is stored at position `at`."""
        start = at + self.u32(at)
        n = self.u32(start)
        _check(start + 4 + n <= self.n, f"string of {n} bytes at {start} exceeds the file size")
        return bytes(self.buf[start + 4:start + 4 + n])

    def int_vec(self, obj, field: str) -> np.ndarray:
        n = self.vec_len(obj, field)
        if n == 0:
            return np.zeros(0, np.int64)
        return np.asarray(getattr(obj, field + "AsNumpy")(), dtype=np.int64)

    def load(self) -> ModelPlan:
        _check_flatbuffer(self.n >= 8, f"file is {self.n} bytes, too short for a flatbuffer")
        _check_flatbuffer(bytes(self.buf[4:8]) == b"TFL3",
                          f"file identifier is {bytes(self.buf[4:8])!r}, expected b'TFL3'")
        root = int.from_bytes(bytes(self.buf[0:4]), "little")
        _check_flatbuffer(root + 4 <= self.n, "root table offset is outside the file")
        m = tflite.Model.GetRootAs(self.buf, 0)
        version = m.Version()
        _check(version == 3, f"schema version {version}, expected 3")

        self.buffers = self.read_buffers(m)
        codes = []
        for i in range(self.vec_len(m, "OperatorCodes")):
            oc = m.OperatorCodes(i)
            code = max(_builtin_code_field(oc), oc.DeprecatedBuiltinCode())
            _check(code in BUILTIN_NAMES, f"operator code {i} has unknown builtin code {code}")
            if code == CUSTOM_CODE:
                cc = oc.CustomCode()
                _check(cc is not None, f"operator code {i} is CUSTOM without a custom code name")
                name = cc.decode("utf-8", "replace")
            else:
                name = BUILTIN_NAMES[code]
            ver = oc.Version()
            _check(ver >= 1, f"operator code {i} ({name}) has version {ver}")
            codes.append((name, code, ver))
        self.codes = codes

        nsub = self.vec_len(m, "Subgraphs")
        _check(nsub >= 1, "model has no subgraphs")
        subgraphs = tuple(self.read_subgraph(m.Subgraphs(i), i, nsub) for i in range(nsub))
        _check_no_recursion(subgraphs)

        sigs = []
        for i in range(self.vec_len(m, "SignatureDefs")):
            sd = m.SignatureDefs(i)
            sub = sd.SubgraphIndex()
            _check(0 <= sub < nsub, f"signature {i} names subgraph {sub}, model has {nsub}")
            ntensors = len(subgraphs[sub].tensors)

            def tmap(field: str, sd=sd, ntensors=ntensors, i=i) -> dict[str, int]:
                out = {}
                for j in range(self.vec_len(sd, field)):
                    tm = getattr(sd, field)(j)
                    idx = tm.TensorIndex()
                    _check(0 <= idx < ntensors, f"signature {i} {field.lower()} tensor index {idx} out of range")
                    out[(tm.Name() or b"").decode("utf-8", "replace")] = idx
                return dict(sorted(out.items()))  # by name, as the official runtime's std::map orders them

            key = (sd.SignatureKey() or b"").decode("utf-8", "replace")
            sigs.append(Signature(key, sub, tmap("Inputs"), tmap("Outputs")))
        desc = m.Description()
        return ModelPlan(
            version=version,
            description=desc.decode("utf-8", "replace") if desc else "",
            subgraphs=subgraphs,
            signatures=tuple(sigs),
            operator_codes=tuple(codes),
        )

    def read_buffers(self, m) -> list[np.ndarray | None]:
        out = []
        for i in range(self.vec_len(m, "Buffers")):
            b = m.Buffers(i)
            offset, size = b.Offset(), b.Size()
            if offset > 1:
                _check(offset + size <= self.n, f"buffer {i} range [{offset}, {offset + size}) is outside the file")
                out.append(self.np_buf[offset:offset + size])
            else:
                n = self.vec_len(b, "Data", 1)
                out.append(b.DataAsNumpy() if n else None)
        return out

    def read_quantization(self, q, what: str, type_name: str, shape: tuple[int, ...]) -> Quantization:
        """A tensor's affine quantization `q` (its QuantizationParameters table, or None), checked as the official
        InterpreterBuilder does (quantized_dimension within the rank, one scale or one per channel) and beyond it:
        finite, non-negative scales and zero points the type can hold."""
        if q is None:
            return NO_QUANTIZATION
        if q.DetailsType() == BLOCKWISE_DETAILS:
            return _read_blockwise(q, what, type_name, shape)
        ns = self.vec_len(q, "Scale")
        nz = self.vec_len(q, "ZeroPoint", 8)
        if ns == 0:
            return NO_QUANTIZATION
        scales = np.asarray(q.ScaleAsNumpy(), dtype=np.float32).copy()
        zps = np.asarray(q.ZeroPointAsNumpy(), dtype=np.int64).copy() if nz else np.zeros(ns, np.int64)
        _check(zps.size == scales.size, f"{what} has {scales.size} scales but {zps.size} zero points")
        bad = ~np.isfinite(scales) | (scales < 0)
        _check(not bad.any(), f"{what} has quantization scale {scales[bad][0] if bad.any() else 0}: scales must be "
                              f"finite and non-negative")
        rng = ZERO_POINT_RANGES.get(type_name)
        if rng is not None:
            out = (zps < rng[0]) | (zps > rng[1])
            _check(not out.any(), f"{what} of type {type_name} has zero point {int(zps[out][0]) if out.any() else 0}"
                                  f", outside [{rng[0]}, {rng[1]}]")
        qd = q.QuantizedDimension()
        _check(qd >= 0 and (not shape or qd < len(shape)),
               f"{what} has quantized_dimension {qd}, must be in [0, {len(shape)})")
        _check(scales.size == 1 or not shape or scales.size == shape[qd],
               f"{what} has {scales.size} scales: must be 1 (per tensor) or {shape[qd] if shape else 0} (per "
               f"channel along dimension {qd})")
        return Quantization(scales, zps, qd)

    def read_sparsity(self, t):
        s = t.Sparsity()
        if s is None:
            return None
        dims = []
        for j in range(self.vec_len(s, "DimMetadata")):
            dm = s.DimMetadata(j)
            entry = {"format": dm.Format(), "dense_size": dm.DenseSize()}
            for key, getter, type_getter in (("segments", dm.ArraySegments, dm.ArraySegmentsType),
                                             ("indices", dm.ArrayIndices, dm.ArrayIndicesType)):
                kind = type_getter()
                tab = getter()
                if kind and tab is not None:
                    cls = {1: tflite.Int32Vector, 2: tflite.Uint16Vector, 3: tflite.Uint8Vector}.get(kind)
                    _check(cls is not None, f"unknown sparse index vector type {kind}")
                    vec = cls()
                    vec.Init(tab.Bytes, tab.Pos)
                    n = self.vec_len(vec, "Values", 1)
                    entry[key] = np.asarray(vec.ValuesAsNumpy(), np.int64) if n else np.zeros(0, np.int64)
            dims.append(entry)
        return {
            "traversal_order": self.int_vec(s, "TraversalOrder").tolist(),
            "block_map": self.int_vec(s, "BlockMap").tolist(),
            "dim_metadata": dims,
        }

    def first_uses(self, sg, si: int) -> dict[int, str]:
        """Where each tensor is first read ("input 1 of operator 3 (FULLY_CONNECTED) in subgraph 0"), for errors."""
        uses: dict[int, str] = {}
        for ni in range(self.vec_len(sg, "Operators")):
            op = sg.Operators(ni)
            oci = op.OpcodeIndex()
            name = self.codes[oci][0] if 0 <= oci < len(self.codes) else f"opcode {oci}"
            for j, i in enumerate(self.int_tuple(op, "Inputs")):
                uses.setdefault(int(i), f"input {j} of operator {ni} ({name}) in subgraph {si}")
        return uses

    def read_subgraph(self, sg, si: int, nsub: int) -> SubgraphPlan:
        ntensors = self.vec_len(sg, "Tensors")
        tensors = []
        uses: dict[int, str] | None = None  # first_uses, made when a blockwise tensor needs naming
        blockwise_what: dict[int, str] = {}
        for ti in range(ntensors):
            t = sg.Tensors(ti)
            # name, type, buffer, is_variable, quantization and sparsity at their schema slots (as VECTOR_SLOTS):
            # the generated accessors look each up again (an LLM has thousands of tensors)
            tab = self.slots(t)
            at = self.field(tab, 10)
            name = self.string_at(at).decode("utf-8", "replace") if at else ""
            at = self.field(tab, 6)
            ttype = struct.unpack_from("<b", self.buf, at)[0] if at else 0
            at = self.field(tab, 14)
            is_variable = bool(self.buf[at]) if at else False
            has_quant, has_sparsity = self.field(tab, 12) != 0, self.field(tab, 16) != 0
            _check(ttype in TENSOR_TYPES, f"tensor {ti} ({name!r}) has unknown type {ttype}")
            dtype, type_name = TENSOR_TYPES[ttype]
            shape = self.int_tuple(t, "Shape", tab)
            _check(all(d >= 0 for d in shape), f"tensor {ti} ({name!r}) has negative dimension in shape {shape}")
            sig = self.int_tuple(t, "ShapeSignature", tab) or shape
            _check(len(sig) == len(shape), f"tensor {ti} ({name!r}) shape_signature rank differs from shape")
            nbytes = math.prod(shape) * dtype.itemsize
            _check(nbytes <= MAX_TENSOR_BYTES, f"tensor {ti} ({name!r}) declares {nbytes} bytes (shape "
                                               f"{list(shape)} of {type_name}), more than any machine holds")
            at = self.field(tab, 8)
            bi = self.u32(at) if at else 0
            _check(0 <= bi < max(len(self.buffers), 1), f"tensor {ti} ({name!r}) buffer index {bi} out of range")
            raw = self.buffers[bi] if bi < len(self.buffers) else None
            data = None
            sparsity = self.read_sparsity(t) if has_sparsity else None
            what = f"tensor {ti} ({name!r})"
            tq = t.Quantization() if has_quant else None
            if tq is not None and tq.DetailsType() == BLOCKWISE_DETAILS:  # name the op reading it in every error
                uses = self.first_uses(sg, si) if uses is None else uses
                what = blockwise_what[ti] = f"tensor {ti} ({name!r}, {uses.get(ti, 'read by no operator')})"
            quant = self.read_quantization(tq, what, type_name, shape)
            bits = PACKED_BITS.get(type_name, 0)
            packed_bits = 0
            if quant.blockwise:
                _check(raw is not None and raw.size > 0, f"{what} is blockwise quantized but not a constant (the "
                                                         f"official kernels read blockwise weights from the model)")
            if type_name == "STRING" and raw is not None and raw.size:  # the packed layout, checked (strings.py)
                try:
                    strings.offsets(raw, int(np.prod(shape, dtype=np.int64)), f"tensor {ti} ({name!r})")
                except strings.StringBufferError as e:
                    raise ModelError(f"Invalid model: {e}") from None
                data = raw
            elif raw is not None and raw.size and type_name not in ("STRING", "RESOURCE", "VARIANT"):
                if sparsity is not None:  # sparse constant: the buffer holds only the stored values (DENSIFY)
                    _check(not bits, f"{what} is a sparse {type_name} tensor: sparse sub-byte tensors are not "
                                     f"supported (nor by the official kernels)")
                    _check(raw.size % dtype.itemsize == 0, f"tensor {ti} ({name!r}) sparse buffer size {raw.size}")
                    data = (raw.copy() if raw.ctypes.data % dtype.alignment else raw).view(dtype)
                elif bits:
                    count = int(np.prod(shape, dtype=np.int64))
                    expect = (count * bits + 7) // 8
                    _check(raw.size == expect, f"{what} {type_name} data has {raw.size} bytes, shape {list(shape)} "
                                               f"needs {expect} ({8 // bits} values per byte)")
                    if quant.blockwise:  # kept packed: the kernels read the bytes
                        data, packed_bits = raw, bits
                    else:
                        data = unpack_bits(raw, count, bits, type_name != "UINT4").reshape(shape)
                else:
                    _check(raw.size == nbytes, f"tensor {ti} ({name!r}) buffer has {raw.size} bytes, "
                                               f"shape {list(shape)} of {type_name} needs {nbytes}")
                    if raw.ctypes.data % dtype.alignment:
                        raw = raw.copy()
                    data = raw.view(dtype).reshape(shape)
            _check(data is None or not is_variable, f"tensor {ti} ({name!r}) is a variable tensor with a buffer "
                                                     f"(the official runtime does not support it either)")
            tensors.append(TensorSpec(
                index=ti, name=name, dtype=dtype, type_name=type_name, shape=shape, shape_signature=sig,
                quantization=quant, data=data, is_variable=is_variable, sparsity=sparsity,
                packed_bits=packed_bits,
            ))
        for ti, spec in enumerate(tensors):
            if spec.quantization.blockwise:
                tensors[ti] = _resolve_blockwise(tensors, spec, blockwise_what[ti])

        def indices(obj, field: str, what: str, allow_optional: bool, table=None) -> tuple[int, ...]:
            vals = self.int_tuple(obj, field, table)
            for v in vals:
                ok = (0 <= v < ntensors) or (allow_optional and v == -1)
                _check(ok, f"subgraph {si} {what} tensor index {v} out of range (subgraph has {ntensors} tensors)")
            return vals

        inputs = indices(sg, "Inputs", "input", False)
        outputs = indices(sg, "Outputs", "output", False)
        nodes = []
        for ni in range(self.vec_len(sg, "Operators")):
            op = sg.Operators(ni)
            oci = op.OpcodeIndex()
            _check(0 <= oci < len(self.codes), f"operator {ni} in subgraph {si} has opcode index {oci} out of range")
            name, code, ver = self.codes[oci]
            where = f"operator {ni} ({name}) in subgraph {si}"
            tab = self.slots(op)
            ins = indices(op, "Inputs", f"{where} input", True, tab)
            outs = indices(op, "Outputs", f"{where} output", True, tab)
            inter = indices(op, "Intermediates", f"{where} intermediate", True, tab)
            custom = None
            options = {}
            if code == CUSTOM_CODE:
                lo, ls = op.LargeCustomOptionsOffset(), op.LargeCustomOptionsSize()
                if lo > 1:
                    _check(lo + ls <= self.n, f"{where} custom options range is outside the file")
                    custom = bytes(self.np_buf[lo:lo + ls])
                elif self.vec_len(op, "CustomOptions", 1):
                    custom = op.CustomOptionsAsNumpy().tobytes()
            else:
                options = parse_options(op, name, self.n)
                for key in SUBGRAPH_KEYS:
                    if key in options:
                        _check(0 <= options[key] < nsub, f"{where} {key} {options[key]} out of range")
                        _check(options[key] != si, f"{where} calls its own subgraph {si}")
            nodes.append(Node(ni, name, code, ver, ins, outs, inter, options, custom))
        _check_sources(si, tensors, inputs, nodes, outputs)
        _check_blockwise_uses(si, tensors, inputs, nodes, outputs)
        sname = sg.Name()
        return SubgraphPlan(
            name=sname.decode("utf-8", "replace") if sname else "",
            tensors=tuple(tensors), inputs=inputs, outputs=outputs, nodes=tuple(nodes),
        )


SUBGRAPH_KEYS = ("subgraph_index", "cond_subgraph_index", "body_subgraph_index", "then_subgraph_index",
                 "else_subgraph_index", "init_subgraph_index", "decomposition_subgraph_index")


def _unsourced(t, i: int, ready) -> bool:
    """Tensor t (index i) has no value yet: not in `ready`, no data, not a variable, not empty (an empty tensor
    needs none, the official check is bytes > 0)."""
    return (t is not None and i not in ready and t.data is None and not t.is_variable and 0 not in t.shape
            and t.type_name not in ("RESOURCE", "VARIANT"))


def _check_sources(si: int, tensors, inputs, nodes, outputs=()) -> None:
    """Every tensor a node reads is an input, a constant, a variable or the output of an earlier node. The official
    runtime refuses a tensor no node produces ("lacks data", at invoke) and runs one produced only later (or by the
    node itself) on whatever its memory holds; we would read zeros as if they were data: both are refused. So is a
    subgraph output that nothing produces: the official runtime returns whatever its memory held (campaign seed 302
    case 17240, an IF whose outputs were rewired to its input: 5.6e23, then 1.9e24, for the same input)."""
    produced = {o for n in nodes for o in n.outputs}
    ready = set(inputs)
    for node in nodes:
        for i in node.inputs:
            t = tensors[i] if i >= 0 else None
            if _unsourced(t, i, ready):
                why = ("is produced only by this or a later operator" if i in produced else
                       f"is neither an input of subgraph {si}, a constant, a variable nor any operator's output")
                raise ModelError(f"Invalid model: Input tensor {i} ({t.name!r}) lacks data: it {why}\n"
                                 f"Node number {node.index} ({node.op_name}) failed to prepare.")
        ready.update(node.outputs)
    for o in outputs:
        t = tensors[o] if 0 <= o < len(tensors) else None
        if _unsourced(t, o, ready):
            raise ModelError(f"Invalid model: Output tensor {o} ({t.name!r}) of subgraph {si} is neither an input, a "
                             f"constant, a variable nor any operator's output: it has no value")


def _check_blockwise_uses(si: int, tensors, inputs, nodes, outputs) -> None:
    """A blockwise-quantized tensor (kept packed) is read only where the official kernels read blockwise
    quantization (BLOCKWISE_READERS); it is no subgraph input or output."""
    packed = {t.index for t in tensors if t.quantization.blockwise}
    if not packed:
        return

    def refuse(i: int, where: str) -> None:
        t = tensors[i]
        raise ModelError(f"Invalid model: tensor {i} ({t.name!r}) is blockwise quantized ({t.type_name}) but is "
                         f"{where}: only {' and '.join(f'{op} (input {j})' for op, j in BLOCKWISE_READERS.items())} "
                         f"read blockwise tensors, as in the official kernels")

    for i in list(inputs) + list(outputs):
        if i in packed:
            refuse(i, f"an input or output of subgraph {si}")
    for node in nodes:
        for j, i in enumerate(node.inputs):
            if i in packed and BLOCKWISE_READERS.get(node.op_name) != j:
                refuse(i, f"input {j} of operator {node.index} ({node.op_name}) in subgraph {si}")
        for i in list(node.outputs) + list(node.intermediates):
            if i in packed:
                refuse(i, f"an output of operator {node.index} ({node.op_name}) in subgraph {si}")


def _check_no_recursion(subgraphs) -> None:
    """Reject a subgraph that calls itself, directly or through others (it would never finish)."""
    calls = [sorted({n.options[k] for n in sg.nodes for k in SUBGRAPH_KEYS if k in n.options}) for sg in subgraphs]
    state = [0] * len(subgraphs)  # 0 new, 1 on the current path, 2 done

    def visit(i: int, path: list[int]) -> None:
        state[i] = 1
        for j in calls[i]:
            _check(state[j] != 1, "subgraph calls itself: " + " -> ".join(map(str, path + [i, j])))
            if state[j] == 0:
                visit(j, path + [i])
        state[i] = 2

    for i in range(len(subgraphs)):
        if state[i] == 0:
            visit(i, [])


def unpack_bits(raw: np.ndarray, count: int, bits: int, signed: bool = True) -> np.ndarray:
    """The first `count` values packed `bits` (4 or 2) to a byte in `raw`, the first in the lowest bits, widened to
    int8 (two's complement: the INT4 nibble 0x8 is -8, the INT2 value 0b10 is -2) or, unsigned, to uint8."""
    per = 8 // bits
    shifts = np.arange(per, dtype=np.uint8) * bits
    vals = (np.asarray(raw, np.uint8)[:, None] >> shifts[None, :]) & ((1 << bits) - 1)
    vals = vals.reshape(-1)[:count]
    if not signed:
        return vals.astype(np.uint8)
    half = 1 << (bits - 1)
    return ((vals.astype(np.int16) ^ half) - half).astype(np.int8)


def _read_blockwise(q, what: str, type_name: str, shape: tuple[int, ...]) -> Quantization:
    """A tensor's BlockwiseQuantization (scales: tensor index, zero_points: tensor index or -1, block_size), with
    the checks that need no other tensor; _resolve_blockwise checks the scales and zero points."""
    tab = q.Details()
    _check(tab is not None, f"{what} names BlockwiseQuantization without its table")
    fields = []
    for slot in (4, 6, 8):  # scales, zero_points, block_size (int32, default 0)
        o = tab.Offset(slot)
        fields.append(int(tab.Get(flatbuffers.number_types.Int32Flags, o + tab.Pos)) if o else 0)
    scales, zero_points, block_size = fields
    _check(type_name in BLOCKWISE_TYPES, f"{what} has BlockwiseQuantization on a {type_name} tensor: the official "
                                         f"kernels read it on {' and '.join(BLOCKWISE_TYPES)} tensors only")
    _check(len(shape) == 2, f"{what} has BlockwiseQuantization and shape {list(shape)}: blockwise quantization needs "
                            f"a 2-D tensor [rows, columns], blocks along dimension 1")
    qd = q.QuantizedDimension()
    _check(qd == 0, f"{what} has BlockwiseQuantization with quantized_dimension {qd}: must be 0 (a row of block "
                    f"scales per row of dimension 0)")
    _check(block_size >= 1, f"{what} BlockwiseQuantization.block_size is {block_size}: must be positive")
    _check(shape[1] % block_size == 0, f"{what} BlockwiseQuantization.block_size {block_size} does not divide "
                                       f"dimension 1 ({shape[1]}) of shape {list(shape)}")
    return Quantization(np.zeros(0, np.float32), np.zeros(0, np.int64), 0, block_size=block_size,
                        scales_tensor=scales, zero_points_tensor=zero_points)


def _resolve_blockwise(tensors: list[TensorSpec], spec: TensorSpec, what: str) -> TensorSpec:
    """Check the scales and zero-point tensors a blockwise-quantized tensor names and attach the scales."""
    q = spec.quantization
    rows, cols = spec.shape
    expect = (rows, cols // q.block_size)

    def named(field: str, i: int) -> TensorSpec:
        _check(0 <= i < len(tensors), f"{what} BlockwiseQuantization.{field} names tensor {i}, out of range "
                                      f"(subgraph has {len(tensors)} tensors)")
        t = tensors[i]
        _check(t.data is not None, f"{what} BlockwiseQuantization.{field} tensor {i} ({t.name!r}) is not a constant")
        _check(tuple(t.shape) == expect, f"{what} BlockwiseQuantization.{field} tensor {i} ({t.name!r}) has shape "
                                         f"{list(t.shape)}, expected {list(expect)} (rows, columns / block_size "
                                         f"{q.block_size})")
        return t

    s = named("scales", q.scales_tensor)
    _check(s.type_name == "FLOAT16", f"{what} BlockwiseQuantization.scales tensor {s.index} ({s.name!r}) has type "
                                     f"{s.type_name}, expected FLOAT16 (the official kernels read float16 scales)")
    values = np.asarray(s.data).reshape(expect)
    bad = ~np.isfinite(values) | (values < 0)
    _check(not bad.any(), f"{what} BlockwiseQuantization.scales tensor {s.index} ({s.name!r}) holds "
                          f"{values[bad][0] if bad.any() else 0}: scales must be finite and non-negative")
    if q.zero_points_tensor != -1:
        z = named("zero_points", q.zero_points_tensor)
        _check(z.dtype.kind in "iu" and not z.packed_bits and z.type_name in ZERO_POINT_RANGES,
               f"{what} BlockwiseQuantization.zero_points tensor {z.index} ({z.name!r}) has type {z.type_name}, "
               f"expected an integer type")
        _check(not np.asarray(z.data).any(), f"{what} BlockwiseQuantization.zero_points tensor {z.index} "
                                             f"({z.name!r}) holds nonzero values: the official kernels ignore "
                                             f"blockwise zero points, so only zeros (or -1: none) are accepted")
    return replace(spec, quantization=replace(q, block_scales=values))
