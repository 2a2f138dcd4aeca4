"""Check lite-numba on aarch64 (64-bit ARM) against the official runtime's x86 outputs, under qemu-user emulation.

The official runtime's aarch64 wheel does not run under qemu-user (SIGSEGV even on its builtin kernels), so the
oracle's outputs are recorded on the x86 host and compared with lite-numba's outputs computed by an emulated aarch64
Python (../shared/tools/aarch64_env.sh builds one: Debian's arm64 python3.11 under qemu-aarch64-static, numba's
aarch64 wheels, this project installed as a wheel). Speed under emulation means nothing: this checks that the
kernels compile for aarch64 and give the same results there.

    python scripts/aarch64_check.py record REFS.npz      # x86 host: the subset's models, inputs, official outputs
    DIR/py scripts/aarch64_check.py check REFS.npz [--only conv_]   # emulated: lite-numba against REFS.npz
    python scripts/aarch64_check.py run [--env DIR]      # both (DIR: the emulated environment, built if missing)

The subset (CASES): CONV_2D (float32, int8 per-channel and per-tensor, uint8; pointwise, 3x3, strided, dilated),
DEPTHWISE_CONV_2D (float32, int8, uint8), FULLY_CONNECTED (float32, int8, hybrid int8 weights, INT4 blockwise
weights), a hybrid CONV_2D, BATCH_MATMUL (float32, plain and with both operands transposed and broadcast),
elementwise ADD / MUL (float32 with broadcast, int8), PAD + ADD + RELU (one fused node), a float CONV_2D with a
residual ADD + PRELU and with a padded residual ADD + RELU in its epilogue, a MAX_POOL_2D of 28 channels, and whole
models: small_cnn float32 / int8 / int8 with uint8 I/O, the transformer block and three compiled control-flow models
(WHILE / IF, Keras GRU and LSTM; in tests/data), plus MobileNetV2 0.35/96 float32 and int8 when ../shared/models has
them. int8 and uint8 results must be bit-identical; float32 within 1e-5 of the largest output for one op, 1e-4 for a
whole model (the official x86 kernels' summation order is not aarch64's), except the hybrid and INT4 layers: bit-
identical floats too (exact int32 sums, the official float epilogue).

Record needs the official runtime and the tests' model makers (tests/linear_models.py, on the path); check needs
only lite-numba and numpy, since the models travel in REFS.npz as bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SHARED_MODELS = ROOT.parent / "shared" / "models"


def _cases() -> dict:
    """name -> (model bytes, inputs, tolerance): None for exact, else relative to the largest output."""
    sys.path.insert(0, str(ROOT / "tests"))
    from linear_models import (
        bmm_model,
        conv2d_model,
        conv_case_f32,
        conv_case_int8,
        conv_case_uint8,
        dw_float_case,
        dw_quant_case,
        fc_model,
        fc_quant_case,
        geometry,
    )

    from lite_numba.testing import one_op

    cases = {}
    convs = {
        "pointwise": geometry(h=7, w=5, ci=13, co=37, k=(1, 1)),
        "3x3_same": geometry(h=9, w=11, ci=5, co=33, act="RELU"),
        "3x3_stride2": geometry(h=13, w=12, ci=3, co=16, s=(2, 2), act="RELU6"),
        "dilated": geometry(h=9, w=10, ci=4, co=20, d=(2, 2)),
    }
    for name, g in convs.items():
        data, x = conv_case_f32(g)
        cases[f"conv_f32_{name}"] = (data, x, 1e-5)
        for per_channel in (True, False):
            data, x = conv_case_int8(g, per_channel)
            cases[f"conv_int8_{name}_{'pc' if per_channel else 'pt'}"] = (data, x, None)
        data, x = conv_case_uint8(g, 3, 200, False)
        cases[f"conv_uint8_{name}"] = (data, x, None)
    for h, ci, s in [(12, 16, 1), (13, 27, 2), (9, 40, 1)]:
        g = dict(n=1, h=h, w=h, ci=ci, dm=1, kh=3, kw=3, sh=s, sw=s, dh=1, dw=1, padding="SAME", act="RELU6", seed=h)
        cases[f"dw_f32_{h}x{ci}s{s}"] = (*dw_float_case(g), 1e-5)
        for kind in ("int8", "uint8"):
            cases[f"dw_{kind}_{h}x{ci}s{s}"] = (*dw_quant_case(g, kind), None)
    rng = np.random.default_rng(5)
    w = rng.standard_normal((40, 37)).astype(np.float32)
    cases["fc_f32"] = (fc_model([3, 37], w, bias=rng.standard_normal(40).astype(np.float32)),
                       [rng.standard_normal((3, 37)).astype(np.float32)], 1e-5)
    data, x = fc_quant_case(rng, np.int8, np.int8, 3, 70, 33, True, np.int32, "RELU")
    cases["fc_int8"] = (data, [x], None)
    # hybrid (float activations, int8 weights; issue 30's tiles with a float epilogue) and INT4 blockwise weights:
    # bit-exact floats
    wq = rng.integers(-127, 128, (37, 70)).astype(np.int8)
    data = fc_model([5, 70], wq, w_quant={"scales": rng.uniform(0.002, 0.02, 37).astype(np.float32),
                                          "zero_points": [0] * 37, "quantized_dimension": 0},
                    bias=rng.standard_normal(37).astype(np.float32), act="RELU", version=12,
                    extra_options={"asymmetric_quantize_inputs": True})
    cases["fc_hybrid"] = (data, [rng.standard_normal((5, 70)).astype(np.float32)], None)
    cases["fc_int4_blockwise"] = (_int4_fc(rng, 3, 96, 21, 32), [rng.standard_normal((3, 96)).astype(np.float32)],
                                  None)
    g = geometry(h=9, w=8, ci=6, co=20, act="RELU6")
    wc = rng.integers(-127, 128, (20, 3, 3, 6)).astype(np.int8)
    data = conv2d_model(g, np.float32, wc, rng.standard_normal(20).astype(np.float32), np.float32,
                        w_quant={"scales": rng.uniform(0.002, 0.02, 20).tolist(), "zero_points": [0] * 20,
                                 "quantized_dimension": 0}, version=5)
    cases["conv_hybrid_3x3_pc"] = (data, [rng.standard_normal((1, 9, 8, 6)).astype(np.float32)], None)
    # BATCH_MATMUL (issue 30): attention's shapes, the transposed operands read where they are (lhs in place, rhs
    # packed from it), broadcast batches
    for name, ls, rs, adj_x, adj_y in (("bmm_f32_logits", [4, 17, 16], [4, 16, 17], False, False),
                                       ("bmm_f32_adj_broadcast", [2, 1, 16, 37], [1, 3, 70, 16], True, True)):
        cases[name] = (bmm_model(ls, rs, adj_x=adj_x, adj_y=adj_y),
                       [rng.standard_normal(ls).astype(np.float32), rng.standard_normal(rs).astype(np.float32)], 1e-5)
    # masked attention (MASKED_ATTENTION, issue 39): a prefill's 24 query rows of 2 heads over a 64-position cache
    # whose causal mask leaves the first 40 live: only those columns computed, the official sums' order kept
    from masked_attention_models import attention_model, causal_mask

    cases["masked_attention_prefill"] = (
        attention_model(kv=2, rows=24, s=64, h=16),
        [rng.standard_normal((1, 2, 24, 16)).astype(np.float32), rng.standard_normal((1, 2, 64, 16)).astype(np.float32),
         causal_mask(24, 64, 16), rng.standard_normal((1, 2, 16, 64)).astype(np.float32)], None)
    # a decode step's few query rows times a run-time rhs read along k (simd_f32_dot's 8 x 8 squares transposed in
    # registers on NEON): the official kernel's sums in the same order, so bit-identical
    for name, ls, rs in (("bmm_f32_decode_keys", [1, 2, 3, 40], [1, 2, 21, 40]),
                         ("bmm_f32_decode_values", [1, 1, 9, 37], [1, 1, 19, 37])):
        cases[name] = (bmm_model(ls, rs, adj_y=True),
                       [rng.standard_normal(ls).astype(np.float32), rng.standard_normal(rs).astype(np.float32)], None)
    a = rng.standard_normal((2, 5, 7, 3)).astype(np.float32)
    b = rng.standard_normal((1, 7, 3)).astype(np.float32)
    for op in ("ADD", "MUL"):
        cases[f"{op.lower()}_f32_broadcast"] = (
            one_op(op, [(np.float32, a.shape), (np.float32, b.shape)], (np.float32, a.shape)), [a, b], 1e-5)
        qa = rng.integers(-128, 128, (2, 5, 7, 3)).astype(np.int8)
        qb = rng.integers(-128, 128, (2, 5, 7, 3)).astype(np.int8)
        cases[f"{op.lower()}_int8"] = (
            one_op(op, [(np.int8, qa.shape, (0.05, 3)), (np.int8, qb.shape, (0.03, -7))],
                   (np.int8, qa.shape, (0.08 if op == "ADD" else 0.02, 5))), [qa, qb], None)
    # BlazeFace's residual tail, RELU(ADD(PAD(x) on the channels, y)) as one FUSED_ELEMENTWISE node, and a
    # MAX_POOL_2D of 28 channels (a last vector overlapping the one before): exact
    cases["pad_add_relu_f32"] = (_pad_add_relu(), [rng.standard_normal((1, 9, 7, 20)).astype(np.float32),
                                                   rng.standard_normal((1, 9, 7, 24)).astype(np.float32)], None)
    # convolutions with their successors in the GEMM tiles' epilogue (runtime/fusion.py fuse_conv_epilogues): a
    # residual ADD + PRELU, and a channel-padded residual ADD + RELU (BlazeFace's)
    for name, pad in (("conv_add_prelu_f32", 0), ("conv_padded_add_relu_f32", 4)):
        cases[name] = (_conv_epilogue(pad), [rng.standard_normal((1, 9, 7, 20)).astype(np.float32),
                                             rng.standard_normal((1, 9, 7, 36 - pad)).astype(np.float32)], 1e-5)
    x = rng.standard_normal((1, 10, 9, 28)).astype(np.float32)
    cases["max_pool_f32_28"] = (one_op("MAX_POOL_2D", [(np.float32, x.shape)], (np.float32, (1, 5, 4, 28)),
                                       {"padding": "VALID", "stride_w": 2, "stride_h": 2, "filter_width": 2,
                                        "filter_height": 2}), [x], None)
    # (and compiled control flow: a WHILE in a looping runner and an IF, the GRU's looping runner, the LSTM's loop
    # with copies per iteration)
    models = [ROOT / "tests/data/models" / f for f in ("small_cnn_f32.tflite", "small_cnn_int8.tflite",
                                                       "small_cnn_int8_uint8io.tflite", "transformer_block_f32.tflite",
                                                       "control_flow_while_cond.tflite", "keras_gru.tflite",
                                                       "keras_lstm.tflite")]
    models += [SHARED_MODELS / f for f in ("mobilenet_v2_035_96_f32.tflite", "mobilenet_v2_035_96_int8.tflite")]
    for path in models:
        if path.exists():
            cases[f"model_{path.stem}"] = (path.read_bytes(), None, 1e-4)
    return cases


def _pad_add_relu() -> bytes:
    """x [1, 9, 7, 20] -> PAD 4 channels after -> ADD y [1, 9, 7, 24] -> RELU."""
    from lite_numba.builder import ModelBuilder

    mb = ModelBuilder()
    x = mb.add_input("x", np.float32, [1, 9, 7, 20])
    y = mb.add_input("y", np.float32, [1, 9, 7, 24])
    p = mb.add_tensor("p", np.float32, [1, 9, 7, 24])
    mb.add_op("PAD", [x, mb.add_const("pads", np.array([[0, 0], [0, 0], [0, 0], [0, 4]], np.int32))], [p])
    s = mb.add_tensor("s", np.float32, [1, 9, 7, 24])
    mb.add_op("ADD", [p, y], [s])
    out = mb.add_tensor("out", np.float32, [1, 9, 7, 24])
    mb.add_op("RELU", [s], [out])
    mb.mark_output(out)
    return mb.build()


def _conv_epilogue(pad: int) -> bytes:
    """x [1, 9, 7, 20] -> 1x1 CONV_2D to 36 channels -> ADD(conv, r) -> PRELU (pad 0) or ADD(conv, PAD(r) by `pad`
    channels after) -> RELU: one CONV_2D with its epilogue."""
    from lite_numba.builder import ModelBuilder

    rng = np.random.default_rng(pad)
    mb = ModelBuilder()
    x = mb.add_input("x", np.float32, [1, 9, 7, 20])
    r = mb.add_input("r", np.float32, [1, 9, 7, 36 - pad])
    y = mb.add_tensor("y", np.float32, [1, 9, 7, 36])
    mb.add_op("CONV_2D", [x, mb.add_const("w", rng.standard_normal((36, 1, 1, 20)).astype(np.float32)),
                          mb.add_const("b", rng.standard_normal(36).astype(np.float32))], [y],
              options={"padding": "VALID", "stride_w": 1, "stride_h": 1})
    if pad:
        p = mb.add_tensor("p", np.float32, [1, 9, 7, 36])
        mb.add_op("PAD", [r, mb.add_const("pads", np.array([[0, 0], [0, 0], [0, 0], [0, pad]], np.int32))], [p])
        r = p
    s = mb.add_tensor("s", np.float32, [1, 9, 7, 36])
    mb.add_op("ADD", [y, r], [s])
    out = mb.add_tensor("out", np.float32, [1, 9, 7, 36])
    if pad:
        mb.add_op("RELU", [s], [out])
    else:
        mb.add_op("PRELU", [s, mb.add_const("slopes", rng.standard_normal((1, 1, 36)).astype(np.float32))], [out])
    mb.mark_output(out)
    return mb.build()


def _int4_fc(rng, rows: int, k: int, units: int, block: int) -> bytes:
    """A FULLY_CONNECTED with INT4 blockwise weights [units, k] (FLOAT16 scales) and a bias."""
    from lite_numba.format.builder import ModelBuilder

    b = ModelBuilder()
    x = b.add_input("x", np.float32, [rows, k])
    w = b.add_blockwise_const("w", rng.integers(-8, 8, (units, k)),
                              rng.uniform(0.005, 0.1, (units, k // block)).astype(np.float16), block, "INT4")
    bias = b.add_const("bias", rng.standard_normal(units).astype(np.float32))
    y = b.add_tensor("y", np.float32, [rows, units])
    b.add_op("FULLY_CONNECTED", [x, w, bias], [y], {"fused_activation_function": "NONE"}, version=5)
    b.mark_output(y)
    return b.build()


def _model_inputs(data: bytes, rng) -> list[np.ndarray]:
    """Random inputs of a whole model (its input details, from the official runtime)."""
    from lite_numba.testing import official_interpreter

    arrays = []
    for d in official_interpreter(data).get_input_details():
        shape, dt = tuple(int(s) for s in d["shape"]), np.dtype(d["dtype"])
        if dt.kind == "f":
            arrays.append(rng.uniform(-1, 1, shape).astype(dt))
        else:
            info = np.iinfo(dt)
            arrays.append(rng.integers(info.min, int(info.max) + 1, shape).astype(dt))
    return arrays


def record(out: Path) -> None:
    """Write every case's model, inputs and official outputs (x86, builtin kernels) into `out`."""
    from lite_numba.testing import run_official

    rng = np.random.default_rng(0)
    store = {}
    cases = _cases()
    for name, (data, inputs, tol) in cases.items():
        if inputs is None:
            inputs = _model_inputs(data, rng)
        outs = run_official(data, inputs)
        store[f"{name}/model"] = np.frombuffer(data, np.uint8)
        store[f"{name}/tol"] = np.array(-1.0 if tol is None else tol)
        for i, x in enumerate(inputs):
            store[f"{name}/in{i}"] = np.asarray(x)
        for i, y in enumerate(outs):
            store[f"{name}/out{i}"] = np.asarray(y)
    np.savez_compressed(out, **store)
    print(f"recorded {len(cases)} cases into {out}")


def check(refs: Path, only: str = "") -> int:
    """Run lite-numba on every case of `refs` (whose name contains `only`) and compare; returns the number of
    failures."""
    import platform

    from lite_numba.kernels.base import isa

    from lite_numba.testing import run_ours

    z = np.load(refs)
    names = sorted({k.split("/")[0] for k in z.files if only in k.split("/")[0]})
    print(f"{platform.machine()}, ISA path {isa.isa_level()}: {len(names)} cases")
    failures = 0
    for name in names:
        ins = [z[f"{name}/in{i}"] for i in range(sum(k.startswith(f"{name}/in") for k in z.files))]
        refs_out = [z[f"{name}/out{i}"] for i in range(sum(k.startswith(f"{name}/out") for k in z.files))]
        tol = float(z[f"{name}/tol"])
        try:
            ours = run_ours(z[f"{name}/model"].tobytes(), ins)
            msgs = []
            for i, (o, r) in enumerate(zip(ours, refs_out)):
                if o.shape != r.shape or o.dtype != r.dtype:
                    msgs.append(f"out{i}: {o.dtype}{o.shape} vs {r.dtype}{r.shape}")
                elif tol < 0 and not np.array_equal(o, r):
                    msgs.append(f"out{i}: {np.count_nonzero(o != r)}/{o.size} differ")
                elif tol >= 0:
                    scale = max(float(np.max(np.abs(r))) if r.size else 0.0, 1e-30)
                    err = float(np.max(np.abs(o.astype(np.float64) - r))) / scale if r.size else 0.0
                    if not err <= tol:
                        msgs.append(f"out{i}: relative error {err:.2e} > {tol:g}")
        except Exception as e:  # report and go on: one failing case must not hide the others
            msgs = [f"{type(e).__name__}: {e}"]
        failures += bool(msgs)
        print(f"{'FAIL' if msgs else 'ok  '} {name}" + (": " + "; ".join(msgs) if msgs else ""), flush=True)
        if not msgs and name.startswith(THREADED):
            failures += _two_threads(name, z[f"{name}/model"].tobytes(), ins, ours)
    if any(n.startswith(THREADED) for n in names) and not _PARALLEL_RUNS[0]:
        print("FAIL no threaded case ran a parallel driver")
        failures += 1
    print(f"{len(names) - failures} passed, {failures} failed")
    return failures


# cases also run with num_threads=2 and every layer split (the parallel drivers on kernels/base/team_pool.py's
# threads: its futex, spin hint and trampolines on aarch64), which must give the one-thread bytes
THREADED = ("conv_f32", "conv_int8", "conv_add", "conv_padded", "dw_", "fc_hybrid", "bmm_f32")


def _two_threads(name: str, model: bytes, ins, one) -> int:
    from lite_numba.kernels.base import threads

    from lite_numba.testing import run_interpreter

    saved = threads.MIN_MACS, threads.MIN_Q8_MACS, threads.MIN_DW_MACS
    threads.MIN_MACS = threads.MIN_Q8_MACS = threads.MIN_DW_MACS = 0
    try:
        two, it = run_interpreter(model, ins, num_threads=2)
        names = {getattr(c.fn, "__name__", "") for p in it.runtime.main.prepared if p is not None for c in p.calls}
        par = any(n.endswith("_par") for n in names)
        _PARALLEL_RUNS[0] += par
        bad = [f"out{i} differs from one thread" for i, (a, b) in enumerate(zip(one, two)) if not np.array_equal(a, b)]
    except Exception as e:
        par, bad = False, [f"{type(e).__name__}: {e}"]
    finally:
        threads.MIN_MACS, threads.MIN_Q8_MACS, threads.MIN_DW_MACS = saved
    note = "" if par else " (no parallel driver on this path: the serial kernel)"
    print(f"{'FAIL' if bad else 'ok  '} {name}, 2 threads{note}" + (": " + "; ".join(bad) if bad else ""), flush=True)
    return int(bool(bad))


_PARALLEL_RUNS = [0]  # threaded cases that ran a parallel driver: check() fails when none did


IMAGE_CASE = r"""
import json, sys, numpy as np
from lite_numba import Interpreter
it = Interpreter(model_path=sys.argv[1])
it.allocate_tensors()
d = it.get_input_details()[0]
it.set_tensor(d["index"], np.random.default_rng(0).random(d["shape"]).astype(np.float32))
it.invoke()
y = it.get_tensor(it.get_output_details()[0]["index"])
print(json.dumps({"kind": type(it.runtime.main).__name__, "numba": "numba" in sys.modules, "y": y.tobytes().hex()}))
"""


def image_round_trip(env: Path) -> bool:
    """A native image (lite_numba/runtime/native) saved by one emulated aarch64 process and restored by the next,
    without Numba (llvmlite's linker: the ELF one is x86-64 only), giving the same bytes (two processes started from
    here: an aarch64 process cannot start another)."""
    model = ROOT / "lite_numba" / "examples" / "small_cnn_f32.tflite"
    with tempfile.TemporaryDirectory() as d:
        env_vars = {**os.environ, "LITE_NUMBA_IMAGE": "1", "LITE_NUMBA_IMAGE_DIR": d}
        runs = [json.loads(subprocess.run([str(env / "py"), "-c", IMAGE_CASE, str(model)], env=env_vars, check=True,
                                          capture_output=True, text=True, cwd=d).stdout.splitlines()[-1])
                for _ in range(2)]  # (cwd: not the repository, whose lite_numba/ lacks the installed kernels)
    ok = (runs[0]["kind"] == "GraphRuntime" and runs[1]["kind"] == "ImageGraphRuntime" and not runs[1]["numba"]
          and runs[0]["y"] == runs[1]["y"])
    print(f"{'ok  ' if ok else 'FAIL'} native image round trip ({runs[1]['kind']}, Numba imported: {runs[1]['numba']})")
    return ok


def run(env: Path) -> int:
    """Record on this host, then check under the emulated aarch64 Python of `env` (built when missing; rebuilt with
    the project's current sources when AARCH64_REBUILD is set: otherwise the copy installed then is what runs)."""
    if not (env / "py").exists() or os.environ.get("AARCH64_REBUILD"):
        subprocess.run(["bash", str(ROOT.parent / "shared/tools/aarch64_env.sh"), str(env)], check=True, cwd=ROOT)
    refs = env / "aarch64_refs.npz"
    record(refs)
    rc = subprocess.run([str(env / "py"), __file__, "check", str(refs)]).returncode
    return rc or (0 if image_round_trip(env) else 1)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("record").add_argument("refs", type=Path)
    c = sub.add_parser("check")
    c.add_argument("refs", type=Path)
    c.add_argument("--only", default="", help="only the cases whose name contains this")
    r = sub.add_parser("run")
    r.add_argument("--env", type=Path, default=Path(os.environ.get("TMPDIR") or "/tmp") / "aarch64")
    a = p.parse_args()
    if a.cmd == "record":
        record(a.refs)
        return 0
    if a.cmd == "check":
        return 1 if check(a.refs, a.only) else 0
    return 1 if run(a.env) else 0


if __name__ == "__main__":
    sys.exit(main())
