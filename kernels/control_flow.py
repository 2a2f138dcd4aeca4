"""Control flow and resource variables: WHILE, IF, CALL_ONCE, VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE.

These run on the host (Python) at invoke time and call other subgraphs, each of which runs as its own compiled
executor; loop-carried tensors may change shape between iterations (the called subgraph is re-prepared then)."""

from __future__ import annotations

import numpy as np

from lite_numba.ops import PrepareContext, kernel


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
    values = [np.array(ctx.input_array(i), copy=True) for i in range(ctx.num_inputs)]
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
    outs = ctx.call_subgraph(branch, [np.array(ctx.input_array(i), copy=True) for i in range(1, ctx.num_inputs)])
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


def _prepare_var_handle(ctx: PrepareContext) -> None:
    ctx.set_output(0, ctx.output(0).shape)


def _run_var_handle(ctx: PrepareContext) -> None:
    out = ctx.output(0)
    ctx.set_output_array(0, np.full(out.shape, _resource_id(ctx), out.dtype))


VAR_HANDLE = kernel("VAR_HANDLE", host=_run_var_handle)(_prepare_var_handle)


def _variables(ctx: PrepareContext) -> dict:
    return ctx.resources.setdefault("variables", {})


def _prepare_read(ctx: PrepareContext) -> None:
    ctx.defer()


def _run_read(ctx: PrepareContext) -> None:
    rid = int(ctx.input_array(0).reshape(-1)[0])
    value = _variables(ctx).get(rid)
    if value is None:
        ctx.fail(f"resource variable {rid} is read before it was assigned")
    ctx.set_output_array(0, value)


READ_VARIABLE = kernel("READ_VARIABLE", host=_run_read)(_prepare_read)


def _prepare_assign(ctx: PrepareContext) -> None:
    ctx.check_num(inputs=2, outputs=0)


def _run_assign(ctx: PrepareContext) -> None:
    rid = int(ctx.input_array(0).reshape(-1)[0])
    value = ctx.input_array(1)
    old = _variables(ctx).get(rid)
    if old is not None and old.dtype != value.dtype:
        ctx.fail(f"resource variable {rid} holds {old.dtype.name}, cannot assign {value.dtype.name}")
    _variables(ctx)[rid] = np.array(value, copy=True)


ASSIGN_VARIABLE = kernel("ASSIGN_VARIABLE", host=_run_assign)(_prepare_assign)
