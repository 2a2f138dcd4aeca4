"""lite-numba: a TensorFlow Lite–compatible inference runtime whose kernels are compiled with Numba."""

__version__ = "0.1.0"

from .numba_cache import configure as _configure_numba_cache  # noqa: E402

# before any kernel is decorated: Numba's cache directory follows the hash of every source file (numba_cache.py)
NUMBA_CACHE_DIR = _configure_numba_cache(__version__)

from . import lite  # noqa: E402  (`import lite_numba as tf` makes tf.lite.Interpreter work)
from .compat import install_as_tflite_runtime  # noqa: E402
from .interpreter import (  # noqa: E402
    Interpreter,
    InterpreterWithCustomOps,
    OpResolverType,
    SignatureRunner,
    load_delegate,
)
from .ops import OpKernel, PrepareContext, Tensor, custom_op, kernel  # noqa: E402
from .resolver import BuiltinOpResolver, MutableOpResolver, OpResolver, default_op_resolver  # noqa: E402

__all__ = [
    "Interpreter", "InterpreterWithCustomOps", "SignatureRunner", "OpResolverType", "load_delegate",
    "install_as_tflite_runtime", "lite", "OpKernel", "PrepareContext", "Tensor", "custom_op", "kernel",
    "BuiltinOpResolver", "MutableOpResolver", "OpResolver", "default_op_resolver", "__version__",
]
