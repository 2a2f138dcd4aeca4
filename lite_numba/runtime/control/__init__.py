"""Control flow lowered into the compiled runner of its parent graph, and streaming (issue 38): `state` (what a model
runtime keeps:
how each control-flow node runs and why, the iteration cap and the running-subgraph cell the compiled loops read),
`lowering` (the called subgraphs prepared privately, the node's table, its one scheduled call) and `loop_kernels` (the
compiled WHILE / IF / CALL_ONCE driver calling the subgraphs' runners by native address); `plan_cache` (subgraph 0's
plans per input shapes: a model resized on every call gets its earlier preparation back).

Part of the runtime layer: may import what lite_numba.runtime may.
"""
