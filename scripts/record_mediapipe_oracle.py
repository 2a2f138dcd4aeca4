"""Record MediaPipe's own outputs for the attention-mesh custom-op test models (tests/mediapipe_attention_models.py)
into tests/data/mediapipe/attention_ops.npz, the oracle of tests/test_mediapipe_ops.py (the official LiteRT runtime
does not ship these ops).

MediaPipe runs each model in its own TFLite interpreter with its custom-op resolver: a CalculatorGraph of
TfLiteCustomOpResolverCalculator, TensorConverterCalculator (SRGB image -> float tensor in [0, 1]),
InferenceCalculator (delegate: plain TFLite, no XNNPACK), SplitTensorVectorCalculator and TensorsToFloatsCalculator.
The exact float input it built is recorded too. Needs the `mediapipe` package (tested with 0.10.14, which wants
protobuf < 5; it can live in its own folder: pip install --target DIR --no-deps mediapipe==0.10.14 protobuf==4.25.3
absl-py, then PYTHONPATH=DIR; stub cv2 / matplotlib packages suffice for this use).

Usage: PYTHONPATH=DIR python scripts/record_mediapipe_oracle.py [--seeds 4] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))


def run_mediapipe(model_path: str, image_u8: np.ndarray, n_out: int) -> tuple[np.ndarray, list[np.ndarray]]:
    import mediapipe as mp
    from google.protobuf import text_format
    from mediapipe.calculators.core import split_vector_calculator_pb2  # noqa: F401 - registers the options
    from mediapipe.calculators.tensor import (
        inference_calculator_pb2,  # noqa: F401
        tensor_converter_calculator_pb2,  # noqa: F401
        tensors_to_floats_calculator_pb2,  # noqa: F401
    )
    from mediapipe.calculators.tflite import tflite_custom_op_resolver_calculator_pb2  # noqa: F401
    from mediapipe.framework import calculator_pb2
    from mediapipe.python import packet_creator, packet_getter

    splits = " ".join(f"ranges {{ begin: {k} end: {k + 1} }}" for k in range(n_out))
    streams = " ".join(f'output_stream: "t{k}"' for k in range(n_out))
    floats = "\n".join(f'node {{ calculator: "TensorsToFloatsCalculator" input_stream: "TENSORS:t{k}" '
                       f'output_stream: "FLOATS:f{k}" }}' for k in range(n_out))
    cfg = f"""
input_stream: "image"
node {{ calculator: "TfLiteCustomOpResolverCalculator" output_side_packet: "OP_RESOLVER:op_resolver"
        options {{ [mediapipe.TfLiteCustomOpResolverCalculatorOptions.ext] {{ use_gpu: false }} }} }}
node {{ calculator: "TensorConverterCalculator" input_stream: "IMAGE:image" output_stream: "TENSORS:in_tensors"
        options {{ [mediapipe.TensorConverterCalculatorOptions.ext] {{ zero_center: false }} }} }}
node {{ calculator: "InferenceCalculator" input_stream: "TENSORS:in_tensors" output_stream: "TENSORS:out_tensors"
        input_side_packet: "OP_RESOLVER:op_resolver"
        options {{ [mediapipe.InferenceCalculatorOptions.ext] {{
          model_path: "{model_path}" delegate {{ tflite {{}} }} }} }} }}
node {{ calculator: "SplitTensorVectorCalculator" input_stream: "out_tensors" {streams}
        options {{ [mediapipe.SplitVectorCalculatorOptions.ext] {{ {splits} }} }} }}
node {{ calculator: "TensorsToFloatsCalculator" input_stream: "TENSORS:in_tensors" output_stream: "FLOATS:fin" }}
{floats}
"""
    config = calculator_pb2.CalculatorGraphConfig()
    text_format.Parse(cfg, config)
    graph = mp.CalculatorGraph(graph_config=config)
    got: dict[str, np.ndarray] = {}
    for name in ["fin"] + [f"f{k}" for k in range(n_out)]:
        graph.observe_output_stream(
            name, lambda _s, p, name=name: got.__setitem__(name, np.array(packet_getter.get_float_list(p), np.float32)))
    graph.start_run()
    frame = packet_creator.create_image_frame(image_format=mp.ImageFormat.SRGB, data=np.ascontiguousarray(image_u8))
    graph.add_packet_to_input_stream("image", frame.at(0))
    graph.close()
    return got["fin"], [got[f"f{k}"] for k in range(n_out)]


def main() -> int:
    import mediapipe as mp
    from mediapipe_attention_models import CASES, attention_ops_model, image_for

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--out", default=os.path.join(HERE, "..", "tests", "data", "mediapipe", "attention_ops.npz"))
    a = ap.parse_args()
    arrays: dict[str, np.ndarray] = {"mediapipe_version": np.array(mp.__version__)}
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            path = os.path.join(tmp, case[0] + ".tflite")
            with open(path, "wb") as fh:
                fh.write(attention_ops_model(case))
            for seed in range(a.seeds):
                fin, outs = run_mediapipe(path, image_for(case, seed), 4)
                arrays[f"{case[0]}/{seed}/input"] = fin
                for k, o in enumerate(outs):
                    arrays[f"{case[0]}/{seed}/out{k}"] = o
    np.savez_compressed(a.out, **arrays)
    print(f"wrote {a.out}: {len(CASES)} models x {a.seeds} inputs (MediaPipe {mp.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
