"""Speed of the Flex whole models (tests/data/flex/model_*) in lite-numba against TensorFlow running the same
functions eagerly and as a tf.function, interleaved round by round.

TensorFlow is not a dependency: it runs in a worker process started with the Python of a venv that has it (the one
scripts/record_flex_oracle.py uses), which builds the functions from that script and times them on request.
Run from the project venv:
    python bench/flex_vs_tensorflow.py --tf-python /work/tfvenv/bin/python [--rounds 7] [--invokes 50]
Prints one row per model: medians over rounds of the per-round median call time, in µs, and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "flex")
MODELS = ["model_speech_enhancement", "model_transformer_block", "model_tensorlist_gru"]


def _median_call_us(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1e6)


def worker() -> None:
    """The TensorFlow side: reads `name mode n` lines, answers with the median µs (JSON)."""
    import tensorflow as tf

    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from record_flex_oracle import whole_models

    funcs = whole_models(tf)
    print(json.dumps("ready"), flush=True)
    for line in sys.stdin:
        name, mode, n = line.split()
        fn, _, _ = funcs[name]
        rec = np.load(os.path.join(DATA, name + ".npz"))
        args = {k[3:]: tf.constant(rec[k]) for k in rec.files if k.startswith("in:")}
        f = tf.function(fn) if mode == "function" else fn

        def call(f=f, args=args):
            return [v.numpy() for v in f(**args).values()]

        call()  # traces the tf.function once
        print(json.dumps(_median_call_us(call, int(n))), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tf-python", default="/work/tfvenv/bin/python")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--invokes", type=int, default=50)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker()
    from lite_numba import Interpreter

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    tf_proc = subprocess.Popen([args.tf_python, os.path.abspath(__file__), "--worker"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert json.loads(tf_proc.stdout.readline()) == "ready"

        def tf_time(name: str, mode: str) -> float:
            tf_proc.stdin.write(f"{name} {mode} {args.invokes}\n")
            tf_proc.stdin.flush()
            return float(json.loads(tf_proc.stdout.readline()))

        print(f"{'model':28s} {'ours µs':>9s} {'TF eager µs':>12s} {'tf.function µs':>15s} {'/eager':>7s} "
              f"{'/function':>9s}")
        for name in MODELS:
            rec = np.load(os.path.join(DATA, name + ".npz"))
            ins = {k[3:]: rec[k] for k in rec.files if k.startswith("in:")}
            runner = Interpreter(model_path=os.path.join(DATA, name + ".tflite")).get_signature_runner()
            runner(**ins)
            rows = {"ours": [], "eager": [], "function": []}
            for _ in range(args.rounds):
                rows["ours"].append(_median_call_us(lambda r=runner, i=ins: r(**i), args.invokes))
                rows["eager"].append(tf_time(name, "eager"))
                rows["function"].append(tf_time(name, "function"))
            m = {k: float(np.median(v)) for k, v in rows.items()}
            print(f"{name:28s} {m['ours']:9.1f} {m['eager']:12.1f} {m['function']:15.1f} "
                  f"{m['ours'] / m['eager']:7.2f} {m['ours'] / m['function']:9.2f}")
    finally:
        tf_proc.stdin.close()
        tf_proc.wait(timeout=60)


if __name__ == "__main__":
    main()
