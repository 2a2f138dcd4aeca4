"""SLICE and STRIDED_SLICE against the official runtime (bit-exact: these ops only move bytes)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import check_same, require_official
from lite_numba.testing import random_array as rand

require_official()


# --- SLICE --------------------------------------------------------------------------------------------------------

def slice_model(dtype, shape, begin, size, index_type=np.int32, runtime=False):
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape)
    if runtime:
        bt = b.add_input("begin", index_type, [len(begin)])
        st_ = b.add_input("size", index_type, [len(size)])
    else:
        bt = b.add_const("begin", np.array(begin, index_type))
        st_ = b.add_const("size", np.array(size, index_type))
    out_shape = [n - bb if s == -1 else s for n, bb, s in zip(shape, begin, size)]
    y = b.add_tensor("y", dtype, out_shape)
    if np.dtype(dtype) == np.float16:
        version = 8
    else:
        version = 5 if len(shape) > 4 else {np.dtype(np.int16): 4, np.dtype(np.int8): 2}.get(np.dtype(dtype), 1)
    b.add_op("SLICE", [x, bt, st_], [y], version=version)
    b.mark_output(y)
    return b.build()


@settings(max_examples=scaled(25), deadline=None)
@given(st.data())
def test_slice(data):
    rank = data.draw(st.integers(1, 5))
    shape = data.draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank))
    begin = [data.draw(st.integers(0, n)) for n in shape]
    size = [data.draw(st.sampled_from([-1, data.draw(st.integers(0, n - b))])) for n, b in zip(shape, begin)]
    dtype = data.draw(st.sampled_from([np.float32, np.int8, np.int16, np.int64, np.bool_, np.float16]))
    index_type = data.draw(st.sampled_from([np.int32, np.int64]))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    check_same(slice_model(dtype, shape, begin, size, index_type), [rand(rng, dtype, shape)])


def test_slice_runtime_begin_size():
    rng = np.random.default_rng(0)
    x = rand(rng, np.float32, [3, 5, 4])
    begin, size = np.array([1, 0, 2], np.int32), np.array([2, -1, 1], np.int32)
    check_same(slice_model(np.float32, [3, 5, 4], list(begin), list(size), runtime=True), [x, begin, size])


@pytest.mark.parametrize("begin, size, msg", [([0, 3], [2, 2], "exceeds dimension 1"),
                                              ([0, -1], [1, 1], "out of range"),
                                              ([0, 0], [1, -2], "exceeds")])
def test_slice_errors(begin, size, msg):
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 4])
    y = b.add_tensor("y", np.float32, [1, 1])
    b.add_op("SLICE", [x, b.add_const("b", np.array(begin, np.int32)), b.add_const("s", np.array(size, np.int32))],
             [y])
    b.mark_output(y)
    with pytest.raises((ValueError, RuntimeError), match=f"SLICE.*{msg}"):
        Interpreter(model_content=b.build()).allocate_tensors()


# --- STRIDED_SLICE --------------------------------------------------------------------------------------------------

def strided_slice_model(dtype, shape, begin, end, strides, out_shape, **masks):
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape)
    ins = [x] + [b.add_const(n, np.array(v, np.int32)) for n, v in (("begin", begin), ("end", end),
                                                                   ("strides", strides))]
    y = b.add_tensor("y", dtype, out_shape)
    if masks.get("offset"):
        version = 8
    elif masks.get("ellipsis_mask") or masks.get("new_axis_mask"):
        version = 6
    elif len(shape) > 4:
        version = 4
    else:
        version = {np.dtype(np.bool_): 3, np.dtype(np.int8): 2}.get(np.dtype(dtype), 1)
    b.add_op("STRIDED_SLICE", ins, [y], options=masks, version=version)
    b.mark_output(y)
    return b.build()


def numpy_strided_slice(shape, begin, end, strides, begin_mask, end_mask, shrink, ellipsis, new_axis):
    """The Python-indexing meaning of the spec (used only to declare the output shape)."""
    idx = []
    for i in range(len(begin)):
        if ellipsis >> i & 1:
            idx.append(Ellipsis)
        elif new_axis >> i & 1:
            idx.append(None)
        elif shrink >> i & 1:
            idx.append(begin[i])
        else:
            idx.append(slice(None if begin_mask >> i & 1 else begin[i], None if end_mask >> i & 1 else end[i],
                             strides[i]))
    return np.zeros(shape)[tuple(idx)].shape


@settings(max_examples=scaled(25), deadline=None)
@given(st.data())
def test_strided_slice(data):
    rank = data.draw(st.integers(1, 4))
    shape = data.draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank))
    n = data.draw(st.integers(1, rank))  # spec shorter than the rank: the rest is taken whole
    begin, end, strides = [], [], []
    shrink = 0
    for i in range(n):
        size = shape[i]
        stride = data.draw(st.sampled_from([1, 1, 2, 3, -1, -2]))
        if data.draw(st.integers(0, 4)) == 0:
            shrink |= 1 << i  # a single index within range, forward stride
            begin.append(data.draw(st.integers(-size, size - 1)))
            end.append(begin[-1] + 1)
            strides.append(1)
            continue
        begin.append(data.draw(st.integers(-size - 2, size + 2)))
        end.append(data.draw(st.integers(-size - 2, size + 2)))
        strides.append(stride)
    begin_mask = data.draw(st.integers(0, (1 << n) - 1)) & ~shrink
    end_mask = data.draw(st.integers(0, (1 << n) - 1)) & ~shrink
    dtype = data.draw(st.sampled_from([np.float32, np.int8, np.int64, np.bool_, np.int16]))
    out_shape = numpy_strided_slice(shape, begin, end, strides, begin_mask, end_mask, shrink, 0, 0)
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    model = strided_slice_model(dtype, shape, begin, end, strides, out_shape, begin_mask=begin_mask,
                                end_mask=end_mask, shrink_axis_mask=shrink)
    check_same(model, [rand(rng, dtype, shape)])


@settings(max_examples=scaled(20), deadline=None)
@given(st.data())
def test_strided_slice_ellipsis_new_axis(data):
    rank = data.draw(st.integers(1, 4))
    shape = data.draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank))
    n = data.draw(st.integers(1, 4))
    ell_pos = data.draw(st.integers(-1, n - 1))  # -1: no ellipsis
    new_axis = data.draw(st.integers(0, (1 << n) - 1))
    if ell_pos >= 0:
        new_axis &= ~(1 << ell_pos)
    real = [i for i in range(n) if i != ell_pos and not new_axis >> i & 1]
    assume(len(real) <= rank - (ell_pos >= 0))  # TFLite's ellipsis always covers at least one dimension
    begin, end, strides = [0] * n, [0] * n, [1] * n
    dims = iter(shape[:len(real)] if ell_pos < 0 else shape[:sum(1 for i in real if i < ell_pos)]
                + shape[rank - sum(1 for i in real if i > ell_pos):])
    for i in real:
        size = next(dims)
        begin[i] = data.draw(st.integers(-size, size))
        end[i] = data.draw(st.integers(-size, size))
        strides[i] = data.draw(st.sampled_from([1, 2, -1]))
    ellipsis = 1 << ell_pos if ell_pos >= 0 else 0
    out_shape = numpy_strided_slice(shape, begin, end, strides, 0, 0, 0, ellipsis, new_axis)
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    model = strided_slice_model(np.float32, shape, begin, end, strides, out_shape, ellipsis_mask=ellipsis,
                                new_axis_mask=new_axis)
    check_same(model, [rand(rng, np.float32, shape)])


def test_strided_slice_offset_and_scalar_output():
    rng = np.random.default_rng(1)
    x = rand(rng, np.float32, [4, 6, 3])
    # offset: end is a size relative to begin
    model = strided_slice_model(np.float32, [4, 6, 3], [1, 2, 0], [2, 3, 3], [1, 2, 1], [2, 2, 3], offset=True)
    check_same(model, [x])
    # every axis shrunk: a 0-d output
    model = strided_slice_model(np.float32, [4, 6, 3], [1, -2, 0], [2, -1, 1], [1, 1, 1], [], shrink_axis_mask=7)
    check_same(model, [x])


@pytest.mark.parametrize("begin, end, strides, opts, msg", [
    ([0, 0], [1, 1], [1, 0], {}, "stride of dimension 1 is zero"),
    ([0, 5], [1, 6], [1, 1], {"shrink_axis_mask": 2}, "shrink index 5 is out of range"),
    ([0, 1], [1, 2], [1, -1], {"shrink_axis_mask": 2}, "shrink axis 1 has stride -1"),
    ([0], [1, 1], [1, 1], {}, "differ in length"),
    ([0, 3], [1, 3], [1, 1], {"offset": True}, "exceeds dimension 1"),
])
def test_strided_slice_errors(begin, end, strides, opts, msg):
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 4])
    ins = [x] + [b.add_const(n, np.array(v, np.int32)) for n, v in (("b", begin), ("e", end), ("s", strides))]
    y = b.add_tensor("y", np.float32, [1, 1])
    b.add_op("STRIDED_SLICE", ins, [y], options=opts)
    b.mark_output(y)
    with pytest.raises((ValueError, RuntimeError), match=f"STRIDED_SLICE.*{msg}"):
        Interpreter(model_content=b.build()).allocate_tensors()


# --- a computed begin with an output shape that does not depend on it: the node stays static -----------------------

def _runtime_begin_model(op, shape, n, end, strides, out_shape, opts=None, size=None, dtype=np.float32,
                         index_type=np.int32, computed_end=False, out_signature=None):
    """`op` with begin a graph input; end (STRIDED_SLICE) a constant, or begin + end when computed_end."""
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape)
    bg = b.add_input("begin", index_type, [n])
    if op == "SLICE":
        ins = [x, bg, b.add_const("size", np.array(size, index_type))]
    else:
        e = b.add_const("end", np.array(end, index_type))
        if computed_end:
            e2 = b.add_tensor("end2", index_type, [n])
            b.add_op("ADD", [bg, e], [e2], options={"fused_activation_function": "NONE"})
            e = e2
        ins = [x, bg, e, b.add_const("strides", np.array(strides, index_type))]
    y = b.add_tensor("y", dtype, out_shape, shape_signature=out_signature)
    version = 8 if (opts or {}).get("offset") else 6 if (opts or {}).get("ellipsis_mask") or \
        (opts or {}).get("new_axis_mask") else 1
    b.add_op(op, ins, [y], options=opts or None, version=version if op == "STRIDED_SLICE" else 1)
    b.mark_output(y)
    return b.build()


def _compare_begins(data, x, begins, index_type=np.int32, static=True):
    """Run ours and the official runtime on one interpreter each over a sequence of begin values."""
    from lite_numba.testing import official_interpreter

    ours = Interpreter(model_content=data)
    ours.allocate_tensors()
    assert (not ours.runtime.graph(0).dynamic_nodes) == static
    theirs = official_interpreter(data)
    for bg in begins:
        for it in (ours, theirs):
            it.set_tensor(0, x)
            it.set_tensor(1, np.array(bg, index_type))
            it.invoke()
        o = ours.get_tensor(ours.get_output_details()[0]["index"])
        r = theirs.get_tensor(theirs.get_output_details()[0]["index"])
        assert o.shape == r.shape and o.tobytes() == r.tobytes(), bg
    return ours


@pytest.mark.parametrize("dtype,index_type", [(np.float32, np.int32), (np.int8, np.int64), (np.int16, np.int32),
                                              (np.float16, np.int32)])
def test_slice_runtime_begin_constant_size(dtype, index_type):
    rng = np.random.default_rng(3)
    x = rand(rng, dtype, [5, 4, 3])
    data = _runtime_begin_model("SLICE", [5, 4, 3], 3, None, None, [2, 1, 3], size=[2, 1, 3], dtype=dtype,
                                index_type=index_type)
    ours = _compare_begins(data, x, [[0, 0, 0], [3, 3, 0], [1, 2, 0], [3, 0, 0], [0, 3, 0]], index_type)
    for bad in ([4, 0, 0], [-1, 0, 0], [0, 0, 1]):  # begin + size past the end, negative begin
        ours.set_tensor(1, np.array(bad, index_type))
        with pytest.raises(RuntimeError, match="SLICE: begin out of range"):
            ours.invoke()


def test_slice_runtime_begin_with_minus_one_size_stays_dynamic():
    rng = np.random.default_rng(4)
    x = rand(rng, np.float32, [5, 4])
    data = _runtime_begin_model("SLICE", [5, 4], 2, None, None, [2, 4], size=[2, -1])
    _compare_begins(data, x, [[0, 0], [3, 0], [1, 0]], static=False)


@pytest.mark.parametrize("computed_end", [False, True])
def test_strided_slice_runtime_begin_shrink(computed_end, index_type=np.int32):
    """x[t] as TF writes it in loops: begin [t, 0], end [t + 1, 0], shrink axis 0, begin/end mask on axis 1."""
    rng = np.random.default_rng(5)
    x = rand(rng, np.float32, [6, 5])
    data = _runtime_begin_model("STRIDED_SLICE", [6, 5], 2, [1, 0], [1, 1], [5], computed_end=computed_end,
                                opts={"shrink_axis_mask": 1, "begin_mask": 2, "end_mask": 2}, index_type=index_type)
    ours = _compare_begins(data, x, [[0, 0], [5, 3], [-1, 2], [-6, 0], [2, 9], [-7, 0]], index_type)
    # past the end: the official kernel reads outside the input; lite-numba refuses
    ours.set_tensor(1, np.array([6, 0], index_type))
    with pytest.raises(RuntimeError, match="shrink index out of range"):
        ours.invoke()


def test_strided_slice_runtime_begin_ellipsis_new_axis_and_strides():
    """Shrunk axes from a computed begin next to an ellipsis, a new axis and a negative-stride constant axis."""
    rng = np.random.default_rng(6)
    x = rand(rng, np.int8, [3, 4, 5, 2])
    # spec: [t0 (shrink), ..., new axis, ::-2 (begin/end masks)] -> out [4, 5, 1, 1]
    data = _runtime_begin_model("STRIDED_SLICE", [3, 4, 5, 2], 4, [0, 0, 0, 0], [1, 1, 1, -2], [4, 5, 1, 1],
                                opts={"shrink_axis_mask": 1, "ellipsis_mask": 2, "new_axis_mask": 4,
                                      "begin_mask": 8, "end_mask": 8}, dtype=np.int8)
    _compare_begins(data, x, [[0, 0, 0, 0], [2, 0, 0, 0], [-3, 7, 7, 7], [1, 0, 0, 0]])


def test_strided_slice_runtime_begin_offset():
    """offset=True: end is the size, so the output shape is fixed whatever begin is."""
    rng = np.random.default_rng(7)
    x = rand(rng, np.float32, [4, 6])
    data = _runtime_begin_model("STRIDED_SLICE", [4, 6], 2, [2, 3], [1, 1], [2, 3], opts={"offset": True})
    ours = _compare_begins(data, x, [[0, 0], [2, 3], [-4, 1], [1, -3], [-9, 0]])
    # begin + size past the end: the official kernel reads outside the input; lite-numba refuses
    for bad in ([3, 0], [2, 4], [-1, 0]):
        ours.set_tensor(1, np.array(bad, np.int32))
        with pytest.raises(RuntimeError, match="begin \\+ size exceeds"):
            ours.invoke()


def test_strided_slice_runtime_begin_range_stays_dynamic():
    """begin [t], end [t + 2] without masks: the count depends on clamping, so the node is prepared at run time."""
    rng = np.random.default_rng(8)
    x = rand(rng, np.float32, [5, 3])
    data = _runtime_begin_model("STRIDED_SLICE", [5, 3], 1, [2], [1], [2, 3], computed_end=True,
                                out_signature=[-1, 3])
    _compare_begins(data, x, [[0], [3], [4], [1]], static=False)
