"""Throughput of the main SIMD kernels on every kernel path the CPU has, for docs/architecture.md's per-ISA table.

The drivers are called directly (the arguments the runner passes) on MobileNet-sized shapes: float GEMM (the
direct-convolution / FULLY_CONNECTED driver with one reduction segment) and int8 GEMM (pointwise convolution) per
path. Figures are GFLOP/s or GOP/s (2 operations per multiply-add), median and best of 30 samples; a shared machine
makes the median the honest one. Compare them with the path's roofline per core: float 2 x lanes x (multiply and add
pipes) per cycle (AVX-512 on Zen 4/5: 2 x 16 x 2; AVX2: 2 x 8 x 2), int8 per `vpdpbusd` 8 x lanes per cycle and
pipe, per `vpmaddwd` 4 x lanes."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import ROWS
from lite_numba.kernels.base import isa
from lite_numba.kernels.linear import simd_f32, simd_f32_narrow, simd_int8, simd_int8_narrow


def _rate(fn, args, ops: float) -> tuple[float, float]:
    fn(*args)
    samples = []
    for _ in range(30):
        t0 = time.perf_counter()
        for _ in range(5):
            fn(*args)
        samples.append((time.perf_counter() - t0) / 5)
    return ops / float(np.median(samples)) / 1e9, ops / min(samples) / 1e9


F32_PATHS = {"avx512": simd_f32.gemm_packed, "avx2": simd_f32_narrow.gemm_packed}


@pytest.mark.parametrize("shape", [(192, 512, 192), (2304, 8, 48)], ids=["large", "pointwise_k8"])
@pytest.mark.parametrize("path", list(F32_PATHS))
def test_f32_gemm(benchmark, path, shape):
    """A large GEMM, and MobileNetV2 0.35's pointwise convolution of 8 input channels at 48x48 (K = 8: the
    per-tile set-up weighs as much as the products)."""
    if not isa.supports(path):
        pytest.skip(f"the CPU lacks {path}")
    M, K, N = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal(M * K).astype(np.float32)
    w = rng.standard_normal((N, K)).astype(np.float32)
    args = (a, np.arange(M, dtype=np.int64) * K, np.zeros(1, np.int64), K, simd_f32.pack_weights(w.T),
            simd_f32.pad_bias(None, N), np.empty(M * N, np.float32), N, np.array([-np.inf, np.inf], np.float32))
    med, best = _rate(F32_PATHS[path], args, 2.0 * M * N * K)
    ROWS.append({"case": f"f32 GEMM {M}x{K}x{N} GFLOP/s", "path": path, "ours": med, "unit": "rate",
                 "note": f"best {best:.1f}"})
    benchmark.extra_info.update(path=path, gflops_median=med, gflops_best=best)
    benchmark(F32_PATHS[path], *args)


Q8_PATHS = ["avx512vnni", "avxvnni", "avx2", "portable"]


@pytest.mark.parametrize("path", Q8_PATHS)
def test_int8_gemm(benchmark, path):
    if not isa.supports(path):
        pytest.skip(f"the CPU lacks {path}")
    h = w = 28
    ci = co = 128
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (1, h, w, ci)).astype(np.int8)
    wt = rng.integers(-127, 128, (co, ci)).astype(np.int8)
    Kp, Np = simd_int8.padded_sizes(ci, co)
    geo = np.array([1, 1, 1, 1, 0, 0, 1, 1, h, w, 1, 0], np.int64)
    offs = simd_int8.channel_offsets(wt, 128, 0, Np)
    prm = np.zeros((Np // 16, simd_int8.PRM_BLOCK), np.int32)
    if path == "avx512vnni":
        fn, wp, mr = simd_int8.qconv_vnni, simd_int8.pack_weights_vnni(wt), simd_int8.MR
    elif path == "portable":
        fn, wp, mr = simd_int8.qconv_portable, simd_int8.pack_weights_portable(wt), simd_int8.PR
        prm = np.zeros((simd_int8.block_rows(Kp, h * w, mr), Np), np.int32)
    else:
        vnni = int(path == "avxvnni")
        fn, mr = simd_int8_narrow.qconv_narrow, simd_int8_narrow.MR
        wp = simd_int8.pack_weights_vnni(wt) if vnni else simd_int8_narrow.pack_weights_pairs(wt)
        geo = np.append(geo, vnni)
    MB = simd_int8.block_rows(Kp, h * w, mr)
    args = (x, wp, offs, np.zeros(co, np.int32), np.zeros((1, h, w, co), np.int8), geo, 128, 0,
            np.full(co, 1 << 30, np.int32), np.full(co, -8, np.int32), 0, -128, 127, np.zeros((MB, Kp), np.uint8), prm)
    med, best = _rate(fn, args, 2.0 * h * w * ci * co)
    ROWS.append({"case": f"int8 GEMM {h * w}x{ci}x{co} GOP/s", "path": path, "ours": med, "unit": "rate",
                 "note": f"best {best:.0f}"})
    benchmark.extra_info.update(path=path, gops_median=med, gops_best=best)
    benchmark(fn, *args)


HYBRID_PATHS = {"avx512vnni": 2, "avxvnni": 1, "avx2": 0}
HYBRID_SCHEMES = {2: 2, 1: 1, 0: 3}  # hybrid_gemm's drivers: the vpmaddwd tiles read 16-bit activations (scheme 3)


@pytest.mark.parametrize("shape", [(784, 128, 128), (17, 64, 192), (1, 2048, 2048)],
                         ids=["pointwise_28x28", "vit_fc_17_rows", "gemv_2048"])
@pytest.mark.parametrize("path", list(HYBRID_PATHS))
def test_hybrid_gemm(benchmark, path, shape):
    """The hybrid (dynamic-range) FULLY_CONNECTED driver (hybrid_gemm: the rows quantized at run time, the int8
    tiles, the float32 epilogue) on the tiles of each path, GOP/s counting the multiply-adds only."""
    from lite_numba.kernels.linear import hybrid_gemm, hybrid_schedule, hybrid_tiles

    if not isa.supports(path):
        pytest.skip(f"the CPU lacks {path}")
    M, K, N = shape
    scheme = HYBRID_SCHEMES[HYBRID_PATHS[path]]
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (N, K)).astype(np.int8)
    Kp, Np = simd_int8.padded_sizes(K, N)
    mr = hybrid_tiles.WIDE_MR if scheme == 2 else hybrid_tiles.NARROW_MR
    MB = simd_int8.block_rows(Kp, M, mr)
    hpc = hybrid_tiles.hybrid_params(w.astype(np.int64).sum(axis=1), rng.uniform(0.002, 0.02, N), None, Np)
    wp = simd_int8_narrow.pack_weights_pairs(w) if scheme == 3 else simd_int8.pack_weights_vnni(w)
    args = (rng.standard_normal(M * K).astype(np.float32), wp, hpc, rng.standard_normal(N).astype(np.float32),
            np.zeros(M * N, np.float32), np.array([M, K, N, 1, scheme, 0, 0, M, 0, N], np.int64),
            np.array([-np.inf, np.inf, 0], np.float32), np.zeros((MB, Kp), np.uint16 if scheme == 3 else np.uint8),
            np.zeros(MB, np.int32),
            np.zeros(MB, np.float32), np.zeros_like(hpc), np.zeros(K, np.int8))
    fn = hybrid_gemm.FC_DRIVERS[scheme]
    assert hybrid_schedule.engine() is not None
    med, best = _rate(fn, args, 2.0 * M * K * N)
    ROWS.append({"case": f"hybrid int8 GEMM {M}x{K}x{N} GOP/s", "path": path, "ours": med, "unit": "rate",
                 "note": f"best {best:.0f}"})
    benchmark.extra_info.update(path=path, gops_median=med, gops_best=best)
    benchmark(fn, *args)


@pytest.mark.parametrize("shape", [(64, 512, 512), (16, 64, 128), (1, 2048, 2048)],
                         ids=["prefill_64_rows", "decoder_16_rows", "gemv_2048"])
@pytest.mark.parametrize("path", list(HYBRID_PATHS))
def test_int4_gemm(benchmark, path, shape):
    """The INT4 blockwise FULLY_CONNECTED driver (fc_int4: nibbles unpacked in the tiles, block 32) on each path,
    GOP/s counting the multiply-adds only."""
    from lite_numba.kernels.linear import fc_int4

    if not isa.supports(path):
        pytest.skip(f"the CPU lacks {path}")
    M, K, N = shape
    kind, bs = HYBRID_PATHS[path], 32
    rng = np.random.default_rng(0)
    packed = rng.integers(0, 256, N * K // 2).astype(np.uint8)
    wq, st, kf = fc_int4.prepare_int4(packed, rng.uniform(0.01, 0.1, N * K // bs).astype(np.float32), N, K, bs)
    mr = fc_int4.WIDE_MR if kind == 2 else fc_int4.NARROW_MR
    MB = min(max(mr, (32 * 1024 // K) // mr * mr), -(-M // mr) * mr)
    args = (rng.standard_normal(M * K).astype(np.float32), wq, st, kf, np.zeros(N, np.float32),
            np.zeros(M * N, np.float32), np.array([M, K, N, bs, 0, 0, M, 0, N], np.int64), np.zeros((MB, K), np.int8),
            np.zeros(MB * (K // bs), np.int32), np.zeros(MB, np.float32), np.zeros(MB, np.float32),
            np.zeros(kf.size, np.float32), np.zeros(K, np.int8))
    fn = fc_int4.DRIVERS[kind]
    med, best = _rate(fn, args, 2.0 * M * K * N)
    ROWS.append({"case": f"int4 blockwise GEMM {M}x{K}x{N} GOP/s", "path": path, "ours": med, "unit": "rate",
                 "note": f"best {best:.0f}"})
    benchmark.extra_info.update(path=path, gops_median=med, gops_best=best)
    benchmark(fn, *args)


class _Recording:
    """A stand-in for the prepare context: the scheduled driver and its arguments, as the runner would pass them."""

    num_threads = 1

    def __init__(self):
        self.calls = []

    def const(self, a):
        return np.asarray(a)

    def temp(self, shape, dtype):
        return np.zeros(shape, dtype)

    def call(self, fn, *args):
        self.calls.append((fn, args))


# ResNet-18's 3x3 layers as the implicit GEMMs they are (rows = output pixels, depth = 9 x input channels) and a
# transformer decoder's prefill of 128 tokens (width 512, feed-forward 2048)
AMX_SHAPES = {"resnet18_conv2": (3136, 576, 64), "resnet18_conv3": (784, 1152, 128),
              "resnet18_conv4": (196, 2304, 256), "resnet18_conv5": (49, 4608, 512), "decoder_qkv": (128, 512, 512),
              "decoder_ffn_up": (128, 512, 2048), "decoder_ffn_down": (128, 2048, 512)}


@pytest.mark.parametrize("name", list(AMX_SHAPES))
def test_int8_gemm_amx_vs_vnni(benchmark, name, monkeypatch):
    """issue 35: the int8 GEMM (a pointwise convolution: rows read in place) on the AMX tiles and on the VNNI tiles,
    each driver as qgemm.schedule_qgemm schedules it at its level (constant bias: output-stage parameters computed at
    prepare), interleaved in one run; GOP/s from the thread's CPU time (a shared machine: wall time counts other
    processes' slices), median and best of 15 rounds. Both paths' outputs are checked equal."""
    from lite_numba.kernels.linear import qgemm

    if not isa.supports("amx"):
        pytest.skip(f"ISA level amx not run: {isa.unavailable('amx')}")
    M, K, N = AMX_SHAPES[name]
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (1, M, 1, K)).astype(np.int8)
    w = rng.integers(-127, 128, (N, K)).astype(np.int8)
    bias = rng.integers(-5000, 5000, N).astype(np.int32)
    mult = rng.integers(1 << 30, (1 << 31) - 1, N).astype(np.int32)
    shift = np.full(N, -12, np.int32)
    drivers = {}
    for level in ("amx", "avx512vnni"):
        monkeypatch.setenv("LITE_NUMBA_ISA", level)
        ctx = _Recording()
        qgemm.schedule_qgemm(ctx, x, w, 3, bias, np.zeros((1, M, 1, N), np.int8), [1, 1, 1, 1, 0, 0, 1, 1], mult,
                             shift, -5, -128, 127)
        (fn, args), = ctx.calls
        drivers[level] = (fn, args)
    assert drivers["amx"][0].__name__ == "qconv_amx" and drivers["avx512vnni"][0].__name__ == "qconv_vnni"
    samples = {level: [] for level in drivers}
    for fn, args in drivers.values():
        fn(*args)
    np.testing.assert_array_equal(drivers["amx"][1][4], drivers["avx512vnni"][1][4])
    t0 = time.thread_time()
    drivers["amx"][0](*drivers["amx"][1])
    inner = max(1, int(2e-3 / max(time.thread_time() - t0, 1e-6)))
    for _ in range(15):
        for level, (fn, args) in drivers.items():
            t0 = time.thread_time()
            for _ in range(inner):
                fn(*args)
            samples[level].append((time.thread_time() - t0) / inner)
    ops = 2.0 * M * K * N
    rates = {level: (ops / float(np.median(s)) / 1e9, ops / min(s) / 1e9) for level, s in samples.items()}
    for level, (med, best) in rates.items():
        ROWS.append({"case": f"int8 GEMM {name} {M}x{K}x{N} GOP/s", "path": level, "ours": med, "unit": "rate",
                     "note": f"best {best:.0f}" + (f"; {med / rates['avx512vnni'][0]:.2f}x VNNI" if level == "amx"
                                                     else "")})
    benchmark.extra_info.update(amx_gops=rates["amx"][0], vnni_gops=rates["avx512vnni"][0])
    benchmark(drivers["amx"][0], *drivers["amx"][1])
