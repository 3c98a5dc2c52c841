"""``--impl ors-sdk``: orsbench scenarios served by ors-sdk 0.1.0's own ``ors.Server``.

Servers start through the launcher (forked from the zygote, so each takes about
half a second) and are shared by the tests of this module; the knobs the twin
patches (TTL and reaper, keep-alive interval, chunk size, resume linger) each
get one server configured with a short value, and a test that measures it.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

pytest.importorskip("ors")

from orsbench import protocol  # noqa: E402
from orsbench.config import ServerConfig  # noqa: E402
from orsbench.scenarios import Episode, Scenario, Split, ToolResult, get_scenario, text, tool  # noqa: E402
from orsbench.servers.launch import RunningServer  # noqa: E402
from orsbench.servers.ors_sdk_twin import build_app, environment_class  # noqa: E402
from orsbench.servers.twin_support import ToolNameError  # noqa: E402
from orsbench.wire import WireClient  # noqa: E402

#: key → (scenario, config): one server each, started in parallel.
SERVERS = {
    "echo": ("echo", ServerConfig()),
    "slow": ("slow", ServerConfig()),
    "echo-ttl": ("echo", ServerConfig(ttl=1.0, reaper_interval=0.1)),
    "echo-knobs": ("echo", ServerConfig(chunk_size=8, linger=1.0)),
}


@pytest.fixture(scope="module")
def twins(ors_server_factory) -> dict[str, RunningServer]:
    with ThreadPoolExecutor(len(SERVERS)) as pool:
        futures = {
            key: pool.submit(ors_server_factory, name, impl="ors-sdk", config=config) for key, (name, config) in SERVERS.items()
        }
        return {key: future.result() for key, future in futures.items()}


def _open(client: WireClient, index: int = 0) -> str:
    sid = client.new_session()
    created = client.create(sid, split="train", index=index)
    assert created.status == 200, created.body
    return sid


def _result(exchange) -> dict[str, Any]:
    return json.loads(exchange.reassembled())


def test_stats_report_ors_sdk_and_count_an_episode(twins: dict[str, RunningServer]) -> None:
    server = twins["echo"]
    task = get_scenario("echo").get_task("train", 0)
    before = server.stats()
    with WireClient(server.url) as client:
        sid = _open(client)
        assert client.prompt("echo", sid).json_or_none() == [text(f"Echo {task['target']!r} to win. Call echo(text=...).")]
        result = _result(client.call("echo", sid, "echo", {"text": task["target"]}))
        output = {"blocks": [text("match")], "metadata": {"len": 5}, "reward": 1.0, "finished": True}
        assert result == {"ok": True, "output": output}
        during = server.stats()
        assert client.delete(sid).status == 200
    after = server.stats()
    assert after["impl"] == "ors-sdk"
    assert during["active_sessions"] == before["active_sessions"] + 1
    assert after["active_sessions"] == before["active_sessions"]
    assert after["calls"]["echo"] == before["calls"].get("echo", 0) + 1
    assert after["sessions_created"] == before["sessions_created"] + 1
    assert after["sessions_deleted"] == before["sessions_deleted"] + 1
    assert after["requests"]["POST /{env}/call"] == before["requests"].get("POST /{env}/call", 0) + 1
    assert after["config"]["ttl"] == 900 and after["config"]["api_key"] is None


def test_no_finish_latch_a_later_call_runs_and_is_counted(twins: dict[str, RunningServer]) -> None:
    """ors-sdk has no finish latch: the call after the winning one still runs (and pays out again)."""
    server = twins["echo"]
    with WireClient(server.url) as client:
        sid = _open(client)
        assert _result(client.call("echo", sid, "echo", {"text": "hello"}))["output"]["finished"] is True
        before = server.stats()["calls"]["echo"]
        late = _result(client.call("echo", sid, "echo", {"text": "nope"}))
        client.delete(sid)
    assert late["ok"] is True and late["output"]["reward"] == 0.0
    assert "reason" not in late
    assert server.stats()["calls"]["echo"] == before + 1


def test_slow_setup_is_waited_out_without_503_then_keepalives_follow_the_interval(twins: dict[str, RunningServer]) -> None:
    """No setup-wait cap: /prompt blocks until setup() is done; the keep-alive knob (0.25 s for slow) applies."""
    server = twins["slow"]
    with WireClient(server.url, timeout=15) as client:
        sid = _open(client)
        started = time.monotonic()
        prompt = client.prompt("slow", sid)
        waited = time.monotonic() - started
        assert prompt.status == 200, prompt.body
        assert protocol.BACKEND_STATE_HEADER.lower() not in prompt.headers
        assert waited >= 0.5, f"/prompt answered after {waited:.2f} s, before setup() (1 s) could finish"
        exchange = client.call("slow", sid, "wait", {"seconds": 1.0})
        client.delete(sid)
    assert _result(exchange)["output"]["blocks"] == [text("waited 1s")]
    pings = [c for c in exchange.sse.comments if c.text.startswith(" ping")]
    assert len(pings) >= 2, f"expected keep-alives every 0.25 s during a 1 s call, got {exchange.sse.comments}"


def test_ttl_knob_reaps_an_idle_session(twins: dict[str, RunningServer]) -> None:
    server = twins["echo-ttl"]
    with WireClient(server.url) as client:
        sid = _open(client)
        assert client.ping(sid).status == 200
        time.sleep(1.6)
        gone = client.ping(sid)
    assert gone.status == 404, gone.body
    counters = server.stats()
    assert counters["sessions_reaped"] == 1 and counters["active_sessions"] == 0


def test_chunk_size_and_linger_knobs(twins: dict[str, RunningServer]) -> None:
    with WireClient(twins["echo-knobs"].url) as client:
        sid = _open(client)
        exchange = client.call("echo", sid, "echo", {"text": "a long enough answer"})
        sizes = [(e.event, len(e.data)) for e in exchange.sse.events[1:]]
        assert [kind for kind, _ in sizes[:-1]] == [protocol.EVENT_CHUNK] * (len(sizes) - 1) and len(sizes) > 3
        assert all(size == 8 for _, size in sizes[:-1]) and sizes[-1][0] == protocol.EVENT_END
        replay = client.call("echo", sid, "x", {}, task_id=exchange.task_id)
        assert replay.reassembled() == exchange.reassembled()  # within the linger: resumable
        time.sleep(1.6)
        expired = client.call("echo", sid, "x", {}, task_id=exchange.task_id)
        client.delete(sid)
    assert [(e.event, e.data) for e in expired.sse.events] == [(protocol.EVENT_ERROR, "unknown task_id")]


class _Named(Scenario):
    name = "named"

    def splits(self) -> list[Split]:
        return [Split("train", "train")]

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return [{"id": "t0"}]

    def prompt(self, episode: Episode) -> list[dict[str, Any]]:
        return [text("hi")]

    @tool(None, name="name")
    def clash(self, episode: Episode, args: None) -> ToolResult:
        """Collides with ors.Environment.name()."""
        return ToolResult([])


def test_a_tool_named_like_an_ors_environment_attribute_fails_with_its_name() -> None:
    with pytest.raises(ToolNameError, match="'name' cannot be served by ors-sdk"):
        environment_class(_Named())


@pytest.mark.parametrize("knob", [{"faults": ("reward-bool",)}, {"api_key": "k"}])
def test_knobs_that_would_change_the_sdk_are_refused(knob: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="ors-sdk twin"):
        build_app([get_scenario("echo")], ServerConfig(**knob))
