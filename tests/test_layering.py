"""The package's import structure (issue 12): no import cycles, no imports inside functions to dodge one, no
kernel module reaching into the core's private names, and the core importing kernels only through the registry.

Walks every module's source with `ast` (module level and inside functions), so it checks what would run, not what
one process happened to import.
"""

from __future__ import annotations

import pytest
from source_tree import IMPORTS, MODULES, ROOT
from source_tree import imports as _imports


def _graph() -> dict[str, set[str]]:
    graph = {name: set() for name in MODULES}
    for name, imports in IMPORTS.items():
        for target, _names, _line, _inner, _lazy in imports:
            # importing a.b.c also runs a and a.b; only edges between project modules count
            if target in MODULES and target != name:
                graph[name].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    import sys

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def _is_kernel(module: str) -> bool:
    return module.startswith("lite_numba.kernels") or module.startswith("lite_numba.plugins")


def test_walker_sees_the_package():
    assert len(MODULES) > 60
    assert "lite_numba.kernels.linear.conv" in MODULES
    edges = _graph()["lite_numba.kernels.linear.conv"]
    assert "lite_numba.kernels.linear.conv_loops" in edges and "lite_numba.kernels.base.threads" in edges


def test_no_import_cycles():
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_imports_inside_functions_unless_lazy():
    bad = [f"{MODULES[name].relative_to(ROOT)}:{line} imports {target}"
           for name, imports in IMPORTS.items() for target, _n, line, inner, lazy in imports if inner and not lazy]
    assert not bad, "imports inside functions without a 'lazy:' reason:\n" + "\n".join(bad)


def test_kernels_use_only_public_names_of_the_core():
    bad = []
    for name, imports in IMPORTS.items():
        if not _is_kernel(name):
            continue
        for target, names, line, _inner, _lazy in imports:
            if _is_kernel(target):
                continue
            private = [n for n in names if n.startswith("_")] or ([target] if "._" in target else [])
            if private:
                bad.append(f"{MODULES[name].relative_to(ROOT)}:{line} imports {target}: {', '.join(private)}")
    assert not bad, "\n".join(bad)


def test_no_private_names_across_kernel_modules():
    bad = []
    for name, imports in IMPORTS.items():
        for target, names, line, _inner, _lazy in imports:
            private = [n for n in names if n.startswith("_") and n != "__version__"]
            if private and target != name:
                bad.append(f"{MODULES[name].relative_to(ROOT)}:{line} imports {target}: {', '.join(private)}")
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


# The core's modules that may import kernel modules, and which: the resolver reads the op table, the testing and
# inspection tools report ISA levels.
CORE_MAY_IMPORT = {"lite_numba.kernels", "lite_numba.kernels.registry", "lite_numba.plugins"}


def test_core_imports_kernels_only_through_the_registry():
    bad = []
    for name, imports in IMPORTS.items():
        if _is_kernel(name):
            continue
        for target, _names, line, _inner, _lazy in imports:
            if _is_kernel(target) and target not in CORE_MAY_IMPORT:
                bad.append(f"{MODULES[name].relative_to(ROOT)}:{line} imports {target}")
    assert not bad, "the core imports kernel modules directly:\n" + "\n".join(bad)


# kernels/'s families: each imports the others' building blocks only through kernels/base, which imports no family;
# the registry (the table) may import any of them
KERNEL_FAMILIES = ("elementwise", "linear", "movement", "reduce", "sequence", "host", "signal")


def _family(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["lite_numba", "kernels"] or len(parts) < 3:
        return None
    return parts[2]


def test_kernel_families_meet_only_in_base():
    bad = []
    for name, imports in IMPORTS.items():
        family = _family(name)
        if family not in (*KERNEL_FAMILIES, "base"):
            continue
        for target, _names, line, _inner, _lazy in imports:
            other = _family(target)
            if other in KERNEL_FAMILIES and other != family:
                bad.append(f"{MODULES[name].relative_to(ROOT)}:{line} imports {target}")
    assert not bad, "a kernel family imports another family's module (move the shared piece to kernels/base):\n" + \
        "\n".join(bad)


def test_walker_finds_a_cycle_and_a_hidden_import():
    # the checks themselves can fail: a two-module cycle and a function-level import are reported
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    tree_src = "def f():\n    from lite_numba.kernels.base import isa\n"
    path = ROOT / "tests" / "_layering_probe.py"
    try:
        path.write_text(tree_src)
        found = _imports("lite_numba.probe", path)
    finally:
        path.unlink()
    assert found and found[0][3] and not found[0][4]


if __name__ == "__main__":  # a report for a person: python tests/test_layering.py
    for c in _cycles(_graph()):
        print("cycle:", " <-> ".join(c))
    pytest.main([__file__, "-q"])
