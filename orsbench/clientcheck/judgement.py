"""The one judgement of a client's run: its verdict, in the one vocabulary, from the client checks' results.

``orsbench check-client`` (each case), ``orsbench matrix`` (each cell) and
``orsbench clients URL`` (each row) grade a :class:`~orsbench.clientcheck.runner.CaseRun`
with the same client checks (:func:`orsbench.clientcheck.grade`) and hand the
results here: :func:`judge` collects the :class:`~orsbench.verdict.Effect` of
each failed required check (the check's own ``effect``), what the process did
(stopped at a bound, an error reported or a non-zero exit) and what a winning
episode shows that the client's reports do not, and asks
:func:`orsbench.verdict.verdict_of` — the function a prediction from the pinned
defects asks too. So every view says the same thing in the same words.
"""

from __future__ import annotations

from collections.abc import Sequence

from orsbench.checks.model import CheckResult, Severity, Status
from orsbench.clientcheck.checks import CLIENT_CHECKS, ClientCheck, expects_error
from orsbench.clientcheck.runner import CaseRun
from orsbench.verdict import SCRIPT, Effect, Finding, Judgement, Verdict, verdict_of

__all__ = ["NO_REPORT", "TRAFFIC_ONLY", "Judgement", "client_error", "failed_required", "judge", "judge_traffic", "unmet_expectations"]

#: Characters of the client's own error a judgement keeps.
ERROR_CHARS = 300
#: What a judgement of a client seen on the wire could not see (a hosted case with no contract lines posted).
NO_REPORT = "the client posted no report: what it showed its user is not judged"
#: What a judgement of a proxied session could not see: it has no case, no report and no process.
TRAFFIC_ONLY = "judged from its traffic alone: the proxy knows no case, and sees no report and no process"


def _check(result: CheckResult) -> ClientCheck:
    return CLIENT_CHECKS.get(result.id.split("[", 1)[0])


def failed_required(results: Sequence[CheckResult]) -> list[CheckResult]:
    """The required checks that failed (or errored)."""
    return [r for r in results if r.status in (Status.FAIL, Status.ERROR) and r.severity is Severity.REQUIRED]


def unmet_expectations(run: CaseRun) -> list[str]:
    """Where the client's reports differ from what the script expects of a winning episode.

    The client checks compare the client with what the server *sent*; a client that played another
    environment than it was told to (two environments on one server) reports faithfully what that one
    sent. The script knows what the right environment answers: each step's ``expect`` text, the reward.
    """
    lines = [line for line in run.out.lines if line.is_call and line.get("after_finished") is not True]
    unmet = [
        f"{step.tool} returned {str(line.get('text'))[:60]!r}, the scenario answers {step.expect[:60]!r}"
        for step, line in zip(run.script.steps, lines)
        if step.expect is not None and line.get("text") != step.expect
    ]
    rewards = [line.get("reward") for line in lines if line.get("reward") is not None]
    if run.script.reward is not None and lines and (rewards[-1:] != [run.script.reward]):
        unmet.append(f"the episode's last reward is {rewards[-1] if rewards else None!r}, the scenario's winning reward {run.script.reward!r}")
    return unmet


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:ERROR_CHARS] if lines else ""


def client_error(run: CaseRun) -> str | None:
    """The client's own first error: its first error line, else its exit status and the last line it printed."""
    for line in run.out.lines:
        if line.is_error:
            return _first_line(str(line.get("error"))) or "an empty error"
    if run.stopped_for is None and run.exit_code not in (0, None):
        tail = [line.strip() for line in (run.stderr or run.stdout).splitlines() if line.strip()]
        return f"exit {run.exit_code}: {tail[-1][:ERROR_CHARS]}" if tail else f"exit {run.exit_code}"
    return None


def _ended_on_error(run: CaseRun) -> bool:
    """Whether the episode ended on an error: a non-zero exit, orsbench's SIGTERM, or an error as the last line it wrote.

    A client that reported a refused call and played on to the end (``recover``) did what a correct client does.
    """
    entries = run.out.entries
    return run.exit_code not in (0, None) or run.terminated is not None or bool(entries and entries[-1].is_error)


def _rules(results: Sequence[CheckResult], failed: Sequence[CheckResult], hung: bool) -> list[str]:
    """Ids of the rules broken beside the verdict: failed required checks of rules (a stopped client is told it hung,
    not also that it sent many requests meanwhile), a rule a live grader could only warn of (``client.env_name``
    behind the proxy), and the recommended checks not kept (a session left open after SIGTERM)."""
    shown = [r.id for r in failed if _check(r).effect is Effect.RULE and not (hung and _check(r).fails_with_a_hang)]
    shown += [r.id for r in results if r.severity is Severity.REQUIRED and r.status is Status.WARN and _check(r).effect is Effect.RULE]
    shown += [r.id for r in results if r.severity is Severity.RECOMMENDED and r.status in (Status.WARN, Status.FAIL)]
    return shown


def _judgement(
    results: Sequence[CheckResult],
    *,
    hung: bool = False,
    error: str | None = None,
    error_counts: bool = False,
    expected: Verdict = Verdict.WORKS,
    unmet: Sequence[str] = (),
    unseen: str | None = None,
    subject: str = "",
) -> Judgement:
    """The one rule every front end's verdict comes from: the effects of the failed required checks, of the process
    (a hang, an error the episode ended on), and of the script's unmet expectations, through :func:`verdict_of`."""
    failed = failed_required(results)
    effects = {_check(r).effect for r in failed}
    if hung:
        effects.add(Effect.HANGS)
    if error_counts:
        effects.add(Effect.REPORTS_ERROR)
    if any(_check(r).unreported for r in failed):
        # The figure the user reads (an aggregate over episodes) hides the failure: the error said elsewhere does not count.
        effects.discard(Effect.REPORTS_ERROR)
    if unmet:
        effects.add(Effect.WRONG_DATA)
    verdict = verdict_of(effects)
    problems = [Finding(r.id, r.message) for r in failed if _check(r).effect is not Effect.RULE]
    if verdict is Verdict.FAILS_SILENTLY and not problems:
        problems = [Finding(SCRIPT, why) for why in unmet]
    rules = _rules(results, failed, hung)
    return Judgement(verdict, expected, tuple(problems), tuple(rules), error if error_counts else None, unseen, subject)


def judge(run: CaseRun, results: Sequence[CheckResult], subject: str | None = None, seen: Sequence[str] = ()) -> Judgement:
    """The verdict of ``run`` from the client checks' ``results`` on it (:func:`orsbench.clientcheck.grade`).

    Only the checks of the episode's outcome and the process decide it; a rule the client broke without
    changing this episode (``client.env_name`` on a one-environment server, ``client.retry_after`` where the
    retry still succeeded) is listed beside the verdict and pinned like any defect, but does not turn a
    working client into a failing one. A reported error makes a clear failure where the episode ended on it,
    a check failed, or the case asks for one — not where the client reported a refused call and played on.

    A client seen only on the wire (a hosted case, :attr:`CaseRun.watched` false) that posted no report is judged
    from its traffic, and the judgement says what it could not see; where the case asks for a reported error, what
    the traffic shows (the client stopped where a correct one does) is taken as the expected verdict, said unseen.
    ``seen``: what such a grader saw the episode miss of the script (it stopped short), judged as unmet expectations.
    """
    expected = verdict_of([Effect.REPORTS_ERROR] if expects_error(run) else [])
    failed = failed_required(results)
    error = client_error(run)
    counts = (error is not None and (_ended_on_error(run) or bool(failed) or expected is not Verdict.WORKS)) or (
        run.exit_code not in (0, None) or run.terminated is not None  # ended by a signal (orsbench's SIGTERM): its user sees that
    )
    unseen = None
    if not run.watched and not run.out.exists:
        unseen = NO_REPORT
        counts = counts or (expected is not Verdict.WORKS and not failed)
    # An episode orsbench ended mid-call never reached what the script expects of its end.
    unmet = [*unmet_expectations(run), *seen] if run.terminated is None else []
    return _judgement(
        results,
        hung=run.stopped_for is not None,
        error=error,
        error_counts=counts,
        expected=expected,
        unmet=unmet,
        unseen=unseen,
        subject=run.case.name if subject is None else subject,
    )


def judge_traffic(results: Sequence[CheckResult], subject: str = "") -> Judgement:
    """The verdict of a session seen only as traffic (``orsbench proxy``): the failed traffic checks decide it."""
    return _judgement(results, unseen=TRAFFIC_ONLY, subject=subject)
