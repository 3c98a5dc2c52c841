"""The proxy's upstream pool (``orsbench.servers.origin_pool``): reuse, framing, cuts, closes, backpressure.

Reuse is shown against the mock engine itself. The framing cases no orsbench server produces (an
answer delimited by the close, a chunked answer cut in the middle, an idle connection the server
closes, a body bigger than the read buffer) are served by a few lines of raw asyncio in the test's
own loop on 127.0.0.1, so each case is exact.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import orjson
import pytest

from orsbench import protocol
from orsbench.servers.launch import serve
from orsbench.servers.origin_pool import (
    HIGH_WATER,
    Aborted,
    UpstreamConnectError,
    UpstreamCut,
    UpstreamPool,
    UpstreamResponse,
)

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_all(response: UpstreamResponse) -> bytes:
    pieces = []
    while (piece := await response.next_piece()) is not None:
        pieces.append(piece)
    return b"".join(pieces)


async def with_stub(handler: Handler, body: Callable[[UpstreamPool], Awaitable[None]]) -> None:
    """Serve ``handler`` on 127.0.0.1 (a free port) while ``body(pool)`` runs; stop both."""
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = UpstreamPool(f"http://127.0.0.1:{port}")
    try:
        await asyncio.wait_for(body(pool), 20)
    finally:
        await pool.aclose()
        server.close()
        await server.wait_closed()


async def read_head(reader: asyncio.StreamReader) -> bytes:
    return await reader.readuntil(b"\r\n\r\n")


def test_requests_reuse_one_keepalive_connection_to_the_mock():
    async def go(url: str) -> None:
        pool = UpstreamPool(url)
        try:
            for _ in range(20):
                response = await pool.request("GET", protocol.HEALTH, [], b"")
                assert response.status == 200 and orjson.loads(await read_all(response)) == {"status": "ok"}
                response.release()
            assert pool.connections == 1 and pool.idle == 1
            # A POST with a body: the length is the pool's to write, the session header passes as given.
            response = await pool.request("POST", protocol.CREATE_SESSION, [(b"accept", b"text/event-stream")], b"")
            stream = await read_all(response)
            response.release()
            assert response.status == 200 and b"event: task_id" in stream
            assert pool.connections == 1
        finally:
            await pool.aclose()

    with serve("echo") as server:
        asyncio.run(go(server.url))


def test_an_answer_delimited_by_the_close_is_complete_and_not_reused():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nall of it")
        await writer.drain()
        writer.close()

    async def body(pool: UpstreamPool) -> None:
        response = await pool.request("GET", "/", [], b"")
        assert await read_all(response) == b"all of it"
        response.release()
        await asyncio.sleep(0.05)
        assert pool.connections == 0

    asyncio.run(with_stub(handler, body))


async def _cuts_a_chunked_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A stub that sends one chunk of a chunked answer, then closes the connection."""
    await read_head(reader)
    writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n")
    await writer.drain()
    await asyncio.sleep(0.1)
    writer.close()


def test_a_chunked_answer_cut_in_the_middle_raises_cut_after_what_came():
    async def body(pool: UpstreamPool) -> None:
        response = await pool.request("GET", "/", [], b"")
        assert await response.next_piece() == b"hello"
        with pytest.raises(UpstreamCut):
            await response.next_piece()
        response.release()

    asyncio.run(with_stub(_cuts_a_chunked_answer, body))


def test_an_idle_connection_the_server_closed_is_not_reused():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()  # kept alive by the headers, closed by the server right after

    async def body(pool: UpstreamPool) -> None:
        for _ in range(3):
            response = await pool.request("GET", "/", [], b"")
            assert await read_all(response) == b"ok"
            response.release()
            await asyncio.sleep(0.05)  # the close reaches the pool before the next request
        assert pool.idle == 0

    asyncio.run(with_stub(handler, body))


def test_no_listener_is_a_connect_error():
    async def go() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        pool = UpstreamPool(f"http://127.0.0.1:{port}", connect_timeout=5)
        with pytest.raises(UpstreamConnectError):
            await pool.request("GET", "/", [], b"")

    asyncio.run(go())


def test_a_body_bigger_than_the_buffer_arrives_whole_through_backpressure():
    size = HIGH_WATER * 6
    payload = bytes(range(256)) * (size // 256)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(payload) + payload)
        await writer.drain()
        await reader.read()  # until the client closes
        writer.close()

    async def body(pool: UpstreamPool) -> None:
        response = await pool.request("GET", "/", [], b"")
        got = bytearray(await response.next_piece() or b"")
        await asyncio.sleep(0.3)  # a reader that lags: the connection stops reading instead of buffering it all
        assert response.reading_paused and response.buffered <= 2 * HIGH_WATER, response.buffered
        while (piece := await response.next_piece()) is not None:
            got += piece
        assert bytes(got) == payload  # and reading resumed, every byte in order
        response.release()

    asyncio.run(with_stub(handler, body))


def test_abort_wakes_a_waiting_reader_and_closes_the_connection():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        await writer.drain()
        await reader.read()  # stalls until the client goes
        writer.close()

    async def body(pool: UpstreamPool) -> None:
        response = await pool.request("POST", "/call", [], b"{}")
        reading = asyncio.ensure_future(response.next_piece())
        await asyncio.sleep(0.05)
        response.abort("the client disconnected")
        with pytest.raises(Aborted):
            await reading
        response.release()
        await asyncio.sleep(0.05)
        assert pool.connections == 0

    asyncio.run(with_stub(handler, body))


def _closes_the_second_request() -> tuple[Handler, list[int]]:
    """A stub that answers each connection's first request (kept alive), then closes as the second arrives:
    the keep-alive race, every time. ``accepted`` counts its connections."""
    accepted: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        await read_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        await read_head(reader)
        writer.close()

    return handler, accepted


def test_an_idempotent_request_lost_by_a_reused_connection_is_sent_again_on_a_new_one():
    handler, accepted = _closes_the_second_request()

    async def body(pool: UpstreamPool) -> None:
        for _ in range(3):
            response = await pool.request("GET", "/", [], b"")
            assert response.status == 200 and await read_all(response) == b"ok"
            response.release()
        assert len(accepted) == 3  # each GET after the first: lost on the reused connection, answered on a new one

    asyncio.run(with_stub(handler, body))


def test_a_post_lost_by_a_reused_connection_is_not_sent_twice():
    handler, accepted = _closes_the_second_request()

    async def body(pool: UpstreamPool) -> None:
        response = await pool.request("POST", "/", [], b"{}")
        assert await read_all(response) == b"ok"
        response.release()
        with pytest.raises(UpstreamConnectError):
            await pool.request("POST", "/", [], b"{}")  # the upstream may have acted on it
        assert len(accepted) == 1

    asyncio.run(with_stub(handler, body))


def test_an_idle_connection_past_its_expiry_is_not_reused(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("orsbench.servers.origin_pool.IDLE_EXPIRY_S", 0.05)
    accepted: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        while True:
            try:
                await read_head(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            await writer.drain()

    async def body(pool: UpstreamPool) -> None:
        for pause in (0.0, 0.0, 0.15):
            await asyncio.sleep(pause)
            response = await pool.request("POST", "/", [], b"{}")
            assert await read_all(response) == b"ok"
            response.release()
        assert len(accepted) == 2 and pool.connections == 1  # reused once; past the expiry, closed and replaced

    asyncio.run(with_stub(handler, body))


class Collect:
    """A :class:`~orsbench.servers.origin_pool.Listener` that keeps what came and lets the connection go at the end."""

    def __init__(self, pool: UpstreamPool) -> None:
        self.pool, self.pieces, self.status, self.error = pool, [], 0, None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def upstream_read(self, conn, piece: bytes) -> None:  # type: ignore[no-untyped-def]
        self.status = conn.status if conn.headed else 0
        self.pieces.append(piece)
        if conn.complete or conn.failure is not None or conn.closed:
            self.error = conn.failure if not conn.complete else None
            self.pool.release(conn)
            self.done.set_result(None)

    def upstream_failed(self, error: Exception) -> None:
        self.error = error
        self.done.set_result(None)


async def sent(pool: UpstreamPool, method: str) -> Collect:
    listener = Collect(pool)
    pool.send(method, "/", [], b"{}" if method == "POST" else b"", listener)
    await listener.done
    return listener


def test_a_listener_gets_each_answer_and_a_get_lost_by_a_reused_connection_goes_again():
    """UpstreamPool.send (the socket front's way): the same reuse, and the same resend after the keep-alive race."""
    handler, accepted = _closes_the_second_request()

    async def body(pool: UpstreamPool) -> None:
        for _ in range(3):
            got = await sent(pool, "GET")
            assert (got.status, b"".join(got.pieces), got.error) == (200, b"ok", None)
        assert len(accepted) == 3  # each GET after the first: lost on the reused connection, answered on a new one
        got = await sent(pool, "POST")  # lost on the reused one too: not sent twice, the listener is told (a 502)
        assert got.status == 0 and isinstance(got.error, UpstreamConnectError) and len(accepted) == 3

    asyncio.run(with_stub(handler, body))


def test_a_listener_sees_a_cut_answer_as_a_failure_after_what_came():
    async def body(pool: UpstreamPool) -> None:
        got = await sent(pool, "GET")
        assert got.status == 200 and b"".join(got.pieces) == b"hello" and isinstance(got.error, UpstreamCut)

    asyncio.run(with_stub(_cuts_a_chunked_answer, body))
