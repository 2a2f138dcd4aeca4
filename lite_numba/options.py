"""The official module's names (`ai_edge_litert.options`): Options and every option group it re-exports (CPU, GPU,
Qualcomm, Intel OpenVINO, with their enums). What lite-numba makes of them: lite_numba.api.litert_options."""

from .api.litert_options import (
    GpuOptions,
    IntelOpenVinoGraphBackend,
    IntelOpenVinoOptions,
    IntelOpenVinoPerformanceMode,
    Options,
    QualcommBackend,
    QualcommDspPerformanceMode,
    QualcommGraphIOTensorMemType,
    QualcommGraphPriority,
    QualcommHtpPerformanceMode,
    QualcommLogLevel,
    QualcommOptimizationLevel,
    QualcommOptions,
    QualcommProfiling,
)
from .cpu_options import CpuKernelMode, CpuOptions
from .hardware_accelerator import HardwareAccelerator

__all__ = ["Options", "HardwareAccelerator", "CpuOptions", "CpuKernelMode", "GpuOptions", "QualcommOptions",
           "QualcommLogLevel", "QualcommHtpPerformanceMode", "QualcommDspPerformanceMode", "QualcommProfiling",
           "QualcommOptimizationLevel", "QualcommGraphPriority", "QualcommBackend", "QualcommGraphIOTensorMemType",
           "IntelOpenVinoOptions", "IntelOpenVinoGraphBackend", "IntelOpenVinoPerformanceMode"]

Options.__module__ = __name__
