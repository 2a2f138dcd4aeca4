"""CompiledModel: the LiteRT 2 API (ai_edge_litert.compiled_model) on lite-numba's runtime.

A CompiledModel loads a model, prepares and compiles every signature's subgraph at creation (from the on-disk cache
when warm), and runs a signature on TensorBuffers: `run_by_index(i, inputs, outputs)` / `run_by_name(key, {name:
buffer}, {name: buffer})`. Names, arguments, return values, detail dicts, exception types and the stable part of the
error texts are the official ones ("CompiledModel error: code=6, message=Signature not found: nope"); a model
without signatures has the official placeholder signature "<placeholder signature>" (also reachable as "").

Zero copy: a run hands the buffers' arrays to the compiled graph (lite_numba.runtime.io_binding): the runners read
the inputs in place and write the outputs in place. Running again with the same buffers re-binds nothing. A buffer
is copied instead (into or out of the arena, once per run) when the graph is not compiled code only (host or
dynamic nodes, LITE_NUMBA_EXECUTOR=python), when a tensor is both an input and an output or is not planned in the
arena, when an output buffer's memory overlaps an input's, and for the subgraphs control flow calls.

Where lite-numba differs on purpose (README, "Switching"): a buffer whose dtype differs from its tensor's raises
(officially its bytes are reinterpreted); a create_from_host_memory buffer (1-D, officially refused for an input of
another rank) runs any tensor of its element count; get_signature_by_index out of range raises RuntimeError
(officially the process aborts); from_buffer takes any bytes-like object and from_file any path-like (officially
bytes and str only); is_fully_accelerated() is True when the whole model runs as compiled code on the CPU with the
default kernel mode, False when a GPU or NPU was asked for (the model runs on the CPU); a strict resize to the
current shape of an input without shape_signature is a no-op (officially refused).
"""

from __future__ import annotations

import contextlib
import math
import operator
import os
from typing import Any, List, Optional, Sequence

import numpy as np

from ..format.model import ModelError, load_model, model_buffer, read_model_bytes
from ..runtime.io_binding import IOBinding
from ..runtime.model_runtime import ModelRuntime
from ..runtime.resolver import default_op_resolver, resolve_model
from .litert_options import (
    ClosedOnExit,
    CpuKernelMode,
    CpuOptions,
    Environment,
    EnvironmentOptions,
    GpuOptions,
    HardwareAccelerator,
    IntelOpenVinoOptions,
    Options,
    QualcommOptions,
    Settings,
    model_settings,
    resolve_options,
)
from .tensor_buffer import HostMemory, TensorBuffer, aligned_zeros, dtype_name

__all__ = ["CompiledModel", "CpuOptions", "CpuKernelMode", "GpuOptions", "QualcommOptions", "IntelOpenVinoOptions",
           "Options", "HardwareAccelerator", "Environment", "EnvironmentOptions", "TensorBuffer"]

PLACEHOLDER = "<placeholder signature>"
_CAPSULE = operator.attrgetter("capsule")  # (TensorBuffer.capsule: ValueError once destroyed, as officially)
HOST_MEMORY = 1  # the official TensorBuffer type code of host memory, the only `supported_types` entry


def _error(code: int, *lines: str) -> RuntimeError:
    """The official error shape: "CompiledModel error: code=N, message=first\\n└ second ..."."""
    return RuntimeError(f"CompiledModel error: code={code}, message=" + "\n└ ".join(lines))


def _run_error(*lines: str) -> RuntimeError:
    return _error(3, "Failed to invoke the compiled model", *lines)


@contextlib.contextmanager
def environ_override(name: str, value: str | None):
    """os.environ[name] = value for the block, restored (or removed) afterwards; None leaves the variable alone."""
    if value is None:
        yield
        return
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _isa(level: str | None):
    """The kernels' instruction-set path while a REFERENCE-mode model prepares (kernels read LITE_NUMBA_ISA at
    prepare time; the variable is restored afterwards)."""
    return environ_override("LITE_NUMBA_ISA", level)


def _called_subgraphs(plan) -> set[int]:
    """Subgraphs that control flow (WHILE, IF, CALL_ONCE, ...) runs: never bound (their storage is shared)."""
    out = set()
    for sg in plan.subgraphs:
        for node in sg.nodes:
            for key, value in node.options.items():
                if key.endswith("subgraph_index") and isinstance(value, int):
                    out.add(value)
    return out


class _Signature:
    __slots__ = ("key", "subgraph", "inputs", "outputs", "in_tensors", "out_tensors", "bindable")

    def __init__(self, key: str, sg, subgraph: int, inputs: dict[str, int], outputs: dict[str, int], bindable: bool):
        self.key, self.subgraph, self.bindable = key, subgraph, bindable
        # in the order of the subgraph's inputs and outputs, as the official runtime lists them (not the file's)
        order = lambda names, io: sorted(names, key=lambda n: io.index(names[n]) if names[n] in io else len(io))  # noqa: E731
        self.inputs = order(inputs, sg.inputs)
        self.outputs = order(outputs, sg.outputs)
        self.in_tensors = [inputs[n] for n in self.inputs]
        self.out_tensors = [outputs[n] for n in self.outputs]


class _RunState:
    """A prepared run of a signature on one set of buffers: where each input and output lives (the binding's layout,
    or a copy into or out of the arena per run) and the invoke."""

    __slots__ = ("ins", "outs", "graph", "arena", "binding", "layout", "copy_in", "copy_out", "copy_out_moved",
                 "copy_dynamic", "invoke", "simple")

    def __init__(self, ins: list, outs: list):
        self.ins, self.outs = ins, outs
        self.graph = self.arena = self.binding = self.layout = self.invoke = None
        self.copy_in: list = []  # (arena view, input array) copied before each run
        self.copy_out: list = []  # (output array, arena view) copied after each run
        self.copy_out_moved: list = []  # (tensor, buffer array, its bytes) of those, if the run re-planned
        self.copy_dynamic: list = []  # (tensor, output array, its bytes) of outputs sized at run time
        self.simple = False  # nothing to copy: a run is the invoke


class ModelSession:
    """One loaded and compiled model (what CompiledModel holds; the official one holds a native wrapper)."""

    def __init__(self, data, settings: Settings, source: str):
        try:
            self.plan = load_model(data)
        except ModelError as e:
            raise RuntimeError(f"Failed to load model from {source}\n└ Invalid flatbuffer: {e}") from None
        self.data = data  # (the model's constant tensors are views of it)
        self.settings = settings
        self.isa = "portable" if settings.reference else None
        try:
            kernels = resolve_model(default_op_resolver(), self.plan)
        except ValueError as e:
            raise RuntimeError(f"Failed to build the compiled model\n└ {e}") from None
        self.rt = ModelRuntime(self.plan, kernels, num_threads=settings.num_threads)
        called = _called_subgraphs(self.plan)
        if self.plan.signatures:
            subgraphs = self.plan.subgraphs
            self.sigs = [_Signature(s.key, subgraphs[s.subgraph_index], s.subgraph_index, s.inputs, s.outputs,
                                    s.subgraph_index not in called) for s in self.plan.signatures]
        else:
            sg = self.plan.subgraphs[0]
            names = lambda idx: {sg.tensors[i].name: i for i in idx}  # noqa: E731
            self.sigs = [_Signature(PLACEHOLDER, sg, 0, names(sg.inputs), names(sg.outputs), 0 not in called)]
        # "" names the first signature, as officially
        self.keys = {"": 0, **{s.key: k for k, s in reversed(list(enumerate(self.sigs)))}}
        self.last: list[_RunState | None] = [None] * len(self.sigs)  # each signature's last run
        self.cache: list[dict[tuple, _RunState]] = [{} for _ in self.sigs]  # prepared runs by their buffers
        self.bindings: dict[int, IOBinding | None] = {}  # per subgraph (lite_numba.runtime.io_binding)
        self.slot = [None]  # one run at a time (see run)
        with _isa(self.isa):
            for k in dict.fromkeys(s.subgraph for s in self.sigs):
                self.rt.allocate(k)

    # --- signatures -------------------------------------------------------------------------------------------
    def signature(self, index) -> _Signature:
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise TypeError(f"signature_index must be an int, got {type(index).__name__} {index!r}")
        if not 0 <= index < len(self.sigs):
            raise _error(1000, "Signature index is out of range of signature keys")
        return self.sigs[index]

    def index_of(self, key) -> int:
        if not isinstance(key, str):
            raise TypeError(f"signature_key must be a str, got {type(key).__name__} {key!r}")
        return self.keys.get(key, -1)

    def by_key(self, key) -> _Signature:
        k = self.index_of(key)
        if k < 0:
            raise _error(6, f"Signature not found: {key}")
        return self.sigs[k]

    # --- tensors ----------------------------------------------------------------------------------------------
    def allocate(self, sig: _Signature) -> None:
        """Prepare the signature's subgraph for its current input shapes (the official "Failed to allocate")."""
        if self.rt.graph(sig.subgraph).ready:
            return
        try:
            with _isa(self.isa):
                self.rt.allocate(sig.subgraph)
        except (RuntimeError, ValueError, MemoryError) as e:
            raise _error(3, "Failed to allocate tensors", str(e)) from None

    def details(self, sig: _Signature, outputs: bool) -> dict[str, dict[str, Any]]:
        if outputs:
            self.allocate(sig)
        names, tensors = (sig.outputs, sig.out_tensors) if outputs else (sig.inputs, sig.in_tensors)
        out = {}
        for name, i in zip(names, tensors):
            t = self.rt.tensor(i, sig.subgraph)
            out[name] = {"name": t.spec.name, "index": i, "dtype": dtype_name(t.dtype), "shape": list(t.shape)}
        return out

    def position(self, sig: _Signature, index, outputs: bool) -> int:
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise TypeError(f"{'output' if outputs else 'input'}_index must be an int, got {type(index).__name__}")
        n = len(sig.outputs if outputs else sig.inputs)
        if not 0 <= index < n:
            raise _error(1000, f"{'Output' if outputs else 'Input'} index out of range")
        return int(index)

    def requirements(self, signature_index, index, outputs: bool) -> dict[str, Any]:
        if not isinstance(signature_index, (int, np.integer)) or not 0 <= signature_index < len(self.sigs):
            raise _error(1000, "Signature index is out of range of signature keys",
                         f"{'Output' if outputs else 'Input'} index out of range")
        sig = self.sigs[signature_index]
        i = (sig.out_tensors if outputs else sig.in_tensors)[self.position(sig, index, outputs)]
        t = self.rt.tensor(i, sig.subgraph)
        return {"buffer_size": math.prod(t.shape) * t.dtype.itemsize, "supported_types": [HOST_MEMORY]}

    def new_buffer(self, sig: _Signature, name: str, i: int, environment) -> TensorBuffer:
        t = self.rt.tensor(i, sig.subgraph)
        if t.dtype.kind not in "biufc":
            raise _error(3, f"Tensor '{name}' is a {t.spec.type_name} tensor: TensorBuffers hold numeric tensors only")
        return TensorBuffer(HostMemory(aligned_zeros(math.prod(t.shape), t.dtype), t.shape, False), environment)

    def buffers(self, sig: _Signature, outputs: bool, environment) -> list[TensorBuffer]:
        if outputs:
            self.allocate(sig)
        names, tensors = (sig.outputs, sig.out_tensors) if outputs else (sig.inputs, sig.in_tensors)
        return [self.new_buffer(sig, n, i, environment) for n, i in zip(names, tensors)]

    def buffer_by_name(self, key, name, outputs: bool, environment) -> TensorBuffer:
        if not isinstance(key, str) or self.index_of(key) < 0:
            raise _error(6, f"Signature not found: {key}")
        sig = self.by_key(key)
        names = sig.outputs if outputs else sig.inputs
        if name not in names:
            raise _error(6, f"{'Output' if outputs else 'Input'} tensor not found: {name}")
        if outputs:
            self.allocate(sig)
        return self.new_buffer(sig, name, (sig.out_tensors if outputs else sig.in_tensors)[names.index(name)],
                               environment)

    def resize(self, signature_index, input_index, dims, strict: bool) -> None:
        if not isinstance(signature_index, (int, np.integer)) or not 0 <= signature_index < len(self.sigs):
            raise _error(1000, "Signature index is out of range of signature keys", "Input index out of range")
        sig = self.sigs[signature_index]
        i = sig.in_tensors[self.position(sig, input_index, False)]
        if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in dims):
            raise TypeError(f"dims must be a list of ints, got {dims!r}")
        dims = [int(d) for d in dims]
        if any(d <= 0 for d in dims):
            raise _error(1, "Dimensions must be positive.")
        t = self.rt.tensor(i, sig.subgraph)
        if strict:
            if len(dims) != len(t.shape):
                raise _error(1, "New shape rank does not match current shape rank.",
                             "New shape is not compatible with current shape.")
            if any(s != -1 and d != s for d, s in zip(dims, t.spec.shape_signature)):
                raise _error(1, "New shape is not compatible with current shape.")
        if tuple(dims) == t.shape:
            return
        self.rt.resize_input(i, dims, False, sig.subgraph)
        try:  # as officially, the model is prepared for the new shape now; a failure shows when it is used
            self.allocate(sig)
        except RuntimeError:
            pass

    def fully_accelerated(self) -> bool:
        s = self.settings
        if s.accelerators != int(HardwareAccelerator.CPU) or not s.delegate:
            return False
        for sig in self.sigs:
            try:
                self.allocate(sig)
            except RuntimeError:
                return False
            if self.rt.graph(sig.subgraph).native_program() is None:
                return False
        return True

    # --- running ----------------------------------------------------------------------------------------------
    RUN_CACHE = 16  # prepared runs kept per signature (programs alternate between a few sets of buffers)

    def run(self, index: int, ins: list, outs: list) -> None:
        """Run signature `index` on HostMemory inputs (None: leave the input as it is) and outputs. The same buffers
        as a recent run reuse that run's preparation (the common case: one call of the compiled graph)."""
        slot = self.slot
        try:
            slot.pop()
        except IndexError:
            raise RuntimeError("CompiledModel was run while another thread is running it: a CompiledModel is not "
                               "thread-safe; use one per thread") from None
        try:
            st = self.last[index]
            if st is None or st.ins != ins or st.outs != outs:
                st = self.cache[index].get((*ins, *outs))
            if st is not None and st.graph.ready and st.graph.arena is st.arena:
                if st.layout is not None and st.binding.current is not st.layout:
                    st.binding.use(st.layout)
                if st.simple:
                    st.invoke()
                else:
                    self._run_copying(st)
                self.last[index] = st
                return
            self._run_copying(self._prepare(index, ins, outs))
        finally:
            slot.append(None)

    def last_inputs(self, index: int, ins: list) -> list:
        """`ins` with each None replaced by the buffer the signature's last run read there (run_by_name's inputs
        left out, as officially)."""
        st = self.last[index]
        if st is None:
            return ins
        return [st.ins[j] if mem is None else mem for j, mem in enumerate(ins)]

    def _run_copying(self, st: _RunState) -> None:
        for dst, src in st.copy_in:
            dst[...] = src
        st.invoke()
        if st.graph.arena is st.arena:
            for dst, src in st.copy_out:
                dst[...] = src
        else:  # re-planned while running (speculation on the values dynamic nodes read): the outputs moved with it
            self._copy_dynamic(st, st.copy_out_moved)
        if st.copy_dynamic:
            self._copy_dynamic(st, st.copy_dynamic)

    def _prepare(self, index: int, ins: list, outs: list) -> _RunState:
        """Check the buffers against the signature (auto-resizing inputs as officially), allocate, and decide where
        every input and output lives for runs on these buffers: bound in place (io_binding) or copied."""
        sig = self.sigs[index]
        rt, k = self.rt, sig.subgraph
        for name, i, mem in zip(sig.inputs, sig.in_tensors, ins):
            if mem is None:
                continue
            mem.live("RunByIndex")
            t = rt.tensor(i, k)
            if mem.dtype != t.dtype:
                raise _run_error(f"Failed to register input tensor buffer: buffer '{name}' holds "
                                 f"{dtype_name(mem.dtype)} ({mem.dtype}), the input tensor is {dtype_name(t.dtype)} "
                                 f"({t.dtype})")
            if mem.shape != t.shape and not (mem.flat and mem.size == math.prod(t.shape)):
                rt.resize_input(i, self._auto_shape(name, t, mem.shape), False, k)
        try:
            self.allocate(sig)
        except RuntimeError as e:
            raise _run_error(str(e).split("message=", 1)[-1]) from None
        g = rt.graph(k)
        for name, o, mem in zip(sig.outputs, sig.out_tensors, outs):
            mem.live("RunByIndex")
            t = g.tensors[o]
            if mem.dtype != t.dtype:
                raise _run_error(f"Failed to register output tensor buffer: buffer '{name}' holds "
                                 f"{dtype_name(mem.dtype)} ({mem.dtype}), the output tensor is {dtype_name(t.dtype)} "
                                 f"({t.dtype})")
            if o in g.fast_views and mem.nbytes < t.nbytes:
                raise _run_error(f"Failed to allocate tensors: output buffer '{name}' holds {mem.nbytes} bytes, the "
                                 f"output needs {t.nbytes}")
        binding = self.bindings.get(k)
        if binding is None or binding.rt is not g or not binding.valid():
            binding = self.bindings[k] = IOBinding(g) if sig.bindable else None
        st = _RunState(list(ins), list(outs))
        targets: dict[int, np.ndarray | None] = {}
        claimed = []  # address ranges the inputs are read from (outputs must not overlap them)
        for i, mem in zip(sig.in_tensors, ins):
            if mem is None:
                continue
            view = g.array(i)
            src = mem.array[:view.size].reshape(view.shape)
            if binding is not None and binding.bindable(i):
                targets[i] = src
            else:
                st.copy_in.append((view, src))
            lo = src.__array_interface__["data"][0]
            claimed.append((lo, lo + src.nbytes))
        for o, mem in zip(sig.out_tensors, outs):
            if o not in g.fast_views:  # (its size is known after the run)
                st.copy_dynamic.append((o, mem.array, mem.raw))
                continue
            view = g.array(o)
            dst = mem.array[:view.size].reshape(view.shape)
            lo = dst.__array_interface__["data"][0]
            hi = lo + dst.nbytes
            if binding is not None and binding.bindable(o) and not any(lo < b and a < hi for a, b in claimed):
                targets[o] = dst
                claimed.append((lo, hi))
            else:
                if binding is not None and binding.bindable(o):
                    targets[o] = None  # (in the arena for this run: unbound if an earlier run bound it)
                st.copy_out.append((dst, view))
                st.copy_out_moved.append((o, mem.array, mem.raw))
        st.binding = binding
        if binding is not None:
            st.layout = binding.layout(targets)
            binding.use(st.layout)
        st.graph, st.arena = g, g.arena
        st.invoke = g.invoke
        if self.isa is not None and g.native_program() is None:  # (dynamic nodes prepare while running)
            def invoke(run=g.invoke, isa=self.isa):
                with _isa(isa):
                    run()
            st.invoke = invoke
        st.simple = not (st.copy_in or st.copy_out or st.copy_dynamic)
        cache = self.cache[index]
        if len(cache) >= self.RUN_CACHE or any(c.arena is not g.arena for c in cache.values()):
            cache.clear()
        cache[(*ins, *outs)] = st
        self.last[index] = st
        return st

    def _copy_dynamic(self, st: _RunState, copies: list) -> None:
        """Outputs whose storage is known after the run: their bytes, checked against the buffer's size."""
        g = st.graph
        for o, arr, raw in copies:
            src = g.array(o)
            if src.nbytes > arr.nbytes:
                raise _run_error(f"Failed to allocate tensors: output buffer holds {arr.nbytes} bytes, output "
                                 f"{g.tensors[o].name!r} came out {src.dtype}{list(src.shape)} ({src.nbytes} bytes)")
            raw[:src.nbytes] = np.ascontiguousarray(src).reshape(-1).view(np.uint8)

    def _auto_shape(self, name: str, t, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The official auto-resize of an input to its buffer's shape: only along the -1 dimensions of its
        shape_signature (the official texts)."""
        sig = t.spec.shape_signature
        prefix = f"Failed to register input tensor buffer: Cannot auto-resize tensor {name}: "
        if -1 not in sig:
            raise _run_error(prefix + "no dims_signature exists")
        if len(shape) != len(sig):
            raise _run_error(prefix + f"rank mismatch (current: {len(sig)}, new: {len(shape)})")
        for d, (s, n) in enumerate(zip(sig, shape)):
            if s != -1 and s != n:
                raise _run_error(prefix + f"static dimension mismatch at index {d} (current: {s}, new: {n})")
        return tuple(shape)


def _closed(method: str) -> AttributeError:
    return AttributeError(f"'NoneType' object has no attribute '{method}' (the CompiledModel was closed)")


def _load(model_path) -> Any:
    try:
        return read_model_bytes(model_path)
    except (OSError, ValueError) as e:
        raise RuntimeError(f"Failed to load model from file\n└ Failed to build flatbuffer model: could not open "
                           f"'{os.fspath(model_path)}': {getattr(e, 'strerror', None) or e}") from None


class CompiledModel(ClosedOnExit):
    """A model compiled for the CPU, run on TensorBuffers (the official ai_edge_litert.compiled_model API; see the
    module docstring for what differs). Not thread-safe: a run while another thread runs it raises RuntimeError."""

    def __init__(self, c_model_ptr, environment: Environment):
        self._model = c_model_ptr
        self._environment = environment

    def close(self) -> None:
        """Let go of the model; calls on it afterwards raise AttributeError, as officially."""
        self._model = None

    @classmethod
    def _create(cls, load, source: str, hardware_accel, environment, options) -> CompiledModel:
        env = environment or Environment.create()
        env.capsule  # noqa: B018  (ValueError for a closed environment, as officially)
        settings = model_settings(resolve_options(options, hardware_accel))
        return cls(ModelSession(load(), settings, source), env)

    @classmethod
    def from_file(cls, model_path: str, hardware_accel: Optional[HardwareAccelerator] = None,
                  environment: Optional[Environment] = None, options: Optional[Options] = None) -> CompiledModel:
        """Load and compile a .tflite file (memory-mapped). `options` or the `hardware_accel` shortcut (default:
        CPU, one thread), as officially."""
        if not isinstance(model_path, (str, os.PathLike)):
            raise TypeError(f"model_path must be a str or a path, got {type(model_path).__name__}")
        return cls._create(lambda: _load(model_path), "file", hardware_accel, environment, options)

    @classmethod
    def from_buffer(cls, model_data: bytes, hardware_accel: Optional[HardwareAccelerator] = None,
                    environment: Optional[Environment] = None, options: Optional[Options] = None) -> CompiledModel:
        """Load and compile a model held in memory (bytes, a read-only mmap, or any bytes-like object, copied)."""
        data = model_buffer(model_data, "model_data")  # (bytes, a read-only mmap: not copied)
        return cls._create(lambda: data, "buffer", hardware_accel, environment, options)

    @property
    def environment(self) -> Environment:
        return self._environment

    def _session(self, method: str) -> ModelSession:
        m = self._model
        if m is None:
            raise _closed(method)
        return m

    def get_signature_list(self) -> dict[str, dict[str, List[str]]]:
        """{signature key: {"inputs": [names], "outputs": [names]}}, in the model's order."""
        return {s.key: {"inputs": list(s.inputs), "outputs": list(s.outputs)}
                for s in self._session("GetSignatureList").sigs}

    def get_signature_by_index(self, index: int) -> dict[str, Any]:
        """{"key", "inputs", "outputs"} of signature `index`."""
        s = self._session("GetSignatureByIndex").signature(index)
        return {"key": s.key, "inputs": list(s.inputs), "outputs": list(s.outputs)}

    def get_num_signatures(self) -> int:
        return len(self._session("GetNumSignatures").sigs)

    def get_signature_index(self, key: str) -> int:
        """The index of signature `key`, or -1."""
        return self._session("GetSignatureIndex").index_of(key)

    def get_input_tensor_details(self, signature_key: str) -> dict[str, Any]:
        """{input name: {"name", "index", "dtype", "shape"}} with the current shapes."""
        m = self._session("GetInputTensorDetails")
        return m.details(m.by_key(signature_key), False)

    def get_output_tensor_details(self, signature_key: str) -> dict[str, Any]:
        """{output name: {"name", "index", "dtype", "shape"}} for the current input shapes."""
        m = self._session("GetOutputTensorDetails")
        return m.details(m.by_key(signature_key), True)

    def get_input_buffer_requirements(self, input_index: int, signature_index: int = 0) -> dict[str, Any]:
        """{"buffer_size": bytes, "supported_types": [1]} (host memory) for an input."""
        return self._session("GetInputBufferRequirements").requirements(signature_index, input_index, False)

    def get_output_buffer_requirements(self, output_index: int, signature_index: int = 0) -> dict[str, Any]:
        """{"buffer_size": bytes, "supported_types": [1]} (host memory) for an output."""
        return self._session("GetOutputBufferRequirements").requirements(signature_index, output_index, True)

    def is_fully_accelerated(self) -> bool:
        """True when the whole model runs as compiled code on the CPU with the default (XNNPACK) kernel mode;
        False with the REFERENCE or BUILTIN kernel mode (as officially) and when a GPU or NPU was asked for (the
        model runs on the CPU)."""
        return self._session("IsFullyAccelerated").fully_accelerated()

    def create_input_buffer_by_name(self, signature_key: str, input_name: str) -> TensorBuffer:
        return self._session("CreateInputBufferByName").buffer_by_name(signature_key, input_name, False,
                                                                       self._environment)

    def create_output_buffer_by_name(self, signature_key: str, output_name: str) -> TensorBuffer:
        return self._session("CreateOutputBufferByName").buffer_by_name(signature_key, output_name, True,
                                                                        self._environment)

    def create_input_buffers(self, signature_index: int) -> List[TensorBuffer]:
        """A zeroed, 64-byte aligned buffer per input of the signature, of its current shape."""
        m = self._session("CreateInputBuffers")
        return m.buffers(m.signature(signature_index), False, self._environment)

    def create_output_buffers(self, signature_index: int) -> List[TensorBuffer]:
        """A zeroed, 64-byte aligned buffer per output of the signature, for the current input shapes."""
        m = self._session("CreateOutputBuffers")
        return m.buffers(m.signature(signature_index), True, self._environment)

    def resize_input_tensor(self, input_index: int, dims: Sequence[int], signature_index: int = 0,
                            strict: bool = True) -> None:
        """Give an input new dimensions; `strict` allows only the -1 dimensions of its shape_signature to change."""
        self._session("ResizeInputTensor" if strict else "ResizeInputTensorNonStrict").resize(
            signature_index, input_index, list(dims), strict)

    def resize_input_tensor_by_name(self, signature_key: str, input_name: str, dims: Sequence[int],
                                    strict: bool = True) -> None:
        """resize_input_tensor by signature key and input name (ValueError for unknown ones, as officially)."""
        signature_index = self.get_signature_index(signature_key)
        signature_list = self.get_signature_list()
        if signature_index < 0 or signature_key not in signature_list:
            raise ValueError(f"Unknown signature: {signature_key}")
        input_names = signature_list[signature_key]["inputs"]
        if input_name not in input_names:
            raise ValueError(f"Unknown input '{input_name}' for signature '{signature_key}'")
        self.resize_input_tensor(input_names.index(input_name), dims, signature_index, strict)

    def run_by_name(self, signature_key: str, input_map: dict[str, TensorBuffer],
                    output_map: dict[str, TensorBuffer]) -> None:
        """Run a signature: inputs and outputs by name. As officially, names the signature lacks are ignored and an
        input left out keeps what the previous run read (the same buffer; zeros before any run)."""
        m = self._model
        if m is None:
            raise _closed("RunByName")
        if not isinstance(signature_key, str):
            raise TypeError(f"signature_key must be a str, got {type(signature_key).__name__}")
        index = m.keys.get(signature_key, -1)
        if index < 0:
            raise _error(6, "Failed to get signature_index")
        sig = m.sigs[index]
        try:
            outs = [output_map[name].capsule for name in sig.outputs]
        except KeyError:
            raise _error(6, "The given map is missing some output TensorBuffers") from None
        ins = [None if (b := input_map.get(name)) is None else b.capsule for name in sig.inputs]
        if len(input_map) != len(ins) or len(output_map) != len(outs) or None in ins:
            for buffer in (*input_map.values(), *output_map.values()):
                buffer.capsule  # noqa: B018  (ValueError for a destroyed buffer under any name, as officially)
            ins = m.last_inputs(index, ins)
        m.run(index, ins, outs)

    def run_by_index(self, signature_index: int, input_buffers: List[TensorBuffer],
                     output_buffers: List[TensorBuffer]) -> None:
        """Run signature `signature_index` on one buffer per input and per output, in the signature's order."""
        ins = list(map(_CAPSULE, input_buffers))
        outs = list(map(_CAPSULE, output_buffers))
        m = self._model
        if m is None:
            raise _closed("RunByIndex")
        sigs = m.sigs
        if type(signature_index) is not int or not 0 <= signature_index < len(sigs):
            if not isinstance(signature_index, (int, np.integer)) or isinstance(signature_index, bool):
                raise TypeError(f"signature_index must be an int, got {type(signature_index).__name__}")
            if not 0 <= signature_index < len(sigs):
                raise _run_error("Signature index is out of range of signature keys")
            signature_index = int(signature_index)
        sig = sigs[signature_index]
        if len(ins) != len(sig.inputs):
            raise _run_error(f"Input buffer size mismatch: number of inputs:{len(sig.inputs)} vs buffers:{len(ins)}")
        if len(outs) != len(sig.outputs):
            raise _run_error(f"Output buffer size mismatch: number of outputs:{len(sig.outputs)} vs buffers:"
                             f"{len(outs)}")
        m.run(signature_index, ins, outs)
