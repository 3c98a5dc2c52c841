"""Held sessions: N ORS sessions at once, each inside one long tool call that streams keep-alives.

Trainers do not run short episodes back to back; they hold hundreds to
thousands of sessions open, many of them inside a tool call that runs for
minutes while the server writes ``: ping`` comments so the client's read
timeout never fires. What that costs a server is memory and CPU *per held
session*, and what it costs the trainer is the time to the first byte of a
call and the longest silence on a stream. This driver measures exactly that:

1. **open** — ``create_session`` + ``create`` for every session (bounded
   concurrency: a burst of 10,000 connects would only measure the listen
   backlog);
2. **hold** — one ``call`` per session, all streaming at once. A tool whose
   input schema has a numeric ``seconds`` property (the ``slow`` scenario's
   ``wait``) is told to end at one common instant, so every stream is open
   together for ``hold`` seconds after the last one started; the first byte of
   every stream is timed, and the gap between consecutive bytes on each;
3. **close** — ``delete`` + ``delete_session`` for every session.

``probe(phase)`` is called at ``"baseline"`` (before the first request),
``"held"`` (when every stream has its first byte) and ``"closed"``, so the
caller can read the server's RSS and CPU from ``/proc`` at those instants.

Every phase is bounded: opens and closes by a read timeout each, the hold by
the tool's own end plus a read timeout. The driver raises its own
file-descriptor soft limit to the hard limit (one socket per held stream) and
reports its own CPU time and RSS, because at 10,000 streams the driver is a
second server on the same cores.
"""

from __future__ import annotations

import asyncio
import os
import resource
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from orsbench import protocol
from orsbench.bench.driver import ors_client_session, percentile, request_riding_503
from orsbench.bench.episode import (
    EpisodeFailure,
    check_sid_echo,
    check_stream_status,
    retry_after,
    session_id,
    tool_output,
)
from orsbench.bench.plan import EpisodePlan
from orsbench.bench.procstat import rss_bytes
from orsbench.servers.app import raise_open_file_limit
from orsbench.wire.sse import SSEParser

_JSON = {"Content-Type": protocol.JSON_CONTENT_TYPE}
#: Name of the numeric tool argument the driver sets so that every held call ends together.
DURATION_ARG = "seconds"
#: Requests in flight while opening, starting calls and closing (not while holding: all N are).
DEFAULT_RAMP_CONCURRENCY = 128
MAX_ERROR_KINDS = 20


def duration_arg(schema: dict[str, Any] | None) -> str | None:
    """``"seconds"`` when a tool's input schema takes a numeric ``seconds`` (so the driver can time the call)."""
    prop = ((schema or {}).get("properties") or {}).get(DURATION_ARG)
    if not isinstance(prop, dict):
        return None
    kinds = [prop.get("type")] + [s.get("type") for s in prop.get("anyOf", []) if isinstance(s, dict)]
    return DURATION_ARG if any(k in ("number", "integer") for k in kinds) else None


@dataclass
class HoldResult:
    """What one held-sessions run measured (driver side)."""

    sessions: int
    hold_s: float
    #: Sessions that opened, streamed a successful call to its ``end`` and were deleted.
    sessions_ok: int = 0
    opened: int = 0
    #: Streams that delivered their first byte (were held).
    streaming: int = 0
    errors: int = 0
    error_kinds: Counter[str] = field(default_factory=Counter)
    #: Requests sent again after a ``503`` with ``Retry-After`` (an env still starting), as a client would.
    retried: int = 0
    #: Seconds from sending ``call`` to its first body byte, per stream.
    ttfb: list[float] = field(default_factory=list)
    #: Longest silence between two reads on any held stream, seconds.
    max_gap_s: float = 0.0
    open_s: float = 0.0
    #: Seconds from the first call sent to the last stream's first byte.
    ramp_s: float = 0.0
    #: Seconds every stream was open at once (from the last first byte to the first stream's end).
    held_all_s: float = 0.0
    close_s: float = 0.0
    total_s: float = 0.0
    driver_cpu_s: float = 0.0
    driver_rss_held_kib: int | None = None
    driver_rss_peak_kib: int = 0
    fd_limit: int = 0
    #: Whether the driver could set the call's duration (the tool takes ``seconds``).
    timed_calls: bool = False

    def fail(self, message: str, count: int = 1) -> None:
        self.errors += count
        if message in self.error_kinds or len(self.error_kinds) < MAX_ERROR_KINDS:
            self.error_kinds[message] += count
        else:
            self.error_kinds["(other errors)"] += count

    def as_dict(self) -> dict[str, Any]:
        return {
            "sessions": self.sessions,
            "hold_s": self.hold_s,
            "sessions_ok": self.sessions_ok,
            "opened": self.opened,
            "streaming": self.streaming,
            "errors": self.errors,
            "error_kinds": dict(self.error_kinds),
            "retried_503": self.retried,
            "ttfb_ms": {f"p{p}": round(percentile(self.ttfb, p) * 1000, 2) for p in (50, 99)},
            "max_keepalive_gap_s": round(self.max_gap_s, 3),
            "open_s": round(self.open_s, 3),
            "ramp_s": round(self.ramp_s, 3),
            "held_all_s": round(self.held_all_s, 3),
            "close_s": round(self.close_s, 3),
            "total_s": round(self.total_s, 3),
            "timed_calls": self.timed_calls,
            "driver": {
                "cpu_s": round(self.driver_cpu_s, 3),
                "cpu_us_per_session": round(self.driver_cpu_s / self.sessions * 1e6, 1) if self.sessions else None,
                "rss_held_kib": self.driver_rss_held_kib,
                "rss_peak_kib": self.driver_rss_peak_kib,
                "fd_limit": self.fd_limit,
            },
        }


def _self_rss_kib() -> int | None:
    size = rss_bytes(os.getpid())
    return None if size is None else size // 1024


#: What ends one open, call or close without ending the hold.
_FAILURES = (EpisodeFailure, TimeoutError, aiohttp.ClientError)


class _Held:
    """The shared state of one run: the HTTP session, the plan, the result, the all-open signal."""

    def __init__(
        self, http: aiohttp.ClientSession, plan: EpisodePlan, result: HoldResult, timed: str | None, budget: float
    ) -> None:
        self.http, self.plan, self.result, self.timed = http, plan, result, timed
        #: Seconds a request may spend riding out ``503`` + ``Retry-After`` answers (the read timeout).
        self.budget = budget
        self.call_path = plan.path(protocol.CALL)
        self.all_streaming = asyncio.Event()
        self.expected_streams = 0
        self.first_end: float | None = None
        self.last_first_byte = 0.0

    async def open(self, n: int) -> str | None:
        try:
            async with await self._send(protocol.CREATE_SESSION) as r:
                check_stream_status("create_session", r.status, r.headers.get("Content-Type", ""))
                parser = SSEParser()
                parser.feed(await r.read())
                sid = session_id(parser.close())
            body = orjson.dumps({"env_name": self.plan.env, "split": self.plan.split, "index": self.plan.index(n)})
            async with await self._send(protocol.CREATE, data=body, headers={protocol.SESSION_HEADER: sid, **_JSON, **self.plan.create_headers}) as r:
                check_sid_echo("create", r.status, await r.read(), sid)
        except _FAILURES as exc:
            self._failed("open", exc)
            return None
        self.result.opened += 1
        return sid

    def _send(self, path: str, **kwargs: Any) -> Any:
        """POST ``path``, riding out ``503`` + ``Retry-After`` within the budget."""
        return request_riding_503(self.http, "POST", path, budget=self.budget, on_retry=self._retried, **kwargs)

    def _retried(self) -> None:
        self.result.retried += 1

    def _call_body(self, ends_at: float) -> bytes:
        tool_input = dict(self.plan.tool_input)
        if self.timed:  # set per attempt: a call resent after a 503 still ends with the others
            tool_input[self.timed] = round(max(0.0, ends_at - time.monotonic()), 3)
        return orjson.dumps({"name": self.plan.tool, "input": tool_input})

    async def call(self, sid: str, ends_at: float, gate: asyncio.Semaphore) -> bool:
        """Start the call (inside ``gate`` until its first byte), then read it to its end.

        A ``503`` with ``Retry-After`` (the env's setup still running) is waited out and the call
        resent, outside the gate, within the budget: what a client does.
        """
        headers = {protocol.SESSION_HEADER: sid, **_JSON, "Accept": "text/event-stream"}
        result = self.result
        released = False
        deadline = time.monotonic() + self.budget
        await gate.acquire()
        try:
            while True:
                sent = time.perf_counter()
                r = await self.http.post(self.call_path, data=self._call_body(ends_at), headers=headers)
                wait = retry_after(r.status, r.headers)
                if wait is None or time.monotonic() + wait > deadline:
                    break
                await r.read()
                r.release()
                self._retried()
                gate.release()
                try:
                    await asyncio.sleep(wait)
                finally:
                    await gate.acquire()
            async with r:
                check_stream_status("call", r.status, r.headers.get("Content-Type", ""))
                parser = SSEParser()
                last: float | None = None
                gap = 0.0
                async for chunk in r.content.iter_any():
                    now = time.perf_counter()
                    if last is None:
                        result.ttfb.append(now - sent)
                        result.streaming += 1
                        self.last_first_byte = now
                        gate.release()
                        released = True
                        if result.streaming >= self.expected_streams:
                            self.all_streaming.set()
                    else:
                        gap = max(gap, now - last)
                    last = now
                    parser.feed(chunk)
                if self.first_end is None:
                    self.first_end = time.perf_counter()
                result.max_gap_s = max(result.max_gap_s, gap)
                tool_output(parser.close())
            return True
        except _FAILURES as exc:
            self._failed("call", exc)
        finally:
            if not released:
                gate.release()
                self._gave_up()
        return False

    def _failed(self, stage: str, exc: BaseException) -> None:
        """Count one failure: an episode failure by its own message, a transport error by its type."""
        self.result.fail(str(exc) if isinstance(exc, EpisodeFailure) else f"{stage}: transport: {type(exc).__name__}")

    def _gave_up(self) -> None:
        """A stream that never delivered a byte is no longer waited for before the ``held`` probe."""
        self.expected_streams -= 1
        if self.result.streaming >= self.expected_streams:
            self.all_streaming.set()

    async def close(self, sid: str) -> bool:
        headers = {protocol.SESSION_HEADER: sid}
        try:
            async with await self._send(protocol.DELETE, headers=headers) as r:
                check_sid_echo("delete", r.status, await r.read(), sid)
            async with await self._send(protocol.DELETE_SESSION, headers=headers) as r:
                check_sid_echo("delete_session", r.status, await r.read(), sid)
        except _FAILURES as exc:
            self._failed("delete", exc)
            return False
        return True


async def bounded(items: list[Any], fn: Callable[[Any], Any], limit: int) -> list[Any]:
    """``fn(item)`` for every item, at most ``limit`` at a time, results in order."""
    gate = asyncio.Semaphore(limit)

    async def one(item: Any) -> Any:
        async with gate:
            return await fn(item)

    return await asyncio.gather(*(one(item) for item in items))


async def hold_sessions(
    base_url: str,
    plan: EpisodePlan,
    sessions: int,
    *,
    hold: float = 10.0,
    timed_arg: str | None = DURATION_ARG,
    ramp_concurrency: int = DEFAULT_RAMP_CONCURRENCY,
    read_timeout: float = protocol.CLIENT_READ_TIMEOUT_S,
    api_key: str | None = None,
    probe: Callable[[str], None] = lambda _phase: None,
    progress: Callable[[str], None] = lambda _line: None,
) -> HoldResult:
    """Open ``sessions`` sessions, hold one streaming call in each for ``hold`` s, then delete them all."""
    if sessions < 1:
        raise ValueError("sessions must be at least 1")
    result = HoldResult(sessions, hold, timed_calls=timed_arg is not None)
    result.fd_limit = raise_open_file_limit()
    # No connection limit: every held stream needs its own connection. The read timeout is the SDK client's:
    # a stream silent for longer than that has failed, whatever the tool is doing.
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=max(60.0, hold + read_timeout))
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=read_timeout, sock_read=read_timeout)
    cpu0, t0 = time.process_time(), time.perf_counter()
    probe("baseline")
    async with ors_client_session(base_url, connector, timeout, api_key) as http:
        state = _Held(http, plan, result, timed_arg, read_timeout)
        progress(f"opening {sessions} sessions ({ramp_concurrency} at a time) ...")
        sids = [s for s in await bounded(list(range(sessions)), state.open, ramp_concurrency) if s is not None]
        result.open_s = time.perf_counter() - t0
        progress(f"opened {len(sids)} in {result.open_s:.1f}s; starting {len(sids)} calls ...")
        state.expected_streams = len(sids)
        # Starting the calls costs more than opening did (a fresh connection each); every timed call ends at one
        # instant after that budget, so all streams are held together for `hold` s unless the ramp overran it.
        ramp_budget = max(1.0, 3 * result.open_s, len(sids) / 250)
        ends_at = time.monotonic() + ramp_budget + hold
        gate = asyncio.Semaphore(ramp_concurrency)
        ramp_start = time.perf_counter()
        calls = [asyncio.ensure_future(state.call(sid, ends_at, gate)) for sid in sids]
        bound = ramp_budget + hold + read_timeout + 10
        all_open = asyncio.ensure_future(state.all_streaming.wait())
        await asyncio.wait([all_open, asyncio.gather(*calls)], timeout=bound, return_when=asyncio.FIRST_COMPLETED)
        if state.all_streaming.is_set():
            result.ramp_s = state.last_first_byte - ramp_start
            result.driver_rss_held_kib = _self_rss_kib()
            probe("held")
            progress(f"all {len(sids)} streams open after {result.ramp_s:.1f}s; holding ...")
        else:
            all_open.cancel()
            progress(f"only {result.streaming} of {len(sids)} streams opened")
        done, pending = await asyncio.wait(calls, timeout=max(1.0, bound - (time.perf_counter() - ramp_start)))
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
            result.fail("driver: call still streaming at the hard time limit, cancelled", len(pending))
        ok_calls = {sid for sid, task in zip(sids, calls) if task in done and task.result()}
        if state.all_streaming.is_set() and state.first_end is not None:
            result.held_all_s = max(0.0, state.first_end - state.last_first_byte)
        close_start = time.perf_counter()
        progress(f"closing {len(sids)} sessions ...")
        closed = await bounded(sids, state.close, ramp_concurrency)
        result.close_s = time.perf_counter() - close_start
        result.sessions_ok = sum(1 for sid, ok in zip(sids, closed) if ok and sid in ok_calls)
    probe("closed")
    result.total_s = time.perf_counter() - t0
    result.driver_cpu_s = time.process_time() - cpu0
    result.driver_rss_peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return result


def run_hold(base_url: str, plan: EpisodePlan, sessions: int, **kwargs: Any) -> HoldResult:
    """:func:`hold_sessions` from synchronous code, on uvloop when it is installed."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard]
        return asyncio.run(hold_sessions(base_url, plan, sessions, **kwargs))
    return uvloop.run(hold_sessions(base_url, plan, sessions, **kwargs))
