"""The asyncio episode driver: many whole ORS episodes at once over aiohttp.

Why not Locust for the headline figure: one gevent process pays for its own
statistics on every request, so it saturates earlier than the servers we want
to compare. The driver does nothing per request but send, read, and check the
answer (:mod:`orsbench.bench.episode`), so its rate is closer to what the
server sustains. ``orsbench bench`` reports the Locust rate next to it.

Every run is bounded twice: by ``duration`` (no new episode starts after it)
and by ``max_episodes``; every request is bounded by a read timeout.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from orsbench import protocol
from orsbench.bench import plan as model
from orsbench.bench.episode import (
    REPLICA_HEADER,
    EpisodeFailure,
    check_list,
    check_sid_echo,
    check_stream_status,
    check_tools,
    retry_after,
    session_id,
    tool_output,
)
from orsbench.bench.plan import EpisodePlan
from orsbench.wire.sse import SSEParser, SSEStream

_JSON = {"Content-Type": protocol.JSON_CONTENT_TYPE}
#: Distinct failure messages kept per run (the count of each is kept for all).
MAX_FAILURE_KINDS = 20


@dataclass
class DriverResult:
    """What one bounded driver run measured."""

    episodes: int = 0
    failures: int = 0
    #: ``"<stage>: <message>"`` → how many episodes failed so.
    failure_kinds: Counter[str] = field(default_factory=Counter)
    #: Wall-clock seconds from the first request to the last answer.
    elapsed: float = 0.0
    #: Seconds each successful episode took, in completion order.
    latencies: list[float] = field(default_factory=list)
    #: CPU seconds (user+sys) this driver process spent during the run.
    driver_cpu: float = 0.0
    concurrency: int = 0
    #: Requests sent again after a ``503`` with ``Retry-After`` (an env still starting), as a client would.
    retried: int = 0
    #: Successful episodes whose last call answered ``finished: true`` (the reward path was taken).
    finished: int = 0
    #: The reward of each finished episode's last call (a number; ``None`` rewards are left out).
    rewards: list[float] = field(default_factory=list)
    #: Episodes per replica that answered their ``/create`` (``X-ORSBench-Replica``; empty when nothing names one).
    replicas: Counter[str] = field(default_factory=Counter)
    #: Episodes whose answers came from more than one replica (a balancer without session affinity).
    split_sessions: int = 0

    @property
    def rate(self) -> float:
        """Successful episodes per second."""
        return self.episodes / self.elapsed if self.elapsed > 0 else 0.0

    def percentile(self, p: float) -> float:
        """The ``p``-th percentile episode latency in seconds (nearest rank); 0 with no episodes."""
        return percentile(self.latencies, p)

    def merge(self, other: DriverResult) -> DriverResult:
        """Two runs as one: counts and times add up, latencies pool."""
        return DriverResult(
            self.episodes + other.episodes,
            self.failures + other.failures,
            self.failure_kinds + other.failure_kinds,
            self.elapsed + other.elapsed,
            self.latencies + other.latencies,
            self.driver_cpu + other.driver_cpu,
            max(self.concurrency, other.concurrency),
            self.retried + other.retried,
            self.finished + other.finished,
            self.rewards + other.rewards,
            self.replicas + other.replicas,
            self.split_sessions + other.split_sessions,
        )

    @property
    def ok_share(self) -> float:
        """Successful episodes over all episodes that ended (1.0 with none)."""
        total = self.episodes + self.failures
        return self.episodes / total if total else 1.0


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile: the smallest value with at least ``p`` % of the values at or below it."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = min(len(ordered), max(1, math.ceil(p / 100 * len(ordered))))
    return ordered[rank - 1]


async def request_riding_503(
    http: aiohttp.ClientSession,
    method: str,
    path: str,
    *,
    budget: float,
    data: bytes | Callable[[], bytes] | None = None,
    headers: dict[str, str] | None = None,
    on_retry: Callable[[], None] = lambda: None,
) -> aiohttp.ClientResponse:
    """Send; while the answer is a ``503`` with ``Retry-After`` whose wait fits in ``budget`` s, wait and resend.

    What the SDK clients do with an environment still starting (:func:`~orsbench.bench.episode.retry_after`).
    The answer that ends the loop is returned unread (``async with`` it); a 503 past the budget is returned
    as it came, so the caller reports it. ``data`` may be a callable, to rebuild the body per attempt.
    """
    deadline = time.monotonic() + budget
    while True:
        response = await http.request(method, path, data=data() if callable(data) else data, headers=headers)
        wait = retry_after(response.status, response.headers)
        if wait is None or time.monotonic() + wait > deadline:
            return response
        await response.read()  # read to the end: the connection is reused
        response.release()
        on_retry()
        await asyncio.sleep(wait)


async def _read_stream(response: aiohttp.ClientResponse, stage: str) -> SSEStream:
    """The whole event stream, parsed (the driver times episodes, not events: Locust times those)."""
    check_stream_status(stage, response.status, response.headers.get("Content-Type", ""))
    parser = SSEParser()
    parser.feed(await response.read())
    return parser.close()


class EpisodePlayer:
    """One episode's requests on a shared aiohttp session: :meth:`EpisodePlan.actions`, walked in order."""

    def __init__(self, http: aiohttp.ClientSession, plan: EpisodePlan, result: DriverResult, budget: float) -> None:
        self.http, self.plan, self.result, self.budget = http, plan, result, budget
        self.prompt = plan.path(protocol.PROMPT)
        self.task_tools = plan.path(protocol.TASK_TOOLS)
        self.call = plan.path(protocol.CALL)
        self.call_bodies = [orjson.dumps({"name": tool, "input": value}) for tool, value in plan.steps()]
        self.actions = plan.actions()
        self.tools = plan.tools()

    async def run(self, n: int, before_delete: Callable[[], Any] | None = None) -> None:
        """Play episode ``n``; ``before_delete`` is awaited before ``/delete`` (a GRPO group waits for its last member)."""
        http, plan = self.http, self.plan
        sid = ""
        sid_header: dict[str, str] = {}
        json_headers: dict[str, str] = {}
        created = finished = False
        replicas: list[str] = []
        reward: Any = None
        try:
            for stage, arg in self.actions:
                if stage == model.THINK:
                    if not finished:
                        await asyncio.sleep(arg)
                elif stage == model.CREATE_SESSION:
                    async with http.post(protocol.CREATE_SESSION) as r:
                        sid = session_id(await _read_stream(r, "create_session"))
                    sid_header = {protocol.SESSION_HEADER: sid}
                    json_headers = {**sid_header, **_JSON, **plan.create_headers}
                elif stage == model.CREATE:
                    body = orjson.dumps({"env_name": plan.env, "split": plan.split, "index": plan.index(n)})
                    async with http.post(protocol.CREATE, data=body, headers=json_headers) as r:
                        _replica(r, replicas)
                        check_sid_echo("create", r.status, await r.read(), sid)
                    created = True
                elif stage == model.PROMPT:
                    # /prompt and /call wait for the env's setup; past that wait they answer 503 starting.
                    async with await self._riding_503("GET", self.prompt, headers=sid_header) as r:
                        _replica(r, replicas)
                        check_list("prompt", r.status, await r.read())
                elif stage == model.TASK_TOOLS:
                    async with http.get(self.task_tools, headers=sid_header) as r:
                        _replica(r, replicas)
                        check_tools("task_tools", r.status, await r.read(), self.tools)
                elif stage == model.CALL:
                    if finished:
                        continue
                    body = self.call_bodies[int(arg)]
                    async with await self._riding_503("POST", self.call, data=body, headers=json_headers) as r:
                        _replica(r, replicas)
                        output = tool_output(await _read_stream(r, "call"))
                    finished, reward = bool(output.get("finished")), output.get("reward")
                elif stage == model.DELETE:
                    if before_delete is not None:
                        await before_delete()
                    created = False
                    async with http.post(protocol.DELETE, headers=sid_header) as r:
                        _replica(r, replicas)
                        check_sid_echo("delete", r.status, await r.read(), sid)
                elif stage == model.DELETE_SESSION:
                    async with http.post(protocol.DELETE_SESSION, headers=sid_header) as r:
                        check_sid_echo("delete_session", r.status, await r.read(), sid)
        except Exception:
            if created:  # a failed episode still frees its server-side session (not when cancelled)
                try:
                    async with http.post(protocol.DELETE, headers=sid_header) as r:
                        await r.read()
                except (TimeoutError, aiohttp.ClientError):
                    pass
            raise
        self._ended(finished, reward, replicas)

    async def counted(self, n: int, before_delete: Callable[[], Any] | None = None) -> bool:
        """Play episode ``n`` and count it in the result: its latency when it succeeded, its failure else."""
        started = time.perf_counter()
        try:
            await self.run(n, before_delete)
        except EpisodeFailure as exc:
            _failed(self.result, str(exc))
        except (TimeoutError, aiohttp.ClientError) as exc:
            _failed(self.result, f"transport: {type(exc).__name__}: {exc}")
        else:
            self.result.latencies.append(time.perf_counter() - started)
            self.result.episodes += 1
            return True
        return False

    def _ended(self, finished: bool, reward: Any, replicas: list[str]) -> None:
        result = self.result
        if finished:
            result.finished += 1
            if isinstance(reward, (int, float)) and not isinstance(reward, bool):
                result.rewards.append(float(reward))
        if replicas:
            result.replicas[replicas[0]] += 1
            if len(set(replicas)) > 1:
                result.split_sessions += 1

    def _riding_503(self, method: str, path: str, **kwargs: Any) -> Any:
        def retried() -> None:
            self.result.retried += 1

        return request_riding_503(self.http, method, path, budget=self.budget, on_retry=retried, **kwargs)



def _replica(response: aiohttp.ClientResponse, seen: list[str]) -> None:
    """Note the replica that answered a session's request (``X-ORSBench-Replica``), when something in front names one.

    ``/create`` onwards: ``/create_session`` only mints a sid, so any replica may answer it.
    """
    name = response.headers.get(REPLICA_HEADER)
    if name:
        seen.append(name)


def ors_client_session(
    base_url: str,
    connector: aiohttp.BaseConnector,
    timeout: aiohttp.ClientTimeout,
    api_key: str | None = None,
) -> aiohttp.ClientSession:
    """An aiohttp session shaped for ORS load: the API key header, no cookies, no compression.

    ORS carries its state in headers, never cookies (the Locust user drops its cookie jar too), and
    no ORS answer is compressed: the load clients ask for neither. The driver and the hold share this.
    """
    headers = {protocol.API_KEY_HEADER: api_key} if api_key else None
    return aiohttp.ClientSession(
        base_url,
        connector=connector,
        timeout=timeout,
        headers=headers,
        cookie_jar=aiohttp.DummyCookieJar(),
        auto_decompress=False,
        skip_auto_headers=("Accept-Encoding",),
    )


async def run_episodes(
    base_url: str,
    plan: EpisodePlan,
    *,
    concurrency: int = 32,
    duration: float = 10.0,
    max_episodes: int | None = None,
    read_timeout: float = protocol.CLIENT_READ_TIMEOUT_S,
    api_key: str | None = None,
) -> DriverResult:
    """Run episodes from ``concurrency`` workers until ``duration`` s passed or ``max_episodes`` started."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    result = DriverResult(concurrency=concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=read_timeout)
    counter = itertools.count()
    loop = asyncio.get_running_loop()
    async with ors_client_session(base_url, connector, timeout, api_key) as http:
        episode = EpisodePlayer(http, plan, result, read_timeout)
        deadline = loop.time() + duration

        async def worker() -> None:
            while loop.time() < deadline:
                n = next(counter)
                if max_episodes is not None and n >= max_episodes:
                    return
                await episode.counted(n)

        cpu0, t0 = time.process_time(), time.perf_counter()
        workers = [asyncio.ensure_future(worker()) for _ in range(concurrency)]
        # Hard bound: an episode in flight at the deadline gets a read timeout's grace, no more.
        done, pending = await asyncio.wait(workers, timeout=duration + read_timeout + 5)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
            _failed(result, f"driver: {len(pending)} workers still busy at the hard time limit, cancelled")
        for task in done:
            if task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
        result.elapsed = time.perf_counter() - t0
        result.driver_cpu = time.process_time() - cpu0
    return result


def _failed(result: DriverResult, message: str) -> None:
    result.failures += 1
    if message in result.failure_kinds or len(result.failure_kinds) < MAX_FAILURE_KINDS:
        result.failure_kinds[message] += 1
    else:
        result.failure_kinds["(other failures)"] += 1


def drive(base_url: str, plan: EpisodePlan, **kwargs: Any) -> DriverResult:
    """:func:`run_episodes` from synchronous code, on uvloop when it is installed."""
    return run_async(run_episodes(base_url, plan, **kwargs))


def run_async(coroutine: Any) -> Any:
    """Run ``coroutine`` to its end from synchronous code, on uvloop when it is installed."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard]
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)
