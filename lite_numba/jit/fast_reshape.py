"""`reshape` of a C-contiguous array without a call into Numba's C helper.

Numba lowers every `a.reshape(shape)` to a call of `numba_attempt_nocopy_reshape` (its C port of NumPy's
`_attempt_nocopy_reshape`), a loop over both shapes that decides whether a view is possible and computes its
strides. For a C-contiguous array a view always is possible (prepare and Numba's own size check,
`normalize_reshape_value`, have made the element counts equal) and its strides are the C strides of the new shape.
Kernels reshape their flat views, scratch and outputs many times per call (`x.reshape(x.size)` and the like: 207
sites): on microWakeWord's 1-pixel layers the helper was 8 % of an invoke (perf, Xeon model 167).

`apply()` replaces `numba.np.arrayobj._attempt_nocopy_reshape` (looked up by `array_reshape` at each lowering) with
one that emits the C strides inline for arrays typed 'C' and calls the original for any other layout. The result is
the view Numba's helper returns (same data pointer, shape and, for every non-empty array, strides); for arrays with
a zero-length dimension NumPy's helper may pick other (unused) strides. Applied with Numba's cache configuration
(lite_numba.jit.numba_speedups.apply), so every process and compile worker compiles the same code; the cache
directory follows the sources, so code compiled without it is never mixed in."""

from __future__ import annotations

_APPLIED = False


def apply() -> None:
    """Install the C-contiguous fast path (once per process)."""
    global _APPLIED
    if _APPLIED:
        return
    _APPLIED = True
    from llvmlite import ir  # lazy: only where Numba is configured
    from numba.core import cgutils, types  # lazy: as above
    from numba.np import arrayobj  # lazy: as above

    original = arrayobj._attempt_nocopy_reshape

    def attempt_nocopy_reshape(context, builder, aryty, ary, newnd, newshape, newstrides):
        if getattr(aryty, "layout", None) != "C":
            return original(context, builder, aryty, ary, newnd, newshape, newstrides)
        acc = ary.itemsize
        for k in range(newnd - 1, -1, -1):
            builder.store(acc, cgutils.gep_inbounds(builder, newstrides, 0, k))
            acc = builder.mul(acc, builder.load(cgutils.gep_inbounds(builder, newshape, 0, k)))
        return ir.Constant(context.get_value_type(types.intc), 1)

    arrayobj._attempt_nocopy_reshape = attempt_nocopy_reshape
