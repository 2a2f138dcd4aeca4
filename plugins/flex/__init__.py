"""Flex ops: the `Flex<TfOp>` custom ops of models converted with SELECT_TF_OPS, run without TensorFlow.

One kernel serves every custom op named `Flex...` (registered with `register_custom_prefix`). At prepare it decodes
the node's custom options (`nodedef.decode_flex_options`: the TF op name and its NodeDef attributes) and hands the
node to the TF op's prepare in `TF_OPS`, which validates, sets shapes and schedules njit kernels like any builtin —
so Flex ops run inside the compiled segment. TensorList ops (tensor_list.py) are host ops with a kernel of
their own (the longer prefix `FlexTensorList`). A TF op without an entry fails at `allocate_tensors()` naming the op,
its attributes, the node and the supported ops. The table of ops and their status is in docs/architecture.md
("Flex ops").
"""

from __future__ import annotations

from lite_numba.ops import OpKernel, register_custom_prefix

from . import builtin_map, complex_ops, linalg, math_ops, tensor_list
from .nodedef import FlexDecodeError, FlexNode, decode_flex_options

TF_OPS = {**builtin_map.OPS, **math_ops.OPS, **linalg.OPS, **complex_ops.OPS}


def supported_flex_ops() -> list[str]:
    """The TensorFlow op names lite-numba runs as Flex ops, sorted."""
    return sorted(set(TF_OPS) | set(complex_ops.COMPLEX_OPS) | set(tensor_list.HOSTS))


def flex_node(ctx) -> FlexNode:
    """The decoded NodeDef of this Flex node (decoded once per node, kept in its state)."""
    node = ctx.state.get("node")
    if node is None:
        try:
            node = decode_flex_options(ctx.node.custom_options)
        except FlexDecodeError as e:
            ctx.fail(str(e))
        ctx.check(ctx.op_name == "Flex" + node.op, f"custom op {ctx.op_name} holds the NodeDef of TF op {node.op!r}")
        ctx.state["node"] = node
    return node


def _prepare(ctx) -> None:
    node = flex_node(ctx)
    impl = None
    if any(t is not None and t.dtype.kind == "c" for t in ctx.inputs):
        impl = complex_ops.COMPLEX_OPS.get(node.op)
    impl = impl or TF_OPS.get(node.op)
    if impl is None:
        ctx.fail(f"unsupported Flex op: TensorFlow op {node.op!r} (node name {node.name!r}, attributes "
                 f"{node.describe_attrs()}) has no lite-numba kernel.\nSupported Flex ops: "
                 f"{', '.join(supported_flex_ops())}")
    impl(ctx, node)


def op_status(op_name: str, custom_options: bytes | None) -> tuple[bool, str]:
    """(can run, reason) of one Flex op for `lite-numba inspect`: the TF op it holds and whether we have it."""
    try:
        node = decode_flex_options(custom_options)
    except FlexDecodeError as e:
        return False, f"Flex op, custom options not decodable: {e}"
    if node.op in TF_OPS or node.op in complex_ops.COMPLEX_OPS or node.op in tensor_list.HOSTS:
        return True, f"Flex op: TensorFlow op {node.op}, provided by {__name__}"
    return False, f"Flex op: TensorFlow op {node.op} {node.describe_attrs()} is not supported"


def _new_state(options) -> dict:
    """A node's state: the decoded NodeDef and the TF op's own state, filled by its first prepare."""
    return {}


FLEX = register_custom_prefix("Flex", OpKernel("Flex", _prepare, init=_new_state, meta={"op_status": op_status}))
# TensorList ops are host ops (their lists live in Python): a kernel of their own, chosen by the longer prefix
TENSOR_LIST = tensor_list.make_kernel(flex_node, op_status)
# named, so a pickled resolver refers to these kernels instead of pickling their hooks (closures) by value
FLEX.__module__ = TENSOR_LIST.__module__ = __name__
FLEX.__qualname__, TENSOR_LIST.__qualname__ = "FLEX", "TENSOR_LIST"
register_custom_prefix("FlexTensorList", TENSOR_LIST)
register_custom_prefix("FlexEmptyTensorList", TENSOR_LIST)
