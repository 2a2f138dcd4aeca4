"""Shared fixtures: where the bundled models live, the official runtime (the oracle), the instruction-set levels
the SIMD tests run on, and the Hypothesis profiles.

Hypothesis profiles (``pytest --hypothesis-profile=NAME``):

- ``ci`` (the default, locally and under ``CI=true``): derandomized, so a run is reproducible; each test's own
  ``max_examples`` (given through ``scaled(n)``).
- ``long``: ten times the examples of every test, random (a new part of the space each run); for nightly runs
  and before a release.

``pytest --hypothesis-show-statistics`` prints, per test, how many examples ran, how many were rejected by
``assume()`` and where the time went.
"""

from __future__ import annotations

import importlib
import os
import platform
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

DATA = Path(__file__).parent / "data"
MODELS = DATA / "models"
# The development machines have the team's shared folder beside the repository (with the larger models); a fresh
# clone (and CI) does not, and every model-level test must run without it.
SHARED_MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"
# Native images (lite_numba/runtime/native) are off for the suite and the processes it starts, so every test runs the
# path it names (a second interpreter of a model in one process would otherwise restore the first one's image);
# tests/test_native_image.py turns them on in processes of its own.
os.environ.setdefault("LITE_NUMBA_IMAGE", "0")

settings.register_profile("ci", max_examples=100, derandomize=True, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=1000, derandomize=False, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")  # --hypothesis-profile=long replaces it (the plugin loads it before tests are imported)


def kernel_names(it) -> set[str]:
    """The names of the kernels an allocated interpreter's main graph scheduled."""
    return {getattr(c.fn, "__name__", "") for p in it.runtime.main.prepared if p is not None for c in p.calls}


def scaled(n: int) -> int:
    """A test's example count under the profile in force: n in ``ci``, 10 n in ``long``."""
    return max(1, n * settings.default.max_examples // 100)


def in_ci() -> bool:
    """True under CI=true (or any non-empty CI): skips that would hide a missing oracle or model become failures."""
    return bool(os.environ.get("CI"))


def skip_or_fail(msg: str) -> None:
    """Skip with `msg` locally; fail under CI, where a missing model, oracle or engine must not hide a test."""
    if in_ci():
        pytest.fail(msg)
    pytest.skip(msg)


def require_module(module: str, extra: str = "ray,dask,beam"):
    """Import and return `module` (an optional engine or library: ray, dask, tokenizers...); skips when it is
    missing, fails under CI (the extras are installed there)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        skip_or_fail(f"{module} is not installed (pip install -e '.[{extra}]'): {e}")


def model_path(name: str) -> Path:
    """A bundled model, or one from ../shared/models (skips when neither exists; fails under CI)."""
    for folder in (MODELS, SHARED_MODELS):
        p = folder / f"{name}.tflite"
        if p.exists():
            return p
    skip_or_fail(f"model {name} is not bundled in tests/data/models and ../shared/models has no copy")


@pytest.fixture(scope="session")
def official():
    """The ai_edge_litert.interpreter module; fails (not skips) under CI when it is missing."""
    from lite_numba.testing import require_official

    return require_official()


# --- instruction-set levels ------------------------------------------------------------------------------------


def isa_params(exclude: tuple[str, ...] = ()) -> list:
    """One pytest param per level in kernels.isa.LEVELS (so a level added there is tested without editing the
    tests); a level this CPU cannot run is a skip naming the missing CPU features (pytest -rs lists them)."""
    from lite_numba.kernels.base import isa

    out = []
    for level in isa.LEVELS:
        if level in exclude:
            continue
        marks = ()
        if not isa.supports(level):  # the missing CPU features, or the refused tile state of amx
            marks = pytest.mark.skip(reason=f"ISA level {level} not run: {isa.unavailable(level)}")
        out.append(pytest.param(level, marks=marks, id=level))
    return out


# The amx level changes the int8 GEMM family only (int8 CONV_2D / FULLY_CONNECTED / BATCH_MATMUL and their hybrid
# forms, kernels/linear/simd_amx.py); every other kernel runs avx512vnni's code there. To keep the suite's time, the
# level runs in these modules only, and there not for float, depthwise or INT4 cases (issue 35: a cold run of the
# level's share of test_simd_int8 + test_threads is ~4.5 minutes on the 2-vCPU Xeon; test_simd_amx compares the
# AMX path with the VNNI one case by case).
AMX_MODULES = {"test_simd_int8", "test_threads", "test_isa"}
AMX_SKIPPED_CASES = ("f32", "dw_", "int4", "uint8")


def amx_covers(request) -> bool:
    """Whether a test parametrized over the levels runs the amx one (AMX_MODULES, AMX_SKIPPED_CASES)."""
    if request.module.__name__.rsplit(".", 1)[-1] not in AMX_MODULES:
        return False
    return not any(k in request.node.name for k in AMX_SKIPPED_CASES)


@pytest.fixture(params=isa_params())
def isa_level(request, monkeypatch) -> str:
    """Every ISA level in turn (LITE_NUMBA_ISA set for the test's interpreters); amx only where it changes the
    kernels (amx_covers)."""
    if request.param == "amx" and not amx_covers(request):
        pytest.skip("ISA level amx runs avx512vnni's kernels here (conftest.AMX_MODULES)")
    monkeypatch.setenv("LITE_NUMBA_ISA", request.param)
    return request.param


@pytest.fixture(params=isa_params(exclude=("portable",)))
def simd_level(request) -> str:
    """Every level but portable, for the cross-path checks (this level's result against the portable one)."""
    return request.param


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def pytest_report_header(config):
    from lite_numba.kernels.base import isa

    supported = isa.supported_levels()
    skipped = [f"{lv} ({isa.unavailable(lv)})" for lv in isa.LEVELS if lv not in supported]
    return [
        f"lite-numba CPU: {_cpu_model()} ({platform.machine()}, {os.cpu_count()} CPUs); default ISA level "
        f"{isa.best_level()}, LITE_NUMBA_ISA={os.environ.get('LITE_NUMBA_ISA', '') or '(unset)'}",
        f"lite-numba ISA levels exercised: {', '.join(supported)}; not run here: {'; '.join(skipped) or 'none'}",
        f"lite-numba models: {MODELS} (+ {SHARED_MODELS if SHARED_MODELS.exists() else 'no ../shared/models'}); "
        f"CI={os.environ.get('CI', '')}; hypothesis profile {settings.get_current_profile_name()}",
    ]
