"""Consumer profiles: every client target carries one, and each predicts from the episode's rewards as its upstream code does."""

from __future__ import annotations

import math

import pytest

from orsbench.clients.consumers import Consumer, Prediction
from orsbench.clients.targets import CLIENT_TARGETS


def test_every_target_carries_a_profile_read_from_named_upstream_code() -> None:
    for target in CLIENT_TARGETS.values():
        assert isinstance(target.consumer, Consumer), target.name
        assert target.consumer.source, f"{target.name}: say which upstream code the profile is read from"
        assert target.consumer.summary()


@pytest.mark.parametrize(
    ("consumer", "rewards", "finished", "expected"),
    [
        # The last non-null reward (TRL's _outcome_only_reward_func), None without one.
        (Consumer("last"), [None, 0.2, None, 1.0], True, Prediction(1.0)),
        (Consumer("last"), [None, None], False, Prediction(None)),
        # Inspect's scorer: no reward scores 0.0.
        (Consumer("last", no_reward="zero"), [None], True, Prediction(0.0)),
        (Consumer("sum"), [0.25, None, 0.5], True, Prediction(0.75)),
        # platoon: the finishing call's reward; a null there is an invalid grade; never finished is 0.0 (no_submit).
        (Consumer("finishing", no_reward="refuses", unfinished="zero"), [0.5, -1.0], True, Prediction(-1.0)),
        (Consumer("finishing", no_reward="refuses", unfinished="zero"), [0.5, None], True, Prediction(refused="no reward")),
        (Consumer("finishing", no_reward="refuses", unfinished="zero"), [0.5], False, Prediction(0.0)),
        (Consumer("finishing", no_reward="refuses"), [math.nan], True, Prediction(refused="the finishing reward nan is not a finite number")),
        # benchflow's ORS seam: every call's reward in [0, 1], a terminal one.
        (Consumer("finishing", reward_range=(0.0, 1.0), every_call_rewarded=True), [0.0, 1.0], True, Prediction(1.0)),
        (
            Consumer("finishing", reward_range=(0.0, 1.0), every_call_rewarded=True),
            [0.0, -1.0],
            True,
            Prediction(refused="reward -1.0 is outside [0, 1]"),
        ),
        (
            Consumer("finishing", reward_range=(0.0, 1.0), every_call_rewarded=True),
            [None, 1.0],
            True,
            Prediction(refused="a call's reward is None: it needs a number on every call"),
        ),
    ],
)
def test_prediction(consumer: Consumer, rewards: list[object], finished: bool, expected: Prediction) -> None:
    assert consumer.predict(rewards, finished) == expected


def test_platoon_trains_on_the_finishing_call_only() -> None:
    platoon = CLIENT_TARGETS["platoon"].consumer
    assert CLIENT_TARGETS["platoon"].trains and platoon.reward == "finishing"
    assert platoon.predict([0.9, 0.1], True) == Prediction(0.1)
    assert "the finishing call's reward" in platoon.summary() and "never finished → 0.0" in platoon.summary()
