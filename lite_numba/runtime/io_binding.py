"""Graph inputs and outputs read and written in place, in arrays the caller owns (the CompiledModel's TensorBuffers).

A compiled runner reaches every tensor argument as `arena data + it[p]` (lite_numba.jit.native_call builds the array
from that pointer: no slicing, no bounds), so a planned tensor can live elsewhere for a run by rebasing the positions
of its arguments in the segments' `it` tables: it[p] = its byte offset + (address of the caller's array - address of
the tensor in the arena), and the argument's end it[p + 1] likewise. `IOBinding` does that for the graph inputs and
outputs of one allocated GraphRuntime: the first kernels read the caller's input array, the last ones write the
caller's output array, and nothing is copied. `layout(targets)` computes the table writes for a set of arrays once;
`use(layout)` applies them (nothing to do when that layout is in use already), so running again with the same
arrays costs nothing and switching between a few sets of arrays costs one small write per table.

A tensor can be bound when the whole invoke is compiled segments that reach the arena only through call_native_at
(GraphRuntime.native_program(), Segment.arena_args), and it is planned in the arena with a non-zero size, is not
both an input and an output, and is not an input some node writes (a variable); anything else (host or dynamic
nodes, Python mode, speculation) has `bindable(i)` False and the caller copies through `GraphRuntime.array(i)`
instead. While a tensor is bound its arena storage is stale: the owner of the binding must be the only one running
this GraphRuntime (never one shared with a clone, whose segments share these tables, nor a subgraph control flow
calls), and must make a new binding after the runtime is allocated again (`valid()`).
"""

from __future__ import annotations

import numpy as np

from .executor import GraphRuntime

__all__ = ["IOBinding", "Layout"]


class IOBinding:
    """Rebases the compiled runners' arguments of graph inputs and outputs of `rt` onto caller-owned arrays."""

    def __init__(self, rt: GraphRuntime):
        self.rt = rt
        self.arena = rt.arena
        self.steps = rt.steps
        base = rt.arena.ctypes.data
        self._base = base
        # tensor -> (arena offset, [(it table, positions, their offsets, their ends)]) for every bindable tensor
        self._slots: dict[int, tuple[int, list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]]] = {}
        self.current: Layout | None = None  # the layout in use (None: every tensor in the arena)
        segments = [seg for _, seg in rt.steps]
        if rt.native_program() is None or any(seg.arena_args is None for seg in segments):
            return
        # an input a node writes (a variable, or a malformed model's node output) is never bound: a kernel would
        # write into the caller's input array
        written = {o for node in rt.plan.nodes for o in node.outputs} | {
            t.index for t in rt.tensors if t.spec.is_variable}
        for i in set(rt.plan.inputs) ^ set(rt.plan.outputs):
            view = rt.fast_views.get(i)
            if view is None or view.nbytes == 0 or not view.flags.c_contiguous:
                continue
            if i in rt.plan.inputs and i in written:
                continue
            off = view.ctypes.data - base
            slots = []
            for seg in segments:
                pos = seg.arena_args
                hit = pos[seg.it[pos] == off] if pos.size else pos
                if not hit.size:
                    continue
                start, end = seg.it[hit].copy(), seg.it[hit + 1].copy()
                if np.any(end <= start) or np.any(end > off + view.nbytes):  # (arguments start at their tensor)
                    slots = None
                    break
                slots.append((seg.it, hit, start, end))
            if slots is not None:
                self._slots[i] = (off, slots)

    def valid(self) -> bool:
        """Whether the runtime still runs the segments this binding rebased (not allocated again since)."""
        rt = self.rt
        return rt.ready and rt.arena is self.arena and rt.steps is self.steps

    def bindable(self, i: int) -> bool:
        """Whether tensor i's compiled readers and writers can be pointed at another array."""
        return i in self._slots

    def layout(self, targets: dict[int, np.ndarray | None]) -> Layout:
        """Where the bindable tensors in `targets` live for a run: in the array given (checked by the caller:
        C-contiguous, aligned for the tensor's dtype, writable when the tensor is an output, at least the tensor's
        bytes), or in the arena for None. Compute once, `use` for every run with the same arrays."""
        tables: dict[int, tuple[np.ndarray, list, list]] = {}
        arrays = []
        for i, array in targets.items():
            off, slots = self._slots[i]
            delta = 0
            if array is not None:
                delta = array.__array_interface__["data"][0] - self._base - off
                arrays.append(array)
            for it, pos, start, end in slots:
                _, where, values = tables.setdefault(id(it), (it, [], []))
                where += [pos, pos + 1]
                values += [start + delta, end + delta]
        return Layout([(it, np.concatenate(where), np.concatenate(values)) for it, where, values in tables.values()],
                      arrays)

    def use(self, layout: Layout) -> None:
        """Rebase the runners' arguments as `layout` says (nothing to do when it is already in use). The binding
        keeps the layout, and so its arrays, alive until another one is used."""
        if self.current is layout:
            return
        for it, where, values in layout.writes:
            it[where] = values
        self.current = layout

    def release(self) -> None:
        """Every tensor back in the arena (when the runtime may be run by someone else afterwards)."""
        if self.valid():
            self.use(self.layout(dict.fromkeys(self._slots)))
        self.current = None


class Layout:
    """Precomputed writes into the runners' tables (IOBinding.layout): [(it table, positions, values)], and the
    arrays they point into."""

    __slots__ = ("writes", "arrays")

    def __init__(self, writes: list[tuple[np.ndarray, np.ndarray, np.ndarray]], arrays: list[np.ndarray]):
        self.writes = writes
        self.arrays = arrays
