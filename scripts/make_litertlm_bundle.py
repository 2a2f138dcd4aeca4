"""Makes tests/data/litertlm/: a small `.litertlm` bundle (the file Google's LiteRT-LM engine runs) and the greedy
tokens and text of the official runtime on it, for tests/test_litertlm.py. Never run by CI.

The bundle is built with Google's own `litert-lm-builder` (LitertLmFileBuilder) from:

- the model: tests/data/litert_torch/qwen3_dynamic_wi8_afp32.tflite (litert-torch export_hf, signatures prefill_16
  and decode, a float mask input, cache 64 positions, vocab 384, dynamic-range int8 weights; 371 KB), as its
  `tf_lite_prefill_decode` section;
- a word-level Hugging Face tokenizer.json of exactly 384 ids made here with the `tokenizers` library: the
  special tokens <pad> 0, <bos> 1, <eos> 2, <unk> 3, <start_of_turn> 4, <end_of_turn> 5, "user" 6, "model" 7, then
  376 two-syllable words drawn from a seeded permutation; whitespace pre-tokenizer, no decoder (tokens joined by
  spaces);
- an LlmMetadata proto (the builder's llm_metadata_pb2): start_token "<bos>" (as token_str, the form export_hf
  writes for a string BOS), stop_tokens: ids [2], "<end_of_turn>" and one word (STOP_AT below: the word the official
  runtime's greedy tokens for prompt "a" produce at that step, so that the metadata's stop ids end a generation
  mid-way), max_num_tokens 64, user / model prompt affixes and a jinja chat template.

The oracle: ai_edge_litert's signature runners on the same .tflite bytes with the builtin kernels
(OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES; XNNPACK's tokens are recorded too, for information: on
dynamic-range int8 models XNNPACK's arithmetic differs from the builtin kernels'), driven as LiteRT-LM drives a
prefill / decode model: the prompt ids are the start token then the tokenizer's ids of the text (no special tokens
added); all but the last prompt id are written by prefill_16 (padded with id 0 when shorter; mask 0 where a key
position <= the query's, -inf elsewhere), then greedy decode steps (numpy argmax) from the last prompt id, each
step's output caches fed to the next. The text is `tokenizers`' decode of the ids (skip_special_tokens=True).
The chat prompt is the jinja template rendered with jinja2 (the HF convention: trim_blocks, lstrip_blocks,
messages, add_generation_prompt, bos_token) and tokenized.

    /work/venv-torch/bin/python scripts/make_litertlm_bundle.py [--out tests/data/litertlm]

Also sp_tokenizer.litertlm (make_sp_bundle): a SentencePiece tokenizer and metadata without a model section.

Outputs: tiny.litertlm, sp_tokenizer.litertlm, tokenizer.json (the same one as in tiny.litertlm, for the
.tflite-with-tokenizer path), expected.json.
A rebuild differs only in the uuid and creation_timestamp litert-lm-builder writes.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "data" / "litert_torch" / "qwen3_dynamic_wi8_afp32.tflite"
VOCAB = 384
SPECIAL = ["<pad>", "<bos>", "<eos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
PREFILL, CACHE, STEPS = 16, 64, 32
STOP_AT = 9  # the metadata's word stop token: prompt "a"'s greedy token at this step (first occurrence used)
CHAT_TEMPLATE = ("{{ bos_token }}{% for message in messages %}<start_of_turn> {{ message['role'] }} "
                 "{{ message['content'] }} <end_of_turn> {% endfor %}"
                 "{% if add_generation_prompt %}<start_of_turn> model {% endif %}")


def words() -> list[str]:
    cons, vows = "bdfgklmnprstvz", "aeiou"
    syl = [c + v for c in cons for v in vows]
    allw = [a + b for a in syl for b in syl]
    order = np.random.default_rng(39).permutation(len(allw))
    return ["user", "model"] + [allw[i] for i in order[:VOCAB - len(SPECIAL) - 2]]  # the chat roles are words


def make_tokenizer(path: Path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {t: i for i, t in enumerate(SPECIAL + words())}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens(SPECIAL)
    tok.save(str(path))
    return Tokenizer.from_file(str(path))


def official_greedy(model: bytes, prompt: list[int], builtin: bool) -> list[int]:
    from ai_edge_litert import interpreter as lit

    kw = {"experimental_op_resolver_type": lit.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES} if builtin else {}
    it = lit.Interpreter(model_content=model, num_threads=1, **kw)
    pre, dec = it.get_signature_runner(f"prefill_{PREFILL}"), it.get_signature_runner("decode")
    det = pre.get_input_details()
    caches = {n: np.zeros(d["shape"], d["dtype"]) for n, d in det.items() if n.startswith("kv_cache")}

    def mask(pos):
        seen = np.arange(CACHE)[None, :] <= np.asarray(pos)[:, None]
        return np.where(seen, 0.0, -np.inf).astype(np.float32).reshape(1, 1, len(pos), CACHE)

    head = prompt[:-1]
    assert 0 < len(head) <= PREFILL
    ids = np.zeros((1, PREFILL), np.int32)
    ids[0, :len(head)] = head
    pos = np.arange(PREFILL, dtype=np.int32)
    out = pre(tokens=ids, input_pos=pos, mask=mask(pos), **caches)
    caches = {n: out[n] for n in caches}
    token, tokens = prompt[-1], []
    for k in range(STEPS):
        p = np.array([len(head) + k], np.int32)
        out = dec(tokens=np.array([[token]], np.int32), input_pos=p, mask=mask(p), **caches)
        caches = {n: out[n] for n in caches}
        token = int(np.argmax(out["logits"].reshape(-1)))
        tokens.append(token)
    return tokens


SP_TEXTS = ["tina vave lupa viku", "<start_of_turn> user gola zuni <end_of_turn>", "héllo wörld ✓"]


def make_sp_bundle(out: Path, lb, llm_metadata_pb2) -> dict:
    """sp_tokenizer.litertlm: a SentencePiece tokenizer (trained here on sentences of the word list: unigram,
    vocab 320, byte fallback, <pad> 0 <eos> 1 <bos> 2 <unk> 3 as Gemma numbers them, the turn markers as user
    symbols, no normalization: a small model) and an LlmMetadata, and no model section (a bundle LiteRT-LM would
    refuse to run: the reader must say so). The encodings and decodings of SP_TEXTS by the sentencepiece library
    are recorded."""
    import io

    import sentencepiece as spm

    rng = np.random.default_rng(7)
    w = words()
    corpus = [" ".join(w[i] for i in rng.integers(0, len(w), 12)) for _ in range(400)]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus), model_writer=model, vocab_size=320,
                                   model_type="unigram", byte_fallback=True, num_threads=1, pad_id=0, eos_id=1,
                                   bos_id=2, unk_id=3, user_defined_symbols=["<start_of_turn>", "<end_of_turn>"],
                                   normalization_rule_name="identity", minloglevel=2)
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    meta = llm_metadata_pb2.LlmMetadata()
    meta.start_token.token_ids.ids.append(2)
    meta.stop_tokens.add().token_str = "<end_of_turn>"
    meta.stop_tokens.add().token_ids.ids.append(1)
    meta.max_num_tokens = 32
    with tempfile.TemporaryDirectory() as tmp:
        sp_path, mp = os.path.join(tmp, "tokenizer.model"), os.path.join(tmp, "llm_metadata.pb")
        Path(sp_path).write_bytes(model.getvalue())
        Path(mp).write_bytes(meta.SerializeToString())
        b = lb.LitertLmFileBuilder()
        b.add_sentencepiece_tokenizer(sp_path)
        b.add_llm_metadata(mp)
        with open(out / "sp_tokenizer.litertlm", "wb") as f:
            b.build(f)
    return {"bundle": "sp_tokenizer.litertlm", "sp_model_bytes": len(model.getvalue()),
            "end_of_turn_id": sp.PieceToId("<end_of_turn>"),
            "texts": {t: {"ids": sp.EncodeAsIds(t), "decoded": sp.DecodeIds(sp.EncodeAsIds(t))} for t in SP_TEXTS}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "tests" / "data" / "litertlm"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import jinja2
    from litert_lm_builder import litertlm_builder as lb
    from litert_lm_builder.runtime.proto import llm_metadata_pb2

    tok = make_tokenizer(out / "tokenizer.json")
    model = MODEL.read_bytes()
    w = words()
    texts = {"a": " ".join(w[i] for i in (3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26, 43, 38, 32, 79)),
             "b": " ".join(w[i] for i in (2, 71, 82, 81, 8))}
    bos = SPECIAL.index("<bos>")
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    chat_text = env.from_string(CHAT_TEMPLATE).render(messages=[{"role": "user", "content": texts["b"]}],
                                                      add_generation_prompt=True, bos_token="<bos>")
    cases = {}
    for name, text in [*texts.items(), ("b_chat", chat_text)]:
        ids = tok.encode(text, add_special_tokens=False).ids
        prompt = ids if name == "b_chat" else [bos, *ids]  # the rendered template starts with <bos> itself
        builtin = official_greedy(model, prompt, True)
        xnn = official_greedy(model, prompt, False)
        cases[name] = {"text": texts.get(name, texts["b"]), "chat": name == "b_chat", "rendered": chat_text
                       if name == "b_chat" else None, "prompt_ids": prompt, "tokens": builtin,
                       "text_out": tok.decode(builtin, skip_special_tokens=True), "xnnpack_tokens": xnn}
    a = cases["a"]["tokens"]
    stop_word_id = a[STOP_AT]
    stop_word = w[stop_word_id - len(SPECIAL)]
    stops = {2, 5, stop_word_id}
    for c in cases.values():
        cut = next((k for k, t in enumerate(c["tokens"]) if t in stops), None)
        c["stopped_tokens"] = c["tokens"] if cut is None else c["tokens"][:cut]
        c["stopped_id"] = None if cut is None else c["tokens"][cut]
        c["stopped_text"] = tok.decode(c["stopped_tokens"], skip_special_tokens=True)

    meta = llm_metadata_pb2.LlmMetadata()
    meta.start_token.token_str = "<bos>"
    meta.stop_tokens.add().token_ids.ids.append(2)
    meta.stop_tokens.add().token_str = "<end_of_turn>"
    meta.stop_tokens.add().token_str = stop_word
    meta.max_num_tokens = CACHE
    meta.prompt_templates.user.prefix = "<start_of_turn> user "
    meta.prompt_templates.user.suffix = " <end_of_turn> "
    meta.prompt_templates.model.prefix = "<start_of_turn> model "
    meta.prompt_templates.model.suffix = " <end_of_turn> "
    meta.jinja_prompt_template = CHAT_TEMPLATE
    meta.sampler_params.type = meta.sampler_params.GREEDY
    meta.llm_model_type.qwen3.SetInParent()
    with tempfile.TemporaryDirectory() as tmp:
        mp = os.path.join(tmp, "llm_metadata.pb")
        Path(mp).write_bytes(meta.SerializeToString())
        b = lb.LitertLmFileBuilder()
        b.add_system_metadata(lb.Metadata(key="Authors", value="lite-numba tests", dtype=lb.DType.STRING))
        b.add_tflite_model(str(MODEL), lb.TfLiteModelType.PREFILL_DECODE)
        b.add_hf_tokenizer(str(out / "tokenizer.json"))
        b.add_llm_metadata(mp)
        with open(out / "tiny.litertlm", "wb") as f:
            b.build(f)
    from importlib.metadata import version

    import tokenizers

    rec = {"model": MODEL.name, "bundle": "tiny.litertlm", "bundle_bytes": (out / "tiny.litertlm").stat().st_size,
           "oracle": "ai_edge_litert signature runners, BUILTIN_WITHOUT_DEFAULT_DELEGATES, 1 thread, greedy",
           "versions": {"ai-edge-litert": version("ai-edge-litert"), "litert-lm-builder": version("litert-lm-builder"),
                        "tokenizers": tokenizers.__version__, "jinja2": jinja2.__version__},
           "metadata": {"start_token": "<bos>", "start_id": bos, "stop_ids": sorted(stops), "stop_word": stop_word,
                        "max_num_tokens": CACHE, "chat_template": CHAT_TEMPLATE, "model_type": "qwen3",
                        "sampler": "GREEDY"},
           "steps": STEPS, "cases": cases, "sentencepiece": make_sp_bundle(out, lb, llm_metadata_pb2)}
    rec["versions"]["sentencepiece"] = version("sentencepiece")
    (out / "expected.json").write_text(json.dumps(rec, indent=1) + "\n")
    print(json.dumps({k: (v["tokens"][:12], v["stopped_id"]) for k, v in cases.items()}), rec["bundle_bytes"])


if __name__ == "__main__":
    main()
