"""STRING models made by TensorFlow's converter against TensorFlow's own (eager) outputs, and the builtin-only ones
against the official runtime too.

scripts/record_string_oracle.py converted the cases with TF 2.21 and recorded inputs and TF's outputs into
tests/data/strings/ (string arrays in TFLite's packed layout, every byte kept): string GATHER (1-D, 0-d, of an
input), GATHER_ND, EQUAL / NOT_EQUAL, the shape ops (RESHAPE, EXPAND_DIMS, SQUEEZE, SLICE, STRIDED_SLICE, TILE,
FILL), vocabulary lookups through the hash-table builtins (string -> int64 with a default, int64 -> string behind
an ARG_MAX), the Flex text ops as a user's conversion holds them (`mixed_*`), the ops the converter does not emit but
a model may hold (`raw_*`: one-op Flex models made from TensorFlow's own NodeDef) and a Keras TextVectorization +
embedding classifier (`model_textvec`). Strings byte-equal, integers exact, floats within 1e-5 relative.
"""

from __future__ import annotations

import glob
import os
import sys

import numpy as np
import pytest
from flatbuffers import flexbuffers

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.format import strings
from lite_numba.testing import assert_close

DATA = os.path.join(os.path.dirname(__file__), "data", "strings")
MODELS = sorted(os.path.basename(p)[:-7] for p in glob.glob(os.path.join(DATA, "*.tflite")))
BUILTIN = [c for c in MODELS if not c.startswith(("mixed_", "model_"))]
RAW = sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(DATA, "raw_*.npz")))


def load(case: str) -> tuple[dict, dict, np.lib.npyio.NpzFile]:
    rec = np.load(os.path.join(DATA, case + ".npz"))

    def value(key):
        if f"shape:{key}" in rec.files:
            return strings.to_array(rec[key], tuple(rec[f"shape:{key}"]))
        return rec[key]

    ins = {k[3:]: value(k) for k in rec.files if k.startswith("in:")}
    outs = {k[4:]: value(k) for k in rec.files if k.startswith("out:")}
    return ins, outs, rec


# outputs of HASHTABLE_SIZE: the official kernel gives the count as a [1] tensor where TensorFlow gives a scalar
SIZE_OUTPUTS = {("vocab_lookup", "size")}


def check(ours: dict, ref: dict, case: str) -> None:
    assert set(ours) == set(ref), case
    for key, want in ref.items():
        got = ours[key]
        if (case, key) in SIZE_OUTPUTS and want.shape == () and got.shape == (1,):
            got = got.reshape(())
        if want.dtype == object:
            assert got.dtype == object and got.shape == want.shape, f"{case}/{key}: {got!r} vs {want!r}"
            assert all(type(v) is bytes for v in got.reshape(-1)), f"{case}/{key}: not bytes"
            assert got.tolist() == want.tolist(), f"{case}/{key}: {got!r} vs {want!r}"
        elif want.dtype.kind == "f":
            assert_close(got, want, tol=1e-5)
        else:
            assert got.dtype == want.dtype and got.shape == want.shape, f"{case}/{key}: {got!r} vs {want!r}"
            np.testing.assert_array_equal(got, want, err_msg=f"{case}/{key}")


def test_recordings_are_present_and_small():
    assert len(BUILTIN) >= 9 and len([c for c in MODELS if c.startswith("mixed_")]) >= 6 and "model_textvec" in MODELS
    assert len(RAW) >= 4
    assert sum(os.path.getsize(p) for p in glob.glob(os.path.join(DATA, "*"))) < 400_000


@pytest.mark.parametrize("case", MODELS)
def test_matches_tensorflow(case):
    ins, ref, _ = load(case)
    it = Interpreter(model_path=os.path.join(DATA, case + ".tflite"))
    runner = it.get_signature_runner()
    ours = runner(**ins)
    check(ours, ref, case)
    details = {**runner.get_input_details(), **runner.get_output_details()}
    for name, d in details.items():
        want = ref.get(name, ins.get(name))
        assert d["dtype"] is (np.bytes_ if want.dtype == object else want.dtype.type), (case, name)
    check(runner(**ins), ref, case)  # a second call: the tables and string storage are reused


def _official_feed(v: np.ndarray) -> np.ndarray:
    # the official set_tensor turns a 0-d object array into garbage (its wrapper reads the object pointer): give it
    # bytes ("S"), which it packs right (no trailing NULs in these inputs)
    return v.astype(bytes) if v.dtype == object and v.ndim == 0 else v


@pytest.mark.parametrize("case", BUILTIN)
def test_builtin_models_match_the_official_runtime(case):
    from ai_edge_litert.interpreter import Interpreter as Official

    ins, ref, _ = load(case)
    path = os.path.join(DATA, case + ".tflite")
    official = Official(model_path=path).get_signature_runner()(**{k: _official_feed(v) for k, v in ins.items()})
    check(Interpreter(model_path=path).get_signature_runner()(**ins), official, case)


def _flex_model(op: str, node_def: bytes, ins: dict, outs: dict) -> bytes:
    fb = flexbuffers.Builder()
    with fb.Vector():
        fb.String(op)
        fb.Blob(node_def)
    b = ModelBuilder()
    tin = [b.add_input(k, v.dtype, list(v.shape)) for k, v in ins.items()]
    tout = [b.add_tensor(f"out{k}", v.dtype, [0] * v.ndim) for k, v in outs.items()]
    b.add_custom_op("Flex" + op, tin, tout, options=bytes(fb.Finish()))
    for t in tout:
        b.mark_output(t)
    return b.build()


@pytest.mark.parametrize("case", RAW)
def test_raw_flex_ops_match_tensorflow(case):
    ins, ref, rec = load(case)
    model = _flex_model(str(rec["op"]), rec["nodedef"].tobytes(), ins, ref)
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    for d, v in zip(it.get_input_details(), ins.values()):
        it.set_tensor(d["index"], v)
    it.invoke()
    ours = {str(k): it.get_tensor(d["index"]) for k, d in enumerate(it.get_output_details())}
    check(ours, ref, case)


STRING_HOST = {"CALL_ONCE", "HASHTABLE", "HASHTABLE_FIND", "RESHAPE", "EQUAL",
               "FlexStringLower", "FlexStaticRegexReplace", "FlexStringSplitV2", "FlexRaggedTensorToTensor"}


def test_textvec_model_runs_only_its_text_ops_on_the_host():
    """The TextVectorization classifier: its string and Flex text nodes run host kernels (Python / numpy); every
    numeric node runs its compiled kernel — after the split they are prepared at run time (how many tokens is data),
    as the official runtime's dynamic tensors are; its hash table lives across invokes and batch sizes."""
    ins, ref, _ = load("model_textvec")
    it = Interpreter(model_path=os.path.join(DATA, "model_textvec.tflite"))
    runner = it.get_signature_runner()
    check(runner(**ins), ref, "model_textvec")
    rt = it.runtime.main
    hosted = {rt.plan.nodes[n].op_name for n in range(len(rt.plan.nodes)) if rt.kernels[n].host is not None}
    assert hosted == STRING_HOST
    one = {"text": ins["text"][2:3]}
    check(runner(**one), {"output_0": ref["output_0"][2:3]}, "model_textvec[2]")
    check(runner(**ins), ref, "model_textvec again")


def test_numeric_nodes_around_string_nodes_stay_compiled():
    """id_to_label: ARG_MAX (and the logits' maths) in a compiled segment, the int64 -> string lookup after it on
    the host."""
    ins, ref, _ = load("id_to_label")
    it = Interpreter(model_path=os.path.join(DATA, "id_to_label.tflite"))
    check(it.get_signature_runner()(**ins), ref, "id_to_label")
    rt = it.runtime.main
    compiled = [n for kind, step in rt.steps if kind == "segment" and step.run is not None for n in step.nodes]
    assert "ARG_MAX" in {rt.plan.nodes[n].op_name for n in compiled}


def test_missing_text_extra_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "re2", None)
    it = Interpreter(model_path=os.path.join(DATA, "mixed_flex_regex.tflite"))
    with pytest.raises(ValueError, match=r"needs the google-re2 package.*lite-numba\[text\]"):
        it.allocate_tensors()
    monkeypatch.setitem(sys.modules, "farmhash", None)
    it = Interpreter(model_path=os.path.join(DATA, "mixed_flex_hash.tflite"))
    with pytest.raises(ValueError, match=r"needs the pyfarmhash package.*lite-numba\[text\]"):
        it.allocate_tensors()


def test_inspect_says_which_nodes_run_on_the_host():
    from lite_numba.tools.inspect_model import format_inspection, inspect_model

    text = format_inspection(inspect_model(os.path.join(DATA, "model_textvec.tflite")))
    assert "RESHAPE (STRING)" in text and "STRING operands: host kernel (Python / numpy" in text
    assert "HASHTABLE_FIND            builtin        1      1  yes  builtin (we have 1); host kernel" in text
    assert "FlexStringSplitV2" in text and "(host: Python / numpy, not compiled)" in text
    assert "FULLY_CONNECTED           builtin        1      2  yes  builtin (we have 1, 3-13)\n" in text
