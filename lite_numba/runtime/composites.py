"""STABLEHLO_COMPOSITE nodes rewritten at load: a fused kernel when one is known, else the decomposition inlined.

The official runtime runs a composite by calling its decomposition subgraph (tflite/kernels/stablehlo_composite.cc):
the caller's inputs are copied in, the subgraph is invoked, its outputs copied out. Here, before a subgraph is
prepared (ModelRuntime._new_graph), every node whose kernel carries `meta["inline_subgraph"]` (the registry's
STABLEHLO_COMPOSITE, kernels/host/control_flow.py) is replaced:

- by one node running a fused kernel, when kernels/registry.py's COMPOSITES table has a row for the composite's
  name and version and that kernel accepts its attributes (`meta["accepts"](attributes, input specs)`); the node
  keeps its op (STABLEHLO_COMPOSITE) and options, plus "attributes" (the decoded composite attributes);
- else by the nodes of its decomposition subgraph, inlined in its place: the decomposition's inputs and outputs
  become the caller's tensors, its other tensors are appended to the caller's with fresh indices (its constants
  once per caller and decomposition, however many composites call it), nested composites are rewritten the same
  way. Each inlined node records where it came from in `Node.origin` ("odml.rms_norm@15", nested ones joined by
  "/"), which the profiler and the trace show. A decomposition output that is one of its inputs or a constant is
  copied by a COPY node (kernels/registry.py REWRITES).

So the caller stays one compiled graph: no host call, no copies in and out. Every composite is checked first, with
errors naming the op, node and field: the decomposition's input and output counts and dtypes (and quantization)
against the node's, its attributes (a flexbuffer map, format/custom_options.py; decoded once, here). A
decomposition index out of range or a composite calling itself is refused when the model is loaded
(format/model.py).

The same pass describes reduction bodies: a node whose kernel carries `meta["subgraph_ops"]` (the option naming a
body subgraph: STABLEHLO_REDUCE_WINDOW, STABLEHLO_SCATTER) gets options["subgraph_ops"], the op names of that
subgraph's nodes, which is how the official kernels choose their reduction (they never run the body).

$LITE_NUMBA_COMPOSITES chooses: "fused" (the default: fused kernels where known, decompositions inlined
elsewhere), "inline" (every decomposition inlined: what the fused kernels are tested against) or "call" (no
rewrite: the host kernel calls the decomposition subgraph, as the official runtime does).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from ..format.custom_options import decode_composite_attributes
from ..format.model import ModelError
from ..format.plan import ModelPlan, Node, SubgraphPlan, TensorSpec
from ..kernels.registry import COMPOSITES, REWRITES
from ..ops import OpKernel

__all__ = ["MODES", "composite_label", "composites_mode", "describe_bodies", "find_fused", "inline_composites",
           "is_composite"]

MODES = ("fused", "inline", "call")
ENV = "LITE_NUMBA_COMPOSITES"


def composites_mode() -> str:
    """$LITE_NUMBA_COMPOSITES: "fused" (default), "inline" or "call" (see the module docstring)."""
    mode = os.environ.get(ENV, "").strip().lower() or "fused"
    if mode not in MODES:
        raise ValueError(f"{ENV}={mode!r}: expected one of {', '.join(MODES)}")
    return mode


def is_composite(node: Node, kernel: OpKernel | None) -> bool:
    """Whether the rewrite replaces this node: its kernel names the option holding the subgraph to inline."""
    return bool(subgraph_meta(node, kernel, "inline_subgraph"))


def subgraph_meta(node: Node, kernel: OpKernel | None, key: str):
    """kernel.meta[key] for a builtin node ("inline_subgraph", "subgraph_ops": options naming another subgraph), else
    None. A registry row (a lazy kernel, `module` set) is imported for StableHLO ops only, the only rows whose kernels
    have these (tests/test_native_image.py checks): kernel modules import Numba, which a process running native
    images never loads (runtime/native)."""
    if kernel is None or node.is_custom or (hasattr(kernel, "module") and not node.op_name.startswith("STABLEHLO_")):
        return None
    return kernel.meta.get(key)


def composite_label(node: Node) -> str:
    """The op as reports show it: "STABLEHLO_COMPOSITE odml.rms_norm" for a composite, else the op name."""
    name = node.options.get("name") if node.op_name == "STABLEHLO_COMPOSITE" else None
    return f"{node.op_name} {name}" if name else node.op_name


def find_fused(name: str, version: int, attributes: dict, specs: list) -> OpKernel | None:
    """The COMPOSITES row's kernel for (name, version) when it accepts these attributes and inputs (their
    TensorSpecs as the model declares them, None for an absent one)."""
    for row_name, lo, hi, k in COMPOSITES:
        if row_name == name and lo <= version <= hi:
            accepts = k.meta.get("accepts")
            if accepts is None or accepts(attributes, specs):
                return k
    return None


def describe_bodies(model: ModelPlan, subgraph: int, node: Node, kernel: OpKernel | None) -> Node:
    """The node with options["subgraph_ops"] (the op names of the body subgraph its kernel's meta["subgraph_ops"]
    option names) when its kernel asks for them; ModelError for a body index out of range."""
    key = subgraph_meta(node, kernel, "subgraph_ops")
    if not key:
        return node
    index = node.options.get(key)
    if not isinstance(index, int) or not 0 <= index < len(model.subgraphs) or index == subgraph:
        raise ModelError(f"Invalid model: {node.op_name} (subgraph {subgraph}, node {node.index}): {key} {index} is "
                         f"not another subgraph of the model ({len(model.subgraphs)} subgraphs)")
    ops = tuple(n.op_name for n in model.subgraphs[index].nodes)
    return dataclasses.replace(node, options={**node.options, "subgraph_ops": ops})


def _where(node: Node, subgraph: int) -> str:
    return f"STABLEHLO_COMPOSITE {node.options.get('name', '')!r} (subgraph {subgraph}, node {node.index})"


def _same_quantization(a: TensorSpec, b: TensorSpec) -> bool:
    qa, qb = a.quantization, b.quantization
    return (np.array_equal(qa.scales, qb.scales) and np.array_equal(qa.zero_points, qb.zero_points)
            and (qa.scales.size <= 1 or qa.quantized_dimension == qb.quantized_dimension))


def _check(model: ModelPlan, subgraph: int, node: Node, key: str) -> tuple[int, dict]:
    """(decomposition index, decoded attributes) of a composite node, or ModelError naming what is wrong."""
    where = _where(node, subgraph)
    index = node.options.get(key)
    if not isinstance(index, int) or not 0 <= index < len(model.subgraphs):
        raise ModelError(f"Invalid model: {where}: {key} {index} is out of range (the model has "
                         f"{len(model.subgraphs)} subgraphs)")
    if index == subgraph:
        raise ModelError(f"Invalid model: {where}: {key} {index} is its own subgraph")
    try:
        attributes = decode_composite_attributes(node.options.get("composite_attributes") or b"",
                                                 int(node.options.get("composite_attributes_format") or 0))
    except ValueError as e:
        raise ModelError(f"Invalid model: {where}: {e}") from None
    caller, dec = model.subgraphs[subgraph], model.subgraphs[index]
    if not node.inputs:
        raise ModelError(f"Invalid model: {where}: a composite needs at least one input")
    for what, mine, theirs in (("inputs", node.inputs, dec.inputs), ("outputs", node.outputs, dec.outputs)):
        if len(mine) != len(theirs):
            raise ModelError(f"Invalid model: {where} has {len(mine)} {what}, its decomposition (subgraph {index}) "
                             f"has {len(theirs)}")
        for k, (a, b) in enumerate(zip(mine, theirs)):
            if a < 0 or b < 0:
                if what == "inputs" or b < 0:
                    raise ModelError(f"Invalid model: {where}: {what[:-1]} {k} is absent (-1) "
                                     f"{'in the node' if a < 0 else 'in its decomposition'}")
                continue
            ta, tb = caller.tensors[a], dec.tensors[b]
            if ta.type_name != tb.type_name:
                raise ModelError(f"Invalid model: {where}: {what[:-1]} {k} ({ta.name!r}) is {ta.type_name}, its "
                                 f"decomposition (subgraph {index}) has {tb.type_name} ({tb.name!r})")
            if not _same_quantization(ta, tb):
                raise ModelError(f"Invalid model: {where}: {what[:-1]} {k} ({ta.name!r}) is quantized with scales "
                                 f"{ta.quantization.scales.tolist()[:4]} and zero points "
                                 f"{ta.quantization.zero_points.tolist()[:4]}, its decomposition (subgraph {index}) "
                                 f"with {tb.quantization.scales.tolist()[:4]} and "
                                 f"{tb.quantization.zero_points.tolist()[:4]}")
    return index, attributes


class _Inliner:
    """Builds the rewritten plan of one subgraph (see the module docstring)."""

    def __init__(self, model: ModelPlan, kernels: list[list[OpKernel | None]], fused: bool):
        self.model = model
        self.all_kernels = kernels
        self.fused = fused
        self.tensors: list[TensorSpec] = []
        self.nodes: list[Node] = []
        self.kernels: list[OpKernel | None] = []
        self.shared: dict[tuple[int, int], int] = {}  # (decomposition, its constant tensor) -> caller tensor
        self.changed = False

    def new_tensor(self, spec: TensorSpec) -> int:
        index = len(self.tensors)
        self.tensors.append(dataclasses.replace(spec, index=index))
        return index

    def emit(self, node: Node, kernel, inputs, outputs, intermediates, origin: str, options=None) -> None:
        self.nodes.append(dataclasses.replace(node, index=len(self.nodes), inputs=tuple(inputs),
                                              outputs=tuple(outputs), intermediates=tuple(intermediates),
                                              options=node.options if options is None else options, origin=origin))
        self.kernels.append(kernel)

    def walk(self, subgraph: int, tmap, origin: str, depth: int) -> None:
        """Emit subgraph `subgraph`'s nodes, its tensor t read and written as tmap(t)."""
        plan, kernels = self.model.subgraphs[subgraph], self.all_kernels[subgraph]
        for node, k in zip(plan.nodes, kernels):
            node = describe_bodies(self.model, subgraph, node, k)
            ins = [tmap(i) for i in node.inputs]
            outs = [tmap(o) for o in node.outputs]
            inter = [tmap(i) for i in node.intermediates]
            if not is_composite(node, k):
                self.emit(node, k, ins, outs, inter, origin)
                continue
            self.changed = True
            index, attributes = _check(self.model, subgraph, node, k.meta["inline_subgraph"])
            name, version = str(node.options.get("name", "")), int(node.options.get("version", 0) or 0)
            fused = find_fused(name, version, attributes, [plan.tensors[i] if i >= 0 else None for i in node.inputs]) \
                if self.fused else None
            if fused is not None:
                self.emit(node, fused, ins, outs, inter, origin, {**node.options, "attributes": attributes})
                continue
            if depth > len(self.model.subgraphs):  # (the loader refuses recursion; a guard all the same)
                raise ModelError(f"Invalid model: {_where(node, subgraph)}: composites nested too deep")
            label = f"{name}@{node.index}"
            self.inline(index, ins, outs, f"{origin}/{label}" if origin else label, depth + 1)

    def inline(self, index: int, ins: list[int], outs: list[int], origin: str, depth: int) -> None:
        dec = self.model.subgraphs[index]
        mapping: dict[int, int] = dict(zip(dec.inputs, ins))
        copies = []  # (source caller tensor, caller output): decomposition outputs that are inputs or constants
        for o, target in zip(dec.outputs, outs):
            spec = dec.tensors[o]
            if o in mapping or spec.is_const:
                copies.append((o, target))
            elif target < 0:
                continue  # the caller ignores this output: a fresh tensor below
            else:
                mapping[o] = target

        def tmap(t: int) -> int:
            if t < 0:
                return t
            got = mapping.get(t)
            if got is None:
                spec = dec.tensors[t]
                if spec.is_const:
                    got = self.shared.get((index, t))
                    if got is None:
                        got = self.shared[(index, t)] = self.new_tensor(spec)
                else:
                    got = self.new_tensor(spec)
                mapping[t] = got
            return got

        self.walk(index, tmap, origin, depth)
        for o, target in copies:
            if target >= 0:
                src = tmap(o)
                self.emit(_COPY_NODE, REWRITES["COPY"], [src], [target], [], origin)


_COPY_NODE = Node(index=0, op_name="COPY", builtin_code=-1, version=1, inputs=(), outputs=())


def inline_composites(model: ModelPlan, index: int, kernels: list[list[OpKernel | None]],
                      mode: str | None = None) -> tuple[SubgraphPlan, list[OpKernel | None]]:
    """Subgraph `index`'s plan and kernels with every composite replaced (see the module docstring); the plan
    unchanged when it has none or `mode` (default: $LITE_NUMBA_COMPOSITES) is "call"."""
    plan, ks = model.subgraphs[index], kernels[index]
    mode = mode or composites_mode()
    if mode == "call" or not any(is_composite(n, k) for n, k in zip(plan.nodes, ks)):
        nodes = tuple(describe_bodies(model, index, n, k) for n, k in zip(plan.nodes, ks))
        if any(a is not b for a, b in zip(nodes, plan.nodes)):
            plan = dataclasses.replace(plan, nodes=nodes)
        return plan, ks
    inl = _Inliner(model, kernels, fused=mode == "fused")
    inl.tensors = list(plan.tensors)
    inl.walk(index, lambda t: t, "", 0)
    return dataclasses.replace(plan, tensors=tuple(inl.tensors), nodes=tuple(inl.nodes)), inl.kernels
