"""Attention graphs as litert-torch's export_hf writes them (BATCH_MATMUL with the K cache, ADD of a mask,
SOFTMAX, BATCH_MATMUL with the V cache), built with lite_numba.builder for tests/test_masked_attention.py."""

from __future__ import annotations

import numpy as np

from lite_numba.builder import ModelBuilder


def attention_model(*, kv=2, rows=24, s=64, h=16, n2=None, adj_y=True, adj_y2=True, mask_first=False, group=1,
                    beta=1.0, observe=None, mask_shape=None) -> bytes:
    """q [1, kv, rows * group, h], k cache [1, kv, s, h] (adj_y) or [1, kv, h, s], mask [1, 1, rows, s] (concatenated
    `group` times along the rows for grouped query heads, as Qwen3's export), v cache [1, kv, n2, s] (adj_y2) or
    [1, kv, s, n2] -> out [1, kv, rows * group, n2]. observe: "scores", "sum" or "probs" is also a graph output.
    mask_shape: another mask shape broadcasting to the scores (no concatenation then)."""
    n2 = n2 or h
    m = rows * group
    b = ModelBuilder()
    q = b.add_input("q", np.float32, [1, kv, m, h])
    k = b.add_input("k", np.float32, [1, kv, s, h] if adj_y else [1, kv, h, s])
    mask = b.add_input("mask", np.float32, list(mask_shape or [1, 1, rows, s]))
    v = b.add_input("v", np.float32, [1, kv, n2, s] if adj_y2 else [1, kv, s, n2])
    if group > 1:
        mm = b.add_tensor("mask_g", np.float32, [1, 1, m, s])
        b.add_op("CONCATENATION", [mask] * group, [mm], options={"axis": 2})
        mask = mm
    scores = b.add_tensor("scores", np.float32, [1, kv, m, s])
    b.add_op("BATCH_MATMUL", [q, k], [scores], options={"adj_x": False, "adj_y": adj_y})
    total = b.add_tensor("sum", np.float32, [1, kv, m, s])
    b.add_op("ADD", [mask, scores] if mask_first else [scores, mask], [total])
    probs = b.add_tensor("probs", np.float32, [1, kv, m, s])
    b.add_op("SOFTMAX", [total], [probs], options={"beta": beta})
    out = b.add_tensor("out", np.float32, [1, kv, m, n2])
    b.add_op("BATCH_MATMUL", [probs, v], [out], options={"adj_x": False, "adj_y": adj_y2})
    b.mark_output(out)
    if observe:
        b.mark_output({"scores": scores, "sum": total, "probs": probs}[observe])
    return b.build()


def causal_mask(rows: int, s: int, start: int) -> np.ndarray:
    """[1, 1, rows, s]: 0 where key position <= start + row, -inf elsewhere."""
    pos = start + np.arange(rows)[:, None]
    return np.where(np.arange(s)[None, :] <= pos, 0.0, -np.inf).astype(np.float32)[None, None]
