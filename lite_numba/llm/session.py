"""A KV-cache model's prefill and decode signatures run over one set of cache buffers.

`KVSession` binds every cache (`kv_cache_k_<l>`, `kv_cache_v_<l>`) to one buffer shared by the prefill and decode
runners (SignatureRunner.bind): the graph updates the buffers where they live (DYNAMIC_UPDATE_SLICE in place), so a
step passes only its tokens, positions and mask, and copies none of the cache. `feed(tokens)` writes a prompt into
the cache in prefill chunks; `step(token)` decodes one token and returns its logits. The position advances with
every token; a position past the cache is refused before anything runs.

A `KVCache` is the buffers and the position they hold, tagged with the model they belong to: a session can start
from one (`KVSession(model, cache=...)`, `session.cache`), and a cache of another model or of the wrong shapes is
refused naming what differs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..api.interpreter import Interpreter, SignatureRunner
from .signatures import KVSpec, find_kv_signatures

__all__ = ["KVCache", "KVSession", "chunk_plan", "step_inputs"]


def step_inputs(spec: KVSpec, tokens: list[int], length: int, start: int) -> dict[str, np.ndarray]:
    """The inputs of a signature of `length` tokens but its caches, for `tokens` (padded with id 0) at positions
    start.. : tokens, input_pos, the causal mask (0 / -inf, or True / False) and export_hf's param_tensor."""
    ids = np.zeros((1, length), spec.token_dtype)
    ids[0, :len(tokens)] = tokens
    pos = np.arange(start, start + length, dtype=np.int32)
    ins = {"tokens": ids, "input_pos": pos}
    if spec.mask is not None and length == 1:  # a decode step's row, filled directly (half the time of the below)
        mask = np.zeros((1, 1, 1, spec.cache_length), np.bool_) if spec.mask == np.bool_ else np.full(
            (1, 1, 1, spec.cache_length), -np.inf, np.float32)
        mask[..., :start + 1] = True if mask.dtype == np.bool_ else 0.0
        ins["mask"] = mask
    elif spec.mask is not None:
        seen = np.arange(spec.cache_length)[None, :] <= pos[:, None]
        mask = seen if spec.mask == np.bool_ else np.where(seen, 0.0, -np.inf).astype(np.float32)
        ins["mask"] = mask.reshape(1, 1, length, spec.cache_length)
    if spec.param_tensor:
        ins["param_tensor"] = np.array([start, start + length, start + length, length, 0, 0, 0],
                                       np.int32).reshape(1, 1, 1, 7)
    return ins


def chunk_plan(spec: KVSpec, n: int, position: int) -> list[tuple[int, int]]:
    """How `n` tokens from `position` go into the cache: [(signature length, tokens it carries)]: the longest
    prefill the remaining tokens fill, else the shortest one that holds them, padded, when its positions fit in
    the cache (as LiteRT-LM pads; the pad's cache entries lie past the prompt, where decode overwrites them before
    any query sees them), else decode steps (length 1) — and a last single token is a decode step, which costs no
    more than any prefill."""
    plan = []
    while n > 0:
        fits = [t for t in spec.prefill if t <= n]
        pads = [t for t in spec.prefill if t > n > 1 and position + t <= spec.cache_length]
        length = max(fits) if fits else (min(pads) if pads else 1)
        count = min(length, n)
        plan.append((length, count))
        n -= count
        position += count
    return plan


@dataclass
class KVCache:
    """The caches of a session (name -> buffer), how many positions they hold, and the model_id they belong to."""

    buffers: dict[str, np.ndarray]
    position: int
    model: str

    def copy(self) -> KVCache:
        return KVCache({k: v.copy() for k, v in self.buffers.items()}, self.position, self.model)


def _aligned_zeros(shape, dtype) -> np.ndarray:
    dt = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    raw = np.zeros(nbytes + 64, np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw[start:start + nbytes].view(dt).reshape(shape)


class KVSession:
    """Prefill and decode of one KV-cache model over bound cache buffers (see the module docstring).

    `model`: an Interpreter, or a path / the bytes of a model (an Interpreter with `num_threads` is made).
    `cache_length`: the positions of the cache when the signatures do not tell it (llm.signatures). `cache`: a
    KVCache to continue from (its buffers are used, not copied)."""

    def __init__(self, model, *, num_threads: int = 1, cache: KVCache | None = None,
                 cache_length: int | None = None):
        if isinstance(model, Interpreter):
            self.interpreter = model
        elif isinstance(model, (str, os.PathLike)):
            self.interpreter = Interpreter(model_path=model, num_threads=num_threads)
        elif isinstance(model, (bytes, bytearray, memoryview)):
            self.interpreter = Interpreter(model_content=bytes(model), num_threads=num_threads)
        else:
            raise TypeError(f"model must be an Interpreter, a path or the model's bytes, got {type(model).__name__}")
        self.spec: KVSpec = find_kv_signatures(self.interpreter.model, cache_length=cache_length)
        spec = self.spec
        self.runners: dict[str, SignatureRunner] = {
            key: self.interpreter.get_signature_runner(key) for key in [*spec.prefill.values(), spec.decode]}
        self.position = 0
        self.buffers: dict[str, np.ndarray] = {}
        if cache is None:
            cache = KVCache({n: _aligned_zeros(shape, dt) for n, (dt, shape) in spec.caches.items()}, 0, spec.model_id)
        self.use_cache(cache)

    # --- the cache ----------------------------------------------------------------------------------------------------
    @property
    def cache(self) -> KVCache:
        """The session's KVCache (its buffers themselves: `.copy()` keeps a snapshot)."""
        return KVCache(dict(self.buffers), self.position, self.spec.model_id)

    def use_cache(self, cache: KVCache) -> None:
        """Continue from `cache` (its buffers become the session's); ValueError for a cache of another model, of
        other names, dtypes or shapes, or a position outside the cache."""
        spec = self.spec
        if not isinstance(cache, KVCache):
            raise TypeError(f"cache must be a KVCache, got {type(cache).__name__}")
        if cache.model != spec.model_id:
            raise ValueError(f"this cache belongs to another model (model_id {cache.model}); this model's is "
                             f"{spec.model_id}")
        if set(cache.buffers) != set(spec.caches):
            raise ValueError(f"the cache holds {sorted(cache.buffers)}; this model's caches are {sorted(spec.caches)}")
        for name, (dt, shape) in spec.caches.items():
            b = cache.buffers[name]
            if not isinstance(b, np.ndarray) or b.dtype != dt or b.shape != shape:
                got = f"{b.dtype.name}{list(b.shape)}" if isinstance(b, np.ndarray) else type(b).__name__
                raise ValueError(f"cache {name!r} is {got}; the model's is {np.dtype(dt).name}{list(shape)}")
        if not 0 <= cache.position <= spec.cache_length:
            raise ValueError(f"cache position {cache.position} is outside the cache (0..{spec.cache_length})")
        for runner in self.runners.values():
            for name, b in cache.buffers.items():
                runner.bind(name, b)
        self.buffers = dict(cache.buffers)
        self.position = int(cache.position)

    def reset(self) -> None:
        """Start again at position 0 (the buffers are zeroed)."""
        for b in self.buffers.values():
            b[...] = 0
        self.position = 0

    # --- running ------------------------------------------------------------------------------------------------------
    def _check_room(self, n: int) -> None:
        if n < 0 or self.position + n > self.spec.cache_length:
            raise ValueError(f"positions {self.position}..{self.position + n - 1} are past the cache: it holds "
                             f"{self.spec.cache_length} positions and {self.position} are used")

    def feed(self, tokens, cancel=None) -> int:
        """Write `tokens` into the cache from the current position without computing logits, in the chunks of
        `chunk_plan`: prefill signatures, decode steps for what no prefill fits. Returns the tokens fed (fewer when
        `cancel()` became true between chunks)."""
        tokens = [int(t) for t in tokens]
        self._check_room(len(tokens))
        done = 0
        for length, count in chunk_plan(self.spec, len(tokens), self.position):
            if cancel is not None and cancel():
                break
            if length == 1:
                self.step(tokens[done])
            else:
                self.runners[self.spec.prefill[length]](**step_inputs(self.spec, tokens[done:done + count], length,
                                                                      self.position))
                self.position += count
            done += count
        return done

    def step(self, token: int) -> np.ndarray:
        """Decode `token` at the current position; returns its logits (float32 [vocab], the caller's own)."""
        self._check_room(1)
        out = self.runners[self.spec.decode](**step_inputs(self.spec, [int(token)], 1, self.position))
        self.position += 1
        return out[self.spec.logits].reshape(-1)

    def copies(self) -> dict[str, int]:
        """Bytes the last decode step copied (SignatureRunner.last_copies: into the graph, out of it, and caches
        the graph wrote to storage of their own instead of in place), and under 'cache' those of the caches."""
        runner = self.runners[self.spec.decode]
        stats = dict(runner.last_copies)
        stats["cache"] = sum(runner.last_copies_by_name.get(n, 0) for n in self.spec.caches)
        return stats
