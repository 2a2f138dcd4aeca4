"""`lite_numba.tools.inspect_model`: inputs, outputs, quantization, nodes and signatures as the official runtime reports
them, and whether (and why not) this installation can run each op."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import model_path

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import official_interpreter
from lite_numba.tools.inspect_model import format_inspection, inspect_model

MODELS = sorted(p.stem for p in (Path(__file__).parent / "data" / "models").glob("*.tflite"))  # every bundled model


def _same_tensor(ours: dict, ref: dict) -> None:
    assert ours["name"] == ref["name"] and ours["index"] == ref["index"]
    assert ours["shape"] == ref["shape"].tolist()
    assert ours["shape_signature"] == ref["shape_signature"].tolist()
    assert ours["dtype"] == np.dtype(ref["dtype"]).name.upper()
    q, rq = ours["quantization"], ref["quantization_parameters"]
    if q is None:
        assert rq["scales"].size == 0
    elif "scale" in q:
        assert (np.float32(q["scale"]), q["zero_point"]) == (rq["scales"][0], rq["zero_points"][0])
        assert (np.float32(q["scale"]), q["zero_point"]) == ref["quantization"]
    else:
        np.testing.assert_array_equal(np.float32(q["scales"]), rq["scales"])
        assert q["quantized_dimension"] == rq["quantized_dimension"]


@pytest.mark.parametrize("name", MODELS)
def test_inspect_matches_official(official, name):
    path = str(model_path(name))
    info = inspect_model(path, allocate=False)
    ref = official_interpreter(path, num_threads=None, allocate=False)
    ins, outs = ref.get_input_details(), ref.get_output_details()
    assert len(info["inputs"]) == len(ins) and len(info["outputs"]) == len(outs)
    for o, r in zip(info["inputs"], ins):
        _same_tensor(o, r)
    for o, r in zip(info["outputs"], outs):
        _same_tensor(o, r)
    nodes = info["subgraphs"][0]["nodes"]
    ops = ref._get_ops_details()
    assert [(n["index"], n["op_name"], n["inputs"], n["outputs"]) for n in nodes] == \
        [(op["index"], op["op_name"], op["inputs"].tolist(), op["outputs"].tolist()) for op in ops]
    # the op table counts every node of every subgraph
    assert sum(e["count"] for e in info["ops"]) == sum(sg["num_nodes"] for sg in info["subgraphs"])
    assert len(info["subgraphs"]) == ref.num_subgraphs()
    sigs = ref._get_full_signature_list()
    assert {s["key"]: {"inputs": s["inputs"], "outputs": s["outputs"]} for s in info["signatures"]} == \
        {k: {"inputs": v["inputs"], "outputs": v["outputs"]} for k, v in sigs.items()}
    assert info["tensors"]["tensors"] == sum(sg["num_tensors"] for sg in info["subgraphs"])
    assert len(ref.get_tensor_details()) == info["subgraphs"][0]["num_tensors"]
    json.dumps(info)
    text = format_inspection(info)
    assert "Ops (" in text and info["inputs"][0]["name"] in text


def test_custom_op_provided_by_plugin_and_builtin_only():
    path = str(model_path("seed_atan"))
    info = inspect_model(path)
    atan = next(e for e in info["ops"] if e["op"] == "Atan")
    assert atan["kind"] == "custom" and atan["version"] == 1 and atan["can_run"]
    assert atan["status"] == "custom op, provided by lite_numba.plugins.examples"
    assert info["can_run"] and info["arena_size"] > 0
    it = Interpreter(model_path=path)
    it.allocate_tensors()
    assert info["arena_size"] == it.arena_size

    only = inspect_model(path, builtin_only=True)
    atan = next(e for e in only["ops"] if e["op"] == "Atan")
    assert not atan["can_run"] and atan["status"].startswith("custom op, not registered")
    assert not only["can_run"] and only["arena_size"] is None
    assert "This installation can run the model: no" in format_inspection(only)


def test_unsupported_version_and_unknown_custom_op():
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [4])
    y = b.add_tensor("y", np.float32, [4])
    z = b.add_tensor("z", np.float32, [4])
    b.add_op("ADD", [x, x], [y], version=99)
    b.add_custom_op("NoSuchOp", [y], [z])
    b.mark_output(z)
    info = inspect_model(b.build())
    add = next(e for e in info["ops"] if e["op"] == "ADD")
    assert not add["can_run"]
    assert add["status"].startswith("builtin, version 99 not supported (we have 1")
    other = next(e for e in info["ops"] if e["op"] == "NoSuchOp")
    assert other["status"] == "custom op, not registered" and not info["can_run"]
    text = format_inspection(info)
    assert "NO   builtin, version 99 not supported" in text


def test_quantization_and_sizes_of_a_built_model():
    b = ModelBuilder()
    x = b.add_input("x", np.int8, [1, 4], quant=(0.25, 3))
    w = b.add_const("w", np.ones((2, 4), np.int8), quant={"scales": [0.5, 0.25], "zero_points": [0, 0],
                                                          "quantized_dimension": 0})
    y = b.add_tensor("y", np.int8, [1, 2], quant=(1.0, 0))
    b.add_op("FULLY_CONNECTED", [x, w, -1], [y], version=4)
    b.mark_output(y)
    info = inspect_model(b.build(), allocate=False)
    assert info["inputs"][0]["quantization"] == {"scale": 0.25, "zero_point": 3}
    t = info["tensors"]
    assert (t["tensors"], t["constant_tensors"], t["constant_bytes"], t["activation_bytes"]) == (3, 1, 8, 6)
    assert info["arena_size"] is None and info["arena_error"] is None
