"""The comparison helper every parity test uses (lite_numba.testing.assert_close): the two criteria, the tolerance
table, and the examples of issue 13 that the old rule (error <= tol * max(1, max|ref|)) let through; and the shared
runners (inputs resized, one per model input, state carried over steps, prepare_error failing without an error)."""

from __future__ import annotations

import numpy as np
import pytest

from lite_numba.testing import TOLERANCES, assert_close, assert_outputs_close


def test_five_percent_on_a_small_output_fails():
    """An output of 1e-4 off by 5%: the old absolute floor (1e-5 * max(1, 1e-4) = 1e-5 > 5e-6) passed it."""
    ref = np.full(10, 1e-4, np.float32)
    ours = (ref * np.float32(1.05)).astype(np.float32)
    for family in TOLERANCES:
        with pytest.raises(AssertionError, match="out of tolerance"):
            assert_close(ours, ref, family=family)
    with pytest.raises(AssertionError, match="10/10 elements"):
        assert_close(ours, ref)  # the default family
    with pytest.raises(AssertionError):
        assert_close(ours, ref, 1e-5)  # an explicit tol keeps its relative meaning


def test_small_error_on_every_softmax_element_fails():
    """0.19% on every element of a 1000-class softmax (~1e-3 each): the old rule passed it at tol=2e-6."""
    rng = np.random.default_rng(0)
    logits = rng.uniform(-0.02, 0.02, 1000)  # a nearly flat distribution: every class ~1e-3
    ref = (np.exp(logits) / np.exp(logits).sum()).astype(np.float32)[None]
    ours = (ref * np.float32(1.0019)).astype(np.float32)
    assert float(np.abs(ours.astype(np.float64) - ref).max()) < 2e-6  # what made the old rule pass
    for family in TOLERANCES:
        with pytest.raises(AssertionError, match="1000/1000 elements"):
            assert_close(ours, ref, family=family)
    with pytest.raises(AssertionError):
        assert_close(ours, ref, 2e-6)


def test_injected_relative_error_of_1e4_fails_tight_families():
    """x * (1 + 1e-4) (the acceptance's injected kernel error) fails every family tighter than whole models."""
    rng = np.random.default_rng(1)
    ref = rng.standard_normal((3, 50)).astype(np.float32)
    ours = (ref * np.float32(1 + 1e-4)).astype(np.float32)
    for family, t in TOLERANCES.items():
        if t.rtol < 1e-4:
            with pytest.raises(AssertionError):
                assert_close(ours, ref, family=family)


def test_within_tolerance_passes():
    rng = np.random.default_rng(2)
    ref = (rng.standard_normal(200) * 1e-3).astype(np.float32)  # the scale of the output does not matter
    for family, t in TOLERANCES.items():
        ours = (ref.astype(np.float64) * (1 + 0.5 * t.rtol)).astype(np.float32) if t.rtol else ref.copy()
        assert_close(ours, ref, family=family)
    # near zero the floor is tied to the output's scale: a cancellation error of 1e-6 on an output of scale 10
    ref = np.array([10.0, 1e-7], np.float32)
    assert_close(np.array([10.0, 1e-7 + 1e-6], np.float32), ref, family="accumulation")
    with pytest.raises(AssertionError):  # but not to 1: the same error on an output of scale 0.01 fails
        assert_close(np.array([0.01, 1e-7 + 1e-6], np.float32), np.array([0.01, 1e-7], np.float32),
                     family="accumulation")


def test_rules():
    assert_close(np.array([1000.0], np.float32), np.array([1000.009], np.float32))  # relative
    with pytest.raises(AssertionError, match="out of tolerance"):
        assert_close(np.array([1.0], np.float32), np.array([1.1], np.float32))
    with pytest.raises(AssertionError, match="dtype"):
        assert_close(np.array([1.0], np.float64), np.array([1.0], np.float32))
    with pytest.raises(AssertionError, match="shape"):
        assert_close(np.zeros((2, 1), np.float32), np.zeros(2, np.float32))
    nan_inf = np.array([np.nan, np.inf, -1.0], np.float32)
    assert_close(nan_inf.copy(), nan_inf)
    with pytest.raises(AssertionError):
        assert_close(np.array([np.nan, np.inf, -1.0], np.float32), np.array([0.0, np.inf, -1.0], np.float32))
    with pytest.raises(AssertionError):  # NaN where the reference has a number
        assert_close(np.array([1.0, np.nan], np.float32), np.array([1.0, 2.0], np.float32), family="model")
    with pytest.raises(AssertionError):
        assert_close(np.array([-np.inf], np.float32), np.array([np.inf], np.float32), family="model")
    assert_close(np.float32(3.0), np.float32(3.0))  # 0-d arrays
    with pytest.raises(AssertionError):
        assert_close(np.float32(3.0), np.float32(3.1))
    with pytest.raises(ValueError, match="unknown tolerance family"):
        assert_close(np.zeros(1, np.float32), np.zeros(1, np.float32), family="loose")
    assert_close(np.zeros(3, np.float32), np.zeros(3, np.float32), family="exact")
    with pytest.raises(AssertionError):
        assert_close(np.array([1.0], np.float32), np.nextafter(np.float32(1.0), np.float32(2.0))[None],
                     family="exact")


def test_integers_exact_whatever_the_tolerance():
    big = np.array([2**62 + 1], np.int64)
    for tol in (None, 0, 1e-3, 1.0, 10.0):
        with pytest.raises(AssertionError, match="exact"):
            assert_close(big, big - 1, tol)
        with pytest.raises(AssertionError, match="exact"):  # one int8 step in one element out of 1000
            a = np.zeros(1000, np.int8)
            b = a.copy()
            b[17] = 1
            assert_close(a, b, tol, family="model" if tol is None else None)
    assert_close(np.array([255], np.uint8), np.array([255], np.uint8))
    with pytest.raises(AssertionError):
        assert_close(np.array([0], np.uint8), np.array([255], np.uint8))
    with pytest.raises(AssertionError):
        assert_close(np.array([True]), np.array([False]), 1.0)


def test_outputs_list():
    a = [np.ones(2, np.float32), np.zeros(3, np.int32)]
    assert_outputs_close(a, [x.copy() for x in a])
    with pytest.raises(AssertionError, match="output 1"):
        assert_outputs_close(a, [a[0], np.array([0, 0, 1], np.int32)])
    with pytest.raises(AssertionError, match="2 outputs vs 1"):
        assert_outputs_close(a, a[:1])


def test_every_family_has_a_reason():
    for name, t in TOLERANCES.items():
        assert t.why and t.rtol >= 0 and t.atol_scale >= 0, name


# --- the runners ---------------------------------------------------------------------------------------------------

def _add(shape=(1, 3)) -> bytes:
    from lite_numba.testing import one_op

    return one_op("ADD", [(np.float32, shape), (np.float32, shape)], (np.float32, shape))


def test_runners_resize_inputs_and_agree():
    """An input of another shape than the model's is resized in both runtimes before the one allocate; the
    interpreter comes back with the outputs; invoke_with runs it again."""
    from lite_numba.testing import compare_with_official, invoke_with, run_both, run_interpreter

    x, y = np.arange(6, dtype=np.float32).reshape(2, 3), np.full((2, 3), 0.5, np.float32)
    (ours,), (ref,) = run_both(_add(), [x, y])
    assert ours.shape == ref.shape == (2, 3) and ours.tobytes() == ref.tobytes()
    (out,), it = run_interpreter(_add(), [x, y], num_threads=1)
    assert tuple(it.get_output_details()[0]["shape"]) == (2, 3)
    np.testing.assert_array_equal(invoke_with(it, [y, y])[0], y + y)
    assert compare_with_official(_add(), [x, y])[0].tobytes() == out.tobytes()


def test_runners_refuse_a_wrong_number_of_inputs():
    from lite_numba.testing import run_official, run_ours

    x = np.zeros((1, 3), np.float32)
    for run in (run_ours, run_official):
        with pytest.raises(ValueError, match="model has 2 inputs, got 1"):
            run(_add(), [x])


def test_run_both_steps_carries_the_state():
    """Invokes of an LSTM on the same input: the second starts from the first's state (another output) in both
    runtimes, and reset_all_variables() before the third starts again from zeros (the first output again)."""
    from sequence_models import lstm_weights, uni_lstm_model

    from lite_numba.testing import run_both_steps

    w = lstm_weights(np.random.default_rng(0), 3, 4, 4)
    x = np.random.default_rng(1).standard_normal((1, 2, 3)).astype(np.float32)
    steps = run_both_steps(uni_lstm_model((1, 2, 3), w, 4, 4), [[x], [x], [x]], reset_before=(2,))
    assert len(steps) == 3 and all(len(step) == 1 for step in steps)
    (first, _), = steps[0]
    (second, _), = steps[1]
    (third, _), = steps[2]
    assert first.tobytes() != second.tobytes() and first.tobytes() == third.tobytes()
    for (ours, ref), in steps:
        assert_close(ours, ref, family="sequence")


def test_prepare_error_returns_the_message_and_fails_without_one():
    from lite_numba.testing import one_op, prepare_error

    bad = one_op("ADD", [(np.float32, [2, 3]), (np.float32, [4, 5])], (np.float32, [2, 3]))
    assert "ADD" in prepare_error(bad, "ADD")
    with pytest.raises(pytest.fail.Exception):
        prepare_error(_add())
