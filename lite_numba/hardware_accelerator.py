"""The official module's names (`ai_edge_litert.hardware_accelerator`): HardwareAccelerator. lite-numba runs on the
CPU only (lite_numba.api.litert_options says what GPU and NPU mean here)."""

from .api.litert_options import HardwareAccelerator

__all__ = ["HardwareAccelerator"]

HardwareAccelerator.__module__ = __name__
