"""What ``GET /_orsbench/stats`` answers: one typed snapshot for the mock engine and both SDK twins.

Why one type: tests, the bench runner and the checker read these counters from
any implementation (``RunningServer.stats()``); a key one implementation spells
differently, or forgets, would turn into a ``KeyError`` far from its cause.
:func:`snapshot` is the one place the common part is written.

The keys every implementation reports are required; those only one of them can
count are ``NotRequired`` and say which.
"""

# No `from __future__ import annotations` here: TypedDict reads NotRequired from evaluated annotations.
from collections import Counter
from typing import Any, NotRequired, Protocol, TypedDict


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
