"""The convolution family: CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV, CONV_3D.

Prepare validates shapes and options like the official kernels (tflite/kernels/conv.cc, depthwise_conv.cc,
transpose_conv.cc, conv3d.cc), computes the output size and padding, repacks constant weights once, precomputes the
per-channel requantization multipliers, and schedules the loops of kernels/linear/conv_loops.py.

Data types:
- float32 activations and weights;
- int8 activations, int8 weights (per-channel or per-tensor scales, zero points 0), int32 bias;
- uint8 activations and weights (per-tensor, any weight zero point), int32 bias;
- int16 activations (zero point 0), int8 weights; int64 bias (official reference path: int64 accumulator and the
  16-bit reduced multiplier) or, when the option quantized_bias_type is INT32, int32 bias and accumulator;
- hybrid (float32 activations, int8 weights): the input is quantized per batch at run time (symmetric for a
  per-tensor CONV_2D filter, asymmetric otherwise), accumulated in int32 and rescaled to float32.

Integer results are bit-exact with the official x86 build, whose requantization rounding depends on the code path:
its optimized kernels are TFLite's NEON code compiled through NEON_2_SSE, and its GEMMs run on ruy (see the RQ_*
modes in conv_loops.py). The same holds for the hybrid input quantization (NeonAsymmetricQuantizeFloats).

Deliberate leniency: a missing bias (the official CONV_2D requires one; the official DEPTHWISE_CONV_2D crashes
without one) is treated as zeros; grouped hybrid convolution and hybrid depthwise accept per-tensor filter scales.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.activation import float_activation_range
from lite_numba.kernels.base.fixedpoint import (
    activation_range_quantized,
    check_int64_left_shift,
    check_left_shift,
    quantize_multipliers,
)
from lite_numba.kernels.base.hybrid_quant import quantize_rows
from lite_numba.kernels.base.threads import CHUNKS_PER_THREAD, bands, image_row_chunks, threads_for
from lite_numba.kernels.linear import conv_loops as L
from lite_numba.kernels.linear import dwconv, qgemm, simd_f32
from lite_numba.kernels.linear.conv_epilogue import epilogue_terms, schedule_epilogue_pass
from lite_numba.kernels.linear.fully_connected_quantized import require_per_tensor
from lite_numba.kernels.linear.hybrid_schedule import schedule_hybrid
from lite_numba.kernels.linear.parallel import conv2d_f32_par, gemm_f32_par
from lite_numba.kernels.linear.simd_f32_narrow import float_drivers

from lite_numba.ops import ConstArg, PrepareContext, Tensor, TensorView, kernel

PADDING_SAME, PADDING_VALID = 0, 1  # schema Padding enum
TENSOR_TYPE_FLOAT32, TENSOR_TYPE_INT32, TENSOR_TYPE_INT64 = 0, 2, 4  # schema TensorType values


# --- shared prepare helpers -----------------------------------------------------------------------------------------


def _c_div(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def out_size_and_padding(ctx: PrepareContext, padding: int, size: int, taps: int, stride: int, dilation: int,
                         what: str) -> tuple[int, int, int]:
    """(output size, leading padding, extra trailing padding) along one axis, as TFLite's
    ComputePaddingHeightWidth computes them (matching TensorFlow's GetWindowedOutputSize)."""
    eff = (taps - 1) * dilation + 1
    if padding == PADDING_SAME:
        out = (size + stride - 1) // stride
    elif padding == PADDING_VALID:
        out = _c_div(size + stride - eff, stride)
    else:
        ctx.fail(f"padding {padding} is not supported (expected SAME or VALID)")
    ctx.check(out >= 0, f"{what}: filter of effective size {eff} does not fit an input of size {size}")
    total = max((out - 1) * stride + eff - size, 0)
    return out, total // 2, total % 2


def _positive_option(ctx: PrepareContext, name: str) -> int:
    v = int(ctx.options.get(name, 0))
    ctx.check(v > 0, f"{name} must be positive, got {v}")
    return v


def _float_limits(ctx: PrepareContext) -> np.ndarray:
    lo, hi = float_activation_range(ctx, ctx.options.get("fused_activation_function", 0))
    return np.array([lo, hi], np.float32)


def _quant_limits(ctx: PrepareContext, out: Tensor) -> tuple[int, int]:
    # fixedpoint's version rounds like TFLite (float32 division, half away from zero)
    try:
        return activation_range_quantized(ctx.options.get("fused_activation_function", 0), out.dtype, out.scale,
                                          out.zero_point)
    except ValueError as e:
        ctx.fail(str(e))


def _filter_scales(ctx: PrepareContext, f: Tensor, channels: int, axis: int) -> np.ndarray:
    """The filter's scales broadcast to `channels` (per-tensor or per-channel along `axis`), as float32."""
    q = f.quantization
    ctx.check(q.scales.size > 0, f"filter {f.name!r} has no quantization scales")
    if q.scales.size == 1:
        return np.full(channels, q.scales[0], np.float32)
    ctx.check(q.scales.size == channels, f"filter {f.name!r} has {q.scales.size} scales, expected 1 or {channels}")
    ctx.check(q.quantized_dimension == axis,
              f"filter {f.name!r} is quantized along dimension {q.quantized_dimension}, expected {axis}")
    return np.asarray(q.scales, np.float32)


def _requant_params(ctx: PrepareContext, x: Tensor, f: Tensor, out: Tensor, channels: int, axis: int,
                    wide: bool = False):
    """Per-channel (multiplier, shift) of input_scale * filter_scale[c] / output_scale, as the official
    PopulateConvolutionQuantizationParams computes them (in double; uint8 kernels use the legacy per-tensor
    multiplier whose scale product is taken in float32)."""
    ctx.check(x.quantization.scales.size > 0, f"input {x.name!r} is not quantized")
    ctx.check(out.quantization.scales.size > 0, f"output {out.name!r} is not quantized")
    require_per_tensor(ctx, ("input", x), ("output", out))
    fs = _filter_scales(ctx, f, channels, axis)
    if x.dtype == np.uint8:
        ctx.check(f.quantization.scales.size == 1, "uint8 kernels support per-tensor filter quantization only")
        prod = np.float64(np.float32(x.scale) * np.float32(fs[0]))
        real = np.full(channels, prod / np.float64(out.scale))
    else:
        real = np.float64(x.scale) * fs.astype(np.float64) / np.float64(out.scale)
    mult, shift = quantize_multipliers(real)
    what = (f"output {out.name!r} (scale {out.scale:.6g}; input scale {x.scale:.6g}, filter {f.name!r} scale up to "
            f"{float(np.max(fs)):.6g})")
    check_left_shift(ctx, shift, what)
    if wide:  # 16-bit activations with an int64 bias: the reference kernel's int64 output stage
        check_int64_left_shift(ctx, shift, what)
    return mult, shift


def _check_symmetric_filter(ctx: PrepareContext, f: Tensor) -> None:
    zps = f.quantization.zero_points
    ctx.check(not np.any(zps != 0), f"filter {f.name!r} must have zero points 0, got {zps.tolist()}")


def _bias(ctx: PrepareContext, b: Tensor | None, channels: int, dtypes, zero_dtype):
    """The bias as a kernel argument ([channels] view), or zeros of `zero_dtype` when the node has none."""
    if b is None:
        return np.zeros(channels, zero_dtype)
    ctx.check_dtype(b, *dtypes)
    ctx.check(b.size == channels, f"bias has {b.size} elements, expected {channels}")
    return ctx.view(b, (channels,))


def _filter(ctx: PrepareContext, f: Tensor, channels_last: bool = True):
    """The filter as the loops take it: OHWI [O, KH, KW, I] repacked to [KH, KW, I, O] when channels_last
    (depthwise [1, KH, KW, C] is used as [KH, KW, C]); a uint8 filter minus its zero point, as int16. A constant
    is converted now, a filter known only at run time by a scheduled call."""
    zp = int(f.quantization.zero_point) if f.dtype == np.uint8 else 0
    dtype = np.dtype(np.int16) if f.dtype == np.uint8 else f.dtype
    CO, KH, KW, CI = f.shape  # depthwise: [1, KH, KW, C]
    if f.is_const:
        data = f.data.reshape(f.shape)
        data = data.transpose(1, 2, 3, 0) if channels_last else data.reshape(KH, KW, CI)
        return ctx.const(np.ascontiguousarray(data.astype(dtype) - dtype.type(zp)))
    if not channels_last and zp == 0:
        return ctx.view(f, (KH, KW, CI))
    K = KH * KW * CI
    if channels_last:
        tmp = ctx.temp((KH, KW, CI, CO), dtype)
        ctx.call(L.repack_to_channels_last, ctx.view(f, (CO, K)), ctx.view(tmp, (K, CO)), zp)
    else:
        tmp = ctx.temp((KH, KW, CI), dtype)
        ctx.call(L.repack_to_channels_last, ctx.view(f, (1, K)), ctx.view(tmp, (K, 1)), zp)
    return tmp


def _window_sums(ctx: PrepareContext, w, KH: int, KW: int, C: int):
    """Per-channel sums over the window of a depthwise filter [KH, KW, C] (constant, view or temporary)."""
    if isinstance(w, ConstArg):
        return ctx.const(w.array.reshape(KH * KW, C).astype(np.int64).sum(axis=0).astype(np.int32))
    sums = ctx.temp((C,), np.int32)
    src = ctx.view(w.tensor, (KH * KW, C)) if isinstance(w, TensorView) else ctx.view(w, (KH * KW, C))
    ctx.call(L.channel_sums, src, sums)
    return sums


def _as_matrix(ctx: PrepareContext, w, rows: int, cols: int):
    """A [1, 1, rows, cols] repacked filter (constant or temporary) as a [rows, cols] kernel argument."""
    if isinstance(w, Tensor):
        return ctx.view(w, (rows, cols))
    return ctx.const(w.array.reshape(rows, cols))


def _hybrid_inputs(ctx: PrepareContext, x: Tensor, asymmetric: bool):
    """Schedule the per-batch quantization of a float input; returns (q, scales, zero points) temporaries."""
    n = x.shape[0]
    ctx.check(n > 0, "hybrid kernels need a non-empty batch")
    q = ctx.temp(x.shape, np.int8)
    sf = ctx.temp((n,), np.float32)
    zp = ctx.temp((n,), np.int32)
    per = x.size // n
    # the hybrid FULLY_CONNECTED / LSTM quantization (BatchQuantizeFloats as the official x86 build computes it)
    ctx.call(quantize_rows, ctx.view(x, (x.size,)), n, per, bool(asymmetric), ctx.view(q, (q.size,)), sf, zp)
    return q, sf, zp


def _int16_uses_int64_accumulator(ctx: PrepareContext, b: Tensor | None) -> bool:
    """int16x8 CONV_2D / TRANSPOSE_CONV: the option quantized_bias_type selects the int32 path (int32 bias and
    accumulator); otherwise the official runtime runs its reference kernel with int64 bias and accumulator."""
    qbt = int(ctx.options.get("quantized_bias_type", 0) or 0)
    if qbt != TENSOR_TYPE_FLOAT32:
        ctx.check(qbt in (TENSOR_TYPE_INT32, TENSOR_TYPE_INT64),
                  f"quantized_bias_type {qbt} must be INT32 or INT64 for int16 activations")
        want = np.int32 if qbt == TENSOR_TYPE_INT32 else np.int64
        ctx.check(b is None or b.dtype == want,
                  f"bias type {b.dtype.name if b is not None else ''} differs from quantized_bias_type")
    return qbt != TENSOR_TYPE_INT32


def _check_ranks(ctx: PrepareContext, x: Tensor, f: Tensor, rank: int) -> None:
    ctx.check(x.ndim == rank, f"input must be {rank}-D, got shape {list(x.shape)}")
    ctx.check(f.ndim == rank, f"filter must be {rank}-D, got shape {list(f.shape)}")


def _window_geometry(ctx: PrepareContext, H: int, W: int, KH: int, KW: int):
    """(OH, OW, geo = [sh, sw, dh, dw, pad_t, pad_l]) of a 2-D window from the node's stride, dilation and padding
    options. options["explicit_padding"] = (top, bottom, left, right): a PAD folded into the node
    (lite_numba/runtime/fusion.py fold_pads), the window then slides over the input padded by those amounts (the
    kernels read every position outside the input as padding; the trailing amount follows from OH / OW)."""
    sh, sw = _positive_option(ctx, "stride_h"), _positive_option(ctx, "stride_w")
    dh, dw = _positive_option(ctx, "dilation_h_factor"), _positive_option(ctx, "dilation_w_factor")
    pad = int(ctx.options.get("padding", 0))
    top, bottom, left, right = ctx.options.get("explicit_padding") or (0, 0, 0, 0)
    OH, pt, _ = out_size_and_padding(ctx, pad, H + top + bottom, KH, sh, dh, "height")
    OW, pl, _ = out_size_and_padding(ctx, pad, W + left + right, KW, sw, dw, "width")
    return OH, OW, np.array([sh, sw, dh, dw, pt + top, pl + left], np.int64)


def _hybrid_filter(ctx: PrepareContext, f: Tensor, b, CO: int, axis: int):
    """A hybrid layer's (float bias, activation limits, per-channel filter scales): an int8 symmetric filter whose
    channels lie along `axis`."""
    ctx.check_dtype(f, np.int8)
    _check_symmetric_filter(ctx, f)
    return _bias(ctx, b, CO, (np.float32,), np.float32), _float_limits(ctx), _filter_scales(ctx, f, CO, axis)


# --- CONV_2D --------------------------------------------------------------------------------------------------------


def _conv2d_geometry(ctx: PrepareContext, x: Tensor, f: Tensor):
    _check_ranks(ctx, x, f, 4)
    N, H, W, CI = x.shape
    CO, KH, KW, CIG = f.shape
    ctx.check(H > 0 and W > 0 and CI > 0, f"input shape {list(x.shape)} has an empty dimension")
    ctx.check(CO > 0 and KH > 0 and KW > 0 and CIG > 0, f"filter shape {list(f.shape)} has an empty dimension")
    ctx.check(CI % CIG == 0, f"input channels {CI} are not a multiple of filter input channels {CIG}")
    groups = CI // CIG
    ctx.check(CO % groups == 0, f"output channels {CO} are not a multiple of the {groups} groups")
    OH, OW, geo = _window_geometry(ctx, H, W, KH, KW)
    sh, sw, _, _, pt, pl = (int(v) for v in geo)
    pointwise = KH == 1 and KW == 1 and sh == 1 and sw == 1 and groups == 1 and pt == 0 and pl == 0
    return (N, OH, OW, CO), geo, groups, pointwise


def _integer_types(ctx: PrepareContext, x: Tensor, f: Tensor, b, out: Tensor, CO: int, int16_bias=None):
    """Check an integer convolution's input, filter and output types and take its bias argument; returns (bias,
    wide). int8 needs a symmetric int8 filter and uint8 a uint8 filter, both with an int32 bias; int16 needs a
    symmetric int8 filter and zero points 0, with an int32 or int64 bias (accumulated in int64, `wide`, when the
    official kernel does so), or only int64 when `int16_bias` is np.int64 (DEPTHWISE_CONV_2D)."""
    if x.dtype == np.int8 or x.dtype == np.uint8:
        ctx.check_dtype(f, x.dtype)
        if x.dtype == np.int8:
            _check_symmetric_filter(ctx, f)
        return _bias(ctx, b, CO, (np.int32,), np.int32), False
    if x.dtype == np.int16:
        ctx.check_dtype(f, np.int8)
        _check_symmetric_filter(ctx, f)
        ctx.check(x.zero_point == 0 and out.zero_point == 0, "int16 input and output must have zero point 0")
        if int16_bias is np.int64:
            return _bias(ctx, b, CO, (np.int64,), np.int64), True
        wide = _int16_uses_int64_accumulator(ctx, b)
        return _bias(ctx, b, CO, (np.int32, np.int64), np.int64 if wide else np.int32), wide
    ctx.fail(f"input type {x.dtype.name} is not supported")


@kernel("CONV_2D")
def CONV_2D(ctx: PrepareContext) -> None:
    fused = ctx.options.get("epilogue")  # successors fused into it (conv_epilogue.py): inputs 3 and 4
    ctx.check_num(inputs=(2, 3) if fused is None else 5, outputs=1)
    x, f, b = ctx.input(0), ctx.input(1), ctx.input(2)
    out_shape, geo, groups, pointwise = _conv2d_geometry(ctx, x, f)
    N, OH, OW, CO = out_shape
    CI = x.shape[3]
    out = ctx.set_output(0, out_shape, x.dtype)
    P = N * OH * OW

    if x.dtype == np.float32 and f.dtype == np.float32:
        bias = _bias(ctx, b, CO, (np.float32,), np.float32)
        lim = _float_limits(ctx)
        if out.size == 0:
            return
        drivers = float_drivers()
        ep = None if fused is None else epilogue_terms(ctx, out, fused)
        if groups == 1 and drivers is not None:
            return simd_f32.schedule_conv2d(ctx, x, f, b, out, geo, drivers, ep)
        w = _filter(ctx, f)
        schedule_conv2d_f32(ctx, x, _as_matrix(ctx, w, CI, CO) if pointwise else w, bias, out, geo, lim, CO, groups,
                            pointwise)
        if ep is not None:
            schedule_epilogue_pass(ctx, out, ep, lim)
        return
    ctx.check(fused is None, "a fused epilogue needs a float32 input and filter")

    if x.dtype == np.float32:
        ctx.check_dtype(f, np.int8)
        return _conv2d_hybrid(ctx, x, f, b, out, geo, groups)

    # The output stage follows the official code path: one group runs an im2col + GEMM whose requantization is
    # ruy's x86 kernel (int8/uint8, and int16 with int32 bias: double rounding, half up, for every channel);
    # several groups run the reference kernel (TFLite's rounding, half away from zero); int16 with int64 bias the
    # reference kernel with an int64 accumulator.
    bias, wide = _integer_types(ctx, x, f, b, out, CO)
    rq_mode = L.RQ_INT64 if wide else L.RQ_NEON
    nvec = CO if groups == 1 and not wide else 0
    mult, shift = _requant_params(ctx, x, f, out, CO, 0, wide)
    qmin, qmax = _quant_limits(ctx, out)
    if out.size == 0:
        return
    if (x.dtype == np.int8 or x.dtype == np.uint8) and groups == 1 and f.is_const:
        # packed once for the int8 GEMM kernels (VNNI or portable), same ruy output stage; uint8 weights (per-tensor
        # zero point) are packed as w - 128 with a per-row term (simd_int8.qconv_vnni)
        KH, KW = f.shape[1], f.shape[2]
        zp_w = int(f.quantization.zero_point) if x.dtype == np.uint8 else None
        return qgemm.schedule_qgemm_mt(ctx, x, f.data.reshape(CO, -1), x.zero_point, bias, out,
                                           [int(v) for v in geo] + [KH, KW], mult, shift, out.zero_point, qmin, qmax,
                                           zp_w)
    w = _filter(ctx, f)
    acc = ctx.temp((CO // groups,), np.int64 if wide else np.int32)
    quant = (x.zero_point, mult, shift, out.zero_point, qmin, qmax, nvec, rq_mode)
    if pointwise:
        ctx.call(L.gemm_q, ctx.view(x, (P, CI)), _as_matrix(ctx, w, CI, CO), bias, ctx.view(out, (P, CO)), acc,
                 *quant)
    else:
        ctx.call(L.conv2d_q, x, w, bias, out, acc, geo, *quant)


def _conv2d_hybrid(ctx: PrepareContext, x: Tensor, f: Tensor, b: Tensor | None, out: Tensor, geo, groups) -> None:
    """Float input, int8 filter: the official EvalHybrid (symmetric per-batch input quantization) when the filter
    has one scale (or all scales equal) and one group, else EvalHybridPerChannel (asymmetric)."""
    CO = f.shape[0]
    bias = _bias(ctx, b, CO, (np.float32,), np.float32)
    lim = _float_limits(ctx)
    scales = f.quantization.scales
    ctx.check(scales.size > 0, f"filter {f.name!r} of a hybrid CONV_2D has no scales")
    per_channel = scales.size > 1 and bool(np.any(scales != scales[0]))
    _check_symmetric_filter(ctx, f)
    if per_channel or groups != 1:
        cs = _filter_scales(ctx, f, CO, 0)
        asymmetric = True
        # grouped hybrid convolution runs the official reference kernel, which scales in another order
        mode = 1 if groups != 1 else 0
    else:
        cs = np.full(CO, scales[0], np.float32)
        asymmetric, mode = False, 0
    if out.size == 0:
        return
    if groups == 1 and f.is_const and schedule_hybrid(ctx, "conv", x, f.data.reshape(CO, -1), cs, bias, out,
                                                      asymmetric=asymmetric, lim=lim,
                                                      geo_conv=[int(v) for v in geo] + list(f.shape[1:3])):
        return  # the int8 tiles of the level in force (hybrid_gemm), else the portable loops below
    q, sf, zp = _hybrid_inputs(ctx, x, asymmetric)
    w = _filter(ctx, f)
    acc = ctx.temp((CO // groups,), np.int32)
    ctx.call(L.conv2d_hybrid, q, w, bias, out, acc, geo, sf, zp, cs, mode, lim)


# --- DEPTHWISE_CONV_2D ----------------------------------------------------------------------------------------------


@kernel("DEPTHWISE_CONV_2D")
def DEPTHWISE_CONV_2D(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=(2, 3), outputs=1)
    x, f, b = ctx.input(0), ctx.input(1), ctx.input(2)
    _check_ranks(ctx, x, f, 4)
    N, H, W, CI = x.shape
    one, KH, KW, CO = f.shape
    ctx.check(one == 1, f"filter must have shape [1, KH, KW, CO], got {list(f.shape)}")
    ctx.check(H > 0 and W > 0 and CI > 0, f"input shape {list(x.shape)} has an empty dimension")
    ctx.check(KH > 0 and KW > 0 and CO > 0, f"filter shape {list(f.shape)} has an empty dimension")
    ctx.check(CO % CI == 0, f"filter channels {CO} are not a multiple of input channels {CI}")
    OH, OW, geo = _window_geometry(ctx, H, W, KH, KW)
    out = ctx.set_output(0, (N, OH, OW, CO), x.dtype)

    if x.dtype == np.float32 and f.dtype == np.float32:
        bias = _bias(ctx, b, CO, (np.float32,), np.float32)
        lim = _float_limits(ctx)
        if out.size:

            dwconv.schedule_f32_mt(ctx, x, ctx.view(f, (KH, KW, CO)), bias, out, geo, lim)
        return

    if x.dtype == np.float32:
        # hybrid: the official EvalHybridPerChannel (asymmetric per-batch input quantization)
        bias, lim, cs = _hybrid_filter(ctx, f, b, CO, 3)
        if out.size:
            q, sf, zp = _hybrid_inputs(ctx, x, True)
            acc = ctx.temp((CO,), np.int32)
            # the official rescale is vectorized over blocks of 4 channels (another product order)
            w = _filter(ctx, f, channels_last=False)
            ctx.call(L.dwconv_hybrid, q, w, bias, out, acc, _window_sums(ctx, w, KH, KW, CO), geo, sf, zp, cs,
                     CO // 4 * 4, lim)
        return

    bias, wide = _integer_types(ctx, x, f, b, out, CO, int16_bias=np.int64)
    mult, shift = _requant_params(ctx, x, f, out, CO, 3, wide)
    qmin, qmax = _quant_limits(ctx, out)
    if out.size == 0:
        return
    acc = ctx.temp((CO,), np.int64 if wide else np.int32)
    # int8: optimized_ops::Quantize requantizes blocks of 8 channels with NEON rounding (half up), the remaining
    # channels with TFLite's (half away from zero). uint8: the legacy kernel rounds half away from zero (its vector
    # code differs only on exact ties of the first rounding step, which we do not reproduce).
    nvec = CO // 8 * 8 if x.dtype == np.int8 else 0
    w = _filter(ctx, f, channels_last=False)
    if not wide:
        return dwconv.schedule_q_mt(ctx, x, w, bias, _window_sums(ctx, w, KH, KW, CO), out, geo, x.zero_point, mult,
                                    shift, out.zero_point, qmin, qmax, nvec)
    ctx.call(L.dwconv_q, x, w, bias, out, acc, _window_sums(ctx, w, KH, KW, CO), geo, x.zero_point, mult, shift,
             out.zero_point, qmin, qmax, nvec, L.RQ_INT64 if wide else L.RQ_NEON)


# --- TRANSPOSE_CONV -------------------------------------------------------------------------------------------------


@kernel("TRANSPOSE_CONV")
def TRANSPOSE_CONV(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=(3, 4), outputs=1)
    shape_t, f, x, b = ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3)
    ctx.check(shape_t is not None and shape_t.ndim == 1, "output shape must be a 1-D tensor")
    ctx.check_dtype(shape_t, np.int32)
    _check_ranks(ctx, x, f, 4)
    N, H, W, CI = x.shape
    CO, KH, KW, FI = f.shape
    ctx.check(H > 0 and W > 0 and CI > 0, f"input shape {list(x.shape)} has an empty dimension")
    ctx.check(CO > 0 and KH > 0 and KW > 0, f"filter shape {list(f.shape)} has an empty dimension")
    ctx.check(FI == CI, f"filter input channels {FI} differ from input channels {CI}")
    sh, sw = _positive_option(ctx, "stride_h"), _positive_option(ctx, "stride_w")
    out_shape = [int(v) for v in np.asarray(ctx.value(0)).reshape(-1)]
    ctx.check(len(out_shape) == 4, f"output shape {out_shape} must have 4 elements")
    ctx.check(out_shape[0] == N, f"output batch {out_shape[0]} differs from input batch {N}")
    ctx.check(out_shape[1] > 0 and out_shape[2] > 0, f"output shape {out_shape} has an empty dimension")
    ctx.check(out_shape[3] == CO, f"output channels {out_shape[3]} differ from filter output channels {CO}")
    pad = int(ctx.options.get("padding", 0))
    OH, OW = out_shape[1], out_shape[2]
    ih, pt, _ = out_size_and_padding(ctx, pad, OH, KH, sh, 1, "height")
    iw, pl, _ = out_size_and_padding(ctx, pad, OW, KW, sw, 1, "width")
    ctx.check(ih == H and iw == W,
              f"input spatial size {[H, W]} does not match output shape {out_shape} (expected {[ih, iw]})")
    geo = np.array([sh, sw, pt, pl], np.int64)
    out = ctx.set_output(0, out_shape, x.dtype)
    P = OH * OW

    if x.dtype == np.float32 and f.dtype == np.float32:
        bias = _bias(ctx, b, CO, (np.float32,), np.float32)
        lim = _float_limits(ctx)
        if out.size == 0:
            return
        w = _filter(ctx, f)
        acc = ctx.temp((CO,), np.float32)
        ctx.call(L.tconv_f32, x, w, bias, out, acc, geo, lim)
        return

    if x.dtype == np.float32:
        # hybrid: the official EvalHybrid (asymmetric per-batch input quantization, reference kernel)
        bias, lim, cs = _hybrid_filter(ctx, f, b, CO, 0)
        if out.size == 0:
            return
        q, sf, zp = _hybrid_inputs(ctx, x, True)
        w = _filter(ctx, f)
        scratch = ctx.temp(out_shape, np.int32)
        ctx.call(L.tconv_accumulate_int, q, w, scratch, geo, zp)
        # the official reference kernel scales every product as (acc * channel_scale) * input_scale
        ctx.call(L.hybrid_rows, ctx.view(scratch, (N, P, CO)), bias, ctx.view(out, (N, P, CO)), sf, cs, 1, lim)
        return

    bias, wide = _integer_types(ctx, x, f, b, out, CO)
    mult, shift = _requant_params(ctx, x, f, out, CO, 0, wide)
    qmin, qmax = _quant_limits(ctx, out)
    if out.size == 0:
        return
    w = _filter(ctx, f)
    scratch = ctx.temp(out_shape, np.int64 if wide else np.int32)
    ctx.call(L.tconv_accumulate_int, x, w, scratch, geo, np.full(N, x.zero_point, np.int32))
    # optimized_ops::Quantize: per-channel (int8, int16) in NEON blocks of 8 channels, per-tensor (uint8) in NEON
    # blocks of 16 elements, leftovers rounded half away from zero
    if x.dtype == np.uint8:
        nvec, per_element = out.size // 16 * 16, 1
    else:
        nvec, per_element = CO // 8 * 8, 0
    ctx.call(L.requant_rows, ctx.view(scratch, (N * P, CO)), bias, ctx.view(out, (N * P, CO)), mult, shift,
             out.zero_point, qmin, qmax, nvec, per_element, L.RQ_INT64 if wide else L.RQ_NEON)


# --- CONV_3D --------------------------------------------------------------------------------------------------------


@kernel("CONV_3D")
def CONV_3D(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=(2, 3), outputs=1)
    x, f, b = ctx.input(0), ctx.input(1), ctx.input(2)
    _check_ranks(ctx, x, f, 5)
    ctx.check_dtype(x, np.float32)
    ctx.check_dtype(f, np.float32)
    N, D, H, W, CI = x.shape
    KD, KH, KW, FI, CO = f.shape
    ctx.check(D > 0 and H > 0 and W > 0 and CI > 0, f"input shape {list(x.shape)} has an empty dimension")
    ctx.check(min(f.shape) > 0, f"filter shape {list(f.shape)} has an empty dimension")
    ctx.check(FI == CI, f"filter input channels {FI} differ from input channels {CI}")
    sd, sh, sw = (_positive_option(ctx, k) for k in ("stride_d", "stride_h", "stride_w"))
    dd, dh, dw = (_positive_option(ctx, k) for k in ("dilation_d_factor", "dilation_h_factor", "dilation_w_factor"))
    pad = int(ctx.options.get("padding", 0))
    OD, pf, _ = out_size_and_padding(ctx, pad, D, KD, sd, dd, "depth")
    OH, pt, _ = out_size_and_padding(ctx, pad, H, KH, sh, dh, "height")
    OW, pl, _ = out_size_and_padding(ctx, pad, W, KW, sw, dw, "width")
    out = ctx.set_output(0, (N, OD, OH, OW, CO), np.float32)
    bias = _bias(ctx, b, CO, (np.float32,), np.float32)
    lim = _float_limits(ctx)
    if out.size:
        geo = np.array([sd, sh, sw, dd, dh, dw, pf, pt, pl], np.int64)
        ctx.call(L.conv3d_f32, x, f, bias, out, geo, lim)


__all__ = ["CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "CONV_3D"]


def schedule_conv2d_f32(ctx, x, w, bias, out, geo, lim, CO: int, groups: int, pointwise: bool) -> None:
    """The portable float CONV_2D calls: gemm_f32 for a pointwise layer, else conv2d_f32, or their
    parallel drivers when ctx.num_threads > 1 and the layer is big enough. w: the [KH, KW, CIG, CO] filter
    argument (pointwise: [CI, CO])."""
    N, H, W, CI = x.shape
    _, OH, OW, _ = out.shape
    P = N * OH * OW
    KK = 1 if pointwise else int(np.prod(ctx.input(1).shape[1:3]))
    t = threads_for(ctx, P * CO * KK * CI // groups)
    if pointwise:
        ch = bands(P, CHUNKS_PER_THREAD * t) if t > 1 else []
        xv, ov = ctx.view(x, (P, CI)), ctx.view(out, (P, CO))
        if len(ch) < 2:
            return ctx.call(L.gemm_f32, xv, w, bias, ov, lim)
        return ctx.call(gemm_f32_par, xv, w, bias, ov, lim, np.array(ch, np.int64).reshape(-1),
                        ctx.temp((1,), np.int64), t)
    ch = image_row_chunks(N, OH, t) if t > 1 else []
    if len(ch) < 2:
        return ctx.call(L.conv2d_f32, x, w, bias, out, ctx.temp((CO // groups,), np.float32), geo, lim)
    g = np.asarray(geo, np.int64)  # [sh, sw, dh, dw, pad_t, pad_l]
    geos = np.repeat(g[None, :], len(ch), axis=0)
    for j, (_, _, y0, _) in enumerate(ch):
        geos[j, 4] = g[4] - y0 * g[0]
    ctx.call(conv2d_f32_par, x, w, bias, out, ctx.temp((t * (CO // groups),), np.float32), geos, lim,
             np.array(ch, np.int64).reshape(-1), ctx.temp((1,), np.int64), t)
