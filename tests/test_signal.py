"""RFFT2D, COMPLEX_ABS, REAL, IMAG and DENSIFY against the official runtime."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import given, settings
from hypothesis import strategies as st
from lite_numba.kernels.base.sparsity import densify_values

import lite_numba
import lite_numba.format.builder as builder_mod  # where build() finds the tensor writer densify_model wraps
from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close, prepare_error, require_official, run_official, run_ours

require_official()


def rfft_model(shape, fft_length, *, const_length=True, parts=True):
    """RFFT2D followed by COMPLEX_ABS, REAL and IMAG of its result (all four are outputs)."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, shape)
    f = b.add_const("f", np.array(fft_length, np.int32)) if const_length else b.add_input("f", np.int32, [2])
    oshape = list(shape[:-2]) + [fft_length[0], fft_length[1] // 2 + 1]
    y = b.add_tensor("y", np.complex64, oshape)
    b.add_op("RFFT2D", [x, f], [y])
    b.mark_output(y)
    if parts:
        for op in ("COMPLEX_ABS", "REAL", "IMAG"):
            t = b.add_tensor(op.lower(), np.float32, oshape)
            b.add_op(op, [y], [t])
            b.mark_output(t)
    return b.build()


# (fft_length [., 1] is left out: the official kernel returns x - xj there, where the transform is x + 0j)
@settings(max_examples=scaled(20), deadline=None)
@given(batch=st.lists(st.integers(1, 3), min_size=0, max_size=2), h=st.integers(1, 20), w=st.integers(1, 20),
       fh=st.sampled_from([1, 2, 4, 8, 16, 32]), fw=st.sampled_from([2, 4, 8, 16, 32]), seed=st.integers(0, 2**16))
def test_rfft2d_and_parts(batch, h, w, fh, fw, seed):
    rng = np.random.default_rng(seed)
    shape = batch + [h, w]
    data = rfft_model(shape, [fh, fw])
    x = rng.standard_normal(shape).astype(np.float32)
    for ours, ref in zip(run_ours(data, [x]), run_official(data, [x])):
        assert_close(ours, ref, 1e-5)


def test_rfft2d_spectrogram_frames():
    """Many frames of one long row (fft_length [1, N], what a converted STFT gives, e.g. BirdNET): each row is a
    real FFT through a half-length complex FFT, and the column transforms of length 1 are skipped."""
    rng = np.random.default_rng(3)
    for n, w in ((2048, 2048), (1024, 1000), (512, 700)):  # input rows equal, shorter (zero-padded) and longer
        data = rfft_model([7, 1, w], [1, n])
        x = rng.standard_normal((7, 1, w)).astype(np.float32)
        for ours, ref in zip(run_ours(data, [x]), run_official(data, [x])):
            assert_close(ours, ref, 1e-6)


def test_rfft2d_runtime_fft_length():
    rng = np.random.default_rng(1)
    data = rfft_model([2, 5, 6], [8, 4], const_length=False, parts=False)
    inputs = [rng.standard_normal((2, 5, 6)).astype(np.float32), np.array([8, 4], np.int32)]
    assert_close(run_ours(data, inputs)[0], run_official(data, inputs)[0], 1e-5)


def test_complex128_parts():
    rng = np.random.default_rng(2)
    b = ModelBuilder()
    x = b.add_input("x", np.complex128, [3, 4])
    for op in ("COMPLEX_ABS", "REAL", "IMAG"):
        t = b.add_tensor(op.lower(), np.float64, [3, 4])
        b.add_op(op, [x], [t])
        b.mark_output(t)
    data = b.build()
    z = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex128)
    z[0, 0] = 3e300 + 4e300j  # |z| without overflow
    for ours, ref in zip(run_ours(data, [z]), run_official(data, [z])):
        assert_close(ours, ref, 1e-12)


def test_errors():
    assert "power" in prepare_error(rfft_model([4, 4], [4, 6], parts=False), "RFFT2D")
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [3])
    t = b.add_tensor("t", np.float32, [3])
    b.add_op("REAL", [x], [t])
    b.mark_output(t)
    assert "complex" in prepare_error(b.build(), "REAL")


# --- DENSIFY ----------------------------------------------------------------------------------------------------------

def encode_sparse(dense: np.ndarray, formats, order=None, block_map=(), block_size=()):
    """Encode `dense` in the schema's sparsity format: (values, sparsity dict). Levels follow `order` over the
    expanded dimensions (original dims, then one per blocked dim); `formats` gives DENSE (0) or SPARSE_CSR (1)."""
    expanded = dense
    rank = dense.ndim
    for d, bs in reversed(list(zip(block_map, block_size))):  # higher dims first: lower indices stay put
        shape = list(expanded.shape)
        shape[d:d + 1] = [shape[d] // bs, bs]
        expanded = expanded.reshape(shape)
    # move each block axis (right after its dim) to the end, in block_map order
    src = [d + 1 + i for i, d in enumerate(block_map)]
    expanded = np.moveaxis(expanded, src, list(range(rank, rank + len(block_map))))
    order = list(order) if order is not None else list(range(expanded.ndim))
    p = expanded.transpose(order)
    levels = p.ndim
    segments = [[0] for _ in range(levels)]
    indices = [[] for _ in range(levels)]
    values = []

    def visit(level, sub):
        if level == levels:
            values.append(sub[()])
            return
        for i in range(p.shape[level]):
            if formats[level] == 0:
                visit(level + 1, sub[i])
            elif np.any(sub[i] != 0):
                indices[level].append(i)
                visit(level + 1, sub[i])
        if formats[level] == 1:
            segments[level].append(len(indices[level]))

    visit(0, p)
    dims = []
    for lv in range(levels):
        dm = {"format": formats[lv], "dense_size": p.shape[lv]}
        if formats[lv] == 1:
            dm["segments"] = np.array(segments[lv], np.int64)
            dm["indices"] = np.array(indices[lv], np.int64)
        dims.append(dm)
    sparsity = {"traversal_order": order, "block_map": list(block_map), "dim_metadata": dims}
    return np.array(values, dense.dtype), sparsity


def _write_sparsity(fb, sp):
    import importlib

    dm_mod = importlib.import_module("tflite.DimensionMetadata")
    iv_mod = importlib.import_module("tflite.Int32Vector")
    sp_mod = importlib.import_module("tflite.SparsityParameters")

    def int32_vector(values):
        vec = fb.CreateNumpyVector(np.asarray(values, "<i4"))
        iv_mod.Int32VectorStart(fb)
        iv_mod.Int32VectorAddValues(fb, vec)
        return iv_mod.Int32VectorEnd(fb)

    dim_offsets = []
    for dm in sp["dim_metadata"]:
        seg = int32_vector(dm["segments"]) if dm["format"] == 1 else None
        idx = int32_vector(dm["indices"]) if dm["format"] == 1 else None
        dm_mod.DimensionMetadataStart(fb)
        dm_mod.DimensionMetadataAddFormat(fb, dm["format"])
        dm_mod.DimensionMetadataAddDenseSize(fb, dm["dense_size"])
        if seg is not None:
            dm_mod.DimensionMetadataAddArraySegmentsType(fb, 1)  # Int32Vector
            dm_mod.DimensionMetadataAddArraySegments(fb, seg)
            dm_mod.DimensionMetadataAddArrayIndicesType(fb, 1)
            dm_mod.DimensionMetadataAddArrayIndices(fb, idx)
        dim_offsets.append(dm_mod.DimensionMetadataEnd(fb))
    order = fb.CreateNumpyVector(np.asarray(sp["traversal_order"], "<i4"))
    bmap = fb.CreateNumpyVector(np.asarray(sp["block_map"], "<i4"))
    fb.StartVector(4, len(dim_offsets), 4)
    for off in reversed(dim_offsets):
        fb.PrependUOffsetTRelative(off)
    dims = fb.EndVector()
    sp_mod.SparsityParametersStart(fb)
    sp_mod.SparsityParametersAddTraversalOrder(fb, order)
    sp_mod.SparsityParametersAddBlockMap(fb, bmap)
    sp_mod.SparsityParametersAddDimMetadata(fb, dims)
    return sp_mod.SparsityParametersEnd(fb)


def densify_model(monkeypatch, dense: np.ndarray, values: np.ndarray, sparsity: dict) -> bytes:
    """x + DENSIFY(sparse constant): the builder cannot write sparsity, so its tensor writer is wrapped here."""
    import importlib

    tensor_mod = importlib.import_module("tflite.Tensor")
    original = builder_mod._write_tensor

    def write_tensor(fb, t):
        if t.name != "sparse":
            return original(fb, t)
        sp = _write_sparsity(fb, sparsity)
        shape = fb.CreateNumpyVector(np.asarray(t.shape, "<i4"))
        name = fb.CreateString(t.name)
        tensor_mod.TensorStart(fb)
        tensor_mod.TensorAddShape(fb, shape)
        tensor_mod.TensorAddType(fb, builder_mod.numpy_to_tensor_type(t.dtype))
        tensor_mod.TensorAddBuffer(fb, t.buffer)
        tensor_mod.TensorAddName(fb, name)
        tensor_mod.TensorAddSparsity(fb, sp)
        return tensor_mod.TensorEnd(fb)

    monkeypatch.setattr(builder_mod, "_write_tensor", write_tensor)
    b = ModelBuilder()
    x = b.add_input("x", dense.dtype, list(dense.shape))
    buf = b._add_buffer(np.ascontiguousarray(values).tobytes())
    s = b.main._add("sparse", dense.dtype, list(dense.shape), buf, None, None, False)
    d = b.add_tensor("dense", dense.dtype, list(dense.shape))
    y = b.add_tensor("y", dense.dtype, list(dense.shape))
    b.add_op("DENSIFY", [s], [d])
    b.add_op("ADD", [x, d], [y])
    b.mark_output(y)
    data = b.build()
    monkeypatch.setattr(builder_mod, "_write_tensor", original)
    return data


def _sparse_dense(rng, shape, density=0.3, dtype=np.float32):
    a = rng.standard_normal(shape).astype(dtype)
    a[rng.random(shape) > density] = 0
    return a


SPARSE_CASES = [
    # (dense shape, formats, traversal order, block_map, block_size)
    ((5, 8), [0, 1], None, (), ()),
    ((4, 16), [0, 1, 0], None, (1,), (4,)),
    ((3, 4, 6), [0, 1, 1], [1, 0, 2], (), ()),
    ((6, 8), [1, 1, 0, 0], None, (0, 1), (2, 4)),
]


@pytest.mark.parametrize("shape, formats, order, block_map, block_size", SPARSE_CASES)
def test_densify(monkeypatch, shape, formats, order, block_map, block_size):
    rng = np.random.default_rng(3)
    dense = _sparse_dense(rng, shape)
    if block_map:  # zero whole blocks so the block format is meaningful
        dense[: shape[0] // 2] = 0
    values, sparsity = encode_sparse(dense, formats, order, block_map, block_size)
    data = densify_model(monkeypatch, dense, values, sparsity)
    x = np.zeros(shape, np.float32)
    ref = run_official(data, [x])[0]
    np.testing.assert_array_equal(ref, dense)  # the encoder is right
    np.testing.assert_array_equal(densify_values(shape, sparsity, values), ref)
    it = lite_numba.Interpreter(model_content=data)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]), ref)


def test_densify_bad_metadata():
    rng = np.random.default_rng(4)
    dense = _sparse_dense(rng, (4, 6))
    values, sparsity = encode_sparse(dense, [0, 1])
    with pytest.raises(ValueError, match="values"):
        densify_values((4, 6), sparsity, values[:-1])
    sparsity["dim_metadata"][1]["indices"] = sparsity["dim_metadata"][1]["indices"] + 6
    with pytest.raises(ValueError, match="dimension 1"):
        densify_values((4, 6), sparsity, values)
    with pytest.raises(ValueError, match="traversal"):
        densify_values((4, 6), {"traversal_order": [0], "block_map": [], "dim_metadata": [{}]}, values)
