"""Correct environments whose prompt and answers show the session's own state pass every check (issue 34).

A session is compared with a control that sent the same requests in the same order alone — its prompt
first, as every real client fetches it, then the same calls — never with a fresh session's prompt: a
counter that reads "The counter is at 7" after the session's own ``add(7)``, a board with its moves, a
chat transcript, a step count, and a game dealt in ``get_prompt`` are what the control saw too
(docs/protocol.md §15.1). The explorer (``--explore``) keeps to the same rule. A real leak through
Python's global ``random`` is still caught, and its finding says what is likely shared.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orsbench.checks import Options, Report, Status, run_checks
from orsbench.checks.evidence import Episode
from orsbench.checks.reward import dense_rewards
from orsbench.servers import launch
from orsbench.servers.user_app import AppTarget

pytest.importorskip("openreward")

OWN_STATE = ["Counter", "Board", "Chat", "StepCount", "PromptSetup"]


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
