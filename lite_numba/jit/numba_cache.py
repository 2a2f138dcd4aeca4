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

import functools
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
    """Every source file of lite_numba, its kernels and plugins, ordered by its path inside the installed package, so
    that an editable install (kernels/ and plugins/ beside lite_numba/, mapped by package-dir) and a wheel (inside
    lite_numba/) of the same sources give the same hash, and so the same cache directory."""
    package = Path(__file__).parents[1]
    files = {p.relative_to(package).as_posix(): p for p in package.rglob("*.py")}
    for sub in ("kernels", "plugins"):
        spec = importlib.util.find_spec(f"lite_numba.{sub}")
        if spec is not None and spec.submodule_search_locations:
            for d in spec.submodule_search_locations:
                files.update({f"{sub}/{p.relative_to(d).as_posix()}": p for p in Path(d).rglob("*.py")})
    return [files[k] for k in sorted(files)]


def numba_version() -> str:
    """Numba's version, without importing Numba when it is not imported yet."""
    numba = sys.modules.get("numba")
    if numba is not None and hasattr(numba, "__version__"):
        return numba.__version__
    from importlib.metadata import version  # lazy: only when Numba is not imported

    return version("numba")


def source_hash(version: str) -> str:
    """Hash of lite-numba's version, Numba's version and every source file of lite_numba, its kernels and plugins."""
    h = hashlib.sha256(f"{version}|{numba_version()}".encode())
    for p in _sources():
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def cache_key(version: str) -> str:
    """The name of the cache directory of these sources: source_hash, with -boundscheck in the checked mode."""
    key = source_hash(version)
    return key + "-boundscheck" if os.environ.get("LITE_NUMBA_BOUNDSCHECK", "") not in ("", "0") else key


def configure(version: str) -> str:
    """Point Numba's cache at the directory for the current sources; returns it. Imports Numba."""
    from numba.core import config  # lazy: Numba (see install)

    _patch_numba_caching()
    numba_speedups.apply()

    key = cache_key(version)
    if key.endswith("-boundscheck"):
        # through the environment too: Numba's compiler re-reads NUMBA_* variables when they change
        os.environ["NUMBA_BOUNDSCHECK"] = "1"
        config.reload_config()
        config.BOUNDSCHECK = 1
    user = os.environ.get("NUMBA_CACHE_DIR")
    if user:
        base, prefix = user, "lite_numba-"
    else:
        root = os.environ.get("LITE_NUMBA_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "lite_numba")
        base, prefix = os.path.join(root, "numba"), ""
    d = os.path.join(base, prefix + key)
    config.CACHE_DIR = d
    _SEARCH["primary"] = d
    _SEARCH["precompiled"] = precompiled_dirs(key)
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


LEVEL_ALIASES = {"x86-64-v3": "avx2", "x86-64-v4": "avx512"}


def spec_target(spec: str, host: dict[str, bool]) -> tuple[str, str, str]:
    """level_target's (level, CPU name, LLVM features) for a CPU whose ladder features `spec` names, compiled on a
    CPU with the features `host`: `host` (this CPU's own ladder), or a level of LEVEL_CPUS (x86-64-v3 = avx2,
    x86-64-v4 = avx512) with optional `+feature`s of LADDER, e.g. `avx512vnni+avxvnni` (AMD Zen 5) or
    `amx+avxvnni` (Intel Sapphire Rapids). A ValueError names an unknown level or feature, or the features `host`
    lacks (code for them could not be run, nor its outputs checked, here)."""
    levels = {c[0]: c[1] for c in LEVEL_CPUS}
    if spec.strip().lower() == "host":
        ladder = {f for f in LADDER if host.get(f, False)}
    else:
        base, *extra = spec.strip().lower().split("+")
        base = LEVEL_ALIASES.get(base, base)
        if base not in levels:
            raise ValueError(f"level {spec!r}: expected host or one of {', '.join([*levels, *LEVEL_ALIASES])}, "
                             f"optionally with +FEATURE ({', '.join(LADDER)})")
        unknown = [f for f in extra if f not in LADDER]
        if unknown:
            raise ValueError(f"level {spec!r}: {', '.join(unknown)} not among the ladder features {', '.join(LADDER)}")
        ladder = set(levels[base]) | set(extra)
    missing = [f for f in (*X86_64_V3, *sorted(ladder)) if not host.get(f, False)]
    if missing:
        raise ValueError(f"level {spec!r} needs {', '.join(missing)}, which this CPU lacks: precompile it on a CPU "
                         "that has them")
    target = level_target({f: (v if f not in LADDER else f in ladder) for f, v in host.items()})
    assert target is not None  # x86-64-v3 is there (checked above)
    return target


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
    return read_index(self._index_path, self._version, self._source_stamp)


def read_index(path: str, version: str, stamp) -> dict:
    """The overloads of the sealed index file `path` when it was written by Numba `version` for the source `stamp`,
    else {} (also when missing or damaged)."""
    payload = _read_sealed(path)
    if payload is None:
        return {}
    try:
        f = io.BytesIO(payload)
        if pickle.load(f) != version:
            return {}
        found, overloads = pickle.loads(f.read())
    except Exception:  # noqa: BLE001 - a file that passed the checksum but does not unpickle: a miss
        return {}
    return overloads if found == stamp and isinstance(overloads, dict) else {}


def save_data_sealed(self, name, data) -> None:
    with self._open_for_write(self._data_path(name)) as f:
        f.write(seal(self._dump(data)))


def load_data_sealed(self, name):
    return read_data(self._data_path(name))


def read_data(path: str):
    """The unpickled payload of the sealed data file `path`, or None (a miss) when missing or damaged."""
    payload = _read_sealed(path)
    if payload is None:
        return None  # Numba's load returns it: a miss
    try:
        return pickle.loads(payload)
    except Exception:  # noqa: BLE001 - as in read_index
        return None


# Where a function's cache files are (issue 33). Numba names each source directory's cache subdirectory by a hash
# of its absolute path (and, before Numba 0.61, stamps its index with the source file's mtime and size), so the
# same sources installed at another path (a wheel in a new virtual environment, a copied image, another worktree)
# found nothing and compiled everything again. module_locator(), tried before Numba's own locators, serves the
# functions of lite-numba's own modules (lite_numba.*, with its kernels and plugins) and of the generated runners
# (lite_numba_runner_<hash of the source>): the subdirectory is named by the module's package
# (`lite_numba.kernels.linear`, RUNNERS) and the index is stamped with the sha256 of the file's bytes. The
# directory above them is already keyed by the hash of every source (cache_key), laid out by path inside the
# package. Anything else (a user's custom op, a notebook cell) keeps Numba's locators.
RUNNERS = "runners_by_module"
_SEARCH: dict = {"primary": None, "precompiled": []}


def module_subdir(module: str, py_file: str) -> str | None:
    """The cache subdirectory of a function of `module` defined in `py_file` when both are lite-numba's own (the
    module's package name), else None (Numba's own locators)."""
    if module.startswith("lite_numba_runner_"):
        return RUNNERS
    if not (module == "lite_numba" or module.startswith("lite_numba.")):
        return None
    mod = sys.modules.get(module)
    where = getattr(mod, "__file__", None)
    if not where or os.path.realpath(where) != os.path.realpath(py_file):
        return None  # code made elsewhere (exec with a file name of its own): not this module's source
    return module if os.path.basename(where) == "__init__.py" else module.rpartition(".")[0]


@functools.lru_cache(maxsize=None)
def _file_hash(path: str, mtime_ns: int, size: int) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def file_stamp(path: str) -> str:
    """The source stamp of a cached function's file: the sha256 of its bytes (not its path, mtime or size)."""
    st = os.stat(path)
    return _file_hash(os.path.realpath(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=1)
def _package_roots() -> tuple[tuple[str, str], ...]:
    """(absolute directory, its name inside the package) of lite_numba, its kernels and plugins, and Numba's package
    (its pickles of dispatchers hold functions of numba.core by value), longest first."""
    import numba  # lazy: imported already (closure_hash runs in Numba's cache)

    package = Path(__file__).parents[1]
    roots = {str(package): "<lite_numba>", str(Path(numba.__file__).parent): "<numba>"}
    for sub in ("kernels", "plugins"):
        spec = importlib.util.find_spec(f"lite_numba.{sub}")
        for d in (spec.submodule_search_locations or []) if spec is not None else []:
            roots[str(d)] = f"<lite_numba>/{sub}"
    roots.update({os.path.realpath(d): name for d, name in list(roots.items())})
    return tuple(sorted(roots.items(), key=lambda r: -len(r[0])))


def _in_package(text: str) -> str | None:
    for d, name in _package_roots():
        if text == d or text.startswith(d + os.sep):
            return name + text[len(d):]
    return None


_CLOSURE_PICKLER = None


def closure_hash(py_func) -> str:
    """Numba's index-key hash of a closure's captured values, without the install path: Numba pickles them, and the
    pickle of a captured closure (a dispatcher's py_func) holds its code's file name and its module's __file__, and
    that of a dispatcher some of Numba's own functions. Here every string naming a file or folder of lite-numba's or
    Numba's package is pickled as its path inside the package instead (the bytes are only hashed, never
    unpickled)."""
    global _CLOSURE_PICKLER
    if _CLOSURE_PICKLER is None:
        from numba.core.serialize import NumbaPickler  # lazy: Numba

        class ClosurePickler(NumbaPickler):
            def persistent_id(self, obj):
                return _in_package(obj) if type(obj) is str else None

        _CLOSURE_PICKLER = ClosurePickler
    with io.BytesIO() as buf:
        _CLOSURE_PICKLER(buf, protocol=4).dump(tuple(c.cell_contents for c in py_func.__closure__))
        return hashlib.sha256(buf.getvalue()).hexdigest()


_LOCATOR = None


def module_locator():
    """The locator class of lite-numba's own functions (see RUNNERS above); made once, when Numba is imported."""
    global _LOCATOR
    if _LOCATOR is not None:
        return _LOCATOR
    from numba.core import caching, config  # lazy: Numba

    class ModuleLocator(caching._CacheLocator):
        def __init__(self, py_func, py_file, subdir):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            self._cache_path = os.path.join(config.CACHE_DIR, subdir)

        def get_cache_path(self):
            return self._cache_path

        def get_source_stamp(self):
            return file_stamp(self._py_file)

        def get_disambiguator(self):
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func, py_file):
            subdir = module_subdir(getattr(py_func, "__module__", None) or "", py_file)
            if subdir is None or not config.CACHE_DIR or not os.path.isfile(py_file):
                return None
            self = cls(py_func, py_file, subdir)
            try:
                self.ensure_cache_path()
            except OSError:  # not writable: Numba's next locator
                return None
            return self

    _LOCATOR = ModuleLocator
    return ModuleLocator


# Precompiled caches (issue 33): `lite-numba warmup --into DIR --levels ...` fills DIR/<cache_key>/ with the same
# files as a cache directory, for one or more ISA levels. Such directories are searched, read-only, after the
# writable cache, for lite-numba's own functions only: those named in LITE_NUMBA_PRECOMPILED_DIR (os.pathsep between
# them), then the package's own `lite_numba/_precompiled/` (shipped in a wheel built after a warm-up into it);
# LITE_NUMBA_PRECOMPILED=0 turns them off. An entry is used only for the key the running codegen asks for (its CPU
# name and feature string, level_target's) and only when every feature that key turns on is one this CPU has
# (runs_here): never code for instructions the CPU lacks. What a miss compiles is saved to the writable cache.
def precompiled_dirs(key: str) -> list[str]:
    """The precompiled directories of the cache key `key` that exist, in search order."""
    if os.environ.get("LITE_NUMBA_PRECOMPILED", "").strip() == "0":
        return []
    roots = [r for r in os.environ.get("LITE_NUMBA_PRECOMPILED_DIR", "").split(os.pathsep) if r.strip()]
    roots.append(str(Path(__file__).parents[1] / "_precompiled"))
    return [d for d in (os.path.join(r, key) for r in roots) if os.path.isdir(d)]


_OWN_SUBDIR = re.compile(r"lite_numba(\.\w+)*$")  # (Numba's own subdirectories are <folder>_<sha1 of its path>)


def module_keyed(cache_path: str) -> bool:
    """Whether `cache_path` is a subdirectory module_locator gives (in the configured cache directory)."""
    name = os.path.basename(cache_path)
    return os.path.dirname(cache_path) == _SEARCH["primary"] and (name == RUNNERS or bool(_OWN_SUBDIR.match(name)))


def _fallbacks(cache_path: str) -> tuple[str, ...]:
    """The precompiled twins of the writable cache subdirectory `cache_path` (one of module_locator's)."""
    if not _SEARCH["precompiled"] or not module_keyed(cache_path):
        return ()
    name = os.path.basename(cache_path)
    return tuple(p for p in (os.path.join(d, name) for d in _SEARCH["precompiled"]) if os.path.isdir(p))


@functools.lru_cache(maxsize=None)
def runs_here(magic: tuple) -> bool:
    """Whether code compiled for Numba's codegen key `magic` (target triple, CPU name, LLVM features) can run on
    this CPU: the same architecture, and every feature the key turns on is one LLVM finds on the host."""
    import llvmlite.binding as ll  # lazy: imported by Numba already

    try:
        triple, _, features = magic
        host = ll.get_host_cpu_features()
        on = [f[1:] for f in features.split(",") if f.startswith("+")]
    except (TypeError, ValueError, RuntimeError, AttributeError):
        return False
    same_arch = triple.split("-")[0] == ll.get_process_triple().split("-")[0]
    return bool(on) and same_arch and all(host.get(f, False) for f in on)


def _precompiled_entry(self, key) -> tuple[str, str] | None:
    """(directory, data file name) of `key` in a precompiled twin of this cache file's directory, or None."""
    for d in getattr(self, "_ln_fallbacks", ()):
        name = read_index(os.path.join(d, self._index_name), self._version, self._source_stamp).get(key)
        if name is not None and runs_here(key[1]):
            return d, name
    return None


def indexed(cache_file, key) -> bool:
    """Whether Numba's cache file object holds `key`: in its own index or in a precompiled twin."""
    return key in cache_file._load_index() or _precompiled_entry(cache_file, key) is not None


_PATCHED = False


def _patch_numba_caching() -> None:
    """Six changes to Numba's disk cache, once per process:

    - its cache-entry save holds an exclusive lock on `<index>.lock` (see the module's docstring);
    - the check that a function's cache directory is writable (makedirs and a temporary file, done for every
      decorated function: ~230 when the kernels of a MobileNet are imported) runs once per directory;
    - index and data files are sealed with a checksum, and any damaged or unreadable file is a miss (see the
      module's docstring);
    - code is compiled for the CPU's ISA level, not its model (level_target);
    - lite-numba's own functions are cached by module and source hash, not install path (module_locator), and
      their closures' key hashes the captured values without the install path (closure_hash);
    - a miss in the writable cache looks in the precompiled directories (precompiled_dirs), read-only."""
    global _PATCHED
    if _PATCHED:
        return
    _PATCHED = True
    from numba.core import (
        caching,  # lazy: Numba
        codegen,  # lazy: Numba
    )

    _compile_for_level(codegen.JITCPUCodegen)
    caching.CacheImpl._locator_classes.insert(0, module_locator())
    index_key = caching.Cache._index_key

    def index_key_by_module(self, sig, codegen):
        key = index_key(self, sig, codegen)
        if self._py_func.__closure__ is None or not module_keyed(self.cache_path):
            return key
        return key[0], key[1], (key[2][0], closure_hash(self._py_func))

    caching.Cache._index_key = index_key_by_module
    files = caching.IndexDataCacheFile
    files._save_index, files._load_index = save_index_sealed, load_index_sealed
    files._save_data, files._load_data = save_data_sealed, load_data_sealed
    init, load = files.__init__, files.load

    def init_with_fallbacks(self, cache_path, filename_base, source_stamp):
        init(self, cache_path, filename_base, source_stamp)
        self._ln_fallbacks = _fallbacks(cache_path)

    def load_or_precompiled(self, key):
        data = load(self, key)
        if data is None and self._ln_fallbacks:
            found = _precompiled_entry(self, key)
            if found is not None:
                data = read_data(os.path.join(*found))
        return data

    files.__init__, files.load = init_with_fallbacks, load_or_precompiled
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
