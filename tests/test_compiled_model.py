"""The LiteRT 2 API (issue 32): lite_numba.compiled_model / tensor_buffer / environment / options / cpu_options /
cpu_kernel_mode / hardware_accelerator side by side with ai_edge_litert's, on the same models and the same scripts:
signature lists, tensor details, buffer requirements, outputs (equal to the Interpreter path), the exception types and
the stable part of the official texts; the zero-copy path (inputs read and outputs written in place); the options'
mapping; install_as_tflite_runtime, the example program and `lite-numba litert-benchmark`. Where lite-numba differs on
purpose (README, "Switching"), the test asserts the documented behaviour."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from lite_numba.builder import ModelBuilder
from lite_numba.interpreter import Interpreter
from lite_numba.testing import assert_close, require_official

ROOT = Path(__file__).resolve().parents[1]
MODULES = ("compiled_model", "tensor_buffer", "environment", "options", "cpu_options", "cpu_kernel_mode",
           "hardware_accelerator")


def _api(package: str) -> types.SimpleNamespace:
    return types.SimpleNamespace(**{m: importlib.import_module(f"{package}.{m}") for m in MODULES})


@pytest.fixture(scope="module")
def apis() -> dict[str, types.SimpleNamespace]:
    require_official()  # fails under CI=true when ai-edge-litert is missing
    return {"ours": _api("lite_numba"), "official": _api("ai_edge_litert")}


# --- models ------------------------------------------------------------------------------------------------------

def _pair_model() -> bytes:
    """a, b float [2, 3] (batch dimension dynamic) -> sum = a + b, prod = a * b; signature "pair"."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 3], shape_signature=[-1, 3])
    y = b.add_input("y", np.float32, [2, 3], shape_signature=[-1, 3])
    s = b.add_tensor("s", np.float32, [2, 3])
    p = b.add_tensor("p", np.float32, [2, 3])
    b.add_op("ADD", [x, y], [s])
    b.add_op("MUL", [x, y], [p])
    b.mark_output(s)
    b.mark_output(p)
    b.add_signature("pair", {"a": x, "b": y}, {"sum": s, "prod": p})
    return b.build()


def _multi_model() -> bytes:
    """Three signatures on three subgraphs: "arith" (static [2, 3]: a + b, a - b), "square" (v [8] -> v * v, rank 1
    so that the official runtime takes host-memory buffers), "wide" (w [2, 4] -> relu)."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 3])
    y = b.add_input("y", np.float32, [2, 3])
    s = b.add_tensor("s", np.float32, [2, 3])
    d = b.add_tensor("d", np.float32, [2, 3])
    b.add_op("ADD", [x, y], [s])
    b.add_op("SUB", [x, y], [d])
    b.mark_output(s)
    b.mark_output(d)
    b.add_signature("arith", {"a": x, "b": y}, {"sum": s, "diff": d})
    sq = b.add_subgraph("square")
    v = sq.add_input("v", np.float32, [8])
    q = sq.add_tensor("q", np.float32, [8])
    sq.add_op("MUL", [v, v], [q])
    sq.mark_output(q)
    b.add_signature("square", {"v": v}, {"sq": q}, sq)
    wide = b.add_subgraph("wide")
    w = wide.add_input("w", np.float32, [2, 4])
    r = wide.add_tensor("r", np.float32, [2, 4])
    wide.add_op("RELU", [w], [r])
    wide.mark_output(r)
    b.add_signature("wide", {"w": w}, {"relu": r}, wide)
    return b.build()


def _int8_model() -> bytes:
    """Quantized int8 ADD: x, y [2, 3] (batch dynamic) -> z; signature "qadd"."""
    b = ModelBuilder()
    qx, qy, qz = ({"scale": [s], "zero_point": [z]} for s, z in ((0.05, -3), (0.1, 4), (0.12, 1)))
    x = b.add_input("x", np.int8, [2, 3], shape_signature=[-1, 3], quant=qx)
    y = b.add_input("y", np.int8, [2, 3], shape_signature=[-1, 3], quant=qy)
    z = b.add_tensor("z", np.int8, [2, 3], quant=qz)
    b.add_op("ADD", [x, y], [z], version=2)
    b.mark_output(z)
    b.add_signature("qadd", {"x": x, "y": y}, {"z": z})
    return b.build()


def _plain_model() -> bytes:
    """No signature (the official placeholder one): RELU of x [1, 4]."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 4])
    y = b.add_tensor("y", np.float32, [1, 4])
    b.add_op("RELU", [x], [y])
    b.mark_output(y)
    return b.build()


MODELS = {"pair": _pair_model, "multi": _multi_model, "int8": _int8_model, "plain": _plain_model}
_BYTES: dict[str, bytes] = {}


def model(name: str) -> bytes:
    if name not in _BYTES:
        _BYTES[name] = MODELS[name]()
    return _BYTES[name]


def _values(detail: dict, rng: np.random.Generator) -> np.ndarray:
    shape, dtype = detail["shape"], np.dtype(detail["dtype"])
    if dtype.kind in "iu":
        return rng.integers(-100, 100, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _interpreter_outputs(data: bytes, key: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The same signature through lite-numba's Interpreter (SignatureRunner, or set_tensor / invoke)."""
    it = Interpreter(model_content=data)
    if it.get_signature_list():
        return it.get_signature_runner(key)(**inputs)
    for d in it.get_input_details():
        if tuple(d["shape"]) != inputs[d["name"]].shape:
            it.resize_tensor_input(d["index"], inputs[d["name"]].shape)
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], inputs[d["name"]])
    it.invoke()
    return {d["name"]: it.get_tensor(d["index"]) for d in it.get_output_details()}


def _stable(message: str) -> str:
    """The part of an official error text that does not name a source line: its last line, without the
    "CompiledModel error: code=N, message=" head, the "└ " mark and "ERROR: [file:line]" tags."""
    line = message.strip().splitlines()[-1] if message.strip() else ""
    line = line.split("message=", 1)[-1].removeprefix("└ ").strip()
    return re.sub(r"^(ERROR: \[[^\]]*\]\s*)+", "", line).strip()


def _outcome(fn):
    try:
        return None, fn()
    except Exception as e:  # noqa: BLE001 - the type and text are what is compared
        return type(e), str(e)


# official texts that are not stable: pybind's argument errors (they print the call), and an output-count mismatch
# (its text carries the previous error's lines)
UNSTABLE = {"too many outputs"}


def _same_outcome(label: str, ours, theirs) -> None:
    (ot, om), (tt, tm) = ours, theirs
    assert ot is tt, f"{label}: ours {ot.__name__ if ot else None} ({om}) vs official " \
                     f"{tt.__name__ if tt else None} ({tm})"
    if tt is not None and (label in UNSTABLE or "incompatible function arguments" in tm):
        return
    if tt is not None:
        assert _stable(tm) in om, f"{label}: the official text {_stable(tm)!r} is not in ours {om!r}"
    else:
        assert _plain(om) == _plain(tm), f"{label}: {om!r} vs {tm!r}"


def _plain(value):
    """A result made comparable: arrays as lists, buffers as their details."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "get_tensor_details"):
        return ("TensorBuffer", value.get_tensor_details())
    return value


# --- the side-by-side scripts ----------------------------------------------------------------------------------------

def _describe(api, data: bytes) -> dict:
    """Everything a program reads about a model before running it."""
    cm = api.compiled_model.CompiledModel.from_buffer(data)
    sigs = cm.get_signature_list()
    out = {"list": sigs, "num": cm.get_num_signatures(), "by_index": [], "index": {}, "details": {}, "reqs": {},
           "buffers": {}}
    for k, key in enumerate(sigs):
        out["by_index"].append(cm.get_signature_by_index(k))
        out["index"][key] = cm.get_signature_index(key)
        out["details"][key] = (cm.get_input_tensor_details(key), cm.get_output_tensor_details(key))
        out["reqs"][key] = ([cm.get_input_buffer_requirements(i, k) for i in range(len(sigs[key]["inputs"]))],
                            [cm.get_output_buffer_requirements(i, k) for i in range(len(sigs[key]["outputs"]))])
        out["buffers"][key] = ([b.get_tensor_details() for b in cm.create_input_buffers(k)],
                               [b.get_tensor_details() for b in cm.create_output_buffers(k)])
    out["index"]["nope"] = cm.get_signature_index("nope")
    return out


def _run_all(api, data: bytes, inputs: dict[str, dict[str, np.ndarray]]) -> dict:
    """Every signature run twice: run_by_index on the model's buffers, run_by_name on buffers made by name."""
    cm = api.compiled_model.CompiledModel.from_buffer(data)
    results = {}
    for k, (key, names) in enumerate(cm.get_signature_list().items()):
        ins, outs = cm.create_input_buffers(k), cm.create_output_buffers(k)
        for buf, name in zip(ins, names["inputs"]):
            buf.write(inputs[key][name])
        cm.run_by_index(k, ins, outs)
        details = cm.get_output_tensor_details(key)
        by_index = {n: b.read(int(np.prod(details[n]["shape"])), np.dtype(details[n]["dtype"]))
                    .reshape(details[n]["shape"]) for n, b in zip(names["outputs"], outs)}
        in_map = {n: cm.create_input_buffer_by_name(key, n) for n in names["inputs"]}
        out_map = {n: cm.create_output_buffer_by_name(key, n) for n in names["outputs"]}
        for n, buf in in_map.items():
            buf.write(inputs[key][n])
        cm.run_by_name(key, in_map, out_map)
        by_name = {n: b.read(int(np.prod(details[n]["shape"])), np.dtype(details[n]["dtype"]))
                   .reshape(details[n]["shape"]) for n, b in out_map.items()}
        results[key] = (by_index, by_name)
    return results


def _inputs_for(data: bytes, seed: int = 0) -> dict[str, dict[str, np.ndarray]]:
    from lite_numba.compiled_model import CompiledModel

    cm = CompiledModel.from_buffer(data)
    rng = np.random.default_rng(seed)
    return {key: {n: _values(d, rng) for n, d in cm.get_input_tensor_details(key).items()}
            for key in cm.get_signature_list()}


@pytest.mark.parametrize("name", list(MODELS))
def test_signatures_details_and_requirements_match(apis, name):
    ours, theirs = _describe(apis["ours"], model(name)), _describe(apis["official"], model(name))
    assert ours == theirs
    if name == "plain":
        assert list(ours["list"]) == ["<placeholder signature>"]
    if name == "multi":
        assert ours["num"] == 3 and ours["index"] == {"arith": 0, "square": 1, "wide": 2, "nope": -1}


@pytest.mark.parametrize("name", list(MODELS))
def test_runs_match_official_and_the_interpreter(apis, name):
    data = model(name)
    inputs = _inputs_for(data)
    ours, theirs = _run_all(apis["ours"], data, inputs), _run_all(apis["official"], data, inputs)
    assert ours.keys() == theirs.keys()
    for key in ours:
        expected = _interpreter_outputs(data, key, inputs[key])
        for mine, ref in zip(ours[key], theirs[key]):
            assert mine.keys() == ref.keys() == expected.keys()
            for n in mine:
                np.testing.assert_array_equal(mine[n], expected[n])  # the same kernels as the Interpreter
                assert_close(mine[n], ref[n], family="elementwise", what=f"{name} {key} {n}")


def _resize_script(api, data: bytes, key: str, rng_seed: int = 1) -> list:
    """Resize (strict, by name, non-strict), read details and requirements, run on new buffers, then run on buffers
    of the old shape (the official runtime resizes the inputs back to the buffers' shape)."""
    cm = api.compiled_model.CompiledModel.from_buffer(data)
    k = cm.get_signature_index(key)
    names = cm.get_signature_list()[key]
    old_in, old_out = cm.create_input_buffers(k), cm.create_output_buffers(k)
    log = []
    cm.resize_input_tensor(0, [4, 3], k)
    cm.resize_input_tensor_by_name(key, names["inputs"][1], [4, 3])
    log.append(("details", cm.get_input_tensor_details(key), cm.get_output_tensor_details(key)))
    log.append(("reqs", cm.get_input_buffer_requirements(0, k), cm.get_output_buffer_requirements(0, k)))
    ins, outs = cm.create_input_buffers(k), cm.create_output_buffers(k)
    log.append(("buffers", [b.get_tensor_details() for b in ins + outs]))
    rng = np.random.default_rng(rng_seed)
    values = {n: _values(d, rng) for n, d in cm.get_input_tensor_details(key).items()}
    for b, n in zip(ins, names["inputs"]):
        b.write(values[n])
    cm.run_by_index(k, ins, outs)
    log.append(("outputs", {n: b.read(b.get_tensor_details()["shape"][0] * 3, np.dtype(
        b.get_tensor_details()["dtype"])).reshape(4, 3) for n, b in zip(names["outputs"], outs)}, values))
    for b, n in zip(old_in, names["inputs"]):
        b.write(values[n][:2])
    cm.run_by_index(k, old_in, old_out)  # buffers of the old shape: the inputs follow them
    log.append(("auto-resized", cm.get_input_tensor_details(key), cm.get_output_tensor_details(key)))
    cm.resize_input_tensor(0, [3, 3], k, strict=False)
    log.append(("non-strict", cm.get_input_tensor_details(key)))
    return log


@pytest.mark.parametrize("name,key", [("pair", "pair"), ("int8", "qadd")])
def test_resize_matches_official_and_the_interpreter(apis, name, key):
    data = model(name)
    ours, theirs = _resize_script(apis["ours"], data, key), _resize_script(apis["official"], data, key)
    for a, b in zip(ours, theirs):
        if a[0] != "outputs":
            assert a == b
    (_, mine, values), (_, ref, _) = ours[3], theirs[3]
    expected = _interpreter_outputs(data, key, values)
    for n in mine:
        np.testing.assert_array_equal(mine[n], expected[n])
        assert_close(mine[n], ref[n], family="elementwise", what=f"{name} resized {n}")


def _error_cases(api, tmp_path: Path) -> dict:
    """Every case on models of its own: the official runtime appends a model's earlier error to its next one."""
    CompiledModel = api.compiled_model.CompiledModel
    TensorBuffer = api.tensor_buffer.TensorBuffer
    HW = api.hardware_accelerator.HardwareAccelerator
    Options = api.options.Options
    pair = lambda: CompiledModel.from_buffer(model("pair"))  # noqa: E731
    multi = lambda: CompiledModel.from_buffer(model("multi"))  # noqa: E731
    source_pair, source_multi = pair(), multi()  # (where the buffers come from; no call on them fails)
    p_in, p_out = source_pair.create_input_buffers(0), source_pair.create_output_buffers(0)
    m_in, m_out = source_multi.create_input_buffers(0), source_multi.create_output_buffers(0)
    vec = source_multi.create_input_buffers(1)[0]  # float [8]
    wide = source_multi.create_input_buffers(2)[0]  # float [2, 4]
    destroyed = source_multi.create_input_buffers(0)[0]
    destroyed.destroy()
    closed = pair()
    closed.close()
    cases = {
        # a wrong signature key
        "details of a wrong key": lambda: pair().get_input_tensor_details("nope"),
        "output details of a wrong key": lambda: pair().get_output_tensor_details("nope"),
        "buffer of a wrong key": lambda: pair().create_input_buffer_by_name("nope", "a"),
        "run a wrong key": lambda: pair().run_by_name("nope", {"a": p_in[0], "b": p_in[1]}, {"sum": p_out[0]}),
        "resize a wrong key": lambda: pair().resize_input_tensor_by_name("nope", "a", [4, 3]),
        "index of a wrong key": lambda: pair().get_signature_index("nope"),
        "run a wrong signature index": lambda: pair().run_by_index(3, p_in, p_out),
        "buffers of a wrong signature index": lambda: multi().create_input_buffers(7),
        "requirements of a wrong signature index": lambda: multi().get_input_buffer_requirements(0, 7),
        # a wrong input or output name or index
        "buffer of a wrong input name": lambda: pair().create_input_buffer_by_name("pair", "zz"),
        "buffer of a wrong output name": lambda: pair().create_output_buffer_by_name("pair", "a"),
        "resize a wrong input name": lambda: pair().resize_input_tensor_by_name("pair", "zz", [4, 3]),
        "run without an output": lambda: pair().run_by_name("pair", {"a": p_in[0], "b": p_in[1]},
                                                            {"sum": p_out[0]}),
        "requirements of a wrong input": lambda: pair().get_input_buffer_requirements(2),
        "requirements of a wrong output": lambda: pair().get_output_buffer_requirements(5),
        "resize a wrong input index": lambda: pair().resize_input_tensor(5, [4, 3]),
        # buffers of the wrong size or number
        "too few inputs": lambda: pair().run_by_index(0, p_in[:1], p_out),
        "too many outputs": lambda: multi().run_by_index(1, [vec], [vec, vec]),
        "a static input of another shape": lambda: multi().run_by_index(0, [wide, m_in[1]], m_out),
        "a dynamic input of another rank": lambda: pair().run_by_index(0, [vec, p_in[1]], p_out),
        "a dynamic input, a fixed dimension differing": lambda: pair().run_by_index(0, [wide, p_in[1]], p_out),
        "an output buffer too small": lambda: multi().run_by_index(1, [vec], [TensorBuffer.create_from_host_memory(
            _aligned(4))]),
        "write too much": lambda: vec.write(np.zeros(9, np.float32)),
        "read too much": lambda: vec.read(9, np.float32),
        "read a negative count": lambda: vec.read(-1, np.float32),
        # resize
        "strict resize of a static dimension": lambda: pair().resize_input_tensor(0, [4, 5]),
        "strict resize to another rank": lambda: pair().resize_input_tensor(0, [12]),
        "resize to a zero dimension": lambda: pair().resize_input_tensor(0, [0, 3], strict=False),
        "strict resize of a static input": lambda: multi().resize_input_tensor(0, [4, 3]),
        # buffers
        "host memory from a list": lambda: TensorBuffer.create_from_host_memory([1.0, 2.0]),
        "host memory not contiguous": lambda: TensorBuffer.create_from_host_memory(np.zeros((4, 2), np.float32)[:, 0]),
        "host memory of objects": lambda: TensorBuffer.create_from_host_memory(np.array([None, 1])),
        "write a list": lambda: vec.write([1.0]),
        "read as a string type": lambda: vec.read(2, np.str_),
        "run a destroyed buffer": lambda: multi().run_by_index(0, [destroyed, m_in[1]], m_out),
        "read a destroyed buffer": lambda: destroyed.read(1, np.float32),
        "write a destroyed buffer": lambda: destroyed.write(np.zeros(1, np.float32)),
        "details of a destroyed buffer": lambda: destroyed.get_tensor_details(),
        "destroy twice": lambda: destroyed.destroy(),
        # a closed model
        "run a closed model": lambda: closed.run_by_index(0, p_in, p_out),
        "run a closed model by name": lambda: closed.run_by_name("pair", {}, {}),
        "signatures of a closed model": lambda: closed.get_signature_list(),
        "details of a closed model": lambda: closed.get_input_tensor_details("pair"),
        "buffers of a closed model": lambda: closed.create_input_buffers(0),
        "resize a closed model": lambda: closed.resize_input_tensor(0, [4, 3]),
        "close twice": lambda: closed.close(),
        # creation
        "missing file": lambda: CompiledModel.from_file(str(tmp_path / "missing.tflite")),
        "not a model": lambda: CompiledModel.from_buffer(b"not a model at all, not even close"),
        "options and hardware_accel": lambda: CompiledModel.from_buffer(model("pair"), hardware_accel=HW.CPU,
                                                                        options=Options()),
        "NPU alone": lambda: CompiledModel.from_buffer(model("pair"), hardware_accel=HW.NPU),
        "GPU alone": lambda: CompiledModel.from_buffer(model("pair"), hardware_accel=HW.GPU),
        "no accelerator": lambda: CompiledModel.from_buffer(model("pair"), hardware_accel=0),
        "a model text": lambda: CompiledModel.from_buffer("model"),
    }
    return {label: _outcome(fn) for label, fn in cases.items()}


def test_errors_match_official(apis, tmp_path):
    ours, theirs = _error_cases(apis["ours"], tmp_path), _error_cases(apis["official"], tmp_path)
    for label in ours:
        _same_outcome(label, ours[label], theirs[label])
    # the closed model's text: the official one, and what happened
    assert ours["run a closed model"][1].startswith("'NoneType' object has no attribute 'RunByIndex'")
    assert "closed" in ours["run a closed model"][1]
    assert "CPU only" in ours["GPU alone"][1] and "GPU | HardwareAccelerator.CPU" in ours["GPU alone"][1]


def _dtype_outcomes(api) -> dict:
    cm = api.compiled_model.CompiledModel.from_buffer(model("multi"))
    ins, outs = cm.create_input_buffers(0), cm.create_output_buffers(0)
    i8 = api.compiled_model.CompiledModel.from_buffer(model("int8")).create_input_buffers(0)[0]  # int8 [2, 3]
    i32 = api.tensor_buffer.TensorBuffer.create_from_host_memory(np.zeros(64, np.int32)[:8])
    cm_sq = api.compiled_model.CompiledModel.from_buffer(model("multi"))
    vec = cm_sq.create_input_buffers(1)
    return {
        "int8 input": _outcome(lambda: cm.run_by_index(0, [i8, ins[1]], outs)),
        "int8 output": _outcome(lambda: cm.run_by_index(0, ins, [i8, outs[1]])),
        "int32 input, same bytes": _outcome(lambda: cm_sq.run_by_index(1, [i32], cm_sq.create_output_buffers(1))),
        "int32 output, same bytes": _outcome(lambda: cm_sq.run_by_index(1, vec, [i32])),
    }


def test_wrong_dtype_raises_where_the_official_reinterprets_bytes(apis):
    """On purpose: a buffer whose dtype is not its tensor's raises RuntimeError. The official runtime raises the same
    type when the buffer's bytes do not fit, and reads the bytes as the tensor's type when they do."""
    outcomes = {side: _dtype_outcomes(api) for side, api in apis.items()}
    for label in ("int8 input", "int8 output"):
        assert outcomes["official"][label][0] is RuntimeError and outcomes["ours"][label][0] is RuntimeError
        assert "holds int8" in outcomes["ours"][label][1] and "float32" in outcomes["ours"][label][1]
    for label in ("int32 input, same bytes", "int32 output, same bytes"):
        assert outcomes["official"][label][0] is None  # officially: the bytes, read as float32
        assert outcomes["ours"][label][0] is RuntimeError and "holds int32" in outcomes["ours"][label][1]


def _aligned(n: int, dtype=np.float32) -> np.ndarray:
    """An array at a multiple of 64 bytes (the official runtime uses only those in place)."""
    raw = np.zeros(n * np.dtype(dtype).itemsize + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw[start:start + n * np.dtype(dtype).itemsize].view(dtype)


def _host_memory_script(api) -> list:
    TensorBuffer = api.tensor_buffer.TensorBuffer
    cm = api.compiled_model.CompiledModel.from_buffer(model("multi"))
    x, y = _aligned(8), _aligned(8)
    x[:] = np.arange(8)
    tx, ty = TensorBuffer.create_from_host_memory(x), TensorBuffer.create_from_host_memory(y)
    log = [tx.get_tensor_details()]
    cm.run_by_index(1, [tx], [ty])
    log.append(y.copy())  # the output written in place
    x[:] = -2.0  # the caller's array changed after create_from_host_memory: the next run reads it
    cm.run_by_name("square", {"v": tx}, {"sq": ty})
    log += [y.copy(), tx.read(8, np.float32)]
    tx.write(np.full(8, 3.0, np.float32))  # write() goes into the caller's array
    log.append(x.copy())
    tx.write(np.array([7.0], np.float32))  # a partial write: the first bytes
    log.append(tx.read(3, np.float32))
    log.append(tx.read(4, np.int32))  # bytes read as another type
    log.append(tx.read(16, np.uint8))
    z = _aligned(6, np.uint8).reshape(2, 3)
    log.append(TensorBuffer.create_from_host_memory(z).get_tensor_details())  # a host buffer is 1-D
    log.append(TensorBuffer.create_from_host_memory(np.zeros(0, np.float32)).get_tensor_details())
    # a run_by_name input left out reads the buffer the last run read
    y[:] = 0
    x[:] = 5.0
    cm.run_by_name("square", {}, {"sq": ty})
    log.append(y.copy())
    return log


def test_host_memory_is_used_in_place_as_officially(apis):
    ours, theirs = _host_memory_script(apis["ours"]), _host_memory_script(apis["official"])
    assert _plain(ours) == _plain(theirs)
    assert ours[1].tolist() == (np.arange(8) ** 2).tolist() and ours[2].tolist() == [4.0] * 8


def test_zero_copy_pointers():
    """The compiled graph reads the caller's input arrays and writes its output arrays: the runners' tables point
    into them, the arena's copies of those tensors are never written, and no copy is planned."""
    from lite_numba.compiled_model import CompiledModel
    from lite_numba.tensor_buffer import TensorBuffer

    cm = CompiledModel.from_buffer(model("pair"))
    a = np.arange(6, dtype=np.float32).reshape(2, 3)  # any C-contiguous array, of any rank and address
    b = np.full((2, 3), 2.0, np.float32)
    s, p = np.zeros((2, 3), np.float32), np.zeros(6, np.float32)
    bufs = [TensorBuffer.create_from_host_memory(v) for v in (a, b, s, p)]
    cm.run_by_index(0, bufs[:2], bufs[2:])
    np.testing.assert_array_equal(s, a + b)
    np.testing.assert_array_equal(p, (a * b).reshape(-1))
    session = cm._model
    state, graph = session.last[0], session.rt.graph(0)
    assert state.copy_in == [] and state.copy_out == [] and state.copy_dynamic == []
    used = session.bindings[0].current.arrays
    for user in (a, b, s, p):
        assert any(np.shares_memory(user, arr) for arr in used)
    for i in graph.plan.inputs + graph.plan.outputs:
        assert not graph.array(i).any()  # the arena's copy stayed zero: nothing was copied in or out
    a[0, 0] = 100.0
    cm.run_by_index(0, bufs[:2], bufs[2:])
    assert s[0, 0] == 102.0 and p[0] == 200.0
    # buffers made by the model are used in place too, and switching between buffer sets re-binds
    ins, outs = cm.create_input_buffers(0), cm.create_output_buffers(0)
    for buf in ins:
        buf.write(np.ones((2, 3), np.float32))
    for _ in range(3):
        cm.run_by_index(0, ins, outs)
        assert outs[0].read(6, np.float32).tolist() == [2.0] * 6
        cm.run_by_index(0, bufs[:2], bufs[2:])
        assert s[0, 0] == 102.0
    assert session.last[0].copy_in == [] and len(session.cache[0]) == 2
    # a read-only array is copied once (never written)
    ro = np.ones(6, np.float32)
    ro.flags.writeable = False
    tb = TensorBuffer.create_from_host_memory(ro)
    assert not np.shares_memory(tb.capsule.array, ro) and tb.capsule.array.ctypes.data % 64 == 0


def test_copies_where_the_plan_does_not_allow_binding(monkeypatch):
    """Python mode (no compiled runner), and an output buffer that is also an input's: the buffers are copied into
    and out of the arena, with the same results."""
    from lite_numba.compiled_model import CompiledModel
    from lite_numba.tensor_buffer import TensorBuffer

    v = np.arange(8, dtype=np.float32)
    same = TensorBuffer.create_from_host_memory(v)
    cm = CompiledModel.from_buffer(model("multi"))
    cm.run_by_index(1, [same], [same])  # in place: the output is copied out after the run
    np.testing.assert_array_equal(v, np.arange(8, dtype=np.float32) ** 2)
    assert len(cm._model.last[1].copy_out) == 1
    monkeypatch.setenv("LITE_NUMBA_EXECUTOR", "python")
    cm = CompiledModel.from_buffer(model("pair"))
    a, b = np.ones((2, 3), np.float32), np.full((2, 3), 3.0, np.float32)
    s, p = np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)
    bufs = [TensorBuffer.create_from_host_memory(x) for x in (a, b, s, p)]
    cm.run_by_index(0, bufs[:2], bufs[2:])
    np.testing.assert_array_equal(s, a + b)
    np.testing.assert_array_equal(p, a * b)
    state = cm._model.last[0]
    assert len(state.copy_in) == 2 and len(state.copy_out) == 2
    assert not cm.is_fully_accelerated()  # not all compiled code


def test_dynamic_graphs_copy_and_follow_replanning():
    """A graph with a value-dependent node (RESHAPE to an input's values): buffers are copied, outputs sized at run
    time are checked against their buffer, and the runs stay right while the runtime re-plans on the values it saw
    (speculation) and falls back when they change (the outputs move to another arena in the middle of a run)."""
    from lite_numba.compiled_model import CompiledModel
    from lite_numba.tensor_buffer import TensorBuffer

    b = ModelBuilder()
    x = b.add_input("x", np.float32, [6])
    s = b.add_input("s", np.int32, [2])
    y = b.add_tensor("y", np.float32, [2, 3])
    r = b.add_tensor("r", np.float32, [2, 3])
    b.add_op("RESHAPE", [x, s], [y])
    b.add_op("RELU", [y], [r])
    b.mark_output(r)
    cm = CompiledModel.from_buffer(b.build())
    assert not cm.is_fully_accelerated()
    xs, shape, out = np.zeros(6, np.float32), np.array([3, 2], np.int32), np.zeros(6, np.float32)
    bufs = [TensorBuffer.create_from_host_memory(a) for a in (xs, shape, out)]
    rng = np.random.default_rng(5)
    for k in range(10):
        if k == 6:
            shape[:] = [2, 3]  # the assumed values change: the re-planned graph falls back during the run
        xs[:] = rng.standard_normal(6)
        cm.run_by_index(0, bufs[:2], bufs[2:])
        np.testing.assert_array_equal(out, np.maximum(xs, 0))
        assert cm.get_output_tensor_details("")["r"]["shape"] == shape.tolist()
    small = TensorBuffer.create_from_host_memory(np.zeros(4, np.float32))
    with pytest.raises(RuntimeError, match="Failed to allocate tensors"):
        cm.run_by_index(0, bufs[:2], [small])


def test_signatures_keep_their_own_buffers():
    """Runs of different signatures interleaved: each reads its own buffers (bindings are per subgraph)."""
    from lite_numba.compiled_model import CompiledModel

    cm = CompiledModel.from_buffer(model("multi"))
    a_in, a_out = cm.create_input_buffers(0), cm.create_output_buffers(0)
    v_in, v_out = cm.create_input_buffers(1), cm.create_output_buffers(1)
    a_in[0].write(np.ones((2, 3), np.float32))
    a_in[1].write(np.full((2, 3), 4.0, np.float32))
    for k in range(4):
        v_in[0].write(np.full(8, float(k), np.float32))
        cm.run_by_index(1, v_in, v_out)
        cm.run_by_index(0, a_in, a_out)
        assert v_out[0].read(8, np.float32).tolist() == [float(k * k)] * 8
        assert a_out[0].read(6, np.float32).tolist() == [5.0] * 6
        assert a_out[1].read(6, np.float32).tolist() == [-3.0] * 6


def test_module_names_and_signatures_match_official(apis):
    skip = {"Any", "List", "Optional", "Sequence", "Union", "ml_dtypes", "np"}
    for m in MODULES:
        theirs, ours = getattr(apis["official"], m), getattr(apis["ours"], m)
        names = [n for n in dir(theirs) if not n.startswith("_") and n not in skip
                 and not isinstance(getattr(theirs, n), types.ModuleType)]
        missing = [n for n in names if not hasattr(ours, n)]
        assert not missing, f"lite_numba.{m} lacks {missing}"
        for n in names:
            t, o = getattr(theirs, n), getattr(ours, n)
            if not inspect.isclass(t):
                continue
            if issubclass(t, (int,)) and hasattr(t, "__members__"):  # IntEnum / IntFlag: members and values
                assert {k: int(v) for k, v in t.__members__.items()} == \
                       {k: int(v) for k, v in o.__members__.items()}, n
                continue
            for attr, member in vars(t).items():
                if attr.startswith("_") and attr not in ("__init__", "__enter__", "__exit__"):
                    continue
                assert hasattr(o, attr), f"{m}.{n}.{attr} missing"
                if callable(member) or isinstance(member, (classmethod, staticmethod)):
                    fn_t, fn_o = getattr(t, attr), getattr(o, attr)
                    sig_t, sig_o = inspect.signature(fn_t), inspect.signature(fn_o)
                    assert [(p.name, p.default, p.kind) for p in sig_t.parameters.values()] == \
                           [(p.name, p.default, p.kind) for p in sig_o.parameters.values()], f"{m}.{n}.{attr}"


def _environment_outcomes(api) -> dict:
    Environment, EnvironmentOptions = api.environment.Environment, api.environment.EnvironmentOptions
    env = Environment.create(runtime_path="/tmp/x")
    with Environment.create() as closed:
        pass
    return {
        "runtime path": env.options.runtime_path,
        "string options": Environment.create(options="/tmp/y").options.runtime_path,
        "both": _outcome(lambda: Environment.create(options=EnvironmentOptions(), runtime_path="/x")),
        "twice": _outcome(lambda: Environment.create(options="/x", runtime_path="/x")),
        "closed capsule": _outcome(lambda: closed.capsule),
        "model with a closed environment": _outcome(
            lambda: api.compiled_model.CompiledModel.from_buffer(model("pair"), environment=closed)),
        "model environment": api.compiled_model.CompiledModel.from_buffer(model("pair"), environment=env)
        .environment is env,
    }


def test_options_and_environment_behave_as_officially(apis):
    for side in ("ours", "official"):
        api = apis[side]
        Options, CpuOptions = api.options.Options, api.cpu_options.CpuOptions
        opts = Options()
        assert repr(opts).split("(", 1)[1] == repr(apis["official"].options.Options()).split("(", 1)[1]
        assert opts.cpu_options == CpuOptions() and opts._cpu_options is not None
        assert repr(CpuOptions(num_threads=3)).split("(", 1)[1] == \
               repr(apis["official"].cpu_options.CpuOptions(num_threads=3)).split("(", 1)[1]
        mode = api.cpu_kernel_mode.CpuKernelMode
        assert mode.XNNPACK is mode.DELEGATE and [m.name for m in mode] == ["DELEGATE", "REFERENCE", "BUILTIN"]
        hw = api.hardware_accelerator.HardwareAccelerator
        assert int(hw.GPU | hw.CPU) == 3 and str(hw.NPU) == "4"
    outcomes = {side: _environment_outcomes(api) for side, api in apis.items()}
    for label in outcomes["ours"]:
        o, t = outcomes["ours"][label], outcomes["official"][label]
        if isinstance(t, tuple):
            _same_outcome(label, o, t)
        else:
            assert o == t, label


def test_accelerators_and_kernel_modes(apis):
    """GPU | CPU and NPU | CPU run on the CPU and are not fully accelerated (on purpose: officially GPU | CPU fails
    here, without a GPU, and NPU | CPU reports XNNPACK's coverage); the kernel modes report what the official
    runtime reports on the float model; REFERENCE prepares with the portable kernels."""
    from lite_numba.compiled_model import CompiledModel
    from lite_numba.cpu_kernel_mode import CpuKernelMode
    from lite_numba.hardware_accelerator import HardwareAccelerator as HW
    from lite_numba.options import CpuOptions, Options

    for accel in (HW.GPU | HW.CPU, HW.NPU | HW.CPU, HW.CPU | HW.GPU | HW.NPU):
        cm = CompiledModel.from_buffer(model("multi"), hardware_accel=accel)
        ins, outs = cm.create_input_buffers(1), cm.create_output_buffers(1)
        ins[0].write(np.full(8, 3.0, np.float32))
        cm.run_by_index(1, ins, outs)
        assert outs[0].read(8, np.float32).tolist() == [9.0] * 8
        assert cm.is_fully_accelerated() is False
    official = apis["official"]
    for mode in (None, CpuKernelMode.XNNPACK, CpuKernelMode.REFERENCE, CpuKernelMode.BUILTIN):
        theirs = official.compiled_model.CompiledModel.from_buffer(model("pair"), options=official.options.Options(
            cpu_options=official.cpu_options.CpuOptions(kernel_mode=None if mode is None else
                                                        official.cpu_kernel_mode.CpuKernelMode(int(mode)))))
        ours = CompiledModel.from_buffer(model("pair"), options=Options(cpu_options=CpuOptions(kernel_mode=mode)))
        assert ours.is_fully_accelerated() == theirs.is_fully_accelerated(), mode
    before = os.environ.get("LITE_NUMBA_ISA")
    fc = ModelBuilder()
    x = fc.add_input("x", np.float32, [4, 64])
    w = fc.add_const("w", np.random.default_rng(3).standard_normal((32, 64)).astype(np.float32))
    y = fc.add_tensor("y", np.float32, [4, 32])
    fc.add_op("FULLY_CONNECTED", [x, w, -1], [y])
    fc.mark_output(y)
    data = fc.build()
    fast = CompiledModel.from_buffer(data)
    ref = CompiledModel.from_buffer(data, options=Options(cpu_options=CpuOptions(kernel_mode=CpuKernelMode.REFERENCE,
                                                                                 num_threads=2)))
    assert os.environ.get("LITE_NUMBA_ISA") == before
    sources = {name: "".join(step.source for kind, step in cm._model.rt.graph(0).steps if kind == "segment")
               for name, cm in (("fast", fast), ("ref", ref))}
    assert "simd" not in sources["ref"] and "fc_loops" in sources["ref"]
    assert ref._model.rt.num_threads == 2 and fast._model.rt.num_threads == 1
    xs = np.random.default_rng(4).standard_normal((4, 64)).astype(np.float32)
    results = []
    for cm in (fast, ref):
        ins, outs = cm.create_input_buffers(0), cm.create_output_buffers(0)
        ins[0].write(xs)
        cm.run_by_index(0, ins, outs)
        results.append(outs[0].read(128, np.float32))
    assert_close(results[1], results[0], family="accumulation")


def test_install_as_tflite_runtime_provides_the_litert2_modules(tmp_path):
    script = (
        "import lite_numba, numpy as np\n"
        "lite_numba.install_as_tflite_runtime()\n"
        "from ai_edge_litert.compiled_model import CompiledModel, TensorBuffer\n"
        "from ai_edge_litert.tensor_buffer import TensorBuffer as TB\n"
        "from ai_edge_litert.hardware_accelerator import HardwareAccelerator\n"
        "from ai_edge_litert.options import Options, GpuOptions, QualcommOptions\n"
        "from ai_edge_litert.cpu_options import CpuOptions\n"
        "from ai_edge_litert.cpu_kernel_mode import CpuKernelMode\n"
        "from ai_edge_litert.environment import Environment\n"
        "from ai_edge_litert.gpu_options import GpuOptions as G\n"
        "from ai_edge_litert.intel_openvino_options import IntelOpenVinoOptions\n"
        "import lite_numba.compiled_model as ours\n"
        "assert CompiledModel is ours.CompiledModel and TB is TensorBuffer is ours.TensorBuffer and G is GpuOptions\n"
        f"cm = CompiledModel.from_file({str(tmp_path / 'm.tflite')!r})\n"
        "print(cm.get_signature_list(), cm.is_fully_accelerated())\n"
    )
    (tmp_path / "m.tflite").write_bytes(model("plain"))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[-2] == "{'<placeholder signature>': {'inputs': ['x'], 'outputs': ['y']}} True"


def test_example_runs_unchanged_after_the_import_switch(tmp_path):
    """examples/compiled_model_classify.py is written for ai-edge-litert; with its import lines changed to
    lite_numba it gives the same probabilities."""
    require_official()
    source = (ROOT / "examples" / "compiled_model_classify.py").read_text()
    switched = source.replace("from ai_edge_litert.", "from lite_numba.")
    assert switched != source and "ai_edge_litert" not in switched.split('"""', 2)[2]
    (tmp_path / "ours.py").write_text(switched)
    model_path = str(ROOT / "lite_numba" / "examples" / "small_cnn_f32.tflite")
    results = {}
    for side, path in (("official", ROOT / "examples" / "compiled_model_classify.py"), ("ours", tmp_path / "ours.py")):
        out = tmp_path / f"{side}.npy"
        run = subprocess.run([sys.executable, str(path), "--model", model_path, "--images", "4", "--out", str(out)],
                             capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert run.returncode == 0, run.stderr[-2000:]
        assert "fully accelerated: True" in run.stdout
        results[side] = np.load(out)
    assert results["ours"].shape == (4, 10)
    assert_close(results["ours"], results["official"], family="model")


def test_litert_benchmark_command(tmp_path):
    """`lite-numba benchmark --model ...` and `lite-numba litert-benchmark` take litert-benchmark's flags and write
    its result document."""
    require_official()
    path = tmp_path / "pair.tflite"
    path.write_bytes(model("multi"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    docs = {}
    for side, cmd in (("official", [sys.executable, "-m", "ai_edge_litert.tools.benchmark_litert_model"]),
                      ("ours", [sys.executable, "-m", "lite_numba.tools.cli", "benchmark"]),
                      ("ours2", [sys.executable, "-m", "lite_numba.tools.cli", "litert-benchmark"])):
        out = tmp_path / f"{side}.json"
        run = subprocess.run([*cmd, "--model", str(path), "--signature", "square", "--num_runs", "5",
                              "--warmup_runs", "1", "--result_json", str(out)], capture_output=True, text=True,
                             env=env)
        assert run.returncode == 0, run.stderr[-2000:]
        assert "BENCHMARK RESULTS" in run.stdout and "Inference (median):" in run.stdout
        docs[side] = json.loads(out.read_text())
    shape = lambda d: {k: sorted(v) if isinstance(v, dict) else type(v).__name__ for k, v in d.items()}  # noqa: E731
    assert shape(docs["ours"]) == shape(docs["official"]) == shape(docs["ours2"])
    assert docs["ours"]["signature"] == "square" and docs["ours"]["latency"]["num_runs"] == 5
    gpu = subprocess.run([sys.executable, "-m", "lite_numba.tools.cli", "benchmark", "--model", str(path),
                          "--use_gpu", "--num_runs", "2"], capture_output=True, text=True, env=env)
    assert gpu.returncode == 0 and "Fully accelerated:     False" in gpu.stdout and "GPU | CPU" in gpu.stderr
    full = subprocess.run([sys.executable, "-m", "lite_numba.tools.cli", "litert-benchmark", "--model", str(path),
                           "--use_gpu", "--require_full_delegation"], capture_output=True, text=True, env=env)
    assert full.returncode == 1 and "CPU only" in full.stderr
