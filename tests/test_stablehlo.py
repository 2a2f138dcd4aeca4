"""STABLEHLO_COMPOSITE (inlined decompositions, fused kernels) and the other STABLEHLO_* builtins the official
runtime registers, built with ModelBuilder and compared with the official runtime.

Composites: every fused kernel of kernels/registry.py COMPOSITES equals its decomposition bit for bit (the same
inputs through LITE_NUMBA_COMPOSITES=inline and =fused, on builder-made decompositions written as litert-torch writes
them and on the litert-torch models of tests/data), an unknown composite runs its decomposition, nested composites
and a composite in a WHILE body are inlined, malformed composites are refused naming the op, node and field, and
inspect and the profiler name each composite.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from flatbuffers import flexbuffers

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.format.model import ModelError
from lite_numba.testing import assert_close, run_official, run_ours
from lite_numba.tools.inspect_model import format_inspection, inspect_model

DATA = pathlib.Path(__file__).parent / "data" / "litert_torch"
F32 = np.float32


@pytest.fixture(params=["fused", "inline", "call"])
def mode(request, monkeypatch):
    monkeypatch.setenv("LITE_NUMBA_COMPOSITES", request.param)
    return request.param


def run_mode(model, inputs, mode: str, monkeypatch) -> list[np.ndarray]:
    monkeypatch.setenv("LITE_NUMBA_COMPOSITES", mode)
    return run_ours(model, inputs)


def add_composite(sg, name: str, ins, outs, dec, attrs: dict | None = None, version: int = 0, raw: bytes | None = None,
                  fmt: int = 0) -> None:
    sg.add_op("STABLEHLO_COMPOSITE", ins, outs, options={
        "name": name, "decomposition_subgraph_index": dec if isinstance(dec, int) else dec.index,
        "composite_attributes": raw if raw is not None else flexbuffers.Dumps(attrs or {}),
        "composite_attributes_format": fmt, "version": version})


# --- decompositions as litert-torch writes them ---------------------------------------------------------------


def rms_norm_decomposition(b: ModelBuilder, shape, eps: float):
    """x * rsqrt(mean(x * x, last axis, keep_dims) + eps) * w (litert-torch's odml.rms_norm.impl)."""
    d = b.add_subgraph("odml.rms_norm.impl")
    n = shape[-1]
    x, w = d.add_input("x", F32, shape), d.add_input("w", F32, [n])
    sq, m, a, r, y, o = (d.add_tensor(k, F32, s) for k, s in (
        ("sq", shape), ("m", shape[:-1] + [1]), ("a", shape[:-1] + [1]), ("r", shape[:-1] + [1]), ("y", shape),
        ("o", shape)))
    d.add_op("MUL", [x, x], [sq])
    d.add_op("MEAN", [sq, d.add_const("axis", np.array([len(shape) - 1], np.int32))], [m], options={"keep_dims": True})
    d.add_op("ADD", [m, d.add_const("eps", np.array(eps, F32))], [a])
    d.add_op("RSQRT", [a], [r])
    d.add_op("MUL", [x, r], [y])
    d.add_op("MUL", [y, w], [o])
    d.mark_output(o)
    return d


def rms_norm_model(shape, eps: float = 1e-6, seed: int = 0) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", F32, shape)
    w = b.add_const("w", np.random.default_rng(seed).normal(1.0, 0.2, shape[-1]).astype(F32))
    out = b.add_tensor("out", F32, shape)
    add_composite(b.main, "odml.rms_norm", [x, w], [out], rms_norm_decomposition(b, list(shape), eps),
                  {"epsilon": float(F32(eps))})
    b.mark_output(out)
    return b.build()


def sdpa_model(T: int, S: int, N: int, KV: int, H: int, scale: float) -> bytes:
    """litert-torch's odml.scaled_dot_product_attention.impl (generative API, batch 1): q [1, T, N, H], k and v
    [1, S, KV, H], a float mask [1, 1, T, S]."""
    G = N // KV
    b = ModelBuilder()
    q, k, v = (b.add_input(n_, F32, s) for n_, s in (("q", [1, T, N, H]), ("k", [1, S, KV, H]), ("v", [1, S, KV, H])))
    mask = b.add_input("mask", F32, [1, 1, T, S])
    out = b.add_tensor("out", F32, [1, T, N, H])
    d = b.add_subgraph("odml.scaled_dot_product_attention.impl")
    dq, dk, dv = (d.add_input(n_, F32, s)
                  for n_, s in (("q", [1, T, N, H]), ("k", [1, S, KV, H]), ("v", [1, S, KV, H])))
    dm = d.add_input("mask", F32, [1, 1, T, S])
    swap12 = d.add_const("perm", np.array([0, 2, 1, 3], np.int32))
    c = d.add_const("c", np.array(np.sqrt(scale), F32))

    def t(name, shape):
        return d.add_tensor(name, F32, shape)

    def repeat(x, name):  # [1, S, KV, H] -> [1, N, S, H], head n reading KV head n // G
        xt, x5 = t(name + "t", [1, KV, S, H]), t(name + "5", [1, KV, 1, S, H])
        xb, xn = t(name + "b", [1, KV, G, S, H]), t(name + "n", [1, N, S, H])
        d.add_op("TRANSPOSE", [x, swap12], [xt])
        d.add_op("RESHAPE", [xt, d.add_const(name + "s5", np.array([1, KV, 1, S, H], np.int32))], [x5])
        d.add_op("BROADCAST_TO", [x5, d.add_const(name + "sb", np.array([1, KV, G, S, H], np.int32))], [xb], version=2)
        d.add_op("RESHAPE", [xb, d.add_const(name + "sn", np.array([1, N, S, H], np.int32))], [xn])
        return xn

    kn, vn = repeat(dk, "k"), repeat(dv, "v")
    qs, qt, ks, kt = t("qs", [1, T, N, H]), t("qt", [1, N, T, H]), t("ks", [1, N, S, H]), t("kt", [1, N, H, S])
    d.add_op("MUL", [dq, c], [qs])
    d.add_op("TRANSPOSE", [qs, swap12], [qt])
    d.add_op("MUL", [kn, c], [ks])
    d.add_op("TRANSPOSE", [ks, d.add_const("perm23", np.array([0, 1, 3, 2], np.int32))], [kt])
    q3, k3, lg, ad, p, p3, v3, o3, o4, o = (t(n_, s) for n_, s in (
        ("q3", [N, T, H]), ("k3", [N, H, S]), ("logits", [N, T, S]), ("masked", [1, N, T, S]), ("p", [1, N, T, S]),
        ("p3", [N, T, S]), ("v3", [N, S, H]), ("o3", [N, T, H]), ("o4", [1, N, T, H]), ("o", [1, T, N, H])))
    d.add_op("RESHAPE", [qt, d.add_const("sq3", np.array([N, T, H], np.int32))], [q3])
    d.add_op("RESHAPE", [kt, d.add_const("sk3", np.array([N, H, S], np.int32))], [k3])
    d.add_op("BATCH_MATMUL", [q3, k3], [lg])
    d.add_op("ADD", [lg, dm], [ad])
    d.add_op("SOFTMAX", [ad], [p], options={"beta": 1.0})
    d.add_op("RESHAPE", [p, d.add_const("sp3", np.array([N, T, S], np.int32))], [p3])
    d.add_op("RESHAPE", [vn, d.add_const("sv3", np.array([N, S, H], np.int32))], [v3])
    d.add_op("BATCH_MATMUL", [p3, v3], [o3])
    d.add_op("RESHAPE", [o3, d.add_const("so4", np.array([1, N, T, H], np.int32))], [o4])
    d.add_op("TRANSPOSE", [o4, swap12], [o])
    d.mark_output(o)
    add_composite(b.main, "odml.scaled_dot_product_attention", [q, k, v, mask], [out], d, {"scale": scale})
    b.mark_output(out)
    return b.build()


def sdpa_transposed_model(T: int, S: int, N: int, KV: int, H: int) -> bytes:
    """export_hf's odml.sdpa_transposed.impl: q [1, N, T, H], k cache [1, KV, S, H], v cache [1, KV, H, S], a bool mask
    [1, 1, T, S] (true: attend) and the runtime parameters [1, 1, 1, 7]."""
    G = N // KV
    b = ModelBuilder()
    q, k, v = (b.add_input(n_, F32, s) for n_, s in (("q", [1, N, T, H]), ("k", [1, KV, S, H]), ("v", [1, KV, H, S])))
    mask, param = b.add_input("mask", np.bool_, [1, 1, T, S]), b.add_input("param", np.int32, [1, 1, 1, 7])
    out = b.add_tensor("out", F32, [1, N, T, H])
    d = b.add_subgraph("odml.sdpa_transposed.impl")
    dq, dk, dv = (d.add_input(n_, F32, s)
                  for n_, s in (("q", [1, N, T, H]), ("k", [1, KV, S, H]), ("v", [1, KV, H, S])))
    dm, _ = d.add_input("mask", np.bool_, [1, 1, T, S]), d.add_input("param", np.int32, [1, 1, 1, 7])
    qg, mf, mc, mb, mg = d.add_tensor("qg", F32, [1, KV, G * T, H]), d.add_tensor("mf", F32, [1, 1, T, S]), \
        d.add_tensor("mc", F32, [1, G, T, S]), d.add_tensor("mb", np.bool_, [1, G, T, S]), \
        d.add_tensor("mg", np.bool_, [1, 1, G * T, S])
    lg, sel, p, og, o = (d.add_tensor(n_, F32, s) for n_, s in (
        ("logits", [1, KV, G * T, S]), ("sel", [1, KV, G * T, S]), ("p", [1, KV, G * T, S]), ("og", [1, KV, G * T, H]),
        ("o", [1, N, T, H])))
    d.add_op("RESHAPE", [dq, d.add_const("sqg", np.array([1, KV, G * T, H], np.int32))], [qg])
    d.add_op("CAST", [dm], [mf])
    d.add_op("CONCATENATION", [mf] * G, [mc], options={"axis": 1})
    d.add_op("NOT_EQUAL", [mc, d.add_const("zero", np.array(0.0, F32))], [mb])
    d.add_op("RESHAPE", [mb, d.add_const("smg", np.array([1, 1, G * T, S], np.int32))], [mg])
    d.add_op("BATCH_MATMUL", [qg, dk], [lg], options={"adj_y": True})
    d.add_op("SELECT_V2", [mg, lg, d.add_const("fill", np.array(-10000.0, F32))], [sel])
    d.add_op("SOFTMAX", [sel], [p], options={"beta": 1.0})
    d.add_op("BATCH_MATMUL", [p, dv], [og], options={"adj_y": True})
    d.add_op("RESHAPE", [og, d.add_const("so", np.array([1, N, T, H], np.int32))], [o])
    d.mark_output(o)
    add_composite(b.main, "odml.sdpa_transposed", [q, k, v, mask, param], [out], d,
                  {"from_cache_update": True, "is_causal": True, "k_ts_idx": 2, "v_ts_idx": 3})
    b.mark_output(out)
    return b.build()


def swiglu_model(shape, gate: int) -> bytes:
    """export_hf's odml.swiglu.impl: silu(x[..., :gate]) * x[..., gate:]."""
    b = ModelBuilder()
    x = b.add_input("x", F32, shape)
    out_shape = list(shape[:-1]) + [gate]
    out = b.add_tensor("out", F32, out_shape)
    d = b.add_subgraph("odml.swiglu.impl")
    dx = d.add_input("x", F32, shape)
    a, g, s, m, o = (d.add_tensor(n_, F32, out_shape) for n_ in ("a", "g", "s", "m", "o"))
    size = d.add_const("size", np.array(out_shape, np.int32))
    zeros = [0] * len(shape)
    d.add_op("SLICE", [dx, d.add_const("b0", np.array(zeros, np.int32)), size], [a])
    d.add_op("SLICE", [dx, d.add_const("b1", np.array(zeros[:-1] + [gate], np.int32)), size], [g])
    d.add_op("LOGISTIC", [a], [s])
    d.add_op("MUL", [a, s], [m])
    d.add_op("MUL", [m, g], [o])
    d.mark_output(o)
    add_composite(b.main, "odml.swiglu", [x], [out], d, {"gate_size": gate})
    b.mark_output(out)
    return b.build()


def fused_ops(model: bytes, monkeypatch) -> list[str]:
    """The op labels of subgraph 0 as the runtime runs it (after the composite rewrite)."""
    monkeypatch.setenv("LITE_NUMBA_COMPOSITES", "fused")
    it = Interpreter(model_content=model)
    return [n.op_name + (" " + n.options["name"] if n.op_name == "STABLEHLO_COMPOSITE" else "")
            for n in it._rt.graph(0).plan.nodes]


def _random(rng, shape, dtype=F32):
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) < 0.7
    if np.dtype(dtype) == np.int32:
        return rng.integers(0, 64, shape).astype(np.int32)
    return rng.normal(0, 1.5, shape).astype(dtype)


CASES = {
    "rms_norm-16x64": (lambda: rms_norm_model([1, 16, 64]), [[1, 16, 64]]),
    "rms_norm-5x37": (lambda: rms_norm_model([5, 37], 1e-5), [[5, 37]]),  # rows not 16-byte aligned
    "rms_norm-1x1x64": (lambda: rms_norm_model([1, 1, 64]), [[1, 1, 64]]),  # one row: MEAN sums in order
    "sdpa-gqa": (lambda: sdpa_model(T=5, S=24, N=4, KV=2, H=8, scale=0.25), [[1, 5, 4, 8], [1, 24, 2, 8],
                                                                            [1, 24, 2, 8], [1, 1, 5, 24]]),
    "sdpa-mha-scale": (lambda: sdpa_model(T=3, S=7, N=2, KV=2, H=12, scale=1 / np.sqrt(12)),
                       [[1, 3, 2, 12], [1, 7, 2, 12], [1, 7, 2, 12], [1, 1, 3, 7]]),
    "sdpa_transposed": (lambda: sdpa_transposed_model(T=4, S=20, N=4, KV=2, H=8),
                        [[1, 4, 4, 8], [1, 2, 20, 8], [1, 2, 8, 20], ([1, 1, 4, 20], np.bool_),
                         ([1, 1, 1, 7], np.int32)]),
    "swiglu": (lambda: swiglu_model([1, 6, 40], 20), [[1, 6, 40]]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_kernel_equals_its_decomposition(case, monkeypatch, official):
    """Bit for bit: the fused kernel computes the decomposition's float32 steps in the same order."""
    make, specs = CASES[case]
    model = make()
    rng = np.random.default_rng(len(case))
    inputs = [_random(rng, *(s if isinstance(s, tuple) else (s,))) for s in specs]
    if case.startswith("sdpa-"):  # a causal-looking float mask with -inf, as the generative API feeds it
        T, S = inputs[3].shape[2:]
        causal = np.arange(S)[None, :] <= np.arange(T)[:, None] + S - T
        inputs[3] = np.where(causal, 0.0, -np.inf).astype(F32)[None, None]
    name = {"sdpa": "odml.scaled_dot_product_attention"}.get(case.split("-")[0], "odml." + case.split("-")[0])
    assert f"STABLEHLO_COMPOSITE {name}" in fused_ops(model, monkeypatch)
    fused = run_mode(model, inputs, "fused", monkeypatch)
    inline = run_mode(model, inputs, "inline", monkeypatch)
    for a, b in zip(fused, inline):
        np.testing.assert_array_equal(a, b, err_msg=f"{case}: fused kernel differs from its decomposition")
    for a, b in zip(fused, run_official(model, inputs)):
        assert_close(a, b, 1e-5, what=f"{case} vs the official runtime (its decomposition)")


def _generation_steps(name: str, mode: str, monkeypatch, steps: int = 2) -> list[dict]:
    """prefill on the recorded inputs with random caches, then `steps` decode steps."""
    monkeypatch.setenv("LITE_NUMBA_COMPOSITES", mode)
    with np.load(DATA / f"{name}.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    meta = json.loads(str(arrays["meta"]))
    it = Interpreter(model_path=str(DATA / f"{name}.tflite"))
    prefill, decode = it.get_signature_runner(meta["prefill_signature"]), it.get_signature_runner("decode")
    rng = np.random.default_rng(7)
    feed = {k[len("prefill_in_"):]: v for k, v in arrays.items() if k.startswith("prefill_in_")}
    feed = {k: (rng.normal(0, 1, v.shape).astype(F32) if k.startswith("kv_cache") else v) for k, v in feed.items()}
    outs = [prefill(**feed)]
    wanted = decode.get_input_details()
    for step in range(steps):
        p = meta["prefill_len"] + step
        feed = {k: v for k, v in outs[-1].items() if k.startswith("kv_cache")}
        feed.update(tokens=np.array([[3 + step]], np.int32), input_pos=np.array([p], np.int32))
        if "mask" in wanted:
            feed["mask"] = np.where(np.arange(meta["cache_len"]) <= p, 0.0, -np.inf).astype(F32).reshape(1, 1, 1, -1)
        if "param_tensor" in wanted:
            feed["param_tensor"] = np.array([p, p + 1, p + 1, 1, 0, 0, 0], np.int32).reshape(1, 1, 1, 7)
        outs.append({k: v.copy() for k, v in decode(**feed).items()})
    return outs


@pytest.mark.parametrize("name", ["decoder_kv_f32", "qwen3_composites_f32"])
def test_fused_kernels_equal_decompositions_in_litert_torch_models(name, monkeypatch):
    """odml.rms_norm, odml.scaled_dot_product_attention (grouped-query heads), odml.sdpa_transposed and odml.swiglu
    as litert-torch wrote them: prefill and decode through the fused kernels equal the inlined decompositions."""
    fused = _generation_steps(name, "fused", monkeypatch)
    inline = _generation_steps(name, "inline", monkeypatch)
    for step, (a, b) in enumerate(zip(fused, inline)):
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=f"{name} step {step} {k}")


# --- unknown and nested composites, WHILE bodies, shared decompositions, copies -------------------------------


def scale_shift_decomposition(b: ModelBuilder, shape, k: float, c: float, name="acme.scale_shift.impl"):
    d = b.add_subgraph(name)
    x = d.add_input("x", F32, shape)
    y, z = d.add_tensor("y", F32, shape), d.add_tensor("z", F32, shape)
    d.add_op("MUL", [x, d.add_const("k", np.array(k, F32))], [y])
    d.add_op("ADD", [y, d.add_const("c", np.array(c, F32))], [z])
    d.mark_output(z)
    return d


def unknown_model() -> bytes:
    """An unknown composite (acme.scale_shift, no fused kernel) called twice with one decomposition."""
    b = ModelBuilder()
    x = b.add_input("x", F32, [3, 4])
    y, z = b.add_tensor("y", F32, [3, 4]), b.add_tensor("z", F32, [3, 4])
    d = scale_shift_decomposition(b, [3, 4], 2.0, 1.0)
    add_composite(b.main, "acme.scale_shift", [x], [y], d, {"k": 2.0, "note": "made by hand", "dims": [3, 4]})
    add_composite(b.main, "acme.scale_shift", [y], [z], d, {"k": 2.0})
    b.mark_output(z)
    return b.build()


def test_unknown_composite_runs_its_decomposition(mode, official):
    model = unknown_model()
    x = np.arange(12, dtype=F32).reshape(3, 4)
    (ours,), (ref,) = run_ours(model, [x]), run_official(model, [x])
    np.testing.assert_array_equal(ours, ref)
    np.testing.assert_array_equal(ours, (x * 2 + 1) * 2 + 1)


def test_inlined_nodes_record_their_composite(monkeypatch):
    ops = fused_ops(unknown_model(), monkeypatch)
    assert ops == ["MUL", "ADD", "MUL", "ADD"]  # no fused kernel: both inlined
    it = Interpreter(model_content=unknown_model())
    it.allocate_tensors()
    assert [kind for kind, _ in it._rt.graph(0).steps] == ["segment"]  # one compiled call, no host step
    plan = it._rt.graph(0).plan
    assert [n.origin for n in plan.nodes] == ["acme.scale_shift@0"] * 2 + ["acme.scale_shift@1"] * 2
    # one decomposition inlined twice: its constants once, its intermediate tensor twice
    assert len(plan.tensors) == 3 + 2 + 1 * 2


def nested_model() -> bytes:
    """acme.outer(x, w) = acme.scale_shift(odml.rms_norm(x, w)) + x: a known and an unknown composite inside an
    unknown one."""
    shape = [2, 3, 16]
    b = ModelBuilder()
    x = b.add_input("x", F32, shape)
    w = b.add_const("w", np.linspace(0.5, 1.5, 16).astype(F32))
    out = b.add_tensor("out", F32, shape)
    rms = rms_norm_decomposition(b, shape, 1e-6)
    inner = scale_shift_decomposition(b, shape, 3.0, -0.5, "acme.inner.impl")
    outer = b.add_subgraph("acme.outer.impl")
    ox, ow = outer.add_input("x", F32, shape), outer.add_input("w", F32, [16])
    n1, n2, n3 = (outer.add_tensor(k, F32, shape) for k in ("n1", "n2", "n3"))
    add_composite(outer, "odml.rms_norm", [ox, ow], [n1], rms, {"epsilon": float(F32(1e-6))})
    add_composite(outer, "acme.inner", [n1], [n2], inner)
    outer.add_op("ADD", [n2, ox], [n3])
    outer.mark_output(n3)
    add_composite(b.main, "acme.outer", [x, w], [out], outer, {"depth": 2})
    b.mark_output(out)
    return b.build()


def test_nested_composites(mode, monkeypatch, official):
    model = nested_model()
    x = np.random.default_rng(3).normal(0, 2, [2, 3, 16]).astype(F32)
    (ours,), (ref,) = run_ours(model, [x]), run_official(model, [x])
    assert_close(ours, ref, 1e-6)
    if mode != "call":
        origins = [n.origin for n in Interpreter(model_content=model)._rt.graph(0).plan.nodes]
        inner = "acme.outer@0/acme.inner@1"
        rms = ["acme.outer@0"] if mode == "fused" else ["acme.outer@0/odml.rms_norm@0"] * 6
        assert origins == rms + [inner, inner, "acme.outer@0"]


def test_nested_fused_equals_inline(monkeypatch):
    x = np.random.default_rng(4).normal(0, 2, [2, 3, 16]).astype(F32)
    a = run_mode(nested_model(), [x], "fused", monkeypatch)
    b = run_mode(nested_model(), [x], "inline", monkeypatch)
    np.testing.assert_array_equal(a[0], b[0])


def while_model() -> bytes:
    """while i < 3: x = odml.rms_norm(x, w) * 2; i += 1 (the composite in the loop body)."""
    shape = [4, 8]
    b = ModelBuilder()
    i, x = b.add_input("i", F32, []), b.add_input("x", F32, shape)
    oi, ox = b.add_tensor("oi", F32, []), b.add_tensor("ox", F32, shape)
    cond = b.add_subgraph("cond")
    ci, _ = cond.add_input("i", F32, []), cond.add_input("x", F32, shape)
    c = cond.add_tensor("c", np.bool_, [])
    cond.add_op("LESS", [ci, cond.add_const("three", np.array(3.0, F32))], [c])
    cond.mark_output(c)
    body = b.add_subgraph("body")
    bi, bx = body.add_input("i", F32, []), body.add_input("x", F32, shape)
    ni, nx, n2 = body.add_tensor("ni", F32, []), body.add_tensor("nx", F32, shape), body.add_tensor("n2", F32, shape)
    body.add_op("ADD", [bi, body.add_const("one", np.array(1.0, F32))], [ni])
    bw = body.add_const("w", np.linspace(-1, 1, 8).astype(F32))
    add_composite(body, "odml.rms_norm", [bx, bw], [nx], rms_norm_decomposition(b, shape, 1e-6),
                  {"epsilon": float(F32(1e-6))})
    body.add_op("MUL", [nx, body.add_const("two", np.array(2.0, F32))], [n2])
    body.mark_output(ni)
    body.mark_output(n2)
    b.add_op("WHILE", [i, x], [oi, ox], options={"cond_subgraph_index": cond.index, "body_subgraph_index": body.index})
    b.mark_output(oi)
    b.mark_output(ox)
    return b.build()


def test_composite_in_a_while_body(mode, official):
    model = while_model()
    inputs = [np.array(0.0, F32), np.random.default_rng(5).normal(0, 1, [4, 8]).astype(F32)]
    ours, ref = run_ours(model, inputs), run_official(model, inputs)
    np.testing.assert_array_equal(ours[0], ref[0])
    assert_close(ours[1], ref[1], 1e-6)
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    body = it._rt.graph(2).plan  # the body's plan as it runs: the composite inlined or fused, no host call
    labels = [n.op_name + " " + n.options.get("name", "") if n.op_name == "STABLEHLO_COMPOSITE" else
              n.op_name + " (fused away)" if "fused_into" in n.options else n.op_name for n in body.nodes]
    # inline: the decomposition's nodes, which runtime/fusion.py then finds as an RMS-norm chain (one FUSED_NORM)
    expected = {"fused": ["ADD", "STABLEHLO_COMPOSITE odml.rms_norm", "MUL"],
                "inline": ["ADD", "MUL (fused away)", "MEAN (fused away)", "ADD (fused away)", "RSQRT (fused away)",
                           "MUL (fused away)", "FUSED_NORM", "MUL"],
                "call": ["ADD", "STABLEHLO_COMPOSITE odml.rms_norm", "MUL"]}[mode]
    assert labels == expected


def copies_model() -> bytes:
    """A decomposition returning one of its inputs, a constant and a computed value: (x, c, x * c)."""
    b = ModelBuilder()
    x = b.add_input("x", F32, [5])
    outs = [b.add_tensor(k, F32, [5]) for k in ("o0", "o1", "o2")]
    d = b.add_subgraph("acme.copies.impl")
    dx = d.add_input("x", F32, [5])
    dc = d.add_const("c", np.arange(5, dtype=F32) - 2)
    dy = d.add_tensor("y", F32, [5])
    d.add_op("MUL", [dx, dc], [dy])
    for t in (dx, dc, dy):
        d.mark_output(t)
    add_composite(b.main, "acme.copies", [x], outs, d)
    for t in outs:
        b.mark_output(t)
    return b.build()


def test_decomposition_returning_inputs_and_constants(mode, official):
    model = copies_model()
    x = np.array([1.5, -2, 3, 0.25, 7], F32)
    for a, b in zip(run_ours(model, [x]), run_official(model, [x])):
        np.testing.assert_array_equal(a, b)


# --- malformed composites ---------------------------------------------------------------------------------------


def _bad_model(kind: str) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.int32 if kind == "dtype" else F32, [4])
    y = b.add_tensor("y", F32, [4])
    d = scale_shift_decomposition(b, [4], 2.0, 1.0)
    opts = {"attrs": {"k": 1.0}}
    if kind == "index":
        opts["dec"] = 7
    elif kind == "inputs":
        d.add_input("extra", F32, [4])
    elif kind == "outputs":
        d.mark_output(d.inputs[0])
    elif kind == "attributes":
        opts["raw"] = bytes(range(40))
    elif kind == "format":
        opts["fmt"] = 1
    add_composite(b.main, "acme.scale_shift", [x], [y], opts.get("dec", d), opts["attrs"], raw=opts.get("raw"),
                  fmt=opts.get("fmt", 0))
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("kind,message", [
    ("index", r"STABLEHLO_COMPOSITE\) in subgraph 0 decomposition_subgraph_index 7 out of range"),
    ("inputs", r"STABLEHLO_COMPOSITE 'acme.scale_shift' \(subgraph 0, node 0\) has 1 inputs, its decomposition "
               r"\(subgraph 1\) has 2"),
    ("outputs", r"STABLEHLO_COMPOSITE 'acme.scale_shift' \(subgraph 0, node 0\) has 1 outputs, its decomposition "
                r"\(subgraph 1\) has 2"),
    ("dtype", r"STABLEHLO_COMPOSITE 'acme.scale_shift' \(subgraph 0, node 0\): input 0 \('x'\) is INT32, its "
              r"decomposition \(subgraph 1\) has FLOAT32"),
    ("attributes", r"STABLEHLO_COMPOSITE 'acme.scale_shift' \(subgraph 0, node 0\): composite_attributes \(40 bytes\) "
                   r"are not a flexbuffer"),
    ("format", r"STABLEHLO_COMPOSITE 'acme.scale_shift' \(subgraph 0, node 0\): composite_attributes_format is 1"),
])
def test_malformed_composite_is_refused(kind, message, monkeypatch):
    monkeypatch.setenv("LITE_NUMBA_COMPOSITES", "fused")
    with pytest.raises(ModelError, match=message):
        Interpreter(model_content=_bad_model(kind))


def test_composites_mode_is_checked(monkeypatch):
    monkeypatch.setenv("LITE_NUMBA_COMPOSITES", "fast")
    with pytest.raises(ValueError, match="LITE_NUMBA_COMPOSITES='fast': expected one of fused, inline, call"):
        Interpreter(model_content=unknown_model())


# --- inspect and the profiler -----------------------------------------------------------------------------------


def test_inspect_names_composites_and_their_decompositions(monkeypatch):
    monkeypatch.setenv("LITE_NUMBA_COMPOSITES", "fused")
    info = inspect_model(nested_model(), allocate=False)
    ops = {e["op"]: e for e in info["ops"]}
    assert ops["STABLEHLO_COMPOSITE acme.outer"]["status"].endswith("decomposition inlined")
    assert ops["STABLEHLO_COMPOSITE odml.rms_norm"]["status"].endswith("fused kernel odml.rms_norm")
    top = [c for c in info["composites"] if c["subgraph"] == 0]
    assert len(top) == 1 and top[0]["attributes"] == {"depth": 2} and top[0]["decomposition_subgraph"] == 3
    nested = [d["composite"]["name"] for d in top[0]["decomposition"] if d["composite"]]
    assert nested == ["odml.rms_norm", "acme.inner"]
    text = format_inspection(info, composites=True)
    assert "subgraph 0 node 0: STABLEHLO_COMPOSITE acme.outer v0 {depth=2} -> decomposition subgraph 3: " \
           "decomposition inlined" in text
    assert "        subgraph 3 node 0: STABLEHLO_COMPOSITE odml.rms_norm v0" in text
    assert "Composites:" not in format_inspection(info)


def test_profile_groups_inlined_nodes_under_their_composite(monkeypatch):
    x = np.random.default_rng(6).normal(0, 1, [2, 3, 16]).astype(F32)
    for mode, want in (("inline", {"acme.outer@0": 9, "acme.outer@0/odml.rms_norm@0": 6,
                                   "acme.outer@0/acme.inner@1": 2}),
                       ("fused", {"acme.outer@0": 4, "acme.outer@0/acme.inner@1": 2})):
        monkeypatch.setenv("LITE_NUMBA_COMPOSITES", mode)
        it = Interpreter(model_content=nested_model())
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        p = it.profile(num_runs=1, warmup_runs=0)
        assert {r["composite"]: r["nodes"] for r in p.by_composite()} == want
        assert "Summary by composite" in p.to_table()
        if mode == "fused":
            assert [r.op_name for r in p.records][0] == "STABLEHLO_COMPOSITE odml.rms_norm"
            assert p.records[0].group == "acme.outer@0"


# --- the other STABLEHLO_* builtins, against the official runtime -----------------------------------------------


def assert_same(ours, ref, what: str = "") -> None:
    for k, (a, b) in enumerate(zip(ours, ref)):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{what} output {k}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
        np.testing.assert_array_equal(a, b, err_msg=f"{what} output {k}")  # NaNs in the same places count as equal


def _values(rng, dtype, shape, low=None, high=None):
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind == "f":
        v = (rng.normal(size=shape) * 100).astype(dt)
        v.flat[0] = np.nan
        return v
    info = np.iinfo(dt)
    low = info.min if low is None else max(low, info.min)
    return rng.integers(low, info.max if high is None else high, shape, dtype=dt)


ELEMENTWISE = {
    "STABLEHLO_ADD": [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                      np.uint32, np.uint64, np.bool_],
    "STABLEHLO_MULTIPLY": [np.float16, np.float32, np.int8, np.int64, np.uint64, np.bool_],
    "STABLEHLO_MAXIMUM": [np.float16, np.float32, np.float64, np.int8, np.uint32, np.bool_],
    "STABLEHLO_MINIMUM": [np.float16, np.float32, np.float64, np.int16, np.uint8, np.bool_],
    "STABLEHLO_AND": [np.int8, np.int32, np.uint64, np.bool_],
    "STABLEHLO_SHIFT_LEFT": [np.int8, np.int16, np.int32],
}


@pytest.mark.parametrize("op", sorted(ELEMENTWISE))
def test_stablehlo_elementwise(op, official):
    """Every type the official kernel takes (one node per type in one model): integers wrap, bool arithmetic, NaN
    as std::max / std::min order it, float16 through float32."""
    rng = np.random.default_rng(len(op))
    b = ModelBuilder()
    inputs = []
    for k, dt in enumerate(ELEMENTWISE[op]):
        x, y = b.add_input(f"x{k}", dt, [3, 5]), b.add_input(f"y{k}", dt, [3, 5])
        o = b.add_tensor(f"o{k}", dt, [3, 5])
        b.add_op(op, [x, y], [o])
        b.mark_output(o)
        a = _values(rng, dt, [3, 5])
        c = _values(rng, dt, [3, 5], 0, np.dtype(dt).itemsize * 8) if op.endswith("SHIFT_LEFT") else \
            _values(rng, dt, [3, 5])
        if np.dtype(dt).kind == "f":
            c.flat[1] = np.nan
        inputs += [a, c]
    model = b.build()
    assert_same(run_ours(model, inputs), run_official(model, inputs), op)


def test_stablehlo_elementwise_refusals():
    b = ModelBuilder()
    x, y = b.add_input("x", F32, [2]), b.add_input("y", F32, [2])
    o = b.add_tensor("o", F32, [2])
    b.add_op("STABLEHLO_AND", [x, y], [o])
    b.mark_output(o)
    with pytest.raises(RuntimeError, match=r"STABLEHLO_AND .*type float32 is not supported"):
        run_ours(b.build(), [np.ones(2, F32)] * 2)


def pad_model(shape, lo, hi, interior, dtypes) -> bytes:
    b = ModelBuilder()
    out_shape = [n + max(n - 1, 0) * i + a + c for n, i, a, c in zip(shape, interior, lo, hi)]
    out_shape = [0] * len(shape) if any(d <= 0 for d in out_shape) else out_shape
    for k, dt in enumerate(dtypes):
        x, v = b.add_input(f"x{k}", dt, shape), b.add_input(f"v{k}", dt, [])
        o = b.add_tensor(f"o{k}", dt, out_shape)
        b.add_op("STABLEHLO_PAD", [x, v], [o], options={"edge_padding_low": lo, "edge_padding_high": hi,
                                                         "interior_padding": interior})
        b.mark_output(o)
    return b.build()


@pytest.mark.parametrize("shape,lo,hi,interior", [
    ([2, 3], [1, 0], [0, 2], [0, 0]),
    ([4, 5], [-1, 2], [1, -2], [1, 2]),  # crops and interior padding
    ([2, 3, 4], [0, -1, 1], [1, 0, -4], [1, 0, 2]),
    ([3], [-2], [-1], [3]),  # a crop inside the interior padding
    ([2, 2], [-5, 0], [0, 0], [0, 0]),  # nothing left: every output dimension 0, as officially
])
def test_stablehlo_pad(shape, lo, hi, interior, official):
    dtypes = [np.float32, np.int8, np.float16, np.int64, np.bool_]
    rng = np.random.default_rng(1)
    model = pad_model(shape, lo, hi, interior, dtypes)
    inputs = []
    for dt in dtypes:
        inputs += [_values(rng, dt, shape), _values(rng, dt, [])]
    assert_same(run_ours(model, inputs), run_official(model, inputs), "STABLEHLO_PAD")


GATHERS = [  # operand shape, indices shape, result shape, options (StableHLO's spec example first)
    ([3, 4, 2], [2, 3, 2], [2, 3, 2, 2], dict(offset_dims=[2, 3], collapsed_slice_dims=[0], start_index_map=[1, 0],
                                                index_vector_dim=2, slice_sizes=[1, 2, 2])),
    ([5, 3], [4, 1], [4, 3], dict(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1,
                                  slice_sizes=[1, 3])),  # an embedding lookup
    ([6, 7], [2, 4], [4, 3, 2], dict(offset_dims=[1, 2], collapsed_slice_dims=[], start_index_map=[0, 1],
                                     index_vector_dim=0, slice_sizes=[3, 2])),
]


@pytest.mark.parametrize("case", range(len(GATHERS)))
def test_stablehlo_gather(case, official):
    """Start indices out of range are clamped into the operand; int32 and int64 indices, 1/2/8-byte data."""
    xs, ishape, out_shape, opts = GATHERS[case]
    rng = np.random.default_rng(case)
    b = ModelBuilder()
    inputs = []
    for k, (dt, it) in enumerate(((np.float32, np.int32), (np.int8, np.int64), (np.float16, np.int32),
                                  (np.int64, np.int64))):
        x, i = b.add_input(f"x{k}", dt, xs), b.add_input(f"i{k}", it, ishape)
        o = b.add_tensor(f"o{k}", dt, out_shape)
        b.add_op("STABLEHLO_GATHER", [x, i], [o], options=opts)
        b.mark_output(o)
        inputs += [_values(rng, dt, xs), rng.integers(-2, 8, ishape).astype(it)]
    model = b.build()
    assert_same(run_ours(model, inputs), run_official(model, inputs), "STABLEHLO_GATHER")


SCATTERS = [  # operand shape, indices shape, updates shape, options
    ([3, 4, 2], [2, 3, 2], [2, 3, 2, 2], dict(update_window_dims=[2, 3], inserted_window_dims=[0],
                                                scatter_dims_to_operand_dims=[1, 0], index_vector_dim=2)),
    ([5, 3], [4, 1], [4, 3], dict(update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                                  index_vector_dim=1)),
    ([6], [5], [5], dict(update_window_dims=[], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                         index_vector_dim=1)),  # the index vector implicit: one index per update
]


def scatter_model(body_op: str | None, dtypes) -> bytes:
    b = ModelBuilder()
    for k, (dt, it) in enumerate(dtypes):
        body = b.add_subgraph(f"body{k}")
        p, q = body.add_input("p", dt, []), body.add_input("q", dt, [])
        if body_op:
            r = body.add_tensor("r", dt, [])
            body.add_op(body_op, [p, q], [r])
            body.mark_output(r)
        else:  # no op: the update replaces
            body.mark_output(q)
        for c, (xs, ishape, us, opts) in enumerate(SCATTERS):
            x, i = b.add_input(f"x{k}{c}", dt, xs), b.add_input(f"i{k}{c}", it, ishape)
            u = b.add_input(f"u{k}{c}", dt, us)
            o = b.add_tensor(f"o{k}{c}", dt, xs)
            b.add_op("STABLEHLO_SCATTER", [x, i, u], [o],
                     options={**opts, "update_computation_subgraph_index": body.index})
            b.mark_output(o)
    return b.build()


@pytest.mark.parametrize("body_op", [None, "STABLEHLO_ADD", "STABLEHLO_MULTIPLY", "STABLEHLO_MAXIMUM",
                                     "STABLEHLO_MINIMUM"])
def test_stablehlo_scatter(body_op, official):
    """Updates combined in row-major order (repeated indices accumulate in order), elements landing outside the
    operand skipped; the update computation's one op names the combination."""
    dtypes = [(np.float32, np.int32), (np.int16, np.int64), (np.bool_, np.int32)]
    model = scatter_model(body_op, dtypes)
    rng = np.random.default_rng(5)
    inputs = []
    for dt, it in dtypes:
        for xs, ishape, us, _ in SCATTERS:
            inputs += [_values(rng, dt, xs, -50, 50), rng.integers(-1, 5, ishape).astype(it),
                       _values(rng, dt, us, -50, 50)]
    assert_same(run_ours(model, inputs), run_official(model, inputs), f"STABLEHLO_SCATTER {body_op}")


def test_stablehlo_scatter_refuses_other_bodies(official):
    """A TFLite ADD in the body (not STABLEHLO_ADD) is refused, as officially."""
    model = scatter_model("ADD", [(np.float32, np.int32)])
    with pytest.raises(RuntimeError, match="Only update, Add, Multiply, Maximum and Minimum operations"):
        run_ours(model, [np.zeros(s, F32) if k % 3 != 1 else np.zeros(s, np.int32)
                         for k, s in enumerate(s for c in SCATTERS for s in c[:3])])
    with pytest.raises(RuntimeError, match="Only update, Add, Multiply, Maximum and Minimum operations"):
        run_official(model, [np.zeros(s, F32) if k % 3 != 1 else np.zeros(s, np.int32)
                             for k, s in enumerate(s for c in SCATTERS for s in c[:3])])


def _window_shape(xs, o) -> list[int]:
    out = []
    for d, n in enumerate(xs):
        size = (n - 1) * o["base_dilations"][d] + 1 + o["padding"][2 * d] + o["padding"][2 * d + 1]
        span = (o["window_dimensions"][d] - 1) * o["window_dilations"][d] + 1
        out.append(0 if size < span else (size - span) // o["window_strides"][d] + 1)
    return out


WINDOWS = [
    ([4, 6], dict(window_dimensions=[2, 3], window_strides=[1, 2], base_dilations=[1, 1], window_dilations=[1, 1],
                  padding=[0, 0, 0, 0])),
    ([5, 7], dict(window_dimensions=[2, 2], window_strides=[2, 1], base_dilations=[2, 1], window_dilations=[1, 2],
                  padding=[1, 0, -1, 2])),  # base and window dilation, a crop
    ([1, 4, 4, 3], dict(window_dimensions=[1, 3, 3, 1], window_strides=[1, 2, 2, 1], base_dilations=[1, 1, 1, 1],
                        window_dilations=[1, 1, 1, 1], padding=[0, 0, 1, 1, 1, 1, 0, 0])),  # a padded 3x3 pool
]


@pytest.mark.parametrize("body_op,dtypes", [
    ("STABLEHLO_ADD", [np.float32, np.int8, np.float64]), ("MUL", [np.float32, np.int32]),
    ("STABLEHLO_MAXIMUM", [np.float32, np.uint8, np.int64]), ("MINIMUM", [np.float32, np.int16]),
    ("LOGICAL_AND", [np.bool_]), ("STABLEHLO_AND", [np.bool_, np.int32]), ("LOGICAL_OR", [np.bool_]),
])
def test_stablehlo_reduce_window(body_op, dtypes, official):
    rng = np.random.default_rng(9)
    b = ModelBuilder()
    inputs = []
    for k, dt in enumerate(dtypes):
        body = b.add_subgraph(f"body{k}")
        p, q, r = body.add_input("p", dt, []), body.add_input("q", dt, []), body.add_tensor("r", dt, [])
        body.add_op(body_op, [p, q], [r])
        body.mark_output(r)
        for c, (xs, opts) in enumerate(WINDOWS):
            x, v = b.add_input(f"x{k}{c}", dt, xs), b.add_input(f"v{k}{c}", dt, [])
            o = b.add_tensor(f"o{k}{c}", dt, _window_shape(xs, opts))
            b.add_op("STABLEHLO_REDUCE_WINDOW", [x, v], [o], options={**opts, "body_subgraph_index": body.index})
            b.mark_output(o)
            x_vals = _values(rng, dt, xs, -3, 4)
            if np.dtype(dt).kind == "f":
                x_vals = np.nan_to_num(x_vals) / 50
            inputs += [x_vals, np.array(1, dt)]
    model = b.build()
    assert_same(run_ours(model, inputs), run_official(model, inputs), f"STABLEHLO_REDUCE_WINDOW {body_op}")


@pytest.mark.parametrize("fn", ["ADD", "MUL", "MINIMUM", "MAXIMUM", "ALL", "ANY"])
def test_reduce_window(fn, official):
    """The TFLite REDUCE_WINDOW (the same official kernel): constant int64 window shape, strides and dilations."""
    rng = np.random.default_rng(2)
    b = ModelBuilder()
    inputs = []
    for k, dt in enumerate((np.float32, np.int32, np.bool_)):
        x, v = b.add_input(f"x{k}", dt, [5, 6]), b.add_input(f"v{k}", dt, [])
        o = b.add_tensor(f"o{k}", dt, [3, 2])
        consts = [b.add_const(f"{n}{k}", np.array(a, np.int64))
                  for n, a in (("w", [2, 3]), ("s", [1, 2]), ("d", [2, 1]))]
        b.add_op("REDUCE_WINDOW", [x, v, *consts], [o], options={"reduce_function": fn})
        b.mark_output(o)
        inputs += [_values(rng, dt, [5, 6], -3, 4), np.array(1, dt)]
    model = b.build()
    assert_same(run_ours(model, inputs), run_official(model, inputs), f"REDUCE_WINDOW {fn}")


@pytest.mark.parametrize("algorithm,words", [("DEFAULT", 2), ("PHILOX", 2), ("PHILOX", 3), ("THREEFRY", 2)])
def test_stablehlo_rng_bit_generator(algorithm, words, official):
    """The bits and the advanced state; the counter's low word wraps into its high word within the run."""
    b = ModelBuilder()
    s = b.add_input("s", np.uint64, [words])
    for k, (dt, shape) in enumerate(((np.uint32, [7]), (np.int64, [2, 3]), (np.uint64, [5]), (np.int32, [3, 3]))):
        key, out = b.add_tensor(f"k{k}", np.uint64, [words]), b.add_tensor(f"o{k}", dt, shape)
        b.add_op("STABLEHLO_RNG_BIT_GENERATOR", [s], [key, out], options={"algorithm": algorithm})
        b.mark_output(key)
        b.mark_output(out)
    model = b.build()
    state = np.array([0x0123456789ABCDEF, 0xFFFFFFFFFFFFFFFE, 42][:words], np.uint64)
    assert_same(run_ours(model, [state]), run_official(model, [state]), f"STABLEHLO_RNG_BIT_GENERATOR {algorithm}")


def case_model() -> bytes:
    b = ModelBuilder()
    i, x, y = b.add_input("i", np.int32, [1]), b.add_input("x", F32, [2, 3]), b.add_input("y", F32, [2, 3])
    o = b.add_tensor("o", F32, [2, 3])
    branches = []
    for k, op in enumerate(("ADD", "MUL", "SUB")):
        s = b.add_subgraph(f"branch{k}")
        a, c, r = s.add_input("a", F32, [2, 3]), s.add_input("c", F32, [2, 3]), s.add_tensor("r", F32, [2, 3])
        s.add_op(op, [a, c], [r])
        s.mark_output(r)
        branches.append(s.index)
    b.add_op("STABLEHLO_CASE", [i, x, y], [o], options={"branch_subgraph_indices": branches})
    b.mark_output(o)
    return b.build()


@pytest.mark.parametrize("index", [0, 1, 2, 7, -1])
def test_stablehlo_case(index, official):
    """The branch the index names; out of range (7, -1): the last branch, as officially."""
    rng = np.random.default_rng(index + 2)
    inputs = [np.array([index], np.int32), rng.normal(size=(2, 3)).astype(F32), rng.normal(size=(2, 3)).astype(F32)]
    assert_same(run_ours(case_model(), inputs), run_official(case_model(), inputs), f"STABLEHLO_CASE {index}")
