"""Runs one subgraph: prepares nodes, plans the arena, and executes the fused, compiled node sequence.

Mechanism (numbers in docs/architecture.md): the calls that the kernels' prepare scheduled for consecutive static
nodes are turned into the source of one `@njit` function `run(arena, aux, it, ft)`. Every tensor argument becomes a
view `arena[it[p]:it[p+1]].view(dtype).reshape((it[p+2], ...))`; offsets, shapes and scalars live in the int64 table
`it` and the float64 table `ft`, so the source depends on the graph's *structure* only (kernels, dtypes, ranks), not
on shapes: resizing or another model with the same structure reuses the compiled function. The runner calls each
kernel through its native entry address, passed at run time in the int64 table `fp` (lite_numba.native_call), and
builds the kernels' array arguments directly from `it`: it contains no kernel code, compiles in ~30 ms a call site and
depends on the kernels' argument types only. The source is written to a cache directory keyed by its hash plus the
versions of lite_numba, Numba and native_call (not the kernel sources), imported as a module, and compiled with
`cache=True`, so a second process loads it from disk. Kernels are compiled (or loaded from Numba's disk cache) one by
one for exactly the argument types the runner passes.

Nodes whose output shapes depend on input values (dynamic) or that run on the host (control flow) split the
sequence into segments; they are re-prepared and run from Python at invoke time.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import numba
import numpy as np

from .compiler import (
    cached_address,
    cached_spec_types,
    compile_runner,
    dt_name,
    in_disk_cache,
    load_cached_runner,
    native_callable,
    np_name,
    precompile,
    runner_sig,
)
from .guards import guard_equal, is_guard_failure
from .model import decode_custom_options
from .ops import Call, ConstArg, NeedsValue, OpKernel, PrepareContext, Tensor, TensorView
from .plan import Node, SubgraphPlan
from .planner import Allocation, ArenaLimitError, align64, check_arena_bytes, check_tensor_bytes, plan_arena
from .symbols import symbol_name


class PrepareError(RuntimeError, ValueError):
    """A node failed to prepare (bad shapes, dtypes or parameters). A RuntimeError like the official runtime's."""


class InvokeError(RuntimeError, ValueError):
    """A kernel found bad run-time values (e.g. an index out of range). A RuntimeError like the official runtime's;
    also a ValueError, which is what the kernels raise."""


def executor_mode() -> str:
    """'compiled' (default) or 'python' (one Python call per kernel; for debugging): $LITE_NUMBA_EXECUTOR."""
    return os.environ.get("LITE_NUMBA_EXECUTOR", "compiled")


class Segment:
    """A run of static nodes executed by one compiled call."""

    def __init__(self, nodes: list[int], calls: list[tuple[int, Call]]):
        self.nodes = nodes
        self.calls = calls
        self.run = None
        self.aux = np.zeros(64, np.uint8)
        self.it = np.zeros(1, np.int64)
        self.ft = np.zeros(1, np.float64)
        self.fp = np.zeros(1, np.int64)  # native entry addresses of the kernels the runner calls (native_call)
        self.py_calls: list[tuple[Any, tuple, int]] = []  # (fn, resolved args, node) for python mode / profiling
        self.source = ""


class GraphRuntime:
    """The runtime state of one subgraph: tensors, prepared nodes, arena, segments."""

    def __init__(self, plan: SubgraphPlan, kernels: list[OpKernel | None], *, num_threads: int = 1,
                 preserve_all_tensors: bool = False, subgraph_index: int = 0, host_env: Any = None):
        self.plan = plan
        self.kernels = kernels
        self.num_threads = num_threads
        self.preserve_all = preserve_all_tensors
        self.subgraph_index = subgraph_index
        self.host_env = host_env  # the Interpreter, for ops that call other subgraphs
        self.tensors = [Tensor(s.index, s.name, s.dtype, s.shape, s, s.data) for s in plan.tensors]
        self.states: list[Any] = [None] * len(plan.nodes)
        self._inited = [False] * len(plan.nodes)
        self.ready = False
        self.arena = np.zeros(0, np.uint8)
        self.arena_size = 0
        self.views: dict[int, np.ndarray] = {}
        self.fast_views: dict[int, np.ndarray] = {}  # arena views of static, non-const tensors (set/get fast path)
        self.dynamic_arrays: dict[int, np.ndarray] = {}
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
        self._memo: dict[int, tuple] = {}  # node -> its last dynamic preparation (see _run_dynamic)
        self._folded: set[int] = set()  # tensors computed once at allocate (see _fold)
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
        if self._dynamic_phase:
            cur = self.dynamic_arrays.get(i)
            if cur is None or cur.shape != t.shape:  # keep the array while the shape holds (see _run_dynamic)
                self.dynamic_arrays[i] = np.zeros(shape, t.dtype)

    def _check_bytes(self, t: Tensor, shape) -> None:
        """Refuse a shape needing more memory than the limit before anything is allocated (planner.memory_limit)."""
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
        if v is None:
            raise ValueError("Tensor data is null. Run allocate_tensors() first")
        return v

    # --- prepare and plan -------------------------------------------------------------------------------------
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
                raise self._node_error(node, ValueError(_overflow_cause(self, node, e))) from None
            raise self._node_error(node, e) from None
        except ArenaLimitError as e:
            raise ArenaLimitError(f"{e}\nNode number {node.index} ({node.op_name}) failed to prepare.") from None
        return ctx

    def allocate(self, assumed: dict[int, np.ndarray] | None = None) -> None:
        """Prepare every node in order, plan the arena and build the executable segments.

        `assumed`: values of computed tensors to take as known (a specialised plan, see _specialise); each is
        checked at run time by a guard in front of the first node that read it."""
        self.ready = False
        self._memo = {}
        self.assumed = dict(assumed) if assumed else {}
        self._guarded = set()
        self._observed = {}
        self._last_observed = None
        self._spec_pending = False
        self.fast_views = {}
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
        for node in self.plan.nodes:
            k = self.kernels[node.index]
            uses_dynamic = any(i >= 0 and i in self.dynamic_tensors for i in node.inputs)
            if k is not None and k.host is not None:
                # host ops (control flow, variables) prepare statically when they can and run on the host, unless
                # their prepare scheduled compiled calls (resource variables of a fixed shape): then they are
                # static nodes like any other
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
        self._plan_memory(node_temps)
        self._build_steps()
        self._spec_allowed = (not self.assumed and bool(self.dynamic_nodes)
                              and all(self.kernels[n].host is None for n in self.dynamic_nodes)
                              and not any(t.spec.is_variable for t in self.tensors))
        self._make_program()
        self.fast_views = {i: v for i, v in self.views.items() if i < len(self.tensors)}
        self.ready = True

    # --- speculation: a static plan for the values that dynamic nodes saw -----------------------------------
    # A general plan re-prepares value-dependent nodes from Python at every invoke (~60 us per node). When an
    # invoke has shown the values those nodes read (usually functions of input shapes only), the next invoke
    # re-plans with the values assumed: every node is static and the graph runs as one compiled call, with a
    # guard in front of the first reader of each assumed value. A guard that fails (the values changed) sends
    # that invoke back to the general plan; speculation resumes once two general invokes agree, and stops after
    # SPEC_MAX_FAILURES failures. Graphs with host nodes, variable tensors or data-dependent shapes (defer) are
    # never specialised: a fallback re-runs the invoke from the start, which must have no side effects.
    SPEC_MAX_FAILURES = 4

    @property
    def specialised(self) -> bool:
        """True while the plan in force assumes run-time values (every node static, guarded)."""
        return bool(self.assumed)

    # --- constant folding -------------------------------------------------------------------------------------
    # A builtin node whose inputs are all constant (DEQUANTIZE of float16 or int8 weights, DENSIFY of sparse
    # weights, shape arithmetic on constants) runs once at allocate; its outputs become constants, so that later
    # nodes see constant weights (packed once in their prepare) and the runner has no call for it. The official
    # runtime does the same for DEQUANTIZE and DENSIFY. Custom ops (they may keep state), host ops, graph inputs,
    # outputs and variables are never folded.

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
        n_nodes = len(self.plan.nodes)
        end = max(n_nodes - 1, 0)
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for node in self.plan.nodes:
            for i in node.inputs:
                if i >= 0:
                    first.setdefault(i, node.index)
                    last[i] = node.index
            for o in node.outputs:
                if o >= 0:
                    first.setdefault(o, node.index)
                    last[o] = max(last.get(o, node.index), node.index)
        pinned = set(self.plan.inputs) | set(self.plan.outputs)
        allocs = []
        for t in self.tensors:
            if t.is_const or t.index in self.dynamic_tensors or t.dtype == np.dtype(object):
                continue
            if t.index in pinned or self.preserve_all or t.spec.is_variable or t.index not in first:
                allocs.append(Allocation(t.index, t.nbytes, 0, end))
            else:
                allocs.append(Allocation(t.index, t.nbytes, first[t.index], last[t.index]))
        for ni, temps in node_temps.items():
            for t in temps:
                lo, hi = (0, end) if self.preserve_all else (ni, ni)
                allocs.append(Allocation(t.index, t.nbytes, lo, hi))
        for a in allocs:  # inputs and declared shapes never went through set_shape
            t = self.tensors[a.key] if a.key < len(self.tensors) else self._temps[a.key - len(self.tensors)]
            self._check_bytes(t, t.shape)
        offsets, total = plan_arena(allocs)
        if allocs:
            big = max(allocs, key=lambda a: a.nbytes)
            t = self.tensors[big.key] if big.key < len(self.tensors) else self._temps[big.key - len(self.tensors)]
            check_arena_bytes(total, f"tensor {t.index} ({t.name!r}, {t.dtype.name} {list(t.shape)}, "
                                     f"{t.nbytes} bytes)", self.max_arena_bytes)
        old = {i: self.views[i].copy() for i in self.views if i < len(self.tensors)
               and (self.tensors[i].spec.is_variable)}
        self.arena_size = total
        self.arena = np.zeros(max(total, 64), np.uint8)
        self.offsets = offsets
        self.views = {}
        for a in allocs:
            t = self.tensors[a.key] if a.key < len(self.tensors) else self._temps[a.key - len(self.tensors)]
            off = offsets[a.key]
            self.views[a.key] = self.arena[off:off + t.nbytes].view(t.dtype).reshape(t.shape)
        for i, v in old.items():
            if v.shape == self.views[i].shape:
                self.views[i][...] = v
        if not old:  # first allocation; a re-allocation keeps the state carried so far
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
        calls = [(ni, c) for ni in nodes for c in self.prepared[ni].calls]
        seg = Segment(nodes, calls)
        aux_parts: list[np.ndarray] = []
        aux_pos: dict[int, int] = {}
        aux_size = 0
        it: list[int] = []
        ft: list[float] = []
        kernels: list = []
        kindex: dict[int, int] = {}
        lines = []

        def aux_offset(arr: np.ndarray) -> int:
            nonlocal aux_size
            key = id(arr)
            if key not in aux_pos:
                aux_pos[key] = aux_size
                aux_parts.append(arr)
                aux_size = align64(aux_size + arr.nbytes)
            return aux_pos[key]

        pending = []  # (node, kernel, argument sources, argument types)
        fptrs: list = []  # (kernel, signature) called through fp[i]
        findex: dict = {}
        for ni, call in calls:
            src = []
            spec = []  # the arguments as lite_numba.native_call spells them
            for a in call.args:
                if isinstance(a, (Tensor, TensorView, ConstArg)):
                    if isinstance(a, ConstArg):
                        arr, shape, base = a.array, a.array.shape, "aux"
                        off = aux_offset(arr)
                    else:
                        t = a if isinstance(a, Tensor) else a.tensor
                        shape = a.shape
                        if t.is_const:
                            arr = np.ascontiguousarray(t.data)
                            base, off = "aux", aux_offset(arr)
                        else:
                            base, off = "arena", self.offsets[t.index]
                        arr = None
                    dt = a.array.dtype if isinstance(a, ConstArg) else a.dtype
                    nbytes = math.prod(shape) * dt.itemsize
                    shape = shape or (1,)
                    p = len(it)
                    it += [off, off + nbytes, *shape]
                    dims = ", ".join(f"it[{p + 2 + j}]" for j in range(len(shape)))
                    src.append(f"{base}[it[{p}]:it[{p + 1}]].view(np.{np_name(dt)}).reshape(({dims},))")
                    spec.append(f"A{base[0] if base == 'arena' else 'x'}{p}:{dt_name(dt)}:{len(shape)}")
                elif isinstance(a, float):
                    src.append(f"ft[{len(ft)}]")
                    spec.append(f"f{len(ft)}")
                    ft.append(a)
                else:
                    src.append(f"it[{len(it)}]")
                    spec.append(f"i{len(it)}")
                    it.append(int(a))
            spec = ";".join(spec)
            pending.append((ni, call.fn, src, cached_spec_types(f"0;{spec}" if spec else "0"), spec))
        # Kernels are called through their native entry addresses (lite_numba.native_call), passed in `fp` at run
        # time: the runner contains no kernel code, so it compiles in a fraction of the time and is shared by every
        # kernel version with the same signature. A callable that is not a plain Numba kernel returning None is
        # called directly (linked into the runner) instead.
        compiled = calls and executor_mode() != "python"
        if compiled:
            precompile([(fn, sig) for _, fn, _, sig, _ in pending])
        for ni, fn, src, sig, spec in pending:
            direct = not native_callable(fn, sig) if compiled else not hasattr(fn, "overloads")
            if direct:
                ki = kindex.setdefault(id(fn), len(kernels))
                if ki == len(kernels):
                    kernels.append(fn)
                lines.append(f"    k{ki}({', '.join(src)})  # node {ni}")
            else:
                fi = findex.setdefault((id(fn), sig), len(fptrs))
                if fi == len(fptrs):
                    fptrs.append((fn, sig))
                spec = f"{fi};{spec}" if spec else f"{fi}"
                lines.append(f"    call_native(arena, aux, it, ft, fp, \"{spec}\")  # node {ni} {symbol_name(fn)}")
        aux = np.zeros(max(aux_size, 64), np.uint8)
        for arr in aux_parts:
            off = aux_pos[id(arr)]
            aux[off:off + arr.nbytes] = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        seg.aux = aux
        seg.it = np.array(it or [0], np.int64)
        seg.ft = np.array(ft or [0.0], np.float64)
        seg.source = "\n".join(lines) if lines else "    pass"
        # Python-mode calls over the same storage (aux copies for constants, arena views for tensors)
        for ni, call in calls:
            args = []
            for a in call.args:
                if isinstance(a, ConstArg):
                    off = aux_pos[id(a.array)]
                    args.append(aux[off:off + a.array.nbytes].view(a.array.dtype).reshape(a.array.shape))
                elif isinstance(a, (Tensor, TensorView)):
                    t = a if isinstance(a, Tensor) else a.tensor
                    src = np.ascontiguousarray(t.data) if t.is_const else self.array(t.index)
                    args.append(src.reshape(-1).view(a.dtype).reshape(a.shape or (1,)))
                else:
                    args.append(a)
            seg.py_calls.append((call.fn, tuple(args), ni))
        if compiled:
            seg.fp = np.array([cached_address(fn.overloads[sig]) for fn, sig in fptrs] or [0], np.int64)
            run = compile_runner(seg.source, kernels)
            args = (self.arena, seg.aux, seg.it, seg.ft, seg.fp)
            sig = runner_sig(args)
            if sig not in run.overloads and not load_cached_runner(run, sig, kernels):
                if kernels and not in_disk_cache(run, sig):  # kernel by kernel, with progress; the runner links them
                    precompile([(fn, tuple(numba.typeof(a) for a in args)) for fn, args, _ in seg.py_calls
                                 if any(fn is k for k in kernels)])
                run.compile(sig)  # compile (or load from the disk cache) now, without running anything
            seg.run = run.overloads[sig].entry_point  # the compiled wrapper: skips the dispatcher's type checks
        return seg

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

    def _host_step(self, ni: int) -> tuple:
        """A host node prepared at allocate whose inputs and outputs are all planned (none dynamic) runs its host
        function directly with that preparation (_run_dynamic's memo would always hit: its storage is fixed until
        the next allocate); any other dynamic or host node runs through _run_dynamic."""
        node = self.plan.nodes[ni]
        k = self.kernels[ni]
        ctx = self.prepared[ni]
        if (k is not None and k.host is not None and ctx is not None and not ctx.calls
                and not any(i in self.dynamic_tensors for i in node.inputs if i >= 0)
                and not any(o in self.dynamic_tensors for o in node.outputs if o >= 0)):
            return self._run_host, (k.host, ctx)
        return self._run_dynamic, (ni,)

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
            if self.assumed and is_guard_failure(e):
                self._despecialise()
                return self.invoke()
            raise InvokeError(f"{e}\nNode failed to invoke (subgraph {self.subgraph_index}).") from None

    def _run_dynamic(self, ni: int) -> None:
        """Prepare and run a dynamic or host node. The prepared node is memoised: when its inputs are the same
        arrays (same shapes; outputs of earlier dynamic nodes keep their array while their shape holds) and the
        values its prepare read with ctx.value() are unchanged, prepare is skipped and the resolved calls (or the
        host function) run directly. Prepare may depend only on shapes, dtypes, options, constants and values
        read with ctx.value() (the kernel contract)."""
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
                if calls is None:
                    k.host(ctx)
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
                if o >= 0 and o in self.dynamic_tensors and o not in self.dynamic_arrays:
                    t = self.tensors[o]
                    self.dynamic_arrays[o] = np.zeros(t.shape, t.dtype)
            if k.host is not None:
                calls = None
                k.host(ctx)
            else:
                calls = [(call.fn, tuple(self._resolve(a) for a in call.args)) for call in ctx.calls]
                for fn, args in calls:
                    fn(*args)
            del self._temps[mark:]
            outputs = tuple((o, self.dynamic_arrays[o]) for o in node.outputs if o in self.dynamic_arrays)
            self._memo[ni] = (ctx, inputs, reads, outputs, calls)
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

    def invoke_profiled(self, on_node=None) -> dict[int, int]:
        """Run once calling each kernel from Python, timing every node: {node index: nanoseconds}.

        `on_node(node_index)` is called after each node has run (for tracing). Results equal `invoke()`'s: the same
        compiled kernels run on the same storage; only the dispatch between them differs."""
        if not self.ready:
            raise RuntimeError("Invoke called on model that is not ready.")
        if self._spec_pending:
            self._specialise()
        try:
            times = self._run_profiled(on_node)
        except ValueError as e:
            if not (self.assumed and is_guard_failure(e)):
                raise
            self._despecialise()
            return self.invoke_profiled(on_node)
        if self._spec_allowed:
            self._after_general_invoke()
        return times

    def _run_profiled(self, on_node) -> dict[int, int]:
        clock = time.perf_counter_ns
        times: dict[int, int] = {}
        for kind, step in self.steps:
            if kind == "segment":
                by_node: dict[int, list] = {}
                for fn, args, ni in step.py_calls:
                    by_node.setdefault(ni, []).append((fn, args))
                for ni in step.nodes:  # node by node, so on_node sees each node's outputs before the next runs
                    t0 = clock()
                    for fn, args in by_node.get(ni, ()):
                        fn(*args)
                    times[ni] = times.get(ni, 0) + clock() - t0
                    if on_node is not None:
                        on_node(ni)
            else:
                t0 = clock()
                self._run_dynamic(step)
                times[step] = clock() - t0
                if on_node is not None:
                    on_node(step)
        return times


def _overflow_cause(rt: GraphRuntime, node: Node, err: Exception) -> str:
    """Name what made a prepare's arithmetic overflow ("cannot convert float infinity to integer"): a non-finite
    option, else the quantization scales of the node's tensors (finite, but whose ratios do not fit)."""
    bad = {k: v for k, v in node.options.items() if isinstance(v, float) and not math.isfinite(v)}
    if bad:
        opts = ", ".join(f"{k}={v}" for k, v in bad.items())
        return f"{node.op_name}: option {opts} is not finite ({err})"
    scales = [f"{rt.tensors[i].name!r} {rt.tensors[i].quantization.scales.tolist()[:4]}"
              for i in (*node.inputs, *node.outputs) if i >= 0 and rt.tensors[i].quantization.scales.size]
    if scales:
        return f"{node.op_name}: its quantization scales give a multiplier out of range ({err}); scales: " \
               f"{'; '.join(scales)}"
    inputs = [f"{rt.tensors[i].name!r} {rt.tensors[i].dtype.name} {list(rt.tensors[i].shape)}"
              for i in node.inputs if i >= 0]
    return f"{node.op_name}: an input value does not fit an integer ({err}); inputs: {'; '.join(inputs)}"


def _same_values(a: dict[int, np.ndarray], b: dict[int, np.ndarray] | None) -> bool:
    return b is not None and a.keys() == b.keys() and all(
        a[i].shape == b[i].shape and np.array_equal(a[i], b[i]) for i in a)
