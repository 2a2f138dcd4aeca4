"""Makes the litert-torch / ai-edge-quantizer test models of tests/data/litert_torch/ and records their oracles.

Issue 29: the `.tflite` files made today from PyTorch (litert-torch's `convert`, its generative API with an external
KV cache, `export_hf` for Hugging Face models) and quantized with ai-edge-quantizer. Every model is small (random,
seeded weights), and beside each `<stem>.tflite` this writes `<stem>.npz` with the inputs and the reference outputs,
plus `manifest.json` (op inventory, signatures, quantization details of each model) and README.md (the same, as
tables). CI never runs this script and never installs torch: the tests read only the recorded files.

Run it from a separate environment (torch and its wheels take gigabytes), e.g.

    python3.11 -m venv /work/venv-torch
    /work/venv-torch/bin/pip install torch==2.13.0 --index-url <the PyTorch CPU wheel index> litert-torch==0.10.0 \
        ai-edge-quantizer==0.10.0 ai-edge-litert==2.3.0 transformers==5.25.0
    /work/venv-torch/bin/pip uninstall -y kernels      # transformers 5.25 + `kernels` fails to import gemma3
    /work/venv-torch/bin/python scripts/make_litert_torch_models.py --out tests/data/litert_torch [--only NAME,...]

(the torch wheel used: /opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl). --only makes only the
named models (stems or stem prefixes) and leaves the folder's other files alone; README.md and manifest.json are
rewritten with the new entries and the others' as recorded in manifest.json (so a model can be added without
remaking the rest: decoder_dynamic_wi8_afp32 was added so, on 2026-12-06).

Offline: nothing is downloaded (the tiny Qwen3 is made from a `Qwen3Config` with seeded random weights and saved
with a word-level tokenizer to a temporary folder that `export_hf` reads). Two workarounds are applied here:
litert-torch 0.10's generative code imports `tensorflow.lite.python.schema_py_generated` (tensorflow is not a
dependency): a stand-in package on sys.path re-exports `ai_edge_litert.schema_py_generated`; USE_HUB_KERNELS=0.

Models (V = vocab, the decoder: 2 layers, dim 64, 4 heads of 16, 2 KV groups, gated SiLU MLP 128, RMSNorm, RoPE):
  cnn_f32                 tiny ResNet-like CNN, NCHW 1x3x32x32 -> 10 (litert_torch.convert)
  vit_f32                 2-layer ViT-tiny-like encoder, dim 64, LayerNorm, GELU, softmax attention (convert)
  decoder_f32             the decoder in prefill form: tokens [1,16] -> logits [1,16,256] (convert, no composites)
  decoder_kv_f32          the same weights through the generative API: external KV cache of 64 positions,
                          signatures prefill_16 (logits too) and decode; odml.rms_norm / odml.sdpa composites
  decoder_kv_q8           the generative converter's own `dynamic_int8` quantization (its file suffix `q8`)
  qwen3_f32               tiny Qwen3 (2 layers, hidden 64, V=384, q/k norms) through export_hf: prefill_16 (no
                          logits) / decode, cache 64, mask input, transposed V cache; odml.rms_norm composites
  qwen3_composites_f32    the same with export_hf's use_sdpa_composite and use_swiglu_composite: odml.cache_update,
                          odml.sdpa_transposed, odml.swiglu composites and a param_tensor input
  <model>_<recipe>        ai-edge-quantizer 0.10 recipes applied to the float model <model>_f32 (export_hf's
                          quantization_recipe for qwen3): dynamic_wi8_afp32 (cnn, vit, decoder, qwen3),
                          weight_only_wi8_afp32 (cnn), static_wi8_ai8 (cnn, vit; calibrated on 8 seeded random
                          inputs; int8 model I/O), dynamic_wi4b32_afp32 (INT4, BlockwiseQuantization block 32:
                          decoder, decoder_kv, qwen3), dynamic_wi2b32_afp32 (INT2 blockwise: decoder; XNNPACK
                          refuses it)
  not made                weight-only int4 blockwise (ai-edge-quantizer 0.10 writes the model back unchanged), static
                          int8 of the decoder (ai-edge-litert 2.3.0 aborts in AllocateTensors; retried 2026-12-06
                          with the same versions: still SIGABRT), decoder_kv with dynamic_wi8_afp32 (byte-identical
                          to decoder_kv_q8), export_hf's use_rope_composite / use_qkv_norm_rope_composite /
                          apply_gpu_composites (the export fails on a shape mismatch)

Oracles (`meta` in each npz is a JSON string saying which key is which):
  single-signature models: in_<i> (input i, in the order of get_input_details; static int8 models take int8),
  torch_<j> (output j in torch eager float32 of the float source), builtin_<j> (ai-edge-litert 2.3.0 with
  BUILTIN_WITHOUT_DEFAULT_DELEGATES, 1 thread), xnnpack_<j> (the default resolver; absent where XNNPACK refuses the
  model); meta["expected"] names the oracle: "torch" for float models, "builtin" for quantized ones.
  KV-cache models: a 17-token prompt; prefill_<N> on prompt[:16] (positions 0..15, caches zero), then 32 greedy decode
  steps: step i feeds prompt[16] (i = 0) or the previous step's argmax at position 16 + i with the caches the previous
  signature returned. prefill_in_<name> / prefill_out_<name> (exact prefill inputs, builtin outputs: the caches after
  prefill), tokens (the 32 greedy ids, builtin), decode_logits (builtin, first 8 steps), xnnpack_tokens /
  xnnpack_decode_logits, and for float models torch_tokens (greedy in torch eager) and torch_decode_logits /
  torch_prefill_logits (torch eager, teacher-forced on prompt + tokens).

Runtimes' disagreement: XNNPACK and the builtin kernels differ on quantized models (dynamic range: per-row input
quantization; static int8: rounding); the builtin kernels are the oracle for quantized models.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

SEED = 29
VOCAB = 256
DIM = 64
HEADS = 4
HEAD_DIM = 16
KV_GROUPS = 2
FF = 128
LAYERS = 2
PREFILL = 16
CACHE = 64
DECODE_STEPS = 32
LOGIT_STEPS = 8  # decode steps whose logits are recorded
QWEN_VOCAB = 384


# ----------------------------------------------------------------------------------------------------------- setup
def _setup_environment() -> str:
    """The tensorflow stand-in (litert-torch's generative code imports its flatbuffer schema) and offline flags."""
    os.environ["USE_HUB_KERNELS"] = "0"
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    shim = tempfile.mkdtemp(prefix="tf_schema_shim_")
    pkg = Path(shim, "tensorflow", "lite", "python")
    pkg.mkdir(parents=True)
    for p in (Path(shim, "tensorflow"), Path(shim, "tensorflow", "lite"), pkg):
        (p / "__init__.py").write_text("")
    (pkg / "schema_py_generated.py").write_text("from ai_edge_litert.schema_py_generated import *  # noqa\n")
    sys.path.insert(0, shim)
    return shim


_setup_environment()

import torch  # noqa: E402
from torch import nn  # noqa: E402


def _seed(offset: int) -> np.random.RandomState:
    torch.manual_seed(SEED + offset)
    return np.random.RandomState(SEED + offset)


@contextlib.contextmanager
def _quiet():
    """Silences the converters' progress output (stdout and stderr, Python level) unless VERBOSE is set."""
    if os.environ.get("VERBOSE"):
        yield
        return
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


# ---------------------------------------------------------------------------------------------------------- models
class _ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class TinyResNet(nn.Module):
    """Stem conv + 3 residual blocks (16, 32/2, 64/2) + global average pool + linear: ~80k weights."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.blocks = nn.Sequential(_ResBlock(16, 16, 1), _ResBlock(16, 32, 2), _ResBlock(32, 64, 2))
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.mean(x, dim=(2, 3)))


class _VitBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp: int):
        super().__init__()
        self.heads = heads
        self.n1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.n2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, mlp)
        self.fc2 = nn.Linear(mlp, dim)

    def forward(self, x):
        b, t, d = x.shape
        h = self.n1(x)
        q, k, v = self.qkv(h).reshape(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * (d // self.heads) ** -0.5, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(nn.functional.gelu(self.fc1(self.n2(x))))


class TinyViT(nn.Module):
    """Patch 8 conv embedding of a 32x32 image (16 patches + class token), 2 pre-norm blocks, LayerNorm, head."""

    def __init__(self, dim: int = DIM, heads: int = HEADS, mlp: int = 2 * DIM, classes: int = 10):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 8, 8)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, 17, dim) * 0.02)
        self.blocks = nn.Sequential(*[_VitBlock(dim, heads, mlp) for _ in range(2)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def _randomize_norms(model: nn.Module) -> None:
    """Random affine parameters and running statistics, so folded norms are not identities."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm2d, nn.LayerNorm)):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)


def decoder_config(hlfb: bool):
    import litert_torch.generative.layers.model_config as cfg

    norm = cfg.NormalizationConfig(type=cfg.NormalizationType.RMS_NORM, epsilon=1e-6, enable_hlfb=hlfb)
    attn = cfg.AttentionConfig(
        num_heads=HEADS, head_dim=HEAD_DIM, num_query_groups=KV_GROUPS, rotary_base=10000, rotary_percentage=1.0
    )
    ff = cfg.FeedForwardConfig(
        type=cfg.FeedForwardType.GATED, activation=cfg.ActivationConfig(cfg.ActivationType.SILU), intermediate_size=FF
    )
    block = cfg.TransformerBlockConfig(
        attn_config=attn, ff_config=ff, pre_attention_norm_config=norm, post_attention_norm_config=norm
    )
    return cfg.ModelConfig(
        vocab_size=VOCAB, num_layers=LAYERS, max_seq_len=CACHE, embedding_dim=DIM, block_configs=block,
        final_norm_config=norm, enable_hlfb=hlfb,
    )


def make_decoders():
    """The generative DecoderOnlyModel (HLFB composites on) and a prefill-form copy with the same weights."""
    from litert_torch.generative.utilities import model_builder

    _seed(3)
    gen = model_builder.DecoderOnlyModel(decoder_config(True), mask_cache_size=CACHE).eval()
    with torch.no_grad():
        for name, p in gen.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
            elif p.dim() >= 2:
                p.normal_(0.0, 0.5 if "embedding" in name else 1.0 / p.shape[-1] ** 0.5)
    plain = model_builder.DecoderOnlyModel(decoder_config(False), mask_cache_size=CACHE).eval()
    plain.load_state_dict(gen.state_dict())
    return gen, PrefillDecoder(plain).eval()


class PrefillDecoder(nn.Module):
    """The decoder without a KV cache: tokens [1, T] at positions 0..T-1 -> logits [1, T, V] (causal)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, tokens):
        m = self.model
        t = tokens.shape[1]
        pos = torch.arange(t, dtype=torch.int32)
        x = m.tok_embedding(tokens)
        attn = m.config.block_config(0).attn_config
        rope = m.config.build_rope(pos, int(attn.rotary_percentage * attn.head_dim), attn.rotary_base)
        mask = m.mask_cache[:, :, :t, :t]
        for block in m.transformer_blocks:
            x = block(x, rope, mask, pos, None)
            x = x[0] if isinstance(x, tuple) else x
        return m.lm_head(m.final_norm(x))


def make_qwen3(folder: str):
    """A tiny Qwen3 with seeded random weights and a word-level tokenizer, saved for export_hf."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    _seed(5)
    config = transformers.Qwen3Config(
        vocab_size=QWEN_VOCAB, hidden_size=DIM, intermediate_size=FF, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=KV_GROUPS, head_dim=HEAD_DIM, max_position_embeddings=128,
        tie_word_embeddings=False, rms_norm_eps=1e-6, rope_theta=10000.0, pad_token_id=3, bos_token_id=2,
        eos_token_id=1,
    )
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
            elif p.dim() >= 2:
                p.normal_(0.0, 0.5 if "embed" in name else 1.0 / p.shape[-1] ** 0.5)
    model.save_pretrained(folder)
    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(QWEN_VOCAB)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="t0", eos_token="t1", bos_token="t2", pad_token="t3"
    )
    fast.chat_template = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    fast.save_pretrained(folder)
    return model


# ------------------------------------------------------------------------------------------------------ converters
def convert_plain(model: nn.Module, sample: tuple) -> bytes:
    import litert_torch

    with _quiet(), tempfile.TemporaryDirectory() as d:
        litert_torch.convert(model.eval(), sample).export(f"{d}/m.tflite")
        return Path(d, "m.tflite").read_bytes()


def convert_generative(model: nn.Module, quantize: str) -> bytes:
    from litert_torch.generative.utilities import converter, export_config

    with _quiet(), tempfile.TemporaryDirectory() as d:
        path = converter.convert_to_tflite(
            model, output_path=d, output_name_prefix="m", prefill_seq_len=PREFILL, kv_cache_max_len=CACHE,
            quantize=quantize, export_config=export_config.ExportConfig(output_logits_on_prefill=True),
        )
        return Path(path).read_bytes()


def export_hf(folder: str, recipe: str | None, **options) -> bytes:
    from litert_torch.generative.export_hf import export as hf_export

    with _quiet(), tempfile.TemporaryDirectory() as d:
        hf_export.export(
            model=folder, output_dir=d, prefill_lengths=[PREFILL], cache_length=CACHE,
            quantization_recipe=recipe or "none", bundle_litert_lm=False, keep_temporary_files=True, **options
        )
        names = sorted(f for f in os.listdir(d) if f.endswith(".tflite"))
        return Path(d, names[-1]).read_bytes()  # model_quantized.tflite sorts after model.tflite


def quantize(model: bytes, recipe_name: str, calibration: dict | None = None) -> bytes:
    from ai_edge_quantizer import quantizer, recipe

    with _quiet():
        qt = quantizer.Quantizer(bytearray(model))
        qt.load_quantization_recipe(getattr(recipe, recipe_name)())
        result = None
        if qt.need_calibration:
            result = qt.calibrate(calibration, num_threads=1)
        out = bytes(qt.quantize(result).quantized_model)
    if out == model:
        raise RuntimeError(f"{recipe_name}: the quantizer wrote the model back unchanged")
    return out


# -------------------------------------------------------------------------------------------- the official runtime
def official(model: bytes, xnnpack: bool):
    from ai_edge_litert import interpreter as tfl

    kind = tfl.OpResolverType.AUTO if xnnpack else tfl.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    return tfl.Interpreter(model_content=model, experimental_op_resolver_type=kind, num_threads=1)


def run_single(model: bytes, inputs: list[np.ndarray], xnnpack: bool) -> list[np.ndarray]:
    it = official(model, xnnpack)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def model_inputs(model: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Float inputs quantized with the input tensors' parameters where the model takes integers (static int8)."""
    out = []
    for d, x in zip(official(model, False).get_input_details(), inputs):
        scale, zp = d["quantization"]
        if d["dtype"] != x.dtype and scale:
            info = np.iinfo(d["dtype"])
            x = np.clip(np.round(x / scale) + zp, info.min, info.max).astype(d["dtype"])
        out.append(x)
    return out


def dequantized_outputs(model: bytes, outputs: list[np.ndarray]) -> list[np.ndarray]:
    res = []
    for d, y in zip(official(model, False).get_output_details(), outputs):
        scale, zp = d["quantization"]
        res.append((y.astype(np.float32) - zp) * scale if y.dtype != np.float32 and scale else y)
    return res


def _mask_row(positions: np.ndarray) -> np.ndarray:
    """export_hf's float mask input: 0 where key position <= query position, -inf elsewhere: [1, 1, T, CACHE]."""
    m = np.where(np.arange(CACHE)[None, :] <= positions[:, None], 0.0, -np.inf).astype(np.float32)
    return m[None, None]


def _param_row(start: int, length: int) -> np.ndarray:
    """export_hf's GPU-composite `param_tensor` [1, 1, 1, 7]: [start, end, end, length, 0, 0, 0] (only its ring-buffer
    paths read it; for a plain cache its values do not change the outputs)."""
    return np.array([start, start + length, start + length, length, 0, 0, 0], np.int32).reshape(1, 1, 1, 7)


def run_generation(model: bytes, prompt: np.ndarray, xnnpack: bool) -> dict:
    """prefill_<N> on prompt[:N], then DECODE_STEPS greedy decode steps through the signature runners."""
    it = official(model, xnnpack)
    pre = it.get_signature_runner(f"prefill_{PREFILL}")
    dec = it.get_signature_runner("decode")
    details = pre.get_input_details()
    ins = {}
    for name, d in details.items():
        ins[name] = np.zeros(d["shape"], d["dtype"])
    pos = np.arange(PREFILL, dtype=np.int32)
    ins["tokens"] = prompt[None, :PREFILL].astype(np.int32)
    ins["input_pos"] = pos
    if "mask" in ins:
        ins["mask"] = _mask_row(pos)
    if "param_tensor" in ins:
        ins["param_tensor"] = _param_row(0, PREFILL)
    out = pre(**ins)
    result = {"prefill_in": ins, "prefill_out": {k: v.copy() for k, v in out.items()}}
    caches = {k: v for k, v in out.items() if k.startswith("kv_cache")}
    tokens, logits = [], []
    token = int(prompt[PREFILL])
    for step in range(DECODE_STEPS):
        p = PREFILL + step
        step_in = dict(caches, tokens=np.array([[token]], np.int32), input_pos=np.array([p], np.int32))
        if "mask" in details:
            step_in["mask"] = _mask_row(np.array([p]))
        if "param_tensor" in details:
            step_in["param_tensor"] = _param_row(p, 1)
        out = dec(**step_in)
        row = out["logits"].reshape(-1).copy()
        token = int(np.argmax(row))
        tokens.append(token)
        if step < LOGIT_STEPS:
            logits.append(row)
        caches = {k: v.copy() for k, v in out.items() if k.startswith("kv_cache")}
    result["tokens"] = np.array(tokens, np.int32)
    result["decode_logits"] = np.stack(logits)
    return result


# ------------------------------------------------------------------------------------------------------- inventory
def inventory(model: bytes) -> dict:
    """Ops (name, version, count), composites (name, version, attributes, decomposition), quantized tensors."""
    from ai_edge_litert import schema_py_generated as s
    from flatbuffers import flexbuffers

    ops = {v: k for k, v in vars(s.BuiltinOperator).items() if not k.startswith("_")}
    types = {v: k for k, v in vars(s.TensorType).items() if not k.startswith("_")}
    m = s.ModelT.InitFromObj(s.Model.GetRootAs(model, 0))
    counts = collections.Counter()
    decomposition_counts = collections.Counter()
    decompositions = set()
    for sg in m.subgraphs:
        for op in sg.operators:
            if op.builtinOptions2Type == s.BuiltinOptions2.StableHLOCompositeOptions:
                decompositions.add(op.builtinOptions2.decompositionSubgraphIndex)
    composites = collections.Counter()
    quant = collections.Counter()
    blockwise = s.QuantizationDetails.BlockwiseQuantization
    for si, sg in enumerate(m.subgraphs):
        for op in sg.operators:
            oc = m.operatorCodes[op.opcodeIndex]
            code = max(oc.builtinCode, oc.deprecatedBuiltinCode)
            name = ops[code] if code != s.BuiltinOperator.CUSTOM else "CUSTOM:" + oc.customCode.decode()
            (decomposition_counts if si in decompositions else counts)[(name, oc.version)] += 1
            if code == s.BuiltinOperator.STABLEHLO_COMPOSITE:
                o = op.builtinOptions2
                attrs = flexbuffers.Loads(bytes(o.compositeAttributes)) if o.compositeAttributes is not None else {}
                attrs = {k: (round(v, 9) if isinstance(v, float) else v) for k, v in attrs.items()}
                composites[(o.name.decode(), o.version, json.dumps(attrs, sort_keys=True))] += 1
            for slot, ti in enumerate(op.inputs):
                if ti < 0:
                    continue
                t = sg.tensors[ti]
                q = t.quantization
                scales = 0 if q is None or q.scale is None else len(q.scale)
                zps = sorted({int(z) for z in q.zeroPoint}) if q is not None and q.zeroPoint is not None else []
                if t.type in (s.TensorType.FLOAT32, s.TensorType.INT32, s.TensorType.BOOL) and not scales:
                    continue
                detail = ""
                if q is not None and q.details is not None and q.detailsType == blockwise:
                    d = q.details
                    sc = sg.tensors[d.scales]
                    zp = "none" if d.zeroPoints < 0 else types[sg.tensors[d.zeroPoints].type]
                    want = [int(t.shape[0]), int(t.shape[-1]) // d.blockSize]
                    shape = f"[out,in/{d.blockSize}]" if [int(v) for v in sc.shape] == want else list(sc.shape)
                    detail = f"blockwise block={d.blockSize} scales={types[sc.type]}{shape} zp={zp}"
                is_const = m.buffers[t.buffer].data is not None or (m.buffers[t.buffer].size or 0) > 0
                if not detail and scales:
                    axis = f" axis={q.quantizedDimension}" if scales > 1 else ""
                    zp = f" zp={zps[0]}" if len(zps) == 1 and (is_const or zps[0] == 0) else ""
                    detail = f"scales={'per-tensor' if scales == 1 else 'per-channel'}{axis}{zp}"
                kind = "const" if is_const else "activation"
                quant[(name, slot, types[t.type], kind, detail)] += 1
    sigs = {}
    for sd in m.signatureDefs or []:
        sg = m.subgraphs[sd.subgraphIndex]
        io_ = {}
        for which, lst in (("inputs", sd.inputs), ("outputs", sd.outputs)):
            tensors = {tm.name.decode(): sg.tensors[tm.tensorIndex] for tm in lst}
            io_[which] = {name: [types[t.type], [int(v) for v in t.shape]] for name, t in tensors.items()}
        sigs[sd.signatureKey.decode()] = {"subgraph": sd.subgraphIndex, **io_}
    return {
        "bytes": len(model),
        "subgraphs": len(m.subgraphs),
        "signatures": sigs,
        "ops": [[n, v, c] for (n, v), c in sorted(counts.items())],
        "decomposition_subgraphs": sorted(decompositions),
        "decomposition_ops": [[n, v, c] for (n, v), c in sorted(decomposition_counts.items())],
        "composites": [[n, v, json.loads(a), c] for (n, v, a), c in sorted(composites.items())],
        "quantized_tensors": [list(k) + [c] for k, c in sorted(quant.items())],
    }


# ---------------------------------------------------------------------------------------------------------- record
def _save(out: Path, stem: str, model: bytes, arrays: dict, meta: dict) -> None:
    (out / f"{stem}.tflite").write_bytes(model)
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    np.savez_compressed(out / f"{stem}.npz", meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)


def _try(fn, *args, **kwargs):
    """(result, None), or (None, the error's first line) where XNNPACK refuses a model (INT2 blockwise weights)."""
    try:
        return fn(*args, **kwargs), None
    except (RuntimeError, ValueError) as e:
        return None, "xnnpack failed: " + str(e).split("\n")[0][:160]


def _diff(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return float(max(np.max(np.abs(x.astype(np.float64) - y)) for x, y in zip(a, b)))


def record_single(out: Path, stem: str, model: bytes, inputs: list[np.ndarray], torch_out: list[np.ndarray],
                  how: str, recipe: str | None) -> dict:
    inputs = model_inputs(model, inputs)
    builtin = run_single(model, inputs, xnnpack=False)
    xnn, xnn_error = _try(run_single, model, inputs, xnnpack=True)
    arrays = {}
    for i, x in enumerate(inputs):
        arrays[f"in_{i}"] = x
    for j in range(len(builtin)):
        arrays[f"torch_{j}"] = torch_out[j].astype(np.float32)
        arrays[f"builtin_{j}"] = builtin[j]
        if xnn is not None:
            arrays[f"xnnpack_{j}"] = xnn[j]
    deq = dequantized_outputs(model, builtin)
    notes = {
        "max_abs builtin-torch": _diff(deq, torch_out),
        "max_abs xnnpack-builtin": xnn_error or _diff(dequantized_outputs(model, xnn), deq),
        "max_abs torch": float(max(np.max(np.abs(e)) for e in torch_out)),
    }
    meta = {"kind": "single", "expected": "torch" if recipe is None else "builtin", "how": how, "recipe": recipe,
            "inputs": len(inputs), "outputs": len(builtin), "notes": notes}
    _save(out, stem, model, arrays, meta)
    return meta


def record_generation(out: Path, stem: str, model: bytes, prompt: np.ndarray, torch_fn, how: str,
                      recipe: str | None, extra_notes: dict) -> dict:
    """torch_fn(tokens [1, T]) -> logits [T, V] in torch eager (float models), or None."""
    gen = run_generation(model, prompt, xnnpack=False)
    xnn, xnn_error = _try(run_generation, model, prompt, xnnpack=True)
    arrays = {"prompt": prompt.astype(np.int32), "tokens": gen["tokens"], "decode_logits": gen["decode_logits"]}
    if xnn is not None:
        arrays["xnnpack_tokens"] = xnn["tokens"]
        arrays["xnnpack_decode_logits"] = xnn["decode_logits"]
        if "logits" in xnn["prefill_out"]:
            arrays["xnnpack_prefill_out_logits"] = xnn["prefill_out"]["logits"]
        notes = {"xnnpack tokens equal": bool(np.array_equal(xnn["tokens"], gen["tokens"])),
                 "max_abs xnnpack-builtin decode_logits": _diff([xnn["decode_logits"]], [gen["decode_logits"]])}
    else:
        notes = {"xnnpack": xnn_error}
    for k, v in gen["prefill_in"].items():
        arrays[f"prefill_in_{k}"] = v
    for k, v in gen["prefill_out"].items():
        arrays[f"prefill_out_{k}"] = v
    if torch_fn is not None:
        seq = np.concatenate([prompt[: PREFILL + 1], gen["tokens"][:-1]]).astype(np.int64)
        logits = torch_fn(seq)
        arrays["torch_decode_logits"] = logits[PREFILL: PREFILL + LOGIT_STEPS]
        notes["max_abs builtin-torch decode_logits"] = _diff([gen["decode_logits"]], [arrays["torch_decode_logits"]])
        if "logits" in gen["prefill_out"]:
            arrays["torch_prefill_logits"] = logits[None, :PREFILL]
            notes["max_abs builtin-torch prefill logits"] = _diff([gen["prefill_out"]["logits"]],
                                                                  [arrays["torch_prefill_logits"]])
        ids = list(prompt[: PREFILL + 1].astype(np.int64))
        greedy = []
        for _ in range(DECODE_STEPS):
            nxt = int(np.argmax(torch_fn(np.array(ids))[-1]))
            greedy.append(nxt)
            ids.append(nxt)
        arrays["torch_tokens"] = np.array(greedy, np.int32)
        notes["torch tokens equal"] = bool(np.array_equal(arrays["torch_tokens"], gen["tokens"]))
    notes.update(extra_notes)
    mask = "mask" in gen["prefill_in"]
    meta = {"kind": "generation", "expected": "builtin tokens, torch logits" if recipe is None else "builtin",
            "how": how, "recipe": recipe, "prefill_signature": f"prefill_{PREFILL}", "decode_signature": "decode",
            "prefill_len": PREFILL, "cache_len": CACHE, "decode_steps": DECODE_STEPS, "logit_steps": LOGIT_STEPS,
            "mask_input": ("float [1,1,T,cache]: 0 where key position <= query position, -inf elsewhere"
                           if mask else None),
            "protocol": "prefill prompt[:prefill_len] at positions 0.., caches zero; decode step i feeds prompt"
                        "[prefill_len] (i=0) or tokens[i-1] at position prefill_len+i with the caches returned by"
                        " the previous call (output kv_cache_* -> input kv_cache_* of the same name)",
            "notes": notes}
    _save(out, stem, model, arrays, meta)
    return meta


# ------------------------------------------------------------------------------------------------------------ main
def _torch_np(model: nn.Module, *args) -> list[np.ndarray]:
    with torch.no_grad():
        y = model(*[torch.from_numpy(a) for a in args])
    return [t.detach().numpy() for t in (y if isinstance(y, (tuple, list)) else (y,))]


def build(out: Path, only: set[str] | None) -> dict:
    made = {}

    def want(stem: str) -> bool:
        return only is None or stem in only or any(stem.startswith(o) for o in only)

    def group(prefix: str) -> bool:
        return only is None or any(o.startswith(prefix) or prefix.startswith(o) for o in only)

    def single(stem, model, inputs, torch_out, how, recipe=None):
        if want(stem):
            made[stem] = (record_single(out, stem, model, inputs, torch_out, how, recipe), inventory(model))
            print(f"{stem}: {len(model)} bytes", flush=True)

    def generation(stem, model, prompt, torch_fn, how, recipe=None, notes=None):
        if want(stem):
            meta = record_generation(out, stem, model, prompt, torch_fn, how, recipe, notes or {})
            made[stem] = (meta, inventory(model))
            print(f"{stem}: {len(model)} bytes", flush=True)

    if group("cnn"):
        build_cnn(single, want)
    if group("vit"):
        build_vit(single, want)
    if group("decoder"):
        build_decoders(single, generation, want, group)
    if group("qwen3"):
        build_qwen3(generation, want)
    return made


def build_cnn(single, want) -> None:
    rs = _seed(1)
    cnn = TinyResNet().eval()
    _randomize_norms(cnn)
    x = rs.standard_normal((1, 3, 32, 32)).astype(np.float32)
    calib = [rs.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(8)]
    cnn_f32 = convert_plain(cnn, (torch.from_numpy(x),))
    ref = _torch_np(cnn, x)
    single("cnn_f32", cnn_f32, [x], ref, "litert_torch.convert")
    for r in ("dynamic_wi8_afp32", "weight_only_wi8_afp32", "static_wi8_ai8"):
        if want(f"cnn_{r}"):
            cal = {"serving_default": [{"args_0": c} for c in calib]}
            single(f"cnn_{r}", quantize(cnn_f32, r, cal), [x], ref, f"litert_torch.convert + ai-edge-quantizer {r}",
                   r)


def build_vit(single, want) -> None:
    rs = _seed(2)
    vit = TinyViT().eval()
    _randomize_norms(vit)
    x = rs.standard_normal((1, 3, 32, 32)).astype(np.float32)
    calib = [rs.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(8)]
    vit_f32 = convert_plain(vit, (torch.from_numpy(x),))
    ref = _torch_np(vit, x)
    single("vit_f32", vit_f32, [x], ref, "litert_torch.convert")
    for r in ("dynamic_wi8_afp32", "static_wi8_ai8"):
        if want(f"vit_{r}"):
            cal = {"serving_default": [{"args_0": c} for c in calib]}
            single(f"vit_{r}", quantize(vit_f32, r, cal), [x], ref, f"litert_torch.convert + ai-edge-quantizer {r}", r)


def build_decoders(single, generation, want, group) -> None:
    """The decoder in prefill form (plain converter) and with an external KV cache (generative API)."""
    gen, prefill = make_decoders()
    rs = _seed(4)
    tokens = rs.randint(4, VOCAB, size=(1, PREFILL)).astype(np.int32)
    calib = [rs.randint(4, VOCAB, size=(1, PREFILL)).astype(np.int32) for _ in range(8)]
    dec_f32 = convert_plain(prefill, (torch.from_numpy(tokens),))
    ref = _torch_np(prefill, tokens)
    single("decoder_f32", dec_f32, [tokens], ref, "litert_torch.convert (prefill form, 16 tokens)")
    # Per-channel int8 (issue 35's prefill rows) and blockwise weights, without composites. Left out to keep the folder
    # small: weight_only_wi8_afp32 (the CNN has it); static_wi8_ai8, on which ai-edge-litert 2.3.0 aborts (SIGABRT) in
    # AllocateTensors.
    for r in ("dynamic_wi8_afp32", "dynamic_wi4b32_afp32", "dynamic_wi2b32_afp32"):
        if want(f"decoder_{r}"):
            cal = {"serving_default": [{"args_0": c} for c in calib]}
            single(f"decoder_{r}", quantize(dec_f32, r, cal), [tokens], ref,
                   f"litert_torch.convert (prefill form) + ai-edge-quantizer {r}", r)

    prompt = rs.randint(4, VOCAB, size=PREFILL + 1).astype(np.int32)

    def torch_decoder(seq: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return prefill(torch.from_numpy(seq[None].astype(np.int32)))[0].numpy()

    if group("decoder_kv"):
        kv_f32 = convert_generative(gen, "none")
        generation("decoder_kv_f32", kv_f32, prompt, torch_decoder, "generative converter.convert_to_tflite")
        # The generative converter's own `dynamic_int8` (file suffix q8) runs ai-edge-quantizer's dynamic_wi8_afp32:
        # the two files are byte-identical with these versions, so only one is kept then.
        q8 = convert_generative(gen, "dynamic_int8")
        wi8 = quantize(kv_f32, "dynamic_wi8_afp32")
        same = {"identical to ai-edge-quantizer dynamic_wi8_afp32 on decoder_kv_f32": q8 == wi8}
        generation("decoder_kv_q8", q8, prompt, None,
                   "generative converter.convert_to_tflite(quantize='dynamic_int8')", "generative dynamic_int8 (q8)",
                   same)
        if q8 != wi8:
            generation("decoder_kv_dynamic_wi8_afp32", wi8, prompt, None,
                       "generative converter + ai-edge-quantizer dynamic_wi8_afp32", "dynamic_wi8_afp32")
        if want("decoder_kv_dynamic_wi4b32_afp32"):
            generation("decoder_kv_dynamic_wi4b32_afp32", quantize(kv_f32, "dynamic_wi4b32_afp32"), prompt, None,
                       "generative converter + ai-edge-quantizer dynamic_wi4b32_afp32", "dynamic_wi4b32_afp32")


def build_qwen3(generation, want) -> None:
    """The tiny Qwen3 through export_hf."""
    with tempfile.TemporaryDirectory() as folder:
        hf = make_qwen3(folder)
        rs = _seed(6)
        prompt = rs.randint(4, QWEN_VOCAB, size=PREFILL + 1).astype(np.int32)

        def torch_qwen(seq: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                return hf(input_ids=torch.from_numpy(seq[None].astype(np.int64))).logits[0].numpy()

        if want("qwen3_f32"):
            generation("qwen3_f32", export_hf(folder, None), prompt, torch_qwen, "export_hf (text_generation)")
        if want("qwen3_composites_f32"):
            generation("qwen3_composites_f32",
                       export_hf(folder, None, use_sdpa_composite=True, use_swiglu_composite=True), prompt,
                       torch_qwen, "export_hf use_sdpa_composite=True use_swiglu_composite=True")
        for r in ("dynamic_wi8_afp32", "dynamic_wi4b32_afp32"):
            if want(f"qwen3_{r}"):
                generation(f"qwen3_{r}", export_hf(folder, r), prompt, None, f"export_hf quantization_recipe={r}", r)


def versions() -> dict:
    from importlib import metadata

    names = ("torch", "litert-torch", "ai-edge-quantizer", "ai-edge-litert", "transformers", "numpy")
    return {n: metadata.version(n) for n in names}


def _tensor_list(tensors: dict) -> str:
    return ", ".join(f"{n} {t[0].lower()}{t[1]}" for n, t in tensors.items())


def write_readme(out: Path, made: dict, kept: dict | None = None) -> None:
    """README.md and manifest.json of `made` (stem -> (meta, inventory)); `kept` (stem -> lines) gives the README
    sections of models not remade (--only), written as they were."""
    lines = [
        "# litert-torch / ai-edge-quantizer test models (issue 29)",
        "",
        "Made by `scripts/make_litert_torch_models.py` (its docstring says how to run it, what each model is and",
        "what each `.npz` holds); CI never runs it. Versions: "
        + ", ".join(f"{k} {v}" for k, v in versions().items()) + ".",
        "`manifest.json` holds the inventory below in machine-readable form (plus each signature's tensors).",
        "",
        "Oracle: torch eager (float32) for float models, ai-edge-litert's builtin kernels",
        "(`BUILTIN_WITHOUT_DEFAULT_DELEGATES`) for quantized ones; KV-cache models: greedy tokens of the official",
        "signature runners (builtin kernels), torch eager logits (teacher-forced) for the float ones.",
        "",
        "What these versions emit: composites `odml.rms_norm` v0 {epsilon}, `odml.scaled_dot_product_attention`",
        "v0 {scale} (generative API), `odml.cache_update` v0, `odml.sdpa_transposed` v0 and `odml.swiglu` v0",
        "(export_hf's use_sdpa_composite / use_swiglu_composite), each with its own decomposition subgraph (none",
        "nested); blockwise weights are INT4 (or INT2) constants, packed (2 or 4 per byte), with BlockwiseQuantization",
        "block 32, a FLOAT16 scales tensor [out, in/32] and no zero-point tensor, on FULLY_CONNECTED and",
        "EMBEDDING_LOOKUP (INT2: only FULLY_CONNECTED; XNNPACK refuses INT2). Not made: weight-only int4 blockwise",
        "(the quantizer writes the model back unchanged), the decoder with static_wi8_ai8 (ai-edge-litert aborts in",
        "AllocateTensors), export_hf's rope / qkv_norm_rope / GPU composites (the export fails); decoder_kv_q8 is",
        "byte-identical to dynamic_wi8_afp32 on decoder_kv_f32.",
        "",
        "| model | bytes | kind | oracle |",
        "| --- | --- | --- | --- |",
    ]
    for stem, (meta, inv) in made.items():
        lines.append(f"| {stem} | {inv['bytes']} | {meta['kind']} | {meta['expected']} |")
    lines.append("")
    for stem, (meta, inv) in made.items():
        if kept and stem in kept:
            lines.extend(kept[stem])
            continue
        lines.append(f"## {stem}")
        lines.append("")
        lines.append(f"{inv['bytes']} bytes, {inv['subgraphs']} subgraphs; made by {meta['how']}.")
        sigs = "; ".join(
            f"`{k}` (subgraph {v['subgraph']}): " + _tensor_list(v["inputs"]) + " -> " + _tensor_list(v["outputs"])
            for k, v in inv["signatures"].items()
        )
        lines.append(f"Signatures: {sigs}.")
        lines.append("Ops: " + ", ".join(f"{n} v{v} x{c}" for n, v, c in inv["ops"]) + ".")
        if inv["decomposition_ops"]:
            lines.append(f"Ops in the {len(inv['decomposition_subgraphs'])} decomposition subgraphs: "
                         + ", ".join(f"{n} v{v} x{c}" for n, v, c in inv["decomposition_ops"]) + ".")
        if inv["composites"]:
            lines.append("Composites: " + ", ".join(
                f"`{n}` v{v} {json.dumps(a)} x{c}" for n, v, a, c in inv["composites"]) + ".")
        if inv["quantized_tensors"]:
            lines.append("Quantized tensors (op, input slot, type, kind, quantization: count):")
            lines.append("")
            for op, slot, typ, kind, detail, c in inv["quantized_tensors"]:
                lines.append(f"- {op}[{slot}] {typ} {kind} {detail}: {c}")
        notes = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in meta["notes"].items())
        lines.append("")
        lines.append(f"Oracle: {meta['expected']}; {notes}.")
        lines.append("")
    (out / "README.md").write_text("\n".join(lines))
    manifest = {"versions": versions(), "models": {k: {"meta": m, **inv} for k, (m, inv) in made.items()}}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


# every stem build() makes, in its order (the README's); --only keeps the others' entries of manifest.json
STEMS = (
    "cnn_f32", "cnn_dynamic_wi8_afp32", "cnn_weight_only_wi8_afp32", "cnn_static_wi8_ai8", "vit_f32",
    "vit_dynamic_wi8_afp32", "vit_static_wi8_ai8", "decoder_f32", "decoder_dynamic_wi8_afp32",
    "decoder_dynamic_wi4b32_afp32", "decoder_dynamic_wi2b32_afp32", "decoder_kv_f32", "decoder_kv_q8",
    "decoder_kv_dynamic_wi8_afp32", "decoder_kv_dynamic_wi4b32_afp32", "qwen3_f32", "qwen3_composites_f32",
    "qwen3_dynamic_wi8_afp32", "qwen3_dynamic_wi4b32_afp32",
)


def merge_recorded(out: Path, made: dict) -> tuple[dict, dict]:
    """The models just made plus the entries of the folder's manifest.json that were not remade (--only), in
    STEMS order, and the README sections of the latter (stem -> lines, as written before): README and manifest
    then still list every model of the folder, the others' entries as recorded (their files are not touched)."""
    path = out / "manifest.json"
    recorded = json.loads(path.read_text())["models"] if path.exists() else {}
    entries = {k: (v.pop("meta"), v) for k, v in recorded.items() if k not in made and (out / f"{k}.tflite").exists()}
    entries.update(made)
    rank = {s: i for i, s in enumerate(STEMS)}
    readme = (out / "README.md").read_text().split("\n") if (out / "README.md").exists() else []
    starts = [i for i, line in enumerate(readme) if line.startswith("## ")] + [len(readme)]
    sections = {readme[a][3:]: readme[a:b] for a, b in zip(starts, starts[1:])}
    kept = {k: sections[k] for k in entries if k not in made and k in sections}
    return dict(sorted(entries.items(), key=lambda kv: rank.get(kv[0], len(rank)))), kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/data/litert_torch")
    ap.add_argument("--only", default=None, help="comma-separated stems or stem prefixes: only those are made; the"
                    " folder's other models keep their files and their manifest.json entries (README and manifest"
                    " are rewritten with both)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    made = build(out, set(args.only.split(",")) if args.only else None)
    if args.only:
        write_readme(out, *merge_recorded(out, made))
    else:
        write_readme(out, made)


if __name__ == "__main__":
    main()
