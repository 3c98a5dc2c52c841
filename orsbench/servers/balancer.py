"""The built-in hashing router: what ``orsbench serve --replicas N`` puts in front where nginx is not installed.

It does what a correct nginx front does (:func:`orsbench.servers.replicas.nginx_config`): every request
with an ``X-Session-ID`` goes to the replica a consistent-hash ring picks for that id (so a session
stays on the replica that holds it, and a replica that leaves moves only its own sessions), a request
without one goes to the next replica in turn; event streams pass through as each upstream read arrives
(keep-alives included), with no idle timeout of its own. Each planted balancer fault of
:data:`~orsbench.servers.fronts.BALANCER_FAULTS` changes exactly that behaviour, as in nginx.

Forwarding rides on the proxy's upstream connections (:class:`~orsbench.servers.origin_pool.UpstreamPool`,
one per replica); nothing here parses HTTP.
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import itertools
import zlib
from collections.abc import Sequence
from typing import Any

from orsbench import protocol
from orsbench.servers.http import run_lifespan
from orsbench.servers.proxy import HOP_BY_HOP
from orsbench.servers.fronts import BODY_LIMIT, ERROR_PAGE, FAULT_BODY_LIMIT, FAULT_IDLE_TIMEOUT_S, HTML_ERROR_STATUSES
from orsbench.servers.origin_pool import UpstreamConnectError, UpstreamError, UpstreamPool, UpstreamResponse

Scope = dict[str, Any]
#: Points per replica on the hash ring (more: a more even spread of sessions).
VNODES = 160
_SESSION = protocol.SESSION_HEADER.lower().encode()
#: Headers of the answer the router leaves out: the hop-by-hop ones, the length (a body may be re-encoded), and
#: the ones uvicorn writes itself.
_DROP = frozenset({*(h.encode() for h in HOP_BY_HOP), b"content-length", b"date", b"server"})
_DROP_REQUEST = frozenset({*(h.encode() for h in HOP_BY_HOP), b"host", b"content-length", b"expect"})


def ring_point(key: str) -> int:
    return int.from_bytes(hashlib.md5(key.encode(), usedforsecurity=False).digest()[:8], "big")


class HashRing:
    """A consistent-hash ring over members 0..n-1: a key's member changes only when that member leaves."""

    def __init__(self, members: int) -> None:
        points = sorted((ring_point(f"{m}#{v}"), m) for m in range(members) for v in range(VNODES))
        self._keys = [p for p, _ in points]
        self._members = [m for _, m in points]

    def member(self, key: str) -> int:
        i = bisect.bisect(self._keys, ring_point(key)) % len(self._keys)
        return self._members[i]


def _page(status: int, title: str) -> bytes:
    return f"<html>\r\n<head><title>{status} {title}</title></head>\r\n<body>\r\n<center><h1>{status} {title}</h1></center>\r\n<hr><center>orsbench router</center>\r\n</body>\r\n</html>\r\n".encode()


class BalancerApp:
    """ASGI app: route by ``X-Session-ID`` over ``origins`` (``dead``: a replica gone, in the ring with ``dead-replica``)."""

    def __init__(self, origins: Sequence[str], *, faults: tuple[str, ...] = (), dead: str | None = None) -> None:
        self.faults = frozenset(faults)
        self.pools = [UpstreamPool(origin) for origin in origins]
        self.origins = list(origins)
        session_pools = list(self.pools)
        if dead is not None and "dead-replica" in self.faults:
            session_pools.append(UpstreamPool(dead))
        self.session_pools = session_pools
        self.ring = HashRing(len(session_pools))
        self._turn = itertools.count()
        self.body_limit = FAULT_BODY_LIMIT if "body-limit" in self.faults else BODY_LIMIT

    def pick(self, sid: str | None) -> list[UpstreamPool]:
        """The replicas for a request, in the order tried: by the session's hash (round-robin under ``round-robin``),
        else the next in turn; then, as nginx's ``proxy_next_upstream error`` does, the others (not under
        ``dead-replica``, whose point is a balancer that does not retry)."""
        if sid and "round-robin" not in self.faults:
            first = self.ring.member(sid)
            pools = self.session_pools
        else:
            pools = self.session_pools if sid else self.pools
            first = next(self._turn) % len(pools)
        if "dead-replica" in self.faults:
            return [pools[first]]
        return [pools[(first + k) % len(pools)] for k in range(len(pools))]

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await run_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        body, too_large = await _read_body(receive, self.body_limit)
        if too_large:
            await _answer(send, 413, _page(413, "Request Entity Too Large"), b"text/html")
            return
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _DROP_REQUEST]
        sid = next((v.decode("latin-1") for k, v in scope["headers"] if k.lower() == _SESSION), None)
        target = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        response = None
        for pool in self.pick(sid):
            try:
                response = await pool.request(scope["method"], target, headers, body)
                break
            except UpstreamConnectError:  # nothing answered there (a replica restarting): the next one
                continue
            except UpstreamError:
                break
        if response is None:
            await _answer(send, 502, _page(502, "Bad Gateway"), b"text/html")
            return
        try:
            await self._relay(scope, response, send)
        finally:
            response.release()

    async def _relay(self, scope: Scope, response: UpstreamResponse, send: Any) -> None:
        out = [(k, v) for k, v in response.headers if k.lower() not in _DROP]
        kind = next((v.split(b";")[0].strip().lower() for k, v in out if k.lower() == b"content-type"), b"")
        sse = kind == b"text/event-stream"
        if "html-errors" in self.faults and response.status in HTML_ERROR_STATUSES:
            while await response.next_piece() is not None:
                pass
            await _answer(send, response.status, ERROR_PAGE.encode(), b"text/html")
            return
        accepts = b"gzip" in next((v for k, v in scope["headers"] if k.lower() == b"accept-encoding"), b"")
        zipper = zlib.compressobj(wbits=31) if "gzip-stream" in self.faults and accepts and kind in (b"text/event-stream", b"application/json") else None
        if zipper is not None:
            out.append((b"content-encoding", b"gzip"))
        idle = FAULT_IDLE_TIMEOUT_S if "idle-timeout" in self.faults else None
        held: list[bytes] = []
        hold = sse and "buffering" in self.faults
        await send({"type": "http.response.start", "status": response.status, "headers": out})
        while True:
            try:
                piece = await asyncio.wait_for(response.next_piece(), idle) if idle else await response.next_piece()
            except asyncio.TimeoutError:
                response.abort("idle timeout")
                return  # cut: the response is never completed, as nginx closes the connection
            except UpstreamError:
                return
            if piece is None:
                break
            if zipper is not None:
                piece = zipper.compress(piece) + zipper.flush(zlib.Z_SYNC_FLUSH)
            if hold:
                held.append(piece)
            elif piece:
                await send({"type": "http.response.body", "body": piece, "more_body": True})
        tail = zipper.flush() if zipper is not None else b""
        await send({"type": "http.response.body", "body": b"".join(held) + tail, "more_body": False})


async def _read_body(receive: Any, limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return b"", True
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    return b"".join(chunks), False


async def _answer(send: Any, status: int, body: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
