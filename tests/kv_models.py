"""Small KV-cache decoder models made with ModelBuilder, shaped like litert-torch's exports (docs/design/llm.md):
signatures `prefill_<T>` and `decode` over the same weights, the caches `kv_cache_k_<l>` / `kv_cache_v_<l>` an input
and an output of both, updated by DYNAMIC_UPDATE_SLICE at `input_pos[0]` and read back by a softmax attention.

- form "generative" (litert-torch's generative API): the causal mask is computed in the graph from `input_pos`,
  both signatures return `logits`;
- form "hf" (export_hf): a float `mask` input [1, 1, T, S] (0 where a key may be seen, -inf elsewhere) is added to
  the scores, and the prefill signature returns the caches only; "hf_bool": the same with a bool mask (True where
  seen: export_hf's use_bool_mask), which selects the scores.

Random weights, seeded; tokens are int32 ids below `vocab`.
"""

from __future__ import annotations

import numpy as np

from lite_numba.builder import ModelBuilder


def _layer_weights(rng: np.random.Generator, hidden: int) -> list[np.ndarray]:
    scale = 1.0 / np.sqrt(hidden)
    return [(rng.standard_normal((hidden, hidden)) * scale).astype(np.float32) for _ in range(4)]


def kv_model(form: str = "generative", *, vocab: int = 48, hidden: int = 16, cache: int = 48, prefill: int = 8,
             layers: int = 2, seed: int = 0, extra_prefill: tuple[int, ...] = (), cache_dtype=np.float32) -> bytes:
    """The model's bytes (see the module docstring). `extra_prefill`: more prefill lengths (prefill_<T> each)."""
    assert form in ("generative", "hf", "hf_bool")
    mask_dtype = np.bool_ if form == "hf_bool" else np.float32
    form = "hf" if form == "hf_bool" else form
    rng = np.random.default_rng(seed)
    emb = (rng.standard_normal((vocab, hidden)) * 0.5).astype(np.float32)
    weights = [_layer_weights(rng, hidden) for _ in range(layers)]
    w_out = (rng.standard_normal((vocab, hidden)) / np.sqrt(hidden)).astype(np.float32)
    b = ModelBuilder("kv-cache test decoder")
    lengths = [prefill, *extra_prefill]
    for k, t_len in enumerate([*lengths, 1]):
        sg = b.main if k == 0 else b.add_subgraph()
        key = "decode" if k == len(lengths) else f"prefill_{t_len}"
        ins, outs = {}, {}
        ins["tokens"] = sg.add_input(f"{key}_tokens", np.int32, [1, t_len])
        ins["input_pos"] = sg.add_input(f"{key}_input_pos", np.int32, [t_len])
        if form == "hf":
            ins["mask"] = sg.add_input(f"{key}_mask", mask_dtype, [1, 1, t_len, cache])
        caches = {}
        for layer in range(layers):
            for kind in "kv":
                name = f"kv_cache_{kind}_{layer}"
                caches[name] = ins[name] = sg.add_input(f"{key}_{name}", cache_dtype, [1, cache, hidden])
        x = sg.add_tensor("x0", np.float32, [1, t_len, hidden])
        sg.add_op("GATHER", [sg.add_const("embedding", emb), ins["tokens"]], [x], {"axis": 0})
        pos0 = sg.add_tensor("pos0", np.int32, [1])
        sg.add_op("SLICE", [ins["input_pos"], sg.add_const("b0", np.array([0], np.int32)),
                            sg.add_const("s1", np.array([1], np.int32))], [pos0])
        zero = sg.add_const("zero", np.array([0], np.int32))
        start = sg.add_tensor("start", np.int32, [3])
        sg.add_op("CONCATENATION", [zero, pos0, zero], [start], {"axis": 0})
        if form == "hf":
            bias = sg.add_tensor("mask3", mask_dtype, [1, t_len, cache])
            sg.add_op("RESHAPE", [ins["mask"], sg.add_const("mshape", np.array([1, t_len, cache], np.int32))], [bias])
        else:
            qpos = sg.add_tensor("qpos", np.int32, [1, t_len, 1])
            sg.add_op("RESHAPE", [ins["input_pos"], sg.add_const("qshape", np.array([1, t_len, 1], np.int32))],
                      [qpos])
            seen = sg.add_tensor("seen", np.bool_, [1, t_len, cache])
            sg.add_op("LESS_EQUAL", [sg.add_const("keys", np.arange(cache, dtype=np.int32).reshape(1, 1, cache)),
                                     qpos], [seen])
        for layer, (wq, wk, wv, wo) in enumerate(weights):
            proj = {}
            for tag, w in (("q", wq), ("k", wk), ("v", wv)):
                proj[tag] = sg.add_tensor(f"{tag}{layer}", np.float32, [1, t_len, hidden])
                sg.add_op("FULLY_CONNECTED", [x, sg.add_const(f"w{tag}{layer}", w), -1], [proj[tag]],
                          {"keep_num_dims": True})
            updated = {}
            for kind in "kv":
                name = f"kv_cache_{kind}_{layer}"
                new = proj[kind]
                if cache_dtype != np.float32:
                    new = sg.add_tensor(f"{kind}{layer}_cast", cache_dtype, [1, t_len, hidden])
                    sg.add_op("CAST", [proj[kind]], [new])
                updated[kind] = outs[name] = sg.add_tensor(f"{key}_{name}_out", cache_dtype, [1, cache, hidden])
                sg.add_op("DYNAMIC_UPDATE_SLICE", [caches[name], new, start], [updated[kind]])
                if cache_dtype != np.float32:
                    wide = sg.add_tensor(f"{kind}{layer}_wide", np.float32, [1, cache, hidden])
                    sg.add_op("CAST", [updated[kind]], [wide])
                    updated[kind] = wide
            scores = sg.add_tensor(f"scores{layer}", np.float32, [1, t_len, cache])
            sg.add_op("BATCH_MATMUL", [proj["q"], updated["k"]], [scores], {"adj_y": True})
            masked = sg.add_tensor(f"masked{layer}", np.float32, [1, t_len, cache])
            if form == "hf" and mask_dtype == np.float32:
                sg.add_op("ADD", [scores, bias], [masked])
            elif form == "hf":
                sg.add_op("SELECT_V2", [bias, scores, sg.add_const(f"neg{layer}", np.array(-1e9, np.float32))],
                          [masked])
            else:
                sg.add_op("SELECT_V2", [seen, scores, sg.add_const(f"neg{layer}", np.array(-1e9, np.float32))],
                          [masked])
            probs = sg.add_tensor(f"probs{layer}", np.float32, [1, t_len, cache])
            sg.add_op("SOFTMAX", [masked], [probs], {"beta": 1.0})
            att = sg.add_tensor(f"att{layer}", np.float32, [1, t_len, hidden])
            sg.add_op("BATCH_MATMUL", [probs, updated["v"]], [att])
            o = sg.add_tensor(f"o{layer}", np.float32, [1, t_len, hidden])
            sg.add_op("FULLY_CONNECTED", [att, sg.add_const(f"wo{layer}", wo), -1], [o], {"keep_num_dims": True})
            nxt = sg.add_tensor(f"x{layer + 1}", np.float32, [1, t_len, hidden])
            sg.add_op("ADD", [x, o], [nxt])
            x = nxt
        if form == "generative" or key == "decode":
            outs["logits"] = sg.add_tensor(f"{key}_logits", np.float32, [1, t_len, vocab])
            sg.add_op("FULLY_CONNECTED", [x, sg.add_const("w_out", w_out), -1], [outs["logits"]],
                      {"keep_num_dims": True})
        for t in outs.values():
            sg.mark_output(t)
        b.add_signature(key, ins, outs, subgraph=sg)
    return b.build()


def causal_mask(positions, cache: int, dtype=np.float32) -> np.ndarray:
    """export_hf's mask for queries at `positions`: [1, 1, T, cache], float 0 where key <= query and -inf elsewhere,
    or bool True where key <= query."""
    positions = np.asarray(positions).reshape(-1)
    seen = np.arange(cache)[None, :] <= positions[:, None]
    if np.dtype(dtype) == np.bool_:
        return seen[None, None]
    return np.where(seen, 0.0, -np.inf).astype(np.float32)[None, None]


def official_tokens(model: bytes, prompt, steps: int, prefill: int) -> list[int]:
    """Greedy tokens from the official runtime's signature runners, fed as a Python user does (each step's caches
    passed back as the next step's inputs): prefill_<prefill> on prompt[:-1] (which must be `prefill` long), then
    decode from prompt[-1] at position len(prompt) - 1."""
    from lite_numba.testing import official_interpreter

    it = official_interpreter(model)
    pre, dec = it.get_signature_runner(f"prefill_{prefill}"), it.get_signature_runner("decode")
    details = pre.get_input_details()
    ins = {name: np.zeros(d["shape"], d["dtype"]) for name, d in details.items()}
    prompt = [int(t) for t in prompt]
    assert len(prompt) == prefill + 1
    pos = np.arange(prefill, dtype=np.int32)
    ins["tokens"] = np.array([prompt[:-1]], np.int32)
    ins["input_pos"] = pos
    cache = ins["kv_cache_k_0"].shape[1]
    if "mask" in ins:
        ins["mask"] = causal_mask(pos, cache, ins["mask"].dtype)
    out = pre(**ins)
    caches = {k: v for k, v in out.items() if k.startswith("kv_cache")}
    token, tokens = prompt[-1], []
    for step in range(steps):
        p = prefill + step
        step_in = dict(caches, tokens=np.array([[token]], np.int32), input_pos=np.array([p], np.int32))
        if "mask" in details:
            step_in["mask"] = causal_mask([p], cache, details["mask"]["dtype"])
        out = dec(**step_in)
        token = int(np.argmax(out["logits"].reshape(-1)))
        tokens.append(token)
        caches = {k: v for k, v in out.items() if k.startswith("kv_cache")}
    return tokens
