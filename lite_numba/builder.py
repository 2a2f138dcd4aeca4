"""`ModelBuilder`: write valid .tflite files in code. This is the public name of lite_numba.format.builder, whose
`__all__` it re-exports (ModelBuilder, SubgraphBuilder, builtin_code, options_fields, ...)."""

from .format import builder as _impl
from .format.builder import *  # noqa: F403

__all__ = list(_impl.__all__)
