"""The compiled side of control flow lowered into its parent's runner (lite_numba.runtime.lowering builds the tables).

One kernel, `control_entry<N>(tab, a0, ..., a<N-1>)` (N: 1, 2, 4, ... 32), runs a WHILE, an IF / STABLEHLO_CASE or a
CALL_ONCE node from inside the parent's generated runner: `tab` (int64, in the parent's aux) describes the node, a0..
are the node's tensors (inputs, then outputs; padded to N with a0) as byte vectors, so the parent's runner passes them
like any kernel argument (and an I/O binding that rebases them is followed: their addresses are read at every call). The
called subgraphs are private GraphRuntimes planned once for the node; each is a list of compiled runners, called by
native address with their own tables (a *program*: count, then per runner its address and the (pointer, length) of its
arena, aux, it, ft and fp).

Table layouts (positions in `tab`):

    WHILE:  [0, n, cond program at, body program at, flag address, limit address, node, moves at, body inputs at,
             poll (0: never, else 1 + the mask of iterations between looks at the clock), running cell, cond
             subgraph, body subgraph, cond expression at (0: run the cond program), counters at (0: none),
             looping (1: the body program is one runner that runs the cond, the body and the counters itself,
             lite_numba.runtime.codegen.loop_runner: called once per batch of iterations between polls)]
            body inputs: n x (address, bytes); moves (after each body run): count, then (dst, src, bytes) in order;
            cond expression (a cond of one-element comparisons and logic, evaluated here instead of a runner call):
            count, then (op, operand kind, a address, b address, result address): op 0-5 LESS, LESS_EQUAL, GREATER,
            GREATER_EQUAL, EQUAL, NOT_EQUAL of kind 0 int32, 1 int64, 2 float32; 6-8 LOGICAL_AND, OR, NOT of
            bytes; the result a byte. Counters (loop variables stepped here after each body run, before the moves;
            their nodes are out of the body's runner): count, then (op 9 ADD or 10 SUB, kind, a, b, result) in the
            operands' type (int32 wrapping, float32 rounded as float32)
    IF:     [1, n inputs (selector included), n outputs, selector kind (0 bool, 1 int32), branches, node,
             running cell, branch 0 at, branch 1 at, ...]
            a branch: program at, patches at, copies at, its subgraph; patches: count, then (it address,
            position, tensor slot, the branch arena's address, bytes): it[position] = address of slot - arena
            address, it[position + 1] = that + bytes;
            copies (outputs not bound): count, then (output slot, source slot or -1, source address, bytes)
    CALL_ONCE: [2, flag address, init program at, running cell, init subgraph]

`run_trace(tab)` replays a host WHILE's recorded iterations (lowering.WhileTrace: a loop whose variables change
shape, each step's cond and body bound for its shapes; layout in its docstring).

The running cell (ModelRuntime.control's) holds the subgraph whose runners run, so an error a kernel raises names it.

A WHILE polls Python's signal handlers (PyErr_CheckSignals, under the GIL, in the main thread) when ~2^24 CPU cycles
have passed (the clock read every iteration, or every 16th for a small body: a cycle-counter read costs ~20 ns on a
virtual machine) and every 2^16 iterations, so Ctrl-C interrupts a loop that never ends (KeyboardInterrupt, as the host
loop gives); `limit` is the address of the iteration cap (ControlState.limit; 2^63 - 1, or 0 in the table: none), read
at every run."""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import carray, njit, types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic

from ...jit.native_call import load_at as _ld
from ...jit.native_call import store_at as _st
from ...jit.native_call import word_at as _word
from ..rows import call_runner, run_runners
from ..rows import ptr as _ptr

MAX_ARRAYS = 32


@intrinsic
def _memcpy(typingctx, dst, src, nbytes):
    """memcpy(dst, src, nbytes) on integer addresses (memmove: the caller's ranges never overlap but may touch)."""
    for t in (dst, src, nbytes):
        if not isinstance(t, types.Integer):
            raise TypingError("_memcpy: integer addresses and size")

    def codegen(context, builder, sig, args):
        i8p = ir.IntType(8).as_pointer()
        d, s = (builder.inttoptr(a, i8p) for a in args[:2])
        cgutils.raw_memcpy(builder, d, s, args[2], ir.IntType(64)(1))
        return context.get_dummy_value()

    return types.none(dst, src, nbytes), codegen


@intrinsic
def _cycles(typingctx):
    """The CPU's cycle counter (llvm.readcyclecounter; 0 where the target has none)."""
    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(64), []),
                                            "llvm.readcyclecounter")
        return builder.call(fn, [])

    return types.int64(), codegen


@intrinsic
def _poll_signals(typingctx):
    """Run Python's pending signal handlers (PyErr_CheckSignals under the GIL); when one raised (Ctrl-C's
    KeyboardInterrupt) return with that exception set, so it reaches the caller of invoke() as it is."""
    def codegen(context, builder, sig, args):
        pyapi = context.get_python_api(builder)
        gil = pyapi.gil_ensure()
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []), "PyErr_CheckSignals")
        r = builder.call(fn, [])
        pyapi.gil_release(gil)
        with builder.if_then(builder.icmp_signed("!=", r, ir.IntType(32)(0)), likely=False):
            context.call_conv.return_exc(builder)
        return context.get_dummy_value()

    return types.none(), codegen


@intrinsic
def _a(typingctx, arr):
    """The address of an array's data, as an int64 (no ctypes object, no reference taken)."""
    if not isinstance(arr, types.Array):
        raise TypingError("_a: an array")

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, value=args[0]).data
        return builder.ptrtoint(data, ir.IntType(64))

    return types.int64(arr), codegen


@njit(cache=True, nogil=True)
def _copy(dst, src, nbytes):
    """memcpy (the ranges never overlap), a loop variable of 4 bytes or up to 128 in 8-byte words moved by plain
    loads and stores."""
    if nbytes == 4:
        _st(dst, _ld(src, np.int32))
    elif nbytes <= 128 and nbytes % 8 == 0:  # (a small state vector: no memcpy call)
        for k in range(0, nbytes, 8):
            _st(dst + k, _ld(src + k, np.int64))
    else:
        _memcpy(dst, src, nbytes)


@njit(cache=True, nogil=True, inline="always")
def _compare(op, kind, a_at, b_at):
    """Comparison `op` (0-5: LESS, LESS_EQUAL, GREATER, GREATER_EQUAL, EQUAL, NOT_EQUAL) of the one-element
    operands at a_at and b_at, of kind 0 int32, 1 int64 or 2 float32 (NaN unordered as in float32)."""
    if kind == 2:
        fa = _ld(a_at, np.float32)
        fb = _ld(b_at, np.float32)
        return (fa < fb if op == 0 else fa <= fb if op == 1 else fa > fb if op == 2 else fa >= fb if op == 3
                else fa == fb if op == 4 else fa != fb)
    if kind == 0:
        ia = np.int64(_ld(a_at, np.int32))
        ib = np.int64(_ld(b_at, np.int32))
    else:
        ia = _ld(a_at, np.int64)
        ib = _ld(b_at, np.int64)
    return ia < ib if op == 0 else ia <= ib if op == 1 else ia > ib if op == 2 else ia >= ib if op == 3 else (
        ia == ib if op == 4 else ia != ib)


@njit(cache=True, nogil=True, inline="always")
def _eval_cond(t, p):
    """Run the cond expression at position p of the table at address t (see the table layouts)."""
    for m in range(_word(t, p)):
        q = p + 1 + 5 * m
        op = _word(t, q)
        if op >= 6:
            a = _ld(_word(t, q + 2), np.uint8) != 0
            b = _ld(_word(t, q + 3), np.uint8) != 0
            r = (a and b) if op == 6 else (a or b) if op == 7 else not a
        else:
            r = _compare(op, _word(t, q + 1), _word(t, q + 2), _word(t, q + 3))
        _st(_word(t, q + 4), np.uint8(1 if r else 0))


@njit(cache=True, nogil=True, inline="always")
def _step(sub, kind, a_at, b_at, r_at):
    """One counter: the one-element a - b (sub) or a + b of kind 0 int32 (wrapping), 1 int64 or 2 float32 at r_at."""
    if kind == 0:
        a = _ld(a_at, np.int32)
        b = _ld(b_at, np.int32)
        _st(r_at, np.int32(a - b if sub else a + b))
    elif kind == 1:
        a = _ld(a_at, np.int64)
        b = _ld(b_at, np.int64)
        _st(r_at, a - b if sub else a + b)
    else:
        x = _ld(a_at, np.float32)
        y = _ld(b_at, np.float32)
        _st(r_at, np.float32(x - y if sub else x + y))


@njit(cache=True, nogil=True, inline="always")
def _step_counters(t, p):
    """Run the counters at position p of the table at address t (see the table layouts)."""
    for m in range(_word(t, p)):
        q = p + 1 + 5 * m
        _step(_word(t, q) == 10, _word(t, q + 1), _word(t, q + 2), _word(t, q + 3), _word(t, q + 4))


@njit(cache=True, nogil=True, inline="always")
def _after_body(t, count, cell, outer, last, mv, moves, limit, poll):
    """After the body's run `count` of the WHILE whose table is at address t (its counters stepped): make the
    `moves` moves at mv, check the iteration cap `limit` and poll Python's signal handlers when due
    (`poll`: -1 never, else the mask of iterations between looks at the clock; the running cell at `outer`
    meanwhile). The table's fields come read once (a store here may alias the table for the compiler). `last`: the
    clock at the last look (0: none yet in this run; no clock read before the loop, ~8 ns on this VM); returns it."""
    for m in range(moves):
        q = mv + 1 + 3 * m
        _copy(_word(t, q), _word(t, q + 1), _word(t, q + 2))
    if count >= limit:
        _st(cell, outer)
        raise RuntimeError("WHILE (node " + str(_word(t, 6)) + ") did not finish within " + str(limit)
                           + " iterations (Interpreter.max_while_iterations)")
    if poll >= 0 and (count & poll) == 0:
        now = _cycles()
        if last == 0:
            last = now
        if now - last > (1 << 24) or (count & 0xFFFF) == 0:
            last = now
            _poll_signals()
    return last


@njit(cache=True, nogil=True, inline="always")
def _run_program(tab, p, cell, sub):
    """Run the program at tab[p] of subgraph `sub`, noting `sub` in the int64 at `cell` while it runs (left there
    when a kernel raises: ModelRuntime.invoke names that subgraph in the error)."""
    outer = _ld(cell, np.int64)
    _st(cell, np.int64(sub))
    run_runners(tab, p)
    _st(cell, outer)


@njit(cache=True, nogil=True)
def _run_while(tab, ptrs):
    n = tab[1]
    bi = tab[8]
    for k in range(n):
        if tab[bi + 2 * k + 1] > 0:
            _copy(tab[bi + 2 * k], ptrs[k], tab[bi + 2 * k + 1])
    t = _a(tab)
    cell = tab[10]
    outer = _ld(cell, np.int64)
    # a body of one runner (the usual case) is called with its tables made once, not per iteration
    one = tab[tab[3]] == 1
    q = tab[3] + 1 if one else 0  # (else the head's first entries: read, never used)
    arena = carray(_ptr(tab[q + 1]), tab[q + 2] if one else 0, np.uint8)
    aux = carray(_ptr(tab[q + 3]), tab[q + 4] if one else 0, np.uint8)
    itab = carray(_ptr(tab[q + 5]), tab[q + 6] if one else 0, np.int64)
    ftab = carray(_ptr(tab[q + 7]), tab[q + 8] if one else 0, np.float64)
    fptab = carray(_ptr(tab[q + 9]), tab[q + 10] if one else 0, np.int64)
    runner = tab[q]
    expr, flag, body, counters, mv = tab[13], tab[4], tab[12], tab[14], tab[7]
    moves = tab[mv]
    limit = _ld(tab[5], np.int64) if tab[5] != 0 else (1 << 62)
    poll = tab[9] - 1
    count = 0
    last = 0
    looping = tab[15] != 0
    if looping:  # a looping runner (codegen.loop_runner): up to itab[lp] iterations a call
        lp = itab[0] + 3 * itab[1]
        while True:
            itab[lp] = min(poll + 1 - (count & poll) if poll >= 0 else 1 << 62, limit - count)
            _st(cell, body)
            call_runner(runner, arena, aux, itab, ftab, fptab)
            _st(cell, outer)
            count += itab[lp + 1]
            if itab[lp + 2] != 0:
                break
            last = _after_body(t, count, cell, outer, last, mv, 0, limit, poll)
    while not looping:
        if expr != 0:
            _eval_cond(t, expr)
        else:
            _run_program(tab, tab[2], cell, tab[11])
        if _ld(flag, np.uint8) == 0:
            break
        _st(cell, body)
        if one:
            call_runner(runner, arena, aux, itab, ftab, fptab)
        else:
            run_runners(tab, tab[3])
        _st(cell, outer)
        if counters != 0:
            _step_counters(t, counters)
        count += 1
        last = _after_body(t, count, cell, outer, last, mv, moves, limit, poll)
    for k in range(n):
        if tab[bi + 2 * k + 1] > 0:
            _copy(ptrs[n + k], tab[bi + 2 * k], tab[bi + 2 * k + 1])


@njit(cache=True, nogil=True, inline="always")
def _run_branch(tab, ptrs):
    n_in = tab[1]
    nb = tab[4]
    if tab[3] == 0:
        k = 0 if _ld(ptrs[0], np.uint8) != 0 else 1
    else:
        k = _ld(ptrs[0], np.int32)
        if k < 0 or k >= nb:
            k = nb - 1
    b = tab[7 + k]
    pa = tab[b + 1]
    for m in range(tab[pa]):  # (plain loads and stores: no array made per patch)
        q = pa + 1 + 5 * m
        at = tab[q] + 8 * tab[q + 1]
        start = ptrs[tab[q + 2]] - tab[q + 3]
        if _ld(at, np.int64) != start:
            _st(at, start)
            _st(at + 8, start + tab[q + 4])
    _run_program(tab, tab[b], tab[6], tab[b + 3])
    cp = tab[b + 2]
    for m in range(tab[cp]):
        q = cp + 1 + 4 * m
        _memcpy(ptrs[n_in + tab[q]], ptrs[tab[q + 1]] if tab[q + 1] >= 0 else tab[q + 2], tab[q + 3])


@njit(cache=True, nogil=True)
def _run_call_once(tab):
    # (the flag read and written at its address: a carray over it took and dropped a reference every invoke)
    if _ld(tab[1], np.int64) == 0:
        _run_program(tab, tab[2], tab[3], tab[4])
        _st(tab[1], np.int64(1))


TRACE_LIMIT = -(1 << 40)  # run_trace's result when the iteration cap was reached


@njit(cache=True, nogil=True)
def _copies(tab, p):
    """The copies at tab[p] (count, then (dst, src, bytes)); returns the position after them."""
    for m in range(tab[p]):
        q = p + 1 + 3 * m
        _copy(tab[q], tab[q + 1], tab[q + 2])
    return p + 1 + 3 * tab[p]


@njit(cache=True, nogil=True)
def run_trace(table):
    """A host WHILE's recorded iterations (lowering.WhileTrace). Table: [steps, running cell, cond subgraph, body
    subgraph, cap address, step 0 at, step 1 at, ...]; a step: [cond program at, flag address, body program at, then
    copies (count, then (dst, src, bytes)) into the cond, into the body, of the results]. Returns s when the cond of
    step s was false (its results copied), -1 - steps when every recorded body ran, TRACE_LIMIT at the cap."""
    tab = carray(_ptr(_a(table)), table.size, np.int64)
    n = tab[0]
    limit = _ld(tab[4], np.int64)
    for s in range(n):
        p = tab[5 + s]
        q = _copies(tab, p + 3)
        _run_program(tab, tab[p], tab[1], tab[2])
        if _ld(tab[p + 1], np.uint8) == 0:
            _copies(tab, _copies(tab, q))
            return s
        _copies(tab, q)
        _run_program(tab, tab[p + 2], tab[1], tab[3])
        if s + 1 >= limit:
            return TRACE_LIMIT
    return -1 - n


@njit(cache=True, nogil=True, inline="always")
def _drive(table, ptrs):
    # the table again, without its owner: an array argument's reference count (the parent's aux) is taken and
    # dropped by every function it passes through (two atomic operations a call, ~10 ns each on this VM: a small
    # loop's iteration made four such calls); a view made from the address has none
    tab = carray(_ptr(_a(table)), table.size, np.int64)
    kind = tab[0]
    if kind == 0:
        _run_while(tab, ptrs)
    elif kind == 1:
        _run_branch(tab, ptrs)
    else:
        _run_call_once(tab)


# The entry points: the node's tensors as byte vectors (inputs, then outputs), padded to the next of these arities
# with the first one (each array argument costs the runner a few loads and a reference count; every arity is compiled
# once, on first use, and cached).
ARITIES = (1, 2, 4, 8, 16, 32)


@njit(cache=True, nogil=True)
def control_entry1(tab, a0):
    _drive(tab, (_a(a0),))


@njit(cache=True, nogil=True)
def control_entry2(tab, a0, a1):
    _drive(tab, (_a(a0), _a(a1)))


@njit(cache=True, nogil=True)
def control_entry4(tab, a0, a1, a2, a3):
    _drive(tab, (_a(a0), _a(a1), _a(a2), _a(a3)))


@njit(cache=True, nogil=True)
def control_entry8(tab, a0, a1, a2, a3, a4, a5, a6, a7):
    _drive(tab, (_a(a0), _a(a1), _a(a2), _a(a3), _a(a4), _a(a5), _a(a6), _a(a7)))


@njit(cache=True, nogil=True)
def control_entry16(tab, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15):
    _drive(tab, (_a(a0), _a(a1), _a(a2), _a(a3), _a(a4), _a(a5), _a(a6), _a(a7), _a(a8), _a(a9), _a(a10), _a(a11),
                 _a(a12), _a(a13), _a(a14), _a(a15)))


@njit(cache=True, nogil=True)
def control_entry32(tab, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19,
                    a20, a21, a22, a23, a24, a25, a26, a27, a28, a29, a30, a31):
    _drive(tab, (_a(a0), _a(a1), _a(a2), _a(a3), _a(a4), _a(a5), _a(a6), _a(a7), _a(a8), _a(a9), _a(a10), _a(a11),
                 _a(a12), _a(a13), _a(a14), _a(a15), _a(a16), _a(a17), _a(a18), _a(a19), _a(a20), _a(a21),
                 _a(a22), _a(a23), _a(a24), _a(a25), _a(a26), _a(a27), _a(a28), _a(a29), _a(a30), _a(a31)))


ENTRIES = {1: control_entry1, 2: control_entry2, 4: control_entry4, 8: control_entry8, 16: control_entry16,
           32: control_entry32}
