"""The `lite-numba` command: benchmark (official benchmark_model flags and output), inspect and run.

The console script and `python -m lite_numba.tools.benchmark` run as subprocesses; flag variants call the same
`main()` in-process (a subprocess per variant would mostly time Python start-up). Timing values are not asserted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import model_path

from lite_numba.testing import official_interpreter
from lite_numba.tools import benchmark as bm
from lite_numba.tools.cli import main as cli_main
from lite_numba.tools.cli import sanitize_name

FAST = ["--num_runs", "5", "--min_secs", "0", "--warmup_min_secs", "0"]


def _cli(*args: str, module: str | None = None) -> subprocess.CompletedProcess:
    """Run the console script (or `python -m module`) in a subprocess."""
    if module is not None:
        cmd = [sys.executable, "-m", module]
    elif shutil.which("lite-numba"):
        cmd = [shutil.which("lite-numba")]
    else:  # not installed as a script: the same entry point
        cmd = [sys.executable, "-c", "import sys; from lite_numba.tools.cli import main; sys.exit(main())"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=300)


def _bench(capsys, *args: str) -> tuple[int, str, str]:
    code = bm.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_benchmark_console_script_with_op_profiling():
    graph = str(model_path("op_softmax_beta"))
    p = _cli("benchmark", "--graph", graph, *FAST, "--enable_op_profiling")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert out.startswith("STARTING!\n")
    assert f"Graph: [{graph}]" in out and "Enable op profiling: [1]" in out and "Min num runs: [5]" in out
    assert re.search(r"Initialized session in [\d.]+ms\.", out)
    assert "Running benchmark for at least 5 iterations and at least 0 seconds but terminate if exceeding 150 " \
           "seconds." in out
    assert re.search(r"^count=5 first=\d+ curr=\d+ min=\d+ max=\d+ avg=\S+ std=\d+ p5=\d+ median=\d+ p95=\d+$", out,
                     re.M) or re.search(r"^count=5 curr=\d+\(all same\)", out, re.M)
    assert re.search(r"Inference timings in us: Init: \d+, First inference: \d+, Warmup \(avg\): \S+, Inference "
                     r"\(avg\): \S+", out)
    assert "Memory footprint delta from the start of the tool (MB): init=" in out
    assert "Operator-wise Profiling Info for Regular Benchmark Runs:" in out
    for title in ("Run Order", "Top by Computation Time", "Summary by node type"):
        assert f"============================== {title} ==============================" in out
    assert "\t                     MUL\t" in out and "[Identity]:1" in out
    assert "op times / invoke time" in out


def test_python_module_entry_point():
    p = _cli("--help", module="lite_numba.tools.benchmark")
    assert p.returncode == 0
    for flag in ("--graph", "--num_runs", "--min_secs", "--max_secs", "--warmup_runs", "--warmup_min_secs",
                 "--num_threads", "--enable_op_profiling", "--op_profiling_output_mode", "--op_profiling_output_file",
                 "--input_layer", "--input_layer_shape", "--input_layer_value_range", "--input_layer_value_files",
                 "--signature_to_run_for", "--report_peak_memory_footprint", "--verbose", "--compare_official"):
        assert flag in p.stdout


@pytest.mark.parametrize("mode", ["csv", "json", "html"])
def test_op_profiling_output_modes(capsys, tmp_path, mode):
    target = tmp_path / f"profile.{mode}"
    code, out, err = _bench(capsys, "--graph", str(model_path("op_squared_norm_rsqrt")), *FAST,
                            "--enable_op_profiling=true", f"--op_profiling_output_mode={mode}",
                            f"--op_profiling_output_file={target}")
    assert code == 0, err
    text = target.read_text()
    assert f"written to {target}" in out
    if mode == "csv":
        assert "node type, first, avg_ms, %, cdf%, mem KB, times called, name" in text
        assert "node type, count, avg_ms, avg %, cdf %, mem KB, times called" in text
        assert re.search(r"^RSQRT, [\d.e-]+, [\d.e-]+, [\d.e-]+%, [\d.e-]+%, ", text, re.M)
    elif mode == "json":
        doc = json.loads(text)
        assert [n["op_name"] for n in doc["nodes"]] == ["SQUARE", "SUM", "ADD", "RSQRT", "MUL"]
        assert doc["benchmark"]["model"].endswith("op_squared_norm_rsqrt.tflite") and doc["init"]
    else:
        assert text.startswith("<!DOCTYPE html>") and text.count("<svg") == 2 and "RSQRT" in text


def test_compare_official_and_peak_memory(capsys):
    code, out, err = _bench(capsys, "--graph", str(model_path("op_softmax_beta")), *FAST, "--compare_official",
                            "--report_peak_memory_footprint")
    assert code == 0, err
    assert "Comparison with the official runtime" in out
    rows = {name: line for line in out.splitlines()
            for name in ("lite-numba", "official builtin kernels", "official XNNPACK (default)")
            if line.strip().startswith(name + "\t")}
    assert len(rows) == 3, out
    assert re.search(r"x avg, .*out0: max \|diff\| ", rows["official builtin kernels"])
    assert "Overall peak memory footprint (MB) via periodic monitoring: " in out


def test_input_layer_shape_and_value_files(capsys, tmp_path):
    graph = str(model_path("dynamic_batch_mlp"))
    name = bm.OurRunner(graph, 1, "").inputs[0][0]
    x = np.random.default_rng(3).normal(size=(3, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    code, out, err = _bench(capsys, "--graph", graph, *FAST, f"--input_layer={name}", "--input_layer_shape=3,8",
                            f"--input_layer_value_files={name.replace(':', '::')}:{tmp_path / 'x.npy'}",
                            "--compare_official")
    assert code == 0, err
    assert "Input shapes: [3,8]" in out
    assert re.search(r"official builtin kernels\t.*out0: max \|diff\| (0|\d\.\d+e-0[5-9])", out), out
    # raw binary files must have the exact size
    (tmp_path / "bad.bin").write_bytes(b"\0" * 12)
    code, out, err = _bench(capsys, "--graph", graph, *FAST, f"--input_layer_value_files={name.replace(':', '::')}:"
                            f"{tmp_path / 'bad.bin'}")
    assert code == 1 and "bytes. It should be 32 bytes." in err


def test_value_ranges_and_random_inputs(capsys):
    rng = np.random.default_rng(0)
    v = bm.random_input(np.int32, (1000,), rng, 2, 5)
    assert v.dtype == np.int32 and v.min() == 2 and v.max() == 5
    assert bm.random_input(np.int8, (4000,), rng).min() >= -127
    f = bm.random_input(np.float32, (1000,), rng)
    assert f.dtype == np.float32 and -0.5 <= f.min() and f.max() <= 0.5
    infos = bm.parse_input_layers("a,b", "1,2:3", "b,0,4", "a:x::y.npy")
    assert [(i.name, i.shape, i.low, i.high, i.file) for i in infos] == \
        [("a", (1, 2), None, None, "x:y.npy"), ("b", (3,), 0, 4, None)]
    with pytest.raises(bm.BenchmarkError, match="must match the number of items"):
        bm.parse_input_layers("a,b", "1,2", "", "")
    with pytest.raises(bm.BenchmarkError, match="Wrong low and high"):
        bm.parse_input_layers("a", "", "a,5,1", "")
    graph = str(model_path("op_embedding_lookup"))
    name = bm.OurRunner(graph, 1, "").inputs[0][0]
    code, out, err = _bench(capsys, "--graph", graph, *FAST, f"--input_layer_value_range={name},0,3")
    assert code == 0, err


def test_signatures_and_errors(capsys, tmp_path):
    graph = str(model_path("multi_signature_add_mul"))
    code, out, err = _bench(capsys, "--graph", graph, *FAST)
    assert code == 1
    assert 'Signature not specified or incorrect. Pass one of the following to the flag "--signature_to_run_for"' \
           in err and " #> Signature key: add" in err and " #> Signature key: mul" in err
    code, out, err = _bench(capsys, "--graph", graph, *FAST, "--signature_to_run_for=mul", "--compare_official")
    assert code == 0, err
    assert "Using signature: mul" in out and "out1: max |diff| 0" in out
    code, out, err = _bench(capsys, *FAST, "--use_xnnpack=false")
    assert "WARNING: Unconsumed cmdline flags: --use_xnnpack=false" in err
    assert code == 1 and "Please specify the name of your TF Lite input file with --graph" in err
    code, out, err = _bench(capsys, "--graph", str(tmp_path / "missing.tflite"))
    assert code == 1 and "does not exist" in err
    code, out, err = _bench(capsys, "--graph", graph, "--enable_op_profiling", "--op_profiling_output_mode=proto")
    assert code == 1 and "Output mode proto is not supported" in err


def test_inspect_command():
    p = _cli("inspect", str(model_path("seed_atan")))
    assert p.returncode == 0, p.stderr
    assert re.search(r"Atan\s+custom\s+1\s+1\s+yes\s+custom op, provided by lite_numba.plugins.examples", p.stdout)
    assert "This installation can run the model: yes" in p.stdout and "Activation arena" in p.stdout
    p = _cli("inspect", str(model_path("seed_atan")), "--builtin-only", "--json")
    assert p.returncode == 0, p.stderr
    info = json.loads(p.stdout)
    atan = next(e for e in info["ops"] if e["op"] == "Atan")
    assert not atan["can_run"] and not info["can_run"]


def test_run_command_writes_outputs(official, tmp_path):
    graph = str(model_path("seed_atan"))
    x = np.linspace(-3, 3, 5).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out_dir = tmp_path / "out"
    p = _cli("run", graph, "--input", str(tmp_path / "x.npy"), "--output-dir", str(out_dir), "--all-tensors",
             "--trace")
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(out_dir)) == ["Identity.npy", "add.npy", "tensors"]
    assert len(os.listdir(out_dir / "tensors")) == 4
    assert "node 1 custom Atan v1" in p.stderr
    np.testing.assert_allclose(np.load(out_dir / "Identity.npy"), np.arctan(x + np.float32(0.99999905)), rtol=1e-6)
    ref = official_interpreter(graph, num_threads=None, allocate=False)
    with pytest.raises(RuntimeError, match="unresolved custom op: Atan"):
        ref.allocate_tensors()  # the official runtime has no Atan: compare the ADD output only
    b = np.load(out_dir / "add.npy")
    assert b.dtype == np.float32 and np.array_equal(b, x + np.float32(0.99999905))


def test_run_in_process_by_name_and_sanitized_names(capsys, tmp_path):
    graph = str(model_path("multi_signature_add_mul"))
    a, b = np.arange(4, dtype=np.float32), np.full(4, 2, np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    code = cli_main(["run", graph, "--input", f"add_a:0={tmp_path / 'a.npy'}", "--input",
                     f"add_b:0={tmp_path / 'b.npy'}", "--output-dir", str(tmp_path / "o")])
    assert code == 0, capsys.readouterr().err
    assert os.listdir(tmp_path / "o") == ["PartitionedCall_0.npy"]
    assert np.array_equal(np.load(tmp_path / "o" / "PartitionedCall_0.npy"), a + b)
    assert sanitize_name("a/b:0") == "a_b_0" and sanitize_name("::") == "tensor"
    assert cli_main(["run", graph, "--input", str(tmp_path / "missing.npy"), "--output-dir", str(tmp_path)]) == 1
    assert cli_main([]) == 2 and cli_main(["frobnicate"]) == 2 and cli_main(["--version"]) == 0
