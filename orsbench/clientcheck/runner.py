"""The one runner for every client: start it on a case, bound it, stop it, collect both ends.

Every client orsbench grades — a user's adapter command (``check-client``), a
built-in client target forked ready (``matrix``), either of them on the user's
own server (``orsbench clients URL``) — goes through :class:`RunningCase`:

* the script and an empty ``ORSBENCH_OUT`` in a private directory, the contract's
  variables (:func:`case_environment`) in the client's environment;
* the client started by its :class:`~orsbench.clientcheck.process.Launch`, in a
  process group of its own, its stdout and stderr in files;
* bounded: stopped at its deadline, on a request storm (:data:`STORM_LIMIT`
  requests the server saw since it started) and on an output flood
  (``ORSBENCH_OUT`` past :data:`OUT_LIMIT`, its stdout or stderr past
  :data:`STDIO_LIMIT`) — SIGTERM to the group, SIGKILL after
  :data:`~orsbench.clientcheck.process.GRACE_S`;
* collected into a :class:`CaseRun`: the out file, the tails of what it printed,
  the slice of the server's request log it caused and the server's counters'
  change over its episode — what :func:`orsbench.clientcheck.grade` judges.

A case therefore always ends within its deadline plus a few seconds, whatever
the client does. Secrets reach the client through its environment only
(``ORSBENCH_SECRETS``), never its command line, and are never written to a report;
while a case with secrets runs, the command lines of the client's whole process
tree are read (:mod:`.proctree`), so one that puts a secret on a command line is caught.
"""

from __future__ import annotations

import json
import shutil
import signal
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from orsbench import protocol
from orsbench.clientcheck import contract
from orsbench.clientcheck.cases import Case
from orsbench.clientcheck.contract import OutFile
from orsbench.clientcheck.episodes import Script
from orsbench.clientcheck.model import ModelScript, register
from orsbench.clientcheck.process import TERMINATE_GRACE_S, ClientProcess, Command, Launch
from orsbench.clientcheck.proctree import ArgvSeen, ArgvWatch, alive
from orsbench.servers.launch import RunningServer, ServerStartError, local_http, start
from orsbench.servers import stats as server_stats
from orsbench.wire.redact import scrub

#: Bytes of stdout and of stderr kept (the tail).
TAIL_BYTES = 8192
#: A finding shows at most this many of the last lines of stderr, and this many characters of them.
STDERR_LINES, STDERR_CHARS = 20, 2000
#: Characters of each reported error a finding shows.
ERROR_CHARS = 500
#: Bytes of ``ORSBENCH_OUT`` read back; a client writing more is stopped.
OUT_LIMIT = 4 * 1024 * 1024
#: Bytes a client may print on stdout or stderr before it is stopped as an output flood.
STDIO_LIMIT = 64 * 1024 * 1024
#: Requests after which a client is stopped as a request storm.
STORM_LIMIT = 2000
#: How often a client is looked at, and how often its server's request count and its output sizes.
POLL_S = 0.05
WATCH_SERVER_S = 0.25


@dataclass
class Termination:
    """How orsbench ended a client mid-episode (a case's ``terminate_on``): SIGTERM, then SIGKILL after the grace.

    Times are seconds on the machine's monotonic clock (the request log's clock too), so the server's
    record of each request can be placed before or after the signal.
    """

    #: When SIGTERM was sent (monotonic), and how long after the episode began.
    sigterm_at: float
    after_s: float
    #: Seconds from SIGTERM until no process of the client ran (``None``: it was still running at the grace's end).
    exited_after_s: float | None = None
    #: SIGKILL was needed: the client was still running :data:`~orsbench.clientcheck.process.TERMINATE_GRACE_S` after SIGTERM.
    killed: bool = False
    grace_s: float = TERMINATE_GRACE_S
    #: The session TTL of the server (``ServerConfig.ttl``): how long a session left open holds its environment.
    ttl_s: float | None = None
    #: Tool-call tasks still running on the server when the run was collected (mock only; ``None``: not known).
    tasks_running: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "after_s": round(self.after_s, 3),
            "exited_after_s": None if self.exited_after_s is None else round(self.exited_after_s, 3),
            "killed": self.killed,
            "grace_s": self.grace_s,
            "ttl_s": self.ttl_s,
            "tasks_running": self.tasks_running,
        }


@dataclass
class CaseRun:
    """Everything one case produced, from both ends; :func:`orsbench.clientcheck.grade` judges it."""

    case: Case
    script: Script
    #: The command as run (placeholders filled in; never carries a secret).
    command: str
    url: str = ""
    env: str = ""
    #: The server's default environment: what a ``/create`` without ``env_name`` plays (``""``: not known).
    default_env: str = ""
    exit_code: int | None = None
    #: Seconds the client was given.
    deadline: float = 0.0
    #: Why orsbench stopped the client: ``"deadline"``, ``"request storm"``, ``"output flood"`` (``None``: it ended).
    stopped_for: str | None = None
    started_at: float = 0.0
    duration_s: float = 0.0
    #: Seconds the case took in all (server start and stop included): the overhead is this minus ``duration_s``.
    wall_s: float = 0.0
    stdout: str = ""
    stderr: str = ""
    out: OutFile = field(default_factory=OutFile)
    #: The server's request log (:mod:`orsbench.servers.request_log`) entries of this episode, and how many requests it sent.
    log: list[dict[str, Any]] = field(default_factory=list)
    requests_total: int = 0
    #: How the server's counters (``/_orsbench/stats``) changed over the episode: ``calls``, ``requests`` and
    #: ``statuses`` by how much, ``sessions_left_open``; empty where the server keeps none (a proxy to yours).
    stats: dict[str, Any] = field(default_factory=dict)
    #: What a built-in client observed beyond the contract (``episode.extras``).
    extras: dict[str, Any] = field(default_factory=dict)
    #: What the client sent the scripted model (``ORSBENCH_MODEL_URL``), when it asked it anything: the tools it
    #: offered, the results it showed (:meth:`orsbench.clientcheck.model.ModelScript.transcript`).
    model: dict[str, Any] | None = None
    #: The case server could not be started or read: orsbench's problem, not the client's.
    server_error: str | None = None
    #: What the client's processes carried on their command lines, read while a case with secrets ran
    #: (:mod:`orsbench.clientcheck.proctree`); ``None`` where the case gives no secret or no process was watched.
    argv: ArgvSeen | None = None
    #: How orsbench ended the client mid-episode, in a case that does (``terminate_on``); ``None`` otherwise.
    terminated: Termination | None = None
    #: orsbench started the client and watched its process (its exit, its deadline); False for a client seen only on
    #: the wire (a hosted case: what it reported is only what it posted).
    watched: bool = True

    @property
    def timed_out(self) -> bool:
        return self.stopped_for == "deadline"

    def reported_errors(self) -> list[str]:
        """The errors the client reported (``{"error": ...}`` lines of ``ORSBENCH_OUT``), in order."""
        return [str(line.get("error")) for line in self.out.lines if line.is_error]

    def client_evidence(self) -> dict[str, Any] | None:
        """What the client process itself said, for a finding: its exit, the errors it reported, its stderr's tail.

        A client check judges the traffic and the report; a reader acting on its failure wants the
        client's own words beside it — the exception it raised, the line it logged. The case's secret
        values are taken out (a client may print what it was given). ``None`` when no process ran.
        """
        if self.exit_code is None and self.stopped_for is None and not self.stderr and not self.out.lines:
            return None
        secrets = [value for _, value in self.case.secrets]
        lines = self.stderr.rstrip().splitlines()[-STDERR_LINES:]
        tail = "\n".join(lines)[-STDERR_CHARS:]
        return {
            "exit_code": self.exit_code,
            "stopped_for": self.stopped_for,
            "errors": [scrub(e, secrets)[:ERROR_CHARS] for e in self.reported_errors()[:3]],
            "stderr_tail": scrub(tail, secrets),
        }


#: The openreward SDK's URL variables. A case that gives the server's URL alone (``Case.sdk_urls`` false)
#: withholds them from the client (``None``: taken out of the environment it inherits, whatever orsbench's holds).
SDK_URL_VARIABLES = (protocol.ENV_API_URL, protocol.ENV_SESSION_URL, protocol.ENV_WEB_URL)


def case_environment(
    case: Case, url: str, env: str, script_path: Path, out_path: Path, model: ModelScript | None = None
) -> dict[str, str | None]:
    """The variables of the contract (``docs/clients.md``) for one case, SDK variables included.

    ``model``: the case's script registered with the scripted model, for a client that takes a model.
    """
    # The openreward SDK (and TRL, Inspect) find the case server by these, except in a case that gives the URL alone.
    sdk_urls: dict[str, str | None] = (
        {protocol.ENV_API_URL: url, protocol.ENV_SESSION_URL: url} if case.sdk_urls else dict.fromkeys(SDK_URL_VARIABLES)
    )
    return {
        **(model.environment() if model is not None else {}),
        **sdk_urls,
        protocol.ENV_DISABLE_UPDATE_CHECK: "1",
        "OPENREWARD_API_KEY": contract.CASE_API_KEY,
        "HF_HUB_OFFLINE": "1",
        "INSPECT_LOG_DIR": str(script_path.parent / "inspect-logs"),
        contract.URL: url,
        contract.ENV: env,
        contract.SPLIT: case.split,
        contract.INDEX: str(case.index),
        contract.SCRIPT: str(script_path),
        contract.OUT: str(out_path),
        contract.SECRETS: json.dumps(dict(case.secrets)),
        contract.RUNS: str(case.runs),
        contract.EPISODES: str(case.episodes),
    }


def _stats(server: RunningServer) -> Mapping[str, Any] | None:
    """The server's counters, or ``None`` where it keeps none (the user's own server behind a proxy)."""
    return server_stats.read_or_none(server.url, api_key=server.config.api_key, client=local_http())


def _request_log(server: RunningServer) -> tuple[list[dict[str, Any]], int]:
    """The server's request log entries and total (the server runs with a request log)."""
    response = local_http().get(server.url + protocol.REQUEST_LOG, timeout=30)
    response.raise_for_status()
    log = response.json()
    return list(log["entries"]), int(log["total"])


def _tail(path: Path, limit: int = TAIL_BYTES) -> str:
    """The last ``limit`` bytes of a file the client printed to."""
    try:
        with path.open("rb") as handle:
            handle.seek(max(0, path.stat().st_size - limit))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class RunningCase:
    """One client playing one case under way; :meth:`done` watches it, :meth:`finish` collects it.

    ``server`` is where it plays: a case server, a shared matrix server, or a proxy to the user's server; it
    must keep a request log (``ServerConfig(request_log=True)``), which is graded from the entries this
    episode added. ``deadline`` defaults to the case's own; the launch's ``startup_s`` is added to it.
    ``default_env``: what a ``/create`` without ``env_name`` plays on ``server`` (default: the case's own, its
    scenario's first environment; a caller on a user's server passes the first one it lists).
    ``extra_env`` adds variables to the client's environment; ``overrides`` replaces contract ones (the
    user's API key for the SDK's ``OPENREWARD_API_KEY`` on the user's server). ``model``: register the script
    with the scripted model (``ORSBENCH_MODEL_URL``) — always for a user's command, which may be an agent harness.
    """

    def __init__(
        self,
        launch: Launch,
        case: Case,
        server: RunningServer,
        *,
        script: Script | None = None,
        env: str | None = None,
        default_env: str | None = None,
        deadline: float | None = None,
        extra_env: Mapping[str, str] | None = None,
        overrides: Mapping[str, str] | None = None,
        model: bool = True,
    ) -> None:
        self.case, self.server = case, server
        self.script = script if script is not None else case.script
        self.env = env if env is not None else server.env_name
        self.default_env = default_env if default_env is not None else case.default_env
        self.deadline = (deadline if deadline is not None else case.deadline) + launch.startup_s
        self.workdir = Path(tempfile.mkdtemp(prefix="orsbench-client-"))  # 0700: only this user reads the script and output
        script_path, self.out_path = self.workdir / "script.json", self.workdir / "out.jsonl"
        self.stdout_path, self.stderr_path = self.workdir / "stdout.log", self.workdir / "stderr.log"
        script_path.write_text(json.dumps(self.script.contract_json()))
        self.out_path.touch(mode=0o600)
        # A client may be an agent harness: its model is the script, registered with the scripted model
        # (``model=False``: a built-in target known to take none, so no scripted model is started for it).
        self.model = register_model(case, self.script) if model else None
        variables = case_environment(case, server.url, self.env, script_path, self.out_path, self.model)
        self.command = launch.shown(variables)
        self.server_error: str | None = None
        try:
            self.log_before = _request_log(server)[1]
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            self.log_before, self.server_error = 0, f"could not read the server's request log: {exc}"
        self.stats_before = _stats(server)
        self.requests_before = _requests(self.stats_before)
        self.terminate_on = case.terminate_on
        self.terminated: Termination | None = None
        self._terminate_from = _counter(self.stats_before, case.terminate_on)
        self.stopped_for: str | None = None
        self._next_look = 0.0
        self.started = time.monotonic()
        environ = {**(extra_env or {}), **variables, **(overrides or {})}
        self.process: ClientProcess = launch.start(environ, self.stdout_path, self.stderr_path, self.workdir)
        # A case with secrets: every command line of the client's process tree is read while it runs (§14.4).
        self.argv = ArgvWatch(self.process.pid, dict(case.secrets)) if case.secrets else None
        if self.argv is not None:
            self.argv.sample(force=True)

    @property
    def ends_by(self) -> float:
        """The monotonic time of its deadline."""
        return self.started + self.deadline

    def done(self) -> bool:
        """Whether the client ended, or has just been found past a bound (then :attr:`stopped_for` says which).

        In a case that ends the client mid-episode (``terminate_on``): SIGTERM once the server's counter moved, then
        done when no process of the client runs any more, or — SIGKILL sent — when the grace is over.
        """
        if self.terminated is not None:
            return self._ended_after_sigterm()
        if self.stopped_for is not None or self.process.poll() is not None:
            return True
        if self.argv is not None:
            self.argv.sample()
        now = time.monotonic()
        if now > self.ends_by:
            self.stopped_for = "deadline"
        elif now >= self._next_look:
            self._next_look = now + WATCH_SERVER_S
            stats = _stats(self.server)
            if self.terminate_on is not None and _counter(stats, self.terminate_on) > self._terminate_from:
                # The moment of the signal, not of the look: a call that began while the stats were read (the one
                # that moved the counter) began before the SIGTERM, and is held (checks.held_calls), not given up on.
                at = time.monotonic()
                self.process.signal_group(signal.SIGTERM)  # the call the server holds is in flight now
                self.terminated = Termination(sigterm_at=at, after_s=at - self.started, ttl_s=self.server.config.ttl)
                return False
            if _requests(stats) - self.requests_before > STORM_LIMIT:
                self.stopped_for = "request storm"
            elif _size(self.out_path) > OUT_LIMIT or max(_size(self.stdout_path), _size(self.stderr_path)) > STDIO_LIMIT:
                self.stopped_for = "output flood"
        return self.stopped_for is not None

    def _ended_after_sigterm(self) -> bool:
        ended = self.terminated
        assert ended is not None
        if ended.exited_after_s is not None or ended.killed:
            return True
        self.process.poll()  # reap the leader: an exited one is no longer counted
        now = time.monotonic()
        if not alive(self.process.pid):
            ended.exited_after_s = now - ended.sigterm_at
            return True
        if now - ended.sigterm_at >= ended.grace_s:
            self.process.signal_group(signal.SIGKILL)
            ended.killed = True
            return True
        return False

    def wait(self) -> CaseRun:
        """Watch the client until it ends or is stopped; collect it (the same as :meth:`finish`)."""
        return self.finish()

    def finish(self) -> CaseRun:
        """Wait until the client ends or meets a bound, stop its process group (it may have left children),
        read both ends, delete the directory."""
        while not self.done():
            time.sleep(POLL_S)
        if self.argv is not None:
            self.argv.sample(force=True)  # children the leader left behind, before they are stopped
        self.process.stop()
        duration = time.monotonic() - self.started
        run = CaseRun(
            self.case,
            self.script,
            self.command,
            url=self.server.url,
            env=self.env,
            default_env=self.default_env,
            exit_code=self.process.returncode,
            deadline=self.deadline,
            stopped_for=self.stopped_for,
            started_at=self.started,
            duration_s=duration,
            stdout=_tail(self.stdout_path),
            stderr=_tail(self.stderr_path),
            out=contract.read_out(self.out_path, OUT_LIMIT),
            extras=_extras(self.workdir),
            server_error=self.server_error,
            model=used(self.model.transcript()) if self.model is not None else None,
            argv=self.argv.seen() if self.argv is not None else None,
            terminated=self.terminated,
        )
        if self.model is not None:
            self.model.forget()
        try:
            entries, total = _request_log(self.server)
            skipped = max(0, total - len(entries))  # entries past the log's bound are counted, not kept
            run.log, run.requests_total = entries[max(0, self.log_before - skipped) :], total - self.log_before
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            run.server_error = run.server_error or f"could not read the server's request log: {exc}"
        after = _stats(self.server)
        if self.stats_before is not None and after is not None:
            run.stats = dict(server_stats.change(self.stats_before, after))
        if run.terminated is not None and after is not None and "tasks_running" in after:
            run.terminated.tasks_running = int(after["tasks_running"])
        shutil.rmtree(self.workdir, ignore_errors=True)
        return run


def register_model(case: Case, script: Script | None = None) -> ModelScript:
    """``script`` (the case's own by default) registered with this process's scripted model."""
    return register(script or case.script, per_reply=case.per_reply)


def used(transcript: dict[str, Any] | None) -> dict[str, Any] | None:
    """The scripted model's transcript when the client asked the model anything, else ``None``."""
    return transcript if transcript and transcript.get("requests") else None


def _counter(stats: Mapping[str, Any] | None, name: str | None) -> int:
    """One request counter of the server's (``"fault sigterm-mid-call"``); 0 where it has none."""
    return int(((stats or {}).get("requests") or {}).get(name, 0)) if name else 0


def _requests(stats: Mapping[str, Any] | None) -> int:
    # A cut stream counts twice (request and fault): a bound, not a tally.
    return int(sum((stats or {}).get("requests", {}).values()))


def _extras(workdir: Path) -> dict[str, Any]:
    try:
        value = json.loads((workdir / "extras.json").read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def play(launch: Launch, case: Case, server: RunningServer, **options: Any) -> CaseRun:
    """Run one client on ``case`` against ``server`` until it ends or is stopped (:class:`RunningCase`'s options)."""
    return RunningCase(launch, case, server, **options).wait()


def run_case(
    command: str | Launch,
    case: Case,
    timeout: float | None = None,
    *,
    impl: str = "mock",
    extra_env: Mapping[str, str] | None = None,
) -> CaseRun:
    """Serve ``case``, run the client against it (deadline: ``timeout`` or the case's own), collect both ends.

    ``command`` is a user's adapter command (run by ``/bin/sh``) or any :class:`Launch`; ``impl`` serves
    the case on another implementation (``sdk``, ``ors-sdk``: the SDK twins; a case with faults needs the
    mock); ``extra_env`` adds variables to the client's environment.
    """
    began = time.monotonic()
    launch = Command(command) if isinstance(command, str) else command
    try:
        server = start(case.scenario, impl=impl, config=case.config(), params=dict(case.params))
    except ServerStartError as exc:
        shown = command if isinstance(command, str) else launch.shown({})
        run = CaseRun(case, case.script, shown, deadline=timeout if timeout is not None else case.deadline)
        run.server_error = f"the case server did not start: {exc}"
        run.wall_s = time.monotonic() - began
        return run
    try:
        run = play(launch, case, server, deadline=timeout, extra_env=extra_env)
    finally:
        server.stop()
    run.wall_s = time.monotonic() - began
    return run
