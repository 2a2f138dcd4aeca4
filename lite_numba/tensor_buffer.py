"""The official module's names (`ai_edge_litert.tensor_buffer`): TensorBuffer. The implementation lives in
lite_numba.api.tensor_buffer."""

from .api.tensor_buffer import TensorBuffer

__all__ = ["TensorBuffer"]

TensorBuffer.__module__ = __name__
