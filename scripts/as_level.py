"""Run a command as if this x86 machine had only AVX2 (or AVX2 + AVX-VNNI): our code generation and the path.

    python scripts/as_level.py [--level avx2|avxvnni] [--cpu NAME] -- COMMAND ...

Sets, for COMMAND only:
- LITE_NUMBA_ISA=LEVEL: our SIMD generators take that path;
- NUMBA_CPU_NAME and NUMBA_CPU_FEATURES to the code generation target a CPU of that level gets by default
  (lite_numba.jit.numba_cache.spec_target: `x86-64-v3` with the AVX2 level's features; AVX-VNNI's where this CPU
  has it), so LLVM compiles all of our code, plain loops included, as on such a CPU, and its cache key is that
  CPU's (a wheel's precompiled x86-64-v3 code is found as there); `--cpu NAME` instead tunes for that CPU model
  (e.g. znver3, the stand-in's target before the twenty-fourth session) with the host's features minus every
  AVX-512 / AMX feature (and AVX-VNNI for avx2); `isa.cpu_features()` honours the list;
- NUMBA_CACHE_DIR and LITE_NUMBA_CACHE_DIR to their own directories, so these kernels do not mix with the host's.
The bench (bench/conftest.py) then also restricts the official runtime's XNNPACK and ruy to LEVEL
(bench/official_isa.py), so every ratio compares the same instruction set on both sides. This is a stand-in for an
AVX2-only CPU: the instructions are those, the core (its ports, caches and clock) is this machine's."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def features(level: str) -> str:
    import llvmlite.binding as ll

    host = ll.get_host_cpu_features()
    out = []
    for name, on in sorted(host.items()):
        if name.startswith(("avx512", "amx", "avx10", "evex512")) or (level == "avx2" and name.startswith("avxvnni")):
            on = False
        out.append(("+" if on else "-") + name)
    return ",".join(out)


def level_codegen(level: str) -> tuple[str, str] | None:
    """(CPU name, features) a CPU of `level` compiles for by default, or None when this CPU cannot run that level's
    code (AVX-VNNI on a CPU without it)."""
    import llvmlite.binding as ll

    from lite_numba.jit.numba_cache import spec_target

    host = {k: bool(v) for k, v in ll.get_host_cpu_features().items()}
    try:
        _, cpu, feats = spec_target("x86-64-v3" if level == "avx2" else level, host)
    except ValueError:
        return None
    return cpu, feats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--level", choices=("avx2", "avxvnni"), default="avx2")
    ap.add_argument("--cpu", default=None, help="LLVM CPU name to tune for, with the host's features minus the "
                    "levels above LEVEL (default: the level's own target, as a CPU of that level compiles)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("no command")
    cache = Path.home() / ".cache" / "lite-numba" / f"as-{args.level}"
    own = None if args.cpu else level_codegen(args.level)
    cpu, feats = own or (args.cpu or ("znver3" if args.level == "avx2" else "alderlake"), features(args.level))
    env = dict(os.environ, LITE_NUMBA_ISA=args.level, NUMBA_CPU_NAME=cpu, NUMBA_CPU_FEATURES=feats,
               NUMBA_CACHE_DIR=str(cache / "numba"), LITE_NUMBA_CACHE_DIR=str(cache / "runners"))
    os.execvpe(cmd[0], cmd, env)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
