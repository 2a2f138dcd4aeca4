"""bench/official_isa.py: the official runtime's XNNPACK restricted to AVX2 on an AVX-512 machine (issue 14's
stand-in for an AVX2-only CPU) really runs without AVX-512 and still computes the same model. Run in a fresh process:
the restriction must come before the official runtime's first interpreter."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

from lite_numba.testing import require_official

require_official()

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = """
import sys
import numpy as np
sys.path.insert(0, {bench!r})
import official_isa
from ai_edge_litert.interpreter import Interpreter
print(official_isa.restrict("avx2"))
it = Interpreter(model_path={model!r}, num_threads=1)
it.allocate_tensors()
print(official_isa.verify())
d = it.get_input_details()[0]
x = np.random.default_rng(0).standard_normal(d["shape"]).astype(np.float32)
it.set_tensor(d["index"], x)
it.invoke()
np.save({out!r}, it.get_tensor(it.get_output_details()[0]["index"]))
"""


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="cpuinfo's x86 table: x86 only")
def test_xnnpack_restricted_to_avx2_runs_without_avx512_and_agrees(tmp_path):
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    model = ROOT / "tests" / "data" / "models" / "small_cnn_f32.tflite"
    out = tmp_path / "restricted.npy"
    r = subprocess.run([sys.executable, "-c", SCRIPT.format(bench=str(ROOT / "bench"), model=str(model),
                                                            out=str(out))], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "no AVX-512" in r.stdout, r.stdout  # verify() raised otherwise: XNNPACK arch_flags without AVX-512
    it = Interpreter(model_path=str(model), num_threads=1)  # this process: XNNPACK with the CPU's own kernels
    it.allocate_tensors()
    d = it.get_input_details()[0]
    it.set_tensor(d["index"], np.random.default_rng(0).standard_normal(d["shape"]).astype(np.float32))
    it.invoke()
    ref = it.get_tensor(it.get_output_details()[0]["index"])
    np.testing.assert_allclose(np.load(out), ref, rtol=1e-4, atol=1e-5)
