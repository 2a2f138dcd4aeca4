"""Compile-time changes to Numba that leave the compiled code as it was (issue 16: cold start).

Inlining copies a scope once per block. Numba inlines a function marked `inline="always"` (80 of our helpers, and
the helpers they call) by deep-copying the callee's IR block by block, each block in a `copy.deepcopy` call of
its own. Every variable holds a reference to the function's scope, and the scope holds every variable, so every block
copies the whole scope again: the cost is blocks x variables per inlined call (393,000 `Var` copies for
small_cnn_f32's kernels, the largest single item of a cold compile's CPU time after LLVM).

`apply` makes the blocks copied within one `InlineWorker.inline_ir` call share one copy of each scope, the state a
function's IR has when Numba builds it (all its blocks share one scope). Inlining then renames the callee's variables
in that scope and moves the blocks into the caller's scope, exactly as before; the copies differ only in how many
scope objects hold the same contents.

Error texts without a terminal round trip. Compiling raises and catches thousands of typing errors while Numba tries
overload templates (14,000 for MobileNetV2 int8's kernels). When colorama is installed (many environments pull it
in), Numba marks up each of their messages inside colorama's init()/deinit(), which re-wraps sys.stdout and
sys.stderr every time: 3.5 % of a cold compile's profile. With Numba's default colour scheme ("no_color") that
markup only adds a bold escape code, so `apply` gives Numba a scheme that returns the text as it is (the same
text Numba shows when colorama is absent or NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING is set).

Loaded object code kept. Numba's object-cache hook hands a cached function's machine code to LLVM and forgets it;
`apply` keeps it on the library first (jit/native_loader.capture), so a process can save what it loaded as a native
image (lite_numba/runtime/native/image.py). The code is unchanged.

LITE_NUMBA_FAST_INLINE=0 leaves Numba as it is (both changes off), for comparing compile times. `apply` also installs
lite_numba.jit.fast_reshape, which does change the compiled code (a faster reshape, the same views) and so is on
in every process whatever that variable says."""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import os
import sys
import threading

from . import fast_reshape, native_loader

_APPLIED = False
_RESHAPE = False
_local = threading.local()


def _scope_deepcopy(self, memo):
    """ir.Scope.__deepcopy__: the default deep copy, except that inside inline_ir a scope is copied once."""
    caches = getattr(_local, "caches", None)
    cache = caches[-1] if caches else None
    if cache is not None:
        hit = cache.get(id(self))
        if hit is not None and hit[0] is self:
            memo[id(self)] = hit[1]
            return hit[1]
    new = self.__class__.__new__(self.__class__)
    memo[id(self)] = new
    for k, v in self.__dict__.items():
        setattr(new, k, copy.deepcopy(v, memo))
    if cache is not None:
        cache[id(self)] = (self, new)  # the original is kept alive with its copy, so its id is not reused
    return new


def apply() -> None:
    """Install both changes, once per process (called right after Numba's import). The inlining change waits for
    Numba's inliner module, which a process that only loads cached code never imports (47 ms)."""
    global _APPLIED, _RESHAPE
    if not _RESHAPE:  # not a compile-time change (fast_reshape): on whatever LITE_NUMBA_FAST_INLINE says
        _RESHAPE = True
        _keep_object_code()  # (the same: loaded object code kept for native images)
        if "numba.np.arrayobj" in sys.modules:
            fast_reshape.apply()
        else:
            sys.meta_path.insert(0, AfterImport("numba.np.arrayobj", fast_reshape.apply))
    if _APPLIED or os.environ.get("LITE_NUMBA_FAST_INLINE", "1") == "0":
        return
    _APPLIED = True
    _plain_error_text()
    if "numba.core.inline_closurecall" in sys.modules:
        _patch_inlining()
    else:
        sys.meta_path.insert(0, AfterImport("numba.core.inline_closurecall", _patch_inlining))


def _keep_object_code() -> None:
    """Numba's object-cache hook gives a cached function's object code to LLVM and drops it; keep it on the library
    first (native_loader.capture), so this process can write a native image of what it loaded."""
    from numba.core import codegen  # lazy: Numba is imported (apply runs after its import)

    cls = codegen.CPUCodeLibrary
    original = cls._object_getbuffer_hook.__func__

    def getbuffer(klass, ll_module):
        library = getattr(ll_module, "_CPUCodeLibrary__library", None)
        if library is not None:
            native_loader.capture(library)
        return original(klass, ll_module)

    cls._object_getbuffer_hook = classmethod(getbuffer)


class AfterImport:
    """A meta path finder that runs `then()` right after module `name` has run (found by the normal finders); used
    here for Numba's inliner and by numba_cache for Numba itself."""

    def __init__(self, name: str, then):
        self.name, self.then = name, then

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)  # once: the real finders locate the module
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run, then = loader.exec_module, self.then

        def exec_module(module):
            run(module)
            then()

        loader.exec_module = exec_module
        return spec


def _patch_inlining() -> None:
    from numba.core import inline_closurecall, ir  # lazy: Numba

    if "__deepcopy__" in vars(ir.Scope) or not hasattr(inline_closurecall.InlineWorker, "inline_ir"):
        return  # a Numba that copies scopes its own way: leave it alone
    inline_ir = inline_closurecall.InlineWorker.inline_ir

    def shared_scope_inline_ir(self, *args, **kwargs):
        caches = getattr(_local, "caches", None)
        if caches is None:
            caches = _local.caches = []
        caches.append({})
        try:
            return inline_ir(self, *args, **kwargs)
        finally:
            caches.pop()

    shared_scope_inline_ir.__wrapped__ = inline_ir
    ir.Scope.__deepcopy__ = _scope_deepcopy
    inline_closurecall.InlineWorker.inline_ir = shared_scope_inline_ir


class _PlainText:
    """Numba's colour-scheme interface, returning every text unchanged."""

    def code(self, msg):
        return msg

    errmsg = filename = indicate = highlight = reset = code


def _plain_error_text() -> None:
    from numba.core import config, errors  # lazy: Numba

    if getattr(config, "COLOR_SCHEME", None) == "no_color" and hasattr(errors, "_termcolor_inst"):
        errors._termcolor_inst = _PlainText()  # (Numba's import made its own already: termcolor() returns ours now)
