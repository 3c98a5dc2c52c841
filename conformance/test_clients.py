"""Every client target plays every scenario on every server implementation, and every fault profile on the mock.

The clients (``orsbench.clients.drivers.CLIENTS``: the openreward SDK client,
ors-sdk's client, TRL's OpenRewardSpec, inspect-openreward under a real
``inspect_ai.eval`` with a scripted offline ``mockllm/model``) each play the
scenario's scripted episode in a forked child with a deadline; the verdict is
read from both ends (``orsbench.clients.run``): what the client showed, and the
server's ``/_orsbench/stats`` — tools run exactly once, no session left open.

A cell that a pinned upstream defect breaks carries ``xfail(strict=True)``
naming it (``orsbench.clients.cells.cell_defects``, the same predicates the
matrix and ``orsbench check``'s binding group use), and a second test asserts
the defect shows as described, so an xfail never hides some other failure.

Scenario cells run on the server the rest of the suite uses for that scenario
(same xdist group, so it starts once); the profile batch plays all profiles at
once in two halves, so its waiting spreads over two workers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")

import pytest

from conformance.targets import Target, group
from orsbench.clients import cells as C
from orsbench.clients.drivers import CLIENTS
from orsbench.clients.profiles import profiles
from orsbench.clients.run import Outcome, Running, play
from orsbench.servers.launch import start

# Imported before any fork: the children skip the imports.
import openreward  # noqa: E402,F401
import inspect_ai  # noqa: E402,F401
import inspect_openreward  # noqa: E402,F401
import ors.client  # noqa: E402,F401
import trl.experimental.openreward  # noqa: E402,F401

_PROFILE_HALVES = 2


def _scenario_cells() -> list[Any]:
    out = []
    for cell in C.plan(profile_names=[]):
        found = C.cell_defects(cell)
        marks = [pytest.mark.xdist_group(group(cell.scenario, cell.server)), *([found[0].mark()] if found else [])]
        out.append(pytest.param(cell, id=cell.id, marks=marks))
    return out


def _profile_half(cell: C.Cell) -> int:
    return [p.name for p in profiles()].index(cell.profile) % _PROFILE_HALVES


def _profile_cells(with_defects: bool | None = None) -> list[Any]:
    out = []
    for cell in C.plan(server_names=["mock"]):
        if cell.profile is None:
            continue
        found = C.cell_defects(cell)
        if with_defects is not None and bool(found) != with_defects:
            continue
        marks = [pytest.mark.xdist_group(f"client-profiles-{_profile_half(cell)}")]
        if with_defects is None and found:
            marks.append(found[0].mark())
        out.append(pytest.param(cell, id=cell.id, marks=marks))
    return out


@pytest.fixture(scope="session")
def scenario_outcomes() -> dict[str, Outcome]:
    return {}


def _scenario_outcome(cell: C.Cell, serve: Callable[..., Target], cache: dict[str, Outcome]) -> Outcome:
    if cell.id not in cache:
        cache[cell.id] = play(cell.client, serve(cell.scenario, cell.server).server, cell.script)
    return cache[cell.id]


@pytest.fixture(scope="session")
def profile_outcomes() -> Iterator[Callable[[C.Cell], Outcome]]:
    """Each half of the profiles, played on first use: one server per profile, all profiles at once, client by client."""
    played: dict[str, Outcome] = {}
    started: list[Any] = []

    def get(cell: C.Cell) -> Outcome:
        if cell.id not in played:
            half = _profile_half(cell)
            chosen = [p for p in profiles() if [q.name for q in profiles()].index(p.name) % _PROFILE_HALVES == half]
            keys = [(p.name, c if p.per_client else "") for p in chosen for c in CLIENTS]
            configs = {key: next(p for p in chosen if p.name == key[0]).config() for key in dict.fromkeys(keys)}
            with ThreadPoolExecutor(max_workers=4) as pool:
                servers = dict(zip(configs, pool.map(lambda cfg: start(C.PROFILE_SCENARIO, config=cfg), configs.values())))
            started.extend(servers.values())
            for client in CLIENTS:
                wave = CLIENTS[client].concurrency  # Inspect evals starve each other on 2 cores
                for start_at in range(0, len(chosen), wave):
                    batch = chosen[start_at : start_at + wave]
                    runs = {
                        p.name: Running(client, servers[p.name, client if p.per_client else ""], C.Cell(client, "mock", C.PROFILE_SCENARIO, p.name).script, p.deadline)
                        for p in batch
                    }
                    for name, run in sorted(runs.items(), key=lambda item: item[1].deadline):
                        played[C.Cell(client, "mock", C.PROFILE_SCENARIO, name).id] = run.finish()
        return played[cell.id]

    yield get
    for server in started:
        server.stop()


def _assert_expected(cell: C.Cell, outcome: Outcome) -> None:
    assert outcome.verdict == C.expected(cell), outcome.describe()
    assert outcome.sessions_left_open <= 0, outcome.describe()
    over = {t: n for t, n in outcome.calls.items() if n > cell.script.calls.get(t, 0)}
    assert not over, f"a tool ran more often than it was called: {outcome.describe()}"


@pytest.mark.parametrize("cell", _scenario_cells())
def test_client_plays_the_scenario(cell: C.Cell, serve: Callable[..., Target], scenario_outcomes: dict[str, Outcome]) -> None:
    """The winning episode: reward 1.0, finished, every text as written, each tool once, no session left."""
    _assert_expected(cell, _scenario_outcome(cell, serve, scenario_outcomes))


@pytest.mark.parametrize("cell", _profile_cells())
def test_client_under_a_fault_profile(cell: C.Cell, profile_outcomes: Callable[[C.Cell], Outcome]) -> None:
    """Survives the recoverable profiles without running a tool twice; fails clearly on the others."""
    _assert_expected(cell, profile_outcomes(cell))


# -- a pinned defect shows as described (so an xfail never hides another failure) -----------------
_SIGNATURES: dict[str, Callable[[Outcome], bool]] = {
    "inspect-finished-error": lambda o: o.error is not None and "episode_finished" in o.error and o.reward is None,
    "inspect-list-tasks-only": lambda o: o.failed_at == "dataset" and "list_tasks is not supported" in (o.error or ""),
    "inspect-5xx-fails-eval": lambda o: o.reward is None and any(s in (o.error or "") for s in ("502", "503", "504", "Upstream unavailable")),
    "keyword-crash": lambda o: o.failed_at == "spec" and (o.error or "").startswith("SyntaxError"),
    "chunk-lstrip": lambda o: any("showed" in p for p in o.problems) or "episode_finished" in (o.error or ""),
    "ors-chunk-lstrip": lambda o: any("showed" in p for p in o.problems),
    "no-end-retried-forever": lambda o: o.hung and o.requests.get("fault stream-no-end", 0) >= 3,
    "ors-no-end-retried-forever": lambda o: o.hung and o.requests.get("fault stream-no-end", 0) >= 3,
    "reset-leaks-session": lambda o: o.failed_at == "reset" and o.sessions_left_open == 1,
}


def _defect_cells() -> list[Any]:
    out = []
    for param in _scenario_cells() + _profile_cells(with_defects=True):
        cell = param.values[0]
        if C.cell_defects(cell):
            marks = [m for m in param.marks if m.name == "xdist_group"]
            out.append(pytest.param(cell, id=cell.id, marks=marks))
    return out


@pytest.mark.parametrize("cell", _defect_cells())
def test_pinned_defect_shows_as_described(
    cell: C.Cell,
    serve: Callable[..., Target],
    scenario_outcomes: dict[str, Outcome],
    profile_outcomes: Callable[[C.Cell], Outcome],
) -> None:
    outcome = profile_outcomes(cell) if cell.profile else _scenario_outcome(cell, serve, scenario_outcomes)
    defect = C.cell_defects(cell)[0]
    assert _SIGNATURES[defect.id](outcome), f"[{defect.id}] expected: {defect.behaviour}\nobserved: {outcome.describe()}"


def test_every_cell_defect_has_a_signature() -> None:
    used = {d.id for cell in C.plan() for d in C.cell_defects(cell)}
    assert used <= set(_SIGNATURES), sorted(used - set(_SIGNATURES))


# -- what inspect-openreward shows the model, per tool ----------------------------------------------
def _zoo_tool_params() -> list[Any]:
    from orsbench.clients import defects as D
    from orsbench.scenarios import get_scenario

    out = []
    for tool in get_scenario("schema-zoo").shared_tools():
        spec = tool.spec()
        marks = [pytest.mark.xdist_group(group("schema-zoo", "mock"))]
        if (defect := D.inspect_binding_defect(spec)) is not None:
            marks.append(defect.mark())
        out.append(pytest.param(spec, id=spec["name"], marks=marks))
    return out


@pytest.mark.parametrize("spec", _zoo_tool_params())
def test_inspect_shows_every_parameter_with_its_type(
    spec: dict[str, Any], serve: Callable[..., Target], scenario_outcomes: dict[str, Outcome]
) -> None:
    """Inspect's ToolInfo (what mockllm, like any model, receives) types every parameter the server typed."""
    from orsbench.clients import schema_view

    outcome = _scenario_outcome(C.Cell("inspect", "mock", "schema-zoo"), serve, scenario_outcomes)
    seen = {t["name"]: t for t in outcome.tools_seen}
    assert spec["name"] in seen, f"the model was not shown {spec['name']!r}: {sorted(seen)}"
    served = schema_view.view(spec.get("input_schema"))["types"]
    shown_props = (seen[spec["name"]].get("parameters") or {}).get("properties") or {}
    shown = {n: schema_view.types_of(p) for n, p in shown_props.items()}
    untyped = [n for n, kinds in served.items() if kinds and not shown.get(n)]
    assert not untyped, f"shown without a type: {untyped} (served {served}, shown {shown})"


# -- ors-sdk's client and a 4xx -----------------------------------------------------------------------
@pytest.mark.xdist_group(group("echo", "mock"))
@pytest.mark.xfail(strict=True, reason=f"[ors-4xx-retried] {C.D.DEFECTS['ors-4xx-retried'].summary}")
def test_ors_client_sends_a_refused_create_once(serve: Callable[..., Target]) -> None:
    """/create with an index past the end is a 400; a client must not repeat it."""
    from ors.client import ORS

    target = serve("echo", "mock")
    client = ORS(base_url=target.url)
    before = target.stats()["requests"].get("POST /create", 0)
    try:
        with pytest.raises(Exception, match="400"):
            with client.environments.get("echo").session(split="train", index=10_000) as session:
                session.get_prompt()
    finally:
        client.close()
    assert target.stats()["requests"].get("POST /create", 0) - before == 1
