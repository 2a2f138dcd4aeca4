"""`lite-numba warmup`: compile kernels and runners into the caches ahead of time (Docker image builds, CI caches,
installers), so that the first `allocate_tensors()` of a later process only loads them.

    lite-numba warmup MODEL.tflite [MODEL ...] [--num-threads N] [--no-invoke]
    lite-numba warmup --all
    lite-numba warmup --all --into DIR [--levels host,x86-64-v3,x86-64-v4,...]

Each model is loaded, allocated (every static kernel and the runner are compiled, in parallel worker processes when
several are missing; see lite_numba.jit.compiler.precompile) and invoked once on zeros, which also compiles what only
runs at invoke time (dynamic nodes). `--all` warms the bundled example models and `common_op_models()`: a float32
and an int8 chain of the ops of typical image models (convolutions 3x3 and 1x1, shallow and deep enough for the AMX
tiles, depthwise, residual ADD, PRELU, pooling, MEAN, FULLY_CONNECTED, SOFTMAX, RESHAPE, CONCATENATION), built in
code.

The caches are where the runtime looks (`cache_locations()`): kernels in Numba's cache directory for these sources
($NUMBA_CACHE_DIR/lite_numba-HASH, else $LITE_NUMBA_CACHE_DIR/numba/HASH, default ~/.cache/lite_numba/numba/HASH),
runners in $LITE_NUMBA_CACHE_DIR/runners. Kernels are compiled for the kernel path of the machine warming up
(`LITE_NUMBA_ISA`) and its instruction-set level (a generic x86-64-v3 / v4 target with the kernel-path instructions
the CPU has, design/startup.md; `LITE_NUMBA_CODEGEN=host`: the exact CPU). The cache does not depend on where the
package is installed (lite-numba's functions are cached by module and source hash), so it can be copied with an
image or to another virtual environment of the same lite-numba, Numba and Python versions.

`--into DIR` writes a precompiled directory instead (DIR/HASH/, with a manifest.json): one process per level of
`--levels` (default `host`, this CPU's own) compiles and runs the models with that level's codegen target and kernel
path (numba_cache.spec_target: `avx2` = `x86-64-v3`, `avxvnni`, `avx512` = `x86-64-v4`, `avx512vnni`, `amx`, each
with optional `+feature`s such as `avx512vnni+avxvnni`; `auto` = `host` and, on a CPU with more than AVX2,
`x86-64-v3` too; only levels this CPU has, so that the code is run and checked here). A later installation
reads such a directory, read-only, after its own cache: named in LITE_NUMBA_PRECOMPILED_DIR, or as the package's
`lite_numba/_precompiled/` (a wheel built after `lite-numba warmup --all --into lite_numba/_precompiled` ships it,
and every wheel `pip wheel .` builds: scripts/build_backend.py). Its code is used only on a CPU whose key is the
level's and which has every feature the key turns on; anything else compiles as without it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ..api.interpreter import Interpreter
from ..format.builder import ModelBuilder
from ..jit import numba_cache
from ..jit.compiler import STATS, cache_dir
from ..version import __version__

__all__ = ["cache_locations", "common_op_models", "main", "warm_model"]


def cache_locations() -> dict[str, str]:
    """Where warm-up writes: Numba's cache directory for these sources (kernels and runners' code) and the
    generated runners' source directory."""
    return {"kernels": numba_cache.ensure(__version__), "runners": str(cache_dir() / "runners")}


def warm_model(model: str | bytes, *, num_threads: int = 1, invoke: bool = True, name: str | None = None,
               out=sys.stdout) -> dict:
    """Allocate (and by default invoke once on zeros) `model`, a path or the model's bytes; returns what it took:
    seconds and the kernels compiled or loaded (lite_numba.jit.compiler.STATS)."""
    before = dict(STATS)
    t0 = time.perf_counter()
    it = Interpreter(model_path=model, num_threads=num_threads)
    it.allocate_tensors()
    note = ""
    if invoke:
        try:
            for d in it.get_input_details():
                if np.dtype(d["dtype"]) != np.object_:
                    it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
            it.invoke()
        except (RuntimeError, ValueError) as e:  # a model that rejects zeros: what allocate compiled is cached
            note = f" (invoke on zeros failed: {e})"
    took = {k: STATS[k] - before.get(k, 0) for k in STATS}
    took["seconds"] = time.perf_counter() - t0
    if name is None:
        name = model if isinstance(model, str) else f"<{len(model)} bytes>"
    print(f"{name}: {took['seconds']:.1f} s, kernels compiled {took['compiled']} (+{took['compiled_by_workers']} by "
          f"workers), loaded {took['loaded']}{note}", file=out)
    return took


def _conv_quant(scale_in: float, co: int, axis: int, rng) -> tuple[dict, dict]:
    scales = (rng.uniform(0.5, 1.5, co) * 0.02).astype(np.float32)
    w = {"scales": scales, "zero_points": np.zeros(co, np.int64), "quantized_dimension": axis}
    b = {"scales": scales * scale_in, "zero_points": np.zeros(co, np.int64), "quantized_dimension": 0}
    return w, b


def common_op_models() -> dict[str, bytes]:
    """Two small models covering the kernels of typical image models, float32 and int8 (see the module's
    docstring)."""
    return {f"common_ops_{np.dtype(t).name}": _common_model(t) for t in (np.float32, np.int8)}


def _common_model(dtype) -> bytes:
    rng = np.random.default_rng(0)
    q = dtype == np.int8

    def act(scale: float, zp: int):
        return (scale, zp) if q else None

    def weights(shape, axis):
        if not q:
            return rng.standard_normal(shape).astype(np.float32) * 0.1, None, None
        wq, bq = _conv_quant(0.05, shape[axis], axis, rng)
        return rng.integers(-127, 128, shape).astype(np.int8), wq, bq

    def bias(n, bq):
        return (rng.integers(-500, 500, n).astype(np.int32) if q else np.zeros(n, np.float32)), bq

    b = ModelBuilder()
    x = b.add_input("x", dtype, [1, 16, 16, 8], quant=act(0.05, -3))

    c0 = b.add_tensor("c0", dtype, [1, 8, 8, 16], quant=act(0.05, -128))
    w, wq, bq = weights([16, 3, 3, 8], 0)
    bv, bq = bias(16, bq)
    b.add_op("CONV_2D", [x, b.add_const("c0_w", w, quant=wq), b.add_const("c0_b", bv, quant=bq)], [c0],
             options={"padding": "SAME", "stride_w": 2, "stride_h": 2, "fused_activation_function": "RELU6"},
             version=3 if q else 1)
    d1 = b.add_tensor("d1", dtype, [1, 8, 8, 16], quant=act(0.05, -128))
    w, wq, bq = weights([1, 3, 3, 16], 3)
    bv, bq = bias(16, bq)
    b.add_op("DEPTHWISE_CONV_2D", [c0, b.add_const("d1_w", w, quant=wq), b.add_const("d1_b", bv, quant=bq)],
             [d1], options={"padding": "SAME", "stride_w": 1, "stride_h": 1, "depth_multiplier": 1,
                            "fused_activation_function": "RELU6"}, version=3 if q else 1)
    p1 = b.add_tensor("p1", dtype, [1, 8, 8, 16], quant=act(0.05, -128))
    w, wq, bq = weights([16, 1, 1, 16], 0)
    bv, bq = bias(16, bq)
    b.add_op("CONV_2D", [d1, b.add_const("p1_w", w, quant=wq), b.add_const("p1_b", bv, quant=bq)], [p1],
             options={"padding": "VALID", "stride_w": 1, "stride_h": 1}, version=3 if q else 1)
    r = b.add_tensor("r", dtype, [1, 8, 8, 16], quant=act(0.08, -20))
    b.add_op("ADD", [p1, c0], [r], version=2 if q else 1)
    # pointwise convolutions followed by a residual ADD and a PRELU, and by a PRELU alone (MediaPipe's face and palm
    # models; float ones take them into their epilogue, runtime/fusion.py fuse_conv_epilogues: kernels of their own)
    slopes = (rng.integers(-127, 128, (1, 1, 16)).astype(np.int8) if q
              else rng.standard_normal((1, 1, 16)).astype(np.float32) * 0.2)
    alpha = b.add_const("slopes", slopes, quant=(0.01, 0) if q else None)
    for name, residual in (("q1", c0), ("q2", None)):
        t = b.add_tensor(name, dtype, [1, 8, 8, 16], quant=act(0.05, -10))
        w, wq, bq = weights([16, 1, 1, 16], 0)
        bv, bq = bias(16, bq)
        b.add_op("CONV_2D", [d1, b.add_const(f"{name}_w", w, quant=wq), b.add_const(f"{name}_b", bv, quant=bq)],
                 [t], options={"padding": "VALID", "stride_w": 1, "stride_h": 1}, version=3 if q else 1)
        if residual is not None:
            s1 = b.add_tensor(f"{name}_sum", dtype, [1, 8, 8, 16], quant=act(0.08, -10))
            b.add_op("ADD", [t, residual], [s1], version=2 if q else 1)
            t = s1
        pr = b.add_tensor(f"{name}_prelu", dtype, [1, 8, 8, 16], quant=act(0.05, -10))
        b.add_op("PRELU", [t, alpha], [pr])
        b.mark_output(pr)
    # a second output through an expansion 16 -> 64 and a deep pointwise layer 64 -> 96: enough depth and work for
    # the int8 AMX tiles (simd_amx.amx_pays), which the 16-channel layers above leave to the VNNI kernels
    wide = d1
    for name, ci, co in (("e1", 16, 64), ("e2", 64, 96)):
        t = b.add_tensor(name, dtype, [1, 8, 8, co], quant=act(0.05, -128))
        w, wq, bq = weights([co, 1, 1, ci], 0)
        bv, bq = bias(co, bq)
        b.add_op("CONV_2D", [wide, b.add_const(f"{name}_w", w, quant=wq), b.add_const(f"{name}_b", bv, quant=bq)],
                 [t], options={"padding": "VALID", "stride_w": 1, "stride_h": 1, "fused_activation_function": "RELU6"},
                 version=3 if q else 1)
        wide = t
    m2 = b.add_tensor("m2", dtype, [1, 96], quant=act(0.05, -128))
    b.add_op("MEAN", [wide, b.add_const("axes2", np.array([1, 2], np.int32))], [m2], version=2 if q else 1)
    mp = b.add_tensor("mp", dtype, [1, 4, 4, 16], quant=act(0.08, -20))
    ap = b.add_tensor("ap", dtype, [1, 4, 4, 16], quant=act(0.08, -20))
    pool = {"padding": "VALID", "stride_w": 2, "stride_h": 2, "filter_width": 2, "filter_height": 2}
    b.add_op("MAX_POOL_2D", [r], [mp], options=pool, version=2 if q else 1)
    b.add_op("AVERAGE_POOL_2D", [r], [ap], options=pool, version=2 if q else 1)
    cat = b.add_tensor("cat", dtype, [1, 4, 4, 32], quant=act(0.08, -20))
    b.add_op("CONCATENATION", [mp, ap], [cat], options={"axis": 3}, version=2 if q else 1)
    m = b.add_tensor("m", dtype, [1, 32], quant=act(0.08, -20))
    b.add_op("MEAN", [cat, b.add_const("axes", np.array([1, 2], np.int32))], [m], version=2 if q else 1)
    w = (rng.integers(-127, 128, (10, 32)).astype(np.int8) if q
         else rng.standard_normal((10, 32)).astype(np.float32) * 0.1)
    wq = (0.02, 0) if q else None
    bv = rng.integers(-500, 500, 10).astype(np.int32) if q else np.zeros(10, np.float32)
    fc = b.add_tensor("fc", dtype, [1, 10], quant=act(0.1, 0))
    b.add_op("FULLY_CONNECTED", [m, b.add_const("fc_w", w, quant=wq),
                                 b.add_const("fc_b", bv, quant=(0.08 * 0.02, 0) if q else None)], [fc],
             version=4 if q else 1)
    rs = b.add_tensor("rs", dtype, [1, 10], quant=act(0.1, 0))
    b.add_op("RESHAPE", [fc, b.add_const("shape", np.array([1, 10], np.int32))], [rs])
    y = b.add_tensor("y", dtype, [1, 10], quant=act(1 / 256, -128))
    b.add_op("SOFTMAX", [rs], [y], options={"beta": 1.0}, version=2 if q else 1)
    b.mark_output(y)
    b.mark_output(m2)
    return b.build()


def _bundled_models() -> list[str]:
    return sorted(str(p) for p in (Path(__file__).parents[1] / "examples").glob("*.tflite"))


def level_targets(specs: list[str], host: dict[str, bool]) -> list[tuple[str, tuple[str, str, str]]]:
    """The (spec, numba_cache.spec_target) of each level spec for a CPU with the features `host`, `auto` read as
    `host` plus, on a CPU with every x86-64-v3 feature, `x86-64-v3` (the level every AVX2 CPU loads); a spec whose
    target (kernel path, CPU name, features) an earlier one already has is left out (`host` on an AVX2-only CPU is
    `x86-64-v3`). A ValueError names a level this CPU lacks."""
    wanted: list[str] = []
    for spec in specs:
        if spec.strip().lower() == "auto":
            wanted.append("host")
            if all(host.get(f, False) for f in numba_cache.X86_64_V3):
                wanted.append("x86-64-v3")
        else:
            wanted.append(spec.strip())
    out, seen = [], set()
    for spec in wanted:
        target = numba_cache.spec_target(spec, host)
        if target not in seen:
            seen.add(target)
            out.append((spec, target))
    return out


def warm_into(target: str, levels: list[str], args: list[str], out=sys.stdout) -> int:
    """`--into`: fill the precompiled directory `target`/HASH for each level spec of `levels`, one child process
    each (this command's `args` without --into / --levels); returns the number of failed levels."""
    import llvmlite.binding as ll  # lazy: only for --into (the host's features; Numba's compiler is not imported)

    host = {k: bool(v) for k, v in ll.get_host_cpu_features().items()}
    targets = level_targets(levels, host)  # ValueError: a level not here
    key = numba_cache.cache_key(__version__)
    final = Path(target) / key
    manifest = {"lite_numba": __version__, "numba": numba_cache.numba_version(), "key": key,
                "python": f"{sys.version_info[0]}.{sys.version_info[1]}", "levels": []}
    if (final / "manifest.json").is_file():
        manifest["levels"] = json.loads((final / "manifest.json").read_text()).get("levels", [])
    failed = 0
    with tempfile.TemporaryDirectory(prefix="lite-numba-warmup-") as tmp:
        staging = Path(tmp) / "numba" / key
        if final.is_dir():  # extend what is there (other levels or models)
            shutil.copytree(final, staging)
        for spec, (level, cpu, features) in targets:
            env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "LITE_NUMBA_CODEGEN")}
            env.update(LITE_NUMBA_CACHE_DIR=tmp, LITE_NUMBA_PRECOMPILED="0", NUMBA_CPU_NAME=cpu,
                       NUMBA_CPU_FEATURES=features, LITE_NUMBA_ISA=level)
            ladder = [f[1:] for f in features.split(",") if f[0] == "+" and f[1:] in numba_cache.LADDER]
            print(f"{spec}: {level} kernel path, codegen {cpu} + {', '.join(ladder) or 'x86-64-v3 only'}", file=out,
                  flush=True)
            run = subprocess.run([sys.executable, "-m", "lite_numba.tools.warmup", *args], env=env,
                                 capture_output=True, text=True)
            print(run.stdout, end="", file=out)
            if run.returncode != 0:
                print(f"ERROR: level {spec}: {run.stderr[-2000:]}", file=sys.stderr)
                failed += 1
                continue
            manifest["levels"] = [lv for lv in manifest["levels"] if lv["spec"] != spec]
            manifest["levels"].append({"spec": spec, "kernel_path": level, "cpu": cpu, "ladder": ladder,
                                       "features": features})
        if not staging.is_dir():
            return failed or 1
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=1))
        fresh = final.with_name(f"{key}.{os.getpid()}.tmp")
        shutil.copytree(staging, fresh, ignore=shutil.ignore_patterns("*.lock", "*.compiling", "*.tmp.*"))
        if final.is_dir():
            shutil.rmtree(final)
        os.replace(fresh, final)
    print(f"precompiled cache: {final} ({sum(p.stat().st_size for p in final.rglob('*') if p.is_file()) / 2**20:.1f} "
          "MiB)", file=out)
    return failed


def main(argv: list[str] | None = None) -> int:
    """The `lite-numba warmup` command."""
    ap = argparse.ArgumentParser(prog="lite-numba warmup", description="Compile the kernels and runners of models "
                                 "into the on-disk caches, so that later processes start without compiling.")
    ap.add_argument("models", nargs="*", metavar="MODEL", help=".tflite files to warm up")
    ap.add_argument("--all", action="store_true", help="also the bundled example models and a float32 and an int8 "
                    "model of the common image-model ops")
    ap.add_argument("--num-threads", type=int, default=1, help="compile the parallel variants too (as "
                    "Interpreter(num_threads=N) would use them)")
    ap.add_argument("--no-invoke", action="store_true", help="allocate only (do not run once on zeros)")
    ap.add_argument("--into", metavar="DIR", help="write a precompiled directory DIR/HASH for other installations "
                    "(read-only, see LITE_NUMBA_PRECOMPILED_DIR) instead of this machine's cache")
    ap.add_argument("--levels", default="host", help="with --into: the ISA levels to compile for, comma-separated: "
                    "host, avx2 (= x86-64-v3), avxvnni, avx512 (= x86-64-v4), avx512vnni, amx, each with optional "
                    "+feature (e.g. avx512vnni+avxvnni), or auto (host, and x86-64-v3 on a CPU that has more); "
                    "only levels this CPU has (default: host)")
    a = ap.parse_args(argv)
    if not a.models and not a.all:
        ap.error("give MODEL files or --all")
    if a.num_threads < 1:
        ap.error("--num-threads must be >= 1")
    if a.into:
        args = [*a.models, *(["--all"] if a.all else []), "--num-threads", str(a.num_threads),
                *(["--no-invoke"] if a.no_invoke else [])]
        try:
            return 1 if warm_into(a.into, [v for v in a.levels.split(",") if v.strip()], args) else 0
        except ValueError as e:
            ap.error(str(e))
    targets: list[tuple[str, str | bytes]] = [(m, m) for m in a.models]
    if a.all:
        targets += [(m, m) for m in _bundled_models()]
        targets += list(common_op_models().items())
    for where, path in cache_locations().items():
        print(f"{where} cache: {path}")
    failed = 0
    for name, model in targets:
        try:
            warm_model(model, num_threads=a.num_threads, invoke=not a.no_invoke, name=name)
        except (OSError, ValueError, RuntimeError) as e:
            print(f"ERROR: {name}: {e}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
