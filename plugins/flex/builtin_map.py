"""Flex ops whose TensorFlow semantics equal a builtin TFLite op's: the node is prepared by the builtin kernel, with
the NodeDef's attributes translated to the builtin's options (and attribute-like inputs, such as ConcatV2's axis,
turned into options). AudioSpectrogram and Mfcc go to the TFLite custom kernels of the same ops.

Every row was checked against TensorFlow (tests/test_flex.py, recordings of scripts/record_flex_oracle.py). Where
TensorFlow accepts more than the builtin (dtypes, ranks), the builtin's check names what it lacks.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
from lite_numba.kernels.registry import BUILTINS, CUSTOMS

from .nodedef import FlexNode

_TENSOR_TYPE = {np.dtype(np.int32): 2, np.dtype(np.int64): 4}  # schema TensorType of SHAPE/ARG_MAX out types


def _builtin_kernel(op: str):
    rows = [k for name, _, _, k in BUILTINS if name == op]
    if not rows:
        raise LookupError(f"no builtin kernel {op}")
    return rows[-1]


def run_builtin(ctx, op: str, options: dict | None = None, inputs: tuple[int, ...] | None = None) -> None:
    """Prepare this node with builtin `op`'s kernel, seeing `options` and (optionally) only the tensor indices
    `inputs`. The calls and temporaries it schedules are this node's (the copy shares their lists)."""
    node = dataclasses.replace(ctx.node, options=dict(options or {}),
                               inputs=ctx.node.inputs if inputs is None else tuple(inputs))
    sub = copy.copy(ctx)
    sub.node = node
    _builtin_kernel(op).prepare(sub)


def run_registered_custom(ctx, name: str, options: dict) -> None:
    """Prepare this node with the kernel of custom op `name` of kernels/registry.py's CUSTOMS (the custom ops the
    official runtime also registers), its state being `options` (what their init keeps from a flexbuffer map)."""
    (k,) = [k for n, _, _, k in CUSTOMS if n == name]
    sub = copy.copy(ctx)
    sub.state = options
    k.prepare(sub)


def _audio_spectrogram(ctx, node: FlexNode) -> None:
    run_registered_custom(ctx, "AudioSpectrogram", {"window_size": node.attr("window_size", None, "i"),
                                                    "stride": node.attr("stride", None, "i"),
                                                    "magnitude_squared": node.attr("magnitude_squared", False, "b")})


def _mfcc(ctx, node: FlexNode) -> None:
    # TF's frequency limits are floats; the TFLite kernel (the same algorithm, ported from TF) takes integers
    lower, upper = node.attr("lower_frequency_limit", 20.0, "f"), node.attr("upper_frequency_limit", 4000.0, "f")
    ctx.check(lower == int(lower) and upper == int(upper), f"Mfcc: fractional frequency limits {lower}, {upper} are "
                                                           f"not supported")
    run_registered_custom(ctx, "Mfcc", {"upper_frequency_limit": int(upper), "lower_frequency_limit": int(lower),
                                        "filterbank_channel_count": node.attr("filterbank_channel_count", 40, "i"),
                                        "dct_coefficient_count": node.attr("dct_coefficient_count", 13, "i")})


def _const_input(ctx, i: int, what: str) -> np.ndarray:
    """An attribute-like input (an axis): its values, constant or read at run time (then the node is dynamic)."""
    ctx.check(ctx.input(i) is not None, f"the {what} input is missing")
    return np.asarray(ctx.value(i))


def same(op: str, attrs_to_options=None):
    """A TF op that is builtin `op` with the same inputs; attrs_to_options(node) gives the builtin options."""
    def prepare(ctx, node: FlexNode) -> None:
        run_builtin(ctx, op, attrs_to_options(node) if attrs_to_options else {})

    prepare.builtin = op
    return prepare


def _concat(ctx, node: FlexNode) -> None:
    axis = int(_const_input(ctx, ctx.num_inputs - 1, "axis").reshape(-1)[0])
    run_builtin(ctx, "CONCATENATION", {"axis": axis}, ctx.node.inputs[:-1])


def _gather(ctx, node: FlexNode) -> None:
    axis = int(_const_input(ctx, 2, "axis").reshape(-1)[0]) if ctx.num_inputs > 2 else 0
    run_builtin(ctx, "GATHER", {"axis": axis, "batch_dims": node.attr("batch_dims", 0, "i")}, ctx.node.inputs[:2])


def _split(ctx, node: FlexNode) -> None:
    # TF Split(axis, value) has TFLite SPLIT's input order
    run_builtin(ctx, "SPLIT", {"num_splits": node.attr("num_split", ctx.num_outputs, "i")})


def _split_v(ctx, node: FlexNode) -> None:
    run_builtin(ctx, "SPLIT_V", {"num_splits": node.attr("num_split", ctx.num_outputs, "i")})


def _mat_mul(ctx, node: FlexNode) -> None:
    ctx.check(all(ctx.input(i) is not None and ctx.input(i).ndim == 2 for i in (0, 1)), "MatMul needs 2-D inputs")
    run_builtin(ctx, "BATCH_MATMUL", {"adj_x": node.attr("transpose_a", False, "b"),
                                      "adj_y": node.attr("transpose_b", False, "b")})


def _strided_slice_options(node: FlexNode) -> dict:
    return {k: node.attr(k, 0, "i") for k in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                                                "shrink_axis_mask")}


def _out_type(key: str):
    def options(node: FlexNode) -> dict:
        dt = node.attr(key, np.dtype(np.int32) if key == "out_type" else np.dtype(np.int64), "type")
        return {key: _TENSOR_TYPE.get(dt, -1)}

    return options


def _keep_dims(node: FlexNode) -> dict:
    return {"keep_dims": node.attr("keep_dims", False, "b")}


def _mirror_pad(node: FlexNode) -> dict:
    mode = node.attr("mode", b"REFLECT", "s")
    return {"mode": 0 if mode == b"REFLECT" else 1}


OPS = {
    # elementwise arithmetic: numpy broadcasting in both
    "AddV2": same("ADD"), "Add": same("ADD"), "Sub": same("SUB"), "Mul": same("MUL"), "RealDiv": same("DIV"),
    "Maximum": same("MAXIMUM"), "Minimum": same("MINIMUM"), "SquaredDifference": same("SQUARED_DIFFERENCE"),
    "Pow": same("POW"), "FloorDiv": same("FLOOR_DIV"), "FloorMod": same("FLOOR_MOD"),
    "AddN": same("ADD_N"),
    # comparisons and logic
    "Less": same("LESS"), "LessEqual": same("LESS_EQUAL"), "Greater": same("GREATER"),
    "GreaterEqual": same("GREATER_EQUAL"), "Equal": same("EQUAL"), "NotEqual": same("NOT_EQUAL"),
    "LogicalAnd": same("LOGICAL_AND"), "LogicalOr": same("LOGICAL_OR"), "LogicalNot": same("LOGICAL_NOT"),
    "SelectV2": same("SELECT_V2"),
    # unary maths
    "Exp": same("EXP"), "Log": same("LOG"), "Sqrt": same("SQRT"), "Rsqrt": same("RSQRT"), "Tanh": same("TANH"),
    "Sigmoid": same("LOGISTIC"), "Relu": same("RELU"), "Relu6": same("RELU6"), "Neg": same("NEG"),
    "Abs": same("ABS"), "Sin": same("SIN"), "Cos": same("COS"), "Square": same("SQUARE"), "Floor": same("FLOOR"),
    "Ceil": same("CEIL"), "Round": same("ROUND"), "Sign": same("SIGN"), "Elu": same("ELU"),
    "LeakyRelu": same("LEAKY_RELU", lambda n: {"alpha": float(n.attr("alpha", 0.2))}),
    "Softmax": same("SOFTMAX", lambda n: {"beta": 1.0}), "LogSoftmax": same("LOG_SOFTMAX"),
    # shapes and movement
    "Reshape": same("RESHAPE"), "Transpose": same("TRANSPOSE"), "ExpandDims": same("EXPAND_DIMS"),
    "Squeeze": same("SQUEEZE", lambda n: {"squeeze_dims": list(n.attr("squeeze_dims", []) or [])}),
    "Pack": same("PACK", lambda n: {"values_count": int(n.attr("N", 0)), "axis": int(n.attr("axis", 0))}),
    "Unpack": same("UNPACK", lambda n: {"num": int(n.attr("num", 0)), "axis": int(n.attr("axis", 0))}),
    "ConcatV2": _concat, "GatherV2": _gather, "Split": _split, "SplitV": _split_v,
    "Tile": same("TILE"), "Fill": same("FILL"), "Range": same("RANGE"), "ZerosLike": same("ZEROS_LIKE"),
    "Shape": same("SHAPE", _out_type("out_type")), "Slice": same("SLICE"),
    "StridedSlice": same("STRIDED_SLICE", _strided_slice_options), "BroadcastTo": same("BROADCAST_TO"),
    "Pad": same("PAD"), "PadV2": same("PADV2"), "MirrorPad": same("MIRROR_PAD", _mirror_pad),
    "ReverseV2": same("REVERSE_V2"), "GatherNd": same("GATHER_ND"), "Cast": same("CAST"),
    # reductions and matrix products
    "Sum": same("SUM", _keep_dims), "Mean": same("MEAN", _keep_dims), "Max": same("REDUCE_MAX", _keep_dims),
    "Min": same("REDUCE_MIN", _keep_dims), "Prod": same("REDUCE_PROD", _keep_dims),
    "All": same("REDUCE_ALL", _keep_dims), "Any": same("REDUCE_ANY", _keep_dims),
    "ArgMax": same("ARG_MAX", _out_type("output_type")), "ArgMin": same("ARG_MIN", _out_type("output_type")),
    "Cumsum": same("CUMSUM", lambda n: {"exclusive": bool(n.attr("exclusive", False)),
                                         "reverse": bool(n.attr("reverse", False))}),
    "MatMul": _mat_mul,
    # audio: the custom ops AudioSpectrogram / Mfcc of the official resolver, options from the NodeDef
    "AudioSpectrogram": _audio_spectrogram, "Mfcc": _mfcc,
    "BatchMatMulV2": same("BATCH_MATMUL", lambda n: {"adj_x": bool(n.attr("adj_x", False)),
                                                     "adj_y": bool(n.attr("adj_y", False))}),
    "BatchMatMulV3": same("BATCH_MATMUL", lambda n: {"adj_x": bool(n.attr("adj_x", False)),
                                                     "adj_y": bool(n.attr("adj_y", False))}),
}
