"""The house rules of the source tree (issue 28), checked with `ast` on every module of lite_numba/, kernels/ and
plugins/ (tests and scripts are not product code and may reach into privates):

- each folder of lite_numba/ imports only the layers its __init__ docstring names (`LAYERS`);
- no module reads or writes another module's private (`_name`) attribute: `obj._x` where `obj` is not `self` /
  `cls` and `_x` is defined (as a function, class, module name or `self._x` attribute) only in other modules;
- no folder of lite_numba/ holds more than 15 modules and no product file is over 700 lines.

tests/test_layering.py keeps the other import rules (no cycles, no unexplained imports inside functions, kernel
families meeting only in kernels/base, the core reaching kernels only through the registry).
"""

from __future__ import annotations

import ast
import pathlib
from collections import defaultdict

from source_tree import MODULES, ROOT

MAX_MODULES_PER_FOLDER = 15
MAX_LINES = 700

# What each part may import, by the part names below (a module of the part itself always may). The order is the
# layering: format and jit at the bottom, then the kernel contract (ops), kernels and plugins, the runtime, the
# public API, and the tools and scale-out adapters on top; the top-level public modules (lite_numba/__init__,
# interpreter, builder, lite, testing) may import any part.
LAYERS = {
    "version": set(),
    "format": {"version"},
    "jit": {"version"},
    "ops": {"format", "jit"},
    "kernels": {"ops", "format"},
    "plugins": {"ops", "format", "kernels"},
    "runtime": {"version", "format", "jit", "ops", "kernels", "plugins"},
    "api": {"version", "format", "jit", "ops", "runtime"},
    "batch": {"version", "format", "api", "runtime"},
    "llm": {"version", "format", "runtime", "api"},
    "tools": {"version", "format", "jit", "ops", "runtime", "api", "builder", "testing", "llm"},
}
# the LiteRT 2 API's public modules (issue 32): thin names over lite_numba.api, like lite_numba.interpreter
LITERT2_MODULES = {"compiled_model", "tensor_buffer", "environment", "options", "cpu_options", "cpu_kernel_mode",
                   "hardware_accelerator"}
TOP_LEVEL_ANY = {"lite_numba", "lite_numba.interpreter", "lite_numba.builder", "lite_numba.lite", "lite_numba.testing",
                 *(f"lite_numba.{m}" for m in LITERT2_MODULES)}


TREES = {name: ast.parse(path.read_text()) for name, path in MODULES.items()}


def _part(module: str) -> str:
    """The layer a module belongs to: kernels, plugins, a folder of lite_numba, or a top-level module's name."""
    parts = module.split(".")
    if len(parts) == 1:
        return "lite_numba"
    return parts[1]


def _targets(name: str, tree: ast.AST) -> list[tuple[str, int]]:
    """(imported project module or package, line) for every import in the module."""
    is_package = MODULES[name].name == "__init__.py"
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.startswith("lite_numba")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("lite_numba"):
                subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in MODULES]
                out += [(s, node.lineno) for s in subs] or [(target, node.lineno)]
    return out


def test_walker_sees_every_part():
    parts = {_part(m) for m in MODULES}
    assert {"format", "jit", "runtime", "api", "tools", "batch", "kernels", "plugins", "ops"} <= parts
    assert set(LAYERS) | {"lite_numba", "interpreter", "builder", "lite", "testing"} | LITERT2_MODULES >= parts, \
        f"a part without a layering rule: {sorted(parts - set(LAYERS))}"


def test_each_part_imports_only_the_layers_below_it():
    bad = []
    for name, tree in TREES.items():
        if name in TOP_LEVEL_ANY:
            continue
        mine = _part(name)
        allowed = LAYERS[mine] | {mine}
        for target, line in _targets(name, tree):
            theirs = _part(target)
            if theirs not in allowed:
                bad.append(f"{MODULES[name].relative_to(ROOT)}:{line} ({mine}) imports {target} ({theirs})")
    assert not bad, "imports against the layering (tests/test_structure.py LAYERS):\n" + "\n".join(bad)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined_here(tree: ast.AST) -> set[str]:
    """Private names a module defines: functions, classes, module-level and class-level names, `self._x` / `cls._x`
    attributes it assigns, and parameters. An attribute assigned through another object (`other._x = ...`) does
    not count: that is a write into someone else's state."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            out.add(node.attr)
        elif isinstance(node, ast.alias):
            out.add(node.asname or node.name.split(".")[0])
    return {n for n in out if _private(n)}


def test_no_module_touches_another_modules_privates():
    defined = {name: _defined_here(tree) for name, tree in TREES.items()}
    owners: dict[str, set[str]] = defaultdict(set)
    for name, names in defined.items():
        for n in names:
            owners[n].add(name)
    bad = []
    for name, tree in TREES.items():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls") and node.attr in defined[name]:
                continue
            if node.attr in defined[name]:
                continue
            others = owners.get(node.attr, set()) - {name}
            if others:
                bad.append(f"{MODULES[name].relative_to(ROOT)}:{node.lineno} uses .{node.attr} of "
                           f"{', '.join(sorted(others))}")
    assert not bad, "private names used across modules (give the owner a public method):\n" + "\n".join(bad)


def test_private_rule_sees_a_violation():
    a = ast.parse("class A:\n    def __init__(self):\n        self._state = 1\n")
    b = ast.parse("def peek(a):\n    return a._state\n")
    assert "_state" in _defined_here(a) and "_state" not in _defined_here(b)
    uses = [n.attr for n in ast.walk(b) if isinstance(n, ast.Attribute) and _private(n.attr)]
    assert uses == ["_state"]


def test_folders_and_files_stay_small():
    per_folder: dict[pathlib.Path, int] = defaultdict(int)
    for path in (ROOT / "lite_numba").rglob("*.py"):
        per_folder[path.parent] += 1
    crowded = {str(p.relative_to(ROOT)): n for p, n in per_folder.items() if n > MAX_MODULES_PER_FOLDER}
    assert not crowded, f"folders of lite_numba/ with more than {MAX_MODULES_PER_FOLDER} modules: {crowded}"
    long = {}
    for path in MODULES.values():
        n = len(path.read_text().splitlines())
        if n > MAX_LINES:
            long[str(path.relative_to(ROOT))] = n
    assert not long, f"product files over {MAX_LINES} lines (split along the seam): {long}"


def test_every_package_folder_is_installed():
    """pyproject.toml lists every package by name (kernels/ and plugins/ install under lite_numba.): a folder with an
    __init__.py missing from the list is absent from a wheel or a non-editable install, whose import then fails
    (lite_numba.llm and lite_numba.runtime.control were, found by building the aarch64 check's wheel)."""
    import pytest  # lazy: this test alone

    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python >= 3.11's")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for name, folder in config["package-dir"].items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base).parts
            if "__pycache__" not in rel:
                found.add(".".join((name, *rel)))
    assert found <= listed, f"package folders missing from pyproject.toml's packages: {sorted(found - listed)}"
