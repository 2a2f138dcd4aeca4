"""Drop-in conformance: every Interpreter behaviour a program ported from ai_edge_litert / tflite_runtime / tf.lite
relies on, run side by side with the official runtime. Where lite-numba differs on purpose (copies and pickling,
which the official runtime refuses; delegates, which we cannot apply; earlier or clearer errors), the test asserts
the behaviour README's "Switching" section and docs/architecture.md ("API guarantees") document."""

from __future__ import annotations

import copy
import functools
import inspect
import multiprocessing
import os
import pickle
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
from conformance_ops import conformance_triple, run_steps, triple_model
from conftest import DATA, MODELS, require_module
from small_models import add_model

import lite_numba
import lite_numba.interpreter as ours
from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_details_equal, official_interpreter

ROOT = Path(__file__).resolve().parents[1]
MWW = DATA / "real" / "microwakeword_okay_nabu.tflite"  # int8 streaming model with resource variables


def _outcome(fn):
    """(exception type or None, message or result) of calling fn."""
    try:
        return None, fn()
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return type(e), str(e)


def _mlp(batch: int = 1, width: int = 64, layers: int = 6) -> tuple[bytes, int]:
    """A chain of FULLY_CONNECTED layers sharing one weight tensor; returns (model, output index)."""
    b = ModelBuilder()
    t = b.add_input("x", np.float32, [batch, width])
    w = b.add_const("w", (np.random.default_rng(0).standard_normal((width, width)) / np.sqrt(width)).astype(
        np.float32))
    for k in range(layers):
        o = b.add_tensor(f"h{k}", np.float32, [batch, width])
        b.add_op("FULLY_CONNECTED", [t, w, -1], [o], options={"fused_activation_function": "RELU"})
        t = o
    b.mark_output(t)
    return b.build(), t


def _both(official, model: bytes):
    ours_it = ours.Interpreter(model_content=model)
    theirs = official_interpreter(model, num_threads=None, allocate=False)
    return ours_it, theirs


# --- 1. silent wrong results ------------------------------------------------------------------------------------

def test_redundant_allocate_keeps_inputs_and_costs_nothing(official):
    data = add_model(signature=True)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.full((2, 3), 10, np.float32)
    outs = []
    for it in _both(official, data):
        it.allocate_tensors()
        it.set_tensor(0, a)
        it.set_tensor(1, b)
        it.allocate_tensors()  # nothing resized: officially a no-op
        it.resize_tensor_input(0, [2, 3])  # the same shape: no resize either
        it.allocate_tensors()
        it.invoke()
        outs.append(it.get_tensor(2))
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], a + b)
    it = ours.Interpreter(model_content=data)
    it.allocate_tensors()
    arena, program = it.runtime.main.arena, it.runtime.main.program
    it.allocate_tensors()
    assert it.runtime.main.arena is arena and it.runtime.main.program is program  # not prepared again


def test_one_interpreter_two_threads_raises_naming_the_rule():
    data, out = _mlp(batch=64, width=512, layers=12)  # ~100 ms per invoke: the other thread is surely inside
    it = ours.Interpreter(model_content=data)
    it.allocate_tensors()
    x = np.random.default_rng(1).standard_normal((64, 512)).astype(np.float32)
    it.set_tensor(0, x)
    it.invoke()
    expected = it.get_tensor(out)
    errors: list[str] = []
    for _attempt in range(5):
        worker = threading.Thread(target=it.invoke)
        worker.start()
        while it._slot and worker.is_alive():  # until the worker is inside invoke()
            pass
        for call in (lambda: it.set_tensor(0, x), it.invoke, lambda: it.get_tensor(out), it.allocate_tensors,
                     lambda: it.resize_tensor_input(0, [64, 512])):
            kind, msg = _outcome(call)
            if kind is not None:
                assert kind is RuntimeError and "one Interpreter per thread" in msg, msg
                errors.append(msg)
        worker.join()
        if errors:
            break
    assert errors, "no call was refused while another thread was inside invoke()"
    np.testing.assert_array_equal(it.get_tensor(out), expected)


def test_shared_interpreter_never_returns_a_wrong_number():
    data, out = _mlp()
    it = ours.Interpreter(model_content=data)
    it.allocate_tensors()
    x = np.random.default_rng(2).standard_normal((1, 64)).astype(np.float32)
    it.set_tensor(0, x)
    it.invoke()
    expected = it.get_tensor(out)
    wrong, refused = [], []

    def work():
        for _ in range(3000):
            try:
                it.set_tensor(0, x)
                it.invoke()
                y = it.get_tensor(out)
            except RuntimeError as e:
                assert "one Interpreter per thread" in str(e)
                refused.append(1)
                continue
            if not np.array_equal(y, expected):
                wrong.append(y)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong, f"{len(wrong)} wrong results ({len(refused)} calls refused)"


def test_clones_in_two_threads_match_sequential_runs():
    data, out = _mlp()
    it = ours.Interpreter(model_content=data)
    it.allocate_tensors()
    xs = np.random.default_rng(3).standard_normal((100, 1, 64)).astype(np.float32)
    sequential = []
    for x in xs:
        it.set_tensor(0, x)
        it.invoke()
        sequential.append(it.get_tensor(out))
    mismatches = []

    def work(clone, offset):
        for k in range(5000):  # 2 threads x 5000 = 10,000 invokes
            j = (k + offset) % len(xs)
            clone.set_tensor(0, xs[j])
            clone.invoke()
            if not np.array_equal(clone.get_tensor(out), sequential[j]):
                mismatches.append(j)

    threads = [threading.Thread(target=work, args=(it.clone(), off)) for off in (0, 37)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not mismatches


def test_clone_shares_model_and_compiled_code_but_not_memory():
    data, out = _mlp()
    it = ours.Interpreter(model_content=data)
    it.allocate_tensors()
    c = it.clone()
    assert c.runtime.main.ready and c.model is it.model and c.runtime.kernels is it.runtime.kernels
    w = 1  # the weight tensor
    assert np.shares_memory(c.runtime.main.tensors[w].data, it.runtime.main.tensors[w].data)
    assert not np.shares_memory(c.runtime.main.arena, it.runtime.main.arena)
    assert [fn for fn, _ in c.runtime.main.program] == [fn for fn, _ in it.runtime.main.program]  # same runner
    assert c.runtime.main.steps[0][1].aux is it.runtime.main.steps[0][1].aux  # packed weights shared, not packed again
    x = np.ones((1, 64), np.float32)
    it.set_tensor(0, x)
    it.invoke()
    expected = it.get_tensor(out)
    c.set_tensor(0, -x)
    c.invoke()
    c.profile(num_runs=2)  # profiling runs the kernels one by one from Python: on the clone's memory too
    np.testing.assert_array_equal(it.get_tensor(out), expected)
    assert not np.array_equal(c.get_tensor(out), expected)
    c.resize_tensor_input(0, [3, 64])  # the clone prepares on its own; the original keeps its plan
    c.allocate_tensors()
    c.set_tensor(0, np.concatenate([x, -x, x]))
    c.invoke()
    np.testing.assert_array_equal(c.get_tensor(out)[2:], expected)
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(out), expected)
    assert tuple(it.get_input_details()[0]["shape"]) == (1, 64)


def test_deepcopy_is_independent_and_keeps_state(official):
    data = add_model(signature=True)
    theirs = official_interpreter(data, num_threads=None, allocate=False)
    kind, msg = _outcome(lambda: copy.deepcopy(theirs))
    assert kind is TypeError  # the official runtime cannot copy; lite-numba copies (documented)
    it = ours.Interpreter(model_content=data)
    it.allocate_tensors()
    a, b = np.ones((2, 3), np.float32), np.full((2, 3), 2, np.float32)
    it.set_tensor(0, a)
    it.set_tensor(1, b)
    it.invoke()
    for dup in (copy.deepcopy(it), copy.copy(it)):
        np.testing.assert_array_equal(dup.get_tensor(2), a + b)  # the state came along
        assert not np.shares_memory(dup.runtime.main.arena, it.runtime.main.arena)
        dup.set_tensor(0, 5 * a)
        dup.invoke()
        np.testing.assert_array_equal(dup.get_tensor(2), 5 * a + b)
        np.testing.assert_array_equal(it.get_tensor(2), a + b)  # the original is untouched


def test_deepcopy_carries_resource_variables(official):
    it = ours.Interpreter(model_path=str(MWW))
    it.allocate_tensors()
    d = it.get_input_details()[0]
    xs = np.random.default_rng(4).integers(-128, 128, (8, *d["shape"])).astype(np.int8)
    steps = lambda interp, seq: run_steps((interp, seq))  # noqa: E731
    steps(it, xs[:4])
    dup = copy.deepcopy(it)
    np.testing.assert_array_equal(np.array(steps(dup, xs[4:])), np.array(steps(it, xs[4:])))
    theirs = official_interpreter(str(MWW), num_threads=None, allocate=False)
    theirs.allocate_tensors()
    fresh = ours.Interpreter(model_path=str(MWW))
    fresh.allocate_tensors()
    np.testing.assert_array_equal(np.array(steps(fresh, xs)), np.array(steps(theirs, xs)))


VIEW_TEXT = "There is at least 1 reference to internal data"


def test_tensor_views_are_guarded_as_officially(official):
    data = add_model(signature=True)
    texts = []
    for it in _both(official, data):
        it.allocate_tensors()
        get_x = it.tensor(0)  # holding the function is fine
        it.set_tensor(1, np.ones((2, 3), np.float32))
        get_x()[...] = 4  # writing through a temporary view is fine
        it.invoke()
        np.testing.assert_array_equal(it.get_tensor(2), np.full((2, 3), 5, np.float32))
        view = get_x()
        part = view[0]  # a slice keeps the guard up too
        del view
        results = [_outcome(it.invoke), _outcome(it.allocate_tensors),
                   _outcome(lambda it=it: it.resize_tensor_input(0, [2, 3]))]
        for kind, msg in results:
            assert kind is RuntimeError and msg.startswith(VIEW_TEXT), (type(it), kind, msg)
        texts.append([msg for _, msg in results])
        it.set_tensor(0, np.ones((2, 3), np.float32))  # set/get are allowed while a view is held
        it.get_tensor(2)
        del part
        it.invoke()  # the guard is lifted once the arrays are gone
        np.testing.assert_array_equal(it.get_tensor(2), np.full((2, 3), 2, np.float32))
    assert texts[0] == texts[1]


def test_tensor_function_reaches_the_model_after_resize_and_allocate(official):
    data = add_model(signature=True)
    outs = []
    for it in _both(official, data):
        it.allocate_tensors()
        get_x = it.tensor(0)
        for i in (0, 1):
            it.resize_tensor_input(i, [4, 3])
        it.allocate_tensors()  # storage moves: the function returns a view of the new storage
        get_x()[...] = 3
        it.set_tensor(1, np.ones((4, 3), np.float32))
        it.invoke()
        outs.append(it.get_tensor(2))
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], np.full((4, 3), 4, np.float32))


def test_constant_views_are_read_only():
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [3])
    c = b.add_const("c", np.ones(3, np.float32))
    y = b.add_tensor("y", np.float32, [3])
    b.add_op("ADD", [x, c], [y])
    b.mark_output(y)
    it = ours.Interpreter(model_content=b.build())
    it.allocate_tensors()
    v = it.tensor(c)()
    assert not v.flags.writeable  # officially writable (and the compiled plan would silently ignore it)
    np.testing.assert_array_equal(v, np.ones(3, np.float32))


def test_constructor_keywords(official):
    data = add_model(signature=True)
    params = inspect.signature(official.Interpreter.__init__).parameters
    ours_params = inspect.signature(ours.Interpreter.__init__).parameters
    names = [n for n in params if n != "self"]
    assert [n for n in ours_params if n != "self"][:len(names)] == names  # same names, same positions
    for name in names:
        if name in ("model_path", "model_content"):
            continue
        kwargs = {name: params[name].default}
        ours.Interpreter(model_content=data, **kwargs)
        official.Interpreter(model_content=data, **kwargs)
    it = ours.Interpreter(model_content=data, experimental_compress_quantization_zero_points=True)
    assert it.experimental_compress_quantization_zero_points is True
    for call in (lambda L: L.Interpreter(model_content=data, nmu_threads=4),
                 lambda L: L.Interpreter(data, None, None, 1, None, False, False, False, False, False, False, None)):
        kind_o, msg_o = _outcome(lambda call=call: call(ours))
        kind_t, msg_t = _outcome(lambda call=call: call(official))
        assert kind_o is kind_t is TypeError
    assert "nmu_threads" in _outcome(lambda: ours.Interpreter(model_content=data, nmu_threads=4))[1]


def test_delegates_are_refused_never_ignored(official):
    data = add_model(signature=True)
    for delegates in ([object()], ["libedgetpu.so.1"]):
        kind, msg = _outcome(lambda d=delegates: ours.Interpreter(model_content=data, experimental_delegates=d))
        assert kind is lite_numba.api.delegates.DelegateError and "cannot load or apply TFLite delegates" in msg
        assert issubclass(kind, ValueError)
    ours.Interpreter(model_content=data, experimental_delegates=[])  # no delegate: fine, as officially
    official.Interpreter(model_content=data, experimental_delegates=[])
    kind_t, msg_t = _outcome(lambda: official.load_delegate("liblite_numba_no_such_delegate.so"))
    kind_o, msg_o = _outcome(lambda: ours.load_delegate("liblite_numba_no_such_delegate.so"))
    assert issubclass(kind_o, kind_t)  # official: OSError from ctypes; ours is also the documented ValueError
    assert issubclass(kind_o, ValueError) and msg_o.startswith("Failed to load delegate from liblite_numba_no_such")
    with pytest.raises(ValueError):
        ours.Delegate("libedgetpu.so.1")


# --- 2. custom ops wherever Python code can be written ------------------------------------------------------------

_OP_SOURCE = """\
import sys
import numpy as np
from lite_numba import custom_op, Interpreter

@custom_op("ReplTwice")
def twice(x, out):
    for i in range(x.size):
        out.flat[i] = x.flat[i] * np.float32(2)

it = Interpreter(model_path=MODEL_PATH)
it.allocate_tensors()
it.set_tensor(0, np.arange(4, dtype=np.float32))
it.invoke()
print("RESULT", it.get_tensor(1).tolist(), type(twice.jitted._cache).__name__)
"""


@pytest.fixture(scope="module")
def repl_model(tmp_path_factory) -> str:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [4])
    y = b.add_tensor("y", np.float32, [4])
    b.add_custom_op("ReplTwice", [x], [y])
    b.mark_output(y)
    path = tmp_path_factory.mktemp("repl") / "twice.tflite"
    path.write_bytes(b.build())
    return str(path)


def _python(args, stdin: str | None = None, env_extra: dict | None = None) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "tests")] + sys.path), LITE_NUMBA_PROGRESS="0")
    env.update(env_extra or {})
    r = subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True, timeout=300, env=env,
                       cwd=str(ROOT))
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


@pytest.mark.parametrize("how", ["python -c", "stdin", "exec", "repl"])
def test_custom_op_defined_without_a_source_file(repl_model, how):
    src = _OP_SOURCE.replace("MODEL_PATH", repr(repl_model))
    if how == "python -c":
        out = _python(["-c", src])
    elif how == "stdin":
        out = _python(["-"], stdin=src)
    elif how == "exec":
        out = _python(["-c", f"exec({src!r}, {{'__name__': 'generated'}})"])
    else:  # the interactive interpreter: statements typed one by one, a blank line ends the def
        typed = src.replace("        out.flat[i] = x.flat[i] * np.float32(2)\n",
                            "        out.flat[i] = x.flat[i] * np.float32(2)\n\n")
        out = _python(["-i", "-q"], stdin=typed)
    line = next(ln for ln in out.splitlines() if "RESULT" in ln)
    values, cache = line.split("RESULT ")[1].rsplit(" ", 1)
    assert values == str((np.arange(4, dtype=np.float32) * 2).tolist())
    assert cache == "NullCache"  # compiled without disk caching: nowhere to put it


def test_custom_op_in_a_module_is_disk_cached():
    assert type(conformance_triple.jitted._cache).__name__ != "NullCache"


# --- 3. the official module layout -------------------------------------------------------------------------------

OFFICIAL_NAMES = ("Interpreter", "InterpreterWithCustomOps", "SignatureRunner", "OpResolverType", "load_delegate",
                  "Delegate")


def test_module_offers_the_official_names(official):
    from lite_numba.interpreter import (  # noqa: F401 - the one-line switch
        Interpreter,
        InterpreterWithCustomOps,
        OpResolverType,
        SignatureRunner,
        load_delegate,
    )

    public = {n for n in dir(official) if not n.startswith("_")
              and (inspect.isclass(getattr(official, n)) or inspect.isfunction(getattr(official, n)))}
    assert public == set(OFFICIAL_NAMES)
    for name in OFFICIAL_NAMES:
        assert hasattr(ours, name) and hasattr(official, name)
    assert [(e.name, e.value) for e in ours.OpResolverType] == [(e.name, e.value) for e in official.OpResolverType]
    for cls in ("Interpreter", "SignatureRunner"):
        methods = {n for n in dir(getattr(official, cls)) if not n.startswith("__")}
        assert methods <= set(dir(getattr(ours, cls))), methods - set(dir(getattr(ours, cls)))
    with pytest.raises(RuntimeError, match="no native"):
        ours.Interpreter(model_content=add_model(signature=True))._native_handle()


def test_tf_lite_namespace():
    import lite_numba as tf  # the one-line switch for tf.lite call sites
    from lite_numba import lite

    assert tf.lite is lite and lite.Interpreter is ours.Interpreter
    assert lite.experimental.load_delegate is ours.load_delegate
    assert lite.experimental.OpResolverType is ours.OpResolverType
    it = tf.lite.Interpreter(model_content=add_model(signature=True))
    it.allocate_tensors()


def test_private_detail_methods_match_official(official):
    paths = [MODELS / "control_flow_while_cond.tflite", MODELS / "multi_signature_add_mul.tflite",
             MODELS / "seed_atan.tflite", MODELS / "keras_lstm.tflite"]
    for path in paths:
        o = ours.Interpreter(model_path=str(path))
        t = official_interpreter(str(path), num_threads=None, allocate=False)
        for a, b in zip(o._get_ops_details(), t._get_ops_details(), strict=True):
            assert a.keys() == b.keys()
            for k in a:
                if isinstance(b[k], np.ndarray):
                    np.testing.assert_array_equal(a[k], b[k])
                    assert a[k].dtype == b[k].dtype
                else:
                    assert a[k] == b[k], (path.name, k)
        assert o._get_op_details(0).keys() == t._get_op_details(0).keys()
        assert o._get_full_signature_list() == t._get_full_signature_list()
        for sg in range(o.num_subgraphs()):
            theirs = t.get_tensor_details(subgraph_index=sg)
            n = len(o.model.subgraphs[sg].tensors)
            assert_details_equal(o.get_tensor_details(subgraph_index=sg)[:n], [d for d in theirs if d["index"] < n])
            for i in (0, n - 1):
                assert_details_equal([o._get_tensor_details(i, sg)], [t._get_tensor_details(i, sg)])


def test_signature_runner_constructed_directly(official):
    data = add_model(signature=True)
    a, b = np.ones((2, 3), np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)
    outs = []
    for it, mod in zip(_both(official, data), (ours, official)):
        runner = mod.SignatureRunner(it, signature_key="serving_default")
        outs.append(runner(a=a, b=b)["out"])
        outs.append(mod.SignatureRunner(interpreter=it, signature_key="serving_default")(a=2 * a, b=b)["out"])
    np.testing.assert_array_equal(outs[0], outs[2])
    np.testing.assert_array_equal(outs[1], outs[3])
    np.testing.assert_array_equal(outs[0], a + b)


# --- 3b. every error a ported program may catch: type, and text where the official text is meaningful -------------

def _error_cases(data: bytes, sig_data: bytes):
    """(name, call(module, fresh interpreter), exact text?)"""
    f32 = np.ones((2, 3), np.float32)

    def allocated(L, it):
        it.allocate_tensors()
        return it

    def runner(L, it):
        return allocated(L, it).get_signature_runner("serving_default")

    return [
        ("missing file", lambda L, it: L.Interpreter(model_path="/nonexistent/model.tflite"), True),
        ("a directory", lambda L, it: L.Interpreter(model_path=str(ROOT)), False),
        ("path and content", lambda L, it: L.Interpreter(model_path="x.tflite", model_content=data), True),
        ("no model", lambda L, it: L.Interpreter(), True),
        ("content not bytes", lambda L, it: L.Interpreter(model_content="abc"), False),
        ("content not a model", lambda L, it: L.Interpreter(model_content=b"garbage!" * 10), False),
        ("num_threads 0", lambda L, it: L.Interpreter(model_content=data, num_threads=0), True),
        ("num_threads -1", lambda L, it: L.Interpreter(model_content=data, num_threads=-1), True),
        ("num_threads str", lambda L, it: L.Interpreter(model_content=data, num_threads="2"), True),
        ("num_threads float", lambda L, it: L.Interpreter(model_content=data, num_threads=2.0), True),
        ("resolver type 5", lambda L, it: L.Interpreter(model_content=data, experimental_op_resolver_type=5), True),
        ("set_tensor before allocate", lambda L, it: it.set_tensor(0, f32), True),
        ("set_tensor wrong dtype before allocate", lambda L, it: it.set_tensor(0, f32.astype(np.int32)), True),
        ("get_tensor before allocate", lambda L, it: it.get_tensor(0), True),
        ("tensor() before allocate", lambda L, it: it.tensor(0)(), True),
        ("invoke before allocate", lambda L, it: it.invoke(), True),
        ("set_tensor wrong dtype", lambda L, it: allocated(L, it).set_tensor(0, f32.astype(np.float64)), True),
        ("set_tensor list", lambda L, it: allocated(L, it).set_tensor(0, [[1, 2, 3], [4, 5, 6]]), True),
        ("set_tensor wrong rank", lambda L, it: allocated(L, it).set_tensor(0, np.ones(6, np.float32)), True),
        ("set_tensor wrong dim", lambda L, it: allocated(L, it).set_tensor(0, np.ones((2, 4), np.float32)), True),
        ("set_tensor index 99", lambda L, it: allocated(L, it).set_tensor(99, f32), True),
        ("set_tensor index '0'", lambda L, it: allocated(L, it).set_tensor("0", f32), False),
        ("get_tensor index 99", lambda L, it: allocated(L, it).get_tensor(99), True),
        ("get_tensor index -1", lambda L, it: allocated(L, it).get_tensor(-1), True),
        ("get_tensor index '0'", lambda L, it: allocated(L, it).get_tensor("0"), False),
        ("get_tensor index 1.0", lambda L, it: allocated(L, it).get_tensor(1.0), False),
        ("get_tensor subgraph 1", lambda L, it: allocated(L, it).get_tensor(0, 1), True),
        ("resize to -1", lambda L, it: it.resize_tensor_input(0, [-1, 3]), False),
        ("resize index '0'", lambda L, it: it.resize_tensor_input("0", [2, 3]), False),
        ("invoke after resize", lambda L, it: (allocated(L, it).resize_tensor_input(0, [4, 3]), it.invoke()), True),
        ("tensor details subgraph 5", lambda L, it: it.get_tensor_details(subgraph_index=5), True),
        ("op details 5", lambda L, it: it._get_op_details(5), True),
        ("tensor details 99", lambda L, it: it._get_tensor_details(99, 0), True),
        ("tensor details without subgraph", lambda L, it: it._get_tensor_details(0), False),
        ("runner None key, no signature", lambda L, it: L.Interpreter(model_content=data).get_signature_runner(),
         True),
        ("runner bad key", lambda L, it: it.get_signature_runner("nope"), True),
        ("SignatureRunner()", lambda L, it: L.SignatureRunner(), True),
        ("SignatureRunner(it)", lambda L, it: L.SignatureRunner(it), True),
        ("SignatureRunner bad key", lambda L, it: L.SignatureRunner(it, signature_key="nope"), True),
        ("runner missing input", lambda L, it: runner(L, it)(a=f32), True),
        ("runner bad name", lambda L, it: runner(L, it)(a=f32, c=f32), True),
        ("runner wrong dtype", lambda L, it: runner(L, it)(a=f32.astype(np.int32), b=f32), True),
    ]


def test_error_types_and_texts(official):
    data, sig_data = add_model(), add_model(signature=True)
    for name, call, exact in _error_cases(data, sig_data):
        model = sig_data if ("runner" in name or "Runner" in name) else data
        got = {}
        for L in (ours, official):
            it = (L.Interpreter(model_content=model) if L is ours
                  else official_interpreter(model, num_threads=None, allocate=False))
            got[L] = _outcome(lambda call=call, L=L, it=it: call(L, it))
        (kind_o, msg_o), (kind_t, msg_t) = got[ours], got[official]
        assert kind_t is not None, f"{name}: the official runtime raised nothing"
        assert kind_o is not None and issubclass(kind_o, kind_t), f"{name}: ours {kind_o} {msg_o!r}, official " \
                                                                   f"{kind_t} {msg_t!r}"
        if exact:
            assert msg_o == msg_t, name


# --- 4. install_as_tflite_runtime ---------------------------------------------------------------------------------

_LIBRARY = '''\
"""What libraries do: the official runtime imported by name inside their own code."""
import numpy as np
import tflite_runtime.interpreter as tflite


class Classifier:
    def __init__(self, path):
        self.interpreter = tflite.Interpreter(model_path=path, num_threads=1)
        self.interpreter.allocate_tensors()
        self.inp = self.interpreter.get_input_details()[0]
        self.out = self.interpreter.get_output_details()[0]

    def __call__(self, batch):
        self.interpreter.resize_tensor_input(self.inp["index"], batch.shape)
        self.interpreter.allocate_tensors()
        self.interpreter.set_tensor(self.inp["index"], batch)
        self.interpreter.invoke()
        return self.interpreter.get_tensor(self.out["index"])
'''


def test_install_is_opt_in():
    out = _python(["-c", "import sys, lite_numba as tf; print(sorted(n for n in sys.modules if n.startswith("
                         "('tflite_runtime', 'ai_edge_litert')))); print(tf.lite.Interpreter.__module__)"])
    assert out.split() == ["[]", "lite_numba.interpreter"]


def test_install_as_tflite_runtime_runs_a_library_written_for_it(tmp_path, official):
    (tmp_path / "classifier_lib.py").write_text(_LIBRARY)
    model = MODELS / "dynamic_batch_mlp.tflite"
    x = np.random.default_rng(5).standard_normal((5, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    script = textwrap.dedent(f"""
        import sys, numpy as np
        sys.path.insert(0, {str(tmp_path)!r})
        import lite_numba
        lite_numba.install_as_tflite_runtime()
        import classifier_lib, tflite_runtime.interpreter
        assert classifier_lib.tflite.Interpreter is lite_numba.Interpreter
        from ai_edge_litert.interpreter import Interpreter
        assert Interpreter is lite_numba.Interpreter
        y = classifier_lib.Classifier({str(model)!r})(np.load({str(tmp_path / "x.npy")!r}))
        np.save({str(tmp_path / "y.npy")!r}, y)
    """)
    _python(["-c", script])
    theirs = official_interpreter(str(model), num_threads=None, allocate=False)
    theirs.resize_tensor_input(0, [5, 8])
    theirs.allocate_tensors()
    theirs.set_tensor(0, x)
    theirs.invoke()
    expected = theirs.get_tensor(theirs.get_output_details()[0]["index"])
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected, rtol=1e-5, atol=1e-6)


def _require_plugin():
    require_module("ovos_ww_plugin_microwakeword.inference", "test")


_PLUGIN_RUN = """
import sys, numpy as np
INSTALL
from ovos_ww_plugin_microwakeword import inference
engine = inference.MicroWakeWordEngine(MODEL)
pcm = np.load(PCM)
probs = []
for k in range(0, len(pcm), 3200):
    probs += engine.process_audio(pcm[k:k + 3200].tobytes())
engine.reset()  # the plugin re-allocates to reset; officially a no-op (nothing was resized)
probs += engine.process_audio(pcm[:6400].tobytes())
print("RUNTIME", getattr(inference.Interpreter, "func", inference.Interpreter).__module__)
print("PROBS", repr([float(p) for p in probs]))
"""


def test_real_library_runs_unchanged_on_lite_numba(tmp_path):
    """ovos-ww-plugin-microwakeword imports ai_edge_litert.interpreter (else tflite_runtime.interpreter) in its own
    code; after install_as_tflite_runtime() it runs on lite-numba and gives the official probabilities bit for bit."""
    _require_plugin()
    rng = np.random.default_rng(6)
    t = np.arange(16000 * 2) / 16000
    pcm = (3000 * np.sin(2 * np.pi * 440 * t) + rng.normal(0, 800, t.size)).astype(np.int16)
    np.save(tmp_path / "pcm.npy", pcm)
    results = {}
    # the oracle is the official builtin kernels (the plugin's default would add XNNPACK, which rounds differently)
    builtin = ("import functools, ai_edge_litert.interpreter as L\n"
               "L.Interpreter = functools.partial(L.Interpreter, "
               "experimental_op_resolver_type=L.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)")
    for runtime, install in (("official", builtin),
                             ("ours", "import lite_numba; lite_numba.install_as_tflite_runtime()")):
        src = _PLUGIN_RUN.replace("INSTALL", install).replace("MODEL", repr(str(MWW))).replace(
            "PCM", repr(str(tmp_path / "pcm.npy")))
        out = _python(["-c", src])
        lines = dict(ln.split(" ", 1) for ln in out.splitlines() if ln.startswith(("RUNTIME", "PROBS")))
        results[runtime] = lines
    assert results["official"]["RUNTIME"] == "ai_edge_litert.interpreter"
    assert results["ours"]["RUNTIME"] == "lite_numba.interpreter"
    assert results["ours"]["PROBS"] == results["official"]["PROBS"]
    assert len(eval(results["ours"]["PROBS"])) > 50


# --- 5. pickling --------------------------------------------------------------------------------------------------

def test_official_cannot_pickle_ours_can(official):
    data = triple_model()
    kind, _ = _outcome(lambda: pickle.dumps(official_interpreter(add_model(signature=True), num_threads=None,
                                                                 allocate=False)))
    assert kind is TypeError
    it = ours.Interpreter(model_content=data)
    assert pickle.loads(pickle.dumps(it)).runtime.main.ready is False  # not allocated: stays so
    it.allocate_tensors()
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    it.set_tensor(0, x)
    it.invoke()
    back = pickle.loads(pickle.dumps(it))
    out = it.get_output_details()[0]["index"]
    np.testing.assert_array_equal(back.get_tensor(out), x * 3 + np.arange(8, dtype=np.float32).reshape(2, 4))
    it.resize_tensor_input(0, [1, 4])
    assert tuple(pickle.loads(pickle.dumps(it)).get_input_details()[0]["shape"]) == (1, 4)


def test_interpreter_with_custom_ops_and_explicit_resolvers_pickle():
    data = triple_model()
    x = np.ones((2, 4), np.float32)
    expected = 3 * x + np.arange(8, dtype=np.float32).reshape(2, 4)
    with pytest.raises(ValueError, match="cannot load the native op registerer"):
        ours.InterpreterWithCustomOps(custom_op_registerers=["TF_RegisterConformanceTriple"], model_content=data)
    registered = []
    interps = [
        ours.InterpreterWithCustomOps(custom_op_registerers=[conformance_triple], model_content=data),
        ours.InterpreterWithCustomOps(custom_op_registerers=[
            lambda r: registered.append(r.add_custom("ConformanceTriple", conformance_triple))], model_content=data),
        ours.Interpreter(model_content=data, op_resolver=_resolver_with_triple()),
    ]
    assert len(registered) == 1
    for it in interps:
        it.allocate_tensors()
        it.set_tensor(0, x)
        it.invoke()
        out = it.get_output_details()[0]["index"]
        np.testing.assert_array_equal(it.get_tensor(out), expected)
        back = pickle.loads(pickle.dumps(it))
        assert type(back) is type(it)
        np.testing.assert_array_equal(back.get_tensor(out), expected)


def _resolver_with_triple():
    r = lite_numba.BuiltinOpResolver()
    r.add_custom("ConformanceTriple", conformance_triple)
    return r


def test_pickled_interpreters_run_in_a_spawn_pool(official):
    """A custom-op model and a stateful (resource variable) model, pickled mid-stream, continue in spawned workers
    exactly as in the parent; the parent's runs match the official runtime."""
    data = triple_model()
    xs = [np.random.default_rng(k).standard_normal((2, 4)).astype(np.float32) for k in range(4)]
    it = ours.Interpreter(model_content=data)
    it.allocate_tensors()
    mww = ours.Interpreter(model_path=str(MWW))
    mww.allocate_tensors()
    d = mww.get_input_details()[0]
    seq = np.random.default_rng(7).integers(-128, 128, (10, *d["shape"])).astype(np.int8)
    run_steps((mww, seq[:5]))  # state carried into the pickle
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        remote = pool.map(run_steps, [(it, xs), (mww, seq[5:])])
    local = [run_steps((it, xs)), run_steps((mww, seq[5:]))]
    for r, loc in zip(remote, local):
        np.testing.assert_array_equal(np.array(r), np.array(loc))
    theirs = official_interpreter(str(MWW), num_threads=None, allocate=False)
    theirs.allocate_tensors()
    np.testing.assert_array_equal(np.array(run_steps((theirs, seq))[5:]), np.array(local[1]))
    np.testing.assert_array_equal(np.array(local[0])[:, :, :], np.array([x * 3 + np.arange(8, dtype=np.float32)
                                                                         .reshape(2, 4) for x in xs]))


# --- the snippets of the issue, unchanged but for the import line -------------------------------------------------

def _uint8_classifier() -> bytes:
    rng = np.random.default_rng(0)
    b = ModelBuilder()
    x = b.add_input("image", np.uint8, [1, 4, 4, 3], quant={"scale": 1 / 255, "zero_point": 0})
    r = b.add_tensor("flat", np.uint8, [1, 48], quant={"scale": 1 / 255, "zero_point": 0})
    b.add_op("RESHAPE", [x, b.add_const("shape", np.array([1, 48], np.int32))], [r])
    w = b.add_const("w", rng.integers(0, 256, (10, 48)).astype(np.uint8), quant={"scale": 0.01, "zero_point": 128})
    bias = b.add_const("b", rng.integers(-100, 100, 10).astype(np.int32),
                       quant={"scale": 0.01 / 255, "zero_point": 0})
    logits = b.add_tensor("logits", np.uint8, [1, 10], quant={"scale": 0.05, "zero_point": 120})
    b.add_op("FULLY_CONNECTED", [r, w, bias], [logits])
    probs = b.add_tensor("probs", np.uint8, [1, 10], quant={"scale": 1 / 256, "zero_point": 0})
    b.add_op("SOFTMAX", [logits], [probs], options={"beta": 1.0})
    b.mark_output(probs)
    b.add_signature("serving_default", {"image": x}, {"probs": probs})
    return b.build()


SNIPPETS = {
    "classify": """
interpreter = Interpreter(model_path=MODEL)
interpreter.allocate_tensors()
input_details = interpreter.get_input_details()
output_details = interpreter.get_output_details()
scale, zero_point = input_details[0]["quantization"]
input_data = np.expand_dims(IMAGE / scale + zero_point, axis=0).astype(input_details[0]["dtype"])
interpreter.set_tensor(input_details[0]["index"], input_data)
interpreter.invoke()
first = np.squeeze(interpreter.get_tensor(output_details[0]["index"]))
interpreter.tensor(input_details[0]["index"])()[0] = input_data[0, ::-1]
interpreter.invoke()
output = interpreter.tensor(output_details[0]["index"])
second = np.squeeze(output()).copy()
o_scale, o_zero = output_details[0]["quantization"]
result = (first, second, np.argsort(o_scale * (second.astype(np.float32) - o_zero))[::-1][:3])
""",
    "signature": """
interpreter = Interpreter(model_path=MODEL)
runner = interpreter.get_signature_runner("serving_default")
image = (IMAGE * 255).astype(np.uint8)[None]
result = runner(image=image)["probs"]
""",
    "batch": """
interpreter = Interpreter(model_path=BATCH_MODEL)
input_index = interpreter.get_input_details()[0]["index"]
interpreter.resize_tensor_input(input_index, [5, 8])
interpreter.allocate_tensors()
interpreter.set_tensor(input_index, BATCH)
interpreter.invoke()
result = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
""",
    "delegate fallback": """
try:
    delegate = load_delegate("libedgetpu.so.1")
    interpreter = Interpreter(model_path=MODEL, experimental_delegates=[delegate])
except EXCEPTION:
    interpreter = Interpreter(model_path=MODEL)
interpreter.allocate_tensors()
result = [d["name"] for d in interpreter.get_input_details()]
""",
}

IMPORTS = {
    "official": ("from ai_edge_litert.interpreter import load_delegate, OpResolverType, Interpreter as _I\n"
                 "Interpreter = functools.partial(_I, experimental_op_resolver_type="
                 "OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)"),
    "lite_numba.interpreter": "from lite_numba.interpreter import Interpreter, load_delegate",
    "lite_numba": "from lite_numba import Interpreter, load_delegate",
}


@pytest.mark.parametrize("snippet", list(SNIPPETS))
def test_snippets_run_unchanged_but_for_the_import_line(official, tmp_path, snippet):
    model = tmp_path / "classifier.tflite"
    model.write_bytes(_uint8_classifier())
    rng = np.random.default_rng(8)
    env = {"np": np, "functools": functools, "MODEL": str(model), "IMAGE": rng.random((4, 4, 3)),
           "BATCH_MODEL": str(MODELS / "dynamic_batch_mlp.tflite"),
           "BATCH": rng.standard_normal((5, 8)).astype(np.float32)}
    results = {}
    for name, line in IMPORTS.items():
        # the Coral snippet catches ValueError (the official docstring); the official runtime actually raises
        # ctypes' OSError for a missing library, which lite-numba's DelegateError also is
        exceptions = ["ValueError", "OSError"] if name != "official" else ["OSError"]
        for exc in exceptions:
            ns = dict(env)
            exec(line + "\n" + SNIPPETS[snippet].replace("EXCEPTION", exc), ns)
            results[(name, exc)] = ns["result"]
    reference = results[("official", "OSError")]
    for key, value in results.items():
        if isinstance(reference, tuple):
            for a, b in zip(value, reference, strict=True):
                np.testing.assert_array_equal(a, b, err_msg=str(key))
        elif np.asarray(reference).dtype.kind == "f":  # float kernels: last-bit differences (docs: Numerics)
            np.testing.assert_allclose(value, reference, rtol=1e-5, atol=1e-6, err_msg=str(key))
        else:
            np.testing.assert_array_equal(np.asarray(value), np.asarray(reference), err_msg=str(key))
