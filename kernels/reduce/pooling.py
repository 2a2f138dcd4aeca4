"""AVERAGE_POOL_2D, MAX_POOL_2D, L2_POOL_2D over NHWC tensors (float32; int8/uint8/int16 for average and max).

Semantics follow TFLite's optimized builtin kernels: windows are clipped to the input (padding values never
count), float averages divide the float32 window sum (summed in window order) by the float32 element count,
quantized averages divide the int32 sum by the count rounding half away from zero, with no requantization (the
input and output share scale and zero point). Every kernel loops over one output pixel at a time and accumulates
a whole channel row, so the inner loop is contiguous. With num_threads > 1 and enough work, float average and
max pooling (and integer max pooling) run as whole images or bands of output rows on the workers (pool_par),
each by the serial kernel on views of its images and rows: the same bytes.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.activation import float_activation_range
from lite_numba.kernels.base.fixedpoint import activation_range_quantized
from lite_numba.kernels.base.llvm_ir import data_ptr, gep, splat
from lite_numba.kernels.base.threads import PARALLEL, call_at, image_row_parts, run_chunks, serial_address
from lite_numba.kernels.base.vecmath import fdiv
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from lite_numba.ops import PrepareContext, kernel

PADDING_SAME, PADDING_VALID = 0, 1


def windowed_output(ctx: PrepareContext, padding: int, size: int, filt: int, stride: int) -> tuple[int, int]:
    """(output size, leading padding) of one spatial dimension, as TFLite's ComputePaddingHeightWidth."""
    if padding == PADDING_SAME:
        out = (size + stride - 1) // stride
    elif padding == PADDING_VALID:
        num = size + stride - filt
        out = abs(num) // stride * (1 if num >= 0 else -1)  # C division truncates toward zero
    else:
        ctx.fail(f"unknown padding {padding}")
    ctx.check(out >= 0, f"filter {filt} does not fit an input of size {size} with VALID padding")
    total = max((out - 1) * stride + filt - size, 0)
    return out, total // 2


@njit(cache=True, inline="always")
def _window(o, stride, pad, filt, size):
    """[start, end) of the filter taps of output o that fall inside the input, and the input origin."""
    origin = o * stride - pad
    start = max(0, -origin)
    end = min(filt, size - origin)
    return origin, start, end


@njit(cache=True, nogil=True, _nrt=False)
def avg_pool_float(x, out, p, lim):
    """out = clamp(window sum / count) in float32; p = [stride_h, stride_w, filter_h, filter_w, pad_h, pad_w].
    Channel rows as flat slices indexed from 0 and a check-free division (fdiv), so the channel loops vectorize."""
    B, H, W, C = x.shape
    _, OH, OW, _ = out.shape
    lo, hi = lim[0], lim[1]
    xf = x.reshape(x.size)
    of = out.reshape(out.size)
    for b in range(B):
        for oy in range(OH):
            y0, fy0, fy1 = _window(oy, p[0], p[4], p[2], H)
            for ox in range(OW):
                x0, fx0, fx1 = _window(ox, p[1], p[5], p[3], W)
                o0 = ((b * OH + oy) * OW + ox) * C
                orow = of[o0:o0 + C]
                for c in range(C):
                    orow[c] = np.float32(0.0)
                for fy in range(fy0, fy1):
                    for fx in range(fx0, fx1):
                        i0 = ((b * H + y0 + fy) * W + x0 + fx) * C
                        xrow = xf[i0:i0 + C]
                        for c in range(C):
                            orow[c] += xrow[c]
                count = np.float32((fy1 - fy0) * (fx1 - fx0))
                for c in range(C):
                    orow[c] = min(max(fdiv(orow[c], count), lo), hi)


@njit(cache=True, nogil=True, _nrt=False)
def avg_pool_int(x, out, acc, p, lim):
    """Quantized average: int32 window sums in `acc` (one channel row), divided rounding half away from zero."""
    B, H, W, C = x.shape
    _, OH, OW, _ = out.shape
    lo, hi = lim[0], lim[1]
    for b in range(B):
        for oy in range(OH):
            y0, fy0, fy1 = _window(oy, p[0], p[4], p[2], H)
            for ox in range(OW):
                x0, fx0, fx1 = _window(ox, p[1], p[5], p[3], W)
                for c in range(C):
                    acc[c] = 0
                for fy in range(fy0, fy1):
                    for fx in range(fx0, fx1):
                        for c in range(C):
                            acc[c] += x[b, y0 + fy, x0 + fx, c]
                n = (fy1 - fy0) * (fx1 - fx0)
                half = n // 2
                for c in range(C):
                    a = np.int64(acc[c])
                    # C integer division truncates toward zero
                    q = (a + half) // n if a > 0 else -((half - a) // n)
                    out[b, oy, ox, c] = min(max(q, lo), hi)


VMAX = 16  # lanes of max_pixel


@intrinsic
def max_pixel(typingctx, o, o_off, x, x_org, row, col, fy0, fy1, fx0, fx1, lowest, lo, hi):
    """One output pixel's window maximum for VMAX channels, in registers: m = lowest; for the taps (fy, fx) in
    [fy0, fy1) x [fx0, fx1), v = x[x_org + fy * row + fx * col + k], m = v if v > m else m (the scalar loop's
    semantics: a NaN never replaces the running maximum); o[o_off + k] = min(max(m, lo), hi) for k < VMAX. A channel
    row of 16 is shorter than the step LLVM's loop vectorizer needs (vector width x interleave), so the plain loops
    ran scalar there (MediaPipe hand_landmark_lite's 112x112x16 pool: 98 against XNNPACK's 34 us on AVX2)."""
    ip = types.intp
    sig = types.void(o, ip, x, ip, ip, ip, ip, ip, ip, ip, o.dtype, o.dtype, o.dtype)
    signed = isinstance(o.dtype, types.Integer) and o.dtype.signed
    is_float = isinstance(o.dtype, types.Float)

    def codegen(context, builder, sig, args):
        o_, oo, x_, xorg, row_, col_, fy0_, fy1_, fx0_, fx1_, lowest_, lo_, hi_ = args
        et = context.get_value_type(sig.args[0].dtype)
        vt = ir.VectorType(et, VMAX)

        def gt(a, b):
            if is_float:
                return builder.fcmp_ordered(">", a, b)
            return builder.icmp_signed(">", a, b) if signed else builder.icmp_unsigned(">", a, b)

        px = data_ptr(context, builder, sig.args[2], x_)
        acc = cgutils.alloca_once_value(builder, splat(builder, lowest_, vt))
        with cgutils.for_range(builder, builder.sub(fy1_, fy0_)) as ly:
            fy = builder.add(fy0_, ly.index)
            with cgutils.for_range(builder, builder.sub(fx1_, fx0_)) as lx:
                fx = builder.add(fx0_, lx.index)
                off = builder.add(xorg, builder.add(builder.mul(fy, row_), builder.mul(fx, col_)))
                v = builder.load(builder.bitcast(gep(builder, px, off, et), vt.as_pointer()), align=1)
                m = builder.load(acc)
                builder.store(builder.select(gt(v, m), v, m), acc)
        m = builder.load(acc)
        lov, hiv = splat(builder, lo_, vt), splat(builder, hi_, vt)
        m = builder.select(gt(lov, m), lov, m)
        m = builder.select(gt(m, hiv), hiv, m)
        po = builder.bitcast(gep(builder, data_ptr(context, builder, sig.args[0], o_), oo, et), vt.as_pointer())
        builder.store(m, po, align=1)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, nogil=True, _nrt=False)
def max_pool(x, out, p, lim):
    """out = clamp(window max); lim = [lowest, act_min, act_max] typed as the data. Channels in vectors of VMAX
    (max_pixel); with C > VMAX a last vector overlapping the one before covers the rest (28 channels, BlazeFace's
    64 x 64 pool: 38 -> 15 us on a Zen 4), with fewer channels they go one by one."""
    B, H, W, C = x.shape
    _, OH, OW, _ = out.shape
    lowest, lo, hi = lim[0], lim[1], lim[2]
    xf = x.reshape(x.size)
    of = out.reshape(out.size)
    cv = C - C % VMAX
    for b in range(B):
        for oy in range(OH):
            y0, fy0, fy1 = _window(oy, p[0], p[4], p[2], H)
            for ox in range(OW):
                x0, fx0, fx1 = _window(ox, p[1], p[5], p[3], W)
                o0 = ((b * OH + oy) * OW + ox) * C
                xorg = ((b * H + y0) * W + x0) * C  # the window's corner (taps outside the image are not read)
                for c in range(0, cv, VMAX):
                    max_pixel(of, o0 + c, xf, xorg + c, W * C, C, fy0, fy1, fx0, fx1, lowest, lo, hi)
                if cv == C:
                    continue
                if cv:  # the last VMAX channels again, overlapping: the same maxima, stored twice
                    max_pixel(of, o0 + C - VMAX, xf, xorg + C - VMAX, W * C, C, fy0, fy1, fx0, fx1, lowest, lo, hi)
                    continue
                orow = of[o0 + cv:o0 + C]  # (slices indexed from 0: the channel loops vectorize)
                for c in range(C - cv):
                    orow[c] = lowest
                for fy in range(fy0, fy1):
                    for fx in range(fx0, fx1):
                        i0 = xorg + (fy * W + fx) * C + cv
                        xrow = xf[i0:i0 + C - cv]
                        for c in range(C - cv):
                            v = xrow[c]
                            m = orow[c]
                            orow[c] = v if v > m else m
                for c in range(C - cv):
                    orow[c] = min(max(orow[c], lo), hi)


@njit(cache=True, nogil=True)
def l2_pool_float(x, out, p, lim):
    """out = clamp(sqrt(window sum of squares * (1 / count))) in float32."""
    B, H, W, C = x.shape
    _, OH, OW, _ = out.shape
    lo, hi = lim[0], lim[1]
    for b in range(B):
        for oy in range(OH):
            y0, fy0, fy1 = _window(oy, p[0], p[4], p[2], H)
            for ox in range(OW):
                x0, fx0, fx1 = _window(ox, p[1], p[5], p[3], W)
                for c in range(C):
                    out[b, oy, ox, c] = np.float32(0.0)
                for fy in range(fy0, fy1):
                    for fx in range(fx0, fx1):
                        for c in range(C):
                            v = x[b, y0 + fy, x0 + fx, c]
                            out[b, oy, ox, c] += v * v
                # TFLite multiplies by the float32 reciprocal of the count
                inv = np.float32(1.0) / np.float32((fy1 - fy0) * (fx1 - fx0))
                for c in range(C):
                    v = np.sqrt(out[b, oy, ox, c] * inv)
                    out[b, oy, ox, c] = min(max(v, lo), hi)


_QUANTIZED = (np.int8, np.uint8, np.int16)


@njit(cache=True, inline="always")
def _pool_chunk(args, wk, j):
    addr, x, out, ps, ch, lim = args
    _, H, W, C = x.shape
    _, OH, OW, _ = out.shape
    n0, n1, y0, y1 = ch[4 * j], ch[4 * j + 1], ch[4 * j + 2], ch[4 * j + 3]
    xv = x.reshape(x.size)[n0 * H * W * C:n1 * H * W * C].reshape((n1 - n0, H, W, C))
    ov = out.reshape(out.size)[(n0 * OH + y0) * OW * C:((n1 - 1) * OH + y1) * OW * C].reshape(
        (n1 - n0, y1 - y0, OW, C))
    call_at(addr, (xv, ov, ps[j], lim))


@njit(cache=True, nogil=True, parallel=PARALLEL)
def pool_par(addr, x, out, ps, ch, lim, cnt, T):
    """The pooling kernel at `addr` (kernel(x, out, p, lim)) over the chunks ch = [n0, n1, y0, y1] * n
    (threads.image_row_chunks: whole images, or a band of one image's output rows), taken in turn by T workers;
    chunk j's parameters ps[j] move the top padding up by its first row."""
    run_chunks(T, cnt, ch.size // 4, _pool_chunk, (addr, x, out, ps, ch, lim))


def _schedule_pool(ctx: PrepareContext, fn, x, out, p: np.ndarray, lim: np.ndarray) -> None:
    """fn(x, out, p, lim), or with num_threads > 1 and enough window reads pool_par over images or bands of output
    rows."""
    ch, t = image_row_parts(ctx, out.size * int(p[2]) * int(p[3]), out.shape[0], out.shape[1])
    if not ch:
        return ctx.call(fn, x, out, p, lim)
    ps = np.repeat(p[None, :], len(ch), axis=0)
    for j, (_, _, y0, _) in enumerate(ch):
        ps[j, 4] = p[4] - y0 * p[0]
    addr = serial_address(fn, [x, out, p, lim])
    ctx.call(pool_par, addr, x, out, ps, np.array(ch, np.int64).reshape(-1), lim, ctx.temp((1,), np.int64), t)


def _prepare_pool(ctx: PrepareContext, dtypes):
    """Validate a pooling node; set the output shape. Returns (x, out, params array, activation)."""
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check(x.ndim == 4, f"input must be 4-D (NHWC), got shape {list(x.shape)}")
    ctx.check_dtype(x, *dtypes)
    o = ctx.options
    sh, sw = int(o.get("stride_h", 1)), int(o.get("stride_w", 1))
    fh, fw = int(o.get("filter_height", 1)), int(o.get("filter_width", 1))
    ctx.check(sh > 0 and sw > 0, f"strides must be positive, got stride_h={sh}, stride_w={sw}")
    ctx.check(fh > 0 and fw > 0, f"filter sizes must be positive, got filter_height={fh}, filter_width={fw}")
    padding = int(o.get("padding", PADDING_SAME))
    B, H, W, C = x.shape
    oh, ph = windowed_output(ctx, padding, H, fh, sh)
    ow, pw = windowed_output(ctx, padding, W, fw, sw)
    out = ctx.set_output(0, (B, oh, ow, C), x.dtype)
    return x, out, np.array([sh, sw, fh, fw, ph, pw], np.int64), int(o.get("fused_activation_function", 0))


def _quantized_limits(ctx: PrepareContext, act: int, out) -> tuple[int, int]:
    """The clamp of a fused activation on an integer output (the whole range without quantization)."""
    ctx.check(out.quantization.scales.size > 0 or act == 0,
              f"fused activation {act} on a non-quantized {out.dtype.name} output")
    try:
        return activation_range_quantized(act, out.dtype, out.scale, out.zero_point)
    except ValueError as e:
        ctx.fail(str(e))


@kernel("AVERAGE_POOL_2D")
def AVERAGE_POOL_2D(ctx: PrepareContext) -> None:
    """Window averages of float32, or of int8/uint8/int16 without requantization (rounded half away from zero)."""
    x, out, p, act = _prepare_pool(ctx, (np.float32,) + _QUANTIZED)
    if out.size == 0:
        return
    if x.dtype == np.float32:
        lo, hi = float_activation_range(ctx, act)
        _schedule_pool(ctx, avg_pool_float, x, out, p, np.array([lo, hi], np.float32))
    else:
        lo, hi = _quantized_limits(ctx, act, out)
        acc = ctx.temp((x.shape[3],), np.int32)
        ctx.call(avg_pool_int, x, out, acc, p, np.array([lo, hi], x.dtype))


@kernel("MAX_POOL_2D")
def MAX_POOL_2D(ctx: PrepareContext) -> None:
    """Window maxima of float32, int8, uint8 or int16."""
    x, out, p, act = _prepare_pool(ctx, (np.float32,) + _QUANTIZED)
    if out.size == 0:
        return
    if x.dtype == np.float32:
        lo, hi = float_activation_range(ctx, act)
        lim = np.array([np.finfo(np.float32).min, lo, hi], np.float32)
    else:
        lo, hi = _quantized_limits(ctx, act, out)
        lim = np.array([np.iinfo(x.dtype).min, lo, hi], x.dtype)
    _schedule_pool(ctx, max_pool, x, out, p, lim)


@kernel("L2_POOL_2D")
def L2_POOL_2D(ctx: PrepareContext) -> None:
    """sqrt(mean of squares) over each window, float32 only."""
    # TFLite has no quantized L2 pooling
    x, out, p, act = _prepare_pool(ctx, (np.float32,))
    if out.size == 0:
        return
    lo, hi = float_activation_range(ctx, act)
    ctx.call(l2_pool_float, x, out, p, np.array([lo, hi], np.float32))


__all__ = ["AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D", "windowed_output"]
