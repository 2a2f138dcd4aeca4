"""RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR against the official runtime (optimized builtin kernels).

Every path is bit-exact: float32 (2x halving special case and the general weighted sum), uint8 (float weights,
+0.5 truncation, and the x8 half-pixel special case), int8/int16 (integer 10-bit interpolation), nearest neighbour
(16.16 fixed point for 8-bit types, float positions otherwise).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import kernel_names, scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import require_official, run_official, run_ours

require_official()


def assert_same(data: bytes, inputs: list[np.ndarray]) -> None:
    (o,), (r,) = run_ours(data, inputs), run_official(data, inputs)
    assert o.dtype == r.dtype and o.shape == r.shape, (o.dtype, o.shape, r.dtype, r.shape)
    if o.dtype.kind == "f":
        assert np.array_equal(o, r), f"max abs diff {np.max(np.abs(o - r))}"
    else:
        diff = np.abs(o.astype(np.int64) - r.astype(np.int64))
        assert np.array_equal(o, r), f"{np.count_nonzero(diff)} of {diff.size} differ, max step {diff.max()}"


QUANT = {np.dtype(np.int8): (0.05, -3), np.dtype(np.uint8): (0.05, 120), np.dtype(np.int16): (0.01, 0)}


def resize_model(op: str, dtype, in_shape, size, align=False, half=False, const_size=True) -> bytes:
    dtype = np.dtype(dtype)
    b = ModelBuilder()
    q = QUANT.get(dtype)
    x = b.add_input("x", dtype, in_shape, quant=q)
    s = b.add_const("size", np.array(size, np.int32)) if const_size else b.add_input("size", np.int32, [2])
    y = b.add_tensor("y", dtype, [in_shape[0], size[0], size[1], in_shape[3]], quant=q)
    version = 4 if dtype == np.int16 else 3 if (half or (align and op != "RESIZE_BILINEAR")) \
        else 2 if dtype == np.int8 else 1
    b.add_op(op, [x, s], [y], options={"align_corners": align, "half_pixel_centers": half}, version=version)
    b.mark_output(y)
    return b.build()


def random_data(rng, dtype, shape) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return (rng.normal(size=shape) * 4).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, size=shape, dtype=np.int64).astype(dtype)


MODES = st.sampled_from([(False, False), (True, False), (False, True)])


@settings(max_examples=scaled(25), deadline=None)
@given(st.sampled_from([np.float32, np.uint8, np.int8, np.int16]), st.integers(1, 2), st.integers(1, 6),
       st.integers(1, 6), st.integers(1, 4), st.integers(1, 13), st.integers(1, 13), MODES, st.integers(0, 2**31))
def test_resize_bilinear(dtype, batch, h, w, c, oh, ow, mode, seed):
    rng = np.random.default_rng(seed)
    data = resize_model("RESIZE_BILINEAR", dtype, [batch, h, w, c], [oh, ow], *mode)
    assert_same(data, [random_data(rng, dtype, [batch, h, w, c])])


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int8, np.int16])
@pytest.mark.parametrize("shape,size,mode", [
    ([1, 3, 5, 2], [6, 10], (False, False)),  # float32 2x halving path
    ([2, 2, 3, 8], [16, 24], (False, True)),  # uint8 x8 half-pixel special case
    ([1, 2, 2, 16], [16, 16], (False, True)),
    ([1, 7, 9, 3], [3, 4], (True, False)),  # downsampling
    ([1, 1, 1, 2], [1, 5], (True, False)),
])
def test_resize_bilinear_special_cases(dtype, shape, size, mode):
    rng = np.random.default_rng(7)
    assert_same(resize_model("RESIZE_BILINEAR", dtype, shape, size, *mode), [random_data(rng, dtype, shape)])


@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
@pytest.mark.parametrize("shape,size,mode", [
    ([1, 9, 7, 8], [18, 14], (False, False)),  # the float 2x halving kernel: bands of input rows
    ([2, 5, 6, 3], [10, 12], (False, False)),
    ([1, 6, 5, 16], [13, 11], (False, True)),  # the weighted kernel: bands of output rows
    ([3, 4, 4, 5], [7, 9], (True, False)),
])
def test_resize_bilinear_two_threads(dtype, shape, size, mode, monkeypatch):
    """num_threads = 2 with every output split (threads.MIN_ELEMENTS = 0): the official bytes, as one thread."""
    from lite_numba.kernels.base import threads

    monkeypatch.setattr(threads, "MIN_ELEMENTS", 0)
    data = resize_model("RESIZE_BILINEAR", dtype, shape, size, *mode)
    x = random_data(np.random.default_rng(11), dtype, shape)
    it = Interpreter(model_content=data, num_threads=2)
    it.allocate_tensors()
    calls = kernel_names(it)
    assert calls & {"bilinear_2x2_par", "bilinear_float_par"}, calls
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    ours = it.get_tensor(it.get_output_details()[0]["index"])
    (r,) = run_official(data, [x])
    assert np.array_equal(ours, r)
    (one,) = run_ours(data, [x])
    assert one.tobytes() == ours.tobytes()


def test_resize_bilinear_integer_rounding_ties():
    # a 2x upsample puts outputs half way between odd-difference neighbours: exact .5 ties at 2^20, which the
    # optimized kernel rounds half away from zero (not half up)
    for dtype in (np.int8, np.int16):
        x = np.array([-3, -4, -1, -6, 3, 0], dtype).reshape(1, 1, 6, 1)
        assert_same(resize_model("RESIZE_BILINEAR", dtype, [1, 1, 6, 1], [1, 12]), [x])


@settings(max_examples=scaled(25), deadline=None)
@given(st.sampled_from([np.float32, np.uint8, np.int8, np.int16, np.int32]), st.integers(1, 2), st.integers(1, 7),
       st.integers(1, 7), st.integers(1, 3), st.integers(1, 15), st.integers(1, 15),
       st.sampled_from([(False, False), (True, False), (False, True), (True, True)]), st.integers(0, 2**31))
def test_resize_nearest(dtype, batch, h, w, c, oh, ow, mode, seed):
    rng = np.random.default_rng(seed)
    data = resize_model("RESIZE_NEAREST_NEIGHBOR", dtype, [batch, h, w, c], [oh, ow], *mode)
    assert_same(data, [random_data(rng, dtype, [batch, h, w, c])])


def test_runtime_size():
    """The size tensor is a model input: the node is prepared at invoke time, each invoke with its own size."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(1, 3, 4, 2)).astype(np.float32)
    for op in ("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"):
        data = resize_model(op, np.float32, [1, 3, 4, 2], [5, 7], half=True, const_size=False)
        it = Interpreter(model_content=data)
        it.allocate_tensors()
        for size in ([5, 7], [2, 9], [6, 8]):
            s = np.array(size, np.int32)
            it.set_tensor(0, x)
            it.set_tensor(1, s)
            it.invoke()
            got = it.get_tensor(it.get_output_details()[0]["index"])
            ref = run_official(data, [x, s])[0]
            assert got.shape == ref.shape and np.array_equal(got, ref), (op, size)


def _prepare(data: bytes):
    Interpreter(model_content=data).allocate_tensors()


def test_errors():
    with pytest.raises((ValueError, RuntimeError), match="RESIZE_BILINEAR.*align_corners must be False"):
        _prepare(resize_model("RESIZE_BILINEAR", np.float32, [1, 2, 2, 1], [4, 4], align=True, half=True))
    with pytest.raises((ValueError, RuntimeError), match="RESIZE_BILINEAR.*positive"):
        _prepare(resize_model("RESIZE_BILINEAR", np.float32, [1, 2, 2, 1], [0, 4]))
    with pytest.raises((ValueError, RuntimeError), match="RESIZE_BILINEAR.*int32"):
        _prepare(resize_model("RESIZE_BILINEAR", np.int32, [1, 2, 2, 1], [4, 4]))
    with pytest.raises((ValueError, RuntimeError), match="RESIZE_NEAREST_NEIGHBOR.*int64"):
        _prepare(resize_model("RESIZE_NEAREST_NEIGHBOR", np.int64, [1, 2, 2, 1], [4, 4]))
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 2, 1])
    s = b.add_const("size", np.array([4, 4, 1], np.int32))
    y = b.add_tensor("y", np.float32, [4, 4, 1])
    b.add_op("RESIZE_NEAREST_NEIGHBOR", [x, s], [y])
    b.mark_output(y)
    with pytest.raises((ValueError, RuntimeError), match="RESIZE_NEAREST_NEIGHBOR.*4-D"):
        _prepare(b.build())
