"""A transparent ORS reverse proxy as an ASGI app: forward, stream, observe.

``orsbench proxy UPSTREAM`` serves :class:`ProxyApp`. Every request is
forwarded to the upstream with httpx's async streaming client and its answer
is streamed back as it arrives — each upstream read is one ASGI body message,
so SSE keep-alives, chunk boundaries and their timing reach the client as the
upstream sent them. A stream the upstream cuts is cut for the client too (the
app returns without completing the response), and a stream that stalls
stalls: the proxy adds no timeout of its own to a read.

What passes through is also handed, as one
:class:`~orsbench.wire.evidence.Exchange` per request (raw bytes, headers,
parsed SSE events with arrival times), to the *observers* the front end plugs
in — the passive grader and the cassette recorder — so the proxy itself
judges nothing and writes nothing. Local routes (``GET /_orsbench/report``)
are answered by callables the front end provides.

The proxy forwards with the upstream's own ``Host`` and rewrites a
``Location`` pointing into the upstream back onto the proxy, the way a
reverse proxy must for the default-environment redirect to stay usable.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from orsbench import protocol
from orsbench.wire.client import add_secrets
from orsbench.wire.evidence import Exchange
from orsbench.wire.sse import SSEParser

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

#: Called with each completed exchange, in completion order.
Observer = Callable[[Exchange], None]
#: A local route: returns ``(status, content_type, body)``.
LocalRoute = Callable[[], tuple[int, str, bytes]]

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

#: Headers the proxy's own HTTP server writes (uvicorn adds date and server to every answer).
OWN_HEADERS = frozenset({"date", "server"})

#: The prefix of the proxy's own routes (also the upstream's, if it is an orsbench server:
#: only the routes registered locally are answered here; the rest are forwarded).
LOCAL_PREFIX = "/_orsbench/"


def _with_secrets(headers: list[tuple[str, str]], secrets: Mapping[str, str]) -> list[tuple[str, str]]:
    """``headers`` with the operator's secrets merged into ``X-Secrets`` (the client's own entries kept)."""
    wanted = protocol.SECRETS_HEADER.lower()
    sent = next((v for k, v in headers if k.lower() == wanted), None)
    return [(k, v) for k, v in headers if k.lower() != wanted] + [(protocol.SECRETS_HEADER, add_secrets(sent, secrets))]


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class ProxyApp:
    """Forward every HTTP request to ``upstream``; report each exchange to ``observers``."""

    def __init__(
        self,
        upstream: str,
        *,
        observers: Sequence[Observer] = (),
        routes: Mapping[str, LocalRoute] | None = None,
        on_shutdown: Sequence[Callable[[], None]] = (),
        connect_timeout: float = 10.0,
        secrets: Mapping[str, str] | None = None,
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"upstream must be an http(s) URL like http://127.0.0.1:8000, got {upstream!r}")
        self.upstream = upstream.rstrip("/")
        self.upstream_origin = _origin(self.upstream)
        self._base_path = parts.path.rstrip("/")
        self.observers = list(observers)
        #: Added to every ``/create`` sent upstream as ``X-Secrets`` (``--secret``; docs/protocol.md §14).
        self._secrets = dict(secrets or {})
        self.routes = dict(routes or {})
        #: Run at lifespan shutdown (SIGINT/SIGTERM): where the front end writes its reports.
        #: (uvicorn re-raises the signal once it has shut down, so code after ``run()`` never runs.)
        self.on_shutdown = list(on_shutdown)
        self._timeout = httpx.Timeout(connect_timeout, read=None, write=connect_timeout, pool=None)
        self._client: httpx.AsyncClient | None = None
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
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                for hook in self.on_shutdown:
                    hook()
                await send({"type": "lifespan.shutdown.complete"})
                return

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            # No connection limit: a trainer's parallel episodes must not queue behind a pool.
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
            self._client = httpx.AsyncClient(timeout=self._timeout, limits=limits, follow_redirects=False, trust_env=False)
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # -- forwarding -----------------------------------------------------------------
    async def _forward(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _read_body(receive)
        query = scope.get("query_string") or b""
        path = scope.get("raw_path") or scope["path"].encode()
        target = self.upstream_origin + self._base_path + path.decode("latin-1") + ("?" + query.decode("latin-1") if query else "")
        client_host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), "127.0.0.1")
        proxy_origin = f"{scope.get('scheme', 'http')}://{client_host}"
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in scope["headers"]
            if k.decode("latin-1").lower() not in HOP_BY_HOP and k != b"host"
        ]
        exchange = Exchange(
            scope["method"],
            proxy_origin + scope["path"] + ("?" + query.decode("latin-1") if query else ""),
            dict(headers),
            body,
        )
        start = exchange.started_at = time.monotonic()
        if self._secrets and scope["path"] == protocol.CREATE:
            headers = _with_secrets(headers, self._secrets)
        request = self.client.build_request(scope["method"], target, headers=headers, content=body)
        try:
            response = await self.client.send(request, stream=True)
        except httpx.HTTPError as exc:
            exchange.error = f"{type(exc).__name__}: {exc}"
            exchange.elapsed = time.monotonic() - start
            detail = f"orsbench proxy: the upstream {self.upstream} did not answer ({type(exc).__name__}: {exc})"
            await _answer(send, 502, orjson.dumps({"detail": detail}), protocol.JSON_CONTENT_TYPE)
            self._observe(exchange)
            return
        try:
            exchange.elapsed_headers = time.monotonic() - start
            exchange.status = response.status_code
            out_headers: list[tuple[bytes, bytes]] = []
            for key, value in response.headers.raw:
                name = key.decode("latin-1").lower()
                if name in HOP_BY_HOP or name in OWN_HEADERS:
                    continue
                if name == "location":
                    value = self._rewrite_location(value.decode("latin-1"), proxy_origin).encode("latin-1")
                exchange.headers[name] = value.decode("latin-1")
                out_headers.append((key, value))
            await send({"type": "http.response.start", "status": response.status_code, "headers": out_headers})
            if exchange.is_sse:
                await _stream(response, receive, send, exchange)
            else:
                await _relay(response, send, exchange)
        finally:
            await response.aclose()
            exchange.elapsed = time.monotonic() - start
            self._observe(exchange)

    def _rewrite_location(self, location: str, proxy_origin: str) -> str:
        prefix = self.upstream_origin + self._base_path
        if location.startswith(prefix):
            return proxy_origin + location[len(prefix) :]
        return location

    def _observe(self, exchange: Exchange) -> None:
        self.forwarded += 1
        for observer in self.observers:
            observer(exchange)


async def _relay(response: httpx.Response, send: Send, exchange: Exchange) -> None:
    """A plain (JSON) answer: raw bytes as they come, no per-read race (they are short)."""
    received = bytearray()
    try:
        async for chunk in response.aiter_raw():
            received += chunk
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    except httpx.HTTPError as exc:
        exchange.error = f"{type(exc).__name__}: {exc}"  # cut: ours is cut the same way
        return
    finally:
        exchange.body = bytes(received)
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _stream(response: httpx.Response, receive: Receive, send: Send, exchange: Exchange) -> None:
    """An event stream: each upstream read is sent on at once, and parsed (with arrival times) as evidence.

    Each read races the client's disconnect, so a client that gives up on a stalled stream
    stops the upstream read too.
    """
    parser = SSEParser()
    received = bytearray()
    watcher = asyncio.ensure_future(_disconnected(receive))
    chunks = response.aiter_raw().__aiter__()
    try:
        while True:
            step = asyncio.ensure_future(chunks.__anext__())
            done, _ = await asyncio.wait({step, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if step not in done:  # the client went away: stop reading upstream
                step.cancel()
                with contextlib.suppress(BaseException):
                    await step
                exchange.error = "the client disconnected before the answer was complete"
                return
            try:
                chunk = step.result()
            except StopAsyncIteration:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            except httpx.HTTPError as exc:
                # The upstream cut the stream: cut ours the same way (no final body message).
                exchange.error = f"{type(exc).__name__}: {exc}"
                return
            received += chunk
            parser.feed(chunk)
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
    finally:
        watcher.cancel()
        exchange.body = bytes(received)
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


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


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
