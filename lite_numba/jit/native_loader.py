"""Machine code Numba compiled, loaded and called without importing Numba (issue 33: a warm process that only runs
already-compiled models).

Numba's compiled functions are ELF objects (the machine code its disk cache stores) that refer to a few symbols of
their own besides the C library and the Python C API: the NRT (`NRT_*`, Numba's reference-counted allocations) and
the helpers of `numba._helperlib` / `numba._dynfunc` (`numba_*`, called by the Python wrappers), `_Py_NoneStruct`,
`PyExc_*`, and lite-numba's team limit (jit/team.py). Those helpers are C extension modules; their module init needs
numpy only, so they are loaded here by file from Numba's installed package without running `numba/__init__.py`
(registered in `sys.modules` under their own names: a later `import numba` uses the very same modules, and so the
same allocator). The objects are added to one llvmlite MCJIT engine of this module (LLVM links them in memory,
resolving every symbol as Numba's own loading does: the same registrations, `ll.add_symbol`), so loading needs
llvmlite's shared library but neither Numba's Python package nor its compiler (import ~0.02 s against Numba's
~0.13-0.3 s, and no typing or lowering machinery in memory).

`capture(library)` (installed where Numba is configured, jit/numba_speedups.py) keeps the object code of every
function Numba loads from its disk cache, which Numba's own object-cache hook hands to LLVM and forgets, so that a
process with Numba can write what it loaded into a native image (runtime/native/image.py).
"""

from __future__ import annotations

import builtins
import ctypes
import importlib.machinery
import importlib.util
import sys
import threading

from .team import register_team_limit

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


def _engine():
    """The process's MCJIT engine for native images, made once with every symbol Numba's code may refer to."""
    ee = _STATE.get("engine")
    if ee is not None:
        return ee
    import llvmlite.binding as ll  # lazy: only a process that loads a native image needs LLVM

    helper, dynfunc, nrt = (_numba_extension(n) for n in _EXTENSIONS)
    if "numba.core.runtime.nrt" not in sys.modules:  # (what numba/core/runtime/nrt.py does at import)
        nrt.memsys_use_cpython_allocator()
    ll.initialize_native_target()
    ll.initialize_native_asmprinter()
    ll.add_symbol("_Py_NoneStruct", id(None))
    for table in (helper.c_helpers, dynfunc.c_helpers):
        for name, address in table.items():
            ll.add_symbol("numba_" + name, address)
    for obj in vars(builtins).values():
        if isinstance(obj, type) and issubclass(obj, BaseException):
            ll.add_symbol(f"PyExc_{obj.__name__}", id(obj))
    for name, address in nrt.c_helpers.items():
        ll.add_symbol(name if name.startswith("_") else "NRT_" + name, address)
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
    of one signature, lite_numba.jit.symbols) and return {entry symbol: address}. LoaderError when it cannot be."""
    with _LOCK:
        try:
            ee = _engine()
            defined = _STATE["defined"]
            import llvmlite.binding as ll  # lazy: imported by _engine

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
