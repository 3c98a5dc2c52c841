"""Run a client command on one case: serve it, run the command under a deadline, collect both ends.

The command runs through ``/bin/sh -c`` in a process group of its own, so a
deadline (or a request storm, or an output flood) ends the whole group —
a wrapper script and the client it started alike — with SIGTERM, then SIGKILL
after :data:`GRACE_S`. Its stdout and stderr are read by threads that keep
only the last :data:`TAIL_BYTES` of each; ``ORSBENCH_OUT`` is read back up to
:data:`OUT_LIMIT` bytes, and a command that writes more is stopped. While it
runs, the server's request count is watched: past :data:`STORM_LIMIT`
requests the command is stopped as a request storm. A case therefore always
ends within its deadline plus a few seconds, whatever the command does.

Secrets reach the command through its environment only (``ORSBENCH_SECRETS``),
never its command line, and are never written to the reports.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
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
from orsbench.servers.launch import RunningServer, ServerStartError, local_http, start
from orsbench.wire.redact import scrub

#: Bytes of stdout and of stderr kept (the tail).
TAIL_BYTES = 8192
#: A finding shows at most this many of the last lines of stderr, and this many characters of them.
STDERR_LINES, STDERR_CHARS = 20, 2000
#: Characters of each reported error a finding shows.
ERROR_CHARS = 500
#: Bytes of ``ORSBENCH_OUT`` read back; a command writing more is stopped.
OUT_LIMIT = 4 * 1024 * 1024
#: Requests after which a command is stopped as a request storm.
STORM_LIMIT = 2000
#: Seconds between SIGTERM and SIGKILL of the command's process group.
GRACE_S = 1.0
#: How often the command, its output and the server's request count are looked at.
POLL_S = 0.05
WATCH_SERVER_S = 0.25


class _Tail:
    """Keeps the last ``limit`` bytes read from a pipe, and how many were read in all."""

    def __init__(self, stream: Any, limit: int = TAIL_BYTES) -> None:
        self.stream, self.limit = stream, limit
        self.data = bytearray()
        self.total = 0
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = self.stream.read1(65536)
            except (OSError, ValueError):
                return
            if not chunk:
                return
            self.total += len(chunk)
            self.data += chunk
            if len(self.data) > self.limit:
                del self.data[: len(self.data) - self.limit]

    def text(self) -> str:
        self.thread.join(timeout=2)
        return bytes(self.data).decode("utf-8", errors="replace")


@dataclass
class CaseRun:
    """Everything one case produced, from both ends; :func:`orsbench.clientcheck.grade` judges it."""

    case: Case
    script: Script
    #: The command as run (placeholders filled in; never carries a secret).
    command: str
    url: str = ""
    env: str = ""
    exit_code: int | None = None
    #: Seconds the command was given.
    deadline: float = 0.0
    #: Why orsbench stopped the command: ``"deadline"``, ``"request storm"``, ``"output flood"`` (``None``: it ended).
    stopped_for: str | None = None
    started_at: float = 0.0
    duration_s: float = 0.0
    #: Seconds the case took in all (server start and stop included): the overhead is this minus ``duration_s``.
    wall_s: float = 0.0
    stdout: str = ""
    stderr: str = ""
    out: OutFile = field(default_factory=OutFile)
    #: The server's request log (:mod:`orsbench.servers.request_log`) entries, and how many requests it saw.
    log: list[dict[str, Any]] = field(default_factory=list)
    requests_total: int = 0
    stats: dict[str, Any] = field(default_factory=dict)
    #: The case server could not be started or read: orsbench's problem, not the client's.
    server_error: str | None = None

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


def script_json(script: Script) -> dict[str, Any]:
    """The ``ORSBENCH_SCRIPT`` document: ``{"calls": [{"tool", "input"}, ...]}`` (``pause_s`` where a step idles first)."""
    return {"calls": [{"tool": step.tool, "input": step.args, **({"pause_s": step.pause_s} if step.pause_s else {})} for step in script.steps]}


def case_environment(case: Case, url: str, env: str, script_path: Path, out_path: Path) -> dict[str, str]:
    """The variables of the contract (``docs/clients.md``) for one case, SDK variables included."""
    return {
        # The openreward SDK (and TRL, Inspect) find the case server by these; no network at run time.
        protocol.ENV_API_URL: url,
        protocol.ENV_SESSION_URL: url,
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
    }


def run_case(
    command: str,
    case: Case,
    timeout: float | None = None,
    *,
    impl: str = "mock",
    extra_env: Mapping[str, str] | None = None,
) -> CaseRun:
    """Serve ``case``, run ``command`` against it (deadline: ``timeout`` or the case's own), collect both ends.

    ``impl`` serves the case on another implementation (``sdk``, ``ors-sdk``: the SDK twins; a case
    with faults needs the mock); ``extra_env`` adds variables to the command's environment.
    """
    began = time.monotonic()
    script = case.script
    run = CaseRun(case, script, command, deadline=timeout if timeout is not None else case.deadline)
    try:
        server = start(case.scenario, impl=impl, config=case.config(), params=dict(case.params))
    except ServerStartError as exc:
        run.server_error = f"the case server did not start: {exc}"
        run.wall_s = time.monotonic() - began
        return run
    workdir = Path(tempfile.mkdtemp(prefix="orsbench-client-"))  # 0700: only this user reads the script and output
    try:
        run.url, run.env = server.url, server.env_name
        _play(run, server, workdir, run.deadline, extra_env or {})
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    run.wall_s = time.monotonic() - began
    return run


def _play(run: CaseRun, server: RunningServer, workdir: Path, deadline: float, extra_env: Mapping[str, str]) -> None:
    script_path, out_path = workdir / "script.json", workdir / "out.jsonl"
    script_path.write_text(json.dumps(script_json(run.script)))
    out_path.touch(mode=0o600)
    variables = case_environment(run.case, server.url, server.env_name, script_path, out_path)
    run.command = contract.expand(run.command, variables)
    done = execute(run.command, {**extra_env, **variables}, out_path, deadline, server)
    run.started_at, run.duration_s, run.stopped_for = done.started_at, done.duration_s, done.stopped_for
    run.exit_code, run.stdout, run.stderr, run.out = done.exit_code, done.stdout, done.stderr, done.out
    _read_server(run, server)


@dataclass
class Executed:
    """How one command run under :func:`execute` ended."""

    exit_code: int | None
    #: Why orsbench stopped it (``"deadline"``, ``"request storm"``, ``"output flood"``), ``None`` when it ended.
    stopped_for: str | None
    started_at: float
    duration_s: float
    stdout: str
    stderr: str
    out: OutFile


def execute(
    command: str, variables: Mapping[str, str], out_path: Path, deadline: float, server: RunningServer | None = None
) -> Executed:
    """Run ``command`` (``/bin/sh -c``, its own process group) with ``variables`` added to this environment.

    It is stopped at ``deadline`` seconds, on an output flood, and — when ``server`` is orsbench's own —
    on a request storm; ``out_path`` (``ORSBENCH_OUT``) is read back within :data:`OUT_LIMIT`. Shared by
    ``check-client`` (a case server) and ``matrix --url`` (the user's server: no storm count to read).
    """
    environ = {**os.environ, **variables}
    started = time.monotonic()
    process = subprocess.Popen(
        ["/bin/sh", "-c", command],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environ,
        start_new_session=True,  # its own process group: stopped as one
    )
    stdout, stderr = _Tail(process.stdout), _Tail(process.stderr)
    try:
        stopped_for = _watch(process, server, out_path, started + deadline)
    finally:
        _stop_group(process)
        duration = time.monotonic() - started
    return Executed(process.returncode, stopped_for, started, duration, stdout.text(), stderr.text(), contract.read_out(out_path, OUT_LIMIT))


def _watch(process: subprocess.Popen[bytes], server: RunningServer | None, out_path: Path, deadline: float) -> str | None:
    """Wait for the command; the reason orsbench stopped it early, or ``None`` when it ended by itself."""
    next_look = 0.0
    while process.poll() is None:
        now = time.monotonic()
        if now > deadline:
            return "deadline"
        if now >= next_look:
            next_look = now + WATCH_SERVER_S
            if server is not None and _requests_seen(server) > STORM_LIMIT:
                return "request storm"
            try:
                if out_path.stat().st_size > OUT_LIMIT:
                    return "output flood"
            except OSError:
                pass
        time.sleep(POLL_S)
    return None


def _requests_seen(server: RunningServer) -> int:
    try:
        stats = server.stats()
    except (httpx.HTTPError, ValueError):
        return 0
    return int(sum(stats.get("requests", {}).values()))  # a cut stream counts twice (request and fault): a bound, not a tally


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the command's process group, SIGKILL it after the grace period; reap the shell."""
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            process.wait(wait)
            # The shell is gone; children it left in the group may not be: SIGKILL them too.
            os.killpg(process.pid, signal.SIGKILL)
        except subprocess.TimeoutExpired:
            continue
        except (ProcessLookupError, PermissionError):
            pass
        break
    if process.poll() is None:
        process.wait(5)


def _read_server(run: CaseRun, server: RunningServer) -> None:
    try:
        response = local_http().get(server.url + protocol.REQUEST_LOG, timeout=30)
        response.raise_for_status()
        log = response.json()
        run.log, run.requests_total = log["entries"], int(log["total"])
        run.stats = server.stats()
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        run.server_error = f"could not read the case server's request log: {exc}"
