"""Benchmarks against the official runtime, same process, same inputs, interleaved; ratios printed at the end.

Run: pip install -e ".[bench]" && pytest bench -p no:cacheprovider   (see README)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL_DIRS = [ROOT / "tests" / "data" / "models", ROOT.parent / "shared" / "models"]
ROWS: list[dict] = []


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
    from lite_numba.kernels import isa

    return isa.isa_level()


def find_model(name: str) -> Path | None:
    for d in MODEL_DIRS:
        p = d / f"{name}.tflite"
        if p.exists():
            return p
    return None


def pytest_terminal_summary(terminalreporter):
    if not ROWS:
        return
    w = terminalreporter.write_line
    w("")
    w("lite-numba vs the official runtime (1 thread unless the case says otherwise; medians of interleaved rounds; "
      "ratio < 1 = we are faster)")
    path = isa_path()
    w(f"CPU: {cpu_name()}; lite-numba kernel path (LITE_NUMBA_ISA): {path}")
    w(f"{'case':42s} {'path':>10s} {'ours µs':>10s} {'XNNPACK µs':>11s} {'builtin µs':>11s} {'/XNNPACK':>9s} "
      f"{'/builtin':>9s}")
    for r in ROWS:
        if r.get("unit") == "rate":  # a kernel's throughput (bench/test_kernels.py)
            w(f"{r['case']:42s} {r['path']:>10s} median {r['ours']:.1f}  {r.get('note', '')}")
            continue
        if r.get("unit") == "s":
            w(f"{r['case']:42s} {r.get('path', path):>10s} ours {r['ours']:.2f} s, official builtin "
              f"{r['builtin']:.2f} s  {r.get('note', '')}")
            continue
        xr = r["ours"] / r["xnnpack"] if r.get("xnnpack") else float("nan")
        br = r["ours"] / r["builtin"] if r.get("builtin") else float("nan")
        w(f"{r['case']:42s} {r.get('path', path):>10s} {r['ours']:10.1f} {r.get('xnnpack', float('nan')):11.1f} "
          f"{r.get('builtin', float('nan')):11.1f} {xr:9.2f} {br:9.2f}" + (f"  {r['note']}" if r.get("note") else ""))
