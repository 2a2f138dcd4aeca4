"""Benchmarks against the official runtime, same process, same inputs, interleaved; ratios printed at the end.

Run: pip install -e ".[bench]" && pytest bench -p no:cacheprovider   (see README)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL_DIRS = [ROOT / "tests" / "data" / "models", ROOT.parent / "shared" / "models"]
ROWS: list[dict] = []


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
    w(f"{'case':42s} {'ours µs':>10s} {'XNNPACK µs':>11s} {'builtin µs':>11s} {'/XNNPACK':>9s} {'/builtin':>9s}")
    for r in ROWS:
        if r.get("unit") == "s":
            w(f"{r['case']:42s} ours {r['ours']:.2f} s, official builtin {r['builtin']:.2f} s  {r.get('note', '')}")
            continue
        xr = r["ours"] / r["xnnpack"] if r.get("xnnpack") else float("nan")
        br = r["ours"] / r["builtin"] if r.get("builtin") else float("nan")
        w(f"{r['case']:42s} {r['ours']:10.1f} {r.get('xnnpack', float('nan')):11.1f} "
          f"{r.get('builtin', float('nan')):11.1f} {xr:9.2f} {br:9.2f}" + (f"  {r['note']}" if r.get("note") else ""))
