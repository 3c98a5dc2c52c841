"""Correct environments whose prompt and answers show the session's own state pass every check (issue 34).

A session is compared with a control that sent the same requests in the same order alone — its prompt
first, as every real client fetches it, then the same calls — never with a fresh session's prompt: a
counter that reads "The counter is at 7" after the session's own ``add(7)``, a board with its moves, a
chat transcript, a step count, and a game dealt in ``get_prompt`` are what the control saw too
(docs/protocol.md §15.1). The explorer (``--explore``) keeps to the same rule. A real leak through
Python's global ``random`` is still caught, and its finding says what is likely shared.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from orsbench.checks import Options, Report, Status, run_checks
from orsbench.checks.evidence import Episode
from orsbench.checks.reward import dense_rewards
from orsbench.checks.scenes import Control, Scene, Step, Track, judge
from orsbench.servers import launch
from orsbench.servers.user_app import AppTarget
from orsbench.wire.evidence import Exchange

pytest.importorskip("openreward")

OWN_STATE = ["Counter", "Board", "Chat", "StepCount", "PromptSetup", "PromptDealt"]


@pytest.fixture(scope="module", autouse=True)
def _zygote() -> Iterator[None]:
    launch.use_zygote(True)  # one `import openreward`, a fork per environment
    yield


def check(name: str, only: list[str] | None = None, **options: object) -> Report:
    with launch.serve(AppTarget.parse(f"tests/envs/own_state.py:{name}")) as server:
        return run_checks(server.url, Options(env=server.env_name, **{"fuzz": 5, **options}), only=only)


def _not_passed(report: Report) -> list[str]:
    return [f"{r.id}: {r.status.value} — {r.message}" for r in report.results if r.status in (Status.FAIL, Status.WARN, Status.ERROR)]


@pytest.mark.parametrize("name", OWN_STATE)
def test_a_correct_environment_showing_its_own_state_passes_every_check_explore_included(name):
    report = check(name, explore=40)
    assert _not_passed(report) == []
    assert report.exit_code == 0
    facts = report.evidence.facts.isolation
    assert facts.explored is not None and facts.explored.found == [], facts.explored
    assert facts.explored.steps >= 20, (facts.explored.steps, facts.explored.stopped)
    passed = {r.id for r in report.results if r.id.startswith("isolation.") and r.status is Status.PASS}
    assert {"isolation.interleaved_tasks", "isolation.same_task_fresh", "isolation.delete_leaves_other"} <= passed
    # the scenes did compare what they could: the prompt that shows the state is the control's at the same point
    assert "as alone" in report.result("isolation.same_task_fresh").message


def test_every_session_of_a_scene_fetches_its_prompt_before_its_first_call():
    report = check("PromptSetup", only=["isolation.*"])
    for scene in report.evidence.facts.isolation.scenes.values():
        for label in scene.tracks:
            actions = [s.action for s in scene.of(label) if s.action in ("prompt", "call")]
            assert not actions or actions[0] == "prompt", (scene.name, label, actions)


def test_a_global_random_generator_shared_by_sessions_is_caught_and_named():
    report = check("GlobalRandom", only=["isolation.*"])
    failed = [r for r in report.results if r.id.startswith("isolation.") and r.status is Status.FAIL]
    assert failed, _not_passed(report)
    message = report.result("isolation.interleaved_tasks").message
    assert report.result("isolation.interleaved_tasks").status is Status.FAIL, message
    assert "just after session" in message  # which other session's request came before it
    assert "Likely shared" in message and "random" in message


def test_a_dense_reward_holds_back_the_check_that_reads_one_as_a_win():
    report = check("Dense", fuzz=0, only=["reward.*"])
    result = report.result("reward.win_finishes")
    assert result.status is Status.NOT_APPLICABLE and "dense" in result.message, result.message


def test_what_reads_as_dense_and_what_is_a_win_left_open():
    left_open = Episode(0, {}, calls=[("submit", {"answer": "4"})] * 3, answers=["solved!"] * 3, sent_rewards=[1.0] * 3)
    assert dense_rewards(left_open) is None  # the same "solved!" again: a win the episode never closed
    walk = Episode(0, {}, calls=[("walk", {"d": "r"})] * 3, answers=["at 1", "at 2", "at 3"], sent_rewards=[1.0] * 3)
    assert "3 calls paid 1.0" in (dense_rewards(walk) or "")
    later = Episode(0, {}, calls=[("m", {})] * 2, answers=["good", "done"], sent_rewards=[1.0, 0.5], finished=True)
    assert "went on to finish" in (dense_rewards(later) or "")
    scaled = Episode(0, {}, calls=[("m", {})], answers=["x"], sent_rewards=[5.0])
    assert "more than 1.0" in (dense_rewards(scaled) or "")


def _slow(tool_s: float, setup_s: float, **options: object) -> Report:
    env = {"ORSBENCH_TEST_TOOL_SECONDS": str(tool_s), "ORSBENCH_TEST_SETUP_SECONDS": str(setup_s)}
    with launch.serve(AppTarget.parse("tests/envs/own_state.py:SlowCounter"), env=env) as server:
        return run_checks(server.url, Options(env=server.env_name, **{"fuzz": 0, **options}), only=["isolation.*"])


def _fully_checked(report: Report, *, no_slow_tool: bool = False) -> None:
    facts = report.evidence.facts.isolation
    skipped = {name: scene.skip for name, scene in facts.scenes.items() if scene.skip and not scene.inapplicable}
    assert skipped == {}, skipped  # no scene skipped, for time or anything else
    assert facts.scenes_s <= facts.budget_s, (facts.scenes_s, facts.budget_s, facts.budget_why)
    results = {r.id: r for r in report.results if r.id.startswith("isolation.") and r.id != "isolation.ttl_per_session"}
    if no_slow_tool:  # nothing to ping during: not applicable, saying why
        ping = results.pop("isolation.ping_during_call")
        assert ping.status is Status.NOT_APPLICABLE and "no tool call took" in ping.message, ping.message
    assert {i: r.message for i, r in results.items() if r.status is not Status.PASS} == {}


def test_a_slow_tool_and_setup_get_every_scene_within_a_budget_scaled_from_their_measured_times():
    # 1.5 s calls and 1 s setup against a 5 s play budget: the ratio of an 8 s tool to the default 30 s
    report = _slow(1.5, 1.0, play_seconds=5.0, explore=12)
    _fully_checked(report)
    facts = report.evidence.facts.isolation
    assert facts.budget_s > 5.0 and facts.budget_why.startswith("scaled"), facts.budget_why
    assert "within a budget of" in report.result("isolation.same_task_fresh").message
    explored = facts.explored
    assert explored.found == [] and explored.limit_s > 5.0 and explored.seconds <= explored.limit_s + 2, explored
    assert explored.steps >= 12 or not explored.stopped.startswith("the time budget"), explored


@pytest.mark.slow
def test_an_8_second_tool_gets_every_isolation_scene():
    report = _slow(8.0, 0.0)  # the default budgets, a real 8 s tool (about two minutes)
    _fully_checked(report)
    assert report.result("isolation.ping_during_call").status is Status.PASS


@pytest.mark.slow
def test_an_8_second_setup_keeps_to_the_budget_it_states():
    report = _slow(0.05, 8.0)
    _fully_checked(report, no_slow_tool=True)


def _prompt(text: str, at: float) -> Exchange:
    body = json.dumps([{"type": "text", "text": text}]).encode()
    return Exchange("GET", "http://127.0.0.1:9/e/prompt", {}, b"", status=200, body=body, started_at=at, elapsed=0.01)


def test_a_prompt_is_compared_only_at_the_point_of_the_control_that_fetched_it():
    """The rule itself, on recorded exchanges: A's second prompt (after its own requests left the control's path) is
    not compared with the control's first prompt; B shown task 1's prompt is a finding that names B's /create."""
    zero = Control(0, [], prompt="The counter is at 0 (task c0).", prompt_stable=True)
    one = Control(1, [], prompt="The counter is at 0 (task c1).", prompt_stable=True)
    created = Exchange("POST", "http://127.0.0.1:9/create", {}, b"", status=200, started_at=0.0)
    scene = Scene("unit", tracks={"A": Track("A", "a", 0), "B": Track("B", "b", 1)})
    scene.steps = [
        Step("A", "create", created),
        Step("A", "prompt", _prompt("The counter is at 0 (task c0).", 1.0)),
        Step("A", "prompt", _prompt("The counter is at 7 (task c0).", 2.0)),  # its own state, off the control's path
        Step("B", "create", created),
        Step("A", "prompt", _prompt("The counter is at 7 (task c0).", 3.0)),
    ]
    assert judge(scene, {0: zero, 1: one}, 30.0) == []
    leaked = Scene("unit", tracks=dict(scene.tracks), steps=[*scene.steps[:1], scene.steps[3], Step("A", "prompt", _prompt(one.prompt, 4.0))])
    (problem,) = judge(leaked, {0: zero, 1: one}, 30.0)
    assert problem.kind == "prompt" and "just after session B's /create on task 1" in problem.told
    assert "it is what task 1 shows" in problem.told
