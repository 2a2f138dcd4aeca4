"""Regression tests for what the fuzzing campaign (scripts/fuzz_campaign.py) found, each rebuilt with ModelBuilder
and checked against the official runtime where it runs the model."""

from __future__ import annotations

import numpy as np
import pytest
from sequence_models import int_lstm_model, lstm_weights, quantize_weights, uni_lstm_model

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close, invoke_both, official_interpreter, run_both_steps, run_official, run_ours


def test_hard_swish_of_the_largest_floats_does_not_overflow(official):
    """Campaign seed 7, data mode 'extremes': x * relu6(x + 3) / 6 overflowed to inf for |x| > 5.7e37 where the
    official kernel returns x."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [6])
    y = b.add_tensor("y", np.float32, [6])
    b.add_op("HARD_SWISH", [x], [y])
    b.mark_output(y)
    data = b.build()
    big = np.finfo(np.float32).max
    xs = np.array([big, -big, 1e38, 6e37, 2.5, -1.0], np.float32)
    ours, theirs = run_ours(data, [xs])[0], run_official(data, [xs])[0]
    assert np.isfinite(ours[:4]).all()
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


def test_hard_swish_past_flt_max_over_6_follows_the_official_vector_loop_everywhere(official):
    """Campaign seed 402 case 24592 (15 elements, data 'extremes'): for |x| > FLT_MAX/6 the official kernel returns
    x from its vector loop but inf from its scalar tail (the last n mod 4 elements), so its answer depends on the
    position. Ours is x at every position: equal to the official wherever its vector loop runs."""
    big = np.finfo(np.float32).max
    for n in (15, 16):
        b = ModelBuilder()
        x = b.add_input("x", np.float32, [n])
        y = b.add_tensor("y", np.float32, [n])
        b.add_op("HARD_SWISH", [x], [y])
        b.mark_output(y)
        data = b.build()
        xs = np.full(n, big, np.float32)
        xs[::3] = 1e38
        ours, theirs = run_ours(data, [xs])[0], run_official(data, [xs])[0]
        np.testing.assert_allclose(ours, xs, rtol=1e-6)
        vector = n - n % 4
        np.testing.assert_allclose(ours[:vector], theirs[:vector], rtol=1e-6)
        assert np.isinf(theirs[vector:]).all(), theirs  # the official scalar tail (fails if it ever agrees)


def _gather_missing_indices() -> bytes:
    b = ModelBuilder()
    p = b.add_input("params", np.int8, [4, 3], quant=(0.1, 0))
    y = b.add_tensor("y", np.int8, [2, 3], quant=(0.1, 0))
    b.add_op("GATHER", [p, -1], [y], options={"axis": 0})
    b.mark_output(y)
    return b.build()


def _resize_missing_size() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 2, 2, 1])
    y = b.add_tensor("y", np.float32, [1, 4, 4, 1])
    b.add_op("RESIZE_NEAREST_NEIGHBOR", [x, -1], [y], options={"align_corners": True})
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("build", [_gather_missing_indices, _resize_missing_size])
def test_required_input_absent_is_named(build, official):
    """Campaign seed 1 (operator inputs -> [0, -1]): the prepare met None and the error was a bare
    "AttributeError: 'NoneType' object has no attribute 'ndim'". The official runtime refuses these too."""
    data = build()
    with pytest.raises(ValueError, match=r"a required input is absent \(the operator's inputs are \[0(, -1)?\]"):
        Interpreter(model_content=data).allocate_tensors()
    with pytest.raises((RuntimeError, ValueError)):
        official_interpreter(data)


def test_input_no_one_produces_is_refused_as_the_official_runtime_does(official):
    """Campaign seed 2 (subgraph 0 inputs -> []): the official runtime refuses 'Input tensor 0 lacks data'; we ran
    the model on zeros."""
    b = ModelBuilder()
    x = b.add_tensor("x", np.float32, [2, 3])  # not a graph input any more
    w = b.add_const("w", np.ones((4, 3), np.float32))
    y = b.add_tensor("y", np.float32, [2, 4])
    b.add_op("FULLY_CONNECTED", [x, w, -1], [y])
    b.mark_output(y)
    data = b.build()
    with pytest.raises(ValueError, match=r"Input tensor 0 \('x'\) lacks data"):
        Interpreter(model_content=data).allocate_tensors()
    it = official_interpreter(data)
    with pytest.raises(RuntimeError, match="Input tensor 0 lacks data"):
        it.invoke()


def test_variable_tensor_with_a_buffer_is_refused():
    """Campaign seed 2 (is_variable on a constant): the official runtime refuses such a model at load."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [3])
    c = b.add_const("c", np.ones(3, np.float32))
    y = b.add_tensor("y", np.float32, [3])
    b.add_op("ADD", [x, c], [y])
    b.mark_output(y)
    b.main.tensors[c].is_variable = True
    with pytest.raises(ValueError, match=r"tensor 1 \('c'\) is a variable tensor with a buffer"):
        Interpreter(model_content=b.build())


def test_node_reading_its_own_output_is_refused():
    """Campaign seed 2 (COS inputs -> [its output]): the official runtime reads whatever the memory holds; we read
    zeros. A tensor read before any operator produced it is refused."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [4])
    y = b.add_tensor("y", np.float32, [4])
    b.add_op("COS", [y], [y])
    z = b.add_tensor("z", np.float32, [4])
    b.add_op("ADD", [x, y], [z])
    b.mark_output(z)
    with pytest.raises(ValueError, match=r"Input tensor 1 \('y'\) lacks data: it is produced only by this or a "
                                         r"later operator\nNode number 0 \(COS\)"):
        Interpreter(model_content=b.build()).allocate_tensors()


def test_infinite_option_is_named():
    """Campaign seed 2 (int16 SOFTMAX beta=-inf): the refusal was a bare 'cannot convert float infinity to
    integer'; it now names the option."""
    b = ModelBuilder()
    x = b.add_input("x", np.int16, [2, 6], quant=(0.001, 0))
    y = b.add_tensor("y", np.int16, [2, 6], quant=(1.0 / 32768, 0))
    b.add_op("SOFTMAX", [x], [y], options={"beta": float("-inf")})
    b.mark_output(y)
    with pytest.raises(ValueError, match=r"SOFTMAX: option beta=-inf is not finite"):
        Interpreter(model_content=b.build()).allocate_tensors()


def _int16_softmax(shift: int) -> bytes:
    """int16 SOFTMAX whose beta x input scale / (10/65535) is 0.75 * 2^shift (the kernel's multiplier shift)."""
    b = ModelBuilder()
    x = b.add_input("x", np.int16, [2, 6], quant=(0.001, 0))
    y = b.add_tensor("y", np.int16, [2, 6], quant=(1.0 / 32768, 0))
    b.add_op("SOFTMAX", [x], [y], options={"beta": 0.75 * 2.0 ** shift * (10 / 65535) / 0.001})
    b.mark_output(y)
    return b.build()


def test_int16_softmax_with_a_shift_past_31_bits_is_refused(official):
    """Campaign seed 3 (int16 SOFTMAX beta=1e30): the official kernel shifts the int32 difference left by the
    multiplier's shift in C, which is undefined from 32 bits on (the CPU takes the count mod 32, so beta 2^32 times
    larger gives the same output); we answered differently. Up to 31 bits the two agree (wrapping included); past it
    we refuse, naming the shift."""
    x = np.random.default_rng(0).integers(-3000, 3000, (2, 6)).astype(np.int16)
    for shift in (10, 30, 31):
        data = _int16_softmax(shift)
        assert run_ours(data, [x])[0].tobytes() == run_official(data, [x])[0].tobytes()
    for shift in (32, 40, 100):
        data = _int16_softmax(shift)
        run_official(data, [x])  # it runs (on garbage), we refuse
        with pytest.raises(ValueError, match=rf"SOFTMAX.*left shift of {shift} > 31 bits"):
            Interpreter(model_content=data).allocate_tensors()


def test_scales_whose_ratio_overflows_are_named():
    b = ModelBuilder()
    x = b.add_input("x", np.int8, [4], quant=(1e38, 0))
    y = b.add_tensor("y", np.int8, [4], quant=(1e-38, 0))
    b.add_op("RELU", [x], [y])
    b.mark_output(y)
    with pytest.raises(ValueError, match=r"RELU: .*scales"):
        Interpreter(model_content=b.build()).allocate_tensors()


def test_float_shape_tensor_is_named_not_a_bare_conversion_error():
    """Campaign seed 3 (RESHAPE inputs -> [0, 0]: the float input as its own shape): a bare 'cannot convert float
    infinity to integer' at invoke before; then the op and its inputs were named; now (seed 201 case 6893) a float
    shape tensor is refused at allocate, naming it and its type."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2])
    y = b.add_tensor("y", np.float32, [2], shape_signature=[-1])
    b.add_op("RESHAPE", [x, x], [y])
    b.mark_output(y)
    with pytest.raises(ValueError, match=r"RESHAPE.*the shape input 'x' has type float32"):
        Interpreter(model_content=b.build()).allocate_tensors()


def _sequence_rnn(time: int) -> bytes:
    """UNIDIRECTIONAL_SEQUENCE_RNN, batch-major x [2, time, 3], its hidden state a variable tensor [2, 4]."""
    rng = np.random.default_rng(17)
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, time, 3])
    h = b.add_tensor("h", np.float32, [2, 4], is_variable=True)
    ins = [x, b.add_const("w", (rng.standard_normal((4, 3)) * 0.5).astype(np.float32)),
           b.add_const("r", (rng.standard_normal((4, 4)) * 0.5).astype(np.float32)),
           b.add_const("b", (rng.standard_normal(4) * 0.3).astype(np.float32)), h]
    y = b.add_tensor("y", np.float32, [2, time, 4])
    b.add_op("UNIDIRECTIONAL_SEQUENCE_RNN", ins, [y], options={"fused_activation_function": "TANH",
                                                                "time_major": False})
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("new_time", [5, 3])
def test_allocate_after_a_resize_resets_the_variable_tensors(new_time, official):
    """Campaign run 2 case 2083 (tfkeras_lstm_int8_stacked, data mode 'resize'): after invoke, resize_tensor_input
    and allocate_tensors, the official runtime restarts the LSTM state from its zero point (Subgraph::AllocateTensors
    resets the variable tensors when it re-allocates) and we carried the previous invoke's state. A resize to the
    same shape re-allocates nothing there, and the state carries on (new_time=3)."""
    data = _sequence_rnn(3)
    rng = np.random.default_rng(2083)
    x0 = rng.standard_normal((2, 3, 3)).astype(np.float32)
    x1 = rng.standard_normal((2, new_time, 3)).astype(np.float32)
    ours = Interpreter(model_content=data)
    ours.allocate_tensors()
    ref = official_interpreter(data)
    outs = []
    for it in (ours, ref):
        i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
        it.set_tensor(i, x0)
        it.invoke()
        it.resize_tensor_input(i, [2, new_time, 3])
        it.allocate_tensors()
        it.set_tensor(i, x1)
        it.invoke()
        outs.append(np.array(it.get_tensor(o), copy=True))
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-6)
    fresh = run_official(_sequence_rnn(new_time), [x1])[0]
    assert np.allclose(outs[1], fresh, rtol=1e-5, atol=1e-6) == (new_time != 3)  # reset iff re-allocated


def _lstm_nan_bias(hybrid: bool, proj: bool) -> bytes:
    """UNIDIRECTIONAL_SEQUENCE_LSTM x [1, 3, 3], 4 cells, cell_clip 3 (and with a projection to 3 outputs,
    proj_clip 0.5), a NaN in the forget gate bias (and in the projection bias); float or hybrid (int8 weights)."""
    rng = np.random.default_rng(1249)
    n_in, n_cell, n_out = 3, 4, 3 if proj else 4
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 3, n_in])

    def weights(name, shape):
        w = (rng.standard_normal(shape) * 0.5).astype(np.float32)
        if not hybrid:
            return b.add_const(name, w)
        scale = float(np.abs(w).max()) / 127
        return b.add_const(name, np.round(w / scale).astype(np.int8), quant=(scale, 0))

    ins = [x] + [weights(f"wx{g}", (n_cell, n_in)) for g in "ifco"] + [weights(f"wh{g}", (n_cell, n_out))
                                                                       for g in "ifco"] + [-1, -1, -1]
    for g in "ifco":
        bias = (rng.standard_normal(n_cell) * 0.3).astype(np.float32)
        if g == "f":
            bias[1] = np.nan
        ins.append(b.add_const(f"b{g}", bias))
    if proj:
        pb = (rng.standard_normal(n_out) * 0.3).astype(np.float32)
        pb[0] = np.nan
        ins += [weights("wp", (n_out, n_cell)), b.add_const("pb", pb)]
    else:
        ins += [-1, -1]
    ins += [b.add_tensor("h", np.float32, [1, n_out], is_variable=True),
            b.add_tensor("c", np.float32, [1, n_cell], is_variable=True), -1, -1, -1, -1]
    y = b.add_tensor("y", np.float32, [1, 3, n_out])
    b.add_op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y], version=3 if hybrid else 1,
             options={"fused_activation_function": "TANH", "cell_clip": 3.0, "proj_clip": 0.5 if proj else 0.0,
                      "time_major": False, "asymmetric_quantize_inputs": hybrid})
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("hybrid", [False, True], ids=["float", "hybrid"])
@pytest.mark.parametrize("proj", [False, True], ids=["cell_clip", "proj_clip"])
def test_lstm_clip_turns_nan_into_the_clip_value(hybrid, proj, official):
    """Campaign run 3 case 1249 (tfkeras_lstm_dynamic_range, a NaN written into the forget gate bias, cell_clip 10):
    the official CwiseClipping computes max(min(clip, v), -clip) with std::min/std::max, which turn a NaN into
    +clip, so its cell state stayed finite (10.0) and so did every output; ours kept the NaN, which then spread
    through the recurrent weights over the invokes. Two invokes: the state carries the clipped value."""
    data = _lstm_nan_bias(hybrid, proj)
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((1, 3, 3)).astype(np.float32) for _ in range(2)]
    outs = []
    for it in (Interpreter(model_content=data), official_interpreter(data)):
        it.allocate_tensors()
        seq = []
        for x in xs:
            it.set_tensor(it.get_input_details()[0]["index"], x)
            it.invoke()
            seq.append(np.array(it.get_tensor(it.get_output_details()[0]["index"]), copy=True))
        outs.append(seq)
    for ours, theirs in zip(*outs):
        assert np.isfinite(theirs).all()  # what the case is about: the official clip removed the NaN
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)


def test_float16_resource_handle_is_named(official):
    """Campaign seed 5 (a resource-variable model whose VAR_HANDLE output became float16): the refusal was Numba's
    bare 'NotImplementedError: float16'; it now names the op and the type. The official runtime refuses it too."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [3])
    h = b.add_tensor("h", np.float16, [])
    b.add_op("VAR_HANDLE", [], [h], options={"container": "", "shared_name": "v"})
    b.add_op("ASSIGN_VARIABLE", [h, x], [])
    y = b.add_tensor("y", np.float32, [3])
    b.add_op("READ_VARIABLE", [h], [y])
    b.mark_output(y)
    data = b.build()
    with pytest.raises(ValueError, match=r"VAR_HANDLE.*RESOURCE \(or integer\) tensor, got float16"):
        it = Interpreter(model_content=data)
        it.allocate_tensors()
        it.invoke()
    with pytest.raises(Exception):  # noqa: B017 - any refusal; the point is that it does not run
        it = official_interpreter(data)
        it.set_tensor(it.get_input_details()[0]["index"], np.ones(3, np.float32))
        it.invoke()


def _range_runtime(dtype) -> bytes:
    b = ModelBuilder()
    ins = [b.add_input(n, dtype, []) for n in ("start", "limit", "delta")]
    y = b.add_tensor("y", dtype, [4], shape_signature=[-1])
    b.add_op("RANGE", ins, [y])
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_range_whose_size_overflows_is_refused(dtype, official):
    """Campaign seed 6 (RANGE on run-time int32 inputs): start 1392145108, limit -1423905635, delta -1229247790.
    The official size (|limit - start| + |delta| - 1) / |delta| is computed in int32, overflows and gives 2 elements
    where the range has 3; we gave 3. Such a range is now refused, naming the values; near the edge both agree."""
    info = np.iinfo(dtype)
    data = _range_runtime(dtype)
    step = 1 << (info.bits - 12)  # ~2,000-4,000 elements; |limit - start| + |delta| - 1 = max - 11: no overflow
    ok = [dtype(info.max - 10), dtype(info.max - 10 - (info.max - step - 10)), dtype(-step)]
    ours, theirs = run_ours(data, ok)[0], run_official(data, ok)[0]
    assert ours.dtype == theirs.dtype and ours.tolist() == theirs.tolist()
    bad = [dtype(info.max // 2 + 10), dtype(-(info.max // 2) - 10), dtype(-(info.max // 2) - 20)]
    with pytest.raises(ValueError, match=rf"RANGE.*overflows {np.dtype(dtype).name}"):
        run_ours(data, bad)


def test_hybrid_weight_of_minus_128_is_refused(official):
    """Campaign seed 6 (a byte mutation left -128 in a hybrid LSTM's recurrent weights): the official x86 int8
    matrix-vector product computes -128 times a negative input with the wrong sign, so the two runtimes disagreed.
    TFLite's spec keeps int8 weights in [-127, 127]: -127 agrees with the official runtime, -128 is refused."""
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (8, 32)).astype(np.int8)
    xs = rng.standard_normal((2, 32)).astype(np.float32)
    for val in (-127, -128):
        w[3, 5] = val
        b = ModelBuilder()
        x = b.add_input("x", np.float32, [2, 32])
        wt = b.add_const("w", w, quant=(0.01, 0))
        y = b.add_tensor("y", np.float32, [2, 8])
        b.add_op("FULLY_CONNECTED", [x, wt, -1], [y], options={"asymmetric_quantize_inputs": False})
        b.mark_output(y)
        data = b.build()
        if val == -127:
            assert run_ours(data, [xs])[0].tobytes() == run_official(data, [xs])[0].tobytes()
        else:
            with pytest.raises(ValueError, match=r"weights 'w' holds -128: hybrid .* \[-127, 127\]"):
                run_ours(data, [xs])


def _mul_int8(out_scale: float) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.int8, [8], quant=(0.027, 1))
    y = b.add_input("y", np.int8, [8], quant=(0.029, -2))
    z = b.add_tensor("z", np.int8, [8], quant=(out_scale, 0))
    b.add_op("MUL", [x, y], [z])
    b.mark_output(z)
    return b.build()


def test_int8_mul_with_a_shift_past_31_bits_is_refused(official):
    """Campaign seed 6 (int8 MUL whose output scale became 1e-38): the multiplier's left shift of 116 bits is
    undefined in the official kernels (8 of 72 outputs differed); refused, naming the scales. A tiny but sane output
    scale still agrees."""
    rng = np.random.default_rng(1)
    xs = [rng.integers(-128, 128, 8).astype(np.int8) for _ in range(2)]
    data = _mul_int8(1e-6)  # shift 10: in range
    assert run_ours(data, xs)[0].tobytes() == run_official(data, xs)[0].tobytes()
    with pytest.raises(ValueError, match=r"MUL .*left shift of \d+ > 31 bits"):
        run_ours(_mul_int8(1e-38), xs)


def test_zero_scale_division_is_named():
    """Campaign seed 6 (an integer LSTM's effective_hidden_scale_intermediate scale set to 0): the refusal was a
    bare 'float division by zero'; a prepare that divides by zero now names the zero scales."""
    b = _fuzz_builder("models", "tfkeras_lstm_int8.tflite")
    sg = b.subgraphs[0]
    t = next(t for t in sg.tensors if t.name == "effective_hidden_scale_intermediate")
    t.quant = dict(t.quant, scales=[0.0])
    with pytest.raises(ValueError, match=r"UNIDIRECTIONAL_SEQUENCE_LSTM: a quantization scale of 0 "
                                         r"\('effective_hidden_scale_intermediate'\)"):
        Interpreter(model_content=b.build()).allocate_tensors()


def _fuzz_builder(*path):
    """The campaign's ModelBuilder copy of a model in tests/data (scripts/fuzz_campaign.to_builder)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from fuzz_campaign import to_builder

    return to_builder(Path(__file__).parent.joinpath("data", *path).read_bytes())


def test_host_op_missing_input_is_named():
    """Campaign seed 6 (a Flex TensorListPushBack left with one input): a host op reading an absent input raised a
    bare 'tuple index out of range' at invoke; ctx.input_array now names the input and the operator's inputs."""
    b = _fuzz_builder("flex", "tensor_list_ops.tflite")
    ops = b.subgraphs[0].operators
    push = next(o for o in ops if "TensorListPushBack" in str(o))
    push.inputs = push.inputs[:1]
    it = Interpreter(model_content=b.build())
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], np.ones(d["shape"], d["dtype"]))
    with pytest.raises(ValueError, match=r"FlexTensorListPushBack .*input 1 is absent"):
        it.invoke()


def test_int8_batch_matmul_per_channel_activation_is_refused(official):
    """Campaign seed 7 (int8 BATCH_MATMUL whose lhs got 2 per-channel scales): the official kernel reads one scale
    per tensor, which a per-channel tensor does not have (0), and returned the output zero point everywhere; we used
    the first scale. Refused now, naming the tensor; per-tensor agrees."""
    rng = np.random.default_rng(2)
    xs = [rng.integers(-128, 128, (2, 3, 4)).astype(np.int8), rng.integers(-128, 128, (2, 4, 5)).astype(np.int8)]
    for scales in ([0.05], [0.05, 0.05]):
        b = ModelBuilder()
        a = b.add_input("in0", np.int8, [2, 3, 4], quant={"scales": scales, "zero_points": [0] * len(scales),
                                                          "quantized_dimension": 0})
        c = b.add_input("in1", np.int8, [2, 4, 5], quant=(0.028, 22))
        y = b.add_tensor("y", np.int8, [2, 3, 5], quant=(0.062, -6))
        b.add_op("BATCH_MATMUL", [a, c], [y])
        b.mark_output(y)
        data = b.build()
        if len(scales) == 1:
            assert run_ours(data, xs)[0].tobytes() == run_official(data, xs)[0].tobytes()
        else:
            with pytest.raises(ValueError, match=r"BATCH_MATMUL .*'in0' must be quantized per tensor"):
                run_ours(data, xs)


def test_int8_depthwise_per_channel_activation_is_refused(official):
    """Campaign seed 7 (an int8 DEPTHWISE_CONV_2D rewired to take its per-channel weights as its input): the official
    kernel reads one input scale, 0 for a per-channel tensor, and gave the output zero point everywhere; we used the
    first scale. Convolutions and FULLY_CONNECTED now refuse per-channel inputs and outputs; per-tensor agrees."""
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (1, 6, 6, 2)).astype(np.int8)
    w = rng.integers(-127, 128, (1, 3, 3, 6)).astype(np.int8)
    for scales in ([0.025], [0.025, 0.025]):
        b = ModelBuilder()
        xi = b.add_input("x", np.int8, [1, 6, 6, 2], quant={"scales": scales, "zero_points": [5] * len(scales),
                                                             "quantized_dimension": 3})
        wt = b.add_const("w", w, quant={"scales": [0.0025] * 6, "zero_points": [0] * 6, "quantized_dimension": 3})
        bias = b.add_const("b", np.zeros(6, np.int32), quant={"scales": [0.025 * 0.0025] * 6,
                                                              "zero_points": [0] * 6, "quantized_dimension": 0})
        y = b.add_tensor("y", np.int8, [1, 4, 4, 6], quant=(0.01, -128))
        b.add_op("DEPTHWISE_CONV_2D", [xi, wt, bias], [y], options={"padding": "VALID", "depth_multiplier": 3,
                                                                    "stride_w": 1, "stride_h": 1}, version=3)
        b.mark_output(y)
        data = b.build()
        if len(scales) == 1:
            assert run_ours(data, [x])[0].tobytes() == run_official(data, [x])[0].tobytes()
        else:
            with pytest.raises(ValueError, match=r"DEPTHWISE_CONV_2D .*input 'x' must be quantized per tensor"):
                run_ours(data, [x])


_SPECIALS = np.array([np.nan, np.inf, -np.inf, np.finfo(np.float32).max, -np.finfo(np.float32).max, 0.0, 1e30],
                     np.float32)


def _agree_with_nans(ours, ref, what: str, *args, **kw) -> None:
    """NaN in the same places, and the rest within assert_close(*args, **kw)."""
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(ref), err_msg=f"{what}: NaNs")
    assert_close(ours, ref, *args, what=what, **kw)


def _hybrid_model(kind: str) -> tuple[bytes, tuple[int, ...]]:
    """One hybrid op (float input, int8 weights in [-127, 127]) and its input shape."""
    rng = np.random.default_rng(2189)
    b = ModelBuilder()

    def int8(shape):
        return rng.integers(-127, 128, shape).astype(np.int8)

    if kind.startswith("conv"):  # per-tensor filter: symmetric input quantization; per-channel: asymmetric
        shape = (2, 4, 4, 5)
        scale = 0.01 if kind == "conv_per_tensor" else np.linspace(0.005, 0.02, 3)
        x = b.add_input("x", np.float32, list(shape))
        f = b.add_const("f", int8((3, 3, 3, 5)), quant={"scales": scale, "quantized_dimension": 0})
        y = b.add_tensor("y", np.float32, [2, 4, 4, 3])
        b.add_op("CONV_2D", [x, f, b.add_const("bias", np.full(3, 0.25, np.float32))], [y],
                 options={"padding": "SAME", "stride_w": 1, "stride_h": 1})
    elif kind == "depthwise":  # always asymmetric
        shape = (1, 4, 4, 6)
        x = b.add_input("x", np.float32, list(shape))
        f = b.add_const("f", int8((1, 3, 3, 6)), quant={"scales": np.linspace(0.005, 0.02, 6),
                                                       "quantized_dimension": 3})
        y = b.add_tensor("y", np.float32, [1, 4, 4, 6])
        bias = b.add_const("bias", np.full(6, -0.5, np.float32))
        b.add_op("DEPTHWISE_CONV_2D", [x, f, bias], [y], version=6,
                 options={"padding": "SAME", "stride_w": 1, "stride_h": 1, "depth_multiplier": 1})
    elif kind.startswith("fc"):
        shape = (4, 19)  # rows of 19: the vector loop (16) and a tail (3)
        x = b.add_input("x", np.float32, list(shape))
        w = b.add_const("w", int8((6, 19)), quant=(0.01, 0))
        y = b.add_tensor("y", np.float32, [4, 6])
        asym = kind == "fc_asymmetric"
        b.add_op("FULLY_CONNECTED", [x, w, b.add_const("bias", np.linspace(-1, 1, 6).astype(np.float32))], [y],
                 options={"asymmetric_quantize_inputs": asym},
                 version=9 if asym else 1)
    else:  # batch_matmul, symmetric or asymmetric
        shape = (2, 3, 11)
        x = b.add_input("x", np.float32, list(shape))
        w = b.add_const("w", int8((11, 4)), quant=(0.02, 0))
        y = b.add_tensor("y", np.float32, [2, 3, 4])
        b.add_op("BATCH_MATMUL", [x, w], [y],
                 options={"asymmetric_quantize_inputs": kind == "bmm_asymmetric"})
    b.mark_output(y)
    return b.build(), shape


@pytest.mark.parametrize("kind", [
    "conv_per_tensor", "conv_per_channel", "fc_symmetric", "fc_asymmetric", "bmm_symmetric", "bmm_asymmetric",
    "depthwise"])
def test_hybrid_input_with_nan_and_inf_quantizes_as_the_official_runtime(kind, official):
    """Campaign run 5 case 2189 (small_cnn_dynamic_range, a hybrid per-channel CONV_2D fed NaN and FLT_MAX): the
    official dynamic quantization takes its range from std::minmax_element / NeonMinMax, where a NaN is skipped or
    picked by its position, and converts NaN and out-of-range values to INT32_MIN (so -127 or -128, or 0 in the
    asymmetric tail); many rows come out finite there, and we gave NaN (or other values) everywhere. Random rows
    mixing NaN, +-inf, +-FLT_MAX and 1e30 into normal values, several invokes per model. The hybrid DEPTHWISE_CONV_2D
    gets NaN from an infinite input scale times a zero accumulator; its vector rescale (blocks of 4 channels) clamps
    with _mm_max_ps under NEON_2_SSE, which turns that NaN into the activation minimum, its scalar tail keeps it."""
    data, shape = _hybrid_model(kind)
    rng = np.random.default_rng(5)
    ours = Interpreter(model_content=data)
    ours.allocate_tensors()
    ref = official_interpreter(data)
    finite_rows = 0
    for trial in range(12):
        x = (rng.standard_normal(shape) * 2).astype(np.float32)
        mask = rng.random(shape) < (0.02, 0.1, 0.4)[trial % 3]
        x[mask] = rng.choice(_SPECIALS, int(mask.sum()))
        (a,), (b,) = invoke_both(ours, ref, [x])
        _agree_with_nans(a, b, f"{kind} trial {trial}", family="sequence")
        finite_rows += int(np.isfinite(b).all(axis=-1).sum())
    assert finite_rows > 0  # the official answer is not all NaN: what the case is about


@pytest.mark.parametrize("act", ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"])
def test_hybrid_depthwise_clamps_nan_by_channel_block_as_the_official_runtime(act, official):
    """The official hybrid DEPTHWISE_CONV_2D rescales and clamps blocks of 4 channels with vmaxq_f32 / vminq_f32
    (_mm_max_ps / _mm_min_ps in the x86 build), which give the activation minimum for a NaN; the remaining channels
    use std::max / std::min, which keep it. A NaN bias, and a +inf input (an infinite input scale: zero
    accumulators give NaN), on 3, 6 and 9 channels (no block, one block and a tail, two blocks and a tail)."""
    rng = np.random.default_rng(41)
    for c in (3, 6, 9):
        for case in ("nan_bias", "inf_input"):
            x = rng.standard_normal((1, 3, 3, c)).astype(np.float32)
            bias = np.linspace(-1, 1, c).astype(np.float32)
            if case == "nan_bias":
                bias[::2] = np.nan
            else:
                x[0, 1, 1, 0] = np.inf
            b = ModelBuilder()
            xi = b.add_input("x", np.float32, [1, 3, 3, c])
            f = b.add_const("f", rng.integers(-127, 128, (1, 3, 3, c)).astype(np.int8),
                            quant={"scales": np.linspace(0.01, 0.02, c), "quantized_dimension": 3})
            y = b.add_tensor("y", np.float32, [1, 3, 3, c])
            b.add_op("DEPTHWISE_CONV_2D", [xi, f, b.add_const("bias", bias)], [y], version=6,
                     options={"padding": "SAME", "stride_w": 1, "stride_h": 1, "depth_multiplier": 1,
                              "fused_activation_function": act})
            b.mark_output(y)
            data = b.build()
            ours, theirs = run_ours(data, [x])[0], run_official(data, [x])[0]
            np.testing.assert_array_equal(ours, theirs, err_msg=f"{c} channels, {case}")


def test_hybrid_fully_connected_counts_nan_blocks_as_zero_input_as_the_official_runtime(official):
    """The official hybrid FULLY_CONNECTED returns the bias when its all-zero input test passes; that test reads
    blocks of four with |v| > 0, false for NaN, and the tail with v != 0: [NaN, 0, 0, 0] gives the bias,
    [NaN, 0, 0] does not."""
    for rows, k in ((1, 4), (1, 3), (2, 3), (4, 1)):
        b = ModelBuilder()
        x = b.add_input("x", np.float32, [rows, k])
        w = b.add_const("w", np.full((2, k), 3, np.int8), quant=(0.5, 0))
        y = b.add_tensor("y", np.float32, [rows, 2])
        b.add_op("FULLY_CONNECTED", [x, w, b.add_const("bias", np.array([0.5, -2.0], np.float32))], [y])
        b.mark_output(y)
        data = b.build()
        xs = np.zeros((rows, k), np.float32)
        xs[0, 0] = np.nan
        ours, theirs = run_ours(data, [xs])[0], run_official(data, [xs])[0]
        np.testing.assert_array_equal(ours, theirs, err_msg=f"x {xs.tolist()}")


def _hybrid_fc_activation(act: str, asymmetric: bool) -> bytes:
    rng = np.random.default_rng(17)
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [5, 7])
    w = b.add_const("w", rng.integers(-127, 128, (4, 7)).astype(np.int8), quant=(0.05, 0))
    bias = np.array([np.nan, -2.0, 0.5, 8.0], np.float32)  # a NaN bias makes NaN before the activation in every row
    y = b.add_tensor("y", np.float32, [5, 4])
    b.add_op("FULLY_CONNECTED", [x, w, b.add_const("bias", bias)], [y], version=9 if asymmetric else 1,
             options={"fused_activation_function": act, "asymmetric_quantize_inputs": asymmetric})
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("asymmetric", [False, True], ids=["symmetric", "asymmetric"])
@pytest.mark.parametrize("act", ["RELU", "RELU6", "RELU_N1_TO_1", "TANH", "NONE"])
def test_hybrid_fully_connected_activation_of_nan_as_the_official_runtime(act, asymmetric, official):
    """The official hybrid FULLY_CONNECTED applies its fused activation with ApplyActivationToVector, whose clamps are
    std::max(0.0f, v) / std::min: a NaN comes out 0 for RELU and RELU6 and -1 for RELU_N1_TO_1 (we kept NaN). Rows of
    NaN, rows mixing NaN and +-inf into normal values (NaN or inf scaling factors), an all-zero input (the bias path)
    and a NaN bias. The float FULLY_CONNECTED and CONV_2D (hybrid too) clamp with ActivationFunctionWithMinMax, which
    keeps NaN, as ours does."""
    data = _hybrid_fc_activation(act, asymmetric)
    rng = np.random.default_rng(3)
    xs = [np.full((5, 7), np.nan, np.float32), np.zeros((5, 7), np.float32)]
    for frac in (0.1, 0.4):
        x = (rng.standard_normal((5, 7)) * 3).astype(np.float32)
        mask = rng.random(x.shape) < frac
        x[mask] = rng.choice(np.array([np.nan, np.inf, -np.inf], np.float32), int(mask.sum()))
        xs.append(x)
    ours = Interpreter(model_content=data)
    ours.allocate_tensors()
    ref = official_interpreter(data)
    for k, x in enumerate(xs):
        (a,), (b,) = invoke_both(ours, ref, [x])
        _agree_with_nans(a, b, f"{act} input {k}", family="sequence")


def _sequence_model(kind: str, hybrid: bool, act: str, n_in: int, asymmetric: bool = False) -> tuple[bytes, tuple]:
    """RNN [2, n_in], UNIDIRECTIONAL_SEQUENCE_RNN / _LSTM time major [3, 2, n_in] ('_tm') or batch major [2, 3, n_in]
    ('_bm'), or SVDF [2, n_in] (rank 2, memory 3); float, or hybrid (int8 weights). Returns (model, input shape)."""
    rng = np.random.default_rng(17)
    version = (3 if asymmetric else 2) if hybrid else 1
    if kind.startswith("lstm"):
        shape = (3, 2, n_in) if kind.endswith("_tm") else (2, 3, n_in)
        w = lstm_weights(rng, n_in, 5, 5)
        quants = None
        if hybrid:
            w, quants = quantize_weights(w)
        return uni_lstm_model(shape, w, 5, 5, time_major=kind.endswith("_tm"), act=act, quants=quants,
                              asymmetric=asymmetric, version=version), shape
    b = ModelBuilder()

    def weights(name, shape_):
        w = (rng.standard_normal(shape_) * 0.5).astype(np.float32)
        if not hybrid:
            return b.add_const(name, w)
        scale = float(np.abs(w).max()) / 127
        return b.add_const(name, np.round(w / scale).astype(np.int8), quant=(scale, 0))

    opts = {"fused_activation_function": act}
    if hybrid:
        opts["asymmetric_quantize_inputs"] = asymmetric
    if kind == "svdf":
        shape = (2, n_in)
        x = b.add_input("x", np.float32, list(shape))
        state = b.add_tensor("state", np.float32, [2, 4 * 3], is_variable=True)
        y = b.add_tensor("y", np.float32, [2, 2])
        b.add_op("SVDF", [x, weights("wf", (4, n_in)), weights("wt", (4, 3)),
                          b.add_const("b", np.array([0.2, -0.3], np.float32)), state], [y],
                 options=dict(opts, rank=2), version=(4 if asymmetric else 2) if hybrid else 1)
    else:
        time_major = kind.endswith("_tm")
        shape = (2, n_in) if kind == "rnn" else ((3, 2, n_in) if time_major else (2, 3, n_in))
        x = b.add_input("x", np.float32, list(shape))
        h = b.add_tensor("h", np.float32, [2, 3], is_variable=True)
        y = b.add_tensor("y", np.float32, [2, 3] if kind == "rnn" else list(shape[:2]) + [3])
        if kind != "rnn":
            opts["time_major"] = time_major
        b.add_op("RNN" if kind == "rnn" else "UNIDIRECTIONAL_SEQUENCE_RNN",
                 [x, weights("w", (3, n_in)), weights("r", (3, 3)), b.add_const("b", np.array([0.2, -0.3, 0.1],
                                                                                              np.float32)), h],
                 [y], options=opts, version=version)
    b.mark_output(y)
    return b.build(), shape


def _nan_sequence_inputs(shape: tuple) -> list[np.ndarray]:
    """Invokes in turn: a NaN at the start of every row of zeros (officially an all-zero row when the row has four or
    more elements), normal values, one NaN in zeros, a 20% NaN mix, zeros, normal values, all NaN, normal values."""
    rng = np.random.default_rng(5)
    n = shape[-1]
    steps = []
    x = np.zeros(shape, np.float32)
    x.reshape(-1, n)[:, 0] = np.nan
    steps.append(x)
    steps.append(rng.standard_normal(shape).astype(np.float32))
    x = np.zeros(shape, np.float32)
    x.reshape(-1)[0] = np.nan
    steps.append(x)
    x = rng.standard_normal(shape).astype(np.float32)
    x[rng.random(shape) < 0.2] = np.nan
    steps.append(x)
    steps += [np.zeros(shape, np.float32), rng.standard_normal(shape).astype(np.float32),
              np.full(shape, np.nan, np.float32), rng.standard_normal(shape).astype(np.float32)]
    return steps


@pytest.mark.parametrize("kind,hybrid,act,n_in,asymmetric", [
    ("rnn", True, "TANH", 4, False), ("rnn", True, "RELU_N1_TO_1", 6, True), ("useq_rnn_tm", True, "RELU", 4, False),
    ("useq_rnn_bm", True, "TANH", 8, True), ("lstm_bm", True, "TANH", 4, False), ("lstm_tm", True, "RELU", 6, True),
    ("svdf", True, "NONE", 4, False), ("svdf", True, "RELU6", 5, True), ("lstm_bm", False, "TANH", 4, False),
    ("lstm_tm", False, "RELU_N1_TO_1", 6, False), ("rnn", False, "RELU6", 4, False),
    ("useq_rnn_bm", False, "RELU", 3, False), ("svdf", False, "RELU_N1_TO_1", 4, False)])
def test_sequence_ops_with_nan_inputs_as_the_official_runtime(kind, hybrid, act, n_in, asymmetric, official):
    """The official LSTM (float and hybrid), hybrid RNN and hybrid SVDF skip a product when tensor_utils::IsZeroVector
    passes on the step's input (or aux input, or state); the x86 build's NeonIsZeroVector counts a NaN in a block of
    four as zero, so [NaN, 0, 0, 0] skips it (we quantized the NaN, or multiplied by it). And the RNN, SVDF and LSTM
    cell activations are ApplyActivationToVector's std::max / std::min clamps: NaN gives 0 for RELU and RELU6 and -1
    for RELU_N1_TO_1 (we kept NaN), float and hybrid. The state carries over eight invokes. The asymmetric hybrid
    cases agreed before the fix (kept as guards)."""
    data, shape = _sequence_model(kind, hybrid, act, n_in, asymmetric)
    for k, step in enumerate(run_both_steps(data, [[x] for x in _nan_sequence_inputs(shape)])):
        for ours, ref in step:
            _agree_with_nans(ours, ref, f"invoke {k}", 1e-4)


@pytest.mark.parametrize("n_cell", [5, 4])
@pytest.mark.parametrize("time_major", [False, True], ids=["batch_major", "time_major"])
def test_hybrid_lstm_projection_skips_a_nan_block_as_the_official_runtime(n_cell, time_major, official):
    """The hybrid LSTM projects o * act(c) unless IsZeroVector passes on it; a NaN cell bias with the others zero and
    a zero input gives [NaN, 0, 0, 0(, 0)], which officially counts as zero (the output is the projection bias) and
    which we projected (NaN)."""
    rng = np.random.default_rng(1)
    w = lstm_weights(rng, 4, n_cell, 3, proj=True, proj_bias=True)
    w["cell_gate_bias"] = np.zeros(n_cell, np.float32)
    w["cell_gate_bias"][0] = np.nan
    w, quants = quantize_weights(w)
    shape = (3, 1, 4) if time_major else (1, 3, 4)
    data = uni_lstm_model(shape, w, 3, n_cell, time_major=time_major, quants=quants, version=2)
    (ours, ref), = run_both_steps(data, [[np.zeros(shape, np.float32)]])[0]
    assert np.isfinite(ref.reshape(-1, 3)[0]).all()
    _agree_with_nans(ours, ref, "projection", 1e-4)


def _zeros_like_rewritten_at_run_time(two_outputs: bool) -> bytes:
    """z = ZEROS_LIKE(x) (planned at allocate), then rewritten by a MUL that reads a RANGE (its output sized at run
    time): as that MUL's only output, or as the second output it cannot have."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 4])
    n = b.add_input("n", np.int32, [])
    z = b.add_tensor("z", np.float32, [1, 4])
    b.add_op("ZEROS_LIKE", [x], [z])
    r = b.add_tensor("r", np.int32, [4])
    b.add_op("RANGE", [b.add_const("start", np.array(0, np.int32)), n, b.add_const("delta", np.array(1, np.int32))],
             [r])
    q = b.add_tensor("q", np.float32, [4])
    b.add_op("CAST", [r], [q])
    y = b.add_tensor("y", np.float32, [1, 4])
    if two_outputs:
        b.add_op("MUL", [x, q], [y, z])
    else:
        b.add_op("MUL", [x, q], [z])
        b.add_op("ADD", [x, q], [y])
    o = b.add_tensor("o", np.float32, [1, 4])
    b.add_op("ADD", [y, z], [o])
    b.mark_output(o)
    return b.build()


def test_tensor_written_at_allocate_and_at_run_time(official):
    """Campaign run 101 case 409 (op_shape_fill_range_dynamic, operator outputs rewired): a ZEROS_LIKE output also
    written by a node whose shapes are known only at run time had an arena slot and no run-time array, and building
    the compiled segment failed with a bare 'KeyError: 13'. Its static writer now runs at invoke too, in graph order:
    with one output the MUL rewrites z and both runtimes run the model alike (several invokes: general, then
    specialised plans); with two outputs both refuse the MUL, naming it."""
    data = _zeros_like_rewritten_at_run_time(False)
    ours = Interpreter(model_content=data)
    ours.allocate_tensors()
    ref = official_interpreter(data)
    rng = np.random.default_rng(4)
    for k in range(4):
        x = rng.standard_normal((1, 4)).astype(np.float32)
        outs = []
        for it in (ours, ref):
            d = it.get_input_details()
            it.set_tensor(d[0]["index"], x)
            it.set_tensor(d[1]["index"], np.array(4, np.int32))
            it.invoke()
            outs.append(np.array(it.get_tensor(it.get_output_details()[0]["index"])))
        np.testing.assert_array_equal(outs[0], outs[1], err_msg=f"invoke {k}")
        q = np.arange(4, dtype=np.float32)
        np.testing.assert_allclose(outs[0], (x + q) + x * q, rtol=1e-6, err_msg=f"invoke {k}")  # y + z, z = x * q
    data = _zeros_like_rewritten_at_run_time(True)
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    d = it.get_input_details()
    it.set_tensor(d[0]["index"], np.ones((1, 4), np.float32))
    it.set_tensor(d[1]["index"], np.array(4, np.int32))
    with pytest.raises(ValueError, match=r"MUL \(version 1, node 3\): expected 1 outputs, got 2\nNode number 3 "):
        it.invoke()
    ref = official_interpreter(data)  # prepares the MUL at invoke, after the RANGE
    d = ref.get_input_details()
    ref.set_tensor(d[0]["index"], np.ones((1, 4), np.float32))
    ref.set_tensor(d[1]["index"], np.array(4, np.int32))
    with pytest.raises(RuntimeError, match=r"NumOutputs\(node\) != 1 \(2 != 1\)Node number 3 \(MUL\)"):
        ref.invoke()


def _conv3d_model(act: str, nonfinite: str, bias: bool) -> bytes:
    rng = np.random.default_rng(180)
    w = (rng.standard_normal((3, 3, 3, 2, 3)) * 0.2).astype(np.float32)
    if nonfinite in ("nan_weight", "inf_weight"):
        w[0, 0, 1, 1, 2] = np.nan if nonfinite == "nan_weight" else np.inf  # a corner tap: in the padding at borders
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 4, 5, 5, 2])
    ins = [x, b.add_const("w", w)]
    if bias:
        ins.append(b.add_const("bias", np.array([0.5, -0.25, 1.0], np.float32)))
    y = b.add_tensor("y", np.float32, [1, 4, 5, 5, 3])
    b.add_op("CONV_3D", ins, [y], options={"padding": "SAME", "stride_d": 1, "stride_h": 1, "stride_w": 1,
                                           "fused_activation_function": act})
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("nonfinite", ["nan_weight", "inf_weight", "nan_input"])
@pytest.mark.parametrize("act", ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"])
def test_conv3d_nan_as_the_official_runtime(act, nonfinite, official):
    """Campaign run 101 case 180 (op_conv3d, a weight mutated to NaN): the official CONV_3D (im2col, then a GEMM
    whose clamp is the SIMD min(v, hi), max(., lo)) gave FLT_MAX in every output of that channel, we gave NaN inside
    and finite values where the NaN tap fell in the padding. A padded tap multiplies im2col's zero (0 * NaN, 0 * inf:
    NaN) and a NaN comes out of the clamp as its upper bound."""
    rng = np.random.default_rng(7)
    for bias in (True, False):
        data = _conv3d_model(act, nonfinite, bias)
        ours = Interpreter(model_content=data)
        ours.allocate_tensors()
        ref = official_interpreter(data)
        for trial in range(2):
            x = (rng.standard_normal((1, 4, 5, 5, 2)) * 2).astype(np.float32)
            if nonfinite == "nan_input":
                x[rng.random(x.shape) < 0.05] = np.nan
            (a,), (b,) = invoke_both(ours, ref, [x])
            _agree_with_nans(a, b, f"{act} {nonfinite} bias={bias} trial {trial}", 1e-5)
            hi = {"RELU6": 6.0, "RELU_N1_TO_1": 1.0}.get(act, np.finfo(np.float32).max)
            assert not np.isnan(b).any() and (b == hi).any()  # what the case is about: NaN became the upper bound


def _depthwise_model(shape, dm: int, k: int, stride: int, act: str, weight=None) -> bytes:
    rng = np.random.default_rng(500)
    co = shape[3] * dm
    w = rng.standard_normal((1, k, k, co)).astype(np.float32)
    if weight is not None:
        w[0, 0, 0, 1] = weight  # a corner tap: in the padding along the top row and the left column
    b = ModelBuilder()
    x = b.add_input("x", np.float32, list(shape))
    y = b.add_tensor("y", np.float32, [1])
    b.add_op("DEPTHWISE_CONV_2D", [x, b.add_const("w", w), b.add_const("bias", rng.standard_normal(co).astype(
        np.float32))], [y], options={"padding": "SAME", "stride_h": stride, "stride_w": stride,
                                     "depth_multiplier": dm, "fused_activation_function": act})
    b.mark_output(y)
    return b.build()


# (input shape, depth multiplier, kernel, stride, threads): the campaign's 6 channels; 807 channels, which the
# official kernel accumulates 5 pixels at a time (4832 // 807: 4035 values, 3 clamped one by one, then 2 pixels);
# 3 channels with stride 2; 7 channels (1 x 7) on 2 threads; 8 channels (no scalar tail)
_DW_NAN_CASES = [((1, 5, 5, 2), 3, 3, 1, 1), ((1, 4, 7, 269), 3, 3, 1, 1), ((1, 9, 9, 3), 1, 3, 2, 1),
                 ((2, 9, 10, 1), 7, 3, 1, 2), ((1, 6, 6, 8), 1, 3, 1, 1)]


@pytest.mark.parametrize("act", ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"])
def test_depthwise_nan_as_the_official_runtime(act, isa_level, official):
    """Campaign run 101 cases 500 and 2014 (op_depthwise_conv2d_dm3, NaN inputs): 6.0 officially where we gave NaN.
    The official float kernel clamps each chunk of accumulated output pixels of a row with NEON vector blocks of 16
    and 4 values (vminq/vmaxq through NEON_2_SSE keep a NaN) and the chunk's last (values % 4) one by one with
    std::max(lo, std::min(hi, v)), which gives hi for NaN: ours now does the same (dw_nan_tail_f32) on every ISA
    path. Also: a NaN or infinite weight on a tap in the padding, which the official kernel skips (our padded
    kernels added 0 * w = NaN)."""
    rng = np.random.default_rng(2014)
    for shape, dm, k, stride, threads in _DW_NAN_CASES:
        for weight in (None, np.nan, np.inf):
            data = _depthwise_model(shape, dm, k, stride, act, weight)
            ours = Interpreter(model_content=data, num_threads=threads)
            ours.allocate_tensors()
            ref = official_interpreter(data, num_threads=threads)
            x = (rng.standard_normal(shape) * 3).astype(np.float32)
            if weight is None:
                x[rng.random(shape) < 0.15] = np.nan
            (a,), (b,) = invoke_both(ours, ref, [x])
            _agree_with_nans(a, b, f"{shape} dm={dm} weight={weight}", 1e-5)


def _shrink_slice(strides, runtime_begin=False) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 4, 6, 3])
    begin = b.add_input("begin", np.int32, [4]) if runtime_begin else b.add_const("begin", np.zeros(4, np.int32))
    end = b.add_const("end", np.array([1, 1, 1, 1], np.int32))
    y = b.add_tensor("y", np.float32, [])
    b.add_op("STRIDED_SLICE", [x, begin, end, b.add_const("strides", np.array(strides, np.int32))], [y],
             options={"shrink_axis_mask": 15})
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("runtime_begin", [False, True])
def test_strided_slice_shrink_axis_with_a_negative_stride_is_refused(official, runtime_begin):
    """Campaign seed 201 case 3352: random strides on shrinking axes. A positive stride takes the element at begin
    in both runtimes; a negative one leaves the official output unwritten (it returned 0.0, 1.35e-43 and
    -9.9e-27 for the same inputs in three interpreters), and TensorFlow refuses it: so do we, naming the axis."""
    x = np.arange(72, dtype=np.float32).reshape(1, 4, 6, 3) + 100
    inputs = [x, np.array([0, 2, 3, 1], np.int32)] if runtime_begin else [x]
    data = _shrink_slice([1, 993199546, 5, 1357446269], runtime_begin)
    ours, theirs = run_ours(data, inputs)[0], run_official(data, inputs)[0]
    assert ours == theirs == (x[0, 2, 3, 1] if runtime_begin else x[0, 0, 0, 0])
    with pytest.raises(ValueError, match="shrink axis 1 has stride -993199546: a shrinking axis needs a positive"):
        Interpreter(model_content=_shrink_slice([1, -993199546, 5, 1], runtime_begin)).allocate_tensors()


def test_reshape_with_a_float_shape_tensor_is_refused_naming_it(official):
    """Campaign seed 201 case 6893: a byte mutation made RESHAPE's shape tensor float32 (holding NaN); the refusal was
    a bare 'cannot convert float NaN to integer'. The official kernel reads the floats' bits as int32 and refuses
    the element count; we refuse the type, naming the tensor."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 8])
    shape = b.add_const("new_shape", np.array([2, np.nan, 4], np.float32))
    y = b.add_tensor("y", np.float32, [2, 1, 4])
    b.add_op("RESHAPE", [x, shape], [y])
    b.mark_output(y)
    data = b.build()
    with pytest.raises(RuntimeError):
        official_interpreter(data).allocate_tensors()
    with pytest.raises(ValueError, match="RESHAPE.*the shape input 'new_shape' has type float32; a shape must be"):
        Interpreter(model_content=data).allocate_tensors()


def test_a_tensor_rewritten_with_another_shape_after_a_node_read_it_is_refused(official):
    """Campaign seed 201 case 10606: a rewired IDENTITY wrote a [1, 9, 129] tensor into the [800, 1] graph input that
    an AudioSpectrogram had been prepared for, and Numba's typing error reached the user. Builtin version: RESHAPE
    writes [8] into the [4, 2] input ABS read. The official runtime lets the later writer change the graph input's
    shape (after allocate_tensors it declares [8]); we refuse, naming the tensor, both nodes and both shapes."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [4, 2])
    y = b.add_tensor("y", np.float32, [4, 2])
    b.add_op("ABS", [x], [y])
    b.add_op("RESHAPE", [y, b.add_const("shape", np.array([8], np.int32))], [x])
    b.mark_output(y)
    data = b.build()
    assert list(official_interpreter(data).get_input_details()[0]["shape"]) == [8]
    with pytest.raises(ValueError, match=r"Tensor 0 \('x'\) is read by node 0 \(ABS\) with shape \[4, 2\] and "
                                         r"written later by node 1 \(RESHAPE\) with shape \[8\]"):
        Interpreter(model_content=data).allocate_tensors()


def test_scales_whose_ratio_overflows_are_named_without_a_bare_python_error():
    """Campaign seed 201 case 17660: FULLY_CONNECTED int8 whose scales' ratio is infinite; the refusal named the
    scales but quoted Python's 'cannot convert float infinity to integer'."""
    b = ModelBuilder()
    x = b.add_input("x", np.int8, [1, 3], quant=(1e38, 0))
    w = b.add_const("w", np.ones((2, 3), np.int8), quant=(1e38, 0))
    y = b.add_tensor("y", np.int8, [1, 2], quant=(1e-38, 0))
    b.add_op("FULLY_CONNECTED", [x, w, -1], [y])
    b.mark_output(y)
    with pytest.raises(ValueError) as e:
        Interpreter(model_content=b.build()).allocate_tensors()
    assert "FULLY_CONNECTED: its quantization scales give a multiplier out of range (their ratio is infinite)" \
        in str(e.value)
    assert "cannot convert" not in str(e.value)


def _rsqrt_int8(out_scale: float) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.int8, [16], quant=(1.0, -128))
    y = b.add_tensor("y", np.int8, [16], quant=(out_scale, 0))
    b.add_op("RSQRT", [x], [y])
    b.mark_output(y)
    return b.build()


def test_int8_rsqrt_with_a_shift_past_31_bits_is_refused(official):
    """Campaign seed 201 case 17625 (int8 RSQRT whose output scale became 1e-38): the official kernel multiplies by
    2^(shift - 20) in C int32 arithmetic, undefined from 32 bits on (57 of 72 outputs differed); refused, naming the
    tensors. Up to a left shift of 31 bits (wrapping included) the two agree."""
    x = np.arange(-128, 128, 16, dtype=np.int8)
    for left in (0, 10, 31):  # input scale 1: 1 / output scale = (4/3) 2^(left + 19) has shift left + 20
        data = _rsqrt_int8(0.75 * 2.0 ** -(left + 19))
        assert run_ours(data, [x])[0].tobytes() == run_official(data, [x])[0].tobytes()
    for out_scale in (0.75 * 2.0 ** -51, 1e-38):
        with pytest.raises(ValueError, match=r"RSQRT.*'y' scale .*left shift of \d+ > 31 bits"):
            Interpreter(model_content=_rsqrt_int8(out_scale)).allocate_tensors()


def _log_softmax_q(dtype, in_scale: float, n: int) -> bytes:
    """int8 or uint8 LOG_SOFTMAX with the kernel's required output quantization (16/256, max)."""
    in_zp, out_zp = (4, 127) if dtype == np.int8 else (131, 255)
    b = ModelBuilder()
    x = b.add_input("x", dtype, [2, n], quant=(in_scale, in_zp))
    y = b.add_tensor("y", dtype, [2, n], quant=(16 / 256, out_zp))
    b.add_op("LOG_SOFTMAX", [x], [y])
    b.mark_output(y)
    return b.build()


def test_int8_log_softmax_with_a_scale_that_overflows_float_is_refused(official):
    """Campaign seed 201 case 15382 (int8 LOG_SOFTMAX whose input scale became 1e38): the official kernel's float32
    products overflow to inf, inf - inf is NaN, and its conversion to int32 is undefined in C (its vector block gave
    -128, its scalar tail 0); refused, naming the tensor. Large scales that stay finite agree."""
    rng = np.random.default_rng(0)
    for scale in (1e30, 8e34):
        for n in (10, 37):
            x = rng.integers(-128, 128, (2, n)).astype(np.int8)
            x[1] = -128
            x[1, -1] = 127
            data = _log_softmax_q(np.int8, scale, n)
            assert run_ours(data, [x])[0].tobytes() == run_official(data, [x])[0].tobytes()
    for scale in (1e37, 1e38):
        with pytest.raises(ValueError, match=r"LOG_SOFTMAX.*input 'x' scale .*overflows float32"):
            Interpreter(model_content=_log_softmax_q(np.int8, scale, 10)).allocate_tensors()


def _int16_binary(op: str, quantized: tuple[bool, bool, bool]) -> bytes:
    b = ModelBuilder()
    qx, qw, qy = ((s, 0) if q else None for s, q in zip((0.002, 0.002, 0.003), quantized))
    x = b.add_input("x", np.int16, [2, 8], quant=qx)
    w = b.add_input("w", np.int16, [2, 8], quant=qw)
    y = b.add_tensor("y", np.int16, [2, 8], quant=qy)
    b.add_op(op, [x, w], [y], options={"fused_activation_function": 3})
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("op", ["ADD", "MUL"])
def test_int16_arithmetic_with_one_operand_unquantized_is_refused(op, official):
    """Campaign seed 201 case 14006 (int16 ADD whose input x lost its quantization): we added the raw values, the
    official kernel took the quantized path with x's scale 0 (all zeros; with input 1 unquantized it aborts).
    One quantized operand makes the op quantized, and the operand lacking quantization is refused by name. Without
    any quantization int16 ADD and MUL are plain integer ops, as in the official runtime."""
    rng = np.random.default_rng(2)
    xs = [rng.integers(-9, 10, (2, 8)).astype(np.int16) for _ in range(2)]
    data = _int16_binary(op, (False, False, False))
    assert run_ours(data, xs)[0].tobytes() == run_official(data, xs)[0].tobytes()
    data = _int16_binary(op, (True, True, True))
    assert run_ours(data, xs)[0].tobytes() == run_official(data, xs)[0].tobytes()
    for quantized, name in (((False, True, True), "x"), ((True, False, True), "w"), ((False, False, True), "x")):
        with pytest.raises(ValueError, match=rf"{op} .*tensor '{name}' \(int16\) has no quantization parameters"):
            Interpreter(model_content=_int16_binary(op, quantized)).allocate_tensors()


def _prelu_int8(alpha_scale: float) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.int8, [1, 4, 6, 3], quant=(0.03, 0))
    a = b.add_const("alpha", np.arange(-36, 36, dtype=np.int8).reshape(4, 6, 3), quant=(alpha_scale, 0))
    y = b.add_tensor("y", np.int8, [1, 4, 6, 3], quant=(0.02, -68))
    b.add_op("PRELU", [x, a], [y])
    b.mark_output(y)
    return b.build()


def test_int8_prelu_with_a_shift_past_31_bits_is_refused(official):
    """Campaign seed 201 case 15723 (int8 PRELU whose alpha scale became 1e38): the alpha branch's multiplier
    needs a left shift of ~127 bits, undefined in the official kernel's int32 arithmetic (8 of 72 outputs
    differed); refused, naming the tensors. Up to a left shift of 31 bits (wrapping included) the two agree."""
    x = np.random.default_rng(0).integers(-128, 128, (1, 4, 6, 3)).astype(np.int8)
    for shift in (5, 30, 31):  # input scale x alpha scale / output scale = 0.75 * 2^shift
        data = _prelu_int8(0.75 * 2.0 ** shift * 0.02 / 0.03)
        assert run_ours(data, [x])[0].tobytes() == run_official(data, [x])[0].tobytes()
    for alpha_scale in (0.75 * 2.0 ** 32 * 0.02 / 0.03, 1e38):
        with pytest.raises(ValueError, match=r"PRELU .*alpha 'alpha' scale .*left shift of \d+ > 31 bits"):
            Interpreter(model_content=_prelu_int8(alpha_scale)).allocate_tensors()


def test_operator_code_with_a_zero_deprecated_code_is_read_by_its_builtin_code(official):
    """Campaign seed 201 case 14663 (float PRELU, a 32-bit word of the file rewritten): its OperatorCode holds
    builtin_code PRELU with deprecated_builtin_code 0. The official runtime takes the larger of the two; the tflite
    package's BuiltinCode() answers the deprecated field for codes below 127, so we ran ADD."""
    import tflite

    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 4, 6, 3])
    alpha = np.linspace(0.05, 0.5, 72, dtype=np.float32).reshape(4, 6, 3)
    a = b.add_const("alpha", alpha)
    y = b.add_tensor("y", np.float32, [1, 4, 6, 3])
    b.add_op("PRELU", [x, a], [y])
    b.mark_output(y)
    data = bytearray(b.build())
    tab = tflite.Model.GetRootAs(data, 0).OperatorCodes(0)._tab
    field = tab.Offset(4)  # deprecated_builtin_code (int8)
    assert field and data[tab.Pos + field] == tflite.BuiltinOperator.PRELU
    data[tab.Pos + field] = 0
    data = bytes(data)
    xs = np.random.default_rng(1).standard_normal((1, 4, 6, 3)).astype(np.float32)
    ours, ref = run_ours(data, [xs])[0], run_official(data, [xs])[0]
    assert ref.tobytes() == np.where(xs >= 0, xs, xs * alpha).tobytes()  # the official runtime ran PRELU
    assert ours.tobytes() == ref.tobytes()


def _linear_int8(op: str, out_scale: float) -> bytes:
    """int8 op (CONV_2D 3x3 SAME, DEPTHWISE_CONV_2D 3x3 SAME, FULLY_CONNECTED) with input and filter scales 1, so
    the output multiplier is 1 / out_scale."""
    rng = np.random.default_rng(3)
    b = ModelBuilder()
    if op == "FULLY_CONNECTED":
        x = b.add_input("x", np.int8, [2, 12], quant=(1.0, 3))
        w = b.add_const("w", rng.integers(-2, 3, (5, 12)).astype(np.int8), quant=(1.0, 0))
        y = b.add_tensor("y", np.int8, [2, 5], quant=(out_scale, -2))
        b.add_op(op, [x, w, b.add_const("b", np.arange(-2, 3, dtype=np.int32), quant=(1.0, 0))], [y])
    else:
        x = b.add_input("x", np.int8, [1, 5, 6, 4], quant=(1.0, 3))
        co = 6 if op == "CONV_2D" else 4
        shape = (1, 3, 3, 4) if op == "DEPTHWISE_CONV_2D" else (6, 3, 3, 4)
        w = b.add_const("w", rng.integers(-2, 3, shape).astype(np.int8), quant=(1.0, 0))
        y = b.add_tensor("y", np.int8, [1, 5, 6, co], quant=(out_scale, -2))
        opts = {"padding": "SAME", "stride_h": 1, "stride_w": 1}
        if op == "DEPTHWISE_CONV_2D":
            opts["depth_multiplier"] = 1
        bias = b.add_const("b", rng.integers(-9, 10, co).astype(np.int32), quant=(1.0, 0))
        b.add_op(op, [x, w, bias], [y], options=opts)
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"])
def test_int8_linear_op_whose_output_multiplier_needs_a_shift_past_31_bits_is_refused(op, official):
    """Campaign seed 301 case 545 (int8 CONV_2D whose output scale became 9.8e-45, a multiplier of ~2^132): the
    official kernel shifts its int32 accumulators left by that many bits, undefined in C++ (it returned -128 for
    every output, ours 127 for most); refused, naming the output tensor and the scales. Up to a left shift of 31
    bits (wrapping included) the two agree."""
    rng = np.random.default_rng(4)
    x = rng.integers(-6, 7, (2, 12) if op == "FULLY_CONNECTED" else (1, 5, 6, 4)).astype(np.int8)
    for shift in (0, 5, 30, 31):  # multiplier 0.75 * 2^shift
        data = _linear_int8(op, 1.0 / (0.75 * 2.0 ** shift))
        assert run_ours(data, [x])[0].tobytes() == run_official(data, [x])[0].tobytes(), shift
    for out_scale in (1.0 / (0.75 * 2.0 ** 32), 9.8e-45):
        with pytest.raises(ValueError, match=rf"{op} .*output 'y' \(scale .*left shift of \d+ > 31 bits"):
            Interpreter(model_content=_linear_int8(op, out_scale)).allocate_tensors()


def _requantizing_unary(op: str, xdt, odt, shift: int) -> bytes:
    """A unary op whose input scale over output scale is 0.75 * 2^shift (its fixed-point multiplier's shift)."""
    b = ModelBuilder()
    zin = 0 if np.dtype(xdt).itemsize > 1 else (130 if xdt == np.uint8 else 3)
    zout = 0 if np.dtype(odt).itemsize > 1 else (120 if odt == np.uint8 else -5)
    x = b.add_input("x", xdt, [4, 67], quant=(0.75 * 2.0 ** (shift - 20), zin))
    y = b.add_tensor("y", odt, [4, 67], quant=(2.0 ** -20, zout))
    b.add_op(op, [x], [y], options={"alpha": 0.5} if op == "LEAKY_RELU" else {})
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("op,xdt,odt", [
    ("QUANTIZE", np.int8, np.int8), ("QUANTIZE", np.uint8, np.int8), ("QUANTIZE", np.int8, np.int16),
    ("QUANTIZE", np.int16, np.int8), ("QUANTIZE", np.int16, np.int16), ("QUANTIZE", np.int32, np.int8),
    ("RELU", np.int8, np.int8), ("RELU", np.int16, np.int16), ("RELU6", np.uint8, np.uint8),
    ("RELU_N1_TO_1", np.int8, np.int8), ("LEAKY_RELU", np.int8, np.int8), ("LEAKY_RELU", np.int16, np.int16),
    ("ABS", np.int8, np.int8), ("ABS", np.int16, np.int16)])
def test_requantizing_unary_op_with_a_shift_past_31_bits_is_refused(op, xdt, odt, official):
    """A mutated input scale 2^32 times the output scale: QUANTIZE (requantization), the RELU family, LEAKY_RELU
    and ABS shift the int32 (x - zero point) left by the multiplier's shift in C, undefined from 32 bits on. Their
    vector blocks gave zeros, their scalar tails garbage (QUANTIZE int8 -> int8: 12 of 268 outputs differed, the
    other cases up to all of them); refused, naming the tensors and scales. Up to a left shift of 31 bits (wrapping
    included) and for negative shifts past -31 (a zero multiplier) the two agree. For LEAKY_RELU (alpha 0.5) the
    identity branch has the larger shift."""
    rng = np.random.default_rng(5)
    info = np.iinfo(xdt)
    x = rng.integers(max(info.min, -40000), min(info.max, 40000) + 1, (4, 67)).astype(xdt)
    for shift in (0, 30, 31, -32, -40):
        data = _requantizing_unary(op, xdt, odt, shift)
        assert run_ours(data, [x])[0].tobytes() == run_official(data, [x])[0].tobytes(), shift
    for shift in (32, 100):
        data = _requantizing_unary(op, xdt, odt, shift)
        run_official(data, [x])  # it runs (on garbage), we refuse
        with pytest.raises(ValueError, match=rf"{op} .*input 'x' (\(scale|scale) .*output 'y' .*left shift of "
                                             rf"{shift} > 31 bits"):
            Interpreter(model_content=data).allocate_tensors()


def _hard_swish(dtype, shift: int) -> bytes:
    """HARD_SWISH whose reluish multiplier (input scale / 128 over 3 / 32768) is 0.75 * 2^shift."""
    b = ModelBuilder()
    scale = 0.75 * 2.0 ** shift * 3.0 / 256.0
    x = b.add_input("x", dtype, [4, 67], quant=(scale, 3 if dtype == np.int8 else 130))
    y = b.add_tensor("y", dtype, [4, 67], quant=(scale, 1 if dtype == np.int8 else 128))
    b.add_op("HARD_SWISH", [x], [y])
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_hard_swish_with_a_reluish_shift_past_31_bits_is_refused(dtype, official):
    """A mutated input scale of ~4e7: the official HARD_SWISH multiplies its int16 reluish value by
    1 << (exponent - 1) in C int arithmetic before saturating, undefined from exponent 32 on (all 268 outputs
    differed); refused, naming the input and its scale. Up to exponent 31 the two agree."""
    rng = np.random.default_rng(6)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, int(info.max) + 1, (4, 67)).astype(dtype)
    for shift in (0, 20, 31, -32):
        data = _hard_swish(dtype, shift)
        assert run_ours(data, [x])[0].tobytes() == run_official(data, [x])[0].tobytes(), shift
    for shift in (32, 100):
        data = _hard_swish(dtype, shift)
        run_official(data, [x])
        with pytest.raises(ValueError, match=rf"HARD_SWISH .*input 'x' scale .*left shift of {shift} > 31 bits"):
            Interpreter(model_content=data).allocate_tensors()


def _mean_or_sum(op: str, dtype, shape, axes, ratio: float, zin: int) -> bytes:
    """MEAN / SUM over `axes` (keep_dims) with input scale over output scale `ratio`."""
    b = ModelBuilder()
    zout = 0 if dtype == np.int16 else -2
    x = b.add_input("x", dtype, list(shape), quant=(ratio * 2.0 ** -20, zin))
    y = b.add_tensor("y", dtype, [1 if i in axes else s for i, s in enumerate(shape)], quant=(2.0 ** -20, zout))
    b.add_op(op, [x, b.add_const("axes", np.array(axes, np.int32))], [y], options={"keep_dims": True})
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("dtype,shape,axes", [(np.int8, (3, 5, 19), [1]), (np.int16, (3, 5, 19), [1]),
                                              (np.int8, (1, 5, 7, 19), [1, 2])])
def test_quantized_mean_with_a_shift_past_31_bits_is_refused(dtype, shape, axes, official):
    """Mutated scales with an input scale far above the output's: the official MEAN shifts the int32 sum left by
    the multiplier's shift (s_in / s_out with floor(log2 n) folded into the multiplier; s_in / (n s_out) for the
    int8 Mean4D over H and W), undefined past 31 bits (all outputs differed); refused, naming the tensors and
    scales. Up to a left shift of 31 bits (wrapping included) and past -31 the two agree."""
    n = int(np.prod([shape[a] for a in axes]))
    fold = 5 if len(axes) == 2 else 2  # 0.75 * 2^k / 35 has shift k - 5; floor(log2 5) = 2
    rng = np.random.default_rng(7)
    x = rng.integers(-128 if dtype == np.int8 else -30000, 128 if dtype == np.int8 else 30000, shape).astype(dtype)
    for shift in (0, 30, 31, -32, -40):
        data = _mean_or_sum("MEAN", dtype, shape, axes, 0.75 * 2.0 ** (shift + fold), 0)
        assert run_ours(data, [x])[0].tobytes() == run_official(data, [x])[0].tobytes(), (shift, n)
    for shift in (32, 90):
        data = _mean_or_sum("MEAN", dtype, shape, axes, 0.75 * 2.0 ** (shift + fold), 0)
        run_official(data, [x])
        with pytest.raises(ValueError, match=rf"MEAN .*input 'x' scale .*output 'y' scale .*left shift of {shift} > "
                                             r"31 bits"):
            Interpreter(model_content=data).allocate_tensors()


def test_int8_mean4d_output_offset_outside_int32_is_refused_and_wraps_like_the_official_kernel(official):
    """The int8 Mean4D (MEAN over H and W, keep_dims) adds zp_out - int(zp_in * s_in / s_out) to each requantized
    sum in int32: near the int32 limits the addition wraps in the official kernel (zp_in 5, ratio 0.75 * 2^29: 9
    of 19 outputs were -128 for 127), and a quotient outside int32 makes its float-to-int conversion undefined
    (INT32_MIN on x86): refused, naming the zero point and scales."""
    shape, axes = (1, 5, 7, 19), [1, 2]
    rng = np.random.default_rng(8)
    x = rng.integers(-128, 128, shape).astype(np.int8)
    for zin in (5, -5, 3):
        data = _mean_or_sum("MEAN", np.int8, shape, axes, 0.75 * 2.0 ** 29, zin)
        assert run_ours(data, [x])[0].tobytes() == run_official(data, [x])[0].tobytes(), zin
    data = _mean_or_sum("MEAN", np.int8, shape, axes, 0.75 * 2.0 ** 30, 3)
    run_official(data, [x])
    with pytest.raises(ValueError, match=r"MEAN .*input 'x' zero point 3 x scale .*output 'y' scale .*outside int32"):
        Interpreter(model_content=data).allocate_tensors()


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_quantized_sum_whose_float_result_overflows_int32_matches_the_official_kernel(dtype, official):
    """Mutated scales with an input scale far above the output's: the official SUM computes in float and converts
    round(sum * s_in / s_out + bias) to int32 as x86 does (INT32_MIN outside int32), then adds the output zero
    point wrapping. We wrapped the rounded value instead (13 of 19 int8 outputs differed at a ratio of 2^30). The
    conversion now follows cvttss2si, as the hybrid kernels do."""
    rng = np.random.default_rng(9)
    for shape, axes in (((1, 5, 7, 19), [1, 2]), ((3, 5, 19), [1])):
        x = rng.integers(-128 if dtype == np.int8 else -30000, 128 if dtype == np.int8 else 30000,
                         shape).astype(dtype)
        for shift in (0, 20, 25, 30, 32, 100, -40):
            data = _mean_or_sum("SUM", dtype, shape, axes, 0.75 * 2.0 ** shift, 0 if dtype == np.int16 else 3)
            assert run_ours(data, [x])[0].tobytes() == run_official(data, [x])[0].tobytes(), (shape, shift)


def _svdf_int8(s_state: float, s_wt: float, s_out: float) -> bytes:
    rng = np.random.default_rng(10)
    b = ModelBuilder()
    x = b.add_input("x", np.int8, [2, 6], quant=(0.05, 3))
    state = b.add_tensor("state", np.int16, [2, 9], quant=(s_state, 0), is_variable=True)
    ins = [x, b.add_const("wf", rng.integers(-127, 128, (3, 6)).astype(np.int8), quant=(0.01, 0)),
           b.add_const("wt", rng.integers(-32767, 32768, (3, 3)).astype(np.int16), quant=(s_wt, 0)),
           b.add_const("b", rng.integers(-2000, 2000, 3).astype(np.int32), quant=(0.0005, 0)), state]
    y = b.add_tensor("y", np.int8, [2, 3], quant=(s_out, -128))
    b.add_op("SVDF", ins, [y], options={"rank": 1, "fused_activation_function": "RELU"}, version=3)
    b.mark_output(y)
    return b.build()


def test_int8_svdf_whose_output_multiplier_needs_a_shift_past_31_bits_is_refused(official):
    """A mutated output scale (~4e-11): the official integer SVDF shifts the int32 time-weighted sum left by the
    state x weights_time / output multiplier's shift in C, undefined past 31 bits (13 of 30 outputs differed over
    five invokes); refused, naming the tensors and scales. Up to 31 bits and past -31 the two agree, invoke after
    invoke (the state carried over)."""
    rng = np.random.default_rng(11)
    steps = [rng.integers(-128, 128, (2, 6)).astype(np.int8) for _ in range(5)]
    for shift in (0, 20, 31, -32, -40):  # 0.5 x 0.25 / s_out = 0.75 * 2^shift
        data = _svdf_int8(0.5, 0.25, 0.125 / (0.75 * 2.0 ** shift))
        ours, ref = Interpreter(model_content=data), official_interpreter(data)
        ours.allocate_tensors()
        for xs in steps:
            for it in (ours, ref):
                it.set_tensor(it.get_input_details()[0]["index"], xs)
                it.invoke()
            o, r = (it.get_tensor(it.get_output_details()[0]["index"]) for it in (ours, ref))
            assert o.tobytes() == r.tobytes(), shift
    for shift in (32, 100):
        data = _svdf_int8(0.5, 0.25, 0.125 / (0.75 * 2.0 ** shift))
        with pytest.raises(ValueError, match=rf"SVDF .*state 'state' scale .*weights_time 'wt' scale .*output 'y' "
                                             rf"scale .*left shift of {shift} > 31 bits"):
            Interpreter(model_content=data).allocate_tensors()


def _quantized_comparison(op: str, dtype, shift: int, zero_point: int) -> bytes:
    """`op` on two [4, 67] inputs whose rescaling multipliers (their scales) are 0.75 * 2^shift and 0.75 *
    2^(shift - 1)."""
    b = ModelBuilder()
    x = b.add_input("x", dtype, [4, 67], quant=(0.75 * 2.0 ** shift, zero_point))
    y = b.add_input("y", dtype, [4, 67], quant=(0.75 * 2.0 ** (shift - 1), zero_point))
    o = b.add_tensor("o", np.bool_, [4, 67])
    b.add_op(op, [x, y], [o])
    b.mark_output(o)
    return b.build()


@pytest.mark.parametrize("op,dtype,zero_point", [("LESS", np.uint8, 3), ("EQUAL", np.int8, -100),
                                                 ("GREATER_EQUAL", np.uint8, 200), ("NOT_EQUAL", np.int8, 0)])
def test_quantized_comparison_with_an_input_scale_past_2_to_the_16_is_refused_or_agrees(op, dtype, zero_point,
                                                                                        official):
    """Mutated input scales above 1: the official comparison rescales ((q - zp) << 8) with
    MultiplyByQuantizedMultiplierSmallerThanOneExp, so a positive shift k becomes gemmlowp's RoundingDivideByPOT
    with exponent -k (undefined in C++). Its vectorized loop then shifts by the sign while its scalar tail shifts by
    -k mod 32, so from k = 17 (uint8; later for smaller |q - zp|) to k = 35 and again from ~k = 50 an element's
    result depended on its position (we differed on up to 88 of 268 outputs): refused, naming the input, its scale
    and the shift. Where both loops agree for every input value (k <= 16, k = 40: s >> 24 is the sign) we agree too
    (before, k = 40 gave the wrong scalar formula: 21-43 outputs differed)."""
    rng = np.random.default_rng(8)
    info = np.iinfo(dtype)
    x, y = (rng.integers(info.min, int(info.max) + 1, (4, 67)).astype(dtype) for _ in range(2))
    y[:, ::3] = x[:, ::3]
    for shift in (0, 1, 9, 16, 40, 41):
        data = _quantized_comparison(op, dtype, shift, zero_point)
        assert run_ours(data, [x, y])[0].tobytes() == run_official(data, [x, y])[0].tobytes(), shift
    for shift in (18, 24, 32, 33, 50, 64):
        data = _quantized_comparison(op, dtype, shift, zero_point)
        run_official(data, [x, y])  # it runs, we refuse
        with pytest.raises(ValueError, match=rf"{op} .*quantized input '[xy]' \(scale .*, zero point {zero_point}\) .*"
                                             r"left shift of \d+ bits.*depends on the element's position"):
            Interpreter(model_content=data).allocate_tensors()


def _int16_int64_output_stage(op: str, shift: int) -> tuple[bytes, list[int]]:
    """An int16 `op` with an int64 bias (or int16 x int16 weights) whose output multiplier (input scale 0.5 x
    weights scale 1.5 over the output scale) is 0.75 * 2^shift; 268 outputs. Returns the model and the input
    shape."""
    rng = np.random.default_rng(9)
    b = ModelBuilder()
    per_channel = {"scales": np.full(67, 1.5), "zero_points": np.zeros(67, np.int64), "quantized_dimension": 0}
    bias = b.add_const("bias", np.zeros(67, np.int64), quant=(0.75, 0))
    shape = [4, 8] if op in ("FULLY_CONNECTED", "BATCH_MATMUL") else [1, 2, 2, 67 if op == "DEPTHWISE_CONV_2D" else 8]
    x = b.add_input("x", np.int16, shape, quant=(0.5, 0))
    y = b.add_tensor("y", np.int16, [4, 67] if len(shape) == 2 else [1, 2, 2, 67], quant=(2.0 ** -shift, 0))
    conv = {"padding": "VALID", "stride_w": 1, "stride_h": 1}
    if op == "FULLY_CONNECTED":
        b.add_op(op, [x, b.add_const("w", rng.integers(-1, 2, (67, 8)).astype(np.int16), quant=(1.5, 0)), bias], [y])
    elif op == "BATCH_MATMUL":
        b.add_op(op, [x, b.add_const("w", rng.integers(-1, 2, (8, 67)).astype(np.int16), quant=(1.5, 0))], [y])
    elif op == "CONV_2D":
        b.add_op(op, [x, b.add_const("f", rng.integers(-1, 2, (67, 1, 1, 8)).astype(np.int8), quant=(1.5, 0)), bias],
                 [y], options=conv)
    elif op == "DEPTHWISE_CONV_2D":
        f = b.add_const("f", rng.integers(-1, 2, (1, 1, 1, 67)).astype(np.int8),
                        quant={**per_channel, "quantized_dimension": 3})
        b.add_op(op, [x, f, bias], [y], options={**conv, "depth_multiplier": 1})
    else:
        f = b.add_const("f", rng.integers(-1, 2, (67, 1, 1, 8)).astype(np.int8), quant=per_channel)
        b.add_op(op, [b.add_const("output_shape", np.array([1, 2, 2, 67], np.int32)), f, x, bias], [y], options=conv,
                 version=3)
    b.mark_output(y)
    return b.build(), shape


@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "FULLY_CONNECTED", "BATCH_MATMUL"])
def test_int16_kernel_with_an_int64_output_stage_and_a_shift_past_14_bits_is_refused(op, official):
    """Mutated scales with a real output multiplier of 2^14 or more on the 16-bit kernels whose official output
    stage is the int64-accumulator MultiplyByQuantizedMultiplier (int16 x int8 convolutions with an int64 bias,
    int16 x int16 FULLY_CONNECTED and BATCH_MATMUL): it rounds with 1 << (14 - shift) and shifts right by
    15 - shift, negative counts (undefined in C++) from shift 15 on. The convolutions' outputs differed from shift
    16 on (53-107 of 268); FULLY_CONNECTED and BATCH_MATMUL happened to agree. Refused, naming the output and the
    scales; up to shift 14 the two agree."""
    rng = np.random.default_rng(10)
    for shift in (-3, 0, 10, 14):
        data, shape = _int16_int64_output_stage(op, shift)
        x = rng.integers(-3 if shift > 0 else -3000, 4 if shift > 0 else 3001, shape).astype(np.int16)
        assert run_ours(data, [x])[0].tobytes() == run_official(data, [x])[0].tobytes(), shift
    for shift in (15, 16, 31):
        data, shape = _int16_int64_output_stage(op, shift)
        run_official(data, [np.zeros(shape, np.int16)])  # it runs, we refuse
        with pytest.raises(ValueError, match=rf"{op} .*output 'y' \(scale .*left shift of {shift} > 14 bits"):
            Interpreter(model_content=data).allocate_tensors()


def _quantized_prod(dtype, shift: int, n: int) -> bytes:
    """REDUCE_PROD over the middle axis of [4, n, 67] whose product rescaling (input scale over output scale^(1/n))
    is 0.75 * 2^shift."""
    b = ModelBuilder()
    x = b.add_input("x", dtype, [4, n, 67], quant=(0.75 * 2.0 ** shift, 0))
    y = b.add_tensor("y", dtype, [4, 1, 67], quant=(1.0, 0))
    b.add_op("REDUCE_PROD", [x, b.add_const("axes", np.array([1], np.int32))], [y], options={"keep_dims": True})
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("dtype,n", [(np.int8, 2), (np.int16, 3)])
def test_quantized_prod_with_a_rescaling_shift_of_8_to_14_agrees_and_past_14_is_refused(dtype, n, official):
    """Quantized REDUCE_PROD rescales every step and the final product with the int64-accumulator
    MultiplyByQuantizedMultiplier. We refused shifts from 8 on (that function's debug-only check) though the
    official runtime computes shifts 8..14 like any other; they agree now, int32 wrapping included. From 15 on its
    rounding term is 1 << (14 - shift), a negative shift count (undefined in C++): refused, naming the scales."""
    info = np.iinfo(dtype)
    x = np.random.default_rng(11).integers(info.min, int(info.max) + 1, (4, n, 67)).astype(dtype)
    for shift in (0, 7, 8, 11, 14):
        data = _quantized_prod(dtype, shift, n)
        assert run_ours(data, [x])[0].tobytes() == run_official(data, [x])[0].tobytes(), shift
    for shift in (15, 20):
        data = _quantized_prod(dtype, shift, n)
        run_official(data, [x])
        with pytest.raises(ValueError, match=rf"REDUCE_PROD .*input 'x' scale .*output 'y' scale 1\^\(1/{n}\) .*left "
                                             rf"shift of {shift} > 14 bits"):
            Interpreter(model_content=data).allocate_tensors()


def test_integer_lstm_with_a_multiplier_shift_past_31_bits_is_refused(official):
    """A mutated input scale (2^26: input_to_gate weights scale x input scale over the 2^-12 gate scale needs a
    left shift of 32): the official integer LSTM shifts the int32 matmul sums left by it in C, undefined; 5-18 of
    18 outputs differed per invoke. A hidden-state scale of 2^-61 (2^-30 over it: a shift of 32) happened to agree
    (zeros in both). Both refused now, naming the scales, as are the peephole, layer-norm (shift + 12) and
    projection multipliers past 31 bits; up to a shift of 31 the two agree."""
    config = dict(batch=2, time=3, n_input=4, n_cell=6, n_output=3)
    for kw in (dict(in_scale=2.0 ** 20, proj=True), dict(in_scale=2.0 ** 25, proj=True), dict(hid_scale=2.0 ** -60)):
        rng = np.random.default_rng(5)
        data, shape = int_lstm_model(rng, **config, **kw)
        steps = [rng.integers(-128, 128, shape, dtype=np.int8) for _ in range(3)]
        for k, ((o, r),) in enumerate(run_both_steps(data, [[x] for x in steps])):
            np.testing.assert_array_equal(o, r, err_msg=f"{kw} invoke {k}")
    refused = [(dict(in_scale=2.0 ** 26, proj=True),
                r"input_to_\w+_weights scale x input 'x' scale 6\.7\d*e\+07 over the \w+ gate scale .*shift of 32"),
               (dict(hid_scale=2.0 ** -61),
                r"over the hidden state scale 4\.3\d*e-19 \(intermediate 4\) .*left shift of 32")]
    for kw, match in refused:
        data, shape = int_lstm_model(np.random.default_rng(5), **config, **kw)
        official_interpreter(data).invoke()  # it runs, we refuse
        with pytest.raises(ValueError, match=r"UNIDIRECTIONAL_SEQUENCE_LSTM .*" + match):
            Interpreter(model_content=data).allocate_tensors()


def test_uint8_log_softmax_with_a_scale_that_overflows_float_is_refused(official):
    """The uint8 twin of the int8 LOG_SOFTMAX refusal (campaign seed 201 case 15382): large input scales whose
    float32 products stay finite agree with the official runtime byte for byte; past FLT_MAX they are refused,
    naming the tensor."""
    rng = np.random.default_rng(1)
    for scale in (1e30, 8e34):
        for n in (10, 37):
            x = rng.integers(0, 256, (2, n)).astype(np.uint8)
            x[1] = 0
            x[1, -1] = 255
            data = _log_softmax_q(np.uint8, scale, n)
            assert run_ours(data, [x])[0].tobytes() == run_official(data, [x])[0].tobytes()
    for scale in (1e37, 1e38):
        with pytest.raises(ValueError, match=r"LOG_SOFTMAX.*input 'x' scale .*overflows float32"):
            Interpreter(model_content=_log_softmax_q(np.uint8, scale, 10)).allocate_tensors()


def _prelu_scales(x_scale: float, alpha_scale: float, out_scale: float) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.int8, [1, 4, 6, 3], quant=(x_scale, 0))
    a = b.add_const("alpha", np.arange(-36, 36, dtype=np.int8).reshape(4, 6, 3), quant=(alpha_scale, 0))
    y = b.add_tensor("y", np.int8, [1, 4, 6, 3], quant=(out_scale, -68))
    b.add_op("PRELU", [x, a], [y])
    b.mark_output(y)
    return b.build()


def test_int8_prelu_identity_branch_past_31_bits_and_infinite_multipliers_are_refused(official):
    """PRELU's other two refusals: the identity branch (input scale / output scale) needing a left shift past 31
    bits, and scales whose float32 quotient is infinite; each names the tensors. Up to a shift of 31 on the identity
    branch the two runtimes agree."""
    x = np.random.default_rng(5).integers(-128, 128, (1, 4, 6, 3)).astype(np.int8)
    for shift in (0, 17, 31):  # input scale / output scale = 0.75 * 2^shift; the alpha branch stays small
        data = _prelu_scales(0.75 * 2.0 ** shift * 0.02, 2.0 ** -40, 0.02)
        assert run_ours(data, [x])[0].tobytes() == run_official(data, [x])[0].tobytes(), shift
    with pytest.raises(ValueError, match=r"PRELU .*input 'x' scale .* over output 'y' scale .*left shift of 32 > 31"):
        Interpreter(model_content=_prelu_scales(0.75 * 2.0 ** 32 * 0.02, 2.0 ** -40, 0.02)).allocate_tensors()
    for xs, als, ys in ((1e30, 1e30, 1e-30), (1e38, 1.0, 1e-38)):
        with pytest.raises(ValueError, match=r"PRELU .*input 'x' scale .*alpha 'alpha' scale .*output 'y' scale .* "
                                             r"give an infinite multiplier"):
            Interpreter(model_content=_prelu_scales(xs, als, ys)).allocate_tensors()


def test_int8_rsqrt_whose_scale_product_is_zero_in_float_is_refused():
    """int8 RSQRT divides by sqrt(input scale) x output scale computed in float32: denormal scales make that 0 and
    the multiplier infinite. The official runtime runs it anyway (here: 127 for the zero difference, 0 for every
    other input) from a QuantizeMultiplier of infinity, whose conversion of inf * 2^31 to an integer is undefined in
    C++; refused, naming both tensors."""
    b = ModelBuilder()
    x = b.add_input("x", np.int8, [16], quant=(1.4e-45, -128))
    y = b.add_tensor("y", np.int8, [16], quant=(1e-30, 0))
    b.add_op("RSQRT", [x], [y])
    b.mark_output(y)
    with pytest.raises(ValueError, match=r"RSQRT.*input 'x' scale .*output 'y' scale .*the int8 RSQRT multiplier is "
                                         r"infinite"):
        Interpreter(model_content=b.build()).allocate_tensors()


def test_float_floor_div_of_nan_inf_and_huge_quotients(official):
    """Campaign seed 301 probe of the 'extremes' / 'nonfinite' data: float FLOOR_DIV returned -2^63 (-9.22e18) for
    NaN, inf and quotients past 2^63 (Numba's math.floor gives an int64) where the official kernel returns
    floor(x / y): NaN, +-inf, the huge quotient itself. Lengths 37 and 1x37 broadcast over 3x37 (past any vector
    width, with a tail)."""
    big = np.finfo(np.float32).max
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, 37)) * 10).astype(np.float32)
    x[0, :8] = [np.nan, np.inf, -np.inf, big, -big, 1e30, -1e30, 2.5]
    x[2, -5:] = [np.nan, np.inf, -np.inf, big, 1e20]
    y = (rng.standard_normal(37) * 3).astype(np.float32)
    y[:8] = [1.0, 2.0, 0.5, 1e-3, 3.0, -1e-8, 7.0, np.inf]
    y[-3:] = [np.nan, -np.inf, 0.25]
    for shapes in (((3, 37), (3, 37)), ((3, 37), (1, 37))):
        b = ModelBuilder()
        xa = b.add_input("x", np.float32, list(shapes[0]))
        ya = b.add_input("y", np.float32, list(shapes[1]))
        out = b.add_tensor("z", np.float32, [3, 37])
        b.add_op("FLOOR_DIV", [xa, ya], [out], version=2)
        b.mark_output(out)
        data = b.build()
        yy = np.broadcast_to(y, shapes[1]).copy() if shapes[1] == (1, 37) else np.tile(y, (3, 1))
        ours, theirs = run_ours(data, [x, yy])[0], run_official(data, [x, yy])[0]
        assert np.isnan(theirs[0, 0]) and np.isinf(theirs[0, 1])  # the oracle's own results, not ours
        assert_close(ours, theirs, rtol=1e-6, atol=0.0, what=f"FLOOR_DIV {shapes}")


@pytest.mark.parametrize("n", [10, 37])
def test_float_softmax_with_negative_beta_overflows_like_the_official(n, official):
    """Campaign seed 301 case 9692 (op_softmax, SoftmaxOptions.beta=-1.0, data mode 'extremes'): we subtracted the
    row minimum when beta < 0 (so every exp was <= 1) and our exp stopped at exp(88.7); the official kernel always
    subtracts the row maximum, so (x - max) * beta >= 0 and its exp overflows to inf past ln(FLT_MAX) = 88.72284:
    the row is then NaN (inf / inf) and 0 where ours was [1, 0, ...]. Rows whose (max - x) * |beta| straddle the
    overflow point at every position (vector body and tail), rows of extremes and NaN, and finite rows."""
    big = np.finfo(np.float32).max
    rng = np.random.default_rng(9)
    rows = [(rng.standard_normal(n) * 3).astype(np.float32) for _ in range(3)]
    for t in (88.0, 88.7, 88.72283, 88.72284, 89.0, 200.0):
        for pos in (0, n // 2, n - 1):
            r = np.zeros(n, np.float32)
            r[(pos + 1) % n] = t
            r[pos] = -1.0 if t > 88.5 else 0.0
            rows.append(r)
    ext = rng.choice(np.array([big, -big, 1e30, 0.0, 1.0, -0.0, 1.17549435e-38], np.float32), (4, n))
    ext[3, 5] = np.nan
    rows.extend(ext)
    x = np.stack(rows).astype(np.float32)
    for beta in (-1.0, -0.5, 1.0):
        b = ModelBuilder()
        xa = b.add_input("x", np.float32, list(x.shape))
        out = b.add_tensor("y", np.float32, list(x.shape))
        b.add_op("SOFTMAX", [xa], [out], options={"beta": beta})
        b.mark_output(out)
        data = b.build()
        ours, theirs = run_ours(data, [x])[0], run_official(data, [x])[0]
        if beta == -1.0:
            assert np.isnan(theirs[3 + 3 * 3]).any()  # the oracle's own overflow (t = 88.72284), not ours
        assert_close(ours, theirs, rtol=1e-5, atol=1e-6, what=f"SOFTMAX beta={beta}")


def test_subgraph_output_that_nothing_produces_is_refused_naming_it(official):
    """Campaign seed 302 case 17240 (an IF whose branch outputs were rewired to the branch's input): a subgraph
    output that is neither an input, a constant, a variable nor any operator's output. The official runtime runs
    such a model and returns whatever its memory held (here: different values on two runs of one process); refused
    at load, naming the tensor. An output that is a graph input passes through in both runtimes."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [3])
    y = b.add_tensor("y", np.float32, [3])
    unwritten = b.add_tensor("never_written", np.float32, [3])
    b.add_op("RELU", [x], [y])
    b.mark_output(y)
    b.mark_output(unwritten)
    with pytest.raises(ValueError, match=r"Output tensor \d+ \('never_written'\) of subgraph 0 is neither an input, "
                                         r"a constant, a variable nor any operator's output"):
        Interpreter(model_content=b.build())
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [3])
    b.mark_output(x)
    data = b.build()
    xs = np.array([1.0, -2.0, 3.0], np.float32)
    np.testing.assert_array_equal(run_ours(data, [xs])[0], run_official(data, [xs])[0])


@pytest.mark.parametrize("op", ["ASSIGN_VARIABLE", "READ_VARIABLE"])
def test_resource_variable_with_a_float_resource_id_is_refused(op, official):
    """Campaign seed 501 case 1247 (resource_variables, ASSIGN_VARIABLE's inputs rewired to [n, h]): a float tensor
    as the resource id reached int() at run time ("cannot convert float NaN to integer"). The official runtime
    refuses it at prepare (the id must be a RESOURCE or INT32 tensor); so do we, naming the input and its type."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [3])
    h = b.add_tensor("h", np.int32, [])
    b.add_op("VAR_HANDLE", [], [h], options={"container": "", "shared_name": "v"})
    b.add_op("ASSIGN_VARIABLE", [h, x], [])
    r = b.add_tensor("r", np.float32, [3])
    if op == "ASSIGN_VARIABLE":
        b.add_op("ASSIGN_VARIABLE", [x, x], [])
        b.add_op("READ_VARIABLE", [h], [r])
    else:
        b.add_op("READ_VARIABLE", [x], [r])
    b.mark_output(r)
    data = b.build()
    with pytest.raises(RuntimeError, match=rf"{op} .*input 0 \(the resource id\) must be a RESOURCE or INT32 tensor, "
                                           rf"got float32"):
        Interpreter(model_content=data).allocate_tensors()
    with pytest.raises(RuntimeError, match=op):
        official_interpreter(data).allocate_tensors()


@pytest.mark.parametrize("op", ["SPLIT", "SPLIT_V"])
def test_split_of_a_scalar_is_refused(op, official):
    """Campaign seed 602 case 9169 (split_v_runtime_sizes, a hostile word, inputs resized): SPLIT_V of a rank-0
    input failed with a bare "tuple index out of range". The official runtime refuses it (axis < rank); so do
    we, naming the scalar."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [])
    y = b.add_tensor("y", np.float32, [])
    axis = b.add_const("axis", np.array([0], np.int32))
    if op == "SPLIT":
        b.add_op("SPLIT", [axis, x], [y], options={"num_splits": 1})
    else:
        sizes = b.add_const("sizes", np.array([1], np.int32))
        b.add_op("SPLIT_V", [x, sizes, axis], [y], options={"num_splits": 1})
    b.mark_output(y)
    data = b.build()
    with pytest.raises(RuntimeError, match=rf"{op} .*the input to split is a scalar"):
        Interpreter(model_content=data).allocate_tensors()
    with pytest.raises(RuntimeError, match=op):
        it = official_interpreter(data)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], np.array(1.0, np.float32))
        it.invoke()


def test_tensor_list_shape_of_a_float_tensor_is_named():
    """Campaign seed 601 case 44335 (model_tensorlist_gru, a constant retyped to float32): TensorListReserve read
    its element_shape with int(), and a NaN there failed as a bare 'cannot convert float NaN to integer'. The
    TensorList ops now refuse a non-integer shape, size, index or handle, naming the input (TensorFlow takes int32
    there). Flex ops: the official runtime cannot run them, so only our message is checked."""
    b = _fuzz_builder("flex", "tensor_list_ops.tflite")
    sg = b.subgraphs[0]
    empty = next(o for o in sg.operators if "EmptyTensorList" in str(o.opcode_key))
    shape = sg.tensors[empty.inputs[0]]
    shape.dtype = np.dtype(np.float32)  # same size as int32: the buffer stays valid
    it = Interpreter(model_content=b.build())
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], np.ones(d["shape"], d["dtype"]))
    with pytest.raises(ValueError, match=r"FlexEmptyTensorList .*input 0 \(element_shape\) must be an integer tensor, "
                                         r"got float32"):
        it.invoke()


def test_string_mutants_are_refused_by_name_or_run(official):
    """The campaign's string mutants (scripts/fuzz_campaign.py: _mutate_strings: a STRING constant's count made
    negative, too large or off by one, its offsets out of order or past the buffer, its header cut, or other strings
    in it; and STRING inputs of odd bytes) on the string sources: each mutant loads, allocates and runs, or is refused
    with an error naming what is wrong (never a bare Python error, a crash or a read past a buffer); where both
    runtimes run it they agree byte for byte."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    import fuzz_campaign  # lazy: the campaign script, imported by path
    import fuzz_sources

    sources = [(n, d) for n, d in fuzz_sources.source_models()
               if n.startswith("built:string") or n in ("gather_1d", "gather_0d", "shape_ops", "vocab_lookup")]
    assert len(sources) >= 8
    rng = np.random.default_rng(37)
    seen = {"ran": 0, "refused": 0}
    tmp = Path(__file__).resolve().parent / "_string_mutant.tflite"
    try:
        for k in range(120):
            name, src = sources[k % len(sources)]
            b = fuzz_campaign.to_builder(src)
            what = fuzz_campaign._mutate_strings(b, rng) or "inputs only"
            tmp.write_bytes(b.build())
            req = {"path": str(tmp), "seed": k, "mode": ("normal", "extremes", "resize")[k % 3], "invokes": 2}
            ours = fuzz_campaign.run_request("ours", req)
            seen[ours["status"]] += 1
            if ours["status"] == "refused":
                assert not fuzz_campaign.BARE.search(ours["error"]), (name, what, ours["error"])
                continue
            corrupt = what.endswith(("count", "offset", "header cut"))  # (the official may crash on those)
            theirs = None if corrupt else fuzz_campaign.run_request("official", req)
            if theirs is not None and theirs["status"] == "ran":
                ok, why = fuzz_campaign.outputs_agree(ours["outputs"], theirs["outputs"])
                assert ok, (name, what, why)
    finally:
        tmp.unlink(missing_ok=True)
    assert seen["ran"] > 20 and seen["refused"] > 20, seen


def test_flex_attribute_of_the_wrong_wire_type_is_refused():
    """Campaign seed 3701 case 1145 (model_textvec, a flipped byte): RaggedTensorToTensor's int attribute written as
    bytes reached `& (2**64 - 1)` in the NodeDef decoder, a bare TypeError; now the decoder names the field."""
    from lite_numba.plugins.flex.nodedef import FlexDecodeError, decode_node_def

    def field(num, payload):
        return bytes([num << 3 | 2, len(payload)]) + payload

    attr = field(5, field(1, b"maxsplit") + field(2, field(3, b"\x01\x02")))  # AttrValue.i as a length-delimited
    with pytest.raises(FlexDecodeError, match="attribute value field 3 has wire type 2, expected 0"):
        decode_node_def(field(2, b"StringSplitV2") + attr)


def test_flex_text_op_with_an_absent_input_is_refused():
    """Campaign seed 3701 case 1014 (mixed_flex_lookup, operator inputs -> [-1]): LookupTableSizeV2 read the size
    of an absent input (a bare AttributeError); a text op's absent input is now named at prepare."""
    from flatbuffers import flexbuffers

    fb = flexbuffers.Builder()
    with fb.Vector():
        fb.String("StringLower")
        fb.Blob(bytes([2 << 3 | 2, 11]) + b"StringLower")
    b = ModelBuilder()
    x = b.add_input("x", object, [2])
    y = b.add_tensor("y", object, [2])
    b.add_custom_op("FlexStringLower", [-1], [y], options=bytes(fb.Finish()))
    b.mark_output(y)
    b.mark_output(x)
    it = Interpreter(model_content=b.build())
    with pytest.raises(ValueError, match=r"FlexStringLower \(version 1, node 0\): input 0 is absent"):
        it.allocate_tensors()
    # campaign seed 3702 case 1690: an op given fewer inputs than it takes (operator inputs -> [])
    b.main.operators[0].inputs = []
    with pytest.raises(ValueError, match="TensorFlow op StringLower takes 1 inputs, the node has 0"):
        Interpreter(model_content=b.build()).allocate_tensors()
