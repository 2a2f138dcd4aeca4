"""The AMX int8 tile engine (kernels/linear/simd_amx.py, isa level "amx") against the VNNI kernels on the same inputs,
and the level's choice: the tile state refused by the kernel (simulated) runs on VNNI with the reason shown.

The official-runtime checks of every int8 model run the amx level through the isa_level fixture (test_simd_int8,
test_threads) and, on an AMX machine, as the default level (test_models, test_real_models, test_litert_torch); here
the AMX path is compared byte for byte with the avx512vnni path on shapes that reach each of the engine's modes
(in-place rows, windows read in place across output rows, im2col blocks), its tails (rows past a 16- or 32-row
block, depths past a 64-byte step, channels past a 16-channel tile) and its groups. On a CPU without AMX (or
without the grant) the comparisons skip by name, as the other levels do."""

from __future__ import annotations

import json

import numpy as np
import pytest
from linear_models import conv_case_int8, fc_quant_case, geometry
from lite_numba.kernels.base import isa
from lite_numba.kernels.linear import qgemm, simd_amx, simd_int8

from lite_numba import Interpreter
from lite_numba.testing import assert_close, run_interpreter, run_official
from lite_numba.tools.inspect_model import format_inspection, inspect_model

needs_amx = pytest.mark.skipif(not isa.supports("amx"), reason=f"ISA level amx not run: {isa.unavailable('amx')}")


def _kernels(it: Interpreter) -> set[str]:
    return {getattr(c.fn, "__name__", "") for p in it.runtime.main.prepared if p is not None for c in p.calls}


def _at(level: str, monkeypatch, data: bytes, inputs, threads: int = 1):
    monkeypatch.setenv("LITE_NUMBA_ISA", level)
    return run_interpreter(data, inputs, num_threads=threads)


CASES = {  # name: (geometry, the mode prepare picks)
    # mode 0 (rows in place): rows past the last whole 32-row block copied; depth < 64, = 64, > 64 (and >= 40)
    "pointwise_k48_rows291": (geometry(h=97, w=3, ci=48, co=24, k=(1, 1)), 0),
    "pointwise_k64_co40": (geometry(n=2, h=7, w=9, ci=64, co=40, k=(1, 1), seed=1), 0),
    "pointwise_k200_co70": (geometry(h=9, w=11, ci=200, co=70, k=(1, 1), seed=2), 0),
    # mode 1 (windows in place): stride 1 blocks across output rows, stride 2 within one row (or two rows of <= 16
    # pixels), dilation along y
    "3x3_c64_s1": (geometry(h=13, w=10, ci=64, co=48, seed=3), 1),
    "3x3_c40_s2": (geometry(n=2, h=15, w=14, ci=40, co=33, s=(2, 2), seed=4), 1),
    "3x3_c40_s2_odd_rows": (geometry(h=13, w=30, ci=40, co=33, s=(2, 2), seed=13), 1),  # two output rows a block
    "3x3_c24_s2_wide": (geometry(h=9, w=70, ci=24, co=20, s=(2, 2), seed=14), 1),  # 35 pixels: one row a block
    "3x3_c48_dilated_y": (geometry(h=12, w=9, ci=48, co=16, d=(2, 1), padding="VALID", seed=5), 1),
    # mode 2 (im2col): few input channels, dilation along x (prepare gives these layers to VNNI: forced here)
    "3x3_c3_first_layer": (geometry(h=20, w=17, ci=3, co=32, s=(2, 2), act="RELU6", seed=6), 2),
    "3x3_dilated_x": (geometry(h=9, w=12, ci=8, co=20, d=(1, 2), seed=7), 2),
    # 1x1 with stride 2: im2col blocks (VNNI packs them too)
    "1x1_stride2": (geometry(h=32, w=40, ci=48, co=36, k=(1, 1), s=(2, 2), seed=8), 2),
}


def _mode(it: Interpreter) -> int:
    for p in it.runtime.main.prepared:
        for c in p.calls if p is not None else ():
            if c.fn is simd_amx.qconv_amx:
                return int(np.asarray(getattr(c.args[5], "array", c.args[5]))[13])
    return -1


@needs_amx
@pytest.mark.parametrize("name", list(CASES))
def test_conv_amx_equals_vnni(name, monkeypatch):
    g, mode = CASES[name]
    if mode == 2 and g["kh"] * g["kw"] > 1:
        monkeypatch.setattr(qgemm, "amx_pays", lambda *args: True)
    data, inputs = conv_case_int8(g, per_channel=True)
    (vnni,), it_v = _at("avx512vnni", monkeypatch, data, inputs)
    (tiles,), it_a = _at("amx", monkeypatch, data, inputs)
    assert "qconv_amx" in _kernels(it_a) and "qconv_amx" not in _kernels(it_v)
    assert _mode(it_a) == mode
    np.testing.assert_array_equal(tiles, vnni)


@needs_amx
@pytest.mark.parametrize("batch, k, units", [(256, 64, 32), (65, 100, 48), (64, 1280, 40), (130, 41, 70)])
def test_fully_connected_amx_equals_vnni_and_official(batch, k, units, monkeypatch):
    rng = np.random.default_rng(batch + k + units)
    data, x = fc_quant_case(rng, np.int8, np.int8, batch, k, units, True, np.int32, "RELU")
    (vnni,), _ = _at("avx512vnni", monkeypatch, data, [x])
    (tiles,), it = _at("amx", monkeypatch, data, [x])
    assert "qconv_amx" in _kernels(it)
    np.testing.assert_array_equal(tiles, vnni)
    assert_close(tiles, run_official(data, [x])[0], what="amx FULLY_CONNECTED")


@needs_amx
def test_two_threads_byte_identical(monkeypatch):
    """Each worker configures its own tiles; bands of output rows give the bytes of one thread."""
    data, inputs = conv_case_int8(geometry(h=40, w=40, ci=64, co=64, seed=9), per_channel=True)
    (one,), it1 = _at("amx", monkeypatch, data, inputs, threads=1)
    (two,), it2 = _at("amx", monkeypatch, data, inputs, threads=2)
    assert "qconv_amx" in _kernels(it1) and "qconv_par" in _kernels(it2)
    np.testing.assert_array_equal(one, two)


@needs_amx
def test_groups_of_rows(monkeypatch):
    """Several groups of rows (GROUP_BYTES made small): every mode still equals VNNI."""
    monkeypatch.setattr(simd_amx, "GROUP_BYTES", 4096)
    monkeypatch.setattr(qgemm, "amx_pays", lambda *args: True)
    for g in (geometry(h=30, w=20, ci=64, co=40, k=(1, 1), seed=10), geometry(h=21, w=9, ci=64, co=24, seed=11),
              geometry(h=30, w=10, ci=3, co=20, seed=12)):
        data, inputs = conv_case_int8(g, per_channel=False)
        (vnni,), _ = _at("avx512vnni", monkeypatch, data, inputs)
        (tiles,), _ = _at("amx", monkeypatch, data, inputs)
        np.testing.assert_array_equal(tiles, vnni)


@needs_amx
def test_driver_with_bias_at_run_time():
    """The output-stage parameters filled in the kernel (a bias known only at run time), extreme multipliers and
    shifts, zero points and clamps: qconv_amx's bytes are qconv_vnni's."""
    rng = np.random.default_rng(12)
    M, K, N = 77, 150, 50
    x = rng.integers(-128, 128, (1, M, 1, K)).astype(np.int8)
    w = rng.integers(-127, 128, (N, K)).astype(np.int8)
    bias = rng.integers(-(1 << 31), 1 << 31, N, dtype=np.int64).astype(np.int32)
    mult = rng.integers(-(1 << 31), 1 << 31, N, dtype=np.int64).astype(np.int32)
    shift = rng.integers(-31, 32, N).astype(np.int32)
    zp_in, zp_out, lo, hi = -17, 9, -100, 120
    Kp, Np = simd_int8.padded_sizes(K, N)
    geo = [1, 1, 1, 1, 0, 0, 1, 1, M, 1, 1, 0]
    outs = []
    for path in ("vnni", "amx"):
        out = np.zeros((1, M, 1, N), np.int8)
        if path == "vnni":
            simd_int8.qconv_vnni(x, simd_int8.pack_weights_vnni(w), simd_int8.channel_offsets(w, 128, zp_in, Np),
                                 bias, out, np.array(geo, np.int64), 128, zp_in, mult, shift, zp_out, lo, hi,
                                 np.zeros((simd_int8.block_rows(Kp, M, simd_int8.MR), Kp), np.uint8),
                                 np.zeros((Np // 16, simd_int8.PRM_BLOCK), np.int32))
        else:
            kp = -(-K // 64) * 64
            scratch = np.zeros((Np // 16 + simd_amx.EXTRA_ROWS + 4, simd_int8.PRM_BLOCK), np.int32)
            simd_amx.qconv_amx(x, simd_amx.pack_weights_amx(w), simd_int8.channel_offsets(w, 0, zp_in, Np), bias,
                               out, np.array(geo + [-1, simd_amx.MODE_GEMM, 64], np.int64), 0, zp_in, mult, shift,
                               zp_out, lo, hi, np.zeros((96, kp), np.uint8), scratch)
        outs.append(out)
    np.testing.assert_array_equal(outs[1], outs[0])


def test_weight_packing_layout():
    """pack_weights_amx holds every filter value once, where a B tile reads it: panel j0 at j0 * runs * Lp, step s,
    tile t (16 channels) 1 KiB at (s * tiles + t) * 1024, byte (g * 16 + n) * 4 + i."""
    rng = np.random.default_rng(0)
    w = rng.integers(-128, 128, (37, 2 * 70)).astype(np.int8)  # 2 runs of 70 -> Lp 128, 4 steps
    wp = simd_amx.pack_weights_amx(w, runs=2)
    assert wp.size == 48 * 2 * 128
    for n, run, k in [(0, 0, 0), (5, 0, 69), (31, 1, 3), (32, 1, 64), (36, 1, 69), (20, 0, 65)]:
        j0 = n // 32 * 32
        tiles = min(32, 48 - j0) // 16
        s = run * 2 + k // 64
        t, nn = (n - j0) // 16, (n - j0) % 16
        g, i = (k % 64) // 4, k % 4
        assert wp[j0 * 2 * 128 + (s * tiles + t) * 1024 + (g * 16 + nn) * 4 + i] == w[n, run * 70 + k]
    assert np.count_nonzero(wp) == np.count_nonzero(w)


# --- the level's choice ---------------------------------------------------------------------------------------------


@pytest.fixture
def refused(monkeypatch):
    """Linux refusing the tile state, simulated: the grant's answer replaced, the cached answers cleared."""
    reason = "Linux refused the AMX tile state (simulated by the test)"
    monkeypatch.setattr(isa, "request_tile_state", lambda: reason)
    isa.refusal.cache_clear()
    isa._level_for.cache_clear()
    monkeypatch.delenv("LITE_NUMBA_ISA", raising=False)
    yield reason
    isa.refusal.cache_clear()
    isa._level_for.cache_clear()


@pytest.mark.skipif(not isa.supports("avx512vnni"), reason=f"needs avx512vnni: {isa.unavailable('avx512vnni')}")
def test_refused_tile_state_runs_on_vnni_with_the_reason(refused, monkeypatch):
    assert not isa.supports("amx") and isa.isa_level() == "avx512vnni"
    assert isa.unavailable("amx") in (refused, f"this CPU lacks {', '.join(isa.missing_features('amx'))}")
    data, inputs = conv_case_int8(CASES["3x3_c64_s1"][0], per_channel=True)
    (ours,), it = run_interpreter(data, inputs)
    assert "qconv_vnni" in _kernels(it) and "qconv_amx" not in _kernels(it)
    assert_close(ours, run_official(data, inputs)[0], what="VNNI after the refusal")
    monkeypatch.setenv("LITE_NUMBA_ISA", "amx")
    with pytest.raises(ValueError, match="LITE_NUMBA_ISA='amx': "):
        isa.isa_level()
    monkeypatch.delenv("LITE_NUMBA_ISA")
    if not isa.missing_features("amx"):  # an AMX CPU: the reason is the refusal, and the tools say it
        assert f"amx not used: {refused}" in isa.describe()
        info = inspect_model(data)
        assert info["kernel_path"] == isa.describe()
        assert refused in format_inspection(info) and refused in json.dumps(info)


def test_fake_cpus_with_amx():
    spr = {f: True for f in isa.NEEDS["amx"]}
    assert isa.supported_levels(spr)[-2:] == ("avx512vnni", "amx") and isa.best_level(spr) == "amx"
    assert isa.missing_features("amx", {**spr, "amx-int8": False}) == ("amx-int8",)


_CACHE_PROBE = """
import json, sys
import numpy as np
sys.path.insert(0, {tests!r})
from linear_models import conv_case_int8, geometry
from lite_numba.kernels.base import isa
from lite_numba.testing import run_interpreter
data, inputs = conv_case_int8(geometry(h=13, w=10, ci=64, co=48, seed=3), per_channel=True)
(out,), it = run_interpreter(data, inputs)
names = sorted({{c.fn.__name__ for p in it.runtime.main.prepared if p is not None for c in p.calls}})
print(json.dumps({{"level": isa.isa_level(), "kernels": names, "out": out.reshape(-1).tolist()}}))
"""


@needs_amx
def test_a_cache_made_with_amx_is_not_run_without_it(tmp_path):
    """Two processes share one cache (Numba's and the runners'): the first on this AMX CPU compiles and caches
    qconv_amx; the second compiles for the same CPU without its AMX features (NUMBA_CPU_FEATURES, as a CPU without
    AMX: isa.cpu_features() reads the same list) and runs VNNI, from code of its own, with the same bytes. Kernels
    are chosen at prepare in each process (runners call them by the address prepare gives, so a cached runner names
    no kernel), and Numba keys each cached function on the CPU name and features it was compiled for."""
    import os
    import subprocess
    import sys

    import llvmlite.binding as ll

    env = {**os.environ, "LITE_NUMBA_CACHE_DIR": str(tmp_path / "ln"), "NUMBA_CACHE_DIR": str(tmp_path / "nb")}
    env.pop("LITE_NUMBA_ISA", None)
    code = _CACHE_PROBE.format(tests=os.path.dirname(os.path.abspath(__file__)))

    def probe(extra):
        r = subprocess.run([sys.executable, "-c", code], env={**env, **extra}, capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        return json.loads(r.stdout.strip().splitlines()[-1])

    with_amx = probe({})
    feats = ",".join(("-" if k.startswith("amx") or not v else "+") + k for k, v in ll.get_host_cpu_features().items())
    without = probe({"NUMBA_CPU_FEATURES": feats})
    assert with_amx["level"] == "amx" and "qconv_amx" in with_amx["kernels"]
    assert without["level"] == "avx512vnni" and "qconv_vnni" in without["kernels"]
    assert "qconv_amx" not in without["kernels"] and without["out"] == with_amx["out"]


BMM_CASES = {  # lhs shape, rhs shape, adj_x, adj_y, constant rhs
    "attention_scores": ([4, 64, 40], [4, 40, 72], False, False, False),
    "attention_values_adj_y": ([2, 100, 48], [2, 80, 48], False, True, False),
    "broadcast_rhs_adj_x": ([3, 2, 40, 70], [1, 40, 90], True, False, False),
    "constant_rhs": ([2, 70, 130], [130, 50], False, False, True),
}


@needs_amx
@pytest.mark.parametrize("out", ["int8", "int32"])
@pytest.mark.parametrize("name", list(BMM_CASES))
def test_batch_matmul_int8_on_tiles(name, out, monkeypatch):
    """int8 BATCH_MATMUL's products on the tiles (amx_bmm: a run-time rhs packed per batch, a constant one at
    prepare, zero points as row and column terms), requantized by requantize_fixed: the official bytes, and VNNI's
    level's (the portable integer GEMM)."""
    from linear_models import bmm_model

    ls, rs, adj_x, adj_y, const = BMM_CASES[name]
    rng = np.random.default_rng(len(name))
    x = rng.integers(-128, 128, ls).astype(np.int8)
    y = rng.integers(-128, 128, rs).astype(np.int8)
    i32 = out == "int32"
    data = bmm_model(ls, rs, adj_x=adj_x, adj_y=adj_y, lhs_dtype=np.int8, rhs_dtype=np.int8,
                     lhs_quant=(0.05, 0 if i32 else 3), rhs_quant=(0.04, 0 if i32 else -2),
                     out_dtype=np.int32 if i32 else np.int8, out_quant=None if i32 else (0.9, 1),
                     rhs_const=y if const else None, version=2)
    inputs = [x] if const else [x, y]
    (vnni,), _ = _at("avx512vnni", monkeypatch, data, inputs)
    (tiles,), it = _at("amx", monkeypatch, data, inputs)
    assert "bmm_amx" in _kernels(it)
    np.testing.assert_array_equal(tiles, vnni)
    assert_close(tiles, run_official(data, inputs)[0], what=f"amx BATCH_MATMUL {name}")


def test_requantize_fixed_equals_requantize():
    """amx_bmm.requantize_fixed (branch-free, one multiplier) against fully_connected_quantized.requantize in
    REQUANT_FIXED mode: every shift, multipliers including INT32_MIN, accumulators over the whole int32 range."""
    from lite_numba.kernels.linear.amx_bmm import requantize_fixed
    from lite_numba.kernels.linear.fully_connected_quantized import REQUANT_FIXED, requantize

    rng = np.random.default_rng(7)
    for trial in range(64):
        acc = rng.integers(-2 ** 31, 2 ** 31, 1000, dtype=np.int64).astype(np.int32)
        acc[:6] = [-2 ** 31, 2 ** 31 - 1, 0, -1, 1, -12345]
        if trial % 2:
            acc = (acc // rng.integers(1, 1 << 20)).astype(np.int32)
        q = int(rng.integers(0, 2 ** 31)) if trial % 5 else -2 ** 31
        sh, zp = int(rng.integers(-31, 31)), int(rng.integers(-20, 20))
        want, got = np.zeros(acc.size, np.int8), np.zeros(acc.size, np.int8)
        requantize(acc, np.zeros(4, np.int64), want, 4, REQUANT_FIXED, np.full(4, q, np.int64),
                   np.full(4, sh, np.int64), np.zeros(4), zp, -128, 127)
        requantize_fixed(acc, got, q, sh, zp, -128, 127)
        np.testing.assert_array_equal(got, want, err_msg=f"q={q} shift={sh}")


@needs_amx
@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel_asymmetric", "per_tensor_symmetric"])
@pytest.mark.parametrize("name", ["3x3_c64_s1", "3x3_c40_s2", "pointwise_k200_co70"])
def test_hybrid_conv_on_tiles(name, per_channel, monkeypatch):
    """Dynamic-range CONV_2D (float input, int8 filter) on the tiles (amx_hybrid: each image quantized as the other
    tiles quantize it, its zero point padding the windows): VNNI's hybrid bytes, and the official outputs."""
    from linear_models import conv2d_model, conv_shapes

    g, _ = CASES[name]
    ci, co, _, _ = conv_shapes(g)
    rng = np.random.default_rng(21)
    w_scales = rng.uniform(0.002, 0.02, co if per_channel else 1).astype(np.float32)
    wq = rng.integers(-127, 128, (co, g["kh"], g["kw"], g["cig"])).astype(np.int8)
    data = conv2d_model(g, np.float32, wq, rng.standard_normal(co).astype(np.float32), np.float32,
                        w_quant={"scales": w_scales.tolist(), "zero_points": [0] * w_scales.size,
                                 "quantized_dimension": 0}, version=5 if per_channel else 2)
    x = (rng.standard_normal((g["n"], g["h"], g["w"], ci)) + 0.3).astype(np.float32)
    (vnni,), _ = _at("avx512vnni", monkeypatch, data, [x])
    (tiles,), it = _at("amx", monkeypatch, data, [x])
    assert "hybrid_conv_amx" in _kernels(it)
    np.testing.assert_array_equal(tiles, vnni)
    assert_close(tiles, run_official(data, [x])[0], 1e-5, what=f"amx hybrid CONV_2D {name}")


@needs_amx
@pytest.mark.parametrize("asymmetric", [True, False])
@pytest.mark.parametrize("batch, k, units, act", [(64, 100, 48, "RELU"), (70, 64, 130, "NONE")])
def test_hybrid_fully_connected_on_tiles(batch, k, units, act, asymmetric, monkeypatch):
    """Dynamic-range FULLY_CONNECTED of many rows on the tiles (each row quantized with its own zero point; an
    all-zero row): VNNI's hybrid bytes, and the official outputs."""
    from linear_models import fc_model

    rng = np.random.default_rng(batch + units)
    w = rng.integers(-127, 128, (units, k)).astype(np.int8)
    w_quant = {"scales": rng.uniform(0.002, 0.02, units).astype(np.float32), "zero_points": [0] * units,
               "quantized_dimension": 0}
    data = fc_model([batch, k], w, w_quant=w_quant, bias=rng.standard_normal(units).astype(np.float32), act=act,
                    version=12, extra_options={"asymmetric_quantize_inputs": asymmetric})
    x = (rng.standard_normal((batch, k)) + rng.uniform(-1, 1)).astype(np.float32)
    x[3] = 0
    (vnni,), _ = _at("avx512vnni", monkeypatch, data, [x])
    (tiles,), it = _at("amx", monkeypatch, data, [x])
    assert _kernels(it) & {"hybrid_fc_amx", "hybrid_fc_amx_t"}  # K % 64 == 0: the weights read in place
    np.testing.assert_array_equal(tiles, vnni)
    assert_close(tiles, run_official(data, [x])[0], 1e-5, what="amx hybrid FULLY_CONNECTED")
