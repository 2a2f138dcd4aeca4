"""Write a model's stride-2 SAME depthwise convolutions as Keras writes them: ZeroPadding2D, then a VALID convolution.

    python scripts/keras_pads.py IN.tflite OUT.tflite

Keras' MobileNetV2 / V3 put `ZeroPadding2D(correct_pad(x, k))` before every stride-2 depthwise layer and convert to a
PAD (the input zero point for a quantized model) and a VALID DEPTHWISE_CONV_2D; TF-Hub's converter models of the same
network have SAME layers instead. This script turns the second form into the first (the pads TFLite's SAME would
use: (0, 1) for an even size, (1, 1) for an odd one with a 3x3 window), so the fold of a PAD into its convolution
(lite_numba/runtime/fusion.py fold_pads) can be measured on the bench's MobileNetV2 files; both forms compute the
same values in the official runtime. Single-subgraph models of builtin ops only.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from lite_numba.builder import ModelBuilder
from lite_numba.format.model import load_model


def _quant(spec):
    q = spec.quantization
    if q.scales.size == 0:
        return None
    return {"scales": q.scales.tolist(), "zero_points": q.zero_points.tolist(),
            "quantized_dimension": int(q.quantized_dimension)}


def _same_pads(size: int, k: int, s: int, d: int) -> tuple[int, int]:
    out = -(-size // s)
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    return total // 2, total - total // 2


def rewrite(data: bytes) -> tuple[bytes, int]:
    """(the model with its stride-2 SAME depthwise layers as PAD + VALID, how many were rewritten)."""
    plan = load_model(data)
    if len(plan.subgraphs) != 1:
        raise ValueError("one subgraph only")
    g = plan.subgraphs[0]
    b = ModelBuilder()
    ids = {}
    for t in g.tensors:
        if t.data is not None:
            ids[t.index] = b.add_const(t.name, np.asarray(t.data), quant=_quant(t))
        elif t.index in g.inputs:
            ids[t.index] = b.add_input(t.name, t.dtype, list(t.shape), quant=_quant(t))
        else:
            ids[t.index] = b.add_tensor(t.name, t.dtype, list(t.shape), quant=_quant(t))
    changed = 0
    for n in g.nodes:
        if n.is_custom:
            raise ValueError(f"custom op {n.op_name}")
        ins = [ids.get(i, -1) if i >= 0 else -1 for i in n.inputs]
        o = dict(n.options)
        if (n.op_name == "DEPTHWISE_CONV_2D" and int(o.get("padding", 0)) == 0 and int(o.get("stride_h", 1)) == 2
                and int(o.get("stride_w", 1)) == 2):
            x = g.tensors[n.inputs[0]]
            _, kh, kw, _ = g.tensors[n.inputs[1]].shape
            pt, pb = _same_pads(x.shape[1], kh, 2, int(o.get("dilation_h_factor", 1)))
            pl, pr = _same_pads(x.shape[2], kw, 2, int(o.get("dilation_w_factor", 1)))
            shape = [x.shape[0], x.shape[1] + pt + pb, x.shape[2] + pl + pr, x.shape[3]]
            xp = b.add_tensor(f"{x.name}/zero_padding", x.dtype, shape, quant=_quant(x))
            pads = b.add_const(f"{x.name}/paddings", np.array([[0, 0], [pt, pb], [pl, pr], [0, 0]], np.int32))
            b.add_op("PAD", [ins[0], pads], [xp], version=2 if x.dtype == np.int8 else 1)
            ins[0], o["padding"] = xp, 1
            changed += 1
        b.add_op(n.op_name, ins, [ids[i] for i in n.outputs], options=o, version=n.version)
    for t in g.outputs:
        b.mark_output(ids[t])
    return b.build(), changed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    args = ap.parse_args()
    out, changed = rewrite(args.src.read_bytes())
    args.dst.write_bytes(out)
    print(f"{args.dst}: {changed} stride-2 depthwise layers as PAD + VALID")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
