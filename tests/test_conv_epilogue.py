"""A float CONV_2D with its residual ADD (+ clamp) and / or channel PRELU fused into its epilogue
(lite_numba/runtime/fusion.py fuse_conv_epilogues, kernels/linear/conv_epilogue.py, simd_f32.make_tiles' `ep`).

Each pattern runs fused and unfused (experimental_preserve_all_tensors turns the rewrites off) on every ISA level:
the same bytes, also on inputs holding NaN, infinities, -0.0 and values large enough to overflow (a NaN's sign and
payload aside: which of two NaN operands a sum keeps is the compiler's choice, per compiled kernel), and both match
the official runtime. The scheduled kernels show that the fusion ran (the tiles' epilogue on the SIMD levels, the
separate pass on the portable one and for grouped convolutions). Patterns the rewrite must leave alone (a residual
computed after the convolution, a convolution output read twice, a broadcast, slopes per pixel) stay unfused and
correct; two threads give the one-thread bytes.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import kernel_names
from lite_numba.kernels.base import threads

from lite_numba.builder import ModelBuilder
from lite_numba.jit import team
from lite_numba.testing import assert_close, require_official, run_interpreter, run_official

require_official()

F32 = np.float32


def _model(x_shape, co, k=1, stride=1, padding="SAME", conv_act="NONE", add=True, add_first=False, add_act="NONE",
           act="", prelu="", groups=1, late_residual=False, conv_output_read=False, residual_shape=None, pad=None,
           fill=None):
    """x [, r] -> CONV_2D -> [ADD(conv, r) -> act node] -> [PRELU]; prelu: "" none, "const" float32 slopes
    [1, 1, co], "fp16" slopes DEQUANTIZEd from a float16 constant by a node placed after the convolution,
    "pixel" slopes that vary along the width (not fusable); pad = (before, after): r has that many channels fewer
    and is padded along them (PAD, or PADV2 with `fill`: BlazeFace's residual). Returns (model bytes, input
    shapes)."""
    rng = np.random.default_rng(co * 31 + k)
    mb = ModelBuilder()
    n, h, w, ci = x_shape
    x = mb.add_input("x", F32, list(x_shape))
    oh, ow = (-(-h // stride), -(-w // stride)) if padding == "SAME" else ((h - k) // stride + 1, (w - k) // stride + 1)
    out_shape = [n, oh, ow, co]
    shapes = [list(x_shape)]
    r = None
    if add and not late_residual:
        r_shape = residual_shape or (out_shape[:-1] + [co - sum(pad)] if pad else out_shape)
        r = mb.add_input("r", F32, r_shape)
        shapes.append(r_shape)
        if pad:
            pads = mb.add_const("pads", np.array([[0, 0]] * 3 + [list(pad)], np.int32))
            padded = mb.add_tensor("r_padded", F32, out_shape)
            fills = [mb.add_const("fill", np.array([fill], F32))] if fill is not None else []
            mb.add_op("PADV2" if fill is not None else "PAD", [r, pads, *fills], [padded])
            r = padded
    wts = mb.add_const("w", rng.standard_normal((co, k, k, ci // groups)).astype(F32))
    bias = mb.add_const("b", rng.standard_normal(co).astype(F32))
    y = mb.add_tensor("y", F32, out_shape)
    mb.add_op("CONV_2D", [x, wts, bias], [y], options={"padding": padding, "stride_h": stride, "stride_w": stride,
                                                        "fused_activation_function": conv_act})
    if conv_output_read:
        mb.mark_output(y)
    v = y
    if add:
        if late_residual:  # computed after the convolution from a graph input: not ready when it runs
            r0 = mb.add_input("r", F32, out_shape)
            shapes.append(out_shape)
            r = mb.add_tensor("r_neg", F32, out_shape)
            mb.add_op("NEG", [r0], [r])
        s = mb.add_tensor("s", F32, out_shape)
        mb.add_op("ADD", [r, y] if add_first else [y, r], [s], options={"fused_activation_function": add_act})
        v = s
        if act:
            a = mb.add_tensor("a", F32, out_shape)
            mb.add_op(act, [s], [a])
            v = a
    if prelu:
        slopes = (rng.standard_normal(co) * 0.3).astype(F32)
        if prelu == "fp16":
            half = mb.add_const("slopes16", slopes.astype(np.float16).reshape(1, 1, co))
            alpha = mb.add_tensor("slopes", F32, [1, 1, co])
            mb.add_op("DEQUANTIZE", [half], [alpha])
        elif prelu == "pixel":
            alpha = mb.add_const("slopes", (rng.standard_normal((1, ow, co)) * 0.3).astype(F32))
        else:
            alpha = mb.add_const("slopes", slopes.reshape(1, 1, co))
        p = mb.add_tensor("p", F32, out_shape)
        mb.add_op("PRELU", [v, alpha], [p])
        v = p
    mb.mark_output(v)
    return mb.build(), shapes


def _inputs(shapes, seed=0, special=False):
    rng = np.random.default_rng(seed)
    xs = [(rng.standard_normal(s) * 4).astype(F32) for s in shapes]
    if special:
        vals = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 3e38, -3e38, 7.0, -7.0, 1e-45], F32)
        for x in xs:
            flat = x.reshape(-1)
            idx = rng.choice(flat.size, size=min(flat.size, 3 * vals.size), replace=False)
            flat[idx] = np.resize(vals, idx.size)
    return xs


def _same_bits(a, b, what):
    """The same bytes but for NaNs' signs and payloads (NaN in the same places)."""
    nan = np.isnan(a)
    assert np.array_equal(nan, np.isnan(b)), f"{what}: NaN in other places"
    assert a[~nan].tobytes() == b[~nan].tobytes(), f"{what}: differ"


def _fused(it) -> bool:
    return any("epilogue" in n.options for n in it.runtime.graph(0).plan.nodes)


CASES = {  # name: _model keyword arguments
    "1x1_add_relu": dict(x_shape=(1, 9, 7, 13), co=37, act="RELU"),
    "1x1_add_first_relu6_node": dict(x_shape=(1, 6, 6, 16), co=16, add_first=True, act="RELU6"),
    "3x3_add_fused_relu": dict(x_shape=(2, 8, 9, 5), co=24, k=3, add_act="RELU"),
    "3x3_conv_relu_add_n1_to_1": dict(x_shape=(1, 7, 7, 8), co=9, k=3, conv_act="RELU",
                                      add_act="RELU_N1_TO_1", act="RELU_0_TO_1"),
    "stride2_add_prelu": dict(x_shape=(1, 13, 12, 6), co=48, k=3, stride=2, prelu="const"),
    "1x1_add_prelu_fp16_slopes": dict(x_shape=(1, 16, 16, 16), co=16, prelu="fp16"),
    "prelu_only": dict(x_shape=(1, 10, 10, 3), co=16, k=3, add=False, prelu="const"),
    "prelu_only_fp16_1row": dict(x_shape=(1, 1, 2, 40), co=70, add=False, prelu="fp16"),  # the matrix-vector tiles
    "grouped_add_prelu": dict(x_shape=(1, 6, 6, 8), co=8, k=3, groups=2, prelu="const"),  # the separate pass
    "1x1_padded_residual_relu": dict(x_shape=(1, 8, 9, 24), co=28, act="RELU", pad=(0, 4)),  # BlazeFace's
    "3x3_padded_both_sides_fill_prelu": dict(x_shape=(1, 7, 6, 5), co=37, k=3, pad=(3, 6), fill=-0.75, act="RELU6",
                                             prelu="const"),
    "grouped_padded_residual": dict(x_shape=(1, 6, 6, 8), co=8, k=3, groups=4, pad=(2, 1), act="RELU"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_matches_unfused_and_official(name, isa_level):
    data, shapes = _model(**CASES[name])
    xs = _inputs(shapes)
    (ours,), it = run_interpreter(data, xs)
    assert _fused(it), f"{name}: not fused"
    simd = isa_level != "portable" and CASES[name].get("groups", 1) == 1
    assert ("gemm_packed_ep" if simd else "epilogue_pass") in kernel_names(it)
    (plain,), it0 = run_interpreter(data, xs, experimental_preserve_all_tensors=True)
    assert not _fused(it0)
    assert ours.tobytes() == plain.tobytes(), f"{name} on {isa_level}: fused and unfused differ"
    (ref,) = run_official(data, xs)
    assert_close(ours, ref, family="accumulation", what=f"{name} on {isa_level}")
    xs = _inputs(shapes, seed=1, special=True)  # NaN, infinities, -0.0, overflow: the unfused bytes
    (ours,), _ = run_interpreter(data, xs)
    (plain,), _ = run_interpreter(data, xs, experimental_preserve_all_tensors=True)
    _same_bits(ours, plain, f"{name} on {isa_level}: special values")


@pytest.mark.parametrize("kw", [
    dict(late_residual=True, prelu=""),  # the residual is computed after the convolution
    dict(conv_output_read=True),  # the convolution's output is also a graph output
    dict(residual_shape=[1, 1, 1, 24]),  # a broadcast ADD
    dict(add=False, prelu="pixel"),  # slopes that vary per pixel
], ids=["late_residual", "output_read", "broadcast", "pixel_slopes"])
def test_left_unfused(kw):
    data, shapes = _model((1, 8, 8, 12), 24, **kw)
    xs = _inputs(shapes)
    outs, it = run_interpreter(data, xs)
    assert not _fused(it)
    for ours, ref in zip(outs, run_official(data, xs)):
        assert_close(ours, ref, family="accumulation")


@pytest.mark.parametrize("name", ["3x3_add_fused_relu", "stride2_add_prelu"])
def test_two_threads_give_the_one_thread_bytes(name, monkeypatch):
    monkeypatch.setattr(threads, "MIN_MACS", 0)
    data, shapes = _model(**CASES[name])
    xs = _inputs(shapes, seed=2, special=True)
    (one,), _ = run_interpreter(data, xs, num_threads=1)
    team.force_team_limit(0)
    try:
        (two,), it = run_interpreter(data, xs, num_threads=2)
    finally:
        team.force_team_limit(None)
    assert "gemm_packed_ep_par" in kernel_names(it) or not threads.team_pool.SUPPORTED
    _same_bits(one, two, name)
