"""Convolution family (CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV, CONV_3D) against the official runtime.

One-op models are built with ModelBuilder and run in lite-numba and in the official builtin kernels on the same
random inputs: float outputs must match within 1e-5 (relative to the largest output), integer outputs exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from linear_models import (
    CONV_ACTS,
    CONV_RESOLVER,
    conv2d_model,
    conv_shapes,
    dw_model,
    out_size,
    quant_case,
    rand_q,
    run_conv,
)

# imported under the names the hypothesis tests' bodies use: a derandomized test's examples are seeded by its source
from linear_models import check_conv as check

from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close, prepare_error, require_official, run_official

require_official()

SETTINGS = settings(max_examples=scaled(25), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=scaled(10), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def hybrid_input(rng, shape):
    """Float input for hybrid kernels: shifted normal values, or a coarse grid (exact rounding ties)."""
    if rng.random() < 0.5:
        return (rng.integers(-40, 60, size=shape) / 8.0).astype(np.float32)
    return (rng.standard_normal(shape) + rng.uniform(-1, 1)).astype(np.float32)


# --- CONV_2D ---------------------------------------------------------------------------------------------------------

conv_geometry = st.fixed_dictionaries({
    "n": st.integers(1, 2), "h": st.integers(1, 9), "w": st.integers(1, 9), "cig": st.integers(1, 12),
    "groups": st.sampled_from([1, 1, 1, 2]), "cog": st.integers(1, 20), "kh": st.integers(1, 3),
    "kw": st.integers(1, 3), "sh": st.integers(1, 3), "sw": st.integers(1, 3), "dh": st.integers(1, 2),
    "dw": st.integers(1, 2), "padding": st.sampled_from(["SAME", "VALID"]), "act": st.sampled_from(CONV_ACTS),
    "seed": st.integers(0, 2**31 - 1),
})


@SETTINGS
@given(conv_geometry)
def test_conv2d_float(g):
    ci, co, oh, ow = conv_shapes(g)
    assume(oh > 0 and ow > 0)
    rng = np.random.default_rng(g["seed"])
    x = rng.standard_normal((g["n"], g["h"], g["w"], ci)).astype(np.float32)
    w = rng.standard_normal((co, g["kh"], g["kw"], g["cig"])).astype(np.float32)
    bias = rng.standard_normal(co).astype(np.float32)
    version = 6 if g["groups"] > 1 else 1
    check(conv2d_model(g, np.float32, w, bias, np.float32, version=version), [x])


@SETTINGS
@given(conv_geometry, st.sampled_from(["int8", "int8_per_tensor", "uint8", "int16", "int16_int32_bias"]))
def test_conv2d_quantized(g, kind):
    if kind in ("uint8", "int16", "int16_int32_bias"):
        g = {**g, "groups": 1 if kind == "uint8" or g["seed"] % 2 else g["groups"]}
    ci, co, oh, ow = conv_shapes(g)
    assume(oh > 0 and ow > 0)
    rng = np.random.default_rng(g["seed"])
    dtype = {"int8": np.int8, "int8_per_tensor": np.int8, "uint8": np.uint8}.get(kind, np.int16)
    c = quant_case(rng, dtype, (g["n"], g["h"], g["w"], ci), (co, g["kh"], g["kw"], g["cig"]), co, 0,
                   per_channel=kind != "int8_per_tensor", bias_dtype=np.int64 if kind == "int16" else np.int32)
    extra = {"quantized_bias_type": "INT32"} if kind == "int16_int32_bias" else {}
    version = {"uint8": 1, "int16": 4, "int16_int32_bias": 8}.get(kind, 3)
    if g["groups"] > 1 and version < 8:
        version = 6
    data = conv2d_model(g, dtype, c["w"], c["bias"], dtype, x_quant=c["x_quant"], w_quant=c["w_quant"],
                        b_quant=c["b_quant"], out_quant=c["out_quant"], version=version, extra=extra)
    check(data, [c["x"]])


@SETTINGS
@given(conv_geometry, st.sampled_from(["per_tensor", "per_channel", "equal_scales"]))
def test_conv2d_hybrid(g, scales_kind):
    ci, co, oh, ow = conv_shapes(g)
    assume(oh > 0 and ow > 0)
    rng = np.random.default_rng(g["seed"])
    if g["groups"] > 1 and scales_kind == "per_tensor":
        scales_kind = "equal_scales"  # the official grouped hybrid kernel needs one scale per channel
    if scales_kind == "per_tensor":
        w_scales = np.array([rng.uniform(0.002, 0.02)], np.float32)
    elif scales_kind == "equal_scales":
        w_scales = np.full(co, rng.uniform(0.002, 0.02), np.float32)
    else:
        w_scales = rng.uniform(0.002, 0.02, co).astype(np.float32)
    wq = rand_q(rng, np.int8, (co, g["kh"], g["kw"], g["cig"]), -127, 127)
    bias = rng.standard_normal(co).astype(np.float32)
    x = hybrid_input(rng, (g["n"], g["h"], g["w"], ci))
    per_channel = scales_kind == "per_channel"
    version = 6 if g["groups"] > 1 else (5 if per_channel else 2)
    data = conv2d_model(g, np.float32, wq, bias, np.float32,
                        w_quant={"scales": w_scales.tolist(), "zero_points": [0] * w_scales.size,
                                 "quantized_dimension": 0}, version=version)
    check(data, [x])


def test_conv2d_without_bias_matches_zero_bias():
    """A missing bias (rejected by the official kernel) behaves as a zero bias."""
    g = {"n": 1, "h": 5, "w": 6, "cig": 3, "groups": 1, "cog": 4, "kh": 3, "kw": 3, "sh": 1, "sw": 2, "dh": 1,
         "dw": 1, "padding": "SAME", "act": "RELU6", "seed": 0}
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 5, 6, 3)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    (ours,) = run_conv(conv2d_model(g, np.float32, w, None, np.float32), [x])
    (ref,) = run_official(conv2d_model(g, np.float32, w, np.zeros(4, np.float32), np.float32), [x])
    assert_close(ours, ref, 1e-5)


def test_conv2d_filter_as_input():
    """A filter that is a model input is repacked at run time."""
    g = {"n": 2, "h": 6, "w": 5, "cig": 3, "groups": 1, "cog": 4, "kh": 2, "kw": 3, "sh": 2, "sw": 1, "dh": 1,
         "dw": 2, "padding": "SAME", "act": "NONE", "seed": 0}
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 6, 5, 3)).astype(np.float32)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    check(conv2d_model(g, np.float32, w, bias, np.float32, const_filter=False), [x, w])


@pytest.mark.parametrize("op,dtype", [("CONV_2D", np.uint8), ("DEPTHWISE_CONV_2D", np.uint8),
                                      ("DEPTHWISE_CONV_2D", np.int8)])
def test_quantized_filter_as_input(op, dtype):
    """Filters known only at run time: repacked (minus their zero point) and summed by scheduled calls."""
    rng = np.random.default_rng(6)
    if op == "CONV_2D":
        g = {"n": 1, "h": 6, "w": 5, "cig": 3, "groups": 1, "cog": 4, "kh": 3, "kw": 3, "sh": 1, "sw": 1, "dh": 1,
             "dw": 1, "padding": "SAME", "act": "RELU", "seed": 0}
        c = quant_case(rng, dtype, (1, 6, 5, 3), (4, 3, 3, 3), 4, 0, per_channel=False)
        data = conv2d_model(g, dtype, c["w"], c["bias"], dtype, x_quant=c["x_quant"], w_quant=c["w_quant"],
                            b_quant=c["b_quant"], out_quant=c["out_quant"], const_filter=False)
    else:
        g = {"n": 1, "h": 6, "w": 5, "ci": 4, "dm": 1, "kh": 3, "kw": 3, "sh": 1, "sw": 1, "dh": 1, "dw": 1,
             "padding": "SAME", "act": "NONE"}
        c = quant_case(rng, dtype, (1, 6, 5, 4), (1, 3, 3, 4), 4, 3, per_channel=dtype == np.int8)
        data, _ = dw_model(g, dtype, c["w"], c["bias"], dtype, x_quant=c["x_quant"], w_quant=c["w_quant"],
                           b_quant=c["b_quant"], out_quant=c["out_quant"], version=3, const_filter=False)
    check(data, [c["x"], c["w"]])


def test_conv2d_resize_batch():
    g = {"n": 1, "h": 7, "w": 7, "cig": 2, "groups": 1, "cog": 3, "kh": 3, "kw": 3, "sh": 1, "sw": 1, "dh": 1,
         "dw": 1, "padding": "SAME", "act": "RELU", "seed": 0}
    rng = np.random.default_rng(3)
    data = conv2d_model(g, np.float32, rng.standard_normal((3, 3, 3, 2)).astype(np.float32),
                        rng.standard_normal(3).astype(np.float32), np.float32)
    check(data, [rng.standard_normal((3, 9, 4, 2)).astype(np.float32)])


# --- DEPTHWISE_CONV_2D -----------------------------------------------------------------------------------------------

dw_geometry = st.fixed_dictionaries({
    "n": st.integers(1, 2), "h": st.integers(1, 9), "w": st.integers(1, 9), "ci": st.integers(1, 24),
    "dm": st.integers(1, 3), "kh": st.integers(1, 3), "kw": st.integers(1, 3), "sh": st.integers(1, 2),
    "sw": st.integers(1, 2), "dh": st.integers(1, 2), "dw": st.integers(1, 2),
    "padding": st.sampled_from(["SAME", "VALID"]), "act": st.sampled_from(CONV_ACTS), "seed": st.integers(0, 2**31 - 1),
})


def _dw_valid(g):
    return out_size(g["padding"], g["h"], g["kh"], g["sh"], g["dh"]) > 0 and \
        out_size(g["padding"], g["w"], g["kw"], g["sw"], g["dw"]) > 0


@SETTINGS
@given(dw_geometry)
def test_depthwise_float(g):
    assume(_dw_valid(g))
    rng = np.random.default_rng(g["seed"])
    co = g["ci"] * g["dm"]
    w = rng.standard_normal((1, g["kh"], g["kw"], co)).astype(np.float32)
    data, _ = dw_model(g, np.float32, w, rng.standard_normal(co).astype(np.float32), np.float32, version=2)
    check(data, [rng.standard_normal((g["n"], g["h"], g["w"], g["ci"])).astype(np.float32)])


@SETTINGS
@given(dw_geometry, st.sampled_from(["int8", "int8_per_tensor", "uint8", "int16", "hybrid"]))
def test_depthwise_quantized(g, kind):
    assume(_dw_valid(g))
    rng = np.random.default_rng(g["seed"])
    co = g["ci"] * g["dm"]
    shape_x = (g["n"], g["h"], g["w"], g["ci"])
    wshape = (1, g["kh"], g["kw"], co)
    if kind == "hybrid":
        w_scales = rng.uniform(0.002, 0.02, co).astype(np.float32)
        per_axis = {"scales": w_scales.tolist(), "zero_points": [0] * co, "quantized_dimension": 3}
        data, _ = dw_model(g, np.float32, rand_q(rng, np.int8, wshape, -127, 127),
                           rng.standard_normal(co).astype(np.float32), np.float32, w_quant=per_axis, version=6)
        check(data, [hybrid_input(rng, shape_x)])
        return
    dtype = {"int8": np.int8, "int8_per_tensor": np.int8, "uint8": np.uint8}.get(kind, np.int16)
    c = quant_case(rng, dtype, shape_x, wshape, co, 3, per_channel=kind not in ("int8_per_tensor", "uint8"),
                   bias_dtype=np.int64 if dtype == np.int16 else np.int32)
    version = {np.uint8: 1, np.int16: 5}.get(dtype, 3)
    data, _ = dw_model(g, dtype, c["w"], c["bias"], dtype, x_quant=c["x_quant"], w_quant=c["w_quant"],
                       b_quant=c["b_quant"], out_quant=c["out_quant"], version=version)
    check(data, [c["x"]])


def test_depthwise_without_bias_matches_zero_bias():
    g = {"n": 1, "h": 6, "w": 5, "ci": 3, "dm": 2, "kh": 3, "kw": 3, "sh": 2, "sw": 1, "dh": 1, "dw": 1,
         "padding": "SAME", "act": "NONE", "seed": 0}
    rng = np.random.default_rng(4)
    w = rng.standard_normal((1, 3, 3, 6)).astype(np.float32)
    x = rng.standard_normal((1, 6, 5, 3)).astype(np.float32)
    (ours,) = run_conv(dw_model(g, np.float32, w, None, np.float32)[0], [x])
    (ref,) = run_official(dw_model(g, np.float32, w, np.zeros(6, np.float32), np.float32)[0], [x])
    assert_close(ours, ref, 1e-5)


# --- TRANSPOSE_CONV --------------------------------------------------------------------------------------------------

tconv_geometry = st.fixed_dictionaries({
    "n": st.integers(1, 2), "h": st.integers(1, 5), "w": st.integers(1, 5), "ci": st.integers(1, 4),
    "co": st.integers(1, 10), "kh": st.integers(1, 4), "kw": st.integers(1, 4), "sh": st.integers(1, 3),
    "sw": st.integers(1, 3), "padding": st.sampled_from(["SAME", "VALID"]), "act": st.sampled_from(CONV_ACTS),
    "bias": st.booleans(), "seed": st.integers(0, 2**31 - 1),
})


def tconv_out(g):
    if g["padding"] == "SAME":
        return g["h"] * g["sh"], g["w"] * g["sw"]
    return (g["h"] - 1) * g["sh"] + g["kh"], (g["w"] - 1) * g["sw"] + g["kw"]


def tconv_model(g, x_dtype, wv, bias, out_dtype, x_quant=None, w_quant=None, b_quant=None, out_quant=None,
                version=1, shape_input=False, extra=None):
    oh, ow = tconv_out(g)
    b = ModelBuilder()
    x = b.add_input("x", x_dtype, [g["n"], g["h"], g["w"], g["ci"]], quant=x_quant)
    oshape = np.array([g["n"], oh, ow, g["co"]], np.int32)
    s = b.add_input("shape", np.int32, [4]) if shape_input else b.add_const("shape", oshape)
    ins = [s, b.add_const("w", wv, quant=w_quant), x]
    if bias is not None:
        ins.append(b.add_const("b", bias, quant=b_quant))
    y = b.add_tensor("y", out_dtype, [g["n"], oh, ow, g["co"]], quant=out_quant)
    options = {"padding": g["padding"], "stride_h": g["sh"], "stride_w": g["sw"]}
    if g["act"] != "NONE":
        options["fused_activation_function"] = g["act"]
        version = max(version, 4)
    b.add_op("TRANSPOSE_CONV", ins, [y], options={**options, **(extra or {})}, version=version)
    b.mark_output(y)
    return b.build()


@SETTINGS
@given(tconv_geometry)
def test_transpose_conv_float(g):
    rng = np.random.default_rng(g["seed"])
    w = rng.standard_normal((g["co"], g["kh"], g["kw"], g["ci"])).astype(np.float32)
    bias = rng.standard_normal(g["co"]).astype(np.float32) if g["bias"] else None
    data = tconv_model(g, np.float32, w, bias, np.float32, version=3 if g["bias"] else 1)
    check(data, [rng.standard_normal((g["n"], g["h"], g["w"], g["ci"])).astype(np.float32)])


@SETTINGS
@given(tconv_geometry, st.sampled_from(["int8", "uint8", "int16", "int16_int32", "hybrid"]))
def test_transpose_conv_quantized(g, kind):
    rng = np.random.default_rng(g["seed"])
    co, ci = g["co"], g["ci"]
    shape_x = (g["n"], g["h"], g["w"], ci)
    wshape = (co, g["kh"], g["kw"], ci)
    if kind == "hybrid":
        w_scales = rng.uniform(0.002, 0.02, co).astype(np.float32)
        per_axis = {"scales": w_scales.tolist(), "zero_points": [0] * co, "quantized_dimension": 0}
        bias = rng.standard_normal(co).astype(np.float32) if g["bias"] else None
        data = tconv_model(g, np.float32, rand_q(rng, np.int8, wshape, -127, 127), bias, np.float32,
                           w_quant=per_axis, version=3 if g["bias"] else 2)
        check(data, [hybrid_input(rng, shape_x)])
        return
    dtype = {"int8": np.int8, "uint8": np.uint8}.get(kind, np.int16)
    c = quant_case(rng, dtype, shape_x, wshape, co, 0, per_channel=dtype != np.uint8,
                   bias_dtype=np.int64 if kind == "int16" else np.int32, bias=g["bias"])
    extra = {"quantized_bias_type": "INT32"} if kind == "int16_int32" else None
    version = 5 if extra else (3 if g["bias"] else (1 if dtype == np.uint8 else 2))
    data = tconv_model(g, dtype, c["w"], c["bias"], dtype, x_quant=c["x_quant"], w_quant=c["w_quant"],
                       b_quant=c["b_quant"], out_quant=c["out_quant"], version=version, extra=extra)
    check(data, [c["x"]])


def test_transpose_conv_runtime_output_shape():
    """The output shape given as an input makes the node dynamic (prepared again at invoke)."""
    g = {"n": 1, "h": 3, "w": 4, "ci": 2, "co": 3, "kh": 3, "kw": 2, "sh": 2, "sw": 2, "padding": "SAME",
         "act": "NONE", "bias": True}
    rng = np.random.default_rng(5)
    w = rng.standard_normal((3, 3, 2, 2)).astype(np.float32)
    data = tconv_model(g, np.float32, w, rng.standard_normal(3).astype(np.float32), np.float32, version=3,
                       shape_input=True)
    x = rng.standard_normal((1, 3, 4, 2)).astype(np.float32)
    check(data, [x, np.array([1, 6, 8, 3], np.int32)])


# --- CONV_3D ---------------------------------------------------------------------------------------------------------

@FEW
@given(st.fixed_dictionaries({
    "n": st.integers(1, 2), "d": st.integers(1, 5), "h": st.integers(1, 5), "w": st.integers(1, 5),
    "ci": st.integers(1, 3), "co": st.integers(1, 4), "k": st.tuples(*[st.integers(1, 3)] * 3),
    "s": st.tuples(*[st.integers(1, 2)] * 3), "dil": st.tuples(*[st.integers(1, 2)] * 3),
    "padding": st.sampled_from(["SAME", "VALID"]), "act": st.sampled_from(CONV_ACTS), "bias": st.booleans(),
    "seed": st.integers(0, 2**31 - 1)}))
def test_conv3d_float(g):
    sizes = (g["d"], g["h"], g["w"])
    outs = [out_size(g["padding"], sz, k, s, d) for sz, k, s, d in zip(sizes, g["k"], g["s"], g["dil"])]
    assume(min(outs) > 0)
    rng = np.random.default_rng(g["seed"])
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [g["n"], *sizes, g["ci"]])
    ins = [x, b.add_const("w", rng.standard_normal((*g["k"], g["ci"], g["co"])).astype(np.float32))]
    ins.append(b.add_const("b", rng.standard_normal(g["co"]).astype(np.float32)) if g["bias"] else -1)
    y = b.add_tensor("y", np.float32, [g["n"], *outs, g["co"]])
    b.add_op("CONV_3D", ins, [y], options={
        "padding": g["padding"], "stride_d": g["s"][0], "stride_h": g["s"][1], "stride_w": g["s"][2],
        "dilation_d_factor": g["dil"][0], "dilation_h_factor": g["dil"][1], "dilation_w_factor": g["dil"][2],
        "fused_activation_function": g["act"]})
    b.mark_output(y)
    check(b.build(), [rng.standard_normal((g["n"], *sizes, g["ci"])).astype(np.float32)])


# --- errors ----------------------------------------------------------------------------------------------------------

def _expect_error(data: bytes, op: str, match: str):
    prepare_error(data, f"(?s){op}.*{match}", op_resolver=CONV_RESOLVER)


def test_errors_conv2d():
    g = {"n": 1, "h": 5, "w": 5, "cig": 3, "groups": 1, "cog": 2, "kh": 3, "kw": 3, "sh": 1, "sw": 1, "dh": 1,
         "dw": 1, "padding": "SAME", "act": "NONE", "seed": 0}
    w = np.ones((2, 3, 3, 3), np.float32)
    _expect_error(conv2d_model(g, np.float32, w, np.zeros(3, np.float32), np.float32), "CONV_2D", "bias has 3")
    _expect_error(conv2d_model({**g, "sh": 0}, np.float32, w, np.zeros(2, np.float32), np.float32), "CONV_2D",
                  "stride_h must be positive")
    bad = np.ones((2, 3, 3, 2), np.float32)  # 3 input channels are not a multiple of 2
    _expect_error(conv2d_model(g, np.float32, bad, np.zeros(2, np.float32), np.float32), "CONV_2D", "multiple")
    _expect_error(conv2d_model({**g, "padding": "VALID", "h": 1}, np.float32, w, np.zeros(2, np.float32),
                               np.float32), "CONV_2D", "does not fit")
    wq = np.ones((2, 3, 3, 3), np.int8)
    data = conv2d_model(g, np.int8, wq, np.zeros(2, np.int32), np.int8, x_quant=(0.1, 0),
                        w_quant={"scales": [0.1, 0.1], "zero_points": [0, 3]}, out_quant=(0.1, 0), version=3)
    _expect_error(data, "CONV_2D", "zero points 0")


def test_errors_depthwise_transpose_conv3d():
    g = {"n": 1, "h": 4, "w": 4, "ci": 2, "dm": 2, "kh": 3, "kw": 3, "sh": 1, "sw": 1, "dh": 1, "dw": 1,
         "padding": "SAME", "act": "NONE"}
    data, _ = dw_model(g, np.float32, np.ones((1, 3, 3, 3), np.float32), np.zeros(3, np.float32), np.float32)
    _expect_error(data, "DEPTHWISE_CONV_2D", "multiple of input channels")

    tg = {"n": 1, "h": 3, "w": 3, "ci": 2, "co": 2, "kh": 3, "kw": 3, "sh": 2, "sw": 2, "padding": "SAME",
          "act": "NONE"}
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 3, 3, 2])
    s = b.add_const("shape", np.array([1, 9, 9, 2], np.int32))  # 9 / 2 rounds up to 5, not 3
    y = b.add_tensor("y", np.float32, [1, 9, 9, 2])
    b.add_op("TRANSPOSE_CONV", [s, b.add_const("w", np.ones((2, 3, 3, 2), np.float32)), x], [y],
             options={"padding": "SAME", "stride_h": 2, "stride_w": 2})
    b.mark_output(y)
    _expect_error(b.build(), "TRANSPOSE_CONV", "does not match output shape")
    del tg

    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 3, 3, 3, 2])
    y = b.add_tensor("y", np.float32, [1, 3, 3, 3, 2])
    b.add_op("CONV_3D", [x, b.add_const("w", np.ones((1, 1, 1, 3, 2), np.float32))], [y],
             options={"padding": "SAME", "stride_d": 1, "stride_h": 1, "stride_w": 1})
    b.mark_output(y)
    _expect_error(b.build(), "CONV_3D", "filter input channels 3 differ")


def test_registry_rows():
    from lite_numba.kernels.registry import BUILTINS

    rows = {(op, lo, hi) for op, lo, hi, _ in BUILTINS}
    assert {("CONV_2D", 1, 8), ("DEPTHWISE_CONV_2D", 1, 7), ("TRANSPOSE_CONV", 1, 5), ("CONV_3D", 1, 1)} <= rows
