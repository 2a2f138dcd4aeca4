"""The runtime's errors: a node that fails to prepare, a kernel that fails at run time, and the texts that name
what went wrong (the option, scale or input responsible) instead of a bare arithmetic error."""

from __future__ import annotations

import math

import numpy as np

from ..format.plan import Node

__all__ = ["InvokeError", "PrepareError", "inputs_text", "overflow_cause", "zero_division_cause"]


class PrepareError(RuntimeError, ValueError):
    """A node failed to prepare (bad shapes, dtypes or parameters). A RuntimeError like the official runtime's."""


class InvokeError(RuntimeError, ValueError):
    """A kernel found bad run-time values (e.g. an index out of range). A RuntimeError like the official runtime's;
    also a ValueError, which is what the kernels raise."""



def overflow_cause(tensors: list, node: Node, err: Exception) -> str:
    """Name what made a prepare's arithmetic overflow ("cannot convert float infinity to integer"): a non-finite
    option, else the quantization scales of the node's tensors (finite, but whose ratios do not fit)."""
    bad = {k: v for k, v in node.options.items() if isinstance(v, float) and not math.isfinite(v)}
    if bad:
        opts = ", ".join(f"{k}={v}" for k, v in bad.items())
        return f"{node.op_name}: option {opts} is not finite"
    scales = [f"{tensors[i].name!r} {tensors[i].quantization.scales.tolist()[:4]}"
              for i in (*node.inputs, *node.outputs) if i >= 0 and tensors[i].quantization.scales.size]
    text = str(err)
    what = "NaN" if "NaN" in text else "infinite" if "infinity" in text else "too large for an integer"
    if scales:
        return f"{node.op_name}: its quantization scales give a multiplier out of range (their ratio is {what}); " \
               f"scales: {'; '.join(scales)}"
    return (f"{node.op_name}: an input value does not fit an integer (it is {what}); inputs: "
            f"{inputs_text(tensors, node)}")


def zero_division_cause(tensors: list, node: Node, err: Exception) -> str:
    """Name what a prepare divided by zero: the zero quantization scales among the node's tensors (inputs,
    outputs and intermediates), else the node's inputs."""
    ids = [i for i in (*node.inputs, *node.outputs, *getattr(node, "intermediates", ())) if i >= 0]
    zero = [repr(tensors[i].name) for i in ids
            if tensors[i].quantization.scales.size and not np.all(tensors[i].quantization.scales)]
    if zero:
        return f"{node.op_name}: a quantization scale of 0 ({', '.join(zero)})"
    return f"{node.op_name}: a division by zero ({err}); inputs: {inputs_text(tensors, node)}"


def inputs_text(tensors: list, node: Node) -> str:
    """The node's present inputs as "'name' dtype [shape]; ..." (for error messages)."""
    return "; ".join(f"{tensors[i].name!r} {tensors[i].dtype.name} {list(tensors[i].shape)}"
                     for i in node.inputs if i >= 0)
