"""RANDOM_UNIFORM, RANDOM_STANDARD_NORMAL and MULTINOMIAL against the official runtime, bit for bit: the same seeds
give the same Philox streams, invoke after invoke (the generator advances inside the node), for odd sizes, run-time
shapes, several seeds, and multinomial rows with -inf / NaN logits."""

from __future__ import annotations

import numpy as np
import pytest

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import invoke_both, official_interpreter, require_official

require_official()


def compare_invokes(data, inputs, n_invokes=3):
    ours = Interpreter(model_content=data)
    ours.allocate_tensors()
    ref = official_interpreter(data)
    for d, x in zip(ref.get_input_details(), inputs):
        if tuple(d["shape"]) != x.shape:
            ref.resize_tensor_input(d["index"], list(x.shape))
            ref.allocate_tensors()
    for _ in range(n_invokes):
        (o, *_), (r, *_) = invoke_both(ours, ref, inputs)
        assert (o.dtype, o.shape) == (r.dtype, r.shape)
        assert o.tobytes() == r.tobytes()


def random_model(op, shape, seed, seed2, runtime_shape=False):
    b = ModelBuilder()
    if runtime_shape:
        s = b.add_input("shape", np.int32, [len(shape)])
    else:
        s = b.add_const("shape", np.array(shape, np.int32))
    y = b.add_tensor("y", np.float32, shape)
    b.add_op(op, [s], [y], options={"seed": seed, "seed2": seed2})
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("op", ["RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL"])
@pytest.mark.parametrize("seed,seed2", [(42, 7), (1, 0), (0, 123456789), (-5, 2 ** 40 + 3), (2 ** 33 + 1, -(2 ** 35))])
def test_random_streams(op, seed, seed2):
    compare_invokes(random_model(op, [3, 333], seed, seed2), [])


@pytest.mark.parametrize("op", ["RANDOM_UNIFORM", "RANDOM_STANDARD_NORMAL"])
def test_random_runtime_shape(op):
    shape = np.array([5, 7], np.int32)  # 35 values: an odd count
    compare_invokes(random_model(op, [5, 7], 9, 11, runtime_shape=True), [shape])


def test_random_unseeded_streams_differ():
    """seed == seed2 == 0: a non-deterministic stream (two interpreters disagree), as the official kernel."""
    data = random_model("RANDOM_UNIFORM", [64], 0, 0)
    outs = []
    for _ in range(2):
        it = Interpreter(model_content=data)
        it.allocate_tensors()
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]))
    assert outs[0].tobytes() != outs[1].tobytes()
    assert np.all((outs[0] >= 0) & (outs[0] < 1))


def multinomial_model(logits_shape, num_samples, out_type, seed, seed2):
    b = ModelBuilder()
    x = b.add_input("logits", np.float32, list(logits_shape))
    n = b.add_const("num_samples", np.array(num_samples, np.int32))
    y = b.add_tensor("y", out_type, [logits_shape[0], num_samples])
    b.add_op("MULTINOMIAL", [x, n], [y], options={"seed": seed, "seed2": seed2})
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("out_type,num_samples", [(np.int64, 10), (np.int32, 7), (np.int64, 1)])
def test_multinomial(out_type, num_samples):
    rng = np.random.default_rng(1)
    logits = (rng.standard_normal((4, 6)) * 2).astype(np.float32)
    logits[1, 2] = -np.inf
    logits[2, :] = [np.nan, 0.0, 5.0, -np.inf, 1.0, np.inf]
    logits[3, :] = -np.inf  # no finite logit: every sample is the class count
    compare_invokes(multinomial_model(logits.shape, num_samples, out_type, 17, 3), [logits])
