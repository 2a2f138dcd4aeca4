"""Interleaved timing of the MASKED_ATTENTION rewrite (lite_numba/runtime/fusion.py fuse_masked_attention) on a
litert-torch export: one process, one KVSession per setting of fusion.ATTENTION_MIN_ROWS (the rewrite applies to
attention products of more query rows than that; a huge value turns it off), their prefills and decode steps
alternated round by round, so the machine's load falls on every setting alike.

    python scripts/masked_attention_bench.py MODEL.tflite [--settings off,16,0] [--rounds 5] [--threads 1]

Prints per setting the median prefill time (wall and thread CPU) of the 128-token prompt at position 0 and the median
decode step at positions 128.. (32 steps per round), as JSON lines, and the load average before and after."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

PROMPT_IDS = list(range(1000, 1128))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--settings", default="off,16")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    import lite_numba.runtime.fusion as fusion
    from lite_numba import Interpreter
    from lite_numba.llm.session import KVSession

    sessions = {}
    for name in a.settings.split(","):
        fusion.ATTENTION_MIN_ROWS = 10**9 if name == "off" else int(name)
        s = KVSession(Interpreter(model_path=a.model, num_threads=a.threads))
        s.feed(PROMPT_IDS)
        s.step(PROMPT_IDS[-1])  # every signature allocated (and rewritten) under this setting
        sessions[name] = s
    load0 = os.getloadavg()
    res = {n: {"prefill_wall": [], "prefill_cpu": [], "step_wall": [], "step_cpu": []} for n in sessions}
    tokens = {}
    for _ in range(a.rounds):
        for name, s in sessions.items():
            s.reset()
            w, c = time.perf_counter(), time.thread_time()
            s.feed(PROMPT_IDS)
            res[name]["prefill_wall"].append(time.perf_counter() - w)
            res[name]["prefill_cpu"].append(time.thread_time() - c)
            tok, seq = PROMPT_IDS[-1], []
            for _ in range(a.decode):
                w, c = time.perf_counter(), time.thread_time()
                logits = s.step(tok)
                res[name]["step_wall"].append(time.perf_counter() - w)
                res[name]["step_cpu"].append(time.thread_time() - c)
                tok = int(np.argmax(logits))
                seq.append(tok)
            tokens.setdefault(name, seq)
    for name, r in res.items():
        med = {k: statistics.median(v) for k, v in r.items()}
        print(json.dumps({"setting": name, "prefill_tok_s_wall": round(128 / med["prefill_wall"], 1),
                          "prefill_tok_s_cpu": round(128 / med["prefill_cpu"], 1),
                          "decode_step_ms_wall": round(1e3 * med["step_wall"], 2),
                          "decode_step_ms_cpu": round(1e3 * med["step_cpu"], 2),
                          "same_tokens": tokens[name] == tokens[next(iter(tokens))]}))
    print(json.dumps({"load_before": load0, "load_after": os.getloadavg()}))


if __name__ == "__main__":
    main()
