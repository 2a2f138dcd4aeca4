"""The build backend (pyproject.toml's `build-backend`, issue 33): setuptools' own, except that a wheel carries a
precompiled kernel cache for the CPU that builds it.

`pip wheel .` / `pip install .` / `python -m build` build the wheel with setuptools, unpack it into a temporary
directory, run `lite-numba warmup --all --into <there>/lite_numba/_precompiled --levels LEVELS` from that copy
(the bundled examples and the common image-model ops, compiled and run once per level: design/startup.md,
"Caches across installations, and precompiled caches") and add the directory to the wheel. An installation of that
wheel loads those kernels read-only on a CPU of the same level instead of compiling them (a fresh container's
first invoke of small_cnn_f32 in well under a second instead of several); on any other CPU, Python, Numba or
lite-numba version the precompiled code is not used and kernels compile as without it.

LITE_NUMBA_PRECOMPILE chooses the levels (comma-separated, as `warmup --levels`; default `auto`: the building
CPU's own ladder (`host`) and, where that is more than AVX2, the x86-64-v3 level every AVX2 machine loads, so a wheel
built on an AVX-512 machine also starts an AVX2-only one without compiling; `host`: the first only; more levels,
e.g. `auto,avx512`, as the build CPU has them); `0` or an empty value builds
a plain wheel (what the source tree's editable installs always are: `pip install -e .` never precompiles). The
warm-up needs lite-numba's run-time dependencies in the build environment, so get_requires_for_build_wheel asks for
them when it precompiles. A failed warm-up leaves the wheel plain and says so: the package works without it.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - every other hook is setuptools' own

# lite-numba's run-time dependencies (pyproject.toml's [project] dependencies), for the warm-up in the build env
RUNTIME_REQUIRES = ["numba>=0.60", "numpy>=1.24", "flatbuffers>=24.3", "tflite>=2.18"]


def precompile_levels() -> list[str]:
    value = os.environ.get("LITE_NUMBA_PRECOMPILE", "auto").strip()
    return [] if value in ("", "0") else [v.strip() for v in value.split(",") if v.strip()]


def get_requires_for_build_wheel(config_settings=None):
    reqs = list(_setuptools.get_requires_for_build_wheel(config_settings))
    return reqs + RUNTIME_REQUIRES if precompile_levels() else reqs


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)
    levels = precompile_levels()
    if levels:
        add_precompiled(Path(wheel_directory) / name, levels)
    return name


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def add_precompiled(wheel: Path, levels: list[str]) -> bool:
    """Warm the unpacked `wheel` into its lite_numba/_precompiled and add those files (and their RECORD lines) to
    it; False (the wheel left as it was) when the warm-up fails."""
    with tempfile.TemporaryDirectory(prefix="lite-numba-wheel-") as tmp:
        root = Path(tmp) / "wheel"
        with zipfile.ZipFile(wheel) as z:
            z.extractall(root)
        into = root / "lite_numba" / "_precompiled"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "LITE_NUMBA_"))}
        # (the unpacked wheel first; pip's isolated build environment reaches its packages through PYTHONPATH too)
        path = os.pathsep.join(x for x in (str(root), os.environ.get("PYTHONPATH", "")) if x)
        env.update(PYTHONPATH=path, LITE_NUMBA_CACHE_DIR=str(Path(tmp) / "cache"), LITE_NUMBA_PRECOMPILED="0",
                   HOME=str(Path(tmp) / "home"))
        cmd = [sys.executable, "-m", "lite_numba.tools.warmup", "--all", "--into", str(into), "--levels",
               ",".join(levels)]
        print(f"lite-numba: precompiling kernels into the wheel for {','.join(levels)} "
              f"(LITE_NUMBA_PRECOMPILE=0: a plain wheel)", file=sys.stderr, flush=True)
        run = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True)
        files = sorted(p for p in into.rglob("*") if p.is_file()) if into.is_dir() else []
        if run.returncode != 0 or not files:
            print(f"lite-numba: WARNING: the precompile failed (rc {run.returncode}); the wheel has no precompiled "
                  f"kernels (they compile on first use):\n{run.stdout[-2000:]}{run.stderr[-3000:]}", file=sys.stderr)
            return False
        with zipfile.ZipFile(wheel) as z:
            record = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
            entries = [(i, z.read(i)) for i in z.infolist() if i.filename != record]
            lines = z.read(record).decode().splitlines()
        added = [(p.relative_to(root).as_posix(), p.read_bytes()) for p in files]
        own = [ln for ln in lines if ln.startswith(record + ",")]  # RECORD's own line (no hash) stays last
        lines = [ln for ln in lines if ln and ln not in own] + [_record_line(a, d) for a, d in added] + own
        fresh = wheel.with_suffix(".tmp")
        with zipfile.ZipFile(fresh, "w", zipfile.ZIP_DEFLATED) as z:
            for info, data in entries:
                z.writestr(info, data)
            for arc, data in added:
                z.writestr(arc, data)
            z.writestr(record, "\n".join(lines) + "\n")
        os.replace(fresh, wheel)
        size = sum(len(d) for _, d in added) / 2**20
        print(f"lite-numba: {len(added)} precompiled files ({size:.1f} MiB) added to {wheel.name}", file=sys.stderr)
        return True
