"""Dynamic shapes: graphs whose shapes depend on values computed at run time, and input resizes.

Nodes that read a non-constant input with ctx.value() (FILL's dims, RESHAPE's shape, RANGE's bounds, ONE_HOT's
depth, TOPK's k, WHERE's condition) are re-prepared at invoke time, and so is everything downstream of them. These
tests chain such nodes with ordinary ones, invoke repeatedly with different values and shapes, and resize inputs
(resize_tensor_input + allocate_tensors), comparing every result with the official runtime.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import invoke_both, official_interpreter, require_official

require_official()


class Both:
    """Our interpreter and the official one on the same model, driven in lockstep."""

    def __init__(self, data: bytes):
        self.ours = Interpreter(model_content=data)
        self.ours.allocate_tensors()
        self.theirs = official_interpreter(data)

    def resize(self, *shapes: tuple[int, list[int]]) -> None:
        """resize_tensor_input(input i, shape) for every (i, shape), then allocate_tensors."""
        for it in (self.ours, self.theirs):
            for i, shape in shapes:
                it.resize_tensor_input(it.get_input_details()[i]["index"], list(shape))
            it.allocate_tensors()

    def run(self, *inputs: np.ndarray) -> list[np.ndarray]:
        ours, theirs = invoke_both(self.ours, self.theirs, inputs)
        oshapes, rshapes = ([tuple(int(v) for v in d["shape"]) for d in it.get_output_details()]
                            for it in (self.ours, self.theirs))
        for o, r, oshape, rshape in zip(ours, theirs, oshapes, rshapes):
            assert oshape == rshape == o.shape == r.shape, (oshape, rshape, o.shape, r.shape)
            assert o.dtype == r.dtype
            if o.dtype.kind == "f":
                assert np.allclose(o, r, rtol=1e-6, atol=1e-6, equal_nan=True), (o, r)
            else:
                assert np.array_equal(o, r), (o, r)
        return ours


def test_shape_fill_add_resize():
    """SHAPE -> FILL -> ADD with the batch changed by resize_tensor_input (static after each allocate)."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 4], shape_signature=[-1, 4])
    s = b.add_tensor("s", np.int32, [2])
    v = b.add_const("v", np.array(0.5, np.float32))
    f = b.add_tensor("f", np.float32, [1, 4], shape_signature=[-1, 4])
    y = b.add_tensor("y", np.float32, [1, 4], shape_signature=[-1, 4])
    b.add_op("SHAPE", [x], [s], options={"out_type": "INT32"})
    b.add_op("FILL", [s, v], [f])
    b.add_op("ADD", [x, f], [y])
    b.mark_output(y)
    b.mark_output(s)
    both = Both(b.build())
    rng = np.random.default_rng(0)
    both.run(rng.normal(size=(1, 4)).astype(np.float32))
    for batch in (3, 1, 5):
        both.resize((0, [batch, 4]))
        out = both.run(rng.normal(size=(batch, 4)).astype(np.float32))
        assert out[0].shape == (batch, 4)


def test_reshape_by_computed_shape():
    """RESHAPE(flat, SHAPE(x)): the target shape is computed; x's batch changes between allocations."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 3], shape_signature=[-1, 3])
    flat = b.add_input("flat", np.float32, [6], shape_signature=[-1])
    s = b.add_tensor("s", np.int32, [2])
    r = b.add_tensor("r", np.float32, [2, 3], shape_signature=[-1, 3])
    y = b.add_tensor("y", np.float32, [2, 3], shape_signature=[-1, 3])
    b.add_op("SHAPE", [x], [s], options={"out_type": "INT32"})
    b.add_op("RESHAPE", [flat, s], [r])
    b.add_op("MUL", [r, x], [y])
    b.mark_output(y)
    both = Both(b.build())
    rng = np.random.default_rng(1)
    both.run(rng.normal(size=(2, 3)).astype(np.float32), rng.normal(size=6).astype(np.float32))
    for batch in (4, 1):
        both.resize((0, [batch, 3]), (1, [batch * 3]))
        both.run(rng.normal(size=(batch, 3)).astype(np.float32), rng.normal(size=batch * 3).astype(np.float32))


def test_range_from_inputs_chain():
    """RANGE from run-time scalars -> CAST -> MUL -> RESHAPE(-1, 1): every invoke has its own length."""
    b = ModelBuilder()
    start, limit, delta = (b.add_input(n, np.int32, []) for n in ("start", "limit", "delta"))
    r = b.add_tensor("r", np.int32, [1], shape_signature=[-1])
    c = b.add_tensor("c", np.float32, [1], shape_signature=[-1])
    k = b.add_const("k", np.array([0.25], np.float32))
    m = b.add_tensor("m", np.float32, [1], shape_signature=[-1])
    shape = b.add_const("shape", np.array([-1, 1], np.int32))
    y = b.add_tensor("y", np.float32, [1, 1], shape_signature=[-1, 1])
    b.add_op("RANGE", [start, limit, delta], [r])
    b.add_op("CAST", [r], [c])
    b.add_op("MUL", [c, k], [m])
    b.add_op("RESHAPE", [m, shape], [y])
    b.mark_output(y)
    b.mark_output(r)
    both = Both(b.build())
    for s, lim, d in ((0, 5, 1), (10, -3, -4), (7, 7, 2), (-2, 30, 3), (0, 1, 1)):
        out = both.run(np.array(s, np.int32), np.array(lim, np.int32), np.array(d, np.int32))
        assert out[1].shape == (len(range(s, lim, d)),)


def test_range_float_and_int64_runtime():
    for dtype, vals in ((np.float32, (0.5, 3.7, 0.3)), (np.int64, (2**33, 2**33 + 10, 3))):
        b = ModelBuilder()
        ins = [b.add_input(n, dtype, []) for n in ("start", "limit", "delta")]
        r = b.add_tensor("r", dtype, [1], shape_signature=[-1])
        b.add_op("RANGE", ins, [r], version=2 if dtype == np.int64 else 1)
        b.mark_output(r)
        both = Both(b.build())
        both.run(*(np.array(v, dtype) for v in vals))
        both.run(np.array(vals[1], dtype), np.array(vals[0], dtype), np.array(-vals[2], dtype))


def test_one_hot_and_topk_runtime_values():
    """ONE_HOT depth and TOPK k as inputs, with static ops (ADD, CAST) downstream."""
    b = ModelBuilder()
    idx = b.add_input("idx", np.int32, [4])
    depth = b.add_input("depth", np.int32, [])
    x = b.add_input("x", np.float32, [3, 8])
    k = b.add_input("k", np.int32, [])
    on, off = b.add_const("on", np.array(1.0, np.float32)), b.add_const("off", np.array(0.0, np.float32))
    oh = b.add_tensor("oh", np.float32, [4, 1], shape_signature=[4, -1])
    oh2 = b.add_tensor("oh2", np.float32, [4, 1], shape_signature=[4, -1])
    vals = b.add_tensor("vals", np.float32, [3, 1], shape_signature=[3, -1])
    ids = b.add_tensor("ids", np.int32, [3, 1], shape_signature=[3, -1])
    idsf = b.add_tensor("idsf", np.float32, [3, 1], shape_signature=[3, -1])
    b.add_op("ONE_HOT", [idx, depth, on, off], [oh], options={"axis": -1})
    b.add_op("ADD", [oh, oh], [oh2])
    b.add_op("TOPK_V2", [x, k], [vals, ids])
    b.add_op("CAST", [ids], [idsf])
    for t in (oh2, vals, idsf):
        b.mark_output(t)
    both = Both(b.build())
    rng = np.random.default_rng(4)
    for d, kk in ((5, 3), (2, 8), (7, 1), (0, 0)):
        both.run(rng.integers(-1, 6, 4).astype(np.int32), np.array(d, np.int32),
                 rng.integers(-3, 3, (3, 8)).astype(np.float32), np.array(kk, np.int32))


def test_topk_runtime_k_with_scratch():
    """A dynamic node that needs a scratch buffer (TOPK with k > 16 sorts the row in a temporary)."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 30])
    k = b.add_input("k", np.int32, [])
    vals = b.add_tensor("vals", np.float32, [2, 1], shape_signature=[2, -1])
    ids = b.add_tensor("ids", np.int32, [2, 1], shape_signature=[2, -1])
    b.add_op("TOPK_V2", [x, k], [vals, ids])
    b.mark_output(vals)
    b.mark_output(ids)
    both = Both(b.build())
    rng = np.random.default_rng(9)
    for kk in (20, 30, 3, 17):
        both.run(rng.integers(-5, 5, (2, 30)).astype(np.float32), np.array(kk, np.int32))


def test_where_then_cast():
    """WHERE's output row count follows the condition's values; CAST downstream."""
    b = ModelBuilder()
    cond = b.add_input("cond", np.bool_, [3, 4])
    w = b.add_tensor("w", np.int64, [1, 2], shape_signature=[-1, 2])
    c = b.add_tensor("c", np.int32, [1, 2], shape_signature=[-1, 2])
    b.add_op("WHERE", [cond], [w])
    b.add_op("CAST", [w], [c])
    b.mark_output(c)
    both = Both(b.build())
    rng = np.random.default_rng(5)
    for p in (0.5, 0.0, 1.0, 0.2):
        both.run(rng.random((3, 4)) < p)


def test_fill_from_runtime_dims_then_resize():
    """FILL dims as an input (dynamic) next to a resizable input; both kinds of change in one interpreter."""
    b = ModelBuilder()
    dims = b.add_input("dims", np.int64, [2])
    x = b.add_input("x", np.float32, [1, 3], shape_signature=[-1, 3])
    v = b.add_const("v", np.array(2.0, np.float32))
    f = b.add_tensor("f", np.float32, [1, 3], shape_signature=[-1, -1])
    y = b.add_tensor("y", np.float32, [1, 3], shape_signature=[-1, 3])
    b.add_op("FILL", [dims, v], [f])
    b.add_op("MUL", [f, x], [y])
    b.mark_output(y)
    b.mark_output(f)
    both = Both(b.build())
    rng = np.random.default_rng(6)
    both.run(np.array([1, 3], np.int64), rng.normal(size=(1, 3)).astype(np.float32))
    both.run(np.array([1, 1], np.int64), rng.normal(size=(1, 3)).astype(np.float32))  # broadcast
    both.resize((1, [4, 3]))
    both.run(np.array([4, 3], np.int64), rng.normal(size=(4, 3)).astype(np.float32))
    both.run(np.array([4, 1], np.int64), rng.normal(size=(4, 3)).astype(np.float32))


def test_runtime_value_errors_at_invoke():
    """Bad run-time values fail at invoke with an error naming the op (the official runtime fails too)."""
    b = ModelBuilder()
    ins = [b.add_input(n, np.int32, []) for n in ("start", "limit", "delta")]
    r = b.add_tensor("r", np.int32, [1], shape_signature=[-1])
    b.add_op("RANGE", ins, [r])
    b.mark_output(r)
    it = Interpreter(model_content=b.build())
    it.allocate_tensors()
    for i, v in enumerate((0, 5, 0)):
        it.set_tensor(i, np.array(v, np.int32))
    with pytest.raises((ValueError, RuntimeError), match="RANGE"):
        it.invoke()
    # the interpreter stays usable with good values
    it.set_tensor(2, np.array(2, np.int32))
    it.invoke()
    assert it.get_tensor(it.get_output_details()[0]["index"]).tolist() == [0, 2, 4]
    b = ModelBuilder()
    dims = b.add_input("dims", np.int32, [2])
    v = b.add_const("v", np.array(1, np.int32))
    f = b.add_tensor("f", np.int32, [1, 1], shape_signature=[-1, -1])
    b.add_op("FILL", [dims, v], [f])
    b.mark_output(f)
    it = Interpreter(model_content=b.build())
    it.allocate_tensors()
    it.set_tensor(0, np.array([2, -3], np.int32))
    with pytest.raises((ValueError, RuntimeError), match="FILL"):
        it.invoke()


def _shared_model(name: str) -> bytes:
    """A converter-made model: the bundled copy (tests/data), else ../shared/models."""
    from conftest import model_path

    return model_path(name).read_bytes()


@pytest.mark.parametrize("name,shape", [("op_shape_fill_range_dynamic", [3, 4]), ("op_expand_dims_dynamic", [5, 4]),
                                        ("op_squeeze_dynamic", [3, 1, 2]), ("dynamic_batch_mlp", [3, 8])])
def test_shared_dynamic_models_resized(name, shape):
    """The converter's dynamic-batch models, at their stored batch and resized."""
    both = Both(_shared_model(name))
    rng = np.random.default_rng(8)
    d = both.ours.get_input_details()[0]
    both.run(rng.normal(size=tuple(d["shape"])).astype(np.float32))
    both.resize((0, shape))
    both.run(rng.normal(size=shape).astype(np.float32))


def test_dynamic_batch_mlp_stored_reference():
    """dynamic_batch_mlp resized to batch 3 matches the stored official output (b3_* keys)."""
    data = _shared_model("dynamic_batch_mlp")
    ref = np.load(Path(__file__).parent / "data" / "models" / "ref" / "dynamic_batch_mlp.npz")
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    it.resize_tensor_input(0, [3, 8])
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], ref["b3_input_0"])
    it.invoke()
    out = it.get_tensor(it.get_output_details()[0]["index"])
    assert out.shape == ref["nodelegate_b3_output_0"].shape
    assert np.allclose(out, ref["nodelegate_b3_output_0"], rtol=1e-5, atol=1e-6)


# --- speculation: a static, guarded plan for the values the dynamic nodes saw -------------------------------------


def test_stable_values_run_as_one_compiled_plan():
    """SHAPE -> ... -> FILL/RANGE/RESHAPE whose values depend only on the input shape: from the second invoke the
    runtime runs a specialised plan (no node re-prepared in Python) and still matches the official runtime."""
    both = Both(_shared_model("op_shape_fill_range_dynamic"))
    rt = both.ours.runtime.main
    rng = np.random.default_rng(5)
    x = rng.normal(size=(1, 4)).astype(np.float32)
    both.run(x)
    assert not rt.specialised and rt.dynamic_nodes
    for _ in range(3):
        both.run(rng.normal(size=(1, 4)).astype(np.float32))
        assert rt.specialised and not rt.dynamic_nodes
    # a resize goes back to the general plan, then specialises again for the new shape
    both.resize((0, [3, 4]))
    both.run(rng.normal(size=(3, 4)).astype(np.float32))
    assert not rt.specialised
    both.run(rng.normal(size=(3, 4)).astype(np.float32))
    assert rt.specialised


def test_changed_values_fall_back_to_the_general_plan():
    """RANGE bounds from inputs: a guard notices changed values, that invoke runs the general plan (same results
    as the official runtime), speculation resumes when two invokes agree and stops after repeated failures."""
    b = ModelBuilder()
    start, limit, delta = (b.add_input(n, np.int32, []) for n in ("start", "limit", "delta"))
    r = b.add_tensor("r", np.int32, [1], shape_signature=[-1])
    c = b.add_tensor("c", np.float32, [1], shape_signature=[-1])
    k = b.add_const("k", np.array([0.5], np.float32))
    m = b.add_tensor("m", np.float32, [1], shape_signature=[-1])
    b.add_op("RANGE", [start, limit, delta], [r])
    b.add_op("CAST", [r], [c])
    b.add_op("ADD", [c, k], [m])
    b.mark_output(m)
    both = Both(b.build())
    rt = both.ours.runtime.main

    def run(s, lim, d):
        out = both.run(np.array(s, np.int32), np.array(lim, np.int32), np.array(d, np.int32))
        assert out[0].shape == (len(range(s, lim, d)),)

    run(0, 5, 1)
    run(0, 5, 1)
    assert rt.specialised
    run(2, 9, 3)  # guard fails: this invoke runs the general plan
    assert not rt.specialised and rt._spec_failures == 1
    run(2, 9, 3)
    run(2, 9, 3)  # two general invokes agreed: specialised again
    assert rt.specialised
    for i in range(4):  # values that never repeat: no new specialisation, hence no new failure
        run(i, 20 + i, 1 + i % 3)
    assert not rt.specialised and rt._spec_failures == 2
    for i in range(2 * rt.SPEC_MAX_FAILURES):  # each value twice: specialise, fail, ... until it gives up
        run(i, 10 + i, 1)
        run(i, 10 + i, 1)
    assert not rt.specialised and rt._spec_failures == rt.SPEC_MAX_FAILURES


@pytest.mark.parametrize("executor", ["python", "compiled"])
def test_dynamic_nodes_are_not_re_prepared_when_nothing_changed(monkeypatch, executor):
    """Host and dynamic nodes keep their preparation while their input arrays, shapes and read values hold
    (stateful_resource_variable: READ_VARIABLE -> MUL/ADD -> ASSIGN_VARIABLE), with the official results. On the
    host path (LITE_NUMBA_EXECUTOR=python) the variable nodes are dynamic: prepared at the first invoke, then kept;
    compiled, they are static segments of the runner (issue 38): no node is prepared by any invoke."""
    from lite_numba.runtime.executor import GraphRuntime

    if executor == "python":
        monkeypatch.setenv("LITE_NUMBA_EXECUTOR", "python")
    data = _shared_model("stateful_resource_variable")
    ours = Interpreter(model_content=data)
    ours.allocate_tensors()
    theirs = official_interpreter(data)
    prepared = []
    real = GraphRuntime._prepare_node
    monkeypatch.setattr(GraphRuntime, "_prepare_node", lambda self, node: prepared.append(node.index) or
                        real(self, node))
    x = np.ones(ours.get_input_details()[0]["shape"], np.float32)
    for step in range(4):
        for it in (ours, theirs):
            it.set_tensor(it.get_input_details()[0]["index"], x * (step + 1))
            it.invoke()
        for d_ours, d_theirs in zip(ours.get_output_details(), theirs.get_output_details()):
            np.testing.assert_allclose(ours.get_tensor(d_ours["index"]), theirs.get_tensor(d_theirs["index"]),
                                       rtol=1e-6)
        if step == 0 and executor == "python":
            assert prepared
        else:
            assert prepared == [], f"invoke {step} re-prepared nodes {prepared}"
        prepared.clear()


def test_resize_back_to_a_shape_seen_reuses_its_plan(monkeypatch):
    """A streaming pipeline resizes its input on every call (runtime/control/plan_cache.py): resized back to a shape
    it has run, subgraph 0 gets that shape's plan back with no node prepared again; outputs equal the official
    runtime's at every step, and a resize after reset_all_variables / a fresh shape still prepares."""
    from lite_numba.runtime.executor import GraphRuntime

    both = Both(_shared_model("dynamic_batch_mlp"))
    prepared = []
    real = GraphRuntime._prepare_node
    monkeypatch.setattr(GraphRuntime, "_prepare_node", lambda self, node: prepared.append(node.index) or
                        real(self, node))
    rng = np.random.default_rng(3)
    seen = {int(both.ours.get_input_details()[0]["shape"][0])}  # (allocated at its stored batch)
    for batch in (3, 5, 3, 1, 5, 3, 7, 2):
        prepared.clear()
        both.resize((0, [batch, 8]))
        x = rng.normal(size=(batch, 8)).astype(np.float32)
        both.run(x)
        both.run(x * 2)  # (the restored plan's arena is live: a second invoke on it)
        if batch in seen:
            assert prepared == [], f"batch {batch} seen before, yet nodes {prepared} were prepared again"
        else:
            assert prepared, f"batch {batch} is new: its nodes must be prepared"
        seen.add(batch)
    # ModelRuntime.invalidate drops the plans
    both.ours.runtime.invalidate()
    prepared.clear()
    both.resize((0, [5, 8]))
    both.run(rng.normal(size=(5, 8)).astype(np.float32))
    assert prepared
