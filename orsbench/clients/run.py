"""Play one client's episode through its adapter, in a forked child with a hard deadline, and grade it with the client checks.

The child runs exactly what ``python -m orsbench.clients.adapter NAME`` runs
(the adapter contract's variables set, the script in a file, one JSON line
per call appended to the out file), only forked from a parent that already
imported the client, so an episode starts in milliseconds instead of seconds.
The parent then builds the :class:`~orsbench.clientcheck.CaseRun` that
``orsbench check-client`` builds for a command — the out file, the server's
request log (the slice this episode sent) and its counters — and grades it with
the same client checks (:func:`orsbench.clientcheck.grade`): one grading path
for the built-in clients and any user's adapter. The verdict is read from
which checks failed (:func:`verdict`):

* ``hangs`` — still going at the deadline; killed (``client.exits_in_time``);
* ``fails silently`` — a check of the data failed: a changed text, a reward or
  ``finished`` other than sent, a tool run more often than called, a session
  left open, a failure handed on as an answer — or, with no error reported, any
  required check failed;
* ``fails clearly`` — the client reported an error (or exited non-zero), and no
  tool ran twice nor was a session left open;
* ``survives`` — no required check failed.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx

from orsbench import protocol
from orsbench.checks.model import CheckResult, Severity, Status
from orsbench.clientcheck import CLIENT_CHECKS, CaseRun, ClientCheck, grade
from orsbench.clientcheck.cases import Case
from orsbench.clientcheck.contract import read_out
from orsbench.clientcheck.runner import OUT_LIMIT, TAIL_BYTES, case_environment, script_json
from orsbench.clients import adapter
from orsbench.clientcheck.episodes import Script
from orsbench.clients.fork import ForkedEpisode, forget_parent_ping_thread
from orsbench.clients.targets import CLIENT_TARGETS
from orsbench.clients.transcript import AdapterEpisode
from orsbench.servers.launch import RunningServer, local_http
from orsbench.verdict import Effect, Verdict, verdict_of

VERDICTS = tuple(Verdict)


@dataclass
class ClientOutcome:
    """One client's episode: what it reported under the adapter contract, what the server saw, and the checks' verdicts."""

    client: str
    #: The client's view, from its out file: what each call showed the model.
    outputs: list[str] = field(default_factory=list)
    #: The last non-null reward the client reported (the trainers' outcome convention).
    reward: Any = None
    finished: bool = False
    error: str | None = None
    #: Whether the client raised the error (False: it reported it its own way, as TRL's "Error: ..." text).
    raised: bool = False
    failed_at: str | None = None
    hung: bool = False
    elapsed: float = 0.0
    #: Server-side deltas over the episode (``/_orsbench/stats``).
    calls: dict[str, int] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    statuses: dict[str, int] = field(default_factory=dict)
    sessions_left_open: int = 0
    #: What the client showed the model as tools (inspect only: Inspect's ToolInfo dumps).
    tools_seen: list[Any] = field(default_factory=list)
    #: What the adapter observed beyond the contract (Inspect: ``tools_seen``; firehorse: ``shown``, the raw MCP texts).
    extras: dict[str, Any] = field(default_factory=dict)
    #: The tail of what the client printed (stdout and stderr), kept off the terminal the matrix reports on.
    output: str = ""
    #: The client checks' results on the episode (:func:`orsbench.clientcheck.grade`).
    checks: list[CheckResult] = field(default_factory=list)
    #: ``"<check id>: <message>"`` of each failed required check of the outcome or the process (empty for a clean survival).
    problems: list[str] = field(default_factory=list)
    #: Ids of the failed required checks of rules the episode's outcome did not depend on (``client.env_name``, ...).
    rules: list[str] = field(default_factory=list)
    verdict: str = Verdict.WORKS

    @property
    def survived(self) -> bool:
        return self.verdict == Verdict.WORKS

    @property
    def failed_checks(self) -> list[str]:
        return [p.split(":", 1)[0] for p in self.problems] + self.rules

    def describe(self) -> str:
        return (
            f"{self.client}: {self.verdict} {self.problems} rules broken: {self.rules_explained()} reward={self.reward!r} finished={self.finished} "
            f"error={self.error!r} at {self.failed_at} {self.elapsed:.1f}s calls={self.calls} "
            f"requests={self.requests} left_open={self.sessions_left_open} outputs={[o[:80] for o in self.outputs]}"
        )

    def rules_explained(self) -> list[str]:
        """Each broken rule with its check's message, so a failing test says what the client did."""
        said = {r.id: r.message for r in self.checks}
        return [f"{rule}: {said[rule]}" if rule in said else rule for rule in self.rules]

    def read(self, run: CaseRun) -> None:
        """Fill the client's view from the adapter's lines."""
        for line in run.out.lines:
            if line.is_error:
                self.error, self.failed_at = str(line.get("error")), line.get("stage")
                self.raised = bool(line.get("raised", True))
                break
            if not line.is_call:
                continue
            self.outputs.append(str(line.get("text", "")))
            if line.get("reward") is not None:
                self.reward = line.get("reward")
            self.finished = self.finished or line.get("finished") is True


def _request_log(server: RunningServer) -> tuple[list[dict[str, Any]], int]:
    """The server's request log entries and total; the server must run with ``ServerConfig(request_log=True)``."""
    try:
        response = local_http().get(server.url + protocol.REQUEST_LOG, timeout=30)
        response.raise_for_status()
        log = response.json()
        return list(log["entries"]), int(log["total"])
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        raise RuntimeError(
            f"the client runner grades from the server's request log, and {server.url} has none ({exc}): "
            "start it with ServerConfig(request_log=True)"
        ) from None


def _child(client: str, environ: dict[str, str], output: str, prepare: Callable[[], None] | None, conn: Connection) -> None:
    started = time.monotonic()
    # What the client prints (its loggers, aiohttp's unclosed-session warnings) goes to a file the parent
    # keeps the tail of, as check-client keeps a command's: a matrix of 250 episodes must not spill onto the terminal.
    sink = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(sink, 1)
    os.dup2(sink, 2)
    os.close(sink)
    # Python's own streams too, where a host (pytest's capture) had pointed them somewhere other than fds 1 and 2.
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    os.environ.update(environ)
    forget_parent_ping_thread()
    if prepare is not None:
        prepare()
    episode = AdapterEpisode.from_environment(os.environ)
    code = adapter.play(client, episode)
    episode.close()
    extras = {k: v for k, v in episode.extras.items() if k != "traceback"}
    report = {"exit": code, "seconds": time.monotonic() - started, "extras": extras}
    try:
        conn.send(report)
    except Exception:  # noqa: BLE001 - an unpicklable value must not lose the outcome
        conn.send({"exit": code, "seconds": report["seconds"]})
    conn.close()
    os._exit(0)  # skip atexit: the SDK's loop threads would otherwise delay the exit


def _tail(path: Path) -> str:
    """The last :data:`TAIL_BYTES` of what the child printed (stdout and stderr together)."""
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, path.stat().st_size - TAIL_BYTES))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def case_for(server: RunningServer, expect: str = "finish") -> Case:
    """The check-client case a running server (its scenario and faults) stands for; the script is the run's own."""
    faults = tuple(server.config.faults)
    name = "+".join((server.scenario, *faults))
    return Case(name, server.scenario, name, faults=faults, expect=expect)  # type: ignore[arg-type]


class ClientRun(ForkedEpisode):
    """One client episode under way in a forked child; :meth:`finish` collects and grades it (at its deadline at the latest).

    The server must keep a request log (``ServerConfig(request_log=True)``): the episode is graded from
    the entries it added. ``expect``: ``"finish"`` where a correct client plays the script to its end,
    ``"error"`` where it reports a failure. ``prepare`` runs in the child before the client starts
    (a test scaling a client's own timers).
    """

    def __init__(
        self,
        client: str,
        server: RunningServer,
        script: Script,
        deadline: float = 30.0,
        *,
        expect: str = "finish",
        secrets: Mapping[str, str] | None = None,
        prepare: Callable[[], None] | None = None,
    ) -> None:
        self.client, self.script = client, script
        self.case = case_for(server, expect)
        if secrets:
            self.case = replace(self.case, secrets=tuple(secrets.items()))
        self.workdir = Path(tempfile.mkdtemp(prefix="orsbench-client-"))
        script_path, self.out_path = self.workdir / "script.json", self.workdir / "out.jsonl"
        script_path.write_text(json.dumps(script_json(script)))
        environ = case_environment(self.case, server.url, server.env_name, script_path, self.out_path)
        self.output_path = self.workdir / "output.log"
        self.log_before = _request_log(server)[1]
        limit = deadline + CLIENT_TARGETS.get(client).startup_s
        super().__init__(server, _child, (client, environ, str(self.output_path), prepare), limit)

    def finish(self, settle: float = 0.0) -> ClientOutcome:
        got = self.collect(join_s=5.0, settle=settle)
        entries, total = _request_log(self.server)
        skipped = max(0, total - len(entries))  # entries past the log's bound are counted, not kept
        run = CaseRun(
            self.case,
            self.script,
            f"python -m orsbench.clients.adapter {self.client}",
            url=self.server.url,
            env=self.server.env_name,
            exit_code=None if got.result is None else int(got.result.get("exit", 1)),
            deadline=self.deadline,
            stopped_for="deadline" if got.result is None else None,
            duration_s=got.elapsed,
            out=read_out(self.out_path, OUT_LIMIT),
            stderr=_tail(self.output_path),
            log=entries[max(0, self.log_before - skipped) :],
            requests_total=total - self.log_before,
            stats={"calls": got.calls, "requests": got.requests, "statuses": got.statuses},
        )
        shutil.rmtree(self.workdir, ignore_errors=True)
        outcome = ClientOutcome(self.client, elapsed=got.elapsed, hung=got.result is None, output=run.stderr)
        outcome.read(run)
        if got.result is not None:
            if "error" in got.result and outcome.error is None:  # the child died before it could write a line
                outcome.error = str(got.result["error"])
            outcome.elapsed = got.result.get("seconds", got.elapsed)
            outcome.extras = got.result.get("extras", {})
            outcome.tools_seen = outcome.extras.get("tools_seen", [])
        outcome.calls, outcome.requests, outcome.statuses = got.calls, got.requests, got.statuses
        outcome.sessions_left_open = got.sessions_left_open
        outcome.checks = grade(run)
        outcome.verdict = verdict(run, outcome.checks)
        failed = failed_required(outcome.checks)
        rule = [r for r in failed if _check(r).effect is Effect.RULE]
        outcome.problems = [f"{r.id}: {r.message}" for r in failed if r not in rule]
        # A client stopped at its deadline is told that (client.exits_in_time), not also that it sent many requests meanwhile.
        outcome.rules = [r.id for r in rule if not (run.stopped_for and _check(r).fails_with_a_hang)]
        if outcome.verdict == "fails silently" and not outcome.problems:
            outcome.problems = [f"script: {why}" for why in unmet_expectations(run)]
        return outcome


def _check(result: CheckResult) -> ClientCheck:
    return CLIENT_CHECKS.get(result.id)


def failed_required(results: list[CheckResult]) -> list[CheckResult]:
    return [r for r in results if r.status in (Status.FAIL, Status.ERROR) and r.severity is Severity.REQUIRED]


def verdict(run: CaseRun, results: list[CheckResult]) -> Verdict:
    """survives / fails clearly / fails silently / hangs, from the client checks' results on ``run``.

    Each failed required check brings its :attr:`~orsbench.clientcheck.checks.ClientCheck.effect`, the
    process what it did (stopped at its deadline, an error reported or a non-zero exit), the script what a
    winning episode shows; :func:`orsbench.verdict.verdict_of` picks the word. A rule the client broke
    without changing this episode (``client.env_name`` on a one-environment server, ``client.retry_after``
    where the retry still succeeded) is listed beside the verdict (:attr:`ClientOutcome.rules`) and pinned
    like any defect, but does not turn a survival into a failure.
    """
    effects = {_check(r).effect for r in failed_required(results)}
    if run.stopped_for is not None:
        effects.add(Effect.HANGS)
    if any(line.is_error for line in run.out.lines) or run.exit_code not in (0, None):
        effects.add(Effect.REPORTS_ERROR)
    if unmet_expectations(run):
        effects.add(Effect.WRONG_DATA)
    return verdict_of(effects)


def unmet_expectations(run: CaseRun) -> list[str]:
    """Where the client's reports differ from what the script expects of a winning episode.

    The client checks compare the client with what the server *sent*; a client that played another
    environment than it was told to (two environments on one server) reports faithfully what that one
    sent. The script knows what the right environment answers: each step's ``expect`` text, the reward.
    """
    lines = [line for line in run.out.lines if line.is_call]
    unmet = [
        f"{step.tool} returned {str(line.get('text'))[:60]!r}, the scenario answers {step.expect[:60]!r}"
        for step, line in zip(run.script.steps, lines)
        if step.expect is not None and line.get("text") != step.expect
    ]
    rewards = [line.get("reward") for line in lines if line.get("reward") is not None]
    if run.script.reward is not None and lines and (rewards[-1:] != [run.script.reward]):
        unmet.append(f"the episode's last reward is {rewards[-1] if rewards else None!r}, the scenario's winning reward {run.script.reward!r}")
    return unmet


def play(client: str, server: RunningServer, script: Script, deadline: float = 30.0, **options: Any) -> ClientOutcome:
    return ClientRun(client, server, script, deadline, **options).finish()
