"""OpenVINO as a peer runtime of the bench (issue 31): a .tflite model run by the `openvino` package's CPU plugin in a
process of its own, driven round by round from the bench's process.

OpenVINO reads .tflite files itself (its TensorFlow Lite frontend). Its thread pool keeps spinning after a call and
would slow whatever runs next in the same process, so the model lives in a child process (multiprocessing, spawn):
the bench sends it the inputs once, reads its outputs back (to compare with the official runtime's, loosely: OpenVINO
is a peer, not an oracle), then asks it for timed rounds between its own rounds of lite-numba and XNNPACK."""

from __future__ import annotations

import multiprocessing as mp
import time

import numpy as np


def available() -> bool:
    try:
        import openvino  # noqa: F401  (lazy: an optional peer)
    except ImportError:
        return False
    return True


def _child(conn, path: str, threads: int) -> None:
    import openvino as ov  # lazy: only the child process loads OpenVINO

    core = ov.Core()
    try:  # f32 precision: on a CPU with AMX or AVX-512 BF16 the plugin would run float layers in bfloat16
        compiled = core.compile_model(core.read_model(path), "CPU", {
            "INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_PRECISION_HINT": "f32"})
    except RuntimeError as e:  # a model its TensorFlow Lite frontend cannot read (litert-torch's ResNet-18s)
        conn.send(("error", " ".join(line.strip() for line in str(e).splitlines()[1:4])))
        return
    req = compiled.create_infer_request()
    conn.send(([i.get_any_name() for i in compiled.inputs], [o.get_any_name() for o in compiled.outputs]))
    feed = []
    while True:
        msg, arg = conn.recv()
        if msg == "inputs":  # set once, as the bench sets ours: a timed call is the inference alone
            feed = [np.ascontiguousarray(x) for x in arg]
            for k, x in enumerate(feed):
                req.set_input_tensor(k, ov.Tensor(x))
            req.infer()
            conn.send([np.array(req.get_output_tensor(k).data) for k in range(len(compiled.outputs))])
        elif msg == "time":  # arg invokes, wall time per call in µs
            t0 = time.perf_counter()
            for _ in range(arg):
                req.infer()
            conn.send((time.perf_counter() - t0) / arg * 1e6)
        else:
            conn.send(None)
            return


class Unsupported(RuntimeError):
    """OpenVINO cannot read or compile the model (its message)."""


class OpenVINOPeer:
    """The model compiled by OpenVINO for its CPU plugin with `threads` inference threads, in a child process."""

    def __init__(self, path: str, threads: int):
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_child, args=(child, str(path), threads), daemon=True)
        self._proc.start()
        child.close()
        names = self._recv()
        if names[0] == "error":
            self._proc.join(10)
            raise Unsupported(names[1])
        self.input_names, self.output_names = names

    def _recv(self):
        if not self._conn.poll(300):
            raise RuntimeError("the OpenVINO process did not answer in 300 s")
        return self._conn.recv()

    def run(self, inputs: dict[str, np.ndarray], output_names: list[str]) -> list[np.ndarray]:
        """Outputs for inputs given by tensor name (the .tflite's names, which OpenVINO keeps; by position when a
        name is not found), in the order of `output_names`."""
        names = list(inputs)
        order = [n if n in inputs else names[k] for k, n in enumerate(self.input_names)]
        self._conn.send(("inputs", [inputs[n] for n in order]))
        outs = self._recv()
        by_name = dict(zip(self.output_names, outs))
        return [by_name[n] if n in by_name else outs[k] for k, n in enumerate(output_names)]

    def time_us(self, invokes: int) -> float:
        self._conn.send(("time", int(invokes)))
        return self._recv()

    def close(self) -> None:
        try:
            self._conn.send(("stop", None))
            self._recv()
        except (OSError, EOFError, RuntimeError):
            pass
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()


def deviation(ov_out: np.ndarray, ref: np.ndarray, quantization) -> tuple[float, float]:
    """(max |OpenVINO - official|, the output's scale max |official|), dequantized when the output is quantized
    (quantization = the output detail's (scale, zero point))."""
    scale, zp = quantization if quantization else (0.0, 0)
    a, b = np.asarray(ov_out, np.float64), np.asarray(ref, np.float64)
    if scale:
        a, b = (a - zp) * scale, (b - zp) * scale
    return float(np.max(np.abs(a - b))) if a.size else 0.0, float(np.max(np.abs(b))) if b.size else 0.0
