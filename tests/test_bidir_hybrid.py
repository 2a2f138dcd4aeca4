"""Hybrid BIDIRECTIONAL_SEQUENCE_LSTM and BIDIRECTIONAL_SEQUENCE_RNN (v2 symmetric, v3 asymmetric input
quantization: float activations and states, int8 weights) against the official runtime, within
1e-4 * max(1, max|ref|) as the other hybrid sequence ops; state carried over invokes, then reset; errors."""

from __future__ import annotations

import numpy as np
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
)

from lite_numba.builder import ModelBuilder
from lite_numba.testing import require_official

require_official()


def hybrid_bidir_lstm_model(x_shape, wf, wb, qf, qb, n_fw, n_bw, n_cell, *, merge=False, time_major=False,
                            act="TANH", cell_clip=0.0, proj_clip=0.0, aux_shape=None, aux_weights=False,
                            asymmetric=False):
    b = ModelBuilder()
    x = b.add_input("x", np.float32, list(x_shape))
    batch = x_shape[1] if time_major else x_shape[0]
    ins = [x] + add_consts(b, wf, WEIGHT_ORDER, "fw_", qf) + add_consts(b, wb, WEIGHT_ORDER, "bw_", qb)
    for name, n_out in (("fw", n_fw), ("bw", n_bw)):
        ins += [b.add_tensor(f"{name}_h", np.float32, [batch, n_out], is_variable=True),
                b.add_tensor(f"{name}_c", np.float32, [batch, n_cell], is_variable=True)]
    ins += [b.add_input("aux", np.float32, list(aux_shape)) if aux_shape else -1]
    if aux_weights:
        ins += add_consts(b, wf, BIDIR_AUX, "fw_", qf) + add_consts(b, wb, BIDIR_AUX, "bw_", qb)
    else:
        ins += [-1] * 8
    ys = [b.add_tensor("fw_y", np.float32, list(x_shape[:2]) + [n_fw + n_bw if merge else n_fw])]
    if not merge:
        ys.append(b.add_tensor("bw_y", np.float32, list(x_shape[:2]) + [n_bw]))
    b.add_op("BIDIRECTIONAL_SEQUENCE_LSTM", ins, ys, version=3 if asymmetric else 2,
             options={"fused_activation_function": act, "cell_clip": cell_clip, "proj_clip": proj_clip,
                      "merge_outputs": merge, "time_major": time_major, "asymmetric_quantize_inputs": asymmetric})
    for y in ys:
        b.mark_output(y)
    return b.build()


# explicit examples: the aux input (cross links) in both layouts, the aux input as the backward input, merged
@example(batch=2, time=3, n_input=9, n_cell=5, cifg=False, peephole=True, proj=True, merge=False, time_major=True,
         aux="cross", asymmetric=True, seed=1)
@example(batch=2, time=3, n_input=4, n_cell=3, cifg=True, peephole=False, proj=False, merge=False, time_major=False,
         aux="cross", asymmetric=False, seed=2)
@example(batch=2, time=2, n_input=5, n_cell=4, cifg=False, peephole=False, proj=False, merge=True, time_major=True,
         aux="bw_input", asymmetric=False, seed=3)
@settings(max_examples=scaled(12), deadline=None)
@given(batch=st.integers(1, 3), time=st.integers(1, 4), n_input=st.integers(1, 10), n_cell=st.integers(1, 9),
       cifg=st.booleans(), peephole=st.booleans(), proj=st.booleans(), merge=st.booleans(), time_major=st.booleans(),
       aux=st.sampled_from([None, "cross", "bw_input"]), asymmetric=st.booleans(), seed=st.integers(0, 99))
def test_bidir_lstm_hybrid(batch, time, n_input, n_cell, cifg, peephole, proj, merge, time_major, aux, asymmetric,
                           seed):
    if merge and not time_major:
        batch = 1  # TFLite indexes batch-major merged states out of bounds for batch > 1
    rng = np.random.default_rng(seed)
    n_aux = 3 if aux == "cross" else 0
    wf, qf = quantize_weights(lstm_weights(rng, n_input, n_cell, n_cell, cifg=cifg, peephole=peephole, proj=proj,
                                           proj_bias=proj, n_aux=n_aux))
    wb, qb = quantize_weights(lstm_weights(rng, n_input, n_cell, n_cell, cifg=not cifg, peephole=peephole,
                                           n_aux=n_aux))
    shape = (time, batch, n_input) if time_major else (batch, time, n_input)
    aux_shape = None if aux is None else shape[:2] + ((n_aux,) if aux == "cross" else (n_input,))
    data = hybrid_bidir_lstm_model(shape, wf, wb, qf, qb, n_cell, n_cell, n_cell, merge=merge, time_major=time_major,
                                   cell_clip=0.8 if seed % 2 else 0.0, proj_clip=0.5 if seed % 3 == 0 else 0.0,
                                   aux_shape=aux_shape, aux_weights=aux == "cross", asymmetric=asymmetric)

    def step(scale):
        return [rnd(rng, shape, scale)] + ([rnd(rng, aux_shape, scale)] if aux_shape else [])

    zero = [np.zeros(shape, np.float32)] + ([np.zeros(aux_shape, np.float32)] if aux_shape else [])
    check_sequence(data, [step(1.0), zero, step(2.0), step(1.0)], reset_before=(3,), tol=1e-4)


def hybrid_bidir_rnn_model(x_shape, fw, bw, scales, *, merge=False, time_major=False, act="TANH", aux_shape=None,
                           aux_weights=None, aux_scales=None, asymmetric=False):
    """fw, bw = (W int8, R int8, bias); scales = (fw W, fw R, bw W, bw R); aux_weights = (fw, bw) int8 or None."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, list(x_shape))
    batch = x_shape[1] if time_major else x_shape[0]
    ins = [x]
    for k, (name, (w, r, bias)) in enumerate((("fw", fw), ("bw", bw))):
        ins += [b.add_const(f"{name}_w", w, quant=(scales[2 * k], 0)),
                b.add_const(f"{name}_r", r, quant=(scales[2 * k + 1], 0)), b.add_const(f"{name}_b", bias),
                b.add_tensor(f"{name}_h", np.float32, [batch, w.shape[0]], is_variable=True)]
    ins += [b.add_input("aux", np.float32, list(aux_shape)) if aux_shape else -1]
    if aux_weights:
        ins += [b.add_const("fw_aux_w", aux_weights[0], quant=(aux_scales[0], 0)),
                b.add_const("bw_aux_w", aux_weights[1], quant=(aux_scales[1], 0))]
    else:
        ins += [-1, -1]
    n_fw, n_bw = fw[0].shape[0], bw[0].shape[0]
    ys = [b.add_tensor("fw_y", np.float32, list(x_shape[:2]) + [n_fw + n_bw if merge else n_fw])]
    if not merge:
        ys.append(b.add_tensor("bw_y", np.float32, list(x_shape[:2]) + [n_bw]))
    b.add_op("BIDIRECTIONAL_SEQUENCE_RNN", ins, ys, version=3 if asymmetric else 2,
             options={"fused_activation_function": act, "merge_outputs": merge, "time_major": time_major,
                      "asymmetric_quantize_inputs": asymmetric})
    for y in ys:
        b.mark_output(y)
    return b.build()


def _q(a):
    scale = float(np.abs(a).max()) / 127 or 1.0
    return np.clip(np.round(a / scale), -127, 127).astype(np.int8), scale


def hybrid_rnn_cell(rng, n_input, units):
    w, sw = _q(rnd(rng, (units, n_input)))
    r, sr = _q(rnd(rng, (units, units)))
    return (w, r, rnd(rng, (units,), 0.3)), (sw, sr)


# explicit examples: time major with time > 1 (TFLite's hybrid kernel runs the whole sequence max_time times there),
# the aux input (cross links) in both layouts, the aux input as the backward input
@example(batch=2, time=3, n_input=9, fw_units=4, bw_units=3, merge=True, time_major=True, aux="cross", act="TANH",
         asymmetric=True, seed=1)
@example(batch=2, time=3, n_input=4, fw_units=2, bw_units=5, merge=False, time_major=False, aux="cross", act="RELU",
         asymmetric=False, seed=2)
@example(batch=3, time=2, n_input=5, fw_units=3, bw_units=3, merge=False, time_major=True, aux="bw_input",
         act="TANH", asymmetric=False, seed=4)
@settings(max_examples=scaled(14), deadline=None)
@given(batch=st.integers(1, 3), time=st.integers(1, 4), n_input=st.integers(1, 10), fw_units=st.integers(1, 6),
       bw_units=st.integers(1, 6), merge=st.booleans(), time_major=st.booleans(),
       aux=st.sampled_from([None, "cross", "bw_input"]), act=st.sampled_from(["TANH", "RELU", "NONE"]),
       asymmetric=st.booleans(), seed=st.integers(0, 99))
def test_bidir_rnn_hybrid(batch, time, n_input, fw_units, bw_units, merge, time_major, aux, act, asymmetric, seed):
    if merge and time_major and not asymmetric:
        batch = 1  # the official runtime crashes on this configuration with batch > 1 (we refuse it)
    rng = np.random.default_rng(seed)
    shape = (time, batch, n_input) if time_major else (batch, time, n_input)
    # TFLite steps aux rows by the input depth: keep the aux depth >= the input depth
    n_aux = n_input + seed % 3 if aux == "cross" else n_input
    aux_shape = None if aux is None else shape[:2] + (n_aux,)
    fw, (s0, s1) = hybrid_rnn_cell(rng, n_input, fw_units)
    bw, (s2, s3) = hybrid_rnn_cell(rng, n_input, bw_units)
    aux_w = aux_s = None
    if aux == "cross":
        (a0, t0), (a1, t1) = _q(rnd(rng, (fw_units, n_aux))), _q(rnd(rng, (bw_units, n_aux)))
        aux_w, aux_s = (a0, a1), (t0, t1)
    data = hybrid_bidir_rnn_model(shape, fw, bw, (s0, s1, s2, s3), merge=merge, time_major=time_major, act=act,
                                  aux_shape=aux_shape, aux_weights=aux_w, aux_scales=aux_s, asymmetric=asymmetric)

    def step(scale):
        return [rnd(rng, shape, scale)] + ([rnd(rng, aux_shape, scale)] if aux_shape else [])

    zero = [np.zeros(shape, np.float32)] + ([np.zeros(aux_shape, np.float32)] if aux_shape else [])
    check_sequence(data, [step(1.0), zero, step(2.0), step(1.0)], reset_before=(3,), tol=1e-4)


def test_bidir_hybrid_errors():
    rng = np.random.default_rng(11)
    wf, qf = quantize_weights(lstm_weights(rng, 3, 4, 4))
    mixed = dict(wf, recurrent_to_cell_weights=rnd(rng, (4, 4)))
    expect_error(hybrid_bidir_lstm_model((1, 2, 3), wf, mixed, qf, qf, 4, 4, 4),
                  "BIDIRECTIONAL_SEQUENCE_LSTM.*bw recurrent_to_cell_weights has type float32: a hybrid LSTM takes")
    fw, (s0, s1) = hybrid_rnn_cell(rng, 3, 4)
    bw = (rnd(rng, (5, 3)), rnd(rng, (5, 5)), rnd(rng, (5,)))
    expect_error(hybrid_bidir_rnn_model((2, 3, 3), fw, bw, (s0, s1, s0, s1)),
                  "BIDIRECTIONAL_SEQUENCE_RNN.*bw weights has type float32: a hybrid RNN takes int8")
    expect_error(hybrid_bidir_rnn_model((3, 2, 3), fw, fw, (s0, s1, s0, s1), merge=True, time_major=True),
                  "BIDIRECTIONAL_SEQUENCE_RNN.*needs batch 1")
    (a0, t0) = _q(rnd(rng, (4, 2)))
    expect_error(hybrid_bidir_rnn_model((2, 3, 3), fw, fw, (s0, s1, s0, s1), aux_shape=(2, 3, 2),
                                         aux_weights=(a0, a0), aux_scales=(t0, t0)),
                  "BIDIRECTIONAL_SEQUENCE_RNN.*hybrid batch-major aux input of depth 2 < input depth 3")
