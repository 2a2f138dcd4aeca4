"""Ours / XNNPACK / builtin on whole models, interleaved in one process, thread CPU time (issue 35's tables).

    python scripts/interleaved_ratio.py MODEL.tflite [MODEL.tflite ...] [--rounds 21] [--threads 1]

For each model: our Interpreter (this machine's default kernel path, or LITE_NUMBA_ISA's), the official runtime with
its default delegate (XNNPACK) and with BUILTIN_WITHOUT_DEFAULT_DELEGATES, all three on the same seeded inputs (float
N(0, 1); integer inputs in [0, 16) for int32 (token ids) else [-100, 100)). Each round times ~50 ms of invoke()
calls per runtime with time.thread_time_ns (CPU time of the calling thread: less sensitive to other processes on a
shared machine than wall time); prints the medians, the median of the per-round ratios, the ratio of the minima
and the load average."""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def _interpreters(path: str, threads: int) -> dict:
    from ai_edge_litert.interpreter import Interpreter as Official  # lazy: the official runtime is a test extra
    from ai_edge_litert.interpreter import OpResolverType

    import lite_numba

    its = {"ours": lite_numba.Interpreter(model_path=path, num_threads=threads),
           "xnnpack": Official(model_path=path, num_threads=threads),
           "builtin": Official(model_path=path, num_threads=threads,
                               experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)}
    for it in its.values():
        it.allocate_tensors()
    return its


def _inputs(its: dict) -> None:
    rs = np.random.RandomState(0)
    for d in its["ours"].get_input_details():
        dt = np.dtype(d["dtype"])
        if dt.kind == "f":
            v = rs.standard_normal(d["shape"]).astype(dt)
        elif dt == np.int32:
            v = rs.randint(0, 16, size=d["shape"]).astype(dt)
        else:
            info = np.iinfo(dt)
            v = rs.randint(max(info.min, -100), min(info.max, 100), size=d["shape"]).astype(dt)
        for it in its.values():
            it.set_tensor(d["index"], v)


def _per_invoke_us(it, n: int) -> float:
    it.invoke()
    t0 = time.thread_time_ns()
    for _ in range(n):
        it.invoke()
    return (time.thread_time_ns() - t0) / n / 1e3


def measure(path: str, rounds: int, threads: int) -> str:
    its = _interpreters(path, threads)
    _inputs(its)
    it = its["ours"]
    it.invoke()
    t0 = time.perf_counter()
    it.invoke()
    n = max(3, int(0.05 / max(time.perf_counter() - t0, 1e-6)))
    res = {k: [] for k in its}
    for _ in range(rounds):
        for k, i in its.items():
            res[k].append(_per_invoke_us(i, n))
    med = {k: float(np.median(v)) for k, v in res.items()}
    ours = np.array(res["ours"])
    ratio = float(np.median(ours / np.array(res["xnnpack"])))
    to_builtin = float(np.median(ours / np.array(res["builtin"])))
    by_min = min(res["ours"]) / min(res["xnnpack"])
    return (f"{os.path.basename(path)} threads={threads} ours {med['ours']:.1f} us, XNNPACK {med['xnnpack']:.1f}, "
            f"builtin {med['builtin']:.1f}; ours/XNNPACK {ratio:.3f} (minima {by_min:.3f}), ours/builtin "
            f"{to_builtin:.3f}; load {os.getloadavg()[0]:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    for m in a.models:
        print(measure(m, a.rounds, a.threads), flush=True)


if __name__ == "__main__":
    main()
