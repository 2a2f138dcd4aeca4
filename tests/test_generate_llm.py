"""KV-cache generation (issues 29 and 39, docs/design/llm.md): outputs living in their operand's storage (the memory
plan's aliases), signature calls reading and writing the caller's arrays, caches bound by name, lite_numba.llm's
generate() and `lite-numba benchmark` on a KV-cache model.

The oracle is the official runtime's signature runners driven as a Python user drives them (each step's output
caches passed back as the next step's inputs): builder-made decoders (tests/kv_models.py, both litert-torch forms)
compared step by step, and the recorded litert-torch models' 32 greedy tokens (tests/data/litert_torch).
"""

from __future__ import annotations

import io
import json
import pathlib
import threading

import numpy as np
import pytest
from kv_models import causal_mask, kv_model, official_tokens

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.llm import KVCache, KVSession, generate, sample_next
from lite_numba.llm.session import chunk_plan, step_inputs
from lite_numba.testing import official_interpreter, require_official

require_official()

DATA = pathlib.Path(__file__).parent / "data" / "litert_torch"
PROMPT = [5, 17, 2, 33, 9, 41, 12, 7, 30]  # 8 prefilled + the first decode input
STEPS = 32


@pytest.fixture(scope="module")
def models() -> dict[str, bytes]:
    return {form: kv_model(form) for form in ("generative", "hf")}


# --- the memory plan: an output in its operand's storage ------------------------------------------------------------
def _dus_graph(later_read: bool = False, operand_is_output: bool = False) -> bytes:
    """t = x + 1; y = DYNAMIC_UPDATE_SLICE(t, u, start) [; z = t + y]: y may live in t's storage unless t is read
    after the update or is a graph output."""
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [6, 4])
    u = b.add_input("u", np.float32, [2, 4])
    s = b.add_input("start", np.int32, [2])
    t = b.add_tensor("t", np.float32, [6, 4])
    b.add_op("ADD", [x, b.add_const("one", np.ones((6, 4), np.float32))], [t])
    y = b.add_tensor("y", np.float32, [6, 4])
    b.add_op("DYNAMIC_UPDATE_SLICE", [t, u, s], [y])
    b.mark_output(y)
    if later_read:
        z = b.add_tensor("z", np.float32, [6, 4])
        b.add_op("ADD", [t, y], [z])
        b.mark_output(z)
    if operand_is_output:
        b.mark_output(t)
    return b.build()


@pytest.mark.parametrize("later_read,operand_is_output,aliased", [(False, False, True), (True, False, False),
                                                                   (False, True, False)])
def test_update_lives_in_its_operand_when_nothing_reads_it_later(later_read, operand_is_output, aliased):
    model = _dus_graph(later_read, operand_is_output)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((6, 4)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32),
              np.array([3, 0], np.int32)]
    ours, ref = Interpreter(model_content=model), official_interpreter(model)
    ours.allocate_tensors()
    for it in (ours, ref):
        for d, v in zip(it.get_input_details(), inputs):
            it.set_tensor(d["index"], v)
        it.invoke()
    for d, r in zip(ours.get_output_details(), ref.get_output_details()):
        np.testing.assert_array_equal(ours.get_tensor(d["index"]), ref.get_tensor(r["index"]))
    assert bool(ours.runtime.main.aliases) == aliased
    x_in = ours.get_input_details()[0]["index"]
    assert not ours.runtime.shares_storage(x_in, ours.get_output_details()[0]["index"])  # graph inputs: never


# --- signature calls: the official convention, bound buffers, what each copies ---------------------------------------
def _official_convention(model: bytes, form: str, in_place_bytes: int | None) -> tuple[list, list, Interpreter]:
    """Our runners driven as the official ones are: (logits per step, caches per step, the interpreter)."""
    it = Interpreter(model_content=model)
    pre, dec = it.get_signature_runner("prefill_8"), it.get_signature_runner("decode")
    if in_place_bytes is not None:
        pre.IN_PLACE_BYTES = dec.IN_PLACE_BYTES = in_place_bytes
    ins = {n: np.zeros(d["shape"], d["dtype"]) for n, d in pre.get_input_details().items()}
    ins.update(step_inputs(KVSession(it).spec, PROMPT[:-1], 8, 0))
    caches = {k: v for k, v in pre(**ins).items() if k.startswith("kv_cache")}
    token, logits, states = PROMPT[-1], [], []
    for p in range(8, 8 + STEPS):
        step = dict(caches, tokens=np.array([[token]], np.int32), input_pos=np.array([p], np.int32))
        if form == "hf":
            step["mask"] = causal_mask([p], 48)
        out = dec(**step)
        logits.append(out["logits"].copy())
        caches = {k: v for k, v in out.items() if k.startswith("kv_cache")}
        states.append({k: v.copy() for k, v in caches.items()})
        token = int(np.argmax(out["logits"]))
    return logits, states, it


@pytest.mark.parametrize("form", ["generative", "hf"])
def test_bound_caches_give_the_official_convention_outputs_and_copy_nothing(models, form):
    model = models[form]
    ref_tokens = official_tokens(model, PROMPT, STEPS, 8)
    copied_logits, copied_states, _ = _official_convention(model, form, None)  # small tensors: copied
    inplace_logits, inplace_states, it = _official_convention(model, form, 0)  # every tensor in the caller's arrays
    session = KVSession(model)
    session.feed(PROMPT[:-1])
    token, cache_bytes = PROMPT[-1], 0
    dec = session.runners["decode"]
    for k in range(STEPS):
        logits = session.step(token)
        np.testing.assert_array_equal(logits, copied_logits[k].reshape(-1))
        np.testing.assert_array_equal(logits, inplace_logits[k].reshape(-1))
        for name, buf in session.buffers.items():
            np.testing.assert_array_equal(buf, copied_states[k][name])
            np.testing.assert_array_equal(buf, inplace_states[k][name])
        cache_bytes += session.copies()["cache"]
        token = int(np.argmax(logits))
        assert token == ref_tokens[k]
    assert cache_bytes == 0  # not one byte of cache copied in 32 steps
    rt, sig = session.interpreter.runtime, session.interpreter.model.signatures[1]
    assert all(rt.shares_storage(sig.inputs[n], sig.outputs[n], sig.subgraph_index) for n in session.spec.caches)
    assert dec.last_copies["graph"] == 0
    # the official convention with every tensor in the caller's arrays: one copy of each cache, in the graph
    runner = it.get_signature_runner("decode")
    runner.IN_PLACE_BYTES = 0
    ins = {n: np.zeros(d["shape"], d["dtype"]) for n, d in runner.get_input_details().items()}
    runner(**ins)
    per_cache = 48 * 16 * 4
    assert {n: runner.last_copies_by_name[n] for n in session.spec.caches} == dict.fromkeys(session.spec.caches,
                                                                                           per_cache)
    runner.IN_PLACE_BYTES = 1 << 40  # everything copied: in, through the graph, out (what the official runtime does)
    runner(**ins)
    assert runner.last_copies_by_name["kv_cache_k_0"] == 3 * per_cache


def test_bound_buffer_is_the_output_and_other_arrays_are_copied_in(models):
    it = Interpreter(model_content=models["generative"])
    dec = it.get_signature_runner("decode")
    bufs = {n: dec.bind(n) for n in dec.get_input_details() if n.startswith("kv_cache")}
    out = dec(tokens=np.array([[3]], np.int32), input_pos=np.array([4], np.int32))
    assert all(out[n] is b for n, b in bufs.items())
    assert np.any(bufs["kv_cache_k_0"][0, 4]) and not np.any(bufs["kv_cache_k_0"][0, 5:])
    other = np.ones_like(bufs["kv_cache_v_1"])
    dec(tokens=np.array([[3]], np.int32), input_pos=np.array([5], np.int32), kv_cache_v_1=other)
    assert dec.last_copies_by_name["kv_cache_v_1"] == other.nbytes and other[0, 0, 0] == 1
    assert np.all(bufs["kv_cache_v_1"][0, 6:] == 1)  # copied into the bound buffer, then updated there
    with pytest.raises(ValueError, match="expected 2 vs provided 1"):
        dec(tokens=np.array([[3]], np.int32))
    dec.unbind()
    with pytest.raises(ValueError, match="Invalid number of inputs"):
        dec(tokens=np.array([[3]], np.int32), input_pos=np.array([5], np.int32))


def test_tensors_left_in_the_callers_arrays_are_not_read_stale(models):
    it = Interpreter(model_content=models["generative"])
    pre = it.get_signature_runner("prefill_8")
    pre.IN_PLACE_BYTES = 0
    ins = {n: np.zeros(d["shape"], d["dtype"]) for n, d in pre.get_input_details().items()}
    out = pre(**ins)
    sig = it.model.signatures[0]
    with pytest.raises(RuntimeError, match="caller's array"):
        it.get_tensor(sig.outputs["logits"])
    with pytest.raises(RuntimeError, match="set them again before invoke"):
        it.invoke()
    for name, i in sig.inputs.items():
        it.set_tensor(i, ins[name])
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(sig.outputs["logits"]), out["logits"])


def test_without_compiled_binding_the_same_tokens_are_copied(models, monkeypatch):
    monkeypatch.setenv("LITE_NUMBA_EXECUTOR", "python")  # no compiled runner to point elsewhere: copies
    model = models["generative"]
    session = KVSession(model)
    result = generate(session, PROMPT, 6)
    assert result.tokens == official_tokens(model, PROMPT, 6, 8)
    assert session.copies()["graph"] == 0  # the plan still updates the cache in place in the arena
    assert session.copies()["cache"] == 2 * sum(b.nbytes for b in session.buffers.values())  # in and back out


# --- generate() -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["generative", "hf", "hf_bool"])
def test_generate_matches_the_official_signature_runners(models, form):
    model = models[form] if form in models else kv_model(form)
    result = generate(model, PROMPT, STEPS)
    assert result.tokens == official_tokens(model, PROMPT, STEPS, 8)
    assert result.stop_reason == "max_new_tokens" and result.decode_steps == STEPS
    assert result.cache.position == len(PROMPT) + STEPS - 1 and result.pending_token == result.tokens[-1]


def _official_chunked(model: bytes, prompt: list[int], steps: int) -> list[int]:
    """The official runners driven with the chunks generate() uses (prefill_8, prefill_4, padded, decode)."""
    it = official_interpreter(model)
    spec = KVSession(model).spec
    runners = {key: it.get_signature_runner(key) for key in [*spec.prefill.values(), "decode"]}
    caches, pos, done = {n: np.zeros(s, dt) for n, (dt, s) in spec.caches.items()}, 0, 0
    for length, count in chunk_plan(spec, len(prompt) - 1, 0):
        key = spec.prefill[length] if length > 1 else "decode"
        out = runners[key](**caches, **step_inputs(spec, prompt[done:done + count], length, pos))
        caches = {n: out[n] for n in spec.caches}
        pos, done = pos + count, done + count
    token, tokens = prompt[-1], []
    for _ in range(steps):
        out = runners["decode"](**caches, **step_inputs(spec, [token], 1, pos))
        caches, pos = {n: out[n] for n in spec.caches}, pos + 1
        token = int(np.argmax(out["logits"]))
        tokens.append(token)
    return tokens


def test_long_prompts_are_prefilled_in_chunks():
    model = kv_model("hf", extra_prefill=(4,))
    spec = KVSession(model).spec
    assert chunk_plan(spec, 21, 0) == [(8, 8), (8, 8), (4, 4), (1, 1)]
    assert chunk_plan(spec, 3, 0) == [(4, 3)]  # padded: positions 3 lie past the prompt
    assert chunk_plan(spec, 3, 45) == [(1, 1)] * 3  # no room for the padding at the end of the cache
    prompt = [int(t) for t in np.random.default_rng(3).integers(0, 48, 23)]
    assert generate(model, prompt, 8).tokens == _official_chunked(model, prompt, 8)


def test_stop_ids_budget_callback_and_continuation(models):
    model = models["generative"]
    full = generate(model, PROMPT, 10).tokens
    seen = []
    r = generate(model, PROMPT, 10, stop_ids=[full[3]], on_token=seen.append)
    assert r.tokens == full[:3] == seen and r.stop_reason == "stop_id" and r.stop_id == full[3]
    first = generate(model, PROMPT, 4)
    more = generate(model, [first.pending_token], 6, cache=first.cache)
    assert first.tokens + more.tokens == full
    room = generate(model, PROMPT, 100)
    assert room.stop_reason == "cache_full" and len(room.tokens) == 48 - len(PROMPT) + 1


def test_generation_can_be_cancelled_between_tokens(models):
    stop = threading.Event()
    seen = []

    def on_token(t):
        seen.append(t)
        if len(seen) == 3:
            stop.set()

    r = generate(models["hf"], PROMPT, 20, on_token=on_token, cancel=stop)
    assert r.stop_reason == "cancelled" and r.tokens == seen and len(seen) == 3
    r = generate(models["hf"], PROMPT, 20, cancel=lambda: True)
    assert r.stop_reason == "cancelled" and r.tokens == []


def test_sampling_is_reproducible_and_top_k_1_is_greedy(models):
    model = models["generative"]
    greedy = generate(model, PROMPT, 8).tokens
    assert generate(model, PROMPT, 8, top_k=1, seed=4).tokens == greedy
    a = generate(model, PROMPT, 8, top_k=10, top_p=0.9, temperature=1.5, seed=7).tokens
    assert a == generate(model, PROMPT, 8, top_k=10, top_p=0.9, temperature=1.5, seed=7).tokens
    logits = np.array([0.0, 5.0, 4.9, -3.0])
    rng = np.random.default_rng(0)
    assert {sample_next(logits, rng, top_p=0.5) for _ in range(50)} == {1}
    assert {sample_next(logits, rng, top_k=2) for _ in range(200)} == {1, 2}


# --- bad input ------------------------------------------------------------------------------------------------------
def test_bad_positions_and_caches_get_clear_errors(models):
    session = KVSession(models["generative"])
    with pytest.raises(ValueError, match="the prompt has 50 tokens; the cache holds 48 positions"):
        generate(session, list(range(50)), 4)
    session.feed(list(range(46)))
    session.step(1)
    session.step(1)
    with pytest.raises(ValueError, match="past the cache: it holds 48 positions and 48 are used"):
        session.step(1)
    runner = Interpreter(model_content=models["generative"]).get_signature_runner("decode")
    with pytest.raises(ValueError, match=r"buffer is float32\[1, 48, 15\]; input 'kv_cache_k_0' of signature "
                                         r"'decode' is float32\[1, 48, 16\]"):
        runner.bind("kv_cache_k_0", np.zeros((1, 48, 15), np.float32))
    with pytest.raises(ValueError, match="not an input of signature 'decode'"):
        runner.bind("kv_cache_q_0")
    with pytest.raises(ValueError, match="another model"):
        KVSession(models["hf"], cache=session.cache)
    wrong = session.cache.copy()
    wrong.buffers["kv_cache_v_1"] = np.zeros((1, 48, 8), np.float32)
    with pytest.raises(ValueError, match=r"cache 'kv_cache_v_1' is float32\[1, 48, 8\]; the model's is "
                                         r"float32\[1, 48, 16\]"):
        KVSession(models["generative"], cache=wrong)
    assert isinstance(session.cache, KVCache) and session.cache.position == 48


# --- the recorded litert-torch models -------------------------------------------------------------------------------
GENERATION = sorted(n for n, m in json.loads((DATA / "manifest.json").read_text())["models"].items()
                    if m["meta"].get("kind") == "generation")


@pytest.mark.parametrize("name", GENERATION)
def test_recorded_litert_torch_models_generate_the_recorded_tokens(name):
    with np.load(DATA / f"{name}.npz") as npz:
        prompt, tokens = [int(t) for t in npz["prompt"]], [int(t) for t in npz["tokens"]]
    session = KVSession(str(DATA / f"{name}.tflite"))
    result = generate(session, prompt, len(tokens))
    assert result.tokens == tokens
    assert session.copies()["cache"] == 0


# --- lite-numba benchmark ---------------------------------------------------------------------------------------------
def test_benchmark_reports_prefill_and_decode_speed(models, tmp_path):
    from lite_numba.tools.llm_benchmark import build_parser, is_llm_command_line, run_llm_benchmark

    path = tmp_path / "kv.tflite"
    path.write_bytes(models["hf"])
    assert is_llm_command_line(["--graph", str(path)])
    assert not is_llm_command_line(["--graph", str(path), "--signature_to_run_for", "decode"])
    out = io.StringIO()
    args = build_parser().parse_args(["--graph", str(path), "--decode_tokens", "6", "--num_runs", "1"])
    assert run_llm_benchmark(args, out) == 0
    text = out.getvalue()
    for line in ("Prefill Turn 1: Processed 8 tokens", "Decode Turn 1: Processed 6 tokens", "Time to first token",
                 "Peak RSS", "KV cache copied per decode step: 0 B with the bound buffers"):
        assert line in text, text
