"""Where Numba caches lite-numba's compiled kernels: a directory keyed by the hash of every source file.

Numba keys a cached function on its own file's stamp only, so a kernel whose helper (in another file) changed would
keep running the old machine code — e.g. the hybrid LSTM in rnn.py after quantize_rows in
quantized_fully_connected.py changed. Keying the whole cache directory on the sources of lite_numba, its kernels
and plugins, lite-numba's and Numba's versions makes any change start from a fresh directory instead.

The directory is $NUMBA_CACHE_DIR/lite_numba-HASH when the user set NUMBA_CACHE_DIR, else
~/.cache/lite_numba/numba/HASH (or $LITE_NUMBA_CACHE_DIR/numba/HASH). It must be set before any kernel module is
imported (Numba picks a function's cache location when it is decorated) but `import lite_numba` does not import
Numba (0.5-1 s): `install` configures it at once when Numba is already imported, else right after the first import
of Numba in the process (whoever imports it: a kernel module, a custom op, the user).

Several processes may fill one cache directory at the same time (parallel compile workers, `lite-numba warmup`, test
runs): Numba's index update (read the index, pick the next data file number, write both) is not atomic across
processes, and two writers could give two signatures one data file. `configure` serialises it with a file lock.

LITE_NUMBA_BOUNDSCHECK=1 (the checked mode, SECURITY.md) compiles every njit kernel with Numba's bounds checks
(an out-of-range index raises IndexError) into its own directory, HASH-boundscheck: Numba's cache index does not
record the flag, so checked and unchecked machine code must never share a directory.

A damaged cache file (a full disk, a killed writer on a filesystem without atomic rename, a bad copy) must cost a
compile, never a crash: Numba's own load raises on a truncated index or data file (EOFError, UnpicklingError) and
hands a data file with changed bytes to LLVM, which aborts the process or could run the changed code. Every index and
data file is therefore written as MAGIC + sha256(payload) + payload and checked before it is unpickled; a file that
fails the check, or fails to unpickle, is a miss (the compile that follows overwrites it)."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import pickle
import re
import shutil
import sys
import time
from pathlib import Path

from . import numba_speedups

KEEP = 4  # cache directories of other source versions kept (the most recently used ones) ...
RECENT_S = 24 * 3600  # ... and any used within a day: another installation or worktree may be using it right now


def _sources() -> list[Path]:
    package = Path(__file__).parents[1]
    files = sorted(package.rglob("*.py"))
    for sub in ("kernels", "plugins"):
        spec = importlib.util.find_spec(f"lite_numba.{sub}")
        if spec is not None and spec.submodule_search_locations:
            for d in spec.submodule_search_locations:
                files += sorted(Path(d).rglob("*.py"))
    return files


def _numba_version() -> str:
    """Numba's version, without importing Numba when it is not imported yet."""
    numba = sys.modules.get("numba")
    if numba is not None and hasattr(numba, "__version__"):
        return numba.__version__
    from importlib.metadata import version  # lazy: only when Numba is not imported

    return version("numba")


def source_hash(version: str) -> str:
    """Hash of lite-numba's version, Numba's version and every source file of lite_numba, its kernels and plugins."""
    h = hashlib.sha256(f"{version}|{_numba_version()}".encode())
    for p in _sources():
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def configure(version: str) -> str:
    """Point Numba's cache at the directory for the current sources; returns it. Imports Numba."""
    from numba.core import config  # lazy: Numba (see install)

    _patch_numba_caching()
    numba_speedups.apply()

    key = source_hash(version)
    if os.environ.get("LITE_NUMBA_BOUNDSCHECK", "") not in ("", "0"):
        # through the environment too: Numba's compiler re-reads NUMBA_* variables when they change
        os.environ["NUMBA_BOUNDSCHECK"] = "1"
        config.reload_config()
        config.BOUNDSCHECK = 1
        key += "-boundscheck"
    user = os.environ.get("NUMBA_CACHE_DIR")
    if user:
        base, prefix = user, "lite_numba-"
    else:
        root = os.environ.get("LITE_NUMBA_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "lite_numba")
        base, prefix = os.path.join(root, "numba"), ""
    d = os.path.join(base, prefix + key)
    config.CACHE_DIR = d
    try:
        os.makedirs(d, exist_ok=True)
        os.utime(d)  # marks it recently used for _prune
    except OSError:
        pass  # unwritable: Numba falls back to its other cache locations
    _prune(base, prefix, d)
    return d


def _prune(base: str, prefix: str, current: str) -> None:
    """Delete the cache directories of older sources beyond the KEEP most recently modified, unless used within
    RECENT_S (best effort). A directory deleted while a process used it would make Numba's saves fail: several
    worktrees or virtual environments with other sources may share the cache root."""
    pattern = re.compile(re.escape(prefix) + r"[0-9a-f]{16}(-boundscheck)?$")
    try:
        old = [e for e in os.scandir(base) if e.is_dir() and pattern.match(e.name) and e.path != current]
    except OSError:
        return
    old.sort(key=lambda e: e.stat().st_mtime, reverse=True)
    now = time.time()
    for e in old[KEEP:]:
        if now - e.stat().st_mtime > RECENT_S:
            shutil.rmtree(e.path, ignore_errors=True)


_PACKAGE_DIR: str | None = None


def ensure(version: str) -> str:
    """The cache directory of lite-numba's sources, configuring Numba first if that has not happened yet."""
    global _PACKAGE_DIR
    if _PACKAGE_DIR is None:
        _PACKAGE_DIR = configure(version)
    return _PACKAGE_DIR


def install(version: str) -> None:
    """Configure Numba's cache now if Numba is imported, else as soon as it is (see the module's docstring)."""
    if "numba" in sys.modules:
        ensure(version)
    elif not any(isinstance(f, numba_speedups.AfterImport) and f.name == "numba" for f in sys.meta_path):
        # right after Numba's package has run, before anything can decorate a function with it
        sys.meta_path.insert(0, numba_speedups.AfterImport("numba", lambda: ensure(version)))


# What Numba compiles for (issue 33): Numba keys each cached function on the CPU name and feature string it
# compiled for, the host's by default, so a cache made on one CPU model was never used on another with the same
# instructions, and every new machine type compiled everything again. On an x86-64 CPU with at least x86-64-v3 (the
# `avx2` kernel path), lite-numba compiles instead for x86-64-v3's instructions plus the host's ladder features (those
# the kernel paths of kernels/base/isa.py use: AVX-VNNI, AVX-512 F/BW/CD/DQ/VL, AVX-512 VNNI, AMX int8), every other
# LLVM feature off, with LLVM's generic tuning of the psABI level (x86-64-v3 / x86-64-v4: no slower than the host's
# own tuning, where `sapphirerapids` was 6-8 % slower; docs/design/startup.md): CPUs with the same ladder features
# share one cache. The string is made from the host's own features, so the code uses no instruction the host lacks,
# and another set of ladder features is another key. LITE_NUMBA_CODEGEN=host compiles for the host CPU as Numba does
# by default; a user's NUMBA_CPU_NAME / NUMBA_CPU_FEATURES or NUMBA_ENABLE_AVX=0 are Numba's as well.
X86_64_V3 = ("64bit", "cmov", "cx8", "cx16", "fxsr", "mmx", "sahf", "popcnt", "crc32", "sse", "sse2", "sse3", "ssse3",
             "sse4.1", "sse4.2", "avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave")
_AVX512 = ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
LADDER = ("avxvnni",) + _AVX512 + ("avx512vnni", "amx-tile", "amx-int8")
LEVEL_CPUS = (  # the best level first: the ladder features it needs, the CPU model LLVM tunes its code for
    ("amx", _AVX512 + ("avx512vnni", "amx-tile", "amx-int8"), "x86-64-v4"),
    ("avx512vnni", _AVX512 + ("avx512vnni",), "x86-64-v4"),
    ("avx512", _AVX512, "x86-64-v4"),
    ("avxvnni", ("avxvnni",), "x86-64-v3"),
    ("avx2", (), "x86-64-v3"),
)


def level_target(host: dict[str, bool]) -> tuple[str, str, str] | None:
    """(level, CPU name, LLVM feature string) to compile for on a CPU with the features `host` (LLVM's names), or
    None to leave Numba's choice: the host itself (not x86-64-v3)."""
    if not all(host.get(f, False) for f in X86_64_V3):
        return None
    on = set(X86_64_V3) | {f for f in LADDER if host.get(f, False)}
    level, _, cpu = next(c for c in LEVEL_CPUS if on.issuperset(c[1]))
    return level, cpu, ",".join(("+" if f in on else "-") + f for f in sorted(set(host) | on))


def _compile_for_level(codegen_class) -> None:
    """Make Numba's JIT codegen target level_target's CPU name and features unless the user set their own."""
    from numba.core import config  # lazy: Numba (see install)

    mode = os.environ.get("LITE_NUMBA_CODEGEN", "").strip().lower()
    if mode not in ("", "level", "host"):
        raise ValueError(f"LITE_NUMBA_CODEGEN={mode!r}: expected 'level' (the default) or 'host'")
    if mode == "host" or config.CPU_NAME is not None or config.CPU_FEATURES is not None or not config.ENABLE_AVX:
        return
    from numba.core import registry  # lazy: Numba

    if "_toplevel_target_context" in vars(registry.cpu_target):  # Numba compiled before lite-numba configured it
        return
    import llvmlite.binding as ll  # lazy: imported by Numba already

    try:
        target = level_target({k: bool(v) for k, v in ll.get_host_cpu_features().items()})
    except RuntimeError:  # LLVM cannot tell the host's features: Numba's default
        return
    if target is None:
        return
    _, cpu, features = target
    host_name, host_features = codegen_class._get_host_cpu_name, codegen_class._get_host_cpu_features
    # (read at each call: a user's NUMBA_CPU_* set later, which Numba's config reload picks up, still wins)
    codegen_class._get_host_cpu_name = lambda self: cpu if config.CPU_NAME is None else host_name(self)
    codegen_class._get_host_cpu_features = lambda self: (features if config.CPU_FEATURES is None
                                                         else host_features(self))


MAGIC = b"lite-numba cache 1\n"
_DIGEST = 32


def seal(payload: bytes) -> bytes:
    """A cache file's bytes: MAGIC, the sha256 of the payload, the payload."""
    return MAGIC + hashlib.sha256(payload).digest() + payload


def unseal(blob: bytes) -> bytes | None:
    """The payload of a sealed cache file, or None when the file is not one or its payload was changed or cut."""
    head = len(MAGIC) + _DIGEST
    if len(blob) < head or not blob.startswith(MAGIC):
        return None
    payload = blob[head:]
    return payload if hashlib.sha256(payload).digest() == blob[len(MAGIC):head] else None


def _read_sealed(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return unseal(f.read())
    except OSError:  # missing (not written yet, or removed since the index named it) or unreadable: a miss
        return None


def save_index_sealed(self, overloads) -> None:
    payload = pickle.dumps(self._version, protocol=-1) + self._dump((self._source_stamp, overloads))
    with self._open_for_write(self._index_path) as f:
        f.write(seal(payload))


def load_index_sealed(self) -> dict:
    """Numba's index (key -> data file name) for this function, or {} when missing, damaged, of another Numba
    version or of other source."""
    payload = _read_sealed(self._index_path)
    if payload is None:
        return {}
    try:
        f = io.BytesIO(payload)
        if pickle.load(f) != self._version:
            return {}
        stamp, overloads = pickle.loads(f.read())
    except Exception:  # noqa: BLE001 - a file that passed the checksum but does not unpickle: a miss
        return {}
    return overloads if stamp == self._source_stamp and isinstance(overloads, dict) else {}


def save_data_sealed(self, name, data) -> None:
    with self._open_for_write(self._data_path(name)) as f:
        f.write(seal(self._dump(data)))


def load_data_sealed(self, name):
    payload = _read_sealed(self._data_path(name))
    if payload is None:
        return None  # Numba's load returns it: a miss
    try:
        return pickle.loads(payload)
    except Exception:  # noqa: BLE001 - as in load_index_sealed
        return None


_PATCHED = False


def _patch_numba_caching() -> None:
    """Four changes to Numba's disk cache, once per process:

    - its cache-entry save holds an exclusive lock on `<index>.lock` (see the module's docstring);
    - the check that a function's cache directory is writable (makedirs and a temporary file, done for every
      decorated function: ~230 when the kernels of a MobileNet are imported) runs once per directory;
    - index and data files are sealed with a checksum, and any damaged or unreadable file is a miss (see the
      module's docstring);
    - code is compiled for the CPU's ISA level, not its model (level_target)."""
    global _PATCHED
    if _PATCHED:
        return
    _PATCHED = True
    from numba.core import (
        caching,  # lazy: Numba
        codegen,  # lazy: Numba
    )

    _compile_for_level(codegen.JITCPUCodegen)
    files = caching.IndexDataCacheFile
    files._save_index, files._load_index = save_index_sealed, load_index_sealed
    files._save_data, files._load_data = save_data_sealed, load_data_sealed
    checked: set[str] = set()
    ensure_cache_path = caching._CacheLocator.ensure_cache_path

    def ensure_once(self):
        path = self.get_cache_path()
        if path not in checked:
            ensure_cache_path(self)  # raises when not writable: Numba then tries its next locator
            checked.add(path)

    caching._CacheLocator.ensure_cache_path = ensure_once
    try:
        import fcntl  # lazy: POSIX only; elsewhere saves stay unlocked, as in Numba
    except ImportError:
        return
    save = caching.IndexDataCacheFile.save

    def locked_save(self, key, data):
        # The compiled code is in memory already: a save that fails (directory removed or full) only costs the
        # next process a compile, so it must not fail the allocation.
        try:
            fd = os.open(self._index_path + ".lock", os.O_CREAT | os.O_RDWR, 0o644)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            save(self, key, data)
        except OSError:
            pass
        finally:
            os.close(fd)  # releases the lock

    caching.IndexDataCacheFile.save = locked_save
