"""The Python profiling API (Interpreter.profile -> Profile), the official-style tables and $LITE_NUMBA_TRACE.

Timing values are never asserted (the machine is shared); structure, counts and results are. Results after
profiling or tracing must still equal the official runtime's.
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from conftest import model_path

from lite_numba import Interpreter
from lite_numba.runtime.profile_report import RunStats, format_stats_tables
from lite_numba.testing import assert_close, invoke_with, official_interpreter

MODELS = ["op_softmax_beta", "op_squared_norm_rsqrt", "op_shape_fill_range_dynamic"]


def _ready(name: str, **kwargs) -> tuple[Interpreter, list[np.ndarray]]:
    it = Interpreter(model_path=str(model_path(name)), **kwargs)
    it.allocate_tensors()
    rng = np.random.default_rng(1)
    values = []
    for d in it.get_input_details():
        v = rng.uniform(0.1, 2.0, size=tuple(d["shape"])).astype(d["dtype"])
        it.set_tensor(d["index"], v)
        values.append(v)
    return it, values


def _official_outputs(name: str, values: list[np.ndarray]) -> tuple[list[np.ndarray], list[dict]]:
    ref = official_interpreter(model_path(name), num_threads=None)
    return invoke_with(ref, values), ref._get_ops_details()


@pytest.mark.parametrize("name", MODELS)
def test_profile_records_match_the_model_and_results_are_unchanged(official, name):
    it, values = _ready(name)
    prof = it.profile(num_runs=7, warmup_runs=1)
    refs, ops = _official_outputs(name, values)
    assert prof.num_runs == 7
    assert [r.index for r in prof.records] == [op["index"] for op in ops]
    assert [r.op_name for r in prof.records] == [op["op_name"] for op in ops]
    for r, op in zip(prof.records, ops):
        assert list(r.inputs) == op["inputs"].tolist() and list(r.outputs) == op["outputs"].tolist()
        assert r.count == 7 and 0 <= r.min_us <= r.avg_us <= r.max_us
        for i, shape, dt in zip(r.outputs, r.output_shapes, r.output_dtypes):
            assert tuple(it.get_tensor(i).shape) == shape
            assert dt == it.get_tensor(i).dtype.name.upper()
    node_versions = {n.index: n.version for n in it.model.subgraphs[0].nodes}
    assert all(r.version == node_versions[r.index] for r in prof.records)
    assert prof.invoke is not None and prof.invoke.count == 7 and prof.coverage is not None
    # profiling ran the same kernels on the same storage: outputs equal the official runtime's
    for d, ref in zip(it.get_output_details(), refs):
        assert_close(it.get_tensor(d["index"]), ref, 1e-5)


def test_profile_conversions():
    it, _ = _ready("op_squared_norm_rsqrt")
    prof = it.profile(num_runs=3)
    n = len(it.model.subgraphs[0].nodes)
    dicts = prof.to_dicts()
    assert len(dicts) == n
    assert {"index", "op_name", "version", "inputs", "outputs", "input_shapes", "output_shapes", "input_dtypes",
            "output_dtypes", "avg_us", "min_us", "percent"} <= set(dicts[0])
    json.dumps(dicts)
    rows = list(csv.DictReader(io.StringIO(prof.to_csv())))
    assert len(rows) == n and [r["op_name"] for r in rows] == [d["op_name"] for d in dicts]
    assert float(rows[0]["avg_us"]) >= 0
    table = str(prof)
    for title in ("Run Order", "Top by Computation Time", "Summary by node type", "Timings (microseconds)"):
        assert title in table
    assert f"Number of nodes executed: {n}" in table and f"{n} nodes observed" in table
    types = prof.by_type()
    assert sum(t["count"] for t in types) == n and abs(types[-1]["cdf"] - 100.0) < 1e-6
    doc = json.loads(prof.to_json())
    assert doc["num_runs"] == 3 and len(doc["nodes"]) == n
    page = prof.to_html(title="t<1>")
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 2 and "t&lt;1&gt;" in page
    assert "<script" not in page and "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "op times / invoke time" in prof.summary()


def test_profile_errors():
    it = Interpreter(model_path=str(model_path("op_softmax_beta")))
    with pytest.raises(RuntimeError, match="not ready"):
        it.profile(num_runs=2)
    it.allocate_tensors()
    with pytest.raises(ValueError, match="num_runs"):
        it.profile(num_runs=0)


def test_trace_prints_every_node_and_keeps_results(official, monkeypatch, capfd):
    monkeypatch.setenv("LITE_NUMBA_TRACE", "1")
    it, values = _ready("op_squared_norm_rsqrt")
    capfd.readouterr()
    it.invoke()
    err = capfd.readouterr().err
    nodes = it.model.subgraphs[0].nodes
    for n in nodes:
        assert f"node {n.index} {n.op_name} v{n.version}" in err
    assert err.count("    out[0] #") == len(nodes)
    first_in = it.get_input_details()[0]
    assert f"#{first_in['index']} {first_in['name']!r} FLOAT32{first_in['shape'].tolist()}" in err
    assert "min=" in err and "max=" in err
    refs, _ = _official_outputs("op_squared_norm_rsqrt", values)
    for d, ref in zip(it.get_output_details(), refs):
        assert_close(it.get_tensor(d["index"]), ref, 1e-5)


def test_trace_quantized_ranges_and_nan(monkeypatch, capfd):
    from lite_numba.builder import ModelBuilder

    b = ModelBuilder()
    x = b.add_input("x", np.int8, [4], quant=(0.5, -2))
    y = b.add_tensor("y", np.int8, [4], quant=(0.5, -2))
    b.add_op("RESHAPE", [x, b.add_const("s", np.array([4], np.int32))], [y])
    b.mark_output(y)
    f = b.add_input("f", np.float32, [3])
    g = b.add_tensor("g", np.float32, [3])
    b.add_op("RELU", [f], [g])
    b.mark_output(g)
    monkeypatch.setenv("LITE_NUMBA_TRACE", "1")
    it = Interpreter(model_content=b.build())
    it.allocate_tensors()
    it.set_tensor(0, np.array([-128, 0, 3, 127], np.int8))
    it.set_tensor(it.get_input_details()[1]["index"], np.array([np.nan, -1.0, 2.0], np.float32))
    capfd.readouterr()
    it.invoke()
    err = capfd.readouterr().err
    assert "min=-128 max=127 real=[-63, 64.5] (scale=0.5, zp=-2)" in err
    assert "nan=1" in err


def test_run_stats_format_like_the_official_tool():
    s = RunStats([1, 2, 3, 4])
    assert s.format() == "count=4 first=1 curr=4 min=1 max=4 avg=2.5 std=1 p5=1 median=3 p95=4"
    assert RunStats([5, 5, 5]).format(percentiles=False) == "count=3 curr=5(all same)"
    assert RunStats([7]).format(percentiles=False) == "count=1 curr=7"
    assert RunStats().format() == "count=0"


def test_official_table_layout():
    from lite_numba.runtime.profile_report import init_rows

    text = format_stats_tables(init_rows([("CONV_2D", "CONV_2D", 1500.0), ("ADD", "ADD", 500.0)]), 1)
    lines = text.splitlines()
    assert lines[0] == "============================== Run Order =============================="
    assert lines[1] == ("\t             [node type]\t  [first]\t [avg ms]\t     [%]\t  [cdf%]\t  [mem KB]"
                        "\t[times called]\t[Name]")
    assert lines[2] == ("\t                 CONV_2D\t    1.500\t    1.500\t 75.000%\t 75.000%\t     0.000\t        1"
                        "\tCONV_2D")
    csv_text = format_stats_tables(init_rows([("A", "A", 1000.0)]), 1, csv_format=True)
    assert "node type, first, avg_ms, %, cdf%, mem KB, times called, name\nA, 1, 1, 100%, 100%, 0, 1, A" in csv_text
    assert "node type, count, avg_ms, avg %, cdf %, mem KB, times called\nA, 1, 1, 100%, 100%, 0, 1" in csv_text
