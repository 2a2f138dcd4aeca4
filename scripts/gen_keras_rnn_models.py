"""Writes the Keras / TensorFlow sequence and control-flow models of tests/test_keras_rnn.py into tests/data/models/.

Not run by the tests (they use the committed .tflite files and compute references with the official runtime). It
needs TensorFlow, which is *not* a dependency of lite-numba: run it from a separate environment, e.g.

    python -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install tensorflow==2.21.0
    /tmp/tfenv/bin/python scripts/gen_keras_rnn_models.py [out_dir]

Models (all float32, small weights from a fixed seed):
  keras_lstm          Keras 3 LSTM(8, return_sequences) + Dense: a WHILE loop over the time steps
  keras_gru           Keras 3 GRU(8) (reset_after) + Dense: WHILE
  keras_simple_rnn    Keras 3 SimpleRNN(6, return_sequences): WHILE
  keras_bilstm        Keras 3 Bidirectional(LSTM(6, return_sequences)) + LSTM(4): WHILE loops, REVERSE_V2
  keras_stacked_gru_lstm  GRU(5, return_sequences) -> LSTM(4) with masking off and go_backwards: two loops
  tf_growing_loop     tf.while_loop whose tensor grows by one row per iteration (shape invariant [None, 3])
  tf_cond_in_loop     tf.while_loop whose body takes a tf.cond branch per iteration (IF inside WHILE)
  tf_stateful_counter tf.Variable state assigned per invoke (VAR_HANDLE / READ / ASSIGN_VARIABLE, CALL_ONCE init)
With tf_keras (legacy Keras 2: `pip install tf-keras==2.21.0`), whose LSTMs the converter fuses:
  tfkeras_lstm_fused  LSTM(8) + Dense: UNIDIRECTIONAL_SEQUENCE_LSTM v1 (float)
  tfkeras_bilstm_fused  Bidirectional(LSTM(6)) + Dense: two UNIDIRECTIONAL_SEQUENCE_LSTM + REVERSE_V2 + CONCATENATION
  tfkeras_lstm_dynamic_range  LSTM(32) with Optimize.DEFAULT: UNIDIRECTIONAL_SEQUENCE_LSTM v3 (hybrid: float
                      activations, int8 weights, asymmetric input quantization)
  tfkeras_lstm_int8   LSTM(8) + Dense, full integer (representative data): QUANTIZE, UNIDIRECTIONAL_SEQUENCE_LSTM
                      int8 activations / int16 cell with 5 intermediates, FULLY_CONNECTED, DEQUANTIZE
  tfkeras_lstm_int8_stacked  batch 2, LSTM(12, return_sequences) -> LSTM(6) -> Dense(2), full integer: two integer
                      LSTMs (the second one's cell state calibrates to scale 2^-16; tests/test_rnn_int.py)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

SEED = 7
T, F = 6, 4  # time steps, features


def convert_keras(model) -> bytes:
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    return conv.convert()


def convert_fn(fn, module=None) -> bytes:
    conv = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], module)
    conv.experimental_enable_resource_variables = True
    return conv.convert()


def keras_models() -> dict[str, bytes]:
    keras.utils.set_random_seed(SEED)
    out = {}
    L = keras.layers
    m = keras.Sequential([keras.Input((T, F), batch_size=1), L.LSTM(8, return_sequences=True), L.Dense(3)])
    out["keras_lstm"] = convert_keras(m)
    m = keras.Sequential([keras.Input((T, F), batch_size=1), L.GRU(8), L.Dense(3)])
    out["keras_gru"] = convert_keras(m)
    m = keras.Sequential([keras.Input((T, F), batch_size=2), L.SimpleRNN(6, return_sequences=True)])
    out["keras_simple_rnn"] = convert_keras(m)
    m = keras.Sequential([keras.Input((T, F), batch_size=1), L.Bidirectional(L.LSTM(6, return_sequences=True)),
                          L.LSTM(4)])
    out["keras_bilstm"] = convert_keras(m)
    m = keras.Sequential([keras.Input((T, F), batch_size=1), L.GRU(5, return_sequences=True),
                          L.LSTM(4, go_backwards=True)])
    out["keras_stacked_gru_lstm"] = convert_keras(m)
    return out


def tf_models() -> dict[str, bytes]:
    out = {}

    @tf.function(input_signature=[tf.TensorSpec([1, 3], tf.float32), tf.TensorSpec([], tf.int32)])
    def growing(x, n):
        i = tf.constant(0)
        acc = x

        def body(i, acc):
            row = acc[-1:] * 0.5 + tf.cast(i, tf.float32)
            return i + 1, tf.concat([acc, row], axis=0)

        _, acc = tf.while_loop(lambda i, acc: i < n, body, [i, acc],
                               shape_invariants=[i.shape, tf.TensorShape([None, 3])])
        return acc

    out["tf_growing_loop"] = convert_fn(growing)

    @tf.function(input_signature=[tf.TensorSpec([4], tf.float32)])
    def cond_in_loop(x):
        def body(i, v):
            v = tf.cond(tf.reduce_sum(v) > 0.0, lambda: v * 0.5 - 1.0, lambda: v * v + 0.25)
            return i + 1, v

        _, v = tf.while_loop(lambda i, v: i < 5, body, [tf.constant(0), x])
        return v

    out["tf_cond_in_loop"] = convert_fn(cond_in_loop)

    class Counter(tf.Module):
        def __init__(self):
            super().__init__()
            self.total = tf.Variable(tf.zeros([3]), name="total")
            self.steps = tf.Variable(0.0, name="steps")

        @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
        def __call__(self, x):
            self.total.assign_add(x)
            self.steps.assign_add(1.0)
            return self.total / self.steps

    counter = Counter()
    out["tf_stateful_counter"] = convert_fn(counter.__call__, counter)
    return out


def tf_keras_models() -> dict[str, bytes]:
    try:
        import tf_keras as K
    except ImportError:
        print("tf_keras is not installed: skipping the fused (legacy Keras) LSTM models")
        return {}
    K.utils.set_random_seed(SEED)
    L = K.layers

    def conv(m, optimize=False, representative=None):
        c = tf.lite.TFLiteConverter.from_keras_model(m)
        if optimize:
            c.optimizations = [tf.lite.Optimize.DEFAULT]
        if representative is not None:
            c.representative_dataset = representative
            c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        return c.convert()

    def representative():
        rng = np.random.default_rng(0)
        for _ in range(50):
            yield [rng.standard_normal((1, T, F)).astype(np.float32)]

    out = {}
    m = K.Sequential([L.Input((T, F), batch_size=1), L.LSTM(8, return_sequences=True), L.Dense(3)])
    out["tfkeras_lstm_fused"] = conv(m)
    out["tfkeras_lstm_int8"] = conv(m, optimize=True, representative=representative)
    m = K.Sequential([L.Input((T, F), batch_size=1), L.Bidirectional(L.LSTM(6, return_sequences=True)),
                      L.Dense(2)])
    out["tfkeras_bilstm_fused"] = conv(m)
    # weights need >= 1024 elements for the converter to quantize them
    m = K.Sequential([L.Input((T, 32), batch_size=1), L.LSTM(32, return_sequences=True)])
    out["tfkeras_lstm_dynamic_range"] = conv(m, optimize=True)

    K.utils.set_random_seed(SEED)

    def representative_batch2():
        rng = np.random.default_rng(0)
        for _ in range(50):
            yield [rng.standard_normal((2, T, F)).astype(np.float32)]

    m = K.Sequential([L.Input((T, F), batch_size=2), L.LSTM(12, return_sequences=True), L.LSTM(6), L.Dense(2)])
    out["tfkeras_lstm_int8_stacked"] = conv(m, optimize=True, representative=representative_batch2)
    return out


def main() -> None:
    out_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "tests/data/models"
    models = {**keras_models(), **tf_models(), **tf_keras_models()}
    for name, data in models.items():
        (out_dir / f"{name}.tflite").write_bytes(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main()
