"""No import cycles among the project's own modules.

``find_cycles`` reads every ``.py`` file of the given packages with ``ast`` (no module
is imported, so no Django setup is needed), takes every import statement in it -
module level, under ``if TYPE_CHECKING:``, inside functions - as an edge, and answers
the strongly connected components of two or more modules (Tarjan's algorithm,
iterative).  A component is a set of modules each of which reaches every other one
through imports: a cycle, however it is hidden.

Edges: ``import a.b`` goes to ``a.b``; ``from a.b import c`` to ``a.b`` and, when
there is one, to the module ``a.b.c``; relative imports are resolved against the
importing module's package; a package is its ``__init__.py``, named like the package.
Imports of modules outside the packages are ignored, and so are ``migrations``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("omniroute_site", "gateway", "combos", "providers", "telemetry")
SKIPPED_DIRS = frozenset({"migrations", "__pycache__"})
#: the fields of a node that hold statements (``handlers``: except clauses,
#: ``cases``: match cases, each with a body of its own)
STATEMENT_LISTS = ("body", "orelse", "finalbody", "handlers", "cases")


@pytest.fixture
def _stop_background_threads() -> None:
    """Replaces the suite-wide fixture of this name (``tests/conftest.py``), which
    depends on ``django_db_setup``: these tests read files and need no database."""


def module_files(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``packages`` under ``root``."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if SKIPPED_DIRS.intersection(parts[:-1]):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _base(module: str, is_package: bool, level: int, name: str | None) -> str | None:
    """The absolute module a ``from`` import of ``level`` dots names (None: above
    the top level)."""
    if level == 0:
        return name
    parts = module.split(".") if is_package else module.split(".")[:-1]
    keep = len(parts) - (level - 1)
    if keep <= 0:
        return None
    base = ".".join(parts[:keep])
    return f"{base}.{name}" if name else base


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """``name`` or its longest prefix that is one of ``modules``."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _import_statements(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of ``tree``, at any depth.  An import is a statement,
    so only statement lists are searched (bodies of functions, classes, ``if``,
    ``try``, ``with``, loops and ``match`` cases), never expressions: a tenth of the
    nodes, where ``ast.walk`` would add about half the parsing time again."""
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
            continue
        for name in STATEMENT_LISTS:
            pending.extend(getattr(node, name, ()))


def _targets(module: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """Every module of ``modules`` that ``module``'s file imports, anywhere in it."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_bytes(), filename=str(path))
    for node in _import_statements(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = _base(module, is_package, node.level, node.module)
            if base is None:
                continue
            # ``from a.b import c`` runs ``a.b`` (a package: its ``__init__``) and,
            # when ``c`` is a module, ``a.b.c`` too
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for name in names:
            target = _known(name, modules)
            if target is not None:
                yield target


def import_graph(root: Path, packages: Iterable[str]) -> dict[str, set[str]]:
    """Module -> the modules it imports (only those of ``packages``)."""
    modules = module_files(root, packages)
    return {
        module: set(_targets(module, path, modules)) - {module}
        for module, path in modules.items()
    }


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, with an explicit stack (no
    recursion, so no depth limit); every node of ``graph`` is in exactly one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> Iterator[str]:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        return iter(sorted(graph.get(node, ())))

    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, visit(start))]
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    work.append((successor, visit(successor)))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while not component or component[-1] != node:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                    components.append(component)
    return components


def find_cycles(root: Path, packages: Iterable[str]) -> list[list[str]]:
    """Every import cycle among ``packages`` under ``root``: the modules of each
    strongly connected component of two or more, sorted, largest component first."""
    components = strongly_connected(import_graph(root, packages))
    cycles = [sorted(c) for c in components if len(c) >= 2]
    return sorted(cycles, key=lambda c: (-len(c), c))


def test_no_import_cycles() -> None:
    cycles = find_cycles(ROOT, PACKAGES)

    listing = "\n".join(f"  {len(c)}: {', '.join(c)}" for c in cycles)
    assert cycles == [], f"{len(cycles)} import cycles:\n{listing}"


SYNTHETIC = {
    # through a function-local import
    "pkg_a/__init__.py": "",
    "pkg_a/one.py": "def later():\n    from pkg_a import two\n\n    return two\n",
    "pkg_a/two.py": "import os\n\nimport pkg_a.one\n",
    # through an import under TYPE_CHECKING
    "pkg_a/three.py": (
        "from typing import TYPE_CHECKING\n\n"
        "if TYPE_CHECKING:\n    from pkg_a.four import Four\n"
    ),
    "pkg_a/four.py": "from pkg_a.three import Three\n",
    # through relative imports: a sibling module by name, a name from a module
    "pkg_b/__init__.py": "",
    "pkg_b/sub/__init__.py": "",
    "pkg_b/sub/five.py": "from . import six\n",
    "pkg_b/sub/six.py": "from ..sub.five import name\n",
    # through a package's __init__ (two dots from inside it)
    "pkg_b/seven.py": "from pkg_b import eight\n",
    "pkg_b/eight/__init__.py": "from ..seven import name\n",
    "pkg_b/eight/nine.py": "import pkg_b.seven\n",
    # acyclic: a chain, a local import down it, outside modules, a skipped migration
    "pkg_c/__init__.py": "",
    "pkg_c/low.py": "import json\n",
    "pkg_c/mid.py": "from django.db import models\n\nfrom pkg_c.low import loads\n",
    "pkg_c/high.py": (
        "from pkg_c import mid\n\n\n"
        "def run():\n    from pkg_c import low\n"
        "    from pkg_c.migrations import initial\n\n    return low, mid, initial\n"
    ),
    "pkg_c/migrations/__init__.py": "",
    "pkg_c/migrations/initial.py": "from pkg_c.high import run\n",
}


def test_find_cycles_sees_every_kind_of_import(tmp_path: Path) -> None:
    for name, text in SYNTHETIC.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    assert find_cycles(tmp_path, ["pkg_a", "pkg_b", "pkg_c"]) == [
        ["pkg_a.four", "pkg_a.three"],
        ["pkg_a.one", "pkg_a.two"],
        ["pkg_b.eight", "pkg_b.seven"],
        ["pkg_b.sub.five", "pkg_b.sub.six"],
    ]
    assert find_cycles(tmp_path, ["pkg_c"]) == []


def test_a_cycle_longer_than_the_recursion_limit_is_one_component() -> None:
    size = 2 * sys.getrecursionlimit()
    ring = {f"m{i}": {f"m{(i + 1) % size}"} for i in range(size)}

    (component,) = strongly_connected(ring)

    assert len(component) == size
