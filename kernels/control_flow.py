"""Control flow and resource variables: WHILE, IF, CALL_ONCE, VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE.

These run on the host (Python) at invoke time and call other subgraphs, each of which runs as its own compiled
executor; loop-carried tensors may change shape between iterations (the called subgraph is re-prepared then)."""

from __future__ import annotations

import numpy as np
from numba import njit

from lite_numba.ops import PrepareContext, kernel


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
    ctx.defer()


def _run_while(ctx: PrepareContext) -> None:
    cond, body = ctx.options["cond_subgraph_index"], ctx.options["body_subgraph_index"]
    # call_subgraph copies its inputs into the called subgraph and returns fresh arrays: no copies needed here
    values = [ctx.input_array(i) for i in range(ctx.num_inputs)]
    limit = ctx.max_while_iterations
    iterations = 0
    while True:
        (c,) = ctx.call_subgraph(cond, values)
        if c.dtype != np.bool_ or c.size != 1:
            ctx.fail(f"cond subgraph {cond} returned {c.dtype.name}{list(c.shape)}, expected a bool scalar")
        if not bool(c.reshape(-1)[0]):
            break
        new = ctx.call_subgraph(body, values)
        for i, (a, b) in enumerate(zip(values, new)):
            if a.dtype != b.dtype:
                ctx.fail(f"body subgraph {body} output {i} has type {b.dtype.name}, loop variable is {a.dtype.name}")
        values = new
        iterations += 1
        if limit is not None and iterations >= limit:
            raise RuntimeError(f"WHILE (node {ctx.node.index}) did not finish within {limit} iterations")
    for i, v in enumerate(values):
        ctx.set_output_array(i, v)


WHILE = kernel("WHILE", host=_run_while)(_prepare_while)


def _prepare_if(ctx: PrepareContext) -> None:
    n = ctx.num_inputs - 1
    for key in ("then_subgraph_index", "else_subgraph_index"):
        _check_io(ctx, ctx.options[key], n, ctx.num_outputs, key.split("_")[0])
    ctx.check(ctx.input(0).size == 1, f"condition must have one element, has shape {list(ctx.input(0).shape)}")
    ctx.defer()


def _run_if(ctx: PrepareContext) -> None:
    cond = bool(ctx.input_array(0).reshape(-1)[0])
    branch = ctx.options["then_subgraph_index" if cond else "else_subgraph_index"]
    outs = ctx.call_subgraph(branch, [ctx.input_array(i) for i in range(1, ctx.num_inputs)])
    for i, v in enumerate(outs):
        ctx.set_output_array(i, v)


IF = kernel("IF", host=_run_if)(_prepare_if)


def _prepare_call_once(ctx: PrepareContext) -> None:
    _check_io(ctx, ctx.options["init_subgraph_index"], 0, None, "init")


def _run_call_once(ctx: PrepareContext) -> None:
    key = ("call_once", ctx.options["init_subgraph_index"])
    if key not in ctx.resources:
        ctx.call_subgraph(ctx.options["init_subgraph_index"], [])
        ctx.resources[key] = True


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
    out = ctx.set_output(0, ctx.output(0).shape)
    rid = _resource_id(ctx)
    ctx.set_known_value(0, np.full(out.shape, rid, out.dtype))
    ctx.call(fill_resource_id, ctx.view(out, (out.size,)), rid)



def _variables(ctx: PrepareContext) -> dict:
    return ctx.resources.setdefault("variables", {})


def _prepare_read(ctx: PrepareContext) -> None:
    out = ctx.output(0)
    if _declared_static(ctx, out):
        # the model fixes the variable's shape: the output keeps its planned storage and what follows stays
        # compiled; a variable of another shape fails at run time with the planned and actual shapes
        ctx.set_output(0, out.shape)
        return
    ctx.defer()


def _run_read(ctx: PrepareContext) -> None:
    rid = int(ctx.input_array(0).reshape(-1)[0])
    value = _variables(ctx).get(rid)
    if value is None:
        ctx.fail(f"resource variable {rid} is read before it was assigned")
    ctx.set_output_array(0, value)  # a fixed (static) output of another shape fails: planned with shape ...


READ_VARIABLE = kernel("READ_VARIABLE", host=_run_read)(_prepare_read)


def _prepare_assign(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=2, outputs=0)


def _run_assign(ctx: PrepareContext) -> None:
    rid = int(ctx.input_array(0).reshape(-1)[0])
    value = ctx.input_array(1)
    old = _variables(ctx).get(rid)
    if old is not None and old.dtype != value.dtype:
        ctx.fail(f"resource variable {rid} holds {old.dtype.name}, cannot assign {value.dtype.name}")
    if old is not None and old.shape == value.shape:
        np.copyto(old, value)  # readers copy out of it, so the storage can be reused
    else:
        _variables(ctx)[rid] = np.array(value, copy=True)


ASSIGN_VARIABLE = kernel("ASSIGN_VARIABLE", host=_run_assign)(_prepare_assign)
