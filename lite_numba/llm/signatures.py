"""The prefill and decode signatures of a KV-cache model, found from their names as litert-torch writes them.

litert-torch 0.10 exports a decoder in two forms (read from its source: generative/utilities/converter.py,
generative/export_hf/core/exportable_module.py):

- the generative API: signatures `prefill_<T>` (one per prefill length) and `decode`, inputs `tokens` int32
  [1, T], `input_pos` int32 [T], `kv_cache_k_<l>` / `kv_cache_v_<l>` per layer (layout BTNH, or BNTH / BNHT when
  exported transposed) and, with `mask_as_input`, a float `mask` [1, 1, T, S]; outputs the updated caches under
  the same names and `logits` [1, T, V];
- export_hf: the same names, plus a `mask` [1, 1, T, S] (float: 0 where a key may be seen, -inf elsewhere, its
  `causal_mask_value`; bool with `use_bool_mask`: True where seen), `param_tensor` int32 [1, 1, 1, 7] with the GPU
  composites ([start, start + T, start + T, T, 0, 0, 0]); the prefill signatures return the caches only, `logits`
  comes from `decode`. A sliding-window `local_mask` (ring buffers) is not supported here.

A cache is any input whose name is also an output of the signature with the same dtype and shape: every signature
must have the same ones. The cache length S is the mask's last dimension when there is a mask, else the position
axis of the K cache (axis 1 in BTNH, where K and V have one shape; axis 2 in the transposed layout), unless given.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np

from ..format.plan import ModelPlan

__all__ = ["KVSpec", "find_kv_signatures", "model_id"]

_PREFILL = re.compile(r"^prefill_(\d+)$")
KNOWN_INPUTS = ("tokens", "input_pos", "mask", "param_tensor")


@dataclass(frozen=True)
class KVSpec:
    """What generate() needs to know of a KV-cache model (find_kv_signatures)."""

    prefill: dict[int, str]  # prefill length -> signature key
    decode: str  # the decode signature's key
    caches: dict[str, tuple[np.dtype, tuple[int, ...]]]  # name -> (dtype, shape), inputs and outputs of every signature
    cache_length: int  # positions the caches hold
    logits: str  # the decode signature's logits output
    token_dtype: np.dtype
    mask: np.dtype | None  # the mask input's dtype (float32 or bool), None without one
    param_tensor: bool  # export_hf's GPU-composite parameters input
    model_id: str  # model_id() of the model: caches of another model are refused

    @property
    def prefill_lengths(self) -> list[int]:
        return sorted(self.prefill)


def model_id(model: ModelPlan) -> str:
    """A short fingerprint of a model: its signatures, tensor names, types and shapes, and the first 256 bytes of
    each of its first 64 constants per subgraph (weights differ between models of one architecture), hashed."""
    h = hashlib.blake2b(digest_size=12)
    for s in model.signatures:
        h.update(repr((s.key, s.subgraph_index, sorted(s.inputs.items()), sorted(s.outputs.items()))).encode())
    for sg in model.subgraphs:
        constants = 0
        for t in sg.tensors:
            h.update(repr((t.name, t.type_name, t.shape)).encode())
            if t.data is not None and constants < 64:
                constants += 1
                h.update(np.ascontiguousarray(t.data).reshape(-1).view(np.uint8)[:256].tobytes())
    return h.hexdigest()


def _signature_tensors(model: ModelPlan, key: str) -> tuple[dict, dict]:
    s = next(s for s in model.signatures if s.key == key)
    sg = model.subgraphs[s.subgraph_index]
    spec = lambda i: (sg.tensors[i].dtype, tuple(sg.tensors[i].shape))  # noqa: E731
    return {n: spec(i) for n, i in s.inputs.items()}, {n: spec(i) for n, i in s.outputs.items()}


def find_kv_signatures(model: ModelPlan, *, cache_length: int | None = None) -> KVSpec:
    """The KVSpec of a model with `prefill_<T>` and `decode` signatures (litert-torch's names), or ValueError
    saying what is missing or unexpected."""
    keys = [s.key for s in model.signatures]
    prefill = {int(m.group(1)): k for k in keys if (m := _PREFILL.match(k))}
    if "decode" not in keys:
        raise ValueError(f"not a KV-cache model: no 'decode' signature (signatures: {keys}); generate() needs "
                         f"litert-torch's 'prefill_<T>' and 'decode'")
    caches = None
    token_dtype, mask, param = None, None, False
    for key in [*prefill.values(), "decode"]:
        ins, outs = _signature_tensors(model, key)
        states = {n: v for n, v in ins.items() if outs.get(n) == v}
        if caches is None:
            caches = states
        elif states != caches:
            raise ValueError(f"signature {key!r} carries other caches than the others: {sorted(states)} vs "
                             f"{sorted(caches)} (names, dtypes and shapes must agree)")
        t_len = 1 if key == "decode" else int(key.split("_")[1])
        missing = [n for n in ("tokens", "input_pos") if n not in ins]
        if missing:
            raise ValueError(f"signature {key!r} has no {' or '.join(repr(n) for n in missing)} input (inputs: "
                             f"{sorted(ins)})")
        unknown = sorted(n for n in ins if n not in states and n not in KNOWN_INPUTS)
        if unknown:
            raise ValueError(f"signature {key!r} has inputs generate() does not know how to fill: {unknown} (it fills "
                             f"tokens, input_pos, mask, param_tensor and the caches)")
        tok, pos = ins["tokens"], ins["input_pos"]
        if tok[1] != (1, t_len) or tok[0].kind not in "iu" or pos[1] != (t_len,) or pos[0].kind not in "iu":
            raise ValueError(f"signature {key!r}: tokens {tok[0].name}{list(tok[1])} and input_pos "
                             f"{pos[0].name}{list(pos[1])}, expected integers [1, {t_len}] and [{t_len}]")
        token_dtype = tok[0]
        if "mask" in ins:
            dt, shape = ins["mask"]
            if len(shape) != 4 or shape[:3] != (1, 1, t_len) or dt not in (np.dtype(np.float32), np.dtype(np.bool_)):
                raise ValueError(f"signature {key!r}: mask {dt.name}{list(shape)}, expected float32 or bool "
                                 f"[1, 1, {t_len}, cache length]")
            if cache_length is None:
                cache_length = shape[3]
            mask = dt
        param = param or "param_tensor" in ins
    if not caches:
        raise ValueError("no KV cache: no input of the signatures is also an output of the same name")
    if cache_length is None:
        k = [v[1] for n, v in caches.items() if "_k_" in n or n.endswith("_k")]
        v = [v[1] for n, v in caches.items() if "_v_" in n or n.endswith("_v")]
        if not k or len(k[0]) < 3:
            raise ValueError(f"cannot tell the cache length of caches {sorted(caches)}: pass cache_length")
        cache_length = k[0][1] if not v or v[0] == k[0] else k[0][2]
    ins, outs = _signature_tensors(model, "decode")
    logits = "logits" if "logits" in outs else None
    if logits is None:
        rest = [n for n in outs if n not in caches]
        if len(rest) != 1:
            raise ValueError(f"the decode signature has no 'logits' output (outputs: {sorted(outs)})")
        logits = rest[0]
    too_long = [t for t in prefill if t > cache_length]
    if too_long:
        raise ValueError(f"prefill signatures {too_long} are longer than the cache ({cache_length} positions)")
    return KVSpec(prefill, "decode", caches, int(cache_length), logits, np.dtype(token_dtype), mask, param,
                  model_id(model))
