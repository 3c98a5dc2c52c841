"""Isolation violations: servers whose sessions leak into each other (``docs/protocol.md`` §15).

Each breaks one rule of sessions at once and is told at the HTTP level, so it wraps *any* ORS
app — the mock engine (``orsbench serve echo --fault NAME``) and the SDK twins (``--impl sdk``)
alike — and the checker's tests show each ``isolation.*`` check catching its defect on both.
Every one misbehaves only when several sessions meet in the way its bug needs (a newer session
on another task, a sibling that finished, a delete while another session is mid-episode, calls
at once); a server used one session at a time — everything the other probes do — is served
unchanged, which is why a checker that sends one request at a time passes all of them.

State is per wrapped app (one fault instance per server), kept in a :class:`Sessions` tracker that
reads ``/create`` and ``/delete`` as they go through.
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from orsbench import protocol
from orsbench.servers import sse
from orsbench.servers.engine.base import finished_error
from orsbench.servers.faults import FaultContext
from orsbench.servers.faults.middleware import faultable, is_call, post_on_own_account
from orsbench.servers.faults.violations import http_violation
from orsbench.servers.http import ASGIApp, Message, Receive, Scope, Send, is_event_stream, json_object, read_body, session_id
from orsbench.wire.sse import SSEEvent, SSEParser

#: The rules' checks, by the scene that shows them.
INTERLEAVED, SAME_TASK, DELETE, RECREATED = (
    "isolation.interleaved_tasks",
    "isolation.same_task_fresh",
    "isolation.delete_leaves_other",
    "isolation.recreated_sid_fresh",
)
RESUME, IDS, CALLS, PING, TTL = (
    "isolation.resume_own_result",
    "isolation.concurrent_create_distinct",
    "isolation.concurrent_calls_own_task",
    "isolation.ping_during_call",
    "isolation.ttl_per_session",
)

#: How long a racy id counter awaits between reading and writing back (its "store").
RACE_S = 0.05
#: How long a tool awaits I/O while the "current session" is a module-level variable.
CURRENT_WINDOW_S = 0.05

_SESSION = protocol.SESSION_HEADER_RAW
_BODY_LIMIT = 1 << 20


# -- what a fault knows of the sessions going through it ------------------------------------------------
@dataclass
class Sessions:
    """Live sessions as seen on the wire: each one's task, in creation order; ids created more than once."""

    task: dict[str, str] = field(default_factory=dict)
    created: dict[str, int] = field(default_factory=dict)

    def live(self) -> list[str]:
        return list(self.task)

    def on_task(self, key: str) -> list[str]:
        return [sid for sid, task in self.task.items() if task == key]


def task_key(body: dict[str, Any]) -> str:
    """What names a ``/create``'s task: its split and index, else its task_spec (sorted JSON)."""
    if body.get("task_spec") is not None:
        return "spec:" + json.dumps(body["task_spec"], sort_keys=True, default=str)
    return f"{body.get('env_name')}:{body.get('split')}:{body.get('index')}"


def with_sid(scope: Scope, sid: str) -> Scope:
    """``scope`` with its ``X-Session-ID`` replaced by ``sid``."""
    headers = [(k, v) for k, v in scope.get("headers", []) if k != _SESSION] + [(_SESSION, sid.encode())]
    return {**scope, "headers": headers}


class SessionFault:
    """The base of every isolation violation: tracks sessions, hands each request to :meth:`handle`."""

    name = ""

    def __init__(self, app: ASGIApp, context: FaultContext) -> None:
        self.app, self.context = app, context
        self.sessions = Sessions()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not faultable(scope):
            await self.app(scope, receive, send)
            return
        path, sid = scope["path"], session_id(scope)
        body: dict[str, Any] = {}
        if scope["method"] == "POST" and (path == protocol.CREATE or is_call(scope)):
            raw, receive = await read_body(receive, limit=_BODY_LIMIT)
            body = json_object(raw)
        status = await self.handle(scope, receive, send, sid, body)
        if path == protocol.CREATE and status == 200 and sid:
            self.sessions.task.pop(sid, None)
            self.sessions.task[sid] = task_key(body)
            self.sessions.created[sid] = self.sessions.created.get(sid, 0) + 1
        elif path == protocol.DELETE and sid and sid in self.sessions.task:
            self.deleted(sid, self.sessions.task.pop(sid))

    async def handle(self, scope: Scope, receive: Receive, send: Send, sid: str, body: dict[str, Any]) -> int:
        """Serve the request (by default: pass it on); the status answered."""
        return await self.forward(scope, receive, send)

    def deleted(self, sid: str, task: str) -> None:
        """``sid``, a session on ``task``, was just deleted (after the app answered)."""

    async def forward(self, scope: Scope, receive: Receive, send: Send, watch: Callable[[SSEEvent], None] | None = None) -> int:
        """Pass the request to the app; the status it answered. ``watch`` sees every event of an SSE answer."""
        status = 0
        parser = SSEParser()
        streaming = False

        async def seen(message: Message) -> None:
            nonlocal status, streaming
            if message["type"] == "http.response.start":
                status = message["status"]
                streaming = is_event_stream(message.get("headers", []))
            elif message["type"] == "http.response.body" and streaming and watch is not None:
                for item in parser.feed(message.get("body", b"")):
                    if isinstance(item, SSEEvent):
                        watch(item)
            await send(message)

        await self.app(scope, receive, seen)
        return status

    async def inner(self, path: str, sid: str, scope: Scope) -> None:
        """Send the app ``POST path`` for ``sid`` on the server's own account (its answer is not the client's)."""
        await post_on_own_account(self.app, scope, path, sid)


async def answer_stream(send: Send, *events: tuple[str, str]) -> int:
    """Answer a ``/call`` with an event stream of ``events`` (a ``task_id`` first, as every server does)."""
    await send({"type": "http.response.start", "status": 200, "headers": sse.HEADERS})
    body = sse.frame(protocol.EVENT_TASK_ID, uuid.uuid4().hex) + b"".join(sse.frame(e, d) for e, d in events)
    await send({"type": "http.response.body", "body": body, "more_body": False})
    return 200


def finished_in(event: SSEEvent) -> bool:
    """An ``end`` event whose result is ``ok: true`` with ``finished: true``."""
    if event.event != protocol.EVENT_END:
        return False
    result = json_object(event.data.encode())
    output = result.get("output") if result.get("ok") is True else None
    return isinstance(output, dict) and output.get("finished") is True


def _tool(body: dict[str, Any]) -> str:
    return str(body.get("name", ""))


# -- the violations -------------------------------------------------------------------------------------------
class NewestTaskServesAll(SessionFault):
    """Module-level environment state: the newest ``/create`` on another task serves every older session."""

    name = "newest-task-serves-all"

    async def handle(self, scope: Scope, receive: Receive, send: Send, sid: str, body: dict[str, Any]) -> int:
        mine = self.sessions.task.get(sid)
        bound = protocol.route_of(scope["path"]).name in (protocol.PROMPT, protocol.MESSAGES, protocol.TASK_TOOLS, protocol.CALL)
        if mine is not None and bound and body.get("task_id") is None:
            live = self.sessions.live()
            newer = [other for other in live[live.index(sid) + 1 :] if self.sessions.task[other] != mine]
            if newer:
                self.context.count(self.name)
                return await self.forward(with_sid(scope, newer[-1]), receive, send)
        return await self.forward(scope, receive, send)


@http_violation(
    NewestTaskServesAll.name,
    "module-level environment state: the newest session on another task serves every older session's prompt and calls",
    (INTERLEAVED, CALLS),
)
def newest_task_serves_all(app: ASGIApp, rng: random.Random, context: FaultContext) -> ASGIApp:
    return NewestTaskServesAll(app, context)


class FinishedSharedByTask(SessionFault):
    """A cache keyed by task: while a session that finished the task is open, its siblings' calls are refused as finished."""

    name = "finished-shared-by-task"

    def __init__(self, app: ASGIApp, context: FaultContext) -> None:
        super().__init__(app, context)
        self.finished: set[str] = set()

    async def handle(self, scope: Scope, receive: Receive, send: Send, sid: str, body: dict[str, Any]) -> int:
        if not is_call(scope) or body.get("task_id") is not None or sid not in self.sessions.task:
            return await self.forward(scope, receive, send)
        task = self.sessions.task[sid]
        if any(other != sid and other in self.finished for other in self.sessions.on_task(task)):
            self.context.count(self.name, 200)
            return await answer_stream(send, (protocol.EVENT_END, finished_error(_tool(body))))

        def watch(event: SSEEvent) -> None:
            if finished_in(event):
                self.finished.add(sid)

        return await self.forward(scope, receive, send, watch)

    def deleted(self, sid: str, task: str) -> None:
        self.finished.discard(sid)


@http_violation(
    FinishedSharedByTask.name,
    "an episode cached by task: while a session that finished a task is open, the task's other sessions start finished",
    (SAME_TASK,),
)
def finished_shared_by_task(app: ASGIApp, rng: random.Random, context: FaultContext) -> ASGIApp:
    return FinishedSharedByTask(app, context)


class DeleteTearsDownTask(SessionFault):
    """A sandbox shared by a task's sessions, removed by ``/delete`` of any of them: the others' tools fail."""

    name = "delete-tears-down-task-sandbox"

    def __init__(self, app: ASGIApp, context: FaultContext) -> None:
        super().__init__(app, context)
        self.called: set[str] = set()
        self.gone: set[str] = set()

    async def handle(self, scope: Scope, receive: Receive, send: Send, sid: str, body: dict[str, Any]) -> int:
        if is_call(scope) and body.get("task_id") is None and sid in self.sessions.task:
            if sid in self.gone:
                self.context.count(self.name, 200)
                task = self.sessions.task[sid]
                return await answer_stream(
                    send, (protocol.EVENT_ERROR, f"FileNotFoundError: [Errno 2] No such file or directory: '/tmp/sandbox/{abs(hash(task))}/workspace'")
                )
            self.called.add(sid)
        return await self.forward(scope, receive, send)

    def deleted(self, sid: str, task: str) -> None:
        self.called.discard(sid)
        self.gone.discard(sid)
        self.gone.update(other for other in self.sessions.on_task(task) if other in self.called)


@http_violation(
    DeleteTearsDownTask.name,
    "/delete of one session removes the sandbox its task's sessions share: the others' next calls raise FileNotFoundError",
    (DELETE,),
)
def delete_tears_down_task_sandbox(app: ASGIApp, rng: random.Random, context: FaultContext) -> ASGIApp:
    return DeleteTearsDownTask(app, context)


class FinishKeptBySid(SessionFault):
    """A finish latch in a dict keyed by sid that ``/delete`` does not clear: an id created again starts finished."""

    name = "finish-kept-by-sid"

    def __init__(self, app: ASGIApp, context: FaultContext) -> None:
        super().__init__(app, context)
        self.finished_in: dict[str, int] = {}  # sid -> the creation (1st, 2nd, ...) that finished

    async def handle(self, scope: Scope, receive: Receive, send: Send, sid: str, body: dict[str, Any]) -> int:
        if not is_call(scope) or body.get("task_id") is not None or sid not in self.sessions.task:
            return await self.forward(scope, receive, send)
        generation = self.sessions.created.get(sid, 0)
        if self.finished_in.get(sid, generation) < generation:
            self.context.count(self.name, 200)
            return await answer_stream(send, (protocol.EVENT_END, finished_error(_tool(body))))

        def watch(event: SSEEvent) -> None:
            if finished_in(event):
                self.finished_in.setdefault(sid, generation)

        return await self.forward(scope, receive, send, watch)


@http_violation(
    FinishKeptBySid.name,
    "the finish latch is kept by sid and survives /delete: an id created again after its episode finished starts finished",
    (RECREATED,),
)
def finish_kept_by_sid(app: ASGIApp, rng: random.Random, context: FaultContext) -> ASGIApp:
    return FinishKeptBySid(app, context)


class TaskIdsPerSession(SessionFault):
    """Task ids counted per session (1, 2, 3, ...) in one server-wide store: the last session's "1" wins."""

    name = "task-ids-per-session"

    def __init__(self, app: ASGIApp, context: FaultContext) -> None:
        super().__init__(app, context)
        self.counters: dict[str, int] = {}
        self.store: dict[str, str] = {}  # the server-wide store: short id -> the app's own task id

    async def handle(self, scope: Scope, receive: Receive, send: Send, sid: str, body: dict[str, Any]) -> int:
        if not is_call(scope):
            return await self.forward(scope, receive, send)
        asked = body.get("task_id")
        if asked is not None:
            if str(asked) in self.store:
                replaced = json.dumps({**body, "task_id": self.store[str(asked)]}).encode()
                return await self.forward(scope, _body(replaced, receive), _renamed(send, self.store[str(asked)], str(asked)))
            return await self.forward(scope, receive, send)
        number = self.counters[sid] = self.counters.get(sid, 0) + 1
        short = str(number)
        self.context.count(self.name)
        return await self.forward(scope, receive, _numbered(send, short, self.store))


def _body(raw: bytes, receive: Receive) -> Receive:
    """``receive`` with the request body it would replay swapped for ``raw`` (later messages — a disconnect — as before)."""
    swapped = False

    async def replay() -> Message:
        nonlocal swapped
        if not swapped:
            swapped = True
            await receive()  # the body as sent: replaced
            return {"type": "http.request", "body": raw, "more_body": False}
        return await receive()

    return replay


def _numbered(send: Send, short: str, store: dict[str, str]) -> Send:
    """A ``send`` that renames the stream's ``task_id`` event to ``short`` and files the real one under it."""

    async def renamed(message: Message) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            text = message["body"].decode("utf-8", "replace")
            marker = f"event: {protocol.EVENT_TASK_ID}\r\ndata: "
            at = text.find(marker)
            end = text.find("\r\n", at + len(marker)) if at >= 0 else -1
            if end >= 0:
                store[short] = text[at + len(marker) : end]
                message = {**message, "body": (text[: at + len(marker)] + short + text[end:]).encode()}
        await send(message)

    return renamed


def _renamed(send: Send, real: str, short: str) -> Send:
    """A ``send`` that shows a resumed stream under the short id the client asked for."""

    async def renamed(message: Message) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            marker = f"event: {protocol.EVENT_TASK_ID}\r\ndata: {real}\r\n".encode()
            message = {**message, "body": message["body"].replace(marker, f"event: {protocol.EVENT_TASK_ID}\r\ndata: {short}\r\n".encode())}
        await send(message)

    return renamed


@http_violation(
    TaskIdsPerSession.name,
    "task ids are counted per session (1, 2, 3, ...) in one server-wide store: a session resuming its '1' gets the last session's",
    (RESUME,),
)
def task_ids_per_session(app: ASGIApp, rng: random.Random, context: FaultContext) -> ASGIApp:
    return TaskIdsPerSession(app, context)


class SessionIdsRacy(SessionFault):
    """``/create_session`` hands out ids from a counter read, awaited, and written back."""

    name = "session-ids-racy"

    def __init__(self, app: ASGIApp, context: FaultContext) -> None:
        super().__init__(app, context)
        self.next = 1
        self.prefix = f"session-{uuid.uuid4().hex[:8]}-"

    async def handle(self, scope: Scope, receive: Receive, send: Send, sid: str, body: dict[str, Any]) -> int:
        if scope["path"] != protocol.CREATE_SESSION or scope["method"] != "POST":
            return await self.forward(scope, receive, send)
        number = self.next
        await asyncio.sleep(RACE_S)  # "saving" the counter
        self.next = number + 1
        await send({"type": "http.response.start", "status": 200, "headers": sse.HEADERS})
        body_out = sse.frame(protocol.EVENT_TASK_ID, f"{self.prefix}{number}") + sse.frame(protocol.EVENT_END, "")
        await send({"type": "http.response.body", "body": body_out, "more_body": False})
        return 200


@http_violation(
    SessionIdsRacy.name,
    "/create_session ids come from a counter read, awaited and written back: ids handed out at once repeat",
    (IDS,),
)
def session_ids_racy(app: ASGIApp, rng: random.Random, context: FaultContext) -> ASGIApp:
    return SessionIdsRacy(app, context)


class CurrentSessionGlobal(SessionFault):
    """A module-level "current session" set when a call starts and read after the tool's await: calls at once swap."""

    name = "current-session-global"

    def __init__(self, app: ASGIApp, context: FaultContext) -> None:
        super().__init__(app, context)
        self.current = ""

    async def handle(self, scope: Scope, receive: Receive, send: Send, sid: str, body: dict[str, Any]) -> int:
        if not is_call(scope) or body.get("task_id") is not None or sid not in self.sessions.task:
            return await self.forward(scope, receive, send)
        self.current = sid
        await asyncio.sleep(CURRENT_WINDOW_S)  # the tool awaits I/O
        if self.current != sid:
            self.context.count(self.name)
        return await self.forward(with_sid(scope, self.current), receive, send)


@http_violation(
    CurrentSessionGlobal.name,
    "a module-level current session, set when a call starts and read after the tool awaits: calls sent at once run in one another's sessions",
    (CALLS,),
)
def current_session_global(app: ASGIApp, rng: random.Random, context: FaultContext) -> ASGIApp:
    return CurrentSessionGlobal(app, context)


class PingWaitsForCall(SessionFault):
    """A per-session lock held for the whole tool call, taken by ``/ping`` too: a ping waits for the call."""

    name = "ping-waits-for-call"

    def __init__(self, app: ASGIApp, context: FaultContext) -> None:
        super().__init__(app, context)
        self.locks: dict[str, asyncio.Lock] = {}

    async def handle(self, scope: Scope, receive: Receive, send: Send, sid: str, body: dict[str, Any]) -> int:
        lock = self.locks.setdefault(sid, asyncio.Lock())
        if is_call(scope):
            async with lock:
                return await self.forward(scope, receive, send)
        if scope["path"] == protocol.PING and lock.locked():
            self.context.count(self.name)
            async with lock:
                return await self.forward(scope, receive, send)
        return await self.forward(scope, receive, send)


@http_violation(
    PingWaitsForCall.name,
    "a per-session lock is held for a whole tool call and /ping takes it: a ping waits until the call ends",
    (PING,),
    scenario="slow",
    params={"setup": 0.0, "long_call": 0.8},
)
def ping_waits_for_call(app: ASGIApp, rng: random.Random, context: FaultContext) -> ASGIApp:
    return PingWaitsForCall(app, context)


class IdleClockServerWide(SessionFault):
    """One idle clock for the whole server: a ping of any session keeps every session alive."""

    name = "idle-clock-server-wide"

    async def handle(self, scope: Scope, receive: Receive, send: Send, sid: str, body: dict[str, Any]) -> int:
        status = await self.forward(scope, receive, send)
        if scope["path"] == protocol.PING and status == 200:
            for other in self.sessions.live():
                if other != sid:
                    await self.inner(protocol.PING, other, scope)
        return status


@http_violation(
    IdleClockServerWide.name,
    "one idle clock for the whole server: a ping of any session resets every session's, so none is reaped while one is pinged",
    (TTL,),
    ttl=2.0,
    reaper_interval=0.2,
)
def idle_clock_server_wide(app: ASGIApp, rng: random.Random, context: FaultContext) -> ASGIApp:
    return IdleClockServerWide(app, context)
