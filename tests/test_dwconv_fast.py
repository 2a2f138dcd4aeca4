"""The fast DEPTHWISE_CONV_2D kernels (kernels/linear/dwconv*.py) against the official runtime.

Each case runs on every instruction-set level of kernels.isa.LEVELS (the isa_level fixture; a level this CPU lacks
is skipped with the missing features named), each time in a new Interpreter: float32 within the "accumulation"
tolerance of lite_numba.testing.TOLERANCES, int8 / uint8 bit-exact; the cross-path checks (simd_level) also require
each non-portable level to give the portable path's bytes. Shapes cover windows 1..5, strides 1-2, dilation,
SAME/VALID, depth multipliers 1 and 2, channel counts that are not multiples of the vector width (including a
16-channel block straddling the requantization's vector/scalar boundary), batches > 1, fused activations, per-
channel and per-tensor scales and zero points.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from linear_models import (
    CONV_ACTS,
    CONV_RESOLVER,
    dw_model,
    quant_case,
    run_conv,
)

# imported under the names the hypothesis tests' bodies use: a derandomized test's examples are seeded by its source
from linear_models import check_conv as check
from linear_models import dw_float_case as _float_case
from linear_models import dw_quant_case as _quant_case
from lite_numba.kernels.base import isa
from lite_numba.kernels.linear import conv, dwconv

from lite_numba import Interpreter
from lite_numba.testing import require_official

require_official()

FEW = settings(max_examples=scaled(12), deadline=None, database=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

geometry = st.fixed_dictionaries({
    "n": st.integers(1, 2), "h": st.integers(1, 11), "w": st.integers(1, 11),
    "ci": st.sampled_from([1, 3, 8, 13, 16, 19, 27, 33, 47, 64, 70]), "dm": st.sampled_from([1, 1, 1, 2]),
    "kh": st.integers(1, 5), "kw": st.integers(1, 5), "sh": st.integers(1, 2), "sw": st.integers(1, 2),
    "dh": st.sampled_from([1, 1, 2]), "dw": st.sampled_from([1, 1, 2]),
    "padding": st.sampled_from(["SAME", "VALID"]), "act": st.sampled_from(CONV_ACTS),
    "seed": st.integers(0, 2**31 - 1),
})


def _out(g, size, k, s, d):
    eff = (k - 1) * d + 1
    return -(-size // s) if g["padding"] == "SAME" else max((size - eff) // s + 1, 0)


def _valid(g):
    return _out(g, g["h"], g["kh"], g["sh"], g["dh"]) > 0 and _out(g, g["w"], g["kw"], g["sw"], g["dw"]) > 0


@FEW
@given(g=geometry)
def test_float_matches_official(isa_level, g):
    assume(_valid(g))
    check(*_float_case(g))


@FEW
@given(g=geometry, kind=st.sampled_from(["int8", "int8_per_tensor", "uint8"]))
def test_quantized_matches_official(isa_level, g, kind):
    assume(_valid(g))
    check(*_quant_case(g, kind))


# The shapes of MobileNet's depthwise layers (3x3, stride 1 and 2, SAME, RELU6), wide enough for several pixel tiles;
# even sizes at stride 2 (no left padding: the interior starts at pixel 0) and rows of 3, 6, 7 and 14 pixels (a last
# tile of 1-3 pixels; a row narrower than a tile).
MOBILE = [dict(n=1, h=h, w=h, ci=ci, dm=1, kh=3, kw=3, sh=s, sw=s, dh=1, dw=1, padding="SAME", act="RELU6", seed=s0)
          for (h, ci, s, s0) in [(12, 16, 1, 1), (13, 48, 2, 2), (6, 144, 1, 3), (9, 40, 2, 4), (7, 27, 1, 5),
                                 (12, 48, 2, 6), (6, 64, 2, 7), (28, 19, 2, 8), (3, 40, 1, 9)]]


@pytest.mark.parametrize("g", MOBILE, ids=lambda g: f"{g['h']}x{g['ci']}s{g['sh']}")
@pytest.mark.parametrize("kind", ["float32", "int8", "uint8"])
def test_mobilenet_shapes_against_portable(g, kind, simd_level, monkeypatch):
    data, inputs = _float_case(g) if kind == "float32" else _quant_case(g, kind)
    _same_as_portable(data, inputs, simd_level, monkeypatch)


# The streaming models' depthwise layers (microWakeWord: a window over the time steps of one column, 1 output pixel):
# channel counts with a last block of 12 or 14 channels after whole ones, and one below 16.
STREAMING = [dict(n=1, h=h, w=1, ci=ci, dm=1, kh=h, kw=1, sh=1, sw=1, dh=1, dw=1, padding="VALID", act="NONE",
                  seed=s0) for (h, ci, s0) in [(5, 30, 6), (21, 60, 7), (9, 13, 8), (3, 47, 9)]]


@pytest.mark.parametrize("g", STREAMING, ids=lambda g: f"{g['h']}x1x{g['ci']}")
@pytest.mark.parametrize("kind", ["int8", "int8_per_tensor", "uint8"])
def test_streaming_shapes(g, kind, isa_level):
    check(*_quant_case(g, kind))


@pytest.mark.parametrize("ci", [8, 24, 40, 9])
def test_float_eight_lane_channels(ci, simd_level, monkeypatch):
    """Float channel blocks of exactly 8 (8 channels, or the last block of 24 and 40) run as one 8-lane vector with
    plain loads and stores where the target has no native masks (dwconv_lanes.emit_split's "half"): the portable
    bytes and the official outputs (9: the masked form beside it). Run for an AVX2-only CPU by the test below."""
    for s in (1, 2):
        g = dict(n=1, h=11, w=10, ci=ci, dm=1, kh=3, kw=3, sh=s, sw=s, dh=1, dw=1, padding="SAME", act="RELU6",
                 seed=ci + s)
        _same_as_portable(*_float_case(g), simd_level, monkeypatch)


def test_streaming_shapes_without_masked_byte_loads():
    """The int8 tiles' last channel blocks on a target without AVX-512 BW (dwconv_lanes.tail_load, not masked loads):
    test_streaming_shapes and a few generated cases in a process compiling for an AVX2-only CPU
    (scripts/as_level.py, its own caches), on the avx2 and avxvnni levels; and the float tiles' 8-lane blocks
    (test_float_eight_lane_channels)."""
    import os  # lazy: only this test starts a process
    import subprocess  # lazy: only this test starts a process
    import sys  # lazy: only this test starts a process
    from pathlib import Path  # lazy: only this test starts a process

    if not isa.supports("avx2"):
        pytest.skip("needs an x86 CPU with AVX2")
    root = Path(__file__).resolve().parent.parent
    for level in ("avx2", "avxvnni"):
        if level == "avxvnni" and not isa.supports("avxvnni"):
            continue
        r = subprocess.run([sys.executable, str(root / "scripts" / "as_level.py"), "--level", level, "--",
                            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(Path(__file__)),
                            "-k", f"(streaming_shapes or quantized_matches_official or eight_lane) and {level} "
                                  f"and not without"],
                           capture_output=True, text=True, cwd=root, env=dict(os.environ), timeout=1800)
        assert r.returncode == 0 and " passed" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]


def _same_as_portable(data, inputs, level, monkeypatch):
    """Both the portable path and `level` match the official runtime, and give the same bytes (the SIMD path
    computes the same operations in the same order)."""
    results = []
    for path in ("portable", level):
        monkeypatch.setenv("LITE_NUMBA_ISA", path)
        check(data, inputs)
        results.append(run_conv(data, inputs)[0])
    np.testing.assert_array_equal(results[1], results[0], err_msg=f"{level} differs from portable")


@pytest.mark.parametrize("kind,width", [("int8", 6), ("int8", 13), ("float32", 13)])
def test_padding_is_rebuilt_every_invoke(isa_level, kind, width):
    """The padded scratch lives in the shared arena: its border must be refilled at each invoke (width 13: the
    banded drivers pad only the edge columns and read the interior in place)."""
    g = dict(n=1, h=6, w=width, ci=16, dm=1, kh=3, kw=3, sh=1, sw=1, dh=1, dw=1, padding="SAME", act="NONE", seed=0)
    data, (x,) = _float_case(g) if kind == "float32" else _quant_case(g, kind)

    it = Interpreter(model_content=data, op_resolver=CONV_RESOLVER)
    it.allocate_tensors()
    inp, outp = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    firsts = []
    for v in (x, np.flip(x, 1).copy(), x):
        it.set_tensor(inp, v)
        it.invoke()
        firsts.append(it.get_tensor(outp))
    np.testing.assert_array_equal(firsts[0], firsts[2])
    np.testing.assert_array_equal(firsts[1], run_conv(data, [np.flip(x, 1).copy()])[0])


def test_module_is_wired():
    assert conv.dwconv is dwconv


# Geometries run with a tiny band budget (BAND_BYTES, MIN_BAND), so that the padded input is built one output row
# (or a few) at a time:
# bands that start inside the top padding, end in the bottom padding, strides, dilation, dm 2, batches.
BANDED = [dict(n=n, h=h, w=w, ci=ci, dm=dm, kh=kh, kw=kw, sh=s, sw=s, dh=d, dw=d, padding="SAME", act="RELU6",
               seed=seed)
          for (n, h, w, ci, dm, kh, kw, s, d, seed) in [
              (1, 12, 9, 16, 1, 3, 3, 1, 1, 1), (2, 13, 11, 19, 1, 3, 3, 2, 1, 2), (1, 10, 7, 8, 2, 5, 3, 1, 1, 3),
              (2, 9, 9, 13, 1, 3, 5, 2, 2, 4), (1, 11, 6, 33, 2, 2, 4, 1, 2, 5),
              # stride 2 without left padding (the interior from pixel 0, 1 right-edge pixel); 7-pixel rows
              (1, 12, 14, 48, 1, 3, 3, 2, 1, 6), (1, 9, 7, 40, 1, 3, 3, 1, 1, 7)]]


@pytest.mark.parametrize("budget", [(1, 1), (1, 3), (3000, 1)])
@pytest.mark.parametrize("g", BANDED, ids=lambda g: f"{g['n']}x{g['h']}x{g['w']}x{g['ci']}k{g['kh']}{g['kw']}")
@pytest.mark.parametrize("kind", ["float32", "int8", "uint8"])
def test_padded_bands(g, kind, budget, simd_level, monkeypatch):
    """The banded drivers (a band scratch of one or a few output rows) match the official runtime on every path,
    and each level gives the portable path's bytes."""
    monkeypatch.setattr(dwconv, "BAND_BYTES", budget[0])
    monkeypatch.setattr(dwconv, "MIN_BAND", budget[1])
    data, inputs = _float_case(g) if kind == "float32" else _quant_case(g, kind)
    _same_as_portable(data, inputs, simd_level, monkeypatch)


@pytest.mark.parametrize("seed", [0, 1])
def test_tiny_multipliers_every_level(seed, isa_level):
    """Nearly dead channels (weight scales ~1e-6..1e-9 of the others, as in efficientnet_lite0) give right shifts of
    22..31, which the AVX-512 output stage takes since it splits the shift; bit-exact on both paths."""
    rng = np.random.default_rng(seed)
    g = dict(n=1, h=9, w=9, ci=40, dm=1, kh=3, kw=3, sh=1, sw=1, dh=1, dw=1, padding="SAME", act="RELU6", seed=seed)
    co = 40
    c = quant_case(rng, np.int8, (1, 9, 9, co), (1, 3, 3, co), co, 3, per_channel=True)
    scales = np.asarray(c["w_quant"]["scales"], np.float32)
    scales[::3] *= np.float32(2.0) ** -rng.integers(18, 28, scales[::3].size).astype(np.float32)  # shifts 22..31
    c["w_quant"]["scales"] = scales.tolist()
    c["b_quant"]["scales"] = (np.float32(c["x_quant"][0]) * scales).tolist()
    data, _ = dw_model(g, np.int8, c["w"], c["bias"], np.int8, x_quant=c["x_quant"], w_quant=c["w_quant"],
                       b_quant=c["b_quant"], out_quant=c["out_quant"], version=3)
    check(data, [c["x"]])
