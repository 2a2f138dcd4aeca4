"""Per-op debugging: with experimental_preserve_all_tensors=True every intermediate tensor stays readable through
get_tensor, and equals the official runtime's (same flag, builtin kernels without delegates) on the stored inputs.

Tolerances are those of the model parity tests (lite_numba.testing.assert_close): floats by op family ("model" for
the intermediates of a whole network, "accumulation" otherwise), integers and booleans exact.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import MODELS as MODEL_DIR
from conftest import model_path

from lite_numba import Interpreter
from lite_numba.testing import assert_close, official_interpreter

# float and int8 models with several ops whose kernels exist (checked with scripts/parity.py)
# model -> float tolerance family of lite_numba.testing.TOLERANCES (integers are always exact)
CASES = {
    "small_cnn_f32": "model",  # CONV_2D, DEPTHWISE_CONV_2D, ADD, CONCATENATION, pools, MEAN, FC, SOFTMAX
    "small_cnn_int8": "model",  # the same network, full int8
    "op_softmax_1000_flat_int8": "accumulation",  # int8 MUL + SOFTMAX
    "op_strided_slice_masks_int8": "accumulation",  # int8 RESHAPE + STRIDED_SLICE x2
    "op_compare_logical": "accumulation",  # comparisons, logical ops, ROUND, CAST, ADD: bool/float/int intermediates
    "op_shape_fill_range_dynamic": "accumulation",  # SHAPE, FILL, RANGE ...: dynamic (host) nodes
    "op_embedding_lookup": "accumulation",  # LESS, ADD, SELECT, GATHER on int32 indices
}


def _compare(name: str, k: int, ours: np.ndarray, ref: np.ndarray, family: str) -> None:
    assert_close(ours, ref, family=family, what=f"{name} tensor {k}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_intermediates_equal_official(official, name):
    path = str(model_path(name))
    stored = np.load(MODEL_DIR / "ref" / f"{name}.npz")
    ours = Interpreter(model_path=path, experimental_preserve_all_tensors=True)
    ref = official_interpreter(path, num_threads=None, allocate=False, experimental_preserve_all_tensors=True)
    ours.allocate_tensors()
    ref.allocate_tensors()
    for k, (d, rd) in enumerate(zip(ours.get_input_details(), ref.get_input_details())):
        ours.set_tensor(d["index"], stored[f"input_{k}"])
        ref.set_tensor(rd["index"], stored[f"input_{k}"])
    ours.invoke()
    ref.invoke()
    produced = [o for n in ours.model.subgraphs[0].nodes for o in n.outputs if o >= 0]
    assert len(produced) >= 2
    for i in produced:
        _compare(name, i, ours.get_tensor(i), ref.get_tensor(i), CASES[name])
    for i in range(len(ours.get_tensor_details())):  # every tensor stays readable
        ours.get_tensor(i)


def test_preserving_disables_memory_reuse():
    path = str(model_path("small_cnn_f32"))
    plain = Interpreter(model_path=path)
    keep = Interpreter(model_path=path, experimental_preserve_all_tensors=True)
    plain.allocate_tensors()
    keep.allocate_tensors()
    activations = sum(t.nbytes for t in keep.runtime.graph(0).tensors if not t.is_const)
    assert keep.arena_size >= activations > plain.arena_size
