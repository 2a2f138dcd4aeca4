"""`lite-numba inspect MODEL.tflite [--json] [--builtin-only] [--composites]`: what a model holds and whether it can
run here.

Reports subgraphs, signatures, the inputs and outputs with their quantization, the op table (builtin code or custom
name, version, count, whether this installation can run it and why not; a STABLEHLO_COMPOSITE by its name, e.g.
"STABLEHLO_COMPOSITE odml.rms_norm", saying whether a fused kernel or its inlined decomposition runs it), tensor
counts and sizes, and the activation arena of subgraph 0 (planned by preparing the model without compiling it).
`--composites` lists every composite node with its attributes and its decomposition's nodes (nested ones indented).
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from ..api.compiled_model import environ_override
from ..api.interpreter import Interpreter
from ..format.custom_options import decode_composite_attributes
from ..format.model import load_model, read_model_bytes
from ..format.plan import ModelPlan, SubgraphPlan, TensorSpec
from ..format.schema import PACKED_BITS
from ..runtime.composites import composite_label, composites_mode, find_fused, is_composite
from ..runtime.resolver import BuiltinOpResolver, MutableOpResolver, OpResolver, default_op_resolver, kernel_path

__all__ = ["inspect_model", "format_inspection", "op_status"]


def _quant(spec: TensorSpec) -> dict | None:
    q = spec.quantization
    if q.blockwise:
        return {"block_size": int(q.block_size), "scales_tensor": int(q.scales_tensor),
                "zero_points_tensor": int(q.zero_points_tensor)}
    if q.scales.size == 0:
        return None
    if q.scales.size == 1:
        return {"scale": float(q.scales[0]), "zero_point": int(q.zero_points[0])}
    return {"scales": [float(s) for s in q.scales], "zero_points": [int(z) for z in q.zero_points],
            "quantized_dimension": int(q.quantized_dimension)}


def _tensor_info(spec: TensorSpec) -> dict:
    return {"name": spec.name, "index": spec.index, "dtype": spec.type_name, "shape": list(spec.shape),
            "shape_signature": list(spec.shape_signature), "quantization": _quant(spec)}


def _nbytes(spec: TensorSpec) -> int:
    if spec.type_name == "STRING":  # the packed bytes of a constant (a computed value's size is known when run)
        return int(spec.data.size) if spec.data is not None else 0
    if spec.type_name in ("RESOURCE", "VARIANT"):
        return 0
    if spec.type_name in PACKED_BITS:  # INT4, INT2, UINT4: stored packed
        return (int(np.prod(spec.shape, dtype=np.int64)) * PACKED_BITS[spec.type_name] + 7) // 8
    return int(np.prod(spec.shape, dtype=np.int64)) * spec.dtype.itemsize


def _versions_text(ranges: list[tuple[int, int]]) -> str:
    parts = sorted({f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in ranges})
    return ", ".join(parts)


def _provider(kernel) -> str:
    """The module that defines a custom op's kernel (e.g. lite_numba.plugins.examples)."""
    for obj in (kernel, getattr(kernel, "prepare", None)):
        mod = getattr(obj, "__module__", None)
        if mod and mod != "lite_numba.ops":
            return mod
    return type(kernel).__module__


def op_status(resolver: OpResolver, op_name: str, version: int, is_custom: bool, builtin_only: bool = False,
              custom_options: bytes | None = None) -> tuple[bool, str]:
    """(can run, reason) for one (op, version) against `resolver`. A custom kernel serving a family of ops (the
    Flex ops) may answer for the particular op from its custom options (`meta["op_status"]`)."""
    versions = None
    if isinstance(resolver, MutableOpResolver):
        versions = resolver.custom_versions(op_name) if is_custom else resolver.builtin_versions(op_name)
    if is_custom:
        k = resolver.find_custom(op_name, version)
        if k is not None and callable(k.meta.get("op_status")):
            return k.meta["op_status"](op_name, custom_options)
        if k is not None:
            return True, f"custom op, provided by {_provider(k)}"
        if versions:
            return False, f"custom op, version {version} not registered (we have {_versions_text(versions)})"
        if builtin_only:
            return False, "custom op, not registered (--builtin-only: plugins and @custom_op ops are not loaded)"
        return False, "custom op, not registered"
    k = resolver.find_builtin(op_name, version)
    if k is not None:
        return True, f"builtin (we have {_versions_text(versions)})" if versions else "builtin"
    if versions:
        return False, f"builtin, version {version} not supported (we have {_versions_text(versions)})"
    return False, "builtin, not implemented"


STRING_HOST = "STRING operands: host kernel (Python / numpy over packed strings, not compiled)"
TEXT_HOST = "host kernel (Python / numpy, not compiled)"


def _host_note(resolver: OpResolver, sg: SubgraphPlan, n) -> str:
    """How a builtin node runs when not in a compiled segment by nature: its op's STRING variant (a STRING tensor),
    or a text / hash-table kernel of the host."""
    k = None if n.is_custom else resolver.find_builtin(n.op_name, n.version)
    if k is None:
        return ""
    if getattr(k, "strings", None) is not None and any(
            0 <= i < len(sg.tensors) and sg.tensors[i].type_name == "STRING" for i in (*n.inputs, *n.outputs)):
        return STRING_HOST
    return TEXT_HOST if getattr(k, "module", "") in ("movement.strings", "host.hashtable") else ""


def _nodes(sg: SubgraphPlan) -> list[dict]:
    return [{"index": n.index, "op_name": n.op_name, "version": n.version, "custom": n.is_custom,
             "inputs": list(n.inputs), "outputs": list(n.outputs)} for n in sg.nodes]


def _composite(plan: ModelPlan, resolver: OpResolver, si: int, n, depth: int = 0) -> dict | None:
    """A STABLEHLO_COMPOSITE node: its name, version, attributes, decomposition subgraph, what runs it here (a fused
    kernel, its decomposition inlined, or a kernel the resolver supplies) and its decomposition's nodes (nested
    composites described the same way)."""
    kernel = None if n.is_custom else resolver.find_builtin(n.op_name, n.version)
    if n.op_name != "STABLEHLO_COMPOSITE" or kernel is None:
        return None
    index = n.options.get("decomposition_subgraph_index", -1)
    info = {"subgraph": si, "node": n.index, "name": n.options.get("name", ""), "version": n.options.get("version", 0),
            "decomposition_subgraph": index, "attributes": None, "runs": "", "decomposition": []}
    try:
        attributes = decode_composite_attributes(n.options.get("composite_attributes") or b"",
                                                 int(n.options.get("composite_attributes_format") or 0))
        info["attributes"] = {k: (v if not isinstance(v, bytes) else v.hex()) for k, v in attributes.items()}
    except ValueError as e:
        info["runs"] = f"cannot run: {e}"
        return info
    mode = composites_mode()
    if not is_composite(n, kernel):
        info["runs"] = f"kernel {kernel.name} (the resolver's)"
    elif mode == "call":
        info["runs"] = "decomposition called (LITE_NUMBA_COMPOSITES=call)"
    else:
        specs = [plan.subgraphs[si].tensors[i] if i >= 0 else None for i in n.inputs]
        fused = find_fused(info["name"], int(info["version"] or 0), attributes, specs) if mode == "fused" else None
        info["runs"] = f"fused kernel {fused.name}" if fused is not None else "decomposition inlined"
    if depth < len(plan.subgraphs) and 0 <= index < len(plan.subgraphs):
        for d in plan.subgraphs[index].nodes:
            nested = _composite(plan, resolver, index, d, depth + 1)
            info["decomposition"].append({"index": d.index, "op_name": composite_label(d), "version": d.version,
                                          "inputs": list(d.inputs), "outputs": list(d.outputs), "composite": nested})
    return info


def _python_executor():
    """Plan memory without compiling: the executor's debugging mode builds no compiled runner."""
    return environ_override("LITE_NUMBA_EXECUTOR", "python")


def _arena(data, resolver: OpResolver, control: list) -> tuple[int | None, str]:
    """Activation arena bytes of subgraph 0 after preparing every node, or (None, why not); adds to `control` how
    each control-flow node prepared runs (lowered into the compiled runner, or on the host) and why."""
    try:
        with _python_executor():
            interp = Interpreter(model_content=data, op_resolver=resolver)
            try:
                interp.allocate_tensors()
            finally:
                control += [{"subgraph": s, "node": n, "path": p, "why": why}
                            for (s, n), (p, why) in sorted(interp.runtime.control.paths.items())]
        return int(interp.arena_size), ""
    except Exception as e:  # report any failure: inspect must describe models it cannot run
        msg = str(e).strip().splitlines()
        return None, f"{type(e).__name__}: {msg[0] if msg else ''}"


def inspect_model(model: str | os.PathLike | bytes, builtin_only: bool = False, allocate: bool = True) -> dict:
    """Describe a model as a JSON-serialisable dict (see `format_inspection` for the text form).

    `builtin_only` checks against lite-numba's builtin kernels alone (no plugins, no @custom_op ops); `allocate`
    prepares subgraph 0 to report its activation arena (no compilation)."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        data, path, size = bytes(model), None, len(model)
    else:
        path = os.fspath(model)
        data, size = read_model_bytes(path), os.path.getsize(path)
    plan: ModelPlan = load_model(data)
    resolver = BuiltinOpResolver() if builtin_only else default_op_resolver()

    ops: dict[tuple[str, bool, int], dict] = {}
    composites = []
    for si, sg in enumerate(plan.subgraphs):
        for n in sg.nodes:
            comp = _composite(plan, resolver, si, n)
            if comp is not None:
                composites.append(comp)
            host = _host_note(resolver, sg, n)
            key = (composite_label(n) + (" (STRING)" if host == STRING_HOST else ""), n.is_custom, n.version)
            entry = ops.get(key)
            if entry is None:
                ok, why = op_status(resolver, n.op_name, n.version, n.is_custom, builtin_only, n.custom_options)
                why = f"{why}; {host}" if ok and host else why
                if comp is not None:
                    ok = ok and not comp["runs"].startswith("cannot run")
                    why = f"{why}; {comp['runs']}"
                entry = ops[key] = {"op": key[0], "kind": "custom" if n.is_custom else "builtin",
                                    "builtin_code": n.builtin_code, "version": n.version, "count": 0,
                                    "subgraphs": [], "can_run": ok, "status": why}
            entry["count"] += 1
            if si not in entry["subgraphs"]:
                entry["subgraphs"].append(si)

    subgraphs = []
    totals = {"tensors": 0, "constant_tensors": 0, "constant_bytes": 0, "activation_tensors": 0,
              "activation_bytes": 0, "variable_tensors": 0}
    for si, sg in enumerate(plan.subgraphs):
        const = [t for t in sg.tensors if t.is_const]
        var = [t for t in sg.tensors if t.is_variable]
        act = [t for t in sg.tensors if not t.is_const]
        info = {
            "index": si, "name": sg.name, "num_tensors": len(sg.tensors), "num_nodes": len(sg.nodes),
            "inputs": [_tensor_info(sg.tensors[i]) for i in sg.inputs],
            "outputs": [_tensor_info(sg.tensors[i]) for i in sg.outputs],
            "constant_tensors": len(const), "constant_bytes": sum(_nbytes(t) for t in const),
            "activation_tensors": len(act), "activation_bytes": sum(_nbytes(t) for t in act),
            "variable_tensors": len(var), "nodes": _nodes(sg),
        }
        subgraphs.append(info)
        totals["tensors"] += len(sg.tensors)
        for k in ("constant_tensors", "constant_bytes", "activation_tensors", "activation_bytes",
                  "variable_tensors"):
            totals[k] += info[k]

    can_run = all(e["can_run"] for e in ops.values())
    arena, arena_error = (None, "")
    control: list[dict] = []
    if allocate and can_run:
        arena, arena_error = _arena(data, resolver, control)
    elif allocate:
        arena_error = "not planned: the model has ops this installation cannot run"
    for c in control:
        c["op"] = plan.subgraphs[c["subgraph"]].nodes[c["node"]].op_name
    return {
        "path": path, "file_size": size, "schema_version": plan.version, "description": plan.description,
        "resolver": "builtin only" if builtin_only else "default (builtins, plugins, @custom_op ops)",
        "subgraphs": subgraphs,
        "signatures": [{"key": s.key, "subgraph_index": s.subgraph_index, "inputs": dict(s.inputs),
                        "outputs": dict(s.outputs)} for s in plan.signatures],
        "inputs": subgraphs[0]["inputs"], "outputs": subgraphs[0]["outputs"],
        "ops": sorted(ops.values(), key=lambda e: (min(e["subgraphs"]), e["kind"], e["op"], e["version"])),
        "composites": composites, "tensors": totals, "arena_size": arena, "arena_error": arena_error or None,
        "can_run": can_run and not arena_error, "kernel_path": kernel_path(), "control_flow": control,
    }


def _fmt_tensor(t: dict) -> str:
    shape = "x".join(map(str, t["shape"])) or "scalar"
    sig = "" if t["shape_signature"] == t["shape"] else f" (signature {t['shape_signature']})"
    q = t["quantization"]
    if q is None:
        qt = ""
    elif "scale" in q:
        qt = f"  quantized: scale={q['scale']:.6g} zero_point={q['zero_point']}"
    else:
        qt = f"  quantized per channel: {len(q['scales'])} scales along dimension {q['quantized_dimension']}"
    return f"#{t['index']} {t['name']!r} {t['dtype']}[{shape}]{sig}{qt}"


def _kb(n: int) -> str:
    return f"{n} B" if n < 10_000 else f"{n / 1024:.1f} KiB" if n < 10_000_000 else f"{n / (1 << 20):.1f} MiB"


def _composite_lines(c: dict, indent: str) -> list[str]:
    attrs = ", ".join(f"{k}={v!r}" for k, v in (c["attributes"] or {}).items())
    lines = [f"{indent}subgraph {c['subgraph']} node {c['node']}: STABLEHLO_COMPOSITE {c['name']} v{c['version']} "
             f"{{{attrs}}} -> decomposition subgraph {c['decomposition_subgraph']}: {c['runs']}"]
    for d in c["decomposition"]:
        lines.append(f"{indent}    {d['index']}: {d['op_name']} v{d['version']} {d['inputs']} -> {d['outputs']}")
        if d["composite"] is not None:
            lines += _composite_lines(d["composite"], indent + "        ")
    return lines


def format_inspection(info: dict[str, Any], composites: bool = False) -> str:
    """The human-readable report of `inspect_model` (`composites`: every STABLEHLO_COMPOSITE node and its
    decomposition's nodes too)."""
    lines = [f"Model: {info['path'] or '<bytes>'} ({_kb(info['file_size'])}, schema version "
             f"{info['schema_version']})"]
    if info["description"]:
        lines.append(f"Description: {info['description']}")
    lines.append(f"Subgraphs: {len(info['subgraphs'])}")
    for sg in info["subgraphs"]:
        lines.append(f"  [{sg['index']}] {sg['name'] or '(unnamed)'}: {sg['num_nodes']} nodes, {sg['num_tensors']} "
                     f"tensors ({sg['constant_tensors']} constant, {_kb(sg['constant_bytes'])}; "
                     f"{sg['activation_tensors']} activations, {_kb(sg['activation_bytes'])})")
    if info["signatures"]:
        lines.append("Signatures:")
        for s in info["signatures"]:
            ins = ", ".join(f"{k}=#{v}" for k, v in s["inputs"].items())
            outs = ", ".join(f"{k}=#{v}" for k, v in s["outputs"].items())
            lines.append(f"  {s['key']!r} (subgraph {s['subgraph_index']}): inputs {ins}; outputs {outs}")
    else:
        lines.append("Signatures: none")
    lines.append("Inputs (subgraph 0):")
    lines += [f"  {_fmt_tensor(t)}" for t in info["inputs"]]
    lines.append("Outputs (subgraph 0):")
    lines += [f"  {_fmt_tensor(t)}" for t in info["outputs"]]
    lines.append(f"Ops ({info['resolver']}):")
    width = max([len(e["op"]) for e in info["ops"]] + [2])
    lines.append(f"  {'op':<{width}}  {'kind':<7}  version  count  can run")
    for e in info["ops"]:
        mark = "yes" if e["can_run"] else "NO "
        lines.append(f"  {e['op']:<{width}}  {e['kind']:<7}  {e['version']:>7}  {e['count']:>5}  {mark}  "
                     f"{e['status']}")
    if composites:
        lines.append(f"Composites: {len(info['composites'])}" if info["composites"] else "Composites: none")
        for c in info["composites"]:
            lines += _composite_lines(c, "  ")
    t = info["tensors"]
    lines.append(f"Tensors: {t['tensors']} ({t['constant_tensors']} constant: {_kb(t['constant_bytes'])}; "
                 f"{t['activation_tensors']} activations: {_kb(t['activation_bytes'])} declared; "
                 f"{t['variable_tensors']} variables)")
    if info["arena_size"] is not None:
        lines.append(f"Activation arena (subgraph 0, after planning): {info['arena_size']} bytes "
                     f"({_kb(info['arena_size'])})")
    elif info["arena_error"]:
        lines.append(f"Activation arena: {info['arena_error']}")
    if info.get("control_flow"):
        lines.append("Control flow (how each node runs, and why):")
        for c in info["control_flow"]:
            where = "compiled (inside the runner)" if c["path"] == "compiled" else "host (from Python)"
            why = c["why"].removesuffix(" (LITE_NUMBA_EXECUTOR=python runs it from the host)")  # (inspect plans so)
            lines.append(f"  subgraph {c['subgraph']} node {c['node']} {c['op']}: {where}: {why}")
    lines.append("This installation can run the model: " + ("yes" if info["can_run"] else "no"))
    if info.get("kernel_path"):
        lines.append(f"Kernel path: {info['kernel_path']}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """`lite-numba inspect`."""
    import argparse

    ap = argparse.ArgumentParser(prog="lite-numba inspect", description="Describe a .tflite model and whether "
                                 "lite-numba can run it.")
    ap.add_argument("model", help="the .tflite file")
    ap.add_argument("--json", action="store_true", help="print JSON instead of text")
    ap.add_argument("--builtin-only", action="store_true", help="check against the builtin kernels only "
                    "(no plugins, no @custom_op ops)")
    ap.add_argument("--no-allocate", action="store_true", help="do not prepare the model to plan its arena")
    ap.add_argument("--composites", action="store_true", help="list every STABLEHLO_COMPOSITE node with its "
                    "attributes and its decomposition's nodes")
    a = ap.parse_args(argv)
    import sys

    try:
        info = inspect_model(a.model, builtin_only=a.builtin_only, allocate=not a.no_allocate)
    except (OSError, ValueError) as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(json.dumps(info, indent=2) + "\n" if a.json else format_inspection(info, composites=a.composites))
    return 0
