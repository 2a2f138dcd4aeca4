"""A signature call with its inputs and outputs in the caller's arrays: what makes a KV-cache step cheap from the
official calling convention, and free with a bound buffer (docs/design/llm.md).

`SignatureIO.run` points the compiled code of one allocated GraphRuntime at the caller's arrays for one run
(io_binding.IOBinding rebases the arguments' positions, then puts them back): an input of at least `min_bytes` is
read where the caller keeps it, an output of at least `min_bytes` is written straight into the new array returned,
and a bound buffer (an input and its same-named output, e.g. `kv_cache_k_0`) is both — updated in place when the
plan put that output in the input's storage (arena.plan_aliases, after ModelRuntime.set_writable_inputs), else
read in place and copied back once. Whatever cannot be pointed elsewhere (host or dynamic nodes, Python mode,
speculation, a small tensor) is copied as SignatureRunner always did, and counted.

What run() does depends only on the tensors, the buffers' identities and `min_bytes`, so it is decided once per such
key (`plan()`: a RunPlan holding the arena views copied into and out of, the layouts, the bytes copied, the tensors
left marked) and replayed while the allocation lasts. SignatureRunner keeps the last call's as a CallPlan: a call
with the same names, dtypes, shapes and buffers skips its checks and counting and runs the RunPlan directly (a
decode step's ~24 µs of Python down to a few; docs/design/llm.md).

The official runtime keeps a copy of every input and output in the interpreter after a call; here the tensors
that lived in the caller's arrays have stale storage instead. They are marked: reading them through
ModelRuntime.get_tensor / storage raises RuntimeError (the Interpreter's set/get fast path loses them from
`fast_views` until they are set again), and invoking the subgraph while one of its inputs is marked raises too (a
refusing first step in the program, removed when the inputs are set again), instead of computing on stale data.
"""

from __future__ import annotations

import numpy as np

from .executor import GraphRuntime
from .io_binding import IOBinding

__all__ = ["CallPlan", "RunPlan", "SignatureIO"]


class SignatureIO:
    """run() for one allocated GraphRuntime, and the marks of the tensors its last run kept outside the arena."""

    def __init__(self, rt: GraphRuntime):
        self.rt = rt
        self.binding = IOBinding(rt)
        self.arena = rt.arena
        self.marked: set[int] = set()
        self.inputs = set(rt.plan.inputs)
        self._layouts: dict[tuple, tuple] = {}  # ((tensor, id(array)), ...) -> (IOBinding layout, the arrays)
        self._plans: dict[tuple, RunPlan | None] = {}  # (inputs, outputs, buffers, min_bytes) -> plan()
        self.guard_step = (self.guard, ())  # (the program's first step while tensors are marked)
        self.idle_step = (self.idle, ())
        # a class of tensors sharing a writable input's storage moves only with its buffer: passed as plain arrays,
        # the input is copied in and the output out (pointing one at the caller's array would move the other too)
        self.tied = {m for m, r in rt.aliases.items() if r in rt.writable_inputs} | rt.writable_inputs

    def valid(self, rt: GraphRuntime) -> bool:
        """Whether this state belongs to `rt` as it is allocated now."""
        return rt is self.rt and self.binding.valid()

    def run(self, inputs: dict[int, np.ndarray], outputs: list[int], buffers: dict[int, tuple[int | None, np.ndarray]],
            min_bytes: int) -> tuple[dict[int, np.ndarray], dict[int, int]]:
        """One invoke. `inputs` {input tensor: array}, `outputs` [output tensor], `buffers` {input tensor: (its
        same-named output tensor or None, buffer)}: arrays checked by the caller (dtype, shape, C-contiguous,
        aligned; buffers writable). Returns ({output tensor: a new array}, {tensor: bytes copied into it (an input)
        or out of it (an output)})."""
        plan = self.plan(inputs, outputs, buffers, min_bytes)
        if plan is not None:
            return plan.run(list(inputs.values())), dict(plan.copied)
        rt, io = self.rt, self.binding
        self.clear_marks()
        copied: dict[int, int] = {}
        targets: dict[int, np.ndarray] = {}
        back, results = [], {}
        aliases, tied = rt.aliases, self.tied
        for i, (o, buf) in buffers.items():
            if io.bindable(i):
                targets[i] = buf
                if o is not None and aliases.get(o, o) != aliases.get(i, i):
                    back.append((o, buf))  # the graph wrote the output in storage of its own
            else:
                np.copyto(rt.array(i), buf)
                copied[i] = buf.nbytes
                if o is not None:
                    back.append((o, buf))
        for i, a in inputs.items():
            if rt.tensors[i].dtype == object:  # STRING: packed into its storage outside the arena
                rt.strings.write_array(i, a, rt.tensors[i].name)
            elif a.nbytes >= min_bytes and i not in tied and io.bindable(i):
                targets[i] = a
            else:
                np.copyto(rt.array(i), a)
                copied[i] = a.nbytes
        for o in outputs:
            t = rt.tensors[o]
            if o not in results and t.nbytes >= min_bytes and o not in tied and io.bindable(o):
                targets[o] = results[o] = np.empty(t.shape, t.dtype)
        if targets:
            io.use(self.layout(targets))
        try:
            rt.invoke()
        finally:
            if targets:
                io.use(self.layout(dict.fromkeys(targets)))  # every tensor back in the arena
            held = set(targets)
            held.update(buffers[i][0] for i in targets if i in buffers and buffers[i][0] is not None)
            self.mark(held - {o for o, _ in back})
        for o, buf in back:
            np.copyto(buf, rt.array(o))
            copied[o] = buf.nbytes
        for o in outputs:
            if o not in results and rt.tensors[o].dtype == object:  # STRING: an object array of bytes
                results[o] = rt.strings.read_array(o, rt.tensors[o])
                copied[o] = int(rt.array(o).size)
            elif o not in results:
                results[o] = np.array(rt.array(o), copy=True)
                copied[o] = results[o].nbytes
        return results, copied

    def plan(self, inputs: dict[int, np.ndarray], outputs: list[int],
             buffers: dict[int, tuple[int | None, np.ndarray]], min_bytes: int) -> RunPlan | None:
        """What run() does with these tensors and buffers, decided once (RunPlan), or None when it depends on more
        than they are: a STRING or dynamic tensor among them (their storage and sizes change from run to run).
        Remembered for the tensors, the buffers' identities and min_bytes while this state is valid (the views are
        the allocation's)."""
        key = (tuple(inputs), tuple(outputs), tuple((i, o, id(b)) for i, (o, b) in buffers.items()), min_bytes)
        hit = self._plans.get(key, False)
        if hit is not False:
            return hit
        rt, io = self.rt, self.binding
        plan = None
        if not any(rt.tensors[i].dtype == object or i in rt.dynamic_tensors for i in [*inputs, *outputs, *buffers]):
            plan, back = RunPlan(self), set()
            for i, (o, buf) in buffers.items():
                if io.bindable(i):
                    plan.targets[i] = buf
                    if o is not None and rt.aliases.get(o, o) != rt.aliases.get(i, i):
                        plan.back.append((rt.array(o), buf))
                        plan.copied[o] = buf.nbytes
                        back.add(o)
                else:
                    plan.buffer_in.append((rt.array(i), buf))
                    plan.copied[i] = buf.nbytes
                    if o is not None:
                        plan.back.append((rt.array(o), buf))
                        plan.copied[o] = buf.nbytes
                        back.add(o)
            for n, (i, a) in enumerate(inputs.items()):
                if a.nbytes >= min_bytes and i not in self.tied and io.bindable(i):
                    plan.bound_in.append((n, i))
                else:
                    plan.copy_in.append((n, rt.array(i)))
                    plan.copied[i] = a.nbytes
            for o in dict.fromkeys(outputs):
                t = rt.tensors[o]
                if t.nbytes >= min_bytes and o not in self.tied and io.bindable(o):
                    plan.bound_out.append((o, t.shape, t.dtype))
                else:
                    plan.copy_out.append((o, rt.array(o)))
                    plan.copied[o] = t.nbytes
            plan.finish(buffers, back)
        if len(self._plans) >= 8:
            self._plans.pop(next(iter(self._plans)))
        self._plans[key] = plan
        return plan

    def layout(self, targets: dict[int, np.ndarray | None]):
        """IOBinding.layout(targets), the last few reused (the same buffers every step, the arena after it)."""
        key = tuple((i, id(a)) for i, a in targets.items())  # (a cached layout keeps its arrays: ids stay theirs)
        hit = self._layouts.get(key)
        if hit is None:
            if len(self._layouts) >= 8:
                self._layouts.pop(next(iter(self._layouts)))
            hit = self._layouts[key] = (self.binding.layout(targets), list(targets.values()))
        return hit[0]

    # --- the marks ------------------------------------------------------------------------------------------------
    def _current(self) -> bool:
        return self.rt.arena is self.arena and self.rt.ready

    def _step(self) -> bool:
        """Whether the program starts with this state's step (guard, or the no-op it leaves)."""
        return bool(self.rt.program) and getattr(self.rt.program[0][0], "__self__", None) is self

    def mark(self, tensors) -> None:
        """These tensors' values lived in the caller's arrays: their arena storage is stale until they are set
        again (inputs) or the next invoke writes them (outputs), which the guard in front of the program sees."""
        rt = self.rt
        self.marked.update(tensors)
        for i in tensors:
            rt.fast_views.pop(i, None)  # (the Interpreter's set/get fast path then goes through ModelRuntime)
        if self.marked:
            if self._step():
                rt.program[0] = self.guard_step
            else:
                rt.program.insert(0, self.guard_step)
            vars(rt).pop("run", None)  # (the native entry runs the runners only: invoke() runs the guard too)

    def clear_marks(self, tensors=None) -> None:
        """Tensors set again (every one, and the guard step removed, when `tensors` is None): their arena storage
        holds their values again."""
        rt = self.rt
        gone = set(self.marked) if tensors is None else self.marked.intersection(tensors)
        self.marked -= gone
        if self._current():
            for i in gone:
                if i in rt.views and i not in rt.dynamic_tensors:
                    rt.fast_views[i] = rt.views[i]
            if tensors is None and self._step():
                del rt.program[0]
                if rt.native_program() is not None:  # the program is the runners again: their native entry back
                    from .rows import install_entry  # lazy: rows imports Numba (a signature call has compiled)

                    install_entry(rt)

    def check_mark(self, i: int) -> None:
        """RuntimeError when tensor i's storage is stale (its value lived in a caller's array)."""
        if i in self.marked and self._current():
            raise RuntimeError(f"Tensor {i} ({self.rt.tensors[i].name!r}) was read from or written to the caller's "
                               f"array by the last SignatureRunner call, and no copy of it is kept in the "
                               f"interpreter: use the arrays that call was given and returned, or set it again")

    def guard(self) -> None:
        """The first step of an invoke while tensors are marked: refuse stale inputs; else this invoke rewrites the
        outputs, so every mark goes and the step becomes a no-op (removed at the next signature call)."""
        stale = sorted(self.marked & self.inputs)
        if stale:
            names = ", ".join(repr(self.rt.tensors[i].name) for i in stale)
            raise RuntimeError(f"Inputs {names} of subgraph {self.rt.subgraph_index} were read from the caller's "
                               f"arrays by the last SignatureRunner call and are not kept in the interpreter: set "
                               f"them again before invoke()")
        self.clear_marks(list(self.marked))
        self.rt.program[0] = self.idle_step  # (replaced, not removed: the invoke is iterating the program)

    def idle(self) -> None:
        pass


class RunPlan:
    """SignatureIO.run() for one set of input and output tensors and bound buffers, decided once (SignatureIO.plan):
    the arena views copied into and out of, the buffers and the caller's arrays the runners are pointed at, the
    bytes copied (the same every run), the tensors left marked. Valid while its SignatureIO is (`valid()`)."""

    __slots__ = ("io", "targets", "back", "buffer_in", "bound_in", "copy_in", "bound_out", "copy_out", "copied",
                 "held", "layout", "restore")

    def __init__(self, io: SignatureIO):
        self.io = io
        self.targets: dict[int, np.ndarray] = {}  # bound buffers the runners read (and write) where they live
        self.back: list[tuple[np.ndarray, np.ndarray]] = []  # (output's arena view, its buffer): copied back
        self.buffer_in: list[tuple[np.ndarray, np.ndarray]] = []  # (input's arena view, its buffer): copied in
        self.bound_in: list[tuple[int, int]] = []  # (position in run()'s arrays, input) read in the caller's array
        self.copy_in: list[tuple[int, np.ndarray]] = []  # (position in run()'s arrays, the input's arena view)
        self.bound_out: list[tuple[int, tuple, np.dtype]] = []  # outputs written straight into a new array
        self.copy_out: list[tuple[int, np.ndarray]] = []  # (output, its arena view): copied out
        self.copied: dict[int, int] = {}  # {tensor: bytes copied into or out of it}, as run() returns it
        self.held = frozenset()
        self.layout = self.restore = None

    def finish(self, buffers: dict[int, tuple[int | None, np.ndarray]], back: set[int]) -> None:
        io = self.io
        moved = [*self.targets, *(i for _, i in self.bound_in), *(o for o, _, _ in self.bound_out)]
        held = set(moved) | {buffers[i][0] for i in self.targets if buffers[i][0] is not None}
        self.held = frozenset(held - back)
        if moved:
            self.restore = io.layout(dict.fromkeys(moved))
        if self.targets and len(moved) == len(self.targets):  # only bound buffers: the same layout every run
            self.layout = io.layout(dict(self.targets))

    def valid(self) -> bool:
        """Whether the runtime is still allocated as when this plan was made (else SignatureIO.run plans again)."""
        return self.io.binding.valid()

    def run(self, arrays: list[np.ndarray]) -> dict[int, np.ndarray]:
        """run() with the input arrays in the order of the inputs the plan was made for (checked by the caller as
        for run()); returns {output tensor: a new array} (not the bound buffers' outputs)."""
        io, held = self.io, self.held
        rt, binding = io.rt, io.binding
        # the last run left exactly these marks: they stay (the guard step idles through this run's own invoke)
        keep = held and io.marked == held and bool(rt.program) and rt.program[0] is io.guard_step
        if not keep and (io.marked or io._step()):
            io.clear_marks()
        for view, buf in self.buffer_in:
            view[...] = buf
        for n, view in self.copy_in:
            view[...] = arrays[n]
        results = {}
        layout = self.layout
        if self.bound_in or self.bound_out:  # the caller's arrays and new ones: a layout per set of arrays
            targets = dict(self.targets)
            for n, i in self.bound_in:
                targets[i] = arrays[n]
            for o, shape, dtype in self.bound_out:
                targets[o] = results[o] = np.empty(shape, dtype)
            layout = io.layout(targets)
        if layout is not None:
            binding.use(layout)
        if keep:
            rt.program[0] = io.idle_step
        try:
            rt.invoke()
        finally:
            if layout is not None:
                binding.use(self.restore)  # every tensor back in the arena
            if keep and rt.program and rt.program[0] is io.idle_step:
                rt.program[0] = io.guard_step
            elif held:  # (also when the invoke made its program again)
                io.mark(held)
        for view, buf in self.back:
            buf[...] = view
        for o, view in self.copy_out:
            results[o] = view.copy()
        return results


class CallPlan:
    """A SignatureRunner call repeated as a generation loop repeats it: the same input names in the same order,
    arrays of the same dtypes and shapes (C-contiguous and aligned), bound buffers passed as themselves or not at
    all — everything its checks and its copy counts depend on — run by the RunPlan the first such call followed.
    `arrays(kwargs)` is None for any other call (the runner's full path then checks, resizes and plans it)."""

    __slots__ = ("names", "specs", "min_bytes", "run", "returns", "copies", "copies_by_name")

    def __init__(self, kwargs: dict[str, np.ndarray], buffers: dict[str, np.ndarray], min_bytes: int, run: RunPlan,
                 returns: list[tuple[str, int, np.ndarray | None]], copies: dict, copies_by_name: dict):
        self.names = tuple(kwargs)
        self.min_bytes = min_bytes  # (SignatureRunner.IN_PLACE_BYTES, which an instance may change)
        self.specs = [(v.dtype, v.shape, buffers.get(n)) for n, v in kwargs.items()]
        self.run = run
        self.returns = returns  # [(output name, output tensor, its bound buffer or None)]
        self.copies, self.copies_by_name = copies, copies_by_name

    def arrays(self, kwargs: dict, min_bytes: int) -> list[np.ndarray] | None:
        """The arrays RunPlan.run takes, when `kwargs` is a call this plan was made for; else None."""
        if tuple(kwargs) != self.names or min_bytes != self.min_bytes:
            return None
        arrays = []
        for v, (dtype, shape, buf) in zip(kwargs.values(), self.specs):
            if buf is not None:
                if v is not buf:
                    return None
            elif type(v) is np.ndarray and v.dtype == dtype and v.shape == shape and (f := v.flags).c_contiguous \
                    and f.aligned:
                arrays.append(v)
            else:
                return None
        return arrays

    def __call__(self, arrays: list[np.ndarray]) -> dict[str, np.ndarray]:
        results = self.run.run(arrays)
        return {name: results[o] if buf is None else buf for name, o, buf in self.returns}
