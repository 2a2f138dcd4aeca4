"""Benchmarks against the official runtime, same process, same inputs, interleaved; ratios printed at the end.

Run: pip install -e ".[bench]" && pytest bench -p no:cacheprovider   (see README).

Light mode (``pytest bench --bench-light``, or LITE_NUMBA_BENCH_LIGHT=1), what CI runs after the tests: every case
runs a few interleaved rounds only, its outputs are checked against the official builtin kernels (the parity
tests' lite_numba.testing.assert_close), the ratios are printed, pytest-benchmark's own timing loop is off and the
start-up cases (a cold compile of everything) are skipped. No case asserts on time, in either mode."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODEL_DIRS = [ROOT / "tests" / "data" / "models", ROOT.parent / "shared" / "models"]
# real models the bench names but the repository does not carry (scripts/fetch_bench_models.py puts them here)
FETCHED_DIR = Path(os.environ.get("LITE_NUMBA_BENCH_MODELS") or Path.home() / ".cache" / "lite-numba" / "bench-models")
ROWS: list[dict] = []
LIGHT = {"on": False}
OFFICIAL_ISA: dict = {}


def pytest_addoption(parser):
    parser.addoption("--bench-light", action="store_true", default=False,
                     help="a few interleaved rounds per case, outputs checked against the official runtime, "
                          "ratios printed (CI)")


def official_level() -> str | None:
    """The x86 level the official runtime's XNNPACK and ruy are restricted to (bench/official_isa.py), or None.
    LITE_NUMBA_BENCH_OFFICIAL_ISA=avx2|avxvnni|native chooses; unset, it follows LITE_NUMBA_ISA when that forces
    avx2 or avxvnni, so both sides of a ratio run the same instruction set."""
    want = (os.environ.get("LITE_NUMBA_BENCH_OFFICIAL_ISA") or "").strip().lower()
    if want == "native":
        return None
    if not want:
        want = (os.environ.get("LITE_NUMBA_ISA") or "").strip().lower()
    return want if want in ("avx2", "avxvnni") else None


def pytest_configure(config):
    LIGHT["on"] = bool(config.getoption("--bench-light") or os.environ.get("LITE_NUMBA_BENCH_LIGHT"))
    if LIGHT["on"]:
        config.option.benchmark_disable = True  # benchmark(fn) then calls fn once
    level = official_level()
    if level:
        import official_isa

        try:
            OFFICIAL_ISA["note"] = official_isa.restrict(level)
        except (RuntimeError, OSError) as e:  # a wheel without the symbols, or another layout: no silent mismatch
            raise pytest.UsageError(f"cannot restrict the official runtime to {level} ({e}); set "
                                    "LITE_NUMBA_BENCH_OFFICIAL_ISA=native to compare with its native kernels") from e


def light() -> bool:
    """True in the light (CI) mode."""
    return LIGHT["on"]


def rounds(full: int) -> int:
    """Interleaved rounds of a case: `full`, or 3 in light mode."""
    return 3 if light() else full


def check_outputs(case: str, ours, theirs, family: str) -> None:
    """Assert our outputs equal the official interpreter's (after both invoked on the same inputs)."""
    from lite_numba.testing import assert_close

    od, td = ours.get_output_details(), theirs.get_output_details()
    assert len(od) == len(td), f"{case}: {len(od)} outputs vs {len(td)}"
    for k, (a, b) in enumerate(zip(od, td)):
        assert_close(ours.get_tensor(a["index"]), theirs.get_tensor(b["index"]), family=family,
                     what=f"{case} output {k}")


@pytest.fixture(autouse=True)
def _skip_startup_in_light_mode(request):
    if light() and request.node.module.__name__.endswith("test_startup"):
        pytest.skip("start-up cases (cold compile of everything) are not run in --bench-light mode")


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_name() -> str:
    """The CPU's model name (and family, which names the generation where the model name does not)."""
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            k, _, v = line.partition(":")
            info.setdefault(k.strip(), v.strip())
    except OSError:
        import platform

        return platform.processor() or platform.machine()
    fam = f" (family {info['cpu family']}, model {info.get('model', '?')})" if "cpu family" in info else ""
    return info.get("model name", "unknown CPU") + fam


def isa_path() -> str:
    """The kernel path in force (kernels/isa.py: the best the CPU has, or LITE_NUMBA_ISA)."""
    from lite_numba.kernels.base import isa

    return isa.isa_level()


def find_model(name: str) -> Path | None:
    for d in [*MODEL_DIRS, ROOT / "tests" / "data" / "real", FETCHED_DIR]:
        p = d / f"{name}.tflite"
        if p.exists():
            return p
    return None


def pytest_terminal_summary(terminalreporter):
    if not ROWS:
        return
    from lite_numba.kernels.base import isa

    w = terminalreporter.write_line
    w("")
    w(f"CPU: {_cpu()}; kernel path (LITE_NUMBA_ISA) {isa.isa_level()}; "
      f"{'light mode: 3 rounds, outputs checked' if light() else 'full mode'}")
    w("lite-numba vs the official runtime (1 thread unless the case says otherwise; medians of interleaved rounds; "
      "ratio < 1 = we are faster)")
    path = isa_path()
    w(f"CPU: {cpu_name()}; lite-numba kernel path (LITE_NUMBA_ISA): {isa.describe()}")
    if OFFICIAL_ISA:
        import official_isa

        w(official_isa.verify())
    if os.environ.get("NUMBA_CPU_NAME") or os.environ.get("NUMBA_CPU_FEATURES"):
        w(f"lite-numba code generation: NUMBA_CPU_NAME={os.environ.get('NUMBA_CPU_NAME', '')!r}, "
          f"NUMBA_CPU_FEATURES {'set' if os.environ.get('NUMBA_CPU_FEATURES') else 'unset'}")
    w(f"{'case':42s} {'path':>10s} {'ours µs':>10s} {'XNNPACK µs':>11s} {'builtin µs':>11s} {'/XNNPACK':>9s} "
      f"{'/builtin':>9s}")
    for r in ROWS:
        if r.get("unit") == "rate":  # a kernel's throughput (bench/test_kernels.py)
            w(f"{r['case']:42s} {r['path']:>10s} median {r['ours']:.1f}  {r.get('note', '')}")
            continue
        if r.get("unit") == "text":  # a measured statement (bench/test_scaleout.py)
            w(f"{r['case']:42s} {r['note']}")
            continue
        if r.get("unit") == "s":
            w(f"{r['case']:42s} {r.get('path', path):>10s} ours {r['ours']:.2f} s, official builtin "
              f"{r['builtin']:.2f} s  {r.get('note', '')}")
            continue
        if "openvino" in r:  # the OpenVINO peer's rows (bench/test_openvino.py)
            w(f"{r['case']:42s} {r.get('path', path):>10s} {r['ours']:10.1f} {r['xnnpack']:11.1f} OpenVINO "
              f"{r['openvino']:.1f}, ours / XNNPACK {r['ours'] / r['xnnpack']:.2f}, ours / OpenVINO "
              f"{r['ours'] / r['openvino']:.2f}  {r.get('note', '')}")
            continue
        xr = r["ours"] / r["xnnpack"] if r.get("xnnpack") else float("nan")
        br = r["ours"] / r["builtin"] if r.get("builtin") else float("nan")
        w(f"{r['case']:42s} {r.get('path', path):>10s} {r['ours']:10.1f} {r.get('xnnpack', float('nan')):11.1f} "
          f"{r.get('builtin', float('nan')):11.1f} {xr:9.2f} {br:9.2f}" + (f"  {r['note']}" if r.get("note") else ""))
