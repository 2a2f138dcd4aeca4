"""The option types of the LiteRT 2 API (ai_edge_litert.hardware_accelerator, cpu_kernel_mode, cpu_options,
gpu_options, qualcomm_options, intel_openvino_options, options, environment): the same classes, fields, defaults and
checks, and what lite-numba makes of them (`model_settings`).

lite-numba runs every model on the CPU with its compiled kernels. What the options mean here:

- `HardwareAccelerator.CPU` (the default): runs. `GPU | CPU` or `NPU | CPU`: runs on the CPU, and
  `CompiledModel.is_fully_accelerated()` is False (the accelerator asked for took nothing). `GPU` or `NPU` without
  `CPU`: RuntimeError at creation naming what lite-numba runs on (the official runtime also fails there when the
  accelerator is missing or cannot take every op).
- `CpuOptions.num_threads`: the threads of the kernels that split their work (0 or less: 1, lite-numba's default).
- `CpuOptions.kernel_mode`: `REFERENCE` prepares the model with the portable kernels (plain loops, the path
  LITE_NUMBA_ISA=portable takes: a debugging aid); `XNNPACK` / `DELEGATE` / `BUILTIN` / None take the fastest path
  this CPU has.
- Everything else (YNNPACK, XNNPACK flags and weight cache, the GPU and vendor option groups, the environment's
  plugin and dispatch paths) configures accelerators lite-numba does not have: accepted and unused.
"""

from __future__ import annotations

import dataclasses
import enum
import os
from collections.abc import Sequence
from typing import Any, Optional, Union

__all__ = ["HardwareAccelerator", "CpuKernelMode", "CpuOptions", "GpuOptions", "Options", "Environment",
           "EnvironmentOptions", "QualcommOptions", "QualcommLogLevel", "QualcommHtpPerformanceMode",
           "QualcommDspPerformanceMode", "QualcommProfiling", "QualcommOptimizationLevel", "QualcommGraphPriority",
           "QualcommBackend", "QualcommGraphIOTensorMemType", "IntelOpenVinoOptions", "IntelOpenVinoGraphBackend",
           "IntelOpenVinoPerformanceMode", "model_settings"]

RUNS_ON = ("lite-numba runs models on the CPU only, with its own compiled kernels (Numba); it has no GPU or NPU "
           "accelerator")


class HardwareAccelerator(enum.IntFlag):
    """Where a compiled model may run (bit flags, combined with |). lite-numba runs on the CPU only: GPU or NPU
    without CPU fail at creation; with CPU the model runs on the CPU (see the module docstring)."""

    CPU = enum.auto()
    GPU = enum.auto()
    NPU = enum.auto()


class CpuKernelMode(enum.IntEnum):
    """Which CPU kernels run: DELEGATE (alias XNNPACK) and BUILTIN take lite-numba's fastest path, REFERENCE its
    portable kernels."""

    DELEGATE = 0
    XNNPACK = 0  # the official legacy alias of DELEGATE
    REFERENCE = 1
    BUILTIN = 2


@dataclasses.dataclass
class CpuOptions:
    """CPU options of a compiled model. num_threads: threads for the kernels that split their work (0: the runtime
    decides, here 1); kernel_mode: see CpuKernelMode; the XNNPACK / YNNPACK fields are accepted and unused."""

    num_threads: int = 0
    kernel_mode: Optional[CpuKernelMode] = None
    enable_ynnpack: bool = False
    xnnpack_flags: Optional[int] = None
    xnnpack_weight_cache_path: str = ""


@dataclasses.dataclass
class GpuOptions:
    """GPU options (accepted; lite-numba has no GPU accelerator)."""

    enforce_f32: bool = False
    constant_tensor_sharing: bool = False
    infinite_float_capping: bool = False
    benchmark_mode: bool = False
    allow_src_quantized_fc_conv_ops: bool = False
    hint_waiting_for_completion: bool = False


def _numbered(name: str, members: str) -> type[enum.IntEnum]:
    """An IntEnum of the space-separated `members` numbered 0, 1, ... (the official option enums, value for value)."""
    return enum.IntEnum(name, [(m, i) for i, m in enumerate(members.split())], module=__name__, qualname=name)


QualcommLogLevel = _numbered("QualcommLogLevel", "OFF ERROR WARN INFO VERBOSE DEBUG")
# the DSP has every HTP performance mode but the last one (EXTREME_POWER_SAVER)
_PERFORMANCE_MODES = ("DEFAULT SUSTAINED_HIGH_PERFORMANCE BURST HIGH_PERFORMANCE POWER_SAVER LOW_POWER_SAVER "
                      "HIGH_POWER_SAVER LOW_BALANCED BALANCED")
QualcommHtpPerformanceMode = _numbered("QualcommHtpPerformanceMode", _PERFORMANCE_MODES + " EXTREME_POWER_SAVER")
QualcommDspPerformanceMode = _numbered("QualcommDspPerformanceMode", _PERFORMANCE_MODES)
QualcommProfiling = _numbered("QualcommProfiling", "OFF BASIC DETAILED LINTING OPTRACE")
QualcommOptimizationLevel = _numbered("QualcommOptimizationLevel",
                                      "OPTIMIZE_FOR_INFERENCE OPTIMIZE_FOR_PREPARE OPTIMIZE_FOR_INFERENCE_O3")
QualcommGraphPriority = _numbered("QualcommGraphPriority", "DEFAULT LOW NORMAL NORMAL_HIGH HIGH")
QualcommBackend = _numbered("QualcommBackend", "UNDEFINED GPU HTP DSP IR")
QualcommGraphIOTensorMemType = _numbered("QualcommGraphIOTensorMemType", "RAW MEM_HANDLE")
IntelOpenVinoGraphBackend = _numbered("IntelOpenVinoGraphBackend", "CPU GPU NPU")
IntelOpenVinoPerformanceMode = _numbered("IntelOpenVinoPerformanceMode", "LATENCY THROUGHPUT CUMULATIVE_THROUGHPUT")


@dataclasses.dataclass
class QualcommOptions:
    """Qualcomm NPU options (accepted; lite-numba has no NPU accelerator)."""

    LOG_LEVEL = QualcommLogLevel
    HTP_PERFORMANCE_MODE = QualcommHtpPerformanceMode
    DSP_PERFORMANCE_MODE = QualcommDspPerformanceMode
    PROFILING = QualcommProfiling
    OPTIMIZATION_LEVEL = QualcommOptimizationLevel
    GRAPH_PRIORITY = QualcommGraphPriority
    BACKEND = QualcommBackend
    GRAPH_IO_TENSOR_MEM_TYPE = QualcommGraphIOTensorMemType

    log_level: Optional[QualcommLogLevel] = None
    htp_performance_mode: Optional[QualcommHtpPerformanceMode] = None
    dsp_performance_mode: Optional[QualcommDspPerformanceMode] = None
    use_int64_bias_as_int32: Optional[bool] = None
    enable_weight_sharing: Optional[bool] = None
    use_conv_hmx: Optional[bool] = None
    use_fold_relu: Optional[bool] = None
    profiling: Optional[QualcommProfiling] = None
    dump_tensor_ids: Optional[Sequence[int]] = None
    ir_json_dir: str = ""
    dlc_dir: str = ""
    vtcm_size: Optional[int] = None
    num_hvx_threads: Optional[int] = None
    optimization_level: Optional[QualcommOptimizationLevel] = None
    graph_priority: Optional[QualcommGraphPriority] = None
    backend: Optional[QualcommBackend] = None
    saver_output_dir: str = ""
    graph_io_tensor_mem_type: Optional[QualcommGraphIOTensorMemType] = None


@dataclasses.dataclass
class IntelOpenVinoOptions:
    """Intel OpenVINO options (accepted; lite-numba has no NPU accelerator)."""

    GRAPH_BACKEND = IntelOpenVinoGraphBackend
    PERFORMANCE_MODE = IntelOpenVinoPerformanceMode

    graph_backend: Optional[IntelOpenVinoGraphBackend] = None
    performance_mode: Optional[IntelOpenVinoPerformanceMode] = None
    configs_map: dict[str, str] = dataclasses.field(default_factory=dict)
    enable_weight_sharing: Optional[bool] = None


def _option_group(attr: str, cls) -> property:
    """The property of an option group kept in `attr`: made (cls()) on first access, as officially."""

    def group(self):
        value = getattr(self, attr)
        if value is None:
            value = cls()
            setattr(self, attr, value)
        return value

    return property(group)


@dataclasses.dataclass
class Options:
    """Per-model options: the accelerators and the option groups (made on first access, as officially)."""

    hardware_accelerators: HardwareAccelerator = HardwareAccelerator.CPU
    _cpu_options: Optional[CpuOptions] = None
    _gpu_options: Optional[GpuOptions] = None
    _qualcomm_options: Optional[QualcommOptions] = None
    _intel_openvino_options: Optional[IntelOpenVinoOptions] = None

    def __init__(self, hardware_accelerators: HardwareAccelerator = HardwareAccelerator.CPU,
                 cpu_options: Optional[CpuOptions] = None, gpu_options: Optional[GpuOptions] = None,
                 qualcomm_options: Optional[QualcommOptions] = None,
                 intel_openvino_options: Optional[IntelOpenVinoOptions] = None):
        self.hardware_accelerators = hardware_accelerators
        self._cpu_options = cpu_options
        self._gpu_options = gpu_options
        self._qualcomm_options = qualcomm_options
        self._intel_openvino_options = intel_openvino_options

    @classmethod
    def create(cls) -> Options:
        """New default options (the official factory)."""
        return cls()

    cpu_options = _option_group("_cpu_options", CpuOptions)
    gpu_options = _option_group("_gpu_options", GpuOptions)
    qualcomm_options = _option_group("_qualcomm_options", QualcommOptions)
    intel_openvino_options = _option_group("_intel_openvino_options", IntelOpenVinoOptions)


def resolve_options(options: Optional[Options], hardware_accel) -> Options:
    """The official rule: `options` or the `hardware_accel` shortcut (default CPU, one thread), not both."""
    if options is not None:
        if hardware_accel is not None:
            raise ValueError("Pass either options or hardware_accel, not both.")
        return options
    return Options(hardware_accelerators=HardwareAccelerator.CPU if hardware_accel is None else hardware_accel,
                   cpu_options=CpuOptions(num_threads=1))


@dataclasses.dataclass(frozen=True)
class Settings:
    """What lite-numba makes of a model's options."""

    num_threads: int
    reference: bool  # REFERENCE kernel mode: the portable kernels
    delegate: bool  # the default / XNNPACK kernel mode (what "fully accelerated" is measured against)
    accelerators: int  # the HardwareAccelerator bits asked for


def model_settings(options: Options) -> Settings:
    """Check the options as the official runtime does at creation (RuntimeError) and map them (module docstring)."""
    try:
        accel = int(options.hardware_accelerators)
    except (TypeError, ValueError):
        raise TypeError(f"hardware_accelerators must be a HardwareAccelerator, got "
                        f"{type(options.hardware_accelerators).__name__}") from None
    if accel == 0:
        raise RuntimeError(f"No acceleration provided. hardware_accel is 0; {RUNS_ON}: use HardwareAccelerator.CPU.")
    if accel & ~int(HardwareAccelerator.CPU | HardwareAccelerator.GPU | HardwareAccelerator.NPU):
        raise RuntimeError(f"Unknown hardware accelerator bits in {accel}: expected HardwareAccelerator.CPU, GPU, "
                           f"NPU or a combination")
    if not accel & HardwareAccelerator.CPU:
        wanted = " | ".join(a.name for a in (HardwareAccelerator.GPU, HardwareAccelerator.NPU) if accel & a)
        raise RuntimeError(f"{RUNS_ON}, so HardwareAccelerator.{wanted} alone cannot run this model. Some ops are not "
                           f"accelerated. Add kLiteRtHwAcceleratorCpu to the compilation accelerator set to allow "
                           f"using the CPU to run those. (hardware_accel=HardwareAccelerator.{wanted} | "
                           f"HardwareAccelerator.CPU runs the model on the CPU.)")
    cpu = options._cpu_options or CpuOptions()
    threads = cpu.num_threads
    if not isinstance(threads, int) or isinstance(threads, bool):
        raise TypeError(f"CpuOptions.num_threads must be an int, got {type(threads).__name__}")
    mode = cpu.kernel_mode
    if mode is not None:
        try:
            mode = CpuKernelMode(int(mode))
        except (TypeError, ValueError):
            raise RuntimeError(f"Unknown CPU kernel mode {mode!r}: expected a CpuKernelMode (XNNPACK/DELEGATE, "
                               f"REFERENCE, BUILTIN)") from None
    return Settings(num_threads=max(threads, 1), reference=mode == CpuKernelMode.REFERENCE,
                    delegate=mode in (None, CpuKernelMode.DELEGATE), accelerators=accel)


# --- environment ---------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class EnvironmentOptions:
    """Environment-level options (paths of the official runtime's native libraries: accepted and unused)."""

    runtime_path: Optional[str] = None
    compiler_plugin_path: str = ""
    dispatch_library_path: str = ""


class EnvironmentHandle:
    """What an Environment holds (the official one holds a native LiteRT environment; lite-numba needs none)."""

    __slots__ = ("runtime_path",)

    def __init__(self, runtime_path: str):
        self.runtime_path = runtime_path

    def __repr__(self) -> str:
        return f"<lite-numba environment {self.runtime_path!r}>"


class ClosedOnExit:
    """`with obj:` gives obj and calls obj.close() at the end (Environment, CompiledModel)."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.close()


class Environment(ClosedOnExit):
    """A shared environment for compiled models (the official API; lite-numba keeps nothing in it)."""

    def __init__(self, capsule, options: EnvironmentOptions):
        self._capsule = capsule
        self._options = options

    def close(self) -> None:
        self._capsule = None

    @classmethod
    def create(cls, *, options: Optional[Union[EnvironmentOptions, str]] = None, runtime_path: Optional[str] = None,
               compiler_plugin_path: str = "", dispatch_library_path: str = "") -> Environment:
        """An environment, with the official argument rules: `options` (or a runtime path as a string) or the path
        shortcuts, not both. The runtime path defaults to lite-numba's package folder; no vendor libraries are
        looked for (lite-numba loads none)."""
        provided = runtime_path
        if isinstance(options, str):
            if provided is not None:
                raise ValueError("runtime_path was provided twice.")
            provided, options = options, None
        if options is not None and (provided is not None or compiler_plugin_path or dispatch_library_path):
            raise ValueError("Pass either options or environment path shortcuts.")
        if options is None:
            options = EnvironmentOptions(runtime_path=provided, compiler_plugin_path=compiler_plugin_path,
                                         dispatch_library_path=dispatch_library_path)
        final = provided or options.runtime_path or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        return cls(EnvironmentHandle(final), dataclasses.replace(options, runtime_path=final))

    @property
    def options(self) -> EnvironmentOptions:
        return self._options

    @property
    def capsule(self) -> Any:
        if self._capsule is None:
            raise ValueError("Environment is no longer valid")
        return self._capsule
