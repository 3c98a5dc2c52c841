"""One traffic view (issue 34, item 7): one Exchange builder, one observer protocol.

* the proxy's own exchanges and a request log's around it, for the same traffic, carry the same facts
  (the graders under ``orsbench proxy`` and ``orsbench proxy --fault`` read one shape), and a log entry
  read back from JSON is built the same way as the live one;
* one observer composed into the proxy and into hosted mode sees the same sequence for the same client;
* nothing in ``orsbench/`` builds an ``Exchange`` but the builder;
* ``ProxyGrading`` puts each grader where ``orsbench proxy`` needs it; quiet halves cost a source nothing.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from orsbench import protocol
from orsbench.checks.passive import PassiveGrader
from orsbench.clientcheck import get_case
from orsbench.clientcheck.hosted import HostedServer
from orsbench.clientcheck.proxy_grading import ProxyGrading
from orsbench.clientcheck.passive import PassiveClientGrader
from orsbench.clientcheck.traffic import from_log, seen_of
from orsbench.servers.proxy import ProxyApp, wrap_faults
from orsbench.servers.request_log import Entry, RequestLog
from orsbench.wire.client import encode_secrets
from orsbench.wire.evidence import CUT, Exchange
from orsbench.wire.observe import Observer, Observers, Observing
from orsbench.wire.sample import Sampled

ROOT = Path(__file__).resolve().parents[1]
PEER = ("127.0.0.1", 40123)


class Recorder:
    """An observer keeping what it was told, in order."""

    def __init__(self) -> None:
        self.told: list[tuple[str, Exchange, str]] = []

    def started(self, exchange: Exchange, path: str) -> None:
        assert exchange.status is None and exchange.body == b""  # told before any answer
        self.told.append(("started", exchange, path))

    def ended(self, exchange: Exchange, path: str) -> None:
        self.told.append(("ended", exchange, path))

    def ended_exchanges(self) -> list[Exchange]:
        return [exchange for half, exchange, _ in self.told if half == "ended"]

    def sequence(self) -> list[tuple[Any, ...]]:
        """What a grader reads of each notice, free of ids and times."""
        return [
            (half, ex.method, path, ex.status, ex.sse.names() if ex.sse is not None else None, ex.error is None)
            for half, ex, path in self.told
        ]


async def _episode(http: httpx.AsyncClient, *, secrets: dict[str, str] | None = None) -> None:
    """One client episode on ``echo``: a session, its prompt, a call, a refused call, a route without its environment, the delete."""
    created = await http.post(protocol.CREATE_SESSION)
    sid = created.text.split("data: ")[1].split()[0]
    session = {protocol.SESSION_HEADER: sid}
    extra = {protocol.SECRETS_HEADER: encode_secrets(secrets)} if secrets else {}
    await http.post(protocol.CREATE, headers={**session, **extra}, json={"env_name": "echo", "split": "train", "index": 0})
    await http.get("/echo/prompt", headers=session)
    await http.post("/echo/call", headers=session, json={"name": "echo", "input": {"text": "not the word"}})
    await http.post("/echo/call", headers=session, json={"name": "echo", "input": {"wrong": 1}})
    await http.get("/no/such/route")
    await http.post(protocol.DELETE, headers=session)


async def _through(app: Any, *, secrets: dict[str, str] | None = None) -> None:
    transport = httpx.ASGITransport(app=app, client=PEER)
    async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as http:
        await _episode(http, secrets=secrets)


def _facts(exchange: Exchange) -> dict[str, Any]:
    """The facts of an exchange the builder decides (times are each source's own moments)."""
    return {
        "method": exchange.method,
        "path": urlsplit(exchange.url).path,
        "request_body": exchange.request_body,
        "status": exchange.status,
        "headers": exchange.headers,
        "body": exchange.body,
        "events": [(e.event, e.data) for e in exchange.sse.events] if exchange.sse is not None else None,
        "error": exchange.error,
        "peer": exchange.peer,
        "session": protocol.session_in(exchange.request_headers),
    }


def test_the_proxy_and_its_request_log_build_one_exchange_for_the_same_traffic(ors_server_factory):
    upstream = ors_server_factory("echo")
    inner, outer = Recorder(), Recorder()
    secrets = {"api_key": "s3cret-value-123"}

    async def go() -> list[Entry]:
        proxy = ProxyApp(upstream.url, observers=[inner])
        log = RequestLog(proxy, keep=True, observers=[outer])
        try:
            await _through(log, secrets=secrets)
        finally:
            await proxy.aclose()
        return log.entries

    entries = asyncio.run(go())
    proxied, logged = inner.ended_exchanges(), outer.ended_exchanges()
    assert len(proxied) == len(logged) == len(entries) == 7
    assert [e.status for e in proxied] == [200, 200, 200, 200, 200, 308, 200]  # 308: to the default environment
    for through_proxy, through_log, entry in zip(proxied, logged, entries, strict=True):
        assert _facts(through_proxy) == _facts(through_log)
        assert through_log.elapsed >= 0 and through_proxy.elapsed >= through_proxy.elapsed_headers > 0
        # what the client graders read of each: the same Seen, from the proxy and from the tap outside it
        a, b = seen_of(through_proxy), seen_of(through_log, entry.path)
        assert (a.path, a.complete, a.secret_names, a.sid) == (b.path, b.complete, b.secret_names, b.sid)
        # the log read back from JSON (check-client's path) is built by the same builder: the same facts
        read_back = Entry.from_json(entry.to_json()).exchange()
        assert _facts(read_back) == _facts(through_log)
        assert (read_back.started_at, read_back.elapsed) == (through_log.started_at, through_log.elapsed)
    # the secrets: by name in the log and its Seen, in full only in the observers' memory (as the proxy's)
    create = entries[1]
    assert create.request_headers[protocol.SECRETS_HEADER.lower()] == "<redacted>" and create.secret_names == ["api_key"]
    assert from_log([create.to_json()])[0].secret_names == seen_of(logged[1]).secret_names == ("api_key",)
    assert all("s3cret" not in str(ex.summary()) for ex in logged)


async def _request(app: Any, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    """One request straight into an ASGI app; the body it got, cut or not (httpx's ASGI transport refuses a cut answer)."""
    done = asyncio.Event()
    sent = False
    received: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            received.append(message.get("body", b""))
            if not message.get("more_body"):
                done.set()

    raw = [(k.lower().encode(), v.encode()) for k, v in {"host": "proxy", **headers}.items()]
    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": b"", "headers": raw,
             "scheme": "http", "client": PEER, "server": ("proxy", 80), "http_version": "1.1", "asgi": {"version": "3.0"}}  # fmt: skip
    try:
        await app(scope, receive, send)
    finally:
        done.set()
    return b"".join(received)


def test_a_cut_stream_reads_cut_through_the_proxy_and_through_the_log_around_it(ors_server_factory):
    """``--fault``'s path: the client grader reads the log outside the faults; a stream cut there is not complete in
    either view, and the log (which knows no cause) says the answer was cut."""
    upstream = ors_server_factory("echo")
    outer = Recorder()

    async def go() -> list[Entry]:
        proxy = ProxyApp(upstream.url)
        log = RequestLog(wrap_faults(proxy, ("stream-drop",), 0), keep=True, observers=[outer])
        json_type = {"content-type": "application/json"}
        try:
            created = await _request(log, "POST", protocol.CREATE_SESSION, {})
            sid = created.decode().split("data: ")[1].split()[0]
            session = {protocol.SESSION_HEADER: sid, **json_type}
            await _request(log, "POST", protocol.CREATE, session, b'{"env_name": "echo", "split": "train", "index": 0}')
            for _ in range(3):
                await _request(log, "POST", "/echo/call", session, b'{"name": "echo", "input": {"text": "x"}}')
        finally:
            await proxy.aclose()
        return log.entries

    entries = asyncio.run(go())
    logged = outer.ended_exchanges()
    cut = [(ex, e) for ex, e in zip(logged, entries, strict=True) if not e.complete]
    assert cut, "stream-drop cut no stream"
    for exchange, entry in cut:
        assert exchange.error == CUT and exchange.status == 200 and not seen_of(exchange, entry.path).complete
        assert exchange.sse is not None and "end" not in exchange.sse.names()
        read_back = Entry.from_json(entry.to_json()).exchange()
        assert read_back.error == CUT and _facts(read_back) == _facts(exchange)
        assert not from_log([entry.to_json()])[0].complete


def test_one_observer_sees_the_same_sequence_through_the_proxy_and_hosted_mode(ors_server_factory):
    upstream = ors_server_factory("echo")
    through_proxy, through_hosted = Recorder(), Recorder()

    async def proxied() -> None:
        proxy = ProxyApp(upstream.url, observers=[through_proxy])
        try:
            await _through(proxy)
        finally:
            await proxy.aclose()

    async def hosted() -> None:
        server = HostedServer([get_case("echo")], observers=[through_hosted])
        inbox: asyncio.Queue = asyncio.Queue()
        outbox: asyncio.Queue = asyncio.Queue()
        lifespan = asyncio.create_task(server({"type": "lifespan"}, inbox.get, outbox.put))
        await inbox.put({"type": "lifespan.startup"})
        assert (await outbox.get())["type"] == "lifespan.startup.complete"
        server.assign("hosted", [9000, 9001])
        try:
            transport = httpx.ASGITransport(app=server, client=PEER)
            async with httpx.AsyncClient(transport=transport, base_url="http://hosted:9001") as http:
                await _episode(http)
            # the case graded the same traffic it told the extra observer of
            assert server.cases["echo"].requests == 7
        finally:
            await inbox.put({"type": "lifespan.shutdown"})
            await outbox.get()
            await lifespan

    asyncio.run(proxied())
    asyncio.run(hosted())
    assert len(through_proxy.told) == 14
    assert through_proxy.sequence() == through_hosted.sequence()
    halves = [half for half, _, _ in through_proxy.told]
    assert halves == ["started", "ended"] * 7  # one client, one request at a time: each started, then ended
    for (_, a, _), (_, b, _) in zip(through_proxy.told[::2], through_proxy.told[1::2], strict=True):
        assert a is b  # the exchange told at the start is the one completed at the end


def test_nothing_in_orsbench_builds_an_exchange_but_the_builder():
    """``Exchange(...)`` is called in ``wire/evidence.py`` alone (``cls(...)`` inside ``Exchange.begin``)."""
    offences = []
    for path in sorted((ROOT / "orsbench").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Exchange":
                offences.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offences == []


def test_proxy_grading_puts_each_grader_where_the_proxy_needs_it():
    plain = ProxyGrading("http://127.0.0.1:9")
    assert plain.inner.all == (plain.server, plain.clients) and not plain.outer
    # the server grader listens only to ends; the client grader to both halves
    assert plain.inner.on_start == (plain.clients.started,)
    assert plain.inner.on_end == (plain.server.ended, plain.clients.ended)
    faulty = ProxyGrading("http://127.0.0.1:9", faults=True)
    assert faulty.inner.all == (faulty.server,) and faulty.outer.all == (faulty.clients,)
    assert faulty.inner.on_start == ()  # nothing on the proxy listens to starts: none is called
    extra = Recorder()
    sampled = ProxyGrading("http://127.0.0.1:9", grade_sample=0.5, also=[extra])
    gate = sampled.inner.all[0]
    assert isinstance(gate, Sampled) and gate.observers.all == (sampled.server, sampled.clients)
    assert sampled.inner.all[1] is extra  # the recorder and the printer see everything, unsampled
    gated = ProxyGrading("http://127.0.0.1:9", grade_sample=0.5, faults=True)
    assert gated.inner.on_start == ()  # the gate listens only to what the graders behind it listen to
    assert len(gated.inner.on_end) == 1 and gated.outer.all == (gated.clients,)


def test_observers_leave_out_quiet_halves_and_nest_flat():
    class Ends(Observing):
        def ended(self, exchange: Exchange, path: str) -> None:
            pass

    ends, both = Ends(), Recorder()
    gathered = Observers([ends, both])
    assert gathered.on_start == (both.started,) and gathered.on_end == (ends.ended, both.ended)
    nested = Observers([Observers([ends]), both])
    assert nested.on_start == (both.started,) and nested.on_end == (ends.ended, both.ended)
    for observer in (ends, both, gathered, PassiveGrader("http://x"), PassiveClientGrader()):
        assert isinstance(observer, Observer)
