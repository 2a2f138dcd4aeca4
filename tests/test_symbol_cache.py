"""Compiled runners and kernels loaded from the disk caches by another process link the right kernels.

Numba names a compiled symbol by qualified name plus a per-process counter, and a cached caller resolves its callees
by name in the loading process (see lite_numba/symbols.py). Kernels made by one factory (ADD's and MUL's
`make_binary.<locals>.same`) used to share a qualified name: a process that compiled MUL's loop first and then
loaded ADD's cached runner ran a multiplication for ADD. Process 1 below warms fresh caches with one set of models;
process 2 runs them in another order (compiling MUL first) and must still match the official runtime everywhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest
from conftest import MODELS

WORKER = r"""
import json, sys
import numpy as np
from lite_numba import Interpreter
from lite_numba.testing import assert_close, run_official

results = {}
for name in sys.argv[1:]:
    path = f"{MODELS}/{name}.tflite"
    it = Interpreter(model_path=path)
    it.allocate_tensors()
    rng = np.random.default_rng(7)
    inputs = []
    for d in it.get_input_details():
        x = rng.uniform(-2, 2, d["shape"]).astype(d["dtype"])
        inputs.append(x)
        it.set_tensor(d["index"], x)
    it.invoke()
    ours = [it.get_tensor(d["index"]) for d in it.get_output_details()]
    ref = run_official(path, inputs)
    problems = []  # assert_close's message per output (a NaN where the reference has a number fails)
    if len(ours) != len(ref) or not ref:
        problems.append(f"{len(ours)} outputs vs {len(ref)}")
    for k, (a, b) in enumerate(zip(ours, ref)):
        try:
            assert_close(a, b, family="model" if "transformer" in name else "elementwise", what=f"output {k}")
        except AssertionError as e:
            problems.append(str(e))
    results[name] = problems
print(json.dumps(results))
"""


def _run(models: list[str], cache: str) -> dict[str, list[str]]:
    env = dict(os.environ, LITE_NUMBA_CACHE_DIR=os.path.join(cache, "ln"), NUMBA_CACHE_DIR=os.path.join(cache, "nb"),
               LITE_NUMBA_PROGRESS="0")
    out = subprocess.run([sys.executable, "-c", WORKER.replace("{MODELS}", str(MODELS)), *models],
                         capture_output=True, text=True, env=env, timeout=1500, cwd=cache)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("with_transformer", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_cached_runners_link_their_own_kernels_across_processes(official, tmp_path, with_transformer):
    extra = ["transformer_block_f32"] if with_transformer else []
    first = _run(["op_add", *extra], str(tmp_path))  # warms the caches: ADD's loop and runner
    second = _run(["op_mul", "op_add", *extra], str(tmp_path))  # MUL compiled first, then ADD loaded from the cache
    third = _run(["op_add", "op_mul", *extra], str(tmp_path))  # everything loaded from the caches
    for results in (first, second, third):
        assert set(results) >= {"op_add"}, results
        for name, problems in results.items():
            assert not problems, f"{name} differs from the official runtime: {problems}"
    runners = os.listdir(tmp_path / "ln" / "runners")
    assert runners, "the runners were not written to the cache"


# --- the naming rule itself (in-process) ------------------------------------------------------------------------

def _factory(k):
    from numba import njit

    @njit(cache=True, nogil=True)
    def scaled(x, out):
        for i in range(x.size):
            out[i] = x[i] * k

    return scaled


def _two_branches(flag):
    from numba import njit

    if flag:
        @njit(cache=True, nogil=True)
        def check(c):
            if c < 0:
                raise ValueError("first message")
    else:
        @njit(cache=True, nogil=True)
        def check(c):
            if c < 0:
                raise ValueError("second message")
    return check


def test_factory_closures_get_distinct_stable_names():
    from lite_numba.jit.symbols import fingerprint, stable_kernel, symbol_name

    a, b, a2 = stable_kernel(_factory(2.0)), stable_kernel(_factory(3.0)), stable_kernel(_factory(2.0))
    assert symbol_name(a) != symbol_name(b)
    assert a2 is a  # the same function made twice is one kernel (compiled once)
    assert ".k" in symbol_name(a) and "<locals>" in symbol_name(a)
    # same qualified name and captures, different code (constants): still distinct
    c1, c2 = stable_kernel(_two_branches(True)), stable_kernel(_two_branches(False))
    assert symbol_name(c1) != symbol_name(c2) and fingerprint(c1) != fingerprint(c2)
    x, out = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    a(x, out)
    np.testing.assert_array_equal(out, x * 2)
    b(x, out)
    np.testing.assert_array_equal(out, x * 3)


def test_closure_compiled_before_naming_is_replaced_by_a_named_copy():
    from lite_numba.jit.symbols import stable_kernel, symbol_name

    raw = _factory(5.0)
    x, out = np.arange(3, dtype=np.float32), np.zeros(3, np.float32)
    raw(x, out)  # compiled under the shared name
    named = stable_kernel(raw)
    assert named is not raw and ".k" in symbol_name(named)
    assert stable_kernel(raw) is named
    named(x, out)
    np.testing.assert_array_equal(out, x * 5)


def test_kernel_library_names_are_unique():
    """Every factory-made kernel of the builtin kernel modules gets a name of its own."""
    import importlib
    import pkgutil

    from numba.core.dispatcher import Dispatcher

    from lite_numba.jit.symbols import stable_kernel, symbol_name

    package = importlib.import_module("lite_numba.kernels")
    seen: dict[str, object] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"lite_numba.kernels.{info.name}")
        for value in list(vars(module).values()):
            for fn in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(fn, Dispatcher):
                    named = stable_kernel(fn)
                    name = symbol_name(named)
                    assert seen.setdefault(name, named) is named, f"{name} names two kernels"


def test_unnameable_capture_fails_loudly():
    from numba import njit

    from lite_numba.jit.symbols import SymbolNameError, stable_kernel

    thing = types.SimpleNamespace  # a class is fine ...
    obj = object()  # ... an object known only by its address is not

    def make(v):
        @njit
        def f(x):
            return v

        return f

    stable_kernel(make(thing))
    with pytest.raises(SymbolNameError, match="no stable description"):
        stable_kernel(make(obj))


def test_lazy_registry_rows_resolve_to_kernels():
    """The registry imports kernel modules on first use; every row must name a real kernel."""
    from lite_numba.kernels.registry import BUILTINS, LazyKernel

    from lite_numba.ops import OpKernel

    for op, lo, hi, k in BUILTINS:
        assert lo <= hi
        real = k.resolve() if isinstance(k, LazyKernel) else k
        assert isinstance(real, OpKernel) and not isinstance(real, LazyKernel), op
        assert k.prepare is real.prepare and k.host is real.host and k.name == real.name
