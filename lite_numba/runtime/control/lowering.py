"""Control flow lowered into the compiled runner of its parent graph (WHILE, IF, STABLEHLO_CASE, CALL_ONCE).

A control-flow node's prepare asks for it (`PrepareContext.lower_control_flow`); `lower` then prepares the called
subgraphs as private GraphRuntimes for the node's input shapes (planned once, their arenas and runner tables fixed
for the life of the node's preparation: nothing else runs or re-plans them), checks that each is compiled runners
only, writes the node's table (lite_numba.runtime.loop_kernels) and schedules one call of `control_entry` with the
node's tensors. The node is then a static node of its parent's segment: no Python between iterations or around a
branch. When anything stands in the way the node keeps the host path (kernels/host/control_flow.py), and the reason
is recorded in ModelRuntime.control.paths (`lite-numba inspect` prints it).

What the lowering does with the data (the official kernels' copy rules kept):
- WHILE: the loop variables live in the body's input tensors. The node's inputs are copied in once, its outputs out
  once. The cond reads the body's inputs where they are (its input arguments rebased onto them). A body output is
  written straight into its variable's storage (its arguments rebased) when every read of the variable comes before
  the first write of the output's storage; otherwise it is copied after the body ran, through a scratch buffer when
  its source is another variable's storage (a swap).
- IF / STABLEHLO_CASE: the chosen branch reads the parent's input tensors and writes the parent's output tensors where
  they are (its arguments pointed at them at run time, so an I/O binding of the parent is followed); an output that is
  a branch input passed through, a constant, or returned twice is copied.
- CALL_ONCE: the init subgraph runs once per interpreter, under a flag kept in the resources (restored in place).
"""

from __future__ import annotations

import numpy as np
from numba import typeof

from ..codegen import executor_mode, loop_runner
from ..executor import InvokeError
from ..rows import compiled_entry
from .loop_kernels import ARITIES, ENTRIES, MAX_ARRAYS, TRACE_LIMIT, run_trace

__all__ = ["WhileTrace", "lower", "while_trace"]


class _Refused(Exception):
    """Why a node keeps the host path."""


def lower(owner, state, ctx, parent) -> bool:
    """Schedule `ctx`'s control-flow node as one compiled call (True), or record why it keeps the host path in
    `state.paths` (owner: the ModelRuntime, state: its ControlState, parent: the node's GraphRuntime)."""
    key = (parent.subgraph_index, ctx.node.index)
    dry = executor_mode() == "python"  # (no runners to call: check only, for `lite-numba inspect`)
    try:
        op = ctx.op_name
        if op == "WHILE":
            tab, keep, why = _lower_while(owner, state, ctx, dry)
        elif op in ("IF", "STABLEHLO_CASE"):
            tab, keep, why = _lower_branches(owner, state, ctx, dry)
        elif op == "CALL_ONCE":
            tab, keep, why = _lower_call_once(owner, state, ctx, dry)
        else:
            raise _Refused(f"{op} is not lowered")
    except _Refused as e:
        state.paths[key] = ("host", str(e))
        return False
    if dry:
        state.paths[key] = ("compiled", f"{why} (LITE_NUMBA_EXECUTOR=python runs it from the host)")
        return False
    arrays = [ctx.input(i) for i in range(ctx.num_inputs)] + [ctx.output(i) for i in range(ctx.num_outputs)]
    views = [ctx.view(t, (t.nbytes,), np.uint8) for t in arrays]
    if not views:  # (CALL_ONCE has no tensors: any uint8 vector fills the slots)
        views = [np.zeros(1, np.uint8)]
    n = next(a for a in ARITIES if a >= len(views))
    views += [views[0]] * (n - len(views))
    ctx.host_data = keep  # the private runtimes and buffers the table points into live as long as this preparation
    ctx.call(ENTRIES[n], np.asarray(tab, np.int64), *views)
    state.paths[key] = ("compiled", why)
    return True


# --- the called subgraphs ---------------------------------------------------------------------------------------

def _check_tensors(ctx) -> None:
    n = ctx.num_inputs + ctx.num_outputs
    if n > MAX_ARRAYS:
        raise _Refused(f"{n} tensors (the compiled node takes at most {MAX_ARRAYS})")
    for t in [ctx.input(i) for i in range(ctx.num_inputs)] + [ctx.output(i) for i in range(ctx.num_outputs)]:
        if t is None:
            raise _Refused("an absent input or output")
        if t.dtype == np.dtype(object):
            raise _Refused(f"STRING tensor {t.name!r}")


def _private(owner, index: int, shapes) -> object:
    rt = owner.private_graph(index, [tuple(s) for s in shapes])
    if any(t.spec.is_variable for t in rt.tensors):
        raise _Refused(f"subgraph {index} has variable tensors (they restart at every run of the node, as "
                       f"officially)")
    return rt


def _program(state, rt, dry: bool) -> list[int]:
    """[count, then per runner its address and the (pointer, length) of arena, aux, it, ft, fp]."""
    if not rt.plain_program():
        raise _Refused(f"subgraph {rt.subgraph_index} re-prepares nodes at run time (values decide shapes)")
    out = [0]
    for kind, seg in rt.steps:
        if kind != "segment":
            node = rt.plan.nodes[seg]
            sub = state.paths.get((rt.subgraph_index, seg))
            why = f": {sub[1]}" if sub is not None and sub[0] == "host" else ""
            raise _Refused(f"subgraph {rt.subgraph_index} runs node {seg} ({node.op_name}) on the host{why}")
        if (not dry and (seg.run is None or not seg.address)) or seg.arena_args is None:
            raise _Refused(f"subgraph {rt.subgraph_index} is not compiled runners only")
        out[0] += 1
        out.append(seg.address)
        for a in (rt.arena, seg.aux, seg.it, seg.ft, seg.fp):
            out += [a.ctypes.data, a.size]
    return out


def _root(rt, i: int) -> int:
    return rt.aliases.get(i, i)


def _members(rt, i: int) -> set[int]:
    r = _root(rt, i)
    return {r} | {m for m, root in rt.aliases.items() if root == r}


def _written(rt, i: int) -> bool:
    cls = _members(rt, i)
    return any(o in cls for node in rt.plan.nodes for o in node.outputs)


def _hits(rt, i: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """[(segment it table, positions of the arguments that are tensor i's storage)]."""
    off = rt.offsets[i]
    nbytes = rt.tensors[i].nbytes
    out = []
    for _, seg in rt.steps:
        pos = seg.arena_args
        hit = pos[seg.it[pos] == off] if pos.size else pos
        if hit.size:
            if np.any(seg.it[hit + 1] > off + nbytes):
                raise _Refused(f"an argument of subgraph {rt.subgraph_index} spans tensor {i} and more")
            out.append((seg.it, hit))
    return out


def _rebase(rt, i: int, address: int) -> None:
    """Point every compiled argument of tensor i's storage at `address` (fixed for the runtime's life)."""
    delta = address - (rt.arena.ctypes.data + rt.offsets[i])
    for it, hit in _hits(rt, i):
        it[hit] += delta
        it[hit + 1] += delta


def _address(rt, i: int, keep: list) -> int:
    t = rt.tensors[i]
    if t.data is not None:
        a = np.ascontiguousarray(t.data)
        keep.append(a)
        return a.ctypes.data
    if i not in rt.offsets:
        raise _Refused(f"tensor {i} ({t.name!r}) of subgraph {rt.subgraph_index} is not planned in its arena")
    return rt.arena.ctypes.data + rt.offsets[i]


# --- WHILE ------------------------------------------------------------------------------------------------------

def _lower_while(owner, state, ctx, dry):
    _check_tensors(ctx)
    cond_i, body_i = ctx.options["cond_subgraph_index"], ctx.options["body_subgraph_index"]
    n = ctx.num_inputs
    shapes = [ctx.input(k).shape for k in range(n)]
    c = _private(owner, cond_i, shapes)
    b = _private(owner, body_i, shapes)
    keep: list = [c, b]
    for k in range(n):
        o = b.tensors[b.plan.outputs[k]]
        if o.shape != shapes[k] or o.dtype != ctx.input(k).dtype:
            raise _Refused(f"body output {k} is {o.dtype.name}{list(o.shape)}, the loop variable "
                           f"{ctx.input(k).dtype.name}{list(shapes[k])}")
    flag_t = c.tensors[c.plan.outputs[0]]
    if flag_t.dtype != np.bool_ or flag_t.size != 1:
        raise _Refused(f"cond returns {flag_t.dtype.name}{list(flag_t.shape)}")
    prog_c = _program(state, c, dry)
    prog_b = _program(state, b, dry)
    b_in = list(b.plan.inputs)
    sizes = [b.tensors[i].nbytes for i in b_in]
    addr = [_address(b, i, keep) if sizes[k] else 0 for k, i in enumerate(b_in)]
    # the cond reads the loop variables in the body's input storage
    for k, i in enumerate(c.plan.inputs):
        if c.tensors[i].nbytes and i in c.offsets:
            if _written(c, i):
                raise _Refused(f"cond subgraph {cond_i} writes its input {k}")
            _rebase(c, i, addr[k])
    out_c = c.plan.outputs[0]
    expr = _cond_expression(c, {i: addr[k] for k, i in enumerate(c.plan.inputs)}, keep)
    if expr is not None:
        expr, flag = expr
    else:
        flag = addr[c.plan.inputs.index(out_c)] if out_c in c.plan.inputs else _address(c, out_c, keep)
    # body outputs: in place where the body has read the variable before it writes the output's storage
    outs = list(b.plan.outputs)
    order = {node.index: pos for pos, node in enumerate(b.plan.nodes)}
    moves: list[tuple[int, int, int, bool]] = []  # (dst, src, bytes, src is a loop variable's storage)
    in_place = 0
    counters = []  # (op, kind, a, b, result) computed by the loop after the body ran (a counter's step)
    for k, o in enumerate(outs):
        i = b_in[k]
        if not sizes[k] or o == i or (o in b.offsets and _root(b, o) == _root(b, i)):
            continue
        step = _counter(b, k, outs, addr, keep)
        if step is not None:
            counters.append(step)
            continue
        if o in b_in:  # another variable passed through: its storage is overwritten by the moves
            moves.append((addr[k], addr[b_in.index(o)], sizes[k], True))
            continue
        ok = (b.tensors[o].data is None and o in b.offsets and outs.count(o) == 1 and i not in outs
              and not any(m in b_in for m in _members(b, o)))
        if ok:
            reads = [order[nd.index] for nd in b.plan.nodes if any(t in _members(b, i) for t in nd.inputs)]
            writes = [order[nd.index] for nd in b.plan.nodes if any(t in _members(b, o) for t in nd.outputs)]
            ok = bool(writes) and (not reads or max(reads) < min(writes) or _counter_step(b, reads, writes, o))
        if ok:
            _rebase(b, o, addr[k])
            in_place += 1
        else:
            moves.append((addr[k], _address(b, o, keep), sizes[k], False))
    staged = [m for m in moves if m[3]]
    table_moves: list[tuple[int, int, int]] = []
    scratch = []
    for dst, src, nb, _ in staged:
        s = np.zeros(nb, np.uint8)
        keep.append(s)
        scratch.append((dst, s.ctypes.data, nb))
        table_moves.append((s.ctypes.data, src, nb))
    table_moves += [(dst, src, nb) for dst, src, nb, st in moves if not st]
    table_moves += scratch
    # the usual converter loop (a cond of scalar operations, one body runner, nothing copied): a runner that runs
    # the cond, the body's calls and the counters itself, iterations batched between the loop's checks
    looping = expr is not None and prog_b[0] == 1 and not table_moves
    if looping and not dry:
        seg = next(s for kind, s in b.steps if kind == "segment")
        address, it = loop_runner(seg, expr, flag, counters)
        keep.append(it)
        prog_b = [1, address, *prog_b[2:6], it.ctypes.data, it.size, *prog_b[8:]]
    limit = state.limit.ctypes.data
    calls = sum(len(seg.calls) for kind, seg in b.steps if kind == "segment")
    poll = 16 if calls <= 64 and b.arena.nbytes <= 1 << 20 else 1  # (a small body: the clock every 16th time)
    head = [0, n, 0, 0, flag, limit, ctx.node.index, 0, 0, poll, state.running.ctypes.data, cond_i, body_i, 0, 0,
            int(looping)]
    tab = head[:]
    tab[2] = len(tab)
    tab += prog_c
    tab[3] = len(tab)
    tab += prog_b
    tab[7] = len(tab)
    tab += [len(table_moves)] + [v for m in table_moves for v in m]
    tab[8] = len(tab)
    tab += [v for k in range(n) for v in (addr[k], sizes[k])]
    if expr is not None:
        tab[13] = len(tab)
        tab += [len(expr)] + [v for e in expr for v in e]
    if counters:
        tab[14] = len(tab)
        tab += [len(counters)] + [v for e in counters for v in e]
    cond = (f"cond {cond_i} evaluated in the loop ({len(expr)} scalar operations)" if expr is not None else
            f"cond {cond_i} compiled ({prog_c[0]} runners)")
    body = f"body {body_i} compiled ({prog_b[0]} runners{'; cond, body and counters in one runner' * looping})"
    why = (f"{cond}, {body}; {len(counters)} counters stepped by the loop, "
           f"{in_place} of {n} loop variables carried in place, {len(table_moves)} copies per iteration")
    return tab, keep, why


_COMPARE = {"LESS": 0, "LESS_EQUAL": 1, "GREATER": 2, "GREATER_EQUAL": 3, "EQUAL": 4, "NOT_EQUAL": 5}
_LOGIC = {"LOGICAL_AND": 6, "LOGICAL_OR": 7, "LOGICAL_NOT": 8}
_KINDS = {np.dtype(np.int32): 0, np.dtype(np.int64): 1, np.dtype(np.float32): 2}


def _cond_expression(c, inputs: dict[int, int], keep: list):
    """The cond subgraph `c` as a scalar expression the loop evaluates itself ((instructions, result address), see
    loop_kernels' WHILE table), or None: every node a comparison of one-element int32 / int64 / float32 tensors or
    a logical operation on one-element booleans, each operand a loop variable (its address in `inputs`), a constant
    or an earlier node's result; as the converter writes a loop's cond (`i < n`, `i < n and j < max`)."""
    nodes = c.plan.nodes
    if not nodes or len(nodes) > 8:
        return None
    where: dict[int, int] = {}  # tensor -> address of its value
    scratch = np.zeros(len(nodes), np.uint8)
    code = []
    for k, nd in enumerate(nodes):
        op = nd.op_name
        ins = [i for i in nd.inputs]
        if op not in _COMPARE and op not in _LOGIC or len(nd.outputs) != 1 or any(i < 0 for i in ins):
            return None
        if len(ins) != (1 if op == "LOGICAL_NOT" else 2):
            return None
        ts = [c.tensors[i] for i in ins]
        if any(t.size != 1 for t in ts) or c.tensors[nd.outputs[0]].size != 1:
            return None
        if op in _COMPARE:
            kind = _KINDS.get(ts[0].dtype)
            if kind is None or ts[1].dtype != ts[0].dtype:
                return None
        elif any(t.dtype != np.bool_ for t in ts):
            return None
        else:
            kind = 3
        srcs = []
        for i, t in zip(ins, ts):
            if i in where:
                srcs.append(where[i])
            elif i in inputs:
                srcs.append(inputs[i])
            elif t.data is not None:
                srcs.append(_address(c, i, keep))
            else:
                return None
        where[nd.outputs[0]] = scratch.ctypes.data + k
        code.append((_COMPARE.get(op, _LOGIC.get(op)), kind, srcs[0], srcs[-1], where[nd.outputs[0]]))
    out = c.plan.outputs[0]
    if out not in where:
        return None
    keep.append(scratch)
    return code, where[out]


def _counter(b, k: int, outs: list[int], addr: list[int], keep: list):
    """Loop variable k's successor as the loop computes it itself ((op, kind, variable, constant, variable), see
    loop_kernels' WHILE table), its node's step taken out of the body's runner; or None. The converter's counter:
    `i + c` or `i - c` (ADD / SUB, no activation) of one-element int32 / int64 / float32, whose result is read by
    nothing but the loop (no other node of the body, no other output) and whose variable is not passed through to
    another output (the body's other nodes read the variable's old value: the loop steps it after the body ran)."""
    o, i = outs[k], b.plan.inputs[k]
    writers = [nd for nd in b.plan.nodes if o in nd.outputs]
    if len(writers) != 1 or outs.count(o) != 1 or i in outs or _members(b, o) != {o} or o in b.plan.inputs:
        return None
    nd = writers[0]
    if nd.op_name not in ("ADD", "SUB") or list(nd.outputs) != [o] or len(nd.inputs) != 2:
        return None
    if (nd.options or {}).get("fused_activation_function", 0) not in (0, None, "NONE"):
        return None
    if any(o in other.inputs for other in b.plan.nodes):
        return None
    t = b.tensors[o]
    kind = _KINDS.get(t.dtype)
    a, c = nd.inputs
    if nd.op_name == "ADD" and c == i:
        a, c = c, a
    if kind is None or t.size != 1 or a != i or c < 0 or b.tensors[c].data is None:
        return None
    if b.tensors[c].dtype != t.dtype or b.tensors[c].size != 1 or b.tensors[i].dtype != t.dtype:
        return None
    hits = [(seg, s) for kind_, seg in b.steps if kind_ == "segment"
            for s, (ni, _) in enumerate(seg.calls) if ni == nd.index]
    if len(hits) != 1 or hits[0][0].arena_args is None or int(hits[0][0].it[1]) != len(hits[0][0].calls):
        return None
    seg, s = hits[0]
    it = seg.it  # the runner's step table (codegen._step_loop): it[0] where it starts, it[1] steps of 3 entries
    start, count = int(it[0]), int(it[1])
    it[start + 3 * s:start + 3 * (count - 1)] = it[start + 3 * (s + 1):start + 3 * count].copy()
    it[1] = count - 1
    seg.calls = [cl for cl in seg.calls if cl[0] != nd.index]
    return (9 if nd.op_name == "ADD" else 10, kind, addr[k], _address(b, c, keep), addr[k])


def _counter_step(b, reads: list[int], writes: list[int], o: int) -> bool:
    """Whether the one node that both last reads a loop variable and first writes its successor `o` may do so in
    place: a single write, an elementwise ADD / SUB / MUL of one element (it reads its operands before it writes,
    as `i + 1` does)."""
    if len(writes) != 1 or max(reads) != writes[0]:
        return False
    nd = b.plan.nodes[writes[0]]
    return nd.op_name in ("ADD", "SUB", "MUL") and list(nd.outputs) == [o] and b.tensors[o].size == 1


# --- IF / STABLEHLO_CASE ----------------------------------------------------------------------------------------

def _lower_branches(owner, state, ctx, dry):
    _check_tensors(ctx)
    if ctx.op_name == "IF":
        branches = [ctx.options["then_subgraph_index"], ctx.options["else_subgraph_index"]]
        sel = ctx.input(0)
        if sel.dtype != np.bool_:
            raise _Refused(f"the condition is {sel.dtype.name}")
        kind = 0
    else:
        branches = list(ctx.options["branch_subgraph_indices"])
        kind = 1
    n_in, n_out = ctx.num_inputs, ctx.num_outputs
    shapes = [ctx.input(i).shape for i in range(1, n_in)]
    keep: list = []
    parts = []
    copied = 0
    for bi in branches:
        rt = _private(owner, bi, shapes)
        keep.append(rt)
        for k, o in enumerate(rt.plan.outputs):
            want = ctx.output(k)
            if rt.tensors[o].shape != want.shape or rt.tensors[o].dtype != want.dtype:
                raise _Refused(f"branch {bi} output {k} is {rt.tensors[o].dtype.name}{list(rt.tensors[o].shape)}, "
                               f"the node's {want.dtype.name}{list(want.shape)}")
        prog = _program(state, rt, dry)
        base = rt.arena.ctypes.data
        patches = []
        for j, i in enumerate(rt.plan.inputs):
            if rt.tensors[i].nbytes and i in rt.offsets:
                if _written(rt, i):
                    raise _Refused(f"branch {bi} writes its input {j}")
                patches += [(it.ctypes.data, int(p), 1 + j, base, int(it[p + 1] - it[p]))
                            for it, hit in _hits(rt, i) for p in hit]
        copies = []
        outs = list(rt.plan.outputs)
        for k, o in enumerate(outs):
            nb = rt.tensors[o].nbytes
            if not nb:
                continue
            if o in rt.plan.inputs:
                copies.append((k, 1 + rt.plan.inputs.index(o), 0, nb))
            elif rt.tensors[o].data is not None or o not in rt.offsets or outs.count(o) > 1:
                copies.append((k, -1, _address(rt, o, keep), nb))
            else:
                patches += [(it.ctypes.data, int(p), n_in + k, base, int(it[p + 1] - it[p]))
                            for it, hit in _hits(rt, o) for p in hit]
        copied += len(copies)
        parts.append((prog, patches, copies))
    tab = [1, n_in, n_out, kind, len(branches), ctx.node.index, state.running.ctypes.data] + [0] * len(branches)
    for b, (prog, patches, copies) in enumerate(parts):
        tab[7 + b] = len(tab)
        at = len(tab)
        tab += [0, 0, 0, branches[b]]
        tab[at] = len(tab)
        tab += prog
        tab[at + 1] = len(tab)
        tab += [len(patches)] + [v for p in patches for v in p]
        tab[at + 2] = len(tab)
        tab += [len(copies)] + [v for c in copies for v in c]
    why = (f"branches {', '.join(map(str, branches))} compiled, run on the node's tensors in place "
           f"({copied} output copies)")
    return tab, keep, why


# --- CALL_ONCE --------------------------------------------------------------------------------------------------

def _lower_call_once(owner, state, ctx, dry):
    init = ctx.options["init_subgraph_index"]
    rt = _private(owner, init, [])
    prog = _program(state, rt, dry)
    flag = state.call_once_flag(owner.resources, init)
    tab = [2, flag.ctypes.data, 5, state.running.ctypes.data, init] + prog
    return tab, [rt, flag], f"init subgraph {init} compiled, run once (flag)"


# --- a WHILE whose loop variables change shape: the host loop's iterations replayed -----------------------------

class WhileTrace:
    """The iterations a host WHILE went through (kernels/host/control_flow.py's general loop, for loop variables that
    change shape), replayed by one compiled call (loop_kernels.run_trace): each step's cond and body bound for that
    iteration's shapes (BoundSubgraph; every runtime distinct, none with variables), their runners called by native
    address, the loop variables copied from the previous body's outputs. A body's output shapes follow from its input
    shapes (static outputs), so the steps are the same at every run from the same input shapes; only where the cond
    turns false varies. run() returns r >= 0 when the cond of step r was false (the loop's results copied into
    results[r], arrays this trace owns), -1 - s when the loop goes on past the recorded steps (from values[s], after
    s iterations), or LIMIT at the iteration cap. Usable while valid()."""

    __slots__ = ("tab", "values", "results", "steps", "held", "state", "body", "_entry")
    LIMIT = TRACE_LIMIT

    def __init__(self, state, cond: int, body: int, first: list, steps: list, progs: list):
        self.state, self.body, self.steps = state, body, steps
        self.held = [(x.rt, x.rt.arena) for st in steps for x in (st.c, st.b)]
        self.values = [first] + [st.b.outputs for st in steps]
        self.results = [[np.empty_like(v) for v in vals] for vals in self.values[:-1]]
        tab = [len(steps), state.running.ctypes.data, cond, body, state.limit.ctypes.data] + [0] * len(steps)
        for s, (st, (pc, pb)) in enumerate(zip(steps, progs)):
            src = self.values[s]
            copies = ([(st.c.inputs[k], src[k]) for k in st.c.used_inputs], list(zip(st.b.inputs, src)),
                      list(zip(self.results[s], src)))
            tab[5 + s] = at = len(tab)
            tab += [0, st.c.outputs[0].ctypes.data, 0]
            for cp in copies:
                cp = [(d.ctypes.data, v.ctypes.data, v.nbytes) for d, v in cp if v.nbytes]
                tab += [len(cp)] + [v for m in cp for v in m]
            tab[at] = len(tab)
            tab += pc
            tab[at + 2] = len(tab)
            tab += pb
        self.tab = np.asarray(tab, np.int64)
        self._entry = compiled_entry(run_trace, (typeof(self.tab),))  # (no dispatcher type checks)

    def valid(self) -> bool:
        for rt, arena in self.held:
            if not rt.ready or rt.arena is not arena:
                return False
        return True

    def run(self) -> int:
        try:
            return self._entry(self.tab)
        except (ValueError, IndexError, ZeroDivisionError) as e:
            raise InvokeError(f"{e}\nNode failed to invoke (subgraph {self.state.failed_subgraph(self.body)}).") \
                from None


def while_trace(state, cond: int, body: int, first: list, steps: list) -> WhileTrace | None:
    """A WhileTrace of these steps (objects with .c and .b, bound subgraphs, from the loop's first iteration on;
    `first`: the loop variables' storage before it), or None when one is not compiled runners only with static
    outputs, has variable tensors (they restart at every run), two share a runtime, or an array is not contiguous."""
    seen = set()
    for st in steps:
        for x in (st.c, st.b):
            if (x.program is None or not x.calls_nothing or not x.static_outputs or id(x.rt) in seen
                    or any(t.spec.is_variable for t in x.rt.tensors)):
                return None
            seen.add(id(x.rt))
        flag = st.c.outputs[0]
        if flag.dtype != np.bool_ or flag.size != 1:
            return None
    for vals in [first] + [st.b.outputs for st in steps]:
        if not all(v.flags.c_contiguous for v in vals):
            return None
    try:
        progs = [(_program(state, st.c.rt, False), _program(state, st.b.rt, False)) for st in steps]
    except _Refused:
        return None
    return WhileTrace(state, cond, body, first, steps, progs)
