"""The plain-loop oracle, inputs and models the batch and scale-out tests share (test_batch, test_scaleout,
test_scaleout_examples). Not a test file."""

from __future__ import annotations

import numpy as np

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder


def plain_loop(model, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The oracle: one example per invoke, inputs by tensor name, outputs by tensor name, stacked."""
    it = Interpreter(model_path=str(model)) if not isinstance(model, bytes) else Interpreter(model_content=model)
    it.allocate_tensors()
    ins, outs = it.get_input_details(), it.get_output_details()
    n = len(next(iter(inputs.values())))
    res: dict[str, list] = {d["name"]: [] for d in outs}
    for k in range(n):
        for d in ins:
            it.set_tensor(d["index"], inputs[d["name"]][k].reshape(d["shape"]))
        it.invoke()
        for d in outs:
            res[d["name"]].append(it.get_tensor(d["index"]))
    return {k: np.concatenate(v) for k, v in res.items()}


def images(n: int, dtype, seed: int = 0, shape=(32, 32, 3)) -> np.ndarray:
    """n random images: int8 over the whole range, or normal floats."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.int8:
        return rng.integers(-128, 128, (n, *shape), dtype=np.int8)
    return rng.standard_normal((n, *shape)).astype(dtype)


def two_in_two_out(dynamic: bool) -> bytes:
    """x (?, 4) float, s (?, 4) float -> sum (?, 4), prod (?, 4); the batch dimension dynamic or fixed at 1."""
    b = ModelBuilder()
    sig = [-1, 4] if dynamic else None
    x = b.add_input("x", np.float32, [1, 4], shape_signature=sig)
    s = b.add_input("s", np.float32, [1, 4], shape_signature=sig)
    a = b.add_tensor("sum", np.float32, [1, 4], shape_signature=sig)
    m = b.add_tensor("prod", np.float32, [1, 4], shape_signature=sig)
    b.add_op("ADD", [x, s], [a])
    b.add_op("MUL", [a, b.add_const("k", np.linspace(0.5, 2, 4, dtype=np.float32))], [m])
    b.mark_output(a)
    b.mark_output(m)
    return b.build()
