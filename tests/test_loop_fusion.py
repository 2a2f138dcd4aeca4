"""The fused SLICE, SLICE -> CONCATENATION slice update (lite_numba.runtime.fusion,
kernels/movement/slice.py SLICE_UPDATE) and the in-place WHILE loop (kernels/host/control_flow.py), against the
official runtime.

The pattern is what Keras 3 RNN loop bodies emit to write step t of the output sequence:
`concat(x[0:t], y, x[t+1:])`, the slices' size and begin built from the counter t."""

from __future__ import annotations

import numpy as np
import pytest

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import official_interpreter, require_official

require_official()


def _index_vector(g, name, entry, rest, dtype):
    """concat([reshape(entry, [1])], const rest) -> a 1-D index vector whose entry 0 is computed."""
    shape1 = g.add_const(f"{name}_shape", np.array([1], np.int32))
    r = g.add_tensor(f"{name}_r", dtype, [1])
    g.add_op("RESHAPE", [entry, shape1], [r])
    tail = g.add_const(f"{name}_rest", np.array(rest, dtype))
    v = g.add_tensor(name, dtype, [1 + len(rest)])
    g.add_op("CONCATENATION", [r, tail], [v], options={"axis": 0})
    return v


def slice_update_model(shape, dtype=np.float32, index_type=np.int32, step=1, swap_pieces=False):
    """out = concat(x[0:t], y, x[t+step:]) along axis 0, t a graph input; also returns out * 1 (a consumer)."""
    b = ModelBuilder()
    rank = len(shape)
    x = b.add_input("x", dtype, shape)
    y = b.add_input("y", dtype, [step, *shape[1:]])
    t = b.add_input("t", index_type, [])
    size_a = _index_vector(b, "size_a", t, [-1] * (rank - 1), index_type)
    k = b.add_const("k", np.array(step, index_type))
    t2 = b.add_tensor("t2", index_type, [])
    b.add_op("ADD", [t, k], [t2], options={"fused_activation_function": "NONE"})
    begin_b = _index_vector(b, "begin_b", t2, [0] * (rank - 1), index_type)
    begin_a = b.add_const("begin_a", np.zeros(rank, index_type))
    size_b = b.add_const("size_b", np.full(rank, -1, index_type))
    a = b.add_tensor("a", dtype, [1] * rank, shape_signature=[-1] * rank)
    b.add_op("SLICE", [x, begin_a, size_a], [a])
    bb = b.add_tensor("b", dtype, [1] * rank, shape_signature=[-1] * rank)
    b.add_op("SLICE", [x, begin_b, size_b], [bb])
    out = b.add_tensor("out", dtype, shape)
    b.add_op("CONCATENATION", [bb, y, a] if swap_pieces else [a, y, bb], [out], options={"axis": 0})
    b.mark_output(out)
    return b.build()


def _fused(it: Interpreter) -> bool:
    return any(n.op_name == "CONCATENATION" and "fused" in n.options for n in it.runtime.graph(0).plan.nodes)


@pytest.mark.parametrize("shape,dtype,index_type,step", [
    ((6, 2, 3), np.float32, np.int32, 1),
    ((5, 4), np.int8, np.int64, 1),
    ((7, 1, 2, 3), np.int16, np.int32, 2),
    ((4,), np.float32, np.int32, 1),
])
def test_slice_update_matches_official(shape, dtype, index_type, step):
    data = slice_update_model(shape, dtype, index_type, step)
    ours = Interpreter(model_content=data)
    ours.allocate_tensors()
    assert _fused(ours)
    assert not ours.runtime.graph(0).dynamic_nodes  # one compiled segment
    theirs = official_interpreter(data)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 50).astype(dtype)
    y = (rng.standard_normal((step, *shape[1:])) * 50).astype(dtype)
    for t in [0, shape[0] - step, 1, 0, shape[0] // 2]:  # the counter changes from invoke to invoke
        for it in (ours, theirs):
            it.set_tensor(0, x)
            it.set_tensor(1, y)
            it.set_tensor(2, np.array(t, index_type))
            it.invoke()
        o = ours.get_tensor(ours.get_output_details()[0]["index"])
        r = theirs.get_tensor(theirs.get_output_details()[0]["index"])
        assert o.shape == r.shape and o.tobytes() == r.tobytes(), t


def test_slice_update_out_of_range_raises():
    """t past the end: the official SLICE fails (negative size), and so do we, with a clear message."""
    data = slice_update_model((4, 3))
    theirs = official_interpreter(data)
    ours = Interpreter(model_content=data)
    ours.allocate_tensors()
    for it in (ours, theirs):
        it.set_tensor(0, np.ones((4, 3), np.float32))
        it.set_tensor(1, np.ones((1, 3), np.float32))
        it.set_tensor(2, np.array(4, np.int32))
    with pytest.raises(RuntimeError):
        theirs.invoke()
    with pytest.raises(RuntimeError, match="SLICE: begin or size out of range"):
        ours.invoke()
    # still usable afterwards
    ours.set_tensor(2, np.array(3, np.int32))
    ours.invoke()


def test_slice_update_pieces_in_other_order():
    """concat(x[t+1:], y, x[0:t]) keeps x's length too: fused (the pieces are placed in concatenation order)."""
    data = slice_update_model((5, 2), swap_pieces=True)
    ours = Interpreter(model_content=data)
    ours.allocate_tensors()
    assert _fused(ours)
    theirs = official_interpreter(data)
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    y = np.full((1, 2), -1, np.float32)
    for t in range(5):
        for it in (ours, theirs):
            it.set_tensor(0, x)
            it.set_tensor(1, y)
            it.set_tensor(2, np.array(t, np.int32))
            it.invoke()
        np.testing.assert_array_equal(ours.get_tensor(ours.get_output_details()[0]["index"]),
                                      theirs.get_tensor(theirs.get_output_details()[0]["index"]))


def test_slice_update_length_change_raises():
    """t = -1 makes the first SLICE take all of x (size -1): the official runtime returns a longer tensor; the fused
    kernel keeps x's shape, so it refuses with a clear error instead (a counter never takes that value)."""
    data = slice_update_model((4, 3))
    ours = Interpreter(model_content=data)
    ours.allocate_tensors()
    ours.set_tensor(0, np.ones((4, 3), np.float32))
    ours.set_tensor(1, np.ones((1, 3), np.float32))
    ours.set_tensor(2, np.array(-1, np.int32))
    with pytest.raises(RuntimeError, match="do not add up"):
        ours.invoke()


def test_preserve_all_tensors_is_not_fused():
    data = slice_update_model((4, 3))
    ours = Interpreter(model_content=data, experimental_preserve_all_tensors=True)
    ours.allocate_tensors()
    assert not _fused(ours)
    ours.set_tensor(0, np.arange(12, dtype=np.float32).reshape(4, 3))
    ours.set_tensor(1, np.zeros((1, 3), np.float32))
    ours.set_tensor(2, np.array(2, np.int32))
    ours.invoke()
    out = ours.get_tensor(ours.get_output_details()[0]["index"])
    np.testing.assert_array_equal(out[2], 0)


# --- the pattern inside a WHILE body: the Keras 3 sequence write ---------------------------------------------------

def sequence_loop_model(steps, width, limit=None):
    """for t in range(steps): seq = concat(seq[0:t], x[t] * 2 + h, seq[t+1:]); h = h + 1  (seq: [steps, 1, width])."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [steps, 1, width])
    t0 = b.add_const("t0", np.array(0, np.int32))
    seq0 = b.add_const("seq0", np.zeros((steps, 1, width), np.float32))
    h0 = b.add_input("h", np.float32, [1, width])
    outs = [b.add_tensor(n, dt, s) for n, dt, s in
            [("ot", np.int32, []), ("ox", np.float32, [steps, 1, width]), ("oseq", np.float32, [steps, 1, width]),
             ("oh", np.float32, [1, width])]]
    cond = b.add_subgraph("cond")
    ct, cx, cs, ch = (cond.add_input(n, dt, s) for n, dt, s in
                      [("t", np.int32, []), ("x", np.float32, [steps, 1, width]),
                       ("seq", np.float32, [steps, 1, width]), ("h", np.float32, [1, width])])
    lim = cond.add_const("lim", np.array(steps if limit is None else limit, np.int32))
    cc = cond.add_tensor("c", np.bool_, [])
    cond.add_op("LESS", [ct, lim], [cc])
    cond.mark_output(cc)
    body = b.add_subgraph("body")
    bt, bx, bs, bh = (body.add_input(n, dt, s) for n, dt, s in
                      [("t", np.int32, []), ("x", np.float32, [steps, 1, width]),
                       ("seq", np.float32, [steps, 1, width]), ("h", np.float32, [1, width])])
    one = body.add_const("one", np.array(1, np.int32))
    t1 = body.add_tensor("t1", np.int32, [])
    body.add_op("ADD", [bt, one], [t1], options={"fused_activation_function": "NONE"})
    xt = body.add_tensor("xt", np.float32, [1, width])
    body.add_op("GATHER", [bx, bt], [xt], options={"axis": 0})
    two = body.add_const("two", np.array(2, np.float32))
    x2 = body.add_tensor("x2", np.float32, [1, width])
    body.add_op("MUL", [xt, two], [x2], options={"fused_activation_function": "NONE"})
    yv = body.add_tensor("yv", np.float32, [1, width])
    body.add_op("ADD", [x2, bh], [yv], options={"fused_activation_function": "NONE"})
    y3 = body.add_tensor("y3", np.float32, [1, 1, width])
    body.add_op("RESHAPE", [yv, body.add_const("s3", np.array([1, 1, width], np.int32))], [y3])
    size_a = _index_vector(body, "size_a", bt, [-1, -1], np.int32)
    begin_b = _index_vector(body, "begin_b", t1, [0, 0], np.int32)
    a = body.add_tensor("a", np.float32, [1, 1, 1], shape_signature=[-1, -1, -1])
    body.add_op("SLICE", [bs, body.add_const("z", np.zeros(3, np.int32)), size_a], [a])
    bb = body.add_tensor("b", np.float32, [1, 1, width], shape_signature=[-1, 1, width])
    body.add_op("SLICE", [bs, begin_b, body.add_const("m", np.full(3, -1, np.int32))], [bb])
    ns = body.add_tensor("ns", np.float32, [steps, 1, width])
    body.add_op("CONCATENATION", [a, y3, bb], [ns], options={"axis": 0})
    nh = body.add_tensor("nh", np.float32, [1, width])
    body.add_op("ADD", [bh, body.add_const("hone", np.ones((1, width), np.float32))], [nh],
                options={"fused_activation_function": "NONE"})
    for o in (t1, bx, ns, nh):
        body.mark_output(o)
    b.add_op("WHILE", [t0, x, seq0, h0], outs, options={"cond_subgraph_index": cond.index,
                                                          "body_subgraph_index": body.index})
    res = b.add_tensor("res", np.float32, [steps, 1, width])
    b.add_op("ADD", [outs[2], outs[1]], [res], options={"fused_activation_function": "NONE"})
    b.mark_output(res)
    b.mark_output(outs[3])
    return b.build()


def test_sequence_loop_matches_official_and_is_static():
    steps, width = 5, 3
    data = sequence_loop_model(steps, width)
    ours = Interpreter(model_content=data)
    ours.allocate_tensors()
    theirs = official_interpreter(data)
    rng = np.random.default_rng(1)
    for _ in range(3):
        x = rng.standard_normal((steps, 1, width)).astype(np.float32)
        h = rng.standard_normal((1, width)).astype(np.float32)
        for it in (ours, theirs):
            it.set_tensor(it.get_input_details()[0]["index"], x)
            it.set_tensor(it.get_input_details()[1]["index"], h)
            it.invoke()
        for do, dt in zip(ours.get_output_details(), theirs.get_output_details()):
            np.testing.assert_allclose(ours.get_tensor(do["index"]), theirs.get_tensor(dt["index"]), rtol=1e-6)
    main = ours.runtime.graph(0)
    # the WHILE is lowered into the main runner (issue 38): the slices are fused, so the body is one compiled call
    assert not main.dynamic_nodes and ours.runtime.control.paths[(0, 0)][0] == "compiled"


def test_sequence_loop_kernel_error_names_the_subgraph():
    """One iteration too many: the body's GATHER reads past the end; the official runtime fails too."""
    steps, width = 4, 2
    data = sequence_loop_model(steps, width, limit=steps + 1)
    theirs = official_interpreter(data)
    ours = Interpreter(model_content=data)
    ours.allocate_tensors()
    for it in (ours, theirs):
        it.set_tensor(it.get_input_details()[0]["index"], np.ones((steps, 1, width), np.float32))
        it.set_tensor(it.get_input_details()[1]["index"], np.ones((1, width), np.float32))
    with pytest.raises(RuntimeError):
        theirs.invoke()
    with pytest.raises(RuntimeError, match="(?s)GATHER: index out of range.*subgraph 2"):
        ours.invoke()
    # the interpreter stays usable
    ours2 = Interpreter(model_content=sequence_loop_model(steps, width))
    ours2.allocate_tensors()
    ours2.invoke()


@pytest.mark.parametrize("entries,budget", [(64, 64 << 20), (4, 64 << 20), (64, 1)])
def test_growing_loop_with_small_preparation_cache(entries, budget):
    """A loop whose tensor grows each iteration, through more shapes than the cache of called-subgraph preparations
    holds (evicting and re-preparing), or with a byte budget that releases every older preparation."""
    from pathlib import Path

    path = Path(__file__).parent / "data" / "models" / "tf_growing_loop.tflite"
    ours = Interpreter(model_path=str(path))
    ours.runtime.SUBGRAPH_SHAPE_CACHE = entries
    ours.runtime.SUBGRAPH_CACHE_BYTES = budget
    ours.allocate_tensors()
    theirs = official_interpreter(path)
    x = np.array([[1.0, -2.0, 0.5]], np.float32)
    for n in (9, 3, 9, 0, 12):
        for it in (ours, theirs):
            it.set_tensor(it.get_input_details()[0]["index"], x)
            it.set_tensor(it.get_input_details()[1]["index"], np.array(n, np.int32))
            it.invoke()
        o = ours.get_tensor(ours.get_output_details()[0]["index"])
        r = theirs.get_tensor(theirs.get_output_details()[0]["index"])
        assert o.shape == r.shape == (n + 1, 3)
        np.testing.assert_array_equal(o, r)
    cached = sum(len(c) for c in ours.runtime._shape_cache.values())
    assert cached <= 2 * entries


# --- the in-place WHILE: loop variables passed through, swapped, and a loop nested in the body -----------------------

def _swap_loop_model(nested: bool):
    """while i < 5: i += 1; (a, b, c) = (b, a * 2, c)  — b and a swap places, c passes through; with `nested` the
    body also runs an inner loop `while j < 3: j += 1; a = a + 1` before swapping."""
    b = ModelBuilder()
    i0 = b.add_input("i", np.float32, [])
    a0 = b.add_input("a", np.float32, [3])
    b0 = b.add_input("b", np.float32, [3])
    c0 = b.add_input("c", np.float32, [2])
    outs = [b.add_tensor(n, np.float32, s) for n, s in (("oi", []), ("oa", [3]), ("ob", [3]), ("oc", [2]))]

    def counter_cond(name, n_vars, limit):
        g = b.add_subgraph(name)
        ins = [g.add_input(f"v{k}", np.float32, s) for k, s in enumerate(n_vars)]
        out = g.add_tensor("c", np.bool_, [])
        g.add_op("LESS", [ins[0], g.add_const("lim", np.array(limit, np.float32))], [out])
        g.mark_output(out)
        return g.index

    cond = counter_cond("cond", [[], [3], [3], [2]], 5.0)
    inner_cond = counter_cond("inner_cond", [[], [3]], 3.0) if nested else None
    inner_body = None
    if nested:
        ib = b.add_subgraph("inner_body")
        j, x = ib.add_input("j", np.float32, []), ib.add_input("x", np.float32, [3])
        j1, x1 = ib.add_tensor("j1", np.float32, []), ib.add_tensor("x1", np.float32, [3])
        ib.add_op("ADD", [j, ib.add_const("one", np.array(1.0, np.float32))], [j1])
        ib.add_op("ADD", [x, ib.add_const("onev", np.ones(3, np.float32))], [x1])
        ib.mark_output(j1)
        ib.mark_output(x1)
        inner_body = ib.index
    body = b.add_subgraph("body")
    bi, ba, bb, bc = (body.add_input(n, np.float32, s) for n, s in (("i", []), ("a", [3]), ("b", [3]), ("c", [2])))
    i1 = body.add_tensor("i1", np.float32, [])
    body.add_op("ADD", [bi, body.add_const("one", np.array(1.0, np.float32))], [i1])
    a_src = ba
    if nested:
        j_out = body.add_tensor("j_out", np.float32, [])
        a_in = body.add_tensor("a_in", np.float32, [3])
        body.add_op("WHILE", [body.add_const("j0", np.array(0.0, np.float32)), ba], [j_out, a_in],
                    options={"cond_subgraph_index": inner_cond, "body_subgraph_index": inner_body})
        a_src = a_in
    a2 = body.add_tensor("a2", np.float32, [3])
    body.add_op("MUL", [a_src, body.add_const("two", np.full(3, 2.0, np.float32))], [a2])
    for o in (i1, bb, a2, bc):
        body.mark_output(o)
    b.add_op("WHILE", [i0, a0, b0, c0], outs, options={"cond_subgraph_index": cond, "body_subgraph_index": body.index})
    for o in outs:
        b.mark_output(o)
    return b.build()


@pytest.mark.parametrize("nested", [False, True])
def test_while_in_place_swap_passthrough_nested(nested):
    data = _swap_loop_model(nested)
    ours = Interpreter(model_content=data)
    ours.allocate_tensors()
    theirs = official_interpreter(data)
    rng = np.random.default_rng(2)
    for start in (0.0, 2.0, 7.0, 0.0):
        inputs = [np.array(start, np.float32), rng.standard_normal(3).astype(np.float32),
                  rng.standard_normal(3).astype(np.float32), rng.standard_normal(2).astype(np.float32)]
        for it in (ours, theirs):
            for d, x in zip(it.get_input_details(), inputs):
                it.set_tensor(d["index"], x)
            it.invoke()
        for do, dt in zip(ours.get_output_details(), theirs.get_output_details()):
            np.testing.assert_allclose(ours.get_tensor(do["index"]), theirs.get_tensor(dt["index"]), rtol=1e-6)


def test_while_body_replanned_by_speculation_mid_loop():
    """A body with a value-dependent node (RESHAPE by a loop variable) is specialised by the executor after its
    first runs, i.e. re-planned in the middle of the loop: the loop notices and carries on with the new plan."""
    b = ModelBuilder()
    i0 = b.add_input("i", np.float32, [])
    x0 = b.add_input("x", np.float32, [6])
    s0 = b.add_const("s0", np.array([2, 3], np.int32))
    outs = [b.add_tensor("oi", np.float32, []), b.add_tensor("ox", np.float32, [6]),
            b.add_tensor("os", np.int32, [2]), b.add_tensor("ow", np.float32, [6])]
    cond = b.add_subgraph("cond")
    ci = cond.add_input("i", np.float32, [])
    for n, dt, s in (("x", np.float32, [6]), ("s", np.int32, [2]), ("w", np.float32, [6])):
        cond.add_input(n, dt, s)
    cc = cond.add_tensor("c", np.bool_, [])
    cond.add_op("LESS", [ci, cond.add_const("lim", np.array(7.0, np.float32))], [cc])
    cond.mark_output(cc)
    body = b.add_subgraph("body")
    bi, bx, bs, bw = (body.add_input(n, dt, s) for n, dt, s in
                      (("i", np.float32, []), ("x", np.float32, [6]), ("s", np.int32, [2]), ("w", np.float32, [6])))
    i1 = body.add_tensor("i1", np.float32, [])
    body.add_op("ADD", [bi, body.add_const("one", np.array(1.0, np.float32))], [i1])
    r = body.add_tensor("r", np.float32, [2, 3], shape_signature=[-1, -1])
    body.add_op("RESHAPE", [bx, bs], [r])  # dead, value-dependent: makes the body speculate
    x1 = body.add_tensor("x1", np.float32, [6])
    body.add_op("MUL", [bx, body.add_const("k", np.full(6, 1.5, np.float32))], [x1])
    w1 = body.add_tensor("w1", np.float32, [6])
    body.add_op("ADD", [bw, bx], [w1])
    for o in (i1, x1, bs, w1):
        body.mark_output(o)
    b.add_op("WHILE", [i0, x0, s0, x0], outs, options={"cond_subgraph_index": cond.index,
                                                       "body_subgraph_index": body.index})
    b.mark_output(outs[1])
    b.mark_output(outs[3])
    data = b.build()
    ours = Interpreter(model_content=data)
    ours.allocate_tensors()
    theirs = official_interpreter(data)
    for start in (0.0, 3.0, 0.0, 6.0, 0.0):
        x = np.arange(6, dtype=np.float32) - 2.5
        for it in (ours, theirs):
            it.set_tensor(it.get_input_details()[0]["index"], np.array(start, np.float32))
            it.set_tensor(it.get_input_details()[1]["index"], x)
            it.invoke()
        for do, dt in zip(ours.get_output_details(), theirs.get_output_details()):
            np.testing.assert_allclose(ours.get_tensor(do["index"]), theirs.get_tensor(dt["index"]), rtol=1e-6)
