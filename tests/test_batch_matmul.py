"""BATCH_MATMUL against the official runtime: float32 (bit-exact: both sum over k in order), int8 (int8 and int32
outputs), int16, int16 x int8 and hybrid; adj_x / adj_y, broadcast batch dimensions, rank 2-5, constant rhs; errors."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from linear_models import bmm_model, bmm_shapes

from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close, prepare_error, require_official, run_both

# imported under the name the hypothesis tests' bodies use: a derandomized test's examples are seeded by its
# source
from lite_numba.testing import run_both_single as both

require_official()


def _rand(rng, dtype, shape):
    if dtype == np.float32:
        return rng.standard_normal(shape).astype(np.float32)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


@settings(max_examples=scaled(25), deadline=None)
@given(case=bmm_shapes(), const_rhs=st.booleans(), seed=st.integers(0, 2**16))
def test_float(case, const_rhs, seed):
    ls, rs, adj_x, adj_y = case
    rng = np.random.default_rng(seed)
    lhs, rhs = _rand(rng, np.float32, ls), _rand(rng, np.float32, rs)
    data = bmm_model(ls, rs, adj_x=adj_x, adj_y=adj_y, rhs_const=rhs if const_rhs else None)
    ours, ref = both(data, [lhs] if const_rhs else [lhs, rhs])
    assert_close(ours, ref, 1e-6)


# decode-step attention (few query rows, k contiguous in the run-time rhs: batch_matmul._schedule_swapped computes
# the product transposed): Gemma 3 270M's q x K cache and probabilities x transposed V cache, Qwen3's grouped heads,
# a row remainder, the SWAP_ROWS limit, a broadcast batch, adj_x
DOT_CASES = [((1, 1, 4, 256), (1, 1, 1024, 256), False, True), ((1, 1, 4, 1024), (1, 1, 256, 1024), False, True),
             ((1, 8, 2, 128), (1, 8, 1024, 128), False, True), ((1, 2, 5, 96), (1, 2, 300, 96), False, True),
             ((16, 64), (200, 64), False, True), ((3, 1, 64), (1, 37, 64), False, True),
             ((2, 7, 1), (2, 33, 7), True, True)]


@pytest.mark.parametrize("ls, rs, adj_x, adj_y", DOT_CASES)
def test_float_swapped(ls, rs, adj_x, adj_y):
    rng = np.random.default_rng(39)
    lhs, rhs = _rand(rng, np.float32, ls), _rand(rng, np.float32, rs)
    data = bmm_model(ls, rs, adj_x=adj_x, adj_y=adj_y)
    ours, ref = both(data, [lhs, rhs])
    assert np.array_equal(ours, ref)  # the official kernel's sums in the same order, as the packed-rhs GEMM's
    two, _ = both(data, [lhs, rhs], num_threads=2)
    assert np.array_equal(two, ours)  # every output computed by the same code whatever the threads


# more query rows than SWAP_ROWS with k contiguous in the run-time rhs (a prefill's q x K cache, its probabilities x
# a transposed V cache): the rhs packed into panels by 8 x 8 tile transposes (simd_f32.pack_panels), with column and
# depth remainders (37 = 4 tiles + 5, 29 = 3 tiles + 5) and a panel of fewer than 8 live columns
PACKED_CASES = [((1, 2, 40, 64), (1, 2, 72, 64), False, True), ((37, 29), (37, 29), False, True),
                ((1, 20, 16), (1, 35, 16), False, True), ((2, 24, 24), (2, 24, 24), True, True)]


@pytest.mark.parametrize("ls, rs, adj_x, adj_y", PACKED_CASES)
def test_float_packed_transposed_rhs(ls, rs, adj_x, adj_y):
    rng = np.random.default_rng(30)
    lhs, rhs = _rand(rng, np.float32, ls), _rand(rng, np.float32, rs)
    data = bmm_model(ls, rs, adj_x=adj_x, adj_y=adj_y)
    ours, ref = both(data, [lhs, rhs])
    assert np.array_equal(ours, ref)


def _assert_exact(ours, ref):
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    diff = np.abs(ours.astype(np.int64) - ref.astype(np.int64))
    assert diff.max(initial=0) == 0, f"{int((diff > 0).sum())} of {diff.size} differ, max step {diff.max()}"


@settings(max_examples=scaled(15), deadline=None)
@given(case=bmm_shapes(), seed=st.integers(0, 2**16))
def test_int8(case, seed):
    ls, rs, adj_x, adj_y = case
    rng = np.random.default_rng(seed)
    lhs, rhs = _rand(rng, np.int8, ls), _rand(rng, np.int8, rs)
    lq, rq = (0.02, int(rng.integers(-30, 30))), (0.03, int(rng.integers(-30, 30)))
    k = ls[-2] if adj_x else ls[-1]
    out_q = (0.02 * 0.03 * 128 * 128 * np.sqrt(k) / 64, int(rng.integers(-10, 10)))
    data = bmm_model(ls, rs, adj_x=adj_x, adj_y=adj_y, lhs_dtype=np.int8, rhs_dtype=np.int8, lhs_quant=lq,
                     rhs_quant=rq, out_dtype=np.int8, out_quant=out_q, version=2)
    _assert_exact(*both(data, [lhs, rhs]))


@pytest.mark.parametrize("lhs_dtype, rhs_dtype, out_dtype", [
    (np.int8, np.int8, np.int32), (np.int16, np.int16, np.int16), (np.int16, np.int8, np.int16)])
@pytest.mark.parametrize("ls, rs, adj_x, adj_y", [
    ([2, 3, 40], [2, 40, 5], False, False), ([3, 1, 40, 4], [2, 6, 40], True, True)])
def test_other_integer(lhs_dtype, rhs_dtype, out_dtype, ls, rs, adj_x, adj_y):
    rng = np.random.default_rng(5)
    lhs, rhs = _rand(rng, lhs_dtype, ls), _rand(rng, rhs_dtype, rs)
    if lhs_dtype == np.int16:
        lq, rq, oq = (1e-4, 0), (0.01 if rhs_dtype == np.int8 else 1e-4, 0), (0.05, 0)
    else:
        lq, rq, oq = (0.02, 5), (0.03, -7), None
    data = bmm_model(ls, rs, adj_x=adj_x, adj_y=adj_y, lhs_dtype=lhs_dtype, rhs_dtype=rhs_dtype, lhs_quant=lq,
                     rhs_quant=rq, out_dtype=out_dtype, out_quant=oq, version=2 if lhs_dtype == np.int8 else 3)
    _assert_exact(*both(data, [lhs, rhs]))


@settings(max_examples=scaled(16), deadline=None)
@given(case=bmm_shapes(), per_channel=st.booleans(), asymmetric=st.booleans(), seed=st.integers(0, 2**16))
def test_hybrid(case, per_channel, asymmetric, seed):
    ls, rs, adj_x, adj_y = case
    # TFLite sums the weight rows of only the first rank-5 slice (its loop skips dimension 0), so asymmetric inputs
    # with a rank-5 rhs whose first dimension is > 1 read row sums it never wrote
    assume(not (asymmetric and len(rs) == 5 and rs[0] > 1))
    rng = np.random.default_rng(seed)
    lhs = (rng.standard_normal(ls) + rng.uniform(-1, 1)).astype(np.float32)
    rhs = rng.integers(-127, 128, rs).astype(np.int8)
    n = rs[-2] if adj_y else rs[-1]
    if per_channel:
        rq = {"scales": rng.uniform(0.002, 0.02, n).astype(np.float32), "zero_points": [0] * n,
              "quantized_dimension": len(rs) - (2 if adj_y else 1)}
    else:
        rq = (0.01, 0)
    data = bmm_model(ls, rs, adj_x=adj_x, adj_y=adj_y, rhs_dtype=np.int8, rhs_quant=rq, rhs_const=rhs,
                     version=4 if asymmetric else 1, asymmetric=asymmetric)
    ours, ref = both(data, [lhs])
    assert_close(ours, ref, 1e-5)


def _prepare_error(data):
    return prepare_error(data, "BATCH_MATMUL")


def test_errors():
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 3, 4])
    y = b.add_input("y", np.float32, [2, 5, 6])
    z = b.add_tensor("z", np.float32, [2, 3, 6])
    b.add_op("BATCH_MATMUL", [x, y], [z])
    b.mark_output(z)
    assert "inner dimensions" in _prepare_error(b.build())
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 3, 4])
    y = b.add_input("y", np.float32, [3, 4, 6])
    z = b.add_tensor("z", np.float32, [3, 3, 6])
    b.add_op("BATCH_MATMUL", [x, y], [z])
    b.mark_output(z)
    assert "broadcast" in _prepare_error(b.build())
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 1, 1, 1, 2, 3, 4])
    y = b.add_input("y", np.float32, [4, 6])
    z = b.add_tensor("z", np.float32, [1, 1, 1, 1, 2, 3, 6])
    b.add_op("BATCH_MATMUL", [x, y], [z])
    b.mark_output(z)
    assert "rank" in _prepare_error(b.build())


def _attention_model(T, S, N, H, *, q_perm=(0, 2, 1, 3), k_perm=(0, 2, 3, 1), drop_unit=False, share_k=False,
                     adj_y=False):
    """Attention's logits as converters write them: q [1, T, N, H] and k [1, S, N, H] transposed into heads
    (q_perm, k_perm), maybe reshaped to drop the unit batch dimension, then BATCH_MATMUL. share_k: the transposed k
    is an output too (the TRANSPOSE then stays)."""
    b = ModelBuilder()
    q = b.add_input("q", np.float32, [1, T, N, H])
    k = b.add_input("k", np.float32, [1, S, N, H])
    qt_shape = [[1, T, N, H][p] for p in q_perm]
    kt_shape = [[1, S, N, H][p] for p in k_perm]
    qt = b.add_tensor("qt", np.float32, qt_shape)
    kt = b.add_tensor("kt", np.float32, kt_shape)
    b.add_op("TRANSPOSE", [q, b.add_const("qp", np.array(q_perm, np.int32))], [qt])
    b.add_op("TRANSPOSE", [k, b.add_const("kp", np.array(k_perm, np.int32))], [kt])
    if drop_unit:
        qr = b.add_tensor("qr", np.float32, qt_shape[1:])
        kr = b.add_tensor("kr", np.float32, kt_shape[1:])
        b.add_op("RESHAPE", [qt, b.add_const("qs", np.array(qt_shape[1:], np.int32))], [qr])
        b.add_op("RESHAPE", [kt, b.add_const("ks", np.array(kt_shape[1:], np.int32))], [kr])
        qt, kt, qt_shape, kt_shape = qr, kr, qt_shape[1:], kt_shape[1:]
    m, n = qt_shape[-2], kt_shape[-2] if adj_y else kt_shape[-1]
    z = b.add_tensor("z", np.float32, qt_shape[:-2] + [m, n])
    b.add_op("BATCH_MATMUL", [qt, kt], [z], options={"adj_x": False, "adj_y": adj_y})
    b.mark_output(z)
    if share_k:
        b.mark_output(kt)
    return b.build()


@pytest.mark.parametrize("case", [
    dict(T=7, S=9, N=3, H=16), dict(T=5, S=5, N=2, H=8, drop_unit=True), dict(T=1, S=12, N=4, H=32),
    dict(T=6, S=10, N=2, H=16, k_perm=(0, 2, 1, 3), adj_y=True), dict(T=4, S=6, N=3, H=8, share_k=True),
    dict(T=3, S=4, N=1, H=24, drop_unit=True)])
def test_transposed_operands_folded(case):
    """A TRANSPOSE (and RESHAPEs of unit dimensions) feeding only BATCH_MATMUL is folded into its addressing
    (lite_numba/runtime/fusion.py fold_transposes): the transposes leave the plan unless their output is read
    elsewhere, and the logits equal the official runtime's."""
    from lite_numba import Interpreter

    data = _attention_model(**case)
    rng = np.random.default_rng(5)
    T, S, N, H = case["T"], case["S"], case["N"], case["H"]
    inputs = [rng.standard_normal((1, T, N, H)).astype(np.float32),
              rng.standard_normal((1, S, N, H)).astype(np.float32)]
    ours, ref = run_both(data, inputs)
    for o, r in zip(ours, ref):
        assert_close(o, r, 1e-6)
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    plan = it.runtime.graph(0).plan
    folded = [n.op_name for n in plan.nodes if "fused_into" in n.options]
    assert folded.count("TRANSPOSE") == (1 if case.get("share_k") else 2), folded
