"""The int8 GEMM kernels of kernels/linear/simd_int8.py (CONV_2D with one group, FULLY_CONNECTED) against the
official runtime.

Every case runs on every instruction-set level of kernels.isa.LEVELS (the isa_level fixture; a level this CPU lacks
is skipped with the missing features named), each in a new Interpreter, and the output must equal the official
builtin kernels' output exactly. The shapes cover the
kernels' remainders: depth below and not a multiple of the 4-byte groups, output channels not a multiple of the
16/32-channel panels, pixel counts not a multiple of the 8-row tiles, several activation blocks, strides, dilations,
SAME/VALID padding (padded taps take the input zero point), batches, per-tensor and per-channel filters; uint8
convolutions (per-tensor weight zero points 0, 3, 128, 200, 255 and extreme input zero points: the weights are packed
as w - 128 and the term (128 - zp_w) * sum x is added per output pixel).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from linear_models import bmm_model, conv2d_model, conv_case_uint8, conv_shapes, fc_model, fc_quant_case, geometry

# imported under the name the hypothesis tests' bodies use: a derandomized test's examples are seeded by its
# source
from linear_models import conv_case_int8 as conv_case
from lite_numba.kernels.base import isa
from lite_numba.kernels.linear import simd_int8, simd_int8_narrow, simd_int8_plain

from lite_numba.testing import assert_close, require_official, run_both_single

require_official()


def check_level(data: bytes, inputs, level: str) -> None:
    ours, ref = run_both_single(data, inputs)
    assert_close(ours, ref, what=f"ISA {level}")  # integers: exact


CONV_CASES = {
    "3x3_k27_co32": geometry(h=9, w=11, ci=3, co=32, act="RELU6"),
    "3x3_stride2_first_layer": geometry(h=12, w=13, ci=3, co=16, s=(2, 2), seed=1),
    "3x3_valid_co17": geometry(n=2, h=7, w=6, ci=5, co=17, padding="VALID", seed=2),
    "3x3_dilated_co48": geometry(h=9, w=8, ci=4, co=48, d=(2, 1), act="RELU", seed=3),
    "2x3_mixed": geometry(h=6, w=9, ci=7, co=33, k=(2, 3), s=(1, 2), d=(1, 2), seed=4),
    "5x5_same_stride3": geometry(h=10, w=7, ci=2, co=5, k=(5, 5), s=(3, 2), act="RELU_N1_TO_1", seed=5),
    "1x1_pointwise_k64": geometry(n=2, h=5, w=3, ci=64, co=40, k=(1, 1), seed=6),
    "1x1_pointwise_k70": geometry(h=4, w=5, ci=70, co=24, k=(1, 1), seed=7),
    "1x1_pointwise_k1": geometry(h=3, w=3, ci=1, co=3, k=(1, 1), seed=8),
    "1x1_stride2": geometry(h=7, w=6, ci=12, co=20, k=(1, 1), s=(2, 2), seed=9),
    "one_pixel": geometry(h=1, w=1, ci=9, co=7, seed=10),
    "several_blocks_kxk": geometry(h=48, w=40, ci=3, co=16, seed=11),
    "several_blocks_1x1": geometry(h=20, w=12, ci=300, co=20, k=(1, 1), seed=12),
    "filter_larger_than_image_same": geometry(h=2, w=3, ci=4, co=6, k=(5, 5), seed=13),
    # streaming convolutions over one time step: output rows of 1 or 2 pixels run 1-row tiles (simd_int8_narrow)
    "one_column_5x1_valid": geometry(h=5, w=1, ci=40, co=30, k=(5, 1), padding="VALID", seed=14),
    "two_columns_3x2": geometry(n=2, h=9, w=2, ci=13, co=20, k=(3, 2), act="RELU", seed=15),
}


@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
@pytest.mark.parametrize("name", list(CONV_CASES))
def test_conv2d_int8(name, per_channel, isa_level):
    check_level(*conv_case(CONV_CASES[name], per_channel), isa_level)


@settings(max_examples=scaled(8), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow,
                                                                                HealthCheck.function_scoped_fixture])
@given(st.fixed_dictionaries({
    "n": st.integers(1, 2), "h": st.integers(1, 12), "w": st.integers(1, 12), "cig": st.integers(1, 70),
    "groups": st.just(1), "cog": st.integers(1, 70), "kh": st.integers(1, 3), "kw": st.integers(1, 3),
    "sh": st.integers(1, 2), "sw": st.integers(1, 2), "dh": st.integers(1, 2), "dw": st.integers(1, 2),
    "padding": st.sampled_from(["SAME", "VALID"]), "act": st.sampled_from(["NONE", "RELU", "RELU6"]),
    "seed": st.integers(0, 2**31 - 1)}), st.booleans())
def test_conv2d_int8_random(isa_level, g, per_channel):
    _, _, oh, ow = conv_shapes(g)
    assume(oh > 0 and ow > 0)
    check_level(*conv_case(g, per_channel), isa_level)


@pytest.mark.parametrize("batch, k, units", [(1, 1, 1), (1, 100, 33), (3, 5, 17), (9, 64, 48), (20, 37, 16),
                                             (2, 300, 70), (1, 1280, 40)])
@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no_bias"])
def test_fully_connected_int8(batch, k, units, per_channel, with_bias, isa_level):
    rng = np.random.default_rng(batch * 1000 + k + units)
    data, x = fc_quant_case(rng, np.int8, np.int8, batch, k, units, per_channel,
                              np.int32 if with_bias else None, "RELU" if per_channel else "NONE")
    check_level(data, [x], isa_level)


def test_weight_packing_layouts():
    """Packed weights hold every filter value once, zero elsewhere, where the kernels read them."""
    rng = np.random.default_rng(0)
    w = rng.integers(-128, 128, (37, 11)).astype(np.int8)
    Kp, Np = simd_int8.padded_sizes(11, 37)
    assert (Kp, Np) == (12, 48)
    wp = simd_int8.pack_weights_vnni(w)
    for n, k in [(0, 0), (5, 10), (31, 3), (32, 0), (36, 10)]:
        j0 = n // simd_int8.NR * simd_int8.NR
        width = min(simd_int8.NR, Np - j0)
        assert wp[j0 * Kp + ((k // 4) * width + (n - j0)) * 4 + k % 4] == w[n, k]
    assert np.count_nonzero(wp) == np.count_nonzero(w)
    wr = simd_int8_narrow.pack_weights_pairs(w)
    for n, k in [(0, 0), (5, 10), (31, 3), (32, 0), (36, 10), (17, 5)]:
        j0 = n // simd_int8.NR * simd_int8.NR
        width = min(simd_int8.NR, Np - j0)
        assert wr[j0 * Kp + (k // 4) * 4 * width + ((k % 4) // 2 * width + (n - j0)) * 2 + k % 2] == w[n, k]
    assert np.count_nonzero(wr) == np.count_nonzero(w)
    wq = simd_int8.pack_weights_portable(w).reshape(Np, Kp)
    assert np.array_equal(wq[:37, :11], w) and np.count_nonzero(wq) == np.count_nonzero(w)
    offs = simd_int8.channel_offsets(w, 128, -5, Np)
    assert np.array_equal(offs[:37], -(123 * w.astype(np.int64).sum(axis=1))) and not offs[37:].any()


@pytest.mark.skipif(not isa.supports("avx512vnni"), reason="AVX-512 VNNI output stage not run: this CPU lacks "
                    f"{', '.join(isa.missing_features('avx512vnni'))}")
def test_vnni_output_stage_extremes():
    """The VNNI output stage (one int64 rounding shift per lane, zero point folded in) against the portable one
    (conv_loops._mbqm_half_up, checked against the official runtime above) on parameters no model in the tests
    reaches: every shift in the VNNI range [-31, 31] (int32 wrapping left shifts), multipliers of either sign,
    biases over the whole int32 range (wrapping accumulators), any zero points and clamps; also with the parameters
    computed at prepare (output_params_host). The drivers are called directly with the argument types the runner
    passes."""
    rng = np.random.default_rng(1)
    for trial in range(60):
        h, w = (int(v) for v in rng.integers(1, 8, 2))
        ci, co = int(rng.integers(1, 30)), int(rng.integers(1, 70))
        kh, kw = (int(v) for v in rng.integers(1, 4, 2))
        if kh > h or kw > w:
            continue
        oh, ow = h - kh + 1, w - kw + 1
        x = rng.integers(-128, 128, (1, h, w, ci)).astype(np.int8)
        wt = rng.integers(-127, 128, (co, kh * kw * ci)).astype(np.int8)
        Kp, Np = simd_int8.padded_sizes(wt.shape[1], co)
        zp_in, zp_out = (int(v) for v in rng.integers(-128, 128, 2))
        bias = rng.integers(-2**31, 2**31, co).astype(np.int32)
        mult = rng.integers(-2**31 if trial % 4 == 0 else 2**30, 2**31, co).astype(np.int32)
        # odd trials: shifts in [-21, 0] only (simd_int8_plain.plain_shifts), which qconv_vnni_plain also runs
        shift = rng.integers(-31, 32, co).astype(np.int32) if trial % 2 == 0 else \
            rng.integers(-21, 1, co).astype(np.int32)
        qmin, qmax = sorted(int(v) for v in rng.integers(-128, 128, 2)) if trial % 3 == 0 else (-128, 127)
        geo = np.array([1, 1, 1, 1, 0, 0, kh, kw, oh, ow, int(kh == kw == 1)], np.int64)
        offs = simd_int8.channel_offsets(wt, 128, zp_in, Np)
        outs = []
        for fn, wp, mr in [(simd_int8.qconv_vnni, simd_int8.pack_weights_vnni(wt), simd_int8.MR),
                           (simd_int8.qconv_portable, simd_int8.pack_weights_portable(wt), simd_int8.PR)]:
            MB = simd_int8.block_rows(Kp, oh * ow, mr)
            scratch = np.zeros((Np // 16, simd_int8.PRM_BLOCK) if mr == simd_int8.MR else (MB, Np), np.int32)
            out = np.zeros((1, oh, ow, co), np.int8)
            fn(x, wp, offs, bias, out, geo, 128, zp_in, mult, shift, zp_out, qmin, qmax,
               np.zeros((MB, Kp), np.uint8), scratch)
            outs.append(out)
        # the parameters computed at prepare (constant bias) instead of per call
        off = offs[:co].astype(np.int64) + bias
        pre = simd_int8.output_params_host(((off + 2**31) % 2**32 - 2**31).astype(np.int32), mult, shift, zp_out, co,
                                           Np // 16)
        out = np.zeros((1, oh, ow, co), np.int8)
        MB = simd_int8.block_rows(Kp, oh * ow, simd_int8.MR)
        simd_int8.qconv_vnni(x, simd_int8.pack_weights_vnni(wt), pre, bias, out, geo, 128, zp_in, mult, shift, zp_out,
                             qmin, qmax, np.zeros((MB, Kp), np.uint8),
                             np.zeros((Np // 16, simd_int8.PRM_BLOCK), np.int32))
        outs.append(out)
        assert simd_int8_plain.plain_shifts(shift) or trial % 2 == 0
        if simd_int8_plain.plain_shifts(shift):  # the plain output stage, parameters per call and at prepare
            for o in (offs, pre):
                out = np.zeros((1, oh, ow, co), np.int8)
                simd_int8_plain.qconv_vnni_plain(x, simd_int8.pack_weights_vnni(wt), o, bias, out, geo, 128, zp_in,
                                                 mult, shift, zp_out, qmin, qmax, np.zeros((MB, Kp), np.uint8),
                                                 np.zeros((Np // 16, simd_int8.PRM_BLOCK), np.int32))
                outs.append(out)
        # the 256-bit drivers (both schemes) on the same parameters, computed per call and at prepare
        for scheme, pack in ((0, simd_int8_narrow.pack_weights_pairs), (1, simd_int8.pack_weights_vnni)):
            if not isa.supports("avxvnni" if scheme else "avx2"):
                continue
            MB = simd_int8.block_rows(Kp, oh * ow, simd_int8_narrow.MR)
            for o in (offs, pre):
                out = np.zeros((1, oh, ow, co), np.int8)
                simd_int8_narrow.qconv_narrow(x, pack(wt), o, bias, out, np.append(geo, [0, scheme]), 128, zp_in,
                                              mult, shift, zp_out, qmin, qmax, np.zeros((MB, Kp), np.uint8),
                                              np.zeros((Np // 16, simd_int8.PRM_BLOCK), np.int32))
                outs.append(out)
        for j, o in enumerate(outs):
            assert np.array_equal(o, outs[1]), f"trial {trial}, output {j}: {np.count_nonzero(o != outs[1])} differ"


def test_generic_twins_of_the_256_bit_tiles(monkeypatch):
    """The generic-IR twins of vpdpbusd and vpmaddwd (what the 256-bit tiles compile to where the instructions do
    not exist: NEON) compiled on this machine give the same bytes as the portable driver, both layouts."""
    from numba import njit

    monkeypatch.setattr(simd_int8_narrow, "GENERIC", True)
    generic = njit(simd_int8_narrow.qconv_narrow.py_func)  # a fresh compile (no cache): the twins are emitted
    rng = np.random.default_rng(7)
    for h, w, ci, co in [(5, 6, 13, 37), (3, 3, 64, 16), (4, 1, 7, 9)]:
        x = rng.integers(-128, 128, (1, h, w, ci)).astype(np.int8)
        wt = rng.integers(-127, 128, (co, ci)).astype(np.int8)
        Kp, Np = simd_int8.padded_sizes(ci, co)
        zp_in, zp_out = -3, 5
        bias = rng.integers(-5000, 5000, co).astype(np.int32)
        mult = rng.integers(2**30, 2**31 - 1, co).astype(np.int32)
        shift = rng.integers(-12, 1, co).astype(np.int32)
        geo = np.array([1, 1, 1, 1, 0, 0, 1, 1, h, w, 1, 0], np.int64)
        offs = simd_int8.channel_offsets(wt, 128, zp_in, Np)
        MB = simd_int8.block_rows(Kp, h * w, simd_int8.PR)
        ref = np.zeros((1, h, w, co), np.int8)
        simd_int8.qconv_portable(x, simd_int8.pack_weights_portable(wt), offs, bias, ref, geo, 128, zp_in, mult, shift,
                                 zp_out, -128, 127, np.zeros((MB, Kp), np.uint8), np.zeros((MB, Np), np.int32))
        for scheme, pack in ((0, simd_int8_narrow.pack_weights_pairs), (1, simd_int8.pack_weights_vnni)):
            MB = simd_int8.block_rows(Kp, h * w, simd_int8_narrow.MR)
            out = np.zeros((1, h, w, co), np.int8)
            generic(x, pack(wt), offs, bias, out, np.append(geo, scheme), 128, zp_in, mult, shift, zp_out, -128, 127,
                    np.zeros((MB, Kp), np.uint8), np.zeros((Np // 16, simd_int8.PRM_BLOCK), np.int32))
            assert np.array_equal(out, ref), f"scheme {scheme}, {h}x{w}x{ci}->{co}"


# --- uint8 (TFLite's asymmetric per-tensor scheme): weights packed as w - 128 with a per-row term ------------------


UINT8_CASES = {
    "1x1_pointwise_k70": geometry(h=4, w=5, ci=70, co=24, k=(1, 1), seed=20),
    "1x1_stride2_co40": geometry(n=2, h=7, w=6, ci=12, co=40, k=(1, 1), s=(2, 2), seed=21),
    "3x3_same_stride2": geometry(h=12, w=13, ci=3, co=16, s=(2, 2), act="RELU6", seed=22),
    "3x3_valid_co17": geometry(n=2, h=7, w=6, ci=5, co=17, padding="VALID", seed=23),
    "3x3_dilated_co48": geometry(h=9, w=8, ci=4, co=48, d=(2, 2), act="RELU", seed=24),
    "5x5_same_stride3": geometry(h=10, w=7, ci=2, co=5, k=(5, 5), s=(3, 2), seed=25),
    "several_blocks_1x1": geometry(h=20, w=12, ci=300, co=20, k=(1, 1), seed=26),
}


@pytest.mark.parametrize("zp_w", [0, 3, 128, 200, 255])
@pytest.mark.parametrize("name", list(UINT8_CASES))
def test_conv2d_uint8(name, zp_w, isa_level):
    g = UINT8_CASES[name]
    zp_in = [0, 255, 131, 7, 250][zp_w % 5]
    check_level(*conv_case_uint8(g, zp_w, zp_in, zero_bias=zp_w == 3), isa_level)


@settings(max_examples=scaled(10), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow,
                                                                                 HealthCheck.function_scoped_fixture])
@given(st.fixed_dictionaries({
    "n": st.integers(1, 2), "h": st.integers(1, 12), "w": st.integers(1, 12), "cig": st.integers(1, 70),
    "groups": st.just(1), "cog": st.integers(1, 70), "kh": st.integers(1, 3), "kw": st.integers(1, 3),
    "sh": st.integers(1, 2), "sw": st.integers(1, 2), "dh": st.integers(1, 2), "dw": st.integers(1, 2),
    "padding": st.sampled_from(["SAME", "VALID"]), "act": st.sampled_from(["NONE", "RELU", "RELU6"]),
    "seed": st.integers(0, 2**31 - 1)}), st.sampled_from([0, 3, 128, 200, 255]), st.sampled_from([0, 1, 128, 254, 255]),
    st.booleans())
def test_conv2d_uint8_random(isa_level, g, zp_w, zp_in, zero_bias):
    _, _, oh, ow = conv_shapes(g)
    assume(oh > 0 and ow > 0)
    check_level(*conv_case_uint8(g, zp_w, zp_in, zero_bias), isa_level)


# --- hybrid (float32 activations, int8 weights): the same tiles with a float32 epilogue (hybrid_gemm) ----------------


def check_exact(data: bytes, inputs, level: str) -> None:
    ours, ref = run_both_single(data, inputs)
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    bad = ~((ours == ref) | (np.isnan(ours) & np.isnan(ref)))
    assert not bad.any(), f"ISA {level}: {int(bad.sum())} of {ref.size} differ, e.g. {ours[bad][:4]} vs {ref[bad][:4]}"


def hybrid_rows(rng, batch, k):
    """Input rows for the hybrid kernels: shifted normal values, one on a coarse grid (rounding ties), and in larger
    batches an all-zero row and one with a NaN (the official NaN-dependent quantization)."""
    x = (rng.standard_normal((batch, k)) + rng.uniform(-1, 1)).astype(np.float32)
    if batch > 1:
        x[1] = np.round(x[1] * 4) / 8
    if batch > 2:
        x[2] = 0
    if batch > 3:
        x[3, k // 2] = np.nan
    return x


@pytest.mark.parametrize("batch, k, units", [(1, 1, 1), (3, 5, 17), (9, 64, 48), (20, 37, 16), (2, 300, 70),
                                             (17, 64, 33)])
def test_fully_connected_hybrid(batch, k, units, isa_level):
    """Hybrid FULLY_CONNECTED (hybrid_gemm.hybrid_fc_*; the portable level keeps igemm_f32): per-channel weights with
    asymmetric inputs, and per-tensor ones with symmetric inputs, each fused activation, bit for bit."""
    rng = np.random.default_rng(batch * 1000 + k + units)
    w = rng.integers(-127, 128, (units, k)).astype(np.int8)
    x = hybrid_rows(rng, batch, k)
    for i, (per_channel, asym, act) in enumerate([(True, True, "RELU"), (False, False, "NONE"),
                                                  (True, False, "RELU6"), (False, True, "RELU_N1_TO_1")]):
        wq = ({"scales": rng.uniform(0.002, 0.02, units).astype(np.float32), "zero_points": [0] * units,
               "quantized_dimension": 0} if per_channel else (0.01, 0))
        bias = rng.standard_normal(units).astype(np.float32) if i % 2 == 0 else None
        data = fc_model([batch, k], w, w_quant=wq, bias=bias, act=act, version=12 if per_channel else 9,
                        extra_options={"asymmetric_quantize_inputs": asym})
        check_exact(data, [x * (1 + i)], isa_level)


HYBRID_CONV_CASES = {
    "3x3_k27_co32": geometry(h=9, w=11, ci=3, co=32, act="RELU6"),
    "3x3_valid_co17_batch2": geometry(n=2, h=7, w=6, ci=5, co=17, padding="VALID", seed=2),
    "2x3_mixed_dilated": geometry(h=6, w=9, ci=7, co=33, k=(2, 3), s=(1, 2), d=(1, 2), seed=4),
    "1x1_pointwise_k70": geometry(n=2, h=4, w=5, ci=70, co=24, k=(1, 1), seed=7),
    "1x1_stride2": geometry(h=7, w=6, ci=12, co=20, k=(1, 1), s=(2, 2), seed=9),
    "several_blocks_kxk": geometry(h=24, w=20, ci=16, co=16, act="RELU", seed=11),
}


@pytest.mark.parametrize("name", list(HYBRID_CONV_CASES))
def test_conv2d_hybrid(name, isa_level):
    """Hybrid CONV_2D with one group (hybrid_gemm.hybrid_conv_*): per-channel filters (asymmetric per-image input
    quantization) and a per-tensor one (symmetric), bit for bit."""
    g = HYBRID_CONV_CASES[name]
    ci, co, _, _ = conv_shapes(g)
    rng = np.random.default_rng(g["seed"] + 100)
    w = rng.integers(-127, 128, (co, g["kh"], g["kw"], ci)).astype(np.int8)
    x = (rng.standard_normal((g["n"], g["h"], g["w"], ci)) + rng.uniform(-1, 1)).astype(np.float32)
    for per_channel in (True, False):
        scales = rng.uniform(0.002, 0.02, co if per_channel else 1).astype(np.float32)
        data = conv2d_model(g, np.float32, w, rng.standard_normal(co).astype(np.float32), np.float32,
                            w_quant={"scales": scales.tolist(), "zero_points": [0] * scales.size,
                                     "quantized_dimension": 0}, version=5 if per_channel else 2)
        check_exact(data, [x], isa_level)


@pytest.mark.parametrize("ls, rs, adj_x, adj_y, per_channel, asymmetric", [
    ([2, 17, 40], [40, 33], False, False, True, True),
    ([3, 5, 64], [1, 20, 64], False, True, False, False),
    ([1, 70, 9], [70, 48], True, False, True, False),
])
def test_batch_matmul_hybrid(ls, rs, adj_x, adj_y, per_channel, asymmetric, isa_level):
    """Hybrid BATCH_MATMUL with one constant rhs matrix (hybrid_gemm.hybrid_bmm_*: the reference kernel's
    zero-point correction truncated to int32 in the tiles' epilogue), bit for bit."""
    rng = np.random.default_rng(len(ls) * 100 + rs[-1])
    lhs = hybrid_rows(rng, int(np.prod(ls[:-1])), ls[-1]).reshape(ls)
    rhs = rng.integers(-127, 128, rs).astype(np.int8)
    n = rs[-2] if adj_y else rs[-1]
    rq = ({"scales": rng.uniform(0.002, 0.02, n).astype(np.float32), "zero_points": [0] * n,
           "quantized_dimension": len(rs) - (2 if adj_y else 1)} if per_channel else (0.01, 0))
    data = bmm_model(ls, rs, adj_x=adj_x, adj_y=adj_y, rhs_dtype=np.int8, rhs_quant=rq, rhs_const=rhs,
                     version=4 if asymmetric else 1, asymmetric=asymmetric)
    check_exact(data, [lhs], isa_level)
