"""Source models of the fuzzing campaign (scripts/fuzz_campaign.py): the small models in tests/data plus models built
here with ModelBuilder for what tests/data lacks — int16, hybrid, control flow, resource variables, custom ops,
ops whose run-time inputs are indices, shapes or sizes (the data fuzzer's targets) and the STRING ops with run-time
strings, indices and keys.

Every builder model is valid: both runtimes run it unmutated (checked by tests/test_fuzz_campaign.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from lite_numba.builder import ModelBuilder

REPO = Path(__file__).resolve().parent.parent
MAX_SOURCE_BYTES = 200_000  # larger files make every mutant slow to compile; the campaign skips them

Recipe = Callable[[], bytes]
RECIPES: dict[str, Recipe] = {}


def recipe(fn: Recipe) -> Recipe:
    RECIPES[fn.__name__] = fn
    return fn


def _unary(op: str, dtype, shape, quant=None, out_quant=None, options=None, out_dtype=None) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape, quant=quant)
    y = b.add_tensor("y", out_dtype or dtype, shape, quant=out_quant if out_quant is not None else quant)
    b.add_op(op, [x], [y], options=options)
    b.mark_output(y)
    return b.build()


@recipe
def gather_runtime_indices() -> bytes:
    b = ModelBuilder()
    p = b.add_input("params", np.float32, [5, 3])
    i = b.add_input("indices", np.int32, [4])
    y = b.add_tensor("y", np.float32, [4, 3])
    b.add_op("GATHER", [p, i], [y], options={"axis": 0})
    b.mark_output(y)
    return b.build()


@recipe
def gather_nd_runtime_indices() -> bytes:
    b = ModelBuilder()
    p = b.add_input("params", np.float32, [4, 3, 2])
    i = b.add_input("indices", np.int32, [5, 2])
    y = b.add_tensor("y", np.float32, [5, 2])
    b.add_op("GATHER_ND", [p, i], [y])
    b.mark_output(y)
    return b.build()


@recipe
def scatter_nd_runtime_indices() -> bytes:
    b = ModelBuilder()
    i = b.add_input("indices", np.int32, [3, 1])
    u = b.add_input("updates", np.float32, [3, 4])
    s = b.add_const("shape", np.array([6, 4], np.int32))
    y = b.add_tensor("y", np.float32, [6, 4])
    b.add_op("SCATTER_ND", [i, u, s], [y])
    b.mark_output(y)
    return b.build()


@recipe
def segment_sum_runtime_ids() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [6, 2])
    ids = b.add_input("ids", np.int32, [6])
    y = b.add_tensor("y", np.float32, [6, 2], shape_signature=[-1, 2])
    b.add_op("SEGMENT_SUM", [x, ids], [y])
    b.mark_output(y)
    return b.build()


@recipe
def unsorted_segment_max_runtime_ids() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [6])
    ids = b.add_input("ids", np.int32, [6])
    n = b.add_const("n", np.array([4], np.int32))
    y = b.add_tensor("y", np.float32, [4])
    b.add_op("UNSORTED_SEGMENT_MAX", [x, ids, n], [y])
    b.mark_output(y)
    return b.build()


@recipe
def embedding_lookup_runtime_ids() -> bytes:
    b = ModelBuilder()
    ids = b.add_input("ids", np.int32, [3])
    w = b.add_const("w", np.arange(12, dtype=np.float32).reshape(4, 3))
    y = b.add_tensor("y", np.float32, [3, 3])
    b.add_op("EMBEDDING_LOOKUP", [ids, w], [y])
    b.mark_output(y)
    return b.build()


@recipe
def one_hot_runtime_indices() -> bytes:
    b = ModelBuilder()
    i = b.add_input("indices", np.int32, [4])
    depth = b.add_const("depth", np.array(5, np.int32))
    on = b.add_const("on", np.array(1.0, np.float32))
    off = b.add_const("off", np.array(0.0, np.float32))
    y = b.add_tensor("y", np.float32, [4, 5])
    b.add_op("ONE_HOT", [i, depth, on, off], [y], options={"axis": -1})
    b.mark_output(y)
    return b.build()


@recipe
def arg_max_runtime_axis() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [3, 4])
    a = b.add_input("axis", np.int32, [1])
    y = b.add_tensor("y", np.int32, [3], shape_signature=[-1])
    b.add_op("ARG_MAX", [x, a], [y], options={"output_type": "INT32"})
    b.mark_output(y)
    return b.build()


@recipe
def split_v_runtime_sizes() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [6, 2])
    s = b.add_input("sizes", np.int32, [2])
    a = b.add_const("axis", np.array(0, np.int32))
    y0 = b.add_tensor("y0", np.float32, [2, 2], shape_signature=[-1, 2])
    y1 = b.add_tensor("y1", np.float32, [4, 2], shape_signature=[-1, 2])
    b.add_op("SPLIT_V", [x, s, a], [y0, y1], options={"num_splits": 2})
    b.mark_output(y0)
    b.mark_output(y1)
    return b.build()


@recipe
def slice_runtime_begin_size() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [4, 5])
    begin = b.add_input("begin", np.int32, [2])
    size = b.add_input("size", np.int32, [2])
    y = b.add_tensor("y", np.float32, [2, 2], shape_signature=[-1, -1])
    b.add_op("SLICE", [x, begin, size], [y])
    b.mark_output(y)
    return b.build()


@recipe
def strided_slice_runtime() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [6, 4])
    begin = b.add_input("begin", np.int32, [2])
    end = b.add_input("end", np.int32, [2])
    strides = b.add_input("strides", np.int32, [2])
    y = b.add_tensor("y", np.float32, [3, 2], shape_signature=[-1, -1])
    b.add_op("STRIDED_SLICE", [x, begin, end, strides], [y])
    b.mark_output(y)
    return b.build()


@recipe
def reshape_runtime_shape() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 6])
    s = b.add_input("shape", np.int32, [2])
    y = b.add_tensor("y", np.float32, [3, 4], shape_signature=[-1, -1])
    b.add_op("RESHAPE", [x, s], [y])
    b.mark_output(y)
    return b.build()


@recipe
def pad_runtime_paddings() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 3])
    p = b.add_input("paddings", np.int32, [2, 2])
    y = b.add_tensor("y", np.float32, [4, 5], shape_signature=[-1, -1])
    b.add_op("PAD", [x, p], [y])
    b.mark_output(y)
    return b.build()


@recipe
def tile_runtime_multiples() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 3])
    m = b.add_input("multiples", np.int32, [2])
    y = b.add_tensor("y", np.float32, [4, 3], shape_signature=[-1, -1])
    b.add_op("TILE", [x, m], [y])
    b.mark_output(y)
    return b.build()


@recipe
def fill_runtime_dims() -> bytes:
    b = ModelBuilder()
    d = b.add_input("dims", np.int32, [2])
    v = b.add_input("value", np.float32, [])
    y = b.add_tensor("y", np.float32, [2, 2], shape_signature=[-1, -1])
    b.add_op("FILL", [d, v], [y])
    b.mark_output(y)
    return b.build()


@recipe
def range_runtime() -> bytes:
    b = ModelBuilder()
    s = b.add_input("start", np.int32, [])
    lim = b.add_input("limit", np.int32, [])
    d = b.add_input("delta", np.int32, [])
    y = b.add_tensor("y", np.int32, [4], shape_signature=[-1])
    b.add_op("RANGE", [s, lim, d], [y])
    b.mark_output(y)
    return b.build()


@recipe
def topk_runtime_k() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 6])
    k = b.add_input("k", np.int32, [])
    v = b.add_tensor("values", np.float32, [2, 3], shape_signature=[2, -1])
    i = b.add_tensor("indices", np.int32, [2, 3], shape_signature=[2, -1])
    b.add_op("TOPK_V2", [x, k], [v, i])
    b.mark_output(v)
    b.mark_output(i)
    return b.build()


@recipe
def transpose_runtime_perm() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 3, 4])
    p = b.add_input("perm", np.int32, [3])
    y = b.add_tensor("y", np.float32, [4, 3, 2], shape_signature=[-1, -1, -1])
    b.add_op("TRANSPOSE", [x, p], [y])
    b.mark_output(y)
    return b.build()


@recipe
def reduce_sum_runtime_axis() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [3, 4])
    a = b.add_input("axis", np.int32, [1])
    y = b.add_tensor("y", np.float32, [3], shape_signature=[-1])
    b.add_op("SUM", [x, a], [y], options={"keep_dims": False})
    b.mark_output(y)
    return b.build()


@recipe
def int16_add() -> bytes:
    b = ModelBuilder()
    q = (0.001, 0)
    x = b.add_input("x", np.int16, [2, 8], quant=q)
    w = b.add_input("w", np.int16, [2, 8], quant=(0.002, 0))
    y = b.add_tensor("y", np.int16, [2, 8], quant=(0.003, 0))
    b.add_op("ADD", [x, w], [y])
    b.mark_output(y)
    return b.build()


@recipe
def int16_fully_connected() -> bytes:
    b = ModelBuilder()
    rng = np.random.default_rng(3)
    x = b.add_input("x", np.int16, [2, 8], quant=(0.01, 0))
    w = b.add_const("w", rng.integers(-127, 128, (4, 8)).astype(np.int8), quant=(0.02, 0))
    bias = b.add_const("b", rng.integers(-1000, 1000, 4).astype(np.int64), quant=(0.0002, 0))
    y = b.add_tensor("y", np.int16, [2, 4], quant=(0.05, 0))
    b.add_op("FULLY_CONNECTED", [x, w, bias], [y])
    b.mark_output(y)
    return b.build()


@recipe
def int16_softmax() -> bytes:
    return _unary("SOFTMAX", np.int16, [2, 6], quant=(0.001, 0), out_quant=(1.0 / 32768, 0), options={"beta": 1.0})


@recipe
def int8_fully_connected_per_channel() -> bytes:
    b = ModelBuilder()
    rng = np.random.default_rng(4)
    x = b.add_input("x", np.int8, [2, 8], quant=(0.05, 3))
    w = b.add_const("w", rng.integers(-127, 128, (4, 8)).astype(np.int8),
                    quant={"scales": [0.01, 0.02, 0.03, 0.04], "zero_points": [0, 0, 0, 0]})
    bias = b.add_const("b", rng.integers(-500, 500, 4).astype(np.int32), quant={
        "scales": [0.0005, 0.001, 0.0015, 0.002], "zero_points": [0, 0, 0, 0]})
    y = b.add_tensor("y", np.int8, [2, 4], quant=(0.1, -2))
    b.add_op("FULLY_CONNECTED", [x, w, bias], [y])
    b.mark_output(y)
    return b.build()


@recipe
def hybrid_fully_connected() -> bytes:
    b = ModelBuilder()
    rng = np.random.default_rng(5)
    x = b.add_input("x", np.float32, [2, 8])
    w = b.add_const("w", rng.integers(-127, 128, (4, 8)).astype(np.int8), quant=(0.02, 0))
    bias = b.add_const("b", rng.standard_normal(4).astype(np.float32))
    y = b.add_tensor("y", np.float32, [2, 4])
    b.add_op("FULLY_CONNECTED", [x, w, bias], [y], options={"asymmetric_quantize_inputs": True})
    b.mark_output(y)
    return b.build()


@recipe
def hybrid_conv2d() -> bytes:
    b = ModelBuilder()
    rng = np.random.default_rng(6)
    x = b.add_input("x", np.float32, [1, 5, 5, 2])
    w = b.add_const("w", rng.integers(-127, 128, (3, 3, 3, 2)).astype(np.int8),
                    quant={"scales": [0.01, 0.02, 0.03], "zero_points": [0, 0, 0]})
    bias = b.add_const("b", rng.standard_normal(3).astype(np.float32))
    y = b.add_tensor("y", np.float32, [1, 5, 5, 3])
    b.add_op("CONV_2D", [x, w, bias], [y], options={"padding": "SAME", "stride_w": 1, "stride_h": 1})
    b.mark_output(y)
    return b.build()


@recipe
def float_conv_pool() -> bytes:
    b = ModelBuilder()
    rng = np.random.default_rng(7)
    x = b.add_input("x", np.float32, [1, 6, 6, 3])
    w = b.add_const("w", rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    bias = b.add_const("b", rng.standard_normal(4).astype(np.float32))
    c = b.add_tensor("c", np.float32, [1, 6, 6, 4])
    b.add_op("CONV_2D", [x, w, bias], [c], options={"padding": "SAME", "stride_w": 1, "stride_h": 1,
                                                      "fused_activation_function": "RELU"})
    p = b.add_tensor("p", np.float32, [1, 3, 3, 4])
    b.add_op("MAX_POOL_2D", [c], [p], options={"padding": "VALID", "stride_w": 2, "stride_h": 2,
                                               "filter_width": 2, "filter_height": 2})
    b.mark_output(p)
    return b.build()


@recipe
def int8_depthwise_conv() -> bytes:
    b = ModelBuilder()
    rng = np.random.default_rng(8)
    x = b.add_input("x", np.int8, [1, 5, 5, 4], quant=(0.05, -1))
    w = b.add_const("w", rng.integers(-127, 128, (1, 3, 3, 4)).astype(np.int8),
                    quant={"scales": [0.01, 0.02, 0.03, 0.04], "zero_points": [0] * 4, "quantized_dimension": 3})
    bias = b.add_const("b", rng.integers(-100, 100, 4).astype(np.int32),
                       quant={"scales": [0.0005, 0.001, 0.0015, 0.002], "zero_points": [0] * 4})
    y = b.add_tensor("y", np.int8, [1, 5, 5, 4], quant=(0.08, 2))
    b.add_op("DEPTHWISE_CONV_2D", [x, w, bias], [y], options={
        "padding": "SAME", "stride_w": 1, "stride_h": 1, "depth_multiplier": 1})
    b.mark_output(y)
    return b.build()


@recipe
def uint8_add() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.uint8, [2, 4], quant=(0.05, 128))
    w = b.add_input("w", np.uint8, [2, 4], quant=(0.04, 120))
    y = b.add_tensor("y", np.uint8, [2, 4], quant=(0.1, 127))
    b.add_op("ADD", [x, w], [y])
    b.mark_output(y)
    return b.build()


@recipe
def while_counter() -> bytes:
    b = ModelBuilder()
    cond = b.add_subgraph("cond")
    ci = cond.add_input("i", np.float32, [])
    cond.add_input("x", np.float32, [2])
    lim = cond.add_const("limit", np.array(5.0, np.float32))
    cout = cond.add_tensor("c", np.bool_, [])
    cond.add_op("LESS", [ci, lim], [cout])
    cond.mark_output(cout)
    body = b.add_subgraph("body")
    bi = body.add_input("i", np.float32, [])
    bx = body.add_input("x", np.float32, [2])
    one = body.add_const("one", np.array(1.0, np.float32))
    ni = body.add_tensor("i_next", np.float32, [])
    body.add_op("ADD", [bi, one], [ni])
    k = body.add_const("k", np.array([1.5], np.float32))
    nx = body.add_tensor("x_next", np.float32, [2])
    body.add_op("MUL", [bx, k], [nx])
    body.mark_output(ni)
    body.mark_output(nx)
    i = b.add_input("i", np.float32, [])
    x = b.add_input("x", np.float32, [2])
    oi = b.add_tensor("oi", np.float32, [])
    ox = b.add_tensor("ox", np.float32, [2])
    b.add_op("WHILE", [i, x], [oi, ox], options={"cond_subgraph_index": cond.index,
                                                 "body_subgraph_index": body.index})
    b.mark_output(oi)
    b.mark_output(ox)
    return b.build()


@recipe
def while_growing() -> bytes:
    b = ModelBuilder()
    cond = b.add_subgraph("cond")
    ci = cond.add_input("i", np.int32, [])
    cond.add_input("x", np.float32, [1], shape_signature=[-1])
    lim = cond.add_const("limit", np.array(4, np.int32))
    cout = cond.add_tensor("c", np.bool_, [])
    cond.add_op("LESS", [ci, lim], [cout])
    cond.mark_output(cout)
    body = b.add_subgraph("body")
    bi = body.add_input("i", np.int32, [])
    bx = body.add_input("x", np.float32, [1], shape_signature=[-1])
    one = body.add_const("one", np.array(1, np.int32))
    ni = body.add_tensor("i_next", np.int32, [])
    body.add_op("ADD", [bi, one], [ni])
    nx = body.add_tensor("x_next", np.float32, [2], shape_signature=[-1])
    body.add_op("CONCATENATION", [bx, bx], [nx], options={"axis": 0})
    body.mark_output(ni)
    body.mark_output(nx)
    i = b.add_input("i", np.int32, [])
    x = b.add_input("x", np.float32, [1], shape_signature=[-1])
    oi = b.add_tensor("oi", np.int32, [])
    ox = b.add_tensor("ox", np.float32, [1], shape_signature=[-1])
    b.add_op("WHILE", [i, x], [oi, ox], options={"cond_subgraph_index": cond.index,
                                                 "body_subgraph_index": body.index})
    b.mark_output(oi)
    b.mark_output(ox)
    return b.build()


@recipe
def if_branches() -> bytes:
    b = ModelBuilder()
    then = b.add_subgraph("then")
    tx = then.add_input("x", np.float32, [3])
    ty = then.add_tensor("y", np.float32, [3])
    then.add_op("RELU", [tx], [ty])
    then.mark_output(ty)
    other = b.add_subgraph("else")
    ex = other.add_input("x", np.float32, [3])
    m = other.add_const("m", np.array([-1.0], np.float32))
    ey = other.add_tensor("y", np.float32, [3])
    other.add_op("MUL", [ex, m], [ey])
    other.mark_output(ey)
    pred = b.add_input("pred", np.bool_, [])
    x = b.add_input("x", np.float32, [3])
    y = b.add_tensor("y", np.float32, [3])
    b.add_op("IF", [pred, x], [y], options={"then_subgraph_index": then.index, "else_subgraph_index": other.index})
    b.mark_output(y)
    return b.build()


@recipe
def resource_variables() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [3])
    init = b.add_subgraph("init")
    h0 = init.add_tensor("h0", np.int32, [])
    init.add_op("VAR_HANDLE", [], [h0], options={"container": "", "shared_name": "v"})
    c = init.add_const("c", np.full(3, 2.0, np.float32))
    init.add_op("ASSIGN_VARIABLE", [h0, c], [])
    b.add_op("CALL_ONCE", [], [], options={"init_subgraph_index": init.index})
    h = b.add_tensor("h", np.int32, [])
    b.add_op("VAR_HANDLE", [], [h], options={"container": "", "shared_name": "v"})
    r = b.add_tensor("r", np.float32, [3])
    b.add_op("READ_VARIABLE", [h], [r])
    n = b.add_tensor("n", np.float32, [3])
    b.add_op("ADD", [r, x], [n])
    b.add_op("ASSIGN_VARIABLE", [h, n], [])
    b.mark_output(n)
    return b.build()


@recipe
def variable_tensor_accumulator() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [4])
    state = b.add_tensor("state", np.float32, [4], is_variable=True)
    y = b.add_tensor("y", np.float32, [4])
    b.add_op("ADD", [x, state], [y])
    b.mark_output(y)
    return b.build()


@recipe
def svdf_float() -> bytes:
    b = ModelBuilder()
    rng = np.random.default_rng(9)
    x = b.add_input("x", np.float32, [2, 3])
    wf = b.add_const("wf", rng.standard_normal((4, 3)).astype(np.float32))
    wt = b.add_const("wt", rng.standard_normal((4, 5)).astype(np.float32))
    bias = b.add_const("b", rng.standard_normal(2).astype(np.float32))
    state = b.add_tensor("state", np.float32, [2, 20], is_variable=True)
    y = b.add_tensor("y", np.float32, [2, 2])
    b.add_op("SVDF", [x, wf, wt, bias, state], [y], options={"rank": 2})
    b.mark_output(y)
    return b.build()


@recipe
def custom_atan() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 3])
    y = b.add_tensor("y", np.float32, [2, 3])
    b.add_custom_op("Atan", [x], [y])
    b.mark_output(y)
    return b.build()


@recipe
def custom_transpose_conv_bias() -> bytes:
    b = ModelBuilder()
    rng = np.random.default_rng(10)
    x = b.add_input("x", np.float32, [1, 3, 3, 2])
    w = b.add_const("w", rng.standard_normal((2, 2, 2, 2)).astype(np.float32))
    bias = b.add_const("b", rng.standard_normal(2).astype(np.float32))
    y = b.add_tensor("y", np.float32, [1, 6, 6, 2])
    # MediaPipe's TransposeConvBias options: a TfLitePaddingStride (padding, stride w, stride h) packed as int32
    b.add_custom_op("Convolution2DTransposeBias", [x, w, bias], [y],
                    options=np.array([2, 2, 2], np.int32).tobytes())
    b.mark_output(y)
    return b.build()


@recipe
def cast_and_compare() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [6])
    c = b.add_tensor("c", np.int32, [6])
    b.add_op("CAST", [x], [c])
    z = b.add_const("z", np.array([0], np.int32))
    y = b.add_tensor("y", np.bool_, [6])
    b.add_op("GREATER", [c, z], [y])
    b.mark_output(c)
    b.mark_output(y)
    return b.build()


@recipe
def int8_quantize_dequantize() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [8])
    q = b.add_tensor("q", np.int8, [8], quant=(0.1, 5))
    b.add_op("QUANTIZE", [x], [q])
    r = b.add_tensor("r", np.int8, [8], quant=(0.2, -3))
    b.add_op("QUANTIZE", [q], [r])
    y = b.add_tensor("y", np.float32, [8])
    b.add_op("DEQUANTIZE", [r], [y])
    b.mark_output(y)
    return b.build()


@recipe
def batch_matmul_runtime() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 3, 4])
    w = b.add_input("w", np.float32, [2, 4, 5])
    y = b.add_tensor("y", np.float32, [2, 3, 5])
    b.add_op("BATCH_MATMUL", [x, w], [y])
    b.mark_output(y)
    return b.build()


@recipe
def lstm_unidirectional() -> bytes:
    b = ModelBuilder()
    rng = np.random.default_rng(11)
    n_in, n_cell, t_steps, batch = 3, 4, 5, 2
    x = b.add_input("x", np.float32, [batch, t_steps, n_in])
    w = [b.add_const(f"wi{k}", (rng.standard_normal((n_cell, n_in)) * 0.3).astype(np.float32)) for k in range(4)]
    r = [b.add_const(f"wr{k}", (rng.standard_normal((n_cell, n_cell)) * 0.3).astype(np.float32)) for k in range(4)]
    bias = [b.add_const(f"b{k}", np.zeros(n_cell, np.float32)) for k in range(4)]
    hs = b.add_tensor("h", np.float32, [batch, n_cell], is_variable=True)
    cs = b.add_tensor("c", np.float32, [batch, n_cell], is_variable=True)
    y = b.add_tensor("y", np.float32, [batch, t_steps, n_cell])
    ins = [x, *w, *r, -1, -1, -1, *bias, -1, -1, hs, cs, -1, -1, -1, -1]
    b.add_op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y], options={
        "fused_activation_function": "TANH", "cell_clip": 0.0, "proj_clip": 0.0, "time_major": False})
    b.mark_output(y)
    return b.build()


# --- STRING tensors (issue 37): run-time strings, indices, shapes and keys into the string kernels --------------

S = object
WORDS = np.array([b"a", b"bc", b"", b"d\x00e", b"\xff\xfe", b"the quick fox"], object)


@recipe
def string_gather_runtime() -> bytes:
    b = ModelBuilder()
    p = b.add_input("params", S, [6])
    i = b.add_input("indices", np.int32, [4])
    y = b.add_tensor("y", S, [4])
    b.add_op("GATHER", [p, i], [y], options={"axis": 0})
    g = b.add_input("grid", S, [2, 3])
    j = b.add_input("nd_indices", np.int32, [3, 2])
    z = b.add_tensor("z", S, [3])
    b.add_op("GATHER_ND", [g, j], [z], version=2)
    b.mark_output(y)
    b.mark_output(z)
    return b.build()


@recipe
def string_shape_ops_runtime() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", S, [2, 3])
    begin = b.add_input("begin", np.int32, [2])
    size = b.add_input("size", np.int32, [2])
    s = b.add_tensor("s", S, [1, 2])
    b.add_op("SLICE", [x, begin, size], [s], version=3)
    m = b.add_input("multiples", np.int32, [2])
    t = b.add_tensor("t", S, [2, 3])
    b.add_op("TILE", [x, m], [t], version=2)
    r = b.add_tensor("r", S, [3, 2])
    b.add_op("STRIDED_SLICE", [x, b.add_const("b", np.array([0, 2], np.int32)),
                               b.add_const("e", np.array([2, 0], np.int32)),
                               b.add_const("st", np.array([1, -1], np.int32))], [r], version=5)
    f = b.add_tensor("f", S, [2, 2])
    b.add_op("FILL", [b.add_const("dims", np.array([2, 2], np.int32)), b.add_const("v", np.array(b"z", object))],
             [f], version=2)
    for o in (s, t, r, f):
        b.mark_output(o)
    return b.build()


@recipe
def string_hashtables_runtime() -> bytes:
    b = ModelBuilder()
    outs = []
    for tid, (kt, vt, keys, values, find, out, default) in enumerate([
            (5, 4, WORDS, np.arange(6, dtype=np.int64), S, np.int64, np.array(-1, np.int64)),
            (4, 5, np.array([0, 3, 1], np.int64), WORDS[:3].copy(), np.int64, S, np.array(b"?", object))]):
        h = b.add_tensor(f"table{tid}", np.int32, [1])
        b.main.tensors[h].type_code = 13  # RESOURCE
        b.add_op("HASHTABLE", [], [h], options={"table_id": tid + 1, "key_dtype": kt, "value_dtype": vt})
        b.add_op("HASHTABLE_IMPORT", [h, b.add_const(f"k{tid}", keys), b.add_const(f"v{tid}", values)], [])
        x = b.add_input(f"x{tid}", find, [4])
        y = b.add_tensor(f"y{tid}", out, [4])
        b.add_op("HASHTABLE_FIND", [h, x, b.add_const(f"d{tid}", default)], [y])
        n = b.add_tensor(f"n{tid}", np.int64, [1])
        b.add_op("HASHTABLE_SIZE", [h], [n])
        outs += [y, n]
    for o in outs:
        b.mark_output(o)
    return b.build()


@recipe
def string_compare_and_lookup_runtime() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", S, [3, 1])
    y = b.add_input("y", S, [4])
    eq = b.add_tensor("eq", np.bool_, [3, 4])
    b.add_op("EQUAL", [x, y], [eq], version=3)
    ne = b.add_tensor("ne", np.bool_, [3, 4])
    b.add_op("NOT_EQUAL", [x, y], [ne], version=3)
    lk = b.add_input("lookup", np.int32, [5])
    out, hits = b.add_tensor("found", S, [5]), b.add_tensor("hits", np.uint8, [5])
    b.add_op("HASHTABLE_LOOKUP", [lk, b.add_const("keys", np.array([0, 2, 3], np.int32)),
                                  b.add_const("values", WORDS[:3].copy())], [out, hits])
    sentence = b.add_input("sentence", S, [1])
    grams = b.add_tensor("grams", S, [0])
    b.add_op("SKIP_GRAM", [sentence], [grams], options={"ngram_size": 2, "max_skip_size": 1})
    for o in (eq, ne, out, hits, grams):
        b.mark_output(o)
    return b.build()


def source_models() -> list[tuple[str, bytes]]:
    """(name, bytes) of every source model: tests/data files under MAX_SOURCE_BYTES, then the recipes above."""
    out = []
    for p in sorted((REPO / "tests" / "data").rglob("*.tflite")):
        if p.stat().st_size <= MAX_SOURCE_BYTES:
            out.append((p.stem, p.read_bytes()))
    for name, fn in RECIPES.items():
        out.append((f"built:{name}", fn()))
    return out
