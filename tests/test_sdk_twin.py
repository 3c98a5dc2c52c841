"""The SDK twin serves orsbench scenarios through the real openreward ``Server``.

Each scenario runs in its own uvicorn subprocess on 127.0.0.1 (the twin patches
SDK module globals, so it must not share a process with other twins); tool-name
mapping, which needs no timing, is checked in-process over ``httpx.ASGITransport``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, Field

os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")

from orsbench import protocol  # noqa: E402
from orsbench.config import ServerConfig  # noqa: E402
from orsbench.scenarios import Episode, Scenario, Split, ToolResult, get_scenario, text, tool  # noqa: E402
from orsbench.servers.sdk_twin import ToolNameError, build_app, environment_class  # noqa: E402
from orsbench.wire.sse import SSEStream, parse  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ("echo", "task-tool", "sparse-reward", "slow")

# Runs one twin: binds a free port, writes it to a file, serves until SIGTERM.
# (Temporary: the lead replaces this with orsbench.servers.launch.)
_SERVE = """
import json, socket, sys
import uvicorn
from orsbench.config import ServerConfig
from orsbench.scenarios import get_scenario
from orsbench.servers.sdk_twin import build_app
scenario = get_scenario(sys.argv[1])
config = ServerConfig(**{**scenario.config_defaults, **json.loads(sys.argv[2])})
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen(128)
app = build_app([scenario], config)
with open(sys.argv[3] + ".tmp", "w") as f:
    f.write(str(sock.getsockname()[1]))
import os; os.replace(sys.argv[3] + ".tmp", sys.argv[3])
uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
"""


class Twin:
    """One twin subprocess; ``url`` is known once it has bound its socket."""

    def __init__(self, scenario: str, workdir: Path, **config: Any) -> None:
        self.scenario = scenario
        self.port_file = workdir / f"{scenario}-{len(config)}.port"
        self.log = open(workdir / f"{scenario}-{len(config)}.log", "wb")
        env = {**os.environ, "PYTHONPATH": str(ROOT), protocol.ENV_DISABLE_UPDATE_CHECK: "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SERVE, scenario, json.dumps(config), str(self.port_file)],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )
        self.url = ""

    def wait_ready(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"twin {self.scenario} exited {self.proc.returncode}: {self._log_text()}")
            if self.port_file.exists() and not self.url:
                self.url = f"http://127.0.0.1:{self.port_file.read_text()}"
            if self.url:
                try:
                    if httpx.get(self.url + protocol.HEALTH, timeout=1).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
            time.sleep(0.05)
        raise RuntimeError(f"twin {self.scenario} not ready after {timeout}s: {self._log_text()}")

    def stop(self) -> None:
        self.proc.terminate()  # SIGTERM to this child's PID only
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.log.close()

    def _log_text(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")[-2000:]


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Twin]]:
    """All twins start in parallel; ``echo-ttl`` reaps sessions idle for 1 s."""
    workdir = tmp_path_factory.mktemp("twins")
    started = {name: Twin(name, workdir) for name in SCENARIOS}
    started["echo-ttl"] = Twin("echo", workdir, ttl=1.0)
    try:
        for twin in started.values():
            twin.wait_ready()
        yield started
    finally:
        for twin in started.values():
            twin.stop()


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
def test_health_answers_ok(twins: dict[str, Twin], name: str) -> None:
    assert httpx.get(twins[name].url + protocol.HEALTH).json() == {"status": "ok"}


@pytest.mark.parametrize("name", SCENARIOS)
def test_tools_lists_exactly_the_shared_tools_with_scenario_schemas(twins: dict[str, Twin], name: str) -> None:
    scenario = get_scenario(name)
    body = httpx.get(twins[name].url + protocol.env_path(name, protocol.TOOLS)).json()
    expected = sorted((t.spec() for t in scenario.shared_tools()), key=lambda s: s["name"])  # the SDK lists in dir() order
    assert body["tools"] == expected


@pytest.mark.parametrize("name", SCENARIOS)
def test_splits_and_tasks_come_from_the_scenario(twins: dict[str, Twin], name: str) -> None:
    scenario = get_scenario(name)
    with httpx.Client(base_url=twins[name].url) as client:
        assert client.get(protocol.env_path(name, protocol.SPLITS)).json() == [s.to_wire() for s in scenario.splits()]
        tasks = client.post(protocol.env_path(name, protocol.TASKS), json={"split": "train"}).json()
        assert tasks == {"tasks": scenario.list_tasks("train"), "env_name": name}


# -- episodes -----------------------------------------------------------------------
def test_echo_episode_runs_end_to_end_and_is_counted(twins: dict[str, Twin]) -> None:
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


def test_unknown_first_segment_counts_as_redirect(twins: dict[str, Twin]) -> None:
    with httpx.Client(base_url=twins["echo"].url) as client:
        before = stats(client)["requests"]
        assert client.get("/" + protocol.TOOLS).status_code == 200  # 308 → /echo/tools, followed
        after = stats(client)["requests"]
    assert after["308"] == before.get("308", 0) + 1
    assert after["GET /{env}/tools"] == before.get("GET /{env}/tools", 0) + 1


def test_task_tools_differ_between_tasks_and_only_listed_ones_are_callable(twins: dict[str, Twin]) -> None:
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


def test_slow_setup_answers_503_starting_then_long_call_streams_keepalives(twins: dict[str, Twin]) -> None:
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


def test_ttl_knob_reaps_an_idle_session(twins: dict[str, Twin]) -> None:
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


def test_environment_class_is_named_after_the_scenario() -> None:
    assert environment_class(get_scenario("task-tool")).name() == "task-tool"


def test_arbitrary_tool_names_are_listed_and_callable() -> None:
    scenario = OddNames()
    transport = httpx.ASGITransport(app=build_app([scenario], ServerConfig()))
    with httpx.Client(transport=transport, base_url="http://twin") as client:
        listed = client.get("/odd-names/tools").json()["tools"]
        assert listed == sorted((t.spec() for t in scenario.shared_tools()), key=lambda s: s["name"])
        sid = "odd-1"
        assert client.post(protocol.CREATE, headers=sid_header(sid), json={"split": "train", "index": 0}).status_code == 200
        assert call(client, "odd-names", sid, "class", {"note": "k"})[0]["output"]["blocks"] == [text("k")]
        assert call(client, "odd-names", sid, "a.b/c", {})[0]["output"]["blocks"] == [text("abc")]
        assert call(client, "odd-names", sid, "file-path", {"note": "x"})[0]["output"]["blocks"] == [text("X")]
        raw = client.post("/odd-names/call", headers=sid_header(sid), json={"name": "reset", "input": {}})
        events = [(e.event, e.data) for e in parse(raw.content).events]
        assert events[-1] == (protocol.EVENT_ERROR, "boom")


def test_a_tool_named_like_an_sdk_method_fails_with_its_name() -> None:
    with pytest.raises(ToolNameError, match="'setup'"):
        environment_class(ReservedName())
