"""A damaged on-disk cache costs a compile, never a crash, a hang or wrong code (issue 33).

lite-numba reads three kinds of files from its caches: Numba's index (`*.nbi`) and data (`*.nbc`) files of the
kernels and of the generated runners (under the directory lite_numba.jit.numba_cache configures), and the runners'
Python sources ($LITE_NUMBA_CACHE_DIR/runners/*.py, Numba's key to the runner's cache). (The `*.lock` and
`*.compiling` files beside the indexes are empty flock targets: their bytes are never read. Plans of
runtime/control/plan_cache.py live in memory only.)

One cold process fills a cache; then each file kind is cut to half, emptied, or has 64 random bytes written in its
middle, and a fresh process must give the official runtime's outputs, recompile what was damaged, and leave a cache
from which a third process loads everything without compiling. Before the checksums (numba_cache.seal), a truncated
index or data file raised EOFError / UnpicklingError, and changed bytes in a data file aborted the process inside
LLVM's bitcode reader.
"""

from __future__ import annotations

import glob
import random
import shutil

import numpy as np
import pytest
from small_models import kernel_chain_model
from test_startup_cache import _env, _fresh

from lite_numba.testing import assert_close, require_official, run_official

DAMAGE = ("half", "empty", "random")
FILES = ("kernel index", "kernel data", "runner index", "runner data", "runner source")


def _damage(path: str, how: str) -> None:
    data = open(path, "rb").read()
    assert len(data) > 128, path
    if how == "half":
        data = data[: len(data) // 2]
    elif how == "empty":
        data = b""
    else:
        rnd = random.Random(len(data))
        mid = len(data) // 2
        data = data[:mid] + bytes(rnd.randrange(256) for _ in range(64)) + data[mid + 64:]
    with open(path, "wb") as f:
        f.write(data)


def _find(root, kind: str) -> str:
    if kind == "runner source":
        found = glob.glob(f"{root}/ln/runners/*.py")
    else:
        ext = "nbi" if kind.endswith("index") else "nbc"
        found = [p for p in glob.glob(f"{root}/nb/**/*.{ext}", recursive=True)
                 if ("/runners_" in p) == kind.startswith("runner")]
    assert found, f"no {kind} file in the cache"
    return sorted(found)[0]


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """A cache filled by one cold process and a copy of it: (its directory, the copy, the model, the input file, the
    official output). The cases damage the cache in place, after restoring it from the copy."""
    require_official()
    root = tmp_path_factory.mktemp("filled")
    model = root / "m.tflite"
    model.write_bytes(kernel_chain_model())
    x = np.random.default_rng(5).standard_normal((2, 8)).astype(np.float32)
    np.save(root / "x.npy", x)
    cold = _fresh(model, root / "x.npy", _env(root, LITE_NUMBA_COMPILE_WORKERS="1"))
    assert cold["compiled"], "the cold process compiled nothing: the caches were not empty"
    for d in ("nb", "ln"):
        shutil.copytree(root / d, root / "intact" / d)
    return root, root / "intact", model, root / "x.npy", run_official(model.read_bytes(), [x])[0]


@pytest.mark.parametrize("how", DAMAGE)
@pytest.mark.parametrize("kind", FILES)
def test_a_damaged_cache_file_is_recompiled(filled, kind, how):
    root, intact_copy, model, x_path, ref = filled
    for d in ("nb", "ln"):
        shutil.rmtree(root / d)
        shutil.copytree(intact_copy / d, root / d)
    path = _find(root, kind)
    intact = open(path, "rb").read()
    _damage(path, how)
    env = _env(root, LITE_NUMBA_COMPILE_WORKERS="1")

    damaged = _fresh(model, x_path, env)
    assert_close(np.array(damaged["y"], np.float32), ref, what=f"{kind} {how}: ")
    if kind == "runner source":
        # the runner's code is the source generated in the process; the file is Numba's key, written again
        assert open(path, "rb").read() == intact
        assert damaged["compiled"] == [], f"{kind} {how}: recompiled {damaged['compiled']}"
    else:
        assert damaged["compiled"], f"{kind} {how}: nothing was recompiled"
        if kind.startswith("runner"):
            assert damaged["compiled"] == ["run"], damaged["compiled"]
        else:
            assert "run" not in damaged["compiled"], damaged["compiled"]

    again = _fresh(model, x_path, env)  # what the damaged run compiled was saved over the damaged file
    assert again["compiled"] == [], f"{kind} {how}: the next process recompiled {again['compiled']}"
    assert_close(np.array(again["y"], np.float32), ref, what=f"{kind} {how}, next process: ")


def test_seal_detects_any_change():
    from lite_numba.jit.numba_cache import seal, unseal

    blob = seal(b"payload" * 100)
    assert unseal(blob) == b"payload" * 100
    for i in (0, len(blob) // 2, len(blob) - 1):  # the magic, the digest or the payload
        changed = bytearray(blob)
        changed[i] ^= 1
        assert unseal(bytes(changed)) is None
    assert unseal(blob[:-1]) is None and unseal(b"") is None and unseal(b"payload") is None
