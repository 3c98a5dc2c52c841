"""The result model shared by every check, the runner and the reports.

A check returns an :class:`CheckOutcome` — its own verdict on the evidence, with no
opinion on how much that verdict matters. The runner turns it into a
:class:`CheckResult` by adding what the check's registration says (title,
spec reference, remediation, severity) and what the
expected-failures baseline says. Reports only ever read ``CheckResult``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from orsbench.wire.evidence import Exchange

#: Evidence excerpts in reports are cut to this many characters per body.
EVIDENCE_CHARS = 600


class Status(str, Enum):
    """A check's verdict.

    ``SKIP`` and ``NOT_APPLICABLE`` both mean "not judged", for opposite reasons. A skip is
    coverage the run lacks: the check could have run against this environment and did not (a
    dependency failed, a probe was refused, ``--timeout`` was too short to wait out a TTL) —
    ``--strict`` fails on a required one. Not applicable means the environment offers nothing
    for the check to judge, and no request orsbench could send would change that (keep-alives
    when every tool answers within a second, input validation of tools that accept any input):
    no run of this environment can do better, so ``--strict`` passes it.
    """

    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"
    NOT_APPLICABLE = "n/a"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value


class Severity(str, Enum):
    """How much a failing check matters (each check's registration says: :mod:`orsbench.checks.registry`)."""

    REQUIRED = "required"  # a failure fails the run (exit 1)
    RECOMMENDED = "recommended"  # a failure is reported as a warning
    ADVISORY = "advisory"  # informational

    def __str__(self) -> str:
        return self.value


@dataclass
class CheckOutcome:
    """What a check function returns: its verdict, what it measured, and the exchanges that show it."""

    status: Status
    message: str
    measured: Any = None
    evidence: list[Exchange] = field(default_factory=list)
    #: For a skip caused by another check: that check's id.
    depends_on: str | None = None
    #: For a finding that involves several sessions: every request they sent, in the order sent (other
    #: sessions' deletes included) — what its reproducer replays instead of ``evidence`` alone.
    replay: list[Exchange] | None = None


def passed(message: str, measured: Any = None, *evidence: Exchange | None) -> CheckOutcome:
    return CheckOutcome(Status.PASS, message, measured, [e for e in evidence if e is not None])


def failed(message: str, measured: Any = None, *evidence: Exchange | None) -> CheckOutcome:
    return CheckOutcome(Status.FAIL, message, measured, [e for e in evidence if e is not None])


def warned(message: str, measured: Any = None, *evidence: Exchange | None) -> CheckOutcome:
    return CheckOutcome(Status.WARN, message, measured, [e for e in evidence if e is not None])


def skipped(message: str, depends_on: str | None = None) -> CheckOutcome:
    return CheckOutcome(Status.SKIP, message, depends_on=depends_on)


def not_applicable(message: str, measured: Any = None, depends_on: str | None = None) -> CheckOutcome:
    """The environment offers nothing this check judges (its message says what is missing): not a gap in coverage."""
    return CheckOutcome(Status.NOT_APPLICABLE, message, measured, depends_on=depends_on)


@dataclass
class CheckResult:
    """One check's entry in a report."""

    id: str
    title: str
    status: Status
    severity: Severity
    message: str
    measured: Any
    evidence: list[dict[str, Any]]
    remediation: str
    spec: str
    depends_on: str | None = None
    #: ``"expected"`` (a listed failure), ``"stale"`` (listed but passed) or ``None``.
    baseline: str | None = None
    duration_s: float = 0.0
    #: For a failure or warning: a shell script of ``curl`` calls that shows it again (secrets as variables).
    reproduce: str | None = None
    #: For a client check's failure or warning: what the client process itself said — ``exit_code``,
    #: ``stopped_for``, the ``errors`` it reported (its ``{"error": ...}`` lines) and its ``stderr_tail``
    #: (:meth:`orsbench.clientcheck.runner.CaseRun.client_evidence`). ``None`` for a server check.
    client: dict[str, Any] | None = None
    #: For a server check's failure or warning, when orsbench started the server (``--serve``, ``--app``,
    #: ``--cmd``): what the server itself wrote about it — ``tracebacks``, the Python tracebacks in its
    #: output that match the finding (``orsbench.api`` attaches them). ``None`` otherwise.
    server: dict[str, Any] | None = None

    @property
    def group(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def blocking(self) -> bool:
        """Whether this result alone makes the run fail (exit 1)."""
        if self.baseline == "stale":
            return True
        return self.status is Status.FAIL and self.severity is Severity.REQUIRED and self.baseline != "expected"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CheckResult:
        """The entry :meth:`to_json` wrote, read back (a report written by another process: ``--json``)."""
        fields = dict(data)
        fields["status"], fields["severity"] = Status(fields["status"]), Severity(fields["severity"])
        return cls(**fields)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status.value,
            "severity": self.severity.value,
            "message": self.message,
            "measured": self.measured,
            "evidence": self.evidence,
            "remediation": self.remediation,
            "spec": self.spec,
            "depends_on": self.depends_on,
            "baseline": self.baseline,
            "duration_s": round(self.duration_s, 4),
            "reproduce": self.reproduce,
            **({"client": self.client} if self.client is not None else {}),
            **({"server": self.server} if self.server is not None else {}),
        }


def evidence_summaries(exchanges: list[Exchange], limit: int = EVIDENCE_CHARS) -> list[dict[str, Any]]:
    """Truncated, JSON-ready accounts of ``exchanges`` (at most 6, in order)."""
    out = []
    for exchange in exchanges[:6]:
        summary = exchange.summary(limit)
        summary["elapsed_s"] = round(exchange.elapsed, 4)
        out.append(summary)
    return out
