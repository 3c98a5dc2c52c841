"""ASGI middlewares that make an ORS server misbehave: the toolkit of every HTTP fault.

Each class here wraps *any* ORS ASGI app — the mock engine, the SDK twin, a
reverse proxy in front of a real server — and sees only what an ASGI
middleware sees: the scope, the request messages and the response messages.
It knows the protocol's paths and headers (:mod:`orsbench.protocol`), reads
event streams with the one SSE parser (:mod:`orsbench.wire.sse`) and writes
them with the server-side framer (:mod:`orsbench.servers.sse`).

``/health``, ``/_orsbench/stats`` and ``/_orsbench/requests`` (:data:`EXEMPT_PATHS`) pass every
middleware untouched: launchers wait on the first, tests read the second, the client checks
grade from the third (through a fault-injecting proxy too).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from orsbench import protocol
from orsbench.servers import sse
from orsbench.servers.faults import FaultContext
from orsbench.servers.http import (
    ASGIApp,
    Headers,
    Message,
    Receive,
    Scope,
    Send,
    is_event_stream,
    json_object,
    read_body,
    send_detail,
    session_id,
)
from orsbench.wire.sse import SSEComment, SSEEvent, SSEParser

#: Paths no fault ever touches.
EXEMPT_PATHS = frozenset({protocol.HEALTH, protocol.STATS, protocol.REQUEST_LOG})

Answer = tuple[int, Any, Headers]
Decision = Callable[[Scope], Awaitable[Answer | None]]


def faultable(scope: Scope) -> bool:
    """Whether a fault may act on this request (HTTP, and not an exempt path)."""
    return scope["type"] == "http" and scope["path"] not in EXEMPT_PATHS


def is_call(scope: Scope) -> bool:
    """``POST /{env}/call`` (or a bare ``/call``, which the server redirects)."""
    return scope["type"] == "http" and scope["method"] == "POST" and protocol.is_call(scope["path"])


def is_resume(body: bytes) -> bool:
    """Whether a ``/call`` body asks to resume a task by ``task_id``."""
    return json_object(body).get("task_id") is not None


class Intercept:
    """Answers some requests itself before the app sees them.

    ``decide(scope)`` returns ``None`` to pass the request on, or
    ``(status, detail, headers)`` to answer it with a JSON ``{"detail": ...}``
    — the shape a proxy or the reference server would use.
    """

    def __init__(self, app: ASGIApp, name: str, decide: Decision, context: FaultContext) -> None:
        self.app, self.name, self.decide, self.context = app, name, decide, context

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not faultable(scope):
            await self.app(scope, receive, send)
            return
        answer = await self.decide(scope)
        if answer is None:
            await self.app(scope, receive, send)
            return
        status, detail, headers = answer
        await send_detail(send, status, detail, headers)
        self.context.count(self.name, status)


# -- cut streams ----------------------------------------------------------------------------
CutMode = Literal["drop", "no-end", "stall", "before-task-id"]


def encode(item: SSEEvent | SSEComment) -> bytes:
    """One parsed SSE item written back in the server's framing."""
    if isinstance(item, SSEComment):
        return b":" + item.text.encode() + b"\r\n\r\n"
    return sse.frame(item.event, item.data)


class CutStreams:
    """``/call`` streams that send their ``task_id`` event and then misbehave.

    ``mode`` is ``"drop"`` (the connection is closed mid-response, as when a
    proxy or pod dies), ``"before-task-id"`` (the same, but before the
    ``task_id`` event: the client cannot resume, the tool ran anyway), ``"no-end"`` (the response ends cleanly with no
    ``end``/``error`` event) or ``"stall"`` (silence — keep-alives swallowed —
    for ``stall_s`` seconds after the ``task_id``, then the rest). Resumes (a
    body with ``task_id``) pass untouched unless ``resumes_too``; a stream whose
    first event is not ``task_id`` (an unknown ``task_id``) always passes; with
    ``select``, only the streams it answers True for are cut (it is asked once a
    stream's first event is a ``task_id``, so a redirect or a 4xx never counts).

    The app behind keeps running when the client is cut off: its remaining
    output is discarded, and the task stays resumable on the server.
    """

    def __init__(
        self,
        app: ASGIApp,
        name: str,
        mode: CutMode,
        context: FaultContext,
        *,
        stall_s: float = 0.0,
        resumes_too: bool = False,
        select: Callable[[Scope], bool] | None = None,
    ) -> None:
        self.app, self.name, self.mode, self.context = app, name, mode, context
        self.stall_s, self.resumes_too, self.select = stall_s, resumes_too, select
        self._behind: set[asyncio.Task[None]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not is_call(scope):
            await self.app(scope, receive, send)
            return
        body, receive = await read_body(receive, limit=1 << 20)
        if not self.resumes_too and is_resume(body):
            await self.app(scope, receive, send)
            return
        cut = _Cut(self, send, scope)
        inner = asyncio.ensure_future(self.app(scope, receive, cut.send))
        finished = asyncio.ensure_future(cut.finished.wait())
        await asyncio.wait({inner, finished}, return_when=asyncio.FIRST_COMPLETED)
        finished.cancel()
        if inner.done():
            inner.result()
            return
        # The client is gone (or done); the app finishes on its own, its output discarded.
        self._behind.add(inner)
        inner.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self._behind.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: an app error after the cut is not the client's concern


class _Cut:
    """The ``send`` of one cut stream: passes the head through, then applies the mode."""

    def __init__(self, owner: CutStreams, send: Send, scope: Scope) -> None:
        self.owner, self.downstream, self.scope = owner, send, scope
        self.finished = asyncio.Event()
        self.state: Literal["start", "head", "pass", "cut", "done"] = "start"
        self.parser = SSEParser()
        self.held: list[bytes] = []
        self.cut_at = 0.0

    async def send(self, message: Message) -> None:
        if self.state == "done":
            return
        kind = message["type"]
        if kind == "http.response.start":
            streaming = message["status"] == 200 and is_event_stream(message.get("headers", []))
            self.state = "head" if streaming else "pass"
            await self.downstream(message)
            return
        if kind != "http.response.body" or self.state == "pass":
            await self.downstream(message)
            return
        more = bool(message.get("more_body"))
        items = self.parser.feed(message.get("body", b""))
        if self.state == "head":
            items = await self._head(items, more)
        if self.state == "cut":
            await self._after_head(items, more)

    async def _head(self, items: list[SSEEvent | SSEComment], more: bool) -> list[SSEEvent | SSEComment]:
        """Pass items up to the first event; cut there if it is ``task_id``. Returns what follows it."""
        for i, item in enumerate(items):
            if isinstance(item, SSEComment):
                continue
            if item.event != protocol.EVENT_TASK_ID or (self.owner.select is not None and not self.owner.select(self.scope)):
                self.state = "pass"
                await self.downstream({"type": "http.response.body", "body": self._join(items), "more_body": more})
                return []
            if self.owner.mode == "before-task-id":
                self.owner.context.count(self.owner.name)
                self.state = "cut"
                self._done()  # headers sent, no event: the connection drops before the client learns the task_id
                return []
            head = self._join(items[: i + 1])
            await self.downstream({"type": "http.response.body", "body": head, "more_body": True})
            self.owner.context.count(self.owner.name)
            self.state, self.cut_at = "cut", time.monotonic()
            if self.owner.mode == "drop":
                self._done()  # returning without completing the response: the server drops the connection
            elif self.owner.mode == "no-end":
                await self.downstream({"type": "http.response.body", "body": b"", "more_body": False})
                self._done()
            return items[i + 1 :]
        if not more:  # the stream ended before any event: pass what there was
            self.state = "pass"
            await self.downstream({"type": "http.response.body", "body": self._join(items), "more_body": False})
        else:
            self.held.append(self._join(items))
        return []

    async def _after_head(self, items: list[SSEEvent | SSEComment], more: bool) -> None:
        """Stall mode: hold the events (keep-alives dropped) until the stall is over, then send."""
        self.held.append(b"".join(encode(x) for x in items if isinstance(x, SSEEvent)))
        if more:
            return
        await asyncio.sleep(max(0.0, self.cut_at + self.owner.stall_s - time.monotonic()))
        await self.downstream({"type": "http.response.body", "body": b"".join(self.held), "more_body": False})
        self._done()

    def _join(self, items: list[SSEEvent | SSEComment]) -> bytes:
        held, self.held = b"".join(self.held), []
        return held + b"".join(encode(x) for x in items)

    def _done(self) -> None:
        self.state = "done"
        self.finished.set()


# -- idle sessions ------------------------------------------------------------------------
class ReapIdle:
    """Sessions idle for more than ``ttl`` seconds are deleted, as a server's TTL reaper would.

    At the HTTP level the reaping is lazy: the first request for a session idle
    too long first sends the app a ``POST /delete`` for it (so the server tears
    it down), then goes through — and meets the server's own 404. A client sees
    what it would see from a real reaper. Every request carrying the session's
    ``X-Session-ID`` counts as activity (as ``/ping`` does on the reference).
    """

    def __init__(self, app: ASGIApp, name: str, ttl: float, context: FaultContext) -> None:
        self.app, self.name, self.ttl, self.context = app, name, ttl, context
        self.last_seen: dict[str, float] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sid = session_id(scope) if faultable(scope) else ""
        if not sid:
            await self.app(scope, receive, send)
            return
        now = time.monotonic()
        seen = self.last_seen.get(sid)
        if seen is not None and now - seen > self.ttl:
            del self.last_seen[sid]
            await self._delete(scope, sid)
            self.context.count(self.name)
        status = 0

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        await self.app(scope, receive, watch)
        path = scope["path"]
        if path == protocol.DELETE:
            self.last_seen.pop(sid, None)
        elif (path == protocol.CREATE and status == 200) or sid in self.last_seen:
            self.last_seen[sid] = time.monotonic()

    async def _delete(self, scope: Scope, sid: str) -> None:
        """``POST /delete`` for ``sid`` sent to the app; its answer is not the client's."""
        await post_on_own_account(self.app, scope, protocol.DELETE, sid)


async def post_on_own_account(app: ASGIApp, scope: Scope, path: str, sid: str) -> None:
    """Send ``app`` an empty ``POST path`` for ``sid`` on the server's own account: its answer is not the client's.

    The request keeps the client's host and credentials (so an app that checks them answers it) and nothing else.
    """
    headers = [(k, v) for k, v in scope.get("headers", []) if k in (b"host", b"x-api-key", b"authorization")]
    headers.append((protocol.SESSION_HEADER_RAW, sid.encode()))
    request = {**scope, "method": "POST", "path": path, "raw_path": path.encode(), "query_string": b"", "headers": headers}
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": b"", "more_body": False}
        return {"type": "http.disconnect"}

    async def discard(message: Message) -> None:
        return None

    await app(request, receive, discard)


# -- rewriting answers --------------------------------------------------------------------
EventFn = Callable[[str, str, dict[str, Any]], "list[tuple[str, str] | bytes]"]


class RewriteStream:
    """Rewrites the SSE answers of one route, event by event.

    ``on_event(name, data, state)`` returns what to send instead: ``(name, data)``
    pairs (re-framed by the server-side framer) or raw bytes; comments go
    through ``on_comment``. ``state`` lives for one response.
    """

    def __init__(
        self, app: ASGIApp, route: str, on_event: EventFn | None = None, on_comment: Callable[[bytes], bytes] | None = None
    ) -> None:
        self.app, self.suffix, self.on_event, self.on_comment = app, "/" + route, on_event, on_comment

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].endswith(self.suffix):
            await self.app(scope, receive, send)
            return
        state: dict[str, Any] = {}
        streaming = False

        async def rewrite(message: Message) -> None:
            nonlocal streaming
            if message["type"] == "http.response.start":
                streaming = is_event_stream(message["headers"])
            elif message["type"] == "http.response.body" and streaming and message.get("body"):
                message = {**message, "body": self._rewrite(message["body"], state)}
            await send(message)

        await self.app(scope, receive, rewrite)

    def _rewrite(self, body: bytes, state: dict[str, Any]) -> bytes:
        out: list[bytes] = []
        for item in SSEParser().feed(body):
            if isinstance(item, SSEComment):
                raw = encode(item)
                out.append(self.on_comment(raw) if self.on_comment else raw)
                continue
            replaced = self.on_event(item.event, item.data, state) if self.on_event else [(item.event, item.data)]
            for piece in replaced:
                out.append(piece if isinstance(piece, bytes) else sse.frame(*piece))
        return b"".join(out)


def on_result(change: Callable[[dict[str, Any]], dict[str, Any] | tuple[str, str]]) -> EventFn:
    """An ``on_event`` that edits single-event ``end`` results (chunked ones pass untouched)."""

    def on_event(name: str, data: str, state: dict[str, Any]) -> list[tuple[str, str] | bytes]:
        if name == protocol.EVENT_CHUNK:
            state["chunked"] = True
        if name != protocol.EVENT_END or state.get("chunked"):
            return [(name, data)]
        try:
            result = json.loads(data)
        except ValueError:
            return [(name, data)]
        changed = change(result)
        if isinstance(changed, tuple):
            return [changed]
        return [(name, json.dumps(changed, separators=(",", ":")))]

    return on_event


def on_output(change: Callable[[dict[str, Any]], None]) -> EventFn:
    """Edit the ``output`` of ok:true results in place."""

    def edit(result: dict[str, Any]) -> dict[str, Any]:
        if result.get("ok") is True and isinstance(result.get("output"), dict):
            change(result["output"])
        return result

    return on_result(edit)


Match = Callable[[Scope, int, Headers], bool]
Edit = Callable[[int, Headers], tuple[int, Headers, bytes | None]]


class RewriteHeaders:
    """Edits the status and headers (and optionally replaces the body) of some answers."""

    def __init__(self, app: ASGIApp, match: Match, edit: Edit) -> None:
        self.app, self.match, self.edit = app, match, edit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not faultable(scope):
            await self.app(scope, receive, send)
            return
        replaced_body: bytes | None = None

        async def rewrite(message: Message) -> None:
            nonlocal replaced_body
            if message["type"] == "http.response.start" and self.match(scope, message["status"], message["headers"]):
                status, headers, replaced_body = self.edit(message["status"], list(message["headers"]))
                message = {**message, "status": status, "headers": headers}
            elif message["type"] == "http.response.body" and replaced_body is not None:
                message = {**message, "body": replaced_body if not message.get("more_body") else b""}
                if not message.get("more_body"):
                    replaced_body = b""
            await send(message)

        await self.app(scope, receive, rewrite)


def status_is(*statuses: int) -> Match:
    """A :class:`RewriteHeaders` match for answers with one of ``statuses``."""

    def match(scope: Scope, status: int, headers: Headers) -> bool:
        return status in statuses

    return match

