"""MASKED_ATTENTION (lite_numba/runtime/fusion.py fuse_masked_attention, kernels/linear/masked_attention.py):
BATCH_MATMUL -> ADD(mask) -> SOFTMAX -> BATCH_MATMUL computed over the key positions the mask leaves, bit for bit
the unfused graph's (our kernels, experimental_preserve_all_tensors) and the official builtin kernels', on every ISA
level: causal masks at several positions, grouped query heads (the mask concatenated, as Qwen3's export), both
layouts of each cache, the mask as ADD's first input, rows masked everywhere, inf / NaN / huge values planted in a
skipped cache row or the queries (the kernel must fall back), finite mask fills; the key span the kernel used is read
back, so a test fails when nothing was skipped where it should be."""

from __future__ import annotations

import numpy as np
import pytest
from masked_attention_models import attention_model, causal_mask

from lite_numba.testing import require_official, run_official, run_ours

require_official()

KV, ROWS, S, H = 2, 24, 64, 16
F32_MAX = np.finfo(np.float32).max


def _inputs(rng, *, kv=KV, rows=ROWS, s=S, h=H, n2=None, group=1, adj_y=True, adj_y2=True, start=0, **_):
    n2 = n2 or h
    q = rng.standard_normal((1, kv, rows * group, h)).astype(np.float32)
    k = rng.standard_normal((1, kv, s, h) if adj_y else (1, kv, h, s)).astype(np.float32)
    v = rng.standard_normal((1, kv, n2, s) if adj_y2 else (1, kv, s, n2)).astype(np.float32)
    return [q, k, causal_mask(rows, s, start), v]


def _fused(data: bytes, inputs, **kw):
    """(output, the key span J the MASKED_ATTENTION node used) of one run of our interpreter."""
    from lite_numba import Interpreter

    it = Interpreter(model_content=data, **kw)
    it.allocate_tensors()
    rt = it.runtime.main
    assert [n.op_name for n in rt.plan.nodes if "fused_into" not in n.options].count("MASKED_ATTENTION") == 1
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    out = it.get_tensor(it.get_output_details()[0]["index"])
    state = [t for t in rt._temps if tuple(t.shape) == (2,) and t.dtype == np.int64]  # the kernel's state temp
    assert len(state) == 1
    off = rt.offsets[state[0].index]
    return out, int(rt.arena[off:off + 8].view(np.int64)[0])


def _check(data: bytes, inputs, want_j: int, **kw) -> None:
    ours, j = _fused(data, inputs, **kw)
    (kept,) = run_ours(data, inputs, experimental_preserve_all_tensors=True)  # no rewrite
    (ref,) = run_official(data, inputs)
    assert ours.tobytes() == kept.tobytes(), f"{np.sum(ours != kept)} values differ from the unfused graph's"
    assert ours.tobytes() == ref.tobytes(), f"{np.sum(ours != ref)} values differ from the official runtime's"
    assert j == want_j, f"the kernel used {j} key columns, expected {want_j}"


def _span(last: int, s: int = S) -> int:
    """The span the kernel takes when column `last` is the last one unmasked: rounded up to 16, at most s."""
    return min(s, max(16, -(-(last + 1) // 16) * 16))


CASES = [
    ({}, 0), ({}, 7), ({}, 20), ({}, S - ROWS), ({"group": 2}, 5), ({"adj_y": False, "adj_y2": False}, 30),
    ({"adj_y": False}, 3), ({"adj_y2": False}, 11), ({"mask_first": True}, 9), ({"beta": 0.5}, 1),
    ({"n2": 24, "kv": 3, "s": 128, "group": 3}, 60), ({"kv": 1, "h": 40, "s": 96}, 0),
]


@pytest.mark.parametrize("kw, start", CASES, ids=[f"{i}" for i in range(len(CASES))])
def test_fused_bit_for_bit(isa_level, kw, start):
    rng = np.random.default_rng(start + len(kw))
    data = attention_model(**kw)
    kw = {"rows": ROWS, "s": S, **kw}
    _check(data, _inputs(rng, start=start, **kw), _span(start + kw["rows"] - 1, kw["s"]))


def _planted(where: str, value: float):
    rng = np.random.default_rng(7)
    q, k, mask, v = _inputs(rng, start=4)  # columns 28..63 masked: J = 32
    if where == "k":
        k[0, 1, 50, 3] = value
    elif where == "v":
        v[0, 0, 5, 40] = value
    elif where == "q":
        q[0, 0, 2, 1] = value
    return [q, k, mask, v]


@pytest.mark.parametrize("where, value, skips", [
    ("k", np.nan, False), ("k", np.inf, False), ("k", -np.inf, False), ("k", 1e38, False), ("k", 1e3, True),
    ("v", np.nan, False), ("v", np.inf, False), ("v", 1e38, True), ("q", np.inf, False), ("q", np.nan, False)])
def test_planted_values_fall_back(isa_level, where, value, skips):
    """A non-finite (or score-overflowing) value in a skipped K row, a non-finite one in a skipped V row or in the
    queries: the unfused result (NaN rows included, bit for bit), by the whole computation."""
    _check(attention_model(), _planted(where, value), 32 if skips else S)


def test_rows_masked_everywhere(isa_level):
    """ADD clamps -inf to -FLT_MAX, so the official SOFTMAX spreads a row masked everywhere evenly over all S
    columns: the kernel must not skip then."""
    q, k, mask, v = _inputs(np.random.default_rng(3), start=2)
    mask[0, 0, 5, :] = -np.inf
    _check(attention_model(), [q, k, mask, v], S)
    mask[0, 0, :, :] = -np.inf
    _check(attention_model(), [q, k, mask, v], S)


@pytest.mark.parametrize("fill, skips", [(-1e9, False), (-10000.0, False), (-F32_MAX, True), (-2.0 ** 101, True)])
def test_finite_mask_fills(isa_level, fill, skips):
    """Columns filled with a finite value are skipped only at or below -2**100 (the bound a skipped score is
    checked against); -FLT_MAX is what ADD stores for -inf plus a window (Gemma 3's sliding-window layers)."""
    q, k, mask, v = _inputs(np.random.default_rng(5), start=10)
    mask = np.where(np.isinf(mask), np.float32(fill), mask).astype(np.float32)
    _check(attention_model(), [q, k, mask, v], _span(10 + ROWS - 1) if skips else S)


def test_two_threads():
    """The parallel GEMM drivers give the serial bytes (prefill-like shape, enough work to split)."""
    kw = {"kv": 4, "rows": 64, "s": 256, "h": 64, "group": 2}
    data = attention_model(**kw)
    inputs = _inputs(np.random.default_rng(11), start=40, **kw)
    one, j1 = _fused(data, inputs)
    two, j2 = _fused(data, inputs, num_threads=2)
    (ref,) = run_official(data, inputs)
    assert j1 == j2 == _span(40 + 63, 256)
    assert one.tobytes() == two.tobytes() == ref.tobytes()


@pytest.mark.parametrize("kw", [{"observe": "scores"}, {"observe": "sum"}, {"observe": "probs"}, {"rows": 16},
                                {"s": 72}, {"s": 16}])
def test_not_rewritten(kw):
    """No MASKED_ATTENTION when an intermediate is a graph output, the query rows are few (decode steps: the skip
    does not pay there, docs/design/llm.md), or the keys are not a multiple of 16 above 16; results unchanged."""
    from lite_numba import Interpreter

    data = attention_model(**kw)
    it = Interpreter(model_content=data)
    it.allocate_tensors()
    assert "MASKED_ATTENTION" not in [n.op_name for n in it.runtime.main.plan.nodes]
    inputs = _inputs(np.random.default_rng(2), start=1, **kw)
    ours, ref = run_ours(data, inputs), run_official(data, inputs)
    assert all(o.tobytes() == r.tobytes() for o, r in zip(ours, ref))


@pytest.mark.parametrize("scale, skips", [(1e6, True), (1e14, False), (1e19, False)])
@pytest.mark.parametrize("fill", [-np.inf, -F32_MAX, -2.0 ** 100])
def test_large_scores(scale, skips, fill):
    """Queries and keys scaled so the scores reach ~1e13, ~1e29 (the skipped scores' bound then too close to the
    mask fill: everything computed) and overflow (NaN rows): the unfused bytes either way."""
    q, k, mask, v = _inputs(np.random.default_rng(1), start=10)
    q, k = q * np.float32(scale), k * np.float32(scale)
    mask = np.where(np.isinf(mask), np.float32(fill), mask).astype(np.float32)
    _check(attention_model(), [q, k, mask, v], _span(10 + ROWS - 1) if skips else S)


@pytest.mark.parametrize("shape", [(1, 1, 1, S), (1, KV, ROWS, S), (KV, 1, S), (S,)])
def test_mask_shapes(shape):
    """Masks broadcasting to the scores otherwise: one row for every query (a decode step's, over more rows), one
    per KV head, fewer dimensions."""
    rng = np.random.default_rng(13)
    q, k, _, v = _inputs(rng)
    mask = np.zeros(shape, np.float32)
    mask[..., 37:] = -np.inf
    if len(shape) == 4 and shape[1] == KV:
        mask[:, 1, :, 20:] = -np.inf
    _check(attention_model(mask_shape=shape), [q, k, mask, v], 48)
