"""Oracle helpers for parity tests against the official LiteRT runtime."""

from __future__ import annotations

import os
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from .interpreter import Interpreter

__all__ = ["assert_close", "official_interpreter", "require_official", "run_official"]


def require_official() -> ModuleType:
    """Return ``ai_edge_litert.interpreter``, or skip (fail under ``CI``) the test.

    When the official runtime cannot be imported the current test is skipped
    with a reason, except when the ``CI`` environment variable is set: then it
    fails, so a broken CI environment cannot silently skip all parity tests.
    """
    try:
        from ai_edge_litert import interpreter as litert_interpreter
    except ImportError as exc:  # pragma: no cover - depends on the environment
        import pytest

        reason = (f"official runtime ai_edge_litert is not importable ({exc}); "
                  "install ai-edge-litert to run parity tests")
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason, allow_module_level=True)
    return litert_interpreter


def official_interpreter(model: bytes | str | os.PathLike, num_threads: int = 1) -> Any:
    """Create and allocate an official LiteRT ``Interpreter`` for ``model``.

    ``model`` is the flatbuffer bytes or a path to a ``.tflite`` file.  The
    builtin op resolver without default delegates (no XNNPACK) is used, so the
    reference is the runtime's own builtin kernels.
    """
    lit = require_official()
    kwargs: dict[str, Any] = {
        "num_threads": num_threads,
        "experimental_op_resolver_type": lit.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    }
    if isinstance(model, (bytes, bytearray, memoryview)):
        kwargs["model_content"] = bytes(model)
    else:
        kwargs["model_path"] = os.fspath(model)
    interp = lit.Interpreter(**kwargs)
    interp.allocate_tensors()
    return interp


def run_official(model: bytes | str | os.PathLike, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run ``model`` in the official runtime and return copies of its outputs.

    ``inputs`` are given in input-detail order; an input whose shape differs
    from the model's current input shape is resized first.  Outputs are
    returned in output-detail order.
    """
    interp = official_interpreter(model)
    details = interp.get_input_details()
    if len(inputs) != len(details):
        raise ValueError(f"model has {len(details)} inputs, got {len(inputs)}")
    arrays = [np.asarray(x) for x in inputs]
    resized = False
    for d, arr in zip(details, arrays):
        if tuple(int(s) for s in d["shape"]) != arr.shape:
            interp.resize_tensor_input(d["index"], list(arr.shape), strict=False)
            resized = True
    if resized:
        interp.allocate_tensors()
    for d, arr in zip(details, arrays):
        interp.set_tensor(d["index"], arr)
    interp.invoke()
    outs = []
    for d in interp.get_output_details():
        if 0 in d["shape"]:  # the official get_tensor refuses empty tensors ("Invalid tensor size")
            outs.append(np.zeros(tuple(d["shape"]), d["dtype"]))
        else:
            outs.append(np.array(interp.get_tensor(d["index"]), copy=True))
    return outs


def _abs_diff(ours: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Element-wise |ours - ref| as float64, exact for 64-bit integers (0-d inputs give 1-element results)."""
    ours, ref = np.atleast_1d(ours), np.atleast_1d(ref)
    kind = ref.dtype.kind
    if kind == "b":
        return (ours != ref).astype(np.float64)
    if kind in "iu":
        wide = np.uint64 if kind == "u" else np.int64
        a = ours.astype(wide)
        b = ref.astype(wide)
        # modular uint64 subtraction of the larger minus the smaller is exact
        au, bu = a.view(np.uint64), b.view(np.uint64)
        d = np.where(a >= b, au - bu, bu - au)
        return d.astype(np.float64)
    a = ours.astype(np.complex128 if kind == "c" else np.float64)
    b = ref.astype(a.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(a - b).astype(np.float64)
    same = (a == b) | (np.isnan(a) & np.isnan(b))  # equal infs / both NaN match
    d[same] = 0.0
    d[np.isnan(d)] = np.inf  # NaN in only one side
    return d


def assert_close(ours: Any, ref: Any, tol: float = 1e-5) -> None:
    """Assert shapes and dtypes match and ``max|ours-ref| <= tol*max(1, max|ref|)``.

    NaNs must coincide; infinities must coincide with the same sign.  Integer
    and bool outputs use the same rule (so small ``tol`` means exact match).
    """
    ours = np.asarray(ours)
    ref = np.asarray(ref)
    if ours.shape != ref.shape:
        raise AssertionError(f"shape mismatch: ours {ours.shape} vs ref {ref.shape}")
    if ours.dtype != ref.dtype:
        raise AssertionError(f"dtype mismatch: ours {ours.dtype} vs ref {ref.dtype}")
    if ref.size == 0:
        return
    diff = _abs_diff(ours, ref)
    if ref.dtype.kind == "b":
        ref_mag = 1.0
    else:
        mags = np.abs(ref.astype(np.complex128 if ref.dtype.kind == "c" else np.float64))
        finite = mags[np.isfinite(mags)]
        ref_mag = float(finite.max()) if finite.size else 0.0
    bound = tol * max(1.0, ref_mag)
    worst = int(np.argmax(diff))
    max_err = float(diff.flat[worst])
    if not max_err <= bound:
        idx = np.unravel_index(worst, ref.shape) if ref.ndim else ()
        n_bad = int(np.count_nonzero(diff > bound))
        raise AssertionError(
            f"max abs error {max_err:.6g} > tolerance {bound:.6g} "
            f"(tol={tol:g}, max|ref|={ref_mag:.6g}); worst at index {tuple(int(i) for i in idx)}: "
            f"ours={ours.flat[worst]!r}, ref={ref.flat[worst]!r}; "
            f"{n_bad}/{ref.size} elements out of tolerance; shape {ref.shape}, dtype {ref.dtype}"
        )


def random_array(rng: np.random.Generator, dtype, shape) -> np.ndarray:
    """Random values over a dtype's whole range (bool: 0/1; integers: every value possible; floats: normal)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(shape).astype(dtype)


def run_ours(model: bytes, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run a model once in lite-numba (default resolver) and return copies of its outputs."""
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def check_same(model: bytes, inputs: Sequence[np.ndarray]) -> None:
    """Assert lite-numba's outputs equal the official runtime's byte for byte (data movement, integer ops)."""
    ours = run_ours(model, inputs)
    ref = run_official(model, inputs)
    assert len(ours) == len(ref)
    for o, r in zip(ours, ref):
        assert (o.dtype, o.shape) == (r.dtype, r.shape)
        assert o.tobytes() == r.tobytes()
