"""Compiling with Numba: compiling and caching kernels and generated runners on disk (`compiler`, `numba_cache`,
`numba_speedups`), calling kernels by native address (`native_call`) and the stable symbol names that keep Numba's
disk cache correct (`symbols`).

Knows no graph, op or interpreter: it compiles what it is handed. Imports only lite_numba.version and itself.
"""
