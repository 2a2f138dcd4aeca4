"""The package's modules and their imports, read with `ast` (module level and inside functions, so what would run,
not what one process happened to import): the walker the structure tests share (test_registry; test_layering has
the same walk). Not a test file."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
# the repository's folders and the package names they install as (pyproject's package-dir)
FOLDERS = {"lite_numba": "lite_numba", "kernels": "lite_numba.kernels", "plugins": "lite_numba.plugins"}
# An import inside a function is allowed only for lazy loading of something heavy or optional, marked on its line
# (or the line before) with a comment containing "lazy:".
LAZY_MARK = "lazy:"


def modules() -> dict[str, pathlib.Path]:
    """Module name -> source file, for every module of lite_numba/, kernels/ and plugins/."""
    mods = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            mods[".".join([package, *parts])] = path
    return mods


MODULES = modules()


def resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a `from ... import` in `module` names."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(name: str, path: pathlib.Path):
    """(target module, imported names, line, inside a function, marked lazy) for every import of a project module."""
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    is_package = path.name == "__init__.py"
    out = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                marked = any(LAZY_MARK in lines[i] for i in range(max(0, child.lineno - 2), child.lineno))
                if isinstance(child, ast.Import):
                    for alias in child.names:
                        if alias.name.startswith("lite_numba"):
                            out.append((alias.name, (), child.lineno, in_function, marked))
                else:
                    target = resolve(name, is_package, child)
                    if not target.startswith("lite_numba"):
                        continue
                    names = tuple(a.name for a in child.names)
                    # `from pkg import module` imports a module, not a name
                    subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
                    if subs:
                        for s in subs:
                            out.append((s, (), child.lineno, in_function, marked))
                        names = tuple(n for n in names if f"{target}.{n}" not in MODULES)
                        if not names:
                            continue
                    out.append((target, names, child.lineno, in_function, marked))
            visit(child, inner)

    visit(tree, False)
    return out


IMPORTS = {name: imports(name, path) for name, path in MODULES.items()}
