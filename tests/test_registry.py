"""The op table (kernels/registry.py) is complete and honest: every row resolves to a kernel of its op, every integer
variant named in a row resolves, and every kernel module is reachable from the table (no orphan kernel code)."""

from __future__ import annotations

import pytest
from lite_numba.kernels import registry
from source_tree import IMPORTS, MODULES

from lite_numba.ops import OpKernel
from lite_numba.runtime.resolver import BuiltinOpResolver

ROWS = [(op, lo, hi, k) for op, lo, hi, k in registry.BUILTINS] + [(n, lo, hi, k) for n, lo, hi, k in registry.CUSTOMS]
# ops whose float kernel hands quantized inputs to a variant named in the same row
QUANTIZED_VARIANTS = {"ADD", "SUB", "MUL", "SQUARED_DIFFERENCE", "MAXIMUM", "MINIMUM", "EXP", "LOG", "RSQRT", "SQRT",
                      "ABS", "LOGISTIC", "TANH", "SOFTMAX", "LOG_SOFTMAX", "HARD_SWISH", "GELU", "ELU", "LEAKY_RELU",
                      "PRELU", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "FULLY_CONNECTED"}


@pytest.mark.parametrize("op,lo,hi,k", ROWS, ids=[f"{r[0]}-v{r[1]}-{r[2]}" for r in ROWS])
def test_row_resolves_to_a_kernel_of_its_op(op, lo, hi, k):
    assert 1 <= lo <= hi
    resolved = k.resolve()
    assert isinstance(resolved, OpKernel)
    assert callable(resolved.prepare)
    # the kernel's name is the op's (detection's post-process kernel is named by its builtin-resolver name)
    assert resolved.name in (op, getattr(k, "_where", ("", ""))[1])
    variant = getattr(k, "quantized", None)
    if op in QUANTIZED_VARIANTS:
        assert variant is not None, f"{op}: the row names no quantized variant"
    if variant is not None:
        q = variant.resolve()
        assert isinstance(q, OpKernel) and q.name == op and q.prepare is not resolved.prepare
    strings = getattr(k, "strings", None)  # the STRING variant: a host kernel of the same op
    if strings is not None:
        s = strings.resolve()
        assert isinstance(s, OpKernel) and s.name == op and s.host is not None and s.prepare is not resolved.prepare


def test_versions_do_not_overlap():
    seen: dict[str, list[tuple[int, int]]] = {}
    for op, lo, hi, _k in ROWS:
        for a, b in seen.get(op, []):
            assert hi < a or lo > b, f"{op}: versions {lo}-{hi} overlap {a}-{b}"
        seen.setdefault(op, []).append((lo, hi))


def test_resolver_serves_exactly_the_table():
    r = BuiltinOpResolver()
    for op, lo, hi, k in registry.BUILTINS:
        assert r.find_builtin(op, lo) is k and r.find_builtin(op, hi) is k
        assert (lo, hi) in r.builtin_versions(op)
    assert r.find_builtin("ADD", 99) is None


def _reachable() -> set[str]:
    start = {f"lite_numba.kernels.{k.module}" for *_r, k in ROWS}
    start |= {f"lite_numba.kernels.{k.quantized.module}" for *_r, k in ROWS if getattr(k, "quantized", None)}
    start |= {f"lite_numba.kernels.{k.strings.module}" for *_r, k in ROWS if getattr(k, "strings", None)}
    start |= {f"lite_numba.kernels.{k.module}" for k in registry.REWRITES.values()}
    start |= {f"lite_numba.kernels.{k.module}" for *_r, k in registry.COMPOSITES}
    seen, todo = set(), list(start)
    while todo:
        m = todo.pop()
        if m in seen or m not in MODULES:
            continue
        seen.add(m)
        todo += [t for t, *_ in IMPORTS[m]]
    return seen


def test_every_kernel_module_is_reachable_from_the_table():
    reach = _reachable()
    kernel_modules = {m for m, p in MODULES.items() if m.startswith("lite_numba.kernels.") and p.name != "__init__.py"}
    orphans = sorted(kernel_modules - reach - {"lite_numba.kernels.registry"})
    assert not orphans, f"kernel modules no registry row reaches: {orphans}"


@pytest.mark.parametrize("name,lo,hi,k", registry.COMPOSITES, ids=[r[0] for r in registry.COMPOSITES])
def test_composite_row_resolves_to_a_fused_kernel(name, lo, hi, k):
    """COMPOSITES rows: a kernel named after its composite, with the `accepts` check the rewrite asks."""
    assert 0 <= lo <= hi
    resolved = k.resolve()
    assert isinstance(resolved, OpKernel) and resolved.name == name and callable(resolved.meta["accepts"])
