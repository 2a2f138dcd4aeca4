"""MediaPipe's Convolution2DTransposeBias custom op (plugins/mediapipe.py) against the official runtime.

The official LiteRT runtime does not ship this op, so the oracle is the official builtin TRANSPOSE_CONV (version 3,
with bias) of the same geometry — same maths, possibly another float summation order: 1e-5 relative.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from conftest import scaled
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lite_numba.plugins.mediapipe import transpose_conv_bias_geometry
from mediapipe_attention_models import CASES as ATTENTION_CASES
from mediapipe_attention_models import attention_ops_model, bilinear_options, l2m_options

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close, require_official, run_official

# imported under the name the hypothesis tests' bodies use: a derandomized test's examples are seeded by its
# source
from lite_numba.testing import run_ours as _run

require_official()

SAME, VALID = 1, 2
FEW = settings(max_examples=scaled(30), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


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
    assert_close(ours, ref, family="accumulation")


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


SELFIE_ORACLE = __import__("pathlib").Path(__file__).parent / "data" / "mediapipe" / "selfie.npz"


def test_mediapipe_selfie_segmentation_matches_mediapipe(monkeypatch):
    """MediaPipe's selfie segmentation (tests/data/real/README.md), as shipped (custom op
    Convolution2DTransposeBias), against MediaPipe's own output recorded by tests/record_selfie_oracle.py (its TFLite
    with its custom-op resolver; the exact float input it built is recorded too). Through the compiled runner (the
    default) and the Python executor, which must also agree with each other. The mask of a random image is tiny
    (~1e-7: a sigmoid of very negative logits), so the per-element relative criterion compares the logits."""
    rec = np.load(SELFIE_ORACLE)
    data = (REAL / "mediapipe_selfie_segmentation.tflite").read_bytes()
    outs = {}
    for mode in ("compiled", "python"):
        monkeypatch.setenv("LITE_NUMBA_EXECUTOR", mode)
        it = Interpreter(model_content=data)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], rec["input"])
        it.invoke()
        outs[mode] = it.get_tensor(it.get_output_details()[0]["index"])
        assert_close(outs[mode], rec["output"], family="model", what=f"{mode} executor vs MediaPipe")
    assert_close(outs["compiled"], outs["python"], family="model", what="compiled vs python executor")


# --- face mesh with attention: Landmarks2TransformMatrix, TransformTensorBilinear, TransformLandmarks (v2) ---------
# The official runtime ships none of these; the oracle is MediaPipe's own runtime (0.10.14, its TFLite with its
# custom-op resolver), recorded by scripts/record_mediapipe_oracle.py into tests/data/mediapipe/attention_ops.npz for
# the models of tests/mediapipe_attention_models.py (recorded input included). The whole
# face_landmark_with_attention.tflite of the mediapipe 0.10.14 wheel also matched MediaPipe to 1.1e-6 relative on
# 3 random images (scripts/real_models.py survey, not bundled: 2.5 MB).

ATTENTION_ORACLE = __import__("pathlib").Path(__file__).parent / "data" / "mediapipe" / "attention_ops.npz"


@pytest.mark.parametrize("case", ATTENTION_CASES, ids=[c[0] for c in ATTENTION_CASES])
def test_attention_ops_bit_exact_with_mediapipe(case):
    rec = np.load(ATTENTION_ORACLE)
    it = Interpreter(model_content=attention_ops_model(case))
    it.allocate_tensors()
    seeds = sorted({int(k.split("/")[1]) for k in rec.files if k.startswith(case[0] + "/")})
    assert seeds, f"no recorded MediaPipe outputs for {case[0]}"
    for seed in seeds:
        x = rec[f"{case[0]}/{seed}/input"].reshape(1, 1, case[1], 3)
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        for k, d in enumerate(it.get_output_details()):  # matrix, bilinear crop, landmarks xyz, landmarks xy
            np.testing.assert_array_equal(it.get_tensor(d["index"]).ravel(), rec[f"{case[0]}/{seed}/out{k}"],
                                          err_msg=f"{case[0]} seed {seed} output {k}")


def _l2m_model(n, options: bytes, shape=None) -> bytes:
    b = ModelBuilder()
    lm = b.add_input("lm", np.float32, shape or [1, n, 3])
    m = b.add_tensor("m", np.float32, [1, 4, 4])
    b.add_custom_op("Landmarks2TransformMatrix", [lm], [m], options=options, version=2)
    b.mark_output(m)
    return b.build()


@pytest.mark.parametrize("options, shape, match", [
    (l2m_options([0, 1], 0, 9, 0.0, 4, 4, 1.0, 1.0), None, "right_rotation_idx 9 is outside the 5 landmarks"),
    (l2m_options([0, 7], 0, 1, 0.0, 4, 4, 1.0, 1.0), None, "subset_idxs 7 is outside"),
    (l2m_options([], 0, 1, 0.0, 4, 4, 1.0, 1.0), None, "subset_idxs is empty"),
    (l2m_options([0, 1], 0, 1, 0.0, 0, 4, 1.0, 1.0), None, "output size must be positive"),
    (l2m_options([0, 1], 0, 1, 0.0, 4, 4, 0.0, 1.0), None, "scale_x and scale_y must be positive"),
    (b"\x00\x01", None, "flexbuffer map|lack"),
    (l2m_options([0, 1], 0, 1, 0.0, 4, 4, 1.0, 1.0), [1, 1, 5, 3], "must be 3-D"),
])
def test_landmarks_to_transform_matrix_bad_models_are_reported(options, shape, match):
    it = Interpreter(model_content=_l2m_model(5, options, shape))
    with pytest.raises(Exception, match=match):
        it.allocate_tensors()


@pytest.mark.parametrize("lm_shape, m_shape, match", [
    ([2, 4, 3], [1, 4, 4], "batch 1 only"),
    ([1, 4, 4], [1, 4, 4], "2 or 3 values each"),
    ([1, 4, 3], [1, 2, 2], "at least 8 values"),
])
def test_transform_landmarks_bad_shapes_are_reported(lm_shape, m_shape, match):
    b = ModelBuilder()
    lm = b.add_input("lm", np.float32, lm_shape)
    m = b.add_input("m", np.float32, m_shape)
    y = b.add_tensor("y", np.float32, lm_shape)
    b.add_custom_op("TransformLandmarks", [lm, m], [y], version=2)
    b.mark_output(y)
    it = Interpreter(model_content=b.build())
    with pytest.raises(Exception, match=match):
        it.allocate_tensors()


def test_transform_tensor_bilinear_output_wider_than_input_is_reported():
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 6, 6, 2])
    m = b.add_input("m", np.float32, [1, 4, 4])
    y = b.add_tensor("y", np.float32, [1, 4, 4, 3])
    b.add_custom_op("TransformTensorBilinear", [x, m], [y], version=2,
                    options=bilinear_options(4, 4))
    b.mark_output(y)
    it = Interpreter(model_content=b.build())
    with pytest.raises(Exception, match="does not fit input shape"):
        it.allocate_tensors()


def test_transform_tensor_bilinear_nan_matrix_gives_zeros_not_a_crash():
    """MediaPipe would index with an undefined int for NaN coordinates; here they count as out of bounds."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 6, 6, 2])
    m = b.add_input("m", np.float32, [1, 4, 4])
    y = b.add_tensor("y", np.float32, [1, 3, 3, 2])
    b.add_custom_op("TransformTensorBilinear", [x, m], [y], version=2,
                    options=bilinear_options(3, 3))
    b.mark_output(y)
    (out,) = _run(b.build(), [np.ones((1, 6, 6, 2), np.float32), np.full((1, 4, 4), np.nan, np.float32)])
    np.testing.assert_array_equal(out, np.zeros((1, 3, 3, 2), np.float32))
