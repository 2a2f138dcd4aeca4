"""Many invokes in one compiled call: lite_numba.batch's per-example loop for a model whose whole invoke is compiled.

`run_rows(addrs, arena, auxs, its, fts, fps, ins, in_offs, outs, out_offs, at)` runs, for each example s (kept in
`at[0]`, which names the example when a kernel raises): copy row s of
every input (`ins[j]`, a C-contiguous uint8 matrix of one example's bytes per row) into the arena at byte offset
`in_offs[j]`; call every compiled runner of the invoke in order (the runner at native address `addrs[k]`, with its
tables `auxs[k]`, `its[k]`, `fts[k]`, `fps[k]`: exactly the call GraphRuntime.invoke makes through the runner's
dispatcher); copy each output's bytes at `out_offs[j]` into row s of `outs[j]`.

Per example this replaces the Python of a set_tensor / invoke / get_tensor loop (the busy check, the dispatcher's
typing of five arrays, the views and shape checks: 25-40 us on a 2-vCPU Xeon right after a MobileNet invoke has
evicted the interpreter's objects from the caches) with two memory copies. The caller (ModelRuntime.run_rows)
checks every offset and size against the arena first: this code does no bounds checks of its own (in the checked
mode, LITE_NUMBA_BOUNDSCHECK=1, Numba's are compiled in). An exception a kernel raises propagates as from invoke.

The runner's address is that of its compiled overload for the runners' fixed signature (compiler.runner_sig), so
the call here and the dispatcher's call reach the same machine code with the same arguments; the loop is compiled
once per (inputs, outputs, runners) count and cached on disk like the kernels."""

from __future__ import annotations

import functools

import numpy as np
from llvmlite import ir
from numba import carray, njit, types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic

from ..jit.compiler import compiled_overload
from ..jit.team import TeamPolicy


@intrinsic
def call_runner(typingctx, addr, arena, aux, it, ft, fp):
    """Call the runner compiled for (arena, aux, it, ft, fp) whose native entry address is `addr` (Numba's calling
    convention, as lite_numba.jit.native_call calls kernels), propagating an exception it raised."""
    argtys = (arena, aux, it, ft, fp)
    if not isinstance(addr, types.Integer):
        raise TypingError("call_runner: the address must be an integer")
    for t in argtys:
        if not (isinstance(t, types.Array) and t.ndim == 1 and t.layout == "C"):
            raise TypingError("call_runner: a runner takes contiguous vectors")

    def codegen(context, builder, sig, llargs):
        fnty = context.call_conv.get_function_type(types.none, argtys)
        fnptr = builder.inttoptr(llargs[0], fnty.as_pointer())
        if not hasattr(fnptr, "function_type"):  # what call_function reads from an ir.Function
            fnptr.function_type = fnty
        status, _ = context.call_conv.call_function(builder, fnptr, types.none, argtys, llargs[1:])
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()

    return types.none(addr, arena, aux, it, ft, fp), codegen


@intrinsic
def _copy_bytes(typingctx, dst, doff, src, soff, nbytes):
    """memcpy(dst.data + doff, src.data + soff, nbytes) for uint8 arrays (Numba's slice assignment copies byte by
    byte: ~9 us for a 27 kB example here against ~1 us). The caller checks the ranges."""
    for t in (dst, src):
        if not (isinstance(t, types.Array) and t.dtype == types.uint8 and t.layout == "C"):
            raise TypingError("_copy_bytes: contiguous uint8 arrays only")

    def codegen(context, builder, sig, llargs):
        d, s = (context.make_array(t)(context, builder, value=v) for t, v in ((sig.args[0], llargs[0]),
                                                                                 (sig.args[2], llargs[2])))
        i64 = context.get_value_type(types.int64)
        doff, soff, nb = (context.cast(builder, v, t, types.int64) for v, t in zip(
            (llargs[1], llargs[3], llargs[4]), (sig.args[1], sig.args[3], sig.args[4])))
        cgutils.raw_memcpy(builder, builder.gep(d.data, [doff]), builder.gep(s.data, [soff]), nb, i64(1))
        return context.get_dummy_value()

    return types.none(dst, doff, src, soff, nbytes), codegen


@intrinsic
def ptr(typingctx, addr):
    """An integer address as a void pointer (for numba.carray)."""
    if not isinstance(addr, types.Integer):
        raise TypingError("ptr: an integer address")

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], ir.IntType(8).as_pointer())

    return types.voidptr(addr), codegen


@njit(cache=True, nogil=True, inline="always")
def run_runners(tab, p):
    """Call the compiled runners of the program at tab[p]: their count, then per runner its native address and the
    (pointer, length) of its arena, aux, it, ft and fp."""
    for r in range(tab[p]):
        q = p + 1 + 11 * r
        call_runner(tab[q], carray(ptr(tab[q + 1]), tab[q + 2], np.uint8),
                    carray(ptr(tab[q + 3]), tab[q + 4], np.uint8), carray(ptr(tab[q + 5]), tab[q + 6], np.int64),
                    carray(ptr(tab[q + 7]), tab[q + 8], np.float64), carray(ptr(tab[q + 9]), tab[q + 10], np.int64))


@njit(cache=True, nogil=True)
def run_program(addr, n):
    """One whole invoke: the program (run_runners) in the n int64 at `addr`."""
    run_runners(carray(ptr(addr), n, np.int64), 0)


def compiled_entry(fn, sig):
    """The compiled wrapper of `fn`'s overload for `sig` (called without the dispatcher's type checks), loaded from
    the disk cache without Numba's lowering registries when it is there (jit.compiler.load_cached_runner)."""
    return compiled_overload(fn, sig).entry_point


def install_entry(rt) -> None:
    """Give an allocated GraphRuntime whose whole invoke is compiled runners (native_program) its own `run`: one call
    of run_program's compiled wrapper with its table's address (a functools.partial: no Python frame, no dispatcher,
    no array unboxed; Interpreter.invoke calls it), wrapped with num_threads > 1 in jit/team.py's TeamPolicy (the
    parallel regions' workers used or not by the invokes' measured times). It stays while the runtime keeps this
    preparation: invalidate() and the next program remove it (GraphRuntime.run is then invoke). An I/O binding
    rewrites `it` in place: seen."""
    prog = rt.native_program()
    if prog is None:
        return
    tab = [len(prog)]
    for addr, aux, it, ft, fp in prog:
        tab.append(addr)
        for a in (rt.arena, aux, it, ft, fp):
            tab += [a.ctypes.data, a.size]
    tab = np.asarray(tab, np.int64)
    entry = functools.partial(compiled_entry(run_program, (types.int64, types.int64)), tab.ctypes.data, tab.size)
    entry.table = tab  # (the table lives as long as the entry)
    # with num_threads > 1 the parallel regions' workers are used or not by the invokes' measured times
    rt.run = TeamPolicy(entry) if rt.num_threads > 1 else entry


@njit(cache=True, nogil=True)
def run_rows(addrs, arena, auxs, its, fts, fps, ins, in_offs, outs, out_offs, at):
    n = ins[0].shape[0]
    for s in range(n):
        at[0] = s
        for j in range(len(ins)):
            a = ins[j]
            _copy_bytes(arena, in_offs[j], a, s * a.shape[1], a.shape[1])
        for k in range(len(addrs)):
            call_runner(addrs[k], arena, auxs[k], its[k], fts[k], fps[k])
        for j in range(len(outs)):
            d = outs[j]
            _copy_bytes(d, s * d.shape[1], arena, out_offs[j], d.shape[1])
