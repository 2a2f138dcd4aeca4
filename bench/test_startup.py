"""Start-up cost: cold (empty caches: compile everything) and warm (new process, caches present), and memory.

Warm start of mobilenet_v2_100_224_int8 (import, load, allocate_tensors, first invoke in a new process with the
caches present) should stay <= 1.5 s on an idle machine; `phases_s` in the benchmark's extra_info breaks it down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest
from conftest import ROWS, find_model

SCRIPT = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import numpy as np
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
which, path = sys.argv[1], sys.argv[2]
if which == "ours":
    import numba
    t_numba = time.perf_counter()
    from lite_numba import Interpreter
    t_mod = time.perf_counter()
    it = Interpreter(model_path=path)
else:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    t_numba = t_mod = time.perf_counter()
    builtin = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    kw = {"experimental_op_resolver_type": builtin} if which == "builtin" else {}
    it = Interpreter(model_path=path, **kw)
t_import = time.perf_counter() - t0
t1 = time.perf_counter()
it.allocate_tensors()
t2 = time.perf_counter()
for d in it.get_input_details():
    it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
it.invoke()
t_total = time.perf_counter() - t0
rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"import_s": t_import, "first_invoke_s": t_total, "peak_rss_delta_kib": rss1 - rss0,
                  "arena_kib": getattr(it, "arena_size", 0) / 1024,
                  "phases_s": {"numpy+numba import": t_numba - t0, "lite_numba import": t_mod - t_numba,
                               "Interpreter() (load, resolve)": t1 - t_mod, "allocate_tensors": t2 - t1,
                               "first invoke": t_total - (t2 - t0)}}))
"""


def _run(which: str, path, env) -> dict:
    out = subprocess.run([sys.executable, "-c", SCRIPT, which, str(path)], capture_output=True, text=True, env=env,
                         timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["mobilenet_v2_100_224_int8", "small_cnn_f32"])
def test_cold_and_warm_start(benchmark, name):
    path = find_model(name)
    if path is None:
        pytest.skip(f"{name} not available")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, LITE_NUMBA_CACHE_DIR=os.path.join(cache, "ln"),
                   NUMBA_CACHE_DIR=os.path.join(cache, "nb"), LITE_NUMBA_PROGRESS="0")
        cold = _run("ours", path, env)
        warm = _run("ours", path, env)
    official = _run("builtin", path, dict(os.environ))
    ROWS.append({"case": f"{name} cold start (empty caches)", "ours": cold["first_invoke_s"],
                 "builtin": official["first_invoke_s"], "unit": "s"})
    ROWS.append({"case": f"{name} warm start (new process)", "ours": warm["first_invoke_s"],
                 "builtin": official["first_invoke_s"], "unit": "s",
                 "note": f"memory: ours peak RSS +{warm['peak_rss_delta_kib']:.0f} KiB (arena "
                         f"{warm['arena_kib']:.0f} KiB), official +{official['peak_rss_delta_kib']:.0f} KiB"})
    benchmark.extra_info.update({"cold": cold, "warm": warm, "official": official})
    benchmark.pedantic(lambda: None, rounds=1)
