"""ai-edge-quantizer's LiteRT-LM recipes (issue 39) on small Gemma-3-like decoders, against the official runtime's
recorded outputs (tests/data/llm_quant/README.md: how they were made, what each oracle is), and the custom op
`aeq.hadamard_rotation` (kernels/signal/hadamard.py) one op at a time against the official runtime.

Each model runs the recorded protocol through our SignatureRunner, as scripts/make_llm_models.py ran the official
ones: `prefill_16` on the prompt (positions 0..15, zero caches, the recorded mask), then 32 decode steps feeding
fed_tokens[i] at position 16 + i with the caches the previous call returned. Compared with the oracle `meta.expected`
names, over the decode logits, the caches after prefill and the caches after the last step:

- `builtin` (the optimized builtin kernels): bit-exact;
- `ref` (the reference kernels, where they and the optimized ones disagree on the INT4 value -8, which we read as
  the reference does: two's complement): max |a - b| / max |b| <= 2e-2 (issue 39's bound; the README's own
  figures for two dynamic-range implementations of the same model, XNNPACK vs the reference, are 0.004-0.008);
- `dequant` (INT2 blockwise, where the official kernels output zeros: the float model with the dequantized
  weights, weight-only arithmetic): the same 2e-2. A dynamic-range kernel quantizes each activation row to int8
  (a rounding of up to max|row| / 254 per value) where the dequant model keeps floats; the README puts the
  difference at "about the int8 rounding", the size of the XNNPACK-vs-reference spread above, so the bound the
  ref models get applies.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import require_official, run_official, run_ours

DATA = Path(__file__).parent / "data" / "llm_quant"
MANIFEST = json.loads((DATA / "manifest.json").read_text())["models"]
REL = 2e-2

# Where we knowingly differ from the named oracle (see docs/design/llm.md, "Quantized LiteRT-LM recipes"): the test
# still asserts the figure we do reach, and the strict xfail of the oracle comparison fails once the gap is closed.
KNOWN_GAPS = {
    # INT2 blockwise: we answer what the official kernels answer (zeros, kernels/linear/fc_blockwise.py), not the
    # dequantized model the README names as oracle.
    "gemma3s_dynamic_wi2b64_afp32": ("builtin", 0.0),
}


def rel(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| / max |b| (the README's figure)."""
    return float(np.max(np.abs(a.astype(np.float64) - b)) / max(float(np.max(np.abs(b))), 1e-30))


def mask_row(position: int, length: int) -> np.ndarray:
    """export_hf's float mask for one query: 0 where key position <= query position, -inf elsewhere."""
    return np.where(np.arange(length) <= position, 0.0, -np.inf).astype(np.float32)[None, None, None]


def run_recorded(stem: str, data) -> dict:
    """The recorded teacher-forced protocol through our SignatureRunner: decode logits [32, vocab] and the caches
    after prefill and after the last step."""
    meta = json.loads(str(data["meta"]))
    it = Interpreter(model_path=str(DATA / f"{stem}.tflite"), num_threads=1)
    pre = it.get_signature_runner(meta["prefill_signature"])
    dec = it.get_signature_runner(meta["decode_signature"])
    ins = {name: np.zeros(d["shape"], d["dtype"]) for name, d in pre.get_input_details().items()}
    for name in ("tokens", "input_pos", "mask"):
        ins[name] = data[f"prefill_in_{name}"]
    out = pre(**ins)
    prefill = {k: v.copy() for k, v in out.items() if k.startswith("kv_cache")}
    caches = dict(prefill)
    length = ins["mask"].shape[-1]
    logits = []
    for step, token in enumerate(data["fed_tokens"]):
        pos = meta["prefill_len"] + step
        out = dec(**caches, tokens=np.array([[token]], np.int32), input_pos=np.array([pos], np.int32),
                  mask=mask_row(pos, length))
        logits.append(out["logits"].reshape(-1).copy())
        caches = {k: v.copy() for k, v in out.items() if k.startswith("kv_cache")}
    return {"logits": np.stack(logits), "prefill": prefill, "final": caches, "meta": meta}


def check_against(got: dict, data, oracle: str, tol: float) -> None:
    pairs = [("decode logits", got["logits"], data[f"{oracle}_decode_logits"])]
    pairs += [(f"prefill {k}", v, data[f"{oracle}_prefill_out_{k}"]) for k, v in got["prefill"].items()]
    pairs += [(f"final {k}", v, data[f"{oracle}_final_{k}"]) for k, v in got["final"].items()]
    for what, ours, ref in pairs:
        assert ours.shape == ref.shape, f"{what}: shape {ours.shape} vs {oracle} {ref.shape}"
        if tol == 0.0:
            assert np.array_equal(ours, ref), f"{what}: not bit-exact with {oracle} (rel {rel(ours, ref):.3g})"
        else:
            assert rel(ours, ref) <= tol, f"{what}: rel {rel(ours, ref):.3g} from {oracle} > {tol}"


_RUNS: dict = {}


def recorded(stem: str):
    if stem not in _RUNS:
        data = np.load(DATA / f"{stem}.npz")
        _RUNS[stem] = (run_recorded(stem, data), data)
    return _RUNS[stem]


def test_manifest_names_every_model():
    assert len(MANIFEST) == 7
    for stem, entry in MANIFEST.items():
        assert (DATA / f"{stem}.tflite").is_file() and (DATA / f"{stem}.npz").is_file(), stem
        assert entry["meta"]["expected"] in ("builtin", "ref", "dequant"), stem


@pytest.mark.parametrize("stem", sorted(MANIFEST))
def test_recipe_model_matches_its_oracle(stem):
    got, data = recorded(stem)
    oracle = got["meta"]["expected"]
    assert oracle == MANIFEST[stem]["meta"]["expected"]
    if stem in KNOWN_GAPS:
        other, tol = KNOWN_GAPS[stem]
        check_against(got, data, other, tol)  # what we do reach (module doc)
        pytest.xfail(f"{stem}: known gap from the {oracle} oracle (KNOWN_GAPS)")
    check_against(got, data, oracle, 0.0 if oracle == "builtin" else REL)


@pytest.mark.parametrize("stem", sorted(KNOWN_GAPS))
@pytest.mark.xfail(strict=True, reason="known gap (KNOWN_GAPS): fails here until closed, then XPASS fails")
def test_known_gap_still_open(stem):
    got, data = recorded(stem)
    oracle = got["meta"]["expected"]
    check_against(got, data, oracle, 0.0 if oracle == "builtin" else REL)


def test_rotation_custom_op_equals_its_decomposed_twin():
    """The same quantized weights with the rotation as one custom op or as builtin ops: the same figures against
    the reference. The rotations agree to float rounding, not bit for bit (the decomposition is a matrix product),
    and a rounding that moves an activation across an int8 step of the next dynamic-range layer shows at the logits:
    3.2e-3 relative measured, bound 1e-2, the same greedy tokens."""
    a, _ = recorded("gemma3s_mixed48_hr")
    b, _ = recorded("gemma3s_mixed48_hr_custom")
    assert rel(b["logits"], a["logits"]) <= 1e-2
    assert np.array_equal(a["logits"].argmax(1), b["logits"].argmax(1))


# --- aeq.hadamard_rotation, one op ------------------------------------------------------------------------------


def _rotation_model(shape, size, options=None, dtype=np.float32) -> bytes:
    b = ModelBuilder()
    x = b.add_input("x", dtype, list(shape))
    y = b.add_tensor("y", dtype, list(shape))
    opts = {"hadamard_size": size, "random_binary_vector": [1, 0] * max(size // 2, 1)} if options is None else options
    b.add_custom_op("aeq.hadamard_rotation", [x], [y], options=opts)
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("shape,size", [
    ((3, 1), 1), ((2, 2), 2), ((5, 8), 8), ((1, 128), 128), ((4, 64), 16), ((2, 3, 256), 128), ((1, 16, 32), 32),
    ((3, 512), 512), ((2, 0), 4),
])
def test_hadamard_rotation_one_op(shape, size):
    require_official()
    rng = np.random.default_rng(size + len(shape))
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    model = _rotation_model(shape, size)
    ours, ref = run_ours(model, [x])[0], run_official(model, [x])[0]
    assert ours.shape == ref.shape
    assert np.array_equal(ours, ref)


@pytest.mark.parametrize("shape,options,match", [
    ((2, 12), {"hadamard_size": 12}, "hadamard_size must be a power of two, got 12"),
    ((2, 8), {"hadamard_size": 0}, "hadamard_size must be a power of two, got 0"),
    ((2, 24), {"hadamard_size": 16}, r"last dimension \(24\) is not a multiple of hadamard_size \(16\)"),
    ((8,), {"hadamard_size": 8}, r"rank 2 \[features, size\] or 3 .*got shape \[8\]"),
    ((1, 1, 2, 8), {"hadamard_size": 8}, "rank 2"),
    ((2, 8), {"random_binary_vector": [1] * 8}, "lack hadamard_size"),
    ((2, 8), {"hadamard_size": 2.5}, "hadamard_size must be an integer"),
])
def test_hadamard_rotation_bad_input(shape, options, match):
    it = Interpreter(model_content=_rotation_model(shape, 0, options))
    with pytest.raises(ValueError, match=f"aeq.hadamard_rotation.*{match}"):
        it.allocate_tensors()


def test_hadamard_rotation_refuses_int32():
    it = Interpreter(model_content=_rotation_model((2, 8), 8, dtype=np.int32))
    with pytest.raises(ValueError, match="aeq.hadamard_rotation.*int32"):
        it.allocate_tensors()


# --- FULLY_CONNECTED with INT4 per-channel weights (the official optimized 4-bit path), one op --------------------


def _int4_fc_model(m, k, n, bias, low, seed) -> bytes:
    rng = np.random.default_rng(seed)
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [m, k])
    w = b.add_packed_const("w", rng.integers(low, 8, (n, k)), "INT4",
                           quant={"scales": list(rng.uniform(0.01, 0.1, n)), "zero_points": [0] * n})
    ins = [x, w] + ([b.add_const("b", rng.standard_normal(n).astype(np.float32))] if bias else [])
    y = b.add_tensor("y", np.float32, [m, n])
    b.add_op("FULLY_CONNECTED", ins, [y], {}, version=5)
    b.mark_output(y)
    return b.build()


@pytest.mark.parametrize("m,k,n,bias", [(1, 128, 32, False), (16, 128, 512, True), (3, 64, 4, True),
                                        (1, 256, 130, False), (5, 34, 7, True), (1, 32, 3, False)])
def test_int4_channelwise_fc(m, k, n, bias):
    """Without the value -8: bit-exact with the builtin kernels (the 4-bit path, or EvalHybrid below 4 units). With
    -8: near the reference kernels, which read it as -8 (the builtin 4-bit path's packing garbles it)."""
    tfl = require_official()
    x = np.random.default_rng(m * k).standard_normal((m, k)).astype(np.float32)
    model = _int4_fc_model(m, k, n, bias, -7, k + n)
    assert np.array_equal(run_ours(model, [x])[0], run_official(model, [x])[0])
    model = _int4_fc_model(m, k, n, bias, -8, k + n)
    it = tfl.Interpreter(model_content=model, num_threads=1,
                         experimental_op_resolver_type=tfl.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    ref = it.get_tensor(it.get_output_details()[0]["index"])
    assert rel(run_ours(model, [x])[0], ref) <= 1e-5
