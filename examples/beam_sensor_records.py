"""Score JSON-lines sensor records with Apache Beam's RunInference and lite-numba (pip install "lite-numba[beam]").

    python examples/beam_sensor_records.py RECORDS.jsonl OUT_PREFIX [--batch-size 64]
    python examples/beam_sensor_records.py --demo 5000 /tmp/records.jsonl /tmp/scores   # writes demo records first

Each line is {"id": ..., "readings": [16 int8 values]}. The model (written here with lite_numba.builder: an int8
fully connected layer and a logistic, batch dimension fixed at 1, so each record is one invoke) scores a record;
TFLiteModelHandlerNumpy is the model handler RunInference loads once per worker. The pipeline runs on Beam's
DirectRunner (pass --runner and other Beam options after --) and writes {"id", "score"} lines to OUT_PREFIX*.jsonl
(tests/test_scaleout_examples.py checks them against a plain Interpreter loop)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

FEATURES, HIDDEN = 16, 4


def scoring_model() -> bytes:
    from lite_numba.builder import ModelBuilder

    rng = np.random.default_rng(7)
    b = ModelBuilder()
    x = b.add_input("readings", np.int8, [1, FEATURES], quant=(0.05, 0))
    h = b.add_tensor("hidden", np.int8, [1, HIDDEN], quant=(0.1, -3))
    s = b.add_tensor("score", np.int8, [1, HIDDEN], quant=(1 / 256, -128))
    w = b.add_const("w", rng.integers(-127, 128, (HIDDEN, FEATURES), dtype=np.int8), quant=(0.01, 0))
    bias = b.add_const("b", rng.integers(-500, 500, HIDDEN, dtype=np.int32), quant=(0.05 * 0.01, 0))
    b.add_op("FULLY_CONNECTED", [x, w, bias], [h])
    b.add_op("LOGISTIC", [h], [s])
    b.mark_output(s)
    return b.build()


def write_demo(path: Path, n: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for k in range(n):
            f.write(json.dumps({"id": f"sensor-{k:06d}",
                                "readings": rng.integers(-128, 128, FEATURES).tolist()}) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("records", type=Path)
    ap.add_argument("out_prefix")
    ap.add_argument("--demo", type=int, default=0, help="write this many demo records first")
    ap.add_argument("--batch-size", type=int, default=64)
    args, beam_args = ap.parse_known_args(argv)
    if args.demo:
        write_demo(args.records, args.demo)

    import apache_beam as beam
    from apache_beam.ml.inference.base import KeyedModelHandler, RunInference
    from apache_beam.options.pipeline_options import PipelineOptions

    from lite_numba.batch.beam import TFLiteModelHandlerNumpy

    model = Path(str(args.out_prefix) + ".model.tflite")
    model.write_bytes(scoring_model())
    handler = KeyedModelHandler(TFLiteModelHandlerNumpy(str(model), min_batch_size=1,
                                                        max_batch_size=args.batch_size))

    def parse(line: str):
        rec = json.loads(line)
        return rec["id"], np.asarray(rec["readings"], np.int8)

    def to_line(kv) -> str:
        key, result = kv
        return json.dumps({"id": key, "score": result.inference["score"].tolist()})

    options = PipelineOptions(beam_args or ["--runner=DirectRunner"])
    with beam.Pipeline(options=options) as p:
        (p | beam.io.ReadFromText(str(args.records))
           | beam.Map(parse)
           | RunInference(handler)
           | beam.Map(to_line)
           | beam.io.WriteToText(args.out_prefix, file_name_suffix=".jsonl"))
    print(f"scores written to {args.out_prefix}*.jsonl")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
