"""The floor: a bare ASGI app answering an episode's requests with constants.

It lives with the servers (not in :mod:`orsbench.bench`) because it is one:
``orsbench serve --impl floor`` builds it like any other implementation.
``orsbench bench`` measures a server's CPU per episode against this app, served
by the same uvicorn (httptools, uvloop) through the same launcher. Whatever the
floor costs is the HTTP stack's share; what a real server costs above it is its
own. The floor keeps no sessions and validates nothing: each answer is bytes
computed once from the scenario at start-up, except the sid, which is echoed
from ``X-Session-ID`` because a correct client checks it.

It also answers the discovery requests the load tools send before a run
(``/list_environments``, ``/{env}/splits``, ``/{env}/tools``,
``/{env}/num_tasks``), ``/health`` for the launcher, and ``/_orsbench/stats``.
Anything else is 404. It is served with ``orsbench serve SCENARIO --impl floor``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import orjson

from orsbench import protocol
from orsbench.scenarios.base import Episode, Scenario
from orsbench.servers import sse
from orsbench.servers.http import JSON_TYPE_HEADER, Receive, Scope, Send, run_lifespan

#: What every tool call answers on the floor.
FLOOR_OUTPUT = {
    "ok": True,
    "output": {"blocks": [{"text": "floor", "detail": None, "type": "text"}], "metadata": None, "reward": 0.0, "finished": False},
}
_SID = protocol.SESSION_HEADER_RAW


def _json_start(body: bytes, status: int = 200) -> dict[str, Any]:
    return {
        "type": "http.response.start",
        "status": status,
        "headers": [JSON_TYPE_HEADER, (b"content-length", str(len(body)).encode())],
    }


class FloorApp:
    """Constant answers for ``scenarios[0]`` (ASGI)."""

    def __init__(self, scenarios: list[Scenario]) -> None:
        scenario = scenarios[0]
        env = scenario.name
        split = scenario.splits()[0].name
        try:
            tasks = scenario.list_tasks(split)
            count, task = len(tasks), tasks[0]
        except NotImplementedError:
            count, task = scenario.num_tasks(split), scenario.get_task(split, 0)
        tools = sorted((t.spec() for t in scenario.all_tools.values()), key=lambda s: s["name"])
        listing = {
            "tools": tools,
            "terminal_tool": None,
            "supports_score_group": False,
            "message_block_types": list(protocol.BLOCK_TYPES),
        }
        constant: dict[tuple[str, str], bytes] = {
            ("GET", protocol.HEALTH): orjson.dumps({"status": "ok"}),
            ("GET", protocol.LIST_ENVIRONMENTS): orjson.dumps([env]),
            ("GET", protocol.STATS): orjson.dumps({"impl": "floor", "active_sessions": 0}),
            ("GET", protocol.env_path(env, protocol.SPLITS)): orjson.dumps([s.to_wire() for s in scenario.splits()]),
            ("GET", protocol.env_path(env, protocol.TOOLS)): orjson.dumps(listing),
            ("POST", protocol.env_path(env, protocol.NUM_TASKS)): orjson.dumps({"num_tasks": count}),
            ("GET", protocol.env_path(env, protocol.TASK_TOOLS)): orjson.dumps(listing),
            ("GET", protocol.env_path(env, protocol.PROMPT)): orjson.dumps(scenario.prompt(Episode(scenario, task))),
        }
        self._json = {key: (_json_start(body), {"type": "http.response.body", "body": body}) for key, body in constant.items()}
        self._echo_sid = {("POST", protocol.CREATE), ("POST", protocol.DELETE), ("POST", protocol.DELETE_SESSION)}
        call_tail = sse.frame(protocol.EVENT_END, orjson.dumps(FLOOR_OUTPUT).decode())
        self._streams: dict[tuple[str, str], Callable[[], bytes]] = {
            ("POST", protocol.CREATE_SESSION): lambda: (
                sse.frame(protocol.EVENT_TASK_ID, f"floor-{next(self._ids)}") + sse.frame(protocol.EVENT_END, "")
            ),
            ("POST", protocol.env_path(env, protocol.CALL)): lambda: (
                sse.frame(protocol.EVENT_TASK_ID, f"{next(self._ids):032x}") + call_tail
            ),
        }
        self._ids = itertools.count()
        self._sse_start = {"type": "http.response.start", "status": 200, "headers": sse.HEADERS}
        not_found = orjson.dumps({"detail": protocol.DETAIL_NOT_FOUND})
        self._not_found = (_json_start(not_found, 404), {"type": "http.response.body", "body": not_found})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await run_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        key = (scope["method"], scope["path"])
        if key[0] == "POST":
            message = await receive()
            while message.get("more_body"):
                message = await receive()
        answer = self._json.get(key)
        if answer is not None:
            await send(answer[0])
            await send(answer[1])
            return
        stream = self._streams.get(key)
        if stream is not None:
            await send(self._sse_start)
            await send({"type": "http.response.body", "body": stream()})
            return
        if key in self._echo_sid:
            sid = next((v for k, v in scope["headers"] if k == _SID), b"")
            body = b'{"sid":' + orjson.dumps(sid.decode("latin-1")) + b"}"
            await send(_json_start(body))
            await send({"type": "http.response.body", "body": body})
            return
        await send(self._not_found[0])
        await send(self._not_found[1])
