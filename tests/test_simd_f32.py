"""The float32 kernels of kernels/linear/simd_f32.py (CONV_2D with one group, FULLY_CONNECTED, BATCH_MATMUL) against the
official runtime.

Every case runs on every instruction-set level of kernels.isa.LEVELS (LITE_NUMBA_ISA set by the isa_level fixture; a
level this CPU lacks is skipped with the missing features named), each in a new Interpreter, and the output must
match the official builtin kernels within the "accumulation" tolerance of lite_numba.testing.TOLERANCES. The shapes
cover the micro-kernel's remainders: rows (output pixels, batches) not a multiple of the 6-row tile, columns not a
multiple of the 16/32-column panels (masked stores), depths of any length, strides, dilations (a segment per tap
when the width dilation is > 1), SAME/VALID padding (the padded input copy), batches, fused activations, missing
bias, weights known only at run time (packed by a scheduled call), FULLY_CONNECTED with keep_num_dims and
BATCH_MATMUL with adj_x/adj_y and broadcast batches.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from linear_models import bmm_model, bmm_shapes, conv2d_model, conv_shapes, fc_model, geometry

# imported under the name the hypothesis tests' bodies use: a derandomized test's examples are seeded by its
# source
from linear_models import conv_case_f32 as conv_case
from lite_numba.kernels.base import isa
from lite_numba.kernels.linear import simd_f32, simd_f32_narrow

from lite_numba.testing import assert_close, require_official, run_both_single, run_official, run_ours

require_official()

PATHS = [p for p in ("portable", "avx2", "avx512") if isa.supports(p)]
# the isa_level fixture sets LITE_NUMBA_ISA once per test; every example builds new interpreters under it
FEW = settings(max_examples=scaled(8), deadline=None, database=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def check_level(data: bytes, inputs, level: str) -> None:
    ours, ref = run_both_single(data, inputs)
    assert_close(ours, ref, family="accumulation", what=f"ISA {level}")


CONV_CASES = {
    "pointwise_rows_and_cols_remainder": geometry(h=7, w=5, ci=13, co=37, k=(1, 1)),
    "pointwise_16_cols": geometry(h=4, w=4, ci=8, co=16, k=(1, 1), act="RELU6"),
    "3x3_same": geometry(h=9, w=11, ci=5, co=33, act="RELU"),
    "3x3_stride2_same_odd": geometry(h=13, w=12, ci=3, co=16, s=(2, 2), act="RELU6"),
    "3x3_stride2_valid": geometry(h=12, w=13, ci=4, co=9, s=(2, 2), padding="VALID"),
    "5x3_stride_2x1": geometry(h=10, w=8, ci=6, co=48, k=(5, 3), s=(2, 1), act="RELU_N1_TO_1"),
    "dilation_w2_per_tap": geometry(h=9, w=10, ci=4, co=20, d=(1, 2)),
    "dilation_h3_w2_valid": geometry(h=12, w=11, ci=2, co=7, d=(3, 2), padding="VALID"),
    "1x1_stride2": geometry(h=9, w=7, ci=10, co=65, k=(1, 1), s=(2, 2)),
    "batch3": geometry(n=3, h=6, w=5, ci=7, co=31, act="RELU"),
    "window_larger_than_input_same": geometry(h=2, w=3, ci=3, co=5, k=(5, 5)),
    "deep_input": geometry(h=4, w=4, ci=200, co=70, k=(2, 2), padding="VALID"),
}


@pytest.mark.parametrize("name", sorted(CONV_CASES))
def test_conv2d(name, isa_level):
    data, inputs = conv_case(CONV_CASES[name])
    check_level(data, inputs, isa_level)


def test_conv2d_dynamic_filter(isa_level):
    data, inputs = conv_case(geometry(n=2, h=7, w=6, ci=5, co=19, s=(2, 1)), const_filter=False)
    check_level(data, inputs, isa_level)


def test_conv2d_without_bias_matches_zero_bias(isa_level):
    # the official CONV_2D requires a bias; ours treats a missing one as zeros
    g = geometry(h=6, w=7, ci=4, co=21, act="RELU")
    data, inputs = conv_case(g, with_bias=False)
    ci, co, _, _ = conv_shapes(g)
    rng = np.random.default_rng(g["seed"])
    rng.standard_normal(inputs[0].shape)
    w = rng.standard_normal((co, 3, 3, ci)).astype(np.float32)  # conv_case's filter
    (ref,) = run_official(conv2d_model(g, np.float32, w, np.zeros(co, np.float32), np.float32), inputs)
    assert_close(run_ours(data, inputs)[0], ref, family="accumulation", what=f"ISA {isa_level}")


@FEW
@given(n=st.integers(1, 2), h=st.integers(1, 14), w=st.integers(1, 14), ci=st.integers(1, 70),
       co=st.integers(1, 70), kh=st.integers(1, 4), kw=st.integers(1, 4), s=st.integers(1, 3), d=st.integers(1, 2),
       padding=st.sampled_from(["SAME", "VALID"]), act=st.sampled_from(["NONE", "RELU", "RELU6"]),
       seed=st.integers(0, 2**16))
def test_conv2d_random(n, h, w, ci, co, kh, kw, s, d, padding, act, seed, isa_level):
    g = geometry(n, h, w, ci, co, (kh, kw), (s, s), (d, d), padding, act, seed)
    _, _, oh, ow = conv_shapes(g)
    assume(oh > 0 and ow > 0)
    data, inputs = conv_case(g)
    check_level(data, inputs, isa_level)


@pytest.mark.parametrize("x_shape,units,act,keep,bias,const", [
    ([1, 1280], 1000, "NONE", False, True, True),  # MobileNet's classifier: a matrix-vector product
    ([1, 70], 17, "RELU", False, False, True),
    ([7, 33], 40, "RELU6", False, True, True),
    ([2, 3, 19], 6, "NONE", True, True, True),  # keep_num_dims: [2, 3, 6]
    ([4, 2, 6], 130, "RELU_N1_TO_1", False, True, True),  # flattened to 4 rows of 12
    ([5, 24], 33, "NONE", False, True, False),  # weights as an input
])
def test_fully_connected(x_shape, units, act, keep, bias, const, isa_level):
    rng = np.random.default_rng(units)
    k = x_shape[-1] if keep or len(x_shape) == 2 else 12
    w = rng.standard_normal((units, k)).astype(np.float32)
    b = rng.standard_normal(units).astype(np.float32) if bias else None
    data = fc_model(x_shape, w, bias=b, act=act, keep=keep, const_weights=const,
                    version=5 if keep else (1 if bias else 6))
    x = rng.standard_normal(x_shape).astype(np.float32)
    check_level(data, [x] if const else [x, w], isa_level)


@pytest.mark.parametrize("ls,rs,adj_x,adj_y,const", [
    ([2, 13, 40], [2, 40, 37], False, False, False),
    ([3, 1, 9, 16], [1, 4, 9, 16], True, False, False),  # adj_x, broadcast both ways
    ([2, 7, 24], [2, 33, 24], False, True, False),  # adj_y (attention's Q @ K^T)
    ([8, 5], [20, 8], True, True, True),  # constant rhs
    ([1, 1, 64], [64, 50], False, False, True),
    ([4, 17, 16], [4, 16, 17], False, False, False),  # a ViT's attention logits
    ([2, 1, 16, 37], [1, 3, 70, 16], True, True, False),  # both transposed and broadcast, 3 panels of the rhs
    ([3, 5, 0], [3, 0, 7], False, False, False),  # depth 0: zeros
    ([2, 0, 6], [2, 7, 0], True, True, False),
])
def test_batch_matmul(ls, rs, adj_x, adj_y, const, isa_level):
    # the transposed operands are read where they are (the left in place, the right packed from it): bit for bit
    rng = np.random.default_rng(len(ls) * 7 + rs[-1])
    lhs = rng.standard_normal(ls).astype(np.float32)
    rhs = rng.standard_normal(rs).astype(np.float32)
    data = bmm_model(ls, rs, adj_x=adj_x, adj_y=adj_y, rhs_const=rhs if const else None)
    ours, ref = run_both_single(data, [lhs] if const else [lhs, rhs])
    assert ours.shape == ref.shape and ours.tobytes() == ref.tobytes(), f"ISA {isa_level}"


@FEW
@given(case=bmm_shapes(), seed=st.integers(0, 2**16))
def test_batch_matmul_random(case, seed, isa_level):
    ls, rs, adj_x, adj_y = case
    rng = np.random.default_rng(seed)
    lhs = rng.standard_normal(ls).astype(np.float32)
    rhs = rng.standard_normal(rs).astype(np.float32)
    check_level(bmm_model(ls, rs, adj_x=adj_x, adj_y=adj_y), [lhs, rhs], isa_level)


@pytest.mark.parametrize("path", ["avx2", "avx512"])
def test_gemm_packed_remainders_against_numpy(path):
    """The driver alone (when the CPU has the path): every tile height (1..6 zmm, 1..4 ymm) and panel width, NaN
    passing the clamp, nothing written past the output."""
    if path not in PATHS:
        pytest.skip(f"{path} GEMM driver not run: this CPU lacks {', '.join(isa.missing_features(path))}")
    gemm_packed = simd_f32.gemm_packed if path == "avx512" else simd_f32_narrow.gemm_packed
    rng = np.random.default_rng(3)
    for M, K, N in [(1, 1, 1), (5, 3, 16), (11, 17, 47), (6, 40, 64), (13, 9, 100), (7, 5, 8), (3, 4, 9), (2, 3, 24)]:
        a = rng.standard_normal((M, K)).astype(np.float32)
        a[0, 0] = np.nan
        w = rng.standard_normal((N, K)).astype(np.float32)
        bias = rng.standard_normal(N).astype(np.float32)
        out = np.full(M * N + 40, 7.0, np.float32)  # a guard past the end must stay untouched
        lim = np.array([-1.0, 1.5], np.float32)
        gemm_packed(a.reshape(-1), np.arange(M, dtype=np.int64) * K, np.zeros(1, np.int64), K,
                             simd_f32.pack_weights(w.T), simd_f32.pad_bias(bias, N), out, N, lim)
        ref = a.astype(np.float64) @ w.T.astype(np.float64) + bias
        ref = np.where(np.isnan(ref), ref, np.clip(ref, -1.0, 1.5))
        np.testing.assert_allclose(out[:M * N].reshape(M, N), ref, rtol=1e-5, atol=1e-5)
        assert np.all(out[M * N:] == 7.0)
        if path == "avx2" and "avx512" in PATHS:  # the same sums in the same order: the same bytes
            out2 = np.full(M * N, 7.0, np.float32)
            simd_f32.gemm_packed(a.reshape(-1), np.arange(M, dtype=np.int64) * K, np.zeros(1, np.int64), K,
                                 simd_f32.pack_weights(w.T), simd_f32.pad_bias(bias, N), out2, N, lim)
            assert np.array_equal(out[:M * N], out2, equal_nan=True)


@pytest.mark.parametrize("ksize,ci", [(1, 16), (3, 8)])
def test_conv2d_bit_identical_to_official(ksize, ci, isa_level):
    """Products are rounded before they are added, as in the official kernels: a pointwise or 3x3 convolution
    with large values and bias gives the official bits exactly on every path (a fused multiply-add did not:
    62% of elements exact, which grew to 5e-4 relative at the output of MediaPipe's pose_landmark_full)."""
    from lite_numba.builder import ModelBuilder

    rng = np.random.default_rng(0)
    x = (rng.standard_normal((1, 12, 12, ci)) * 20).astype(np.float32)
    w = rng.standard_normal((40, ksize, ksize, ci)).astype(np.float32)
    bias = (rng.standard_normal(40) * 100).astype(np.float32)
    b = ModelBuilder()
    xi = b.add_input("x", np.float32, list(x.shape))
    n = 12 - ksize + 1
    y = b.add_tensor("y", np.float32, [1, n, n, 40])
    b.add_op("CONV_2D", [xi, b.add_const("w", w), b.add_const("b", bias)], [y],
             options={"padding": "VALID", "stride_h": 1, "stride_w": 1})
    b.mark_output(y)
    data = b.build()
    (ref,) = run_official(data, [x])
    (out,) = run_ours(data, [x])
    assert np.array_equal(out, ref), f"{isa_level}: {np.mean(out == ref):.3f} exact, max diff {np.abs(out - ref).max()}"
