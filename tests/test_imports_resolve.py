"""Every ``from orsbench… import name`` in the repository names something that exists.

Imports inside functions run only when that function does: a benchmark script or a rarely used
branch can keep importing a module a refactor removed and nobody notices until someone runs it
(``benchmarks/html_report.py`` imported ``orsbench.clients.drivers`` for a whole wave after the
client targets moved to a registry). This walks the source of every folder that imports orsbench
— the package, the benchmarks, the training smoke, the conformance suite and the tests — and
resolves each such import without running the code around it.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("orsbench", "benchmarks", "training_smoke", "conformance", "tests")
OURS = ("orsbench", "training_smoke")


def _imports() -> list[tuple[str, int, str, str | None]]:
    """(file, line, module, name or None) for each absolute import of our own packages."""
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=rel)):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] in OURS:
                    found += [(rel, node.lineno, node.module, alias.name) for alias in node.names if alias.name != "*"]
                elif isinstance(node, ast.Import):
                    found += [(rel, node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] in OURS]
    return found


def _resolves(module: str, name: str | None) -> str | None:
    """None when ``from module import name`` (or ``import module``) would work, else why not."""
    try:
        imported = importlib.import_module(module)
    except ImportError as exc:
        return f"{type(exc).__name__}: {exc}"
    if name is None or hasattr(imported, name):
        return None
    try:
        importlib.import_module(f"{module}.{name}")
    except ImportError:
        return f"{module} has no {name!r}"
    return None


def test_the_walk_finds_the_imports_inside_functions() -> None:
    """The walk itself can fail: it must see imports nested in function bodies, not only at the top."""
    nested = [i for i in _imports() if i[0] == "orsbench/cli/matrix.py" and i[2] == "orsbench.clients.targets"]
    assert nested, "the walk missed cli/matrix.py's import of the client targets inside run()"
    assert _resolves("orsbench.clients", "no_such_module_here") is not None


def test_every_import_of_orsbench_resolves() -> None:
    broken = []
    for path, line, module, name in _imports():
        why = _resolves(module, name)
        if why is not None:
            broken.append(f"{path}:{line}: from {module} import {name}: {why}")
    if broken:
        pytest.fail("imports that name what no longer exists:\n" + "\n".join(broken))
