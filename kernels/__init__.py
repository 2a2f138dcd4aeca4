"""Builtin kernels of lite-numba, one module per op family; registry.py is the table of what is registered.

Installed as `lite_numba.kernels` (see pyproject.toml `package-dir`)."""
