"""Consumer profiles: what a client's user makes of an episode — the reward it trains or scores on, and what it refuses.

A client is more than its wire code: a trainer or harness turns per-call rewards into one episode reward by a
convention of its own (the last non-null reward, the finishing call's only, a sum), accepts rewards in some
range, shows the model images or only text, plays one call or many, and reports a failed call its own way. Those
facts are fields of a :class:`Consumer` on each client target's record
(:attr:`orsbench.clients.targets.ClientTarget.consumer`), read from the upstream code named in :attr:`Consumer.source`.

``orsbench matrix --url`` predicts from them what each client makes of *your* environment's episode
(:meth:`Consumer.predict`: "benchflow rejects reward -1.0: outside [0, 1]") and the live row confirms it: a
client that reports an ``episode_reward`` (docs/clients.md) is held to the predicted one, a refusal to the
predicted refusal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Consumer", "Prediction", "SURFACEABLE"]

#: Which per-call reward becomes the episode's: ``per-call`` (none of its own: the user's loop picks — orsbench
#: reads the last non-null), ``last`` (the last non-null), ``finishing`` (the first ``finished: true`` call's),
#: ``sum`` (the non-null ones added up).
Convention = Literal["per-call", "last", "finishing", "sum"]
#: What the consumer makes of no reward where its convention looks: ``none`` (the episode has none),
#: ``zero`` (0.0), ``refuses`` (an error: the episode is dropped or the run fails).
NoReward = Literal["none", "zero", "refuses"]
#: How a failed call reaches the consumer's user: the client ``raises``, hands the model an ``error text``, or
#: returns an ``error result`` (a result flagged as an error, the episode going on).
FailedCall = Literal["raises", "error text", "error result"]


#: The per-call fields a client may never show its user (:attr:`Consumer.unsurfaced`): the adapter contract's names.
SURFACEABLE = ("reward", "finished")

#: How an aggregation over several episodes counts a failed one: in the denominator (``all``) or not (``scored``).
Aggregate = Literal["all", "scored"]


@dataclass(frozen=True)
class Prediction:
    """What a consumer makes of one episode: the reward it takes, or why it refuses the episode."""

    reward: float | None = None
    #: Why the episode is refused (the consumer raises, or drops it untrained); None when it is taken.
    refused: str | None = None

    def describe(self) -> str:
        return f"refuses: {self.refused}" if self.refused else f"episode reward {self.reward!r}"


@dataclass(frozen=True)
class Consumer:
    """How one client's user consumes an episode (see the module docstring)."""

    #: Which reward the episode gets.
    reward: Convention
    #: No reward where the convention looks (a null on the finishing call; no reward at all).
    no_reward: NoReward = "none"
    #: The rewards it accepts, inclusive; a reward outside is refused. None: any finite number.
    reward_range: tuple[float, float] | None = None
    #: Whether every call's reward must be a number (a null on any call refused), not only the one it reads.
    every_call_rewarded: bool = False
    #: What an episode that never sends ``finished: true`` gets, for a ``finishing`` convention (``zero``: 0.0).
    unfinished: NoReward = "none"
    #: Whether image blocks reach the model (False: text only).
    images: bool = True
    #: Whether it plays many calls in one episode (False: one call, then the episode ends).
    multi_turn: bool = True
    #: How a failed call reaches its user.
    failed_call: FailedCall = "raises"
    #: How its own aggregation over several episodes counts one that failed (§13.15): ``all`` (in the denominator,
    #: as 0), ``scored`` (a mean over the scored episodes only: the failure is left out), ``None`` (no aggregation of
    #: its own: the user's loop adds the episodes up).
    aggregate: Aggregate | None = None
    #: The per-call fields (of :data:`SURFACEABLE`) the client never shows its user call by call, each with why (the
    #: upstream code, file and line): an eval log that keeps only the latest non-null reward shows no per-call reward.
    #: Its adapter says so once (the contract's ``unsurfaced`` line, docs/clients.md), and the per-call checks of those
    #: fields are not applicable to it — what it does show (the episode's reward, on the last call) is still judged.
    unsurfaced: tuple[tuple[str, str], ...] = ()
    #: The upstream code these facts are read from.
    source: str = ""

    def __post_init__(self) -> None:
        unknown = [name for name, _ in self.unsurfaced if name not in SURFACEABLE]
        if unknown:
            raise ValueError(f"unsurfaced names {unknown}: a per-call field is one of {', '.join(SURFACEABLE)}")

    def summary(self) -> str:
        """One line: ``finishing call's reward; none → refused; range [0, 1]; text only; ...``."""
        parts = [
            {"per-call": "per-call rewards (no episode reward of its own)", "last": "last non-null reward",
             "finishing": "the finishing call's reward", "sum": "sum of the rewards"}[self.reward],
            f"no reward → {_NO_REWARD[self.no_reward]}",
        ]  # fmt: skip
        if self.reward == "finishing":
            parts.append(f"never finished → {_NO_REWARD[self.unfinished]}")
        parts.append(f"range [{self.reward_range[0]:g}, {self.reward_range[1]:g}]" if self.reward_range else "any finite reward")
        if self.every_call_rewarded:
            parts.append("every call must carry a reward")
        parts += ["images" if self.images else "text only", "multi-turn" if self.multi_turn else "single-turn"]
        parts.append(f"a failed call {'raises' if self.failed_call == 'raises' else 'is an ' + self.failed_call}")
        if self.unsurfaced:
            parts.append(f"never shows per-call {' or '.join(name for name, _ in self.unsurfaced)}")
        if self.aggregate is not None:
            parts.append("its mean over episodes counts a failed one as 0" if self.aggregate == "all" else "its mean over episodes leaves a failed one out")
        return "; ".join(parts)

    def predict(self, rewards: list[Any], finished: bool) -> Prediction:
        """What this consumer makes of an episode whose calls carried ``rewards`` (``None``: no reward), in order.

        ``finished``: the last call said ``finished: true``. A reward that is not a finite number (a boolean, NaN)
        is refused by every consumer that checks; one that does not check takes it as sent.
        """
        if self.every_call_rewarded:
            if (bad := next((r for r in rewards if not _number(r)), _NONE)) is not _NONE:
                return Prediction(refused=f"a call's reward is {bad!r}: it needs a number on every call")
            if self.reward_range and (out := next((r for r in rewards if not self._in_range(r)), _NONE)) is not _NONE:
                return Prediction(refused=f"reward {out!r} is outside [{self.reward_range[0]:g}, {self.reward_range[1]:g}]")
        if self.reward == "finishing":
            if not finished:
                return self._empty(self.unfinished, "the episode never finished")
            picked = rewards[-1] if rewards else None
        elif self.reward == "sum":
            numbers = [r for r in rewards if _number(r)]
            picked = math.fsum(numbers) if numbers else None
        else:
            picked = next((r for r in reversed(rewards) if r is not None), None)
        if picked is None:
            return self._empty(self.no_reward, "no reward")
        if self.reward_range is not None and not self._in_range(picked):
            return Prediction(refused=f"reward {picked!r} is outside [{self.reward_range[0]:g}, {self.reward_range[1]:g}]")
        if self.reward == "finishing" and self.no_reward == "refuses" and not _number(picked):
            return Prediction(refused=f"the finishing reward {picked!r} is not a finite number")
        return Prediction(reward=picked)

    def _in_range(self, value: Any) -> bool:
        return self.reward_range is None or (_number(value) and self.reward_range[0] <= value <= self.reward_range[1])

    @staticmethod
    def _empty(rule: NoReward, why: str) -> Prediction:
        if rule == "refuses":
            return Prediction(refused=why)
        return Prediction(reward=0.0 if rule == "zero" else None)


_NONE = object()
_NO_REWARD = {"none": "no episode reward", "zero": "0.0", "refuses": "refused"}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
