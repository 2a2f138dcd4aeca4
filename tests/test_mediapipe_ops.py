"""MediaPipe's Convolution2DTransposeBias custom op (plugins/mediapipe.py) against the official runtime.

The official LiteRT runtime does not ship this op, so the oracle is the official builtin TRANSPOSE_CONV (version 3,
with bias) of the same geometry — same maths, possibly another float summation order: 1e-5 relative.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lite_numba.plugins.mediapipe import transpose_conv_bias_geometry

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close, require_official, run_official

require_official()

SAME, VALID = 1, 2
FEW = settings(max_examples=30, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def _custom_model(x_shape, w, bias, padding, sh, sw, out_shape, const_weights=True) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, list(x_shape))
    if const_weights:
        wt, bt = b.add_const("w", w), b.add_const("b", bias)
    else:  # MediaPipe models feed weights and bias through DEQUANTIZE (float16): non-constant tensors
        w16, b16 = b.add_const("w16", w.astype(np.float16)), b.add_const("b16", bias.astype(np.float16))
        wt = b.add_tensor("w", np.float32, list(w.shape))
        bt = b.add_tensor("b", np.float32, list(bias.shape))
        b.add_op("DEQUANTIZE", [w16], [wt])
        b.add_op("DEQUANTIZE", [b16], [bt])
    y = b.add_tensor("y", np.float32, list(out_shape))
    b.add_custom_op("Convolution2DTransposeBias", [x, wt, bt], [y], options=struct.pack("<3i", padding, sw, sh))
    b.mark_output(y)
    return b.build()


def _builtin_model(x_shape, w, bias, padding, sh, sw, out_shape) -> bytes:
    """The official TRANSPOSE_CONV with the custom op's output shape; SAME/VALID then give the same placement."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, list(x_shape))
    s = b.add_const("shape", np.array(out_shape, np.int32))
    y = b.add_tensor("y", np.float32, list(out_shape))
    b.add_op("TRANSPOSE_CONV", [s, b.add_const("w", w), x, b.add_const("b", bias)], [y],
             options={"padding": "SAME" if padding == SAME else "VALID", "stride_h": sh, "stride_w": sw}, version=3)
    b.mark_output(y)
    return b.build()


def _run(data: bytes, inputs) -> list[np.ndarray]:
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    for d, v in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], v)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


geometry = st.fixed_dictionaries({
    "n": st.integers(1, 2), "h": st.integers(1, 6), "w": st.integers(1, 6), "ci": st.integers(1, 5),
    "co": st.integers(1, 6), "kh": st.integers(1, 4), "kw": st.integers(1, 4), "sh": st.integers(1, 3),
    "sw": st.integers(1, 3), "padding": st.sampled_from([SAME, VALID]), "seed": st.integers(0, 2**31 - 1),
})


@FEW
@given(geometry)
def test_convolution2d_transpose_bias_matches_official_transpose_conv(g):
    rng = np.random.default_rng(g["seed"])
    x_shape = (g["n"], g["h"], g["w"], g["ci"])
    w = rng.standard_normal((g["co"], g["kh"], g["kw"], g["ci"])).astype(np.float32)
    bias = rng.standard_normal(g["co"]).astype(np.float32)
    oh, ow, _, _ = transpose_conv_bias_geometry(g["h"], g["w"], g["kh"], g["kw"], g["padding"], g["sh"], g["sw"])
    out_shape = (g["n"], oh, ow, g["co"])
    x = rng.standard_normal(x_shape).astype(np.float32)
    (ours,) = _run(_custom_model(x_shape, w, bias, g["padding"], g["sh"], g["sw"], out_shape), [x])
    (ref,) = run_official(_builtin_model(x_shape, w, bias, g["padding"], g["sh"], g["sw"], out_shape), [x])
    assert ours.shape == out_shape
    assert_close(ours, ref, 1e-5)


def test_selfie_segmentation_geometry_with_dequantized_weights():
    """The node of MediaPipe's selfie segmentation: 128x128x16 -> 256x256x1, 2x2 kernel, stride 2, SAME, weights
    and bias from float16 DEQUANTIZE (not constant at prepare time)."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((1, 2, 2, 16)).astype(np.float16).astype(np.float32)
    bias = rng.standard_normal(1).astype(np.float16).astype(np.float32)
    x = rng.uniform(-1, 1, (1, 128, 128, 16)).astype(np.float32)
    out_shape = (1, 256, 256, 1)
    (ours,) = _run(_custom_model(x.shape, w, bias, SAME, 2, 2, out_shape, const_weights=False), [x])
    (ref,) = run_official(_builtin_model(x.shape, w, bias, SAME, 2, 2, out_shape), [x])
    assert_close(ours, ref, 1e-5)


@pytest.mark.parametrize("raw, match", [
    (b"\x01\x00\x00\x00", "needs 12 bytes"),
    (struct.pack("<3i", 7, 1, 1), "unknown padding"),
    (struct.pack("<3i", SAME, 0, 1), "strides must be >= 1"),
])
def test_bad_custom_options_are_reported(raw, match):
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 2, 2, 1])
    y = b.add_tensor("y", np.float32, [1, 4, 4, 1])
    b.add_custom_op("Convolution2DTransposeBias",
                    [x, b.add_const("w", np.ones((1, 2, 2, 1), np.float32)), b.add_const("b", np.zeros(1, np.float32))],
                    [y], options=raw)
    b.mark_output(y)
    it = Interpreter(model_content=b.build())
    with pytest.raises(Exception, match=match):
        it.allocate_tensors()


# --- a whole MediaPipe model ----------------------------------------------------------------------------------------

REAL = __import__("pathlib").Path(__file__).parent / "data" / "real"


def _with_builtin_transpose_conv(data: bytes) -> bytes:
    """The same model with every Convolution2DTransposeBias replaced by the official TRANSPOSE_CONV (version 3,
    with bias, constant output shape), rebuilt tensor by tensor with ModelBuilder (indices preserved), so the
    official runtime can run the whole graph."""
    from lite_numba.plugins.mediapipe import parse_options

    from lite_numba.model import load_model

    plan = load_model(data)
    assert len(plan.subgraphs) == 1
    sg = plan.subgraphs[0]
    b = ModelBuilder()
    for t in sg.tensors:
        q = t.quantization
        quant = None if q.scales.size == 0 else {"scales": q.scales.tolist(), "zero_points": q.zero_points.tolist(),
                                                  "quantized_dimension": q.quantized_dimension}
        if t.is_const:
            k = b.add_const(t.name, np.array(t.data), quant=quant)
        else:
            k = b.add_tensor(t.name, t.dtype, list(t.shape), quant=quant)
        assert k == t.index
    for node in sg.nodes:
        if node.is_custom:
            assert node.op_name == "Convolution2DTransposeBias"
            padding, sw, sh = parse_options(node.custom_options)
            x, w, bias = node.inputs
            shape = b.add_const(f"shape_{node.index}", np.array(sg.tensors[node.outputs[0]].shape, np.int32))
            b.add_op("TRANSPOSE_CONV", [shape, w, x, bias], list(node.outputs), version=3,
                     options={"padding": "SAME" if padding == SAME else "VALID", "stride_h": sh, "stride_w": sw})
        else:
            b.add_op(node.op_name, list(node.inputs), list(node.outputs), options=node.options,
                     version=node.version)
    for i in sg.inputs:
        b.mark_input(i)
    for i in sg.outputs:
        b.mark_output(i)
    return b.build()


def test_mediapipe_selfie_segmentation_matches_official_with_builtin_transpose_conv(official, monkeypatch):
    """MediaPipe's selfie segmentation (tests/data/real/README.md) in lite-numba, as shipped (custom op), against
    the official runtime on the rewritten model (same tensor indices): the output and every intermediate tensor
    (the mask itself is ~0 on random images; the custom op's logits are not). Python executor: same kernels, no
    runner compile for ~200 nodes."""
    monkeypatch.setenv("LITE_NUMBA_EXECUTOR", "python")
    data = (REAL / "mediapipe_selfie_segmentation.tflite").read_bytes()
    x = np.random.default_rng(3).uniform(0, 1, (1, 256, 256, 3)).astype(np.float32)
    ours = Interpreter(model_content=data, experimental_preserve_all_tensors=True)
    ours.allocate_tensors()
    ref = official.Interpreter(
        model_content=_with_builtin_transpose_conv(data), num_threads=1, experimental_preserve_all_tensors=True,
        experimental_op_resolver_type=official.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    ref.allocate_tensors()
    for it in (ours, ref):
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
    checked = set()
    for op in ref._get_ops_details():
        for t in op["outputs"]:
            r = ref.get_tensor(int(t))
            o = ours.get_tensor(int(t))
            scale = max(1.0, float(np.abs(r).max()))
            err = float(np.abs(o.astype(np.float64) - r).max())
            assert err <= 1e-4 * scale, f"node {op['index']} ({op['op_name']}): max error {err:.3g}, scale {scale:.3g}"
            checked.add(op["op_name"])
    assert "TRANSPOSE_CONV" in checked
    out = ours.get_tensor(ours.get_output_details()[0]["index"])
    assert out.shape == (1, 256, 256, 1) and 0.0 <= float(out.min()) and float(out.max()) <= 1.0
