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
from dataclasses import dataclass, field

from orsbench.checks.model import CheckResult, Severity, Status
from orsbench.clientcheck.checks import CLIENT_CHECKS, ClientCheck, expects_error
from orsbench.clientcheck.runner import CaseRun
from orsbench.verdict import CaseVerdict, Effect, Verdict, describe, verdict_of

__all__ = ["Judgement", "failed_required", "judge", "unmet_expectations"]

#: Characters of the client's own error a judgement keeps.
ERROR_CHARS = 300


@dataclass(frozen=True)
class Judgement:
    """How a client fared with one case: the verdict, what a correct client gets there, and why."""

    verdict: Verdict
    #: The verdict a correct client gets in this case (a clear error where the case asks for one).
    expected: Verdict
    #: ``"<check id>: <message>"`` of each failed required check that decides the verdict (the process, the data,
    #: the server), else the script's unmet expectations as ``"script: ..."`` where those alone decided it.
    problems: tuple[str, ...] = ()
    #: Ids of the failed required checks of rules the episode did not depend on (``client.env_name``, ...), and of the
    #: recommended checks it did not pass (``client.deletes_on_sigterm``).
    rules: tuple[str, ...] = ()
    #: The client's own first error: its first reported error line, else its exit status and last stderr line.
    error: str | None = None
    #: The results it was judged from.
    results: tuple[CheckResult, ...] = field(default=(), repr=False)

    @property
    def right(self) -> bool:
        """Whether the client did what a correct client does here."""
        return self.verdict == self.expected

    @property
    def words(self) -> str:
        """The verdict as every view prints it: ``works``, ``fails clearly (right)``, ``fails silently``."""
        return describe(self.verdict, self.expected)

    @property
    def because(self) -> str | None:
        """One line saying why, where the client did not do what a correct client does."""
        if self.right:
            return None
        if self.verdict is Verdict.FAILS_CLEARLY and self.error:
            return self.error
        return self.problems[0] if self.problems else self.error

    def of_case(self, case: str) -> CaseVerdict:
        """This judgement as a report carries it for ``case``."""
        return CaseVerdict(case, self.verdict, self.expected, self.because)


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


def judge(run: CaseRun, results: Sequence[CheckResult]) -> Judgement:
    """The verdict of ``run`` from the client checks' ``results`` on it (:func:`orsbench.clientcheck.grade`).

    Only the checks of the episode's outcome and the process decide it; a rule the client broke without
    changing this episode (``client.env_name`` on a one-environment server, ``client.retry_after`` where the
    retry still succeeded) is listed beside the verdict and pinned like any defect, but does not turn a
    working client into a failing one.
    """
    failed = failed_required(results)
    effects = {_check(r).effect for r in failed}
    if run.stopped_for is not None:
        effects.add(Effect.HANGS)
    error = client_error(run)
    if error is not None or run.exit_code not in (0, None) or run.terminated is not None:
        effects.add(Effect.REPORTS_ERROR)  # ended by a signal (orsbench's SIGTERM): its user sees that it stopped
    if any(_check(r).unreported for r in failed):
        # The figure the user reads (an aggregate over episodes) hides the failure: the error said elsewhere does not count.
        effects.discard(Effect.REPORTS_ERROR)
    # An episode orsbench ended mid-call never reached what the script expects of its end.
    unmet = unmet_expectations(run) if run.terminated is None else []
    if unmet:
        effects.add(Effect.WRONG_DATA)
    verdict = verdict_of(effects)
    rules = [r for r in failed if _check(r).effect is Effect.RULE]
    problems = [f"{r.id}: {r.message}" for r in failed if r not in rules]
    if verdict is Verdict.FAILS_SILENTLY and not problems:
        problems = [f"script: {why}" for why in unmet]
    # A client stopped at a bound is told that (client.exits_in_time), not also that it sent many requests meanwhile.
    shown_rules = [r.id for r in rules if not (run.stopped_for is not None and _check(r).fails_with_a_hang)]
    # A recommended rule it did not keep (a session left open after SIGTERM) is listed beside the verdict too.
    shown_rules += [r.id for r in results if r.severity is Severity.RECOMMENDED and r.status in (Status.WARN, Status.FAIL)]
    expected = verdict_of([Effect.REPORTS_ERROR] if expects_error(run) else [])
    return Judgement(verdict, expected, tuple(problems), tuple(shown_rules), error, tuple(results))
