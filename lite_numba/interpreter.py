"""The official module's names (`ai_edge_litert.interpreter`, `tflite_runtime.interpreter`): switch a program to
lite-numba by changing only its import line. The implementation lives in lite_numba.api."""

from .api.interpreter import (
    Delegate,
    DelegateError,
    Interpreter,
    InterpreterWithCustomOps,
    ModelError,
    ModelFileError,
    OpResolverType,
    SignatureRunner,
    load_delegate,
)

__all__ = ["Interpreter", "InterpreterWithCustomOps", "SignatureRunner", "OpResolverType", "ModelError",
           "ModelFileError", "Delegate", "DelegateError", "load_delegate"]

# the public module is where the classes are found, as the official classes report ai_edge_litert.interpreter
for _name in ("Interpreter", "InterpreterWithCustomOps", "SignatureRunner", "OpResolverType"):
    globals()[_name].__module__ = __name__
del _name
