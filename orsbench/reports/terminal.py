"""The terminal report: one line per check as its verdict is known, then a summary.

:class:`TerminalReporter` is the terminal's handler of a run's event stream
(:mod:`orsbench.reports.events`): it prints each event as it arrives — the run's
header, a probe's or a case's line, each check's line — and the summary at
:class:`~orsbench.reports.events.RunFinished`.

Plain text that reads the same in a CI log as in a terminal: fixed columns,
one line per item, no cursor movement. Colour is added only when the stream
is a TTY (and ``NO_COLOR`` is unset).
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import TYPE_CHECKING, Any, TextIO

from orsbench.checks.model import CheckResult, Severity, Status
from orsbench.reports.events import (
    CaseFinished,
    CheckFinished,
    Event,
    ProbeFinished,
    RunFinished,
    RunStarted,
    SessionGraded,
)
from orsbench.reports.verdict import verdict_line

if TYPE_CHECKING:
    from orsbench.checks.runner import Report

_COLOURS = {"pass": "32", "fail": "31", "warn": "33", "skip": "2", "error": "35", "bold": "1", "dim": "2"}
_ID_WIDTH = 38
#: What ``-q`` leaves out while a run goes: results that ask nothing of the reader.
_NOT_FINDINGS = frozenset({Status.PASS, Status.SKIP, Status.NOT_APPLICABLE})


def label_of(status: str, severity: str, baseline: str | None) -> tuple[str, str]:
    """How a result reads in a report, and its colour: ``("XFAIL", "warn")``, ``("FAIL", "fail")``, ...

    Shared with the HTML and Markdown reports, so every format names a finding alike.
    """
    if baseline == "stale":
        return "STALE", "fail"
    if baseline == "expected":
        return "XFAIL", "warn"
    if status == Status.FAIL.value and severity != Severity.REQUIRED.value:
        return "FAIL", "warn"
    if status == Status.NOT_APPLICABLE.value:
        return "N/A", "skip"
    return status.upper(), status


class TerminalReporter:
    """Prints progress while a run goes, and the summary after it: the terminal's :class:`~.events.Handler`."""

    def __init__(
        self, stream: TextIO | None = None, *, verbose: bool = False, quiet: bool = False, colour: bool | None = None
    ) -> None:
        self.out = stream or sys.stdout
        #: The command whose run this is (its RunStarted's): how a usage error is signed.
        self.command = "orsbench"
        self.verbose, self.quiet = verbose, quiet
        tty = hasattr(self.out, "isatty") and self.out.isatty()
        self.colour = (tty and "NO_COLOR" not in os.environ) if colour is None else colour
        self.width = shutil.get_terminal_size((120, 24)).columns if tty else 120

    # -- helpers ---------------------------------------------------------------
    def _c(self, text: str, style: str) -> str:
        return f"\033[{_COLOURS[style]}m{text}\033[0m" if self.colour else text

    def _line(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    @staticmethod
    def _label(result: CheckResult) -> tuple[str, str]:
        return label_of(result.status.value, result.severity.value, result.baseline)

    # -- the event stream ------------------------------------------------------------
    def handle(self, event: Event) -> None:
        """Render one event of the run as it arrives (:mod:`orsbench.reports.events`)."""
        if isinstance(event, RunStarted):
            self.command = event.command
            self.start(event.target, _detail(event), command=event.command)
        elif isinstance(event, ProbeFinished):
            self.on_probe(event.probe, event.seconds, event.requests)
        elif isinstance(event, CaseFinished):
            self.on_case(event)
        elif isinstance(event, SessionGraded):
            self.on_session(event)
        elif isinstance(event, CheckFinished):
            self.on_result(event.result)
        elif isinstance(event, RunFinished):
            if event.report.usage_error:
                # The user's options name what the server lacks: a usage error, said once on stderr, as argparse would.
                print(f"{self.command}: error: {event.report.usage_error}", file=sys.stderr, flush=True)
            else:
                self.finish(event.report)

    def shutdown(self) -> None:
        self.out.flush()

    # -- progress ------------------------------------------------------------------
    def start(self, target: str, detail: str = "", *, command: str = "orsbench check") -> None:
        self._line(self._c(f"{command} {target}", "bold") + (f"  {detail}" if detail else ""))

    def on_probe(self, probe: str, seconds: float, requests: int) -> None:
        if not self.quiet:
            self._line(self._c(f"── {probe:<10} {requests:>3} request(s) in {seconds:5.2f} s", "dim"))

    def on_case(self, event: CaseFinished) -> None:
        """A client's case ended: its verdict in the words of the matrix and ``orsbench clients`` (its Judgement)."""
        stopped = f", stopped for {event.stopped_for}" if event.stopped_for else ""
        verdict = f": {event.judgement.words}" if event.judgement is not None else ""
        self.on_probe(f"{event.case}{verdict} (exit {event.exit_code}{stopped})", event.duration_s, event.requests)
        if event.server_error:
            self._line(f"      case server failed: {event.server_error[:300]}")

    def on_session(self, event: SessionGraded) -> None:
        """A hosted case's client session was graded: its verdict, then the checks it failed."""
        failing = [r.id for r in event.results if r.status in (Status.FAIL, Status.ERROR)]
        verdict = f"FAIL {', '.join(failing)}" if failing else f"{len(event.results)} judged, none failed"
        if event.judgement is not None:  # the session's verdict in the words of check-client and the matrix
            unseen = f" ({event.judgement.unseen})" if event.judgement.unseen else ""
            verdict = f"{event.judgement.words}{unseen}; {verdict}"
        self.on_probe(f"{event.case}: {event.label} ({event.ended}) — {verdict}", event.duration_s, event.requests)

    def on_result(self, result: CheckResult) -> None:
        if self.quiet and result.baseline is None and result.status in _NOT_FINDINGS:
            return  # -q: only findings (fail, warn, error, a baseline's XFAIL/STALE) and the summary
        label, style = self._label(result)
        room = max(30, self.width - 5 - 1 - 11 - 1 - _ID_WIDTH - 2)
        message = result.message if len(result.message) <= room else result.message[: room - 1] + "…"
        self._line(f"{self._c(f'{label:<5}', style)} {result.severity.value:<11} {result.id:<{_ID_WIDTH}} {message}")
        if self.verbose and result.status is not Status.PASS:
            self._details(result, indent="      ", reproduce=False)

    def _details(self, result: CheckResult, indent: str, *, reproduce: bool = True) -> None:
        if result.remediation:
            self._line(f"{indent}fix:  {result.remediation}")
        self._line(f"{indent}spec: {result.spec}  (orsbench explain {result.id})")
        for item in result.evidence[:3]:
            body = " ".join(str(item.get("body", "")).split())[:160]
            shown = f"{item['status']} {body}" if item.get("status") is not None else item.get("error", "no answer")
            self._line(f"{indent}seen: {item['request']} → {shown}")
        if result.client:
            self._line(f"{indent}client: {client_summary(result.client)}")
            for line in str(result.client.get("stderr_tail") or "").splitlines()[-STDERR_SHOWN:]:
                self._line(f"{indent}  stderr| {line[:200]}")
        for traceback in (result.server or {}).get("tracebacks", [])[:1]:
            # The server's own account of the failure (orsbench started it): the raise, and the frames above it.
            lines = traceback.splitlines()
            self._line(f"{indent}server: {lines[-1].strip()[:200]}")
            for line in lines[-1 - 2 * STDERR_SHOWN : -1]:
                self._line(f"{indent}  server| {line[:200]}")
        if reproduce and self.verbose and result.reproduce:
            self._line(f"{indent}reproduce:")
            for line in result.reproduce.splitlines():
                self._line(f"{indent}  {line}")

    # -- summary --------------------------------------------------------------------
    def finish(self, report: Report) -> None:
        if report.reason:
            self._line(self._c(f"cannot check: {report.reason}", "fail"))
            self._line(f"verdict: {report.verdict.upper()} (exit {report.exit_code})")
            return
        s = report.summary()
        self._line()
        self._line(
            f"{s['pass']} passed, {s['fail']} failed, {s['warn']} warned, {s['skip']} skipped, "
            + (f"{s[Status.NOT_APPLICABLE.value]} not applicable, " if s.get(Status.NOT_APPLICABLE.value) else "")
            + f"{s['error']} errors"
            f" — {len(report.results)} checks, {report.exchanges} requests{_folded(report.folded)}, {report.duration_s:.2f} s"
        )
        sections: list[tuple[str, list[CheckResult], str]] = [
            ("failed (required)", [r for r in report.results if r.blocking and r.baseline != "stale"], "fail"),
            ("stale baseline entries (they pass now)", [r for r in report.results if r.baseline == "stale"], "fail"),
            ("errors (orsbench itself)", [r for r in report.results if r.status is Status.ERROR], "error"),
            (
                "failed (recommended)",
                [
                    r
                    for r in report.results
                    if r.status is Status.FAIL and r.severity is Severity.RECOMMENDED and r.baseline is None
                ],
                "warn",
            ),
            ("expected failures (baseline)", [r for r in report.results if r.baseline == "expected"], "warn"),
        ]
        for title, results, style in sections:
            if not results:
                continue
            self._line(self._c(f"{title}:", style))
            for result in results:
                self._line(f"  {self._c('✗', style)} {result.id} — {result.message}")
                self._details(result, indent="      ")
        for error in report.internal_errors:
            self._line(self._c(f"internal error: {error}", "error"))
        not_run = report.required_not_run()
        if not_run:
            self._line(self._c(f"required checks that did not run ({len(not_run)}):", "warn"))
            for item in not_run:
                self._line(f"  - {item['id']} — {item['why']}")
        style = "pass" if report.passed else "fail"
        self._line(self._c(verdict_line(report.to_json()), style))


#: Lines of a client's stderr tail the terminal shows under a finding (the reports keep more).
STDERR_SHOWN = 5


def client_summary(client: dict[str, Any]) -> str:
    """``exited 1; reported: RuntimeError: …`` — a client finding's process in one line (terminal, JUnit)."""
    stopped = client.get("stopped_for")
    parts = [f"stopped by orsbench ({stopped})" if stopped else f"exited {client.get('exit_code')}"]
    errors = client.get("errors") or []
    parts.append(f"reported: {errors[0]}" if errors else "reported no error")
    if len(errors) > 1:
        parts.append(f"and {len(errors) - 1} more error(s)")
    if not client.get("stderr_tail"):
        parts.append("stderr empty")
    return "; ".join(parts)


def _detail(event: RunStarted) -> str:
    """What the header says after the target: the env and split checked, or a client run's cases."""
    if event.cases is not None:
        return f"({event.cases} case(s), {event.jobs} at a time)"
    options = event.options
    return ", ".join(f"{k} {v}" for k, v in (("env", getattr(options, "env", None)), ("split", getattr(options, "split", None))) if v)


def describe(check: Any, severity: Severity) -> str:
    """One line of ``orsbench check --list``."""
    return f"{severity.value:<11} {check.id:<{_ID_WIDTH}} {check.title}"


def _folded(folded: int) -> str:
    """How many of the requests a bounded proxy grader folded into counts (nothing when none were)."""
    return f" ({folded:,} folded into counts)" if folded else ""
