"""Run checks against a target: collect evidence probe by probe, grade it, apply policy and baseline.

The run is one pass: after each probe the runner grades every check whose
evidence is now complete and reports it through ``on_result`` (that is the
progress a terminal shows), so a slow probe never hides the verdicts already
known. A check whose ``requires`` did not all pass is skipped, naming the
first one that did not.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from orsbench.checks.baseline import Baseline
from orsbench.verdict import Judgement
from orsbench.checks.evidence import Evidence, Options
from orsbench.checks.model import CheckResult, CheckOutcome, Severity, Status, evidence_summaries
from orsbench.checks.collector import Collector, probe_names, probes_for
from orsbench import protocol
from orsbench.checks.registry import CHECKS, SPEC_DOCUMENT, Check, closure, load_checks, select
from orsbench.wire.cassette import miss_of
from orsbench.wire.client import WireClient
from orsbench.wire.redact import scrub
from orsbench.wire.reproduce import reproducer

#: The exit codes of ``orsbench check`` (documented in docs/checks.md).
EXIT_PASS, EXIT_FAIL, EXIT_UNREACHABLE, EXIT_INTERNAL = 0, 1, 2, 3

ProbeCallback = Callable[[str, float, int], None]
ResultCallback = Callable[[CheckResult], None]


@dataclass
class Report:
    target: str
    options: Options
    results: list[CheckResult] = field(default_factory=list)
    env: str | None = None
    split: str | None = None
    started_at: str = ""
    duration_s: float = 0.0
    exchanges: int = 0
    #: Of ``exchanges``, how many a bounded passive grader folded into counts instead of keeping
    #: (:class:`~orsbench.checks.evidence.Folded`); 0 for ``orsbench check``.
    folded: int = 0
    #: ``orsbench proxy --grade-sample F``: ``{"fraction", "sessions_seen", "sessions_graded"}``; None when every session is graded.
    sampled: dict[str, Any] | None = None
    unreachable: str | None = None
    not_ors: str | None = None
    usage_error: str | None = None
    internal_errors: list[str] = field(default_factory=list)
    baseline: str | None = None
    #: A client's verdict on each case (``check-client``), in the one vocabulary (:mod:`orsbench.verdict`).
    cases: list[Judgement] = field(default_factory=list)
    #: The raw evidence of the run (not part of the JSON report; for debugging and tests).
    evidence: Evidence | None = None

    def result(self, check_id: str) -> CheckResult:
        return next(r for r in self.results if r.id == check_id)

    def ids(self, status: Status, severity: Severity | None = None) -> list[str]:
        return [r.id for r in self.results if r.status is status and (severity is None or r.severity is severity)]

    @property
    def exit_code(self) -> int:
        if self.unreachable or self.not_ors or self.usage_error:
            return EXIT_UNREACHABLE
        if self.internal_errors or any(r.status is Status.ERROR for r in self.results):
            return EXIT_INTERNAL
        if any(r.blocking for r in self.results):
            return EXIT_FAIL
        if self.options.strict and self.required_not_run():
            return EXIT_FAIL
        return EXIT_PASS

    @property
    def passed(self) -> bool:
        return self.exit_code == EXIT_PASS

    @property
    def verdict(self) -> str:
        """``pass``, ``fail``, ``error``; or, when nothing could be checked (exit 2): ``unreachable`` (no HTTP
        answer), ``not-ors`` (an HTTP server answered, but not as ORS does) or ``usage``."""
        if self.usage_error:
            return "usage"
        if self.not_ors and not self.unreachable:
            return "not-ors"
        return {EXIT_PASS: "pass", EXIT_FAIL: "fail", EXIT_UNREACHABLE: "unreachable", EXIT_INTERNAL: "error"}[self.exit_code]

    @property
    def reason(self) -> str | None:
        """Why the run could not check anything (exit 2), if so."""
        if self.unreachable:
            return f"cannot reach {self.target}: {self.unreachable}"
        if self.not_ors:
            return f"{self.target} answers HTTP but is not an ORS server: {self.not_ors}"
        if self.usage_error:
            return self.usage_error
        return None

    def required_not_run(self) -> list[dict[str, str]]:
        """Required checks that did not run (skipped), each with why: the coverage a PASS does not have.

        A check that is not applicable is no gap: the environment offers nothing for it to judge.
        """
        return [
            {"id": r.id, "why": r.message}
            for r in self.results
            if r.status is Status.SKIP and r.severity is Severity.REQUIRED and r.baseline is None
        ]

    def summary(self) -> dict[str, Any]:
        counts = {s.value: sum(1 for r in self.results if r.status is s) for s in Status}
        failing = {
            f"failed_{sev.value}": [
                r.id for r in self.results if r.status is Status.FAIL and r.severity is sev and r.baseline != "expected"
            ]
            for sev in Severity
        }
        return {
            "total": len(self.results),
            **counts,
            **failing,
            "expected_failures": [r.id for r in self.results if r.baseline == "expected"],
            "stale": [r.id for r in self.results if r.baseline == "stale"],
            "errors": [r.id for r in self.results if r.status is Status.ERROR] + self.internal_errors,
            "required_not_run": self.required_not_run(),
            "exchanges": self.exchanges,
            **({"evidence": {"kept": self.exchanges - self.folded, "folded": self.folded}} if self.folded else {}),
            **({"sampled": dict(self.sampled)} if self.sampled is not None else {}),
        }

    def to_json(self) -> dict[str, Any]:
        from orsbench.version import __version__

        return {
            "target": self.target,
            "env": self.env,
            "split": self.split,
            "passed": self.passed,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "reason": self.reason,
            "orsbench_version": __version__,
            "spec": SPEC_DOCUMENT,
            "baseline": self.baseline,
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 3),
            "options": _shown_options(self.options),
            "summary": self.summary(),
            "checks": [r.to_json() for r in self.results],
            **({"cases": [c.to_json() for c in self.cases]} if self.cases else {}),
        }


def _unrecorded(outcome: CheckOutcome) -> CheckOutcome:
    """A failure shown by a cassette replay's miss is no verdict on the environment: a skip naming the miss.

    A replay answers what was recorded; a check that needs a request the recording lacks
    (docs/cassettes.md) cannot judge the live environment from it.
    """
    if outcome.status not in (Status.FAIL, Status.WARN):
        return outcome
    miss = next((m for m in map(miss_of, outcome.evidence) if m), None)
    if miss is None:
        return outcome
    return CheckOutcome(Status.SKIP, f"needs live behaviour the cassette did not record — {miss}", evidence=outcome.evidence)


def _shown_options(options: Options) -> dict[str, Any]:
    """The options as a report shows them: no API key, and secrets by name only (docs/protocol.md §14)."""
    shown = {k: v for k, v in vars(options).items() if k not in ("api_key", "secrets")}
    shown["secrets"] = sorted(options.secrets)
    return shown


def dependency_order(checks: Iterable[Check]) -> list[Check]:
    """Dependencies first (stable: registration order otherwise): the order checks are graded in."""
    by_id = {c.id: c for c in checks}
    done: set[str] = set()
    out: list[Check] = []

    def visit(check: Check) -> None:
        if check.id in done:
            return
        done.add(check.id)
        for dep in check.requires:
            if dep in by_id:
                visit(by_id[dep])
        out.append(check)

    for check in checks:
        visit(check)
    return out


def report_order(checks: Iterable[Check]) -> list[Check]:
    """The order ``orsbench check`` lists results in: probe by probe, dependencies first within a probe.

    The passive grader (``orsbench proxy``) lists its results the same way, so both reports line up.
    """
    graded = dependency_order(checks)
    return [c for probe in probe_names() for c in graded if c.probe == probe]


def grade(check: Check, ev: Evidence, earlier: dict[str, CheckResult]) -> CheckResult:
    """Run one check over the evidence (or skip it for an unmet dependency)."""
    start = time.monotonic()
    outcome: CheckOutcome
    unmet = next((dep for dep in check.requires if dep in earlier and earlier[dep].status is not Status.PASS), None)
    if unmet is not None and earlier[unmet].status is Status.NOT_APPLICABLE:
        # What this check builds on does not exist in this environment, so neither does what it judges.
        outcome = CheckOutcome(Status.NOT_APPLICABLE, f"{unmet} is not applicable: {earlier[unmet].message}", depends_on=unmet)
    elif unmet is not None:
        outcome = CheckOutcome(Status.SKIP, f"unmet dependency: {unmet} ({earlier[unmet].status.value})", depends_on=unmet)
    elif check.probe in ev.probe_errors:
        outcome = CheckOutcome(Status.ERROR, f"the {check.probe} probe crashed: {ev.probe_errors[check.probe]}")
    else:
        outcome = _voided(check, _unrecorded(call_check(check.fn, ev)), earlier)
    reproduce = None
    if outcome.status in (Status.FAIL, Status.WARN) and outcome.evidence:
        try:
            reproduce = reproducer(
                outcome.evidence,
                ev.history or list(ev.exchanges.values()),
                sequence=outcome.replay,
                api_key=bool(ev.options.api_key),
                note=f"{check.id} ({SPEC_DOCUMENT} {check.spec}): {outcome.message}",
            )
            if reproduce is not None:  # a value the server echoed into a body or the message stays out
                reproduce = scrub(reproduce, [ev.options.api_key, *ev.options.secrets.values()])
        except Exception as exc:  # noqa: BLE001 - a reproducer bug must not cost the run its verdict
            reproduce = f"# no reproducer: orsbench could not build one ({type(exc).__name__}: {exc})"
    return result_of(check, outcome, time.monotonic() - start, reproduce)


def _on_sessions(outcome: CheckOutcome) -> bool:
    """Whether a finding rests on sessions' requests: one of its exchanges names a session, or it shows none."""
    shown = [*outcome.evidence, *(outcome.replay or ())]
    return not shown or any(protocol.session_in(ex.request_headers) for ex in shown)


def _voided(check: Check, outcome: CheckOutcome, earlier: dict[str, CheckResult]) -> CheckOutcome:
    """A finding on sessions' requests after a check that voids them failed (``Check.voids_sessions``:
    ``deployment.affinity`` — a session's requests reach different replicas) is a consequence of the front, not the
    environment's code: "not judged", a skip naming that check (``--strict`` fails it), with what it saw kept."""
    if outcome.status not in (Status.FAIL, Status.WARN):
        return outcome
    gate = next(
        (g for r in earlier.values() if r.status is Status.FAIL and (g := CHECKS.get(r.id)).voids_sessions and g.group != check.group),
        None,
    )
    if gate is None or not _on_sessions(outcome):
        return outcome
    return CheckOutcome(
        Status.SKIP,
        f"not judged: {gate.voids_sessions} ({gate.id}); what it saw: {outcome.message}",
        outcome.measured,
        outcome.evidence,
        depends_on=gate.id,
    )


def call_check(fn: Callable[[Any], CheckOutcome | None], evidence: Any) -> CheckOutcome | None:
    """``fn(evidence)``; an exception in the check is an ERROR outcome naming where, never fatal to the run."""
    try:
        return fn(evidence)
    except Exception as exc:  # noqa: BLE001 - a check bug is reported, never fatal to the run
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return CheckOutcome(
            Status.ERROR,
            f"internal error in the check: {type(exc).__name__}: {exc} ({where.filename.rsplit('/', 1)[-1]}:{where.lineno})",
        )


class _Graded(Protocol):
    """What :func:`result_of` reads of a check: a server check or a client check."""

    id: str
    title: str
    severity: Severity
    remediation: str
    spec: str


def result_of(check: _Graded, outcome: CheckOutcome, duration_s: float, reproduce: str | None = None) -> CheckResult:
    """One check's outcome as a result in the report model every front end renders (check and check-client)."""
    return CheckResult(
        id=check.id,
        title=check.title,
        status=outcome.status,
        severity=check.severity,
        message=outcome.message,
        measured=outcome.measured,
        evidence=evidence_summaries(outcome.evidence),
        remediation=check.remediation,
        spec=f"{SPEC_DOCUMENT} {check.spec}",
        depends_on=outcome.depends_on,
        duration_s=duration_s,
        reproduce=reproduce,
    )


def run_checks(
    target: str,
    options: Options | None = None,
    *,
    only: Iterable[str] | None = None,
    baseline: Baseline | None = None,
    on_probe: ProbeCallback | None = None,
    on_result: ResultCallback | None = None,
) -> Report:
    """Check the ORS server at ``target``; returns the report (its ``exit_code`` is the CLI's)."""
    options = options or Options()
    load_checks()
    selected = select(only)
    wanted = {c.id for c in selected}
    to_run = dependency_order(closure(selected))
    probes = probes_for({c.probe for c in to_run})
    report = Report(
        target,
        options,
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        baseline=baseline.source if baseline else None,
    )
    evidence = Evidence(target, options)
    started = time.monotonic()
    graded: dict[str, CheckResult] = {}
    client = WireClient(target, timeout=options.timeout, api_key=options.api_key, secrets=options.secrets)
    evidence.history = client.log
    collector = Collector(client, evidence)
    try:
        for probe in probes:
            probe_start = time.monotonic()
            before = len(evidence.exchanges)
            try:
                collector.run(probe)
            except Exception as exc:  # noqa: BLE001 - an orsbench bug: its checks report ERROR
                where = traceback.extract_tb(exc.__traceback__)[-1]
                evidence.probe_errors[probe] = f"{type(exc).__name__}: {exc} ({where.filename.rsplit('/', 1)[-1]}:{where.lineno})"
                report.internal_errors.append(f"probe {probe}: {evidence.probe_errors[probe]}")
            if on_probe is not None:
                on_probe(probe, time.monotonic() - probe_start, len(evidence.exchanges) - before)
            if evidence.unreachable or evidence.not_ors or evidence.usage_error:
                break
            for check in to_run:
                if check.probe == probe:
                    result = graded[check.id] = grade(check, evidence, graded)
                    if check.id in wanted:
                        if baseline is not None:
                            baseline.mark(result)
                        report.results.append(result)
                        if on_result is not None:
                            on_result(result)
    finally:
        try:
            collector.close()
        finally:
            client.close()
    report.env, report.split = evidence.env, evidence.split
    report.unreachable, report.not_ors = evidence.unreachable, evidence.not_ors
    report.usage_error = evidence.usage_error
    report.exchanges = len(evidence.exchanges)
    report.duration_s = time.monotonic() - started
    report.evidence = evidence
    return report
