"""Flex TensorList ops (a `tf.TensorArray` loop converted with tensor-list lowering off): EmptyTensorList,
TensorListReserve, TensorListSetItem, TensorListGetItem, TensorListStack, TensorListLength, TensorListPushBack,
TensorListPopBack. (TensorListFromTensor is left out: the converter rewrites its reads into GATHER.)

A TensorList is a TF variant tensor; the converted model gives it an int32 scalar tensor (TFLite's VARIANT). Here
that scalar is a handle into `ctx.resources["tensor_lists"]`, where a `TensorList` holds the items as numpy arrays,
so handles flow through WHILE loops as plain values. These are host ops (the list grows and changes at run time),
run from Python at invoke; the maths around them stays compiled. Each creating node (Empty, Reserve) owns
one handle, reset every time the node runs, so repeated invokes do not accumulate lists.

TensorFlow's lists are values; SetItem / PushBack / PopBack here update the list in place and return the same
handle — what TensorFlow does when the input list has no other reader, as in converted loops. Unset items read
as zeros of the element shape (TensorFlow's behaviour when the element shape is fully defined).
"""

from __future__ import annotations

import numpy as np

from lite_numba.ops import OpKernel

from .nodedef import FlexNode, TfDataType


class TensorList:
    """The items of one list, their dtype and element shape (-1 for unknown dimensions, None for unknown rank)."""

    def __init__(self, dtype: np.dtype, element_shape, items: list):
        self.dtype = dtype
        self.element_shape = element_shape
        self.items = items

    def item_shape(self, requested=None) -> tuple[int, ...]:
        """The shape of an unset item: the element shape (merged with `requested`), which must be fully defined."""
        shape = self.element_shape
        if shape is None or any(d < 0 for d in shape):
            shape = requested
        if shape is None or any(d < 0 for d in shape):
            known = [a.shape for a in self.items if a is not None]
            if known:
                return known[0]
            raise ValueError(f"TensorList: cannot materialize an unset item of unknown shape {shape}")
        return tuple(int(d) for d in shape)


def _ints(ctx, i: int, what: str) -> np.ndarray:
    """Input i as a flat integer array; another type is refused naming the input (TensorFlow's TensorList ops
    take int32 shapes, sizes, indices and variant handles; a float there reached int() at run time, campaign seed
    601 case 44335)."""
    a = np.asarray(ctx.input_array(i))
    if a.dtype.kind not in "iu":
        ctx.fail(f"input {i} ({what}) must be an integer tensor, got {a.dtype.name}")
    return a.reshape(-1)


def _int_scalar(ctx, i: int, what: str) -> int:
    a = _ints(ctx, i, what)
    if a.size == 0:
        ctx.fail(f"input {i} ({what}) is empty")
    return int(a[0])


def _shape_value(v) -> tuple | None:
    v = np.asarray(v).reshape(-1)
    if v.size == 1 and v[0] == -1 and np.asarray(v).ndim <= 1:
        return None  # -1 scalar: unknown rank
    return tuple(int(d) for d in v)


def _lists(ctx) -> dict:
    return ctx.resources.setdefault("tensor_lists", {})


def _get(ctx, i: int) -> TensorList:
    h = _int_scalar(ctx, i, "a TensorList handle")
    lst = _lists(ctx).get(h)
    if lst is None:
        ctx.fail(f"input {i} is not a TensorList handle (value {h})")
    return lst


def _new_handle(ctx, lst: TensorList) -> None:
    """Store `lst` under this node's handle and write the handle to output 0 (one handle per creating node)."""
    ids = ctx.resources.setdefault("tensor_list_ids", {})
    h = ids.setdefault(id(ctx.node), len(ids) + 1)
    _lists(ctx)[h] = lst
    ctx.set_output_array(0, np.array(h, ctx.output(0).dtype))


def _dtype(node: FlexNode, key: str = "element_dtype") -> np.dtype:
    dt = node.attr(key, None, "type")
    if dt is None or isinstance(dt, TfDataType):
        raise ValueError(f"TensorList element type {dt!r} is not supported")
    return dt


def _index(ctx, i: int, n: int, what: str) -> int:
    k = _int_scalar(ctx, i, "an index")
    if not 0 <= k < n:
        ctx.fail(f"{what} index {k} is out of range for a list of {n} items")
    return k


def _host_reserve(ctx, node):
    n = _int_scalar(ctx, 1, "num_elements")
    ctx.check(n >= 0, f"num_elements must be >= 0, got {n}")
    _new_handle(ctx, TensorList(_dtype(node), _shape_value(_ints(ctx, 0, "element_shape")), [None] * n))


def _host_empty(ctx, node):
    _new_handle(ctx, TensorList(_dtype(node), _shape_value(_ints(ctx, 0, "element_shape")), []))


def _host_set_item(ctx, node):
    lst = _get(ctx, 0)
    item = np.array(ctx.input_array(2), copy=True)
    ctx.check(item.dtype == lst.dtype, f"item type {item.dtype} differs from the list's {lst.dtype}")
    n = len(lst.items)
    k = _int_scalar(ctx, 1, "an index")
    if node.attr("resize_if_index_out_of_bounds", False, "b") and k >= n:
        lst.items.extend([None] * (k + 1 - n))
    lst.items[_index(ctx, 1, len(lst.items), "SetItem")] = item
    ctx.set_output_array(0, np.asarray(ctx.input_array(0)).copy())


def _item(ctx, lst: TensorList, k: int, requested) -> np.ndarray:
    a = lst.items[k]
    return a if a is not None else np.zeros(lst.item_shape(requested), lst.dtype)


def _host_get_item(ctx, node):
    lst = _get(ctx, 0)
    k = _index(ctx, 1, len(lst.items), "GetItem")
    ctx.set_output_array(0, _item(ctx, lst, k, _shape_value(_ints(ctx, 2, "element_shape"))))


def _host_stack(ctx, node):
    lst = _get(ctx, 0)
    want = node.attr("num_elements", -1, "i")
    ctx.check(want < 0 or want == len(lst.items), f"TensorListStack expected {want} items, the list has "
                                                  f"{len(lst.items)}")
    req = _shape_value(_ints(ctx, 1, "element_shape"))
    items = [_item(ctx, lst, k, req) for k in range(len(lst.items))]
    if items:
        ctx.check(all(a.shape == items[0].shape for a in items), "TensorListStack: items differ in shape")
        ctx.set_output_array(0, np.stack(items))
    else:
        ctx.set_output_array(0, np.zeros((0,) + lst.item_shape(req), lst.dtype))


def _host_length(ctx, node):
    ctx.set_output_array(0, np.array(len(_get(ctx, 0).items), np.int32))


def _host_push_back(ctx, node):
    lst = _get(ctx, 0)
    item = np.array(ctx.input_array(1), copy=True)
    ctx.check(item.dtype == lst.dtype, f"item type {item.dtype} differs from the list's {lst.dtype}")
    lst.items.append(item)
    ctx.set_output_array(0, np.asarray(ctx.input_array(0)).copy())


def _host_pop_back(ctx, node):
    lst = _get(ctx, 0)
    ctx.check(len(lst.items) > 0, "TensorListPopBack on an empty list")
    item = _item(ctx, lst, len(lst.items) - 1, _shape_value(_ints(ctx, 1, "element_shape")))
    lst.items.pop()
    ctx.set_output_array(0, np.asarray(ctx.input_array(0)).copy())
    ctx.set_output_array(1, item)


OPS = {"EmptyTensorList": _host_empty, "TensorListReserve": _host_reserve,
         "TensorListSetItem": _host_set_item, "TensorListGetItem": _host_get_item, "TensorListStack": _host_stack,
         "TensorListLength": _host_length, "TensorListPushBack": _host_push_back,
         "TensorListPopBack": _host_pop_back}
HANDLE_OUT = {"EmptyTensorList", "TensorListReserve", "TensorListSetItem", "TensorListPushBack",
              "TensorListPopBack"}


def _new_state(options) -> dict:
    return {}


def make_kernel(flex_node, op_status) -> OpKernel:
    """The host kernel of every FlexTensorList* op; `flex_node(ctx)` decodes the node (the plugin's helper)."""

    def prepare(ctx) -> None:
        node = flex_node(ctx)
        if node.op not in OPS:
            ctx.fail(f"unsupported Flex op: TensorFlow op {node.op!r} (attributes {node.describe_attrs()}) has no "
                     f"lite-numba kernel; TensorList ops supported: {', '.join(sorted(OPS))}")
        if node.op in HANDLE_OUT:
            ctx.set_output(0, ())  # the handle; other outputs get their shapes at run time
        if node.op not in HANDLE_OUT or node.op == "TensorListPopBack":
            ctx.defer()  # item and stack shapes are known when the list is

    def host(ctx) -> None:
        OPS[flex_node(ctx).op](ctx, flex_node(ctx))

    return OpKernel("FlexTensorList", prepare, init=_new_state, host=host, meta={"op_status": op_status})
