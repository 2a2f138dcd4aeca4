"""Run saved fuzz variants in the official runtime and compare with our saved outputs (subprocess of
test_loader_fuzz.py, since the official runtime may itself crash on a corrupted file).

Usage: python official_replay.py DIR  -> prints one JSON line: how many variants were compared, how many only we ran
(the official runtime refused them; counted per source model), and the mismatches (assert_close's message each)."""

from __future__ import annotations

import glob
import json
import os
import sys

import numpy as np


def main() -> None:
    from lite_numba.testing import assert_close, official_interpreter

    compared, bad, only_ours = 0, [], {}
    for model in sorted(glob.glob(os.path.join(sys.argv[1], "*.tflite"))):
        saved = np.load(model[:-7] + ".npz")
        try:
            it = official_interpreter(model)
            details = it.get_input_details()
            for k, d in enumerate(details):
                it.set_tensor(d["index"], saved[f"arr_{k}"])
            it.invoke()
            theirs = [it.get_tensor(d["index"]) for d in it.get_output_details()]
        except Exception:  # noqa: BLE001 - the official runtime refused this variant: only we ran it
            source = os.path.basename(model)[:-7].split("_", 1)[1]
            only_ours[source] = only_ours.get(source, 0) + 1
            continue
        compared += 1
        n_ours = sum(1 for k in saved.files if k.startswith("out"))
        if n_ours != len(theirs):
            bad.append(f"{model}: {n_ours} outputs vs {len(theirs)}")
            continue
        for k, b in enumerate(theirs):
            try:  # a corrupted model may compute anything: whole-model tolerance, NaN/inf must coincide
                assert_close(saved[f"out{k}"], b, family="model", what=f"{os.path.basename(model)} output {k}")
            except AssertionError as e:
                bad.append(str(e))
                break
    print(json.dumps({"compared": compared, "mismatched": bad, "only_ours": only_ours}))


if __name__ == "__main__":
    main()
