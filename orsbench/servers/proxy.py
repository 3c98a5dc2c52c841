"""A transparent ORS reverse proxy as an ASGI app: forward, stream, observe.

``orsbench proxy UPSTREAM`` serves :class:`ProxyApp`. Every request is
forwarded to the upstream over a keep-alive connection of
:class:`~orsbench.servers.origin_pool.UpstreamPool` and its answer is streamed
back as it arrives — each upstream read is one ASGI body message, so SSE
keep-alives, chunk boundaries and their timing reach the client as the
upstream sent them. A stream the upstream cuts is cut for the client too (the
app returns without completing the response), and a stream that stalls
stalls: the proxy adds no timeout of its own to a read.

What passes through is also handed, as one
:class:`~orsbench.wire.evidence.Exchange` per request (raw bytes, headers,
parsed SSE events with arrival times, the client connection it came on), to the
*observers* plugged in (:mod:`orsbench.wire.observe`: told as each request starts and as its
answer ends) — the passive server and client graders and the cassette recorder, composed by
:mod:`orsbench.clientcheck.proxy_grading` — so the proxy itself judges nothing and writes nothing. Local routes (``GET /_orsbench/report``)
are answered by callables the front end provides.

The proxy forwards with the upstream's own ``Host`` and rewrites a
``Location`` pointing into the upstream back onto the proxy, the way a
reverse proxy must for the default-environment redirect to stay usable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import orjson

from orsbench import protocol
from orsbench.servers.http import peer_of, run_lifespan
from orsbench.servers.origin_pool import Aborted, UpstreamConnection, UpstreamError, UpstreamPool, UpstreamResponse
from orsbench.wire.client import add_secrets
from orsbench.wire.evidence import Exchange
from orsbench.wire.observe import Observer, Observers, observers as gathered
from orsbench.wire.sse import SSEParser

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

#: A local route: returns ``(status, content_type, body)``.
LocalRoute = Callable[[], tuple[int, str, bytes]]

#: The headers that carry a client's own key (then ``--api-key`` adds none).
_API_KEY_HEADER = protocol.API_KEY_HEADER.encode("latin-1")
_API_KEY_LOWER = _API_KEY_HEADER.lower()
_KEY_HEADERS = frozenset({_API_KEY_LOWER, b"authorization"})

#: Hop-by-hop headers (RFC 9110 §7.6.1) are the connection's, never forwarded.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)

_HOP_BY_HOP_BYTES = frozenset(n.encode() for n in HOP_BY_HOP)
#: Request headers the proxy writes itself: the body's length (it has read the whole body; the
#: client may have sent it chunked), and ``expect`` (a 100-continue was the proxy's to answer).
_FRAMING = frozenset({b"content-length", b"expect"})

#: Header names and values up to this long are decoded once and shared (:meth:`ProxyApp._text`).
_SHARED_TEXT_MAX = 128
#: At most this many shared strings (the table starts over when full).
_SHARED_TEXTS = 4096

#: Headers the proxy's own HTTP server writes (uvicorn adds date and server to every answer).
OWN_HEADERS = frozenset({"date", "server"})

#: The prefix of the proxy's own routes (also the upstream's, if it is an orsbench server:
#: only the routes registered locally are answered here; the rest are forwarded).
LOCAL_PREFIX = "/_orsbench/"


def _with_secrets(headers: list[tuple[bytes, bytes]], secrets: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    """``headers`` with the operator's secrets merged into ``X-Secrets`` (the client's own entries kept)."""
    wanted = protocol.SECRETS_HEADER.lower().encode("latin-1")
    sent = next((v.decode("latin-1") for k, v in headers if k.lower() == wanted), None)
    merged = add_secrets(sent, secrets).encode("latin-1")
    return [(k, v) for k, v in headers if k.lower() != wanted] + [(protocol.SECRETS_HEADER.encode("latin-1"), merged)]


class Forwarding(NamedTuple):
    """One request on its way upstream (:meth:`ProxyApp.begin`)."""

    #: Path and query as sent upstream (the upstream URL's own path first).
    target: str
    #: The headers sent upstream (the pool adds ``Host`` and ``Content-Length``).
    headers: list[tuple[bytes, bytes]]
    #: The evidence: what the client sent, and (filled in as it comes) what it got.
    exchange: Exchange
    #: ``scheme://host`` the client reached the proxy by (a ``Location`` into the upstream is rewritten onto it).
    proxy_origin: str
    #: The route the client asked for (the path the observers are told).
    path: str


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class ProxyApp:
    """Forward every HTTP request to ``upstream``; tell ``observers`` of each exchange as it starts and as it ends."""

    def __init__(
        self,
        upstream: str,
        *,
        observers: Sequence[Observer] | Observers = (),
        routes: Mapping[str, LocalRoute] | None = None,
        on_shutdown: Sequence[Callable[[], None]] = (),
        connect_timeout: float = 10.0,
        secrets: Mapping[str, str] | None = None,
        api_key: str | None = None,
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"upstream must be an http(s) URL like http://127.0.0.1:8000, got {upstream!r}")
        self.upstream = upstream.rstrip("/")
        self.upstream_origin = _origin(self.upstream)
        self._base_path = parts.path.rstrip("/")
        #: Told of each request as it starts (before its answer) and as its answer ends, in list order.
        self.observers = gathered(observers)
        #: Added to every ``/create`` sent upstream as ``X-Secrets`` (``--secret``; docs/protocol.md §14).
        self._secrets = dict(secrets or {})
        #: Added as ``X-API-Key`` to every request that carries no key of its own (``--api-key``); like the
        #: secrets, after the evidence is taken: never in a report or a cassette.
        self._api_key = api_key.encode("latin-1") if api_key else None
        self.routes = dict(routes or {})
        #: Run at lifespan shutdown (SIGINT/SIGTERM): where the front end writes its reports.
        #: (uvicorn re-raises the signal once it has shut down, so code after ``run()`` never runs.)
        self.on_shutdown = list(on_shutdown)
        self._connect_timeout = connect_timeout
        self._pool: UpstreamPool | None = None
        self._texts: dict[bytes, str] = {}
        self._urls: dict[str, str] = {}  # the same: one string per URL (bounded, never cleared: URLs repeat)
        #: Exchanges forwarded so far (the live report says how much traffic it judged).
        self.forwarded = 0

    # -- ASGI ---------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            route = self.routes.get(scope["path"]) if scope["method"] == "GET" else None
            if route is not None:
                status, content_type, body = route()
                await _answer(send, status, body, content_type)
                return
            await self._forward(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        async def shutdown() -> None:
            await self.aclose()
            for hook in self.on_shutdown:
                hook()

        await run_lifespan(receive, send, shutdown=shutdown)

    @property
    def pool(self) -> UpstreamPool:
        if self._pool is None:
            # No connection limit: a trainer's parallel episodes must not queue behind a pool.
            self._pool = UpstreamPool(self.upstream_origin, connect_timeout=self._connect_timeout)
        return self._pool

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()
            self._pool = None

    # -- forwarding -----------------------------------------------------------------
    def begin(
        self, method: str, path: str, raw_path: bytes, query: bytes, headers: Iterable[tuple[bytes, bytes]], body: bytes,
        *, scheme: str = "http", peer: str | None = None,
    ) -> Forwarding:  # fmt: skip
        """A request from a client, ready to go upstream: its target, the headers to send, the evidence exchange.

        Shared by both fronts (the ASGI app under uvicorn, :mod:`.proxy_server` on the socket): hop-by-hop
        headers and ``Host`` stay behind, the framing headers are the pool's to write, the operator's secrets
        and key are added after the evidence is taken; the observers are told it started.
        """
        suffix = ("?" + query.decode("latin-1")) if query else ""
        target = self._base_path + raw_path.decode("latin-1") + suffix
        client_host = "127.0.0.1"
        text, texts = self._text, self._texts
        out: list[tuple[bytes, bytes]] = []  # to the upstream
        seen: dict[str, str] = {}  # in the evidence: what the client sent, less the connection's own
        for key, value in headers:
            name = key.lower()
            if name == b"host":
                client_host = value.decode("latin-1")
                continue
            if name in _HOP_BY_HOP_BYTES:
                continue
            # the shared strings looked up here, not through a call per header: this runs on every request
            seen[texts.get(key) or text(key)] = texts.get(value) or text(value)
            if name not in _FRAMING:
                out.append((key, value))
        proxy_origin = f"{scheme}://{client_host}"
        url = proxy_origin + path + suffix
        if len(self._urls) < _SHARED_TEXTS:
            url = self._urls.setdefault(url, url)
        exchange = Exchange.begin(method, url, seen, body, peer=peer)
        for started in self.observers.on_start:
            started(exchange, path)
        if self._secrets and path == protocol.CREATE:
            out = _with_secrets(out, self._secrets)
        if self._api_key is not None and not any(k.lower() in _KEY_HEADERS and v.strip() for k, v in out):
            out = [(k, v) for k, v in out if k.lower() != _API_KEY_LOWER] + [(_API_KEY_HEADER, self._api_key)]
        return Forwarding(target, out, exchange, proxy_origin, path)

    def unanswered(self, exchange: Exchange, exc: UpstreamError) -> bytes:
        """The upstream gave no answer: note it on the evidence; the 502 body the client gets."""
        exchange.error = f"{type(exc).__name__}: {exc}"
        exchange.finish(b"", complete=False)
        return orjson.dumps({"detail": f"orsbench proxy: the upstream {self.upstream} did not answer ({type(exc).__name__}: {exc})"})

    def answer_headers(
        self, response: UpstreamResponse | UpstreamConnection, forwarding: Forwarding, *, drop: frozenset[str] = OWN_HEADERS
    ) -> list[tuple[bytes, bytes]]:
        """The upstream's answer head as the client gets it (and on the evidence): hop-by-hop headers and
        ``drop`` left out, a ``Location`` into the upstream pointed back at the proxy."""
        exchange = forwarding.exchange
        exchange.answer(response.status)  # the headers go on below, as they are filtered
        text, texts = self._text, self._texts
        out: list[tuple[bytes, bytes]] = []
        seen = exchange.headers
        for key, value in response.headers:
            lower = key.lower()
            name = texts.get(lower) or text(lower)
            if name in HOP_BY_HOP or name in drop:
                continue
            if name == "location":
                value = self._rewrite_location(value.decode("latin-1"), forwarding.proxy_origin).encode("latin-1")
            seen[name] = texts.get(value) or text(value)
            out.append((key, value))
        return out

    async def _forward(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _read_body(receive)
        forwarding = self.begin(
            scope["method"], scope["path"], scope.get("raw_path") or scope["path"].encode(), scope.get("query_string") or b"",
            scope["headers"], body, scheme=scope.get("scheme", "http"), peer=peer_of(scope),
        )  # fmt: skip
        exchange = forwarding.exchange
        try:
            response = await self.pool.request(scope["method"], forwarding.target, forwarding.headers, body)
        except UpstreamError as exc:
            await _answer(send, 502, self.unanswered(exchange, exc), protocol.JSON_CONTENT_TYPE)
            self.ended(forwarding)
            return
        try:
            # uvicorn writes its own date and server headers: the upstream's are left out, not sent twice
            out_headers = self.answer_headers(response, forwarding)
            await send({"type": "http.response.start", "status": response.status, "headers": out_headers})
            if exchange.is_sse:
                await _stream(response, receive, send, exchange)
            else:
                await _relay(response, send, exchange)
        finally:
            response.release()
            exchange.finish(exchange.body, sse=exchange.sse)  # what the relay or the stream gathered
            self.ended(forwarding)

    def _text(self, raw: bytes) -> str:
        """``raw`` decoded, one shared string per distinct short header name or value.

        Every exchange is kept as evidence for the report, and its headers are mostly the same few
        names and values (content-type, the client's user-agent, a session's id on each of its
        requests): sharing them halves what the kept headers cost. The table is bounded.
        """
        found = self._texts.get(raw)
        if found is None:
            found = raw.decode("latin-1")
            if len(raw) <= _SHARED_TEXT_MAX:
                if len(self._texts) >= _SHARED_TEXTS:
                    self._texts.clear()
                self._texts[raw] = found
        return found

    def _rewrite_location(self, location: str, proxy_origin: str) -> str:
        prefix = self.upstream_origin + self._base_path
        if location.startswith(prefix):
            return proxy_origin + location[len(prefix) :]
        return location

    def ended(self, forwarding: Forwarding) -> None:
        """A finished exchange (its body and stream on it: :meth:`Exchange.finish`), to every observer, in completion order."""
        self.forwarded += 1
        for ended in self.observers.on_end:
            ended(forwarding.exchange, forwarding.path)


async def _relay(response: UpstreamResponse, send: Send, exchange: Exchange) -> None:
    """A plain (JSON) answer: raw bytes as they come, no disconnect watch (they are short)."""
    received: list[bytes] = []
    try:
        while (piece := await response.next_piece()) is not None:
            received.append(piece)
            await send({"type": "http.response.body", "body": piece, "more_body": True})
    except UpstreamError as exc:
        exchange.error = f"{type(exc).__name__}: {exc}"  # cut: ours is cut the same way
        return
    finally:
        exchange.body = received[0] if len(received) == 1 else b"".join(received)
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _stream(response: UpstreamResponse, receive: Receive, send: Send, exchange: Exchange) -> None:
    """An event stream: each upstream read is sent on at once, and parsed (with arrival times) as evidence.

    One watcher per stream waits for the client's disconnect and aborts the upstream read, so a
    client that gives up on a stalled stream stops it too (no per-read task or race).
    """
    parser = SSEParser()
    received: list[bytes] = []
    watcher = asyncio.ensure_future(_abort_on_disconnect(receive, response))
    try:
        while True:
            try:
                piece = await response.next_piece()
            except Aborted:
                exchange.error = "the client disconnected before the answer was complete"
                return
            except UpstreamError as exc:
                # The upstream cut the stream: cut ours the same way (no final body message).
                exchange.error = f"{type(exc).__name__}: {exc}"
                return
            if piece is None:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            received.append(piece)
            parser.feed(piece)
            await send({"type": "http.response.body", "body": piece, "more_body": True})
    finally:
        watcher.cancel()
        exchange.body = b"".join(received)
        exchange.sse = parser.close()


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


async def _abort_on_disconnect(receive: Receive, response: UpstreamResponse) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    response.abort("the client disconnected")


async def _answer(send: Send, status: int, body: bytes, content_type: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})



def wrap_faults(app: Any, names: tuple[str, ...], seed: int, *, ping_interval: float = protocol.PING_INTERVAL_S) -> Any:
    """``app`` inside the named HTTP-level fault profiles — the same middlewares the mock engine uses.

    ``ping_interval`` is the upstream's keep-alive cadence (``stream-stall`` stays silent for a number
    of them). Engine-only faults (tool-raises, restart, the violations, ...) are refused with a
    ``ValueError`` naming the ones that can wrap a proxy.
    """
    if not names:
        return app
    from orsbench.servers.faults import wrap_app

    return wrap_app(app, names, seed, ping_interval=ping_interval)
