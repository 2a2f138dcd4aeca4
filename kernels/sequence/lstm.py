"""UNIDIRECTIONAL_SEQUENCE_LSTM and BIDIRECTIONAL_SEQUENCE_LSTM (the RNN ops are in rnn.py, SVDF in svdf.py, their
shared building blocks in cell.py).

Float32, and hybrid (float activations, int8 weights: what dynamic-range quantization emits) for every op; the
fully integer (int8 activations / int16 cell) UNIDIRECTIONAL_SEQUENCE_LSTM is in rnn_int.py, the integer and hybrid
SVDF in svdf.py. The maths follows
TFLite's float paths (lstm_eval.cc EvalFloat / LstmStepFloat, kernel_utils RnnBatchStep, svdf EvalFloat) in float32,
and its hybrid paths (LstmStepHybrid, hybrid RnnBatchStep: per step and batch row the input and state are quantized
to int8 by BatchQuantizeFloats, with the NEON rounding of the official x86 build (quantize_rows), products accumulate
in int32 and are scaled back to float). tanh and the logistic are the official build's Eigen functions bit for bit
(tanh_f32, sigmoid_f32 below): the hybrid ops re-quantize activated states every step, where a last-bit difference
would move int8 values. Per step:

- LSTM gate: g = act(W_x x + W_aux aux + W_h h (+ w_c .* c) + bias), accumulated in that order (bias first), or
  with layer norm: g = act(ln .* normalize(W_x x + W_aux aux + W_h h (+ w_c .* c)) + bias);
  input/forget/output gates use sigmoid, the cell gate the fused activation. CIFG (no input gate): i = 1 - f.
  Peepholes of the input and forget gates read the old cell state, the output gate's the updated one.
  c = f .* c + g .* i, clipped to [-cell_clip, cell_clip] when cell_clip > 0;
  h = o .* act(c), or with projection h = clip(P (o .* act(c)) + p_bias, proj_clip). Both clips map a NaN to +clip,
  as the official CwiseClipping does (_clip).
- RNN step: h = act(bias + W x + R h).

The recurrent state tensors (LSTM output/cell state, RNN hidden state, SVDF activation state) are *variable* inputs
of the node: the kernels update them in place, so they carry over between invokes (the executor keeps variable
tensors in their own arena slots; Interpreter.reset_all_variables() zeroes them).

Every LSTM configuration (CIFG, peephole, layer norm, projection, diagonal recurrent weights, aux input, either
time layout, forward or backward) runs in one compiled function: absent tensors are passed as empty arrays and
the configuration as an int64 parameter vector, so the whole family costs one signature.
"""

from __future__ import annotations

import functools

import numpy as np
from lite_numba.kernels.base.activation import ACT_NONE, ACT_TANH
from lite_numba.kernels.base.hybrid_quant import quantize_rows, refuse_minus_128
from lite_numba.kernels.base.vecmath import sigmoid_f32, tanh_f32
from lite_numba.kernels.sequence.cell import (
    EMPTY_I8,
    activate,
    bidirectional_start,
    cell_activation,
    dot,
    flat,
    hybrid_product,
    is_zero_span,
    sequence_dims,
    sequence_step,
    step_is_zero,
    step_rows,
    t_i8,
)
from lite_numba.kernels.sequence.lstm_gemm import schedule_lstm_gemm
from lite_numba.kernels.sequence.rnn_int import prepare_lstm_integer
from numba import njit

from lite_numba.ops import PrepareContext, kernel

# fused activations as TFLite's ApplyActivationToVector takes them (kTfLiteActSigmoid = 6 is internal)
_ACT_SIGMOID = 6


# LSTM parameter vector layout (int64)
(_P_BATCH, _P_TIME, _P_INPUT, _P_AUX, _P_CELL, _P_OUTPUT, _P_TIME_MAJOR, _P_FORWARD, _P_OUT_OFFSET, _P_OUT_LEAD,
 _P_STATE_LEAD, _P_CIFG, _P_PEEPHOLE, _P_LAYER_NORM, _P_PROJ, _P_PROJ_BIAS, _P_DIAG, _P_ACT) = range(18)


_P_SIZE = 18


@njit(cache=True, inline="always")
def _activate_run(src, so, dst, do, n, code):
    """dst[do + j] = act(src[so + j]) for j < n: one loop per activation (the branch hoisted) so that each
    vectorizes; src and dst may be the same array."""
    s = src[so:so + n]
    d = dst[do:do + n]
    if code == _ACT_SIGMOID:
        for j in range(n):
            d[j] = sigmoid_f32(s[j])
    elif code == ACT_TANH:
        for j in range(n):
            d[j] = tanh_f32(s[j])
    else:
        for j in range(n):
            d[j] = activate(s[j], code)


@njit(cache=True, inline="always")
def _norm_activate(buf, src, dst, n_cell, use_ln, ln, bias, act):
    """The end of a gate: with layer norm, buf[src:] gets MeanStddevNormalization, then the coefficients, then the
    bias; then buf[dst:] = act(buf[src:]) (activation NONE writes nothing, as TFLite's ApplyActivationToVector)."""
    if use_ln:
        s = np.float32(0.0)
        for j in range(n_cell):
            s += buf[src + j]
        mean = s / np.float32(n_cell)
        sq = np.float32(0.0)
        for j in range(n_cell):
            d = buf[src + j] - mean
            sq += d * d
        var = sq / np.float32(n_cell)
        inv = np.float32(1.0) / np.sqrt(var + np.float32(1e-8))
        for j in range(n_cell):
            buf[src + j] = (buf[src + j] - mean) * inv * ln[j] + bias[j]
    if act != ACT_NONE:
        _activate_run(buf, src, buf, dst, n_cell, act)


@njit(cache=True, nogil=True)
def _lstm_gate(x, xo, n_in, x_zero, w_x, aux, ao, n_aux, aux_zero, w_a, h, ho, n_out, w_h, diag, c, co, use_peep,
               w_c, use_ln, ln, bias, n_cell, act, buf, go, acc_off):
    """buf[go:go + n_cell] = one LSTM gate of one batch row (see the module docstring).

    Follows TFLite's CalculateLstmGateFloat buffer by buffer: the gate buffer starts as the bias (zeros with layer
    norm), each matrix product writes `product + accumulator` into the other of (gate, acc_off) buffers and they
    swap; the pre-activation ends in whichever buffer is current. Activation NONE writes nothing (as TFLite's
    ApplyActivationToVector), so the gate then keeps that buffer's last contents; a step whose input (aux input)
    is all zeros skips that product (x_zero, aux_zero)."""
    acc_b = go
    out_b = acc_off
    for j in range(n_cell):
        buf[go + j] = np.float32(0.0) if use_ln else bias[j]
    if not x_zero:
        for j in range(n_cell):
            buf[out_b + j] = dot(w_x, j * n_in, x, xo, n_in) + buf[acc_b + j]
        acc_b, out_b = out_b, acc_b
    if n_aux > 0 and not aux_zero:
        for j in range(n_cell):
            buf[out_b + j] = dot(w_a, j * n_aux, aux, ao, n_aux) + buf[acc_b + j]
        acc_b, out_b = out_b, acc_b
    if diag:
        for j in range(n_cell):
            buf[acc_b + j] += w_h[j] * h[ho + j]
        acc_b, out_b = out_b, acc_b
    else:
        for j in range(n_cell):
            buf[out_b + j] = dot(w_h, j * n_out, h, ho, n_out) + buf[acc_b + j]
    if use_peep:
        for j in range(n_cell):
            buf[out_b + j] += w_c[j] * c[co + j]
    _norm_activate(buf, out_b, go, n_cell, use_ln, ln, bias, act)


@njit(cache=True, inline="always")
def _clip(v, clip):
    """v clipped to [-clip, clip] as TFLite's CwiseClipping does it, max(min(clip, v), -clip) with the C++ std::min
    and std::max: a NaN becomes +clip (std::min(clip, NaN) returns clip), where Python's min/max would keep it."""
    m = v if v < clip else clip
    return -clip if m < -clip else m


@njit(cache=True, inline="always")
def _update_cell(scratch, gi, gf, gc, c, co, n_cell, cifg, cell_clip):
    """c = forget * c + cell gate * input gate (1 - forget with CIFG), clipped to +-cell_clip when it is > 0."""
    one = np.float32(1.0)
    for j in range(n_cell):
        v = scratch[gf + j] * c[co + j]
        i_gate = one - scratch[gf + j] if cifg else scratch[gi + j]
        v += scratch[gc + j] * i_gate
        if cell_clip > 0:
            v = _clip(v, cell_clip)
        c[co + j] = v


@njit(cache=True, nogil=True)
def _lstm_step(x, xo, x_zero, aux, ao, aux_zero, w_xi, w_xf, w_xc, w_xo, w_ai, w_af, w_ac, w_ao, w_hi, w_hf, w_hc,
               w_ho, w_ci, w_cf, w_co, ln_i, ln_f, ln_c, ln_o, b_i, b_f, b_c, b_o, w_p, b_p, h, ho, c, co, out, oo,
               scratch, p, cell_clip, proj_clip):
    """One time step of one batch row: updates c[co:], h[ho:] and writes out[oo:oo + n_output]."""
    n_in, n_aux, n_cell, n_out = p[_P_INPUT], p[_P_AUX], p[_P_CELL], p[_P_OUTPUT]
    cifg, peep, use_ln, act = p[_P_CIFG] != 0, p[_P_PEEPHOLE] != 0, p[_P_LAYER_NORM] != 0, p[_P_ACT]
    diag = p[_P_DIAG]
    gi, gf, gc, go, tmp, acc = 0, n_cell, 2 * n_cell, 3 * n_cell, 4 * n_cell, 5 * n_cell
    if not cifg:
        _lstm_gate(x, xo, n_in, x_zero, w_xi, aux, ao, n_aux, aux_zero, w_ai, h, ho, n_out, w_hi, (diag & 1) != 0,
                   c, co, peep, w_ci, use_ln, ln_i, b_i, n_cell, _ACT_SIGMOID, scratch, gi, acc)
    _lstm_gate(x, xo, n_in, x_zero, w_xf, aux, ao, n_aux, aux_zero, w_af, h, ho, n_out, w_hf, (diag & 2) != 0,
               c, co, peep, w_cf, use_ln, ln_f, b_f, n_cell, _ACT_SIGMOID, scratch, gf, acc)
    _lstm_gate(x, xo, n_in, x_zero, w_xc, aux, ao, n_aux, aux_zero, w_ac, h, ho, n_out, w_hc, (diag & 4) != 0,
               c, co, False, w_cf, use_ln, ln_c, b_c, n_cell, act, scratch, gc, acc)
    _update_cell(scratch, gi, gf, gc, c, co, n_cell, cifg, cell_clip)
    _lstm_gate(x, xo, n_in, x_zero, w_xo, aux, ao, n_aux, aux_zero, w_ao, h, ho, n_out, w_ho, (diag & 8) != 0,
               c, co, peep, w_co, use_ln, ln_o, b_o, n_cell, _ACT_SIGMOID, scratch, go, acc)
    # TFLite computes act(c) into the cell-gate buffer; activation NONE leaves the cell gate there
    if act != ACT_NONE:
        _activate_run(c, co, scratch, tmp, n_cell, act)
    else:
        for j in range(n_cell):
            scratch[tmp + j] = scratch[gc + j]
    for j in range(n_cell):
        scratch[tmp + j] = scratch[go + j] * scratch[tmp + j]
    if p[_P_PROJ] != 0:
        for k in range(n_out):
            v = b_p[k] if p[_P_PROJ_BIAS] != 0 else np.float32(0.0)
            v = dot(w_p, k * n_cell, scratch, tmp, n_cell) + v
            if proj_clip > 0:
                v = _clip(v, proj_clip)
            h[ho + k] = v
    else:
        for k in range(n_out):
            h[ho + k] = scratch[tmp + k]
    for k in range(n_out):
        out[oo + k] = h[ho + k]


@njit(cache=True, nogil=True)
def lstm_float(x, aux, w_xi, w_xf, w_xc, w_xo, w_ai, w_af, w_ac, w_ao, w_hi, w_hf, w_hc, w_ho,
               w_ci, w_cf, w_co, ln_i, ln_f, ln_c, ln_o, b_i, b_f, b_c, b_o, w_p, b_p, h, c, out, scratch, p, clips):
    """A float LSTM over a whole sequence (one direction). x, aux, out are the flat [T, B, .] (time major) or
    [B, T, .] arrays; h, c the flat states; p the int64 parameter vector (_P_*), clips = [cell_clip, proj_clip].

    Time major runs every batch row at step t before step t + 1 (the all-zero input test spans the whole step),
    batch major runs each row's whole sequence in turn, as TFLite does."""
    n_batch, max_time, n_in, n_aux, n_cell = p[_P_BATCH], p[_P_TIME], p[_P_INPUT], p[_P_AUX], p[_P_CELL]
    time_major, forward = p[_P_TIME_MAJOR] != 0, p[_P_FORWARD] != 0
    out_off, out_lead, state_lead = p[_P_OUT_OFFSET], p[_P_OUT_LEAD], p[_P_STATE_LEAD]
    cell_clip, proj_clip = clips[0], clips[1]
    for it in range(n_batch * max_time):
        b, t_rel, row = sequence_step(it, time_major, forward, max_time, n_batch)
        x_zero = step_is_zero(x, time_major, t_rel, row, n_batch, n_in)
        aux_zero = step_is_zero(aux, time_major, t_rel, row, n_batch, n_aux)
        _lstm_step(x, row * n_in, x_zero, aux, row * n_aux, aux_zero, w_xi, w_xf, w_xc, w_xo, w_ai, w_af, w_ac,
                   w_ao, w_hi, w_hf, w_hc, w_ho, w_ci, w_cf, w_co, ln_i, ln_f, ln_c, ln_o, b_i, b_f, b_c, b_o,
                   w_p, b_p, h, b * state_lead, c, b * n_cell, out, row * out_lead + out_off, scratch, p,
                   cell_clip, proj_clip)


@njit(cache=True, nogil=True)
def _hybrid_gate(gate, qx, x_sf, x_zp, xo, n_in, x_zero, qa, a_sf, a_zp, ao, n_aux, a_zero, qh, h_sf, h_zp, ho,
                 n_out, h_zero, b, w_x, w_a, w_h, w_c, scales, rowsums, rs_off, c, co, use_peep, use_ln, ln, bias,
                 n_cell, act, buf, go, asym, iacc):
    """One gate of one batch row (TFLite's CalculateLstmGateHybrid). gate: 0..3 = input, forget, cell, output;
    scales[gate], scales[4 + gate], scales[8 + gate] are the input, aux and recurrent weight scales, scales[12 + k]
    the peephole ones (k = 0, 1, 2 for input, forget, output)."""
    for j in range(n_cell):
        buf[go + j] = np.float32(0.0) if use_ln else bias[j]
    if not x_zero:
        hybrid_product(qx, x_sf, x_zp, xo, b, n_in, w_x, scales[gate], rowsums[rs_off[gate]:], asym, buf, go,
                        n_cell, iacc)
    if n_aux > 0 and not a_zero:
        hybrid_product(qa, a_sf, a_zp, ao, b, n_aux, w_a, scales[4 + gate], rowsums[rs_off[4 + gate]:], asym, buf,
                        go, n_cell, iacc)
    if not h_zero:
        hybrid_product(qh, h_sf, h_zp, ho, b, n_out, w_h, scales[8 + gate], rowsums[rs_off[8 + gate]:], asym, buf,
                        go, n_cell, iacc)
    if use_peep:
        ps = scales[12 + (gate if gate < 2 else 2)]
        for j in range(n_cell):
            buf[go + j] += (np.float32(w_c[j]) * ps) * c[co + j]
    _norm_activate(buf, go, go, n_cell, use_ln, ln, bias, act)


@njit(cache=True, nogil=True)
def lstm_hybrid(x, aux, w_xi, w_xf, w_xc, w_xo, w_ai, w_af, w_ac, w_ao, w_hi, w_hf, w_hc, w_ho, w_ci, w_cf, w_co,
                ln_i, ln_f, ln_c, ln_o, b_i, b_f, b_c, b_o, w_p, b_p, h, c, out, scratch, qx, qa, qh, qp, sf, zp,
                scales, rowsums, rs_off, p, clips):
    """A hybrid LSTM over a sequence (TFLite's EvalHybrid / LstmStepHybrid): per step, the input, aux input and
    output state rows are quantized to int8 (BatchQuantizeFloats, symmetric or asymmetric by p[_P_ASYM]), gates
    accumulate the int8 products scaled back to float, the rest is float as lstm_float. Time major steps all batch
    rows together (the all-zero tests span the step), batch major one row at a time.
    sf/zp hold 4 * n_batch entries: input, aux, output state, projection input."""
    n_batch, max_time, n_in, n_aux, n_cell = p[_P_BATCH], p[_P_TIME], p[_P_INPUT], p[_P_AUX], p[_P_CELL]
    n_out = p[_P_OUTPUT]
    time_major, forward = p[_P_TIME_MAJOR] != 0, p[_P_FORWARD] != 0
    out_off, out_lead, state_lead = p[_P_OUT_OFFSET], p[_P_OUT_LEAD], p[_P_STATE_LEAD]
    cifg, peep, use_ln, act = p[_P_CIFG] != 0, p[_P_PEEPHOLE] != 0, p[_P_LAYER_NORM] != 0, p[_P_ACT]
    asym = p[_P_SIZE] != 0
    cell_clip, proj_clip = clips[0], clips[1]
    x_sf, a_sf, h_sf, p_sf = sf[0:n_batch], sf[n_batch:2 * n_batch], sf[2 * n_batch:3 * n_batch], sf[3 * n_batch:]
    x_zp, a_zp, h_zp, p_zp = zp[0:n_batch], zp[n_batch:2 * n_batch], zp[2 * n_batch:3 * n_batch], zp[3 * n_batch:]
    iacc = zp[4 * n_batch:]  # int32 product scratch (max(n_cell, n_output))
    gi, gf, gc, go, tmp = 0, n_cell, 2 * n_cell, 3 * n_cell, 4 * n_cell
    groups = max_time if time_major else n_batch * max_time
    rows = n_batch if time_major else 1
    for gidx in range(groups):
        first_b, t, row0 = step_rows(gidx, time_major, forward, max_time, n_batch)
        x_zero = is_zero_span(x, row0 * n_in, rows * n_in)
        a_zero = n_aux == 0 or is_zero_span(aux, row0 * n_aux, rows * n_aux)
        h_zero = is_zero_span(h, first_b * state_lead, rows * n_out) if state_lead == n_out else False
        if not x_zero:
            quantize_rows(x[row0 * n_in:(row0 + rows) * n_in], rows, n_in, asym, qx, x_sf[first_b:], x_zp[first_b:])
        if not a_zero:
            quantize_rows(aux[row0 * n_aux:(row0 + rows) * n_aux], rows, n_aux, asym, qa, a_sf[first_b:],
                          a_zp[first_b:])
        if not h_zero:
            quantize_rows(h[first_b * n_out:(first_b + rows) * n_out], rows, n_out, asym, qh, h_sf[first_b:],
                          h_zp[first_b:])
        for r in range(rows):
            b = first_b + r
            row = row0 + r
            xo, ao, ho, co = r * n_in, r * n_aux, r * n_out, b * n_cell
            if not cifg:
                _hybrid_gate(0, qx, x_sf, x_zp, xo, n_in, x_zero, qa, a_sf, a_zp, ao, n_aux, a_zero, qh, h_sf, h_zp,
                             ho, n_out, h_zero, b, w_xi, w_ai, w_hi, w_ci, scales, rowsums, rs_off, c, co, peep,
                             use_ln, ln_i, b_i, n_cell, _ACT_SIGMOID, scratch, gi, asym, iacc)
            _hybrid_gate(1, qx, x_sf, x_zp, xo, n_in, x_zero, qa, a_sf, a_zp, ao, n_aux, a_zero, qh, h_sf, h_zp,
                         ho, n_out, h_zero, b, w_xf, w_af, w_hf, w_cf, scales, rowsums, rs_off, c, co, peep,
                         use_ln, ln_f, b_f, n_cell, _ACT_SIGMOID, scratch, gf, asym, iacc)
            _hybrid_gate(2, qx, x_sf, x_zp, xo, n_in, x_zero, qa, a_sf, a_zp, ao, n_aux, a_zero, qh, h_sf, h_zp,
                         ho, n_out, h_zero, b, w_xc, w_ac, w_hc, w_cf, scales, rowsums, rs_off, c, co, False,
                         use_ln, ln_c, b_c, n_cell, act, scratch, gc, asym, iacc)
            _update_cell(scratch, gi, gf, gc, c, co, n_cell, cifg, cell_clip)
            _hybrid_gate(3, qx, x_sf, x_zp, xo, n_in, x_zero, qa, a_sf, a_zp, ao, n_aux, a_zero, qh, h_sf, h_zp,
                         ho, n_out, h_zero, b, w_xo, w_ao, w_ho, w_co, scales, rowsums, rs_off, c, co, peep,
                         use_ln, ln_o, b_o, n_cell, _ACT_SIGMOID, scratch, go, asym, iacc)
            for j in range(n_cell):
                a = scratch[gc + j] if act == ACT_NONE else activate(c[co + j], act)
                scratch[tmp + j] = scratch[go + j] * a
            # the official IsZeroVector (NaNs in blocks of four count as zero) spans the step's whole batch; here one
            # row at a time, which is the same in batch-major order and for finite values
            all_zero = is_zero_span(scratch, tmp, n_cell)
            hb = b * state_lead
            if p[_P_PROJ] != 0:
                for k in range(n_out):
                    h[hb + k] = b_p[k] if p[_P_PROJ_BIAS] != 0 else np.float32(0.0)
                if not all_zero:
                    quantize_rows(scratch[tmp:tmp + n_cell], 1, n_cell, asym, qp, p_sf[b:], p_zp[b:])
                    hybrid_product(qp, p_sf, p_zp, 0, b, n_cell, w_p, scales[15], rowsums[rs_off[12]:], asym, h,
                                    hb, n_out, iacc)
                if proj_clip > 0:
                    for k in range(n_out):
                        h[hb + k] = _clip(h[hb + k], proj_clip)
            else:
                for k in range(n_out):
                    h[hb + k] = scratch[tmp + k]
            for k in range(n_out):
                out[row * out_lead + out_off + k] = h[hb + k]


def _check_float(ctx: PrepareContext, tensors: dict) -> None:
    for name, t in tensors.items():
        if t is None:
            continue
        if t.dtype != np.float32:
            ctx.fail(f"{name} has type {t.dtype.name}: only float32 is supported (no hybrid or quantized LSTM)")


_HYBRID_INT8 = ("weights",)  # names ending so hold int8 in a hybrid LSTM; biases and layer norms stay float32


def _check_hybrid(ctx: PrepareContext, tensors: dict) -> None:
    for name, t in tensors.items():
        if t is None:
            continue
        want = np.int8 if name.endswith("weights") else np.float32
        if t.dtype != want:
            ctx.fail(f"{name} has type {t.dtype.name}: a hybrid LSTM takes {np.dtype(want).name} here")
        if want == np.int8:
            ctx.check(t.data is not None, f"{name} must be constant in a hybrid LSTM")
            ctx.check(t.quantization.scales.size == 1, f"{name} must have one (per-tensor) scale")
            if "cell_to" not in name:  # the peepholes are multiplied in float
                refuse_minus_128(ctx, f"{name} {t.name!r}", t.data)


def _prepare_lstm_direction(ctx: PrepareContext, *, label: str, x, aux, weights: dict, state_h, state_c,
                            n_batch: int, max_time: int, n_input: int, time_major: bool, forward: bool,
                            allow_diag: bool, use_ln: bool, hybrid: bool = False) -> dict:
    """Validate one LSTM direction's tensors (TFLite's CheckInputTensorDimensions) and return its sizes and the
    argument list of lstm_float (without out/scratch). hybrid: the weight matrices (and peepholes) are int8."""
    w = weights
    pre = f"{label}" if label else ""
    if hybrid:
        _check_hybrid(ctx, {f"{pre}{k}": v for k, v in w.items()})
    else:
        _check_float(ctx, {f"{pre}{k}": v for k, v in w.items()})
    wxo = w["input_to_output_weights"]
    ctx.check(wxo is not None and wxo.ndim == 2,
              f"{pre}input_to_output_weights must be 2-D, got {None if wxo is None else list(wxo.shape)}")
    n_cell = wxo.shape[0]
    ctx.check(wxo.shape[1] == n_input, f"{pre}input_to_output_weights has depth {wxo.shape[1]}, input has {n_input}")
    who = w["recurrent_to_output_weights"]
    ctx.check(who is not None, f"{pre}recurrent_to_output_weights is required")
    diag = 0
    for bit, gate in enumerate(("input", "forget", "cell", "output")):
        wx = w[f"input_to_{gate}_weights"]
        wh = w[f"recurrent_to_{gate}_weights"]
        if gate == "input":
            ctx.check((wx is None) == (wh is None),
                      f"{pre}input_to_input_weights and recurrent_to_input_weights must be both present or absent")
            if wx is None:
                continue
        ctx.check(wx is not None and wh is not None, f"{pre}{gate} gate weights are required")
        ctx.check(wx.shape == (n_cell, n_input),
                  f"{pre}input_to_{gate}_weights has shape {list(wx.shape)}, expected {[n_cell, n_input]}")
        if wh.ndim == 1:
            ctx.check(allow_diag, f"{pre}recurrent_to_{gate}_weights is 1-D (diagonal) but this op takes 2-D")
            ctx.check(wh.shape[0] == n_cell,
                      f"{pre}recurrent_to_{gate}_weights has {wh.shape[0]} elements, expected {n_cell}")
            diag |= 1 << bit
        else:
            ctx.check(wh.ndim == 2 and wh.shape[0] == n_cell,
                      f"{pre}recurrent_to_{gate}_weights has shape {list(wh.shape)}, expected [{n_cell}, n_output]")
    n_output = who.shape[0] if who.ndim == 1 else who.shape[1]
    for gate in ("input", "forget", "cell", "output"):
        wh = w[f"recurrent_to_{gate}_weights"]
        if wh is not None and wh.ndim == 2:
            ctx.check(wh.shape[1] == n_output,
                      f"{pre}recurrent_to_{gate}_weights has shape {list(wh.shape)}, expected {[n_cell, n_output]}")
    ctx.check(diag == 0 or n_output == n_cell, f"{pre}diagonal recurrent weights need n_output == n_cell")
    cifg = w["input_to_input_weights"] is None
    peeps = [w["cell_to_input_weights"], w["cell_to_forget_weights"], w["cell_to_output_weights"]]
    for name, t in zip(("cell_to_input_weights", "cell_to_forget_weights", "cell_to_output_weights"), peeps):
        if t is not None:
            ctx.check(t.ndim == 1 and t.shape[0] == n_cell,
                      f"{pre}{name} has shape {list(t.shape)}, expected [{n_cell}]")
    peep = peeps[1] is not None
    ctx.check(((peeps[0] is not None or cifg) and peeps[1] is not None and peeps[2] is not None)
              or all(t is None for t in peeps), f"{pre}peephole weights must be all present or all absent")
    if cifg:
        ctx.check(w["input_gate_bias"] is None, f"{pre}input_gate_bias must be absent with CIFG (no input weights)")
    for gate in ("input", "forget", "cell", "output"):
        b = w[f"{gate}_gate_bias"]
        if gate == "input" and cifg:
            continue
        ctx.check(b is not None and b.ndim == 1 and b.shape[0] == n_cell,
                  f"{pre}{gate}_gate_bias must have shape [{n_cell}], got {None if b is None else list(b.shape)}")
    wp, bp = w["projection_weights"], w["projection_bias"]
    if wp is not None:
        ctx.check(wp.shape == (n_output, n_cell),
                  f"{pre}projection_weights has shape {list(wp.shape)}, expected {[n_output, n_cell]}")
    else:
        ctx.check(n_output == n_cell, f"{pre}without projection n_output ({n_output}) must equal n_cell ({n_cell})")
    if bp is not None:
        ctx.check(wp is not None, f"{pre}projection_bias without projection_weights")
        ctx.check(bp.shape == (n_output,), f"{pre}projection_bias has shape {list(bp.shape)}, expected [{n_output}]")
    lns = [w.get(f"{g}_layer_norm_coefficients") for g in ("input", "forget", "cell", "output")]
    if use_ln:
        for g, t in zip(("input", "forget", "cell", "output"), lns):
            if g == "input" and cifg:
                ctx.check(t is None, f"{pre}input_layer_norm_coefficients must be absent with CIFG")
                continue
            ctx.check(t is not None and t.shape == (n_cell,),
                      f"{pre}{g}_layer_norm_coefficients must have shape [{n_cell}]")
    n_aux = 0
    w_aux = [w.get(f"aux_input_to_{g}_weights") for g in ("input", "forget", "cell", "output")]
    if aux is not None and w_aux[1] is not None:
        n_aux = aux.shape[-1]
        for g, t in zip(("input", "forget", "cell", "output"), w_aux):
            if g == "input" and cifg:
                continue
            ctx.check(t is not None and t.shape == (n_cell, n_aux),
                      f"{pre}aux_input_to_{g}_weights must have shape {[n_cell, n_aux]}")
    else:
        w_aux = [None] * 4
    for name, st, n in ((f"{pre}output_state", state_h, n_output), (f"{pre}cell_state", state_c, n_cell)):
        ctx.check(st is not None, f"{name} (a variable tensor) is required")
        ctx.check(st.dtype == np.float32, f"{name} has type {st.dtype.name}, expected float32")
        ctx.check(st.size == n_batch * n,
                  f"{name} has {st.size} elements, expected batch {n_batch} x {n} = {n_batch * n}")
    return dict(n_cell=n_cell, n_output=n_output, n_aux=n_aux, cifg=cifg, peep=peep, diag=diag,
                proj=wp is not None, proj_bias=bp is not None, w=w, w_aux=w_aux, lns=lns)


def _schedule_lstm(ctx: PrepareContext, d: dict, x, aux, out, *, n_batch, max_time, n_input, time_major, forward,
                   out_offset, out_lead, state_lead, use_ln, act, cell_clip, proj_clip, state_h, state_c) -> None:
    if n_batch == 0 or max_time == 0 or d["n_cell"] == 0:
        return
    if schedule_lstm_gemm(ctx, d, x, out, n_batch=n_batch, max_time=max_time, n_input=n_input, time_major=time_major,
                          forward=forward, out_offset=out_offset, out_lead=out_lead, state_lead=state_lead,
                          use_ln=use_ln, act=act, cell_clip=cell_clip, proj_clip=proj_clip, state_h=state_h,
                          state_c=state_c):
        return  # the common configurations: the gates' products as GEMMs (lstm_gemm.py)
    p = np.zeros(_P_SIZE, np.int64)
    p[_P_BATCH], p[_P_TIME], p[_P_INPUT], p[_P_AUX] = n_batch, max_time, n_input, d["n_aux"]
    p[_P_CELL], p[_P_OUTPUT], p[_P_TIME_MAJOR], p[_P_FORWARD] = d["n_cell"], d["n_output"], time_major, forward
    p[_P_OUT_OFFSET], p[_P_OUT_LEAD], p[_P_STATE_LEAD] = out_offset, out_lead, state_lead
    p[_P_CIFG], p[_P_PEEPHOLE], p[_P_LAYER_NORM] = d["cifg"], d["peep"], use_ln
    p[_P_PROJ], p[_P_PROJ_BIAS], p[_P_DIAG], p[_P_ACT] = d["proj"], d["proj_bias"], d["diag"], act
    w = d["w"]
    gates = ("input", "forget", "cell", "output")
    scratch = ctx.temp((6 * d["n_cell"],), np.float32)
    args = [flat(ctx, x), flat(ctx, aux if d["n_aux"] else None)]
    args += [flat(ctx, w[f"input_to_{g}_weights"]) for g in gates]
    args += [flat(ctx, t) for t in d["w_aux"]]
    args += [flat(ctx, w[f"recurrent_to_{g}_weights"]) for g in gates]
    args += [flat(ctx, w[f"cell_to_{g}_weights"]) for g in ("input", "forget", "output")]
    args += [flat(ctx, t if use_ln else None) for t in d["lns"]]
    args += [flat(ctx, w[f"{g}_gate_bias"]) for g in gates]
    args += [flat(ctx, w["projection_weights"]), flat(ctx, w["projection_bias"])]
    args += [flat(ctx, state_h), flat(ctx, state_c), flat(ctx, out), scratch, p,
             np.array([cell_clip, proj_clip], np.float32)]
    ctx.call(lstm_float, *args)


def _flat_i8(ctx: PrepareContext, t):
    return ctx.const(EMPTY_I8) if t is None else ctx.view(t, (t.size,))


def _schedule_lstm_hybrid(ctx: PrepareContext, d: dict, x, aux, out, *, n_batch, max_time, n_input, time_major,
                          forward, out_offset, out_lead, state_lead, use_ln, act, cell_clip, proj_clip, state_h,
                          state_c, asymmetric) -> None:
    if n_batch == 0 or max_time == 0 or d["n_cell"] == 0:
        return
    n_cell, n_output, n_aux = d["n_cell"], d["n_output"], d["n_aux"]
    p = np.zeros(_P_SIZE + 1, np.int64)
    p[_P_BATCH], p[_P_TIME], p[_P_INPUT], p[_P_AUX] = n_batch, max_time, n_input, n_aux
    p[_P_CELL], p[_P_OUTPUT], p[_P_TIME_MAJOR], p[_P_FORWARD] = n_cell, n_output, time_major, forward
    p[_P_OUT_OFFSET], p[_P_OUT_LEAD], p[_P_STATE_LEAD] = out_offset, out_lead, state_lead
    p[_P_CIFG], p[_P_PEEPHOLE], p[_P_LAYER_NORM] = d["cifg"], d["peep"], use_ln
    p[_P_PROJ], p[_P_PROJ_BIAS], p[_P_DIAG], p[_P_ACT] = d["proj"], d["proj_bias"], 0, act
    p[_P_SIZE] = asymmetric
    w = d["w"]
    gates = ("input", "forget", "cell", "output")
    mats = ([w[f"input_to_{g}_weights"] for g in gates] + list(d["w_aux"])
            + [w[f"recurrent_to_{g}_weights"] for g in gates] + [w["projection_weights"]])
    peeps = [w[f"cell_to_{g}_weights"] for g in ("input", "forget", "output")]
    scales = np.zeros(16, np.float32)
    rs_off = np.zeros(13, np.int64)
    sums = []
    pos = 0
    for k, m in enumerate(mats):
        if m is None:
            continue
        scales[15 if k == 12 else k] = m.quantization.scales[0]
        rs = np.asarray(m.data, np.int8).reshape(m.shape[0], -1).astype(np.int32).sum(axis=1, dtype=np.int32)
        rs_off[k] = pos
        sums.append(rs)
        pos += rs.size
    for k, m in enumerate(peeps):
        if m is not None:
            scales[12 + k] = m.quantization.scales[0]
    rowsums = np.concatenate(sums).astype(np.int32) if sums else np.zeros(1, np.int32)
    rows = n_batch if time_major else 1
    args = [flat(ctx, x), flat(ctx, aux if n_aux else None)]
    args += [t_i8(ctx, w[f"input_to_{g}_weights"]) for g in gates]
    args += [t_i8(ctx, t) for t in d["w_aux"]]
    args += [t_i8(ctx, w[f"recurrent_to_{g}_weights"]) for g in gates]
    args += [_flat_i8(ctx, t) for t in peeps]
    args += [flat(ctx, t if use_ln else None) for t in d["lns"]]
    args += [flat(ctx, w[f"{g}_gate_bias"]) for g in gates]
    args += [t_i8(ctx, w["projection_weights"]), flat(ctx, w["projection_bias"])]
    args += [flat(ctx, state_h), flat(ctx, state_c), flat(ctx, out), ctx.temp((5 * n_cell,), np.float32),
             ctx.temp((max(rows * n_input, 1),), np.int8), ctx.temp((max(rows * n_aux, 1),), np.int8),
             ctx.temp((max(rows * n_output, 1),), np.int8), ctx.temp((max(n_cell, 1),), np.int8),
             ctx.temp((4 * n_batch,), np.float32), ctx.temp((4 * n_batch + max(n_cell, n_output),), np.int32),
             scales, rowsums, rs_off, p,
             np.array([cell_clip, proj_clip], np.float32)]
    ctx.call(lstm_hybrid, *args)


_LSTM_WEIGHT_NAMES = (
    "input_to_input_weights", "input_to_forget_weights", "input_to_cell_weights", "input_to_output_weights",
    "recurrent_to_input_weights", "recurrent_to_forget_weights", "recurrent_to_cell_weights",
    "recurrent_to_output_weights", "cell_to_input_weights", "cell_to_forget_weights", "cell_to_output_weights",
    "input_gate_bias", "forget_gate_bias", "cell_gate_bias", "output_gate_bias", "projection_weights",
    "projection_bias")


_LN_NAMES = tuple(f"{g}_layer_norm_coefficients" for g in ("input", "forget", "cell", "output"))


def _clips(ctx: PrepareContext) -> tuple[float, float]:
    cell_clip = float(ctx.options.get("cell_clip", 0.0))
    proj_clip = float(ctx.options.get("proj_clip", 0.0))
    ctx.check(cell_clip >= 0 and proj_clip >= 0, f"cell_clip ({cell_clip}) and proj_clip ({proj_clip}) must be >= 0")
    return cell_clip, proj_clip


@kernel("UNIDIRECTIONAL_SEQUENCE_LSTM")
def UNIDIRECTIONAL_SEQUENCE_LSTM(ctx: PrepareContext) -> None:
    """Float LSTM over a sequence (20 or 24 inputs; v4 diagonal recurrent weights)."""
    ctx.check(ctx.num_inputs in (20, 24), f"expected 20 or 24 inputs, got {ctx.num_inputs}")
    ctx.check_num(outputs=1)
    time_major = bool(ctx.options.get("time_major", False))
    x = ctx.input(0)
    weights = {name: ctx.input(1 + i) for i, name in enumerate(_LSTM_WEIGHT_NAMES)}
    use_ln = ctx.num_inputs == 24 and ctx.input(21) is not None
    for i, name in enumerate(_LN_NAMES):
        weights[name] = ctx.input(20 + i) if ctx.num_inputs == 24 else None
    if x is not None and x.dtype == np.int8:  # fully integer (int8 activations, int16 cell): rnn_int.py
        prepare_lstm_integer(ctx, weights, use_ln, time_major)
        return
    n_batch, max_time, n_input = sequence_dims(ctx, x, time_major)
    act = cell_activation(ctx)
    cell_clip, proj_clip = _clips(ctx)
    state_h, state_c = ctx.input(18), ctx.input(19)
    wxo = weights["input_to_output_weights"]
    hybrid = wxo is not None and wxo.dtype == np.int8
    d = _prepare_lstm_direction(ctx, label="", x=x, aux=None, weights=weights, state_h=state_h, state_c=state_c,
                                n_batch=n_batch, max_time=max_time, n_input=n_input, time_major=time_major,
                                forward=True, allow_diag=not hybrid, use_ln=use_ln, hybrid=hybrid)
    out = ctx.set_output(0, x.shape[:2] + (d["n_output"],), np.float32)
    schedule = _schedule_lstm
    if hybrid:
        schedule = functools.partial(_schedule_lstm_hybrid,
                                     asymmetric=bool(ctx.options.get("asymmetric_quantize_inputs", False)))
    schedule(ctx, d, x, None, out, n_batch=n_batch, max_time=max_time, n_input=n_input,
                   time_major=time_major, forward=True, out_offset=0, out_lead=d["n_output"],
                   state_lead=d["n_output"], use_ln=use_ln, act=act, cell_clip=cell_clip, proj_clip=proj_clip,
                   state_h=state_h, state_c=state_c)


_BIDIR_STATE = {"fw": (35, 36), "bw": (37, 38)}


@kernel("BIDIRECTIONAL_SEQUENCE_LSTM")
def BIDIRECTIONAL_SEQUENCE_LSTM(ctx: PrepareContext) -> None:
    """Forward + backward LSTMs over a sequence (48 inputs; float, or hybrid v2/v3 with int8 weights);
    merge_outputs concatenates them on the last axis.

    An aux input with aux weights feeds both directions (stacking with cross links); an aux input without aux
    weights is the backward direction's input (stacking without cross links), as in TFLite."""
    ctx.check(ctx.num_inputs == 48, f"expected 48 inputs, got {ctx.num_inputs}")
    merge, time_major, x, n_batch, max_time, n_input, act = bidirectional_start(ctx)
    cell_clip, proj_clip = _clips(ctx)
    aux = ctx.input(39)
    use_aux = ctx.input(41) is not None
    if aux is not None:
        ctx.check(aux.dtype == np.float32, f"aux input has type {aux.dtype.name}, expected float32")
        ctx.check(aux.ndim == 3 and aux.shape[:2] == x.shape[:2],
                  f"aux input has shape {list(aux.shape)}, expected {list(x.shape[:2])} + [depth]")
        if not use_aux:
            ctx.check(aux.shape[2] == n_input, f"aux input has depth {aux.shape[2]}, expected {n_input}")
    non_stacking = aux is not None and not use_aux
    real_aux = None if non_stacking else aux
    fw_wxo, bw_wxo = ctx.input(4), ctx.input(21)
    hybrid = fw_wxo is not None and fw_wxo.dtype == np.int8  # v2 (v3 asymmetric): int8 weights, float activations
    if fw_wxo is not None and bw_wxo is not None:
        ctx.check(bw_wxo.dtype == fw_wxo.dtype, f"bw input_to_output_weights has type {bw_wxo.dtype.name}, fw "
                                                f"{fw_wxo.dtype.name}: both directions must have the same type")
    dirs = {}
    for name, base, aux_base in (("fw", 1, 40), ("bw", 18, 44)):
        weights = {n: ctx.input(base + i) for i, n in enumerate(_LSTM_WEIGHT_NAMES)}
        for i, g in enumerate(("input", "forget", "cell", "output")):
            weights[f"aux_input_to_{g}_weights"] = ctx.input(aux_base + i)
            weights[f"{g}_layer_norm_coefficients"] = None
        d_in = aux if (name == "bw" and non_stacking) else x
        h, c = (ctx.input(i) for i in _BIDIR_STATE[name])
        dirs[name] = (_prepare_lstm_direction(
            ctx, label=f"{name} ", x=d_in, aux=real_aux, weights=weights, state_h=h, state_c=c, n_batch=n_batch,
            max_time=max_time, n_input=n_input, time_major=time_major, forward=name == "fw", allow_diag=False,
            use_ln=False, hybrid=hybrid), d_in, h, c)
    ctx.check(dirs["bw"][0]["n_cell"] == dirs["fw"][0]["n_cell"],
              f"bw n_cell ({dirs['bw'][0]['n_cell']}) must equal fw n_cell ({dirs['fw'][0]['n_cell']}) as in TFLite")
    n_fw, n_bw = dirs["fw"][0]["n_output"], dirs["bw"][0]["n_output"]
    fw_out = ctx.set_output(0, x.shape[:2] + ((n_fw + n_bw) if merge else n_fw,), np.float32)
    bw_out = fw_out if merge else ctx.set_output(1, x.shape[:2] + (n_bw,), np.float32)
    lead = fw_out.shape[2]
    if merge and not time_major and n_batch > 1:
        # TFLite steps batch-major state rows by the output row length (n_fw + n_bw): past the state's end
        ctx.fail("merge_outputs with batch-major input needs batch 1 (TFLite indexes the states out of bounds)")
    schedule = _schedule_lstm
    if hybrid:
        schedule = functools.partial(_schedule_lstm_hybrid,
                                     asymmetric=bool(ctx.options.get("asymmetric_quantize_inputs", False)))
    for name, (d, d_in, h, c) in dirs.items():
        out = fw_out if name == "fw" else bw_out
        schedule(ctx, d, d_in, real_aux, out, n_batch=n_batch, max_time=max_time, n_input=n_input,
                       time_major=time_major, forward=name == "fw", out_offset=n_fw if (merge and name == "bw") else 0,
                       out_lead=lead if merge else out.shape[2], state_lead=d["n_output"], use_ln=False, act=act,
                       cell_clip=cell_clip, proj_clip=proj_clip, state_h=h, state_c=c)
