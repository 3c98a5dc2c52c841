"""Play one client's episode through its adapter, in a forked child with a hard deadline, and judge it from both ends.

The child runs exactly what ``python -m orsbench.clients.adapter NAME`` runs
(the adapter contract's variables set, the script in a file, one JSON line
per call appended to the out file), only forked from a parent that already
imported the client, so an episode starts in milliseconds instead of seconds.
The parent reads the out file (the client's view: what each call showed the
model, reward, finished, the error that ended it) and the server's
``/_orsbench/stats`` before and after (tools run, sessions left open,
statuses). The verdict is one of:

* ``survives`` — the script's reward and ``finished``, every text as the
  environment wrote it, each tool run exactly once, no session left open;
* ``fails clearly`` — an error that says what went wrong, and no wrong data
  taken as right;
* ``fails silently`` — no error, but the client ends with something the
  environment never said: a wrong or missing reward, a changed text, a tool run
  twice, a session left open;
* ``hangs`` — still going at the deadline; killed.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from orsbench.clients import adapter
from orsbench.clients.episodes import INDEX, SPLIT, Script
from orsbench.clients.fork import ForkedEpisode, forget_parent_ping_thread
from orsbench.clients.targets import CLIENT_TARGETS
from orsbench.clients.transcript import AdapterEpisode, environment, script_json
from orsbench.servers.launch import RunningServer

VERDICTS = ("survives", "fails clearly", "fails silently", "hangs")


@dataclass
class ClientOutcome:
    """One client's episode: what it reported under the adapter contract, and what the server saw meanwhile."""

    client: str
    #: The out file's lines, as the adapter wrote them.
    lines: list[dict[str, Any]] = field(default_factory=list)
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
    #: Why the episode is not a clean survival (empty when it is).
    problems: list[str] = field(default_factory=list)
    verdict: str = "survives"

    @property
    def survived(self) -> bool:
        return self.verdict == "survives"

    def describe(self) -> str:
        return (
            f"{self.client}: {self.verdict} {self.problems} reward={self.reward!r} finished={self.finished} "
            f"error={self.error!r} at {self.failed_at} {self.elapsed:.1f}s calls={self.calls} "
            f"requests={self.requests} left_open={self.sessions_left_open} outputs={[o[:80] for o in self.outputs]}"
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["outputs"] = [o[:200] for o in self.outputs]
        data.pop("tools_seen")
        data.pop("lines")
        return data

    def read(self, lines: list[dict[str, Any]]) -> None:
        """Fill the client's view from the adapter's JSON lines (a line that is not an object is an error)."""
        self.lines = lines
        for line in lines:
            if "error" in line:
                self.error, self.failed_at = str(line["error"]), line.get("stage")
                self.raised = bool(line.get("raised", True))
                break
            self.outputs.append(str(line.get("text", "")))
            if line.get("reward") is not None:
                self.reward = line["reward"]
            self.finished = self.finished or bool(line.get("finished"))


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The out file's JSON lines; a line that does not parse as an object becomes an error line saying so."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    out: list[dict[str, Any]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            line = None
        out.append(line if isinstance(line, dict) else {"error": f"line {number} of the out file is not a JSON object: {raw[:120]!r}"})
    return out


def _child(client: str, environ: dict[str, str], prepare: Callable[[], None] | None, conn: Connection) -> None:
    started = time.monotonic()
    os.environ.update(environ)
    forget_parent_ping_thread()
    if prepare is not None:
        prepare()
    episode = AdapterEpisode.from_environment(os.environ)
    code = adapter.play(client, episode)
    episode.close()
    report = {"exit": code, "seconds": time.monotonic() - started, "tools_seen": episode.extras.get("tools_seen", [])}
    try:
        conn.send(report)
    except Exception:  # noqa: BLE001 - an unpicklable value must not lose the outcome
        conn.send({"exit": code, "seconds": report["seconds"]})
    conn.close()
    os._exit(0)  # skip atexit: the SDK's loop threads would otherwise delay the exit


class ClientRun(ForkedEpisode):
    """One client episode under way in a forked child; :meth:`finish` collects it (at its deadline at the latest).

    ``prepare`` runs in the child before the client starts (a test scaling a client's own timers).
    """

    def __init__(
        self,
        client: str,
        server: RunningServer,
        script: Script,
        deadline: float = 30.0,
        *,
        secrets: Mapping[str, str] | None = None,
        prepare: Callable[[], None] | None = None,
    ) -> None:
        self.client, self.script = client, script
        self.workdir = Path(tempfile.mkdtemp(prefix="orsbench-client-"))
        script_path, self.out_path = self.workdir / "script.json", self.workdir / "out.jsonl"
        script_path.write_text(script_json(script.adapter_calls()))
        environ = environment(server.url, server.env_name, SPLIT, INDEX, str(script_path), str(self.out_path), secrets)
        super().__init__(server, _child, (client, environ, prepare), deadline + CLIENT_TARGETS.get(client).startup_s)

    def finish(self, settle: float = 0.0) -> ClientOutcome:
        got = self.collect(join_s=5.0, settle=settle)
        outcome = ClientOutcome(self.client, elapsed=got.elapsed, hung=got.result is None)
        outcome.read(read_lines(self.out_path))
        shutil.rmtree(self.workdir, ignore_errors=True)
        result = got.result
        if result is not None:
            if "error" in result and outcome.error is None:  # the child died before it could write a line
                outcome.error = str(result["error"])
            outcome.elapsed = result.get("seconds", got.elapsed)
            outcome.tools_seen = result.get("tools_seen", [])
        outcome.calls, outcome.requests, outcome.statuses = got.calls, got.requests, got.statuses
        outcome.sessions_left_open = got.sessions_left_open
        judge(outcome, self.script)
        return outcome


def judge(outcome: ClientOutcome, script: Script) -> None:
    """Fill ``problems`` and ``verdict`` (see the module docstring)."""
    problems: list[str] = []
    if outcome.sessions_left_open > 0:
        problems.append(f"{outcome.sessions_left_open} session(s) left open")
    over = {t: n for t, n in outcome.calls.items() if n > script.calls.get(t, 0)}
    if over:
        problems.append(f"tools run more often than called: {over} (script: {script.calls})")
    if outcome.hung:
        outcome.verdict = "hangs"
    elif outcome.error is not None:
        if outcome.reward is not None and outcome.reward != script.reward:
            problems.append(f"reward {outcome.reward!r} kept after the failure")
        outcome.verdict = "fails silently" if over else "fails clearly"
    else:
        for step, text in zip(script.steps, outcome.outputs):
            if step.expect is not None and text != step.expect:
                problems.append(f"{step.tool} showed {text[:60]!r}... ({len(text)} chars), the environment said {step.expect[:60]!r}... ({len(step.expect)} chars)")
        if script.reward is not None and (type(outcome.reward) is bool or outcome.reward != script.reward):
            problems.append(f"reward {outcome.reward!r}, the environment gave {script.reward!r}")
        if outcome.finished != script.finished:
            problems.append(f"finished={outcome.finished}, the environment said {script.finished}")
        if outcome.calls != script.calls:
            problems.append(f"server ran {outcome.calls}, the script called {script.calls}")
        outcome.verdict = "fails silently" if problems else "survives"
    if outcome.verdict == "fails clearly" and outcome.sessions_left_open > 0:
        outcome.verdict = "fails silently"
    outcome.problems = problems


def play(client: str, server: RunningServer, script: Script, deadline: float = 30.0, **options: Any) -> ClientOutcome:
    return ClientRun(client, server, script, deadline, **options).finish()
