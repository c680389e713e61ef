"""Each package's modules form a tree: no import circle, function-level imports included.

The graph is built with ``ast`` from every ``import`` a module of ``rlgate.<package>`` runs,
at module level or inside a function (import-linter's layers see only the packages);
imports under ``if TYPE_CHECKING:`` never run and are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "rlgate"
PACKAGES = sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").is_file())


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[str]:
    """The modules an AST imports, descending into functions but not TYPE_CHECKING blocks."""
    found: list[str] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            found += [m for n in node.orelse for m in _imports(ast.Module([n], []))]
            continue
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        found += _imports(node)
    return found


def package_graph(package: str, root: Path = SRC) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports (direct children only)."""
    base = root / package
    modules = {p.stem for p in base.glob("*.py") if p.stem != "__init__"}
    modules |= {p.name for p in base.iterdir() if (p / "__init__.py").is_file()}
    graph: dict[str, set[str]] = {}
    for name in sorted(modules):
        path = base / f"{name}.py" if (base / f"{name}.py").is_file() else base / name
        files = [path] if path.is_file() else sorted(path.rglob("*.py"))
        deps: set[str] = set()
        for file in files:
            for imported in _imports(ast.parse(file.read_text(encoding="utf-8"))):
                parts = imported.split(".")
                if parts[:2] == ["rlgate", package] and len(parts) > 2 and parts[2] in modules:
                    deps.add(parts[2])
        graph[name] = deps - {name}
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (its modules in order), or None."""
    state: dict[str, int] = {}  # 1 on the path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state and (found := visit(dep)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


@pytest.mark.parametrize("package", PACKAGES)
def test_the_modules_of_each_package_form_a_tree(package):
    circle = cycle(package_graph(package))
    assert circle is None, f"rlgate.{package}: import circle {' -> '.join(circle or [])}"


def test_a_function_level_import_circle_is_caught(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from rlgate.pkg.b import x\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from rlgate.pkg.c import y\n"
        "def f():\n    from rlgate.pkg import a\n"
    )
    (pkg / "c.py").write_text("import rlgate.pkg.b\n")
    graph = package_graph("pkg", tmp_path)
    assert graph == {"a": {"b"}, "b": {"a"}, "c": {"b"}}  # the TYPE_CHECKING import is left out
    assert cycle(graph) == ["a", "b", "a"]
