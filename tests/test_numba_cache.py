"""Numba's cache directory is keyed by the hash of every lite-numba source file (lite_numba/numba_cache.py), so a
kernel whose helper in another file changed is compiled again instead of running stale machine code."""

from __future__ import annotations

import os

from lite_numba.jit import numba_cache


def test_cache_dir_follows_the_sources(tmp_path, monkeypatch):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("x = 1\n")
    b.write_text("y = 2\n")
    monkeypatch.setattr(numba_cache, "_sources", lambda: [a, b])
    first = numba_cache.source_hash("0.1.0")
    assert numba_cache.source_hash("0.1.0") == first
    b.write_text("y = 3\n")  # a helper in another file changes: another directory
    assert numba_cache.source_hash("0.1.0") != first
    assert numba_cache.source_hash("0.2.0") != numba_cache.source_hash("0.1.0")


def test_configure_uses_the_users_numba_cache_dir_and_prunes(tmp_path, monkeypatch):
    from numba.core import config

    monkeypatch.setattr(config, "CACHE_DIR", config.CACHE_DIR)  # restored after the test
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    old = [tmp_path / f"lite_numba-{i:016x}" for i in range(numba_cache.KEEP + 3)]
    for k, d in enumerate(old):
        d.mkdir()
        os.utime(d, (1000 + k, 1000 + k))
    (tmp_path / "other").mkdir()  # not ours: never touched
    d = numba_cache.configure("0.1.0")
    assert config.CACHE_DIR == d and os.path.dirname(d) == str(tmp_path)
    assert os.path.basename(d).startswith("lite_numba-") and os.path.isdir(d)
    left = sorted(p.name for p in tmp_path.iterdir())
    # the current directory, the KEEP most recently used old ones, and the foreign one
    assert left == sorted([os.path.basename(d), "other"] + [p.name for p in old[-numba_cache.KEEP:]])


def test_package_import_configured_numba():
    from numba.core import config

    import lite_numba

    checked = os.environ.get("LITE_NUMBA_BOUNDSCHECK", "") not in ("", "0")  # the checked mode's own directory
    suffix = numba_cache.source_hash(lite_numba.__version__) + ("-boundscheck" if checked else "")
    assert lite_numba.NUMBA_CACHE_DIR.endswith(suffix)
    assert config.CACHE_DIR == lite_numba.NUMBA_CACHE_DIR
