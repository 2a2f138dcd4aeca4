"""ModelBuilder output must load and run in the official LiteRT runtime."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tflite
from flatbuffers import flexbuffers

from lite_numba.builder import (
    ModelBuilder,
    builtin_options_table,
    options_fields,
)
from lite_numba.testing import (
    assert_close,
    official_interpreter,
    run_official,
)


def _model(data: bytes) -> tflite.Model:
    return tflite.Model.GetRootAs(data, 0)


# ---------------------------------------------------------------------------
# Basic float ops
# ---------------------------------------------------------------------------


def test_add_relu():
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 4, 6, 3])
    w = b.add_const("w", np.linspace(-1, 1, 72, dtype=np.float32).reshape(1, 4, 6, 3))
    y = b.add_tensor("y", np.float32, [1, 4, 6, 3])
    b.add_op("ADD", [x, w], [y], options={"fused_activation_function": "RELU"})
    b.mark_output(y)
    data = b.build()
    assert tflite.Model.ModelBufferHasIdentifier(data, 0)
    m = _model(data)
    assert m.Version() == 3
    assert m.Buffers(0).DataLength() == 0

    xv = np.random.default_rng(0).standard_normal((1, 4, 6, 3)).astype(np.float32)
    (out,) = run_official(data, [xv])
    wv = np.linspace(-1, 1, 72, dtype=np.float32).reshape(1, 4, 6, 3)
    assert_close(out, np.maximum(xv + wv, 0))


def _numpy_conv2d_same(x, w, bias, stride_h, stride_w):
    """NHWC input, OHWI filter, SAME padding (TFLite convention)."""
    n, ih, iw, _ = x.shape
    oc, kh, kw, _ = w.shape
    oh, ow = -(-ih // stride_h), -(-iw // stride_w)
    pad_h = max((oh - 1) * stride_h + kh - ih, 0)
    pad_w = max((ow - 1) * stride_w + kw - iw, 0)
    xp = np.pad(x, ((0, 0), (pad_h // 2, pad_h - pad_h // 2), (pad_w // 2, pad_w - pad_w // 2), (0, 0)))
    out = np.zeros((n, oh, ow, oc), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, i * stride_h:i * stride_h + kh, j * stride_w:j * stride_w + kw, :]
            out[:, i, j, :] = np.einsum("nhwc,ohwc->no", patch, w)
    return (out + bias).astype(np.float32)


def test_conv2d_same_strides():
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((1, 7, 9, 3)).astype(np.float32)
    wv = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    bv = rng.standard_normal(4).astype(np.float32)

    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 7, 9, 3])
    w = b.add_const("w", wv)
    bias = b.add_const("b", bv)
    y = b.add_tensor("y", np.float32, [1, 4, 3, 4])
    b.add_op("CONV_2D", [x, w, bias], [y],
             options={"padding": "SAME", "stride_h": 2, "stride_w": 3,
                      "fused_activation_function": "NONE"})
    b.mark_output(y)
    data = b.build()

    op = _model(data).Subgraphs(0).Operators(0)
    assert op.BuiltinOptionsType() == tflite.BuiltinOptions.Conv2DOptions
    (out,) = run_official(data, [xv])
    assert_close(out, _numpy_conv2d_same(xv, wv, bv, 2, 3), tol=1e-5)


def test_reshape_vector_option_and_dynamic_input():
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 6], shape_signature=[-1, 6])
    shape = b.add_const("shape", np.array([-1, 3], np.int32))
    y = b.add_tensor("y", np.float32, [2, 3], shape_signature=[-1, 3])
    b.add_op("RESHAPE", [x, shape], [y], options={"new_shape": [-1, 3]})
    b.mark_output(y)
    data = b.build()

    opts = tflite.ReshapeOptions()
    raw = _model(data).Subgraphs(0).Operators(0).BuiltinOptions()
    opts.Init(raw.Bytes, raw.Pos)
    assert list(opts.NewShapeAsNumpy()) == [-1, 3]

    interp = official_interpreter(data)
    assert list(interp.get_input_details()[0]["shape_signature"]) == [-1, 6]
    xv = np.arange(12, dtype=np.float32).reshape(2, 6)
    (out,) = run_official(data, [xv])  # resizes the input from [1, 6] to [2, 6]
    assert_close(out, xv.reshape(-1, 3))


def test_gelu_builtin_code_above_127():
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [5])
    y = b.add_tensor("y", np.float32, [5])
    b.add_op("GELU", [x], [y], options={"approximate": False})
    b.mark_output(y)
    data = b.build()
    code = _model(data).OperatorCodes(0)
    assert code.BuiltinCode() == tflite.BuiltinOperator.GELU
    assert code.DeprecatedBuiltinCode() == 127

    xv = np.array([-3, -1, 0, 0.5, 2], np.float32)
    (out,) = run_official(data, [xv])
    ref = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in xv.astype(np.float64)], np.float32)
    assert_close(out, ref, tol=1e-5)


# ---------------------------------------------------------------------------
# Quantization
# ---------------------------------------------------------------------------


def test_fully_connected_int8_per_tensor():
    rng = np.random.default_rng(2)
    sx, zx = 0.05, -3
    sw = 0.02
    so, zo = 0.1, 5
    xq = rng.integers(-128, 128, (2, 8), dtype=np.int8)
    wq = rng.integers(-127, 128, (3, 8), dtype=np.int8)
    bq = rng.integers(-500, 500, 3).astype(np.int32)

    b = ModelBuilder()
    x = b.add_input("x", np.int8, [2, 8], quant=(sx, zx))
    w = b.add_const("w", wq, quant=(sw, 0))
    bias = b.add_const("bias", bq, quant=(sx * sw, 0))
    y = b.add_tensor("y", np.int8, [2, 3], quant=(so, zo))
    b.add_op("FULLY_CONNECTED", [x, w, bias], [y],
             options={"fused_activation_function": "NONE", "keep_num_dims": False,
                      "weights_format": "DEFAULT"})
    b.mark_output(y)
    data = b.build()

    interp = official_interpreter(data)
    qp = interp.get_input_details()[0]["quantization_parameters"]
    np.testing.assert_allclose(qp["scales"], [sx], rtol=1e-7)
    assert list(qp["zero_points"]) == [zx]
    assert qp["quantized_dimension"] == 0
    assert interp.get_output_details()[0]["quantization"] == pytest.approx((so, zo))

    (out,) = run_official(data, [xq])
    acc = (xq.astype(np.int64) - zx) @ wq.astype(np.int64).T + bq
    ref = np.clip(np.round(acc * (sx * sw / so)) + zo, -128, 127).astype(np.int8)
    assert out.dtype == np.int8
    assert np.max(np.abs(out.astype(np.int32) - ref)) <= 1


def test_per_channel_quantized_const():
    scales = [0.1, 0.2, 0.5]
    wq = np.array([[1, -2, 3], [4, 5, -6]], np.int8)  # channels along axis 1

    b = ModelBuilder()
    w = b.add_const("w", wq, quant={"scales": scales, "zero_points": [0, 0, 0],
                                    "quantized_dimension": 1})
    y = b.add_tensor("y", np.float32, [2, 3])
    b.add_op("DEQUANTIZE", [w], [y])
    b.mark_output(y)
    data = b.build()

    interp = official_interpreter(data)
    det = {d["name"]: d for d in interp.get_tensor_details()}
    qp = det["w"]["quantization_parameters"]
    assert qp["quantized_dimension"] == 1
    np.testing.assert_allclose(qp["scales"], scales, rtol=1e-7)
    assert list(qp["zero_points"]) == [0, 0, 0]

    (out,) = run_official(data, [])
    assert_close(out, (wq * np.array(scales)).astype(np.float32))


def test_const_dtypes_roundtrip():
    arrays = {
        "f32": np.array([1.5, -2.0], np.float32),
        "f16": np.array([0.5, 3.0], np.float16),
        "f64": np.array([1e-300, 2.5], np.float64),
        "i8": np.array([-128, 127], np.int8),
        "u8": np.array([0, 255], np.uint8),
        "i16": np.array([-32768, 7], np.int16),
        "i32": np.array([1, -(2**31)], np.int32),
        "i64": np.array([2**62 + 1, -5], np.int64),
        "bool": np.array([True, False, True]),
        "c64": np.array([1 + 2j, -3j], np.complex64),
    }
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2])
    for name, arr in arrays.items():
        b.add_const(name, arr)
    y = b.add_tensor("y", np.float32, [2])
    b.add_op("ADD", [x, x], [y])
    b.mark_output(y)
    interp = official_interpreter(b.build())
    det = {d["name"]: d for d in interp.get_tensor_details()}
    for name, arr in arrays.items():
        assert det[name]["dtype"] == arr.dtype, name
        got = interp.get_tensor(det[name]["index"])
        np.testing.assert_array_equal(got, arr, err_msg=name)


# ---------------------------------------------------------------------------
# Custom ops, control flow, signatures
# ---------------------------------------------------------------------------


def test_custom_op_flexbuffer_options():
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [3])
    y = b.add_tensor("y", np.float32, [3])
    b.add_custom_op("Atan", [x], [y], options={"T": 0, "name": "atan"})
    b.mark_output(y)
    data = b.build()

    m = _model(data)
    code = m.OperatorCodes(0)
    assert code.CustomCode() == b"Atan"
    assert code.BuiltinCode() == tflite.BuiltinOperator.CUSTOM
    op = m.Subgraphs(0).Operators(0)
    assert op.CustomOptionsFormat() == tflite.CustomOptionsFormat.FLEXBUFFERS
    assert flexbuffers.Loads(op.CustomOptionsAsNumpy().tobytes()) == {"T": 0, "name": "atan"}

    with pytest.raises(RuntimeError, match="Encountered unresolved custom op"):
        official_interpreter(data)


def test_while_loop_two_subgraphs():
    b = ModelBuilder()
    i0 = b.add_input("i", np.int32, [])
    x0 = b.add_input("x", np.float32, [2])
    i_out = b.add_tensor("i_out", np.int32, [])
    x_out = b.add_tensor("x_out", np.float32, [2])

    cond = b.add_subgraph("cond")
    ci = cond.add_input("ci", np.int32, [])
    cond.add_input("cx", np.float32, [2])
    limit = cond.add_const("limit", np.array(5, np.int32))
    c_out = cond.add_tensor("keep_going", np.bool_, [])
    cond.add_op("LESS", [ci, limit], [c_out])
    cond.mark_output(c_out)

    body = b.add_subgraph("body")
    bi = body.add_input("bi", np.int32, [])
    bx = body.add_input("bx", np.float32, [2])
    one = body.add_const("one", np.array(1, np.int32))
    step = body.add_const("step", np.array([1.5, -0.5], np.float32))
    bi_next = body.add_tensor("bi_next", np.int32, [])
    bx_next = body.add_tensor("bx_next", np.float32, [2])
    body.add_op("ADD", [bi, one], [bi_next])
    body.add_op("ADD", [bx, step], [bx_next])
    body.mark_output(bi_next)
    body.mark_output(bx_next)

    assert (cond.index, body.index) == (1, 2)
    b.add_op("WHILE", [i0, x0], [i_out, x_out],
             options={"cond_subgraph_index": cond.index, "body_subgraph_index": body.index})
    b.mark_output(i_out)
    b.mark_output(x_out)
    data = b.build()

    m = _model(data)
    assert m.SubgraphsLength() == 3
    assert m.OperatorCodesLength() == 3  # WHILE, LESS, ADD (deduplicated)

    i_res, x_res = run_official(data, [np.array(1, np.int32), np.array([0.0, 2.0], np.float32)])
    assert int(i_res) == 5
    assert_close(x_res, np.array([6.0, 0.0], np.float32))


def test_signatures():
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 2])
    y = b.add_tensor("y", np.float32, [2, 2])
    b.add_op("MUL", [x, x], [y], options={"fused_activation_function": 0})
    b.mark_output(y)
    b.add_signature("serving_default", inputs={"x_in": x}, outputs={"y_out": y}, subgraph=0)
    data = b.build()

    interp = official_interpreter(data)
    assert interp.get_signature_list() == {"serving_default": {"inputs": ["x_in"], "outputs": ["y_out"]}}
    runner = interp.get_signature_runner("serving_default")
    xv = np.array([[1, -2], [3, 0.5]], np.float32)
    assert_close(runner(x_in=xv)["y_out"], xv * xv)


# ---------------------------------------------------------------------------
# Builder-side checks (no runtime needed)
# ---------------------------------------------------------------------------


def test_unknown_option_field_raises():
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 4, 4, 1])
    w = b.add_const("w", np.ones((1, 1, 1, 1), np.float32))
    y = b.add_tensor("y", np.float32, [1, 4, 4, 1])
    with pytest.raises(ValueError, match=r"stride_x.*Conv2DOptions"):
        b.add_op("CONV_2D", [x, w, -1], [y], options={"stride_x": 1})
    with pytest.raises(ValueError, match="padding"):
        b.add_op("CONV_2D", [x, w, -1], [y], options={"padding": "SAMEISH"})
    with pytest.raises(ValueError, match="no options table"):
        b.add_op("RELU", [x], [y], options={"alpha": 1.0})


def test_options_table_mapping():
    assert builtin_options_table("CONV_2D") == "Conv2DOptions"
    assert builtin_options_table("MAX_POOL_2D") == "Pool2DOptions"
    assert builtin_options_table("L2_POOL_2D") == "Pool2DOptions"
    assert builtin_options_table("REDUCE_PROD") == "ReducerOptions"
    assert builtin_options_table("MINIMUM") == "MaximumMinimumOptions"
    assert builtin_options_table("UNIDIRECTIONAL_SEQUENCE_RNN") == "SequenceRNNOptions"
    assert builtin_options_table("GATHER_ND") == "GatherNdOptions"
    assert builtin_options_table("TOPK_V2") == "TopKV2Options"
    assert builtin_options_table("STABLEHLO_COMPOSITE") == "StableHLOCompositeOptions"
    assert builtin_options_table("RELU") is None
    # every options table of both unions is reachable from some operator
    tables = {builtin_options_table(n) for n in dir(tflite.BuiltinOperator) if n.isupper()}
    for union in (tflite.BuiltinOptions, tflite.BuiltinOptions2):
        for name in dir(union):
            if name.endswith("Options"):
                assert name in tables, name
                assert options_fields(name) is not None
    assert "dilation_w_factor" in options_fields("Conv2DOptions")
    assert set(options_fields("VarHandleOptions")) == {"container", "shared_name"}


def test_default_options_table_and_opcode_dedup():
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2])
    y = b.add_tensor("y", np.float32, [2])
    z = b.add_tensor("z", np.float32, [2])
    u = b.add_tensor("u", np.float32, [2])
    b.add_op("ADD", [x, x], [y])
    b.add_op("ADD", [y, x], [z])
    b.add_op("ADD", [z, x], [u], version=2)
    b.mark_output(u)
    m = _model(b.build())
    assert m.OperatorCodesLength() == 2
    assert [m.OperatorCodes(i).Version() for i in range(2)] == [1, 2]
    op = m.Subgraphs(0).Operators(0)
    assert op.BuiltinOptionsType() == tflite.BuiltinOptions.AddOptions
    assert op.BuiltinOptions() is not None
    xv = np.array([1.0, -2.0], np.float32)
    (out,) = run_official(b.build(), [xv])
    assert_close(out, 4 * xv)


def test_string_and_options2_fields_serialize():
    b = ModelBuilder()
    h = b.add_tensor("h", np.int32, [])  # resource dtype is not needed to check serialization
    b.add_op("VAR_HANDLE", [], [h], options={"container": "c", "shared_name": "var0"})
    x = b.add_input("x", np.float32, [4])
    y = b.add_tensor("y", np.float32, [4])
    b.add_op("STABLEHLO_TRANSPOSE", [x], [y], options={"permutation": [0]})
    m = _model(b.build())
    op0 = m.Subgraphs(0).Operators(0)
    vh = tflite.VarHandleOptions()
    raw = op0.BuiltinOptions()
    vh.Init(raw.Bytes, raw.Pos)
    assert (vh.Container(), vh.SharedName()) == (b"c", b"var0")
    op1 = m.Subgraphs(0).Operators(1)
    assert op1.BuiltinOptions2Type() == tflite.BuiltinOptions2.StablehloTransposeOptions
    assert op1.BuiltinOptionsType() == 0


def test_enum_vector_and_int64_vector_options():
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 2])
    y = b.add_tensor("y", np.float32, [2, 2])
    b.add_op("STABLEHLO_DOT_GENERAL", [x, x], [y],
             options={"lhs_contracting_dimensions": [1], "rhs_contracting_dimensions": [0],
                      "precision_config": ["HIGHEST", "DEFAULT"]})
    m = _model(b.build())
    raw = m.Subgraphs(0).Operators(0).BuiltinOptions2()
    opts = tflite.StablehloDotGeneralOptions()
    opts.Init(raw.Bytes, raw.Pos)
    assert list(opts.LhsContractingDimensionsAsNumpy()) == [1]
    assert list(opts.PrecisionConfigAsNumpy()) == [tflite.StablehloPrecisionConfig.HIGHEST,
                                                   tflite.StablehloPrecisionConfig.DEFAULT]


def test_require_official_skip_or_fail(monkeypatch):
    import sys

    from lite_numba.testing import require_official

    monkeypatch.setitem(sys.modules, "ai_edge_litert", None)  # makes the import fail
    monkeypatch.setitem(sys.modules, "ai_edge_litert.interpreter", None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="ai_edge_litert"):
        require_official()
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="ai_edge_litert"):
        require_official()
