"""The generated runner calls kernels through their native entry addresses (lite_numba.jit.native_call).

It contains no kernel code: its cached object stays small, it compiles in a fraction of a second, and its cache
key depends on the kernels' argument types only, so editing a kernel does not recompile runners. Exceptions a
kernel raises still reach Python with their message.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import MODELS
from numba import njit

import lite_numba.jit.compiler as compiler
from lite_numba import Interpreter
from lite_numba.jit.native_call import call_native_at, native_address, spec_types
from lite_numba.testing import assert_close, require_official, run_official


def _runner_files(d):
    return sorted(p.name for p in (d / "runners").glob("lnb_*.py"))


def _segments(it):
    return [s for kind, s in it.runtime.graph(0).steps if kind == "segment"]


def test_runner_has_no_kernel_code(tmp_path, monkeypatch):
    require_official()
    monkeypatch.setenv("LITE_NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compiler, "_RUNNERS", {})
    path = str(MODELS / "small_cnn_f32.tflite")
    it = Interpreter(model_path=path)
    it.allocate_tensors()
    (seg,) = _segments(it)
    lines = seg.source.splitlines()
    sites = [ln for ln in lines if "call_native_at(" in ln]
    assert not any(re.match(r"\s*k\d+\(", ln) for ln in lines)  # no kernel linked in
    # the step loop: one call site per distinct call (kernel, argument types and layout), not one per call
    assert 5 < len(sites) < len(seg.calls), (len(sites), len(seg.calls))
    (run,) = compiler._RUNNERS.values()
    # this runner's objects (the runners' cache folder is shared, keyed by module: numba_cache.module_locator)
    objects = list(Path(run._cache._cache_path).glob(f"{run._cache._impl.filename_base}*.nbc"))
    assert objects and all(p.stat().st_size < 12_000 * len(sites) for p in objects), \
        [(p.name, p.stat().st_size) for p in objects]  # ~6 kB a call site; linked kernels made it ~70 kB
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, it.get_input_details()[0]["shape"]).astype(np.float32)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    out = it.get_tensor(it.get_output_details()[0]["index"])
    assert_close(out, run_official(path, [x])[0])


def test_address_runners_run_without_reference_counting(tmp_path, monkeypatch):
    """A runner that calls every kernel through its address makes no counted array (call_native_at's carry no
    meminfo), so it is compiled without the NRT: no NRT_incref / NRT_decref of its five tables at every call (a
    WHILE calls its body's runner once an iteration). A kernel's error still reaches invoke() with its message and
    the interpreter stays usable."""
    from lite_numba.builder import ModelBuilder

    monkeypatch.setenv("LITE_NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compiler, "_RUNNERS", {})
    b = ModelBuilder()
    idx = b.add_input("idx", np.int32, [1])
    y = b.add_tensor("y", np.float32, [1])
    b.add_op("GATHER", [b.add_const("params", np.array([1.5, -2.0, 3.25, 4.0], np.float32)), idx], [y],
             options={"axis": 0})
    z = b.add_tensor("z", np.float32, [1])
    b.add_op("MUL", [y, b.add_const("k", np.array([2.0], np.float32))], [z])
    b.mark_output(z)
    it = Interpreter(model_content=b.build())
    it.allocate_tensors()
    (run,) = compiler._RUNNERS.values()
    assert run.targetoptions.get("_nrt") is False
    (source,) = (tmp_path / "runners").glob("lnb_*.py")
    assert "@njit(cache=True, nogil=True, _nrt=False)" in source.read_text()
    it.set_tensor(0, np.array([7], np.int32))
    with pytest.raises(RuntimeError, match="GATHER"):
        it.invoke()
    for k, v in enumerate([1.5, -2.0, 3.25, 4.0]):
        it.set_tensor(0, np.array([k], np.int32))
        it.invoke()
        np.testing.assert_array_equal(it.get_tensor(it.get_output_details()[0]["index"]), [2 * v])


def test_kernel_edit_keeps_runner(tmp_path, monkeypatch):
    """The runner cache key ignores kernel sources: a changed kernel fingerprint reuses the same runner file."""
    monkeypatch.setenv("LITE_NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compiler, "_RUNNERS", {})
    path = str(MODELS / "op_add.tflite")
    Interpreter(model_path=path).allocate_tensors()
    before = _runner_files(tmp_path)
    assert len(before) == 1
    monkeypatch.setattr(compiler, "_RUNNERS", {})
    monkeypatch.setattr(compiler, "_PACKAGE_HASH", "kernels-edited")
    monkeypatch.setattr(compiler, "fingerprint", lambda fn: "edited")
    Interpreter(model_path=path).allocate_tensors()
    assert _runner_files(tmp_path) == before


@njit(cache=False, nogil=True)
def _check_kernel(a, n):
    if n > 10:
        raise ValueError("n out of range")
    for i in range(a.shape[0]):
        a[i] += n


def test_call_native_arguments_and_exceptions():
    spec = "0;Aa2:float32:2;i0"
    sig = spec_types(spec)
    _check_kernel.compile(sig)
    fp = np.array([native_address(_check_kernel.overloads[sig])], np.int64)

    @njit
    def run(arena, aux, it, ft, fp):
        call_native_at(arena, aux, it, ft, fp, 0, 0, "0;Aa2:float32:2;i0")

    arena = np.zeros(64 + 24, np.uint8)
    it = np.array([3, 0, 64, 64 + 24, 2, 3], np.int64)  # n, unused, offset, end, shape
    run(arena, np.zeros(8, np.uint8), it, np.zeros(1), fp)
    view = arena[64:].view(np.float32).reshape(2, 3)
    np.testing.assert_array_equal(view, np.full((2, 3), 3, np.float32))
    it[0] = 11
    with pytest.raises(ValueError, match="n out of range"):
        run(arena, np.zeros(8, np.uint8), it, np.zeros(1), fp)
    np.testing.assert_array_equal(view, np.full((2, 3), 3, np.float32))


def test_call_native_at_reads_positions_from_the_bases():
    """call_native_at: the spec's positions are relative to it[ib] and ft[fb], so one call site serves calls whose
    arguments sit at different places of the tables (the runner's step loop)."""

    @njit(cache=False, nogil=True)
    def scale(a, n, f):
        for i in range(a.shape[0]):
            a[i] = a[i] * f + n

    spec = "0;Aa0:float64:1;i3;f1"
    sig = spec_types(spec)
    scale.compile(sig)
    fp = np.array([native_address(scale.overloads[sig])], np.int64)

    @njit
    def run(arena, aux, it, ft, fp):
        for s in range(2):
            call_native_at(arena, aux, it, ft, fp, it[s], s * 2, "0;Aa0:float64:1;i3;f1")

    arena = np.zeros(64, np.uint8)
    a = arena.view(np.float64)
    a[:] = 1.0
    # call 0: its entries at it[2..5] (bytes 0..16, shape 2, n = 5); call 1 at it[6..9] (bytes 32..56, shape 3, n = 7)
    it = np.array([2, 6, 0, 16, 2, 5, 32, 56, 3, 7], np.int64)
    ft = np.array([0.0, 10.0, 0.0, -1.0])  # f of call 0 at ft[0 + 1], of call 1 at ft[2 + 1]
    run(arena, np.zeros(8, np.uint8), it, ft, fp)
    np.testing.assert_array_equal(a, [15.0, 15.0, 1.0, 1.0, 6.0, 6.0, 6.0, 1.0])


def test_packed_weights_live_once():
    """A call's precomputed array (here the float FULLY_CONNECTED's packed weights) is copied into its segment's
    aux, and the call then points there: the packed original is freed, so after allocate numpy holds one packed copy
    of the weights, not two (Gemma 3 270M: ~256 MiB less resident)."""
    import tracemalloc

    from lite_numba.builder import ModelBuilder

    k, n = 1024, 2048
    w = np.random.default_rng(0).standard_normal((n, k)).astype(np.float32)
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [4, k])
    y = b.add_tensor("y", np.float32, [4, n])
    b.add_op("FULLY_CONNECTED", [x, b.add_const("w", w), b.add_const("bias", np.zeros(n, np.float32))], [y])
    b.mark_output(y)
    data = b.build()
    Interpreter(model_content=data).allocate_tensors()  # (compiled and cached before the count)
    tracemalloc.start()
    try:
        it = Interpreter(model_content=data)
        it.allocate_tensors()
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held < 1.5 * w.nbytes, held / w.nbytes
    xs = np.random.default_rng(1).standard_normal((4, k)).astype(np.float32)
    it.set_tensor(it.get_input_details()[0]["index"], xs)
    it.invoke()
    np.testing.assert_allclose(it.get_tensor(it.get_output_details()[0]["index"]), xs @ w.T, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("source", ["path", "bytes"])
def test_large_constant_read_in_place(official, tmp_path, source):
    """A constant tensor of 64 KiB or more that a kernel reads as a tensor (here GATHER's table, as an LLM's
    embedding) is read where the model holds it (the mapped file), not copied into the segment's aux: the official
    outputs, also from a clone; from bytes it is read in place when aligned, copied otherwise, the same outputs."""
    from lite_numba.builder import ModelBuilder

    table = np.random.default_rng(0).standard_normal((512, 64)).astype(np.float32)
    b = ModelBuilder()
    ids = b.add_input("ids", np.int32, [5])
    out = b.add_tensor("out", np.float32, [5, 64])
    b.add_op("GATHER", [b.add_const("table", table), ids], [out], options={"axis": 0})
    b.mark_output(out)
    data = b.build()
    path = tmp_path / "gather.tflite"
    path.write_bytes(data)
    it = Interpreter(model_path=str(path)) if source == "path" else Interpreter(model_content=data)
    it.allocate_tensors()
    segs = [s for kind, s in it.runtime.graph(0).steps if kind == "segment"]
    if source == "path":
        assert sum(s.aux.nbytes for s in segs) < table.nbytes and sum(len(s.keep) for s in segs) == 1
    feed = [np.array([0, 511, 3, 7, 100], np.int32)]
    want = run_official(data, feed)
    for runner in (it, it.clone()):
        runner.set_tensor(runner.get_input_details()[0]["index"], feed[0])
        runner.invoke()
        np.testing.assert_array_equal(runner.get_tensor(runner.get_output_details()[0]["index"]), want[0])
