"""The runtime of one loaded model: the one owner of its graph runtimes.

`ModelRuntime` holds a model's `GraphRuntime`s (subgraph 0 and every subgraph a host op or a signature runs), the
cache of called subgraphs prepared per input shapes and their bindings, and the resources the ops share (resource
variables, CALL_ONCE flags, TensorLists). Everything above the runtime — `Interpreter`, `SignatureRunner`, the batch
loop, profiling, the benchmark tool, clones and pickles — works through its methods: tensor I/O (`set_tensor`,
`get_tensor`, `storage`, `io_views`), `resize_input`, `allocate`, `invalidate`, `invoke`, `run_rows`, `profile`,
`share`, `capture_state` / `restore_state` and `release`; a signature call with its inputs and outputs in the
caller's arrays (`run_in_place`, `set_writable_inputs`, `shares_storage`: runtime.signature_io, docs/design/llm.md).
Host kernels reach it through their `PrepareContext` (`call_subgraph`, `bind_subgraph`, `subgraph_io`,
`subgraph_output_shapes`, `restart_variables`, `resources`, `max_while_iterations`).

It knows nothing of threads or of the official API's view rules: those are the Interpreter's.
"""

from __future__ import annotations

import copy
import math
from collections import OrderedDict
from typing import TextIO

import numpy as np

from ..format.plan import ModelPlan
from ..format.schema import type_name
from ..ops import OpKernel, forwarded
from .composites import inline_composites
from .control.plan_cache import PlanCache
from .control.state import ControlState
from .errors import InvokeError
from .executor import GraphRuntime
from .fusion import fuse
from .fusion_bands import fuse_conv_bands
from .native import image
from .profiling import Profile, profile_runtime, trace_runtime
from .signature_io import SignatureIO

__all__ = ["BoundSubgraph", "ModelRuntime", "check_int"]

# resources: key -> array, pinned once compiled code uses its address (restored in place)
_VARIABLE_KEYS = ("variables", "variable_flags", "call_once_flags")
MAX_CALL_DEPTH = 64


def check_int(value, what: str) -> None:
    """TypeError for an index that is not an integer, as the official bindings raise."""
    if not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an int, got {type(value).__name__} {value!r}")


class ModelRuntime:
    """The graph runtimes of one model and what they share (see the module docstring).

    `kernels[k][n]` is the kernel resolved for node n of subgraph k (None: an unresolved custom op, reported when the
    node is prepared). `max_arena_bytes` caps the memory one subgraph's tensors may need (lite_numba.runtime.arena);
    `max_while_iterations` caps WHILE loops (None: no cap, as officially).

    Variable tensors (is_variable) of a called subgraph restart from zeros (their zero point when quantized) whenever
    the official runtime allocates that subgraph again, which is what its Subgraph::AllocateTensors does: when the
    subgraph is prepared for new input shapes (WHILE and IF prepare, a loop variable changing shape), and at every
    WHILE or IF run, because both release their subgraphs' memory after running (Subgraph::ReleaseMemory makes the
    next AllocateTensors a full one) unless experimental_preserve_all_tensors is set. Within one WHILE run the body
    keeps its state from iteration to iteration while the loop variables keep their shapes. Measured with
    ai-edge-litert 2.3 (an RNN cell with a variable hidden state in a WHILE body and in an IF branch)."""

    # A called subgraph (WHILE body and cond, IF branches) whose input shapes change is prepared again; the prepared
    # runtimes of the last SUBGRAPH_SHAPE_CACHE input-shape signatures (at most SUBGRAPH_CACHE_BYTES of arenas) are
    # kept, so a loop whose tensors grow one row per iteration re-prepares its body only on the first invoke.
    # Subgraphs with variable tensors keep one runtime (their state must carry over).
    SUBGRAPH_SHAPE_CACHE = 64
    SUBGRAPH_CACHE_BYTES = 64 << 20

    def __init__(self, model: ModelPlan, kernels: list[list[OpKernel | None]], *, num_threads: int = 1,
                 preserve_all_tensors: bool = False, max_arena_bytes: int | None = None):
        if max_arena_bytes is not None and (not isinstance(max_arena_bytes, int) or max_arena_bytes <= 0):
            raise ValueError(f"max_arena_bytes must be a positive int, got {max_arena_bytes!r}")
        self.model = model
        self.kernels = kernels
        self.num_threads = num_threads
        self.preserve_all = preserve_all_tensors
        self.max_arena_bytes = max_arena_bytes  # read by every subgraph's GraphRuntime (arena.memory_limit)
        self.control = ControlState()  # control flow lowered into runners: paths, the WHILE cap (runtime.control)
        self.plans = PlanCache()  # subgraph 0's plans per input shapes (runtime.control.plan_cache)
        self.resources: dict = {}
        self._graphs: dict[int, GraphRuntime] = {}
        self._shape_cache: dict[int, OrderedDict] = {}  # called subgraphs prepared per input shapes
        self._shape_hits: dict[int, dict] = {}  # uses of each cached preparation (eviction order)
        self._bound: dict[tuple, BoundSubgraph] = {}  # (subgraph, input shapes) -> bind_subgraph's result
        self._variable_subgraphs: frozenset | None = None  # subgraphs with variable tensors (restart_variables)
        self._call_depth = 0
        self._io: dict[int, SignatureIO] = {}  # run_in_place's state per signature subgraph
        self.main = self.graph(0)

    # --- graphs -----------------------------------------------------------------------------------------------
    def graph(self, index: int) -> GraphRuntime:
        """Subgraph `index`'s runtime (made on first use, not allocated)."""
        rt = self._graphs.get(index)
        if rt is None:
            rt = self._graphs[index] = self._new_graph(index)
        return rt

    def _new_graph(self, index: int) -> GraphRuntime:
        if not 0 <= index < len(self.model.subgraphs):
            raise ValueError(f"Invalid subgraph index {index}; the model has {len(self.model.subgraphs)} subgraphs")
        plan, kernels = inline_composites(self.model, index, self.kernels)  # composites rewritten (runtime.composites)
        if not self.preserve_all:  # rewrites that keep value-dependent patterns static (runtime.fusion)
            plan, kernels = fuse_conv_bands(*fuse(plan, kernels))
        return GraphRuntime(plan, kernels, num_threads=self.num_threads, preserve_all_tensors=self.preserve_all,
                            subgraph_index=index, host_env=self)

    max_while_iterations = forwarded("control.max_while_iterations", "WHILE raises RuntimeError after this many "
                                     "iterations (None: no cap, as officially).", settable=True)

    def lower_control_flow(self, ctx, parent: GraphRuntime, host_reason: str | None = None) -> bool:
        """PrepareContext.lower_control_flow: the node inside its graph's compiled runner, or why not."""
        return self.control.lower(self, ctx, parent, host_reason)

    def failed_subgraph(self, index: int) -> int:
        """The subgraph to name when graph `index`'s invoke failed (inside lowered control flow: the inner one)."""
        return self.control.failed_subgraph(index)

    def private_graph(self, index: int, shapes: list[tuple]) -> GraphRuntime:
        """A runtime of subgraph `index` of its own, allocated for these input shapes, that nothing else runs or
        prepares again (lowered control flow calls its runners by address: runtime.control.lowering)."""
        rt = self._new_graph(index)
        for t_index, shape in zip(rt.plan.inputs, shapes):
            rt.set_input_shape(t_index, shape)
        rt.allocate()
        rt.init_variables()
        return rt

    ready = forwarded("main.ready", "Whether subgraph 0 is allocated for its current input shapes.")
    arena_size = forwarded("main.arena_size", "Bytes of subgraph 0's activation arena (after allocate).")
    arena = forwarded("main.arena", "Subgraph 0's arena (replaced by every allocation).")

    @property
    def io_views(self) -> dict[int, np.ndarray]:
        """{tensor index: arena view} of subgraph 0's static, non-constant tensors: the same dict object for the
        runtime's life, refilled by every allocation and emptied by a resize (set_tensor's and get_tensor's fast
        path, the batch loop's copies). Never hand these views to users: the Interpreter's tensor() does."""
        return self.main.fast_views

    def tensor(self, tensor_index: int, subgraph: int = 0):
        """The runtime Tensor of `tensor_index` (its current shape, dtype, quantization and TensorSpec)."""
        return self.graph(subgraph).tensors[tensor_index]

    def num_tensors(self, subgraph: int = 0) -> int:
        return len(self.graph(subgraph).tensors)

    def storage(self, tensor_index: int, subgraph: int = 0) -> np.ndarray:
        """The tensor's current storage (an arena view, a constant or a dynamic tensor's own array): not a copy."""
        if subgraph in self._io:
            self._io[subgraph].check_mark(tensor_index)
        string = self.graph(subgraph).tensors[tensor_index].dtype == object  # STRING: its value (packed storage)
        return self.get_tensor(tensor_index, subgraph) if string else self.graph(subgraph).array(tensor_index)

    # --- lifecycle --------------------------------------------------------------------------------------------
    def allocate(self, subgraph: int = 0) -> None:
        """allocate_tensors(): when the subgraph is not allocated for its current input shapes, prepare and plan it
        again, then reset its variable tensors (zeros, or the zero point when quantized). The official
        Subgraph::AllocateTensors resets them whenever it re-allocates (a resize to a new shape); when nothing was
        resized it returns early and the state carries on (measured with ai-edge-litert 2.3: an LSTM invoked,
        resized and invoked again gives what a fresh interpreter of the new shape gives)."""
        rt = self.graph(subgraph)
        if not rt.ready:
            image.materialize(rt)  # (restored from a native image and resized since: the normal path from here)
            # a streaming resize back to a shape seen before; a native image an earlier process saved
            restored = subgraph == 0 and (self.plans.restore(rt) or image.restore(self, rt))
            if not restored:
                rt.allocate()
                if subgraph == 0:
                    self.plans.save(rt)
            rt.init_variables()
            if subgraph == 0 and not restored:
                image.save(self, rt)

    def invalidate(self, subgraph: int = 0) -> None:
        """Mark the subgraph as needing allocation (the next allocate() prepares and plans it again)."""
        self.plans.clear()
        self.graph(subgraph).invalidate()

    def resize_input(self, tensor_index: int, shape, strict: bool = False, subgraph: int = 0) -> None:
        """Give input `tensor_index` a new shape, taking effect at the next allocate() (checked; `strict` allows
        only the -1 dimensions of the shape signature to change), with the official messages."""
        check_int(tensor_index, "input_index")
        rt = self.graph(subgraph)
        n = len(rt.tensors)
        if not 0 <= tensor_index < n:
            raise ValueError(f"Invalid tensor index {tensor_index} exceeds max tensor index {n}")
        if tensor_index not in rt.plan.inputs:
            raise ValueError(f"Tensor {tensor_index} is not an input of the graph")
        shape = tuple(int(d) for d in (shape if isinstance(shape, (tuple, list)) and all(  # (a streaming resize:
            type(d) is int for d in shape) else np.asarray(shape).reshape(-1)))  # no numpy for a list of ints)
        if any(d < 0 for d in shape):  # the official runtime fails with a RuntimeError (its size computation overflows)
            raise RuntimeError(f"Cannot resize input {tensor_index} to {list(shape)}: dimensions must be >= 0 (-1 "
                               f"marks an unknown dimension in shape_signature; give its size)")
        t = rt.tensors[tensor_index]
        if strict:
            sig = t.spec.shape_signature
            if len(sig) != len(shape):
                raise RuntimeError(f"ResizeInputTensorStrict: rank of tensor {tensor_index} is {len(sig)}, "
                                   f"got shape {list(shape)}")
            for d, (s, new) in enumerate(zip(sig, shape)):
                if s != -1 and s != new:
                    raise RuntimeError(
                        f"Attempting to resize dimension {d} of tensor {tensor_index} with value {t.shape[d]} to "
                        f"{new}. ResizeInputTensorStrict only allows mutating unknown dimensions identified by -1.")
        if math.prod(shape) * t.dtype.itemsize > (1 << 34):
            raise ValueError(f"Cannot resize input {tensor_index} to {list(shape)}: too large")
        if shape != t.shape:
            rt.set_input_shape(tensor_index, shape)

    def reset_variables(self) -> None:
        """Variable tensors of every subgraph back to zeros (their zero point when quantized)."""
        for rt in self._graphs.values():
            rt.init_variables()

    def release(self) -> None:
        """Drop every subgraph's storage and the called-subgraph cache; the next allocate() starts afresh."""
        for rt in self._cached_runtimes():
            rt.release()
        self.plans.clear()
        self._shape_cache.clear()
        self._shape_hits.clear()
        self._bound.clear()
        self._io.clear()

    # --- tensor I/O -------------------------------------------------------------------------------------------
    def set_tensor(self, tensor_index: int, value, subgraph: int = 0) -> None:
        """Copy `value` into tensor `tensor_index`, with the official checks and messages."""
        value = self.check_value(tensor_index, value, subgraph)
        rt = self.graph(subgraph)
        if value.dtype.kind in "OSU":  # a STRING tensor: packed into its storage (bytes kept, str as UTF-8)
            rt.strings.write_array(tensor_index, value, rt.tensors[tensor_index].name)
        else:
            np.copyto(rt.array(tensor_index), value)
        if subgraph in self._io:
            self._io[subgraph].clear_marks([tensor_index])

    def check_value(self, tensor_index: int, value, subgraph: int = 0) -> np.ndarray:
        """`value` as an array that set_tensor may copy into the allocated tensor (same dtype and shape), else the
        official ValueError."""
        check_int(tensor_index, "tensor_index")
        rt = self.graph(subgraph)
        n = len(rt.tensors)
        if not 0 <= tensor_index < n:
            raise ValueError(f"Invalid tensor index {tensor_index} exceeds max tensor index {n}")
        t = rt.tensors[tensor_index]
        value = np.asarray(value)
        pos = rt.plan.inputs.index(tensor_index) if tensor_index in rt.plan.inputs else tensor_index
        if value.dtype != t.dtype and not (t.dtype == object and value.dtype.kind in "OSU"):  # (STRING: bytes, str)
            got = "STRING" if value.dtype.kind in "OSU" else type_name(value.dtype)
            raise ValueError(f"Cannot set tensor: Got value of type {got} but expected type "
                             f"{type_name(t.dtype)} for input {pos}, name: {t.name} ")
        if value.ndim != len(t.shape):
            raise ValueError(f"Cannot set tensor: Dimension mismatch. Got {value.ndim} but expected {len(t.shape)} "
                             f"for input {pos}.")
        for d, (got, want) in enumerate(zip(value.shape, t.shape)):
            if got != want:
                raise ValueError(f"Cannot set tensor: Dimension mismatch. Got {got} but expected {want} for "
                                 f"dimension {d} of input {pos}.")
        if t.is_const:
            raise ValueError(f"Cannot set tensor: tensor {tensor_index} ({t.name}) is a constant")
        if not rt.ready:
            raise ValueError("Cannot set tensor: Tensor is unallocated. Try calling allocate_tensors() first")
        return value

    def get_tensor(self, tensor_index: int, subgraph: int = 0) -> np.ndarray:
        """A copy of the tensor's current value."""
        if subgraph in self._io:
            self._io[subgraph].check_mark(tensor_index)
        rt = self.graph(subgraph)
        if rt.tensors[tensor_index].dtype == object:  # STRING: an object array of bytes, as the official gives
            return rt.strings.read_array(tensor_index, rt.tensors[tensor_index])
        return np.array(rt.array(tensor_index), copy=True)

    # --- running ----------------------------------------------------------------------------------------------
    def invoke(self, subgraph: int = 0) -> None:
        self.graph(subgraph).invoke()

    def profile(self, num_runs: int = 10, warmup_runs: int = 1, subgraph: int = 0, **kwargs) -> Profile:
        """Run the subgraph `num_runs` times on the inputs set, timing every node (runtime.profiling)."""
        return profile_runtime(self.graph(subgraph), num_runs=num_runs, warmup_runs=warmup_runs, **kwargs)

    def trace(self, file: TextIO | None = None) -> None:
        """Run subgraph 0 once node by node, printing each node with its inputs and outputs (runtime.profiling)."""
        trace_runtime(self.main, file)

    def run_rows(self, inputs: list[tuple[int, np.ndarray]], outputs: list[int]) -> list[np.ndarray] | None:
        """One invoke of subgraph 0 per row of the arrays in `inputs` ((tensor index, array of n examples, each the
        tensor's shape with or without its leading 1)), all in one compiled call (runtime.rows), as that many
        set_tensor / invoke / get_tensor calls would; returns, for each index in `outputs`, its values stacked
        over the n examples (the leading 1 dropped). None when the invoke is not only compiled code over planned
        tensors (GraphRuntime.native_program), or a tensor is not planned or an array does not fit it exactly:
        the caller then loops in Python. Everything the compiled loop trusts is checked here first."""
        rt = self.main
        if not inputs:
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
        from . import rows  # lazy: imports Numba's intrinsic machinery

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

    # --- signature calls with their inputs and outputs in the caller's arrays (docs/design/llm.md) ---------------
    def set_writable_inputs(self, subgraph: int, inputs) -> None:
        """Let the graph update these inputs where they live (a KV cache bound with its same-named output to one
        buffer: arena.plan_aliases may then put the output in the input's storage). Takes effect at the next
        allocate() (the subgraph is invalidated when the set changes)."""
        rt = self.graph(subgraph)
        inputs = frozenset(inputs)
        if inputs != rt.writable_inputs:
            rt.writable_inputs = inputs
            rt.invalidate()

    def shares_storage(self, a: int, b: int, subgraph: int = 0) -> bool:
        """Whether the current plan put tensors a and b in one storage (arena.plan_aliases)."""
        aliases = self.graph(subgraph).aliases
        return aliases.get(a, a) == aliases.get(b, b)

    def run_in_place(self, subgraph: int, inputs: dict[int, np.ndarray], outputs: list[int],
                     buffers: dict[int, tuple[int | None, np.ndarray]], min_bytes: int) -> tuple[dict, dict]:
        """One run of the allocated `subgraph` with its inputs and outputs in the caller's arrays where the compiled
        code can be pointed at them, else copied (runtime.signature_io.SignatureIO.run); returns ({output tensor:
        array}, {tensor: bytes copied into or out of it}). Tensors kept outside the arena are marked (their arena
        storage is stale): get_tensor/storage on them, or invoking the subgraph before its inputs are set again,
        raise RuntimeError."""
        io = self._io.get(subgraph)
        if io is None or not io.valid(self.graph(subgraph)):
            io = self._io[subgraph] = SignatureIO(self.graph(subgraph))
        return io.run(inputs, outputs, buffers, min_bytes)

    def run_plan(self, subgraph: int, inputs: dict[int, np.ndarray], outputs: list[int],
                 buffers: dict[int, tuple[int | None, np.ndarray]], min_bytes: int):
        """What run_in_place does with these tensors and buffers, decided once (signature_io.RunPlan: `run(arrays)`
        while `valid()`), or None (not plannable, or the subgraph never ran in place)."""
        io = self._io.get(subgraph)
        return io.plan(inputs, outputs, buffers, min_bytes) if io is not None and io.valid(self.graph(subgraph)) \
            else None

    # --- copies: clone(), copy/deepcopy, pickling ---------------------------------------------------------------
    def shareable(self) -> bool:
        """Whether subgraph 0's preparation can be shared with a copy: allocated, every step a compiled segment (no
        host or dynamic node, whose prepared state is per runtime, no speculation) and no resources (resource
        variables hold addresses of per-runtime storage in the segments' tables)."""
        rt = self.main
        return (rt.ready and not self.resources and not self.control.lowered and not rt.dynamic_nodes and not rt.assumed
                and not rt.speculation_allowed and all(kind == "segment" and step.run is not None
                                                       for kind, step in rt.steps))

    def share(self) -> ModelRuntime:
        """Another runtime of the same model for another thread: the loaded model, the op resolution and the
        compiled code are shared; when subgraph 0 is compiled segments only (`shareable`) its preparation too — the
        segments' tables with the packed weights — and only the arena is its own (GraphRuntime.share); otherwise it
        is prepared again for the same input shapes. Inputs, outputs and variables are not copied
        (capture_state/restore_state do that). Invoking the copy never touches this runtime's memory."""
        new = ModelRuntime(self.model, self.kernels, num_threads=self.num_threads,
                           preserve_all_tensors=self.preserve_all, max_arena_bytes=self.max_arena_bytes)
        new.max_while_iterations = self.max_while_iterations
        rt = self.main
        if self.shareable():
            new.main = new._graphs[0] = rt.share(new)
            return new
        for i in rt.plan.inputs:
            if new.main.tensors[i].shape != rt.tensors[i].shape:
                new.main.set_input_shape(i, rt.tensors[i].shape)
        if rt.ready:
            new.main.allocate()
        return new

    def capture_state(self) -> dict:
        """Copies of everything restore_state needs (plain arrays, dicts and tuples: picklable): subgraph 0's input
        shapes and allocation, the values of its inputs, outputs and variable tensors (of every tensor with
        experimental_preserve_all_tensors) and dynamic tensors, and the resources (resource variables with their
        "assigned" flags, which CALL_ONCE ran). Not carried: other subgraphs' runtimes (prepared again on use) and
        the random ops' generator state (they start again from their seeds)."""
        rt = self.main
        state = {"input_shapes": [rt.tensors[i].shape for i in rt.plan.inputs], "allocated": rt.ready,
                 "max_while_iterations": self.max_while_iterations, "tensors": {}, "dynamic": {}}
        n = len(rt.tensors)
        if rt.ready:
            # inputs, outputs and variable tensors (intermediates are recomputed by the next invoke; every tensor
            # when they are all kept)
            keep = set(rt.plan.inputs) | set(rt.plan.outputs) | {t.index for t in rt.tensors if t.spec.is_variable}
            keep -= self._io[0].marked if 0 in self._io else set()  # (stale: their values are the caller's)
            state["tensors"] = {i: np.array(v, copy=True) for i, v in rt.views.items()
                                if i < n and (i in keep or rt.preserve_all)}
            state["dynamic"] = {i: np.array(v, copy=True) for i, v in rt.dynamic_arrays.items() if i < n}
            state["strings"] = rt.strings.snapshot()
        resources = {}
        for key, value in self.resources.items():
            if key in _VARIABLE_KEYS:
                resources[key] = {rid: np.array(a, copy=True) for rid, a in value.items()}
            else:
                resources[key] = copy.deepcopy(value)
        state["resources"] = resources
        return state

    def restore_state(self, state: dict) -> None:
        """Put a captured state into this runtime of the same model (allocating it when the state was)."""
        rt = self.main
        self.max_while_iterations = state["max_while_iterations"]
        for i, shape in zip(rt.plan.inputs, state["input_shapes"]):
            if rt.tensors[i].shape != tuple(shape):
                rt.set_input_shape(i, tuple(shape))
        if state["allocated"] and not rt.ready:
            rt.allocate()
        for i, value in state["tensors"].items():
            dst = rt.views.get(i)
            if dst is not None and dst.shape == value.shape and dst.dtype == value.dtype:
                dst[...] = value
        for i, value in state["dynamic"].items():
            if i not in rt.views:
                rt.dynamic_arrays[i] = np.array(value, copy=True)
        rt.strings.restore(state.get("strings", {}))
        for key, value in state["resources"].items():
            if key not in _VARIABLE_KEYS:
                self.resources[key] = copy.deepcopy(value)
                continue
            dst = self.resources.setdefault(key, {})
            for rid, a in value.items():
                cur = dst.get(rid)
                if cur is not None and cur.shape == a.shape and cur.dtype == a.dtype:
                    np.copyto(cur, a)  # in place: compiled READ/ASSIGN_VARIABLE hold its address
                else:
                    dst[rid] = np.array(a, copy=True)

    # --- called subgraphs: the services host kernels use through PrepareContext ----------------------------------
    def subgraph_io(self, index: int) -> tuple[list, list]:
        """([(dtype, shape)] of subgraph `index`'s inputs, the same of its outputs), as declared."""
        sg = self.model.subgraphs[index]
        io = lambda idx: [(sg.tensors[i].dtype, sg.tensors[i].shape) for i in idx]  # noqa: E731
        return io(sg.inputs), io(sg.outputs)

    def _subgraph_runtime(self, index: int, shapes: tuple) -> GraphRuntime:
        """Subgraph `index`'s runtime, allocated for these input shapes."""
        rt = self.graph(index)
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
                self._graphs[index] = cached
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
                    rt = self._new_graph(index)
            cache[shapes] = rt
            total = sum(r.arena.nbytes for r in cache.values())
            while len(cache) > 1 and total > self.SUBGRAPH_CACHE_BYTES:
                key, old = cache.popitem(last=False)
                hits.pop(key, None)
                total -= old.arena.nbytes
                self._unbind(old)
                old.release()
            self._graphs[index] = rt
        for t_index, shape in zip(sg.inputs, shapes):
            rt.set_input_shape(t_index, shape)
        rt.invalidate()
        rt.allocate()
        rt.init_variables()  # allocated again (new shapes): officially a full AllocateTensors, which resets them
        return rt

    def restart_variables(self, index: int) -> None:
        """A WHILE or IF is about to run subgraph `index`: reset its variable tensors, as the official allocation
        after the previous run's ReleaseMemory does (not with experimental_preserve_all_tensors, which keeps the
        subgraph's memory). Cheap when the subgraph has none."""
        if self.preserve_all:
            return
        with_vars = self._variable_subgraphs
        if with_vars is None:
            with_vars = self._variable_subgraphs = frozenset(
                k for k, sg in enumerate(self.model.subgraphs) if any(t.is_variable for t in sg.tensors))
        if index in with_vars:
            rt = self._graphs.get(index)
            if rt is not None and rt.ready:
                rt.init_variables()

    def _cached_runtimes(self) -> list[GraphRuntime]:
        return list(self._graphs.values()) + [r for c in self._shape_cache.values() for r in c.values()]

    def _unbind(self, rt: GraphRuntime) -> None:
        """Forget the bindings of a runtime about to be prepared again or released (they hold its storage)."""
        for key in [k for k, b in self._bound.items() if b.rt is rt]:
            del self._bound[key]

    def _check_call(self, index: int, inputs) -> GraphRuntime:
        if not 0 <= index < len(self.model.subgraphs):
            raise ValueError(f"Invalid subgraph index {index}; the model has {len(self.model.subgraphs)} subgraphs")
        sg = self.model.subgraphs[index]
        if len(inputs) != len(sg.inputs):
            raise RuntimeError(f"subgraph {index} takes {len(sg.inputs)} inputs, got {len(inputs)}")
        if self._call_depth > MAX_CALL_DEPTH:
            raise RuntimeError(f"subgraph calls nested more than {MAX_CALL_DEPTH} deep")
        for t_index, value in zip(sg.inputs, inputs):
            t = sg.tensors[t_index]
            if t.dtype == object:  # (host control flow moves arrays: STRING values are packed, outside the arena)
                raise RuntimeError(f"subgraph {index} input {t.name!r} is a STRING tensor: control flow (WHILE, IF, "
                                   f"STABLEHLO_CASE) carrying strings into a subgraph is not supported yet")
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
        if not all(o in rt.fast_views or rt.tensors[o].is_const for o in rt.plan.outputs):
            return None
        return [rt.tensors[o].shape for o in rt.plan.outputs]

    def bind_subgraph(self, index: int, inputs: list[np.ndarray]) -> BoundSubgraph:
        """Subgraph `index` prepared for the shapes and dtypes of `inputs` (not copied), to be run many times."""
        key = (index, tuple(v.shape for v in inputs))
        b = self._bound.get(key)
        if b is not None and b.valid() and all(v.dtype == dt for v, dt in zip(inputs, b.dtypes)):
            return b
        rt = self._check_call(index, inputs)
        if len(self._bound) >= 4 * self.SUBGRAPH_SHAPE_CACHE:  # bindings of runtimes no longer cached
            cached = self._cached_runtimes()
            self._bound = {k: v for k, v in self._bound.items() if v.valid() and v.rt in cached}
        b = self._bound[key] = BoundSubgraph(self, rt)
        return b


def _nothing() -> None:
    pass


class BoundSubgraph:
    """A called subgraph prepared for fixed input shapes (ModelRuntime.bind_subgraph), for host ops that run it many
    times (WHILE): `inputs` are its input tensors' storage (write them, then `run()`), `output(k)` output k's
    current storage. `static_outputs` is True when every output is planned in the arena with a fixed shape (then
    `outputs` lists their storage). Valid while `valid()` (the runtime has not been prepared again since)."""

    def __init__(self, owner: ModelRuntime, rt: GraphRuntime):
        self._owner = owner
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
        plain = rt.plain_program()
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
            self._run_program(prog)
            return
        owner = self._owner
        if owner._call_depth > MAX_CALL_DEPTH:
            raise RuntimeError(f"subgraph calls nested more than {MAX_CALL_DEPTH} deep")
        owner._call_depth += 1
        try:
            if prog is None:
                self.rt.invoke()
            else:
                self._run_program(prog)
        finally:
            owner._call_depth -= 1

    def _run_program(self, prog) -> None:
        try:
            for fn, args in prog:
                fn(*args)
        except (ValueError, IndexError, ZeroDivisionError) as e:
            if isinstance(e, RuntimeError):
                raise
            self.fail(e)
