"""The official module's names (`ai_edge_litert.environment`): Environment, EnvironmentOptions. The implementation
lives in lite_numba.api.litert_options."""

from .api.litert_options import Environment, EnvironmentOptions

__all__ = ["Environment", "EnvironmentOptions"]

for _cls in (Environment, EnvironmentOptions):
    _cls.__module__ = __name__
del _cls
