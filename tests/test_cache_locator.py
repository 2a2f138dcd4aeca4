"""Caches that follow the sources, not the install path (issue 33): lite-numba's own functions are cached by module
and source hash (lite_numba.jit.numba_cache.module_locator), so the same sources at another path - a wheel in a new
virtual environment, a copied image - load a cache another installation filled; and precompiled directories
(`lite-numba warmup --into DIR --levels ...`) are searched read-only after the writable cache, used only for the
running CPU's own key and only when the CPU has every feature that key turns on.

Compiles are counted in each fresh process with Numba's "numba:compile" event (test_startup_cache.FRESH).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from small_models import kernel_chain_model
from test_startup_cache import FRESH, OTHER_CPU, _env

from lite_numba.testing import assert_close, require_official, run_official

ROOT = Path(__file__).resolve().parents[1]
WHERE = '\nimport lite_numba as _ln\nprint(json.dumps({"package": _ln.__file__}))\n'


def _run(model, x_path, env, cwd) -> dict:
    """FRESH in a new process started in `cwd` (not the repository, whose lite_numba would shadow a copy)."""
    code = (OTHER_CPU if "LN_TEST_OTHER_CPU" in env else "") + FRESH + WHERE
    out = subprocess.run([sys.executable, "-c", code, str(model), str(x_path)], capture_output=True, text=True,
                         env=env, timeout=1800, cwd=cwd)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    return {**json.loads(lines[-2]), **json.loads(lines[-1])}


def _copy_package(site: Path) -> Path:
    """lite_numba with its kernels and plugins laid out as a wheel installs them, under `site`."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "_precompiled")
    shutil.copytree(ROOT / "lite_numba", site / "lite_numba", ignore=ignore)
    shutil.copytree(ROOT / "kernels", site / "lite_numba" / "kernels", ignore=ignore)
    shutil.copytree(ROOT / "plugins", site / "lite_numba" / "plugins", ignore=ignore)
    return site / "lite_numba"


def _case(tmp_path, seed: int):
    require_official()
    model = tmp_path / "m.tflite"
    model.write_bytes(kernel_chain_model())
    x = np.random.default_rng(seed).standard_normal((2, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    return model, tmp_path / "x.npy", run_official(model.read_bytes(), [x])[0]


def test_a_copy_at_another_path_loads_the_cache_and_a_changed_copy_does_not(tmp_path):
    """A cache filled by this installation, moved to another directory, is loaded without a compile by a copy of the
    package at another path (the cache key and every subdirectory follow the sources); a copy with one source file
    changed compiles. Before the module locator every subdirectory was named by a hash of its source's path."""
    model, x_path, ref = _case(tmp_path, 7)
    env = _env(tmp_path, LITE_NUMBA_COMPILE_WORKERS="1", LITE_NUMBA_PRECOMPILED="0")
    made = _run(model, x_path, env, cwd=tmp_path)
    assert made["compiled"], "the first process compiled nothing: the caches were not empty"
    assert made["package"].startswith(str(ROOT))

    moved = tmp_path / "moved"
    for d in ("ln", "nb"):
        shutil.copytree(tmp_path / d, moved / d)
    copy = _copy_package(tmp_path / "site")
    env2 = {**_env(moved, LITE_NUMBA_COMPILE_WORKERS="1", LITE_NUMBA_PRECOMPILED="0"),
            "PYTHONPATH": str(tmp_path / "site")}
    there = _run(model, x_path, env2, cwd=tmp_path)
    assert there["package"] == str(copy / "__init__.py")
    assert there["compiled"] == [], f"the copy at another path recompiled {there['compiled']}"
    assert there["stats"]["compiled"] == 0 and there["stats"]["loaded"] >= 3, there["stats"]
    assert_close(np.array(there["y"], np.float32), ref)

    arithmetic = copy / "kernels" / "elementwise" / "arithmetic.py"
    arithmetic.write_text(arithmetic.read_text() + "\n# changed\n")
    changed = _run(model, x_path, env2, cwd=tmp_path)
    assert changed["compiled"], "a changed source loaded the cache of the old one"
    assert_close(np.array(changed["y"], np.float32), ref)


def test_module_locator_keys_own_functions_by_package_and_file_bytes(tmp_path):
    """lite-numba's functions get a subdirectory named by their package under Numba's cache directory and a stamp
    that is the hash of the file's bytes (the same for a copy elsewhere, another for changed bytes); a function of
    any other module keeps Numba's own locators."""
    from lite_numba.kernels.base import copy as copy_kernels
    from numba.core import config

    import lite_numba
    from lite_numba.jit import numba_cache

    lite_numba.NUMBA_CACHE_DIR  # noqa: B018 - configures Numba's cache (imports Numba)
    locator = numba_cache.module_locator()
    fn = copy_kernels.copy_bytes.py_func
    found = locator.from_function(fn, copy_kernels.__file__)
    assert found.get_cache_path() == os.path.join(config.CACHE_DIR, "lite_numba.kernels.base")
    a, b = tmp_path / "a" / "copy.py", tmp_path / "b" / "copy.py"
    for p in (a, b):
        p.parent.mkdir()
        shutil.copy(copy_kernels.__file__, p)
    assert numba_cache.file_stamp(str(a)) == numba_cache.file_stamp(str(b)) == found.get_source_stamp()
    b.write_text(b.read_text() + "\n")
    assert numba_cache.file_stamp(str(b)) != numba_cache.file_stamp(str(a))

    def users_op(x):
        return x

    assert locator.from_function(users_op, __file__) is None  # a user's function: Numba's locators
    assert numba_cache.module_subdir("lite_numba_runner_0123", "/anywhere/lnb_0123.py") == numba_cache.RUNNERS
    # code whose file is not its module's (exec under another name): Numba's locators
    assert numba_cache.module_subdir("lite_numba.kernels.base.copy", str(a)) is None


def test_spec_target_names_the_levels_and_refuses_missing_features():
    import llvmlite.binding as ll

    from lite_numba.jit.numba_cache import LADDER, level_target, spec_target

    host = {k: bool(v) for k, v in ll.get_host_cpu_features().items()}
    if level_target(host) is None:
        pytest.skip("this CPU lacks x86-64-v3")
    assert spec_target("host", host) == level_target(host)
    level, cpu, features = spec_target("x86-64-v3", host)
    on = {f[1:] for f in features.split(",") if f[0] == "+"}
    assert (level, cpu) == ("avx2", "x86-64-v3") and not on & set(LADDER)
    with pytest.raises(ValueError, match="expected host or one of"):
        spec_target("avx1024", host)
    with pytest.raises(ValueError, match="not among the ladder features"):
        spec_target("avx2+sse5", host)
    with pytest.raises(ValueError, match="which this CPU lacks"):
        spec_target("amx", {**host, "amx-int8": False})

def test_auto_levels_add_the_avx2_level_once():
    """`--levels auto` (the wheel's default) is this CPU's own level plus x86-64-v3; on an AVX2-only CPU the two are
    one target, compiled once; a repeated level is compiled once; a CPU without AVX2 is refused by name."""
    import llvmlite.binding as ll

    from lite_numba.jit.numba_cache import LADDER, level_target, spec_target
    from lite_numba.tools.warmup import level_targets

    host = {k: bool(v) for k, v in ll.get_host_cpu_features().items()}
    if level_target(host) is None:
        pytest.skip("this CPU lacks x86-64-v3")
    v3 = spec_target("x86-64-v3", host)
    big = {**host, "avx512f": True, "avx512bw": True, "avx512cd": True, "avx512dq": True, "avx512vl": True}
    assert [(s, t[0]) for s, t in level_targets(["auto"], big)] == [("host", level_target(big)[0]),
                                                                   ("x86-64-v3", "avx2")]
    assert level_targets(["auto"], big)[1][1] == spec_target("x86-64-v3", big)
    avx2_only = {**host, **{f: False for f in LADDER}}
    assert level_targets(["auto"], avx2_only) == [("host", spec_target("x86-64-v3", avx2_only))]
    assert len(level_targets(["x86-64-v3", "avx2", "auto"], host)) == (1 if spec_target("host", host) == v3 else 2)
    with pytest.raises(ValueError, match="which this CPU lacks"):
        level_targets(["auto"], {**host, "avx2": False})


def _warmup_into(target: Path, model: Path, levels: str, env: dict, cwd) -> str:
    cmd = [sys.executable, "-c", "import sys; from lite_numba.tools.cli import main; sys.exit(main())", "warmup",
           str(model), "--into", str(target), "--levels", levels]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800, cwd=cwd)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out.stdout


def _listing(d: Path) -> dict:
    return {str(p.relative_to(d)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(d.rglob("*"))}


def test_precompiled_directory_is_used_read_only_and_only_on_a_cpu_of_its_level(tmp_path):
    """`lite-numba warmup --into P --levels host,x86-64-v3` fills P; fresh processes with empty caches then load
    from P without compiling on this CPU and on a (simulated) AVX2-only CPU, and never write to P. A CPU of another
    level (AVX-VNNI without AVX-512) compiles its own code; so does a process whose codegen asks for this CPU's key
    (NUMBA_CPU_NAME / NUMBA_CPU_FEATURES) on a CPU that lacks AVX-512: the key matches, the check of its features
    refuses it."""
    from test_startup_cache import _host_features, _needs_avx512

    _needs_avx512()
    model, x_path, ref = _case(tmp_path, 8)
    host = _host_features()
    precompiled = tmp_path / "precompiled"
    out = _warmup_into(precompiled, model, "host,x86-64-v3", _env(tmp_path / "w"), cwd=tmp_path)
    assert "host: amx" in out or "host: avx512" in out, out
    assert "x86-64-v3: avx2" in out, out
    manifest = json.loads(next(precompiled.glob("*/manifest.json")).read_text())
    assert [lv["spec"] for lv in manifest["levels"]] == ["host", "x86-64-v3"]
    before = _listing(precompiled)
    assert any(p.endswith(".nbc") for p in before)

    def fresh(name, **extra):
        env = _env(tmp_path / name, LITE_NUMBA_COMPILE_WORKERS="1", LITE_NUMBA_PRECOMPILED_DIR=str(precompiled))
        run = _run(model, x_path, {**env, **extra}, cwd=tmp_path)
        assert_close(np.array(run["y"], np.float32), ref, what=f"{name}: ")
        return run

    here = fresh("here")
    assert here["compiled"] == [], f"recompiled {here['compiled']} with a precompiled directory of this level"
    assert here["stats"]["compiled"] == 0 and here["stats"]["loaded"] >= 3, here["stats"]
    assert fresh("off", LITE_NUMBA_PRECOMPILED="0")["compiled"], "the control (no precompiled directory) compiled"

    ladder_off = {f: False for f in host if f.startswith(("avx512", "amx"))}
    avx2 = fresh("avx2", LN_TEST_OTHER_CPU=json.dumps({"name": "haswell", "features": {**ladder_off,
                                                                                       "avxvnni": False}}))
    assert avx2["level"] == "avx2" and avx2["compiled"] == [], avx2["compiled"]
    if host.get("avxvnni"):
        vnni = fresh("avxvnni", LN_TEST_OTHER_CPU=json.dumps({"name": "alderlake", "features": ladder_off}))
        assert vnni["level"] == "avxvnni" and vnni["compiled"], "an AVX-VNNI CPU used code of another level"

    from lite_numba.jit.numba_cache import level_target

    _, cpu, features = level_target(host)
    forced = fresh("forced", NUMBA_CPU_NAME=cpu, NUMBA_CPU_FEATURES=features,
                   LN_TEST_OTHER_CPU=json.dumps({"name": "alderlake", "features": ladder_off}))
    assert forced["codegen"] == [cpu, features]
    assert forced["compiled"], "precompiled AVX-512 code was loaded on a CPU reported without AVX-512"
    assert _listing(precompiled) == before, "a process wrote to the precompiled directory"
