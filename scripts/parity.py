"""Run models from a models folder (default ../shared/models) and compare with the official runtime's outputs
stored in ref/NAME.npz (nodelegate_output_k). Usage: python scripts/parity.py [--dir D] [NAME|GLOB ...]"""

from __future__ import annotations

import argparse
import fnmatch
import os
import sys
import time
import traceback

import numpy as np


def compare(name: str, folder: str) -> tuple[str, str]:
    from lite_numba import Interpreter

    ref = np.load(os.path.join(folder, "ref", name + ".npz"))
    it = Interpreter(model_path=os.path.join(folder, name + ".tflite"))
    it.allocate_tensors()
    for k, d in enumerate(it.get_input_details()):
        it.set_tensor(d["index"], ref[f"input_{k}"])
    it.invoke()
    worst = []
    for k, d in enumerate(it.get_output_details()):
        key = f"nodelegate_output_{k}" if f"nodelegate_output_{k}" in ref.files else f"tf_output_{k}"
        r = ref[key]
        o = it.get_tensor(d["index"])
        if o.shape != r.shape or o.dtype != r.dtype:
            return "FAIL", f"output {k}: ours {o.dtype}{list(o.shape)} vs ref {r.dtype}{list(r.shape)}"
        if o.dtype.kind in "iub":
            diff = np.abs(o.astype(np.int64) - r.astype(np.int64))
            exact = float(np.mean(diff == 0)) if diff.size else 1.0
            worst.append(f"out{k} exact={exact:.4f} maxstep={int(diff.max()) if diff.size else 0}")
            if o.dtype.kind == "b" and exact < 1 or exact < 0.999 or (diff.size and diff.max() > 1):
                return "FAIL", "; ".join(worst)
        else:
            err = float(np.max(np.abs(o.astype(np.float64) - r))) if o.size else 0.0
            scale = max(1.0, float(np.max(np.abs(r)))) if r.size else 1.0
            worst.append(f"out{k} rel={err / scale:.2e}")
            if not err <= 1e-4 * scale:
                return "FAIL", "; ".join(worst)
    return "ok", "; ".join(worst)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "models"))
    ap.add_argument("names", nargs="*", default=["*"])
    a = ap.parse_args()
    names = sorted(f[:-7] for f in os.listdir(a.dir) if f.endswith(".tflite"))
    chosen = [n for n in names if any(fnmatch.fnmatch(n, p) for p in a.names)]
    ok = 0
    for n in chosen:
        t = time.time()
        try:
            status, info = compare(n, a.dir)
        except Exception as e:  # report and go on
            status, info = "ERROR", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            if os.environ.get("PARITY_TRACEBACK"):
                traceback.print_exc()
        ok += status == "ok"
        print(f"{status:5s} {n:40s} {time.time() - t:6.2f}s {info}", flush=True)
    print(f"{ok}/{len(chosen)} ok")
    return 0 if ok == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
