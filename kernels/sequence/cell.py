"""Building blocks of the sequence ops (LSTM, RNN, SVDF): activations as TFLite's ApplyActivationToVector applies
them, vector dots, the int8 matrix-vector product of the hybrid kernels, and the prepare helpers that pass absent
tensors as empty arrays."""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base.activation import (
    ACT_NONE,
    ACT_RELU,
    ACT_RELU6,
    ACT_RELU_N1_TO_1,
    ACT_TANH,
    std_clamp_activation,
)
from lite_numba.kernels.base.hybrid_quant import official_is_zero_vector
from lite_numba.kernels.base.vecmath import sigmoid_f32, tanh_f32
from numba import njit

from lite_numba.ops import PrepareContext

SUPPORTED_ACTS = (ACT_NONE, ACT_RELU, ACT_RELU_N1_TO_1, ACT_RELU6, ACT_TANH)


@njit(cache=True, nogil=True)
def activate(x, code):
    """One float32 value through a TFLite activation (codes as in ApplyActivationToVector, which the float and hybrid
    RNN, SVDF and LSTM cell use): its clamps are std::max / std::min, so a NaN becomes 0 (RELU, RELU6) or -1
    (RELU_N1_TO_1), as officially (std_clamp_activation)."""
    if code == 0:
        return x
    if code == 1 or code == 2 or code == 3:
        return std_clamp_activation(x, code)
    if code == 4:
        return tanh_f32(x)
    return sigmoid_f32(x)


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def dot(w, w_off, x, x_off, n):
    """float32 sum over k of w[w_off + k] * x[x_off + k]. Summed in vector lanes (reassociated): the official
    kernel's order (NEON-style 4-lane partial sums on x86) is not sequential either; results agree to ~1e-7."""
    s = np.float32(0.0)
    wr, xr = w[w_off:w_off + n], x[x_off:x_off + n]
    for k in range(n):
        s += wr[k] * xr[k]
    return s


@njit(cache=True, nogil=True)
def is_zero_span(v, start, n):
    """The official all-zero test (tensor_utils::IsZeroVector) of v[start:start + n], which lets the LSTM (float and
    hybrid), hybrid RNN and hybrid SVDF skip a product: as the x86 build runs it (NeonIsZeroVector), a NaN in a
    block of four counts as zero, one in the tail of n % 4 does not (official_is_zero_vector)."""
    return official_is_zero_vector(v, start, n)


@njit(cache=True, inline="always")
def sequence_step(it, time_major, forward, max_time, n_batch):
    """(batch row, time step, input row) of step `it` of a sequence walked in TFLite's order: time major, every batch
    row of a time step before the next step; batch major, each row's whole sequence in turn. The time step runs
    backwards when not forward; the input row indexes the flat [T, B, .] (time major) or [B, T, .] input."""
    if time_major:
        t, b = it // n_batch, it % n_batch
    else:
        b, t = it // max_time, it % max_time
    t_rel = t if forward else max_time - 1 - t
    return b, t_rel, t_rel * n_batch + b if time_major else b * max_time + t_rel


@njit(cache=True, inline="always")
def step_is_zero(v, time_major, t_rel, row, n_batch, n):
    """The all-zero test (is_zero_span) a sequence step makes of its input v of n values a row: the whole time step
    t_rel (every batch row) when time major, the step's own input row when batch major."""
    if time_major:
        return is_zero_span(v, t_rel * n_batch * n, n_batch * n)
    return is_zero_span(v, row * n, n)


@njit(cache=True, nogil=True, inline="always")
def int8_matvec_t(x, xo, x_zp, w_t, n, n_rows, acc):
    """acc[j] = sum_k w[j, k] * (x[xo + k] - x_zp) in int32 for j < n_rows, the weights stored transposed
    (w_t = W^T, [n, n_rows]): one multiply-add along the row axis per input element, four elements per pass over
    acc, which vectorizes (a per-row int8 dot reduces in int64 lanes)."""
    for j in range(n_rows):
        acc[j] = 0
    k4 = n - n % 4
    for k in range(0, k4, 4):
        x0 = np.int32(x[xo + k]) - np.int32(x_zp)
        x1 = np.int32(x[xo + k + 1]) - np.int32(x_zp)
        x2 = np.int32(x[xo + k + 2]) - np.int32(x_zp)
        x3 = np.int32(x[xo + k + 3]) - np.int32(x_zp)
        w0 = w_t[k * n_rows:(k + 1) * n_rows]
        w1 = w_t[(k + 1) * n_rows:(k + 2) * n_rows]
        w2 = w_t[(k + 2) * n_rows:(k + 3) * n_rows]
        w3 = w_t[(k + 3) * n_rows:(k + 4) * n_rows]
        for j in range(n_rows):
            acc[j] += x0 * np.int32(w0[j]) + x1 * np.int32(w1[j]) + x2 * np.int32(w2[j]) + x3 * np.int32(w3[j])
    for k in range(k4, n):
        x0 = np.int32(x[xo + k]) - np.int32(x_zp)
        w0 = w_t[k * n_rows:(k + 1) * n_rows]
        for j in range(n_rows):
            acc[j] += x0 * np.int32(w0[j])


@njit(cache=True, nogil=True)
def hybrid_product(q, sf, zp, qo, b, n, w_t, scale, rs, asym, buf, go, n_rows, iacc):
    """buf[go + j] += float(int32 dot(W row j, q[qo:qo + n]) - row_sum[j] * zp[b]) * (sf[b] * scale), as TFLite's
    hybrid MatrixBatchVectorMultiplyAccumulate; w_t is W^T ([n, n_rows]), iacc an int32 scratch of n_rows."""
    s = sf[b] * scale
    int8_matvec_t(q, qo, 0, w_t, n, n_rows, iacc)
    for j in range(n_rows):
        acc = iacc[j]
        if asym:
            acc -= rs[j] * zp[b]
        buf[go + j] += np.float32(acc) * s


EMPTY_F32 = np.zeros(0, np.float32)


@njit(cache=True, inline="always")
def step_rows(gidx, time_major, forward, max_time, n_batch):
    """(first batch row, time step, first input row) of step group gidx of a sequence: time major, one time step of
    every batch row (backwards when not forward); batch major, one step of one row."""
    if time_major:
        t = gidx if forward else max_time - 1 - gidx
        return 0, t, t * n_batch
    first_b = gidx // max_time
    tt = gidx % max_time
    t = tt if forward else max_time - 1 - tt
    return first_b, t, first_b * max_time + t


def flat(ctx: PrepareContext, t):
    """A tensor as a flat float32 argument, or an empty array when absent."""
    if t is None:
        return ctx.const(EMPTY_F32)
    return ctx.view(t, (t.size,))


def cell_activation(ctx: PrepareContext) -> int:
    act = int(ctx.options.get("fused_activation_function", 0))
    ctx.check(act in SUPPORTED_ACTS, f"fused activation {act} is not supported")
    return act


EMPTY_I8 = np.zeros(0, np.int8)


def t_i8(ctx: PrepareContext, t):
    """A constant int8 weight matrix [rows, cols] as its flat transpose [cols, rows] (what int8_matvec_t reads), or
    an empty array when absent."""
    if t is None:
        return ctx.const(EMPTY_I8)
    m = np.asarray(t.data, np.int8).reshape(t.shape[0], -1)
    return ctx.const(np.ascontiguousarray(m.T).reshape(-1))


def bidirectional_start(ctx: PrepareContext):
    """The options and input every bidirectional sequence op starts from: (merge_outputs, time_major, x, batch,
    max_time, input depth, fused activation); merged outputs are one output tensor, else two."""
    merge = bool(ctx.options.get("merge_outputs", False))
    ctx.check_num(outputs=1 if merge else 2)
    time_major = bool(ctx.options.get("time_major", False))
    x = ctx.input(0)
    return (merge, time_major, x, *sequence_dims(ctx, x, time_major), cell_activation(ctx))


def sequence_dims(ctx: PrepareContext, x, time_major: bool) -> tuple[int, int, int]:
    ctx.check(x is not None, "input is required")
    ctx.check(x.dtype == np.float32, f"input has type {x.dtype.name}: only float32 is supported here (integer "
                                      f"activations: int8 UNIDIRECTIONAL_SEQUENCE_LSTM only)")
    ctx.check(x.ndim == 3, f"input must be 3-D, got shape {list(x.shape)}")
    max_time, n_batch = (x.shape[0], x.shape[1]) if time_major else (x.shape[1], x.shape[0])
    return n_batch, max_time, x.shape[2]
