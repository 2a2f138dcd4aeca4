"""Custom-op packs shipped with lite-numba (installed as `lite_numba.plugins`); importing registers them."""

from . import examples, flex, mediapipe  # noqa: F401
