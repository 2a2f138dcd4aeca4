"""kernels/base/team_pool.py, the parallel drivers' worker pool: every chunk runs exactly once, the pool's threads
take part, idle workers go to sleep, a busy pool runs a region on the calling thread, interpreters invoked from two
Python threads at once and a forked child still give the one-thread bytes."""

from __future__ import annotations

import multiprocessing
import threading
import time

import numpy as np
import pytest
from linear_models import conv2d_model, geometry
from lite_numba.kernels.base import team_pool, threads
from lite_numba.kernels.base.threads import run_chunks
from numba import njit

from lite_numba import Interpreter
from lite_numba.jit import team


@njit(cache=True, nogil=True)
def _mark(x, runs, who, n, wk, j):
    s = 0.0
    for k in range(n):  # some work, so that a woken worker finds chunks left
        s += np.sqrt(k + x[j])
    x[j] = s * 0.0 + x[j]
    runs[j] += 1
    who[j] = wk


# as the drivers' chunks do, the work is a call (with the stores inlined into the prange body, through the tuple's
# arrays, Numba's parfor pass lost them here: the fallback's test saw no chunk run)
@njit(cache=True, inline="always")
def _record(args, wk, j):
    x, runs, who, n = args
    _mark(x, runs, who, n, wk, j)


@njit(cache=True, nogil=True)
def _driver(x, runs, who, n, T, cnt):
    run_chunks(T, cnt, runs.size, _record, (x, runs, who, n))


def _region(nch=16, n=20000, T=2):
    x = np.arange(nch, dtype=np.float64)
    runs, who = np.zeros(nch, np.int64), np.full(nch, -1, np.int64)
    _driver(x, runs, who, n, T, np.zeros(1, np.int64))
    return runs, who


@pytest.fixture(scope="module")
def pool():
    if not team_pool.SUPPORTED:
        pytest.skip("the pool runs on Linux x86-64 / aarch64 only")
    workers = threads._pool_size(2) - 1
    if workers < 1:
        pytest.skip("one CPU: the pool has no threads")
    return workers


def test_every_chunk_once_and_the_pool_takes_part(pool):
    seen = set()
    for _ in range(50):
        runs, who = _region()
        assert (runs == 1).all(), runs
        assert set(who) <= set(range(pool + 1)), who
        seen |= set(who.tolist())
        if seen - {0}:
            break
    assert seen - {0}, "no chunk ran on a pool thread in 50 regions"


def test_idle_workers_sleep(pool):
    _region()
    state = team.team_state()
    deadline = time.monotonic() + 5
    while state[team_pool.SLEEPERS] < pool and time.monotonic() < deadline:
        time.sleep(0.01)
    assert state[team_pool.SLEEPERS] == pool, "idle workers still spinning 5 s after a region"
    runs, _ = _region()  # and they wake for the next one
    assert (runs == 1).all()


def test_the_generation_wraps(pool):
    """The region counter wraps to 0 after 2^39 regions (a server's months) without reaching the word's sign bit."""
    state = team.team_state()
    state[team_pool.CTRL] = team_pool.GEN_MASK << team_pool.GEN_SHIFT  # the last generation, all chunks taken
    for _ in range(3):
        runs, _ = _region()
        assert (runs == 1).all(), runs
    assert state[team_pool.CTRL] >> team_pool.GEN_SHIFT == 2


def test_a_busy_pool_runs_the_region_on_the_calling_thread(pool):
    assert team_pool.acquire()
    try:
        runs, who = _region()
    finally:
        team.team_state()[team_pool.BUSY] = 0
    assert (runs == 1).all() and (who == 0).all(), who


def _model():
    rng = np.random.default_rng(5)
    g = geometry(h=24, w=24, ci=16, co=40, seed=5)
    w = rng.standard_normal((g["cog"], g["kh"], g["kw"], g["cig"])).astype(np.float32)
    data = conv2d_model(g, np.float32, w, rng.standard_normal(g["cog"]).astype(np.float32), np.float32)
    return data, [rng.standard_normal((g["n"], g["h"], g["w"], g["cig"])).astype(np.float32)]


def test_interpreters_invoked_from_two_threads_at_once(pool):
    data, inputs = _model()

    def make(n):
        it = Interpreter(model_content=data, num_threads=n)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], inputs[0])
        return it

    ref = make(1)
    ref.invoke()
    want = ref.get_tensor(ref.get_output_details()[0]["index"])
    its = [make(2), make(2)]
    bad = []

    def loop(it):
        for _ in range(30):
            it.invoke()
            if not np.array_equal(it.get_tensor(it.get_output_details()[0]["index"]), want):
                bad.append(it)

    ts = [threading.Thread(target=loop, args=(it,)) for it in its]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not any(t.is_alive() for t in ts), "a thread did not finish in 60 s"
    assert not bad


def _child(q):
    runs, who = _region()
    q.put((runs.tolist(), int(team.team_state()[team_pool.STARTED]), int(threads._pool_size(2))))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork in a process with threads: what this checks
def test_a_forked_child_runs_regions(pool):
    _region()  # the pool runs in the parent
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    p.join(60)
    alive = p.is_alive()
    if alive:
        p.kill()
    assert not alive, "the forked child hung"
    runs, started, size = q.get(timeout=5)
    assert runs == [1] * 16
    assert started == 0 and size == pool + 1  # no threads copied; a prepare starts them again


@njit(cache=True, nogil=True, parallel=True)
def _prange_driver(x, runs, who, n, T, cnt):
    threads._run_chunks_prange(T, cnt, runs.size, _record, (x, runs, who, n))


def test_the_numba_layer_fallback_runs_every_chunk_once():
    """Where the pool does not run (not Linux x86-64 / aarch64), the drivers take chunks in a prange of Numba's
    threading layer: the same chunks, each once."""
    x = np.arange(16, dtype=np.float64)
    runs, who = np.zeros(16, np.int64), np.full(16, -1, np.int64)
    _prange_driver(x, runs, who, 100, 2, np.zeros(1, np.int64))
    assert (runs == 1).all() and set(who) <= {0, 1}
