"""`lite-numba benchmark` on a KV-cache LLM (litert-torch's `prefill_<T>` / `decode` signatures): prefill and decode
tokens per second, time to first token and peak RSS, as `litert-lm benchmark` reports them.

    lite-numba benchmark --graph model.tflite|bundle.litertlm [--prefill_tokens N] [--decode_tokens M]
                         [--num_threads T] [--num_runs R] [--seed S] [--compare_official]

A .litertlm bundle (LiteRT-LM's file, as `litert-lm benchmark --model_path` takes it) runs its prefill_decode model
section (llm.litertlm). Taken for a .litertlm, or when the model has those signatures and no --signature_to_run_for
is given, or when --prefill_tokens /
--decode_tokens (or LiteRT-LM's --benchmark_prefill_tokens / --benchmark_decode_tokens) are. A run: N seeded random
token ids written into an empty cache by the prefill signatures (llm.session.KVSession.feed), then M greedy decode
steps; the first run also compiles (reported as initialisation), then R timed runs, each turn printed and the
medians summarised. The caches are bound buffers (no copy per step); the same decode steps are also run through
the official calling convention (each step's caches passed back as the next step's inputs) and both are reported
with the bytes of cache each copies per step. --compare_official runs the same tokens through ai_edge_litert's
signature runners (XNNPACK, then the builtin kernels) in this process, a Python user's loop, and checks the tokens.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import sys
import time
from typing import Any, TextIO

import numpy as np

from ..format.model import load_model, read_model_bytes
from ..llm.litertlm import LitertlmError, LitertlmFile, is_litertlm
from ..llm.session import KVSession, chunk_plan, step_inputs
from ..llm.signatures import KVSpec, find_kv_signatures

__all__ = ["build_parser", "is_llm_command_line", "main", "run_llm_benchmark"]

_LLM_FLAGS = ("--prefill_tokens", "--decode_tokens", "--benchmark_prefill_tokens", "--benchmark_decode_tokens")


def _flag(argv: list[str], name: str) -> str | None:
    for k, a in enumerate(argv):
        if a == name and k + 1 < len(argv):
            return argv[k + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def is_llm_command_line(argv: list[str]) -> bool:
    """Whether a `lite-numba benchmark` command line asks for the LLM benchmark: an LLM flag, or a --graph that is a
    KV-cache model with no --signature_to_run_for."""
    if any(a.split("=", 1)[0] in _LLM_FLAGS for a in argv):
        return True
    graph = _flag(argv, "--graph") or _flag(argv, "--model_path")
    if not graph or _flag(argv, "--signature_to_run_for") or not os.path.isfile(graph):
        return False
    if is_litertlm(graph):
        return True
    try:
        find_kv_signatures(load_model(read_model_bytes(graph)))
    except (ValueError, OSError):
        return False
    return True


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="lite-numba benchmark", description="Benchmark a KV-cache LLM (prefill and "
                                 "decode signatures) like litert-lm benchmark.")
    ap.add_argument("--graph", "--model_path", dest="graph", required=True,
                    help="the .tflite model file or a .litertlm bundle")
    ap.add_argument("--prefill_tokens", "--benchmark_prefill_tokens", dest="prefill_tokens", type=int, default=-1,
                    help="prompt tokens written by the prefill signatures (default: the longest prefill length)")
    ap.add_argument("--decode_tokens", "--benchmark_decode_tokens", dest="decode_tokens", type=int, default=32,
                    help="greedy decode steps (default 32)")
    ap.add_argument("--num_threads", type=int, default=1, help="threads (-1: one)")
    ap.add_argument("--num_runs", type=int, default=3, help="timed runs after the first (default 3)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random prompt")
    ap.add_argument("--compare_official", nargs="?", const="true", default="false",
                    help="also run ai_edge_litert's signature runners (XNNPACK and builtin) on the same tokens")
    return ap


def _official_session(model: dict[str, Any], spec: KVSpec, num_threads: int, builtin: bool):
    """(feed, step) over ai_edge_litert's signature runners, a Python user's loop: each call's caches passed back
    as the next call's inputs. `model`: {"model_path": ...} or {"model_content": bytes}."""
    from ai_edge_litert import interpreter as lit  # lazy: the official runtime is only needed with this flag

    kwargs: dict[str, Any] = {**model, "num_threads": num_threads}
    if builtin:
        kwargs["experimental_op_resolver_type"] = lit.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    it = lit.Interpreter(**kwargs)
    runners = {key: it.get_signature_runner(key) for key in [*spec.prefill.values(), spec.decode]}
    state = {"caches": {n: np.zeros(shape, dt) for n, (dt, shape) in spec.caches.items()}, "pos": 0}

    def run(key: str, tokens: list[int], length: int) -> dict:
        out = runners[key](**state["caches"], **step_inputs(spec, tokens, length, state["pos"]))
        state["caches"] = {n: out[n] for n in spec.caches}
        return out

    def feed(tokens: list[int]) -> None:
        done = 0
        for length, count in chunk_plan(spec, len(tokens), state["pos"]):
            run(spec.prefill[length] if length > 1 else spec.decode, tokens[done:done + count], length)
            state["pos"] += count
            done += count

    def step(token: int) -> np.ndarray:
        out = run(spec.decode, [token], 1)
        state["pos"] += 1
        return out[spec.logits].reshape(-1)

    return feed, step


def _turn(feed, step, prompt: list[int], decode: int) -> tuple[float, float, float, list[int]]:
    """(prefill seconds, seconds to the first token, decode seconds, tokens) of one greedy turn."""
    t0 = time.perf_counter()
    feed(prompt[:-1])
    t1 = time.perf_counter()
    token, tokens, ttft = prompt[-1], [], 0.0
    for k in range(decode):
        token = int(np.argmax(step(token)))
        tokens.append(token)
        if k == 0:
            ttft = time.perf_counter() - t0
    return t1 - t0, ttft, time.perf_counter() - t1, tokens


def cpu_name() -> str:
    """The CPU's model name with its family and model numbers (Linux /proc/cpuinfo), else the platform's."""
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                info.setdefault(k.strip(), v.strip())
    except OSError:
        return platform.processor() or platform.machine()
    fam = f" (family {info['cpu family']}, model {info.get('model', '?')})" if "cpu family" in info else ""
    return info.get("model name", platform.machine()) + fam


def _ms(s: float) -> str:
    return f"{s * 1e3:.2f}ms" if s < 1 else f"{s:.2f}s"


def _bytes(n: float) -> str:
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{int(n)} B"


def _report(out: TextIO, label: str, turns: list[tuple], n_prefill: int, n_decode: int, init: list[tuple]) -> dict:
    w = out.write
    w(f"BenchmarkInfo ({label}):\n")
    w(f"  Init Phases ({len(init)}):\n")
    for name, secs in init:
        w(f"    - {name}: {secs * 1e3:.2f} ms\n")
    w("  " + "-" * 50 + "\n")
    w(f"  Time to first token: {statistics.median(t[1] for t in turns):.4f} s\n")
    w("  " + "-" * 50 + "\n")
    w(f"  Prefill Turns (Total {len(turns)} turns):\n")
    for k, (pre, _, _, _) in enumerate(turns, 1):
        w(f"    Prefill Turn {k}: Processed {n_prefill} tokens in {_ms(pre)} duration.\n")
        w(f"      Prefill Speed: {n_prefill / pre if pre > 0 else 0:.2f} tokens/sec.\n")
    w("  " + "-" * 50 + "\n")
    w(f"  Decode Turns (Total {len(turns)} turns):\n")
    for k, (_, _, dec, _) in enumerate(turns, 1):
        w(f"    Decode Turn {k}: Processed {n_decode} tokens in {_ms(dec)} duration.\n")
        w(f"      Decode Speed: {n_decode / dec if dec > 0 else 0:.2f} tokens/sec.\n")
    w("  " + "-" * 50 + "\n")
    pre = statistics.median(n_prefill / t[0] if t[0] > 0 else 0 for t in turns)
    dec = statistics.median(n_decode / t[2] if t[2] > 0 else 0 for t in turns)
    return {"prefill": pre, "decode": dec, "ttft": statistics.median(t[1] for t in turns), "tokens": turns[-1][3]}


def run_llm_benchmark(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run the LLM benchmark described by parsed flags; returns the exit code."""
    out = out if out is not None else sys.stdout
    from ..api.interpreter import Interpreter  # lazy: Numba and the kernels load only when a benchmark runs

    if not os.path.isfile(args.graph):
        out.write(f"ERROR: Graph file {args.graph} does not exist\n")
        return 1
    threads = 1 if args.num_threads in (-1, 0) else args.num_threads
    t0 = time.perf_counter()
    bundle = None
    what = f"{args.graph} ({os.path.getsize(args.graph) / 1e6:.2f} MB)"
    try:
        if is_litertlm(args.graph):
            bundle = LitertlmFile(args.graph)
            section = bundle.model_section()
            interp = bundle.interpreter(num_threads=threads)
            what += f", {section.describe()}"
        else:
            interp = Interpreter(model_path=args.graph, num_threads=threads)
        session = KVSession(interp)
    except (ValueError, LitertlmError) as e:
        out.write(f"ERROR: {e}\n")
        return 1
    load = time.perf_counter() - t0
    spec = session.spec
    n_prefill = args.prefill_tokens if args.prefill_tokens >= 0 else max(spec.prefill_lengths, default=0)
    n_decode = args.decode_tokens
    if n_prefill + 1 + n_decode > spec.cache_length + 1:
        out.write(f"ERROR: {n_prefill} prefill + {n_decode} decode tokens need {n_prefill + n_decode} positions; the "
                  f"cache holds {spec.cache_length}\n")
        return 1
    rng = np.random.default_rng(args.seed)
    vocab = int(np.prod(session.runners[spec.decode].get_output_details()[spec.logits]["shape"][-1:]))
    prompt = [int(t) for t in rng.integers(0, vocab, n_prefill + 1)]
    cache_bytes = sum(int(np.prod(shape)) * np.dtype(dt).itemsize for dt, shape in spec.caches.values())
    out.write(f"lite-numba LLM benchmark: {what}, signatures "
              f"{', '.join(spec.prefill[t] for t in spec.prefill_lengths)} + {spec.decode}, {len(spec.caches)} caches "
              f"of {spec.cache_length} positions ({_bytes(cache_bytes)}), {threads} thread(s), {cpu_name()}\n")
    out.write(f"Prompt: {n_prefill} prefill tokens + 1, then {n_decode} decode tokens (greedy), seed {args.seed}\n")

    def ours():
        session.reset()
        return session.feed, session.step

    t1 = time.perf_counter()
    _turn(*ours(), prompt, n_decode)
    init = [("Model loading", load), ("Compilation and first run", time.perf_counter() - t1)]
    turns = [_turn(*ours(), prompt, n_decode) for _ in range(max(args.num_runs, 1))]
    copies = session.copies()
    res = _report(out, "lite-numba, cache in bound buffers", turns, n_prefill, n_decode, init)

    plain = interp.get_signature_runner(spec.decode)  # the official convention on lite-numba, decode steps only
    caches = {n: b.copy() for n, b in session.buffers.items()}
    plain(**caches, **step_inputs(spec, [prompt[-1]], 1, session.position - n_decode))  # (compiled already)
    steps, t2 = min(n_decode, 16), time.perf_counter()
    for k in range(steps):
        o = plain(**caches, **step_inputs(spec, [prompt[-1]], 1, n_prefill + k))
        caches = {n: o[n] for n in spec.caches}
    plain_rate = steps / (time.perf_counter() - t2)
    plain_cache = sum(plain.last_copies_by_name.get(n, 0) for n in spec.caches)
    out.write(f"Summary (median of {len(turns)}): prefill {res['prefill']:.2f} tokens/s, decode {res['decode']:.2f} "
              f"tokens/s, time to first token {res['ttft'] * 1e3:.2f} ms\n")
    out.write(f"Peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MiB\n")
    out.write(f"KV cache copied per decode step: {_bytes(copies['cache'])} with the bound buffers; "
              f"{_bytes(plain_cache)} through the official calling convention (outputs fed back as inputs, "
              f"{plain_rate:.2f} tokens/s here), which the official runtime pays three times "
              f"({_bytes(3 * cache_bytes)}: in, through the graph, out)\n")
    if str(args.compare_official).lower() in ("1", "true", "yes", "on"):
        official_model: dict[str, Any] = {"model_path": args.graph} if bundle is None else {
            "model_content": bytes(bundle.model_content())}  # the official Interpreter takes the section's bytes
        for label, builtin in (("official XNNPACK (default)", False), ("official builtin kernels", True)):
            feed, step = _official_session(official_model, spec, threads, builtin)
            _turn(feed, step, prompt, n_decode)
            theirs = []
            for _ in range(max(args.num_runs, 1)):
                feed, step = _official_session(official_model, spec, threads, builtin)
                theirs.append(_turn(feed, step, prompt, n_decode))
            ref = _report(out, label, theirs, n_prefill, n_decode, [])
            same = "same tokens" if ref["tokens"] == res["tokens"] else "OTHER TOKENS"
            out.write(f"{label}: prefill {ref['prefill']:.2f} tokens/s, decode {ref['decode']:.2f} tokens/s; "
                      f"lite-numba / {label}: prefill x{res['prefill'] / max(ref['prefill'], 1e-9):.2f}, decode "
                      f"x{res['decode'] / max(ref['decode'], 1e-9):.2f} ({same})\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:
        print(f"WARNING: Unconsumed cmdline flags: {' '.join(unknown)}", file=sys.stderr)
    return run_llm_benchmark(args)
