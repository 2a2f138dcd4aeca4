"""The fuzzing campaign's CI slice: a fixed seed, a few minutes, both runtimes in child processes. Our crashes, our
hangs and disagreements where both ran must be zero. The long campaign is `python scripts/fuzz_campaign.py`
(SECURITY.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

import fuzz_campaign  # noqa: E402
import fuzz_sources  # noqa: E402

SLICE_SEED = 20261202
SLICE_COUNT = 80


def test_sources_cover_what_the_campaign_needs():
    names = [n for n, _ in fuzz_sources.source_models()]
    built = [n for n in names if n.startswith("built:")]
    assert len(built) >= 40, len(built)
    for family in ("int16", "hybrid", "while", "if_", "variable", "lstm", "svdf", "custom", "gather", "scatter",
                   "segment", "uint8", "int8", "string"):
        assert any(family in n for n in built), family


@pytest.mark.parametrize("name", sorted(fuzz_sources.RECIPES))
def test_built_sources_run_and_agree_with_the_official_runtime(name, tmp_path, official):
    """Every built source is a valid model: both runtimes run it unmutated and agree (custom ops the official
    builtin resolver lacks run in ours only)."""
    path = tmp_path / "m.tflite"
    path.write_bytes(fuzz_sources.RECIPES[name]())
    req = {"path": str(path), "seed": 5, "mode": "normal", "invokes": 2}
    ours, theirs = fuzz_campaign.run_request("ours", req), fuzz_campaign.run_request("official", req)
    kind, why = fuzz_campaign.classify(ours, theirs)
    if name.startswith("custom_"):
        assert kind == "ours_only", (kind, theirs)
    elif kind == "ours_only":  # the official Python API cannot return an empty output ("Invalid tensor size")
        assert theirs["stage"] == "get_tensor" and "Invalid tensor size" in theirs["error"], theirs
        assert any(o.size == 0 for outs in ours["outputs"] for o in outs)
    else:
        assert kind in ("agree", "both_refused"), (kind, why, ours.get("error"), theirs.get("error"))


def test_output_comparison_tells_agreement_from_disagreement():
    a = [[np.array([1.0, np.nan, 3.0], np.float32), np.array([5, 6], np.int8)]]
    assert fuzz_campaign.outputs_agree(a, [[np.array([1.0, np.nan, 3.0001], np.float32), np.array([5, 7], np.int8)]])[0]
    assert not fuzz_campaign.outputs_agree(a, [[np.array([1.0, 0.0, 3.0], np.float32), a[0][1]]])[0]
    assert not fuzz_campaign.outputs_agree(a, [[a[0][0], np.array([5, 8], np.int8)]])[0]
    assert not fuzz_campaign.outputs_agree(a, [[a[0][0][:2], a[0][1]]])[0]
    words = np.array([b"a", b"", b"\xff\x00"], object)
    assert fuzz_campaign.outputs_agree([[words]], [[words.copy()]])[0]
    assert not fuzz_campaign.outputs_agree([[words]], [[np.array([b"a", b"", b"\xff"], object)]])[0]  # strings too
    crash = {"status": "crash", "returncode": -11, "signal": "SIGSEGV"}
    assert fuzz_campaign.classify(crash, {"status": "ran", "outputs": a})[0] == "ours_crash"
    assert fuzz_campaign.classify({"status": "hang"}, {"status": "refused"})[0] == "ours_hang"
    assert fuzz_campaign.classify({"status": "refused", "error": "x"}, {"status": "ran", "outputs": a})[0] == \
        "official_only"
    big = {"status": "ran_unreported", "error": "outputs of 2743129176 bytes too large to return to the campaign"}
    assert fuzz_campaign.classify(big, {"status": "ran", "outputs": a})[0] == "not_compared"


def test_constants_made_extreme_are_recorded():
    """A semantic mutant whose edits left a float constant beyond sqrt(FLT_MAX) (or inf) names it in its case
    (products with it can overflow float32). A NaN constant is not extreme."""
    from lite_numba.builder import ModelBuilder

    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 4])
    y = b.add_tensor("y", np.float32, [1, 2])
    b.add_op("FULLY_CONNECTED", [x, b.add_const("w", np.ones((2, 4), np.float32)),
                                 b.add_const("bias", np.zeros(2, np.float32))], [y])
    b.mark_output(y)
    rec = fuzz_campaign.to_builder(b.build())
    assert fuzz_campaign.extreme_constants(rec) == {}
    sg = rec.subgraphs[0]
    w = next(t for t in sg.tensors if t.name == "w")
    for value, extreme in ((np.nan, False), (1e19, False), (2e19, True), (-np.inf, True), (3.4e38, True)):
        arr = np.ones((2, 4), np.float32)
        arr[1, 2] = value
        rec.buffers[w.buffer] = arr.tobytes()
        assert bool(fuzz_campaign.extreme_constants(rec)) == extreme, value


def test_campaign_slice_has_no_crash_hang_or_disagreement(tmp_path, official):
    env = dict(os.environ, LITE_NUMBA_PROGRESS="0")
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "fuzz_campaign.py"), "--count", str(SLICE_COUNT), "--seed",
         str(SLICE_SEED), "--out", str(tmp_path), "--timeout", "300", "--progress", "0"],
        capture_output=True, text=True, timeout=3600, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((tmp_path / f"summary_{SLICE_SEED}.json").read_text())
    print(json.dumps({k: summary[k] for k in ("mutants", "seconds", "totals", "per_class")}, indent=1))
    totals = summary["totals"]
    assert summary["mutants"] == SLICE_COUNT
    assert set(summary["per_class"]) == {"structural", "semantic", "data"}
    assert all(sum(v.values()) > 0 for v in summary["per_class"].values()), summary["per_class"]
    bad = {k: totals.get(k, 0) for k in ("ours_crash", "ours_hang", "disagree")}
    assert bad == {"ours_crash": 0, "ours_hang": 0, "disagree": 0}, summary["findings"]
    assert totals.get("agree", 0) > 0


def _endless_loop() -> bytes:
    """while True: x = x + 1 — a loop that never ends and never grows (what a mutated WHILE often is)."""
    from lite_numba.builder import ModelBuilder

    b = ModelBuilder()
    cond = b.add_subgraph("cond")
    cond.add_input("x", np.float32, [1])
    t = cond.add_const("true", np.array(True))
    c = cond.add_tensor("c", np.bool_, [])
    cond.add_op("LOGICAL_AND", [t, t], [c])
    cond.mark_output(c)
    body = b.add_subgraph("body")
    bx = body.add_input("x", np.float32, [1])
    one = body.add_const("one", np.ones(1, np.float32))
    nx = body.add_tensor("x_next", np.float32, [1])
    body.add_op("ADD", [bx, one], [nx])
    body.mark_output(nx)
    x = b.add_input("x", np.float32, [1])
    ox = b.add_tensor("ox", np.float32, [1])
    b.add_op("WHILE", [x], [ox], options={"cond_subgraph_index": cond.index, "body_subgraph_index": body.index})
    b.mark_output(ox)
    return b.build()


def _conv_model() -> bytes:
    from lite_numba.builder import ModelBuilder

    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 9, 9, 5])
    w = b.add_const("w", np.arange(7 * 3 * 3 * 5, dtype=np.float32).reshape(7, 3, 3, 5) / 100)
    bias = b.add_const("b", np.zeros(7, np.float32))
    y = b.add_tensor("y", np.float32, [1, 9, 9, 7])
    b.add_op("CONV_2D", [x, w, bias], [y], options={"padding": "SAME", "stride_w": 1, "stride_h": 1})
    dw = b.add_const("dw", np.ones((1, 3, 3, 7), np.float32) / 9)
    z = b.add_tensor("z", np.float32, [1, 5, 5, 7])
    b.add_op("DEPTHWISE_CONV_2D", [y, dw, bias], [z], options={"padding": "SAME", "stride_w": 2, "stride_h": 2,
                                                                "depth_multiplier": 1})
    s = b.add_tensor("s", np.float32, [1, 5, 5, 7])
    b.add_op("SOFTMAX", [z], [s], options={"beta": 1.0})
    b.mark_output(s)
    return b.build()


RUN_TIMEOUT = 2.0


def test_worker_times_out_an_endless_loop_on_the_run_timeout_not_counting_compiles(tmp_path):
    """The ours worker reports its compiles, so a cold compile longer than --run-timeout is no hang, while an
    endless WHILE loop is one after --run-timeout (not after the compile budget, --timeout)."""
    env = dict(os.environ, LITE_NUMBA_PROGRESS="0", LITE_NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               LITE_NUMBA_COMPILE_WORKERS="1")
    worker = fuzz_campaign.Worker("ours", 900, env, run_timeout=RUN_TIMEOUT)
    try:
        for name, model, expect in (("conv", _conv_model(), "ran"), ("loop", _endless_loop(), "hang")):
            (tmp_path / f"{name}.tflite").write_bytes(model)
            req = {"path": str(tmp_path / f"{name}.tflite"), "seed": 1, "mode": "normal", "invokes": 1,
                   "result": str(tmp_path / f"{name}.pkl")}
            t0 = fuzz_campaign.time.monotonic()
            worker.send(req)
            res = worker.wait(req, worker.timeout)
            took = fuzz_campaign.time.monotonic() - t0
            assert res["status"] == expect, (name, res)
            if name == "conv":
                assert took > RUN_TIMEOUT, f"cold compile {took:.1f} s: too short to show it does not count"
            else:
                assert took < 60, took
    finally:
        worker.close()


def test_first_divergence_excuses_only_an_order_dependent_op_with_extreme_inputs(monkeypatch):
    """explain_divergence's verdict from the tensors both runtimes kept (given here, not run): the first operator
    whose output differs decides; a sum of products whose partial sums can pass FLT_MAX is an overflow, an
    elementwise operator, ordinary or non-finite inputs are a disagreement."""
    from lite_numba.builder import ModelBuilder

    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 2])
    y = b.add_tensor("y", np.float32, [1, 2])
    wi = b.add_const("w", np.ones((2, 2), np.float32))
    b.add_op("FULLY_CONNECTED", [x, wi, -1], [y])
    z = b.add_tensor("z", np.float32, [1, 2])
    b.add_op("RELU", [y], [z])
    b.mark_output(z)
    data = b.build()
    w = np.ones((2, 2), np.float32)
    top = np.finfo(np.float32).max

    def check(ours, theirs, verdict, op):  # the tensors given in the order x, w, y, z
        runs = {r: dict(zip((x, wi, y, z), v.values())) for r, v in (("ours", ours), ("official", theirs))}
        monkeypatch.setattr(fuzz_campaign, "run_request",
                            lambda runtime, req, keep_all=False: {"status": "ran", "outputs": [],
                                                                  "tensors": [runs[runtime]]})
        got = fuzz_campaign.explain_divergence(data, {})
        assert (got["verdict"], got.get("op")) == (verdict, op), got

    xe = np.array([[top, -top]], np.float32)
    check({0: xe, 1: w, 2: np.array([[0.0, 0.0]], np.float32), 3: np.zeros((1, 2), np.float32)},
          {0: xe, 1: w, 2: np.array([[np.nan, 0.0]], np.float32), 3: np.zeros((1, 2), np.float32)},
          "overflow", "FULLY_CONNECTED")
    xo = np.array([[1.0, 2.0]], np.float32)
    check({0: xo, 1: w, 2: np.array([[3.0, 3.0]], np.float32), 3: np.array([[3.0, 3.0]], np.float32)},
          {0: xo, 1: w, 2: np.array([[3.5, 3.0]], np.float32), 3: np.array([[3.5, 3.0]], np.float32)},
          "disagree", "FULLY_CONNECTED")
    small = np.full((2, 2), 1e-3, np.float32)  # FLT_MAX times 1e-3 twice: no order of summation overflows
    check({0: xe, 1: small, 2: np.array([[0.0, 0.0]], np.float32), 3: np.zeros((1, 2), np.float32)},
          {0: xe, 1: small, 2: np.array([[1.0, 0.0]], np.float32), 3: np.zeros((1, 2), np.float32)},
          "disagree", "FULLY_CONNECTED")
    xn = np.array([[np.nan, np.inf]], np.float32)  # non-finite inputs give the same sum in every order
    check({0: xn, 1: w, 2: np.array([[np.nan, 0.0]], np.float32), 3: np.zeros((1, 2), np.float32)},
          {0: xn, 1: w, 2: np.array([[1.0, 0.0]], np.float32), 3: np.zeros((1, 2), np.float32)},
          "disagree", "FULLY_CONNECTED")
    ye = np.array([[2.0, -5.0]], np.float32)
    check({0: xe, 1: w, 2: ye, 3: np.array([[2.0, 0.0]], np.float32)},
          {0: xe, 1: w, 2: ye, 3: np.array([[2.0, -5.0]], np.float32)},
          "disagree", "RELU")
