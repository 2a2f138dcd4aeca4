"""WHILE / IF / CALL_ONCE / resource variables, built with ModelBuilder and compared with the official runtime."""

from __future__ import annotations

import numpy as np
import pytest

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.model import ModelError
from lite_numba.testing import official_interpreter


def _run_both(data: bytes, inputs: list[np.ndarray], official):
    ours = Interpreter(model_content=data)
    theirs = official_interpreter(data)
    results = []
    for it in (ours, theirs):
        if it is ours:
            it.allocate_tensors()
        for d, x in zip(it.get_input_details(), inputs):
            if tuple(d["shape"]) != x.shape:
                it.resize_tensor_input(d["index"], x.shape)
                it.allocate_tensors()
        for d, x in zip(it.get_input_details(), inputs):
            it.set_tensor(d["index"], x)
        it.invoke()
        results.append([it.get_tensor(d["index"]) for d in it.get_output_details()])
    return results


def _counter_loop(b: ModelBuilder, limit: float, growing: bool = False):
    """Subgraphs for `while i < limit: i += 1; x = x * 1.5 (or concat(x, x))`; returns (cond, body) indices."""
    cond = b.add_subgraph("cond")
    ci = cond.add_input("i", np.float32, [])
    cx = cond.add_input("x", np.float32, [2], shape_signature=[2] if not growing else [-1])
    lim = cond.add_const("limit", np.array(limit, np.float32))
    cout = cond.add_tensor("c", np.bool_, [])
    cond.add_op("LESS", [ci, lim], [cout])
    cond.mark_output(cout)
    del cx
    body = b.add_subgraph("body")
    bi = body.add_input("i", np.float32, [])
    bx = body.add_input("x", np.float32, [2], shape_signature=[2] if not growing else [-1])
    one = body.add_const("one", np.array(1.0, np.float32))
    ni = body.add_tensor("i_next", np.float32, [])
    body.add_op("ADD", [bi, one], [ni])
    nx = body.add_tensor("x_next", np.float32, [2],
                         shape_signature=[2] if not growing else [-1])
    if growing:
        body.add_op("CONCATENATION", [bx, bx], [nx], options={"axis": 0})
    else:
        k = body.add_const("k", np.array([1.5], np.float32))
        body.add_op("MUL", [bx, k], [nx])
    body.mark_output(ni)
    body.mark_output(nx)
    return cond.index, body.index


def _while_model(limit: float, growing: bool = False) -> bytes:
    b = ModelBuilder()
    shape = [2] if not growing else [-1]
    i = b.add_input("i", np.float32, [])
    x = b.add_input("x", np.float32, [2], shape_signature=shape)
    oi = b.add_tensor("oi", np.float32, [])
    ox = b.add_tensor("ox", np.float32, [2], shape_signature=shape)
    cond, body = _counter_loop(b, limit, growing)
    b.add_op("WHILE", [i, x], [oi, ox], options={"cond_subgraph_index": cond, "body_subgraph_index": body})
    b.mark_output(oi)
    b.mark_output(ox)
    return b.build()


@pytest.mark.parametrize("start", [0.0, 3.0, 10.0])
def test_while_counter(official, start):
    data = _while_model(5.0)
    ours, theirs = _run_both(data, [np.array(start, np.float32), np.array([1.0, -2.0], np.float32)], official)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_while_tensor_grows_each_iteration(official):
    data = _while_model(3.0, growing=True)
    ours, theirs = _run_both(data, [np.array(0.0, np.float32), np.array([1.0, 2.0], np.float32)], official)
    assert ours[1].shape == theirs[1].shape == (16,)
    np.testing.assert_array_equal(ours[1], theirs[1])


def test_while_iteration_limit():
    it = Interpreter(model_content=_while_model(1e9))
    it.max_while_iterations = 50
    it.allocate_tensors()
    it.set_tensor(0, np.array(0.0, np.float32))
    it.set_tensor(1, np.ones(2, np.float32))
    with pytest.raises(RuntimeError, match="did not finish within 50 iterations"):
        it.invoke()


def test_nested_while_in_if(official):
    """IF(pred) { WHILE loop } else { x * -1 } — the then branch holds a WHILE over two more subgraphs."""
    b = ModelBuilder()
    p = b.add_input("p", np.bool_, [])
    i = b.add_input("i", np.float32, [])
    x = b.add_input("x", np.float32, [2])
    oi = b.add_tensor("oi", np.float32, [])
    ox = b.add_tensor("ox", np.float32, [2])
    then = b.add_subgraph("then")
    ti = then.add_input("i", np.float32, [])
    tx = then.add_input("x", np.float32, [2])
    toi = then.add_tensor("oi", np.float32, [])
    tox = then.add_tensor("ox", np.float32, [2])
    cond, body = _counter_loop(b, 4.0)
    then.add_op("WHILE", [ti, tx], [toi, tox], options={"cond_subgraph_index": cond, "body_subgraph_index": body})
    then.mark_output(toi)
    then.mark_output(tox)
    other = b.add_subgraph("else")
    ei = other.add_input("i", np.float32, [])
    ex = other.add_input("x", np.float32, [2])
    eoi = other.add_tensor("oi", np.float32, [])
    eox = other.add_tensor("ox", np.float32, [2])
    other.add_op("NEG", [ei], [eoi])
    other.add_op("NEG", [ex], [eox])
    other.mark_output(eoi)
    other.mark_output(eox)
    b.add_op("IF", [p, i, x], [oi, ox], options={"then_subgraph_index": then.index, "else_subgraph_index": other.index})
    b.mark_output(oi)
    b.mark_output(ox)
    data = b.build()
    for pred in (True, False):
        ours, theirs = _run_both(data, [np.array(pred), np.array(1.0, np.float32), np.array([2.0, 3.0], np.float32)],
                                 official)
        for a, c in zip(ours, theirs):
            np.testing.assert_allclose(a, c, rtol=1e-6)


def _variables_model(shared_names: tuple[str, str], read_shape=(3,), read_signature=None) -> bytes:
    """CALL_ONCE init assigns both variables; each invoke: v1 += x, v2 *= 2 (maybe the same variable); out = v1+v2."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [3])
    init = b.add_subgraph("init")
    for k, name in enumerate(shared_names):
        h = init.add_tensor(f"h{k}", np.int32, [])  # resource handle (the converter types it RESOURCE)
        init.add_op("VAR_HANDLE", [], [h], options={"container": "", "shared_name": name})
        c = init.add_const(f"c{k}", np.full(3, k + 1, np.float32))
        init.add_op("ASSIGN_VARIABLE", [h, c], [])
    b.add_op("CALL_ONCE", [], [], options={"init_subgraph_index": init.index})
    h1 = b.add_tensor("h1", np.int32, [])
    h2 = b.add_tensor("h2", np.int32, [])
    b.add_op("VAR_HANDLE", [], [h1], options={"container": "", "shared_name": shared_names[0]})
    b.add_op("VAR_HANDLE", [], [h2], options={"container": "", "shared_name": shared_names[1]})
    # a READ_VARIABLE output of fixed shape keeps its planned storage (what follows stays compiled); with -1 in its
    # shape signature it takes the variable's shape at run time
    r1 = b.add_tensor("r1", np.float32, list(read_shape), shape_signature=read_signature)
    b.add_op("READ_VARIABLE", [h1], [r1])
    n1 = b.add_tensor("n1", np.float32, [3])
    b.add_op("ADD", [r1, x], [n1])
    b.add_op("ASSIGN_VARIABLE", [h1, n1], [])
    r2 = b.add_tensor("r2", np.float32, [3])
    b.add_op("READ_VARIABLE", [h2], [r2])
    two = b.add_const("two", np.array([2.0], np.float32))
    n2 = b.add_tensor("n2", np.float32, [3])
    b.add_op("MUL", [r2, two], [n2])
    b.add_op("ASSIGN_VARIABLE", [h2, n2], [])
    out = b.add_tensor("out", np.float32, [3])
    b.add_op("ADD", [n1, n2], [out])
    b.mark_output(out)
    return b.build()


@pytest.mark.parametrize("names,dynamic_read", [(("a", "b"), False), (("same", "same"), False),
                                                (("a", "b"), True)])
def test_resource_variables_persist_and_share_by_name(official, names, dynamic_read):
    data = _variables_model(names, read_signature=[-1] if dynamic_read else None)
    ours, theirs = Interpreter(model_content=data), official_interpreter(data)
    ours.allocate_tensors()
    xs = [np.array([1.0, 2.0, 3.0], np.float32) * k for k in (1, 2, 3)]
    for phase in range(2):
        for x in xs:
            got = []
            for it in (ours, theirs):
                it.set_tensor(it.get_input_details()[0]["index"], x)
                it.invoke()
                got.append(it.get_tensor(it.get_output_details()[0]["index"]))
            np.testing.assert_allclose(got[0], got[1], rtol=1e-6, err_msg=f"phase {phase}")
        ours.reset_all_variables()
        theirs.reset_all_variables()


def test_recursive_subgraph_is_rejected_at_load():
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [])
    y = b.add_tensor("y", np.float32, [])
    sub = b.add_subgraph("loop")
    sx = sub.add_input("x", np.float32, [])
    sy = sub.add_tensor("y", np.float32, [])
    sub.add_op("CALL_ONCE", [], [], options={"init_subgraph_index": sub.index})
    sub.add_op("NEG", [sx], [sy])
    sub.mark_output(sy)
    b.add_op("CALL_ONCE", [], [], options={"init_subgraph_index": sub.index})
    b.add_op("NEG", [x], [y])
    b.mark_output(y)
    with pytest.raises(ModelError, match="calls its own subgraph|subgraph calls itself"):
        Interpreter(model_content=b.build())


def test_while_cond_must_return_bool():
    b = ModelBuilder()
    i = b.add_input("i", np.float32, [])
    o = b.add_tensor("o", np.float32, [])
    cond = b.add_subgraph("cond")
    ci = cond.add_input("i", np.float32, [])
    cond.mark_output(ci)
    body = b.add_subgraph("body")
    bi = body.add_input("i", np.float32, [])
    body.mark_output(bi)
    b.add_op("WHILE", [i], [o], options={"cond_subgraph_index": cond.index, "body_subgraph_index": body.index})
    b.mark_output(o)
    with pytest.raises(RuntimeError, match="cond subgraph 1 must return a bool"):
        Interpreter(model_content=b.build()).allocate_tensors()


def test_fixed_read_variable_shape_mismatch_is_a_clear_error():
    b = ModelBuilder()
    init = b.add_subgraph("init")
    h = init.add_tensor("h", np.int32, [])
    init.add_op("VAR_HANDLE", [], [h], options={"shared_name": "v"})
    init.add_op("ASSIGN_VARIABLE", [h, init.add_const("c", np.ones(3, np.float32))], [])
    b.add_op("CALL_ONCE", [], [], options={"init_subgraph_index": init.index})
    h = b.add_tensor("h", np.int32, [])
    b.add_op("VAR_HANDLE", [], [h], options={"shared_name": "v"})
    r = b.add_tensor("r", np.float32, [2])  # the model says 2 elements, the variable holds 3
    b.add_op("READ_VARIABLE", [h], [r])
    b.mark_output(r)
    it = Interpreter(model_content=b.build())
    it.allocate_tensors()
    with pytest.raises((RuntimeError, ValueError), match=r"shape \[2\].*\[3\]"):
        it.invoke()


def test_fixed_shape_resource_variables_run_compiled(official):
    """READ_VARIABLE / ASSIGN_VARIABLE of a variable whose shape the model fixes are compiled (only CALL_ONCE stays
    on the host), and the state they carry matches the official runtime over invokes."""
    data = _variables_model(("a", "b"))
    ours, theirs = Interpreter(model_content=data), official_interpreter(data)
    ours.allocate_tensors()
    rt = ours._runtime(0)
    assert [n.op_name for n in rt.plan.nodes if n.index in rt.dynamic_nodes] == ["CALL_ONCE"]
    for k in range(4):
        x = np.array([1.0, -2.0, 0.5], np.float32) * (k + 1)
        got = []
        for it in (ours, theirs):
            it.set_tensor(it.get_input_details()[0]["index"], x)
            it.invoke()
            got.append(it.get_tensor(it.get_output_details()[0]["index"]))
        np.testing.assert_array_equal(got[0], got[1])


def test_compiled_read_before_assign_is_an_error(official):
    b = ModelBuilder()
    h = b.add_tensor("h", np.int32, [])
    b.add_op("VAR_HANDLE", [], [h], options={"shared_name": "v"})
    r = b.add_tensor("r", np.float32, [2])
    b.add_op("READ_VARIABLE", [h], [r])
    b.mark_output(r)
    data = b.build()
    theirs = official_interpreter(data)
    theirs.allocate_tensors()
    with pytest.raises(RuntimeError):  # the official runtime fails too (variable != nullptr)
        theirs.invoke()
    ours = Interpreter(model_content=data)
    ours.allocate_tensors()
    assert not ours._runtime(0).dynamic_nodes  # the READ is compiled
    with pytest.raises((RuntimeError, ValueError), match="read before it was assigned"):
        ours.invoke()
