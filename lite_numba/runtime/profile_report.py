"""The profiler's report: statistics of repeated runs (`RunStats`), per-node records (`NodeRecord`) and the
`Profile` of a profiled run, printed as the official benchmark tool's tables ("Run Order", "Top by Computation
Time", "Summary by node type"), as CSV, JSON, a list of dicts or a self-contained HTML page with bar charts.
Pure formatting of measured numbers: runtime.profiling measures.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from ..ops import forwarded

__all__ = ["NodeRecord", "Profile", "RunStats", "format_stats_tables", "init_rows"]


# --- statistics printed like the official tools (tsl::Stat / StatWithPercentiles) ---------------------------------

def _g(x: float) -> str:
    """A double as C++ streams print it by default (6 significant digits)."""
    return f"{x:g}"


class RunStats:
    """Durations of repeated runs in microseconds, printed as the official benchmark tool prints them.

    Values keep their fraction (tiny models run in a few microseconds); `format()` prints them as the official tool
    does, in whole microseconds: `count=50 first=.. curr=.. min=.. max=.. avg=.. std=.. p5=.. median=.. p95=..`
    (population standard deviation, percentiles as the value at index n*p/100 of the sorted values).
    """

    def __init__(self, values: Iterable[float] = ()):
        self.values: list[float] = [float(v) for v in values]

    def add(self, us: float) -> None:
        self.values.append(float(us))

    @property
    def count(self) -> int:
        return len(self.values)

    @property
    def first(self) -> float:
        return self.values[0] if self.values else 0.0

    @property
    def newest(self) -> float:
        return self.values[-1] if self.values else 0.0

    @property
    def min(self) -> float:
        return min(self.values) if self.values else 0.0

    @property
    def max(self) -> float:
        return max(self.values) if self.values else 0.0

    @property
    def sum(self) -> float:
        return sum(self.values)

    @property
    def avg(self) -> float:
        return self.sum / len(self.values) if self.values else math.nan

    @property
    def std(self) -> float:
        if len(self.values) < 2:
            return 0.0
        return float(np.std(np.asarray(self.values)))

    def percentile(self, p: int) -> float:
        if not self.values:
            return 0.0
        s = sorted(self.values)
        return s[-1] if p >= 100 else s[len(s) * p // 100]

    @property
    def median(self) -> float:
        return self.percentile(50)

    def format(self, percentiles: bool = True) -> str:
        """The official `OutputToStream` text, computed like the official tool from whole microseconds (values
        rounded), so it is self-consistent; use the properties for the fractions."""
        whole = RunStats(round(v) for v in self.values)
        ints = [int(v) for v in whole.values]
        if not ints:
            text = "count=0"
        elif min(ints) == max(ints):
            text = f"count={len(ints)} curr={ints[-1]}" + ("(all same)" if len(ints) > 1 else "")
        else:
            text = (f"count={len(ints)} first={ints[0]} curr={ints[-1]} min={min(ints)} max={max(ints)} "
                    f"avg={_g(whole.avg)} std={int(whole.std)}")
        if percentiles and ints:
            text += (f" p5={int(whole.percentile(5))} median={int(whole.percentile(50))} "
                     f"p95={int(whole.percentile(95))}")
        return text

    def to_dict(self) -> dict:
        return {"count": self.count, "first_us": self.first, "min_us": self.min, "max_us": self.max,
                "avg_us": self.avg if self.values else None, "std_us": self.std, "median_us": self.median,
                "p5_us": self.percentile(5), "p95_us": self.percentile(95)}


class _Acc:
    """Streaming statistics of float samples (a profile may cover hundreds of thousands of runs)."""

    __slots__ = ("count", "first", "newest", "min", "max", "sum", "sumsq")

    def __init__(self):
        self.count = 0
        self.first = self.newest = self.sum = self.sumsq = 0.0
        self.min, self.max = math.inf, -math.inf

    def add(self, v: float) -> None:
        if self.count == 0:
            self.first = v
        self.newest = v
        self.count += 1
        self.sum += v
        self.sumsq += v * v
        self.min = min(self.min, v)
        self.max = max(self.max, v)

    @property
    def avg(self) -> float:
        return self.sum / self.count if self.count else 0.0

    @property
    def std(self) -> float:
        if self.count < 2:
            return 0.0
        return math.sqrt(max(self.sumsq / self.count - self.avg * self.avg, 0.0))


# --- records -----------------------------------------------------------------------------------------------------

@dataclass
class NodeRecord:
    """Timing of one node over the profiled runs (microseconds) plus what the node is."""

    index: int
    op_name: str
    version: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    input_shapes: tuple[tuple[int, ...] | None, ...]
    output_shapes: tuple[tuple[int, ...] | None, ...]
    input_dtypes: tuple[str | None, ...]
    output_dtypes: tuple[str | None, ...]
    name: str  # the official tool's node name: "[output tensor names]:node index"
    output_bytes: int = 0
    # the composite an inlined decomposition node came from ("odml.rms_norm@15", nested: "a@3/b@2"), else ""
    group: str = ""
    stats: _Acc = field(default_factory=_Acc, repr=False)

    count = forwarded("stats.count")
    first_us = forwarded("stats.first")
    avg_us = forwarded("stats.avg")

    @property
    def min_us(self) -> float:
        return self.stats.min if self.stats.count else 0.0

    @property
    def max_us(self) -> float:
        return self.stats.max if self.stats.count else 0.0

    std_us = forwarded("stats.std")
    total_us = forwarded("stats.sum")
    # what the official tables need (see format_stats_tables)
    node_type = forwarded("op_name")
    run_order = forwarded("index")
    mem_bytes = forwarded("output_bytes")

    def to_dict(self) -> dict:
        """Plain Python values (JSON-serialisable)."""
        return {
            "index": self.index, "op_name": self.op_name, "version": self.version, "name": self.name,
            "inputs": list(self.inputs), "outputs": list(self.outputs),
            "input_shapes": [list(s) if s is not None else None for s in self.input_shapes],
            "output_shapes": [list(s) if s is not None else None for s in self.output_shapes],
            "input_dtypes": list(self.input_dtypes), "output_dtypes": list(self.output_dtypes),
            "count": self.count, "first_us": self.first_us, "avg_us": self.avg_us, "min_us": self.min_us,
            "max_us": self.max_us, "std_us": self.std_us, "output_bytes": self.output_bytes, "group": self.group,
        }


@dataclass
class _Row:
    """A generic line of the official tables (used for initialization events)."""

    node_type: str
    name: str
    run_order: int
    first_us: float
    avg_us: float
    total_us: float
    count: int
    mem_bytes: int = 0


def _fmt_field(value: Any, width: int) -> str:
    text = f"{value:.3f}" if isinstance(value, float) else str(value)
    return "\t" + text.rjust(width)


def format_stats_tables(rows: list, num_runs: int, csv_format: bool = False, time_limit: int = 10,
                        run_totals: RunStats | None = None) -> str:
    """The official StatsCalculator report: "Run Order", "Top by Computation Time" (first `time_limit` rows),
    "Summary by node type", then the short summary ("Timings (microseconds): ...", "N nodes observed").

    `rows` have node_type, name, run_order, first_us, avg_us, total_us (sum over runs), count (calls over all runs)
    and mem_bytes. Times print in milliseconds with 3 decimals like the official tool (which rounds every node to
    whole microseconds; we keep the fraction, so sub-microsecond ops do not print as 0.000).
    """
    num_runs = max(num_runs, 1)
    grand = sum(r.total_us for r in rows) or 1.0
    out = io.StringIO()

    def header(title: str) -> None:
        out.write(f"============================== {title} ==============================\n")
        _column_titles(out, csv_format, "node type, first, avg_ms, %, cdf%, mem KB, times called, name\n",
                       (("[node type]", 24), ("[first]", 9), ("[avg ms]", 9), ("[%]", 8), ("[cdf%]", 8),
                        ("[mem KB]", 10), ("[times called]", 9)), "\t[Name]\n")

    def table(title: str, ordered: list) -> None:
        header(title)
        cum = 0.0
        for r in ordered:
            cum += r.total_us
            pct, cdf = r.total_us * 100.0 / grand, cum * 100.0 / grand
            called = r.count // num_runs
            if csv_format:
                name = r.name.replace(",", "\t")
                out.write(f"{r.node_type}, {r.first_us / 1e3:.6g}, {r.avg_us / 1e3:.6g}, {pct:.6g}%, {cdf:.6g}%, "
                          f"{r.mem_bytes / 1000.0:g}, {called}, {name}\n")
            else:
                out.write(_fmt_field(r.node_type, 24) + _fmt_field(r.first_us / 1e3, 9)
                          + _fmt_field(r.avg_us / 1e3, 9) + _fmt_field(pct, 7) + "%" + _fmt_field(cdf, 7) + "%"
                          + _fmt_field(r.mem_bytes / 1000.0, 10) + _fmt_field(called, 9) + "\t" + r.name + "\n")
        out.write("\n")

    table("Run Order", sorted(rows, key=lambda r: r.run_order))
    by_time = sorted(rows, key=lambda r: (-r.avg_us, r.run_order))
    table("Top by Computation Time", by_time[:time_limit] if time_limit > 0 else by_time)

    out.write(f"Number of nodes executed: {len(rows)}\n")
    out.write("============================== Summary by node type ==============================\n")
    types = _by_type(rows, num_runs)
    _column_titles(out, csv_format, "node type, count, avg_ms, avg %, cdf %, mem KB, times called\n",
                   (("[Node type]", 24), ("[count]", 9), ("[avg ms]", 10), ("[avg %]", 11), ("[cdf %]", 11),
                    ("[mem KB]", 10), ("[times called]", 10)), "\n")
    for t in types:
        if csv_format:
            out.write(f"{t['node_type']}, {t['count']}, {t['avg_ms']:.6g}, {t['percent']:.6g}%, {t['cdf']:.6g}%, "
                      f"{t['mem_bytes'] / 1000.0:g}, {t['times_called']}\n")
        else:
            out.write(_fmt_field(t["node_type"], 24) + _fmt_field(t["count"], 9) + _fmt_field(t["avg_ms"], 10)
                      + _fmt_field(t["percent"], 10) + "%" + _fmt_field(t["cdf"], 10) + "%"
                      + _fmt_field(t["mem_bytes"] / 1000.0, 10) + _fmt_field(t["times_called"], 9) + "\n")
    out.write("\n")
    if run_totals is not None:
        out.write(f"Timings (microseconds): {run_totals.format(percentiles=False)}\n")
        out.write("Memory (bytes): count=0\n")
        out.write(f"{len(rows)} nodes observed\n")
    return out.getvalue()


def _column_titles(out, csv_format: bool, csv_line: str, fields, tail: str) -> None:
    """A table's title line: `csv_line`, or the (title, width) `fields` padded as _fmt_field does, then `tail`."""
    out.write(csv_line if csv_format else "".join(_fmt_field(f, w) for f, w in fields) + tail)


def _by_type(rows: list, num_runs: int) -> list[dict]:
    """Per op type: node count, time per run, share, cumulative share, calls per run; largest time first."""
    acc: dict[str, dict] = {}
    for r in rows:
        t = acc.setdefault(r.node_type, {"node_type": r.node_type, "count": 0, "us": 0.0, "mem_bytes": 0,
                                         "times_called": 0})
        t["count"] += 1
        t["us"] += r.total_us / num_runs
        t["mem_bytes"] += r.mem_bytes
        t["times_called"] += r.count // num_runs
    total = sum(t["us"] for t in acc.values()) or 1.0
    out, cdf = [], 0.0
    for t in sorted(acc.values(), key=lambda t: (-t["us"], t["node_type"])):
        pct = t["us"] * 100.0 / total
        cdf += pct
        out.append({**t, "avg_ms": t["us"] / 1e3, "avg_us": t["us"], "percent": pct, "cdf": cdf})
    for t in out:
        del t["us"]
    return out


# --- the profile -------------------------------------------------------------------------------------------------

@dataclass
class Profile:
    """Per-node timings of `num_runs` profiled runs of one subgraph.

    `records` are in execution order. `run_totals` are the per-run sums of node times; `invoke` (when measured) the
    durations of ordinary compiled `invoke()` calls interleaved with the profiled runs, so `coverage` (median run
    total / median invoke time) shows the profiling overhead (1.0 = none).
    """

    records: list[NodeRecord]
    num_runs: int
    run_totals: RunStats
    invoke: RunStats | None = None
    title: str = ""

    @property
    def total_avg_us(self) -> float:
        """Sum of the nodes' average times (microseconds)."""
        return sum(r.avg_us for r in self.records)

    @property
    def invoke_avg_us(self) -> float | None:
        """Average unprofiled invoke() time (microseconds), if measured."""
        return self.invoke.avg if self.invoke is not None and self.invoke.count else None

    @property
    def coverage(self) -> float | None:
        """Median profiled-run total (sum of the node times of one run) over the median unprofiled invoke time:
        1.0 means the op times add up exactly; above 1 is the profiling overhead. Medians, because a busy machine
        adds outliers to both."""
        if self.invoke is None or not self.invoke.count or self.invoke.median <= 0:
            return None
        return self.run_totals.median / self.invoke.median

    @property
    def coverage_min(self) -> float | None:
        """Fastest profiled-run total over the fastest unprofiled invoke: the steadiest overhead estimate on a
        machine shared with other work."""
        if self.invoke is None or not self.invoke.count or self.invoke.min <= 0:
            return None
        return self.run_totals.min / self.invoke.min

    def by_type(self) -> list[dict]:
        """Summary by node type: node_type, count, avg_ms, avg_us, percent, cdf, mem_bytes, times_called."""
        return _by_type(self.records, self.num_runs)

    def by_composite(self) -> list[dict]:
        """The nodes inlined from each STABLEHLO_COMPOSITE decomposition, summed per composite (a nested one counts
        in its own row and in its outer composite's): composite ("odml.rms_norm@15": name @ node index in its
        caller, nested ones "outer@3/inner@2"), nodes, avg_us, percent (of the sum of node averages); in run order."""
        total = self.total_avg_us or 1.0
        acc: dict[str, dict] = {}
        for r in self.records:
            parts = r.group.split("/") if r.group else []
            for k in range(1, len(parts) + 1):
                key = "/".join(parts[:k])
                row = acc.setdefault(key, {"composite": key, "nodes": 0, "avg_us": 0.0})
                row["nodes"] += 1
                row["avg_us"] += r.avg_us
        return [{**row, "percent": row["avg_us"] * 100.0 / total} for row in acc.values()]

    def composite_table(self) -> str:
        """"Summary by composite" (by_composite) as text; empty when no node came from an inlined composite."""
        rows = self.by_composite()
        if not rows:
            return ""
        lines = ["============================== Summary by composite ==============================",
                 _fmt_field("[composite]", 40) + _fmt_field("[nodes]", 8) + _fmt_field("[avg ms]", 10)
                 + _fmt_field("[%]", 8)]
        for row in rows:
            lines.append(_fmt_field(row["composite"], 40) + _fmt_field(row["nodes"], 8)
                         + _fmt_field(row["avg_us"] / 1e3, 10) + _fmt_field(row["percent"], 7) + "%")
        return "\n".join(lines) + "\n\n"

    def to_dicts(self) -> list[dict]:
        """One dict per node (index, op_name, version, tensors, shapes, dtypes, timings in microseconds)."""
        total = self.total_avg_us or 1.0
        return [{**r.to_dict(), "percent": r.avg_us * 100.0 / total} for r in self.records]

    def to_csv(self) -> str:
        """One CSV row per node with a header line (shapes as 1x2x3, several tensors separated by ';')."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["index", "op_name", "version", "name", "inputs", "outputs", "input_shapes", "output_shapes",
                    "input_dtypes", "output_dtypes", "count", "first_us", "avg_us", "min_us", "max_us", "std_us",
                    "percent"])

        def shapes(ss) -> str:
            return ";".join(_shape_str(s) for s in ss)

        for d, r in zip(self.to_dicts(), self.records):
            w.writerow([r.index, r.op_name, r.version, r.name, ";".join(map(str, r.inputs)),
                        ";".join(map(str, r.outputs)), shapes(r.input_shapes), shapes(r.output_shapes),
                        ";".join(t or "-" for t in r.input_dtypes), ";".join(t or "-" for t in r.output_dtypes),
                        r.count, f"{r.first_us:.3f}", f"{r.avg_us:.3f}", f"{r.min_us:.3f}", f"{r.max_us:.3f}",
                        f"{r.std_us:.3f}", f"{d['percent']:.3f}"])
        return buf.getvalue()

    def to_table(self, csv_format: bool = False, time_limit: int = 10) -> str:
        """The official benchmark tool's three tables plus its short summary."""
        text = format_stats_tables(self.records, self.num_runs, csv_format=csv_format, time_limit=time_limit,
                                   run_totals=self.run_totals)
        return text + ("" if csv_format else self.composite_table())

    def summary(self) -> str:
        """One line: runs, sum of node averages, unprofiled invoke average and their ratio."""
        text = (f"{self.num_runs} profiled runs of {len(self.records)} nodes: sum of node averages "
                f"{self.total_avg_us:.1f} us, median run total {self.run_totals.median:.1f} us")
        if self.coverage is not None:
            text += (f"; unprofiled invoke() median {self.invoke.median:.1f} us (average {self.invoke.avg:.1f} us); "
                     f"op times / invoke time = {self.coverage:.3f} (medians), {self.coverage_min:.3f} (minimums)")
        return text

    def to_json_dict(self) -> dict:
        return {
            "title": self.title, "num_runs": self.num_runs, "total_avg_us": self.total_avg_us,
            "invoke": self.invoke.to_dict() if self.invoke is not None else None,
            "coverage": self.coverage, "coverage_min": self.coverage_min, "run_totals": self.run_totals.to_dict(),
            "nodes": self.to_dicts(), "by_type": self.by_type(), "by_composite": self.by_composite(),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_json_dict(), indent=indent)

    def to_html(self, title: str | None = None, extra: dict[str, str] | None = None) -> str:
        """A self-contained HTML page: summary, a bar chart (inline SVG) of every node's average time in run
        order, one of the time per op type, and the per-node table. `extra` adds key/value lines to the summary."""
        return _render_html(self, title or self.title or "lite-numba op profile", extra or {})

    def __str__(self) -> str:
        return self.to_table()


def _shape_str(shape) -> str:
    """1x2x3 for a shape, "scalar" for (), "-" for an absent optional tensor."""
    if shape is None:
        return "-"
    return "x".join(map(str, shape)) if len(shape) else "scalar"


# --- HTML ----------------------------------------------------------------------------------------------------------

_PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
            "#bab0ac", "#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#17becf"]


def _colors(types: list[str]) -> dict[str, str]:
    return {t: _PALETTE[k % len(_PALETTE)] for k, t in enumerate(types)}


def _svg_bars(items: list[tuple[str, float, str, str]], width: int = 900) -> str:
    """Horizontal bar chart: (label, value in us, color, tooltip) per bar."""
    bar_h, gap, label_w, value_w = 16, 4, 290, 110
    plot_w = width - label_w - value_w
    vmax = max((v for _, v, _, _ in items), default=0.0) or 1.0
    height = len(items) * (bar_h + gap) + gap
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="monospace" font-size="11">']
    for k, (label, value, color, tip) in enumerate(items):
        y = gap + k * (bar_h + gap)
        w = max(value / vmax * plot_w, 0.5)
        parts.append(
            f'<g><title>{html.escape(tip)}</title>'
            f'<text x="{label_w - 6}" y="{y + bar_h - 4}" text-anchor="end">{html.escape(label)}</text>'
            f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{color}"/>'
            f'<text x="{label_w + w + 4:.1f}" y="{y + bar_h - 4}">{value:.1f} us</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def _render_html(p: Profile, title: str, extra: dict[str, str]) -> str:
    types = [t["node_type"] for t in p.by_type()]
    color = _colors(types)
    node_bars = [(f"{r.index} {r.op_name}"[:40], r.avg_us, color[r.op_name],
                  f"node {r.index} {r.op_name} v{r.version} {r.name}: avg {r.avg_us:.2f} us, min {r.min_us:.2f} us, "
                  f"outputs {r.output_shapes}") for r in p.records]
    type_bars = [(f"{t['node_type']} x{t['count']}", t["avg_us"], color[t["node_type"]],
                  f"{t['node_type']}: {t['count']} nodes, {t['avg_us']:.2f} us per run, {t['percent']:.1f}%")
                 for t in p.by_type()]
    facts = {"profiled runs": str(p.num_runs), "nodes": str(len(p.records)),
             "sum of node averages": f"{p.total_avg_us:.1f} us"}
    if p.coverage is not None:
        facts["median profiled run total"] = f"{p.run_totals.median:.1f} us"
        facts["unprofiled invoke() median"] = f"{p.invoke.median:.1f} us"
        facts["op times / invoke time (medians)"] = f"{p.coverage:.3f}"
        facts["op times / invoke time (minimums)"] = f"{p.coverage_min:.3f}"
    facts.update(extra)
    rows = []
    for d in p.to_dicts():
        shapes_in = " ".join(_shape_str(s) for s in d["input_shapes"])
        shapes_out = " ".join(_shape_str(s) for s in d["output_shapes"])
        rows.append(
            f"<tr><td>{d['index']}</td><td>{html.escape(d['op_name'])}</td><td>{d['version']}</td>"
            f"<td>{html.escape(shapes_in)}</td><td>{html.escape(shapes_out)}</td>"
            f"<td>{html.escape(' '.join(t or '-' for t in d['output_dtypes']))}</td>"
            f"<td class=n>{d['avg_us']:.2f}</td><td class=n>{d['min_us']:.2f}</td><td class=n>{d['max_us']:.2f}</td>"
            f"<td class=n>{d['percent']:.1f}</td><td>{html.escape(d['name'])}</td></tr>")
    fact_rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in facts.items())
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }}
table {{ border-collapse: collapse; font-size: 12px; }}
td, th {{ border: 1px solid #ccc; padding: 2px 6px; text-align: left; }}
td.n {{ text-align: right; font-family: monospace; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<table>{fact_rows}</table>
<h2>Average time per node (run order)</h2>
{_svg_bars(node_bars)}
<h2>Time per op type</h2>
{_svg_bars(type_bars)}
<h2>Nodes</h2>
<table><tr><th>#</th><th>op</th><th>v</th><th>input shapes</th><th>output shapes</th><th>output dtypes</th>
<th>avg us</th><th>min us</th><th>max us</th><th>%</th><th>name</th></tr>
{"".join(rows)}
</table>
</body></html>
"""


def init_rows(events: list[tuple[str, str, float]]) -> list[_Row]:
    """Table rows for one-off initialization events (type, name, microseconds), as the official tool's
    "Profiling Info for Benchmark Initialization"."""
    return [_Row(node_type=kind, name=name, run_order=k, first_us=us, avg_us=us, total_us=us, count=1)
            for k, (kind, name, us) in enumerate(events)]
