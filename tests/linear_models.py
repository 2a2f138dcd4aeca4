"""One-op models of the linear kernel family (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, BATCH_MATMUL) and the
random operand cases the tests build them from, shared by the family's tests (test_conv, test_fully_connected,
test_batch_matmul), the ISA-path and thread tests (test_simd_f32, test_simd_int8, test_dwconv_fast, test_threads)
and scripts/aarch64_check.py. Not a test file: nothing here runs under pytest by itself.

A convolution geometry is a dict: n, h, w, padding, act, seed, strides sh/sw, dilations dh/dw, kernel kh/kw, and
for CONV_2D cig (input channels per group), groups, cog (output channels per group); for DEPTHWISE_CONV_2D ci and
dm (depth multiplier). A case function returns (model bytes, inputs); the same arguments give the same bytes.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from lite_numba.kernels.linear import conv

from lite_numba.builder import ModelBuilder
from lite_numba.runtime.resolver import MutableOpResolver
from lite_numba.testing import compare_with_official, run_ours

# the fused activations the convolution tests draw from (hypothesis draws by position: keep the order)
CONV_ACTS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]


def conv_resolver() -> MutableOpResolver:
    """The convolution family's kernels alone, so its tests do not depend on other families' work in progress."""
    r = MutableOpResolver()
    for op, lo, hi, k in (("CONV_2D", 1, 8, conv.CONV_2D), ("DEPTHWISE_CONV_2D", 1, 7, conv.DEPTHWISE_CONV_2D),
                          ("TRANSPOSE_CONV", 1, 5, conv.TRANSPOSE_CONV), ("CONV_3D", 1, 1, conv.CONV_3D)):
        r.add_builtin(op, k, lo, hi)
    return r


CONV_RESOLVER = conv_resolver()


def run_conv(data: bytes, inputs) -> list[np.ndarray]:
    """run_ours with the convolution family's resolver."""
    return run_ours(data, inputs, op_resolver=CONV_RESOLVER)


def check_conv(data: bytes, inputs, tol: float = 1e-5) -> None:
    """The convolution family's resolver against the official runtime: integers exactly, floats within tol."""
    compare_with_official(data, inputs, tol, op_resolver=CONV_RESOLVER)


# --- shapes and quantized operands ------------------------------------------------------------------------------------


def out_size(padding: str, size: int, k: int, stride: int, dilation: int = 1) -> int:
    """A convolution's output size along one axis (SAME or VALID padding)."""
    eff = (k - 1) * dilation + 1
    stride = max(stride, 1)  # (error tests declare a stride of 0)
    return -(-size // stride) if padding == "SAME" else max((size - eff) // stride + 1, 0)


def rand_q(rng, dtype, shape, lo=None, hi=None):
    """Random integers of an integer dtype in [lo, hi] (the dtype's whole range by default)."""
    info = np.iinfo(dtype)
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    return rng.integers(lo, hi + 1, size=shape).astype(dtype)


def out_scale_for(rng, in_scale, w_scales, depth, x_span, w_span=100.0, qrange=127.0):
    """An output scale that keeps most requantized values in range (saturation still happens sometimes)."""
    acc_std = x_span * w_span * np.sqrt(depth) / 3
    return float(in_scale * np.mean(w_scales) * acc_std * 2.5 / qrange * rng.uniform(0.5, 2.0))


def quant_case(rng, dtype, x_shape, w_shape, co, axis, per_channel=True, bias_dtype=np.int32, bias=True):
    """Random quantized operands of a convolution: activations of `dtype` (int8, uint8 or int16; int8 weights
    except for uint8), weights of shape `w_shape` quantized along `axis`, bias, and the four quantizations.

    Half of the cases use small values with a requantization multiplier near 1, so the output stage meets exact
    rounding ties often (where the official code paths round differently)."""
    small = rng.random() < 0.5
    w_dtype = np.uint8 if dtype == np.uint8 else np.int8
    if dtype == np.int16:
        in_scale, in_zp, out_zp = float(rng.uniform(1e-4, 1e-3)), 0, 0
    elif dtype == np.int8:
        in_scale, in_zp, out_zp = (float(rng.uniform(0.005, 0.05)), int(rng.integers(-20, 21)),
                                     int(rng.integers(-30, 31)))
    else:
        in_scale, in_zp, out_zp = (float(rng.uniform(0.005, 0.05)), int(rng.integers(100, 156)),
                                     int(rng.integers(100, 156)))
    w_zp = int(rng.integers(100, 156)) if w_dtype == np.uint8 else 0
    w_scales = rng.uniform(0.002, 0.02, co if per_channel else 1).astype(np.float32)
    depth = int(np.prod(w_shape)) // co
    info_x, info_w = np.iinfo(dtype), np.iinfo(w_dtype)
    if small:
        x = np.clip(in_zp + rng.integers(-4, 5, x_shape), info_x.min, info_x.max).astype(dtype)
        w = np.clip(w_zp + rng.integers(-4, 5, w_shape), info_w.min, info_w.max).astype(w_dtype)
        b = rng.integers(-20, 21, co)
        out_s = float(in_scale * np.mean(w_scales) / rng.uniform(0.26, 3.0))
    else:
        x = rand_q(rng, dtype, x_shape)
        w = rand_q(rng, w_dtype, w_shape, *((-127, 127) if w_dtype == np.int8 else (0, 255)))
        span = 300000 if dtype == np.int16 else 3000
        b = rng.integers(-span, span, co)
        x_span, qrange = (32768, 32767.0) if dtype == np.int16 else (128, 127.0)
        out_s = out_scale_for(rng, in_scale, w_scales, depth, x_span=x_span, qrange=qrange)
    if w_dtype == np.uint8:
        w_quant = (float(w_scales[0]), w_zp)
        b_quant = (float(np.float32(in_scale) * w_scales[0]), 0)
    else:
        w_quant = {"scales": w_scales.tolist(), "zero_points": [0] * w_scales.size, "quantized_dimension": axis}
        b_quant = {"scales": (in_scale * np.resize(w_scales, co)).tolist(), "zero_points": [0] * co}
    return {"x": x, "w": w, "bias": b.astype(bias_dtype) if bias else None, "x_quant": (in_scale, in_zp),
            "w_quant": w_quant, "b_quant": b_quant, "out_quant": (out_s, out_zp)}


# --- CONV_2D ---------------------------------------------------------------------------------------------------------


def conv_shapes(g):
    """(input channels, output channels, output height, output width) of a CONV_2D geometry."""
    ci, co = g["cig"] * g["groups"], g["cog"] * g["groups"]
    oh = out_size(g["padding"], g["h"], g["kh"], g["sh"], g["dh"])
    ow = out_size(g["padding"], g["w"], g["kw"], g["sw"], g["dw"])
    return ci, co, oh, ow


def conv_options(g):
    """CONV_2D's builtin options of a geometry."""
    return {"padding": g["padding"], "stride_h": g["sh"], "stride_w": g["sw"], "dilation_h_factor": g["dh"],
            "dilation_w_factor": g["dw"], "fused_activation_function": g["act"]}


def _one_conv(op, x_dtype, x_shape, wv, bias, out_dtype, out_shape, options, version, x_quant, w_quant, b_quant,
              out_quant, const_filter):
    """A one-op model of a convolution-like op: inputs x, filter (constant or an input), bias (when given)."""
    b = ModelBuilder()
    x = b.add_input("x", x_dtype, x_shape, quant=x_quant)
    if const_filter:
        w = b.add_const("w", wv, quant=w_quant)
    else:
        w = b.add_input("w", wv.dtype, list(wv.shape), quant=w_quant)
    ins = [x, w]
    if bias is not None:
        ins.append(b.add_const("b", bias, quant=b_quant))
    y = b.add_tensor("y", out_dtype, out_shape, quant=out_quant)
    b.add_op(op, ins, [y], options=options, version=version)
    b.mark_output(y)
    return b.build()


def conv2d_model(g, x_dtype, wv, bias, out_dtype, x_quant=None, w_quant=None, b_quant=None, out_quant=None,
                 version=1, const_filter=True, extra=None):
    """A one-op CONV_2D model of geometry g (filter wv constant or, const_filter=False, an input; extra: more
    options); returns its bytes."""
    ci, co, oh, ow = conv_shapes(g)
    return _one_conv("CONV_2D", x_dtype, [g["n"], g["h"], g["w"], ci], wv, bias, out_dtype, [g["n"], oh, ow, co],
                     {**conv_options(g), **(extra or {})}, version, x_quant, w_quant, b_quant, out_quant, const_filter)


def geometry(n=1, h=5, w=5, ci=3, co=8, k=(3, 3), s=(1, 1), d=(1, 1), padding="SAME", act="NONE", seed=0):
    """A CONV_2D geometry with one group (keywords as the geometry dict's, k/s/d as (h, w) pairs)."""
    return {"n": n, "h": h, "w": w, "cig": ci, "groups": 1, "cog": co, "kh": k[0], "kw": k[1], "sh": s[0],
            "sw": s[1], "dh": d[0], "dw": d[1], "padding": padding, "act": act, "seed": seed}


def conv_case_f32(g, with_bias=True, const_filter=True):
    """A float32 CONV_2D with random filter, bias (unless with_bias=False) and input; the filter as an input when
    const_filter=False (then the inputs are [x, filter])."""
    ci, co, _, _ = conv_shapes(g)
    rng = np.random.default_rng(g["seed"])
    x = rng.standard_normal((g["n"], g["h"], g["w"], ci)).astype(np.float32)
    w = rng.standard_normal((co, g["kh"], g["kw"], ci)).astype(np.float32)
    bias = rng.standard_normal(co).astype(np.float32) if with_bias else None
    data = conv2d_model(g, np.float32, w, bias, np.float32, const_filter=const_filter)
    return data, [x] if const_filter else [x, w]


def conv_case_int8(g, per_channel: bool):
    """An int8 CONV_2D (version 3) of quant_case's operands, per-channel or per-tensor filter."""
    ci, co, oh, ow = conv_shapes(g)
    rng = np.random.default_rng(g["seed"])
    c = quant_case(rng, np.int8, (g["n"], g["h"], g["w"], ci), (co, g["kh"], g["kw"], g["cig"]), co, 0,
                   per_channel=per_channel)
    data = conv2d_model(g, np.int8, c["w"], c["bias"], np.int8, x_quant=c["x_quant"], w_quant=c["w_quant"],
                        b_quant=c["b_quant"], out_quant=c["out_quant"], version=3)
    return data, [c["x"]]


def conv_case_uint8(g, zp_w: int, zp_in: int, zero_bias: bool):
    """A uint8 CONV_2D with the weight zero point zp_w and the input zero point zp_in (quant_case's quantizations,
    weights and inputs over the whole byte range). The official uint8 kernel requires a bias: zero_bias makes it 0."""
    ci, co, oh, ow = conv_shapes(g)
    rng = np.random.default_rng(g["seed"])
    c = quant_case(rng, np.uint8, (g["n"], g["h"], g["w"], ci), (co, g["kh"], g["kw"], g["cig"]), co, 0,
                   per_channel=False)
    if zero_bias:
        c["bias"][:] = 0
    w_scale, _ = c["w_quant"]
    in_scale, _ = c["x_quant"]
    w = rng.integers(0, 256, (co, g["kh"], g["kw"], g["cig"])).astype(np.uint8)
    x = rng.integers(0, 256, (g["n"], g["h"], g["w"], ci)).astype(np.uint8)
    depth = g["kh"] * g["kw"] * g["cig"]
    out_s = float(in_scale * w_scale * 128.0 * np.sqrt(depth) * 2.0 / 255.0 * rng.uniform(0.5, 2.0))
    data = conv2d_model(g, np.uint8, w, c["bias"], np.uint8, x_quant=(in_scale, zp_in), w_quant=(w_scale, zp_w),
                        b_quant=c["b_quant"], out_quant=(out_s, int(rng.integers(0, 256))), version=1)
    return data, [x]


# --- DEPTHWISE_CONV_2D -----------------------------------------------------------------------------------------------


def dw_model(g, x_dtype, wv, bias, out_dtype, x_quant=None, w_quant=None, b_quant=None, out_quant=None, version=1,
             const_filter=True):
    """A one-op DEPTHWISE_CONV_2D model of geometry g; returns (bytes, (out_h, out_w, out_channels))."""
    co = g["ci"] * g["dm"]
    oh = out_size(g["padding"], g["h"], g["kh"], g["sh"], g["dh"])
    ow = out_size(g["padding"], g["w"], g["kw"], g["sw"], g["dw"])
    options = {"padding": g["padding"], "stride_h": g["sh"], "stride_w": g["sw"], "depth_multiplier": g["dm"],
               "dilation_h_factor": g["dh"], "dilation_w_factor": g["dw"], "fused_activation_function": g["act"]}
    data = _one_conv("DEPTHWISE_CONV_2D", x_dtype, [g["n"], g["h"], g["w"], g["ci"]], wv, bias, out_dtype,
                     [g["n"], oh, ow, co], options, version, x_quant, w_quant, b_quant, out_quant, const_filter)
    return data, (oh, ow, co)


def dw_float_case(g):
    """A float32 DEPTHWISE_CONV_2D (version 2) with random filter, bias and input."""
    rng = np.random.default_rng(g["seed"])
    co = g["ci"] * g["dm"]
    w = rng.standard_normal((1, g["kh"], g["kw"], co)).astype(np.float32)
    data, _ = dw_model(g, np.float32, w, rng.standard_normal(co).astype(np.float32), np.float32, version=2)
    return data, [rng.standard_normal((g["n"], g["h"], g["w"], g["ci"])).astype(np.float32)]


def dw_quant_case(g, kind):
    """A quantized DEPTHWISE_CONV_2D of quant_case's operands: kind "int8" (per-channel), "int8_per_tensor" or
    "uint8"."""
    rng = np.random.default_rng(g["seed"])
    co = g["ci"] * g["dm"]
    dtype = np.uint8 if kind == "uint8" else np.int8
    shape_x = (g["n"], g["h"], g["w"], g["ci"])
    c = quant_case(rng, dtype, shape_x, (1, g["kh"], g["kw"], co), co, 3, per_channel=kind == "int8")
    data, _ = dw_model(g, dtype, c["w"], c["bias"], dtype, x_quant=c["x_quant"], w_quant=c["w_quant"],
                       b_quant=c["b_quant"], out_quant=c["out_quant"], version=1 if dtype == np.uint8 else 3)
    return data, [c["x"]]


# --- FULLY_CONNECTED -------------------------------------------------------------------------------------------------


def fc_model(x_shape, w, *, x_dtype=np.float32, x_quant=None, w_quant=None, bias=None, bias_quant=None,
             out_dtype=np.float32, out_quant=None, act="NONE", keep=False, const_weights=True, version=1,
             extra_options=None):
    """A one-op FULLY_CONNECTED model; returns its bytes."""
    b = ModelBuilder()
    x = b.add_input("x", x_dtype, x_shape, quant=x_quant)
    units, k = w.shape
    if const_weights:
        wt = b.add_const("w", w, quant=w_quant)
    else:
        wt = b.add_input("w", w.dtype, list(w.shape), quant=w_quant)
    ins = [x, wt] + ([b.add_const("b", bias, quant=bias_quant)] if bias is not None else [])
    batch = int(np.prod(x_shape)) // k if k else int(np.prod(x_shape[:-1]))
    out_shape = list(x_shape[:-1]) + [units] if keep else [batch, units]
    y = b.add_tensor("y", out_dtype, out_shape, quant=out_quant)
    opts = {"fused_activation_function": act, "keep_num_dims": keep, **(extra_options or {})}
    b.add_op("FULLY_CONNECTED", ins, [y], options=opts, version=version)
    b.mark_output(y)
    return b.build()


def fc_quant_case(rng, x_dtype, w_dtype, batch, k, units, per_channel, bias_dtype, act, bias_type=None):
    """A quantized FULLY_CONNECTED (version 4) with random weights ([units, k], per-channel or per-tensor), bias
    (none when bias_dtype is None) and input [batch, k], and an output scale that spreads the results over the
    output range; returns (bytes, x)."""
    xi, wi = np.iinfo(x_dtype), np.iinfo(w_dtype)
    x_zp = 0 if x_dtype == np.int16 else int(rng.integers(xi.min // 4, xi.max // 4 + 1))
    x_scale = 0.02 if x_dtype != np.int16 else 2e-4
    w_zp = int(rng.integers(100, 156)) if w_dtype == np.uint8 else 0
    w = rng.integers(wi.min + (w_dtype != np.uint8), wi.max + 1, (units, k)).astype(w_dtype)
    if per_channel:
        w_scales = rng.uniform(0.002, 0.02, units).astype(np.float32)
        w_quant = {"scales": w_scales, "zero_points": [0] * units, "quantized_dimension": 0}
    else:
        w_scales = np.array([rng.uniform(0.002, 0.02)], np.float32)
        w_quant = (float(w_scales[0]), w_zp)
    bias = bias_quant = None
    if bias_dtype is not None:
        bias = rng.integers(-2000, 2000, units).astype(bias_dtype)
        bias_quant = {"scales": (x_scale * w_scales).astype(np.float32), "zero_points": [0] * w_scales.size,
                      "quantized_dimension": 0}
    x = rng.integers(xi.min, xi.max + 1, (batch, k)).astype(x_dtype)
    # an output scale that spreads the real results over the output range (few saturate)
    real = ((x.astype(np.float64) - x_zp) * x_scale) @ ((w.astype(np.float64) - w_zp) * w_scales[:, None]).T
    oi = np.iinfo(x_dtype)
    out_scale = max(float(np.abs(real).max()) / (oi.max * 0.8), 1e-6)
    out_zp = 0 if x_dtype == np.int16 else int(rng.integers(-20, 21)) + (128 if x_dtype == np.uint8 else 0)
    opts = {"quantized_bias_type": bias_type} if bias_type else None
    data = fc_model([batch, k], w, x_dtype=x_dtype, x_quant=(x_scale, x_zp), w_quant=w_quant, bias=bias,
                    bias_quant=bias_quant, out_dtype=x_dtype, out_quant=(out_scale, out_zp), act=act, version=4,
                    extra_options=opts)
    return data, x


# --- BATCH_MATMUL ----------------------------------------------------------------------------------------------------


def bmm_out_shape(ls, rs, adj_x, adj_y):
    """BATCH_MATMUL's output shape for lhs shape ls and rhs shape rs (broadcast batch dimensions)."""
    rank = max(len(ls), len(rs))
    lp = [1] * (rank - len(ls)) + list(ls)
    rp = [1] * (rank - len(rs)) + list(rs)
    batch = [max(a, b) for a, b in zip(lp[:-2], rp[:-2])]
    return batch + [ls[-1] if adj_x else ls[-2], rs[-2] if adj_y else rs[-1]]


def bmm_model(ls, rs, *, adj_x=False, adj_y=False, lhs_dtype=np.float32, rhs_dtype=np.float32, lhs_quant=None,
              rhs_quant=None, out_dtype=np.float32, out_quant=None, rhs_const=None, version=1, asymmetric=False):
    """A one-op BATCH_MATMUL model: lhs x an input, rhs y an input or (rhs_const) a constant."""
    b = ModelBuilder()
    x = b.add_input("x", lhs_dtype, ls, quant=lhs_quant)
    if rhs_const is not None:
        y = b.add_const("y", rhs_const, quant=rhs_quant)
    else:
        y = b.add_input("y", rhs_dtype, rs, quant=rhs_quant)
    z = b.add_tensor("z", out_dtype, bmm_out_shape(ls, rs, adj_x, adj_y), quant=out_quant)
    b.add_op("BATCH_MATMUL", [x, y], [z], version=version,
             options={"adj_x": adj_x, "adj_y": adj_y, "asymmetric_quantize_inputs": asymmetric})
    b.mark_output(z)
    return b.build()


@st.composite
def bmm_shapes(draw):
    """Broadcast-compatible lhs/rhs shapes of rank 2-5 with transposition flags."""
    rank = draw(st.integers(2, 5))
    batch = [draw(st.integers(1, 3)) for _ in range(rank - 2)]
    m, k, n = draw(st.integers(1, 9)), draw(st.integers(1, 40)), draw(st.integers(1, 9))
    lb = [d if draw(st.booleans()) else 1 for d in batch]
    rb = [d if draw(st.booleans()) else 1 for d in batch]
    lb = lb[draw(st.integers(0, len(lb))):]  # lower rank on one side
    rb = rb[draw(st.integers(0, len(rb))) if not lb or len(lb) == len(batch) else 0:]
    adj_x, adj_y = draw(st.booleans()), draw(st.booleans())
    ls = lb + ([k, m] if adj_x else [m, k])
    rs = rb + ([n, k] if adj_y else [k, n])
    return ls, rs, adj_x, adj_y
