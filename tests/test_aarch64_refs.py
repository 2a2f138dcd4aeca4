"""scripts/aarch64_check.py on the x86 host: its recorded references (the official runtime's outputs of the subset)
are written, and lite-numba on this machine passes its own check against them. The emulated aarch64 run itself is
too slow for the suite (docs/architecture.md, "Fast kernels"); this keeps the script and its subset working."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from lite_numba.testing import require_official

require_official()

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "aarch64_check.py"


def _script():
    spec = importlib.util.spec_from_file_location("aarch64_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_record_and_check_on_the_host(tmp_path):
    mod = _script()
    refs = tmp_path / "refs.npz"
    mod.record(refs)
    z = np.load(refs)
    names = {k.split("/")[0] for k in z.files}
    for family in ("conv_", "dw_", "fc_", "fc_hybrid", "fc_int4", "conv_hybrid", "bmm_", "add_", "mul_",
                   "model_small_cnn"):
        assert any(n.startswith(family) for n in names), f"no {family} case in {sorted(names)}"
    assert mod.check(refs) == 0
