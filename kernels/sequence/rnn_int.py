"""Fully integer UNIDIRECTIONAL_SEQUENCE_LSTM: int8 input, output and output state, int16 cell state, int8 weights,
int32 biases, int16 peepholes and layer-norm coefficients (what the converter emits with full int8 quantization).

Bit-exact with TFLite's 8x8_16 integer LSTM (unidirectional_sequence_lstm.cc PopulateQuantizedLstmParams8x8_16 and
PopulatePrecomputedZPTimesWeightsWithBias at prepare, lstm_eval.cc LstmStepInteger8x8_16 at run time, with the
portable tensor_utils helpers that the x86 build uses for all of these). Per step, on the rows of one step (all
batch rows when time major, one row when batch major):

- gate (int16, Q3.12 unless layer norm gives its own scale): g = sat16(mbqm(W_x x + b_x, s_x));
  g = sat16(mbqm(W_h h + b_h, s_h) + g); peephole: g = sat16(mbqm(w_c * c, s_c) + g); b_x / b_h fold the input and
  output-state zero points (and, without layer norm, the gate bias) into int32 biases at prepare;
  layer norm: integer mean / variance, GetInvSqrtQuantizedMultiplierExp, coefficients and bias, rescale to Q3.12;
  then sigmoid (input, forget, output) or tanh (cell gate) on gemmlowp FixedPoint<int16, 3> -> Q0.15.
  The peephole product runs over n_output elements per row as TFLite's call does (identical when n_output ==
  n_cell; a projection with n_output < n_cell uses the first n_output entries and row stride n_output).
- cell (int16, scale 2^cell_scale): c = sat16(rdpot(f * c, 15) + rdpot(i * g, 30 + cell_scale)), i = 32767 - f
  with CIFG, then clipped to the quantized cell_clip.
- hidden: o * tanh(c) (tanh with 15 + cell_scale integer bits) rescaled by 2^-30 / s_hidden; without projection
  this is the int8 output state (zero point of intermediate 4); with projection it is stored with zero point
  -hidden_zp (as TFLite does) and projected: h = sat8(mbqm(W_p hidden + b_p, s_p) + zp_state), clipped to the
  quantized proj_clip.

Effective scales come from the operator's 5 intermediates: 0..3 are the gates' pre-activation scales with layer
norm (2^-12 without), 4 the hidden state's scale and zero point. The three int16 activations are 65536-entry
tables computed at prepare with the gemmlowp arithmetic of kernels/base/fixedpoint.py.

One compiled signature for every configuration: the gates' matrices are concatenated, absent ones are zeros, and
the configuration and every multiplier go in one int64 parameter vector.
"""

from __future__ import annotations

import functools

import numpy as np
from lite_numba.kernels.base import fixedpoint as fx
from lite_numba.kernels.base.fixedpoint import multiply_by_quantized_multiplier as _mbqm
from lite_numba.kernels.base.fixedpoint import rounding_divide_by_pot, saturating_rounding_doubling_high_mul
from numba import njit

from lite_numba.ops import PrepareContext

GATES = ("input", "forget", "cell", "output")

# parameter vector layout (int64); per gate g the block at _Q_GATE + _Q_GSTRIDE * g holds
# (x multiplier, x shift, h multiplier, h shift, peephole multiplier, peephole shift, layer-norm multiplier,
#  layer-norm shift, variance guard)
(_Q_BATCH, _Q_TIME, _Q_INPUT, _Q_CELL, _Q_OUTPUT, _Q_TIME_MAJOR, _Q_CIFG, _Q_PEEP, _Q_LN, _Q_PROJ, _Q_CELL_SCALE,
 _Q_CELL_CLIP, _Q_PROJ_CLIP, _Q_HIDDEN_ZP, _Q_STATE_ZP, _Q_HIDDEN_M, _Q_HIDDEN_S, _Q_PROJ_M, _Q_PROJ_S,
 _Q_NO_TANH) = range(20)
_Q_GATE = 20
_Q_GSTRIDE = 9
_Q_SIZE = _Q_GATE + 4 * _Q_GSTRIDE

_LUT = 65536  # entries per int16 activation table; tables: sigmoid (Q3.12), tanh (Q3.12), tanh (cell)


# --- kernel -------------------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True, inline="always")
def _sat(v, lo, hi):
    return min(max(v, lo), hi)


@njit(cache=True, nogil=True, inline="always")
def _wrap32(v):
    return np.int64(np.int32(v))


@njit(cache=True, nogil=True, inline="always")
def _wrap16(v):
    return np.int64(np.int16(v))


@njit(cache=True, nogil=True)
def _inv_sqrt_multiplier(value):
    """(multiplier, left shift) of 1/sqrt(value): GetInvSqrtQuantizedMultiplierExp(value, reverse_shift=-1), gemmlowp
    F3 Newton-Raphson in int32 raw arithmetic."""
    if value <= 1:
        return np.int64(2147483647), np.int64(0)
    shift = 11
    while value >= (1 << 29):
        value //= 4
        shift += 1
    bits = 0
    v = value
    while v > 0:
        bits += 1
        v >>= 1
    pairs = ((32 - bits) - 1) // 2 - 1
    shift -= pairs
    value <<= 2 * pairs
    half_input = rounding_divide_by_pot(value >> 1, 1)  # SaturatingRoundingMultiplyByPOT<-1> of F3(value >> 1)
    half_three = np.int64((1 << 28) + (1 << 27))  # 1.5 in F3
    x = np.int64(1 << 28)  # 1.0 in F3
    for _ in range(5):
        x3 = saturating_rounding_doubling_high_mul(saturating_rounding_doubling_high_mul(x, x), x)
        x3 = _sat_left_shift(x3, 6)  # Rescale<3> of an F9
        d = _wrap32(saturating_rounding_doubling_high_mul(half_three, x)
                    - saturating_rounding_doubling_high_mul(half_input, x3))
        x = _sat_left_shift(d, 3)  # Rescale<3> of an F6
    x = saturating_rounding_doubling_high_mul(x, np.int64(1518500250))  # * sqrt(2) / 2
    if shift < 0:
        x = _wrap32(x << -shift)
        shift = 0
    return x, np.int64(-shift)


@njit(cache=True, nogil=True, inline="always")
def _sat_left_shift(x, exponent):
    """gemmlowp SaturatingRoundingMultiplyByPOT<exponent> (exponent > 0) on an int32 raw."""
    threshold = (np.int64(1) << (31 - exponent)) - 1
    if x > threshold:
        return np.int64(2147483647)
    if x < -threshold:
        return np.int64(-2147483648)
    return x << exponent


@njit(cache=True, nogil=True, inline="always")
def _mbqm_neon(x, q, shift):
    """MultiplyByQuantizedMultiplier4Rows (NEON, double rounding): wrapping left shift, vqrdmulh (doubling high
    multiply rounded half up), rounding right shift (half up)."""
    left = shift if shift > 0 else 0
    right = -shift if shift < 0 else 0
    v = _wrap32(x << left)
    hi = (v * q + (np.int64(1) << 30)) >> 31
    if right > 0:
        hi = (hi + (np.int64(1) << (right - 1))) >> right
    return hi


@njit(cache=True, nogil=True)
def _gate(g, x, xo, wx, h, ho, wh, wc, c, co, ln_w, ln_b, eff_b, lut, lut_off, s16, gbase, rows, p):
    """One gate for `rows` rows into s16[gbase:gbase + rows * n_cell] (CalculateLstmGateInteger8x8_16)."""
    n_in, n_cell, n_out = p[_Q_INPUT], p[_Q_CELL], p[_Q_OUTPUT]
    q = _Q_GATE + _Q_GSTRIDE * g
    xm, xs, hm, hs, cm, cs, lm, ls, guard = p[q], p[q + 1], p[q + 2], p[q + 3], p[q + 4], p[q + 5], p[q + 6], \
        p[q + 7], p[q + 8]
    for r in range(rows):
        for j in range(n_cell):
            acc = np.int64(eff_b[g * n_cell + j])
            wo = (g * n_cell + j) * n_in
            xr = xo + r * n_in
            for k in range(n_in):
                acc += np.int64(wx[wo + k]) * np.int64(x[xr + k])
            v = _sat(_mbqm(_wrap32(acc), xm, xs), -32768, 32767)
            acc = np.int64(eff_b[(4 + g) * n_cell + j])
            wo = (g * n_cell + j) * n_out
            hr = ho + r * n_out
            for k in range(n_out):
                acc += np.int64(wh[wo + k]) * np.int64(h[hr + k])
            s16[gbase + r * n_cell + j] = _sat(_mbqm(_wrap32(acc), hm, hs) + v, -32768, 32767)
    if p[_Q_PEEP] != 0 and g != 2:
        pk = g if g < 2 else 2
        # TFLite passes n_output as the vector size (VectorBatchVectorCwiseProductAccumulate); the official x86
        # build runs its NEON version (NEON_2_SSE), which rescales blocks of 16 with MultiplyByQuantizedMultiplier4Rows
        nvec = (n_out // 16) * 16
        for r in range(rows):
            for v in range(n_out):
                idx = r * n_out + v
                x_ = np.int64(wc[pk * n_cell + v]) * np.int64(c[co + idx])
                prod = _mbqm_neon(x_, cm, cs) if v < nvec else _mbqm(x_, cm, cs)
                s16[gbase + idx] = _sat(prod + s16[gbase + idx], -32768, 32767)
    if p[_Q_LN] != 0:
        for r in range(rows):
            _layer_norm(s16, gbase + r * n_cell, n_cell, ln_w, ln_b, g * n_cell, lm, ls, guard)
    for i in range(rows * n_cell):
        s16[gbase + i] = lut[lut_off + s16[gbase + i] + 32768]


@njit(cache=True, nogil=True)
def _layer_norm(buf, off, n, w, bias, wo, scale_m, scale_s, guard):
    """In place on buf[off:off + n] (PortableApplyLayerNorm)."""
    s = np.int64(0)
    sq = np.int64(0)
    for j in range(n):
        v = np.int64(buf[off + j])
        s += v
        sq += v * v
    num = s * 1024
    mean = _wrap32(num // n if num >= 0 else -((-num) // n))  # C division truncates toward zero
    temp = (1 << 20) // n
    var = sq * temp - mean * mean
    var2 = _wrap32(var // (1 << 20) if var >= 0 else -((-var) // (1 << 20)))
    if var2 < 1:
        var2 = guard
    inv_m, inv_s = _inv_sqrt_multiplier(var2)
    for j in range(n):
        shifted = _wrap32(1024 * np.int64(buf[off + j]) - mean)
        rescaled = _mbqm(shifted, inv_m, inv_s)
        v3 = rescaled * np.int64(w[wo + j]) + np.int64(bias[wo + j])  # int64: the official build does not wrap
        v4 = (v3 + 512) // 1024 if v3 > 0 else -((-(v3 - 512)) // 1024)
        v5 = _mbqm(_wrap32(v4), scale_m, scale_s + 12)
        buf[off + j] = _sat(v5, -32768, 32767)


@njit(cache=True, nogil=True)
def lstm_integer(x, wx, wh, wc, ln_w, ln_b, eff_b, wp, bp, lut, h, c, out, s16, s8, p):
    """The integer LSTM over a whole sequence (EvalInteger8x8_16). x, out: flat int8 [T, B, .] (time major) or
    [B, T, .]; h (int8) and c (int16): the flat states, updated in place; wx [4, n_cell, n_input], wh [4, n_cell,
    n_output] int8; wc [3, n_cell] and ln_w [4, n_cell] int16; ln_b [4, n_cell] the gate biases (layer norm only);
    eff_b [8, n_cell] the zero-point folded input / recurrent biases; wp [n_output, n_cell], bp [n_output] the
    projection; lut the three int16 activation tables; s16 [5, rows, n_cell], s8 [rows, n_cell] scratch; p the
    parameter vector (_Q_*)."""
    n_batch, max_time, n_in, n_cell, n_out = p[_Q_BATCH], p[_Q_TIME], p[_Q_INPUT], p[_Q_CELL], p[_Q_OUTPUT]
    time_major, cifg = p[_Q_TIME_MAJOR] != 0, p[_Q_CIFG] != 0
    cell_scale, cell_clip, proj_clip = p[_Q_CELL_SCALE], p[_Q_CELL_CLIP], p[_Q_PROJ_CLIP]
    hidden_zp, state_zp = p[_Q_HIDDEN_ZP], p[_Q_STATE_ZP]
    groups = max_time if time_major else n_batch * max_time
    rows = n_batch if time_major else 1
    size = rows * n_cell
    gi, gf, gc, go, tb = 0, size, 2 * size, 3 * size, 4 * size
    for gidx in range(groups):
        if time_major:
            b0 = 0
            row0 = gidx * n_batch
        else:
            b0 = gidx // max_time
            row0 = b0 * max_time + gidx % max_time
        xo, ho, co = row0 * n_in, b0 * n_out, b0 * n_cell
        if not cifg:
            _gate(0, x, xo, wx, h, ho, wh, wc, c, co, ln_w, ln_b, eff_b, lut, 0, s16, gi, rows, p)
        _gate(1, x, xo, wx, h, ho, wh, wc, c, co, ln_w, ln_b, eff_b, lut, 0, s16, gf, rows, p)
        _gate(2, x, xo, wx, h, ho, wh, wc, c, co, ln_w, ln_b, eff_b, lut, _LUT, s16, gc, rows, p)
        # UpdateLstmCellInteger
        for i in range(size):
            f = np.int64(s16[gf + i])
            nc = _wrap16(rounding_divide_by_pot(f * np.int64(c[co + i]), 15))
            ig = _wrap16(32767 - f) if cifg else np.int64(s16[gi + i])
            m = _wrap16(rounding_divide_by_pot(ig * np.int64(s16[gc + i]), 30 + cell_scale))
            v = _sat(nc + m, -32768, 32767)
            if cell_clip > 0:
                v = _sat(v, -cell_clip, cell_clip)
            c[co + i] = v
        _gate(3, x, xo, wx, h, ho, wh, wc, c, co, ln_w, ln_b, eff_b, lut, 0, s16, go, rows, p)
        # CalculateLstmOutputInteger8x8_16
        if p[_Q_NO_TANH] != 0:
            # TFLite's ApplyTanh has no case for 15 + cell_scale outside 0..6 and writes nothing: its output buffer
            # (the input gate's) keeps this step's input gate
            for i in range(size):
                s16[tb + i] = s16[gi + i]
        else:
            for i in range(size):
                s16[tb + i] = lut[2 * _LUT + np.int64(c[co + i]) + 32768]
        hm, hs = p[_Q_HIDDEN_M], p[_Q_HIDDEN_S]
        if p[_Q_PROJ] != 0:
            for i in range(size):
                v = _mbqm(np.int64(s16[go + i]) * np.int64(s16[tb + i]), hm, hs) - hidden_zp
                s8[i] = _sat(v, -128, 127)
            pm, ps = p[_Q_PROJ_M], p[_Q_PROJ_S]
            for r in range(rows):
                for k in range(n_out):
                    acc = np.int64(bp[k])
                    for j in range(n_cell):
                        acc += np.int64(wp[k * n_cell + j]) * np.int64(s8[r * n_cell + j])
                    v = _sat(_mbqm(_wrap32(acc), pm, ps) + state_zp, -128, 127)
                    if proj_clip > 0:
                        v = _sat(v, -proj_clip, proj_clip)
                    h[ho + r * n_out + k] = v
        else:
            for i in range(size):
                v = _mbqm(np.int64(s16[go + i]) * np.int64(s16[tb + i]), hm, hs) + hidden_zp
                h[ho + i] = _sat(v, -128, 127)
        oo = row0 * n_out
        for k in range(rows * n_out):
            out[oo + k] = h[ho + k]


# --- prepare ------------------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=8)
def _activation_tables(tanh_integer_bits: int) -> np.ndarray:
    """The three int16 -> int16 activations over every int16 value: sigmoid and tanh of FixedPoint<int16, 3>, tanh
    of FixedPoint<int16, tanh_integer_bits> (the portable ApplySigmoid / ApplyTanh: scalar gemmlowp)."""
    fp = fx.FixedPointArrays(16, simd=False)
    v = np.arange(-32768, 32768, dtype=np.int64)
    lut = np.concatenate([fp.logistic(v, 3), fp.tanh(v, 3), fp.tanh(v, tanh_integer_bits)]).astype(np.int16)
    lut.setflags(write=False)
    return lut


def _intermediate(ctx: PrepareContext, k: int):
    inter = ctx.node.intermediates
    if len(inter) != 5:
        ctx.fail(f"an integer (int8 input) LSTM needs 5 intermediate tensors (the gate and hidden scales the "
                 f"converter records), got {len(inter)}")
    t = ctx.intermediate(k)
    ctx.check(t is not None, f"intermediate {k} is absent")
    return t


def _per_tensor(ctx: PrepareContext, t, name: str) -> tuple[float, int]:
    q = t.quantization
    ctx.check(q.scales.size == 1, f"{name} needs one (per-tensor) quantization scale, got {q.scales.size}")
    return float(np.float32(q.scales[0])), int(q.zero_points[0]) if q.zero_points.size else 0


def _check_type(ctx: PrepareContext, t, name: str, dtype) -> None:
    if t is not None and t.dtype != dtype:
        ctx.fail(f"{name} has type {t.dtype.name}: an integer LSTM takes {np.dtype(dtype).name}")


def prepare_lstm_integer(ctx: PrepareContext, weights: dict, use_ln: bool, time_major: bool) -> None:
    """UNIDIRECTIONAL_SEQUENCE_LSTM with an int8 input. weights: name -> Tensor or None (the names of rnn.py:
    input_to_{gate}_weights, ..., {gate}_layer_norm_coefficients)."""
    f32 = np.float32
    x = ctx.input(0)
    ctx.check(x.ndim == 3, f"input must be 3-D, got shape {list(x.shape)}")
    max_time, n_batch = (x.shape[0], x.shape[1]) if time_major else (x.shape[1], x.shape[0])
    n_input = x.shape[2]
    w = weights
    state_h, state_c = ctx.input(18), ctx.input(19)
    for name, t, dt in (("output_state", state_h, np.int8), ("cell_state", state_c, np.int16)):
        ctx.check(t is not None, f"{name} (a variable tensor) is required")
        _check_type(ctx, t, name, dt)
    for name, t in w.items():
        if name.endswith("_weights") and not name.startswith("cell_to"):
            _check_type(ctx, t, name, np.int8)
        elif name.startswith("cell_to") or name.endswith("layer_norm_coefficients"):
            _check_type(ctx, t, name, np.int16)
        else:
            _check_type(ctx, t, name, np.int32)
        if t is not None:
            ctx.check(t.data is not None, f"{name} must be constant in an integer LSTM")
    wxo, who = w["input_to_output_weights"], w["recurrent_to_output_weights"]
    ctx.check(wxo is not None and wxo.ndim == 2, "input_to_output_weights must be 2-D")
    ctx.check(who is not None and who.ndim == 2,
              "recurrent_to_output_weights must be 2-D (an integer LSTM has no diagonal recurrent weights)")
    n_cell, n_output = wxo.shape[0], who.shape[1]
    ctx.check(wxo.shape[1] == n_input, f"input_to_output_weights has depth {wxo.shape[1]}, input has {n_input}")
    cifg = w["input_to_input_weights"] is None
    ctx.check(cifg == (w["recurrent_to_input_weights"] is None),
              "input_to_input_weights and recurrent_to_input_weights must be both present or absent")
    for g in GATES:
        if g == "input" and cifg:
            for name in ("input_gate_bias", "cell_to_input_weights", "input_layer_norm_coefficients"):
                ctx.check(w[name] is None, f"{name} must be absent with CIFG (no input gate)")
            continue
        wx, wh, b = w[f"input_to_{g}_weights"], w[f"recurrent_to_{g}_weights"], w[f"{g}_gate_bias"]
        ctx.check(wx is not None and wx.shape == (n_cell, n_input),
                  f"input_to_{g}_weights must have shape {[n_cell, n_input]}")
        ctx.check(wh is not None and wh.shape == (n_cell, n_output),
                  f"recurrent_to_{g}_weights must have shape {[n_cell, n_output]}")
        ctx.check(b is not None and b.shape == (n_cell,), f"{g}_gate_bias must have shape [{n_cell}]")
        if use_ln:
            t = w[f"{g}_layer_norm_coefficients"]
            ctx.check(t is not None and t.shape == (n_cell,), f"{g}_layer_norm_coefficients must have shape [{n_cell}]")
    peeps = [w[f"cell_to_{g}_weights"] for g in ("input", "forget", "output")]
    peep = peeps[2] is not None
    ctx.check(((peeps[0] is not None or cifg) and peeps[1] is not None and peeps[2] is not None)
              or all(t is None for t in peeps), "peephole weights must be all present or all absent")
    for g, t in zip(("input", "forget", "output"), peeps):
        if t is not None:
            ctx.check(t.shape == (n_cell,), f"cell_to_{g}_weights must have shape [{n_cell}]")
    wp, bp = w["projection_weights"], w["projection_bias"]
    if wp is not None:
        ctx.check(wp.shape == (n_output, n_cell), f"projection_weights must have shape {[n_output, n_cell]}")
    else:
        ctx.check(bp is None, "projection_bias without projection_weights")
        ctx.check(n_output == n_cell, f"without projection n_output ({n_output}) must equal n_cell ({n_cell})")
    if bp is not None:
        ctx.check(bp.shape == (n_output,), f"projection_bias must have shape [{n_output}]")
    if peep:
        ctx.check(n_output <= n_cell, f"peephole with n_output ({n_output}) > n_cell ({n_cell}): TFLite's integer "
                                      f"peephole product runs over n_output entries and reads past the weights")
    for name, st, n in (("output_state", state_h, n_output), ("cell_state", state_c, n_cell)):
        ctx.check(st.size == n_batch * n, f"{name} has {st.size} elements, expected batch {n_batch} x {n}")

    out = ctx.output(0)
    ctx.check(out.dtype == np.int8, f"output has type {out.dtype.name}: an integer LSTM writes int8")
    out = ctx.set_output(0, x.shape[:2] + (n_output,), np.int8)

    # quantization (PopulateQuantizedLstmParams8x8_16)
    in_scale, in_zp = _per_tensor(ctx, x, "input")
    h_scale, h_zp = _per_tensor(ctx, state_h, "output_state")
    c_scale, _ = _per_tensor(ctx, state_c, "cell_state")
    out_scale, _ = _per_tensor(ctx, out, "output")
    ok, cell_scale = fx.checked_log2(c_scale)
    ctx.check(ok, f"cell_state scale {c_scale} must be a power of two")
    ctx.check(-30 <= cell_scale <= 0, f"cell_state scale 2^{cell_scale} is out of range (2^-30 .. 1)")
    no_tanh = not 0 <= 15 + cell_scale <= 6
    # TFLite's integer tanh of the cell state takes 15 + cell_scale integer bits, 0..6; outside that range (the
    # converter writes 2^-16 for a cell state calibrated within +-0.5) it leaves its output buffer alone, and
    # the hidden state uses whatever that buffer holds: the input gate, or (CIFG) stale arena memory
    ctx.check(not (no_tanh and cifg), f"cell_state scale 2^{cell_scale} with CIFG: TFLite's integer tanh takes "
                                      f"2^-15 .. 2^-9 and otherwise reads an unwritten buffer")
    inter_scale = []
    for k in range(4):
        if use_ln:
            t = _intermediate(ctx, k)
            ctx.check(t.quantization.scales.size >= 1, f"intermediate {k} (gate scale with layer norm) has no "
                                                       f"quantization")
            inter_scale.append(f32(t.quantization.scales[0]))
        else:
            _intermediate(ctx, k)
            inter_scale.append(f32(2.0 ** -12))
    hidden = _intermediate(ctx, 4)
    ctx.check(hidden.quantization.scales.size >= 1, "intermediate 4 (the hidden state scale) has no quantization")
    s4 = f32(hidden.quantization.scales[0])
    hidden_zp = int(hidden.quantization.zero_points[0]) if hidden.quantization.zero_points.size else 0

    def scale(t, name):
        return f32(_per_tensor(ctx, t, name)[0]) if t is not None else f32(1.0)

    p = np.zeros(_Q_SIZE, np.int64)
    p[_Q_BATCH], p[_Q_TIME], p[_Q_INPUT], p[_Q_CELL], p[_Q_OUTPUT] = n_batch, max_time, n_input, n_cell, n_output
    p[_Q_TIME_MAJOR], p[_Q_CIFG], p[_Q_PEEP], p[_Q_LN], p[_Q_PROJ] = time_major, cifg, peep, use_ln, wp is not None
    p[_Q_CELL_SCALE], p[_Q_NO_TANH] = cell_scale, no_tanh
    cell_clip = float(ctx.options.get("cell_clip", 0.0))
    proj_clip = float(ctx.options.get("proj_clip", 0.0))
    ctx.check(cell_clip >= 0 and proj_clip >= 0, f"cell_clip ({cell_clip}) and proj_clip ({proj_clip}) must be >= 0")
    if cell_clip > 0:
        p[_Q_CELL_CLIP] = int(min(max(f32(cell_clip) / f32(c_scale), f32(-32768.0)), f32(32767.0)))
    if proj_clip > 0:
        p[_Q_PROJ_CLIP] = int(min(max(f32(proj_clip) / f32(out_scale), f32(-128.0)), f32(127.0)))
    p[_Q_HIDDEN_ZP], p[_Q_STATE_ZP] = hidden_zp, h_zp
    f_in, f_h = f32(in_scale), f32(h_scale)
    for gi, g in enumerate(GATES):
        q = _Q_GATE + _Q_GSTRIDE * gi
        if g == "input" and cifg:
            continue
        eff_x = f32(scale(w[f"input_to_{g}_weights"], f"input_to_{g}_weights") * f_in) / inter_scale[gi]
        eff_h = f32(scale(w[f"recurrent_to_{g}_weights"], f"recurrent_to_{g}_weights") * f_h) / inter_scale[gi]
        p[q], p[q + 1] = fx.quantize_multiplier(float(f32(eff_x)))
        p[q + 2], p[q + 3] = fx.quantize_multiplier(float(f32(eff_h)))
        if peep and g != "cell":
            wc_scale = scale(w[f"cell_to_{g}_weights"], f"cell_to_{g}_weights")
            eff_c = f32(2.0 ** cell_scale * float(wc_scale) / float(inter_scale[gi]))
            p[q + 4], p[q + 5] = fx.quantize_multiplier(float(eff_c))
        ln_scale = scale(w[f"{g}_layer_norm_coefficients"], f"{g}_layer_norm_coefficients") if use_ln else f32(1.0)
        p[q + 6], p[q + 7] = fx.quantize_multiplier(float(ln_scale))
        p[q + 8] = max(1, int(f32(10000.0) * ln_scale))
        # the official kernels shift the int32 products left by these shifts in C: undefined past 31 bits
        gate = f"the {g} gate scale {float(inter_scale[gi]):.6g}"
        fx.check_left_shift(ctx, p[q + 1], f"input_to_{g}_weights scale x input {x.name!r} scale {float(f_in):.6g} "
                                           f"over {gate}")
        fx.check_left_shift(ctx, p[q + 3], f"recurrent_to_{g}_weights scale x output_state {state_h.name!r} scale "
                                           f"{float(f_h):.6g} over {gate}")
        if peep and g != "cell":
            fx.check_left_shift(ctx, p[q + 5], f"cell_to_{g}_weights scale x cell_state scale 2^{cell_scale} over "
                                               f"{gate}")
        if use_ln:  # the layer norm rescales with the coefficients' multiplier and shift + 12
            fx.check_left_shift(ctx, p[q + 7] + 12, f"{g}_layer_norm_coefficients scale {float(ln_scale):.6g} "
                                                    f"(x 2^12)")
    p[_Q_HIDDEN_M], p[_Q_HIDDEN_S] = fx.quantize_multiplier(float(f32(2.0 ** -15 / float(s4) * 2.0 ** -15)))
    fx.check_left_shift(ctx, p[_Q_HIDDEN_S], f"2^-30 over the hidden state scale {float(s4):.6g} (intermediate 4)")
    if wp is not None:
        eff_p = f32(f32(scale(wp, "projection_weights") * s4) / f_h)
        p[_Q_PROJ_M], p[_Q_PROJ_S] = fx.quantize_multiplier(float(eff_p))
        fx.check_left_shift(ctx, p[_Q_PROJ_S], f"projection_weights scale x the hidden state scale {float(s4):.6g} "
                                               f"over output_state {state_h.name!r} scale {float(f_h):.6g}")
    if n_batch == 0 or max_time == 0 or n_cell == 0:
        return

    # constants: concatenated gate matrices (zeros for an absent input gate), zero-point folded biases
    def data(t, shape, dtype):
        return np.zeros(shape, dtype) if t is None else np.asarray(t.data, dtype).reshape(shape)

    wx = np.stack([data(w[f"input_to_{g}_weights"], (n_cell, n_input), np.int8) for g in GATES])
    wh = np.stack([data(w[f"recurrent_to_{g}_weights"], (n_cell, n_output), np.int8) for g in GATES])
    wc = np.stack([data(w[f"cell_to_{g}_weights"], (n_cell,), np.int16) for g in ("input", "forget", "output")])
    ln_w = np.stack([data(w[f"{g}_layer_norm_coefficients"] if use_ln else None, (n_cell,), np.int16)
                     for g in GATES])
    biases = np.stack([data(w[f"{g}_gate_bias"], (n_cell,), np.int32) for g in GATES]).astype(np.int64)
    rows_x = wx.astype(np.int64).sum(axis=2)
    rows_h = wh.astype(np.int64).sum(axis=2)
    eff_b = np.concatenate([(0 if use_ln else biases) + rows_x * -in_zp, rows_h * -h_zp])
    ln_b = biases if use_ln else np.zeros_like(biases)
    if wp is not None:
        wp_a = data(wp, (n_output, n_cell), np.int8)
        bp_a = data(bp, (n_output,), np.int32).astype(np.int64) + wp_a.astype(np.int64).sum(axis=1) * hidden_zp
    else:
        wp_a, bp_a = np.zeros(1, np.int8), np.zeros(1, np.int64)
    wrap = fx.wrap_array
    rows = n_batch if time_major else 1
    ctx.call(lstm_integer, ctx.view(x, (x.size,)), wx.ravel(), wh.ravel(), wc.ravel(), ln_w.ravel(),
             wrap(ln_b, 32).astype(np.int32).ravel(), wrap(eff_b, 32).astype(np.int32).ravel(), wp_a.ravel(),
             wrap(bp_a, 32).astype(np.int32), _activation_tables(0 if no_tanh else 15 + cell_scale),
             ctx.view(state_h, (state_h.size,)), ctx.view(state_c, (state_c.size,)), ctx.view(out, (out.size,)),
             ctx.temp((5 * rows * n_cell,), np.int16), ctx.temp((rows * n_cell,), np.int8), p)
