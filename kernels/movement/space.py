"""DEPTH_TO_SPACE, SPACE_TO_DEPTH, SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND: pure data movement.

Every op moves whole channel rows, so the kernels work on raw bytes (viewed as int32 units when a row is a multiple
of 4 bytes, else uint8): one compiled loop serves every element type. DEPTH_TO_SPACE and SPACE_TO_DEPTH are both a
swap of the two middle axes of a 4-D view of the data (see `_d2s_views` / `_s2d_views`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from lite_numba.ops import PrepareContext, Tensor, kernel

_QUANTIZED = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16))


def row_unit(row_bytes: int) -> type:
    """The unit a row of `row_bytes` bytes is copied in: int32 when it divides evenly, else single bytes."""
    return np.int32 if row_bytes % 4 == 0 else np.uint8


def unit_views(ctx: PrepareContext, x: Tensor, xshape, out: Tensor, oshape, row_bytes: int):
    """Views of x and out whose last axis is a channel row of `row_bytes` bytes, in copy units."""
    unit = row_unit(row_bytes)
    r = row_bytes // np.dtype(unit).itemsize
    return ctx.view(x, tuple(xshape) + (r,), unit), ctx.view(out, tuple(oshape) + (r,), unit)


@njit(cache=True, nogil=True)
def swap_middle(x, out):
    """out[n, b, a, r] = x[n, a, b, r] for x of shape [N, A, B, R]."""
    N, A, B, R = x.shape
    for n in range(N):
        for a in range(A):
            for b in range(B):
                for r in range(R):
                    out[n, b, a, r] = x[n, a, b, r]


@njit(cache=True, inline="always")
def _block_of(batch, spatial_batch, bw):
    """The batch of the spatial side and the block position (row, column) of a batch of the blocked side: batch
    (sh * bw + sw) * spatial_batch + b holds block (sh, sw) of spatial batch b."""
    s = batch // spatial_batch
    return batch % spatial_batch, s // bw, s % bw


@njit(cache=True, nogil=True)
def space_to_batch(x, out, bh, bw, pad_top, pad_left, pad):
    """x [B, H, W, R] -> out [B*bh*bw, OH, OW, R]; output batch (sh*bw + sw)*B + b reads input row
    (oh*bh + sh - pad_top, ow*bw + sw - pad_left) of batch b, or is filled with the pad unit."""
    B, H, W, R = x.shape
    OB, OH, OW, _ = out.shape
    for ob in range(OB):
        b, sh, sw = _block_of(ob, B, bw)
        for oh in range(OH):
            ih = oh * bh + sh - pad_top
            for ow in range(OW):
                iw = ow * bw + sw - pad_left
                if 0 <= ih < H and 0 <= iw < W:
                    for r in range(R):
                        out[ob, oh, ow, r] = x[b, ih, iw, r]
                else:
                    for r in range(R):
                        out[ob, oh, ow, r] = pad


@njit(cache=True, nogil=True)
def batch_to_space(x, out, bh, bw, crop_top, crop_left):
    """x [B, H, W, R] -> out [B/(bh*bw), OH, OW, R]: the inverse of space_to_batch, cropping instead of padding."""
    B, H, W, R = x.shape
    OB, OH, OW, _ = out.shape
    for ib in range(B):
        ob, sh, sw = _block_of(ib, OB, bw)
        for ih in range(H):
            oh = ih * bh + sh - crop_top
            if oh < 0 or oh >= OH:
                continue
            for iw in range(W):
                ow = iw * bw + sw - crop_left
                if 0 <= ow < OW:
                    for r in range(R):
                        out[ob, oh, ow, r] = x[ib, ih, iw, r]


# --- DEPTH_TO_SPACE / SPACE_TO_DEPTH -----------------------------------------------------------------------------

_D2S_TYPES = (np.float32, np.uint8, np.int8, np.int32, np.int64)


def _block_op_inputs(ctx: PrepareContext):
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check(x.ndim == 4, f"input must be 4-D, got shape {list(x.shape)}")
    ctx.check_dtype(x, *_D2S_TYPES)
    ctx.check(ctx.output(0).dtype == x.dtype,
              f"output type {ctx.output(0).dtype.name} differs from input type {x.dtype.name}")
    bs = int(ctx.options.get("block_size", 0))
    ctx.check(bs > 0, f"block_size must be > 0, got {bs}")
    return x, bs


@kernel("DEPTH_TO_SPACE")
def DEPTH_TO_SPACE(ctx: PrepareContext) -> None:
    """Moves depth blocks of bs*bs channel groups into bs x bs spatial blocks (4-D, NHWC)."""
    x, bs = _block_op_inputs(ctx)
    B, H, W, C = x.shape
    ctx.check(C % (bs * bs) == 0, f"input depth {C} is not a multiple of block_size^2 = {bs * bs}")
    oc = C // (bs * bs)
    out = ctx.set_output(0, (B, H * bs, W * bs, oc), x.dtype)
    if out.size == 0:
        return
    # input [B*H, W, bs, bs*oc] -> output [B*H, bs, W, bs*oc]
    xv, ov = unit_views(ctx, x, (B * H, W, bs), out, (B * H, bs, W), bs * oc * x.dtype.itemsize)
    ctx.call(swap_middle, xv, ov)


@kernel("SPACE_TO_DEPTH")
def SPACE_TO_DEPTH(ctx: PrepareContext) -> None:
    """Moves bs x bs spatial blocks into the channel axis (4-D, NHWC)."""
    x, bs = _block_op_inputs(ctx)
    B, H, W, C = x.shape
    ctx.check(H % bs == 0 and W % bs == 0, f"input height {H} and width {W} must be multiples of block_size {bs}")
    oh, ow = H // bs, W // bs
    out = ctx.set_output(0, (B, oh, ow, C * bs * bs), x.dtype)
    if out.size == 0:
        return
    # input [B*oh, bs, ow, bs*C] -> output [B*oh, ow, bs, bs*C]
    xv, ov = unit_views(ctx, x, (B * oh, bs, ow), out, (B * oh, ow, bs), bs * C * x.dtype.itemsize)
    ctx.call(swap_middle, xv, ov)


# --- SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND -----------------------------------------------------------------------

def _batch_op_inputs(ctx: PrepareContext, what: str):
    """Input, its 4-D extension (NHC -> NH1C), block (bh, bw) and the [spatial, 2] paddings/crops."""
    ctx.check_num(inputs=3, outputs=1)
    x, out = ctx.input(0), ctx.output(0)
    ctx.check(3 <= x.ndim <= 4, f"input must be 3-D or 4-D, got shape {list(x.shape)}")
    ctx.check(x.dtype.itemsize in (1, 2, 4, 8) and x.dtype != np.dtype(object),
              f"type {x.dtype.name} is not supported")
    ctx.check(out.dtype == x.dtype, f"output type {out.dtype.name} differs from input type {x.dtype.name}")
    if x.dtype in _QUANTIZED and (x.quantization.scales.size or out.quantization.scales.size):
        ctx.check(x.scale == out.scale and x.zero_point == out.zero_point,
                  "input and output must have the same scale and zero point")
        if x.dtype == np.int16:
            ctx.check(x.zero_point == 0 and out.zero_point == 0, "int16 zero points must be 0")
    spatial = x.ndim - 2
    bt, pt = ctx.input(1), ctx.input(2)
    ctx.check_dtype(bt, np.int32)
    ctx.check_dtype(pt, np.int32)
    ctx.check(bt.shape == (spatial,), f"block_shape must have shape [{spatial}], got {list(bt.shape)}")
    ctx.check(pt.shape == (spatial, 2), f"{what} must have shape [{spatial}, 2], got {list(pt.shape)}")
    block = [int(v) for v in np.asarray(ctx.value(1)).reshape(-1)]
    pads = np.asarray(ctx.value(2)).reshape(spatial, 2).astype(np.int64)
    ctx.check(all(b > 0 for b in block), f"block_shape must be positive, got {block}")
    shape4 = x.shape if x.ndim == 4 else (x.shape[0], x.shape[1], 1, x.shape[2])
    if spatial == 1:
        block = block + [1]
        pads = np.concatenate([pads, np.zeros((1, 2), np.int64)])
    return x, out, shape4, block, pads


@kernel("SPACE_TO_BATCH_ND")
def SPACE_TO_BATCH_ND(ctx: PrepareContext) -> None:
    """Pads the spatial axes and moves block_shape blocks into the batch (3-D NHC or 4-D NHWC)."""
    x, out, (B, H, W, C), (bh, bw), pads = _batch_op_inputs(ctx, "paddings")
    ph, pw = H + int(pads[0].sum()), W + int(pads[1].sum())
    ctx.check(ph % bh == 0 and pw % bw == 0,
              f"padded spatial size [{ph}, {pw}] is not a multiple of block_shape [{bh}, {bw}]")
    shape4 = (B * bh * bw, ph // bh, pw // bw, C)
    out = ctx.set_output(0, shape4 if x.ndim == 4 else (shape4[0], shape4[1], C), x.dtype)
    if out.size == 0:
        return
    row = C * x.dtype.itemsize
    xv, ov = unit_views(ctx, x, (B, H, W), out, shape4[:3], row)
    # TFLite memsets padding with the output zero point's low byte (0 for non-8-bit types)
    pad_byte = (out.zero_point & 0xFF) if x.dtype.itemsize == 1 else 0
    pad_unit = int(np.frombuffer(bytes([pad_byte]) * 4, np.int32)[0]) if row_unit(row) == np.int32 else pad_byte
    ctx.call(space_to_batch, xv, ov, bh, bw, int(pads[0, 0]), int(pads[1, 0]), pad_unit)


@kernel("BATCH_TO_SPACE_ND")
def BATCH_TO_SPACE_ND(ctx: PrepareContext) -> None:
    """Moves batch blocks back into the spatial axes, then crops (3-D NHC or 4-D NHWC)."""
    x, out, (B, H, W, C), (bh, bw), crops = _batch_op_inputs(ctx, "crops")
    ctx.check(bool(np.all(crops >= 0)), f"crops must be >= 0, got {crops.tolist()}")
    ctx.check(B % (bh * bw) == 0, f"input batch {B} is not a multiple of the block size {bh * bw}")
    oh, ow = H * bh - int(crops[0].sum()), W * bw - int(crops[1].sum())
    ctx.check(oh >= 0 and ow >= 0, f"crops {crops.tolist()} exceed the spatial size [{H * bh}, {W * bw}]")
    shape4 = (B // (bh * bw), oh, ow, C)
    out = ctx.set_output(0, shape4 if x.ndim == 4 else (shape4[0], oh, C), x.dtype)
    if out.size == 0:
        return
    xv, ov = unit_views(ctx, x, (B, H, W), out, shape4[:3], C * x.dtype.itemsize)
    ctx.call(batch_to_space, xv, ov, bh, bw, int(crops[0, 0]), int(crops[1, 0]))


__all__ = ["DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND"]
