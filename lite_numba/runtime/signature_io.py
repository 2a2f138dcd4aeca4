"""A signature call with its inputs and outputs in the caller's arrays: what makes a KV-cache step cheap from the
official calling convention, and free with a bound buffer (docs/design/llm.md).

`SignatureIO.run` points the compiled code of one allocated GraphRuntime at the caller's arrays for one run
(io_binding.IOBinding rebases the arguments' positions, then puts them back): an input of at least `min_bytes` is
read where the caller keeps it, an output of at least `min_bytes` is written straight into the new array returned,
and a bound buffer (an input and its same-named output, e.g. `kv_cache_k_0`) is both — updated in place when the
plan put that output in the input's storage (arena.plan_aliases, after ModelRuntime.set_writable_inputs), else
read in place and copied back once. Whatever cannot be pointed elsewhere (host or dynamic nodes, Python mode,
speculation, a small tensor) is copied as SignatureRunner always did, and counted.

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

__all__ = ["SignatureIO"]


class SignatureIO:
    """run() for one allocated GraphRuntime, and the marks of the tensors its last run kept outside the arena."""

    def __init__(self, rt: GraphRuntime):
        self.rt = rt
        self.binding = IOBinding(rt)
        self.arena = rt.arena
        self.marked: set[int] = set()
        self.inputs = set(rt.plan.inputs)
        self._layouts: dict[tuple, tuple] = {}  # ((tensor, id(array)), ...) -> (IOBinding layout, the arrays)
        self._plain: dict[tuple, tuple] = {}  # (input tensors, output tensors) -> _plain_copies
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
        rt, io = self.rt, self.binding
        if not buffers:  # the same small inputs and outputs every step (a decode step): the copies planned once
            plain = self._plain.get((tuple(inputs), tuple(outputs), min_bytes))
            if plain is None:
                plain = self._plain_copies(inputs, outputs, min_bytes)
            if plain:
                return self._run_plain(plain, inputs)
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
            io.use(self._layout(targets))
        try:
            rt.invoke()
        finally:
            if targets:
                io.use(self._layout(dict.fromkeys(targets)))  # every tensor back in the arena
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

    def _plain_copies(self, inputs: dict[int, np.ndarray], outputs: list[int], min_bytes: int):
        """For run() without buffers, when every input and output is copied (none of them bound: each smaller than
        min_bytes, tied or not bindable; no STRING, no dynamic tensor): ([(input, its arena view)], [(output, its
        arena view)]); else False (run() takes its general way). Remembered for these tensors (the views stay while
        this state is valid: the same allocation)."""
        rt, io = self.rt, self.binding
        plain = False
        copies = True
        for i in [*inputs, *outputs]:
            t = rt.tensors[i]
            nbytes = inputs[i].nbytes if i in inputs else t.nbytes
            if t.dtype == object or i in rt.dynamic_tensors or (nbytes >= min_bytes and i not in self.tied
                                                                 and io.bindable(i)):
                copies = False
                break
        if copies:
            plain = ([(i, rt.array(i)) for i in inputs], [(o, rt.array(o)) for o in dict.fromkeys(outputs)])
        if len(self._plain) >= 8:
            self._plain.pop(next(iter(self._plain)))
        self._plain[(tuple(inputs), tuple(outputs), min_bytes)] = plain
        return plain

    def _run_plain(self, plain, inputs: dict[int, np.ndarray]) -> tuple[dict[int, np.ndarray], dict[int, int]]:
        """run() with every input copied into its arena view and every output copied out of it (_plain_copies)."""
        if self.marked or self._step():
            self.clear_marks()
        into, outof = plain
        copied = {}
        for i, view in into:
            a = inputs[i]
            np.copyto(view, a)
            copied[i] = a.nbytes
        self.rt.invoke()
        results = {}
        for o, view in outof:
            results[o] = r = view.copy()
            copied[o] = r.nbytes
        return results, copied

    def _layout(self, targets: dict[int, np.ndarray | None]):
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
                rt.program[0] = (self.guard, ())
            else:
                rt.program.insert(0, (self.guard, ()))

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
        self.rt.program[0] = (self.idle, ())  # (replaced, not removed: the invoke is iterating the program)

    def idle(self) -> None:
        pass
