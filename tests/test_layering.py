"""The seams hold: faults use the engine's public API, and layers only point down.

An AST walk over every Python file of the project (imports inside functions
count too), so a lazy import cannot slip past. See ``docs/architecture.md``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "orsbench"
ENGINE = PACKAGE / "servers" / "engine"  # a package: its rooms share one object
HTTP = PACKAGE / "servers" / "http.py"
#: Lower layers, and what they must never import.
LOWER = ("scenarios", "wire", "servers")
HIGHER = ("orsbench.checks", "orsbench.bench", "orsbench.cli", "orsbench.reports", "orsbench.load", "orsbench.pytest_plugin")


def python_files() -> Iterator[Path]:
    for folder in ("orsbench", "tests", "conformance", "training_smoke", "benchmarks"):
        yield from sorted((ROOT / folder).rglob("*.py"))


def imports(tree: ast.AST, path: Path) -> Iterator[tuple[str, list[str], int]]:
    """``(module, imported names, line)`` for every import in ``tree``; relative imports resolved."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, module] if module else base)
            yield module, [a.name for a in node.names], node.lineno


def parsed() -> Iterator[tuple[Path, ast.AST]]:
    for path in python_files():
        yield path, ast.parse(path.read_text(), filename=str(path))


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT)}:{line}"


def test_nothing_outside_the_engine_imports_its_private_names() -> None:
    offences = []
    for path, tree in parsed():
        if path.is_relative_to(ENGINE):
            continue
        for module, names, line in imports(tree, path):
            private = [n for n in names if n.startswith("_")]
            if (module == "orsbench.servers.engine" or module.startswith("orsbench.servers.engine.")) and private:
                offences.append(f"{where(path, line)} imports {', '.join(private)}")
    assert not offences, "\n".join(offences)


def test_nothing_outside_the_engine_reaches_into_an_engine_or_request() -> None:
    """No ``engine._x`` read or written, no ``request._body`` written, anywhere but their own modules."""
    offences = []
    for path, tree in parsed():
        if path == HTTP or path.is_relative_to(ENGINE):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
                continue
            owner = node.value.id if isinstance(node.value, ast.Name) else ""
            if owner == "engine" or (node.attr == "_body" and isinstance(node.ctx, ast.Store)):
                offences.append(f"{where(path, node.lineno)} touches {owner or '…'}.{node.attr}")
    assert not offences, "\n".join(offences)


def test_faults_touch_no_private_member_of_anything_else() -> None:
    """Faults are middlewares or engine hooks: they use public API only (their own ``self`` aside)."""
    offences = []
    for path in sorted((PACKAGE / "servers" / "faults").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                if not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                    offences.append(f"{where(path, node.lineno)} .{node.attr}")
    assert not offences, "\n".join(offences)


@pytest.mark.parametrize("layer", LOWER)
def test_lower_layers_import_nothing_above_them(layer: str) -> None:
    offences = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        tree = ast.parse(path.read_text())
        for module, names, line in imports(tree, path):
            targets = [module] + ([f"{module}.{n}" for n in names] if module == "orsbench" else [])
            for target in targets:
                if any(target == h or target.startswith(h + ".") for h in HIGHER):
                    offences.append(f"{where(path, line)} imports {target}")
    assert not offences, "\n".join(offences)


def test_the_walk_sees_what_it_should() -> None:
    """The checks above would pass vacuously if the walk found nothing: it finds the known imports."""
    seen = {module for path, tree in parsed() for module, _names, _line in imports(tree, path)}
    assert "orsbench.servers.engine" in seen and "orsbench.checks" in seen
    tree = ast.parse("from .engine import _x\n")
    assert list(imports(tree, PACKAGE / "servers" / "faults.py")) == [("orsbench.servers.engine", ["_x"], 1)]


def test_the_version_lives_in_a_module_that_imports_nothing_and_matches_pyproject() -> None:
    """A report stamps the version; reading it must not pull the package's public surface into that layer."""
    path = PACKAGE / "version.py"
    tree = ast.parse(path.read_text())
    assert not list(imports(tree, path))
    version = next(n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant))
    assert f'version = "{version}"' in (ROOT / "pyproject.toml").read_text()
    offences = [
        where(p, line)
        for p, t in parsed()
        if p.is_relative_to(PACKAGE)
        for module, names, line in imports(t, p)
        if module == "orsbench" and "__version__" in names
    ]
    assert not offences, offences


def test_conformance_does_not_import_the_training_smoke() -> None:
    offences = [
        f"{where(path, line)} imports {module}"
        for path, tree in parsed()
        if path.is_relative_to(ROOT / "conformance")
        for module, _names, line in imports(tree, path)
        if module.split(".")[0] == "training_smoke"
    ]
    assert not offences, "\n".join(offences)


def test_the_violation_router_does_not_import_the_app_that_loads_the_faults() -> None:
    path = PACKAGE / "servers" / "faults" / "router.py"
    assert "orsbench.servers.app" not in {module for module, _names, _line in imports(ast.parse(path.read_text()), path)}
