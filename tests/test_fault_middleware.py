"""HTTP fault profiles wrap any ORS ASGI app: driven here around an app they cannot see into.

The engine is hidden behind a plain ASGI function (``opaque``), so a fault that
needed the engine instance could not work; :func:`wrap_app` is what a proxy in
front of a real ORS server uses. Messages are read straight off the ASGI
``send``, so a dropped stream (the app returning without finishing the
response) is visible as such.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from orsbench import protocol
from orsbench.config import ServerConfig
from orsbench.scenarios import get_scenario
from orsbench.servers.engine import Engine
from orsbench.servers.faults import FaultContext, apply_faults, http_fault_names, wrap_app
from orsbench.servers.faults.middleware import ReapIdle
from orsbench.servers.faults import profiles as P
from orsbench.wire.sse import parse

HTTP_PROFILES = {
    "latency-jitter", "flaky-5xx", "rate-limit", "stream-drop", "stream-stall", "stream-no-end", "short-ttl",
    "credits-402", "cut-before-task-id", "reward-nan", "credits-402-discovery", "rate-limit-400", "missing-task-429",
}  # fmt: skip


def opaque_engine(**config: Any) -> tuple[Engine, Any]:
    engine = Engine([get_scenario("slow", setup=0.0, latency=0.0, long_call=0.3)], ServerConfig(**config))

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await engine(scope, receive, send)

    return engine, app


async def request(app: Any, method: str, path: str, body: Any = None, sid: str = "s1") -> list[dict[str, Any]]:
    raw = b"" if body is None else json.dumps(body).encode()
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"x-session-id", sid.encode()), (b"content-type", b"application/json")],
    }
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append({**message, "at": time.monotonic()})

    await asyncio.wait_for(app(scope, receive, send), 10)
    return messages


def body(messages: list[dict[str, Any]]) -> bytes:
    return b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")


def finished(messages: list[dict[str, Any]]) -> bool:
    return any(m["type"] == "http.response.body" and not m.get("more_body") for m in messages)


async def fresh_call(app: Any, tool: str = "step", tool_input: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    created = await request(app, "POST", protocol.CREATE, {"env_name": "slow", "split": "train", "index": 0})
    assert created[0]["status"] == 200, body(created)
    return await request(app, "POST", protocol.env_path("slow", protocol.CALL), {"name": tool, "input": tool_input or {}})


def test_the_http_profiles_are_the_ones_a_proxy_can_use() -> None:
    from orsbench.servers.faults import FAULTS

    profiles = {name for name in http_fault_names() if FAULTS[name].kind == "profile"}
    assert profiles == HTTP_PROFILES
    # The isolation violations (docs/protocol.md §15) are told at the HTTP level too: they wrap any server.
    assert {n for n in http_fault_names() if FAULTS[n].kind == "violation"} >= {"newest-task-serves-all", "session-ids-racy"}
    with pytest.raises(ValueError, match="'tool-raises' changes the mock engine itself"):
        wrap_app(lambda *a: None, ("stream-drop", "tool-raises"), seed=0)
    with pytest.raises(ValueError, match="unknown fault 'nope'"):
        wrap_app(lambda *a: None, ("nope",), seed=0)


def test_stream_drop_cuts_after_task_id_and_the_task_stays_resumable() -> None:
    async def scenario() -> None:
        counted: list[tuple[str, int | None]] = []
        engine, inner = opaque_engine()
        app = wrap_app(inner, ("stream-drop",), seed=1, on_fault=lambda name, status: counted.append((name, status)))
        messages = await fresh_call(app)
        assert messages[0]["status"] == 200
        assert not finished(messages), "a dropped stream never completes its response"
        stream = parse(body(messages))
        assert stream.names() == [protocol.EVENT_TASK_ID] and stream.incomplete is None
        assert counted == [("stream-drop", None)]
        task_id = stream.events[0].data
        resumed = await request(app, "POST", protocol.env_path("slow", protocol.CALL), {"name": "step", "input": {}, "task_id": task_id})
        assert finished(resumed)
        assert parse(body(resumed)).names()[-1] == protocol.EVENT_END
        assert counted == [("stream-drop", None)], "resumes pass stream-drop untouched"

    asyncio.run(scenario())


def test_cut_before_task_id_sends_headers_then_nothing_once_per_session() -> None:
    async def scenario() -> None:
        counted: list[tuple[str, int | None]] = []
        _engine, inner = opaque_engine()
        app = wrap_app(inner, ("cut-before-task-id",), seed=1, on_fault=lambda name, status: counted.append((name, status)))
        messages = await fresh_call(app)
        assert messages[0]["status"] == 200 and not finished(messages)
        assert body(messages) == b"", "not even the task_id event reaches the client"
        again = await request(app, "POST", protocol.env_path("slow", protocol.CALL), {"name": "step", "input": {}})
        assert finished(again) and parse(body(again)).names()[-1] == protocol.EVENT_END, "only the session's first call is cut"
        assert counted == [("cut-before-task-id", None)]

    asyncio.run(scenario())


def test_credits_402_refuses_create_session_only() -> None:
    async def scenario() -> None:
        _engine, inner = opaque_engine()
        app = wrap_app(inner, ("credits-402",), seed=1)
        refused = await request(app, "POST", protocol.CREATE_SESSION, {})
        assert refused[0]["status"] == 402 and b"Insufficient credits" in body(refused)
        assert finished(await fresh_call(app))

    asyncio.run(scenario())


def test_credits_402_discovery_refuses_every_listing_and_serves_the_session() -> None:
    """docs/protocol.md §13.12: each discovery route (bare, under the environment, the root's list) is a 402; sessions work."""

    async def scenario() -> None:
        _engine, inner = opaque_engine()
        app = wrap_app(inner, ("credits-402-discovery",), seed=1)
        listings = [("GET", protocol.LIST_ENVIRONMENTS, None), ("GET", "/" + protocol.TOOLS, None)] + [
            (method, protocol.env_path("slow", route), body)
            for method, route, body in (
                ("GET", protocol.TOOLS, None), ("GET", protocol.SPLITS, None), ("POST", protocol.TASKS, {"split": "train"}),
                ("POST", protocol.NUM_TASKS, {"split": "train"}), ("POST", protocol.TASK, {"split": "train", "index": 0}),
                ("POST", protocol.TASK_RANGE, {"split": "train"}),
            )
        ]  # fmt: skip
        for method, path, payload in listings:
            refused = await request(app, method, path, payload)
            assert refused[0]["status"] == 402 and b"Insufficient credits" in body(refused), path
        assert (await request(app, "POST", protocol.CREATE_SESSION, {}))[0]["status"] == 200
        assert finished(await fresh_call(app))
        tools = await request(app, "GET", protocol.env_path("slow", protocol.TASK_TOOLS))
        assert tools[0]["status"] == 200, "a session's own tool list is not a listing"

    asyncio.run(scenario())


def test_rate_limit_400_refuses_what_rate_limit_refuses_with_a_detail_quoting_400() -> None:
    """docs/protocol.md §13.13: the same requests get a 429 with Retry-After as under rate-limit; only the text differs."""

    async def statuses(name: str) -> list[tuple[int, bytes]]:
        _engine, inner = opaque_engine()
        app = wrap_app(inner, (name,), seed=P.CLIENT_SEED)
        out = []
        for _ in range(12):
            answer = await request(app, "GET", protocol.env_path("slow", protocol.TOOLS))
            headers = dict(answer[0]["headers"])
            out.append((answer[0]["status"], headers.get(b"retry-after", b"")))
            if answer[0]["status"] == 429:
                assert (b"400 requests per minute" in body(answer)) == (name == "rate-limit-400") and b"429" not in body(answer)
        return out

    quoted, plain = asyncio.run(statuses("rate-limit-400")), asyncio.run(statuses("rate-limit"))
    assert quoted == plain and (429, str(P.RETRY_AFTER_S).encode()) in quoted and quoted[0][0] == 429


def test_missing_task_429_refuses_create_with_a_final_400_quoting_429() -> None:
    async def scenario() -> None:
        _engine, inner = opaque_engine()
        app = wrap_app(inner, ("missing-task-429",), seed=1)
        refused = await request(app, "POST", protocol.CREATE, {"env_name": "slow", "split": "train", "index": 0})
        assert refused[0]["status"] == 400 and b"429" in body(refused)
        assert b"retry-after" not in dict(refused[0]["headers"])
        assert (await request(app, "GET", protocol.env_path("slow", protocol.TOOLS)))[0]["status"] == 200

    asyncio.run(scenario())


def test_stream_no_end_closes_cleanly_without_an_end_event() -> None:
    async def scenario() -> None:
        _engine, inner = opaque_engine()
        messages = await fresh_call(wrap_app(inner, ("stream-no-end",), seed=1))
        assert finished(messages)
        assert parse(body(messages)).names() == [protocol.EVENT_TASK_ID]

    asyncio.run(scenario())


def test_stream_stall_holds_the_result_and_swallows_keepalives() -> None:
    async def scenario() -> None:
        ping = 0.05
        _engine, inner = opaque_engine(ping_interval=ping)
        app = wrap_app(inner, ("stream-stall",), seed=1, ping_interval=ping)
        start = time.monotonic()
        messages = await fresh_call(app, "wait", {"seconds": 0.12})  # long enough for the engine to send pings
        stream = parse(body(messages))
        assert stream.names() == [protocol.EVENT_TASK_ID, protocol.EVENT_END]
        assert stream.comments == [], "no keep-alive reaches the client during a stall"
        last = messages[-1]["at"] - start
        assert last >= P.STALL_PING_INTERVALS * ping - 0.01, last

    asyncio.run(scenario())


def test_error_profiles_answer_in_bursts_the_same_way_around_any_app() -> None:
    async def statuses(app: Any) -> list[int]:
        out = []
        for _ in range(40):
            messages = await request(app, "GET", protocol.env_path("slow", protocol.SPLITS))
            out.append(messages[0]["status"])
        return out

    async def scenario() -> None:
        engine, inner = opaque_engine()
        around_any = await statuses(wrap_app(inner, ("flaky-5xx",), seed=7))
        on_engine = await statuses(apply_faults(Engine([get_scenario("slow")], ServerConfig()), ("flaky-5xx",), 7))
        assert around_any == on_engine, "the same seed gives the same schedule on the engine and around any app"
        errors = [s for s in around_any if s != 200]
        assert errors and set(errors) <= set(P.FLAKY_STATUSES)
        longest = max(len(run) for run in "".join("x" if s != 200 else "." for s in around_any).split("."))
        assert longest <= P.MAX_BURST

    asyncio.run(scenario())


def test_short_ttl_around_any_app_deletes_idle_sessions_on_the_server() -> None:
    async def scenario() -> None:
        counted: list[str] = []
        engine, inner = opaque_engine()
        app = ReapIdle(inner, "short-ttl", 0.2, FaultContext(on_fault=lambda name, status: counted.append(name)))
        prompt = protocol.env_path("slow", protocol.PROMPT)
        assert (await request(app, "POST", protocol.CREATE, {"env_name": "slow", "split": "train", "index": 0}))[0]["status"] == 200
        for _ in range(3):  # activity keeps it alive past the TTL
            await asyncio.sleep(0.1)
            assert (await request(app, "GET", prompt))[0]["status"] == 200
        await asyncio.sleep(0.3)
        answer = await request(app, "GET", prompt)
        assert answer[0]["status"] == 404
        assert json.loads(body(answer))["detail"] == protocol.DETAIL_NOT_FOUND_SESSION
        assert "s1" not in engine.sessions and engine.stats.sessions_deleted == 1, "the server itself tore it down"
        assert counted == ["short-ttl"]

    asyncio.run(scenario())
