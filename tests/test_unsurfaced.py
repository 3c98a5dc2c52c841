"""What a client never shows its user per call (its profile's ``unsurfaced``) is not judged per call — said once.

inspect-openreward's log keeps only the latest non-null reward and a latched ``finished``: per call, its user sees
neither. ``client.reward_as_sent`` then says "not applicable" (once, never a failure) and still judges what the client
does show: the episode's reward and ``finished`` on its last call — a wrong one, or a JSON boolean taken for 1.0, fails.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from orsbench.checks.model import Status
from orsbench.clientcheck import get_case, grade, run_case
from orsbench.clientcheck.contract import parse_line, read_out
from orsbench.clients.consumers import Consumer
from orsbench.clients.targets import CLIENT_TARGETS

FAULTY = Path(__file__).parent / "clients" / "faulty.py"
SLACK_S = 90.0


def faulty(fault: str) -> str:
    return shlex.join([sys.executable, str(FAULTY), fault])


def test_the_unsurfaced_line_is_a_contract_line_and_names_known_fields_only(tmp_path: Path) -> None:
    assert parse_line(1, '{"unsurfaced": {"reward": "its log keeps the last one"}}').valid
    bad = parse_line(2, '{"unsurfaced": {"text": "never"}}')
    assert not bad.valid and "reward or finished" in bad.problems[0]
    out = tmp_path / "out"
    out.write_text('{"unsurfaced": {"reward": "why"}}\n{"tool": "t", "text": "x", "reward": null, "finished": true}\n')
    read = read_out(out, 10_000)
    assert read.unsurfaced == {"reward": "why"} and len(read.entries) == 1  # not a call's line, not an error's
    with pytest.raises(ValueError, match="reward, finished"):
        Consumer("last", unsurfaced=(("text", "no"),))


def test_inspect_says_it_shows_no_per_call_reward_nor_finished_naming_its_code() -> None:
    said = dict(CLIENT_TARGETS["inspect"].consumer.unsurfaced)
    assert set(said) == {"reward", "finished"}
    assert "_solver.py:157" in said["reward"] and "_scorer.py:23" in said["reward"]
    assert "never shows per-call reward or finished" in CLIENT_TARGETS["inspect"].consumer.summary()


def _reward_check(fault: str, case: str):  # type: ignore[no-untyped-def]
    results = grade(run_case(faulty(fault), get_case(case), timeout=SLACK_S))
    return results, next(r for r in results if r.id == "client.reward_as_sent")


def test_a_client_showing_only_the_episode_reward_is_not_failed_per_call() -> None:
    """dense-reward sends a reward on every call: the client writes null for all but the last — not applicable, once."""
    results, found = _reward_check("episode-reward-only", "dense-reward")
    assert found.status is Status.NOT_APPLICABLE, found.message
    assert found.message.startswith("not applicable call by call") and "latest non-null reward only" in found.message
    assert [r.id for r in results].count("client.reward_as_sent") == 1
    assert not {r.id for r in results if r.status in (Status.FAIL, Status.ERROR)}, [(r.id, r.message) for r in results]


@pytest.mark.parametrize(
    ("fault", "case", "said"),
    [
        ("episode-reward-only-wrong", "dense-reward", "the episode's latest non-null reward sent"),
        ("episode-reward-only-bool", "echo+reward-bool", "a boolean, not a reward"),
    ],
)
def test_what_such_a_client_does_show_is_still_judged(fault: str, case: str, said: str) -> None:
    _, found = _reward_check(fault, case)
    assert found.status is Status.FAIL and said in found.message, found.message


# -- an error result the client flags itself (an agent's is_error), passed on untranslated ------------------------
@pytest.mark.parametrize("case", ["recover", "sparse-reward+tool-raises"])
def test_a_failed_call_handed_on_as_a_flagged_error_result_is_reported(case: str) -> None:
    """recover answers one ok:false, tool-raises an error event: the agent shows the model an is_error result."""
    results = grade(run_case(faulty("error-result-flagged"), get_case(case), timeout=SLACK_S))
    found = next(r for r in results if r.id == "client.failure_as_error")
    assert found.status is Status.PASS and "as an error result the client flagged" in found.message, found.message


def test_the_same_text_without_the_flag_is_a_failure_handed_on_as_data() -> None:
    results = grade(run_case(faulty("error-as-text"), get_case("recover"), timeout=SLACK_S))
    found = next(r for r in results if r.id == "client.failure_as_error")
    assert found.status is Status.FAIL and "reported it as the tool's answer" in found.message, found.message


def test_an_episode_that_ends_on_a_flagged_error_result_tells_its_user_nothing() -> None:
    """restart: the session is gone, every later call is refused 404; handed to the model as error results only, the
    episode ends unfinished with no error for the client's user (firehorse-error-results-unreported)."""
    results = grade(run_case(faulty("error-result-flagged"), get_case("sparse-reward+restart"), timeout=SLACK_S))
    found = next(r for r in results if r.id == "client.failure_as_error")
    assert found.status is Status.FAIL and "no error reported to the client's user" in found.message, found.message
