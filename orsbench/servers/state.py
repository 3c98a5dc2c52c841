"""Server-side state of the mock engine: sessions, resumable tool-call tasks, stats."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from orsbench.scenarios.base import Episode, Scenario, Tool


@dataclass
class Session:
    """One ORS session: an environment instance on one task."""

    sid: str
    scenario: Scenario
    episode: Episode
    tools: dict[str, Tool]
    last_seen: float = field(default_factory=time.monotonic)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    setup_task: asyncio.Task[None] | None = None
    setup_error: BaseException | None = None
    deleted: bool = False
    #: The finish latch: set once any tool returned ``finished: true``.
    finished: bool = False
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)

    def touch(self) -> None:
        self.last_seen = time.monotonic()

    def lock(self, tool: str) -> asyncio.Lock:
        lock = self.locks.get(tool)
        if lock is None:
            lock = self.locks[tool] = asyncio.Lock()
        return lock


@dataclass
class TaskRecord:
    """A tool-call task, resumable by ``task_id`` while it runs and ``linger`` s after."""

    future: "asyncio.Future[tuple[str, str]]"  # (kind, payload): ("end", json) or ("error", text)
    done_at: float | None = None


class TaskRegistry:
    """Process-wide tool-call tasks keyed by ``task_id`` (as in the reference, not per session).

    Completed tasks are evicted ``linger`` seconds after completion; the registry
    is also capped so that memory stays bounded under sustained load.
    """

    def __init__(self, linger: float, cap: int = 200_000) -> None:
        self.linger = linger
        self.cap = cap
        self._tasks: dict[str, TaskRecord] = {}
        self._done_order: dict[str, float] = {}  # insertion-ordered: oldest completion first

    def get(self, task_id: str) -> TaskRecord | None:
        self.evict()
        return self._tasks.get(task_id)

    def add(self, task_id: str, record: TaskRecord) -> None:
        self._tasks[task_id] = record

    def completed(self, task_id: str) -> None:
        record = self._tasks.get(task_id)
        if record is not None:
            record.done_at = now = time.monotonic()
            self._done_order[task_id] = now
        self.evict()

    def evict(self) -> None:
        horizon = time.monotonic() - self.linger
        order = self._done_order
        while order:
            task_id, done_at = next(iter(order.items()))
            if done_at > horizon and len(order) <= self.cap:
                break
            del order[task_id]
            self._tasks.pop(task_id, None)

    def __len__(self) -> int:
        return len(self._tasks)

    @property
    def running(self) -> int:
        return len(self._tasks) - len(self._done_order)


@dataclass
class Stats:
    """Counters behind ``GET /_orsbench/stats``: server-side effects tests can assert."""

    sessions_created: int = 0
    sessions_deleted: int = 0
    sessions_reaped: int = 0
    pings: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    call_errors: Counter[str] = field(default_factory=Counter)
    requests: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)

    def snapshot(self, **extra: Any) -> dict[str, Any]:
        return {
            "impl": "mock",
            "sessions_created": self.sessions_created,
            "sessions_deleted": self.sessions_deleted,
            "sessions_reaped": self.sessions_reaped,
            "pings": self.pings,
            "calls": dict(self.calls),
            "calls_total": sum(self.calls.values()),
            "call_errors": dict(self.call_errors),
            "requests": dict(self.requests),
            "statuses": {str(k): v for k, v in self.statuses.items()},
            **extra,
        }
