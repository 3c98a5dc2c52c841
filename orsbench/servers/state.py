"""Server-side state of the mock engine: sessions, resumable tool-call tasks, stats."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from orsbench.scenarios.base import Episode, Scenario, Tool
from orsbench.servers.stats import StatsSnapshot, snapshot


class Readiness:
    """``asyncio.Event``'s ``is_set``/``set``/``wait`` for a session's setup, paid for only when waited on.

    Every session has one, but almost no request ever waits on it (setup is
    done, or there is none). An ``asyncio.Event`` carries a waiter deque of
    about 600 bytes from birth; at 10,000 held sessions that alone is 6 MB.
    This flag makes the event only when a request has to wait.
    """

    __slots__ = ("_flag", "_event")

    def __init__(self, flag: bool = False) -> None:
        self._flag = flag
        self._event: asyncio.Event | None = None

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        self._flag = True
        if self._event is not None:
            self._event.set()

    async def wait(self) -> bool:
        if not self._flag:
            if self._event is None:
                self._event = asyncio.Event()
            await self._event.wait()
        return True


@dataclass(slots=True)
class Session:
    """One ORS session: an environment instance on one task.

    Slotted, and its tool locks made on first use: a trainer holds thousands
    of sessions at once, so every per-session byte is multiplied by them.
    """

    sid: str
    scenario: Scenario
    episode: Episode
    tools: dict[str, Tool]
    last_seen: float = field(default_factory=time.monotonic)
    ready: Readiness = field(default_factory=Readiness)
    setup_task: asyncio.Task[None] | None = None
    setup_error: BaseException | None = None
    deleted: bool = False
    #: The finish latch: set once any tool returned ``finished: true``.
    finished: bool = False
    locks: dict[str, asyncio.Lock] | None = None
    #: The tools of the calls running (or waiting to run) in this session, one entry per call.
    in_flight: tuple[str, ...] = ()

    async def enter_tool(self, tool: str) -> None:
        """Wait until no other call of ``tool`` runs in this session (the reference's per-tool lock).

        The lock is made only when a second call of the same tool arrives while
        one runs — it is then taken on behalf of the running call first — so a
        session holding one long call pays for a name in a tuple, not for a
        lock and a dict. Pair every return with :meth:`exit_tool`.
        """
        others = self.in_flight.count(tool)
        self.in_flight += (tool,)
        if not others:
            return
        made = self.locks is None or tool not in self.locks
        lock = self.lock(tool)
        if made:
            await lock.acquire()  # on behalf of the call already running: a fresh lock is taken at once
        try:
            await lock.acquire()
        except BaseException:
            self._leave(tool, release=False)
            raise

    def exit_tool(self, tool: str) -> None:
        """The call of ``tool`` that :meth:`enter_tool` let in has ended: let the next one in."""
        self._leave(tool, release=True)

    def _leave(self, tool: str, *, release: bool) -> None:
        flight = list(self.in_flight)
        flight.remove(tool)
        self.in_flight = tuple(flight)
        lock = self.locks.get(tool) if self.locks else None
        if lock is None:
            return
        if release and lock.locked():
            lock.release()
        if tool not in self.in_flight:
            del self.locks[tool]  # type: ignore[union-attr]
            if not self.locks:
                self.locks = None

    def touch(self) -> None:
        self.last_seen = time.monotonic()

    def forget_setup_task(self, task: "asyncio.Task[None]") -> None:
        """Done callback of the setup task: drop it once finished (``ready`` and ``setup_error`` hold the outcome)."""
        if self.setup_task is task:
            self.setup_task = None

    def lock(self, tool: str) -> asyncio.Lock:
        locks = self.locks
        if locks is None:
            locks = self.locks = {}
        lock = locks.get(tool)
        if lock is None:
            lock = locks[tool] = asyncio.Lock()
        return lock


@dataclass(slots=True)
class TaskRecord:
    """A tool-call task, resumable by ``task_id`` while it runs and ``linger`` s after."""

    future: "asyncio.Future[tuple[str, str]]"  # (kind, payload): ("end", json) or ("error", text)
    done_at: float | None = None


#: A finished task as the registry keeps it: ``(done_at, kind, payload)``, or
#: ``(done_at, None, record)`` for a task that was cancelled or raised.
_Done = tuple[float, "str | None", "str | TaskRecord"]


class TaskRegistry:
    """Process-wide tool-call tasks keyed by ``task_id`` (as in the reference, not per session).

    Completed tasks are evicted ``linger`` seconds after completion; the registry
    is also capped so that memory stays bounded under sustained load.

    A finished task is kept as a bare ``(done_at, kind, payload)`` tuple, not as
    its future: under load every call of the last ``linger`` seconds is held,
    so the size of one entry is what the server's memory grows by. :meth:`get`
    hands out a :class:`TaskRecord` with an already-resolved future either way.
    """

    def __init__(self, linger: float, cap: int = 200_000) -> None:
        self.linger = linger
        self.cap = cap
        self._running: dict[str, TaskRecord] = {}
        self._done: dict[str, _Done] = {}  # insertion-ordered: oldest completion first

    def get(self, task_id: str) -> TaskRecord | None:
        self.evict()
        record = self._running.get(task_id)
        if record is not None:
            return record
        done = self._done.get(task_id)
        if done is None:
            return None
        done_at, kind, payload = done
        if kind is None:
            return payload  # type: ignore[return-value]
        return TaskRecord(_resolved((kind, payload)), done_at)  # type: ignore[arg-type]

    def add(self, task_id: str, record: TaskRecord) -> None:
        """Track a task; a record whose future is already done counts as completed now."""
        if record.future.done():
            self._running[task_id] = record
            self.completed(task_id)
        else:
            self._running[task_id] = record

    def add_result(self, task_id: str, kind: str, payload: str) -> None:
        """Track a task that finished before it was ever streamed (a synchronous tool)."""
        self._done[task_id] = (time.monotonic(), kind, payload)
        self.evict()

    def completed_callback(self, task_id: str, _future: Any) -> None:
        """:meth:`completed` as a future's done callback (``partial(registry.completed_callback, task_id)``)."""
        self.completed(task_id)

    def completed(self, task_id: str) -> None:
        record = self._running.pop(task_id, None)
        if record is not None:
            record.done_at = now = time.monotonic()
            future = record.future
            if future.done() and not future.cancelled() and future.exception() is None:
                kind, payload = future.result()
                self._done[task_id] = (now, kind, payload)
            else:
                self._done[task_id] = (now, None, record)
        self.evict()

    def evict(self) -> None:
        horizon = time.monotonic() - self.linger
        done = self._done
        while done:
            task_id, entry = next(iter(done.items()))
            if entry[0] > horizon and len(done) <= self.cap:
                break
            del done[task_id]

    def __len__(self) -> int:
        return len(self._running) + len(self._done)

    @property
    def running(self) -> int:
        return len(self._running)


def _resolved(result: tuple[str, str]) -> "asyncio.Future[tuple[str, str]]":
    """A future already holding ``result``, on the running loop (or the thread's default loop)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = asyncio.get_event_loop_policy().get_event_loop()
    future: asyncio.Future[tuple[str, str]] = loop.create_future()
    future.set_result(result)
    return future


@dataclass
class Stats:
    """Counters behind ``GET /_orsbench/stats``: server-side effects tests can assert."""

    sessions_created: int = 0
    sessions_deleted: int = 0
    sessions_reaped: int = 0
    #: Sessions created per environment: a client that ignores ``env_name`` shows up in the default one.
    sessions_by_env: Counter[str] = field(default_factory=Counter)
    pings: int = 0
    #: Tool runs per tool name (a tool the client made run twice counts twice).
    calls: Counter[str] = field(default_factory=Counter)
    call_errors: Counter[str] = field(default_factory=Counter)
    requests: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)

    def snapshot(
        self, *, active_sessions: int, tasks_tracked: int, tasks_running: int, uptime_s: float, config: dict[str, Any]
    ) -> StatsSnapshot:
        """The mock's answer to ``GET /_orsbench/stats``: the common counters plus the mock-only ones."""
        out = snapshot(self, impl="mock", active_sessions=active_sessions, config=config)
        out["call_errors"] = dict(self.call_errors)
        out["statuses"] = {str(k): v for k, v in self.statuses.items()}
        out["tasks_tracked"] = tasks_tracked
        out["tasks_running"] = tasks_running
        out["uptime_s"] = uptime_s
        return out
