"""Raw wire evidence: what was sent and what came back, before any coercion.

Checks grade evidence; they never talk to the network themselves. An
:class:`Exchange` keeps the raw body bytes, the headers as sent, and for event
streams every parsed event and comment with its arrival time.

Every exchange is built one way, whoever saw it — the wire client sending its own request, the proxy
forwarding a client's, the request log recording what a server answered, or a log entry read back
from JSON: :meth:`Exchange.begin` when the request is there, :meth:`Exchange.answer` when the answer's
head arrives, :meth:`Exchange.finish` when its body is over (:meth:`Exchange.recorded` does all three
for an exchange known whole). So the timing fields, the event stream (parsed from the body unless the
source parsed it as it came, with arrival times) and what a cut or missing answer reads as mean the
same thing in every grader, whichever front end fed it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from orsbench import protocol
from orsbench.wire.sse import SSEStream, parse

MAX_EVIDENCE_CHARS = 2000

#: ``error`` of an exchange whose request got no answer at all, when its source knows no more specific cause.
NO_ANSWER = "no answer"
#: ``error`` of an exchange whose answer began and was cut, when its source knows no more specific cause.
CUT = "the answer was cut"


@dataclass
class Exchange:
    method: str
    url: str
    request_headers: dict[str, str]
    request_body: bytes
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)  # lower-cased names
    body: bytes = b""
    #: Seconds from sending the request until the response headers arrived.
    elapsed_headers: float = 0.0
    #: Seconds from sending the request until the body was complete.
    elapsed: float = 0.0
    sse: SSEStream | None = None
    #: Monotonic time the request was sent (event times in ``sse`` are on the same clock).
    started_at: float = 0.0
    #: Transport failure (connection refused, read timeout, ...), if any.
    error: str | None = None
    #: Where a server or proxy saw the request come from: the client connection's ``host:port``
    #: (``None`` for requests orsbench sent itself). Requests of one connection come from one client
    #: process, so the client checks attribute sessionless requests by it (``clientcheck/traffic.py``).
    peer: str | None = None

    #: What readers derived from this exchange, each kept beside what it was read from (so a body or a
    #: stream replaced later is read again): the server checks and the client checks behind a proxy
    #: read the same request JSON and the same stream result, and parse each once
    #: (:func:`orsbench.checks.evidence.result_of`). Never compared or printed.
    derived: dict[str, tuple[Any, int, Any]] | None = field(default=None, repr=False, compare=False)

    # -- the one builder ------------------------------------------------------
    @classmethod
    def begin(
        cls,
        method: str,
        url: str,
        request_headers: dict[str, str],
        request_body: bytes,
        *,
        started_at: float | None = None,
        peer: str | None = None,
    ) -> Exchange:
        """A request as it is sent or arrives, before any answer (``started_at``: now on the monotonic clock).

        Observers are told of it in this state (:mod:`orsbench.wire.observe`), and the same object is then
        completed by :meth:`answer` and :meth:`finish`: what a grader is told at the start is what it is told at the end.
        """
        return cls(method, url, request_headers, request_body, started_at=time.monotonic() if started_at is None else started_at, peer=peer)

    @classmethod
    def recorded(
        cls,
        method: str,
        url: str,
        request_headers: dict[str, str],
        request_body: bytes,
        *,
        status: int | None,
        headers: dict[str, str],
        body: bytes,
        started_at: float,
        ended_at: float | None,
        complete: bool,
        peer: str | None = None,
    ) -> Exchange:
        """An exchange known whole (a request-log entry): :meth:`begin`, :meth:`answer` and :meth:`finish` at once.

        A log keeps no head time, so ``elapsed_headers`` stays 0; ``ended_at`` ``None`` means it never ended (elapsed 0).
        """
        exchange = cls.begin(method, url, request_headers, request_body, started_at=started_at, peer=peer)
        if status is not None:
            exchange.answer(status, headers, at=started_at)
        return exchange.finish(body, at=started_at if ended_at is None else ended_at, complete=complete)

    def answer(self, status: int, headers: dict[str, str] | None = None, *, at: float | None = None) -> None:
        """The answer's head arrived: its status, and its headers (names lower-cased) unless the source fills
        :attr:`headers` itself as it filters them (the proxy: no second dict per request)."""
        self.status = status
        if headers is not None:
            self.headers = headers
        self.elapsed_headers = (time.monotonic() if at is None else at) - self.started_at

    def finish(self, body: bytes, *, at: float | None = None, sse: SSEStream | None = None, complete: bool = True) -> Exchange:
        """The answer is over (or will never come): its body, its event stream, how long it took.

        ``sse``: the stream as the source parsed it while it arrived (arrival times kept); else an event
        stream body is parsed here. ``complete=False``: the answer did not end normally; unless the source
        already said why (``error`` set: a read timeout, the upstream's cut, the client's disconnect), it
        reads :data:`NO_ANSWER` or :data:`CUT`.
        """
        self.body = body
        if sse is None and self.is_sse:
            sse = parse(body)
        self.sse = sse
        self.elapsed = (time.monotonic() if at is None else at) - self.started_at
        if not complete and self.error is None:
            self.error = NO_ANSWER if self.status is None else CUT
        return self

    # -- convenience --------------------------------------------------------
    @property
    def ok(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 300

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    @property
    def content_encoding(self) -> str | None:
        """How the body came compressed (``gzip``, ``br``, ...; ``None`` for none): the body kept is decoded."""
        value = self.headers.get("content-encoding", "").strip().lower()
        return value if value and value != "identity" else None

    @property
    def is_sse(self) -> bool:
        return self.content_type.split(";")[0].strip() == "text/event-stream"

    def json(self) -> Any:
        """The body parsed as JSON (raises ``ValueError`` when it is not JSON)."""
        return json.loads(self.body)

    def json_or_none(self) -> Any:
        try:
            return self.json()
        except ValueError:
            return None

    @property
    def detail(self) -> Any:
        body = self.json_or_none()
        return body.get("detail") if isinstance(body, dict) else None

    @property
    def task_id(self) -> str | None:
        """Data of the first ``task_id`` event (the sid for ``/create_session``)."""
        if self.sse is None:
            return None
        event = self.sse.first(protocol.EVENT_TASK_ID)
        return event.data if event else None

    def reassembled(self) -> str | None:
        """``chunk`` data + ``end`` data, concatenated (:func:`orsbench.wire.sse.reassemble`); ``None`` if no ``end`` came."""
        if self.sse is None:
            return None
        return self.sse.reassembled(protocol.EVENT_CHUNK, protocol.EVENT_END)

    def result(self) -> Any:
        """The JSON result of an ORS stream (``end``), or ``None``; raises on invalid JSON."""
        text = self.reassembled()
        if text is None or text == "":
            return None
        return json.loads(text)

    @property
    def error_event(self) -> str | None:
        if self.sse is None:
            return None
        event = self.sse.first(protocol.EVENT_ERROR)
        return event.data if event else None

    def summary(self, limit: int = MAX_EVIDENCE_CHARS) -> dict[str, Any]:
        """A truncated, JSON-ready account of this exchange for reports."""

        def cut(data: bytes) -> str:
            text = data.decode("utf-8", errors="replace")
            return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more chars]"

        request_headers = {k: ("<redacted>" if k.lower() in _SECRET_HEADERS else v) for k, v in self.request_headers.items()}
        out: dict[str, Any] = {
            "request": f"{self.method} {self.url}",
            "request_headers": request_headers,
            "request_body": cut(self.request_body),
            "status": self.status,
            "headers": self.headers,
            "body": cut(self.body),
        }
        if self.error:
            out["error"] = self.error
        if self.peer:
            out["peer"] = self.peer
        return out


_SECRET_HEADERS = {"x-secrets", "x-api-key", "authorization"}
