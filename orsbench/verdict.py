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

__all__ = ["SCRIPT", "Effect", "Finding", "Judgement", "Verdict", "describe", "verdict_of"]


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
class Finding:
    """A failed check as a verdict carries it: the check's id and its message (never parsed back from a string)."""

    check: str
    message: str

    def __str__(self) -> str:
        return f"{self.check}: {self.message}"


@dataclass(frozen=True)
class Judgement:
    """How one client fared with one episode: the one record every view of a client's run carries.

    Made by one function (:func:`orsbench.clientcheck.judgement.judge`, or :func:`judged` over what a live
    grader saw) and carried as it is — typed, never as words parsed back — to check-client's report, a
    hosted case, a proxied session, a matrix cell, a row of ``orsbench clients URL``, the pytest plugin
    and every report writer.
    """

    verdict: Verdict
    #: What a correct client gets in the case (a clear error, where the case asks for one).
    expected: Verdict = Verdict.WORKS
    #: The failed required checks that decided the verdict (the process, the data, the server) — or, where the
    #: script's expectations alone decided it, ``script`` findings.
    problems: tuple[Finding, ...] = ()
    #: Ids of checks of rules the episode did not depend on (``client.env_name``, ...) and of recommended ones not kept.
    rules: tuple[str, ...] = ()
    #: The client's own error that ended the episode (its reported error, else its exit status and last stderr line).
    error: str | None = None
    #: What the verdict could not see, said once (``the client posted no report``); ``None``: nothing missing.
    unseen: str | None = None
    #: What was judged: a case's name, a session's label, a cell's id.
    subject: str = ""

    @property
    def right(self) -> bool:
        """Whether the client did what a correct client does here (works, or fails clearly where that is right)."""
        return self.verdict == self.expected

    @property
    def words(self) -> str:
        """The verdict as every view prints it: ``works``, ``fails clearly (right)``, ``fails silently``."""
        return describe(self.verdict, self.expected)

    @property
    def failed_checks(self) -> list[str]:
        """Ids of every failed check the judgement names: those that decided it, then the rules broken."""
        return [p.check for p in self.problems if p.check != SCRIPT] + list(self.rules)

    @property
    def because(self) -> str | None:
        """One line saying why, where the client did not do what a correct client does."""
        if self.right:
            return None
        if self.verdict is Verdict.FAILS_CLEARLY and self.error:
            return self.error
        return str(self.problems[0]) if self.problems else self.error

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.subject,
            "verdict": str(self.verdict),
            "expected": str(self.expected),
            "right": self.right,
            "words": self.words,
            "because": self.because,
            "problems": [str(p) for p in self.problems],
            "rules": list(self.rules),
            "error": self.error,
            "unseen": self.unseen,
        }


#: The ``check`` of a finding the script's expectations made (no check failed: what the client reported differs).
SCRIPT = "script"
