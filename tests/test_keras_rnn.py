"""Real converter output: Keras 3 LSTM / GRU / SimpleRNN / Bidirectional loops (WHILE over subgraphs), a growing
tf.while_loop, IF inside WHILE, resource variables with CALL_ONCE; legacy tf_keras LSTMs that the converter fuses
into UNIDIRECTIONAL_SEQUENCE_LSTM. The models were written by
scripts/gen_keras_rnn_models.py (TensorFlow 2.21, Keras 3.15); the references come from the official runtime at test
time (these tests fail, not skip, under CI when it is missing)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import model_path

import lite_numba
from lite_numba.testing import assert_close, invoke_both, official_interpreter, require_official

KERAS = ["keras_lstm", "keras_gru", "keras_simple_rnn", "keras_bilstm", "keras_stacked_gru_lstm",
         "tfkeras_lstm_fused", "tfkeras_bilstm_fused", "tfkeras_lstm_dynamic_range"]


def _pair(name: str):
    require_official()
    path = str(model_path(name))
    ours = lite_numba.Interpreter(model_path=path)
    ours.allocate_tensors()
    return ours, official_interpreter(path)


def _check(outs, tol=1e-5):
    o, r = outs
    assert len(o) == len(r)
    for a, b in zip(o, r):
        assert a.dtype == b.dtype
        assert_close(a, b, tol)


@pytest.mark.parametrize("name", KERAS)
def test_keras_sequence_model(name):
    ours, ref = _pair(name)
    rng = np.random.default_rng(sum(name.encode()))
    for scale in (1.0, 3.0, 0.0):  # the last one: all-zero input
        inputs = [(rng.standard_normal(d["shape"]) * scale).astype(d["dtype"]) for d in ref.get_input_details()]
        # the hybrid (dynamic-range) LSTM re-quantizes its states every step: 1e-4 (see test_rnn.py)
        _check(invoke_both(ours, ref, inputs), 1e-4 if "dynamic_range" in name else 1e-5)


def test_growing_loop():
    ours, ref = _pair("tf_growing_loop")
    rng = np.random.default_rng(1)
    for n in (4, 0, 1, 9, 2):  # the loop tensor grows to n + 1 rows; n = 0 never enters the body
        x = rng.standard_normal((1, 3)).astype(np.float32)
        outs = invoke_both(ours, ref, [x, np.array(n, np.int32)])
        assert outs[0][0].shape == (n + 1, 3)
        _check(outs)


def test_cond_in_loop():
    ours, ref = _pair("tf_cond_in_loop")
    rng = np.random.default_rng(2)
    for _ in range(4):
        _check(invoke_both(ours, ref, [rng.standard_normal(4).astype(np.float32)]))


def test_stateful_counter_with_call_once():
    """tf.Variables become resource variables initialised by a CALL_ONCE subgraph; the state carries over invokes
    and (as in the official runtime) reset_all_variables() leaves resource variables alone."""
    ours, ref = _pair("tf_stateful_counter")
    rng = np.random.default_rng(3)
    for k in range(5):
        if k == 3:
            ours.reset_all_variables()
            ref.reset_all_variables()
        _check(invoke_both(ours, ref, [rng.standard_normal(3).astype(np.float32)]))
