"""Control flow and resource variables: WHILE, IF, STABLEHLO_CASE, STABLEHLO_COMPOSITE, CALL_ONCE, VAR_HANDLE,
READ_VARIABLE, ASSIGN_VARIABLE.

These run on the host (Python) at invoke time and call other subgraphs, each of which runs as its own compiled
executor, bound once for its input shapes (Interpreter.bind_subgraph: the preparations of up to 64 shape signatures
per subgraph are kept).

WHILE: prepare prepares the body for the loop's input shapes (as TFLite does); when the body returns every loop
variable with the shape it came with, the outputs are static (what follows stays compiled) and the loop runs in
place: the body's outputs are copied into its own inputs and into the cond's, nothing else (_InPlaceLoop); when
cond and body are each one compiled call, they are called directly. Otherwise (tensors that change shape) the
general loop binds cond and body per loop-variable shapes (_Step), and records the steps it went through from the
loop's start: from the next run with the same input shapes one compiled call replays them (PrepareContext.
while_trace: every body's output shapes follow from its input shapes, so only where the cond turns false varies; a
run past the recorded steps goes on here and is recorded again). IF has static outputs when both branches return
the same static shapes for its inputs."""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from lite_numba.ops import NeedsValue, PrepareContext, kernel


def _declared_static(ctx: PrepareContext, t) -> bool:
    """Whether tensor t's shape is fixed by the model: rank > 0 (a converter writes an unknown shape as []), no -1
    in its shape_signature, and it is its current shape."""
    sig = getattr(t.spec, "shape_signature", None) if t.spec is not None else None
    return sig is not None and len(sig) > 0 and all(d >= 0 for d in sig) and tuple(sig) == tuple(t.shape)


def _check_io(ctx: PrepareContext, index: int, n_in: int, n_out: int | None, what: str) -> None:
    ins, outs = ctx.subgraph_signature(index)
    ctx.check(len(ins) == n_in, f"{what} subgraph {index} takes {len(ins)} inputs, the op passes {n_in}")
    if n_out is not None:
        ctx.check(len(outs) == n_out, f"{what} subgraph {index} returns {len(outs)} outputs, the op has {n_out}")


def _prepare_while(ctx: PrepareContext) -> None:
    cond, body = ctx.options["cond_subgraph_index"], ctx.options["body_subgraph_index"]
    n = ctx.num_inputs
    ctx.check(ctx.num_outputs == n, f"has {n} inputs but {ctx.num_outputs} outputs")
    _check_io(ctx, cond, n, 1, "cond")
    _check_io(ctx, body, n, n, "body")
    _, cond_out = ctx.subgraph_signature(cond)
    ctx.check(cond_out[0][0] == np.bool_, f"cond subgraph {cond} must return a bool, returns {cond_out[0][0]}")
    # a loop whose body returns every loop variable with the shape it came in with has static outputs: what
    # follows the loop stays compiled (TFLite's WHILE prepares its body the same way)
    shapes = [ctx.input(i).shape for i in range(n)]
    if cond != body and ctx.subgraph_output_shapes(body, shapes) == shapes:
        for i in range(n):
            ctx.set_output(i, shapes[i], ctx.input(i).dtype)
        ctx.lower_control_flow()  # cond and body inside the compiled runner, when they are compiled code only
        return
    ctx.lower_control_flow("the body changes a loop variable's shape (or its outputs are known only at run time): "
                           "the host loop prepares cond and body per shape, and replays the steps it went "
                           "through compiled at the next run from the same shapes" if cond != body else
                           "cond and body are one subgraph")
    ctx.sets_outputs = True  # (_run_while sets or binds every output, or raises)
    ctx.defer()


def _run_while(ctx: PrepareContext) -> None:
    st = _state(ctx)
    trace = st.trace
    if trace is not None and trace.valid():  # the general loop's steps from these inputs, recorded before
        r = trace.run()
        if r >= 0:
            ctx.bind_output_arrays(trace.results[r])
            return
        if r == trace.LIMIT:
            _too_many(ctx, ctx.max_while_iterations)
        n = -1 - r  # past the recorded steps: the general loop goes on (and records the longer path)
        _general_loop(ctx, [np.array(v, copy=True) for v in trace.values[n]], n, list(trace.steps))
        return
    cond, body = ctx.options["cond_subgraph_index"], ctx.options["body_subgraph_index"]
    values = st.inputs  # the node's input storage is fixed while it keeps its preparation (and this state)
    if values is None:
        values = st.inputs = [ctx.input_array(i) for i in range(ctx.num_inputs)]
    iterations = 0
    ctx.restart_subgraph_variables(cond)  # officially both are allocated again at every run: variables restart
    ctx.restart_subgraph_variables(body)
    if cond != body:
        values, iterations = _while_in_place(ctx, cond, body, values, ctx.max_while_iterations)
    if values is not None:
        _general_loop(ctx, values, iterations, [] if values is st.inputs and cond != body and st.traceable else None)


def _general_loop(ctx: PrepareContext, values: list, iterations: int, path: list | None) -> None:
    """The loop variables may change shape: cond and body bound per shapes (the preparations kept: see
    Interpreter.bind_subgraph and _Step). `path`: the steps from the loop's start, recorded for a compiled replay at
    the next run (PrepareContext.while_trace), or None."""
    cond, body = ctx.options["cond_subgraph_index"], ctx.options["body_subgraph_index"]
    st = _state(ctx)
    limit = ctx.max_while_iterations
    steps = st.steps
    while True:
        key = tuple(v.shape for v in values)
        step = steps.get(key)
        if step is None or not step.valid():
            for k in [k for k, st in steps.items() if not st.valid()]:  # their storage was released
                del steps[k]
            if len(steps) >= 64:
                steps.clear()
            step = steps[key] = _Step(ctx, cond, body, values)
        if path is not None:
            if len(path) < _MAX_TRACE:
                path.append(step)
            else:
                path = None
        c, b = step.c, step.b
        for k in c.used_inputs:
            np.copyto(c.inputs[k], values[k])
        c.run()
        flag = step.flag
        if flag is None or not c.valid():  # dynamic output, or re-planned while running (speculation)
            flag = c.output(0)
            _check_cond(ctx, cond, flag)
            flag = flag.reshape(-1)
        if not flag[0]:
            break
        for dst, v in zip(b.inputs, values):
            np.copyto(dst, v)
        b.run()
        outs = step.outs
        if outs is not None and step.keep and b.valid():
            # the cond calls no subgraph, so the body's storage is not touched before the next iteration copies
            # from it: outputs stay where they are, except those that are the body's own inputs (passed through)
            values = [o.copy() if own else o for o, own in zip(outs, step.own)]
        else:
            if outs is None or not b.valid():
                outs = [b.output(k) for k in range(len(values))]
            values = [np.array(o, copy=True) for o in outs]
        iterations += 1
        if limit is not None and iterations >= limit:
            _too_many(ctx, limit)
    if path is not None:
        st.trace = ctx.while_trace(cond, body, st.inputs, path)
        st.traceable = st.trace is not None
    for i, v in enumerate(values):
        ctx.set_output_array(i, v)


_MAX_TRACE = 64  # steps recorded for the compiled replay (the bound runtimes kept per subgraph: 64 shapes)


class _WhileState:
    """What a WHILE node keeps between invokes (its host_data): the in-place loop for the shapes it was made for,
    input shapes known to need the general loop, and the general loop's steps per loop-variable shapes."""

    __slots__ = ("inputs", "in_place", "general", "steps", "trace", "traceable")

    def __init__(self):
        self.inputs = None
        self.in_place = None
        self.general = None
        self.steps = {}
        self.trace = None  # the general loop's steps from the start, replayed compiled (while_trace)
        self.traceable = True  # False once a recorded path could not be compiled


def _state(ctx: PrepareContext) -> _WhileState:
    st = ctx.host_data
    if st is None:
        st = ctx.host_data = _WhileState()
    return st


class _Step:
    """One iteration of the general loop for given loop-variable shapes: cond and body bound for them (dtypes
    checked once), the cond's flag and the body's outputs when their storage is fixed."""

    __slots__ = ("c", "b", "flag", "outs", "keep", "own")

    def __init__(self, ctx: PrepareContext, cond: int, body: int, values):
        self.c = c = ctx.bind_subgraph(cond, values)
        self.b = b = ctx.bind_subgraph(body, values)
        for k, v in enumerate(values):
            got = b.rt.tensors[b.rt.plan.outputs[k]].dtype
            if got != v.dtype:
                ctx.fail(f"body subgraph {body} output {k} has type {got.name}, loop variable is {v.dtype.name}")
        self.flag = None
        if c.static_outputs:
            _check_cond(ctx, cond, c.outputs[0])
            self.flag = c.outputs[0].reshape(-1)
        self.outs = b.outputs
        self.keep = c.calls_nothing  # no host node: running the cond calls no subgraph
        self.own = [any(o is i for i in b.inputs) for o in b.outputs] if b.outputs is not None else None

    def valid(self) -> bool:
        return self.c.valid() and self.b.valid()


def _check_cond(ctx: PrepareContext, cond: int, c: np.ndarray) -> None:
    if c.dtype != np.bool_ or c.size != 1:
        ctx.fail(f"cond subgraph {cond} returned {c.dtype.name}{list(c.shape)}, expected a bool scalar")


def _too_many(ctx: PrepareContext, limit: int) -> None:
    raise RuntimeError(f"WHILE (node {ctx.node.index}) did not finish within {limit} iterations")


class _InPlaceLoop:
    """A WHILE whose loop variables keep their shapes: cond and body prepared once for them (BoundSubgraph), the
    body's outputs copied straight into its own inputs and into the cond's. Kept in the node's host_data while the
    shapes hold and both subgraphs keep their preparation."""

    __slots__ = ("shapes", "c", "b", "flag", "b_in", "moves", "swapped", "cond_moves", "outputs", "body_moves")

    def __init__(self, ctx, shapes, c, b):
        self.shapes, self.c, self.b = shapes, c, b
        # the WHILE's outputs when prepare fixed their shapes (the loop keeps them): written directly
        outputs = [ctx.output_array(i) for i in range(ctx.num_outputs)]
        self.outputs = outputs if all(o is not None and o.shape == s for o, s in zip(outputs, shapes)) else None
        outs = b.outputs
        self.flag = c.outputs[0].reshape(-1)
        self.b_in = b.inputs
        self.moves = [(k, outs[k]) for k in range(len(outs)) if outs[k] is not self.b_in[k]]
        # a body output that is another loop variable's input storage would be overwritten: stage those copies
        self.swapped = any(np.shares_memory(src, self.b_in[j]) for k, src in self.moves
                           for j in range(len(self.b_in)) if j != k)
        self.cond_moves = [(c.inputs[k], self.b_in[k]) for k in c.used_inputs]
        self.body_moves = [(self.b_in[k], src) for k, src in self.moves]


def _in_place_loop(ctx: PrepareContext, cond: int, body: int, values) -> _InPlaceLoop | None:
    st = _state(ctx)
    loop = st.in_place
    if loop is not None and loop.c.valid() and loop.b.valid():  # the input shapes are fixed with st.inputs
        return loop
    shapes = tuple(v.shape for v in values)
    if st.general == shapes:
        return None
    c = ctx.bind_subgraph(cond, values)
    b = ctx.bind_subgraph(body, values)
    if not (c.static_outputs and b.static_outputs) or any(
            o.shape != v.shape or o.dtype != v.dtype for o, v in zip(b.outputs, values)):
        st.general = shapes
        return None
    _check_cond(ctx, cond, c.outputs[0])
    loop = st.in_place = _InPlaceLoop(ctx, shapes, c, b)
    return loop


def _while_in_place(ctx: PrepareContext, cond: int, body: int, values, limit):
    """Runs the loop in place (_InPlaceLoop) when the loop variables keep their shapes. Returns (None, n) when
    done (outputs set), or (values, n) to continue with the general loop (a shape changes)."""
    loop = _in_place_loop(ctx, cond, body, values)
    if loop is None:
        return values, 0
    c, b, flag, b_in, moves, cond_moves = loop.c, loop.b, loop.flag, loop.b_in, loop.moves, loop.cond_moves
    for dst, v in zip(b_in, values):
        np.copyto(dst, v)
    if c.single is not None and b.single is not None and not loop.swapped:
        return _while_direct(ctx, loop, limit)
    iterations = 0
    while True:
        for dst, src in cond_moves:
            np.copyto(dst, src)
        c.run()
        if not c.valid():  # re-prepared while running (speculation): continue with the general loop
            return [np.array(v, copy=True) for v in b_in], iterations
        if not flag[0]:
            break
        b.run()
        iterations += 1
        if not b.valid():
            if limit is not None and iterations >= limit:
                _too_many(ctx, limit)
            return [np.array(b.output(k), copy=True) for k in range(len(b_in))], iterations
        staged = [(k, src.copy()) for k, src in moves] if loop.swapped else moves
        for k, src in staged:
            np.copyto(b_in[k], src)
        if limit is not None and iterations >= limit:
            _too_many(ctx, limit)
    _write_outputs(ctx, loop)
    return None, iterations


def _while_direct(ctx: PrepareContext, loop: _InPlaceLoop, limit):
    """The in-place loop when cond and body are each one compiled call that nothing can re-plan while it runs."""
    c, b, flag, cond_moves, body_moves = loop.c, loop.b, loop.flag, loop.cond_moves, loop.body_moves
    cfn, cargs = c.single
    bfn, bargs = b.single
    iterations = 0
    running = c
    try:
        while True:
            for dst, src in cond_moves:
                np.copyto(dst, src)
            running = c
            cfn(*cargs)
            if not flag[0]:
                break
            running = b
            bfn(*bargs)
            for dst, src in body_moves:
                np.copyto(dst, src)
            iterations += 1
            if limit is not None and iterations >= limit:
                _too_many(ctx, limit)
    except (ValueError, IndexError, ZeroDivisionError) as e:
        if isinstance(e, RuntimeError):
            raise
        running.fail(e)
    _write_outputs(ctx, loop)
    return None, iterations


def _write_outputs(ctx: PrepareContext, loop: _InPlaceLoop) -> None:
    b_in = loop.b_in
    if loop.outputs is not None:
        for dst, v in zip(loop.outputs, b_in):
            np.copyto(dst, v)
    else:
        for i, v in enumerate(b_in):
            ctx.set_output_array(i, v)


WHILE = kernel("WHILE", host=_run_while)(_prepare_while)


def _prepare_branches(ctx: PrepareContext, branches: list[tuple[int, str]], first: int) -> None:
    """IF, STABLEHLO_CASE and STABLEHLO_COMPOSITE: each branch subgraph takes the node's inputs from `first` on and
    returns its outputs; prepared for the inputs' shapes, when every branch returns the same static shapes and the
    node's dtypes, so does the node (else its outputs are sized at run time)."""
    n = ctx.num_inputs - first
    for b, what in branches:
        _check_io(ctx, b, n, ctx.num_outputs, what)
    branches = [b for b, _ in branches]
    shapes = [ctx.input(i).shape for i in range(first, ctx.num_inputs)]
    outs = [ctx.subgraph_output_shapes(b, shapes) for b in branches]
    dtypes = [[dt for dt, _ in ctx.subgraph_signature(b)[1]] for b in branches]
    want = [o.dtype for o in ctx.outputs]
    if outs[0] is not None and all(o == outs[0] for o in outs) and all(d == want for d in dtypes):
        for i, shape in enumerate(outs[0]):
            ctx.set_output(i, shape)
        if ctx.op_name != "STABLEHLO_COMPOSITE":  # (composites are inlined, or called as officially on request)
            ctx.lower_control_flow()  # the branches inside the compiled runner, on the node's tensors
        return
    ctx.lower_control_flow("the branches' output shapes differ or are known only at run time")
    ctx.defer()


def _prepare_if(ctx: PrepareContext) -> None:
    ctx.check(ctx.input(0).size == 1, f"condition must have one element, has shape {list(ctx.input(0).shape)}")
    _prepare_branches(ctx, [(ctx.options["then_subgraph_index"], "then"), (ctx.options["else_subgraph_index"], "else")],
                      1)


def _branch_io(ctx: PrepareContext, first: int) -> tuple:
    """(selector values or None, inputs from `first` on, outputs when prepare fixed their shapes, branches bound
    for the inputs): kept while the node keeps its preparation (its inputs' storage)."""
    io = ctx.host_data
    if io is None:
        outs = [ctx.output_array(i) for i in range(ctx.num_outputs)]
        io = ctx.host_data = (ctx.input_array(0).reshape(-1) if first else None,
                              [ctx.input_array(i) for i in range(first, ctx.num_inputs)],
                              outs if all(o is not None for o in outs) else None, {})
    return io


def _run_branch(ctx: PrepareContext, io: tuple, branch: int) -> None:
    """Run subgraph `branch` on the node's inputs and write its results to the node's outputs."""
    _, inputs, outs, bound = io
    ctx.restart_subgraph_variables(branch)  # officially allocated again at every run: variables restart
    b = bound.get(branch)
    if b is None or not b.valid():
        b = bound[branch] = ctx.bind_subgraph(branch, inputs)
    for k in b.used_inputs:
        np.copyto(b.inputs[k], inputs[k])
    b.run()
    if outs is not None and b.static_outputs and b.valid() and all(o.shape == r.shape
                                                                     for o, r in zip(outs, b.outputs)):
        for dst, v in zip(outs, b.outputs):
            np.copyto(dst, v)
    else:
        for i in range(ctx.num_outputs):
            ctx.set_output_array(i, b.output(i))


def _run_if(ctx: PrepareContext) -> None:
    io = _branch_io(ctx, 1)
    _run_branch(ctx, io, ctx.options["then_subgraph_index" if io[0][0] else "else_subgraph_index"])


IF = kernel("IF", host=_run_if)(_prepare_if)


def _prepare_case(ctx: PrepareContext) -> None:
    branches = list(ctx.options.get("branch_subgraph_indices") or [])
    ctx.check(len(branches) > 0, "has no branch subgraphs (branch_subgraph_indices is empty)")
    ctx.check(ctx.num_inputs >= 1, "needs the branch index as input 0")
    index = ctx.input(0)
    ctx.check(index.dtype == np.int32 and index.size == 1,
              f"branch index must be one int32, is {index.dtype.name} of shape {list(index.shape)}")
    _prepare_branches(ctx, [(b, f"branch {k}") for k, b in enumerate(branches)], 1)


def _run_case(ctx: PrepareContext) -> None:
    """The branch the index names; an index out of range takes the last branch, as the official kernel."""
    io = _branch_io(ctx, 1)
    branches = ctx.options["branch_subgraph_indices"]
    k = int(io[0][0])
    _run_branch(ctx, io, branches[k if 0 <= k < len(branches) else len(branches) - 1])


STABLEHLO_CASE = kernel("STABLEHLO_CASE", host=_run_case)(_prepare_case)


def _prepare_composite(ctx: PrepareContext) -> None:
    ctx.check(ctx.num_inputs > 0, "has no inputs")
    _prepare_branches(ctx, [(ctx.options["decomposition_subgraph_index"], "decomposition")], 0)


def _run_composite(ctx: PrepareContext) -> None:
    _run_branch(ctx, _branch_io(ctx, 0), ctx.options["decomposition_subgraph_index"])


# STABLEHLO_COMPOSITE as the official runtime runs it: its decomposition subgraph called from the host. The model
# runtime inlines the decomposition into the calling graph instead (or puts a fused kernel in its place), so the
# graph stays compiled (lite_numba.runtime.composites): the rewrite replaces the nodes whose kernel carries
# meta["inline_subgraph"] (the option naming the subgraph); LITE_NUMBA_COMPOSITES=call keeps this host path.
STABLEHLO_COMPOSITE = kernel("STABLEHLO_COMPOSITE", host=_run_composite)(_prepare_composite)
STABLEHLO_COMPOSITE.meta["inline_subgraph"] = "decomposition_subgraph_index"


def _prepare_call_once(ctx: PrepareContext) -> None:
    _check_io(ctx, ctx.options["init_subgraph_index"], 0, None, "init")
    ctx.lower_control_flow()  # the init subgraph inside the compiled runner, behind the same flag


def _run_call_once(ctx: PrepareContext) -> None:
    """Once per interpreter (not again after reset_all_variables(), as officially): the flag is an int64 array in
    the resources, shared with the compiled path (lite_numba.runtime.control.lowering)."""
    index = ctx.options["init_subgraph_index"]
    flag = ctx.resources.setdefault("call_once_flags", {}).setdefault(index, np.zeros(1, np.int64))
    if flag[0] == 0:
        ctx.call_subgraph(index, [])
        flag[0] = 1


CALL_ONCE = kernel("CALL_ONCE", host=_run_call_once)(_prepare_call_once)


def _resource_id(ctx: PrepareContext) -> int:
    ids = ctx.resources.setdefault("resource_ids", {})
    key = (ctx.options.get("container") or "", ctx.options.get("shared_name") or "")
    return ids.setdefault(key, len(ids))


@njit(cache=True, nogil=True)
def fill_resource_id(out, rid):
    for k in range(out.size):
        out[k] = rid


@kernel("VAR_HANDLE")
def VAR_HANDLE(ctx: PrepareContext) -> None:
    """The resource id of (container, shared_name), fixed per interpreter: written by a compiled kernel (no host
    step) and known at prepare time."""
    dt = ctx.output(0).dtype
    ctx.check(dt.kind in "iu", f"the handle output must be a RESOURCE (or integer) tensor, got {dt.name}")
    out = ctx.set_output(0, ctx.output(0).shape)
    rid = _resource_id(ctx)
    ctx.set_known_value(0, np.full(out.shape, rid, out.dtype))
    ctx.call(fill_resource_id, ctx.view(out, (out.size,)), rid)



def _variables(ctx: PrepareContext) -> dict:
    return ctx.resources.setdefault("variables", {})


# Resource variables whose shape and type the model fixes run compiled: READ_VARIABLE / ASSIGN_VARIABLE copy between
# the arena and the variable's storage, a numpy array that never moves once a compiled node uses it ("pinned"),
# addressed by the kernels through its data pointer; a flag array records whether it was assigned (reading before
# that is an error, as in the official runtime). Host-side accesses (CALL_ONCE's init subgraph, subgraphs that get
# the resource as an input) use the same storage and flag.

@intrinsic
def _copy_bytes_at(typingctx, dst, src, n):
    """memcpy(dst, src, n) between integer addresses (no array is made, so the kernels need no reference counting)."""
    if not all(isinstance(t, types.Integer) for t in (dst, src, n)):
        return None

    def codegen(context, builder, sig, args):
        i8p = context.get_value_type(types.voidptr)
        cgutils.raw_memcpy(builder, builder.inttoptr(args[0], i8p), builder.inttoptr(args[1], i8p), args[2], 1)
        return context.get_dummy_value()

    return types.void(dst, src, n), codegen


@intrinsic
def _flag_at(typingctx, addr, value):
    """The int64 at addr; value >= 0: stored there first."""
    if not (addr == types.int64 and value == types.int64):
        return None

    def codegen(context, builder, sig, args):
        ptr = builder.inttoptr(args[0], context.get_value_type(types.CPointer(types.int64)))
        with builder.if_then(builder.icmp_signed(">=", args[1], args[1].type(0))):
            builder.store(args[1], ptr)
        return builder.load(ptr)

    return types.int64(types.int64, types.int64), codegen


@njit(cache=True, nogil=True, _nrt=False)
def read_variable(addr, flag_addr, out):
    """out (bytes) = the variable's bytes at addr; flag_addr: its int64 'assigned' flag."""
    if _flag_at(flag_addr, -1) == 0:
        raise ValueError("a resource variable is read before it was assigned")
    _copy_bytes_at(out.ctypes.data, addr, out.size)


@njit(cache=True, nogil=True, _nrt=False)
def assign_variable(value, addr, flag_addr):
    _copy_bytes_at(addr, value.ctypes.data, value.size)
    _flag_at(flag_addr, 1)


def _flags(ctx: PrepareContext) -> dict:
    return ctx.resources.setdefault("variable_flags", {})


def _pinned_storage(ctx: PrepareContext, shape, dtype):
    """(storage, flag) of the variable this node's resource input names, pinned for compiled access; None when the
    resource id is known only at run time or the variable already holds another shape or type (host path)."""
    try:
        rid = int(np.asarray(ctx.value(0)).reshape(-1)[0])
    except NeedsValue:
        return None
    v = _variables(ctx).get(rid)
    if v is None:
        v = _variables(ctx)[rid] = np.zeros(shape, dtype)
        _flags(ctx)[rid] = np.zeros(1, np.int64)
    elif v.shape != tuple(shape) or v.dtype != np.dtype(dtype):
        return None
    flag = _flags(ctx).setdefault(rid, np.ones(1, np.int64))  # assigned on the host before it was pinned
    return v, flag


def _check_resource_input(ctx: PrepareContext) -> None:
    """Input 0 names the variable: a RESOURCE (or integer) tensor holding its id, as the official runtime requires
    (a float tensor there was found by the campaign: its NaN reached int() at run time)."""
    rid = ctx.input(0)
    ctx.check(rid is not None and rid.dtype.kind in "iu", f"input 0 (the resource id) must be a RESOURCE or INT32 "
                                                          f"tensor, got {rid.dtype.name if rid is not None else None}")
    ctx.check(rid.size >= 1, f"input 0 (the resource id) is empty (shape {list(rid.shape)})")


def _prepare_read(ctx: PrepareContext) -> None:
    _check_resource_input(ctx)
    out = ctx.output(0)
    if _declared_static(ctx, out):
        # the model fixes the variable's shape: the output keeps its planned storage and what follows stays
        # compiled; a variable of another shape fails at run time with the planned and actual shapes
        ctx.set_output(0, out.shape)
        pinned = _pinned_storage(ctx, out.shape, out.dtype) if out.size else None
        if pinned is not None:
            v, flag = pinned
            ctx.call(read_variable, v.ctypes.data, flag.ctypes.data, ctx.view(out, (out.nbytes,), np.uint8))
        return
    ctx.defer()


def _run_read(ctx: PrepareContext) -> None:
    io = ctx.host_data
    if io is None:  # (resource id storage, output storage when static): kept while the node's storage is
        io = ctx.host_data = (ctx.input_array(0).reshape(-1), ctx.output_array(0))
    rid, out = io
    rid = int(rid[0])
    value = _variables(ctx).get(rid)
    flag = _flags(ctx).get(rid)
    if value is None or (flag is not None and flag[0] == 0):
        ctx.fail(f"resource variable {rid} is read before it was assigned")
    if out is not None and out.shape == value.shape and out.dtype == value.dtype:
        np.copyto(out, value)
    else:
        ctx.set_output_array(0, value)  # a fixed (static) output of another shape fails: planned with shape ...


READ_VARIABLE = kernel("READ_VARIABLE", host=_run_read)(_prepare_read)


def _prepare_assign(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=2, outputs=0)
    _check_resource_input(ctx)
    value = ctx.input(1)
    if value.size and (value.data is not None or _declared_static(ctx, value)):  # (a constant: CALL_ONCE's init)
        pinned = _pinned_storage(ctx, value.shape, value.dtype)
        if pinned is not None:
            v, flag = pinned
            ctx.call(assign_variable, ctx.view(value, (value.nbytes,), np.uint8), v.ctypes.data, flag.ctypes.data)


def _run_assign(ctx: PrepareContext) -> None:
    io = ctx.host_data
    if io is None:  # (resource id storage, value storage): kept while the node's storage is, as in _run_read
        io = ctx.host_data = (ctx.input_array(0).reshape(-1), ctx.input_array(1))
    rid, value = io
    rid = int(rid[0])
    old = _variables(ctx).get(rid)
    if old is not None and old.dtype != value.dtype:
        ctx.fail(f"resource variable {rid} holds {old.dtype.name}, cannot assign {value.dtype.name}")
    flag = _flags(ctx).get(rid)
    if old is not None and old.shape == value.shape:
        np.copyto(old, value)  # readers copy out of it, so the storage can be reused
    elif flag is not None:  # pinned: compiled nodes address this storage
        ctx.fail(f"resource variable {rid} has shape {list(old.shape)} fixed by the model, cannot assign shape "
                 f"{list(value.shape)}")
    else:
        _variables(ctx)[rid] = np.array(value, copy=True)
    if flag is not None:
        flag[0] = 1


ASSIGN_VARIABLE = kernel("ASSIGN_VARIABLE", host=_run_assign)(_prepare_assign)
