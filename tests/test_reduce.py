"""Reductions (MEAN, SUM, REDUCE_*), ARG_MAX/ARG_MIN and CUMSUM against the official runtime's builtin kernels.

One-op models are built with ModelBuilder and run in both runtimes on the same random inputs. Float results must
agree within 1e-5 (relative to max(1, |ref|)); integer, bool and quantized results must be bit-exact."""

from __future__ import annotations

import numpy as np
from conftest import scaled
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lite_numba import Interpreter
from lite_numba.builder import ModelBuilder
from lite_numba.testing import (
    assert_close,
    official_interpreter,
    prepare_error,
    require_official,
    run_official,
    run_ours,
)

require_official()


# derandomized: the same examples every run, so the compiled runners are all cached after the first run
SETTINGS = settings(max_examples=scaled(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT_TYPES = {np.dtype(np.int8): 2, np.dtype(np.uint8): 1, np.dtype(np.int16): 3}


def compare(data: bytes, inputs, tol: float = 1e-5) -> list[np.ndarray]:
    """Run both runtimes; floats within tol, everything else exactly equal. Returns our outputs."""
    ours = run_ours(data, inputs)
    refs = run_official(data, inputs)
    for o, r in zip(ours, refs):
        if r.dtype.kind == "f":
            assert o.shape == r.shape, f"shape mismatch: ours {o.shape} vs ref {r.shape}"
            # assert_close fails on 0-d arrays (np.abs returns a scalar there): compare them as 1-d
            assert_close(o.reshape(-1), r.reshape(-1), tol)
        else:
            assert o.dtype == r.dtype and o.shape == r.shape, f"ours {o.dtype}{o.shape} vs ref {r.dtype}{r.shape}"
            if not np.array_equal(o, r):
                step = int(np.max(np.abs(o.astype(np.int64) - r.astype(np.int64))))
                raise AssertionError(f"not bit-exact: max step {step}\nours {o.ravel()[:20]}\nref  {r.ravel()[:20]}")
    return ours


def ref_shape(shape, axes, keep_dims):
    rank = len(shape)
    red = {a % rank for a in axes} if rank else set()
    if keep_dims:
        return [1 if i in red else d for i, d in enumerate(shape)]
    return [d for i, d in enumerate(shape) if i not in red]


def reduce_model(op, dtype, shape, axes, keep_dims, quant_in=None, quant_out=None, version=1, axes_input=False):
    b = ModelBuilder()
    x = b.add_input("x", dtype, shape, quant=quant_in)
    ax_arr = np.array(axes, np.int32)
    a = b.add_input("axes", np.int32, list(ax_arr.shape)) if axes_input else b.add_const("axes", ax_arr)
    y = b.add_tensor("y", dtype, ref_shape(shape, axes, keep_dims), quant=quant_out)
    b.add_op(op, [x, a], [y], options={"keep_dims": keep_dims}, version=version)
    b.mark_output(y)
    return b.build()


def random_data(rng, dtype, shape, lo=-4.0, hi=4.0):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.uniform(lo, hi, shape).astype(dt)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    info = np.iinfo(dt)
    return rng.integers(int(info.min), int(info.max), shape, endpoint=True).astype(dt)


@st.composite
def shape_and_axes(draw, max_rank=5, max_dim=4):
    rank = draw(st.integers(1, max_rank))
    shape = draw(st.lists(st.integers(1, max_dim), min_size=rank, max_size=rank))
    axes = draw(st.lists(st.integers(-rank, rank - 1), min_size=0, max_size=rank + 1))
    return shape, axes


# --- float reductions ------------------------------------------------------------------------------------------


@SETTINGS
@given(op=st.sampled_from(["SUM", "MEAN", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"]), sa=shape_and_axes(),
       keep_dims=st.booleans(), seed=st.integers(0, 2**31))
def test_float_reductions(op, sa, keep_dims, seed):
    shape, axes = sa
    rng = np.random.default_rng(seed)
    lo, hi = (0.5, 1.5) if op == "REDUCE_PROD" else (-4.0, 4.0)
    x = random_data(rng, np.float32, shape, lo, hi)
    # bit-exact: every loop sums in the official kernel's order
    compare(reduce_model(op, np.float32, shape, axes, keep_dims), [x], tol=0.0)


def test_float_sums_are_bit_exact():
    """Both loop plans accumulate in input order, and a MEAN over the last axis replays Eigen's 4-lane packet sum
    (its split depends on each row's 16-byte alignment): the float results equal the official ones bit for bit."""
    rng = np.random.default_rng(1)
    cases = [("SUM", [3, 5, 4, 6], [0, 2]), ("SUM", [2, 3, 4, 5, 3], [1, 3, 4]), ("SUM", [7, 9, 5], [1])]
    cases += [("MEAN", [r, n], [1]) for r, n in ((3, 2), (5, 7), (4, 9), (3, 17), (6, 33), (2, 100))]
    cases += [("MEAN", [2, 3, 1, 5, 7], [3, -1]), ("MEAN", [1, 1, 40], [2])]
    for op, shape, axes in cases:
        x = (rng.standard_normal(shape) * 1000).astype(np.float32)
        data = reduce_model(op, np.float32, shape, axes, False)
        ours, ref = run_ours(data, [x])[0], run_official(data, [x])[0]
        assert np.array_equal(ours, ref), (op, shape, axes, np.max(np.abs(ours - ref)))


def test_axes_as_runtime_input():
    rng = np.random.default_rng(2)
    shape = [2, 3, 4]
    b = ModelBuilder()
    x = b.add_input("x", np.float32, shape)
    a = b.add_input("axes", np.int32, [2])
    y = b.add_tensor("y", np.float32, [3], shape_signature=[-1])
    b.add_op("SUM", [x, a], [y], options={"keep_dims": False})
    b.mark_output(y)
    data = b.build()
    xv = random_data(rng, np.float32, shape)
    for axes in ([0, 2], [-1, 0], [1, 1]):
        compare(data, [xv, np.array(axes, np.int32)])


def test_scalar_input_and_empty_axes():
    x = np.array(3.5, np.float32)
    compare(reduce_model("SUM", np.float32, [], [0], False), [x])
    rng = np.random.default_rng(3)
    xv = random_data(rng, np.float32, [2, 3])
    compare(reduce_model("MEAN", np.float32, [2, 3], [], False), [xv])


# --- integer and bool reductions ----------------------------------------------------------------------------------


@SETTINGS
@given(op=st.sampled_from(["SUM", "MEAN", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"]),
       dtype=st.sampled_from([np.int32, np.int64]), sa=shape_and_axes(max_rank=4), keep_dims=st.booleans(),
       seed=st.integers(0, 2**31))
def test_int_reductions(op, dtype, sa, keep_dims, seed):
    shape, axes = sa
    rng = np.random.default_rng(seed)
    # large values: sums and products wrap around as in TFLite
    x = rng.integers(-(2**31), 2**31 - 1, shape).astype(dtype)
    compare(reduce_model(op, dtype, shape, axes, keep_dims), [x])


@SETTINGS
@given(op=st.sampled_from(["REDUCE_ANY", "REDUCE_ALL"]), sa=shape_and_axes(), keep_dims=st.booleans(),
       p=st.sampled_from([0.1, 0.5, 0.9]), seed=st.integers(0, 2**31))
def test_bool_reductions(op, sa, keep_dims, p, seed):
    shape, axes = sa
    x = np.random.default_rng(seed).random(shape) < p
    compare(reduce_model(op, np.bool_, shape, axes, keep_dims), [x])


# --- quantized reductions -----------------------------------------------------------------------------------------


def _quant(draw_scale, draw_zp, dtype):
    return (draw_scale, 0 if np.dtype(dtype) == np.int16 else draw_zp)


@SETTINGS
@given(op=st.sampled_from(["MEAN", "SUM"]), dtype=st.sampled_from([np.int8, np.uint8, np.int16]),
       sa=shape_and_axes(max_rank=4, max_dim=5), keep_dims=st.booleans(),
       s_in=st.floats(0.005, 0.2), s_out=st.floats(0.005, 0.5), zp_in=st.integers(-20, 20),
       zp_out=st.integers(-20, 20), seed=st.integers(0, 2**31))
def test_quantized_mean_sum(op, dtype, sa, keep_dims, s_in, s_out, zp_in, zp_out, seed):
    shape, axes = sa
    base = 128 if np.dtype(dtype) == np.uint8 else 0
    qi, qo = _quant(s_in, base + zp_in, dtype), _quant(s_out, base + zp_out, dtype)
    version = INT_TYPES[np.dtype(dtype)] if op == "MEAN" else (2 if np.dtype(dtype) == np.int8 else 1)
    x = random_data(np.random.default_rng(seed), dtype, shape)
    compare(reduce_model(op, dtype, shape, axes, keep_dims, qi, qo, version), [x])


@SETTINGS
@given(dtype=st.sampled_from([np.int8, np.uint8]), h=st.integers(1, 7), w=st.integers(1, 7), c=st.integers(1, 20),
       axes=st.sampled_from([[1, 2], [2, 1], [-2, 1, 2]]), s_in=st.floats(0.005, 0.2), s_out=st.floats(0.002, 0.5),
       zp_in=st.integers(-30, 30), zp_out=st.integers(-30, 30), seed=st.integers(0, 2**31))
def test_quantized_mean_spatial(dtype, h, w, c, axes, s_in, s_out, zp_in, zp_out, seed):
    """keep_dims MEAN over H and W of a 4-D int8/uint8 tensor: the official optimized Mean4D path."""
    base = 128 if np.dtype(dtype) == np.uint8 else 0
    shape = [2, h, w, c]
    x = random_data(np.random.default_rng(seed), dtype, shape)
    data = reduce_model("MEAN", dtype, shape, axes, True, (s_in, base + zp_in), (s_out, base + zp_out),
                        INT_TYPES[np.dtype(dtype)])
    compare(data, [x])


def test_quantized_mean_spatial_threads():
    """With several threads the official Mean4D splits the channels into tasks, which moves the 16-channel vector
    blocks (they round ties differently): the split is reproduced from the interpreter's thread count."""
    rng = np.random.default_rng(5)
    for depth in (16, 20, 33, 48):
        shape = [1, 4, 4, depth]
        # multiplier 1/32, a power of two: many negative sums land exactly on ties
        data = reduce_model("MEAN", np.int8, shape, [1, 2], True, (0.1, 3), (0.2, -2), 2)
        x = rng.integers(-128, 128, shape).astype(np.int8)
        for threads in (1, 2, 3):
            it = Interpreter(model_content=data, num_threads=threads)
            it.allocate_tensors()
            it.set_tensor(it.get_input_details()[0]["index"], x)
            it.invoke()
            ours = it.get_tensor(it.get_output_details()[0]["index"])
            ref_it = official_interpreter(data, num_threads=threads)
            ref_it.set_tensor(ref_it.get_input_details()[0]["index"], x)
            ref_it.invoke()
            ref = ref_it.get_tensor(ref_it.get_output_details()[0]["index"])
            assert np.array_equal(ours, ref), f"depth {depth}, {threads} threads:\n{ours.ravel()}\n{ref.ravel()}"


@SETTINGS
@given(op=st.sampled_from(["REDUCE_MAX", "REDUCE_MIN"]), dtype=st.sampled_from([np.int8, np.uint8, np.int16]),
       sa=shape_and_axes(max_rank=4), keep_dims=st.booleans(), seed=st.integers(0, 2**31))
def test_quantized_max_min(op, dtype, sa, keep_dims, seed):
    shape, axes = sa
    q = (0.05, 0 if np.dtype(dtype) == np.int16 else 3)
    x = random_data(np.random.default_rng(seed), dtype, shape)
    compare(reduce_model(op, dtype, shape, axes, keep_dims, q, q, INT_TYPES[np.dtype(dtype)]), [x])


@SETTINGS
@given(dtype=st.sampled_from([np.int8, np.int16]), sa=shape_and_axes(max_rank=4), keep_dims=st.booleans(),
       s_in=st.floats(0.01, 0.1), s_out=st.floats(0.01, 0.5), zp=st.integers(-10, 10), seed=st.integers(0, 2**31))
def test_quantized_prod(dtype, sa, keep_dims, s_in, s_out, zp, seed):
    shape, axes = sa
    is16 = np.dtype(dtype) == np.int16
    qi, qo = (s_in, 0 if is16 else zp), (s_out, 0 if is16 else -zp)
    rng = np.random.default_rng(seed)
    x = rng.integers(-40, 40, shape).astype(dtype)
    compare(reduce_model("REDUCE_PROD", dtype, shape, axes, keep_dims, qi, qo, 2), [x])


# --- ARG_MAX / ARG_MIN ----------------------------------------------------------------------------------------------


@SETTINGS
@given(op=st.sampled_from(["ARG_MAX", "ARG_MIN"]),
       dtype=st.sampled_from([np.float32, np.int8, np.uint8, np.int32, np.bool_]),
       shape=st.lists(st.integers(1, 6), min_size=1, max_size=4), axis_seed=st.integers(0, 100),
       out_type=st.sampled_from([np.int32, np.int64]), axis_type=st.sampled_from([np.int32, np.int64]),
       ties=st.booleans(), seed=st.integers(0, 2**31))
def test_arg_min_max(op, dtype, shape, axis_seed, out_type, axis_type, ties, seed):
    rank = len(shape)
    axis = axis_seed % (2 * rank) - rank  # negative and positive axes
    rng = np.random.default_rng(seed)
    x = random_data(rng, dtype, shape)
    if ties and np.dtype(dtype) != np.bool_:
        x = (x // 64 if np.dtype(dtype).kind != "f" else np.round(x)).astype(dtype)
    version = 3 if np.dtype(dtype) == np.bool_ else (2 if np.dtype(dtype) == np.int8 else 1)
    b = ModelBuilder()
    xi = b.add_input("x", dtype, shape, quant=(0.1, 0) if np.dtype(dtype) == np.int8 else None)
    a = b.add_const("axis", np.array([axis], axis_type))
    out_shape = [d for i, d in enumerate(shape) if i != axis % rank]
    y = b.add_tensor("y", out_type, out_shape)
    b.add_op(op, [xi, a], [y], options={"output_type": out_type}, version=version)
    b.mark_output(y)
    compare(b.build(), [x])


def test_nan_handling():
    """NaN never wins an ARG_MAX/ARG_MIN (replayed for the official 4-lane last-axis loop too); REDUCE_MAX/MIN and
    sums propagate NaN as the official comparisons do."""
    rng = np.random.default_rng(11)
    for n in (1, 3, 4, 5, 8, 13):
        x = rng.integers(-3, 4, (6, n, 3)).astype(np.float32)
        x[rng.random(x.shape) < 0.35] = np.nan
        x[0] = np.nan
        for axis in (1, 2, 0):
            for op in ("ARG_MAX", "ARG_MIN"):
                b = ModelBuilder()
                xi = b.add_input("x", np.float32, list(x.shape))
                a = b.add_const("axis", np.array([axis], np.int32))
                y = b.add_tensor("y", np.int32, [d for i, d in enumerate(x.shape) if i != axis])
                b.add_op(op, [xi, a], [y], options={"output_type": np.int32})
                b.mark_output(y)
                compare(b.build(), [x])
        for op in ("REDUCE_MAX", "REDUCE_MIN", "SUM"):
            compare(reduce_model(op, np.float32, list(x.shape), [1], False), [x], tol=0.0)


def test_empty_input():
    """Reductions of an empty input give the official fill values (0, NaN for MEAN, lowest/max, 1, False/True)."""
    for op, dtype in (("SUM", np.float32), ("MEAN", np.float32), ("REDUCE_MAX", np.float32), ("REDUCE_MIN", np.int32),
                      ("REDUCE_PROD", np.float32), ("REDUCE_ANY", np.bool_), ("REDUCE_ALL", np.bool_)):
        compare(reduce_model(op, dtype, [2, 0, 3], [1], False), [np.zeros([2, 0, 3], dtype)], tol=0.0)


# --- CUMSUM ------------------------------------------------------------------------------------------------------


@SETTINGS
@given(dtype=st.sampled_from([np.float32, np.int32, np.int64]),
       shape=st.lists(st.integers(1, 6), min_size=1, max_size=4), axis_seed=st.integers(0, 100),
       exclusive=st.booleans(), reverse=st.booleans(), seed=st.integers(0, 2**31))
def test_cumsum(dtype, shape, axis_seed, exclusive, reverse, seed):
    rank = len(shape)
    axis = axis_seed % (2 * rank) - rank
    x = random_data(np.random.default_rng(seed), dtype, shape)
    b = ModelBuilder()
    xi = b.add_input("x", dtype, shape)
    a = b.add_const("axis", np.array(axis, np.int32))
    y = b.add_tensor("y", dtype, shape)
    b.add_op("CUMSUM", [xi, a], [y], options={"exclusive": exclusive, "reverse": reverse})
    b.mark_output(y)
    compare(b.build(), [x])


# --- errors ------------------------------------------------------------------------------------------------------


def test_errors():
    prepare_error(reduce_model("SUM", np.float32, [2, 3], [2], False), r"SUM .*axis 2 is out of range", invoke=True)
    prepare_error(reduce_model("REDUCE_ANY", np.float32, [2, 3], [0], False), r"REDUCE_ANY .*float32", invoke=True)
    prepare_error(reduce_model("MEAN", np.int8, [2, 3], [0], False), r"MEAN .*quantized", invoke=True)
    prepare_error(reduce_model("MEAN", np.int16, [2, 3], [0], False, (0.1, 3), (0.1, 0), 3),
                  r"MEAN .*zero points", invoke=True)
    prepare_error(reduce_model("REDUCE_MAX", np.int8, [2, 3], [0], False, (0.1, 3), (0.2, 3), 2),
                  r"REDUCE_MAX .*quantization differ", invoke=True)
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 0, 3])
    a = b.add_const("axis", np.array([1], np.int32))
    y = b.add_tensor("y", np.int64, [2, 3])
    b.add_op("ARG_MAX", [x, a], [y], options={"output_type": np.int64})
    b.mark_output(y)
    prepare_error(b.build(), r"ARG_MAX .*empty axis", invoke=True)
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 3])
    a = b.add_const("axis", np.array([1], np.int32))
    y = b.add_tensor("y", np.int32, [2])
    b.add_op("ARG_MIN", [x, a], [y], options={"output_type": np.int64})
    b.mark_output(y)
    prepare_error(b.build(), r"ARG_MIN .*int32, expected int64", invoke=True)
    b = ModelBuilder()
    x = b.add_input("x", np.float32, [2, 3])
    a = b.add_const("axis", np.array([-3], np.int32))
    y = b.add_tensor("y", np.float32, [2, 3])
    b.add_op("CUMSUM", [x, a], [y])
    b.mark_output(y)
    prepare_error(b.build(), r"CUMSUM .*axis -3 is out of range", invoke=True)
