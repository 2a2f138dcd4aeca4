"""lite-numba's own worker pool for the parallel drivers (kernels/base/threads.run_chunks), on Linux x86-64 and aarch64.

Why not Numba's threading layers: a region of a `parallel=True` function on the tbb layer builds a task arena per
call, 15-40 us on a 2-vCPU Zen 4 VM; MobileNetV2 1.0/224 int8 then gained nothing from a second thread (3.35 ms with
1 and with 2). The omp layer starts regions in ~1 us (2.02 ms) but its end-of-region barrier waits for a worker that
has not even started, a whole time slice when another process holds the core (10-270 ms), and GNU OpenMP is not
fork-safe. workqueue sleeps between regions (7 ms).

The pool: native threads (pthread_create from ctypes, each running `_worker` compiled as a cfunc; as many as the
interpreters ask for, num_threads - 1, at most NUMBA_NUM_THREADS - 1) and the calling thread as worker 0. A region
publishes (trampoline, arguments, chunk count, workers) and takes chunks itself; each claims the next chunk by a
compare-and-swap on one word holding (generation << 24 | next chunk), so a worker that wakes late can never take a
chunk of a later region, and the caller waits only for chunks that were claimed (running), never for a worker to
arrive: a descheduled worker costs nothing unless it is inside a chunk, and while it waits the caller yields its
core. Idle workers spin SPIN_NS (with `pause`), then sleep on a futex that the next region wakes.
One region at a time: a region started while another runs (a nested one, or two interpreters invoked from two
Python threads) runs its chunks on its own thread. Every chunk runs the same trampoline, with worker 0's scratch or
its own, so results are the same bytes for any number of workers and any assignment of chunks.

The state is the int64 block behind jit/team.py's symbol (word 0 is the team limit); `start(P)` makes the pool
have P threads (again in a forked child, whose state `os.register_at_fork` resets: the threads are not copied).
"""

from __future__ import annotations

import ctypes
import os
import threading

from llvmlite import binding as llvm
from llvmlite import ir
from numba import cfunc, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from lite_numba.ops import TEAM_LIMIT_SYMBOL, TEAM_WORDS, team_state

# word offsets in the state block (distinct cache lines: 16 words apart)
CTRL, DONE, WAKE, SLEEPERS, BUSY, DESC, MISC = 16, 32, 48, 64, 80, 96, 112
FN, ARGS, NCH, NT = DESC, DESC + 1, DESC + 2, DESC + 3
IDS, STARTED, SPIN, TS = MISC, MISC + 1, MISC + 2, MISC + 4  # TS: two words, the futex wait's timeout
GEN_SHIFT = 24
CHUNK_MASK = (1 << GEN_SHIFT) - 1
GEN_MASK = (1 << (63 - GEN_SHIFT)) - 1  # generations wrap before the word's sign bit
# idle workers spin this long before sleeping: the serial ops between two regions of one invoke take a few to tens
# of microseconds; a longer spin only burns a core another process may want
SPIN_NS = 100_000
FUTEX_WAIT, FUTEX_WAKE = 128, 129  # FUTEX_*_PRIVATE
_TRIPLE = llvm.get_process_triple()
FUTEX_NR = 202 if _TRIPLE.startswith("x86_64") else 98 if _TRIPLE.startswith("aarch64") else None
SUPPORTED = FUTEX_NR is not None and os.name == "posix" and os.uname().sysname == "Linux"
_i64 = ir.IntType(64)


def _word_ptr(builder, w):
    """An i64* to word `w` (an LLVM i64 value) of the state block."""
    mod = builder.module
    g = mod.globals.get(TEAM_LIMIT_SYMBOL)
    if g is None:
        g = ir.GlobalVariable(mod, ir.ArrayType(_i64, TEAM_WORDS), TEAM_LIMIT_SYMBOL)
        g.linkage = "external"
    base = builder.bitcast(g, _i64.as_pointer())
    return builder.gep(base, [w])


@intrinsic
def ld(typingctx, w):
    """The state word w (sequentially consistent load)."""
    def codegen(context, builder, sig, args):
        return builder.load_atomic(_word_ptr(builder, args[0]), "seq_cst", 8)
    return types.int64(types.int64), codegen


@intrinsic
def st(typingctx, w, v):
    """Store v into the state word w (sequentially consistent)."""
    def codegen(context, builder, sig, args):
        builder.store_atomic(args[1], _word_ptr(builder, args[0]), "seq_cst", 8)
        return context.get_dummy_value()
    return types.none(types.int64, types.int64), codegen


@intrinsic
def faa(typingctx, w, v):
    """Atomically add v to the state word w; the old value."""
    def codegen(context, builder, sig, args):
        return builder.atomic_rmw("add", _word_ptr(builder, args[0]), args[1], "seq_cst")
    return types.int64(types.int64, types.int64), codegen


@intrinsic
def cas(typingctx, w, old, new):
    """Compare-and-swap the state word w from old to new; the value found (== old when it swapped)."""
    def codegen(context, builder, sig, args):
        res = builder.cmpxchg(_word_ptr(builder, args[0]), args[1], args[2], "seq_cst", "seq_cst")
        return builder.extract_value(res, 0)
    return types.int64(types.int64, types.int64, types.int64), codegen


@intrinsic
def cpu_relax(typingctx):
    """A spin-wait hint (x86 `pause`, aarch64 `yield`)."""
    def codegen(context, builder, sig, args):
        if _TRIPLE.startswith("x86_64"):
            builder.call(_extern(builder, "llvm.x86.sse2.pause", ir.VoidType(), []), [])
        elif _TRIPLE.startswith("aarch64"):
            builder.call(_extern(builder, "llvm.aarch64.hint", ir.VoidType(), [ir.IntType(32)]),
                         [ir.Constant(ir.IntType(32), 1)])
        return context.get_dummy_value()
    return types.none(), codegen


def _extern(builder, name, ret, params, var_arg=False):
    fnty = ir.FunctionType(ret, params, var_arg=var_arg)
    return cgutils.get_or_insert_function(builder.module, fnty, name)


@intrinsic
def futex(typingctx, w, op, val):
    """futex(op) on the low 32 bits of state word w (little-endian), waiting at most the timespec at TS."""
    def codegen(context, builder, sig, args):
        if FUTEX_NR is None:
            return ir.Constant(_i64, 0)
        fn = _extern(builder, "syscall", _i64, [_i64], var_arg=True)
        addr = builder.ptrtoint(_word_ptr(builder, args[0]), _i64)
        ts = builder.ptrtoint(_word_ptr(builder, ir.Constant(_i64, TS)), _i64)
        zero = ir.Constant(_i64, 0)
        return builder.call(fn, [ir.Constant(_i64, FUTEX_NR), addr, args[1], args[2], ts, zero, zero])
    return types.int64(types.int64, types.int64, types.int64), codegen


@intrinsic
def yield_core(typingctx):
    """sched_yield(): let a descheduled worker run on this core."""
    def codegen(context, builder, sig, args):
        builder.call(_extern(builder, "sched_yield", ir.IntType(32), []), [])
        return context.get_dummy_value()
    return types.none(), codegen


@intrinsic
def now_ns(typingctx):
    """CLOCK_MONOTONIC in nanoseconds (clock_gettime, into a timespec in the caller's frame)."""
    def codegen(context, builder, sig, args):
        fn = _extern(builder, "clock_gettime", ir.IntType(32), [ir.IntType(32), _i64.as_pointer()])
        buf = cgutils.alloca_once(builder, _i64, size=2)
        builder.call(fn, [ir.Constant(ir.IntType(32), 1), buf])
        sec = builder.load(buf)
        nsec = builder.load(builder.gep(buf, [ir.Constant(_i64, 1)]))
        return builder.add(builder.mul(sec, ir.Constant(_i64, 1_000_000_000)), nsec)
    return types.int64(), codegen


_TRAMP_TY = ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer(), _i64, _i64])


@intrinsic
def call_tramp(typingctx, f, p, wk, j):
    """Call the trampoline at address f with (arguments at p, worker wk, chunk j)."""
    def codegen(context, builder, sig, args):
        fn = builder.inttoptr(args[0], _TRAMP_TY.as_pointer())
        builder.call(fn, [builder.inttoptr(args[1], ir.IntType(8).as_pointer()), args[2], args[3]])
        return context.get_dummy_value()
    return types.none(types.int64, types.int64, types.int64, types.int64), codegen


_tramp_count = [0]


@intrinsic
def trampoline(typingctx, work, args):
    """(f, p): the address of a native function f(p, wk, j) that runs work(args, wk, j) on the tuple stored at p (in
    the caller's frame, alive until the caller returns), for the pool's workers."""
    if not isinstance(args, types.BaseTuple):
        return None
    wsig = types.none(args, types.int64, types.int64)

    def codegen(context, builder, sig, llargs):
        mod = builder.module
        disp = sig.args[0].dispatcher
        _tramp_count[0] += 1
        name = f"lite_numba_tramp_{abs(hash((disp.py_func.__qualname__, str(args))))}_{_tramp_count[0]}"
        fn = ir.Function(mod, _TRAMP_TY, name)
        fn.linkage = "internal"
        b2 = ir.IRBuilder(fn.append_basic_block())
        val = b2.load(b2.bitcast(fn.args[0], context.get_value_type(args).as_pointer()))

        def run(a, wk, j):
            disp(a, wk, j)

        cres = context.compile_subroutine(b2, run, wsig)  # the chunk raises nothing: prepare validated it
        context.call_internal_no_propagate(b2, cres.fndesc, wsig, [val, fn.args[1], fn.args[2]])
        b2.ret_void()
        slot = cgutils.alloca_once(builder, context.get_value_type(args))
        builder.store(llargs[1], slot)
        return context.make_tuple(builder, types.UniTuple(types.int64, 2),
                                  [builder.ptrtoint(fn, _i64), builder.ptrtoint(slot, _i64)])

    return types.UniTuple(types.int64, 2)(work, args), codegen


@njit(cache=True, nogil=True)
def acquire() -> bool:
    """Take the pool for one region: False when it has no threads or another region holds it."""
    return ld(STARTED) > 0 and cas(BUSY, 0, 1) == 0


@njit(cache=True, nogil=True)
def _take(f, p, wk, gen, nch):
    """Claim and run chunks of region `gen` until none is left (or a later region started)."""
    while True:
        c = ld(CTRL)
        if (c >> GEN_SHIFT) != gen or (c & CHUNK_MASK) >= nch:
            return
        if cas(CTRL, c, c + 1) == c:
            call_tramp(f, p, wk, c & CHUNK_MASK)
            faa(DONE, 1)


@njit(cache=True, nogil=True)
def region(f, p, nch, T):
    """Run trampoline f on the arguments at p for chunks 0 .. nch - 1 with T workers (this thread is worker 0);
    the pool must have been acquired. Returns when every chunk is done, releasing the pool."""
    st(FN, f)
    st(ARGS, p)
    st(NCH, nch)
    st(NT, T)
    st(DONE, 0)
    gen = ((ld(CTRL) >> GEN_SHIFT) + 1) & GEN_MASK
    st(CTRL, gen << GEN_SHIFT)
    st(WAKE, gen & 0x7FFFFFFF)
    if ld(SLEEPERS) > 0:
        futex(WAKE, FUTEX_WAKE, 0x7FFFFFFF)
    _take(f, p, 0, gen, nch)
    k = 0
    while ld(DONE) < nch:  # chunks other workers claimed are running (or their thread is descheduled)
        k += 1
        if k < 256:
            cpu_relax()
        else:
            yield_core()
    st(BUSY, 0)


def _worker(_arg):
    """A pool thread's body: wait for a region (spin SPIN ns, then sleep on the futex), run its chunks, repeat."""
    wid = faa(IDS, 1) + 1
    seen = ld(CTRL) >> GEN_SHIFT
    while True:
        t0 = now_ns()
        k = 0
        while True:
            c = ld(CTRL)
            if (c >> GEN_SHIFT) != seen:
                break
            cpu_relax()
            k += 1
            if k & 63 == 0 and now_ns() - t0 > ld(SPIN):
                faa(SLEEPERS, 1)
                if (ld(CTRL) >> GEN_SHIFT) == seen:
                    futex(WAKE, FUTEX_WAIT, seen & 0x7FFFFFFF)
                faa(SLEEPERS, -1)
                t0 = now_ns()
        seen = c >> GEN_SHIFT
        f, p, nch, T = ld(FN), ld(ARGS), ld(NCH), ld(NT)
        if wid < T:
            _take(f, p, wid, seen, nch)
    return 0


_LOCK = threading.Lock()
_WORKER = []  # the compiled worker (compiled, or loaded from the cache, by the first start)


def _reset_after_fork() -> None:
    s = team_state()
    for w in (STARTED, IDS, BUSY, SLEEPERS):
        s[w] = 0


def start(threads: int) -> int:
    """Make the pool have at least `threads` threads beside the calling ones (started once per process, grown when
    a model asks for more: an interpreter with num_threads=n needs n - 1); returns how many run."""
    s = team_state()
    with _LOCK:
        if s[STARTED] >= threads or not SUPPORTED:
            return int(s[STARTED])
        if not _WORKER:
            _WORKER.append(cfunc(types.int64(types.voidptr), cache=True, nogil=True)(_worker))
        s[SPIN] = SPIN_NS
        s[TS], s[TS + 1] = 0, 100_000_000  # a sleeping worker re-checks every 0.1 s
        libc = ctypes.CDLL(None)
        libc.pthread_create.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        tid = ctypes.c_ulong()
        n = int(s[STARTED])
        while n < threads:
            if libc.pthread_create(ctypes.byref(tid), None, ctypes.c_void_p(_WORKER[0].address), None) != 0:
                break
            libc.pthread_detach(tid)
            n += 1
        s[STARTED] = n
        if n and not getattr(start, "_fork_hook", False):
            os.register_at_fork(after_in_child=_reset_after_fork)
            start._fork_hook = True
        return n
