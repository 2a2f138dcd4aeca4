"""Float activations: RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1, LOGISTIC, TANH, HARD_SWISH, ELU, GELU, LEAKY_RELU
(unary.py's table) and PRELU (binary, alpha broadcast). Quantized inputs go to the quantized kernels."""

from __future__ import annotations

import math

import numpy as np
from lite_numba.kernels.base.vecmath import gelu_f32, sigmoid_f32, tanh_f32
from lite_numba.kernels.elementwise.arithmetic import (
    BINARY_PLAIN,
    binary_inputs,
    is_quantized,
    make_binary,
    no_limits,
    scalar,
    schedule_binary,
)
from lite_numba.kernels.elementwise.unary import unary_op
from numba import njit

from lite_numba.ops import PrepareContext, kernel


@scalar
def _relu(v, p):
    return max(v, 0)


@scalar
def _relu6(v, p):
    return min(max(v, 0), 6)


@scalar
def _relu_n1_to_1(v, p):
    return min(max(v, -1), 1)


@scalar
def _relu_0_to_1(v, p):
    return min(max(v, 0), 1)


@scalar
def _logistic(v, p):
    return sigmoid_f32(v)


@scalar
def _tanh(v, p):
    return tanh_f32(v)


@scalar
def _hard_swish(v, p):
    # scaled before the product, as the official kernel does: x * 6 / 6 would overflow for |x| > 5.7e37
    return v * (min(max(v + np.float32(3.0), np.float32(0.0)), np.float32(6.0)) * np.float32(1.0 / 6.0))


@scalar
def _elu(v, p):
    return np.float32(math.expm1(v)) if v < 0 else v


@scalar
def _leaky_relu(v, p):
    # alpha may be > 1 or < 0: a select, not a max
    return v if v > 0 else v * p[0]


_SQRT_2_PI = np.float32(math.sqrt(2.0 / math.pi))


@scalar
def _gelu(v, p):
    # 0.5 x erfc(-x / sqrt(2)): TFLite's form, stable for large negative x (gelu_f32 vectorizes, math.erfc does not)
    return gelu_f32(v)


@scalar
def _gelu_tanh(v, p):
    return np.float32(0.5) * v * (np.float32(1.0) + tanh_f32(_SQRT_2_PI * (v + np.float32(0.044715) * (v * v * v))))


# the clamping activations' scalar definitions, for the kernels that fuse them after another node (fused.py)
CLAMPS = {"RELU": _relu, "RELU6": _relu6, "RELU_N1_TO_1": _relu_n1_to_1, "RELU_0_TO_1": _relu_0_to_1}

RELU = unary_op("RELU", _relu)
RELU6 = unary_op("RELU6", _relu6)
RELU_N1_TO_1 = unary_op("RELU_N1_TO_1", _relu_n1_to_1)
RELU_0_TO_1 = unary_op("RELU_0_TO_1", _relu_0_to_1)
LOGISTIC = unary_op("LOGISTIC", _logistic)
TANH = unary_op("TANH", _tanh)
HARD_SWISH = unary_op("HARD_SWISH", _hard_swish)
ELU = unary_op("ELU", _elu)
LEAKY_RELU = unary_op("LEAKY_RELU", _leaky_relu, params=lambda ctx: [float(ctx.options.get("alpha", 0.0))])
_GELU_EXACT = unary_op("GELU", _gelu)
_GELU_TANH = unary_op("GELU", _gelu_tanh)


@kernel("GELU")
def GELU(ctx: PrepareContext) -> None:
    """GELU: exact (erfc) or, with approximate=True, the tanh form."""
    impl = _GELU_TANH if ctx.options.get("approximate", False) else _GELU_EXACT
    return impl.prepare(ctx)


@scalar
def _prelu(v, alpha):
    return v if v >= 0 else v * alpha


BINARY_PLAIN["PRELU"] = make_binary(_prelu, clamp=False)


@kernel("PRELU")
def PRELU(ctx: PrepareContext) -> None:
    """PRELU: x if x >= 0 else alpha * x, alpha broadcast against x (the output keeps x's shape)."""
    x, alpha, shape = binary_inputs(ctx, same_type=False)
    if is_quantized(x):
        return ctx.prepare_quantized()
    ctx.check_dtype(x, np.float32)
    ctx.check_dtype(alpha, np.float32)
    ctx.check(shape == x.shape, f"alpha of shape {list(alpha.shape)} broadcasts input {list(x.shape)} to "
                                f"{list(shape)}; the output must keep the input's shape")
    out = ctx.set_output(0, shape, np.float32)
    schedule_binary(ctx, BINARY_PLAIN["PRELU"], x, alpha, shape, out, no_limits(np.float32))


# --- odml.swiglu (STABLEHLO_COMPOSITE, litert-torch's export_hf): silu(x[..., :g]) * x[..., g:] -----------------


@njit(cache=True, nogil=True, error_model="numpy")
def swiglu_f32(x, out, rows, g):
    """out[r, i] = (a * sigmoid(a)) * x[r, g + i] with a = x[r, i]: the decomposition's LOGISTIC, MUL, MUL."""
    for r in range(rows):
        for i in range(g):
            a = x[r * 2 * g + i]
            out[r * g + i] = (a * sigmoid_f32(a)) * x[r * 2 * g + g + i]


def _swiglu_accepts(attributes: dict, specs: list) -> bool:
    return (set(attributes) <= {"gate_size"} and isinstance(attributes.get("gate_size"), int)
            and len(specs) == 1 and specs[0] is not None and specs[0].dtype == np.float32)


@kernel("odml.swiglu")
def SWIGLU(ctx: PrepareContext) -> None:
    """The odml.swiglu composite {gate_size}: x [..., 2 * gate_size] -> [..., gate_size], bit for bit its
    decomposition (two SLICEs, LOGISTIC, MUL, MUL)."""
    ctx.check_num(inputs=1, outputs=1)
    x = ctx.input(0)
    ctx.check_dtype(x, np.float32)
    g = int(ctx.options["attributes"]["gate_size"])
    ctx.check(x.ndim >= 1 and g > 0 and x.shape[-1] == 2 * g,
              f"input of shape {list(x.shape)}: the last dimension must be 2 * gate_size = {2 * g}")
    out = ctx.set_output(0, x.shape[:-1] + (g,), np.float32)
    if out.size:
        ctx.call(swiglu_f32, ctx.view(x, (x.size,)), ctx.view(out, (out.size,)), out.size // g, g)


SWIGLU.meta["accepts"] = _swiglu_accepts

__all__ = ["CLAMPS", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LOGISTIC", "TANH", "HARD_SWISH", "ELU",
           "LEAKY_RELU", "GELU", "PRELU", "SWIGLU"]
