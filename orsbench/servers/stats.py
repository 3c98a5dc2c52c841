"""What ``GET /_orsbench/stats`` answers: one typed snapshot for the mock engine and both SDK twins.

Why one type: tests, the bench runner and the checker read these counters from
any implementation (``RunningServer.stats()``); a key one implementation spells
differently, or forgets, would turn into a ``KeyError`` far from its cause.
:func:`snapshot` is the one place the common part is written.

The keys every implementation reports are required; those only one of them can
count are ``NotRequired`` and say which.

And one reader: :func:`read` (or :func:`read_or_none`, for a server that may keep
none) is how every part of orsbench asks a server for its counters — the
launcher's ``RunningServer.stats()``, the client runner, the bench — and
:func:`change` what an episode changed in them.
"""

# No `from __future__ import annotations` here: TypedDict reads NotRequired from evaluated annotations.
from collections import Counter
from collections.abc import Mapping
from typing import Any, NotRequired, Protocol, TypedDict

import httpx

from orsbench import protocol


class StatsSnapshot(TypedDict):
    """Server-side counters since start (the API key in ``config`` is masked)."""

    impl: str  # the --impl name: "mock", "sdk", "ors-sdk"
    active_sessions: int
    sessions_created: int
    sessions_deleted: int
    sessions_reaped: int
    sessions_by_env: dict[str, int]  # sessions created per environment (a dropped env_name shows in the default)
    pings: int  # successful POST /ping
    calls: dict[str, int]  # tool calls that returned, per tool
    calls_total: int
    requests: dict[str, int]  # per route ("POST /{env}/call") or status ("308")
    config: dict[str, Any]  # the served ServerConfig: checkers read ttl and ping_interval
    #: mock only: calls that raised or were refused, per tool.
    call_errors: NotRequired[dict[str, int]]
    #: mock only: answers per HTTP status (keys are strings, as in JSON).
    statuses: NotRequired[dict[str, int]]
    #: mock only: tool-call tasks remembered for resume, and those still running.
    tasks_tracked: NotRequired[int]
    tasks_running: NotRequired[int]
    uptime_s: NotRequired[float]
    #: twins only: ``: ping`` keep-alive comments written on SSE streams.
    sse_pings: NotRequired[int]


class Counters(Protocol):
    """The counters every implementation keeps (the mock's ``Stats``, the twins' ``TwinStats``)."""

    sessions_created: int
    sessions_deleted: int
    sessions_reaped: int
    sessions_by_env: Counter[str]
    pings: int
    calls: Counter[str]
    requests: Counter[str]


def snapshot(counters: Counters, *, impl: str, active_sessions: int, config: dict[str, Any]) -> StatsSnapshot:
    """The part of the snapshot every implementation reports; callers add their ``NotRequired`` keys."""
    return {
        "impl": impl,
        "active_sessions": active_sessions,
        "sessions_created": counters.sessions_created,
        "sessions_deleted": counters.sessions_deleted,
        "sessions_reaped": counters.sessions_reaped,
        "sessions_by_env": dict(counters.sessions_by_env),
        "pings": counters.pings,
        "calls": dict(counters.calls),
        "calls_total": sum(counters.calls.values()),
        "requests": dict(counters.requests),
        "config": config,
    }


# -- reading them -----------------------------------------------------------------------------------
def read(url: str, *, api_key: str | None = None, client: httpx.Client | None = None, timeout: float = 10.0) -> StatsSnapshot:
    """``GET {url}/_orsbench/stats`` (sent ``api_key`` where the server wants one); raises ``httpx.HTTPError``
    (a non-200 answer included) or ``ValueError`` (not JSON).

    ``client``: a shared one (the launcher's: loading the CA bundle per request costs ~0.1 s); by default a
    one-off client that ignores proxy settings (a server on 127.0.0.1 is asked directly).
    """
    headers = {protocol.API_KEY_HEADER: api_key} if api_key else None
    if client is None:
        with httpx.Client(trust_env=False, timeout=timeout) as own:
            return read(url, api_key=api_key, client=own, timeout=timeout)
    response = client.get(url.rstrip("/") + protocol.STATS, timeout=timeout, headers=headers)
    response.raise_for_status()
    body = response.json()
    if not isinstance(body, dict):
        raise ValueError(f"{url}{protocol.STATS} answered {type(body).__name__}, not an object")
    return body  # type: ignore[return-value]


def read_or_none(url: str, **options: Any) -> StatsSnapshot | None:
    """:func:`read`, or ``None`` where the server keeps no counters (not an orsbench server, or gone)."""
    try:
        return read(url, **options)
    except (httpx.HTTPError, ValueError):
        return None


class StatsChange(TypedDict):
    """What one episode changed in a server's counters."""

    calls: dict[str, int]  # tool calls that returned, per tool
    requests: dict[str, int]  # per route and status, faults included ("fault stream-drop")
    statuses: dict[str, int]  # mock only: answers per HTTP status
    sessions_left_open: int  # sessions the server holds now that it did not hold before


def counter_change(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """The counters that changed between two snapshots' tallies, by how much."""
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


def change(before: Mapping[str, Any], after: Mapping[str, Any]) -> StatsChange:
    """What happened on the server between two snapshots (an episode played between them)."""
    return {
        "calls": counter_change(before.get("calls") or {}, after.get("calls") or {}),
        "requests": counter_change(before.get("requests") or {}, after.get("requests") or {}),
        "statuses": counter_change(before.get("statuses") or {}, after.get("statuses") or {}),
        "sessions_left_open": int(after.get("active_sessions") or 0) - int(before.get("active_sessions") or 0),
    }
