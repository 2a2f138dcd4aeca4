"""`.litertlm` bundles, the files Google's LiteRT-LM engine runs, read by our own parser: the model sections (.tflite
files), the tokenizer (a Hugging Face tokenizer.json, zlib-compressed, or a SentencePiece model) and the LlmMetadata
proto (start and stop tokens, prompt templates, chat template, the token budget).

The layout (LiteRT-LM's schema/core, format 1.x; learnt from the `litert-lm-builder` package and the public sources,
no code taken):

- bytes 0..8: b"LITERTLM"; 8..20: the major, minor and patch version (uint32 LE each); 24..32: where the header ends
  (uint64 LE); 32..end: a flatbuffer LiteRTLMMetaData { system_metadata: SystemMetadata (0), section_metadata:
  SectionMetadata (1) }. SystemMetadata { entries: [KeyValuePair] (0) }; SectionMetadata { objects: [SectionObject]
  (0) }; SectionObject { items: [KeyValuePair] (0), begin_offset: uint64 (1), end_offset: uint64 (2), data_type:
  uint8 (3) }; KeyValuePair { key: string (0), value_type: uint8 (1), value: union table (2) } whose value table
  holds its value in field 0 (types 1..12: uint8, int8, uint16, int16, uint32, int32, float32, bool, string,
  uint64, int64, double).
- sections at 16 KiB-aligned offsets; their data types: GenericBinaryData 1, Deprecated 2, TFLiteModel 3,
  SP_Tokenizer 4, LlmMetadataProto 5, HF_Tokenizer_Zlib 6 (uint64 LE uncompressed size, then a zlib stream),
  TFLiteWeights 7, EmbeddingMetadataProto 8, ExecutorMetadataProto 9, TtsMetadataProto 10, AsrMetadataProto 11.
  A model section's items name it: `model_type` ("tf_lite_prefill_decode", "tf_lite_embedder", ...), optionally
  `backend_constraint` ("cpu", "gpu, npu", ...).
- LlmMetadata (protobuf, read here by a small wire-format reader, no protobuf dependency): start_token 1 and
  stop_tokens 2 (TokenUnion { token_ids: TokenIds { ids: repeated int32 (1) } (1), token_str: string (2) }),
  prompt_templates 3 (PromptTemplates { user 1, model 2, system 3: PromptAffixes { prefix 1, suffix 2 } }),
  sampler_params 4 (SamplerParameters { type 1: TOP_K 1 / TOP_P 2 / GREEDY 3, k 2, p 3: float, temperature 4:
  float, seed 5 }), max_num_tokens 5, llm_model_type 6 (a oneof: the field number names the model family),
  jinja_prompt_template 7, pad_token 13.

Every offset, length and count is checked against the file: a truncated or corrupted bundle, a bundle without a
model section, an unknown section type or format version raise LitertlmError (a ValueError) naming the problem.
The model section is a memoryview into the memory-mapped file (`model_content`): no copy of its bytes is made here.
"""

from __future__ import annotations

import mmap
import os
import struct
import zlib
from dataclasses import dataclass, field

__all__ = ["LitertlmError", "LitertlmFile", "LlmMetadata", "Section", "TokenSpec", "is_litertlm", "SECTION_TYPES"]

MAGIC = b"LITERTLM"
HEADER_BEGIN = 32
MAJOR_VERSION = 1
SECTION_TYPES = {0: "NONE", 1: "GenericBinaryData", 2: "Deprecated", 3: "TFLiteModel", 4: "SP_Tokenizer",
                 5: "LlmMetadataProto", 6: "HF_Tokenizer_Zlib", 7: "TFLiteWeights", 8: "EmbeddingMetadataProto",
                 9: "ExecutorMetadataProto", 10: "TtsMetadataProto", 11: "AsrMetadataProto"}
_VALUE_FORMATS = {1: "<B", 2: "<b", 3: "<H", 4: "<h", 5: "<I", 6: "<i", 7: "<f", 8: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_MODEL_FAMILIES = {1: "generic_model", 2: "gemma3n", 3: "function_gemma", 4: "gemma3", 5: "qwen3", 7: "qwen2p5",
                   8: "gemma4", 9: "fast_vlm", 11: "lfm2", 12: "minicpm5", 13: "minicpmv4"}
_SAMPLERS = {0: "TYPE_UNSPECIFIED", 1: "TOP_K", 2: "TOP_P", 3: "GREEDY"}


class LitertlmError(ValueError):
    """A .litertlm bundle this reader cannot use: truncated, corrupted, of an unknown format, or missing a part."""


def is_litertlm(path) -> bool:
    """Whether the file at `path` starts with the .litertlm magic bytes."""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


# --- a checked flatbuffer reader (tables, vectors, strings) -----------------------------------------------------------
class _Flat:
    """Reads the header's flatbuffer with every position checked against its end (LitertlmError otherwise)."""

    def __init__(self, buf: memoryview, what: str):
        self.buf, self.n, self.what = buf, len(buf), what

    def _get(self, fmt: str, pos: int):
        size = struct.calcsize(fmt)
        if pos < 0 or pos + size > self.n:
            raise LitertlmError(f"{self.what}: the header's flatbuffer is corrupted (a read of {size} bytes at "
                                f"{pos} is outside its {self.n} bytes)")
        return struct.unpack_from(fmt, self.buf, pos)[0]

    def root(self) -> int:
        return self._get("<I", 0)

    def _field(self, table: int, index: int) -> int | None:
        vtable = table - self._get("<i", table)
        vt_size = self._get("<H", vtable)
        slot = 4 + 2 * index
        if slot + 2 > vt_size:
            return None
        off = self._get("<H", vtable + slot)
        return table + off if off else None

    def scalar(self, table: int, index: int, fmt: str, default=0):
        pos = self._field(table, index)
        return default if pos is None else self._get(fmt, pos)

    def table(self, table: int, index: int) -> int | None:
        pos = self._field(table, index)
        return None if pos is None else pos + self._get("<I", pos)

    def vector(self, table: int, index: int) -> list[int]:
        """The positions of a vector of tables."""
        pos = self._field(table, index)
        if pos is None:
            return []
        start = pos + self._get("<I", pos)
        count = self._get("<I", start)
        if count * 4 > self.n - start - 4:
            raise LitertlmError(f"{self.what}: the header's flatbuffer is corrupted (a vector of {count} entries "
                                f"at {start} runs past its {self.n} bytes)")
        return [start + 4 + 4 * k + self._get("<I", start + 4 + 4 * k) for k in range(count)]

    def string(self, table: int, index: int) -> str | None:
        pos = self._field(table, index)
        if pos is None:
            return None
        start = pos + self._get("<I", pos)
        length = self._get("<I", start)
        if length > self.n - start - 4:
            raise LitertlmError(f"{self.what}: the header's flatbuffer is corrupted (a string of {length} bytes at "
                                f"{start} runs past its {self.n} bytes)")
        return bytes(self.buf[start + 4:start + 4 + length]).decode("utf-8", "replace")

    def key_values(self, table: int, index: int) -> dict[str, object]:
        out: dict[str, object] = {}
        for kv in self.vector(table, index):
            key = self.string(kv, 0) or ""
            vtype = self.scalar(kv, 1, "<B")
            value = self.table(kv, 2)
            if value is None or vtype == 0:
                out[key] = None
            elif vtype == 9:
                out[key] = self.string(value, 0) or ""
            elif vtype in _VALUE_FORMATS:
                out[key] = self.scalar(value, 0, _VALUE_FORMATS[vtype])
            else:
                raise LitertlmError(f"{self.what}: metadata entry {key!r} has unknown value type {vtype}")
        return out


# --- a small protobuf wire-format reader ------------------------------------------------------------------------------
def _varint(buf: memoryview, pos: int, what: str) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise LitertlmError(f"{what}: malformed protobuf (a varint runs past the end of the section)")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _proto(buf: memoryview, what: str) -> list[tuple[int, int, object]]:
    """(field number, wire type, value) of a message: ints for varints and fixed fields, memoryviews for
    length-delimited ones."""
    fields, pos = [], 0
    while pos < len(buf):
        key, pos = _varint(buf, pos, what)
        num, wire = key >> 3, key & 7
        if num == 0:
            raise LitertlmError(f"{what}: malformed protobuf (field number 0 at byte {pos})")
        if wire == 0:
            value, pos = _varint(buf, pos, what)
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if pos + size > len(buf):
                raise LitertlmError(f"{what}: malformed protobuf (a fixed field runs past the end of the section)")
            value, pos = bytes(buf[pos:pos + size]), pos + size
        elif wire == 2:
            length, pos = _varint(buf, pos, what)
            if pos + length > len(buf):
                raise LitertlmError(f"{what}: malformed protobuf (field {num} of {length} bytes runs past the end of "
                                    f"the section)")
            value, pos = buf[pos:pos + length], pos + length
        else:
            raise LitertlmError(f"{what}: malformed protobuf (wire type {wire} of field {num})")
        fields.append((num, wire, value))
    return fields


def _int32(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def _text(v, what: str) -> str:
    if not isinstance(v, memoryview):
        raise LitertlmError(f"{what}: malformed protobuf (a string field is not length-delimited)")
    return bytes(v).decode("utf-8", "replace")


@dataclass(frozen=True)
class TokenSpec:
    """A start / stop / pad token as the metadata gives it: token ids, or a string for the tokenizer to map."""

    ids: tuple[int, ...] = ()
    text: str | None = None


def _token(buf: memoryview, what: str) -> TokenSpec:
    ids, text = [], None
    for num, wire, v in _proto(buf, what):
        if num == 1 and wire == 2:
            for n2, w2, v2 in _proto(v, what):
                if n2 == 1 and w2 == 0:
                    ids.append(_int32(v2))
                elif n2 == 1 and w2 == 2:  # packed
                    pos = 0
                    while pos < len(v2):
                        x, pos = _varint(v2, pos, what)
                        ids.append(_int32(x))
        elif num == 2:
            text = _text(v, what)
    return TokenSpec(tuple(ids), text)


@dataclass
class LlmMetadata:
    """The LlmMetadata proto of a bundle (the fields generation uses; `raw` keeps the bytes)."""

    start_token: TokenSpec | None = None
    stop_tokens: list[TokenSpec] = field(default_factory=list)
    pad_token: TokenSpec | None = None
    max_num_tokens: int | None = None
    prompt_templates: dict[str, tuple[str, str]] = field(default_factory=dict)  # role -> (prefix, suffix)
    jinja_prompt_template: str | None = None
    sampler: dict[str, object] = field(default_factory=dict)  # type, k, p, temperature, seed
    model_type: str | None = None  # the llm_model_type oneof's field name (gemma3, qwen3, ...)
    raw: bytes = field(default=b"", repr=False)

    @classmethod
    def parse(cls, data, what: str = "LlmMetadata") -> LlmMetadata:
        buf = memoryview(data).cast("B")
        meta = cls(raw=bytes(buf))
        for num, wire, v in _proto(buf, what):
            if num in (1, 2, 13) and wire == 2:
                tok = _token(v, what)
                if num == 1:
                    meta.start_token = tok
                elif num == 2:
                    meta.stop_tokens.append(tok)
                else:
                    meta.pad_token = tok
            elif num == 3 and wire == 2:
                for role_num, _, affixes in _proto(v, what):
                    role = {1: "user", 2: "model", 3: "system"}.get(role_num)
                    if role and isinstance(affixes, memoryview):
                        parts = {n: _text(x, what) for n, _, x in _proto(affixes, what)}
                        meta.prompt_templates[role] = (parts.get(1, ""), parts.get(2, ""))
            elif num == 4 and wire == 2:
                for n2, _, x in _proto(v, what):
                    if n2 == 1:
                        meta.sampler["type"] = _SAMPLERS.get(x, str(x))
                    elif n2 in (2, 5):
                        meta.sampler["k" if n2 == 2 else "seed"] = _int32(x)
                    elif n2 in (3, 4) and isinstance(x, bytes) and len(x) == 4:
                        meta.sampler["p" if n2 == 3 else "temperature"] = struct.unpack("<f", x)[0]
            elif num == 5 and wire == 0:
                meta.max_num_tokens = _int32(v)
            elif num == 6 and wire == 2:
                kinds = [n2 for n2, _, _ in _proto(v, what)]
                if kinds:
                    meta.model_type = _MODEL_FAMILIES.get(kinds[0], f"field {kinds[0]}")
            elif num == 7 and wire == 2:
                meta.jinja_prompt_template = _text(v, what)
        return meta


@dataclass(frozen=True)
class Section:
    """One section of a bundle: its index, data type (number and name), byte range and metadata items."""

    index: int
    data_type: int
    type_name: str
    begin: int
    end: int
    items: dict[str, object]

    @property
    def model_type(self) -> str | None:
        """A model section's type without the "tf_lite_" prefix ("prefill_decode", "embedder", ...)."""
        t = self.items.get("model_type")
        return t[len("tf_lite_"):] if isinstance(t, str) and t.startswith("tf_lite_") else t

    def describe(self) -> str:
        kind = f" {self.model_type}" if self.model_type else ""
        return f"section {self.index} ({self.type_name}{kind}, bytes {self.begin}..{self.end})"


class LitertlmFile:
    """A .litertlm bundle (a path, memory-mapped read-only, or its bytes / any buffer): `version`,
    `system_metadata`, `sections`, and what generation needs: `model_content()` (a zero-copy memoryview of a model
    section), `interpreter()`, `llm_metadata`, `tokenizer_json()` / `sentencepiece_model()`."""

    def __init__(self, source):
        self.path = None
        if isinstance(source, (str, os.PathLike)):
            self.path = os.fspath(source)
            with open(self.path, "rb") as f:
                if os.fstat(f.fileno()).st_size == 0:
                    raise LitertlmError(f"{self.path}: the file is empty, not a .litertlm bundle")
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            buf = memoryview(self._map)
        else:
            self._map = None
            try:
                buf = memoryview(source).cast("B")
            except TypeError:
                raise TypeError(f"a .litertlm bundle is a path or its bytes, got {type(source).__name__}") from None
        self._buf = buf
        self.name = self.path or "the .litertlm bundle"
        self._read_header()
        self._meta: LlmMetadata | None = None

    def _read_header(self) -> None:
        buf, n, name = self._buf, len(self._buf), self.name
        if n < HEADER_BEGIN or bytes(buf[:8]) != MAGIC:
            got = bytes(buf[:8])
            raise LitertlmError(f"{name}: not a .litertlm bundle (it starts with {got!r}, expected {MAGIC!r}"
                                + (f"; the file has only {n} bytes)" if n < HEADER_BEGIN else ")"))
        self.version = struct.unpack_from("<III", buf, 8)
        if self.version[0] != MAJOR_VERSION:
            raise LitertlmError(f"{name}: LiteRT-LM file format version {'.'.join(map(str, self.version))}; this "
                                f"reader knows version {MAJOR_VERSION}.x")
        header_end = struct.unpack_from("<Q", buf, 24)[0]
        if not HEADER_BEGIN + 8 <= header_end <= n:
            raise LitertlmError(f"{name}: the header ends at byte {header_end} but the file has {n} bytes "
                                f"(truncated or corrupted)")
        flat = _Flat(buf[HEADER_BEGIN:header_end], name)
        root = flat.root()
        system = flat.table(root, 0)
        self.system_metadata = flat.key_values(system, 0) if system is not None else {}
        sections = flat.table(root, 1)
        self.sections: list[Section] = []
        for k, obj in enumerate(flat.vector(sections, 0) if sections is not None else []):
            dtype = flat.scalar(obj, 3, "<B")
            begin, end = flat.scalar(obj, 1, "<Q"), flat.scalar(obj, 2, "<Q")
            if dtype not in SECTION_TYPES:
                raise LitertlmError(f"{name}: section {k} has unknown data type {dtype} (known: "
                                    f"{', '.join(f'{v} {t}' for v, t in SECTION_TYPES.items() if v)})")
            sec = Section(k, dtype, SECTION_TYPES[dtype], begin, end, flat.key_values(obj, 0))
            if end > n:
                raise LitertlmError(f"{name}: {sec.describe()} ends past the end of the file ({n} bytes): the "
                                    f"bundle is truncated")
            if not header_end <= begin <= end:
                raise LitertlmError(f"{name}: {sec.describe()} has an invalid byte range (the header ends at "
                                    f"{header_end})")
            self.sections.append(sec)

    # --- sections -----------------------------------------------------------------------------------------------------
    def data(self, section: Section) -> memoryview:
        """A section's bytes: a memoryview into the bundle (no copy)."""
        return self._buf[section.begin:section.end]

    def sections_of(self, type_name: str) -> list[Section]:
        return [s for s in self.sections if s.type_name == type_name]

    def _summary(self) -> str:
        return ", ".join(s.describe() for s in self.sections) or "no sections"

    @property
    def model_types(self) -> list[str]:
        return [s.model_type or "?" for s in self.sections_of("TFLiteModel")]

    def model_section(self, model_type: str = "prefill_decode") -> Section:
        """The TFLiteModel section of `model_type` ("prefill_decode", "embedder", ...; the "tf_lite_" prefix may be
        given), the first one a CPU may run when several are; LitertlmError when there is none."""
        want = model_type[len("tf_lite_"):] if model_type.startswith("tf_lite_") else model_type
        models = self.sections_of("TFLiteModel")
        if not models:
            raise LitertlmError(f"{self.name}: no model section (TFLiteModel) in the bundle ({self._summary()})")
        found = [s for s in models if s.model_type == want]
        if not found:
            raise LitertlmError(f"{self.name}: no {want!r} model section; its model sections are "
                                f"{self.model_types}")
        cpu = [s for s in found if "cpu" in str(s.items.get("backend_constraint", "cpu")).lower()]
        return (cpu or found)[0]

    def model_content(self, model_type: str = "prefill_decode") -> memoryview:
        """The .tflite bytes of a model section, a memoryview into the mapped file (no copy). Models whose weights
        were externalized into a TFLiteWeights section are refused."""
        sec = self.model_section(model_type)
        if self.sections_of("TFLiteWeights"):
            raise LitertlmError(f"{self.name}: the model's weights are in a separate TFLiteWeights section "
                                f"(externalized by litert-lm-builder); reading them is not supported")
        data = self.data(sec)
        if len(data) < 8 or bytes(data[4:8]) != b"TFL3":
            raise LitertlmError(f"{self.name}: {sec.describe()} does not hold a .tflite model (identifier "
                                f"{bytes(data[4:8])!r}, expected b'TFL3')")
        return data

    def model_map(self, model_type: str = "prefill_decode"):
        """The model section as a read-only mmap of exactly its bytes (a bundle opened from a path whose section
        starts at a multiple of the mapping granularity, as the builder's 16 KiB blocks do), else model_content()."""
        data = self.model_content(model_type)
        sec = self.model_section(model_type)
        if self.path is None or sec.begin % mmap.ALLOCATIONGRANULARITY or sec.end == sec.begin:
            return data
        with open(self.path, "rb") as f:
            return mmap.mmap(f.fileno(), sec.end - sec.begin, offset=sec.begin, access=mmap.ACCESS_READ)

    def interpreter(self, model_type: str = "prefill_decode", **kwargs):
        """A lite-numba Interpreter of a model section (kwargs: the Interpreter's, e.g. num_threads), given
        model_map()'s read-only mmap of the section, which Interpreter(model_content=...) reads where it is (no copy,
        as a .tflite opened by path); a section model_map() cannot map alone (not aligned) is copied once."""
        from ..api.interpreter import Interpreter  # lazy: Numba and the kernels load only when a model is run

        data = self.model_map(model_type)
        try:
            return Interpreter(model_content=data, **kwargs)
        except ValueError as e:
            raise LitertlmError(f"{self.name}: {self.model_section(model_type).describe()}: {e}") from e

    # --- metadata and tokenizer ---------------------------------------------------------------------------------------
    @property
    def llm_metadata(self) -> LlmMetadata | None:
        """The LlmMetadata proto, parsed (None when the bundle has none)."""
        if self._meta is None:
            secs = self.sections_of("LlmMetadataProto")
            if not secs:
                return None
            self._meta = LlmMetadata.parse(self.data(secs[0]), f"{self.name}: {secs[0].describe()}")
        return self._meta

    def tokenizer_json(self) -> bytes | None:
        """The Hugging Face tokenizer.json of the bundle, decompressed (None when it has none)."""
        secs = self.sections_of("HF_Tokenizer_Zlib")
        if not secs:
            return None
        sec = secs[0]
        data = self.data(sec)
        if len(data) < 8:
            raise LitertlmError(f"{self.name}: {sec.describe()} is too short for a compressed tokenizer")
        size = struct.unpack_from("<Q", data, 0)[0]
        if size > 1 << 40:
            raise LitertlmError(f"{self.name}: {sec.describe()}: the tokenizer's header says {size} bytes (corrupted)")
        try:
            d = zlib.decompressobj()
            text = d.decompress(data[8:], size + 1)
        except zlib.error as e:
            raise LitertlmError(f"{self.name}: {sec.describe()}: the tokenizer does not decompress ({e})") from None
        if len(text) != size or not d.eof:
            raise LitertlmError(f"{self.name}: {sec.describe()}: the tokenizer decompresses to {len(text)} bytes "
                                f"{'(stream incomplete) ' if not d.eof else ''}but its header says {size}")
        return text

    def sentencepiece_model(self) -> bytes | None:
        """The SentencePiece model proto of the bundle (None when it has none)."""
        secs = self.sections_of("SP_Tokenizer")
        return bytes(self.data(secs[0])) if secs else None

    def close(self) -> None:
        """Unmap the file (BufferError while views of it, e.g. model_content()'s, are still alive)."""
        self._buf.release()
        if self._map is not None:
            self._map.close()

    def __enter__(self) -> LitertlmFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LitertlmFile({self.name!r}, version {'.'.join(map(str, self.version))}, {self._summary()})"
