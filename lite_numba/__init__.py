"""lite-numba: a TensorFlow Lite–compatible inference runtime whose kernels are compiled with Numba."""

from .jit import numba_cache as _numba_cache  # noqa: E402
from .version import __version__  # noqa: E402, F401

# before any kernel is decorated: Numba's cache directory follows the hash of every source file (numba_cache.py);
# set when Numba is first imported, so that `import lite_numba` itself stays light
_numba_cache.install(__version__)

from . import lite  # noqa: E402  (`import lite_numba as tf` makes tf.lite.Interpreter work)
from .api.compat import install_as_tflite_runtime  # noqa: E402
from .interpreter import (  # noqa: E402
    Interpreter,
    InterpreterWithCustomOps,
    OpResolverType,
    SignatureRunner,
    load_delegate,
)
from .ops import OpKernel, PrepareContext, Tensor, custom_op, kernel  # noqa: E402
from .runtime.resolver import BuiltinOpResolver, MutableOpResolver, OpResolver, default_op_resolver  # noqa: E402

__all__ = [
    "Interpreter", "InterpreterWithCustomOps", "SignatureRunner", "OpResolverType", "load_delegate",
    "install_as_tflite_runtime", "lite", "OpKernel", "PrepareContext", "Tensor", "custom_op", "kernel",
    "BuiltinOpResolver", "MutableOpResolver", "OpResolver", "default_op_resolver", "__version__",
]


def __getattr__(name: str):
    if name == "NUMBA_CACHE_DIR":  # Numba's cache directory for lite-numba's kernels (imports Numba)
        return _numba_cache.ensure(__version__)
    raise AttributeError(f"module 'lite_numba' has no attribute {name!r}")
