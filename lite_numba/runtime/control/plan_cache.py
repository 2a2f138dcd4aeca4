"""Plans of subgraph 0 kept per input shapes, so a streaming pipeline that resizes a model's input on every call
(`resize_tensor_input` + `allocate_tensors` with a frame of another length) gets the preparation it had for that
shape back instead of preparing every node again (issue 38: ~0.9 ms of Python for a 3-node feature model; the
official runtime re-plans in C++).

A plan is the GraphRuntime's state right after `allocate()` (its attributes, the per-node preparations, every
tensor's shape and folded data, the arena and its views, the compiled segments), kept only when it is compiled
segments alone (no dynamic node, no speculation: nothing of it changes while it runs). Restoring puts that state
back into the same GraphRuntime object (the Interpreter holds its bound invoke and its `fast_views` dict), exactly
as the allocate that made it left it; the caller then resets the variable tensors as after any allocation. The key
is the input shapes and the inputs the graph may update in place; plans are kept only while $LITE_NUMBA_EXECUTOR
is what it was when the runtime was made (restore reads no environment: ~2 us of a small model's 7). Anything else
that re-prepares a graph (ModelRuntime.invalidate, release) drops the plans."""

from __future__ import annotations

from collections import OrderedDict

from ..codegen import executor_mode

__all__ = ["PlanCache"]


class PlanCache:
    MAX_PLANS = 8
    MAX_BYTES = 64 << 20

    def __init__(self):
        self.plans: OrderedDict[tuple, tuple] = OrderedDict()
        self.mode = executor_mode()  # plans are kept for the executor mode of the runtime's creation only

    @staticmethod
    def _key(rt) -> tuple:
        return tuple(rt.tensors[i].shape for i in rt.plan.inputs), rt.writable_inputs

    def clear(self) -> None:
        self.plans.clear()

    def save(self, rt) -> None:
        """Keep rt's plan (just allocated) when it is compiled segments only."""
        if (not rt.ready or rt.dynamic_nodes or not rt.plain_program() or rt.speculation_allowed or rt.specialised
                or executor_mode() != self.mode):
            return
        state = dict(vars(rt))
        prepared = list(state.pop("prepared"))  # (mutated in place by the next allocate)
        fast = dict(state.pop("fast_views"))  # (the live dict object stays the runtime's)
        key = self._key(rt)
        self.plans[key] = (state, prepared, fast, [(t.shape, t.data) for t in rt.tensors])
        self.plans.move_to_end(key)
        while len(self.plans) > self.MAX_PLANS or (len(self.plans) > 1 and sum(
                p[0]["arena"].nbytes for p in self.plans.values()) > self.MAX_BYTES):
            self.plans.popitem(last=False)

    def restore(self, rt) -> bool:
        """Put back the plan rt had for its current input shapes (True), or leave rt alone (False). (~3 us for a
        small model: a streaming pipeline resizes and allocates on every frame.)"""
        key = self._key(rt)
        plan = self.plans.get(key)
        if plan is None:
            return False
        state, prepared, fast, tensors = plan
        for t, (shape, data) in zip(rt.tensors, tensors):
            t.shape = shape
            t.data = data
        live = rt.fast_views
        vars(rt).pop("run", None)  # (another plan's native entry: this plan's own, if it had one, is in `state`)
        vars(rt).update(state)
        rt.prepared = list(prepared)
        live.clear()
        live.update(fast)
        rt.fast_views = live
        self.plans.move_to_end(key)
        return True
