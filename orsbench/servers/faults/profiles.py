"""Fault profiles: the trouble real ORS deployments cause, reproducible on demand.

Each profile is a named, seeded, composable change to a built
:class:`~orsbench.servers.engine.Engine` (``orsbench serve echo --fault
flaky-5xx,stream-drop``, ``ServerConfig(faults=(...))``, or the pytest
``ors_server`` fixture with ``faults=(...)``). A profile either wraps the ASGI
app in a middleware that answers some requests itself (latency, 5xx, 429, a
restart's downtime) or patches the engine *instance* — its config, its
``/call`` route, its setup and tool runners — so the engine's own code stays
the reference-faithful path and a fault is always visible as a fault.

Why these: they are what the openreward SDK's retry code was written for
(``api/_session/http.py``: Retry-After, ``X-Backend-State: starting``,
resume by ``task_id``, a 30 s read timeout) and what a training run meets in
practice (a reaped session, a tool that raises, a restarted pod).

Parameters are fixed, documented constants below (``docs/robustness.md``
lists them), except where a :class:`~orsbench.config.ServerConfig` knob
already says the same thing: ``slow-setup`` honours ``--setup-delay``,
``short-ttl`` honours a ``--ttl`` shorter than its own, ``stream-stall``
scales with ``--ping-interval``, and every random choice comes from the
profile's own ``random.Random`` seeded from ``--seed``, so a run repeats
exactly given the same sequence of requests.

``/health`` and ``/_orsbench/stats`` are never faulted: the launcher waits on
the first, tests read the second. Every injected fault is counted in the
stats under ``requests["fault <name>"]``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import orjson

from orsbench import protocol
from orsbench.servers import sse
from orsbench.servers.engine import HTTPError, Request, _Streamer
from orsbench.servers.faults import fault
from orsbench.servers.state import TaskRegistry

if TYPE_CHECKING:
    from orsbench.servers.engine import Engine, Receive, Scope, Send
    from orsbench.servers.state import Session

# -- parameters (documented in docs/robustness.md) ---------------------------
#: latency-jitter: every request waits uniform(min, max) seconds before it is served.
LATENCY_MIN_S, LATENCY_MAX_S = 0.02, 0.18
#: flaky-5xx / rate-limit: share of requests answered with an error, at most
#: MAX_BURST in a row server-wide (so a client that retries 3 times gets through).
ERROR_RATE = 0.25
MAX_BURST = 2
FLAKY_STATUSES = (502, 503, 504)
RETRY_AFTER_S = 1
#: slow-setup: setup takes this long (unless --setup-delay says otherwise) and
#: /prompt and /call wait at most SLOW_SETUP_WAIT_S for it before 503 starting.
SLOW_SETUP_S = 3.0
SLOW_SETUP_WAIT_S = 0.5
#: setup-failure: setup fails this long after /create (then 500 on every session-bound request).
SETUP_FAILURE_AFTER_S = 0.05
#: stream-stall: the stream goes silent for this many keep-alive intervals
#: (40 s at the reference's 10 s, beyond the SDK's 30 s read timeout).
STALL_PING_INTERVALS = 4
#: short-ttl: sessions are reaped after this many idle seconds (the reference: 900).
SHORT_TTL_S = 3.0
#: tool-raises: the N-th tool call of every session raises.
TOOL_RAISES_AT = 2
#: restart: when a session makes its N-th tool call the server "restarts":
#: every session and task is lost, and for RESTART_DOWN_S every request gets 502.
RESTART_AT_CALL = 2
RESTART_DOWN_S = 1.0

RESTARTING = "Bad gateway: the environment server is restarting (orsbench fault profile restart)."

#: Paths no profile ever touches.
EXEMPT_PATHS = frozenset({protocol.HEALTH, protocol.STATS})

Decision = Callable[["Scope"], "Awaitable[tuple[int, str, list[tuple[bytes, bytes]]] | None]"]
CallHandler = Callable[[Request, Any, str], Awaitable[Any]]


# -- building blocks ---------------------------------------------------------
class Intercept:
    """ASGI middleware that may answer a request itself before the app sees it.

    ``decide(scope)`` returns ``None`` to pass the request on, or
    ``(status, detail, headers)`` to answer it with a JSON ``{"detail": ...}``
    — the shape a proxy or the reference server would use.
    """

    def __init__(self, app: Any, engine: Engine, name: str, decide: Decision) -> None:
        self.app, self.engine, self.name, self.decide = app, engine, name, decide

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        answer = await self.decide(scope)
        if answer is None:
            await self.app(scope, receive, send)
            return
        status, detail, headers = answer
        body = orjson.dumps({"detail": detail})
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", protocol.JSON_CONTENT_TYPE.encode()),
                    (b"content-length", str(len(body)).encode()),
                    *headers,
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
        _count(self.engine, self.name, status)


def _count(engine: Engine, name: str, status: int | None = None) -> None:
    engine.stats.requests[f"fault {name}"] += 1
    if status is not None:
        engine.stats.statuses[status] += 1


def _sid(request: Request) -> str | None:
    return (request.header(protocol.SESSION_HEADER) or "").strip() or None


async def _is_resume(request: Request) -> bool:
    """Whether a ``/call`` body asks to resume a task (reading the body caches it for the engine)."""
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        return False
    return isinstance(body, dict) and body.get("task_id") is not None


def _wrap_call(engine: Engine, wrap: Callable[[CallHandler], CallHandler]) -> None:
    """Replace the engine instance's ``POST /{env}/call`` handler with ``wrap(current)``."""
    routes = engine._env_routes[protocol.CALL]
    routes["POST"] = wrap(routes["POST"])


class _SessionCounter:
    """Counts fresh tool calls per session id; forgets sessions the engine no longer has."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.counts: dict[str, int] = {}

    def bump(self, sid: str) -> int:
        count = self.counts[sid] = self.counts.get(sid, 0) + 1
        if len(self.counts) > 2 * len(self.engine.sessions) + 1024:
            self.counts = {s: n for s, n in self.counts.items() if s in self.engine.sessions}
        return count


class _CutStream(_Streamer):
    """A ``/call`` stream that sends its ``task_id`` event and then misbehaves.

    ``mode`` is ``"drop"`` (the connection is closed mid-response, as when a
    proxy or pod dies), ``"no-end"`` (the response ends cleanly with no
    ``end``/``error`` event) or ``"stall"`` (silence, no keep-alives, for
    ``stall_s`` seconds, then the rest). The task itself keeps running in the
    engine, so a client can resume it by ``task_id``.
    """

    def __init__(self, inner: _Streamer, mode: str, stall_s: float = 0.0) -> None:
        super().__init__(task_id=inner.task_id, future=inner.future, engine=inner.engine)
        self.mode, self.stall_s = mode, stall_s

    async def run(self, send: Send) -> None:
        assert self.task_id is not None and self.future is not None and self.engine is not None
        await send({"type": "http.response.start", "status": 200, "headers": sse.HEADERS})
        await send({"type": "http.response.body", "body": sse.frame(protocol.EVENT_TASK_ID, self.task_id), "more_body": True})
        if self.mode == "drop":
            return  # uvicorn closes the connection: "ASGI callable returned without completing response"
        if self.mode == "no-end":
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        await asyncio.sleep(self.stall_s)
        kind, payload = await asyncio.shield(self.future)
        tail = (
            sse.frame(protocol.EVENT_ERROR, payload)
            if kind == "error"
            else sse.result_frames(payload, self.engine.config.chunk_size)
        )
        await send({"type": "http.response.body", "body": tail, "more_body": False})


def _cut_streams(engine: Engine, name: str, mode: str, *, resumes_too: bool = False) -> None:
    def wrap(handler: CallHandler) -> CallHandler:
        async def call(request: Request, scenario: Any, raw_env: str) -> Any:
            result = await handler(request, scenario, raw_env)
            if not isinstance(result, _Streamer) or result.task_id is None:
                return result  # an immediate answer (unknown task_id) passes untouched
            if not resumes_too and await _is_resume(request):
                return result
            _count(engine, name)
            stall_s = STALL_PING_INTERVALS * engine.config.ping_interval
            return _CutStream(result, mode, stall_s)

        return call

    _wrap_call(engine, wrap)


def _own_rng(name: str, rng: random.Random) -> random.Random:
    """A stream of the profile's own, mixed through a string seed (hashed with SHA-512).

    The registry seeds each fault with ``Random(seed * 1000 + index)``; small
    integer seeds give correlated first draws (``Random(0)``'s first 25 are all
    above 0.25), so a short run would see no faults at all.
    """
    return random.Random(f"{name}/{rng.getrandbits(64)}")


def _error_rate(engine: Engine, app: Any, rng: random.Random, name: str, statuses: tuple[int, ...], detail: str) -> Any:
    rng = _own_rng(name, rng)
    burst = 0

    async def decide(scope: Scope) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        nonlocal burst
        if burst < MAX_BURST and rng.random() < ERROR_RATE:
            burst += 1
            status = statuses[0] if len(statuses) == 1 else rng.choice(statuses)
            return status, detail, [(protocol.RETRY_AFTER_HEADER.lower().encode(), str(RETRY_AFTER_S).encode())]
        burst = 0
        return None

    return Intercept(app, engine, name, decide)


# -- the profiles ---------------------------------------------------------------
@fault("latency-jitter", f"every request waits {LATENCY_MIN_S:g}-{LATENCY_MAX_S:g} s (uniform, seeded)", kind="profile")
def latency_jitter(engine: Engine, app: Any, rng: random.Random) -> Any:
    rng = _own_rng("latency-jitter", rng)

    async def decide(scope: Scope) -> None:
        await asyncio.sleep(rng.uniform(LATENCY_MIN_S, LATENCY_MAX_S))
        _count(engine, "latency-jitter")

    return Intercept(app, engine, "latency-jitter", decide)


@fault(
    "flaky-5xx",
    f"{ERROR_RATE:.0%} of requests (at most {MAX_BURST} in a row) get 502/503/504 with Retry-After: {RETRY_AFTER_S}",
    kind="profile",
)
def flaky_5xx(engine: Engine, app: Any, rng: random.Random) -> Any:
    return _error_rate(
        engine, app, rng, "flaky-5xx", FLAKY_STATUSES, "Upstream unavailable (orsbench fault profile flaky-5xx); retry later."
    )


@fault(
    "rate-limit",
    f"{ERROR_RATE:.0%} of requests (at most {MAX_BURST} in a row) get 429 with Retry-After: {RETRY_AFTER_S}",
    kind="profile",
)
def rate_limit(engine: Engine, app: Any, rng: random.Random) -> Any:
    return _error_rate(
        engine, app, rng, "rate-limit", (429,), "Too many requests (orsbench fault profile rate-limit); retry later."
    )


@fault(
    "slow-setup",
    f"setup takes {SLOW_SETUP_S:g} s (or --setup-delay); /prompt and /call answer 503 X-Backend-State: starting "
    f"after {SLOW_SETUP_WAIT_S:g} s",
    kind="profile",
)
def slow_setup(engine: Engine, app: Any, rng: random.Random) -> Any:
    config = engine.config
    engine.config = config.replace(
        setup_delay=config.setup_delay if config.setup_delay > 0 else SLOW_SETUP_S,
        setup_wait_timeout=min(config.setup_wait_timeout, SLOW_SETUP_WAIT_S),
    )
    return app


class SetupFailed(RuntimeError):
    """The injected setup failure (its name is what clients see in the 500 detail)."""


@fault("setup-failure", "every session's setup fails: a sticky 500 on every session-bound request until /delete", kind="profile")
def setup_failure(engine: Engine, app: Any, rng: random.Random) -> Any:
    # The engine only runs a background setup when there is a delay or a scenario setup.
    engine.config = engine.config.replace(setup_delay=max(engine.config.setup_delay, SETUP_FAILURE_AFTER_S))

    async def failing_setup(session: Session) -> None:
        try:
            await asyncio.sleep(engine.config.setup_delay)
            session.setup_error = SetupFailed("environment setup failed (orsbench fault profile setup-failure)")
            _count(engine, "setup-failure")
        finally:
            session.ready.set()

    engine._setup = failing_setup  # type: ignore[method-assign]
    return app


@fault("stream-drop", "every fresh /call stream is cut after its task_id event; resuming by task_id works", kind="profile")
def stream_drop(engine: Engine, app: Any, rng: random.Random) -> Any:
    _cut_streams(engine, "stream-drop", "drop")
    return app


@fault(
    "stream-stall",
    f"every fresh /call stream goes silent after task_id for {STALL_PING_INTERVALS} keep-alive intervals, "
    "with no keep-alives; resuming by task_id works",
    kind="profile",
)
def stream_stall(engine: Engine, app: Any, rng: random.Random) -> Any:
    _cut_streams(engine, "stream-stall", "stall")
    return app


@fault("stream-no-end", "every /call stream, resumes included, ends cleanly after task_id with no end event", kind="profile")
def stream_no_end(engine: Engine, app: Any, rng: random.Random) -> Any:
    _cut_streams(engine, "stream-no-end", "no-end", resumes_too=True)
    return app


@fault("short-ttl", f"sessions idle for {SHORT_TTL_S:g} s (or a shorter --ttl) are reaped", kind="profile")
def short_ttl(engine: Engine, app: Any, rng: random.Random) -> Any:
    engine.config = engine.config.replace(ttl=min(engine.config.ttl, SHORT_TTL_S))
    return app


@fault("tool-raises", f"tool call number {TOOL_RAISES_AT} of every session raises (an SSE error event)", kind="profile")
def tool_raises(engine: Engine, app: Any, rng: random.Random) -> Any:
    counter = _SessionCounter(engine)
    run_sync, run_async = engine._run_sync, engine._run_async

    def injected(session: Session, name: str) -> tuple[str, str] | None:
        if name not in session.tools or session.finished:
            return None  # unknown tools and the finish latch keep their own answers
        if counter.bump(session.sid) != TOOL_RAISES_AT:
            return None
        engine.stats.call_errors[name] += 1
        _count(engine, "tool-raises")
        return ("error", f"tool {name!r} raised: injected failure (orsbench fault profile tool-raises)")

    def patched_sync(session: Session, name: str, tool_input: dict[str, Any]) -> tuple[str, str]:
        return injected(session, name) or run_sync(session, name, tool_input)

    async def patched_async(session: Session, name: str, tool_input: dict[str, Any]) -> tuple[str, str]:
        return injected(session, name) or await run_async(session, name, tool_input)

    engine._run_sync = patched_sync  # type: ignore[method-assign]
    engine._run_async = patched_async  # type: ignore[method-assign]
    return app


@fault(
    "restart",
    f"the server restarts when a session makes tool call number {RESTART_AT_CALL}: every session and task is lost, "
    f"and for {RESTART_DOWN_S:g} s every request gets 502",
    kind="profile",
)
def restart(engine: Engine, app: Any, rng: random.Random) -> Any:
    counter = _SessionCounter(engine)
    down_until = 0.0

    def wrap(handler: CallHandler) -> CallHandler:
        async def call(request: Request, scenario: Any, raw_env: str) -> Any:
            nonlocal down_until
            sid = _sid(request)
            if sid in engine.sessions and not await _is_resume(request) and counter.bump(sid) == RESTART_AT_CALL:
                # What a crashed process loses: no teardown runs, nothing is resumable.
                engine.sessions.clear()
                engine.tasks = TaskRegistry(engine.config.linger)
                counter.counts.clear()
                down_until = time.monotonic() + RESTART_DOWN_S
                _count(engine, "restart")
                raise HTTPError(502, RESTARTING)  # the request in flight when the process died
            return await handler(request, scenario, raw_env)

        return call

    _wrap_call(engine, wrap)

    async def decide(scope: Scope) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        if time.monotonic() < down_until:
            return 502, RESTARTING, []
        return None

    return Intercept(app, engine, "restart", decide)


#: Bytes the ``memory-leak`` profile keeps for good on every request.
LEAK_BYTES = 2048


@fault(
    "memory-leak",
    f"test aid: every request keeps {LEAK_BYTES} bytes for good — a planted leak the soak benchmark must fail on",
    kind="profile",
)
def memory_leak(engine: Engine, app: Any, rng: random.Random) -> Any:
    kept: list[bytes] = []

    async def decide(scope: Scope) -> None:
        kept.append(bytes(LEAK_BYTES))  # zero-filled, so every page is touched and counts in RSS
        return None

    return Intercept(app, engine, "memory-leak", decide)
