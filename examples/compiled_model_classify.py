"""Classify images with the LiteRT 2 API (CompiledModel, TensorBuffer, Options), written for ai-edge-litert.

    python examples/compiled_model_classify.py [--model MODEL.tflite] [--images 8] [--seed 0] [--out probs.npy]

This program uses ai_edge_litert's CompiledModel the way its documentation does: options with the CPU accelerator,
buffers made by the model, write / run_by_index / read, then run_by_name on a second set of buffers. To run it on
lite-numba, change the import lines below from `ai_edge_litert` to `lite_numba` (`from lite_numba.compiled_model
import CompiledModel`, ...); nothing else changes. tests/test_compiled_model.py runs it both ways and compares the
probabilities. The model is the small CNN bundled with lite-numba (32x32 RGB images, 10 classes); the images are
random, made from --seed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from ai_edge_litert.compiled_model import CompiledModel
from ai_edge_litert.hardware_accelerator import HardwareAccelerator
from ai_edge_litert.options import CpuOptions, Options

MODEL = Path(__file__).resolve().parents[1] / "lite_numba" / "examples" / "small_cnn_f32.tflite"


def classify(model_path: str, images: int, seed: int) -> np.ndarray:
    """The class probabilities of `images` random images, one row per image."""
    options = Options(hardware_accelerators=HardwareAccelerator.CPU, cpu_options=CpuOptions(num_threads=1))
    with CompiledModel.from_file(model_path, options=options) as model:
        key = next(iter(model.get_signature_list()))
        index = model.get_signature_index(key)
        (in_name, in_detail), = model.get_input_tensor_details(key).items()
        (out_name, out_detail), = model.get_output_tensor_details(key).items()
        size = model.get_output_buffer_requirements(0, index)["buffer_size"] // np.dtype(np.float32).itemsize
        print(f"{Path(model_path).name}: signature {key!r}, input {in_name} {in_detail['shape']} "
              f"{in_detail['dtype']}, output {out_name} {out_detail['shape']}, "
              f"fully accelerated: {model.is_fully_accelerated()}")

        inputs = model.create_input_buffers(index)
        outputs = model.create_output_buffers(index)
        spare_in = model.create_input_buffer_by_name(key, in_name)
        spare_out = model.create_output_buffer_by_name(key, out_name)
        rng = np.random.default_rng(seed)
        rows = []
        for k in range(images):
            image = rng.random(in_detail["shape"], dtype=np.float32)
            if k % 2 == 0:
                inputs[0].write(image)
                model.run_by_index(index, inputs, outputs)
                rows.append(outputs[0].read(size, np.float32))
            else:  # the same by name, on the second set of buffers
                spare_in.write(image)
                model.run_by_name(key, {in_name: spare_in}, {out_name: spare_out})
                rows.append(spare_out.read(size, np.float32))
        for buffer in (*inputs, *outputs, spare_in, spare_out):
            buffer.destroy()
    return np.stack(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(MODEL))
    ap.add_argument("--images", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="", help="save the probabilities (.npy)")
    args = ap.parse_args()
    probs = classify(args.model, args.images, args.seed)
    for k, row in enumerate(probs):
        print(f"image {k}: class {int(np.argmax(row))} ({float(np.max(row)):.3f})")
    if args.out:
        np.save(args.out, probs)


if __name__ == "__main__":
    main()
