"""The request log: every request a client under test sent, and what it got back, for grading.

``orsbench check-client`` judges a client partly from the server's end —
was each tool run once, was the session deleted, did it wait as long as
``Retry-After`` said, did it resume a cut stream by its ``task_id`` — and the
counters of ``/_orsbench/stats`` cannot say all of that. This middleware, put
*outermost* around any ORS ASGI app (the mock engine with its faults, an SDK
twin) when ``ServerConfig(request_log=True)``, records each exchange as the
client saw it: a fault's 429 or cut stream included. ``GET
/_orsbench/requests`` answers the log as JSON.

Why a middleware and not the engine: it must see what the faults answered,
and it works for every implementation alike. It also taps traffic for
*observers* (:mod:`orsbench.wire.observe`) without keeping it (``keep=False``): a grader of many clients
at once (``orsbench proxy --fault``, ``check-client --hosted``) is told of each request as
it starts and as its answer ends, with the connection it came on — the same
:class:`~orsbench.wire.evidence.Exchange`, built the same way, as the proxy tells its observers. Bounded: bodies are kept up to
:data:`BODY_LIMIT` bytes each and :data:`TOTAL_LIMIT` bytes in all, entries up
to :data:`MAX_ENTRIES` (a request storm is counted, not stored). Secrets are
never kept: ``X-Secrets`` is recorded as the *names* it carries, and
``X-API-Key``/``Authorization`` as present or not. (An observer's exchange, which lives in memory
only, carries the headers as sent, as the proxy's does: reports redact them, cassettes scrub them.)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from orsbench import protocol
from orsbench.wire.evidence import Exchange
from orsbench.wire.observe import Observer, Observers, observers as gathered
from orsbench.servers.http import ASGIApp, HTTPError, Message, RawJSON, Receive, Scope, Send, peer_of, read_body, send_json

#: Bytes of each request or response body kept.
BODY_LIMIT = 256 * 1024
#: Bytes of bodies kept over the whole log; later entries keep their facts, not their bodies.
TOTAL_LIMIT = 16 * 1024 * 1024
#: Entries kept; later requests are only counted.
MAX_ENTRIES = 5000

REDACTED = "<redacted>"
_SECRET_HEADERS = {b"x-secrets", b"x-api-key", b"authorization"}


def secret_names(header: bytes | None) -> list[str] | None:
    """The names an ``X-Secrets`` header carries (never the values); ``None`` when it is not readable."""
    from orsbench.servers.engine import parse_secrets

    if not header:
        return None
    try:
        return sorted(parse_secrets(header.decode("latin-1")))
    except HTTPError:
        return None


@dataclass
class Entry:
    """One exchange as the client saw it (times on the machine's monotonic clock)."""

    method: str
    path: str
    request_headers: dict[str, str]
    request_body: bytes
    started_at: float
    secret_names: list[str] | None = None
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytearray = field(default_factory=bytearray)
    #: The response ended normally (``False``: cut, or never answered).
    complete: bool = False
    ended_at: float | None = None
    truncated: bool = False
    #: The client connection it came on (``host:port``): which client sent it, when sessions run at once.
    peer: str | None = None

    def exchange(self) -> Exchange:
        """This exchange as the checker's :class:`Exchange` (:meth:`Exchange.recorded`: an event stream parsed; cut: ``error`` set)."""
        return Exchange.recorded(
            self.method,
            self.path,
            self.request_headers,
            self.request_body,
            status=self.status,
            headers=self.headers,
            body=bytes(self.body),
            started_at=self.started_at,
            ended_at=self.ended_at,
            complete=self.complete,
            peer=self.peer,
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Entry:
        """An entry as :meth:`to_json` wrote it (``GET /_orsbench/requests``, a matrix cell's log): the same
        record, so its :meth:`exchange` is built as a live one's is."""
        return cls(
            method=data["method"],
            path=data["path"],
            request_headers=dict(data.get("request_headers") or {}),
            request_body=(data.get("request_body") or "").encode("utf-8"),
            started_at=float(data.get("started_at") or 0.0),
            secret_names=data.get("secret_names"),
            status=data.get("status"),
            headers=dict(data.get("headers") or {}),
            body=bytearray((data.get("body") or "").encode("utf-8")),
            complete=bool(data.get("complete")),
            ended_at=data.get("ended_at"),
            truncated=bool(data.get("truncated")),
            peer=data.get("peer"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "path": self.path,
            "request_headers": self.request_headers,
            "request_body": self.request_body.decode("utf-8", "replace"),
            "secret_names": self.secret_names,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "status": self.status,
            "headers": self.headers,
            "body": bytes(self.body).decode("utf-8", "replace"),
            "complete": self.complete,
            "truncated": self.truncated,
            "peer": self.peer,
        }



class RequestLog:
    """ASGI middleware recording every exchange; serves the log at :data:`protocol.REQUEST_LOG`.

    ``keep=False``: keep nothing and serve no log — only tell the ``observers`` of each exchange.
    """

    def __init__(self, app: ASGIApp, *, keep: bool = True, observers: Sequence[Observer] | Observers = ()) -> None:
        self.app = app
        self.keep = keep
        #: Told of each request as it starts and as its answer ends (:mod:`orsbench.wire.observe`).
        self.observers = gathered(observers)
        self.entries: list[Entry] = []
        self.total = 0
        self._kept_bytes = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in (protocol.HEALTH, protocol.STATS):
            await self.app(scope, receive, send)
            return
        if self.keep and scope["path"] == protocol.REQUEST_LOG:
            await send_json(send, 200, self.snapshot())
            return
        self.total += 1
        if self.keep and len(self.entries) >= MAX_ENTRIES:
            await self.app(scope, receive, send)
            return
        body, receive = await read_body(receive, limit=BODY_LIMIT)
        observers = self.observers
        headers: dict[str, str] = {}
        sent: dict[str, str] = {}  # as the client sent them, for the observers' exchange (the log keeps ``headers``)
        secrets = None
        for key, value in scope.get("headers") or ():
            name, text = key.decode("latin-1"), value.decode("latin-1")
            if key in _SECRET_HEADERS:
                if key == b"x-secrets":
                    secrets = secret_names(value)
                headers[name] = REDACTED
                if observers:
                    sent[name] = text
            else:
                headers[name] = sent[name] = text
        path = scope["path"]
        entry = Entry(scope["method"], path, headers, self._keep(body[:BODY_LIMIT]), time.monotonic(), secrets, peer=peer_of(scope))
        if self.keep:
            self.entries.append(entry)
        seen = Exchange.begin(entry.method, path, sent, entry.request_body, started_at=entry.started_at, peer=entry.peer) if observers else None
        if seen is not None:
            observers.started(seen, path)

        async def recording_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                entry.status = int(message["status"])
                entry.headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in message.get("headers", [])}
                if seen is not None:
                    seen.answer(entry.status, entry.headers)
            elif message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                room = BODY_LIMIT - len(entry.body)
                if self.keep:
                    room = min(room, TOTAL_LIMIT - self._kept_bytes)
                if len(chunk) > room:
                    entry.truncated = True
                    chunk = chunk[: max(0, room)]
                entry.body += chunk
                if self.keep:
                    self._kept_bytes += len(chunk)
                if not message.get("more_body"):
                    entry.complete = True
                    entry.ended_at = time.monotonic()
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            if entry.ended_at is None:
                entry.ended_at = time.monotonic()
            if seen is not None:
                observers.ended(seen.finish(bytes(entry.body), at=entry.ended_at, complete=entry.complete), path)

    def _keep(self, body: bytes) -> bytes:
        if not self.keep:
            return body
        if self._kept_bytes + len(body) > TOTAL_LIMIT:
            return b""
        self._kept_bytes += len(body)
        return body

    def snapshot(self) -> RawJSON:
        return RawJSON(
            orjson.dumps({"total": self.total, "kept": len(self.entries), "entries": [e.to_json() for e in self.entries]})
        )
