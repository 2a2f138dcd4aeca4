"""Native images (lite_numba/runtime/native/image.py, issue 33): a process allocates a model the normal way and saves
its compiled program; a later process restores it without importing Numba and gives the official runtime's outputs.
Every case runs in fresh processes sharing the test's image folder (the Numba cache is the suite's, so nothing
compiles twice); the suite itself runs with images off (conftest)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import model_path
from lite_numba.kernels import registry
from test_gather import gather_model

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.jit import native_loader
from lite_numba.testing import run_official

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    from lite_numba import Interpreter
    model, inputs, out, then = sys.argv[1], np.load(sys.argv[2]), sys.argv[3], sys.argv[4]
    it = Interpreter(model_path=model)
    it.allocate_tensors()
    kind = type(it.runtime.main).__name__
    for d, k in zip(it.get_input_details(), sorted(inputs.files)):
        it.set_tensor(d["index"], inputs[k])
    error = None
    try:
        it.invoke()
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    loaded = "numba" in sys.modules
    outs = [it.get_tensor(d["index"]) for d in it.get_output_details()] if error is None else []
    if then == "profile":  # anything beyond set / invoke / get: the normal path takes over, with the same values
        it.runtime.main.native_program()
        again = [it.get_tensor(d["index"]) for d in it.get_output_details()]
        assert all(np.array_equal(a, b) for a, b in zip(outs, again)), "materializing changed the outputs"
        it.invoke()
        outs = [it.get_tensor(d["index"]) for d in it.get_output_details()]
    np.savez(out, *outs)
    align = it.runtime.main.arena.ctypes.data % 64
    print(json.dumps({"kind": kind, "numba": loaded, "error": error, "after": "numba" in sys.modules,
                      "llvm": "llvmlite.binding" in sys.modules, "arena_align": align}))
""")


def _child(tmp_path, model, inputs, then="", **env_extra):
    np.savez(tmp_path / "inputs.npz", *inputs)
    env = {**os.environ, "LITE_NUMBA_IMAGE": "1", "LITE_NUMBA_IMAGE_DIR": str(tmp_path / "images"), **env_extra}
    r = subprocess.run([sys.executable, "-c", CHILD, str(model), str(tmp_path / "inputs.npz"),
                        str(tmp_path / "out.npz"), then], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    info = json.loads(r.stdout.strip().splitlines()[-1])
    with np.load(tmp_path / "out.npz") as f:
        return info, [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]


def _inputs(path, seed=0):
    it = Interpreter(model_path=str(path))
    rng = np.random.default_rng(seed)
    out = []
    for d in it.get_input_details():
        if np.issubdtype(d["dtype"], np.floating):
            out.append(rng.standard_normal(d["shape"]).astype(d["dtype"]))
        else:
            info = np.iinfo(d["dtype"])
            out.append(rng.integers(max(info.min, -128), min(info.max, 127) + 1, d["shape"]).astype(d["dtype"]))
    return out


def _images(tmp_path):
    return sorted((tmp_path / "images").glob("*.lni"))


@pytest.mark.parametrize("name", ["small_cnn_f32", "mobilenet_v2_035_96_int8"])
def test_restored_without_numba_gives_the_official_outputs(tmp_path, name, official):
    path = model_path(name) if name != "small_cnn_f32" else ROOT / "lite_numba" / "examples" / "small_cnn_f32.tflite"
    x = _inputs(path)
    first, ours_first = _child(tmp_path, path, x)
    assert first["kind"] == "GraphRuntime" and first["numba"] and len(_images(tmp_path)) == 1
    second, ours = _child(tmp_path, path, x)
    assert second["kind"] == "ImageGraphRuntime" and not second["numba"] and not second["after"], second
    # the arena on a cache line as at allocate (numpy's 16-byte alignment had made half the restored arenas ~10 %
    # slower: vector accesses straddling two lines)
    assert first["arena_align"] == second["arena_align"] == 0
    want = run_official(path.read_bytes(), x)
    for a, b, w in zip(ours, ours_first, want):
        assert np.array_equal(a, b)  # the image runs the very code the normal path ran
        if np.issubdtype(w.dtype, np.integer):
            np.testing.assert_array_equal(a, w)
        else:
            np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not native_loader.ElfLinker.usable(), reason="the ELF linker is for Linux x86-64")
def test_the_elf_linker_and_llvms_run_the_same_code(tmp_path):
    path = model_path("mobilenet_v2_035_96_int8")
    x = _inputs(path, seed=3)
    first, want = _child(tmp_path, path, x)
    own, ours = _child(tmp_path, path, x)
    llvm, theirs = _child(tmp_path, path, x, LITE_NUMBA_NATIVE_LOADER="llvm")
    assert own["kind"] == llvm["kind"] == "ImageGraphRuntime"
    assert not own["llvm"] and llvm["llvm"]  # (the ELF linker needs no LLVM in the process)
    assert np.array_equal(ours[0], want[0]) and np.array_equal(theirs[0], want[0])


def test_a_folded_constant_read_in_place(tmp_path, official):
    """A constant computed at allocate (DEQUANTIZE of float16, folded) and large enough to be read where it lies
    (GATHER's table, >= 64 KiB: codegen.IN_PLACE_CONST): the image holds the folded values and the restoring process
    points the runner at them (hand_landmark_lite's case: its image was refused before)."""
    rng = np.random.default_rng(5)
    b = ModelBuilder()
    idx = b.add_input("idx", np.int32, [6])
    t16 = b.add_const("t16", rng.standard_normal((512, 64)).astype(np.float16))
    t = b.add_tensor("t", np.float32, [512, 64])
    y = b.add_tensor("y", np.float32, [6, 64])
    b.add_op("DEQUANTIZE", [t16], [t])
    b.add_op("GATHER", [t, idx], [y], options={"axis": 0})
    b.mark_output(y)
    model = tmp_path / "folded_gather.tflite"
    model.write_bytes(b.build())
    x = [np.array([0, 511, 7, 7, 300, 1], np.int32)]
    first, _ = _child(tmp_path, model, x)
    second, ours = _child(tmp_path, model, x)
    assert first["kind"] == "GraphRuntime" and second["kind"] == "ImageGraphRuntime" and not second["numba"]
    np.testing.assert_array_equal(ours[0], run_official(model.read_bytes(), x)[0])


def test_anything_else_materializes_the_normal_path(tmp_path, official):
    path = ROOT / "lite_numba" / "examples" / "small_cnn_f32.tflite"
    x = _inputs(path, seed=1)
    _child(tmp_path, path, x)
    info, ours = _child(tmp_path, path, x, then="profile")
    assert info["kind"] == "ImageGraphRuntime" and not info["numba"] and info["after"]
    np.testing.assert_allclose(ours[0], run_official(path.read_bytes(), x)[0], rtol=1e-5, atol=1e-5)


def test_a_damaged_image_is_a_miss_and_is_written_again(tmp_path, official):
    path = ROOT / "lite_numba" / "examples" / "small_cnn_f32.tflite"
    x = _inputs(path, seed=2)
    _child(tmp_path, path, x)
    (image,) = _images(tmp_path)
    good = image.read_bytes()
    for damaged in (good[: len(good) // 2], good[:100] + bytes(64) + good[164:], b""):
        image.write_bytes(damaged)
        info, ours = _child(tmp_path, path, x)
        assert info["kind"] == "GraphRuntime" and info["numba"]  # the normal path ...
        np.testing.assert_allclose(ours[0], run_official(path.read_bytes(), x)[0], rtol=1e-5, atol=1e-5)
        assert image.read_bytes() == good or _child(tmp_path, path, x)[0]["kind"] == "ImageGraphRuntime"  # ... saves


def test_a_kernel_error_is_the_normal_paths(tmp_path):
    indices = np.array([0, 1], np.int32)
    model = tmp_path / "gather.tflite"
    model.write_bytes(gather_model(np.float32, [5, 4], indices, 0, runtime=True))
    x = np.arange(20, dtype=np.float32).reshape(5, 4)
    _child(tmp_path, model, [x, indices])
    info, ours = _child(tmp_path, model, [x, indices])
    assert info["kind"] == "ImageGraphRuntime" and info["error"] is None
    np.testing.assert_array_equal(ours[0], x[[0, 1]])  # (GATHER's definition)
    info, _ = _child(tmp_path, model, [x, np.array([0, 5], np.int32)])
    assert info["kind"] == "ImageGraphRuntime" and info["after"]  # re-run on the normal path, which raises
    assert "GATHER: index out of range" in info["error"]


def test_another_kernel_path_or_thread_count_has_no_image(tmp_path):
    path = ROOT / "lite_numba" / "examples" / "small_cnn_f32.tflite"
    x = _inputs(path)
    _child(tmp_path, path, x)
    info, _ = _child(tmp_path, path, x, LITE_NUMBA_ISA="portable")
    assert info["kind"] == "GraphRuntime"  # (another key: the level is part of it)
    assert len(_images(tmp_path)) == 2


def test_only_stablehlo_rows_name_other_subgraphs():
    """runtime/composites.subgraph_meta imports a registry row's kernel only for StableHLO ops (kernel modules import
    Numba, which a process restoring an image never loads): no other row's kernel may carry these options."""
    for name, _lo, _hi, k in registry.BUILTINS:
        meta = k.meta
        if meta.get("inline_subgraph") or meta.get("subgraph_ops"):
            assert name.startswith("STABLEHLO_"), name


EVERY_MODEL = textwrap.dedent("""
    import glob, hashlib, json, os, sys
    import numpy as np
    from lite_numba import Interpreter
    out = {}
    for path in sorted(p for d in sys.argv[1:] for p in glob.glob(os.path.join(d, "*.tflite"))):
        it = Interpreter(model_path=path)
        try:
            it.allocate_tensors()
            rng = np.random.default_rng(0)
            for d in it.get_input_details():
                dt = np.dtype(d["dtype"])
                x = rng.standard_normal(d["shape"]) if dt.kind == "f" else rng.integers(0, 3, d["shape"])
                it.set_tensor(d["index"], x.astype(dt))
            it.invoke()
            got = [hashlib.sha256(it.get_tensor(d["index"]).tobytes()).hexdigest() for d in it.get_output_details()]
        except Exception as e:
            got = f"{type(e).__name__}: {e}"
        out[os.path.basename(path)] = (type(it.runtime.main).__name__, got)
    print(json.dumps(out))
""")


def test_every_bundled_model_restores_to_the_same_bytes(tmp_path):
    """Every model of tests/data/models and tests/data/real, run by a process that saves images and again by one that
    restores them: the same outputs (or the same error) byte for byte, every static one-thread graph from its image.
    The normal path is held to the official runtime by the op and model tests; this holds the images to it."""
    env = {**os.environ, "LITE_NUMBA_IMAGE": "1", "LITE_NUMBA_IMAGE_DIR": str(tmp_path / "images")}
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", EVERY_MODEL, str(ROOT / "tests" / "data" / "models"),
                            str(ROOT / "tests" / "data" / "real")],
                           capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert first.keys() == second.keys() and len(first) > 100
    assert {k: v[1] for k, v in first.items()} == {k: v[1] for k, v in second.items()}
    restored = [k for k, v in second.items() if v[0] == "ImageGraphRuntime"]
    assert len(restored) >= 0.8 * len(second), sorted(k for k in second if k not in restored)


UNRESOLVED = textwrap.dedent("""
    import llvmlite.binding as ll
    from lite_numba.jit import native_loader
    ll.initialize_native_target()
    ll.initialize_native_asmprinter()
    mod = ll.parse_assembly('declare void @lite_numba_no_such_symbol()\\n'
                            'define void @f() {\\n  call void @lite_numba_no_such_symbol()\\n  ret void\\n}\\n')
    mod.triple = ll.get_process_triple()
    code = ll.Target.from_default_triple().create_target_machine(codemodel="large").emit_object(mod)
    try:
        native_loader.load([(code, "f")])
    except native_loader.UnresolvedSymbol as e:
        print("refused:", e)
""")


@pytest.mark.parametrize("loader", ["elf", "llvm"])
def test_an_unresolved_symbol_is_refused_not_fatal(loader):
    """An object naming a symbol nothing defines is refused by either linker before LLVM sees it (LLVM's linker
    reports it with a fatal error that ends the process); the image is then a miss."""
    env = {**os.environ, "LITE_NUMBA_NATIVE_LOADER": loader}
    r = subprocess.run([sys.executable, "-c", UNRESOLVED], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "refused: unresolved symbol lite_numba_no_such_symbol" in r.stdout


def test_constants_sit_on_cache_lines():
    """The runners' constant blocks (packed weights, tables) start on a cache line, their parts at multiples of 64
    from there (codegen.make_segment; an image restores them so, runtime/native/image.py): with numpy's 16-byte
    alignment a packed panel's vector loads straddled two lines."""
    it = Interpreter(model_path=str(ROOT / "lite_numba" / "examples" / "small_cnn_f32.tflite"))
    it.allocate_tensors()
    program = it.runtime.main.native_program()
    assert program and all(aux.ctypes.data % 64 == 0 for _, aux, *_ in program)
