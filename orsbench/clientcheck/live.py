"""Grade client sessions seen live — hosted cases, a proxy's traffic — one verdict per check over many.

``check-client --cmd`` grades one client per case. A live grader sees many: every episode a
trainer plays through ``orsbench proxy``, every session several clients open on a hosted case.
Each ended :class:`~orsbench.clientcheck.attribution.Episode` is graded on its own by the same
check functions (:func:`orsbench.clientcheck.suite.grade_context`), and the verdicts are gathered into a
:class:`Tally` per check (and per case on a hosted server), which reports one
:class:`~orsbench.checks.model.CheckResult` in the same report model every front end renders:
"2 of 64 sessions fail: session 5e1f… from 10.0.0.7:41822: …". A tally keeps counts and the
first few failures, never every session's verdicts, so a proxy in front of a long training run
stays bounded.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable

from orsbench.checks.model import CheckOutcome, CheckResult, Status, skipped
from orsbench.checks.runner import result_of
from orsbench.clientcheck.attribution import Episode
from orsbench.clientcheck.checks import ClientCheck, Context, Role, checks
from orsbench.clientcheck.judgement import judge_traffic
from orsbench.clientcheck.runner import CaseRun
from orsbench.clientcheck.suite import grade_context, judge_context
from orsbench.verdict import Judgement, Verdict

#: Failing (and warning) sessions kept per check as examples; the rest are counted.
EXAMPLES = 3
#: The order verdicts take over many sessions: the worst one seen is the check's status.
_WORST = (Status.ERROR, Status.FAIL, Status.WARN, Status.PASS, Status.SKIP, Status.NOT_APPLICABLE)


def traffic_checks() -> list[ClientCheck]:
    """The client checks that need nothing from the client but its traffic (what a live grader runs)."""
    return [c for c in checks() if c.role is Role.TRAFFIC]


def report_checks() -> list[ClientCheck]:
    """The client checks that read what the client reported (its contract lines), when it sent them."""
    return [c for c in checks() if c.role is Role.REPORT]


def label(episode: Episode) -> str:
    """How a report names a session: its id and the connection it came from (a worker's address)."""
    what = f"session {episode.sid}" if episode.sid else f"requests without a session on {episode.peer}"
    where = f" from {episode.peer}" if episode.sid and episode.peer else ""
    return f"{what}{where}"


def grade_episode(episode: Episode, checks: Iterable[ClientCheck], run: CaseRun | None = None) -> list[CheckResult]:
    """The verdicts of ``checks`` on one episode's traffic (``run``: its case, when one is known)."""
    return grade_context(Context(run, episode.traffic()), checks)


class Pending:
    """One check's outcome on one session, made a report entry only if a tally keeps it as an example (not a verdict:
    a session's verdict is its :class:`~orsbench.verdict.Judgement`).

    A proxy grades every session of a training run, and a tally shows at most a few of them: building
    each verdict's :class:`CheckResult` (its evidence summarised, its texts copied) for every session was
    most of what grading a session cost.
    """

    __slots__ = ("check", "outcome", "duration_s")

    def __init__(self, check: ClientCheck, outcome: CheckOutcome, duration_s: float) -> None:
        self.check, self.outcome, self.duration_s = check, outcome, duration_s

    @property
    def id(self) -> str:
        return self.check.id

    @property
    def status(self) -> Status:
        return self.outcome.status

    def result(self) -> CheckResult:
        return result_of(self.check, self.outcome, self.duration_s)


def judge_episode(episode: Episode, checks: Iterable[ClientCheck], run: CaseRun | None = None) -> list[Pending]:
    """:func:`grade_episode`'s verdicts, left unbuilt until a tally keeps one (no client evidence: ``run`` has no report)."""
    return [Pending(c, o, d) for c, o, d in judge_context(Context(run, episode.traffic()), checks)]


def not_reported(checks: Iterable[ClientCheck], where: str) -> list[CheckResult]:
    """A skip for each check of what the client reported, for a session whose client posted no report: never a pass
    (``--strict`` fails on it). ``where``: the URL its contract lines would have been posted to."""
    outcome = skipped(f"not judged: the client posted no report (its contract lines, POSTed to {where})")
    return [result_of(check, outcome, 0.0) for check in checks]


def traffic_judgement(results: Iterable[CheckResult | Pending], subject: str) -> Judgement:
    """The one judgement of a session seen as traffic only (the proxy): only its findings are made report entries."""
    shown = [_entry(r) for r in results if r.status in (Status.FAIL, Status.ERROR, Status.WARN)]
    return judge_traffic(shown, subject)


#: The order verdicts take when many sessions are summed up: the one a reader must see first.
_WORST_VERDICT = (Verdict.HANGS, Verdict.FAILS_SILENTLY, Verdict.FAILS_CLEARLY, Verdict.WORKS)


class Judgements:
    """Many sessions' judgements, bounded: per group (a hosted case; ``""`` behind the proxy) how many got each
    verdict, and the first session that got it — the one :class:`~orsbench.verdict.Judgement` a report shows for it."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()
        self.first: dict[tuple[str, str], Judgement] = {}

    def add(self, group: str, judgement: Judgement) -> None:
        key = (group, judgement.words)
        self.counts[key] += 1
        self.first.setdefault(key, judgement)

    def cases(self) -> list[Judgement]:
        """One judgement per group and verdict, those that are not what a correct client gets first, then the worst."""
        out = []
        groups = list(dict.fromkeys(g for g, _ in self.first))
        for group in groups:
            keys = [k for k in self.first if k[0] == group]
            total = sum(self.counts[k] for k in keys)
            keys.sort(key=lambda k: (self.first[k].right, _WORST_VERDICT.index(self.first[k].verdict)))
            for key in keys:
                first, n = self.first[key], self.counts[key]
                name = group or first.subject
                subject = name if total == 1 else f"{name} ({n} of {total} sessions{'; first: ' + first.subject if group else ''})"
                out.append(dataclasses.replace(first, subject=subject))
        return out


def _entry(result: CheckResult | Pending) -> CheckResult:
    return result.result() if isinstance(result, Pending) else result


@dataclasses.dataclass
class Tally:
    """One check's verdicts over many sessions: counts by status and the first few failing ones."""

    counts: Counter[Status] = dataclasses.field(default_factory=Counter)
    #: ``(session label, result)`` of the first sessions that failed or warned (at most :data:`EXAMPLES`).
    examples: list[tuple[str, CheckResult]] = dataclasses.field(default_factory=list)
    #: The first session's ``(label, result)``: the example a passing verdict shows.
    first: tuple[str, CheckResult] | None = None
    duration_s: float = 0.0
    #: Labels of failing sessions past the examples (counted only).
    more_failing: int = 0

    def add(self, name: str, result: CheckResult | Pending) -> None:
        status = result.status
        self.counts[status] += 1
        self.duration_s += result.duration_s
        entry = None
        if self.first is None:
            entry = _entry(result)
            self.first = (name, entry)
        if status is Status.FAIL or status is Status.ERROR or status is Status.WARN:
            if len(self.examples) < EXAMPLES:
                self.examples.append((name, entry if entry is not None else _entry(result)))
            else:
                self.more_failing += 1

    @property
    def status(self) -> Status:
        return next(s for s in _WORST if self.counts[s]) if self.counts else Status.SKIP

    def result(self, check_id: str) -> CheckResult:
        """The one report entry for this check: the worst status seen, its first example, the counts."""
        status = self.status
        sessions = sum(self.counts.values())
        shown = next(((n, r) for n, r in self.examples if r.status is status), None) or self.first
        assert shown is not None, "a tally with no verdict"
        name, example = shown
        counts = ", ".join(f"{self.counts[s]} {s.value}" for s in _WORST if self.counts[s])
        if sessions == 1:
            message = f"{name}: {example.message}"
        elif status in (Status.FAIL, Status.ERROR, Status.WARN):
            message = f"{self.counts[status]} of {sessions} sessions {status.value} ({counts}); first, {name}: {example.message}"
        else:
            message = f"{sessions} sessions ({counts}); first, {name}: {example.message}"
        measured = {
            "sessions": sessions,
            **{s.value: self.counts[s] for s in _WORST if self.counts[s]},
            "example": example.measured,
            "examples": [n for n, r in self.examples],
        }
        return dataclasses.replace(
            example,
            id=check_id,
            status=status,
            message=message,
            measured=measured,
            depends_on=example.depends_on if status is Status.SKIP else None,
            duration_s=self.duration_s,
        )


class Tallies:
    """A :class:`Tally` per check and group (a hosted case; ``""`` behind the proxy), in the order first seen."""

    def __init__(self) -> None:
        self._tallies: dict[tuple[str, str], Tally] = {}
        #: Sessions graded per group.
        self.sessions: Counter[str] = Counter()

    def add(self, group: str, name: str, results: Iterable[CheckResult | Pending]) -> None:
        self.sessions[group] += 1
        for result in results:
            self._tallies.setdefault((group, result.id), Tally()).add(name, result)

    def results(self, groups: Iterable[str] | None = None) -> list[CheckResult]:
        """One result per check and group; ids name the group as ``check-client`` names a case (``client.x[echo]``)."""
        order = list(groups) if groups is not None else list(dict.fromkeys(g for g, _ in self._tallies))
        out = []
        for wanted in order:
            for (group, check_id), tally in self._tallies.items():
                if group != wanted:
                    continue
                result = tally.result(f"{check_id}[{group}]" if group else check_id)
                if group and result.depends_on:
                    result.depends_on = f"{result.depends_on}[{group}]"
                out.append(result)
        return out

    def copy(self) -> Tallies:
        """A copy later :meth:`add` calls leave unchanged (a live report grades open sessions on top of it)."""
        twin = Tallies()
        twin.sessions = self.sessions.copy()
        twin._tallies = {
            key: dataclasses.replace(t, counts=t.counts.copy(), examples=list(t.examples)) for key, t in self._tallies.items()
        }
        return twin
