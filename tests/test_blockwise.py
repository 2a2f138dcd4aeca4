"""Blockwise-quantized weights (BlockwiseQuantization: INT4 / INT2 values kept packed, FLOAT16 block scales) against
the official builtin kernels, bit for bit: FULLY_CONNECTED (its 4-bit blockwise path and the hybrid path the
official kernel takes for INT2 and small INT4 weights), EMBEDDING_LOOKUP; the litert-torch decoders quantized with
dynamic_wi4b32 / dynamic_wi2b32; the loader's packed storage and its errors; peak RSS of an int4 model against its
int8 twin."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lite_numba.format.builder import ModelBuilder
from lite_numba.format.model import load_model
from lite_numba.testing import official_interpreter, prepare_error, require_official, run_both, run_ours

require_official()

LITERT_TORCH = Path(__file__).parent / "data" / "litert_torch"


def blockwise_fc(x_shape, units, block, *, bits=4, bias=True, keep=False, act="NONE", seed=0, w=None, out_shape=None,
                 scales=None):
    """A FULLY_CONNECTED model with blockwise weights [units, K] (random in the type's range unless given)."""
    rng = np.random.default_rng(seed)
    k = x_shape[-1]
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    w = rng.integers(lo, hi + 1, (units, k)) if w is None else w
    s = rng.uniform(0.005, 0.1, (units, k // block)).astype(np.float16) if scales is None else scales
    b = ModelBuilder()
    x = b.add_input("x", np.float32, list(x_shape))
    ins = [x, b.add_blockwise_const("w", w, s, block, "INT4" if bits == 4 else "INT2")]
    if bias:
        ins.append(b.add_const("bias", rng.standard_normal(units).astype(np.float32)))
    rows = int(np.prod(x_shape)) // k
    shape = out_shape or ((list(x_shape[:-1]) + [units]) if keep else [rows, units])
    y = b.add_tensor("y", np.float32, shape)
    b.add_op("FULLY_CONNECTED", ins, [y], {"keep_num_dims": keep, "fused_activation_function": act}, version=5)
    b.mark_output(y)
    return b.build()


def blockwise_lookup(rows, cols, block, n, *, bits=4, seed=0):
    rng = np.random.default_rng(seed)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    b = ModelBuilder()
    ids = b.add_input("ids", np.int32, [n])
    table = b.add_blockwise_const("table", rng.integers(lo, hi + 1, (rows, cols)),
                                  rng.uniform(0.001, 2.0, (rows, cols // block)).astype(np.float16), block,
                                  "INT4" if bits == 4 else "INT2")
    y = b.add_tensor("y", np.float32, [n, cols])
    b.add_op("EMBEDDING_LOOKUP", [ids, table], [y])
    b.mark_output(y)
    return b.build()


def assert_bits_equal(ours, ref):
    for o, r in zip(ours, ref):
        assert (o.dtype, o.shape) == (r.dtype, r.shape)
        diff = o.view(np.uint32) != r.view(np.uint32)
        assert not diff.any(), f"{int(diff.sum())} of {diff.size} differ, max {np.nanmax(np.abs(o - r))}"


# --- FULLY_CONNECTED ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("x_shape, units, block, bits, kw", [
    ((1, 64), 8, 32, 4, {}),  # one row, two blocks (EvalBlockwise4Bit)
    ((3, 128), 16, 32, 4, {"bias": False}),
    ((5, 256), 33, 64, 4, {"act": "RELU"}),  # the official 4-bit path applies no fused activation
    ((2, 3, 96), 4, 16, 4, {"keep": True}),
    ((4, 64), 6, 2, 4, {}),  # two values per block
    ((2, 66), 4, 33, 4, {}),  # odd blocks: a block boundary inside a byte
    ((2, 64), 2, 32, 4, {"act": "TANH"}),  # fewer than 4 units: the official hybrid path, act(bias)
    ((2, 16), 8, 8, 4, {}),  # depth below 32: the same
    ((3, 64), 8, 32, 2, {}),  # INT2: the same
    ((2, 128), 5, 64, 2, {"bias": False}),
])
def test_fully_connected(x_shape, units, block, bits, kw):
    model = blockwise_fc(x_shape, units, block, bits=bits, **kw)
    rng = np.random.default_rng(units)
    x = (rng.standard_normal(x_shape) * 3).astype(np.float32)
    assert_bits_equal(*run_both(model, [x]))


@pytest.mark.parametrize("x_shape, units, block, bias", [((1, 64), 48, 32, True), ((9, 128), 33, 64, False),
                                                        ((5, 96), 16, 8, True), ((2, 3, 256), 70, 32, True)])
def test_fully_connected_4bit_tiles(x_shape, units, block, bias, isa_level):
    """The 4-bit path on the tiles of every ISA level (fc_int4: nibbles unpacked in registers; the portable level
    keeps fc_blockwise_4bit): one row (the 1-row tiles' split accumulators), row counts past the tile heights, odd
    unit counts (a last 16-unit panel, partial vectors), an all-zero row and a NaN, bit for bit."""
    model = blockwise_fc(x_shape, units, block, bias=bias, keep=len(x_shape) > 2, seed=units)
    x = (np.random.default_rng(units).standard_normal(x_shape) * 3).astype(np.float32)
    if x_shape[0] > 2:
        x[1] = 0
        x[2, 3] = np.nan
    assert_bits_equal(*run_both(model, [x]))


def test_fully_connected_minus_8_and_edge_inputs():
    """Every nibble 0x8 (-8, two's complement); an all-zero row, a NaN and an infinity in the input."""
    model = blockwise_fc((4, 64), 8, 32, w=np.full((8, 64), -8))
    x = np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)
    x[0] = 0
    x[2, 5] = np.nan
    x[3, 7] = np.inf
    assert_bits_equal(*run_both(model, [x]))


def test_fully_connected_large_block():
    """A block of 32768 products: the official int32 accumulator takes each product through float32 and rounds once
    the sum passes 2^24."""
    model = blockwise_fc((2, 32768), 4, 32768, w=np.full((4, 32768), -8), scales=np.full((4, 1), 0.01, np.float16))
    x = np.full((2, 32768), 5.0, np.float32)
    x[:, ::3] = -1.0
    assert_bits_equal(*run_both(model, [x]))


# --- EMBEDDING_LOOKUP ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rows, cols, block, n, bits", [(10, 64, 32, 4, 4), (7, 96, 2, 9, 4), (6, 64, 16, 5, 2)])
def test_embedding_lookup(rows, cols, block, n, bits):
    model = blockwise_lookup(rows, cols, block, n, bits=bits, seed=rows)
    ids = np.random.default_rng(rows).integers(0, rows, n).astype(np.int32)
    assert_bits_equal(*run_both(model, [ids]))


def test_embedding_lookup_index_out_of_range():
    with pytest.raises(Exception, match="EMBEDDING_LOOKUP: index out of range"):
        run_ours(blockwise_lookup(4, 32, 32, 2), [np.array([1, 4], np.int32)])


# --- the litert-torch decoders ------------------------------------------------------------------------------------

def test_decoder_wi4b32():
    """Within 1e-6 relative of the recorded builtin output (the model's SOFTMAX differs from the official by an ulp,
    which carries on); every FULLY_CONNECTED of the model, its weights and the input the official runtime gave it
    taken into a one-op model, bit-exact with the official node's output."""
    path = LITERT_TORCH / "decoder_dynamic_wi4b32_afp32.tflite"
    data = np.load(LITERT_TORCH / "decoder_dynamic_wi4b32_afp32.npz")
    ours = run_ours(path, [data["in_0"]])[0]
    ref = data["builtin_0"]
    assert np.abs(ours - ref).max() <= 1e-6 * np.abs(ref).max()
    theirs = official_interpreter(path, experimental_preserve_all_tensors=True)
    theirs.set_tensor(theirs.get_input_details()[0]["index"], data["in_0"])
    theirs.invoke()
    sg = load_model(path.read_bytes()).subgraphs[0]
    nodes = [n for n in sg.nodes if n.op_name == "FULLY_CONNECTED"]
    assert len(nodes) == 11
    for node in nodes:
        x = theirs.get_tensor(node.inputs[0])
        w = sg.tensors[node.inputs[1]]
        b = ModelBuilder()
        ins = [b.add_input("x", np.float32, list(x.shape)),
               b.add_blockwise_const("w", theirs.get_tensor(w.index), w.quantization.block_scales,
                                     w.quantization.block_size)]
        if len(node.inputs) > 2 and node.inputs[2] >= 0:
            ins.append(b.add_const("bias", sg.tensors[node.inputs[2]].data))
        expect = theirs.get_tensor(node.outputs[0])
        y = b.add_tensor("y", np.float32, list(expect.shape))
        b.add_op("FULLY_CONNECTED", ins, [y], {k: v for k, v in node.options.items()
                                               if k in ("keep_num_dims", "fused_activation_function")}, version=5)
        b.mark_output(y)
        assert_bits_equal(run_ours(b.build(), [x]), [expect])
    # the weights read back as the official get_tensor gives them (unpacked), their details with the block scales
    from lite_numba import Interpreter

    mine = Interpreter(model_path=str(path))
    wi = nodes[0].inputs[1]
    np.testing.assert_array_equal(mine.get_tensor(wi), theirs.get_tensor(wi))
    qa = theirs.get_tensor_details()[wi]["quantization_parameters"]
    qb = mine.get_tensor_details()[wi]["quantization_parameters"]
    assert qa["block_size"] == qb["block_size"] == 32
    np.testing.assert_array_equal(qa["scales"], qb["scales"])
    assert qa["scales"].dtype == qb["scales"].dtype


def test_decoder_wi2b32():
    """The official kernels give INT2 blockwise FULLY_CONNECTED weights no scale (module doc of fc_blockwise): the
    recorded output is all zeros, and so is ours."""
    data = np.load(LITERT_TORCH / "decoder_dynamic_wi2b32_afp32.npz")
    ours = run_ours(LITERT_TORCH / "decoder_dynamic_wi2b32_afp32.tflite", [data["in_0"]])[0]
    assert_bits_equal([ours], [data["builtin_0"]])


# --- loading ------------------------------------------------------------------------------------------------------

def test_packed_storage():
    """Blockwise constants stay packed (the file's bytes, no copy); other INT4 / INT2 / UINT4 constants are widened
    at load, -8 and -2 decoded two's complement."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 64])
    v4 = np.arange(-8, 8).reshape(2, 8)
    i4 = b.add_packed_const("i4", v4, "INT4", quant={"scales": [0.5], "zero_points": [0]})
    i2 = b.add_packed_const("i2", np.array([[-2, -1, 0, 1, 1]]), "INT2", quant={"scales": [0.5], "zero_points": [0]})
    u4 = b.add_packed_const("u4", np.array([0, 15, 8]), "UINT4")
    w = b.add_blockwise_const("w", np.full((4, 64), -8), np.ones((4, 2), np.float16), 32)
    y = b.add_tensor("y", np.float32, [1, 4])
    b.add_op("FULLY_CONNECTED", [x, w], [y], version=5)
    b.mark_output(y)
    tensors = load_model(b.build()).subgraphs[0].tensors
    np.testing.assert_array_equal(tensors[i4].data, v4)
    np.testing.assert_array_equal(tensors[i2].data, [[-2, -1, 0, 1, 1]])
    np.testing.assert_array_equal(tensors[u4].data, [0, 15, 8])
    t = tensors[w]
    assert (t.type_name, t.shape, t.packed_bits, t.data.dtype, t.data.shape) == ("INT4", (4, 64), 4, np.uint8, (128,))
    assert (t.data == 0x88).all() and t.quantization.block_size == 32 and t.quantization.block_scales.shape == (4, 2)


def _bad_fc(*, block=32, scales_shape=(8, 2), scales_dtype=np.float16, declared=None, zero_points=None, bits=4):
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 64])
    s = b.add_const("w/scales", np.full(scales_shape, 0.1, scales_dtype))
    z = -1 if zero_points is None else b.add_const("w/zp", np.asarray(zero_points, np.int32))
    w = b.add_packed_const("w", np.ones((8, 64), np.int64), "INT4" if bits == 4 else "INT2", shape=declared,
                           quant={"blockwise": {"scales": s, "zero_points": z, "block_size": block}})
    y = b.add_tensor("y", np.float32, [1, 8])
    b.add_op("FULLY_CONNECTED", [x, w], [y], version=5)
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("model, match", [
    (lambda: _bad_fc(block=24), r"input 1 of operator 0 \(FULLY_CONNECTED\).*"
                                r"BlockwiseQuantization.block_size 24 does not divide dimension 1"),
    (lambda: _bad_fc(block=0), r"FULLY_CONNECTED.*BlockwiseQuantization.block_size is 0"),
    (lambda: _bad_fc(scales_shape=(8, 4)), r"FULLY_CONNECTED.*BlockwiseQuantization.scales tensor 1 \('w/scales'\) "
                                           r"has shape \[8, 4\], expected \[8, 2\]"),
    (lambda: _bad_fc(scales_dtype=np.float32), r"FULLY_CONNECTED.*BlockwiseQuantization.scales .* has type FLOAT32, "
                                               r"expected FLOAT16"),
    (lambda: _bad_fc(declared=(8, 96), scales_shape=(8, 3)), r"FULLY_CONNECTED.*INT4 data has 256 bytes, shape "
                                                             r"\[8, 96\] needs 384"),
    (lambda: _bad_fc(bits=2, declared=(8, 32), scales_shape=(8, 1)), r"INT2 data has 128 bytes, shape \[8, 32\] "
                                                                     r"needs 64"),
    (lambda: _bad_fc(zero_points=np.ones((8, 2))), r"BlockwiseQuantization.zero_points tensor .* holds nonzero"),
])
def test_errors(model, match):
    prepare_error(model(), match)


def test_errors_at_prepare():
    # an int8 activation with blockwise weights (the official kernel refuses non-affine weights there)
    b = ModelBuilder()
    x = b.add_input("x", np.int8, [1, 64], quant=(0.1, 0))
    w = b.add_blockwise_const("w", np.ones((8, 64), np.int64), np.ones((8, 2), np.float16), 32)
    y = b.add_tensor("y", np.int8, [1, 8], quant=(0.1, 0))
    b.add_op("FULLY_CONNECTED", [x, w], [y], version=5)
    b.mark_output(y)
    prepare_error(b.build(), r"FULLY_CONNECTED \(version 5, node 0\): weights 'w' \(INT4, blockwise block_size 32\) "
                             r"need float32 input")
    # a lookup table whose blocks do not start on a byte
    b = ModelBuilder()
    ids = b.add_input("ids", np.int32, [2])
    t = b.add_blockwise_const("t", np.ones((4, 9), np.int64), np.ones((4, 3), np.float16), 3)
    y = b.add_tensor("y", np.float32, [2, 9])
    b.add_op("EMBEDDING_LOOKUP", [ids, t], [y])
    b.mark_output(y)
    prepare_error(b.build(), r"EMBEDDING_LOOKUP .*block_size must be a multiple of 2")
    # a blockwise tensor read by an op that does not read blockwise quantization
    b = ModelBuilder()
    w = b.add_blockwise_const("w", np.ones((8, 64), np.int64), np.ones((8, 2), np.float16), 32)
    y = b.add_tensor("y", np.int8, [8, 64])
    b.add_op("RESHAPE", [w, b.add_const("shape", np.array([8, 64], np.int32))], [y])
    b.mark_output(y)
    prepare_error(b.build(), r"tensor 1 \('w'\) is blockwise quantized \(INT4\) but is input 0 of operator 0 "
                             r"\(RESHAPE\)")


# --- memory -------------------------------------------------------------------------------------------------------

_RSS_CHILD = """
import gc, json, sys
from lite_numba import Interpreter
def memory():  # resident and peak resident (high-water mark) of this process, bytes
    with open("/proc/self/status") as f:
        d = dict(line.split(":", 1) for line in f)
    return int(d["VmRSS"].split()[0]) * 1024, int(d["VmHWM"].split()[0]) * 1024
it = Interpreter(model_path=sys.argv[1]); it.allocate_tensors(); it.invoke()  # compiles or loads the kernels
del it
gc.collect()
with open("/proc/self/clear_refs", "w") as f:  # the high-water mark starts again from the resident size
    f.write("5")
before = memory()
it = Interpreter(model_path=sys.argv[1]); it.allocate_tensors()
after = memory()
print(json.dumps({"resident": after[0] - before[0], "peak": after[1] - before[1]}))
"""


@pytest.mark.xfail(strict=True, reason="since 1fa3a56 the int8 twin reads its weights where the model file is mapped "
                   "(allocate grows by 16.9 MB, was 47.1), while the INT4 blockwise layer still keeps its own "
                   "copies (32.5 MB, unchanged): reading blockwise weights in place is issue 39's open item")
def test_peak_rss_int4_not_above_int8(tmp_path):
    """An FC with 4096 x 4096 blockwise INT4 weights (8 MiB packed) against its twin with per-channel int8 weights
    (16 MiB): the growth of resident and peak memory in allocate_tensors() of a fresh process, the second time it
    loads the model (the first compiled or loaded the kernels)."""
    rng = np.random.default_rng(0)
    n = k = 4096

    def model(int4: bool) -> str:
        b = ModelBuilder()
        x = b.add_input("x", np.float32, [1, k])
        if int4:
            w = b.add_blockwise_const("w", rng.integers(-8, 8, (n, k)),
                                      rng.uniform(0.01, 0.1, (n, k // 32)).astype(np.float16), 32)
        else:
            w = b.add_const("w", rng.integers(-127, 128, (n, k)).astype(np.int8),
                            quant={"scales": rng.uniform(0.01, 0.1, n), "zero_points": np.zeros(n, np.int64)})
        y = b.add_tensor("y", np.float32, [1, n])
        b.add_op("FULLY_CONNECTED", [x, w], [y], version=5 if int4 else 12)
        b.mark_output(y)
        path = tmp_path / f"{'int4' if int4 else 'int8'}.tflite"
        path.write_bytes(b.build())
        return str(path)

    growth = {}
    for int4 in (True, False):
        out = subprocess.run([sys.executable, "-c", _RSS_CHILD, model(int4)], check=True, capture_output=True,
                             text=True)
        growth[int4] = json.loads(out.stdout.strip().splitlines()[-1])
    assert growth[True]["peak"] <= growth[False]["peak"], growth
    assert growth[True]["resident"] <= growth[False]["resident"], growth


def test_4bit_tiles_generic_twins(monkeypatch):
    """The generic-IR twin of the 256-bit vpmaddubsw + vpmaddwd INT4 tiles (what NEON compiles) compiled on this
    machine gives the bytes of the portable kernel (the vpdpbusd twin is test_simd_int8's)."""
    from lite_numba.kernels.base.hybrid_quant import quantize_rows
    from lite_numba.kernels.linear import fc_blockwise, fc_int4, simd_int8_narrow
    from numba import njit

    monkeypatch.setattr(simd_int8_narrow, "GENERIC", True)
    rng = np.random.default_rng(3)
    M, K, N, bs = 5, 96, 21, 32
    packed = rng.integers(0, 256, N * K // 2).astype(np.uint8)
    scales = rng.uniform(0.005, 0.1, N * K // bs).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    x = (rng.standard_normal(M * K) * 3).astype(np.float32)
    q, sf, zp = np.zeros(M * K, np.int8), np.zeros(M, np.float32), np.zeros(M, np.int32)
    quantize_rows(x, M, K, True, q, sf, zp)
    ref = np.zeros(M * N, np.float32)
    fc_blockwise.fc_blockwise_4bit(q, np.zeros(M * K, np.float32), zp, sf, packed, scales, bias, 1, ref, M, K, N, bs,
                                   1, np.zeros(K, np.float32), np.zeros(K // 2, np.float32),
                                   np.zeros(K // bs, np.float32), np.ones(K, np.float32))
    wq, st, kf = fc_int4.prepare_int4(packed, scales, N, K, bs)
    for driver in (fc_int4.fc_int4_maddubs,):
        out = np.zeros(M * N, np.float32)
        njit(driver.py_func)(x, wq, st, kf, bias, out, np.array([M, K, N, bs, 1, 0, M, 0, N], np.int64),
                             np.zeros((4, K), np.int8), np.zeros(4 * K // bs, np.int32), np.zeros(4, np.float32),
                             np.zeros(4, np.float32), np.zeros(kf.size, np.float32), np.zeros(K, np.int8))
        assert np.array_equal(out.view(np.uint32), ref.view(np.uint32)), driver.__name__
