"""Running decoder LLMs with an external KV cache (litert-torch's generative API and export_hf models): the
signatures found by name (`signatures`), a session that keeps the caches in bound buffers so a step copies none of
them (`session`), and `generate()` over token ids with greedy, top-k and top-p sampling, stop ids, a token budget,
a callback per token and cancellation between tokens (`generate`). docs/design/llm.md says how and why.

May import version, format, runtime and api (the public Interpreter and SignatureRunner).
"""

from .generate import GenerationResult, generate, sample_next
from .session import KVCache, KVSession
from .signatures import KVSpec, find_kv_signatures, model_id

__all__ = ["GenerationResult", "KVCache", "KVSession", "KVSpec", "find_kv_signatures", "generate", "model_id",
           "sample_next"]
