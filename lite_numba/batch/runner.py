"""Batch inference: run a model over an array or an iterable of examples, a batch at a time, and return the outputs
stacked per output name. The engines' adapters (batch_ray, batch_dask, batch_beam) are thin layers over this.

How a batch is fed (`BatchRunner.mode`, chosen at construction and visible):

- ``"resize"``: every input's declared batch dimension is unknown (``shape_signature[0] == -1``): the input is
  resized to the batch (``resize_tensor_input(i, [n, ...])``) and the whole batch runs in one invoke. The last,
  shorter batch is one more resize (the compiled code is reused; only the arena is planned again).
- ``"loop"``: the batch dimension is fixed at 1 (or the inputs have no batch dimension of their own, or the inputs
  disagree): one invoke per example.
- ``"fixed"``: the batch dimension is fixed at N > 1: one invoke per N examples; a last, shorter batch is padded
  with copies of its final example and the padded rows' outputs are dropped.

``mode=`` forces one ("resize" on a model whose batch is fixed works when its ops accept another batch, as in the
official runtime). Results equal a plain loop of ``Interpreter.invoke`` over the examples: the same kernels run on
the same values (int8 bit for bit; float too, every kernel summing each output in the same order at any batch).

Inputs are matched by name: the SignatureDef's input names when the model has exactly one signature, else the
input tensors' names. An example is an array (a model with one input) or a mapping {input name: array}, with the
input's shape less the batch dimension (a leading batch dimension of 1 is accepted too); a dtype other than the
input's is an error naming both (convert in ``preprocess``). ``preprocess(example)`` runs on each example before
that; ``postprocess(outputs)`` on each batch's {output name: array}.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..api.interpreter import Interpreter

MODES = ("auto", "resize", "loop", "fixed")


class BatchInputError(ValueError):
    """An example that does not fit the model (name, shape or dtype), or a bad argument to the batch runner."""


@dataclass
class BatchStats:
    """What a runner has done: batches, examples, seconds inside invoke and seconds inside run_batch in all (feeding,
    invoking, stacking, pre- and post-processing)."""

    batches: int = 0
    examples: int = 0
    invokes: int = 0
    invoke_s: float = 0.0
    total_s: float = 0.0
    native_examples: int = 0  # examples run by the compiled per-example loop (BatchRunner.native)

    @property
    def overhead(self) -> float:
        """The share of run_batch's time spent outside invoke."""
        return (self.total_s - self.invoke_s) / self.total_s if self.total_s > 0 else 0.0


def load_interpreter(model, num_threads: int | None = None) -> Interpreter:
    """An Interpreter from a path, the model's bytes or an Interpreter (used as it is)."""
    if isinstance(model, Interpreter):
        return model
    if isinstance(model, (bytes, bytearray, memoryview)):
        return Interpreter(model_content=bytes(model), num_threads=num_threads)
    if isinstance(model, (str, os.PathLike)):
        return Interpreter(model_path=os.fspath(model), num_threads=num_threads)
    raise BatchInputError(f"model must be a .tflite path, the model's bytes or an Interpreter, got "
                          f"{type(model).__name__}")


def io_details(interpreter: Interpreter) -> tuple[list[tuple[str, dict]], list[tuple[str, dict]]]:
    """[(name, detail)] of the inputs and of the outputs, in the interpreter's order: named by the SignatureDef when
    the model has exactly one (what users see in the converter's output), else by the tensors' names."""
    ins, outs = interpreter.get_input_details(), interpreter.get_output_details()
    names = {d["index"]: d["name"] for d in (*ins, *outs)}
    sigs = interpreter.get_signature_list()
    if len(sigs) == 1:
        runner = interpreter.get_signature_runner(next(iter(sigs)))
        for detail in (runner.get_input_details(), runner.get_output_details()):
            names.update({d["index"]: n for n, d in detail.items() if d["index"] in names})
    return [(names[d["index"]], d) for d in ins], [(names[d["index"]], d) for d in outs]


class BatchRunner:
    """Runs one model over batches of examples (see the module's docstring for the feeding rule).

    `model`: a path, bytes or an Interpreter. `batch_size`: examples per batch in `run` (default 32).
    `preprocess(example) -> array | {name: array}`, `postprocess({output name: array}) -> {name: array}`.
    `progress`: None shows a tqdm bar when stderr is a terminal and a run lasts over a second; True always
    (needs tqdm), False never. `native` (loop mode): run a batch's examples in one compiled call when the model's
    invoke is compiled code only (Interpreter.run_rows; False: one Python set/invoke/get per example; the
    results are the same). The interpreter is allocated (its kernels compiled or loaded) here, once."""

    def __init__(self, model, batch_size: int = 32, *, mode: str = "auto", preprocess: Callable | None = None,
                 postprocess: Callable | None = None, num_threads: int | None = None, progress: bool | None = None,
                 native: bool = True):
        if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool) or batch_size < 1:
            raise BatchInputError(f"batch_size must be a positive integer, got {batch_size!r}")
        if mode not in MODES:
            raise BatchInputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        for name, fn in (("preprocess", preprocess), ("postprocess", postprocess)):
            if fn is not None and not callable(fn):
                raise BatchInputError(f"{name} must be callable, got {type(fn).__name__}")
        self.interpreter = it = load_interpreter(model, num_threads)
        self.batch_size = int(batch_size)
        self.preprocess, self.postprocess, self.progress = preprocess, postprocess, progress
        self.native = bool(native)
        self.stats = BatchStats()
        ins, outs = io_details(it)
        self._inputs = [(n, d["index"], tuple(int(s) for s in d["shape"]),
                         tuple(int(s) for s in d["shape_signature"]), np.dtype(d["dtype"])) for n, d in ins]
        self._outputs = [(n, d["index"]) for n, d in outs]
        self.input_names = [n for n, *_ in self._inputs]
        self.output_names = [n for n, _ in self._outputs]
        self.input_dtypes = {n: dt for n, _, _, _, dt in self._inputs}
        if len(set(self.input_names)) != len(self.input_names) or len(set(self.output_names)) != len(self.output_names):
            raise BatchInputError(f"the model's input or output names are not unique: {self.input_names} -> "
                                  f"{self.output_names}")
        self.mode = self._choose_mode(mode)
        shapes = [s for _, _, s, _, _ in self._inputs]
        if self.mode == "fixed":
            self.model_batch = shapes[0][0]
        else:
            self.model_batch = 1
        # the shape of one example of each input, without the batch dimension
        self.example_shapes = {n: (s[1:] if self.mode != "loop" or (s and s[0] == 1) else s)
                               for n, _, s, _, _ in self._inputs}
        self._fed = None  # the batch size the inputs are sized for (resize mode)
        it.allocate_tensors()

    def _choose_mode(self, mode: str) -> str:
        if not self._inputs:
            raise BatchInputError("the model has no inputs")
        sigs = [sig for *_, sig, _ in self._inputs]
        shapes = [s for _, _, s, _, _ in self._inputs]
        if mode == "auto":
            if all(len(s) >= 1 and s[0] == -1 for s in sigs):
                return "resize"
            lead = {s[0] if s else None for s in shapes}
            if len(lead) == 1 and next(iter(lead)) not in (None, 0, 1):
                return "fixed"
            return "loop"
        if mode in ("resize", "fixed") and any(not s for s in shapes):
            raise BatchInputError(f"mode={mode!r} needs a batch dimension on every input; "
                                  f"{[n for n, _, s, _, _ in self._inputs if not s]} have none (use mode='loop')")
        if mode == "fixed" and len({s[0] for s in shapes}) != 1:
            raise BatchInputError(f"mode='fixed': the inputs' batch dimensions differ: {shapes}")
        return mode

    def __repr__(self) -> str:
        return (f"BatchRunner(mode={self.mode!r}, batch_size={self.batch_size}, inputs={self.input_names}, "
                f"outputs={self.output_names})")

    # --- one batch --------------------------------------------------------------------------------------------
    def _example(self, ex, k: int) -> dict[str, np.ndarray]:
        if self.preprocess is not None:
            ex = self.preprocess(ex)
        if isinstance(ex, Mapping):
            missing = [n for n in self.input_names if n not in ex]
            extra = [n for n in ex if n not in self.input_names]
            if missing or extra:
                raise BatchInputError(f"example {k}: the model's inputs are {self.input_names}; missing {missing}, "
                                      f"unknown {extra}")
            return {n: np.asarray(ex[n]) for n in self.input_names}
        if len(self.input_names) != 1:
            raise BatchInputError(f"example {k}: the model has {len(self.input_names)} inputs "
                                  f"{self.input_names}; give each example as a mapping of input name to array")
        return {self.input_names[0]: np.asarray(ex)}

    def _stack(self, examples: list[dict], first: int) -> dict[str, np.ndarray]:
        """{input name: (n, *example shape)} from the examples, each checked."""
        out = {}
        for n, _, _, _, dt in self._inputs:
            want = self.example_shapes[n]
            arrs = []
            for k, ex in enumerate(examples):
                a = ex[n]
                if a.shape != want and not (a.shape == (1, *want)):
                    raise BatchInputError(f"example {first + k}: input {n!r} has shape {list(a.shape)}, the model "
                                          f"takes {list(want)} per example (mode {self.mode!r})")
                if a.dtype != dt:
                    raise BatchInputError(f"example {first + k}: input {n!r} has dtype {a.dtype}, the model takes "
                                          f"{dt} (convert it in preprocess)")
                arrs.append(a.reshape(want))
            out[n] = np.stack(arrs) if arrs else np.zeros((0, *want), dt)
        return out

    def _check_batch(self, inputs) -> dict[str, np.ndarray]:
        """A batch given as arrays: {input name: (n, *example shape)} (or one array for a one-input model)."""
        if not isinstance(inputs, Mapping):
            if len(self.input_names) != 1:
                raise BatchInputError(f"the model has {len(self.input_names)} inputs {self.input_names}; give the "
                                      f"batch as a mapping of input name to array")
            inputs = {self.input_names[0]: inputs}
        missing = [n for n in self.input_names if n not in inputs]
        extra = [n for n in inputs if n not in self.input_names]
        if missing or extra:
            raise BatchInputError(f"the model's inputs are {self.input_names}; missing {missing}, unknown {extra}")
        out, n_rows = {}, None
        for n, _, _, _, dt in self._inputs:
            a = np.asarray(inputs[n])
            want = self.example_shapes[n]
            if a.shape[1:] != want:
                raise BatchInputError(f"input {n!r}: a batch of shape {list(a.shape)}, the model takes "
                                      f"[n, {', '.join(map(str, want))}] (mode {self.mode!r})")
            if a.dtype != dt:
                raise BatchInputError(f"input {n!r} has dtype {a.dtype}, the model takes {dt}")
            if n_rows is not None and a.shape[0] != n_rows:
                raise BatchInputError(f"the inputs' batch sizes differ: {n_rows} and {a.shape[0]} ({n!r})")
            n_rows = a.shape[0]
            out[n] = a
        return out

    def run_batch(self, inputs) -> dict[str, np.ndarray]:
        """Run one batch given as arrays ({input name: (n, ...)} or one array) -> {output name: (n, ...)}; the
        batch may have any size (the feeding rule applies within it). preprocess is not applied here (it works on
        examples); postprocess is."""
        start = time.perf_counter()
        arrays = self._check_batch(inputs)
        out = self._postprocess(self._invoke(arrays))
        self.stats.total_s += time.perf_counter() - start
        return out

    def _postprocess(self, out: dict) -> dict:
        if self.postprocess is None:
            return out
        res = self.postprocess(out)
        if not isinstance(res, Mapping):
            raise BatchInputError(f"postprocess must return a mapping of name to array, got {type(res).__name__}")
        return dict(res)

    def _invoke(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        it = self.interpreter
        n = next(iter(arrays.values())).shape[0]
        self.stats.batches += 1
        self.stats.examples += n
        if n == 0:
            return {name: self._empty(name) for name in self.output_names}
        t_inv = 0.0
        if self.mode == "resize":
            if self._fed != n:
                for _, idx, shape, _, _ in self._inputs:
                    it.resize_tensor_input(idx, [n, *shape[1:]])
                it.allocate_tensors()
                self._fed = n
            for name, idx, *_ in self._inputs:
                it.set_tensor(idx, arrays[name])
            t0 = time.perf_counter()
            it.invoke()
            t_inv += time.perf_counter() - t0
            self.stats.invokes += 1
            out = {}
            for name, idx in self._outputs:
                y = it.get_tensor(idx)
                if y.ndim == 0 or y.shape[0] != n:
                    raise BatchInputError(f"output {name!r} has shape {list(y.shape)} for a batch of {n}: it does "
                                          f"not follow the batch dimension (use mode='loop')")
                out[name] = y
        else:
            out, t_inv = self._invoke_steps(arrays, n)
        self.stats.invoke_s += t_inv
        return out

    def _invoke_steps(self, arrays: dict[str, np.ndarray], n: int) -> tuple[dict[str, np.ndarray], float]:
        """Loop and fixed modes: one invoke per model batch (1 example, or N with the last padded), each output
        written into its rows of an array allocated at the first invoke. Inputs and outputs of planned (static)
        shape go straight through the interpreter's arena views, as set_tensor's and get_tensor's checked fast
        path does; others through set_tensor and get_tensor. One example per invoke is _invoke_rows."""
        if self.model_batch == 1:
            return self._invoke_rows(arrays, n)
        it = self.interpreter
        step = self.model_batch
        clock = time.perf_counter
        ins = [(arrays[name], idx, shape) for name, idx, shape, _, _ in self._inputs]
        out: dict[str, np.ndarray] = {}
        t_inv = 0.0
        views = it.io_views()
        for s in range(0, n, step):
            k = min(step, n - s)
            for arr, idx, shape in ins:
                a = arr[s:s + k]
                if k < step:  # a short last batch: pad with its final example
                    a = np.concatenate([a, np.repeat(a[-1:], step - k, axis=0)])
                a = a.reshape(shape)
                view = views.get(idx)
                if view is not None and view.shape == shape:
                    view[...] = a  # dtype and shape were checked with the batch
                else:
                    it.set_tensor(idx, a)
            t0 = clock()
            it.invoke()
            t_inv += clock() - t0
            views = it.io_views()  # (an invoke may plan the arena again)
            for name, idx in self._outputs:
                y = views.get(idx)
                if y is None:
                    y = it.get_tensor(idx)
                if y.ndim == 0 or y.shape[0] != step:
                    raise BatchInputError(f"output {name!r} has shape {list(y.shape)}: it does not follow the "
                                          f"batch dimension of {step}")
                dst = out.get(name)
                if dst is None:
                    dst = out[name] = np.empty((n, *y.shape[1:]), y.dtype)
                elif y.shape[1:] != dst.shape[1:]:
                    raise BatchInputError(f"output {name!r} has shape {list(y.shape)} at example {s}, "
                                          f"{list(dst.shape[1:])} per example before it: outputs whose shape "
                                          f"varies cannot be stacked (reduce them in postprocess, or run "
                                          f"one example per batch)")
                dst[s:s + k] = y[:k]
        self.stats.invokes += -(-n // step)
        return out, t_inv

    def _invoke_rows(self, arrays: dict[str, np.ndarray], n: int) -> tuple[dict[str, np.ndarray], float]:
        """_invoke_steps for one example per invoke, with the least Python per example (what is left of ~12 us
        outside invoke is mostly the copy of the example into the arena): the outputs' arrays and shapes are fixed
        at the first example, and each later one is checked against them with one comparison."""
        it = self.interpreter
        clock = time.perf_counter
        if self.native:
            t0 = clock()
            stacked = it.run_rows([(idx, arrays[name]) for name, idx, *_ in self._inputs],
                                   [idx for _, idx in self._outputs])
            if stacked is not None:  # every example in one compiled call (the copies in and out counted as invoke)
                self.stats.invokes += n
                self.stats.native_examples += n
                return dict(zip(self.output_names, stacked)), clock() - t0
        ins = [(arrays[name], idx, shape) for name, idx, shape, _, _ in self._inputs]
        outs = None  # [(name, index, stacked array, the output's shape at example 0)]
        t_inv = 0.0
        views = it.io_views()
        for s in range(n):
            for arr, idx, shape in ins:
                view = views.get(idx)
                if view is not None and view.shape == shape:
                    view[...] = arr[s]  # (the example's shape, with or without the leading 1: broadcast)
                else:
                    it.set_tensor(idx, arr[s].reshape(shape))
            t0 = clock()
            it.invoke()
            t_inv += clock() - t0
            views = it.io_views()  # (an invoke may plan the arena again)
            if outs is None:
                outs = []
                for name, idx in self._outputs:
                    y = views.get(idx)
                    if y is None:
                        y = it.get_tensor(idx)
                    per = y.shape[1:] if y.ndim and y.shape[0] == 1 else y.shape  # else: no batch dimension
                    outs.append((name, idx, np.empty((n, *per), y.dtype), y.shape))
            for name, idx, dst, shape in outs:
                y = views.get(idx)
                if y is None:
                    y = it.get_tensor(idx)
                if y.shape != shape:
                    raise BatchInputError(f"output {name!r} has shape {list(y.shape)} at example {s}, "
                                          f"{list(shape)} before it: outputs whose shape varies cannot be "
                                          f"stacked (reduce them in postprocess, or run one example per batch)")
                dst[s] = y
        self.stats.invokes += n
        return {name: dst for name, _, dst, _ in outs}, t_inv

    def _empty(self, name: str) -> np.ndarray:
        idx = dict(self._outputs)[name]
        d = next(d for d in self.interpreter.get_output_details() if d["index"] == idx)
        shape = tuple(int(s) for s in d["shape"])
        per = shape[1:] if shape and (self.mode != "loop" or shape[0] == 1) else shape
        return np.zeros((0, *per), d["dtype"])

    # --- whole runs -------------------------------------------------------------------------------------------
    def iter_batches(self, examples, batch_size: int | None = None) -> Iterator[dict[str, np.ndarray]]:
        """Yield {output name: array} per batch of `examples` (an array, a mapping of arrays, or an iterable of
        examples), after postprocess."""
        bs = self.batch_size if batch_size is None else batch_size
        if not isinstance(bs, (int, np.integer)) or bs < 1:
            raise BatchInputError(f"batch_size must be a positive integer, got {bs!r}")
        if self.preprocess is None and (isinstance(examples, np.ndarray) or (
                isinstance(examples, Mapping) and all(isinstance(v, np.ndarray) for v in examples.values()))):
            arrays = self._check_batch(examples)
            n = next(iter(arrays.values())).shape[0]
            for s in range(0, n, bs):
                yield self.run_batch({k: v[s:s + bs] for k, v in arrays.items()})
            return
        if isinstance(examples, Mapping):
            raise BatchInputError("a mapping of examples must map input names to numpy arrays (with preprocess, "
                                  "give an iterable of examples)")
        if not isinstance(examples, Iterable):
            raise BatchInputError(f"examples must be an array, a mapping of arrays or an iterable, got "
                                  f"{type(examples).__name__}")
        chunk, first = [], 0
        for k, ex in enumerate(examples):
            if not chunk:
                start = time.perf_counter()
            chunk.append(self._example(ex, k))
            if len(chunk) == bs:
                yield self._run_examples(chunk, first, start)
                first += len(chunk)
                chunk = []
        if chunk:
            yield self._run_examples(chunk, first, start)

    def _run_examples(self, chunk: list[dict], first: int, start: float) -> dict[str, np.ndarray]:
        out = self._postprocess(self._invoke(self._stack(chunk, first)))
        self.stats.total_s += time.perf_counter() - start
        return out

    def run(self, examples, batch_size: int | None = None, *, total: int | None = None,
            progress: bool | None = None) -> dict[str, np.ndarray]:
        """Run every example; returns {output name: array stacked over all examples} (after postprocess)."""
        if total is None:
            if isinstance(examples, np.ndarray):
                total = examples.shape[0] if examples.ndim else None
            elif isinstance(examples, Mapping) and examples:
                total = len(next(iter(examples.values())))
            elif hasattr(examples, "__len__"):
                total = len(examples)
        parts: dict[str, list] = {}
        bar = self._bar(total, self.progress if progress is None else progress)
        try:
            for out in self.iter_batches(examples, batch_size):
                for k, v in out.items():
                    parts.setdefault(k, []).append(v)
                if bar is not None:
                    bar.update(len(next(iter(out.values()))) if out else 0)
        finally:
            if bar is not None:
                bar.close()
        if not parts:
            if self.postprocess is not None:
                return {}
            return {name: self._empty(name) for name in self.output_names}
        return {k: np.concatenate(v) for k, v in parts.items()}

    def _bar(self, total: int | None, progress: bool | None) -> Any:
        if progress is False:
            return None
        if progress is None and not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty()):
            return None
        try:
            from tqdm.auto import tqdm  # lazy: optional (pip install tqdm)
        except ImportError:
            if progress:
                raise BatchInputError("progress=True needs tqdm (pip install tqdm)") from None
            return None
        return tqdm(total=total, unit="ex", desc="lite-numba", delay=0.0 if progress else 1.0, file=sys.stderr)


def run_batches(model, examples, batch_size: int = 32, **kwargs) -> dict[str, np.ndarray]:
    """BatchRunner(model, batch_size, **kwargs).run(examples): every example through the model, outputs stacked."""
    run_kw = {k: kwargs.pop(k) for k in ("total",) if k in kwargs}
    return BatchRunner(model, batch_size, **kwargs).run(examples, **run_kw)


# --- one runner per model in each worker process ------------------------------------------------------------------
_SHARED: dict = {}
_SHARED_LOCK = threading.Lock()


def model_key(model) -> tuple:
    """What identifies a model across calls in one process: a path with its size and modification time, or the
    hash of the bytes."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        return ("bytes", hashlib.sha256(bytes(model)).hexdigest())
    if isinstance(model, (str, os.PathLike)):
        p = os.path.abspath(os.fspath(model))
        try:
            st = os.stat(p)
        except OSError as e:
            raise BatchInputError(f"cannot read the model {p}: {e.strerror}") from None
        return ("path", p, st.st_size, st.st_mtime_ns)
    raise BatchInputError(f"model must be a .tflite path or the model's bytes, got {type(model).__name__}")


def shared_runner(model, batch_size: int = 32, *, mode: str = "auto", num_threads: int | None = None,
                  preprocess: Callable | None = None, postprocess: Callable | None = None) -> BatchRunner:
    """The BatchRunner of `model` for the calling thread, made once per process and thread: a worker (Dask, Beam)
    loads and allocates the model on its first task and reuses it for the next ones. A thread after the first gets a
    clone of the first thread's interpreter (sharing its compiled code). The pre/post-processing callables are set
    on each call."""
    base_key = (model_key(model), int(batch_size), mode, num_threads)
    key = (*base_key, threading.get_ident())
    runner = _SHARED.get(key)
    if runner is None:
        with _SHARED_LOCK:
            first = next((r for k, r in _SHARED.items() if k[:-1] == base_key), None)
        interp = first.interpreter.clone() if first is not None else load_interpreter(model, num_threads)
        runner = BatchRunner(interp, batch_size, mode=mode, progress=False)
        with _SHARED_LOCK:
            _SHARED[key] = runner
    runner.preprocess, runner.postprocess = preprocess, postprocess
    return runner


def shared_runners(model) -> list[BatchRunner]:
    """Every runner shared_runner made for `model` in this process (all threads, batch sizes and modes): their
    `stats` tell what a worker has done."""
    key = model_key(model)
    with _SHARED_LOCK:
        return [r for k, r in _SHARED.items() if k[0] == key]
