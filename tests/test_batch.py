"""lite_numba.batch (issue 18): a model over many examples, a batch at a time. Every result is compared with a plain
loop of Interpreter.invoke, one example at a time (int8 bit for bit, float equal)."""

from __future__ import annotations

import io
import threading

import numpy as np
import pytest
from batch_models import images, plain_loop, two_in_two_out
from conftest import model_path

from lite_numba import Interpreter
from lite_numba.batch import BatchInputError, BatchRunner, run_batches, shared_runner
from lite_numba.builder import ModelBuilder
from lite_numba.runtime.executor import InvokeError


@pytest.mark.parametrize("native", [True, False], ids=["compiled-loop", "python-loop"])
@pytest.mark.parametrize("name,dtype,mode", [("small_cnn_int8", np.int8, "loop"),
                                             ("small_cnn_f32", np.float32, "loop")])
def test_fixed_batch_of_one_runs_example_by_example(name, dtype, mode, native):
    """Loop mode runs a batch's examples in one compiled call (Interpreter.run_rows) when the model's invoke is
    compiled code only, as these are, or one Python set_tensor / invoke / get_tensor per example: the same values."""
    path = model_path(name)
    x = images(37, dtype)
    r = BatchRunner(path, batch_size=16, native=native)
    assert r.mode == mode and r.input_names == ["image"]
    out = r.run(x)
    ref = plain_loop(path, {"image": x})
    assert list(out) == list(ref)
    for k in ref:
        assert out[k].dtype == ref[k].dtype and np.array_equal(out[k], ref[k]), k
    assert r.stats.examples == 37 and r.stats.batches == 3 and r.stats.invokes == 37
    assert r.stats.native_examples == (37 if native else 0)
    assert 0 < r.stats.invoke_s <= r.stats.total_s


def test_dynamic_batch_resizes_to_the_batch():
    path = model_path("dynamic_batch_mlp")
    x = np.random.default_rng(3).standard_normal((45, 8)).astype(np.float32)
    r = BatchRunner(path, batch_size=16)
    assert r.mode == "resize"
    out = r.run(x)
    assert r.stats.invokes == 3  # 16 + 16 + 13
    ref = plain_loop(path, {"x": x})
    np.testing.assert_array_equal(out["Identity"], ref["Identity"])
    # forcing the loop gives the same values, one invoke per example
    loop = BatchRunner(path, batch_size=16, mode="loop")
    np.testing.assert_array_equal(loop.run(x)["Identity"], ref["Identity"])
    assert loop.stats.invokes == 45


@pytest.mark.parametrize("dynamic", [True, False])
def test_several_inputs_and_outputs_from_an_iterable_with_pre_and_postprocessing(dynamic):
    model = two_in_two_out(dynamic)
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((11, 4)).astype(np.float32)
    ss = rng.standard_normal((11, 4)).astype(np.float32)
    raw = [{"a": xs[k].tolist(), "b": ss[k].tolist()} for k in range(11)]  # e.g. JSON records

    def pre(rec):
        return {"x": np.array(rec["a"], np.float32), "s": np.array(rec["b"], np.float32)}

    def post(out):
        return {**out, "best": out["prod"].argmax(axis=1)}

    r = BatchRunner(model, batch_size=4, preprocess=pre, postprocess=post)
    assert r.mode == ("resize" if dynamic else "loop")
    out = r.run(iter(raw))
    assert r.stats.native_examples == (0 if dynamic else 11)  # loop mode: two inputs, two outputs, compiled loop
    ref = plain_loop(model, {"x": xs, "s": ss})
    np.testing.assert_array_equal(out["sum"], ref["sum"])
    np.testing.assert_array_equal(out["prod"], ref["prod"])
    np.testing.assert_array_equal(out["best"], ref["prod"].argmax(axis=1))
    # batches one at a time
    plain = BatchRunner(model, batch_size=5)
    chunks = list(plain.iter_batches({"x": xs, "s": ss}))
    assert [len(c["sum"]) for c in chunks] == [5, 5, 1]
    np.testing.assert_array_equal(np.concatenate([c["prod"] for c in chunks]), ref["prod"])


def test_fixed_batch_larger_than_one_pads_the_last_batch():
    b = ModelBuilder()
    x = b.add_input("x", np.int8, [3, 4])
    y = b.add_tensor("y", np.int8, [3, 4])
    b.add_op("MAXIMUM", [x, b.add_const("z", np.full(4, -5, np.int8))], [y])
    b.mark_output(y)
    model = b.build()
    xs = np.random.default_rng(1).integers(-128, 128, (8, 4), dtype=np.int8)
    r = BatchRunner(model, batch_size=5)
    assert r.mode == "fixed" and r.model_batch == 3
    out = r.run(xs)["y"]
    np.testing.assert_array_equal(out, np.maximum(xs, -5))
    assert r.stats.invokes == 3  # batches of 5 and 3: 3 + 2 (padded to 3), then 3


def test_loop_mode_outputs_whose_shape_varies_are_a_clear_error():
    """One invoke per example: each output is written into its row of one array, so an output whose shape depends
    on the values (TILE by a multiples input) stacks while it keeps its shape and is refused, naming it, when not."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 2])
    m = b.add_input("m", np.int32, [2])
    y = b.add_tensor("y", np.float32, [1, 2], shape_signature=[-1, -1])
    b.add_op("TILE", [x, m], [y])
    b.mark_output(y)
    model = b.build()
    xs = np.arange(6, dtype=np.float32).reshape(3, 2)
    r = BatchRunner(model)
    assert r.mode == "loop"
    same = {"x": xs, "m": np.array([[1, 2]] * 3, np.int32)}
    want = plain_loop(model, same)["y"]
    got = r.run(same)["y"]
    assert got.shape == (3, 4) and r.stats.native_examples == 0  # TILE's output shape is dynamic: Python loop
    np.testing.assert_array_equal(got, want)
    with pytest.raises(BatchInputError, match=r"output 'y' has shape \[1, 4\] at example 1, \[1, 2\] before "
                                              r"it: outputs whose shape varies cannot be stacked"):
        r.run({"x": xs, "m": np.array([[1, 1], [1, 2], [1, 1]], np.int32)})


def test_compiled_loop_reports_a_kernel_error_as_invoke_does_and_names_the_example():
    """An index that only exists at run time (GATHER's) out of range at the third example: the compiled loop raises
    invoke's InvokeError with the kernel's text and the example; the interpreter stays usable."""
    b = ModelBuilder()
    p = b.add_const("p", np.arange(15, dtype=np.float32).reshape(5, 3))
    i = b.add_input("i", np.int32, [1, 2])
    y = b.add_tensor("y", np.float32, [1, 2, 3])
    b.add_op("GATHER", [p, i], [y], options={"axis": 0})
    b.mark_output(y)
    model = b.build()
    r = BatchRunner(model)
    good = np.array([[0, 1], [4, 2], [3, 3], [2, 0]], np.int32)
    bad = good.copy()
    bad[2, 1] = 5
    plain = Interpreter(model_content=model)
    plain.allocate_tensors()
    plain.set_tensor(plain.get_input_details()[0]["index"], bad[2:3])
    with pytest.raises(InvokeError) as official:
        plain.invoke()
    with pytest.raises(InvokeError, match=r"GATHER: index out of range\nNode failed to invoke \(subgraph 0\), on "
                                          r"example 2 of the 4 run together") as ours:
        r.run(bad)
    assert str(ours.value).startswith(str(official.value).rstrip("."))
    np.testing.assert_array_equal(r.run(good)["y"], plain_loop(model, {"i": good})["y"])
    assert r.stats.native_examples == 4  # the good batch (the failed one counts no example run)


def test_compiled_loop_falls_back_when_the_invoke_is_not_only_compiled_code(monkeypatch):
    """$LITE_NUMBA_EXECUTOR=python (one Python call per kernel) leaves no compiled runner to call: the Python loop
    runs, with the same values."""
    monkeypatch.setenv("LITE_NUMBA_EXECUTOR", "python")
    path = model_path("small_cnn_int8")
    x = images(5, np.int8, seed=4)
    r = BatchRunner(path, batch_size=4)
    assert r.interpreter.runtime.main.native_program() is None
    np.testing.assert_array_equal(r.run(x)["Identity"], plain_loop(path, {"image": x})["Identity"])
    assert r.stats.native_examples == 0 and r.stats.invokes == 5


def test_empty_input_gives_empty_outputs():
    r = BatchRunner(model_path("small_cnn_f32"))
    out = r.run(np.zeros((0, 32, 32, 3), np.float32))
    assert out["Identity"].shape == (0, 10) and out["Identity"].dtype == np.float32
    assert r.run([])["Identity"].shape == (0, 10)


def test_bad_input_is_a_clear_error():
    path = model_path("small_cnn_f32")
    r = BatchRunner(path)
    with pytest.raises(BatchInputError, match=r"input 'image' has dtype float64, the model takes float32"):
        r.run([np.zeros((32, 32, 3))])
    with pytest.raises(BatchInputError, match=r"example 1: input 'image' has shape \[32, 32\]"):
        r.run([np.zeros((32, 32, 3), np.float32), np.zeros((32, 32), np.float32)])
    with pytest.raises(BatchInputError, match=r"a batch of shape \[4, 3\]"):
        r.run(np.zeros((4, 3), np.float32))
    with pytest.raises(BatchInputError, match=r"missing \['image'\], unknown \['img'\]"):
        r.run({"img": np.zeros((2, 32, 32, 3), np.float32)})
    with pytest.raises(BatchInputError, match="batch_size must be a positive integer"):
        BatchRunner(path, batch_size=0)
    with pytest.raises(BatchInputError, match="mode must be one of"):
        BatchRunner(path, mode="sometimes")
    with pytest.raises(BatchInputError, match="model must be a .tflite path"):
        BatchRunner(3.5)
    with pytest.raises(BatchInputError, match="postprocess must return a mapping"):
        BatchRunner(path, postprocess=lambda o: 1).run(np.zeros((1, 32, 32, 3), np.float32))
    multi = BatchRunner(two_in_two_out(True))
    with pytest.raises(BatchInputError, match=r"the model has 2 inputs \['x', 's'\]"):
        multi.run([np.zeros(4, np.float32)])


def test_progress_bar_is_written_when_asked():
    import sys  # tqdm is in the test extra: a missing one fails this test

    r = BatchRunner(model_path("small_cnn_f32"), batch_size=4)
    err, sys.stderr = sys.stderr, io.StringIO()
    try:
        r.run(images(10, np.float32), progress=True)
        shown = sys.stderr.getvalue()
        sys.stderr = io.StringIO()
        r.run(images(10, np.float32))  # not a terminal: no bar
        hidden = sys.stderr.getvalue()
    finally:
        sys.stderr = err
    assert "10/10" in shown and "lite-numba" in shown
    assert hidden == ""


def test_run_batches_and_shared_runner():
    path = model_path("small_cnn_int8")
    x = images(6, np.int8, seed=9)
    out = run_batches(path, x, batch_size=4)
    np.testing.assert_array_equal(out["Identity"], plain_loop(path, {"image": x})["Identity"])
    a = shared_runner(path, 4)
    assert shared_runner(path, 4) is a  # once per process and thread
    assert shared_runner(path, 8) is not a


def test_shared_runner_gives_each_thread_its_own_interpreter():
    """Dask runs tasks on several threads of a worker: each gets a runner over a clone (one Interpreter is used by
    one thread at a time), and all compute the plain loop's values."""
    from concurrent.futures import ThreadPoolExecutor

    path = model_path("small_cnn_int8")
    x = images(24, np.int8, seed=12)
    ref = plain_loop(path, {"image": x})["Identity"]
    barrier = threading.Barrier(3)

    def work(k):
        barrier.wait()
        r = shared_runner(path, 5)
        return r, [r.run(x[s:s + 8])["Identity"] for s in (0, 8, 16)]

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(work, range(3)))
    assert len({id(r.interpreter) for r, _ in results}) == 3
    for _, outs in results:
        np.testing.assert_array_equal(np.concatenate(outs), ref)
