"""Graph rewrites applied before a subgraph is prepared: patterns whose nodes, run one by one, would be dynamic.

SLICE, SLICE -> CONCATENATION (Keras 3 RNN loop bodies: `out = concat(x[0:t], y, x[t+1:])`, with the slices'
begin or size taken from the loop counter). Unfused, both SLICE outputs have counter-dependent shapes, so the three
nodes are prepared again from Python at every loop iteration. The rewrite matches it only when the slices provably
take all of x outside the concatenation axis (their begin/size entries there are the constants 0 and -1, traced
through constant CONCATENATIONs of the index vectors): then the result has x's shape whatever the counter, and
one static kernel (kernels/movement/slice.py SLICE_UPDATE) reads the counter entries at run time, applies SLICE's range
checks and raises when the pieces would not add up to x's length. The SLICE nodes keep their place with empty
outputs (FUSED_AWAY). Not applied with experimental_preserve_all_tensors (the slices' values would be missing).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..format.plan import Node, SubgraphPlan
from ..kernels.registry import REWRITES


def _consumers(plan: SubgraphPlan) -> dict[int, list[int]]:
    uses: dict[int, list[int]] = {}
    for n in plan.nodes:
        for i in n.inputs:
            if i >= 0:
                uses.setdefault(i, []).append(n.index)
    return uses


def _symbolic_vector(plan: SubgraphPlan, producers: dict[int, Node], t: int, depth: int = 0) -> list | None:
    """The entries of 1-D int tensor t: ints where known before running, None where computed; None if not 1-D."""
    spec = plan.tensors[t]
    if len(spec.shape) != 1 or spec.dtype not in (np.int32, np.int64):
        return None
    if spec.data is not None:
        return [int(v) for v in np.asarray(spec.data).reshape(-1)]
    node = producers.get(t)
    if (node is not None and depth < 8 and node.op_name == "CONCATENATION" and not node.is_custom
            and int(node.options.get("axis", 0)) in (0, -1)
            and not int(node.options.get("fused_activation_function", 0) or 0)):
        parts = []
        for i in node.inputs:
            if i < 0:
                return None
            s = plan.tensors[i]
            if s.dtype != spec.dtype or len(s.shape) > 1:
                return None
            sub = _symbolic_vector(plan, producers, i, depth + 1) if len(s.shape) == 1 else \
                ([int(np.asarray(s.data).reshape(-1)[0])] if s.data is not None else [None])
            if sub is None:
                return None
            parts += sub
        if len(parts) == spec.shape[0]:
            return parts
        return None
    return [None] * spec.shape[0]


def _same_quantization(specs) -> bool:
    q0 = specs[0].quantization
    return all(np.array_equal(s.quantization.scales, q0.scales) and
               np.array_equal(s.quantization.zero_points, q0.zero_points) for s in specs)


def fuse_slice_updates(plan: SubgraphPlan, kernels: list) -> tuple[SubgraphPlan, list]:
    """Replace SLICE, SLICE -> CONCATENATION(x[a], y, x[b]) by SLICE_UPDATE (see the module docstring)."""
    producers = {o: n for n in plan.nodes for o in n.outputs if o >= 0}
    uses = _consumers(plan)
    pinned = set(plan.outputs) | set(plan.inputs)
    nodes = list(plan.nodes)
    kernels = list(kernels)
    changed = False
    for c in plan.nodes:
        if (c.op_name != "CONCATENATION" or c.is_custom or len(c.inputs) != 3 or len(c.outputs) != 1
                or int(c.options.get("fused_activation_function", 0) or 0)):
            continue
        a, y, b = c.inputs
        sa, sb = producers.get(a), producers.get(b)
        if (sa is None or sb is None or sa is sb or y < 0 or sa.op_name != "SLICE" or sb.op_name != "SLICE"
                or sa.is_custom or sb.is_custom or len(sa.inputs) != 3 or len(sb.inputs) != 3
                or sa.inputs[0] != sb.inputs[0] or sa.inputs[0] < 0
                or kernels[sa.index] is None or kernels[sb.index] is None or kernels[c.index] is None):
            continue
        x = sa.inputs[0]
        specs = [plan.tensors[i] for i in (x, y, a, b, c.outputs[0])]
        rank = len(specs[0].shape)
        if (len({s.dtype for s in specs}) != 1 or specs[0].dtype == np.dtype(object) or not _same_quantization(specs)
                or any(len(s.shape) != rank for s in specs) or rank == 0
                or any(s.is_variable or s.is_const for s in specs[2:]) or specs[0].is_const):
            continue
        if uses.get(a) != [c.index] or uses.get(b) != [c.index] or a in pinned or b in pinned:
            continue
        axis = int(c.options.get("axis", 0))
        axis = axis + rank if axis < 0 else axis
        if not 0 <= axis < rank:
            continue
        vectors = [_symbolic_vector(plan, producers, i) if i >= 0 else None
                   for i in (sa.inputs[1], sa.inputs[2], sb.inputs[1], sb.inputs[2])]
        if any(v is None or len(v) != rank for v in vectors):
            continue
        full = all(v[d] == want for d in range(rank) if d != axis
                   for v, want in zip(vectors, (0, -1, 0, -1)))
        if not full:
            continue
        inputs = (x, y, sa.inputs[1], sa.inputs[2], sb.inputs[1], sb.inputs[2])
        nodes[c.index] = dataclasses.replace(c, inputs=inputs, options={**c.options, "axis": axis,
                                                                        "fused": (sa.index, sb.index)})
        kernels[c.index] = REWRITES["SLICE_UPDATE"]
        for s in (sa, sb):
            nodes[s.index] = dataclasses.replace(s, inputs=(), options={**s.options, "fused_into": c.index})
            kernels[s.index] = REWRITES["FUSED_AWAY"]
        changed = True
    if not changed:
        return plan, kernels
    return dataclasses.replace(plan, nodes=tuple(nodes)), kernels


def fuse(plan: SubgraphPlan, kernels: list) -> tuple[SubgraphPlan, list]:
    """Every rewrite, in order."""
    return fuse_slice_updates(plan, kernels)
