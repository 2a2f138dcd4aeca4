"""SignatureRunner's repeated call (issue 30, docs/design/llm.md): a call with the same input names, dtypes, shapes
and bound buffers as the last one runs the plan that call left (signature_io.CallPlan) instead of the full checks.

The oracle is the official runtime's signature runner, call by call; beside it the same calls through our full path
(each call's keywords in another order than the last, so no plan is ever reused) must give bit-identical outputs and
the same copy counts. Every call that differs from the last — a dtype, a name, a count, a shape, a non-contiguous
array, a list — must fall back to the full path: the official error texts, the resized outputs.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from kv_models import causal_mask, kv_model

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close, official_interpreter, require_official

require_official()


class Counting:
    """Counts the runtime's run_in_place calls (the full path's; the fast path runs its plan directly)."""

    def __init__(self, it: Interpreter):
        self.calls, self.inner = 0, it.runtime.run_in_place
        it.runtime.run_in_place = self

    def __call__(self, *args):
        self.calls += 1
        return self.inner(*args)


def _feeds(rng: np.random.Generator) -> list[tuple[str, dict, bool]]:
    """(what, the decode call's keywords, whether it may take the fast path) for an export_hf-shaped decoder: good
    calls with new values each time, and calls that change one thing."""
    caches = {f"kv_cache_{kv}_{layer}": rng.standard_normal((1, 48, 16)).astype(np.float32)
              for kv in "kv" for layer in range(2)}

    def good(p: int, **change) -> dict:
        feed = dict(caches, tokens=np.array([[p % 48]], np.int32), input_pos=np.array([p], np.int32),
                    mask=causal_mask([p], 48))
        feed.update(change)
        return feed

    wide = np.zeros((1, 1, 1, 96), np.float32)
    no_mask = {k: v for k, v in good(9).items() if k != "mask"}
    return [
        ("first", good(8), False), ("again", good(9), True), ("again", good(10), True),
        ("dtype", good(11, mask=causal_mask([11], 48).astype(np.float64)), False), ("after dtype", good(12), True),
        ("name", {**no_mask, "maskx": causal_mask([9], 48)}, False), ("after name", good(13), True),
        ("count", no_mask, False), ("after count", good(14), True),
        ("shape", good(16, tokens=np.array([[3, 4]], np.int32)), False),  # (two tokens' logits, one position)
        ("shape again", good(18, tokens=np.array([[5, 6]], np.int32)), True),
        ("shape back", good(20), False), ("again", good(21), True),
        ("non-contiguous", good(22, mask=wide[..., ::2]), False), ("contiguous", good(23), False),
        ("order", dict(reversed(good(24).items())), False), ("order again", dict(reversed(good(25).items())), True),
        ("read-only", good(26, input_pos=np.frombuffer(np.array([26], np.int32).tobytes(), np.int32)), False),
        ("writable", good(27), True),
        ("cache dtype", good(28, kv_cache_k_0=caches["kv_cache_k_0"].astype(np.float16)), False),
        ("after cache dtype", good(29), True), ("last", good(30), True),
    ]


def _call(runner, feed: dict):
    try:
        return runner(**feed)
    except Exception as e:  # noqa: BLE001 (compared with the official runtime's)
        return e


def test_repeated_calls_match_the_full_path_and_the_official_runner():
    model = kv_model("hf")
    official = official_interpreter(model).get_signature_runner("decode")
    fast_it, full_it = Interpreter(model_content=model), Interpreter(model_content=model)
    fast, full = fast_it.get_signature_runner("decode"), full_it.get_signature_runner("decode")
    counted = Counting(fast_it)
    flip = False
    for what, feed, may_reuse in _feeds(np.random.default_rng(0)):
        ref = _call(official, feed)
        flip = not flip  # (the full path: never the order of the last call)
        ours_full = _call(full, dict(reversed(feed.items())) if flip else feed)
        before = counted.calls
        ours = _call(fast, feed)
        if isinstance(ref, Exception):
            for got in (ours, ours_full):
                assert type(got) is type(ref) and str(got) == str(ref), (what, got, ref)
            continue
        assert not isinstance(ours, Exception), (what, ours)
        assert (counted.calls == before) == may_reuse, what  # reused only when nothing changed
        assert list(ours) == list(ref) == list(ours_full), what
        for name in ref:
            assert_close(ours[name], ref[name], family="model", what=f"{what}: {name}")
            assert ours[name].dtype == ours_full[name].dtype and np.array_equal(ours[name], ours_full[name]), what
            assert name not in feed or not np.shares_memory(ours[name], feed[name])  # new arrays, the caller's own
        assert fast.last_copies == full.last_copies, what
        assert fast.last_copies_by_name == full.last_copies_by_name, what
        assert sum(fast.last_copies.values()) > 0


def test_returned_arrays_and_counts_are_new_each_call():
    model = kv_model("generative")
    it = Interpreter(model_content=model)
    dec = it.get_signature_runner("decode")
    feed = {n: np.zeros(d["shape"], d["dtype"]) for n, d in dec.get_input_details().items()}
    first = dec(**feed)
    counts = dec.last_copies
    counts["in"] = -1  # a caller's changes to the counts it read must not reach the next call's
    feed["input_pos"] = np.array([5], np.int32)
    second = dec(**feed)
    assert dec.last_copies["in"] > 0 and dec.last_copies is not counts
    for name in first:
        assert not np.shares_memory(first[name], second[name])
    feed["input_pos"] = np.array([0], np.int32)
    third = dec(**feed)
    for name in first:
        np.testing.assert_array_equal(first[name], third[name])  # the values of this call, not a stale plan's


@pytest.mark.parametrize("executor", ["compiled", "python"])
def test_bound_buffers_rebind_and_unbind_between_calls(executor, monkeypatch):
    if executor == "python":  # no compiled runner to point at the buffers: copied in and back out, by the plan too
        monkeypatch.setenv("LITE_NUMBA_EXECUTOR", "python")
    else:
        monkeypatch.delenv("LITE_NUMBA_EXECUTOR", raising=False)
    model = kv_model("generative")
    official = official_interpreter(model).get_signature_runner("decode")
    it = Interpreter(model_content=model)
    dec = it.get_signature_runner("decode")
    rng = np.random.default_rng(1)
    start = {f"kv_cache_{kv}_{layer}": rng.standard_normal((1, 48, 16)).astype(np.float32)
             for kv in "kv" for layer in range(2)}
    step = {"tokens": np.array([[7]], np.int32), "input_pos": np.array([4], np.int32)}
    bufs = {n: dec.bind(n, v.copy()) for n, v in start.items()}
    dec(**step)
    dec(**step)  # (the plan's call: the buffers updated in place again, at the same position: the same values)
    ref = official(**start, **step)
    for n, b in bufs.items():
        np.testing.assert_allclose(b, ref[n], rtol=1e-5, atol=1e-6)
    per_step = 0 if executor == "compiled" else 2 * start["kv_cache_k_0"].nbytes
    assert [dec.last_copies_by_name[n] for n in bufs] == [per_step] * len(bufs)
    other = dec.bind("kv_cache_k_0", start["kv_cache_k_0"].copy())  # rebound: the new buffer, not the old one
    before = bufs["kv_cache_k_0"].copy()
    out = dec(**step)
    assert out["kv_cache_k_0"] is other
    np.testing.assert_array_equal(bufs["kv_cache_k_0"], before)
    np.testing.assert_allclose(other, ref["kv_cache_k_0"], rtol=1e-5, atol=1e-6)
    out = dec(**step, kv_cache_k_0=start["kv_cache_k_0"])  # another array for a bound name: copied in, counted
    assert dec.last_copies_by_name["kv_cache_k_0"] == per_step + start["kv_cache_k_0"].nbytes
    assert out["kv_cache_k_0"] is other
    out = dec(**step, kv_cache_k_0=other)  # the buffer itself: nothing more copied
    assert dec.last_copies_by_name["kv_cache_k_0"] == per_step
    dec.unbind()
    with pytest.raises(ValueError, match="Invalid number of inputs"):
        dec(**step)
    out = dec(**start, **step)
    for n in start:
        assert_close(out[n], ref[n], family="model", what=n)
        assert out[n] is not bufs.get(n)


def _dynamic_model() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 6], shape_signature=[-1, 6])
    y = b.add_tensor("y", np.float32, [2, 6], shape_signature=[-1, 6])
    b.add_op("MUL", [x, b.add_const("w", np.linspace(-1, 1, 6, dtype=np.float32))], [y])
    b.mark_output(y)
    b.add_signature("serving_default", {"x": x}, {"y": y})
    return b.build()


def test_reallocation_and_held_views_between_calls():
    model = _dynamic_model()
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    runner = it.get_signature_runner("serving_default")
    official = official_interpreter(model).get_signature_runner("serving_default")
    x2 = np.arange(12, dtype=np.float32).reshape(2, 6)
    for _ in range(2):
        np.testing.assert_array_equal(runner(x=x2)["y"], official(x=x2)["y"])
    it.resize_tensor_input(0, [3, 6])  # subgraph 0 allocated again for another shape between two calls
    it.allocate_tensors()
    np.testing.assert_array_equal(runner(x=x2)["y"], official(x=x2)["y"])
    x3 = np.ones((3, 6), np.float32)
    assert runner(x=x3)["y"].shape == (3, 6)
    runner(x=x3)
    view = it.tensor(it.get_input_details()[0]["index"])()  # a tensor() view alive: the official RuntimeError
    with pytest.raises(RuntimeError, match="reference"):
        runner(x=x3)
    del view
    np.testing.assert_array_equal(runner(x=x3)["y"], official(x=x3)["y"])


def test_the_fast_path_holds_the_interpreter_against_other_threads():
    b = ModelBuilder()  # a chain of 12 FULLY_CONNECTED layers of 64 x 512: tens of ms per call
    x = t = b.add_input("x", np.float32, [64, 512])
    w = b.add_const("w", (np.random.default_rng(0).standard_normal((512, 512)) / np.sqrt(512)).astype(np.float32))
    for k in range(12):
        o = b.add_tensor(f"h{k}", np.float32, [64, 512])
        b.add_op("FULLY_CONNECTED", [t, w, -1], [o], options={"fused_activation_function": "RELU"})
        t = o
    b.mark_output(t)
    b.add_signature("serving_default", {"x": x}, {"y": t})
    it = Interpreter(model_content=b.build())
    runner = it.get_signature_runner("serving_default")
    xv = np.random.default_rng(1).standard_normal((64, 512)).astype(np.float32)
    expected = runner(x=xv)["y"]
    counted = Counting(it)
    refused = []
    for _attempt in range(5):
        worker = threading.Thread(target=runner, kwargs={"x": xv})  # the fast path, in another thread
        worker.start()
        while it._slot and worker.is_alive():  # until the worker is inside the call
            pass
        for call in (it.invoke, lambda: runner(x=xv), lambda: it.get_tensor(0)):
            try:
                call()
            except RuntimeError as e:
                assert "one Interpreter per thread" in str(e), e
                refused.append(e)
        worker.join()
        if refused:
            break
    assert refused, "no call was refused while another thread was inside the signature call"
    assert counted.calls == 0  # (every call of the worker's was the fast path)
    np.testing.assert_array_equal(runner(x=xv)["y"], expected)
