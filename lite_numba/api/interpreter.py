"""Interpreter and SignatureRunner with the official Python API (ai_edge_litert.interpreter)."""

from __future__ import annotations

import enum
import importlib
import os
import sys
from typing import Any

import numpy as np

from ..format.model import ModelError, load_model, model_buffer, read_model_bytes, unpack_bits
from ..format.plan import ModelPlan
from ..ops import CustomOp, forwarded
from ..runtime.arena import in_arena
from ..runtime.model_runtime import ModelRuntime, check_int
from ..runtime.profile_report import Profile
from ..runtime.resolver import MutableOpResolver, OpResolver, default_op_resolver, resolve_model
from ..runtime.signature_io import CallPlan
from .delegates import Delegate, DelegateError, delegate_refused, load_delegate
from .io_builtins import install_when_loaded


class OpResolverType(enum.Enum):
    """Accepted for compatibility with the official constructor; lite-numba has one set of kernels."""
    AUTO = 0
    BUILTIN = 1
    BUILTIN_REF = 2
    BUILTIN_WITHOUT_DEFAULT_DELEGATES = 3


class ModelFileError(ModelError, FileNotFoundError):
    """The model file cannot be opened: the official ValueError ("Could not open '...'"), and an OSError too."""


# The official text refusing invoke/allocate_tensors/resize_tensor_input while an array from tensor() is alive
VIEW_HELD = """There is at least 1 reference to internal data
      in the interpreter in the form of a numpy array or slice. Be sure to
      only hold the function returned from tensor() if you are using raw
      data access."""

_refcount = sys.getrefcount


def tensor_details(t) -> dict:
    """The official details dict of a runtime Tensor (its spec and current shape)."""
    spec, shape = t.spec, t.shape
    q = spec.quantization
    dtype = np.bytes_ if spec.type_name == "STRING" else \
        np.object_ if spec.type_name in ("RESOURCE", "VARIANT") else spec.dtype.type
    per_tensor = (float(q.scales[0]), int(q.zero_points[0])) if q.scales.size == 1 else (0.0, 0)
    if q.blockwise:  # as the official wrapper: the block scales (float16), zero points only when a tensor is named
        nz = q.block_scales.size if q.zero_points_tensor != -1 else 0
        params = {"scales": q.block_scales.reshape(-1).copy(), "zero_points": np.zeros(nz, np.int32),
                  "quantized_dimension": int(q.quantized_dimension), "block_size": int(q.block_size)}
    else:
        params = {"scales": q.scales.astype(np.float32), "zero_points": q.zero_points.astype(np.int32),
                  "quantized_dimension": int(q.quantized_dimension), "block_size": 0}
    return {"name": spec.name, "index": spec.index, "shape": np.array(shape, np.int32),
            "shape_signature": np.array(spec.shape_signature, np.int32), "dtype": dtype, "quantization": per_tensor,
            "quantization_parameters": params, "sparsity_parameters": {}}


def _resolver_type(value) -> str:
    """The name of an OpResolverType (ours or the official enum), else the official ValueError."""
    if value is None:
        return "AUTO"
    if isinstance(value, enum.Enum) and getattr(value, "name", None) in OpResolverType.__members__:
        return value.name
    raise ValueError(f"Unrecognized passed in op resolver type: {value}")


class Interpreter:
    """Runs a .tflite model; the API of `ai_edge_litert.interpreter.Interpreter` (and tflite_runtime, tf.lite).

    `Interpreter(model)` also accepts a path or the model's bytes as the first argument. `op_resolver` (keyword only,
    lite-numba's own) selects the kernels (default: every builtin, the shipped plugins and every @custom_op). A
    builtin op version we lack fails here with the official ValueError; an unresolved custom op fails at
    `allocate_tensors()` with the official RuntimeError. Unknown keywords raise TypeError; `experimental_delegates`
    with any delegate raises `lite_numba.api.delegates.DelegateError` (lite-numba cannot apply delegates); the other
    `experimental_*` keywords configure delegates only and are accepted and ignored.

    One Interpreter is used by one thread at a time: a call made while another thread is inside invoke(),
    set_tensor(), get_tensor(), allocate_tensors() or resize_tensor_input() raises RuntimeError (`clone()` makes
    another interpreter for another thread). `copy.copy`, `copy.deepcopy` and pickling give independent
    interpreters (see `clone`, `__reduce__`).

    `max_arena_bytes` (lite-numba only, off by default): the most memory one subgraph's tensors may need; a model
    needing more fails at `allocate_tensors()` (or when a shape grows at run time) with
    `lite_numba.runtime.arena.ArenaLimitError`, a MemoryError naming the tensor. Without it the limit is the machine's
    physical memory.
    """

    def __init__(self, model_path: str | os.PathLike | bytes | None = None, model_content: bytes | None = None,
                 experimental_delegates=None, num_threads: int | None = None,
                 experimental_op_resolver_type: Any = OpResolverType.AUTO,
                 experimental_preserve_all_tensors: bool = False,
                 experimental_disable_delegate_clustering: bool = False,
                 experimental_default_delegate_latest_features: bool = False,
                 experimental_compress_quantization_zero_points: bool = False,
                 experimental_disable_delegate_node_fusion: bool = False,
                 experimental_force_delegate_node_profiling: bool = False,
                 *, op_resolver: OpResolver | None = None, max_arena_bytes: int | None = None):
        if isinstance(model_path, (bytes, bytearray, memoryview)):
            model_path, model_content = None, model_path
        if model_path is not None and model_content is not None:
            raise ValueError("Can't both provide `model_path` and `model_content`")
        if model_path is not None:
            try:
                data = read_model_bytes(model_path)
            except OSError as e:
                raise ModelFileError(f"Could not open '{os.fspath(model_path)}'.The model allocation is null/empty") \
                    from e
        elif model_content is not None:
            data = model_buffer(model_content)  # (bytes, a read-only mmap: not copied; any other buffer: copied)
        else:
            raise ValueError("`model_path` or `model_content` must be specified.")
        if experimental_delegates:
            names = ", ".join(type(d).__name__ for d in experimental_delegates)
            raise delegate_refused(f"Interpreter(experimental_delegates=[{names}])")
        if num_threads is not None:
            if not isinstance(num_threads, int):
                raise ValueError("type of num_threads should be int")
            if num_threads < 1:
                raise ValueError("num_threads should >= 1")
        options = {"num_threads": num_threads or 1, "preserve_all": bool(experimental_preserve_all_tensors),
                   "resolver_type": _resolver_type(experimental_op_resolver_type), "op_resolver": op_resolver,
                   "compress_zero_points": bool(experimental_compress_quantization_zero_points),
                   "max_arena_bytes": max_arena_bytes}
        self._setup(data, load_model(data), op_resolver if op_resolver is not None else default_op_resolver(),
                    None, options)

    def _setup(self, data, model: ModelPlan, resolver: OpResolver, runtime: ModelRuntime | None,
               options: dict) -> None:
        """Everything but reading the model: shared by the constructor, clone() and unpickling. `runtime`: a
        ModelRuntime of this model to use (a clone's), else one is made from the resolved kernels."""
        self._data = data
        self._options = options
        self.model: ModelPlan = model
        self._resolver = resolver
        if runtime is None:
            runtime = ModelRuntime(model, resolve_model(resolver, model), num_threads=options["num_threads"],
                                   preserve_all_tensors=options["preserve_all"],
                                   max_arena_bytes=options.get("max_arena_bytes"))
            runtime.image_source = (data, options)  # (what a native image's key covers: runtime/native/image.py)
        self._rt = runtime
        self._main = runtime.main  # (subgraph 0: its `run`, one native call when the whole invoke is compiled)
        self._views = runtime.io_views  # the set/get fast path (one dict object, refilled by every allocation)
        self._trace = os.environ.get("LITE_NUMBA_TRACE", "") not in ("", "0")
        # One thread at a time: a call that changes or reads the arena takes the one element of `_slot` (list.pop and
        # append are atomic), so a second thread finds it empty and raises instead of racing (cheaper than a Lock).
        self._slot = [None]
        # tensor() views are made from `_token` (a buffer over the arena), so its reference count tells whether one
        # is alive (the official runtime's check); `_held` has one token per view of storage outside the arena
        self._token = np.frombuffer(memoryview(np.zeros(64, np.uint8)), np.uint8)
        self._token_arena = None
        self._held: list[np.ndarray] = []
        self._fast_io = install_when_loaded(self, Interpreter, self._views, self._slot)  # (else at allocate)

    @property
    def runtime(self) -> ModelRuntime:
        """The model runtime behind this interpreter (lite_numba.runtime.model_runtime): what the batch loop, the
        profiler and the benchmark tool drive. Using it bypasses the interpreter's thread and tensor() checks."""
        return self._rt

    @property
    def trace(self) -> bool:
        """Whether invoke() prints every node as it runs (set from $LITE_NUMBA_TRACE; settable)."""
        return self._trace

    @trace.setter
    def trace(self, on: bool) -> None:
        self._trace = bool(on)

    max_while_iterations = forwarded("_rt.max_while_iterations", "WHILE raises RuntimeError after this many "
                                     "iterations (None, the default: no cap, as officially).", settable=True)

    @property
    def max_arena_bytes(self) -> int | None:
        """The constructor's `max_arena_bytes` (None: the machine's physical memory is the limit)."""
        return self._rt.max_arena_bytes

    @property
    def resources(self) -> dict:
        """The state ops share across invokes: resource variables, CALL_ONCE flags, TensorLists."""
        return self._rt.resources

    def _busy(self, what: str) -> RuntimeError:
        return RuntimeError(
            f"Interpreter.{what}() was called while another thread is inside this Interpreter. An Interpreter is "
            f"not thread-safe: use one Interpreter per thread (Interpreter.clone() makes another one that shares the "
            f"compiled code and the weights).")

    def _enter(self, what: str) -> None:
        try:
            self._slot.pop()
        except IndexError:
            raise self._busy(what) from None

    def _safe_to_run(self) -> bool:
        """True when no array obtained through tensor() is alive (the official private method)."""
        try:
            self._ensure_safe()
        except RuntimeError:
            return False
        return True

    def _native_handle(self):
        """The official runtime returns its C++ tflite::Interpreter pointer here; lite-numba has none."""
        raise RuntimeError("lite-numba has no native tflite::Interpreter: _native_handle() cannot be provided")

    @property
    def experimental_compress_quantization_zero_points(self) -> bool:
        """The constructor flag, as officially (it configures delegates only; lite-numba ignores it)."""
        return self._options["compress_zero_points"]

    def _ensure_safe(self) -> None:
        """RuntimeError (the official text) while an array returned by a tensor() function is alive."""
        if _refcount(self._token) > 2:
            raise RuntimeError(VIEW_HELD)
        if self._held:
            self._held = [t for t in self._held if _refcount(t) > 3]  # the list, `t` and the argument
            if self._held:
                raise RuntimeError(VIEW_HELD)

    # --- the official API -------------------------------------------------------------------------------------
    def allocate_tensors(self) -> None:
        """Prepare every node, plan memory and compile the executor (cached on disk). Nothing happens when nothing
        was resized since the last allocation: inputs set and variable state are kept, as officially; after a resize
        the variable tensors restart from zeros (their zero point when quantized), as officially."""
        self._enter("allocate_tensors")
        try:
            self._ensure_safe()
            self._rt.allocate()
            if not self._fast_io:  # (a native image runs without Numba: the Python methods then)
                self._fast_io = install_when_loaded(self, Interpreter, self._views, self._slot)
        finally:
            self._slot.append(None)

    def invoke(self) -> None:
        """Run the model once on the inputs set. With $LITE_NUMBA_TRACE set, prints every node as it runs."""
        slot = self._slot
        try:
            slot.pop()
        except IndexError:
            raise self._busy("invoke") from None
        try:
            if _refcount(self._token) > 2 or self._held:
                self._ensure_safe()
            if self._trace:
                self._rt.trace()
            else:
                self._main.run()
        except (ValueError, IndexError, ZeroDivisionError) as e:  # a kernel's, from the native entry: as invoke's
            raise (e if isinstance(e, RuntimeError) else self._main.invoke_error(e)) from None
        finally:
            slot.append(None)

    def profile(self, num_runs: int = 10, warmup_runs: int = 1) -> Profile:
        """Run the model `num_runs` times timing every node; returns a `lite_numba.runtime.profile_report.Profile`
        (printable as the official benchmark tool's tables, CSV, JSON or HTML)."""
        return self._rt.profile(num_runs=num_runs, warmup_runs=warmup_runs)

    @property
    def arena_size(self) -> int:
        """Bytes of the activation arena of subgraph 0 (after allocate_tensors)."""
        return self._rt.arena_size

    def num_subgraphs(self) -> int:
        """Number of subgraphs in the model."""
        return len(self.model.subgraphs)

    def _check_index(self, i: int, subgraph: int = 0) -> None:
        check_int(i, "tensor_index")
        n = self._rt.num_tensors(subgraph)
        if i < 0 or i >= n:
            raise ValueError(f"Invalid tensor index {i} exceeds max tensor index {n}")

    def _details(self, indices, subgraph: int = 0) -> list[dict]:
        rt = self._rt
        return [tensor_details(rt.tensor(i, subgraph)) for i in indices]

    def get_input_details(self) -> list[dict]:
        """One dict per input of subgraph 0 (the official keys)."""
        return self._details(self.model.subgraphs[0].inputs)

    def get_output_details(self) -> list[dict]:
        """One dict per output of subgraph 0 (the official keys)."""
        return self._details(self.model.subgraphs[0].outputs)

    def _subgraph(self, subgraph_index: int) -> int:
        check_int(subgraph_index, "subgraph_index")
        if not 0 <= subgraph_index < len(self.model.subgraphs):
            raise ValueError(f"subgraph_index is out of range: {subgraph_index} for the model, which has "
                             f"{len(self.model.subgraphs)} subgraphs.")
        return subgraph_index

    def get_tensor_details(self, subgraph_index: int = 0) -> list[dict]:
        """One dict per tensor of a subgraph (the official keys)."""
        k = self._subgraph(subgraph_index)
        return self._details(range(len(self.model.subgraphs[k].tensors)), k)

    def _get_tensor_details(self, tensor_index: int, subgraph_index: int) -> dict:
        """The details dict of one tensor (the official private method, used by some libraries)."""
        k = self._subgraph(subgraph_index)
        self._check_index(tensor_index, k)
        return tensor_details(self._rt.tensor(tensor_index, k))

    def _get_op_details(self, op_index: int) -> dict:
        """Node `op_index` of subgraph 0: index, op_name, inputs, outputs (-1 = absent), operand/result dtypes."""
        check_int(op_index, "op_index")
        nodes = self.model.subgraphs[0].nodes
        if not 0 <= op_index < len(nodes):
            raise ValueError("Invalid node index")
        node = nodes[op_index]
        dtype = lambda i: tensor_details(self._rt.tensor(i))["dtype"]  # noqa: E731
        return {
            "index": node.index,
            "op_name": node.op_name,
            "inputs": np.array(node.inputs, np.int32),
            "outputs": np.array(node.outputs, np.int32),
            "operand_types": [dtype(i) for i in node.inputs if i != -1],
            "result_types": [dtype(i) for i in node.outputs if i != -1],
        }

    def _get_ops_details(self) -> list[dict]:
        """`_get_op_details` of every node of subgraph 0."""
        return [self._get_op_details(i) for i in range(len(self.model.subgraphs[0].nodes))]

    def set_tensor(self, tensor_index: int, value) -> None:
        """Copy `value` into a tensor (an input), checking dtype and shape with the official messages."""
        if not self._slot:
            raise self._busy("set_tensor")
        view = self._views.get(tensor_index) if type(value) is np.ndarray and type(tensor_index) is int else None
        if view is not None and value.dtype == view.dtype and value.shape == view.shape:  # (exact ints: 1.0 == 1)
            view[...] = value  # the common case (without the built-in of fast_io), checked: dtype and shape
            return
        self._rt.set_tensor(tensor_index, value)

    def get_tensor(self, tensor_index: int, subgraph_index: int = 0) -> np.ndarray:
        """A copy of a tensor's current value."""
        if not self._slot:
            raise self._busy("get_tensor")
        if subgraph_index == 0:
            view = self._views.get(tensor_index) if type(tensor_index) is int else None
            if view is not None:
                return view.copy()
        else:
            check_int(subgraph_index, "subgraph_index")
            n = len(self.model.subgraphs)
            if not 0 <= subgraph_index < n:
                raise ValueError(f"Invalid subgraph index {subgraph_index} exceeds max subgraph index {n}")
        self._check_index(tensor_index, subgraph_index)
        spec = self.model.subgraphs[subgraph_index].tensors[tensor_index]
        if spec.packed_bits:  # blockwise weights kept packed: their values, as the official get_tensor gives them
            return unpack_bits(spec.data, int(np.prod(spec.shape)), spec.packed_bits).reshape(spec.shape)
        return self._rt.get_tensor(tensor_index, subgraph_index)

    def tensor(self, tensor_index: int):
        """A function returning a numpy view of the tensor's current storage, as officially: call it again after
        allocate_tensors() (views move), and do not keep the array across invoke(), allocate_tensors() or
        resize_tensor_input(), which raise RuntimeError while one is alive (the official text)."""
        self._check_index(tensor_index)
        return lambda: self._view(tensor_index)

    def _view(self, i: int) -> np.ndarray:
        rt = self._rt
        storage = rt.storage(i)
        if rt.tensor(i).is_const or storage.dtype == np.dtype(object):
            v = storage.view()
            v.flags.writeable = False  # writing a constant would change what the compiled plan assumed
            return v
        arena = rt.arena
        if in_arena(storage, arena):
            if self._token_arena is not arena:
                if _refcount(self._token) > 2:  # views of the old arena (speculation re-planned during invoke)
                    self._held.append(self._token)
                self._token = np.frombuffer(memoryview(arena), np.uint8)
                self._token_arena = arena
            off = storage.ctypes.data - arena.ctypes.data
            return self._token[off:off + storage.nbytes].view(storage.dtype).reshape(storage.shape)
        token = np.frombuffer(memoryview(storage.reshape(-1)), storage.dtype)  # dynamic tensors' own arrays
        self._held.append(token)
        return token.reshape(storage.shape)

    def resize_tensor_input(self, input_index: int, tensor_size, strict: bool = False) -> None:
        """Change an input's shape; takes effect at the next allocate_tensors()."""
        check_int(input_index, "input_index")
        self._enter("resize_tensor_input")
        try:
            self._ensure_safe()
            self._rt.resize_input(input_index, tensor_size, strict)
        finally:
            self._slot.append(None)

    def reset_all_variables(self) -> None:
        """Reset variable tensors (is_variable: zeros, or the zero point when quantized) in every subgraph.

        As in the official runtime, resource variables (VAR_HANDLE/ASSIGN_VARIABLE) keep their values and CALL_ONCE
        does not run again (measured with ai-edge-litert 2.3)."""
        self._enter("reset_all_variables")
        try:
            self._rt.reset_variables()
        finally:
            self._slot.append(None)

    def run_rows(self, inputs: list[tuple[int, np.ndarray]], outputs: list[int]) -> list[np.ndarray] | None:
        """Many invokes in one call, for the batch loop (lite_numba.batch): ModelRuntime.run_rows under this
        interpreter's thread and tensor() checks, as invoke() takes them. None when the model cannot run so (the
        caller then loops over set_tensor / invoke / get_tensor), or when tracing."""
        self._enter("invoke")  # (once per batch: invoke's inlined fast path is not needed here)
        try:
            self._ensure_safe()
            return None if self._trace else self._rt.run_rows(inputs, outputs)
        finally:
            self._slot.append(None)

    def io_views(self) -> dict[int, np.ndarray]:
        """For the batch loop (lite_numba.batch): {tensor index: arena view} behind set_tensor's and get_tensor's
        fast path, for the static, non-constant tensors of subgraph 0. Valid until the next invoke,
        allocate_tensors or resize; never hand these to users (their views are what tensor() gives)."""
        if not self._slot:
            raise self._busy("set_tensor")
        return self._views

    # --- copies for other threads and processes ---------------------------------------------------------------
    def clone(self) -> "Interpreter":
        """Another interpreter of the same model for another thread: it shares the loaded model (constant weights),
        the op resolution and the compiled code, has its own arena and state, and is allocated for the same input
        shapes when this one is (ModelRuntime.share: when subgraph 0 is compiled code only, the preparation with the
        packed weights is shared too). Inputs, outputs and variables are not copied (`copy.deepcopy` copies them)."""
        new = object.__new__(type(self))
        new._setup(self._data, self.model, self._resolver, self._rt.share(), self._options)
        if hasattr(self, "_custom_op_registerers"):
            new._custom_op_registerers = list(self._custom_op_registerers)
        return new

    def __copy__(self) -> "Interpreter":
        """clone() plus a copy of the state: an independent interpreter that continues where this one is."""
        new = self.clone()
        new._rt.restore_state(self._rt.capture_state())
        return new

    def __deepcopy__(self, memo) -> "Interpreter":
        return self.__copy__()

    def __reduce__(self):
        """Pickles as the model bytes, the options, the op resolver and custom ops by reference (their modules are
        imported where it is unpickled) and the state (ModelRuntime.capture_state): input shapes, allocation,
        tensor values and variables."""
        payload = {"model": bytes(self._data), "options": dict(self._options),
                   "custom_modules": self._custom_modules(), "state": self._rt.capture_state()}
        return _unpickle_interpreter, (type(self), payload)

    def _custom_modules(self) -> list[str]:
        """Modules defining the custom kernels the model uses: importing them where the interpreter is unpickled
        registers those ops (@custom_op) before the default resolver is built."""
        modules = set()
        for kernels, sg in zip(self._rt.kernels, self.model.subgraphs):
            for k, node in zip(kernels, sg.nodes):
                if k is None or not node.is_custom:
                    continue
                for m in (k.__dict__.get("__module__"), getattr(k.prepare, "__module__", None)):
                    if m and m != "__main__":
                        modules.add(m)
        return sorted(modules)

    def get_signature_list(self) -> dict:
        """{signature key: {"inputs": [names], "outputs": [names]}}."""
        return {s.key: {"inputs": list(s.inputs), "outputs": list(s.outputs)} for s in self.model.signatures}

    def _get_full_signature_list(self) -> dict:
        """{signature key: {"inputs": {name: tensor index}, "outputs": {name: tensor index}}} (official private)."""
        return {s.key: {"inputs": dict(s.inputs), "outputs": dict(s.outputs)} for s in self.model.signatures}

    def get_signature_runner(self, signature_key: str | None = None) -> "SignatureRunner":
        """A callable running one SignatureDef; None selects the only one."""
        sigs = self.model.signatures
        if signature_key is None:
            if len(sigs) != 1:
                raise ValueError("SignatureDef signature_key is None and model has {0} Signatures. "
                                 "None is only allowed when the model has 1 SignatureDef".format(len(sigs)))
            signature_key = sigs[0].key
        return SignatureRunner(self, signature_key)


class SignatureRunner:
    """Runs one SignatureDef: `runner(**inputs) -> {output name: array}`. Made by
    `Interpreter.get_signature_runner(key)` or, as officially, `SignatureRunner(interpreter, signature_key=key)`.

    A call reads every input of at least `IN_PLACE_BYTES` where the caller keeps it and writes every output of at
    least that size straight into the new array it returns (no copy in or out; the returned arrays are the caller's
    own, as officially); smaller ones are copied. Those large tensors are not kept in the interpreter afterwards:
    `Interpreter.get_tensor` / `tensor()` on them raise RuntimeError until they are set again (the official runtime
    keeps copies there). `bind(name, buffer)` makes a buffer the storage of an input and its same-named output (a
    KV cache): calls then need not pass it, the graph updates it where it lives, and nothing is copied
    (docs/design/llm.md). `last_copies` counts what the last call copied. A call like the last one (the same names,
    dtypes, shapes and buffers) runs the plan that call left instead of checking again (signature_io.CallPlan)."""

    IN_PLACE_BYTES = 1 << 18

    def __init__(self, interpreter: Interpreter | None = None, signature_key: str | None = None):
        if interpreter is None:
            raise ValueError("None interpreter provided.")
        if signature_key is None:
            raise ValueError("None signature_key provided.")
        for s in interpreter.model.signatures:
            if s.key == signature_key:
                break
        else:
            raise ValueError(f'Invalid signature_key provided: "{signature_key}".')
        self._interp = interpreter
        self._sig = s
        self._k = s.subgraph_index
        self._rt = interpreter.runtime
        self._rt.graph(self._k)  # (an invalid subgraph index fails here, as officially at construction)
        self._buffers: dict[str, np.ndarray] = {}
        # state: {name: output tensor} for every input with an output of the same name, dtype and shape (a cache)
        spec = lambda i: (self._rt.tensor(i, self._k).dtype, self._rt.tensor(i, self._k).shape)  # noqa: E731
        self._states = {n: o for n, i in s.inputs.items() if (o := s.outputs.get(n)) is not None and spec(i) == spec(o)}
        self._names = list(dict.fromkeys([*s.inputs, *s.outputs]))
        self._names_of = {i: (n, "in") for n, i in s.inputs.items()} | {o: (n, "out") for n, o in s.outputs.items()}
        # bytes the last call copied: into the graph, out of it, and of state (an input and its same-named output, a
        # KV cache) the graph wrote to storage of its own instead of where it lives; by name: in + out + graph
        self.last_copies = {"in": 0, "out": 0, "graph": 0}
        self.last_copies_by_name: dict[str, int] = {}
        self._plan: CallPlan | None = None  # the last call, planned: a call like it takes the fast path

    def get_input_details(self) -> dict[str, dict]:
        return {name: tensor_details(self._rt.tensor(i, self._k)) for name, i in self._sig.inputs.items()}

    def get_output_details(self) -> dict[str, dict]:
        return {name: tensor_details(self._rt.tensor(i, self._k)) for name, i in self._sig.outputs.items()}

    def allocate_tensors(self) -> None:
        self._rt.allocate(self._k)

    # --- buffers bound by name ------------------------------------------------------------------------------------
    def bind(self, name: str, buffer: np.ndarray | None = None) -> np.ndarray:
        """Make `buffer` the storage of input `name` and of the output of the same name, if any (a KV cache such as
        `kv_cache_k_0`), for the calls of this runner until `unbind`; returns it (a new zeroed buffer when None).
        Calls need not pass `name` (passing the buffer itself costs nothing; another array is copied into it) and
        return the buffer itself as that output. The graph updates the buffer where it lives when its plan allows
        it (the output written into the input's storage: DYNAMIC_UPDATE_SLICE), so a step copies nothing. Bind the
        same buffer on the prefill and decode runners to share a cache. The buffer must have the input's dtype and
        shape and be C-contiguous and writable; binding re-plans the signature's subgraph at its next call."""
        if name not in self._sig.inputs:
            raise ValueError(f"{name!r} is not an input of signature {self._sig.key!r}; its inputs are "
                             f"{sorted(self._sig.inputs)}")
        t = self._rt.tensor(self._sig.inputs[name], self._k)
        if buffer is None:
            raw = np.zeros(t.nbytes + 64, np.uint8)
            start = (-raw.ctypes.data) % 64
            buffer = raw[start:start + t.nbytes].view(t.dtype).reshape(t.shape)
        if not isinstance(buffer, np.ndarray):
            raise TypeError(f"SignatureRunner.bind({name!r}): the buffer must be a numpy array, got "
                            f"{type(buffer).__name__}")
        want = f"{t.dtype.name}{list(t.shape)}"
        if buffer.dtype != t.dtype or buffer.shape != t.shape:
            raise ValueError(f"SignatureRunner.bind({name!r}): the buffer is {buffer.dtype.name}"
                             f"{list(buffer.shape)}; input {name!r} of signature {self._sig.key!r} is {want}")
        if not (buffer.flags.c_contiguous and buffer.flags.writeable and buffer.flags.aligned):
            raise ValueError(f"SignatureRunner.bind({name!r}): the buffer must be C-contiguous, aligned and writable")
        self._buffers[name] = buffer
        self._plan = None
        return buffer

    def unbind(self, name: str | None = None) -> None:
        """Forget the buffer bound to `name` (every buffer when None): calls pass that input again."""
        self._plan = None
        if name is None:
            self._buffers.clear()
        else:
            self._buffers.pop(name, None)

    @property
    def bound(self) -> dict[str, np.ndarray]:
        """{name: buffer} bound with bind()."""
        return dict(self._buffers)

    def __call__(self, **kwargs) -> dict[str, np.ndarray]:
        plan = self._plan  # the last planned call again: its checks, copies and counts are known (CallPlan)
        if plan is not None and (arrays := plan.arrays(kwargs, self.IN_PLACE_BYTES)) is not None:
            self._interp._enter("SignatureRunner.__call__")
            try:
                self._interp._ensure_safe()
                if plan.run.valid():  # (else allocated again since: the full path below)
                    out = plan(arrays)
                    self.last_copies, self.last_copies_by_name = dict(plan.copies), dict(plan.copies_by_name)
                    return out
            finally:
                self._interp._slot.append(None)
        sig, buffers, states = self._sig, self._buffers, self._states
        if len(kwargs) != len(sig.inputs) and not (buffers and set(sig.inputs) <= set(kwargs) | set(buffers)
                                                   and len(kwargs) <= len(sig.inputs)):
            raise ValueError(f"Invalid number of inputs provided for running a SignatureDef, expected "
                             f"{len(sig.inputs) - len(buffers)} vs provided {len(kwargs)}")
        interp = self._interp
        interp._enter("SignatureRunner.__call__")
        try:
            interp._ensure_safe()
            rt, k = self._rt, self._k
            values = {}
            for name, value in kwargs.items():
                if name not in sig.inputs:
                    raise ValueError(f"Invalid Input name ({name}) for SignatureDef")
                values[name] = value = np.asarray(value)
                t = rt.tensor(sig.inputs[name], k)
                if name not in buffers and value.shape != t.shape:
                    rt.resize_input(t.index, value.shape, False, k)
            rt.set_writable_inputs(k, {sig.inputs[n] for n in buffers if n in states})
            rt.allocate(k)
            by_name = dict.fromkeys(self._names, 0)
            inputs = {}
            for name, value in values.items():
                t = rt.tensor(sig.inputs[name], k)
                if value.dtype != t.dtype or value.shape != t.shape or t.is_const:
                    value = rt.check_value(t.index, value, k)  # (raises the official error)
                if name in buffers:
                    if value is not buffers[name]:
                        np.copyto(buffers[name], value)
                        by_name[name] += value.nbytes
                    continue
                if not (value.flags.c_contiguous and value.flags.aligned):
                    value = np.ascontiguousarray(value)
                    by_name[name] += value.nbytes
                inputs[t.index] = value
            outs = [o for name, o in sig.outputs.items() if name not in buffers or name not in states]
            bound = {sig.inputs[n]: (states.get(n), b) for n, b in buffers.items()}
            plannable = not any(by_name.values()) and all(type(v) is np.ndarray for v in kwargs.values())
            results, copied = rt.run_in_place(k, inputs, outs, bound, self.IN_PLACE_BYTES)
            total = {"in": sum(by_name.values()), "out": 0, "graph": 0}
            for i, n in copied.items():
                name, side = self._names_of[i]
                by_name[name] += n
                total[side] += n
            for name, o in states.items():  # state the graph wrote to storage of its own: a copy of it
                if not rt.shares_storage(sig.inputs[name], o, k):
                    by_name[name] += rt.tensor(o, k).nbytes
                    total["graph"] += rt.tensor(o, k).nbytes
            self.last_copies, self.last_copies_by_name = total, by_name
            run = rt.run_plan(k, inputs, outs, bound, self.IN_PLACE_BYTES) if plannable else None
            ret = [(n, o, buffers[n] if n in buffers and n in states else None) for n, o in sig.outputs.items()]
            self._plan = run and CallPlan(values, buffers, self.IN_PLACE_BYTES, run, ret, dict(total), dict(by_name))
            return {name: results[o] if buf is None else buf for name, o, buf in ret}
        finally:
            interp._slot.append(None)


def _unpickle_interpreter(cls, payload: dict):
    """Rebuild a pickled interpreter: import the custom ops' modules, load the model, restore the state."""
    for module in payload["custom_modules"]:
        importlib.import_module(module)
    options = payload["options"]
    resolver = options["op_resolver"] if options["op_resolver"] is not None else default_op_resolver()
    data = payload["model"]
    interp = object.__new__(cls)
    interp._setup(data, load_model(data), resolver, None, options)
    interp._rt.restore_state(payload["state"])
    return interp


class InterpreterWithCustomOps(Interpreter):
    """The official `InterpreterWithCustomOps(custom_op_registerers=[...], **kwargs)`. A registerer here is a
    `@custom_op` function or a callable receiving the `MutableOpResolver` to register into; the official C++
    registerers (symbol names, pybind functions taking a resolver pointer) cannot be loaded and raise ValueError."""

    def __init__(self, custom_op_registerers=None, **kwargs):
        self._custom_op_registerers = list(custom_op_registerers or [])
        if self._custom_op_registerers:
            resolver = kwargs.pop("op_resolver", None) or default_op_resolver()
            if not isinstance(resolver, MutableOpResolver):
                raise TypeError("InterpreterWithCustomOps needs a MutableOpResolver to register custom ops into")
            for reg in self._custom_op_registerers:
                if isinstance(reg, CustomOp):
                    lo, hi = reg.meta.get("versions", (1, 1))
                    resolver.add_custom(reg.name, reg, lo, hi)
                elif callable(reg) and not isinstance(reg, str):
                    reg(resolver)
                else:  # the official text first (a symbol name it cannot find), then why
                    raise ValueError(f"Looking up symbol '{reg}' failed: lite-numba cannot load the native op "
                                     f"registerer {reg!r}; register custom ops with @lite_numba.custom_op or a "
                                     f"callable taking a MutableOpResolver")
            kwargs["op_resolver"] = resolver
        super().__init__(**kwargs)


__all__ = ["Interpreter", "InterpreterWithCustomOps", "SignatureRunner", "OpResolverType", "ModelError",
           "ModelFileError", "Delegate", "DelegateError", "load_delegate"]
