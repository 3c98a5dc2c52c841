"""Every client target plays every scenario on every server implementation, and every fault profile on the mock.

The client targets (``orsbench.clients.targets.CLIENT_TARGETS``: the openreward SDK client,
ors-sdk's client, TRL's OpenRewardSpec, inspect-openreward under ``inspect eval`` and
firehorse under its own CLI — the two agent harnesses on orsbench's scripted model)
each play the scenario's scripted episode in a forked child with a deadline; the verdict is
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
from functools import cache
from typing import Any

os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")

import pytest

from conformance.targets import SuiteTarget, group
from orsbench.clients import cells as C
from orsbench.clientcheck.profiles import profiles
from orsbench.clients import matrix as M
from orsbench.clientcheck.episodes import script
from orsbench.clients.run import ClientOutcome
from orsbench.clients.targets import CLIENT_TARGETS

# Imported before any fork: the children skip the imports.
import openreward  # noqa: E402,F401
import inspect_ai  # noqa: E402,F401
import inspect_openreward  # noqa: E402,F401
import ors.client  # noqa: E402,F401
import trl.experimental.openreward  # noqa: E402,F401
import anthropic  # noqa: E402,F401
import inspect_ai._cli.main  # noqa: E402,F401
import firehorse.cli  # noqa: E402,F401
import firehorse.agents.react  # noqa: E402,F401

_PROFILE_HALVES = 2
#: Servers playing at once inside one batch (most of an episode is waiting).
_PARALLEL = 8


def _batch(cell: C.Cell) -> str:
    """The xdist group a cell plays in: one batch per server implementation, the profiles in two halves."""
    if cell.profile is None:
        return f"clients-{cell.server}"
    names = [p.name for p in profiles()]
    return f"clients-profiles-{names.index(cell.profile) % _PROFILE_HALVES}"


def _params(cells: list[C.Cell], xfail: bool = True) -> list[Any]:
    out = []
    for cell in cells:
        found = C.cell_defects(cell)
        marks = [pytest.mark.xdist_group(_batch(cell)), *([found[0].mark()] if found and xfail else [])]
        out.append(pytest.param(cell, id=cell.id, marks=marks))
    return out


_SCENARIO_CELLS = [c for c in C.plan() if c.profile is None]
_PROFILE_CELLS = [c for c in C.plan(server_names=["mock"]) if c.profile is not None]


@cache
def _unplayable(client: str) -> str | None:
    """Why ``client`` cannot play here, else None; a command target's environment is built on first use.

    A target in another Python (platoon, benchflow: 3.12) is built by :meth:`~orsbench.clients.interpreters.Venv.ensure`
    (``.ci/run`` builds it before the suite; parallel workers wait for one build); where that Python is
    missing, its cells are skipped saying so.
    """
    command = CLIENT_TARGETS[client].command
    return None if command is None else command.venv.ensure()


@pytest.fixture(scope="session")
def outcome_of() -> Callable[[C.Cell], ClientOutcome]:
    """A cell's outcome; the first use plays the cell's whole batch (its servers, several at once)."""
    played: dict[C.Cell, ClientOutcome] = {}

    def store(cell: C.Cell, outcome: ClientOutcome) -> None:
        played[cell] = outcome

    def get(cell: C.Cell) -> ClientOutcome:
        if (why := _unplayable(cell.client)) is not None:
            pytest.skip(f"{cell.client} is not played here: {why}")
        if cell not in played:
            clients = [name for name in CLIENT_TARGETS.names() if _unplayable(name) is None]
            batch = [c for c in C.plan() if _batch(c) == _batch(cell) and c.client in clients]
            M.run(batch, clients, C.servers(), budget=600, parallel=_PARALLEL, on_outcome=store)
        assert cell in played, f"{cell.id} was not played within the batch's budget"
        return played[cell]

    return get


def _assert_expected(cell: C.Cell, outcome: ClientOutcome) -> None:
    assert outcome.verdict == C.expected(cell), outcome.describe()
    if not C.facts(cell).terminated:  # ended by SIGTERM mid-call: client.deletes_on_sigterm judges (and pins) what it left
        assert outcome.sessions_left_open <= 0, outcome.describe()
    over = {t: n for t, n in outcome.calls.items() if n > cell.script.calls.get(t, 0)}
    assert not over, f"a tool ran more often than it was called: {outcome.describe()}"


@pytest.mark.parametrize("cell", _params(_SCENARIO_CELLS))
def test_client_plays_the_scenario(cell: C.Cell, outcome_of: Callable[[C.Cell], ClientOutcome]) -> None:
    """The winning episode: reward 1.0, finished, every text as written, each tool once, no session left."""
    _assert_expected(cell, outcome_of(cell))


@pytest.mark.parametrize("cell", _params(_PROFILE_CELLS))
def test_client_under_a_fault_profile(cell: C.Cell, outcome_of: Callable[[C.Cell], ClientOutcome]) -> None:
    """Survives the recoverable profiles without running a tool twice; fails clearly on the others."""
    _assert_expected(cell, outcome_of(cell))


# -- a pinned defect shows as described (so an xfail never hides another failure) -----------------
def _reran(outcome: ClientOutcome) -> bool:
    """A tool ran more often than called (judged by client.tool_runs, or by client.resume_by_task_id before it)."""
    return bool({"client.tool_runs", "client.resume_by_task_id"} & set(outcome.failed_checks))


_SIGNATURES: dict[str, Callable[[ClientOutcome], bool]] = {
    "inspect-list-tasks-only": lambda o: o.failed_at in ("dataset", "eval") and "list_tasks is not supported" in (o.error or "") and not o.calls,
    "inspect-solver-drops-base-url": lambda o: "sessions.openreward.ai" in (o.error or "") and not o.requests.get("POST /create"),
    "session-url": lambda o: "sessions.127.0.0.1" in (o.error or "") and not o.requests.get("POST /create"),
    "firehorse-get-task-env-name": lambda o: o.failed_at == "trial" and "'env_name'" in (o.error or "") and not o.requests.get("POST /create"),
    "firehorse-error-results-unreported": lambda o: o.error is None and o.requests.get("fault restart", 0) >= 1
    and "client.failure_as_error" in o.failed_checks and "Active environment not found" in " ".join(o.outputs),
    "firehorse-setup-leaks-session": lambda o: o.failed_at == "trial" and "SetupFailed" in (o.error or "") and o.sessions_left_open == 1,
    "platoon-non-default-env-refused": lambda o: o.failed_at == "session" and "?variant=" in (o.error or "") and not o.calls,
    "inspect-finished-error": lambda o: o.failed_at == "sample" and "episode_finished" in (o.error or "") and o.reward is None,
    "platoon-402-listing-ignored": lambda o: o.error is None and o.finished and "client.failure_as_error" in o.failed_checks
    and o.requests.get("fault credits-402-discovery", 0) >= 1,
    "platoon-null-final-reward-refused": lambda o: o.failed_at == "grade" and "no_reward" in (o.error or "") and o.finished,
    "nan-reward-taken": lambda o: o.error is None and o.reward != o.reward and "client.out_valid" in o.failed_checks,
    "ors-nan-reward-taken": lambda o: o.error is None and o.reward != o.reward and "client.out_valid" in o.failed_checks,
    "bool-schema-crash": lambda o: o.failed_at == "spec" and "AttributeError: 'bool' object has no attribute 'get'" in (o.error or "") and not o.calls,
    "inspect-schema-refused": lambda o: "validation error" in (o.error or "") and "ToolParams" in (o.error or "") and not o.calls,
    "keyword-crash": lambda o: o.failed_at == "spec" and (o.error or "").startswith("SyntaxError"),
    "chunk-lstrip": lambda o: "client.text_verbatim" in o.failed_checks or "episode_finished" in (o.error or ""),
    "ors-chunk-lstrip": lambda o: "client.text_verbatim" in o.failed_checks,
    "no-end-retried-forever": lambda o: o.hung and o.requests.get("fault stream-no-end", 0) >= 3,
    "ors-no-end-retried-forever": lambda o: o.hung and o.requests.get("fault stream-no-end", 0) >= 3,
    "reset-leaks-session": lambda o: o.failed_at == "reset" and o.sessions_left_open == 1,
    "ors-sdk-no-finish-latch": lambda o: o.error is None and "client.tool_runs" in o.failed_checks,
    "sanitizer-drops-keyword-params": lambda o: o.error is None and not o.calls,
    "env-name-not-sent": lambda o: o.error is None and "client.env_name" in o.failed_checks,
    "ors-create-without-env-name": lambda o: o.error is None and "client.env_name" in o.failed_checks,
    "cut-call-rerun": lambda o: o.requests.get("fault cut-before-task-id", 0) >= 1 and _reran(o),
    "ors-cut-call-rerun": lambda o: o.requests.get("fault cut-before-task-id", 0) >= 1 and _reran(o),
    # benchflow's own words, raised by its reward conversion or its verifier after a clean session.
    "benchflow-unscored-call-refused": lambda o: o.failed_at == "benchflow-rewards" and "reward must be numeric" in (o.error or ""),
    "benchflow-reward-outside-unit-refused": lambda o: o.failed_at == "benchflow-rewards" and "between 0.0 and 1.0" in (o.error or ""),
    "benchflow-unfinished-refused": lambda o: o.failed_at == "benchflow-verify" and "did not include a terminal reward" in (o.error or ""),
    # §13.15: the client's own aggregate over the episodes, as its run reports it, leaves the failed episode out.
    "inspect-mean-over-scored": lambda o: "client.aggregate_counts_failures" in o.failed_checks and "over 2 of the 3" in " ".join(o.problems),
    "firehorse-avg-reward-over-scored": lambda o: "client.aggregate_counts_failures" in o.failed_checks and "over 2 of the 3" in " ".join(o.problems),
}


@pytest.mark.parametrize("cell", _params([c for c in C.plan() if C.cell_defects(c)], xfail=False))
def test_pinned_defect_shows_as_described(cell: C.Cell, outcome_of: Callable[[C.Cell], ClientOutcome]) -> None:
    outcome = outcome_of(cell)
    defect = C.cell_defects(cell)[0]
    assert _SIGNATURES[defect.id](outcome), f"[{defect.id}] expected: {defect.behaviour}\nobserved: {outcome.describe()}"
    assert outcome.verdict == C.predicted(cell), f"docs/compatibility.md predicts {C.predicted(cell)}: {outcome.describe()}"


@pytest.mark.parametrize("cell", _params([c for c in C.plan() if c.episodes > 1 and len(C.cell_defects(c)) > 1], xfail=False))
def test_every_pinned_defect_of_an_aggregate_shows(cell: C.Cell, outcome_of: Callable[[C.Cell], ClientOutcome]) -> None:
    """§13.15: where a defect decides the cell (firehorse leaks the failed trial's session), its aggregate's is pinned too."""
    outcome = outcome_of(cell)
    for defect in C.cell_defects(cell):
        assert _SIGNATURES[defect.id](outcome), f"[{defect.id}] expected: {defect.behaviour}\nobserved: {outcome.describe()}"


# -- the protocol rules a client keeps (client checks that do not decide the verdict) ------------------
def _rule_params() -> list[Any]:
    out = []
    for cell in C.plan():
        group = pytest.mark.xdist_group(_batch(cell))
        out.append(pytest.param(cell, None, id=cell.id, marks=[group]))
        for check, defect in C.rule_defects(cell).items():
            out.append(pytest.param(cell, check, id=f"{cell.id}:{check}", marks=[group, defect.mark()]))
    return out


@pytest.mark.parametrize(("cell", "check"), _rule_params())
def test_client_keeps_the_protocol_rules(cell: C.Cell, check: str | None, outcome_of: Callable[[C.Cell], ClientOutcome]) -> None:
    """check-client's rule checks (env_name, Retry-After, the script as given, no call after finished) pass.

    Without ``check``: no rule fails that no pinned defect predicts. With it: that rule passes (a strict
    xfail naming the defect that breaks it).
    """
    outcome = outcome_of(cell)
    if check is None:
        unexpected = set(outcome.rules) - set(C.rule_defects(cell))
        assert not unexpected, f"rules broken that no pinned defect predicts: {sorted(unexpected)}: {outcome.describe()}"
    else:
        assert check not in outcome.rules, outcome.describe()


def test_every_cell_defect_has_a_signature() -> None:
    used = {d.id for cell in C.plan() for d in C.cell_defects(cell)}
    assert used <= set(_SIGNATURES), sorted(used - set(_SIGNATURES))


# -- what inspect-openreward shows the model, per tool ----------------------------------------------
def _zoo_tool_params() -> list[Any]:
    from orsbench.upstream import defects as D
    from orsbench.scenarios import get_scenario

    out = []
    for tool in get_scenario("schema-zoo").shared_tools():
        spec = tool.spec()
        marks = [pytest.mark.xdist_group(_batch(C.Cell("inspect", "mock", "schema-zoo")))]
        if (defect := D.inspect_binding_defect(spec)) is not None:
            marks.append(defect.mark())
        out.append(pytest.param(spec, id=spec["name"], marks=marks))
    return out


@pytest.mark.parametrize("spec", _zoo_tool_params())
def test_inspect_shows_every_parameter_with_its_type(spec: dict[str, Any], outcome_of: Callable[[C.Cell], ClientOutcome]) -> None:
    """The tools ``inspect eval`` offered the scripted model (its openai provider's request) type every parameter the server typed."""
    from orsbench.upstream import schema_view

    outcome = outcome_of(C.Cell("inspect", "mock", "schema-zoo"))
    seen = {t["name"]: t for t in outcome.tools_seen}
    assert spec["name"] in seen, f"the model was not shown {spec['name']!r}: {sorted(seen)}"
    served = schema_view.view(spec.get("input_schema"))
    shown = schema_view.view(seen[spec["name"]].get("parameters"))
    untyped = [n for n, kinds in served["types"].items() if kinds and not shown["types"].get(n)]
    for name, items in served["items"].items():
        for key, kinds in items.items():
            shown_kinds = (shown["items"].get(name) or {}).get(key)
            if kinds and not shown_kinds:
                untyped.append(f"{name} ({key})")
    assert not untyped, f"shown without a type: {untyped} (served {served['types']}, shown {shown['types']})"
    # and every keyword the server constrained a parameter with (const, exclusive bounds, item counts) reaches the model
    from orsbench.upstream import defects as D

    kept = set(D.inspect_dropped_keywords({"input_schema": seen[spec["name"]].get("parameters") or {}}))
    dropped = [k for k in D.inspect_dropped_keywords(spec) if k not in kept]
    assert not dropped, f"shown without its constraints: {dropped}"


# -- what firehorse's react agent shows the model (its Anthropic provider: list_tools(format="anthropic")) ----------
def _keyword_tool_params() -> list[Any]:
    from orsbench.upstream import defects as D
    from orsbench.scenarios import get_scenario

    out = []
    for tool in get_scenario("schema-keywords").shared_tools():
        spec = tool.spec()
        marks = [pytest.mark.xdist_group(_batch(C.Cell("firehorse", "mock", "schema-keywords")))]
        if D.sanitized_params(spec, "anthropic"):
            marks.append(D.DEFECTS["sanitizer-drops-keyword-params"].mark())
        out.append(pytest.param(spec, id=spec["name"], marks=marks))
    return out


@pytest.mark.parametrize("spec", _keyword_tool_params())
def test_firehorse_shows_every_required_parameter(spec: dict[str, Any], outcome_of: Callable[[C.Cell], ClientOutcome]) -> None:
    """The tools ``firehorse --agent react`` offered the scripted model (its Anthropic request) keep every required
    parameter as a property: the react agent lists tools with ``format="anthropic"`` (agents/react.py:310), through the
    openreward client's sanitiser, as inspect-openreward does with ``"openai"``."""
    outcome = outcome_of(C.Cell("firehorse", "mock", "schema-keywords"))
    seen = {t["name"]: t for t in outcome.tools_seen}
    assert spec["name"] in seen, f"the model was not shown {spec['name']!r}: {sorted(seen)}"
    shown = seen[spec["name"]].get("parameters") or seen[spec["name"]].get("input_schema") or {}
    required = set((spec.get("input_schema") or {}).get("required") or [])
    missing = sorted(required - set(shown.get("properties") or {}))
    assert missing == [], f"required but not shown to the model: {missing}; shown: {sorted(shown.get('properties') or {})}"


# -- ors-sdk's client and a 4xx -----------------------------------------------------------------------
@pytest.mark.xdist_group(group("echo", "mock"))
@pytest.mark.xfail(strict=True, reason=f"[ors-4xx-retried] {C.D.DEFECTS['ors-4xx-retried'].summary}")
def test_ors_client_sends_a_refused_create_once(serve: Callable[..., SuiteTarget]) -> None:
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


# -- a call after finished: the server's finish latch keeps the winning reward -------------------------
def _latch_params() -> list[Any]:
    out = []
    for server in C.servers():
        marks = [pytest.mark.xdist_group(group("echo", server))]
        if any(d.id == "ors-sdk-no-finish-latch" for d in C.server_defects(server)):
            marks.append(C.D.DEFECTS["ors-sdk-no-finish-latch"].mark())
        out.append(pytest.param(server, id=server, marks=marks))
    return out


@pytest.mark.parametrize("server", _latch_params())
def test_trl_keeps_the_winning_reward_when_the_model_calls_after_finished(server: str, serve: Callable[..., SuiteTarget]) -> None:
    """GRPO stops only when the model stops calling tools: the server must refuse the extra call so TRL keeps 1.0."""
    from orsbench.clientcheck.episodes import Script, Step
    from orsbench.clients.run import play

    win = script("echo").steps[0]
    overshoot = Script("echo", (win, Step("echo", {"text": win.args["text"] + "-again"})))
    outcome = play("trl", serve("echo", server, request_log=True).server, overshoot)
    assert outcome.outputs[:1] == ["match"], outcome.describe()
    assert (outcome.reward, outcome.calls) == (1.0, {"echo": 1}), outcome.describe()


# -- ors-sdk's client and a long 503 'starting' -------------------------------------------------------
@pytest.mark.xdist_group("clients-profiles-1")
@pytest.mark.xfail(strict=True, reason=f"[ors-503-gives-up] {C.D.DEFECTS['ors-503-gives-up'].summary}")
def test_ors_client_rides_out_an_8s_setup(serve: Callable[..., SuiteTarget]) -> None:
    """slow-setup with an 8 s setup(): /prompt answers 503 starting with Retry-After until it is ready."""
    from orsbench.clients.run import play

    target = serve("sparse-reward", "mock", faults=("slow-setup",), setup_delay=8.0, request_log=True)
    outcome = play("ors", target.server, script("sparse-reward"), 40)
    assert outcome.statuses.get("503", 0) >= 1, outcome.describe()
    assert outcome.verdict == "works", outcome.describe()


# -- the agent harnesses: what only their own entry points show ---------------------------------------
def _platform_is_the_server(url: str) -> Callable[[], None]:
    """In the adapter's child: firehorse's OPENREWARD_API_URL is the ORS server itself (no platform beside it)."""

    def prepare() -> None:
        from orsbench.clients.targets import firehorse

        firehorse.platform_url = lambda _model_url: url  # type: ignore[assignment]

    return prepare


@pytest.fixture(scope="module")
def firehorse_without_platform(serve: Callable[..., SuiteTarget]) -> ClientOutcome:
    from orsbench.clients.run import play

    target = serve("echo", "mock", request_log=True)
    return play("firehorse", target.server, script("echo"), 60, prepare=_platform_is_the_server(target.url))


@pytest.mark.xdist_group(group("echo", "mock"))
def test_observed_firehorse_asks_the_platform_before_any_trial(firehorse_without_platform: ClientOutcome) -> None:
    """What happens today (the strict xfail below says what should): a 404 on required-secrets ends the run."""
    outcome = firehorse_without_platform
    assert "required-secrets" in (outcome.error or "") + outcome.output and "404" in (outcome.error or "") + outcome.output, outcome.describe()
    assert not outcome.requests.get("POST /create"), outcome.describe()


@pytest.mark.xdist_group(group("echo", "mock"))
@C.D.DEFECTS["firehorse-needs-platform"].mark()
def test_firehorse_plays_on_an_ors_server_alone(firehorse_without_platform: ClientOutcome) -> None:
    assert firehorse_without_platform.verdict == "works", firehorse_without_platform.describe()
