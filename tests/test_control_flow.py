"""WHILE / IF / CALL_ONCE / resource variables, built with ModelBuilder and compared with the official runtime."""

from __future__ import annotations

import numpy as np
import pytest

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.format.model import ModelError
from lite_numba.testing import invoke_with, official_interpreter, run_both


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
    ours, theirs = run_both(data, [np.array(start, np.float32), np.array([1.0, -2.0], np.float32)])
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_while_tensor_grows_each_iteration(official):
    data = _while_model(3.0, growing=True)
    ours, theirs = run_both(data, [np.array(0.0, np.float32), np.array([1.0, 2.0], np.float32)])
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
        ours, theirs = run_both(data, [np.array(pred), np.array(1.0, np.float32), np.array([2.0, 3.0], np.float32)])
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
    """READ_VARIABLE / ASSIGN_VARIABLE of a variable whose shape the model fixes are compiled, and CALL_ONCE with
    them (its init subgraph lowered into the runner: issue 38), and the state they carry matches the official
    runtime over invokes."""
    data = _variables_model(("a", "b"))
    ours, theirs = Interpreter(model_content=data), official_interpreter(data)
    ours.allocate_tensors()
    rt = ours.runtime.graph(0)
    assert [n.op_name for n in rt.plan.nodes if n.index in rt.dynamic_nodes] == []
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
    assert not ours.runtime.graph(0).dynamic_nodes  # the READ is compiled
    with pytest.raises((RuntimeError, ValueError), match="read before it was assigned"):
        ours.invoke()


# --- variable tensors inside called subgraphs ---------------------------------------------------------------------
# The official WHILE and IF allocate their subgraphs again at every run (they release the subgraphs' memory after
# running), and Subgraph::AllocateTensors resets variable tensors: an RNN cell's hidden state in a WHILE body carries
# from iteration to iteration within one run (while the loop variables keep their shapes), but not from one invoke to
# the next; with experimental_preserve_all_tensors nothing is released and the state carries over, until the
# subgraph is prepared for other input shapes.

_RNN_W = (np.array([[0.6, -0.4], [0.3, 0.8], [-0.7, 0.2]], np.float32),
          np.array([[0.5, -0.3, 0.1], [0.2, 0.4, -0.6], [-0.1, 0.3, 0.5]], np.float32),
          np.array([0.05, -0.1, 0.2], np.float32))


def _rnn_cell(sg, x, name: str, scale: float = 1.0):
    """y = RNN(x, h) with h a [1, 3] variable tensor of `sg` (TANH)."""
    w, r, bias = _RNN_W
    h = sg.add_tensor(name + "_h", np.float32, [1, 3], is_variable=True)
    y = sg.add_tensor(name + "_y", np.float32, [1, 3])
    sg.add_op("RNN", [x, sg.add_const(name + "_w", w * scale), sg.add_const(name + "_r", r),
                      sg.add_const(name + "_b", bias), h], [y], options={"fused_activation_function": "TANH"})
    return y


def _while_rnn_model(z_op: str) -> bytes:
    """Loop variables (i, x [1,2], y [1,3], z [-1]): while i < 3: i += 1; y = RNN(x, h); x += d; z = z_op(z). NEG keeps
    z's shape (in-place loop), CONCATENATION doubles it every iteration (general loop)."""
    b = ModelBuilder()
    specs = [("i", [], None), ("x", [1, 2], None), ("y", [1, 3], None), ("z", [2], [-1])]
    ins = [b.add_input(n, np.float32, s, shape_signature=sig) for n, s, sig in specs]
    cond = b.add_subgraph("cond")
    ci = [cond.add_input(n, np.float32, s, shape_signature=sig) for n, s, sig in specs]
    c = cond.add_tensor("c", np.bool_, [])
    cond.add_op("LESS", [ci[0], cond.add_const("lim", np.array(3.0, np.float32))], [c])
    cond.mark_output(c)
    body = b.add_subgraph("body")
    bi, bx, _, bz = [body.add_input(n, np.float32, s, shape_signature=sig) for n, s, sig in specs]
    ni = body.add_tensor("ni", np.float32, [])
    body.add_op("ADD", [bi, body.add_const("one", np.array(1.0, np.float32))], [ni])
    ny = _rnn_cell(body, bx, "cell")
    nx = body.add_tensor("nx", np.float32, [1, 2])
    body.add_op("ADD", [bx, body.add_const("d", np.array([[0.1, -0.2]], np.float32))], [nx])
    nz = body.add_tensor("nz", np.float32, [2], shape_signature=[-1])
    body.add_op(z_op, [bz, bz] if z_op == "CONCATENATION" else [bz], [nz],
                options={"axis": 0} if z_op == "CONCATENATION" else None)
    for t in (ni, nx, ny, nz):
        body.mark_output(t)
    outs = [b.add_tensor("o" + n, np.float32, s, shape_signature=sig) for n, s, sig in specs]
    b.add_op("WHILE", ins, outs, options={"cond_subgraph_index": cond.index, "body_subgraph_index": body.index})
    for o in outs:
        b.mark_output(o)
    return b.build()


def _if_rnn_model() -> bytes:
    """IF(p, x, z): each branch returns (RNN(x, its own variable h), NEG(z))."""
    b = ModelBuilder()
    p = b.add_input("p", np.bool_, [])
    x = b.add_input("x", np.float32, [1, 2])
    z = b.add_input("z", np.float32, [2], shape_signature=[-1])
    branches = []
    for name, scale in (("then", 1.0), ("else", 2.0)):
        s = b.add_subgraph(name)
        sx = s.add_input("x", np.float32, [1, 2])
        sz = s.add_input("z", np.float32, [2], shape_signature=[-1])
        y = _rnn_cell(s, sx, name, scale)
        nz = s.add_tensor("nz", np.float32, [2], shape_signature=[-1])
        s.add_op("NEG", [sz], [nz])
        s.mark_output(y)
        s.mark_output(nz)
        branches.append(s.index)
    oy = b.add_tensor("oy", np.float32, [1, 3])
    oz = b.add_tensor("oz", np.float32, [2], shape_signature=[-1])
    b.add_op("IF", [p, x, z], [oy, oz], options={"then_subgraph_index": branches[0],
                                                 "else_subgraph_index": branches[1]})
    b.mark_output(oy)
    b.mark_output(oz)
    return b.build()


def _replay_steps(data: bytes, official, steps, preserve_all: bool) -> None:
    """Run the same steps (("invoke", inputs) / ("resize", input, shape) / ("allocate",) / ("reset",)) on both
    runtimes; every invoke's outputs must agree."""
    ours = Interpreter(model_content=data, experimental_preserve_all_tensors=preserve_all)
    theirs = official_interpreter(data, num_threads=None, allocate=False,
                                  experimental_preserve_all_tensors=preserve_all)
    for it in (ours, theirs):
        it.allocate_tensors()
    for k, step in enumerate(steps):
        got = []
        for it in (ours, theirs):
            if step[0] == "invoke":
                got.append(invoke_with(it, step[1]))
            elif step[0] == "resize":
                it.resize_tensor_input(it.get_input_details()[step[1]]["index"], step[2])
            elif step[0] == "allocate":
                it.allocate_tensors()
            else:
                it.reset_all_variables()
        for a, c in zip(*got) if got else ():
            np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-6, err_msg=f"step {k} {step[0]}")


def _state_steps(make, z_input: int):
    """Invokes, a no-op allocate, reset_all_variables, a resize of z (new body shapes) and one to the same shape."""
    return [("invoke", make(2)), ("invoke", make(2)), ("allocate",), ("invoke", make(2)), ("reset",),
            ("invoke", make(2)), ("resize", z_input, [4]), ("allocate",), ("invoke", make(4)), ("invoke", make(4)),
            ("resize", z_input, [4]), ("allocate",), ("invoke", make(4))]


@pytest.mark.parametrize("preserve_all", [False, True])
@pytest.mark.parametrize("z_op", ["NEG", "CONCATENATION"])
def test_while_body_variable_tensors_restart_as_officially(official, z_op, preserve_all):
    """Ours kept the body's RNN state from one invoke to the next (and, in the growing loop, from iteration to
    iteration); the official runtime restarts it at every WHILE run and whenever the body's input shapes change."""
    def make(n):
        return [np.array(0.0, np.float32), np.array([[0.5, -1.0]], np.float32), np.zeros((1, 3), np.float32),
                np.arange(1, n + 1, dtype=np.float32)]
    _replay_steps(_while_rnn_model(z_op), official, _state_steps(make, 3), preserve_all)


@pytest.mark.parametrize("preserve_all", [False, True])
def test_if_branch_variable_tensors_restart_as_officially(official, preserve_all):
    def make(n, p=True):
        return [np.array(p), np.array([[0.5, -1.0]], np.float32), np.arange(n, dtype=np.float32)]
    steps = _state_steps(make, 2)
    steps[1:1] = [("invoke", make(2, False)), ("invoke", make(2, True)), ("invoke", make(2, False))]
    _replay_steps(_if_rnn_model(), official, steps, preserve_all)


def _while_resource_variable_model() -> bytes:
    """CALL_ONCE assigns acc = [1, 2, 3]; while i < 3 the body does acc += x; the output is acc after the loop."""
    b = ModelBuilder()
    i = b.add_input("i", np.float32, [])
    x = b.add_input("x", np.float32, [3])
    init = b.add_subgraph("init")
    h = init.add_tensor("h", np.int32, [])
    init.add_op("VAR_HANDLE", [], [h], options={"shared_name": "acc"})
    init.add_op("ASSIGN_VARIABLE", [h, init.add_const("c", np.array([1.0, 2.0, 3.0], np.float32))], [])
    b.add_op("CALL_ONCE", [], [], options={"init_subgraph_index": init.index})
    cond = b.add_subgraph("cond")
    ci = cond.add_input("i", np.float32, [])
    cond.add_input("x", np.float32, [3])
    c = cond.add_tensor("c", np.bool_, [])
    cond.add_op("LESS", [ci, cond.add_const("lim", np.array(3.0, np.float32))], [c])
    cond.mark_output(c)
    body = b.add_subgraph("body")
    bi = body.add_input("i", np.float32, [])
    bx = body.add_input("x", np.float32, [3])
    ni = body.add_tensor("ni", np.float32, [])
    body.add_op("ADD", [bi, body.add_const("one", np.array(1.0, np.float32))], [ni])
    h = body.add_tensor("h", np.int32, [])
    body.add_op("VAR_HANDLE", [], [h], options={"shared_name": "acc"})
    r = body.add_tensor("r", np.float32, [3])
    body.add_op("READ_VARIABLE", [h], [r])
    n = body.add_tensor("n", np.float32, [3])
    body.add_op("ADD", [r, bx], [n])
    body.add_op("ASSIGN_VARIABLE", [h, n], [])
    body.mark_output(ni)
    body.mark_output(bx)
    oi = b.add_tensor("oi", np.float32, [])
    ox = b.add_tensor("ox", np.float32, [3])
    b.add_op("WHILE", [i, x], [oi, ox], options={"cond_subgraph_index": cond.index, "body_subgraph_index": body.index})
    hm = b.add_tensor("hm", np.int32, [])
    b.add_op("VAR_HANDLE", [], [hm], options={"shared_name": "acc"})
    out = b.add_tensor("out", np.float32, [3])
    b.add_op("READ_VARIABLE", [hm], [out])
    b.mark_output(oi)
    b.mark_output(out)
    return b.build()


def test_resource_variables_in_while_body_persist_as_officially(official):
    """Resource variables live in the interpreter, not in the body: a WHILE run does not reset them, nor does
    reset_all_variables() or allocate_tensors() (this agreed before; kept as a guard for the restart above)."""
    def make(_n=None):
        return [np.array(0.0, np.float32), np.array([1.0, -2.0, 0.5], np.float32)]
    steps = [("invoke", make()), ("invoke", make()), ("allocate",), ("invoke", make()), ("reset",), ("invoke", make())]
    _replay_steps(_while_resource_variable_model(), official, steps, False)
