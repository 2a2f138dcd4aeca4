"""`install_as_tflite_runtime()`: let libraries that import the official runtime by name run on lite-numba.

A library that does `import tflite_runtime.interpreter as tflite` (or `ai_edge_litert.interpreter`, or the LiteRT 2
API: `from ai_edge_litert.compiled_model import CompiledModel`) inside its own code cannot be switched by editing an
import line. Calling `lite_numba.install_as_tflite_runtime()` before importing it registers modules of those names in
`sys.modules`, as `pymysql.install_as_MySQLdb()` does for MySQLdb: `NAME.interpreter` with `lite_numba.api.
interpreter`'s names (Interpreter, InterpreterWithCustomOps, SignatureRunner, OpResolverType, load_delegate,
Delegate), and for ai_edge_litert also `compiled_model`, `tensor_buffer`, `environment`, `options`, `cpu_options`,
`cpu_kernel_mode`, `hardware_accelerator`, `gpu_options`, `qualcomm_options` and `intel_openvino_options` with the
LiteRT 2 names (lite_numba.api.compiled_model). Nothing is installed on import of lite_numba: it is always the
program's explicit choice.
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
_QUALCOMM = ("QualcommOptions", "QualcommLogLevel", "QualcommHtpPerformanceMode", "QualcommDspPerformanceMode",
             "QualcommProfiling", "QualcommOptimizationLevel", "QualcommGraphPriority", "QualcommBackend",
             "QualcommGraphIOTensorMemType")
_OPENVINO = ("IntelOpenVinoOptions", "IntelOpenVinoGraphBackend", "IntelOpenVinoPerformanceMode")
# ai_edge_litert's LiteRT 2 modules: (submodule, names, where they live: lite_numba.api.<module>)
_LITERT2 = (
    ("compiled_model", ("CompiledModel", "CpuOptions", "CpuKernelMode", "GpuOptions", "QualcommOptions",
                        "IntelOpenVinoOptions", "Options", "HardwareAccelerator", "Environment", "EnvironmentOptions",
                        "TensorBuffer"), "compiled_model"),
    ("tensor_buffer", ("TensorBuffer",), "tensor_buffer"),
    ("environment", ("Environment", "EnvironmentOptions"), "litert_options"),
    ("hardware_accelerator", ("HardwareAccelerator",), "litert_options"),
    ("cpu_kernel_mode", ("CpuKernelMode",), "litert_options"),
    ("cpu_options", ("CpuOptions", "CpuKernelMode"), "litert_options"),
    ("gpu_options", ("GpuOptions",), "litert_options"),
    ("qualcomm_options", _QUALCOMM, "litert_options"),
    ("intel_openvino_options", _OPENVINO, "litert_options"),
    ("options", ("Options", "HardwareAccelerator", "CpuOptions", "CpuKernelMode", "GpuOptions", *_QUALCOMM,
                 *_OPENVINO), "litert_options"),
)


def _submodule(pkg: ModuleType, name: str, names: tuple[str, ...], source: ModuleType) -> ModuleType:
    sub = ModuleType(f"{pkg.__name__}.{name}", source.__doc__)
    for attr in names:
        setattr(sub, attr, getattr(source, attr))
    sub.__lite_numba__ = True
    setattr(pkg, name, sub)
    return sub


def _package(name: str) -> list[ModuleType]:
    pkg = ModuleType(name, f"lite-numba standing in for {name} (lite_numba.install_as_tflite_runtime)")
    pkg.__path__ = []  # a package, so `import NAME.interpreter` looks the submodule up in sys.modules
    pkg.__version__ = __version__
    pkg.__lite_numba__ = True
    modules = [pkg, _submodule(pkg, "interpreter", _EXPORTS, _interpreter)]
    if name == "ai_edge_litert":
        # lazy: the LiteRT 2 modules load when they are installed, not with every `import lite_numba`
        from . import compiled_model, litert_options, tensor_buffer

        sources = {"compiled_model": compiled_model, "litert_options": litert_options, "tensor_buffer": tensor_buffer}
        modules += [_submodule(pkg, sub, names, sources[source]) for sub, names, source in _LITERT2]
    return modules


def install_as_tflite_runtime(names: tuple[str, ...] = RUNTIME_NAMES) -> list[str]:
    """Register `NAME` and `NAME.interpreter` in `sys.modules` for each name in `names` (default: tflite_runtime
    and ai_edge_litert), and for ai_edge_litert the LiteRT 2 modules (`compiled_model`, `tensor_buffer`, ...), so
    later imports of the official runtime get lite-numba. Modules already imported keep the references they took.
    Returns the module names registered."""
    done = []
    for name in names:
        if name not in RUNTIME_NAMES:
            raise ValueError(f"unknown runtime name {name!r}; expected one of {RUNTIME_NAMES}")
        for module in _package(name):
            sys.modules[module.__name__] = module
            done.append(module.__name__)
    return done
