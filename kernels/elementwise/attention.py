"""Fused kernels of the attention composites litert-torch emits (STABLEHLO_COMPOSITE, kernels/registry.py
COMPOSITES): odml.scaled_dot_product_attention (the generative API) and odml.sdpa_transposed (export_hf's
use_sdpa_composite), float32.

Both are softmax(q k^T + mask) v per head, grouped-query heads sharing their KV head (head n reads KV head
n // (heads / KV heads), as the decompositions' repeat_interleave / reshape do). They compute what the decomposition
computes, in the same float32 steps: the query and key scaled by sqrt(scale) each (SDPA), each dot product summed in
order over the head dimension from zero and each output summed in order over the keys (BATCH_MATMUL's order), the
mask added (SDPA) or selected against -10000 (sdpa_transposed), and the rows normalized by SOFTMAX's own function,
so the results equal the decomposition's bit for bit (tests/test_stablehlo.py), without its transposes, broadcast
copies of the KV cache and intermediate tensors.
"""

from __future__ import annotations

import math

import numpy as np
from lite_numba.kernels.elementwise.softmax import softmax_f32
from numba import njit

from lite_numba.ops import PrepareContext, kernel

MASK_FILL = -10000.0  # litert-torch's fill value for masked-out logits (sdpa_transposed)


@njit(cache=True, nogil=True, error_model="numpy")
def pack_keys(k, kst, c, kt, dims):
    """kt[b, kv, h, s] = k[b, kv, s, h] * c (element offsets of k by strides over (b, kv, s, h)): the keys scaled
    once and laid out so that a query's logits are computed across s (as BATCH_MATMUL packs its right-hand side).
    Unsigned offsets and row slices: Numba then adds no negative-index checks and the loops vectorize (the whole
    cache is packed at every step: 4.2 -> 0.3 us for 64 positions x 2 heads x 16)."""
    B, S, H, KV = dims[0], dims[3], dims[4], dims[6]
    cf = np.float32(c)
    ks = np.uint64(kst[2])
    for b in range(B):
        for kv in range(KV):
            for h in range(H):
                base = ((b * KV + kv) * H + h) * S
                src = np.uint64(b * kst[0] + kv * kst[1] + h * kst[3])
                dst = kt[base:base + S]
                for s in range(S):
                    dst[s] = k[src + np.uint64(s) * ks] * cf


@njit(cache=True, nogil=True, error_model="numpy")
def pack_values(v, vst, vp, dims):
    """vp[b, kv, s, h] = v[b, kv, s, h] (offsets of v by strides over (b, kv, s, h)); rows of h copied as slices
    when h is contiguous."""
    B, S, H, KV = dims[0], dims[3], dims[4], dims[6]
    hs = np.uint64(vst[3])
    for b in range(B):
        for kv in range(KV):
            for s in range(S):
                base = ((b * KV + kv) * S + s) * H
                src = b * vst[0] + kv * vst[1] + s * vst[2]
                dst = vp[base:base + H]
                if vst[3] == 1:
                    row = v[src:src + H]
                    for h in range(H):
                        dst[h] = row[h]
                else:
                    for h in range(H):
                        dst[h] = v[np.uint64(src) + np.uint64(h) * hs]


@njit(cache=True, nogil=True, error_model="numpy")
def attention_logits(q, qst, kt, c, mask, mst, select, logits, dims):
    """logits[b, n, t, s] = sum over h, in order from zero, of (q[b, n, t, h] * c) * kt[b, n // G, h, s] (the keys
    already scaled), then + mask (select == 0) or kept where mask != 0 else MASK_FILL (select == 1). Offsets of q by
    strides over (b, n, t, h), of the mask over (b, n, t, s) (0 where it broadcasts); dims = (B, N, T, S, H, G, KV).
    Each logit is summed in BATCH_MATMUL's order; the loops run across s, which vectorizes."""
    B, N, T, S, H, G, KV = dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6]
    fill = np.float32(MASK_FILL)
    cf = np.float32(c)
    qh, ms = qst[3], mst[3]  # (locals and slices: the inner loops then vectorize)
    for b in range(B):
        for n in range(N):
            kbase = (b * KV + n // G) * H * S
            for t in range(T):
                qo = b * qst[0] + n * qst[1] + t * qst[2]
                row = ((b * N + n) * T + t) * S
                dst = logits[row:row + S]
                for s in range(S):
                    dst[s] = np.float32(0.0)
                for h in range(H):
                    a = q[qo + h * qh] * cf
                    src = kt[kbase + h * S:kbase + h * S + S]
                    for s in range(S):
                        dst[s] += a * src[s]
                mo = b * mst[0] + n * mst[1] + t * mst[2]
                for s in range(S):
                    acc = dst[s] + np.float32(0.0)  # BATCH_MATMUL adds its (zero) bias
                    m = mask[mo + s * ms]
                    if select:
                        dst[s] = acc if m != 0 else fill
                    else:
                        dst[s] = acc + m


@njit(cache=True, nogil=True, error_model="numpy")
def attention_values(p, v, vst, out, ost, dims):
    """out[b, n, t, h] = sum over s, in order from zero, of p[b, n, t, s] * v[b, n // G, s, h] (offsets of v by
    strides vst over (b, kv, s, h), its h contiguous: the cache read where it is, or packed; of out by strides over
    (b, n, t, h), its h contiguous); the loops run across h."""
    B, N, T, S, H, G = dims[0], dims[1], dims[2], dims[3], dims[4], dims[5]
    for b in range(B):
        for n in range(N):
            vbase = b * vst[0] + (n // G) * vst[1]
            for t in range(T):
                row = ((b * N + n) * T + t) * S
                oo = b * ost[0] + n * ost[1] + t * ost[2]
                dst = out[oo:oo + H]
                for h in range(H):
                    dst[h] = np.float32(0.0)
                for s in range(S):
                    a = p[row + s]
                    src = v[vbase + s * vst[2]:vbase + s * vst[2] + H]
                    for h in range(H):
                        dst[h] += a * src[h]
                for h in range(H):
                    dst[h] = dst[h] + np.float32(0.0)


def _strides(shape: tuple[int, ...], order: tuple[int, ...]) -> np.ndarray:
    """Element strides of a C-contiguous tensor of `shape`, listed in the axis order `order`."""
    st = [1] * len(shape)
    for a in range(len(shape) - 2, -1, -1):
        st[a] = st[a + 1] * shape[a + 1]
    return np.array([st[a] for a in order], np.int64)


def _mask_strides(ctx: PrepareContext, mask, B: int, N: int, T: int, S: int) -> np.ndarray:
    """Strides over (b, n, t, s) of a mask that broadcasts (numpy rules) to [B, N, T, S]."""
    shape = (1,) * (4 - mask.ndim) + tuple(mask.shape) if mask.ndim <= 4 else None
    ctx.check(shape is not None and all(m in (1, want) for m, want in zip(shape, (B, N, T, S))),
              f"mask of shape {list(mask.shape)} does not broadcast to the logits [{B}, {N}, {T}, {S}]")
    st = _strides(shape, (0, 1, 2, 3))
    return np.array([0 if shape[a] == 1 else st[a] for a in range(4)], np.int64)


def _schedule(ctx: PrepareContext, q, qst, k, kst, v, vst, c, mask, mst, select, out, ost, dims) -> None:
    B, N, T, S, H, G, KV = (int(d) for d in dims)
    rows = B * N * T
    if rows == 0 or S == 0 or H == 0:
        return
    logits, probs = ctx.temp((rows * S,), np.float32), ctx.temp((rows * S,), np.float32)
    kt = ctx.temp((B * KV * H * S,), np.float32)
    flat = lambda t: ctx.view(t, (t.size,), np.uint8 if t.dtype == np.bool_ else t.dtype)  # noqa: E731
    ctx.call(pack_keys, flat(k), kst, c, kt, dims)
    vf = flat(v)
    if vst[3] != 1:  # the values' h not contiguous (sdpa_transposed's [B, KV, H, S] cache): packed [b, kv, s, h]
        vf = ctx.temp((B * KV * S * H,), np.float32)
        ctx.call(pack_values, flat(v), vst, vf, dims)
        vst = np.array([KV * S * H, S * H, H, 1], np.int64)
    ctx.call(attention_logits, flat(q), qst, kt, c, flat(mask), mst, select, logits, dims)
    ctx.call(softmax_f32, ctx.view(logits, (rows, S)), ctx.view(probs, (rows, S)), 1.0)
    ctx.call(attention_values, probs, vf, vst, flat(out), ost, dims)


def _heads(ctx: PrepareContext, n_heads: int, kv_heads: int) -> int:
    ctx.check(kv_heads > 0 and n_heads % kv_heads == 0,
              f"{n_heads} query heads do not group over {kv_heads} KV heads")
    return n_heads // kv_heads


def _sdpa_accepts(attributes: dict, specs: list) -> bool:
    return (set(attributes) <= {"scale"} and isinstance(attributes.get("scale"), (int, float))
            and len(specs) == 4 and all(s is not None and s.dtype == np.float32 for s in specs))


@kernel("odml.scaled_dot_product_attention")
def SDPA(ctx: PrepareContext) -> None:
    """The odml.scaled_dot_product_attention composite {scale} with a float mask: q [B, T, N, H], k and v [B, S, KV,
    H], mask broadcasting to [B, N, T, S] -> [B, T, N, H]."""
    ctx.check_num(inputs=4, outputs=1)
    q, k, v, mask = (ctx.input(i) for i in range(4))
    for t in (q, k, v, mask):
        ctx.check_dtype(t, np.float32)
    ctx.check(q.ndim == 4 and k.ndim == 4 and v.shape == k.shape,
              f"q {list(q.shape)}, k {list(k.shape)}, v {list(v.shape)}: expected [B, T, N, H] and two [B, S, KV, H]")
    B, T, N, H = q.shape
    S, KV = k.shape[1], k.shape[2]
    ctx.check(k.shape[0] == B and k.shape[3] == H, f"k {list(k.shape)} does not match q {list(q.shape)}")
    G = _heads(ctx, N, KV)
    out = ctx.set_output(0, q.shape, np.float32)
    c = float(np.float32(math.sqrt(float(ctx.options["attributes"]["scale"]))))
    bthn = (0, 2, 1, 3)  # (b, n, t, h) axes of [B, T, N, H]
    _schedule(ctx, q, _strides(q.shape, bthn), k, _strides(k.shape, bthn), v, _strides(v.shape, bthn), c, mask,
              _mask_strides(ctx, mask, B, N, T, S), 0, out, _strides(q.shape, bthn),
              np.array([B, N, T, S, H, G, KV], np.int64))


SDPA.meta["accepts"] = _sdpa_accepts


def _sdpa_transposed_accepts(attributes: dict, specs: list) -> bool:
    known = {"from_cache_update", "is_causal", "k_ts_idx", "v_ts_idx"}
    return (set(attributes) <= known and attributes.get("k_ts_idx", 2) == 2 and attributes.get("v_ts_idx", 3) == 3
            and len(specs) in (4, 5) and all(s is not None for s in specs[:4])
            and [s.dtype for s in specs[:4]] == [np.float32, np.float32, np.float32, np.bool_])


@kernel("odml.sdpa_transposed")
def SDPA_TRANSPOSED(ctx: PrepareContext) -> None:
    """The odml.sdpa_transposed composite (k_ts_idx 2, v_ts_idx 3): q [B, N, T, H] (already scaled), the key cache
    [B, KV, S, H], the value cache transposed [B, KV, H, S], a bool mask broadcasting to [B, 1, T, S] (true:
    attend; false: the logit becomes -10000) and the runtime parameters (unused here) -> [B, N, T, H]."""
    ctx.check_num(inputs=(4, 5), outputs=1)
    q, k, v, mask = (ctx.input(i) for i in range(4))
    for t in (q, k, v):
        ctx.check_dtype(t, np.float32)
    ctx.check_dtype(mask, np.bool_)
    ctx.check(q.ndim == 4 and k.ndim == 4 and v.ndim == 4,
              f"q {list(q.shape)}, k {list(k.shape)}, v {list(v.shape)}: expected rank 4")
    B, N, T, H = q.shape
    KV, S = k.shape[1], k.shape[2]
    ctx.check(k.shape == (B, KV, S, H) and v.shape == (B, KV, H, S),
              f"k {list(k.shape)} / v {list(v.shape)} do not match q {list(q.shape)} as [B, KV, S, H] / [B, KV, H, S]")
    G = _heads(ctx, N, KV)
    ctx.check(mask.ndim <= 4 and (mask.ndim < 3 or mask.shape[-3] == 1),
              f"mask of shape {list(mask.shape)}: expected one row of keys per query, [B, 1, T, S]")
    out = ctx.set_output(0, q.shape, np.float32)
    plain = (0, 1, 2, 3)
    _schedule(ctx, q, _strides(q.shape, plain), k, _strides(k.shape, plain), v, _strides(v.shape, (0, 1, 3, 2)),
              1.0, mask, _mask_strides(ctx, mask, B, N, T, S), 1, out, _strides(q.shape, plain),
              np.array([B, N, T, S, H, G, KV], np.int64))


SDPA_TRANSPOSED.meta["accepts"] = _sdpa_transposed_accepts

__all__ = ["SDPA", "SDPA_TRANSPOSED", "attention_logits", "attention_values", "pack_keys", "pack_values"]
