"""Makes the real-size LLM shapes of issue 39 (and their .litertlm bundles) and the small quantization-recipe models.

Two parts, both deterministic (seeded random weights, fixed configs written below), both offline (nothing is
downloaded: the Hugging Face checkpoints are built from their public config.json values), never run by CI:

1. Real size (skipped with --no-large): random-weight checkpoints of the exact shapes of **Gemma 3 270M**
   (`google/gemma-3-270m`'s config.json) and **Qwen3 0.6B** (`Qwen/Qwen3-0.6B`'s), exported by litert-torch's
   `export_hf` with its defaults (odml composites, transposed external KV cache, `dynamic_wi8_afp32`) with signatures
   `prefill_128` and `decode` and a cache of 1,024 positions, bundled as `.litertlm` (export_hf's
   bundle_litert_lm, i.e. the `litert-lm-builder` package) with a synthetic `tokenizer.json`: the real tokenizers
   cannot be fetched, so each is a word-level `tokenizers` vocabulary of exactly the config's vocab size (`w<id>`
   for every id, the model's special tokens at their real ids: Gemma <pad> 0, <eos> 1, <bos> 2, <unk> 3,
   <start_of_turn> 105, <end_of_turn> 106; Qwen3 <|endoftext|> 151643, <|im_start|> 151644, <|im_end|> 151645) and
   a minimal chat template of the model's form. A prompt "w1000 w1001 ..." is one token per word. Outputs go to
   `--out` (default ~/.cache/lite-numba/llm-models/, hundreds of MB each, outside the repository):

       <out>/gemma3_270m.tflite      <out>/gemma3_270m.litertlm      <out>/gemma3_270m/{config.json,tokenizer.json}
       <out>/qwen3_0_6b.tflite       <out>/qwen3_0_6b.litertlm       <out>/qwen3_0_6b/{...}
       <out>/manifest.json           (versions, configs, sizes, op inventory, signatures of each)

   The float export (GBs) is deleted unless --keep-float. The two are exported one after the other, never at once:
   on a 2-vCPU Xeon, Gemma 3 270M took 1.5 min and 5.6 GiB peak RSS (.tflite 267 MiB, .litertlm 268 MiB), Qwen3
   0.6B 3.8 min and 8.8 GiB (.tflite 583 MiB, .litertlm 584 MiB).

2. Small (`--small-out DIR`, e.g. tests/data/llm_quant): the quantization recipes ai-edge-quantizer 0.10 ships for
   Gemma-4-style LiteRT-LM models, applied to one small Gemma-3-like decoder (SMALL below: 3 layers, 2 sliding
   + 1 global, hidden 128, 4 heads of 32, 1 KV head, GELU-tanh MLP 256, vocab 512, tied embeddings; export_hf,
   prefill_16 / decode, cache 64), each model about 1 MB at most, with oracles of the official runtime (see
   write_small_readme for the folder's README.md: recipes, op inventory, tensor types, disagreement figures).

Run it from the torch venv (see scripts/make_litert_torch_models.py for its setup; USE_HUB_KERNELS=0 is set here):

    /work/venv-torch/bin/python scripts/make_llm_models.py [--out DIR] [--only gemma3_270m,qwen3_0_6b]
    /work/venv-torch/bin/python scripts/make_llm_models.py --no-large --small-out tests/data/llm_quant

Determinism: the same versions give byte-identical .tflite / .npz files (PYTHONHASHSEED is set to 0: the converter
orders some constants by hashing); a .litertlm differs between runs only in the `uuid` and `creation_timestamp`
that litert-lm-builder writes into it (37 bytes).

Config values (GEMMA3_270M, QWEN3_06B below): the public config.json files' as published, written from knowledge
of them (no download). Fields worth naming: Gemma 3 270M hidden 640, 18 layers (every 6th global, sliding window
512), 4 heads of 256, 1 KV head, query_pre_attn_scalar 256, MLP 2048, vocab 262,144, RoPE 1e6 global / 1e4
local, eos [1, 106] (its generation_config's; config.json says 1); Qwen3 0.6B hidden 1024, 28 layers, 16 heads
of 128, 8 KV heads, MLP 3072, vocab 151,936, RoPE 1e6, tied embeddings. transformers 5 keeps rope_theta /
rope_local_base_freq as rope_parameters: both forms are written. Weights: every matrix N(0, 0.02) from a
torch.Generator seeded with SEED + the index of the parameter in name order, norm weights U(-0.1, 0.1) for Gemma
(applied as 1 + w) and U(0.9, 1.1) for Qwen3.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

if __name__ == "__main__" and os.environ.get("PYTHONHASHSEED") != "0":
    # The converter orders some constants (the two RoPE tables of a sliding / global model) by hashing: fixed.
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_litert_torch_models as mltm  # noqa: E402  (sets up the tensorflow stand-in and the offline flags)
import torch  # noqa: E402

SEED = 39
PREFILL = 128
CACHE = 1024
DEFAULT_OUT = Path("~/.cache/lite-numba/llm-models").expanduser()

_SLIDING_6 = ["sliding_attention"] * 5 + ["full_attention"]

# google/gemma-3-270m config.json (Gemma3ForCausalLM, model_type gemma3_text). transformers 5 keeps rope_theta /
# rope_local_base_freq as rope_parameters per layer type; written here in both forms.
GEMMA3_270M = {
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
    "vocab_size": 262144, "hidden_size": 640, "intermediate_size": 2048, "num_hidden_layers": 18,
    "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "query_pre_attn_scalar": 256,
    "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 32768, "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "rope_scaling": None, "sliding_window": 512,
    "layer_types": _SLIDING_6 * 3, "_sliding_window_pattern": 6, "attention_bias": False, "attention_dropout": 0.0,
    "attn_logit_softcapping": None, "final_logit_softcapping": None, "use_bidirectional_attention": False,
    "initializer_range": 0.02, "tie_word_embeddings": True, "pad_token_id": 0, "eos_token_id": [1, 106],
    "bos_token_id": 2, "use_cache": True, "torch_dtype": "float32",
    "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                        "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}},
}
# Qwen/Qwen3-0.6B config.json (Qwen3ForCausalLM).
QWEN3_06B = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
    "vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "hidden_act": "silu",
    "max_position_embeddings": 40960, "max_window_layers": 28, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
    "rope_scaling": None, "sliding_window": None, "use_sliding_window": False, "attention_bias": False,
    "attention_dropout": 0.0, "initializer_range": 0.02, "tie_word_embeddings": True, "bos_token_id": 151643,
    "eos_token_id": 151645, "use_cache": True, "torch_dtype": "float32",
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
}
GEMMA_SPECIAL = {0: "<pad>", 1: "<eos>", 2: "<bos>", 3: "<unk>", 105: "<start_of_turn>", 106: "<end_of_turn>"}
QWEN_SPECIAL = {151643: "<|endoftext|>", 151644: "<|im_start|>", 151645: "<|im_end|>"}
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' else 'user' }}\n"
    "{{ m['content'] }}<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
QWEN_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
LARGE = {
    "gemma3_270m": {"config": GEMMA3_270M, "special": GEMMA_SPECIAL, "template": GEMMA_TEMPLATE,
                    "tokens": {"bos": "<bos>", "eos": "<eos>", "pad": "<pad>", "unk": "<unk>"}, "gemma": True},
    "qwen3_0_6b": {"config": QWEN3_06B, "special": QWEN_SPECIAL, "template": QWEN_TEMPLATE,
                   "tokens": {"eos": "<|im_end|>", "pad": "<|endoftext|>", "unk": "<|endoftext|>"}, "gemma": False},
}


# ------------------------------------------------------------------------------------------------ checkpoints
def _hf_config(cfg: dict):
    import transformers

    cls = transformers.Gemma3TextConfig if cfg["model_type"] == "gemma3_text" else transformers.Qwen3Config
    kwargs = {k: v for k, v in cfg.items() if k not in ("model_type", "torch_dtype")}
    return cls(**kwargs)


def _fill_weights(model, gemma: bool, seed: int) -> None:
    """Seeded random weights, parameter by parameter in name order (independent of init order and of tying)."""
    with torch.no_grad():
        for i, (_, p) in enumerate(sorted(model.named_parameters(), key=lambda kv: kv[0])):
            g = torch.Generator().manual_seed(seed + i)
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
            elif gemma:
                p.copy_(torch.rand(p.shape, generator=g) * 0.2 - 0.1)
            else:
                p.copy_(torch.rand(p.shape, generator=g) * 0.2 + 0.9)


def _tokenizer(vocab_size: int, special: dict, tokens: dict, template: str):
    """Word level: `w<id>` for every id, the special tokens at their ids (one token per whitespace-split word)."""
    import transformers
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = {special.get(i, f"w{i}"): i for i in range(vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=tokens["unk"]))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in special.values()])
    kw = {f"{k}_token": v for k, v in tokens.items()}
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, **kw)
    fast.chat_template = template
    return fast


def make_checkpoint(name: str, folder: str, seed: int = SEED):
    """A random-weight Hugging Face checkpoint of the named shape, saved (float32) with its tokenizer to folder."""
    import transformers

    spec = LARGE[name]
    config = _hf_config(spec["config"])
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    _fill_weights(model, spec["gemma"], seed)
    model.generation_config.eos_token_id = spec["config"]["eos_token_id"]
    model.save_pretrained(folder)
    _tokenizer(config.vocab_size, spec["special"], spec["tokens"], spec["template"]).save_pretrained(folder)
    n = sum(p.numel() for p in model.parameters())
    del model
    return n


def export_large(name: str, out: Path, keep_float: bool) -> dict:
    from litert_torch.generative.export_hf import export as hf_export

    t0 = time.time()
    work = out / f"{name}.export"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    ckpt = out / name
    ckpt.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as folder:
        params = make_checkpoint(name, folder)
        for f in ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"):
            if Path(folder, f).exists():
                shutil.copy(Path(folder, f), ckpt / f)
        print(f"{name}: checkpoint of {params:,} parameters in {time.time() - t0:.0f} s", flush=True)
        hf_export.export(
            model=folder, output_dir=str(work), prefill_lengths=[PREFILL], cache_length=CACHE,
            quantization_recipe="dynamic_wi8_afp32", bundle_litert_lm=True, keep_temporary_files=True,
        )
    files = sorted(os.listdir(work))
    print(f"{name}: export done in {time.time() - t0:.0f} s: {files}", flush=True)
    quantized = work / "model_quantized.tflite"
    shutil.move(quantized, out / f"{name}.tflite")
    bundles = [f for f in files if f.endswith(".litertlm")]
    shutil.move(work / bundles[0], out / f"{name}.litertlm")
    if keep_float and (work / "model.tflite").exists():
        shutil.move(work / "model.tflite", out / f"{name}_f32.tflite")
    shutil.rmtree(work)
    model = (out / f"{name}.tflite").read_bytes()
    inv = mltm.inventory(model)
    return {"parameters": params, "seconds": round(time.time() - t0), "tflite_bytes": len(model),
            "litertlm_bytes": (out / f"{name}.litertlm").stat().st_size, "config": LARGE[name]["config"],
            "export": {"prefill_lengths": [PREFILL], "cache_length": CACHE, "quantization_recipe": "dynamic_wi8_afp32",
                       "bundle_litert_lm": True},
            "signatures": inv["signatures"], "ops": inv["ops"], "composites": inv["composites"],
            "quantized_tensors": inv["quantized_tensors"]}


# ---------------------------------------------------------------------------------------------- small models
# A small Gemma-3-like decoder (the recipes are ai-edge-quantizer's for Gemma 4 LiteRT-LM models, whose text decoder
# has Gemma 3's layout plus per-layer embeddings).
SMALL = {
    "vocab_size": 512, "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32, "query_pre_attn_scalar": 32,
    "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 256, "rms_norm_eps": 1e-6,
    "sliding_window": 32, "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
    "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                        "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}},
    "tie_word_embeddings": True, "pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2,
    "attn_logit_softcapping": None, "final_logit_softcapping": None,
}
SMALL_PREFILL = mltm.PREFILL  # 16 (mltm's runner helpers use its PREFILL / CACHE)
SMALL_CACHE = mltm.CACHE  # 64
SMALL_STEPS = 32
# The 8-bit rule of the gemma4 recipes names Gemma 4's per-layer-embedding projections (regex 'per_layer'), which a
# Gemma 3 layout has not: here it is pointed at the MLP down projections, so that the models really mix int4 / int8.
INT8_REGEX = "down_proj"


def _gemma4_recipe(kind: str, algorithm: str | None = None) -> list:
    """ai-edge-quantizer's gemma4_mixed48{,_hr,_b32,_b64}: its 'tf_lite_embedder' and 'tf_lite_prefill_decode'
    sections merged (the small model has the embedding inside), the int8 rule's regex set to INT8_REGEX, and for
    kind 'hr' the 4-bit rules' algorithm set to `algorithm` (DECOMPOSED_HADAMARD_ROTATION as shipped, or
    HADAMARD_ROTATION: the custom op aeq.hadamard_rotation)."""
    from ai_edge_quantizer import recipe

    four = {"c": recipe.dynamic_wi4c_afp32, "hr": recipe.dynamic_wi4c_afp32, "b32": recipe.dynamic_wi4b32_afp32,
            "b64": recipe.dynamic_wi4b64_afp32}[kind]
    kw = {"algorithm_key": algorithm} if algorithm else {}
    ops = recipe.TFLOperationName
    return (four(operation_name=ops.EMBEDDING_LOOKUP, **kw) + four(operation_name=ops.FULLY_CONNECTED, **kw)
            + recipe.dynamic_wi8c_afp32(regex=INT8_REGEX, operation_name=ops.FULLY_CONNECTED))


def small_recipes() -> dict:
    """stem suffix -> (recipe list, description)."""
    from ai_edge_quantizer import recipe

    alg = recipe.AlgorithmName
    return {
        "mixed48": (_gemma4_recipe("c"), "gemma4_mixed48: int4 channelwise embedding + FC, int8 channelwise"
                    f" FC matching '{INT8_REGEX}'"),
        "mixed48_b32": (_gemma4_recipe("b32"), "gemma4_mixed48_b32: int4 blockwise 32 embedding + FC, int8"
                        " channelwise FC"),
        "mixed48_b64": (_gemma4_recipe("b64"), "gemma4_mixed48_b64: int4 blockwise 64 embedding + FC, int8"
                        " channelwise FC"),
        "mixed48_hr": (_gemma4_recipe("hr", alg.DECOMPOSED_HADAMARD_ROTATION),
                       "gemma4_mixed48_hr: int4 channelwise with Hadamard rotation, decomposed form (as shipped)"),
        "mixed48_hr_custom": (_gemma4_recipe("hr", alg.HADAMARD_ROTATION),
                              "gemma4_mixed48_hr with algorithm HADAMARD_ROTATION: the custom op"
                              " aeq.hadamard_rotation"),
        "dynamic_wi2c_afp32": (recipe.dynamic_wi2c_afp32(), "dynamic_wi2c_afp32: INT2 channelwise, all supported"
                               " ops"),
        "dynamic_wi2b64_afp32": (recipe.dynamic_wi2b64_afp32(), "dynamic_wi2b64_afp32: INT2 blockwise 64"),
    }


def make_small_checkpoint(folder: str) -> None:
    import transformers

    config = transformers.Gemma3TextConfig(**SMALL)
    torch.manual_seed(SEED)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    with torch.no_grad():
        for i, (name, p) in enumerate(sorted(model.named_parameters(), key=lambda kv: kv[0])):
            g = torch.Generator().manual_seed(SEED + 1000 + i)
            if p.dim() >= 2:
                std = 0.5 if "embed" in name else p.shape[-1] ** -0.5
                p.copy_(torch.randn(p.shape, generator=g) * std)
            else:
                p.copy_(torch.rand(p.shape, generator=g) * 0.5 - 0.25)
    model.save_pretrained(folder)
    special = {0: "<pad>", 1: "<eos>", 2: "<bos>", 3: "<unk>"}
    _tokenizer(SMALL["vocab_size"], special, {"bos": "<bos>", "eos": "<eos>", "pad": "<pad>", "unk": "<unk>"},
               GEMMA_TEMPLATE).save_pretrained(folder)


def quantize_with(model: bytes, rcp: list) -> bytes:
    from ai_edge_quantizer import quantizer

    with mltm._quiet():
        qt = quantizer.Quantizer(bytearray(model))
        qt.load_quantization_recipe(rcp)
        out = bytes(qt.quantize(None).quantized_model)
    if out == model:
        raise RuntimeError("the quantizer wrote the model back unchanged")
    return out


def _interpreter(model: bytes, kind: str):
    from ai_edge_litert import interpreter as tfl

    resolver = {"builtin": tfl.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
                "ref": tfl.OpResolverType.BUILTIN_REF, "xnnpack": tfl.OpResolverType.AUTO}[kind]
    return tfl.Interpreter(model_content=model, experimental_op_resolver_type=resolver, num_threads=1)


def run_teacher_forced(model: bytes, kind: str, prompt: np.ndarray, fed: np.ndarray) -> dict:
    """prefill_16 on prompt (positions 0..15, caches zero), then one decode step per token of `fed` (position 16 + i,
    the caches the previous call returned): the same inputs for every runtime (no greedy divergence)."""
    it = _interpreter(model, kind)
    pre = it.get_signature_runner(f"prefill_{SMALL_PREFILL}")
    dec = it.get_signature_runner("decode")
    details = pre.get_input_details()
    ins = {name: np.zeros(d["shape"], d["dtype"]) for name, d in details.items()}
    pos = np.arange(SMALL_PREFILL, dtype=np.int32)
    ins["tokens"] = prompt[None].astype(np.int32)
    ins["input_pos"] = pos
    if "mask" in ins:
        ins["mask"] = mltm._mask_row(pos)
    out = pre(**ins)
    res = {"prefill_in": ins, "prefill_out": {k: v.copy() for k, v in out.items()}}
    caches = {k: v.copy() for k, v in out.items() if k.startswith("kv_cache")}
    logits = []
    for step, token in enumerate(fed):
        p = SMALL_PREFILL + step
        step_in = dict(caches, tokens=np.array([[token]], np.int32), input_pos=np.array([p], np.int32))
        if "mask" in details:
            step_in["mask"] = mltm._mask_row(np.array([p]))
        out = dec(**step_in)
        logits.append(out["logits"].reshape(-1).copy())
        caches = {k: v.copy() for k, v in out.items() if k.startswith("kv_cache")}
    res["decode_logits"] = np.stack(logits)
    res["final_caches"] = caches
    return res


def _rel(a: np.ndarray, ref: np.ndarray) -> float:
    """max |a - ref| / max |ref| over the whole array."""
    return float(np.max(np.abs(a.astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-30))


def _buffer_span(model: bytes, index: int, buf) -> tuple[int, int]:
    """(start, length) in the file of buffer `index`'s bytes: its inline data vector, or its offset / size."""
    from ai_edge_litert import schema_py_generated as s

    if buf.data is None:
        return int(buf.offset or 0), int(buf.size or 0)
    tab = s.Model.GetRootAs(model, 0).Buffers(index)._tab
    o = tab.Offset(4)  # Buffer.data, the table's first field
    return tab.Vector(o), tab.VectorLen(o)


def low_values(model: bytes, replace: bool = False) -> tuple[dict, bytes]:
    """Counts of the most negative value of INT4 (-8) and INT2 (-2) constant tensors, and (replace) the model with
    each such value set to -7 / -1 (the other end of a symmetric range). Packed little end first (2 or 4 a byte);
    the buffers are inline or (the quantizer's output) at an offset past the flatbuffer."""
    from ai_edge_litert import schema_py_generated as s

    m = s.ModelT.InitFromObj(s.Model.GetRootAs(model, 0))
    counts = {"INT4 -8": 0, "INT4 values": 0, "INT2 -2": 0, "INT2 values": 0}
    raw = np.frombuffer(model, np.uint8).copy()
    done = set()
    for sg in m.subgraphs:
        for t in sg.tensors:
            buf = m.buffers[t.buffer]
            if t.type not in (s.TensorType.INT4, s.TensorType.INT2) or t.buffer in done:
                continue
            start, size = _buffer_span(model, t.buffer, buf)
            if not size:
                continue
            done.add(t.buffer)
            data = raw[start: start + size]
            bits = 4 if t.type == s.TensorType.INT4 else 2
            per = 8 // bits
            n = int(np.prod(t.shape))
            fields = np.stack([(data >> (bits * k)) & ((1 << bits) - 1) for k in range(per)], axis=1).reshape(-1)
            low = 1 << (bits - 1)  # the two's-complement pattern of -8 / -2
            key = "INT4 -8" if bits == 4 else "INT2 -2"
            hit = fields[:n] == low
            counts[key] += int(np.sum(hit))
            counts[key.split()[0] + " values"] += n
            if replace and hit.any():
                fields[:n][hit] = low + 1
                fields = fields.reshape(-1, per)
                packed = np.zeros(len(data), np.uint8)
                for k in range(per):
                    packed |= (fields[:, k] << (bits * k)).astype(np.uint8)
                raw[start: start + size] = packed
    return counts, raw.tobytes() if replace else model


def weight_digest(model: bytes) -> list:
    """Sorted digests of the constant INT2 / INT4 / INT8 buffers (equal for two models with the same weights)."""
    import hashlib

    from ai_edge_litert import schema_py_generated as s

    m = s.ModelT.InitFromObj(s.Model.GetRootAs(model, 0))
    kinds = (s.TensorType.INT2, s.TensorType.INT4, s.TensorType.INT8)
    found = set()
    for sg in m.subgraphs:
        for t in sg.tensors:
            if t.type in kinds:
                start, size = _buffer_span(model, t.buffer, m.buffers[t.buffer])
                if size:
                    found.add(hashlib.sha256(model[start: start + size]).hexdigest())
    return sorted(found)


def dequantized_twin(qmodel: bytes, f32: bytes) -> bytes:
    """The float model with each weight the quantized model holds as INT2 / INT4 (channelwise or blockwise) replaced
    by its dequantized value (tensors matched by subgraph and name): what a correct weight-only kernel computes."""
    from ai_edge_litert import schema_py_generated as s

    q = s.ModelT.InitFromObj(s.Model.GetRootAs(qmodel, 0))
    f = s.ModelT.InitFromObj(s.Model.GetRootAs(f32, 0))
    raw = np.frombuffer(f32, np.uint8).copy()
    qraw = np.frombuffer(qmodel, np.uint8)
    for si, sg in enumerate(q.subgraphs):
        by_name = {t.name: t for t in f.subgraphs[si].tensors}
        for t in sg.tensors:
            if t.type not in (s.TensorType.INT2, s.TensorType.INT4):
                continue
            start, size = _buffer_span(qmodel, t.buffer, q.buffers[t.buffer])
            bits = 2 if t.type == s.TensorType.INT2 else 4
            per, n = 8 // bits, int(np.prod(t.shape))
            data = qraw[start: start + size]
            fields = np.stack([(data >> (bits * k)) & ((1 << bits) - 1) for k in range(per)], axis=1).reshape(-1)[:n]
            vals = np.where(fields >= 1 << (bits - 1), fields.astype(np.int32) - (1 << bits), fields)
            w = vals.reshape([int(v) for v in t.shape]).astype(np.float32)
            qp = t.quantization
            if qp.details is not None and qp.detailsType == s.QuantizationDetails.BlockwiseQuantization:
                st = sg.tensors[qp.details.scales]
                s0, s1 = _buffer_span(qmodel, st.buffer, q.buffers[st.buffer])
                scales = np.frombuffer(qmodel[s0: s0 + s1], np.float16).astype(np.float32).reshape(w.shape[0], -1)
                w = w * np.repeat(scales, qp.details.blockSize, axis=1)
            else:
                w = w * np.asarray(qp.scale, np.float32).reshape([-1] + [1] * (w.ndim - 1))
            ft = by_name[t.name]
            f0, fsize = _buffer_span(f32, ft.buffer, f.buffers[ft.buffer])
            if ft.type != s.TensorType.FLOAT32 or fsize != w.size * 4:
                raise ValueError(f"{t.name}: no float twin of the same shape")
            raw[f0: f0 + fsize] = np.frombuffer(w.astype("<f4").tobytes(), np.uint8)
    return raw.tobytes()


def custom_ops(model: bytes) -> list:
    """(custom code, decoded custom options, count) of every CUSTOM op."""
    import collections

    from ai_edge_litert import schema_py_generated as s
    from flatbuffers import flexbuffers

    m = s.ModelT.InitFromObj(s.Model.GetRootAs(model, 0))
    found = collections.Counter()
    for sg in m.subgraphs:
        for op in sg.operators:
            oc = m.operatorCodes[op.opcodeIndex]
            if max(oc.builtinCode, oc.deprecatedBuiltinCode) != s.BuiltinOperator.CUSTOM:
                continue
            opts = {}
            if op.customOptions is not None and len(op.customOptions):
                try:
                    opts = flexbuffers.Loads(bytes(np.asarray(op.customOptions, np.uint8)))
                except Exception as e:  # noqa: BLE001 - recorded, not fatal
                    opts = {"undecoded": f"{len(op.customOptions)} bytes ({type(e).__name__})"}
            opts = {k: (f"{len(v)} values" if isinstance(v, (list, bytes)) and len(v) > 8 else v)
                    for k, v in (opts.items() if isinstance(opts, dict) else [("value", opts)])}
            found[(oc.customCode.decode(), json.dumps(opts, sort_keys=True, default=str))] += 1
    return [[code, json.loads(opts), c] for (code, opts), c in sorted(found.items())]


def build_small(out: Path, only: list | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        make_small_checkpoint(folder)
        f32 = mltm.export_hf(folder, None)
    rs = np.random.RandomState(SEED)
    prompt = rs.randint(4, SMALL["vocab_size"], size=SMALL_PREFILL).astype(np.int32)
    fed = rs.randint(4, SMALL["vocab_size"], size=SMALL_STEPS).astype(np.int32)
    float_run = run_teacher_forced(f32, "builtin", prompt, fed)
    made, refs = {}, {}
    for suffix, (rcp, how) in small_recipes().items():
        stem = f"gemma3s_{suffix}"
        model = quantize_with(f32, rcp)
        refs[suffix] = model
        if only and stem not in only and suffix not in only:
            continue
        runs, errors = {}, {}
        for kind in ("builtin", "ref", "xnnpack"):
            try:
                runs[kind] = run_teacher_forced(model, kind, prompt, fed)
            except (RuntimeError, ValueError) as e:
                errors[kind] = str(e).split("\n")[0][:200]
        surrogate = None
        if "ref" not in runs and suffix == "mixed48_hr_custom":
            # BUILTIN_REF does not register aeq.hadamard_rotation: the reference figure is the decomposed model's
            # (the same recipe with DECOMPOSED_HADAMARD_ROTATION: the same quantized weights, the rotation as ops).
            twin = refs["mixed48_hr"]
            if weight_digest(twin) != weight_digest(model):
                raise RuntimeError(f"{stem}: its quantized weights differ from gemma3s_mixed48_hr's")
            runs["ref"] = run_teacher_forced(twin, "ref", prompt, fed)
            surrogate = "gemma3s_mixed48_hr"
        if "builtin" not in runs or "ref" not in runs:
            raise RuntimeError(f"{stem}: the official runtime fails: {errors}")
        b, r = runs["builtin"], runs["ref"]
        counts, _ = low_values(model)
        notes = {
            "rel builtin-ref decode_logits": _rel(b["decode_logits"], r["decode_logits"]),
            "rel builtin-ref final caches": max(_rel(b["final_caches"][k], r["final_caches"][k])
                                                for k in r["final_caches"]),
            "rel ref-float decode_logits": _rel(r["decode_logits"], float_run["decode_logits"]),
            "rel builtin-float decode_logits": _rel(b["decode_logits"], float_run["decode_logits"]),
            "argmax builtin==ref steps": int(np.sum(b["decode_logits"].argmax(1) == r["decode_logits"].argmax(1))),
            **counts,
        }
        if surrogate:
            notes["ref is the decomposed twin's (BUILTIN_REF lacks the custom op)"] = surrogate
        if "xnnpack" in runs:
            notes["rel xnnpack-ref decode_logits"] = _rel(runs["xnnpack"]["decode_logits"], r["decode_logits"])
            notes["rel xnnpack-builtin decode_logits"] = _rel(runs["xnnpack"]["decode_logits"], b["decode_logits"])
        else:
            notes["xnnpack"] = errors.get("xnnpack", "")
        if counts["INT4 -8"] or counts["INT2 -2"]:
            _, raised = low_values(refs["mixed48_hr"] if surrogate else model, replace=True)
            _, raised_self = low_values(model, replace=True)
            cb = run_teacher_forced(raised_self, "builtin", prompt, fed)
            cr = run_teacher_forced(raised, "ref", prompt, fed)
            notes["rel builtin-ref decode_logits, lowest value raised by one"] = _rel(cb["decode_logits"],
                                                                                     cr["decode_logits"])
            notes["rel ref(raised)-ref decode_logits"] = _rel(cr["decode_logits"], r["decode_logits"])
        if notes["rel builtin-float decode_logits"] >= 1.0 and not np.any(b["decode_logits"]):
            # ai-edge-litert 2.3.0's kernels (builtin and reference) output zeros for INT2 blockwise weights: the
            # oracle is then the float model with the dequantized weights (weight-only: activations unquantized).
            dq = run_teacher_forced(dequantized_twin(model, f32), "builtin", prompt, fed)
            runs["dequant"] = {"decode_logits": dq["decode_logits"], "prefill_out": dq["prefill_out"],
                               "final_caches": dq["final_caches"]}
            notes["official outputs"] = "all zero (builtin and ref)"
            notes["rel dequant-float decode_logits"] = _rel(dq["decode_logits"], float_run["decode_logits"])
        # The reference kernels are the oracle where they and the optimized ones disagree and the reference is the
        # nearer to the float model (INT4 -8); where the reference is the farther (blockwise weights: BUILTIN_REF's
        # FULLY_CONNECTED reads them wrongly), the optimized builtin kernels.
        disagree = notes["rel builtin-ref decode_logits"] > 1e-3
        nearer = notes["rel ref-float decode_logits"] < notes["rel builtin-float decode_logits"]
        expected = "dequant" if "dequant" in runs else "ref" if disagree and nearer else "builtin"
        arrays = {"prompt": prompt, "fed_tokens": fed, "float_decode_logits": float_run["decode_logits"]}
        for k, v in b["prefill_in"].items():
            if not k.startswith("kv_cache"):
                arrays[f"prefill_in_{k}"] = v
        for kind, run in runs.items():
            arrays[f"{kind}_decode_logits"] = run["decode_logits"]
            for k, v in run["prefill_out"].items():
                arrays[f"{kind}_prefill_out_{k}"] = v
            for k, v in run["final_caches"].items():
                arrays[f"{kind}_final_{k}"] = v
        meta = {
            "kind": "generation (teacher-forced)", "how": f"export_hf float32 + ai-edge-quantizer: {how}",
            "recipe": suffix, "expected": expected, "prefill_signature": f"prefill_{SMALL_PREFILL}",
            "decode_signature": "decode", "prefill_len": SMALL_PREFILL, "cache_len": SMALL_CACHE,
            "decode_steps": SMALL_STEPS,
            "protocol": "prefill prompt (16 tokens) at positions 0..15 with zero caches (inputs: prefill_in_*), then"
                        " decode step i feeds fed_tokens[i] at position 16 + i with the caches returned by the"
                        " previous call; mask input: 0 where key position <= query position, -inf elsewhere",
            "oracles": "builtin_* = BUILTIN_WITHOUT_DEFAULT_DELEGATES, ref_* = BUILTIN_REF (for the custom-op"
                       " model: its decomposed twin's, BUILTIN_REF lacking aeq.hadamard_rotation), xnnpack_* = AUTO"
                       " (absent where XNNPACK refuses), dequant_* = the float model with the dequantized weights"
                       " (only where the official kernels output zeros), all 1 thread; float_decode_logits = the"
                       " float32 export",
            "notes": notes, "errors": errors,
        }
        mltm._save(out, stem, model, arrays, meta)
        made[stem] = (meta, mltm.inventory(model), custom_ops(model))
        print(f"{stem}: {len(model)} bytes; " + ", ".join(
            f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in notes.items()), flush=True)
    write_small_readme(out, made)


def write_small_readme(out: Path, made: dict) -> None:
    lines = [
        "# Small models of ai-edge-quantizer's Gemma-4 LiteRT-LM recipes and INT2 recipes (issue 39)",
        "",
        "Made by `scripts/make_llm_models.py --no-large --small-out tests/data/llm_quant` (its docstring says how",
        "to run it); CI never runs it. Versions: " + ", ".join(f"{k} {v}" for k, v in versions().items() if v) + ".",
        "`manifest.json` holds the inventory below in machine-readable form.",
        "",
        "The model: a small Gemma-3-like decoder with random seeded weights (`SMALL` in the script: vocab 512,",
        "hidden 128, 3 layers (sliding window 32, sliding, global), 4 query heads of 32, 1 KV head, GELU-tanh MLP",
        "256, q/k RMSNorm, tied embeddings), exported in float32 by litert-torch's `export_hf` (defaults: odml",
        "composites, transposed external KV cache; `prefill_16` and `decode`, cache 64, a float mask input), then",
        "quantized with ai-edge-quantizer. The gemma4 recipes (`recipe.gemma4_mixed48*`) are per LiteRT-LM",
        "section; the model has its embedding inside, so each is its `tf_lite_embedder` and",
        "`tf_lite_prefill_decode` rules together, and its 8-bit rule (regex `per_layer`: Gemma 4's per-layer",
        f"embedding projections, absent here) is given the regex `{INT8_REGEX}` so that the models mix int4 / int8.",
        "The Hadamard recipe as shipped (`dynamic_wi4c_hr_afp32`) uses the algorithm DECOMPOSED_HADAMARD_ROTATION",
        "(the rotation as builtin ops); `_hr_custom` is the same with HADAMARD_ROTATION, which emits the custom op",
        "`aeq.hadamard_rotation` (registered by the official runtime).",
        "",
        "Each `<stem>.npz` (`meta`: a JSON string) holds a teacher-forced generation: `prompt` (16 ids) prefilled at",
        "positions 0..15 with zero caches (`prefill_in_*`: tokens, input_pos, mask), then 32 decode steps feeding",
        "`fed_tokens[i]` at position 16 + i with the caches the previous call returned. For each runtime",
        "(`builtin` = BUILTIN_WITHOUT_DEFAULT_DELEGATES, `ref` = BUILTIN_REF, the reference kernels, `xnnpack` =",
        "the default resolver where XNNPACK accepts the model; 1 thread): `<rt>_decode_logits` [32, 512],",
        "`<rt>_prefill_out_kv_cache_*` and `<rt>_final_kv_cache_*` (caches after prefill and after the last step).",
        "`float_decode_logits`: the float32 export (builtin). `meta.expected` names the oracle: `ref` where the",
        "optimized builtin kernels and the reference kernels disagree and the reference is the nearer to the float",
        "model (INT4 value -8 on the rotated models, see below), `dequant` where the official kernels output zeros",
        "(INT2 blockwise: `dequant_*` is the float export with the dequantized INT2 weights, i.e. weight-only",
        "arithmetic: a dynamic-range kernel's int8 activations make it differ by about the int8 rounding), else",
        "`builtin`. BUILTIN_REF reads blockwise INT4 weights wrongly (outputs ~1e31): there `builtin` is the oracle.",
        "For the custom-op model BUILTIN_REF refuses `aeq.hadamard_rotation` (unresolved custom op): its `ref_*`",
        "arrays are those of the decomposed model `gemma3s_mixed48_hr`, whose quantized weights are the same bytes.",
        "",
        "Relative figures are max |a - b| / max |b| over the 32 x 512 decode logits. `-8 raised`: the same model",
        "with every INT4 -8 set to -7 (INT2: -2 to -1), builtin vs ref.",
        "",
        "| model | bytes | recipe | builtin vs ref | xnnpack vs ref | INT4 -8 / INT4 values | INT2 -2 / values |"
        " -8 raised: builtin vs ref | ref vs float | oracle |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]

    def g(v):
        return f"{v:.3g}" if isinstance(v, float) else ("-" if v is None else str(v))

    for stem, (meta, inv, _) in made.items():
        n = meta["notes"]
        xr = n.get("rel xnnpack-ref decode_logits", "refused")
        lines.append(
            f"| {stem} | {inv['bytes']} | {meta['recipe']} | {g(n['rel builtin-ref decode_logits'])} | {g(xr)} | "
            f"{n['INT4 -8']} / {n['INT4 values']} | {n['INT2 -2']} / {n['INT2 values']} | "
            f"{g(n.get('rel builtin-ref decode_logits, lowest value raised by one'))} | "
            f"{g(n['rel ref-float decode_logits'])} | {meta['expected']} |")
    lines.append("")
    for stem, (meta, inv, customs) in made.items():
        lines.append(f"## {stem}")
        lines.append("")
        lines.append(f"{inv['bytes']} bytes, {inv['subgraphs']} subgraphs; {meta['how']}.")
        sigs = "; ".join(
            f"`{k}` (subgraph {v['subgraph']}): " + mltm._tensor_list(v["inputs"]) + " -> "
            + mltm._tensor_list(v["outputs"]) for k, v in inv["signatures"].items())
        lines.append(f"Signatures: {sigs}.")
        lines.append("Ops: " + ", ".join(f"{n} v{v} x{c}" for n, v, c in inv["ops"]) + ".")
        if inv["decomposition_ops"]:
            lines.append(f"Ops in the {len(inv['decomposition_subgraphs'])} decomposition subgraphs: "
                         + ", ".join(f"{n} v{v} x{c}" for n, v, c in inv["decomposition_ops"]) + ".")
        if inv["composites"]:
            lines.append("Composites: " + ", ".join(
                f"`{n}` v{v} {json.dumps(a)} x{c}" for n, v, a, c in inv["composites"]) + ".")
        if customs:
            lines.append("Custom ops (custom options): " + ", ".join(
                f"`{code}` {json.dumps(opts)} x{c}" for code, opts, c in customs) + ".")
        lines.append("Quantized tensors (op, input slot, type, kind, quantization: count):")
        lines.append("")
        for op, slot, typ, kind, detail, c in inv["quantized_tensors"]:
            lines.append(f"- {op}[{slot}] {typ} {kind} {detail}: {c}")
        notes = ", ".join(f"{k} {g(v)}" for k, v in meta["notes"].items())
        lines.append("")
        lines.append(f"Oracle: {meta['expected']}; {notes}.")
        if meta["errors"]:
            lines.append("Refused: " + "; ".join(f"{k}: {v}" for k, v in meta["errors"].items()) + ".")
        lines.append("")
    (out / "README.md").write_text("\n".join(lines))
    manifest = {"versions": versions(), "small_config": SMALL, "models": {
        k: {"meta": m, "custom_ops": c, **inv} for k, (m, inv, c) in made.items()}}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True, default=str) + "\n")


# ---------------------------------------------------------------------------------------------------- main
def versions() -> dict:
    from importlib import metadata

    names = ("torch", "litert-torch", "ai-edge-quantizer", "ai-edge-litert", "litert-lm-builder", "transformers",
             "tokenizers", "numpy")
    res = {}
    for n in names:
        try:
            res[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            res[n] = None
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="folder of the real-size models (outside the repository)")
    ap.add_argument("--only", default=None, help="comma-separated real-size names: " + ", ".join(LARGE))
    ap.add_argument("--no-large", action="store_true", help="skip the real-size models")
    ap.add_argument("--keep-float", action="store_true", help="keep the float32 exports (GBs) too")
    ap.add_argument("--small-out", default=None, help="make the small quantization models into this folder")
    ap.add_argument("--small-only", default=None, help="comma-separated small stems (trials; README lists only those)")
    args = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    if not args.no_large:
        out = Path(args.out).expanduser()
        out.mkdir(parents=True, exist_ok=True)
        manifest_path = out / "manifest.json"
        manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"models": {}}
        for name in args.only.split(",") if args.only else LARGE:
            manifest["models"][name] = export_large(name, out, args.keep_float)
            manifest["versions"] = versions()
            manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    if args.small_out:
        build_small(Path(args.small_out), args.small_only.split(",") if args.small_only else None)


if __name__ == "__main__":
    main()
