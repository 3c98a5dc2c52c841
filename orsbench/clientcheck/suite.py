"""Grade case runs with the client checks, and run a command over many cases into one report.

The results are :class:`~orsbench.checks.model.CheckResult` objects in a
:class:`~orsbench.checks.runner.Report`, so the terminal table, the JSON
document and the JUnit XML of ``orsbench check`` serve ``check-client``
unchanged, with the same exit codes. In the combined report each result's id
names its case: ``client.tool_runs[sparse-reward+stream-drop]``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime

from orsbench.checks.evidence import Options
from orsbench.checks.model import CheckResult, CheckOutcome, Status
from orsbench.checks.runner import Report, call_check, result_of
from orsbench.clientcheck.cases import Case
from orsbench.clientcheck.checks import ClientCheck, Context, Role, checks, context
from orsbench.clientcheck.judgement import judge
from orsbench.clientcheck.runner import CaseRun, run_case

CaseCallback = Callable[[CaseRun, list[CheckResult]], None]


def grade(run: CaseRun, roles: Collection[Role] | None = None) -> list[CheckResult]:
    """Every client check's verdict on one case run, in catalogue order (ids without the case).

    A check the case does not provoke (no ``Retry-After`` was sent, no stream was cut) has no entry.
    ``roles``: only the checks that need no more than these (:class:`~orsbench.clientcheck.checks.Role`);
    ``{Role.TRAFFIC}`` grades a client orsbench saw only on the wire (no report, no process of its own).

    A check whose ``requires`` include one that *failed* is skipped, naming it.
    A case whose server did not start or could not be read has no verdicts:
    :attr:`CaseRun.server_error` says why (orsbench's problem, not the client's).
    """
    if run.server_error:
        return []
    return grade_context(context(run), [check for check in checks() if roles is None or check.role in roles])


def grade_context(ctx: Context, selected: Iterable[ClientCheck]) -> list[CheckResult]:
    """The verdicts of the ``selected`` checks on one context (a case run, or one live session's traffic).

    One grading path for ``check-client``, the matrix, hosted cases and the proxy: only which checks
    run differs (a live session has no process to judge, and a report only if the client sent one).
    """
    done = [result_of(check, outcome, duration) for check, outcome, duration in judge_context(ctx, selected)]
    said = ctx.run.client_evidence() if ctx.run is not None else None
    if said is None:
        return done
    # A finding carries the client's own words (its reported error, its stderr): the evidence a reader acts on.
    return [replace(r, client=said) if r.status in (Status.FAIL, Status.WARN) else r for r in done]


def judge_context(ctx: Context, selected: Iterable[ClientCheck]) -> list[tuple[ClientCheck, CheckOutcome, float]]:
    """``(check, outcome, seconds)`` of each ``selected`` check that judged ``ctx``: :func:`grade_context`
    before the outcomes become report entries (a live grader makes entries only of the sessions it shows)."""
    done: dict[str, tuple[ClientCheck, CheckOutcome, float]] = {}
    for check in selected:
        start = time.monotonic()
        outcome: CheckOutcome | None
        unmet = next((dep for dep in check.requires if dep in done and done[dep][1].status in (Status.FAIL, Status.ERROR)), None)
        if unmet is not None:
            outcome = CheckOutcome(Status.SKIP, f"not judged: {unmet} failed", depends_on=unmet)
        else:
            outcome = call_check(check.fn, ctx)
        if outcome is not None:  # None: the case does not provoke what the check judges
            done[check.id] = (check, outcome, time.monotonic() - start)
    return list(done.values())


def scoped(results: Iterable[CheckResult], case: str) -> list[CheckResult]:
    """``results`` with each id naming its case (``client.tool_runs[echo]``) for a report over many cases."""
    return [
        replace(r, id=f"{r.id}[{case}]", depends_on=f"{r.depends_on}[{case}]" if r.depends_on else None) for r in results
    ]


def check_client(
    command: str,
    cases: list[Case],
    *,
    timeout: float | None = None,
    jobs: int = 1,
    on_case: CaseCallback | None = None,
) -> Report:
    """Run ``command`` on each case (``jobs`` at a time), grade each, and gather one report.

    ``on_case(run, results)`` is called as each case ends (progress). A case whose
    server failed is an internal error of the report (exit 3), not a client failure.
    """
    report = Report(target=command, options=Options(), started_at=datetime.now(UTC).isoformat(timespec="seconds"))
    began = time.monotonic()

    def one(case: Case) -> tuple[CaseRun, list[CheckResult]]:
        run = run_case(command, case, timeout)
        return run, grade(run)

    runs: dict[str, tuple[CaseRun, list[CheckResult]]] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for run, results in pool.map(one, cases):
            runs[run.case.name] = (run, results)
            if on_case is not None:
                on_case(run, results)
    for case in cases:
        run, results = runs[case.name]
        if run.server_error:
            report.internal_errors.append(f"{case.name}: {run.server_error}")
        report.results.extend(scoped(results, case.name))
        if not run.server_error:
            report.cases.append(judge(run, results))
        report.exchanges += run.requests_total
    report.duration_s = time.monotonic() - began
    return report
