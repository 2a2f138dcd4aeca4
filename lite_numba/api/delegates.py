"""TFLite delegates: lite-numba cannot load or apply any, and says so instead of running on the CPU in silence.

A TFLite delegate is a native library (Edge TPU, GPU, Hexagon, XNNPACK...) that takes over parts of the graph
through the C API `TfLiteDelegate`. lite-numba runs every op with its own compiled kernels and has no such API, so
`load_delegate` always fails, with an error that is both a `ValueError` (what the official docstring promises and the
"try the Edge TPU, else the CPU" snippet catches) and an `OSError` (what the official runtime actually raises when the
library file is missing: ctypes' error), and `Interpreter(experimental_delegates=[...])` with any delegate raises.
"""

from __future__ import annotations

__all__ = ["Delegate", "DelegateError", "load_delegate"]


class DelegateError(ValueError, OSError):
    """A delegate was requested; lite-numba cannot load or apply TFLite delegates."""


_WHY = ("lite-numba runs every op with its own compiled CPU kernels and cannot load or apply TFLite delegates "
        "(Edge TPU, GPU, NNAPI, Hexagon, external delegates). Run without the delegate on lite-numba, or use the "
        "official runtime (ai_edge_litert / tflite_runtime) for it.")


def delegate_refused(what: str) -> DelegateError:
    """The error for a delegate request; `what` names the request."""
    return DelegateError(f"{what}\n{_WHY}")


class Delegate:
    """Stands in for `ai_edge_litert.interpreter.Delegate`; constructing one always raises `DelegateError`."""

    def __init__(self, library, options=None):
        raise delegate_refused(f"Failed to load delegate from {library}")


def load_delegate(library, options=None) -> Delegate:
    """Always raises `DelegateError` (a ValueError and an OSError): lite-numba cannot use TFLite delegates.

    The official fallback pattern therefore takes its CPU branch::

        try:
            delegates = [load_delegate("libedgetpu.so.1")]
        except ValueError:
            delegates = []
        interpreter = Interpreter(model_path, experimental_delegates=delegates)
    """
    return Delegate(library, options)
