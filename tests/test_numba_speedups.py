"""lite_numba.jit.numba_speedups: inlining with one scope copy per inline_ir call compiles the same code as Numba's own
per-block copies (issue 16). Each side runs in a fresh process (the change is installed once per process, at Numba's
import), compiling a function that inlines a many-block helper at two call sites."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = r"""
import sys
import numpy as np
import lite_numba  # installs the Numba import hook (numba_cache), which applies numba_speedups
from numba import njit
from numba.core import inline_closurecall

@njit(inline="always")
def helper(a, i, lo, hi):
    s = 0.0
    for k in range(i):
        if a[k] > hi:
            s += hi
        elif a[k] < lo:
            s -= lo
        else:
            s += a[k] * 2
    return s

@njit
def kern(a, n):
    t = 0.0
    for j in range(n):
        t += helper(a, j, -1.0, 1.0) + helper(a, n - j, -2.0, 2.0)
    return t

value = kern(np.linspace(-3, 3, 10), 7)
patched = inline_closurecall.InlineWorker.inline_ir.__name__ == "shared_scope_inline_ir"
sys.stdout.write(f"{patched}|{value!r}|" + kern.inspect_llvm(kern.signatures[0]))
"""


def _run(fast: str, tmp_path) -> tuple[str, str, str]:
    env = dict(os.environ, LITE_NUMBA_FAST_INLINE=fast, LITE_NUMBA_CACHE_DIR=str(tmp_path / fast))
    env.pop("NUMBA_CACHE_DIR", None)
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    patched, value, ir = out.stdout.split("|", 2)
    return patched, value, ir


def test_shared_scope_inlining_compiles_the_same_code(tmp_path):
    on = _run("1", tmp_path)
    off = _run("0", tmp_path)
    assert on[0] == "True" and off[0] == "False"  # the change is installed, and LITE_NUMBA_FAST_INLINE=0 turns it off
    assert on[1] == off[1]
    assert on[2] == off[2]  # the same LLVM IR, byte for byte


RESHAPE_SCRIPT = r"""
import sys
import numpy as np
import lite_numba  # installs the Numba import hook (numba_cache), which applies fast_reshape
from numba import njit
from numba.np import arrayobj

@njit
def views(x, n):
    flat = x.reshape(x.size)
    return flat, x.reshape((n, -1)), flat.reshape((2, -1, n)), x.reshape(())[()] if x.size == 1 else flat[0]

@njit
def bad(x, n):
    return x.reshape(n)

x = np.arange(24, dtype=np.float32).reshape(4, 6)
flat, two, three, first = views(x, 3)
assert np.shares_memory(flat, x) and np.shares_memory(two, x) and np.shares_memory(three, x)
for got, want in ((flat, x.reshape(24)), (two, x.reshape(3, -1)), (three, x.reshape(2, -1, 3))):
    assert got.shape == want.shape and got.strides == want.strides and np.array_equal(got, want), (got, want)
try:
    bad(x, 5)
    raise SystemExit("no error for a size mismatch")
except ValueError as e:
    assert "size" in str(e)
sys.stdout.write(arrayobj._attempt_nocopy_reshape.__module__)
"""


def test_fast_reshape_gives_numpys_views():
    """jit.fast_reshape: a C-contiguous reshape is computed inline (no call of Numba's C helper); the views have
    NumPy's shape and strides and share the data, and a size mismatch still raises ValueError."""
    out = subprocess.run([sys.executable, "-c", RESHAPE_SCRIPT], capture_output=True, text=True, timeout=600,
                         env={**os.environ})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout == "lite_numba.jit.fast_reshape"
