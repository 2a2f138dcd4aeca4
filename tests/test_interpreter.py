"""The Interpreter API against the official runtime: detail dicts, error texts, resolvers, signatures."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import MODELS
from small_models import add_model

from lite_numba import BuiltinOpResolver, Interpreter, MutableOpResolver, custom_op
from lite_numba.builder import ModelBuilder
from lite_numba.runtime.executor import PrepareError
from lite_numba.testing import assert_details_equal, official_interpreter

ALL_MODELS = sorted(p.stem for p in MODELS.glob("*.tflite"))


@pytest.mark.parametrize("name", ALL_MODELS)
def test_details_match_official(official, name):
    path = MODELS / f"{name}.tflite"
    ours = Interpreter(model_path=str(path))
    theirs = official_interpreter(path, num_threads=None, allocate=False)
    assert_details_equal(ours.get_input_details(), theirs.get_input_details())
    assert_details_equal(ours.get_output_details(), theirs.get_output_details())
    assert ours.get_signature_list() == theirs.get_signature_list()
    try:
        theirs.allocate_tensors()
    except RuntimeError:  # seed_atan: the official runtime lacks the custom op (ours has the plugin)
        return
    ours.allocate_tensors()
    assert_details_equal(ours.get_input_details(), theirs.get_input_details())
    assert_details_equal(ours.get_output_details(), theirs.get_output_details())
    ours_t = {d["index"]: d for d in ours.get_tensor_details()}
    # the official kernels add their own temporaries (indices past the model's tensors) to the list
    theirs_t = [d for d in theirs.get_tensor_details() if d["index"] < len(ours_t)]
    assert_details_equal([ours_t[d["index"]] for d in theirs_t], theirs_t)


def test_signature_names_ordered_as_officially(official):
    """A SignatureDef whose names the file lists out of order: the official runtime orders them by name (a std::map)
    in the signature lists, the runner's details and the runner's result."""
    b = ModelBuilder()
    x, x2 = b.add_input("x", np.float32, [2]), b.add_input("x2", np.float32, [2])
    y, y2 = b.add_tensor("y", np.float32, [2]), b.add_tensor("y2", np.float32, [2])
    b.add_op("ADD", [x, x2], [y])
    b.add_op("NEG", [y], [y2])
    b.mark_output(y)
    b.mark_output(y2)
    b.add_signature("s", {"zin": x, "ain": x2}, {"zout": y, "aout": y2})
    data = b.build()
    ours, theirs = Interpreter(model_content=data), official_interpreter(data, num_threads=None, allocate=False)
    assert ours.get_signature_list() == theirs.get_signature_list()
    assert list(ours.get_signature_list()["s"]["inputs"]) == ["ain", "zin"]
    assert ours._get_full_signature_list() == theirs._get_full_signature_list()
    r_ours, r_theirs = ours.get_signature_runner(), theirs.get_signature_runner()
    assert list(r_ours.get_input_details()) == list(r_theirs.get_input_details())
    feed = {"zin": np.ones(2, np.float32), "ain": np.full(2, 2.0, np.float32)}
    got, want = r_ours(**feed), r_theirs(**feed)
    assert list(got) == list(want) == ["aout", "zout"]
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


def test_unknown_builtin_version_fails_at_construction_with_official_text(official):
    data = add_model(version=99)
    with pytest.raises(ValueError) as theirs:
        official_interpreter(data, num_threads=None, allocate=False)
    with pytest.raises(ValueError) as ours:
        Interpreter(model_content=data)
    assert str(ours.value).strip() == str(theirs.value).strip()
    assert "Didn't find op for builtin opcode 'ADD' version '99'" in str(ours.value)


def test_unresolved_custom_op_fails_at_allocate_with_official_text(official):
    path = str(MODELS / "seed_atan.tflite")
    theirs = official_interpreter(path, num_threads=None, allocate=False)
    with pytest.raises(RuntimeError) as e_theirs:
        theirs.allocate_tensors()
    ours = Interpreter(model_path=path, op_resolver=BuiltinOpResolver())
    with pytest.raises(RuntimeError) as e_ours:
        ours.allocate_tensors()
    assert str(e_ours.value) == str(e_theirs.value)


def test_custom_op_version_ranges():
    @custom_op("MyOp", versions=(1, 2), register=False)
    def my_op(x, out):
        for i in range(x.size):
            out.flat[i] = x.flat[i] * np.float32(2.0)

    r = MutableOpResolver()
    r.add_custom("MyOp", my_op, min_version=1, max_version=2)
    assert r.find_custom("MyOp", 1) is my_op and r.find_custom("MyOp", 2) is my_op
    assert r.find_custom("MyOp", 3) is None
    for version, ok in ((1, True), (2, True), (3, False)):
        b = ModelBuilder()
        x = b.add_input("x", np.float32, [4])
        y = b.add_tensor("y", np.float32, [4])
        b.add_custom_op("MyOp", [x], [y], version=version)
        b.mark_output(y)
        it = Interpreter(model_content=b.build(), op_resolver=r)
        if ok:
            it.allocate_tensors()
            it.set_tensor(0, np.arange(4, dtype=np.float32))
            it.invoke()
            np.testing.assert_array_equal(it.get_tensor(y), np.arange(4, dtype=np.float32) * 2)
        else:
            with pytest.raises(RuntimeError, match="Encountered unresolved custom op: MyOp"):
                it.allocate_tensors()


def test_add_builtin_overrides_and_versions():
    from lite_numba.kernels.registry import BUILTINS

    add = next(k for op, lo, hi, k in BUILTINS if op == "ADD")
    r = MutableOpResolver()
    r.add_builtin("ADD", add, min_version=1, max_version=1)
    Interpreter(model_content=add_model(version=1), op_resolver=r)
    with pytest.raises(ValueError, match="version '2'"):
        Interpreter(model_content=add_model(version=2), op_resolver=r)
    r2 = MutableOpResolver()
    r2.add_all(r)
    assert r2.find_builtin("ADD", 1) is add


def test_set_tensor_errors_match_official(official):
    path = str(MODELS / "op_add_int8.tflite")
    theirs = official_interpreter(path, num_threads=None, allocate=False)
    ours = Interpreter(model_path=path)
    for it in (theirs, ours):
        it.allocate_tensors()
    for bad in (np.zeros((1, 4, 6, 3), np.float32), np.zeros((1, 4, 6, 2), np.int8), np.zeros((4, 6, 3), np.int8)):
        with pytest.raises(ValueError) as a:
            theirs.set_tensor(0, bad)
        with pytest.raises(ValueError) as b:
            ours.set_tensor(0, bad)
        assert str(a.value) == str(b.value)
    for call in (lambda it: it.set_tensor(99, np.zeros(1)), lambda it: it.get_tensor(999)):
        with pytest.raises(ValueError) as a:
            call(theirs)
        with pytest.raises(ValueError) as b:
            call(ours)
        assert str(a.value) == str(b.value)


def test_not_ready_errors(official):
    path = str(MODELS / "op_add.tflite")
    theirs, ours = official_interpreter(path, num_threads=None, allocate=False), Interpreter(path)
    for call, exc in ((lambda it: it.invoke(), RuntimeError), (lambda it: it.get_tensor(0), ValueError)):
        with pytest.raises(exc) as a:
            call(theirs)
        with pytest.raises(exc) as b:
            call(ours)
        assert str(a.value) == str(b.value)


def test_short_form_bytes_tensor_view_and_subgraphs():
    data = (MODELS / "op_add.tflite").read_bytes()
    it = Interpreter(data)
    it.allocate_tensors()
    x = np.random.default_rng(0).standard_normal((1, 4, 6, 3)).astype(np.float32)
    it.set_tensor(0, x)
    it.set_tensor(1, x)
    it.invoke()
    out = it.get_output_details()[0]["index"]
    view = it.tensor(out)
    np.testing.assert_array_equal(view(), x + x)
    assert it.num_subgraphs() == 1
    with pytest.raises(ValueError, match="Can't both provide"):
        Interpreter(model_path="x", model_content=data)


def test_resize_tensor_input_strict_and_dynamic_batch(official):
    path = str(MODELS / "dynamic_batch_mlp.tflite")
    it = Interpreter(path)
    with pytest.raises(RuntimeError, match="ResizeInputTensorStrict only allows mutating unknown dimensions"):
        it.resize_tensor_input(0, [3, 9], strict=True)
    it.resize_tensor_input(0, [3, 8], strict=True)
    it.allocate_tensors()
    assert list(it.get_input_details()[0]["shape"]) == [3, 8]


def test_signature_runner_errors(official):
    path = str(MODELS / "multi_signature_add_mul.tflite")
    theirs, ours = official_interpreter(path, num_threads=None, allocate=False), Interpreter(path)
    for call in (lambda it: it.get_signature_runner("nope"),
                 lambda it: it.get_signature_runner("add")(a=np.zeros(4, np.float32))):
        with pytest.raises(ValueError) as a:
            call(theirs)
        with pytest.raises(ValueError) as b:
            call(ours)
        assert str(a.value) == str(b.value)
    r_ours, r_theirs = ours.get_signature_runner("mul"), theirs.get_signature_runner("mul")
    for get in (lambda r: r.get_input_details(), lambda r: r.get_output_details()):
        a, b = get(r_ours), get(r_theirs)
        assert list(a) == list(b)
        assert_details_equal([a[k] for k in a], [b[k] for k in b])


def test_prepare_error_names_op_and_node():
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 3])
    y = b.add_input("y", np.float32, [4, 5])
    z = b.add_tensor("z", np.float32, [2, 3])
    b.add_op("ADD", [x, y], [z])
    b.mark_output(z)
    it = Interpreter(model_content=b.build())
    with pytest.raises(PrepareError, match=r"ADD \(version 1, node 0\).*cannot be broadcast"):
        it.allocate_tensors()


def test_model_content_buffers(official, tmp_path):
    """bytes and a read-only mmap are used as they are (the plan's constants are views of the map: closing it while
    the interpreter lives raises BufferError, so nothing was copied); a bytearray, a memoryview or a writable map
    is copied (zeroing it afterwards changes nothing); anything else is a TypeError naming model_content."""
    import mmap

    from lite_numba.api.compiled_model import CompiledModel

    b = ModelBuilder()
    x = b.add_input("x", np.float32, [4])
    y = b.add_tensor("y", np.float32, [4])
    b.add_op("ADD", [x, b.add_const("k", np.array([1.5, -2.0, 0.25, 8.0], np.float32))], [y])
    b.mark_output(y)
    data = b.build()
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    feed = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    theirs = official_interpreter(data)
    theirs.set_tensor(theirs.get_input_details()[0]["index"], feed)
    theirs.invoke()
    want = theirs.get_tensor(theirs.get_output_details()[0]["index"])

    def run(content):
        it = Interpreter(model_content=content)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], feed)
        it.invoke()
        return it, it.get_tensor(it.get_output_details()[0]["index"])

    with open(path, "rb") as f:
        ro = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    it, got = run(ro)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(BufferError):
        ro.close()  # the interpreter reads the map itself
    cm = CompiledModel.from_buffer(ro)
    assert cm is not None
    del it, cm
    with open(path, "r+b") as f:
        rw = mmap.mmap(f.fileno(), 0)
    for content in (bytearray(data), memoryview(bytearray(data)), rw):
        it, got = run(content)
        content[:] = bytes(len(data))  # (copied at construction: the interpreter does not see this)
        it.invoke()
        np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]), want)
    rw.close()  # (a copy was made: nothing holds the map)
    for bad in ("model", 3, None.__class__):
        with pytest.raises(TypeError, match="model_content must be bytes"):
            Interpreter(model_content=bad)
