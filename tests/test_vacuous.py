"""No vacuous results (issue 24): a check passes only when its condition was exercised.

Each test hands a check evidence in which its probe was refused, or never sent, and sees a skip
that says why (or a failure where the refusal is itself the defect) — on main before this test,
each of these was a PASS. The live version, a server that caches its environment per task, is
``test_sessions_that_start_finished_are_failures_not_vacuous_passes`` in tests/test_user_envs.py.
"""

from __future__ import annotations

import pytest

from orsbench.checks import CHECKS, Options, Status, load_checks
from orsbench.checks.evidence import Episode, Evidence
from tests.passive_traffic import exchange

load_checks()


def _grade(check_id: str, ev: Evidence) -> tuple[Status, str]:
    outcome = CHECKS[check_id].fn(ev)
    return outcome.status, outcome.message


def _evidence(**options: object) -> Evidence:
    return Evidence("http://127.0.0.1:9", Options(**options))


def _refused(ev: Evidence, probe: str, reason: str, n: int, *, fresh: bool = True) -> None:
    for i in range(n):
        name = f"{probe}.{i}"
        ev.record(name, exchange("POST", "/echo/call", {"name": "echo", "input": {}}, answer={"ok": False, "reason": reason}))
        ev.facts.note_call(probe, name, reason, fresh=fresh)


@pytest.mark.parametrize("check_id", ["tool.no_crash_on_valid_input", "tool.no_hang"])
def test_a_fuzz_and_play_refused_for_an_unrelated_reason_are_a_skip_that_says_why(check_id: str) -> None:
    ev = _evidence()
    _refused(ev, "play", "404", 3)
    _refused(ev, "fuzz", "not_found", 5)
    status, message = _grade(check_id, ev)
    assert status is Status.SKIP and "nothing was tried" in message and "5 not_found" in message and "3 404" in message


@pytest.mark.parametrize("check_id", ["tool.no_crash_on_valid_input", "tool.no_hang"])
def test_a_fuzz_blocked_by_sessions_that_start_finished_fails_even_when_play_ran(check_id: str) -> None:
    ev = _evidence()
    ev.facts.ran["play"] = 4
    _refused(ev, "fuzz", "episode_finished", 2)
    status, message = _grade(check_id, ev)
    assert status is Status.FAIL and message.startswith("the fuzz could not try anything") and "started finished" in message


def test_episode_finished_on_a_session_the_checker_had_used_is_no_defect() -> None:
    ev = _evidence()
    ev.facts.ran["play"] = 4
    _refused(ev, "fuzz", "episode_finished", 2, fresh=False)
    status, message = _grade("tool.no_crash_on_valid_input", ev)
    assert status is Status.PASS and "the fuzz tried nothing (2 call(s) refused: 2 episode_finished)" in message


def test_reward_hacking_with_every_probe_refused_is_a_skip() -> None:
    ev = _evidence()
    ev.facts.episodes = [Episode(0, {}, finished=True, reward=1.0, rewards=[1.0])]
    ev.facts.hacks = {"tool": "submit", "inputs": {"empty": {"a": ""}, "garbage": {"a": "x"}}, "rewards": {"empty": None, "garbage": None}}
    _refused(ev, "hack", "404", 2)
    assert _grade("quality.reward_hacking", ev)[0] is Status.SKIP
    ev.facts.refusals.clear()
    _refused(ev, "hack", "episode_finished", 2)
    assert _grade("quality.reward_hacking", ev)[0] is Status.FAIL


def test_a_replay_refused_at_its_first_call_fails_reward_deterministic() -> None:
    ev = _evidence()
    ev.facts.replay = {"index": 0, "first": 1.0, "again": None, "replays": [None], "diverged_at": None, "answers": 0}
    _refused(ev, "replay", "episode_finished", 1)
    status, message = _grade("quality.reward_deterministic", ev)
    assert status is Status.FAIL and "the replay" in message


def test_tool_exercised_counts_no_refused_call_as_played() -> None:
    ev = _evidence()
    ev.facts.tool_play = {"submit": {"played": 0, "won": False}}
    _refused(ev, "play", "404", 3)
    assert _grade("tool.exercised", ev)[0] is Status.SKIP


# -- checks that read exchanges: nothing sent is nothing judged ------------------------------------------
@pytest.mark.parametrize(
    "check_id",
    [
        "session.delete_idempotent",
        "session.create_unknown_env_404",
        "call.sse_content_type",
        "call.reason_precedence",
        "http.json_content_type",
        "routing.default_env_redirect",
        "dataset.env_name_echo",
    ],
)
def test_a_check_whose_requests_were_never_sent_is_a_skip(check_id: str) -> None:
    status, message = _grade(check_id, _evidence())
    assert status is Status.SKIP, (check_id, status, message)


def test_a_binding_check_over_no_tools_is_not_applicable() -> None:
    ev = _evidence()
    ev.record("tools", exchange("GET", "/echo/tools", answer={"tools": []}))
    for check_id in [c.id for c in CHECKS.values() if c.group == "binding"]:
        assert _grade(check_id, ev)[0] is Status.NOT_APPLICABLE, check_id
