"""The float LSTM as GEMMs (issue 30): the four gates' input products of every time step in one matrix product
before the loop, and per step the four recurrent products as one matrix-vector product over the concatenated gate
weights, the bias, peepholes, activations, cell update and projection fused after it. Both products run across the
gate outputs (16 lanes), in order over k, in the same compiled loop as the steps (the FULLY_CONNECTED tiles of
kernels/linear are another family's: tests/test_layering.py).

Each gate value is rounded as the official CalculateLstmGateFloat rounds it, step by step: (input product + bias)
+ recurrent product (+ peephole), then the activation (kernels/base/vecmath's sigmoid and tanh, bit-exact with the
official ones); only the dot products inside the products are summed in another order (in order over k, vectorized
across the gates' outputs), as lstm.py's per-output dots (4-lane partial sums) already were: within 1e-6 of the
official runtime. A step whose input is all zeros skips its input product, as officially.

Taken for the common configurations: constant weights, no aux input, no layer norm, no diagonal recurrent weights,
a cell activation other than NONE; lstm.py runs the others.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.activation import ACT_NONE, ACT_TANH
from lite_numba.kernels.base.vecmath import sigmoid_f32, tanh_f32, wide_vectors
from lite_numba.kernels.sequence.cell import activate, sequence_step, step_is_zero
from numba import njit

from lite_numba.ops import PrepareContext

# parameter vector (int64)
_BATCH, _TIME, _INPUT, _CELL, _OUTPUT, _TIME_MAJOR, _FORWARD, _OUT_OFFSET, _OUT_LEAD, _STATE_LEAD, _CIFG, _PEEP, \
    _PROJ, _ACT = range(14)


@njit(cache=True, inline="always")
def _clip(v, clip):
    """max(min(clip, v), -clip) with std::min / std::max (a NaN becomes +clip), as lstm.py's."""
    m = v if v < clip else clip
    return -clip if m < -clip else m


@njit(cache=True, nogil=True, error_model="numpy")
def lstm_gemm_step_loop(x, x2, wx_t, gx, wh_t, w_ci, w_cf, w_co, bias, wp_t, b_p, h, c, out, s, p, clips):
    """The whole sequence. x2: x as [rows, n_input]; wx_t: the input weights [n_input, G * n_cell] (G = 3 with CIFG,
    gates [input,] forget, cell, output); gx: scratch [rows, G * n_cell] for the input products, in x's row order;
    wh_t the recurrent weights [n_output, G * n_cell]; bias the gate biases concatenated; wp_t the projection
    [n_cell, n_output] ([0, 0] without); s a scratch of 2 G n_cell + n_cell + n_output floats. The products are
    written out in the loop (two-dimensional indices, no helper taking arrays: Numba reference-counts those per
    call), summed in order over k across the outputs."""
    wide_vectors()  # elementwise maps and the vectorized-across-outputs products: any width, the same sums
    n_batch, max_time, n_in, n_cell, n_out = p[_BATCH], p[_TIME], p[_INPUT], p[_CELL], p[_OUTPUT]
    time_major, forward, cifg, peep, act = p[_TIME_MAJOR] != 0, p[_FORWARD] != 0, p[_CIFG] != 0, p[_PEEP] != 0, \
        p[_ACT]
    out_off, out_lead, state_lead = p[_OUT_OFFSET], p[_OUT_LEAD], p[_STATE_LEAD]
    cell_clip, proj_clip = clips[0], clips[1]
    gn = (3 if cifg else 4) * n_cell
    for row in range(n_batch * max_time):  # every step's input products first: one pass over the input weights each
        for j in range(gn):
            gx[row, j] = np.float32(0.0)
        for k in range(n_in):
            a = x2[row, k]
            for j in range(gn):
                gx[row, j] += a * wx_t[k, j]
    gi = 0
    gf = 0 if cifg else n_cell
    gc, go = gf + n_cell, gf + 2 * n_cell
    g = s[0:gn]
    hacc = s[gn:2 * gn]
    tmp = s[2 * gn:2 * gn + n_cell]
    pacc = s[2 * gn + n_cell:2 * gn + n_cell + n_out]
    for it in range(n_batch * max_time):
        b, t_rel, row = sequence_step(it, time_major, forward, max_time, n_batch)
        x_zero = step_is_zero(x, time_major, t_rel, row, n_batch, n_in)
        ho, co = b * state_lead, b * n_cell
        for j in range(gn):
            hacc[j] = np.float32(0.0)
        for k in range(n_out):
            hk = h[ho + k]
            for j in range(gn):
                hacc[j] += hk * wh_t[k, j]
        if x_zero:
            for j in range(gn):
                g[j] = hacc[j] + bias[j]
        else:
            for j in range(gn):
                g[j] = hacc[j] + (gx[row, j] + bias[j])
        cs = c[co:co + n_cell]
        if peep:
            if not cifg:
                for j in range(n_cell):
                    g[gi + j] += w_ci[j] * cs[j]
            for j in range(n_cell):
                g[gf + j] += w_cf[j] * cs[j]
        if not cifg:
            for j in range(n_cell):
                g[gi + j] = sigmoid_f32(g[gi + j])
        for j in range(n_cell):
            g[gf + j] = sigmoid_f32(g[gf + j])
        if act == ACT_TANH:
            for j in range(n_cell):
                g[gc + j] = tanh_f32(g[gc + j])
        else:
            for j in range(n_cell):
                g[gc + j] = activate(g[gc + j], act)
        one = np.float32(1.0)
        for j in range(n_cell):
            v = g[gf + j] * cs[j]
            i_gate = one - g[gf + j] if cifg else g[gi + j]
            v += g[gc + j] * i_gate
            if cell_clip > 0:
                v = _clip(v, cell_clip)
            cs[j] = v
        if peep:
            for j in range(n_cell):
                g[go + j] += w_co[j] * cs[j]
        for j in range(n_cell):
            g[go + j] = sigmoid_f32(g[go + j])
        if act == ACT_TANH:
            for j in range(n_cell):
                tmp[j] = g[go + j] * tanh_f32(cs[j])
        else:
            for j in range(n_cell):
                tmp[j] = g[go + j] * activate(cs[j], act)
        hs = h[ho:ho + n_out]
        if p[_PROJ] != 0:
            for k in range(n_out):
                pacc[k] = np.float32(0.0)
            for i in range(n_cell):
                ti = tmp[i]
                for k in range(n_out):
                    pacc[k] += ti * wp_t[i, k]
            for k in range(n_out):
                v = pacc[k] + b_p[k] if b_p.size else pacc[k]
                hs[k] = _clip(v, proj_clip) if proj_clip > 0 else v
        else:
            for k in range(n_out):
                hs[k] = tmp[k]
        oo = row * out_lead + out_off
        for k in range(n_out):
            out[oo + k] = hs[k]


def _const(t) -> np.ndarray | None:
    return None if t is None else np.asarray(t.data, np.float32) if t.is_const else None


def schedule_lstm_gemm(ctx: PrepareContext, d: dict, x, out, *, n_batch, max_time, n_input, time_major, forward,
                       out_offset, out_lead, state_lead, use_ln, act, cell_clip, proj_clip, state_h, state_c) -> bool:
    """Schedule the GEMM form of one float LSTM direction when its configuration allows (module docstring); False
    (nothing scheduled) otherwise."""
    w = d["w"]
    gates = ("forget", "cell", "output") if d["cifg"] else ("input", "forget", "cell", "output")
    wx = [_const(w[f"input_to_{g}_weights"]) for g in gates]
    wh = [_const(w[f"recurrent_to_{g}_weights"]) for g in gates]
    bs = [_const(w[f"{g}_gate_bias"]) for g in gates]
    wp, bp = w["projection_weights"], w["projection_bias"]
    if (d["n_aux"] or use_ln or d["diag"] or act == ACT_NONE or any(m is None for m in wx + wh + bs)
            or (wp is not None and _const(wp) is None) or (bp is not None and _const(bp) is None)):
        return False
    n_cell, n_out = d["n_cell"], d["n_output"]
    gn = len(gates) * n_cell
    wx_t = np.ascontiguousarray(np.concatenate([m.reshape(n_cell, n_input) for m in wx]).T)  # [n_input, gn]
    wh_t = np.ascontiguousarray(np.concatenate([m.reshape(n_cell, n_out) for m in wh]).T)  # [n_out, gn]
    peeps = [w[f"cell_to_{g}_weights"] for g in ("input", "forget", "output")]
    peep_args = [ctx.const(np.zeros(0, np.float32)) if t is None else ctx.view(t, (t.size,)) for t in peeps]
    p = np.zeros(14, np.int64)
    p[_BATCH], p[_TIME], p[_INPUT], p[_CELL], p[_OUTPUT] = n_batch, max_time, n_input, n_cell, n_out
    p[_TIME_MAJOR], p[_FORWARD], p[_OUT_OFFSET], p[_OUT_LEAD], p[_STATE_LEAD] = time_major, forward, out_offset, \
        out_lead, state_lead
    p[_CIFG], p[_PEEP], p[_PROJ], p[_ACT] = d["cifg"], d["peep"], wp is not None, act
    wp_t = np.ascontiguousarray(_const(wp).reshape(n_out, n_cell).T) if wp is not None else \
        np.zeros((0, 0), np.float32)
    rows = n_batch * max_time
    ctx.call(lstm_gemm_step_loop, ctx.view(x, (x.size,)), ctx.view(x, (rows, n_input)), ctx.const(wx_t),
             ctx.temp((rows, gn), np.float32), ctx.const(wh_t), *peep_args,
             ctx.const(np.concatenate(bs).astype(np.float32)), ctx.const(wp_t),
             ctx.const(_const(bp) if bp is not None else np.zeros(0, np.float32)),
             ctx.view(state_h, (state_h.size,)), ctx.view(state_c, (state_c.size,)), ctx.view(out, (out.size,)),
             ctx.temp((2 * gn + n_cell + n_out,), np.float32), p, np.array([cell_clip, proj_clip], np.float32))
    return True


__all__ = ["lstm_gemm_step_loop", "schedule_lstm_gemm"]
