"""The checked mode (LITE_NUMBA_BOUNDSCHECK=1): every njit kernel compiled with Numba's bounds checks, cached in its
own directory, so that a kernel indexing out of bounds raises IndexError instead of reading or writing memory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

PROBE = textwrap.dedent("""
    import numpy as np
    import lite_numba
    from numba import njit
    from numba.core import config

    @njit(cache=True)
    def read(a, i):
        return a[i]

    print("dir", lite_numba.NUMBA_CACHE_DIR)
    print("flag", config.BOUNDSCHECK)
    try:
        read(np.zeros(3, np.float32), 5)
        print("read", "unchecked")
    except IndexError as e:
        print("read", "IndexError", e)
""")


def _probe(tmp_path, checked: bool) -> dict[str, str]:
    env = dict(os.environ, LITE_NUMBA_CACHE_DIR=str(tmp_path / "cache"), LITE_NUMBA_PROGRESS="0")
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("NUMBA_BOUNDSCHECK", None)
    if checked:
        env["LITE_NUMBA_BOUNDSCHECK"] = "1"
    else:
        env.pop("LITE_NUMBA_BOUNDSCHECK", None)
    script = tmp_path / "probe.py"  # a file, so that cache=True has a source to key on
    script.write_text(PROBE)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(line.split(" ", 1) for line in proc.stdout.splitlines())


def test_checked_mode_raises_index_error_and_has_its_own_cache(tmp_path):
    checked = _probe(tmp_path, checked=True)
    assert checked["dir"].endswith("-boundscheck"), checked
    assert checked["flag"] == "1"
    assert checked["read"].startswith("IndexError"), checked
    # the second run loads the checked machine code from the cache: still checked
    again = _probe(tmp_path, checked=True)
    assert again["read"].startswith("IndexError"), again
    plain = _probe(tmp_path, checked=False)
    assert not plain["dir"].endswith("-boundscheck")
    assert plain["dir"] != checked["dir"]
    assert plain["flag"] == "None"


def test_checked_mode_catches_an_out_of_bounds_kernel_call(tmp_path):
    """A project kernel called with sizes its prepare would never schedule (2 slices into a 1-element output):
    in checked mode the write past the end raises IndexError."""
    env = dict(os.environ, LITE_NUMBA_CACHE_DIR=str(tmp_path / "cache"), LITE_NUMBA_BOUNDSCHECK="1",
               LITE_NUMBA_PROGRESS="0")
    env.pop("NUMBA_CACHE_DIR", None)
    code = textwrap.dedent("""
        import numpy as np
        import lite_numba  # noqa: F401 - configures the checked mode
        from lite_numba.kernels.movement.gather import gather_nd
        x, idx, out = np.arange(4, dtype=np.int32), np.zeros(2, np.int32), np.zeros(1, np.int32)
        dims, strides = np.array([4], np.int64), np.array([1], np.int64)
        try:
            gather_nd(x, idx, out, dims, strides, 2, 1)
            print("unchecked")
        except IndexError as e:
            print("IndexError", e)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("IndexError"), proc.stdout


def test_checked_mode_checks_the_simd_generators_loads_and_stores(tmp_path):
    """The explicit-SIMD code (LLVM IR built in kernels/linear/simd_*) is not covered by Numba's boundscheck: in
    checked mode kernels/base/llvm_ir.py checks every load and store through an array's data pointer. A 16-byte
    vector copy into an 8-byte array raises IndexError; into a 16-byte array it copies."""
    env = dict(os.environ, LITE_NUMBA_CACHE_DIR=str(tmp_path / "cache"), LITE_NUMBA_BOUNDSCHECK="1",
               LITE_NUMBA_PROGRESS="0")
    env.pop("NUMBA_CACHE_DIR", None)
    code = textwrap.dedent("""
        import numpy as np
        from numba import njit
        import lite_numba  # noqa: F401 - configures the checked mode
        from lite_numba.kernels.linear.int8_rows import _copy16

        @njit
        def copy(dst, d, src, s):
            _copy16(dst, d, src, s, np.uint8(0))

        src = np.arange(32, dtype=np.uint8)
        ok = np.zeros(16, np.uint8)
        copy(ok, 0, src, 3)
        print("in_range", ok.tolist() == list(range(3, 19)))
        for dst, d, s in ((np.zeros(8, np.uint8), 0, 0), (np.zeros(32, np.uint8), 20, 0), (ok, 0, 20)):
            try:
                copy(dst, d, src, s)
                print("outside", "unchecked")
            except IndexError as e:
                print("outside", "IndexError", e)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "in_range True", proc.stdout
    assert len(lines) == 4 and all(line.startswith("outside IndexError") for line in lines[1:]), proc.stdout


def test_cache_directories_used_within_a_day_are_not_pruned(tmp_path, monkeypatch):
    """Checked and unchecked runs, and other checkouts, run at the same time from different cache directories:
    pruning one that a running process uses made its next compile fail (FileNotFoundError, seen in the campaign)."""
    from numba.core import config

    from lite_numba.jit import numba_cache

    monkeypatch.setattr(config, "CACHE_DIR", config.CACHE_DIR)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("LITE_NUMBA_BOUNDSCHECK", raising=False)
    recent = [tmp_path / f"lite_numba-{i:016x}" for i in range(numba_cache.KEEP + 2)]
    for d in recent:
        d.mkdir()
    d = numba_cache.configure("0.1.0")
    assert all(r.is_dir() for r in recent)
    assert os.path.isdir(d)
