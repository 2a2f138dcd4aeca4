"""Shape helpers shared by kernel modules: broadcasting (NumPy rules, collapsed to the fewest loop dimensions), axis
handling and index vectors read at prepare."""

from __future__ import annotations

import numpy as np

from lite_numba.ops import PrepareContext


def broadcast_shape(ctx: PrepareContext, *shapes) -> tuple[int, ...]:
    """NumPy broadcasting of input shapes; a clear error when they do not broadcast."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        ctx.fail("shapes " + " and ".join(str(list(s)) for s in shapes) + " cannot be broadcast")


MAX_BROADCAST_RANK = 6


def broadcast_strides(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> np.ndarray:
    """Element strides of `shape` broadcast to `out_shape`, both left-padded to rank 6 (0 where broadcast)."""
    rank = MAX_BROADCAST_RANK
    if len(out_shape) > rank or len(shape) > rank:
        raise ValueError(f"broadcasting supports rank <= {rank}, got shapes {list(shape)} and {list(out_shape)}")
    padded = (1,) * (rank - len(shape)) + tuple(shape)
    strides = np.zeros(rank, np.int64)
    acc = 1
    for d in range(rank - 1, -1, -1):
        strides[d] = 0 if padded[d] == 1 else acc
        acc *= padded[d]
    return strides


def padded_shape(shape: tuple[int, ...], rank: int = MAX_BROADCAST_RANK) -> np.ndarray:
    return np.array((1,) * (rank - len(shape)) + tuple(shape), np.int64)


def collapse_broadcast(out_shape, *shapes) -> tuple[np.ndarray, list[np.ndarray]]:
    """The fewest loop dimensions for broadcasting `shapes` to `out_shape`: unit output dimensions are dropped and
    neighbours merged where every input is broadcast in both or in neither. Returns the output shape and each
    input's strides, padded to rank 6 like padded_shape / broadcast_strides; the innermost loop then usually has
    unit or zero strides, which the kernels special-case."""
    rank = len(out_shape)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    dims: list[int] = []
    kinds: list[tuple[bool, ...]] = []
    for d, n in enumerate(out_shape):
        if n == 1:
            continue
        kind = tuple(p[d] == 1 for p in padded)
        if kinds and kinds[-1] == kind:
            dims[-1] *= n
        else:
            dims.append(n)
            kinds.append(kind)
    shape = tuple(dims)
    ins = [tuple(1 if k[i] else n for n, k in zip(dims, kinds)) for i in range(len(shapes))]
    return padded_shape(shape), [broadcast_strides(s, shape) for s in ins]


def normalize_axis(ctx: PrepareContext, axis: int, rank: int) -> int:
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < max(rank, 1):
        ctx.fail(f"axis {axis} is out of range for rank {rank}")
    return a


def index_vector(ctx: PrepareContext, i: int, what: str) -> list[int]:
    """A 1-D int32/int64 index input as a list of Python ints."""
    t = ctx.input(i)
    ctx.check(t is not None, f"{what} input is missing")
    ctx.check(t.dtype in (np.int32, np.int64), f"{what} has type {t.dtype.name}, expected int32 or int64")
    ctx.check(t.ndim == 1, f"{what} must be 1-D, got shape {list(t.shape)}")
    return [int(v) for v in np.asarray(ctx.value(i)).reshape(-1)]


def two_inputs_of_one_type(ctx: PrepareContext, dtypes, what: str = "input"):
    """(input 0, input 1) of an op with two inputs and one output: input 0 of one of `dtypes`, input 1 of its type
    (`what` names them in the message)."""
    ctx.check_num(inputs=2, outputs=1)
    a, b = ctx.input(0), ctx.input(1)
    ctx.check_dtype(a, *dtypes)
    ctx.check(b.dtype == a.dtype, f"{what} types differ: {a.dtype.name} and {b.dtype.name}")
    return a, b
