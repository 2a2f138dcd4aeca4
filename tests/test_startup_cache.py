"""Start-up (issue 16): `import lite_numba` imports no compiler; kernels compiled by parallel workers or by
`lite-numba warmup` reach the disk cache, and a fresh process then allocates and runs without compiling anything.

Compiles are counted in the fresh process with Numba's own "numba:compile" event (fired only when Numba compiles,
not when it loads from the disk cache) and with lite_numba.jit.compiler.STATS.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
from small_models import kernel_chain_model

from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close, require_official, run_official

# A fresh process: allocate and invoke the model, print its output and what was compiled or loaded.
FRESH = r"""
import json, sys
import numpy as np
from numba.core import event

compiled = []

class Count(event.Listener):
    def on_start(self, ev):
        compiled.append(ev.data["dispatcher"].py_func.__qualname__)

    def on_end(self, ev):
        pass

event.register("numba:compile", Count())
from lite_numba import Interpreter
from lite_numba.jit.compiler import STATS

it = Interpreter(model_path=sys.argv[1])
it.allocate_tensors()
it.set_tensor(it.get_input_details()[0]["index"], np.load(sys.argv[2]))
it.invoke()
y = it.get_tensor(it.get_output_details()[0]["index"])
from numba.core.registry import cpu_target
from lite_numba.kernels.base import isa
print(json.dumps({"compiled": compiled, "stats": STATS, "y": y.tolist(), "level": isa.isa_level(),
                  "codegen": list(cpu_target.target_context.codegen().magic_tuple()[1:])}))
"""


def _env(tmp_path, **extra) -> dict:
    env = dict(os.environ, LITE_NUMBA_CACHE_DIR=str(tmp_path / "ln"), NUMBA_CACHE_DIR=str(tmp_path / "nb"),
               LITE_NUMBA_PROGRESS="0")
    env.pop("LITE_NUMBA_COMPILE_WORKERS", None)
    return {**env, **extra}


# Prepended to FRESH: the process sees another CPU, {"name": LLVM's CPU name, "features": {LLVM feature: bool}}
# changed from the host's (llvmlite's answers, which Numba and kernels/base/isa.py both ask).
OTHER_CPU = r"""
import json as _json, os as _os
import llvmlite.binding as _ll
_cpu = _json.loads(_os.environ["LN_TEST_OTHER_CPU"])
_host_features = _ll.get_host_cpu_features


def _features():
    f = _host_features()
    f.update(_cpu["features"])
    return f


_ll.get_host_cpu_features = _features
_ll.get_host_cpu_name = lambda: _cpu["name"]
"""


def _fresh(model, x_path, env) -> dict:
    code = (OTHER_CPU if "LN_TEST_OTHER_CPU" in env else "") + FRESH
    out = subprocess.run([sys.executable, "-c", code, str(model), str(x_path)], capture_output=True, text=True,
                         env=env, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_does_not_load_the_compiler():
    code = ("import sys, lite_numba; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'numba', 'llvmlite'})))")
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout) == []


def test_numba_cache_is_configured_when_numba_is_first_imported(tmp_path):
    code = ("import lite_numba, sys; assert 'numba' not in sys.modules\n"
            "from lite_numba.kernels.elementwise import arithmetic\n"  # a kernel module imports Numba
            "from numba.core import config\n"
            "print(config.CACHE_DIR); print(lite_numba.NUMBA_CACHE_DIR)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(tmp_path),
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    configured, expected = out.stdout.split()
    assert configured == expected
    assert configured.startswith(str(tmp_path / "nb" / "lite_numba-"))


def test_cache_written_by_workers_is_loaded_by_a_fresh_process(tmp_path):
    require_official()
    model = tmp_path / "m.tflite"
    model.write_bytes(kernel_chain_model())
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    ref = run_official(model.read_bytes(), [x])[0]

    # cold, two compile processes (this one and a forked worker)
    cold = _fresh(model, tmp_path / "x.npy", _env(tmp_path, LITE_NUMBA_COMPILE_WORKERS="2"))
    assert cold["compiled"], "the cold process compiled nothing: the caches were not empty"
    assert cold["stats"]["compiled_by_workers"] >= 1, cold["stats"]
    assert_close(np.array(cold["y"], np.float32), ref)

    # one compile process: anything compiled would be compiled here, where the listener sees it
    warm = _fresh(model, tmp_path / "x.npy", _env(tmp_path, LITE_NUMBA_COMPILE_WORKERS="1"))
    assert warm["compiled"] == [], f"a fresh process recompiled {warm['compiled']}"
    assert warm["stats"]["compiled"] == 0 and warm["stats"]["loaded"] >= 3, warm["stats"]
    assert_close(np.array(warm["y"], np.float32), ref)


def test_warmup_command_then_a_fresh_process_compiles_nothing(tmp_path):
    require_official()
    model = tmp_path / "m.tflite"
    model.write_bytes(kernel_chain_model())
    x = np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    env = _env(tmp_path)
    cmd = [sys.executable, "-c", "import sys; from lite_numba.tools.cli import main; sys.exit(main())"]
    out = subprocess.run(cmd + ["warmup", str(model)], capture_output=True, text=True, env=env, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "kernels cache: " + str(tmp_path / "nb") in out.stdout
    assert f"{model}:" in out.stdout and "kernels compiled" in out.stdout

    warm = _fresh(model, tmp_path / "x.npy", {**env, "LITE_NUMBA_COMPILE_WORKERS": "1"})  # compiles seen here
    assert warm["compiled"] == [], f"a fresh process recompiled {warm['compiled']}"
    assert warm["stats"]["compiled"] == 0 and warm["stats"]["compiled_by_workers"] == 0, warm["stats"]
    assert_close(np.array(warm["y"], np.float32), run_official(model.read_bytes(), [x])[0])


def test_warmup_command_errors(tmp_path, capsys):
    from lite_numba.tools.warmup import main

    try:
        main([])
    except SystemExit as e:  # argparse: nothing to warm up
        assert e.code == 2
    else:
        raise AssertionError("warmup without models must fail")
    assert "give MODEL files or --all" in capsys.readouterr().err
    missing = tmp_path / "missing.tflite"
    assert main([str(missing)]) == 1
    assert f"ERROR: {missing}" in capsys.readouterr().err


def test_common_op_models_load():
    from lite_numba import Interpreter
    from lite_numba.tools.warmup import common_op_models

    models = common_op_models()
    assert sorted(models) == ["common_ops_float32", "common_ops_int8"]
    for m in models.values():
        ops = {n.op_name for n in Interpreter(model_content=m).model.subgraphs[0].nodes}
        assert {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "SOFTMAX", "ADD", "MEAN"} <= ops


# A fresh process whose prepare calls compiled code from Python (8-bit ADD's pair tables): what it compiled, whether
# Numba's lowering registries were loaded (a direct dispatcher call's first cache load imports them all, scipy.linalg
# among them), and the output.
PREPARE_CALL = r"""
import json, sys
import numpy as np
from lite_numba import Interpreter
from lite_numba.jit.compiler import STATS

it = Interpreter(model_path=sys.argv[1])
it.allocate_tensors()
x = np.arange(1024, dtype=np.int64)
it.set_tensor(it.get_input_details()[0]["index"], (x % 256 - 128).astype(np.int8).reshape(1, 1024))
it.set_tensor(it.get_input_details()[1]["index"], (x // 4 % 256 - 128).astype(np.int8).reshape(1, 1024))
it.invoke()
y = it.get_tensor(it.get_output_details()[0]["index"])
print(json.dumps({"stats": STATS, "registries": "numba.np.linalg" in sys.modules, "y": y.tolist()}))
"""


def test_prepare_time_compiled_call_loads_without_the_lowering_registries(tmp_path):
    b = ModelBuilder()
    x = b.add_input("x", np.int8, [1, 1024], quant=(0.05, -3))
    y = b.add_input("y", np.int8, [1, 1024], quant=(0.03, 7))
    z = b.add_tensor("z", np.int8, [1, 1024], quant=(0.07, 2))
    b.add_op("ADD", [x, y], [z], version=2)  # same shapes, >= PAIR_TABLE_MIN_SIZE: pair tables filled at prepare
    b.mark_output(z)
    model = tmp_path / "add.tflite"
    model.write_bytes(b.build())
    env = _env(tmp_path, LITE_NUMBA_COMPILE_WORKERS="1")
    runs = []
    for _ in range(2):  # cold, then warm
        out = subprocess.run([sys.executable, "-c", PREPARE_CALL, str(model)], capture_output=True, text=True,
                             env=env, timeout=1800)
        assert out.returncode == 0, out.stderr[-3000:]
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["stats"]["compiled"] >= 2, cold["stats"]  # the pair tables' filler and the lookup kernel at least
    assert warm["stats"]["compiled"] == 0 and warm["stats"]["loaded"] >= 2, warm["stats"]
    assert not warm["registries"], "the warm process loaded Numba's lowering registries"
    assert warm["y"] == cold["y"]


def _host_features() -> dict:
    import llvmlite.binding as ll

    return {k: bool(v) for k, v in ll.get_host_cpu_features().items()}


def _needs_avx512():
    import pytest
    from lite_numba.kernels.base import isa

    if isa.missing_features("avx512"):
        pytest.skip(f"simulates a CPU with fewer features than this one, which lacks {isa.missing_features('avx512')}")


def test_level_target_covers_every_kernel_path():
    """The codegen's features include everything each kernel path this CPU runs needs, and nothing the host lacks;
    a CPU without x86-64-v3 keeps Numba's host target."""
    from lite_numba.kernels.base import isa

    from lite_numba.jit.numba_cache import level_target

    host = _host_features()
    target = level_target(host)
    if isa.missing_features("avx2"):
        assert target is None
        return
    level, _, features = target
    on = {f[1:] for f in features.split(",") if f[0] == "+"}
    assert all(host.get(f) for f in on), sorted(f for f in on if not host.get(f))
    for lv in isa.supported_levels(host):
        assert set(isa.NEEDS[lv]) <= on, (lv, sorted(set(isa.NEEDS[lv]) - on))
    assert level == isa.supported_levels(host)[-1] or level == "amx"  # (amx: the features, whatever the grant)
    assert level_target({**host, "avx2": False}) is None
    no512 = level_target({**host, **{f: False for f in host if f.startswith(("avx512", "amx"))}})
    assert no512[0] in ("avx2", "avxvnni") and "-avx512f" in no512[2].split(",")


def _chain_case(tmp_path, seed: int):
    """The level tests' case: the host's features, a small kernel chain written to tmp_path/m.tflite, its input in
    tmp_path/x.npy and the official runtime's output (these tests need the oracle and an AVX-512 host)."""
    require_official()
    _needs_avx512()
    model = tmp_path / "m.tflite"
    model.write_bytes(kernel_chain_model())
    x = np.random.default_rng(seed).standard_normal((2, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    return _host_features(), model, run_official(model.read_bytes(), [x])[0]


def test_a_cache_is_shared_by_cpus_of_one_level(tmp_path):
    """A process on another CPU model with the same ladder features (another LLVM CPU name, other non-ladder
    features) loads everything the host compiled; with LITE_NUMBA_CODEGEN=host (Numba's own key: the exact CPU)
    the same process compiles again."""
    host, model, ref = _chain_case(tmp_path, 2)
    other = json.dumps({"name": "icelake-server" if ll_name() != "icelake-server" else "sapphirerapids",
                        "features": {f: not host.get(f, False) for f in ("sha", "gfni", "vaes", "avx512fp16", "rtm")}})
    for mode in ("level", "host"):
        env = _env(tmp_path / mode, LITE_NUMBA_COMPILE_WORKERS="1", LITE_NUMBA_CODEGEN=mode)
        made = _fresh(model, tmp_path / "x.npy", env)
        assert made["compiled"], "the first process compiled nothing: the caches were not empty"
        elsewhere = _fresh(model, tmp_path / "x.npy", {**env, "LN_TEST_OTHER_CPU": other})
        assert_close(np.array(elsewhere["y"], np.float32), ref)
        assert elsewhere["level"] == made["level"]
        if mode == "level":
            assert elsewhere["codegen"] == made["codegen"]
            assert elsewhere["compiled"] == [], f"the other CPU recompiled {elsewhere['compiled']}"
        else:  # the control: Numba's key is the exact CPU
            assert elsewhere["codegen"] != made["codegen"] and elsewhere["compiled"]


def test_a_cache_of_another_level_is_not_used(tmp_path):
    """A process on a CPU without AVX-512 and AMX (simulated) does not load the host's cache: it compiles its own,
    for its own level, with the official outputs; the host's next process still loads the host's."""
    host, model, ref = _chain_case(tmp_path, 3)
    env = _env(tmp_path, LITE_NUMBA_COMPILE_WORKERS="1")
    made = _fresh(model, tmp_path / "x.npy", env)
    smaller = json.dumps({"name": "alderlake", "features": {f: False for f in host if f.startswith(("avx512", "amx"))}})
    lower = _fresh(model, tmp_path / "x.npy", {**env, "LN_TEST_OTHER_CPU": smaller})
    assert lower["level"] in ("avx2", "avxvnni") and made["level"] not in ("avx2", "avxvnni")
    assert "-avx512f" in lower["codegen"][1].split(",")
    assert lower["compiled"], "the process without AVX-512 used code compiled with it"
    assert_close(np.array(lower["y"], np.float32), ref)
    again = _fresh(model, tmp_path / "x.npy", env)
    assert again["compiled"] == [] and again["codegen"] == made["codegen"]
    assert_close(np.array(again["y"], np.float32), ref)


def ll_name() -> str:
    import llvmlite.binding as ll

    return ll.get_host_cpu_name()
