"""`lite-numba benchmark` (or `python -m lite_numba.tools.benchmark`): the official `benchmark_model` tool.

    lite-numba benchmark --graph model.tflite [--num_runs 50] [--enable_op_profiling]
                         [--op_profiling_output_mode stdout|csv|json|html] [--compare_official] ...
    lite-numba benchmark --model model.tflite [litert-benchmark flags]     (lite_numba.tools.litert_benchmark)
    lite-numba benchmark --graph llm.tflite [--prefill_tokens N] [--decode_tokens M]   (tools.llm_benchmark)

Flags follow the official tool (`--flag value` or `--flag=value`; booleans accept a bare `--flag` or `=true/false`),
and so does the output: parameters, model size, init time, warm-up and regular run statistics in microseconds
("count= first= curr= min= max= avg= std= p5= median= p95="), the "Inference timings in us" line, memory
footprint, and with --enable_op_profiling the "Run Order", "Top by Computation Time" and "Summary by node type"
tables. Differences, on purpose:

- Init includes lite-numba's compilation (first run of a model) or loading it from the on-disk cache.
- Op profiling runs separately from the timed runs (a profiled run dispatches each kernel from Python; the timed
  runs stay the real compiled invoke), and reports how the op times add up against an unprofiled invoke.
- Output modes are stdout, csv (the official CSV tables), json and html (self-contained page with a bar chart);
  the official "proto" mode is not offered. "mem KB" per node is the size of the node's outputs.
- --compare_official runs the same model in the official runtime (ai_edge_litert) in this process on the same
  inputs: its builtin kernels (BUILTIN_WITHOUT_DEFAULT_DELEGATES) and its default XNNPACK delegate.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, TextIO

import numpy as np

from ..api.interpreter import Interpreter
from ..runtime.profile_report import RunStats, format_stats_tables, init_rows
from ..runtime.resolver import kernel_path
from .litert_benchmark import is_litert_command_line
from .litert_benchmark import main as litert_main
from .llm_benchmark import is_llm_command_line
from .llm_benchmark import main as llm_main

OUTPUT_MODES = ("stdout", "csv", "json", "html")


class BenchmarkError(Exception):
    """A user error (bad flag, missing file, model that cannot run): printed as "ERROR: ..." with exit code 1."""


def _parse_bool(text: str) -> bool:
    t = str(text).strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


# (flag, type, default, help, label printed in the parameter log). Booleans take an optional value.
_FLAGS: list[tuple[str, Any, Any, str, str]] = [
    ("graph", str, "", "the .tflite model file", "Graph"),
    ("num_runs", int, 50, "expected number of runs, see also min_secs, max_secs", "Min num runs"),
    ("min_secs", float, 1.0, "minimum number of seconds to rerun for, potentially making the actual number of runs "
     "greater than num_runs", "Min runs duration (seconds)"),
    ("max_secs", float, 150.0, "maximum number of seconds to rerun for, potentially making the actual number of runs "
     "less than num_runs", "Max runs duration (seconds)"),
    ("num_threads", int, -1, "number of threads (-1: the runtime's default, one thread)", "Num threads"),
    ("warmup_runs", int, 1, "minimum number of runs performed on initialization, see also warmup_min_secs",
     "Min warmup runs"),
    ("warmup_min_secs", float, 0.5, "minimum number of seconds to rerun the warm-up for", "Min warmup runs duration "
     "(seconds)"),
    ("verbose", bool, False, "log every parameter, not only those set", "Verbose"),
    ("report_peak_memory_footprint", bool, False, "report the peak memory footprint by periodically checking it "
     "(a thread samples the resident set size)", "Report the peak memory footprint"),
    ("memory_footprint_check_interval_ms", int, 50, "interval between two memory footprint checks",
     "Memory footprint check interval (ms)"),
    ("signature_to_run_for", str, "", "the signature to benchmark (required when the model has several)",
     "Signature to run"),
    ("input_layer", str, "", "input layer names, comma separated", "Input layers"),
    ("input_layer_shape", str, "", "input shapes, ':' between layers, e.g. 1,224,224,3:1,20", "Input shapes"),
    ("input_layer_value_range", str, "", "value range of integer inputs: name,low,high[:name2,low,high] "
     "(inclusive)", "Input value ranges"),
    ("input_layer_value_files", str, "", "input values from files: name:path[,name2:path2] (raw bytes of the exact "
     "size, or a .npy file); escape ':' in names as '::'", "Input value files"),
    ("enable_op_profiling", bool, False, "profile every op", "Enable op profiling"),
    ("op_profiling_output_mode", str, "stdout", "op profiling output: stdout, csv, json or html",
     "Op profiling output mode."),
    ("op_profiling_output_file", str, "", "write the op profiling output to this file (html: default "
     "<model>_op_profile.html)", "Op profiling output file."),
    ("compare_official", bool, False, "also run the model in the official runtime (ai_edge_litert): builtin "
     "kernels and XNNPACK, same process, same inputs; print both and the ratios", "Compare with the official runtime"),
]
_DEFAULTS = {name: default for name, _, default, _, _ in _FLAGS}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `lite-numba benchmark`."""
    ap = argparse.ArgumentParser(prog="lite-numba benchmark", description="Benchmark a .tflite model with lite-numba "
                                 "(the flags of the official benchmark_model tool).")
    for name, typ, default, help_text, _ in _FLAGS:
        if typ is bool:
            ap.add_argument(f"--{name}", type=_parse_bool, nargs="?", const=True, default=default, help=help_text)
        else:
            ap.add_argument(f"--{name}", type=typ, default=default, help=f"{help_text} (default {default!r})")
    return ap


# --- input layers ------------------------------------------------------------------------------------------------

@dataclass
class InputLayerInfo:
    """What the flags say about one input: its name, shape, value range and value file."""

    name: str
    shape: tuple[int, ...] | None = None
    low: float | None = None
    high: float | None = None
    file: str | None = None


def _split(text: str, sep: str) -> list[str]:
    return text.split(sep) if text else []


def _split_name_file(item: str) -> tuple[str, str]:
    """'name:path' with '::' standing for a literal ':' (the official syntax)."""
    delim = -1
    i = 0
    while i < len(item) - 1:
        if item[i] == ":":
            if item[i + 1] == ":":
                i += 2
                continue
            if delim != -1:
                raise BenchmarkError(f"{item} contains more than one delimiter.")
            delim = i
        i += 1
    if delim == -1:
        raise BenchmarkError(f"{item} doesn't contain any delimiter.")
    return item[:delim].replace("::", ":"), item[delim + 1:].replace("::", ":")


def parse_input_layers(names: str, shapes: str, ranges: str, files: str) -> list[InputLayerInfo]:
    """Parse --input_layer, --input_layer_shape, --input_layer_value_range and --input_layer_value_files.

    Ranges and files may also name model inputs that --input_layer does not list."""
    name_list, shape_list = _split(names, ","), _split(shapes, ":")
    if shape_list and len(name_list) != len(shape_list):
        raise BenchmarkError(
            f"The number of items in --input_layer_shape ({shapes}, with {len(shape_list)} items) must match the "
            f"number of items in --input_layer ({names}, with {len(name_list)} items). For example "
            f"--input_layer=input1,input2 --input_layer_shape=1,224,224,4:1,20")
    infos = [InputLayerInfo(n) for n in name_list]
    for info, text in zip(infos, shape_list):
        try:
            info.shape = tuple(int(d) for d in text.split(",")) if text else ()
        except ValueError:
            raise BenchmarkError(f"Incorrect size string specified: {text}") from None
        if any(d < 0 for d in info.shape):
            raise BenchmarkError("Any unknown sizes in the shapes (-1's) must be replaced with the size you want to "
                                 "benchmark with.")

    def info_for(name: str) -> InputLayerInfo:
        for info in infos:
            if info.name == name:
                return info
        infos.append(InputLayerInfo(name))
        return infos[-1]

    for item in _split(ranges, ":"):
        parts = item.split(",")
        if len(parts) != 3:
            raise BenchmarkError(f"Wrong input value range item specified: {item}")
        try:
            low, high = int(parts[1]), int(parts[2])
        except ValueError:
            low = high = None
        if low is None or low > high:
            raise BenchmarkError(f"Wrong low and high value of the input value range specified: {item}")
        info = info_for(parts[0])
        info.low, info.high = low, high
    for item in _split(files, ","):
        name, path = _split_name_file(item)
        info_for(name).file = path
    return infos


_DEFAULT_RANGES = {"f": (-0.5, 0.5), "c": (-0.5, 0.5), "b": (0, 1)}
_INT_RANGES = {np.dtype(np.uint8): (0, 254), np.dtype(np.int8): (-127, 127)}


def random_input(dtype: np.dtype, shape: tuple[int, ...], rng: np.random.Generator,
                 low: float | None = None, high: float | None = None) -> np.ndarray:
    """Random values as the official tool makes them: floats uniform in [-0.5, 0.5), int8 in [-127, 127], uint8
    in [0, 254], other integers in [0, 99], bools 0/1; `low`/`high` (inclusive) override the range."""
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        lo, hi = (low, high) if low is not None else _DEFAULT_RANGES["f"]
        real = rng.uniform(lo, hi, size=shape)
        if dtype.kind == "c":
            return (real + 1j * rng.uniform(lo, hi, size=shape)).astype(dtype)
        return real.astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype.kind in "iu":
        lo, hi = (low, high) if low is not None else _INT_RANGES.get(dtype, (0, 99))
        return rng.integers(int(lo), int(hi), size=shape, endpoint=True).astype(dtype)
    raise BenchmarkError(f"Don't know how to populate an input of type {dtype}")


def load_input_file(path: str, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """An input's values from a .npy file (dtype and shape must match) or a raw binary file of the exact size."""
    if not os.path.exists(path):
        raise BenchmarkError(f"Failed to read the input_layer_value_file:{path}")
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    if path.endswith(".npy"):
        arr = np.load(path, allow_pickle=False)
        if arr.dtype != dtype or tuple(arr.shape) != tuple(shape):
            raise BenchmarkError(f"{path} holds {arr.dtype}{list(arr.shape)}; the input needs "
                                 f"{np.dtype(dtype)}{list(shape)}")
        return np.ascontiguousarray(arr)
    size = os.path.getsize(path)
    if size != nbytes:
        raise BenchmarkError(f"The size of {path} is {size} bytes. It should be {nbytes} bytes.")
    return np.fromfile(path, dtype=dtype).reshape(shape)


# --- runners -----------------------------------------------------------------------------------------------------

class OurRunner:
    """lite-numba on subgraph 0, or on a signature's subgraph."""

    label = "lite-numba"

    def __init__(self, graph: str, num_threads: int, signature: str):
        self.interp = Interpreter(model_path=graph, num_threads=num_threads)
        self.rt = self.interp.runtime
        sigs = self.interp.model.signatures
        self.signature = _choose_signature([s.key for s in sigs], signature)
        if self.signature:
            sig = next(s for s in sigs if s.key == self.signature)
            self.subgraph = sig.subgraph_index
            self.inputs = list(sig.inputs.items())
            self.outputs = list(sig.outputs.items())
        else:
            self.subgraph = 0
            sg = self.interp.model.subgraphs[0]
            self.inputs = [(sg.tensors[i].name, i) for i in sg.inputs]
            self.outputs = [(sg.tensors[i].name, i) for i in sg.outputs]

    def input_specs(self) -> list[tuple[str, np.dtype, tuple[int, ...]]]:
        tensors = [self.rt.tensor(i, self.subgraph) for _, i in self.inputs]
        return [(name, t.dtype, tuple(t.shape)) for (name, _), t in zip(self.inputs, tensors)]

    def resize(self, k: int, shape: tuple[int, ...]) -> None:
        self.rt.resize_input(self.inputs[k][1], shape, False, self.subgraph)

    def allocate(self) -> None:
        self.rt.allocate(self.subgraph)

    def set_inputs(self, arrays: list[np.ndarray]) -> None:
        for (_, i), a in zip(self.inputs, arrays):
            self.rt.set_tensor(i, a, self.subgraph)

    def invoke(self) -> None:
        self.rt.invoke(self.subgraph)

    def get_outputs(self) -> list[np.ndarray]:
        return [self.rt.get_tensor(i, self.subgraph) for _, i in self.outputs]

    @property
    def arena_size(self) -> int:
        return self.rt.graph(self.subgraph).arena_size


def _choose_signature(keys: list[str], wanted: str) -> str:
    """The official rule: a named signature must exist; several signatures require a name; with one or none, run
    the primary subgraph."""
    if wanted:
        if not keys:
            raise BenchmarkError("Signature key is specified, but the model does not have any signatures.")
        if wanted not in keys:
            raise BenchmarkError('Signature not specified or incorrect. Pass one of the following to the flag '
                                 '"--signature_to_run_for"\n' + "\n".join(f" #> Signature key: {k}" for k in keys))
        return wanted
    if len(keys) > 1:
        raise BenchmarkError('Signature not specified or incorrect. Pass one of the following to the flag '
                             '"--signature_to_run_for"\n' + "\n".join(f" #> Signature key: {k}" for k in keys))
    return ""


class OfficialRunner:
    """The official runtime (ai_edge_litert) on the same model, flags and inputs."""

    def __init__(self, graph: str, num_threads: int, signature: str, builtin: bool):
        from ai_edge_litert import interpreter as lit

        kwargs: dict[str, Any] = {"model_path": graph, "num_threads": num_threads}
        if builtin:
            kwargs["experimental_op_resolver_type"] = lit.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        self.label = "official builtin kernels" if builtin else "official XNNPACK (default)"
        self.interp = lit.Interpreter(**kwargs)
        self.signature = signature
        self._sig_runner = None
        if signature:
            self._sig_runner = self.interp.get_signature_runner(signature)
            d = self._sig_runner.get_input_details()
            self.inputs = [(name, d[name]) for name in d]
            self._sig_outputs = list(self._sig_runner.get_output_details())
        else:
            self.inputs = [(d["name"], d) for d in self.interp.get_input_details()]
        self._values: dict[str, np.ndarray] = {}
        self._invoke: Callable[[], Any] = self.interp.invoke

    def input_specs(self) -> list[tuple[str, np.dtype, tuple[int, ...]]]:
        return [(name, np.dtype(d["dtype"]), tuple(int(x) for x in d["shape"])) for name, d in self.inputs]

    def resize(self, k: int, shape: tuple[int, ...]) -> None:
        # with a signature, __call__ resizes to the shapes of the values given
        if not self.signature:
            self.interp.resize_tensor_input(self.inputs[k][1]["index"], list(shape))

    def allocate(self) -> None:
        if not self.signature:
            self.interp.allocate_tensors()

    def set_inputs(self, arrays: list[np.ndarray]) -> None:
        if self.signature:
            self._values = {name: a for (name, _), a in zip(self.inputs, arrays)}
            r = self._sig_runner
            r(**self._values)  # resizes, allocates and sets the inputs once
            wrapper, sub = getattr(r, "_interpreter_wrapper", None), getattr(r, "_subgraph_index", None)
            # time the bare Invoke like the C++ tool does, not the set/get copies of __call__
            self._invoke = (lambda: wrapper.Invoke(sub)) if wrapper is not None and sub is not None else (
                lambda: r(**self._values))
        else:
            for (_, d), a in zip(self.inputs, arrays):
                self.interp.set_tensor(d["index"], a)

    def invoke(self) -> None:
        self._invoke()

    def get_outputs(self) -> list[np.ndarray]:
        if self.signature:
            res = self._sig_runner(**self._values)
            return [np.asarray(res[k]) for k in self._sig_outputs]
        return [np.array(self.interp.get_tensor(d["index"]), copy=True) for d in self.interp.get_output_details()]


# --- memory ------------------------------------------------------------------------------------------------------

def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc; elsewhere the peak from getrusage)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return kb * (1 if sys.platform == "darwin" else 1024)


class PeakMemoryMonitor:
    """Samples the resident set size every `interval_ms` in a thread; `peak_mb` after stop()."""

    def __init__(self, interval_ms: int):
        self.interval = max(interval_ms, 1) / 1e3
        self.peak = rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, rss_bytes())

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())

    @property
    def peak_mb(self) -> float:
        return self.peak / (1 << 20)


# --- the benchmark -----------------------------------------------------------------------------------------------

def run_loop(fn: Callable[[], Any], min_runs: int, min_secs: float, max_secs: float, log: Callable[[str], None],
             ) -> RunStats:
    """The official loop: run until both `min_runs` runs and `min_secs` seconds are done, but start no run after
    `max_secs`; every run is timed (microseconds, printed whole as the official tool does)."""
    log(f"Running benchmark for at least {min_runs} iterations and at least {min_secs:g} seconds but terminate if "
        f"exceeding {max_secs:g} seconds.")
    stats = RunStats()
    clock = time.perf_counter_ns
    now = clock()
    min_end, max_end = now + int(min_secs * 1e9), now + int(max_secs * 1e9)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        run = 0
        while (run < min_runs or now < min_end) and now <= max_end:
            t0 = clock()
            fn()
            t1 = clock()
            stats.add((t1 - t0) / 1e3)
            run += 1
            now = t1
    finally:
        if gc_was_enabled:
            gc.enable()
    log(stats.format() + "\n")
    return stats


@dataclass
class RunResult:
    """What one runtime measured."""

    label: str
    init_us: int = 0
    warmup: RunStats | None = None
    regular: RunStats | None = None
    outputs: list[np.ndarray] | None = None
    error: str = ""


def _prepare_inputs(runner, infos: list[InputLayerInfo], rng: np.random.Generator, log) -> list[np.ndarray]:
    specs = runner.input_specs()
    by_name = {info.name: info for info in infos}
    arrays = []
    for k, (name, dtype, shape) in enumerate(specs):
        info = by_name.get(name)
        if info is None and k < len(infos) and infos[k].name not in {n for n, _, _ in specs}:
            info = infos[k]  # the official tool pairs --input_layer with the model inputs by position
            log(f"WARNING: Tensor # {k} is named {name} but flags call it {info.name}")
        if info is not None and info.file:
            if info.low is not None:
                log(f"WARNING: The input_name:{info.name} appears both in input_layer_value_files and "
                    f"input_layer_value_range. The input_layer_value_range of the input_name will be ignored.")
            arrays.append(load_input_file(info.file, dtype, shape))
        else:
            low, high = (info.low, info.high) if info is not None else (None, None)
            arrays.append(random_input(dtype, shape, rng, low, high))
    return arrays


def _apply_shapes(runner, infos: list[InputLayerInfo], log) -> None:
    specs = runner.input_specs()
    names = [n for n, _, _ in specs]
    for pos, info in enumerate(infos):
        if info.shape is None:
            continue
        k = names.index(info.name) if info.name in names else pos
        if k >= len(specs):
            raise BenchmarkError(f"Inputs mismatch: --input_layer names {len(infos)} inputs, the model has "
                                 f"{len(specs)}")
        if len(info.shape) != len(specs[k][2]):
            raise BenchmarkError(f"Input tensor #{k} should have {len(specs[k][2])} dimensions!")
        runner.resize(k, info.shape)


def _log_params(args: argparse.Namespace, log) -> None:
    log(f"Log parameter values verbosely: [{int(args.verbose)}]")
    for name, typ, default, _, label in _FLAGS:
        value = getattr(args, name)
        if name == "graph" or args.verbose or value != default:
            shown = int(value) if typ is bool else (f"{value:g}" if typ is float else value)
            log(f"{label}: [{shown}]")


def _output_diff(ours: list[np.ndarray], ref: list[np.ndarray]) -> str:
    notes = []
    for k, (o, r) in enumerate(zip(ours, ref)):
        o, r = np.asarray(o), np.asarray(r)
        if o.shape != r.shape or o.dtype != r.dtype:
            notes.append(f"out{k}: {o.dtype}{list(o.shape)} vs {r.dtype}{list(r.shape)}")
        elif o.size == 0 or o.dtype.kind not in "biufc":
            notes.append(f"out{k}: -")
        elif o.dtype.kind in "iub":
            step = int(np.max(np.abs(o.astype(np.int64) - r.astype(np.int64))))
            notes.append(f"out{k}: max step {step}")
        else:
            with np.errstate(invalid="ignore"):
                d = float(np.nanmax(np.abs(o.astype(np.complex128 if o.dtype.kind == "c" else np.float64) - r)))
            notes.append(f"out{k}: max |diff| {d:.3g}")
    return "; ".join(notes)


def _compare_official(args, infos, arrays: list[np.ndarray], ours: RunResult, num_threads: int, log) -> None:
    try:
        import ai_edge_litert
        from ai_edge_litert import interpreter  # noqa: F401
    except ImportError as e:
        log(f"WARNING: --compare_official needs the official runtime (pip install ai-edge-litert): {e}")
        return
    version = getattr(ai_edge_litert, "__version__", "")
    results = [ours]
    for builtin in (True, False):
        label = "official builtin kernels" if builtin else "official XNNPACK (default)"
        log(f"Benchmarking {label} ...")
        res = RunResult(label)
        try:
            t0 = time.perf_counter_ns()
            runner = OfficialRunner(args.graph, num_threads, args.signature_to_run_for, builtin)
            _apply_shapes(runner, infos, log)
            runner.allocate()
            res.init_us = (time.perf_counter_ns() - t0) // 1000
            runner.set_inputs(arrays)
            res.warmup = run_loop(runner.invoke, args.warmup_runs, args.warmup_min_secs, args.max_secs, log)
            res.regular = run_loop(runner.invoke, args.num_runs, args.min_secs, args.max_secs, log)
            res.outputs = runner.get_outputs()
            del runner
        except Exception as e:  # the official runtime may reject the model (e.g. an unresolved custom op)
            res = RunResult(label, error=f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e) else ''}")
        results.append(res)
    log("")
    log(f"============================== Comparison with the official runtime (ai-edge-litert {version}, same "
        f"process, same inputs, {num_threads} thread{'s' if num_threads != 1 else ''}) "
        "==============================")
    log(f"\t{'[runtime]':>28}\t{'[init ms]':>10}\t{'[first us]':>10}\t{'[avg us]':>10}\t{'[median us]':>11}"
        f"\t{'[min us]':>9}\t{'[lite-numba time / this]':>24}\t[outputs vs lite-numba]")
    for r in results:
        if r.error:
            log(f"\t{r.label:>28}\tfailed: {r.error}")
            continue
        ratio, diff = "", ""
        if r is not ours:
            ratio = "-"
            if r.regular.avg > 0:
                med = ours.regular.median / r.regular.median if r.regular.median > 0 else math.nan
                ratio = f"{ours.regular.avg / r.regular.avg:.2f}x avg, {med:.2f}x median"
            diff = _output_diff(ours.outputs or [], r.outputs or [])
        log(f"\t{r.label:>28}\t{r.init_us / 1e3:>10.3f}\t{r.warmup.first:>10.1f}\t{r.regular.avg:>10.2f}"
            f"\t{r.regular.median:>11.2f}\t{r.regular.min:>9.2f}\t{ratio:>24}\t{diff}")
    log("(ratio < 1: lite-numba is faster; init includes compiling or loading the compiled model from the cache)")


def _write_profile(profile, args, init_events: list[tuple[str, str, float]], extra: dict[str, str],
                   out: TextIO, log) -> None:
    mode, path = args.op_profiling_output_mode, args.op_profiling_output_file
    if mode == "html":
        path = path or os.path.splitext(os.path.basename(args.graph))[0] + "_op_profile.html"
        with open(path, "w", encoding="utf-8") as f:
            f.write(profile.to_html(title=f"lite-numba op profile: {os.path.basename(args.graph)}", extra=extra))
        log(f"Op profiling output (html) written to {path}")
        return
    if mode == "json":
        doc = profile.to_json_dict()
        doc["benchmark"] = extra
        doc["init"] = [{"event": kind, "what": what, "us": us} for kind, what, us in init_events]
        import json

        text = json.dumps(doc, indent=2) + "\n"
    else:
        csv_format = mode == "csv"
        init_text = format_stats_tables(init_rows(init_events), 1, csv_format=csv_format,
                                        run_totals=RunStats([sum(us for _, _, us in init_events)]))
        text = ("Profiling Info for Benchmark Initialization:\n" + init_text + "\n"
                + "Operator-wise Profiling Info for Regular Benchmark Runs:\n"
                + profile.to_table(csv_format=csv_format) + "\n" + profile.summary() + "\n")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        log(f"Op profiling output ({mode}) written to {path}")
    else:
        out.write(text)
        out.flush()


def run_benchmark(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run the benchmark described by parsed flags, printing to `out` (default stdout); returns the exit code."""
    out = out if out is not None else sys.stdout

    def log(msg: str = "") -> None:
        out.write(msg + "\n")
        out.flush()

    log("STARTING!")
    _log_params(args, log)
    if not args.graph:
        raise BenchmarkError("Please specify the name of your TF Lite input file with --graph")
    if not os.path.isfile(args.graph):
        raise BenchmarkError(f"Graph file {args.graph} does not exist")
    if args.op_profiling_output_mode not in OUTPUT_MODES:
        raise BenchmarkError(f"Output mode {args.op_profiling_output_mode} is not supported. Supported values are: "
                             + ", ".join(f"'{m}'" for m in OUTPUT_MODES) + ".")
    if args.num_threads < -1 or args.num_threads == 0:
        raise BenchmarkError(f"--num_threads must be -1 or positive, got {args.num_threads}")
    infos = parse_input_layers(args.input_layer, args.input_layer_shape, args.input_layer_value_range,
                               args.input_layer_value_files)
    num_threads = 1 if args.num_threads == -1 else args.num_threads
    monitor = PeakMemoryMonitor(args.memory_footprint_check_interval_ms if args.memory_footprint_check_interval_ms
                                > 0 else 50) if args.report_peak_memory_footprint else None
    if monitor is not None:
        monitor.start()
    start_rss = rss_bytes()
    model_mb = os.path.getsize(args.graph) / 1e6

    t0 = time.perf_counter_ns()
    try:
        runner = OurRunner(args.graph, num_threads, args.signature_to_run_for)
        t_loaded = time.perf_counter_ns()
        _apply_shapes(runner, infos, log)
        runner.allocate()
    except BenchmarkError:
        raise
    except Exception as e:
        raise BenchmarkError(f"Failed to initialize the interpreter: {type(e).__name__}: {e}") from None
    t1 = time.perf_counter_ns()
    init_us = (t1 - t0) // 1000
    init_rss = rss_bytes()
    if runner.signature:
        log(f"Using signature: {runner.signature}")
    log(f"The input model file size (MB): {model_mb:g}")
    log(f"Initialized session in {init_us / 1e3:g}ms.")
    log(f"Kernel path: {kernel_path()}")  # lite-numba's: the ISA level and why a better one (amx) is not used

    arrays = _prepare_inputs(runner, infos, np.random.default_rng(0), log)
    runner.set_inputs(arrays)
    ours = RunResult("lite-numba", init_us=init_us)
    try:
        ours.warmup = run_loop(runner.invoke, args.warmup_runs, args.warmup_min_secs, args.max_secs, log)
        ours.regular = run_loop(runner.invoke, args.num_runs, args.min_secs, args.max_secs, log)
    except Exception as e:
        raise BenchmarkError(f"Invoke failed: {type(e).__name__}: {e}") from None
    ours.outputs = runner.get_outputs()
    overall_rss = rss_bytes()
    if monitor is not None:
        monitor.stop()

    log(f"Inference timings in us: Init: {init_us}, First inference: {round(ours.warmup.first)}, Warmup (avg): "
        f"{_fmt_avg(ours.warmup)}, Inference (avg): {_fmt_avg(ours.regular)}")
    log("Note: as the benchmark tool itself affects memory footprint, the following is only APPROXIMATE to the "
        "actual memory footprint of the model at runtime. Take the information at your discretion.")
    log(f"Memory footprint delta from the start of the tool (MB): init={(init_rss - start_rss) / (1 << 20):g} "
        f"overall={(overall_rss - start_rss) / (1 << 20):g}")
    log(f"Activation arena (bytes): {runner.arena_size}")
    if monitor is not None:
        log(f"Overall peak memory footprint (MB) via periodic monitoring: {monitor.peak_mb:g}")
        rss_mb = rss_bytes() >> 20
        log("Memory status at the end of execution:")
        log(f"- VmRSS              : {rss_mb} MB")

    if args.enable_op_profiling:
        profile = runner.rt.profile(num_runs=args.num_runs, warmup_runs=1, subgraph=runner.subgraph,
                                    min_secs=args.min_secs, max_secs=args.max_secs, measure_invoke=True,
                                    title=f"lite-numba op profile: {os.path.basename(args.graph)}")
        init_events = [("LoadModel", "load, validate, resolve ops", (t_loaded - t0) / 1e3),
                       ("AllocateTensors", "prepare, plan arena, compile or load from cache", (t1 - t_loaded) / 1e3)]
        extra = {"model": args.graph, "init (us)": str(init_us), "first inference (us)": f"{ours.warmup.first:.1f}",
                 "inference avg (us, compiled, unprofiled)": _fmt_avg(ours.regular),
                 "inference median (us)": f"{ours.regular.median:.2f}", "arena (bytes)": str(runner.arena_size)}
        _write_profile(profile, args, init_events, extra, out, log)

    if args.compare_official:
        _compare_official(args, infos, arrays, ours, num_threads, log)
    return 0


def _fmt_avg(stats: RunStats) -> str:
    """The average as the official tool prints it: over whole microseconds, 6 significant digits."""
    return _g(sum(round(v) for v in stats.values) / stats.count) if stats.count else "nan"


def _g(x: float) -> str:
    return f"{x:g}" if not math.isnan(x) else "nan"


def main(argv: list[str] | None = None) -> int:
    """Entry point of `lite-numba benchmark` and `python -m lite_numba.tools.benchmark`. A command line naming the
    model with --model is litert-benchmark's (lite_numba.tools.litert_benchmark)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if is_litert_command_line(argv):
        return litert_main(argv, prog="lite-numba benchmark")
    if is_llm_command_line(argv):  # a KV-cache LLM: prefill / decode tokens per second (tools.llm_benchmark)
        return llm_main(argv)
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:  # the official tool warns and goes on, so its command lines can be pasted as they are
        print(f"WARNING: Unconsumed cmdline flags: {' '.join(unknown)}", file=sys.stderr)
    try:
        return run_benchmark(args)
    except BenchmarkError as e:
        sys.stdout.flush()
        print(f"ERROR: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
