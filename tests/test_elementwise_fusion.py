"""[PAD of the last axis ->] float ADD / SUB / MUL [-> RELU-family] as one FUSED_ELEMENTWISE node
(lite_numba/runtime/fusion.py fuse_elementwise, kernels/elementwise/fused.py).

Each pattern runs fused and unfused (experimental_preserve_all_tensors turns the rewrites off): the two give the same
bytes, also on inputs holding NaN, infinities, -0.0 and values past the activation's range, and both match the
official runtime. Patterns the rewrite must leave alone (an intermediate that is a graph output, a PAD read twice, a
broadcast, a pad of another axis, a non-finite fill) stay unfused and correct. With two threads the parallel driver
gives the one-thread bytes.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import kernel_names
from lite_numba.kernels.base import threads

from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close, require_official, run_interpreter, run_official

require_official()


def _model(shape, op="ADD", act="RELU", pad=None, pad_side=0, pad_op="PAD", fill=0.0, fused_act="NONE",
           second_reader=False, pinned_sum=False, other_shape=None):
    """inputs a, b -> [PAD(a) on the last axis by pad = (before, after)] -> op (the padded operand at pad_side)
    -> [act]; returns the model's bytes and its input shapes."""
    mb = ModelBuilder()
    f32 = np.float32
    full = list(shape)
    a_shape = full[:-1] + [full[-1] - sum(pad)] if pad else full
    a = mb.add_input("a", f32, a_shape)
    b = mb.add_input("b", f32, other_shape or full)
    lhs = a
    if pad:
        pv = mb.add_const("paddings", np.array([[0, 0]] * (len(full) - 1) + [list(pad)], np.int32))
        lhs = mb.add_tensor("padded", f32, full)
        ins = [a, pv] + ([mb.add_const("fill", np.array([fill], f32))] if pad_op == "PADV2" else [])
        mb.add_op(pad_op, ins, [lhs])
        if second_reader:
            z = mb.add_tensor("z", f32, full)
            mb.add_op("NEG", [lhs], [z])
            mb.mark_output(z)
    s = mb.add_tensor("s", f32, full)
    operands = [lhs, b] if pad_side == 0 else [b, lhs]
    mb.add_op(op, operands, [s], options={"fused_activation_function": fused_act})
    out = s
    if act:
        out = mb.add_tensor("out", f32, full)
        mb.add_op(act, [s], [out])
    mb.mark_output(out)
    if pinned_sum and act:
        mb.mark_output(s)
    return mb.build(), [a_shape, other_shape or full]


def _inputs(shapes, seed=0, special=False):
    rng = np.random.default_rng(seed)
    xs = [(rng.standard_normal(s) * 4).astype(np.float32) for s in shapes]
    if special:
        vals = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 3e38, -3e38, 7.0, -7.0, 1e-45], np.float32)
        for x in xs:
            flat = x.reshape(-1)
            idx = rng.choice(flat.size, size=min(flat.size, 3 * vals.size), replace=False)
            flat[idx] = np.resize(vals, idx.size)
    return xs


def _fused_ops(it) -> list[str]:
    return [n.op_name for n in it.runtime.graph(0).plan.nodes if n.op_name == "FUSED_ELEMENTWISE"]


CASES = [  # (shape, op, act, pad, pad_side, pad_op, fill, fused_act)
    ((1, 16, 16, 24), "ADD", "RELU", None, 0, "PAD", 0.0, "NONE"),
    ((2, 9, 7, 13), "ADD", "RELU6", None, 0, "PAD", 0.0, "NONE"),
    ((1, 8, 8, 28), "ADD", "RELU", (0, 4), 0, "PAD", 0.0, "NONE"),  # BlazeFace's channel pad
    ((1, 8, 8, 28), "ADD", "RELU", (0, 4), 1, "PAD", 0.0, "NONE"),  # the padded operand second
    ((3, 5, 21), "SUB", "RELU_N1_TO_1", (2, 3), 1, "PADV2", -1.5, "NONE"),
    ((4, 37), "MUL", "RELU_0_TO_1", (5, 0), 0, "PADV2", 0.25, "RELU6"),
    ((2, 6, 6, 20), "ADD", "", (0, 4), 0, "PAD", 0.0, "RELU"),  # a pad and no activation node
    ((1, 64, 64, 24), "ADD", "RELU", (0, 4), 0, "PAD", 0.0, "NONE"),  # large enough for the workers
    ((1, 64, 64, 24), "ADD", "RELU", None, 0, "PAD", 0.0, "NONE"),
]


def _ids(c):
    return f"{c[1]}-{c[2] or 'noact'}-{'x'.join(map(str, c[0]))}-pad{c[3]}-{c[4]}-{c[5]}"


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_fused_matches_unfused_and_official(case):
    shape, op, act, pad, side, pad_op, fill, fused_act = case
    data, shapes = _model(shape, op, act, pad, side, pad_op, fill, fused_act)
    xs = _inputs(shapes)
    (ours,), it = run_interpreter(data, xs)
    assert _fused_ops(it) == ["FUSED_ELEMENTWISE"]
    (plain,), it0 = run_interpreter(data, xs, experimental_preserve_all_tensors=True)
    assert _fused_ops(it0) == []
    assert ours.tobytes() == plain.tobytes()
    (ref,) = run_official(data, xs)
    assert_close(ours, ref, family="elementwise")
    # special values: the same bytes both ways (NaN, infinities, -0.0, values past the clamps)
    xs = _inputs(shapes, seed=1, special=True)
    (ours,), _ = run_interpreter(data, xs)
    (plain,), _ = run_interpreter(data, xs, experimental_preserve_all_tensors=True)
    assert ours.tobytes() == plain.tobytes()


@pytest.mark.parametrize("case", [c for c in CASES if np.prod(c[0]) >= 2 * 8 * 8 * 28], ids=_ids)
def test_two_threads_give_the_one_thread_bytes(case, monkeypatch):
    shape, op, act, pad, side, pad_op, fill, fused_act = case
    monkeypatch.setattr(threads, "MIN_ELEMENTS", 0)
    data, shapes = _model(shape, op, act, pad, side, pad_op, fill, fused_act)
    xs = _inputs(shapes, seed=2, special=True)
    (one,), _ = run_interpreter(data, xs, num_threads=1)
    (two,), it = run_interpreter(data, xs, num_threads=2)
    calls = kernel_names(it)
    assert "fused_rows_par" in calls
    assert one.tobytes() == two.tobytes()


LEFT_ALONE = {
    "sum is an output": dict(pinned_sum=True),
    "pad read twice": dict(pad=(0, 4), second_reader=True, act=""),
    "broadcast": dict(other_shape=[1, 1, 1, 24]),
    "non-finite fill": dict(pad=(0, 4), pad_op="PADV2", fill=np.inf, act=""),
}


@pytest.mark.parametrize("name", list(LEFT_ALONE))
def test_patterns_left_alone(name):
    kw = {"act": "RELU", **LEFT_ALONE[name]}
    data, shapes = _model((1, 6, 6, 24), **kw)
    xs = _inputs(shapes, seed=3)
    outs, it = run_interpreter(data, xs)
    assert _fused_ops(it) == []
    for o, r in zip(outs, run_official(data, xs)):
        assert_close(o, r, family="elementwise")


def test_spatial_pad_is_left_to_the_pad_kernel():
    mb = ModelBuilder()
    a = mb.add_input("a", np.float32, [1, 4, 4, 8])
    b = mb.add_input("b", np.float32, [1, 6, 4, 8])
    p = mb.add_tensor("p", np.float32, [1, 6, 4, 8])
    mb.add_op("PAD", [a, mb.add_const("pads", np.array([[0, 0], [1, 1], [0, 0], [0, 0]], np.int32))], [p])
    s = mb.add_tensor("s", np.float32, [1, 6, 4, 8])
    mb.add_op("ADD", [p, b], [s])
    mb.mark_output(s)
    data = mb.build()
    xs = _inputs([[1, 4, 4, 8], [1, 6, 4, 8]], seed=4)
    (ours,), it = run_interpreter(data, xs)
    assert _fused_ops(it) == []  # an ADD with neither a last-axis pad nor an activation: nothing to fuse
    assert_close(ours, run_official(data, xs)[0], family="elementwise")


def test_resized_batch_still_fused_and_correct():
    data, shapes = _model((1, 8, 8, 28), pad=(0, 4))
    big = [[3] + s[1:] for s in shapes]
    xs = _inputs(big, seed=5)
    (ours,), it = run_interpreter(data, xs)
    assert _fused_ops(it) == ["FUSED_ELEMENTWISE"]
    assert_close(ours, run_official(data, xs)[0], family="elementwise")
