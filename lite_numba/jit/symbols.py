"""Stable, unique symbol names for compiled kernels, so that Numba's disk cache can never link the wrong kernel.

Why (numba 0.68: core/funcdesc.py, core/itanium_mangler.py, core/codegen.py): a compiled function's symbol is
`mangle(module + "." + __qualname__, argument types, abi tag "v<uid>")`, where uid is a per-process counter
(`bytecode.FunctionIdentity._unique_ids`). When a caller is compiled, its callees' LLVM modules are linked into it
as `linkonce_odr` (weak) definitions, and the disk cache stores that object code. Loading it into a process that
already defines a symbol of the same name (the JIT engine keeps one definition per name) makes the caller use the
*existing* definition. The pair (qualified name, uid) is only unique within one process, so two different
functions sharing a qualified name - closures of one factory (`make_binary.<locals>.same` for ADD and MUL), or
functions redefined in a loop - can get the same symbol in two processes, and a cached caller (our generated
runner) or a cached kernel then runs the other function's code.

The rule enforced here: every distinct compiled function reachable from a scheduled kernel has a distinct
qualified name that is the same in every process. Module-level functions already have one (module + name resolves
to exactly that function). Every other function (a closure, a function defined in a loop or by exec) gets the
suffix `.k<hash>` where the hash covers what makes it distinct: its module, original qualified name, bytecode and
constants, Numba options, and the values its closure captured (callees by their own stable names). Renaming
happens before the function's first compile; its disk-cache file follows the new name. A function already compiled
under its old name is replaced by an identical copy under the new name. Functions with the same fingerprint are
the same function: the first one is reused (which also avoids compiling one kernel once per node).

`stable_kernel(fn)` is called by `PrepareContext.call` for every scheduled function; it raises `SymbolNameError`
when two different functions would share a name or when a captured value has no stable description.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import types
import weakref
from typing import Any

import numpy as np

__all__ = ["SymbolNameError", "stable_kernel", "fingerprint", "symbol_name"]


class SymbolNameError(RuntimeError):
    """Two different compiled functions would get the same symbol name, or one cannot be named stably."""


_LOCK = threading.RLock()
# original function -> its stable replacement (possibly itself); weak, so closures made per prepare do not pile up
_DONE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_FINGERPRINT: dict[int, str] = {}  # id(stable function) -> fingerprint
_BY_NAME: dict[str, tuple[str, Any]] = {}  # module.qualname -> (fingerprint, function)
_ORIGINAL_QUALNAME = "_lite_numba_qualname"


def _dispatcher_types():
    from numba.core.dispatcher import Dispatcher

    return Dispatcher


def _is_dispatcher(obj) -> bool:
    return isinstance(obj, _dispatcher_types())


def _code_digest(code: types.CodeType, h) -> None:
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    h.update(repr((code.co_argcount, code.co_kwonlyargcount, code.co_flags, code.co_firstlineno)).encode())
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code_digest(c, h)
        else:
            h.update(repr((type(c).__name__, c)).encode())


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _global_names(c)
    return names


def _module_level(py) -> bool:
    """Whether module + qualname resolves to exactly this function (then its name is unique already)."""
    if "<" in py.__qualname__:
        return False
    obj = sys.modules.get(py.__module__)
    for part in py.__qualname__.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return False
    return getattr(obj, "py_func", obj) is py


def _describe(value, depth: int = 0) -> str:
    """A stable text for a captured value; raises SymbolNameError when there is none."""
    if depth > 8:
        raise SymbolNameError("captured values nest too deeply to fingerprint")
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, np.generic, np.dtype)):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        return f"ndarray:{data.dtype.str}:{data.shape}:{hashlib.sha256(data.view(np.uint8)).hexdigest()[:20]}"
    if isinstance(value, (tuple, list, frozenset, set)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return f"{type(value).__name__}(" + ",".join(_describe(v, depth + 1) for v in items) + ")"
    if isinstance(value, dict):
        return "dict(" + ",".join(f"{k!r}:{_describe(v, depth + 1)}" for k, v in sorted(value.items(),
                                                                                   key=lambda kv: repr(kv[0]))) + ")"
    if _is_dispatcher(value) or isinstance(value, types.FunctionType):
        return "fn:" + symbol_name(_stable(value))
    if isinstance(value, type):
        return f"type:{value.__module__}.{value.__qualname__}"
    if isinstance(value, types.ModuleType):
        return f"module:{value.__name__}"
    text = repr(value)
    if " at 0x" in text or " object at " in text:
        raise SymbolNameError(f"captured value {text[:120]} has no stable description")
    try:  # numba types and other value-like objects: their repr is their identity
        from numba.core import types as nbtypes

        if isinstance(value, nbtypes.Type):
            return f"nbtype:{value}"
    except ImportError:  # pragma: no cover
        pass
    return f"{type(value).__module__}.{type(value).__qualname__}:{text}"


def symbol_name(fn) -> str:
    """module.qualname as Numba will use it for fn's symbols."""
    py = getattr(fn, "py_func", fn)
    return f"{py.__module__}.{py.__qualname__}"


def fingerprint(fn) -> str:
    """What makes fn's compiled code what it is: name, bytecode, options, captured values and callees' names."""
    fn = stable_kernel(fn)
    return _FINGERPRINT.get(id(fn)) or _fingerprint_of(fn)


def _fingerprint_of(fn) -> str:
    py = getattr(fn, "py_func", fn)
    h = hashlib.sha256()
    _code_digest(py.__code__, h)
    parts = [f"{py.__module__}.{getattr(py, _ORIGINAL_QUALNAME, py.__qualname__)}", h.hexdigest()[:24]]
    if _is_dispatcher(fn):
        parts.append(_describe(dict(fn.targetoptions)))
        parts.append(_describe({str(k): str(v) for k, v in (fn.locals or {}).items()}))
    if py.__defaults__:
        parts.append("defaults=" + _describe(py.__defaults__))
    if py.__closure__:
        parts.append("cells=" + ",".join(_describe(c.cell_contents) for c in py.__closure__))
    callees = []
    for name in sorted(_global_names(py.__code__)):
        value = py.__globals__.get(name)
        if _is_dispatcher(value) or (isinstance(value, types.FunctionType) and not _module_level(value)):
            callees.append(f"{name}={_describe(value)}")
    if callees:
        parts.append("globals=" + ",".join(callees))
    return "|".join(parts)


def stable_kernel(fn):
    """The function to schedule instead of `fn`: fn itself, renamed to its stable name if it needed one and was not
    compiled yet, or an identical copy under the stable name. Non-functions are returned unchanged."""
    if not (_is_dispatcher(fn) or isinstance(fn, types.FunctionType)):
        return fn
    done = _DONE.get(fn)
    if done is not None:
        return done
    with _LOCK:
        return _stable(fn)


_IN_PROGRESS: set[int] = set()


def _stable(fn):
    done = _DONE.get(fn)
    if done is not None:
        return done
    if id(fn) in _IN_PROGRESS:  # a function reaching itself (recursion through a cell or global)
        return fn
    _IN_PROGRESS.add(id(fn))
    try:
        result = _make_stable(fn)
    finally:
        _IN_PROGRESS.discard(id(fn))
    _DONE[fn] = result
    _DONE[result] = result
    return result


def _make_stable(fn):
    is_disp = _is_dispatcher(fn)
    py = fn.py_func if is_disp else fn
    # callees first: captured in cells or referenced as globals
    new_cells = None
    if py.__closure__:
        values = []
        for cell in py.__closure__:
            try:
                v = cell.cell_contents
            except ValueError:  # an empty cell (not assigned yet)
                values.append(cell)
                continue
            s = _stable(v) if (_is_dispatcher(v) or isinstance(v, types.FunctionType)) else v
            values.append(s)
            if s is not v:
                new_cells = True
        if new_cells:
            new_cells = tuple(v if isinstance(v, types.CellType) else types.CellType(v) for v in values)
    new_globals = None
    for name in _global_names(py.__code__):
        v = py.__globals__.get(name)
        if _is_dispatcher(v) or isinstance(v, types.FunctionType):
            s = _stable(v)
            if s is not v:
                if new_globals is None:
                    new_globals = dict(py.__globals__)
                new_globals[name] = s

    named = _module_level(py) or hasattr(py, _ORIGINAL_QUALNAME)
    if named and new_cells is None and new_globals is None:
        fp = _fingerprint_of(fn)
        return _register(fn, fp)
    if new_cells is not None or new_globals is not None or (is_disp and fn.overloads):
        fn = _copy(fn, new_cells, new_globals)  # already compiled under its old name, or its callees changed
        py = fn.py_func if is_disp else fn
    if not hasattr(py, _ORIGINAL_QUALNAME):
        setattr(py, _ORIGINAL_QUALNAME, py.__qualname__)
    fp = _fingerprint_of(fn)
    tag = hashlib.sha256(fp.encode()).hexdigest()[:12]
    py.__qualname__ = f"{getattr(py, _ORIGINAL_QUALNAME)}.k{tag}"
    existing = _BY_NAME.get(symbol_name(fn))
    if existing is not None and existing[0] == fp:
        return existing[1]  # the same function made again (a factory called twice): reuse the first
    if is_disp and fn._cache.__class__.__name__ != "NullCache":
        from numba.core.caching import FunctionCache

        fn._cache = FunctionCache(py)  # the cache file follows the stable name (old entries carry old names)
    return _register(fn, fp)


def _register(fn, fp: str):
    name = symbol_name(fn)
    existing = _BY_NAME.get(name)
    if existing is not None and existing[0] != fp and existing[1] is not fn:
        raise SymbolNameError(
            f"two different compiled functions would share the symbol name {name!r}:\n  {existing[0][:300]}\n"
            f"  {fp[:300]}\nGive one of them another name (Numba's disk cache would link the wrong one).")
    if existing is None:
        _BY_NAME[name] = (fp, fn)
    _FINGERPRINT[id(fn)] = fp
    if _is_dispatcher(fn):
        _set_uuid(fn, hashlib.sha256(fp.encode()).hexdigest()[:24])
    return fn


def _copy(fn, cells, new_globals):
    """An uncompiled copy of fn (a dispatcher or plain function) with other cells and/or globals."""
    py = fn.py_func if _is_dispatcher(fn) else fn
    new = types.FunctionType(py.__code__, new_globals if new_globals is not None else py.__globals__, py.__name__,
                             py.__defaults__, cells if cells is not None else py.__closure__)
    new.__kwdefaults__ = py.__kwdefaults__
    new.__module__ = py.__module__
    new.__doc__ = py.__doc__
    new.__qualname__ = getattr(py, _ORIGINAL_QUALNAME, py.__qualname__)
    setattr(new, _ORIGINAL_QUALNAME, new.__qualname__)
    if not _is_dispatcher(fn):
        return new
    disp = type(fn)(py_func=new, locals=dict(fn.locals or {}), targetoptions=dict(fn.targetoptions))
    if fn._cache.__class__.__name__ != "NullCache":
        disp.enable_caching()
    return disp


def _set_uuid(disp, tag: str) -> None:
    """A dispatcher pickles with a uuid, and Numba's disk-cache key of a closure is the pickle of its cells: a
    stable uuid lets closures that capture this dispatcher hit the disk cache in the next process."""
    try:
        if disp._MemoMixin__uuid is None:
            disp._set_uuid(f"lite-numba-{tag}")
    except AttributeError:  # pragma: no cover - a private API of numba; without it closures just recompile
        pass
