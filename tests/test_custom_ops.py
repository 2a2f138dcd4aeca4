"""Custom ops written as plain Python functions: the shipped plugins and user-defined ops with hooks."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import types

import numpy as np
import pytest
from conftest import MODELS, scaled
from hypothesis import given, settings
from hypothesis import strategies as st
from lite_numba.plugins import examples, mediapipe

from lite_numba import BuiltinOpResolver, Interpreter, MutableOpResolver, OpKernel, custom_op
from lite_numba.builder import ModelBuilder
from lite_numba.ops import DEFAULT_REGISTRY, CustomOpRegistry
from lite_numba.runtime.resolver import load_packs
from lite_numba.testing import run_official

# imported under the name the hypothesis tests' bodies use: a derandomized test's examples are seeded by its
# source
from lite_numba.testing import run_ours as _run

OFFSET = np.float32(0.99999905)


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
    (builtin,) = _run(_hard_swish_model(shape, custom=False), [x])
    np.testing.assert_array_equal(ours, builtin)  # the builtin HARD_SWISH's kernel: one HardSwish


def test_custom_hard_swish_is_the_builtin_kernel_also_at_the_float_limits():
    """The example's HardSwish once was a second copy of HARD_SWISH's maths (x * relu6(x + 3) / 6), which overflowed
    to inf past FLT_MAX / 6; it is the builtin's kernel now."""
    x = np.array([-3.4e38, -1e38, -4.0, -3.0, -1.5, 0.0, 1.5, 3.0, 4.0, 1e38, 3.4e38], np.float32)
    (ours,) = _run(_hard_swish_model(x.shape, custom=True), [x])
    (builtin,) = _run(_hard_swish_model(x.shape, custom=False), [x])
    np.testing.assert_array_equal(ours, builtin)
    assert np.isfinite(ours).all()
    with pytest.raises(RuntimeError, match="HardSwish.*int32"):
        b = ModelBuilder()
        xi = b.add_input("x", np.int32, [4])
        y = b.add_tensor("y", np.int32, [4])
        b.add_custom_op("HardSwish", [xi], [y])
        b.mark_output(y)
        Interpreter(model_content=b.build()).allocate_tensors()


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
    rt = it.runtime.graph(0)
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


# --- registration: one registry object, packs register through register(ops) -----------------------------------------

def _noop_kernel(name: str) -> OpKernel:
    return OpKernel(name, lambda ctx: None)


def test_a_pack_registers_through_its_register_function_into_any_op_set():
    """register(ops) takes a CustomOpRegistry or a MutableOpResolver (both have add_custom / add_custom_prefix)."""
    reg = CustomOpRegistry()
    reg.add_pack(mediapipe)
    assert [(n, lo, hi) for n, lo, hi, _ in reg.custom_ops()] == [
        ("Convolution2DTransposeBias", 1, 1), ("Landmarks2TransformMatrix", 2, 2), ("TransformTensorBilinear", 2, 2),
        ("TransformLandmarks", 2, 2)]
    assert reg.custom_prefixes() == []
    r = BuiltinOpResolver()
    mediapipe.register(r)
    assert r.find_custom("Convolution2DTransposeBias", 1) is mediapipe.convolution2d_transpose_bias
    assert r.find_custom("FlexErf", 1) is None  # only what was registered
    r2 = MutableOpResolver()
    reg.add_to(r2)
    assert r2.find_custom("TransformLandmarks", 2) is mediapipe.transform_landmarks


def test_importing_packs_registers_nothing_and_a_users_op_wins_over_a_packs_whatever_the_order():
    """In a fresh process: importing the shipped packs leaves the default op set empty; a user's @custom_op of a
    name a pack also has (the README's Atan), defined before the packs are loaded, still wins; a legacy entry point
    (a plain module whose @custom_op decorators register when it is imported) still loads."""
    code = """if True:
        import importlib.metadata
        import types

        import lite_numba.plugins
        from lite_numba.ops import DEFAULT_REGISTRY, custom_op
        assert DEFAULT_REGISTRY.custom_ops() == [] and DEFAULT_REGISTRY.custom_prefixes() == []

        @custom_op("Atan", version=1)
        def my_atan(x, out):
            out[:] = x

        @custom_op("LegacyOp", version=2)
        def my_legacy_op(x, out):
            out[:] = x

        class EntryPoint:
            name = "legacy"

            def load(self):
                mod = types.ModuleType("legacy_pack")
                exec("from lite_numba import custom_op\\n"
                     "@custom_op('LegacyOp', version=2)\\ndef legacy_op(x, out):\\n    out[:] = x\\n"
                     "@custom_op('OnlyLegacy', version=1)\\ndef only_legacy(x, out):\\n    out[:] = x\\n",
                     mod.__dict__)
                return mod

        importlib.metadata.entry_points = lambda group: [EntryPoint()] if group == "lite_numba.ops" else []
        from lite_numba import default_op_resolver
        r = default_op_resolver()
        assert r.find_custom("Atan", 1) is my_atan, r.find_custom("Atan", 1)
        plugins = lite_numba.plugins
        assert r.find_custom("Convolution2DTransposeBias", 1) is plugins.mediapipe.convolution2d_transpose_bias
        assert r.find_custom("FlexErf", 1) is plugins.flex.FLEX
        assert r.find_custom("LegacyOp", 2) is my_legacy_op, r.find_custom("LegacyOp", 2)
        assert r.find_custom("OnlyLegacy", 1).name == "OnlyLegacy"
        print("ok")
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_registry_orders_packs_first_and_the_later_registration_wins():
    reg = CustomOpRegistry()
    user, pack, later = _noop_kernel("user"), _noop_kernel("pack"), _noop_kernel("later")
    reg.add_custom("Op", user)
    reg.add_pack(lambda ops: ops.add_custom("Op", pack))
    reg.add_pack(lambda ops: ops.add_custom_prefix("Op", pack))
    assert [k for _, _, _, k in reg.custom_ops()] == [pack, user]
    r = MutableOpResolver()
    reg.add_to(r)
    assert r.find_custom("Op", 1) is user
    assert r.find_custom("OpOther", 7) is pack
    reg.add_custom("Op", later)
    r = MutableOpResolver()
    reg.add_to(r)
    assert r.find_custom("Op", 1) is later
    with pytest.raises(TypeError, match="pack of ops"):
        reg.add_pack(42)
    with pytest.raises(TypeError, match="add_custom_prefix expects an OpKernel"):
        reg.add_custom_prefix("X", lambda x, out: None)


class _EntryPoint:
    """What importlib.metadata.entry_points(group=...) yields: .load() imports the named object."""

    def __init__(self, name, load):
        self.name, self.load = name, load


def test_entry_point_packs_name_a_register_function_or_a_module(monkeypatch):
    """The entry-point group "lite_numba.ops": an entry point names a function register(ops) or a module defining
    one; load_packs registers them after the shipped packs (the legacy plain module: the test above)."""
    fn_kernel, mod_kernel = _noop_kernel("FromFunction"), _noop_kernel("FromModule")
    module = types.ModuleType("third_party_pack")
    module.register = lambda ops: ops.add_custom("FromModule", mod_kernel, 1, 3)
    eps = [_EntryPoint("fn", lambda: (lambda ops: ops.add_custom_prefix("FromFunction", fn_kernel))),
           _EntryPoint("module", lambda: module)]
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: eps if group == "lite_numba.ops" else [])
    reg = CustomOpRegistry()
    load_packs(reg)
    r = MutableOpResolver()
    reg.add_to(r)
    assert r.find_custom("FromFunctionXYZ", 1) is fn_kernel
    assert r.find_custom("FromModule", 3) is mod_kernel and r.find_custom("FromModule", 4) is None
    assert r.find_custom("Atan", 1) is examples.atan  # the shipped packs
    assert r.find_custom("HardSwish", 1) is examples.hard_swish
    assert DEFAULT_REGISTRY is not reg and not any(k is mod_kernel for _, _, _, k in DEFAULT_REGISTRY.custom_ops())
