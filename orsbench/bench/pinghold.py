"""Held sessions on any environment: N sessions open at once, each pinged at the reference cadence.

A trainer holds a session open between its model's turns, and its client keeps
it alive the way the reference SDK does: ``POST /ping`` right after ``/create``
and then every 10 s (:data:`orsbench.protocol.PING_INTERVAL_S`, docs/protocol.md).
That is what a held session costs a server whatever its tools are — no tool
named ``seconds`` and no long call is needed — so this driver:

1. **opens** every session: ``create_session``, ``create``, ``prompt`` (the
   environment is set up, as a trainer's first turn reads it), bounded
   concurrency;
2. **holds** them ``hold`` seconds, each pinged every ``interval`` s over a
   shared pool of keep-alive connections, the sessions' first pings spread
   evenly over one interval (as clients started at different moments are);
   every ping's latency and its lateness against its schedule are kept;
3. **closes** them: ``delete`` + ``delete_session``.

``probe(phase)`` runs at ``"baseline"``, ``"held"`` (every session open and
pinged once) and ``"closed"``, so the caller can read the server's memory and
CPU (per session, per ping) from ``/proc``; ``pings_in_hold`` is the count the
CPU between ``"held"`` and the end of the hold is divided by.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from orsbench import protocol
from orsbench.bench.driver import ors_client_session, percentile, request_riding_503, run_async
from orsbench.bench.episode import REPLICA_HEADER, EpisodeFailure, check_list, check_sid_echo, count_kind, session_id
from orsbench.bench.hold import bounded
from orsbench.bench.plan import EpisodePlan
from orsbench.servers.app import raise_open_file_limit
from orsbench.wire.sse import SSEParser

_JSON = {"Content-Type": protocol.JSON_CONTENT_TYPE}
MAX_ERROR_KINDS = 20
_FAILURES = (EpisodeFailure, TimeoutError, aiohttp.ClientError)


@dataclass
class PingHoldResult:
    """What one pinged-sessions run measured (driver side)."""

    sessions: int
    hold_s: float
    interval_s: float
    opened: int = 0
    closed: int = 0
    pings: int = 0
    #: Pings sent between the ``"held"`` probe and the end of the hold (the server CPU of that span is theirs).
    pings_in_hold: int = 0
    #: Seconds between the ``"held"`` probe and the end of the hold.
    hold_measured_s: float = 0.0
    errors: int = 0
    error_kinds: Counter[str] = field(default_factory=Counter)
    ping_latencies: list[float] = field(default_factory=list)
    #: How late each ping went out against its schedule (a driver or server that cannot keep the cadence).
    ping_lateness: list[float] = field(default_factory=list)
    #: Sessions per replica that answered their ``/create`` (``X-ORSBench-Replica``).
    replicas: Counter[str] = field(default_factory=Counter)
    open_s: float = 0.0
    close_s: float = 0.0
    driver_cpu_s: float = 0.0
    fd_limit: int = 0

    def fail(self, message: str, count: int = 1) -> None:
        self.errors += count
        count_kind(self.error_kinds, message, count, MAX_ERROR_KINDS)

    @property
    def ping_rate(self) -> float:
        """Pings per second during the measured hold (the cadence asks ``sessions / interval``)."""
        return self.pings_in_hold / self.hold_measured_s if self.hold_measured_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "sessions": self.sessions,
            "opened": self.opened,
            "closed": self.closed,
            "hold_s": self.hold_s,
            "ping_interval_s": self.interval_s,
            "pings": self.pings,
            "pings_per_s": round(self.ping_rate, 1),
            "pings_per_s_asked": round(self.opened / self.interval_s, 1) if self.interval_s else None,
            "errors": self.errors,
            "error_kinds": dict(self.error_kinds),
            "ping_p50_ms": round(percentile(self.ping_latencies, 50) * 1000, 2),
            "ping_p99_ms": round(percentile(self.ping_latencies, 99) * 1000, 2),
            "ping_late_p99_ms": round(percentile(self.ping_lateness, 99) * 1000, 1),
            "ping_late_max_ms": round(max(self.ping_lateness, default=0.0) * 1000, 1),
            "replicas": dict(self.replicas),
            "open_s": round(self.open_s, 2),
            "close_s": round(self.close_s, 2),
            "driver_cpu_s": round(self.driver_cpu_s, 2),
            "fd_limit": self.fd_limit,
        }


class _Pinged:
    def __init__(self, http: aiohttp.ClientSession, plan: EpisodePlan, result: PingHoldResult, budget: float) -> None:
        self.http, self.plan, self.result, self.budget = http, plan, result, budget
        self.prompt = plan.path(protocol.PROMPT)

    async def open(self, n: int) -> str | None:
        http, plan = self.http, self.plan
        stage = "create_session"
        try:
            async with http.post(protocol.CREATE_SESSION) as r:
                parser = SSEParser()
                parser.feed(await r.read())
                sid = session_id(parser.close())
            headers = {protocol.SESSION_HEADER: sid}
            stage = "create"
            body = orjson.dumps({"env_name": plan.env, "split": plan.split, "index": plan.index(n)})
            async with http.post(protocol.CREATE, data=body, headers={**headers, **_JSON, **plan.create_headers}) as r:
                check_sid_echo("create", r.status, await r.read(), sid)
                name = r.headers.get(REPLICA_HEADER)
            stage = "prompt"
            async with await request_riding_503(self.http, "GET", self.prompt, budget=self.budget, headers=headers) as r:
                check_list("prompt", r.status, await r.read())
        except _FAILURES as exc:
            self.result.fail(f"{stage}: {_what(exc)}")
            return None
        self.result.opened += 1
        if name:
            self.result.replicas[name] += 1
        return sid

    async def ping(self, sid: str, scheduled: float, counting: bool) -> None:
        lateness = time.monotonic() - scheduled
        started = time.perf_counter()
        try:
            async with self.http.post(protocol.PING, headers={protocol.SESSION_HEADER: sid}) as r:
                body = await r.read()
                if r.status != 200:
                    raise EpisodeFailure("ping", f"HTTP {r.status}: {body[:120]!r}")
        except _FAILURES as exc:
            self.result.fail(f"ping: {_what(exc)}")
            return
        self.result.pings += 1
        self.result.pings_in_hold += counting
        self.result.ping_latencies.append(time.perf_counter() - started)
        self.result.ping_lateness.append(max(0.0, lateness))

    async def close(self, sid: str) -> None:
        headers = {protocol.SESSION_HEADER: sid}
        try:
            async with self.http.post(protocol.DELETE, headers=headers) as r:
                check_sid_echo("delete", r.status, await r.read(), sid)
            async with self.http.post(protocol.DELETE_SESSION, headers=headers) as r:
                check_sid_echo("delete_session", r.status, await r.read(), sid)
        except _FAILURES as exc:
            self.result.fail(f"close: {_what(exc)}")
            return
        self.result.closed += 1


def _what(exc: BaseException) -> str:
    return exc.message if isinstance(exc, EpisodeFailure) else f"{type(exc).__name__}: {exc}"


async def ping_sessions(
    base_url: str,
    plan: EpisodePlan,
    sessions: int,
    *,
    hold: float = 30.0,
    interval: float = protocol.PING_INTERVAL_S,
    connections: int = 64,
    ramp_concurrency: int = 128,
    read_timeout: float = protocol.CLIENT_READ_TIMEOUT_S,
    api_key: str | None = None,
    probe: Callable[[str], None] = lambda _phase: None,
    progress: Callable[[str], None] = lambda _line: None,
) -> PingHoldResult:
    """Open ``sessions``, ping each every ``interval`` s for ``hold`` s over ``connections`` connections, close them."""
    if sessions < 1 or interval <= 0:
        raise ValueError("sessions must be at least 1 and the ping interval positive")
    result = PingHoldResult(sessions, hold, interval)
    result.fd_limit = raise_open_file_limit()
    connector = aiohttp.TCPConnector(limit=max(connections, ramp_concurrency), keepalive_timeout=60.0)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=read_timeout, sock_read=read_timeout)
    cpu0, t0 = time.process_time(), time.perf_counter()
    probe("baseline")
    async with ors_client_session(base_url, connector, timeout, api_key) as http:
        state = _Pinged(http, plan, result, read_timeout)
        progress(f"opening {sessions} sessions ({ramp_concurrency} at a time) ...")
        sids = [s for s in await bounded(list(range(sessions)), state.open, ramp_concurrency) if s is not None]
        result.open_s = time.perf_counter() - t0
        progress(f"opened {len(sids)} in {result.open_s:.1f}s; pinging each every {interval:g}s for {hold:g}s ...")
        gate = asyncio.Semaphore(connections)
        start = time.monotonic()
        end = start + hold
        held_at: list[float] = []

        async def keep(n: int, sid: str) -> None:
            # The SDK pings right after /create, then every interval; clients started apart are spread over it.
            due = start + interval * n / max(1, len(sids))
            while due < end:
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                async with gate:
                    await state.ping(sid, due, counting=bool(held_at))
                due += interval

        async def mark_held() -> None:
            await asyncio.sleep(min(interval, hold))
            probe("held")
            held_at.append(time.monotonic())
            progress(f"{len(sids)} sessions open, each pinged; holding ...")

        marker = asyncio.ensure_future(mark_held())
        keepers = [asyncio.ensure_future(keep(n, sid)) for n, sid in enumerate(sids)]
        await asyncio.wait(keepers, timeout=hold + read_timeout + 10)
        for task in (*keepers, marker):
            task.cancel()
        await asyncio.gather(*keepers, marker, return_exceptions=True)
        if held_at:
            result.hold_measured_s = max(0.0, min(time.monotonic(), end) - held_at[0])
        probe("hold_end")
        close_start = time.perf_counter()
        progress(f"closing {len(sids)} sessions ...")
        await bounded(sids, state.close, ramp_concurrency)
        result.close_s = time.perf_counter() - close_start
    probe("closed")
    result.driver_cpu_s = time.process_time() - cpu0
    return result


def run_ping_hold(base_url: str, plan: EpisodePlan, sessions: int, **kwargs: Any) -> PingHoldResult:
    """:func:`ping_sessions` from synchronous code."""
    result: PingHoldResult = run_async(ping_sessions(base_url, plan, sessions, **kwargs))
    return result
