"""Cassettes: record an environment, replay it offline, and get the same answers.

* ``orsbench record`` on every differential scenario, then the differential
  script against the replay: the client-visible transcript equals the live one;
* ``orsbench check`` passes on a replayed cassette as it does on the live server;
* recorded answers come back byte for byte; a miss answers a clear ok:false
  (or, with ``on_miss=nearest``, the closest recorded call's answer);
* secrets and API keys never reach the file.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import pytest

from orsbench.checks import Options, Status, run_checks
from orsbench.checks.record import parse_tasks, record
from orsbench.scenarios import SCENARIOS, get_scenario
from orsbench.servers.launch import serve
from orsbench.wire import WireClient
from orsbench.wire.cassette import FORMAT, VERSION, CassetteError, load, outcome_of, write

from test_differential import PARAMS, SCRIPTS, transcript  # noqa: E402  (tests/ is on sys.path)


def _record_script(server, scenario: str, path) -> dict:
    """Play the differential script through a recording client; write the cassette; return the transcript."""
    from orsbench.checks.record import RecordingWireClient
    from orsbench.wire.cassette import CassetteRecorder

    recorder = CassetteRecorder(server.url, "test")
    state: dict = {}
    with RecordingWireClient(server.url, recorder) as client:
        # The dataset in full, as `orsbench record` lists it.
        for split in json.loads(client.splits(server.env_name).body):
            client.tasks(server.env_name, split["name"])
        from test_differential import normalise

        out = {label: normalise(step(client, state)) for label, step in SCRIPTS[scenario]}
    recorder.save(path)
    return out


#: Differential scripts a recording cannot reproduce, and why (the every-scenario replay test below still covers them):
#: slow's script probes live setup timing (503 starting, then a call that waits setup out), and a replay has no setup;
#: broken-session calls a tool on a session whose tool listing it never asked for, and a replay serves the tools
#: the recording listed.
NOT_REPLAYABLE = {"slow", "broken-session"}
#: Hazard scenarios a cassette does not replay yet (docs/cassettes.md, "What a replay cannot show"):
#: a replay's sessions are the mock engine's, so a session the live env refused for want of a secret
#: opens on the replay; and the replay serves the first recorded environment, where two-envs serves a
#: decoy beside its own. Both are known gaps, named here rather than skipped silently.
NOT_REPLAYED_HAZARDS = {
    "secrets": "session admission (a /create refused for a missing X-Secrets) is not replayed",
    "two-envs": "a replay serves one environment; two-envs serves its decoy beside it",
}


@pytest.mark.parametrize("scenario", [s for s in SCRIPTS if s not in NOT_REPLAYABLE | NOT_REPLAYED_HAZARDS.keys()])
def test_record_then_replay_gives_the_same_client_visible_transcript(ors_server_factory, tmp_path, scenario):
    live = ors_server_factory(scenario, params=PARAMS.get(scenario))
    path = tmp_path / f"{scenario}.cassette.json"
    recorded = _record_script(live, scenario, path)
    replay = ors_server_factory("cassette", params={"path": str(path)})
    assert replay.env_name == live.env_name
    replayed = transcript(replay, scenario)
    assert list(replayed) == list(recorded)
    for label, want in recorded.items():
        assert replayed[label] == want, f"step {label} differs"


def test_orsbench_record_then_check_passes_on_the_replay(ors_server_factory, tmp_path):
    live = ors_server_factory("echo")
    result = record(live.url, options=Options(timeout=10), episodes=3)
    assert result.problem is None and result.episodes == 3
    path = tmp_path / "echo.cassette.json"
    write(result.cassette, path)
    data = load(path)
    env = data["environments"]["echo"]
    assert set(env["tasks"]) == {"train", "test"}  # every split's task list, not only the checked one
    assert env["tasks"]["train"] == get_scenario("echo").list_tasks("train")
    assert len(env["episodes"]) >= 4

    replay = ors_server_factory("cassette", params={"path": str(path)})
    live_report = run_checks(live.url, Options(timeout=10))
    replay_report = run_checks(replay.url, Options(timeout=10))
    assert replay_report.ids(Status.FAIL) == [] and replay_report.ids(Status.ERROR) == []
    assert replay_report.ids(Status.PASS) == live_report.ids(Status.PASS)


def test_recorded_answers_are_served_byte_for_byte_and_a_miss_is_ok_false(ors_server_factory, tmp_path):
    live = ors_server_factory("echo")
    path = tmp_path / "echo.json"
    write(record(live.url, options=Options(timeout=10), tasks="train:2", episodes=1).cassette, path)
    episode = next(e for e in load(path)["environments"]["echo"]["episodes"] if e.get("index") == 2)
    replay = ors_server_factory("cassette", params={"path": str(path)})
    with WireClient(replay.url) as client:
        sid = client.new_session()
        assert client.create(sid, split="train", index=2).status == 200
        first = episode["calls"][0]
        answer = client.call("echo", sid, first["tool"], first["input"])
        assert answer.reassembled() == first["outcome"]["data"]
        client.delete(sid)
        # A call no recording answers, on a fresh session (the recorded episode may have finished at once).
        sid = client.new_session()
        assert client.create(sid, split="train", index=2).status == 200
        miss = client.call("echo", sid, "echo", {"text": "never recorded"})
        body = miss.result()
        assert body["ok"] is False and "cassette miss" in body["error"] and "--on-miss nearest" in body["error"]
        client.delete(sid)

    nearest = ors_server_factory("cassette", params={"path": str(path), "on_miss": "nearest"})
    with WireClient(nearest.url) as client:
        sid = client.new_session()
        client.create(sid, split="train", index=2)
        body = client.call("echo", sid, "echo", {"text": "never recorded"}).result()
        assert body["ok"] is True  # the nearest recorded echo answer, not a miss
        client.delete(sid)


def test_secrets_and_api_keys_never_reach_the_cassette(tmp_path):
    key = "sk-orsbench-SECRET-api-key-123"
    secret = "hunter2-token-xyz"
    from orsbench.config import ServerConfig
    from orsbench.checks.record import RecordingWireClient
    from orsbench.wire.cassette import CassetteRecorder

    with serve("echo", config=ServerConfig(api_key=key)) as server:
        result = record(server.url, options=Options(timeout=10, api_key=key))
        assert result.problem is None
        recorder = CassetteRecorder(f"http://user:{key}@127.0.0.1:1/?token={key}", "test")
        with RecordingWireClient(server.url, recorder, api_key=key) as client:
            sid = client.new_session()
            client.create(sid, split="train", index=0, secrets={"api_key": secret, "OPENREWARD_API_KEY": key})
            # An input carrying a secret (a model leaking it into a tool call) is scrubbed too.
            client.call("echo", sid, "echo", {"text": f"my key is {secret}"})
            client.delete(sid)
        recorder.save(tmp_path / "b.json")
    write(result.cassette, tmp_path / "a.json")
    for name in ("a.json", "b.json"):
        text = (tmp_path / name).read_text()
        for value in (key, secret, base64.b64encode(secret.encode()).decode()):
            assert value not in text, (name, value)
    assert "[redacted]" in (tmp_path / "b.json").read_text()
    assert load(tmp_path / "b.json")["source"] == "http://127.0.0.1:1/"


def test_bad_cassettes_and_flags_are_clear_usage_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something-else"}')
    with pytest.raises(CassetteError, match="not an orsbench cassette"):
        load(bad)
    future = tmp_path / "future.json"
    future.write_text(json.dumps({"format": FORMAT, "version": VERSION + 1, "environments": {"x": {}}}))
    with pytest.raises(CassetteError, match="this orsbench reads version"):
        load(future)
    for argv, fragment in (
        (["serve", "--cassette", str(bad)], "not an orsbench cassette"),
        (["serve", "--cassette", str(tmp_path / "missing.json")], "cannot read cassette"),
        (["serve", "echo", "--cassette", str(bad)], "not both"),
        (["serve", "echo", "--on-miss", "nearest"], "--cassette only"),
        (["record", "http://127.0.0.1:9", "--out", str(tmp_path / "x.json"), "--tasks", "train:a-b"], "--tasks expects"),
    ):
        done = subprocess.run([sys.executable, "-m", "orsbench", *argv], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, (argv, done.stderr)
        assert fragment in done.stderr and "Traceback" not in done.stderr, (argv, done.stderr)


def test_parse_tasks():
    assert parse_tasks("train:0-3,7") == ("train", [0, 1, 2, 3, 7])
    assert parse_tasks("2") == (None, [2])
    with pytest.raises(ValueError):
        parse_tasks("train:x")


def test_replay_through_the_ors_server_fixture_and_the_sdk_client(ors_server_factory, tmp_path):
    openreward = pytest.importorskip("openreward")
    live = ors_server_factory("echo")
    path = tmp_path / "echo.json"
    write(record(live.url, options=Options(timeout=10), tasks="train:0-1", episodes=2).cassette, path)
    replay = ors_server_factory(cassette=path)  # the fixture's shorthand for ("cassette", params={"path": ...})
    env = openreward.OpenReward(api_key="test").environments.get("echo", variant="echo", base_url=replay.url)
    target = env.get_task("train", 1).task_spec["target"]
    data = load(path)["environments"]["echo"]
    played = next(e for e in data["episodes"] if e.get("index") == 1)
    with env.session(split="train", index=1) as session:
        assert target in "".join(getattr(b, "text", "") for b in session.get_prompt())
        outputs = []
        for call in played["calls"]:
            if call["tool"] == "echo" and (call["outcome"].get("reward") is not None):
                outputs.append(session.call_tool(call["tool"], call["input"]))
                if call["outcome"].get("finished"):
                    break
    assert outputs and outputs[-1].finished is True and outputs[-1].reward == 1.0


#: schema-zoo records and replays every tool of the zoo (~70 s): behind the slow marker
@pytest.mark.parametrize(
    "scenario",
    [pytest.param(n, marks=[pytest.mark.slow] if n == "schema-zoo" else []) for n in SCENARIOS if n != "cassette" and n not in NOT_REPLAYED_HAZARDS],
)
def test_every_scenario_replays_discovery_dataset_and_every_recorded_call_identically(ors_server_factory, tmp_path, scenario):
    from orsbench.scenarios import suite_params

    live = ors_server_factory(scenario, params=suite_params(scenario))
    path = tmp_path / "c.json"
    write(record(live.url, options=Options(timeout=15)).cassette, path)
    data = load(path)["environments"][live.env_name]
    replay = ors_server_factory("cassette", params={"path": str(path)})
    env = live.env_name
    replayed = 0
    with WireClient(live.url) as direct, WireClient(replay.url) as client:
        for ask in (lambda c: c.tools(env), lambda c: c.splits(env), lambda c: c.list_environments()):
            assert ask(client).json() == ask(direct).json()
        for split in data["splits"]:
            assert client.tasks(env, split["name"]).json() == direct.tasks(env, split["name"]).json()
        for episode in data["episodes"]:
            sid = client.new_session()
            source = {"task_spec": episode["task_spec"]} if "task_spec" in episode else {"split": episode["split"], "index": episode["index"]}
            assert client.create(sid, env_name=env, **source).status == 200
            for call in episode["calls"]:
                answer = client.call(env, sid, call["tool"], call["input"])
                events = [[e.event, e.data] for e in answer.sse.events if e.event != "task_id"]
                assert outcome_of(events) == call["outcome"], (call["tool"], call["input"])
                replayed += 1
            client.delete(sid)
    assert replayed == sum(len(e["calls"]) for e in data["episodes"])
    assert replayed >= 3 or scenario == "broken-session", replayed  # its sessions fail on purpose: nothing to call
