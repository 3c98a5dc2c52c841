"""The seams hold: faults use the engine's public API, and every floor only points down.

An AST walk over every Python file of the project (imports inside functions
count too), so a lazy import cannot slip past. The floors are read from the
table of ``docs/architecture.md`` ("The floors, as the folders show them"): every
module stands on the floor its folder or file is listed on, imports only from its
own floor or below, and no two modules import each other round a cycle.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "orsbench"
ENGINE = PACKAGE / "servers" / "engine"  # a package: its rooms share one object
HTTP = PACKAGE / "servers" / "http.py"
DOC = ROOT / "docs" / "architecture.md"
#: The folders whose modules stand on a floor (tests/ and examples/ stand beside the house).
HOUSE = ("orsbench", "conformance", "benchmarks", "training_smoke")


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


@cache
def floors() -> dict[str, int]:
    """``path -> floor`` from the architecture's table: a file (``orsbench/protocol.py``) or a folder (``orsbench/wire/``)."""
    table = DOC.read_text().split("## The floors, as the folders show them")[1].split("\n## ")[0]
    out: dict[str, int] = {}
    for line in table.splitlines():
        row = re.match(r"\|\s*(\d+)\s*\|([^|]*)\|", line)
        if row:
            for path in re.findall(r"`([\w/.-]+)`", row.group(2)):
                out[path] = int(row.group(1))
    return out


def floor_of(relative: str) -> int | None:
    """The floor of a file (its own row, else the nearest folder listed), or None."""
    best: tuple[str, int] | None = None
    for path, floor in floors().items():
        if relative == path or (path.endswith("/") and relative.startswith(path)):
            if best is None or len(path) > len(best[0]):
                best = (path, floor)
    return best[1] if best else None


def module_file(module: str) -> str | None:
    """``orsbench.wire.sse`` → ``orsbench/wire/sse.py`` (a package: its ``__init__.py``), when it exists."""
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return str(candidate.relative_to(ROOT))
    return None


def targets(module: str, names: list[str]) -> list[str]:
    """The files an import runs: each ``from M import name`` that is a module, else ``M`` itself."""
    found = [f for n in names if (f := module_file(f"{module}.{n}"))]
    if len(found) < len(names) or not names:
        found += [f for f in [module_file(module)] if f]
    return found


def house_files() -> Iterator[Path]:
    for folder in HOUSE:
        yield from sorted((ROOT / folder).rglob("*.py"))


def test_the_table_names_every_floor_in_order() -> None:
    assert sorted(set(floors().values())) == list(range(1, max(floors().values()) + 1))
    assert floors()["orsbench/protocol.py"] == 1 and floors()["orsbench/cli/"] > floors()["orsbench/clients/"]
    # What the floors test would flag: the wire (2) reaching for the command line (7).
    assert floor_of("orsbench/wire/sse.py") == 2 and [floor_of(t) for t in targets("orsbench.cli", ["types"])] == [7]


def test_every_module_stands_on_a_floor_the_architecture_names() -> None:
    """A new module (or folder) gets its row in docs/architecture.md before it gets imports."""
    unplaced = [str(p.relative_to(ROOT)) for p in house_files() if floor_of(str(p.relative_to(ROOT))) is None]
    assert not unplaced, f"on no floor of docs/architecture.md: {unplaced}"


def test_no_module_imports_from_a_floor_above_its_own() -> None:
    offences = []
    for path in house_files():
        here = floor_of(str(path.relative_to(ROOT)))
        assert here is not None
        for module, names, line in imports(ast.parse(path.read_text()), path):
            if module.split(".")[0] not in HOUSE:
                continue
            for target in targets(module, names):
                there = floor_of(target)
                if there is not None and there > here:
                    offences.append(f"{where(path, line)} (floor {here}) imports {target} (floor {there})")
    assert not offences, "\n".join(offences)


def test_servers_and_checks_stand_apart() -> None:
    """Floor 4's two halves: how a scenario is served, and evidence and checks — neither imports the other."""
    offences = []
    for mine, other in (("servers", "orsbench.checks"), ("checks", "orsbench.servers")):
        for path in sorted((PACKAGE / mine).rglob("*.py")):
            for module, _names, line in imports(ast.parse(path.read_text()), path):
                if module == other or module.startswith(other + "."):
                    offences.append(f"{where(path, line)} imports {module}")
    assert not offences, "\n".join(offences)


def _top_level_imports(tree: ast.Module, path: Path) -> Iterator[tuple[str, list[str]]]:
    """Imports that run when the module is imported: not inside a function, not under ``if TYPE_CHECKING``."""

    def walk(body: list[ast.stmt]) -> Iterator[ast.stmt]:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
                yield from walk(node.orelse)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for block in ("body", "orelse", "finalbody"):
                    yield from walk(getattr(node, block, []))
                for handler in getattr(node, "handlers", []):
                    yield from walk(handler.body)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                yield node

    for node in walk(tree.body):
        yield from ((m, names) for m, names, _line in imports(ast.Module(body=[node], type_ignores=[]), path))


def test_no_import_cycle() -> None:
    """Modules that import each other at import time (directly or round a ring) make the order they load in matter."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        edges = graph.setdefault(str(path.relative_to(ROOT)), set())
        for module, names in _top_level_imports(ast.parse(path.read_text()), path):
            if module.split(".")[0] == "orsbench":
                edges.update(targets(module, names))
    cycles = _cycles(graph)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_ring() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


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
