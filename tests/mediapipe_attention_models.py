"""Small models exercising MediaPipe's attention-mesh custom ops (Landmarks2TransformMatrix, TransformTensorBilinear,
TransformLandmarks, version 2), shared by tests/test_mediapipe_ops.py and scripts/record_mediapipe_oracle.py.

Each model takes one float32 image [1, 1, N, 3] with values in [0, 1] (what MediaPipe's TensorConverterCalculator
makes of an SRGB image, so MediaPipe's own runtime can run it as the oracle) and scales it to landmark coordinates.
"""

from __future__ import annotations

import numpy as np
from flatbuffers import flexbuffers

from lite_numba.builder import ModelBuilder

# (name, landmarks N, landmark scale, subset_idxs, left, right, target rotation, out h, out w, scale x, scale y,
#  feature map [H, W, C], bilinear output channels)
CASES = [
    ("odd_subset", 12, 11.0, [0, 3, 5, 7, 9, 2, 11], 1, 8, 0.25, 7, 6, 1.5, 1.25, (12, 10, 4), 3),
    ("pairs", 16, 20.0, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15], 4, 11, 0.0, 8, 8, 1.5, 1.5,
     (24, 24, 5), 5),
    ("wide", 9, 30.0, [8, 0, 4, 4], 2, 6, -1.0, 5, 11, 2.0, 0.75, (16, 32, 2), 2),
]


def _flex(build) -> bytes:
    fbb = flexbuffers.Builder()
    with fbb.Map():
        build(fbb)
    return bytes(fbb.Finish())


def l2m_options(subset, left, right, target, out_h, out_w, scale_x, scale_y) -> bytes:
    def build(fbb):
        fbb.Key("subset_idxs")
        fbb.TypedVectorFromElements([int(v) for v in subset])
        fbb.Int("left_rotation_idx", int(left))
        fbb.Int("right_rotation_idx", int(right))
        fbb.Float("target_rotation_radians", float(target))
        fbb.Int("output_height", int(out_h))
        fbb.Int("output_width", int(out_w))
        fbb.Float("scale_x", float(scale_x))
        fbb.Float("scale_y", float(scale_y))
    return _flex(build)


def bilinear_options(out_h, out_w) -> bytes:
    def build(fbb):
        fbb.Int("output_height", int(out_h))
        fbb.Int("output_width", int(out_w))
    return _flex(build)


def attention_ops_model(case) -> bytes:
    """image [1, 1, N, 3] -> landmarks = image * scale [1, N, 3] -> M = Landmarks2TransformMatrix(landmarks);
    outputs M, TransformTensorBilinear(const feature map, M), TransformLandmarks(landmarks, M) and
    TransformLandmarks(landmarks[..., :2], M)."""
    (name, n, lscale, subset, left, right, target, oh, ow, sx, sy, fmap, oc) = case
    rng = np.random.default_rng(len(name) * 7919 + n)
    b = ModelBuilder()
    img = b.add_input("image", np.float32, [1, 1, n, 3])
    scaled = b.add_tensor("scaled", np.float32, [1, 1, n, 3])
    b.add_op("MUL", [img, b.add_const("scale", np.array([lscale], np.float32))], [scaled])
    lm = b.add_tensor("landmarks", np.float32, [1, n, 3])
    b.add_op("RESHAPE", [scaled, b.add_const("lm_shape", np.array([1, n, 3], np.int32))], [lm])
    m = b.add_tensor("matrix", np.float32, [1, 4, 4])
    b.add_custom_op("Landmarks2TransformMatrix", [lm], [m],
                    options=l2m_options(subset, left, right, target, oh, ow, sx, sy), version=2)
    feat = b.add_const("features", rng.standard_normal((1, *fmap)).astype(np.float32))
    crop = b.add_tensor("crop", np.float32, [1, oh, ow, oc])
    b.add_custom_op("TransformTensorBilinear", [feat, m], [crop], options=bilinear_options(oh, ow), version=2)
    lm3 = b.add_tensor("landmarks3", np.float32, [1, n, 3])
    b.add_custom_op("TransformLandmarks", [lm, m], [lm3], version=2)
    lm_xy = b.add_tensor("landmarks_xy", np.float32, [1, n, 2])
    b.add_op("SLICE", [lm, b.add_const("begin", np.array([0, 0, 0], np.int32)),
                       b.add_const("size", np.array([1, n, 2], np.int32))], [lm_xy])
    lm2 = b.add_tensor("landmarks2", np.float32, [1, n, 2])
    b.add_custom_op("TransformLandmarks", [lm_xy, m], [lm2], version=2)
    for t in (m, crop, lm3, lm2):
        b.mark_output(t)
    return b.build()


def image_for(case, seed: int) -> np.ndarray:
    """The uint8 SRGB image [1, N, 3] fed to MediaPipe for `case` and `seed`."""
    return np.random.default_rng(1000 * seed + case[1]).integers(0, 256, (1, case[1], 3)).astype(np.uint8)
