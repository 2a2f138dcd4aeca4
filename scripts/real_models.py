"""Survey: run every .tflite under a directory in lite-numba and in the official runtime, compare, print a table.

Usage: python scripts/real_models.py DIR [--runs N] [--invokes K] [--seed S] [--dyn N] [--timeout SEC] [--json F]
                                         [--no-isolate] [--interm] [--threads T] [NAME-GLOB ...]

For each model: construct lite_numba.Interpreter (load), allocate_tensors (alloc), invoke (run) and compare every
output of K consecutive invokes on identical random inputs (K > 1 exercises state carried across invokes, e.g.
streaming models with variables) with the official runtime's builtin kernels (BUILTIN_WITHOUT_DEFAULT_DELEGATES):
float within 1e-4 * max(1, max|ref|); integer outputs are reported as exact-match fraction and max step (the goal is
bit-exact). Then both interpreters are timed over N invokes (best of N, rough: the machine is shared).

Inputs: float inputs uniform in [-1, 1] (image range of most vision models), quantized int8/uint8 inputs uniform
over their whole range, other integer inputs small (0..3), bool random. Dimensions that are -1 in the input's
shape signature are resized: the first to 1, others to --dyn (default 1280, one audio chunk for audio front ends).

Cold start: the first allocate of a model compiles its runner (minutes for graphs of hundreds of nodes on a loaded
machine); --executor python checks numerics without compiling runners.

On a mismatch, both runtimes run once more keeping every intermediate tensor (experimental_preserve_all_tensors) and
the first op whose output differs is named (column detail). Timing also covers the official runtime with its default
delegates (XNNPACK, single thread): column 'xnnpack ms'.

Each model runs in its own child process (a crash or hang in one model is reported, not fatal) unless --no-isolate.
No expectations are hard-coded: the table is what was observed.
"""

from __future__ import annotations

import argparse
import collections
import fnmatch
import json
import os
import subprocess
import sys
import time
import traceback

import numpy as np

FLOAT_TOL = 1e-4


def _first_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return f"{type(e).__name__}: {s[0] if s else ''}"[:300]


def op_census(path: str) -> str:
    """'OP xN, ...' over all subgraphs, from our loader (falls back to the official runtime's op list)."""
    try:
        from lite_numba.format.model import load_model

        plan = load_model(path)
        c = collections.Counter(n.op_name for sg in plan.subgraphs for n in sg.nodes)
    except Exception:  # noqa: BLE001 - survey: the loader failing is reported in the 'load' column
        try:
            from ai_edge_litert import interpreter as lit

            it = lit.Interpreter(model_path=path)
            c = collections.Counter(o["op_name"] for o in it._get_ops_details())
        except Exception:  # noqa: BLE001
            return "?"
    return ",".join(f"{k}x{v}" if v > 1 else k for k, v in sorted(c.items(), key=lambda kv: -kv[1]))


def make_inputs(details: list[dict], rng: np.random.Generator, dyn: int) -> list[np.ndarray]:
    arrays = []
    for d in details:
        sig = list(d.get("shape_signature", d["shape"]))
        shape = [int(s) for s in d["shape"]]
        for k, s in enumerate(sig):
            if s == -1:
                shape[k] = 1 if k == 0 else dyn
        dt = np.dtype(d["dtype"])
        scales = d.get("quantization_parameters", {}).get("scales", [])
        if dt.kind == "f":
            x = rng.uniform(-1.0, 1.0, size=shape).astype(dt)
        elif dt.kind == "b":
            x = rng.integers(0, 2, size=shape).astype(bool)
        elif dt in (np.dtype(np.int8), np.dtype(np.uint8)) and len(scales):
            info = np.iinfo(dt)
            x = rng.integers(info.min, info.max + 1, size=shape).astype(dt)
        elif dt.kind in "iu":
            x = rng.integers(0, 4, size=shape).astype(dt)
        else:
            raise TypeError(f"no random input for dtype {dt}")
        arrays.append(x)
    return arrays


def compare(outs: list[np.ndarray], refs: list[np.ndarray]) -> tuple[bool, str]:
    ok = True
    notes = []
    for k, (o, r) in enumerate(zip(outs, refs)):
        if o.shape != r.shape or o.dtype != r.dtype:
            return False, f"out{k}: ours {o.dtype}{list(o.shape)} vs ref {r.dtype}{list(r.shape)}"
        if r.size == 0:
            continue
        if r.dtype.kind in "iub":
            diff = np.abs(o.astype(np.int64) - r.astype(np.int64))
            exact = float(np.mean(diff == 0))
            step = int(diff.max())
            if exact < 1.0:
                ok = False
                notes.append(f"out{k} exact={exact:.4f} step={step}")
        else:
            a, b = o.astype(np.float64), r.astype(np.float64)
            same = (a == b) | (np.isnan(a) & np.isnan(b))
            with np.errstate(invalid="ignore"):
                d = np.where(same, 0.0, np.abs(a - b))
            d[np.isnan(d)] = np.inf
            fin = np.abs(b[np.isfinite(b)])
            scale = max(1.0, float(fin.max()) if fin.size else 0.0)
            rel = float(d.max()) / scale
            if not rel <= FLOAT_TOL:
                ok = False
            notes.append(f"out{k} rel={rel:.1e}")
    if all(r.dtype.kind in "iub" for r in refs) and ok:
        notes.append("bit-exact")
    return ok, "; ".join(notes) if len(notes) <= 3 else "; ".join(notes[:2] + [f"... {len(notes)} outputs, worst "
                                                                                + max(notes, key=_rel_of)])


def _rel_of(note: str) -> float:
    try:
        return float(note.split("rel=")[1]) if "rel=" in note else 2.0
    except (IndexError, ValueError):
        return 0.0


def _timed(fn, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def survey_one(path: str, runs: int, invokes: int, seed: int, dyn: int, locate: bool = True,
               interm: bool = False) -> dict:
    """Everything observed for one model (never raises)."""
    from lite_numba import Interpreter
    from lite_numba.testing import official_interpreter  # noqa: F401 - (imports ai_edge_litert lazily)

    row: dict = {"model": path, "ops": op_census(path), "load": "", "alloc": "", "run": "", "match": "",
                 "detail": "", "ours_ms": None, "official_ms": None, "xnnpack_ms": None, "compile_s": None}
    # Official runtime first: whether it can run the model at all.
    try:
        from ai_edge_litert import interpreter as lit

        off = lit.Interpreter(model_path=path, num_threads=1,
                              experimental_op_resolver_type=lit.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        off_details = off.get_input_details()
        rng = np.random.default_rng(seed)
        feeds = [make_inputs(off_details, rng, dyn) for _ in range(invokes)]
        for d, x in zip(off_details, feeds[0]):
            if tuple(int(s) for s in d["shape"]) != x.shape:
                off.resize_tensor_input(d["index"], list(x.shape), strict=False)
        off.allocate_tensors()
        refs = []
        for feed in feeds:
            for d, x in zip(off_details, feed):
                off.set_tensor(d["index"], x)
            off.invoke()
            refs.append([np.array(off.get_tensor(d["index"]), copy=True) for d in off.get_output_details()])
    except Exception as e:  # noqa: BLE001
        off, refs, feeds = None, None, None
        row["detail"] = f"official runtime fails: {_first_line(e)}"

    t0 = time.perf_counter()
    try:
        ours = Interpreter(model_path=path, num_threads=int(os.environ.get("REAL_MODELS_THREADS", "0")) or None)
        row["load"] = "yes"
    except Exception as e:  # noqa: BLE001
        row["load"] = "NO"
        row["detail"] = (row["detail"] + " | " if row["detail"] else "") + "ours: " + _first_line(e)
        return row
    try:
        details = ours.get_input_details()
        if feeds is None:
            feeds = [make_inputs(details, np.random.default_rng(seed), dyn)]
        for d, x in zip(details, feeds[0]):
            if tuple(int(s) for s in d["shape"]) != x.shape:
                ours.resize_tensor_input(d["index"], list(x.shape))
        ours.allocate_tensors()
        row["alloc"] = "yes"
        row["compile_s"] = round(time.perf_counter() - t0, 1)
    except Exception as e:  # noqa: BLE001
        row["alloc"] = "NO"
        row["detail"] = (row["detail"] + " | " if row["detail"] else "") + "ours: " + _first_line(e)
        return row
    try:
        outs = []
        for feed in feeds:
            for d, x in zip(details, feed):
                ours.set_tensor(d["index"], x)
            ours.invoke()
            outs.append([ours.get_tensor(d["index"]) for d in ours.get_output_details()])
        row["run"] = "yes"
    except Exception as e:  # noqa: BLE001
        row["run"] = "NO"
        row["detail"] = (row["detail"] + " | " if row["detail"] else "") + "ours: " + _first_line(e)
        return row
    if refs is None:
        row["match"] = "n/a"
        return row
    results = [compare(o, r) for o, r in zip(outs, refs)]
    bad = [(k, note) for k, (ok, note) in enumerate(results) if not ok]
    row["match"] = "NO" if bad else "yes"
    if bad:
        row["detail"] = f"invoke {bad[0][0] + 1}/{len(results)}: {bad[0][1]}"
    else:
        row["detail"] = (f"{len(results)} invokes; " if len(results) > 1 else "") + results[-1][1]
    if (bad and locate) or interm:
        try:
            row["first_diverging"] = first_diverging(path, feeds[0])
            if bad and row["first_diverging"].startswith("none"):
                row["first_diverging"] += ": the divergence is only in the compiled/fused path"
        except Exception as e:  # noqa: BLE001
            row["first_diverging"] = "locate failed: " + _first_line(e)
        row["detail"] += " / first diverging: " + row["first_diverging"]
    if runs > 0:
        row["ours_ms"] = 1e3 * _timed(ours.invoke, runs)
        row["official_ms"] = 1e3 * _timed(off.invoke, runs)
        try:  # the official runtime with its default delegates (XNNPACK for float graphs), single thread
            xnn = lit.Interpreter(model_path=path, num_threads=1)
            for d, x in zip(off_details, feeds[0]):
                if tuple(int(s) for s in d["shape"]) != x.shape:
                    xnn.resize_tensor_input(d["index"], list(x.shape), strict=False)
            xnn.allocate_tensors()
            for d, x in zip(xnn.get_input_details(), feeds[0]):
                xnn.set_tensor(d["index"], x)
            xnn.invoke()
            row["xnnpack_ms"] = 1e3 * _timed(xnn.invoke, runs)
        except Exception:  # noqa: BLE001 - a model XNNPACK cannot take leaves the column empty
            pass
    return row


def first_diverging(path: str, feed: list[np.ndarray]) -> str:
    """Run both runtimes once with every intermediate tensor kept; name the first op (execution order of the
    official runtime, subgraph 0) whose output differs: float beyond FLOAT_TOL relative, integer not bit-exact."""
    from ai_edge_litert import interpreter as lit

    from lite_numba import Interpreter

    off = lit.Interpreter(model_path=path, num_threads=1, experimental_preserve_all_tensors=True,
                          experimental_op_resolver_type=lit.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    ours = Interpreter(model_path=path, experimental_preserve_all_tensors=True,
                       num_threads=int(os.environ.get("REAL_MODELS_THREADS", "0")) or None)
    for it in (off, ours):
        dets = it.get_input_details()
        for d, x in zip(dets, feed):
            if tuple(int(s) for s in d["shape"]) != x.shape:
                it.resize_tensor_input(d["index"], list(x.shape), strict=False)
        it.allocate_tensors()
        for d, x in zip(it.get_input_details(), feed):
            it.set_tensor(d["index"], x)
        it.invoke()
    details = {d["index"]: d for d in off.get_tensor_details()}
    for op in off._get_ops_details():
        for t in op["outputs"]:
            if t < 0 or t not in details or np.dtype(details[t]["dtype"]) == np.dtype(object):
                continue  # resource / variant tensors: the official get_tensor crashes (SIGSEGV) on them
            try:
                r = off.get_tensor(t)
                a = ours.get_tensor(t)
            except Exception:  # noqa: BLE001 - tensors one side does not expose (e.g. resources)
                continue
            if r is None or r.dtype == object or a.shape != r.shape:
                if r is not None and r.dtype != object and a.shape != r.shape:
                    return f"op {op['index']} {op['op_name']} t{t}: shape ours {list(a.shape)} vs {list(r.shape)}"
                continue
            if r.size == 0:
                continue
            if r.dtype.kind == "f":
                a, r = np.atleast_1d(a), np.atleast_1d(r)
                ref = r.astype(np.float64)
                fin = np.abs(ref[np.isfinite(ref)])
                with np.errstate(invalid="ignore"):
                    d = np.abs(a.astype(np.float64) - ref)
                d[(a == r) | (np.isnan(a) & np.isnan(r))] = 0.0
                d[np.isnan(d)] = np.inf
                err = float(d.max()) / max(1.0, float(fin.max()) if fin.size else 0.0)
                if err > FLOAT_TOL:
                    return f"op {op['index']} {op['op_name']} t{t} '{details[t]['name'][:60]}' rel={err:.2e}"
            elif not np.array_equal(a, r):
                diff = np.abs(a.astype(np.int64) - r.astype(np.int64))
                return (f"op {op['index']} {op['op_name']} t{t} '{details[t]['name'][:60]}' "
                        f"exact={float(np.mean(diff == 0)):.4f} step={int(diff.max())}")
    return "none (every intermediate tensor matches)"


def _child(args: argparse.Namespace, path: str) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--one", path, "--runs", str(args.runs), "--invokes",
           str(args.invokes), "--seed", str(args.seed), "--dyn", str(args.dyn)] + (["--interm"] if args.interm else [])
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"model": path, "ops": op_census(path), "load": "?", "alloc": "?", "run": "?", "match": "?",
                "detail": f"timed out after {args.timeout} s"}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
    return {"model": path, "ops": op_census(path), "load": "?", "alloc": "?", "run": "?", "match": "?",
            "detail": f"child process died (rc={p.returncode}): {tail[:200]}"}


def format_table(rows: list[dict], root: str) -> str:
    head = ["model", "load", "alloc", "run", "match", "alloc s", "ours ms", "official ms", "ratio", "xnnpack ms",
            "ratio xnn", "detail", "ops"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        o, f = r.get("ours_ms"), r.get("official_ms")
        ratio = f"{o / f:.2f}" if o and f else ""
        x = r.get("xnnpack_ms")
        ratio_x = f"{o / x:.2f}" if o and x else ""
        c = r.get("compile_s")
        cells = [os.path.relpath(r["model"], root), r["load"], r["alloc"], r["run"], r["match"],
                 f"{c:.1f}" if c is not None else "", f"{o:.3g}" if o else "", f"{f:.3g}" if f else "", ratio,
                 f"{x:.3g}" if x else "", ratio_x,
                 r["detail"].replace("|", "/"), r["ops"]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?")
    ap.add_argument("names", nargs="*", default=["*"])
    ap.add_argument("--runs", type=int, default=5, help="timed invokes per interpreter (0: no timing)")
    ap.add_argument("--invokes", type=int, default=3, help="compared invokes (state carries across them)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dyn", type=int, default=1280, help="size for non-batch -1 input dimensions")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per model (isolated mode)")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--no-isolate", action="store_true", help="run all models in this process")
    ap.add_argument("--executor", choices=["compiled", "python"], default=None,
                    help="sets LITE_NUMBA_EXECUTOR: 'python' skips compiling the per-model runner (fast check; "
                         "timings are then of the Python-mode loop)")
    ap.add_argument("--interm", action="store_true",
                    help="compare every intermediate tensor even when the outputs match (first diverging op)")
    ap.add_argument("--threads", type=int, default=0, help="num_threads for lite-numba (default: its own default)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_intermixed_args(argv)
    if a.threads:
        os.environ["REAL_MODELS_THREADS"] = str(a.threads)  # inherited by the child processes
    if a.executor:
        os.environ["LITE_NUMBA_EXECUTOR"] = a.executor  # inherited by the child processes
    if a.one:
        try:
            row = survey_one(a.one, a.runs, a.invokes, a.seed, a.dyn, interm=a.interm)
        except Exception as e:  # noqa: BLE001
            row = {"model": a.one, "ops": "?", "load": "?", "alloc": "?", "run": "?", "match": "?",
                   "detail": "survey error: " + _first_line(e) + " " + traceback.format_exc(limit=2)[-200:]}
        print(json.dumps(row))
        return 0
    if not a.dir:
        ap.error("DIR is required")
    paths = sorted(os.path.join(dp, f) for dp, _, fs in os.walk(a.dir) for f in fs if f.endswith(".tflite"))
    paths = [p for p in paths if any(fnmatch.fnmatch(os.path.basename(p)[:-7], g) or
                                     fnmatch.fnmatch(os.path.relpath(p, a.dir), g) for g in a.names)]
    rows = []
    for p in paths:
        t = time.time()
        row = survey_one(p, a.runs, a.invokes, a.seed, a.dyn, interm=a.interm) if a.no_isolate else _child(a, p)
        row["wall_s"] = round(time.time() - t, 1)
        rows.append(row)
        print(f"[{len(rows)}/{len(paths)}] {os.path.relpath(p, a.dir)}: load={row['load']} alloc={row['alloc']} "
              f"run={row['run']} match={row['match']} ({row['wall_s']} s) {row['detail']}", file=sys.stderr,
              flush=True)
    print(format_table(rows, a.dir))
    n_ok = sum(r["match"] == "yes" for r in rows)
    print(f"\n{n_ok}/{len(rows)} models match the official runtime")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
