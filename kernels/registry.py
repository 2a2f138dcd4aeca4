"""The one table of builtin kernels: (op, min version, max version, kernel), like TFLite's register.cc.

A reader answers "which versions of CONV_2D do we run?" here. Each family keeps its rows in its own block. The
kernel modules are imported on first use of one of their kernels (`LazyKernel`), not when this table is read.
"""

from __future__ import annotations

import importlib

from lite_numba.ops import OpKernel


class LazyKernel(OpKernel):
    """A row's kernel, imported from its module on first use: a process imports only the kernel modules its models
    use (importing every module costs ~0.3-0.6 s of start-up). Behaves as the OpKernel it stands for."""

    def __init__(self, module: str, attr: str, quantized: LazyKernel | None = None,  # noqa: D107 - fields are properties
                 strings: LazyKernel | None = None):
        self._where = (module, attr)
        self._kernel: OpKernel | None = None
        self.quantized = quantized
        self.strings = strings

    def resolve(self) -> OpKernel:
        k = self._kernel
        if k is None:
            module, attr = self._where
            k = getattr(importlib.import_module(f"{__package__}.{module}"), attr)
            if not isinstance(k, OpKernel):
                raise TypeError(f"{module}.{attr} is not an OpKernel")
            self._kernel = k
        return k

    name = property(lambda self: self.resolve().name)
    prepare = property(lambda self: self.resolve().prepare)
    init = property(lambda self: self.resolve().init)
    free = property(lambda self: self.resolve().free)
    host = property(lambda self: self.resolve().host)
    meta = property(lambda self: self.resolve().meta)

    def __eq__(self, other) -> bool:
        other = other.resolve() if isinstance(other, LazyKernel) else other
        return self.resolve() == other

    def __reduce_ex__(self, protocol):  # by its row (a pickled resolver): the kernel may be a factory's closure
        return LazyKernel, (*self._where, self.quantized, self.strings)

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"OpKernel({self._where[1]}, lazy from kernels.{self._where[0]})"

    @property
    def module(self) -> str:
        """The kernel module (relative to lite_numba.kernels) this row's kernel comes from."""
        return self._where[0]


def with_quantized(kernel: LazyKernel, quantized: LazyKernel) -> LazyKernel:
    """A row's float kernel together with its integer-quantized variant (another module of the family), which the
    float prepare reaches through ctx.prepare_quantized()."""
    return LazyKernel(*kernel._where, quantized=quantized)


def with_strings(kernel: LazyKernel, strings: LazyKernel) -> LazyKernel:
    """A row's kernel together with its STRING variant (a host kernel: movement/strings.py, elementwise/
    string_compare.py): the resolver gives the variant every node of the op with a STRING tensor, whatever the
    version (the official kernels switch on the type)."""
    return LazyKernel(*kernel._where, quantized=kernel.quantized, strings=strings)


class _LazyModule:
    """`ew.ADD` in the table below -> LazyKernel("elementwise", "ADD"), without importing the module."""

    def __init__(self, module: str):
        self._module = module
        self._kernels: dict[str, LazyKernel] = {}

    def __getattr__(self, attr: str) -> LazyKernel:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return self._kernels.setdefault(attr, LazyKernel(self._module, attr))


def _lazy(module: str) -> _LazyModule:
    return _LazyModule(module)


act = _lazy("elementwise.activations")
q_act = _lazy("elementwise.activations_quantized")
cf = _lazy("host.control_flow")
ew = _lazy("elementwise.arithmetic")
unary = _lazy("elementwise.unary")
q_ew = _lazy("elementwise.arithmetic_quantized")
fc = _lazy("linear.fully_connected")
q_fc = _lazy("linear.fully_connected_quantized")
logic = _lazy("elementwise.logic")
reshape = _lazy("movement.reshape")
softmax = _lazy("elementwise.softmax")
str_cmp = _lazy("elementwise.string_compare")
text = _lazy("movement.strings")
hashtable = _lazy("host.hashtable")

BUILTINS = [
    # --- elementwise maths, comparison, logic (arithmetic.py, unary.py, logic.py); quantized inputs -> *_quantized ---
    # f32/i32; v2 int8, v3 int16 quantized, v4 int64, v5 int16 (v6 float16: no)
    ("ADD", 1, 5, with_quantized(ew.ADD, q_ew.ADD)),
    # f32/i32; v2 int8, v3 rank>4 broadcast, v4 int64, v5 int16 quantized
    ("SUB", 1, 5, with_quantized(ew.SUB, q_ew.SUB)),
    # v2/v3 int8, v4 int16 quantized, v5 int64, v6 complex64, v7 int16/uint32 (v8 f16: no)
    ("MUL", 1, 7, with_quantized(ew.MUL, q_ew.MUL)),
    ("DIV", 1, 2, ew.DIV),  # f32/i32; v2 rank>4 broadcast
    ("SQUARED_DIFFERENCE", 1, 2, with_quantized(ew.SQUARED_DIFFERENCE, q_ew.SQUARED_DIFFERENCE)),  # f32/i32; v2 int8
    ("POW", 1, 1, ew.POW),  # f32/i32
    ("FLOOR_DIV", 1, 3, ew.FLOOR_DIV),  # v1 i32, v2 f32, v3 int8/int16 (raw values)
    ("FLOOR_MOD", 1, 2, ew.FLOOR_MOD),  # f32/i32/i64; v2 int8/int16 (raw values)
    ("MAXIMUM", 1, 4, with_quantized(ew.MAXIMUM, q_ew.MAXIMUM)),  # v2 int8, v3 rank>4 broadcast, v4 int16
    ("MINIMUM", 1, 4, with_quantized(ew.MINIMUM, q_ew.MINIMUM)),
    ("EXP", 1, 2, with_quantized(unary.EXP, q_ew.EXP)),  # f32; v2 int8/int16
    ("LOG", 1, 2, with_quantized(unary.LOG, q_ew.LOG)),
    ("SQRT", 1, 2, with_quantized(unary.SQRT, q_ew.SQRT)),
    ("RSQRT", 1, 3, with_quantized(unary.RSQRT, q_ew.RSQRT)),  # v2 int8, v3 int16
    ("SQUARE", 1, 1, unary.SQUARE),
    ("ABS", 1, 5, with_quantized(unary.ABS, q_ew.ABS)),  # f32; v2 int8, v3 int16 quantized, v4 int16, v5 int32
    ("NEG", 1, 1, unary.NEG),  # f32/i32/i64/int8/int16 (raw values)
    ("SIGN", 1, 2, unary.SIGN),  # f32/f64; v2 int32
    ("SIN", 1, 1, unary.SIN),  # (v2 float16: no)
    ("COS", 1, 1, unary.COS),
    ("FLOOR", 1, 1, unary.FLOOR),
    ("CEIL", 1, 1, unary.CEIL),
    ("ROUND", 1, 1, unary.ROUND),
    # f32/i32/i64/bool; v2 int8, v3 string (string_compare.py, any version), v4 int16 quantized, v5 int16
    ("EQUAL", 1, 5, with_strings(logic.EQUAL, str_cmp.EQUAL)),
    ("NOT_EQUAL", 1, 4, with_strings(logic.NOT_EQUAL, str_cmp.NOT_EQUAL)),
    ("LESS", 1, 3, logic.LESS),  # v2 int8, v3 int16
    ("LESS_EQUAL", 1, 2, logic.LESS_EQUAL),
    ("GREATER", 1, 2, logic.GREATER),
    ("GREATER_EQUAL", 1, 3, logic.GREATER_EQUAL),
    ("LOGICAL_AND", 1, 1, logic.LOGICAL_AND),
    ("LOGICAL_OR", 1, 1, logic.LOGICAL_OR),
    ("LOGICAL_NOT", 1, 1, logic.LOGICAL_NOT),
    ("SELECT", 1, 4, logic.SELECT),  # any 1/2/4/8-byte type; v3 5-D, v4 uint32
    ("SELECT_V2", 1, 2, logic.SELECT_V2),
    # --- activations (activations.py; float32, quantized inputs -> activations_quantized.py) ---
    ("RELU", 1, 3, with_quantized(act.RELU, q_act.RELU)),  # v2 int8/uint8, v3 int16
    ("RELU6", 1, 3, with_quantized(act.RELU6, q_act.RELU6)),
    ("RELU_N1_TO_1", 1, 1, with_quantized(act.RELU_N1_TO_1, q_act.RELU_N1_TO_1)),
    ("RELU_0_TO_1", 1, 1, with_quantized(act.RELU_0_TO_1, q_act.RELU_0_TO_1)),
    ("LOGISTIC", 1, 3, with_quantized(act.LOGISTIC, q_act.LOGISTIC)),  # v2 int8, v3 int16
    ("TANH", 1, 3, with_quantized(act.TANH, q_act.TANH)),
    ("HARD_SWISH", 1, 1, with_quantized(act.HARD_SWISH, q_act.HARD_SWISH)),
    ("ELU", 1, 1, with_quantized(act.ELU, q_act.ELU)),
    ("GELU", 1, 2, with_quantized(act.GELU, q_act.GELU)),  # v2 int8/uint8 (v3 float16: no)
    ("LEAKY_RELU", 1, 2, with_quantized(act.LEAKY_RELU, q_act.LEAKY_RELU)),  # v2 int16
    ("PRELU", 1, 1, with_quantized(act.PRELU, q_act.PRELU)),
    ("SOFTMAX", 1, 3, with_quantized(softmax.SOFTMAX, q_act.SOFTMAX)),
    ("LOG_SOFTMAX", 1, 2, with_quantized(softmax.LOG_SOFTMAX, q_act.LOG_SOFTMAX)),
    # --- shape ---
    # STRING tensors of every shape op: movement/strings.py (host kernels), chosen by the resolver at any version
    ("RESHAPE", 1, 1, with_strings(reshape.RESHAPE, text.RESHAPE)),
    ("SQUEEZE", 1, 2, with_strings(reshape.SQUEEZE, text.SQUEEZE)),  # v2 string
    ("EXPAND_DIMS", 1, 1, with_strings(reshape.EXPAND_DIMS, text.EXPAND_DIMS)),
    # --- control flow and resource variables (run on the host, call subgraphs) ---
    ("WHILE", 1, 1, cf.WHILE),
    ("IF", 1, 1, cf.IF),
    ("CALL_ONCE", 1, 1, cf.CALL_ONCE),
    ("VAR_HANDLE", 1, 1, cf.VAR_HANDLE),
    # hash tables (string -> int64, int64 -> string): resources of the model, host kernels (hashtable.py)
    ("HASHTABLE", 1, 1, hashtable.HASHTABLE),
    ("HASHTABLE_IMPORT", 1, 1, hashtable.HASHTABLE_IMPORT),
    ("HASHTABLE_FIND", 1, 1, hashtable.HASHTABLE_FIND),
    ("HASHTABLE_SIZE", 1, 1, hashtable.HASHTABLE_SIZE),
    ("READ_VARIABLE", 1, 1, cf.READ_VARIABLE),
    ("ASSIGN_VARIABLE", 1, 1, cf.ASSIGN_VARIABLE),
    # StableHLO control flow: a branch chosen by an int32 index (out of range: the last); a composite calls its
    # decomposition subgraph, which the runtime inlines or replaces by a fused kernel (COMPOSITES below)
    ("STABLEHLO_CASE", 1, 1, cf.STABLEHLO_CASE),
    ("STABLEHLO_COMPOSITE", 1, 1, cf.STABLEHLO_COMPOSITE),
]

# --- the other StableHLO builtins the official runtime registers (tflite/kernels/stablehlo_*.cc), all version 1 ---
shlo = _lazy("elementwise.stablehlo")
window = _lazy("reduce.window")

BUILTINS += [
    ("STABLEHLO_ADD", 1, 1, shlo.STABLEHLO_ADD),  # same shapes; ints, uints, bool, float16/32/64
    ("STABLEHLO_MULTIPLY", 1, 1, shlo.STABLEHLO_MULTIPLY),
    ("STABLEHLO_MAXIMUM", 1, 1, shlo.STABLEHLO_MAXIMUM),
    ("STABLEHLO_MINIMUM", 1, 1, shlo.STABLEHLO_MINIMUM),
    ("STABLEHLO_AND", 1, 1, shlo.STABLEHLO_AND),  # ints, uints, bool
    ("STABLEHLO_SHIFT_LEFT", 1, 1, shlo.STABLEHLO_SHIFT_LEFT),  # int8/16/32
    ("STABLEHLO_REDUCE_WINDOW", 1, 1, window.STABLEHLO_REDUCE_WINDOW),  # the body's one op names the reduction
    ("REDUCE_WINDOW", 1, 1, window.REDUCE_WINDOW),  # the same kernel, reduce_function and constant windows
]

# --- space/depth, resize, cast, value-generating and dynamic-shape ops (part B) ---
cast = _lazy("elementwise.cast")
generate = _lazy("movement.generate")
resize = _lazy("movement.resize")
space = _lazy("movement.space")
topk = _lazy("reduce.topk")

BUILTINS += [
    ("DEPTH_TO_SPACE", 1, 2, space.DEPTH_TO_SPACE),
    ("SPACE_TO_DEPTH", 1, 2, space.SPACE_TO_DEPTH),
    ("SPACE_TO_BATCH_ND", 1, 4, space.SPACE_TO_BATCH_ND),
    ("BATCH_TO_SPACE_ND", 1, 4, space.BATCH_TO_SPACE_ND),
    ("RESIZE_BILINEAR", 1, 4, resize.RESIZE_BILINEAR),
    ("RESIZE_NEAREST_NEIGHBOR", 1, 4, resize.RESIZE_NEAREST_NEIGHBOR),
    ("CAST", 1, 5, cast.CAST),  # v5 float16/float64; v6+ (int4, bfloat16, int2/uint4, float8) not supported
    ("SHAPE", 1, 1, generate.SHAPE),
    ("RANK", 1, 1, generate.RANK),
    # v2 bool and string (movement/strings.py), v3 int8/int16, v4 float16 (v5 float8 not supported)
    ("FILL", 1, 4, with_strings(generate.FILL, text.FILL)),
    ("ZEROS_LIKE", 1, 1, generate.ZEROS_LIKE),
    ("RANGE", 1, 2, generate.RANGE),  # v2 int64
    ("ONE_HOT", 1, 1, generate.ONE_HOT),
    ("WHERE", 1, 2, generate.WHERE),
    ("TOPK_V2", 1, 3, topk.TOPK_V2),  # v2 int8, v3 int16 values/k/indices
]

# --- data movement, indexing and shape ops (part A): raw-word copies, any dtype of 1/2/4/8/16 bytes ---
# Gaps in version ranges are the types we cannot hold (STRING, INT4 packed, FLOAT8, BFLOAT16).
concat_split = _lazy("movement.concat_split")
gather = _lazy("movement.gather")
pad = _lazy("movement.pad")
tile = _lazy("movement.tile")
transpose = _lazy("movement.transpose")
slice_ops = _lazy("movement.slice")
update_slice = _lazy("movement.update_slice")
segment = _lazy("reduce.segment")
sparse = _lazy("movement.sparse")
random_ops = _lazy("host.random_ops")

BUILTINS += [
    ("CONCATENATION", 1, 4, concat_split.CONCATENATION),  # v2 int8, v3 int16, v4 uint32
    ("CONCATENATION", 6, 6, concat_split.CONCATENATION),  # float16
    ("PACK", 1, 4, concat_split.PACK),
    ("UNPACK", 1, 5, concat_split.UNPACK),  # v5: float16
    ("SPLIT", 1, 4, concat_split.SPLIT),
    ("SPLIT_V", 1, 2, concat_split.SPLIT_V),
    ("PAD", 1, 5, pad.PAD),  # v4: rank > 4, v5: bool
    ("PADV2", 1, 5, pad.PADV2),
    ("MIRROR_PAD", 1, 3, pad.MIRROR_PAD),
    ("TRANSPOSE", 1, 6, transpose.TRANSPOSE),  # v6: 6-D
    ("TRANSPOSE", 8, 9, transpose.TRANSPOSE),  # v8: 7-D/8-D, v9: float16
    ("REVERSE_V2", 1, 3, transpose.REVERSE_V2),
    # STRING operands at any version (v3 of SLICE, v5 of STRIDED_SLICE, v2 of TILE and GATHER_ND are the string
    # versions): movement/strings.py's host kernels, which the resolver gives a node with a STRING tensor
    ("SLICE", 1, 6, with_strings(slice_ops.SLICE, text.SLICE)),  # v3 string, v4 int16, v5 rank > 4, v6 uint32
    ("SLICE", 8, 8, slice_ops.SLICE),  # float16
    # v5 string, v6 ellipsis/new axis, v7 uint32, v8 offset
    ("STRIDED_SLICE", 1, 8, with_strings(slice_ops.STRIDED_SLICE, text.STRIDED_SLICE)),
    ("TILE", 1, 3, with_strings(tile.TILE, text.TILE)),  # v2 string, v3 int8
    ("BROADCAST_TO", 2, 3, with_strings(tile.BROADCAST_TO, text.BROADCAST_TO)),  # strings: TF's (official: no)
    # v5 batch_dims, v6 int16 indices; strings of any rank (the official kernel: 1-D params only)
    ("GATHER", 1, 6, with_strings(gather.GATHER, text.GATHER)),
    ("GATHER_ND", 1, 5, with_strings(gather.GATHER_ND, text.GATHER_ND)),  # v2 string, v3 int16 params, ..., v5 bool
    ("HASHTABLE_LOOKUP", 1, 1, text.HASHTABLE_LOOKUP),  # int32 keys; numeric or STRING values (host)
    ("SKIP_GRAM", 1, 1, text.SKIP_GRAM),  # string -> its skip-grams (host)
    ("SCATTER_ND", 1, 1, gather.SCATTER_ND),
    # raw-word copy, start indices clamped; v1 int32 indices, v2 int64 indices, v3 float16, v4 int16
    # (v5 packed int4, v6 bfloat16: no)
    ("DYNAMIC_UPDATE_SLICE", 1, 4, update_slice.DYNAMIC_UPDATE_SLICE),
    ("STABLEHLO_PAD", 1, 1, pad.STABLEHLO_PAD),  # edge (negative: crop) and interior padding, any 1-8 byte type
    ("STABLEHLO_GATHER", 1, 1, gather.STABLEHLO_GATHER),  # int32/int64 indices, start indices clamped
    ("STABLEHLO_SCATTER", 1, 1, gather.STABLEHLO_SCATTER),  # update / add / mul / max / min body; out of bounds skipped
    ("STABLEHLO_RNG_BIT_GENERATOR", 1, 1, random_ops.STABLEHLO_RNG_BIT_GENERATOR),  # Philox / Threefry, pure
    # small ops real converter output uses (all version 1, as the official runtime registers them)
    ("ADD_N", 1, 1, ew.ADD_N),  # float32, int32
    ("BROADCAST_ARGS", 1, 1, generate.BROADCAST_ARGS),  # int32, int64 shapes
    ("ATAN2", 1, 1, ew.ATAN2),  # float32, float64 (float16/bfloat16: no)
    ("BITWISE_XOR", 1, 1, logic.BITWISE_XOR),  # 8/16/32-bit signed and unsigned
    ("RIGHT_SHIFT", 1, 1, logic.RIGHT_SHIFT),
    ("REVERSE_SEQUENCE", 1, 1, gather.REVERSE_SEQUENCE),  # any 1/2/4/8/16-byte type; int32/int64 lengths
    ("BITCAST", 1, 1, reshape.BITCAST),
    ("MATRIX_DIAG", 1, 1, generate.MATRIX_DIAG),
    ("MATRIX_SET_DIAG", 1, 1, generate.MATRIX_SET_DIAG),
    ("BUCKETIZE", 1, 1, logic.BUCKETIZE),  # float32/float64/int32/int64 -> int32
    # segment.py: float32 / int32 data, int32 ids
    ("SEGMENT_SUM", 1, 1, segment.SEGMENT_SUM),
    ("UNSORTED_SEGMENT_SUM", 1, 1, segment.UNSORTED_SEGMENT_SUM),
    ("UNSORTED_SEGMENT_PROD", 1, 1, segment.UNSORTED_SEGMENT_PROD),
    ("UNSORTED_SEGMENT_MAX", 1, 1, segment.UNSORTED_SEGMENT_MAX),
    ("UNSORTED_SEGMENT_MIN", 1, 1, segment.UNSORTED_SEGMENT_MIN),
    # sparse.py: v1 float32/int32 values, v2 int64, v3 int8/uint8; int32/int64 indices and shape
    ("SPARSE_TO_DENSE", 1, 3, sparse.SPARSE_TO_DENSE),
    ("UNIQUE", 1, 1, sparse.UNIQUE),  # int8/int16/int32/int64/uint8/float32; int32/int64 indices
    ("EMBEDDING_LOOKUP_SPARSE", 1, 1, sparse.EMBEDDING_LOOKUP_SPARSE),  # float32; SUM / MEAN / SQRTN
    # random_ops.py: the official Philox-4x32-10 streams bit for bit (host ops: the generator advances per invoke)
    ("RANDOM_UNIFORM", 1, 1, random_ops.RANDOM_UNIFORM),  # float32
    ("RANDOM_STANDARD_NORMAL", 1, 1, random_ops.RANDOM_STANDARD_NORMAL),  # float32
    ("MULTINOMIAL", 1, 1, random_ops.MULTINOMIAL),  # float32 logits -> int32 / int64
    # v2/v3 (TFLite 1.14): hybrid uint8/int8 tables; v4: per-row scales or int4 values (unpacked on load); v5 int2
    ("EMBEDDING_LOOKUP", 1, 4, gather.EMBEDDING_LOOKUP),
]

# --- pooling, reductions, normalization ---
norm = _lazy("reduce.normalization")
pooling = _lazy("reduce.pooling")
reduce = _lazy("reduce.reduce")

BUILTINS += [
    ("AVERAGE_POOL_2D", 1, 3, pooling.AVERAGE_POOL_2D),  # float32; int8/uint8 (v2); int16 (v3)
    ("MAX_POOL_2D", 1, 3, pooling.MAX_POOL_2D),
    ("L2_POOL_2D", 1, 1, pooling.L2_POOL_2D),  # float32 only, as the official kernel
    ("MEAN", 1, 3, reduce.MEAN),  # float32/int32/int64; int8/uint8 (v2); int16 (v3)
    ("SUM", 1, 2, reduce.SUM),  # float32/int32/int64; quantized int8/uint8/int16
    ("REDUCE_PROD", 1, 2, reduce.REDUCE_PROD),  # quantized int8/int16 from v2
    ("REDUCE_MAX", 1, 3, reduce.REDUCE_MAX),
    ("REDUCE_MIN", 1, 3, reduce.REDUCE_MIN),
    ("REDUCE_ANY", 1, 1, reduce.REDUCE_ANY),
    ("REDUCE_ALL", 1, 1, reduce.REDUCE_ALL),
    ("ARG_MAX", 1, 3, reduce.ARG_MAX),  # float32/uint8/int32; int8 (v2); bool (v3)
    ("ARG_MIN", 1, 3, reduce.ARG_MIN),
    ("CUMSUM", 1, 1, reduce.CUMSUM),
    ("L2_NORMALIZATION", 1, 2, norm.L2_NORMALIZATION),  # float32/uint8; int8 (v2)
    ("LOCAL_RESPONSE_NORMALIZATION", 1, 1, norm.LOCAL_RESPONSE_NORMALIZATION),
]

# --- convolution family ---
conv = _lazy("linear.conv")

BUILTINS += [
    # v1 float32/uint8, v2 hybrid per-tensor, v3 int8, v4 int16, v5 hybrid per-channel, v6 groups,
    # v7 int4 filter (unpacked to int8 on load), v8 int16 with quantized_bias_type
    ("CONV_2D", 1, 8, conv.CONV_2D),
    # v1 float32/uint8, v2 dilation, v3 int8, v4/v6 hybrid, v5 int16, v7 int4 filter
    ("DEPTHWISE_CONV_2D", 1, 7, conv.DEPTHWISE_CONV_2D),
    # v1 float32/uint8, v2 int8 (and hybrid), v3 bias, v4 fused activation, v5 int16 with quantized_bias_type
    ("TRANSPOSE_CONV", 1, 5, conv.TRANSPOSE_CONV),
    ("CONV_3D", 1, 1, conv.CONV_3D),  # float32
]

# --- matrix multiply family, signal and sparse weights ---
batch_matmul = _lazy("linear.batch_matmul")
densify = _lazy("movement.densify")
signal = _lazy("signal.fft")

BUILTINS += [
    # v1 float32/uint8, v3 hybrid, v4 int8, v5 keep_num_dims, v6 no bias, v7 int16 weights, v8 sparse weights,
    # v9 asymmetric hybrid, v10 int4 weights (unpacked to int8 on load), v11 int16x8 quantized_bias_type,
    # v12 per-channel hybrid, v13 int16 input with int4 weights (v2 shuffled weights and v14 int2 are not supported)
    ("FULLY_CONNECTED", 1, 1, with_quantized(fc.FULLY_CONNECTED, q_fc.FULLY_CONNECTED)),
    ("FULLY_CONNECTED", 3, 13, with_quantized(fc.FULLY_CONNECTED, q_fc.FULLY_CONNECTED)),
    # v1 float32 and hybrid, v2 int8, v3 int16, v4 asymmetric hybrid
    ("BATCH_MATMUL", 1, 4, batch_matmul.BATCH_MATMUL),
    ("DENSIFY", 1, 1, densify.DENSIFY),  # float32, float16, int8
    ("RFFT2D", 1, 1, signal.RFFT2D),
    ("COMPLEX_ABS", 1, 1, signal.COMPLEX_ABS),
    ("REAL", 1, 1, signal.REAL),
    ("IMAG", 1, 1, signal.IMAG),
]

# --- quantization (quantize.py): QUANTIZE / DEQUANTIZE (the quantized variants of elementwise ops, activations and
# FULLY_CONNECTED are named in their ops' rows above) ---
quantize = _lazy("elementwise.quantize")

BUILTINS += [
    # v1 float32 -> int8/uint8 and int8/uint8/int16/int32 requantization, v2 int16 output, v3 per-channel output
    # (v4/v5 int4/uint4: not supported)
    ("QUANTIZE", 1, 3, quantize.QUANTIZE),
    # v1 uint8, v2 int8, v3 int16 and float16, v4 (same kernel), v5 per-channel int8
    # (v6+ int4/int2/uint4/float8: not supported)
    ("DEQUANTIZE", 1, 5, quantize.DEQUANTIZE),
]

# --- sequence ops: LSTM (lstm.py), RNN (rnn.py), SVDF (svdf.py): float32 and hybrid (int8 weights); the fully
# integer UNIDIRECTIONAL_SEQUENCE_LSTM of rnn_int.py; SVDF integer too ---
lstm = _lazy("sequence.lstm")
rnn = _lazy("sequence.rnn")
svdf = _lazy("sequence.svdf")

BUILTINS += [
    ("UNIDIRECTIONAL_SEQUENCE_LSTM", 1, 1, lstm.UNIDIRECTIONAL_SEQUENCE_LSTM),  # float32; int8 / int16-cell integer
    ("UNIDIRECTIONAL_SEQUENCE_LSTM", 2, 3, lstm.UNIDIRECTIONAL_SEQUENCE_LSTM),  # hybrid: int8 weights (v3 asymmetric)
    ("UNIDIRECTIONAL_SEQUENCE_LSTM", 4, 4, lstm.UNIDIRECTIONAL_SEQUENCE_LSTM),  # diagonal recurrent weights
    ("BIDIRECTIONAL_SEQUENCE_LSTM", 1, 3, lstm.BIDIRECTIONAL_SEQUENCE_LSTM),  # float32; v2/v3 hybrid (int8 weights)
    ("UNIDIRECTIONAL_SEQUENCE_RNN", 1, 3, rnn.UNIDIRECTIONAL_SEQUENCE_RNN),  # float32; v2/v3 hybrid (int8 weights)
    ("RNN", 1, 3, rnn.RNN),  # float32; v2/v3 hybrid (int8 weights)
    ("BIDIRECTIONAL_SEQUENCE_RNN", 1, 3, rnn.BIDIRECTIONAL_SEQUENCE_RNN),  # float32; v2/v3 hybrid (int8 weights)
    ("SVDF", 1, 4, svdf.SVDF),  # float32; v2/v4 hybrid (int8 weights, v4 asymmetric); v3 int8
]


# --- object detection (detection.py): float32 NMS (int8/int16 quantized NMS: no); audio features (audio.py) ---
audio = _lazy("signal.audio")
detection = _lazy("signal.detection")
hadamard = _lazy("signal.hadamard")

BUILTINS += [
    ("NON_MAX_SUPPRESSION_V4", 1, 1, detection.NON_MAX_SUPPRESSION_V4),
    ("NON_MAX_SUPPRESSION_V5", 1, 1, detection.NON_MAX_SUPPRESSION_V5),
]

# Custom ops the official builtin op resolver registers too (tensorflow/lite/kernels/register.cc), so a model that
# uses them runs with the default resolver: (name, min version, max version, kernel).
CUSTOMS = [
    ("TFLite_Detection_PostProcess", 1, 1, detection.DETECTION_POSTPROCESS),  # float32 / uint8 inputs
    ("AudioSpectrogram", 1, 1, audio.AUDIO_SPECTROGRAM),  # float32
    ("Mfcc", 1, 1, audio.MFCC),  # float32, int32 sample rate
    ("aeq.hadamard_rotation", 1, 1, hadamard.HADAMARD_ROTATION),  # float32; ai-edge-quantizer's rotation
]

# Kernels of ops that graph rewrites (lite_numba/runtime/fusion.py, composites.py) put in place of a model's nodes;
# no model names them.
REWRITES = {
    "SLICE_UPDATE": slice_ops.SLICE_UPDATE,  # SLICE, SLICE -> CONCATENATION becomes one slice update
    "FUSED_AWAY": slice_ops.FUSED_AWAY,  # the nodes it replaces
    "COPY": reshape.COPY,  # an inlined composite's output that is one of its inputs or a constant
    "FUSED_NORM": _lazy("reduce.norm_fusion").FUSED_NORM,  # a layer-norm / RMS-norm pattern of elementwise nodes
    # [PAD of the last axis ->] float ADD / SUB / MUL [-> RELU-family]
    "FUSED_ELEMENTWISE": _lazy("elementwise.fused").FUSED_ELEMENTWISE,
    # BATCH_MATMUL -> ADD(mask) -> SOFTMAX -> BATCH_MATMUL, the key positions a -inf mask excludes skipped
    "MASKED_ATTENTION": _lazy("linear.masked_attention").MASKED_ATTENTION,
    # float [1x1 CONV_2D ->] DEPTHWISE_CONV_2D [-> 1x1 CONV_2D] run in bands of rows (runtime/fusion_bands.py)
    "FUSED_CONV_BANDS": _lazy("linear.conv_bands").FUSED_CONV_BANDS,
}

# Fused kernels of STABLEHLO_COMPOSITE ops, by composite name and version: (name, min version, max version, kernel),
# chosen by lite_numba/runtime/composites.py when the kernel's meta["accepts"](attributes, input specs) agrees; any
# other composite runs its decomposition subgraph, inlined. Each is tested equal to its decomposition
# (tests/test_stablehlo.py).
attention = _lazy("elementwise.attention")

COMPOSITES = [
    ("odml.rms_norm", 0, 0, norm.RMS_NORM),  # {epsilon}: x, w float32; bit for bit
    ("odml.scaled_dot_product_attention", 0, 0, attention.SDPA),  # {scale}, a float mask; bit for bit
    ("odml.sdpa_transposed", 0, 0, attention.SDPA_TRANSPOSED),  # k_ts_idx 2, v_ts_idx 3, a bool mask; bit for bit
    ("odml.swiglu", 0, 0, act.SWIGLU),  # {gate_size}: float32; bit for bit
    # odml.cache_update: its decomposition (two DYNAMIC_UPDATE_SLICE, a TRANSPOSE) is already what a kernel would do
]


def kernel_level() -> str:
    """The builtin kernels' instruction-set path in force (kernels/base/isa.isa_level; asking grants AMX's tile state
    when the path uses it): part of a native image's key (runtime/native/image.py)."""
    from lite_numba.kernels.base.isa import isa_level  # lazy: as kernel_path

    return isa_level()


def grant_refusal(level: str) -> str | None:
    """Why the operating system refuses what kernel path `level` needs besides the CPU's features (AMX's tile state;
    asked once, granting it), or None. Asks nothing of LLVM (a native image's process: runtime/native/image.py)."""
    from lite_numba.kernels.base.isa import GRANTS, refusal  # lazy: as kernel_path

    return refusal() if level in GRANTS else None


def kernel_path() -> str:
    """The builtin kernels' instruction-set path in force and why a better level of this CPU is not used (e.g. "amx
    not used: Linux refused the AMX tile state ..."): what lite-numba inspect and the benchmark reports print
    (kernels/base/isa.describe)."""
    from lite_numba.kernels.base.isa import describe  # lazy: asked by the tools, not by the op table

    return describe()
