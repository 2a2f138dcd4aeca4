"""Which instruction-set path the kernels take: chosen once per process from the CPU's features.

A level is named by what it needs (LLVM's feature names, what Numba compiles for):

- ``"portable"``: plain Numba loops only (any CPU LLVM targets);
- ``"avx2"``: x86-64-v3 (AVX2, FMA, BMI1/2, F16C, LZCNT, MOVBE);
- ``"avxvnni"``: ``avx2`` plus the VEX-encoded int8 dot product ``vpdpbusd`` on 256-bit registers (Intel 12th
  generation and later, AMD Zen 5);
- ``"avx512"``: ``avx2`` plus AVX-512 F/BW/VL/DQ;
- ``"avx512vnni"``: ``avx512`` plus AVX-512 VNNI;
- ``"amx"``: ``avx512vnni`` plus the AMX tiles for int8 (``amx-tile``, ``amx-int8``: Intel Xeon from Sapphire Rapids
  on) *and* Linux's grant of the tile state to this process (kernels/base/amx.py); int8 GEMM / convolution run on
  the tiles, everything else as on ``avx512vnni``. Refused (an old kernel, a seccomp filter, a hypervisor hiding
  XTILEDATA), the level is not supported and ``unavailable(level)`` says why;
- ``"neon"``: aarch64 Advanced SIMD;
- ``"neon-dotprod"``: ``neon`` plus the dot-product extension (``sdot``/``udot``).

The levels are not one ladder (an AVX-VNNI CPU may lack AVX-512 and the reverse), so ``has(level)`` asks whether
the level in force needs everything ``level`` needs. ``LITE_NUMBA_ISA`` forces any level the CPU supports (e.g.
``avx2`` on an AVX-512 machine, to test that path); asking for one it does not support is an error naming the
missing features, never a crash at run time. Prepare functions read the level to pick the functions they schedule,
so the choice ends up in the runner's structure (and its cache key) like any other kernel choice.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import sys

# In order of preference within an architecture (the best supported one is the default).
LEVELS = ("portable", "avx2", "avxvnni", "avx512", "avx512vnni", "amx", "neon", "neon-dotprod")

_X86_V3 = ("avx", "avx2", "fma", "bmi", "bmi2", "f16c", "lzcnt", "movbe")
_AVX512 = _X86_V3 + ("avx512f", "avx512bw", "avx512vl", "avx512dq")

NEEDS: dict[str, tuple[str, ...]] = {
    "portable": (),
    "avx2": _X86_V3,
    "avxvnni": _X86_V3 + ("avxvnni",),
    "avx512": _AVX512,
    "avx512vnni": _AVX512 + ("avx512vnni",),
    "amx": _AVX512 + ("avx512vnni", "amx-tile", "amx-int8"),
    "neon": ("neon",),
    "neon-dotprod": ("neon", "dotprod"),
}


@functools.lru_cache(maxsize=None)
def cpu_features() -> dict[str, bool]:
    """The features Numba compiles for: the host CPU's as LLVM names them, or the ``+f,-g`` list in
    ``NUMBA_CPU_FEATURES`` when set (Numba then targets exactly those, e.g. an AVX2-only code generation on a newer
    x86 machine)."""
    import llvmlite.binding as ll

    explicit = os.environ.get("NUMBA_CPU_FEATURES")
    if explicit:
        feats: dict[str, bool] = {}
        for item in explicit.split(","):
            item = item.strip()
            if item[:1] in "+-" and len(item) > 1:
                feats[item[1:]] = item[0] == "+"
        return feats
    return {k: bool(v) for k, v in ll.get_host_cpu_features().items()}


# levels that also need the operating system's consent (asked only about this machine, not about a `features` dict)
GRANTS = {"amx": "amx"}


def _grant_refusal(level: str) -> str | None:
    return refusal() if level in GRANTS else None


# Linux hands the AMX tile data to a process only on request (kernels/base/amx.py): asked here, without Numba, so
# that a process running a native image (lite_numba/runtime/native) gets it before the image's AMX code runs
SYS_ARCH_PRCTL = 158  # x86-64 syscall number
ARCH_GET_XCOMP_PERM = 0x1022
ARCH_REQ_XCOMP_PERM = 0x1023
XFEATURE_XTILEDATA = 18


def request_tile_state() -> str | None:
    """Ask Linux for the AMX tile data of this process (arch_prctl); None when granted, else why not."""
    if sys.platform != "linux" or platform.machine().lower() not in ("x86_64", "amd64"):
        return f"the tile state is only requested on Linux x86-64 (this is {sys.platform} {platform.machine()})"
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    rc = libc.syscall(ctypes.c_long(SYS_ARCH_PRCTL), ctypes.c_long(ARCH_REQ_XCOMP_PERM),
                      ctypes.c_long(XFEATURE_XTILEDATA))
    if rc != 0:
        e = ctypes.get_errno()
        return (f"Linux refused the AMX tile state (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): "
                f"{errno.errorcode.get(e, e)}, {os.strerror(e)})")
    bits = ctypes.c_uint64(0)
    rc = libc.syscall(ctypes.c_long(SYS_ARCH_PRCTL), ctypes.c_long(ARCH_GET_XCOMP_PERM), ctypes.byref(bits))
    if rc != 0 or not (bits.value >> XFEATURE_XTILEDATA) & 1:
        return "Linux did not grant the AMX tile state (ARCH_GET_XCOMP_PERM lacks XFEATURE_XTILEDATA)"
    return None


@functools.lru_cache(maxsize=None)
def refusal() -> str | None:
    """Why this process may not use the AMX tiles (None: granted), asked once (request_tile_state). Tests replace
    request_tile_state and clear this cache to simulate a refusal."""
    return request_tile_state()


def supports(level: str, features: dict[str, bool] | None = None) -> bool:
    """True when the CPU (or `features`) has everything `level` needs, and (for this CPU) the operating system grants
    what it needs (the AMX tile state)."""
    feats = cpu_features() if features is None else features
    if not all(feats.get(f, False) for f in NEEDS[level]):
        return False
    return features is not None or _grant_refusal(level) is None


def supported_levels(features: dict[str, bool] | None = None) -> tuple[str, ...]:
    """Every level this CPU (or `features`) can run, in LEVELS order: what the SIMD tests parametrise over."""
    return tuple(level for level in LEVELS if supports(level, features))


def best_level(features: dict[str, bool] | None = None) -> str:
    """The most capable supported level (the last supported one in LEVELS order)."""
    return supported_levels(features)[-1]


def missing_features(level: str, features: dict[str, bool] | None = None) -> tuple[str, ...]:
    """The features `level` needs that the CPU (or `features`) lacks: the reason a test of that level skips."""
    feats = cpu_features() if features is None else features
    return tuple(f for f in NEEDS[level] if not feats.get(f, False))


def unavailable(level: str) -> str | None:
    """Why this machine cannot run `level` (None: it can): the missing CPU features, or the refusal of what the
    operating system must grant (the reason a test of that level skips, and what inspect / the benchmark report
    print)."""
    missing = missing_features(level)
    if missing:
        return f"this CPU lacks {', '.join(missing)}"
    return _grant_refusal(level)


def describe() -> str:
    """One line on the kernel path in force: the level, how it was chosen, and why a better level of this CPU is not
    used (e.g. `amx` refused by the kernel)."""
    level = isa_level()
    forced = os.environ.get("LITE_NUMBA_ISA")
    text = f"{level} ({'LITE_NUMBA_ISA' if forced else 'best of this CPU'})"
    if all(cpu_features().get(f, False) for f in NEEDS["amx"]) and level != "amx":
        why = unavailable("amx")
        text += f"; amx not used: {why}" if why else f"; amx available, not used (LITE_NUMBA_ISA={forced})"
    return text


@functools.lru_cache(maxsize=None)
def _level_for(env: str | None) -> str:
    if not env:
        return best_level()
    want = env.strip().lower()
    if want not in LEVELS:
        raise ValueError(f"LITE_NUMBA_ISA={env!r}: expected one of {', '.join(LEVELS)}")
    if not supports(want):
        raise ValueError(
            f"LITE_NUMBA_ISA={env!r}: {unavailable(want)} (it supports {', '.join(supported_levels())})"
        )
    return want


def isa_level() -> str:
    """The path in force: the best the CPU supports, or LITE_NUMBA_ISA if set (read at each call, so tests can
    switch it between interpreters)."""
    return _level_for(os.environ.get("LITE_NUMBA_ISA") or None)


def has(level: str) -> bool:
    """True when the path in force needs everything `level` needs ("avx2" is included in "avx512vnni", "avx512" is
    not included in "avxvnni")."""
    current = set(NEEDS[isa_level()])
    return all(f in current for f in NEEDS[level])
