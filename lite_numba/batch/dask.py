"""Dask adapter (``pip install "lite-numba[dask]"``): a model over a dask.array (``map_blocks``) or a
dask.dataframe (``map_partitions``).

    y = predict_array(x, "model.tflite")                       # x: dask.array, examples along axis 0
    df = predict_frame(ddf, "model.tflite", ["f0", "f1", ...])  # a row's feature columns -> one example

Each task finds the model through lite_numba.batch.shared_runner: loaded and compiled once per worker process (and
thread), then reused by the next tasks on that worker. Every worker process of a machine shares the compile cache,
and a worker starting on a cold cache waits for the kernels another is compiling (lite_numba.jit.compiler) instead of
compiling them too. Only the model's path (or bytes) travels with the tasks. Dask is imported inside the functions
(`import lite_numba` stays light). Transform the data before and after with Dask's own operations."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .runner import BatchInputError, io_details, load_interpreter, shared_runner


def _run_block(block, model, output, batch_size, mode, num_threads):
    runner = shared_runner(model, batch_size, mode=mode, num_threads=num_threads)
    return runner.run(np.ascontiguousarray(block), progress=False)[output]


def predict_array(x, model, *, output: str | None = None, batch_size: int = 32, mode: str = "auto",
                  num_threads: int | None = None):
    """A dask.array of the model's `output` (default: its only output) for each example along axis 0 of `x`, for a
    one-input model: blocks run through map_blocks, chunked along axis 0 as `x` (other axes are rechunked whole),
    and fed by lite_numba.batch's rule."""
    import dask.array as da  # lazy: optional extra lite-numba[dask]

    if not isinstance(x, da.Array):
        raise BatchInputError(f"predict_array takes a dask.array, got {type(x).__name__} (BatchRunner.run takes "
                              f"numpy arrays)")
    if x.ndim < 1:
        raise BatchInputError("x must hold the examples along axis 0")
    ins, outs = io_details(load_interpreter(model))  # declared shapes: nothing compiled here
    if len(ins) != 1:
        raise BatchInputError(f"predict_array runs one-input models; this one has {[n for n, _ in ins]}")
    want = np.dtype(ins[0][1]["dtype"])
    if x.dtype != want:
        raise BatchInputError(f"x has dtype {x.dtype}, the model's input {ins[0][0]!r} takes {want} "
                              f"(x.astype(...) first)")
    names = [n for n, _ in outs]
    if output is None:
        if len(outs) != 1:
            raise BatchInputError(f"the model has outputs {names}: choose one with output=")
        output = names[0]
    elif output not in names:
        raise BatchInputError(f"the model has no output {output!r}; its outputs are {names}")
    d = outs[names.index(output)][1]
    per_example = tuple(int(s) for s in d["shape"][1:])
    if x.ndim > 1 and any(len(c) > 1 for c in x.chunks[1:]):
        x = x.rechunk({i: -1 for i in range(1, x.ndim)})
    chunks = (x.chunks[0], *((s,) for s in per_example))
    out_ndim = 1 + len(per_example)
    drop = list(range(out_ndim, x.ndim))
    new = list(range(x.ndim, out_ndim))
    return da.map_blocks(_run_block, x, model, output, batch_size, mode, num_threads, dtype=np.dtype(d["dtype"]),
                         chunks=chunks, drop_axis=drop or None, new_axis=new or None,
                         meta=np.empty((0,) * out_ndim, np.dtype(d["dtype"])))


def _columns(outs, prefix: str) -> list[tuple[str, str, int, np.dtype]]:
    """(column, output name, value index, dtype) for every value of every output of one example."""
    cols = []
    for name, d in outs:
        n = int(np.prod(d["shape"][1:]))
        cols += [(f"{prefix}{name}" + (f"_{j}" if n > 1 else ""), name, j, np.dtype(d["dtype"])) for j in range(n)]
    return cols


def _run_partition(df, model, columns, prefix, batch_size, mode, num_threads):
    import pandas as pd  # lazy: dask.dataframe's partitions

    runner = shared_runner(model, batch_size, mode=mode, num_threads=num_threads)
    name = runner.input_names[0]
    x = df[list(columns)].to_numpy(dtype=runner.input_dtypes[name]).reshape((len(df), *runner.example_shapes[name]))
    out = {k: v.reshape(len(df), -1) for k, v in runner.run(x, progress=False).items()}
    _, outs = io_details(runner.interpreter)
    return pd.DataFrame({c: out[name][:, j] for c, name, j, _ in _columns(outs, prefix)}, index=df.index)


def predict_frame(df, model, columns: Sequence[str], *, output_prefix: str = "", batch_size: int = 32,
                  mode: str = "auto", num_threads: int | None = None):
    """A dask.dataframe with the model's outputs for each row of `df` (same index and partitions): the row's
    `columns`, in order and converted to the input's dtype, are one example of a one-input model taking that many
    values. Each output becomes one column per value — `<output>` when it has one, `<output>_<j>` otherwise — with
    `output_prefix` in front."""
    import dask.dataframe as dd  # lazy: optional extra lite-numba[dask]
    import pandas as pd  # lazy: comes with dask.dataframe

    if not isinstance(df, dd.DataFrame):
        raise BatchInputError(f"predict_frame takes a dask.dataframe, got {type(df).__name__}")
    columns = list(columns)
    missing = [c for c in columns if c not in df.columns]
    if missing or not columns:
        raise BatchInputError(f"columns {missing or columns} are not in the frame (its columns: {list(df.columns)})")
    ins, outs = io_details(load_interpreter(model))
    if len(ins) != 1:
        raise BatchInputError(f"predict_frame runs one-input models; this one has {[n for n, _ in ins]}")
    per_example = [int(s) for s in ins[0][1]["shape"][1:]]
    if int(np.prod(per_example)) != len(columns):
        raise BatchInputError(f"the model's input {ins[0][0]!r} takes {per_example} = {int(np.prod(per_example))} "
                              f"values per example; {len(columns)} columns were given")
    meta = pd.DataFrame({c: pd.Series([], dtype=dt) for c, _, _, dt in _columns(outs, output_prefix)})
    return df.map_partitions(_run_partition, model, columns, output_prefix, batch_size, mode, num_threads, meta=meta)
