"""Synthetic echo traffic for the passive grader: what a client's episodes look like on the wire.

Built in memory, without a server, so tests and ``benchmarks/passive_memory.py`` can feed
tens of thousands of exchanges to :class:`~orsbench.checks.passive.PassiveGrader` in seconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from orsbench import protocol
from orsbench.wire.evidence import Exchange
from orsbench.wire.sse import parse

BASE = "http://127.0.0.1:9"
_JSON = {"content-type": protocol.JSON_CONTENT_TYPE}
_SSE = {"content-type": "text/event-stream", "cache-control": "no-cache", "x-accel-buffering": "no"}


def exchange(
    method: str, path: str, body: Any = None, *, sid: str | None = None, status: int = 200, answer: Any = None, headers: dict[str, str] | None = None
) -> Exchange:
    """One JSON exchange (``answer`` is dumped as JSON; bytes are sent as they are)."""
    request_headers = {protocol.SESSION_HEADER: sid} if sid else {}
    data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
    return Exchange(
        method,
        BASE + path,
        request_headers,
        json.dumps(body).encode() if body is not None else b"",
        status=status,
        headers=dict(_JSON if headers is None else headers),
        body=data,
        elapsed=0.001,
    )


def call(sid: str, task_id: str, text: str, result: dict[str, Any]) -> Exchange:
    """A ``/echo/call`` answered by a task_id and an end carrying ``result``."""
    body = f"event: task_id\r\ndata: {task_id}\r\n\r\nevent: end\r\ndata: {json.dumps(result)}\r\n\r\n".encode()
    ex = exchange("POST", protocol.env_path("echo", protocol.CALL), {"name": "echo", "input": {"text": text}}, sid=sid, headers=_SSE)
    ex.body = body
    ex.sse = parse(body)
    return ex


def output(text: str, reward: Any, finished: Any) -> dict[str, Any]:
    """An ok:true RunToolOutput."""
    return {"ok": True, "output": {"blocks": [{"type": "text", "text": text}], "metadata": None, "reward": reward, "finished": finished}}


def discovery() -> list[Exchange]:
    """What a client asks once: health and the tool listing."""
    tools = {"tools": [{"name": "echo", "description": "echo", "input_schema": {"type": "object"}}]}
    return [exchange("GET", protocol.HEALTH, answer={"status": "ok"}), exchange("GET", protocol.env_path("echo", protocol.TOOLS), answer=tools)]


def create(sid: str) -> Exchange:
    """A ``/create`` of an echo session that answers 200."""
    return exchange("POST", protocol.CREATE, {"env_name": "echo", "task_spec": {"target": "hi"}}, sid=sid, answer={"sid": sid})


def episode(n: int) -> list[Exchange]:
    """One echo episode: create, prompt, a wrong answer, the right one (finished), delete."""
    sid = f"sid-{n}"
    return [
        create(sid),
        exchange("POST", protocol.env_path("echo", protocol.PROMPT), sid=sid, answer=[{"type": "text", "text": "say hi"}]),
        call(sid, f"t{n}a", "nope", output("nope", 0.0, False)),
        call(sid, f"t{n}b", "hi", output("hi", 1.0, True)),
        exchange("POST", protocol.DELETE, sid=sid, answer={"sid": sid}),
    ]


def traffic(episodes: int) -> Iterator[Exchange]:
    """Discovery, then ``episodes`` episodes, one exchange at a time."""
    yield from discovery()
    for n in range(episodes):
        yield from episode(n)
