"""MAX_POOL_2D and float AVERAGE_POOL_2D with num_threads > 1 (kernels/reduce/pooling.py pool_par): bands of output
rows, each computed by the serial kernel on views of its image and rows with the top padding moved, give the
one-thread bytes (padding rows at a band's edge, strides, batches, channel counts past the vector width, a fused
activation) and the official outputs."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import kernel_names
from lite_numba.kernels.base import threads

from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close, require_official, run_interpreter, run_official

require_official()

# (op, dtype, input shape, filter, stride, padding, fused activation)
CASES = [
    ("MAX_POOL_2D", np.float32, [1, 33, 20, 28], 3, 2, "SAME", "NONE"),
    ("MAX_POOL_2D", np.float32, [2, 16, 16, 16], 2, 2, "VALID", "RELU"),
    ("MAX_POOL_2D", np.int8, [1, 40, 30, 24], 3, 1, "SAME", "NONE"),
    ("AVERAGE_POOL_2D", np.float32, [1, 31, 17, 40], 3, 2, "SAME", "RELU6"),
    ("AVERAGE_POOL_2D", np.float32, [3, 12, 12, 8], 5, 1, "SAME", "NONE"),
]


def _model(op, dtype, shape, f, s, padding, act):
    mb = ModelBuilder()
    q = (0.05, -3) if dtype == np.int8 else None
    x = mb.add_input("x", dtype, shape, quant=q)
    same = padding == "SAME"
    oh = -(-shape[1] // s) if same else (shape[1] - f) // s + 1
    ow = -(-shape[2] // s) if same else (shape[2] - f) // s + 1
    y = mb.add_tensor("y", dtype, [shape[0], oh, ow, shape[3]], quant=q)
    mb.add_op(op, [x], [y], options={"padding": padding, "stride_h": s, "stride_w": s, "filter_height": f,
                                     "filter_width": f, "fused_activation_function": act})
    mb.mark_output(y)
    return mb.build()


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{np.dtype(c[1]).name}-{'x'.join(map(str, c[2]))}-"
                                                      f"f{c[3]}s{c[4]}-{c[5]}-{c[6]}")
def test_row_bands_give_the_one_thread_bytes(case, monkeypatch):
    op, dtype, shape, f, s, padding, act = case
    monkeypatch.setattr(threads, "MIN_ELEMENTS", 0)
    data = _model(*case)
    rng = np.random.default_rng(shape[1])
    x = (rng.integers(-128, 128, shape).astype(dtype) if dtype == np.int8
         else (rng.standard_normal(shape) * 3).astype(dtype))
    (one,), _ = run_interpreter(data, [x], num_threads=1)
    (two,), it = run_interpreter(data, [x], num_threads=2)
    calls = kernel_names(it)
    assert "pool_par" in calls, calls
    assert one.tobytes() == two.tobytes()
    (ref,) = run_official(data, [x])
    assert_close(two, ref, family="elementwise")
