"""Control flow lowered into the compiled runner (issue 38, lite_numba/runtime/control): WHILE, IF and CALL_ONCE run
inside their parent's runner with the same results as the host path (LITE_NUMBA_EXECUTOR=python keeps every node on
the host) and as the official runtime; loops whose variables change shape keep the host path and say why; Ctrl-C,
the iteration cap and shape errors stay clear."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import invoke_with, official_interpreter
from lite_numba.tools.inspect_model import inspect_model

F32 = np.float32


def _loop(b: ModelBuilder, limit: float, body_fn, shapes):
    """cond `i < limit` and a body `(i + 1, *body_fn(body, vars))` over loop variables (i, *vars)."""
    cond = b.add_subgraph("cond")
    ci = cond.add_input("i", F32, [])
    for k, s in enumerate(shapes):
        cond.add_input(f"v{k}", F32, s)
    c = cond.add_tensor("c", np.bool_, [])
    cond.add_op("LESS", [ci, cond.add_const("limit", np.array(limit, F32))], [c])
    cond.mark_output(c)
    body = b.add_subgraph("body")
    bi = body.add_input("i", F32, [])
    vs = [body.add_input(f"v{k}", F32, s) for k, s in enumerate(shapes)]
    ni = body.add_tensor("ni", F32, [])
    body.add_op("ADD", [bi, body.add_const("one", np.array(1.0, F32))], [ni])
    body.mark_output(ni)
    for o in body_fn(body, vs):
        body.mark_output(o)
    return cond.index, body.index


_NAMES = iter(range(1 << 30))


def _op(sg, op, ins, shape, **options):
    t = sg.add_tensor(f"t{next(_NAMES)}", F32, shape)
    sg.add_op(op, ins, [t], options=options or None)
    return t


def _while_model(body_fn, shapes, limit=4.0, grow=False) -> bytes:
    b = ModelBuilder()
    sig = (lambda s: [-1] * len(s)) if grow else (lambda s: None)
    ins = [b.add_input("i", F32, [])] + [b.add_input(f"x{k}", F32, s, shape_signature=sig(s))
                                        for k, s in enumerate(shapes)]
    outs = [b.add_tensor("oi", F32, [])] + [b.add_tensor(f"o{k}", F32, s, shape_signature=sig(s))
                                           for k, s in enumerate(shapes)]
    cond, body = _loop(b, limit, body_fn, shapes)
    b.add_op("WHILE", ins, outs, options={"cond_subgraph_index": cond, "body_subgraph_index": body})
    for o in outs:
        b.mark_output(o)
    return b.build()


def _scale(body, vs):
    return [_op(body, "MUL", [vs[0], body.add_const("k", np.array([1.5], F32))], [2])]


def _scale_tanh(body, vs):
    """x' = tanh(x * 1.5): x read before x' is written, so carried in place (with the counter: a looping runner)."""
    return [_op(body, "TANH", [_scale(body, vs)[0]], [2])]


_ONE_RUNNER = "cond, body and counters in one runner"
_BODIES = {"copied": _scale, "in_place": _scale_tanh}


def _swap_and_reuse(body, vs):
    """a' = a + b; b' = a (another variable passed through: a swap); c' = c * 2, then d' = c + d reads c after
    c' was written (c cannot be carried in place)."""
    a, bb, c, d = vs
    na = _op(body, "ADD", [a, bb], [3])
    nc = _op(body, "MUL", [c, body.add_const("two", np.array([2.0], F32))], [3])
    nd = _op(body, "ADD", [c, d], [3])
    return [na, a, nc, nd]


def _grow(body, vs):
    return [_op(body, "CONCATENATION", [vs[0], vs[0]], [4], axis=0)]


def _nested_body(b: ModelBuilder):
    """A body holding a WHILE of its own (x * 1.5 three times per outer iteration)."""
    def fn(body, vs):
        cond, inner = _loop(b, 3.0, _scale, [[2]])
        zero = body.add_const("zero", np.array(0.0, F32))
        oi = body.add_tensor("inner_i", F32, [])
        ox = body.add_tensor("inner_x", F32, [2])
        body.add_op("WHILE", [zero, vs[0]], [oi, ox], options={"cond_subgraph_index": cond,
                                                                "body_subgraph_index": inner})
        return [ox]
    return fn


def _if_model(then_fn=None) -> bytes:
    """IF(p, x, y) -> (x * 2 or -x, y passed through or y + 1, a constant or x): outputs bound in place, copied."""
    b = ModelBuilder()
    p = b.add_input("p", np.bool_, [])
    x = b.add_input("x", F32, [3])
    y = b.add_input("y", F32, [2])
    outs = [b.add_tensor(f"o{k}", F32, s) for k, s in enumerate(([3], [2], [3]))]
    branches = []
    for name in ("then", "else"):
        s = b.add_subgraph(name)
        sx = s.add_input("x", F32, [3])
        sy = s.add_input("y", F32, [2])
        if name == "then":
            r = (then_fn or (lambda s, sx: _op(s, "MUL", [sx, s.add_const("two", np.array([2.0], F32))], [3])))(s, sx)
            for t in (r, sy, s.add_const("c", np.array([7.0, 8.0, 9.0], F32))):
                s.mark_output(t)
        else:
            for t in (_op(s, "NEG", [sx], [3]), _op(s, "ADD", [sy, s.add_const("one", np.ones(2, F32))], [2]), sx):
                s.mark_output(t)
        branches.append(s.index)
    b.add_op("IF", [p, x, y], outs, options={"then_subgraph_index": branches[0], "else_subgraph_index": branches[1]})
    for o in outs:
        b.mark_output(o)
    return b.build()


def _ring_buffer_model(frame: int = 3, keep: int = 4) -> bytes:
    """The streaming pattern: state [1, keep, frame] in a resource variable (CALL_ONCE assigns zeros); each invoke
    concatenates the state with the new frame, keeps the last `keep` frames (STRIDED_SLICE), assigns them back, and
    returns a weighted sum of the window (FULLY_CONNECTED) and the window's mean."""
    b = ModelBuilder()
    x = b.add_input("frame", F32, [1, 1, frame])
    init = b.add_subgraph("init")
    h0 = init.add_tensor("h", np.int32, [])
    init.add_op("VAR_HANDLE", [], [h0], options={"shared_name": "ring"})
    init.add_op("ASSIGN_VARIABLE", [h0, init.add_const("zeros", np.zeros((1, keep, frame), F32))], [])
    b.add_op("CALL_ONCE", [], [], options={"init_subgraph_index": init.index})
    h = b.add_tensor("h", np.int32, [])
    b.add_op("VAR_HANDLE", [], [h], options={"shared_name": "ring"})
    state = b.add_tensor("state", F32, [1, keep, frame])
    b.add_op("READ_VARIABLE", [h], [state])
    window = b.add_tensor("window", F32, [1, keep + 1, frame])
    b.add_op("CONCATENATION", [state, x], [window], options={"axis": 1})
    nxt = b.add_tensor("next", F32, [1, keep, frame])
    b.add_op("STRIDED_SLICE", [window, b.add_const("begin", np.array([0, 1, 0], np.int32)),
                               b.add_const("end", np.array([1, keep + 1, frame], np.int32)),
                               b.add_const("strides", np.array([1, 1, 1], np.int32))], [nxt])
    b.add_op("ASSIGN_VARIABLE", [h, nxt], [])
    flat = b.add_tensor("flat", F32, [1, (keep + 1) * frame])
    b.add_op("RESHAPE", [window, b.add_const("shape", np.array([1, (keep + 1) * frame], np.int32))], [flat])
    w = np.random.default_rng(3).normal(0, 0.3, (2, (keep + 1) * frame)).astype(F32)
    out = b.add_tensor("out", F32, [1, 2])
    b.add_op("FULLY_CONNECTED", [flat, b.add_const("w", w), b.add_const("bias", np.array([0.1, -0.2], F32))], [out])
    mean = b.add_tensor("mean", F32, [1, frame])
    b.add_op("MEAN", [window, b.add_const("axis", np.array([1], np.int32))], [mean])
    b.mark_output(out)
    b.mark_output(mean)
    return b.build()


def _compare(data: bytes, feeds, monkeypatch, official=True, expect_paths=None):
    """Run `feeds` (one input list per invoke) compiled, on the host path and in the official runtime: identical
    (host and compiled bit for bit, the official runtime within 1e-6); returns the compiled interpreter."""
    runs = {}
    for mode in ("compiled", "python"):
        monkeypatch.setenv("LITE_NUMBA_EXECUTOR", mode)
        it = Interpreter(model_content=data)
        it.allocate_tensors()
        runs[mode] = (it, [invoke_with(it, f) for f in feeds])
    monkeypatch.delenv("LITE_NUMBA_EXECUTOR")
    for a, b in zip(runs["compiled"][1], runs["python"][1]):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
    if official:
        theirs = official_interpreter(data)
        for k, f in enumerate(feeds):
            for x, y in zip(runs["compiled"][1][k], invoke_with(theirs, f)):
                np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6, err_msg=f"invoke {k}")
    it = runs["compiled"][0]
    if expect_paths is not None:
        assert sorted(p for p, _ in it.runtime.control.paths.values()) == sorted(expect_paths), \
            it.runtime.control.paths
    return it


@pytest.mark.parametrize("body", list(_BODIES))
@pytest.mark.parametrize("start", [0.0, 3.0, 4.0, 10.0, float("nan")])
def test_while_counter_compiled(official, monkeypatch, start, body):
    """No, one, several iterations; the in-place body's loop is one runner that loops itself (a copied variable
    keeps the loop's own iterations)."""
    data = _while_model(_BODIES[body], [[2]], limit=5.0)
    it = _compare(data, [[np.array(start, F32), np.array([1.0, -2.0], F32)]] * 2, monkeypatch,
                  expect_paths=["compiled"])
    main = it.runtime.graph(0)
    assert not main.dynamic_nodes and len(main.steps) == 1  # the whole invoke is one compiled call
    assert (_ONE_RUNNER in it.runtime.control.paths[(0, 0)][1]) == (body == "in_place")


_COMPARES = ["LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"]


def _cond_model(op: str, dt, form: str, x_in_place: bool = False) -> bytes:
    """WHILE over (i of dtype `dt`, j int32, x [2]): cond `op(i, 3) and j < 6` written as the converter does
    (form "and"), through LOGICAL_OR / LOGICAL_NOT (De Morgan, "demorgan"), or with an ADD inside the cond ("add":
    not a scalar expression, the cond keeps its runner; x' also adds i'); body i - (-1) (float) or i + 1 (int),
    j + 1, x * 1.5 (tanh(x * 1.5) with x_in_place: x then carried in place)."""
    b = ModelBuilder()
    ins = [b.add_input("i", dt, []), b.add_input("j", np.int32, []), b.add_input("x", F32, [2])]
    outs = [b.add_tensor("oi", dt, []), b.add_tensor("oj", np.int32, []), b.add_tensor("ox", F32, [2])]
    cond = b.add_subgraph("cond")
    ci, cj, _ = cond.add_input("i", dt, []), cond.add_input("j", np.int32, []), cond.add_input("x", F32, [2])

    def flag(opname, ins):
        t = cond.add_tensor(f"c{next(_NAMES)}", np.bool_, [])
        cond.add_op(opname, ins, [t])
        return t
    if form == "add":
        t = cond.add_tensor("i_plus_0", dt, [])
        cond.add_op("ADD", [ci, cond.add_const("zero", np.array(0, dt))], [t])
        ci = t
    c1 = flag(op, [ci, cond.add_const("three", np.array(3, dt))])
    c2 = flag("LESS", [cj, cond.add_const("six", np.array(6, np.int32))])
    if form == "demorgan":
        out = flag("LOGICAL_NOT", [flag("LOGICAL_OR", [flag("LOGICAL_NOT", [c1]), flag("LOGICAL_NOT", [c2])])])
    else:
        out = flag("LOGICAL_AND", [c2, c1])
    cond.mark_output(out)
    body = b.add_subgraph("body")
    bi, bj, bx = body.add_input("i", dt, []), body.add_input("j", np.int32, []), body.add_input("x", F32, [2])
    steps = [("SUB", bi, dt, -1) if dt == F32 else ("ADD", bi, dt, 1), ("ADD", bj, np.int32, 1), ("MUL", bx, F32, 1.5)]
    made = []
    for k, (opname, src, t_dt, v) in enumerate(steps):
        t = body.add_tensor(f"n{k}", t_dt, [2] if k == 2 else [])
        body.add_op(opname, [src, body.add_const(f"k{k}", np.array(v, t_dt))], [t])
        made.append(t)
    if form == "add":  # x' = x * 1.5 + i': i' read in the body (in place: its SUB reads i, then writes; x too)
        made[2] = _op(body, "ADD", [made[2], made[0]], [2])
    elif x_in_place:
        made[2] = _op(body, "TANH", [made[2]], [2])
    for t in made:
        body.mark_output(t)
    b.add_op("WHILE", ins, outs, options={"cond_subgraph_index": cond.index, "body_subgraph_index": body.index})
    for o in outs:
        b.mark_output(o)
    return b.build()


@pytest.mark.parametrize("dt", [np.int32, np.int64, F32], ids=["int32", "int64", "float32"])
@pytest.mark.parametrize("op", _COMPARES)
def test_while_cond_evaluated_in_the_loop(official, monkeypatch, op, dt):
    """The converter's conds (comparisons of one-element loop variables and constants, LOGICAL_AND / OR / NOT)
    evaluated by the loop itself: the same iterations as the host path and the official runtime, from below, at and
    above the bound (and NaN for float32: unordered, NOT_EQUAL true); the counters carried in place."""
    form = "demorgan" if _COMPARES.index(op) % 2 else "and"
    starts = [0, 3, 5] + ([float("nan")] if dt == F32 else [])
    feeds = [[np.array(v, dt), np.array(k, np.int32), np.array([1.0, -2.0], F32)]
             for k, v in enumerate(starts)]
    it = _compare(_cond_model(op, dt, form), feeds, monkeypatch, expect_paths=["compiled"])
    why = it.runtime.control.paths[(0, 0)][1]
    assert f"cond 1 evaluated in the loop ({3 if form == 'and' else 6} scalar operations)" in why, why
    # i and j stepped by the loop; x copied (its MUL reads and writes it)
    assert "2 counters stepped by the loop, 0 of 3 loop variables carried in place, 1 copies" in why, why


@pytest.mark.parametrize("dt", [np.int32, np.int64, F32], ids=["int32", "int64", "float32"])
@pytest.mark.parametrize("op", _COMPARES)
def test_while_cond_in_a_looping_runner(official, monkeypatch, op, dt):
    """The same conds with every variable carried in place or stepped: the loop is one runner that evaluates the
    cond (comparisons, LOGICAL_AND / OR / NOT on its results) and steps the counters itself; the same iterations
    as the host path and the official runtime."""
    form = "demorgan" if _COMPARES.index(op) % 2 else "and"
    starts = [0, 3, 5] + ([float("nan")] if dt == F32 else [])
    feeds = [[np.array(v, dt), np.array(k, np.int32), np.array([1.0, -2.0], F32)]
             for k, v in enumerate(starts)]
    it = _compare(_cond_model(op, dt, form, x_in_place=True), feeds, monkeypatch, expect_paths=["compiled"])
    why = it.runtime.control.paths[(0, 0)][1]
    assert _ONE_RUNNER in why and "2 counters stepped by the loop, 1 of 3 loop variables carried in place" in why, why


def test_while_cond_with_other_ops_keeps_its_runner(official, monkeypatch):
    it = _compare(_cond_model("LESS", F32, "add"), [[np.array(0.0, F32), np.array(0, np.int32),
                                                     np.array([1.0, 2.0], F32)]], monkeypatch,
                  expect_paths=["compiled"])
    why = it.runtime.control.paths[(0, 0)][1]
    assert "cond 1 compiled (1 runners)" in why, why
    assert "1 counters stepped by the loop, 2 of 3 loop variables carried in place, 0 copies" in why, why


def test_while_swaps_and_reads_after_writes(monkeypatch):
    """A passed-through variable (staged copy) and a variable read after its successor is written (copied, not
    carried in place): every body output computed from the iteration's inputs, as the host path and TensorFlow do.
    (ai-edge-litert 2.3 returns b' = a' here, not the old a: its WHILE shares the passed-through tensor.)"""
    data = _while_model(_swap_and_reuse, [[3]] * 4, limit=3.0)
    rng = np.random.default_rng(0)
    feeds = [[np.array(0.0, F32)] + [rng.normal(size=3).astype(F32) for _ in range(4)] for _ in range(3)]
    it = _compare(data, feeds, monkeypatch, official=False, expect_paths=["compiled"])
    for f in feeds:
        a, b, c, d = (v.astype(np.float64) for v in f[1:])
        for _ in range(3):
            a, b, c, d = a + b, a, c * 2, c + d
        for got, want in zip(invoke_with(it, f)[1:], (a, b, c, d)):
            np.testing.assert_allclose(got, want, rtol=1e-5)
    why = it.runtime.control.paths[(0, 0)][1]
    # the counter is stepped by the loop (i + 1, read by nothing else); every other output's writer reads its
    # variable too (a, d: three elements, copied), b is a swap (staged: 2 copies), c is read after c'
    assert "1 counters stepped by the loop, 0 of 5 loop variables carried in place, 5 copies" in why, why
    assert "cond 1 evaluated in the loop (1 scalar operations)" in why, why


def test_nested_while_compiled(official, monkeypatch):
    b = ModelBuilder()
    ins = [b.add_input("i", F32, []), b.add_input("x", F32, [2])]
    outs = [b.add_tensor("oi", F32, []), b.add_tensor("ox", F32, [2])]
    cond, body = _loop(b, 2.0, _nested_body(b), [[2]])
    b.add_op("WHILE", ins, outs, options={"cond_subgraph_index": cond, "body_subgraph_index": body})
    for o in outs:
        b.mark_output(o)
    data = b.build()
    _compare(data, [[np.array(0.0, F32), np.array([1.0, 2.0], F32)]], monkeypatch,
             expect_paths=["compiled", "compiled"])


@pytest.mark.parametrize("pred", [True, False])
def test_if_compiled_on_the_parents_tensors(official, monkeypatch, pred):
    data = _if_model()
    feeds = [[np.array(pred), np.array([1.0, -2.0, 3.0], F32), np.array([0.5, 4.0], F32)],
             [np.array(not pred), np.array([2.0, 1.0, 0.0], F32), np.array([-1.0, 1.0], F32)]]
    it = _compare(data, feeds, monkeypatch, expect_paths=["compiled"])
    # then: y passed through and a constant; else: x passed through (the computed outputs are written in place)
    assert "3 output copies" in it.runtime.control.paths[(0, 0)][1]


def test_while_in_if_branch_compiled(official, monkeypatch):
    """IF(p) { WHILE } else { NEG }: the WHILE lowered into the branch's runner, the IF into the main one."""
    b = ModelBuilder()
    p = b.add_input("p", np.bool_, [])
    x = b.add_input("x", F32, [2])
    out = b.add_tensor("out", F32, [2])
    then = b.add_subgraph("then")
    tx = then.add_input("x", F32, [2])
    cond, body = _loop(b, 4.0, _scale, [[2]])
    ti, tox = then.add_tensor("ti", F32, []), then.add_tensor("tox", F32, [2])
    then.add_op("WHILE", [then.add_const("zero", np.array(0.0, F32)), tx], [ti, tox],
                options={"cond_subgraph_index": cond, "body_subgraph_index": body})
    then.mark_output(tox)
    other = b.add_subgraph("else")
    other.mark_output(_op(other, "NEG", [other.add_input("x", F32, [2])], [2]))
    b.add_op("IF", [p, x], [out], options={"then_subgraph_index": then.index, "else_subgraph_index": other.index})
    b.mark_output(out)
    data = b.build()
    feeds = [[np.array(v), np.array([2.0, 3.0], F32)] for v in (True, False, True)]
    _compare(data, feeds, monkeypatch, expect_paths=["compiled", "compiled"])


def test_call_once_and_ring_buffer_compiled(official, monkeypatch):
    """The streaming pattern with a variable: one compiled call per frame, frame after frame as officially; CALL_ONCE
    does not run again after reset_all_variables() (as officially: resource variables keep their values)."""
    data = _ring_buffer_model()
    rng = np.random.default_rng(7)
    feeds = [[rng.normal(size=(1, 1, 3)).astype(F32)] for _ in range(7)]
    it = _compare(data, feeds, monkeypatch, expect_paths=["compiled"])
    main = it.runtime.graph(0)
    assert not main.dynamic_nodes and len(main.steps) == 1
    theirs = official_interpreter(data)
    for f in feeds:  # (the state `it` holds)
        invoke_with(theirs, f)
    it.reset_all_variables()
    theirs.reset_all_variables()
    for f in feeds[:3]:
        for x, y in zip(invoke_with(it, f), invoke_with(theirs, f)):
            np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6)


def test_growing_loop_keeps_the_host_path(official, monkeypatch):
    data = _while_model(_grow, [[2]], limit=3.0, grow=True)
    it = _compare(data, [[np.array(0.0, F32), np.array([1.0, 2.0], F32)]] * 2, monkeypatch, expect_paths=["host"])
    assert it.get_tensor(it.get_output_details()[1]["index"]).shape == (16,)
    assert "changes a loop variable's shape" in it.runtime.control.paths[(0, 0)][1]
    report = inspect_model(data)["control_flow"]
    assert [(c["op"], c["path"]) for c in report] == [("WHILE", "host")]
    assert [(c["op"], c["path"]) for c in inspect_model(_if_model())["control_flow"]] == [("IF", "compiled")]


def _grow_gather_model() -> bytes:
    """while i < 3: i += 1; x = concat(x, x); y = x[idx] (GATHER: its index checked at run time); idx passed on."""
    b = ModelBuilder()
    sigs = ([], [-1], [1], [1])
    types_ = (F32, F32, F32, np.int32)
    names = ("i", "x", "y", "idx")
    cond = b.add_subgraph("cond")
    cv = [cond.add_input(n, t, [2] if n == "x" else s, shape_signature=[-1] if n == "x" else None)
          for n, t, s in zip(names, types_, sigs)]
    c = cond.add_tensor("c", np.bool_, [])
    cond.add_op("LESS", [cv[0], cond.add_const("limit", np.array(3.0, F32))], [c])
    cond.mark_output(c)
    body = b.add_subgraph("body")
    i, x, _, idx = [body.add_input(n, t, [2] if n == "x" else s, shape_signature=[-1] if n == "x" else None)
                    for n, t, s in zip(names, types_, sigs)]
    for o in (_op(body, "ADD", [i, body.add_const("one", np.array(1.0, F32))], []),
              _op(body, "CONCATENATION", [x, x], [4], axis=0), _op(body, "GATHER", [x, idx], [1], axis=0), idx):
        body.mark_output(o)
    ins = [b.add_input(n, t, [2] if n == "x" else s, shape_signature=[-1] if n == "x" else None)
           for n, t, s in zip(names, types_, sigs)]
    outs = [b.add_tensor("o" + n, t, [2] if n == "x" else s, shape_signature=[-1] if n == "x" else None)
            for n, t, s in zip(names, types_, sigs)]
    b.add_op("WHILE", ins, outs, options={"cond_subgraph_index": cond.index, "body_subgraph_index": body.index})
    for o in outs:
        b.mark_output(o)
    return b.build()


def test_growing_loop_replays_its_iterations_compiled(official, monkeypatch):
    """The growing WHILE keeps the host path, but the iterations its general loop went through (cond and body bound
    per shape) are replayed from the next run on by one compiled call: no subgraph runs from Python then. Runs
    shorter than the recorded one, longer (continued on the host and recorded again), an iteration cap below the
    recorded length and results identical to the host path's and the official runtime's."""
    from lite_numba.runtime.model_runtime import BoundSubgraph

    data = _while_model(_grow, [[2]], limit=3.0, grow=True)
    starts = [0.0, 0.0, 2.0, -2.0, -2.0, 3.0, 1.0, -4.0]
    feeds = [[np.array(s, F32), np.array([1.0, -2.0], F32)] for s in starts]
    it = _compare(data, feeds, monkeypatch, expect_paths=["host"])
    calls = []
    run = BoundSubgraph.run
    monkeypatch.setattr(BoundSubgraph, "run", lambda self: (calls.append(self), run(self))[1])
    for s, n in ((0.0, 3), (-4.0, 7), (2.5, 1)):
        out = invoke_with(it, [np.array(s, F32), np.array([1.0, -2.0], F32)])
        assert out[1].shape == (2 << n,) and not calls
    out = invoke_with(it, [np.array(-6.0, F32), np.array([1.0, -2.0], F32)])  # past the recorded steps
    assert out[1].shape == (2 << 9,) and calls
    it.max_while_iterations = 2
    with pytest.raises(RuntimeError, match=r"WHILE \(node 0\) did not finish within 2 iterations"):
        invoke_with(it, [np.array(0.0, F32), np.array([1.0, -2.0], F32)])
    it.max_while_iterations = None
    calls.clear()
    assert invoke_with(it, [np.array(0.0, F32), np.array([1.0, -2.0], F32)])[1].shape == (16,) and not calls


def test_growing_loop_skips_the_memo_after_its_first_run(official, monkeypatch):
    """A host WHILE with dynamic outputs on fixed input storage (it sets every output at every run: ctx.sets_outputs)
    runs directly from the program after its first run, not through run_dynamic's memo check; results stay the
    official runtime's for 0 to 4 iterations, after another input shape (allocated again) and with the outputs read
    between runs. A WHILE fed by a dynamic tensor keeps run_dynamic."""
    from lite_numba.runtime.executor import GraphRuntime

    data = _while_model(_grow, [[2]], limit=3.0, grow=True)
    theirs = official_interpreter(data)
    calls = []
    run = GraphRuntime.run_dynamic
    monkeypatch.setattr(GraphRuntime, "run_dynamic", lambda self, ni: (calls.append(ni), run(self, ni))[1])
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    for k, s in enumerate([0.0, 0.0, 3.0, -1.0, 2.0, 0.0, 5.0]):
        feed = [np.array(s, F32), np.array([1.0 + k, -2.0], F32)]
        for x, y in zip(invoke_with(it, feed), invoke_with(theirs, feed)):
            np.testing.assert_array_equal(x, y)
        assert calls == [0], calls  # the first run only
    main = it.runtime.graph(0)
    assert [fn.__func__ for fn, _ in main.program] == [GraphRuntime._run_host]
    for rt in (it, theirs):
        rt.resize_tensor_input(1, [3])
        rt.allocate_tensors()
    for s in (1.0, 1.0, 3.0):
        feed = [np.array(s, F32), np.array([1.0, -2.0, 0.5], F32)]
        for x, y in zip(invoke_with(it, feed), invoke_with(theirs, feed)):
            np.testing.assert_array_equal(x, y)
    assert calls == [0, 0]
    # the loop's input computed by a node whose output shape is known only at run time: the memo stays
    b = ModelBuilder()
    i0, x0 = b.add_input("i", F32, []), b.add_input("x", F32, [2], shape_signature=[-1])
    xs = b.add_tensor("xs", F32, [2], shape_signature=[-1])
    b.add_op("RESHAPE", [x0, b.add_input("shape", np.int32, [1])], [xs])
    outs = [b.add_tensor("oi", F32, []), b.add_tensor("ox", F32, [2], shape_signature=[-1])]
    cond, body = _loop(b, 3.0, _grow, [[2]])
    b.add_op("WHILE", [i0, xs], outs, options={"cond_subgraph_index": cond, "body_subgraph_index": body})
    b.mark_output(outs[1])
    dyn = Interpreter(model_content=b.build())
    dyn.allocate_tensors()
    theirs = official_interpreter(b.build())
    for s in (0.0, 2.0, 2.0):
        feed = [np.array(s, F32), np.array([1.0, -2.0], F32), np.array([2], np.int32)]
        for x, y in zip(invoke_with(dyn, feed), invoke_with(theirs, feed)):
            np.testing.assert_array_equal(x, y)
    assert GraphRuntime.run_dynamic in [getattr(fn, "__func__", None) for fn, _ in dyn.runtime.graph(0).program]
    assert calls.count(1) == 3  # (node 1, the WHILE: every run through the memo)


def test_growing_loop_replay_error_names_the_subgraph(official):
    """A kernel raising inside the compiled replay (GATHER's index checked at run time) gives invoke()'s error
    naming the body subgraph, as the host loop does, and the interpreter stays usable."""
    it = Interpreter(model_content=_grow_gather_model())
    it.allocate_tensors()
    feed = [np.array(0.0, F32), np.array([1.0, -2.0], F32), np.zeros(1, F32), np.array([1], np.int32)]
    first = invoke_with(it, feed)
    theirs = official_interpreter(_grow_gather_model())
    for x, y in zip(first, invoke_with(theirs, feed)):
        np.testing.assert_array_equal(x, y)
    with pytest.raises(RuntimeError, match=r"GATHER: index out of range[\s\S]*subgraph 2"):
        invoke_with(it, feed[:3] + [np.array([2], np.int32)])  # x has 2 elements at the first iteration
    for x, y in zip(invoke_with(it, feed), first):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("body", list(_BODIES))
def test_iteration_cap_names_the_node(body):
    it = Interpreter(model_content=_while_model(_BODIES[body], [[2]], limit=1e9))
    it.allocate_tensors()
    assert it.runtime.control.paths[(0, 0)][0] == "compiled"
    it.set_tensor(0, np.array(0.0, F32))
    it.set_tensor(1, np.ones(2, F32))
    it.max_while_iterations = 50
    with pytest.raises(RuntimeError, match=r"WHILE \(node 0\) did not finish within 50 iterations"):
        it.invoke()
    it.max_while_iterations = None
    it.set_tensor(0, np.array(1e9 - 3, F32))
    it.invoke()  # usable afterwards


@pytest.mark.parametrize("body", list(_BODIES))
@pytest.mark.parametrize("cap", [15, 16, 17, 31, 32, 33])
def test_iteration_cap_counts_as_the_host_path(monkeypatch, body, cap):
    """A loop of 32 iterations under caps around it and around the looping runner's batches (16 iterations between
    polls): the compiled loop stops (or finishes) exactly where the host path does."""
    data = _while_model(_BODIES[body], [[2]], limit=32.0)
    got = {}
    for mode in ("compiled", "python"):
        monkeypatch.setenv("LITE_NUMBA_EXECUTOR", mode)
        it = Interpreter(model_content=data)
        it.allocate_tensors()
        it.max_while_iterations = cap
        try:
            got[mode] = invoke_with(it, [np.array(0.0, F32), np.array([0.5, -0.25], F32)])
        except RuntimeError as e:
            assert f"WHILE (node 0) did not finish within {cap} iterations" in str(e)
            got[mode] = None
    assert (got["compiled"] is None) == (cap <= 32)
    assert (got["python"] is None) == (cap <= 32)
    if got["compiled"] is not None:
        for x, y in zip(got["compiled"], got["python"]):
            np.testing.assert_array_equal(x, y)


def test_body_changing_a_fixed_shape_is_refused_naming_a_node():
    """The loop's outputs are declared [2] and read as such; the body doubles the variable: a clear error naming
    the node that cannot take the shape (as the official runtime's), never a crash."""
    b = ModelBuilder()
    ins = [b.add_input("i", F32, []), b.add_input("x", F32, [2])]
    outs = [b.add_tensor("oi", F32, []), b.add_tensor("ox", F32, [2])]
    cond, body = _loop(b, 3.0, _grow, [[2]])
    b.add_op("WHILE", ins, outs, options={"cond_subgraph_index": cond, "body_subgraph_index": body})
    y = b.add_tensor("y", F32, [2])
    b.add_op("ADD", [outs[1], b.add_const("k", np.ones(2, F32))], [y])
    b.mark_output(y)
    it = Interpreter(model_content=b.build())
    with pytest.raises(RuntimeError, match=r"Node number 1 \(ADD\) failed to prepare"):
        it.allocate_tensors()
        it.set_tensor(0, np.array(0.0, F32))
        it.set_tensor(1, np.ones(2, F32))
        it.invoke()


_CTRL_C = """
import sys, numpy as np
sys.path.insert(0, {tests!r})
from test_compiled_control_flow import _while_model, _BODIES, _ONE_RUNNER
from lite_numba import Interpreter
it = Interpreter(model_content=_while_model(_BODIES[{body!r}], [[2]], limit=float("inf")))
it.allocate_tensors()
path, why = it.runtime.control.paths[(0, 0)]
assert path == "compiled" and (_ONE_RUNNER in why) == ({body!r} == "in_place"), why
it.set_tensor(0, np.array(0.0, np.float32))
it.set_tensor(1, np.ones(2, np.float32))
print("invoking", flush=True)
try:
    it.invoke()
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(3)
"""


@pytest.mark.parametrize("body", list(_BODIES))
def test_ctrl_c_interrupts_a_compiled_loop_that_never_ends(body):
    """SIGINT reaches a compiled loop that would never end as KeyboardInterrupt (it polls the signal handlers every
    ~2^24 cycles). No wall time is asserted: under load the child's exit alone can take a second; a loop that did not
    poll would hang until the last timeout; the signal is sent again every 10 s, up to six times. The child gets
    SIGINT's default disposition, as a program started from a terminal has: a test run started in the background by a
    non-interactive shell inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler (a clean-clone
    .ci/run started with `&` failed so)."""
    src = textwrap.dedent(_CTRL_C.format(tests=os.path.dirname(__file__), body=body))
    proc = subprocess.Popen([sys.executable, "-c", src], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    sent = 0
    try:
        line = proc.stdout.readline()
        assert line.strip() == "invoking", (line, proc.stderr.read() if proc.poll() is not None else "")
        time.sleep(0.5)  # inside the compiled loop by now
        out = err = None
        while out is None and sent < 6:
            proc.send_signal(signal.SIGINT)
            sent += 1
            try:
                out, err = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                pass
    finally:
        if proc.poll() is None:
            proc.kill()
    assert out is not None, f"the compiled loop did not end after {sent} SIGINTs"
    assert proc.returncode == 3 and "interrupted" in out, (proc.returncode, out, err, sent)
