"""Makes int8 and float32 models with the TensorFlow Lite converter and records the official runtime's outputs.

Issues 30 and 35 list rows for the converter's int8 transformer block and MobileNetV3-Small int8 that had no files,
issue 31 rows for MobileNetV2 1.0/224 and MobileNetV3-Small in float32; this makes them. Every model has seeded
random weights. The float32 ones (`_f32`) are the converter's plain conversion,
`TFLiteConverter.from_keras_model(model).convert()` without optimizations: float in, float out, float ops. The int8
ones (`_int8`) are converted with the TF Lite converter's usual full integer quantization:
`optimizations=[tf.lite.Optimize.DEFAULT]`, a seeded random representative dataset,
`supported_ops=[TFLITE_BUILTINS_INT8]` and `inference_input_type = inference_output_type = tf.int8`, so the model
takes and returns int8 and its ops are int8 (int32 biases) wherever the converter has an int8 kernel (it has no int8
NEG: the transformer block's two LayerNorm NEGs run in float between DEQUANTIZE and QUANTIZE). CI never runs this
script and never installs TensorFlow: the tests and the bench read the files it writes.

Run it from a separate environment (TensorFlow is not a dependency of lite-numba):

    python3.11 -m venv /work/venv-tf
    /work/venv-tf/bin/pip install tensorflow-cpu==2.21.0 ai-edge-litert==2.3.0
    /work/venv-tf/bin/python scripts/make_tf_int8_models.py [--only NAME,...] [--models DIR] [--cache DIR]

Versions used for the committed files and the bench-cache models: tensorflow-cpu 2.21.0 (Keras 3.15.1),
ai-edge-litert 2.3.0, numpy 2.4.6.

Models:
  transformer_block_int8   the architecture of tests/data/models/transformer_block_f32.tflite (MODELS.md), in Keras
                           3: input `tokens_emb` [1, 16, 32] float; MultiHeadAttention(num_heads=4, key_dim=8)
                           self-attention, residual add, LayerNormalization(epsilon=1e-6), Dense(64, GELU exact
                           (erf)), Dense(32), residual add, LayerNormalization(epsilon=1e-6) (post-norm); Keras'
                           default initializers (Glorot-uniform kernels, zero biases, unit gammas) under
                           keras.utils.set_random_seed(SEED); representative dataset: 32 standard-normal inputs.
                           A few tens of kB: written to tests/data/models/ (--models) with ref/<name>.npz.
  mobilenet_v3_small_int8  tf.keras.applications.MobileNetV3Small(weights=None, input_shape=(224, 224, 3)) with
                           its defaults (include_preprocessing: a Rescaling to [-1, 1] inside; softmax over 1000
                           classes), seeded Glorot weights, and its BatchNormalization layers given seeded random
                           gammas, betas, moving means and variances (else every folded norm is an identity and the
                           random network's classes are nearly uniform) and its classifier's 1 x 1 `logits`
                           convolution kernel scaled by LOGIT_GAIN (40: with Glorot weights the logits' std is ~0.05,
                           the softmax flat and all 1000 int8 outputs equal); representative dataset: 16 images
                           uniform in [0, 255]. ~2-3 MB: written to the bench-model cache (--cache, default
                           $LITE_NUMBA_BENCH_MODELS or ~/.cache/lite-numba/bench-models, where bench/conftest.find_model
                           looks; scripts/fetch_bench_models.py fills the same folder) with ref/<name>.npz.
  mobilenet_v3_small_f32   the float32 twin of mobilenet_v3_small_int8: the same Keras model (same seed, weights,
                           batch-norm statistics and logit gain) and the same input, converted without quantization.
                           ~10 MB: written to the bench-model cache (--cache) with ref/<name>.npz.
  mobilenet_v2_100_224_f32 tf.keras.applications.MobileNetV2(alpha=1.0, weights=None, input_shape=(224, 224, 3))
                           with its defaults (no preprocessing inside: it takes images in [-1, 1]; softmax over 1000
                           classes), seeded Glorot weights, its BatchNormalization layers given seeded random
                           statistics as mobilenet_v3_small_int8's are and its classifier's `predictions` Dense kernel
                           scaled by LOGIT_GAIN_V2 (12: without it the logits' std is ~0.16, the softmax nearly
                           flat); converted without quantization; the input is uniform in [-1, 1]. ~14 MB: written
                           to the bench-model cache (--cache) with ref/<name>.npz.

Each ref/<name>.npz is in the form of tests/data/models/ref (tests/test_models.py reads it): input_0 (float models:
the seeded float input; int8 models: that input quantized with the input tensor's scale and zero point),
nodelegate_output_0 (ai-edge-litert 2.3.0 with BUILTIN_WITHOUT_DEFAULT_DELEGATES, 1 thread: the oracle), output_0
(the default resolver, XNNPACK, 1 thread) and tf_output_0 (the Keras float model on the float input). The script prints
each model's op inventory and the XNNPACK / builtin and TF Lite / Keras differences.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

SEED = 35
LOGIT_GAIN = 40.0  # MobileNetV3-Small's classifier kernel scaled: logits of std ~2, not ~0.05 (a flat softmax)
LOGIT_GAIN_V2 = 12.0  # MobileNetV2 1.0/224's predictions kernel scaled: logits of std ~1.9, not ~0.16
ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("LITE_NUMBA_BENCH_MODELS") or Path.home() / ".cache" / "lite-numba" / "bench-models")


# ---------------------------------------------------------------------------------------------------------- models
def transformer_block():
    """Post-norm self-attention + GELU MLP block on [1, 16, 32] (transformer_block_f32's architecture)."""
    import keras

    keras.backend.clear_session()  # name counters from zero: the same file whichever models ran before
    keras.utils.set_random_seed(SEED)
    x = keras.Input((16, 32), batch_size=1, name="tokens_emb")
    att = keras.layers.MultiHeadAttention(num_heads=4, key_dim=8, name="mha")(x, x)
    h = keras.layers.LayerNormalization(epsilon=1e-6)(keras.layers.Add()([x, att]))
    f = keras.layers.Dense(32)(keras.layers.Dense(64, activation="gelu")(h))
    y = keras.layers.LayerNormalization(epsilon=1e-6)(keras.layers.Add()([h, f]))
    model = keras.Model(x, y)
    rs = np.random.RandomState(SEED)
    calib = [rs.standard_normal((1, 16, 32)).astype(np.float32) for _ in range(32)]
    return model, calib, rs.standard_normal((1, 16, 32)).astype(np.float32)


def randomize_batch_norms(model, rs: np.random.RandomState) -> None:
    """Seeded random gammas, betas, moving means and variances (else every folded norm is an identity)."""
    import keras

    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            gamma, beta, mean, var = layer.get_weights()
            layer.set_weights([rs.uniform(0.5, 1.5, gamma.shape).astype(np.float32),
                               rs.uniform(-0.2, 0.2, beta.shape).astype(np.float32),
                               rs.uniform(-0.2, 0.2, mean.shape).astype(np.float32),
                               rs.uniform(0.5, 1.5, var.shape).astype(np.float32)])


def scale_kernel(layer, gain: float) -> None:
    layer.set_weights([w * gain if w.ndim > 1 else w for w in layer.get_weights()])


def mobilenet_v3_small():
    """MobileNetV3-Small 224 x 224 with seeded random weights and batch-norm statistics (int8 and float twins)."""
    import keras

    keras.backend.clear_session()  # name counters from zero: the same file whichever models ran before
    keras.utils.set_random_seed(SEED + 1)
    model = keras.applications.MobileNetV3Small(weights=None, input_shape=(224, 224, 3))
    rs = np.random.RandomState(SEED + 1)
    randomize_batch_norms(model, rs)
    scale_kernel(model.get_layer("logits"), LOGIT_GAIN)  # the classifier's 1 x 1 convolution
    calib = [rs.uniform(0, 255, (1, 224, 224, 3)).astype(np.float32) for _ in range(16)]
    return model, calib, rs.uniform(0, 255, (1, 224, 224, 3)).astype(np.float32)


def mobilenet_v2_100_224():
    """MobileNetV2 1.0 / 224 with seeded random weights and batch-norm statistics (float only: no calibration set)."""
    import keras

    keras.backend.clear_session()  # name counters from zero: the same file whichever models ran before
    keras.utils.set_random_seed(SEED + 2)
    model = keras.applications.MobileNetV2(alpha=1.0, weights=None, input_shape=(224, 224, 3))
    rs = np.random.RandomState(SEED + 2)
    randomize_batch_norms(model, rs)
    scale_kernel(model.get_layer("predictions"), LOGIT_GAIN_V2)  # the classifier's Dense
    return model, [], rs.uniform(-1, 1, (1, 224, 224, 3)).astype(np.float32)


# name: (builder, folder: "models" = tests/data/models, "cache" = the bench-model cache, conversion: "int8" | "float")
MODELS = {"transformer_block_int8": (transformer_block, "models", "int8"),
          "mobilenet_v3_small_int8": (mobilenet_v3_small, "cache", "int8"),
          "mobilenet_v3_small_f32": (mobilenet_v3_small, "cache", "float"),
          "mobilenet_v2_100_224_f32": (mobilenet_v2_100_224, "cache", "float")}


# ------------------------------------------------------------------------------------------------------- converter
def convert_float(model) -> bytes:
    """The TF Lite converter's plain conversion: no optimizations, float in, float out, float ops."""
    import tensorflow as tf

    return bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())


def convert_int8(model, calib: list[np.ndarray]) -> bytes:
    """The TF Lite converter's full-integer quantization: int8 in, int8 out, int8 ops only."""
    import tensorflow as tf

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]

    def representative():
        for c in calib:
            yield [c]

    conv.representative_dataset = representative
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    return bytes(conv.convert())


# -------------------------------------------------------------------------------------------- the official runtime
def official(model: bytes, builtin: bool):
    from ai_edge_litert import interpreter as tfl

    kind = tfl.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES if builtin else tfl.OpResolverType.AUTO
    it = tfl.Interpreter(model_content=model, experimental_op_resolver_type=kind, num_threads=1)
    it.allocate_tensors()
    return it


def run(model: bytes, x: np.ndarray, builtin: bool) -> np.ndarray:
    it = official(model, builtin)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]).copy()


def quantize_input(model: bytes, x: np.ndarray) -> np.ndarray:
    d = official(model, True).get_input_details()[0]
    scale, zp = d["quantization"]
    return np.clip(np.round(x / scale) + zp, -128, 127).astype(np.int8)


def inventory(model: bytes) -> str:
    """Ops as MODELS.md lists them: NAME vVERSION×COUNT in first-use order."""
    from ai_edge_litert import schema_py_generated as s

    names = {v: k for k, v in vars(s.BuiltinOperator).items() if not k.startswith("_")}
    m = s.ModelT.InitFromObj(s.Model.GetRootAs(model, 0))
    counts: collections.Counter = collections.Counter()
    for op in m.subgraphs[0].operators:
        oc = m.operatorCodes[op.opcodeIndex]
        counts[(names[max(oc.builtinCode, oc.deprecatedBuiltinCode)], oc.version)] += 1
    return ", ".join(f"{n} v{v}" + (f"×{c}" if c > 1 else "") for (n, v), c in counts.items())


# ------------------------------------------------------------------------------------------------------------ main
def make(name: str, folder: Path) -> None:
    builder, _, conversion = MODELS[name]
    model, calib, x = builder()
    tflite = convert_int8(model, calib) if conversion == "int8" else convert_float(model)
    xq = quantize_input(model=tflite, x=x) if conversion == "int8" else x
    builtin = run(tflite, xq, True)
    xnnpack = run(tflite, xq, False)
    ref = np.asarray(model(x, training=False), np.float32)
    (folder / "ref").mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.tflite").write_bytes(tflite)
    np.savez_compressed(folder / "ref" / f"{name}.npz", input_0=xq, nodelegate_output_0=builtin, output_0=xnnpack,
                        tf_output_0=ref)
    if conversion == "float":
        print(f"{name}: {len(tflite)} bytes -> {folder}; ops: {inventory(tflite)}; {xq.dtype}{list(xq.shape)} -> "
              f"{builtin.dtype}{list(builtin.shape)}; XNNPACK vs builtin: max abs "
              f"{float(np.max(np.abs(xnnpack - builtin))):.3g}; builtin vs Keras: max abs "
              f"{float(np.max(np.abs(builtin - ref))):.3g}; output max {float(builtin.max()):.3g} (class "
              f"{int(builtin.argmax())}), min {float(builtin.min()):.3g}", flush=True)
        return
    d = official(tflite, True).get_output_details()[0]
    scale, zp = d["quantization"]
    deq = (builtin.astype(np.float32) - zp) * scale
    steps = int(np.max(np.abs(builtin.astype(np.int32) - xnnpack)))
    print(f"{name}: {len(tflite)} bytes -> {folder}; ops: {inventory(tflite)}; {xq.dtype}{list(xq.shape)} -> "
          f"{builtin.dtype}{list(builtin.shape)}; XNNPACK vs builtin: max {steps} steps; builtin dequantized vs "
          f"Keras float: max abs {float(np.max(np.abs(deq - ref))):.3g} (output scale {scale:.3g}); distinct "
          f"output values {len(np.unique(builtin))}", flush=True)


def versions() -> str:
    from importlib import metadata

    return ", ".join(f"{n} {metadata.version(n)}" for n in ("tensorflow-cpu", "keras", "ai-edge-litert", "numpy"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="comma-separated model names (default: all)")
    ap.add_argument("--models", type=Path, default=ROOT / "tests" / "data" / "models",
                    help="folder of the small models (transformer_block_int8)")
    ap.add_argument("--cache", type=Path, default=CACHE,
                    help="folder of the bench-only models (the MobileNets)")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; known: {list(MODELS)}")
    print(versions(), flush=True)
    for name in names:
        make(name, args.models if MODELS[name][1] == "models" else args.cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
