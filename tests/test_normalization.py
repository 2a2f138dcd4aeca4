"""L2_NORMALIZATION and LOCAL_RESPONSE_NORMALIZATION against the official runtime's builtin kernels, and the fused
layer-norm / RMS-norm node patterns (FUSED_NORM) bit for bit.

Float results must agree within 1e-5 (relative to max(1, |ref|)); quantized results must be bit-exact."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lite_numba.testing import assert_close, one_op, prepare_error, require_official, run_official, run_ours

require_official()


# derandomized: the same examples every run, so the compiled runners are all cached after the first run
SETTINGS = settings(max_examples=scaled(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def unary_op(op, dtype, shape, options, version=1, qin=None, qout=None) -> bytes:
    """One op from x to y of the same dtype and shape (lite_numba.testing.one_op), with their quantizations."""
    return one_op(op, [(dtype, shape, qin)], (dtype, shape, qout), options, version)


@SETTINGS
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=4), scale=st.sampled_from([1e-4, 1.0, 100.0]),
       seed=st.integers(0, 2**31))
def test_l2_normalization_float(shape, scale, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    if rng.random() < 0.3:
        x[..., :] = 0  # all-zero rows: the norm is clamped at 1e-6
    data = unary_op("L2_NORMALIZATION", np.float32, shape, {})
    (ours,), (ref,) = run_ours(data, [x]), run_official(data, [x])
    assert ours.shape == ref.shape
    assert_close(ours.reshape(-1), ref.reshape(-1), 1e-5)


@SETTINGS
@given(dtype=st.sampled_from([np.int8, np.uint8]), shape=st.lists(st.integers(1, 40), min_size=1, max_size=3),
       scale=st.floats(0.001, 1.0), zp=st.integers(-60, 60), spread=st.sampled_from([1, 3, 20, 128]),
       seed=st.integers(0, 2**31))
def test_l2_normalization_quantized(dtype, shape, scale, zp, spread, seed):
    """The fixed-point inverse square root must match for sums of squares from 0 to large."""
    dt = np.dtype(dtype)
    base = 128 if dt == np.uint8 else 0
    info = np.iinfo(dt)
    rng = np.random.default_rng(seed)
    zp_in = base + zp
    x = np.clip(rng.integers(zp_in - spread, zp_in + spread, shape, endpoint=True), info.min, info.max).astype(dt)
    data = unary_op("L2_NORMALIZATION", dtype, shape, {}, 2 if dt == np.int8 else 1, (scale, zp_in),
                  (1.0 / 128.0, base))
    (ours,), (ref,) = run_ours(data, [x]), run_official(data, [x])
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    assert np.array_equal(ours, ref), f"max step {np.max(np.abs(ours.astype(np.int64) - ref.astype(np.int64)))}"


@SETTINGS
@given(shape=st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 3), st.integers(1, 12)),
       radius=st.integers(0, 6), bias=st.sampled_from([0.5, 1.0, 2.0]), alpha=st.floats(0.01, 1.0),
       beta=st.sampled_from([0.5, 0.75, 1.0, 0.3]), seed=st.integers(0, 2**31))
def test_local_response_norm(shape, radius, bias, alpha, beta, seed):
    x = np.random.default_rng(seed).uniform(-3, 3, shape).astype(np.float32)
    data = unary_op("LOCAL_RESPONSE_NORMALIZATION", np.float32, list(shape),
                  {"radius": radius, "bias": bias, "alpha": alpha, "beta": beta})
    (ours,), (ref,) = run_ours(data, [x]), run_official(data, [x])
    assert_close(ours, ref, 1e-5)


def test_errors():
    prepare_error(unary_op("L2_NORMALIZATION", np.int8, [2, 3], {}, 2, (0.1, 0), (0.01, 0)),
                  r"L2_NORMALIZATION .*1/128", invoke=True)
    prepare_error(unary_op("L2_NORMALIZATION", np.uint8, [2, 3], {}, 1, (0.1, 128), (1 / 128, 0)),
                  r"L2_NORMALIZATION .*zero point must be 128", invoke=True)
    prepare_error(unary_op("L2_NORMALIZATION", np.float32, [2, 3], {"fused_activation_function": "RELU"}),
                  r"L2_NORMALIZATION .*activation", invoke=True)
    prepare_error(unary_op("L2_NORMALIZATION", np.int16, [2, 3], {}, 1, (0.1, 0), (1 / 128, 0)),
                  r"L2_NORMALIZATION .*int16", invoke=True)
    prepare_error(unary_op("LOCAL_RESPONSE_NORMALIZATION", np.float32, [2, 3, 4], {"radius": 1}),
                  r"LOCAL_RESPONSE_NORMALIZATION .*4-D", invoke=True)
    prepare_error(unary_op("LOCAL_RESPONSE_NORMALIZATION", np.int8, [1, 2, 3, 4], {"radius": 1}, 1, (0.1, 0), (0.1, 0)),
                  r"LOCAL_RESPONSE_NORMALIZATION .*int8", invoke=True)


# --- layer-norm and RMS-norm patterns of elementwise nodes, fused (lite_numba/runtime/fusion.py, FUSED_NORM) ------


def _norm_pattern(kind: str, rows: int, c: int, eps: float = 1e-5) -> bytes:
    """The node patterns converters write: litert-torch's LayerNorm ("mean_shift"), the TF converter's ("gamma"),
    an RMSNorm ("rms"), over x [1, rows, c]."""
    from lite_numba.builder import ModelBuilder

    b = ModelBuilder()
    rng = np.random.default_rng(rows * c)
    x = b.add_input("x", np.float32, [1, rows, c])
    op_names = iter(range(100))

    def op(name, ins, shape, **options):
        t = b.add_tensor(f"t{next(op_names)}", np.float32, shape)
        b.add_op(name, ins, [t], options=options)
        return t

    col = [1, rows, 1]
    shape3 = b.add_const("col", np.array(col, np.int32))
    if kind == "mean_shift":
        axes = b.add_const("axes", np.array([0, 2], np.int32))
        m = op("MEAN", [x, axes], [rows])
        v = op("MEAN", [op("SQUARED_DIFFERENCE", [x, op("RESHAPE", [m, shape3], col)], [1, rows, c]), axes], [rows])
        r = op("RSQRT", [op("ADD", [v, b.add_const("eps", np.array(eps, np.float32))], [rows])], [rows])
        nb = op("SUB", [b.add_const("zero", np.array(0.0, np.float32)), op("MUL", [r, m], [rows])], [rows])
        y = op("ADD", [op("MUL", [x, op("RESHAPE", [r, shape3], col)], [1, rows, c]),
                       op("RESHAPE", [nb, shape3], col)], [1, rows, c])
    elif kind == "gamma":
        axes = b.add_const("axes", np.array([-1], np.int32))
        m = op("MEAN", [x, axes], col, keep_dims=True)
        v = op("MEAN", [op("SQUARED_DIFFERENCE", [x, m], [1, rows, c]), axes], col, keep_dims=True)
        r = op("RSQRT", [op("ADD", [v, b.add_const("eps", np.array(eps, np.float32))], col)], col)
        g = op("MUL", [r, b.add_const("gamma", rng.standard_normal((1, 1, c)).astype(np.float32))], [1, rows, c])
        y = op("ADD", [op("MUL", [x, g], [1, rows, c]), op("MUL", [op("NEG", [m], col), g], [1, rows, c])],
               [1, rows, c])
    else:
        v = op("MEAN", [op("MUL", [x, x], [1, rows, c]), b.add_const("axes", np.array([2], np.int32))], [1, rows])
        r = op("RSQRT", [op("RESHAPE", [op("ADD", [v, b.add_const("eps", np.array(eps, np.float32))], [1, rows]),
                                        shape3], col)], col)
        y = op("MUL", [op("MUL", [x, r], [1, rows, c]), b.add_const("w", rng.standard_normal(c).astype(np.float32))],
               [1, rows, c])
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("kind", ["mean_shift", "gamma", "rms"])
@pytest.mark.parametrize("rows,c", [(17, 64), (1, 33), (5, 1), (6, 7)])
def test_norm_patterns_fused_bit_for_bit(kind, rows, c):
    """One FUSED_NORM node where the pattern was; its output equals the unfused graph's (kept tensors: no rewrite)
    and the official runtime's bit for bit, with rows of several scales, a constant row (variance 0) and a row
    whose squares overflow (ADD / MUL clamp to FLT_MAX)."""
    from lite_numba import Interpreter

    data = _norm_pattern(kind, rows, c)
    rng = np.random.default_rng(rows + c)
    x = (rng.standard_normal((1, rows, c)) * np.logspace(-3, 3, rows)[None, :, None]).astype(np.float32)
    x[0, 0] = 2.5
    if rows > 2:
        x[0, 1, : max(c // 2, 1)] = 3e19
    fused = Interpreter(model_content=data)
    fused.allocate_tensors()
    assert [n.op_name for n in fused.runtime.main.plan.nodes].count("FUSED_NORM") == 1
    (ours,), (ref,) = run_ours(data, [x]), run_official(data, [x])
    (kept,) = run_ours(data, [x], experimental_preserve_all_tensors=True)
    assert ours.tobytes() == kept.tobytes() and ours.tobytes() == ref.tobytes(), \
        f"{kind}: {np.sum(ours != ref)} values differ from the official, {np.sum(ours != kept)} from the unfused"


def test_norm_pattern_after_resize():
    """A pattern without fixed shapes (the TF converter's: MEANs over [-1] only, no RESHAPE) follows a resized input,
    bit for bit; one whose RESHAPEs have constant targets refuses another shape, as the official RESHAPE does."""
    from lite_numba import Interpreter
    from lite_numba.testing import official_interpreter

    x = np.random.default_rng(3).standard_normal((1, 9, 7)).astype(np.float32)
    for kind, fits in (("gamma", True), ("mean_shift", False)):
        data = _norm_pattern(kind, 6, 7)
        ours, ref = Interpreter(model_content=data), official_interpreter(data, allocate=False)
        for it in (ours, ref):
            it.resize_tensor_input(0, [1, 9, 7])
        if not fits:
            for it in (ours, ref):
                with pytest.raises((ValueError, RuntimeError)):
                    it.allocate_tensors()
            continue
        for it in (ours, ref):
            it.allocate_tensors()
            it.set_tensor(it.get_input_details()[0]["index"], x)
            it.invoke()
        out, want = (it.get_tensor(it.get_output_details()[0]["index"]) for it in (ours, ref))
        assert out.tobytes() == want.tobytes()
