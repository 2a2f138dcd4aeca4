"""What another interpreter costs: `clone()`, `copy.deepcopy`, pickling, against a fresh Interpreter of the same
model (load, resolve, allocate) in the same warm process, and the official runtime's fresh Interpreter beside them.

Time: median of interleaved rounds. Memory: bytes traced by tracemalloc (numpy reports its allocations there) that
the new interpreter keeps alive; the model file is memory-mapped, so a fresh Interpreter's model does not count, and
a clone shares it anyway.
"""

from __future__ import annotations

import copy
import gc
import pickle
import statistics
import time
import tracemalloc

import pytest
from conftest import find_model

from lite_numba import Interpreter
from lite_numba.testing import require_official


def _kept_bytes(make) -> tuple[object, int]:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    obj = make()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return obj, after - before


@pytest.mark.parametrize("name", ["mobilenet_v2_100_224_int8", "mobilenet_v2_035_96_f32", "small_cnn_f32"])
def test_clone_against_fresh(benchmark, name):
    found = find_model(name)
    if found is None:
        pytest.skip(f"{name} is not bundled and ../shared/models is absent")
    path = str(found)
    lit = require_official()
    builtin = lit.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    src = Interpreter(model_path=path)
    src.allocate_tensors()
    src.invoke()

    def fresh():
        it = Interpreter(model_path=path)
        it.allocate_tensors()
        return it

    def official():
        it = lit.Interpreter(model_path=path, experimental_op_resolver_type=builtin)
        it.allocate_tensors()
        return it

    blob = pickle.dumps(src)
    ways = {"fresh": fresh, "clone": src.clone, "deepcopy": lambda: copy.deepcopy(src),
            "pickle.dumps": lambda: pickle.dumps(src), "pickle.loads": lambda: pickle.loads(blob),
            "official fresh": official}
    for make in ways.values():  # warm: everything compiled and cached in this process
        make()
    times = {k: [] for k in ways}
    for _ in range(7):
        for k, make in ways.items():
            t0 = time.perf_counter()
            make()
            times[k].append(time.perf_counter() - t0)
    ms = {k: 1e3 * statistics.median(v) for k, v in times.items()}
    kib = {k: _kept_bytes(ways[k])[1] / 1024 for k in ("fresh", "clone", "deepcopy", "pickle.loads")}
    benchmark.extra_info.update({"ms": ms, "kept_kib": kib, "pickle_kib": len(blob) / 1024,
                                 "clone/fresh time": ms["clone"] / ms["fresh"],
                                 "clone/fresh memory": kib["clone"] / kib["fresh"]})
    print(f"\n{name}: " + ", ".join(f"{k} {v:.2f} ms" for k, v in ms.items())
          + "; kept " + ", ".join(f"{k} {v:.0f} KiB" for k, v in kib.items()) + f"; pickle {len(blob) / 1024:.0f} KiB")
    benchmark.pedantic(src.clone, rounds=5, iterations=1)
