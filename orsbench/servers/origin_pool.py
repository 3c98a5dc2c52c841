"""The proxy's upstream side: keep-alive HTTP/1.1 connections to one origin, parsed by httptools.

Why not httpx (what the proxy used first): measured behind ``orsbench proxy``, two
thirds of the proxy's CPU went into httpcore's pool and anyio streams, and the
pool scans *every* connection on every request (``has_expired`` polls each
socket), so with 1,000 held streams each request cost O(1,000): 44x the mock's CPU
per held session. A proxy to one origin needs far less: an idle list, a
connection that writes one request and hands back the answer as it arrives. This
module is that, on asyncio's own transports and the C parser uvicorn uses
(``httptools``, llhttp) — the parsing is the library's; only the plumbing is ours.

* One request at a time per connection; a connection goes back to the idle list
  only when its answer was read to the end and the upstream keeps it alive. An
  idle connection the upstream closes is dropped the moment the loop sees the
  close (no per-request poll of every socket).
* The answer's body comes as it arrives: one upstream read (``data_received``) is
  one piece, so an SSE keep-alive reaches the reader when it reached the proxy.
  Reading pauses while more than :data:`HIGH_WATER` bytes wait for a slow reader.
* No read timeout of its own (the proxy adds none); connecting is bounded.
* Nothing is added to the request but ``Host`` and the body's ``Content-Length``.
* An idle connection is not reused after :data:`IDLE_EXPIRY_S` (servers close theirs: uvicorn after
  5 s), and a request that a reused connection lost before any byte of an answer came (the upstream
  closed it as the request went out: the keep-alive race) is sent again on a new connection when its
  method is idempotent (RFC 9110 §9.2.2; nginx does the same). A ``POST`` is not: the upstream may
  have acted on it, so its client gets the error (a 502 from the proxy).

Two ways to read an answer: awaited (:meth:`UpstreamPool.request`, then
:meth:`UpstreamResponse.next_piece`: the ASGI front), or handed to a :class:`Listener` as each
upstream read arrives (:meth:`UpstreamPool.send`: the socket front, which writes each read on to its
client from inside the upstream's own callback — no task, future or wake-up per request).
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import time
from collections.abc import Iterable
from typing import Protocol
from urllib.parse import urlsplit

import httptools

#: Bytes of an answer buffered for a reader before the upstream connection stops reading.
HIGH_WATER = 1 << 16
#: Idle connections kept for reuse (more are closed when their answer is read).
MAX_IDLE = 1024
#: Methods whose request always carries a Content-Length, even 0 (as HTTP clients send them).
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
#: Seconds an idle connection is kept for reuse: under the shortest keep-alive common servers use
#: (uvicorn's 5 s), so the pool seldom writes into a connection the upstream is closing.
IDLE_EXPIRY_S = 4.0
#: Methods a request of which is sent again when a reused connection lost it before any answer (RFC 9110 §9.2.2).
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"})


class UpstreamError(Exception):
    """The upstream could not be reached, or broke off an answer."""


class UpstreamConnectError(UpstreamError):
    """No answer at all: the connection failed, or closed before the status line."""


class UpstreamCut(UpstreamError):
    """The answer started, then stopped before its end (closed, reset or malformed)."""


class Aborted(UpstreamError):
    """The reader gave up on the answer (:meth:`UpstreamResponse.abort`)."""


class Listener(Protocol):
    """Told of an answer as it arrives (:meth:`UpstreamPool.send`), from inside the upstream's own callbacks."""

    def upstream_read(self, conn: UpstreamConnection, piece: bytes) -> None:
        """One upstream read: ``piece`` is the body it carried (may be empty). Read ``conn.headed`` (the head is
        in: ``conn.status``, ``conn.headers``), ``conn.complete`` (the answer ended), ``conn.failure`` and
        ``conn.closed`` (no more is coming) to know where the answer stands."""

    def upstream_failed(self, error: UpstreamError) -> None:
        """No connection could be opened for the request (nothing was sent)."""


class UpstreamConnection(asyncio.Protocol):
    """One HTTP/1.1 connection; the current answer's state lives here too (one request at a time).

    A :class:`Listener` reads that state (``headed``, ``status``, ``headers``, ``complete``, ``failure``,
    ``closed``) as each read arrives; the rest is the pool's.
    """

    def __init__(self, pool: UpstreamPool) -> None:
        self.pool = pool
        self.loop = asyncio.get_running_loop()  # once per connection (each lookup costs a getpid() call)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle = False
        #: When it last went idle (monotonic), and whether it carried a request before the current one.
        self.idle_since = 0.0
        self.reused = False
        self._parser = httptools.HttpResponseParser(self)
        self._reset()

    def _reset(self) -> None:
        self.headers: list[tuple[bytes, bytes]] = []
        self.status = 0
        #: The final answer's head is in (an interim 1xx does not count).
        self.headed = False
        self.head_done: asyncio.Future[None] | None = None
        #: Told of each read instead of the awaitable state (:meth:`UpstreamPool.send`), with what was sent
        #: (the request's bytes and method: sent again on a new connection after the keep-alive race).
        self.listener: Listener | None = None
        self.request: tuple[bytes, str] | None = None
        self.pieces: collections.deque[bytes] = collections.deque()
        self._piece: list[bytes] = []
        self.buffered = 0
        self.complete = False
        self.failure: UpstreamError | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.paused = False
        self._framed = False  # a Content-Length or Transfer-Encoding came
        self._keep_alive = False

    # -- asyncio.Protocol ---------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        listener = self.listener
        if self.idle or (self.head_done is None and listener is None):  # bytes nobody asked for: not reusable
            self._close()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(UpstreamCut(f"malformed answer from the upstream ({exc})"))
            self._close()
            if listener is not None:
                self._tell(b"")
            return
        if listener is None and not self._piece:
            return
        piece = b""
        if self._piece:  # one upstream read, one piece
            piece = self._piece[0] if len(self._piece) == 1 else b"".join(self._piece)
            self._piece.clear()
        if listener is not None:  # told of every read, a body in it or not
            listener.upstream_read(self, piece)
            return
        self.pieces.append(piece)
        self.buffered += len(piece)
        if self.buffered > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool | None:
        if not self._framed and self.headed and not self.complete and self.failure is None:
            self.complete = True  # an answer delimited by the close (no length, not chunked) ends here
        self._close()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool._lost(self)
        if (self.head_done is not None or self.listener is not None) and not self.complete and self.failure is None:
            reason = f"{type(exc).__name__}: {exc}" if exc else "the upstream closed the connection"
            if not self.headed:
                if self.listener is not None and self.reused and self.request is not None and self.request[1] in IDEMPOTENT:
                    listener, (data, method) = self.listener, self.request
                    self.listener = None  # the keep-alive race: once more, on a new connection
                    self.pool._send_on_new(data, method, listener)
                    return
                self._fail(UpstreamConnectError(f"no answer: {reason}"))
            else:
                self._fail(UpstreamCut(f"the answer was cut: {reason}"))
        self._wake()
        self._tell(b"")

    def _tell(self, piece: bytes) -> None:
        """The listener, of the answer's failure or end (it lets the connection go: :meth:`UpstreamPool.release`)."""
        if self.listener is not None:
            self.listener.upstream_read(self, piece)

    # -- httptools callbacks ------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))
        if len(name) in (14, 17) and name.lower() in (b"content-length", b"transfer-encoding"):
            self._framed = True

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        if 100 <= self.status < 200:  # an interim answer (100 Continue): the real one follows
            self.headers = []
            self._framed = False
            return
        self._keep_alive = self._parser.should_keep_alive()  # read here: llhttp forgets it once the message ends
        self.headed = True
        if self.head_done is not None and not self.head_done.done():
            self.head_done.set_result(None)

    def on_body(self, body: bytes) -> None:
        self._piece.append(body)

    def on_message_complete(self) -> None:
        if 100 <= self.status < 200:
            return
        self.complete = True
        self._wake()

    # -- plumbing -------------------------------------------------------------------
    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def _fail(self, error: UpstreamError) -> None:
        self.failure = error
        if self.head_done is not None and not self.head_done.done():
            self.head_done.set_exception(error)
            self.head_done.exception()  # retrieved: no "exception never retrieved" when nobody awaits it
        self._wake()

    def _close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()
        self.closed = True

    @property
    def reusable(self) -> bool:
        return not self.closed and self.complete and self.failure is None and self._keep_alive


class UpstreamResponse:
    """An answer being read: status and raw headers at once, then the body piece by piece."""

    def __init__(self, conn: UpstreamConnection, head_only: bool) -> None:
        self._conn = conn
        self._head_only = head_only
        self._released = False
        self.status = conn.status
        #: As received, names in their original case.
        self.headers = conn.headers

    @property
    def buffered(self) -> int:
        """Bytes of the body received and not yet read."""
        return self._conn.buffered

    @property
    def reading_paused(self) -> bool:
        """Whether the connection stopped reading because the reader lags (more than HIGH_WATER buffered)."""
        return self._conn.paused

    async def next_piece(self) -> bytes | None:
        """The next piece of the body as the upstream sent it; ``None`` at its end.

        Raises :class:`UpstreamCut` when the upstream broke the answer off, :class:`Aborted` after
        :meth:`abort`.
        """
        conn = self._conn
        if self._head_only:
            return None
        while True:
            if conn.pieces:
                piece = conn.pieces.popleft()
                conn.buffered -= len(piece)
                if conn.paused and conn.buffered <= HIGH_WATER // 4 and conn.transport is not None and not conn.closed:
                    conn.paused = False
                    conn.transport.resume_reading()
                return piece
            if conn.failure is not None:
                raise conn.failure
            if conn.complete:
                return None
            if conn.closed:
                raise UpstreamCut("the answer was cut: the upstream closed the connection")
            conn.waiter = conn.loop.create_future()
            await conn.waiter
            conn.waiter = None

    def ready(self) -> tuple[list[bytes], bool]:
        """The pieces already received (taken, as :meth:`next_piece` would give them), and whether that is all.

        Lets a reader write the head and what came with it in one go: a short JSON answer is one
        upstream read, and one write to the client instead of two. A broken answer is not "all":
        the next :meth:`next_piece` raises.
        """
        conn = self._conn
        if self._head_only:
            return [], True
        pieces = list(conn.pieces)
        conn.pieces.clear()
        conn.buffered = 0
        if conn.paused and conn.transport is not None and not conn.closed:
            conn.paused = False
            conn.transport.resume_reading()
        return pieces, conn.complete and conn.failure is None

    def abort(self, reason: str) -> None:
        """Stop reading (the reader's client went away): the connection is closed, a waiting read raises."""
        conn = self._conn
        if conn.failure is None and not conn.complete:  # a finished answer keeps its connection reusable
            conn._fail(Aborted(reason))
            conn._close()

    def release(self) -> None:
        """Done with the answer: the connection goes back to the pool if it can carry another request."""
        if self._released:
            return
        self._released = True
        self._conn.pool._release(self._conn, reusable=not self._head_only and self._conn.reusable)


class UpstreamPool:
    """Keep-alive connections to one ``http(s)://host:port`` origin."""

    def __init__(self, origin: str, *, connect_timeout: float = 10.0, max_idle: int = MAX_IDLE) -> None:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream must be an http(s) URL like http://127.0.0.1:8000, got {origin!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.host_header = parts.netloc.rsplit("@", 1)[-1].encode("latin-1")
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self.connect_timeout = connect_timeout
        self.max_idle = max_idle
        self._idle: collections.deque[UpstreamConnection] = collections.deque()
        self._dead_idle = 0  # idle connections the upstream closed since the last prune
        self._open: set[UpstreamConnection] = set()
        self._connecting: set[asyncio.Task[None]] = set()

    @property
    def connections(self) -> int:
        """Connections open now (idle or carrying a request)."""
        return len(self._open)

    @property
    def idle(self) -> int:
        """Open connections waiting for a request."""
        return len(self._idle) - self._dead_idle

    def send(self, method: str, target: str, headers: Iterable[tuple[bytes, bytes]], body: bytes, listener: Listener) -> None:
        """Send one request; ``listener`` is told of each read of its answer (or that no connection opened).

        :meth:`request`'s way, without a task or a future per request: on a warm pool the request is
        written at once, and each upstream read reaches the listener from the connection's own callback.
        The listener calls :meth:`release` when done with the connection (and :meth:`abort` to give up).
        """
        data = _request_bytes(self.host_header, method, target, headers, body)
        conn = self._idle_connection()
        if conn is None:
            self._send_on_new(data, method, listener)
        else:
            self._start(conn, data, method, listener)

    def _start(self, conn: UpstreamConnection, data: bytes, method: str, listener: Listener) -> None:
        conn.listener = listener
        conn.request = (data, method)
        assert conn.transport is not None
        conn.transport.write(data)

    def _send_on_new(self, data: bytes, method: str, listener: Listener) -> None:
        async def connect() -> None:
            try:
                conn = await self._connect()
            except UpstreamConnectError as exc:
                listener.upstream_failed(exc)
                return
            conn.reused = False
            self._start(conn, data, method, listener)

        task = asyncio.get_running_loop().create_task(connect())
        self._connecting.add(task)  # held: a task nobody references may be collected mid-connect
        task.add_done_callback(self._connecting.discard)

    def release(self, conn: UpstreamConnection, *, reuse: bool = True) -> None:
        """The listener is done with ``conn``: back to the idle list if it can carry another request
        (``reuse=False``: closed whatever it says, as after a ``HEAD``, whose length has no body behind it)."""
        conn.listener = None
        conn.request = None
        self._release(conn, reusable=reuse and conn.reusable)

    @staticmethod
    def abort(conn: UpstreamConnection, reason: str) -> None:
        """Give up on the answer ``conn`` carries (the reader's client went away): the connection is closed."""
        conn.listener = None
        if conn.failure is None and not conn.complete:
            conn._fail(Aborted(reason))
            conn._close()

    async def request(
        self, method: str, target: str, headers: Iterable[tuple[bytes, bytes]], body: bytes
    ) -> UpstreamResponse:
        """Send one request (``target``: path and query, as sent); return once the answer's head is in.

        ``headers`` are sent as given (the caller drops hop-by-hop ones, ``Host`` and
        ``Content-Length``); raises :class:`UpstreamConnectError` when no answer came.
        """
        data = _request_bytes(self.host_header, method, target, headers, body)
        conn = await self._acquire()
        while True:
            conn.head_done = conn.loop.create_future()
            assert conn.transport is not None
            conn.transport.write(data)
            try:
                await conn.head_done
            except UpstreamConnectError:
                conn._close()
                if conn.reused and method in IDEMPOTENT:  # the keep-alive race: once more, on a new connection
                    conn = await self._connect()
                    continue
                raise
            except BaseException:  # cancelled while waiting: the connection carries a half-done request
                conn._close()
                raise
            return UpstreamResponse(conn, head_only=method == "HEAD")

    async def _acquire(self) -> UpstreamConnection:
        conn = self._idle_connection()
        return conn if conn is not None else await self._connect()

    def _idle_connection(self) -> UpstreamConnection | None:
        """The most recently used idle connection still fit for a request, or None."""
        idle = self._idle
        if idle:
            now = time.monotonic()
            while idle:
                conn = idle.pop()  # the most recently used: the likeliest to be warm
                if conn.closed:
                    self._dead_idle -= 1
                elif now - conn.idle_since > IDLE_EXPIRY_S:  # it and every older one: the upstream may be closing them
                    for stale in (conn, *idle):
                        if stale.closed:
                            continue
                        stale.idle = False
                        stale._close()
                    idle.clear()
                    self._dead_idle = 0
                else:
                    conn.idle = False
                    conn.reused = True
                    conn._reset()
                    return conn
        return None

    async def _connect(self) -> UpstreamConnection:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(lambda: UpstreamConnection(self), self.host, self.port, ssl=self._ssl),
                self.connect_timeout,
            )
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            raise UpstreamConnectError(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from exc
        self._open.add(conn)
        return conn

    def _release(self, conn: UpstreamConnection, *, reusable: bool) -> None:
        if reusable and len(self._idle) < self.max_idle:
            conn.idle = True
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            conn._close()

    def _lost(self, conn: UpstreamConnection) -> None:
        """A connection closed (either side). Idle ones stay in the list until skipped or pruned."""
        self._open.discard(conn)
        if conn.idle:
            self._dead_idle += 1
            if self._dead_idle > 64 and self._dead_idle > len(self._idle) // 2:
                self._idle = collections.deque(c for c in self._idle if not c.closed)
                self._dead_idle = 0

    async def aclose(self) -> None:
        for conn in list(self._open):
            conn._close()
        self._idle.clear()
        self._open.clear()


def _request_bytes(host: bytes, method: str, target: str, headers: Iterable[tuple[bytes, bytes]], body: bytes) -> bytes:
    """A request as it goes on the wire: ``Host`` first, the headers as given, the body's ``Content-Length``."""
    lines = [f"{method} {target} HTTP/1.1\r\nhost: ".encode("latin-1"), host, b"\r\n"]
    for name, value in headers:
        lines += (name, b": ", value, b"\r\n")
    if body or method in _BODY_METHODS:
        lines.append(b"content-length: %d\r\n" % len(body))
    lines.append(b"\r\n")
    return b"".join(lines) + body if body else b"".join(lines)
