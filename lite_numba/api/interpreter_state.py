"""Copies of an Interpreter: `clone()` for another thread, `copy`/`deepcopy`, and pickling for another process.

What is shared and what is not: the loaded model (`ModelPlan`, whose constant tensors are views of the model bytes),
the op resolution and the compiled code (Numba's dispatchers and the generated runners are per process and keyed by
structure) are shared by every clone in a process. When subgraph 0 is one or more compiled segments and nothing
else (no host or dynamic node, no resource variable: `_shareable`), a clone also shares its preparation — the
segments' tables with the packed weights — and gets only an arena of its own (`GraphRuntime.share`): no prepare, no
packing. Otherwise it is prepared again for the same input shapes, like a fresh interpreter without the model
loading and op resolution. Either way invoking a clone never touches another interpreter's memory.

The state that copies and pickles carry: the input shapes (resizes), whether subgraph 0 was allocated, the values
of its inputs, outputs and variable tensors (of every tensor with experimental_preserve_all_tensors) and of its
dynamic tensors, and the interpreter's resources (resource variables with their "assigned" flags, which CALL_ONCE
ran). Not carried: the state of other subgraphs' runtimes (prepared again on use) and the generator state of the
random ops (they start again from their seeds).
"""

from __future__ import annotations

import copy
import importlib

import numpy as np

from ..format.model import load_model
from ..runtime.resolver import default_op_resolver

__all__ = ["capture_state", "clone_interpreter", "copy_interpreter", "pickle_interpreter", "restore_state"]

_VARIABLE_KEYS = ("variables", "variable_flags")  # rid -> array, pinned once compiled code uses its address


def clone_interpreter(interp):
    """A new interpreter of interp's class sharing its model, resolution and compiled code (see module doc)."""
    new = object.__new__(type(interp))
    new._setup(interp._data, interp.model, interp._resolver, interp._kernels, interp._options)
    if hasattr(interp, "_custom_op_registerers"):
        new._custom_op_registerers = list(interp._custom_op_registerers)
    new.max_while_iterations = interp.max_while_iterations
    rt, nrt = interp._main, new._main
    if _shareable(interp):
        new._main = new._runtimes[0] = rt.share(new)
        return new
    for i in rt.plan.inputs:
        nrt.tensors[i].shape = rt.tensors[i].shape
    if rt.ready:
        nrt.allocate()
    return new


def _shareable(interp) -> bool:
    """Whether subgraph 0's preparation can be shared: allocated, every step a compiled segment (no host or dynamic
    node, whose prepared state is per interpreter, no speculation) and no resources (resource variables hold
    addresses of per-interpreter storage in the segments' tables)."""
    rt = interp._main
    return (rt.ready and not interp.resources and not rt.dynamic_nodes and not rt.assumed and not rt.speculation_allowed
            and all(kind == "segment" and step.run is not None for kind, step in rt.steps))


def copy_interpreter(interp):
    """clone() plus a copy of the state: an independent interpreter that continues where interp is."""
    new = clone_interpreter(interp)
    restore_state(new, capture_state(interp))
    return new


def capture_state(interp) -> dict:
    """Copies of everything restore_state needs (plain arrays, dicts and tuples: picklable)."""
    rt = interp._main
    state = {"input_shapes": [rt.tensors[i].shape for i in rt.plan.inputs], "allocated": rt.ready,
             "max_while_iterations": interp.max_while_iterations, "tensors": {}, "dynamic": {}}
    n = len(rt.tensors)
    if rt.ready:
        # inputs, outputs and variable tensors (intermediates are recomputed by the next invoke; every tensor when
        # they are all kept)
        keep = set(rt.plan.inputs) | set(rt.plan.outputs) | {t.index for t in rt.tensors if t.spec.is_variable}
        state["tensors"] = {i: np.array(v, copy=True) for i, v in rt.views.items()
                            if i < n and (i in keep or rt.preserve_all)}
        state["dynamic"] = {i: np.array(v, copy=True) for i, v in rt.dynamic_arrays.items() if i < n}
    resources = {}
    for key, value in interp.resources.items():
        if key in _VARIABLE_KEYS:
            resources[key] = {rid: np.array(a, copy=True) for rid, a in value.items()}
        else:
            resources[key] = copy.deepcopy(value)
    state["resources"] = resources
    return state


def restore_state(interp, state: dict) -> None:
    """Put a captured state into a fresh interpreter of the same model (allocating it when the state was)."""
    rt = interp._main
    interp.max_while_iterations = state["max_while_iterations"]
    for i, shape in zip(rt.plan.inputs, state["input_shapes"]):
        if rt.tensors[i].shape != tuple(shape):
            rt.tensors[i].shape = tuple(shape)
            rt.ready = False
    if state["allocated"] and not rt.ready:
        rt.allocate()
    for i, value in state["tensors"].items():
        dst = rt.views.get(i)
        if dst is not None and dst.shape == value.shape and dst.dtype == value.dtype:
            dst[...] = value
    for i, value in state["dynamic"].items():
        if i not in rt.views:
            rt.dynamic_arrays[i] = np.array(value, copy=True)
    for key, value in state["resources"].items():
        if key not in _VARIABLE_KEYS:
            interp.resources[key] = copy.deepcopy(value)
            continue
        dst = interp.resources.setdefault(key, {})
        for rid, a in value.items():
            cur = dst.get(rid)
            if cur is not None and cur.shape == a.shape and cur.dtype == a.dtype:
                np.copyto(cur, a)  # in place: compiled READ/ASSIGN_VARIABLE hold its address
            else:
                dst[rid] = np.array(a, copy=True)


def _custom_modules(interp) -> list[str]:
    """Modules defining the custom kernels the model uses: importing them where the interpreter is unpickled
    registers those ops (@custom_op) before the default resolver is built."""
    modules = set()
    for kernels, sg in zip(interp._kernels, interp.model.subgraphs):
        for k, node in zip(kernels, sg.nodes):
            if k is None or not node.is_custom:
                continue
            for m in (k.__dict__.get("__module__"), getattr(k.prepare, "__module__", None)):
                if m and m != "__main__":
                    modules.add(m)
    return sorted(modules)


def pickle_interpreter(interp) -> tuple:
    """`__reduce__` of an Interpreter: (unpickle_interpreter, (class, payload))."""
    payload = {"model": bytes(interp._data), "options": dict(interp._options),
               "custom_modules": _custom_modules(interp), "state": capture_state(interp)}
    return unpickle_interpreter, (type(interp), payload)


def unpickle_interpreter(cls, payload: dict):
    """Rebuild a pickled interpreter: import the custom ops' modules, load the model, restore the state."""
    for module in payload["custom_modules"]:
        importlib.import_module(module)
    options = payload["options"]
    resolver = options["op_resolver"] if options["op_resolver"] is not None else default_op_resolver()
    data = payload["model"]
    interp = object.__new__(cls)
    interp._setup(data, load_model(data), resolver, None, options)
    restore_state(interp, payload["state"])
    return interp
