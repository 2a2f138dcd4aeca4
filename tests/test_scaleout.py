"""The engines' adapters (issue 18) on the real engines: Ray Data on a local cluster (ray.init(num_cpus=2)), Dask on
a distributed.LocalCluster with worker processes, Apache Beam on its DirectRunner. Each result equals a plain loop
of Interpreter.invoke (int8 bit for bit, float equal). The workers share the machine's compile cache: warmed here,
they load and compile nothing; cold, two of them compile each kernel once between them.

A missing engine skips locally and fails under CI (the extras ray, dask and beam are installed there)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from batch_models import images, plain_loop, two_in_two_out
from conftest import model_path, require_module

from lite_numba.batch import BatchInputError, BatchRunner
from lite_numba.builder import ModelBuilder

# --- Ray Data -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ray_cluster():
    ray = require_module("ray")
    require_module("ray.data")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        yield ray
    finally:
        ray.shutdown()


def test_ray_map_batches_equals_a_plain_loop(ray_cluster):
    from lite_numba.batch.ray import RayPredictor

    path = model_path("small_cnn_int8")
    x = images(40, np.int8, seed=11)
    ds = ray_cluster.data.from_items([{"id": k, "image": x[k]} for k in range(len(x))])
    out = ds.map_batches(RayPredictor, fn_constructor_kwargs={"model": str(path)}, batch_size=8, concurrency=2,
                         num_cpus=1).take_all()
    assert sorted(r["id"] for r in out) == list(range(40))
    assert all("image" not in r for r in out)  # the input column is dropped, the others pass through
    got = np.stack([r["Identity"] for r in sorted(out, key=lambda r: r["id"])])
    ref = plain_loop(path, {"image": x})["Identity"]
    assert got.dtype == np.int8 and np.array_equal(got, ref)

    @ray_cluster.remote(num_cpus=1)
    def load_in_a_worker(model):  # another Ray worker process of this machine, after this test's process warmed it
        from lite_numba.batch import BatchRunner
        from lite_numba.jit.compiler import STATS

        BatchRunner(model)
        return dict(STATS)

    stats = ray_cluster.get(load_in_a_worker.remote(str(path)))
    assert stats["compiled"] == 0 and stats["compiled_by_workers"] == 0 and stats["loaded"] >= 1, stats


def test_ray_resize_model_with_preprocessing_and_renamed_columns(ray_cluster):
    from lite_numba.batch.ray import RayPredictor

    path = model_path("dynamic_batch_mlp")
    x = np.random.default_rng(2).standard_normal((30, 8)).astype(np.float32)
    ds = ray_cluster.data.from_items([{"id": k, "features": x[k].tolist()} for k in range(30)])
    out = ds.map_batches(RayPredictor, fn_constructor_kwargs={
        "model": str(path), "output_columns": {"Identity": "scores"},
        "preprocess": lambda row: np.asarray(row["features"], np.float32)}, batch_size=10, concurrency=1).take_all()
    got = np.stack([r["scores"] for r in sorted(out, key=lambda r: r["id"])])
    np.testing.assert_array_equal(got, plain_loop(path, {"x": x})["Identity"])


def test_ray_predictor_errors():
    from lite_numba.batch.ray import RayPredictor

    path = model_path("small_cnn_f32")
    p = RayPredictor(str(path))
    with pytest.raises(BatchInputError, match=r"the batch has no column \['image'\].*columns: \['img'\]"):
        p({"img": np.zeros((2, 32, 32, 3), np.float32)})
    with pytest.raises(BatchInputError, match="input_columns must map each of the model's inputs"):
        RayPredictor(two_in_two_out(True), input_columns={"x": "a"})
    with pytest.raises(BatchInputError, match=r"output_columns names \['nope'\]"):
        RayPredictor(str(path), output_columns={"nope": "y"})


def test_ray_predictor_timing_columns():
    """timing=True: each row carries its batch's seconds in the adapter and in invoke, its start and its process."""
    import os

    from lite_numba.batch.ray import RayPredictor

    path = model_path("small_cnn_f32")
    p = RayPredictor(str(path), timing=True)
    out = p({"image": np.zeros((3, 32, 32, 3), np.float32), "id": np.arange(3)})
    assert list(out["id"]) == [0, 1, 2] and out["Identity"].shape[0] == 3
    assert np.all(out["lite_numba_batch_s"] >= out["lite_numba_invoke_s"]) and np.all(out["lite_numba_invoke_s"] > 0)
    assert np.all(out["lite_numba_pid"] == os.getpid()) and len(set(out["lite_numba_started"])) == 1


class _ThreadOfCall:
    """Records the thread each call ran on, beside Ray's own task thread."""

    def __call__(self, batch):
        import threading

        k = len(batch["id"])
        return {"id": batch["id"], "call_thread": np.full(k, threading.get_ident()),
                "main": np.full(k, threading.main_thread().ident)}


def test_ray_actor_pool_runs_one_call_at_a_time_on_the_task_thread(ray_cluster):
    """actor_pool: one call at a time per actor (an interpreter refuses a second invoke while one runs), made on the
    thread Ray runs the actor's task on, without Ray's per-call hand-off to a second thread; the outputs are the
    plain loop's."""
    import sys

    from ray import cloudpickle

    from lite_numba.batch.ray import RayPredictor, actor_pool

    pool = actor_pool(2)
    assert pool.max_concurrent_calls_per_actor == 1 and pool.enable_true_multi_threading
    with pytest.raises(ValueError, match="actor_pool needs workers >= 1"):
        actor_pool(0)
    path = model_path("small_cnn_int8")
    x = images(48, np.int8, seed=12)
    ds = ray_cluster.data.from_items([{"id": k, "image": x[k]} for k in range(len(x))], override_num_blocks=4)
    out = ds.map_batches(RayPredictor, fn_constructor_kwargs={"model": str(path)}, batch_size=8, compute=pool,
                         num_cpus=1).take_all()
    got = np.stack([r["Identity"] for r in sorted(out, key=lambda r: r["id"])])
    assert np.array_equal(got, plain_loop(path, {"image": x})["Identity"])
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # _ThreadOfCall travels by value
    try:
        rows = ds.map_batches(_ThreadOfCall, batch_size=8, compute=actor_pool(1), num_cpus=1).take_all()
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert all(r["call_thread"] == r["main"] for r in rows), "Ray handed the calls to another thread"


# --- Dask -----------------------------------------------------------------------------------------------------

def _local_cluster(**kw):
    distributed = require_module("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                       **kw)
    return cluster, distributed.Client(cluster)


@pytest.fixture(scope="module")
def dask_client():
    require_module("dask.array")
    require_module("dask.dataframe")
    cluster, client = _local_cluster()
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def _worker_stats(client) -> dict:
    def stats():
        from lite_numba.jit.compiler import STATS

        return dict(STATS)

    return client.run(stats)


def test_dask_array_equals_a_plain_loop_and_workers_share_the_cache(dask_client):
    import dask.array as da

    from lite_numba.batch.dask import predict_array

    path = model_path("small_cnn_int8")
    BatchRunner(path)  # the cache is warm (this process compiled or loaded the model): workers must only load
    x = images(36, np.int8, seed=4)
    y = predict_array(da.from_array(x, chunks=(9, 16, 32, 3)), str(path), batch_size=4)
    assert y.shape == (36, 10) and y.dtype == np.int8 and y.chunks[0] == (9, 9, 9, 9)
    got = y.compute()
    assert np.array_equal(got, plain_loop(path, {"image": x})["Identity"])
    stats = _worker_stats(dask_client)
    assert len(stats) == 2
    assert sum(s["loaded"] for s in stats.values()) >= 1, stats  # a worker loaded the model's kernels ...
    assert all(s["compiled"] == 0 and s["compiled_by_workers"] == 0 for s in stats.values()), stats  # ... none compiled


def test_dask_dataframe_partitions(dask_client):
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd

    from lite_numba.batch.dask import predict_array, predict_frame

    path = model_path("dynamic_batch_mlp")
    x = np.random.default_rng(8).standard_normal((50, 8)).astype(np.float32)
    cols = [f"f{j}" for j in range(8)]
    ddf = dd.from_pandas(pd.DataFrame(x, columns=cols).assign(tag=np.arange(50)), npartitions=3)
    out = predict_frame(ddf, str(path), cols, output_prefix="p_", batch_size=16)
    assert list(out.columns) == [f"p_Identity_{j}" for j in range(6)]
    got = out.compute().sort_index()
    np.testing.assert_array_equal(got.to_numpy(), plain_loop(path, {"x": x})["Identity"])
    assert got.dtypes.iloc[0] == np.float32
    with pytest.raises(BatchInputError, match=r"x has dtype float64, the model's input 'x' takes float32"):
        predict_array(da.zeros((4, 8)), str(path))
    with pytest.raises(BatchInputError, match=r"takes \[8\] = 8 values per example; 2 columns were given"):
        predict_frame(ddf, str(path), cols[:2])
    with pytest.raises(BatchInputError, match=r"columns \['nope'\] are not in the frame"):
        predict_frame(ddf, str(path), ["nope"])


def _several_kernels() -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [1, 8], shape_signature=[-1, 8])
    a = b.add_tensor("a", np.float32, [1, 8], shape_signature=[-1, 8])
    m = b.add_tensor("m", np.float32, [1, 8], shape_signature=[-1, 8])
    t = b.add_tensor("t", np.float32, [1, 8], shape_signature=[-1, 8])
    y = b.add_tensor("y", np.float32, [1, 8], shape_signature=[-1, 8])
    b.add_op("SUB", [x, b.add_const("c", np.linspace(-1, 1, 8, dtype=np.float32))], [a])
    b.add_op("MUL", [a, b.add_const("k", np.full(8, 0.7, np.float32))], [m])
    b.add_op("LOGISTIC", [m], [t])
    b.add_op("MAXIMUM", [t, a], [y])
    b.mark_output(y)
    return b.build()


def test_dask_workers_on_a_cold_cache_compile_each_kernel_once(tmp_path):
    """Two worker processes start on an empty cache at the same time: they split the kernels (one waits for what
    the other is compiling) instead of both compiling all of them."""
    import dask.array as da
    require_module("distributed")

    from lite_numba.batch.dask import predict_array

    model = tmp_path / "m.tflite"
    model.write_bytes(_several_kernels())
    env = {"LITE_NUMBA_CACHE_DIR": str(tmp_path / "ln"), "NUMBA_CACHE_DIR": str(tmp_path / "nb"),
           "LITE_NUMBA_COMPILE_WORKERS": "1", "LITE_NUMBA_PROGRESS": "0"}
    cluster, client = _local_cluster(env=env)
    try:
        x = np.random.default_rng(0).standard_normal((20, 8)).astype(np.float32)
        got = predict_array(da.from_array(x, chunks=(10, 8)), str(model)).compute()
        stats = _worker_stats(client)
        dirs = client.run(lambda: __import__("lite_numba").NUMBA_CACHE_DIR)
    finally:
        client.close()
        cluster.close()
    assert all(d.startswith(str(tmp_path / "nb")) for d in dirs.values()), dirs  # the workers' cache is ours
    np.testing.assert_array_equal(got, plain_loop(model.read_bytes(), {"x": x})["y"])
    used = [s for s in stats.values() if s["compiled"] + s["loaded"]]
    needed = max(s["compiled"] + s["loaded"] for s in used)
    assert needed >= 4, stats
    assert sum(s["compiled"] for s in stats.values()) == needed, stats  # no kernel compiled twice
    print(json.dumps(stats))


# --- Apache Beam ----------------------------------------------------------------------------------------------

def _beam_run(handler, examples, out_prefix) -> dict[int, dict]:
    beam = require_module("apache_beam")
    from apache_beam.ml.inference.base import KeyedModelHandler, RunInference
    from apache_beam.options.pipeline_options import PipelineOptions

    def to_json(kv):
        key, result = kv
        return json.dumps({"key": key, "out": {k: [str(np.asarray(v).dtype), np.asarray(v).tolist()]
                                               for k, v in result.inference.items()}})

    opts = PipelineOptions(flags=[], runner="DirectRunner")
    with beam.Pipeline(options=opts) as p:
        (p | beam.Create(list(enumerate(examples)))
           | RunInference(KeyedModelHandler(handler))
           | beam.Map(to_json)
           | beam.io.WriteToText(str(out_prefix), file_name_suffix=".jsonl"))
    rows = {}
    for f in sorted(os.listdir(out_prefix.parent)):
        if f.startswith(out_prefix.name) and f.endswith(".jsonl"):
            for line in open(out_prefix.parent / f):
                r = json.loads(line)
                rows[r["key"]] = {k: np.array(v, dtype=dt) for k, (dt, v) in r["out"].items()}
    return rows


def test_beam_run_inference_equals_a_plain_loop(tmp_path):
    require_module("apache_beam")
    from lite_numba.batch.beam import TFLiteModelHandlerNumpy

    path = model_path("small_cnn_int8")
    x = images(25, np.int8, seed=21)
    handler = TFLiteModelHandlerNumpy(str(path), min_batch_size=4, max_batch_size=8)
    assert handler.batch_elements_kwargs() == {"min_batch_size": 4, "max_batch_size": 8}
    rows = _beam_run(handler, list(x), tmp_path / "out")
    assert sorted(rows) == list(range(25))
    got = np.stack([rows[k]["Identity"] for k in range(25)])
    assert np.array_equal(got, plain_loop(path, {"image": x})["Identity"]) and got.dtype == np.int8


def test_beam_several_inputs_resized(tmp_path):
    require_module("apache_beam")
    from lite_numba.batch.beam import TFLiteModelHandlerNumpy

    model = tmp_path / "two.tflite"
    model.write_bytes(two_in_two_out(True))
    rng = np.random.default_rng(6)
    xs, ss = rng.standard_normal((2, 13, 4)).astype(np.float32)
    rows = _beam_run(TFLiteModelHandlerNumpy(str(model), max_batch_size=5),
                     [{"x": xs[k], "s": ss[k]} for k in range(13)], tmp_path / "two")
    ref = plain_loop(model.read_bytes(), {"x": xs, "s": ss})
    for name in ("sum", "prod"):
        np.testing.assert_array_equal(np.stack([rows[k][name] for k in range(13)]), ref[name])
    assert TFLiteModelHandlerNumpy(str(model)).load_model().mode == "resize"
    with pytest.raises(BatchInputError, match="model_uri must be a .tflite path"):
        TFLiteModelHandlerNumpy(12)
