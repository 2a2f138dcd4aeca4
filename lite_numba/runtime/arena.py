"""The arena memory plan: tensor lifetimes over the node sequence, offsets placed greedily by size from them
(like TFLite's arena planner), and the memory limit every tensor and arena is checked against before it is
allocated (ArenaLimitError)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

ALIGNMENT = 64
# The smallest slot of a buffer in the arena: two buffers alive together then start >= 256 bytes apart. A loop that
# LLVM vectorised checks at run time that its output does not start within one vector block (vector width x unroll:
# 256 bytes for AVX-512, 128 for AVX2) above an input, and runs its scalar copy when it does, overlap or not: packed
# tiny tensors (a [1, 16] float32 state is 64 bytes) fell into it for most calls.
MIN_SLOT = 256


@dataclass(frozen=True)
class Allocation:
    """A buffer needing arena space from node `first` to node `last` inclusive."""

    key: int
    nbytes: int
    first: int
    last: int


def align64(n: int) -> int:
    """n rounded up to the arena alignment (64 bytes: a cache line, and any SIMD load)."""
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def zeroed_arena(nbytes: int) -> np.ndarray:
    """A zeroed uint8 array of nbytes whose data starts on a 64-byte boundary: the planned offsets are multiples of
    64, so every buffer then starts on a cache line (numpy gives 16-byte alignment: a large arena from mmap starts 16
    bytes past a page, and every 64-byte vector access to it straddled two lines)."""
    raw = np.zeros(nbytes + ALIGNMENT, np.uint8)
    start = (-raw.ctypes.data) % ALIGNMENT
    return raw[start:start + nbytes]


def lifetimes(nodes) -> tuple[dict[int, int], dict[int, int]]:
    """(first, last): for every tensor a node reads or writes, the index of the first and of the last such node."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for node in nodes:
        for i in node.inputs:
            if i >= 0:
                first.setdefault(i, node.index)
                last[i] = node.index
        for o in node.outputs:
            if o >= 0:
                first.setdefault(o, node.index)
                last[o] = max(last.get(o, node.index), node.index)
    return first, last


def plan_aliases(nodes, tensors, declared: dict[int, list[tuple[int, int]]], skip: set[int], inputs, outputs,
                 writable: frozenset | set = frozenset(), views: dict[int, list[tuple[int, int]]] | None = None,
                 boundary: frozenset | set = frozenset()) -> dict[int, int]:
    """Which outputs live in an input's storage: {tensor: the tensor whose allocation it uses} (its class's root).

    `declared`: node index -> [(output slot, input slot)] from the kernels' `ctx.share_storage` (the calls are right
    when both are one memory). Granted, in node order, when the output is a fresh tensor of the same byte size
    written by this node only, and the input's class (the input and every tensor already sharing its storage):
    - has no member in `skip` (constants, dynamic tensors, strings) and no variable tensor;
    - has no graph input, unless it is in `writable` (its owner lets the graph update it in place: a KV cache bound
      with its same-named output to one buffer, docs/design/llm.md), and no member written by another node;
    - is read by no later node and holds no graph output (the caller reads those after the run);
    - is not also another input of this node.
    `views`: node index -> [(output slot, input slot, copy calls)] from `ctx.view_of` (the output is the input's
    bytes, a RESHAPE): granted when the output is fresh, of the same byte size and written by this node only, and
    no member of the input's class nor the output is a graph input or output, in `skip`, a variable, written by
    several nodes or in `boundary` (tensors a host or dynamic node reads or writes: a called subgraph's arguments
    and results).
    Later reads of the input do not matter (nothing writes the class afterwards unless an in-place grant above
    allows it, and that one requires every member, views included, to be dead).
    Everything else keeps storage of its own (graph inputs and outputs are never aliased otherwise)."""
    last_read: dict[int, int] = {}
    writers: dict[int, int] = {}
    for node in nodes:
        for i in node.inputs:
            if i >= 0:
                last_read[i] = node.index
        for o in node.outputs:
            if o >= 0:
                writers[o] = writers.get(o, 0) + 1
    end = len(nodes)
    for o in outputs:
        last_read[o] = end
    inputs = set(inputs)
    root: dict[int, int] = {}
    members: dict[int, list[int]] = {}

    def movable(m: int) -> bool:
        t = tensors[m]
        return m not in skip and not t.spec.is_variable and (m not in inputs or (m in writable and m not in writers))

    views = views or {}
    graph_outputs = set(outputs)

    def viewable(m: int) -> bool:
        return (m not in skip and not tensors[m].spec.is_variable and m not in inputs and m not in graph_outputs
                and m not in boundary and writers.get(m) == 1)

    for node in nodes:
        for ko, ki, _ in views.get(node.index, ()):
            if ko >= len(node.outputs) or ki >= len(node.inputs):
                continue
            o, i = node.outputs[ko], node.inputs[ki]
            if o < 0 or i < 0 or o == i or o in root or not viewable(o) or tensors[o].nbytes != tensors[i].nbytes:
                continue
            r = root.get(i, i)
            cls = members.get(r, [r])
            if all(viewable(m) for m in cls):
                root[o] = r
                root.setdefault(r, r)
                members[r] = cls + [o]
        for ko, ki in declared.get(node.index, ()):
            if ko >= len(node.outputs) or ki >= len(node.inputs):
                continue
            o, i = node.outputs[ko], node.inputs[ki]
            if o < 0 or i < 0 or o == i or o in root or o in inputs or writers.get(o) != 1 or not movable(o):
                continue
            if tensors[o].nbytes != tensors[i].nbytes:
                continue
            r = root.get(i, i)
            cls = members.get(r, [r])
            others = [x for k, x in enumerate(node.inputs) if k != ki]
            if any(not movable(m) or last_read.get(m, -1) > node.index or m in others
                   or (m not in inputs and writers.get(m) != 1) for m in cls):
                continue
            root[o] = r
            root.setdefault(r, r)
            members[r] = cls + [o]
    return {m: r for m, r in root.items() if m != r}


def declared_sharing(nodes, prepared, dynamic_nodes) -> tuple[dict, dict, set]:
    """What the static nodes' prepares declared, as plan_aliases takes it: the outputs that may live in an input's
    storage (ctx.share_storage: node index -> [(output slot, input slot)]), the outputs that are their input's bytes
    (ctx.view_of: node index -> [(output slot, input slot, copy calls)]), and the tensors dynamic and host nodes
    read or write (`boundary`)."""
    static = [(ni, ctx) for ni, ctx in enumerate(prepared) if ctx is not None and ni not in dynamic_nodes]
    declared = {ni: ctx.in_place for ni, ctx in static if ctx.in_place}
    views = {ni: ctx.views for ni, ctx in static if ctx.views}
    boundary = {t for ni in dynamic_nodes for t in (*nodes[ni].inputs, *nodes[ni].outputs) if t >= 0}
    return declared, views, boundary


def drop_granted_copies(nodes, prepared, views: dict, aliases: dict[int, int]) -> None:
    """A node whose views plan_aliases granted all no longer runs their copies (its other calls, such as a
    speculation guard, stay): its outputs already are its inputs' bytes."""
    root = lambda t: aliases.get(t, t)  # noqa: E731
    for ni, pairs in views.items():
        node, ctx = nodes[ni], prepared[ni]
        if all(root(node.outputs[o]) == root(node.inputs[i]) for o, i, _ in pairs):
            copies = {id(c) for _, _, calls in pairs for c in calls}
            ctx.calls[:] = [c for c in ctx.calls if id(c) not in copies]


def graph_allocations(nodes, tensors, node_temps: dict[int, list], skip: set[int], keep: set[int],
                      preserve_all: bool, aliases: dict[int, int] | None = None) -> list[Allocation]:
    """The buffers of one subgraph's arena: every tensor not in `skip` (constants, dynamic tensors, strings) live
    from its first producer to its last consumer, or for the whole run when in `keep` (graph inputs, outputs and
    variables), never written by a node, or when `preserve_all`; every node's temporaries (`node_temps`: node
    index -> tensors) live during their node (the whole run when `preserve_all`). `aliases` (plan_aliases): a tensor
    living in another's storage has no allocation of its own; its root's spans its whole class's lifetime."""
    end = max(len(nodes) - 1, 0)
    first, last = lifetimes(nodes)
    aliases = aliases or {}
    span: dict[int, tuple[int, int]] = {}
    for t in tensors:
        if t.index in skip:
            continue
        if t.index in keep or preserve_all or t.index not in first:
            lo, hi = 0, end
        else:
            lo, hi = first[t.index], last[t.index]
        r = aliases.get(t.index, t.index)
        if r in span:
            lo, hi = min(lo, span[r][0]), max(hi, span[r][1])
        span[r] = (lo, hi)
    allocs = [Allocation(t.index, t.nbytes, *span[t.index]) for t in tensors if t.index in span]
    for ni, temps in node_temps.items():
        for t in temps:
            lo, hi = (0, end) if preserve_all else (ni, ni)
            allocs.append(Allocation(t.index, t.nbytes, lo, hi))
    return allocs


def plan_arena(allocs: list[Allocation]) -> tuple[dict[int, int], int]:
    """Offsets for every allocation so that buffers alive at the same time never overlap.

    Largest first; each goes to the lowest aligned offset that fits between the buffers already placed whose
    lifetimes intersect its own. Returns (offset by key, arena size in bytes). The scan over the placed buffers is
    in numpy (an LLM's graph has thousands of tensors: the Python scan was quadratic, 0.2 s per signature): with
    the live buffers sorted by (offset, end), the candidate offset before buffer i is the running maximum of the
    ends before it, and the first buffer that starts at or after candidate + size leaves the gap."""
    order = sorted(allocs, key=lambda a: (-a.nbytes, a.first, a.key))
    n = len(order)
    first, last = np.empty(n, np.int64), np.empty(n, np.int64)
    start, end = np.empty(n, np.int64), np.empty(n, np.int64)  # (placed buffers' ends are 64-byte aligned)
    offsets: dict[int, int] = {}
    total = 0
    for i, a in enumerate(order):
        size = max(align64(a.nbytes), MIN_SLOT)
        live = np.flatnonzero((first[:i] <= a.last) & (last[:i] >= a.first))
        offset = 0
        if live.size:
            offs, ends = start[live], end[live]
            by = np.lexsort((ends, offs))
            offs, ends = offs[by], ends[by]
            reach = np.maximum.accumulate(ends)
            before = np.concatenate(([0], reach[:-1]))
            fits = np.flatnonzero(before + size <= offs)
            offset = int(before[fits[0]]) if fits.size else int(reach[-1])
        offsets[a.key] = offset
        first[i], last[i], start[i], end[i] = a.first, a.last, offset, offset + size
        total = max(total, offset + size)
    return offsets, total


class ArenaLimitError(MemoryError):
    """A tensor or the arena of a subgraph would need more memory than the limit (a MemoryError, so callers that
    handle running out of memory handle it; the message names the tensor, its shape and the sizes)."""


_PHYSICAL: int | None = None


def memory_limit(max_arena_bytes: int | None = None) -> tuple[int, str]:
    """(bytes, what they are): the Interpreter's max_arena_bytes when set, else the machine's physical memory (or
    the process's address-space limit when lower). No single allocation beyond it can be sensible: a model
    declaring more is refused with ArenaLimitError instead of being killed by the OOM killer half-way through."""
    global _PHYSICAL
    if max_arena_bytes is not None:
        return int(max_arena_bytes), "max_arena_bytes"
    if _PHYSICAL is None:
        try:
            _PHYSICAL = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            _PHYSICAL = 1 << 40
        try:
            import resource  # lazy: POSIX only

            soft = resource.getrlimit(resource.RLIMIT_AS)[0]
            if soft != resource.RLIM_INFINITY:
                _PHYSICAL = min(_PHYSICAL, soft)
        except (ImportError, ValueError, OSError):
            pass
    return _PHYSICAL, "the memory of this machine"


def _human(n: int) -> str:
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} B"


def check_tensor_bytes(what: str, nbytes: int, max_arena_bytes: int | None = None) -> None:
    """Raise ArenaLimitError when one tensor (`what` names it: index, name, type, shape) needs more than the
    limit."""
    limit, source = memory_limit(max_arena_bytes)
    if nbytes > limit:
        raise ArenaLimitError(f"{what} needs {nbytes} bytes ({_human(nbytes)}), more than {source} "
                              f"({limit} bytes, {_human(limit)})")


def check_arena_bytes(total: int, largest: str, max_arena_bytes: int | None = None) -> None:
    """Raise ArenaLimitError when the planned arena (`largest` names its largest tensor) exceeds the limit."""
    limit, source = memory_limit(max_arena_bytes)
    if total > limit:
        raise ArenaLimitError(f"the arena would need {total} bytes ({_human(total)}), more than {source} "
                              f"({limit} bytes, {_human(limit)}); its largest tensor is {largest}")


def in_arena(a, arena: np.ndarray) -> bool:
    """Whether `a` is an array viewing `arena` (a zeroed_arena: itself a view of the buffer it was aligned in, which
    numpy makes the base of every view of it)."""
    return isinstance(a, np.ndarray) and a.base is not None and a.base is (arena if arena.base is None else arena.base)


def same_place(a, old, new):
    """A view of arena `new` where `a` views arena `old` (same offset, dtype, shape); anything else unchanged."""
    if not in_arena(a, old):
        return a
    off = a.ctypes.data - old.ctypes.data
    return new[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
