"""Differential test: the mock engine and the SDK twin speak the same wire protocol.

The same scripted episode runs against both implementations of each scenario;
the transcripts (status, content type, location, parsed JSON bodies and SSE
event sequences) must be equal once the run-specific values are masked:
session ids, task ids, keep-alive comments (timing), and the deliberate
differences listed in ``orsbench.servers.engine.DELIBERATE_DIFFERENCES``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

import pytest

from orsbench.wire import Exchange, WireClient

pytest.importorskip("openreward")

_UUID = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}")
_PYDANTIC_URL = re.compile(r",? ?'url': 'https://errors\.pydantic\.dev/[^']*'")

Step = Callable[[WireClient, dict[str, Any]], Exchange]


def mask(value: Any) -> Any:
    if isinstance(value, str):
        return _PYDANTIC_URL.sub("", _UUID.sub("<id>", value))
    if isinstance(value, list):
        return [mask(v) for v in value]
    if isinstance(value, dict):
        return {k: mask(v) for k, v in value.items() if k != "url"}
    return value


def normalise(exchange: Exchange) -> dict[str, Any]:
    out: dict[str, Any] = {"status": exchange.status, "type": exchange.content_type.split(";")[0]}
    if "location" in exchange.headers:
        out["location"] = exchange.headers["location"]
    for header in ("x-backend-state", "retry-after"):
        if header in exchange.headers:
            out[header] = exchange.headers[header]
    if exchange.sse is not None:
        events = []
        for event in exchange.sse.events:
            data: Any = event.data
            if event.event in ("end", "chunk") and data:
                data = json.loads(exchange.reassembled() or "null") if event.event == "end" else "<chunk>"
            events.append((event.event, mask(data)))
        out["events"] = events
    else:
        body = exchange.json_or_none()
        out["body"] = mask(body) if body is not None else exchange.body.decode(errors="replace")
    return out


def session(env: str, index: int) -> list[Step]:
    return [
        lambda c, s: _remember(s, "sid", c.create_session()),
        lambda c, s: c.create(s["sid"], split="train", index=index),
        lambda c, s: c.create(s["sid"], split="train", index=index),  # duplicate → 400
        lambda c, s: c.prompt(env, s["sid"]),
        lambda c, s: c.messages(env, s["sid"]),
        lambda c, s: c.task_tools(env, s["sid"]),
        lambda c, s: c.ping(s["sid"]),
    ]


def _remember(state: dict[str, Any], key: str, exchange: Exchange) -> Exchange:
    state[key] = exchange.task_id
    return exchange


def discovery(env: str) -> list[Step]:
    return [
        lambda c, s: c.health(),
        lambda c, s: c.list_environments(),
        lambda c, s: c.tools(env),
        lambda c, s: c.splits(env),
        lambda c, s: c.tasks(env, "test"),
        lambda c, s: c.num_tasks(env, "train"),
        lambda c, s: c.task(env, "train", -1),
        lambda c, s: c.task(env, "train", 999),
        lambda c, s: c.task_range(env, "train", 1, 4),
        lambda c, s: c.tasks(env, "nope"),
        lambda c, s: c.request("POST", f"/{env}/tasks", json_body={"split": "train", "x": 1}),
        lambda c, s: c.request("GET", "/tools"),
        lambda c, s: c.request("GET", f"/{env}/call"),
        lambda c, s: c.request("POST", "/create", json_body={}),
        lambda c, s: c.create("fresh", split="train", index=0, task_spec={"a": 1}),
        lambda c, s: c.create("fresh", split="train", index=0, env_name="nope"),
        lambda c, s: c.ping("never"),
        lambda c, s: c.prompt(env, "never"),
        lambda c, s: c.delete("never"),
    ]


def teardown() -> list[Step]:
    return [
        lambda c, s: c.delete_session(s["sid"]),
        lambda c, s: c.delete(s["sid"]),
        lambda c, s: c.ping(s["sid"]),
        lambda c, s: c.delete(s["sid"]),
    ]


def call(env: str, name: str, tool_input: dict[str, Any]) -> Step:
    return lambda c, s: _remember(s, "task", c.call(env, s["sid"], name, tool_input))


def resume(env: str) -> Step:
    return lambda c, s: c.call(env, s["sid"], "x", {}, task_id=s["task"])


SCRIPTS: dict[str, list[Step]] = {
    "echo": [
        *discovery("echo"),
        *session("echo", 0),
        call("echo", "echo", {"text": "nope"}),
        resume("echo"),
        call("echo", "echo", {"txt": 1}),
        call("echo", "nope", {}),
        call("echo", "echo", {"text": "hello"}),
        call("echo", "echo", {"text": "hello"}),
        call("echo", "nope", {}),
        lambda c, s: c.call("echo", s["sid"], "echo", {}, task_id="deadbeef"),
        lambda c, s: c.request("POST", "/echo/call", sid=s["sid"], json_body={"name": "echo"}),
        lambda c, s: c.score_group("echo", s["sid"], []),
        *teardown(),
    ],
    "task-tool": [
        *discovery("task-tool"),
        *session("task-tool", 1),
        call("task-tool", "lookup", {"key": "beta"}),
        call("task-tool", "add", {"a": 1, "b": 2}),
        call("task-tool", "hint", {}),
        call("task-tool", "answer", {"value": "green"}),
        call("task-tool", "lookup", {"key": "beta"}),
        *teardown(),
    ],
    "sparse-reward": [
        *discovery("sparse-reward"),
        *session("sparse-reward", 3),
        call("sparse-reward", "reveal", {"position": 0}),
        call("sparse-reward", "reveal", {"position": -1}),
        call("sparse-reward", "reveal", {"position": 9}),
        call("sparse-reward", "submit", {"total": 999}),
        call("sparse-reward", "reveal", {"position": 0}),
        *teardown(),
    ],
    "slow": [
        *discovery("slow"),
        *session("slow", 0)[:2],
        lambda c, s: c.prompt("slow", s["sid"]),  # setup still running → 503 starting
        lambda c, s: c.task_tools("slow", s["sid"]),
        call("slow", "wait", {"seconds": 1.2}),  # waits out setup, then keep-alives
        call("slow", "step", {}),
        call("slow", "step", {"note": "x"}),
        call("slow", "step", {}),
        *teardown(),
    ],
}

PARAMS = {"slow": {"setup": 1.0, "steps": 3}}


def transcript(server, scenario: str) -> list[dict[str, Any]]:
    state: dict[str, Any] = {}
    with WireClient(server.url) as client:
        return [normalise(step(client, state)) for step in SCRIPTS[scenario]]


@pytest.mark.parametrize("scenario", list(SCRIPTS))
def test_mock_and_sdk_twin_transcripts_match(ors_server_factory, scenario):
    mock = transcript(ors_server_factory(scenario, params=PARAMS.get(scenario)), scenario)
    sdk = transcript(ors_server_factory(scenario, impl="sdk", params=PARAMS.get(scenario)), scenario)
    assert len(mock) == len(sdk)
    for index, (ours, theirs) in enumerate(zip(mock, sdk)):
        assert ours == theirs, f"step {index} differs"
