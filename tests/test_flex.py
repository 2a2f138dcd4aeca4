"""Flex ops (SELECT_TF_OPS models) against TensorFlow's own outputs.

The oracle is TensorFlow itself: scripts/record_flex_oracle.py converted small TF functions and recorded inputs and
TensorFlow's (eager) outputs into tests/data/flex/ (TF 2.21's tf.lite.Interpreter and ai-edge-litert cannot run Flex
ops). Each `<case>.npz` holds `in:<arg>` and `out:<key>`; the keys name the op under test. No TensorFlow here.
"""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
from flatbuffers import flexbuffers
from hypothesis import given, settings
from hypothesis import strategies as st
from lite_numba.plugins import flex
from lite_numba.plugins.flex import (
    builtin_map,
    complex_ops,
    linalg,
    math_ops,
    supported_flex_ops,
    tensor_list,
    text_ops,
)
from lite_numba.plugins.flex.nodedef import FlexDecodeError, decode_flex_options, decode_node_def

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import assert_close

# imported under the name the hypothesis tests' bodies use: a derandomized test's examples are seeded by its
# source
from lite_numba.testing import run_ours as _run_model
from lite_numba.tools.inspect_model import format_inspection, inspect_model

DATA = os.path.join(os.path.dirname(__file__), "data", "flex")
CASES = sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(DATA, "*.npz")))
OP_CASES = [c for c in CASES if not c.startswith("model_")]


def _load(case: str):
    rec = np.load(os.path.join(DATA, case + ".npz"))
    ins = {k[3:]: rec[k] for k in rec.files if k.startswith("in:")}
    outs = {k[4:]: rec[k] for k in rec.files if k.startswith("out:")}
    return ins, outs


def _run_signature(case: str) -> tuple[dict, dict]:
    ins, ref = _load(case)
    it = Interpreter(model_path=os.path.join(DATA, case + ".tflite"))
    ours = it.get_signature_runner()(**ins)
    return ours, ref


def test_recordings_are_present_and_small():
    assert len(OP_CASES) >= 30 and any(c.startswith("model_") for c in CASES)
    total = sum(os.path.getsize(p) for p in glob.glob(os.path.join(DATA, "*")))
    assert total < 2_000_000


@pytest.mark.parametrize("case", OP_CASES)
def test_flex_op_matches_tensorflow(case):
    ours, ref = _run_signature(case)
    assert set(ours) == set(ref)
    for key in sorted(ref):
        try:
            assert_close(ours[key], ref[key], tol=1e-5)
        except AssertionError as e:
            raise AssertionError(f"{case}: output {key}: {e}") from None


@pytest.mark.parametrize("case", [c for c in CASES if c.startswith("model_")])
def test_whole_model_matches_tensorflow(case):
    ins, ref = _load(case)
    it = Interpreter(model_path=os.path.join(DATA, case + ".tflite"))
    ours = it.get_signature_runner()(**ins)
    for key, value in ref.items():
        assert_close(ours[key], value, tol=1e-4)
    rt = it.runtime.main
    flex = [n.index for n in rt.plan.nodes if n.op_name.startswith("Flex") and "TensorList" not in n.op_name]
    assert not (set(flex) & rt.dynamic_nodes)  # Flex kernels run inside the compiled segments (TensorLists: host)


def _flex_options(tf_op: str, node_def: bytes) -> bytes:
    b = flexbuffers.Builder()
    with b.Vector():
        b.String(tf_op)
        b.Blob(node_def)
    return bytes(b.Finish())


def _field(num: int, wire: int, payload: bytes | int) -> bytes:
    def varint(v: int) -> bytes:
        v &= (1 << 64) - 1
        out = bytearray()
        while True:
            out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
            v >>= 7
            if not v:
                return bytes(out)

    if wire == 0:
        return varint(num << 3) + varint(payload)
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def _attr(key: str, value: bytes) -> bytes:
    return _field(5, 2, _field(1, 2, key.encode()) + _field(2, 2, value))


def test_node_def_decoder_reads_every_attribute_kind():
    shape = _field(2, 2, _field(1, 0, 3)) + _field(2, 2, _field(1, 0, -1))
    packed_ints = _field(3, 2, b"\x01\x7f")  # [1, 127]
    floats = _field(4, 2, np.array([0.5, -2.0], "<f4").tobytes())
    msg = (_field(1, 2, b"my/node") + _field(2, 2, b"Foo") + _field(3, 2, b"x:0") +
           _attr("T", _field(6, 0, 8)) + _attr("n", _field(3, 0, -5)) + _attr("alpha", b"\x25" + np.float32(
               0.25).tobytes()) + _attr("flag", _field(5, 0, 1)) + _attr("eq", _field(2, 2, b"ij->ji")) +
           _attr("shape", _field(7, 2, shape)) + _attr("ints", _field(1, 2, packed_ints)) +
           _attr("fl", _field(1, 2, floats)) + _attr("odd", _field(6, 0, 21)))
    node = decode_node_def(msg)
    assert (node.name, node.op, node.inputs) == ("my/node", "Foo", ("x:0",))
    a = node.attrs
    assert a["T"] == np.complex64 and a["n"] == -5 and a["alpha"] == 0.25 and a["flag"] is True
    assert a["eq"] == b"ij->ji" and a["shape"] == (3, -1) and a["ints"] == [1, 127] and a["fl"] == [0.5, -2.0]
    assert repr(a["odd"]) == "DT_VARIANT"
    with pytest.raises(FlexDecodeError, match="runs past"):
        decode_node_def(_field(1, 2, b"abc")[:-1])


def test_node_def_decoder_on_a_converted_model():
    from lite_numba.format.model import load_model

    with open(os.path.join(DATA, "einsum_attn.tflite"), "rb") as f:
        plan = load_model(f.read())
    (node,) = [n for n in plan.subgraphs[0].nodes if n.op_name == "FlexEinsum"]
    flex = decode_flex_options(node.custom_options)
    assert flex.op == "Einsum" and flex.attrs["equation"] == b"bqhd,bkhd->bhqk" and flex.attrs["N"] == 2


def _unknown_flex_model(options: bytes) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 3])
    y = b.add_tensor("y", np.float32, [2, 3])
    b.add_custom_op("FlexFooBar", [x], [y], options=options)
    b.mark_output(y)
    return b.build()


def test_unknown_flex_op_fails_at_allocate_naming_op_attributes_node_and_the_supported_ops():
    node_def = _field(1, 2, b"model/foo") + _field(2, 2, b"FooBar") + _attr("T", _field(6, 0, 1)) + _attr(
        "mode", _field(2, 2, b"fast"))
    it = Interpreter(model_content=_unknown_flex_model(_flex_options("FooBar", node_def)))
    with pytest.raises(RuntimeError) as e:
        it.allocate_tensors()
    msg = str(e.value)
    assert "TensorFlow op 'FooBar'" in msg and "model/foo" in msg and "mode=b'fast'" in msg
    assert "T=dtype('float32')" in msg and "Node number 0 (FlexFooBar) failed to prepare" in msg
    assert "Supported Flex ops: " in msg and "Erf" in msg and "Einsum" in msg
    info = inspect_model(_unknown_flex_model(_flex_options("FooBar", node_def)), allocate=False)
    (op,) = info["ops"]
    assert not op["can_run"] and "TensorFlow op FooBar" in op["status"]


def test_malformed_flex_options_are_a_clear_error():
    it = Interpreter(model_content=_unknown_flex_model(b"\x00\x01garbage"))
    with pytest.raises(RuntimeError, match="FlexFooBar"):
        it.allocate_tensors()


def test_inspect_names_flex_ops_by_tf_name_and_says_they_run():
    info = inspect_model(os.path.join(DATA, "model_speech_enhancement.tflite"), allocate=False)
    flex = {e["op"]: e for e in info["ops"] if e["op"].startswith("Flex")}
    assert set(flex) == {"FlexAngle", "FlexComplex", "FlexExp", "FlexIRFFT"}
    assert all(e["can_run"] and f"TensorFlow op {name[4:]}," in e["status"] for name, e in flex.items())
    assert "TensorFlow op IRFFT" in format_inspection(info)


def test_supported_list_covers_the_issue_minimum():
    ops = supported_flex_ops()
    assert len(ops) >= 40
    for name in ("Erf", "Cumprod", "BroadcastTo", "Roll", "Einsum", "MatrixInverse", "MatrixDeterminant",
                 "DenseBincount", "RFFT", "IRFFT", "ComplexAbs", "Angle", "Real", "Imag", "Complex", "Conj"):
        assert name in ops


def test_each_family_owns_one_table_and_the_kernel_finds_ops_through_them():
    """One table per family (OPS), no merged copy: a TF op is in one family, except the complex forms of builtin_map's
    AddV2, Exp, ..., which complex_ops serves when an input is complex."""
    families = (*flex.families(), tensor_list, text_ops)  # (the last two: host families with kernels of their own)
    assert set(families) == {builtin_map, math_ops, linalg, complex_ops, tensor_list, text_ops}
    complex_forms = {"AddV2", "Add", "Sub", "Mul", "RealDiv", "Exp", "Neg"}
    for i, a in enumerate(families):
        for b in families[i + 1:]:
            shared = set(a.OPS) & set(b.OPS)
            assert shared <= complex_forms and (not shared or {a, b} == {builtin_map, complex_ops}), (a, b, shared)
    assert supported_flex_ops() == sorted(set().union(*(f.OPS for f in families)))
    for op in complex_forms:
        assert flex.find_op(op) is builtin_map.OPS[op]
        assert flex.find_op(op, complex_input=True) is complex_ops.OPS[op]
    assert flex.find_op("RFFT") is flex.find_op("RFFT", complex_input=True) is complex_ops.OPS["RFFT"]
    assert flex.find_op("Einsum", complex_input=True) is linalg.OPS["Einsum"]
    assert flex.find_op("FooBar") is None
    # the unary maths table is written once: TF op name -> scalar function
    assert set(math_ops.UNARY) <= set(math_ops.OPS)
    assert math_ops.UNARY["Inv"] is math_ops.UNARY["Reciprocal"]


def test_dense_bincount_refuses_negative_values_like_tensorflow():
    ins, _ = _load("bincount_5_1")
    it = Interpreter(model_path=os.path.join(DATA, "bincount_5_1.tflite"))
    bad = dict(ins)
    bad["arr"] = ins["arr"].copy()
    bad["arr"][0] = -1
    with pytest.raises(Exception, match="non-negative"):
        it.get_signature_runner()(**bad)


# --- property tests over hypothesis-generated shapes and attributes ------------------------------------------------
# The recordings above pin TensorFlow's semantics on a few shapes per op. Here the same kernels run on one-op Flex
# models built in code (NodeDefs encoded by hand) over generated shapes and attributes, against numpy's definition
# of the same maths (np.einsum, np.fft, np.roll, np.cumprod, np.linalg): the shapes and attribute combinations the
# recordings do not cover.

_DT = {np.dtype(np.float32): 1, np.dtype(np.int32): 3, np.dtype(np.complex64): 8}


def _flex_model(tf_op: str, attrs: dict, inputs: list, out_shapes: list, out_dtypes: list) -> bytes:
    """A one-op Flex model: inputs are ("name", array, is_const); attrs map to encoded AttrValues."""
    node_def = _field(2, 2, tf_op.encode())
    for k, v in attrs.items():
        if isinstance(v, np.dtype):
            enc = _field(6, 0, _DT[v])
        elif isinstance(v, bool):
            enc = _field(5, 0, int(v))
        elif isinstance(v, int):
            enc = _field(3, 0, v)
        else:
            enc = _field(2, 2, v)
        node_def += _attr(k, enc)
    b = ModelBuilder()
    ids = [b.add_const(n, a) if const else b.add_input(n, a.dtype, a.shape) for n, a, const in inputs]
    outs = [b.add_tensor(f"out{i}", dt, s) for i, (s, dt) in enumerate(zip(out_shapes, out_dtypes))]
    b.add_custom_op("Flex" + tf_op, ids, outs, options=_flex_options(tf_op, node_def))
    for o in outs:
        b.mark_output(o)
    return b.build()


@st.composite
def _einsum_case(draw):
    letters = "abcdef"
    n_ops = draw(st.integers(1, 2))
    terms = [draw(st.lists(st.sampled_from(letters), min_size=0, max_size=4)) for _ in range(n_ops)]
    used = sorted(set("".join("".join(t) for t in terms)))
    out = draw(st.permutations(used).map(lambda p: p[: draw(st.integers(0, len(p)))])) if used else []
    sizes = {lab: draw(st.integers(1, 4)) for lab in used}
    return ",".join("".join(t) for t in terms) + "->" + "".join(out), terms, sizes


@settings(max_examples=25, deadline=None, derandomize=True)
@given(_einsum_case(), st.integers(0, 2**31 - 1))
def test_einsum_any_equation_matches_numpy(case, seed):
    eq, terms, sizes = case
    rng = np.random.default_rng(seed)
    ops = [rng.uniform(-1, 1, [sizes[c] for c in t]).astype(np.float32) for t in terms]
    ref = np.einsum(eq, *[o.astype(np.float64) for o in ops]).astype(np.float32)
    model = _flex_model("Einsum", {"equation": eq.encode(), "N": len(ops), "T": np.dtype(np.float32)},
                        [(f"x{i}", o, False) for i, o in enumerate(ops)], [ref.shape], [np.float32])
    (ours,) = _run_model(model, ops)
    assert_close(ours, ref, tol=1e-5)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.integers(1, 3), st.integers(1, 20), st.integers(1, 24), st.sampled_from(["RFFT", "IRFFT", "FFT", "IFFT"]),
       st.integers(0, 2**31 - 1))
def test_fft_family_any_length_matches_numpy(rows, length, n, op, seed):
    rng = np.random.default_rng(seed)
    if op == "RFFT":
        x = rng.uniform(-1, 1, (rows, length)).astype(np.float32)
        ref = np.fft.rfft(x.astype(np.float64), n).astype(np.complex64)
    elif op == "IRFFT":
        x = (rng.uniform(-1, 1, (rows, length)) + 1j * rng.uniform(-1, 1, (rows, length))).astype(np.complex64)
        # numpy's c2r transform also ignores the DC (and even-length Nyquist) imaginary parts
        ref = np.fft.irfft(x.astype(np.complex128), n).astype(np.float32)
    else:
        x = (rng.uniform(-1, 1, (rows, length)) + 1j * rng.uniform(-1, 1, (rows, length))).astype(np.complex64)
        ref = (np.fft.fft if op == "FFT" else np.fft.ifft)(x.astype(np.complex128)).astype(np.complex64)
    inputs = [("x", x, False)]
    if op in ("RFFT", "IRFFT"):
        inputs.append(("fft_length", np.array([n], np.int32), True))
    model = _flex_model(op, {"Tcomplex": np.dtype(np.complex64)}, inputs, [ref.shape], [ref.dtype])
    (ours,) = _run_model(model, [x])
    assert_close(ours, ref, tol=1e-5)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=4), st.data())
def test_roll_and_cumprod_any_axis_match_numpy(shape, data):
    x = np.random.default_rng(len(shape)).uniform(0.5, 1.5, shape).astype(np.float32)
    axes = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1, max_size=3))
    shifts = data.draw(st.lists(st.integers(-7, 7), min_size=len(axes), max_size=len(axes)))
    consts = [("shift", np.array(shifts, np.int32), True), ("axis", np.array(axes, np.int32), True)]
    model = _flex_model("Roll", {"T": np.dtype(np.float32)}, [("x", x, False)] + consts, [x.shape], [np.float32])
    (ours,) = _run_model(model, [x])
    np.testing.assert_array_equal(ours, np.roll(x, shifts, axes))
    axis, exclusive, reverse = data.draw(st.integers(0, len(shape) - 1)), data.draw(st.booleans()), data.draw(
        st.booleans())
    y = np.flip(x, axis) if reverse else x
    ref = np.cumprod(y.astype(np.float64), axis=axis)
    if exclusive:
        ref = np.concatenate([np.ones_like(np.take(ref, [0], axis)), np.delete(ref, -1, axis)], axis)
    ref = (np.flip(ref, axis) if reverse else ref).astype(np.float32)
    model = _flex_model("Cumprod", {"exclusive": exclusive, "reverse": reverse, "T": np.dtype(np.float32)},
                        [("x", x, False), ("axis", np.array(axis, np.int32), True)], [x.shape], [np.float32])
    (ours,) = _run_model(model, [x])
    assert_close(ours, ref, tol=1e-5)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(st.integers(1, 7), st.lists(st.integers(1, 3), max_size=2), st.booleans(), st.integers(0, 2**31 - 1))
def test_matrix_inverse_and_determinant_match_numpy(n, batch, adjoint, seed):
    rng = np.random.default_rng(seed)
    a = (rng.uniform(-1, 1, tuple(batch) + (n, n)) + 2 * np.eye(n)).astype(np.float32)
    a64 = a.astype(np.float64)
    inv = np.linalg.inv(np.swapaxes(a64, -1, -2) if adjoint else a64).astype(np.float32)
    (ours,) = _run_model(_flex_model("MatrixInverse", {"adjoint": adjoint, "T": np.dtype(np.float32)},
                                     [("a", a, False)], [a.shape], [np.float32]), [a])
    assert_close(ours, inv, tol=1e-5)
    det = np.linalg.det(a64).astype(np.float32)
    (ours,) = _run_model(_flex_model("MatrixDeterminant", {"T": np.dtype(np.float32)}, [("a", a, False)],
                                     [det.shape], [np.float32]), [a])
    assert_close(ours, det, tol=1e-5)


def test_matrix_inverse_of_a_singular_matrix_is_an_error():
    a = np.ones((3, 3), np.float32)
    model = _flex_model("MatrixInverse", {"T": np.dtype(np.float32)}, [("a", a, False)], [a.shape], [np.float32])
    with pytest.raises(Exception, match="not invertible"):
        _run_model(model, [a])


@pytest.mark.parametrize("tf_op, attrs, what", [
    ("Einsum", {"equation": 7, "N": 1, "T": np.dtype(np.float32)}, "attribute 'equation' is int 7, expected a string"),
    ("Cumprod", {"exclusive": 3, "T": np.dtype(np.float32)}, "attribute 'exclusive' is int 3, expected a bool"),
])
def test_flex_attribute_of_the_wrong_kind_is_refused_naming_it(tf_op, attrs, what):
    """Campaign seed 502 case 1898: a byte flip turned Einsum's equation into an int; prepare failed with a bare
    "'int' object has no attribute 'decode'". TensorFlow refuses a NodeDef whose attribute has the wrong type."""
    x = np.ones((2, 3), np.float32)
    inputs = [("x", x, False)] + ([("axis", np.array(1, np.int32), True)] if tf_op == "Cumprod" else [])
    model = _flex_model(tf_op, attrs, inputs, [x.shape], [np.float32])
    with pytest.raises(RuntimeError, match=rf"Flex op {tf_op} \(node ''\): {what}"):
        _run_model(model, [x])
