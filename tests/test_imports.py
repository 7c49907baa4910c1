"""No import circles in dcaccel (issue 23 item 6), no module importing a private name of another
package, and every module imports alone.

The import graph is read from the source with ``ast``: every ``import`` of a dcaccel module, at module
level or inside a function (a deferred import that closes a circle is a circle all the same), but not
those under ``if TYPE_CHECKING:``. ``from package import name`` is an edge to the submodule when ``name``
is one, else to the package.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dcaccel"


def _modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(tree: ast.Module):
    """The import statements of a module, but those under ``if TYPE_CHECKING:``."""
    skipped = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    statements = (ast.Import, ast.ImportFrom)
    return [node for node in ast.walk(tree) if isinstance(node, statements) and id(node) not in skipped]


def import_graph(root: Path = PACKAGE) -> nx.DiGraph:
    """Module -> the package's modules it imports."""
    modules = _modules(root)
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            graph.add_edges_from((name, target) for target in targets if target in modules and target != name)
    return graph


def circles(graph: nx.DiGraph) -> list[set[str]]:
    """The modules that import each other, directly or through others (strongly connected, more than one)."""
    return [component for component in nx.strongly_connected_components(graph) if len(component) > 1]


def test_no_import_circle():
    assert circles(import_graph()) == []


def private_imports(root: Path = PACKAGE) -> list[str]:
    """``module <- source.name`` for every ``from source import _name`` (``TYPE_CHECKING`` ones included)
    whose source is outside the importing module's package."""
    found = []
    for name, path in _modules(root).items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            owner = node.module if node.module in (package, f"{package}.{node.module.rpartition('.')[2]}") else None
            found.extend(
                f"{name} <- {node.module}.{alias.name}"
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__") and owner is None
            )
    return found


def test_no_module_imports_a_private_name_of_another_package():
    assert private_imports() == []


def test_a_private_import_from_another_package_is_found(tmp_path):
    """``compose.py`` took ``_Group`` and ``_instantiate`` from the extraction (issue 23): a private name is
    its own package's business; a sibling module of the same package may share it."""
    package = tmp_path / "dcaccel"
    for folder in ("dag", "exploration"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "dag" / "extract.py").write_text("_Group = 1\n")
    (package / "dag" / "compose.py").write_text("from dcaccel.dag.extract import _Group\n")
    (package / "exploration" / "sweep.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from dcaccel.dag.extract import _Group, __all__\n"
    )
    assert private_imports(package) == ["dcaccel.exploration.sweep <- dcaccel.dag.extract._Group"]


def test_a_deferred_import_closing_a_circle_is_found(tmp_path):
    """The circle this round removed (issue 23): ``scheduler.schedule`` imported ``scheduler.architecture``
    inside a method, which imported ``scheduler.schedule`` at module level."""
    package = tmp_path / "dcaccel"
    (package / "scheduler").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "scheduler" / "__init__.py").write_text("from dcaccel.scheduler.schedule import Schedule\n")
    (package / "scheduler" / "schedule.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from dcaccel.scheduler import graph\n"
        "class Schedule:\n    def cost_on(self):\n        from dcaccel.scheduler.architecture import costs\n"
    )
    (package / "scheduler" / "architecture.py").write_text("from dcaccel.scheduler.schedule import Schedule\n")
    (package / "scheduler" / "graph.py").write_text("from dcaccel.scheduler import schedule\n")
    assert circles(import_graph(package)) == [{"dcaccel.scheduler.schedule", "dcaccel.scheduler.architecture"}]


def _imports_alone(module: str) -> tuple[str, str]:
    code = [sys.executable, "-c", f"import {module}"]
    done = subprocess.run(code, cwd=PACKAGE.parent, capture_output=True, text=True, check=False)
    return module, done.stderr.strip().splitlines()[-1] if done.returncode else ""


@pytest.mark.slow
def test_every_module_imports_alone():
    """Each module in a fresh interpreter, first of the package (an order-dependent circle fails here)."""
    with ThreadPoolExecutor(2) as pool:
        failed = {module: error for module, error in pool.map(_imports_alone, _modules()) if error}
    assert failed == {}
