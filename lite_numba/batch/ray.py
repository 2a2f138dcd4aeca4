"""Ray Data adapter (``pip install "lite-numba[ray]"``): a callable class for ``Dataset.map_batches``.

    ds.map_batches(RayPredictor, fn_constructor_kwargs={"model": "model.tflite"}, batch_size=32,
                   compute=actor_pool(2))

`actor_pool(n)` is Ray's ActorPoolStrategy with n actors, each given up to 4 batches at a time: an actor then
starts its next batch as soon as one ends, instead of idling until the driver, which competes for the same cores,
sends the next one (2 vCPUs, 16 batches of 256 images: the idle time between an actor's batches went from 30-55 ms
with Ray's default to 8-9 ms, and 2 actors from x1.44 to x1.82 one actor's throughput). Each actor runs one call
at a time (max_concurrent_calls_per_actor=1, Ray's default) on the thread that runs its task
(enable_true_multi_threading=True). Otherwise Ray wraps the class so that every call is handed to a second thread and
waited for; with one call at a time that hand-off buys nothing. It cost ~1 ms per batch here: Ray's engine overhead
at batch 32 on 1 actor went from 9.5-11.5 % to 7.6-8.4 % in paired rounds (Xeon, 2 vCPUs). Do not raise
max_concurrent_calls_per_actor with this pool: the calls would then run at once, and one predictor's interpreter
refuses a second invoke while one runs. `concurrency=n` works too (Ray's default pool and hand-off).

Ray's own cost is per task (a block) first and per batch second: on 2 vCPUs, a class that runs nothing still
took 14-21 ms per task with blocks of 32 rows, 1.9-2.4 ms per batch of 32 with blocks of 256 and 1.1-1.2 ms with
blocks of 1,024 (docs/architecture.md, "Batch inference at scale"). Read data in big blocks (Ray's readers aim at up
to 128 MiB) and keep batches of tens of examples or more.

Ray makes one instance per actor: the model is loaded and compiled (or loaded from the compile cache, which every
worker process on a machine shares; see lite_numba.jit.compiler.claim_compiles) once per actor. Each batch arrives as
{column: numpy array}; the model's inputs are read from the columns named like them (or `input_columns`), every
output becomes a column (named like the output, or through `output_columns`), and the other columns pass through
(ids, file names), the input columns too unless `drop_inputs`. The rows are fed by lite_numba.batch's rule.

This module imports Ray only in `actor_pool`: the class only needs numpy batches (Ray imports it in each actor by
pickle)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

import numpy as np

from .runner import BatchInputError, BatchRunner


def actor_pool(workers: int, in_flight: int = 4):
    """ray.data.ActorPoolStrategy(size=workers, max_tasks_in_flight_per_actor=in_flight, one call at a time per
    actor, run on the actor's task thread), for map_batches' `compute` (see the module's docstring)."""
    import ray.data  # lazy: optional extra lite-numba[ray]

    if int(workers) < 1 or int(in_flight) < 1:
        raise ValueError(f"actor_pool needs workers >= 1 and in_flight >= 1, got {workers} and {in_flight}")
    kwargs = {"size": int(workers), "max_tasks_in_flight_per_actor": int(in_flight)}
    try:  # (Ray 2.60 has both arguments; see the module's docstring for why the call stays on the task's thread)
        return ray.data.ActorPoolStrategy(**kwargs, max_concurrent_calls_per_actor=1, enable_true_multi_threading=True)
    except TypeError:  # an older Ray, without these arguments: its default hand-off thread
        return ray.data.ActorPoolStrategy(**kwargs)


class RayPredictor:
    """`model`: a .tflite path or its bytes. `input_columns`: {model input name: column} (or one column name for a
    one-input model); default, the inputs' own names. `output_columns`: {output name: column}; default, the outputs'
    names. `preprocess(row_dict) -> example` runs per row (on {column: value}), `postprocess` per batch of outputs,
    as in BatchRunner. `batch_size` only sizes the model's invokes in resize mode: Ray decides the batches.
    `timing=True` adds the columns lite_numba_batch_s and lite_numba_invoke_s: the batch's seconds in this call and
    in invoke, on each of its rows (the adapter's overhead is their difference), lite_numba_started, the wall
    clock when the batch began, and lite_numba_pid, the process (actor) that ran it."""

    def __init__(self, model, *, input_columns: str | Mapping[str, str] | None = None,
                 output_columns: Mapping[str, str] | None = None, preprocess: Callable | None = None,
                 postprocess: Callable | None = None, drop_inputs: bool = True, batch_size: int = 32,
                 mode: str = "auto", num_threads: int | None = None, timing: bool = False):
        self.timing = timing
        self.runner = BatchRunner(model, batch_size, mode=mode, num_threads=num_threads, postprocess=postprocess,
                                  progress=False)
        names = self.runner.input_names
        if input_columns is None:
            input_columns = {n: n for n in names}
        elif isinstance(input_columns, str):
            if len(names) != 1:
                raise BatchInputError(f"the model has inputs {names}: give input_columns as a mapping of input "
                                      f"name to column")
            input_columns = {names[0]: input_columns}
        unknown = [n for n in input_columns if n not in names]
        if unknown or len(input_columns) != len(names):
            raise BatchInputError(f"input_columns must map each of the model's inputs {names} to a column; got "
                                  f"{dict(input_columns)}")
        self.input_columns = dict(input_columns)
        self.output_columns = dict(output_columns or {})
        unknown = [n for n in self.output_columns if n not in self.runner.output_names]
        if unknown and postprocess is None:
            raise BatchInputError(f"output_columns names {unknown}, which are not outputs of the model "
                                  f"{self.runner.output_names}")
        self.preprocess, self.drop_inputs = preprocess, drop_inputs

    def __call__(self, batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        start, invoked, began = time.perf_counter(), self.runner.stats.invoke_s, time.time()
        if self.preprocess is not None:
            n = len(next(iter(batch.values()))) if batch else 0
            rows = ({c: v[k] for c, v in batch.items()} for k in range(n))
            outputs = self.runner.run(map(self.preprocess, rows), batch_size=max(n, 1), progress=False)
        else:
            missing = [c for c in self.input_columns.values() if c not in batch]
            if missing:
                raise BatchInputError(f"the batch has no column {missing} for the model's inputs (columns: "
                                      f"{sorted(batch)}); set input_columns")
            outputs = self.runner.run_batch({n: _dense(batch[c], c) for n, c in self.input_columns.items()})
        result = {c: v for c, v in batch.items() if not (self.drop_inputs and c in self.input_columns.values())}
        for name, value in outputs.items():
            result[self.output_columns.get(name, name)] = value
        if self.timing:  # this batch's seconds in the adapter and in invoke, on each of its rows
            n = len(next(iter(outputs.values()))) if outputs else 0
            result["lite_numba_batch_s"] = np.full(n, time.perf_counter() - start)
            result["lite_numba_invoke_s"] = np.full(n, self.runner.stats.invoke_s - invoked)
            result["lite_numba_started"] = np.full(n, began)  # the wall clock (time.time()) when the batch began
            result["lite_numba_pid"] = np.full(n, os.getpid())
        return result


def _dense(column, name: str) -> np.ndarray:
    """A column as one numpy array (Ray gives tensor columns as ndarrays; ragged ones as object arrays)."""
    a = np.asarray(column)
    if a.dtype == object:
        try:
            a = np.stack([np.asarray(v) for v in a])
        except ValueError:
            raise BatchInputError(f"column {name!r} holds arrays of different shapes") from None
    return a
