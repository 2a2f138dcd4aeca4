"""Record MediaPipe's own output of the selfie segmentation model (tests/data/real/mediapipe_selfie_segmentation.tflite,
custom op Convolution2DTransposeBias) into tests/data/mediapipe/selfie.npz: the oracle of
tests/test_mediapipe_ops.py (the official LiteRT runtime does not ship the custom op).

MediaPipe runs the shipped model in its own TFLite interpreter with its custom-op resolver (the graph of
scripts/record_mediapipe_oracle.py: SRGB image -> float tensor in [0, 1], plain TFLite delegate, no XNNPACK); the
exact float input it built is recorded with the output (float16 would lose the comparison's precision: float32).
Needs the `mediapipe` package (see scripts/record_mediapipe_oracle.py for how to install 0.10.14 in its own folder).

Usage: PYTHONPATH=DIR python tests/record_selfie_oracle.py
"""

from __future__ import annotations

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
MODEL = os.path.join(HERE, "data", "real", "mediapipe_selfie_segmentation.tflite")
OUT = os.path.join(HERE, "data", "mediapipe", "selfie.npz")
SEED = 3


def main() -> int:
    import mediapipe as mp
    from record_mediapipe_oracle import run_mediapipe

    image = np.random.default_rng(SEED).integers(0, 256, (256, 256, 3), dtype=np.uint8)
    fin, (out,) = run_mediapipe(MODEL, image, 1)
    np.savez_compressed(OUT, input=fin.reshape(1, 256, 256, 3), output=out.reshape(1, 256, 256, 1),
                        mediapipe_version=np.array(mp.__version__))
    print(f"wrote {OUT} (MediaPipe {mp.__version__}); output range {out.min():.4g}..{out.max():.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
