"""Answers a scenario gives whole, ahead of the engine: how a cassette replays recorded refusals and misses.

A recorded environment refused some requests (an invalid split, an index out
of range) with its own status and text; a replay must refuse them the same
way, byte for byte — and a request the recording never saw must say so
instead of passing for the environment's answer. The engine knows neither:
it answers from the scenario's data. :class:`RecordedAnswers` sits in front
of it, reads the body of the few ``POST`` routes a scenario may answer
(:meth:`~orsbench.scenarios.base.Scenario.recorded_answer`), and forwards
every other request untouched (the body it read is handed on).

It is installed only for scenarios that implement the hook, so the mock
engine's hot path pays nothing for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import orjson

from orsbench import protocol
from orsbench.scenarios.base import Scenario

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The environment routes a scenario may answer whole (``/create`` too, at the root).
ROUTES = frozenset({protocol.TASKS, protocol.NUM_TASKS, protocol.TASK, protocol.TASK_RANGE})


def answering(scenarios: Sequence[Scenario]) -> list[Scenario]:
    """The scenarios that implement :meth:`Scenario.recorded_answer`."""
    return [s for s in scenarios if type(s).recorded_answer is not Scenario.recorded_answer]


class RecordedAnswers:
    """ASGI middleware: a scenario's whole answer to a dataset ``POST`` or ``/create``, else the app's."""

    def __init__(self, app: ASGIApp, scenarios: Sequence[Scenario]) -> None:
        self.app = app
        self.by_env = {s.name.lower(): s for s in scenarios}
        self.default = scenarios[0] if scenarios else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        where = protocol.route_of(scope["path"])
        if where.root and "/" + where.name == protocol.CREATE:
            route, scenario = "create", None
        elif where.env is not None and where.name in ROUTES and where.env.lower() in self.by_env:
            route, scenario = where.name, self.by_env[where.env.lower()]
        else:
            await self.app(scope, receive, send)
            return
        raw = await _read_body(receive)
        try:
            body = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            body = None
        if route == "create":
            name = body.get("env_name") if isinstance(body, dict) else None
            scenario = self.by_env.get(name.lower()) if isinstance(name, str) else self.default
        answer = scenario.recorded_answer(route, body) if scenario is not None and body is not None else None
        if answer is None:
            await self.app(scope, _replaying(raw, receive), send)
            return
        headers = [(b"content-type", answer.content_type.encode()), (b"content-length", str(len(answer.body)).encode())]
        headers += [(k.lower().encode(), v.encode()) for k, v in answer.headers]
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": answer.body})


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def _replaying(raw: bytes, original: Receive) -> Receive:
    """A ``receive`` that hands on the body already read, then the connection's own messages (a disconnect)."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return await original()

    return receive
