"""Raw wire evidence: what was sent and what came back, before any coercion.

Checks grade evidence; they never talk to the network themselves. An
:class:`Exchange` keeps the raw body bytes, the headers as sent, and for event
streams every parsed event and comment with its arrival time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from orsbench import protocol
from orsbench.wire.sse import SSEStream

MAX_EVIDENCE_CHARS = 2000


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
