"""PAD / PADV2 folded into the convolution reading it (lite_numba/runtime/fusion.py fold_pads).

Each pattern (float32, int8 and uint8; CONV_2D and DEPTHWISE_CONV_2D; stride 1 and 2; asymmetric pads; VALID and
SAME consumers) runs on every ISA level (the isa_level fixture) fused and unfused (experimental_preserve_all_tensors
turns the rewrites off): the two give the same bytes, and both match the official runtime (integers exactly, floats
within the convolution family's tolerance). Patterns the rewrite must leave alone (a channel pad, a non-zero
constant, a second reader of the padded tensor, a 1x1 filter) stay unfused and correct.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import isa_params
from linear_models import quant_case
from lite_numba.kernels.linear import conv

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.ops import OpKernel
from lite_numba.runtime.resolver import BuiltinOpResolver
from lite_numba.testing import assert_close, require_official, run_interpreter, run_official

require_official()


@pytest.fixture(params=isa_params())
def level(request, monkeypatch) -> str:
    """Every ISA level, amx included (its int8 tiles run the larger CONV_2D cases; conftest's isa_level skips amx
    outside its AMX_MODULES)."""
    monkeypatch.setenv("LITE_NUMBA_ISA", request.param)
    return request.param


def _model(kind, op, n, h, w, ci, k, s, pads, padding="VALID", dm=1, d=1, pad_op="PAD", const=None, act="RELU6",
           seed=0, channel_pad=0, second_reader=False):
    """x -> PAD(pads = (top, bottom, left, right)) -> op; returns (bytes, inputs)."""
    rng = np.random.default_rng(seed)
    t, b_, l_, r_ = pads
    hp, wp, cp = h + t + b_, w + l_ + r_, ci + channel_pad
    kh, kw = k
    eff_h, eff_w = (kh - 1) * d + 1, (kw - 1) * d + 1
    if padding == "SAME":
        oh, ow = -(-hp // s), -(-wp // s)
    else:
        oh, ow = (hp - eff_h) // s + 1, (wp - eff_w) // s + 1
    co = cp * dm if op == "DEPTHWISE_CONV_2D" else 2 * ci + 3
    w_shape = (1, kh, kw, co) if op == "DEPTHWISE_CONV_2D" else (co, kh, kw, cp)
    if kind == "float32":
        dtype = np.float32
        x = rng.standard_normal((n, h, w, ci)).astype(np.float32)
        wv = rng.standard_normal(w_shape).astype(np.float32)
        bias = rng.standard_normal(co).astype(np.float32)
        xq = wq = bq = oq = None
    else:
        dtype = np.int8 if kind == "int8" else np.uint8
        c = quant_case(rng, dtype, (n, h, w, ci), w_shape, co, 3 if op == "DEPTHWISE_CONV_2D" else 0,
                       per_channel=kind == "int8")
        x, wv, bias, xq, wq, bq, oq = c["x"], c["w"], c["bias"], c["x_quant"], c["w_quant"], c["b_quant"], \
            c["out_quant"]
    mb = ModelBuilder()
    xi = mb.add_input("x", dtype, [n, h, w, ci], quant=xq)
    pv = mb.add_const("paddings", np.array([[0, 0], [t, b_], [l_, r_], [0, channel_pad]], np.int32))
    xp = mb.add_tensor("xp", dtype, [n, hp, wp, cp], quant=xq)
    ins = [xi, pv]
    if pad_op == "PADV2":
        zero = 0.0 if kind == "float32" else xq[1]
        ins.append(mb.add_const("value", np.array([zero if const is None else const], dtype), quant=xq))
    mb.add_op(pad_op, ins, [xp], version=1 if pad_op == "PADV2" or kind != "int8" else 2)
    y = mb.add_tensor("y", dtype, [n, oh, ow, co], quant=oq)
    options = {"padding": padding, "stride_h": s, "stride_w": s, "dilation_h_factor": d, "dilation_w_factor": d,
               "fused_activation_function": act}
    if op == "DEPTHWISE_CONV_2D":
        options["depth_multiplier"] = dm
    version = (1 if kind == "uint8" else 3) if op == "DEPTHWISE_CONV_2D" else (1 if kind == "uint8" else 3)
    if kind == "float32":
        version = 2 if d > 1 else 1
    mb.add_op(op, [xp, mb.add_const("w", wv, quant=wq), mb.add_const("b", bias, quant=bq)], [y], options=options,
              version=version)
    mb.mark_output(y)
    if second_reader:
        z = mb.add_tensor("z", dtype, [n, hp, wp, cp], quant=xq)
        mb.add_op("RELU" if kind == "float32" else "MAXIMUM", [xp] if kind == "float32" else [xp, xp], [z])
        mb.mark_output(z)
    return mb.build(), [x]


def _folded(data, **kwargs) -> list[str]:
    it = Interpreter(model_content=data, **kwargs)
    it.allocate_tensors()
    return [n.op_name for n in it.runtime.graph(0).plan.nodes if "fused_into" in n.options]


# (kind, op, n, h, w, ci, k, s, pads, extra options)
CASES = [
    ("float32", "DEPTHWISE_CONV_2D", 1, 12, 12, 16, (3, 3), 2, (0, 1, 0, 1), {}),  # Keras' correct_pad, even size
    ("float32", "DEPTHWISE_CONV_2D", 1, 11, 9, 19, (3, 3), 2, (1, 1, 1, 1), {}),  # odd size
    ("float32", "DEPTHWISE_CONV_2D", 2, 9, 10, 13, (5, 3), 1, (2, 0, 1, 2), {"dm": 2}),
    ("float32", "DEPTHWISE_CONV_2D", 1, 10, 8, 16, (3, 3), 2, (1, 0, 2, 0), {"d": 2}),  # unread rows after a top pad
    ("float32", "CONV_2D", 1, 11, 10, 5, (3, 3), 2, (1, 0, 0, 1), {}),
    ("float32", "CONV_2D", 2, 8, 9, 8, (3, 3), 1, (1, 2, 2, 1), {"padding": "SAME", "act": "NONE"}),
    ("float32", "CONV_2D", 1, 9, 9, 3, (3, 5), 2, (0, 1, 2, 2), {"pad_op": "PADV2"}),
    ("int8", "DEPTHWISE_CONV_2D", 1, 12, 12, 16, (3, 3), 2, (0, 1, 0, 1), {}),
    ("int8", "DEPTHWISE_CONV_2D", 1, 11, 13, 24, (3, 3), 2, (1, 1, 1, 1), {"pad_op": "PADV2"}),
    ("int8", "DEPTHWISE_CONV_2D", 2, 9, 7, 8, (3, 5), 1, (2, 1, 0, 2), {"dm": 2, "padding": "SAME"}),
    ("int8", "CONV_2D", 1, 11, 10, 7, (3, 3), 2, (1, 0, 0, 1), {}),
    ("int8", "CONV_2D", 1, 12, 12, 16, (3, 3), 2, (0, 1, 0, 1), {"act": "NONE"}),
    ("int8", "CONV_2D", 2, 8, 9, 5, (3, 3), 1, (1, 2, 2, 1), {"padding": "SAME", "d": 2}),
    ("int8", "CONV_2D", 1, 20, 19, 16, (3, 3), 1, (1, 1, 2, 0), {}),  # large enough for the amx tiles
    ("int8", "CONV_2D", 1, 24, 23, 32, (3, 3), 2, (0, 1, 1, 1), {}),
    ("uint8", "DEPTHWISE_CONV_2D", 1, 11, 9, 16, (3, 3), 2, (1, 1, 0, 1), {}),
    ("uint8", "CONV_2D", 1, 10, 10, 6, (3, 3), 2, (0, 1, 1, 1), {"pad_op": "PADV2"}),
]


def _ids(c):
    return f"{c[0]}-{'dw' if c[1].startswith('DEPTH') else 'conv'}-s{c[7]}-{''.join(map(str, c[8]))}-{c[3]}"


def _both_ways(data, inputs, **kwargs):
    fused = run_interpreter(data, inputs, **kwargs)[0]
    unfused = run_interpreter(data, inputs, experimental_preserve_all_tensors=True, **kwargs)[0]
    return fused[0], unfused[0]


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_fused_equals_unfused_and_official(level, case):
    kind, op, n, h, w, ci, k, s, pads, extra = case
    data, inputs = _model(kind, op, n, h, w, ci, k, s, pads, seed=len(CASES) + h * w + ci, **extra)
    assert _folded(data) == ["PAD" if extra.get("pad_op", "PAD") == "PAD" else "PADV2"]
    assert _folded(data, experimental_preserve_all_tensors=True) == []
    fused, unfused = _both_ways(data, inputs)
    assert fused.dtype == unfused.dtype and fused.shape == unfused.shape
    assert fused.tobytes() == unfused.tobytes(), f"{level}: fused PAD differs from PAD, then the convolution"
    ref = run_official(data, inputs)[0]
    assert_close(fused, ref, family="accumulation", what=level)


@pytest.mark.parametrize("kind", ["float32", "int8"])
@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D"])
def test_two_threads(kind, op):
    """The parallel drivers (bands of output rows, each with its own top padding) over a folded PAD."""
    data, inputs = _model(kind, op, 1, 47, 45, 32, (3, 3), 2, (1, 1, 0, 1), seed=3)
    assert _folded(data, num_threads=2) == ["PAD"]
    fused, unfused = _both_ways(data, inputs, num_threads=2)
    assert fused.tobytes() == unfused.tobytes()
    one = run_interpreter(data, inputs, num_threads=1)[0][0]
    assert fused.tobytes() == one.tobytes()
    assert_close(fused, run_official(data, inputs)[0], family="accumulation")


@pytest.mark.parametrize("kind,extra", [
    ("float32", {"channel_pad": 2}),  # not spatial
    ("float32", {"pad_op": "PADV2", "const": 1.5}),  # not what the kernels pad with
    ("float32", {"pad_op": "PADV2", "const": -0.0}),
    ("int8", {"pad_op": "PADV2", "const": 7}),  # not the zero point (the cases' zero points lie in -20..20)
    ("int8", {"second_reader": True}),
    ("float32", {"k": (1, 1)}),
], ids=["channel", "const", "minus_zero", "int8_const", "second_reader", "pointwise"])
def test_not_folded(kind, extra):
    extra = dict(extra)
    k = extra.pop("k", (3, 3))
    op = "CONV_2D" if extra.get("channel_pad") else "DEPTHWISE_CONV_2D"
    data, inputs = _model(kind, op, 1, 9, 8, 8, k, 2, (1, 1, 0, 1), seed=4, **extra)
    if kind == "int8" and "const" in extra:
        assume_zp = quant_zero_point(data)
        assert assume_zp != extra["const"]
    assert _folded(data) == []
    ours = run_interpreter(data, inputs)[0]
    for o, r in zip(ours, run_official(data, inputs)):
        assert_close(o, r, family="accumulation")


def quant_zero_point(data) -> int:
    it = Interpreter(model_content=data)
    return int(it.get_input_details()[0]["quantization"][1])


def test_users_own_kernel_is_not_folded_into():
    """A resolver whose DEPTHWISE_CONV_2D is a user's kernel (here the same prepare in another OpKernel, which could
    know nothing of explicit_padding): the PAD stays and runs."""
    r = BuiltinOpResolver()
    r.add_builtin("DEPTHWISE_CONV_2D", OpKernel("DEPTHWISE_CONV_2D", conv.DEPTHWISE_CONV_2D.prepare), 1, 7)
    data, inputs = _model("float32", "DEPTHWISE_CONV_2D", 1, 9, 8, 8, (3, 3), 2, (1, 1, 0, 1), seed=5)
    assert _folded(data, op_resolver=r) == []
    assert _folded(data) == ["PAD"]
    ours = run_interpreter(data, inputs, op_resolver=r)[0][0]
    assert ours.tobytes() == run_interpreter(data, inputs)[0][0].tobytes()
