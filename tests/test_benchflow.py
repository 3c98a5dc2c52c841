"""benchflow 0.7.11 as a client target: an openreward SDK session, then benchflow's own reward conversion and verifier.

benchflow ships no ORS session client; its ORS code is the seam around one (``benchflow.write_ors_tool_outputs_jsonl``
and the ``ors-episode`` verifier strategy), run here by benchflow itself in the trainers' Python 3.12 environment
(built on first use; skipped, saying why, where no Python 3.12 exists). Each refusal is shown twice: what benchflow
says today on a live episode, and a strict xfail naming the pinned defect for what it should do. The matrix cells
and their pins are in ``conformance/test_clients.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orsbench.clientcheck import grade
from orsbench.clientcheck.cases import Case, get_case
from orsbench.clientcheck.episodes import Step
from orsbench.clientcheck.judgement import judge
from orsbench.clientcheck.runner import CaseRun, run_case
from orsbench.clients import interpreters
from orsbench.clients.run import forked, preload
from orsbench.clients.targets import CLIENT_TARGETS
from orsbench.upstream import defects as D
from orsbench.verdict import Verdict

BENCHFLOW = CLIENT_TARGETS["benchflow"]
#: The calls benchflow's adapter reports, then its judgement: a refusal is an error line with benchflow's own words.
UNSCORED = "benchflow refused the episode: ValueError: outputs[1].reward must be numeric"
OUTSIDE = "benchflow refused the episode: ValueError: outputs[1].reward must be finite and between 0.0 and 1.0"


def test_the_record_runs_benchflows_own_code_in_the_trainers_python() -> None:
    command = BENCHFLOW.command
    assert command is not None and command.venv is interpreters.TRAINERS_312 and command.venv.python == "3.12"
    assert command.venv is CLIENT_TARGETS["platoon"].command.venv  # one environment, one build, for both trainers
    assert "benchflow==0.7.11" in command.venv.bare and BENCHFLOW.version == "0.7.11"
    assert (interpreters.COMMANDS / command.script).is_file() and "benchflow" in command.preload
    consumer = BENCHFLOW.consumer
    assert (consumer.reward, consumer.no_reward, consumer.unfinished) == ("finishing", "refuses", "refuses")
    assert consumer.reward_range == (0.0, 1.0) and consumer.every_call_rewarded


def test_without_the_contract_the_adapter_is_a_usage_error() -> None:
    """Checked before anything is imported, so any Python shows it."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ORSBENCH_")}
    done = subprocess.run(
        [sys.executable, str(interpreters.COMMANDS / "benchflow_ors.py")], env=environ, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "ORSBENCH_URL, ORSBENCH_ENV, ORSBENCH_SCRIPT, ORSBENCH_OUT not set" in done.stderr


def test_each_refusal_is_predicted_where_benchflow_meets_it_first() -> None:
    """Benchflow converts the outputs in order and raises at the first bad reward; a boolean passes as float(True)."""
    facts = D.CellFacts("benchflow", "mock", "x")
    shown = lambda **kw: [d.id for d in D.shown_in(D.CellFacts("benchflow", "mock", "x", **kw))]  # noqa: E731
    assert shown(rewards=(None, -1.0)) == ["benchflow-unscored-call-refused"]
    assert shown(rewards=(0.5, -0.25, None)) == ["benchflow-reward-outside-unit-refused"]
    assert shown(rewards=(0.5,), finishes=False) == ["benchflow-unfinished-refused"]
    assert shown(rewards=(True,)) == shown(rewards=(0.0, 1.0)) == []
    assert shown(rewards=(None,), expects_error=True) == []  # the session fails first: benchflow judges nothing
    assert D.predicted(facts) == Verdict.WORKS


def test_one_fork_server_serves_every_adapter_of_its_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """platoon's server loads benchflow's adapter too, and each episode runs the adapter it names (this Python runs
    the server: the adapters import nothing of orsbench before the contract is checked)."""
    monkeypatch.setenv(interpreters.VENVS_VARIABLE, str(tmp_path))
    venv = interpreters.Venv("this", "3", packages=())
    (venv.path / "bin").mkdir(parents=True)
    venv.interpreter.symlink_to(sys.executable)
    server = interpreters.WarmServer.start(venv, "platoon_ors.py", ())
    try:
        server.load("benchflow_ors.py")
        server.load("benchflow_ors.py")  # once
        assert [Path(p).name for p in server.loaded] == ["platoon_ors.py", "benchflow_ors.py"]
        err = tmp_path / "err.txt"
        for script, says in (("benchflow_ors.py", "benchflow adapter: error"), ("platoon_ors.py", "platoon adapter: error")):
            with err.open("w") as sink:
                assert server.play({"PATH": os.environ.get("PATH", "")}, sink.fileno(), sink.fileno(), script=script) == 2
            assert says in err.read_text(), err.read_text()
        with pytest.raises(RuntimeError, match="could not load nowhere.py"):
            server.load("nowhere.py")
    finally:
        server.stop()
    assert not server.alive


@pytest.fixture(scope="module")
def benchflow_ready() -> None:
    assert BENCHFLOW.command is not None
    if (why := BENCHFLOW.command.venv.ensure()) is not None:
        pytest.skip(f"benchflow is not played here: {why}")
    preload(["benchflow"])  # its fork server: openreward and benchflow imported once for every episode below


def _play(case: Case) -> CaseRun:
    run = run_case(forked("benchflow"), case, timeout=60)
    assert run.server_error is None, run.server_error
    return run


def _calls(run: CaseRun) -> list[tuple[str, object]]:
    return [(line.get("tool"), line.get("reward")) for line in run.out.lines if line.is_call]


def _stage(run: CaseRun) -> str | None:
    return next((line.get("stage") for line in run.out.lines if line.is_error), None)


@pytest.fixture(scope="module")
def echo(benchflow_ready: None) -> CaseRun:
    return _play(get_case("echo"))


@pytest.fixture(scope="module")
def sparse(benchflow_ready: None) -> CaseRun:
    return _play(get_case("sparse-reward"))


@pytest.fixture(scope="module")
def penalty(benchflow_ready: None) -> CaseRun:
    """sparse-reward's submit with a wrong total at once: the episode's one reward is the -1.0 penalty."""
    return _play(Case("sparse-penalty", "sparse-reward", "a wrong total at once", steps=(Step("submit", {"total": 10_000}),)))


@pytest.fixture(scope="module")
def unfinished(benchflow_ready: None) -> CaseRun:
    """dense-reward's first step only (reward 0.5): rewarded, never finished."""
    case = Case("dense-first-step", "dense-reward", "one rewarded step, then stop", steps=(Step("step", {}),), expect="error")
    return _play(case)


@pytest.fixture(scope="module")
def boolean(benchflow_ready: None) -> CaseRun:
    return _play(get_case("echo+reward-bool"))


def test_platoon_and_benchflow_share_their_environments_fork_server(benchflow_ready: None) -> None:
    platoon = CLIENT_TARGETS["platoon"].command
    assert platoon is not None and BENCHFLOW.command is not None
    server = BENCHFLOW.command.warm()
    assert platoon.warm() is server and {platoon.path, BENCHFLOW.command.path} <= set(server.loaded)


def test_benchflow_scores_a_winning_episode_with_the_verifier(echo: CaseRun) -> None:
    assert _calls(echo) == [("echo", 1.0)] and echo.out.episode_reward == 1.0 and echo.exit_code == 0
    assert judge(echo, grade(echo)).verdict == Verdict.WORKS


def test_observed_benchflow_refuses_an_episode_with_unscored_calls(sparse: CaseRun) -> None:
    """The session went well (every call reported as sent); benchflow's conversion raised on the first null."""
    assert _calls(sparse) == [("reveal", None), ("reveal", None), ("submit", 1.0)]
    assert sparse.reported_errors() == [UNSCORED] and _stage(sparse) == "benchflow-rewards" and sparse.exit_code == 1
    assert judge(sparse, grade(sparse)).verdict == Verdict.FAILS_CLEARLY


@D.DEFECTS["benchflow-unscored-call-refused"].mark()
def test_benchflow_scores_an_episode_rewarded_only_at_its_end(sparse: CaseRun) -> None:
    assert sparse.out.episode_reward == 1.0, sparse.reported_errors()


def test_observed_benchflow_refuses_reward_minus_one(penalty: CaseRun) -> None:
    assert _calls(penalty) == [("submit", -1.0)]
    assert penalty.reported_errors() == [OUTSIDE] and _stage(penalty) == "benchflow-rewards"


@D.DEFECTS["benchflow-reward-outside-unit-refused"].mark()
def test_benchflow_scores_a_penalty(penalty: CaseRun) -> None:
    assert penalty.out.episode_reward == -1.0, penalty.reported_errors()


def test_observed_benchflow_refuses_an_unfinished_episode(unfinished: CaseRun) -> None:
    assert _calls(unfinished) == [("step", 0.5)]
    [error] = unfinished.reported_errors()
    assert "did not include a terminal reward" in error and _stage(unfinished) == "benchflow-verify"


@D.DEFECTS["benchflow-unfinished-refused"].mark()
def test_benchflow_leaves_an_unfinished_episode_unscored_without_an_error(unfinished: CaseRun) -> None:
    assert unfinished.reported_errors() == [], unfinished.reported_errors()


def test_observed_benchflow_scores_a_boolean_reward_as_one(boolean: CaseRun) -> None:
    assert _calls(boolean) == [("echo", True)] and boolean.out.episode_reward == 1.0


@D.DEFECTS["benchflow-bool-reward"].mark()
def test_benchflow_refuses_a_boolean_reward(boolean: CaseRun) -> None:
    assert boolean.out.episode_reward is None and boolean.reported_errors(), boolean.out.episode_reward


@D.DEFECTS["env-name-not-sent"].mark()
def test_benchflows_session_names_the_environment_on_create(echo: CaseRun) -> None:
    assert "client.env_name" not in judge(echo, grade(echo)).rules


# -- orsbench clients URL / matrix --url: the consumer profile's prediction, confirmed by benchflow's own code -----------
def _row(target: object) -> object:
    from orsbench.clients import live
    from orsbench.servers.launch import start

    server = start(target)
    try:
        result = live.play_on_url(server.url, clients=["benchflow"], timeout=60)
    finally:
        server.stop()
    return result


def test_matrix_url_predicts_benchflow_rejects_reward_minus_one(benchflow_ready: None) -> None:
    """The checker's player answers Penalised wrong (reward -1.0, finished): benchflow-style consumers reject it."""
    from orsbench.servers.user_app import AppTarget

    result = _row(AppTarget.parse(str(Path(__file__).parent / "envs" / "penalised.py") + ":Penalised"))
    [row] = result.rows
    assert result.episode.reward == -1.0 and result.episode.finished
    assert row.consumer == "refuses: reward -1.0 is outside [0, 1]" and row.consumer_confirmed, row
    assert row.verdict == Verdict.FAILS_CLEARLY and "between 0.0 and 1.0" in row.why, row
    assert [d.id for d in row.defects] == ["benchflow-reward-outside-unit-refused"], row


def test_a_refusal_the_players_budget_did_not_cause_is_benchflows_own(benchflow_ready: None) -> None:
    """mobile-env's shape: a signed reward on every step and no end, so the player stops at its budget. benchflow refuses
    the first -1.0 whatever the end: its own pinned defect, named — not "fails clearly (right)" put on the budget."""
    from orsbench.servers.user_app import AppTarget

    result = _row(AppTarget.parse(str(Path(__file__).parent / "envs" / "signed_steps.py") + ":SignedSteps"))
    [row] = result.rows
    assert any(note.startswith("the player stopped at its budget") for note in result.notes), result.notes
    assert row.words == "fails clearly" and not row.right, row
    assert row.consumer == "refuses: reward -1.0 is outside [0, 1]" and row.consumer_confirmed, row
    assert [d.id for d in row.defects] == ["benchflow-reward-outside-unit-refused"], row


def test_matrix_url_on_sparse_reward_names_the_unscored_reveal(benchflow_ready: None) -> None:
    """On sparse-reward the player reveals (reward null) before it submits: that null is what benchflow refuses first."""
    result = _row("sparse-reward")
    [row] = result.rows
    assert row.consumer == "refuses: a call's reward is None: it needs a number on every call" and row.consumer_confirmed, row
    assert [d.id for d in row.defects] == ["benchflow-unscored-call-refused"] and "must be numeric" in row.why, row


# -- check-client on the built-in adapter, as a user runs it (a cold start: a fresh Python 3.12 imports benchflow) ------
def test_check_client_on_benchflows_adapter(benchflow_ready: None, tmp_path: Path) -> None:
    from orsbench.cli import main

    out = tmp_path / "report.json"
    code = main(["check-client", "--client-cmd", f"{sys.executable} -m orsbench.clients.adapter benchflow", "--cases",
                 "echo,sparse-reward+tool-raises", "--timeout", "90", "--json", str(out)])  # fmt: skip
    status = {r["id"]: r["status"] for r in json.loads(out.read_text())["checks"]}
    assert code == 0
    failed = sorted(k for k, v in status.items() if v in ("fail", "error"))
    # The openreward SDK's rule (env-name-not-sent) on both, a warning (the server's default environment is the case's);
    # a raising tool ends the session before benchflow judges.
    assert failed == [], failed
    assert status["client.env_name[echo]"] == status["client.env_name[sparse-reward+tool-raises]"] == "warn"
    assert status["client.failure_as_error[sparse-reward+tool-raises]"] == "pass"
    assert status["client.tool_runs[sparse-reward+tool-raises]"] == "pass"
