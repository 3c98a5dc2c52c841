"""Fault profiles: the trouble real ORS deployments cause, reproducible on demand.

Each profile is a named, seeded, composable change to a built
:class:`~orsbench.servers.engine.Engine` (``orsbench serve echo --fault
flaky-5xx,stream-drop``, ``ServerConfig(faults=(...))``, or the pytest
``ors_server`` fixture with ``faults=(...)``). The HTTP profiles —
latency-jitter, flaky-5xx, rate-limit, stream-drop, stream-stall,
stream-no-end — are plain ASGI middlewares (:mod:`.middleware`) that wrap any
ORS ASGI app, so :func:`orsbench.servers.faults.wrap_app` puts them around a
proxy to a real server too. The engine profiles — slow-setup, setup-failure,
short-ttl, tool-raises, restart — change the engine *instance* through its
public seam (config, :class:`~orsbench.servers.engine.Hooks`, the ``/call``
route), so the engine's own code stays the reference-faithful path and a fault
is always visible as a fault.

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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from orsbench import protocol
from orsbench.servers.faults import ClientFacts, FaultContext, WrapFn, engine_context, fault, http_fault
from orsbench.servers.faults.middleware import EXEMPT_PATHS, Answer, CutMode, CutStreams, Intercept, ReapIdle, RewriteStream, on_output
from orsbench.servers.http import ASGIApp, HTTPError, Request, Scope, header, read_body, session_id
from orsbench.servers.state import TaskRegistry

if TYPE_CHECKING:
    from orsbench.servers.engine import Engine
    from orsbench.servers.state import Session

__all__ = ["EXEMPT_PATHS"]  # re-exported: the paths no profile touches

# -- parameters (documented in docs/robustness.md) ---------------------------
#: latency-jitter: every request waits uniform(min, max) seconds before it is served.
LATENCY_MIN_S, LATENCY_MAX_S = 0.02, 0.18
#: flaky-5xx / rate-limit: share of requests answered with an error, at most MAX_BURST in a row for
#: the same request (so a client that tries each request 3 times gets through, whatever runs beside it).
ERROR_RATE = 0.25
MAX_BURST = 2
#: Requests remembered at most (refused ones, and the leg last let through): a client may give up on one.
BURST_MEMORY = 10_000
FLAKY_STATUSES = (502, 503, 504)
RETRY_AFTER_S = 1
#: slow-setup: setup takes this long (unless --setup-delay says otherwise) and
#: /prompt and /call wait at most SLOW_SETUP_WAIT_S for it before 503 starting.
SLOW_SETUP_S = 3.0
SLOW_SETUP_WAIT_S = 0.5
#: setup-failure: setup fails this long after /create (then 500 on every session-bound request).
SETUP_FAILURE_AFTER_S = 0.05
#: second-setup-fails: the setup of this session (counted in the order sessions set up) fails; the others play.
SECOND_SETUP_FAILS_AT = 2
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
#: credits-402: the answer to every /create_session (the platform's billing gate; retrying cannot help).
INSUFFICIENT_CREDITS = (
    "Insufficient credits: your OpenReward balance cannot pay for a new session. "
    "Top up your credits, then start the session again (orsbench fault profile credits-402)."
)

#: credits-402-discovery: the answer to every discovery request (§13.12).
DISCOVERY_CREDITS = (
    "Insufficient credits: your OpenReward balance cannot pay for this environment's task and tool listings. "
    "Top up your credits, then try again (orsbench fault profile credits-402-discovery)."
)
#: rate-limit-400: a 429 whose detail quotes another status-like number (§13.13).
RATE_LIMIT_400 = "Rate limit exceeded: at most 400 requests per minute per API key; retry after the Retry-After delay (orsbench fault profile rate-limit-400)."
#: missing-task-429: a final 400 whose detail quotes "429" (§13.13).
MISSING_TASK_429 = (
    "Task not found (platform error code 429): this environment no longer serves the task asked for; "
    "retrying cannot bring it back (orsbench fault profile missing-task-429)."
)

#: Seeded so the first request of a client episode is refused: a client shows at once how it retries.
CLIENT_SEED = 3
#: What each profile means for a client episode (the client matrix, check-client's cases): what a correct
#: client does under it, and its timings scaled down through ServerConfig only (no client is patched).
RIDE_OUT_SEEDED = ClientFacts(knobs=(("seed", CLIENT_SEED),), per_client=True, retry_after=True)
REPORT_ERROR = ClientFacts(expect="error")


# -- building blocks ---------------------------------------------------------
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


def _own_rng(name: str, rng: random.Random) -> random.Random:
    """A stream of the profile's own, mixed through a string seed (hashed with SHA-512).

    The registry seeds each fault with ``Random(seed * 1000 + index)``; small
    integer seeds give correlated first draws (``Random(0)``'s first 25 are all
    above 0.25), so a short run would see no faults at all.
    """
    return random.Random(f"{name}/{rng.getrandbits(64)}")


_SESSION = protocol.SESSION_HEADER_RAW


def _same_request(scope: Scope) -> tuple[str, str, bytes | None]:
    """What a retry of this request shares with it: method, route (its last segment, so ``/task_tools`` and the
    ``/{env}/task_tools`` it is redirected to are one) and session."""
    return scope["method"], scope["path"].rpartition("/")[2], header(scope, _SESSION)


def _error_rate(
    app: ASGIApp, rng: random.Random, context: FaultContext, name: str, statuses: tuple[int, ...], detail: str, stream: str
) -> ASGIApp:
    """Refuse a share of requests, each request at most ``MAX_BURST`` times in a row.

    Counted per request (:func:`_same_request`), not server-wide: a server-wide count is reset by whatever
    passes beside a client's retries (a heartbeat), so a client trying each request 3 times could meet a third
    refusal. And an attempt may be two requests — a bare path, then the ``/{env}/...`` its 308 names (§1.2):
    once an attempt's first leg passes, its other spelling passes too, or the redirect would draw again and
    refuse the attempt the count had let through (platoon, whose env calls all take the redirect, failed one
    CI run in several on both).
    """
    rng = _own_rng(stream, rng)
    #: Per request: refusals in a row, and the path of the leg last let through (None: last refused).
    state: dict[tuple[str, str, bytes | None], tuple[int, str | None]] = {}

    async def decide(scope: Scope) -> Answer | None:
        key, path = _same_request(scope), scope["path"]
        count, passed = state.get(key, (0, None))
        if passed is not None:
            del state[key]
            if passed != path:  # the other leg of an attempt let through
                return None
            count = 0  # the same request again after it got through: a fresh attempt
        if len(state) >= BURST_MEMORY:
            state.clear()
        if count < MAX_BURST and rng.random() < ERROR_RATE:
            state[key] = (count + 1, None)
            status = statuses[0] if len(statuses) == 1 else rng.choice(statuses)
            return status, detail, [(protocol.RETRY_AFTER_HEADER.lower().encode(), str(RETRY_AFTER_S).encode())]
        state[key] = (0, path)
        return None

    return Intercept(app, name, decide, context)


def _cut(app: ASGIApp, context: FaultContext, name: str, mode: CutMode, *, resumes_too: bool = False) -> ASGIApp:
    stall_s = STALL_PING_INTERVALS * context.ping_interval
    return CutStreams(app, name, mode, context, stall_s=stall_s, resumes_too=resumes_too)


# -- the profiles ---------------------------------------------------------------
@http_fault("latency-jitter", f"every request waits {LATENCY_MIN_S:g}-{LATENCY_MAX_S:g} s (uniform, seeded)", kind="profile")
def latency_jitter(app: ASGIApp, rng: random.Random, context: FaultContext) -> ASGIApp:
    rng = _own_rng("latency-jitter", rng)

    async def decide(scope: Scope) -> None:
        await asyncio.sleep(rng.uniform(LATENCY_MIN_S, LATENCY_MAX_S))
        context.count("latency-jitter")

    return Intercept(app, "latency-jitter", decide, context)


def _error_profile(name: str, statuses: tuple[int, ...], detail: str, stream: str | None = None) -> WrapFn:
    """``stream``: the profile whose random stream it draws (``None``: its own), so two profiles that differ only in
    their text refuse the same requests given the same seed, and a client's different verdict is the text's doing."""

    def wrap(app: ASGIApp, rng: random.Random, context: FaultContext) -> ASGIApp:
        return _error_rate(app, rng, context, name, statuses, detail, stream or name)

    return wrap


def _refusal(name: str, status: int, detail: str, refused: Callable[[Scope], bool]) -> WrapFn:
    """A profile that answers every request ``refused`` picks with ``status`` and ``detail``, every time (no draw)."""

    def wrap(app: ASGIApp, rng: random.Random, context: FaultContext) -> ASGIApp:
        async def decide(scope: Scope) -> Answer | None:
            return (status, detail, []) if refused(scope) else None

        return Intercept(app, name, decide, context)

    return wrap


def _post_to(path: str) -> Callable[[Scope], bool]:
    return lambda scope: scope["method"] == "POST" and scope["path"] == path


_BURSTS = f"{ERROR_RATE:.0%} of requests (each at most {MAX_BURST} times in a row) get"
_RETRY = f"with Retry-After: {RETRY_AFTER_S}"
flaky_5xx = http_fault("flaky-5xx", f"{_BURSTS} 502/503/504 {_RETRY}", kind="profile", client=RIDE_OUT_SEEDED)(
    _error_profile("flaky-5xx", FLAKY_STATUSES, "Upstream unavailable (orsbench fault profile flaky-5xx); retry later.")
)
rate_limit = http_fault("rate-limit", f"{_BURSTS} 429 {_RETRY}", kind="profile", client=RIDE_OUT_SEEDED)(
    _error_profile("rate-limit", (429,), "Too many requests (orsbench fault profile rate-limit); retry later.")
)


@fault(
    "slow-setup",
    f"setup takes {SLOW_SETUP_S:g} s (or --setup-delay); /prompt and /call answer 503 X-Backend-State: starting "
    f"after {SLOW_SETUP_WAIT_S:g} s",
    kind="profile",
    client=ClientFacts(knobs=(("setup_delay", 1.0),), retry_after=True, per_client=True),
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


@fault(
    "setup-failure",
    "every session's setup fails: a sticky 500 on every session-bound request until /delete",
    kind="profile",
    client=ClientFacts(expect="error", fails_setup=True),
)
def setup_failure(engine: Engine, app: Any, rng: random.Random) -> Any:
    # The engine only runs a background setup when there is a delay or a scenario setup.
    engine.config = engine.config.replace(setup_delay=max(engine.config.setup_delay, SETUP_FAILURE_AFTER_S))

    count = engine_context(engine).count

    async def failing_setup(session: Session) -> None:
        await asyncio.sleep(engine.config.setup_delay)
        count("setup-failure")
        raise SetupFailed("environment setup failed (orsbench fault profile setup-failure)")

    engine.hooks.setup = failing_setup
    return app


@fault(
    "second-setup-fails",
    f"the setup of the {SECOND_SETUP_FAILS_AT}nd session to set up fails (a sticky 500 on its session-bound requests "
    "until /delete); every other session plays normally. Played by a client as several episodes of one case, "
    "whose aggregate must count the failed one (§13.15)",
    kind="profile",
    client=ClientFacts(expect="error", fails_setup=True, episodes=3, scenario="pick", deadline_s=40.0, per_client=True),
)
def second_setup_fails(engine: Engine, app: Any, rng: random.Random) -> Any:
    engine.config = engine.config.replace(setup_delay=max(engine.config.setup_delay, SETUP_FAILURE_AFTER_S))
    count = engine_context(engine).count
    started = 0

    async def setup(session: Session) -> None:
        nonlocal started
        started += 1
        await asyncio.sleep(engine.config.setup_delay)
        if started == SECOND_SETUP_FAILS_AT:
            count("second-setup-fails")
            raise SetupFailed("environment setup failed for this episode (orsbench fault profile second-setup-fails)")
        await session.scenario.setup(session.episode)

    engine.hooks.setup = setup
    return app


@http_fault("stream-drop", "every fresh /call stream is cut after its task_id event; resuming by task_id works", kind="profile")
def stream_drop(app: ASGIApp, rng: random.Random, context: FaultContext) -> ASGIApp:
    return _cut(app, context, "stream-drop", "drop")


@http_fault(
    "stream-stall",
    f"every fresh /call stream goes silent after task_id for {STALL_PING_INTERVALS} keep-alive intervals, "
    "with no keep-alives; resuming by task_id works",
    kind="profile",
    client=ClientFacts(knobs=(("ping_interval", 0.25),), per_client=True),
)
def stream_stall(app: ASGIApp, rng: random.Random, context: FaultContext) -> ASGIApp:
    return _cut(app, context, "stream-stall", "stall")


@http_fault(
    "stream-no-end",
    "every /call stream, resumes included, ends cleanly after task_id with no end event",
    kind="profile",
    client=ClientFacts(expect="error", deadline_s=6.0),
)
def stream_no_end(app: ASGIApp, rng: random.Random, context: FaultContext) -> ASGIApp:
    return _cut(app, context, "stream-no-end", "no-end", resumes_too=True)


def _reap_idle(app: ASGIApp, rng: random.Random, context: FaultContext) -> ASGIApp:
    """short-ttl around any ORS app: idle sessions deleted (lazily, on their next request)."""
    return ReapIdle(app, "short-ttl", SHORT_TTL_S, context)


@fault(
    "short-ttl",
    f"sessions idle for {SHORT_TTL_S:g} s (or a shorter --ttl) are reaped",
    kind="profile",
    wrap=_reap_idle,
    client=ClientFacts(
        left_out="it needs an idle gap longer than the TTL inside the episode; "
        "conformance/test_client_robustness.py plays it for the openreward SDK and TRL"
    ),
)
def short_ttl(engine: Engine, app: Any, rng: random.Random) -> Any:
    engine.config = engine.config.replace(ttl=min(engine.config.ttl, SHORT_TTL_S))
    return app


@fault(
    "tool-raises",
    f"tool call number {TOOL_RAISES_AT} of every session raises (an SSE error event)",
    kind="profile",
    client=REPORT_ERROR,
)
def tool_raises(engine: Engine, app: Any, rng: random.Random) -> Any:
    counter = _SessionCounter(engine)
    count = engine_context(engine).count

    def injected(session: Session, name: str, tool_input: dict[str, Any]) -> tuple[str, str] | None:
        if name not in session.tools or session.finished:
            return None  # unknown tools and the finish latch keep their own answers
        if counter.bump(session.sid) != TOOL_RAISES_AT:
            return None
        engine.stats.call_errors[name] += 1
        count("tool-raises")
        return ("error", f"tool {name!r} raised: injected failure (orsbench fault profile tool-raises)")

    engine.hooks.before_tool.append(injected)
    return app


@fault(
    "restart",
    f"the server restarts when a session makes tool call number {RESTART_AT_CALL}: every session and task is lost, "
    f"and for {RESTART_DOWN_S:g} s every request gets 502",
    kind="profile",
    client=REPORT_ERROR,
)
def restart(engine: Engine, app: Any, rng: random.Random) -> Any:
    counter = _SessionCounter(engine)
    context = engine_context(engine)
    down_until = 0.0

    def wrap(handler: Any) -> Any:
        async def call(request: Request, scenario: Any, raw_env: str) -> Any:
            nonlocal down_until
            sid = request.session_id
            if (
                sid in engine.sessions
                and (await request.json_body()).get("task_id") is None
                and counter.bump(sid) == RESTART_AT_CALL
            ):
                # What a crashed process loses: no teardown runs, nothing is resumable.
                engine.sessions.clear()
                engine.tasks = TaskRegistry(engine.config.linger)
                counter.counts.clear()
                down_until = time.monotonic() + RESTART_DOWN_S
                context.count("restart")
                raise HTTPError(502, RESTARTING)  # the request in flight when the process died
            return await handler(request, scenario, raw_env)

        return call

    engine.wrap_route(protocol.CALL, "POST", wrap)

    async def decide(scope: Scope) -> Answer | None:
        if time.monotonic() < down_until:
            return 502, RESTARTING, []
        return None

    return Intercept(app, "restart", decide, context)


#: Tool call number ``HELD_CALL_AT`` of every session runs ``HELD_CALL_S`` seconds under ``sigterm-mid-call``: far
#: past the SIGTERM and its grace, so the client is ended while that call is in flight, whatever its speed.
HELD_CALL_AT = 2
HELD_CALL_S = 60.0


class _EndOnDisconnect:
    """Ends a ``/call`` stream whose client went away, as an SSE server on Starlette does (the engine itself writes
    keep-alives into a closed connection until its tool ends): the request log then shows the call cut, and the
    server's shutdown does not wait the held call out. The tool itself runs on: nothing cancels it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not protocol.is_call(scope["path"]):
            await self.app(scope, receive, send)
            return
        body, _ = await read_body(receive)
        given = False

        async def once() -> Any:  # the body, then nothing: from here on `receive` is the watcher's
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()

        inner = asyncio.ensure_future(self.app(scope, once, send))

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            inner.cancel()

        watcher = asyncio.ensure_future(watch())
        try:
            await inner
        except asyncio.CancelledError:
            if not watcher.done():
                raise  # cancelled from outside (the server stopping), not by the client leaving
        finally:
            watcher.cancel()


@fault(
    "sigterm-mid-call",
    f"tool call number {HELD_CALL_AT} of every session runs for {HELD_CALL_S:g} s, with keep-alives (a long tool); "
    "a client played under it is sent SIGTERM while that call is in flight and SIGKILL 3 s later: does it delete its session?",
    kind="profile",
    # A fresh server per client: the held call runs on after its client is gone, and would count in the next one's episode.
    client=ClientFacts(expect="error", per_client=True, terminate=True, knobs=(("ping_interval", 0.5),)),
)
def sigterm_mid_call(engine: Engine, app: Any, rng: random.Random) -> Any:
    counter = _SessionCounter(engine)
    count = engine_context(engine).count

    def held(session: Session, name: str) -> float:
        if name not in session.tools or session.finished:
            return 0.0  # unknown tools and the finish latch keep their own answers
        if counter.bump(session.sid) != HELD_CALL_AT:
            return 0.0
        count("sigterm-mid-call")  # the moment the runner waits for: the call is in flight
        return HELD_CALL_S

    engine.hooks.tool_delay.append(held)
    return _EndOnDisconnect(app)


#: Bytes the ``memory-leak`` profile keeps for good on every request.
LEAK_BYTES = 2048


@fault(
    "memory-leak",
    f"test aid: every request keeps {LEAK_BYTES} bytes for good — a planted leak the soak benchmark must fail on",
    kind="profile",
    client=ClientFacts(test_aid=True),
)
def memory_leak(engine: Engine, app: Any, rng: random.Random) -> Any:
    kept: list[bytes] = []

    async def decide(scope: Scope) -> None:
        kept.append(bytes(LEAK_BYTES))  # zero-filled, so every page is touched and counts in RSS
        return None

    return Intercept(app, "memory-leak", decide, engine_context(engine))


# -- hazards a client meets (docs/protocol.md §13) -------------------------------------
credits_402 = http_fault(
    "credits-402",
    "every POST /create_session answers 402 Payment Required, insufficient credits: a client must stop, not retry",
    kind="profile",
    client=ClientFacts(expect="error", refuses_session=True),
)(_refusal("credits-402", 402, INSUFFICIENT_CREDITS, _post_to(protocol.CREATE_SESSION)))


credits_402_discovery = http_fault(
    "credits-402-discovery",
    "every discovery request (/list_environments, /{env}/tools, /splits, /tasks, /num_tasks, /task, /task_range) "
    "answers 402 Payment Required, insufficient credits; sessions are served: a client that reads a listing must "
    "report the refusal, not retry it and not take it for an empty list",
    kind="profile",
    client=ClientFacts(refuses_discovery=True),
)(_refusal("credits-402-discovery", 402, DISCOVERY_CREDITS, lambda scope: protocol.is_discovery(scope["path"])))


rate_limit_400 = http_fault(
    "rate-limit-400",
    f"{_BURSTS} 429 {_RETRY} whose detail quotes another number ('at most 400 requests per minute'): a client "
    "that reads the status rides it out; one that matches numbers in the error text gives up. The same requests "
    "are refused as under rate-limit (its random stream), so only the text differs",
    kind="profile",
    client=RIDE_OUT_SEEDED,
)(_error_profile("rate-limit-400", (429,), RATE_LIMIT_400, stream="rate-limit"))


missing_task_429 = http_fault(
    "missing-task-429",
    "every POST /create answers 400 'Task not found (platform error code 429)': a final 4xx whose text quotes 429 — "
    "a client must report it, never retry it",
    kind="profile",
    client=REPORT_ERROR,
)(_refusal("missing-task-429", 400, MISSING_TASK_429, _post_to(protocol.CREATE)))


def _first_call_per_session() -> Any:
    """A ``CutStreams`` selector true for the first fresh ``/call`` of each session id only."""
    seen: set[str] = set()

    def select(scope: Scope) -> bool:
        sid = session_id(scope)
        if sid in seen:
            return False
        seen.add(sid)
        return True

    return select


@http_fault(
    "cut-before-task-id",
    "the first fresh /call of every session is cut after its 200 headers, before the task_id event; the tool ran, "
    "so a client that re-sends the call runs it twice (stats: calls)",
    kind="profile",
    client=REPORT_ERROR,
)
def cut_before_task_id(app: ASGIApp, rng: random.Random, context: FaultContext) -> ASGIApp:
    return CutStreams(app, "cut-before-task-id", "before-task-id", context, select=_first_call_per_session())


@http_fault(
    "reward-nan",
    "every numeric reward is sent as NaN — what Python's json.dumps writes for float('nan'): not JSON, and not a reward; "
    "a client must refuse it, not train on it",
    kind="profile",
    client=REPORT_ERROR,
)
def reward_nan(app: ASGIApp, rng: random.Random, context: FaultContext) -> ASGIApp:
    def change(output: dict[str, Any]) -> None:
        reward = output.get("reward")
        if isinstance(reward, (int, float)) and not isinstance(reward, bool):
            output["reward"] = float("nan")
            context.count("reward-nan")

    return RewriteStream(app, protocol.CALL, on_output(change))
