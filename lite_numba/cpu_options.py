"""The official module's names (`ai_edge_litert.cpu_options`): CpuOptions and CpuKernelMode."""

from .api.litert_options import CpuOptions
from .cpu_kernel_mode import CpuKernelMode

__all__ = ["CpuOptions", "CpuKernelMode"]

CpuOptions.__module__ = __name__
