"""Hybrid (dynamic-range) FULLY_CONNECTED over the weights where the model file holds them (issue 39): the
matrix-vector tiles of kernels/linear/hybrid_gemv.py on every SIMD level and the transposed AMX product of
amx_hybrid.hybrid_fc_amx_t read the [N, K] int8 weights in place, no packed copy; bit for bit the official builtin
kernels' outputs (the oracle), with weights large enough to be read in the mapped file, small ones copied, depths
with a tail past the last 64 bytes, channel counts with a tail past the last 16, all-zero and NaN rows."""

from __future__ import annotations

import numpy as np
import pytest
from linear_models import fc_model
from lite_numba.kernels.base import isa

from lite_numba import Interpreter
from lite_numba.testing import run_official

needs_amx = pytest.mark.skipif(not isa.supports("amx"), reason=f"ISA level amx not run: {isa.unavailable('amx')}")


def _case(batch, k, units, asym, act, bias, seed):
    rng = np.random.default_rng(seed)
    w = rng.integers(-127, 128, (units, k)).astype(np.int8)
    wq = {"scales": rng.uniform(0.002, 0.02, units).astype(np.float32), "zero_points": [0] * units,
          "quantized_dimension": 0}
    b = rng.standard_normal(units).astype(np.float32) if bias else None
    data = fc_model([batch, k], w, w_quant=wq, bias=b, act=act, version=12,
                    extra_options={"asymmetric_quantize_inputs": asym})
    x = (rng.standard_normal((batch, k)) + rng.uniform(-1, 1)).astype(np.float32)
    if batch > 2:
        x[1] = 0
        x[2, k // 3] = np.nan
    return data, x, w


def _run(tmp_path, data, x, threads=1):
    path = tmp_path / "fc.tflite"
    path.write_bytes(data)
    it = Interpreter(model_path=str(path), num_threads=threads)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]), it


def _kernels(it) -> set[str]:
    return {getattr(c.fn, "__name__", "") for p in it.runtime.main.prepared if p is not None for c in p.calls}


def _in_place(it, w) -> bool:
    segs = [s for kind, s in it.runtime.graph(0).steps if kind == "segment"]
    return any(a.nbytes == w.nbytes for s in segs for a in s.keep) and sum(s.aux.nbytes for s in segs) < w.nbytes


def _exact(ours, ref):
    bad = ~((ours == ref) | (np.isnan(ours) & np.isnan(ref)))
    assert not bad.any(), f"{int(bad.sum())} of {ref.size} differ, e.g. {ours[bad][:4]} vs {ref[bad][:4]}"


GEMV_CASES = [  # batch, k, units, asymmetric, act, bias: weights >= 64 KiB are read in the mapped file; from 2 rows
    # only weights above hybrid_schedule.PACKED_MAX_BYTES run in place
    (1, 640, 130, False, "NONE", False),
    (1, 1000, 70, True, "RELU", True),  # depth tail of 40 bytes
    (4, 1000, 200, True, "RELU_N1_TO_1", False),
    (1, 37, 9, False, "RELU6", True),  # small: copied, every row a tail
]


@pytest.mark.parametrize("case", GEMV_CASES, ids=lambda c: "x".join(map(str, c[:3])))
def test_gemv_in_place(case, isa_level, tmp_path):
    data, x, w = _case(*case, seed=sum(case[:3]))
    ours, it = _run(tmp_path, data, x)
    _exact(ours, run_official(data, [x])[0])
    if isa_level != "portable":
        assert _kernels(it) & {"hybrid_gemv_wide", "hybrid_gemv_vnni256", "hybrid_gemv_pairs"}
        assert _in_place(it, w) == (w.nbytes >= 1 << 16)


@pytest.mark.parametrize("case", [(17, 64, 192, True, "NONE", True), (4, 192, 47, False, "RELU", False),
                                  (2, 640, 200, True, "RELU6", True)], ids=lambda c: "x".join(map(str, c[:3])))
def test_small_layers_packed(case, isa_level, tmp_path):
    """From 2 rows, weights of at most PACKED_MAX_BYTES run on hybrid_gemm's packed tiles (faster in cache than the
    in-place ones: vit_dynamic's 17 x 64 -> 192): the official bytes too."""
    data, x, w = _case(*case, seed=sum(case[:3]))
    ours, it = _run(tmp_path, data, x)
    _exact(ours, run_official(data, [x])[0])
    if isa_level != "portable":
        assert _kernels(it) & {"hybrid_fc_wide", "hybrid_fc_vnni256", "hybrid_fc_pairs", "hybrid_fc_pairs16"}


def test_gemv_two_threads(tmp_path):
    """Two threads split the channels: the bytes of one thread and the official ones."""
    data, x, w = _case(1, 768, 1000, True, "NONE", True, seed=3)
    one, _ = _run(tmp_path, data, x)
    two, it = _run(tmp_path, data, x, threads=2)
    np.testing.assert_array_equal(one, two)
    _exact(two, run_official(data, [x])[0])


@needs_amx
@pytest.mark.parametrize("case", [(40, 256, 130, True, "NONE", True), (33, 64, 160, False, "RELU", False),
                                  (100, 192, 47, True, "RELU6", True), (600, 2048, 20, False, "NONE", False),
                                  (64, 1024, 300, True, "NONE", False)],
                         ids=lambda c: "x".join(map(str, c[:3])))
def test_amx_weights_in_place(case, tmp_path, monkeypatch):
    """Many rows on the AMX tiles with the weights as the A operand read in place (C^T = W X^T; 600 rows of depth
    2,048: two blocks of packed input rows; 47 and 130 channels: the last rows of W from a padded copy)."""
    monkeypatch.setenv("LITE_NUMBA_ISA", "amx")
    data, x, w = _case(*case, seed=sum(case[:3]))
    ours, it = _run(tmp_path, data, x)
    assert "hybrid_fc_amx_t" in _kernels(it)
    assert _in_place(it, w) == (w.nbytes >= 1 << 16)
    _exact(ours, run_official(data, [x])[0])
