"""Play one client's episode in a forked child with a hard deadline, and judge it from both ends.

The child gets the client's view (what each call showed the model, reward,
finished, the exception that ended it); the parent reads the server's
``/_orsbench/stats`` before and after (tools run, sessions left open, statuses).
The verdict is one of:

* ``survives`` — the script's reward and ``finished``, every text as the
  environment wrote it, each tool run exactly once, no session left open;
* ``fails clearly`` — an exception (or TRL's ``"Error: ..."`` text) that says
  what went wrong, and no wrong data taken as right;
* ``fails silently`` — no error, but the client ends with something the
  environment never said: a wrong or missing reward, a changed text, a tool run
  twice, a session left open;
* ``hangs`` — still going at the deadline; killed.
"""

from __future__ import annotations

import os
import time
import traceback
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from orsbench.clients.drivers import CLIENTS, point_at
from orsbench.clients.episodes import Script
from orsbench.clients.fork import ForkedEpisode, forget_parent_ping_thread
from orsbench.servers.launch import RunningServer

VERDICTS = ("survives", "fails clearly", "fails silently", "hangs")


@dataclass
class Outcome:
    client: str
    outputs: list[str] = field(default_factory=list)
    reward: Any = None
    finished: bool = False
    error: str | None = None
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

    def describe(self) -> str:
        return (
            f"{self.client}: {self.verdict} {self.problems} reward={self.reward!r} finished={self.finished} "
            f"error={self.error!r} at {self.failed_at} {self.elapsed:.1f}s calls={self.calls} "
            f"left_open={self.sessions_left_open} outputs={[o[:80] for o in self.outputs]}"
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["outputs"] = [o[:200] for o in self.outputs]
        data.pop("tools_seen")
        return data


def _child(client: str, url: str, env: str, script: Script, conn: Connection) -> None:
    started = time.monotonic()
    os.environ.update(point_at(url))
    forget_parent_ping_thread()
    out: dict[str, Any] = {"outputs": [], "reward": None, "finished": False, "failed_at": None}
    try:
        CLIENTS[client].play(url, env, script, out)
    except BaseException as exc:  # noqa: BLE001 - the outcome is the point
        out["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        out["traceback"] = traceback.format_exc()[-3000:]
    out["seconds"] = time.monotonic() - started
    try:
        conn.send(out)
    except Exception as exc:  # noqa: BLE001 - an unpicklable value must not lose the outcome
        conn.send({k: v for k, v in out.items() if k in ("outputs", "failed_at", "seconds")} | {"error": repr(exc)})
    conn.close()
    os._exit(0)  # skip atexit: the SDK's loop threads would otherwise delay the exit


class Running(ForkedEpisode):
    """One episode under way in a forked child; :meth:`finish` collects it (at its deadline at the latest)."""

    def __init__(self, client: str, server: RunningServer, script: Script, deadline: float = 30.0) -> None:
        self.client, self.script = client, script
        args = (client, server.url, server.env_name, script)
        super().__init__(server, _child, args, deadline + CLIENTS[client].startup_s)

    def finish(self, settle: float = 0.0) -> Outcome:
        got = self.collect(join_s=5.0, settle=settle)
        outcome = Outcome(self.client, elapsed=got.elapsed, hung=got.result is None)
        result = got.result
        if result is not None:
            outcome.outputs = [str(o) for o in result.get("outputs", [])]
            outcome.reward, outcome.finished = result.get("reward"), bool(result.get("finished"))
            outcome.error, outcome.failed_at = result.get("error"), result.get("failed_at")
            outcome.elapsed = result.get("seconds", got.elapsed)
            outcome.tools_seen = result.get("tools_seen", [])
        outcome.calls, outcome.requests, outcome.statuses = got.calls, got.requests, got.statuses
        outcome.sessions_left_open = got.sessions_left_open
        judge(outcome, self.script)
        return outcome


def judge(outcome: Outcome, script: Script) -> None:
    """Fill ``problems`` and ``verdict`` (see the module docstring)."""
    problems: list[str] = []
    if outcome.sessions_left_open > 0:
        problems.append(f"{outcome.sessions_left_open} session(s) left open")
    over = {t: n for t, n in outcome.calls.items() if n > script.calls.get(t, 0)}
    if over:
        problems.append(f"tools run more often than called: {over} (script: {script.calls})")
    errors = [o for o in outcome.outputs if o.startswith("Error: ")]
    if outcome.hung:
        outcome.verdict = "hangs"
    elif outcome.error is not None or errors:
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


def play(client: str, server: RunningServer, script: Script, deadline: float = 30.0) -> Outcome:
    return Running(client, server, script, deadline).finish()
