"""Op resolvers: (op, version) -> OpKernel, as in TFLite's MutableOpResolver."""

from __future__ import annotations

import importlib
import threading
from typing import Callable

from ..format.schema import BUILTIN_CODES, BUILTIN_NAMES
from ..kernels.registry import BUILTINS, CUSTOMS
from ..kernels.registry import kernel_path as kernel_path  # re-exported: the tools' name for the ISA path in force
from ..ops import DEFAULT_REGISTRY, CustomOp, CustomOpRegistry, OpKernel


def _op_name(op: str | int) -> str:
    if isinstance(op, str):
        if op.upper() not in BUILTIN_CODES:
            raise ValueError(f"unknown builtin operator {op!r}")
        return op.upper()
    if int(op) not in BUILTIN_NAMES:
        raise ValueError(f"unknown builtin operator code {op}")
    return BUILTIN_NAMES[int(op)]


class OpResolver:
    """Finds the kernel for a builtin or custom op at a given version."""

    def find_builtin(self, op_name: str, version: int) -> OpKernel | None:
        raise NotImplementedError

    def find_custom(self, name: str, version: int) -> OpKernel | None:
        raise NotImplementedError


class MutableOpResolver(OpResolver):
    """A resolver filled explicitly; later registrations of the same op and version win."""

    def __init__(self):
        self._builtins: dict[str, list[tuple[int, int, OpKernel]]] = {}
        self._customs: dict[str, list[tuple[int, int, OpKernel]]] = {}
        self._custom_prefixes: list[tuple[str, OpKernel]] = []

    def add_builtin(self, op: str | int, kernel: OpKernel, min_version: int = 1, max_version: int = 1) -> None:
        """Register `kernel` for builtin `op` (name or BuiltinOperator code), versions min..max inclusive."""
        if not isinstance(kernel, OpKernel):
            raise TypeError(f"add_builtin expects an OpKernel, got {type(kernel).__name__}")
        self._builtins.setdefault(_op_name(op), []).append((min_version, max_version, kernel))

    def add_custom(self, name: str, kernel: OpKernel | Callable, min_version: int = 1, max_version: int = 1) -> None:
        """Register a custom op; `kernel` is an OpKernel, a @custom_op function or a plain Python function."""
        if not isinstance(kernel, OpKernel):
            kernel = CustomOp(name, kernel)
        self._customs.setdefault(name, []).append((min_version, max_version, kernel))

    def add_custom_prefix(self, prefix: str, kernel: OpKernel) -> None:
        """Register `kernel` for every custom op named `prefix...` (any version) that has no registration of its
        own (the longest matching prefix wins); the kernel reads the op's name from its node."""
        if not isinstance(kernel, OpKernel):
            raise TypeError(f"add_custom_prefix expects an OpKernel, got {type(kernel).__name__}")
        self._custom_prefixes.append((prefix, kernel))

    def add_all(self, other: "MutableOpResolver") -> None:
        """Add every registration of `other` (its entries win over ours)."""
        for name, entries in other._builtins.items():
            self._builtins.setdefault(name, []).extend(entries)
        for name, entries in other._customs.items():
            self._customs.setdefault(name, []).extend(entries)
        self._custom_prefixes.extend(other._custom_prefixes)

    @staticmethod
    def _find(table, name: str, version: int) -> OpKernel | None:
        for lo, hi, k in reversed(table.get(name, ())):
            if lo <= version <= hi:
                return k
        return None

    def find_builtin(self, op_name: str, version: int) -> OpKernel | None:
        return self._find(self._builtins, op_name, version)

    def find_custom(self, name: str, version: int) -> OpKernel | None:
        k = self._find(self._customs, name, version)
        if k is None:  # the longest matching prefix wins (later registrations on ties)
            best = -1
            for prefix, pk in self._custom_prefixes:
                if name.startswith(prefix) and len(prefix) >= best:
                    best, k = len(prefix), pk
        return k

    def builtin_versions(self, op_name: str) -> list[tuple[int, int]]:
        return [(lo, hi) for lo, hi, _ in self._builtins.get(op_name, ())]

    def custom_versions(self, name: str) -> list[tuple[int, int]]:
        return [(lo, hi) for lo, hi, _ in self._customs.get(name, ())]


class BuiltinOpResolver(MutableOpResolver):
    """Every builtin kernel of lite-numba and the custom ops the official builtin resolver also registers
    (TFLite_Detection_PostProcess, Mfcc, AudioSpectrogram): the tables in lite_numba.kernels.registry."""

    def __init__(self):
        super().__init__()
        for op, lo, hi, k in BUILTINS:
            self.add_builtin(op, k, lo, hi)
        for name, lo, hi, k in CUSTOMS:
            self.add_custom(name, k, lo, hi)


# the entry-point group of third-party packs: each entry point names a function register(ops) or a module defining one
# (a legacy module without it registers its @custom_op ops when imported)
ENTRY_POINT_GROUP = "lite_numba.ops"

_LOAD_LOCK = threading.RLock()
_PLUGINS_LOADED = False


def load_packs(registry: CustomOpRegistry) -> None:
    """Register the shipped packs (lite_numba.plugins: examples, mediapipe, flex) and every third-party pack (the
    entry-point group "lite_numba.ops") into `registry`."""
    # by name: the plugins import Numba and the Flex kernels, which `import lite_numba` does not
    registry.add_pack(importlib.import_module("lite_numba.plugins"))
    from importlib.metadata import entry_points  # lazy: importlib.metadata would add ~10 ms to `import lite_numba`

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        registry.add_pack(ep)


def load_plugins() -> None:
    """Register the shipped and third-party packs into the default op set (DEFAULT_REGISTRY), once per process."""
    global _PLUGINS_LOADED
    with _LOAD_LOCK:  # another thread waits for the packs; this one (a pack building a resolver) returns at once
        if _PLUGINS_LOADED:
            return
        _PLUGINS_LOADED = True  # first: a pack that fails to load raises once, not at every Interpreter
        load_packs(DEFAULT_REGISTRY)


def default_op_resolver() -> MutableOpResolver:
    """The default op set: builtins (kernels/registry.py), the shipped plugins, third-party packs and every
    @custom_op-decorated op (DEFAULT_REGISTRY)."""
    load_plugins()
    r = BuiltinOpResolver()
    DEFAULT_REGISTRY.add_to(r)
    return r


def resolve_model(resolver: OpResolver, model) -> list[list[OpKernel | None]]:
    """The kernel of every node of every subgraph of a loaded model (ModelPlan): `[subgraph][node]`. A builtin op
    version the resolver lacks fails here with the official ValueError; an unresolved custom op is None, reported
    when its node is prepared (allocate_tensors), as officially."""
    return [[_resolve_node(resolver, node, sg.tensors) for node in sg.nodes] for sg in model.subgraphs]


def _resolve_node(resolver: OpResolver, node, tensors) -> OpKernel | None:
    if node.is_custom:
        k = resolver.find_custom(node.op_name, node.version)
    else:
        k = resolver.find_builtin(node.op_name, node.version)
        if k is None:
            raise ValueError(
                f"Didn't find op for builtin opcode '{node.op_name}' version '{node.version}'. An older version of "
                f"this builtin might be supported. Are you using an old TFLite binary with a newer model?\n"
                f"Registration failed.\n")
    strings = getattr(k, "strings", None)  # a node with a STRING operand runs the op's STRING variant (host)
    if strings is not None and any(0 <= i < len(tensors) and tensors[i].type_name == "STRING"
                                   for i in (*node.inputs, *node.outputs)):
        return strings
    return k
