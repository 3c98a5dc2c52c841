"""The compatibility matrix: clients × servers × scenarios, and clients × fault profiles on the mock.

Each cell names the verdict a correct client gets (:func:`expected`) and the
pinned upstream defects that make it differ (:func:`cell_defects`), decided by
predicates over the scenario (its tools' JSON Schemas, its script, its task
API) and the profile — the same predicates the conformance suite's
``xfail(strict=True)`` marks and ``orsbench check``'s binding group use.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from orsbench.upstream import defects as D
from orsbench.clientcheck.episodes import INDEX, SPLIT, Script, scenarios, script
from orsbench.clientcheck.profiles import SCENARIO as PROFILE_SCENARIO
from orsbench.clientcheck.profiles import FAIL_CLEARLY, Profile, profiles
from orsbench.clients.targets import CLIENT_TARGETS
from orsbench.scenarios import get_scenario, suite_params
from orsbench.servers.implementations import ors_servers

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
        return script(self.scenario)


def plan(
    clients: list[str] | None = None, server_names: list[str] | None = None, profile_names: list[str] | None = None
) -> list[Cell]:
    """Every cell, narrowed to the given clients/servers/profiles (``[]`` profiles: none)."""
    clients = clients or CLIENT_TARGETS.names()
    server_names = server_names or servers()
    cells = [Cell(c, s, sc) for s in server_names for sc in scenarios() for c in clients]
    if "mock" in server_names:
        chosen = [p for p in profiles() if profile_names is None or p.name in profile_names]
        cells += [Cell(c, "mock", PROFILE_SCENARIO, p.name) for p in chosen for c in clients]
    return cells


def profile_of(cell: Cell) -> Profile:
    return next(p for p in profiles() if p.name == cell.profile)


def expected(cell: Cell) -> str:
    return "fails clearly" if cell.profile in FAIL_CLEARLY else "survives"


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


def cell_defects(cell: Cell) -> list[D.Defect]:
    """The pinned defects that make this cell's outcome differ from :func:`expected`, first the one that shows."""
    found: list[D.Defect] = []
    s = cell.script
    client, profile = cell.client, cell.profile
    if client == "inspect" and profile is None and _index_only(cell.scenario):
        return [D.DEFECTS["inspect-list-tasks-only"]]
    if client == "inspect" and profile == "flaky-5xx":
        return [D.DEFECTS["inspect-5xx-fails-eval"]]
    if client == "firehorse" and profile is None and cell.server == "ors-sdk":
        return [D.DEFECTS["firehorse-get-task-env-name"]]
    if profile == "url-only" and client == "trl":  # given the URL alone, its session traffic goes to sessions.<host>
        return [D.DEFECTS["session-url"]]
    if profile == "url-only" and client == "inspect":  # the dataset comes from the URL, the sessions do not
        return [D.DEFECTS["inspect-solver-drops-base-url"]]
    if client == "firehorse" and profile == "setup-failure":
        return [D.DEFECTS["firehorse-setup-leaks-session"]]
    if profile == "cut-before-task-id":  # the cut call is re-sent blind: the tool runs twice (§13.5)
        return [D.DEFECTS["ors-cut-call-rerun" if client == "ors" else "cut-call-rerun"]]
    if client == "inspect" and profile is None and any(D.sanitized_params(t) for t in _task0_tools(cell.scenario)):
        return [D.DEFECTS["sanitizer-drops-keyword-params"]]  # the model's call lacks the parameter: nothing runs
    if client == "trl" and (d := D.factory_defect(_task0_tools(cell.scenario))) is not None:
        return [d]
    if profile == "stream-no-end":
        return [D.DEFECTS["ors-no-end-retried-forever" if client == "ors" else "no-end-retried-forever"]]
    if client == "trl" and profile == "setup-failure":
        return [D.DEFECTS["reset-leaks-session"]]
    if profile is None and _split_spaces(s):
        found.append(D.DEFECTS["ors-chunk-lstrip" if client == "ors" else "chunk-lstrip"])
    if profile is None and _several_envs(cell.scenario):
        # The script names a non-default environment; the client's session lands in the default one (§13.6).
        found.append(D.DEFECTS["ors-create-without-env-name" if client == "ors" else "env-name-not-sent"])
    if client == "inspect" and profile is None and s.rewards_before_the_end:
        found.append(D.DEFECTS["inspect-last-reward-only"])  # only the last call's reward reaches the score
    return found


def _omits_a_default(cell: Cell) -> bool:
    """A scripted call leaves out an optional parameter that has a JSON default."""
    tools = {t["name"]: t for t in _task0_tools(cell.scenario)}
    for step in cell.script.steps:
        props = ((tools.get(step.tool) or {}).get("input_schema") or {}).get("properties") or {}
        if any(name not in step.args and prop.get("default") is not None for name, prop in props.items()):
            return True
    return False


def _several_envs(scenario: str) -> bool:
    return len(get_scenario(scenario).served()) > 1


def rule_defects(cell: Cell) -> dict[str, D.Defect]:
    """Client checks of rules (not of the episode's outcome) the pinned defects make fail, by check id.

    The verdict does not depend on them (:data:`orsbench.clients.run.OUTCOME_CHECKS`); the conformance
    suite pins each one, so a fixed upstream shows up as a strict xfail that passes.
    """
    found: dict[str, D.Defect] = {}
    client, profile = cell.client, cell.profile
    # Refused at /create_session, or (given the URL alone) no session reaches the server: no /create to judge.
    creates = profile != "credits-402" and not (profile == "url-only" and client in ("trl", "inspect"))
    if client in ("openreward", "trl") and creates:
        found["client.env_name"] = D.DEFECTS["env-name-not-sent"]
    if client == "ors" and creates:
        found["client.env_name"] = D.DEFECTS["ors-create-without-env-name"]
        if profile in ("flaky-5xx", "rate-limit", "slow-setup"):
            found["client.retry_after"] = D.DEFECTS["ors-retry-after-ignored"]
    if client == "trl" and not D.factory_defect(_task0_tools(cell.scenario)) and _omits_a_default(cell):
        found["client.script_followed"] = D.DEFECTS["defaults-sent"]
    if client == "firehorse" and profile is None and _several_envs(cell.scenario) and cell.server != "ors-sdk":
        found["client.env_name"] = D.DEFECTS["firehorse-task-env-name"]
    shown = {d.id for d in cell_defects(cell)}
    if client == "inspect" and "sanitizer-drops-keyword-params" in shown:
        found["client.script_followed"] = D.DEFECTS["sanitizer-drops-keyword-params"]  # the call lacks the parameter
    if client == "inspect" and profile is None and _several_envs(cell.scenario):
        found["client.env_name"] = D.DEFECTS["env-name-not-sent"]
    return found


def server_defects(server: str) -> list[D.Defect]:
    """Pinned defects of a server implementation (only ors-sdk's has its own upstream)."""
    return [d for d in D.DEFECTS.values() if not d.clients and d.upstream.startswith(server + " ")]


def client_defects(client: str) -> list[D.Defect]:
    """Every pinned defect a client inherits (its own and those of the libraries it drives)."""
    return [d for d in D.DEFECTS.values() if client in d.clients]


#: What each pinned defect makes of a cell that should survive.
DEFECT_VERDICT: dict[str, str] = {
    "inspect-finished-error": "fails clearly",
    "inspect-list-tasks-only": "fails clearly",
    "inspect-5xx-fails-eval": "fails clearly",
    "inspect-solver-drops-base-url": "fails clearly",
    "inspect-last-reward-only": "fails silently",
    "session-url": "fails clearly",
    "firehorse-get-task-env-name": "fails clearly",
    "firehorse-setup-leaks-session": "fails silently",
    "keyword-crash": "fails clearly",
    "chunk-lstrip": "fails silently",
    "ors-chunk-lstrip": "fails silently",
    "no-end-retried-forever": "hangs",
    "ors-no-end-retried-forever": "hangs",
    "reset-leaks-session": "fails silently",
    "ors-sdk-no-finish-latch": "fails silently",
    "sanitizer-drops-keyword-params": "fails silently",
    "env-name-not-sent": "fails silently",
    "ors-create-without-env-name": "fails silently",
    "cut-call-rerun": "fails silently",
    "ors-cut-call-rerun": "fails silently",
}


def predicted(cell: Cell) -> str:
    """The verdict the pinned defects predict (the conformance suite checks each prediction)."""
    found = cell_defects(cell)
    return DEFECT_VERDICT[found[0].id] if found else expected(cell)
