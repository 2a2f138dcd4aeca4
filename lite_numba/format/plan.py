"""Typed, immutable graph plan: what the loader produces and what kernels see at prepare time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Quantization:
    """Affine quantization of a tensor: real = scale * (q - zero_point), per tensor or per channel."""

    scales: np.ndarray  # float32, shape (n,)
    zero_points: np.ndarray  # int64, shape (n,)
    quantized_dimension: int = 0
    # BlockwiseQuantization (the schema's QuantizationDetails 2; then no affine scales): row r of the 2-D tensor in
    # blocks of block_size values along dimension 1, block j scaled by block_scales[r, j] (the FLOAT16 constant
    # tensor scales_tensor, as stored: [rows, columns / block_size]); zero_points_tensor -1 or a tensor of zeros
    block_size: int = 0
    block_scales: np.ndarray | None = None
    scales_tensor: int = -1
    zero_points_tensor: int = -1

    @property
    def blockwise(self) -> bool:
        return self.block_size > 0

    @property
    def per_channel(self) -> bool:
        return self.scales.size > 1

    @property
    def scale(self) -> float:
        """The per-tensor scale (first scale of a per-channel tensor)."""
        return float(self.scales[0]) if self.scales.size else 0.0

    @property
    def zero_point(self) -> int:
        return int(self.zero_points[0]) if self.zero_points.size else 0


NO_QUANTIZATION = Quantization(np.zeros(0, np.float32), np.zeros(0, np.int64), 0)


@dataclass(frozen=True)
class TensorSpec:
    """A tensor as the model declares it."""

    index: int
    name: str
    dtype: np.dtype
    type_name: str  # the schema's TensorType name, e.g. "FLOAT32", "RESOURCE"
    shape: tuple[int, ...]
    shape_signature: tuple[int, ...]
    quantization: Quantization = NO_QUANTIZATION
    data: np.ndarray | None = None  # constant contents (read-only view of the model buffer)
    is_variable: bool = False
    sparsity: Any = None  # raw sparsity parameters (dict) for DENSIFY
    # INT4 / INT2 values kept packed (blockwise-quantized constants): `data` is then the file's bytes (uint8, 1-D),
    # packed_bits bits per value, the first value in the lowest bits; shape is the logical shape
    packed_bits: int = 0

    @property
    def is_const(self) -> bool:
        return self.data is not None


@dataclass(frozen=True)
class Node:
    """One operator: op key, tensor indices (-1 = optional input absent) and parsed options."""

    index: int
    op_name: str  # builtin operator name ("ADD") or the custom code ("Atan")
    builtin_code: int  # BuiltinOperator value; 32 (CUSTOM) for custom ops
    version: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    intermediates: tuple[int, ...] = ()
    options: dict = field(default_factory=dict)
    custom_options: bytes | None = None
    # where a node inlined from a STABLEHLO_COMPOSITE's decomposition came from (lite_numba.runtime.composites):
    # "odml.rms_norm@15" (the composite's name and node index in its caller), nested ones joined by "/"; "" for
    # the model's own nodes
    origin: str = ""

    @property
    def is_custom(self) -> bool:
        return self.builtin_code == 32


@dataclass(frozen=True)
class SubgraphPlan:
    name: str
    tensors: tuple[TensorSpec, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    nodes: tuple[Node, ...]


@dataclass(frozen=True)
class Signature:
    key: str
    subgraph_index: int
    inputs: dict[str, int]  # name -> tensor index in that subgraph, ordered by name (as the official runtime)
    outputs: dict[str, int]


@dataclass(frozen=True)
class ModelPlan:
    """A validated model: every subgraph's plan plus signatures."""

    version: int
    description: str
    subgraphs: tuple[SubgraphPlan, ...]
    signatures: tuple[Signature, ...]
    operator_codes: tuple[tuple[str, int, int], ...]  # (op name, builtin code, version)
