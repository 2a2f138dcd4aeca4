"""Sequence ops against the official runtime: UNIDIRECTIONAL_SEQUENCE_LSTM (CIFG, peephole, projection, layer norm,
clipping, diagonal recurrent weights, both time layouts), BIDIRECTIONAL_SEQUENCE_LSTM, UNIDIRECTIONAL_SEQUENCE_RNN,
RNN and SVDF; state carried over several invokes and reset_all_variables; errors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sequence_models import (
    BIDIR_AUX,
    WEIGHT_ORDER,
    add_consts,
    check_sequence,
    expect_error,
    lstm_weights,
    quantize_weights,
    rnd,
    uni_lstm_model,
)

from lite_numba.builder import ModelBuilder
from lite_numba.testing import require_official

require_official()

# Derandomized (fixed examples in CI, like the other hypothesis tests). Layer norm over 1-2 cells is ill-conditioned:
# two pre-activations that nearly agree normalize to +-(a - b) / sqrt((a - b)^2 / 4 + 1e-8), so a last-bit difference
# in a and b (the official float products run through its GEMM backend, in another order) grows to ~1e-4; found by
# hypothesis at batch 2, time 2, n_input 5, n_cell 2, CIFG, layer norm, activation NONE (1.7e-4). Such cases use
# the hybrid ops' 1e-4 bound.
@settings(max_examples=scaled(25), deadline=None)
@given(batch=st.integers(1, 3), time=st.integers(1, 5), n_input=st.integers(1, 7), n_cell=st.integers(1, 9),
       cifg=st.booleans(), peephole=st.booleans(), proj=st.sampled_from([None, False, True]), layer_norm=st.booleans(),
       time_major=st.booleans(), act=st.sampled_from(["TANH", "TANH", "RELU", "NONE", "RELU6"]),
       cell_clip=st.sampled_from([0.0, 0.0, 0.7]), proj_clip=st.sampled_from([0.0, 0.4]), seed=st.integers(0, 99))
def test_uni_lstm(batch, time, n_input, n_cell, cifg, peephole, proj, layer_norm, time_major, act, cell_clip,
                  proj_clip, seed):
    rng = np.random.default_rng(seed)
    n_output = n_cell if proj is None else n_cell + 2 - seed % 4
    n_output = max(n_output, 1)
    w = lstm_weights(rng, n_input, n_cell, n_output, cifg=cifg, peephole=peephole, proj=proj is not None,
                     proj_bias=bool(proj), layer_norm=layer_norm)
    shape = (time, batch, n_input) if time_major else (batch, time, n_input)
    data = uni_lstm_model(shape, w, n_output, n_cell, time_major=time_major, act=act, cell_clip=cell_clip,
                          proj_clip=proj_clip, layer_norm=layer_norm)
    # two invokes carry the state; a reset before the third restarts from zeros
    check_sequence(data, [[rnd(rng, shape, 1.0)] for _ in range(3)], reset_before=(2,),
                   tol=1e-4 if layer_norm and n_cell <= 2 else 1e-5)


@pytest.mark.parametrize("time_major,cifg,peephole,proj", [(False, False, False, False), (True, True, True, True)])
def test_uni_lstm_text_sized(time_major, cifg, peephole, proj):
    """A text model's size (32 inputs, 64 cells, 20 steps, 2 rows): kernels/sequence/lstm_gemm.py's GEMMs (the input
    products of every step at once, tiles of 6 rows and panels of 32 gates, then per step one product over the
    concatenated recurrent weights), with an all-zero step in the middle."""
    rng = np.random.default_rng(5)
    n_output = 48 if proj else 64
    w = lstm_weights(rng, 32, 64, n_output, cifg=cifg, peephole=peephole, proj=proj, proj_bias=proj)
    shape = (20, 2, 32) if time_major else (2, 20, 32)
    data = uni_lstm_model(shape, w, n_output, 64, time_major=time_major, cell_clip=3.0 if proj else 0.0)
    x = rnd(rng, shape, 1.0)
    x[(7, slice(None)) if time_major else (slice(None), 7)] = 0.0
    check_sequence(data, [[x], [rnd(rng, shape, 1.0)]])


def test_uni_lstm_20_inputs_and_zero_input():
    rng = np.random.default_rng(1)
    w = lstm_weights(rng, 4, 5, 5, peephole=True)
    data = uni_lstm_model((2, 3, 4), w, 5, 5, n_inputs=20)
    check_sequence(data, [[rnd(rng, (2, 3, 4))], [np.zeros((2, 3, 4), np.float32)]])


@pytest.mark.parametrize("time_major", [False, True])
def test_uni_lstm_diagonal_recurrent(time_major):
    rng = np.random.default_rng(2)
    w = lstm_weights(rng, 3, 6, 6, diag=True, peephole=True)
    shape = (4, 2, 3) if time_major else (2, 4, 3)
    data = uni_lstm_model(shape, w, 6, 6, time_major=time_major, version=4, diag=True)
    check_sequence(data, [[rnd(rng, shape)], [rnd(rng, shape)]])


def test_uni_lstm_1d_state():
    # TFLite accepts state tensors of any shape with the right element count
    rng = np.random.default_rng(3)
    w = lstm_weights(rng, 3, 4, 4)
    data = uni_lstm_model((2, 3, 3), w, 4, 4, const_state_shape=[8])
    check_sequence(data, [[rnd(rng, (2, 3, 3))]])


def test_uni_lstm_errors():
    rng = np.random.default_rng(4)
    w = lstm_weights(rng, 3, 4, 4)
    bad = dict(w, forget_gate_bias=rnd(rng, (5,)))
    expect_error(uni_lstm_model((1, 2, 3), bad, 4, 4), "UNIDIRECTIONAL_SEQUENCE_LSTM.*forget_gate_bias")
    half_cifg = dict(w, recurrent_to_input_weights=None)
    expect_error(uni_lstm_model((1, 2, 3), half_cifg, 4, 4), "UNIDIRECTIONAL_SEQUENCE_LSTM.*both present")
    expect_error(uni_lstm_model((1, 2, 3), w, 4, 4, const_state_shape=[1, 5]),
                  "UNIDIRECTIONAL_SEQUENCE_LSTM.*output_state")
    expect_error(uni_lstm_model((1, 2, 3), w, 4, 4, cell_clip=-1.0), "UNIDIRECTIONAL_SEQUENCE_LSTM.*cell_clip")
    wq = dict(w, input_to_forget_weights=(w["input_to_forget_weights"] * 100).astype(np.int8))
    expect_error(uni_lstm_model((1, 2, 3), wq, 4, 4), "UNIDIRECTIONAL_SEQUENCE_LSTM.*float32")


def bidir_model(x_shape, wf, wb, n_fw, n_bw, n_cell_fw, n_cell_bw, *, merge=False, time_major=False, act="TANH",
                cell_clip=0.0, proj_clip=0.0, aux_shape=None, aux_weights=False):
    b = ModelBuilder()
    x = b.add_input("x", np.float32, list(x_shape))
    batch = x_shape[1] if time_major else x_shape[0]
    ins = [x] + add_consts(b, wf, WEIGHT_ORDER, "fw_") + add_consts(b, wb, WEIGHT_ORDER, "bw_")
    for name, n_out, n_cell in (("fw", n_fw, n_cell_fw), ("bw", n_bw, n_cell_bw)):
        ins += [b.add_tensor(f"{name}_h", np.float32, [batch, n_out], is_variable=True),
                b.add_tensor(f"{name}_c", np.float32, [batch, n_cell], is_variable=True)]
    ins += [b.add_input("aux", np.float32, list(aux_shape)) if aux_shape else -1]
    if aux_weights:
        ins += add_consts(b, wf, BIDIR_AUX, "fw_") + add_consts(b, wb, BIDIR_AUX, "bw_")
    else:
        ins += [-1] * 8
    ys = [b.add_tensor("fw_y", np.float32, list(x_shape[:2]) + [n_fw + n_bw if merge else n_fw])]
    if not merge:
        ys.append(b.add_tensor("bw_y", np.float32, list(x_shape[:2]) + [n_bw]))
    b.add_op("BIDIRECTIONAL_SEQUENCE_LSTM", ins, ys,
             options={"fused_activation_function": act, "cell_clip": cell_clip, "proj_clip": proj_clip,
                      "merge_outputs": merge, "time_major": time_major})
    for y in ys:
        b.mark_output(y)
    return b.build()


@settings(max_examples=scaled(6), deadline=None)
@given(batch=st.integers(1, 3), time=st.integers(1, 4), n_input=st.integers(1, 5), n_cell=st.integers(1, 6),
       cifg=st.booleans(), peephole=st.booleans(), proj=st.booleans(), merge=st.booleans(), time_major=st.booleans(),
       aux=st.sampled_from([None, "cross", "bw_input"]), seed=st.integers(0, 99))
def test_bidir_lstm(batch, time, n_input, n_cell, cifg, peephole, proj, merge, time_major, aux, seed):
    if merge and not time_major:
        batch = 1  # TFLite indexes batch-major merged states out of bounds for batch > 1
    rng = np.random.default_rng(seed)
    n_aux = 3 if aux == "cross" else 0
    n_fw = n_cell  # TFLite checks both directions against the forward sizes (a projection keeps n_output here)
    wf = lstm_weights(rng, n_input, n_cell, n_fw, cifg=cifg, peephole=peephole, proj=proj, proj_bias=proj,
                      n_aux=n_aux)
    # TFLite requires the same n_cell in both directions
    wb = lstm_weights(rng, n_input, n_cell, n_cell, cifg=not cifg, peephole=peephole, n_aux=n_aux)
    shape = (time, batch, n_input) if time_major else (batch, time, n_input)
    aux_shape = None if aux is None else shape[:2] + ((n_aux,) if aux == "cross" else (n_input,))
    data = bidir_model(shape, wf, wb, n_fw, n_cell, n_cell, n_cell, merge=merge, time_major=time_major,
                       cell_clip=0.8 if seed % 2 else 0.0, proj_clip=0.5 if seed % 3 == 0 else 0.0,
                       aux_shape=aux_shape, aux_weights=aux == "cross")
    inputs = [rnd(rng, shape, 1.0)] + ([rnd(rng, aux_shape, 1.0)] if aux_shape else [])
    check_sequence(data, [inputs, [rnd(rng, a.shape, 1.0) for a in inputs]])


def test_bidir_lstm_errors():
    rng = np.random.default_rng(5)
    w = lstm_weights(rng, 3, 4, 4)
    expect_error(bidir_model((2, 3, 3), w, w, 4, 4, 4, 4, merge=True), "BIDIRECTIONAL_SEQUENCE_LSTM.*batch 1")
    bad = dict(w, input_to_cell_weights=rnd(rng, (4, 2)))
    expect_error(bidir_model((1, 3, 3), w, bad, 4, 4, 4, 4), "BIDIRECTIONAL_SEQUENCE_LSTM.*bw input_to_cell")


def rnn_model(op, x_shape, w, r, bias, *, time_major=False, act="TANH", state_shape=None):
    b = ModelBuilder()
    x = b.add_input("x", np.float32, list(x_shape))
    units = w.shape[0]
    batch = x_shape[0] if op == "RNN" or not time_major else x_shape[1]
    h = b.add_tensor("h", np.float32, state_shape or [batch, units], is_variable=True)
    ins = [x, b.add_const("w", w), b.add_const("r", r), b.add_const("b", bias), h]
    out_shape = [batch, units] if op == "RNN" else list(x_shape[:2]) + [units]
    y = b.add_tensor("y", np.float32, out_shape)
    opts = {"fused_activation_function": act}
    if op != "RNN":
        opts["time_major"] = time_major
    b.add_op(op, ins, [y], options=opts)
    b.mark_output(y)
    return b.build()


@settings(max_examples=scaled(15), deadline=None)
@given(op=st.sampled_from(["RNN", "UNIDIRECTIONAL_SEQUENCE_RNN"]), batch=st.integers(1, 3), time=st.integers(1, 4),
       n_input=st.integers(1, 6), units=st.integers(1, 7), time_major=st.booleans(),
       act=st.sampled_from(["TANH", "RELU", "NONE", "RELU_N1_TO_1", "RELU6"]), seed=st.integers(0, 99))
def test_rnn(op, batch, time, n_input, units, time_major, act, seed):
    rng = np.random.default_rng(seed)
    w, r, bias = rnd(rng, (units, n_input)), rnd(rng, (units, units)), rnd(rng, (units,), 0.3)
    if op == "RNN":
        shape = (batch, n_input)
    else:
        shape = (time, batch, n_input) if time_major else (batch, time, n_input)
    data = rnn_model(op, shape, w, r, bias, time_major=time_major, act=act)
    check_sequence(data, [[rnd(rng, shape, 1.0)] for _ in range(3)], reset_before=(2,))


def test_rnn_errors():
    rng = np.random.default_rng(6)
    w, r, bias = rnd(rng, (4, 3)), rnd(rng, (4, 4)), rnd(rng, (4,))
    expect_error(rnn_model("RNN", (2, 3), w, r, bias, state_shape=[2, 5]), "RNN.*hidden_state")
    expect_error(rnn_model("UNIDIRECTIONAL_SEQUENCE_RNN", (2, 3, 3), w, rnd(rng, (4, 3)), bias),
                  "UNIDIRECTIONAL_SEQUENCE_RNN.*recurrent_weights")
    expect_error(rnn_model("UNIDIRECTIONAL_SEQUENCE_RNN", (2, 3, 2), w, r, bias), "UNIDIRECTIONAL_SEQUENCE_RNN.*depth")


def svdf_model(batch, n_input, w_f, w_t, bias, rank, act="NONE", state_shape=None):
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [batch, n_input])
    n_f, mem = w_t.shape
    state = b.add_tensor("state", np.float32, state_shape or [batch, n_f * mem], is_variable=True)
    ins = [x, b.add_const("wf", w_f), b.add_const("wt", w_t), b.add_const("b", bias) if bias is not None else -1,
           state]
    y = b.add_tensor("y", np.float32, [batch, n_f // rank])
    b.add_op("SVDF", ins, [y], options={"rank": rank, "fused_activation_function": act})
    b.mark_output(y)
    return b.build()


@settings(max_examples=scaled(12), deadline=None)
@given(batch=st.integers(1, 3), n_input=st.integers(1, 6), units=st.integers(1, 4), rank=st.integers(1, 3),
       mem=st.integers(1, 5), has_bias=st.booleans(), act=st.sampled_from(["NONE", "RELU", "TANH"]),
       seed=st.integers(0, 99))
def test_svdf(batch, n_input, units, rank, mem, has_bias, act, seed):
    rng = np.random.default_rng(seed)
    n_f = units * rank
    data = svdf_model(batch, n_input, rnd(rng, (n_f, n_input)), rnd(rng, (n_f, mem)),
                      rnd(rng, (units,), 0.3) if has_bias else None, rank, act)
    # more invokes than the memory, so the state shifts all the way through
    check_sequence(data, [[rnd(rng, (batch, n_input), 1.0)] for _ in range(mem + 2)], reset_before=(mem + 1,))


def test_svdf_errors():
    rng = np.random.default_rng(7)
    expect_error(svdf_model(1, 3, rnd(rng, (4, 3)), rnd(rng, (4, 2)), None, 3), "SVDF.*rank 3")
    expect_error(svdf_model(1, 3, rnd(rng, (4, 3)), rnd(rng, (4, 2)), None, 2, state_shape=[1, 7]), "SVDF.*state")


def bidir_rnn_model(x_shape, fw, bw, *, merge=False, time_major=False, act="TANH", aux_shape=None,
                    aux_weights=None):
    """fw, bw = (W, R, bias); aux_weights = (fw_aux_W, bw_aux_W) or None."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, list(x_shape))
    batch = x_shape[1] if time_major else x_shape[0]
    ins = [x]
    for name, (w, r, bias) in (("fw", fw), ("bw", bw)):
        ins += [b.add_const(f"{name}_w", w), b.add_const(f"{name}_r", r), b.add_const(f"{name}_b", bias),
                b.add_tensor(f"{name}_h", np.float32, [batch, w.shape[0]], is_variable=True)]
    ins += [b.add_input("aux", np.float32, list(aux_shape)) if aux_shape else -1]
    ins += [b.add_const("fw_aux_w", aux_weights[0]), b.add_const("bw_aux_w", aux_weights[1])] if aux_weights \
        else [-1, -1]
    n_fw, n_bw = fw[0].shape[0], bw[0].shape[0]
    ys = [b.add_tensor("fw_y", np.float32, list(x_shape[:2]) + [n_fw + n_bw if merge else n_fw])]
    if not merge:
        ys.append(b.add_tensor("bw_y", np.float32, list(x_shape[:2]) + [n_bw]))
    b.add_op("BIDIRECTIONAL_SEQUENCE_RNN", ins, ys,
             options={"fused_activation_function": act, "merge_outputs": merge, "time_major": time_major})
    for y in ys:
        b.mark_output(y)
    return b.build()


def rnn_cell(rng, n_input, units):
    return rnd(rng, (units, n_input)), rnd(rng, (units, units)), rnd(rng, (units,), 0.3)


@settings(max_examples=scaled(14), deadline=None)
@given(batch=st.integers(1, 3), time=st.integers(1, 4), n_input=st.integers(1, 5), fw_units=st.integers(1, 6),
       bw_units=st.integers(1, 6), merge=st.booleans(), time_major=st.booleans(),
       aux=st.sampled_from([None, "cross", "bw_input"]), act=st.sampled_from(["TANH", "RELU", "NONE"]),
       seed=st.integers(0, 99))
def test_bidir_rnn(batch, time, n_input, fw_units, bw_units, merge, time_major, aux, act, seed):
    rng = np.random.default_rng(seed)
    shape = (time, batch, n_input) if time_major else (batch, time, n_input)
    # time-major aux rows are stepped by the input depth in TFLite: keep the aux depth >= the input depth there
    n_aux = n_input + seed % 3 if aux == "cross" else n_input
    aux_shape = None if aux is None else shape[:2] + (n_aux,)
    aux_w = (rnd(rng, (fw_units, n_aux)), rnd(rng, (bw_units, n_aux))) if aux == "cross" else None
    data = bidir_rnn_model(shape, rnn_cell(rng, n_input, fw_units), rnn_cell(rng, n_input, bw_units), merge=merge,
                           time_major=time_major, act=act, aux_shape=aux_shape, aux_weights=aux_w)
    steps = []
    for _ in range(3):
        steps.append([rnd(rng, shape, 1.0)] + ([rnd(rng, aux_shape, 1.0)] if aux_shape else []))
    check_sequence(data, steps, reset_before=(2,))


def test_bidir_rnn_errors():
    rng = np.random.default_rng(8)
    fw, bw = rnn_cell(rng, 3, 4), rnn_cell(rng, 3, 5)
    expect_error(bidir_rnn_model((2, 3, 3), fw, rnn_cell(rng, 2, 5)), "BIDIRECTIONAL_SEQUENCE_RNN.*bw weights")
    expect_error(bidir_rnn_model((2, 3, 3), fw, (bw[0], bw[1], rnd(rng, (4,)))),
                  "BIDIRECTIONAL_SEQUENCE_RNN.*bw bias")
    expect_error(bidir_rnn_model((3, 2, 3), fw, bw, time_major=True, aux_shape=(3, 2, 2),
                                  aux_weights=(rnd(rng, (4, 2)), rnd(rng, (5, 2)))),
                  "BIDIRECTIONAL_SEQUENCE_RNN.*reads past")
    expect_error(bidir_rnn_model((3, 2, 3), fw, bw, time_major=True, aux_shape=(3, 2, 4)),
                  "BIDIRECTIONAL_SEQUENCE_RNN.*backward input")


# Derandomized (as the elementwise tests): CI runs the same 16 examples every time. The explicit example (issue 7)
# was 2.3e-4 off while the input quantization rounded like the portable code: the official x86 build rounds blocks
# of 8 values with the NEON RoundToNearest and adds the asymmetric zero point after rounding (quantize_rows).
@example(batch=2, time=1, n_input=6, n_cell=7, cifg=False, peephole=True, proj=False, layer_norm=False,
         time_major=False, asymmetric=True, act="RELU", cell_clip=0.0, proj_clip=0.0, seed=21)
@settings(max_examples=scaled(16), deadline=None)
@given(batch=st.integers(1, 3), time=st.integers(1, 4), n_input=st.integers(1, 7), n_cell=st.integers(1, 9),
       cifg=st.booleans(), peephole=st.booleans(), proj=st.sampled_from([None, False, True]), layer_norm=st.booleans(),
       time_major=st.booleans(), asymmetric=st.booleans(), act=st.sampled_from(["TANH", "TANH", "RELU", "NONE"]),
       cell_clip=st.sampled_from([0.0, 0.7]), proj_clip=st.sampled_from([0.0, 0.4]), seed=st.integers(0, 99))
def test_uni_lstm_hybrid(batch, time, n_input, n_cell, cifg, peephole, proj, layer_norm, time_major, asymmetric, act,
                         cell_clip, proj_clip, seed):
    """Float activations with int8 weights (what dynamic-range quantization emits; v2 symmetric, v3 asymmetric
    input quantization): TFLite quantizes inputs and states per step and batch row."""
    rng = np.random.default_rng(seed)
    n_output = n_cell if proj is None else max(n_cell + 2 - seed % 4, 1)
    w = lstm_weights(rng, n_input, n_cell, n_output, cifg=cifg, peephole=peephole, proj=proj is not None,
                     proj_bias=bool(proj), layer_norm=layer_norm)
    wq, quants = quantize_weights(w)
    shape = (time, batch, n_input) if time_major else (batch, time, n_input)
    data = uni_lstm_model(shape, wq, n_output, n_cell, time_major=time_major, act=act, cell_clip=cell_clip,
                          proj_clip=proj_clip, layer_norm=layer_norm, quants=quants, asymmetric=asymmetric,
                          version=3 if asymmetric else 2)
    steps = [[rnd(rng, shape, 1.0)], [rnd(rng, shape, 1.0)], [np.zeros(shape, np.float32)], [rnd(rng, shape, 2.0)]]
    # The states are re-quantized every step, so a last-bit difference of the float gate maths (TFLite's vectorised
    # tanh / logistic) occasionally moves one int8 value by a step: ~1e-4 (the issue's float bound), not 1e-5.
    check_sequence(data, steps, reset_before=(3,), tol=1e-4)


def test_uni_lstm_hybrid_errors():
    rng = np.random.default_rng(9)
    w = lstm_weights(rng, 3, 4, 4)
    wq, quants = quantize_weights(w)
    mixed = dict(wq, recurrent_to_cell_weights=w["recurrent_to_cell_weights"])
    expect_error(uni_lstm_model((1, 2, 3), mixed, 4, 4, quants=quants, version=2),
                  "UNIDIRECTIONAL_SEQUENCE_LSTM.*recurrent_to_cell_weights has type float32: a hybrid LSTM takes int8")


@settings(max_examples=scaled(14), deadline=None)
@given(op=st.sampled_from(["RNN", "UNIDIRECTIONAL_SEQUENCE_RNN"]), batch=st.integers(1, 3), time=st.integers(1, 4),
       n_input=st.integers(1, 6), units=st.integers(1, 7), time_major=st.booleans(), asymmetric=st.booleans(),
       act=st.sampled_from(["TANH", "RELU", "NONE"]), seed=st.integers(0, 99))
def test_rnn_hybrid(op, batch, time, n_input, units, time_major, asymmetric, act, seed):
    """int8 weights, float input and state (v2 symmetric, v3 asymmetric input quantization)."""
    rng = np.random.default_rng(seed)
    q, quants = quantize_weights({"w_weights": rnd(rng, (units, n_input)), "r_weights": rnd(rng, (units, units))})
    w, r = q["w_weights"], q["r_weights"]
    bias = rnd(rng, (units,), 0.3)
    shape = (batch, n_input) if op == "RNN" else ((time, batch, n_input) if time_major else (batch, time, n_input))
    b = ModelBuilder()
    x = b.add_input("x", np.float32, list(shape))
    h = b.add_tensor("h", np.float32, [batch, units], is_variable=True)
    ins = [x, b.add_const("w", w, quant=quants["w_weights"]), b.add_const("r", r, quant=quants["r_weights"]),
           b.add_const("b", bias), h]
    y = b.add_tensor("y", np.float32, [batch, units] if op == "RNN" else list(shape[:2]) + [units])
    opts = {"fused_activation_function": act, "asymmetric_quantize_inputs": asymmetric}
    if op != "RNN":
        opts["time_major"] = time_major
    b.add_op(op, ins, [y], options=opts, version=3 if asymmetric else 2)
    b.mark_output(y)
    steps = [[rnd(rng, shape, 1.0)], [np.zeros(shape, np.float32)], [rnd(rng, shape, 2.0)], [rnd(rng, shape, 1.0)]]
    check_sequence(b.build(), steps, reset_before=(3,), tol=1e-4)
