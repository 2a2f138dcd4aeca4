"""The inverted-residual rewrite: [1x1 CONV_2D ->] DEPTHWISE_CONV_2D [-> 1x1 CONV_2D], float32, becomes one node
FUSED_CONV_BANDS that may run the chain in bands of rows (kernels/linear/conv_bands.py), so the expanded activation
and the depthwise output are consumed while they are in the core's cache.

A stage joins when the tensor between it and the depthwise layer is read by that one node and is no graph input or
output; each convolution is the registry's own kernel (not a user's), unquantized (float32 input, filter, output),
pointwise (a [CO, 1, 1, CI] filter, stride 1; constant when prepared, as a DEQUANTIZE of float16 weights is, or the
stages run unbanded). The projection may carry the residual ADD / clamp / PRELU fuse_conv_epilogues gave it (a
residual not padded along the channels). The depthwise layer has depth multiplier 1. A pointwise layer between two
depthwise ones joins the first chain. The fused node takes the place of the chain's last node, where every input it
reads is ready: the chain's intermediates are read by nobody else, and its other inputs (weights, maybe
DEQUANTIZEd; the block input; a fused residual) were ready before the node they belong to. Its outputs are the
chain's result and then its intermediates (their storage lives as long as the node; the kernel writes them whole
when it runs the stages unbanded). The other nodes keep their place as FUSED_AWAY with no inputs and no outputs.
Applied after runtime/fusion.py's rewrites and, like them, not with experimental_preserve_all_tensors (tests run the
chain both ways: the same bytes).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..format.plan import Node, SubgraphPlan
from ..kernels.registry import REWRITES
from .fusion import Graph, builtin_kernels, rewritten


def _pointwise(g: Graph, n: Node | None, ours: set[int]) -> bool:
    """n is the registry's float32 CONV_2D with a [CO, 1, 1, CI] filter at stride 1 (its own inputs, or
    fuse_conv_epilogues' five with a residual not padded along the channels)."""
    if (n is None or n.op_name != "CONV_2D" or n.is_custom or id(g.kernels[n.index]) not in ours
            or len(n.outputs) != 1 or n.outputs[0] < 0 or min(n.inputs[:2], default=-1) < 0):
        return False
    ep = n.options.get("epilogue")  # (lo, hi), or (lo, hi, c0, fill) for a residual padded along the channels
    if (len(n.inputs) != 5 or len(ep) != 2) if ep is not None else len(n.inputs) not in (2, 3):
        return False
    f = g.spec(n.inputs[1])
    return (len(f.shape) == 4 and tuple(f.shape[1:3]) == (1, 1)
            and int(n.options.get("stride_h", 1)) == 1 and int(n.options.get("stride_w", 1)) == 1
            and all(g.spec(t).dtype == np.float32 for t in (n.inputs[0], n.inputs[1], n.outputs[0]))
            and len(g.spec(n.outputs[0]).shape) == 4)


def _private(g: Graph, t: int, reader: Node) -> bool:
    """t is read by `reader` alone and is no graph input or output nor a variable."""
    return g.uses.get(t, []) == [reader.index] and t not in g.pinned and not g.spec(t).is_variable


def _stage(n: Node) -> tuple:
    return n.op_name, n.version, n.builtin_code, len(n.inputs), n.outputs[0], dict(n.options)


def fuse_conv_bands(plan: SubgraphPlan, kernels: list) -> tuple[SubgraphPlan, list]:
    """Replace each float [1x1 CONV_2D ->] DEPTHWISE_CONV_2D [-> 1x1 CONV_2D] chain by FUSED_CONV_BANDS (module doc)."""
    ours = builtin_kernels("CONV_2D", "DEPTHWISE_CONV_2D")
    g = Graph(plan, kernels)
    nodes, kernels = list(plan.nodes), list(kernels)
    changed = False
    taken: set[int] = set()
    for dw in plan.nodes:
        if (dw.op_name != "DEPTHWISE_CONV_2D" or dw.is_custom or id(kernels[dw.index]) not in ours
                or len(dw.inputs) not in (2, 3) or min(dw.inputs[:2]) < 0 or len(dw.outputs) != 1
                or dw.outputs[0] < 0):
            continue
        e, d = dw.inputs[0], dw.outputs[0]
        f = g.spec(dw.inputs[1])
        if (len(f.shape) != 4 or len(g.spec(e).shape) != 4 or f.shape[3] != g.spec(e).shape[3]
                or any(g.spec(t).dtype != np.float32 for t in (e, dw.inputs[1], d))):
            continue
        a = g.producers.get(e)
        a = a if (_pointwise(g, a, ours) and _private(g, e, dw) and "epilogue" not in a.options
                  and a.index not in taken) else None
        uses = g.uses.get(d, [])
        c = plan.nodes[uses[0]] if len(uses) == 1 else None
        c = c if _pointwise(g, c, ours) and c.inputs[0] == d and _private(g, d, c) else None
        if a is None and c is None:
            continue
        chain = [n for n in (a, dw, c) if n is not None]
        taken.update(n.index for n in chain)
        last = chain[-1]
        inputs = tuple(i for n in chain for i in n.inputs)
        outputs = (last.outputs[0], *(n.outputs[0] for n in chain[:-1]))
        nodes[last.index] = dataclasses.replace(last, op_name="FUSED_CONV_BANDS", inputs=inputs, outputs=outputs,
                                                options={"stages": tuple(_stage(n) for n in chain)})
        kernels[last.index] = REWRITES["FUSED_CONV_BANDS"]
        for n in chain[:-1]:
            nodes[n.index] = dataclasses.replace(n, inputs=(), outputs=(),
                                                 options={**n.options, "fused_into": last.index})
            kernels[n.index] = REWRITES["FUSED_AWAY"]
        changed = True
    return rewritten(plan, nodes, kernels, changed)


__all__ = ["fuse_conv_bands"]
