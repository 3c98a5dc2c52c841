"""The HTTP layer every orsbench server piece shares: ASGI types, requests, responses.

Why one module: the engine, the fault middlewares, the violation router and the
bench floor all speak raw ASGI, and each used to spell the ASGI types, the JSON
answer and the request-body loop itself. Here they are written once, so a fault
or a proxy can do what the engine does (answer ``{"detail": ...}``, read and
replace a body, stream SSE) through a public API instead of the engine's
internals.

Nothing here knows about sessions, scenarios or the engine: it is plain HTTP as
ORS uses it (JSON bodies, FastAPI-shaped 422 details, ``X-Session-ID``).
"""

from __future__ import annotations

import json
from typing import Any, Awaitable, Callable, Iterable

import orjson
from pydantic import BaseModel, ValidationError

from orsbench import protocol
from orsbench.servers import sse

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
#: Any ASGI 3 application: the engine, a middleware around it, a proxy.
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]

JSON_TYPE_HEADER: tuple[bytes, bytes] = (b"content-type", protocol.JSON_CONTENT_TYPE.encode())


class HTTPError(Exception):
    """An error answer: status, JSON ``detail``, extra headers."""

    def __init__(self, status: int, detail: Any, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
        self.status, self.detail, self.headers = status, detail, list(headers)


# ---------------------------------------------------------------- responses
class RawJSON:
    """Pre-encoded JSON bytes, sent as they are (a handler's cached answer)."""

    __slots__ = ("payload",)

    def __init__(self, payload: bytes) -> None:
        self.payload = payload

    def decoded(self) -> Any:
        return orjson.loads(self.payload)


class EventStream:
    """An SSE answer whose whole body is known up front (``/create_session``, an unknown ``task_id``).

    Subclasses that stream over time override :meth:`run`.
    """

    __slots__ = ("body",)  # one per held stream: no instance dict

    def __init__(self, body: bytes = b"") -> None:
        self.body = body

    async def run(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": sse.HEADERS})
        await send({"type": "http.response.body", "body": self.body, "more_body": False})


async def run_lifespan(
    receive: Receive,
    send: Send,
    startup: Callable[[], Awaitable[None]] | None = None,
    shutdown: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Answer the ASGI lifespan protocol: ``startup`` runs before startup completes, ``shutdown`` before shutdown does."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            if startup is not None:
                await startup()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            if shutdown is not None:
                await shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return


def plain(result: Any) -> Any:
    """A handler's JSON result as Python data (:class:`RawJSON` payloads decoded)."""
    return result.decoded() if isinstance(result, RawJSON) else result


async def send_json(send: Send, status: int, content: Any, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    """Answer ``content`` as JSON (``None``: an empty body, as for redirects)."""
    if content is None:
        body = b""
        out = list(headers)
    else:
        body = content.payload if isinstance(content, RawJSON) else orjson.dumps(content)
        out = [JSON_TYPE_HEADER, *headers] if headers else [JSON_TYPE_HEADER]
    out.append((b"content-length", b"%d" % len(body)))
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body})


async def send_detail(send: Send, status: int, detail: Any, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    """Answer ``{"detail": detail}``: the error shape of the reference server and of proxies."""
    await send_json(send, status, {"detail": detail}, headers)


async def send_bytes(send: Send, status: int, body: bytes, content_type: bytes) -> None:
    """Answer ``body`` as it is, labelled ``content_type``."""
    headers = [(b"content-type", content_type), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def set_header(headers: Headers, name: bytes, value: bytes) -> Headers:
    """``headers`` with every ``name`` header replaced by one ``name: value``."""
    return [(k, v) for k, v in headers if k.lower() != name] + [(name, value)]


def header(scope: Scope, name: bytes) -> bytes | None:
    """The last value of the lower-case header ``name`` in an ASGI scope."""
    found = None
    for k, v in scope.get("headers") or ():
        if k == name:
            found = v
    return found


def session_id(scope: Scope) -> str:
    """The session id an ASGI scope carries (its last ``X-Session-ID``), stripped; ``""`` where it carries none."""
    raw = header(scope, protocol.SESSION_HEADER_RAW)
    return raw.decode("latin-1").strip() if raw else ""


def peer_of(scope: Scope) -> str | None:
    """The client connection a request came on, as ``host:port`` (ASGI's ``scope["client"]``), if the server says.

    One connection carries the requests of one client process at a time, so a grader of many clients
    at once (``orsbench proxy``, ``check-client --hosted``) attributes sessionless requests by it.
    """
    client = scope.get("client")
    if not client:
        return None
    host, port = client[0], client[1]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def is_event_stream(headers: Headers) -> bool:
    return any(k == b"content-type" and v.startswith(b"text/event-stream") for k, v in headers)


# ---------------------------------------------------------------- request bodies
async def read_body(receive: Receive, limit: int | None = None) -> tuple[bytes, Receive]:
    """Read a whole request body off ``receive``; returns it and a ``receive`` that replays it.

    For middlewares that must look at a body (is this ``/call`` a resume?) and
    still hand the untouched request on. ``limit`` stops reading past that many
    bytes (the rest is left for the app, which answers 413 itself).
    """
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        more = bool(message.get("more_body"))
        if limit is not None and size > limit:
            break
    body = b"".join(chunks)
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return body, replay


def json_object(raw: bytes) -> dict[str, Any]:
    """``raw`` as a JSON object, or ``{}`` when it is not one (for faults that peek at bodies)."""
    try:
        data = json.loads(raw or b"{}")
    except (ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


#: Header name as asked for → its lower-case ASGI bytes (the code asks for a handful of names).
_HEADER_KEYS: dict[str, bytes] = {}


class Request:
    """The little of an HTTP request the handlers need.

    Headers are looked up in the raw ASGI list on demand: a handler reads one or
    two of them, so decoding all of them for every request would cost more than
    the lookups. :attr:`headers` still gives the whole decoded dict when asked.
    """

    __slots__ = ("scope", "receive", "method", "path", "_headers", "max_body", "_body")

    def __init__(self, scope: Scope, receive: Receive, max_body: int) -> None:
        self.scope, self.receive, self.max_body = scope, receive, max_body
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        self._headers: dict[str, str] | None = None
        self._body: bytes | None = None

    @property
    def headers(self) -> dict[str, str]:
        """All headers, decoded (names as the server passed them: lower-case under ASGI)."""
        if self._headers is None:
            self._headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in self.scope["headers"]}
        return self._headers

    @headers.setter
    def headers(self, value: dict[str, str]) -> None:
        self._headers = value  # faults may replace the headers a handler sees

    def header(self, name: str) -> str | None:
        if self._headers is not None:
            return self._headers.get(name.lower())
        key = _HEADER_KEYS.get(name)
        if key is None:
            key = name.lower().encode("latin-1")
            if len(_HEADER_KEYS) < 64:
                _HEADER_KEYS[name] = key
        found = None
        for k, v in self.scope["headers"]:
            if k == key:
                found = v  # the last one wins, as in the dict
        return None if found is None else found.decode("latin-1")

    @property
    def session_id(self) -> str | None:
        """``X-Session-ID``, stripped; ``None`` when missing or empty."""
        return (self.header(protocol.SESSION_HEADER) or "").strip() or None

    @property
    def sid(self) -> str:
        """``X-Session-ID``, stripped; 400 when missing or empty (reference ``extract_sid``)."""
        sid = (self.header("x-session-id") or "").strip()
        if not sid:
            raise HTTPError(400, protocol.DETAIL_SID_REQUIRED)
        return sid

    async def body(self) -> bytes:
        if self._body is not None:
            return self._body
        length = self.header("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            raise HTTPError(413, f"Request body too large: {length} bytes; the limit is {self.max_body} bytes.")
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise HTTPError(413, f"Request body too large: over {self.max_body} bytes.")
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        self._body = b"".join(chunks)
        return self._body

    async def json_body(self) -> dict[str, Any]:
        """The body as a JSON object, ``{}`` when it is not one (never raises on bad JSON)."""
        return json_object(await self.body())

    def replace_body(self, body: bytes) -> None:
        """Make the handlers read ``body`` instead of what the client sent (a hook's rewrite)."""
        self._body = body

    async def parse(self, model: type[BaseModel]) -> Any:
        """Validate the JSON body against ``model``; 422 with FastAPI-shaped details."""
        raw = await self.body()
        if not raw.strip():
            raise HTTPError(422, [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}])
        try:
            return model.model_validate_json(raw)
        except ValidationError as exc:
            raise HTTPError(422, validation_detail(exc, raw)) from None


def validation_detail(exc: ValidationError, raw: bytes, prefix: tuple[str, ...] = ("body",)) -> list[dict[str, Any]]:
    """FastAPI's 422 detail list: ``loc`` prefixed with ``body``, exceptions in ``ctx`` as ``{}``."""
    details = []
    for err in exc.errors(include_url=False):
        if err["type"] == "json_invalid":
            # As FastAPI: the position and message of the stdlib decoder; the raw text is not echoed.
            try:
                json.loads(raw)
                position, message = 0, err["msg"]
            except ValueError as decode_error:
                position = getattr(decode_error, "pos", 0)
                message = getattr(decode_error, "msg", str(decode_error))
            details.append({"type": "json_invalid", "loc": ["body", position], "msg": "JSON decode error", "input": {}, "ctx": {"error": message}})
            continue
        item: dict[str, Any] = {"type": err["type"], "loc": [*prefix, *err["loc"]], "msg": err["msg"], "input": _redact(err.get("input"), err["loc"])}
        if "ctx" in err:
            item["ctx"] = {k: (v if isinstance(v, (str, int, float, bool, type(None))) else {}) for k, v in err["ctx"].items()}
        details.append(_jsonable(item))
    return details


def _redact(value: Any, loc: tuple[Any, ...]) -> Any:
    """Never echo secrets: a ``secrets`` body field (as the ORS guides send it) comes back redacted."""
    if "secrets" in loc:
        return "<redacted>"
    if isinstance(value, dict) and "secrets" in value:
        return {**value, "secrets": "<redacted>"}
    return value


def _jsonable(value: Any) -> Any:
    try:
        orjson.dumps(value)
        return value
    except TypeError:
        # orjson refuses integers beyond 64 bits; such an echoed input comes back as its decimal string.
        return json.loads(json.dumps(value, default=repr), parse_int=_int_or_text)


def _int_or_text(text: str) -> int | str:
    number = int(text)
    return number if -(1 << 63) <= number < (1 << 64) else text
