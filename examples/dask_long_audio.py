"""Band energies of a long audio file, frame by frame, with Dask and lite-numba (pip install "lite-numba[dask]").

    python examples/dask_long_audio.py AUDIO.wav [--out energies.npz] [--workers 2]
    python examples/dask_long_audio.py --demo 60 /tmp/long.wav       # writes a 60-second demo recording first

The recording (16-bit mono WAV) is cut into frames of 512 samples (hop 256) as a dask.array chunked along the
frames; a small model (written here with lite_numba.builder: a Hann window, a 32-band cosine and sine projection
and the squared magnitude; its batch dimension is dynamic, so each block runs as one resized invoke) turns every
frame into 32 band energies on a distributed.LocalCluster's worker processes. Prints the loudest band over time;
--out saves the energies and the model (tests/test_scaleout_examples.py checks them against a plain Interpreter
loop)."""

from __future__ import annotations

import argparse
import wave
from pathlib import Path

import numpy as np

FRAME, HOP, BANDS, RATE = 512, 256, 32, 16000


def band_model() -> bytes:
    from lite_numba.builder import ModelBuilder

    n = np.arange(FRAME)
    freqs = np.geomspace(60, RATE / 2 * 0.9, BANDS)
    window = (0.5 - 0.5 * np.cos(2 * np.pi * n / FRAME)).astype(np.float32)
    cos = (np.cos(2 * np.pi * freqs[:, None] * n / RATE) / FRAME).astype(np.float32)
    sin = (np.sin(2 * np.pi * freqs[:, None] * n / RATE) / FRAME).astype(np.float32)
    b = ModelBuilder()
    dyn = [-1, FRAME]
    x = b.add_input("frames", np.float32, [1, FRAME], shape_signature=dyn)
    w = b.add_tensor("windowed", np.float32, [1, FRAME], shape_signature=dyn)
    re = b.add_tensor("re", np.float32, [1, BANDS], shape_signature=[-1, BANDS])
    im = b.add_tensor("im", np.float32, [1, BANDS], shape_signature=[-1, BANDS])
    re2 = b.add_tensor("re2", np.float32, [1, BANDS], shape_signature=[-1, BANDS])
    im2 = b.add_tensor("im2", np.float32, [1, BANDS], shape_signature=[-1, BANDS])
    e = b.add_tensor("energy", np.float32, [1, BANDS], shape_signature=[-1, BANDS])
    b.add_op("MUL", [x, b.add_const("hann", window)], [w])
    b.add_op("FULLY_CONNECTED", [w, b.add_const("cos", cos), -1], [re])
    b.add_op("FULLY_CONNECTED", [w, b.add_const("sin", sin), -1], [im])
    b.add_op("MUL", [re, re], [re2])
    b.add_op("MUL", [im, im], [im2])
    b.add_op("ADD", [re2, im2], [e])
    b.mark_output(e)
    return b.build()


def write_demo(path: Path, seconds: float, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    sweep = np.sin(2 * np.pi * (100 + 3000 * t / seconds) * t)  # a slow chirp over the whole recording
    beeps = np.sin(2 * np.pi * 1000 * t) * (np.sin(2 * np.pi * 0.5 * t) > 0.9)
    signal = 0.4 * sweep + 0.3 * beeps + 0.02 * rng.standard_normal(t.size)
    with wave.open(str(path), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(RATE)
        f.writeframes((np.clip(signal, -1, 1) * 32767).astype("<i2").tobytes())


def read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path), "rb") as f:
        if f.getsampwidth() != 2 or f.getnchannels() != 1:
            raise ValueError(f"{path}: expected 16-bit mono WAV")
        return np.frombuffer(f.readframes(f.getnframes()), "<i2").astype(np.float32) / 32768.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wav", type=Path)
    ap.add_argument("--demo", type=float, default=0, help="write a demo recording of this many seconds first")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--frames-per-chunk", type=int, default=1024)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.demo:
        write_demo(args.wav, args.demo)
    audio = read_wav(args.wav)
    if audio.size < FRAME:
        ap.error(f"{args.wav}: shorter than one frame ({FRAME} samples)")

    import dask.array as da
    from distributed import Client, LocalCluster

    from lite_numba.batch.dask import predict_array

    model = args.wav.with_suffix(".bands.tflite")
    model.write_bytes(band_model())
    starts = np.arange(0, audio.size - FRAME + 1, HOP)
    frames = np.lib.stride_tricks.sliding_window_view(audio, FRAME)[starts]  # (n_frames, FRAME), a view
    x = da.from_array(frames, chunks=(args.frames_per_chunk, FRAME))
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cl, \
            Client(cl):
        energy = predict_array(x, str(model), batch_size=args.frames_per_chunk).compute()
    loudest = energy.argmax(axis=1)
    per_second = RATE // HOP
    print(f"{audio.size / RATE:.1f} s, {len(energy)} frames; loudest band per second: "
          + " ".join(str(int(np.bincount(loudest[s:s + per_second]).argmax()))
                     for s in range(0, len(loudest), per_second)[:30]) + (" ..." if len(loudest) > 30 * per_second
                                                                          else ""))
    if args.out:
        np.savez(args.out, energy=energy, frames_start=starts, model=np.frombuffer(model.read_bytes(), np.uint8))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
