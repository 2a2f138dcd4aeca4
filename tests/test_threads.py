"""num_threads: the parallel kernel variants give the same bytes as one thread, and match the official runtime.

Every case runs on every instruction-set level of kernels.isa.LEVELS (the isa_level fixture; a level this CPU lacks is
skipped with the missing features named) with num_threads=1 and 2, each in a new Interpreter; the two thread counts
must give identical outputs, and both must match the official builtin kernels (float within the "accumulation"
tolerance of lite_numba.testing.TOLERANCES, integers exactly). Each case is big
enough that num_threads=2 schedules a parallel driver (checked by name, so a threshold change cannot silently
leave the parallel code untested), and covers one way of splitting the work: row bands of a float GEMM /
convolution, column panels of a one-row FULLY_CONNECTED, batches and row bands of BATCH_MATMUL, image ranges and
row bands of the int8 GEMM (KxK im2col and pointwise), float depthwise over a banded padded input and over the
input itself, int8 / uint8 depthwise over its banded driver, ranges of an 8-bit ADD's table lookups. Whole models:
the bundled small CNNs and MobileNet v2 (int8 bundled, float32 built in code).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import model_path, scaled
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from linear_models import bmm_model, conv2d_model, conv_case_int8, dw_float_case, dw_quant_case, fc_model, fc_quant_case

# imported under the name the hypothesis test's body uses: a derandomized test's examples are seeded by its source
from linear_models import geometry as _geometry
from lite_numba.kernels.base import threads

from lite_numba import Interpreter
from lite_numba.jit import team
from lite_numba.testing import assert_close, require_official, run_interpreter, run_official

require_official()


def _kernels(it: Interpreter) -> tuple[set[str], set[str]]:
    """(names, modules) of the kernels an interpreter's main graph scheduled."""
    calls = [c.fn for p in it.runtime.main.prepared if p is not None for c in p.calls]
    return {getattr(f, "__name__", "") for f in calls}, {getattr(f, "__module__", "") or "" for f in calls}


def run_threads(data: bytes, inputs, threads: int):
    """(outputs, names of the scheduled kernels, their modules) of one invoke in a new Interpreter."""
    outs, it = run_interpreter(data, inputs, num_threads=threads)
    return (outs, *_kernels(it))


def check_threads(data: bytes, inputs, level: str, parallel: str | None, family: str = "accumulation") -> None:
    """parallel: where num_threads=2 must schedule a parallel driver: "all" levels, "simd" (wherever one thread
    scheduled an explicit-SIMD kernel, kernels/simd_*), or None."""
    refs = run_official(data, inputs)
    one, names1, modules1 = run_threads(data, inputs, 1)
    two, names2, _ = run_threads(data, inputs, 2)
    assert not any(n.endswith("_par") for n in names1), f"{level}: a parallel kernel with one thread: {names1}"
    simd = any("simd" in m or m.endswith(("hybrid_gemm", "fc_int4")) for m in modules1)
    if parallel == "all" or (parallel == "simd" and simd):
        assert any(n.endswith("_par") for n in names2), f"{level}: no parallel kernel with two threads: {names2}"
    # the same parallel drivers with the team limit at 1 (lite_numba/jit/team.py: a core taken by another process):
    # every chunk on the calling thread
    team.force_team_limit(1)
    try:
        serial, _, _ = run_threads(data, inputs, 2)
    finally:
        team.force_team_limit(None)
    for k, (a, b, c, ref) in enumerate(zip(one, two, serial, refs)):
        np.testing.assert_array_equal(a, b, err_msg=f"{level}: 1 and 2 threads differ")
        np.testing.assert_array_equal(a, c, err_msg=f"{level}: 1 thread and 2 with the team limit at 1 differ")
        assert_close(b, ref, family=family, what=f"{level} output {k}")  # integers exact


def _conv_f32(g):
    rng = np.random.default_rng(g["seed"])
    w = rng.standard_normal((g["cog"], g["kh"], g["kw"], g["cig"])).astype(np.float32)
    b = rng.standard_normal(g["cog"]).astype(np.float32)
    data = conv2d_model(g, np.float32, w, b, np.float32)
    return data, [rng.standard_normal((g["n"], g["h"], g["w"], g["cig"])).astype(np.float32)]


def _conv_int8(g):
    return conv_case_int8(g, per_channel=True)


def _dw_f32(g):
    return dw_float_case({**g, "ci": g["cig"], "dm": 1})


def _dw_q(g, kind="int8"):
    return dw_quant_case({"n": g["n"], "h": g["h"], "w": g["w"], "ci": g["cig"], "dm": 1, "kh": g["kh"],
                          "kw": g["kw"], "sh": g["sh"], "sw": g["sw"], "dh": 1, "dw": 1, "padding": g["padding"],
                          "act": g["act"], "seed": g["seed"]}, kind)


# name -> (case, where num_threads=2 must schedule a parallel driver: "all" paths or "simd" only)
CASES = {
    "conv_f32_3x3_row_bands": (lambda: _conv_f32(_geometry(h=23, w=21, ci=16, co=40, act="RELU6", seed=1)),
                               "all"),
    "conv_f32_1x1_batch2": (lambda: _conv_f32(_geometry(n=2, h=15, w=13, ci=48, co=70, k=(1, 1), seed=2)),
                            "all"),
    "conv_f32_stride2_valid": (lambda: _conv_f32(_geometry(h=31, w=29, ci=8, co=33, s=(2, 2), padding="VALID",
                                                           seed=3)), "all"),
    "conv_int8_3x3_row_bands": (lambda: _conv_int8(_geometry(h=21, w=19, ci=16, co=40, act="RELU6", seed=4)),
                                "all"),
    "conv_int8_1x1_row_bands": (lambda: _conv_int8(_geometry(h=21, w=19, ci=64, co=48, k=(1, 1), seed=5)),
                                "all"),
    "conv_int8_3x3_batch3": (lambda: _conv_int8(_geometry(n=3, h=16, w=15, ci=16, co=24, s=(2, 1), seed=6)),
                             "all"),
    "dw_f32_banded_same": (lambda: _dw_f32(_geometry(h=40, w=37, ci=40, co=40, act="RELU6", seed=7)),
                           "all"),
    "dw_f32_stride2_batch2": (lambda: _dw_f32(_geometry(n=2, h=57, w=55, ci=24, co=24, s=(2, 2), seed=8)),
                              "all"),
    "dw_f32_valid_unpadded": (lambda: _dw_f32(_geometry(h=40, w=38, ci=48, co=48, padding="VALID", seed=9)),
                              "all"),
    "dw_int8_banded_same": (lambda: _dw_q(_geometry(h=40, w=37, ci=40, co=40, act="RELU6", seed=16)), "simd"),
    "dw_int8_stride2_batch2": (lambda: _dw_q(_geometry(n=2, h=57, w=55, ci=24, co=24, s=(2, 2), seed=17)), "simd"),
    "dw_uint8_banded_same": (lambda: _dw_q(_geometry(h=40, w=37, ci=27, co=27, seed=18), "uint8"), "simd"),
}


def _fc_f32(batch, k, units, seed):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((units, k)).astype(np.float32)
    data = fc_model([batch, k], w, bias=rng.standard_normal(units).astype(np.float32), act="RELU")
    return data, [rng.standard_normal((batch, k)).astype(np.float32)]


def _fc_int8(batch, k, units, seed):
    rng = np.random.default_rng(seed)
    data, x = fc_quant_case(rng, np.int8, np.int8, batch, k, units, True, np.int32, "RELU")
    return data, [x]


def _bmm(b, m, k, n, seed, rhs_batch=None):
    rng = np.random.default_rng(seed)
    ls, rs = [b, m, k], [rhs_batch or b, k, n]
    return bmm_model(ls, rs), [rng.standard_normal(ls).astype(np.float32), rng.standard_normal(rs).astype(np.float32)]


CASES.update({
    "fc_f32_one_row_panels": (lambda: _fc_f32(1, 700, 650, 10), "simd"),
    "fc_f32_batch40": (lambda: _fc_f32(40, 200, 90, 11), "all"),
    "fc_int8_batch8": (lambda: _fc_int8(8, 1024, 160, 12), "all"),
    "bmm_f32_batches": (lambda: _bmm(3, 40, 64, 50, 13), "simd"),
    "bmm_f32_one_batch_row_bands": (lambda: _bmm(1, 70, 90, 60, 14), "simd"),
    "bmm_f32_broadcast_rhs": (lambda: _bmm(4, 30, 48, 70, 15, rhs_batch=1), "simd"),
})


def _fc_hybrid(batch, k, units, seed):
    rng = np.random.default_rng(seed)
    w = rng.integers(-127, 128, (units, k)).astype(np.int8)
    wq = {"scales": rng.uniform(0.002, 0.02, units).astype(np.float32), "zero_points": [0] * units,
          "quantized_dimension": 0}
    data = fc_model([batch, k], w, w_quant=wq, bias=rng.standard_normal(units).astype(np.float32), act="RELU",
                    version=12, extra_options={"asymmetric_quantize_inputs": True})
    return data, [rng.standard_normal((batch, k)).astype(np.float32)]


def _conv_hybrid(g):
    rng = np.random.default_rng(g["seed"])
    w = rng.integers(-127, 128, (g["cog"], g["kh"], g["kw"], g["cig"])).astype(np.int8)
    scales = rng.uniform(0.002, 0.02, g["cog"]).astype(np.float32)
    data = conv2d_model(g, np.float32, w, rng.standard_normal(g["cog"]).astype(np.float32), np.float32,
                        w_quant={"scales": scales.tolist(), "zero_points": [0] * g["cog"], "quantized_dimension": 0},
                        version=5)
    return data, [rng.standard_normal((g["n"], g["h"], g["w"], g["cig"])).astype(np.float32)]


def _add_int8(shape, seed):
    """An 8-bit ADD of same-shape inputs (the pair-table lookup); a size not a multiple of 16 has a scalar tail,
    which the second part then holds."""
    from lite_numba.builder import ModelBuilder

    rng = np.random.default_rng(seed)
    b = ModelBuilder()
    x = b.add_input("x", np.int8, list(shape), quant=(0.05, -3))
    y = b.add_input("y", np.int8, list(shape), quant=(0.08, 5))
    z = b.add_tensor("z", np.int8, list(shape), quant=(0.1, 2))
    b.add_op("ADD", [x, y], [z], version=2)
    b.mark_output(z)
    return b.build(), [rng.integers(-128, 128, shape).astype(np.int8) for _ in range(2)]


def _fc_int4(batch, k, units, seed):
    from test_blockwise import blockwise_fc

    return blockwise_fc((batch, k), units, 32, seed=seed), [np.random.default_rng(seed).standard_normal(
        (batch, k)).astype(np.float32)]


# the hybrid (dynamic-range) and INT4 kernels (hybrid_schedule): row chunks, panel ranges of one row, conv blocks
CASES.update({
    "fc_hybrid_rows": (lambda: _fc_hybrid(40, 256, 130, 20), "simd"),
    "fc_hybrid_one_row_panels": (lambda: _fc_hybrid(1, 2048, 700, 21), "simd"),
    "conv_hybrid_3x3_row_bands": (lambda: _conv_hybrid(_geometry(n=2, h=21, w=19, ci=16, co=40, seed=22)), "simd"),
    "conv_hybrid_1x1_stride2": (lambda: _conv_hybrid(_geometry(h=40, w=38, ci=64, co=48, k=(1, 1), s=(2, 2),
                                                               seed=23)), "simd"),
    "fc_int4_rows": (lambda: _fc_int4(24, 512, 96, 24), "simd"),
    "fc_int4_one_row_panels": (lambda: _fc_int4(1, 2048, 640, 25), "simd"),
    "add_int8_pair_table_parts": (lambda: _add_int8((3, 4101), 26), "all"),
})


@pytest.mark.parametrize("name", list(CASES))
def test_two_threads_identical_and_official(name, isa_level):
    make, parallel = CASES[name]
    data, inputs = make()
    check_threads(data, inputs, isa_level, parallel)


@settings(max_examples=scaled(12), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["conv_f32", "conv_int8", "dw_f32", "dw_int8", "conv_hybrid"]), st.fixed_dictionaries({
    "n": st.integers(1, 3), "h": st.integers(1, 13), "w": st.integers(1, 9), "ci": st.integers(1, 20),
    "co": st.integers(1, 70), "k": st.sampled_from([(1, 1), (3, 3), (2, 3)]), "s": st.sampled_from([(1, 1), (2, 2)]),
    "padding": st.sampled_from(["SAME", "VALID"]), "seed": st.integers(0, 2**31 - 1)}))
def test_any_split_is_identical(monkeypatch, isa_level, kind, g):
    """Every layer split, however small (thresholds 0): remainders of bands, fewer rows than threads, batches."""
    g = _geometry(**g)
    if kind in ("dw_f32", "dw_int8"):
        g["cog"] = g["cig"]
    assume(not (g["padding"] == "VALID" and (g["h"] < g["kh"] or g["w"] < g["kw"])))
    monkeypatch.setattr(threads, "MIN_MACS", 0)
    monkeypatch.setattr(threads, "MIN_Q8_MACS", 0)
    monkeypatch.setattr(threads, "MIN_DW_MACS", 0)
    monkeypatch.setattr(threads, "MIN_ELEMENTS", 0)  # (the float convolutions' padded copy too: pad_nhwc_par)
    make = {"conv_f32": _conv_f32, "conv_int8": _conv_int8, "dw_f32": _dw_f32, "dw_int8": _dw_q,
            "conv_hybrid": _conv_hybrid}[kind]
    check_threads(*make(g), isa_level, None)


@pytest.mark.parametrize("size, split", [(12303, 12288), (12303, 5000), (12303, 12303), (130, 128)])
def test_pair_lookup_parts_keep_each_elements_table(size, split):
    """pair_lookup_par's parts look every element up in the table it uses with one thread (the vector blocks'
    below split, the scalar tail's from it), wherever split falls among the parts: two tables that differ
    everywhere, the parts against the serial lookup."""
    from lite_numba.kernels.elementwise.binary_neon import binary_pair_lookup, pair_lookup_par

    rng = np.random.default_rng(size + split)
    x, y = (rng.integers(0, 256, size).astype(np.uint8) for _ in range(2))
    tneon = (np.arange(65536) % 251).astype(np.uint8)
    tscalar = (255 - tneon).astype(np.uint8)
    want = np.zeros(size, np.uint8)
    binary_pair_lookup(x, y, want, tneon, tscalar, split)
    got = np.zeros(size, np.uint8)
    ch = np.array(threads.bands(size, 3, 64), np.int64).reshape(-1)
    addr = threads.serial_address(binary_pair_lookup, [x, y, got, tneon, tscalar, split])
    pair_lookup_par(addr, x, y, got, tneon, tscalar, split, ch, np.zeros(1, np.int64), 2)
    np.testing.assert_array_equal(got, want)


def _model_inputs(data: bytes, seed: int):
    it = Interpreter(model_content=data)
    rng = np.random.default_rng(seed)
    out = []
    for d in it.get_input_details():
        if d["dtype"] == np.float32:
            out.append(rng.standard_normal(d["shape"]).astype(np.float32))
        else:
            ii = np.iinfo(d["dtype"])
            out.append(rng.integers(ii.min, ii.max + 1, d["shape"]).astype(d["dtype"]))
    return out


@pytest.mark.parametrize("name", ["small_cnn_f32", "small_cnn_int8", "mobilenet_v2_035_96_built_f32",
                                  "mobilenet_v2_035_96_int8"])
def test_models_two_threads(name, isa_level):
    if name.endswith("_built_f32"):
        from mobilenet import mobilenet_v2
        data = mobilenet_v2()
    else:
        data = model_path(name).read_bytes()  # bundled: fails under CI=true if missing, never skips there
    check_threads(data, _model_inputs(data, 0), isa_level, None, family="model")


def test_default_is_one_thread():
    data, inputs = CASES["conv_f32_3x3_row_bands"][0]()
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    names, _ = _kernels(it)
    assert not any(n.endswith("_par") for n in names), names


def test_team_policy_follows_the_faster_setting():
    """TeamPolicy (lite_numba/jit/team.py) with a clock of its own: a run that costs 10 units with the workers and 4
    on the calling thread (a core taken) switches to the calling thread at the first probe (the second and third
    invokes: a probe's first invoke only wakes the setting up) and probes ever more rarely while that holds; when the
    workers become faster again (3 against 4) it switches back within a few probes; the limit is cleared after every
    run; a forced limit runs without probes. (No time budget for probes here: test_team_policy_probes_within_budget.)"""
    now = [0]
    cost = {0: 10, 1: 4}
    seen = []

    def run():
        seen.append(team.team_limit())
        now[0] += cost[team.team_limit()]

    policy = team.TeamPolicy(run, clock=lambda: now[0], warm_ns=0, budget=0)
    policy()
    policy()
    assert seen == [0, 1] and not policy.serial  # the probe's first invoke: not recorded
    policy()
    assert seen == [0, 1, 1] and policy.serial and team.team_limit() == 0
    for _ in range(3000):
        policy()
    probes = [i for i, v in enumerate(seen) if v == 0]
    starts = [i for i in probes if i > 0 and i - 1 not in probes]  # (the first invoke ran the workers: no probe)
    assert all(i + 1 in probes for i in starts[:-1])  # pairs: a wake-up invoke, then the recorded one
    assert len(starts) < 20 and starts[-1] - starts[-2] == team.MAX_INTERVAL + 1  # rarer and rarer, up to the cap
    cost[0] = 3
    for _ in range(5 * team.MAX_INTERVAL):
        policy()
    assert not policy.serial
    team.force_team_limit(1)
    try:
        n = len(seen)
        for _ in range(100):
            policy()
        assert set(seen[n:]) == {1}  # forced: no probes
    finally:
        team.force_team_limit(None)
    assert team.team_limit() == 0


@pytest.mark.parametrize("slow", [30, 3000])
def test_team_policy_probes_within_budget(slow):
    """A probe that loses (the workers cost `slow` against 4 on the calling thread: a core taken; 3000 as a worker
    waiting a time slice) is followed by invokes worth at least PROBE_BUDGET times its extra cost (its two invokes
    against two on the calling thread) before the next one, so the probes take at most ~1 / PROBE_BUDGET of the time
    however slow the setting they try; the choice stays the calling thread, and a cheap probe still comes at the
    invoke interval's pace."""
    now = [0]
    cost = {0: slow, 1: 4}
    seen = []

    def run():
        seen.append(team.team_limit())
        now[0] += cost[team.team_limit()]

    policy = team.TeamPolicy(run, clock=lambda: now[0], warm_ns=0)
    for _ in range(20000 if slow < 100 else 400000):
        policy()
    assert policy.serial
    extra = 2 * (cost[0] - cost[1])  # a probe's two invokes beyond two on the calling thread
    probe_time = cost[0] * seen.count(0)
    assert probe_time <= now[0] / team.PROBE_BUDGET + 2 * 2 * cost[0]  # (+ the first probe's, before any budget)
    starts = [i for i in range(1, len(seen)) if seen[i] == 0 and seen[i - 1] == 1]
    assert len(starts) >= 3
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert all(g * cost[1] >= team.PROBE_BUDGET * extra for g in gaps)
    if slow == 30:  # 2 x 26 x 50 = 2600 = 650 invokes: the 1,024-invoke interval takes over
        assert gaps[-1] == team.MAX_INTERVAL + 1
