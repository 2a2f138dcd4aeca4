"""Running decoder LLMs with an external KV cache (litert-torch's generative API and export_hf models): the
signatures found by name (`signatures`), a session that keeps the caches in bound buffers so a step copies none of
them (`session`), and `generate()` over token ids with greedy, top-k and top-p sampling, stop ids, a token budget,
a callback per token and cancellation between tokens (`generate`); `.litertlm` bundles read by our own parser (model
sections, tokenizer, LlmMetadata: `litertlm`) and generation from text through a Hugging Face tokenizer.json
(`text`; the `tokenizers` library, extra `lite-numba[llm]`, imported only when text is used). docs/design/llm.md
says how and why.

May import version, format, runtime and api (the public Interpreter and SignatureRunner).
"""

from .generate import GenerationResult, generate, sample_next
from .litertlm import LitertlmError, LitertlmFile, LlmMetadata, Section, TokenSpec
from .session import KVCache, KVSession
from .signatures import KVSpec, find_kv_signatures, model_id
from .text import TextGenerator, TextResult, Tokenizer, generate_text, load_tokenizer

__all__ = ["GenerationResult", "KVCache", "KVSession", "KVSpec", "LitertlmError", "LitertlmFile", "LlmMetadata",
           "Section", "TextGenerator", "TextResult", "TokenSpec", "Tokenizer", "find_kv_signatures", "generate",
           "generate_text", "load_tokenizer", "model_id", "sample_next"]
