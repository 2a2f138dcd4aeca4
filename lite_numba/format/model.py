"""Loader: .tflite bytes or a memory-mapped file -> validated ModelPlan.

Everything read from the file is checked before use: the identifier, the schema version, every vector length against
the file size, every tensor/buffer/opcode/subgraph index, buffer ranges (also buffers stored by offset/size after
the flatbuffer), shapes and dtypes. Anything wrong raises ValueError naming it; the flatbuffer accessors are pure
Python, so a hostile file cannot crash the process, and lengths are checked before any loop or allocation.
"""

from __future__ import annotations

import mmap
import os

import flatbuffers
import numpy as np
import tflite

from .builtin_options import parse_options
from .plan import NO_QUANTIZATION, ModelPlan, Node, Quantization, Signature, SubgraphPlan, TensorSpec
from .schema import BUILTIN_NAMES, TENSOR_TYPES

# Declared shapes beyond 256 TiB are corruption (no machine holds them) and are refused here; smaller ones that do
# not fit this machine are refused by allocate_tensors() with arena.ArenaLimitError, a MemoryError.
MAX_TENSOR_BYTES = 1 << 48
# zero points a tensor of each type can hold (the official runtime runs others and returns garbage)
ZERO_POINT_RANGES = {"INT8": (-128, 127), "UINT8": (0, 255), "INT16": (-32768, 32767), "INT4": (-8, 7),
                     "UINT16": (0, 65535), "INT32": (-(2**31), 2**31 - 1)}
CUSTOM_CODE = 32


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


def read_model_bytes(path: str | os.PathLike):
    """Memory-map a model file (read-only); returns a buffer usable as zero-copy bytes."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise ModelError(f"Invalid model: file {os.fspath(path)!r} is empty")
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def load_model(data) -> ModelPlan:
    """Parse and validate a .tflite flatbuffer (bytes, bytearray, memoryview or mmap)."""
    buf = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) else data
    try:
        return _Loader(buf).load()
    except ModelError:
        raise
    except (ValueError, IndexError, TypeError, OverflowError, UnicodeDecodeError, AttributeError, KeyError) as e:
        raise ModelError(f"Invalid model: malformed flatbuffer ({type(e).__name__}: {e})") from None
    except Exception as e:  # struct.error and other accessor failures on corrupted offsets
        raise ModelError(f"Invalid model: malformed flatbuffer ({type(e).__name__}: {e})") from None


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

    def int_vec(self, obj, field: str) -> np.ndarray:
        n = self.vec_len(obj, field)
        if n == 0:
            return np.zeros(0, np.int64)
        return np.asarray(getattr(obj, field + "AsNumpy")(), dtype=np.int64)

    def load(self) -> ModelPlan:
        _check(self.n >= 8, f"file is {self.n} bytes, too short for a flatbuffer")
        _check(bytes(self.buf[4:8]) == b"TFL3", f"file identifier is {bytes(self.buf[4:8])!r}, expected b'TFL3'")
        root = int.from_bytes(bytes(self.buf[0:4]), "little")
        _check(root + 4 <= self.n, "root table offset is outside the file")
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
                return out

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

    def read_quantization(self, t, what: str, type_name: str, shape: tuple[int, ...]) -> Quantization:
        """The tensor's affine quantization, checked as the official InterpreterBuilder does (quantized_dimension
        within the rank, one scale or one per channel) and beyond it: finite, non-negative scales and zero points
        the type can hold."""
        q = t.Quantization()
        if q is None:
            return NO_QUANTIZATION
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

    def read_subgraph(self, sg, si: int, nsub: int) -> SubgraphPlan:
        ntensors = self.vec_len(sg, "Tensors")
        tensors = []
        for ti in range(ntensors):
            t = sg.Tensors(ti)
            name = (t.Name() or b"").decode("utf-8", "replace")
            ttype = t.Type()
            _check(ttype in TENSOR_TYPES, f"tensor {ti} ({name!r}) has unknown type {ttype}")
            dtype, type_name = TENSOR_TYPES[ttype]
            shape = tuple(int(d) for d in self.int_vec(t, "Shape"))
            _check(all(d >= 0 for d in shape), f"tensor {ti} ({name!r}) has negative dimension in shape {shape}")
            sig = tuple(int(d) for d in self.int_vec(t, "ShapeSignature")) or shape
            _check(len(sig) == len(shape), f"tensor {ti} ({name!r}) shape_signature rank differs from shape")
            nbytes = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
            _check(nbytes <= MAX_TENSOR_BYTES, f"tensor {ti} ({name!r}) declares {nbytes} bytes (shape "
                                               f"{list(shape)} of {type_name}), more than any machine holds")
            bi = t.Buffer()
            _check(0 <= bi < max(len(self.buffers), 1), f"tensor {ti} ({name!r}) buffer index {bi} out of range")
            raw = self.buffers[bi] if bi < len(self.buffers) else None
            data = None
            sparsity = self.read_sparsity(t)
            if raw is not None and raw.size and type_name not in ("STRING", "RESOURCE", "VARIANT"):
                if sparsity is not None:  # sparse constant: the buffer holds only the stored values (DENSIFY)
                    _check(raw.size % dtype.itemsize == 0, f"tensor {ti} ({name!r}) sparse buffer size {raw.size}")
                    data = (raw.copy() if raw.ctypes.data % dtype.alignment else raw).view(dtype)
                elif type_name == "INT4":
                    expect = (int(np.prod(shape)) + 1) // 2
                    _check(raw.size == expect, f"tensor {ti} ({name!r}) INT4 buffer size {raw.size} != {expect}")
                    data = _unpack_int4(raw, shape)
                else:
                    _check(raw.size == nbytes, f"tensor {ti} ({name!r}) buffer has {raw.size} bytes, "
                                               f"shape {list(shape)} of {type_name} needs {nbytes}")
                    if raw.ctypes.data % dtype.alignment:
                        raw = raw.copy()
                    data = raw.view(dtype).reshape(shape)
            _check(data is None or not t.IsVariable(), f"tensor {ti} ({name!r}) is a variable tensor with a buffer "
                                                       f"(the official runtime does not support it either)")
            tensors.append(TensorSpec(
                index=ti, name=name, dtype=dtype, type_name=type_name, shape=shape, shape_signature=sig,
                quantization=self.read_quantization(t, f"tensor {ti} ({name!r})", type_name, shape), data=data,
                is_variable=bool(t.IsVariable()),
                sparsity=sparsity,
            ))

        def indices(obj, field: str, what: str, allow_optional: bool) -> tuple[int, ...]:
            vals = tuple(int(v) for v in self.int_vec(obj, field))
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
            ins = indices(op, "Inputs", f"{where} input", True)
            outs = indices(op, "Outputs", f"{where} output", True)
            inter = indices(op, "Intermediates", f"{where} intermediate", True)
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
        sname = sg.Name()
        return SubgraphPlan(
            name=sname.decode("utf-8", "replace") if sname else "",
            tensors=tuple(tensors), inputs=inputs, outputs=outputs, nodes=tuple(nodes),
        )


SUBGRAPH_KEYS = ("subgraph_index", "cond_subgraph_index", "body_subgraph_index", "then_subgraph_index",
                 "else_subgraph_index", "init_subgraph_index", "decomposition_subgraph_index")


def _unsourced(t, i: int, ready) -> bool:
    """Tensor t (index i) has no value yet: not in `ready`, no data, not a variable, not empty (string constants
    have no data here; an empty tensor needs none, the official check is bytes > 0)."""
    return (t is not None and i not in ready and t.data is None and not t.is_variable and 0 not in t.shape
            and t.type_name not in ("STRING", "RESOURCE", "VARIANT"))


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


def _unpack_int4(raw: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """INT4 constants are packed two per byte, low nibble first; widen to int8."""
    lo = (raw.astype(np.int8) << 4) >> 4
    hi = raw.astype(np.int8) >> 4
    out = np.empty(raw.size * 2, np.int8)
    out[0::2], out[1::2] = lo, hi
    return out[: int(np.prod(shape))].reshape(shape)
