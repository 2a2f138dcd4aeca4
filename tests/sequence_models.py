"""Sequence-op models (UNIDIRECTIONAL_SEQUENCE_LSTM float, hybrid and integer) and their weights, shared by
test_rnn, test_rnn_int, test_bidir_hybrid, test_svdf_quant and test_fuzz_regressions. Not a test file.

An LSTM direction's constant tensors are a dict name -> array (None when absent), the names of TFLite's LSTM
inputs (input_to_forget_weights, cell_to_output_weights, projection_bias, ...); WEIGHT_ORDER is their order among
the op's inputs.
"""

from __future__ import annotations

import numpy as np
import pytest

import lite_numba
from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close, run_both_steps

GATES = ("input", "forget", "cell", "output")
WEIGHT_ORDER = (
    [f"input_to_{g}_weights" for g in GATES] + [f"recurrent_to_{g}_weights" for g in GATES]
    + [f"cell_to_{g}_weights" for g in ("input", "forget", "output")] + [f"{g}_gate_bias" for g in GATES]
    + ["projection_weights", "projection_bias"])
BIDIR_AUX = [f"aux_input_to_{g}_weights" for g in GATES]


def check_sequence(data, steps, reset_before=(), tol=1e-5):
    """Invoke both runtimes on each input list of `steps` (state carried over, reset before the steps listed in
    reset_before); every output of every step within assert_close(tol)."""
    for step in run_both_steps(data, steps, reset_before):
        for o, r in step:
            assert_close(o, r, tol)


def expect_error(data, match):
    """Allocating and invoking the model in lite-numba raises a ValueError or RuntimeError matching `match` (the
    Interpreter itself must build)."""
    it = lite_numba.Interpreter(model_content=data)
    with pytest.raises((ValueError, RuntimeError), match=match):
        it.allocate_tensors()
        it.invoke()


def rnd(rng, shape, scale=0.5):
    """Normal float32 values of standard deviation `scale`."""
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def lstm_weights(rng, n_input, n_cell, n_output, *, cifg=False, peephole=False, proj=False, proj_bias=False,
                 layer_norm=False, diag=False, n_aux=0, prefix=""):
    """A dict name -> array (None when absent) of one LSTM direction's constant tensors."""
    w = {}
    for g in GATES:
        absent = cifg and g == "input"
        w[f"input_to_{g}_weights"] = None if absent else rnd(rng, (n_cell, n_input))
        w[f"recurrent_to_{g}_weights"] = None if absent else (
            rnd(rng, (n_cell,)) if diag else rnd(rng, (n_cell, n_output)))
        w[f"{g}_gate_bias"] = None if absent else rnd(rng, (n_cell,), 0.3)
        w[f"{g}_layer_norm_coefficients"] = None if absent or not layer_norm else 1 + rnd(rng, (n_cell,), 0.2)
        w[f"aux_input_to_{g}_weights"] = None if absent or not n_aux else rnd(rng, (n_cell, n_aux))
    for g in ("input", "forget", "output"):
        w[f"cell_to_{g}_weights"] = None if not peephole or (cifg and g == "input") else rnd(rng, (n_cell,))
    w["projection_weights"] = rnd(rng, (n_output, n_cell)) if proj else None
    w["projection_bias"] = rnd(rng, (n_output,), 0.3) if proj and proj_bias else None
    return w


def add_consts(b, w, names, prefix, quants=None):
    """Add w[name] as a constant (quants[name] its quantization) for each name, -1 for an absent one; their ids."""
    quants = quants or {}
    return [-1 if w[n] is None else b.add_const(prefix + n, w[n], quant=quants.get(n)) for n in names]


def uni_lstm_model(x_shape, w, n_output, n_cell, *, time_major=False, act="TANH", cell_clip=0.0, proj_clip=0.0,
                   layer_norm=False, n_inputs=24, version=1, diag=False, const_state_shape=None, quants=None,
                   asymmetric=False):
    """A one-op float or hybrid (int8 weights, `quants`) UNIDIRECTIONAL_SEQUENCE_LSTM with variable states h, c."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, list(x_shape))
    batch = x_shape[1] if time_major else x_shape[0]
    ins = [x] + add_consts(b, w, WEIGHT_ORDER, "", quants)
    h = b.add_tensor("h", np.float32, const_state_shape or [batch, n_output], is_variable=True)
    c = b.add_tensor("c", np.float32, [batch, n_cell], is_variable=True)
    ins += [h, c]
    if n_inputs == 24:
        ins += add_consts(b, w, [f"{g}_layer_norm_coefficients" for g in GATES], "") if layer_norm else [-1] * 4
    y = b.add_tensor("y", np.float32, list(x_shape[:2]) + [n_output])
    b.add_op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y], version=version,
             options={"fused_activation_function": act, "cell_clip": cell_clip, "proj_clip": proj_clip,
                      "time_major": time_major, "diagonal_recurrent_tensors": diag,
                      "asymmetric_quantize_inputs": asymmetric})
    b.mark_output(y)
    return b.build()


def quantize_weights(w):
    """Hybrid LSTM weights: every *_weights matrix (and peephole vector) int8 with one symmetric scale."""
    q, quants = dict(w), {}
    for name, a in w.items():
        if a is None or not name.endswith("weights"):
            continue
        scale = float(np.abs(a).max()) / 127 or 1.0
        q[name] = np.clip(np.round(a / scale), -127, 127).astype(np.int8)
        quants[name] = (scale, 0)
    return q, quants


# --- the integer LSTM -------------------------------------------------------------------------------------------------


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
