"""Custom ops written as plain Python functions: the shipped plugins and user-defined ops with hooks."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import MODELS, scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from lite_numba import BuiltinOpResolver, Interpreter, MutableOpResolver, custom_op
from lite_numba.builder import ModelBuilder
from lite_numba.testing import run_official

OFFSET = np.float32(0.99999905)


def _run(data: bytes, inputs, resolver=None) -> list[np.ndarray]:
    it = Interpreter(model_content=data, op_resolver=resolver)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def test_seed_atan_runs_with_the_plugin():
    """The documented custom-op example: y = atan(x + offset), with no extra code (plugins are default ops)."""
    ref = np.load(MODELS / "ref" / "seed_atan.npz")
    it = Interpreter(model_path=str(MODELS / "seed_atan.tflite"))
    it.allocate_tensors()
    for x, tf_atan, tf_add in ((ref["input_0"], ref["tf_output_0"], ref["tf_output_1"]),
                               (ref["doc_x"], ref["doc_tf_output_0"], ref["doc_tf_output_1"])):
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        names = {d["name"]: d["index"] for d in it.get_output_details()}
        atan, add = it.get_tensor(names["Identity"]), it.get_tensor(names["add"])
        np.testing.assert_allclose(add, x.astype(np.float64) + OFFSET, atol=1e-6, rtol=0)
        np.testing.assert_allclose(atan, np.arctan(add.astype(np.float64)), atol=1e-6, rtol=0)
        np.testing.assert_allclose(atan, tf_atan, atol=1e-6, rtol=0)  # TensorFlow's own result
        np.testing.assert_allclose(add, tf_add, atol=1e-6, rtol=0)


def _hard_swish_model(shape, custom: bool) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, list(shape))
    y = b.add_tensor("y", np.float32, list(shape))
    if custom:
        b.add_custom_op("HardSwish", [x], [y])
    else:
        b.add_op("HARD_SWISH", [x], [y])
    b.mark_output(y)
    return b.build()


@settings(max_examples=scaled(12), deadline=None)
@given(shape=st.lists(st.integers(1, 7), min_size=1, max_size=4), seed=st.integers(0, 2**31 - 1))
def test_hard_swish_custom_op_matches_float64_and_official_builtin(official, shape, seed):
    x = np.random.default_rng(seed).uniform(-5, 5, size=shape).astype(np.float32)
    (ours,) = _run(_hard_swish_model(shape, custom=True), [x])
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(ours, x64 * np.clip(x64 + 3, 0, 6) / 6, atol=1e-5, rtol=0)
    (theirs,) = run_official(_hard_swish_model(shape, custom=False), [x])
    np.testing.assert_allclose(ours, theirs, atol=1e-5, rtol=0)


def test_custom_op_with_init_and_prepare_hooks_runs_in_the_compiled_loop():
    """init decodes flexbuffer options; prepare sets a different output shape and passes extra arguments."""

    def init(options):
        return float(options["factor"])

    def prepare(ctx):
        x = ctx.input(0)
        ctx.check(x.ndim == 2, "expects a matrix")
        ctx.set_output(0, (x.shape[0],))
        return (ctx.state,)

    @custom_op("ScaledRowSum", prepare=prepare, init=init, register=False)
    def scaled_row_sum(x, out, factor):
        for i in range(x.shape[0]):
            s = np.float32(0.0)
            for j in range(x.shape[1]):
                s += x[i, j]
            out[i] = s * np.float32(factor)

    resolver = BuiltinOpResolver()
    resolver.add_custom("ScaledRowSum", scaled_row_sum)
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [3, 4])
    y = b.add_tensor("y", np.float32, [3])
    z = b.add_tensor("z", np.float32, [3])
    b.add_custom_op("ScaledRowSum", [x], [y], options={"factor": 2.5})
    b.add_op("RELU", [y], [z])
    b.mark_output(z)
    data = b.build()
    xv = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    it = Interpreter(model_content=data, op_resolver=resolver)
    it.allocate_tensors()
    rt = it._runtime(0)
    assert [kind for kind, _ in rt.steps] == ["segment"]  # custom op and builtin fused in one compiled call
    it.set_tensor(0, xv)
    it.invoke()
    np.testing.assert_allclose(it.get_tensor(z), np.maximum(xv.sum(1) * 2.5, 0), rtol=1e-6)
    with pytest.raises(RuntimeError, match="unresolved custom op: ScaledRowSum"):
        Interpreter(model_content=data).allocate_tensors()  # register=False: not in the default op set


def test_custom_op_prepare_error_is_reported_with_node():
    b = ModelBuilder()
    x = b.add_input("x", np.int32, [4])
    y = b.add_tensor("y", np.int32, [4])
    b.add_custom_op("Atan", [x], [y])
    b.mark_output(y)
    with pytest.raises(RuntimeError, match=r"Atan.*int32.*\n.*Node number 0 \(Atan\) failed to prepare"):
        Interpreter(model_content=b.build()).allocate_tensors()


def test_isolated_resolver_has_only_what_was_added():
    r = MutableOpResolver()
    with pytest.raises(ValueError, match="Didn't find op for builtin opcode 'ADD'"):
        Interpreter(model_path=str(MODELS / "op_add.tflite"), op_resolver=r)
