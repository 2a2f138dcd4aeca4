"""Fuzzing campaign: mutants of the source models (scripts/fuzz_sources.py) run in lite-numba and in the official
runtime (ai-edge-litert, BUILTIN_WITHOUT_DEFAULT_DELEGATES), each in its own child process with a timeout.

    python scripts/fuzz_campaign.py --count 2000 --seed 1 --out /tmp/fuzz [--minutes 60] [--only-model NAME]

Three mutation classes:
  structural  bytes of the file: flipped bytes, truncation, hostile 32-bit words (offsets, lengths, indices),
              inserted or deleted bytes
  semantic    the model re-written through ModelBuilder with one or more edits: options (hostile values), shapes,
              quantization (scales, zero points, quantized dimension), tensor types, buffers (resized, swapped,
              refilled with extreme values: indices, axes, shape constants), operator inputs and outputs (swapped,
              -1, another tensor, dropped, added), subgraph wiring (inputs, outputs, called subgraph indices, so WHILE
              and IF bodies), is_variable, op versions, custom options
  data        the source model unchanged, hostile run-time values: integers over the full range (gather and scatter
              indices, axes, sizes), NaN and inf, the extremes of each type, and input shapes changed before every
              invoke (resize_tensor_input + allocate_tensors)
Every mutant also gets one of the data modes for its inputs.

Each runtime runs in a long-lived worker process fed one mutant at a time; a worker that dies is a crash, one that
does not answer within its timeout is a hang (killed, restarted; lite-numba's time compiling counts only against the
longer --timeout, the rest against --run-timeout). Per mutant the result is classed as:
  ours_crash, ours_hang        lite-numba's failures (must stay 0)
  both_hang                    both runtimes time out (an endless WHILE loop is what the model means)
  disagree                     both ran, outputs differ (must stay 0)
  disagree_overflow            both ran, outputs differ, and a float overflow explains it: re-run keeping every
                               tensor, the first operator whose output differs while its inputs agree is a float
                               sum of products or terms whose partial sums can pass FLT_MAX (explain_divergence),
                               so which partial sum overflows depends on the order of summation, and the two
                               runtimes' orders differ. An elementwise operator has no order, and NaN or inf inputs
                               give the same sum in every order: a difference there stays a disagreement. (Found:
                               mediapipe_hand_recrop with PReLU alphas up to 3.8e37, every tensor identical in both
                               runtimes up to the last CONV_2D, whose 64-term sums near FLT_MAX came out 1.78e38,
                               -FLT_MAX, FLT_MAX in ours and FLT_MAX, FLT_MAX, NaN officially.)
  agree                        both ran, outputs agree
  ours_only                    we ran, the official runtime refused, crashed or hung
  official_only                the official runtime ran, we refused (refusing is right when the model is invalid)
  both_refused
  not_compared                 a runtime ran but its outputs did not fit its worker's address space a second time
                               (the pickle back to the campaign: a 1.4 GB output, seed 301 case 21179, was counted as
                               our crash before)
  official_crash, official_hang  (reported for information: not our bug)
Our refusals whose message is a bare Python error (not naming the model field) are counted as bare_refusals; under
LITE_NUMBA_BOUNDSCHECK=1, refusals that are a kernel's out-of-bounds access caught by the checks as checked_mode_oob
(must stay 0: unchecked, that access would touch memory the kernel does not own).
Crashes, hangs, disagreements and bare refusals are saved in --out with the inputs needed to replay them
(`--replay DIR`).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pickle
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CLASSES = ("structural", "semantic", "data")
DATA_MODES = ("normal", "wide_ints", "nonfinite", "extremes", "resize")
MEMORY_LIMIT = 6 << 30  # address space of each worker: a runtime asking for more fails instead of swapping the host
MAX_INPUT_ELEMENTS = 1 << 22

# ---------------------------------------------------------------------------------------------------------------
# inputs (the same in both workers: a function of the seed, the mode and the input details)


# the bytes string inputs are made of: letters, spaces and tabs (split on), punctuation (regex, split), UTF-8 and
# invalid UTF-8, NUL
STRING_BYTES = np.frombuffer(b"aAbZz  \t,.!-_\x00\xc3\xa9\xff\xfe0123", np.uint8)


def make_strings(shape, mode: str, rng: np.random.Generator) -> np.ndarray:
    """A STRING input (numpy bytes, "S", which both runtimes pack alike): empty strings, NULs inside, invalid UTF-8,
    and in "extremes" / "wide_ints" long strings. A 0-d one is never empty and fills its itemsize: the official
    wrapper packs a 0-d array's whole item, padding NULs included (and an object array's pointer)."""
    n = int(np.prod(shape, dtype=np.int64))
    longest = 4096 if mode in ("extremes", "wide_ints") and rng.random() < 0.3 else 12
    items = [rng.choice(STRING_BYTES, int(rng.integers(0, longest + 1))).tobytes().rstrip(b"\x00")
             for _ in range(n)]
    if not shape:
        return np.array(items[0] or b"a", dtype=f"S{max(len(items[0]), 1)}")
    return np.array(items, dtype="S").reshape(shape) if n else np.zeros(shape, "S1")


def make_input(shape, dtype, mode: str, rng: np.random.Generator) -> np.ndarray:
    dtype = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    if np.prod(shape, dtype=np.float64) > MAX_INPUT_ELEMENTS:
        raise MemoryError(f"input of shape {list(shape)} too large for the campaign")
    if dtype.kind in "OS":  # STRING (details report numpy.bytes_)
        return make_strings(shape, mode, rng)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if mode == "wide_ints":
            lo, hi = max(info.min, -(2**31)), min(info.max, 2**31 - 1)
            v = rng.integers(lo, hi, shape, endpoint=True)
        elif mode == "extremes":
            v = rng.choice(np.array([info.min, info.max, 0, -1 if info.min < 0 else 1, 1], np.int64), shape)
        else:
            lo = 0 if info.min == 0 else -9
            v = rng.integers(lo, 10 if info.bits > 8 else min(info.max, 127), shape, endpoint=True)
            if info.bits > 8 and rng.random() < 0.5:  # small non-negative: indices and sizes that are often valid
                v = rng.integers(0, 4, shape, endpoint=True)
            elif info.bits <= 8 and rng.random() < 0.5:
                v = rng.integers(info.min, info.max, shape, endpoint=True)
        return np.asarray(v).astype(dtype)
    if dtype.kind == "f":
        v = rng.standard_normal(shape) * 3
        if mode == "nonfinite":
            mask = rng.random(shape) < 0.3
            v = np.where(mask, rng.choice(np.array([np.nan, np.inf, -np.inf]), shape), v)
        elif mode == "extremes":
            fi = np.finfo(dtype)
            v = rng.choice(np.array([fi.max, -fi.max, fi.tiny, 0.0, -0.0, 1e30, -1e30, 1.0], np.float64), shape)
        with np.errstate(over="ignore", invalid="ignore"):
            return v.astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    raise TypeError(f"input dtype {dtype} not generated by the campaign")


def resized_shape(shape, rng: np.random.Generator) -> list[int]:
    return [max(0, int(d) + int(rng.choice([-1, 0, 0, 1, 2]))) if int(d) > 0 else int(rng.integers(1, 4))
            for d in shape]


# ---------------------------------------------------------------------------------------------------------------
# worker: one runtime, one mutant at a time


def _open(runtime: str, data: bytes, keep_all: bool = False):
    if runtime == "ours":
        from lite_numba import Interpreter
        return Interpreter(model_content=data, experimental_preserve_all_tensors=keep_all)
    from ai_edge_litert import interpreter as lit
    return lit.Interpreter(model_content=data, num_threads=1, experimental_preserve_all_tensors=keep_all,
                           experimental_op_resolver_type=lit.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)


def _all_tensors(it) -> dict[int, np.ndarray]:
    """Every readable tensor of subgraph 0 after an invoke (experimental_preserve_all_tensors)."""
    found = {}
    for d in it.get_tensor_details():
        try:
            found[int(d["index"])] = np.array(it.get_tensor(d["index"]), copy=True)
        except (ValueError, KeyError, RuntimeError):
            pass
    return found


def run_request(runtime: str, req: dict, keep_all: bool = False) -> dict:
    """Load, allocate and invoke the mutant as `req` says; {"status": "ran", "outputs": [[array...] per invoke]}
    or {"status": "refused", "error": "Type: message"}. `keep_all`: also "tensors", every tensor of subgraph 0
    after each invoke (for explain_divergence)."""
    data = Path(req["path"]).read_bytes()
    mode, rng = req["mode"], np.random.default_rng(req["seed"])
    stage = "load"
    kept = []
    try:
        it = _open(runtime, data, keep_all)
        stage = "allocate"
        it.allocate_tensors()
        outputs = []
        for k in range(req["invokes"]):
            details = it.get_input_details()
            if mode == "resize" and k > 0:
                stage = "resize"
                for d in details:
                    it.resize_tensor_input(d["index"], resized_shape(d["shape"], rng))
                it.allocate_tensors()
                details = it.get_input_details()
            stage = "set_tensor"
            for d in details:
                it.set_tensor(d["index"], make_input(d["shape"], d["dtype"], mode, rng))
            stage = "invoke"
            it.invoke()
            stage = "get_tensor"
            outputs.append([np.array(it.get_tensor(d["index"]), copy=True) for d in it.get_output_details()])
            if keep_all:
                kept.append(_all_tensors(it))
        return {"status": "ran", "outputs": outputs, **({"tensors": kept} if keep_all else {})}
    except Exception as e:  # noqa: BLE001 - every Python exception is a refusal, classified by the parent
        return {"status": "refused", "stage": stage, "error": f"{type(e).__name__}: {str(e)[:600]}"}


def _report_compiles(out) -> None:
    """Tell the campaign when this worker starts and stops compiling ("c1" / "c0" lines), so that only the time
    outside compiles counts against the run timeout: a model's first invoke may compile (dynamic nodes, the
    specialised runner), while an endless WHILE loop never does."""
    from numba.core import event

    from lite_numba.jit import compiler

    depth = [0]

    def enter():
        depth[0] += 1
        if depth[0] == 1:
            out.write(b"c1\n")
            out.flush()

    def leave():
        depth[0] -= 1
        if depth[0] == 0:
            out.write(b"c0\n")
            out.flush()

    class Compiles(event.Listener):
        def on_start(self, ev):
            enter()

        def on_end(self, ev):
            leave()

    event.register("numba:compile", Compiles())

    def bracketed(fn):  # waits on other processes' compiles: compile time too
        def run(*a, **k):
            enter()
            try:
                return fn(*a, **k)
            finally:
                leave()
        return run

    compiler.compile_in_workers = bracketed(compiler.compile_in_workers)
    compiler.wait_for_compile = bracketed(compiler.wait_for_compile)


def worker_main(runtime: str) -> None:
    import ctypes
    import resource

    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: never outlive the campaign (a hung mutant)
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    if runtime == "ours":
        sys.stdout.buffer.write(b"c1\n")  # the imports count as compile time (see _report_compiles)
        sys.stdout.buffer.flush()
        import lite_numba  # noqa: F401 - imported before the first request so the timeout covers only the mutant
        _report_compiles(sys.stdout.buffer)
        sys.stdout.buffer.write(b"c0\n")
        sys.stdout.buffer.flush()
    else:
        import ai_edge_litert.interpreter  # noqa: F401
    out = sys.stdout.buffer
    for line in sys.stdin:
        req = json.loads(line)
        res = run_request(runtime, req)
        try:
            with open(req["result"], "wb") as f:
                pickle.dump(res, f)
        except MemoryError:  # the outputs ran but do not fit this worker's address space twice (a pickle copy)
            nbytes = sum(a.nbytes for outs in res.get("outputs", ()) for a in outs)
            res = None
            with open(req["result"], "wb") as f:
                pickle.dump({"status": "ran_unreported", "error": f"outputs of {nbytes} bytes too large to return "
                                                                   f"to the campaign"}, f)
        out.write(b"done\n")
        out.flush()


class Worker:
    """A child process running one runtime; restarted after a crash or a hang."""

    def __init__(self, runtime: str, timeout: float, env: dict, run_timeout: float | None = None):
        self.runtime, self.timeout, self.env = runtime, timeout, env
        self.run_timeout = timeout if run_timeout is None else run_timeout  # time outside compiles (see wait)
        self.proc = None
        self.started = 0

    def _start(self) -> None:
        self.proc = subprocess.Popen(
            ["nice", "-n", "19", sys.executable, str(Path(__file__).resolve()), "--worker", self.runtime],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=self.env,
            start_new_session=True)
        self.started += 1

    def send(self, req: dict) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write((json.dumps(req) + "\n").encode())
        self.proc.stdin.flush()
        self.t0 = time.monotonic()

    def wait(self, req: dict, timeout: float) -> dict:
        """The worker's result, or a hang: more than `timeout` seconds in all, or more than self.run_timeout
        seconds outside compiles (the ours worker reports its compiles with "c1" / "c0" lines; an endless WHILE
        loop is then found in run_timeout instead of waiting out the compile budget)."""
        p = self.proc
        deadline = self.t0 + timeout
        run_left = self.run_timeout
        compiling = False
        last = time.monotonic()
        while True:
            now = time.monotonic()
            if now - last > 5.0:  # this process was stopped (SIGSTOP for a quiet measurement): not the mutant's time
                deadline += now - last
            elif not compiling:
                run_left -= now - last
            last = now
            left = min(deadline - now, run_left if not compiling else deadline - now)
            if left <= 0:
                self.kill()
                return {"status": "hang"}
            r, _, _ = select.select([p.stdout], [], [], min(left, 1.0))
            if r:
                line = p.stdout.readline()
                if not line:  # EOF: the process died
                    rc = p.wait()
                    self.proc = None
                    return {"status": "crash", "returncode": rc,
                            "signal": signal.Signals(-rc).name if rc < 0 and -rc in signal.valid_signals() else ""}
                if line in (b"c1\n", b"c0\n"):
                    now = time.monotonic()
                    if not compiling:
                        run_left -= now - last
                    last = now
                    compiling = line == b"c1\n"
                    continue
                with open(req["result"], "rb") as f:
                    return pickle.load(f)

    def kill(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.proc = None

    def close(self) -> None:
        if self.proc is not None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
            self.proc = None


# ---------------------------------------------------------------------------------------------------------------
# structural mutation


HOSTILE_WORDS = [-1, 0, 1, 2, 3, 7, 255, 65535, 2**31 - 1, -(2**31), 2**30, 0x7FFFFFF0]


def mutate_bytes(data: bytes, rng: np.random.Generator) -> tuple[bytes, str]:
    b = bytearray(data)
    kind = int(rng.integers(0, 5))
    if kind == 0:
        for _ in range(int(rng.integers(1, 9))):
            b[int(rng.integers(0, len(b)))] ^= int(rng.integers(1, 256))
        return bytes(b), "flip"
    if kind == 1:
        return bytes(b[: int(rng.integers(0, len(b)))]), "truncate"
    if kind == 2:
        for _ in range(int(rng.integers(1, 4))):
            pos = int(rng.integers(0, max(1, len(b) // 4))) * 4
            v = int(rng.choice(HOSTILE_WORDS + [int(rng.integers(0, 2**32))]))
            b[pos:pos + 4] = (v & 0xFFFFFFFF).to_bytes(4, "little")
        return bytes(b), "word"
    if kind == 3:
        pos = int(rng.integers(0, len(b)))
        n = int(rng.integers(1, 16))
        if rng.random() < 0.5:
            return bytes(b[:pos] + rng.integers(0, 256, n, dtype=np.uint8).tobytes() + b[pos:]), "insert"
        return bytes(b[:pos] + b[pos + n:]), "delete"
    # a small change in the tables at the front (indices, counts, enum values)
    pos = int(rng.integers(0, min(len(b), 4096)))
    b[pos] = (b[pos] + int(rng.choice([-2, -1, 1, 2, 16, 128]))) % 256
    return bytes(b), "nudge"


# ---------------------------------------------------------------------------------------------------------------
# semantic mutation: through ModelBuilder's records


def to_builder(data: bytes):
    """A ModelBuilder holding the model's tensors, buffers, operators, subgraphs and signatures."""
    from lite_numba.format.builder import ModelBuilder, _normalize_quant, _TensorRec
    from lite_numba.format.builder_options import normalize_options
    from lite_numba.format.model import load_model
    from lite_numba.format.schema import options_table_for

    plan = load_model(data)
    b = ModelBuilder(plan.description)
    b.subgraphs = []
    for sp in plan.subgraphs:
        sg = b.add_subgraph(sp.name)
        for t in sp.tensors:
            buf = 0
            if t.data is not None and t.type_name == "STRING":  # its packed bytes as the file held them
                buf = b._add_buffer(np.asarray(t.data, np.uint8).tobytes())
            elif t.data is not None:
                buf = b._add_buffer(np.ascontiguousarray(t.data).astype(t.dtype.newbyteorder("<")).tobytes())
            q = t.quantization
            quant = None
            if q.scales.size:
                quant = _normalize_quant({"scales": q.scales.tolist(), "zero_points": q.zero_points.tolist(),
                                          "quantized_dimension": q.quantized_dimension})
            sig = list(t.shape_signature) if t.shape_signature != t.shape else None
            sg.tensors.append(_TensorRec(t.name, t.dtype, list(t.shape), buf, quant, sig, t.is_variable,
                                         {"RESOURCE": 13, "VARIANT": 14}.get(t.type_name)))
        sg.inputs, sg.outputs = list(sp.inputs), list(sp.outputs)
        for n in sp.nodes:
            if n.is_custom:
                sg.add_custom_op(n.op_name, n.inputs, n.outputs, options=n.custom_options, version=n.version)
                continue
            opts = dict(n.options)
            table = options_table_for(n.op_name)
            if table is not None:
                known = {}
                for key, value in opts.items():
                    try:
                        normalize_options(table[0], {key: value})
                        known[key] = value
                    except (ValueError, TypeError, KeyError):
                        pass
                opts = known
            sg.add_op(n.op_name, n.inputs, n.outputs, options=opts or None, version=n.version,
                      intermediates=n.intermediates or None)
    for s in plan.signatures:
        b.signatures.append((s.key, dict(s.inputs), dict(s.outputs), s.subgraph_index))
    return b


SUBGRAPH_OPTION_KEYS = ("subgraph_index", "cond_subgraph_index", "body_subgraph_index", "then_subgraph_index",
                        "else_subgraph_index", "init_subgraph_index")
TYPES = [np.float32, np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_, np.float16, np.float64, object]


def _hostile_scalar(f, rng: np.random.Generator):
    if f.ctype == "Bool":
        return bool(rng.integers(0, 2))
    if f.ctype.startswith("Float"):
        return float(rng.choice([np.nan, np.inf, -np.inf, 0.0, -1.0, 1e-30, 1e30, 0.5, 2.0, -0.5]))
    if f.enum is not None:
        return int(rng.choice([-1, 0, 1, 2, 3, 4, 5, 6, 7, 9, 100]))
    lim = {"Int8": 127, "Uint8": 255, "Int16": 32767, "Uint16": 65535}.get(f.ctype, 2**31 - 1)
    v = int(rng.choice([-(lim + 1) if not f.ctype.startswith("Uint") else 0, -2, -1, 0, 1, 2, 3, 4, 5, 7, 64,
                        lim]))
    return v


def _mutate_options(b, rng) -> str:
    from lite_numba.format.builder_options import options_spec

    ops = [(sg, op) for sg in b.subgraphs for op in sg.operators if op.options_table is not None]
    if not ops:
        return ""
    sg, op = ops[int(rng.integers(len(ops)))]
    spec = options_spec(op.options_table)
    fields = [f for f in spec.fields.values() if f.kind == "scalar"]
    if not fields:
        return ""
    f = fields[int(rng.integers(len(fields)))]
    values = [(g, v) for g, v in op.options_values if g.name != f.name]
    nsub = len(b.subgraphs)
    value = int(rng.choice([-1, 0, nsub - 1, nsub, 2**31 - 1])) if f.name in SUBGRAPH_OPTION_KEYS \
        else _hostile_scalar(f, rng)
    values.append((f, value))
    op.options_values = values
    return f"option {op.options_table}.{f.name}={value!r}"


def _pick_tensor(b, rng, pred=lambda t: True):
    cands = [(sg, i) for sg in b.subgraphs for i, t in enumerate(sg.tensors) if pred(t)]
    return cands[int(rng.integers(len(cands)))] if cands else (None, None)


def _mutate_shape(b, rng) -> str:
    sg, i = _pick_tensor(b, rng)
    if sg is None:
        return ""
    t = sg.tensors[i]
    shape = list(t.shape)
    kind = int(rng.integers(0, 5))
    if kind == 0 and shape:
        d = int(rng.integers(len(shape)))
        shape[d] = max(0, shape[d] + int(rng.choice([-1, 1, 2])))
    elif kind == 1 and shape:
        shape[int(rng.integers(len(shape)))] = int(rng.choice([0, 1, 65536, 2**31 - 1, 2**20]))
    elif kind == 2:
        shape = shape[:-1]
    elif kind == 3:
        shape = shape + [int(rng.choice([1, 2, 3]))]
    else:
        rng.shuffle(shape)
    t.shape = shape
    if t.shape_signature is not None:
        t.shape_signature = [s if s == -1 else d for s, d in zip(t.shape_signature, shape)] \
            if len(t.shape_signature) == len(shape) else None
    return f"shape {t.name} -> {shape}"


def _mutate_quant(b, rng) -> str:
    sg, i = _pick_tensor(b, rng)
    if sg is None:
        return ""
    t = sg.tensors[i]
    q = dict(t.quant) if t.quant is not None else {"scales": [0.1], "zero_points": [0], "quantized_dimension": 0,
                                                   "min": None, "max": None}
    kind = int(rng.integers(0, 6))
    if kind == 0:
        q["zero_points"] = [int(rng.choice([-1000, -129, 128, 255, 256, 2**40, -(2**40), 32768]))] * len(q["scales"])
        what = f"zero_point {q['zero_points'][0]}"
    elif kind == 1:
        q["scales"] = [float(rng.choice([0.0, -0.1, np.nan, np.inf, 1e-38, 1e38]))] * len(q["scales"])
        what = f"scale {q['scales'][0]}"
    elif kind == 2:
        q["quantized_dimension"] = int(rng.choice([-1, 1, 3, 7, 2**31 - 1]))
        what = f"quantized_dimension {q['quantized_dimension']}"
    elif kind == 3:
        n = int(rng.choice([2, 3, 5, 16]))
        q["scales"], q["zero_points"] = [0.05] * n, [0] * n
        what = f"{n} channels"
    elif kind == 4:
        q["zero_points"] = q["zero_points"][:-1] or [0, 0]
        what = "zero point count"
    else:
        t.quant = None
        return f"quantization of {t.name} removed"
    t.quant = q
    return f"quantization of {t.name}: {what}"


def _mutate_type(b, rng) -> str:
    sg, i = _pick_tensor(b, rng)
    if sg is None:
        return ""
    t = sg.tensors[i]
    t.dtype = np.dtype(TYPES[int(rng.integers(len(TYPES)))])
    return f"type {t.name} -> {t.dtype}"


def _mutate_buffer(b, rng) -> str:
    sg, i = _pick_tensor(b, rng, lambda t: t.buffer > 0)
    if sg is None:
        return ""
    t = sg.tensors[i]
    data = bytearray(b.buffers[t.buffer])
    kind = int(rng.integers(0, 5))
    if kind == 0 and np.dtype(t.dtype) == object:  # a STRING buffer: random bytes (_mutate_strings edits its layout)
        kind = 3
    if kind == 0:  # hostile values of the tensor's own type: indices, axes, shape constants
        dt = np.dtype(t.dtype)
        n = len(data) // max(dt.itemsize, 1)
        if n:
            # a buffer an earlier edit resized may end in a partial element: the whole elements only
            arr = np.frombuffer(bytes(data[: n * dt.itemsize]), dt).copy()
            k = int(rng.integers(0, n))
            if dt.kind in "iu":
                info = np.iinfo(dt)
                v = int(rng.choice([info.min, info.max, -1 if info.min < 0 else 0, n, n + 1, 2**15 - 1
                                    if info.bits >= 16 else 100]))
                arr[k] = min(max(v, int(info.min)), int(info.max))  # n + 1 past an 8-bit type's range
            elif dt.kind == "f":
                arr[k] = rng.choice([np.nan, np.inf, -np.inf, 1e30])
            data = bytearray(arr.tobytes()) + data[n * dt.itemsize:]
        what = "value"
    elif kind == 1:
        data = data[: int(rng.integers(0, len(data) + 1))]
        what = "truncated"
    elif kind == 2:
        data += bytes(int(rng.integers(1, 64)))
        what = "extended"
    elif kind == 3:
        data = bytearray(rng.integers(0, 256, len(data), dtype=np.uint8).tobytes())
        what = "random"
    else:  # another tensor's buffer
        others = [x.buffer for g in b.subgraphs for x in g.tensors if x.buffer > 0 and x.buffer != t.buffer]
        if others:
            t.buffer = int(rng.choice(others))
            return f"buffer of {t.name} swapped"
        what = "unchanged"
    b.buffers[t.buffer] = bytes(data)
    return f"buffer of {t.name} {what}"


def _mutate_strings(b, rng) -> str:
    """A STRING constant's packed buffer made corrupt (count negative, too large or off by one, offsets out of order
    or past the buffer, header cut short) or given other strings (odd bytes, a long one, empty ones)."""
    sg, i = _pick_tensor(b, rng, lambda t: t.buffer > 0 and np.dtype(t.dtype) == object)
    if sg is None:
        return ""
    t = sg.tensors[i]
    raw = bytearray(b.buffers[t.buffer])
    n = int.from_bytes(raw[:4], "little", signed=True) if len(raw) >= 4 else 0
    words = max(0, min(n + 1, (len(raw) - 4) // 4))  # the offsets the header holds
    kind = int(rng.integers(0, 8))
    if kind == 0:
        raw[:4] = int(rng.choice([-1, -(2**31), n + 1, n - 1, 2**31 - 1, 1 << 24])).to_bytes(4, "little", signed=True)
        what = "count"
    elif kind in (1, 2) and words >= 2:  # an offset out of order or past the end
        k = int(rng.integers(0, words))
        v = int(rng.choice([-1, 0, len(raw) + 1, 2**31 - 1, 4])) if kind == 1 else \
            int.from_bytes(raw[4 + 4 * (words - 1 - k):8 + 4 * (words - 1 - k)], "little", signed=True)
        raw[4 + 4 * k:8 + 4 * k] = v.to_bytes(4, "little", signed=True)
        what = "offset"
    elif kind == 3:
        raw = raw[: int(rng.integers(0, 4 * (words + 1) + 1))]
        what = "header cut"
    else:  # valid buffers of other strings: the kernels' odd inputs
        shape = [int(d) for d in t.shape]
        count = int(np.prod(shape, dtype=np.int64))
        if count > 4096:
            return ""
        items = make_strings((count,), "extremes" if kind == 4 else "normal", rng).tolist()
        if kind == 5:
            items = [b""] * count
        head = 4 * (count + 2)
        offs = head + np.concatenate([[0], np.cumsum([len(x) for x in items])]).astype(np.int64)
        raw = bytearray(np.concatenate([[count], offs]).astype("<i4").tobytes() + b"".join(items))
        what = "strings"
    b.buffers[t.buffer] = bytes(raw)
    return f"string buffer of {t.name}: {what}"


def _mutate_op_io(b, rng) -> str:
    ops = [(sg, op) for sg in b.subgraphs for op in sg.operators]
    if not ops:
        return ""
    sg, op = ops[int(rng.integers(len(ops)))]
    n = len(sg.tensors)
    lst_name = "inputs" if (rng.random() < 0.7 or not op.outputs) else "outputs"
    lst = list(getattr(op, lst_name))
    kind = int(rng.integers(0, 5))
    if kind == 0 and len(lst) >= 2:
        a, c = rng.choice(len(lst), 2, replace=False)
        lst[a], lst[c] = lst[c], lst[a]
    elif kind == 1 and lst:
        lst[int(rng.integers(len(lst)))] = -1
    elif kind == 2 and lst and n:
        lst[int(rng.integers(len(lst)))] = int(rng.integers(0, n))
    elif kind == 3 and lst:
        lst.pop()
    elif n:
        lst.append(int(rng.integers(0, n)))
    setattr(op, lst_name, lst)
    return f"operator {lst_name} -> {lst}"


def _mutate_wiring(b, rng) -> str:
    sg = b.subgraphs[int(rng.integers(len(b.subgraphs)))]
    n = len(sg.tensors)
    which = "inputs" if rng.random() < 0.5 else "outputs"
    lst = list(getattr(sg, which))
    kind = int(rng.integers(0, 4))
    if kind == 0 and lst:
        lst.pop(int(rng.integers(len(lst))))
    elif kind == 1 and n:
        lst.append(int(rng.integers(0, n)))
    elif kind == 2 and len(lst) >= 2:
        lst.reverse()
    elif n and lst:
        lst[int(rng.integers(len(lst)))] = int(rng.integers(0, n))
    setattr(sg, which, lst)
    return f"subgraph {sg.index} {which} -> {lst}"


def _mutate_variable(b, rng) -> str:
    sg, i = _pick_tensor(b, rng)
    if sg is None:
        return ""
    t = sg.tensors[i]
    t.is_variable = not t.is_variable
    return f"is_variable {t.name} -> {t.is_variable}"


def _mutate_version(b, rng) -> str:
    if not b.opcodes:
        return ""
    k = int(rng.integers(len(b.opcodes)))
    kind, ident, ver = b.opcodes[k]
    new = (kind, ident, int(rng.choice([1, 2, 3, 4, 7, 100])))
    if new in b._opcode_index:
        return ""
    for sg in b.subgraphs:
        for op in sg.operators:
            if op.opcode_key == b.opcodes[k]:
                op.opcode_key = new
    del b._opcode_index[b.opcodes[k]]
    b.opcodes[k] = new
    b._opcode_index[new] = k
    return f"version {ident} -> {new[2]}"


def _mutate_custom(b, rng) -> str:
    from flatbuffers import flexbuffers

    ops = [op for sg in b.subgraphs for op in sg.operators if op.opcode_key[0] == "custom"]
    if not ops:
        return ""
    op = ops[int(rng.integers(len(ops)))]
    kind = int(rng.integers(0, 3))
    if kind == 0:
        op.custom_options = rng.integers(0, 256, int(rng.integers(0, 40)), dtype=np.uint8).tobytes()
    elif kind == 1 and op.custom_options:
        c = bytearray(op.custom_options)
        c[int(rng.integers(len(c)))] ^= int(rng.integers(1, 256))
        op.custom_options = bytes(c)
    else:
        op.custom_options = bytes(flexbuffers.Dumps({"x": int(rng.integers(-(2**31), 2**31)), "beta": float("nan")}))
    return "custom options"


SEMANTIC = {
    "options": _mutate_options, "shape": _mutate_shape, "quantization": _mutate_quant, "type": _mutate_type,
    "buffer": _mutate_buffer, "operator_io": _mutate_op_io, "wiring": _mutate_wiring,
    "variable": _mutate_variable, "version": _mutate_version, "custom": _mutate_custom, "strings": _mutate_strings,
}
SEMANTIC_WEIGHTS = {"options": 4, "shape": 3, "quantization": 3, "type": 2, "buffer": 4, "operator_io": 3,
                    "wiring": 2, "variable": 1, "version": 1, "custom": 1, "strings": 3}


# A float constant beyond this magnitude overflows float32 once multiplied by a value of its own size (as the layers
# after it produce): the results then depend on the order of the sums (see classify). A NaN constant does not count:
# a NaN term makes every summation order NaN, so a NaN constant only shows how the ops treat NaN, which is their
# semantics (run 3 case 1249: the official LSTM clip turns a NaN cell state into +cell_clip; ours kept the NaN).
EXTREME_CONSTANT = float(np.sqrt(np.finfo(np.float32).max))  # 1.8e19


def extreme_constants(b) -> dict[tuple[int, int], str]:
    """{(subgraph, tensor): name} of the float constants of builder `b` holding an inf or a finite value beyond
    EXTREME_CONSTANT in magnitude (the buffer's bytes read in the tensor's type, whole elements only; NaNs are
    ignored)."""
    out = {}
    for si, sg in enumerate(b.subgraphs):
        for ti, t in enumerate(sg.tensors):
            dt = np.dtype(t.dtype)
            if dt.kind != "f" or not 0 < t.buffer < len(b.buffers):
                continue
            raw = bytes(b.buffers[t.buffer])
            n = len(raw) // dt.itemsize
            if n == 0:
                continue
            a = np.abs(np.frombuffer(raw[: n * dt.itemsize], dt.newbyteorder("<")).astype(np.float64))
            if (a > EXTREME_CONSTANT).any():  # inf included, NaN compares False
                out[(si, ti)] = t.name
    return out


def mutate_semantic(data: bytes, rng: np.random.Generator) -> tuple[bytes, str, list[str]] | None:
    """(mutant, description of the edits, names of the float constants the edits made extreme: extreme_constants)
    or None when no edit applied or the builder cannot hold or write the model."""
    try:
        b = to_builder(data)
    except Exception:  # noqa: BLE001 - a model the builder cannot hold (sparse, strings): no semantic mutants
        return None
    before = extreme_constants(b)
    names = list(SEMANTIC)
    p = np.array([SEMANTIC_WEIGHTS[n] for n in names], np.float64)
    edits = []
    for _ in range(int(rng.choice([1, 1, 1, 2, 3]))):
        name = names[int(rng.choice(len(names), p=p / p.sum()))]
        what = SEMANTIC[name](b, rng)
        if what:
            edits.append(f"{name}: {what}")
    if not edits:
        return None
    extreme = sorted(name for key, name in extreme_constants(b).items() if key not in before)
    try:
        return b.build(), "; ".join(edits), extreme
    except Exception:  # noqa: BLE001 - the edit made records the writer refuses (e.g. a type it cannot write)
        return None


# ---------------------------------------------------------------------------------------------------------------
# comparison and classification

BARE = re.compile(r"^(TypeError|IndexError|KeyError|AttributeError|OverflowError|ZeroDivisionError|"
                  r"UnboundLocalError|NameError|AssertionError|RecursionError|SystemError|"
                  r"UFuncTypeError|LinAlgError|NotImplementedError)|cannot convert float|"
                  r"object has no attribute|unsupported operand|list index out of range|tuple index out of range|"
                  r"not subscriptable|invalid literal|float division by zero|integer division or modulo by zero|"
                  r"referenced before assignment|"
                  r"index \d+ is out of bounds|out of bounds for axis|numba|Numba")


# what the checked mode (LITE_NUMBA_BOUNDSCHECK=1) raises when a kernel indexes outside an array: without it, that
# access would have read or written memory it does not own
CHECKED_OOB = re.compile(r"index is out of bounds|SIMD kernel accessed memory outside")


def outputs_agree(ours: list, theirs: list) -> tuple[bool, str]:
    if len(ours) != len(theirs):
        return False, f"{len(ours)} invokes vs {len(theirs)}"
    for k, (a_list, b_list) in enumerate(zip(ours, theirs)):
        if len(a_list) != len(b_list):
            return False, f"invoke {k}: {len(a_list)} outputs vs {len(b_list)}"
        for j, (a, b) in enumerate(zip(a_list, b_list)):
            a, b = np.asarray(a), np.asarray(b)
            if a.shape != b.shape:
                return False, f"invoke {k} output {j}: shape {a.shape} vs {b.shape}"
            if a.dtype != b.dtype and not (a.dtype.kind == "O" or b.dtype.kind == "O"):
                return False, f"invoke {k} output {j}: dtype {a.dtype} vs {b.dtype}"
            if a.dtype.kind in "OSU" or b.dtype.kind in "OSU":  # STRING: the same bytes
                if a.tolist() != b.tolist():
                    bad = next(m for m, (x, y) in enumerate(zip(a.reshape(-1).tolist(), b.reshape(-1).tolist()))
                               if x != y)
                    return False, f"invoke {k} output {j}: strings differ, first at flat {bad}"
                continue
            if a.size == 0:
                continue
            if a.dtype.kind == "f" or a.dtype.kind == "c":
                ok = _float_close(a, b)
                if not ok.all():
                    bad = np.argwhere(~ok)[0]
                    return False, (f"invoke {k} output {j}: {int((~ok).sum())} of {a.size} differ, first at "
                                   f"{bad.tolist()}: {a[tuple(bad)]} vs {b[tuple(bad)]}")
            else:
                diff = np.abs(a.astype(np.int64) - b.astype(np.int64))
                tol = 1 if a.dtype in (np.int8, np.uint8, np.int16) else 0
                if diff.max() > tol:
                    bad = np.argwhere(diff > tol)[0]
                    return False, (f"invoke {k} output {j}: {int((diff > tol).sum())} of {a.size} differ, "
                                   f"max {int(diff.max())}, first at {bad.tolist()}: {a[tuple(bad)]} vs "
                                   f"{b[tuple(bad)]}")
    return True, ""


def _float_close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    scale = float(np.nanmax(np.abs(np.where(np.isfinite(b), b, 0)))) if b.size else 0.0
    with np.errstate(all="ignore"):
        return np.isclose(a, b, rtol=1e-3, atol=1e-4 * max(1.0, scale), equal_nan=True)


# float ops whose result depends on the order of a sum of products or terms: with inputs near FLT_MAX, which
# partial sum overflows (to inf, or inf - inf = NaN, then clamped by a fused activation) depends on that order
ORDER_DEPENDENT = {"CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "CONV_3D", "CONV_3D_TRANSPOSE",
                   "FULLY_CONNECTED", "BATCH_MATMUL", "AVERAGE_POOL_2D", "L2_POOL_2D", "MEAN", "SUM",
                   "REDUCE_PROD", "L2_NORMALIZATION", "SVDF", "UNIDIRECTIONAL_SEQUENCE_LSTM",
                   "BIDIRECTIONAL_SEQUENCE_LSTM", "LSTM", "UNIDIRECTIONAL_SEQUENCE_RNN", "RNN"}


FLT_MAX = float(np.finfo(np.float32).max)
OVERFLOW_AT = FLT_MAX + 2.0**103  # a float32 sum rounds to inf from here (FLT_MAX plus half its unit in the last place)


def _overflow_bound(inputs: list[np.ndarray]) -> float:
    """An upper bound on the magnitude of a partial sum of an operator over these inputs, from the largest finite
    magnitudes t1 >= t2 >= t3 of its float inputs and the size n of its largest input (at least as many terms as any
    output element sums): a sum of n terms of one input (t1 n), or of n products of two inputs plus a third (a bias),
    whichever input is which (the larger of t1 t2 n + t3 and t2 t3 n + t1, and t1 + t2 + t3). Non-finite values do
    not count: inf and NaN give the same sum in every order; only finite terms whose partial sums pass FLT_MAX in one
    order and not in another make the result depend on it."""
    tops, size = [], 1
    for v in inputs:
        if v.dtype.kind == "f" and v.size:
            with np.errstate(all="ignore"):
                finite = np.abs(v[np.isfinite(v)].astype(np.float64))
            tops.append(float(finite.max()) if finite.size else 0.0)
            size = max(size, v.size)
    if len(tops) < 2:
        return tops[0] * size if tops else 0.0
    t1, t2, t3 = (sorted(tops, reverse=True) + [0.0])[:3]
    return max(t1 * t2 * size + t3, t2 * t3 * size + t1, t1 + t2 + t3)


def _differ(a: np.ndarray, b: np.ndarray) -> bool:
    return not outputs_agree([[a]], [[b]])[0]


def explain_divergence(data: bytes, req: dict) -> dict:
    """Run the case in both runtimes keeping every tensor and find the first operator of subgraph 0 whose output
    differs while its inputs agree. {"op", "node", "tensor", "bound", "verdict"}: verdict "overflow" when that
    operator is a float sum of products or terms (ORDER_DEPENDENT) whose partial sums can round to inf
    (_overflow_bound of its inputs reaching OVERFLOW_AT), so that the order of summation, which differs between the
    runtimes, decides where they overflow; "disagree" otherwise (an elementwise operator has no order, and below
    the bound every order gives a finite sum: a difference there is a real one); "unexplained" when no such
    operator is found (the difference is inside a control-flow body, or a runtime did not keep the tensors)."""
    from lite_numba.format.model import load_model

    ours, theirs = run_request("ours", req, keep_all=True), run_request("official", req, keep_all=True)
    if ours["status"] != "ran" or theirs["status"] != "ran":
        return {"verdict": "unexplained", "why": f"ours {ours['status']}, official {theirs['status']}"}
    nodes = load_model(data).subgraphs[0].nodes
    for k, (ta, tb) in enumerate(zip(ours["tensors"], theirs["tensors"])):
        for ni, n in enumerate(nodes):
            outs = [o for o in n.outputs if o >= 0 and o in ta and o in tb]
            bad = [o for o in outs if _differ(ta[o], tb[o])]
            if not bad:
                continue
            ins = [i for i in n.inputs if i >= 0]
            if any(i not in ta or i not in tb or _differ(ta[i], tb[i]) for i in ins):
                return {"verdict": "unexplained", "op": n.op_name, "node": ni, "invoke": k,
                        "why": "its inputs already differ (an earlier difference inside a control-flow body?)"}
            bound = _overflow_bound([ta[i] for i in ins])
            floating = ta[bad[0]].dtype.kind == "f"
            verdict = "overflow" if n.op_name in ORDER_DEPENDENT and floating and bound >= OVERFLOW_AT else "disagree"
            return {"verdict": verdict, "op": n.op_name, "node": ni, "invoke": k, "tensor": bad[0],
                    "bound": bound}
    return {"verdict": "unexplained", "why": "no operator of subgraph 0 has a differing output"}


def classify(ours: dict, theirs: dict) -> tuple[str, str]:
    """The class of one mutant's results. A difference is "disagree" here; the campaign then asks
    explain_divergence whether a float overflow explains it (disagree_overflow)."""
    so, st = ours["status"], theirs["status"]
    if so == "crash":
        return "ours_crash", f"{ours.get('returncode')} {ours.get('signal')}"
    if so == "hang":
        # an endless WHILE loop is the model's meaning (the official runtime loops too; max_while_iterations caps it)
        return ("both_hang" if st == "hang" else "ours_hang"), ""
    if "ran_unreported" in (so, st):  # ran, but its outputs were too large to send back: not compared
        return "not_compared", (ours if so == "ran_unreported" else theirs)["error"]
    if so == "ran" and st == "ran":
        ok, why = outputs_agree(ours["outputs"], theirs["outputs"])
        if ok:
            return "agree", ""
        return "disagree", why
    if so == "ran":
        return "ours_only", f"official {st}: {theirs.get('error', '')[:200]}"
    if st == "ran":
        return "official_only", ours.get("error", "")[:300]
    return "both_refused", ""


# ---------------------------------------------------------------------------------------------------------------
# the campaign


def campaign(args) -> dict:
    from fuzz_sources import source_models

    rng = np.random.default_rng(args.seed)
    sources = source_models()
    if args.only_model:  # (a comma-separated list: sources whose name holds any of them)
        sources = [s for s in sources if any(m and m in s[0] for m in args.only_model.split(","))]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="fuzz_", dir=out))
    env = dict(os.environ)
    env.setdefault("LITE_NUMBA_PROGRESS", "0")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so that `finally` stops the workers
    ours = Worker("ours", args.timeout, env, run_timeout=args.run_timeout)
    official = Worker("official", args.official_timeout, env)
    counts = collections.Counter()
    per_class = {c: collections.Counter() for c in CLASSES}
    bare = collections.Counter()
    findings = []
    refusals = {"official_only": [], "ours_only": []}  # who refused what the other ran (for review)
    start = time.monotonic()
    weights = np.array([args.structural, args.semantic, args.data], np.float64)
    done = 0
    try:
        while done < args.count and (args.minutes <= 0 or time.monotonic() - start < args.minutes * 60):
            name, src = sources[int(rng.integers(len(sources)))]
            cls = CLASSES[int(rng.choice(3, p=weights / weights.sum()))]
            mode = DATA_MODES[int(rng.integers(len(DATA_MODES)))] if cls == "data" else \
                str(rng.choice(DATA_MODES, p=[0.6, 0.1, 0.1, 0.1, 0.1]))
            extreme = []
            if cls == "structural":
                data, what = mutate_bytes(src, rng)
            elif cls == "semantic":
                m = mutate_semantic(src, rng)
                if m is None:
                    continue
                data, what, extreme = m
            else:
                data, what = src, f"data {mode}"
            i = done
            done += 1
            path = work / "mutant.tflite"
            path.write_bytes(data)
            req = {"path": str(path), "seed": int(rng.integers(2**31)), "mode": mode,
                   "invokes": 3 if mode == "resize" else 2}
            r_ours = dict(req, result=str(work / "ours.pkl"))
            r_off = dict(req, result=str(work / "official.pkl"))
            ours.send(r_ours)
            official.send(r_off)
            res_ours = ours.wait(r_ours, args.timeout)
            res_off = official.wait(r_off, args.official_timeout)
            kind, why = classify(res_ours, res_off)
            explained = None
            if kind == "disagree":
                explained = explain_in_child(req | {"path": str(path)}, work, args.timeout, env)
                if explained["verdict"] == "overflow":
                    kind = "disagree_overflow"
            counts[kind] += 1
            per_class[cls][kind] += 1
            if res_off["status"] in ("crash", "hang"):
                counts["official_" + res_off["status"]] += 1
            err = res_ours.get("error", "")
            oob = res_ours["status"] == "refused" and CHECKED_OOB.search(err) is not None
            if oob:
                counts["checked_mode_oob"] += 1
            if res_ours["status"] == "refused" and BARE.search(err):
                bare[err[:160]] += 1
                counts["bare_refusals"] += 1
            if kind in ("ours_crash", "ours_hang", "both_hang", "disagree", "disagree_overflow") or oob or \
                    (res_ours["status"] == "refused" and BARE.search(err)) or res_off["status"] == "crash":
                label = "oob" if oob else "official_crash" if res_off["status"] == "crash" else kind
                case = out / f"case_{args.seed}_{i}_{label}"
                case.mkdir(exist_ok=True)
                (case / "model.tflite").write_bytes(data)
                (case / "case.json").write_text(json.dumps({
                    "source": name, "class": cls, "mutation": what, "mode": mode, "seed": req["seed"],
                    "invokes": req["invokes"], "kind": kind, "why": why, "extreme_constants": extreme,
                    "first_divergence": explained,
                    "ours": err or res_ours["status"],
                    "official": res_off.get("error", res_off["status"])}, indent=1))
                findings.append({"case": case.name, "source": name, "mutation": what, "kind": label, "why": why,
                                 "ours": err[:200]})
            if kind in ("official_only", "ours_only") and len(refusals[kind]) < 400:
                refusals[kind].append({"source": name, "mutation": what[:160], "mode": mode,
                                       "refusal": (err if kind == "official_only" else
                                                   res_off.get("error", res_off["status"]))[:240]})
            if args.verbose:
                print(f"{i:6d} {cls:10s} {mode:9s} {kind:14s} {name[:32]:32s} {what[:60]}", flush=True)
            if args.progress and done % args.progress == 0:
                write_summary(out, args, counts, per_class, bare, findings, refusals, start, done, ours, official)
    finally:
        ours.close()
        official.close()
    return write_summary(out, args, counts, per_class, bare, findings, refusals, start, done, ours, official)


def write_summary(out, args, counts, per_class, bare, findings, refusals, start, done, ours, official) -> dict:
    summary = {
        "seed": args.seed, "mutants": done, "seconds": round(time.monotonic() - start, 1),
        "totals": dict(counts), "per_class": {c: dict(v) for c, v in per_class.items()},
        "bare_refusals": bare.most_common(40), "findings": findings[:500], "refusals": refusals,
        "worker_starts": {"ours": ours.started, "official": official.started},
    }
    (out / f"summary_{args.seed}.json").write_text(json.dumps(summary, indent=1))
    return summary


def _source_bytes(name: str) -> bytes | None:
    from fuzz_sources import RECIPES, REPO

    if name.startswith("built:"):
        fn = RECIPES.get(name[len("built:"):])
        return fn() if fn else None
    found = sorted((REPO / "tests" / "data").rglob(f"{name}.tflite"))
    return found[0].read_bytes() if found else None


def replay_extreme_constants(case: dict, data: bytes) -> list[str]:
    """The case's extreme_constants (saved since the campaign records them; for older semantic cases, recomputed
    against the source model)."""
    if "extreme_constants" in case or case["class"] != "semantic":
        return list(case.get("extreme_constants", []))
    src = _source_bytes(case["source"])
    if src is None:
        return []
    before = extreme_constants(to_builder(src))
    return sorted(n for key, n in extreme_constants(to_builder(data)).items() if key not in before)


def replay(case_dir: str) -> None:
    """Run a saved case in both runtimes in this process and print what each did, then the class."""
    case = json.loads((Path(case_dir) / "case.json").read_text())
    path = Path(case_dir) / "model.tflite"
    req = {"path": str(path), "seed": case["seed"], "mode": case["mode"], "invokes": case["invokes"]}
    results = []
    for runtime in ("ours", "official"):
        res = run_request(runtime, req)
        results.append(res)
        print(runtime, res["status"], res.get("error", ""))
        for k, outs in enumerate(res.get("outputs", [])):
            for j, o in enumerate(outs):
                print(f"  invoke {k} output {j}: {o.dtype} {o.shape} {np.array2string(o.ravel()[:8])}")
    extreme = replay_extreme_constants(case, path.read_bytes())
    if extreme:
        print(f"float constants the mutation left holding |v| > {EXTREME_CONSTANT:.3g} (inf included): {extreme}")
    kind, why = classify(results[0], results[1])
    if kind == "disagree":
        explained = explain_divergence(path.read_bytes(), req)
        print("first divergence:", json.dumps(explained))
        if explained["verdict"] == "overflow":
            kind = "disagree_overflow"
    print("class:", kind, why)


def explain_request(req_path: str) -> None:
    """The campaign's child step for a disagreement: explain_divergence of the request saved at
    req_path, printed as one JSON line (a child process, so that a crash or hang there is not the campaign's)."""
    req = json.loads(Path(req_path).read_text())
    print(json.dumps(explain_divergence(Path(req["path"]).read_bytes(), req)))


def explain_in_child(req: dict, work: Path, timeout: float, env: dict) -> dict:
    """explain_divergence in a child process (explain_request); "unexplained" when it fails."""
    (work / "explain.json").write_text(json.dumps(req))
    try:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--explain", str(work / "explain.json")],
                              capture_output=True, text=True, timeout=timeout, env=env)
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError) as e:
        return {"verdict": "unexplained", "why": f"explain failed: {type(e).__name__}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", choices=["ours", "official"], help=argparse.SUPPRESS)
    ap.add_argument("--replay", metavar="CASE_DIR")
    ap.add_argument("--explain", metavar="REQUEST_JSON", help=argparse.SUPPRESS)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--minutes", type=float, default=0, help="stop after this long (0: no limit)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="fuzz_out")
    ap.add_argument("--timeout", type=float, default=180, help="seconds for lite-numba per mutant (compiles)")
    ap.add_argument("--run-timeout", type=float, default=30,
                    help="seconds for lite-numba per mutant outside its compiles (an endless WHILE loop)")
    ap.add_argument("--official-timeout", type=float, default=30)
    ap.add_argument("--structural", type=float, default=0.3)
    ap.add_argument("--semantic", type=float, default=0.45)
    ap.add_argument("--data", type=float, default=0.25)
    ap.add_argument("--only-model", default="", help="only sources whose name holds this (comma-separated: any)")
    ap.add_argument("--progress", type=int, default=100, help="write the summary every N mutants")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    if args.worker:
        worker_main(args.worker)
        return
    if args.replay:
        replay(args.replay)
        return
    if args.explain:
        explain_request(args.explain)
        return
    summary = campaign(args)
    print(json.dumps({k: summary[k] for k in ("seed", "mutants", "seconds", "totals", "per_class",
                                              "worker_starts")}, indent=1))


if __name__ == "__main__":
    main()
