"""RESHAPE, SQUEEZE, EXPAND_DIMS and BITCAST as views (issue 30): the output lives in its input's storage and no copy
runs, unless the graph forbids it (a graph input or output, a constant, a variable, a called subgraph's argument),
where the copy stays. Outputs against the official runtime."""

from __future__ import annotations

import numpy as np
import pytest

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import official_interpreter, require_official

require_official()


def _run(model: bytes, inputs, **kw):
    ours, ref = Interpreter(model_content=model, **kw), official_interpreter(model)
    ours.allocate_tensors()
    for it in (ours, ref):
        for d, v in zip(it.get_input_details(), inputs):
            it.set_tensor(d["index"], v)
        it.invoke()
    for d, r in zip(ours.get_output_details(), ref.get_output_details()):
        np.testing.assert_array_equal(ours.get_tensor(d["index"]), ref.get_tensor(r["index"]))
    return ours


def _calls(ours, tensor: int) -> int:
    """Scheduled calls of the node writing `tensor` (main graph)."""
    rt = ours.runtime.main
    node = next(n for n in rt.plan.nodes if tensor in n.outputs)
    return len(rt.prepared[node.index].calls)


def test_reshape_chain_is_one_storage():
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 3, 4])
    t = b.add_tensor("t", np.float32, [2, 3, 4])
    b.add_op("ADD", [x, b.add_const("one", np.ones((2, 3, 4), np.float32))], [t])
    chain = []
    r = b.add_tensor("r1", np.float32, [6, 4])
    b.add_op("RESHAPE", [t, b.add_const("s1", np.array([6, 4], np.int32))], [r])
    chain.append(r)
    r = b.add_tensor("r2", np.float32, [1, 6, 4])
    b.add_op("EXPAND_DIMS", [chain[-1], b.add_const("axis", np.array([0], np.int32))], [r])
    chain.append(r)
    r = b.add_tensor("r3", np.float32, [6, 4])
    b.add_op("SQUEEZE", [chain[-1]], [r], options={"squeeze_dims": [0]})
    chain.append(r)
    r = b.add_tensor("r4", np.int32, [6, 4])
    b.add_op("BITCAST", [chain[-1]], [r])
    chain.append(r)
    r = b.add_tensor("r5", np.float32, [6, 4])
    b.add_op("BITCAST", [chain[-1]], [r])
    chain.append(r)
    y = b.add_tensor("y", np.float32, [6, 4])
    b.add_op("MUL", [chain[-1], chain[0]], [y])  # the chain's first link read again after the last
    o = b.add_tensor("o", np.float32, [24])
    b.add_op("RESHAPE", [y, b.add_const("s2", np.array([24], np.int32))], [o])
    b.mark_output(o)
    x_in = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    ours = _run(b.build(), [x_in])
    np.testing.assert_array_equal(ours.get_tensor(o), ((x_in + 1) ** 2).reshape(-1))
    assert all(ours.runtime.shares_storage(t, c) for c in chain)
    assert all(_calls(ours, c) == 0 for c in chain)  # no copy runs
    assert not ours.runtime.shares_storage(y, o) and _calls(ours, o) == 1  # a graph output: copied
    # kept tensors: no views at all
    kept = _run(b.build(), [x_in], experimental_preserve_all_tensors=True)
    assert not kept.runtime.main.aliases and _calls(kept, chain[0]) == 1
    np.testing.assert_array_equal(kept.get_tensor(chain[2]), (x_in + 1).reshape(6, 4))


def test_reshape_of_a_graph_input_is_a_copy():
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 6])
    r = b.add_tensor("r", np.float32, [12])
    b.add_op("RESHAPE", [x, b.add_const("s", np.array([12], np.int32))], [r])
    y = b.add_tensor("y", np.float32, [12])
    b.add_op("ADD", [r, r], [y])
    b.mark_output(y)
    ours = _run(b.build(), [np.arange(12, dtype=np.float32).reshape(2, 6)])
    assert not ours.runtime.shares_storage(x, r) and _calls(ours, r) == 1


@pytest.mark.parametrize("read_after", [False, True])
def test_in_place_update_of_a_view(read_after):
    """t -> RESHAPE r -> DYNAMIC_UPDATE_SLICE(r) y: y may live in the class of t and r only when neither is read
    after the update."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [6, 4])
    u = b.add_input("u", np.float32, [1, 12])
    t = b.add_tensor("t", np.float32, [6, 4])
    b.add_op("ADD", [x, b.add_const("one", np.ones((6, 4), np.float32))], [t])
    r = b.add_tensor("r", np.float32, [2, 12])
    b.add_op("RESHAPE", [t, b.add_const("s", np.array([2, 12], np.int32))], [r])
    y = b.add_tensor("y", np.float32, [2, 12])
    b.add_op("DYNAMIC_UPDATE_SLICE", [r, u, b.add_const("start", np.array([1, 0], np.int32))], [y])
    b.mark_output(y)
    if read_after:
        z = b.add_tensor("z", np.float32, [6, 4])
        b.add_op("MUL", [t, t], [z])
        b.mark_output(z)
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((6, 4)).astype(np.float32), rng.standard_normal((1, 12)).astype(np.float32)]
    ours = _run(b.build(), inputs)
    assert ours.runtime.shares_storage(t, r)
    assert ours.runtime.shares_storage(r, y) == (not read_after)
