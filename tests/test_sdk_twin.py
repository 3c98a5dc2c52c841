"""The SDK twin serves orsbench scenarios through the real openreward ``Server``.

Each scenario runs in its own server process started by the launcher (the twin
patches SDK module globals, so twins with different configs cannot share a
process); tool-name mapping, which needs no timing, is checked in-process over
``httpx.ASGITransport``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, Field

from orsbench import protocol  # noqa: E402  (constants only: imports nothing of the SDK)

os.environ.setdefault(protocol.ENV_DISABLE_UPDATE_CHECK, "1")
from orsbench.config import ServerConfig  # noqa: E402
from orsbench.scenarios import Episode, Scenario, Split, ToolResult, get_scenario, text, tool  # noqa: E402
from orsbench.servers.sdk_twin import ToolNameError, build_app, environment_class  # noqa: E402
from orsbench.servers.launch import RunningServer  # noqa: E402
from orsbench.wire.sse import SSEStream, parse  # noqa: E402

SCENARIOS = ("echo", "task-tool", "sparse-reward", "slow")

@pytest.fixture(scope="module")
def twins(ors_server_factory) -> dict[str, RunningServer]:
    """Every scenario's twin, started in parallel; ``echo-ttl`` reaps sessions idle for 1 s."""
    wanted = {name: (name, ServerConfig()) for name in SCENARIOS}
    wanted["echo-ttl"] = ("echo", ServerConfig(ttl=1.0))
    with ThreadPoolExecutor(len(wanted)) as pool:
        futures = {key: pool.submit(ors_server_factory, name, impl="sdk", config=config) for key, (name, config) in wanted.items()}
        return {key: future.result() for key, future in futures.items()}


# -- helpers ------------------------------------------------------------------------
def sid_header(sid: str) -> dict[str, str]:
    return {protocol.SESSION_HEADER: sid}


def open_session(client: httpx.Client, body: dict[str, Any]) -> str:
    """``/create_session`` (SSE, sid in the ``task_id`` event) then ``/create``."""
    stream = parse(client.post(protocol.CREATE_SESSION).content)
    sid = next(e.data for e in stream.events if e.event == protocol.EVENT_TASK_ID)
    response = client.post(protocol.CREATE, headers=sid_header(sid), json=body)
    assert response.status_code == 200, response.text
    assert response.json() == {"sid": sid}
    return sid


def call(client: httpx.Client, env: str, sid: str, name: str, args: dict[str, Any]) -> tuple[dict[str, Any], SSEStream]:
    """``/call`` read to the end of the stream; returns the joined result and the parsed stream."""
    response = client.post(protocol.env_path(env, protocol.CALL), headers=sid_header(sid), json={"name": name, "input": args})
    assert response.status_code == 200, response.text
    stream = parse(response.content)
    kinds = [e.event for e in stream.events]
    assert kinds[0] == protocol.EVENT_TASK_ID and kinds[-1] == protocol.EVENT_END, kinds
    payload = "".join(e.data for e in stream.events if e.event in (protocol.EVENT_CHUNK, protocol.EVENT_END))
    return json.loads(payload), stream


def stats(client: httpx.Client) -> dict[str, Any]:
    return client.get(protocol.STATS).json()


# -- discovery ----------------------------------------------------------------------
@pytest.mark.parametrize("name", SCENARIOS)
def test_health_answers_ok(twins: dict[str, RunningServer], name: str) -> None:
    assert httpx.get(twins[name].url + protocol.HEALTH).json() == {"status": "ok"}


@pytest.mark.parametrize("name", SCENARIOS)
def test_tools_lists_exactly_the_shared_tools_with_scenario_schemas(twins: dict[str, RunningServer], name: str) -> None:
    scenario = get_scenario(name)
    body = httpx.get(twins[name].url + protocol.env_path(name, protocol.TOOLS)).json()
    expected = sorted((t.spec() for t in scenario.shared_tools()), key=lambda s: s["name"])  # the SDK lists in dir() order
    assert body["tools"] == expected


@pytest.mark.parametrize("name", SCENARIOS)
def test_splits_and_tasks_come_from_the_scenario(twins: dict[str, RunningServer], name: str) -> None:
    scenario = get_scenario(name)
    with httpx.Client(base_url=twins[name].url) as client:
        assert client.get(protocol.env_path(name, protocol.SPLITS)).json() == [s.to_wire() for s in scenario.splits()]
        tasks = client.post(protocol.env_path(name, protocol.TASKS), json={"split": "train"}).json()
        assert tasks == {"tasks": scenario.list_tasks("train"), "env_name": name}


# -- episodes -----------------------------------------------------------------------
def test_echo_episode_runs_end_to_end_and_is_counted(twins: dict[str, RunningServer]) -> None:
    scenario = get_scenario("echo")
    task = scenario.get_task("train", 0)
    with httpx.Client(base_url=twins["echo"].url) as client:
        before = stats(client)
        sid = open_session(client, {"split": "train", "index": 0})
        prompt = client.get(protocol.env_path("echo", protocol.PROMPT), headers=sid_header(sid))
        assert prompt.json() == scenario.prompt(Episode(scenario, task))
        task_tools = client.get(protocol.env_path("echo", protocol.TASK_TOOLS), headers=sid_header(sid)).json()
        assert [t["name"] for t in task_tools["tools"]] == ["echo"]
        result, _ = call(client, "echo", sid, "echo", {"text": task["target"]})
        assert result["ok"] is True
        assert result["output"] == {
            "blocks": [text("match")], "metadata": {"len": len(task["target"])}, "reward": 1.0, "finished": True,
        }
        assert client.post(protocol.DELETE, headers=sid_header(sid)).json() == {"sid": sid}
        after = stats(client)
    assert after["impl"] == "sdk"
    assert after["calls"]["echo"] == before["calls"].get("echo", 0) + 1
    assert after["calls_total"] == before["calls_total"] + 1
    assert after["sessions_created"] == before["sessions_created"] + 1
    assert after["sessions_deleted"] == before["sessions_deleted"] + 1
    assert after["active_sessions"] == before["active_sessions"]
    assert after["requests"]["POST /{env}/call"] == before["requests"].get("POST /{env}/call", 0) + 1
    assert after["requests"]["POST /create"] >= 1
    assert after["requests"]["GET /{env}/prompt"] >= 1


def test_unknown_first_segment_counts_as_redirect(twins: dict[str, RunningServer]) -> None:
    with httpx.Client(base_url=twins["echo"].url) as client:
        before = stats(client)["requests"]
        response = client.get("/" + protocol.TOOLS, follow_redirects=True)
        assert [r.status_code for r in response.history] == [308]
        assert response.status_code == 200 and response.url.path == "/echo/tools"
        after = stats(client)["requests"]
    assert after["308"] == before.get("308", 0) + 1
    assert after["GET /{env}/tools"] == before.get("GET /{env}/tools", 0) + 1


def test_task_tools_differ_between_tasks_and_only_listed_ones_are_callable(twins: dict[str, RunningServer]) -> None:
    env = "task-tool"
    with httpx.Client(base_url=twins[env].url) as client:
        first, second = (open_session(client, {"split": "train", "index": i}) for i in (0, 1))
        names = [
            [t["name"] for t in client.get(protocol.env_path(env, protocol.TASK_TOOLS), headers=sid_header(s)).json()["tools"]]
            for s in (first, second)
        ]
        assert names == [["answer", "add"], ["answer", "lookup"]]
        added, _ = call(client, env, first, "add", {"a": 2, "b": 3})
        assert added["output"]["blocks"] == [text("5")]
        refused, _ = call(client, env, first, "lookup", {"key": "beta"})
        assert refused == {"ok": False, "error": "'lookup' is not a valid tool", "reason": protocol.REASON_NOT_FOUND}
        found, _ = call(client, env, second, "lookup", {"key": "beta"})
        assert found["output"]["metadata"] == {"found": True}
        for sid in (first, second):
            client.post(protocol.DELETE, headers=sid_header(sid))


def test_slow_setup_answers_503_starting_then_long_call_streams_keepalives(twins: dict[str, RunningServer]) -> None:
    env = "slow"
    with httpx.Client(base_url=twins[env].url, timeout=10) as client:
        sid = open_session(client, {"split": "train", "index": 0})
        early = client.get(protocol.env_path(env, protocol.PROMPT), headers=sid_header(sid))
        assert early.status_code == 503, early.text
        assert early.headers[protocol.BACKEND_STATE_HEADER] == protocol.BACKEND_STARTING
        assert early.headers[protocol.RETRY_AFTER_HEADER] == str(protocol.STARTING_RETRY_AFTER_S)
        deadline = time.monotonic() + 5
        while client.get(protocol.env_path(env, protocol.PROMPT), headers=sid_header(sid)).status_code == 503:
            assert time.monotonic() < deadline, "setup never finished"
        result, stream = call(client, env, sid, "wait", {"seconds": 1.0})
        assert result["output"]["blocks"] == [text("waited 1s")]
        pings = [c for c in stream.comments if c.text.startswith(" ping")]
        assert len(pings) >= 2, f"expected keep-alives every 0.25 s during a 1 s call, got {stream.comments}"
        assert stats(client)["sse_pings"] >= len(pings)
        client.post(protocol.DELETE, headers=sid_header(sid))


def test_ttl_knob_reaps_an_idle_session(twins: dict[str, RunningServer]) -> None:
    with httpx.Client(base_url=twins["echo-ttl"].url) as client:
        sid = open_session(client, {"split": "train", "index": 0})
        assert client.post(protocol.PING, headers=sid_header(sid)).status_code == 200
        time.sleep(2.0)
        gone = client.post(protocol.PING, headers=sid_header(sid))
        assert gone.status_code == 404, gone.text
        assert gone.json() == {"detail": protocol.DETAIL_NOT_FOUND_SESSION}
        counters = stats(client)
    assert counters["sessions_reaped"] == 1
    assert counters["active_sessions"] == 0
    assert counters["pings"] == 1


# -- tool names and schemas (in-process) --------------------------------------------------
class NoteParams(BaseModel):
    note: str = Field(description="Anything.")


class OddNames(Scenario):
    """Tool names that are not Python identifiers, or are keywords."""

    name = "odd-names"

    def splits(self) -> list[Split]:
        return [Split("train", "train")]

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return [{"id": "t0"}]

    def prompt(self, episode: Episode) -> list[dict[str, Any]]:
        return [text("go")]

    @tool(NoteParams, name="class")
    def klass(self, episode: Episode, args: NoteParams) -> ToolResult:
        """A keyword."""
        return ToolResult([text(args.note)])

    @tool(None, name="a.b/c")
    def slashed(self, episode: Episode, args: None) -> ToolResult:
        """Dots and a slash."""
        return ToolResult([text("abc")])

    @tool(NoteParams, name="file-path", schema={"type": "object", "description": "override"})
    def dashed(self, episode: Episode, args: NoteParams) -> ToolResult:
        """A dash, with an explicit schema."""
        return ToolResult([text(args.note.upper())])

    @tool(None, name="reset")
    async def reset(self, episode: Episode, args: None) -> ToolResult:
        """Raises."""
        raise RuntimeError("boom")


class ReservedName(OddNames):
    name = "reserved-name"

    @tool(None, name="setup")
    def clash(self, episode: Episode, args: None) -> ToolResult:
        """Collides with Environment.setup."""
        return ToolResult([])


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One loop for every in-process app: sse-starlette keeps a process-global
    exit ``Event`` bound to the first loop that streamed, so a second
    ``asyncio.run`` would fail inside the library, not in the twin."""
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def test_environment_class_is_named_after_the_scenario() -> None:
    assert environment_class(get_scenario("task-tool")).name() == "task-tool"


def test_arbitrary_tool_names_are_listed_and_callable(loop: asyncio.AbstractEventLoop) -> None:
    scenario = OddNames()
    sid = sid_header("odd-1")

    async def outcome(client: httpx.AsyncClient, name: str, args: dict[str, Any]) -> tuple[str, Any]:
        response = await client.post("/odd-names/call", headers=sid, json={"name": name, "input": args})
        last = parse(response.content).events[-1]
        return last.event, json.loads(last.data)["output"]["blocks"] if last.event == protocol.EVENT_END else last.data

    async def run() -> None:
        transport = httpx.ASGITransport(app=build_app([scenario], ServerConfig()))
        async with httpx.AsyncClient(transport=transport, base_url="http://twin") as client:
            listed = (await client.get("/odd-names/tools")).json()["tools"]
            assert listed == sorted((t.spec() for t in scenario.shared_tools()), key=lambda s: s["name"])
            created = await client.post(protocol.CREATE, headers=sid, json={"split": "train", "index": 0})
            assert created.status_code == 200, created.text
            assert await outcome(client, "class", {"note": "k"}) == ("end", [text("k")])
            assert await outcome(client, "a.b/c", {}) == ("end", [text("abc")])
            assert await outcome(client, "file-path", {"note": "x"}) == ("end", [text("X")])
            assert await outcome(client, "reset", {}) == (protocol.EVENT_ERROR, "boom")

    loop.run_until_complete(run())


def test_a_tool_named_like_an_sdk_method_fails_with_its_name() -> None:
    with pytest.raises(ToolNameError, match="'setup'"):
        environment_class(ReservedName())


class IndexOnly(OddNames):
    """``list_tasks`` unsupported: only the index API, plus group scoring."""

    name = "index-only"

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        raise NotImplementedError

    def num_tasks(self, split: str) -> int:
        return 3

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        if not -3 <= index < 3:
            raise IndexError(index)
        return {"id": f"t{index % 3}"}

    def score_group(self, episode: Episode, candidates: list[dict[str, Any]]) -> list[float]:
        return [float(len(c["messages"])) for c in candidates]


def test_index_only_scenario_serves_the_index_api_and_score_group(loop: asyncio.AbstractEventLoop) -> None:
    env = "index-only"
    sid = sid_header("idx-1")
    candidate = {"messages": [{"role": "assistant", "blocks": [{"type": "text", "text": "a"}]}]}

    async def run() -> None:
        transport = httpx.ASGITransport(app=build_app([IndexOnly()], ServerConfig()))
        async with httpx.AsyncClient(transport=transport, base_url="http://twin") as client:
            assert (await client.post(f"/{env}/tasks", json={"split": "train"})).status_code == 400
            assert (await client.post(f"/{env}/num_tasks", json={"split": "train"})).json() == {"num_tasks": 3}
            task = await client.post(f"/{env}/task", json={"split": "train", "index": -1})
            assert task.json() == {"task": {"id": "t2"}, "env_name": env}
            assert (await client.post(f"/{env}/task", json={"split": "train", "index": 3})).status_code == 400
            tasks = await client.post(f"/{env}/task_range", json={"split": "train", "start": 1})
            assert tasks.json()["tasks"] == [{"id": "t1"}, {"id": "t2"}]
            assert (await client.get(f"/{env}/tools")).json()["supports_score_group"] is True
            created = await client.post(protocol.CREATE, headers=sid, json={"split": "train", "index": 1})
            assert created.status_code == 200, created.text
            scored = await client.post(f"/{env}/score_group", headers=sid, json={"candidates": [candidate, candidate]})
            end = parse(scored.content).events[-1]
            assert (end.event, json.loads(end.data)) == (
                protocol.EVENT_END, {"scores": [{"reward": 1.0, "metadata": None}, {"reward": 1.0, "metadata": None}]},
            )

    loop.run_until_complete(run())


def test_chunk_size_knob_cuts_results_into_that_many_characters(loop: asyncio.AbstractEventLoop) -> None:
    sid = sid_header("chunky-1")

    async def run() -> list[tuple[str, int]]:
        transport = httpx.ASGITransport(app=build_app([OddNames()], ServerConfig(chunk_size=32)))
        async with httpx.AsyncClient(transport=transport, base_url="http://twin") as client:
            await client.post(protocol.CREATE, headers=sid, json={"split": "train", "index": 0})
            response = await client.post("/odd-names/call", headers=sid, json={"name": "class", "input": {"note": "n" * 100}})
            return [(e.event, len(e.data)) for e in parse(response.content).events[1:]]

    events = loop.run_until_complete(run())
    assert [kind for kind, _ in events[:-1]] == [protocol.EVENT_CHUNK] * (len(events) - 1)
    assert events[-1][0] == protocol.EVENT_END
    assert all(size == 32 for _, size in events[:-1]) and 0 < events[-1][1] <= 32
