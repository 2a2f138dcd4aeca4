"""generate(): token ids in, token ids out, over a KV-cache model's prefill and decode signatures (llm.session).

The prompt but its last token is written into the cache by the prefill signatures (`KVSession.feed`); every new
token then comes from one decode step fed the previous one, starting with the prompt's last token — the protocol
of litert-torch's export_hf models, whose prefill signatures return no logits, and of LiteRT-LM. Greedy decoding
takes the first largest logit (numpy's argmax, as a Python loop over the official runtime does); with `top_k` and /
or `top_p` the next token is drawn (numpy's default_rng(seed)) from the softmax of logits / temperature restricted
to the k largest and to the smallest set of those whose probability reaches p.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from .session import KVCache, KVSession

__all__ = ["GenerationResult", "generate", "sample_next"]


@dataclass
class GenerationResult:
    """The generated ids (without the stop id that ended them, `stop_id`), why generation stopped ("stop_id",
    "max_new_tokens", "cache_full", "cancelled"), the timings as LiteRT-LM reports them, and the session's cache:
    it holds the prompt and every id drawn but `pending_token`, the last one, so a conversation continues with
    generate(model, [result.pending_token, *next_ids], cache=result.cache)."""

    tokens: list[int]
    stop_reason: str
    stop_id: int | None = None
    prompt_tokens: int = 0
    prefill_seconds: float = 0.0  # writing the prompt but its last token into the cache
    time_to_first_token: float = 0.0  # from the call to the first new token (prefill + one decode step)
    decode_seconds: float = 0.0  # decode steps, the first one included
    decode_steps: int = 0
    cache: KVCache | None = field(default=None, repr=False)
    pending_token: int | None = None  # the last id drawn (stop id included), not yet in the cache


    @property
    def prefill_tokens_per_second(self) -> float:
        n = max(self.prompt_tokens - 1, 0)
        return n / self.prefill_seconds if self.prefill_seconds > 0 else 0.0

    @property
    def decode_tokens_per_second(self) -> float:
        return self.decode_steps / self.decode_seconds if self.decode_seconds > 0 else 0.0


def sample_next(logits: np.ndarray, rng: np.random.Generator | None = None, *, top_k: int | None = None,
                top_p: float | None = None, temperature: float = 1.0) -> int:
    """The next token id from one row of logits: argmax when neither top_k nor top_p is given (or temperature is 0),
    else a draw from the softmax of logits / temperature over the top_k largest and, of those, the smallest set
    reaching probability top_p."""
    logits = np.asarray(logits, np.float64).reshape(-1)
    if (top_k is None and top_p is None) or temperature == 0:
        return int(np.argmax(logits))
    if rng is None:
        raise ValueError("sampling (top_k / top_p) needs a random generator: pass seed=")
    order = np.argsort(-logits, kind="stable")
    if top_k is not None:
        order = order[:max(int(top_k), 1)]
    z = logits[order] / float(temperature)
    p = np.exp(z - z.max())
    p /= p.sum()
    if top_p is not None:
        keep = int(np.searchsorted(np.cumsum(p), float(top_p))) + 1
        order, p = order[:keep], p[:keep] / p[:keep].sum()
    return int(order[rng.choice(len(order), p=p)])


def _cancelled(cancel) -> Callable[[], bool] | None:
    if cancel is None:
        return None
    if hasattr(cancel, "is_set"):  # a threading.Event
        return cancel.is_set
    if callable(cancel):
        return lambda: bool(cancel())
    raise TypeError("cancel must be a threading.Event or a callable returning True to stop")


def generate(model, prompt_ids: Iterable[int], max_new_tokens: int = 32, *, stop_ids: Iterable[int] = (),
             top_k: int | None = None, top_p: float | None = None, temperature: float = 1.0, seed: int | None = None,
             on_token: Callable[[int], object] | None = None, cancel=None, cache: KVCache | None = None,
             num_threads: int = 1) -> GenerationResult:
    """Generate up to `max_new_tokens` token ids after `prompt_ids` with a KV-cache model.

    `model`: a KVSession (it continues from its position), an Interpreter, a path or the model's bytes (with
    `num_threads`). `cache`: a KVCache to continue from (a previous result's `.cache`; the prompt then follows the
    tokens it holds). Greedy unless `top_k` / `top_p` (then `seed` makes the draw reproducible; `temperature`
    divides the logits). Generation stops after a token in `stop_ids` (not included in `tokens`), after
    `max_new_tokens`, when the cache is full, or when `cancel` (a threading.Event or a callable) is set — checked
    between tokens. `on_token(id)` is called with each new token as soon as it is known. A prompt longer than the
    cache's free positions is refused with ValueError before anything runs."""
    prompt = [int(t) for t in prompt_ids]
    if not prompt:
        raise ValueError("generate() needs a prompt of at least one token")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    session = model if isinstance(model, KVSession) else KVSession(model, num_threads=num_threads)
    if cache is not None:
        session.use_cache(cache)
    spec = session.spec
    free = spec.cache_length - session.position
    if len(prompt) > free:
        raise ValueError(f"the prompt has {len(prompt)} tokens; the cache holds {spec.cache_length} positions and "
                         f"{free} are free")
    stop = {int(s) for s in stop_ids}
    rng = np.random.default_rng(seed) if (top_k is not None or top_p is not None) else None
    is_cancelled = _cancelled(cancel)
    result = GenerationResult([], "max_new_tokens", prompt_tokens=len(prompt))
    t0 = time.perf_counter()
    fed = session.feed(prompt[:-1], cancel=is_cancelled)
    t1 = time.perf_counter()
    result.prefill_seconds = t1 - t0
    token = prompt[-1]
    if fed < len(prompt) - 1:
        result.stop_reason = "cancelled"
    while result.stop_reason != "cancelled" and result.decode_steps < max_new_tokens:
        if is_cancelled is not None and is_cancelled():
            result.stop_reason = "cancelled"
            break
        if session.position >= spec.cache_length:
            result.stop_reason = "cache_full"
            break
        logits = session.step(token)
        result.decode_steps += 1
        token = result.pending_token = sample_next(logits, rng, top_k=top_k, top_p=top_p, temperature=temperature)
        if result.decode_steps == 1:
            result.time_to_first_token = time.perf_counter() - t0
        if token in stop:
            result.stop_reason, result.stop_id = "stop_id", token
            break
        result.tokens.append(token)
        if on_token is not None:
            on_token(token)
    result.decode_seconds = time.perf_counter() - t1
    result.cache = session.cache
    return result
