"""``docs/architecture.md`` stays true: a dummy of each extension point, added by touching only what it says.

Each dummy (``tests/architecture_dummies.py``) is added with ``Registry.temporarily`` and shown
usable through the front ends a user runs — nothing else in orsbench names it — and the files the
"to add one" table names exist.
"""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import httpx
import pytest

from orsbench.checks import CHECKS, Options, Status, run_checks
from orsbench.cli import SUBCOMMANDS, main
from orsbench.cli.types import fault_names
from orsbench.config import ServerConfig
from orsbench.scenarios import SCENARIOS, generic_scenarios, get_scenario
from orsbench.servers import launch
from orsbench.servers.app import build_app
from orsbench.servers.faults import FAULTS, wrap_app
from orsbench.servers.implementations import IMPLEMENTATIONS, ors_servers
from tests.architecture_dummies import (
    DUMMY_CHECK,
    DUMMY_CLIENT,
    DUMMY_EXIT,
    DUMMY_FAULT,
    DUMMY_IMPLEMENTATION,
    DUMMY_SUBCOMMAND,
    FAULTED,
    SERVED_BY,
    DummyScenario,
    build_dummy,
)

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text()


def _get(app: object, paths: list[str]) -> list[httpx.Response]:
    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://orsbench") as client:  # type: ignore[arg-type]
            return [await client.get(path) for path in paths]

    return asyncio.run(run())


def test_a_dummy_scenario_is_listed_and_served(capsys: pytest.CaptureFixture[str]) -> None:
    name = DummyScenario.name
    with SCENARIOS.temporarily(DummyScenario):
        assert main(["scenarios"]) == 0
        assert re.search(rf"^{name}\s+{re.escape(DummyScenario.summary)}$", capsys.readouterr().out, re.M)
        assert name in generic_scenarios()
        environments, tools = _get(build_app([get_scenario(name)], ServerConfig()), ["/list_environments", f"/{name}/tools"])
        assert environments.json() == [name]
        assert [t["name"] for t in tools.json()["tools"]] == ["say"]
    assert name not in SCENARIOS


def test_a_dummy_fault_applies_on_the_engine_and_around_any_app() -> None:
    with FAULTS.temporarily(DUMMY_FAULT):
        assert fault_names(DUMMY_FAULT.name) == [DUMMY_FAULT.name]  # `--fault` accepts it
        on_engine = build_app([get_scenario("echo")], ServerConfig(faults=(DUMMY_FAULT.name,)))
        around = wrap_app(build_dummy([get_scenario("echo")], ServerConfig()), (DUMMY_FAULT.name,), seed=0)
        for app in (on_engine, around):
            (health,) = _get(app, ["/health"])
            assert health.status_code == 200 and health.headers[FAULTED[0].decode()] == FAULTED[1].decode()
    (plain,) = _get(build_app([get_scenario("echo")], ServerConfig()), ["/health"])
    assert FAULTED[0].decode() not in plain.headers
    assert DUMMY_FAULT.name not in FAULTS


def test_a_dummy_subcommand_runs_through_orsbench() -> None:
    with SUBCOMMANDS.temporarily(DUMMY_SUBCOMMAND):
        assert main([DUMMY_SUBCOMMAND.name]) == DUMMY_EXIT
    assert DUMMY_SUBCOMMAND.name not in SUBCOMMANDS


def test_a_dummy_implementation_serves_a_dummy_scenario_and_a_dummy_check_passes_on_it() -> None:
    with IMPLEMENTATIONS.temporarily(DUMMY_IMPLEMENTATION):
        assert DUMMY_IMPLEMENTATION.name in ors_servers()  # every ORS-server choice lists it
    # The server process registers the dummy scenario and implementation itself and runs `orsbench serve`.
    server = launch.start_command(
        [sys.executable, str(ROOT / "tests" / "architecture_dummies.py"), "{port}"], env={"PYTHONPATH": str(ROOT)}
    )
    try:
        assert server.env_name == DummyScenario.name
        assert httpx.get(server.url + "/health", timeout=10).headers[SERVED_BY[0].decode()] == SERVED_BY[1].decode()
        with CHECKS.temporarily(DUMMY_CHECK):
            report = run_checks(server.url, Options(env=server.env_name), only=[DUMMY_CHECK.id, "discovery.*", "session.create"])
        assert report.result(DUMMY_CHECK.id).status is Status.PASS
        assert report.exit_code == 0, [(r.id, r.status, r.message) for r in report.results if r.status is not Status.PASS]
    finally:
        server.stop()
    assert DUMMY_CHECK.id not in CHECKS


def test_a_dummy_client_target_is_a_matrix_choice_and_plays_to_a_graded_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("openreward")
    from orsbench.clients import cells as C
    from orsbench.clients import matrix as M
    from orsbench.clients.targets import CLIENT_TARGETS

    name = DUMMY_CLIENT.name
    with CLIENT_TARGETS.temporarily(DUMMY_CLIENT):
        assert main(["matrix", "--clients", name, "--servers", "mock", "--profiles", "no", "--predicted"]) == 0
        assert re.search(rf"^{name}\s+works: \d+", capsys.readouterr().out, re.M)
        cells = [c for c in C.plan([name], ["mock"], []) if c.scenario == "echo"]
        assert [c.id for c in cells] == [f"{name}@mock:echo"]
        result = M.run(cells, [name], ["mock"], budget=120, parallel=1)
    [row] = result.to_json()["cells"]
    assert row["verdict"] == "works", row
    assert result.clients[name].title == DUMMY_CLIENT.title
    assert name not in CLIENT_TARGETS


def test_every_file_the_add_table_names_exists() -> None:
    table = DOC.split("## To add one, touch these files")[1].split("## Data paths")[0]
    named = set(re.findall(r"`((?:orsbench|docs|tests)/[\w/.-]+)`", table))
    assert len(named) >= 10
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert not missing, missing
    for kind in ("check", "scenario", "fault", "server implementation", "CLI subcommand", "client target"):
        assert re.search(rf"^\| {kind} \|", table, re.M), kind


def test_every_registry_the_doc_names_is_a_registry_where_it_says() -> None:
    from orsbench.registry import Registry

    def module_of(path: str) -> object:
        return __import__(path.removesuffix(".py").replace("/", ".").removesuffix(".__init__"), fromlist=["_"])

    rows = re.findall(r"^\| `(\w+)`(?:, `(\w+)`)? \| `([\w/.]+)`(?:, `([^`]+)`)? \|", DOC, re.M)
    assert len(rows) >= 5
    for first, second, path, second_path in rows:
        assert isinstance(getattr(module_of(path), first), Registry), (first, path)
        if second:  # "`…/name.py`": beside the first path
            where = path.rsplit("/", 1)[0] + "/" + second_path.removeprefix("…/") if second_path else path
            assert isinstance(getattr(module_of(where), second), Registry), (second, where)