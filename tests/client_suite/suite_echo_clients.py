"""A client's own test suite, as a user would write it: TRL's OpenRewardSpec and the openreward SDK on an env.

Not collected by orsbench's test run (no ``test_`` prefix): ``tests/test_cassette_traffic.py`` runs it as a
pytest session of its own — once through ``orsbench proxy --record`` in front of the live ``echo`` mock,
once against ``orsbench serve --cassette`` of what was recorded — and compares the per-test outcomes.
The target comes from ``ORS_SUITE_URL`` and ``ORS_SUITE_ENV``; ``OPENREWARD_*`` point the SDK at it.

Tests that fail on purpose (a wrong answer, an invalid split, an index out of range, an unknown tool) are as
much a part of the outcome as the ones that pass: a replay must fail them the same way.
"""

from __future__ import annotations

import os

import pytest

URL = os.environ.get("ORS_SUITE_URL", "")
ENV = os.environ.get("ORS_SUITE_ENV", "echo")

pytestmark = pytest.mark.skipif(not URL, reason="run by tests/test_cassette_traffic.py with ORS_SUITE_URL set")


def _spec(**kwargs):
    from trl.experimental.openreward import OpenRewardSpec

    return OpenRewardSpec(URL, env_name=ENV, **kwargs)


def test_trl_dataset_has_the_tasks_asked_for():
    spec = _spec(num_tasks=3)
    assert spec.train_dataset.num_rows == 3


def test_trl_rollout_wins_with_the_target():
    spec = _spec(num_tasks=2)
    rollout = spec.environment_factory()
    try:
        prompt = rollout.reset(task_index=0)
        target = str(prompt).split("'")[1]  # "Echo 'WORD' to win."
        rollout.echo(text=target)
        assert rollout.reward == 1.0 and rollout.finished
    finally:
        rollout._close()


def test_trl_rollout_loses_with_a_wrong_answer():
    spec = _spec(num_tasks=2)
    rollout = spec.environment_factory()
    try:
        rollout.reset(task_index=1)
        rollout.echo(text="certainly-not-the-target")
        assert rollout.reward == 0.0 and not rollout.finished
    finally:
        rollout._close()


def test_trl_test_split_by_indices():
    spec = _spec(split="test", indices=[0, 2])
    assert spec.train_dataset.num_rows == 2


def test_trl_invalid_split_is_refused():
    with pytest.raises(Exception, match="(?i)split"):
        _spec(split="no-such-split", num_tasks=1).train_dataset


def test_sdk_task_out_of_range_is_refused():
    import openreward

    environment = openreward.OpenReward().environments.get(ENV)
    with pytest.raises(Exception, match="(?i)index"):
        environment.get_task("train", 10_000)


def test_sdk_session_plays_two_calls():
    import openreward

    environment = openreward.OpenReward().environments.get(ENV)
    with environment.session(split="train", index=2) as session:
        prompt = "".join(getattr(b, "text", "") for b in session.get_prompt())
        target = prompt.split("'")[1]
        first = session.call_tool("echo", {"text": "warm-up"})
        assert first.reward == 0.0
        second = session.call_tool("echo", {"text": target})
        assert second.reward == 1.0 and second.finished


def test_sdk_unknown_tool_is_an_error():
    import openreward

    environment = openreward.OpenReward().environments.get(ENV)
    with environment.session(split="train", index=0) as session:
        with pytest.raises(Exception, match="(?i)tool"):
            session.call_tool("no_such_tool", {})


def test_deliberately_failing_expectation():
    """A test the client's authors got wrong: it fails live, and must fail the same way on the replay."""
    spec = _spec(num_tasks=1)
    assert spec.train_dataset.num_rows == 2
