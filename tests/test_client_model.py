"""The client half's facts live on its entries: client checks, fault profiles, pinned defects; one verdict function.

* a client check's ``role`` is true: a check that reads the traffic only catches its fault with the
  client's report and process wiped, and a fault only the report shows is invisible on the wire;
* a fault profile's ``client`` facts (what a correct client does, its scaled timings) drive the matrix's
  cells and check-client's cases, for a profile registered later too;
* a pinned defect's own predicate places it in cells and its ``effect`` sets the predicted verdict, through
  the same :func:`orsbench.verdict.verdict_of` a live run's checks go through;
* nothing in the client half branches on a client target's name.
"""

from __future__ import annotations

import ast
import shlex
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from orsbench.clientcheck import CLIENT_CHECKS, Role, get_case, grade, run_case
from orsbench.clientcheck.contract import OutFile
from orsbench.clientcheck.profiles import left_out, profiles
from orsbench.clientcheck.reference import command as reference_command
from orsbench.clients import cells as C
from orsbench.clients.run import forked
from orsbench.clients.targets import CLIENT_TARGETS, WARM_STARTUP_S, ClientTarget
from orsbench.servers.faults import FAULTS, ClientFacts, Fault
from orsbench.upstream import defects as D
from orsbench.verdict import Effect, Verdict, verdict_of

ROOT = Path(__file__).resolve().parents[1]
FAULTY = Path(__file__).parent / "clients" / "faulty.py"
SLACK_S = 90.0


# -- the one verdict function ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("effects", "verdict"),
    [
        ((), Verdict.WORKS),
        ((Effect.RULE,), Verdict.WORKS),
        ((Effect.WRONG_DATA,), Verdict.FAILS_SILENTLY),
        ((Effect.HARMS_SERVER, Effect.RULE), Verdict.FAILS_SILENTLY),
        ((Effect.REPORTS_ERROR,), Verdict.FAILS_CLEARLY),
        ((Effect.REPORTS_ERROR, Effect.WRONG_DATA), Verdict.FAILS_CLEARLY),
        ((Effect.REPORTS_ERROR, Effect.HARMS_SERVER), Verdict.FAILS_SILENTLY),
        ((Effect.HANGS, Effect.REPORTS_ERROR, Effect.HARMS_SERVER), Verdict.HANGS),
    ],
)
def test_verdict_of_combines_effects(effects: tuple[Effect, ...], verdict: Verdict) -> None:
    assert verdict_of(effects) is verdict


# -- a client check's role -------------------------------------------------------------------------
def test_every_client_check_says_its_role_and_effect() -> None:
    for check in CLIENT_CHECKS.values():
        assert isinstance(check.role, Role) and isinstance(check.effect, Effect), check.id
    roles = {check.role for check in CLIENT_CHECKS.values()}
    assert roles == set(Role), roles


def _faulty(fault: str) -> str:
    return shlex.join([sys.executable, str(FAULTY), fault])


def _on_the_wire_only(run):  # type: ignore[no-untyped-def]
    """The run as a proxy or a hosted case sees it: the traffic and the server's counters, nothing of the client."""
    return replace(run, out=OutFile(), exit_code=None, stopped_for=None, stdout="", stderr="")


def _failing(results) -> set[str]:  # type: ignore[no-untyped-def]
    return {r.id for r in results if r.status.value in ("fail", "error")}


#: One fault per traffic-role check, and the case that provokes it (as in tests/test_check_client.py).
_ON_THE_WIRE = [
    ("no-resume", "sparse-reward+stream-drop", "client.resume_by_task_id"),
    ("retry-4xx", "echo+missing-task", "client.no_4xx_retry"),
    ("ignore-retry-after", "sparse-reward+rate-limit", "client.retry_after"),
    ("no-delete", "echo", "client.session_deleted"),
    ("call-after-finished", "echo", "client.stops_at_finished"),
    ("drop-env-name", "two-envs", "client.env_name"),
    ("rerun-uncut", "sparse-reward+cut-before-task-id", "client.tool_runs"),
    ("no-secrets", "secrets", "client.secrets"),
]
#: Faults only the client's own report shows.
_IN_THE_REPORT = [
    ("strip-chunks", "schema-zoo", "client.text_verbatim"),
    ("bool-reward", "echo+reward-bool", "client.reward_as_sent"),
    ("error-as-text", "sparse-reward+tool-raises", "client.failure_as_error"),
]


@pytest.mark.parametrize(("fault", "case", "check"), _ON_THE_WIRE)
def test_a_traffic_check_catches_its_fault_on_the_wire_alone(fault: str, case: str, check: str) -> None:
    assert CLIENT_CHECKS.get(check).role is Role.TRAFFIC
    run = _on_the_wire_only(run_case(_faulty(fault), get_case(case), timeout=SLACK_S))
    results = grade(run, roles={Role.TRAFFIC})
    assert {r.id for r in results} <= {c.id for c in CLIENT_CHECKS.values() if c.role is Role.TRAFFIC}
    assert _failing(results) == {check}, [(r.id, r.status.value, r.message) for r in results]


@pytest.mark.parametrize(("fault", "case", "check"), _IN_THE_REPORT)
def test_a_fault_only_the_report_shows_is_a_report_check(fault: str, case: str, check: str) -> None:
    assert CLIENT_CHECKS.get(check).role is Role.REPORT
    run = run_case(_faulty(fault), get_case(case), timeout=SLACK_S)
    assert check in _failing(grade(run))
    assert not _failing(grade(_on_the_wire_only(run), roles={Role.TRAFFIC}))


@pytest.mark.parametrize("case", sorted({case for _, case, _ in _ON_THE_WIRE}))
def test_a_correct_client_passes_every_traffic_check_on_the_wire_alone(case: str) -> None:
    run = _on_the_wire_only(run_case(reference_command(), get_case(case), timeout=SLACK_S))
    results = grade(run, roles={Role.TRAFFIC})
    assert results and not _failing(results), [(r.id, r.status.value, r.message) for r in results]


# -- a fault profile's facts ---------------------------------------------------------------------------
def _dummy_profile(name: str, facts: ClientFacts) -> Fault:
    return Fault(name, "a dummy profile (tests/test_client_model.py)", "profile", lambda engine, app, rng: app, None, facts)


def test_a_profile_registered_later_is_played_by_its_own_facts() -> None:
    facts = ClientFacts(expect="error", knobs=(("setup_delay", 0.5),), deadline_s=7.0, per_client=True)
    with FAULTS.temporarily(_dummy_profile("dummy-refusal", facts)):
        played = {p.name: p for p in profiles()}["dummy-refusal"]
        assert (played.knobs, played.deadline, played.per_client, played.expects_error) == (facts.knobs, 7.0, True, True)
        config = played.config()
        assert config.faults == ("dummy-refusal",) and config.setup_delay == 0.5 and config.request_log
        cell = C.Cell("openreward", "mock", "sparse-reward", "dummy-refusal")
        assert C.expected(cell) is Verdict.FAILS_CLEARLY
        assert cell in C.plan(["openreward"], ["mock"], ["dummy-refusal"])
    with FAULTS.temporarily(_dummy_profile("dummy-aside", ClientFacts(left_out="a test says why"))):
        assert "dummy-aside" not in {p.name for p in profiles()}
        assert left_out()["dummy-aside"] == "a test says why"


def test_the_profiles_facts_are_what_the_cases_say() -> None:
    """check-client's profile cases take their expectation and knobs from the profile's entry."""
    for played in profiles():
        if played.name == "none" or played.facts.test_aid:
            continue
        case = get_case(f"{played.scenario}+{played.name}")
        assert case.expect == played.facts.expect and case.knobs == played.knobs, played.name
        assert case.deadline >= played.deadline


# -- a pinned defect's own predicate and effect ---------------------------------------------------------
def test_a_defect_decides_where_it_shows_and_what_it_does(monkeypatch: pytest.MonkeyPatch) -> None:
    cell = C.Cell("openreward", "mock", "echo")
    assert C.predicted(cell) is Verdict.WORKS and not C.cell_defects(cell)

    def on_echo(facts: D.CellFacts) -> bool:
        return facts.scenario == "echo" and facts.profile is None

    silent = D.Defect(
        "dummy-silent", D.SDK, "a dummy (tests/test_client_model.py)", "P8", shows_in=on_echo, effect=Effect.WRONG_DATA
    )
    # A new table each time (never edited in place: the docs list the defects in the table's order).
    monkeypatch.setattr(D, "DEFECTS", {**D.DEFECTS, silent.id: silent})
    assert [d.id for d in C.cell_defects(cell)] == ["dummy-silent"]
    assert C.predicted(cell) is Verdict.FAILS_SILENTLY
    assert not C.cell_defects(C.Cell("ors", "mock", "echo")), "ors-sdk's client does not run the openreward client"
    # A defect that ends the episode first is the only one named, and its effect decides.
    crash = D.Defect(
        "dummy-crash", D.SDK, "a dummy (tests/test_client_model.py)", "P8",
        shows_in=on_echo, effect=Effect.REPORTS_ERROR, masks=True, breaks=(("client.env_name", on_echo),),
    )
    monkeypatch.setattr(D, "DEFECTS", {**D.DEFECTS, crash.id: crash})
    assert [d.id for d in C.cell_defects(cell)] == ["dummy-crash"]
    assert C.predicted(cell) is Verdict.FAILS_CLEARLY
    assert C.rule_defects(cell)["client.env_name"].id == "env-name-not-sent", "the first defect breaking a rule names it"
    monkeypatch.setattr(D, "DEFECTS", {k: d for k, d in D.DEFECTS.items() if k != "env-name-not-sent"})
    assert C.rule_defects(cell)["client.env_name"].id == "dummy-crash"


def test_no_cell_of_the_matrix_has_two_defects_that_end_the_episode() -> None:
    """Which masking defect a cell names would otherwise be the declaration order's accident."""
    for cell in C.plan():
        facts = C.facts(cell)
        masking = [d.id for d in D.DEFECTS.values() if d.masks and d.shows(facts)]
        assert len(masking) <= 1, (cell.id, masking)


def test_every_defect_shown_in_a_cell_says_what_it_does() -> None:
    for cell in C.plan():
        for defect in C.cell_defects(cell):
            assert defect.effect is not Effect.RULE, (cell.id, defect.id)


# -- no branch on a client's name in the client half -----------------------------------------------------
_NAME_FREE = [ROOT / "orsbench" / "clients" / name for name in ("cells.py", "run.py", "matrix.py")] + sorted(
    (ROOT / "orsbench" / "clientcheck").glob("*.py")
)


@pytest.mark.parametrize("path", _NAME_FREE, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_of_the_client_half_compares_with_a_client_name(path: Path) -> None:
    names = set(CLIENT_TARGETS.names())
    offences = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                values = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                found = [v.value for v in values if isinstance(v, ast.Constant) and v.value in names]
                if found:
                    offences.append(f"{path.name}:{node.lineno} compares with {found}")
    assert not offences, offences


# -- one vocabulary in every view ------------------------------------------------------------------------
def test_check_client_reports_each_case_in_the_words_of_the_matrix() -> None:
    from orsbench.clientcheck import check_client

    report = check_client(reference_command(), [get_case("echo"), get_case("sparse-reward+tool-raises")], timeout=SLACK_S, jobs=2)
    assert [(c.subject, c.words) for c in report.cases] == [("echo", "works"), ("sparse-reward+tool-raises", "fails clearly (right)")]
    shown = report.to_json()["cases"][1]
    assert {k: shown[k] for k in ("case", "verdict", "expected", "right", "words", "because")} == {
        "case": "sparse-reward+tool-raises", "verdict": "fails clearly", "expected": "fails clearly", "right": True,
        "words": "fails clearly (right)", "because": None,
    }  # fmt: skip
    silent = check_client(_faulty("strip-chunks"), [get_case("schema-zoo")], timeout=SLACK_S)
    [case] = silent.cases
    assert (case.verdict, case.right) == (Verdict.FAILS_SILENTLY, False) and case.because.startswith("client.text_verbatim: "), case


def test_finish_waits_for_the_client_it_collects() -> None:
    """``finish()`` collects a run that is still going: it waits for the client (to its deadline at most), never cuts it short."""
    import time

    from orsbench.clientcheck.episodes import script
    from orsbench.clients.run import ClientRun
    from orsbench.config import ServerConfig
    from orsbench.servers.launch import serve

    with serve("echo", config=ServerConfig(request_log=True)) as server:
        outcome = ClientRun("openreward", server, script("echo"), 60, prepare=lambda: time.sleep(2)).finish()
    assert outcome.survived and outcome.elapsed >= 2, outcome.describe()


def test_a_client_forked_warm_gets_the_warm_start_up_allowance() -> None:
    """A hang is waited for to its deadline plus the start-up allowance: the cold figure only where nothing is warm,
    and the fork an episode plays in (the matrix's, check-client's built-in targets) carries it."""
    slow = ClientTarget("test-slow-starter", "orsbench", "a client with a cold start of 30 s", play=lambda episode: None, startup_s=30.0)
    quick = ClientTarget("test-quick-starter", "orsbench", "a client with a cold start of 2 s", play=lambda episode: None, startup_s=2.0)
    with CLIENT_TARGETS.temporarily(slow), CLIENT_TARGETS.temporarily(quick):
        assert (slow.warmed, slow.startup_allowance(), quick.startup_allowance()) == (False, 30.0, 2.0)
        assert forked("test-slow-starter").startup_s == 30.0
        slow.preload()
        quick.preload()
        assert (slow.warmed, slow.startup_allowance(), quick.startup_allowance()) == (True, WARM_STARTUP_S, 2.0)
        assert forked("test-slow-starter").startup_s == WARM_STARTUP_S < 30.0
