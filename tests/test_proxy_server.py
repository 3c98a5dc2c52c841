"""The proxy's socket-level front (``orsbench/servers/proxy_server.py``): the HTTP/1.1 a client may send.

``tests/test_proxy.py`` shows the forwarding transparent (every scenario's transcript through the
proxy equals the direct one); here, on a raw socket, what uvicorn used to handle for it: pipelined
requests answered in order, ``Expect: 100-continue``, a chunked request body, HTTP/1.0 closing, a
malformed request refused with a 400, and a local route.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from orsbench import protocol
from orsbench.servers.launch import RunningServer, start_proxy


@pytest.fixture(scope="module")
def proxy(ors_server_factory) -> Iterator[RunningServer]:  # type: ignore[no-untyped-def]
    running = start_proxy(ors_server_factory("echo").url)
    yield running
    running.stop()


def exchange(proxy: RunningServer, raw: bytes, *, answers: int = 1) -> bytes:
    """Send ``raw`` on one connection; read until ``answers`` answers (by their status lines) and their bodies came, or the close."""
    host, port = proxy.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(raw)
        data = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            data += chunk
            if data.count(b"HTTP/1.1 2") + data.count(b"HTTP/1.1 4") >= answers and data.endswith((b"}", b"]", b"0\r\n\r\n")):
                break
    return data


def test_pipelined_requests_are_answered_in_order(proxy):
    get = b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n"
    tools = b"GET /echo/tools HTTP/1.1\r\nhost: x\r\n\r\n"
    data = exchange(proxy, get + tools, answers=2)
    assert data.index(b'{"status":"ok"}') < data.index(b'"tools"')
    assert data.count(b"HTTP/1.1 200 OK") == 2


def test_expect_100_continue_and_a_chunked_body(proxy):
    body = json.dumps({"split": "train"}).encode()
    raw = (
        b"POST /echo/num_tasks HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"expect: 100-continue\r\ntransfer-encoding: chunked\r\n\r\n"
        + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    )
    data = exchange(proxy, raw)
    assert data.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n")
    assert b'"num_tasks"' in data


def test_http_1_0_is_answered_and_closed(proxy):
    data = exchange(proxy, b"GET /health HTTP/1.0\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 200 OK\r\n") and b"connection: close\r\n" in data.lower()


def test_a_malformed_request_is_refused_with_a_400_and_the_connection_closed(proxy):
    data = exchange(proxy, b"NOT HTTP AT ALL\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 400 Bad Request\r\n") and b"malformed request" in data


def test_the_live_report_is_the_proxys_own_route(proxy):
    data = exchange(proxy, b"GET /_orsbench/report HTTP/1.1\r\nhost: x\r\n\r\n")
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK") and "checks" in json.loads(body)


def test_an_event_stream_is_rechunked_and_ends_with_its_last_chunk(proxy):
    sid_data = exchange(proxy, b"POST /create_session HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
    assert b"transfer-encoding: chunked" in sid_data.lower() and sid_data.endswith(b"0\r\n\r\n")
    sid = sid_data.split(b"data: ")[1].split(b"\r\n")[0].decode()
    assert protocol.EVENT_TASK_ID.encode() in sid_data and len(sid) == 36


def test_a_client_gone_before_the_answer_still_leaves_the_servers_answer_on_the_evidence(proxy):
    """The server is graded on what it sent: a client that hangs up (a readiness probe timing out) costs no server check."""
    host, port = proxy.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"GET /version HTTP/1.1\r\nhost: x\r\n\r\n")  # nothing else in this module asks for /version
    assert exchange(proxy, b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n").startswith(b"HTTP/1.1 200")  # after the hang-up
    report = json.loads(exchange(proxy, b"GET /_orsbench/report HTTP/1.1\r\nhost: x\r\n\r\n").partition(b"\r\n\r\n")[2])
    version = next(c for c in report["checks"] if c["id"] == "discovery.version")
    assert version["status"] == "pass", version["message"]


class _ClosesIdleKeepAlive:
    """An upstream on 127.0.0.1 that answers each connection's first request and keeps it alive, then closes it
    as the next request arrives, unanswered: an idle keep-alive connection the upstream closed just as the
    proxy reused it (the race every server's keep-alive timeout opens). ``accepted`` counts its connections."""

    ANSWER = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 16\r\n\r\n{"status": "ok"}'

    def __init__(self) -> None:
        import threading

        self.accepted = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        import threading

        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(30)
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536) or b"\r\n\r\n"  # EOF ends the wait too
                head, _, body = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0)
                while len(body) < length:
                    body += conn.recv(65536) or b"x" * length
                conn.sendall(self.ANSWER)
                conn.recv(65536)  # the next request on the kept-alive connection: closed unanswered
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize("front", ["socket", "asgi"])
def test_an_idempotent_request_on_a_keepalive_connection_the_upstream_closed_is_retried_once(front):
    """As nginx does (``proxy_next_upstream error``): a GET the upstream's stale keep-alive connection lost before any
    answer goes once more on a new connection, so the client gets its 200; a POST may have been acted on: a 502."""
    import httpx

    upstream = _ClosesIdleKeepAlive()
    proxy = start_proxy(upstream.url, request_log=front == "asgi")  # --request-log: the ASGI app under uvicorn
    try:
        with httpx.Client(base_url=proxy.url, timeout=30, trust_env=False) as client:
            before = upstream.accepted
            statuses = [client.get("/some/route").status_code for _ in range(4)]
            assert statuses == [200] * 4
            # each GET found the idle connection the last one left, lost it, and went again on a new one
            assert upstream.accepted - before >= 4
            lost = client.post("/some/route", json={})
            assert lost.status_code == 502 and "did not answer" in lost.text, lost.text
    finally:
        proxy.stop()
        upstream.close()
