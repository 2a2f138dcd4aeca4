"""Record TensorFlow's own outputs for the STRING test models into tests/data/strings/, the oracle of
tests/test_strings_models.py (tests run without TensorFlow).

Each case is a small TF function (or tf.Module holding a lookup table, or a Keras model) converted by TF's converter
as a user converts it, and run eagerly by TensorFlow on fixed inputs: `<case>.tflite`, and `<case>.npz` with the
inputs (`in:<arg>`) and TensorFlow's outputs (`out:<key>`, the signature's output names). A string array is stored
in TFLite's packed layout (uint8: int32 count, offsets, bytes) under its key, with its shape under `shape:<key>`:
no pickled objects, every byte kept (NULs, invalid UTF-8, empty strings).

Modes: "builtin" (TFLITE_BUILTINS only: the official runtime runs these too, and the tests compare it as well),
"mixed" (TFLITE_BUILTINS + SELECT_TF_OPS, as a user converting a text model: the string ops TFLite lacks become
Flex ops), "keras" (a Keras model through from_keras_model, variables frozen, mixed ops).

Needs `tensorflow` (not a dependency of lite-numba), in its own venv:
    python -m venv /work/venv-tf && /work/venv-tf/bin/pip install tensorflow-cpu==2.21.0
Usage: /work/venv-tf/bin/python scripts/record_string_oracle.py [--out tests/data/strings] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "strings")

# bytes every case meets: empty, embedded NULs, invalid UTF-8, UTF-8, punctuation and whitespace runs
ODD = [b"", b"a\x00b", b"\xff\xfe bad", "h\u00e9llo w\u00f6rld".encode(), b"Hello, World!", b"  two  spaces\t"]


def strs(items, shape=None):
    a = np.empty(len(items), object)
    a[:] = [s.encode() if isinstance(s, str) else s for s in items]
    return a.reshape(shape if shape is not None else (len(items),))


def pack(arr: np.ndarray) -> np.ndarray:
    """TFLite's packed layout of an object array of bytes (C order)."""
    items = [bytes(s) for s in arr.reshape(-1)]
    head = 4 * (len(items) + 2)
    offs = head + np.concatenate([[0], np.cumsum([len(s) for s in items])]).astype(np.int64)
    hdr = np.concatenate([[len(items)], offs]).astype("<i4")
    return np.concatenate([hdr.view(np.uint8), np.frombuffer(b"".join(items), np.uint8)])


def cases(tf):
    """name -> (make(tf) -> (concrete function, trackable or None), {arg: array}, mode)."""
    out = {}

    def fn(f, inputs, mode="builtin", shapes=None):
        def make():
            specs = [tf.TensorSpec((shapes or {}).get(k, v.shape), tf.string if v.dtype == object else v.dtype,
                                   name=k) for k, v in inputs.items()]
            names = list(inputs)
            cf = tf.function(lambda *a: f(**dict(zip(names, a))), input_signature=specs).get_concrete_function()
            return cf, None
        return make, inputs, mode, f

    vocab = strs([b"pad", b"apple", b"", b"a\x00b", b"\xff\xfe", "caf\u00e9"])
    out["gather_1d"] = fn(lambda idx: {"words": tf.gather(tf.constant(vocab), idx)},
                          {"idx": np.array([5, 0, 3, 2, 4, 1, 1], np.int32)}, shapes={"idx": [None]})
    out["gather_0d"] = fn(lambda idx: {"word": tf.gather(tf.constant(vocab), idx)}, {"idx": np.array(3, np.int32)})
    out["gather_input"] = fn(lambda x, idx: {"picked": tf.gather(x, idx), "scalar": tf.gather(x, idx[0])},
                             {"x": strs(ODD), "idx": np.array([2, 2, 0, 5], np.int32)})
    out["gather_nd"] = fn(lambda x, idx: {"picked": tf.gather_nd(x, idx)},
                          {"x": strs(ODD, (2, 3)), "idx": np.array([[1, 2], [0, 0], [1, 0]], np.int32)})
    out["equal"] = fn(lambda x, y: {"eq": tf.equal(x, y), "ne": tf.not_equal(x, y)},
                      {"x": strs(ODD, (3, 2)), "y": strs([b"", b"\xff\xfe bad"])})
    out["equal_scalar"] = fn(lambda x: {"is_empty": tf.equal(x, tf.constant(b"")),
                                        "not_nul": tf.not_equal(x, tf.constant(b"a\x00b"))}, {"x": strs(ODD)},
                             shapes={"x": [None]})

    def shapes_(x, s):
        return {"reshape": tf.reshape(x, [3, 2]), "expand": tf.expand_dims(x, 1), "squeeze": tf.squeeze(x[None]),
                "slice": tf.slice(x, [0, 1], [2, 2]), "reverse_cols": x[:, ::-1], "row1": x[1], "col_last": x[:, -1],
                "stride2": x[::1, ::2], "tile": tf.tile(x, [2, 1]), "fill": tf.fill([2, 3], s),
                "fill_from_x": tf.fill([2], x[0, 1])}

    out["shape_ops"] = fn(shapes_, {"x": strs(ODD, (2, 3)), "s": strs([b"z\x00z"], ())})

    def vocab_module(keys, values, default, spec, kt, vt, body):
        def make():
            table = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(tf.constant(keys, kt), tf.constant(values, vt)), default)

            class M(tf.Module):
                def __init__(self):
                    super().__init__()
                    self.table = table

                @tf.function(input_signature=[spec])
                def serve(self, x):
                    return body(self.table, x)

            m = M()
            return m.serve.get_concrete_function(), m
        return make

    words = [b"the", b"cat", b"sat", b"on", b"mat", b"\xff", b"a\x00b", b""]
    out["vocab_lookup"] = (vocab_module(words, list(range(2, 2 + len(words))), tf.constant(1, tf.int64),
                                        tf.TensorSpec([None], tf.string, name="x"), tf.string, tf.int64,
                                        lambda t, x: {"ids": t.lookup(x), "size": t.size()}),
                           {"x": strs([b"the", b"dog", b"", b"a\x00b", b"mat", b"MAT", b"\xff", b"the"])}, "builtin",
                           None)
    labels = [b"negative", b"neutral", b"positive", "tr\u00e8s bien".encode()]
    out["id_to_label"] = (vocab_module(list(range(len(labels))), labels, tf.constant(b"unknown"),
                                       tf.TensorSpec([None, 5], tf.float32, name="logits"), tf.int64, tf.string,
                                       lambda t, x: {"label": t.lookup(tf.argmax(x, axis=1)),
                                                     "best": tf.argmax(x, axis=1)}),
                          {"logits": np.array([[0.1, 0.9, 0, 0, 0], [3, 1, 2, 0, 0], [0, 0, 0, 1, 0],
                                               [0, 0, 0, 0, 7], [0, 0, 5, 0, 0]], np.float32)}, "builtin", None)

    # Flex text ops, converted as a user converts a text model (builtins where TFLite has them)
    text = strs(ODD + [b"The Cat sat... ON the mat!!", b"  leading", b"trailing  ", b"UPPER lower 123",
                       "\u00c9COLE \u00e9t\u00e9".encode()])
    # (StringUpper is not on the converter's Flex allowlist: tf.strings.upper does not convert)
    out["flex_case"] = fn(lambda x: {"lower": tf.strings.lower(x), "lower_utf8": tf.strings.lower(x, encoding="utf-8"),
                                     "strip": tf.strings.strip(x), "length": tf.strings.length(x),
                                     "chars": tf.strings.length(x, unit="UTF8_CHAR")}, {"x": text}, "mixed")
    punct = r'[!"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~\']'
    out["flex_regex"] = fn(lambda x, p: {
        "strip_punct": tf.strings.regex_replace(x, punct, ""),
        "first_vowel": tf.strings.regex_replace(x, "[aeiou]", "<\\0>", replace_global=False),
        "groups": tf.strings.regex_replace(x, r"(\w+) (\w+)", r"\2 \1"),
        "empty_matches": tf.strings.regex_replace(x, "x*", "-"),
        "dynamic": tf.strings.regex_replace(x, p, "#"),
        "full": tf.strings.regex_full_match(x, r"[A-Za-z ,.!]+"),
        "full_dynamic": tf.strings.regex_full_match(x, p)}, {"x": text, "p": strs([b"[lo]+"], ())}, "mixed")
    out["flex_split"] = fn(lambda x: {
        "words": tf.strings.split(x).to_tensor(default_value=b"<pad>"),
        "by_comma": tf.strings.split(x, sep=",").to_tensor(),
        "max1": tf.strings.split(x, maxsplit=1).to_tensor(),
        "by_ll": tf.strings.split(x, sep="ll", maxsplit=2).to_tensor()}, {"x": text}, "mixed")
    out["flex_join_substr"] = fn(lambda x, y: {
        "join": tf.strings.join([x, y, tf.constant(b"!")], separator=b"|"),
        "reduce_rows": tf.strings.reduce_join(x, axis=1, separator=b"+"),
        "reduce_all": tf.strings.reduce_join(x, axis=[0, 1], separator=b","),
        "head": tf.strings.substr(x, 0, 3), "tail": tf.strings.substr(x, -2, 5),
        "chars": tf.strings.substr(x, 1, 2, unit="UTF8_CHAR")},
        {"x": strs(["h\u00e9llo", "w\u00f6rld!", "abc", "xyz", "\u00e9\u00e9\u00e9", "12345"], (2, 3)),
         "y": strs([b"1", b"2", b"3", b"4", b"5", b"6"], (2, 3))}, "mixed")
    out["flex_ngrams"] = fn(lambda x: {
        "bigrams": tf.strings.ngrams(tf.strings.split(x), 2).to_tensor(),
        "padded": tf.strings.ngrams(tf.strings.split(x), [1, 3], separator=b"_", pad_values=(b"<s>", b"</s>"),
                                    padding_width=1).to_tensor(),
        "short": tf.strings.ngrams(tf.strings.split(x), 4, preserve_short_sequences=True,
                                   pad_values=b"#", padding_width=1).to_tensor()},
        {"x": strs([b"a b c d", b"one", b"", b"x y", b"p q r s t u"])}, "mixed")
    out["flex_hash"] = fn(lambda x: {"bucket": tf.strings.to_hash_bucket_fast(x, 97),
                                     "big": tf.strings.to_hash_bucket_fast(x, 1 << 40)}, {"x": text}, "mixed")
    out["flex_lookup"] = (vocab_module([b"low", b"mid", b"high"], [0.25, 0.5, 1.0], tf.constant(-1.0),
                                       tf.TensorSpec([None], tf.string, name="x"), tf.string, tf.float32,
                                       lambda t, x: {"score": t.lookup(x), "size": t.size()}),
                          {"x": strs([b"mid", b"none", b"high", b""])}, "mixed", None)
    return out


def raw_ops(tf):
    """Text ops the converter will not emit as Flex ops (not on its allowlist: StringUpper, StringNGrams) but a
    model may hold: name -> (TF op, its raw_ops function of the inputs, {input: array}). Recorded with the NodeDef
    TensorFlow itself builds (`nodedef`), so the test makes the one-op Flex model from it."""
    data = strs([b"a", b"b", b"c", b"d", b"one", b"x", b"y", b"p", b"q", b"r"])
    splits = np.array([0, 4, 5, 5, 7, 10], np.int64)
    text = strs(ODD + ["\u00e9cole \u00df stra\u00dfe".encode(), b"MiXeD 123"])
    ng = tf.raw_ops.StringNGrams
    return {
        "upper": ("StringUpper", lambda x: [tf.raw_ops.StringUpper(input=x)], {"x": text}),
        "upper_utf8": ("StringUpper", lambda x: [tf.raw_ops.StringUpper(input=x, encoding="utf-8")], {"x": text}),
        "ngrams_2": ("StringNGrams", lambda d, s: list(ng(data=d, data_splits=s, separator=" ", ngram_widths=[2],
                                                          left_pad="", right_pad="", pad_width=0,
                                                          preserve_short_sequences=False)),
                     {"d": data, "s": splits}),
        "ngrams_pad": ("StringNGrams", lambda d, s: list(ng(data=d, data_splits=s, separator="_",
                                                            ngram_widths=[1, 3], left_pad="<s>", right_pad="</s>",
                                                            pad_width=-1, preserve_short_sequences=False)),
                       {"d": data, "s": splits}),
        "ngrams_short": ("StringNGrams", lambda d, s: list(ng(data=d, data_splits=s, separator=" ", ngram_widths=[4],
                                                              left_pad="#", right_pad="#", pad_width=1,
                                                              preserve_short_sequences=True)),
                         {"d": data, "s": splits}),
    }


def record_raw(tf, out_dir: str, name: str, op: str, f, inputs: dict) -> None:
    specs = [tf.TensorSpec(v.shape, tf.string if v.dtype == object else v.dtype, name=k) for k, v in inputs.items()]
    graph = tf.function(f, input_signature=specs).get_concrete_function().graph
    (node,) = [o for o in graph.get_operations() if o.type == op]
    tensors = [tf.constant(list(v.reshape(-1)) if v.dtype == object else v, tf.string if v.dtype == object else None,
                           shape=v.shape) for v in inputs.values()]
    outs = {str(k): np.array(v.numpy(), object) if v.dtype == tf.string else v.numpy()
            for k, v in enumerate(f(*tensors))}
    arrays = {"nodedef": np.frombuffer(node.node_def.SerializeToString(), np.uint8), "op": np.array(op)}
    for prefix, values in (("in", inputs), ("out", outs)):
        for k, v in values.items():
            key = f"{prefix}:{k}"
            if v.dtype == object:
                arrays[key], arrays[f"shape:{key}"] = pack(v), np.array(v.shape, np.int64)
            else:
                arrays[key] = v
    np.savez_compressed(os.path.join(out_dir, f"raw_{name}.npz"), **arrays)
    print(f"raw_{name}: {op}, outputs {sorted(outs)}", file=sys.stderr)


def textvec_model(tf):
    """A Keras TextVectorization + Embedding classifier (mixed ops: Flex StringLower, StaticRegexReplace,
    StringSplitV2, RaggedTensorToTensor around builtin hash tables and maths)."""
    import keras

    keras.utils.set_random_seed(7)
    corpus = np.array(["The cat sat on the mat.", "A dog! A DOG?", "cats and dogs, together", "Hello world",
                       "the end", "caf\u00e9 cr\u00e8me", "no no no"])
    tv = keras.layers.TextVectorization(max_tokens=24, output_sequence_length=8)
    tv.adapt(corpus)
    inp = keras.Input(shape=(1,), dtype="string", name="text")
    x = keras.layers.Embedding(24, 6)(tv(inp))
    x = keras.layers.GlobalAveragePooling1D()(x)
    x = keras.layers.Dense(8, activation="relu")(x)
    model = keras.Model(inp, keras.layers.Dense(3, activation="softmax", name="probs")(x))
    inputs = {"text": strs([b"The CAT sat!", b"dogs, dogs, dogs", b"", "caf\u00e9?".encode(),
                            b"unknown words only", b"a b c d e f g h i j k"], (6, 1))}
    return model, inputs


def convert(tf, make, mode: str) -> bytes:
    cf, module = make()
    conv = tf.lite.TFLiteConverter.from_concrete_functions([cf], module or tf.Module())
    ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if mode == "mixed":
        ops.append(tf.lite.OpsSet.SELECT_TF_OPS)
    conv.target_spec.supported_ops = ops
    return conv.convert()


def save(out_dir: str, name: str, model: bytes, inputs: dict, outputs: dict) -> None:
    arrays = {}
    for prefix, values in (("in", inputs), ("out", outputs)):
        for k, v in values.items():
            v = np.asarray(v)
            key = f"{prefix}:{k}"
            if v.dtype == object:
                arrays[key], arrays[f"shape:{key}"] = pack(v), np.array(v.shape, np.int64)
            else:
                arrays[key] = v
    with open(os.path.join(out_dir, f"{name}.tflite"), "wb") as f:
        f.write(model)
    np.savez_compressed(os.path.join(out_dir, f"{name}.npz"), **arrays)
    print(f"{name}: {len(model)} bytes, outputs {sorted(outputs)}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    os.makedirs(args.out, exist_ok=True)
    for name, (make, inputs, mode, f) in cases(tf).items():
        if args.only and name not in args.only:
            continue
        model = convert(tf, make, mode)
        tensors = {k: tf.constant(list(v.reshape(-1)) if v.dtype == object else v, tf.string if v.dtype == object
                                  else None, shape=v.shape) for k, v in inputs.items()}
        if f is None:  # a module's function (its table)
            cf, _ = make()
            ref = cf(**tensors)
        else:
            ref = f(**tensors)
        save(args.out, f"{mode}_{name}" if mode != "builtin" else name, model, inputs,
             {k: np.array(v.numpy(), object) if v.dtype == tf.string else v.numpy() for k, v in ref.items()})
    for name, (op, f, inputs) in raw_ops(tf).items():
        if not args.only or f"raw_{name}" in args.only:
            record_raw(tf, args.out, name, op, f, inputs)
    if not args.only or "model_textvec" in args.only:
        model, inputs = textvec_model(tf)
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS, tf.lite.OpsSet.SELECT_TF_OPS]
        ref = model(tf.constant(list(inputs["text"].reshape(-1)), tf.string, shape=inputs["text"].shape))
        save(args.out, "model_textvec", conv.convert(), inputs, {"output_0": np.asarray(ref)})  # (its signature's)


if __name__ == "__main__":
    main()
