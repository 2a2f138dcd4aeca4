"""Resident memory under load: many invokes over several models, then many create / allocate / destroy cycles, with
the process's RSS sampled along the way. A leak shows as a curve that keeps rising after the warm-up.

    python scripts/soak_rss.py [--invokes 1000000] [--cycles 10000] [--samples 20] [--json out.json]

The models are small ModelBuilder models of different kinds (float, int8, int16, dynamic shapes, control flow,
variables, custom ops) so that every path of invoke is exercised; each gets fresh random inputs per invoke
(set_tensor / invoke / get_tensor, as a service would). Prints the RSS curve in MiB and the growth after warm-up."""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

SOAK_MODELS = ("float_conv_pool", "int8_fully_connected_per_channel", "int16_add", "hybrid_fully_connected",
               "while_counter", "if_branches", "resource_variables", "gather_runtime_indices", "custom_atan",
               "lstm_unidirectional")


def rss_mib() -> float:
    """Current resident set size of this process (Linux /proc)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def _inputs(it, rng) -> list[tuple[int, np.ndarray]]:
    out = []
    for d in it.get_input_details():
        dt, shape = np.dtype(d["dtype"]), tuple(d["shape"])
        if dt.kind == "f":
            x = rng.standard_normal(shape).astype(dt)
        elif dt == np.bool_:
            x = rng.integers(0, 2, shape).astype(dt)
        else:  # small non-negative: valid gather indices
            x = rng.integers(0, 3, shape).astype(dt)
        out.append((d["index"], x))
    return out


def soak(invokes: int, cycles: int, samples: int) -> dict:
    from fuzz_sources import RECIPES

    from lite_numba import Interpreter

    rng = np.random.default_rng(0)
    models = {name: RECIPES[name]() for name in SOAK_MODELS}
    interps = {}
    feeds = {}
    for name, data in models.items():
        it = Interpreter(model_content=data)
        it.allocate_tensors()
        interps[name] = it
        feeds[name] = [_inputs(it, rng) for _ in range(8)]
    curve = {"invokes": [], "cycles": []}
    t0 = time.perf_counter()
    step = max(1, invokes // samples)
    names = list(interps)
    for k in range(invokes):
        name = names[k % len(names)]
        it = interps[name]
        for index, x in feeds[name][k % 8]:
            it.set_tensor(index, x)
        it.invoke()
        for d in it.get_output_details():
            it.get_tensor(d["index"])
        if (k + 1) % step == 0:
            curve["invokes"].append((k + 1, round(rss_mib(), 2)))
    t_invoke = time.perf_counter() - t0
    del interps
    gc.collect()
    t0 = time.perf_counter()
    step = max(1, cycles // samples)
    for k in range(cycles):
        name = names[k % len(names)]
        it = Interpreter(model_content=models[name])
        it.allocate_tensors()
        for index, x in feeds[name][k % 8]:
            it.set_tensor(index, x)
        it.invoke()
        del it
        if (k + 1) % step == 0:
            gc.collect()
            curve["cycles"].append((k + 1, round(rss_mib(), 2)))
    t_cycles = time.perf_counter() - t0

    def growth(points):  # after warm-up: the highest later sample above the second one
        return round(max(p[1] for p in points[1:]) - points[1][1], 2) if len(points) > 2 else 0.0

    return {"models": list(SOAK_MODELS), "invokes": invokes, "cycles": cycles, "curve": curve,
            "growth_after_warmup_mib": {"invokes": growth(curve["invokes"]), "cycles": growth(curve["cycles"])},
            "seconds": {"invokes": round(t_invoke, 1), "cycles": round(t_cycles, 1)}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--invokes", type=int, default=1_000_000)
    ap.add_argument("--cycles", type=int, default=10_000)
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--json", help="write the result here too")
    args = ap.parse_args()
    result = soak(args.invokes, args.cycles, args.samples)
    for phase in ("invokes", "cycles"):
        print(phase, " ".join(f"{n}:{mib}" for n, mib in result["curve"][phase]))
    print("growth after warm-up (MiB):", result["growth_after_warmup_mib"], "seconds:", result["seconds"])
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
