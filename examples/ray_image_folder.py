"""Classify a folder of images with Ray Data and lite-numba (pip install "lite-numba[ray]").

    python examples/ray_image_folder.py IMAGE_DIR [--out results.npz] [--workers 2]
    python examples/ray_image_folder.py --demo 200 /tmp/images     # writes 200 demo images first

Images are binary PPM files (P6, 32x32 RGB: what the bundled small_cnn_f32 takes); each is read and scaled to
[0, 1] in the predictor's preprocess, on the Ray workers. The model is loaded and compiled once per actor; every
actor of the machine shares lite-numba's compile cache. Prints the class counts; --out saves the file names and
logits (tests/test_scaleout_examples.py checks them against a plain Interpreter loop)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

MODEL = Path(__file__).resolve().parents[1] / "lite_numba" / "examples" / "small_cnn_f32.tflite"


def write_ppm(path: Path, rgb: np.ndarray) -> None:
    h, w, _ = rgb.shape
    path.write_bytes(f"P6\n{w} {h}\n255\n".encode() + rgb.astype(np.uint8).tobytes())


def read_ppm(path: str) -> np.ndarray:
    data = Path(path).read_bytes()
    fields = data.split(maxsplit=4)  # magic, width, height, maxval, pixels
    if fields[0] != b"P6":
        raise ValueError(f"{path}: not a binary PPM (P6) image")
    w, h = int(fields[1]), int(fields[2])
    pixels = np.frombuffer(data[len(data) - w * h * 3:], np.uint8)
    return pixels.reshape(h, w, 3)


def make_demo(folder: Path, n: int, seed: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:32, 0:32]
    for k in range(n):  # stripes and blobs of random colours
        f = rng.uniform(0.1, 0.8)
        base = (np.sin(f * xx + rng.uniform(0, 6)) + np.cos(f * yy))[..., None] * rng.uniform(0, 127, 3)
        write_ppm(folder / f"img_{k:05d}.ppm", np.clip(128 + base + rng.normal(0, 10, (32, 32, 3)), 0, 255))


def preprocess(row: dict) -> np.ndarray:
    return (read_ppm(row["path"]).astype(np.float32) / 255.0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--demo", type=int, default=0, help="write this many demo images into FOLDER first")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.demo:
        make_demo(args.folder, args.demo)
    paths = sorted(str(p) for p in args.folder.glob("*.ppm"))
    if not paths:
        ap.error(f"no .ppm images in {args.folder}")

    import ray

    from lite_numba.batch.ray import RayPredictor, actor_pool

    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = bool(os.isatty(2))
        ds = ray.data.from_items([{"path": p} for p in paths])
        rows = ds.map_batches(RayPredictor, fn_constructor_kwargs={"model": str(MODEL), "preprocess": preprocess},
                              batch_size=args.batch_size, compute=actor_pool(args.workers), num_cpus=1).take_all()
    finally:
        ray.shutdown()
    rows.sort(key=lambda r: r["path"])
    logits = np.stack([r["Identity"] for r in rows])
    classes, counts = np.unique(logits.argmax(axis=1), return_counts=True)
    print(f"{len(rows)} images; class counts: " + ", ".join(f"{c}: {n}" for c, n in zip(classes, counts)))
    if args.out:
        np.savez(args.out, paths=np.array([r["path"] for r in rows]), logits=logits)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
