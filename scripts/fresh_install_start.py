"""First invoke in a fresh installation (issue 33): new processes of another Python environment (a venv with a wheel
of lite-numba installed), each with an empty home directory (so an empty ~/.cache), optionally with a cache directory
copied in or a precompiled directory named, then the same home again (warm). Prints per process the wall time of
import + load + allocate + first invoke on zeros, what was compiled (Numba's numba:compile events in the process and
lite_numba.jit.compiler.STATS, which counts the compile workers' too) and peak RSS, with the CPU and the load.

    python scripts/fresh_install_start.py --python /tmp/wheelvenv/bin/python --model small_cnn_f32.tflite \
        [--copy-cache ~/.cache/lite_numba] [--precompiled DIR | --no-precompiled] [--cold-runs 2] [--warm-runs 3]

docs/design/startup.md ("Caches across installations") has the scenario and the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

ONE = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
from numba.core import event
compiled = []
class Count(event.Listener):
    def on_start(self, ev):
        compiled.append(ev.data["dispatcher"].py_func.__qualname__)
    def on_end(self, ev):
        pass
event.register("numba:compile", Count())
import lite_numba
from lite_numba import Interpreter
from lite_numba.jit.compiler import STATS
t_import = time.perf_counter()
it = Interpreter(model_path=sys.argv[1])
it.allocate_tensors()
for d in it.get_input_details():
    it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
it.invoke()
t1 = time.perf_counter()
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
from lite_numba.kernels.base import isa
print(json.dumps({"first_invoke_s": t1 - t0, "import_s": t_import - t0, "compiled_here": len(compiled),
                  "stats": STATS, "package": lite_numba.__file__, "cache": lite_numba.NUMBA_CACHE_DIR,
                  "kernel_path": isa.isa_level(), "peak_rss_mib": hwm / 1024}))
"""


def _cpu() -> str:
    text = Path("/proc/cpuinfo").read_text()
    get = {line.split(":")[0].strip(): line.split(":", 1)[1].strip() for line in text.splitlines() if ":" in line}
    return f"{get.get('model name')} (family {get.get('cpu family')} model {get.get('model')}), {os.cpu_count()} CPUs"


def _run(python: str, model: str, home: Path, extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LITE_NUMBA_", "NUMBA_")) and k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
    env.update(HOME=str(home), LITE_NUMBA_PROGRESS="0", **extra)
    out = subprocess.run([python, "-c", ONE, model], capture_output=True, text=True, env=env, cwd=home, timeout=3600)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["load"] = os.getloadavg()[0]
    return r


def _show(what: str, runs: list[dict]) -> None:
    for r in runs:
        s = r["stats"]
        print(f"  {what}: {r['first_invoke_s']:.2f} s (import {r['import_s']:.2f}), compiled here "
              f"{r['compiled_here']}, STATS compiled {s['compiled']} + workers {s['compiled_by_workers']}, loaded "
              f"{s['loaded']}, path {r['kernel_path']}, peak RSS {r['peak_rss_mib']:.0f} MiB, load {r['load']:.1f}")
    if len(runs) > 1:
        print(f"  {what} median: {statistics.median(r['first_invoke_s'] for r in runs):.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", required=True, help="the interpreter of the fresh installation")
    ap.add_argument("--model", required=True)
    ap.add_argument("--copy-cache", help="a $LITE_NUMBA_CACHE_DIR to copy into each fresh ~/.cache/lite_numba")
    ap.add_argument("--precompiled", help="LITE_NUMBA_PRECOMPILED_DIR of the fresh processes")
    ap.add_argument("--no-precompiled", action="store_true",
                    help="LITE_NUMBA_PRECOMPILED=0: ignore the wheel's own lite_numba/_precompiled (the control)")
    ap.add_argument("--cold-runs", type=int, default=2)
    ap.add_argument("--warm-runs", type=int, default=3)
    a = ap.parse_args()
    extra = {"LITE_NUMBA_PRECOMPILED_DIR": a.precompiled} if a.precompiled else {}
    if a.no_precompiled:
        extra["LITE_NUMBA_PRECOMPILED"] = "0"
    print(f"CPU: {_cpu()}; python {a.python}")
    first, warm = [], []
    for i in range(a.cold_runs):
        with tempfile.TemporaryDirectory(prefix="fresh-home-") as home:
            if a.copy_cache:
                shutil.copytree(a.copy_cache, Path(home) / ".cache" / "lite_numba")
            first.append(_run(a.python, os.path.abspath(a.model), Path(home), extra))
            if i == a.cold_runs - 1:
                warm = [_run(a.python, os.path.abspath(a.model), Path(home), extra) for _ in range(a.warm_runs)]
    print(f"package {first[0]['package']}, kernel cache {first[0]['cache']}")
    _show("first process", first)
    _show("warm (same home, next process)", warm)


if __name__ == "__main__":
    main()
