"""Resource limits and quantization refusals for untrusted models: a tensor or arena beyond the memory limit fails at
allocate_tensors() with ArenaLimitError (a MemoryError naming the tensor), max_arena_bytes lowers the limit, a WHILE
loop whose tensors grow without end stops at the limit, and quantization parameters no tensor can hold are refused
at load naming the tensor and the value."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.format.model import ModelError
from lite_numba.runtime.arena import ArenaLimitError


def _relu_model(shape, dtype=np.float32, quant=None) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape, quant=quant)
    y = b.add_tensor("y", dtype, shape, quant=quant)
    b.add_op("RELU", [x], [y])
    b.mark_output(y)
    return b.build()


def test_terabyte_tensor_fails_at_allocate_with_memory_error_under_200_mib(tmp_path):
    """2^40 bytes declared (float32 [2^19, 2^19]): the Interpreter is created, allocate_tensors() raises
    ArenaLimitError naming the tensor and its size, and the process never grows past 200 MiB."""
    code = textwrap.dedent("""
        import resource, time
        import numpy as np
        from lite_numba import Interpreter
        from lite_numba.builder import ModelBuilder
        b = ModelBuilder()
        x = b.add_input("x", np.float32, [1 << 19, 1 << 19])
        y = b.add_tensor("huge", np.float32, [1 << 19, 1 << 19])
        b.add_op("RELU", [x], [y])
        b.mark_output(y)
        it = Interpreter(model_content=b.build())
        t0 = time.perf_counter()
        try:
            it.allocate_tensors()
            print("allocated")
        except MemoryError as e:
            print(type(e).__name__, str(e).replace(chr(10), " "))
        print("seconds", time.perf_counter() - t0)
        # VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the parent (pytest, often > 1 GiB by then)
        hwm = [ln for ln in open("/proc/self/status") if ln.startswith("VmHWM:")]
        peak_kib = int(hwm[0].split()[1]) if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print("peak_mib", peak_kib / 1024)
    """)
    env = dict(os.environ, LITE_NUMBA_PROGRESS="0")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    print(proc.stdout)
    assert "ArenaLimitError" in lines, proc.stdout
    assert "'huge'" in lines["ArenaLimitError"] and "1099511627776 bytes" in lines["ArenaLimitError"]
    assert float(lines["peak_mib"]) < 200


def test_max_arena_bytes_refuses_a_model_that_runs_without_it():
    data = _relu_model([64, 1024])  # 256 KiB per tensor
    plain = Interpreter(model_content=data)
    plain.allocate_tensors()
    assert plain.arena_size >= 2 * 64 * 1024 * 4
    small = Interpreter(model_content=data, max_arena_bytes=100_000)
    with pytest.raises(ArenaLimitError, match=r"tensor \d \('[xy]', float32 \[64, 1024\]\) needs 262144 bytes.*"
                                              r"max_arena_bytes \(100000 bytes"):
        small.allocate_tensors()
    ok = Interpreter(model_content=data, max_arena_bytes=1 << 20)
    ok.allocate_tensors()
    x = np.linspace(-1, 1, 64 * 1024, dtype=np.float32).reshape(64, 1024)
    ok.set_tensor(ok.get_input_details()[0]["index"], x)
    ok.invoke()
    np.testing.assert_array_equal(ok.get_tensor(ok.get_output_details()[0]["index"]), np.maximum(x, 0))


@pytest.mark.parametrize("value", [0, -5, 1.5, "1"])
def test_max_arena_bytes_must_be_a_positive_int(value):
    with pytest.raises(ValueError, match="max_arena_bytes must be a positive int"):
        Interpreter(model_content=_relu_model([2]), max_arena_bytes=value)


def _endless_growing_loop() -> bytes:
    """while True: x = concat(x, x) — the official runtime doubles x until the process dies."""
    b = ModelBuilder()
    cond = b.add_subgraph("cond")
    cond.add_input("x", np.float32, [1], shape_signature=[-1])
    t = cond.add_const("true", np.array(True))
    c = cond.add_tensor("c", np.bool_, [])
    cond.add_op("LOGICAL_AND", [t, t], [c])
    cond.mark_output(c)
    body = b.add_subgraph("body")
    bx = body.add_input("x", np.float32, [1], shape_signature=[-1])
    nx = body.add_tensor("x_next", np.float32, [2], shape_signature=[-1])
    body.add_op("CONCATENATION", [bx, bx], [nx], options={"axis": 0})
    body.mark_output(nx)
    x = b.add_input("x", np.float32, [1], shape_signature=[-1])
    ox = b.add_tensor("ox", np.float32, [1], shape_signature=[-1])
    b.add_op("WHILE", [x], [ox], options={"cond_subgraph_index": cond.index, "body_subgraph_index": body.index})
    b.mark_output(ox)
    return b.build()


def test_while_loop_growing_without_end_stops_at_the_memory_limit():
    it = Interpreter(model_content=_endless_growing_loop(), max_arena_bytes=1 << 20)
    it.allocate_tensors()
    it.set_tensor(0, np.ones(1, np.float32))
    with pytest.raises(ArenaLimitError) as err:
        it.invoke()
    assert "'x_next'" in str(err.value) and "max_arena_bytes (1048576 bytes" in str(err.value)


@pytest.mark.parametrize("dtype, zp", [(np.int8, -1000), (np.int8, 256), (np.int8, 1 << 40), (np.int8, -129),
                                       (np.uint8, 256), (np.uint8, -1), (np.int16, 40000)])
def test_zero_point_outside_the_type_is_refused_naming_tensor_and_value(dtype, zp):
    """Both runtimes run such models and return different garbage (found by the campaign): refuse them."""
    with pytest.raises(ModelError, match=rf"tensor 0 \('x'\) of type {np.dtype(dtype).name.upper()} has zero point "
                                         rf"{zp}, outside"):
        Interpreter(model_content=_relu_model([4], dtype, quant=(0.1, zp)))


@pytest.mark.parametrize("dtype, zp", [(np.int8, -128), (np.int8, 127), (np.uint8, 0), (np.uint8, 255)])
def test_zero_points_at_the_ends_of_the_range_load(dtype, zp):
    Interpreter(model_content=_relu_model([4], dtype, quant=(0.1, zp))).allocate_tensors()


@pytest.mark.parametrize("scale", [np.inf, -np.inf, np.nan, -0.5])
def test_non_finite_or_negative_scale_is_refused_naming_the_tensor(scale):
    """An infinite scale used to surface as 'cannot convert float infinity to integer' from a prepare."""
    with pytest.raises(ModelError, match=r"tensor 0 \('x'\) has quantization scale .*finite and non-negative"):
        Interpreter(model_content=_relu_model([4], np.int8, quant=(scale, 0)))


def test_quantized_dimension_and_channel_count_are_checked():
    b = ModelBuilder()
    x = b.add_input("x", np.int8, [2, 3], quant={"scales": [0.1, 0.2, 0.3], "zero_points": [0, 0, 0],
                                                  "quantized_dimension": 2})
    y = b.add_tensor("y", np.int8, [2, 3], quant=(0.1, 0))
    b.add_op("RELU", [x], [y])
    b.mark_output(y)
    with pytest.raises(ModelError, match=r"tensor 0 \('x'\) has quantized_dimension 2, must be in \[0, 2\)"):
        Interpreter(model_content=b.build())
    b.main.tensors[x].quant["quantized_dimension"] = 0
    with pytest.raises(ModelError, match=r"tensor 0 \('x'\) has 3 scales: must be 1 \(per tensor\) or 2"):
        Interpreter(model_content=b.build())
