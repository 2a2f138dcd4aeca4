"""Code generation: the prepared calls of consecutive static nodes become one generated `@njit` runner.

Every tensor argument becomes a view of the arena or of the aux buffer at an offset held in the int64 table `it`
(shapes there too, scalars in `it` / `ft`), so the source depends on the graph's *structure* only (kernels, dtypes,
ranks), not on shapes: resizing or another model with the same structure reuses the compiled runner. The runner calls
each kernel through its native entry address, passed at run time in the table `fp` (lite_numba.jit.native_call).
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from ..jit.compiler import (
    cached_address,
    cached_spec_types,
    compile_runner,
    dt_name,
    in_disk_cache,
    load_cached_runner,
    native_callable,
    np_name,
    precompile,
    runner_sig,
)
from ..jit.symbols import symbol_name
from ..ops import Call, ConstArg, Tensor, TensorView
from .arena import align64, zeroed_arena

# A constant tensor of at least this many bytes (16-byte aligned, as the schema aligns buffers and numpy aligns aux
# itself) is read by the runner where the model holds it (the mapped file), addressed from aux, instead of being
# copied into aux: an LLM's embedding table is read by a GATHER of every signature (Gemma 3 270M: 160 MiB a copy).
IN_PLACE_CONST = 1 << 16


def executor_mode() -> str:
    """'compiled' (default) or 'python' (one Python call per kernel; for debugging): $LITE_NUMBA_EXECUTOR."""
    return os.environ.get("LITE_NUMBA_EXECUTOR", "compiled")


class Segment:
    """A run of static nodes executed by one compiled call."""

    def __init__(self, nodes: list[int], calls: list[tuple[int, Call]]):
        self.nodes = nodes
        self.calls = calls
        self.run = None
        self.aux = np.zeros(64, np.uint8)
        self.it = np.zeros(1, np.int64)
        self.ft = np.zeros(1, np.float64)
        self.fp = np.zeros(1, np.int64)  # native entry addresses of the kernels the runner calls (native_call)
        self.address = 0  # the compiled runner's own native entry address (lite_numba.runtime.rows calls it), 0 if none
        # positions in `it` of the arena array arguments (their byte offset; the end follows), when every call reads
        # them through call_native_at (None when a call slices the arena): lite_numba.runtime.io_binding rebases them
        self.arena_args: np.ndarray | None = None
        self.py_calls: list[tuple[Any, tuple, int]] = []  # (fn, resolved args, node) for python mode / profiling
        self.source = ""
        self.keep: list = []  # constants the runner reads where they are (make_segment), kept alive with it
        self.natives: list = []  # (kernel, signature) behind each entry of fp, and the runner's compile result
        self.runner_cres = None  # (what a native image saves: runtime/native/image.py)



def make_segment(nodes: list[int], prepared, offsets: dict[int, int], array, arena: np.ndarray) -> Segment:
    """The segment of the static `nodes`: the generated runner source calling every scheduled kernel (by native
    address, lite_numba.jit.native_call), its tables (aux constants, int64 it, float64 ft, addresses fp), the compiled
    runner, and the same calls resolved for Python mode. prepared[ni].calls: the node's scheduled calls; offsets:
    tensor arena offsets; array(i): tensor i's storage; arena: the runtime's arena."""
    calls = [(ni, c) for ni in nodes for c in prepared[ni].calls]
    seg = Segment(nodes, calls)
    aux_parts: list[np.ndarray] = []
    aux_pos: dict[int, int] = {}
    outside: list[tuple[int, np.ndarray]] = []  # (position in `it`, constant) of constants left where they are
    consts: set[int] = set()  # (the ConstArg arrays among aux_parts)
    aux_size = 0
    it: list[int] = [0, 0]  # it[0]: where the step table starts, it[1]: the number of steps (see _step_loop)
    arena_args: list[int] = []  # positions in `it` of arena array arguments (Segment.arena_args)
    ft: list[float] = []
    kernels: list = []
    kindex: dict[int, int] = {}
    lines = []

    def aux_offset(arr: np.ndarray) -> int:
        nonlocal aux_size
        key = id(arr)
        if key not in aux_pos:
            aux_pos[key] = aux_size
            aux_parts.append(arr)
            aux_size = align64(aux_size + arr.nbytes)
        return aux_pos[key]

    pending = []  # (node, kernel, argument sources, argument types)
    fptrs: list = []  # (kernel, signature) called through fp[i]
    findex: dict = {}
    for ni, call in calls:
        src = []
        spec = []  # the arguments as lite_numba.jit.native_call spells them, positions relative to the call's first
        p0, q0 = len(it), len(ft)
        for a in call.args:
            if isinstance(a, (Tensor, TensorView, ConstArg)):
                if isinstance(a, ConstArg):
                    arr, shape, base = a.array, a.array.shape, "aux"
                    off = aux_offset(arr)
                    consts.add(id(arr))
                else:
                    t = a if isinstance(a, Tensor) else a.tensor
                    shape = a.shape
                    if t.is_const:
                        arr = np.ascontiguousarray(t.data)
                        if arr.nbytes >= IN_PLACE_CONST and arr.ctypes.data % 16 == 0:
                            base, off = "aux", 0  # (read where it is: its offset from aux set below)
                            outside.append((len(it), arr))
                        else:
                            base, off = "aux", aux_offset(arr)
                    else:
                        base, off = "arena", offsets[t.index]
                    arr = None
                dt = a.array.dtype if isinstance(a, ConstArg) else a.dtype
                nbytes = math.prod(shape) * dt.itemsize
                shape = shape or (1,)
                p = len(it)
                if base == "arena":
                    arena_args.append(p)
                it += [off, off + nbytes, *shape]
                dims = ", ".join(f"it[{p + 2 + j}]" for j in range(len(shape)))
                src.append(f"{base}[it[{p}]:it[{p + 1}]].view(np.{np_name(dt)}).reshape(({dims},))")
                spec.append(f"A{base[0] if base == 'arena' else 'x'}{p - p0}:{dt_name(dt)}:{len(shape)}")
            elif isinstance(a, float):
                src.append(f"ft[{len(ft)}]")
                spec.append(f"f{len(ft) - q0}")
                ft.append(a)
            else:
                src.append(f"it[{len(it)}]")
                spec.append(f"i{len(it) - p0}")
                it.append(int(a))
        spec = ";".join(spec)
        pending.append((ni, call.fn, src, cached_spec_types(f"0;{spec}" if spec else "0"), spec, p0, q0))
    # Kernels are called through their native entry addresses (lite_numba.jit.native_call), passed in `fp` at run
    # time: the runner contains no kernel code, so it compiles in a fraction of the time and is shared by every
    # kernel version with the same signature. A callable that is not a plain Numba kernel returning None is
    # called directly (linked into the runner) instead.
    compiled = calls and executor_mode() != "python"
    if compiled:
        items = [(fn, sig) for _, fn, _, sig, *_ in pending]
        if all(hasattr(fn, "overloads") and symbol_name(fn).startswith("lite_numba.") for fn, _ in items):
            # Our kernels are nopython functions returning None, called through their addresses (checked below):
            # the runner's source is known before they are compiled, so it joins their compile queue (compiled in
            # parallel with them; a different source below just compiles another runner).
            ahead = compile_runner(_native_source(pending), [])
            items.insert(0, (ahead, runner_sig((arena, arena, np.zeros(1, np.int64), np.zeros(1, np.float64),
                                                np.zeros(1, np.int64)))))
        precompile(items)
    steps = []  # (native call spec, its it / ft bases, node, kernel) of every call through an address
    for ni, fn, src, sig, spec, p0, q0 in pending:
        direct = not native_callable(fn, sig) if compiled else not hasattr(fn, "overloads")
        if direct:
            ki = kindex.setdefault(id(fn), len(kernels))
            if ki == len(kernels):
                kernels.append(fn)
            lines.append(f"    k{ki}({', '.join(src)})  # node {ni}")
        else:
            fi = findex.setdefault((id(fn), sig), len(fptrs))
            if fi == len(fptrs):
                fptrs.append((fn, sig))
            spec = f"{fi};{spec}" if spec else f"{fi}"
            steps.append((spec, p0, q0, ni, fn))
            lines.append(f"    call_native_at(arena, aux, it, ft, fp, {p0}, {q0}, \"{spec}\")  # node {ni} "
                         f"{symbol_name(fn)}")
    if steps and not kernels:  # every call through an address: one call site per distinct call (_step_loop)
        body, table = _step_loop(steps)
        lines = [body]
        it[0], it[1] = len(it), len(steps)
        it += table
    if kernels:  # (a kernel linked into the runner slices aux in its source: every constant goes into it)
        for p, arr in outside:
            it[p] = aux_offset(arr)
            it[p + 1] += it[p]
        outside = []
    aux = zeroed_arena(max(aux_size, 64))  # (on a cache line: the offsets above are multiples of 64)
    for arr in aux_parts:
        off = aux_pos[id(arr)]
        aux[off:off + arr.nbytes] = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    for p, arr in outside:  # a large constant tensor (an embedding table) read in the model's buffer, not copied
        it[p] = arr.ctypes.data - aux.ctypes.data
        it[p + 1] += it[p]
    seg.keep = [arr for _, arr in outside]
    seg.aux = aux
    seg.it = np.array(it or [0], np.int64)
    seg.arena_args = None if kernels else np.array(arena_args, np.int64)
    seg.ft = np.array(ft or [0.0], np.float64)
    seg.source = "\n".join(lines) if lines else "    pass"
    # Python-mode calls over the same storage (aux copies for constants, arena views for tensors)
    for ni, call in calls:
        args = []
        for a in call.args:
            if isinstance(a, ConstArg):
                off = aux_pos[id(a.array)]
                args.append(aux[off:off + a.array.nbytes].view(a.array.dtype).reshape(a.array.shape))
            elif isinstance(a, (Tensor, TensorView)):
                t = a if isinstance(a, Tensor) else a.tensor
                src = np.ascontiguousarray(t.data) if t.is_const else array(t.index)
                args.append(src.reshape(-1).view(a.dtype).reshape(a.shape or (1,)))
            else:
                args.append(a)
        seg.py_calls.append((call.fn, tuple(args), ni))
    # The calls' precomputed arrays (packed weights, tables) now live in aux: the calls (kept with their nodes'
    # preparations) point there too, so the originals are freed instead of doubling the model's memory.
    moved = {id(arr): ConstArg(aux[aux_pos[id(arr)]:aux_pos[id(arr)] + arr.nbytes].view(arr.dtype).reshape(arr.shape))
             for arr in aux_parts if id(arr) in consts}
    for _ni, call in calls:
        if any(isinstance(a, ConstArg) for a in call.args):
            call.args = tuple(moved[id(a.array)] if isinstance(a, ConstArg) else a for a in call.args)
    if compiled:
        seg.fp = np.array([cached_address(fn.overloads[sig]) for fn, sig in fptrs] or [0], np.int64)
        seg.natives = fptrs
        run = compile_runner(seg.source, kernels)
        args = (arena, seg.aux, seg.it, seg.ft, seg.fp)
        sig = runner_sig(args)
        if sig not in run.overloads and not load_cached_runner(run, sig, kernels):
            if kernels and not in_disk_cache(run, sig):  # kernel by kernel, with progress; the runner links them
                from numba import typeof  # lazy: `import lite_numba` does not import Numba (compiler.py)

                precompile([(fn, tuple(typeof(a) for a in args)) for fn, args, _ in seg.py_calls
                            if any(fn is k for k in kernels)])
            run.compile(sig)  # compile (or load from the disk cache) now, without running anything
        cres = seg.runner_cres = run.overloads[sig]
        seg.run = cres.entry_point  # the compiled wrapper: skips the dispatcher's type checks
        seg.address = cached_address(cres) if native_callable(run, sig) else 0
    return seg


def _step_loop(steps) -> tuple[str, list[int]]:
    """The runner body calling `steps` = [(spec, it base, ft base, node, kernel)] (every call through an address) and
    its step table: calls with the same spec (the same kernel, argument types and argument layout; positions are
    relative to the call's bases) share one call_native_at site, which a loop over the table reaches by the call's
    kind. So a runner compiles in time proportional to the distinct calls, not to the nodes (MobileNetV2 int8: 65
    calls of 4 kinds), and graphs with the same kinds of call share it."""
    kinds: dict[str, int] = {}
    names: list[str] = []
    table: list[int] = []
    for spec, p0, q0, _ni, fn in steps:
        k = kinds.setdefault(spec, len(kinds))
        if k == len(names):
            names.append(symbol_name(fn))
        table += [k, p0, q0]
    lines = ["    t = it[0]", "    for s in range(it[1]):", "        k = it[t + 3 * s]",
             "        ib = it[t + 3 * s + 1]", "        fb = it[t + 3 * s + 2]"]
    for spec, k in kinds.items():
        lines.append(f"        {'if' if k == 0 else 'elif'} k == {k}:  # {names[k]}")
        lines.append(f"            call_native_at(arena, aux, it, ft, fp, ib, fb, \"{spec}\")")
    return "\n".join(lines), table


def _native_source(pending) -> str:
    """The runner body make_segment writes when every call goes through a native address."""
    findex: dict = {}
    steps = []
    for ni, fn, _src, sig, spec, p0, q0 in pending:
        fi = findex.setdefault((id(fn), sig), len(findex))
        steps.append((f"{fi};{spec}" if spec else f"{fi}", p0, q0, ni, fn))
    return _step_loop(steps)[0] if steps else "    pass"


_CMP = ("<", "<=", ">", ">=", "==", "!=")
_KIND = ("np.int32", "np.int64", "np.float32")


def loop_runner(seg: Segment, cond: list, flag: int, counters: list) -> tuple[int, np.ndarray]:
    """A WHILE whose body is the one address-only segment `seg`, whose cond is the scalar expression `cond` (result
    at `flag`) and whose loop variables are carried in place or stepped by `counters` (lite_numba.runtime.control's
    WHILE table spells both): the native address of a runner that runs up to `it[lp]` iterations itself (cond,
    the segment's calls, the counters), so the loop makes one runner call per batch of iterations instead of one per
    iteration; and the `it` table it runs with (the segment's, then the loop block at lp = it[0] + 3 * it[1]:
    budget, iterations done, finished (1: the cond turned false), the flag's address, each cond instruction's two
    operand addresses, each counter's three). The source depends on the expression's structure (operators, kinds,
    which operand is an earlier result), never on addresses, so loops of one form share it."""
    block = [0, 0, 0, flag]
    lines = ["    lp = it[0] + 3 * it[1]", "    budget = it[lp]"]
    for j, (_op, _kind, a, b, _r) in enumerate(cond):
        lines.append(f"    c{j}a, c{j}b = it[lp + {len(block)}], it[lp + {len(block) + 1}]")
        block += [a, b]
    for j, (_op, _kind, a, b, r) in enumerate(counters):
        p = len(block)
        lines.append(f"    s{j}a, s{j}b, s{j}r = it[lp + {p}], it[lp + {p + 1}], it[lp + {p + 2}]")
        block += [a, b, r]
    lines += ["    done = 0", "    while done < budget:"]
    made: dict[int, str] = {}  # result address -> the local holding the latest instruction written there

    def byte(addr: int, local: str) -> str:
        return made.get(addr, f"(load_at({local}, np.uint8) != 0)")

    for j, (op, kind, a, b, r) in enumerate(cond):
        if op < 6:
            t = _KIND[kind]
            expr = f"load_at(c{j}a, {t}) {_CMP[op]} load_at(c{j}b, {t})"
        elif op == 8:
            expr = f"not {byte(a, f'c{j}a')}"
        else:
            expr = f"{byte(a, f'c{j}a')} {'and' if op == 6 else 'or'} {byte(b, f'c{j}b')}"
        lines.append(f"        v{j} = {expr}")
        made[r] = f"v{j}"
    lines += [f"        if not {made.get(flag, '(load_at(it[lp + 3], np.uint8) != 0)')}:",
              "            it[lp + 1] = done", "            it[lp + 2] = 1", "            return"]
    if seg.source.strip() != "pass":
        lines += ["    " + ln for ln in seg.source.splitlines()]
    for j, (op, kind, _a, _b, _r) in enumerate(counters):
        t = _KIND[kind]
        lines.append(f"        store_at(s{j}r, {t}(load_at(s{j}a, {t}) {'-' if op == 10 else '+'} "
                     f"load_at(s{j}b, {t})))")
    lines += ["        done += 1", "    it[lp + 1] = done", "    it[lp + 2] = 0"]
    it = seg.it.copy()
    end = int(it[0]) + 3 * int(it[1])  # (the step table ends the segment's table; a lowered counter shortened it)
    if it[1] == 0:  # (no calls: the block after the whole table)
        end = it[0] = it.size
    it = np.concatenate([it[:end], np.asarray(block, np.int64)])
    run = compile_runner("\n".join(lines), [])
    sig = runner_sig((seg.aux, seg.aux, it, seg.ft, seg.fp))
    if sig not in run.overloads and not load_cached_runner(run, sig, []):
        run.compile(sig)
    return cached_address(run.overloads[sig]), it
