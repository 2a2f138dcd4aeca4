"""RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR, as the optimized builtin kernels compute them.

Per-axis source positions are computed once in prepare (numpy float32 or integer arithmetic, exactly as TFLite
computes them) and passed as tables; the kernels only gather and blend.

Which arithmetic TFLite uses depends on the type:
- float32: a 2x upsample without align_corners/half_pixel_centers blends by halving ((a + b) / 2); otherwise
  out = 0 + v00*w00 + v01*w01 + v10*w10 + v11*w11, accumulated in that order in float32.
- uint8: the same float32 weights, summed with +0.5 and truncated (its x8 half-pixel special case computes the same
  exact values in 8.8 fixed point).
- int8, int16: integer-only interpolation with 10 fractional bits and a rounding division by 2^20.
- nearest neighbour on 8-bit types without align_corners/half_pixel_centers: 16.16 fixed-point scales; otherwise
  float32 positions (rounded with align_corners, floored otherwise).

With num_threads > 1 and enough output, the float kernels run on whole images or bands of rows of an image on the
workers (bilinear_2x2_par, bilinear_float_par), each by the serial kernel on views: the same bytes.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.threads import PARALLEL, call_at, image_row_parts, run_chunks, serial_address
from lite_numba.kernels.movement.space import unit_views
from numba import njit

from lite_numba.ops import PrepareContext, kernel

# --- kernels -----------------------------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def bilinear_2x2_f32(x, out, rows):
    """2x upsample by halving: x [B, H, W, C] -> out [B, 2 rows, 2W, C], for the input rows below `rows` (H, or
    fewer for a band whose view of x ends one row past it: that row is only read)."""
    B, H, W, C = x.shape
    two = np.float32(2.0)
    for b in range(B):
        for y0 in range(rows):
            y1 = min(y0 + 1, H - 1)
            for x0 in range(W):
                x1 = min(x0 + 1, W - 1)
                for c in range(C):
                    a = x[b, y0, x0, c]
                    r = x[b, y0, x1, c]
                    d = x[b, y1, x0, c]
                    e = x[b, y1, x1, c]
                    out[b, 2 * y0, 2 * x0, c] = a
                    out[b, 2 * y0, 2 * x0 + 1, c] = (a + r) / two
                    left = (a + d) / two
                    out[b, 2 * y0 + 1, 2 * x0, c] = left
                    out[b, 2 * y0 + 1, 2 * x0 + 1, c] = (left + (r + e) / two) / two


@njit(cache=True, nogil=True)
def bilinear_float(x, out, ylo, yhi, ay, dy, xlo, xhi, ax, dx, rounding):
    """Weighted sum of the 4 neighbours in float32; `rounding` (0 or 0.5) is added before the cast to out's type.
    ay/dy (ax/dx) are 1 - frac and frac of the source position per output row (column)."""
    B, H, W, C = x.shape
    OH, OW = out.shape[1], out.shape[2]
    rnd = np.float32(rounding)
    for b in range(B):
        for y in range(OH):
            y0, y1 = ylo[y], yhi[y]
            for xx in range(OW):
                x0, x1 = xlo[xx], xhi[xx]
                s0 = ay[y] * ax[xx]
                s1 = ay[y] * dx[xx]
                s2 = dy[y] * ax[xx]
                s3 = dy[y] * dx[xx]
                for c in range(C):
                    acc = np.float32(0.0)
                    acc += np.float32(x[b, y0, x0, c]) * s0
                    acc += np.float32(x[b, y0, x1, c]) * s1
                    acc += np.float32(x[b, y1, x0, c]) * s2
                    acc += np.float32(x[b, y1, x1, c]) * s3
                    out[b, y, xx, c] = acc + rnd


@njit(cache=True, inline="always")
def _image_rows(a, n0, n1, r0, r1):
    """Rows [r0, r1) of images [n0, n1) of the NHWC array a (one image, or whole images), as a C-contiguous
    [n1 - n0, r1 - r0, W, C] view."""
    _, H, W, C = a.shape
    return a.reshape(a.size)[((n0 * H + r0) * W) * C:(((n1 - 1) * H + r1) * W) * C].reshape((n1 - n0, r1 - r0, W, C))


@njit(cache=True, inline="always")
def _2x_chunk(args, wk, j):
    addr, x, out, ch = args
    n0, n1, r0, r1 = ch[4 * j], ch[4 * j + 1], ch[4 * j + 2], ch[4 * j + 3]
    call_at(addr, (_image_rows(x, n0, n1, r0, min(r1 + 1, x.shape[1])), _image_rows(out, n0, n1, 2 * r0, 2 * r1),
                   r1 - r0))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def bilinear_2x2_par(addr, x, out, ch, cnt, T):
    """bilinear_2x2_f32 (at `addr`) over the chunks ch = [n0, n1, first input row, end row] * n
    (threads.image_row_chunks), taken in turn by T workers (a band reads one input row past it, as the serial
    kernel does)."""
    run_chunks(T, cnt, ch.size // 4, _2x_chunk, (addr, x, out, ch))


@njit(cache=True, inline="always")
def _float_chunk(args, wk, j):
    addr, x, out, ylo, yhi, ay, dy, xlo, xhi, ax, dx, rounding, ch = args
    n0, n1, r0, r1 = ch[4 * j], ch[4 * j + 1], ch[4 * j + 2], ch[4 * j + 3]
    call_at(addr, (_image_rows(x, n0, n1, 0, x.shape[1]), _image_rows(out, n0, n1, r0, r1), ylo[r0:r1], yhi[r0:r1],
                   ay[r0:r1], dy[r0:r1], xlo, xhi, ax, dx, rounding))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def bilinear_float_par(addr, x, out, ylo, yhi, ay, dy, xlo, xhi, ax, dx, rounding, ch, cnt, T):
    """bilinear_float (at `addr`) over the chunks ch = [n0, n1, first output row, end row] * n
    (threads.image_row_chunks), taken in turn by T workers (each with its rows of the row tables)."""
    run_chunks(T, cnt, ch.size // 4, _float_chunk, (addr, x, out, ylo, yhi, ay, dy, xlo, xhi, ax, dx, rounding, ch))


@njit(cache=True, nogil=True)
def bilinear_integer(x, out, ylo, yhi, ypos, xlo, xhi, xpos):
    """Integer interpolation: positions ypos/xpos in 1/1024 units; result rounded half away from zero by 2^20."""
    B, H, W, C = x.shape
    OH, OW = out.shape[1], out.shape[2]
    one = np.int64(1 << 10)
    half = np.int64(1 << 19)
    for b in range(B):
        for y in range(OH):
            y0, y1 = ylo[y], yhi[y]
            wy1 = np.int64(ypos[y]) - one * y0
            wy0 = one - wy1
            for xx in range(OW):
                x0, x1 = xlo[xx], xhi[xx]
                wx1 = np.int64(xpos[xx]) - one * x0
                wx0 = one - wx1
                for c in range(C):
                    acc = (np.int64(x[b, y0, x0, c]) * wy0 * wx0 + np.int64(x[b, y1, x0, c]) * wy1 * wx0
                           + np.int64(x[b, y0, x1, c]) * wy0 * wx1 + np.int64(x[b, y1, x1, c]) * wy1 * wx1)
                    v = acc + half if acc > 0 else acc - half
                    # C division truncates toward zero
                    q = abs(v) >> 20
                    out[b, y, xx, c] = q if v >= 0 else -q


@njit(cache=True, nogil=True)
def nearest_gather(x, out, iy, ix):
    """out[b, y, x, :] = x[b, iy[y], ix[x], :] (rows in copy units)."""
    B = x.shape[0]
    OH, OW, R = out.shape[1], out.shape[2], out.shape[3]
    for b in range(B):
        for y in range(OH):
            sy = iy[y]
            for xx in range(OW):
                sx = ix[xx]
                for r in range(R):
                    out[b, y, xx, r] = x[b, sy, sx, r]


# --- position tables ---------------------------------------------------------------------------------------------

def _scale_f32(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    if align_corners and out_size > 1:
        return np.float32(in_size - 1) / np.float32(out_size - 1)
    return np.float32(in_size) / np.float32(out_size)


def float_positions(in_size: int, out_size: int, align_corners: bool, half_pixel: bool):
    """(lower, upper, 1 - frac, frac) per output index, as TFLite's ComputeInterpolationValues in float32."""
    scale = _scale_f32(in_size, out_size, align_corners)
    v = np.arange(out_size, dtype=np.float32)
    pos = (v + np.float32(0.5)) * scale - np.float32(0.5) if half_pixel else v * scale
    # the clamp of lo to in_size - 1 never binds where TFLite reads in bounds; it keeps us in bounds elsewhere
    lo = np.minimum(np.maximum(np.floor(pos).astype(np.int64), 0), in_size - 1)
    hi = np.minimum(np.ceil(pos).astype(np.int64), in_size - 1)
    frac = (pos - lo.astype(np.float32)).astype(np.float32)
    return lo, hi, (np.float32(1.0) - frac).astype(np.float32), frac


def _cdiv(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def integer_positions(in_size: int, out_size: int, align_corners: bool, half_pixel: bool):
    """(lower, upper, position in 1/1024 units) per output index, as ComputeInterpolationValuesInteger."""
    if align_corners and out_size > 1:
        scale = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    else:
        scale = ((1 << 10) * in_size + out_size // 2) // out_size
    pos = np.zeros(out_size, np.int64)
    lo = np.zeros(out_size, np.int64)
    hi = np.zeros(out_size, np.int64)
    for i in range(out_size):
        p = i * scale + scale // 2 - (1 << 9) if half_pixel else i * scale
        pos[i] = p
        # TFLite does not bound lo above: for extreme upsampling (e.g. 1 -> 2000 rows, half-pixel) it would read
        # past the input; we clamp to the last row instead
        lo[i] = min(max(_cdiv(p, 1 << 10), 0), in_size - 1)
        hi[i] = min(_cdiv(p + (1 << 10) - 1, 1 << 10), in_size - 1)
    return lo, hi, pos


def nearest_positions(in_size: int, out_size: int, align_corners: bool, half_pixel: bool,
                      fixed_point: bool) -> np.ndarray:
    """Source index per output index (TFLite's GetNearestNeighbor, or the 16.16 fixed-point optimized variant)."""
    if out_size == 0:
        return np.zeros(0, np.int64)
    if fixed_point:
        scale = (in_size << 16) // out_size + 1
        return np.minimum((np.arange(out_size, dtype=np.int64) * scale) >> 16, in_size - 1)
    scale = _scale_f32(in_size, out_size, align_corners)
    offset = np.float32(0.5) if half_pixel else np.float32(0.0)
    v = (np.arange(out_size, dtype=np.float32) + offset) * scale
    # TfLiteRound rounds half away from zero; np.round would round half to even
    # (in float64, where |v| + 0.5 is exact)
    idx = np.floor(np.abs(v).astype(np.float64) + 0.5) if align_corners else np.floor(v)
    idx = np.minimum(idx.astype(np.int64), in_size - 1)
    if half_pixel:
        idx = np.maximum(idx, 0)
    return idx


# --- prepare -----------------------------------------------------------------------------------------------------

def _resize_inputs(ctx: PrepareContext):
    ctx.check_num(inputs=2, outputs=1)
    x, size_t = ctx.input(0), ctx.input(1)
    ctx.check(x.ndim == 4, f"input must be 4-D, got shape {list(x.shape)}")
    ctx.check(size_t.ndim == 1 and size_t.shape[0] == 2, f"size must have shape [2], got {list(size_t.shape)}")
    ctx.check_dtype(size_t, np.int32)
    ctx.check(ctx.output(0).dtype == x.dtype,
              f"output type {ctx.output(0).dtype.name} differs from input type {x.dtype.name}")
    oh, ow = (int(v) for v in np.asarray(ctx.value(1)).reshape(-1))
    align = bool(ctx.options.get("align_corners", False))
    half = bool(ctx.options.get("half_pixel_centers", False))
    return x, oh, ow, align, half


@kernel("RESIZE_BILINEAR")
def RESIZE_BILINEAR(ctx: PrepareContext) -> None:
    """Bilinear resize of the two spatial axes to `size`; float32, uint8, int8, int16."""
    x, oh, ow, align, half = _resize_inputs(ctx)
    ctx.check_dtype(x, np.float32, np.uint8, np.int8, np.int16)
    ctx.check(oh > 0 and ow > 0, f"output size must be positive, got [{oh}, {ow}]")
    ctx.check(not (align and half), "if half_pixel_centers is True, align_corners must be False")
    B, H, W, C = x.shape
    out = ctx.set_output(0, (B, oh, ow, C), x.dtype)
    if out.size == 0:
        return
    if x.dtype in (np.int8, np.int16):
        ylo, yhi, ypos = integer_positions(H, oh, align, half)
        xlo, xhi, xpos = integer_positions(W, ow, align, half)
        ctx.call(bilinear_integer, x, out, ylo, yhi, ypos, xlo, xhi, xpos)
        return
    if x.dtype == np.float32 and not align and not half and oh == 2 * H and ow == 2 * W:
        ch, t = image_row_parts(ctx, out.size, B, H)
        if not ch:
            return ctx.call(bilinear_2x2_f32, x, out, H)
        addr = serial_address(bilinear_2x2_f32, [x, out, H])
        return ctx.call(bilinear_2x2_par, addr, x, out, np.array(ch, np.int64).reshape(-1),
                        ctx.temp((1,), np.int64), t)
    ylo, yhi, ay, dy = float_positions(H, oh, align, half)
    xlo, xhi, ax, dx = float_positions(W, ow, align, half)
    tables = (ylo, yhi, ay, dy, xlo, xhi, ax, dx, 0.5 if x.dtype == np.uint8 else 0.0)
    ch, t = image_row_parts(ctx, out.size, B, oh)
    if not ch:
        return ctx.call(bilinear_float, x, out, *tables)
    addr = serial_address(bilinear_float, [x, out, *tables])
    ctx.call(bilinear_float_par, addr, x, out, *tables, np.array(ch, np.int64).reshape(-1), ctx.temp((1,), np.int64),
             t)


@kernel("RESIZE_NEAREST_NEIGHBOR")
def RESIZE_NEAREST_NEIGHBOR(ctx: PrepareContext) -> None:
    """Nearest-neighbour resize of the two spatial axes to `size`; any 8/16/32-bit type."""
    x, oh, ow, align, half = _resize_inputs(ctx)
    ctx.check(x.dtype.itemsize in (1, 2, 4) and x.dtype.kind in "fiub",
              f"type {x.dtype.name} is not supported (needs an 8, 16 or 32-bit type)")
    B, H, W, C = x.shape
    out = ctx.set_output(0, (B, oh, ow, C), x.dtype)
    if out.size == 0:
        return
    fixed = x.dtype.itemsize == 1 and not align and not half
    iy = nearest_positions(H, oh, align, half, fixed)
    ix = nearest_positions(W, ow, align, half, fixed)
    xv, ov = unit_views(ctx, x, (B, H, W), out, (B, oh, ow), C * x.dtype.itemsize)
    ctx.call(nearest_gather, xv, ov, iy, ix)


__all__ = ["RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"]
