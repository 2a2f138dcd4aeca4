"""Machine code Numba compiled, loaded and called without importing Numba (issue 33: a warm process that only runs
already-compiled models).

Numba's compiled functions are ELF objects (the machine code its disk cache stores) that refer to a few symbols of
their own besides the C library and the Python C API: the NRT (`NRT_*`, Numba's reference-counted allocations) and
the helpers of `numba._helperlib` / `numba._dynfunc` (`numba_*`, called by the Python wrappers), `_Py_NoneStruct`,
`PyExc_*`, and lite-numba's team limit (jit/team.py). Those helpers are C extension modules; their module init needs
numpy only, so they are loaded here by file from Numba's installed package without running `numba/__init__.py`
(registered in `sys.modules` under their own names: a later `import numba` uses the very same modules, and so the
same allocator). On Linux x86-64 the objects are linked here (`ElfLinker`: mapped, relocated and resolved against
the same symbols Numba registers), so an image process loads neither Numba's Python package nor LLVM (llvmlite's
shared library alone is ~40 MiB of memory); elsewhere, or for an object that linker does not handle, they go to one
llvmlite MCJIT engine of this module, with the same registrations (`ll.add_symbol`). Either way, an object naming
a symbol nothing defines is refused first (UnresolvedSymbol): LLVM's linker would end the process on it.

`capture(library)` (installed where Numba is configured, jit/numba_speedups.py) keeps the object code of every
function Numba loads from its disk cache, which Numba's own object-cache hook hands to LLVM and forgets, so that a
process with Numba can write what it loaded into a native image (runtime/native/image.py).
"""

from __future__ import annotations

import builtins
import ctypes
import importlib.machinery
import importlib.util
import os
import platform
import struct
import sys
import threading

from .team import TEAM_LIMIT_SYMBOL, register_team_limit, team_limit_address

# Numba's calling convention: int32 status (0: returned; -2: returned None; others: an exception, described by the
# excinfo pointer the second argument receives), a pointer to the return slot, a pointer to the excinfo pointer,
# then the arguments (here the two int64 of a program: its table's address and length, runtime/rows.py)
STATUS_OK = (0, -2)
PROGRAM_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)

_EXTENSIONS = ("numba._helperlib", "numba._dynfunc", "numba.core.runtime._nrt_python")
_LOCK = threading.Lock()
_STATE: dict = {}


class LoaderError(RuntimeError):
    """The objects could not be loaded here (a missing symbol, another Numba, no llvmlite): use the normal path."""


class UnresolvedSymbol(LoaderError):
    """An object refers to a symbol nothing here defines: no linker may be given it (LLVM's aborts the process)."""


def _numba_extension(name: str):
    """Numba's C extension module `name`, loaded by file without importing the numba package."""
    mod = sys.modules.get(name)
    if mod is not None:
        return mod
    spec = importlib.util.find_spec("numba")  # (finds the package's folder; runs nothing)
    if spec is None or not spec.submodule_search_locations:
        raise LoaderError("numba is not installed")
    folder = spec.submodule_search_locations[0]
    parts = name.split(".")[1:]
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = "/".join([folder, *parts]) + suffix
        try:
            loader = importlib.machinery.ExtensionFileLoader(name, path)
            ext_spec = importlib.util.spec_from_file_location(name, path, loader=loader)
            mod = importlib.util.module_from_spec(ext_spec)
            loader.exec_module(mod)
        except (ImportError, OSError):
            continue
        sys.modules[name] = mod
        return mod
    raise LoaderError(f"{name}: no loadable extension module in {folder}")


def _helper_symbols() -> dict[str, int]:
    """Every symbol Numba registers with LLVM for its code (numba/core/base.py, runtime/nrt.py, externals.py), with
    its address: what both loaders resolve first. Loads Numba's C extension modules by file."""
    table = _STATE.get("symbols")
    if table is not None:
        return table
    helper, dynfunc, nrt = (_numba_extension(n) for n in _EXTENSIONS)
    if "numba.core.runtime.nrt" not in sys.modules:  # (what numba/core/runtime/nrt.py does at import)
        nrt.memsys_use_cpython_allocator()
    table = {"_Py_NoneStruct": id(None), TEAM_LIMIT_SYMBOL: team_limit_address()}
    for name, address in (*helper.c_helpers.items(), *dynfunc.c_helpers.items()):
        table["numba_" + name] = address
    for obj in vars(builtins).values():
        if isinstance(obj, type) and issubclass(obj, BaseException):
            table[f"PyExc_{obj.__name__}"] = id(obj)
    for name, address in nrt.c_helpers.items():
        table[name if name.startswith("_") else "NRT_" + name] = address
    _STATE["symbols"] = table
    return table


def _engine():
    """The process's MCJIT engine for native images, made once with every symbol Numba's code may refer to."""
    ee = _STATE.get("engine")
    if ee is not None:
        return ee
    import llvmlite.binding as ll  # lazy: only a process that loads a native image needs LLVM

    symbols = _helper_symbols()
    ll.initialize_native_target()
    ll.initialize_native_asmprinter()
    if sys.platform.startswith("linux"):  # (compiler support routines, as numba/core/cpu.py loads them)
        try:
            ll.load_library_permanently("libgcc_s.so.1")
        except RuntimeError:
            pass
    for name, address in symbols.items():
        ll.add_symbol(name, address)
    register_team_limit()
    module = ll.parse_assembly("")
    module.triple = ll.get_process_triple()
    target = ll.Target.from_default_triple().create_target_machine()
    ee = _STATE["engine"] = ll.create_mcjit_compiler(module, target)
    _STATE["defined"] = {}
    _STATE["keep"] = [module, target]
    return ee


def load(objects: list[tuple[bytes, str]]) -> dict[str, int]:
    """Load each (object code, entry symbol) into the process (once per symbol: a symbol names one compiled function
    of one signature, lite_numba.jit.symbols) and return {entry symbol: address}. LoaderError when it cannot be.
    On Linux x86-64 the objects are linked here (ElfLinker: no LLVM in the process); else, or when an object needs
    what that linker does not do, by llvmlite's MCJIT ($LITE_NUMBA_NATIVE_LOADER=llvm: always)."""
    if ElfLinker.usable():
        try:
            with _LOCK:
                linker = _STATE.get("elf") or _STATE.setdefault("elf", ElfLinker(_helper_symbols()))
                return linker.load(objects)
        except UnresolvedSymbol:
            raise
        except LoaderError:
            pass
    return _load_llvm(objects)


def _load_llvm(objects: list[tuple[bytes, str]]) -> dict[str, int]:
    with _LOCK:
        try:
            ee = _engine()
            defined = _STATE["defined"]
            import llvmlite.binding as ll  # lazy: imported by _engine

            _check_resolvable([code for code, name in objects if name not in defined])
            added = False
            for code, name in objects:
                if name not in defined:
                    ee.add_object_file(ll.ObjectFileRef.from_data(code))
                    defined[name] = 0
                    added = True
            if added:
                ee.finalize_object()
            out = {}
            for _, name in objects:
                if not defined[name]:
                    defined[name] = ee.get_function_address(name)
                if not defined[name]:
                    raise LoaderError(f"symbol {name} not found in its object")
                out[name] = defined[name]
            return out
        except LoaderError:
            raise
        except Exception as e:  # noqa: BLE001 - llvmlite's errors (bad object code): the caller uses the normal path
            raise LoaderError(f"{type(e).__name__}: {e}") from None


def program_entry(address: int):
    """The ctypes function calling a compiled `run_program(addr, n)` (runtime/rows.py) at `address`: it returns the
    status (STATUS_OK when it returned). The GIL is released during the call, as Numba's nogil wrapper does."""
    return PROGRAM_TYPE(address)


def capture(library) -> None:
    """Numba's object-cache hook hands a loaded function's object code to LLVM and drops it: keep it on the library
    (numba_speedups installs this), so a native image can be written from what this process loaded."""
    code = getattr(library, "_compiled_object", None)
    if code:
        library.lnb_object = code


def object_code(cres) -> tuple[bytes, str] | None:
    """(object code, entry symbol) of a Numba compile result, when this process kept its object code."""
    lib = cres.library
    code = getattr(lib, "lnb_object", None) or getattr(lib, "_compiled_object", None)
    return (bytes(code), cres.fndesc.llvm_func_name) if code else None


# --- ELF objects: their tables; x86-64 ones linked in memory, without LLVM ------------------------------------------

_PROT_READ, _PROT_WRITE, _PROT_EXEC = 1, 2, 4
_MAP_PRIVATE, _MAP_ANONYMOUS = 0x02, 0x20
_SHF_WRITE, _SHF_ALLOC = 0x1, 0x2
_SHT_SYMTAB, _SHT_RELA, _SHT_NOBITS, _SHT_X86_64_UNWIND = 2, 4, 8, 0x70000001
_SHN_UNDEF, _SHN_LORESERVE, _SHN_ABS, _SHN_COMMON = 0, 0xFF00, 0xFFF1, 0xFFF2
_R_64, _R_PC32, _R_PLT32, _R_32, _R_32S, _R_PC64 = 1, 2, 4, 10, 11, 24


def _elf_tables(data: bytes) -> tuple[list, list]:
    """A relocatable little-endian ELF64 object's section headers (name, type, flags, addr, offset, size, link, info,
    align, entsize) and symbols (name, bind, section index, value, size)."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1 or struct.unpack_from("<H", data, 16)[0] != 1:
        raise LoaderError("not a relocatable little-endian ELF64 object")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, _ = struct.unpack_from("<HHH", data, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    symtab = next((sec for sec in secs if sec[1] == _SHT_SYMTAB), None)
    if symtab is None:
        raise LoaderError("no symbol table")
    strtab = secs[symtab[6]]
    names = data[strtab[4]:strtab[4] + strtab[5]]
    symbols = []
    for k in range(symtab[5] // 24):
        st_name, info, _, shndx, value, size = struct.unpack_from("<IBBHQQ", data, symtab[4] + 24 * k)
        symbols.append((names[st_name:names.index(b"\0", st_name)].decode(), info >> 4, shndx, value, size))
    return secs, symbols


def _system_libraries() -> list:
    """The process's own symbols and libgcc_s (compiler support routines) where it loads, as ctypes libraries (the
    first also serves mmap / mprotect): where both linkers look for what neither the objects nor Numba define."""
    if "libs" not in _STATE:
        libs = [ctypes.CDLL(None, use_errno=True)]
        try:
            libs.append(ctypes.CDLL("libgcc_s.so.1"))
        except OSError:
            pass
        _STATE["libs"] = libs
    return _STATE["libs"]


def _check_resolvable(codes: list[bytes]) -> None:
    """UnresolvedSymbol when an ELF object among `codes` refers to a symbol that neither they, the objects loaded
    before, Numba's table nor the process (or libgcc_s) define: LLVM's linker would abort the process on it. Objects
    of other formats are not checked."""
    defined = _STATE.setdefault("llvm_globals", set())
    tables = []
    for code in codes:
        try:
            tables.append(_elf_tables(bytes(code))[1])
        except LoaderError:
            return
    batch = {name for symbols in tables for name, bind, shndx, _, _ in symbols if shndx != _SHN_UNDEF and bind}
    helpers = _helper_symbols()
    libs = _system_libraries()
    for symbols in tables:
        for name, _bind, shndx, _, _ in symbols:
            if shndx == _SHN_UNDEF and name and name not in batch and name not in defined and name not in helpers \
                    and not any(hasattr(lib, name) for lib in libs):
                raise UnresolvedSymbol(f"unresolved symbol {name}")
    defined |= batch


class ElfLinker:
    """Relocatable x86-64 ELF objects (what Numba's JIT emits: the large code model, so absolute 64-bit and 64-bit
    PC-relative relocations) mapped into memory and linked: each object's allocated sections (not .eh_frame: nothing
    here unwinds) laid out in one mapping, or two when one is writable; symbols resolved from the objects loaded so
    far (the first definition of a name wins, as in LLVM's linker for Numba's weak copies of shared helpers), then
    Numba's helpers (_helper_symbols), then the process and libgcc_s (compiler support routines); relocations applied;
    the code mapping made read + execute. An unknown relocation, a 32-bit one out of reach, an unresolved symbol:
    LoaderError (the caller then uses llvmlite). Mappings live as long as the process, like LLVM's."""

    def __init__(self, helpers: dict[str, int]):
        self.helpers = helpers
        self.globals: dict[str, int] = {}
        self.cells: list = []  # (common symbols' storage)
        self.libs = _system_libraries()
        self.libc = self.libs[0]
        self.libc.mmap.restype = ctypes.c_void_p
        self.libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                   ctypes.c_long)
        self.libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)

    @staticmethod
    def usable() -> bool:
        return (sys.platform.startswith("linux") and platform.machine().lower() in ("x86_64", "amd64")
                and os.environ.get("LITE_NUMBA_NATIVE_LOADER", "elf") != "llvm")

    def load(self, objects: list[tuple[bytes, str]]) -> dict[str, int]:
        for code, name in objects:
            if name not in self.globals:
                self._link(bytes(code))
        missing = [name for _, name in objects if name not in self.globals]
        if missing:
            raise LoaderError(f"entry symbols not defined by their objects: {missing}")
        return {name: self.globals[name] for _, name in objects}

    def _map(self, size: int) -> int:
        size = -(-max(size, 1) // 4096) * 4096
        addr = self.libc.mmap(None, size, _PROT_READ | _PROT_WRITE, _MAP_PRIVATE | _MAP_ANONYMOUS, -1, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise LoaderError(f"mmap of {size} bytes failed (errno {ctypes.get_errno()})")
        return addr

    def _resolve(self, name: str, new: dict[str, int]) -> int:
        addr = new.get(name) or self.globals.get(name) or self.helpers.get(name)
        if addr:
            return addr
        for lib in self.libs:
            try:
                return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
            except AttributeError:
                continue
        raise UnresolvedSymbol(f"unresolved symbol {name}")

    def _link(self, data: bytes) -> None:
        if struct.unpack_from("<H", data, 18)[0] != 62:
            raise LoaderError("not an x86-64 object")
        secs, table = _elf_tables(data)
        load = [i for i, s in enumerate(secs) if s[2] & _SHF_ALLOC and s[1] != _SHT_X86_64_UNWIND]
        base: dict[int, int] = {}
        for writable in (False, True):
            part = [i for i in load if bool(secs[i][2] & _SHF_WRITE) == writable]
            if not part:
                continue
            offsets, end = {}, 0
            for i in part:
                align = max(secs[i][8], 1)
                end = -(-end // align) * align
                offsets[i] = end
                end += secs[i][5]
            region = self._map(end)
            for i in part:
                base[i] = region + offsets[i]
                if secs[i][1] != _SHT_NOBITS and secs[i][5]:
                    ctypes.memmove(base[i], data[secs[i][4]:secs[i][4] + secs[i][5]], secs[i][5])
            if not writable:
                code_region, code_size = region, end
        symbols = []
        new: dict[str, int] = {}  # (this object's definitions: joined to self.globals once it is linked)
        for name, bind, shndx, value, size in table:
            if shndx == _SHN_UNDEF:
                symbols.append((name, None))
            elif shndx == _SHN_COMMON:  # zeroed storage shared by name (Numba's environment pointers)
                addr = new.get(name) or self.globals.get(name)
                if addr is None:
                    cell = ctypes.create_string_buffer(max(size, 8) + 64)
                    self.cells.append(cell)
                    addr = new[name] = -(-ctypes.addressof(cell) // 64) * 64
                symbols.append((name, addr))
            elif shndx >= _SHN_LORESERVE:
                if shndx != _SHN_ABS:
                    raise LoaderError(f"symbol {name}: section index {shndx:#x}")
                symbols.append((name, value))
            elif shndx in base:
                addr = base[shndx] + value
                symbols.append((name, addr))
                if bind in (1, 2) and name and name not in self.globals:  # global, weak: the first definition
                    new[name] = addr  # of a name serves every object
            else:
                symbols.append((name, 0))  # (a section not loaded: .eh_frame's own symbols)
        for s in secs:
            if s[1] != _SHT_RELA or s[7] not in base:
                continue
            target = base[s[7]]
            for k in range(s[5] // 24):
                off, info, addend = struct.unpack_from("<QQq", data, s[4] + 24 * k)
                kind, sym = info & 0xFFFFFFFF, info >> 32
                name, addr = symbols[sym] if sym else ("", 0)  # (symbol 0: an absolute addend)
                if addr is None:
                    addr = self._resolve(name, new)
                value, where = addr + addend, target + off
                if kind == _R_64:
                    ctypes.c_uint64.from_address(where).value = value & 0xFFFFFFFFFFFFFFFF
                elif kind == _R_PC64:
                    ctypes.c_int64.from_address(where).value = value - where
                elif kind in (_R_PC32, _R_PLT32, _R_32S, _R_32):
                    v = value - where if kind in (_R_PC32, _R_PLT32) else value
                    lo, hi = (0, 1 << 32) if kind == _R_32 else (-(1 << 31), 1 << 31)
                    if not lo <= v < hi:
                        raise LoaderError(f"relocation {kind} to {name or 'a section'} out of 32-bit reach")
                    ctypes.c_uint32.from_address(where).value = v & 0xFFFFFFFF
                else:
                    raise LoaderError(f"relocation type {kind} not handled")
        if any(not (secs[i][2] & _SHF_WRITE) for i in load) and self.libc.mprotect(
                code_region, -(-code_size // 4096) * 4096, _PROT_READ | _PROT_EXEC) != 0:
            raise LoaderError(f"mprotect failed (errno {ctypes.get_errno()})")
        self.globals.update(new)


def symbol_address(name: str) -> int:
    """The address of a global (function or variable) of the objects loaded so far, else 0."""
    with _LOCK:
        elf = _STATE.get("elf")
        if elf is not None and name in elf.globals:
            return elf.globals[name]
        ee = _STATE.get("engine")
        return ee.get_global_value_address(name) if ee is not None else 0


def python_function(wrapper: str, env_name: str, name: str, keep) -> object:
    """A Python built-in function calling Numba's CPython wrapper `wrapper` (loaded), as Numba's own dispatcher entry
    is made (numba/core/cpu.py: _dynfunc.make_function, the environment pointer set in the global `env_name`): what
    Interpreter.invoke calls, with Numba's argument conversion and exception raising (an exception's pickled
    arguments are read by numba.core.serialize: Numba is imported then, on that error only)."""
    dynfunc = _numba_extension("numba._dynfunc")
    fn, env_at = symbol_address(wrapper), symbol_address(env_name)
    if not fn or not env_at:
        raise LoaderError(f"{wrapper} or {env_name} not loaded")
    env = dynfunc.Environment({"__name__": __name__})
    ctypes.c_void_p.from_address(env_at).value = id(env)
    return dynfunc.make_function(sys.modules[__name__], name, f"compiled wrapper for {name}", fn, env, (env, keep))
