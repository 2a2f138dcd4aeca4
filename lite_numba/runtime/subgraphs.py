"""Called subgraphs for host ops (WHILE, IF, CALL_ONCE): prepared per input shapes, cached, bound for loops.

`SubgraphHost` is the part of `Interpreter` that host kernels use through `PrepareContext` (call_subgraph,
bind_subgraph, subgraph_io, subgraph_output_shapes); `BoundSubgraph` is a subgraph prepared once for fixed input
shapes, which a loop runs many times.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .executor import GraphRuntime, InvokeError

__all__ = ["BoundSubgraph", "SubgraphHost"]


class SubgraphHost:
    """Mixin of Interpreter: the services host ops use to run other subgraphs. Expects `model`, `_runtimes`,
    `_runtime(i)`, `_new_runtime(i)`, `_call_depth`, `_shape_cache`, `_shape_hits`, `_bound` and `_preserve_all`.

    Variable tensors (is_variable) of a called subgraph restart from zeros (their zero point when quantized) whenever
    the official runtime allocates that subgraph again, which is what its Subgraph::AllocateTensors does: when the
    subgraph is prepared for new input shapes (WHILE and IF prepare, a loop variable changing shape), and at every
    WHILE or IF run, because both release their subgraphs' memory after running (Subgraph::ReleaseMemory makes the
    next AllocateTensors a full one) unless experimental_preserve_all_tensors is set. Within one WHILE run the body
    keeps its state from iteration to iteration while the loop variables keep their shapes. Measured with
    ai-edge-litert 2.3 (an RNN cell with a variable hidden state in a WHILE body and in an IF branch)."""

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
        rt.init_variables()  # allocated again (new shapes): officially a full AllocateTensors, which resets them
        return rt

    def restart_variables(self, index: int) -> None:
        """A WHILE or IF is about to run subgraph `index`: reset its variable tensors, as the official allocation
        after the previous run's ReleaseMemory does (not with experimental_preserve_all_tensors, which keeps the
        subgraph's memory). Cheap when the subgraph has none."""
        if self._preserve_all:
            return
        with_vars = self._variable_subgraphs
        if with_vars is None:
            with_vars = self._variable_subgraphs = frozenset(
                k for k, sg in enumerate(self.model.subgraphs) if any(t.is_variable for t in sg.tensors))
        if index in with_vars:
            rt = self._runtimes.get(index)
            if rt is not None and rt.ready:
                rt.init_variables()

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

    def bind_subgraph(self, index: int, inputs: list[np.ndarray]) -> BoundSubgraph:
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


def _nothing() -> None:
    pass


class BoundSubgraph:
    """A called subgraph prepared for fixed input shapes (Interpreter.bind_subgraph), for host ops that run it many
    times (WHILE): `inputs` are its input tensors' storage (write them, then `run()`), `output(k)` output k's
    current storage. `static_outputs` is True when every output is planned in the arena with a fixed shape (then
    `outputs` lists their storage). Valid while `valid()` (the runtime has not been prepared again since)."""

    def __init__(self, interp: SubgraphHost, rt: GraphRuntime):
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
