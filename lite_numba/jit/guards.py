"""Run-time checks of values that a specialised plan assumed (see GraphRuntime's speculation in executor.py).

A graph with value-dependent shapes (SHAPE -> FILL, RANGE, a computed RESHAPE shape) is planned generally first:
those nodes are re-prepared from Python at every invoke. Once an invoke has shown the values such nodes read, the
runtime re-plans the graph with those values taken as known — every node static, one compiled call — and puts a
`guard_equal` call in front of the first node that read each assumed value. If an input changes the values, the
guard raises GUARD_MESSAGE and the runtime falls back to the general plan for that invoke.
"""

from __future__ import annotations

from numba import njit

GUARD_MESSAGE = "lite-numba: a value assumed by the specialised plan changed"


@njit(cache=True, nogil=True)
def guard_equal(actual, expected):
    """Raise unless the bytes of `actual` equal `expected` (both uint8, same size: checked in prepare)."""
    for i in range(expected.size):
        if actual[i] != expected[i]:
            raise ValueError("lite-numba: a value assumed by the specialised plan changed")


def is_guard_failure(err: BaseException) -> bool:
    return isinstance(err, ValueError) and bool(err.args) and err.args[0] == GUARD_MESSAGE
