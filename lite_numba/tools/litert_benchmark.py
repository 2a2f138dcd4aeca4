"""`lite-numba litert-benchmark` (also `lite-numba benchmark --model ...`): the official `litert-benchmark` command.

    lite-numba litert-benchmark --model model.tflite [--signature KEY] [--num_runs 50] [--warmup_runs 5]
                                [--num_threads 1] [--use_gpu] [--use_npu] [--no_cpu] [--require_full_delegation]
                                [--result_json results.json] [--verbose]

The flags, the log lines, the "BENCHMARK RESULTS" block and the --result_json document are those of ai-edge-litert's
`litert-benchmark` (ai_edge_litert.tools.benchmark_litert_model), run on lite-numba's CompiledModel: the same
inputs (random, per the official rule), `run_by_name` on buffers made by the model, timed one by one. lite-numba
runs on the CPU: `--use_gpu` / `--use_npu` add an accelerator it does not have, so the model runs on the CPU and
"Fully accelerated" is False (with `--no_cpu` or `--require_full_delegation` it fails, as the official tool does when
the accelerator cannot take the model). `--dispatch_library_path`, `--compiler_plugin_path` and `--runtime_path`
name native libraries lite-numba does not load: accepted and unused. It is offered under lite-numba's own command so
that the official `litert-benchmark` stays what it is.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time

import numpy as np

from ..api.compiled_model import CompiledModel
from ..api.litert_options import CpuOptions, Environment, EnvironmentOptions, HardwareAccelerator, Options

__all__ = ["build_parser", "main", "run_benchmark", "is_litert_command_line"]

logger = logging.getLogger("lite_numba.litert_benchmark")

_DTYPES = {"float32": np.float32, "float16": np.float16, "float64": np.float64, "int32": np.int32, "int8": np.int8,
           "uint8": np.uint8, "int16": np.int16, "int64": np.int64, "uint16": np.uint16, "uint32": np.uint32,
           "bool": np.bool_}


def is_litert_command_line(argv: list[str]) -> bool:
    """Whether a `lite-numba benchmark` command line is litert-benchmark's (it names the model with --model;
    benchmark_model's uses --graph)."""
    return any(a == "--model" or a.startswith("--model=") for a in argv) and \
        not any(a == "--graph" or a.startswith("--graph=") for a in argv)


def build_parser(prog: str = "lite-numba litert-benchmark") -> argparse.ArgumentParser:
    """The official tool's flags."""
    ap = argparse.ArgumentParser(prog=prog, description="Benchmark a LiteRT model with lite-numba's CompiledModel "
                                 "(the flags of ai-edge-litert's litert-benchmark).")
    ap.add_argument("--model", required=True, help="Path to the .tflite model file.")
    ap.add_argument("--signature", default="", help="Signature key to run (default: first).")
    ap.add_argument("--use_cpu", action="store_true", default=True, help="Enable CPU accelerator (default: True).")
    ap.add_argument("--no_cpu", action="store_true", help="Disable CPU fallback.")
    ap.add_argument("--use_gpu", action="store_true", help="Enable GPU accelerator (lite-numba has none: runs on "
                    "the CPU).")
    ap.add_argument("--use_npu", action="store_true", help="Enable NPU accelerator (lite-numba has none: runs on "
                    "the CPU).")
    ap.add_argument("--require_full_delegation", action="store_true",
                    help="Fail if model is not fully accelerated.")
    ap.add_argument("--dispatch_library_path", default="", help="Vendor dispatch library (accepted, unused).")
    ap.add_argument("--compiler_plugin_path", default="", help="Compiler plugin directory (accepted, unused).")
    ap.add_argument("--runtime_path", default="", help="LiteRT runtime library directory (accepted, unused).")
    ap.add_argument("--num_runs", type=int, default=50, help="Number of inference runs.")
    ap.add_argument("--warmup_runs", type=int, default=5, help="Number of warmup runs.")
    ap.add_argument("--num_threads", type=int, default=1, help="Number of CPU threads.")
    ap.add_argument("--result_json", default="", help="Path to save results as JSON.")
    ap.add_argument("--verbose", action="store_true", help="Enable verbose output.")
    return ap


def accelerators(args: argparse.Namespace) -> HardwareAccelerator:
    """The official rule: NPU / GPU as asked, CPU unless --no_cpu or --require_full_delegation, CPU if nothing."""
    accel = 0
    if args.use_npu:
        accel |= HardwareAccelerator.NPU
    if args.use_gpu:
        accel |= HardwareAccelerator.GPU
    if not args.no_cpu and not args.require_full_delegation:
        accel |= HardwareAccelerator.CPU
    return HardwareAccelerator(accel or HardwareAccelerator.CPU)


def fill_random(buffer, detail: dict, rng: np.random.RandomState) -> None:
    """Random values as the official tool writes them: floats uniform in [-1, 1), integers in [-128, 127] clipped
    to the type, anything else zeros."""
    dtype = np.dtype(_DTYPES.get(detail.get("dtype", "float32"), np.float32))
    shape = detail.get("shape", [1])
    if dtype.kind == "f":
        data = rng.uniform(-1.0, 1.0, shape).astype(dtype)
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        data = rng.randint(max(info.min, -128), min(info.max, 127) + 1, shape).astype(dtype)
    else:
        data = np.zeros(shape, dtype)
    buffer.write(data)


def percentile(sorted_data: list[float], p: float) -> float:
    """The p-th percentile by linear interpolation (the official tool's)."""
    if not sorted_data:
        return 0.0
    k = (len(sorted_data) - 1) * p / 100.0
    f = int(k)
    if f + 1 >= len(sorted_data):
        return sorted_data[-1]
    return sorted_data[f] + (k - f) * (sorted_data[f + 1] - sorted_data[f])


class ToolError(Exception):
    """Logged as an error; exit code 1."""


def run_benchmark(args: argparse.Namespace, out=None) -> dict:
    """Run the benchmark; prints the official results block to `out` (default stdout) and returns the results."""
    out = out if out is not None else sys.stdout
    if not os.path.isfile(args.model):
        raise ToolError(f"Model file not found: {args.model}")
    size_mb = os.path.getsize(args.model) / (1024 * 1024)
    hw = accelerators(args)
    names = [a.name for a in (HardwareAccelerator.NPU, HardwareAccelerator.GPU, HardwareAccelerator.CPU) if hw & a]
    logger.info("Model:           %s", args.model)
    logger.info("Model size:      %.2f MB", size_mb)
    logger.info("Accelerators:    %s", " | ".join(names))
    logger.info("Num threads:     %d", args.num_threads)
    logger.info("Warmup runs:     %d", args.warmup_runs)
    logger.info("Benchmark runs:  %d", args.num_runs)
    t0 = time.perf_counter()
    env = Environment.create(options=EnvironmentOptions(**({"runtime_path": args.runtime_path}
                                                           if args.runtime_path else {})))
    logger.info("Environment created (%.1f ms)", (time.perf_counter() - t0) * 1000)
    logger.info("Loading model...")
    t0 = time.perf_counter()
    try:
        model = CompiledModel.from_file(args.model, environment=env, options=Options(
            hardware_accelerators=hw, cpu_options=CpuOptions(num_threads=args.num_threads)))
    except (RuntimeError, ValueError, TypeError) as e:
        raise ToolError(f"Failed to create the compiled model: {e}") from None
    init_ms = (time.perf_counter() - t0) * 1000
    logger.info("Model loaded (%.1f ms)", init_ms)
    sigs = model.get_signature_list()
    logger.info("Signatures:      %d", model.get_num_signatures())
    key = args.signature or (next(iter(sigs)) if sigs else "serving_default")
    logger.info("Using signature: %s", key)
    if model.get_signature_index(key) < 0:
        raise ToolError(f'Signature "{key}" not found.')
    fully = model.is_fully_accelerated()
    logger.info("Fully accelerated: %s", fully)
    if args.require_full_delegation and not fully:
        raise ToolError("Model is not fully accelerated but --require_full_delegation was set.")
    in_details, out_details = model.get_input_tensor_details(key), model.get_output_tensor_details(key)
    for label, details in (("Input", in_details), ("Output", out_details)):
        logger.debug("%s tensors:", label)
        for name, d in details.items():
            logger.debug("  %s: dtype=%s, shape=%s", name, d.get("dtype"), d.get("shape"))
    inputs = {name: model.create_input_buffer_by_name(key, name) for name in in_details}
    outputs = {name: model.create_output_buffer_by_name(key, name) for name in out_details}
    rng = np.random.RandomState()
    for name, buf in inputs.items():
        fill_random(buf, in_details[name], rng)
    in_bytes = sum(int(np.prod(d.get("shape", [1]))) * np.dtype(_DTYPES.get(d.get("dtype"), np.float32)).itemsize
                   for d in in_details.values())

    def timed(n: int) -> list[float]:
        times = []
        for _ in range(n):
            t = time.perf_counter()
            model.run_by_name(key, inputs, outputs)
            times.append((time.perf_counter() - t) * 1000)
        return times

    logger.info("Running %d warmup iterations...", args.warmup_runs)
    warmup = timed(args.warmup_runs)
    logger.info("Running %d benchmark iterations...", args.num_runs)
    runs = timed(args.num_runs)
    if not runs:
        raise ToolError("--num_runs must be at least 1")
    ordered = sorted(runs)
    avg = statistics.mean(runs)
    std = statistics.stdev(runs) if len(runs) > 1 else 0
    warm_avg, warm_first = (statistics.mean(warmup), warmup[0]) if warmup else (0, 0)
    throughput = in_bytes / (1024 * 1024) / (avg / 1000) if avg > 0 else 0
    lines = ["", "=" * 40, " BENCHMARK RESULTS", "=" * 40,
             f"Model initialization:  {init_ms:.2f} ms",
             f"Warmup (first):        {warm_first:.2f} ms",
             f"Warmup (avg):          {warm_avg:.2f} ms ({len(warmup)} runs)",
             f"Inference (avg):       {avg:.2f} ms ({len(runs)} runs)",
             f"Inference (min):       {min(runs):.2f} ms",
             f"Inference (max):       {max(runs):.2f} ms",
             f"Inference (median):    {statistics.median(runs):.2f} ms",
             f"Inference (std):       {std:.2f} ms",
             f"Inference (p5):        {percentile(ordered, 5):.2f} ms",
             f"Inference (p95):       {percentile(ordered, 95):.2f} ms"]
    if throughput > 0:
        lines.append(f"Throughput:            {throughput:.2f} MB/s")
    lines += [f"Fully accelerated:     {fully}", "=" * 40]
    out.write("\n".join(lines) + "\n")
    out.flush()
    results = {
        "model": args.model, "model_size_mb": round(size_mb, 2), "accelerators": names, "signature": key,
        "fully_accelerated": fully, "num_threads": args.num_threads,
        "latency": {"init_ms": round(init_ms, 2), "warmup_first_ms": round(warm_first, 2),
                    "warmup_avg_ms": round(warm_avg, 2), "num_warmup_runs": len(warmup), "avg_ms": round(avg, 2),
                    "min_ms": round(min(runs), 2), "max_ms": round(max(runs), 2),
                    "median_ms": round(statistics.median(runs), 2), "std_ms": round(std, 2),
                    "p5_ms": round(percentile(ordered, 5), 2), "p95_ms": round(percentile(ordered, 95), 2),
                    "num_runs": len(runs)},
        "throughput_mb_s": round(throughput, 2),
    }
    if args.result_json:
        try:
            with open(args.result_json, "w") as f:
                json.dump(results, f, indent=2)
            logger.info("Results saved to: %s", args.result_json)
        except OSError as e:
            logger.error("Failed to write results to %s: %s", args.result_json, e)
    return results


def main(argv: list[str] | None = None, prog: str = "lite-numba litert-benchmark") -> int:
    """Entry point of `lite-numba litert-benchmark` (and of `lite-numba benchmark --model ...`)."""
    args = build_parser(prog).parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%Y-%m-%d %H:%M:%S")
    try:
        run_benchmark(args)
    except ToolError as e:
        logger.error("%s", e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
