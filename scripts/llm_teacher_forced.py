"""Correctness at real size (issue 39): a litert-torch LLM export's decode logits, teacher-forced, against the
official builtin kernels.

Both runtimes run the same protocol through tflite's signature-runner API, each step's output caches passed back
as the next step's inputs (the official convention): prefill `--prefill` seeded random token ids at positions
0..P-1, then `--steps` decode steps, step s feeding the seeded id tokens[P + s] at position P + s whatever either
runtime predicted (teacher forcing), so both see the same inputs at every step. Each step's logits are compared
(max |ours - official| / max |official|), and after prefill and at the last step every cache (float32: the same
measure; integer caches: bit for bit). The official runtime is `ai_edge_litert` with
`OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES` (its builtin kernels, not XNNPACK). Prints one JSON line; exits 1
when a step is over `--tolerance` (default 1e-4, the issue's bound).

    python scripts/llm_teacher_forced.py ~/.cache/lite-numba/llm-models/gemma3_270m.tflite --steps 32

The real-size models are made by scripts/make_llm_models.py (random weights); they are too large for tests/data,
so this check is run by hand (its figures: docs/design/llm.md), never in CI. The official builtin kernels are slow
at this size (minutes for Qwen3 0.6B's prefill).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def _mask(positions, cache_len: int, dtype) -> np.ndarray:
    pos = np.asarray(positions, np.int64)
    seen = np.arange(cache_len)[None, :] <= pos[:, None]
    if dtype == np.bool_:
        return seen.reshape(1, 1, len(pos), cache_len)
    return np.where(seen, 0.0, -np.inf).astype(np.float32).reshape(1, 1, len(pos), cache_len)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| / max |b| (0 when both are zero); integers must match exactly (inf otherwise)."""
    if np.issubdtype(b.dtype, np.integer):
        return 0.0 if np.array_equal(a, b) else float("inf")
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if b.size else 0.0
    return diff / scale if scale else diff


class Run:
    """One runtime's prefill and decode runners, in the official convention."""

    def __init__(self, interpreter, prefill: int):
        self.pre = interpreter.get_signature_runner(f"prefill_{prefill}")
        self.dec = interpreter.get_signature_runner("decode")
        details = self.dec.get_input_details()
        self.cache_names = sorted(k for k in details if k.startswith("kv_cache"))
        self.caches = {k: np.zeros(details[k]["shape"], details[k]["dtype"]) for k in self.cache_names}
        self.mask = details.get("mask")

    def inputs(self, tokens, positions) -> dict:
        ins = dict(self.caches, tokens=np.array([tokens], np.int32), input_pos=np.array(positions, np.int32))
        if self.mask is not None:
            ins["mask"] = _mask(positions, int(self.mask["shape"][-1]), self.mask["dtype"])
        return ins

    def prefill(self, tokens) -> None:
        out = self.pre(**self.inputs(tokens, list(range(len(tokens)))))
        self.caches = {k: np.array(out[k]) for k in self.cache_names}

    def decode(self, token: int, position: int) -> np.ndarray:
        out = self.dec(**self.inputs([token], [position]))
        self.caches = {k: np.array(out[k]) for k in self.cache_names}
        return np.array(out["logits"])


def caches_rel(ours: Run, official: Run) -> float:
    return max(_rel(ours.caches[k], official.caches[k]) for k in official.cache_names)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--prefill", type=int, default=128, help="the prefill signature's length (prefill_N)")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    args = ap.parse_args(argv)

    from ai_edge_litert.interpreter import Interpreter as Official
    from ai_edge_litert.interpreter import OpResolverType

    from lite_numba import Interpreter

    t0 = time.perf_counter()
    official = Run(Official(model_path=args.model, num_threads=args.threads,
                            experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES),
                   args.prefill)
    ours = Run(Interpreter(model_path=args.model, num_threads=args.threads), args.prefill)
    vocab = int(official.dec.get_output_details()["logits"]["shape"][-1])
    tokens = np.random.default_rng(args.seed).integers(1, vocab, args.prefill + args.steps).tolist()
    timings = {"load_s": round(time.perf_counter() - t0, 2)}

    t1 = time.perf_counter()
    official.prefill(tokens[:args.prefill])
    t2 = time.perf_counter()
    ours.prefill(tokens[:args.prefill])
    t3 = time.perf_counter()
    timings.update(official_prefill_s=round(t2 - t1, 2), ours_prefill_s=round(t3 - t2, 2))
    prefill_cache_rel = caches_rel(ours, official)
    steps = []
    agree = 0
    for s in range(args.steps):
        pos = args.prefill + s
        want = official.decode(tokens[pos], pos)
        got = ours.decode(tokens[pos], pos)
        steps.append(_rel(got, want))
        agree += int(np.argmax(got) == np.argmax(want))
    last_cache_rel = caches_rel(ours, official)
    worst = max(steps + [prefill_cache_rel, last_cache_rel])
    result = {"model": args.model, "prefill": args.prefill, "steps": args.steps, "seed": args.seed,
              "vocab": vocab, "logits_rel_max": max(steps), "logits_rel_median": float(np.median(steps)),
              "logits_rel_per_step": [float(f"{r:.3g}") for r in steps], "argmax_agree": agree,
              "prefill_cache_rel": prefill_cache_rel, "last_cache_rel": last_cache_rel,
              "tolerance": args.tolerance, "ok": worst <= args.tolerance, **timings}
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
