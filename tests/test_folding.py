"""Constant folding: builtin nodes whose inputs are all constant run once at allocate (as the official runtime
evaluates constant DEQUANTIZE / DENSIFY once); their outputs become constants for the nodes that follow."""

from __future__ import annotations

import numpy as np

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import official_interpreter, require_official

require_official()


def _fp16_fc_model() -> bytes:
    rng = np.random.default_rng(3)
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 24])
    w16 = b.add_const("w16", rng.standard_normal((10, 24)).astype(np.float16))
    w = b.add_tensor("w", np.float32, [10, 24])
    bias = b.add_const("bias", rng.standard_normal(10).astype(np.float32))
    y = b.add_tensor("y", np.float32, [2, 10])
    b.add_op("DEQUANTIZE", [w16], [w])
    b.add_op("FULLY_CONNECTED", [x, w, bias], [y])
    b.mark_output(y)
    return b.build()


def test_dequantized_weights_are_folded_and_match():
    data = _fp16_fc_model()
    ours = Interpreter(model_content=data)
    ours.allocate_tensors()
    theirs = official_interpreter(data)
    rt = ours.runtime.main
    w_index = next(d["index"] for d in ours.get_tensor_details() if d["name"] == "w")
    assert w_index in rt._folded and rt.tensors[w_index].is_const
    assert rt.prepared[0].calls == []  # nothing left to run for DEQUANTIZE
    x = np.random.default_rng(0).standard_normal((2, 24)).astype(np.float32)
    for it in (ours, theirs):
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
    out = ours.get_output_details()[0]["index"]
    np.testing.assert_allclose(ours.get_tensor(out), theirs.get_tensor(out), rtol=1e-6, atol=1e-6)
    # the folded tensor reads back like the official runtime's (persistent) dequantized weights
    np.testing.assert_array_equal(ours.get_tensor(w_index), theirs.get_tensor(w_index))


def test_folding_is_redone_after_reallocation():
    data = _fp16_fc_model()
    ours = Interpreter(model_content=data)
    ours.allocate_tensors()
    x = np.ones((2, 24), np.float32)
    ours.set_tensor(0, x)
    ours.invoke()
    first = ours.get_tensor(ours.get_output_details()[0]["index"])
    ours.allocate_tensors()
    ours.set_tensor(0, x)
    ours.invoke()
    np.testing.assert_array_equal(ours.get_tensor(ours.get_output_details()[0]["index"]), first)
