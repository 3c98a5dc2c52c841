"""How a client fared with one episode: the verdict vocabulary, and the one function that picks the word.

Every view of a client's run says the same thing in the same words — a cell of ``orsbench matrix``,
a row of ``orsbench clients URL``, a case of ``orsbench check-client`` — because each one collects the
:class:`Effect` s it has and asks :func:`verdict_of`:

* a run graded by the client checks: the effect of each failed required check
  (:attr:`orsbench.clientcheck.checks.ClientCheck.effect`), and what the process did;
* a prediction: what a correct client does in the case (a fault profile's expectation) and the effect of
  each pinned upstream defect that shows in the cell (:attr:`orsbench.upstream.defects.Defect.effect`).

So a prediction and a live run can only disagree about facts, never about words. This module imports
nothing: every floor may use it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["CaseVerdict", "Effect", "Verdict", "describe", "verdict_of"]


class Effect(StrEnum):
    """What a run showed, as far as the verdict is concerned (a failed check's, a defect's, the process's)."""

    #: Still running at its deadline (or stopped for a request storm or an output flood).
    HANGS = "hangs"
    #: The client reported an error, or exited non-zero: the user learns that something went wrong.
    REPORTS_ERROR = "reports an error"
    #: The server is left worse off: a tool run more often than called, a session left open.
    HARMS_SERVER = "harms the server"
    #: Other data handed on than the environment sent (a text, a reward), or the episode cut short without a word.
    WRONG_DATA = "hands on wrong data"
    #: A protocol rule broken without changing this episode (no ``env_name``, a retry before ``Retry-After``).
    RULE = "breaks a rule"


class Verdict(StrEnum):
    """The one vocabulary of how a client fared with an episode."""

    #: Played as a correct client does: to the end, or (where the case asks for it) to a clear error.
    WORKS = "works"
    #: Stopped with an error that says what happened (right, where the case is one a correct client cannot ride out).
    FAILS_CLEARLY = "fails clearly"
    #: Took wrong data for right, or left the server worse off — with or without an error.
    FAILS_SILENTLY = "fails silently"
    #: Still going at its deadline.
    HANGS = "hangs"


def verdict_of(effects: Iterable[Effect]) -> Verdict:
    """The verdict of a run (or a prediction) that showed ``effects``.

    A hang outweighs everything; a reported error is a clear failure unless the server was left worse off
    (a tool re-run, a session left open: the error did not undo them); wrong data or harm with no error is
    a silent failure; a broken rule alone changes nothing (it is listed beside the verdict).
    """
    seen = set(effects)
    if Effect.HANGS in seen:
        return Verdict.HANGS
    if Effect.REPORTS_ERROR in seen:
        return Verdict.FAILS_SILENTLY if Effect.HARMS_SERVER in seen else Verdict.FAILS_CLEARLY
    if seen & {Effect.HARMS_SERVER, Effect.WRONG_DATA}:
        return Verdict.FAILS_SILENTLY
    return Verdict.WORKS


def describe(verdict: Verdict, expected: Verdict = Verdict.WORKS) -> str:
    """``verdict`` in words, marked ``(right)`` where a failure is what a correct client does in the case."""
    return f"{verdict} (right)" if verdict == expected and verdict is not Verdict.WORKS else str(verdict)


@dataclass(frozen=True)
class CaseVerdict:
    """One client's verdict on one case, as a report carries it (check-client: one per case)."""

    case: str
    verdict: Verdict
    #: What a correct client gets in the case.
    expected: Verdict
    #: One line saying why, where the client did not do what a correct client does.
    because: str | None = None

    @property
    def right(self) -> bool:
        return self.verdict == self.expected

    @property
    def words(self) -> str:
        return describe(self.verdict, self.expected)

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "verdict": str(self.verdict),
            "expected": str(self.expected),
            "right": self.right,
            "words": self.words,
            "because": self.because,
        }
