"""Several processes starting on one cold compile cache (a cluster's workers on one machine, issue 18) do not race:
a kernel another process is compiling is waited for and loaded from the disk cache, never compiled twice.

Two real processes load the same model, meet at a barrier and allocate at the same moment; each reports
lite_numba.jit.compiler.STATS. Together they must compile every missing kernel exactly once (without the lock each
compiles all of them: LITE_NUMBA_COMPILE_LOCK=0 shows it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from small_models import kernel_chain_model

# Load the model, say "ready", wait for "go" on stdin, then allocate and invoke; report STATS and the output.
WORKER = r"""
import json, sys
import numpy as np
from lite_numba import Interpreter
from lite_numba.jit.compiler import STATS

it = Interpreter(model_path=sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
it.allocate_tensors()
it.set_tensor(it.get_input_details()[0]["index"], np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8))
it.invoke()
y = it.get_tensor(it.get_output_details()[0]["index"])
print(json.dumps({"stats": STATS, "y": y.tolist()}), flush=True)
"""


def _race(tmp_path, **extra) -> list[dict]:
    model = tmp_path / "m.tflite"
    model.write_bytes(kernel_chain_model(with_tanh=True))
    env = dict(os.environ, LITE_NUMBA_CACHE_DIR=str(tmp_path / "ln"), NUMBA_CACHE_DIR=str(tmp_path / "nb"),
               LITE_NUMBA_PROGRESS="0", LITE_NUMBA_COMPILE_WORKERS="1", **extra)
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(model)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    try:
        for p in procs:
            line = p.stdout.readline()
            assert line.strip() == "ready", p.stderr.read()[-3000:]
        for p in procs:  # the barrier: both allocate (cold) at the same moment
            p.stdin.write("go\n")
            p.stdin.flush()
        out = []
        for p in procs:
            stdout, stderr = p.communicate(timeout=900)
            assert p.returncode == 0, stderr[-3000:]
            out.append(json.loads(stdout.strip().splitlines()[-1]))
        return out
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_two_cold_processes_compile_each_kernel_once(tmp_path):
    a, b = _race(tmp_path)
    assert a["y"] == b["y"]
    needed = a["stats"]["compiled"] + a["stats"]["loaded"]  # every kernel (and the runner) of the model
    assert needed == b["stats"]["compiled"] + b["stats"]["loaded"] >= 4, (a, b)
    # each missing item compiled by exactly one of the two; the other waited for it and loaded it
    assert a["stats"]["compiled"] + b["stats"]["compiled"] == needed, (a["stats"], b["stats"])
    assert a["stats"]["waited"] + b["stats"]["waited"] >= 1, "the processes did not overlap: nothing was tested"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX locks")
def test_without_the_lock_both_compile(tmp_path):
    """The control: with the lock off the same race compiles kernels twice (so the test above can fail)."""
    a, b = _race(tmp_path, LITE_NUMBA_COMPILE_LOCK="0")
    needed = a["stats"]["compiled"] + a["stats"]["loaded"]
    assert a["stats"]["waited"] == b["stats"]["waited"] == 0
    assert a["stats"]["compiled"] + b["stats"]["compiled"] > needed, (a["stats"], b["stats"])
