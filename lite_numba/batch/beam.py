"""Apache Beam adapter (``pip install "lite-numba[beam]"``): the TFLite model handler for ``RunInference``.

    from apache_beam.ml.inference.base import RunInference
    examples | RunInference(TFLiteModelHandlerNumpy("model.tflite", max_batch_size=32))

Beam calls `load_model` once per worker (through its shared handle) and `run_inference` on each batch that
BatchElements formed (min/max batch size as in Beam's other handlers). An element is one example: a numpy array for
a one-input model, or a mapping {input name: array}. Each result is a PredictionResult whose `inference` is
{output name: that example's output} (after `postprocess`, which runs per batch). The distribution metric
lite_numba_invoke_micro_secs (namespace BeamML_LiteNumba) is each batch's time in invoke, beside RunInference's
inference_batch_latency_micro_secs. The batch is fed by
lite_numba.batch's rule (resize for a dynamic batch dimension, else example by example)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from apache_beam.metrics import Metrics
from apache_beam.ml.inference.base import ModelHandler, PredictionResult

from .runner import BatchInputError, BatchRunner


class TFLiteModelHandlerNumpy(ModelHandler[Any, PredictionResult, BatchRunner]):
    """`model_uri`: a local .tflite path (or the model's bytes). The batch size keywords and `model_copies`,
    `large_model` are Beam's (ModelHandler); `mode`, `num_threads` and `postprocess` are BatchRunner's."""

    def __init__(self, model_uri, *, min_batch_size: int | None = None, max_batch_size: int | None = None,
                 mode: str = "auto", num_threads: int | None = None, postprocess: Callable | None = None,
                 **kwargs):
        if not isinstance(model_uri, (str, bytes)) and not hasattr(model_uri, "__fspath__"):
            raise BatchInputError(f"model_uri must be a .tflite path or the model's bytes, got "
                                  f"{type(model_uri).__name__}")
        super().__init__(min_batch_size=min_batch_size, max_batch_size=max_batch_size, **kwargs)
        self.model_uri = model_uri
        self._mode, self._num_threads, self._postprocess = mode, num_threads, postprocess
        self._max_batch = max_batch_size or 32
        self._invoke_us = Metrics.distribution(self.get_metrics_namespace(), "lite_numba_invoke_micro_secs")

    def load_model(self) -> BatchRunner:
        return BatchRunner(self.model_uri, self._max_batch, mode=self._mode, num_threads=self._num_threads,
                           postprocess=self._postprocess, progress=False)

    def run_inference(self, batch: Sequence[Any], model: BatchRunner,
                      inference_args: dict[str, Any] | None = None) -> Iterable[PredictionResult]:
        if inference_args:
            raise BatchInputError(f"TFLiteModelHandlerNumpy takes no inference_args, got {sorted(inference_args)}")
        batch = list(batch)
        invoked = model.stats.invoke_s
        out = model.run(batch, batch_size=max(len(batch), 1), progress=False)
        # beside RunInference's own inference_batch_latency_micro_secs: the part of it spent in invoke
        self._invoke_us.update(int((model.stats.invoke_s - invoked) * 1e6))
        model_id = self.model_uri if isinstance(self.model_uri, str) else None
        return [PredictionResult(ex, {k: v[i] for k, v in out.items()}, model_id) for i, ex in enumerate(batch)]

    def update_model_path(self, model_path: str | None = None):
        if model_path:
            self.model_uri = model_path

    def get_metrics_namespace(self) -> str:
        return "BeamML_LiteNumba"
