"""DEPTH_TO_SPACE, SPACE_TO_DEPTH, SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND against the official runtime.

Pure data movement: every result must be bit-exact (including the zero-point padding of quantized SPACE_TO_BATCH_ND).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import require_official, run_official, run_ours

require_official()


def assert_same(data: bytes, inputs: list[np.ndarray]) -> None:
    ours, ref = run_ours(data, inputs), run_official(data, inputs)
    assert len(ours) == len(ref)
    for o, r in zip(ours, ref):
        assert o.dtype == r.dtype and o.shape == r.shape, (o.dtype, o.shape, r.dtype, r.shape)
        assert np.array_equal(o, r), (o, r)


def random_data(rng, dtype, shape) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.normal(size=shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, size=shape, dtype=np.int64).astype(dtype)


QUANT = {np.dtype(np.int8): (0.05, -7), np.dtype(np.uint8): (0.05, 131), np.dtype(np.int16): (0.01, 0)}


def quant(dtype):
    return QUANT.get(np.dtype(dtype))


def block_model(op: str, dtype, in_shape, out_shape, bs: int, version: int = 1) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", dtype, in_shape, quant=quant(dtype))
    y = b.add_tensor("y", dtype, out_shape, quant=quant(dtype))
    b.add_op(op, [x], [y], options={"block_size": bs}, version=version)
    b.mark_output(y)
    return b.build()


BLOCK_TYPES = [np.float32, np.int8, np.uint8, np.int32, np.int64]


@settings(max_examples=scaled(20), deadline=None)
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 3), st.integers(1, 4), st.integers(1, 3),
       st.sampled_from(BLOCK_TYPES), st.integers(0, 2**31))
def test_depth_to_space(batch, h, w, oc, bs, dtype, seed):
    rng = np.random.default_rng(seed)
    in_shape = [batch, h, w, oc * bs * bs]
    data = block_model("DEPTH_TO_SPACE", dtype, in_shape, [batch, h * bs, w * bs, oc], bs,
                       version=2 if dtype == np.int8 else 1)
    assert_same(data, [random_data(rng, dtype, in_shape)])


@settings(max_examples=scaled(20), deadline=None)
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 3), st.integers(1, 4), st.integers(1, 3),
       st.sampled_from(BLOCK_TYPES), st.integers(0, 2**31))
def test_space_to_depth(batch, oh, ow, c, bs, dtype, seed):
    rng = np.random.default_rng(seed)
    in_shape = [batch, oh * bs, ow * bs, c]
    data = block_model("SPACE_TO_DEPTH", dtype, in_shape, [batch, oh, ow, c * bs * bs], bs,
                       version=2 if dtype == np.int8 else 1)
    assert_same(data, [random_data(rng, dtype, in_shape)])


def batch_model(op: str, dtype, in_shape, block, pads, out_shape, const_params: bool = True) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", dtype, in_shape, quant=quant(dtype))
    block = np.array(block, np.int32)
    pads = np.array(pads, np.int32).reshape(-1, 2)
    if const_params:
        bt, pt = b.add_const("block", block), b.add_const("pads", pads)
    else:
        bt, pt = b.add_input("block", np.int32, list(block.shape)), b.add_input("pads", np.int32, list(pads.shape))
    y = b.add_tensor("y", dtype, out_shape, quant=quant(dtype))
    version = 4 if dtype == np.int16 else 3 if len(in_shape) != 4 else 2 if dtype == np.int8 else 1
    b.add_op(op, [x, bt, pt], [y], version=version)
    b.mark_output(y)
    return b.build()


BATCH_TYPES = [np.float32, np.int8, np.uint8, np.int16, np.int64]


@st.composite
def space_to_batch_cases(draw):
    rank = draw(st.sampled_from([3, 4]))
    spatial = rank - 2
    batch = draw(st.integers(1, 2))
    block, pads, in_sp, out_sp = [], [], [], []
    for _ in range(spatial):
        bsz = draw(st.integers(1, 3))
        out = draw(st.integers(1, 3))
        total = out * bsz
        before = draw(st.integers(0, min(2, total - 1)))
        after = draw(st.integers(0, min(2, total - 1 - before)))
        block.append(bsz)
        pads.append([before, after])
        in_sp.append(total - before - after)
        out_sp.append(out)
    depth = draw(st.integers(1, 3))
    dtype = draw(st.sampled_from(BATCH_TYPES))
    nblocks = int(np.prod(block))
    return dtype, [batch, *in_sp, depth], block, pads, [batch * nblocks, *out_sp, depth]


@settings(max_examples=scaled(25), deadline=None)
@given(space_to_batch_cases(), st.integers(0, 2**31))
def test_space_to_batch_nd(case, seed):
    dtype, in_shape, block, pads, out_shape = case
    rng = np.random.default_rng(seed)
    data = batch_model("SPACE_TO_BATCH_ND", dtype, in_shape, block, pads, out_shape)
    assert_same(data, [random_data(rng, dtype, in_shape)])


@settings(max_examples=scaled(25), deadline=None)
@given(space_to_batch_cases(), st.integers(0, 2**31))
def test_batch_to_space_nd(case, seed):
    # the inverse geometry: space_to_batch's output shape is the input, its paddings are the crops
    dtype, out_shape, block, crops, in_shape = case
    rng = np.random.default_rng(seed)
    data = batch_model("BATCH_TO_SPACE_ND", dtype, in_shape, block, crops, out_shape)
    assert_same(data, [random_data(rng, dtype, in_shape)])


def test_round_trip_runtime_params():
    """Block shape and paddings fed at run time: the nodes are prepared at invoke time (dynamic outputs)."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 5, 4, 3)).astype(np.float32)
    block, pads = np.array([2, 3], np.int32), np.array([[1, 0], [1, 1]], np.int32)
    data = batch_model("SPACE_TO_BATCH_ND", np.float32, [2, 5, 4, 3], [2, 3], [[1, 0], [1, 1]], [12, 3, 2, 3],
                       const_params=False)
    assert_same(data, [x, block, pads])
    data = batch_model("BATCH_TO_SPACE_ND", np.float32, [12, 3, 2, 3], [2, 3], [[1, 0], [1, 1]], [2, 5, 4, 3],
                       const_params=False)
    y = rng.normal(size=(12, 3, 2, 3)).astype(np.float32)
    assert_same(data, [y, block, pads])
    # other runtime values on the same interpreter change the output shape
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    for block2, crops2 in (([2, 3], [[0, 0], [0, 0]]), ([3, 2], [[2, 1], [0, 3]])):
        b2, c2 = np.array(block2, np.int32), np.array(crops2, np.int32)
        it.set_tensor(0, y)
        it.set_tensor(1, b2)
        it.set_tensor(2, c2)
        it.invoke()
        ref = run_official(data, [y, b2, c2])[0]
        got = it.get_tensor(it.get_output_details()[0]["index"])
        assert got.shape == ref.shape and np.array_equal(got, ref)


def test_batch_resize_of_input():
    """resize_tensor_input + allocate_tensors re-prepares the static node with the new batch."""
    data = block_model("SPACE_TO_DEPTH", np.float32, [1, 4, 6, 2], [1, 2, 3, 8], 2)
    x = np.random.default_rng(3).normal(size=(3, 4, 6, 2)).astype(np.float32)
    assert_same(data, [x])


# --- errors ------------------------------------------------------------------------------------------------------

def _prepare(data: bytes):
    it = Interpreter(model_content=data)
    it.allocate_tensors()


def test_errors():
    with pytest.raises((ValueError, RuntimeError), match="DEPTH_TO_SPACE.*block_size"):
        _prepare(block_model("DEPTH_TO_SPACE", np.float32, [1, 2, 2, 4], [1, 4, 4, 1], 0))
    with pytest.raises((ValueError, RuntimeError), match="DEPTH_TO_SPACE.*multiple"):
        _prepare(block_model("DEPTH_TO_SPACE", np.float32, [1, 2, 2, 6], [1, 4, 4, 1], 2))
    with pytest.raises((ValueError, RuntimeError), match="SPACE_TO_DEPTH.*multiples"):
        _prepare(block_model("SPACE_TO_DEPTH", np.float32, [1, 3, 4, 1], [1, 1, 2, 4], 2))
    with pytest.raises((ValueError, RuntimeError), match="SPACE_TO_DEPTH.*int16"):
        _prepare(block_model("SPACE_TO_DEPTH", np.int16, [1, 2, 2, 1], [1, 1, 1, 4], 2))
    with pytest.raises((ValueError, RuntimeError), match="SPACE_TO_BATCH_ND.*multiple"):
        _prepare(batch_model("SPACE_TO_BATCH_ND", np.float32, [1, 5, 4, 1], [2, 2], [[0, 0], [0, 0]], [4, 2, 2, 1]))
    with pytest.raises((ValueError, RuntimeError), match="SPACE_TO_BATCH_ND.*block_shape must have shape"):
        _prepare(batch_model("SPACE_TO_BATCH_ND", np.float32, [1, 4, 4, 1], [2], [[0, 0]], [2, 2, 4, 1]))
    with pytest.raises((ValueError, RuntimeError), match="SPACE_TO_BATCH_ND.*positive"):
        _prepare(batch_model("SPACE_TO_BATCH_ND", np.float32, [1, 4, 4, 1], [2, 0], [[0, 0], [0, 0]], [1, 2, 2, 1]))
    with pytest.raises((ValueError, RuntimeError), match="BATCH_TO_SPACE_ND.*crops must be >= 0"):
        _prepare(batch_model("BATCH_TO_SPACE_ND", np.float32, [4, 2, 2, 1], [2, 2], [[0, -1], [0, 0]], [1, 4, 4, 1]))
    with pytest.raises((ValueError, RuntimeError), match="BATCH_TO_SPACE_ND.*batch 3"):
        _prepare(batch_model("BATCH_TO_SPACE_ND", np.float32, [3, 2, 2, 1], [2, 2], [[0, 0], [0, 0]], [1, 4, 4, 1]))
    with pytest.raises((ValueError, RuntimeError), match="BATCH_TO_SPACE_ND.*3-D or 4-D"):
        _prepare(batch_model("BATCH_TO_SPACE_ND", np.float32, [4, 2], [2], [[0, 0]], [2, 4]))
