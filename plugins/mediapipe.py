"""MediaPipe's custom op Convolution2DTransposeBias (selfie segmentation and other MediaPipe models).

Semantics (from MediaPipe's CPU kernel, mediapipe/util/tflite/operations/transpose_conv_bias.cc, read for meaning
only): inputs `input` [N,H,W,Ci] float32, `weights` [Co,KH,KW,Ci] (OHWI) float32, `bias` [Co] float32; one output.
The custom options are the raw bytes of TFLite's `TfLiteTransposeConvParams` (not a flexbuffer): int32 padding
(1 = SAME, 2 = VALID, 0 = unknown, treated like VALID), int32 stride_width, int32 stride_height (little-endian).

    pad_h = max(0, KH - (H - 1) % stride_h - 1) if SAME else 0        (same for w)
    out   = [N, stride_h * (H - 1) + KH - pad_h, stride_w * (W - 1) + KW - pad_w, Co]

and the output, starting from the bias, accumulates input * weight scattered to
(in_y * stride_h - pad_h // 2 + ky, in_x * stride_w - pad_w // 2 + kx), in MediaPipe's loop order (in_y, in_x, in_c,
ky, kx, out_c), so the float sums round as MediaPipe's kernel does. No fused activation. The official LiteRT runtime
does not ship this op; tests compare it with the builtin TRANSPOSE_CONV (with bias) of the same geometry.
"""

from __future__ import annotations

import struct

import numpy as np

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
    if raw is None or len(raw) < 12:
        raise ValueError(f"Convolution2DTransposeBias needs 12 bytes of custom options (padding, stride_width, "
                         f"stride_height as int32), got {0 if raw is None else len(raw)}")
    padding, stride_w, stride_h = struct.unpack_from("<3i", bytes(raw[:12]))
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


@custom_op("Convolution2DTransposeBias", version=1, prepare=_prepare)
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
