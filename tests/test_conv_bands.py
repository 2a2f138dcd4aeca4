"""Float inverted-residual chains, [1x1 CONV_2D ->] DEPTHWISE_CONV_2D [-> 1x1 CONV_2D [-> ADD]], run in bands of rows
(lite_numba/runtime/fusion_bands.py, kernels/linear/conv_bands.py).

Each chain runs banded and op by op (experimental_preserve_all_tensors turns the rewrites off) on every ISA level:
the same bytes, also on inputs holding NaN, infinities, -0.0 and overflowing values, and both match the official
runtime. Small band budgets force many bands (one output row each, a few, the last one short), over strides 1 and
2, SAME and VALID padding, 3x3 and 5x5 windows, several images; the default budget bands a chain whose intermediates
exceed L2. The scheduled kernels show which way it ran (the banded driver on the SIMD levels; the stages' own calls
on the portable one, with two threads, and where the rewrite must not apply).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import kernel_names
from lite_numba.kernels.base.isa import has
from lite_numba.kernels.linear import conv_bands, simd_f32

from lite_numba.builder import ModelBuilder
from lite_numba.jit import team
from lite_numba.testing import assert_close, require_official, run_interpreter, run_official

require_official()

F32 = np.float32


def _chain(n=1, h=20, w=19, ci=8, t=6, k=3, stride=1, padding="SAME", expand=True, project=True, residual=True,
           dw_act="RELU6", prelu=False, expanded_output=False, expand_stride=1, dm=1):
    """x -> [CONV_2D 1x1 (RELU6)] -> DEPTHWISE_CONV_2D k x k -> [CONV_2D 1x1 [-> ADD x] [-> PRELU]]. Returns (model
    bytes, input shape)."""
    rng = np.random.default_rng(h * 131 + w * 7 + ci + k)
    mb = ModelBuilder()
    x = mb.add_input("x", F32, [n, h, w, ci])
    ce = ci * t if expand else ci
    v, eh, ew = x, h, w
    if expand:
        eh, ew = -(-h // expand_stride), -(-w // expand_stride)
        e = mb.add_tensor("e", F32, [n, eh, ew, ce])
        mb.add_op("CONV_2D", [x, mb.add_const("w1", (rng.standard_normal((ce, 1, 1, ci)) * 0.4).astype(F32)),
                              mb.add_const("b1", rng.standard_normal(ce).astype(F32))], [e],
                  options={"padding": "SAME", "stride_h": expand_stride, "stride_w": expand_stride,
                           "fused_activation_function": "RELU6"})
        if expanded_output:
            mb.mark_output(e)
        v = e
    oh, ow = ((-(-eh // stride), -(-ew // stride)) if padding == "SAME"
              else ((eh - k) // stride + 1, (ew - k) // stride + 1))
    cd = ce * dm
    d = mb.add_tensor("d", F32, [n, oh, ow, cd])
    mb.add_op("DEPTHWISE_CONV_2D", [v, mb.add_const("w2", rng.standard_normal((1, k, k, cd)).astype(F32)),
                                    mb.add_const("b2", rng.standard_normal(cd).astype(F32))], [d],
              options={"padding": padding, "stride_h": stride, "stride_w": stride, "depth_multiplier": dm,
                       "fused_activation_function": dw_act})
    v = d
    if project:
        co = ci
        p = mb.add_tensor("p", F32, [n, oh, ow, co])
        mb.add_op("CONV_2D", [d, mb.add_const("w3", (rng.standard_normal((co, 1, 1, cd)) * 0.2).astype(F32)),
                              mb.add_const("b3", rng.standard_normal(co).astype(F32))], [p],
                  options={"padding": "SAME", "stride_h": 1, "stride_w": 1, "fused_activation_function": "NONE"})
        v = p
        if residual and (oh, ow) == (h, w):
            s = mb.add_tensor("s", F32, [n, oh, ow, co])
            mb.add_op("ADD", [p, x], [s])
            v = s
        if prelu:
            q = mb.add_tensor("q", F32, [n, oh, ow, co])
            mb.add_op("PRELU", [v, mb.add_const("a", (rng.standard_normal((1, 1, co)) * 0.3).astype(F32))], [q])
            v = q
    mb.mark_output(v)
    return mb.build(), [n, h, w, ci]


def _inputs(shape, seed=0, special=False):
    x = (np.random.default_rng(seed).standard_normal(shape) * 3).astype(F32)
    if special:
        vals = np.array([np.nan, np.inf, -np.inf, -0.0, 3e38, -3e38], F32)
        flat = x.reshape(-1)
        idx = np.random.default_rng(seed + 1).choice(flat.size, size=4 * vals.size, replace=False)
        flat[idx] = np.resize(vals, idx.size)
    return [x]


def _same_bits(a, b, what):
    nan = np.isnan(a)
    assert np.array_equal(nan, np.isnan(b)), f"{what}: NaN in other places"
    assert a[~nan].tobytes() == b[~nan].tobytes(), f"{what}: differ"


def _fused(it) -> bool:
    return any(n.op_name == "FUSED_CONV_BANDS" for n in it.runtime.graph(0).plan.nodes)


CASES = {  # name: (_chain keyword arguments, band budget in bytes: 1 = one output row a band)
    "block_s1_one_row_bands": (dict(), 1),
    "block_s1_few_rows": (dict(h=23, w=17), 12_000),
    "block_s2": (dict(h=21, w=22, stride=2), 1),
    "block_s2_valid_5x5": (dict(h=25, w=24, stride=2, k=5, padding="VALID"), 9_000),
    "block_5x5_two_images_prelu": (dict(n=2, h=14, w=13, k=5, prelu=True), 15_000),
    "expand_dw_only": (dict(h=18, w=20, project=False), 1),
    "dw_project_only_no_residual": (dict(h=17, w=18, ci=24, t=1, expand=False, residual=False), 1),
    "dw_project_add": (dict(h=16, w=16, ci=16, t=1, expand=False), 5_000),
    "narrow_rows_3_wide": (dict(h=12, w=3, ci=4), 1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_banded_matches_unfused_and_official(name, isa_level, monkeypatch):
    kw, budget = CASES[name]
    monkeypatch.setattr(conv_bands, "BAND_BYTES", budget)
    data, shape = _chain(**kw)
    xs = _inputs(shape)
    (ours,), it = run_interpreter(data, xs)
    assert _fused(it), f"{name}: not rewritten"
    banded = "conv_bands_f32" in kernel_names(it)  # the x86 SIMD levels (the depthwise kernel read in place)
    assert banded == isa_level.startswith(("avx", "amx")), f"{name} on {isa_level}: banded {banded}"
    (plain,), it0 = run_interpreter(data, xs, experimental_preserve_all_tensors=True)
    assert not _fused(it0)
    assert ours.tobytes() == plain.tobytes(), f"{name} on {isa_level}: banded and op-by-op differ"
    (ref,) = run_official(data, xs)
    assert_close(ours, ref, family="accumulation", what=f"{name} on {isa_level}")
    xs = _inputs(shape, seed=3, special=True)
    (ours,), _ = run_interpreter(data, xs)
    (plain,), _ = run_interpreter(data, xs, experimental_preserve_all_tensors=True)
    _same_bits(ours, plain, f"{name} on {isa_level}: special values")


def test_default_budget_bands_what_exceeds_l2():
    """With the budget from the L2 the machine reports, a chain whose expanded activation is larger than L2 runs in
    bands (on x86 SIMD levels), a small one op by op; the bytes are the same either way."""
    side = int(np.ceil(np.sqrt(3 * simd_f32.L2_BYTES / (4 * 48)))) + 2  # expanded: 48 channels, 3x L2
    for h, want in ((side, True), (10, False)):
        data, shape = _chain(h=h, w=h, ci=8)
        xs = _inputs(shape)
        (ours,), it = run_interpreter(data, xs)
        assert _fused(it) and ("conv_bands_f32" in kernel_names(it)) == (want and has("avx2")), (h, kernel_names(it))
        (plain,), _ = run_interpreter(data, xs, experimental_preserve_all_tensors=True)
        assert ours.tobytes() == plain.tobytes()


@pytest.mark.parametrize("kw", [
    dict(expanded_output=True),  # the expanded activation is also a graph output: no expansion stage
    dict(expand_stride=2),  # a strided 1x1 expansion
    dict(dm=2, project=False),  # a depth multiplier of 2
], ids=["expanded_output", "strided_expansion", "depth_multiplier"])
def test_stages_left_out(kw, monkeypatch):
    monkeypatch.setattr(conv_bands, "BAND_BYTES", 1)
    data, shape = _chain(**kw)
    xs = _inputs(shape)
    outs, it = run_interpreter(data, xs)
    plan = it.runtime.graph(0).plan
    fused = [n for n in plan.nodes if n.op_name == "FUSED_CONV_BANDS"]
    stages = [s[0] for n in fused for s in n.options["stages"]]
    if "dm" in kw:
        assert not fused
    else:  # the depthwise layer and the projection only
        assert stages == ["DEPTHWISE_CONV_2D", "CONV_2D"], stages
    for ours, ref in zip(outs, run_official(data, xs)):
        assert_close(ours, ref, family="accumulation")


def test_two_threads_run_the_stages_unbanded(monkeypatch):
    monkeypatch.setattr(conv_bands, "BAND_BYTES", 1)
    data, shape = _chain(h=24, w=24)
    xs = _inputs(shape, special=True)
    (one,), it1 = run_interpreter(data, xs)
    assert "conv_bands_f32" in kernel_names(it1) or not has("avx2")
    team.force_team_limit(0)
    try:
        (two,), it2 = run_interpreter(data, xs, num_threads=2)
    finally:
        team.force_team_limit(None)
    assert _fused(it2) and "conv_bands_f32" not in kernel_names(it2)
    _same_bits(one, two, "two threads")


@pytest.mark.parametrize("geo,KH,H,OH,rows", [
    ((1, 1, 1, 1, 1, 1), 3, 20, 20, 3),
    ((2, 2, 1, 1, 1, 1), 3, 21, 11, 2),  # SAME at stride 2
    ((2, 2, 1, 1, 0, 0), 5, 25, 11, 4),  # VALID 5x5
    ((1, 1, 2, 2, 2, 2), 3, 9, 9, 1),  # dilation 2
])
def test_band_schedule_covers_each_window_once(geo, KH, H, OH, rows):
    """Every band's rows [lo, hi) hold all the rows its windows read inside the image; [new, hi) are computed once
    per image, in order, and the rows a band keeps, [lo, new), were computed by the band before."""
    sched = conv_bands.band_schedule(2, H, OH, np.array(geo, np.int64), KH, rows)
    sh, dh, pt = geo[0], geo[2], geo[4]
    for n in range(2):
        b = sched[sched[:, 0] == n]
        assert b[0, 1] == 0 and b[-1, 2] == OH and (b[1:, 1] == b[:-1, 2]).all()
        computed = []
        for _, y0, y1, lo, hi, new in b:
            read = [y * sh - pt + ky * dh for y in range(y0, y1) for ky in range(KH)]
            inside = [r for r in read if 0 <= r < H]
            assert 0 <= lo <= min(inside) and max(inside) < hi <= H
            assert set(range(lo, new)) <= set(computed)
            computed += range(new, hi)
        assert computed == sorted(set(computed))
