"""The official module's names (`ai_edge_litert.compiled_model`): switch a LiteRT 2 program to lite-numba by
changing only its import line. The implementation lives in lite_numba.api.compiled_model."""

from .api.compiled_model import CompiledModel
from .cpu_kernel_mode import CpuKernelMode
from .environment import Environment, EnvironmentOptions
from .hardware_accelerator import HardwareAccelerator
from .options import CpuOptions, GpuOptions, IntelOpenVinoOptions, Options, QualcommOptions
from .tensor_buffer import TensorBuffer

__all__ = ["CompiledModel", "CpuOptions", "CpuKernelMode", "GpuOptions", "QualcommOptions", "IntelOpenVinoOptions",
           "Options", "HardwareAccelerator", "Environment", "EnvironmentOptions", "TensorBuffer"]

CompiledModel.__module__ = __name__
