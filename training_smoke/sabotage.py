"""Negative controls: client bugs planted between ``OpenRewardSpec`` and the trainer.

Each sabotage wraps ``spec.reward_funcs`` and corrupts what it hands
GRPOTrainer, while the server, the adapter and the evidence (the server's
per-rollout rewards, read from the adapter) stay untouched. A learning test
with power must end ``learned: false`` under every one of them:

* ``reward-shift``: each rollout gets its neighbour's reward (an off-by-one in
  a client that batches rewards);
* ``reward-sign``: every reward negated (a cost/reward mix-up);
* ``reward-none``: every reward dropped to ``None`` (a client that never
  reads the reward field);
* ``reward-constant``: every rollout gets 1.0 (a client that reports success
  instead of the reward).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Rewards = list[float | None]


def _shift(rewards: Rewards) -> Rewards:
    return rewards[1:] + rewards[:1] if rewards else rewards


def _sign(rewards: Rewards) -> Rewards:
    return [None if r is None else -r for r in rewards]


def _none(rewards: Rewards) -> Rewards:
    return [None] * len(rewards)


def _constant(rewards: Rewards) -> Rewards:
    return [1.0] * len(rewards)


SABOTAGES: dict[str, Callable[[Rewards], Rewards]] = {
    "reward-shift": _shift,
    "reward-sign": _sign,
    "reward-none": _none,
    "reward-constant": _constant,
}


def sabotaged(reward_func: Callable[..., Rewards], name: str | None, seen: list[Rewards] | None = None) -> Callable[..., Rewards]:
    """``reward_func`` with the sabotage ``name`` applied to its output (``None``: unchanged).

    Every list handed to the trainer is appended to ``seen`` when given, so the
    summary can show what the trainer actually received. The wrapper keeps the
    original ``__name__``: TRL logs rewards under the function's name.
    """
    if name is not None and name not in SABOTAGES:
        raise ValueError(f"unknown sabotage {name!r}; known: {', '.join(SABOTAGES)}")
    corrupt = SABOTAGES[name] if name else (lambda rewards: rewards)

    def reward(*args: Any, **kwargs: Any) -> Rewards:
        out = corrupt(list(reward_func(*args, **kwargs)))
        if seen is not None:
            seen.append(list(out))
        return out

    reward.__name__ = getattr(reward_func, "__name__", "reward")
    reward.__qualname__ = reward.__name__
    return reward
