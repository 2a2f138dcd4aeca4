"""The `lite-numba` command: `benchmark`, `inspect`, `run` and `warmup`.

    lite-numba benchmark --graph MODEL.tflite [official benchmark_model flags]   (see lite_numba.tools.benchmark)
    lite-numba benchmark --model MODEL.tflite [litert-benchmark flags]          (see lite_numba.tools.litert_benchmark)
    lite-numba litert-benchmark --model MODEL.tflite [litert-benchmark flags]   (the same)
    lite-numba inspect MODEL.tflite [--json] [--builtin-only]                   (see lite_numba.tools.inspect_model)
    lite-numba run MODEL.tflite --input x.npy [--input y.npy] --output-dir D [--trace] [--all-tensors]
    lite-numba warmup [MODEL.tflite ...] [--all] [--num-threads N]            (see lite_numba.tools.warmup)

`run` feeds the inputs (in the model's input order, or `NAME=path.npy`; random values when none are given), invokes
once and writes every output to D/<output tensor name>.npy (names sanitized to letters, digits, '.', '_' and '-').
`--all-tensors` also writes every intermediate tensor to D/tensors/ (the interpreter keeps them all:
experimental_preserve_all_tensors), `--trace` prints every node with its inputs' and outputs' ranges to stderr.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

import numpy as np

from ..version import __version__

__all__ = ["main", "run_model", "sanitize_name"]

_USAGE = """usage: lite-numba {benchmark,litert-benchmark,inspect,run,warmup} ...

commands:
  benchmark   time a model like the official benchmark_model tool (--graph MODEL.tflite; --help for flags), or
              like litert-benchmark (--model MODEL.tflite)
  litert-benchmark
              time a model's CompiledModel like ai-edge-litert's litert-benchmark (--model MODEL.tflite)
  inspect     describe a model and whether this installation can run it
  run         run a model on .npy inputs and write its outputs as .npy files
  warmup      compile models' kernels into the on-disk caches ahead of time (image builds, CI caches)
"""


def sanitize_name(name: str) -> str:
    """A tensor name as a file name: characters other than letters, digits, '.', '_' and '-' become '_'."""
    text = re.sub(r"[^A-Za-z0-9._-]", "_", name).strip("._")
    return text or "tensor"


def _unique(name: str, used: set[str]) -> str:
    candidate, k = name, 1
    while candidate in used:
        candidate = f"{name}_{k}"
        k += 1
    used.add(candidate)
    return candidate


def _load_inputs(specs: list[str], details: list[dict]) -> list[np.ndarray | None]:
    """Match --input values to the model inputs: `path.npy` in order, or `NAME=path.npy` by tensor name."""
    values: list[np.ndarray | None] = [None] * len(details)
    names = [d["name"] for d in details]
    pos = 0
    for spec in specs:
        name, sep, path = spec.partition("=")
        if sep and name in names:
            k = names.index(name)
        else:
            path, k = spec, pos
            pos += 1
        if k >= len(details):
            raise ValueError(f"{len(specs)} inputs given, the model has {len(details)}")
        values[k] = np.load(path, allow_pickle=False)
    return values


def run_model(model: str, inputs: list[str], output_dir: str, *, trace: bool = False, all_tensors: bool = False,
              num_threads: int = 1, out=sys.stdout) -> list[str]:
    """Run `model` once on the .npy `inputs` and write its outputs to `output_dir`; returns the files written."""
    from ..api.interpreter import Interpreter  # lazy: as above
    from .benchmark import random_input  # lazy: a command's modules load only when it runs (fast --help)

    interp = Interpreter(model_path=model, num_threads=num_threads, experimental_preserve_all_tensors=all_tensors)
    details = interp.get_input_details()
    values = _load_inputs(inputs, details)
    resized = False
    for d, v in zip(details, values):
        if v is not None and tuple(v.shape) != tuple(int(x) for x in d["shape"]):
            interp.resize_tensor_input(d["index"], list(v.shape))
            resized = True
    interp.allocate_tensors()
    if resized:
        details = interp.get_input_details()
    rng = np.random.default_rng(0)
    for d, v in zip(details, values):
        if v is None:
            v = random_input(np.dtype(d["dtype"]), tuple(int(x) for x in d["shape"]), rng)
            print(f"input #{d['index']} {d['name']!r}: no file given, using random values", file=out)
        interp.set_tensor(d["index"], v)
    if trace:
        interp.trace = True
    interp.invoke()
    os.makedirs(output_dir, exist_ok=True)
    written, used = [], set()
    for d in interp.get_output_details():
        arr = interp.get_tensor(d["index"])
        path = os.path.join(output_dir, _unique(sanitize_name(d["name"]), used) + ".npy")
        np.save(path, arr)
        written.append(path)
        print(f"wrote {path}: {arr.dtype}{list(arr.shape)}", file=out)
    if all_tensors:
        folder = os.path.join(output_dir, "tensors")
        os.makedirs(folder, exist_ok=True)
        used_all: set[str] = set()
        count = 0
        for d in interp.get_tensor_details():
            try:
                arr = interp.get_tensor(d["index"])
            except ValueError:  # tensors without storage (e.g. dynamic ones not produced)
                continue
            if arr.dtype == object:
                continue
            name = _unique(f"{d['index']:04d}_{sanitize_name(d['name'])}", used_all)
            np.save(os.path.join(folder, name + ".npy"), arr)
            count += 1
        print(f"wrote {count} tensors to {folder}", file=out)
    return written


def _run_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="lite-numba run", description="Run a .tflite model once on .npy inputs and "
                                 "write its outputs as .npy files.")
    ap.add_argument("model", help="the .tflite file")
    ap.add_argument("--input", action="append", default=[], metavar="[NAME=]FILE.npy",
                    help="an input value, in the model's input order or by tensor name; repeat for several")
    ap.add_argument("--output-dir", required=True, help="folder for the outputs (created if needed)")
    ap.add_argument("--num-threads", type=int, default=1)
    ap.add_argument("--trace", action="store_true", help="print every node with its tensors' ranges to stderr")
    ap.add_argument("--all-tensors", action="store_true", help="also write every tensor to OUTPUT_DIR/tensors")
    a = ap.parse_args(argv)
    try:
        run_model(a.model, a.input, a.output_dir, trace=a.trace, all_tensors=a.all_tensors,
                  num_threads=a.num_threads)
    except (OSError, ValueError, RuntimeError) as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `lite-numba` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        sys.stdout.write(_USAGE)
        return 0 if argv else 2
    if argv[0] == "--version":
        print(f"lite-numba {__version__}")
        return 0
    command, rest = argv[0], argv[1:]
    if command == "benchmark":
        from .benchmark import main as benchmark_main  # lazy: a command's modules load only when it runs

        return benchmark_main(rest)
    if command == "litert-benchmark":
        from .litert_benchmark import main as litert_main  # lazy: a command's modules load only when it runs

        return litert_main(rest)
    if command == "inspect":
        from .inspect_model import main as inspect_main  # lazy: a command's modules load only when it runs

        return inspect_main(rest)
    if command == "run":
        return _run_main(rest)
    if command == "warmup":
        from .warmup import main as warmup_main  # lazy: a command's modules load only when it runs

        return warmup_main(rest)
    sys.stderr.write(f"lite-numba: unknown command {command!r}\n{_USAGE}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
