"""Per-run overhead of the LiteRT 2 API on an op_add-sized model: lite-numba's CompiledModel against the official
one (ai_edge_litert.compiled_model) in the same process, on the same inputs, interleaved round by round.

Columns: "XNNPACK" is the official CompiledModel with its default CPU options (XNNPACK), "builtin" the official one
with CpuKernelMode.BUILTIN. Cases: run_by_index on the same buffers (the steady state: lite-numba binds them once
and then only calls the compiled runner), run_by_name, the whole cycle a program runs (write both inputs, run, read
the output), and two buffer sets used in turn (lite-numba re-binds at every run). No case asserts on time; the
outputs are checked against the official runtime."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import ROWS, find_model, rounds

from lite_numba.testing import assert_close, require_official


def _median_us(fn, inner: int) -> float:
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner * 1e6


class _Side:
    """One CompiledModel of op_add with its buffers and the cases' callables."""

    def __init__(self, compiled_model, options, path: str, x: np.ndarray):
        kwargs = {} if options is None else {"options": options}
        self.model = compiled_model.CompiledModel.from_file(path, **kwargs)
        self.key = next(iter(self.model.get_signature_list()))
        names = self.model.get_signature_list()[self.key]
        self.ins, self.outs = self.model.create_input_buffers(0), self.model.create_output_buffers(0)
        self.ins2, self.outs2 = self.model.create_input_buffers(0), self.model.create_output_buffers(0)
        for buf in (*self.ins, *self.ins2):
            buf.write(x)
        self.in_map = dict(zip(names["inputs"], self.ins))
        self.out_map = dict(zip(names["outputs"], self.outs))
        self.x, self.n = x, x.size
        self.turn = False

    def run_by_index(self):
        self.model.run_by_index(0, self.ins, self.outs)

    def run_by_name(self):
        self.model.run_by_name(self.key, self.in_map, self.out_map)

    def cycle(self):
        self.ins[0].write(self.x)
        self.ins[1].write(self.x)
        self.model.run_by_index(0, self.ins, self.outs)
        return self.outs[0].read(self.n, np.float32)

    def alternate(self):
        self.turn = not self.turn
        if self.turn:
            self.model.run_by_index(0, self.ins2, self.outs2)
        else:
            self.model.run_by_index(0, self.ins, self.outs)


@pytest.mark.parametrize("case", ["run_by_index", "run_by_name", "cycle", "alternate"])
def test_compiled_model_overhead(benchmark, case):
    require_official()
    import ai_edge_litert.compiled_model as official
    import ai_edge_litert.cpu_kernel_mode as official_mode
    import ai_edge_litert.options as official_options

    import lite_numba.compiled_model as ours

    path = find_model("op_add")
    if path is None:
        pytest.skip("op_add is not bundled")
    x = np.random.default_rng(0).standard_normal((1, 4, 6, 3)).astype(np.float32)
    builtin = official_options.Options(cpu_options=official_options.CpuOptions(
        num_threads=1, kernel_mode=official_mode.CpuKernelMode.BUILTIN))
    sides = {"ours": _Side(ours, None, str(path), x), "xnnpack": _Side(official, None, str(path), x),
             "builtin": _Side(official, builtin, str(path), x)}
    results = {k: s.cycle() for k, s in sides.items()}
    assert_close(results["ours"], results["builtin"], family="elementwise", what="op_add (CompiledModel)")
    np.testing.assert_array_equal(results["ours"], (x + x).reshape(-1))
    samples = {k: [] for k in sides}
    for _ in range(rounds(15)):
        for k, side in sides.items():
            samples[k].append(_median_us(getattr(side, case), 2000))
    row = {"case": f"CompiledModel {case} (op_add)", **{k: float(np.median(v)) for k, v in samples.items()}}
    ROWS.append(row)
    benchmark.extra_info.update(row)
    benchmark(getattr(sides["ours"], case))
