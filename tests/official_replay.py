"""Run saved fuzz variants in the official runtime and compare with our saved outputs (subprocess of
test_loader_fuzz.py, since the official runtime may itself crash on a corrupted file).

Usage: python official_replay.py DIR  -> prints 'compared N mismatched M' and the mismatching files."""

from __future__ import annotations

import glob
import os
import sys

import numpy as np


def main() -> None:
    from lite_numba.testing import official_interpreter

    compared, bad = 0, []
    for model in sorted(glob.glob(os.path.join(sys.argv[1], "*.tflite"))):
        saved = np.load(model[:-7] + ".npz")
        try:
            it = official_interpreter(model)
            details = it.get_input_details()
            for k, d in enumerate(details):
                it.set_tensor(d["index"], saved[f"arr_{k}"])
            it.invoke()
            theirs = [it.get_tensor(d["index"]) for d in it.get_output_details()]
        except Exception:  # noqa: BLE001 - the official runtime refused this variant; nothing to compare
            continue
        compared += 1
        ours = [saved[f"out{k}"] for k in range(len(theirs))]
        for a, b in zip(ours, theirs):
            if a.shape != b.shape or a.dtype != b.dtype:
                bad.append(f"{model}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}")
                break
            if a.dtype.kind == "f":
                finite = np.isfinite(b)
                same_nan = np.array_equal(np.isfinite(a), finite)
                scale = max(1.0, float(np.max(np.abs(b[finite])))) if finite.any() else 1.0
                if not same_nan or (finite.any() and np.max(np.abs(a[finite] - b[finite])) > 1e-4 * scale):
                    bad.append(model)
                    break
            elif not np.array_equal(a, b):
                bad.append(model)
                break
    print(f"compared {compared} mismatched {len(bad)}")
    for m in bad:
        print("MISMATCH", m)


if __name__ == "__main__":
    main()
