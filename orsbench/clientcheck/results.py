"""Typed results of the client half: a matrix of cells, the rows of ``orsbench clients URL``.

Every view of a client's run speaks the one vocabulary (:class:`orsbench.verdict.Verdict`,
picked by :func:`orsbench.clientcheck.judgement.judge` or, for a prediction, by
:func:`orsbench.upstream.defects.predicted`); these dataclasses carry those verdicts
to the one report writer (:mod:`orsbench.reports.clients`: JSON, Markdown, HTML,
terminal), as :class:`~orsbench.checks.runner.Report` carries check-client's.
``to_json`` is each result's JSON document (the contract the docs describe).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from orsbench.upstream.since import NOT_BISECTED, Since
from orsbench.verdict import Judgement, Verdict, describe

__all__ = ["NOT_INSTALLED", "NOT_PLAYED", "NOT_RUN", "ClientInfo", "LiveResult", "LiveRow", "MatrixCell", "MatrixResult", "PinnedDefect", "PlayerEpisode"]

#: A matrix cell that was not reached within the budget.
NOT_RUN = "not run"
#: A row whose client is not installed here.
NOT_INSTALLED = "not installed"
#: A row no client could play: the player's episode has no call to replay.
NOT_PLAYED = "not played"
JSON = dict[str, Any]


@dataclass(frozen=True)
class PinnedDefect:
    """A pinned upstream defect as a result names it: its id and what upstream does (``upstream: behaviour``)."""

    id: str
    summary: str


# -- the matrix ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ClientInfo:
    """A client target as the matrix reports it, with every pinned defect it inherits."""

    version: str
    title: str
    defects: tuple[PinnedDefect, ...] = ()
    #: What its user makes of an episode (its consumer profile, ``ClientTarget.consumer``), in words.
    consumer: str | None = None
    #: Since when each pinned defect fails, by defect id, as ``orsbench versions --record`` found it (none: not bisected).
    since: dict[str, Since] = field(default_factory=dict)

    def to_json(self) -> JSON:
        return {**asdict(self), "since": {d: s.to_json() for d, s in self.since.items()}}

    def since_words(self, defect: str) -> str:
        """The "since" column for ``defect``: ``since 0.1.2``, ``0.1.0–0.2.0``, ``not bisected``."""
        found = self.since.get(defect)
        return found.words if found is not None else NOT_BISECTED


@dataclass
class MatrixCell:
    """One cell: a client on a server, playing a scenario or a fault profile, and its verdict."""

    client: str
    server: str
    scenario: str
    profile: str | None
    #: The verdict (live or predicted), or :data:`NOT_RUN`.
    verdict: Verdict | str
    #: What a correct client gets here.
    expected: Verdict
    #: Pinned defects that make the cell differ from ``expected``, the deciding one first.
    defects: list[str] = field(default_factory=list)
    #: Client checks of rules the pinned defects break here, by check id.
    rule_defects: dict[str, str] = field(default_factory=dict)
    #: A live cell only: seconds it took.
    elapsed: float | None = None
    #: A live cell only: the one judgement of its run (the checks that decided the verdict, the rules broken).
    judgement: Judgement | None = None
    #: The client's error (a live cell), or why the cell was not run.
    error: str | None = None

    @property
    def played(self) -> bool:
        return self.elapsed is not None

    @property
    def right(self) -> bool:
        """Whether the client did here what a correct client does (works, or fails clearly where that is right)."""
        return self.verdict == self.expected

    @property
    def words(self) -> str:
        """The verdict as every view prints it (``fails clearly (right)``), or :data:`NOT_RUN`."""
        return describe(self.verdict, self.expected) if isinstance(self.verdict, Verdict) else str(self.verdict)

    @property
    def problems(self) -> list[str] | None:
        return [str(p) for p in self.judgement.problems] if self.judgement is not None else None

    @property
    def rules(self) -> list[str] | None:
        return list(self.judgement.rules) if self.judgement is not None else None

    @property
    def label(self) -> str:
        return self.profile or self.scenario

    def to_json(self) -> JSON:
        data: JSON = {
            "client": self.client,
            "server": self.server,
            "scenario": self.scenario,
            "profile": self.profile,
            "verdict": str(self.verdict),
            "expected": str(self.expected),
            "words": self.words,
            "defects": list(self.defects),
            "rule_defects": dict(self.rule_defects),
        }
        if self.played:
            data.update(elapsed=self.elapsed, problems=self.problems, rules=self.rules, error=self.error)
        elif self.error is not None:
            data["error"] = self.error
        return data


@dataclass
class MatrixResult:
    """A whole matrix: its clients and servers, every cell, and (live) how long it took."""

    clients: dict[str, ClientInfo]
    servers: list[str]
    server_defects: dict[str, list[PinnedDefect]]
    cells: list[MatrixCell] = field(default_factory=list)
    seconds: float | None = None
    #: Trainers whose ORS client is no client target, and why (``name``, ``why``).
    elsewhere: list[tuple[str, str]] = field(default_factory=list)

    def summary(self) -> dict[str, dict[str, int]]:
        """Verdict counts per client (every verdict and ``not run``, zeros included)."""
        out: dict[str, dict[str, int]] = {}
        for cell in self.cells:
            counts = out.setdefault(cell.client, {str(v): 0 for v in (*Verdict, NOT_RUN)})
            counts[str(cell.verdict)] += 1
        return out

    def to_json(self) -> JSON:
        data: JSON = {
            "clients": {name: info.to_json() for name, info in self.clients.items()},
            "servers": self.servers,
            "server_defects": {name: [asdict(d) for d in ds] for name, ds in self.server_defects.items()},
            "cells": [cell.to_json() for cell in self.cells],
        }
        if self.seconds is not None:
            data["seconds"] = self.seconds
        return data


# -- orsbench clients URL ----------------------------------------------------------------------------
@dataclass(frozen=True)
class PlayerEpisode:
    """The episode the checker's player played on the user's server: what every client replays."""

    calls: int
    finished: bool
    reward: float | None
    stopped: str | None = None


@dataclass
class LiveRow:
    """One client on the user's server: the one verdict, and why."""

    client: str
    version: str
    #: The verdict in the one vocabulary, or :data:`NOT_INSTALLED` / :data:`NOT_PLAYED`.
    verdict: Verdict | str
    #: Why, in one line: the client's error, the first failed check, or (working) the reward it reported.
    why: str
    #: For a client that trains (``ClientTarget.trains``): whether this episode gives it a reward to train on.
    trains: bool | None = None
    #: The user's adapter command, for a ``--client-cmd`` row.
    command: str | None = None
    #: What the binding rules predict from ``/tools`` for this client.
    predicted: list[str] = field(default_factory=list)
    #: Pinned upstream defects that explain a failing verdict (the first one decides it), each named only where the
    #: check it makes fail failed in this run.
    defects: list[PinnedDefect] = field(default_factory=list)
    #: Rules broken without changing the episode (check ids), each with the pinned defect that breaks it, if any.
    rules: dict[str, str | None] = field(default_factory=dict)
    seconds: float | None = None
    #: A ``--client-cmd`` the shell could not run (exit 126/127 before any request): a usage error, not a verdict.
    did_not_run: str | None = None
    #: What the client's consumer profile predicts of the player's episode (a built-in target: ``ClientTarget.consumer``).
    consumer: str | None = None
    #: Whether the live run confirmed that prediction (None: not judged, the client did not play it out).
    consumer_confirmed: bool | None = None
    #: What a correct client (of this consumer) gets on the player's episode: a clear error where its user refuses it.
    expected: Verdict = Verdict.WORKS
    #: The one judgement of its run (secrets taken out), where it played.
    judgement: Judgement | None = None

    @property
    def right(self) -> bool:
        """Whether the client did what a correct client of its kind does on this episode."""
        return self.verdict == self.expected

    @property
    def problems(self) -> list[str]:
        """Failed checks that decided the verdict, ``"<check id>: <message>"``."""
        return [str(p) for p in self.judgement.problems] if self.judgement is not None else []

    @property
    def words(self) -> str:
        """The verdict as printed: ``works — trains``, ``fails clearly``, ``fails clearly (right)``."""
        if not isinstance(self.verdict, Verdict):
            return str(self.verdict)
        if self.trains is None or self.verdict is not Verdict.WORKS:
            return describe(self.verdict, self.expected)
        return f"{self.verdict} — {'trains' if self.trains else 'would not train'}"

    def to_json(self) -> JSON:
        data = {k: v for k, v in asdict(self).items() if k != "judgement"}
        return {
            **data,
            "verdict": str(self.verdict),
            "expected": str(self.expected),
            "problems": self.problems,
            "words": self.words,
            "unseen": self.judgement.unseen if self.judgement is not None else None,
        }


@dataclass
class LiveResult:
    """Every row of one ``orsbench clients URL`` run, and the player's episode they replayed."""

    url: str
    env: str | None
    split: str | None
    index: int | None
    episode: PlayerEpisode
    rows: list[LiveRow] = field(default_factory=list)
    #: What every row shares, said once instead of blamed on each client: the player's episode had nothing to replay or
    #: stopped at its budget; every client failed on the same error of the environment.
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> JSON:
        return {
            "url": self.url,
            "env": self.env,
            "split": self.split,
            "index": self.index,
            "episode": asdict(self.episode),
            "rows": [row.to_json() for row in self.rows],
            "notes": list(self.notes),
        }
