"""Run the official runtime's XNNPACK and ruy kernels on a lower x86 level than the CPU has (bench only).

Issue 14's acceptance compares our AVX2 path with XNNPACK on an AVX2-only CPU. On an AVX-512 machine XNNPACK and ruy
pick their AVX-512 kernels, so `LITE_NUMBA_ISA=avx2` alone compares our AVX2 code with their AVX-512 code. Both
libraries choose their kernels from the cpuinfo library's feature table (`struct cpuinfo_x86_isa`, one byte per
feature), which the official wheel links statically into `libpywrap_litert_common.so`, filled once per process by
`cpuinfo_initialize()`. The wheel keeps its local symbols (`.symtab`), so this module finds that table and the
function, runs the initialisation itself, and clears the feature bytes above the wanted level before the first
official interpreter exists; XNNPACK's hardware config and ruy then see an AVX2 (or AVX-VNNI) CPU.

It is checked, not assumed: `verify()` reads XNNPACK's resulting `hardware_config.arch_flags` after an interpreter
was created, and the bench prints it. The byte offsets are those of cpuinfo's x86-64 layout (cpuinfo.h); a wheel
with another layout is detected by the host's own flags not matching the bytes (then nothing is patched and the
reason is raised). This touches only the process it runs in."""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path

# struct cpuinfo_x86_isa on x86-64 (cpuinfo.h): byte offsets of the features we check or clear
_OFF = {"avx": 0x16, "avxvnni": 0x17, "fma3": 0x18, "avx2": 0x1C, "avx512f": 0x1D, "avx512cd": 0x20,
        "avx512dq": 0x21, "avx512bw": 0x22, "avx512vl": 0x23, "avx512vnni": 0x29}
_AVX512_BYTES = range(0x1D, 0x31)  # avx512f .. avx10_2
_VNNI_256_BYTES = (0x17, 0x35, 0x36)  # avxvnni, avx_vnni_int8, avx_vnni_int16
# XNNPACK's arch_flags bits seen in its hardware config for the features (bit 9: avx512f)
_XNN_AVX512F_BIT = 1 << 9

STATE: dict = {}


def _library() -> Path:
    import ai_edge_litert.interpreter as li

    return Path(li.__file__).resolve().parent / "libpywrap_litert_common.so"


def _elf_symbols(path: Path, names: set[str]) -> dict[str, int]:
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise RuntimeError(f"{path.name}: not a 64-bit ELF file")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    found: dict[str, int] = {}
    for sec in sections:
        if sec[1] != 2:  # SHT_SYMTAB (local symbols; stripped wheels have none)
            continue
        strtab_off = sections[sec[6]][4]
        off, size, ent = sec[4], sec[5], sec[9]
        for k in range(size // ent):
            st_name, _info, _other, _shndx, st_value, _size = struct.unpack_from("<IBBHQQ", data, off + k * ent)
            end = data.index(b"\0", strtab_off + st_name)
            name = data[strtab_off + st_name:end].decode(errors="replace")
            if name in names:
                found[name] = st_value
    missing = names - set(found)
    if missing:
        raise RuntimeError(f"{path.name}: no symbol {', '.join(sorted(missing))} (a stripped or different wheel)")
    return found


def _load_base(path: Path) -> int:
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5] == str(path) and int(parts[2], 16) == 0:
                return int(parts[0].split("-")[0], 16)
    raise RuntimeError(f"{path.name} is not mapped in this process")


def restrict(level: str) -> str:
    """Make the official runtime's XNNPACK and ruy see only `level` ("avx2" or "avxvnni") from now on in this
    process. Must run before the first official interpreter is created. Returns a one-line description."""
    if level not in ("avx2", "avxvnni"):
        raise ValueError(f"official runtime restriction to {level!r}: only avx2 and avxvnni are supported")
    lib = _library()
    syms = _elf_symbols(lib, {"cpuinfo_isa", "cpuinfo_initialize", "hardware_config"})
    base = _load_base(lib)
    hw = ctypes.c_uint64.from_address(base + syms["hardware_config"] + 8)
    if hw.value:
        raise RuntimeError("an official interpreter already initialised XNNPACK in this process; restrict earlier")
    if not ctypes.CFUNCTYPE(ctypes.c_bool)(base + syms["cpuinfo_initialize"])():
        raise RuntimeError("cpuinfo_initialize() failed")
    table = (ctypes.c_uint8 * 0x60).from_address(base + syms["cpuinfo_isa"])
    import llvmlite.binding as ll

    host = {k: bool(v) for k, v in ll.get_host_cpu_features().items()}  # the real CPU, not NUMBA_CPU_FEATURES
    expect = {"avx": host.get("avx"), "fma3": host.get("fma"), "avx2": host.get("avx2"),
              "avx512f": host.get("avx512f"), "avx512bw": host.get("avx512bw"), "avxvnni": host.get("avxvnni")}
    wrong = [k for k, v in expect.items() if v is not None and bool(table[_OFF[k]]) != bool(v)]
    if wrong:
        raise RuntimeError(f"cpuinfo's feature table does not match the host at {', '.join(wrong)}: another layout")
    for off in _AVX512_BYTES:
        table[off] = 0
    if level == "avx2":
        for off in _VNNI_256_BYTES:
            table[off] = 0
    STATE.update(level=level, hw=hw)
    return f"official XNNPACK and ruy restricted to {level} (cpuinfo feature table patched)"


def verify() -> str:
    """After an official interpreter was created: XNNPACK's arch_flags, and whether AVX-512 is off in them."""
    hw = STATE.get("hw")
    if hw is None:
        return "official runtime unrestricted"
    flags = hw.value
    if flags & _XNN_AVX512F_BIT:
        raise RuntimeError(f"XNNPACK arch_flags {flags:#x} still has AVX-512: the restriction did not take")
    return f"official runtime restricted to {STATE['level']}: XNNPACK arch_flags {flags:#x} (no AVX-512)"
