"""Play one client's episode through its adapter, forked ready, under check-client's runner, and judge it.

The child runs exactly what ``python -m orsbench.clients.adapter NAME`` runs
(the adapter contract's variables set, the script in a file, one JSON line
per call appended to the out file), only forked from a parent that already
imported the client (:class:`~orsbench.clientcheck.process.Fork`), so an
episode starts in milliseconds instead of seconds. Everything else is the one
runner every client goes through (:class:`~orsbench.clientcheck.runner.RunningCase`:
deadline, request-storm and output bounds, the process group stopped, the
out file, the server's request log slice and counters collected into a
:class:`~orsbench.clientcheck.CaseRun`), graded by the same client checks
(:func:`orsbench.clientcheck.grade`) and judged by the same function
(:func:`orsbench.clientcheck.judgement.judge`) as any user's adapter command:

* ``hangs`` — still going at the deadline (or stopped at a bound);
* ``fails silently`` — wrong data handed on (a changed text, a reward or
  ``finished`` other than sent, a failure handed on as an answer, the episode
  cut short without a word), or the server left worse off (a tool run more often
  than called, a session left open) — the latter even after a reported error;
* ``fails clearly`` — the client reported an error (or exited non-zero), and no
  tool ran twice nor was a session left open;
* ``works`` — none of that.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from orsbench.checks.model import CheckResult
from orsbench.clientcheck import CaseRun, grade
from orsbench.clientcheck.cases import Case
from orsbench.clientcheck.episodes import Script
from orsbench.clientcheck.judgement import judge
from orsbench.clientcheck.model import tools_shown
from orsbench.clientcheck.process import Fork
from orsbench.clientcheck.runner import RunningCase
from orsbench.clients import adapter
from orsbench.clients.offline import loopback_only
from orsbench.clients.targets import CLIENT_TARGETS, playable
from orsbench.clients.transcript import AdapterEpisode
from orsbench.servers.launch import RunningServer
from orsbench.verdict import Judgement, Verdict

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
    #: What the client showed the model as tools: for an agent harness, what it offered the scripted model
    #: (``name``, ``description``, ``parameters``, as its provider API sent them).
    tools_seen: list[Any] = field(default_factory=list)
    #: What the adapter observed beyond the contract (``episode.extras``).
    extras: dict[str, Any] = field(default_factory=dict)
    #: What an agent harness sent the scripted model (:meth:`orsbench.clientcheck.model.ModelScript.transcript`).
    model: dict[str, Any] | None = None
    #: The tail of what the client printed (stdout and stderr), kept off the terminal the matrix reports on.
    output: str = ""
    #: The client checks' results on the episode (:func:`orsbench.clientcheck.grade`).
    checks: list[CheckResult] = field(default_factory=list)
    #: How the one judgement (:func:`orsbench.clientcheck.judgement.judge`) reads the run: the verdict, the checks that
    #: decided it, the rules broken — carried as it is to the matrix's cell, never copied into words.
    judgement: Judgement = field(default_factory=lambda: Judgement(Verdict.WORKS))

    @property
    def verdict(self) -> Verdict:
        return self.judgement.verdict

    @property
    def problems(self) -> list[str]:
        """``"<check id>: <message>"`` of each failed required check that decided the verdict (empty for a clean survival)."""
        return [str(p) for p in self.judgement.problems]

    @property
    def rules(self) -> list[str]:
        """Ids of the failed required checks of rules the episode's outcome did not depend on (``client.env_name``, ...)."""
        return list(self.judgement.rules)

    @property
    def survived(self) -> bool:
        return self.verdict == Verdict.WORKS

    @property
    def failed_checks(self) -> list[str]:
        return self.judgement.failed_checks

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
            if not line.is_call or line.get("after_finished") is True:
                continue  # a call after finished is no part of the episode (its refusal: client.stops_at_finished)
            self.outputs.append(str(line.get("text", "")))
            if line.get("reward") is not None:
                self.reward = line.get("reward")
            self.finished = self.finished or line.get("finished") is True


def forget_parent_ping_thread() -> None:
    """openreward keeps one process-wide ping thread; a fork copies its state but not the thread.

    If the parent already pinged, the child's copy looks running while nothing drives it, and no
    ping would ever leave the child. Re-initialise it (in the child) so the child starts its own.
    """
    session = sys.modules.get("openreward.api._session")
    if session is None:  # never imported here: no state to forget (and importing it would cost the child seconds)
        return
    thread = getattr(getattr(session, "ping", None), "ping_thread", None)
    if thread is not None:  # releases before the ping thread (0.1.109 has none) have nothing to forget
        thread.__init__()


def forked(client: str, prepare: Callable[[], None] | None = None) -> Fork:
    """The built-in adapter of ``client`` as a :class:`~orsbench.clientcheck.process.Fork` of this process.

    ``prepare`` runs in the child before the client starts (a test scaling a client's own timers). What a
    target observed beyond the contract (``episode.extras``) is left in the run's directory (``extras.json``).
    """
    target = playable(client)

    def body(workdir: Path) -> int:
        loopback_only()  # the client's code reaches 127.0.0.1 and nothing else (as the adapter's command line)
        adapter.unwind_on_sigterm()  # as the adapter's command line: SIGTERM unwinds the episode
        forget_parent_ping_thread()
        if prepare is not None:
            prepare()
        episode = AdapterEpisode.from_environment(os.environ)
        code = adapter.play(client, episode)
        episode.close()
        if code:
            print(episode.extras.get("traceback", ""), file=sys.stderr)  # as the adapter's command line does
        extras = {k: v for k, v in episode.extras.items() if k != "traceback"}
        try:
            (workdir / "extras.json").write_text(json.dumps(extras, default=repr))
        except (OSError, TypeError, ValueError):
            traceback.print_exc()
        return code

    return Fork(f"python -m orsbench.clients.adapter {client}", body, startup_s=target.startup_allowance())


def preload(clients: list[str] | None = None) -> None:
    """Make every installed client start fast in children forked from this process: import its modules (seconds
    each), or warm a command target's fork server (:meth:`~orsbench.clients.targets.ClientTarget.preload`)."""
    for name in CLIENT_TARGETS.names() if clients is None else clients:
        target = playable(name)
        if target.installed:
            target.preload()


def case_for(server: RunningServer, expect: str = "finish") -> Case:
    """The check-client case a running server (its scenario and faults) stands for; the script is the run's own."""
    faults = tuple(server.config.faults)
    name = "+".join((server.scenario, *faults))
    return Case(name, server.scenario, name, faults=faults, expect=expect)  # type: ignore[arg-type]


class ClientRun(RunningCase):
    """One client episode under way in a forked child; :meth:`finish` collects, grades and judges it.

    The server must keep a request log (``ServerConfig(request_log=True)``): the episode is graded from
    the entries it added. ``expect``: ``"finish"`` where a correct client plays the script to its end,
    ``"error"`` where it reports a failure. ``prepare`` runs in the child before the client starts
    (a test scaling a client's own timers). ``deadline`` leaves out the client's start-up, which its
    target says (``ClientTarget.startup_s``). ``terminate_on``: end the client mid-episode with SIGTERM once
    that server counter moves (a profile's ``terminate_on``, :class:`~orsbench.clientcheck.cases.Case`).
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
        sdk_urls: bool = True,
        terminate_on: str | None = None,
        runs: int = 1,
        episodes: int = 1,
    ) -> None:
        self.client = client
        case = replace(case_for(server, expect), sdk_urls=sdk_urls, runs=runs, episodes=episodes, terminate_on=terminate_on)
        if secrets:
            case = replace(case, secrets=tuple(secrets.items()))
        takes_model = playable(client).takes_model
        super().__init__(forked(client, prepare), case, server, script=script, deadline=deadline, model=takes_model)

    def finish(self) -> ClientOutcome:  # type: ignore[override]
        """Wait until the client ends or passes a bound (:meth:`RunningCase.finish` waits), then collect, grade and judge it.

        Called directly (``play``, a test's ``ClientRun(...).finish()``) it waits; the matrix, which polls
        :meth:`done` itself, finds it done at once. Stopping before that would SIGTERM a client mid-episode.
        """
        return outcome_of(self.client, super().finish())


def outcome_of(client: str, run: CaseRun) -> ClientOutcome:
    """The matrix's view of one graded run: what the client reported, what the server counted, the judgement."""
    results = grade(run)
    judgement = judge(run, results)
    outcome = ClientOutcome(client, elapsed=run.duration_s, hung=run.stopped_for is not None, output=(run.stdout + run.stderr)[-8192:])
    outcome.read(run)
    if outcome.error is None and judgement.error is not None:  # it died before it could write a line
        outcome.error = judgement.error
    outcome.extras = run.extras
    outcome.tools_seen = run.extras.get("tools_seen", [])
    if run.model is not None:
        outcome.model = run.model
        outcome.tools_seen = tools_shown(run.model)
    outcome.calls = dict(run.stats.get("calls") or {})
    outcome.requests = dict(run.stats.get("requests") or {})
    outcome.statuses = dict(run.stats.get("statuses") or {})
    outcome.sessions_left_open = int(run.stats.get("sessions_left_open") or 0)
    outcome.checks = results
    outcome.judgement = judgement
    return outcome


def play(client: str, server: RunningServer, script: Script, deadline: float = 30.0, **options: Any) -> ClientOutcome:
    return ClientRun(client, server, script, deadline, **options).finish()
