"""Runs one subgraph (`GraphRuntime`): prepares nodes, folds constants, plans the arena and executes the node
sequence as compiled segments (lite_numba.runtime.codegen: one generated runner per run of static nodes, calling every
kernel by native address over tables of offsets, shapes and scalars, so its source depends on the graph's structure
only). Nodes whose output shapes depend on input values (dynamic) or that run on the host split the sequence into
segments; they are prepared again and run from Python at invoke time, memoised, and speculated away where their
values repeat (control flow mostly runs inside the runner: runtime.control). docs/design/executor.md: the choices."""

from __future__ import annotations

import copy
import math
from typing import Any, Callable

import numpy as np

from ..format.custom_options import decode_custom_options
from ..format.plan import Node, SubgraphPlan
from ..format.strings import StringBuffers
from ..ops import Call, ConstArg, NeedsValue, OpKernel, PrepareContext, Tensor, TensorView
from . import arena as memory
from .arena import ArenaLimitError, check_arena_bytes, check_tensor_bytes, graph_allocations, plan_arena
from .codegen import Segment, make_segment
from .errors import InvokeError, PrepareError, overflow_cause, zero_division_cause


class GraphRuntime:
    """The runtime state of one subgraph: tensors, prepared nodes, arena, segments."""

    def __init__(self, plan: SubgraphPlan, kernels: list[OpKernel | None], *, num_threads: int = 1,
                 preserve_all_tensors: bool = False, subgraph_index: int = 0, host_env: Any = None):
        self.plan = plan
        self.kernels = kernels
        self.num_threads = num_threads
        self.preserve_all = preserve_all_tensors
        self.subgraph_index = subgraph_index
        self.host_env = host_env  # the ModelRuntime that owns this runtime: ops that call other subgraphs use it
        self.tensors = [Tensor(s.index, s.name, s.dtype, s.shape, s, s.data) for s in plan.tensors]
        self.states: list[Any] = [None] * len(plan.nodes)
        self._inited = [False] * len(plan.nodes)
        self.ready = False
        self.arena = np.zeros(0, np.uint8)
        self.arena_size = 0
        self.views: dict[int, np.ndarray] = {}
        # arena views of static, non-const tensors (the set/get fast path): one dict object for the runtime's life,
        # refilled by allocate() and emptied by invalidate(), so its owner may hold on to it
        self.fast_views: dict[int, np.ndarray] = {}
        self.dynamic_arrays: dict[int, np.ndarray] = {}
        self.strings = StringBuffers(lambda n, what: check_tensor_bytes(what, n, self.max_arena_bytes))  # STRING values
        self.known_values: dict[int, np.ndarray] = {}  # values fixed at prepare time (ctx.set_known_value)
        self._dynamic_phase = False
        self._temps: list[Tensor] = []
        self.steps: list[tuple[str, Any]] = []
        self.prepared: list[PrepareContext | None] = [None] * len(plan.nodes)
        self.dynamic_nodes: set[int] = set()
        self.dynamic_tensors: set[int] = set()
        # speculation (see _specialise): values the current plan assumes, and what general invokes observed
        self.assumed: dict[int, np.ndarray] = {}
        self._guarded: set[int] = set()
        self._guard_reads: list[int] = []
        self._observed: dict[int, np.ndarray] = {}
        self._last_observed: dict[int, np.ndarray] | None = None
        self._spec_values: dict[int, np.ndarray] = {}
        self._spec_pending = False
        self._spec_allowed = False
        self._spec_failures = 0
        self._deferred = False  # a node's output shape depended on data (ctx.defer): never speculate
        self._memo: dict[int, tuple] = {}  # node -> its last dynamic preparation (see run_dynamic)
        self._folded: set[int] = set()  # tensors computed once at allocate (see _fold)
        # inputs the graph may update in place (set by the owner), {tensor: its class's root} (arena.plan_aliases)
        self.writable_inputs: frozenset[int] = frozenset()
        self.aliases: dict[int, int] = {}
        self._reads: list[int] | None = None

    # --- services for PrepareContext --------------------------------------------------------------------------
    def tensor(self, i: int) -> Tensor:
        return self.tensors[i]

    def set_shape(self, i: int, shape: tuple[int, ...]) -> None:
        t = self.tensors[i]
        if t.is_const:
            if tuple(shape) != t.shape:
                raise PrepareError(f"cannot change the shape of constant tensor {t.name!r}")
            return
        if self._dynamic_phase and i not in self.dynamic_tensors:
            if tuple(shape) != t.shape:
                raise PrepareError(f"tensor {t.name!r} planned with shape {list(t.shape)} became {list(shape)}")
            return
        self._check_bytes(t, shape)
        t.shape = tuple(shape)
        if self._dynamic_phase and t.dtype != object:  # (a STRING tensor's value is in self.strings)
            cur = self.dynamic_arrays.get(i)
            if cur is None or cur.shape != t.shape:  # keep the array while the shape holds (see run_dynamic)
                self.dynamic_arrays[i] = np.zeros(shape, t.dtype)

    def _check_bytes(self, t: Tensor, shape) -> None:
        """Refuse a shape needing more memory than the limit before anything is allocated (arena.memory_limit)."""
        nbytes = math.prod(shape) * t.dtype.itemsize
        if nbytes > 1 << 26 or self.max_arena_bytes is not None:  # below 64 MiB only a service's own limit
            check_tensor_bytes(f"tensor {t.index} ({t.name!r}, {t.dtype.name} {list(shape)})", nbytes,
                               self.max_arena_bytes)

    @property
    def max_arena_bytes(self) -> int | None:
        return getattr(self.host_env, "max_arena_bytes", None)

    def new_temp(self, shape: tuple[int, ...], dtype: np.dtype) -> Tensor:
        t = Tensor(len(self.tensors) + len(self._temps), f"<temp {len(self._temps)}>", dtype, shape, is_temp=True)
        self._check_bytes(t, shape)
        self._temps.append(t)
        if self._dynamic_phase:
            self.dynamic_arrays[t.index] = np.zeros(shape, dtype)
        return t

    def runtime_value(self, i: int) -> np.ndarray:
        if not self._dynamic_phase:
            known = self.known_values.get(i)
            if known is not None:
                return known
            assumed = self.assumed.get(i)
            if assumed is not None:
                self._guard_reads.append(i)
                return assumed
            raise NeedsValue(i)
        value = self.array(i)
        if not self.assumed:
            self._observed[i] = np.array(value, copy=True)
        if self._reads is not None:
            self._reads.append(i)
        return value

    def array(self, i: int) -> np.ndarray:
        """Current storage of tensor i (a view; 0-d tensors keep shape ())."""
        a = self.dynamic_arrays.get(i)
        if a is not None:
            return a
        t = self.tensors[i] if i < len(self.tensors) else self._temps[i - len(self.tensors)]
        if t.data is not None:
            return t.data
        v = self.views.get(i)
        if v is None:  # a STRING tensor: its packed value, outside the arena; else "Tensor data is null"
            return self.strings.value(i, t)
        return v

    # --- prepare and plan -------------------------------------------------------------------------------------
    @property
    def speculation_allowed(self) -> bool:
        """Whether general invokes record the values dynamic nodes read, to re-plan the graph on them later."""
        return self._spec_allowed

    def plain_program(self) -> bool:
        """True when the invoke sequence has only compiled segments and host nodes run with their allocate
        preparation: no node prepared at run time and no speculation, so a caller may run `program` itself."""
        return not self.assumed and not self._spec_pending and not self._spec_allowed and not any(
            getattr(fn, "__func__", None) is GraphRuntime.run_dynamic for fn, _ in self.program)

    def native_program(self) -> list[tuple] | None:
        """[(native address, aux, it, ft, fp)] of the compiled runners making up the whole invoke (a plain program of
        compiled segments only, each callable by its native address, Segment.address), else None (runtime.rows)."""
        if not self.ready or not self.steps or not self.plain_program() or len(self.program) != len(self.steps):
            return None
        out = []
        for (kind, seg), (fn, args) in zip(self.steps, self.program):
            if kind != "segment" or seg.run is None or fn is not seg.run or not seg.address or len(args) != 5 or any(
                    a is not b for a, b in zip(args, (self.arena, seg.aux, seg.it, seg.ft, seg.fp))):
                return None
            out.append((seg.address, seg.aux, seg.it, seg.ft, seg.fp))
        return out

    def share(self, host_env) -> GraphRuntime:
        """A GraphRuntime that runs this one's prepared plan on an arena of its own (Interpreter.clone()). Shared,
        read-only at run time: the compiled runners, the segments' constant tables (`aux`, `ft`, `fp`), folded
        constants, node states and preparations. Copied: tensors, the arena and its views, the offsets and shapes `it`
        (an I/O binding rewrites them in place), every container. A later allocate() prepares the copy on its own."""
        rt = object.__new__(GraphRuntime)
        rt.__dict__.update(self.__dict__)
        for key, value in rt.__dict__.items():
            if isinstance(value, (dict, list, set)):
                rt.__dict__[key] = copy.copy(value)
        rt.host_env = host_env
        rt.tensors = [Tensor(t.index, t.name, t.dtype, t.shape, t.spec, t.data) for t in self.tensors]
        rt._memo = {}
        rt.dynamic_arrays = {}
        rt.arena = memory.zeroed_arena(self.arena.size)
        remap = lambda a: memory.same_place(a, self.arena, rt.arena)  # noqa: E731
        rt.views = {k: remap(v) for k, v in self.views.items()}
        # (its own dict, filled as allocate() fills it: not missing what a signature call left in the caller's arrays)
        rt.fast_views = {k: v for k, v in rt.views.items() if k < len(rt.tensors)} if self.ready else {}
        steps = []
        for kind, seg in self.steps:
            seg = copy.copy(seg)  # py_calls (profiling) hold views: of the new arena; `it` its own (io_binding)
            seg.it = seg.it.copy()
            seg.py_calls = [(fn, tuple(remap(a) for a in args), ni) for fn, args, ni in seg.py_calls]
            steps.append((kind, seg))
        rt.steps = steps
        rt._make_program()
        rt.init_variables()
        return rt

    def invalidate(self) -> None:
        """Not ready: the next allocate() prepares and plans again (inputs resized, or a subgraph about to be
        prepared for other shapes). The arena views stop being served."""
        self.ready = False
        self.fast_views.clear()
        self.__dict__.pop("run", None)  # (rows.install_entry's)

    def release(self) -> None:
        """Drop the arena and its views (an evicted called subgraph); holders of a binding see it invalid."""
        self.invalidate()
        self.arena = np.zeros(0, np.uint8)
        self.views = {}

    def set_input_shape(self, i: int, shape: tuple[int, ...]) -> None:
        """Input tensor i takes `shape` (validated by the caller) at the next allocate()."""
        self.tensors[i].shape = tuple(shape)
        self.invalidate()

    def defer(self) -> bool:
        """A node's output shapes depend on data (ctx.defer): never speculate on this graph. True when prepare runs at
        invoke time (the data is there), False at allocate (the node becomes dynamic)."""
        self._deferred = True
        return self._dynamic_phase

    def _node_error(self, node: Node, err: Exception) -> PrepareError:
        return PrepareError(f"{err}\nNode number {node.index} ({node.op_name}) failed to prepare.")

    def _prepare_node(self, node: Node) -> PrepareContext:
        k = self.kernels[node.index]
        if k is None:
            raise PrepareError(
                f"Encountered unresolved custom op: {node.op_name}.\nSee instructions: "
                f"https://www.tensorflow.org/lite/guide/ops_custom Node number {node.index} ({node.op_name}) "
                f"failed to prepare.")
        if not self._inited[node.index]:
            if k.init is not None:
                opts = decode_custom_options(node.custom_options) if node.is_custom else node.options
                self.states[node.index] = k.init(opts)
            self._inited[node.index] = True
        ctx = PrepareContext(self, node, k, self.states[node.index])
        try:
            k.prepare(ctx)
        except NeedsValue:
            raise
        except PrepareError:
            raise
        except (AttributeError, TypeError) as e:
            if "NoneType" not in str(e):
                raise self._node_error(node, e) from None
            # ctx.input(i) is None for an absent input (-1 or past the end) that the prepare needed
            raise self._node_error(node, ValueError(
                f"{node.op_name}: a required input is absent (the operator's inputs are {list(node.inputs)}; -1 "
                f"marks an absent one)")) from None
        except (ValueError, IndexError, KeyError, ZeroDivisionError, OverflowError) as e:
            if isinstance(e, OverflowError) or "cannot convert float" in str(e):
                raise self._node_error(node, ValueError(overflow_cause(self.tensors, node, e))) from None
            if isinstance(e, ZeroDivisionError):
                raise self._node_error(node, ValueError(zero_division_cause(self.tensors, node, e))) from None
            raise self._node_error(node, e) from None
        except ArenaLimitError as e:
            raise ArenaLimitError(f"{e}\nNode number {node.index} ({node.op_name}) failed to prepare.") from None
        return ctx

    def allocate(self, assumed: dict[int, np.ndarray] | None = None) -> None:
        """Prepare every node in order, plan the arena and build the executable segments.

        `assumed`: values of computed tensors to take as known (a specialised plan, see _specialise); each is
        checked at run time by a guard in front of the first node that read it."""
        self.invalidate()
        self._memo = {}
        self.assumed = dict(assumed) if assumed else {}
        self._guarded = set()
        self._observed = {}
        self._last_observed = None
        self._spec_pending = False
        self.fast_views.clear()
        self.known_values = {}
        self._temps = []
        self.dynamic_arrays = {}
        self.dynamic_nodes = set()
        self.dynamic_tensors = set()
        for s in self.plan.tensors:  # shapes of non-input tensors are recomputed by prepare
            if s.index not in self.plan.inputs and not s.is_const:
                self.tensors[s.index].shape = s.shape
        node_temps: dict[int, list[Tensor]] = {}
        for i in self._folded:  # recomputed below (shapes may have changed)
            self.tensors[i].data = None
        self._folded = set()
        pinned = set(self.plan.inputs) | set(self.plan.outputs)
        seen: dict[int, list[tuple[int, tuple]]] = {}  # static node -> its inputs' shapes when it was prepared
        for node in self.plan.nodes:
            k = self.kernels[node.index]
            uses_dynamic = any(i >= 0 and i in self.dynamic_tensors for i in node.inputs)
            if k is not None and k.host is not None:
                # host ops (control flow, variables) prepare statically when they can, run on the host, unless
                # they scheduled compiled calls (variables of a fixed shape): then they are static nodes
                self.prepared[node.index] = None
                try:
                    self.prepared[node.index] = self._prepare_node(node) if not uses_dynamic else None
                    if uses_dynamic:
                        raise NeedsValue(-1)
                except NeedsValue:
                    self.dynamic_tensors.update(o for o in node.outputs if o >= 0)
                ctx = self.prepared[node.index]
                if ctx is not None and ctx.calls and not any(o in self.dynamic_tensors for o in node.outputs):
                    node_temps[node.index] = ctx.temps
                    continue
                self.dynamic_nodes.add(node.index)
                continue
            if uses_dynamic:
                ctx = None
            else:
                seen[node.index] = [(i, tuple(self.tensors[i].shape)) for i in node.inputs if i >= 0]
                mark = len(self._temps)
                self._guard_reads = []
                try:
                    ctx = self._prepare_node(node)
                except NeedsValue:
                    del self._temps[mark:]
                    ctx = None
                if ctx is not None and self._guard_reads:
                    self._add_guards(ctx)
                if ctx is not None and self._foldable(node, pinned):
                    self._fold(node, ctx, mark)
            if ctx is None:
                if self.kernels[node.index] is None:
                    self._prepare_node(node)  # raises the unresolved-op error
                self.dynamic_nodes.add(node.index)
                self.dynamic_tensors.update(o for o in node.outputs if o >= 0)
                self.prepared[node.index] = None
            else:
                self.prepared[node.index] = ctx
                node_temps[node.index] = ctx.temps
        self._check_rewritten_inputs(seen)
        self._demote_shared_writers(node_temps)
        self._plan_memory(node_temps)
        self._build_steps()
        self._spec_allowed = (not self.assumed and bool(self.dynamic_nodes)
                              and all(self.kernels[n].host is None for n in self.dynamic_nodes)
                              and not any(t.spec.is_variable for t in self.tensors))
        self._make_program()
        self.fast_views.update((i, v) for i, v in self.views.items() if i < len(self.tensors))
        self.ready = True
        if self.native_program() is not None:  # the whole invoke as one native call
            from .rows import install_entry  # lazy: rows imports Numba; reached only when the runners are compiled

            install_entry(self)

    def _check_rewritten_inputs(self, seen: dict[int, list[tuple[int, tuple]]]) -> None:
        """A node prepared for an input whose tensor a later node (a rewired graph) gives another shape would read
        it with the old shape: refused, naming the tensor, the reader and the writer (fuzzing seed 201 case 10606:
        an IDENTITY writing [1, 9, 129] into the [800, 1] input an AudioSpectrogram read; was a typing error)."""
        for ni, shapes in seen.items():
            if self.prepared[ni] is None:
                continue
            for i, shape in shapes:
                now = tuple(self.tensors[i].shape)
                if now != shape:
                    node = self.plan.nodes[ni]
                    writer = next((n for n in self.plan.nodes if n.index > ni and i in n.outputs), None)
                    by = f" by node {writer.index} ({writer.op_name})" if writer is not None else ""
                    raise PrepareError(
                        f"Tensor {i} ({self.tensors[i].name!r}) is read by node {ni} ({node.op_name}) with shape "
                        f"{list(shape)} and written later{by} with shape {list(now)}\n"
                        f"Node number {ni} ({node.op_name}) failed to prepare.")

    def _demote_shared_writers(self, node_temps: dict[int, list[Tensor]]) -> None:
        """A tensor written by a static node (an arena slot) and by a dynamic node (an array sized at run time): its
        static writers become dynamic too, then, until nothing changes, every static node touching a tensor that
        became dynamic (run at invoke in graph order: the last writer wins, as officially). Fuzzing run 101 case 409
        (a ZEROS_LIKE output rewired as an ADD's after a RANGE) was a bare KeyError. A graph input written by a
        dynamic node is refused, naming both."""
        inputs = set(self.plan.inputs)
        changed = True
        while changed:
            changed = False
            for node in self.plan.nodes:
                if node.index in self.dynamic_nodes:
                    for o in node.outputs:
                        if o in inputs:
                            t = self.tensors[o]
                            raise PrepareError(
                                f"Tensor {o} ({t.name!r}) is an input of the graph and an output of node "
                                f"{node.index} ({node.op_name}), whose outputs are known only at run time\n"
                                f"Node number {node.index} ({node.op_name}) failed to prepare.")
                    continue
                if not any(i >= 0 and i in self.dynamic_tensors for i in (*node.inputs, *node.outputs)):
                    continue
                self.dynamic_nodes.add(node.index)
                self.prepared[node.index] = None
                node_temps.pop(node.index, None)
                for o in node.outputs:
                    if o in self._folded:  # computed at allocate: now computed at invoke, after its other writer
                        self._folded.discard(o)
                        self.tensors[o].data = None
                    if o >= 0:
                        self.dynamic_tensors.add(o)
                changed = True

    # --- speculation: a static plan for the values that dynamic nodes saw -----------------------------------
    # A general plan re-prepares value-dependent nodes from Python at every invoke (~60 us per node). When an invoke
    # has shown the values those nodes read (usually functions of input shapes only), the next invoke re-plans with
    # the values assumed: every node is static and the graph runs as one compiled call, with a guard in front of the
    # first reader of each assumed value. A guard that fails (the values changed) sends that invoke back to the
    # general plan; speculation resumes once two general invokes agree, and stops after SPEC_MAX_FAILURES failures.
    # Never specialised: graphs with host nodes, variables or shapes from data (defer): a fallback re-runs the invoke.
    SPEC_MAX_FAILURES = 4

    @property
    def specialised(self) -> bool:
        """True while the plan in force assumes run-time values (every node static, guarded)."""
        return bool(self.assumed)

    # --- constant folding -------------------------------------------------------------------------------------
    # A builtin node whose inputs are all constant (DEQUANTIZE / DENSIFY of weights, shape arithmetic) runs once at
    # allocate; its outputs become constants (later nodes pack them once in prepare; the runner has no call for it),
    # as the official runtime does for DEQUANTIZE and DENSIFY. Never folded: custom ops (they may keep state), host
    # ops, graph inputs, outputs and variables.

    def _foldable(self, node: Node, pinned: set[int]) -> bool:
        k = self.kernels[node.index]
        ins = [i for i in node.inputs if i >= 0]
        return (not node.is_custom and k is not None and k.host is None and bool(ins)
                and all(self.tensors[i].is_const for i in ins)
                and all(o >= 0 and o not in pinned and not self.tensors[o].spec.is_variable for o in node.outputs))

    def _fold(self, node: Node, ctx: PrepareContext, mark: int) -> None:
        arrays = {o: np.zeros(self.tensors[o].shape, self.tensors[o].dtype) for o in node.outputs}
        arrays.update({t.index: np.zeros(t.shape, t.dtype) for t in ctx.temps})
        self.dynamic_arrays.update(arrays)
        try:
            for call in ctx.calls:
                call.fn(*[self._resolve(a) for a in call.args])
        except (ValueError, IndexError, ZeroDivisionError) as e:
            raise self._node_error(node, e) from None
        finally:
            for i in arrays:
                self.dynamic_arrays.pop(i, None)
        for o in node.outputs:
            self.tensors[o].data = arrays[o]
            self._folded.add(o)
        del self._temps[mark:]
        ctx.calls.clear()
        ctx.temps.clear()

    def _add_guards(self, ctx: PrepareContext) -> None:
        for i in dict.fromkeys(self._guard_reads):
            if i in self._guarded:
                continue
            self._guarded.add(i)
            t = self.tensors[i]
            want = np.ascontiguousarray(self.assumed[i], dtype=t.dtype).reshape(-1).view(np.uint8)
            if want.size != t.nbytes:
                raise PrepareError(f"assumed value of tensor {t.name!r} has {want.size} bytes, the tensor "
                                   f"{t.nbytes}")
            from ..jit.guards import guard_equal  # lazy: guards.py compiles with Numba, imported only to allocate
            ctx.calls.insert(0, Call(guard_equal, (ctx.view(t, (t.nbytes,), np.uint8), ctx.const(want))))

    def _after_general_invoke(self) -> None:
        observed, self._observed = self._observed, {}
        if not observed or not self._spec_allowed or self._deferred or self._spec_failures >= self.SPEC_MAX_FAILURES:
            return
        last, self._last_observed = self._last_observed, observed
        if self._spec_failures == 0 or _same_values(observed, last):
            self._spec_values = observed
            self._spec_pending = True

    def _replan(self, assumed: dict[int, np.ndarray] | None) -> None:
        """Re-allocate (general or specialised) keeping the graph inputs' current values."""
        saved = [(i, np.array(self.array(i), copy=True)) for i in self.plan.inputs if i >= 0]
        self.allocate(assumed)
        for i, v in saved:
            np.copyto(self.array(i), v)

    def _specialise(self) -> None:
        self._spec_pending = False
        try:
            self._replan(self._spec_values)
        except (PrepareError, ValueError):
            self._spec_failures = self.SPEC_MAX_FAILURES  # the values do not make a consistent plan: stay general
            self._replan(None)

    def _despecialise(self) -> None:
        self._spec_failures += 1
        self._replan(None)

    def _plan_memory(self, node_temps: dict[int, list[Tensor]]) -> None:
        n = len(self.tensors)
        tensor = lambda k: self.tensors[k] if k < n else self._temps[k - n]  # noqa: E731
        skip = {t.index for t in self.tensors if t.is_const or t.index in self.dynamic_tensors
                or t.dtype == np.dtype(object)}
        keep = set(self.plan.inputs) | set(self.plan.outputs) | {t.index for t in self.tensors if t.spec.is_variable}
        declared, views, boundary = memory.declared_sharing(self.plan.nodes, self.prepared, self.dynamic_nodes)
        self.aliases = {} if self.preserve_all else memory.plan_aliases(
            self.plan.nodes, self.tensors, declared, skip, self.plan.inputs, self.plan.outputs, self.writable_inputs,
            views, boundary)
        memory.drop_granted_copies(self.plan.nodes, self.prepared, views, self.aliases)
        allocs = graph_allocations(self.plan.nodes, self.tensors, node_temps, skip, keep, self.preserve_all,
                                   self.aliases)
        for a in allocs:  # inputs and declared shapes never went through set_shape
            self._check_bytes(tensor(a.key), tensor(a.key).shape)
        offsets, total = plan_arena(allocs)
        if allocs:
            t = tensor(max(allocs, key=lambda a: a.nbytes).key)
            check_arena_bytes(total, f"tensor {t.index} ({t.name!r}, {t.dtype.name} {list(t.shape)}, "
                                     f"{t.nbytes} bytes)", self.max_arena_bytes)
        old = {i: self.views[i].copy() for i in self.views if i < n and self.tensors[i].spec.is_variable}
        self.arena_size = total
        self.arena = memory.zeroed_arena(max(total, 64))
        offsets.update((m, offsets[r]) for m, r in self.aliases.items())
        self.offsets = offsets
        self.views = {k: self.arena[off:off + tensor(k).nbytes].view(tensor(k).dtype).reshape(tensor(k).shape)
                      for k, off in offsets.items()}
        for i, v in old.items():
            if v.shape == self.views[i].shape:
                self.views[i][...] = v
        if not old:  # first allocation; a re-allocation keeps the state (ModelRuntime.allocate resets it)
            self.init_variables()

    def init_variables(self) -> None:
        """Variable tensors (re)start as zeros, or their zero point when quantized (as TFLite resets them)."""
        for t in self.tensors:
            if t.spec.is_variable and t.index in self.views:
                self.views[t.index][...] = t.zero_point if t.dtype.kind in "iu" else 0

    # --- build segments ---------------------------------------------------------------------------------------
    def _build_steps(self) -> None:
        steps: list[tuple[str, Any]] = []
        current: list[int] = []
        for node in self.plan.nodes:
            if node.index in self.dynamic_nodes:
                if current:
                    steps.append(("segment", self._make_segment(current)))
                    current = []
                steps.append(("host", node.index))
            else:
                current.append(node.index)
        if current:
            steps.append(("segment", self._make_segment(current)))
        self.steps = steps

    def _resolve(self, a) -> Any:
        """A call argument -> the numpy array (or scalar) the kernel gets."""
        if isinstance(a, Tensor):
            arr = self.array(a.index)
            return arr.reshape(a.shape or (1,))
        if isinstance(a, TensorView):
            return self.array(a.tensor.index).reshape(-1).view(a.dtype).reshape(a.shape or (1,))
        if isinstance(a, ConstArg):
            return a.array
        return a

    def _make_segment(self, nodes: list[int]) -> Segment:
        return make_segment(nodes, self.prepared, self.offsets, self.array, self.arena)

    # --- invoke -----------------------------------------------------------------------------------------------
    def _make_program(self) -> None:
        """The invoke sequence as (callable, args) pairs: compiled segments, Python-mode segments, host nodes."""
        program = []
        for kind, step in self.steps:
            if kind == "segment":
                if step.run is not None:
                    program.append((step.run, (self.arena, step.aux, step.it, step.ft, step.fp)))
                else:
                    program.extend((fn, args) for fn, args, _ in step.py_calls)
            else:
                program.append(self._host_step(step))
        if self._spec_allowed:
            program.append((self._after_general_invoke, ()))
        self.program = program
        self.__dict__.pop("run", None)

    def _host_step(self, ni: int) -> tuple:
        """A host node prepared at allocate with planned inputs and outputs runs its host function directly (the memo
        would always hit: its storage is fixed until the next allocate); other dynamic or host nodes run_dynamic."""
        node = self.plan.nodes[ni]
        k = self.kernels[ni]
        ctx = self.prepared[ni]
        if (k is not None and k.host is not None and ctx is not None and not ctx.calls
                and not any(i in self.dynamic_tensors for i in node.inputs if i >= 0)
                and not any(o in self.dynamic_tensors for o in node.outputs if o >= 0)):
            return self._run_host, (k.host, ctx)
        return self.run_dynamic, (ni,)

    def _run_host(self, host, ctx: PrepareContext) -> None:
        self._dynamic_phase = True
        try:
            host(ctx)
        finally:
            self._dynamic_phase = False

    def invoke(self) -> None:
        if not self.ready:
            raise RuntimeError("Invoke called on model that is not ready.")
        if self._spec_pending:
            self._specialise()
        try:
            for fn, args in self.program:
                fn(*args)
        except (ValueError, IndexError, ZeroDivisionError) as e:
            if isinstance(e, (InvokeError, PrepareError)):
                raise
            if self.assumed and _is_guard_failure(e):
                self._despecialise()
                return self.invoke()
            raise self.invoke_error(e) from None

    run = invoke  # the whole invoke (an allocated runtime's own `run` may replace it: rows.install_entry)

    def invoke_error(self, e: Exception) -> InvokeError:
        """A kernel's error as invoke() raises it (naming the subgraph: lowered control flow may have run another)."""
        where = getattr(self.host_env, "failed_subgraph", int)(self.subgraph_index)
        return InvokeError(f"{e}\nNode failed to invoke (subgraph {where}).")

    def invoke_with(self, run_steps: Callable[[GraphRuntime], Any]) -> Any:
        """Invoke through `run_steps(self)`, which walks `steps` itself (the profiler timing each node), instead of
        the compiled program; speculation and its fallback as in invoke(). Returns what run_steps returns."""
        if not self.ready:
            raise RuntimeError("Invoke called on model that is not ready.")
        if self._spec_pending:
            self._specialise()
        try:
            result = run_steps(self)
        except ValueError as e:
            if not (self.assumed and _is_guard_failure(e)):
                raise
            self._despecialise()
            return self.invoke_with(run_steps)
        if self._spec_allowed:
            self._after_general_invoke()
        return result

    def run_dynamic(self, ni: int) -> None:
        """Prepare and run a dynamic or host node, memoised: with the same input arrays and ctx.value() reads, the
        resolved calls (or host function) run without prepare (the contract: it depends on nothing else)."""
        node = self.plan.nodes[ni]
        k = self.kernels[ni]
        self._dynamic_phase = True
        try:
            memo = self._memo.get(ni)
            if memo is not None and self._memo_hit(memo):
                ctx, _, reads, outputs, calls = memo
                if self._spec_allowed:  # what prepare would have read, for speculation
                    for i, _, _ in reads:
                        self._observed[i] = np.array(self.array(i), copy=True)
                for o, arr in outputs:
                    self.tensors[o].shape = arr.shape
                    self.dynamic_arrays[o] = arr
                if callable(calls):  # a host node's function (resolved once)
                    calls(ctx)
                else:
                    for fn, args in calls:
                        fn(*args)
                return
            inputs = tuple((i, self.array(i)) for i in node.inputs if i >= 0)
            mark = len(self._temps)
            self._reads = []
            ctx = self._prepare_node(node)
            reads = tuple((i, self.array(i).shape, self.array(i).tobytes()) for i in dict.fromkeys(self._reads))
            self._reads = None
            for o in node.outputs:
                if o in self.dynamic_tensors and o not in self.dynamic_arrays and self.tensors[o].dtype != object:
                    t = self.tensors[o]
                    self.dynamic_arrays[o] = np.zeros(t.shape, t.dtype)
            if k.host is not None:
                calls = k.host
                calls(ctx)
            else:
                calls = [(call.fn, tuple(self._resolve(a) for a in call.args)) for call in ctx.calls]
                for fn, args in calls:
                    fn(*args)
            del self._temps[mark:]
            outputs = tuple((o, self.dynamic_arrays[o]) for o in node.outputs if o in self.dynamic_arrays)
            self._memo[ni] = (ctx, inputs, reads, outputs, calls)
            step = (self.run_dynamic, (ni,))  # a host function setting every output on fixed inputs, no values read:
            if ctx.sets_outputs and not reads and not self._spec_allowed and step in self.program and all(
                    i not in self.dynamic_tensors and a.dtype != object for i, a in inputs):  # the memo always hits
                self.program[self.program.index(step)] = (self._run_host, (calls, ctx))  # (until the next allocate)
        finally:
            self._dynamic_phase = False
            self._reads = None

    def _memo_hit(self, memo) -> bool:
        _, inputs, reads, _, _ = memo
        for i, arr in inputs:
            if self.array(i) is not arr:
                return False
        for i, shape, data in reads:
            cur = self.array(i)
            if cur.shape != shape or cur.tobytes() != data:
                return False
        return True


def _same_values(a: dict[int, np.ndarray], b: dict[int, np.ndarray] | None) -> bool:
    return b is not None and a.keys() == b.keys() and all(
        a[i].shape == b[i].shape and np.array_equal(a[i], b[i]) for i in a)


def _is_guard_failure(err: BaseException) -> bool:
    from ..jit.guards import is_guard_failure  # lazy: guards.py imports Numba; reached only when a kernel raised
    return is_guard_failure(err)
