"""Running a loaded model: op resolution (`resolver`), the graph runtime of one subgraph (`executor`: prepare,
constant folding, arena plan, dynamic nodes, speculation), the generated runner of a segment of static nodes
(`codegen`), the model runtime that owns a model's graph runtimes and called subgraphs (`model_runtime`), load-time
rewrites (`fusion`), the arena planner (`arena`), the compiled per-example loop (`rows`), the runtime's errors
(`errors`) and per-node profiling (`profiling`, `profile_report`).

May import format, jit, the kernel contract (lite_numba.ops), kernels only through kernels/registry.py, and plugins
only to load them. Never imports api, tools or batch.
"""
