"""What ``GET /_orsbench/stats`` answers: one typed snapshot for every server orsbench serves.

The mock engine, both SDK twins and the bench floor emit it, and
:meth:`orsbench.servers.launch.RunningServer.stats` returns it, so a test or a
benchmark reads one shape whichever implementation it started. Why a
``TypedDict`` and not a class: the snapshot *is* JSON on the wire, and a reader
of a server it did not start (``bench --url``) gets the same dict back.

Every server says which implementation it is and how many sessions it holds;
the counters are there where the server counts them (the floor counts nothing).
"""

from __future__ import annotations

from typing import Any, Required, TypedDict


class StatsSnapshot(TypedDict, total=False):
    """One answer of ``GET /_orsbench/stats``."""

    #: The implementation's registered name (``mock``, ``sdk``, ``ors-sdk``, ``floor``; ``app`` for a user's classes).
    impl: Required[str]
    #: Sessions open now.
    active_sessions: Required[int]
    sessions_created: int
    sessions_deleted: int
    sessions_reaped: int
    #: Successful ``POST /ping`` (session keep-alives).
    pings: int
    #: Tool calls by tool name, and their total.
    calls: dict[str, int]
    calls_total: int
    #: Requests by ``"METHOD /route"`` (faults count here too, as ``"fault NAME"``).
    requests: dict[str, int]
    #: The served ServerConfig as JSON, the API key masked: checkers read ttl and ping_interval from it.
    config: dict[str, Any]
    # -- the mock engine only --
    call_errors: dict[str, int]
    #: Answers by HTTP status (as a string: JSON object keys).
    statuses: dict[str, int]
    tasks_tracked: int
    tasks_running: int
    uptime_s: float
    # -- the SDK twins only --
    #: ``: ping`` comments written on SSE streams.
    sse_pings: int
