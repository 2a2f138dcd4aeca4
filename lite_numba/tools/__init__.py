"""Tools around the runtime: the `lite-numba` command (`cli`), the benchmark tool (`benchmark`), `inspect`,
and `warmup` (filling the compile caches).

May import every other layer; nothing imports tools except the command-line entry point.
"""
