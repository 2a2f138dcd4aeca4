"""Graph rewrites applied before a subgraph is prepared: patterns whose nodes, run one by one, would be dynamic, and
the layer-norm / RMS-norm patterns converters write out of elementwise ops.

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
from ..kernels.registry import BUILTINS, REWRITES


def _fuse_away(nodes: list, kernels: list, away, into: int) -> None:
    """The nodes `away` are done by node `into`: each keeps its place with no inputs (FUSED_AWAY)."""
    for n in away:
        nodes[n.index] = dataclasses.replace(n, inputs=(), options={**n.options, "fused_into": into})
        kernels[n.index] = REWRITES["FUSED_AWAY"]


def rewritten(plan: SubgraphPlan, nodes: list, kernels: list, changed) -> tuple[SubgraphPlan, list]:
    return (dataclasses.replace(plan, nodes=tuple(nodes)), kernels) if changed else (plan, kernels)


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
        _fuse_away(nodes, kernels, (sa, sb), c.index)
        changed = True
    return rewritten(plan, nodes, kernels, changed)


# --- normalization patterns -----------------------------------------------------------------------------------
# litert-torch's LayerNorm (no affine), the TF converter's LayerNorm and an RMSNorm are 8-13 elementwise nodes each
# (MEAN, SQUARED_DIFFERENCE, ADD eps, RSQRT, MULs, RESHAPEs between); kernels/reduce/norm_fusion.py computes each
# pattern per row exactly as its nodes do, in one call. A pattern is taken only when every intermediate tensor is
# read by the pattern alone (no graph output), every tensor is float32 and no ADD / SUB / MUL has a fused
# activation; the last node becomes FUSED_NORM, the others FUSED_AWAY.


class Graph:
    def __init__(self, plan: SubgraphPlan, kernels: list):
        self.plan, self.kernels = plan, kernels
        self.producers = {o: n for n in plan.nodes for o in n.outputs if o >= 0}
        self.uses = _consumers(plan)
        self.pinned = set(plan.outputs) | set(plan.inputs)

    def spec(self, t: int):
        return self.plan.tensors[t]

    def node(self, t: int, op: str):
        """The node writing t when it is a plain float32 `op` with one output (no fused activation), else None."""
        n = self.producers.get(t)
        if (n is None or n.op_name != op or n.is_custom or len(n.outputs) != 1 or self.kernels[n.index] is None
                or int(n.options.get("fused_activation_function", 0) or 0)
                or any(i < 0 or self.spec(i).dtype != np.float32  # MEAN's axes, RESHAPE's shape: integers
                       for i in (*(n.inputs[:1] if op in ("MEAN", "RESHAPE") else n.inputs), *n.outputs))):
            return None
        return n

    def only_use(self, t: int, op: str):
        """The one node reading t (t no graph input or output) when it is a plain `op`, else None."""
        u = self.uses.get(t, [])
        if len(u) != 1 or t in self.pinned:
            return None
        n = self.plan.nodes[u[0]]
        return n if n.outputs and self.node(n.outputs[0], op) is n else None

    def back(self, t: int, chain: list) -> int:
        """t, or what the RESHAPEs producing it reshape (each read only there), appended to chain."""
        while True:
            n = self.node(t, "RESHAPE")
            if n is None or len(self.uses.get(t, [])) != 1 or t in self.pinned:
                return t
            chain.append(n)
            t = n.inputs[0]

    def forward(self, t: int, chain: list) -> int:
        """t, or the last of the RESHAPEs reading it alone, appended to chain."""
        while (n := self.only_use(t, "RESHAPE")) is not None:
            chain.append(n)
            t = n.outputs[0]
        return t

    def scalar(self, t: int) -> float | None:
        s = self.spec(t)
        return float(np.asarray(s.data).reshape(-1)[0]) if s.data is not None and np.size(s.data) == 1 else None

    def other(self, n: Node, t: int) -> int | None:
        """The other input of the binary node n, of which t is one."""
        a, b = n.inputs[:2]
        return b if a == t else a if b == t else None

    def row_mean(self, n: Node | None, x: int) -> bool:
        """n = MEAN(x) over the last axis only (other reduced axes of size 1)."""
        if n is None or n.op_name != "MEAN" or n.inputs[0] != x or self.spec(n.inputs[1]).data is None:
            return False
        shape = self.spec(x).shape
        rank = len(shape)
        if rank == 0 or shape[-1] == 0:
            return False
        axes = {int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(self.spec(n.inputs[1]).data).reshape(-1)}
        return rank - 1 in axes and all(0 <= a < rank and (a == rank - 1 or shape[a] == 1) for a in axes)


def _match_norm(g: Graph, sq: Node):
    """From SQUARED_DIFFERENCE(x, mean) or MUL(x, x): (final node, x, weight or -1, options, nodes) or None."""
    chain: list[Node] = []
    if sq.op_name == "MUL":
        x = sq.inputs[0]
        if sq.inputs[1] != x:
            return None
        kind, m = "rms", -1
    else:
        for x, m3 in (sq.inputs[:2], sq.inputs[1::-1]):
            m = g.back(m3, chain)
            if g.row_mean(g.producers.get(m), x):
                break
            chain.clear()
        else:
            return None
        kind = None
    mean_v = g.only_use(sq.outputs[0], "MEAN")
    if mean_v is None or not g.row_mean(mean_v, sq.outputs[0]):
        return None
    add = g.only_use(mean_v.outputs[0], "ADD")
    eps = g.scalar(g.other(add, mean_v.outputs[0])) if add is not None else None
    rs = g.only_use(g.forward(add.outputs[0], chain), "RSQRT") if eps is not None else None
    if rs is None:
        return None
    r = rs.outputs[0]
    body = [sq, mean_v, add, rs]
    if kind == "rms":
        r3 = g.forward(r, chain)
        a = g.only_use(r3, "MUL")
        final = g.only_use(a.outputs[0], "MUL") if a is not None and g.other(a, r3) == x else None
        w = g.other(final, a.outputs[0]) if final is not None else None
        body += [a]
        opts = {}
    else:
        mean_x = g.producers[m]
        uses_m = sorted(g.uses.get(m, []))
        r_uses = g.uses.get(r, [])
        body.append(mean_x)
        neg = next((g.plan.nodes[i] for i in uses_m if g.plan.nodes[i].op_name == "NEG"), None)
        if neg is not None and g.node(neg.outputs[0], "NEG") is neg:  # the TF converter's
            kind = "gamma"
            gm = g.only_use(r, "MUL")
            w = g.other(gm, r) if gm is not None else None
            gu = [g.plan.nodes[i] for i in g.uses.get(gm.outputs[0], [])] if gm is not None else []
            t = next((n for n in gu if g.other(n, gm.outputs[0]) == neg.outputs[0]), None)
            xg = next((n for n in gu if g.other(n, gm.outputs[0]) == x), None)
            if (t is None or xg is None or len(gu) != 2 or any(g.node(n.outputs[0], "MUL") is not n for n in gu)
                    or gm.outputs[0] in g.pinned or sorted([neg.index, sq.index]) != uses_m):
                return None
            final = g.only_use(xg.outputs[0], "ADD")
            if final is None or g.other(final, xg.outputs[0]) != t.outputs[0] or g.only_use(t.outputs[0], "ADD") \
                    is not final or g.only_use(neg.outputs[0], "MUL") is not t:
                return None
            body += [neg, gm, t, xg]
            opts = {}
        else:  # litert-torch's
            kind = "mean_shift"
            mr = next((g.plan.nodes[i] for i in r_uses if g.other(g.plan.nodes[i], r) == m), None)
            if mr is None or g.node(mr.outputs[0], "MUL") is not mr or len(r_uses) != 2:
                return None
            rest = next(g.plan.nodes[i] for i in r_uses if i != mr.index)
            r3 = r
            if g.node(rest.outputs[0], "RESHAPE") is rest:  # r is also read here: a RESHAPE of its own
                chain.append(rest)
                r3 = g.forward(rest.outputs[0], chain)
                rest = g.only_use(r3, "MUL")
            sub = g.only_use(mr.outputs[0], "SUB")
            c0 = g.scalar(sub.inputs[0]) if sub is not None and sub.inputs[1] == mr.outputs[0] else None
            if rest is None or g.node(rest.outputs[0], "MUL") is not rest or g.other(rest, r3) != x or c0 is None:
                return None
            nb3 = g.forward(sub.outputs[0], chain)
            final = g.only_use(rest.outputs[0], "ADD")
            if final is None or g.other(final, rest.outputs[0]) != nb3 or g.uses.get(nb3) != [final.index] \
                    or sorted(uses_m) != sorted([mr.index] + [n.index for n in chain if n.inputs[0] == m]
                                                + ([sq.index] if m in sq.inputs else [])):
                return None
            body += [mr, sub, rest]
            opts = {"c0": c0}
            w = -1
    if final is None or w is None or not g.spec(x).shape or g.spec(final.outputs[0]).shape != g.spec(x).shape:
        return None
    n = g.spec(x).shape[-1]
    if w >= 0 and (g.spec(w).data is None or np.size(g.spec(w).data) != n):
        return None
    inner = [n for n in body + chain if n is not final]
    if any(o in g.pinned for n in inner for o in n.outputs):
        return None
    # the shapes the pattern was matched for stay required when its MEANs also reduce size-1 axes or its RESHAPEs
    # have constant targets (a resized input would change what the nodes compute, or fail their RESHAPE)
    means = [n for n in body if n.op_name == "MEAN"]
    fixed = bool(chain) or any(np.size(g.spec(n.inputs[1]).data) != 1 for n in means)
    shape = {"shape": list(g.spec(x).shape)} if fixed else {}
    return final, x, w, {"kind": kind, "eps": eps, **opts, **shape}, inner


def fuse_norms(plan: SubgraphPlan, kernels: list) -> tuple[SubgraphPlan, list]:
    """Replace the normalization patterns (see above) by FUSED_NORM."""
    g = Graph(plan, kernels)
    nodes, kernels = list(plan.nodes), list(kernels)
    done: set[int] = set()
    for sq in plan.nodes:
        if sq.op_name not in ("SQUARED_DIFFERENCE", "MUL") or sq.index in done or g.node(sq.outputs[0], sq.op_name) \
                is not sq:
            continue
        try:
            found = _match_norm(g, sq)
        except (KeyError, IndexError, StopIteration, AttributeError):
            found = None
        if found is None:
            continue
        final, x, w, opts, inner = found
        if any(n.index in done for n in inner + [final]):
            continue
        nodes[final.index] = dataclasses.replace(final, op_name="FUSED_NORM", inputs=(x, w), options=opts)
        kernels[final.index] = REWRITES["FUSED_NORM"]
        _fuse_away(nodes, kernels, inner, final.index)
        done.update(n.index for n in inner + [final])
    return rewritten(plan, nodes, kernels, done)


# --- transposed BATCH_MATMUL operands ---------------------------------------------------------------------------
# Attention transposes its heads before the products (Q [1, T, N, H] -> [1, N, T, H], K -> [1, N, H, S]); BATCH_MATMUL
# reads any strided operand (a row table and unit segments for the lhs, a strided pack for the rhs: kernels/linear/
# batch_matmul.py), so a TRANSPOSE feeding only it, maybe through RESHAPEs that add or drop unit dimensions, is folded
# into its addressing: the node reads the transpose's input, options["views"][slot] = (perm, the operand's shape).


def fold_transposes(plan: SubgraphPlan, kernels: list) -> tuple[SubgraphPlan, list]:
    """Fold TRANSPOSE (-> RESHAPE ...) -> BATCH_MATMUL operands into the node (see above); float32 only."""
    g = Graph(plan, kernels)
    nodes, kernels = list(plan.nodes), list(kernels)
    changed = False
    for bmm in plan.nodes:
        if (bmm.op_name != "BATCH_MATMUL" or bmm.is_custom or len(bmm.inputs) != 2 or kernels[bmm.index] is None
                or any(i < 0 or g.spec(i).dtype != np.float32 for i in (*bmm.inputs, *bmm.outputs))
                or g.spec(bmm.inputs[1]).data is not None):
            continue
        inputs, views, away = list(bmm.inputs), {}, []
        for slot, t in enumerate(bmm.inputs):
            chain: list[Node] = []
            u = g.back(t, chain)
            tr = g.producers.get(u)
            if (tr is None or tr.op_name != "TRANSPOSE" or tr.is_custom or len(tr.inputs) != 2 or tr.inputs[0] < 0
                    or kernels[tr.index] is None or g.spec(tr.inputs[1]).data is None or u in g.pinned
                    or len(g.uses.get(u, [])) != 1 or g.spec(tr.inputs[0]).data is not None
                    or g.spec(tr.inputs[0]).dtype != np.float32 or bmm.inputs.count(t) != 1):
                continue
            rank = len(g.spec(tr.inputs[0]).shape)
            perm = [int(p) + rank if int(p) < 0 else int(p) for p in np.asarray(g.spec(tr.inputs[1]).data).reshape(-1)]
            shape, tshape = list(g.spec(t).shape), list(g.spec(u).shape)
            if (sorted(perm) != list(range(rank)) or len(shape) < 2 or shape[-2:] != tshape[-2:]
                    or [n for n in shape if n != 1] != [n for n in tshape if n != 1]):
                continue
            inputs[slot] = tr.inputs[0]
            views[slot] = (tuple(perm), tuple(shape))
            away += [tr, *chain]
        if not views:
            continue
        nodes[bmm.index] = dataclasses.replace(bmm, inputs=tuple(inputs), options={**bmm.options, "views": views})
        _fuse_away(nodes, kernels, away, bmm.index)
        changed = True
    return rewritten(plan, nodes, kernels, changed)


# --- PAD folded into the convolution reading it ------------------------------------------------------------------
# An explicit PAD / PADV2 of the spatial axes before CONV_2D / DEPTHWISE_CONV_2D (Keras' ZeroPadding2D before a
# stride-2 convolution, MediaPipe's models) is the convolution's own padding when the padded value is what the
# kernels read outside the image: +0.0 for float (a padded tap adds 0 * w there, or is skipped, which is the same for
# a finite filter: the sums start from +0 or the bias and never become -0 by it), the input zero point for int8 /
# uint8 (a padded tap contributes (zp - zp) * w = 0). The convolution then reads the PAD's input, with
# options["explicit_padding"] = (top, bottom, left, right) added to its own padding at prepare (kernels/linear/
# conv.py _window_geometry; a SAME consumer's amounts computed on the padded size, so the output shape is the
# unfused one); the PAD becomes FUSED_AWAY. Not for hybrid (float input, int8 filter: the run-time input
# quantization) or int16 layers, a filter that is not constant, or a 1x1 filter.


def _pad_foldable(g: Graph, pad: Node, conv: Node) -> tuple | None:
    """(top, bottom, left, right) when PAD / PADV2 `pad` may be folded into `conv`, which alone reads it."""
    t = pad.outputs[0] if len(pad.outputs) == 1 else -1
    if (pad.is_custom or len(pad.inputs) not in (2, 3) or any(i < 0 for i in pad.inputs) or t < 0
            or g.kernels[pad.index] is None or t in g.pinned or g.uses.get(t, []) != [conv.index]
            or conv.inputs.count(t) != 1 or conv.inputs[0] != t):
        return None
    x, p, out = g.spec(pad.inputs[0]), g.spec(pad.inputs[1]), g.spec(t)
    f = g.spec(conv.inputs[1])
    if (x.data is not None or len(x.shape) != 4 or x.dtype != out.dtype or f.data is None or f.dtype != x.dtype
            or x.dtype not in (np.float32, np.int8, np.uint8) or p.data is None
            or p.dtype not in (np.int32, np.int64) or np.size(p.data) != 8
            or len(f.shape) != 4 or tuple(f.shape[1:3]) == (1, 1)):
        return None  # (a 1x1 filter: the kernels' pointwise paths read no padding)
    pairs = np.asarray(p.data, np.int64).reshape(4, 2)
    if pairs.min() < 0 or pairs[0].any() or pairs[3].any():
        return None
    quantized = x.dtype != np.float32
    if quantized:
        zq = out.quantization
        if zq.zero_points.size != 1 or not _same_quantization([x, out]):
            return None
        fill = int(zq.zero_points[0])
    else:
        if not np.isfinite(np.asarray(f.data)).all():
            return None  # a padded tap's 0 * inf is NaN; kernels skipping padded taps would not see it
        fill = 0.0
    if len(pad.inputs) == 3:
        c = g.spec(pad.inputs[2])
        if c.data is None or c.dtype != x.dtype or np.size(c.data) != 1:
            return None
        v = np.asarray(c.data).reshape(-1)[0]
        if (not _same_quantization([c, out]) if quantized else bool(np.signbit(v))) or v != fill:
            return None  # -0.0 is not the +0.0 the kernels pad with
    return tuple(int(v) for v in pairs[1:3].reshape(-1))


def builtin_kernels(*ops: str) -> set[int]:
    """The ids of the registry's kernels of ops (a user's own kernel for the op knows no explicit_padding)."""
    return {id(row[3]) for row in BUILTINS if row[0] in ops}


def fold_pads(plan: SubgraphPlan, kernels: list) -> tuple[SubgraphPlan, list]:
    """Fold a spatial PAD / PADV2 read only by a CONV_2D / DEPTHWISE_CONV_2D into its padding (see above)."""
    ours = builtin_kernels("CONV_2D", "DEPTHWISE_CONV_2D", "PAD", "PADV2")
    g = Graph(plan, kernels)
    nodes, kernels = list(plan.nodes), list(kernels)
    changed = False
    for conv in plan.nodes:
        if (conv.op_name not in ("CONV_2D", "DEPTHWISE_CONV_2D") or conv.is_custom or len(conv.inputs) < 2
                or id(kernels[conv.index]) not in ours or conv.inputs[0] < 0 or conv.inputs[1] < 0
                or "explicit_padding" in conv.options):
            continue
        pad = g.producers.get(conv.inputs[0])
        if pad is None or pad.op_name not in ("PAD", "PADV2") or id(kernels[pad.index]) not in ours:
            continue
        amounts = _pad_foldable(g, pad, conv)
        if amounts is None:
            continue
        nodes[conv.index] = dataclasses.replace(conv, inputs=(pad.inputs[0], *conv.inputs[1:]),
                                                options={**conv.options, "explicit_padding": amounts})
        _fuse_away(nodes, kernels, (pad,), conv.index)
        changed = True
    return rewritten(plan, nodes, kernels, changed)


# --- attention over a masked KV cache ----------------------------------------------------------------------------
# litert-torch's export_hf: scores = BATCH_MATMUL(q, K cache), ADD(scores, mask), SOFTMAX over the keys, BATCH_MATMUL
# with the V cache, over all S cache positions though the mask is -inf past the current one. MASKED_ATTENTION
# (kernels/linear/masked_attention.py) computes the four nodes over the keys the mask leaves, bit for bit. Taken when
# the intermediates are read by the pattern alone (no graph output), every tensor is float32, the nodes run the
# builtin kernels, the ADD has no activation, the SOFTMAX is over the second product's contraction axis, the mask
# does not broadcast along the keys, S is a multiple of 16 above 16, and the query rows are more than
# ATTENTION_MIN_ROWS (decode steps keep the unfused nodes: measured in docs/design/llm.md).
ATTENTION_MIN_ROWS = 16


def _attention_match(g: Graph, bmm2: Node, ours: set[int]):
    """(bmm1, add, softmax, mask, mask_first) when bmm2 ends the pattern above, else None."""

    def plain(n, op, n_in):
        return (n is not None and n.op_name == op and not n.is_custom and id(g.kernels[n.index]) in ours
                and len(n.inputs) == n_in and len(n.outputs) == 1 and "views" not in n.options
                and not int(n.options.get("fused_activation_function", 0) or 0))

    def inner(t, user):
        return t >= 0 and t not in g.pinned and g.uses.get(t, []) == [user.index]

    if not plain(bmm2, "BATCH_MATMUL", 2) or bmm2.options.get("adj_x", False):
        return None
    p = bmm2.inputs[0]
    sm = g.producers.get(p)
    if not plain(sm, "SOFTMAX", 1) or not inner(p, bmm2) or bmm2.inputs[1] == p:
        return None
    add = g.producers.get(sm.inputs[0])
    if not plain(add, "ADD", 2) or not inner(sm.inputs[0], sm):
        return None
    for slot in (0, 1):
        s, mask = add.inputs[slot], add.inputs[1 - slot]
        bmm1 = g.producers.get(s)
        if plain(bmm1, "BATCH_MATMUL", 2) and inner(s, add) and mask != s and mask >= 0:
            break
    else:
        return None
    ts = [bmm1.inputs[0], bmm1.inputs[1], mask, bmm2.inputs[1], s, sm.inputs[0], p, bmm2.outputs[0]]
    if any(t < 0 or g.spec(t).dtype != np.float32 for t in ts):
        return None
    shape = tuple(g.spec(s).shape)
    if (len(shape) < 2 or tuple(g.spec(sm.inputs[0]).shape) != shape or tuple(g.spec(p).shape) != shape
            or not g.spec(mask).shape or g.spec(mask).shape[-1] != shape[-1] or shape[-1] % 16 or shape[-1] <= 16
            or shape[-2] <= ATTENTION_MIN_ROWS):
        return None
    return bmm1, add, sm, mask, slot == 1


def fuse_masked_attention(plan: SubgraphPlan, kernels: list) -> tuple[SubgraphPlan, list]:
    """Replace BATCH_MATMUL -> ADD(mask) -> SOFTMAX -> BATCH_MATMUL by MASKED_ATTENTION (see above)."""
    ours = builtin_kernels("BATCH_MATMUL", "ADD", "SOFTMAX")
    g = Graph(plan, kernels)
    nodes, kernels = list(plan.nodes), list(kernels)
    changed = False
    for bmm2 in plan.nodes:
        found = _attention_match(g, bmm2, ours)
        if found is None:
            continue
        bmm1, add, sm, mask, mask_first = found
        opts = {"adj_x": bool(bmm1.options.get("adj_x", False)), "adj_y": bool(bmm1.options.get("adj_y", False)),
                "adj_y2": bool(bmm2.options.get("adj_y", False)), "mask_first": mask_first,
                "beta": float(sm.options.get("beta", 1.0))}
        nodes[bmm2.index] = dataclasses.replace(bmm2, op_name="MASKED_ATTENTION", options=opts,
                                                inputs=(bmm1.inputs[0], bmm1.inputs[1], mask, bmm2.inputs[1]))
        kernels[bmm2.index] = REWRITES["MASKED_ATTENTION"]
        _fuse_away(nodes, kernels, (bmm1, add, sm), bmm2.index)
        changed = True
    return rewritten(plan, nodes, kernels, changed)


# --- a binary node with a padded operand and an activation after it -----------------------------------------------
# BlazeFace-style residual blocks: RELU(ADD(PAD(x) on the channel axis, conv)). A float32 ADD / SUB / MUL of two
# same-shape operands, one of which may be a PAD / PADV2 of the last axis only (a finite constant fill) read by it
# alone, and whose result may be read only by a RELU / RELU6 / RELU_N1_TO_1 / RELU_0_TO_1, becomes one
# FUSED_ELEMENTWISE node (kernels/elementwise/fused.py: the same scalar definitions, the same bytes) when there is a
# pad or an activation to take in. Every node must run the builtin kernel; no intermediate may be a graph output.
_CLAMP_ACTS = ("RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1")


def _last_axis_pad(g: Graph, t: int, user: Node):
    """(pad node, before, after, fill) when t is a PAD / PADV2 of the last axis read only by `user`, else None."""
    pad = g.producers.get(t)
    if (pad is None or pad.op_name not in ("PAD", "PADV2") or pad.is_custom or len(pad.outputs) != 1
            or len(pad.inputs) not in (2, 3) or any(i < 0 for i in pad.inputs) or t in g.pinned
            or g.uses.get(t, []) != [user.index] or user.inputs.count(t) != 1):
        return None
    x, p = g.spec(pad.inputs[0]), g.spec(pad.inputs[1])
    if (x.dtype != np.float32 or x.data is not None or len(x.shape) == 0 or p.data is None
            or p.dtype not in (np.int32, np.int64) or np.size(p.data) != 2 * len(x.shape)):
        return None
    pairs = np.asarray(p.data, np.int64).reshape(-1, 2)
    if pairs.min() < 0 or pairs[:-1].any() or not pairs[-1].any():
        return None
    fill = 0.0
    if len(pad.inputs) == 3:
        c = g.spec(pad.inputs[2])
        if c.data is None or c.dtype != np.float32 or np.size(c.data) != 1:
            return None
        fill = float(np.asarray(c.data).reshape(-1)[0])
        if not np.isfinite(fill):
            return None
    return pad, int(pairs[-1, 0]), int(pairs[-1, 1]), fill


def fuse_elementwise(plan: SubgraphPlan, kernels: list) -> tuple[SubgraphPlan, list]:
    """Replace [PAD ->] ADD / SUB / MUL [-> RELU-family] by FUSED_ELEMENTWISE (see above)."""
    ours = builtin_kernels("ADD", "SUB", "MUL", "PAD", "PADV2", *_CLAMP_ACTS)
    g = Graph(plan, kernels)
    nodes, kernels = list(plan.nodes), list(kernels)
    changed = False
    for b in plan.nodes:
        if (b.op_name not in ("ADD", "SUB", "MUL") or b.is_custom or id(kernels[b.index]) not in ours
                or len(b.inputs) != 2 or len(b.outputs) != 1 or min(*b.inputs, *b.outputs) < 0
                or b.inputs[0] == b.inputs[1] or "fused_into" in b.options
                or any(g.spec(t).dtype != np.float32 for t in (*b.inputs, *b.outputs))):
            continue
        shape = tuple(g.spec(b.outputs[0]).shape)
        pad = None
        for side in (0, 1):
            found = _last_axis_pad(g, b.inputs[side], b)
            if found is not None and id(kernels[found[0].index]) in ours:
                pad = (side, *found)
                break
        ins = list(b.inputs)
        if pad is not None:
            ins[pad[0]] = pad[1].inputs[0]
        if len(shape) == 0 or any(tuple(g.spec(t).shape) != shape for t in b.inputs):
            continue  # broadcasting: the plain kernels
        act = g.only_use(b.outputs[0], "RELU")
        for name in _CLAMP_ACTS[1:]:
            act = act or g.only_use(b.outputs[0], name)
        if act is not None and (id(kernels[act.index]) not in ours or len(act.inputs) != 1):
            act = None
        if pad is None and act is None:
            continue
        opts = {"op": b.op_name, "activation": act.op_name if act else "",
                "fused_activation_function": int(b.options.get("fused_activation_function", 0) or 0)}
        if pad is not None:
            opts |= {"pad": (pad[0], pad[2], pad[3]), "fill": pad[4]}
        # in the binary node's place (its inputs are ready there; nothing between it and the activation reads the
        # activation's output), so the operands' lifetimes end there
        nodes[b.index] = dataclasses.replace(b, op_name="FUSED_ELEMENTWISE", inputs=tuple(ins), options=opts,
                                             outputs=(act or b).outputs)
        kernels[b.index] = REWRITES["FUSED_ELEMENTWISE"]
        _fuse_away(nodes, kernels, [n for n in (pad[1] if pad else None, act) if n is not None], b.index)
        if act is not None:
            # its output is the fused node's now; it keeps the binary node's, which would otherwise be named by no
            # node (such a tensor is given storage for the whole run)
            nodes[act.index] = dataclasses.replace(nodes[act.index], outputs=b.outputs)
        changed = True
    return rewritten(plan, nodes, kernels, changed)


# --- convolution epilogues ---------------------------------------------------------------------------------------
# A float CONV_2D whose output only an ADD (or FUSED_ELEMENTWISE ADD, the residual maybe padded along the channels)
# reads, the other operand ready before the convolution (a graph input or an earlier node's output), and / or whose
# (or whose ADD's) output only a PRELU with one slope per output channel reads: the convolution computes them on each
# value its tiles produce (kernels/linear/conv_epilogue.py), in the nodes' order: their bytes. The node takes inputs
# (x, filter, bias, residual, slopes) (-1 where absent) and options["epilogue"] = the ADD's clamp intersected with
# its activation's [, the pad's first channel and fill]; the ADD and PRELU become FUSED_AWAY, still naming the
# tensors no node writes now. Slopes a DEQUANTIZE makes from a float16 constant are read from that constant (the
# DEQUANTIZE may come after the convolution; the conversion is exact). MediaPipe's face, palm, pose models' 1x1s.
_F32_MAX = float(np.finfo(np.float32).max)
_FUSED_RANGES = {0: (-_F32_MAX, _F32_MAX), 1: (0.0, _F32_MAX), 2: (-1.0, 1.0), 3: (0.0, 6.0)}
_NODE_RANGES = {"": (-np.inf, np.inf), "RELU": (0.0, np.inf), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0),
                "RELU_0_TO_1": (0.0, 1.0)}


def _ready(g: Graph, t: int, before: int) -> bool:
    """t holds its value before node `before` runs: a graph input or an earlier node's output (no variable)."""
    n = g.producers.get(t)
    s = g.spec(t)
    return not s.is_variable and s.data is None and (n.index < before if n is not None else t in g.plan.inputs)


def _residual_add(g: Graph, t: int, conv: Node, ours: set[int]):
    """(ADD-like node, residual, (lo2, hi2)) when an ADD of t and a ready residual alone reads t, else None."""
    b = g.plan.nodes[g.uses[t][0]] if len(g.uses.get(t, [])) == 1 and t not in g.pinned else None
    if b is None or b.is_custom or len(b.inputs) != 2 or len(b.outputs) != 1 or b.inputs.count(t) != 1:
        return None
    act = int(b.options.get("fused_activation_function", 0) or 0)
    if b.op_name == "ADD" and id(g.kernels[b.index]) in ours and "fused_into" not in b.options:
        node_act = ""
    elif (b.op_name == "FUSED_ELEMENTWISE" and g.kernels[b.index] is REWRITES["FUSED_ELEMENTWISE"]
          and b.options.get("op") == "ADD"):
        node_act = b.options.get("activation", "")
    else:
        return None
    r = g.other(b, t)
    side, c0, after = b.options.get("pad", (b.inputs.index(r) if r is not None else 0, 0, 0))
    shape = g.spec(t).shape
    if (act not in _FUSED_RANGES or node_act not in _NODE_RANGES or r is None or r < 0 or b.outputs[0] < 0
            or b.inputs[side] != r or g.spec(b.outputs[0]).shape != shape
            or g.spec(r).shape != (*shape[:-1], shape[-1] - c0 - after) or g.spec(r).dtype != np.float32
            or g.spec(b.outputs[0]).dtype != np.float32 or not _ready(g, r, conv.index)):
        return None
    (l1, h1), (l2, h2) = _FUSED_RANGES[act], _NODE_RANGES[node_act]
    return b, r, (max(l1, l2), min(h1, h2), *((c0, float(b.options["fill"])) if "pad" in b.options else ()))


def _channel_prelu(g: Graph, v: int, conv: Node, ours: set[int]):
    """(PRELU node, slopes tensor) when a PRELU with one slope per channel alone reads v, else None."""
    p = g.only_use(v, "PRELU") if len(g.uses.get(v, [])) == 1 else None
    if p is None or id(g.kernels[p.index]) not in ours or len(p.inputs) != 2 or p.inputs[0] != v or p.inputs[1] < 0:
        return None
    a, shape = p.inputs[1], g.spec(v).shape
    s = g.spec(a)
    if g.spec(p.outputs[0]).shape != shape or not s.shape or not int(np.prod(s.shape)) == s.shape[-1] == shape[-1]:
        return None
    n = g.producers.get(a)
    if (n is not None and n.op_name == "DEQUANTIZE" and not n.is_custom and len(n.inputs) == 1 and n.inputs[0] >= 0
            and g.spec(n.inputs[0]).is_const and g.spec(n.inputs[0]).dtype == np.float16):
        return p, n.inputs[0]
    return (p, a) if s.is_const or _ready(g, a, conv.index) else None


def fuse_conv_epilogues(plan: SubgraphPlan, kernels: list) -> tuple[SubgraphPlan, list]:
    """Fold a residual ADD and / or a channel PRELU into the float CONV_2D before them (see above)."""
    ours = builtin_kernels("CONV_2D", "ADD", "PRELU")
    g = Graph(plan, kernels)
    nodes, kernels = list(plan.nodes), list(kernels)
    changed = False
    for conv in plan.nodes:
        if (conv.op_name != "CONV_2D" or conv.is_custom or id(kernels[conv.index]) not in ours
                or len(conv.inputs) not in (2, 3) or min(conv.inputs[:2]) < 0 or len(conv.outputs) != 1
                or "epilogue" in conv.options or conv.outputs[0] < 0
                or any(g.spec(i).dtype != np.float32 for i in (*conv.inputs[:2], conv.outputs[0]))
                or len(g.spec(conv.outputs[0]).shape) != 4):
            continue
        t = conv.outputs[0]
        add = _residual_add(g, t, conv, ours)
        v = add[0].outputs[0] if add else t
        prelu = _channel_prelu(g, v, conv, ours)
        if add is None and prelu is None:
            continue
        inputs = (*conv.inputs[:2], (*conv.inputs, -1)[2], add[1] if add else -1, prelu[1] if prelu else -1)
        last = prelu[0] if prelu else add[0]
        nodes[conv.index] = dataclasses.replace(conv, inputs=inputs, outputs=last.outputs, options={
            **conv.options, "epilogue": add[2] if add else (-np.inf, np.inf)})
        away = [n for n in (add and add[0], prelu and prelu[0]) if n]
        _fuse_away(nodes, kernels, away, conv.index)
        for n, named in zip(away, (t, v)):  # each keeps a tensor no node writes now (see fuse_elementwise)
            nodes[n.index] = dataclasses.replace(nodes[n.index], outputs=(named,))
        changed = True
    return rewritten(plan, nodes, kernels, changed)


def fuse(plan: SubgraphPlan, kernels: list) -> tuple[SubgraphPlan, list]:
    """Every rewrite, in order."""
    plan, kernels = fuse_slice_updates(plan, kernels)
    plan, kernels = fuse_norms(plan, kernels)
    plan, kernels = fold_pads(plan, kernels)
    plan, kernels = fuse_elementwise(plan, kernels)
    plan, kernels = fuse_conv_epilogues(plan, kernels)
    plan, kernels = fuse_masked_attention(plan, kernels)
    return fold_transposes(plan, kernels)
