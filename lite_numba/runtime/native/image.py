"""Native images: subgraph 0's compiled program, saved after a normal allocation and restored by a later process
without importing Numba (issue 33: a warm start is then Python and numpy, not Numba's 0.13-0.3 s import, its
typing machinery and LLVM's memory).

An allocation whose whole invoke is compiled runners (GraphRuntime.native_program) is, once planned, data: the arena's
size and initial bytes, the tensors' shapes and arena offsets, every segment's tables (aux, it, ft) and the machine
code of its runner, of the kernels its `fp` table names and of `rows.run_program`. `save` writes that (with the
object code the process loaded or compiled: jit/native_loader.capture) to `$LITE_NUMBA_CACHE_DIR/images/KEY.lni`
(or `$LITE_NUMBA_IMAGE_DIR`; the KEEP most recently used are kept), sealed with a sha256 like Numba's cache files
(jit/numba_cache.seal); `restore` loads the code with jit/native_loader (its own ELF linker on Linux x86-64, else
llvmlite's; never Numba), rebuilds the tables (fp gets this process's addresses, constants read where the model
holds them get this process's offsets) and gives the GraphRuntime that state and a `run` calling run_program's
CPython wrapper as a built-in (as the normal path does; through ctypes if that cannot be made): invoke, set_tensor
and get_tensor then work as after a normal allocation.

The key covers everything the program depends on: the model's bytes, lite-numba's sources, Numba's, llvmlite's and
Python's versions (jit/numba_cache.cache_key), the CPU (its model and features as Linux reports them: the same CPU
chooses the same code-generation target and kernel path; the path is saved and its OS grant, AMX's tile state,
asked again at restore), the interpreter's options, the input shapes, the resolved kernels and every LITE_NUMBA_* /
NUMBA_* variable. Only graphs of our own kernels are saved (no user custom op, whose code can change without our
sources changing), with one thread (a parallel kernel needs Numba's thread pool), no STRING tensor, no dynamic node,
and no lowered control flow or variable op (their tables hold this process's addresses). A file that is missing,
damaged, of another key or whose code cannot be loaded is a miss: the normal path runs (and writes a new image in
place of a damaged one).

The restored runtime (ImageGraphRuntime) keeps only that state. Anything else a caller asks of it (profiling, trace,
the batch loop, clone, signature binding, a resize that no image covers, a kernel's error) first makes it a plain
GraphRuntime allocated the normal way (importing Numba), with the arena values it had (inputs set, outputs,
variable state) copied over: `materialize`. A kernel's error is raised by running the invoke again on that path,
so its text is the normal path's. LITE_NUMBA_IMAGE=0 turns images off.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import pickle
import platform
import sys

import numpy as np

from ...jit import native_loader, numba_cache
from ...jit.compiler import cache_dir
from ...jit.symbols import symbol_name
from ...kernels.registry import grant_refusal, kernel_level
from ...version import __version__
from ..arena import zeroed_arena
from ..executor import GraphRuntime

FORMAT = 1
MAX_MODEL_BYTES = 256 << 20  # larger models (LLMs) are not hashed at each start; their weights stay where they are
MAX_IMAGE_BYTES = 64 << 20
# no offset, shape or count in a runner's `it` table comes near this; a user-space address does (x86-64 Linux puts
# the heap and mappings above 2^44): a table holding one is not saved (a kernel passed an address, not an offset)
ADDRESS_LIKE = 1 << 44
KEEP = 256  # images kept in the folder (the least recently used are removed)
PAGE = 4096
DIGEST_BYTES = 32  # (numba_cache.seal: a sha256)
# kernels whose tables hold this process's addresses (lowered control flow, variables): never saved
_ADDRESS_MODULES = ("lite_numba.runtime.", "lite_numba.kernels.host.")
# variables that change where files are or how code is loaded, not the program
_NOT_KEYED = {"LITE_NUMBA_IMAGE_DIR", "LITE_NUMBA_NATIVE_LOADER", "LITE_NUMBA_PROGRESS", "LITE_NUMBA_COMPILE_WORKERS",
              "LITE_NUMBA_COMPILE_LOCK"}
# what a restored runtime keeps; reading any other attribute materializes it
_KEPT = ("plan", "kernels", "num_threads", "preserve_all", "subgraph_index", "host_env", "tensors", "ready", "arena",
         "arena_size", "views", "fast_views", "dynamic_arrays", "strings", "offsets", "writable_inputs", "run", "image")


def enabled() -> bool:
    return os.environ.get("LITE_NUMBA_IMAGE", "1") != "0" and os.environ.get("LITE_NUMBA_EXECUTOR",
                                                                             "compiled") == "compiled"


def _identity(k) -> tuple | None:
    """What names resolved kernel `k` in the key (a registry row by its module and name, never importing it: kernel
    modules import Numba), or None when it is not one of lite-numba's own (a user's custom op)."""
    if k is None:
        return ()
    if hasattr(k, "module"):  # (kernels/registry.py's LazyKernel rows)
        return repr(k), repr(k.quantized), repr(k.strings)
    modules = (type(k).__module__, getattr(k, "__module__", ""), getattr(k.prepare, "__module__", ""))
    if not all(str(m).startswith("lite_numba") for m in modules):
        return None
    return k.name, type(k).__qualname__, getattr(k, "__qualname__", ""), getattr(k.prepare, "__qualname__", "")


_HOST: list = []


_CPU_FIELDS = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags", "Features", "CPU implementer",
               "CPU architecture", "CPU variant", "CPU part", "CPU revision")


def _cpu() -> str:
    """This CPU's model and features as Linux reports them (/proc/cpuinfo's first processor), else as LLVM sees them:
    the same CPU gives the same answer, so the code an image holds is code this CPU ran (and its kernel path the
    one it chose, up to the operating system's grants: checked at restore)."""
    try:
        fields = []
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                if key.strip() in _CPU_FIELDS:
                    fields.append(f"{key.strip()}={value.strip()}")
        if any(f.startswith(("flags=", "Features=")) for f in fields):  # (never a model name without its features)
            return ";".join(fields)
    except OSError:
        pass
    import llvmlite.binding as ll  # lazy: only without /proc/cpuinfo

    return ",".join(f"{k}={int(v)}" for k, v in sorted(ll.get_host_cpu_features().items()))


def _host() -> tuple:
    """What this process's code depends on besides the model (asked once): the sources and versions, the CPU."""
    if not _HOST:
        import llvmlite  # lazy: its version only (llvmlite.binding, LLVM itself, is not loaded by this)

        _HOST.append((__version__, numba_cache.cache_key(__version__), llvmlite.__version__, sys.version,
                      platform.machine(), _cpu()))
    return _HOST[0]


def image_key(owner, rt) -> str | None:
    """The image key of subgraph 0's allocation as it stands (its input shapes), or None when images do not apply."""
    source = getattr(owner, "image_source", None)
    if source is None or not enabled() or owner.num_threads != 1 or rt.subgraph_index != 0:
        return None
    data, options = source
    kernels = [_identity(k) for k in owner.kernels[0]]
    if options.get("op_resolver") is not None or len(data) > MAX_MODEL_BYTES or None in kernels:
        return None
    try:
        host = _host()
    except Exception:  # noqa: BLE001 - no llvmlite: no image
        return None
    digest = getattr(owner, "image_digest", None)
    if digest is None:
        digest = owner.image_digest = hashlib.sha256(memoryview(data).cast("B")).digest()
    h = hashlib.sha256(digest)
    env = sorted((k, v) for k, v in os.environ.items()
                 if k.startswith(("LITE_NUMBA_", "NUMBA_")) and k not in _NOT_KEYED)
    parts = (FORMAT, host, sorted((k, repr(v)) for k, v in options.items()), env,
             [rt.tensors[i].shape for i in rt.plan.inputs], sorted(rt.writable_inputs), kernels)
    h.update(repr(parts).encode())
    return h.hexdigest()[:32]


def _path(key: str) -> str:
    folder = os.environ.get("LITE_NUMBA_IMAGE_DIR") or os.path.join(cache_dir(), "images")
    return os.path.join(folder, f"{key}.lni")


def _prune(folder: str) -> None:
    """Keep the KEEP most recently used images (restore touches a file it uses)."""
    try:
        files = [e for e in os.scandir(folder) if e.name.endswith(".lni")]
        if len(files) > KEEP:
            for e in sorted(files, key=lambda e: e.stat().st_mtime)[:len(files) - KEEP]:
                os.remove(e.path)
    except OSError:
        pass


def save(owner, rt) -> bool:
    """Write subgraph 0's allocation (just made by the normal path) as a native image when it qualifies and none is
    there yet; True when written. Never raises: an image is an optimisation."""
    try:
        key = image_key(owner, rt)
        if key is None or os.path.exists(_path(key)):
            return False
        payload = _payload(rt, key)
        if payload is None:
            return False
        path = _path(key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(numba_cache.seal(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)))
        os.replace(tmp, path)
        _prune(os.path.dirname(path))
        return True
    except Exception:  # noqa: BLE001 - unwritable cache, a private Numba API changed: no image
        return False


def _payload(rt, key: str) -> dict | None:
    prog = rt.native_program()
    if (prog is None or rt.dynamic_nodes or any(t.dtype == object for t in rt.tensors)
            or any(getattr(k, "host", None) is not None for k in rt.kernels if k is not None)
            or sum(aux.nbytes for _, aux, *_ in prog) > MAX_IMAGE_BYTES):  # (before copying anything)
        return None
    from numba import types  # lazy: a process that allocated normally has Numba

    from ..rows import compiled_overload, run_program  # lazy: rows imports Numba

    cres = compiled_overload(run_program, (types.int64, types.int64))
    program = native_loader.object_code(cres)
    if program is None:
        return None
    wrapper = (cres.fndesc.llvm_cpython_wrapper_name, cres.fndesc.env_name)
    objects = {program[1]: program[0]}
    consts = {t.data.ctypes.data: t.index for t in rt.tensors if t.data is not None}
    segments = []
    for kind, seg in rt.steps:
        if kind != "segment" or seg.runner_cres is None or len(seg.natives) != int(seg.fp.size) - (not seg.natives):
            return None
        codes = [native_loader.object_code(seg.runner_cres)]
        for fn, sig in seg.natives:
            name = symbol_name(fn)
            if not name.startswith("lite_numba.") or name.startswith(_ADDRESS_MODULES):
                return None
            codes.append(native_loader.object_code(fn.overloads[sig]))
        if any(c is None for c in codes):
            return None
        objects.update((name, code) for code, name in codes)
        outside = []
        for arr in seg.keep:  # constants read where the model holds them: it[p] is their offset from aux
            index = consts.get(arr.ctypes.data)
            delta = arr.ctypes.data - seg.aux.ctypes.data
            at = np.flatnonzero(seg.it == delta)
            if index is None or not at.size:
                return None
            outside.append((at.tolist(), index))
        rebased = np.zeros(seg.it.size, bool)
        for at, _ in outside:
            rebased[at] = True
            rebased[np.asarray(at) + 1] = True
        if np.any(np.abs(seg.it[~rebased]) >= ADDRESS_LIKE):  # (an address in a table: this process's only)
            return None
        segments.append({"runner": codes[0][1], "fp": [name for _, name in codes[1:]], "aux": seg.aux.copy(),
                         "it": seg.it.copy(), "ft": seg.ft.copy(), "outside": outside})
    n = len(rt.tensors)
    arena = rt.arena
    pages = np.zeros(-(-arena.size // PAGE) * PAGE, np.uint8)
    pages[:arena.size] = arena
    live = np.flatnonzero(pages.reshape(-1, PAGE).any(axis=1))
    folded = {t.index: np.array(t.data) for t, s in zip(rt.tensors, rt.plan.tensors) if t.data is not None
              and s.data is None}  # (computed once at allocate)
    payload = {"format": FORMAT, "key": key, "level": kernel_level(), "arena_size": rt.arena_size,
               "arena_bytes": arena.size,
               "pages": live, "page_bytes": pages.reshape(-1, PAGE)[live].tobytes(),
               "shapes": [t.shape for t in rt.tensors], "offsets": dict(rt.offsets),
               "views": sorted(i for i in rt.views if i < n), "folded": folded, "segments": segments,
               "objects": objects, "program": program[1], "wrapper": wrapper}
    size = sum(len(c) for c in objects.values()) + len(payload["page_bytes"]) + sum(s["aux"].nbytes for s in segments)
    return payload if size <= MAX_IMAGE_BYTES else None


def _read(key: str) -> dict | None:
    """The image of `key`, checked (numba_cache.seal's format, read without copying the payload), or None."""
    try:
        with open(_path(key), "rb") as f:
            blob = f.read()
        head = len(numba_cache.MAGIC) + DIGEST_BYTES
        body = memoryview(blob)[head:]
        sealed = blob[:len(numba_cache.MAGIC)] == numba_cache.MAGIC and hashlib.sha256(body).digest() == blob[
            len(numba_cache.MAGIC):head]
        payload = pickle.loads(body) if sealed else None
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - damaged, unreadable: a miss, and removed (the normal path writes it again)
        payload = None
    if isinstance(payload, dict) and payload.get("key") == key:
        return payload
    try:
        os.remove(_path(key))
    except OSError:
        pass
    return None


def restore(owner, rt) -> bool:
    """Give `rt` (subgraph 0, not allocated) the allocation its native image holds (True), or leave it alone."""
    key = image_key(owner, rt)
    payload = None if key is None else _read(key)
    if payload is None or len(payload["shapes"]) != len(rt.tensors) or grant_refusal(payload["level"]):
        return False
    try:
        os.utime(_path(key))  # (recently used: kept by _prune)
    except OSError:
        pass
    try:
        addresses = native_loader.load([(code, name) for name, code in payload["objects"].items()])
    except native_loader.LoaderError:
        return False
    arena = zeroed_arena(payload["arena_bytes"])  # (64-byte aligned as at allocate: numpy's 16 cost 10 % here)
    pages = np.frombuffer(payload["page_bytes"], np.uint8).reshape(-1, PAGE)
    for j, p in enumerate(payload["pages"].tolist()):
        end = min(arena.size, (p + 1) * PAGE)
        arena[p * PAGE:end] = pages[j, :end - p * PAGE]
    folded = payload["folded"]
    keep = [arena]
    table = [len(payload["segments"])]
    for s in payload["segments"]:
        aux = s["aux"]  # (a fresh, writable array: unpickled)
        if aux.ctypes.data % 64:  # its constants on cache lines, as codegen placed them
            aux = zeroed_arena(aux.size)
            aux[:] = s["aux"]
        it = s["it"].copy()
        for at, index in s["outside"]:
            data = folded[index] if index in folded else rt.tensors[index].data
            if data is None:
                return False
            arr = np.ascontiguousarray(data)
            if arr.ctypes.data % 16:  # (read in place where it was 16-byte aligned: an aligned copy here)
                raw = np.empty(arr.nbytes + 16, np.uint8)
                arr = raw[-raw.ctypes.data % 16:][:arr.nbytes].view(arr.dtype).reshape(arr.shape)
                arr[...] = data
            delta = arr.ctypes.data - aux.ctypes.data
            for p in at:
                it[p + 1] += delta - it[p]
                it[p] = delta
            keep.append(arr)
        ft = s["ft"].copy()
        fp = np.array([addresses[name] for name in s["fp"]] or [0], np.int64)
        keep += [aux, it, ft, fp]
        table.append(addresses[s["runner"]])
        for a in (arena, aux, it, ft, fp):
            table += [a.ctypes.data, a.size]
    table = np.asarray(table, np.int64)
    for t, shape in zip(rt.tensors, payload["shapes"]):  # (from here on nothing fails: rt takes the image's state)
        t.shape = tuple(shape)
    for i, value in folded.items():
        rt.tensors[i].data = value
    views = {}
    for i in payload["views"]:
        t, off = rt.tensors[i], payload["offsets"][i]
        views[i] = arena[off:off + t.nbytes].view(t.dtype).reshape(t.shape)
    live = rt.fast_views
    state = vars(rt)
    for name in [k for k in state if k not in _KEPT]:
        del state[name]
    rt.__class__ = ImageGraphRuntime
    rt.arena, rt.arena_size, rt.offsets, rt.views = arena, payload["arena_size"], payload["offsets"], views
    rt.dynamic_arrays = {}
    live.clear()
    live.update(views)
    rt.fast_views = live
    try:  # run_program's CPython wrapper as a built-in (the normal path's entry), else through ctypes
        entry = native_loader.python_function(*payload["wrapper"], "run_program", keep)
        run = functools.partial(entry, table.ctypes.data, table.size)
        run.table = table
    except native_loader.LoaderError:
        run = ImageEntry(rt, native_loader.program_entry(addresses[payload["program"]]), table, keep)
    rt.image = key
    rt.run = run
    rt.ready = True
    return True


class ImageEntry:
    """A restored runtime's `run`: run_program on its table, through ctypes. A kernel's error (a status other than
    success) materializes the runtime and runs the invoke again on the normal path, which raises it."""

    def __init__(self, rt, fn, table: np.ndarray, keep: list):
        self.rt, self.fn, self.table, self.keep = rt, fn, table, keep
        self.slots = (ctypes.c_void_p(), ctypes.c_void_p())  # (the return slot and the excinfo pointer)
        self.args = (ctypes.byref(self.slots[0]), ctypes.byref(self.slots[1]), table.ctypes.data, table.size)

    def __call__(self) -> None:
        if self.fn(*self.args) not in native_loader.STATUS_OK:
            rt = self.rt
            materialize(rt)
            rt.run()


def materialize(rt) -> None:
    """Make a runtime restored from an image a plain GraphRuntime, allocated the normal way when it was allocated, with
    the values its arena held (inputs, outputs, variable state) copied into the new arena."""
    if type(rt) is not ImageGraphRuntime:
        return
    state = vars(rt)
    old = dict(state["views"])
    ready, live = state["ready"], state["fast_views"]
    shapes = {i: rt.tensors[i].shape for i in rt.plan.inputs}
    writable = state.get("writable_inputs", frozenset())
    args = (state["plan"], state["kernels"])
    kwargs = {"num_threads": state["num_threads"], "preserve_all_tensors": state["preserve_all"],
              "subgraph_index": state["subgraph_index"], "host_env": state["host_env"]}
    state.clear()
    rt.__class__ = GraphRuntime
    GraphRuntime.__init__(rt, *args, **kwargs)
    live.clear()
    rt.fast_views = live
    rt.writable_inputs = writable
    for i, shape in shapes.items():
        rt.tensors[i].shape = shape
    if ready:
        rt.allocate()
        for i, v in old.items():
            new = rt.views.get(i)
            if new is not None and new.shape == v.shape and new.dtype == v.dtype:
                new[...] = v


class ImageGraphRuntime(GraphRuntime):
    """A GraphRuntime restored from a native image: invoke, tensor reads and writes, invalidate and resize work on the
    restored state; any other attribute or method materializes it first (see the module docstring)."""

    def __getattr__(self, name):
        if name.startswith("__") or type(self) is not ImageGraphRuntime:
            raise AttributeError(name)
        materialize(self)
        return getattr(self, name)

    def invoke(self) -> None:
        if not self.ready:
            raise RuntimeError("Invoke called on model that is not ready.")
        try:
            self.run()
        except Exception:  # noqa: BLE001 - a kernel's error: raised by the normal path, as GraphRuntime.invoke words it
            materialize(self)
            GraphRuntime.invoke(self)


_SAFE = {"tensor", "array", "invalidate", "release", "set_input_shape", "init_variables", "max_arena_bytes", "invoke"}


def _materializing(name: str, value):
    if isinstance(value, property):
        return property(lambda self: (materialize(self), getattr(self, name))[1])

    def method(self, *args, **kwargs):
        materialize(self)
        return getattr(self, name)(*args, **kwargs)

    method.__name__ = name
    return method


for _name, _value in list(vars(GraphRuntime).items()):
    if not _name.startswith("__") and _name not in _SAFE and (callable(_value) or isinstance(_value, property)):
        setattr(ImageGraphRuntime, _name, _materializing(_name, _value))
