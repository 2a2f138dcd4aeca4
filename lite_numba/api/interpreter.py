"""Interpreter and SignatureRunner with the official Python API (ai_edge_litert.interpreter)."""

from __future__ import annotations

import enum
import os
import sys
from collections import OrderedDict
from typing import Any

import numpy as np

from ..format.model import ModelError, load_model, read_model_bytes
from ..format.plan import ModelPlan, TensorSpec
from ..format.schema import type_name
from ..ops import CustomOp
from ..runtime.executor import GraphRuntime, InvokeError
from ..runtime.fusion import fuse
from ..runtime.profiling import profile_interpreter, trace_invoke
from ..runtime.resolver import MutableOpResolver, OpResolver, default_op_resolver
from ..runtime.subgraphs import BoundSubgraph, SubgraphHost
from .delegates import Delegate, DelegateError, delegate_refused, load_delegate
from .interpreter_state import clone_interpreter, copy_interpreter, pickle_interpreter


class OpResolverType(enum.Enum):
    """Accepted for compatibility with the official constructor; lite-numba has one set of kernels."""

    AUTO = 0
    BUILTIN = 1
    BUILTIN_REF = 2
    BUILTIN_WITHOUT_DEFAULT_DELEGATES = 3


class ModelFileError(ModelError, FileNotFoundError):
    """The model file cannot be opened: the official ValueError ("Could not open '...'"), and an OSError too."""


# The official runtime refuses invoke/allocate_tensors/resize_tensor_input while a numpy array obtained through
# tensor() is alive, because those calls may move or rewrite the memory it points into; this is its text.
VIEW_HELD = """There is at least 1 reference to internal data
      in the interpreter in the form of a numpy array or slice. Be sure to
      only hold the function returned from tensor() if you are using raw
      data access."""

_refcount = sys.getrefcount


def _check_int(value, what: str) -> None:
    """TypeError for an index that is not an integer, as the official bindings raise."""
    if not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an int, got {type(value).__name__} {value!r}")


def _detail(spec: TensorSpec, shape: tuple[int, ...]) -> dict:
    q = spec.quantization
    dtype = np.object_ if spec.type_name in ("RESOURCE", "VARIANT", "STRING") else spec.dtype.type
    per_tensor = (float(q.scales[0]), int(q.zero_points[0])) if q.scales.size == 1 else (0.0, 0)
    return {
        "name": spec.name,
        "index": spec.index,
        "shape": np.array(shape, np.int32),
        "shape_signature": np.array(spec.shape_signature, np.int32),
        "dtype": dtype,
        "quantization": per_tensor,
        "quantization_parameters": {
            "scales": q.scales.astype(np.float32),
            "zero_points": q.zero_points.astype(np.int32),
            "quantized_dimension": int(q.quantized_dimension),
            "block_size": 0,
        },
        "sparsity_parameters": {},
    }


def _resolver_type(value) -> str:
    """The name of an OpResolverType (ours or the official enum), else the official ValueError."""
    if value is None:
        return "AUTO"
    name = getattr(value, "name", None)
    if isinstance(value, enum.Enum) and name in OpResolverType.__members__:
        return name
    raise ValueError(f"Unrecognized passed in op resolver type: {value}")


class Interpreter(SubgraphHost):
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
            try:  # bytes or any buffer (bytearray, memoryview, mmap)
                data = model_content if isinstance(model_content, bytes) else bytes(memoryview(model_content))
            except TypeError:
                raise TypeError(f"model_content must be bytes, got {type(model_content).__name__}") from None
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

    def _setup(self, data, model: ModelPlan, resolver: OpResolver, kernels: list | None, options: dict) -> None:
        """Everything but reading the model: shared by the constructor, clone() and unpickling."""
        self._data = data
        self._options = options
        self._num_threads = options["num_threads"]
        self._preserve_all = options["preserve_all"]
        self.model: ModelPlan = model
        self._resolver = resolver
        self._kernels = kernels if kernels is not None else [self._resolve_subgraph(sg) for sg in model.subgraphs]
        self._runtimes: dict[int, GraphRuntime] = {}
        self._trace = os.environ.get("LITE_NUMBA_TRACE", "") not in ("", "0")
        self.resources: dict = {}
        self.max_while_iterations: int | None = None  # WHILE raises RuntimeError after this many iterations
        max_arena_bytes = options.get("max_arena_bytes")
        if max_arena_bytes is not None and (not isinstance(max_arena_bytes, int) or max_arena_bytes <= 0):
            raise ValueError(f"max_arena_bytes must be a positive int, got {max_arena_bytes!r}")
        self.max_arena_bytes = max_arena_bytes  # read by every subgraph's GraphRuntime (arena.memory_limit)
        self._call_depth = 0
        self._shape_cache: dict[int, OrderedDict] = {}  # called subgraphs prepared per input shapes
        self._shape_hits: dict[int, dict] = {}  # uses of each cached preparation (eviction order)
        self._bound: dict[tuple, BoundSubgraph] = {}  # (subgraph, input shapes) -> bind_subgraph's result
        self._variable_subgraphs: frozenset | None = None  # subgraphs with variable tensors (restart_variables)
        # One thread at a time: a call that changes or reads the arena takes the one element of `_slot` (list.pop and
        # append are atomic), so a second thread finds it empty and raises instead of racing (cheaper than a Lock).
        self._slot = [None]
        # tensor() views are made from `_token` (a buffer over the arena), so its reference count tells whether one
        # is alive (the official runtime's check); `_held` has one token per view of storage outside the arena
        self._token = np.frombuffer(memoryview(np.zeros(64, np.uint8)), np.uint8)
        self._token_arena = None
        self._held: list[np.ndarray] = []
        self._main = self._runtime(0)

    def _resolve_subgraph(self, sg) -> list:
        kernels = []
        for node in sg.nodes:
            if node.is_custom:
                kernels.append(self._resolver.find_custom(node.op_name, node.version))
                continue
            k = self._resolver.find_builtin(node.op_name, node.version)
            if k is None:
                raise ValueError(
                    f"Didn't find op for builtin opcode '{node.op_name}' version '{node.version}'. An older version "
                    f"of this builtin might be supported. Are you using an old TFLite binary with a newer model?\n"
                    f"Registration failed.\n")
            kernels.append(k)
        return kernels

    def _runtime(self, subgraph_index: int) -> GraphRuntime:
        rt = self._runtimes.get(subgraph_index)
        if rt is None:
            rt = self._runtimes[subgraph_index] = self._new_runtime(subgraph_index)
        return rt

    def _new_runtime(self, subgraph_index: int) -> GraphRuntime:
        if not 0 <= subgraph_index < len(self.model.subgraphs):
            raise ValueError(f"Invalid subgraph index {subgraph_index}; the model has "
                             f"{len(self.model.subgraphs)} subgraphs")
        plan, kernels = self.model.subgraphs[subgraph_index], self._kernels[subgraph_index]
        if not self._preserve_all:  # rewrites that keep value-dependent patterns static (lite_numba.runtime.fusion)
            plan, kernels = fuse(plan, kernels)
        return GraphRuntime(plan, kernels, num_threads=self._num_threads, preserve_all_tensors=self._preserve_all,
                            subgraph_index=subgraph_index, host_env=self)

    # --- one thread at a time; no call that moves memory while a tensor() view is alive -----------------------
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
            if not self._main.ready:
                allocate_fresh(self._main)
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
                trace_invoke(self)
            else:
                self._main.invoke()
        finally:
            slot.append(None)

    def profile(self, num_runs: int = 10, warmup_runs: int = 1):
        """Run the model `num_runs` times timing every node; returns a `lite_numba.runtime.profiling.Profile`."""
        return profile_interpreter(self, num_runs=num_runs, warmup_runs=warmup_runs)

    @property
    def arena_size(self) -> int:
        """Bytes of the activation arena of subgraph 0 (after allocate_tensors)."""
        return self._runtime(0).arena_size

    def num_subgraphs(self) -> int:
        """Number of subgraphs in the model."""
        return len(self.model.subgraphs)

    def _check_index(self, rt: GraphRuntime, i: int) -> None:
        _check_int(i, "tensor_index")
        n = len(rt.tensors)
        if i < 0 or i >= n:
            raise ValueError(f"Invalid tensor index {i} exceeds max tensor index {n}")

    def _details(self, rt: GraphRuntime, indices) -> list[dict]:
        return [_detail(rt.plan.tensors[i], rt.tensors[i].shape) for i in indices]

    def get_input_details(self) -> list[dict]:
        """One dict per input of subgraph 0 (the official keys)."""
        rt = self._runtime(0)
        return self._details(rt, rt.plan.inputs)

    def get_output_details(self) -> list[dict]:
        """One dict per output of subgraph 0 (the official keys)."""
        rt = self._runtime(0)
        return self._details(rt, rt.plan.outputs)

    def _subgraph(self, subgraph_index: int) -> GraphRuntime:
        _check_int(subgraph_index, "subgraph_index")
        if not 0 <= subgraph_index < len(self.model.subgraphs):
            raise ValueError(f"subgraph_index is out of range: {subgraph_index} for the model, which has "
                             f"{len(self.model.subgraphs)} subgraphs.")
        return self._runtime(subgraph_index)

    def get_tensor_details(self, subgraph_index: int = 0) -> list[dict]:
        """One dict per tensor of a subgraph (the official keys)."""
        rt = self._subgraph(subgraph_index)
        return self._details(rt, range(len(rt.plan.tensors)))

    def _get_tensor_details(self, tensor_index: int, subgraph_index: int) -> dict:
        """The details dict of one tensor (the official private method, used by some libraries)."""
        rt = self._subgraph(subgraph_index)
        self._check_index(rt, tensor_index)
        return _detail(rt.plan.tensors[tensor_index], rt.tensors[tensor_index].shape)

    def _get_op_details(self, op_index: int) -> dict:
        """Node `op_index` of subgraph 0: index, op_name, inputs, outputs (-1 = absent), operand/result dtypes."""
        _check_int(op_index, "op_index")
        nodes = self.model.subgraphs[0].nodes
        if not 0 <= op_index < len(nodes):
            raise ValueError("Invalid node index")
        node = nodes[op_index]
        rt = self._runtime(0)
        dtype = lambda i: _detail(rt.plan.tensors[i], rt.tensors[i].shape)["dtype"]  # noqa: E731
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
        rt = self._main
        # (a float index would find the int key of equal value: only exact ints take the fast path)
        view = rt.fast_views.get(tensor_index) if type(value) is np.ndarray and type(tensor_index) is int else None
        if view is not None and value.dtype == view.dtype and value.shape == view.shape:
            view[...] = value  # the common case, checked: same dtype and shape as the planned tensor
            return
        set_tensor(rt, tensor_index, value)

    def _arena_views(self) -> dict[int, np.ndarray]:
        """Internal (lite_numba.batch's per-example loop): {tensor index: arena view} behind set_tensor's and
        get_tensor's fast path, for the static, non-constant tensors of subgraph 0. Valid until the next invoke,
        allocate_tensors or resize; never handed to users (their views are what tensor() gives)."""
        if not self._slot:
            raise self._busy("set_tensor")
        return self._main.fast_views

    def _run_rows(self, inputs: list[tuple[int, np.ndarray]], outputs: list[int]) -> list[np.ndarray] | None:
        """Internal (lite_numba.batch's per-example loop): one invoke per row of the arrays in `inputs` ((tensor
        index, array of n examples, each the tensor's shape with or without its leading 1)), all in one compiled
        call (lite_numba.runtime.rows), as that many set_tensor / invoke / get_tensor calls would; returns, for each index
        in `outputs`, its values stacked over the n examples (the leading 1 dropped). None when the model's invoke
        is not only compiled code over planned tensors (GraphRuntime.native_program), or a tensor is not planned or
        an array does not fit it exactly: the caller then loops in Python."""
        self._enter("invoke")  # (once per batch: invoke's inlined fast path is not needed here)
        try:
            self._ensure_safe()
            rt = self._main
            if self._trace or not inputs:
                return None
            program = rt.native_program()
            if program is None:
                return None
            arena = rt.arena
            base = arena.ctypes.data

            def place(idx):  # (byte offset in the arena, view) of a planned tensor, else None
                view = rt.fast_views.get(idx)
                if view is None or not view.flags.c_contiguous:
                    return None
                off = view.ctypes.data - base
                if off < 0 or off + view.nbytes > arena.nbytes:
                    return None
                return off, view

            if any(type(a) is not np.ndarray or a.ndim < 1 for _, a in inputs):
                return None
            n = inputs[0][1].shape[0]
            if n == 0:
                return None
            ins, in_offs = [], []
            for idx, a in inputs:
                p = place(idx)
                if p is None or a.shape[0] != n or a.dtype != p[1].dtype:
                    return None
                shape = p[1].shape
                if a.shape[1:] != shape and not (shape[:1] == (1,) and a.shape[1:] == shape[1:]):
                    return None
                ins.append(np.ascontiguousarray(a).reshape(n, -1).view(np.uint8))
                in_offs.append(p[0])
            outs, out_offs, results = [], [], []
            for idx in outputs:
                p = place(idx)
                if p is None:
                    return None
                y = p[1]
                dst = np.empty((n, *(y.shape[1:] if y.ndim and y.shape[0] == 1 else y.shape)), y.dtype)
                results.append(dst)
                outs.append(dst.reshape(n, -1).view(np.uint8))
                out_offs.append(p[0])
            if not outs:  # (a model without outputs: the Python loop runs it)
                return None
            for a, o in ((*zip(ins, in_offs), *zip(outs, out_offs))):
                if a.shape[1] > arena.nbytes - o:  # (place() checked the views; these are the arrays' rows)
                    return None
            from ..runtime import rows  # lazy: imports Numba's intrinsic machinery

            at = np.zeros(1, np.int64)
            try:
                rows.run_rows(np.array([p[0] for p in program], np.int64), arena, tuple(p[1] for p in program),
                              tuple(p[2] for p in program), tuple(p[3] for p in program),
                              tuple(p[4] for p in program), tuple(ins), np.array(in_offs, np.int64), tuple(outs),
                              np.array(out_offs, np.int64), at)
            except (ValueError, IndexError, ZeroDivisionError) as e:  # as invoke reports them, and which example
                raise InvokeError(f"{e}\nNode failed to invoke (subgraph 0), on example {int(at[0])} of the {n} "
                                  f"run together.") from None
            return results
        finally:
            self._slot.append(None)

    def get_tensor(self, tensor_index: int, subgraph_index: int = 0) -> np.ndarray:
        """A copy of a tensor's current value."""
        if not self._slot:
            raise self._busy("get_tensor")
        if subgraph_index == 0:
            rt = self._main
            view = rt.fast_views.get(tensor_index) if type(tensor_index) is int else None
            if view is not None:
                return view.copy()
        else:
            _check_int(subgraph_index, "subgraph_index")
            n = len(self.model.subgraphs)
            if not 0 <= subgraph_index < n:
                raise ValueError(f"Invalid subgraph index {subgraph_index} exceeds max subgraph index {n}")
            rt = self._runtime(subgraph_index)
        self._check_index(rt, tensor_index)
        return np.array(rt.array(tensor_index), copy=True)

    def tensor(self, tensor_index: int):
        """A function returning a numpy view of the tensor's current storage, as officially: call it again after
        allocate_tensors() (views move), and do not keep the array across invoke(), allocate_tensors() or
        resize_tensor_input(), which raise RuntimeError while one is alive (the official text)."""
        self._check_index(self._main, tensor_index)
        return lambda: self._view(tensor_index)

    def _view(self, i: int) -> np.ndarray:
        rt = self._main
        storage = rt.array(i)
        if rt.tensors[i].is_const or storage.dtype == np.dtype(object):
            v = storage.view()
            v.flags.writeable = False  # writing a constant would change what the compiled plan assumed
            return v
        arena = rt.arena
        if storage.base is arena:
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
        _check_int(input_index, "input_index")
        self._enter("resize_tensor_input")
        try:
            self._ensure_safe()
            resize_input(self._runtime(0), input_index, tensor_size, strict)
        finally:
            self._slot.append(None)

    def reset_all_variables(self) -> None:
        """Reset variable tensors (is_variable: zeros, or the zero point when quantized) in every subgraph.

        As in the official runtime, resource variables (VAR_HANDLE/ASSIGN_VARIABLE) keep their values and CALL_ONCE
        does not run again (measured with ai-edge-litert 2.3)."""
        self._enter("reset_all_variables")
        try:
            for rt in self._runtimes.values():
                rt.init_variables()
        finally:
            self._slot.append(None)

    # --- copies for other threads and processes (lite_numba.api.interpreter_state) --------------------------------
    def clone(self) -> "Interpreter":
        """Another interpreter of the same model for another thread: it shares the loaded model (constant weights),
        the op resolution and the compiled code, has its own arena and state, and is allocated for the same input
        shapes when this one is. Inputs, outputs and variables are not copied (`copy.deepcopy` copies them)."""
        return clone_interpreter(self)

    def __copy__(self) -> "Interpreter":
        return copy_interpreter(self)

    def __deepcopy__(self, memo) -> "Interpreter":
        return copy_interpreter(self)

    def __reduce__(self):
        """Pickles as the model bytes, the options, the op resolver and custom ops by reference (their modules are
        imported where it is unpickled) and the state: input shapes, allocation, tensor values and variables."""
        return pickle_interpreter(self)

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


def set_tensor(rt: GraphRuntime, tensor_index: int, value) -> None:
    """Copy `value` into tensor `tensor_index` of `rt`, with the official checks and messages."""
    _check_int(tensor_index, "tensor_index")
    n = len(rt.tensors)
    if not 0 <= tensor_index < n:
        raise ValueError(f"Invalid tensor index {tensor_index} exceeds max tensor index {n}")
    t = rt.tensors[tensor_index]
    value = np.asarray(value)
    pos = rt.plan.inputs.index(tensor_index) if tensor_index in rt.plan.inputs else tensor_index
    if value.dtype != t.dtype:
        raise ValueError(f"Cannot set tensor: Got value of type {type_name(value.dtype)} but expected type "
                         f"{type_name(t.dtype)} for input {pos}, name: {t.name} ")
    if value.ndim != len(t.shape):
        raise ValueError(f"Cannot set tensor: Dimension mismatch. Got {value.ndim} but expected {len(t.shape)} "
                         f"for input {pos}.")
    for d, (got, want) in enumerate(zip(value.shape, t.shape)):
        if got != want:
            raise ValueError(f"Cannot set tensor: Dimension mismatch. Got {got} but expected {want} for dimension "
                             f"{d} of input {pos}.")
    if t.is_const:
        raise ValueError(f"Cannot set tensor: tensor {tensor_index} ({t.name}) is a constant")
    if not rt.ready:
        raise ValueError("Cannot set tensor: Tensor is unallocated. Try calling allocate_tensors() first")
    np.copyto(rt.array(tensor_index), value)


def allocate_fresh(rt: GraphRuntime) -> None:
    """allocate_tensors() after a resize: prepare and plan again, then reset the variable tensors (zeros, or the zero
    point when quantized). The official Subgraph::AllocateTensors resets them whenever it re-allocates (a resize to
    a new shape); when nothing was resized it returns early and the state carries on (measured with ai-edge-litert
    2.3: an LSTM invoked, resized and invoked again gives what a fresh interpreter of the new shape gives)."""
    rt.allocate()
    rt.init_variables()


def resize_input(rt: GraphRuntime, input_index: int, tensor_size, strict: bool) -> None:
    """Give input `input_index` of `rt` a new shape (checked; `strict` allows only the -1 dimensions to change)."""
    _check_int(input_index, "input_index")
    n = len(rt.tensors)
    if not 0 <= input_index < n:
        raise ValueError(f"Invalid tensor index {input_index} exceeds max tensor index {n}")
    if input_index not in rt.plan.inputs:
        raise ValueError(f"Tensor {input_index} is not an input of the graph")
    shape = tuple(int(d) for d in np.asarray(tensor_size).reshape(-1))
    if any(d < 0 for d in shape):  # the official runtime fails with a RuntimeError (its size computation overflows)
        raise RuntimeError(f"Cannot resize input {input_index} to {list(shape)}: dimensions must be >= 0 (-1 marks "
                           f"an unknown dimension in shape_signature; give its size)")
    t = rt.tensors[input_index]
    if strict:
        sig = t.spec.shape_signature
        if len(sig) != len(shape):
            raise RuntimeError(f"ResizeInputTensorStrict: rank of tensor {input_index} is {len(sig)}, "
                               f"got shape {list(shape)}")
        for d, (s, new) in enumerate(zip(sig, shape)):
            if s != -1 and s != new:
                raise RuntimeError(
                    f"Attempting to resize dimension {d} of tensor {input_index} with value {t.shape[d]} to {new}. "
                    f"ResizeInputTensorStrict only allows mutating unknown dimensions identified by -1.")
    if int(np.prod(shape, dtype=np.float64)) * t.dtype.itemsize > (1 << 34):
        raise ValueError(f"Cannot resize input {input_index} to {list(shape)}: too large")
    if shape != t.shape:
        t.shape = shape
        rt.ready = False
        rt.fast_views = {}


class SignatureRunner:
    """Runs one SignatureDef: `runner(**inputs) -> {output name: array}`. Made by
    `Interpreter.get_signature_runner(key)` or, as officially, `SignatureRunner(interpreter, signature_key=key)`."""

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
        self._rt = interpreter._runtime(s.subgraph_index)

    def get_input_details(self) -> dict[str, dict]:
        return {name: _detail(self._rt.plan.tensors[i], self._rt.tensors[i].shape)
                for name, i in self._sig.inputs.items()}

    def get_output_details(self) -> dict[str, dict]:
        return {name: _detail(self._rt.plan.tensors[i], self._rt.tensors[i].shape)
                for name, i in self._sig.outputs.items()}

    def allocate_tensors(self) -> None:
        if not self._rt.ready:
            allocate_fresh(self._rt)

    def __call__(self, **kwargs) -> dict[str, np.ndarray]:
        if len(kwargs) != len(self._sig.inputs):
            raise ValueError(f"Invalid number of inputs provided for running a SignatureDef, expected "
                             f"{len(self._sig.inputs)} vs provided {len(kwargs)}")
        interp = self._interp
        interp._enter("SignatureRunner.__call__")
        try:
            interp._ensure_safe()
            rt = self._rt
            for name, value in kwargs.items():
                if name not in self._sig.inputs:
                    raise ValueError(f"Invalid Input name ({name}) for SignatureDef")
                i = self._sig.inputs[name]
                value = np.asarray(value)
                if value.shape != rt.tensors[i].shape:
                    resize_input(rt, i, value.shape, False)
            if not rt.ready:
                allocate_fresh(rt)
            for name, value in kwargs.items():
                set_tensor(rt, self._sig.inputs[name], value)
            rt.invoke()
            return {name: np.array(rt.array(i), copy=True) for name, i in self._sig.outputs.items()}
        finally:
            interp._slot.append(None)


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
                else:
                    raise ValueError(f"lite-numba cannot load the native op registerer {reg!r}: register custom ops "
                                     f"with @lite_numba.custom_op or a callable taking a MutableOpResolver")
            kwargs["op_resolver"] = resolver
        super().__init__(**kwargs)


__all__ = ["Interpreter", "InterpreterWithCustomOps", "SignatureRunner", "OpResolverType", "ModelError",
           "ModelFileError", "Delegate", "DelegateError", "load_delegate"]
