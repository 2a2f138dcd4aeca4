"""Which instruction-set path the kernels take: chosen once per process from the CPU's features.

- ``"avx512"``: explicit-SIMD micro-kernels (Numba ``@intrinsic`` + llvmlite IR) need AVX-512 F/BW/VL (+ FMA);
- ``"avx512vnni"``: additionally the AVX-512 VNNI int8 dot product (``vpdpbusd``);
- ``"portable"``: plain Numba loops only (any CPU LLVM targets).

``LITE_NUMBA_ISA=portable`` (or ``avx512``) forces a lower path, e.g. to test that both paths give identical
results; asking for more than the CPU has is an error, never a crash at run time. Prepare functions read
``isa_level()`` to pick the functions they schedule, so the choice ends up in the runner's structure (and its cache
key) like any other kernel choice.
"""

from __future__ import annotations

import functools
import os

LEVELS = ("portable", "avx512", "avx512vnni")

_NEEDS = {
    "portable": (),
    "avx512": ("avx512f", "avx512bw", "avx512vl", "avx512dq", "fma"),
    "avx512vnni": ("avx512f", "avx512bw", "avx512vl", "avx512dq", "fma", "avx512vnni"),
}


def cpu_features() -> dict[str, bool]:
    """The host CPU's features as LLVM names them (what Numba compiles for)."""
    import llvmlite.binding as ll

    return {k: bool(v) for k, v in ll.get_host_cpu_features().items()}


def best_level(features: dict[str, bool] | None = None) -> str:
    feats = cpu_features() if features is None else features
    best = "portable"
    for level in LEVELS:
        if all(feats.get(f, False) for f in _NEEDS[level]):
            best = level
    return best


@functools.lru_cache(maxsize=None)
def _level_for(env: str | None) -> str:
    best = best_level()
    if not env:
        return best
    want = env.strip().lower()
    if want not in LEVELS:
        raise ValueError(f"LITE_NUMBA_ISA={env!r}: expected one of {', '.join(LEVELS)}")
    if LEVELS.index(want) > LEVELS.index(best):
        raise ValueError(f"LITE_NUMBA_ISA={env!r}: this CPU supports at most {best!r}")
    return want


def isa_level() -> str:
    """The path in force: the best the CPU supports, or LITE_NUMBA_ISA if set (read at each call, so tests can
    switch it between interpreters)."""
    return _level_for(os.environ.get("LITE_NUMBA_ISA") or None)


def has(level: str) -> bool:
    """True when the path in force includes `level` ("avx512" is included in "avx512vnni")."""
    return LEVELS.index(isa_level()) >= LEVELS.index(level)
