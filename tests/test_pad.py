"""PAD, PADV2 and MIRROR_PAD against the official runtime (bit-exact)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import check_same, require_official
from lite_numba.testing import random_array as rand

require_official()


def pad_version(dtype, rank):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return 5
    if rank > 4:
        return 4
    return {np.dtype(np.int16): 3, np.dtype(np.int8): 2}.get(dtype, 1)


def pad_model(op, dtype, shape, paddings, quant=None, value=None, value_quant=None, paddings_type=np.int32,
              runtime_paddings=False):
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape, quant=quant)
    if runtime_paddings:
        p = b.add_input("paddings", paddings_type, [len(shape), 2])
    else:
        p = b.add_const("paddings", np.array(paddings, paddings_type).reshape(len(shape), 2))
    ins = [x, p]
    if value is not None:
        ins.append(b.add_const("value", np.array(value, dtype), quant=value_quant))
    out_shape = [n + a + c for n, (a, c) in zip(shape, paddings)]
    y = b.add_tensor("y", dtype, out_shape, quant=quant)
    b.add_op(op, ins, [y], version=pad_version(dtype, len(shape)))
    b.mark_output(y)
    return b.build()


@settings(max_examples=scaled(25), deadline=None)
@given(st.data())
def test_pad(data):
    rank = data.draw(st.integers(1, 5))
    shape = data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    paddings = [(data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3))) for _ in range(rank)]
    dtype = data.draw(st.sampled_from([np.float32, np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_]))
    quant = None
    if dtype in (np.int8, np.uint8, np.int16) and data.draw(st.booleans()):
        zp = 0 if dtype == np.int16 else data.draw(st.integers(-20, 20)) + (128 if dtype == np.uint8 else 0)
        quant = (0.05, zp)
    paddings_type = data.draw(st.sampled_from([np.int32, np.int64]))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    check_same(pad_model("PAD", dtype, shape, paddings, quant, paddings_type=paddings_type),
               [rand(rng, dtype, shape)])


@settings(max_examples=scaled(25), deadline=None)
@given(st.data())
def test_padv2(data):
    rank = data.draw(st.integers(1, 4))
    shape = data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    paddings = [(data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3))) for _ in range(rank)]
    dtype = data.draw(st.sampled_from([np.float32, np.int8, np.int32, np.int64, np.bool_, np.uint8]))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    value = rand(rng, dtype, [])
    quant = value_quant = None
    if dtype in (np.int8, np.uint8) and data.draw(st.booleans()):
        quant = value_quant = (0.1, 3)  # the constant must be in the output's quantization
    check_same(pad_model("PADV2", dtype, shape, paddings, quant, value=value, value_quant=value_quant),
               [rand(rng, dtype, shape)])


def test_pad_runtime_paddings_and_scalar():
    rng = np.random.default_rng(0)
    x = rand(rng, np.float32, [2, 3])
    p = np.array([[1, 0], [2, 3]], np.int32)
    check_same(pad_model("PAD", np.float32, [2, 3], p.tolist(), runtime_paddings=True), [x, p])
    b = ModelBuilder()  # a 0-d input pads to itself
    xi = b.add_input("x", np.float32, [])
    y = b.add_tensor("y", np.float32, [])
    b.add_op("PAD", [xi, b.add_const("p", np.zeros((0, 2), np.int32))], [y])
    b.mark_output(y)
    check_same(b.build(), [np.array(2.5, np.float32)])


@pytest.mark.parametrize("kwargs, msg", [
    (dict(paddings=[(0, 0), (-1, 2)]), "must be non-negative"),
    (dict(paddings=[(0, 0), (1, 1)], dtype=np.int8, quant=(0.1, 0), value=1, value_quant=(0.2, 0)),
     "output's scale and zero point"),
])
def test_pad_errors(kwargs, msg):
    args = dict(op="PADV2" if "value" in kwargs else "PAD", dtype=np.float32, shape=[2, 3])
    args.update(kwargs)
    paddings = args.pop("paddings")
    data = pad_model(args.pop("op"), args.pop("dtype"), args.pop("shape"), paddings, **args)
    with pytest.raises((ValueError, RuntimeError), match=f"PAD.*{msg}"):
        Interpreter(model_content=data).allocate_tensors()


def mirror_model(dtype, shape, paddings, mode):
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape)
    p = b.add_const("paddings", np.array(paddings, np.int32).reshape(len(shape), 2))
    y = b.add_tensor("y", dtype, [n + a + c for n, (a, c) in zip(shape, paddings)])
    version = {np.dtype(np.int16): 3, np.dtype(np.int8): 2}.get(np.dtype(dtype), 1)
    b.add_op("MIRROR_PAD", [x, p], [y], options={"mode": mode}, version=version)
    b.mark_output(y)
    return b.build()


@settings(max_examples=scaled(25), deadline=None)
@given(st.data())
def test_mirror_pad(data):
    rank = data.draw(st.integers(1, 4))
    shape = data.draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank))
    mode = data.draw(st.sampled_from(["REFLECT", "SYMMETRIC"]))
    off = 1 if mode == "REFLECT" else 0
    paddings = [(data.draw(st.integers(0, n - off)), data.draw(st.integers(0, n - off))) for n in shape]
    dtype = data.draw(st.sampled_from([np.float32, np.int8, np.int16, np.int64]))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    check_same(mirror_model(dtype, shape, paddings, mode), [rand(rng, dtype, shape)])


@pytest.mark.parametrize("mode, paddings", [("REFLECT", [(0, 0), (3, 0)]), ("SYMMETRIC", [(4, 0), (0, 0)])])
def test_mirror_pad_too_large(mode, paddings):
    with pytest.raises((ValueError, RuntimeError), match="MIRROR_PAD.*exceed the input size"):
        Interpreter(model_content=mirror_model(np.float32, [3, 3], paddings, mode)).allocate_tensors()
