"""TensorBuffer: the LiteRT 2 API's tensor memory (ai_edge_litert.tensor_buffer), over host memory.

A TensorBuffer is a flat, C-contiguous array (`HostMemory`, what the official API calls its capsule):

- `TensorBuffer.create_from_host_memory(array)` holds the caller's array itself when it is C-contiguous, aligned for
  its dtype and writable: nothing is copied, a change to the array is what the next run reads, and outputs are
  written into it. A read-only or misaligned array is copied once (an aligned copy; the official runtime also
  copies an array whose address is not a multiple of 64, and refuses non-contiguous ones, as here).
- `CompiledModel.create_input_buffers` / `create_output_buffers` make buffers of their own (64-byte aligned, zeroed).

`CompiledModel.run_by_index` / `run_by_name` hand these arrays to the compiled graph (lite_numba.runtime.io_binding):
inputs are read in place and outputs written in place where the plan allows. `write(array)` copies bytes in,
`read(n, dtype)` copies n elements out, `get_tensor_details()` gives {'dtype', 'shape'}, `destroy()` lets go.

Differences on purpose: every numeric dtype is accepted (the official wheel takes float32, float16, int32, int8,
uint8, bool and ml_dtypes' bfloat16 / float8 only: "Unsupported dtype: int64"), and a C-contiguous array is used in
place at any address its dtype allows, not only at multiples of 64.
"""

from __future__ import annotations

import numpy as np

__all__ = ["TensorBuffer", "HostMemory", "dtype_name", "aligned_zeros"]

ALIGNMENT = 64

# the element type names the official details report ('unknown' for the rest: uint64, complex, string, ...)
_NAMES = {"float32", "float16", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "bool",
          "bfloat16", "float8_e4m3fn", "float8_e5m2"}
_EXTENSION_NAMES = {"bfloat16", "float8_e4m3fn", "float8_e5m2"}  # ml_dtypes' types, when a program uses them


def dtype_name(dtype) -> str:
    """The official name of an element type: 'float32', 'int8', ... or 'unknown'."""
    name = np.dtype(dtype).name
    return name if name in _NAMES else "unknown"


def _normalize_dtype(dtype) -> np.dtype:
    """A numeric numpy dtype (or an ml_dtypes one), else the official ValueError."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"Unsupported dtype: {dtype}") from None
    if dt.kind in "biufc" or dt.name in _EXTENSION_NAMES:
        return dt
    raise ValueError(f"Unsupported dtype: {dtype}")


def aligned_zeros(size: int, dtype) -> np.ndarray:
    """A zeroed 1-D array of `size` elements whose data starts at a multiple of 64 bytes."""
    dt = np.dtype(dtype)
    raw = np.zeros(size * dt.itemsize + ALIGNMENT, np.uint8)
    start = (-raw.ctypes.data) % ALIGNMENT
    return raw[start:start + size * dt.itemsize].view(dt)


class HostMemory:
    """A TensorBuffer's memory: `array` (1-D, C-contiguous, of `dtype`; None once destroyed), the `shape` its details
    report, and `flat` when it came from create_from_host_memory (the official runtime reports such a buffer as 1-D
    of its element count; lite-numba accepts it for any tensor of that many elements)."""

    __slots__ = ("array", "raw", "dtype", "shape", "size", "nbytes", "flat", "__weakref__")

    def __init__(self, array: np.ndarray, shape: tuple[int, ...], flat: bool):
        self.array = array
        self.raw = array.view(np.uint8)
        self.dtype = array.dtype
        self.shape = tuple(shape)
        self.size = array.size
        self.nbytes = array.nbytes
        self.flat = flat

    def live(self, what: str) -> np.ndarray:
        """The array, or the official RuntimeError once the buffer was destroyed."""
        if self.array is None:
            raise RuntimeError(f"{what}: invalid capsule")
        return self.array


class TensorBuffer:
    """A tensor's memory for CompiledModel runs (the official class; see the module docstring)."""

    def __init__(self, capsule, environment=None):
        self._capsule = capsule
        self._environment = environment

    @classmethod
    def create_from_host_memory(cls, data_array: np.ndarray) -> TensorBuffer:
        """A buffer over the caller's array (no copy when it is C-contiguous, aligned and writable; an aligned copy
        when it is read-only or misaligned). Non-contiguous arrays and non-numeric dtypes raise ValueError, as
        officially."""
        if not isinstance(data_array, np.ndarray):
            raise ValueError("data_array must be a NumPy array")
        dtype = _normalize_dtype(data_array.dtype)
        if not data_array.flags.c_contiguous:
            raise ValueError("data_array must be C-contiguous for zero-copy host-memory binding")
        flat = data_array.reshape(-1)  # (a view: the array is C-contiguous; a 0-d array is one element)
        if not (flat.flags.aligned and flat.flags.writeable):
            copy = aligned_zeros(flat.size, dtype)
            copy[...] = flat
            flat = copy
        return cls(HostMemory(flat, (flat.size,), True))

    def write(self, data_array: np.ndarray) -> None:
        """Copy the array's bytes to the start of the buffer (any shape; a non-contiguous array is made contiguous
        first); more bytes than the buffer holds raise RuntimeError, as officially."""
        if not isinstance(data_array, np.ndarray):
            raise ValueError("data_array must be a NumPy array")
        _normalize_dtype(data_array.dtype)
        cap = self._capsule
        if cap is None or cap.array is None:
            raise RuntimeError("WriteTensorBuffer: invalid capsule")
        src = np.ascontiguousarray(data_array).reshape(-1)
        if src.nbytes > cap.nbytes:
            raise RuntimeError("WriteTensorBuffer: source buffer is larger than the tensor buffer")
        if src.dtype == cap.dtype and src.size == cap.size:
            cap.array[...] = src
        else:
            cap.raw[:src.nbytes] = src.view(np.uint8)

    def read(self, num_elements: int, output_dtype) -> np.ndarray:
        """A new array of the first `num_elements` elements, the buffer's bytes read as `output_dtype`."""
        dtype = _normalize_dtype(output_dtype)
        cap = self._capsule
        if cap is not None and cap.array is not None and dtype == cap.dtype and type(num_elements) is int \
                and 0 <= num_elements <= cap.size:
            return cap.array[:num_elements].copy()
        result = np.empty(num_elements, dtype=dtype)
        if cap is None or cap.array is None:
            raise RuntimeError("ReadTensorToBuffer: invalid capsule")
        if result.nbytes > cap.nbytes:
            raise RuntimeError("ReadTensorToBuffer: destination buffer is larger than the tensor buffer")
        result.view(np.uint8)[...] = cap.raw[:result.nbytes]
        return result

    def get_tensor_details(self) -> dict:
        """{'dtype': the element type's name, 'shape': [dims]}."""
        cap = self._capsule
        if cap is None or cap.array is None:
            raise RuntimeError("GetTensorDetails: invalid capsule")
        return {"dtype": dtype_name(cap.dtype), "shape": list(cap.shape)}

    def destroy(self) -> None:
        """Let go of the memory; the buffer cannot be used afterwards (a model run with it keeps the memory alive
        while it needs it)."""
        if self._capsule is not None:
            self._capsule.array = None
            self._capsule.raw = None
        self._capsule = None
        self._environment = None

    @property
    def capsule(self) -> HostMemory:
        """The buffer's memory (what CompiledModel runs take); ValueError once destroyed, as officially."""
        if self._capsule is None:
            raise ValueError("TensorBuffer has been destroyed")
        return self._capsule

    def __repr__(self) -> str:
        cap = self._capsule
        if cap is None or cap.array is None:
            return "<TensorBuffer (destroyed)>"
        return f"<TensorBuffer {dtype_name(cap.dtype)}{list(cap.shape)}>"
