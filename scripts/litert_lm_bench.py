"""LLM prefill / decode benchmark of issue 39: LiteRT-LM, the official Interpreter, lite-numba, and memory bandwidth.

One protocol for every engine: prefill a 128-token prompt, then decode 32 tokens; report prefill tokens/s, decode
tokens/s, time to first token (TTFT) and the process's peak RSS. Each measurement runs in its own process (`run` does
that with subprocesses), so that its peak RSS is its own; each prints one JSON line, so bench/ can call this script
in a subprocess and parse the last line of its output.

    # LiteRT-LM (its own venv: python3.11 -m venv /tmp/lmvenv && /tmp/lmvenv/bin/pip install litert-lm-api==0.18.1)
    /tmp/lmvenv/bin/python scripts/litert_lm_bench.py litertlm MODEL.litertlm --threads 1
    # the official Interpreter's signature runners (ai-edge-litert, default resolver: XNNPACK)
    python3.11 scripts/litert_lm_bench.py interpreter MODEL.tflite --threads 1
    # lite-numba's Interpreter, same loop (a first try: --prefill 0 --decode 1 --no-warmup: load, one decode step)
    python3.11 scripts/litert_lm_bench.py lite-numba MODEL.tflite --threads 1
    # lite-numba's KVSession (bound caches, no copy per step) on the .tflite or the .litertlm bundle
    python3.11 scripts/litert_lm_bench.py kvsession MODEL.tflite|MODEL.litertlm --threads 1
    # one core's read bandwidth (numpy sum over 512 MiB) and the decode limit it allows for a model
    python3.11 scripts/litert_lm_bench.py bandwidth [--model MODEL.tflite]
    # all of them for the models of scripts/make_llm_models.py, as a table (--engines to choose)
    python3.11 scripts/litert_lm_bench.py run [--dir ~/.cache/lite-numba/llm-models] [--threads 1,2]

LiteRT-LM: `litert_lm.Benchmark` (what `litert-lm benchmark` runs) on the .litertlm bundle, CPU backend with
`thread_count`, prefill_tokens 128 / decode_tokens 32, the prompt "w1000 w1001 ... w1127" (the synthetic
tokenizers of make_llm_models.py make one token per word; the engine pads or truncates to 128), ring buffers for
local attention on (the CLI's default), its weight cache in --cache-dir (`run`: <dir>/litertlm-cache, emptied before
each measurement; "" lets the engine choose, ":nocache" disables it). As the CLI does, one warm-up run (a full
engine creation, prefill and decode: it fills the weight cache) comes before the measured run, unless --no-warmup.
The figures are the engine's own (BenchmarkInfo: last prefill / decode tokens per second, time to first token).

Official Interpreter / lite-numba: a Python user's loop over the signature runners of the export (prefill_128, then
decode): prefill the prompt's 128 ids at positions 0..127 (mask: 0 where key position <= query position, -inf
elsewhere; caches zero), then 32 decode steps at positions 128.. feeding the last prompt id first and then each
step's argmax, every step's kv_cache_* outputs passed back as the next call's inputs (the official calling
convention, copies included). One untimed warm-up prefill and decode step first (XNNPACK packs its weights on first
use), unless --no-warmup. prefill tok/s = 128 / prefill time; decode tok/s = 32 / total decode time; TTFT = prefill
time + the first decode step. `load_s` is the interpreter's construction plus the runners (and the warm-up, shown
apart as `warmup_s`).

Peak RSS: `resource.getrusage(RUSAGE_SELF).ru_maxrss` at the end of the measuring process (Linux: KiB), in MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

PREFILL = 128
DECODE = 32
PROMPT_IDS = list(range(1000, 1000 + PREFILL))
PROMPT = " ".join(f"w{i}" for i in PROMPT_IDS)
DEFAULT_DIR = Path("~/.cache/lite-numba/llm-models").expanduser()
MODELS = ("gemma3_270m", "qwen3_0_6b")
LITERTLM_PYTHON = next((p for p in ("/tmp/lmvenv/bin/python", "/work/venv-litertlm/bin/python") if os.path.exists(p)),
                       "/tmp/lmvenv/bin/python")


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def cpu_name() -> str:
    model = family = number = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key, value = key.strip(), value.strip()
            if key == "model name" and not model:
                model = value
            elif key == "cpu family" and not family:
                family = value
            elif key == "model" and not number:
                number = value
    except OSError:
        return platform.processor()
    return f"{model} (family {family} model {number}, {os.cpu_count()} CPUs)"


# ----------------------------------------------------------------------------------------------------- LiteRT-LM
def bench_litertlm(path: str, threads: int, prefill: int, decode: int, cache_dir: str | None, warmup: bool) -> dict:
    import litert_lm

    litert_lm.set_min_log_severity(litert_lm.LogSeverity.ERROR)
    bench = litert_lm.Benchmark(
        path, backend=litert_lm.Backend.CPU(thread_count=threads), prefill_tokens=prefill, decode_tokens=decode,
        prompt=PROMPT, cache_dir=cache_dir, use_ringbuffers_local_attention=True,
    )
    t0 = time.perf_counter()
    if warmup:
        bench.run()
    warm = time.perf_counter() - t0
    info = bench.run()
    return {"engine": "litert-lm", "threads": threads, "warmup_s": round(warm, 3),
            "init_s": round(info.init_time_in_second, 3),
            "prefill_tokens": info.last_prefill_token_count,
            "prefill_tok_s": round(info.last_prefill_tokens_per_second, 2),
            "decode_tokens": info.last_decode_token_count,
            "decode_tok_s": round(info.last_decode_tokens_per_second, 2),
            "ttft_s": round(info.time_to_first_token_in_second, 4), "peak_rss_mib": round(peak_rss_mib(), 1)}


# ------------------------------------------------------------------------------------ signature-runner loop
def _mask(positions, cache: int):
    import numpy as np

    m = np.where(np.arange(cache)[None, :] <= np.asarray(positions)[:, None], 0.0, -np.inf).astype(np.float32)
    return m[None, None]


def signature_loop(interpreter, prefill: int, decode: int, warmup: bool, load_s: float) -> dict:
    """The protocol of the module docstring on an interpreter with tflite's signature-runner API."""
    import numpy as np

    t0 = time.perf_counter()
    pre = interpreter.get_signature_runner(f"prefill_{prefill}") if prefill else None
    dec = interpreter.get_signature_runner("decode")
    details = (pre or dec).get_input_details()
    cache_names = sorted(k for k in details if k.startswith("kv_cache"))
    zeros = {k: np.zeros(details[k]["shape"], details[k]["dtype"]) for k in cache_names}
    cache_len = int(details["mask"]["shape"][-1]) if "mask" in details else None
    load_s += time.perf_counter() - t0

    def prefill_inputs():
        pos = np.arange(prefill, dtype=np.int32)
        ins = dict(zeros, tokens=np.array([PROMPT_IDS[:prefill]], np.int32), input_pos=pos)
        if cache_len:
            ins["mask"] = _mask(pos, cache_len)
        return ins

    def decode_inputs(caches, token, pos):
        ins = dict(caches, tokens=np.array([[token]], np.int32), input_pos=np.array([pos], np.int32))
        if cache_len:
            ins["mask"] = _mask([pos], cache_len)
        return ins

    warm = 0.0
    if warmup:
        t0 = time.perf_counter()
        out = pre(**prefill_inputs()) if pre else zeros
        dec(**decode_inputs({k: out[k] for k in cache_names}, PROMPT_IDS[-1], prefill))
        warm = time.perf_counter() - t0
        del out
    t_prefill, caches = 0.0, dict(zeros)
    if pre:  # --prefill 0: decode only, from position 0 with zero caches
        ins = prefill_inputs()
        t0 = time.perf_counter()
        out = pre(**ins)
        t_prefill = time.perf_counter() - t0
        caches = {k: out[k] for k in cache_names}
        del out
    token, steps, tokens = PROMPT_IDS[-1], [], []
    for i in range(decode):
        ins = decode_inputs(caches, token, prefill + i)
        t0 = time.perf_counter()
        out = dec(**ins)
        steps.append(time.perf_counter() - t0)
        token = int(np.argmax(out["logits"].reshape(-1)))
        tokens.append(token)
        caches = {k: out[k] for k in cache_names}
        del out
    cache_bytes = sum(v.nbytes for v in caches.values())
    return {"load_s": round(load_s, 3), "warmup_s": round(warm, 3), "prefill_tokens": prefill,
            "prefill_tok_s": round(prefill / t_prefill, 2) if prefill else None, "decode_tokens": decode,
            "decode_tok_s": round(decode / sum(steps), 2) if steps else None,
            "ttft_s": round(t_prefill + (steps[0] if steps else 0.0), 4),
            "decode_step_ms_min": round(1e3 * min(steps), 2) if steps else None,
            "decode_steps_ms": [round(1e3 * t, 1) for t in steps[:4]],
            "kv_cache_mib": round(cache_bytes / 2**20, 1), "tokens": tokens[:8],
            "peak_rss_mib": round(peak_rss_mib(), 1)}


def bench_interpreter(path: str, threads: int, prefill: int, decode: int, warmup: bool) -> dict:
    """The official Interpreter's signature loop; with LITE_NUMBA_BENCH_OFFICIAL_ISA=avx2 or avxvnni (unset: a
    LITE_NUMBA_ISA forcing one of them, as in bench/) its XNNPACK and ruy see only that level
    (bench/official_isa.py, checked after the first interpreter): the XNNPACK kernels an AVX2-only CPU would
    run, which LiteRT-LM's stripped library cannot be restricted to."""
    from ai_edge_litert import interpreter as tfl

    level = (os.environ.get("LITE_NUMBA_BENCH_OFFICIAL_ISA") or "").strip().lower()
    if not level:  # as bench/conftest.py: follow a forced LITE_NUMBA_ISA (scripts/as_level.py sets it)
        level = (os.environ.get("LITE_NUMBA_ISA") or "").strip().lower()
    official_isa = None
    if level in ("avx2", "avxvnni"):
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
        import official_isa  # lazy: bench/'s restriction of the official runtime, only when asked for

        official_isa.restrict(level)
    t0 = time.perf_counter()
    it = tfl.Interpreter(model_path=path, num_threads=threads)
    res = signature_loop(it, prefill, decode, warmup, time.perf_counter() - t0)
    isa = official_isa.verify() if official_isa else "native"
    return {"engine": "interpreter (XNNPACK)", "threads": threads, "official_isa": isa, **res}


def bench_lite_numba(path: str, threads: int, prefill: int, decode: int, warmup: bool) -> dict:
    from lite_numba import Interpreter

    t0 = time.perf_counter()
    try:
        it = Interpreter(model_path=path, num_threads=threads)
    except TypeError:
        it = Interpreter(model_path=path)
    res = signature_loop(it, prefill, decode, warmup, time.perf_counter() - t0)
    return {"engine": "lite-numba", "threads": threads, **res}


def bench_kvsession(path: str, threads: int, prefill: int, decode: int, warmup: bool) -> dict:
    """lite_numba.llm.KVSession (caches bound: nothing copied per step) on a .tflite or a .litertlm bundle: prefill
    the 128 prompt ids, then `decode` greedy steps from the prompt's last id at position 128 (the protocol above)."""
    import numpy as np

    from lite_numba import Interpreter
    from lite_numba.llm.litertlm import LitertlmFile, is_litertlm
    from lite_numba.llm.session import KVSession

    t0 = time.perf_counter()
    if is_litertlm(path):
        it = LitertlmFile(path).interpreter(num_threads=threads)
    else:
        it = Interpreter(model_path=path, num_threads=threads)
    session = KVSession(it)
    load_s = time.perf_counter() - t0

    def turn():
        session.reset()
        t0 = time.perf_counter()
        if prefill:
            session.feed(PROMPT_IDS[:prefill])
        t_pre = time.perf_counter() - t0
        token, steps, tokens = PROMPT_IDS[-1], [], []
        for _ in range(decode):
            t0 = time.perf_counter()
            logits = session.step(token)
            token = int(np.argmax(logits))
            steps.append(time.perf_counter() - t0)
            tokens.append(token)
        return t_pre, steps, tokens

    warm = 0.0
    if warmup:
        t0 = time.perf_counter()
        session.feed(PROMPT_IDS[:prefill]) if prefill else None
        session.step(PROMPT_IDS[-1])
        warm = time.perf_counter() - t0
    t_prefill, steps, tokens = turn()
    return {"engine": "lite-numba KVSession", "threads": threads, "load_s": round(load_s, 3),
            "warmup_s": round(warm, 3), "prefill_tokens": prefill,
            "prefill_tok_s": round(prefill / t_prefill, 2) if prefill else None, "decode_tokens": decode,
            "decode_tok_s": round(decode / sum(steps), 2) if steps else None,
            "ttft_s": round(t_prefill + (steps[0] if steps else 0.0), 4),
            "decode_step_ms_min": round(1e3 * min(steps), 2) if steps else None,
            "decode_steps_ms": [round(1e3 * t, 1) for t in steps[:4]],
            "copies": session.copies(), "tokens": tokens[:8], "peak_rss_mib": round(peak_rss_mib(), 1)}


# ----------------------------------------------------------------------------------------------------- bandwidth
def streamed_weight_bytes(path: str, signature: str = "decode") -> dict:
    """Bytes of the constant weights a decode step reads in full: every distinct constant buffer feeding a
    FULLY_CONNECTED / BATCH_MATMUL / CONV of the signature's subgraph (an EMBEDDING_LOOKUP reads one row only)."""
    import numpy as np
    from ai_edge_litert import schema_py_generated as s

    data = np.memmap(path, np.uint8, mode="r")
    m = s.Model.GetRootAs(data, 0)
    sub = None
    for i in range(m.SignatureDefsLength()):
        sd = m.SignatureDefs(i)
        if sd.SignatureKey().decode() == signature:
            sub = sd.SubgraphIndex()
    if sub is None:
        raise ValueError(f"{path}: no signature {signature!r}")
    sg = m.Subgraphs(sub)
    heavy = {s.BuiltinOperator.FULLY_CONNECTED, s.BuiltinOperator.BATCH_MATMUL, s.BuiltinOperator.CONV_2D}
    seen, total = set(), 0
    for j in range(sg.OperatorsLength()):
        op = sg.Operators(j)
        oc = m.OperatorCodes(op.OpcodeIndex())
        if max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode()) not in heavy:
            continue
        for k in range(op.InputsLength()):
            ti = op.Inputs(k)
            if ti < 0:
                continue
            t = sg.Tensors(ti)
            b = t.Buffer()
            if b in seen or b == 0:
                continue
            buf = m.Buffers(b)
            size = buf.DataLength() or (buf.Size() if buf.Offset() > 1 else 0)
            if size:
                seen.add(b)
                total += size
    return {"weights_streamed_bytes": int(total), "weights_streamed_mib": round(total / 2**20, 1),
            "weight_buffers": len(seen)}


def bandwidth(repeats: int = 15) -> dict:
    """One core's read bandwidth over a 512 MiB array (pages touched beforehand), best of `repeats`: the numpy float32
    sum of issue 39's definition, and the uint8 max of the same bytes (numpy's float32 sum is not always memory-bound:
    on a busy 2-vCPU Xeon family 6 model 207 it read 3.9 GiB/s where the uint8 max read 8.0 and LiteRT-LM's decode
    streamed 7.5). The decode limit uses the larger."""
    import numpy as np

    a = np.ones(512 * 2**20 // 4, np.float32)
    u8 = a.view(np.uint8)
    res = {"bytes": a.nbytes}
    for key, fn in (("sum_f32", a.sum), ("max_u8", u8.max)):
        fn()
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        res[f"{key}_gib_s"] = round(a.nbytes / best / 2**30, 2)
    res["bandwidth_gib_s"] = max(res["sum_f32_gib_s"], res["max_u8_gib_s"])
    return res


# ----------------------------------------------------------------------------------------------------- driver
def _child(args: list[str], python: str) -> dict:
    cmd = [python, str(Path(__file__).resolve()), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail)[-400:], "cmd": " ".join(args)}
    return json.loads(lines[-1])


def run_all(args) -> None:
    folder = Path(args.dir).expanduser()
    threads = [int(t) for t in args.threads.split(",")]
    engines = args.engines.split(",")
    rows = []
    bw = _child(["bandwidth"], sys.executable)
    print(json.dumps({"cpu": cpu_name(), **bw}), flush=True)
    for name in args.models.split(","):
        tfl, bundle = folder / f"{name}.tflite", folder / f"{name}.litertlm"
        w = _child(["weights", str(tfl)], sys.executable)
        limit = bw.get("bandwidth_gib_s", 0) * 2**30 / w["weights_streamed_bytes"] if "weights_streamed_bytes" in w \
            else None
        print(json.dumps({"model": name, **w, "decode_limit_tok_s": round(limit, 1) if limit else None}), flush=True)
        for t in threads:
            common = ["--threads", str(t), "--prefill", str(args.prefill), "--decode", str(args.decode)]
            for engine in engines:
                if engine == "litertlm":
                    r = _child(["litertlm", str(bundle), *common, "--cache-dir", args.cache_dir], args.litertlm_python)
                elif engine == "kvsession" and args.bundle:
                    r = _child(["kvsession", str(bundle), *common], sys.executable)
                else:
                    r = _child([engine, str(tfl), *common], sys.executable)
                r.update(model=name, limit_tok_s=round(limit, 1) if limit else None)
                rows.append(r)
                print(json.dumps(r), flush=True)
    print()
    print(f"CPU: {cpu_name()}; one core's read bandwidth: numpy float32 sum {bw.get('sum_f32_gib_s')} GiB/s, uint8 max"
          f" {bw.get('max_u8_gib_s')} GiB/s (limit = the larger / weight bytes streamed per token)")
    print(f"lite-numba kernel path: LITE_NUMBA_ISA={os.environ.get('LITE_NUMBA_ISA') or 'best of this CPU'}; official "
          f"Interpreter: {next((r['official_isa'] for r in rows if r.get('official_isa')), 'native')}; LiteRT-LM: "
          "its own choice (its library is stripped: it cannot be restricted)")
    print("| model | threads | engine | prefill tok/s | decode tok/s | TTFT s | peak RSS MiB | decode limit tok/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | | {r['cmd'].split()[0]} | error: {r['error'][:120]} | | | | |")
            continue
        print(f"| {r['model']} | {r['threads']} | {r['engine']} | {r['prefill_tok_s']} | {r['decode_tok_s']} | "
              f"{r['ttft_s']} | {r['peak_rss_mib']} | {r['limit_tok_s']} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("litertlm", "interpreter", "lite-numba", "kvsession"):
        p = sub.add_parser(name)
        p.add_argument("model")
        p.add_argument("--threads", type=int, default=1)
        p.add_argument("--prefill", type=int, default=PREFILL)
        p.add_argument("--decode", type=int, default=DECODE)
        p.add_argument("--no-warmup", action="store_true")
        if name == "litertlm":
            p.add_argument("--cache-dir", default=None, help="LiteRT-LM's weight cache folder ('' = its default)")
    p = sub.add_parser("bandwidth")
    p.add_argument("--model", default=None, help="also the decode limit for this .tflite")
    p = sub.add_parser("weights")
    p.add_argument("model")
    p = sub.add_parser("run")
    p.add_argument("--dir", default=str(DEFAULT_DIR))
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--threads", default="1,2")
    p.add_argument("--engines", default="litertlm,interpreter,kvsession",
                   help="litertlm,interpreter,lite-numba,kvsession")
    p.add_argument("--prefill", type=int, default=PREFILL)
    p.add_argument("--decode", type=int, default=DECODE)
    p.add_argument("--cache-dir", default=str(DEFAULT_DIR / "litertlm-cache"))
    p.add_argument("--litertlm-python", default=LITERTLM_PYTHON)
    p.add_argument("--bundle", action="store_true", help="kvsession runs the .litertlm bundle, not the .tflite")
    args = ap.parse_args()

    if args.cmd == "run":
        run_all(args)
        return
    if args.cmd == "bandwidth":
        res = {"cpu": cpu_name(), **bandwidth()}
        if args.model:
            w = streamed_weight_bytes(args.model)
            res.update(w, decode_limit_tok_s=round(res["bandwidth_gib_s"] * 2**30 / w["weights_streamed_bytes"], 1))
    elif args.cmd == "weights":
        res = streamed_weight_bytes(args.model)
    elif args.cmd == "litertlm":
        cache = args.cache_dir
        if cache:
            shutil.rmtree(cache, ignore_errors=True)
            os.makedirs(cache, exist_ok=True)
        res = bench_litertlm(args.model, args.threads, args.prefill, args.decode, cache, not args.no_warmup)
    elif args.cmd == "interpreter":
        res = bench_interpreter(args.model, args.threads, args.prefill, args.decode, not args.no_warmup)
    elif args.cmd == "kvsession":
        res = bench_kvsession(args.model, args.threads, args.prefill, args.decode, not args.no_warmup)
    else:
        res = bench_lite_numba(args.model, args.threads, args.prefill, args.decode, not args.no_warmup)
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
