"""Multi-threaded kernel variants: when to use them and how their work is split.

`Interpreter(num_threads=n)` reaches prepare as `ctx.num_threads`. A kernel with a parallel variant calls
`threads_for(ctx, work)`: 1 (schedule the serial kernel) unless n > 1 and the work is big enough to pay for a
parallel launch, else the number of workers t = min(n, the pool's size). A driver runs `run_chunks`: t workers take
the chunks of a fixed list computed in prepare (ranges of images, bands of output rows, column panels;
CHUNKS_PER_THREAD per worker) in turn. Each chunk runs the serial kernel's own code on its part, so every output
element is computed by the same instructions in the same order as with one thread: identical results for any thread
count and any assignment of chunks to workers. Each worker has its own slice of scratch (`Recorder` replays a serial
schedule with every scratch array made t times longer along its first axis).

A region first reads the process's team limit (`team_limit`, lite_numba/jit/team.py): at 1 the calling thread runs
every chunk itself as worker 0 and no region starts. The invoke policy there sets it from the measured invoke times
(num_threads > 1 only).

The workers: on Linux x86-64 and aarch64, team_pool.py's own pool (the calling thread and num_threads - 1 native
threads, at most NUMBA_NUM_THREADS in all, by default the number of cores; regions start in about a microsecond,
never wait for a worker that has not arrived, and idle workers sleep after 0.1 ms; see its doc for why not Numba's
threading layers). Elsewhere Numba's
threading layer (`NUMBA_THREADING_LAYER`; default tbb, then omp, then workqueue) runs `prange(t)` and the workers
take chunks from an atomic counter (`next_chunk`); drivers are then `parallel=True` (PARALLEL). The `tbb` wheel puts
libtbb.so.12 where the loader does not look (outside conda), so `_find_tbb` loads it by path before Numba's pool
starts. Parallel drivers are compiled only when a model is prepared with num_threads > 1.
"""

from __future__ import annotations

import numpy as np
from lite_numba.kernels.base import team_pool
from llvmlite import ir
from numba import from_dtype, njit, prange, types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic

from lite_numba.ops import compiled_address, register_team_limit

TEAM_LIMIT_SYMBOL = register_team_limit()

# work (multiply-adds) below which a parallel launch does not pay. On Numba's omp layer (~1.5-2 us a launch with two
# threads, 2-core Zen 4): a 3x3 conv of 12x12x16 -> 16 (330k) gained 7.8 -> 6.7 us, 8x8x16 -> 16 (150k) lost 3.8 ->
# 4.3 us; the int8 VNNI GEMM (~4x the multiply-adds per second) broke even at 16x16x16 -> 32 3x3 (1.2M); depthwise
# (load-bound) from 50k on made MobileNetV2 0.35/96 f32 slower. So the thresholds were 300k / 1M / 300k. On
# team_pool (Zen 4 VM, 500 invokes, workers forced on), a third of those: MobileNetV2 0.35/96 f32 341 -> 264 us
# (one thread 388-397), int8 256 -> 207 (251-255); a tenth: 257 and 214; small_cnn, face_detection_front and
# MobileNetV2 1.0/224 int8 unchanged.
MIN_MACS = 100_000
# elementwise kernels (elements): below this the workers are not started (a 64 x 64 x 24 ADD + RELU is ~6 us on one
# Zen 4 core; FUSED_ELEMENTWISE, the binary ops' parallel drivers in elementwise/arithmetic.py)
MIN_ELEMENTS = 32_768
MIN_Q8_MACS = 300_000
MIN_DW_MACS = 100_000


# chunks per thread: a worker takes the next chunk when it is done with one, so a worker that starts late (asleep,
# descheduled) leaves its chunks to the others. On Numba's layers, under load 4.5 on 2 cores, a 24x24x32 -> 64 3x3
# conv (serial 265 us): one chunk per thread 140 us median but 8-12 ms 90th percentile, 4 chunks per thread 140 us
# median and 146-158 us 90th percentile in two of three runs; 2 was kept (more chunks re-read the weights more
# often). On team_pool (Zen 4 VM, workers forced on, 500 invokes): 1 chunk per thread against 2, quiet,
# MobileNetV2 1.0/224 int8 1,816-1,821 vs 1,898-1,912 us, hand_landmark_lite 2,072 vs 2,150, small_cnn_f32 31 vs 34,
# MobileNetV2 0.35 f32 339 vs 341; with a spinning process beside it (means, where TeamPolicy would run one thread)
# 5,239 vs 4,926 and 70 vs 74 us. A region's caller there never waits for a worker that has not started.
CHUNKS_PER_THREAD = 1 if team_pool.SUPPORTED else 2


@intrinsic
def next_chunk(typingctx, cnt):
    """Atomically cnt[0] += 1 (an int64 array), returning the old value: the next chunk for the calling worker."""
    if not (isinstance(cnt, types.Array) and cnt.dtype == types.int64):
        return None

    def codegen(context, builder, sig, args):
        arr = context.make_array(sig.args[0])(context, builder, args[0])
        return builder.atomic_rmw("add", arr.data, ir.Constant(ir.IntType(64), 1), "seq_cst")

    return types.int64(cnt), codegen


@intrinsic
def team_limit(typingctx):
    """The process's current limit on a parallel region's workers (lite_numba/jit/team.py: 0 none, 1 run the chunks
    on the calling thread), read from the int64 behind TEAM_LIMIT_SYMBOL (an external symbol: the cached code
    stays valid in every process)."""

    def codegen(context, builder, sig, args):
        mod = builder.module
        g = mod.globals.get(TEAM_LIMIT_SYMBOL)
        if g is None:
            g = ir.GlobalVariable(mod, ir.IntType(64), TEAM_LIMIT_SYMBOL)
            g.linkage = "external"
        return builder.load_atomic(builder.bitcast(g, ir.IntType(64).as_pointer()), "monotonic", 8)

    return types.int64(), codegen


@njit(cache=True, inline="always")
def _run_chunks_pool(T, cnt, nch, work, args):
    if T > 1 and team_limit() != 1 and team_pool.acquire():
        f, p = team_pool.trampoline(work, args)
        team_pool.region(f, p, nch, T)
        return
    for j in range(nch):
        work(args, 0, j)


@njit(cache=True, inline="always")
def _run_chunks_prange(T, cnt, nch, work, args):
    if team_limit() == 1:
        for j in range(nch):
            work(args, 0, j)
        return
    cnt[0] = 0
    for wk in prange(T):
        j = next_chunk(cnt)
        while j < nch:
            work(args, wk, j)
            j = next_chunk(cnt)


# The body of every parallel driver, inlined into it: T workers take the chunks 0 .. nch - 1 in turn and run
# work(args, worker, chunk) on each. On Linux x86-64 / aarch64 the workers are team_pool's (this thread is worker 0;
# the pool busy with another region: every chunk on this thread); elsewhere Numba's threading layer's (prange,
# taking chunks from the counter cnt: next_chunk). With the team limit at 1 (lite_numba/jit/team.py: a core taken by
# another process) the calling thread runs them all as worker 0.
run_chunks = _run_chunks_pool if team_pool.SUPPORTED else _run_chunks_prange
# the drivers' `parallel=` flag: Numba's parfor machinery only where it runs their chunks
PARALLEL = not team_pool.SUPPORTED


@intrinsic
def call_at(typingctx, addr, args):
    """Call the compiled kernel at native address `addr` (an overload returning None, in Numba's calling
    convention, compiled for exactly the types of the tuple `args`) with the values of `args`. A parallel driver
    calls its serial kernel this way instead of by name, so that the driver's own compile does not link and
    re-optimise the kernel's code (qconv_vnni_par: 6.3 s of compile; see serial_address)."""
    if not isinstance(addr, types.Integer) or not isinstance(args, types.BaseTuple):
        return None
    argtys = tuple(args.types)
    for t in argtys:  # serial_address compiles for C-contiguous arrays, int64 and float64 (ops.py's contract)
        if not (isinstance(t, types.Array) and t.layout == "C" or t in (types.int64, types.float64)):
            raise TypingError(f"call_at: argument type {t} is not one a kernel is compiled for")

    def codegen(context, builder, sig, llargs):
        vals = cgutils.unpack_tuple(builder, llargs[1], len(argtys))
        fnty = context.call_conv.get_function_type(types.none, argtys)
        fnptr = builder.inttoptr(llargs[0], fnty.as_pointer())
        if not hasattr(fnptr, "function_type"):  # what call_function reads from an ir.Function
            fnptr.function_type = fnty
        # the serial kernels raise nothing for arguments prepare validated; a status would be lost in the worker
        context.call_conv.call_function(builder, fnptr, types.none, argtys, vals)
        return context.get_dummy_value()

    return types.none(addr, args), codegen


def _arg_type(a):
    """The Numba type a kernel argument is passed as (see the kernel contract in lite_numba/ops.py)."""
    if isinstance(a, (bool, np.bool_)):
        raise TypeError("serial_address: boolean arguments are not passed to kernels")
    if isinstance(a, (int, np.integer)):
        return types.int64
    if isinstance(a, (float, np.floating)):
        return types.float64
    arr = getattr(a, "array", a)  # ConstArg
    return types.Array(from_dtype(np.dtype(arr.dtype)), len(arr.shape), "C")


def serial_address(fn, args) -> int:
    """Compile (or load from the disk cache) the serial kernel `fn` for the types of the call arguments `args`
    (tensors, views, scratch, arrays, ints, floats, as given to ctx.call) and return its native address, for a
    parallel driver that calls it with `call_at`. Addresses are per process: prepare computes them each time."""
    return compiled_address(fn, tuple(_arg_type(a) for a in args))


def _find_tbb() -> None:
    """Make TBB loadable for Numba's tbb layer when the `tbb` wheel is installed: pip puts libtbb.so.12 in
    <prefix>/lib, which the dynamic loader does not search outside conda, so Numba would fall back to omp. Loaded
    here (by path, before the pool starts) only when the user left NUMBA_THREADING_LAYER at its default."""
    import ctypes
    import os
    import sys

    import numba

    if numba.config.THREADING_LAYER != "default" or not sys.platform.startswith("linux"):
        return
    for d in (os.path.join(sys.prefix, "lib"), os.path.join(sys.base_prefix, "lib")):
        path = os.path.join(d, "libtbb.so.12")
        if os.path.exists(path):
            try:
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            except OSError:
                continue
            return


def _pool_size(wanted: int) -> int:
    """How many workers a region may have for an interpreter with num_threads=wanted (starting them if need be)."""
    import numba
    from numba.np.ufunc import parallel

    n = int(numba.config.NUMBA_NUM_THREADS)
    if team_pool.SUPPORTED:  # the drivers' workers: this thread and as many of the pool's as asked for, at most
        return 1 + team_pool.start(min(wanted, n) - 1)  # NUMBA_NUM_THREADS in all
    if not parallel._is_initialized:
        _find_tbb()
    parallel._launch_threads()  # idempotent; a cached parallel kernel needs the layer's symbols before it loads
    return n


def threads_for(ctx, work: int, min_work: int | None = None) -> int:
    """Threads for a kernel of `work` multiply-adds (or comparable units): 1 = run the serial kernel."""
    n = int(getattr(ctx, "num_threads", 1) or 1)
    if n <= 1 or work < (MIN_MACS if min_work is None else min_work):
        return 1
    return max(1, min(n, _pool_size(n)))


def bands(total: int, parts: int, align: int = 1) -> list[tuple[int, int]]:
    """Split range(total) into at most `parts` contiguous, non-empty bands whose starts are multiples of `align`
    (as equal as that allows)."""
    units = -(-total // align)
    parts = max(1, min(parts, units))
    out, start = [], 0
    for j in range(parts):
        end = min(total, (units * (j + 1) // parts) * align)
        if end > start:
            out.append((start, end))
        start = end
    return out


def image_row_chunks(N: int, OH: int, t: int, align: int = 1) -> list[tuple[int, int, int, int]]:
    """(n0, n1, y0, y1) chunks: ranges of whole images when there are at least t, else bands of each image's
    output rows (starts multiples of align)."""
    parts = CHUNKS_PER_THREAD * t
    if N >= t:
        return [(n0, n1, 0, OH) for n0, n1 in bands(N, parts)]
    return [(n, n + 1, y0, y1) for n in range(N) for y0, y1 in bands(OH, -(-parts // N), align)]


def element_parts(ctx, n: int, length: int, align: int = 1) -> tuple[list[tuple[int, int]], int]:
    """(bands of range(length), threads) for an elementwise kernel of n output elements: no bands (run the serial
    kernel) unless num_threads > 1, n >= MIN_ELEMENTS and there are at least two."""
    t = threads_for(ctx, n, MIN_ELEMENTS)
    ch = bands(length, CHUNKS_PER_THREAD * t, align) if t > 1 else []
    return (ch, t) if len(ch) >= 2 else ([], 1)


def image_row_parts(ctx, work: int, N: int, rows: int) -> tuple[list[tuple[int, int, int, int]], int]:
    """(image_row_chunks, threads) for a kernel of `work` elements over N images of `rows` rows: no chunks (run
    the serial kernel) unless num_threads > 1, work >= MIN_ELEMENTS and there are at least two."""
    t = threads_for(ctx, work, MIN_ELEMENTS)
    ch = image_row_chunks(N, rows, t) if t > 1 else []
    return (ch, t) if len(ch) >= 2 else ([], 1)


class _Scratch:
    """A scratch array (or a view of one) requested by a recorded schedule, created at replay."""

    def __init__(self, shape, dtype, base=None):
        self.shape = tuple(int(v) for v in shape)
        self.dtype = np.dtype(dtype)
        self.base = base
        self.size = int(np.prod(self.shape))


class Recorder:
    """A PrepareContext stand-in that runs a serial schedule function without scheduling anything: its scratch
    requests (`temp`, and `view`s of them) and its calls are recorded; every other attribute is the real context's
    (inputs, options, `const`, views of tensors). `replay` then schedules the calls, either as recorded or with
    each scratch made `parts` times longer along its first axis (one slice per chunk of a parallel driver) and a
    function swapped for its parallel driver. So a parallel variant reuses the serial preparation unchanged."""

    def __init__(self, ctx):
        self._ctx = ctx
        self.calls: list = []

    def __getattr__(self, name):
        return getattr(self._ctx, name)

    def temp(self, shape, dtype):
        return _Scratch(shape, dtype)

    def view(self, t, shape, dtype=None):
        if isinstance(t, _Scratch):
            return _Scratch(shape, t.dtype if dtype is None else dtype, base=t)
        return self._ctx.view(t, shape, dtype) if dtype is not None else self._ctx.view(t, shape)

    def call(self, fn, *args):
        self.calls.append((fn, list(args)))

    def replay(self, parts: int = 1, swap: dict | None = None, extra: tuple = (), edit=None) -> None:
        """Schedule the recorded calls on the real context: scratch first axes times `parts`; a call whose function
        is a key of `swap` becomes a call of swap[fn] with the arguments edit(fn, args) (default: unchanged)
        followed by `extra`."""
        ctx, made = self._ctx, {}

        def real(a):
            if not isinstance(a, _Scratch):
                return a
            if id(a) not in made:
                shape = (a.shape[0] * parts,) + a.shape[1:]
                made[id(a)] = ctx.temp(shape, a.dtype) if a.base is None else ctx.view(real(a.base), shape, a.dtype)
            return made[id(a)]

        for fn, args in self.calls:
            if swap and fn in swap:
                args = edit(fn, list(args)) if edit else args
                ctx.call(swap[fn], *(real(a) for a in args), *extra)
            else:
                ctx.call(fn, *(real(a) for a in args))
