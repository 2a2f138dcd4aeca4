"""Feed randomly corrupted variants of models to the Interpreter (run as a subprocess by test_loader_fuzz.py).

Usage: python fuzz_models.py OUT_DIR COUNT MODEL...  Every variant must raise a Python exception or run; variants that
ran are saved with our outputs in OUT_DIR for comparison with the official runtime. A crash kills this process, which
the test sees as a failure.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np


def mutate(data: bytes, rng: np.random.Generator) -> bytes:
    b = bytearray(data)
    kind = rng.integers(0, 4)
    if kind == 0:  # flip a few random bytes
        for _ in range(int(rng.integers(1, 9))):
            b[int(rng.integers(0, len(b)))] ^= int(rng.integers(1, 256))
    elif kind == 1:  # truncate
        b = b[: int(rng.integers(0, len(b)))]
    elif kind == 2:  # overwrite an aligned 32-bit word (offsets, lengths, indices) with a hostile value
        pos = int(rng.integers(0, max(1, len(b) // 4))) * 4
        value = int(rng.choice([-1, 0, 1, 2, 3, 7, 255, 65535, 2**31 - 1, -(2**31), int(rng.integers(0, 2**32))]))
        b[pos:pos + 4] = (value & 0xFFFFFFFF).to_bytes(4, "little")
    else:  # small integer change in the first part (tables, vectors of indices)
        pos = int(rng.integers(0, min(len(b), 2048)))
        b[pos] = (b[pos] + int(rng.choice([-2, -1, 1, 2, 16]))) % 256
    return bytes(b)


def main() -> None:
    out_dir, count, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    from lite_numba import Interpreter

    rng = np.random.default_rng(1234)
    stats = {"error": 0, "ran": 0, "ran_by_model": {}}
    for i in range(count):
        path = models[i % len(models)]
        data = mutate(open(path, "rb").read(), rng)
        try:
            it = Interpreter(model_content=data)
            it.allocate_tensors()
            inputs = []
            for d in it.get_input_details():
                shape, dt = tuple(d["shape"]), np.dtype(d["dtype"])
                if np.prod(shape, dtype=np.float64) > 1e6:
                    raise ValueError("input too large for this fuzz run")
                x = (rng.standard_normal(shape) * 3).astype(dt)
                it.set_tensor(d["index"], x)
                inputs.append(x)
            it.invoke()
            outs = [it.get_tensor(d["index"]) for d in it.get_output_details()]
        except Exception:  # noqa: BLE001 - any Python exception is an acceptable answer to a corrupted file
            stats["error"] += 1
            continue
        stats["ran"] += 1
        source = os.path.splitext(os.path.basename(path))[0]
        stats["ran_by_model"][source] = stats["ran_by_model"].get(source, 0) + 1
        base = os.path.join(out_dir, f"v{i}_{source}")
        with open(base + ".tflite", "wb") as f:
            f.write(data)
        np.savez(base + ".npz", *inputs, **{f"out{k}": o for k, o in enumerate(outs)})
    print(json.dumps(stats))


if __name__ == "__main__":
    main()
