"""Text in, text out: a prompt string tokenized, generate() over it, the new tokens decoded and streamed.

The tokenizer is a Hugging Face tokenizer.json read by the `tokenizers` library (the optional extra
`lite-numba[llm]`), from a .litertlm bundle's HF_Tokenizer_Zlib section or a file beside a .tflite export; a
bundle's SentencePiece section is read by the `sentencepiece` package when it is installed. A .litertlm bundle's
LlmMetadata gives the rest, as LiteRT-LM uses it: the start token put before the prompt's ids (the tokenizer adds
no special tokens itself), the stop tokens (ids, or strings mapped by the tokenizer: one id is a stop id, several
a stop sequence), the prompt affixes or jinja chat template with `chat=True` (jinja2 renders the template when it
is installed, as Hugging Face's apply_chat_template does; else the user / model affixes are used), and
max_num_tokens, the budget of prompt and generated tokens together.

Decoded text is streamed to `on_text(piece)` as tokens come: each piece is what the new tokens add to the decoded text
(decoded with a few tokens before them as context), held back while it ends in an incomplete UTF-8 character
(U+FFFD) or while the last tokens could still be the start of a stop sequence. The pieces join to the result's text
unless the tokenizer's decoding of a window differs from that of the whole (text normalizers of some tokenizers).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .generate import GenerationResult, generate
from .litertlm import LitertlmError, LitertlmFile, LlmMetadata, TokenSpec, is_litertlm
from .session import KVSession

__all__ = ["TextGenerator", "TextResult", "Tokenizer", "generate_text", "load_tokenizer"]

EXTRA = "pip install 'lite-numba[llm]'"


def _tokenizers():
    try:
        import tokenizers  # lazy: an optional extra, only needed for text
    except ImportError as e:
        raise ImportError(f"text generation needs the `tokenizers` library: {EXTRA} (or pip install tokenizers); "
                          f"generate() over token ids needs nothing more") from e
    return tokenizers


class Tokenizer:
    """encode / decode / token_to_id over a Hugging Face tokenizer (`tokenizers`) or a SentencePiece model."""

    def __init__(self, backend, kind: str):
        self.backend, self.kind = backend, kind

    @classmethod
    def from_json(cls, data: bytes | str) -> Tokenizer:
        tk = _tokenizers()
        try:
            return cls(tk.Tokenizer.from_str(data.decode("utf-8") if isinstance(data, bytes) else data), "hf")
        except Exception as e:  # the library raises its own Exception type for a bad file
            raise ValueError(f"not a valid tokenizer.json: {e}") from None

    @classmethod
    def from_sentencepiece(cls, model: bytes) -> Tokenizer:
        try:
            import sentencepiece  # lazy: optional, only for bundles with a SentencePiece tokenizer
        except ImportError as e:
            raise ImportError("this bundle's tokenizer is a SentencePiece model: pip install sentencepiece") from e
        sp = sentencepiece.SentencePieceProcessor()
        sp.LoadFromSerializedProto(model)
        return cls(sp, "sentencepiece")

    def encode(self, text: str) -> list[int]:
        if self.kind == "hf":
            return list(self.backend.encode(text, add_special_tokens=False).ids)
        return list(self.backend.EncodeAsIds(text))

    def decode(self, ids: list[int]) -> str:
        if self.kind == "hf":
            return self.backend.decode(list(ids), skip_special_tokens=True)
        return self.backend.DecodeIds(list(ids))

    def token_to_id(self, token: str) -> int | None:
        if self.kind == "hf":
            return self.backend.token_to_id(token)
        i = self.backend.PieceToId(token)
        return None if i == self.backend.unk_id() and token != self.backend.IdToPiece(i) else int(i)

    def id_to_token(self, i: int) -> str | None:
        if self.kind == "hf":
            return self.backend.id_to_token(int(i))
        return self.backend.IdToPiece(int(i)) if 0 <= int(i) < self.backend.GetPieceSize() else None

    def ids_of(self, spec: TokenSpec) -> list[int]:
        """A metadata token's ids: its ids, or its string as one token when the vocabulary has it, else encoded."""
        if spec.ids:
            return list(spec.ids)
        if spec.text is None:
            return []
        one = self.token_to_id(spec.text)
        return [int(one)] if one is not None else self.encode(spec.text)


def load_tokenizer(source) -> Tokenizer:
    """A Tokenizer from a tokenizer.json path, its text / bytes, a LitertlmFile or a .litertlm path."""
    if isinstance(source, Tokenizer):
        return source
    if isinstance(source, (str, os.PathLike)) and is_litertlm(source):
        source = LitertlmFile(source)
    if isinstance(source, LitertlmFile):
        data = source.tokenizer_json()
        if data is not None:
            return Tokenizer.from_json(data)
        sp = source.sentencepiece_model()
        if sp is not None:
            return Tokenizer.from_sentencepiece(sp)
        raise LitertlmError(f"{source.name}: the bundle has no tokenizer section (HF_Tokenizer_Zlib or "
                            f"SP_Tokenizer); pass tokenizer= a tokenizer.json")
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            return Tokenizer.from_json(f.read())
    if isinstance(source, (bytes, str)):
        return Tokenizer.from_json(source)
    raise TypeError(f"tokenizer must be a tokenizer.json path or text, or a .litertlm bundle; got "
                    f"{type(source).__name__}")


@dataclass
class TextResult:
    """The generated text (stop token or sequence excluded), the prompt's ids and generate()'s result (tokens,
    stop_reason: "stop_id", "stop_sequence", "max_new_tokens", "cache_full", "cancelled"; timings; the cache)."""

    text: str
    prompt_ids: list[int]
    result: GenerationResult = field(repr=False)

    @property
    def tokens(self) -> list[int]:
        return self.result.tokens

    @property
    def stop_reason(self) -> str:
        return self.result.stop_reason


class _Stream:
    """Turns tokens into text pieces for on_text (see the module docstring); also watches for stop sequences."""

    def __init__(self, tokenizer: Tokenizer, sequences: list[tuple[int, ...]], on_text, on_token):
        self.tok, self.seqs, self.on_text, self.on_token = tokenizer, sequences, on_text, on_token
        self.ids: list[int] = []
        self.window = 0  # ids before it are given and need not be decoded again (a few kept as context)
        self.given = 0  # the ids whose text has been given
        self.stopped: tuple[int, ...] | None = None

    def _pending(self) -> int:
        """How many of the last ids could begin a stop sequence (held back)."""
        best = 0
        for s in self.seqs:
            for k in range(min(len(s) - 1, len(self.ids)), best, -1):
                if tuple(self.ids[-k:]) == s[:k]:
                    best = k
                    break
        return best

    def push(self, token: int) -> None:
        self.ids.append(int(token))
        if self.on_token is not None:
            self.on_token(int(token))
        for s in self.seqs:
            if tuple(self.ids[-len(s):]) == s:
                self.stopped = s
                del self.ids[-len(s):]
                return
        self._emit(len(self.ids) - self._pending())

    def _emit(self, upto: int, final: bool = False) -> None:
        """Give the text ids[given:upto] add: decoded with the ids from `window` on as context (a tokenizer may
        render a token differently at the start of a text), so each step decodes a few ids, not all of them."""
        if upto <= self.given:
            return
        before = self.tok.decode(self.ids[self.window:self.given])
        text = self.tok.decode(self.ids[self.window:upto])
        if not final and text.endswith("\ufffd"):
            return
        if len(text) > len(before) and text.startswith(before):
            if self.on_text is not None:
                self.on_text(text[len(before):])
            self.window, self.given = max(self.window, self.given - 4), upto

    def finish(self) -> str:
        self._emit(len(self.ids), final=True)
        return self.tok.decode(self.ids)


def _raise_template_error(message: str):
    raise ValueError(f"the chat template refused the messages: {message}")


class TextGenerator:
    """A model with its tokenizer and metadata, for generation from text. `source`: a .litertlm bundle (path or
    LitertlmFile: model, tokenizer and metadata from it), a .tflite path, an Interpreter or a KVSession (then
    `tokenizer=` a tokenizer.json is needed). `tokenizer` / `metadata` override the bundle's."""

    def __init__(self, source, *, tokenizer=None, metadata: LlmMetadata | None = None, num_threads: int = 1):
        bundle = None
        if isinstance(source, LitertlmFile):
            bundle = source
        elif isinstance(source, (str, os.PathLike)) and is_litertlm(source):
            bundle = LitertlmFile(source)
        if bundle is not None:
            try:
                self.session = KVSession(bundle.interpreter(num_threads=num_threads))
            except LitertlmError:
                raise
            except ValueError as e:
                others = [t for t in bundle.model_types if t != "prefill_decode"]
                raise LitertlmError(f"{bundle.name}: its prefill_decode model cannot generate here: {e}" + (
                    f" (the bundle's other model sections, {others}, are not chained to it by lite-numba)"
                    if others else "")) from e
            self.metadata = metadata if metadata is not None else bundle.llm_metadata or LlmMetadata()
            self.tokenizer = load_tokenizer(tokenizer if tokenizer is not None else bundle)
        else:
            if tokenizer is None:
                raise ValueError("a model that is not a .litertlm bundle needs tokenizer= (a tokenizer.json)")
            self.session = source if isinstance(source, KVSession) else KVSession(source, num_threads=num_threads)
            self.metadata = metadata if metadata is not None else LlmMetadata()
            self.tokenizer = load_tokenizer(tokenizer)
        self.bundle = bundle
        meta, tok = self.metadata, self.tokenizer
        self.start_ids = tok.ids_of(meta.start_token) if meta.start_token is not None else []
        self.stop_ids: set[int] = set()
        self.stop_sequences: list[tuple[int, ...]] = []
        for spec in meta.stop_tokens:
            ids = tuple(tok.ids_of(spec))
            if len(ids) == 1:
                self.stop_ids.add(ids[0])
            elif ids:
                self.stop_sequences.append(ids)

    def prompt_ids(self, prompt, *, chat: bool = False) -> list[int]:
        """The ids generation starts from: the start token, then the prompt's ids (with `chat`, the prompt — a
        string or a list of {"role", "content"} messages — rendered by the chat template or the prompt affixes)."""
        text = self.render_chat(prompt) if chat else prompt
        if not isinstance(text, str):
            raise TypeError(f"the prompt must be a string (or messages with chat=True), got {type(text).__name__}")
        ids = self.tokenizer.encode(text)
        start = self.start_ids
        return ids if start and ids[:len(start)] == start else [*start, *ids]

    def render_chat(self, prompt) -> str:
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        meta = self.metadata
        if meta.jinja_prompt_template:
            try:
                from jinja2.sandbox import ImmutableSandboxedEnvironment  # lazy: optional, only for chat templates
            except ImportError:
                ImmutableSandboxedEnvironment = None
            if ImmutableSandboxedEnvironment is not None:
                # a bundle's template is untrusted input: rendered sandboxed, as Hugging Face's apply_chat_template
                env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
                env.globals["raise_exception"] = _raise_template_error
                start = meta.start_token
                bos = start.text if start is not None and start.text else (
                    "".join(self.tokenizer.id_to_token(i) or "" for i in start.ids) if start is not None else "")
                try:
                    return env.from_string(meta.jinja_prompt_template).render(
                        messages=messages, add_generation_prompt=True, bos_token=bos)
                except ValueError:
                    raise
                except Exception as e:  # jinja2's TemplateError family (syntax, undefined, sandbox refusals)
                    raise ValueError(f"the chat template could not be rendered ({type(e).__name__}: {e})") from e
        if not meta.prompt_templates:
            raise ValueError("chat=True needs a chat template or prompt affixes in the metadata; this model has "
                             "neither" + ("" if not meta.jinja_prompt_template else " usable (pip install jinja2)"))
        parts = []
        for m in messages:
            prefix, suffix = meta.prompt_templates.get(m["role"], ("", ""))
            parts.append(prefix + m["content"] + suffix)
        return "".join(parts) + meta.prompt_templates.get("model", ("", ""))[0]

    def __call__(self, prompt, max_new_tokens: int | None = None, *, chat: bool = False,
                 stop_ids: Iterable[int] | None = None, on_text: Callable[[str], object] | None = None,
                 on_token: Callable[[int], object] | None = None, top_k: int | None = None,
                 top_p: float | None = None, temperature: float = 1.0, seed: int | None = None, cancel=None,
                 reset: bool = True) -> TextResult:
        """Generate from a prompt string (see generate_text)."""
        if reset:
            self.session.reset()
        ids = self.prompt_ids(prompt, chat=chat)
        spec, meta = self.session.spec, self.metadata
        budget = spec.cache_length - self.session.position - len(ids) + 1
        if meta.max_num_tokens:
            budget = min(budget, meta.max_num_tokens - self.session.position - len(ids))
        if max_new_tokens is None:
            max_new_tokens = max(budget, 0)
        stops = self.stop_ids if stop_ids is None else {int(s) for s in stop_ids}
        stream = _Stream(self.tokenizer, self.stop_sequences if stop_ids is None else [], on_text, on_token)
        user_cancel = cancel

        def stop_now() -> bool:
            if stream.stopped is not None:
                return True
            if user_cancel is None:
                return False
            return user_cancel.is_set() if hasattr(user_cancel, "is_set") else bool(user_cancel())

        result = generate(self.session, ids, max_new_tokens, stop_ids=stops, top_k=top_k, top_p=top_p,
                          temperature=temperature, seed=seed, on_token=stream.push, cancel=stop_now)
        if stream.stopped is not None:
            result.stop_reason = "stop_sequence"
            del result.tokens[len(result.tokens) - len(stream.stopped):]
        return TextResult(stream.finish(), ids, result)


def generate_text(model, prompt, max_new_tokens: int | None = None, *, tokenizer=None, chat: bool = False,
                  stop_ids: Iterable[int] | None = None, on_text: Callable[[str], object] | None = None,
                  on_token: Callable[[int], object] | None = None, top_k: int | None = None,
                  top_p: float | None = None, temperature: float = 1.0, seed: int | None = None, cancel=None,
                  num_threads: int = 1) -> TextResult:
    """Generate text after `prompt` with a KV-cache model.

    `model`: a .litertlm bundle (path or LitertlmFile), a TextGenerator (reused), or a .tflite path / Interpreter /
    KVSession with `tokenizer=` (a tokenizer.json path or text). The prompt is tokenized without special tokens,
    after the metadata's start token; with `chat=True` it is first rendered by the chat template. Generation
    (llm.generate: greedy unless top_k / top_p with seed) stops at the metadata's stop ids (or `stop_ids`, which
    replace them and its stop sequences), after `max_new_tokens` (default: what max_num_tokens and the cache leave),
    or on `cancel`. `on_text(piece)` receives the decoded text as it grows, `on_token(id)` each id. Needs the
    `tokenizers` library (`pip install 'lite-numba[llm]'`): ImportError saying so otherwise."""
    gen = model if isinstance(model, TextGenerator) else TextGenerator(model, tokenizer=tokenizer,
                                                                        num_threads=num_threads)
    return gen(prompt, max_new_tokens, chat=chat, stop_ids=stop_ids, on_text=on_text, on_token=on_token,
               top_k=top_k, top_p=top_p, temperature=temperature, seed=seed, cancel=cancel)
