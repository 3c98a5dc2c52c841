"""The compatibility matrix: clients × servers × scenarios, and clients × fault profiles on the mock.

Each cell names the verdict a correct client gets (:func:`expected`) and the
pinned upstream defects that make it differ (:func:`cell_defects`). This module
only gathers a cell's facts (:func:`facts`: the scenario's tools and script, the
fault profile's facts) and asks every defect: each pinned defect carries its own
predicate for the cells it shows in and what it does to the verdict
(:class:`orsbench.upstream.defects.Defect`), the same facts the conformance
suite's ``xfail(strict=True)`` marks and ``orsbench check``'s binding group use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from orsbench.upstream import defects as D
from orsbench.clientcheck.episodes import INDEX, SPLIT, Script, scenarios, script, sent_rewards
from orsbench.clientcheck.profiles import Profile, profile, profiles
from orsbench.clients.targets import CLIENT_TARGETS
from orsbench.scenarios import get_scenario, suite_params
from orsbench.servers.implementations import ors_servers
from orsbench.verdict import Verdict

#: Default server chunk size (``ServerConfig.chunk_size``).
_CHUNK = 4096


def servers() -> list[str]:
    """Every ORS server implementation, from the implementations registry (``speaks_ors``)."""
    return ors_servers()


@dataclass(frozen=True)
class Cell:
    client: str
    server: str
    #: The scenario played (for a profile cell: the profile's scenario).
    scenario: str
    profile: str | None = None

    @property
    def id(self) -> str:
        where = f"{self.server}:{self.profile}" if self.profile else f"{self.server}:{self.scenario}"
        return f"{self.client}@{where}"

    @property
    def script(self) -> Script:
        """The calls the server must see: the scenario's script — or the profile's, where it goes on past ``finished``
        (§13.14) — once per run and episode of the profile (``two-runs``: twice)."""
        return (profile(self.profile).script() if self.profile else script(self.scenario)).repeated(self.runs * self.episodes)

    @property
    def episodes(self) -> int:
        """Episodes each run plays (the profile's ``episodes``, §13.15; 1 for a scenario cell)."""
        return profile(self.profile).episodes if self.profile else 1

    @property
    def runs(self) -> int:
        """Times the client plays the script in one process (the profile's ``runs``; 1 for a scenario cell)."""
        return profile(self.profile).runs if self.profile else 1


def plan(
    clients: list[str] | None = None, server_names: list[str] | None = None, profile_names: list[str] | None = None
) -> list[Cell]:
    """Every cell, narrowed to the given clients/servers/profiles (``[]`` profiles: none)."""
    clients = clients or CLIENT_TARGETS.names()
    server_names = server_names or servers()
    cells = [Cell(c, s, sc) for s in server_names for sc in scenarios() for c in clients]
    if "mock" in server_names:
        chosen = [p for p in profiles() if profile_names is None or p.name in profile_names]
        cells += [Cell(c, "mock", p.scenario, p.name) for p in chosen for c in clients]
    return cells


def profile_of(cell: Cell) -> Profile:
    assert cell.profile is not None, f"{cell.id} is a scenario cell"
    return profile(cell.profile)


@cache
def _task0_tools(scenario: str) -> tuple[D.JSON, ...]:
    sc = get_scenario(scenario, **suite_params(scenario))
    try:
        task = sc.list_tasks(SPLIT)[INDEX]
    except NotImplementedError:
        task = sc.get_task(SPLIT, INDEX)
    return tuple(t.spec() for t in sc.session_tools(task).values())


@cache
def _index_only(scenario: str) -> bool:
    try:
        get_scenario(scenario, **suite_params(scenario)).list_tasks(SPLIT)
    except NotImplementedError:
        return True
    return False


def _split_spaces(s: Script) -> bool:
    """A result longer than one SSE chunk with runs of spaces: some chunk then starts with a space."""
    return any(st.expect is not None and len(st.expect) > _CHUNK and "  " in st.expect for st in s.steps)


def _omits_a_default(scenario: str, s: Script) -> bool:
    """A scripted call leaves out an optional parameter that has a JSON default."""
    tools = {t["name"]: t for t in _task0_tools(scenario)}
    for step in s.steps:
        props = ((tools.get(step.tool) or {}).get("input_schema") or {}).get("properties") or {}
        if any(name not in step.args and isinstance(prop, dict) and prop.get("default") is not None for name, prop in props.items()):
            return True
    return False


def _several_envs(scenario: str) -> bool:
    return len(get_scenario(scenario).served()) > 1


@cache
def facts(cell: Cell) -> D.CellFacts:
    """What the pinned defects' predicates know of ``cell``: its scenario's tools and script, its profile's facts."""
    s = cell.script
    played = profile_of(cell).facts if cell.profile is not None else None
    return D.CellFacts(
        client=cell.client,
        server=cell.server,
        scenario=cell.scenario,
        profile=cell.profile,
        tools=_task0_tools(cell.scenario),
        index_only=_index_only(cell.scenario),
        several_envs=_several_envs(cell.scenario),
        finishes=s.finished,
        spaced_long_result=_split_spaces(s),
        omits_a_default=_omits_a_default(cell.scenario, s),
        expects_error=played is not None and (played.expect == "error" or (played.refuses_discovery and _reads_listings(cell.client))),
        refuses_session=played is not None and played.refuses_session,
        refuses_discovery=played is not None and played.refuses_discovery,
        reads_listings=_reads_listings(cell.client),
        retry_after=played is not None and played.retry_after,
        url_only=cell.profile is not None and not profile_of(cell).sdk_urls,
        rewards_before_the_end=s.rewards_before_the_end,
        rewards=sent_rewards(cell.scenario),
        refuses_non_finite=_refuses_non_finite(cell.client),
        terminated=played is not None and played.terminate,
        calls_after_finished=s.goes_on_after_finished,
        finishing_reply_goes_on=s.finishing_reply_goes_on,
        runs=cell.runs,
        episodes=cell.episodes,
        setup_fails=played is not None and played.fails_setup,
        aggregates_over_scored=_aggregates_over_scored(cell.client),
    )


def _reads_listings(client: str) -> bool:
    """The client's code path reads a discovery route (its target's ``listings``): under a profile that refuses them
    with 402 (§13.12), a correct client of that kind reports the refusal; one that reads none plays on."""
    return bool(CLIENT_TARGETS.get(client).listings)


def _refuses_non_finite(client: str) -> bool:
    """The client's consumer profile refuses an episode whose only reward is ``NaN`` (it checks what it takes)."""
    return CLIENT_TARGETS.get(client).consumer.predict([math.nan], finished=True).refused is not None


def _aggregates_over_scored(client: str) -> bool:
    """The client's own aggregation over several episodes leaves a failed one out (its consumer profile's ``aggregate``)."""
    return CLIENT_TARGETS.get(client).consumer.aggregate == "scored"


def expected(cell: Cell) -> Verdict:
    """The verdict a correct client gets in ``cell`` (a clear error, where the profile asks for one)."""
    return facts(cell).expected


def cell_defects(cell: Cell) -> list[D.Defect]:
    """The pinned defects that make this cell's outcome differ from :func:`expected`, first the one that decides it."""
    return D.shown_in(facts(cell))


def rule_defects(cell: Cell) -> dict[str, D.Defect]:
    """Client checks of rules (not of the episode's outcome) the pinned defects make fail, by check id.

    The verdict does not depend on them (a check whose ``effect`` is a rule); the conformance suite pins
    each one, so a fixed upstream shows up as a strict xfail that passes.
    """
    return D.broken_rules(facts(cell))


def server_defects(server: str) -> list[D.Defect]:
    """Pinned defects of a server implementation (only ors-sdk's has its own upstream)."""
    return [d for d in D.DEFECTS.values() if d.on_server(server)]


def client_defects(client: str) -> list[D.Defect]:
    """Every pinned defect a client inherits (its own and those of the libraries it drives)."""
    return [d for d in D.DEFECTS.values() if client in d.clients]


def predicted(cell: Cell) -> Verdict:
    """The verdict the pinned defects predict (the conformance suite checks each prediction)."""
    return D.predicted(facts(cell))
