"""Interpreter and SignatureRunner with the official Python API (ai_edge_litert.interpreter)."""

from __future__ import annotations

import enum
import os
from collections import OrderedDict
from typing import Any

import numpy as np

from .executor import GraphRuntime, InvokeError
from .fusion import fuse
from .model import ModelError, load_model, read_model_bytes
from .plan import ModelPlan, TensorSpec
from .profiling import profile_interpreter, trace_invoke
from .resolver import OpResolver, default_op_resolver
from .schema import type_name


class OpResolverType(enum.Enum):
    """Accepted for compatibility with the official constructor; lite-numba has one set of kernels."""

    AUTO = 0
    BUILTIN = 1
    BUILTIN_REF = 2
    BUILTIN_WITHOUT_DEFAULT_DELEGATES = 3


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


class Interpreter:
    """Runs a .tflite model; the API of `ai_edge_litert.interpreter.Interpreter`.

    `Interpreter(model)` accepts a path or the model's bytes. `op_resolver` selects the kernels (default: every
    builtin, the shipped plugins and every @custom_op). A builtin op version we lack fails here with the official
    ValueError; an unresolved custom op fails at `allocate_tensors()` with the official RuntimeError.

    `max_arena_bytes` (lite-numba only, off by default): the most memory one subgraph's tensors may need; a model
    needing more fails at `allocate_tensors()` (or when a shape grows at run time) with
    `lite_numba.planner.ArenaLimitError`, a MemoryError naming the tensor. Without it the limit is the machine's
    physical memory.
    """

    def __init__(self, model_path: str | os.PathLike | bytes | None = None, model_content: bytes | None = None,
                 experimental_delegates=None, num_threads: int | None = None,
                 experimental_op_resolver_type: Any = None, experimental_preserve_all_tensors: bool = False,
                 op_resolver: OpResolver | None = None, max_arena_bytes: int | None = None, **_ignored):
        if isinstance(model_path, (bytes, bytearray, memoryview)):
            model_path, model_content = None, model_path
        if model_path is not None and model_content is not None:
            raise ValueError("Can't both provide `model_path` and `model_content`")
        if model_path is not None:
            self._data = read_model_bytes(model_path)
        elif model_content is not None:
            self._data = bytes(model_content) if not isinstance(model_content, bytes) else model_content
        else:
            raise ValueError("Can't create interpreter: provide a model path or content")
        if num_threads is not None and (not isinstance(num_threads, int) or num_threads < -1):
            raise ValueError("num_threads should be an integer >= -1")
        self._num_threads = 1 if num_threads in (None, -1, 0) else num_threads
        self._preserve_all = bool(experimental_preserve_all_tensors)
        self.model: ModelPlan = load_model(self._data)
        self._resolver = op_resolver if op_resolver is not None else default_op_resolver()
        self._kernels = [self._resolve_subgraph(sg) for sg in self.model.subgraphs]
        self._runtimes: dict[int, GraphRuntime] = {}
        self._trace = os.environ.get("LITE_NUMBA_TRACE", "") not in ("", "0")
        self.resources: dict = {}
        self.max_while_iterations: int | None = None  # WHILE raises RuntimeError after this many iterations
        if max_arena_bytes is not None and (not isinstance(max_arena_bytes, int) or max_arena_bytes <= 0):
            raise ValueError(f"max_arena_bytes must be a positive int, got {max_arena_bytes!r}")
        self.max_arena_bytes = max_arena_bytes  # read by every subgraph's GraphRuntime (planner.memory_limit)
        self._call_depth = 0
        self._shape_cache: dict[int, OrderedDict] = {}  # called subgraphs prepared per input shapes
        self._shape_hits: dict[int, dict] = {}  # uses of each cached preparation (eviction order)
        self._bound: dict[tuple, BoundSubgraph] = {}  # (subgraph, input shapes) -> bind_subgraph's result
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
        if not self._preserve_all:  # rewrites that keep value-dependent patterns static (lite_numba.fusion)
            plan, kernels = fuse(plan, kernels)
        return GraphRuntime(plan, kernels, num_threads=self._num_threads, preserve_all_tensors=self._preserve_all,
                            subgraph_index=subgraph_index, host_env=self)

    # --- the official API -------------------------------------------------------------------------------------
    def allocate_tensors(self) -> None:
        """Prepare every node, plan memory and compile the executor (cached on disk)."""
        self._runtime(0).allocate()

    def invoke(self) -> None:
        """Run the model once on the inputs set. With $LITE_NUMBA_TRACE set, prints every node as it runs."""
        if self._trace:
            trace_invoke(self)
            return
        self._main.invoke()

    def profile(self, num_runs: int = 10, warmup_runs: int = 1):
        """Run the model `num_runs` times timing every node; returns a `lite_numba.profiling.Profile`."""
        return profile_interpreter(self, num_runs=num_runs, warmup_runs=warmup_runs)

    @property
    def arena_size(self) -> int:
        """Bytes of the activation arena of subgraph 0 (after allocate_tensors)."""
        return self._runtime(0).arena_size

    def num_subgraphs(self) -> int:
        return len(self.model.subgraphs)

    def _check_index(self, rt: GraphRuntime, i: int) -> None:
        n = len(rt.tensors)
        if not isinstance(i, (int, np.integer)) or i < 0 or i >= n:
            raise ValueError(f"Invalid tensor index {i} exceeds max tensor index {n}")

    def _details(self, rt: GraphRuntime, indices) -> list[dict]:
        return [_detail(rt.plan.tensors[i], rt.tensors[i].shape) for i in indices]

    def get_input_details(self) -> list[dict]:
        rt = self._runtime(0)
        return self._details(rt, rt.plan.inputs)

    def get_output_details(self) -> list[dict]:
        rt = self._runtime(0)
        return self._details(rt, rt.plan.outputs)

    def get_tensor_details(self) -> list[dict]:
        rt = self._runtime(0)
        return self._details(rt, range(len(rt.plan.tensors)))

    def set_tensor(self, tensor_index: int, value) -> None:
        """Copy `value` into a tensor (an input), checking dtype and shape with the official messages."""
        rt = self._main
        view = rt.fast_views.get(tensor_index) if type(value) is np.ndarray else None
        if view is not None and value.dtype == view.dtype and value.shape == view.shape:
            view[...] = value  # the common case, checked: same dtype and shape as the planned tensor
            return
        set_tensor(rt, tensor_index, value)

    def get_tensor(self, tensor_index: int, subgraph_index: int = 0) -> np.ndarray:
        """A copy of a tensor's current value."""
        rt = self._main if subgraph_index == 0 else self._runtime(subgraph_index)
        view = rt.fast_views.get(tensor_index)
        if view is not None:
            return view.copy()
        self._check_index(rt, tensor_index)
        return np.array(rt.array(tensor_index), copy=True)

    def tensor(self, tensor_index: int):
        """A function returning a live numpy view of the tensor (valid until the next allocate_tensors)."""
        rt = self._runtime(0)
        self._check_index(rt, tensor_index)
        return lambda: rt.array(tensor_index)

    def resize_tensor_input(self, input_index: int, tensor_size, strict: bool = False) -> None:
        """Change an input's shape; takes effect at the next allocate_tensors()."""
        resize_input(self._runtime(0), input_index, tensor_size, strict)

    def reset_all_variables(self) -> None:
        """Reset variable tensors (is_variable: zeros, or the zero point when quantized) in every subgraph.

        As in the official runtime, resource variables (VAR_HANDLE/ASSIGN_VARIABLE) keep their values and CALL_ONCE
        does not run again (measured with ai-edge-litert 2.3)."""
        for rt in self._runtimes.values():
            rt.init_variables()

    # --- services for host ops (control flow) -----------------------------------------------------------------
    def subgraph_io(self, index: int) -> tuple[list, list]:
        sg = self.model.subgraphs[index]
        io = lambda idx: [(sg.tensors[i].dtype, sg.tensors[i].shape) for i in idx]  # noqa: E731
        return io(sg.inputs), io(sg.outputs)

    # A called subgraph (WHILE body and cond, IF branches) whose input shapes change is prepared again; the prepared
    # runtimes of the last SUBGRAPH_SHAPE_CACHE input-shape signatures (at most SUBGRAPH_CACHE_BYTES of arenas) are
    # kept, so a loop whose tensors grow one row per iteration re-prepares its body only on the first invoke.
    # Subgraphs with variable tensors keep one runtime (their state must carry over).
    SUBGRAPH_SHAPE_CACHE = 64
    SUBGRAPH_CACHE_BYTES = 64 << 20

    def _subgraph_runtime(self, index: int, shapes: tuple) -> GraphRuntime:
        """Subgraph `index`'s runtime, allocated for these input shapes."""
        rt = self._runtime(index)
        sg = rt.plan
        if rt.ready and all(rt.tensors[i].shape == s for i, s in zip(sg.inputs, shapes)):
            return rt
        if index != 0 and not any(t.is_variable for t in sg.tensors):
            cache = self._shape_cache.setdefault(index, OrderedDict())
            if rt.ready:
                cache[tuple(rt.tensors[i].shape for i in sg.inputs)] = rt
            hits = self._shape_hits.setdefault(index, {})
            cached = cache.get(shapes)
            if cached is not None and cached.ready:
                cache.move_to_end(shapes)
                hits[shapes] = hits.get(shapes, 0) + 1
                self._runtimes[index] = cached
                return cached
            if rt.ready:
                if len(cache) >= self.SUBGRAPH_SHAPE_CACHE:
                    # the entry used least often, the newest of those: a loop through more shapes than the cache
                    # holds keeps the first ones and re-prepares one runtime for the rest (LRU would miss always)
                    victim, least = None, None
                    for key in cache:
                        h = hits.get(key, 0)
                        if least is None or h <= least:
                            victim, least = key, h
                    rt = cache.pop(victim)
                    hits.pop(victim, None)
                    self._unbind(rt)
                else:
                    rt = self._new_runtime(index)
            cache[shapes] = rt
            total = sum(r.arena.nbytes for r in cache.values())
            while len(cache) > 1 and total > self.SUBGRAPH_CACHE_BYTES:
                key, old = cache.popitem(last=False)
                hits.pop(key, None)
                total -= old.arena.nbytes
                self._release(old)
            self._runtimes[index] = rt
        for t_index, shape in zip(sg.inputs, shapes):
            rt.tensors[t_index].shape = shape
        rt.ready = False
        rt.fast_views = {}
        rt.allocate()
        return rt

    def _cached_runtimes(self) -> list:
        return list(self._runtimes.values()) + [r for c in self._shape_cache.values() for r in c.values()]

    def _unbind(self, rt: GraphRuntime) -> None:
        """Forget the bindings of a runtime about to be prepared again or released (they hold its storage)."""
        for key in [k for k, b in self._bound.items() if b.rt is rt]:
            del self._bound[key]

    def _release(self, rt: GraphRuntime) -> None:
        """Drop an evicted runtime's storage; holders of a binding see it invalid and bind again."""
        self._unbind(rt)
        rt.ready = False
        rt.arena = np.zeros(0, np.uint8)
        rt.views = {}
        rt.fast_views = {}

    def _check_call(self, index: int, inputs) -> GraphRuntime:
        if not 0 <= index < len(self.model.subgraphs):
            raise ValueError(f"Invalid subgraph index {index}; the model has {len(self.model.subgraphs)} subgraphs")
        sg = self.model.subgraphs[index]
        if len(inputs) != len(sg.inputs):
            raise RuntimeError(f"subgraph {index} takes {len(sg.inputs)} inputs, got {len(inputs)}")
        if self._call_depth > 64:
            raise RuntimeError("subgraph calls nested more than 64 deep")
        for t_index, value in zip(sg.inputs, inputs):
            t = sg.tensors[t_index]
            if value.dtype != t.dtype:
                raise RuntimeError(f"subgraph {index} input {t.name!r} has type {t.dtype.name}, got {value.dtype.name}")
        return self._subgraph_runtime(index, tuple(tuple(v.shape) for v in inputs))

    def call_subgraph(self, index: int, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Run subgraph `index` on `inputs` (preparing it for their shapes when they change); copies of outputs."""
        rt = self._check_call(index, inputs)
        sg = rt.plan
        for t_index, value in zip(sg.inputs, inputs):
            np.copyto(rt.array(t_index), value)
        self._call_depth += 1
        try:
            rt.invoke()
        finally:
            self._call_depth -= 1
        return [np.array(rt.array(o), copy=True) for o in sg.outputs]

    def subgraph_output_shapes(self, index: int, shapes: list[tuple]) -> list[tuple] | None:
        """Output shapes of subgraph `index` prepared for these input shapes; None if one is only known at run time."""
        if not 0 <= index < len(self.model.subgraphs):
            raise ValueError(f"Invalid subgraph index {index}; the model has {len(self.model.subgraphs)} subgraphs")
        rt = self._subgraph_runtime(index, tuple(tuple(int(d) for d in s) for s in shapes))
        if not all(o in rt.fast_views for o in rt.plan.outputs):
            return None
        return [rt.tensors[o].shape for o in rt.plan.outputs]

    def bind_subgraph(self, index: int, inputs: list[np.ndarray]) -> "BoundSubgraph":
        """Subgraph `index` prepared for the shapes and dtypes of `inputs` (not copied), to be run many times."""
        key = (index, tuple(v.shape for v in inputs))
        b = self._bound.get(key)
        if b is not None and b.valid() and all(v.dtype == dt for v, dt in zip(inputs, b.dtypes)):
            return b
        rt = self._check_call(index, inputs)
        if len(self._bound) >= 4 * self.SUBGRAPH_SHAPE_CACHE:  # bindings of runtimes no longer cached
            self._bound = {k: v for k, v in self._bound.items() if v.valid() and v.rt in self._cached_runtimes()}
        b = self._bound[key] = BoundSubgraph(self, rt)
        return b

    def get_signature_list(self) -> dict:
        return {s.key: {"inputs": list(s.inputs), "outputs": list(s.outputs)} for s in self.model.signatures}

    def get_signature_runner(self, signature_key: str | None = None) -> "SignatureRunner":
        sigs = self.model.signatures
        if signature_key is None:
            if len(sigs) != 1:
                raise ValueError("SignatureDef signature_key is None and model has {0} Signatures. "
                                 "None is only allowed when the model has 1 SignatureDef".format(len(sigs)))
            signature_key = sigs[0].key
        for s in sigs:
            if s.key == signature_key:
                return SignatureRunner(self, s)
        raise ValueError(f'Invalid signature_key provided: "{signature_key}".')


def _nothing() -> None:
    pass


class BoundSubgraph:
    """A called subgraph prepared for fixed input shapes (Interpreter.bind_subgraph), for host ops that run it many
    times (WHILE): `inputs` are its input tensors' storage (write them, then `run()`), `output(k)` output k's
    current storage. `static_outputs` is True when every output is planned in the arena with a fixed shape (then
    `outputs` lists their storage). Valid while `valid()` (the runtime has not been prepared again since)."""

    def __init__(self, interp: Interpreter, rt: GraphRuntime):
        self._interp = interp
        self.rt = rt
        self._arena = rt.arena
        sg = rt.plan
        self.inputs = [rt.array(i) for i in sg.inputs]
        self.dtypes = [a.dtype for a in self.inputs]
        self.static_outputs = all(o in rt.fast_views for o in sg.outputs)
        self.outputs = [rt.array(o) for o in sg.outputs] if self.static_outputs else None
        # inputs no node reads and no output returns (a WHILE cond often ignores most loop variables)
        used = {i for n in sg.nodes for i in n.inputs} | set(sg.outputs)
        self.used_inputs = [k for k, i in enumerate(sg.inputs) if i in used]
        # `program`: the invoke sequence when it has only compiled segments and host nodes run with their allocate
        # preparation (no node prepared at run time, no speculation), which run() then calls itself; `single`: the
        # one call of a subgraph without host nodes, for loops that call it directly (errors through `fail`).
        # `calls_nothing`: no host node, so running it calls no other subgraph.
        prog = rt.program
        plain = not rt.assumed and not rt._spec_pending and not rt._spec_allowed and not any(
            getattr(fn, "__func__", None) is GraphRuntime._run_dynamic for fn, _ in prog)
        self.program = list(prog) if plain else None
        self.calls_nothing = not rt.dynamic_nodes
        self.single = None
        if plain and self.calls_nothing and len(prog) <= 1:
            self.single = prog[0] if prog else (_nothing, ())

    def fail(self, e: Exception):
        """Raise an error of a direct call as invoke() does."""
        raise InvokeError(f"{e}\nNode failed to invoke (subgraph {self.rt.subgraph_index}).") from None

    def valid(self) -> bool:
        return self.rt.ready and self.rt.arena is self._arena

    def output(self, k: int) -> np.ndarray:
        return self.rt.array(self.rt.plan.outputs[k])

    def run(self) -> None:
        prog = self.program
        if prog is not None and self.calls_nothing:
            try:
                for fn, args in prog:
                    fn(*args)
            except (ValueError, IndexError, ZeroDivisionError) as e:
                if isinstance(e, RuntimeError):
                    raise
                self.fail(e)
            return
        interp = self._interp
        if interp._call_depth > 64:
            raise RuntimeError("subgraph calls nested more than 64 deep")
        interp._call_depth += 1
        try:
            if prog is None:
                self.rt.invoke()
                return
            for fn, args in prog:
                fn(*args)
        except (ValueError, IndexError, ZeroDivisionError) as e:
            if isinstance(e, RuntimeError):
                raise
            self.fail(e)
        finally:
            interp._call_depth -= 1


def set_tensor(rt: GraphRuntime, tensor_index: int, value) -> None:
    n = len(rt.tensors)
    if not isinstance(tensor_index, (int, np.integer)) or not 0 <= tensor_index < n:
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
        raise ValueError("Tensor data is null. Run allocate_tensors() first")
    np.copyto(rt.array(tensor_index), value)


def resize_input(rt: GraphRuntime, input_index: int, tensor_size, strict: bool) -> None:
    n = len(rt.tensors)
    if not isinstance(input_index, (int, np.integer)) or not 0 <= input_index < n:
        raise ValueError(f"Invalid tensor index {input_index} exceeds max tensor index {n}")
    if input_index not in rt.plan.inputs:
        raise ValueError(f"Tensor {input_index} is not an input of the graph")
    shape = tuple(int(d) for d in np.asarray(tensor_size).reshape(-1))
    if any(d < 0 for d in shape):
        raise ValueError(f"Cannot resize input {input_index} to {list(shape)}: negative dimension")
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
    """Runs one SignatureDef: `runner(**inputs) -> {output name: array}`."""

    def __init__(self, interpreter: Interpreter, signature):
        self._interp = interpreter
        self._sig = signature
        self._rt = interpreter._runtime(signature.subgraph_index)

    def get_input_details(self) -> dict[str, dict]:
        return {name: _detail(self._rt.plan.tensors[i], self._rt.tensors[i].shape)
                for name, i in self._sig.inputs.items()}

    def get_output_details(self) -> dict[str, dict]:
        return {name: _detail(self._rt.plan.tensors[i], self._rt.tensors[i].shape)
                for name, i in self._sig.outputs.items()}

    def allocate_tensors(self) -> None:
        self._rt.allocate()

    def __call__(self, **kwargs) -> dict[str, np.ndarray]:
        if len(kwargs) != len(self._sig.inputs):
            raise ValueError(f"Invalid number of inputs provided for running a SignatureDef, expected "
                             f"{len(self._sig.inputs)} vs provided {len(kwargs)}")
        rt = self._rt
        for name, value in kwargs.items():
            if name not in self._sig.inputs:
                raise ValueError(f"Invalid Input name ({name}) for SignatureDef")
            i = self._sig.inputs[name]
            value = np.asarray(value)
            if value.shape != rt.tensors[i].shape:
                resize_input(rt, i, value.shape, False)
        if not rt.ready:
            rt.allocate()
        for name, value in kwargs.items():
            set_tensor(rt, self._sig.inputs[name], value)
        rt.invoke()
        return {name: np.array(rt.array(i), copy=True) for name, i in self._sig.outputs.items()}


__all__ = ["Interpreter", "SignatureRunner", "OpResolverType", "ModelError"]
