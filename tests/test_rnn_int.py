"""Fully integer UNIDIRECTIONAL_SEQUENCE_LSTM (int8 activations, int16 cell state, 5 intermediates) against the
official runtime, bit-exact: models built in code over CIFG, peephole, projection with / without bias, layer norm,
cell / projection clipping, both time layouts, batch 1 and > 1; the converter's full-integer tf_keras model; the
state carried over invokes and reset_all_variables; errors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import model_path
from sequence_models import expect_error, int_lstm_model

import lite_numba
from lite_numba.format.model import load_model
from lite_numba.testing import invoke_both, official_interpreter, require_official, run_both_steps

require_official()


def check_exact(data, shape, rng, n_steps=3):
    steps = [rng.integers(-128, 128, shape, dtype=np.int8) for _ in range(n_steps)]
    for k, ((o, r),) in enumerate(run_both_steps(data, [[x] for x in steps], reset_before=(n_steps - 1,))):
        assert o.dtype == r.dtype == np.int8
        np.testing.assert_array_equal(o, r, err_msg=f"invoke {k}")


CONFIGS = {
    "plain": dict(batch=1, time=4, n_input=3, n_cell=5),
    "batch3": dict(batch=3, time=3, n_input=4, n_cell=6),
    "time_major_batch2": dict(batch=2, time=4, n_input=3, n_cell=4, time_major=True),
    "cifg": dict(batch=2, time=3, n_input=5, n_cell=4, cifg=True),
    "peephole": dict(batch=2, time=3, n_input=3, n_cell=6, peephole=True),
    "peephole_cifg_time_major": dict(batch=3, time=2, n_input=2, n_cell=5, peephole=True, cifg=True,
                                     time_major=True),
    "proj_bias": dict(batch=2, time=3, n_input=4, n_cell=6, n_output=3, proj=True),
    "proj_no_bias_clip": dict(batch=1, time=5, n_input=3, n_cell=5, n_output=7, proj=False, proj_clip=0.3),
    "peephole_proj_time_major": dict(batch=3, time=2, n_input=3, n_cell=7, n_output=4, proj=True, peephole=True,
                                     time_major=True),
    "layer_norm": dict(batch=2, time=3, n_input=4, n_cell=8, layer_norm=True),
    "layer_norm_cifg_peephole": dict(batch=1, time=4, n_input=3, n_cell=5, layer_norm=True, cifg=True,
                                     peephole=True),
    "layer_norm_all_time_major": dict(batch=2, time=3, n_input=5, n_cell=6, n_output=4, layer_norm=True,
                                      peephole=True, proj=True, cell_clip=1.5, proj_clip=0.5, time_major=True),
    "cell_clip_log2_14": dict(batch=2, time=4, n_input=4, n_cell=5, cell_clip=2.0, cell_log2=-14),
    "cell_log2_9_20_inputs": dict(batch=1, time=3, n_input=6, n_cell=4, cell_log2=-9, n_inputs=20),
    # 15 + cell_log2 outside 0..6: TFLite's integer tanh writes nothing and the input gate stands in for it
    # n_output >= 16: TFLite's NEON peephole product rescales blocks of 16 with its vector rounding (half up)
    "peephole_wide_neon_blocks": dict(batch=2, time=3, n_input=3, n_cell=21, peephole=True, small_peephole=True,
                                      peep_scale=0.25),
    "peephole_wide_neon_blocks_time_major": dict(batch=2, time=3, n_input=3, n_cell=33, n_output=17, proj=True,
                                                 peephole=True, small_peephole=True, time_major=True),
    "cell_log2_16_no_tanh": dict(batch=2, time=3, n_input=3, n_cell=5, cell_log2=-16),
    "cell_log2_7_no_tanh_time_major": dict(batch=2, time=3, n_input=3, n_cell=4, n_output=3, cell_log2=-7,
                                           proj=True, time_major=True),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("seed", [0, 1])
def test_int_lstm(name, seed):
    rng = np.random.default_rng(seed * 1000 + sorted(CONFIGS).index(name))
    data, shape = int_lstm_model(rng, **CONFIGS[name])
    check_exact(data, shape, rng)


def test_int_lstm_layer_norm_wide_bias():
    """Layer-norm coefficients of tiny scale give gate biases near the int32 limits: TFLite computes
    rescaled * coefficient + bias in 64 bits (no int32 wrap)."""
    data, shape = int_lstm_model(np.random.default_rng(46), batch=2, time=3, n_input=3, n_cell=2, layer_norm=True)
    plan = load_model(data).subgraphs[0]
    assert max(int(np.abs(np.asarray(t.data, np.int64)).max()) for t in plan.tensors if t.name.startswith("b_")) \
        >= 2 ** 31 - 1
    check_exact(data, shape, np.random.default_rng(1046), n_steps=2)


def test_int_lstm_random_configs():
    """A deterministic sweep over the configuration space (sizes, every flag, cell scales)."""
    rng = np.random.default_rng(123)
    for _ in range(12):
        cfg = dict(batch=int(rng.integers(1, 4)), time=int(rng.integers(1, 5)), n_input=int(rng.integers(1, 9)),
                   n_cell=int(rng.integers(1, 10)), cifg=bool(rng.integers(2)), peephole=bool(rng.integers(2)),
                   layer_norm=bool(rng.integers(2)), time_major=bool(rng.integers(2)),
                   proj=[None, False, True][int(rng.integers(3))], cell_log2=int(rng.integers(-16, -8)),
                   cell_clip=[0.0, 1.0][int(rng.integers(2))], proj_clip=[0.0, 0.4][int(rng.integers(2))])
        if cfg["cifg"] and cfg["cell_log2"] < -15:
            cfg["cell_log2"] = -15
        n_out = int(rng.integers(1, 10))
        cfg["n_output"] = min(n_out, cfg["n_cell"]) if cfg["peephole"] else n_out
        data, shape = int_lstm_model(rng, **cfg)
        check_exact(data, shape, rng, n_steps=2)


@pytest.mark.parametrize("name", ["tfkeras_lstm_int8", "tfkeras_lstm_int8_stacked"])
def test_int_lstm_converter_model(name):
    """tf_keras models with full integer quantization (scripts/gen_keras_rnn_models.py): QUANTIZE, integer LSTM(s),
    FULLY_CONNECTED, DEQUANTIZE; the float output must equal the official one exactly. The stacked model's second
    LSTM has a cell scale of 2^-16 (outside TFLite's integer tanh: see rnn_int.py)."""
    path = str(model_path(name))
    ours = lite_numba.Interpreter(model_path=path)
    ours.allocate_tensors()
    ref = official_interpreter(path)
    rng = np.random.default_rng(8)
    d = ref.get_input_details()[0]
    for scale in (1.0, 3.0, 0.0, 1.0):
        x = (rng.standard_normal(d["shape"]) * scale).astype(np.float32)
        (o,), (r,) = invoke_both(ours, ref, [x])
        np.testing.assert_array_equal(o, r)


def test_int_lstm_errors():
    rng = np.random.default_rng(9)
    base = dict(batch=1, time=2, n_input=3, n_cell=4)
    data, _ = int_lstm_model(rng, **base, intermediates=3)
    expect_error(data, "UNIDIRECTIONAL_SEQUENCE_LSTM.*5 intermediate tensors")
    data, _ = int_lstm_model(rng, **base, cell_log2=-16, cifg=True)
    expect_error(data, "UNIDIRECTIONAL_SEQUENCE_LSTM.*cell_state scale 2\\^-16 with CIFG")
    data, _ = int_lstm_model(rng, **base, cell_log2=-31)
    expect_error(data, "UNIDIRECTIONAL_SEQUENCE_LSTM.*cell_state scale 2\\^-31 is out of range")
    data, _ = int_lstm_model(rng, **base, per_channel=True)
    expect_error(data, "UNIDIRECTIONAL_SEQUENCE_LSTM.*input_to_.*per-tensor")
    data, _ = int_lstm_model(rng, **base, n_output=6, proj=True, peephole=True)
    expect_error(data, "UNIDIRECTIONAL_SEQUENCE_LSTM.*peephole with n_output")
