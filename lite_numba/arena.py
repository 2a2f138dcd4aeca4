"""The arena memory plan: tensor lifetimes over the node sequence, and offsets placed greedily by size from them,
like TFLite's arena planner."""

from __future__ import annotations

from dataclasses import dataclass

ALIGNMENT = 64


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


def plan_arena(allocs: list[Allocation]) -> tuple[dict[int, int], int]:
    """Offsets for every allocation so that buffers alive at the same time never overlap.

    Largest first; each goes to the lowest aligned offset that fits between the buffers already placed whose
    lifetimes intersect its own. Returns (offset by key, arena size in bytes)."""
    placed: list[tuple[int, int, Allocation]] = []  # (offset, end, alloc)
    offsets: dict[int, int] = {}
    total = 0
    for a in sorted(allocs, key=lambda a: (-a.nbytes, a.first, a.key)):
        size = align64(max(a.nbytes, 1))
        live = sorted((off, end) for off, end, b in placed if b.first <= a.last and a.first <= b.last)
        offset = 0
        for off, end in live:
            if offset + size <= off:
                break
            offset = max(offset, align64(end))
        offsets[a.key] = offset
        placed.append((offset, offset + size, a))
        total = max(total, offset + size)
    return offsets, total
