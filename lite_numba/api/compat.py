"""`install_as_tflite_runtime()`: let libraries that import the official runtime by name run on lite-numba.

A library that does `import tflite_runtime.interpreter as tflite` (or `ai_edge_litert.interpreter`) inside its own
code cannot be switched by editing an import line. Calling `lite_numba.install_as_tflite_runtime()` before importing
it registers modules of those names in `sys.modules` that offer `lite_numba.api.interpreter`'s names (Interpreter,
InterpreterWithCustomOps, SignatureRunner, OpResolverType, load_delegate, Delegate), as `pymysql.install_as_MySQLdb()`
does for MySQLdb. Nothing is installed on import of lite_numba: it is always the program's explicit choice.
"""

from __future__ import annotations

import sys
from types import ModuleType

from ..version import __version__
from . import interpreter as _interpreter

__all__ = ["install_as_tflite_runtime", "RUNTIME_NAMES"]

# the official packages whose `.interpreter` module has the Interpreter API
RUNTIME_NAMES = ("tflite_runtime", "ai_edge_litert")
_EXPORTS = ("Interpreter", "InterpreterWithCustomOps", "SignatureRunner", "OpResolverType", "load_delegate",
            "Delegate")


def _package(name: str) -> tuple[ModuleType, ModuleType]:
    pkg = ModuleType(name, f"lite-numba standing in for {name} (lite_numba.install_as_tflite_runtime)")
    pkg.__path__ = []  # a package, so `import NAME.interpreter` looks the submodule up in sys.modules
    pkg.__version__ = __version__
    pkg.__lite_numba__ = True
    sub = ModuleType(f"{name}.interpreter", _interpreter.__doc__)
    for attr in _EXPORTS:
        setattr(sub, attr, getattr(_interpreter, attr))
    sub.__lite_numba__ = True
    pkg.interpreter = sub
    return pkg, sub


def install_as_tflite_runtime(names: tuple[str, ...] = RUNTIME_NAMES) -> list[str]:
    """Register `NAME` and `NAME.interpreter` in `sys.modules` for each name in `names` (default: tflite_runtime
    and ai_edge_litert), so later imports of the official runtime get lite-numba. Modules already imported keep the
    references they took. Returns the module names registered."""
    done = []
    for name in names:
        if name not in RUNTIME_NAMES:
            raise ValueError(f"unknown runtime name {name!r}; expected one of {RUNTIME_NAMES}")
        pkg, sub = _package(name)
        sys.modules[name] = pkg
        sys.modules[sub.__name__] = sub
        done += [name, sub.__name__]
    return done
