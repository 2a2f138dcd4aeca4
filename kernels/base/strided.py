"""The compiled walk over a strided box of rank 6: the broadcast elementwise ops (shapes.collapse_broadcast and
shapes.broadcast_strides give the box and each operand's element strides) and the reductions over scattered axes.

The box is walked row by row: a row is the innermost dimension, which each kernel loops over itself (specialised
on unit and zero strides where that vectorizes); the first five dimensions are an odometer over plain integers,

    walk, at = box_walk(shp, s1, s2, s3)
    for r in range(walk[0]):
        ... row r: flat position r * shp[5], operand offsets at[1], at[2], at[3] ...
        at = next_row(at, walk)

Integers only, so that the walk's state stays in registers, and a kernel's row binds no new array: an array
passed into a helper called per row would be reference-counted per row by Numba, which costs more than a short row.
"""

from __future__ import annotations

from numba import njit


@njit(cache=True, inline="always")
def _carry(n, s, d):
    """The offset step of advancing dimension d by one while every dimension inside it restarts from its last
    index: s[d] - sum over e > d of (n[e] - 1) * s[e]."""
    step = s[d]
    for e in range(d + 1, 5):
        step -= (n[e] - 1) * s[e]
    return step


@njit(cache=True, inline="always")
def _steps(n, s):
    return (_carry(n, s, 0), _carry(n, s, 1), _carry(n, s, 2), _carry(n, s, 3), _carry(n, s, 4))


@njit(cache=True, inline="always")
def box_walk(shp, s1, s2, s3):
    """The walk over the box's first five dimensions and its first state, as integers. The walk is (rows, sizes,
    steps 1, steps 2, steps 3), the steps of operand k being its offset's change when the odometer advances
    dimension d (_carry); the state is the indices (i0, .., i4) of the current row and the three operands' offsets.
    A kernel with fewer than three operands repeats a stride array (its offset is then dead code)."""
    n = (shp[0], shp[1], shp[2], shp[3], shp[4])
    walk = (n[0] * n[1] * n[2] * n[3] * n[4], n, _steps(n, s1), _steps(n, s2), _steps(n, s3))
    return walk, ((0, 0, 0, 0, 0), 0, 0, 0)


@njit(cache=True, inline="always")
def _advanced(i, e, d):
    """Index i of dimension e after the odometer advances dimension d (those inside it restart)."""
    return i if e < d else (i + 1 if e == d else 0)


@njit(cache=True, inline="always")
def next_row(at, walk):
    """The state after `at`: the innermost dimension not at its last index advances, those inside it restart."""
    idx, b1, b2, b3 = at
    _, n, c1, c2, c3 = walk
    d = 4
    while d > 0 and idx[d] == n[d] - 1:
        d -= 1
    idx = (_advanced(idx[0], 0, d), _advanced(idx[1], 1, d), _advanced(idx[2], 2, d), _advanced(idx[3], 3, d),
           _advanced(idx[4], 4, d))
    return (idx, b1 + c1[d], b2 + c2[d], b3 + c3[d])
