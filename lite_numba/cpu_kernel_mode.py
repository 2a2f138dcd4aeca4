"""The official module's names (`ai_edge_litert.cpu_kernel_mode`): CpuKernelMode (REFERENCE: lite-numba's portable
kernels; DELEGATE / XNNPACK / BUILTIN: its fastest path)."""

from .api.litert_options import CpuKernelMode

__all__ = ["CpuKernelMode"]

CpuKernelMode.__module__ = __name__
