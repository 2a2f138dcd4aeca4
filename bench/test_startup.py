"""Start-up cost (issues 16, 33): cold as an installed wheel's first process (empty caches, the precompiled kernels a
wheel carries for the CPU that built it: scripts/build_backend.py), cold with nothing precompiled (an editable
install: compile everything), warm (new process, caches present: since
issue 33 the model's native image, run without Numba; and without it, LITE_NUMBA_IMAGE=0), the time
of `import lite_numba`, and memory, beside the official runtime (builtin kernels) in the same run.

Each figure is a new process: import, load, allocate_tensors, first invoke on zeros. Cold runs get fresh
LITE_NUMBA_CACHE_DIR and NUMBA_CACHE_DIR; the warm run reuses them. Wall time depends on the machine's load (the
kernels compile in this many processes: lite_numba.jit.compiler.compile_workers()), so CPU seconds of the process and of
its compile workers are reported too, with the load average, the CPU and the kernel path (LITE_NUMBA_ISA).
Memory: peak RSS of the process (VmHWM), beside a process that imports Numba and compiles one trivial function (Numba's
floor) and the official runtime's. `phases_s` in the benchmark's extra_info breaks every run down. Nothing is
asserted about time. Every process may write and read Python bytecode caches, as an installed package does.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import ROOT, ROWS, find_model

SCRIPT = r"""
import json, resource, sys, time
t0 = time.perf_counter()
c0 = time.process_time()
import numpy as np
which, path = sys.argv[1], sys.argv[2]
if which == "ours":
    from lite_numba import Interpreter
    t_import = time.perf_counter()
    it = Interpreter(model_path=path)
elif which == "numba-floor":
    import numba
    t_import = time.perf_counter()
    numba.njit(lambda x: x + 1)(1)
    it = None
else:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    t_import = time.perf_counter()
    it = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
t1 = time.perf_counter()
if it is not None:
    it.allocate_tensors()
t2 = time.perf_counter()
if it is not None:
    for d in it.get_input_details():
        it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
    it.invoke()
t3 = time.perf_counter()
self_ru = resource.getrusage(resource.RUSAGE_SELF)
child_ru = resource.getrusage(resource.RUSAGE_CHILDREN)
stats = {}
if which == "ours":
    import lite_numba.jit.compiler as compiler
    stats = getattr(compiler, "STATS", {})
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the forking process (pytest's own RSS)
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
print(json.dumps({"numba_imported": "numba" in sys.modules, "import_s": t_import - t0, "first_invoke_s": t3 - t0,
                  "cpu_s": time.process_time() - c0,
                  "worker_cpu_s": child_ru.ru_utime + child_ru.ru_stime, "peak_rss_mib": hwm / 1024,
                  "stats": stats, "phases_s": {"import": t_import - t0, "Interpreter() (load, resolve)": t1 - t_import,
                  "allocate_tensors": t2 - t1, "first invoke": t3 - t2}}))
"""

# hand_landmark_lite is MediaPipe's hand model (not bundled); face_detection_short_range is the bundled stand-in
MODELS = ["small_cnn_f32", "mobilenet_v2_100_224_int8", "hand_landmark_lite", "mediapipe_face_detection_short_range"]
EXTRA_DIRS = [ROOT / "lite_numba" / "examples", ROOT / "tests" / "data" / "real", ROOT.parent / "shared" / "models",
              ROOT.parent / "shared" / "models" / "real"]


def _find(name: str) -> Path | None:
    found = find_model(name)
    if found is not None:
        return found
    for d in EXTRA_DIRS:
        p = d / f"{name}.tflite"
        if p.exists():
            return p
    return None


def _run(which: str, path, env) -> dict:
    # as installed Python runs: bytecode cached in __pycache__ (pip compiles it at install time; a developer shell or
    # CI image with PYTHONDONTWRITEBYTECODE=1 would recompile lite-numba's ~70 modules from source in every process,
    # 0.15-0.35 s of a warm start that no installed copy pays)
    env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run([sys.executable, "-c", SCRIPT, which, str(path)], capture_output=True, text=True, env=env,
                         timeout=3600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _setting() -> str:
    from lite_numba.kernels.base.isa import isa_level

    import lite_numba.jit.compiler as compiler

    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    workers = getattr(compiler, "compile_workers", lambda: 1)()
    return (f"{cpu}, {os.cpu_count()} CPUs, ISA path {isa_level()}, {workers} compile processes, "
            f"load {os.getloadavg()[0]:.1f}")


@pytest.fixture(scope="module")
def shipped():
    """The precompiled directory a wheel built on this machine carries (scripts/build_backend.py: `lite-numba warmup
    --all --into lite_numba/_precompiled --levels auto`: this CPU's level and x86-64-v3, which the AVX2 stand-in of
    scripts/as_level.py loads as an AVX2-only CPU would): the bundled examples and the common image-model ops, not
    the bench's models themselves."""
    from conftest import light

    if light():
        yield None
        return
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(LITE_NUMBA_CACHE_DIR=os.path.join(tmp, "warm"), LITE_NUMBA_PROGRESS="0")
        into = os.path.join(tmp, "precompiled")
        out = subprocess.run([sys.executable, "-m", "lite_numba.tools.warmup", "--all", "--into", into, "--levels",
                              "auto"], capture_output=True, text=True, env=env, timeout=3600)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
        yield into


@pytest.mark.parametrize("name", MODELS)
def test_cold_and_warm_start(benchmark, name, shipped):
    path = _find(name)
    if path is None:
        pytest.skip(f"{name} not available")
    setting = _setting()
    with tempfile.TemporaryDirectory() as cache:
        # an installed wheel's first process: empty caches, the wheel's precompiled kernels for this CPU
        first = _run("ours", path, dict(os.environ, LITE_NUMBA_CACHE_DIR=os.path.join(cache, "w"),
                                        NUMBA_CACHE_DIR=os.path.join(cache, "wnb"), LITE_NUMBA_PROGRESS="0",
                                        LITE_NUMBA_PRECOMPILED_DIR=shipped))
        env = dict(os.environ, LITE_NUMBA_CACHE_DIR=os.path.join(cache, "ln"),
                   NUMBA_CACHE_DIR=os.path.join(cache, "nb"), LITE_NUMBA_PROGRESS="0", LITE_NUMBA_PRECOMPILED="0")
        cold = _run("ours", path, env)  # (also saves the model's native image: lite_numba/runtime/native)
        warm = _run("ours", path, env)
        plain = _run("ours", path, dict(env, LITE_NUMBA_IMAGE="0"))  # the warm start without the image
    official = _run("builtin", path, dict(os.environ))
    floor = _run("numba-floor", path, dict(os.environ))
    st = first["stats"]
    ROWS.append({"case": f"{name} cold start, installed wheel (empty caches, its precompiled kernels)",
                 "ours": first["first_invoke_s"], "builtin": official["first_invoke_s"], "unit": "s",
                 "note": f"kernels loaded {st.get('loaded', 0)}, compiled {st.get('compiled', 0)} (+"
                         f"{st.get('compiled_by_workers', 0)} by workers); CPU {first['cpu_s']:.1f} s + workers "
                         f"{first['worker_cpu_s']:.1f} s; peak RSS {first['peak_rss_mib']:.0f} MiB"})
    ROWS.append({"case": f"{name} cold start (empty caches, nothing precompiled)", "ours": cold["first_invoke_s"],
                 "builtin": official["first_invoke_s"], "unit": "s",
                 "note": f"CPU {cold['cpu_s']:.1f} s + workers {cold['worker_cpu_s']:.1f} s; {setting}"})
    ROWS.append({"case": f"{name} warm start (new process)", "ours": warm["first_invoke_s"],
                 "builtin": official["first_invoke_s"], "unit": "s",
                 "note": f"import lite_numba {warm['import_s']:.2f} s (official {official['import_s']:.2f} s); CPU "
                         f"{warm['cpu_s']:.2f} s; peak RSS {warm['peak_rss_mib']:.0f} MiB (Numba's floor "
                         f"{floor['peak_rss_mib']:.0f}, official {official['peak_rss_mib']:.0f}); Numba imported: "
                         f"{warm['numba_imported']}"})
    ROWS.append({"case": f"{name} warm start without the native image", "ours": plain["first_invoke_s"],
                 "builtin": official["first_invoke_s"], "unit": "s",
                 "note": f"LITE_NUMBA_IMAGE=0; CPU {plain['cpu_s']:.2f} s; peak RSS {plain['peak_rss_mib']:.0f} MiB"})
    benchmark.extra_info.update({"cold_installed": first, "cold": cold, "warm": warm, "warm_no_image": plain,
                                 "official": official, "numba_floor": floor, "setting": setting})
    benchmark.pedantic(lambda: None, rounds=1)
