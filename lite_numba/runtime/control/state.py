"""What a ModelRuntime keeps for control flow lowered into compiled runners (lite_numba.runtime.control.lowering):
which path each control-flow node takes and why (`paths`, printed by `lite-numba inspect`), the WHILE iteration cap as
an int64 the compiled loops read at every run, and the cell where they note the subgraph they run (so an error a
kernel raises inside names that subgraph). Light: numpy only (lowering, which compiles, is imported on first use)."""

from __future__ import annotations

import numpy as np

__all__ = ["ControlState", "NO_LIMIT"]

NO_LIMIT = (1 << 63) - 1  # the cap's value when there is none


class ControlState:
    def __init__(self):
        self.limit = np.full(1, NO_LIMIT, np.int64)
        self.running = np.full(1, -1, np.int64)
        # (subgraph, node) -> ("compiled" | "host", why); private copies of a subgraph share their entries
        self.paths: dict[tuple[int, int], tuple[str, str]] = {}

    @property
    def max_while_iterations(self) -> int | None:
        n = int(self.limit[0])
        return None if n == NO_LIMIT else n

    @max_while_iterations.setter
    def max_while_iterations(self, n: int | None) -> None:
        self.limit[0] = NO_LIMIT if n is None else int(n)

    @property
    def lowered(self) -> bool:
        """Whether a node runs compiled subgraphs of its own (their arenas are per runtime: no sharing with a clone)."""
        return any(path == "compiled" for path, _ in self.paths.values())

    def lower(self, owner, ctx, parent, host_reason: str | None) -> bool:
        """PrepareContext.lower_control_flow (owner: the ModelRuntime, parent: the node's GraphRuntime)."""
        if host_reason is not None:
            self.paths[(parent.subgraph_index, ctx.node.index)] = ("host", host_reason)
            return False
        from . import lowering  # lazy: compiles the control-flow kernel, needed only by models with control flow

        return lowering.lower(owner, self, ctx, parent)

    def trace(self, cond: int, body: int, first: list, steps: list):
        """PrepareContext.while_trace (lowering.while_trace)."""
        from . import lowering  # lazy: as in lower

        return lowering.while_trace(self, cond, body, first, steps)

    def failed_subgraph(self, index: int) -> int:
        """The subgraph whose kernel raised when a graph's invoke failed: the one lowered control flow was running,
        else `index`. Clears the note."""
        where = int(self.running[0])
        self.running[0] = -1
        return where if where >= 0 else index

    @staticmethod
    def call_once_flag(resources: dict, index: int) -> np.ndarray:
        """CALL_ONCE's flag for init subgraph `index` (int64, 1 once it ran), pinned in the resources."""
        return resources.setdefault("call_once_flags", {}).setdefault(index, np.zeros(1, np.int64))
