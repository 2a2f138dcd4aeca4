"""Oracle helpers for parity tests against the official LiteRT runtime: the tests' one shared set.

- Running a model: ``run_ours`` (lite-numba, any Interpreter keyword), ``run_official`` (the official builtin
  kernels), ``run_both`` (``run_both_single`` for a model with one output), ``run_interpreter`` (the outputs and
  the Interpreter, to look inside it afterwards), ``invoke_with`` / ``invoke_both`` (one more invoke of
  interpreters already made: their state carries over) and ``run_both_steps`` (a sequence of invokes on one
  interpreter of each runtime, for stateful models).
- Comparing: ``assert_close`` / ``assert_outputs_close`` (the float criteria of ``TOLERANCES``, integers exact),
  ``compare_with_official`` (run both and compare), ``check_same`` (byte for byte), ``assert_details_equal``
  (tensor detail dicts), ``prepare_error`` (the message of a model lite-numba refuses).
- Building: ``one_op`` (a one-operator model), ``random_array``.

A model is its flatbuffer bytes or the path of a ``.tflite`` file; inputs are given in input-detail order, one per
input, and an input whose shape differs from the model's is resized first (in both runtimes).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np

from .api.interpreter import Interpreter
from .format.builder import ModelBuilder

__all__ = ["TOLERANCES", "assert_close", "assert_details_equal", "assert_outputs_close", "check_same",
           "compare_with_official", "invoke_both", "invoke_with", "official_interpreter", "one_op", "prepare_error",
           "random_array", "require_official", "run_both", "run_both_single", "run_both_steps", "run_interpreter",
           "run_official", "run_ours"]

Model = bytes | str | os.PathLike


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


def _source(model: Model) -> dict[str, Any]:
    """The Interpreter keyword naming a model: model_content for bytes, model_path otherwise."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        return {"model_content": bytes(model)}
    return {"model_path": os.fspath(model)}


def official_interpreter(model: Model, num_threads: int | None = 1, *, allocate: bool = True,
                         **interpreter_kwargs: Any) -> Any:
    """Create (and, unless ``allocate=False``, allocate) an official LiteRT ``Interpreter`` for ``model``.

    ``model`` is the flatbuffer bytes or a path to a ``.tflite`` file.  The builtin op resolver without default
    delegates (no XNNPACK) is used, so the reference is the runtime's own builtin kernels.  ``num_threads=None``
    leaves the official default; other keywords go to the official constructor.
    """
    lit = require_official()
    kwargs: dict[str, Any] = {
        **_source(model),
        "experimental_op_resolver_type": lit.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        **interpreter_kwargs,
    }
    if num_threads is not None:
        kwargs["num_threads"] = num_threads
    interp = lit.Interpreter(**kwargs)
    if allocate:
        interp.allocate_tensors()
    return interp


def _input_details(interp: Any, inputs: Sequence[Any]) -> list[dict]:
    """The interpreter's input details, after checking there is one input array per model input."""
    details = interp.get_input_details()
    if len(inputs) != len(details):
        raise ValueError(f"model has {len(details)} inputs, got {len(inputs)}")
    return details


def _resize_to(interp: Any, inputs: Sequence[Any]) -> bool:
    """Resize every input whose shape differs from its array's; True when one was (allocate again)."""
    resized = False
    for d, x in zip(_input_details(interp, inputs), inputs):
        if tuple(int(s) for s in d["shape"]) != np.shape(x):
            interp.resize_tensor_input(d["index"], list(np.shape(x)), strict=False)
            resized = True
    return resized


def invoke_with(interp: Any, inputs: Sequence[Any]) -> list[np.ndarray]:
    """Set ``inputs`` (one per input, in input-detail order), invoke, return copies of the outputs.

    ``interp`` is an allocated lite-numba or official interpreter; its state (variable tensors) carries over from
    one call to the next.  An empty output of the official runtime (whose ``get_tensor`` refuses it: "Invalid tensor
    size") comes back as an empty array of its detail's shape and dtype.
    """
    for d, x in zip(_input_details(interp, inputs), inputs):
        interp.set_tensor(d["index"], x)
    interp.invoke()
    ours = isinstance(interp, Interpreter)  # its get_tensor returns a copy already
    outs = []
    for d in interp.get_output_details():
        if not ours and 0 in d["shape"]:
            outs.append(np.zeros(tuple(d["shape"]), d["dtype"]))
        else:
            value = interp.get_tensor(d["index"])
            outs.append(value if ours else np.array(value, copy=True))
    return outs


def invoke_both(ours: Any, ref: Any, inputs: Sequence[Any]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``invoke_with`` on two interpreters (lite-numba's and the official one) with the same inputs."""
    return invoke_with(ours, inputs), invoke_with(ref, inputs)


def run_official(model: Model, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run ``model`` once in the official runtime and return copies of its outputs.

    ``inputs`` are given in input-detail order; an input whose shape differs
    from the model's current input shape is resized first.  Outputs are
    returned in output-detail order.
    """
    interp = official_interpreter(model)
    arrays = [np.asarray(x) for x in inputs]
    if _resize_to(interp, arrays):
        interp.allocate_tensors()
    return invoke_with(interp, arrays)


def run_interpreter(model: Model, inputs: Sequence[Any], **interpreter_kwargs: Any) -> tuple[list[np.ndarray],
                                                                                             Interpreter]:
    """Run ``model`` once in a new lite-numba ``Interpreter(**interpreter_kwargs)`` (e.g. ``op_resolver``,
    ``num_threads``, ``experimental_preserve_all_tensors``); returns (copies of the outputs, the interpreter).

    An input whose shape differs from the model's is resized before the one ``allocate_tensors()``.
    """
    it = Interpreter(**_source(model), **interpreter_kwargs)
    _resize_to(it, inputs)
    it.allocate_tensors()
    return invoke_with(it, inputs), it


def run_ours(model: Model, inputs: Sequence[Any], **interpreter_kwargs: Any) -> list[np.ndarray]:
    """Run ``model`` once in lite-numba and return copies of its outputs (``run_interpreter`` without the
    interpreter); the default op resolver unless ``op_resolver=`` says otherwise."""
    return run_interpreter(model, inputs, **interpreter_kwargs)[0]


def run_both(model: Model, inputs: Sequence[Any], **interpreter_kwargs: Any) -> tuple[list[np.ndarray],
                                                                                     list[np.ndarray]]:
    """(lite-numba's outputs, the official runtime's outputs) of one run on the same inputs."""
    return run_ours(model, inputs, **interpreter_kwargs), run_official(model, inputs)


def run_both_single(model: Model, inputs: Sequence[Any], **interpreter_kwargs: Any) -> tuple[np.ndarray, np.ndarray]:
    """``run_both`` for a model with one output: (lite-numba's output, the official output)."""
    (ours,), (ref,) = run_both(model, inputs, **interpreter_kwargs)
    return ours, ref


def run_both_steps(model: Model, steps: Sequence[Sequence[Any]], reset_before: Sequence[int] = (),
                   **interpreter_kwargs: Any) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """Invoke one lite-numba and one official interpreter on each input list of ``steps`` in turn, the state carried
    from one invoke to the next (``reset_all_variables()`` on both before the steps listed in ``reset_before``);
    returns, per step, one (ours, ref) pair per output."""
    ours = Interpreter(**_source(model), **interpreter_kwargs)
    ours.allocate_tensors()
    ref = official_interpreter(model)
    results = []
    for k, inputs in enumerate(steps):
        if k in reset_before:
            ours.reset_all_variables()
            ref.reset_all_variables()
        mine, theirs = invoke_both(ours, ref, inputs)
        if len(mine) != len(theirs):
            raise AssertionError(f"step {k}: {len(mine)} outputs vs {len(theirs)} in the reference")
        results.append(list(zip(mine, theirs)))
    return results


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


class Tolerance(NamedTuple):
    """One op family's float criterion: |ours - ref| <= rtol * |ref| + atol_scale * max|ref| per element."""

    rtol: float
    atol_scale: float
    why: str


# Float tolerances by op family, in ONE place: assert_close(..., family=NAME) looks them up. The criterion is per
# element, |ours - ref| <= rtol * |ref| + atol with atol = atol_scale * max|ref| (the largest finite |ref| of the
# whole output): relative where the value is not small compared with the output, and an absolute floor tied to the
# output's scale where it is (an element near zero that came out of a cancellation carries the rounding error of the
# large terms it cancelled, which is of the order of the output's scale, not of the element). No floor of 1: an
# output of 1e-4 is held to 1e-4 * 1e-5, so a 5% error there fails.
TOLERANCES: dict[str, Tolerance] = {
    "exact": Tolerance(0.0, 0.0, "no arithmetic, or the same single rounding as the official kernel: data movement, "
                                 "min/max, relu family, comparisons-to-float, casts, quantize, dequantize"),
    "elementwise": Tolerance(2e-6, 1e-6, "one or two roundings per element (add/sub/mul/div/sqrt/rsqrt/square, "
                                         "squared difference); operations may be fused or reordered (x*(1/y))"),
    "transcendental": Tolerance(1e-5, 1e-6, "exp/log/tanh/logistic/sin/cos/gelu/pow/elu: libm or our polynomial vs "
                                            "the official kernel's own approximation, a few ulp apart"),
    "accumulation": Tolerance(1e-5, 1e-5, "dot products and sums (conv, depthwise, FC, batch matmul, transpose conv, "
                                          "average pool, mean/sum, softmax, normalization): vector lanes and tiles "
                                          "sum in another order than the official kernels; the error is relative to "
                                          "the terms, i.e. to the output's scale"),
    "sequence": Tolerance(1e-4, 1e-4, "recurrent and hybrid ops (LSTM/GRU/RNN/SVDF, dynamic-range quantized): "
                                      "accumulation errors compound over time steps, and hybrid ops re-quantize "
                                      "their inputs, where one rounding step may flip"),
    "model": Tolerance(1e-4, 1e-4, "whole networks: tens of accumulating layers, each reordering its sums"),
}
DEFAULT_FAMILY = "accumulation"


def _criterion(family: str | None, tol: float | None, rtol: float | None, atol: float | None,
               ref_mag: float) -> tuple[float, float, str]:
    """(rtol, absolute atol, description) from a family name or explicit values (tol sets rtol = atol_scale)."""
    if family is not None:
        if family not in TOLERANCES:
            raise ValueError(f"unknown tolerance family {family!r}: expected one of {', '.join(TOLERANCES)}")
        t = TOLERANCES[family]
        r, a_scale, name = t.rtol, t.atol_scale, family
    elif tol is not None:
        r, a_scale, name = tol, tol, f"tol={tol:g}"
    else:
        t = TOLERANCES[DEFAULT_FAMILY]
        r, a_scale, name = t.rtol, t.atol_scale, DEFAULT_FAMILY
    if rtol is not None:
        r = rtol
    a = a_scale * ref_mag if atol is None else atol
    return float(r), float(a), name


def assert_close(ours: Any, ref: Any, tol: float | None = None, *, family: str | None = None,
                 rtol: float | None = None, atol: float | None = None, what: str = "") -> None:
    """Assert shapes and dtypes match, then: integers and bools exactly equal; floats within
    ``|ours - ref| <= rtol * |ref| + atol`` for every element.

    The float criterion comes from ``family`` (a key of TOLERANCES, where each family's values and reasons are
    written down), or from ``tol`` (``rtol = tol`` and ``atol = tol * max|ref|``), else the default family
    (``accumulation``); ``rtol``/``atol`` (absolute) override either. ``atol`` defaults to a fraction of the output's
    scale (its largest finite ``|ref|``), never to an absolute 1. NaNs must coincide; infinities must coincide with
    the same sign. ``what`` prefixes the message (which output, which path).
    """
    ours = np.asarray(ours)
    ref = np.asarray(ref)
    head = f"{what}: " if what else ""
    if ours.shape != ref.shape:
        raise AssertionError(f"{head}shape mismatch: ours {ours.shape} vs ref {ref.shape}")
    if ours.dtype != ref.dtype:
        raise AssertionError(f"{head}dtype mismatch: ours {ours.dtype} vs ref {ref.dtype}")
    if ref.size == 0:
        return
    diff = _abs_diff(ours, ref)
    if ref.dtype.kind in "biu":  # integers and bools: exact, whatever tol says
        bound = np.zeros(diff.shape)
        crit = "exact (integer)"
        ref_mag = 0.0
    else:
        mags = np.atleast_1d(np.abs(ref.astype(np.complex128 if ref.dtype.kind == "c" else np.float64)))
        finite = mags[np.isfinite(mags)]
        ref_mag = float(finite.max()) if finite.size else 0.0
        r, a, name = _criterion(family, tol, rtol, atol, ref_mag)
        with np.errstate(invalid="ignore"):
            bound = r * np.where(np.isfinite(mags), mags, 0.0) + a
        crit = f"{name}: rtol={r:g}, atol={a:.3g}"
    bad = ~(diff <= bound)
    if bad.any():
        excess = np.where(bad, diff - bound, -np.inf)
        worst = int(np.argmax(excess))
        idx = np.unravel_index(worst, ref.shape) if ref.ndim else ()
        max_err = float(diff.flat[worst])
        refv = ref.flat[worst] if ref.ndim else ref[()]
        oursv = ours.flat[worst] if ours.ndim else ours[()]
        rel = max_err / abs(float(refv)) if ref.dtype.kind == "f" and refv != 0 else float("inf")
        raise AssertionError(
            f"{head}{int(bad.sum())}/{ref.size} elements out of tolerance ({crit}, max|ref|={ref_mag:.6g}); "
            f"worst at index {tuple(int(i) for i in idx)}: ours={oursv!r}, ref={refv!r}, |diff|={max_err:.6g} "
            f"(relative {rel:.3g}, bound {float(bound.flat[worst]):.3g}); max |diff| overall "
            f"{float(diff.max()):.6g}; shape {ref.shape}, dtype {ref.dtype}"
        )


def assert_outputs_close(ours: Sequence[Any], refs: Sequence[Any], tol: float | None = None, *,
                         family: str | None = None, what: str = "") -> None:
    """assert_close on each pair of a list of outputs (same count), naming the output index on failure."""
    if len(ours) != len(refs):
        raise AssertionError(f"{what}: {len(ours)} outputs vs {len(refs)} in the reference")
    for k, (o, r) in enumerate(zip(ours, refs)):
        assert_close(o, r, tol, family=family, what=f"{what} output {k}".strip())


def random_array(rng: np.random.Generator, dtype, shape) -> np.ndarray:
    """Random values over a dtype's whole range (bool: 0/1; integers: every value possible; floats: normal)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(shape).astype(dtype)


def compare_with_official(model: Model, inputs: Sequence[Any], tol: float | None = None, *,
                          family: str | None = None, what: str = "", **interpreter_kwargs: Any) -> list[np.ndarray]:
    """Run ``model`` in both runtimes and ``assert_outputs_close`` (as many outputs; integers exact, floats by
    ``tol`` / ``family`` as in ``assert_close``); returns lite-numba's outputs."""
    ours, refs = run_both(model, inputs, **interpreter_kwargs)
    assert_outputs_close(ours, refs, tol, family=family, what=what)
    return ours


def check_same(model: Model, inputs: Sequence[np.ndarray]) -> None:
    """Assert lite-numba's outputs equal the official runtime's byte for byte (data movement, integer ops)."""
    ours, ref = run_both(model, inputs)
    assert len(ours) == len(ref)
    for o, r in zip(ours, ref):
        assert (o.dtype, o.shape) == (r.dtype, r.shape)
        assert o.tobytes() == r.tobytes()


def prepare_error(model: Model, match: str | None = None, *, invoke: bool = False, **interpreter_kwargs: Any) -> str:
    """The message of the ``ValueError`` / ``RuntimeError`` lite-numba raises for ``model`` while constructing the
    ``Interpreter(**interpreter_kwargs)`` or in ``allocate_tensors()`` (and, with ``invoke=True``, in a first
    ``invoke()`` with no input set); the test fails when none is raised or its message does not match ``match``
    (``re.search``)."""
    import pytest

    with pytest.raises((ValueError, RuntimeError), match=match) as e:
        it = Interpreter(**_source(model), **interpreter_kwargs)
        it.allocate_tensors()
        if invoke:
            it.invoke()
    return str(e.value)


def assert_details_equal(ours: Sequence[dict], theirs: Sequence[dict]) -> None:
    """Tensor detail dicts (``get_input_details()`` and the like) equal key for key, arrays with their dtypes."""
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert set(a) == set(b), (set(a) ^ set(b))
        for key in a:
            if key == "quantization_parameters":
                for k in b[key]:
                    np.testing.assert_array_equal(a[key][k], b[key][k], err_msg=f"{a['name']} {k}")
                    assert np.asarray(a[key][k]).dtype == np.asarray(b[key][k]).dtype, (a["name"], k)
            elif isinstance(b[key], np.ndarray):
                np.testing.assert_array_equal(a[key], b[key], err_msg=f"{a['name']} {key}")
                assert a[key].dtype == b[key].dtype
            else:
                assert a[key] == b[key], (a["name"], key, a[key], b[key])


def one_op(op: str, inputs: Sequence[Any], output: Any, options: dict | None = None, version: int = 1) -> bytes:
    """The flatbuffer of a model with one operator (the tests' one helper for single-op models).

    ``inputs``: for each operator input, an ``np.ndarray`` (a constant tensor), ``None`` (an omitted optional
    input, index -1), or a spec ``(dtype, shape)`` / ``(dtype, shape, quant)`` (a graph input, in order).
    ``output``: one spec ``(dtype, shape[, quant])``, or a list of them for several outputs (all graph outputs).
    """
    b = ModelBuilder()
    ids = []
    for i, spec in enumerate(inputs):
        if spec is None:
            ids.append(-1)
        elif isinstance(spec, np.ndarray):
            ids.append(b.add_const(f"c{i}", spec))
        else:
            ids.append(b.add_input(f"x{i}", spec[0], [int(s) for s in spec[1]],
                                   quant=spec[2] if len(spec) > 2 else None))
    specs = output if isinstance(output, list) else [output]
    outs = [b.add_tensor(f"y{k}" if len(specs) > 1 else "y", spec[0], [int(s) for s in spec[1]],
                         quant=spec[2] if len(spec) > 2 else None) for k, spec in enumerate(specs)]
    b.add_op(op, ids, outs, options=options or {}, version=version)
    for y in outs:
        b.mark_output(y)
    return b.build()
