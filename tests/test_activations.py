"""Float activations against the official runtime: RELU family, LOGISTIC, TANH, HARD_SWISH, ELU, GELU (exact and
tanh forms), LEAKY_RELU (alpha), PRELU (alpha broadcast), SOFTMAX and LOG_SOFTMAX. Outputs must agree within 1e-5
of max|ref|; TANH, LOGISTIC and SOFTMAX bit for bit.
Hypothesis runs derandomized so that a second run finds every compiled kernel in the caches."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close, one_op, run_both_single

SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 6.0, -3.0, 3.0, np.nan, np.inf, -np.inf], np.float32)
SEEDS = st.integers(0, 2**31 - 1)
SHAPES = st.lists(st.integers(1, 5), min_size=0, max_size=4).map(tuple)


def f32_op(op, inputs, out_shape, options=None, version=1) -> bytes:
    """A float32 one-op model (lite_numba.testing.one_op); `inputs` are shapes of graph inputs or arrays (constants)."""
    return one_op(op, [s if isinstance(s, np.ndarray) else (np.float32, s) for s in inputs], (np.float32, out_shape),
                  options, version)


def check(data: bytes, arrays, tol=1e-5) -> np.ndarray:
    ours, ref = run_both_single(data, arrays)
    assert ours.shape == ref.shape and ours.dtype == ref.dtype, (ours.shape, ours.dtype, ref.shape, ref.dtype)
    assert_close(ours.reshape(-1), ref.reshape(-1), tol)  # reshaped: assert_close fails on 0-d arrays
    return ours


def floats(rng, shape, scale=4.0) -> np.ndarray:
    a = np.asarray(rng.normal(0, scale, size=shape), np.float32)
    if a.size:
        idx = rng.choice(a.size, size=min(a.size, 3), replace=False)
        a.flat[idx] = rng.choice(SPECIAL, size=len(idx))
    return a


@pytest.mark.parametrize("op", ["RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LOGISTIC", "TANH", "HARD_SWISH",
                                "ELU"])
@settings(max_examples=scaled(5), deadline=None)
@given(shape=SHAPES, seed=SEEDS)
def test_unary_activation(op, shape, seed):
    x = floats(np.random.default_rng(seed), shape)
    check(f32_op(op, [shape], shape), [x])


@pytest.mark.parametrize("approximate", [False, True])
@settings(max_examples=scaled(6), deadline=None)
@given(shape=SHAPES, seed=SEEDS, scale=st.sampled_from([1.0, 4.0, 30.0]))
def test_gelu(approximate, shape, seed, scale):
    x = floats(np.random.default_rng(seed), shape, scale)
    check(f32_op("GELU", [shape], shape, {"approximate": approximate}), [x])


def test_tanh_logistic_bit_exact():
    # kernels/vecmath reproduces the official build's Eigen tanh and logistic step by step: every value must agree
    # bit for bit (NaN with NaN), over the whole interesting range, the clamps, the tails and the specials
    x = np.concatenate([np.linspace(-20, 20, 200_003), np.linspace(-0.01, 0.01, 20_001), -np.logspace(-38, 2, 2000),
                        np.logspace(-38, 2, 2000), [-104.5, -104.0, -103.9, 16.6, 16.7, 7.9, -7.9, 89.0, -89.0],
                        SPECIAL]).astype(np.float32)
    for op in ("TANH", "LOGISTIC"):
        data = f32_op(op, [x.shape], x.shape)
        ours, ref = run_both_single(data, [x])
        same = (ours.view(np.int32) == ref.view(np.int32)) | (np.isnan(ours) & np.isnan(ref))
        bad = np.flatnonzero(~same)
        assert bad.size == 0, f"{op}: {bad.size} values differ, e.g. x={x[bad[:3]]}: ours {ours[bad[:3]]}, " \
                              f"official {ref[bad[:3]]}"


def test_gelu_tails():
    # the exact form uses erfc, so large negative inputs give tiny (not cancelled-to-zero) values
    x = np.array([-12, -9, -6, -3, -1e-3, 0, 1e-3, 3, 6, 9, 12], np.float32)
    for approximate in (False, True):
        out = check(f32_op("GELU", [x.shape], x.shape, {"approximate": approximate}), [x], tol=1e-6)
        assert out[-1] == 12


@settings(max_examples=scaled(12), deadline=None)
@given(shape=SHAPES, seed=SEEDS, alpha=st.one_of(st.sampled_from([0.0, 0.2, 1.0, -0.5, 3.0]),
                                                 st.floats(-4, 4, width=32)))
def test_leaky_relu(shape, seed, alpha):
    x = floats(np.random.default_rng(seed), shape)
    check(f32_op("LEAKY_RELU", [shape], shape, {"alpha": alpha}), [x])


@st.composite
def prelu_shapes(draw):
    """An input shape and an alpha shape that broadcasts to it (alpha is usually per channel)."""
    x = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    drop = draw(st.integers(0, len(x)))
    alpha = tuple(d if draw(st.booleans()) else 1 for d in x[drop:])
    return x, alpha


@settings(max_examples=scaled(15), deadline=None)
@given(shapes=prelu_shapes(), const_alpha=st.booleans(), seed=SEEDS)
def test_prelu_alpha_broadcast(shapes, const_alpha, seed):
    rng = np.random.default_rng(seed)
    x_shape, a_shape = shapes
    x = floats(rng, x_shape)
    alpha = np.asarray(rng.uniform(-1, 1, a_shape), np.float32)
    if const_alpha:
        check(f32_op("PRELU", [x_shape, alpha], x_shape), [x])
    else:
        check(f32_op("PRELU", [x_shape, a_shape], x_shape), [x, alpha])


@pytest.mark.parametrize("op", ["SOFTMAX", "LOG_SOFTMAX"])
@settings(max_examples=scaled(8), deadline=None)
@given(rows=st.integers(1, 4), n=st.sampled_from([1, 2, 7, 16, 33, 1000]), seed=SEEDS,
       scale=st.sampled_from([0.1, 4.0, 40.0]), beta=st.sampled_from([1.0, 0.5, 2.0]))
def test_softmax_float(op, rows, n, seed, scale, beta):
    # the kernel's own vectorized exp (a polynomial and an exponent-bit power of two) against the official libm exp;
    # scale 40 puts most of a row far below its maximum, where exp underflows
    x = np.asarray(np.random.default_rng(seed).normal(0, scale, (rows, n)), np.float32)
    options = {"beta": beta} if op == "SOFTMAX" else {}
    if op == "SOFTMAX":
        _same_bits(*run_both_single(f32_op(op, [x.shape], x.shape, options), [x]))
    else:
        check(f32_op(op, [x.shape], x.shape, options), [x], tol=2e-6)


def _same_bits(ours, ref) -> None:
    same = (ours.view(np.int32) == ref.view(np.int32)) | (np.isnan(ours) & np.isnan(ref))
    bad = np.flatnonzero(~same)
    assert bad.size == 0, f"{bad.size} values differ, e.g. at {bad[:3]}: ours {ours.flat[bad[:3]]}, " \
                          f"official {ref.flat[bad[:3]]}"


@pytest.mark.parametrize("shape,beta", [((68, 17), 1.0), ((7, 33), 0.37), ((5, 16), -1.3), ((1, 1001), 1.0),
                                        ((3, 4, 9, 7), 2.0)])
def test_softmax_bit_exact(shape, beta):
    # kernels/elementwise/softmax.py replays the official Eigen expression (packet exp, the scalar std::exp of the
    # last size % 4 elements, each row summed in packet order from its own alignment): bit for bit, including rows
    # with masked (-inf, -1e9) and underflowing (< -104) logits
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 20).astype(np.float32)
    x.reshape(-1, shape[-1])[::3, :2] = [-np.inf, -1e9]
    x.reshape(-1, shape[-1])[1::4, -1] = -110.0
    ours, ref = run_both_single(f32_op("SOFTMAX", [shape], shape, {"beta": beta}), [x])
    _same_bits(ours, ref)


def test_softmax_float_extremes():
    x = np.array([[0, -87, -88, -104, -200, -1e30, -3.4e38, 5],
                  [1e-30, 0, -1e-30, 0, 1e-30, 0, 0, 0],
                  [88, 87.5, 20, -20, 0, 1, 2, 3]], np.float32)
    check(f32_op("LOG_SOFTMAX", [x.shape], x.shape), [x], tol=2e-6)
    _same_bits(*run_both_single(f32_op("SOFTMAX", [x.shape], x.shape), [x]))


def test_activation_errors_name_the_op():
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [3])
    a = b.add_input("a", np.float32, [2, 3])
    y = b.add_tensor("y", np.float32, [2, 3])
    b.add_op("PRELU", [x, a], [y])
    b.mark_output(y)
    with pytest.raises((ValueError, RuntimeError), match="PRELU.*keep the input's shape"):
        Interpreter(model_content=b.build()).allocate_tensors()

    b = ModelBuilder()
    x = b.add_input("x", np.int32, [3])
    y = b.add_tensor("y", np.int32, [3])
    b.add_op("ELU", [x], [y])
    b.mark_output(y)
    with pytest.raises((ValueError, RuntimeError), match="ELU.*int32"):
        Interpreter(model_content=b.build()).allocate_tensors()

    b = ModelBuilder()
    x = b.add_input("x", np.float32, [3])
    y = b.add_tensor("y", np.int32, [3])
    b.add_op("RELU", [x], [y])
    b.mark_output(y)
    with pytest.raises((ValueError, RuntimeError), match="RELU.*float32"):
        Interpreter(model_content=b.build()).allocate_tensors()
