"""Per-node profiling and tracing of a running model (the report's formats are runtime.profile_report's).

`profile_runtime(rt, num_runs)` (ModelRuntime.profile, Interpreter.profile) returns a `Profile`: one `NodeRecord`
per node with its op, version, tensors and timing statistics. A STABLEHLO_COMPOSITE run by a fused kernel shows as
"STABLEHLO_COMPOSITE odml.rms_norm"; the nodes of an inlined decomposition keep their ops and name the composite
they came from in `group` (Profile.by_composite() sums them per composite).

How nodes are timed: a profiled run calls every kernel from Python (`invoke_profiled`) on the same storage as the
compiled executor, reading a clock around each node. This adds the Python dispatch of each call (a fraction of a
microsecond per kernel call) to the node's time, so the per-node times of a model with many tiny nodes add up to
more than one compiled `invoke()`; `Profile.coverage` states the ratio measured in the same run.

With $LITE_NUMBA_TRACE set, `Interpreter.invoke()` runs `trace_runtime`, which prints every node as it runs (op,
version, time, and the shape, dtype and value range of each input and output) to stderr.
"""

from __future__ import annotations

import gc
import math
import sys
import time
from typing import Callable, Iterator, TextIO

import numpy as np

from .composites import composite_label
from .profile_report import NodeRecord, Profile, RunStats

__all__ = ["describe_values", "invoke_profiled", "iter_node_steps", "profile_runtime", "trace_runtime"]


def _shape_of(rt, i: int) -> tuple[int, ...] | None:
    return tuple(rt.tensors[i].shape) if i >= 0 else None


def _dtype_of(rt, i: int) -> str | None:
    return rt.tensors[i].spec.type_name if i >= 0 and rt.tensors[i].spec is not None else None


def _records_for(rt) -> list[NodeRecord]:
    recs = []
    for node in rt.plan.nodes:
        names = [rt.tensors[o].name if o >= 0 else "" for o in node.outputs]
        out_bytes = sum(rt.tensors[o].nbytes for o in node.outputs if o >= 0 and rt.tensors[o].dtype.kind != "O")
        recs.append(NodeRecord(
            index=node.index, op_name=composite_label(node), version=node.version,
            inputs=tuple(node.inputs), outputs=tuple(node.outputs),
            input_shapes=tuple(_shape_of(rt, i) for i in node.inputs),
            output_shapes=tuple(_shape_of(rt, o) for o in node.outputs),
            input_dtypes=tuple(_dtype_of(rt, i) for i in node.inputs),
            output_dtypes=tuple(_dtype_of(rt, o) for o in node.outputs),
            name=f"[{', '.join(names)}]:{node.index}", output_bytes=int(out_bytes), group=node.origin))
    return recs


def profile_runtime(rt, num_runs: int = 10, warmup_runs: int = 1, *, min_secs: float = 0.0,
                    max_secs: float = math.inf, measure_invoke: bool = True, title: str = "") -> Profile:
    """Profile a prepared `GraphRuntime`: warm up, then run at least `num_runs` times (and at least `min_secs`
    seconds, stopping after `max_secs`), timing every node; with `measure_invoke` an ordinary compiled invoke()
    is timed before each profiled run. Inputs must already be set; they are not changed. Every run is a real
    invoke, so a model with variables advances its state (as with the official benchmark tool)."""
    if not rt.ready:
        raise RuntimeError("Invoke called on model that is not ready.")
    if int(num_runs) < 1:
        raise ValueError(f"num_runs must be >= 1, got {num_runs}")
    if int(warmup_runs) < 0:
        raise ValueError(f"warmup_runs must be >= 0, got {warmup_runs}")
    for _ in range(int(warmup_runs)):
        rt.invoke()
        invoke_profiled(rt)
    records = _records_for(rt)
    by_index = {r.index: r for r in records}
    totals, invokes = RunStats(), RunStats() if measure_invoke else None
    clock = time.perf_counter_ns
    start = clock()
    min_end, max_end = start + min_secs * 1e9, start + max_secs * 1e9
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a collection inside a timed node would be charged to that node
    try:
        run, now = 0, start
        while (run < num_runs or now < min_end) and now <= max_end:
            if invokes is not None:
                t0 = clock()
                rt.invoke()
                invokes.add((clock() - t0) / 1e3)
            times = invoke_profiled(rt)
            total = 0
            for ni, ns in times.items():
                by_index[ni].stats.add(ns / 1e3)
                total += ns
            totals.add(total / 1e3)
            run += 1
            now = clock()
    finally:
        if gc_was_enabled:
            gc.enable()
    # shapes may have changed in dynamic nodes during the runs
    for r in records:
        node = rt.plan.nodes[r.index]
        r.input_shapes = tuple(_shape_of(rt, i) for i in node.inputs)
        r.output_shapes = tuple(_shape_of(rt, o) for o in node.outputs)
    return Profile(records=records, num_runs=totals.count, run_totals=totals, invoke=invokes, title=title)


def invoke_profiled(rt, on_node: Callable[[int], None] | None = None) -> dict[int, int]:
    """Invoke a prepared GraphRuntime once calling each kernel from Python, timing every node: {node index:
    nanoseconds}. `on_node(node_index)` is called after each node has run. Results equal `invoke()`'s: the same
    compiled kernels run on the same storage; only the dispatch between them differs."""
    return rt.invoke_with(lambda g: _run_timed(g, on_node))


def _run_timed(rt, on_node) -> dict[int, int]:
    clock = time.perf_counter_ns
    times: dict[int, int] = {}
    for kind, step in rt.steps:
        if kind == "segment":
            by_node: dict[int, list] = {}
            for fn, args, ni in step.py_calls:
                by_node.setdefault(ni, []).append((fn, args))
            for ni in step.nodes:  # node by node, so on_node sees each node's outputs before the next runs
                t0 = clock()
                for fn, args in by_node.get(ni, ()):
                    fn(*args)
                times[ni] = times.get(ni, 0) + clock() - t0
                if on_node is not None:
                    on_node(ni)
        else:
            t0 = clock()
            rt.run_dynamic(step)
            times[step] = clock() - t0
            if on_node is not None:
                on_node(step)
    return times


# --- tracing -----------------------------------------------------------------------------------------------------

def iter_node_steps(rt) -> Iterator[tuple[int, Callable[[], None]]]:
    """(node index, run) for every node of a prepared runtime in execution order; run() executes that node only
    (its scheduled kernel calls, or the dynamic/host path). Nodes that scheduled no call get a no-op."""
    for kind, step in rt.steps:
        if kind == "segment":
            calls: dict[int, list] = {}
            for fn, args, ni in step.py_calls:
                calls.setdefault(ni, []).append((fn, args))
            for ni in step.nodes:
                yield ni, _call_all(calls.get(ni, []))
        else:
            yield step, (lambda ni=step: rt.run_dynamic(ni))


def _call_all(calls: list) -> Callable[[], None]:
    def run() -> None:
        for fn, args in calls:
            fn(*args)

    return run


def describe_values(arr: np.ndarray, spec=None) -> str:
    """A short value summary: min/max (and mean for floats), NaN/Inf counts, and the real range of a quantized
    tensor."""
    if arr.dtype.kind not in "biufc":
        return ""
    if arr.size == 0:
        return "empty"
    if arr.dtype.kind == "c":
        mags = np.abs(arr)
        return f"|min|={float(mags.min()):.6g} |max|={float(mags.max()):.6g}"
    if arr.dtype.kind == "f":
        finite = np.isfinite(arr)
        n_nan = int(np.count_nonzero(np.isnan(arr)))
        n_inf = int(arr.size - np.count_nonzero(finite) - n_nan)
        vals = arr[finite]
        text = (f"min={float(vals.min()):.6g} max={float(vals.max()):.6g} mean={float(vals.mean()):.6g}"
                if vals.size else "no finite values")
        if n_nan:
            text += f" nan={n_nan}"
        if n_inf:
            text += f" inf={n_inf}"
        return text
    lo, hi = int(arr.min()), int(arr.max())
    text = f"min={lo} max={hi}"
    q = getattr(spec, "quantization", None)
    if q is not None and q.scales.size == 1 and float(q.scales[0]) != 0.0:
        s, z = float(q.scales[0]), int(q.zero_points[0])
        text += f" real=[{s * (lo - z):.6g}, {s * (hi - z):.6g}] (scale={s:.6g}, zp={z})"
    elif q is not None and q.scales.size > 1:
        text += f" (per-channel, {q.scales.size} scales)"
    return text


def _tensor_line(rt, role: str, k: int, i: int) -> str:
    if i < 0:
        return f"    {role}[{k}] (absent)"
    t = rt.tensors[i]
    tname = t.spec.type_name if t.spec is not None else t.dtype.name
    const = " const" if t.is_const else ""
    if tname in ("RESOURCE", "VARIANT", "STRING"):
        values = ""  # handles and strings have no numeric range
    else:
        try:
            values = describe_values(np.asarray(rt.array(i)), t.spec)
        except (ValueError, KeyError):
            values = "(no data)"
    return f"    {role}[{k}] #{i} {t.name!r} {tname}{list(t.shape)}{const} {values}".rstrip()


def trace_runtime(rt, file: TextIO | None = None) -> None:
    """Run a prepared GraphRuntime once node by node, printing each node (index, op, version, time) with its inputs
    before and its outputs after it ran. Results equal `invoke()`'s: the same kernels run on the same storage."""
    if not rt.ready:
        raise RuntimeError("Invoke called on model that is not ready.")
    out = file if file is not None else sys.stderr
    nodes = rt.plan.nodes
    print(f"[lite-numba trace] invoke: subgraph {rt.subgraph_index}, {len(nodes)} nodes", file=out)
    clock = time.perf_counter_ns
    for ni, run in iter_node_steps(rt):
        node = nodes[ni]
        ins = [_tensor_line(rt, "in", k, i) for k, i in enumerate(node.inputs)]
        t0 = clock()
        run()
        dt = (clock() - t0) / 1e3
        kind = "custom " if node.is_custom else ""
        origin = f"  (in {node.origin})" if node.origin else ""
        print(f"[lite-numba trace] node {ni} {kind}{composite_label(node)} v{node.version}  {dt:.1f} us{origin}",
              file=out)
        for line in ins:
            print(line, file=out)
        for k, o in enumerate(node.outputs):
            print(_tensor_line(rt, "out", k, o), file=out)
    out.flush()
