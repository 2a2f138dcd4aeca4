"""MediaPipe's custom ops: Convolution2DTransposeBias (selfie segmentation and other MediaPipe models) and the
attention-mesh ops Landmarks2TransformMatrix, TransformTensorBilinear and TransformLandmarks (version 2; MediaPipe's
face_landmark_with_attention.tflite), described at the end of this file. Importing registers nothing: `register(ops)`
adds the four ops to an op set (lite_numba.plugins.register calls it for the default one).

Semantics (from MediaPipe's CPU kernel, mediapipe/util/tflite/operations/transpose_conv_bias.cc, read for meaning
only): inputs `input` [N,H,W,Ci] float32, `weights` [Co,KH,KW,Ci] (OHWI) float32, `bias` [Co] float32; one output.
The custom options are the raw bytes of TFLite's `TfLiteTransposeConvParams` (not a flexbuffer): int32 padding
(1 = SAME, 2 = VALID, 0 = unknown, treated like VALID), int32 stride_width, int32 stride_height (little-endian);
the op has no `init`, so the executor does not decode them as a flexbuffer, and `parse_options` reads them from the
node (lite_numba.format.custom_options.unpack_struct). The attention-mesh ops' options are flexbuffer maps, which
the executor decodes once and their `init` keeps as the node's state.

    pad_h = max(0, KH - (H - 1) % stride_h - 1) if SAME else 0        (same for w)
    out   = [N, stride_h * (H - 1) + KH - pad_h, stride_w * (W - 1) + KW - pad_w, Co]

and the output, starting from the bias, accumulates input * weight scattered to
(in_y * stride_h - pad_h // 2 + ky, in_x * stride_w - pad_w // 2 + kx), in MediaPipe's loop order (in_y, in_x, in_c,
ky, kx, out_c), so the float sums round as MediaPipe's kernel does. No fused activation. The official LiteRT runtime
does not ship this op; tests compare it with the builtin TRANSPOSE_CONV (with bias) of the same geometry.
"""

from __future__ import annotations

import numpy as np

from lite_numba.format.custom_options import unpack_struct
from lite_numba.ops import custom_op

PADDING_UNKNOWN, PADDING_SAME, PADDING_VALID = 0, 1, 2


def transpose_conv_bias_geometry(h: int, w: int, kh: int, kw: int, padding: int, stride_h: int, stride_w: int
                                 ) -> tuple[int, int, int, int]:
    """(out_h, out_w, pad_top, pad_left) of Convolution2DTransposeBias."""
    pad_h = max(0, kh - (h - 1) % stride_h - 1) if padding == PADDING_SAME else 0
    pad_w = max(0, kw - (w - 1) % stride_w - 1) if padding == PADDING_SAME else 0
    return stride_h * (h - 1) + kh - pad_h, stride_w * (w - 1) + kw - pad_w, pad_h // 2, pad_w // 2


def parse_options(raw: bytes | None) -> tuple[int, int, int]:
    """(padding, stride_w, stride_h) from the raw TfLiteTransposeConvParams bytes."""
    fields = unpack_struct(raw, "<3i")
    if fields is None:
        raise ValueError(f"Convolution2DTransposeBias needs 12 bytes of custom options (padding, stride_width, "
                         f"stride_height as int32), got {0 if raw is None else len(raw)}")
    padding, stride_w, stride_h = fields
    if padding not in (PADDING_UNKNOWN, PADDING_SAME, PADDING_VALID):
        raise ValueError(f"Convolution2DTransposeBias: unknown padding value {padding}")
    if stride_w < 1 or stride_h < 1:
        raise ValueError(f"Convolution2DTransposeBias: strides must be >= 1, got stride_width={stride_w}, "
                         f"stride_height={stride_h}")
    return padding, stride_w, stride_h


def _prepare(ctx):
    ctx.check_num(inputs=3, outputs=1)
    x, w, b = ctx.input(0), ctx.input(1), ctx.input(2)
    ctx.check(x is not None and w is not None and b is not None, "input, weights and bias are all required")
    for t in (x, w, b):
        ctx.check_dtype(t, np.float32)
    ctx.check(len(x.shape) == 4, f"input must be 4-D, got shape {list(x.shape)}")
    ctx.check(len(w.shape) == 4, f"weights must be 4-D (OHWI), got shape {list(w.shape)}")
    ctx.check(len(b.shape) == 1, f"bias must be 1-D, got shape {list(b.shape)}")
    ctx.check(w.shape[3] == x.shape[3], f"weights input depth {w.shape[3]} != input depth {x.shape[3]}")
    ctx.check(w.shape[0] == b.shape[0], f"bias size {b.shape[0]} != weights output depth {w.shape[0]}")
    padding, stride_w, stride_h = parse_options(ctx.node.custom_options)
    n, h, wd, _ = x.shape
    co, kh, kw, _ = w.shape
    oh, ow, pad_top, pad_left = transpose_conv_bias_geometry(h, wd, kh, kw, padding, stride_h, stride_w)
    ctx.check(oh >= 0 and ow >= 0, f"empty output geometry {oh}x{ow}")
    ctx.set_output(0, (n, oh, ow, co), np.float32)
    return stride_h, stride_w, pad_top, pad_left


@custom_op("Convolution2DTransposeBias", version=1, prepare=_prepare, register=False)
def convolution2d_transpose_bias(x, w, b, out, stride_h, stride_w, pad_top, pad_left):
    """out = bias + transposed convolution of x by w (OHWI), MediaPipe's accumulation order."""
    nb, h, wd, ci = x.shape
    co, kh, kw, _ = w.shape
    oh, ow = out.shape[1], out.shape[2]
    for n in range(nb):
        for oy in range(oh):
            for ox in range(ow):
                for oc in range(co):
                    out[n, oy, ox, oc] = b[oc]
        for iy in range(h):
            for ix in range(wd):
                y0 = iy * stride_h - pad_top
                x0 = ix * stride_w - pad_left
                for ic in range(ci):
                    v = x[n, iy, ix, ic]
                    for ky in range(kh):
                        oy = y0 + ky
                        if oy < 0 or oy >= oh:
                            continue
                        for kx in range(kw):
                            ox = x0 + kx
                            if ox < 0 or ox >= ow:
                                continue
                            for oc in range(co):
                                out[n, oy, ox, oc] += v * w[oc, ky, kx, ic]


# --- face mesh with attention: Landmarks2TransformMatrix / TransformTensorBilinear / TransformLandmarks (v2) ---------
#
# Semantics from MediaPipe's CPU kernels (mediapipe/util/tflite/operations/{landmarks_to_transform_matrix,
# transform_tensor_bilinear,transform_landmarks}.cc and the flexbuffer option parsers of the TFLite GPU delegate's
# mediapipe/ folder), read for meaning only. Every value is float32 and rounds as those kernels do (float products and
# sums in their order; where the C++ mixes in a double literal the expression is evaluated in double and rounded
# once). The official LiteRT runtime ships none of them: tests compare with MediaPipe's own runtime (recorded
# outputs, tests/test_mediapipe_ops.py).
#
# Landmarks2TransformMatrix v2: landmarks [1, N, 3] -> [1, 4, 4] (row-major 4x4). Options (flexbuffer map):
# subset_idxs (flat list read as pairs; an odd last index pairs with itself), left_rotation_idx, right_rotation_idx,
# target_rotation_radians, output_height, output_width, scale_x, scale_y. Landmark i is (v[3i], v[3i+1], v[3i+2]).
#   rot = target - atan2(right.y - left.y, right.x - left.x)
#   subset landmarks (x, y, 1) rotated by R(rot); their bounding box (min/max of x and y) gives the crop size
#   (w, h) and centre c, rotated back by R(-rot)
#   M = T(c) . R(-rot) . S(scale_x * w / output_width, scale_y * h / output_height) . T(-output_width / 2,
#       -output_height / 2), each product a float 4x4 product (sum over k in order, starting from 0).
#
# TransformTensorBilinear v2: x [1, H, W, C], matrix [1, 4, 4] -> out [1, OH, OW, OC] (the output keeps the shape the
# model declares; OC <= C). With rows a = m[0:4], b = m[4:8] corrected for pixel centres (a3 += a0 / 2 + a1 / 2 - 1/2
# in double), output pixel (oy, ox) samples x at (tx, ty) = (a0 ox + a1 oy + a2 0 + a3, b0 ox + b1 oy + b2 0 + b3):
# zero when tx < 0, tx > W - 1, ty < 0 or ty > H - 1 (or NaN), else bilinear between the four neighbours
# (neighbours outside the input read 0).
#
# TransformLandmarks v2: landmarks [1, N, D] (D = 2 or 3), matrix [1, 4, 4] -> [1, N, D]:
#   x' = m0 x + m1 y + m2 0 + m3,  y' = m4 x + m5 y + m6 0 + m7,  z' = z.
# Batches beyond 1 are refused: MediaPipe's kernels read and write only the first.


def _keep_options(options):
    """init: the custom options as the executor decoded them (a flexbuffer map -> dict), checked by prepare (which
    can name the node)."""
    return options


def _flex_options(ctx, required: tuple[str, ...]) -> dict:
    opts = ctx.state
    ctx.check(isinstance(opts, dict), f"{ctx.op_name}: custom options must be a flexbuffer map")
    missing = [k for k in required if k not in opts]
    ctx.check(not missing, f"{ctx.op_name}: custom options lack {', '.join(missing)}")
    return opts


def _data_and_matrix(ctx, what: str):
    """(input 0, input 1) of the two Transform ops: float32 data (`what` names it) and a float32 4x4 matrix."""
    ctx.check_num(inputs=2, outputs=1)
    x, m = ctx.input(0), ctx.input(1)
    ctx.check(x is not None, f"{ctx.op_name}: the {what} input is missing")
    ctx.check_dtype(x, np.float32)
    ctx.check(m is not None, f"{ctx.op_name}: the transformation matrix input is missing")
    ctx.check_dtype(m, np.float32)
    ctx.check(m.size >= 8, f"{ctx.op_name}: the transformation matrix needs at least 8 values (a [1, 4, 4] "
                           f"matrix), got shape {list(m.shape)}")
    return x, m


def _landmarks_to_matrix_prepare(ctx):
    ctx.check_num(inputs=1, outputs=1)
    lm = ctx.input(0)
    ctx.check(lm is not None, "Landmarks2TransformMatrix: the landmarks input is missing")
    ctx.check_dtype(lm, np.float32)
    ctx.check(len(lm.shape) == 3, f"Landmarks2TransformMatrix: landmarks must be 3-D, got shape {list(lm.shape)}")
    o = _flex_options(ctx, ("subset_idxs", "left_rotation_idx", "right_rotation_idx", "target_rotation_radians",
                            "output_height", "output_width", "scale_x", "scale_y"))
    flat = [int(v) for v in o["subset_idxs"]]
    ctx.check(len(flat) > 0, "Landmarks2TransformMatrix: subset_idxs is empty")
    if len(flat) % 2:
        flat.append(flat[-1])
    left, right = int(o["left_rotation_idx"]), int(o["right_rotation_idx"])
    out_h, out_w = int(o["output_height"]), int(o["output_width"])
    scale_x, scale_y = float(o["scale_x"]), float(o["scale_y"])
    ctx.check(out_h > 0 and out_w > 0, f"Landmarks2TransformMatrix: output size must be positive, got "
                                       f"{out_h}x{out_w}")
    ctx.check(scale_x > 0 and scale_y > 0, f"Landmarks2TransformMatrix: scale_x and scale_y must be positive, got "
                                           f"{scale_x}, {scale_y}")
    n_landmarks = lm.size // 3
    for name, v in [("left_rotation_idx", left), ("right_rotation_idx", right)] + [("subset_idxs", v) for v in flat]:
        ctx.check(0 <= v < n_landmarks, f"Landmarks2TransformMatrix: {name} {v} is outside the {n_landmarks} "
                                        f"landmarks of shape {list(lm.shape)}")
    ctx.set_output(0, (1, 4, 4), np.float32)
    return (ctx.const(np.array(flat, np.int32)), left, right, np.float32(o["target_rotation_radians"]), out_h, out_w,
            np.float32(scale_x), np.float32(scale_y))


@custom_op("Landmarks2TransformMatrix", version=2, prepare=_landmarks_to_matrix_prepare, init=_keep_options,
           register=False)
def landmarks_to_transform_matrix(lm, out, subset, left, right, target, out_h, out_w, scale_x, scale_y):
    """MediaPipe's Landmarks2TransformMatrix v2 (see the notes above), float32 throughout."""
    f = lm.reshape(-1)
    zero, one = np.float32(0.0), np.float32(1.0)
    rot = np.float32(np.float32(target) - np.float32(np.arctan2(f[right * 3 + 1] - f[left * 3 + 1],
                                                                 f[right * 3] - f[left * 3])))
    c, s = np.float32(np.cos(rot)), np.float32(np.sin(rot))
    ci, si = np.float32(np.cos(-rot)), np.float32(np.sin(-rot))
    max_x = max_y = min_x = min_y = z0 = zero
    for k in range(subset.size):
        x, y = f[subset[k] * 3], f[subset[k] * 3 + 1]
        rx = zero + c * x + (-s) * y + zero * one
        ry = zero + s * x + c * y + zero * one
        if k == 0:
            max_x, max_y, min_x, min_y = rx, ry, rx, ry
            z0 = zero + zero * x + zero * y + one * one
        else:
            if max_x < rx:
                max_x = rx
            if max_y < ry:
                max_y = ry
            if min_x > rx:
                min_x = rx
            if min_y > ry:
                min_y = ry
    crop_w, crop_h = max_x - min_x, max_y - min_y
    mx, my = (min_x + max_x) / np.float32(2.0), (min_y + max_y) / np.float32(2.0)
    cx = zero + ci * mx + (-si) * my + zero * z0
    cy = zero + si * mx + ci * my + zero * z0
    t = np.eye(4, dtype=np.float32)
    step = np.eye(4, dtype=np.float32)
    tmp = np.empty((4, 4), np.float32)
    for m in range(4):
        step[:, :] = np.eye(4, dtype=np.float32)
        if m == 0:
            step[0, 3], step[1, 3] = cx, cy
        elif m == 1:
            r2 = -rot
            step[0, 0], step[0, 1] = np.float32(np.cos(r2)), -np.float32(np.sin(r2))
            step[1, 0], step[1, 1] = np.float32(np.sin(r2)), np.float32(np.cos(r2))
        elif m == 2:
            step[0, 0] = np.float32(scale_x) * crop_w / np.float32(out_w)  # float: the scalar may arrive as double
            step[1, 1] = np.float32(scale_y) * crop_h / np.float32(out_h)
        else:
            step[0, 3] = np.float32(-1.0 * (out_w / 2.0))
            step[1, 3] = np.float32(-1.0 * (out_h / 2.0))
        for r in range(4):
            for col in range(4):
                acc = zero
                for k in range(4):
                    acc += t[r, k] * step[k, col]
                tmp[r, col] = acc
        t[:, :] = tmp
    o = out.reshape(-1)
    for i in range(16):
        o[i] = t[i // 4, i % 4]


def _transform_tensor_prepare(ctx):
    x, _ = _data_and_matrix(ctx, "data")
    ctx.check(len(x.shape) == 4 and x.shape[0] == 1, f"TransformTensorBilinear: the data input must be "
                                                     f"[1, H, W, C], got shape {list(x.shape)}")
    o = _flex_options(ctx, ())
    declared = tuple(int(d) for d in ctx.output(0).shape)
    if len(declared) == 4 and all(d > 0 for d in declared):
        shape = declared  # MediaPipe's kernel keeps the output shape the model declares
    else:
        ctx.check("output_height" in o and "output_width" in o,
                  "TransformTensorBilinear: no static output shape and no output_height/output_width options")
        shape = (1, int(o["output_height"]), int(o["output_width"]), int(x.shape[3]))
    ctx.check(shape[0] == 1 and shape[3] <= x.shape[3], f"TransformTensorBilinear: output shape {list(shape)} does "
                                                        f"not fit input shape {list(x.shape)}")
    ctx.set_output(0, shape, np.float32)
    return ()


@custom_op("TransformTensorBilinear", version=2, prepare=_transform_tensor_prepare, init=_keep_options,
           register=False)
def transform_tensor_bilinear(x, m, out):
    """MediaPipe's TransformTensorBilinear v2 (see the notes above)."""
    mf = m.reshape(-1)
    h, w = x.shape[1], x.shape[2]
    oh, ow, oc = out.shape[1], out.shape[2], out.shape[3]
    a0, a1, a2 = mf[0], mf[1], mf[2]
    b0, b1, b2 = mf[4], mf[5], mf[6]
    # pixel-centre correction, evaluated in double as the C++ does (float * 0.5 promotes)
    a3 = np.float32(np.float64(mf[3]) + (np.float64(a0) * 0.5 + np.float64(a1) * 0.5 - 0.5))
    b3 = np.float32(np.float64(mf[7]) + (np.float64(b0) * 0.5 + np.float64(b1) * 0.5 - 0.5))
    zero, one = np.float32(0.0), np.float32(1.0)
    for oy in range(oh):
        fy = np.float32(oy)
        for ox in range(ow):
            fx = np.float32(ox)
            tx = a0 * fx + a1 * fy + a2 * zero + a3 * one
            ty = b0 * fx + b1 * fy + b2 * zero + b3 * one
            # out of bounds (NaN too: MediaPipe would index with an undefined int there)
            if not (tx >= zero and tx <= np.float32(w - 1) and ty >= zero and ty <= np.float32(h - 1)):
                for z in range(oc):
                    out[0, oy, ox, z] = zero
                continue
            fl_x, fl_y = np.floor(tx), np.floor(ty)
            x0, y0 = int(fl_x), int(fl_y)
            rc = np.float64(tx - fl_x)
            lc = np.float64(ty - fl_y)
            rcf, lcf = np.float32(rc), np.float32(lc)
            in00 = y0 < h and x0 < w
            in01 = y0 < h and x0 + 1 < w
            in10 = y0 + 1 < h and x0 < w
            in11 = y0 + 1 < h and x0 + 1 < w
            for z in range(oc):
                q11 = x[0, y0, x0, z] if in00 else zero
                q21 = x[0, y0, x0 + 1, z] if in01 else zero
                q12 = x[0, y0 + 1, x0, z] if in10 else zero
                q22 = x[0, y0 + 1, x0 + 1, z] if in11 else zero
                upper = np.float32((1.0 - rc) * np.float64(q11) + np.float64(rcf * q21))
                lower = np.float32((1.0 - rc) * np.float64(q12) + np.float64(rcf * q22))
                out[0, oy, ox, z] = np.float32(np.float64(lcf * lower) + (1.0 - lc) * np.float64(upper))


def _transform_landmarks_prepare(ctx):
    lm, _ = _data_and_matrix(ctx, "landmarks")
    ctx.check(len(lm.shape) == 3, f"TransformLandmarks: landmarks must be 3-D [1, N, D], got {list(lm.shape)}")
    ctx.check(lm.shape[0] == 1, f"TransformLandmarks: batch {lm.shape[0]} (MediaPipe's kernel handles batch 1 only)")
    ctx.check(lm.shape[2] in (2, 3), f"TransformLandmarks: landmarks must have 2 or 3 values each, got "
                                     f"{lm.shape[2]}")
    ctx.set_output(0, lm.shape, np.float32)
    return ()


@custom_op("TransformLandmarks", version=2, prepare=_transform_landmarks_prepare, register=False)
def transform_landmarks(lm, m, out):
    """MediaPipe's TransformLandmarks v2 (see the notes above)."""
    mf = m.reshape(-1)
    zero, one = np.float32(0.0), np.float32(1.0)
    d = lm.shape[2]
    for i in range(lm.shape[1]):
        x, y = lm[0, i, 0], lm[0, i, 1]
        out[0, i, 0] = mf[0] * x + mf[1] * y + mf[2] * zero + mf[3] * one
        out[0, i, 1] = mf[4] * x + mf[5] * y + mf[6] * zero + mf[7] * one
        if d == 3:
            out[0, i, 2] = lm[0, i, 2]


def register(ops) -> None:
    """Add MediaPipe's custom ops to `ops` (a CustomOpRegistry or a MutableOpResolver)."""
    for op in (convolution2d_transpose_bias, landmarks_to_transform_matrix, transform_tensor_bilinear,
               transform_landmarks):
        ops.add_custom(op.name, op, *op.meta["versions"])
