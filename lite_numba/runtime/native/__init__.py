"""Native images (issue 33): an allocated model's compiled program saved beside the caches and run by a later process
without Numba (`image`).

Part of the runtime: may import what lite_numba/runtime/ may import.
"""
