"""Quantized SVDF against the official runtime: fully integer (v3: int8 input / weights_feature / output, int16
weights_time and state, int32 bias; bit-exact) and hybrid (v2 symmetric, v4 asymmetric input quantization: float
input / state / output, int8 weights; within 1e-4 * max(1, max|ref|)); state carried over several invokes, then
reset_all_variables; errors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import example, given, settings
from hypothesis import strategies as st

import lite_numba
from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close, require_official

# the state-carrying runner, under the name the hypothesis tests' bodies use (a derandomized test's examples are
# seeded by its source)
from lite_numba.testing import run_both_steps as run_sequence

require_official()


def int_svdf_model(batch, w_f, w_t, bias, rank, *, s_in=0.05, zp_in=3, s_wf=0.01, s_wt=0.002, s_state=0.004,
                   s_out=0.02, zp_out=-128, act="RELU", state_dtype=np.int16):
    n_f, n_input = w_f.shape
    mem = w_t.shape[1]
    b = ModelBuilder()
    x = b.add_input("x", np.int8, [batch, n_input], quant=(s_in, zp_in))
    state = b.add_tensor("state", state_dtype, [batch, n_f * mem], quant=(s_state, 0), is_variable=True)
    ins = [x, b.add_const("wf", w_f, quant=(s_wf, 0)), b.add_const("wt", w_t, quant=(s_wt, 0)),
           b.add_const("b", bias, quant=(s_in * s_wf, 0)) if bias is not None else -1, state]
    y = b.add_tensor("y", np.int8, [batch, n_f // rank], quant=(s_out, zp_out))
    b.add_op("SVDF", ins, [y], options={"rank": rank, "fused_activation_function": act}, version=3)
    b.mark_output(y)
    return b.build()


def hybrid_svdf_model(batch, w_f, w_t, bias, rank, *, s_wf, s_wt, act="NONE", asymmetric=False):
    n_f, n_input = w_f.shape
    mem = w_t.shape[1]
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [batch, n_input])
    state = b.add_tensor("state", np.float32, [batch, n_f * mem], is_variable=True)
    ins = [x, b.add_const("wf", w_f, quant=(s_wf, 0)), b.add_const("wt", w_t, quant=(s_wt, 0)),
           b.add_const("b", bias) if bias is not None else -1, state]
    y = b.add_tensor("y", np.float32, [batch, n_f // rank])
    b.add_op("SVDF", ins, [y], options={"rank": rank, "fused_activation_function": act,
                                        "asymmetric_quantize_inputs": asymmetric}, version=4 if asymmetric else 2)
    b.mark_output(y)
    return b.build()


@example(batch=1, n_input=40, units=32, rank=1, mem=8, has_bias=True, zp_in=-3, zp_out=-128, seed=0)
@settings(max_examples=scaled(14), deadline=None)
@given(batch=st.integers(1, 3), n_input=st.integers(1, 12), units=st.integers(1, 5), rank=st.integers(1, 3),
       mem=st.integers(1, 6), has_bias=st.booleans(), zp_in=st.integers(-20, 20),
       zp_out=st.sampled_from([-128, -128, -5, 10]), seed=st.integers(0, 99))
def test_svdf_int8(batch, n_input, units, rank, mem, has_bias, zp_in, zp_out, seed):
    """Bit-exact over more invokes than the memory (the state shifts all the way through), then after a reset."""
    rng = np.random.default_rng(seed)
    n_f = units * rank
    w_f = rng.integers(-127, 128, (n_f, n_input)).astype(np.int8)
    w_t = rng.integers(-32767, 32768, (n_f, mem)).astype(np.int16)
    # scales chosen so that the int16 state and the int8 output mostly see in-range values (some saturation)
    u = float(rng.choice([0.1, 2.0, 5.0, 12.0]))  # 0.1: the int16 state saturates
    s_state = 0.05 * 0.01 * u
    typical = 74.0 * 74.0 * np.sqrt(n_input) / u * 18900 * np.sqrt(mem * rank)  # |time-weighted sum|, roughly
    bias = rng.integers(-typical, typical, (units,)).astype(np.int32) if has_bias else None
    s_out = s_state * 0.002 * typical / float(rng.uniform(30, 90))
    data = int_svdf_model(batch, w_f, w_t, bias, rank, zp_in=zp_in, s_state=s_state, s_out=s_out, zp_out=zp_out)
    steps = [[rng.integers(-128, 128, (batch, n_input)).astype(np.int8)] for _ in range(mem + 3)]
    for step in run_sequence(data, steps, reset_before=(mem + 1,)):
        for o, r in step:
            np.testing.assert_array_equal(o, r)


def _q(a):
    scale = float(np.abs(a).max()) / 127 or 1.0
    return np.clip(np.round(a / scale), -127, 127).astype(np.int8), scale


@settings(max_examples=scaled(14), deadline=None)
@given(batch=st.integers(1, 3), n_input=st.integers(1, 20), units=st.integers(1, 5), rank=st.integers(1, 3),
       mem=st.integers(1, 6), has_bias=st.booleans(), act=st.sampled_from(["NONE", "RELU", "TANH"]),
       asymmetric=st.booleans(), seed=st.integers(0, 99))
def test_svdf_hybrid(batch, n_input, units, rank, mem, has_bias, act, asymmetric, seed):
    rng = np.random.default_rng(seed)
    n_f = units * rank
    w_f, s_wf = _q(rng.standard_normal((n_f, n_input)).astype(np.float32) * 0.5)
    w_t, s_wt = _q(rng.standard_normal((n_f, mem)).astype(np.float32) * 0.5)
    bias = (rng.standard_normal(units) * 0.3).astype(np.float32) if has_bias else None
    data = hybrid_svdf_model(batch, w_f, w_t, bias, rank, s_wf=s_wf, s_wt=s_wt, act=act, asymmetric=asymmetric)
    steps = [[(rng.standard_normal((batch, n_input)) + (0.7 if asymmetric else 0)).astype(np.float32)]
             for _ in range(mem + 3)]
    steps[1] = [np.zeros((batch, n_input), np.float32)]  # the all-zero input skips the feature product
    for step in run_sequence(data, steps, reset_before=(mem + 1,)):
        for o, r in step:
            assert_close(o, r, 1e-4)


def _expect_error(data, match):
    it = lite_numba.Interpreter(model_content=data)
    with pytest.raises(ValueError, match=match):
        it.allocate_tensors()


def test_svdf_quant_errors():
    rng = np.random.default_rng(3)
    w_f = rng.integers(-127, 128, (4, 3)).astype(np.int8)
    w_t = rng.integers(-300, 300, (4, 2)).astype(np.int16)
    _expect_error(int_svdf_model(1, w_f, w_t, None, 2, act="NONE"), "SVDF.*only the RELU activation")
    _expect_error(int_svdf_model(1, w_f, w_t.astype(np.int8), None, 2), "SVDF.*weights_time has type int8")
    _expect_error(int_svdf_model(1, w_f, w_t, None, 2, state_dtype=np.int8), "SVDF.*state has type int8")
    _expect_error(hybrid_svdf_model(1, w_f, w_t, None, 2, s_wf=0.1, s_wt=0.1), "SVDF.*weights_time has type int16")
