"""SVDF: float32 (svdf_float), fully integer (v3: int8 input / weights_feature / output, int16 weights_time and
state, int32 bias) and hybrid (v2 / v4: float input, state, bias and output, int8 weights_feature and weights_time).

Semantics as TFLite's svdf.cc Prepare / Eval and reference_ops EvalIntegerSVDF / EvalHybridSVDF (which the x86
build runs too), per invoke:

- integer: the flat int16 state [batch, filters, memory] shifts left by one element; per batch row and filter the
  int32 dot product sum_k W_f[f, k] * (x[b, k] - input_zp) is rescaled by mbqm(., s1) (s1 = s_in * s_wf / s_state,
  a float32 product and quotient as C++ computes it, then QuantizeMultiplier), saturated to int16 and written into
  the state's last column; scratch[b, f] = int32 dot(W_t[f], state[b, f]); out_tmp[b, u] = sum over the rank
  filters of u + bias[u] (int32, wrapping); out = clamp_int8(mbqm(out_tmp, s2) + output_zp) with
  s2 = s_state * s_wt / s_out. TFLite's Eval takes only the RELU activation and applies nothing but the int8 clamp.
- hybrid: the float state shifts left by one element; scratch = 0; unless the whole input is zero, every batch
  row is quantized to int8 (BatchQuantizeFloats, symmetric or asymmetric: quantize_rows, the official x86 NEON
  rounding), its scaling factor multiplied by the weights_feature scale, and scratch[b, f] += float(int32 dot -
  row_sum[f] * zp[b]) * sf[b]; scratch goes into the state's last column; then the float time weights (int8 *
  scale, dequantized once in float32) as the float SVDF: dot with the state, rank reduction, + bias, activation.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base import fixedpoint as fx
from lite_numba.kernels.base.fixedpoint import multiply_by_quantized_multiplier as _mbqm
from lite_numba.kernels.base.hybrid_quant import quantize_rows, refuse_minus_128
from lite_numba.kernels.sequence.cell import activate, cell_activation, dot, flat, int8_matvec_t, is_zero_span
from numba import njit

from lite_numba.ops import PrepareContext, kernel

# integer parameter vector (int64)
(_S_BATCH, _S_INPUT, _S_FILTERS, _S_MEM, _S_RANK, _S_HAS_BIAS, _S_IN_ZP, _S_OUT_ZP, _S_M1, _S_SH1, _S_M2,
 _S_SH2) = range(12)
_S_SIZE = 12


@njit(cache=True, nogil=True)
def svdf_integer(x, w_f, w_t, bias, state, out, scratch, p):
    """One integer SVDF step (module docstring). x int8 [batch * input], w_f int8 W_f^T [input * filters], w_t int16
    [filters * memory], bias int32 [units] or empty, state int16 [batch * filters * memory], out int8
    [batch * units], scratch int32 [batch * filters]."""
    n_batch, n_in, n_f, mem, rank = p[_S_BATCH], p[_S_INPUT], p[_S_FILTERS], p[_S_MEM], p[_S_RANK]
    has_bias, in_zp, out_zp = p[_S_HAS_BIAS] != 0, p[_S_IN_ZP], p[_S_OUT_ZP]
    m1, sh1, m2, sh2 = p[_S_M1], p[_S_SH1], p[_S_M2], p[_S_SH2]
    units = n_f // rank
    total = n_batch * n_f * mem
    for k in range(total - 1):
        state[k] = state[k + 1]
    for b in range(n_batch):
        int8_matvec_t(x, b * n_in, in_zp, w_f, n_in, n_f, scratch)
        for f in range(n_f):
            v = _mbqm(scratch[f], m1, sh1)
            v = min(max(v, -32768), 32767)
            state[(b * n_f + f) * mem + mem - 1] = np.int16(v)
    for b in range(n_batch):
        for f in range(n_f):
            o = (b * n_f + f) * mem
            sr = state[o:o + mem]
            wr = w_t[f * mem:(f + 1) * mem]
            acc = np.int64(0)
            for k in range(mem):
                acc += np.int64(wr[k]) * np.int64(sr[k])
            scratch[b * n_f + f] = np.int32(acc)  # int32 wrap, as TFLite's int32 accumulator
    for i in range(n_batch * units):
        s = np.int64(0)
        for k in range(rank):
            s += np.int64(scratch[i * rank + k])
        if has_bias:
            s += np.int64(bias[i % units])
        v = _mbqm(np.int32(s), m2, sh2) + out_zp
        out[i] = np.int8(min(max(v, -128), 127))


@njit(cache=True, inline="always")
def _time_and_rank(w_t, bias, state, out, scratch, n_batch, n_f, mem, rank, has_bias, act):
    """The float SVDF's second half, once the state holds this step's column: scratch[b, f] = W_t[f] . state[b, f],
    then out[b, u] = act(bias[u] + the sum over the rank filters f of u of scratch[b, f])."""
    units = n_f // rank
    for b in range(n_batch):
        for f in range(n_f):
            scratch[b * n_f + f] = dot(w_t, f * mem, state, (b * n_f + f) * mem, mem)
    for i in range(n_batch * units):
        s = np.float32(0.0)
        for k in range(rank):
            s += scratch[i * rank + k]
        if has_bias:
            s += bias[i % units]
        out[i] = activate(s, act)


@njit(cache=True, nogil=True)
def svdf_hybrid(x, w_f, w_t, bias, state, out, scratch, acc, qx, sf, zp, rowsums, p, wf_scale):
    """One hybrid SVDF step (module docstring). p = [batch, input, filters, memory, rank, has_bias, act,
    asymmetric]; w_f is W_f^T [input * filters] (int8), w_t the dequantized float32 time weights; acc int32
    [filters]; qx int8 [batch * input], sf / zp [batch]."""
    n_batch, n_in, n_f, mem, rank, has_bias, act, asym = p[0], p[1], p[2], p[3], p[4], p[5] != 0, p[6], p[7] != 0
    total = n_batch * n_f * mem
    for k in range(total - 1):
        state[k] = state[k + 1]
    for i in range(n_batch * n_f):
        scratch[i] = np.float32(0.0)
    if not is_zero_span(x, 0, n_batch * n_in):  # the official IsZeroVector: NaNs in blocks of four count as zero
        quantize_rows(x, n_batch, n_in, asym, qx, sf, zp)
        for b in range(n_batch):
            sf[b] = sf[b] * wf_scale
        for b in range(n_batch):
            int8_matvec_t(qx, b * n_in, 0, w_f, n_in, n_f, acc)
            s = sf[b]
            for j in range(n_f):
                a = acc[j]
                if asym:
                    a -= rowsums[j] * zp[b]
                scratch[b * n_f + j] += np.float32(a) * s
    for i in range(n_batch * n_f):
        state[i * mem + mem - 1] = scratch[i]
    _time_and_rank(w_t, bias, state, out, scratch, n_batch, n_f, mem, rank, has_bias, act)


# --- prepare --------------------------------------------------------------------------------------------------------

def _scale(t) -> np.float32:
    return np.float32(t.quantization.scales[0])


def _quantized(ctx: PrepareContext, name: str, t) -> None:
    q = t.quantization
    ctx.check(q is not None and q.scales.size >= 1, f"{name} must be quantized (a scale) in an integer SVDF")


def prepare_svdf_integer(ctx: PrepareContext, x, w_f, w_t, bias, state, dims) -> None:
    """int8 input / weights_feature / output, int16 weights_time and state, int32 bias (SVDF v3)."""
    n_batch, n_in, n_f, mem, rank, units = dims
    for name, t, want in (("weights_feature", w_f, np.int8), ("weights_time", w_t, np.int16),
                          ("state", state, np.int16)):
        if t.dtype != want:
            ctx.fail(f"{name} has type {t.dtype.name}: an int8 SVDF takes {np.dtype(want).name}")
    if bias is not None and bias.dtype != np.int32:
        ctx.fail(f"bias has type {bias.dtype.name}: an int8 SVDF takes int32")
    act = int(ctx.options.get("fused_activation_function", 0))
    ctx.check(act == 1, f"an int8 SVDF takes only the RELU activation (as TFLite), got fused activation {act}")
    out_t = ctx.output(0)
    ctx.check(out_t is not None and out_t.dtype == np.int8,
              f"output has type {None if out_t is None else out_t.dtype.name}: an int8 SVDF outputs int8")
    for name, t in (("input", x), ("weights_feature", w_f), ("weights_time", w_t), ("state", state),
                    ("output", out_t)):
        _quantized(ctx, name, t)
    s_in, s_wf, s_wt, s_st, s_out = (_scale(t) for t in (x, w_f, w_t, state, out_t))
    ctx.check(s_st != 0 and s_out != 0, "state and output scales must be nonzero")
    # C++ evaluates these in float (float operands), then widens to double for QuantizeMultiplier
    e1 = float(np.float32(np.float32(s_in * s_wf) / s_st))
    e2 = float(np.float32(np.float32(s_st * s_wt) / s_out))
    m1, sh1 = fx.quantize_multiplier(e1)
    m2, sh2 = fx.quantize_multiplier(e2)
    # the official kernel shifts the int32 time-weighted sum left by sh2 in C (MultiplyByQuantizedMultiplier):
    # undefined past 31 bits. (sh1 is applied by its matrix product, which gives zeros there, as we do.)
    fx.check_left_shift(ctx, sh2, f"state {state.name!r} scale {float(s_st):.6g} x weights_time {w_t.name!r} scale "
                                  f"{float(s_wt):.6g} over output {out_t.name!r} scale {float(s_out):.6g}")
    out = ctx.set_output(0, (n_batch, units), np.int8)
    if out.size == 0 or mem == 0:
        return
    p = np.zeros(_S_SIZE, np.int64)
    p[_S_BATCH], p[_S_INPUT], p[_S_FILTERS], p[_S_MEM], p[_S_RANK] = n_batch, n_in, n_f, mem, rank
    p[_S_HAS_BIAS], p[_S_IN_ZP], p[_S_OUT_ZP] = bias is not None, int(x.quantization.zero_points[0]), \
        int(out_t.quantization.zero_points[0])
    p[_S_M1], p[_S_SH1], p[_S_M2], p[_S_SH2] = m1, sh1, m2, sh2
    ctx.check(w_f.data is not None, "weights_feature must be constant in an int8 SVDF")
    ctx.call(svdf_integer, ctx.view(x, (x.size,)), ctx.const(_transposed(w_f, n_f)), ctx.view(w_t, (w_t.size,)),
             ctx.const(np.zeros(0, np.int32)) if bias is None else ctx.view(bias, (bias.size,)),
             ctx.view(state, (state.size,)), ctx.view(out, (out.size,)), ctx.temp((n_batch * n_f,), np.int32), p)


def _transposed(w_f, n_f: int) -> np.ndarray:
    """W_f^T flattened ([input, filters]): the layout int8_matvec_t reads."""
    return np.ascontiguousarray(np.asarray(w_f.data, np.int8).reshape(n_f, -1).T).reshape(-1)


def prepare_svdf_hybrid(ctx: PrepareContext, x, w_f, w_t, bias, state, dims, act: int) -> None:
    """float input / state / bias / output, int8 weights_feature and weights_time (SVDF v2; v4 asymmetric)."""
    n_batch, n_in, n_f, mem, rank, units = dims
    for name, t, want in (("weights_feature", w_f, np.int8), ("weights_time", w_t, np.int8),
                          ("bias", bias, np.float32), ("state", state, np.float32)):
        if t is not None and t.dtype != want:
            ctx.fail(f"{name} has type {t.dtype.name}: a hybrid SVDF takes {np.dtype(want).name}")
    for name, t in (("weights_feature", w_f), ("weights_time", w_t)):
        ctx.check(t.data is not None and t.quantization is not None and t.quantization.scales.size == 1,
                  f"{name} must be constant with one (per-tensor) scale in a hybrid SVDF")
    refuse_minus_128(ctx, f"weights_feature {w_f.name!r}", w_f.data)  # weights_time is multiplied in float
    out = ctx.set_output(0, (n_batch, units), np.float32)
    if out.size == 0 or mem == 0:
        return
    wt_float = (np.asarray(w_t.data, np.int8).reshape(-1).astype(np.float32) * _scale(w_t)).astype(np.float32)
    rowsums = np.asarray(w_f.data, np.int8).reshape(n_f, -1).astype(np.int32).sum(axis=1, dtype=np.int32)
    asym = bool(ctx.options.get("asymmetric_quantize_inputs", False))
    p = np.array([n_batch, n_in, n_f, mem, rank, bias is not None, act, asym], np.int64)
    ctx.call(svdf_hybrid, flat(ctx, x), ctx.const(_transposed(w_f, n_f)), ctx.const(wt_float), flat(ctx, bias),
             flat(ctx, state), flat(ctx, out), ctx.temp((n_batch * n_f,), np.float32), ctx.temp((n_f,), np.int32),
             ctx.temp((max(n_batch * n_in, 1),), np.int8), ctx.temp((n_batch,), np.float32),
             ctx.temp((n_batch,), np.int32), rowsums.astype(np.int32), p, _scale(w_f))


@njit(cache=True, nogil=True)
def svdf_float(x, w_f, w_t, bias, state, out, scratch, p):
    """One SVDF step. p = [batch, input, filters, memory, rank, has_bias, act]; state [batch, filters, memory]
    (flat) shifts left by one, takes W_f x in its last column; out[b, u] = act(bias[u] +
    sum over the rank filters f of u: W_t[f] . state[b, f])."""
    n_batch, n_in, n_f, mem, rank, has_bias, act = p[0], p[1], p[2], p[3], p[4], p[5] != 0, p[6]
    total = n_batch * n_f * mem
    for k in range(total - 1):
        state[k] = state[k + 1]
    for b in range(n_batch):
        for f in range(n_f):
            acc = np.float32(0.0)
            acc += dot(w_f, f * n_in, x, b * n_in, n_in)
            state[(b * n_f + f) * mem + mem - 1] = acc
    _time_and_rank(w_t, bias, state, out, scratch, n_batch, n_f, mem, rank, has_bias, act)


@kernel("SVDF")
def SVDF(ctx: PrepareContext) -> None:
    """SVDF (float32; int8 v3 and hybrid v2/v4 above): inputs (x [batch, input], weights_feature
    [filters, input], weights_time [filters, memory], bias [units] optional, activation state variable
    [batch, filters * memory]); output [batch, units]."""
    ctx.check_num(inputs=5, outputs=1)
    x, w_f, w_t, bias, state = (ctx.input(i) for i in range(5))
    ctx.check(x is not None and w_f is not None and w_t is not None and state is not None,
              "input, weights_feature, weights_time and state are required")
    ctx.check(x.dtype in (np.float32, np.int8), f"input has type {x.dtype.name}: SVDF takes float32 or int8")
    quantized = x.dtype == np.int8 or w_f.dtype != np.float32
    if not quantized:
        for name, t in (("weights_time", w_t), ("bias", bias), ("state", state)):
            if t is not None and t.dtype != np.float32:
                ctx.fail(f"{name} has type {t.dtype.name}: a float SVDF takes float32")
    ctx.check(x.ndim == 2, f"input must be 2-D, got shape {list(x.shape)}")
    ctx.check(w_f.ndim == 2 and w_t.ndim == 2, "weights_feature and weights_time must be 2-D")
    rank = int(ctx.options.get("rank", 0))
    n_f = w_f.shape[0]
    ctx.check(rank > 0 and n_f % rank == 0, f"rank {rank} must be > 0 and divide the {n_f} filters")
    units, mem = n_f // rank, w_t.shape[1]
    n_batch, n_in = x.shape
    ctx.check(w_f.shape[1] == n_in, f"weights_feature has depth {w_f.shape[1]}, input has {n_in}")
    ctx.check(w_t.shape[0] == n_f, f"weights_time has {w_t.shape[0]} rows, expected {n_f}")
    if bias is not None:
        ctx.check(bias.shape == (units,), f"bias has shape {list(bias.shape)}, expected [{units}]")
    ctx.check(state.shape == (n_batch, mem * n_f),
              f"state has shape {list(state.shape)}, expected {[n_batch, mem * n_f]}")
    if quantized:  # integer (v3) or hybrid (v2 / v4)
        dims = (n_batch, n_in, n_f, mem, rank, units)
        if x.dtype == np.int8:
            prepare_svdf_integer(ctx, x, w_f, w_t, bias, state, dims)
        else:
            prepare_svdf_hybrid(ctx, x, w_f, w_t, bias, state, dims, cell_activation(ctx))
        return
    act = cell_activation(ctx)
    out = ctx.set_output(0, (n_batch, units), np.float32)
    if out.size == 0 or mem == 0:
        return
    p = np.array([n_batch, n_in, n_f, mem, rank, bias is not None, act], np.int64)
    ctx.call(svdf_float, flat(ctx, x), flat(ctx, w_f), flat(ctx, w_t), flat(ctx, bias), flat(ctx, state),
             flat(ctx, out), ctx.temp((n_batch * n_f,), np.float32), p)
