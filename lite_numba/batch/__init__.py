"""Batch inference at scale: `BatchRunner` runs a model over many examples a batch at a time (`runner`), and thin
adapters for Ray Data (`lite_numba.batch.ray`), Dask (`.dask`) and Apache Beam (`.beam`), each an optional extra
that imports its engine only when used.

Built on the public Interpreter API (lite_numba.api); nothing else imports batch.
"""

from .runner import (
    MODES,
    BatchInputError,
    BatchRunner,
    BatchStats,
    io_details,
    load_interpreter,
    model_key,
    run_batches,
    shared_runner,
    shared_runners,
)

__all__ = ["MODES", "BatchInputError", "BatchRunner", "BatchStats", "io_details", "load_interpreter", "model_key",
           "run_batches", "shared_runner", "shared_runners"]
