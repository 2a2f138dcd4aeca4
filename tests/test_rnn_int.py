"""Fully integer UNIDIRECTIONAL_SEQUENCE_LSTM (int8 activations, int16 cell state, 5 intermediates) against the
official runtime, bit-exact: models built in code over CIFG, peephole, projection with / without bias, layer norm,
cell / projection clipping, both time layouts, batch 1 and > 1; the converter's full-integer tf_keras model; the
state carried over invokes and reset_all_variables; errors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import model_path

import lite_numba
from lite_numba.builder import ModelBuilder
from lite_numba.format.model import load_model
from lite_numba.testing import official_interpreter, require_official

require_official()

GATES = ("input", "forget", "cell", "output")
WEIGHT_ORDER = (
    [f"input_to_{g}_weights" for g in GATES] + [f"recurrent_to_{g}_weights" for g in GATES]
    + [f"cell_to_{g}_weights" for g in ("input", "forget", "output")] + [f"{g}_gate_bias" for g in GATES]
    + ["projection_weights", "projection_bias"])


def _q(rng, shape, scale, dtype):
    """Random float values N(0, scale) quantized symmetrically to dtype: (values, quantization scale)."""
    lim = np.iinfo(dtype).max
    f = rng.standard_normal(shape) * scale
    s = max(float(np.abs(f).max()), 1e-3) / lim
    return np.clip(np.round(f / s), -lim, lim).astype(dtype), s


def int_lstm_model(rng, *, batch, time, n_input, n_cell, n_output=None, cifg=False, peephole=False, proj=None,
                   layer_norm=False, time_major=False, cell_clip=0.0, proj_clip=0.0, cell_log2=-11,
                   n_inputs=24, intermediates=5, per_channel=False, peep_scale=1.0, small_peephole=False,
                   in_scale=None, hid_scale=None):
    """An integer LSTM like the converter's: int8 input / output / output state, int16 cell state (scale
    2^cell_log2), int8 weights, int32 biases, int16 peepholes and layer norm. proj: None (no projection), False
    (projection without bias) or True; peep_scale multiplies the peephole weights' scale, small_peephole makes
    them small integers (frequent rounding ties in their rescale); in_scale / hid_scale replace the input's and the
    hidden intermediate's random scales. Returns (model bytes, input shape)."""
    n_output = n_cell if proj is None else (n_output or n_cell)
    b = ModelBuilder()
    random_in_scale, in_zp = 0.02 + 0.03 * rng.random(), int(rng.integers(-20, 21))
    h_scale, h_zp = 1 / 128 * (0.8 + 0.4 * rng.random()), int(rng.integers(-10, 11))
    random_hid_scale, hid_zp = 1 / 128 * (0.8 + 0.4 * rng.random()), int(rng.integers(-10, 11))
    in_scale = random_in_scale if in_scale is None else in_scale
    hid_scale = random_hid_scale if hid_scale is None else hid_scale
    shape = (time, batch, n_input) if time_major else (batch, time, n_input)
    x = b.add_input("x", np.int8, list(shape), quant=(in_scale, in_zp))
    ins = {}
    gate_scale = {}
    ln_scale = {}
    for g in GATES:
        if cifg and g == "input":
            continue
        wx, sx = _q(rng, (n_cell, n_input), 0.5, np.int8)
        wh, sh = _q(rng, (n_cell, n_output), 0.5, np.int8)
        quant_x = {"scales": [sx] * n_cell, "zero_points": [0] * n_cell} if per_channel else (sx, 0)
        ins[f"input_to_{g}_weights"] = b.add_const(f"wx_{g}", wx, quant=quant_x)
        ins[f"recurrent_to_{g}_weights"] = b.add_const(f"wh_{g}", wh, quant=(sh, 0))
        bias = rng.standard_normal(n_cell) * 0.3
        if layer_norm:
            ln, ls = _q(rng, (n_cell,), 0.2, np.int16)
            ln = np.clip(ln.astype(np.int32) + int(1.0 / ls), -32767, 32767).astype(np.int16)  # coefficients ~ 1
            ln_scale[g] = ls
            ins[f"{g}_layer_norm_coefficients"] = b.add_const(f"ln_{g}", ln, quant=(ls, 0))
            bs = ls * 2.0 ** -10
            gate_scale[g] = 2.0 ** -12 * (0.5 + rng.random())  # the pre-norm scale (intermediate g)
        else:
            bs = sx * in_scale
        ins[f"{g}_gate_bias"] = b.add_const(f"b_{g}", np.clip(np.round(bias / bs), -2 ** 31, 2 ** 31 - 1)
                                            .astype(np.int32), quant=(bs, 0))
    if peephole:
        for g in ("input", "forget", "output"):
            if cifg and g == "input":
                continue
            if small_peephole:  # small integers: the rescaled products are small and hit rounding ties
                wc, sc = rng.integers(-6, 7, n_cell).astype(np.int16), 0.5 / 6
            else:
                wc, sc = _q(rng, (n_cell,), 0.5, np.int16)
            ins[f"cell_to_{g}_weights"] = b.add_const(f"wc_{g}", wc, quant=(sc * peep_scale, 0))
    if proj is not None:
        wp, sp = _q(rng, (n_output, n_cell), 0.5, np.int8)
        ins["projection_weights"] = b.add_const("wp", wp, quant=(sp, 0))
        if proj:
            bps = sp * hid_scale
            ins["projection_bias"] = b.add_const("bp", np.round(rng.standard_normal(n_output) * 0.2 / bps)
                                                 .astype(np.int32), quant=(bps, 0))
    h = b.add_tensor("h", np.int8, [batch, n_output], quant=(h_scale, h_zp), is_variable=True)
    c = b.add_tensor("c", np.int16, [batch, n_cell], quant=(2.0 ** cell_log2, 0), is_variable=True)
    inputs = [x] + [ins.get(n, -1) for n in WEIGHT_ORDER] + [h, c]
    if n_inputs == 24:
        inputs += [ins.get(f"{g}_layer_norm_coefficients", -1) for g in GATES]
    y = b.add_tensor("y", np.int8, list(shape[:2]) + [n_output], quant=(h_scale, h_zp))
    inter = []
    for g in GATES[:intermediates]:
        if layer_norm:
            inter.append(b.add_tensor(f"{g}_intermediate", np.int16, [0], quant=(gate_scale.get(g, 2.0 ** -12), 0)))
        else:
            inter.append(b.add_tensor(f"{g}_intermediate", np.float32, [0]))
    if intermediates == 5:
        inter.append(b.add_tensor("hidden_intermediate", np.int8, [0], quant=(hid_scale, hid_zp)))
    b.add_op("UNIDIRECTIONAL_SEQUENCE_LSTM", inputs, [y], intermediates=inter,
             options={"fused_activation_function": "TANH", "cell_clip": cell_clip, "proj_clip": proj_clip,
                      "time_major": time_major})
    b.mark_output(y)
    return b.build(), shape


def run_both(data: bytes, steps, reset_before=()):
    """[(ours, ref)] outputs of each invoke; the state carries over, reset_all_variables() before reset_before."""
    ours = lite_numba.Interpreter(model_content=data)
    ours.allocate_tensors()
    ref = official_interpreter(data)
    results = []
    for k, x in enumerate(steps):
        if k in reset_before:
            ours.reset_all_variables()
            ref.reset_all_variables()
        for it in (ours, ref):
            it.set_tensor(it.get_input_details()[0]["index"], x)
            it.invoke()
        results.append((ours.get_tensor(ours.get_output_details()[0]["index"]).copy(),
                        ref.get_tensor(ref.get_output_details()[0]["index"]).copy()))
    return results


def check_exact(data, shape, rng, n_steps=3):
    steps = [rng.integers(-128, 128, shape, dtype=np.int8) for _ in range(n_steps)]
    for k, (o, r) in enumerate(run_both(data, steps, reset_before=(n_steps - 1,))):
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
        for it in (ours, ref):
            it.set_tensor(it.get_input_details()[0]["index"], x)
            it.invoke()
        np.testing.assert_array_equal(ours.get_tensor(ours.get_output_details()[0]["index"]),
                                      ref.get_tensor(ref.get_output_details()[0]["index"]))


def _expect_error(data, match):
    it = lite_numba.Interpreter(model_content=data)
    with pytest.raises((ValueError, RuntimeError), match=match):
        it.allocate_tensors()
        it.invoke()


def test_int_lstm_errors():
    rng = np.random.default_rng(9)
    base = dict(batch=1, time=2, n_input=3, n_cell=4)
    data, _ = int_lstm_model(rng, **base, intermediates=3)
    _expect_error(data, "UNIDIRECTIONAL_SEQUENCE_LSTM.*5 intermediate tensors")
    data, _ = int_lstm_model(rng, **base, cell_log2=-16, cifg=True)
    _expect_error(data, "UNIDIRECTIONAL_SEQUENCE_LSTM.*cell_state scale 2\\^-16 with CIFG")
    data, _ = int_lstm_model(rng, **base, cell_log2=-31)
    _expect_error(data, "UNIDIRECTIONAL_SEQUENCE_LSTM.*cell_state scale 2\\^-31 is out of range")
    data, _ = int_lstm_model(rng, **base, per_channel=True)
    _expect_error(data, "UNIDIRECTIONAL_SEQUENCE_LSTM.*input_to_.*per-tensor")
    data, _ = int_lstm_model(rng, **base, n_output=6, proj=True, peephole=True)
    _expect_error(data, "UNIDIRECTIONAL_SEQUENCE_LSTM.*peephole with n_output")
