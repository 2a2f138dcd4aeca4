"""A float32 MobileNet v2 (width 0.35, 96x96 input, 1000 classes) built with ModelBuilder, for whole-model tests
that must run on a fresh clone.

The converter's mobilenet_v2_035_96_f32.tflite is 6.7 MB (too large for tests/data); this is the same network
(the Keras layer sequence: a 3x3 stride-2 convolution, 17 inverted-residual blocks of expand 1x1 / depthwise 3x3 /
project 1x1 with residual ADDs, a 1x1 convolution to 1280 channels, global MEAN, FULLY_CONNECTED to 1000, SOFTMAX;
RELU6 fused where Keras has it) with seeded He-normal weights and small biases (the folded batch norms), so its
activations stay in the range of a trained network's. The int8 converter model is bundled in tests/data/models.
The reference is always the official runtime run in the test (run_official), never a stored output of ours.
"""

from __future__ import annotations

import functools

import numpy as np

from lite_numba.builder import ModelBuilder

# (expansion t, output channels c at width 0.35, repeats n, first stride s): Keras' MobileNetV2(alpha=0.35)
BLOCKS = [(1, 8, 1, 1), (6, 8, 2, 2), (6, 16, 3, 2), (6, 24, 4, 2), (6, 32, 3, 1), (6, 56, 3, 2), (6, 112, 1, 1)]


@functools.lru_cache(maxsize=2)
def mobilenet_v2(size: int = 96, classes: int = 1000, seed: int = 0) -> bytes:
    """The flatbuffer of the network (cached: building takes ~1 s)."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder()
    h = size
    x = b.add_input("input", np.float32, [1, h, h, 3])
    counter = iter(range(10**6))

    def conv(t, cin, cout, k, s, act):
        nonlocal h
        w = (rng.standard_normal((cout, k, k, cin)) * np.sqrt(2.0 / (k * k * cin))).astype(np.float32)
        bias = (rng.standard_normal(cout) * 0.1).astype(np.float32)
        h = -(-h // s)
        y = b.add_tensor(f"t{next(counter)}", np.float32, [1, h, h, cout])
        b.add_op("CONV_2D", [t, b.add_const(f"w{next(counter)}", w), b.add_const(f"b{next(counter)}", bias)], [y],
                 options={"padding": "SAME", "stride_h": s, "stride_w": s, "fused_activation_function": act})
        return y

    def dwconv(t, c, s):
        nonlocal h
        w = (rng.standard_normal((1, 3, 3, c)) * np.sqrt(2.0 / 9)).astype(np.float32)
        bias = (rng.standard_normal(c) * 0.1).astype(np.float32)
        h = -(-h // s)
        y = b.add_tensor(f"t{next(counter)}", np.float32, [1, h, h, c])
        b.add_op("DEPTHWISE_CONV_2D", [t, b.add_const(f"w{next(counter)}", w), b.add_const(f"b{next(counter)}", bias)],
                 [y], options={"padding": "SAME", "stride_h": s, "stride_w": s, "depth_multiplier": 1,
                               "fused_activation_function": "RELU6"}, version=2)
        return y

    t = conv(x, 3, 16, 3, 2, "RELU6")
    cin = 16
    for expand, cout, repeats, stride in BLOCKS:
        for r in range(repeats):
            s = stride if r == 0 else 1
            inp = t
            if expand != 1:
                t = conv(t, cin, cin * expand, 1, 1, "RELU6")
            t = dwconv(t, cin * expand, s)
            t = conv(t, cin * expand, cout, 1, 1, "NONE")
            if s == 1 and cin == cout:
                y = b.add_tensor(f"t{next(counter)}", np.float32, [1, h, h, cout])
                b.add_op("ADD", [inp, t], [y])
                t = y
            cin = cout
    t = conv(t, cin, 1280, 1, 1, "RELU6")
    pooled = b.add_tensor("pooled", np.float32, [1, 1280])
    b.add_op("MEAN", [t, b.add_const("axes", np.array([1, 2], np.int32))], [pooled], options={"keep_dims": False})
    w = (rng.standard_normal((classes, 1280)) * np.sqrt(1.0 / 1280)).astype(np.float32)
    logits = b.add_tensor("logits", np.float32, [1, classes])
    b.add_op("FULLY_CONNECTED", [pooled, b.add_const("fc_w", w), b.add_const("fc_b", np.zeros(classes, np.float32))],
             [logits])
    probs = b.add_tensor("probs", np.float32, [1, classes])
    b.add_op("SOFTMAX", [logits], [probs], options={"beta": 1.0})
    b.mark_output(probs)
    return b.build()
