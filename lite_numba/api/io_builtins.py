"""When an Interpreter's set_tensor / get_tensor become built-ins (api/fast_io.py, which imports Numba's extension API).

An Interpreter made before Numba is loaded (`Interpreter()` does not load it; a process running native images never
does: lite_numba/runtime/native) keeps the Python methods until an allocation has loaded Numba, and gets the built-ins
then. fast_io's compiled entry joins the first batch of kernels that allocation compiles (jit.compiler.ALONG_LATER:
beside them on a cold cache), so it is in the disk cache when the built-ins are made.
"""

from __future__ import annotations

import sys

from ..jit import compiler


def install_when_loaded(interp, base, views: dict, slot: list) -> bool:
    """Give `interp` the built-ins when Numba is loaded (True), else register fast_io's entry for the next batch of
    kernels and leave the Python methods (False): the Interpreter asks again after each allocation."""
    if "numba" not in sys.modules:
        if _wanted not in compiler.ALONG_LATER:
            compiler.ALONG_LATER.append(_wanted)
        return False
    from .fast_io import install  # lazy: imports Numba's extension API

    install(interp, base, views, slot)
    return True


def _wanted() -> None:
    from .fast_io import register_along  # lazy: run while a batch compiles (Numba is loaded)

    register_along()
