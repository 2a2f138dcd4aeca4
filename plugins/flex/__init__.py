"""Flex ops: the `Flex<TfOp>` custom ops of models converted with SELECT_TF_OPS, run without TensorFlow.

One kernel (`FLEX`) serves every custom op named `Flex...`: `register(ops)` adds it for the custom-op prefix `Flex`.
At prepare it decodes the node's custom options (`nodedef.decode_flex_options`: the TF op name and its NodeDef
attributes) and hands the node to the TF op's prepare, found by `find_op` in the table of its family: each family
module owns one table `OPS` (TF op name -> prepare(ctx, node)) — builtin_map (TF ops that are a builtin TFLite
kernel), math_ops, linalg, complex_ops — and `find_op` is the one place that reads them. A prepare validates, sets
shapes and schedules njit kernels like any builtin, so Flex ops run inside the compiled segment. TensorList ops
(tensor_list.py, its table `OPS` of host functions) are host ops with a kernel of their own (`TENSOR_LIST`, for the
longer prefixes `FlexTensorList` and `FlexEmptyTensorList`); so are the text ops (text_ops.py, its table `OPS`: the
STRING ops of Keras TextVectorization and tf.strings, and TF's lookup tables), whose kernel `TEXT` is registered by
the exact name of each `Flex<TfOp>`. A TF op without an entry fails at `allocate_tensors()`
naming the op, its attributes, the node and the supported ops. The table of ops and their status is in the docs
("Flex ops").
"""

from __future__ import annotations

from lite_numba.ops import OpKernel

from . import tensor_list, text_ops
from .nodedef import FlexDecodeError, FlexNode, decode_flex_options


def families() -> tuple:
    """The families the Flex kernel runs, in lookup order: complex_ops last, as its complex AddV2, Exp, ... serve a TF
    op of builtin_map only when an input is complex. Imported on first use: their kernels import Numba, which a
    process running native images never loads (lite_numba/runtime/native)."""
    from . import builtin_map, complex_ops, linalg, math_ops  # lazy: as the docstring says

    return builtin_map, math_ops, linalg, complex_ops


def find_op(op: str, complex_input: bool = False):
    """The prepare of TF op `op` from its family's table (complex_ops' first when an input is complex), or None."""
    complex_ops = families()[3]
    if complex_input and op in complex_ops.OPS:
        return complex_ops.OPS[op]
    for family in families():
        impl = family.OPS.get(op)
        if impl is not None:
            return impl
    return None


def supported_flex_ops() -> list[str]:
    """The TensorFlow op names lite-numba runs as Flex ops, sorted."""
    return sorted({op for family in (*families(), tensor_list, text_ops) for op in family.OPS})


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
    impl = find_op(node.op, any(t is not None and t.dtype.kind == "c" for t in ctx.inputs))
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
    if node.op in text_ops.OPS:
        return True, f"Flex op: TensorFlow op {node.op}, provided by {__name__} (host: Python / numpy, not compiled)"
    if find_op(node.op) is not None or node.op in tensor_list.OPS:
        return True, f"Flex op: TensorFlow op {node.op}, provided by {__name__}"
    return False, f"Flex op: TensorFlow op {node.op} {node.describe_attrs()} is not supported"


def _new_state(options) -> dict:
    """A node's state: the decoded NodeDef and the TF op's own state, filled by its first prepare."""
    return {}


FLEX = OpKernel("Flex", _prepare, init=_new_state, meta={"op_status": op_status})
# TensorList ops are host ops (their lists live in Python): a kernel of their own, chosen by the longer prefix
TENSOR_LIST = tensor_list.make_kernel(flex_node, op_status)
# text ops run on the host too (strings in Python): one kernel, registered by each op's exact name
TEXT = text_ops.make_kernel(flex_node, op_status)
# named, so a pickled resolver refers to these kernels instead of pickling their hooks (closures) by value
FLEX.__module__ = TENSOR_LIST.__module__ = TEXT.__module__ = __name__
FLEX.__qualname__, TENSOR_LIST.__qualname__, TEXT.__qualname__ = "FLEX", "TENSOR_LIST", "TEXT"


def register(ops) -> None:
    """Add the Flex kernels to `ops` (a CustomOpRegistry or a MutableOpResolver), for their custom-op prefixes."""
    ops.add_custom_prefix("Flex", FLEX)
    ops.add_custom_prefix("FlexTensorList", TENSOR_LIST)
    ops.add_custom_prefix("FlexEmptyTensorList", TENSOR_LIST)
    for op in text_ops.OPS:  # (every version, as the prefix kernel takes them)
        ops.add_custom("Flex" + op, TEXT, 1, (1 << 31) - 1)
