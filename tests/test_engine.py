"""The mock engine answers every endpoint and error path as the reference server does.

Each test names the behaviour of ``docs/protocol.md`` it pins.
"""

from __future__ import annotations

import base64
import json
import threading
import time

import pytest

from orsbench import protocol
from orsbench.wire import WireClient


@pytest.fixture(scope="module")
def echo(ors_server_factory):
    return ors_server_factory("echo")


@pytest.fixture
def client(echo):
    with WireClient(echo.url) as c:
        yield c


def open_session(client: WireClient, env: str = "echo", index: int = 0, split: str = "train") -> str:
    sid = client.new_session()
    created = client.create(sid, split=split, index=index)
    assert created.status == 200, created.body
    return sid


# -- discovery (§1, §2.1) --------------------------------------------------------
def test_root_routes(client):
    assert client.health().json() == {"status": "ok"}
    assert client.version().json()["version"] == protocol.REFERENCE_VERSION
    assert client.list_environments().json() == ["echo"]


def test_tools_lists_shared_tools_with_schemas(client):
    body = client.tools("echo").json()
    assert [t["name"] for t in body["tools"]] == ["echo"]
    assert body["tools"][0]["input_schema"]["required"] == ["text"]
    assert body["terminal_tool"] is None and body["supports_score_group"] is False
    assert body["message_block_types"] == list(protocol.BLOCK_TYPES)


def test_splits_tasks_num_tasks_task_and_range(client):
    assert client.splits("echo").json() == [{"name": "train", "type": "train"}, {"name": "test", "type": "test"}]
    tasks = client.tasks("echo", "train").json()
    assert tasks["env_name"] == "echo" and len(tasks["tasks"]) == 48
    assert client.num_tasks("echo", "train").json() == {"num_tasks": 48}
    assert client.task("echo", "train", 3).json()["task"] == tasks["tasks"][3]
    assert client.task("echo", "train", -1).json()["task"] == tasks["tasks"][-1]  # negative indices work
    assert client.task_range("echo", "train", 2, 5).json()["tasks"] == tasks["tasks"][2:5]
    assert client.task_range("echo", "train", 60, 70).json()["tasks"] == []  # slice semantics, clamped
    assert {"difficulty", "tags", "target", "id"} <= set(tasks["tasks"][0])


def test_env_name_is_case_insensitive_and_echoes_the_path_spelling(client):
    assert client.tasks("ECHO", "test").json()["env_name"] == "ECHO"


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.tasks("echo", "nope"),
        lambda c: c.num_tasks("echo", "nope"),
        lambda c: c.task("echo", "nope", 0),
        lambda c: c.task_range("echo", "nope"),
    ],
)
def test_invalid_split_is_400(client, call):
    answer = call(client)
    assert (answer.status, answer.detail) == (400, protocol.DETAIL_INVALID_SPLIT)


def test_invalid_index_is_400(client):
    answer = client.task("echo", "train", 99)
    assert (answer.status, answer.detail) == (400, protocol.DETAIL_INVALID_INDEX)


def test_unknown_body_keys_and_wrong_types_are_422(client):
    extra = client.request("POST", "/echo/tasks", json_body={"split": "train", "x": 1})
    assert extra.status == 422 and extra.detail[0]["type"] == "extra_forbidden"
    assert extra.detail[0]["loc"] == ["body", "x"]
    wrong = client.request("POST", "/echo/task", json_body={"split": "train", "index": "zero"})
    assert wrong.status == 422 and wrong.detail[0]["loc"] == ["body", "index"]
    broken = client.request("POST", "/echo/tasks", content=b"{nope", headers={"Content-Type": "application/json"})
    assert broken.status == 422 and broken.detail[0]["type"] == "json_invalid"
    empty = client.request("POST", "/echo/tasks")
    assert empty.status == 422 and empty.detail[0]["type"] == "missing"


# -- routing (§1, §1.2) -----------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "location"),
    [("/tools", "/echo/tools"), ("/splits?x=1", "/echo/splits?x=1"), ("/nope/tools", "/echo/nope/tools"), ("/", "/echo/")],
)
def test_unknown_first_segment_redirects_308_to_default_env(client, path, location):
    answer = client.request("GET", path)
    assert (answer.status, answer.headers.get("location"), answer.body) == (308, location, b"")


def test_308_keeps_method_and_body(echo):
    with WireClient(echo.url, follow_redirects=True) as c:
        answer = c.request("POST", "/tasks", json_body={"split": "test"})
    assert answer.status == 200 and len(answer.json()["tasks"]) == 16


def test_trailing_slash_307_wrong_method_405_unknown_route_404(client):
    slash = client.request("GET", "/health/")
    assert slash.status == 307 and slash.headers["location"].endswith("/health")
    wrong = client.request("GET", "/echo/call")
    assert (wrong.status, wrong.detail, wrong.headers["allow"]) == (405, "Method Not Allowed", "POST")
    missing = client.request("GET", "/echo/nothing")
    assert (missing.status, missing.detail) == (404, "Not Found")


# -- sessions (§2.2–2.4, §8) ------------------------------------------------------------
def test_create_session_streams_task_id_then_empty_end(client):
    answer = client.create_session()
    assert answer.status == 200 and answer.is_sse
    assert answer.headers["cache-control"] == "no-cache" and answer.headers["x-accel-buffering"] == "no"
    assert [e.event for e in answer.sse.events] == ["task_id", "end"]
    assert answer.sse.events[1].data == ""
    assert answer.sse.line_endings == {"\r\n"}
    assert len(answer.task_id) == 36  # a uuid4 with dashes


def test_session_headers_and_create_errors(client):
    assert client.request("POST", "/create", json_body={}).detail == protocol.DETAIL_SID_REQUIRED
    assert client.request("POST", "/create", sid="", json_body={}).detail == protocol.DETAIL_SID_REQUIRED
    sid = open_session(client)
    again = client.create(sid, split="train", index=0)
    assert (again.status, again.detail) == (400, protocol.DETAIL_SESSION_EXISTS)
    both = client.create("s-both", split="train", index=0, task_spec={"target": "x"})
    assert both.status == 422 and both.detail[0]["msg"].endswith("not both/neither")
    neither = client.create("s-neither", split="train")
    assert neither.status == 422 and neither.detail[0]["msg"].endswith("not both/neither")
    secrets_in_body = client.create("s-sec", split="train", index=0, extra={"secrets": {}})
    assert secrets_in_body.status == 422 and secrets_in_body.detail[0]["loc"] == ["body", "secrets"]
    unknown_env = client.create("s-env", split="train", index=0, env_name="nope")
    assert (unknown_env.status, unknown_env.detail) == (404, "unknown environment 'nope'")
    assert client.create("s-split", split="nope", index=0).detail == protocol.DETAIL_INVALID_SPLIT
    assert client.create("s-idx", split="train", index=999).detail == protocol.DETAIL_INVALID_INDEX
    toolset = client.create("s-ts", split="train", index=0, extra={"toolset_name": "nope"})
    assert toolset.status == 400 and "unknown toolset 'nope'" in toolset.detail
    client.delete(sid)


@pytest.mark.parametrize(
    "header",
    ["!!!not-base64", base64.b64encode(b"[1,2]").decode(), base64.b64encode(json.dumps({"K": "bare"}).encode()).decode()],
)
def test_malformed_x_secrets_is_400_and_never_echoed(client, header):
    answer = client.request(
        "POST", "/create", sid="s-secrets", json_body={"split": "train", "index": 0}, headers={"X-Secrets": header}
    )
    assert answer.status == 400 and "X-Secrets" in answer.detail
    assert header not in answer.body.decode()
    assert client.ping("s-secrets").status == 404  # no half-created session


def test_well_formed_secrets_reach_the_episode(client):
    sid = client.new_session()
    assert client.create(sid, split="train", index=0, secrets={"OPENAI_API_KEY": "sk-1"}).status == 200
    client.delete(sid)


def test_task_spec_sessions_and_env_path_is_ignored_for_session_routes(client):
    sid = client.new_session()
    assert client.create(sid, task_spec={"target": "zzz"}, env_name="ECHO").status == 200
    assert "zzz" in client.prompt("echo", sid).body.decode()
    assert client.call("echo", sid, "echo", {"text": "zzz"}).result()["output"]["reward"] == 1.0
    client.delete(sid)


def test_prompt_messages_task_tools(client):
    sid = open_session(client, index=1)
    prompt = client.prompt("echo", sid).json()
    assert prompt[0]["type"] == "text" and prompt[0]["detail"] is None
    assert client.messages("echo", sid).json() == [{"role": "user", "blocks": prompt, "detail": None}]
    assert [t["name"] for t in client.task_tools("echo", sid).json()["tools"]] == ["echo"]
    client.delete(sid)


def test_unknown_session_is_404_everywhere(client):
    for answer in (
        client.ping("never"),
        client.prompt("echo", "never"),
        client.messages("echo", "never"),
        client.task_tools("echo", "never"),
        client.call("echo", "never", "echo", {"text": "x"}),
    ):
        assert (answer.status, answer.detail) == (404, protocol.DETAIL_NOT_FOUND_SESSION)


def test_missing_sid_beats_everything_and_404_beats_422(client):
    assert client.request("POST", "/echo/call", json_body={"name": "echo"}).detail == protocol.DETAIL_SID_REQUIRED
    assert client.request("POST", "/echo/call", sid="never", json_body={"name": "echo"}).status == 404


def test_delete_is_idempotent_and_a_deleted_sid_can_be_recreated(client):
    sid = open_session(client)
    assert client.delete(sid).json() == {"sid": sid}
    assert client.ping(sid).status == 404
    assert client.delete(sid).status == 200 and client.delete("never").json() == {"sid": "never"}
    assert client.create(sid, split="train", index=0).status == 200
    assert client.ping(sid).status == 200
    client.delete(sid)


def test_delete_session_is_a_no_op(client):
    sid = open_session(client)
    assert client.delete_session(sid).json() == {"sid": sid}
    assert client.ping(sid).status == 200
    client.delete(sid)


# -- tool calls (§3, §5) ------------------------------------------------------------------
def test_call_streams_task_id_then_end_with_tool_output(client, echo):
    sid = open_session(client, index=0)
    target = client.task("echo", "train", 0).json()["task"]["target"]
    miss = client.call("echo", sid, "echo", {"text": "nope"})
    assert miss.is_sse and miss.sse.names() == ["task_id", "end"] and len(miss.task_id) == 32
    assert miss.result() == {
        "ok": True,
        "output": {"blocks": [{"text": "no match", "detail": None, "type": "text"}], "metadata": {"len": 4}, "reward": 0.0, "finished": False},
    }
    hit = client.call("echo", sid, "echo", {"text": target}).result()["output"]
    assert (hit["reward"], hit["finished"]) == (1.0, True)
    client.delete(sid)


def test_reason_precedence_not_found_then_latch_then_validation(client):
    sid = open_session(client, index=0)
    bad_input = client.call("echo", sid, "echo", {"txt": 1}).result()
    assert (bad_input["ok"], bad_input["reason"]) == (False, protocol.REASON_INPUT_VALIDATION)
    assert bad_input["error"].startswith("Tool input validation error:")
    target = client.task("echo", "train", 0).json()["task"]["target"]
    client.call("echo", sid, "echo", {"text": target})
    assert client.call("echo", sid, "nope", {}).result()["reason"] == protocol.REASON_NOT_FOUND  # beats the latch
    latched = client.call("echo", sid, "echo", {"txt": 1}).result()  # latch beats validation
    assert latched["reason"] == protocol.REASON_EPISODE_FINISHED and "episode has finished" in latched["error"]
    assert client.ping(sid).status == 200  # the session stays alive after finishing
    client.delete(sid)


def test_input_not_an_object_is_422_before_streaming(client):
    sid = open_session(client)
    answer = client.request("POST", "/echo/call", sid=sid, json_body={"name": "echo", "input": [1]}, stream=True)
    assert answer.status == 422 and not answer.is_sse
    missing = client.request("POST", "/echo/call", sid=sid, json_body={"name": "echo"}, stream=True)
    assert missing.status == 422 and missing.detail[0]["loc"] == ["body", "input"]
    client.delete(sid)


def test_resume_by_task_id_replays_and_unknown_task_id_is_an_error_event(client):
    sid = open_session(client)
    first = client.call("echo", sid, "echo", {"text": "a"})
    replay = client.call("echo", sid, "echo", {"text": "ignored"}, task_id=first.task_id)
    assert replay.task_id == first.task_id and replay.result() == first.result()
    other = open_session(client, index=2)
    assert client.call("echo", other, "echo", {}, task_id=first.task_id).result() == first.result()  # global scope
    unknown = client.call("echo", sid, "echo", {}, task_id="deadbeef")
    assert unknown.status == 200 and [(e.event, e.data) for e in unknown.sse.events] == [("error", "unknown task_id")]
    client.delete(sid)
    client.delete(other)


def test_stats_count_sessions_calls_and_requests(echo, client):
    before = echo.stats()
    sid = open_session(client)
    client.call("echo", sid, "echo", {"text": "x"})
    client.ping(sid)
    client.delete(sid)
    after = echo.stats()
    assert after["sessions_created"] - before["sessions_created"] == 1
    assert after["calls"]["echo"] - before["calls"].get("echo", 0) == 1
    assert after["pings"] - before["pings"] == 1
    assert after["requests"]["POST /{env}/call"] - before["requests"].get("POST /{env}/call", 0) == 1
    assert after["active_sessions"] == before["active_sessions"]


def test_body_over_limit_is_413(ors_server_factory):
    small = ors_server_factory("echo", max_body=1000)
    with WireClient(small.url) as c:
        answer = c.request("POST", "/echo/tasks", content=b'{"split": "' + b"x" * 5000 + b'"}')
    assert answer.status == 413 and "limit" in answer.detail


# -- chunking, keep-alives, readiness, TTL (§3, §2.3, §8) --------------------------------
def test_long_results_are_chunked_by_characters(ors_server_factory):
    server = ors_server_factory("echo", chunk_size=16)
    with WireClient(server.url) as c:
        sid = open_session(c)
        answer = c.call("echo", sid, "echo", {"text": "é" * 40})
        chunks = [e for e in answer.sse.events if e.event == "chunk"]
        assert chunks and all(len(e.data) == 16 for e in chunks)
        assert answer.sse.events[-1].event == "end" and 0 < len(answer.sse.events[-1].data) <= 16
        assert answer.result()["output"]["metadata"] == {"len": 40}
        c.delete(sid)


def test_slow_scenario_keepalives_503_starting_and_410_on_delete(ors_server_factory):
    server = ors_server_factory("slow", params={"setup": 1.5, "long_call": 1.0})
    with WireClient(server.url) as c:
        sid = open_session(c, env="slow")
        assert c.task_tools("slow", sid).status == 200  # does not wait for setup
        early = c.prompt("slow", sid)
        assert early.status == 503 and early.detail == protocol.DETAIL_STARTING
        assert early.headers["x-backend-state"] == "starting" and early.headers["retry-after"].isdigit()
        time.sleep(1.2)
        assert c.prompt("slow", sid).status == 200
        long = c.call("slow", sid, "wait", {})
        assert long.sse.comments and all(cm.text.startswith(" ping - ") for cm in long.sse.comments)
        gaps = [b.at - a.at for a, b in zip(long.sse.comments, long.sse.comments[1:])]
        assert all(g < 0.6 for g in gaps)  # ping_interval 0.25 s in the slow scenario
        assert long.result()["output"]["blocks"][0]["text"] == "waited 1s"
        c.delete(sid)

    # A prompt waiting on setup answers 410 when its session is deleted meanwhile. Its own server waits up to
    # 5 s on a 10 s setup, so the delete lands within the wait on a loaded machine too (0.5 s did not, at load 30).
    waiting_server = ors_server_factory("slow", params={"setup": 10.0, "long_call": 1.0}, setup_wait_timeout=5.0)
    with WireClient(waiting_server.url) as c, WireClient(waiting_server.url) as other:
        waiting = c.new_session()
        c.create(waiting, split="train", index=1)
        results = {}
        thread = threading.Thread(target=lambda: results.setdefault("prompt", c.prompt("slow", waiting)))
        thread.start()
        time.sleep(0.2)
        other.delete(waiting)
        thread.join(10)
        assert results["prompt"].status == 410 and results["prompt"].detail == protocol.DETAIL_SESSION_DELETED
        assert c.prompt("slow", waiting).status == 404


def test_ttl_reaper_deletes_idle_sessions_but_pings_keep_them(ors_server_factory):
    server = ors_server_factory("echo", ttl=1.0, reaper_interval=0.1)
    with WireClient(server.url) as c:
        idle = open_session(c)
        kept = open_session(c, index=1)
        for _ in range(8):
            time.sleep(0.2)
            assert c.ping(kept).status == 200
        assert c.ping(idle).status == 404
        assert c.prompt("echo", idle).status == 404
        assert server.stats()["sessions_reaped"] >= 1
        c.delete(kept)


def test_tool_exception_is_an_error_event_and_session_survives(ors_server_factory):
    server = ors_server_factory("sparse-reward")
    with WireClient(server.url) as c:
        sid = open_session(c, env="sparse-reward")
        out = c.call("sparse-reward", sid, "reveal", {"position": 0}).result()["output"]
        assert out["reward"] is None and out["finished"] is False
        done = c.call("sparse-reward", sid, "submit", {"total": -5}).result()["output"]
        assert (done["reward"], done["finished"]) == (-1.0, True)
        c.delete(sid)


def test_task_tools_differ_between_tasks_and_are_callable(ors_server_factory):
    server = ors_server_factory("task-tool")
    with WireClient(server.url) as c:
        assert [t["name"] for t in c.tools("task-tool").json()["tools"]] == ["answer"]
        names = []
        for index in range(3):
            sid = open_session(c, env="task-tool", index=index)
            names.append([t["name"] for t in c.task_tools("task-tool", sid).json()["tools"]])
            c.delete(sid)
        assert names == [["answer", "add"], ["answer", "lookup"], ["answer", "hint"]]
        sid = open_session(c, env="task-tool", index=0)
        assert c.call("task-tool", sid, "add", {"a": 2, "b": 3}).result()["output"]["blocks"][0]["text"] == "5"
        assert c.call("task-tool", sid, "hint", {}).result()["reason"] == protocol.REASON_NOT_FOUND
        c.delete(sid)


def test_api_key_enforcement(ors_server_factory):
    server = ors_server_factory("echo", api_key="k3y")
    with WireClient(server.url) as anonymous:
        assert anonymous.health().status == 200
        assert anonymous.tools("echo").status == 401
    with WireClient(server.url, api_key="k3y") as keyed:
        assert keyed.tools("echo").status == 200
    with WireClient(server.url) as bearer:
        assert bearer.request("GET", "/echo/tools", headers={"Authorization": "Bearer k3y"}).status == 200
        assert bearer.request("GET", "/echo/tools", headers={"Authorization": "Bearer nope"}).status == 401


def test_unplayable_task_spec_is_422_not_a_later_500(ors_server_factory):
    server = ors_server_factory("sparse-reward")
    with WireClient(server.url) as c:
        for spec in ({}, {"length": 10**9, "seed": 1}, {"length": "three", "seed": 0}):
            answer = c.create("s-unplayable", task_spec=spec)
            assert answer.status == 422 and answer.detail[0]["loc"][:2] == ["body", "task_spec"], answer.body
        assert c.ping("s-unplayable").status == 404


def test_secrets_sent_in_the_body_are_rejected_and_redacted(client):
    answer = client.create("s-body-secret", split="train", index=0, extra={"secrets": {"OPENAI_API_KEY": "sk-secret"}})
    assert answer.status == 422 and answer.detail[0]["loc"] == ["body", "secrets"]
    assert "sk-secret" not in answer.body.decode()
