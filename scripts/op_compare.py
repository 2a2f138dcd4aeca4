"""Per-node latency of a model, ours vs the official runtime (XNNPACK, 1 thread or --threads N): every node is cut
out into a one-node model (same tensors, quantization, options and constants) and both runtimes invoke it,
interleaved.

    python scripts/op_compare.py MODEL.tflite [--builtin] [--nodes 0,3,5] [--rounds 15] [--threads 2]

With LITE_NUMBA_ISA=avx2 or avxvnni (scripts/as_level.py sets it) the official kernels are restricted to the same
level (bench/official_isa.py).

Prints one row per node (ours us, theirs us, ratio; DIFF where the outputs are not bit-identical) and the sums;
the per-invoke overhead of each runtime (an empty-ish one-node model) is included in every row, so compare ratios of
the heavy rows. Nodes that run subgraphs (CALL_ONCE, WHILE, IF) and nodes that cannot run alone (a READ_VARIABLE
before any assignment) are named and skipped.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.format.model import load_model, read_model_bytes


def _quant(t):
    q = t.quantization
    if q is None or q.scales is None or len(q.scales) == 0:
        return None
    return {"scales": list(q.scales), "zero_points": list(np.broadcast_to(q.zero_points, len(q.scales))),
            "quantized_dimension": int(q.quantized_dimension)}


def folded_constants(sg) -> dict[int, np.ndarray]:
    """Outputs of DEQUANTIZE nodes of constant float16 weights (MediaPipe's float models), as the float32 constants
    both runtimes turn them into at prepare: one-node models then get constant weights, as in the whole model."""
    out = {}
    for node in sg.nodes:
        if node.op_name == "DEQUANTIZE" and sg.tensors[node.inputs[0]].is_const \
                and sg.tensors[node.inputs[0]].dtype == np.float16:
            out[node.outputs[0]] = np.asarray(sg.tensors[node.inputs[0]].data, np.float32)
    return out


def one_node_model(sg, node, folded: dict | None = None) -> bytes:
    mb = ModelBuilder()
    remap = {-1: -1}
    folded = folded or {}
    for i in node.inputs:
        if i < 0 or i in remap:
            continue
        t = sg.tensors[i]
        if i in folded:
            remap[i] = mb.add_const(t.name, folded[i], None)
        elif t.is_const:
            remap[i] = mb.add_const(t.name, np.array(t.data), _quant(t))
        else:
            remap[i] = mb.add_input(t.name, t.dtype, t.shape, quant=_quant(t))
    outs = []
    for i in node.outputs:
        t = sg.tensors[i]
        remap[i] = mb.add_tensor(t.name, t.dtype, t.shape, quant=_quant(t))
        mb.mark_output(remap[i])
        outs.append(remap[i])
    mb.add_op(node.op_name, [remap[i] for i in node.inputs], outs, options=node.options, version=node.version)
    return mb.build()


def _median_us(fn, inner, rounds):
    s = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        s.append((time.perf_counter() - t0) / inner * 1e6)
    return float(np.median(s))


def main() -> None:
    from ai_edge_litert.interpreter import Interpreter as Official
    from ai_edge_litert.interpreter import OpResolverType

    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--builtin", action="store_true", help="compare with the builtin kernels instead of XNNPACK")
    ap.add_argument("--nodes", default="")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1, help="num_threads of both runtimes")
    a = ap.parse_args()
    level = (os.environ.get("LITE_NUMBA_ISA") or "").lower()
    if level in ("avx2", "avxvnni"):  # the official kernels on the same instruction set (bench/official_isa.py)
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
        import official_isa

        print(official_isa.restrict(level))
    plan = load_model(read_model_bytes(a.model))
    sg = plan.subgraphs[0]
    pick = {int(s) for s in a.nodes.split(",") if s}
    kw = {"experimental_op_resolver_type": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES} if a.builtin else {}
    rng = np.random.default_rng(0)
    tot_o = tot_t = 0.0
    folded = folded_constants(sg)
    for node in sg.nodes:
        if (pick and node.index not in pick) or (node.outputs and node.outputs[0] in folded):
            continue
        calls = [f"{k} {v}" for k, v in node.options.items() if k.endswith("subgraph_index")]
        if calls:  # CALL_ONCE, WHILE, IF, CALL: a one-node model would name subgraphs it does not carry
            print(f"{node.index:3d} {node.op_name:18s} skipped: runs a subgraph ({', '.join(calls)})", flush=True)
            continue
        data = one_node_model(sg, node, folded)
        ours = Interpreter(model_content=data, num_threads=a.threads)
        theirs = Official(model_content=data, num_threads=a.threads, **kw)
        try:
            ours.allocate_tensors()
            theirs.allocate_tensors()
            for d in ours.get_input_details():
                dt = np.dtype(d["dtype"])
                x = rng.integers(-100, 100, size=d["shape"]).astype(dt) if dt.kind in "iu" else \
                    rng.standard_normal(d["shape"]).astype(dt)
                ours.set_tensor(d["index"], x)
                theirs.set_tensor(d["index"], x)
            ours.invoke()
            theirs.invoke()
        except (RuntimeError, ValueError) as e:  # (ours raise InvokeError, a RuntimeError; theirs RuntimeError)
            print(f"{node.index:3d} {node.op_name:18s} skipped: cannot run alone ({str(e).splitlines()[0]})",
                  flush=True)
            continue
        eq = all(np.array_equal(ours.get_tensor(d["index"]), theirs.get_tensor(d["index"]))
                 for d in ours.get_output_details())
        t0 = time.perf_counter()
        theirs.invoke()
        inner = max(1, int(2e-3 / max(time.perf_counter() - t0, 1e-7)))
        o = t = 1e30
        for _ in range(3):  # interleaved
            o = min(o, _median_us(ours.invoke, inner, a.rounds))
            t = min(t, _median_us(theirs.invoke, inner, a.rounds))
        tot_o += o
        tot_t += t
        shapes = " ".join("x".join(map(str, sg.tensors[i].shape)) for i in node.inputs if i >= 0)
        print(f"{node.index:3d} {node.op_name:18s} {o:8.1f} {t:8.1f} {o / t:5.2f} {'' if eq else 'DIFF'} {shapes}",
              flush=True)
    print(f"sum {tot_o:.1f} {tot_t:.1f} {tot_o / tot_t:.2f}")


if __name__ == "__main__":
    main()
