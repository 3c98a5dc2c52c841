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
goes away aborts the upstream read, and a slow client stops the reading (the client transport's
high-water mark pauses the upstream connection's reads). Each upstream read is written on from
the upstream connection's own callback (:meth:`UpstreamPool.send
<orsbench.servers.origin_pool.UpstreamPool.send>`): no task, future or wake-up per request — measured
behind ``benchmarks/proxy_scale.py``, those were a sixth of the proxy's CPU per request.

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
from collections.abc import Callable
from http import HTTPStatus
from typing import NamedTuple
from urllib.parse import unquote

import httptools

from orsbench import protocol
from orsbench.servers.app import bind, is_loopback, raise_open_file_limit, url_of
from orsbench.servers.proxy import Forwarding, ProxyApp
from orsbench.servers.origin_pool import UpstreamConnectError, UpstreamCut, UpstreamError, UpstreamConnection
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


def _target(url: bytes) -> tuple[bytes, bytes] | None:
    """A request target's path and query (None: malformed). The usual origin form (``/path?query``) is split
    here; anything else (an absolute URL, a fragment) goes through httptools' URL parser."""
    if url[:1] == b"/" and b"#" not in url:
        path, _, query = url.partition(b"?")
        return path, query
    try:
        parsed = httptools.parse_url(url)
    except httptools.HttpParserInvalidURLError:
        return None
    return parsed.path or b"/", parsed.query or b""


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
    """One client connection: parse its requests, forward them one at a time, write the answers.

    The forwarding is callbacks, no task: a parsed request goes upstream at once (:meth:`UpstreamPool.send
    <orsbench.servers.origin_pool.UpstreamPool.send>`), and each upstream read comes back to
    :meth:`upstream_read` from the upstream connection's own callback, which writes it on. Per request
    that is no task, future or wake-up — what a proxy pays per request is its Python calls.
    """

    def __init__(self, server: ProxyServer) -> None:
        self.server = server
        self.app = server.app
        self.transport: asyncio.Transport | None = None
        self.peer: str | None = None
        self.queue: collections.deque[_Request] = collections.deque()
        self.closed = False
        self.parser = httptools.HttpRequestParser(self)
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._pieces: list[bytes] = []
        self._size = 0
        #: The request being answered (None: idle), and its answer's state.
        self.current: _Request | None = None
        self._forwarding: Forwarding | None = None
        self._upstream: UpstreamConnection | None = None
        self._paused = False  # the upstream connection's reading, paused while this client's writes back up
        self._headed = False
        self._sse: SSEParser | None = None
        self._chunked = False
        self._close_header = b""
        self._received: list[bytes] = []

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
        self._resume_upstream(self._upstream)
        if self._upstream is not None and self._headed and self._sse is not None:
            self._abort()  # an event stream may never end: stop reading it (a plain answer is read to its end)

    def pause_writing(self) -> None:
        upstream = self._upstream
        if upstream is not None and not self._paused and upstream.transport is not None and not upstream.closed:
            self._paused = True  # a slow client: the upstream waits (its socket, then the server, hold the rest)
            upstream.transport.pause_reading()

    def resume_writing(self) -> None:
        self._resume_upstream(self._upstream)

    def _resume_upstream(self, conn: UpstreamConnection | None) -> None:
        if self._paused:
            self._paused = False
            if conn is not None and conn.transport is not None and not conn.closed:
                conn.transport.resume_reading()

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
        if self.current is None:
            self._next()

    # -- forwarding -----------------------------------------------------------------------------
    def _next(self) -> None:
        """Start the next queued request; answered here (a local route, a refusal) or sent upstream."""
        while self.queue and not self.closed and self.current is None:
            request = self.queue.popleft()
            try:
                keep = self._start(request)
            except Exception:  # noqa: BLE001 - a proxy bug must not take the server down
                self._internal_error(request)
                return
            if keep is None:  # on its way upstream: upstream_read carries on
                return
            if not keep:
                self.close()
                return

    def _internal_error(self, request: _Request) -> None:
        log.exception("orsbench proxy: internal error on %s %s", request.method, request.url[:200])
        self._drop_upstream()
        self.current = None
        self._refuse(500, "orsbench proxy: internal error")

    def _start(self, request: _Request) -> bool | None:
        """Answer ``request`` at once (whether the connection carries on), or send it upstream (None)."""
        assert self.transport is not None
        app = self.app
        target = _target(request.url)
        if target is None:
            self._refuse(400, "orsbench proxy: malformed request target")
            return False
        raw_path, query = target
        path = raw_path.decode("latin-1")
        if "%" in path:
            path = unquote(path)
        keep = request.keep_alive
        route = app.routes.get(path) if request.method == "GET" else None
        if route is not None:
            status, content_type, data = route()
            self.transport.write(_simple(status, content_type.encode("latin-1"), data, close=not keep))
            return keep
        forwarding = app.begin(request.method, path, raw_path, query, request.headers, request.body, peer=self.peer)
        self.current, self._forwarding = request, forwarding
        self._headed, self._sse, self._received = False, None, []
        self._close_header = b"" if keep else b"connection: close\r\n"
        app.pool.send(request.method, forwarding.target, forwarding.headers, request.body, self)
        return None

    def upstream_failed(self, error: UpstreamError) -> None:
        """No connection to the upstream: a 502, as for an upstream that gave no answer."""
        request, forwarding = self.current, self._forwarding
        assert request is not None and forwarding is not None
        try:
            body = self.app.unanswered(forwarding.exchange, error)
            if not self.closed and self.transport is not None:
                self.transport.write(_simple(502, protocol.JSON_CONTENT_TYPE.encode(), body, close=not request.keep_alive))
            self.app.ended(forwarding)
        except Exception:  # noqa: BLE001
            self._internal_error(request)
            return
        self._done(request.keep_alive)

    def upstream_read(self, conn: UpstreamConnection, piece: bytes) -> None:
        """One read of the answer (from the upstream connection's callback): write it on; at its end, the next request."""
        request = self.current
        assert request is not None
        try:
            self._upstream = conn
            if not self._headed:
                if not conn.headed:
                    if conn.failure is not None or conn.closed:  # nothing came before the close: a 502
                        self._drop_upstream()
                        self.upstream_failed(conn.failure or UpstreamConnectError("no answer: the upstream closed the connection"))
                    return
                out = self._head(request, conn)
                if out is None:
                    return  # the client hung up on an event stream: aborted
            else:
                out = []
            if piece:
                self._received.append(piece)
                if self._sse is not None:
                    self._sse.feed(piece)
                out.append(b"%x\r\n%s\r\n" % (len(piece), piece) if self._chunked else piece)
            head_only = request.method == "HEAD"
            if conn.complete or head_only:
                if self._chunked:
                    out.append(b"0\r\n\r\n")
                self._write(out)
                self._finish(request.keep_alive and not self.closed, head_only=head_only)
            elif conn.failure is not None or conn.closed:
                self._write(out)  # cut: the client's answer is cut the same way (no last chunk)
                failure = conn.failure or UpstreamCut("the answer was cut: the upstream closed the connection")
                self._forwarding.exchange.error = f"{type(failure).__name__}: {failure}"  # type: ignore[union-attr]
                self._finish(False)
            else:
                self._write(out)
        except Exception:  # noqa: BLE001 - a proxy bug must not take the server down
            self._internal_error(request)

    def _head(self, request: _Request, conn: UpstreamConnection) -> list[bytes] | None:
        """The answer's head as the client gets it (its headers onto the evidence); None when the client is gone from an event stream."""
        forwarding = self._forwarding
        assert forwarding is not None
        self._headed = True
        # The upstream's own date and server headers pass: no server of ours writes others.
        headers = self.app.answer_headers(conn, forwarding, drop=_NOTHING)  # the status goes on the evidence here
        exchange = forwarding.exchange
        status = conn.status
        bodyless = request.method == "HEAD" or status in (204, 304) or status < 200
        self._chunked = chunked = not bodyless and "content-length" not in exchange.headers  # names lower-cased
        if exchange.is_sse:  # read from the answer's headers, once they are on the evidence
            self._sse = SSEParser()
            if self.closed:
                self._abort()
                return None
        head = [_status_line(status)]
        for name, value in headers:
            head += (name, b": ", value, b"\r\n")
        head.append(b"transfer-encoding: chunked\r\n" + self._close_header + b"\r\n" if chunked else self._close_header + b"\r\n")
        return head

    def _write(self, out: list[bytes]) -> None:
        if out and not self.closed:
            self.transport.write(b"".join(out) if len(out) > 1 else out[0])  # type: ignore[union-attr]

    def _abort(self) -> None:
        """The client went away from an event stream: stop reading it, and file what came."""
        conn = self._upstream
        if conn is not None:
            self.app.pool.abort(conn, "the client disconnected")
        self._forwarding.exchange.error = "the client disconnected before the answer was complete"  # type: ignore[union-attr]
        self._finish(False)

    def _drop_upstream(self, *, reuse: bool = True) -> None:
        """Let the upstream connection go, its reading resumed (``reuse=False``: closed, as after a ``HEAD``)."""
        conn, self._upstream = self._upstream, None
        if conn is not None:
            self._resume_upstream(conn)
            self.app.pool.release(conn, reuse=reuse)

    def _finish(self, keep: bool, *, head_only: bool = False) -> None:
        """The answer is over: the connection back to the pool, the evidence to the observers, then the next request."""
        self._drop_upstream(reuse=not head_only)
        forwarding = self._forwarding
        assert forwarding is not None
        received, sse = self._received, self._sse
        forwarding.exchange.finish(received[0] if len(received) == 1 else b"".join(received), sse=sse.close() if sse is not None else None)
        self._forwarding, self._sse, self._received = None, None, []
        self.app.ended(forwarding)
        self._done(keep)

    def _done(self, keep: bool) -> None:
        self.current = None
        if not keep or self.closed:
            self.close()
        elif self.queue:
            self._next()
