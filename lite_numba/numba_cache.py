"""Where Numba caches lite-numba's compiled kernels: a directory keyed by the hash of every source file.

Numba keys a cached function on its own file's stamp only, so a kernel whose helper (in another file) changed would
keep running the old machine code — e.g. the hybrid LSTM in rnn.py after quantize_rows in
quantized_fully_connected.py changed. Keying the whole cache directory on the sources of lite_numba, its kernels
and plugins, lite-numba's and Numba's versions makes any change start from a fresh directory instead.

The directory is $NUMBA_CACHE_DIR/lite_numba-HASH when the user set NUMBA_CACHE_DIR, else
~/.cache/lite_numba/numba/HASH (or $LITE_NUMBA_CACHE_DIR/numba/HASH). Must run before any kernel module is
imported: Numba picks a function's cache location when it is decorated.

LITE_NUMBA_BOUNDSCHECK=1 (the checked mode, SECURITY.md) compiles every njit kernel with Numba's bounds checks
(an out-of-range index raises IndexError) into its own directory, HASH-boundscheck: Numba's cache index does not
record the flag, so checked and unchecked machine code must never share a directory."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import time
from pathlib import Path

KEEP = 4  # cache directories of other source versions kept (the most recently used ones, and any used within a day)


def _sources() -> list[Path]:
    core = Path(__file__).parent
    files = sorted(core.glob("*.py"))
    for sub in ("kernels", "plugins"):
        spec = importlib.util.find_spec(f"lite_numba.{sub}")
        if spec is not None and spec.submodule_search_locations:
            for d in spec.submodule_search_locations:
                files += sorted(Path(d).rglob("*.py"))
    return files


def source_hash(version: str) -> str:
    import numba

    h = hashlib.sha256(f"{version}|{numba.__version__}".encode())
    for p in _sources():
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def configure(version: str) -> str:
    """Point Numba's cache at the directory for the current sources; returns it."""
    from numba.core import config

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
    """Delete the cache directories of older sources beyond the KEEP most recently modified (best effort)."""
    pattern = re.compile(re.escape(prefix) + r"[0-9a-f]{16}(-boundscheck)?$")
    try:
        old = [e for e in os.scandir(base) if e.is_dir() and pattern.match(e.name) and e.path != current]
    except OSError:
        return
    old.sort(key=lambda e: e.stat().st_mtime, reverse=True)
    for e in old[KEEP:]:
        # not one used in the last day: another process (another checkout, the checked mode) may be running from it
        if time.time() - e.stat().st_mtime > 86400:
            shutil.rmtree(e.path, ignore_errors=True)
