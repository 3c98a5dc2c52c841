"""The proxy's own front on the socket: HTTP/1.1 from clients straight into :class:`ProxyApp`'s forwarding.

``orsbench proxy`` sits in front of a trainer's every request, so what it costs per request is
what it is judged by (BENCHMARKS.md: against the mock alone and against nginx). Under uvicorn
each request cost a scope dict, a task, a message dict per body piece and a socket write per
message — measured, about as much CPU again as the forwarding itself. This front is the same
forwarding without that machinery: requests are parsed by httptools (llhttp, what uvicorn uses)
as they arrive on an asyncio protocol, each is handed to :meth:`ProxyApp.begin
<orsbench.servers.proxy.ProxyApp.begin>` (the same headers, evidence, secrets and key as under
uvicorn), and the answer's head goes out **with whatever the upstream already sent**, in one
write: a short JSON answer is one read from the upstream and one write to the client. An event
stream is then passed on one upstream read at a time (re-chunked), as the ASGI app does; a cut
upstream stream is cut for the client (the connection closes with no last chunk), a client that
goes away aborts the upstream read, and a slow client stops the reading (the transport's
high-water mark, then the upstream pool's).

One connection serves its requests in order (pipelined ones queue). Not served here: TLS,
HTTP/2 and protocol upgrades (400, then the connection closes). Fault profiles and the request
log are ASGI middlewares, so ``orsbench proxy --fault`` or ``--request-log`` runs the ASGI app
under uvicorn instead (:func:`orsbench.servers.app.serve_forever`); both fronts forward alike
(``tests/test_proxy.py`` plays every scenario's transcript through each).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import signal
import sys
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import NamedTuple
from urllib.parse import unquote

import httptools

from orsbench import protocol
from orsbench.servers.app import bind, is_loopback, raise_open_file_limit, url_of
from orsbench.servers.proxy import ProxyApp
from orsbench.servers.upstream import Aborted, UpstreamError, UpstreamResponse
from orsbench.wire.sse import SSEParser

log = logging.getLogger("orsbench.proxy")

_REASONS = {status.value: status.phrase.encode("latin-1") for status in HTTPStatus}
_NOTHING = frozenset[str]()
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
#: Bytes of a request head (URL and headers) or body accepted before the connection is refused (431/413).
HEAD_LIMIT = 64 * 1024
BODY_LIMIT = 64 * 1024 * 1024


class _Request(NamedTuple):
    method: str
    url: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes
    keep_alive: bool


_STATUS_LINES: dict[int, bytes] = {}


def _status_line(status: int) -> bytes:
    line = _STATUS_LINES.get(status)
    if line is None:
        line = b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b"Unknown"))
        if len(_STATUS_LINES) < 1000:  # bounded: an upstream may answer any three digits
            _STATUS_LINES[status] = line
    return line


def _simple(status: int, content_type: bytes, body: bytes, *, close: bool = False) -> bytes:
    head = _status_line(status) + b"content-type: " + content_type + b"\r\ncontent-length: %d\r\n" % len(body)
    return head + (b"connection: close\r\n\r\n" if close else b"\r\n") + body


class ProxyServer:
    """Serve ``app``'s forwarding on a socket until SIGINT/SIGTERM, then run its shutdown hooks."""

    def __init__(self, app: ProxyApp) -> None:
        self.app = app
        self.clients: set[_Client] = set()

    def run(self, *, host: str = "127.0.0.1", port: int = 0, on_ready: Callable[[str], None] | None = None) -> None:
        """Bind ``host:port`` (0: a free port; :class:`~orsbench.servers.app.BindError` when it cannot), call
        ``on_ready(url)``, serve until SIGINT or SIGTERM; then close, and run ``app.on_shutdown`` (the reports)."""
        if not is_loopback(host):
            print(f"orsbench: WARNING: binding {host}, reachable beyond this machine", file=sys.stderr)
        raise_open_file_limit()  # one descriptor per held stream, twice (the client's and the upstream's)
        sock = bind(host, port)
        url = url_of(host, sock.getsockname()[1])
        try:
            import uvloop

            uvloop.run(self._serve(sock, url, on_ready))
        except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard]
            asyncio.run(self._serve(sock, url, on_ready))

    async def _serve(self, sock: object, url: str, on_ready: Callable[[str], None] | None) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        server = await loop.create_server(lambda: _Client(self), sock=sock, backlog=2048)  # type: ignore[arg-type]
        if on_ready is not None:
            on_ready(url)
        try:
            await stop.wait()
        finally:
            server.close()
            for client in list(self.clients):
                client.close()
            await self.app.aclose()
            for hook in self.app.on_shutdown:
                hook()


class _Client(asyncio.Protocol):
    """One client connection: parse its requests, forward them one at a time, write the answers."""

    def __init__(self, server: ProxyServer) -> None:
        self.server = server
        self.app = server.app
        self.loop = asyncio.get_running_loop()  # once per connection (each lookup costs a getpid() call)
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.peer: str | None = None
        self.queue: collections.deque[_Request] = collections.deque()
        self.task: asyncio.Task[None] | None = None
        self.closed = False
        #: The answer being streamed (aborted when the client goes away).
        self.response: UpstreamResponse | None = None
        self._writable: asyncio.Future[None] | None = None
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._pieces: list[bytes] = []
        self._size = 0

    # -- the connection -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        if peer:
            host, port = peer[0], peer[1]
            self.peer = f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
        self.server.clients.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.clients.discard(self)
        if self.response is not None:
            self.response.abort("the client disconnected")
        self._resume()

    def pause_writing(self) -> None:
        if self._writable is None:
            self._writable = self.loop.create_future()

    def resume_writing(self) -> None:
        self._resume()

    def _resume(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()
        self.closed = True

    def _refuse(self, status: int, detail: str) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(_simple(status, protocol.JSON_CONTENT_TYPE.encode(), b'{"detail": "%s"}' % detail.encode(), close=True))
        self.close()

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refuse(400, "orsbench proxy: protocol upgrades are not proxied")
        except httptools.HttpParserError as exc:
            self._refuse(400, f"orsbench proxy: malformed request ({exc})")

    # -- httptools callbacks ----------------------------------------------------------------
    def on_message_begin(self) -> None:
        self._url, self._headers, self._pieces, self._size = b"", [], [], 0

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._size += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.lower(), value))  # as an ASGI server hands them on: names lower-cased
        self._size += len(name) + len(value)
        if self._size > HEAD_LIMIT:
            self._refuse(431, "orsbench proxy: request head too large")
            raise httptools.HttpParserError("head too large")

    def on_headers_complete(self) -> None:
        if self.transport is not None and any(k == b"expect" and v.lower() == b"100-continue" for k, v in self._headers):
            self.transport.write(_CONTINUE)  # the whole body is read before anything goes upstream

    def on_body(self, body: bytes) -> None:
        self._pieces.append(body)
        self._size += len(body)
        if self._size > BODY_LIMIT:
            self._refuse(413, "orsbench proxy: request body too large")
            raise httptools.HttpParserError("body too large")

    def on_message_complete(self) -> None:
        method = self.parser.get_method().decode("latin-1")
        body = self._pieces[0] if len(self._pieces) == 1 else b"".join(self._pieces)
        self.queue.append(_Request(method, self._url, self._headers, body, self.parser.should_keep_alive()))
        if self.task is None:
            self.task = self.loop.create_task(self._run())

    # -- forwarding -----------------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            while self.queue and not self.closed:
                request = self.queue.popleft()
                try:
                    keep = await self._forward(request)
                except Exception:  # noqa: BLE001 - a proxy bug must not take the server down
                    log.exception("orsbench proxy: internal error on %s %s", request.method, request.url[:200])
                    self._refuse(500, "orsbench proxy: internal error")
                    return
                if not keep:
                    self.close()
                    return
        finally:
            self.task = None

    async def _forward(self, request: _Request) -> bool:
        """Forward one request and write its answer; whether the connection carries on."""
        assert self.transport is not None
        app, transport = self.app, self.transport
        try:
            parsed = httptools.parse_url(request.url)
        except httptools.HttpParserInvalidURLError:
            self._refuse(400, "orsbench proxy: malformed request target")
            return False
        raw_path, query = parsed.path or b"/", parsed.query or b""
        path = unquote(raw_path.decode("latin-1"))
        keep = request.keep_alive
        close = b"" if keep else b"connection: close\r\n"
        route = app.routes.get(path) if request.method == "GET" else None
        if route is not None:
            status, content_type, data = route()
            transport.write(_simple(status, content_type.encode("latin-1"), data, close=not keep))
            return keep
        forwarding = app.begin(request.method, path, raw_path, query, request.headers, request.body, peer=self.peer)
        exchange = forwarding.exchange
        try:
            response = await app.pool.request(request.method, forwarding.target, forwarding.headers, request.body)
        except UpstreamError as exc:
            transport.write(_simple(502, protocol.JSON_CONTENT_TYPE.encode(), app.unanswered(exchange, exc), close=not keep))
            app.observe(exchange)
            return keep
        received: list[bytes] = []
        parser: SSEParser | None = None
        # A client that hangs up aborts an event stream (it may never end); a plain answer is read to its
        # end all the same, unsent, as under uvicorn: the server is graded on what it sent (a readiness
        # probe that timed out under load must not fail discovery.health).
        try:
            # The upstream's own date and server headers pass: no server of ours writes others.
            headers = app.answer_headers(response, forwarding, drop=_NOTHING)  # the status goes on the evidence here
            is_sse = exchange.is_sse  # read from the answer's headers, once they are on the evidence
            self.response = response if is_sse else None
            status = response.status
            bodyless = request.method == "HEAD" or status in (204, 304) or status < 200
            chunked = not bodyless and "content-length" not in exchange.headers  # the answer's headers, names lower-cased
            head = [_status_line(status)]
            for name, value in headers:
                head += (name, b": ", value, b"\r\n")
            head.append(b"transfer-encoding: chunked\r\n" + close + b"\r\n" if chunked else close + b"\r\n")
            if is_sse:
                parser = SSEParser()
                if self.closed:
                    raise Aborted("the client disconnected")
            pieces, done = response.ready()
            for piece in pieces:
                received.append(piece)
                if parser is not None:
                    parser.feed(piece)
                head.append(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            if done and chunked:
                head.append(b"0\r\n\r\n")
            if not self.closed:
                transport.write(b"".join(head))
            while not done:
                if self._writable is not None:  # a slow client: stop taking pieces until it drains
                    await self._writable
                piece = await response.next_piece()
                if piece is None:
                    if chunked and not self.closed:
                        transport.write(b"0\r\n\r\n")
                    break
                received.append(piece)
                if parser is not None:
                    parser.feed(piece)
                if not self.closed:
                    transport.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            if self.closed:
                keep = False
        except Aborted:
            exchange.error = "the client disconnected before the answer was complete"
            keep = False
        except UpstreamError as exc:
            exchange.error = f"{type(exc).__name__}: {exc}"  # cut: the client's answer is cut the same way
            keep = False
        finally:
            self.response = None
            response.release()
            exchange.body = received[0] if len(received) == 1 else b"".join(received)
            if parser is not None:
                exchange.sse = parser.close()
            exchange.elapsed = time.monotonic() - exchange.started_at
            app.observe(exchange)
        return keep
