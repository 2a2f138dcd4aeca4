"""set_tensor and get_tensor as built-in functions: the common case in native code, no Python frame (issue 38).

A streaming model's frame is `set_tensor`, `invoke`, `get_tensor`; with a model of a few microseconds the two copies
around the invoke cost as much as the model when they run as Python methods (~1.3 and ~0.8 us from cold caches,
against the official pybind11 functions' ~0.6). `install(interp)` gives an Interpreter its own `set_tensor` and
`get_tensor`: CPython built-in functions (a PyMethodDef made with ctypes, `PyCFunction_NewEx`) whose C function is
the C wrapper Numba compiles beside every overload of `_entry` (cached on disk like the runners). The common case
is done there through the C API and numpy's object layout:

- set_tensor(i, value): `i` an exact int, `value` an exact, C-contiguous ndarray of the very dtype object and shape of
  the planned tensor's view (the runtime's `fast_views` dict, looked up with PyDict_GetItem), no other thread
  inside the Interpreter: memmove into the view.
- get_tensor(i): `i` an exact int naming a view of `fast_views`: a new array from PyArray_Empty and a memmove
  (PyArray_NewCopy for a dtype outside the table or no elements).

Everything else (another dtype or shape, a non-contiguous or subclassed array, a list, a numpy integer index, a
subgraph index, keywords, a busy Interpreter, a tensor with no planned view) calls the Python method, which raises
the official errors or converts, so the results and errors are the methods' own. The layout read (PyObject header,
tuple and list sizes, numpy's PyArrayObject fields) is checked against live objects before anything is installed,
and nothing is installed on a free-threaded Python, where the GIL does not make the checks and the copy atomic, or
for a subclass that overrides either method. `LITE_NUMBA_FAST_IO=0` turns it off. When `_entry` is missing
from the disk cache it is compiled with the next batch of kernels (jit.compiler.COMPILE_ALONG: beside them on a cold
cache): the Interpreters made before that use the Python methods.
"""

from __future__ import annotations

import ctypes
import os
import sysconfig
import weakref

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core.errors import TypingError
from numba.extending import intrinsic

from ..jit.compiler import COMPILE_ALONG, compiled_overload, in_disk_cache
from ..jit.native_call import load_at as _ld
from ..jit.native_call import word_at as _at

_DTYPES = (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.float16,
           np.float32, np.float64, np.complex64, np.complex128)


@intrinsic
def _ccall(typingctx, fn, a, b, c, d):
    """Call the C function at address `fn` with four integer (or pointer) arguments; its integer result. A function
    of fewer arguments ignores the extra ones (every C calling convention we run on passes the first four in
    registers); one returning void gives an unused value."""
    if not all(isinstance(t, types.Integer) for t in (fn, a, b, c, d)):
        raise TypingError("_ccall: integer address and arguments")

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        f = builder.inttoptr(args[0], ir.FunctionType(i64, [i64] * 4).as_pointer())
        return builder.call(f, [context.cast(builder, v, t, types.int64) for v, t in zip(args[1:], sig.args[1:])])

    return types.int64(fn, a, b, c, d), codegen


# The table (int64), item 0 of the function's `self` tuple: objects' and C functions' addresses, then (dtype object,
# itemsize) pairs
VIEWS, SLOT, INT_TYPE, ARRAY_TYPE, DICT_GET, MEMMOVE, INCREF, NONE, CALL, NEW_COPY, EMPTY, N_DTYPES = range(12)
# PyObject / tuple / list / PyArrayObject offsets (checked by _layout_ok). The helpers below are inlined into _entry
# (one function to compile)
TYPE, SIZE, ITEMS, DATA, NDIM, DIMS, DESCR, FLAGS = 8, 16, 24, 16, 24, 32, 56, 64


@njit(inline="always")
def _nbytes(t, arr):
    """Bytes of a C-contiguous array of one of the table's dtype objects (0 for another dtype, or no elements)."""
    descr, size = _ld(arr + DESCR, np.int64), 0
    for k in range(_at(t, N_DTYPES)):
        if _at(t, N_DTYPES + 1 + 2 * k) == descr:
            size = _at(t, N_DTYPES + 2 + 2 * k)
    if (_ld(arr + FLAGS, np.int32) & 1) == 0:
        return 0
    dims = _ld(arr + DIMS, np.int64)
    for d in range(_ld(arr + NDIM, np.int32)):
        size *= _ld(dims + 8 * d, np.int64)
    return size


@njit(inline="always")
def _same_layout(t, val, view):
    """Whether `val` (any object) is an exact ndarray of the dtype object and shape of `view` (an exact ndarray)."""
    if _ld(val + TYPE, np.int64) != _at(t, ARRAY_TYPE):
        return False
    nd = _ld(view + NDIM, np.int32)
    if _ld(val + DESCR, np.int64) != _ld(view + DESCR, np.int64) or _ld(val + NDIM, np.int32) != nd:
        return False
    dv, dw = _ld(val + DIMS, np.int64), _ld(view + DIMS, np.int64)
    for d in range(nd):
        if _ld(dv + 8 * d, np.int64) != _ld(dw + 8 * d, np.int64):
            return False
    return True


@njit(inline="always")
def _copy(t, view):
    """A new C-contiguous ndarray equal to `view` (an exact ndarray)."""
    size = _nbytes(t, view)
    if size == 0:
        return _ccall(_at(t, NEW_COPY), view, 0, 0, 0)  # PyArray_NewCopy(view, NPY_CORDER)
    descr = _ld(view + DESCR, np.int64)
    _ccall(_at(t, INCREF), descr, 0, 0, 0)  # (PyArray_Empty steals it)
    new = _ccall(_at(t, EMPTY), _ld(view + NDIM, np.int32), _ld(view + DIMS, np.int64), descr, 0)
    if new != 0:
        _ccall(_at(t, MEMMOVE), _ld(new + DATA, np.int64), _ld(view + DATA, np.int64), size, 0)
    return new


@njit(cache=True)
def _entry(me, args, kwargs):
    """The C function of both built-ins (METH_VARARGS | METH_KEYWORDS): `me` the tuple (table, mode, fallback, ...),
    mode None for get_tensor; the fallback is the Python method, called with the same arguments."""
    t = _ld(_ld(me + ITEMS, np.int64) + DATA, np.int64)
    get = _ld(me + ITEMS + 8, np.int64) == _at(t, NONE)
    if (kwargs == 0 and _ld(args + SIZE, np.int64) == (1 if get else 2) and _ld(_at(t, SLOT) + SIZE, np.int64) != 0
            and _ld(_ld(args + ITEMS, np.int64) + TYPE, np.int64) == _at(t, INT_TYPE)):
        view = _ccall(_at(t, DICT_GET), _at(t, VIEWS), _ld(args + ITEMS, np.int64), 0, 0)  # (borrowed)
        if view != 0 and _ld(view + TYPE, np.int64) == _at(t, ARRAY_TYPE):
            if get:
                return _copy(t, view)
            val = _ld(args + ITEMS + 8, np.int64)  # (any object: its type is checked before any other field)
            size = _nbytes(t, val) if _same_layout(t, val, view) else 0
            if size > 0 and (_ld(view + FLAGS, np.int32) & 1) != 0:  # (same dtype and shape: same bytes if contiguous)
                _ccall(_at(t, MEMMOVE), _ld(view + DATA, np.int64), _ld(val + DATA, np.int64), size, 0)
                _ccall(_at(t, INCREF), _at(t, NONE), 0, 0, 0)
                return _at(t, NONE)
    return _ccall(_at(t, CALL), _ld(me + ITEMS + 16, np.int64), args, kwargs, 0)


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p), ("ml_flags", ctypes.c_int),
                ("ml_doc", ctypes.c_char_p)]


_STATE: dict = {}  # the table's process-wide part and the C function's address, made once


def _address(name: str) -> int:
    return ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value


def _i64(addr: int, off: int) -> int:
    return ctypes.c_int64.from_address(addr + off).value


def _numpy_api(k: int) -> int:
    """Entry k of numpy's C API table (85: PyArray_NewCopy, 184: PyArray_Empty; the indices are numpy's ABI, the
    same in 1.x and 2.x)."""
    try:
        from numpy._core import _multiarray_umath as m  # lazy: numpy 2's place
    except ImportError:
        from numpy.core import multiarray as m  # lazy: numpy 1's
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return _i64(get(m._ARRAY_API, None), 8 * k)


def _layout_ok() -> bool:
    """Whether the objects are laid out as `_entry` reads them (CPython's with the GIL, numpy 1.x / 2.x)."""
    a = np.zeros((2, 3), np.float32)[:, :2]
    t, lst = (a, 7), [None, None, None]
    i32 = lambda addr, off: ctypes.c_int32.from_address(addr + off).value  # noqa: E731
    return (_i64(id(a), TYPE) == id(np.ndarray) and _i64(id(t), SIZE) == 2 and _i64(id(t), ITEMS + 8) == id(7)
            and _i64(id(lst), SIZE) == 3 and _i64(id(a), DATA) == a.ctypes.data and i32(id(a), NDIM) == 2
            and [_i64(_i64(id(a), DIMS), 8 * k) for k in range(2)] == [2, 2] and _i64(id(a), DESCR) == id(a.dtype)
            and i32(id(a), FLAGS) & 1 == 0 and i32(id(a.base), FLAGS) & 1 == 1)


def _numpy_ok(new_copy: int, empty: int) -> bool:
    """Whether numpy's API table has PyArray_NewCopy and PyArray_Empty where `_entry` calls them."""
    a = np.arange(6, dtype=np.int16).reshape(2, 3)[:, ::2]
    c = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object, ctypes.c_int)(new_copy)(a, 0)
    dims, dt = np.array([2, 3], np.intp), np.dtype(np.int16)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(dt))  # (stolen)
    e = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_int, ctypes.c_void_p, ctypes.py_object, ctypes.c_int)(empty)(
        2, dims.ctypes.data, dt, 0)
    return (type(c) is np.ndarray and c.flags.c_contiguous and np.array_equal(c, a) and type(e) is np.ndarray
            and e.shape == (2, 3) and e.dtype == dt and e.flags.c_contiguous)


SIG = (types.int64, types.int64, types.int64)


def _process_state(compile_now: bool = False) -> dict | None:
    """The process-wide part (None when the built-ins cannot be used here). `_entry` missing from the disk cache
    is not compiled here unless `compile_now` (~1 s): it joins the next batch of kernels compiled or loaded (the
    first allocation, jit.compiler.COMPILE_ALONG), and the Interpreters made after it get the built-ins."""
    if "ok" not in _STATE:
        _STATE["ok"] = (os.environ.get("LITE_NUMBA_FAST_IO", "1") != "0"
                        and not sysconfig.get_config_var("Py_GIL_DISABLED") and _layout_ok()
                        and _numpy_ok(_numpy_api(85), _numpy_api(184)))
        if _STATE["ok"] and (_entry, SIG) not in COMPILE_ALONG:
            COMPILE_ALONG.append((_entry, SIG))
    if _STATE["ok"] and "fn" not in _STATE and (compile_now or SIG in _entry.overloads or in_disk_cache(_entry, SIG)):
        cres = compiled_overload(_entry, SIG)
        _STATE["fn"] = cres.library.get_pointer_to_function(cres.fndesc.llvm_cfunc_wrapper_name)
        _STATE["head"] = [id(int), id(np.ndarray), _address("PyDict_GetItem"),
                          ctypes.cast(ctypes.memmove, ctypes.c_void_p).value, _address("Py_IncRef"), id(None),
                          _address("PyObject_Call"), _numpy_api(85), _numpy_api(184), len(_DTYPES)]
        _STATE["head"] += [v for d in _DTYPES for v in (id(np.dtype(d)), np.dtype(d).itemsize)]
    return _STATE if _STATE["ok"] and "fn" in _STATE else None


def register_along() -> None:
    """Put `_entry` in the batch of kernels being compiled when it is missing from the disk cache (io_builtins)."""
    _process_state()


_new_function = ctypes.pythonapi.PyCFunction_NewEx
_new_function.restype = ctypes.py_object
_new_function.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p]


def _slow(base, name: str, ref):
    """The Python method (looked up at each call) on the Interpreter `ref` names."""
    def call(*args, **kwargs):
        interp = ref()
        if interp is None:
            raise RuntimeError(f"{name}: the Interpreter it belongs to was deleted")
        return getattr(base, name)(interp, *args, **kwargs)
    return call


def prepare() -> bool:
    """Compile `_entry` now if it is not (the built-ins for every Interpreter made after); False where they cannot be
    used."""
    return _process_state(compile_now=True) is not None


def install(interp, base, views: dict, slot: list) -> None:
    """Put the built-in set_tensor / get_tensor in `interp`'s attributes (when `base`'s methods are its class's and
    the layout is as expected): `views` its runtime's io_views, `slot` its one-thread-at-a-time list (empty while a
    thread is inside). The built-ins hold the Interpreter only weakly (no reference cycle)."""
    cls = type(interp)
    if cls.set_tensor is not base.set_tensor or cls.get_tensor is not base.get_tensor:
        return
    st = _process_state()
    if st is None:
        return
    table = np.array([id(views), id(slot)] + st["head"], np.int64)
    ref = weakref.ref(interp)
    for name, mode in (("set_tensor", 0), ("get_tensor", None)):
        mdef = _MethodDef(name.encode(), st["fn"], 0x0003, (getattr(base, name).__doc__ or "").encode())
        fallback = _slow(base, name, ref)
        me = (table, mode, fallback, mdef, views, slot)  # (keeps alive what the table points to)
        setattr(interp, name, _new_function(ctypes.addressof(mdef), me, None))
