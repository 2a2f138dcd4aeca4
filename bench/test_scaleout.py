"""Batch inference at scale (issue 18): MobileNetV2 0.35/96 int8 over >= 2,000 inputs on 1 and 2 workers, and the
adapters' overhead per batch of 32 (the engine's or the adapter's time per batch minus the time inside invoke).

Printed, never asserted: throughput ratios (2 workers / 1 worker) on Dask (a LocalCluster of 2 worker processes,
the 1-worker run pinned to one of them) and Ray Data (map_batches over batches of 256 with
batch_ray.actor_pool(1) and (2) on ray.init(num_cpus=2): the pool's rate while its actors ran (each actor's rows
over its own first batch to last, summed: Ray gives the first ready actor batches while the second still loads),
per round and as the median of the rounds, beside a CPU-burn control run in the same round; and from the first
batch's start to the last one's end; Ray starts new actors for each run, so its wall time, printed too, includes
loading the model in them), the overheads on Dask, Ray and Beam (DirectRunner; Ray's beside its own time per batch
with a class that only returns the columns), the CPU and the machine's load average during the run. Outputs are
checked against a plain Interpreter loop (int8: equal). Light mode (CI): 128 inputs (Ray: 1,024), 3 rounds."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from conftest import ROWS, cpu_name, find_model, light, rounds

from lite_numba import Interpreter
from lite_numba.batch import BatchRunner

MODEL = "mobilenet_v2_035_96_int8"
BATCH = 32
RAY_THROUGHPUT_BATCH = 256  # Ray's cost per batch (~10 ms on 2 busy vCPUs) is amortised over 256 examples
DASK_THROUGHPUT_BATCH = 256  # likewise the scheduler's per task (its process shares the 2 vCPUs with the workers)


def _n() -> int:
    return 128 if light() else 2048


def _model():
    path = find_model(MODEL)
    if path is None:
        pytest.skip(f"{MODEL} not found")
    return path


def _images(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, (n, 96, 96, 3), dtype=np.int8)


def _plain(path, x) -> tuple[np.ndarray, float]:
    """The plain loop's outputs and its median seconds per invoke."""
    it = Interpreter(model_path=str(path))
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    out, times = [], []
    for e in x:
        it.set_tensor(i, e[None])
        t0 = time.perf_counter()
        it.invoke()
        times.append(time.perf_counter() - t0)
        out.append(it.get_tensor(o))
    return np.concatenate(out), float(np.median(times))


def _row(case: str, note: str) -> None:
    ROWS.append({"case": case, "unit": "text", "note": note})
    print(f"{case}: {note}")


def _load() -> str:
    a, b, c = os.getloadavg()
    return f"load average {a:.1f} / {b:.1f} / {c:.1f} (1/5/15 min) on {os.cpu_count()} CPUs"


def _plain_worker(path: str, n: int, seed: int, barrier) -> tuple[float, float]:
    """A child process: n invokes after the barrier; returns (start, end) on the shared clock."""
    it = Interpreter(model_path=path)
    it.allocate_tensors()
    i = it.get_input_details()[0]["index"]
    x = _images(n, seed)
    barrier.wait()
    t0 = time.time()
    for e in x:
        it.set_tensor(i, e[None])
        it.invoke()
    return t0, time.time()


def _machine_scaling(path, n: int) -> float:
    """The control: the same n invokes in 1 process, then split over 2 processes (no engine); the ratio tells how
    much of a second core the machine had to give at that moment."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    ctx = mp.get_context("spawn")
    walls = {}
    for procs in (1, 2):
        with ctx.Manager() as m, ProcessPoolExecutor(procs, mp_context=ctx) as pool:
            barrier = m.Barrier(procs)
            spans = list(pool.map(_plain_worker, [str(path)] * procs, [n // procs] * procs, range(procs),
                                  [barrier] * procs))
        walls[procs] = max(e for _, e in spans) - min(s for s, _ in spans)
    return walls[1] / walls[2]


def test_batch_loop_per_example_cost():
    """In one process, interleaved batch by batch: BatchRunner's compiled loop (one compiled call per batch of 32,
    examples copied in and out there: what the adapters' "invoke" time is for this model), its Python loop
    (set/invoke/get per example; `native=False`), and the bare invoke (GraphRuntime.invoke on an input already in
    the arena: the model's compute with no example moved). Their differences are what feeding examples costs."""
    path = _model()
    n = _n() * 4  # 8,192 examples (light: 512)
    x = _images(n, seed=2)
    native, python = BatchRunner(path, BATCH), BatchRunner(path, BATCH, native=False)
    rt = native.interpreter.runtime.main
    ref = _plain(path, x[:64])[0]
    for r in (native, python):
        assert np.array_equal(r.run(x[:64])["Identity"], ref), "batch outputs differ from the plain loop"
    assert native.stats.native_examples == 64 and python.stats.native_examples == 0
    spent = {"native": 0.0, "python": 0.0, "bare": 0.0}
    clock = time.perf_counter
    for s in range(0, n, BATCH):
        order = ("native", "python", "bare") if (s // BATCH) % 2 else ("bare", "python", "native")
        for name in order:
            t0 = clock()
            if name == "bare":
                for _ in range(BATCH):
                    rt.invoke()
            else:
                (native if name == "native" else python).run_batch(x[s:s + BATCH])
            spent[name] += clock() - t0
    per = {k: v / n * 1e6 for k, v in spent.items()}
    _row(f"batch loop {MODEL} per example, batches of {BATCH}, {n} examples",
         f"bare invoke {per['bare']:.1f} us; compiled loop {per['native']:.1f} us (+{per['native'] - per['bare']:.1f}"
         f" us, {per['native'] / per['bare'] - 1:.1%}: moving each example in and out, inside the adapters' invoke "
         f"time); Python loop {per['python']:.1f} us (+{per['python'] - per['bare']:.1f} us, "
         f"{per['python'] / per['bare'] - 1:.1%}); CPU {cpu_name()}")


def test_dask_two_workers_vs_one():
    dask_array = pytest.importorskip("dask.array")
    distributed = pytest.importorskip("distributed")
    from lite_numba.batch.dask import predict_array

    path = _model()
    BatchRunner(path)  # warm cache: the workers load, they do not compile
    n = _n()
    nt = 4 * n  # the throughput runs: 32 blocks of 256 (light: 32 of 16), as for Ray
    big = min(DASK_THROUGHPUT_BATCH, nt // 32)
    x_big = _images(nt)
    x_np = x_big[:n]
    ref, invoke_s = _plain(path, x_np[:64])
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    client = distributed.Client(cluster)
    try:
        xd = dask_array.from_array(x_np, chunks=(BATCH, 96, 96, 3))
        workers = sorted(client.scheduler_info()["workers"])
        # every worker loads the model once before the timed runs
        client.run(lambda: __import__("lite_numba.batch", fromlist=["x"]).shared_runner(str(path), BATCH))
        client.run(lambda: __import__("lite_numba.batch", fromlist=["x"]).shared_runner(str(path), big))
        xd = client.persist(xd)  # the inputs already on the workers (as a data set in a cluster would be)
        distributed.wait(xd)
        times = {1: [], 2: []}
        spans = {1: [], 2: []}
        cpu = {1: [], 2: []}
        controls = []
        # paired rounds, as for Ray: each round's ratio beside the machine control run in the same round
        for r in range(rounds(5)):
            for w in (1, 2):
                # each run's inputs spread evenly over the workers it uses (a data set in a cluster is where its
                # workers are): a copy another run fetched to one worker would draw every task there (data locality;
                # measured: 22 of 32 blocks on one worker, x1.30)
                xb = client.persist(dask_array.from_array(x_big, chunks=(big, 96, 96, 3), name=f"x-{r}-{w}"),
                                    workers=workers[:w])
                distributed.wait(xb)
                client.rebalance(xb, workers=workers[:w])
                y = predict_array(xb, str(path), batch_size=big)
                c0 = client.run(_cpu_s)
                t0 = time.perf_counter()
                with distributed.get_task_stream(client) as ts:
                    got = client.compute(y, workers=workers[:w], allow_other_workers=False).result()
                times[w].append(time.perf_counter() - t0)
                c1 = client.run(_cpu_s)
                cpu[w].append(sum(c1[k] - c0[k] for k in c1))
                blocks = [ss for t in ts.data if "_run_block" in str(t["key"]) for ss in t["startstops"]
                          if ss["action"] == "compute"]
                spans[w].append(max(ss["stop"] for ss in blocks) - min(ss["start"] for ss in blocks))
                assert np.array_equal(got[:64], ref), "Dask outputs differ from the plain loop"
                client.cancel(xb)
            controls.append(_machine_scaling(path, n))
        load = _load()
        # the adapter's overhead at batch 32: each block's task time on the worker against its invoke time
        with distributed.get_task_stream(client) as ts:
            before = client.run(_stats, str(path))
            client.compute(predict_array(xd, str(path), batch_size=BATCH)).result()
            after = client.run(_stats, str(path))
        per_task = [ss["stop"] - ss["start"] for t in ts.data if "_run_block" in str(t["key"])
                    for ss in t["startstops"] if ss["action"] == "compute"]
        task_s = sum(per_task)
        inv = sum(after[k][0] - before[k][0] for k in after)
        adapter = sum(after[k][1] - before[k][1] for k in after)
    finally:
        client.close()
        cluster.close()
    t1, t2 = float(np.median(times[1])), float(np.median(times[2]))
    s1, s2 = float(np.median(spans[1])), float(np.median(spans[2]))
    per_round = [a / b for a, b in zip(spans[1], spans[2])]
    _row(f"dask {MODEL} {nt} inputs, blocks of {big}", f"first block to last: 1 worker {nt / s1:.0f}/s, 2 workers "
         f"{nt / s2:.0f}/s (medians of {len(per_round)} rounds); 2 workers / 1 per round: "
         f"{' '.join(f'x{r:.2f}' for r in per_round)}, median x{np.median(per_round):.2f}; wall from compute() to "
         f"the result {t1:.2f} / {t2:.2f} s: x{t1 / t2:.2f} (plain invoke {invoke_s * 1e3:.2f} ms; {load}; CPU "
         f"{cpu_name()})")
    _row("dask workers' CPU per input", f"1 worker {np.median(cpu[1]) / nt * 1e3:.3f} ms, 2 workers "
         f"{np.median(cpu[2]) / nt * 1e3:.3f} ms (the same figure would mean the second worker adds no work, so "
         f"its speed-up is bounded only by the cores free)")
    _row("machine control: plain loop, 2 procs vs 1", f"per round {' '.join(f'x{c:.2f}' for c in controls)}, "
         f"median x{np.median(controls):.2f} (the same {n} invokes split over 2 processes, no engine: the share of "
         f"a second core this machine gave); Dask's ratio over the control's in the same round: "
         f"{' '.join(f'{a / b:.2f}' for a, b in zip(per_round, controls))}")
    _row(f"dask overhead per batch of {BATCH}",
         f"task {task_s / (n / BATCH) * 1e3:.2f} ms, in adapter {adapter / (n / BATCH) * 1e3:.2f} ms, invoke "
         f"{inv / (n / BATCH) * 1e3:.2f} ms: engine overhead {(task_s - inv) / task_s:.1%}, adapter "
         f"{(adapter - inv) / adapter:.1%}; median task {np.median(per_task) * 1e3:.2f} ms against the mean invoke "
         f"time per batch: engine overhead {1 - inv / (n / BATCH) / np.median(per_task):.1%} (the median leaves out "
         f"the tasks the scheduler's and client's processes preempted on these cores)")


def _cpu_s() -> float:
    """This process's CPU seconds (user + system), on a worker."""
    t = os.times()
    return t.user + t.system


def _stats(path):
    from lite_numba.batch import shared_runners

    runners = shared_runners(path)  # the worker's runners of the model (one per thread that ran it)
    return sum(r.stats.invoke_s for r in runners), sum(r.stats.total_s for r in runners)


class _RayControl:
    """The engine's controls, with no model: a class that burns `seconds` of CPU per batch (how far Ray itself scales
    from 1 to 2 actors here), or with seconds=0 only returns the columns RayPredictor(timing=True) returns, an output
    of `out_shape` included (Ray's own time per batch). Defined at module level but sent by value: Ray's pickler
    copies it, since the bench module is not importable in the actors."""

    def __init__(self, seconds: float, out_shape: tuple, out_dtype: str):
        self.seconds, self.out_shape, self.out_dtype = seconds, out_shape, out_dtype

    def __call__(self, batch):
        began, t = time.time(), time.process_time()
        while time.process_time() - t < self.seconds:
            pass
        k = len(batch["id"])
        return {"id": batch["id"], "Identity": np.zeros((k, *self.out_shape), self.out_dtype),
                "lite_numba_batch_s": np.full(k, time.time() - began),
                "lite_numba_invoke_s": np.full(k, time.process_time() - t),
                "lite_numba_started": np.full(k, began), "lite_numba_pid": np.full(k, os.getpid())}


def test_ray_two_workers_vs_one():
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    import sys

    from ray import cloudpickle

    from lite_numba.batch.ray import RayPredictor, actor_pool

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # _RayControl travels by value
    path = _model()
    BatchRunner(path)
    n = 8 * _n()  # 64 batches of 256 (light: 32 of 32): Ray's start of each run weighs less
    x_np = _images(n, seed=1)
    ref, invoke_s = _plain(path, x_np[:64])
    big = min(RAY_THROUGHPUT_BATCH, n // 32)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        items = [{"id": k, "image": x_np[k]} for k in range(n)]
        # one block per throughput batch (Ray hands each actor whole blocks); and blocks of 1,024 rows, nearer what
        # Ray makes of a real data set (its blocks aim at up to 128 MiB: ~4,800 of these images), for the
        # overhead at batch 32
        ds = ray.data.from_items(items, override_num_blocks=n // big).materialize()
        ds_1024 = ray.data.from_items(items, override_num_blocks=max(1, n // 1024)).materialize()
        del items

        def run(cls, kwargs, w, bs, data=ds):
            # materialized in the object store while the actors run; turned into rows in the driver after the
            # clock stops (take_all while they run costs the driver CPU on the same 2 cores: x1.55-1.63 against
            # x1.63-1.71 this way, 8,192 inputs)
            t0 = time.perf_counter()
            out = data.map_batches(cls, fn_constructor_kwargs=kwargs, batch_size=bs, compute=actor_pool(w),
                                   num_cpus=1).materialize()
            wall = time.perf_counter() - t0
            return out.take_all(), wall

        def batches(rows):
            per = {}  # one entry per batch (its rows repeat the batch's figures): seconds, invoke, start, pid, rows
            for r in rows:
                key = (r["lite_numba_batch_s"], r["lite_numba_invoke_s"], r["lite_numba_started"], r["lite_numba_pid"])
                per[key] = per.get(key, 0) + 1
            return np.array([(*k, v) for k, v in per.items()])

        def span(per):  # from the first batch's start to the last one's end: the actors' start-up left out
            return float((per[:, 2] + per[:, 0]).max() - per[:, 2].min())

        def actor_spans(per):  # each actor's first batch start to its last batch end
            return {pid: float((q[:, 2] + q[:, 0]).max() - q[:, 2].min())
                    for pid in np.unique(per[:, 3]) for q in [per[per[:, 3] == pid]]}

        def pool_rate(per):
            """Rows per second of the pool while its actors ran: the sum of each actor's rows over its own first
            batch to last. Ray hands batches to an actor as soon as it is ready, so the second actor can start up
            to a second after the first (measured: 0.2-1.2 s on 2 vCPUs); first-batch-to-last counts that
            start-up, this does not."""
            return sum(per[per[:, 3] == pid][:, 4].sum() / t for pid, t in actor_spans(per).items())

        def engine_per_batch(per):  # an actor's wall time per batch, its idle gaps included
            return sum(actor_spans(per).values()) / len(per)

        out_shape, out_dtype = ref.shape[1:], str(ref.dtype)
        times = {1: [], 2: []}
        spans = {1: [], 2: []}
        rates = {1: [], 2: []}
        burn_rates = {1: [], 2: []}
        skew = []
        burn = None
        kwargs = {"model": str(path), "timing": True}
        # paired rounds: each round runs the model on 1 actor then 2, then the CPU-burn control on 1 then 2; a
        # round's ratio is compared with the control's in the same round (this VM's speed drifts by up to 25 %
        # from one minute to the next: the same matmul loop took 0.62-1.08 s)
        for _ in range(rounds(5)):
            for w in (1, 2):
                rows, wall = run(RayPredictor, kwargs, w, big)
                times[w].append(wall)
                rows.sort(key=lambda r: r["id"])
                got = np.stack([r["Identity"] for r in rows[:64]])
                assert np.array_equal(got, ref), "Ray outputs differ from the plain loop"
                per = batches(rows)
                spans[w].append(span(per))
                rates[w].append(pool_rate(per))
                if w == 2:
                    starts = [per[per[:, 3] == pid][:, 2].min() for pid in np.unique(per[:, 3])]
                    skew.append(max(starts) - min(starts))
                if burn is None:  # the CPU of our median invoke per batch, from the first run
                    burn = float(np.median(per[:, 1]))
            for w in (1, 2):
                burn_rates[w].append(pool_rate(batches(run(_RayControl, {"seconds": burn, "out_shape": out_shape,
                                                                          "out_dtype": out_dtype}, w, big)[0])))
        # at batch 32, on 1 and on 2 actors, over blocks of `big` and of 1,024 rows: the adapter's overhead, the
        # engine's time per batch, and Ray's own time per batch with a class that only returns the same columns
        at32 = {}
        for label, data in ((f"blocks of {big}", ds), ("blocks of 1024", ds_1024))[:1 if light() else 2]:
            for w in (1, 2):
                model = batches(run(RayPredictor, kwargs, w, BATCH, data)[0])
                null = batches(run(_RayControl, {"seconds": 0.0, "out_shape": out_shape, "out_dtype": out_dtype},
                                   w, BATCH, data)[0])
                at32[label, w] = (model, null)
        load = _load()
    finally:
        ray.shutdown()
    t1, t2 = float(np.median(times[1])), float(np.median(times[2]))
    s1, s2 = float(np.median(spans[1])), float(np.median(spans[2]))
    per_round = [b / a for a, b in zip(rates[1], rates[2])]
    burn_round = [b / a for a, b in zip(burn_rates[1], burn_rates[2])]
    _row(f"ray {MODEL} {n} inputs, batches of {big}",
         f"while the actors ran (each actor's rows over its own first batch to last, summed): 1 actor "
         f"{np.median(rates[1]):.0f}/s, 2 actors {np.median(rates[2]):.0f}/s (medians of {len(per_round)} rounds); "
         f"2 actors / 1 per round: {' '.join(f'x{r:.2f}' for r in per_round)}, median x{np.median(per_round):.2f}; "
         f"first batch to last x{s1 / s2:.2f} (the second actor's first batch came {np.median(skew):.2f} s after "
         f"the first's, median); wall with the actors' start-up {t1:.2f} / {t2:.2f} s: x{t1 / t2:.2f} (actor_pool: "
         f"4 batches in flight per actor; plain invoke {invoke_s * 1e3:.2f} ms; {load}; CPU {cpu_name()})")
    _row("ray control: CPU burn per batch, no model",
         f"2 actors / 1 per round: {' '.join(f'x{r:.2f}' for r in burn_round)}, median x{np.median(burn_round):.2f} "
         f"(each batch burns {burn * 1e3:.1f} ms of CPU, our median invoke per batch of {big}: how far Ray itself "
         f"scales on this machine); the model's ratio over the control's in the same round: "
         f"{' '.join(f'{a / b:.2f}' for a, b in zip(per_round, burn_round))}")
    for (label, w), (per32, null) in at32.items():
        engine, floor = engine_per_batch(per32), engine_per_batch(null) - null[:, 0].mean()
        inv = per32[:, 1].mean()
        _row(f"ray overhead per batch of {BATCH}, {w} actor{'s' if w > 1 else ''}, {label}",
             f"invoke {inv * 1e3:.2f} ms (the compiled loop's call: copies in and out included, see the batch "
             f"loop row), in adapter {per32[:, 0].mean() * 1e3:.2f} ms: adapter overhead "
             f"{(per32[:, 0].sum() - per32[:, 1].sum()) / per32[:, 0].sum():.1%}; engine time per batch per actor "
             f"{engine * 1e3:.2f} ms (each actor from its first batch to its last): engine overhead "
             f"{1 - inv / engine:.1%}; Ray's own time per batch with a class that only returns the same columns: "
             f"{floor * 1e3:.2f} ms, {floor / (inv + floor):.1%} of a batch with our invoke time (the least engine "
             f"overhead any adapter could show here)")


def test_beam_overhead_per_batch(tmp_path):
    beam = pytest.importorskip("apache_beam")
    from apache_beam.metrics.metric import MetricsFilter
    from apache_beam.ml.inference.base import RunInference
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.testing.util import assert_that

    from lite_numba.batch.beam import TFLiteModelHandlerNumpy

    path = _model()
    BatchRunner(path)
    n = _n()
    x_np = _images(n, seed=2)
    ref, _ = _plain(path, x_np[:64])
    handler = TFLiteModelHandlerNumpy(str(path), min_batch_size=BATCH, max_batch_size=BATCH)
    expected = {x_np[k].tobytes(): ref[k] for k in range(len(ref))}

    def check(results):  # runs in the pipeline: a mismatch fails it
        matched = 0
        for r in results:
            want = expected.get(r.example.tobytes())
            if want is not None:
                assert np.array_equal(r.inference["Identity"], want), "Beam outputs differ from the plain loop"
                matched += 1
        assert matched == len(expected), (matched, len(expected))

    t0 = time.perf_counter()
    p = beam.Pipeline(options=PipelineOptions(flags=[], runner="DirectRunner"))
    assert_that(p | beam.Create(list(x_np)) | RunInference(handler), check)
    result = p.run()
    result.wait_until_finish()
    wall = time.perf_counter() - t0
    metrics = result.metrics().query(MetricsFilter().with_namespace(handler.get_metrics_namespace()))
    dist = {m.key.metric.name: m.committed for m in metrics["distributions"]}
    lat, inv = dist["inference_batch_latency_micro_secs"], dist["lite_numba_invoke_micro_secs"]
    # the same pipeline without RunInference: what the DirectRunner spends on the elements themselves (Create of
    # numpy arrays, ~21 ms each here), so that the difference is RunInference's wall time
    t0 = time.perf_counter()
    p = beam.Pipeline(options=PipelineOptions(flags=[], runner="DirectRunner"))
    _ = p | beam.Create(list(x_np)) | beam.Map(lambda e: e.shape) | beam.combiners.Count.Globally()
    p.run().wait_until_finish()
    base = time.perf_counter() - t0
    added = (wall - base) / lat.count
    _row(f"beam overhead per batch of {BATCH}",
         f"run_inference {lat.mean / 1e3:.2f} ms (Beam's latency metric), invoke {inv.mean / 1e3:.2f} ms over "
         f"{lat.count} batches: overhead {(lat.sum - inv.sum) / lat.sum:.1%}; pipeline wall {wall:.1f} s for {n} "
         f"inputs, {base:.1f} s without RunInference (the DirectRunner's own cost for these elements): "
         f"RunInference adds {added * 1e3:.1f} ms of wall per batch against {inv.mean / 1e3:.2f} ms of invoke "
         f"(that difference is noise when it is smaller than the pipelines' run-to-run variation; {_load()})")
