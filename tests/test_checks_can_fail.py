"""Every server check can fail (issue 24): a check that never fails on any input is no check.

Most checks are shown failing by a planted violation (tests/test_check_violations.py asserts each
fails exactly the checks it names) and the binding checks by schema-zoo
(tests/test_binding_checks.py). The rest are shown here, one test each, on evidence made in
memory: the smallest thing that breaks the rule, graded by the check's own function. The last test
holds the line — a new check joins one of the three, or the suite fails naming it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from orsbench import protocol
from orsbench.checks import CHECKS, Options, Status, load_checks
from orsbench.checks.binding import BINDING_CHECKS
from orsbench.checks.deployment import DEPLOYMENT_CHECKS
from orsbench.checks.evidence import Episode, Evidence, Failure
from orsbench.servers.faults.violations import VIOLATIONS
from tests.passive_traffic import call, exchange, output

load_checks()

Build = Callable[[Evidence], None]


def _evidence() -> Evidence:
    ev = Evidence("http://127.0.0.1:9", Options())
    ev.env, ev.split, ev.index = "echo", "train", 0
    return ev


def _tools(ev: Evidence, *tools: dict) -> None:
    ev.record("tools", exchange("GET", "/echo/tools", answer={"tools": list(tools)}))
    ev.facts.tools = list(tools)


def _bad_names(ev: Evidence) -> None:
    _tools(ev, {"name": "read-file", "description": "x", "input_schema": {"type": "object", "properties": {"class": {"type": "string"}}}})


def _case_sensitive(ev: Evidence) -> None:
    ev.record("routing.case", exchange("GET", "/ECHO/tools", status=404, answer={"detail": "Not Found"}))


def _unknown_env_served(ev: Evidence) -> None:
    ev.record("routing.unknown_env", exchange("GET", "/orsbench-no-such-env/tools", answer={"tools": []}))


def _negative_index_wrong(ev: Evidence) -> None:
    ev.record("dataset.tasks", exchange("POST", "/echo/tasks", answer={"tasks": [{"id": 0}, {"id": 1}], "env_name": "echo"}))
    ev.record("dataset.task.negative", exchange("POST", "/echo/task", answer={"task": {"id": 0}, "env_name": "echo"}))


def _messages_without_roles(ev: Evidence) -> None:
    ev.record("session.messages", exchange("GET", "/echo/messages", answer=[{"blocks": []}]))


def _no_tool_input(ev: Evidence) -> None:
    ev.facts.unbuildable = {"echo": "a pattern no example satisfies"}


def _buffered_stream(ev: Evidence) -> None:
    primary = call("s", "t", "hello", output("hello", 0.0, False))
    primary.headers = {"content-type": "text/event-stream"}
    ev.record("call.primary", primary)


def _never_finished(ev: Evidence) -> None:
    ev.facts.play_calls = 20
    ev.facts.episodes = [Episode(0, {}, calls=[("echo", {"text": "x"})] * 20, stopped="the call budget (20) was spent")]


def _final_reward_null(ev: Evidence) -> None:
    ev.facts.fresh_calls.append("play.0")
    ev.record("play.0", call("s", "t", "hello", output("done", None, True)))


def _wrong_method_allowed(ev: Evidence) -> None:
    ev.record("http.wrong_method", exchange("GET", protocol.CREATE, answer={"sid": "x"}))


def _crash(kind: str) -> Build:
    def build(ev: Evidence) -> None:
        ev.facts.ran["fuzz"] = 3
        ev.facts.tool_answers["echo"] = 2
        ev.facts.tool_failures.append(Failure("echo", kind, {"text": "\x03"}, "no end event within 3 s", "fuzz.echo.3", "boundary"))

    return build


def _tool_never_played(ev: Evidence) -> None:
    ev.facts.tool_play = {"submit": {"played": 1, "won": True}, "hint": {"played": 0, "won": False}}
    ev.facts.ran["play"] = 1


def _empty_answer_wins(ev: Evidence) -> None:
    ev.facts.episodes = [Episode(0, {}, finished=True, reward=1.0, rewards=[0.0, 1.0])]
    ev.facts.hacks = {"tool": "submit", "inputs": {"empty": {"answer": ""}}, "rewards": {"empty": 1.0}}
    ev.facts.ran["hack"] = 1


def _answer_in_prompt(ev: Evidence) -> None:
    ev.facts.episodes = [Episode(0, {"question": "Capital of France?", "answer": "Paris"}, prompt="Capital of France? (Paris)")]


def _reward_changes(ev: Evidence) -> None:
    ev.facts.replay = {"index": 0, "first": 1.0, "again": 0.0, "replays": [0.0], "diverged_at": None, "answers": 1}
    ev.facts.ran["replay"] = 1


def _undescribed(ev: Evidence) -> None:
    _tools(ev, {"name": "echo", "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}}})


def _empty_prompt(ev: Evidence) -> None:
    ev.record("session.prompt", exchange("GET", "/echo/prompt", answer=[{"type": "text", "text": "  "}]))


def _win_left_open(ev: Evidence) -> None:
    ev.record("play.0", call("s", "t", "4", output("solved!", 1.0, False)))
    ev.facts.episodes = [Episode(0, {}, calls=[("submit", {"answer": "4"})] * 3, rewards=[1.0] * 3, unfinished_win="play.0")]


#: check id → the evidence that breaks it (graded by the check's own function: FAIL, or WARN for a soft rule).
SHOWN: dict[str, Build] = {
    "discovery.tool_names_format": _bad_names,
    "routing.env_case_insensitive": _case_sensitive,
    "routing.unknown_env": _unknown_env_served,
    "dataset.task_negative_index": _negative_index_wrong,
    "session.messages": _messages_without_roles,
    "call.tool_inputs": _no_tool_input,
    "call.sse_no_buffering": _buffered_stream,
    "call.episode_finishes": _never_finished,
    "reward.terminal_reward": _final_reward_null,
    "reward.win_finishes": _win_left_open,
    "http.wrong_method_405": _wrong_method_allowed,
    "tool.no_crash_on_valid_input": _crash("raise"),
    "tool.no_hang": _crash("hang"),
    "tool.exercised": _tool_never_played,
    "quality.reward_hacking": _empty_answer_wins,
    "quality.answer_leak": _answer_in_prompt,
    "quality.reward_deterministic": _reward_changes,
    "quality.descriptions": _undescribed,
    "quality.prompt_nonempty": _empty_prompt,
}


@pytest.mark.parametrize("check_id", sorted(SHOWN))
def test_the_check_fails_on_evidence_that_breaks_its_rule(check_id: str) -> None:
    ev = _evidence()
    SHOWN[check_id](ev)
    outcome = CHECKS[check_id].fn(ev)
    assert outcome.status in (Status.FAIL, Status.WARN), (check_id, outcome.status, outcome.message)


def test_every_check_is_shown_to_fail_somewhere() -> None:
    by_violation = {c for v in VIOLATIONS.values() for c in (*v.breaks, *v.also)}
    # The deployment checks fail behind a planted balancer mistake each (tests/test_deployment.py).
    unshown = set(CHECKS) - by_violation - set(BINDING_CHECKS) - set(SHOWN) - set(DEPLOYMENT_CHECKS)
    assert unshown == set(), (
        f"no test shows {sorted(unshown)} failing: plant a violation that breaks it "
        "(orsbench/servers/faults/violations.py) or add its breaking evidence to SHOWN here"
    )
