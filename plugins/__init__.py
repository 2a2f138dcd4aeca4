"""Custom-op packs shipped with lite-numba (installed as `lite_numba.plugins`); importing registers them."""

from . import examples  # noqa: F401
from . import mediapipe  # noqa: F401
