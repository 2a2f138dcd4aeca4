"""lite-numba: a TensorFlow Lite–compatible inference runtime whose kernels are compiled with Numba."""

__version__ = "0.1.0"

from .interpreter import Interpreter, OpResolverType, SignatureRunner  # noqa: E402
from .ops import OpKernel, PrepareContext, Tensor, custom_op, kernel  # noqa: E402
from .resolver import BuiltinOpResolver, MutableOpResolver, OpResolver, default_op_resolver  # noqa: E402

__all__ = [
    "Interpreter", "SignatureRunner", "OpResolverType", "OpKernel", "PrepareContext", "Tensor", "custom_op", "kernel",
    "BuiltinOpResolver", "MutableOpResolver", "OpResolver", "default_op_resolver", "__version__",
]
