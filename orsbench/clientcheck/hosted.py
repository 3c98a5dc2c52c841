"""``orsbench check-client --hosted``: every case served at once, each under its own base URL, graded as played.

``check-client --cmd`` starts the client itself. The clients that matter most cannot be started
that way — a trainer's rollout workers on Ray or Slurm, a notebook, an eval service on another
box — so this serves every case in one long-lived process (Autobahn's fuzzing server does the
same for WebSocket clients) and grades whatever connects:

* each case is a mock engine of its own (its scenario, faults and knobs, as ``check-client``
  serves it) on a port of its own, ``http://HOST:PORT+1+i`` for the i-th case: a base URL any ORS
  client takes. (Not a path prefix: the openreward SDK — and so TRL and platoon — joins its absolute
  paths to an aiohttp ``base_url``, which keeps the origin only: ``/<case>/create_session`` would lose
  ``/<case>``.) All ports are one server, one process, one event loop: a request's case is the local
  port it came in on (``scope["server"]``);
* ``GET /_orsbench/cases`` (on the first port, and on every case's) answers the manifest — per case its ``url``, ``env``, ``split``,
  ``index``, ``script`` (``{"calls": [...]}``, the adapter contract's), ``secrets`` and ``deadline_s``;
* each client session on a case is filed on its own (:mod:`.attribution`: several clients at once,
  a GRPO group's episodes of one case) and graded when it ends — deleted, reaped by the engine, or
  past the case's deadline — by every client check that needs nothing but traffic; a client that
  also posts its contract lines to ``<case url>/_orsbench/out`` (``X-Session-ID`` naming its
  session) gets the checks of what it reported too;
* ``GET /_orsbench/report`` answers the report so far; the run is over when every case has been
  played (and nothing arrived for :data:`DONE_GRACE_S`), and :meth:`HostedServer.report` gives the
  final one: per case and check the worst verdict over its sessions (:mod:`.live`), and for a case
  nobody played one skip per check, saying so.

One event loop owns all state (requests, the sweeper, the report routes), so nothing is locked.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from orsbench import protocol
from orsbench.checks.evidence import Options
from orsbench.checks.model import CheckResult, Status
from orsbench.checks.runner import Report
from orsbench.clientcheck.attribution import UNOPENED_S, Attributor, Episode
from orsbench.clientcheck.cases import Case
from orsbench.clientcheck.checks import ClientCheck, expects_error
from orsbench.clientcheck.contract import OutFile, parse_line
from orsbench.clientcheck.judgement import judge
from orsbench.clientcheck.live import Judgements, Tallies, grade_episode, label, not_reported, report_checks, traffic_checks
from orsbench.clientcheck.runner import CaseRun
from orsbench.clientcheck.traffic import seen_of, session_of
from orsbench.config import ServerConfig, effective_config
from orsbench.scenarios import get_scenario
from orsbench.servers.app import url_of
from orsbench.servers.engine import finished_error
from orsbench.servers.http import Message, Receive, Scope, Send, read_body, run_lifespan, send_json, session_id
from orsbench.servers.implementations import mock_engine
from orsbench.servers.request_log import RequestLog
from orsbench.verdict import Judgement
from orsbench.wire.evidence import Exchange
from orsbench.wire.observe import Observer, Observing

#: The server's own routes (the out route on a case's port).
CASES_PATH, REPORT_PATH, OUT_PATH = "/_orsbench/cases", "/_orsbench/report", "/_orsbench/out"
#: Seconds between sweeps (deadlines, reaped sessions, idle connections, the end of the run).
SWEEP_S = 0.25
#: Once every case has been played, the run waits this long without a request or a line before it ends.
DONE_GRACE_S = 2.0
#: Seconds after which a session the engine never opened, or a connection's sessionless requests, end.
IDLE_S = 5.0
#: Bytes of contract lines kept per session.
OUT_LIMIT = 1024 * 1024
#: Ended sessions whose traffic is kept to grade again when contract lines arrive after the end.
RETAINED = 2_000
#: Requests kept per session (a storm is counted past it).
MAX_REQUESTS = 2_000

#: The statuses that are a verdict on a session (a skip or no result is none).
_JUDGED = frozenset({Status.PASS, Status.FAIL, Status.WARN, Status.ERROR})
#: Distinct reasons kept per check for sessions it did not judge (the rest are "other reasons").
_REASONS = 8

Graded = Callable[[str, "GradedSession"], None]


@dataclass
class GradedSession:
    """One ended session of a case and its verdicts."""

    key: str
    label: str
    #: Why it ended (``deleted``, ``reaped by the server``, past its deadline, ...).
    ended: str
    results: list[CheckResult]
    requests: int
    duration_s: float
    #: Its traffic, while retained (a contract line arriving later grades it again).
    episode: Episode | None = None
    #: Its one verdict (:func:`~orsbench.clientcheck.judgement.judge` on what was seen of it).
    judgement: Judgement | None = None


class HostedCase(Observing):
    """One case served under ``/<case>``: its engine, its sessions, their verdicts.

    It observes its engine's traffic (:mod:`orsbench.wire.observe`) through a request-log tap, as
    the proxy's client grader observes what the proxy forwards: the same exchanges, the same attribution.
    """

    def __init__(self, case: Case, on_graded: Graded | None = None, observers: Sequence[Observer] = ()) -> None:
        """``observers``: told of this case's traffic after the case itself, as a proxy tells its list."""
        self.case = case
        self.on_graded = on_graded
        scenario = get_scenario(case.scenario, **dict(case.params))
        config = case.config(params=dict(case.params)).replace(request_log=False)  # this server taps traffic itself
        defaults = ServerConfig()
        explicit = {name for name, value in vars(config).items() if value != getattr(defaults, name)}
        config = effective_config(scenario, config, explicit)  # as `orsbench serve` applies it to a case's config
        self.engine, app = mock_engine([scenario], config)
        self.env = scenario.name
        #: Its port and base URL, once the server is bound (:meth:`HostedServer.assign`).
        self.port: int | None = None
        self.url = ""
        self.engine.hooks.after_tool.append(self._ran)
        self.engine.hooks.may_reap.append(self._reaping)
        #: Sessions the engine's reaper took (idle past the TTL): ended at the next sweep.
        self._reaped: set[str] = set()
        #: Tool runs per session id, as the engine counts them (what ``client.tool_runs`` compares with the script).
        self.tool_runs: dict[str, Counter[str]] = {}
        self.attributor = Attributor(self._ended, max_requests=MAX_REQUESTS, idle_s=IDLE_S, unopened_s=UNOPENED_S)
        self.app = RequestLog(app, keep=False, observers=[self, *observers])
        #: Contract lines posted per episode (a session id; a refused connection's key).
        self.lines: dict[str, list[str]] = {}
        #: Lines posted, naming no session, before the case had any episode: the first one to end takes them.
        self._unclaimed: list[str] = []
        #: Whether an episode took the lines posted before any session was known (one client per case: one takes them).
        self._claimed = False
        self._line_bytes: Counter[str] = Counter()
        self.graded: list[GradedSession] = []
        self._by_key: dict[str, GradedSession] = {}
        self._retained: list[str] = []
        #: Per check, the sessions it gave a verdict (pass, fail, warn, error) and why the others got none: under
        #: load a session can end before its traffic shows what a check reads, and it must be counted, not lost.
        self.judged: Counter[str] = Counter()
        self.not_judged: dict[str, Counter[str]] = {}
        self.requests = 0
        self.last_activity = 0.0

    # -- traffic ------------------------------------------------------------------------------
    def _ran(self, session: Any, tool: str, outcome: tuple[str, str]) -> None:
        if outcome != ("end", finished_error(tool)):  # a call refused by the finish latch did not run
            self.tool_runs.setdefault(session.sid, Counter())[tool] += 1

    def _reaping(self, session: Any) -> bool:
        self._reaped.add(session.sid)
        return True  # the reaper's own rule decides; this only learns which sessions it takes

    def started(self, exchange: Exchange, path: str) -> None:
        """A request to this case's engine began (the observer's first half)."""
        self.requests += 1
        self.last_activity = time.monotonic()
        self.attributor.started(exchange.peer, exchange.started_at, path, session_of(exchange))

    def ended(self, exchange: Exchange, path: str) -> None:
        """Its answer ended: filed under its session."""
        self.last_activity = time.monotonic()
        self.attributor.seen(seen_of(exchange, path))

    def sweep(self, now: float) -> None:
        """End what is over: sessions past the deadline or reaped by the engine's TTL reaper; idle connections.

        A session the engine lost otherwise (a restart fault) is not over: its client may still delete it.
        """
        self.attributor.sweep(now)
        for key, episode in list(self.attributor.open.items()):
            if now - episode.started_at > self.case.deadline:
                self.attributor.end(key, f"still open at its {self.case.deadline:g} s deadline")
        for sid in [sid for sid in self._reaped if sid not in self.engine.sessions]:
            self._reaped.discard(sid)
            self.attributor.end(sid, f"reaped by the server, idle past its {self.engine.config.ttl:g} s TTL")

    # -- grading ------------------------------------------------------------------------------
    def checks_for(self, episode: Episode) -> list[ClientCheck]:
        """The traffic's checks; the report's too when the client posted its contract lines."""
        return traffic_checks() + (report_checks() if episode.key in self.lines else [])

    def run_of(self, episode: Episode) -> CaseRun:
        """What check-client knows of a run, for one live session: its case, its lines, the engine's tool runs."""
        raw = self.lines.get(episode.key, [])
        out = OutFile([parse_line(n, line) for n, line in enumerate(raw, 1) if line.strip()], self._line_bytes[episode.key], bool(raw))
        return CaseRun(
            self.case,
            self.case.script.once(),  # each session is one run of the case (its manifest's ``runs`` say how many a process plays)
            f"(hosted) {label(episode)}",
            url=self.url,
            env=self.env,
            default_env=self.case.default_env,
            deadline=self.case.deadline,
            started_at=episode.started_at,
            duration_s=episode.last_at - episode.started_at,
            out=out,
            requests_total=episode.total,
            stats={"calls": dict(self.tool_runs.get(episode.sid or "", {}))},
            watched=False,
        )

    def grade(self, episode: Episode, checks: list[ClientCheck] | None = None) -> list[CheckResult]:
        """The verdicts of the checks on one session; with no contract lines posted, a skip for each check of the report
        (not judged, never a pass: a client that took NaN for a reward shows no green row for it)."""
        results = grade_episode(episode, checks if checks is not None else self.checks_for(episode), self.run_of(episode))
        if checks is None and episode.key not in self.lines:
            results += not_reported(report_checks(), f"{self.url}{OUT_PATH}")
        return results

    def judge(self, episode: Episode, results: list[CheckResult]) -> Judgement:
        """The session's one verdict, as check-client's for the same case (what was not seen is said).

        With no report posted, the traffic still shows an episode cut short in a case a correct client plays to its end
        (a client that crashed on its first 503): that is judged, never taken for a working client.
        """
        run = self.run_of(episode)
        seen: list[str] = []
        if episode.key not in self.lines and not expects_error(run):
            made, steps = episode.traffic().made, run.script.steps
            if len(made) < len(steps) and not (made and made[-1].finished):
                seen.append(f"the episode stopped after {len(made)} of {len(steps)} scripted call(s) in a case a correct client plays to its end")
        return judge(run, results, subject=label(episode), seen=seen)

    def _ended(self, episode: Episode) -> None:
        # The case's one client, done. Its lines are its opened session's once no other session it opened is still
        # open (one handed out but never opened — a /create that failed, waiting out UNOPENED_S — or a refused
        # connection is not the episode it reports on); a client that never got a session gives them to its only episode.
        opened_alone = episode.opened and not any(e.opened for e in self.attributor.open.values())
        if self._unclaimed and not self._claimed and (opened_alone or (not self.attributor.open and not self.graded)):
            self._claimed = True
            self.lines[episode.key], self._unclaimed = self._unclaimed, []
            self._line_bytes[episode.key] = sum(len(line.encode()) + 1 for line in self.lines[episode.key])
        results = self.grade(episode)
        graded = GradedSession(
            episode.key,
            label(episode),
            episode.ended or "",
            results,
            episode.total,
            episode.last_at - episode.started_at,
            episode,
            self.judge(episode, results),
        )
        self.graded.append(graded)
        self._account(episode, graded.results)
        self._by_key[episode.key] = graded
        self._retained.append(episode.key)
        if len(self._retained) > RETAINED:  # its verdicts stay; its traffic goes
            dropped = self._by_key[self._retained.pop(0)]
            dropped.episode = None
            self.tool_runs.pop(dropped.key, None)
        if self.on_graded is not None:
            self.on_graded(self.case.name, graded)

    def _account(self, episode: Episode, results: list[CheckResult]) -> None:
        """Count, per traffic check, whether this session got a verdict from it, and if not, why not."""
        verdicts = {r.id: r for r in results}
        for check in traffic_checks():
            result = verdicts.get(check.id)
            if result is not None and result.status in _JUDGED:
                self.judged[check.id] += 1
                continue
            if result is not None:  # skipped: its own words say why (a check it depends on failed, ...)
                why = result.message.splitlines()[0][:200] if result.message else result.status.value
            else:
                why = f"its traffic held nothing the check reads (the session ended: {episode.ended or 'open'})"
            reasons = self.not_judged.setdefault(check.id, Counter())
            reasons[why if why in reasons or len(reasons) < _REASONS else "other reasons"] += 1

    def ungraded(self) -> dict[str, dict[str, Any]]:
        """Per check that judged some session of this case: the sessions it gave no verdict, and why.

        A check that judged none (one this case never provokes, as ``client.retry_after`` without a
        retryable answer) is left out: it has nothing to count.
        """
        total = len(self.graded)
        return {
            check_id: {"sessions": total - self.judged[check_id], "why": dict(self.not_judged.get(check_id, {}))}
            for check_id in self.judged
            if self.judged[check_id] < total
        }

    def add_lines(self, key: str | None, text: str) -> int:
        """Contract lines a client posted for episode ``key`` (a session id); one already graded is graded again.

        ``None``: the case has no episode yet (a client refused before it got a session, whose requests
        still wait for their idle end): the first episode to end takes them, if it is the only one.
        """
        lines = text.splitlines()
        self.last_activity = time.monotonic()
        if key is None:
            self._unclaimed.extend(lines)
            return len(lines)
        self.lines.setdefault(key, []).extend(lines)
        self._line_bytes[key] += len(text.encode())
        graded = self._by_key.get(key)
        if graded is not None and graded.episode is not None:
            graded.results = self.grade(graded.episode)
            graded.judgement = self.judge(graded.episode, graded.results)
        return len(lines)

    def line_bytes(self, key: str | None) -> int:
        return self._line_bytes[key] if key is not None else sum(len(line) + 1 for line in self._unclaimed)

    def knows(self, key: str) -> bool:
        return key in self.attributor.open or key in self._by_key

    def opened_episodes(self) -> list[str]:
        """The episodes of this case the engine opened (a ``/create`` that succeeded), open or ended: what a client's
        unnamed contract lines report on, where a session it was handed but never opened (a failed setup) is beside it."""
        graded = [key for key, g in self._by_key.items() if g.episode is not None and g.episode.opened]
        return [*(key for key, e in self.attributor.open.items() if e.opened), *graded]

    def episodes(self) -> list[str]:
        """Every episode this case has seen, open or ended: session ids, and connections that never got a session."""
        return [*self.attributor.open, *self._by_key]

    @property
    def played(self) -> bool:
        return bool(self.graded)

    def results(self, *, final: bool) -> list[CheckResult]:
        """One result per check over this case's sessions (open ones as they stand, in a live report)."""
        if not self.graded and (final or not self.attributor.open):
            return [self._unplayed(check) for check in traffic_checks()]
        tallies = Tallies()
        for graded in self.graded:
            tallies.add(self.case.name, f"{graded.label} ({graded.ended})" if graded.ended != "deleted" else graded.label, graded.results)
        if not final:
            live = [c for c in traffic_checks() if c.id != "client.session_deleted"]
            for episode in self.attributor.open.values():
                checks = live + (report_checks() if episode.key in self.lines else [])
                tallies.add(self.case.name, label(episode) + " (still open)", self.grade(episode, checks))
        results = tallies.results([self.case.name])
        ungraded = self.ungraded()
        for result in results:
            missing = ungraded.get(result.id.rsplit("[", 1)[0])
            if missing:
                why = "; ".join(f"{n} {reason}" for reason, n in missing["why"].items())
                result.message += f" — {missing['sessions']} of {len(self.graded)} sessions not judged: {why}"
                result.measured = {**result.measured, "not_judged": missing["sessions"], "not_judged_why": missing["why"]}
        return results

    def verdicts(self) -> list[Judgement]:
        """The verdicts of this case's ended sessions: one judgement per verdict, with how many sessions got it."""
        judged = Judgements()
        for graded in self.graded:
            if graded.judgement is not None:
                judged.add(self.case.name, graded.judgement)
        return judged.cases()

    def _unplayed(self, check: ClientCheck) -> CheckResult:
        return CheckResult(
            id=f"{check.id}[{self.case.name}]",
            title=check.title,
            status=Status.SKIP,
            severity=check.severity,
            message=f"not judged: nobody played this case (no session at {self.url})",
            measured={"sessions": 0},
            evidence=[],
            remediation=check.remediation,
            spec=f"docs/protocol.md {check.spec}",
        )

    def manifest(self, host: str | None = None) -> dict[str, Any]:
        """This case's entry of the manifest; ``host``: the name the client reached the server by."""
        case = self.case
        return {
            "case": case.name,
            "url": url_of(host, self.port) if host and self.port is not None else self.url,
            "env": self.env,
            "split": case.split,
            "index": case.index,
            "script": case.script.contract_json(),
            "secrets": dict(case.secrets),
            "deadline_s": case.deadline,
            # Times one process plays the script (ORSBENCH_RUNS, §13.16): each run a session of its own, each graded.
            "runs": case.runs,
            # Episodes each run plays, tasks index onwards (ORSBENCH_EPISODES, §13.15); each session graded as one.
            "episodes": case.episodes,
            "expect": case.expect,
            "summary": case.summary,
        }


class HostedServer:
    """The ASGI app of ``check-client --hosted``: each case's port to its engine; the manifest, the lines, the report."""

    def __init__(
        self, cases: list[Case], *, on_graded: Graded | None = None, strict: bool = False, observers: Sequence[Observer] = ()
    ) -> None:
        """``strict``: a case nobody played fails the run (its skips count as required checks not run); ``observers``:
        told of every case's traffic too (:mod:`orsbench.wire.observe`), each after the case's own grading."""
        if not cases:
            raise ValueError("no case to host")
        self.cases = {case.name: HostedCase(case, on_graded, observers) for case in cases}
        self._by_port: dict[int, HostedCase] = {}
        self.base_url = ""
        self.started_at = datetime.now(UTC).isoformat(timespec="seconds")
        self._began = time.monotonic()
        self._done: asyncio.Event | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._lifespans: list[tuple[asyncio.Task[None], asyncio.Queue[Message], asyncio.Queue[Message]]] = []
        self.closed = False
        self.options = Options(strict=strict)

    def ports(self, first: int) -> list[int]:
        """The ports to bind after ``first`` (the manifest's): one per case, ``first + 1 + i``; all free ones for 0."""
        return [first + 1 + i if first else 0 for i in range(len(self.cases))]

    def assign(self, host: str, ports: list[int]) -> None:
        """The ports bound: the first serves the manifest and the report, the next ones each case in order."""
        self.base_url = url_of(host, ports[0])
        for hosted, port in zip(self.cases.values(), ports[1:], strict=True):
            hosted.port, hosted.url = port, url_of(host, port)
            self._by_port[port] = hosted

    # -- ASGI ---------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        server = scope.get("server")
        hosted = self._by_port.get(server[1]) if server else None
        if path == CASES_PATH and method == "GET":
            host = _host(scope)
            await send_json(send, 200, [case.manifest(host) for case in self.cases.values()])
        elif path == REPORT_PATH and method == "GET":
            await _send_raw(send, 200, orjson.dumps(self.report(final=False).to_json(), default=str))
        elif hosted is not None:
            if path == OUT_PATH:
                await self._out(hosted, scope, receive, send)
            else:
                await hosted.app(scope, receive, send)
        elif path == protocol.HEALTH:
            await send_json(send, 200, {"status": "ok"})
        else:
            await send_json(send, 404, {"detail": f"this port serves the manifest: GET {CASES_PATH} lists the cases and their URLs"})

    async def _out(self, hosted: HostedCase, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            await send_json(send, 405, {"detail": "POST contract lines (JSON lines, as the adapter contract writes them)"})
            return
        sid = session_id(scope)
        key: str | None = sid
        if not sid:  # one client on the case: its lines are its only episode's (a session, or a refused connection)
            known = hosted.opened_episodes() or hosted.episodes()  # a session it opened, before one it never did
            if len(known) > 1:
                await send_json(send, 400, {"detail": f"case {hosted.case.name!r} has {len(known)} sessions: name yours with {protocol.SESSION_HEADER}"})
                return
            key = known[0] if known else None
        elif not hosted.knows(sid):
            await send_json(send, 404, {"detail": f"case {hosted.case.name!r} has no session {sid!r}"})
            return
        body, _ = await read_body(receive, limit=OUT_LIMIT)
        if hosted.line_bytes(key) + len(body) > OUT_LIMIT:
            await send_json(send, 413, {"detail": f"more than {OUT_LIMIT} bytes of contract lines for one session"})
            return
        count = hosted.add_lines(key, body.decode("utf-8", "replace"))
        await send_json(send, 200, {"session": key, "lines": count})

    # -- lifespan, sweeping, the end of the run ----------------------------------------------
    async def _lifespan(self, receive: Receive, send: Send) -> None:
        async def startup() -> None:
            for hosted in self.cases.values():
                self._lifespans.append(await _start(hosted.app))
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever())

        async def shutdown() -> None:
            self.close()
            for task, inbox, outbox in self._lifespans:
                await inbox.put({"type": "lifespan.shutdown"})
                await outbox.get()
                await task

        await run_lifespan(receive, send, startup, shutdown)

    def _event(self) -> asyncio.Event:
        if self._done is None:
            self._done = asyncio.Event()
        return self._done

    async def _sweep_forever(self) -> None:
        while not self.closed:
            await asyncio.sleep(SWEEP_S)
            now = time.monotonic()
            for hosted in self.cases.values():
                hosted.sweep(now)
            if self.finished(now):
                self._event().set()

    def finished(self, now: float) -> bool:
        """Every case played, no session open, and nothing arrived for :data:`DONE_GRACE_S`."""
        return all(
            h.played and not h.attributor.open and not h.attributor.waiting and now - h.last_activity > DONE_GRACE_S
            for h in self.cases.values()
        )

    async def wait(self, duration: float | None = None) -> None:
        """Until every case has been played, or ``duration`` seconds (the ``until`` of ``serve_forever``)."""
        try:
            await asyncio.wait_for(self._event().wait(), duration)
        except asyncio.TimeoutError:
            pass

    def close(self) -> None:
        """End the run: every session still open is graded as left open."""
        if self.closed:
            return
        self.closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        for hosted in self.cases.values():
            hosted.attributor.close()

    # -- the report --------------------------------------------------------------------------------
    def report(self, *, final: bool = True) -> Report:
        """The client checks per case; ``final`` ends the run's open sessions first."""
        if final:
            self.close()
        report = Report(target=f"check-client --hosted {self.base_url}", options=self.options, started_at=self.started_at)
        for hosted in self.cases.values():
            report.results.extend(hosted.results(final=final))
            report.cases.extend(hosted.verdicts())
        report.exchanges = sum(h.requests for h in self.cases.values())
        report.duration_s = time.monotonic() - self._began
        return report

    def summary(self) -> dict[str, Any]:
        """Sessions graded per case, and what could not be attributed (several clients at once)."""
        return {
            name: {
                "sessions": len(h.graded),
                "requests": h.requests,
                "unattributed": h.attributor.unattributed,
                "late": h.attributor.late,
                "ungraded": h.ungraded(),
            }
            for name, h in self.cases.items()
        }


def _host(scope: Scope) -> str | None:
    """The host name a client reached the server by (its ``Host`` header less the port), if it sent one."""
    value = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"host"), None)
    if not value:
        return None
    if value.startswith("["):  # [::1]:8123
        return value[1 : value.index("]")] if "]" in value else None
    return value.rsplit(":", 1)[0]


async def _send_raw(send: Send, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


async def _start(app: Any) -> tuple[asyncio.Task[None], asyncio.Queue[Message], asyncio.Queue[Message]]:
    """Run ``app``'s lifespan startup (its reaper, its faults' timers) and keep it for the shutdown."""
    inbox: asyncio.Queue[Message] = asyncio.Queue()
    outbox: asyncio.Queue[Message] = asyncio.Queue()
    task = asyncio.get_running_loop().create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, inbox.get, outbox.put))
    await inbox.put({"type": "lifespan.startup"})
    answer = await outbox.get()
    if answer["type"] != "lifespan.startup.complete":
        raise RuntimeError(f"a case server did not start: {answer}")
    return task, inbox, outbox


def manifest_table(manifest: list[dict[str, Any]]) -> str:
    """The manifest as the terminal shows it: a row per case, and under it the one line that plays it."""
    rows = [f"{'case':<34} {'env':<18} {'task':<10} {'calls':>5} {'deadline':>8}  a correct client"]
    for entry in manifest:
        outcome = "finishes" if entry["expect"] == "finish" else "reports an error"
        task = f"{entry['split']}/{entry['index']}"
        rows.append(
            f"{entry['case']:<34} {entry['env']:<18} {task:<10} {len(entry['script']['calls']):>5} {entry['deadline_s']:>6g} s  {outcome}"
        )
        calls = ", ".join(call["tool"] for call in entry["script"]["calls"])
        secrets = "; X-Secrets from the manifest" if entry["secrets"] else ""
        runs = f"; play it {entry['runs']} times in one process, a session each" if entry.get("runs", 1) > 1 else ""
        if entry.get("episodes", 1) > 1:
            runs += f"; {entry['episodes']} episodes, tasks {entry['index']}..{entry['index'] + entry['episodes'] - 1}, a session each"
        rows.append(
            f"    OPENREWARD_API_URL={entry['url']} OPENREWARD_SESSION_URL={entry['url']}  "
            f"# env {entry['env']!r}, task {task}, calls {calls}{secrets}{runs}"
        )
    return "\n".join(rows)

