"""Resident memory stays flat: a shortened scripts/soak_rss.py (invokes over 10 models, then create / allocate /
destroy cycles) in a fresh process; after the warm-up sample RSS may not grow by more than 5 MiB."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_rss_flat_over_invokes_and_interpreter_cycles(tmp_path):
    out = tmp_path / "soak.json"
    env = dict(os.environ, LITE_NUMBA_PROGRESS="0")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "soak_rss.py"), "--invokes", "20000", "--cycles",
                           "500", "--samples", "8", "--json", str(out)],
                          capture_output=True, text=True, timeout=3600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    print(proc.stdout)
    result = json.loads(out.read_text())
    assert len(result["models"]) == 10
    for phase in ("invokes", "cycles"):
        points = result["curve"][phase]
        assert len(points) >= 8
        assert result["growth_after_warmup_mib"][phase] <= 5.0, (phase, points)
