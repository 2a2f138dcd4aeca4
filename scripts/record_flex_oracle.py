"""Record TensorFlow's own outputs for the Flex-op test models into tests/data/flex/, the oracle of
tests/test_flex.py (tests run without TensorFlow).

Each case is a small TF function. It is converted with SELECT_TF_OPS (only: every op becomes a `Flex<TfOp>` op, so
the ops TFLite also has are tested in their Flex form) or with [TFLITE_BUILTINS, SELECT_TF_OPS] (the mix a user's
converter produces: the whole models), written as `<case>.tflite`; the function is run eagerly by TensorFlow on
seeded random inputs and `<case>.npz` holds the inputs (`in:<arg>`) and TensorFlow's outputs (`out:<key>`, the
function returns a dict, so the keys are the model's signature output names and name the op under test). TF 2.21's
own tf.lite.Interpreter does not run Flex ops, so TensorFlow itself is the oracle.

Needs `tensorflow` (not a dependency of lite-numba), in its own venv:
    python -m venv /work/tfvenv && /work/tfvenv/bin/pip install tensorflow-cpu numpy
Usage: /work/tfvenv/bin/python scripts/record_flex_oracle.py [--out tests/data/flex] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "flex")


def cases(tf):
    """name -> (function of named tensors returning a dict, {arg: array}, mode "select" | "mixed" | "tensorlist" |
    "select_lists" (SELECT_TF_OPS only, TensorLists kept)
    [, the converted input shape, None for dimensions unknown at conversion])."""
    rng = np.random.default_rng(19)
    f32 = np.float32

    def unif(shape, lo=-1.0, hi=1.0, dtype=f32):
        return rng.uniform(lo, hi, shape).astype(dtype)

    def cplx(shape):
        return (unif(shape, -2, 2) + 1j * unif(shape, -2, 2)).astype(np.complex64)

    out: dict = {}

    # special functions (the ones TF's converter allows as Flex ops), three shapes; u in (-0.99, 0.99), g in (-6, 6)
    for shape in [(7,), (3, 17), (2, 3, 33)]:
        tag = "x".join(map(str, shape))
        g = unif(shape, -6, 6)
        g = np.where(np.abs(g - np.round(g)) < 0.05, g + 0.1, g).astype(f32)

        def special(u, g):
            m = tf.math
            return {"Erf": m.erf(g), "Reciprocal": m.reciprocal(g), "Tan": m.tan(u), "Atan": m.atan(g),
                    "Sinh": m.sinh(g), "Cosh": m.cosh(g), "Softplus": m.softplus(g * 4), "Softsign": tf.nn.softsign(g),
                    "Selu": tf.nn.selu(g), "IsNan": m.is_nan(m.log(u)), "IsFinite": m.is_finite(m.log(u))}

        out[f"special_{tag}"] = (special, {"u": unif(shape, -0.99, 0.99), "g": g},
                                 "select")

    # builtin-equivalent elementwise ops with broadcasting
    for xs, ys in [((2, 3, 4), (3, 1)), ((5,), (5,)), ((1, 4, 1, 3), (2, 1, 5, 1))]:
        tag = "x".join(map(str, xs)) + "_" + "x".join(map(str, ys))

        def binary(x, y):
            m = tf.math
            yp = m.abs(y) + 0.5
            return {"AddV2": x + y, "Sub": x - y, "Mul": x * y, "RealDiv": x / yp, "Maximum": m.maximum(x, y),
                    "Minimum": m.minimum(x, y), "SquaredDifference": m.squared_difference(x, y),
                    "Pow": m.pow(m.abs(x) + 0.1, y), "FloorDiv": m.floordiv(x, yp), "FloorMod": m.floormod(x, yp),
                    "Atan2": m.atan2(x, y), "DivNoNan": m.divide_no_nan(x, y * tf.cast(y > 0, tf.float32)),
                    "MulNoNan": m.multiply_no_nan(x, y), "Xlogy": m.xlogy(x, yp), "Xdivy": m.xdivy(x, yp),
                    "Less": x < y, "LessEqual": x <= y, "Greater": x > y,
                    "GreaterEqual": x >= y, "Equal": m.equal(x, tf.round(y)), "NotEqual": m.not_equal(x, y),
                    "LogicalAnd": m.logical_and(x > 0, y > 0), "LogicalOr": m.logical_or(x > 0, y > 0),
                    "SelectV2": tf.where(x > y, x, y)}

        out[f"binary_{tag}"] = (binary, {"x": unif(xs, -3, 3), "y": unif(ys, -3, 3)}, "select")

    for shape in [(6,), (4, 9), (2, 3, 5)]:
        tag = "x".join(map(str, shape))

        def unary(x):
            m = tf.math
            return {"Exp": m.exp(x), "Log": m.log(m.abs(x) + 0.01), "Sqrt": m.sqrt(m.abs(x)),
                    "Rsqrt": m.rsqrt(m.abs(x) + 0.01), "Tanh": m.tanh(x), "Sigmoid": m.sigmoid(x),
                    "Relu": tf.nn.relu(x), "Relu6": tf.nn.relu6(x * 4), "Neg": -x, "Abs": m.abs(x), "Sin": m.sin(x),
                    "Cos": m.cos(x), "Square": m.square(x), "Floor": m.floor(x), "Ceil": m.ceil(x),
                    "Round": m.round(x), "Sign": m.sign(x), "Elu": tf.nn.elu(x),
                    "LeakyRelu": tf.nn.leaky_relu(x, 0.3), "Softmax": tf.nn.softmax(x),
                    "LogSoftmax": tf.nn.log_softmax(x), "LogicalNot": m.logical_not(x > 0),
                    "Cumsum": m.cumsum(x, axis=-1, exclusive=True), "Cumprod": m.cumprod(x, axis=0),
                    "CumprodRev": m.cumprod(x, axis=-1, exclusive=True, reverse=True),
                    "Sum": tf.reduce_sum(x, axis=-1), "Mean": tf.reduce_mean(x, axis=0, keepdims=True),
                    "Max": tf.reduce_max(x, axis=-1), "Min": tf.reduce_min(x, axis=0), "Prod": tf.reduce_prod(x),
                    "All": tf.reduce_all(x > -2, axis=-1), "Any": tf.reduce_any(x > 2, axis=-1),
                    "ArgMax": tf.argmax(x, axis=-1), "ArgMin": tf.argmin(x, axis=0, output_type=tf.int32),
                    "Identity": tf.identity(x), "Roll": tf.roll(x, shift=[2, -1], axis=[-1, 0]),
                    "ReverseV2": tf.reverse(x, axis=[-1]), "Cast": tf.cast(x * 4, tf.int32)}

        out[f"unary_{tag}"] = (unary, {"x": unif(shape, -2.5, 2.5)}, "select")

    def movement(x, y):
        return {"Reshape": tf.reshape(x, [3, -1]), "Transpose": tf.transpose(x, [2, 0, 1]),
                "ExpandDims": tf.expand_dims(x, 1), "Squeeze": tf.squeeze(y, axis=[0]),
                "Pack": tf.stack([x, x * 2], axis=1), "Unpack": tf.unstack(x, axis=1)[1],
                "ConcatV2": tf.concat([x, x + 1], axis=-1), "GatherV2": tf.gather(x, [2, 0, 1, 1], axis=1),
                "GatherNd": tf.gather_nd(x, [[0, 1], [1, 2]]), "Split": tf.split(x, 2, axis=2)[1],
                "SplitV": tf.split(x, [1, 3], axis=2)[0], "StridedSlice": x[:, ::-2, 1:3],
                "StridedSliceShrink": x[1, :, tf.newaxis, 2], "Slice": tf.slice(x, [0, 1, 1], [2, 2, 3]),
                "Tile": tf.tile(x, [1, 2, 1]), "Pad": tf.pad(x, [[0, 1], [2, 0], [1, 1]]),
                "PadV2": tf.pad(x, [[1, 0], [0, 0], [0, 2]], constant_values=3.0),
                "MirrorPad": tf.pad(x, [[0, 0], [1, 1], [2, 1]], mode="REFLECT"),
                "MirrorPadSym": tf.pad(x, [[1, 1], [0, 0], [0, 2]], mode="SYMMETRIC"),
                "BroadcastTo": tf.broadcast_to(y, [2, 4, 3, 4]), "Fill": tf.fill([2, 3], 1.5),
                "ZerosLike": tf.zeros_like(x), "Shape": tf.shape(x), "Range": tf.range(1.0, 4.0, 0.5),
                "AddN": tf.add_n([x, x, x * 2])}

    out["movement"] = (movement, {"x": unif((2, 3, 4)), "y": unif((1, 3, 4))}, "select")

    def tensor_list_ops(x):
        r = tf.raw_ops
        lst = r.EmptyTensorList(element_shape=[3], max_num_elements=-1, element_dtype=tf.float32)
        for i in range(3):
            lst = r.TensorListPushBack(input_handle=lst, tensor=x[i])
        lst, last = r.TensorListPopBack(input_handle=lst, element_shape=[3], element_dtype=tf.float32)
        return {"TensorListPopBack": last, "TensorListLength": r.TensorListLength(input_handle=lst),
                "TensorListGetItem": r.TensorListGetItem(input_handle=lst, index=1, element_shape=[3],
                                                         element_dtype=tf.float32),
                "TensorListStack": r.TensorListStack(input_handle=lst, element_shape=[3], element_dtype=tf.float32)}

    out["tensor_list_ops"] = (tensor_list_ops, {"x": unif((4, 3))}, "tensorlist")

    for samples, window, stride, squared in [(1000, 256, 128, True), (800, 200, 75, False)]:
        def audio(x, window=window, stride=stride, squared=squared):
            r = tf.raw_ops
            spec = r.AudioSpectrogram(input=x, window_size=window, stride=stride, magnitude_squared=squared)
            return {"AudioSpectrogram": spec,
                    "Mfcc": r.Mfcc(spectrogram=spec, sample_rate=16000, upper_frequency_limit=4000.0,
                                   lower_frequency_limit=20.0, filterbank_channel_count=40, dct_coefficient_count=13)}

        out[f"audio_{window}_{stride}"] = (audio, {"x": unif((samples, 1))}, "select")

    def dynamic_shape(x):  # the leading dimension is unknown at conversion: these ops are not folded
        n = tf.shape(x)[0]
        return {"Shape": tf.shape(x), "Fill": tf.fill([n, 2], 1.5), "ZerosLike": tf.zeros_like(x),
                "Range": tf.range(0, n, 1), "LogicalNot": tf.math.logical_not(tf.cast(x, tf.bool)),
                "StopGradient": tf.stop_gradient(x) * 2.0}

    out["dynamic_shape"] = (dynamic_shape, {"x": unif((5, 3))}, "select_lists", [None, 3])

    for m_, k_, n_ in [(3, 4, 5), (1, 8, 2), (6, 6, 6)]:
        def products(a, b, bt, c):
            return {"MatMul": tf.matmul(a, b), "MatMulT": tf.matmul(a, bt, transpose_b=True),
                    "BatchMatMulV2": tf.matmul(c, b), "BatchMatMulAdj": tf.matmul(c, c, adjoint_a=True)}

        out[f"matmul_{m_}x{k_}x{n_}"] = (products, {"a": unif((m_, k_)), "b": unif((k_, n_)), "bt": unif((n_, k_)),
                                                    "c": unif((2, m_, k_))}, "select")

    # Einsum: one model per equation family
    eq_cases = {
        "einsum_matmul": ("ij,jk->ik", (4, 5), (5, 3)), "einsum_batch": ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
        "einsum_attn": ("bqhd,bkhd->bhqk", (2, 5, 3, 4), (2, 6, 3, 4)),
        "einsum_attn_out": ("bhqk,bkhd->bqhd", (2, 3, 5, 6), (2, 6, 3, 4)),
        "einsum_dense": ("abc,cd->abd", (2, 3, 4), (4, 6)), "einsum_dot": ("i,i->", (7,), (7,)),
        "einsum_outer": ("i,j->ij", (3,), (4,)), "einsum_ellipsis": ("...ij,...jk->...ik", (2, 2, 3, 4), (2, 2, 4, 2)),
        "einsum_bcast": ("bij,jk->bki", (3, 2, 4), (4, 5)), "einsum_sum": ("ijk->ki", (3, 4, 5), None),
        "einsum_trace": ("ii->i", (4, 4), None),
    }
    for name, (eq, sa, sb) in eq_cases.items():
        if sb is None:
            out[name] = ((lambda e: lambda a: {"Einsum": tf.einsum(e, a)})(eq), {"a": unif(sa)}, "select")
        else:
            out[name] = ((lambda e: lambda a, b: {"Einsum": tf.einsum(e, a, b)})(eq),
                         {"a": unif(sa), "b": unif(sb)}, "select")

    for n, batch in [(2, ()), (3, (2,)), (5, (2, 3))]:
        a = unif(batch + (n, n)) + 2.0 * np.eye(n, dtype=f32)
        spd = np.einsum("...ij,...kj->...ik", a, a) + np.eye(n, dtype=f32)

        def linalg(a, s):
            return {"MatrixInverse": tf.linalg.inv(a), "MatrixInverseAdj": tf.linalg.inv(a, adjoint=True),
                    "MatrixDeterminant": tf.linalg.det(a), "Cholesky": tf.linalg.cholesky(s)}

        out[f"linalg_{n}_{len(batch)}"] = (linalg, {"a": a, "s": spd.astype(f32)}, "select")

    for size, shape, weighted in [(5, (8,), False), (7, (3, 6), True), (4, (10,), True)]:
        arr = rng.integers(0, size + 2, shape).astype(np.int32)  # values >= size are dropped; TF refuses < 0

        rank = len(shape)

        def bincount(arr, w, size=size, weighted=weighted, rank=rank):
            res = {"DenseBincount": tf.math.bincount(arr, weights=w if weighted else None, minlength=size,
                                                     maxlength=size, axis=-1 if rank == 2 else None),
                   "DenseBincountBinary": tf.math.bincount(arr, minlength=size, maxlength=size, binary_output=True,
                                                           axis=-1)}
            return res

        out[f"bincount_{size}_{len(shape)}"] = (bincount, {"arr": arr,
                                                           "w": unif(shape, 0, 2)}, "select")

    # complex numbers end to end
    for n in [8, 12, 16]:
        def complex_ops(x, z, w, n=n):
            s = tf.signal
            return {"RFFT": s.rfft(x, [n]), "RFFTcrop": s.rfft(x, [n // 2]),
                    "IRFFT": s.irfft(z[..., : n // 2 + 1], [n]),
                    "FFT": s.fft(z), "IFFT": s.ifft(z), "ComplexAbs": tf.abs(z), "Angle": tf.math.angle(z),
                    "Real": tf.math.real(z), "Imag": tf.math.imag(z), "Complex": tf.complex(x, x * 2),
                    "Conj": tf.math.conj(z), "MulC": z * w, "AddC": z + w, "SubC": z - w, "RealDivC": z / (w + 3),
                    "ExpC": tf.exp(z), "NegC": -z, "ReshapeC": tf.reshape(z, [-1]),
                    "RFFT2D": s.rfft2d(tf.reshape(x, [2, -1, n // 2 if n % 4 == 0 else n]), [2, 4]),
                    "IRFFT2D": s.irfft2d(tf.reshape(z, [-1, 2, n // 2])[..., :3], [2, 4])}

        out[f"complex_{n}"] = (complex_ops, {"x": unif((3, n)), "z": cplx((3, n)), "w": cplx((1, n))}, "select")
    return out


def whole_models(tf):
    """The whole models: converted with [TFLITE_BUILTINS, SELECT_TF_OPS] as a user would."""
    rng = np.random.default_rng(7)
    out: dict = {}
    frame, step, bins = 256, 128, 129
    w1 = (rng.standard_normal((bins, 16)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((16, bins)) * 0.1).astype(np.float32)

    def speech_enhancement(audio):
        spec = tf.signal.stft(audio, frame, step, fft_length=frame)
        mag, phase = tf.abs(spec), tf.math.angle(spec)
        mask = tf.sigmoid(tf.nn.relu(tf.math.log1p(mag) @ w1) @ w2)
        est = tf.complex(mag * mask, tf.zeros_like(mag)) * tf.exp(tf.complex(tf.zeros_like(phase), phase))
        return {"enhanced": tf.signal.inverse_stft(est, frame, step, fft_length=frame,
                                                   window_fn=tf.signal.inverse_stft_window_fn(step))}

    out["model_speech_enhancement"] = (speech_enhancement, {"audio": rng.uniform(-0.5, 0.5, (1, 4096)).astype(
        np.float32)}, "mixed")

    d, h, ff, seq = 32, 4, 64, 10
    p = {k: (rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32) for k, s in
         [("wq", (d, h, d // h)), ("wk", (d, h, d // h)), ("wv", (d, h, d // h)), ("wo", (h, d // h, d)),
          ("w1", (d, ff)), ("w2", (ff, d))]}

    def layer_norm(x):
        mu, var = tf.nn.moments(x, axes=[-1], keepdims=True)
        return (x - mu) * tf.math.rsqrt(var + 1e-5)

    def transformer_block(x):
        q = tf.einsum("bsd,dhk->bshk", x, p["wq"])
        k = tf.einsum("bsd,dhk->bshk", x, p["wk"])
        v = tf.einsum("bsd,dhk->bshk", x, p["wv"])
        att = tf.nn.softmax(tf.einsum("bqhk,bshk->bhqs", q, k) / np.sqrt(d // h).astype(np.float32), axis=-1)
        y = layer_norm(x + tf.einsum("bqhk,hkd->bqd", tf.einsum("bhqs,bshk->bqhk", att, v), p["wo"]))
        u = tf.einsum("bsd,df->bsf", y, p["w1"])
        # GELU written so the converter's GELU fusion does not match: the erf stays FlexErf
        gelu = u * (0.5 + 0.5 * tf.math.erf(u * np.float32(np.sqrt(0.5))))
        out = layer_norm(y + tf.einsum("bsf,fd->bsd", gelu, p["w2"]))
        # a full contraction (an auxiliary alignment score): the converter keeps it as FlexEinsum
        return {"y": out, "score": tf.einsum("bsd,bsd->", out, x)}

    out["model_transformer_block"] = (transformer_block, {"x": rng.standard_normal((2, seq, d)).astype(np.float32)},
                                      "mixed")

    steps, n_in, hid = 12, 4, 16
    g = {k: (rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32) for k, s in
         [("wz", (n_in + hid, hid)), ("wr", (n_in + hid, hid)), ("wh", (n_in + hid, hid))]}

    def gru_tensor_array(x):
        xs = tf.TensorArray(tf.float32, size=steps).unstack(x)  # the converter turns its reads into GATHER
        ys = tf.TensorArray(tf.float32, size=steps)  # TensorListReserve
        h = tf.zeros([1, hid])
        for t in tf.range(xs.size()):
            xt = xs.read(t)[tf.newaxis]
            xh = tf.concat([xt, h], axis=1)
            z, r = tf.sigmoid(xh @ g["wz"]), tf.sigmoid(xh @ g["wr"])
            cand = tf.tanh(tf.concat([xt, r * h], axis=1) @ g["wh"])
            h = (1.0 - z) * h + z * cand
            ys = ys.write(t, h[0])  # TensorListSetItem
        return {"y": ys.stack(), "h": h}  # TensorListStack

    out["model_tensorlist_gru"] = (gru_tensor_array, {"x": rng.standard_normal((steps, n_in)).astype(np.float32)},
                                   "tensorlist")
    return out


def convert(tf, fn, inputs: dict, mode: str, shape=None) -> bytes:
    specs = [tf.TensorSpec(shape or v.shape, tf.as_dtype(v.dtype), name=k) for k, v in inputs.items()]
    names = list(inputs)

    def wrapped(*args):
        return fn(**dict(zip(names, args)))

    cf = tf.function(wrapped, input_signature=specs).get_concrete_function()
    conv = tf.lite.TFLiteConverter.from_concrete_functions([cf], tf.Module())
    ops = [tf.lite.OpsSet.SELECT_TF_OPS]
    if mode in ("mixed", "tensorlist"):
        ops = [tf.lite.OpsSet.TFLITE_BUILTINS] + ops
    conv.target_spec.supported_ops = ops
    if mode in ("tensorlist", "select_lists"):  # keep TensorList ops (FlexTensorList*), do not lower them
        conv._experimental_lower_tensor_list_ops = False
    return conv.convert()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    import tensorflow as tf

    os.makedirs(args.out, exist_ok=True)
    todo = {**cases(tf), **whole_models(tf)}
    for name, (fn, inputs, mode, *shape) in todo.items():
        if args.only and name not in args.only:
            continue
        try:
            model = convert(tf, fn, inputs, mode, *shape)
        except Exception as e:  # noqa: BLE001 - report every case that does not convert, then go on
            print(f"{name}: conversion failed: {str(e)[-300:]}", file=sys.stderr)
            continue
        ref = fn(**{k: tf.constant(v) for k, v in inputs.items()})
        with open(os.path.join(args.out, f"{name}.tflite"), "wb") as f:
            f.write(model)
        arrays = {f"in:{k}": v for k, v in inputs.items()}
        arrays.update({f"out:{k}": np.asarray(v) for k, v in ref.items()})
        np.savez_compressed(os.path.join(args.out, f"{name}.npz"), **arrays)
        print(f"{name}: {len(model)} bytes, outputs {sorted(ref)}", file=sys.stderr)


if __name__ == "__main__":
    main()
