"""Hybrid (dynamic-range) FULLY_CONNECTED on the AMX tiles with num_threads=2 (issue 39): amx_hybrid's
hybrid_fc_amx_t_par quantizes and packs the input rows once (in row chunks), then runs the transposed tile products
(the weights read in place as the A operand) in chunks of whole 32-channel panels, or of panels x 32-row blocks when
the panels are too few, each worker with its own tile configuration and C block. Every output is the one thread's
block product and epilogue, so 2 threads must give the bytes of 1, and both the official builtin kernels' (the
oracle; require_official fails under CI instead of skipping). Shapes: channel counts with a tail past the last 16
and the last 32, one panel only (rows split), depths of one and many 64-byte steps, several row counts, more rows
than one packed block holds (two blocks), all-zero and NaN rows (_case)."""

from __future__ import annotations

import numpy as np
import pytest
from lite_numba.kernels.base import isa
from test_hybrid_in_place import _case, _exact, _kernels, _run

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import require_official, run_official

require_official()

needs_amx = pytest.mark.skipif(not isa.supports("amx"), reason=f"ISA level amx not run: {isa.unavailable('amx')}")

CASES = [  # rows, depth, channels, asymmetric, activation, bias
    (128, 640, 1000, False, "NONE", True),  # a prefill's shape: 32 panels (the last of 8 channels)
    (40, 256, 130, True, "NONE", True),  # 5 panels, the last of 2 channels (16-row tail read from the padded copy)
    (130, 192, 47, True, "RELU6", True),  # 2 panels (32 + 15): panels x row blocks
    (33, 1024, 300, False, "RELU", False),  # 33 rows: a second row block of one row
    (600, 2048, 20, False, "NONE", False),  # one panel: the chunks split the rows; 600 rows: two packed blocks
    (200, 64, 100, True, "RELU_N1_TO_1", True),  # one 64-byte step of depth
]


@needs_amx
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:3])))
def test_amx_two_threads(case, tmp_path, monkeypatch):
    """2 threads: hybrid_fc_amx_t_par scheduled (by name, so a threshold change cannot leave it untested), the bytes
    of one thread (hybrid_fc_amx_t) and of the official runtime."""
    monkeypatch.setenv("LITE_NUMBA_ISA", "amx")
    data, x, w = _case(*case, seed=sum(case[:3]) + 7)
    one, it1 = _run(tmp_path, data, x)
    two, it2 = _run(tmp_path, data, x, threads=2)
    assert "hybrid_fc_amx_t" in _kernels(it1)
    assert "hybrid_fc_amx_t_par" in _kernels(it2)
    np.testing.assert_array_equal(one.view(np.uint32), two.view(np.uint32))
    _exact(two, run_official(data, [x])[0])


@needs_amx
def test_amx_two_threads_repeated(tmp_path, monkeypatch):
    """Invoked again with other inputs (the chunks taken in another order by the workers): still the one thread's
    bytes, and the official ones."""
    monkeypatch.setenv("LITE_NUMBA_ISA", "amx")
    data, x, _ = _case(96, 512, 200, True, "NONE", True, seed=11)
    _, it1 = _run(tmp_path, data, x)
    _, it2 = _run(tmp_path, data, x, threads=2)
    rng = np.random.default_rng(12)
    for _ in range(3):
        x2 = (rng.standard_normal(x.shape) * rng.uniform(0.1, 10)).astype(np.float32)
        outs = []
        for it in (it1, it2):
            it.set_tensor(it.get_input_details()[0]["index"], x2)
            it.invoke()
            outs.append(it.get_tensor(it.get_output_details()[0]["index"]))
        np.testing.assert_array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32))
        _exact(outs[1], run_official(data, [x2])[0])


@needs_amx
def test_amx_two_threads_bias_input(monkeypatch):
    """A bias computed at run time (a graph input): the driver writes it into the channel parameters before the
    workers start; 2 threads the bytes of 1 and of the official runtime."""
    monkeypatch.setenv("LITE_NUMBA_ISA", "amx")
    rng = np.random.default_rng(5)
    rows, k, units = 64, 512, 200
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [rows, k])
    bias = b.add_input("b", np.float32, [units])
    w = b.add_const("w", rng.integers(-127, 128, (units, k)).astype(np.int8),
                    quant={"scales": rng.uniform(0.002, 0.02, units).astype(np.float32), "zero_points": [0] * units,
                           "quantized_dimension": 0})
    y = b.add_tensor("y", np.float32, [rows, units])
    b.add_op("FULLY_CONNECTED", [x, w, bias], [y], options={"fused_activation_function": "RELU"}, version=12)
    b.mark_output(y)
    data = b.build()
    xs = [rng.standard_normal((rows, k)).astype(np.float32), rng.standard_normal(units).astype(np.float32)]
    outs = []
    for threads in (1, 2):
        it = Interpreter(model_content=data, num_threads=threads)
        it.allocate_tensors()
        for d, v in zip(it.get_input_details(), xs):
            it.set_tensor(d["index"], v)
        it.invoke()
        assert ("hybrid_fc_amx_t_par" if threads == 2 else "hybrid_fc_amx_t") in _kernels(it)
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]))
    np.testing.assert_array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32))
    _exact(outs[1], run_official(data, xs)[0])
