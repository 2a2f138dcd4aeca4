""".litertlm bundles (issue 39, docs/design/llm.md): lite_numba.llm's reader, generation from text and
`lite-numba benchmark` on a bundle.

The oracle is recorded: tests/data/litertlm/ (scripts/make_litertlm_bundle.py) holds a bundle Google's
litert-lm-builder made from tests/data/litert_torch/qwen3_dynamic_wi8_afp32.tflite with a word-level tokenizer.json
and an LlmMetadata, and the greedy tokens of the official runtime's signature runners (builtin kernels) for three
prompts, with their text as the `tokenizers` library decodes them. What the reader returns is checked against the
files the bundle was built from. Bad bundles (truncated, corrupted, an unknown section type or version, no model
section) are written here with the flatbuffers package in the layout the builder writes.
"""

from __future__ import annotations

import io
import json
import mmap
import pathlib
import re
import struct
import sys
import threading
import zlib

import flatbuffers
import numpy as np
import pytest
from conftest import require_module

from lite_numba.llm import (
    KVSession,
    LitertlmError,
    LitertlmFile,
    LlmMetadata,
    TextGenerator,
    TokenSpec,
    generate,
    generate_text,
)

DATA = pathlib.Path(__file__).parent / "data" / "litertlm"
BUNDLE = DATA / "tiny.litertlm"
TFLITE = pathlib.Path(__file__).parent / "data" / "litert_torch" / "qwen3_dynamic_wi8_afp32.tflite"
EXPECTED = json.loads((DATA / "expected.json").read_text())
CASES = EXPECTED["cases"]


def require_tokenizers():
    """The `tokenizers` library (the test extra has it), or skip — fail under CI, where the oracle is recorded."""
    return require_module("tokenizers", "llm")


@pytest.fixture(scope="module")
def bundle() -> LitertlmFile:
    return LitertlmFile(BUNDLE)


@pytest.fixture(scope="module")
def generator(bundle) -> TextGenerator:
    require_tokenizers()
    return TextGenerator(bundle)


# --- the reader -------------------------------------------------------------------------------------------------------
def test_reader_finds_the_sections_the_builder_wrote(bundle):
    assert bundle.version[0] == 1
    assert bundle.system_metadata["Authors"] == "lite-numba tests"
    assert {"uuid", "creation_timestamp"} <= set(bundle.system_metadata)
    assert [s.type_name for s in bundle.sections] == ["TFLiteModel", "HF_Tokenizer_Zlib", "LlmMetadataProto"]
    assert bundle.model_types == ["prefill_decode"]
    assert all(s.begin % 16384 == 0 for s in bundle.sections)
    model = bundle.model_content()
    assert isinstance(model, memoryview) and bytes(model) == TFLITE.read_bytes()
    assert model.obj is bundle.model_content().obj  # a view of the one mapping: no copy of the section
    section = bundle.model_map()  # a mapping of exactly the section (what interpreter() hands to the Interpreter)
    assert isinstance(section, mmap.mmap) and section[:] == TFLITE.read_bytes()
    assert bundle.tokenizer_json() == (DATA / "tokenizer.json").read_bytes()
    assert bundle.sentencepiece_model() is None


def test_a_bundle_closes_once_its_views_are_gone():
    with LitertlmFile(BUNDLE) as f:
        assert f.llm_metadata.max_num_tokens == 64
    view = LitertlmFile(BUNDLE)
    model = view.model_content()
    with pytest.raises(BufferError):
        view.close()
    model.release()


def test_reader_decodes_the_llm_metadata(bundle):
    meta, want = bundle.llm_metadata, EXPECTED["metadata"]
    assert meta.start_token == TokenSpec((), want["start_token"])
    assert meta.stop_tokens == [TokenSpec((2,), None), TokenSpec((), "<end_of_turn>"), TokenSpec((), want["stop_word"])]
    assert meta.max_num_tokens == want["max_num_tokens"]
    assert meta.jinja_prompt_template == want["chat_template"]
    assert meta.model_type == want["model_type"] and meta.sampler == {"type": want["sampler"]}
    assert meta.prompt_templates["user"] == ("<start_of_turn> user ", " <end_of_turn> ")
    assert meta.prompt_templates["model"][0] == "<start_of_turn> model "


# --- generation -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", sorted(CASES))
def test_bundle_generates_the_official_tokens_from_ids(bundle, case):
    c = CASES[case]
    session = KVSession(bundle.interpreter())
    assert generate(session, c["prompt_ids"], EXPECTED["steps"]).tokens == c["tokens"]
    assert session.copies()["cache"] == 0


@pytest.mark.parametrize("case", sorted(CASES))
def test_text_generation_matches_the_official_runtime_and_tokenizer(generator, case):
    c = CASES[case]
    pieces: list[str] = []
    r = generator(c["text"], EXPECTED["steps"], chat=c["chat"], stop_ids=(), on_text=pieces.append)
    assert r.prompt_ids == c["prompt_ids"]
    assert r.tokens == c["tokens"] and r.stop_reason == "max_new_tokens"
    assert r.text == c["text_out"] and "".join(pieces) == r.text and len(pieces) > 1
    # the metadata's stop ids ("gola" was made one of them: the official greedy tokens reach it mid-way)
    stopped = generator(c["text"], chat=c["chat"])
    assert stopped.tokens == c["stopped_tokens"] and stopped.result.stop_id == c["stopped_id"]
    assert stopped.stop_reason == "stop_id" and stopped.text == c["stopped_text"]


ENGINE = json.loads((DATA / "engine.json").read_text())


def test_what_the_litert_lm_engine_reads_from_the_bundle(generator):
    """LiteRT-LM's own engine (scripts/record_litertlm_engine.py) on the same bundle: the same start and stop ids,
    the same prompt ids (after the start token it adds itself) and, where its XNNPACK arithmetic and the builtin
    kernels give the same tokens up to the stop (prompts a and b), the same text."""
    assert generator.start_ids == [ENGINE["bos"]]
    assert sorted(generator.stop_ids) == sorted(i for ids in ENGINE["stop_ids"] for i in ids)
    for name, c in CASES.items():
        assert generator.prompt_ids(c["text"], chat=c["chat"]) == [ENGINE["bos"], *ENGINE["cases"][name]["tokenized"]]
    for name in ("a", "b"):
        assert generator(CASES[name]["text"]).text == ENGINE["cases"][name]["text"]


def test_text_generation_from_a_tflite_and_its_tokenizer_json():
    require_tokenizers()
    c = CASES["a"]
    r = generate_text(str(TFLITE), "<bos> " + c["text"], EXPECTED["steps"], tokenizer=DATA / "tokenizer.json")
    assert r.prompt_ids == c["prompt_ids"] and r.tokens == c["tokens"] and r.text == c["text_out"]
    with pytest.raises(ValueError, match="needs tokenizer="):
        generate_text(str(TFLITE), c["text"])


def test_a_stop_sequence_ends_generation_and_is_held_back_from_the_stream(bundle):
    require_tokenizers()
    c = CASES["b"]
    words = c["text_out"].split()
    # two consecutive words of the official output, as a multi-token stop string
    meta = LlmMetadata(start_token=TokenSpec((1,)), stop_tokens=[TokenSpec(text=f"{words[3]} {words[4]}")])
    gen = TextGenerator(bundle, metadata=meta)
    assert gen.stop_sequences == [tuple(c["tokens"][3:5])] and not gen.stop_ids
    pieces: list[str] = []
    r = gen(c["text"], EXPECTED["steps"], on_text=pieces.append)
    assert r.stop_reason == "stop_sequence" and r.tokens == c["tokens"][:3]
    assert r.text == " ".join(words[:3]) == "".join(pieces)


def test_text_generation_can_be_cancelled_between_tokens(generator):
    stop = threading.Event()
    seen: list[int] = []

    def on_token(t):
        seen.append(t)
        if len(seen) == 3:
            stop.set()

    r = generator(CASES["a"]["text"], 20, stop_ids=(), on_token=on_token, cancel=stop)
    assert r.stop_reason == "cancelled" and r.tokens == CASES["a"]["tokens"][:3] == seen


def test_missing_tokenizers_names_the_extra(bundle, monkeypatch):
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(ImportError, match=r"lite-numba\[llm\]"):
        TextGenerator(bundle)


# --- lite-numba benchmark ---------------------------------------------------------------------------------------------
def test_benchmark_runs_a_litertlm_bundle(tmp_path):
    from lite_numba.tools.llm_benchmark import build_parser, is_llm_command_line, run_llm_benchmark

    assert is_llm_command_line(["--graph", str(BUNDLE)])
    out = io.StringIO()
    args = build_parser().parse_args(["--graph", str(BUNDLE), "--decode_tokens", "8", "--num_runs", "1"])
    assert run_llm_benchmark(args, out) == 0
    text = out.getvalue()
    for line in ("TFLiteModel prefill_decode", "Prefill Turn 1: Processed 16 tokens", "Decode Turn 1: Processed 8 "
                 "tokens", "Time to first token", "Peak RSS", "KV cache copied per decode step: 0 B"):
        assert line in text, text
    out = io.StringIO()
    args = build_parser().parse_args(["--graph", str(BUNDLE), "--decode_tokens", "8", "--num_runs", "1",
                                      "--compare_official"])
    assert run_llm_benchmark(args, out) == 0
    assert re.search(r"lite-numba / official builtin kernels: .*\(same tokens\)", out.getvalue()), out.getvalue()
    bad = tmp_path / "cut.litertlm"
    bad.write_bytes(BUNDLE.read_bytes()[:200_000])
    out = io.StringIO()
    assert run_llm_benchmark(build_parser().parse_args(["--graph", str(bad)]), out) == 1
    assert "ERROR:" in out.getvalue() and "truncated" in out.getvalue()


# --- bad bundles ------------------------------------------------------------------------------------------------------
def write_bundle(sections, version=(1, 7, 0)) -> bytes:
    """A .litertlm in the builder's layout: sections = [(data type, {key: string value}, data)]."""
    block = 16384
    b = flatbuffers.Builder(1024)

    def kv(key, value):
        k, v = b.CreateString(key), b.CreateString(value)
        b.StartObject(1)
        b.PrependUOffsetTRelativeSlot(0, v, 0)
        sv = b.EndObject()
        b.StartObject(3)
        b.PrependUOffsetTRelativeSlot(0, k, 0)
        b.PrependUint8Slot(1, 9, 0)
        b.PrependUOffsetTRelativeSlot(2, sv, 0)
        return b.EndObject()

    def vec(items):
        b.StartVector(4, len(items), 4)
        for x in reversed(items):
            b.PrependUOffsetTRelative(x)
        return b.EndVector()

    offsets, pos = [], block
    for _, _, data in sections:
        offsets.append((pos, pos + len(data)))
        pos = (pos + len(data) + block - 1) // block * block
    objs = []
    for (dtype, items, _), (begin, end) in zip(sections, offsets):
        iv = vec([kv(k, v) for k, v in items.items()])
        b.StartObject(4)
        b.PrependUOffsetTRelativeSlot(0, iv, 0)
        b.PrependUint64Slot(1, begin, 0)
        b.PrependUint64Slot(2, end, 0)
        b.PrependUint8Slot(3, dtype, 0)
        objs.append(b.EndObject())
    ov = vec(objs)
    b.StartObject(1)
    b.PrependUOffsetTRelativeSlot(0, ov, 0)
    secmeta = b.EndObject()
    ev = vec([kv("Authors", "tests")])
    b.StartObject(1)
    b.PrependUOffsetTRelativeSlot(0, ev, 0)
    sysmeta = b.EndObject()
    b.StartObject(2)
    b.PrependUOffsetTRelativeSlot(0, sysmeta, 0)
    b.PrependUOffsetTRelativeSlot(1, secmeta, 0)
    b.Finish(b.EndObject())
    header = bytes(b.Output())
    out = bytearray(b"LITERTLM" + struct.pack("<III", *version) + bytes(4) + struct.pack("<Q", 32 + len(header)))
    out += header
    for (_, _, data), (begin, _) in zip(sections, offsets):
        out += bytes(begin - len(out)) + data
    return bytes(out)


MODEL = (3, {"model_type": "tf_lite_prefill_decode"})


def _tokenizer_section(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + zlib.compress(text)


def test_own_writer_round_trips_and_runs(tmp_path):
    data = write_bundle([(*MODEL, TFLITE.read_bytes()), (6, {}, _tokenizer_section(b"{}")),
                         (5, {}, bundle_metadata_bytes())])
    f = LitertlmFile(data)
    assert f.model_types == ["prefill_decode"] and f.tokenizer_json() == b"{}"
    assert f.llm_metadata.max_num_tokens == 64
    assert generate(KVSession(f.interpreter()), CASES["b"]["prompt_ids"], 4).tokens == CASES["b"]["tokens"][:4]


def bundle_metadata_bytes() -> bytes:
    b = LitertlmFile(BUNDLE)
    return bytes(b.data(b.sections_of("LlmMetadataProto")[0]))


@pytest.mark.parametrize("cut", [0, 7, 20, 40, 300, 16384 + 1000, 390000, 409600 + 10])
def test_truncated_bundles_are_refused_naming_the_problem(tmp_path, cut):
    path = tmp_path / "cut.litertlm"
    path.write_bytes(BUNDLE.read_bytes()[:cut])
    with pytest.raises(LitertlmError, match="empty|not a .litertlm|truncated|header ends|corrupted"):
        f = LitertlmFile(path)
        f.llm_metadata  # noqa: B018 (the last section is cut when its end is past the file)


def test_unknown_section_type_version_and_magic_are_refused():
    with pytest.raises(LitertlmError, match="section 1 has unknown data type 42"):
        LitertlmFile(write_bundle([(*MODEL, TFLITE.read_bytes()), (42, {}, b"x")]))
    with pytest.raises(LitertlmError, match=r"format version 2\.0\.0; this reader knows version 1\.x"):
        LitertlmFile(write_bundle([(*MODEL, b"x")], version=(2, 0, 0)))
    with pytest.raises(LitertlmError, match="not a .litertlm bundle"):
        LitertlmFile(b"TFL3" * 16)
    with pytest.raises(TypeError, match="path or its bytes"):
        LitertlmFile(3)


def test_a_bundle_without_a_model_section_is_refused():
    f = LitertlmFile(write_bundle([(6, {}, _tokenizer_section(b"{}")), (5, {}, bundle_metadata_bytes())]))
    with pytest.raises(LitertlmError, match=r"no model section \(TFLiteModel\)"):
        f.interpreter()
    with pytest.raises(LitertlmError, match="no 'embedder' model section"):
        LitertlmFile(BUNDLE).model_content("embedder")
    with pytest.raises(LitertlmError, match="does not hold a .tflite model"):
        LitertlmFile(write_bundle([(*MODEL, b"not a model at all")])).model_content()
    with pytest.raises(LitertlmError, match=r"section 0 \(TFLiteModel prefill_decode.*Invalid model"):  # ModelError
        LitertlmFile(write_bundle([(*MODEL, b"\x10\x00\x00\x00TFL3" + bytes(64))])).interpreter()
    with pytest.raises(LitertlmError, match="has no tokenizer section"):
        require_tokenizers()
        TextGenerator(LitertlmFile(write_bundle([(*MODEL, TFLITE.read_bytes())])))


def test_a_model_section_without_kv_signatures_is_refused_naming_the_other_sections():
    from lite_numba.builder import ModelBuilder

    b = ModelBuilder()
    x = b.add_input("embeddings", np.float32, [1, 4])
    y = b.add_tensor("y", np.float32, [1, 4])
    b.add_op("ADD", [x, x], [y])
    b.mark_output(y)
    plain = b.build()
    f = LitertlmFile(write_bundle([(*MODEL, plain), (3, {"model_type": "tf_lite_embedder"}, plain),
                                   (6, {}, _tokenizer_section((DATA / "tokenizer.json").read_bytes()))]))
    assert f.model_types == ["prefill_decode", "embedder"]
    with pytest.raises(LitertlmError, match=r"cannot generate here: not a KV-cache model.*\['embedder'\]"):
        TextGenerator(f)


def test_corrupted_metadata_and_tokenizer_sections_are_refused():
    meta = bundle_metadata_bytes()
    with pytest.raises(LitertlmError, match="malformed protobuf"):
        _ = LitertlmFile(write_bundle([(*MODEL, b"x"), (5, {}, meta[:-3])])).llm_metadata
    with pytest.raises(LitertlmError, match="does not decompress"):
        LitertlmFile(write_bundle([(6, {}, struct.pack("<Q", 9) + b"garbage!!")])).tokenizer_json()
    with pytest.raises(LitertlmError, match="but its header says 99"):
        LitertlmFile(write_bundle([(6, {}, _tokenizer_section(b"{}")[:8].replace(b"\x02", b"c")
                                    + zlib.compress(b"{}"))])).tokenizer_json()


def test_random_corruption_of_the_header_gives_litertlm_errors_only():
    data = BUNDLE.read_bytes()
    header_end = struct.unpack_from("<Q", data, 24)[0]
    rng = np.random.default_rng(0)
    refused = 0
    for _ in range(300):
        bad = bytearray(data[:header_end])
        for pos in rng.integers(8, header_end, 3):
            bad[pos] = int(rng.integers(0, 256))
        try:
            f = LitertlmFile(bytes(bad) + data[header_end:])
            f.llm_metadata  # noqa: B018
            f.tokenizer_json()
        except LitertlmError:
            refused += 1
    assert refused > 0


def test_random_corruption_of_the_metadata_gives_litertlm_errors_only():
    meta = bundle_metadata_bytes()
    rng = np.random.default_rng(1)
    refused = 0
    for _ in range(500):
        bad = bytearray(meta)
        for pos in rng.integers(0, len(meta), 2):
            bad[pos] = int(rng.integers(0, 256))
        try:
            LlmMetadata.parse(bytes(bad[:int(rng.integers(1, len(bad) + 1))]))
        except LitertlmError:
            refused += 1
    assert refused > 0


def test_streamed_text_holds_back_incomplete_utf8_characters():
    tk = require_tokenizers()
    from lite_numba.llm.text import Tokenizer, _Stream

    alphabet = sorted(tk.pre_tokenizers.ByteLevel.alphabet())  # one token per byte: "é" is two tokens
    bpe = tk.Tokenizer(tk.models.BPE({c: i for i, c in enumerate(alphabet)}, []))
    bpe.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tk.decoders.ByteLevel()
    text = "héllo wörld ✓ done"
    ids = bpe.encode(text).ids
    assert len(ids) == len(text.encode())
    pieces: list[str] = []
    stream = _Stream(Tokenizer(bpe, "hf"), [], pieces.append, None)
    for t in ids:
        stream.push(t)
    assert stream.finish() == text == "".join(pieces)
    assert not any("\ufffd" in p for p in pieces) and "é" in pieces and "✓" in pieces


def test_chat_templates_render_sandboxed(bundle):
    require_tokenizers()
    require_module("jinja2", "llm")  # (without it a bundle's prompt affixes are used: the test below)
    refuse = LlmMetadata(jinja_prompt_template="{{ raise_exception('no system role here') }}")
    with pytest.raises(ValueError, match="the chat template refused the messages: no system role here"):
        TextGenerator(bundle, metadata=refuse).prompt_ids("hi", chat=True)
    sneaky = LlmMetadata(jinja_prompt_template="{{ messages.append(1) }}{{ ''.__class__.__mro__ }}")
    with pytest.raises(ValueError, match=r"could not be rendered \(SecurityError"):
        TextGenerator(bundle, metadata=sneaky).render_chat("hi")
    with pytest.raises(ValueError, match=r"could not be rendered \(TemplateSyntaxError"):
        TextGenerator(bundle, metadata=LlmMetadata(jinja_prompt_template="{% for %}")).render_chat("hi")
    # a start token given as ids renders as its token's string
    ids_bos = LlmMetadata(start_token=TokenSpec((1,)), jinja_prompt_template="{{ bos_token }}|")
    assert TextGenerator(bundle, metadata=ids_bos).render_chat("hi") == "<bos>|"


def test_chat_without_a_template_uses_the_prompt_affixes(bundle):
    require_tokenizers()
    meta = LlmMetadata(start_token=TokenSpec((1,)), prompt_templates=bundle.llm_metadata.prompt_templates)
    gen = TextGenerator(bundle, metadata=meta)
    c = CASES["b_chat"]
    assert gen.render_chat(c["text"]) == c["rendered"][len("<bos>"):]
    assert gen.prompt_ids(c["text"], chat=True) == c["prompt_ids"]
    with pytest.raises(ValueError, match="needs a chat template or prompt affixes"):
        TextGenerator(bundle, metadata=LlmMetadata()).prompt_ids("hi", chat=True)


def test_a_sentencepiece_bundle_without_a_model():
    """sp_tokenizer.litertlm (litert-lm-builder: an SP_Tokenizer and an LlmMetadata, no model): its tokenizer
    encodes and decodes as the sentencepiece library did when recording, streamed pieces included; generation is
    refused for want of a model section."""
    require_module("sentencepiece", "test")
    from lite_numba.llm import load_tokenizer
    from lite_numba.llm.text import _Stream

    sp = EXPECTED["sentencepiece"]
    f = LitertlmFile(DATA / sp["bundle"])
    assert [s.type_name for s in f.sections] == ["SP_Tokenizer", "LlmMetadataProto"] and f.tokenizer_json() is None
    assert len(f.sentencepiece_model()) == sp["sp_model_bytes"]
    tok = load_tokenizer(f)
    assert tok.kind == "sentencepiece"
    for text, rec in sp["texts"].items():
        assert tok.encode(text) == rec["ids"] and tok.decode(rec["ids"]) == rec["decoded"]
        pieces: list[str] = []
        stream = _Stream(tok, [], pieces.append, None)
        for t in rec["ids"]:
            stream.push(t)
        assert stream.finish() == rec["decoded"] == "".join(pieces)
    assert tok.ids_of(TokenSpec(text="<end_of_turn>")) == [sp["end_of_turn_id"]]
    assert tok.id_to_token(sp["end_of_turn_id"]) == "<end_of_turn>" and tok.id_to_token(10**6) is None
    meta = f.llm_metadata
    assert meta.start_token == TokenSpec((2,)) and meta.max_num_tokens == 32
    assert meta.stop_tokens == [TokenSpec((), "<end_of_turn>"), TokenSpec((1,))]
    with pytest.raises(LitertlmError, match=r"no model section \(TFLiteModel\) in the bundle \(section 0 "
                                            r"\(SP_Tokenizer"):
        TextGenerator(f)


def test_missing_sentencepiece_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentencepiece", None)
    from lite_numba.llm import load_tokenizer

    with pytest.raises(ImportError, match="pip install sentencepiece"):
        load_tokenizer(LitertlmFile(DATA / EXPECTED["sentencepiece"]["bundle"]))
