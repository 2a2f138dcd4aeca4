"""RNN, UNIDIRECTIONAL_SEQUENCE_RNN and BIDIRECTIONAL_SEQUENCE_RNN: float32 and hybrid (float activations, int8
weights), as TFLite's kernel_utils RnnBatchStep and its hybrid form (per step and batch row the input and state are
quantized to int8 by BatchQuantizeFloats with the official x86 build's NEON rounding, quantize_rows; products
accumulate in int32 and are scaled back to float). Per step: h = act(bias + W x + R h). The hidden state is a
*variable* input the kernels update in place (see lstm.py)."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.hybrid_quant import quantize_rows, refuse_minus_128
from lite_numba.kernels.sequence.cell import (
    activate,
    bidirectional_start,
    cell_activation,
    dot,
    flat,
    hybrid_product,
    is_zero_span,
    sequence_dims,
    step_rows,
    t_i8,
)
from numba import njit

from lite_numba.ops import PrepareContext, kernel

# --- hybrid LSTM (float activations, int8 weights) ----------------------------------------------------------------


@njit(cache=True, nogil=True)
def rnn_hybrid(x, aux, w, w_aux, r, bias, h, out, qx, qa, qh, sf, zp, scales, rowsums, p):
    """The hybrid RNN (TFLite's hybrid RnnBatchStep): int8 weights; per step the input, aux input and hidden state
    rows are quantized (symmetric, or asymmetric when p[_R_ASYM]) unless all zero, and
    out = act(bias + W x + W_aux aux + R h) with the int8 products scaled back to float.
    scales = [input, recurrent, aux weight scale]; rowsums = [input, recurrent, aux row sums]. Time major steps all
    batch rows together (the all-zero tests span the step; aux rows of step t start at t * aux_step), batch major
    one row at a time (aux rows p[_R_AUX_ROW] apart). Output rows are out_lead apart from out_offset; a backward
    direction walks time from the end."""
    n_batch, max_time, n_in, n_aux, units = p[_R_BATCH], p[_R_TIME], p[_R_INPUT], p[_R_AUX], p[_R_UNITS]
    time_major, act, forward = p[_R_TIME_MAJOR] != 0, p[_R_ACT], p[_R_FORWARD] != 0
    out_off, out_lead, aux_step, aux_row = p[_R_OUT_OFFSET], p[_R_OUT_LEAD], p[_R_AUX_STEP], p[_R_AUX_ROW]
    asym = p[_R_ASYM] != 0
    x_sf, h_sf, a_sf = sf[0:n_batch], sf[n_batch:2 * n_batch], sf[2 * n_batch:]
    x_zp, h_zp, a_zp = zp[0:n_batch], zp[n_batch:2 * n_batch], zp[2 * n_batch:3 * n_batch]
    iacc = zp[3 * n_batch:]  # int32 product scratch (units)
    groups = max_time if time_major else n_batch * max_time
    rows = n_batch if time_major else 1
    for it in range(p[_R_PASSES] * groups):
        first_b, t, row0 = step_rows(it % groups, time_major, forward, max_time, n_batch)
        a0 = t * aux_step if time_major else row0 * aux_row
        x_zero = is_zero_span(x, row0 * n_in, rows * n_in)
        a_zero = n_aux == 0 or is_zero_span(aux, a0, rows * n_aux)
        h_zero = is_zero_span(h, first_b * units, rows * units)
        if not x_zero:
            quantize_rows(x[row0 * n_in:(row0 + rows) * n_in], rows, n_in, asym, qx, x_sf[first_b:], x_zp[first_b:])
        if not a_zero:
            quantize_rows(aux[a0:a0 + rows * n_aux], rows, n_aux, asym, qa, a_sf[first_b:], a_zp[first_b:])
        if not h_zero:
            quantize_rows(h[first_b * units:(first_b + rows) * units], rows, units, asym, qh, h_sf[first_b:],
                          h_zp[first_b:])
        for rr in range(rows):
            b = first_b + rr
            oo = (row0 + rr) * out_lead + out_off
            for j in range(units):
                out[oo + j] = bias[j]
            if not x_zero:
                hybrid_product(qx, x_sf, x_zp, rr * n_in, b, n_in, w, scales[0], rowsums, asym, out, oo, units,
                                iacc)
            if not a_zero:
                hybrid_product(qa, a_sf, a_zp, rr * n_aux, b, n_aux, w_aux, scales[2], rowsums[2 * units:], asym,
                                out, oo, units, iacc)
            if not h_zero:
                hybrid_product(qh, h_sf, h_zp, rr * units, b, units, r, scales[1], rowsums[units:], asym, out, oo,
                                units, iacc)
        for rr in range(rows):
            oo = (row0 + rr) * out_lead + out_off
            ho = (first_b + rr) * units
            for j in range(units):
                v = activate(out[oo + j], act)
                out[oo + j] = v
                h[ho + j] = v


# --- RNN ----------------------------------------------------------------------------------------------------------

# RNN parameter vector layout (int64)
(_R_BATCH, _R_TIME, _R_INPUT, _R_AUX, _R_UNITS, _R_TIME_MAJOR, _R_ACT, _R_FORWARD, _R_OUT_OFFSET, _R_OUT_LEAD,
 _R_AUX_STEP) = range(11)
_R_SIZE = 11
# hybrid RNN parameters past the _R_* block: asymmetric input quantization, batch-major aux row stride
# and how many times the whole sequence is run (TFLite's time-major hybrid BIDIRECTIONAL_SEQUENCE_RNN runs it
# max_time times, the state carrying over: an extra `for t < max_time` loop around both directions)
_R_ASYM, _R_AUX_ROW, _R_PASSES = _R_SIZE, _R_SIZE + 1, _R_SIZE + 2
_R_HYBRID_SIZE = _R_SIZE + 3


@njit(cache=True, nogil=True)
def rnn_float(x, aux, w, w_aux, r, bias, h, out, p):
    """h = act(bias + W x (+ W_aux aux) + R h) per step and batch row (TFLite's RnnBatchStep order); out gets every
    step's h. p is the int64 parameter vector (_R_*); x/aux/out flat [T, B, .] (time major) or [B, T, .]; out rows
    are out_lead apart and start at out_offset (merged bidirectional outputs). A backward direction walks time from
    the end. Time-major aux rows of step t start at t * aux_step (TFLite uses input_size * batch there)."""
    n_batch, max_time, n_in, n_aux, units = p[_R_BATCH], p[_R_TIME], p[_R_INPUT], p[_R_AUX], p[_R_UNITS]
    time_major, act, forward = p[_R_TIME_MAJOR] != 0, p[_R_ACT], p[_R_FORWARD] != 0
    out_off, out_lead, aux_step = p[_R_OUT_OFFSET], p[_R_OUT_LEAD], p[_R_AUX_STEP]
    for tt in range(max_time):
        t = tt if forward else max_time - 1 - tt
        for b in range(n_batch):
            row = t * n_batch + b if time_major else b * max_time + t
            xo, oo, ho = row * n_in, row * out_lead + out_off, b * units
            ao = t * aux_step + b * n_aux if time_major else row * n_aux
            for j in range(units):
                acc = bias[j]
                acc += dot(w, j * n_in, x, xo, n_in)
                if n_aux > 0:
                    acc += dot(w_aux, j * n_aux, aux, ao, n_aux)
                acc += dot(r, j * units, h, ho, units)
                out[oo + j] = activate(acc, act)
            for j in range(units):
                h[ho + j] = out[oo + j]


def _rnn_params(n_batch, max_time, n_in, n_aux, units, time_major, act, forward=True, out_offset=0, out_lead=None,
                aux_step=0) -> np.ndarray:
    p = np.zeros(_R_SIZE, np.int64)
    p[_R_BATCH], p[_R_TIME], p[_R_INPUT], p[_R_AUX], p[_R_UNITS] = n_batch, max_time, n_in, n_aux, units
    p[_R_TIME_MAJOR], p[_R_ACT], p[_R_FORWARD] = time_major, act, forward
    p[_R_OUT_OFFSET], p[_R_OUT_LEAD] = out_offset, units if out_lead is None else out_lead
    p[_R_AUX_STEP] = aux_step
    return p


def _check_rnn_cell(ctx: PrepareContext, pre: str, w, r, bias, h, n_batch: int, n_input: int,
                    hybrid: bool = False) -> int:
    """Validate one RNN cell's weights, bias and hidden state; returns its number of units. hybrid: the weights
    are constant int8 with one scale each, bias and state float32."""
    ctx.check(w is not None and r is not None and bias is not None and h is not None,
              f"{pre}input weights, recurrent weights, bias and hidden state are required")
    for name, t in (("weights", w), ("recurrent_weights", r), ("bias", bias), ("hidden_state", h)):
        want = np.int8 if hybrid and name.endswith("weights") else np.float32
        if t.dtype != want:
            ctx.fail(f"{pre}{name} has type {t.dtype.name}: a {'hybrid' if hybrid else 'float'} RNN takes "
                     f"{np.dtype(want).name} here")
        if want == np.int8:
            ctx.check(t.data is not None and t.quantization is not None and t.quantization.scales.size == 1,
                      f"{pre}{name} must be constant with one (per-tensor) scale in a hybrid RNN")
    ctx.check(w.ndim == 2, f"{pre}weights must be 2-D, got shape {list(w.shape)}")
    units = w.shape[0]
    ctx.check(w.shape[1] == n_input, f"{pre}weights have depth {w.shape[1]}, input has {n_input}")
    ctx.check(bias.shape == (units,), f"{pre}bias has shape {list(bias.shape)}, expected [{units}]")
    ctx.check(r.shape == (units, units),
              f"{pre}recurrent_weights have shape {list(r.shape)}, expected {[units, units]}")
    ctx.check(h.shape == (n_batch, units), f"{pre}hidden_state has shape {list(h.shape)}, expected {[n_batch, units]}")
    return units


def _prepare_rnn_hybrid(ctx: PrepareContext, x, n_batch: int, max_time: int, n_input: int, time_major: bool,
                        out_shape_prefix: tuple) -> None:
    """Float input and state, int8 weights (dynamic-range quantization; v2 symmetric, v3 asymmetric inputs)."""
    w, r, bias, h = ctx.input(1), ctx.input(2), ctx.input(3), ctx.input(4)
    ctx.check(r is not None and bias is not None and h is not None,
              "input weights, recurrent weights, bias and hidden state are required")
    for name, t, want in (("weights", w, np.int8), ("recurrent_weights", r, np.int8), ("bias", bias, np.float32),
                          ("hidden_state", h, np.float32)):
        if t.dtype != want:
            ctx.fail(f"{name} has type {t.dtype.name}: a hybrid RNN takes {np.dtype(want).name}")
    for name, t in (("weights", w), ("recurrent_weights", r)):
        ctx.check(t.data is not None and t.quantization.scales.size == 1,
                  f"{name} must be constant with one (per-tensor) scale in a hybrid RNN")
        refuse_minus_128(ctx, f"{name} {t.name!r}", t.data)
    ctx.check(w.ndim == 2, f"weights must be 2-D, got shape {list(w.shape)}")
    units = w.shape[0]
    ctx.check(w.shape[1] == n_input, f"weights have depth {w.shape[1]}, input has {n_input}")
    ctx.check(bias.shape == (units,), f"bias has shape {list(bias.shape)}, expected [{units}]")
    ctx.check(r.shape == (units, units), f"recurrent_weights have shape {list(r.shape)}, expected {[units, units]}")
    ctx.check(h.shape == (n_batch, units), f"hidden_state has shape {list(h.shape)}, expected {[n_batch, units]}")
    act = cell_activation(ctx)
    out = ctx.set_output(0, out_shape_prefix + (units,), np.float32)
    if out.size == 0:
        return
    p = _rnn_params(n_batch, max_time, n_input, 0, units, time_major, act)
    _schedule_rnn_hybrid(ctx, x, None, w, None, r, bias, h, out, p,
                         bool(ctx.options.get("asymmetric_quantize_inputs", False)))


def _schedule_rnn_hybrid(ctx: PrepareContext, x, aux, w, w_aux, r, bias, h, out, p, asymmetric: bool,
                         aux_row: int = 0, passes: int = 1) -> None:
    """Call rnn_hybrid for one direction: p is the _R_* parameter vector (extended here), the weights int8."""
    n_batch, n_input, n_aux, units = int(p[_R_BATCH]), int(p[_R_INPUT]), int(p[_R_AUX]), int(p[_R_UNITS])
    ph = np.zeros(_R_HYBRID_SIZE, np.int64)
    ph[:_R_SIZE] = p
    ph[_R_ASYM], ph[_R_AUX_ROW], ph[_R_PASSES] = asymmetric, aux_row, passes
    mats = [w, r] + ([w_aux] if n_aux else [])
    scales = np.zeros(3, np.float32)
    for k, m in enumerate(mats):
        scales[k] = m.quantization.scales[0]
    rowsums = np.concatenate([np.asarray(m.data, np.int8).reshape(units, -1).astype(np.int32).sum(axis=1)
                              for m in mats]).astype(np.int32)
    rows = n_batch if p[_R_TIME_MAJOR] else 1
    ctx.call(rnn_hybrid, flat(ctx, x), flat(ctx, aux if n_aux else None), t_i8(ctx, w),
             t_i8(ctx, w_aux if n_aux else None), t_i8(ctx, r), flat(ctx, bias), flat(ctx, h),
             flat(ctx, out), ctx.temp((max(rows * n_input, 1),), np.int8), ctx.temp((max(rows * n_aux, 1),), np.int8),
             ctx.temp((max(rows * units, 1),), np.int8), ctx.temp((3 * n_batch,), np.float32),
             ctx.temp((3 * n_batch + units,), np.int32), scales, rowsums, ph)


def _prepare_rnn(ctx: PrepareContext, x, n_batch: int, max_time: int, n_input: int, time_major: bool,
                 out_shape_prefix: tuple) -> None:
    w, r, bias, h = ctx.input(1), ctx.input(2), ctx.input(3), ctx.input(4)
    if w is not None and w.dtype == np.int8:
        _prepare_rnn_hybrid(ctx, x, n_batch, max_time, n_input, time_major, out_shape_prefix)
        return
    units = _check_rnn_cell(ctx, "", w, r, bias, h, n_batch, n_input)
    act = cell_activation(ctx)
    out = ctx.set_output(0, out_shape_prefix + (units,), np.float32)
    if out.size == 0:
        return
    p = _rnn_params(n_batch, max_time, n_input, 0, units, time_major, act)
    ctx.call(rnn_float, flat(ctx, x), flat(ctx, None), flat(ctx, w), flat(ctx, None), flat(ctx, r),
             flat(ctx, bias), flat(ctx, h), flat(ctx, out), p)


@kernel("UNIDIRECTIONAL_SEQUENCE_RNN")
def UNIDIRECTIONAL_SEQUENCE_RNN(ctx: PrepareContext) -> None:
    """Float RNN over a sequence: inputs (x, weights, recurrent weights, bias, hidden state variable)."""
    ctx.check_num(inputs=5, outputs=1)
    time_major = bool(ctx.options.get("time_major", False))
    x = ctx.input(0)
    n_batch, max_time, n_input = sequence_dims(ctx, x, time_major)
    _prepare_rnn(ctx, x, n_batch, max_time, n_input, time_major, x.shape[:2])


@kernel("RNN")
def RNN(ctx: PrepareContext) -> None:
    """Float single-step RNN: x [batch, input] -> h [batch, units] (hidden state variable updated)."""
    ctx.check_num(inputs=5, outputs=1)
    x = ctx.input(0)
    ctx.check(x is not None and x.dtype == np.float32, "input must be float32")
    ctx.check(x.ndim == 2, f"input must be 2-D, got shape {list(x.shape)}")
    _prepare_rnn(ctx, x, x.shape[0], 1, x.shape[1], True, (x.shape[0],))


@kernel("BIDIRECTIONAL_SEQUENCE_RNN")
def BIDIRECTIONAL_SEQUENCE_RNN(ctx: PrepareContext) -> None:
    """Forward + backward RNNs over a sequence (float, or hybrid v2/v3 with int8 weights; 12 inputs: x, fw
    W/R/bias/state, bw W/R/bias/state, aux input, fw/bw aux weights); merge_outputs concatenates the directions on
    the last axis.

    As TFLite: an aux input with aux weights feeds both directions (time-major aux rows of step t start at
    t * input_size * batch, its stride even when the aux depth differs; the hybrid batch-major kernel steps aux rows
    by input_size too); an aux input without aux weights is the backward direction's input in time-major mode only
    (batch-major TFLite reads `input` there). The time-major hybrid kernel runs the whole sequence max_time times
    (an extra loop around both directions in TFLite's EvalHybrid), so the state evolves max_time times per invoke."""
    ctx.check_num(inputs=12)
    merge, time_major, x, n_batch, max_time, n_input, act = bidirectional_start(ctx)
    aux, fw_aux_w, bw_aux_w = ctx.input(9), ctx.input(10), ctx.input(11)
    ctx.check((fw_aux_w is None) == (bw_aux_w is None), "fw and bw aux weights must be both present or absent")
    use_aux = fw_aux_w is not None
    ctx.check(not use_aux or aux is not None, "aux weights are given but the aux input is absent")
    fw_w = ctx.input(1)
    hybrid = fw_w is not None and fw_w.dtype == np.int8  # v2 (v3 asymmetric): int8 weights, float activations
    cells = {}
    for name, base in (("fw", 1), ("bw", 5)):
        w, r, bias, h = (ctx.input(base + i) for i in range(4))
        cells[name] = (_check_rnn_cell(ctx, f"{name} ", w, r, bias, h, n_batch, n_input, hybrid), w, r, bias, h)
    n_aux = 0
    if use_aux:
        ctx.check(aux.dtype == np.float32, f"aux input has type {aux.dtype.name}, expected float32")
        ctx.check(aux.ndim == 3 and aux.shape[:2] == x.shape[:2],
                  f"aux input has shape {list(aux.shape)}, expected {list(x.shape[:2])} + [depth]")
        n_aux = aux.shape[2]
        want = np.int8 if hybrid else np.float32
        for name, aw in (("fw", fw_aux_w), ("bw", bw_aux_w)):
            ctx.check(aw.dtype == want, f"{name} aux weights have type {aw.dtype.name}, expected {np.dtype(want).name}")
            ctx.check(aw.shape == (cells[name][0], n_aux),
                      f"{name} aux weights have shape {list(aw.shape)}, expected {[cells[name][0], n_aux]}")
            if hybrid:
                ctx.check(aw.data is not None and aw.quantization is not None and aw.quantization.scales.size == 1,
                          f"{name} aux weights must be constant with one (per-tensor) scale in a hybrid RNN")
        ctx.check(not time_major or max_time <= 1 or n_aux >= n_input,
                  f"time-major aux input of depth {n_aux} < input depth {n_input}: TFLite steps aux rows by the "
                  f"input depth and reads past its end")
    if hybrid and merge and time_major and n_batch > 1:
        ctx.check(bool(ctx.options.get("asymmetric_quantize_inputs", False)),
                  "hybrid merge_outputs with time-major input and symmetric input quantization needs batch 1 (the "
                  "official runtime crashes on this configuration with batch > 1)")
    if use_aux:
        # the hybrid batch-major kernel steps aux rows by the input depth too
        ctx.check(not hybrid or time_major or max_time * n_batch <= 1 or n_aux >= n_input,
                  f"hybrid batch-major aux input of depth {n_aux} < input depth {n_input}: TFLite steps aux rows by "
                  f"the input depth and reads past its end")
    bw_x = x
    if aux is not None and not use_aux and time_major:
        ctx.check(aux.dtype == np.float32 and aux.shape == x.shape,
                  f"aux input without aux weights is the backward input and must have the input's shape "
                  f"{list(x.shape)}, got {list(aux.shape)}")
        bw_x = aux
    n_fw, n_bw = cells["fw"][0], cells["bw"][0]
    fw_out = ctx.set_output(0, x.shape[:2] + ((n_fw + n_bw) if merge else n_fw,), np.float32)
    bw_out = fw_out if merge else ctx.set_output(1, x.shape[:2] + (n_bw,), np.float32)
    if n_batch == 0 or max_time == 0:
        return
    lead = n_fw + n_bw if merge else None
    for name, d_in, out, aux_w in (("fw", x, fw_out, fw_aux_w), ("bw", bw_x, bw_out, bw_aux_w)):
        units, w, r, bias, h = cells[name]
        if units == 0:
            continue
        p = _rnn_params(n_batch, max_time, n_input, n_aux, units, time_major, act, forward=name == "fw",
                        out_offset=n_fw if (merge and name == "bw") else 0, out_lead=lead,
                        aux_step=n_input * n_batch)
        if hybrid:
            _schedule_rnn_hybrid(ctx, d_in, aux if use_aux else None, w, aux_w if use_aux else None, r, bias, h, out,
                                 p, bool(ctx.options.get("asymmetric_quantize_inputs", False)), aux_row=n_input,
                                 passes=max_time if time_major else 1)
            continue
        ctx.call(rnn_float, flat(ctx, d_in), flat(ctx, aux if use_aux else None), flat(ctx, w),
                 flat(ctx, aux_w if use_aux else None), flat(ctx, r), flat(ctx, bias), flat(ctx, h),
                 flat(ctx, out), p)


# --- SVDF ---------------------------------------------------------------------------------------------------------


