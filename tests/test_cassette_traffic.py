"""A cassette recorded from a client's own traffic replays that client: the user's view of issue 19 item 1.

* A real client's whole test run (``tests/client_suite``: TRL's ``OpenRewardSpec`` and the openreward SDK,
  nine tests, one failing on purpose) is run as its own pytest session through ``orsbench proxy --record``
  in front of the live ``echo`` mock, then against ``orsbench serve --cassette`` of the recording: the
  per-test outcomes are the same. TRL never calls ``/list_splits``: the splits come from what it did ask.
* Refusals (an invalid split, an index out of range) replay as recorded; a request the recording lacks is
  a miss that names the request and how to record it; a wrong-typed input is ``input_validation``.
* ``orsbench check`` on the replay gives the live verdict; checks the recording cannot answer skip, saying so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from orsbench import protocol
from orsbench.checks import Options, Status, run_checks
from orsbench.checks.record import RecordingWireClient
from orsbench.servers.launch import start, start_proxy
from orsbench.wire import WireClient
from orsbench.wire.cassette import MISS_HEADER, CassetteRecorder, load, miss_of

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "tests" / "client_suite" / "suite_echo_clients.py"
pytest.importorskip("trl")


def run_suite(url: str, junit: Path) -> dict[str, str]:
    """The client suite as its own pytest session against ``url``: ``{test name: passed|failed|error|skipped}``."""
    env = {
        **os.environ,
        "ORS_SUITE_URL": url,
        "ORS_SUITE_ENV": "echo",
        protocol.ENV_API_URL: url,
        protocol.ENV_SESSION_URL: url,
        protocol.ENV_DISABLE_UPDATE_CHECK: "1",
        "TRL_EXPERIMENTAL_SILENCE": "1",
        "HF_HUB_OFFLINE": "1",
    }
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", str(SUITE), f"--junitxml={junit}"]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert junit.is_file(), f"the client suite wrote no report (exit {done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}"
    outcomes = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcomes[case.get("name", "")] = {"failure": "failed"}.get(kinds[0], kinds[0]) if kinds else "passed"
    return outcomes


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The client suite run through ``orsbench proxy --record`` in front of the live echo mock."""
    folder = tmp_path_factory.mktemp("traffic")
    cassette = folder / "echo.cassette.json"
    live = start("echo")
    try:
        proxy = start_proxy(live.url, record=cassette)
        try:
            outcomes = run_suite(proxy.url, folder / "live.xml")
        finally:
            proxy.stop()  # writes the cassette
    finally:
        live.stop()
    return cassette, outcomes


@pytest.mark.slow  # runs the client's whole suite a second time, against the replay (~80 s); the recording itself stays in CI
def test_a_clients_test_run_replays_with_the_same_outcomes(recorded, ors_server_factory, tmp_path) -> None:
    cassette, live = recorded
    assert len(live) == 9 and live["test_deliberately_failing_expectation"] == "failed", live
    assert sorted(name for name, outcome in live.items() if outcome != "passed") == ["test_deliberately_failing_expectation"]
    replay = ors_server_factory("cassette", params={"path": str(cassette)})
    assert run_suite(replay.url, tmp_path / "replay.xml") == live


def test_splits_come_from_what_the_client_asked_and_refusals_are_kept(recorded) -> None:
    echo = load(recorded[0])["environments"]["echo"]
    assert echo["inferred"] == ["splits"]  # TRL never asked /list_splits
    assert [s["name"] for s in echo["splits"]] == ["train", "test"]
    refused = {(r["route"], r["status"], r["body"]) for r in echo["refusals"]}
    assert ("num_tasks", 400, '{"detail":"Invalid split"}') in refused
    assert ("task", 400, '{"detail":"Invalid index"}') in refused


def test_a_replay_names_what_it_lacks_and_how_to_record_it(recorded, ors_server_factory) -> None:
    replay = ors_server_factory("cassette", params={"path": str(recorded[0])})
    source = load(recorded[0])["source"]
    with WireClient(replay.url) as client:
        task = client.task("echo", "train", 5)  # in range (48 tasks), never fetched
        assert task.status == 404 and task.headers.get(MISS_HEADER.lower()) == "1"
        assert f"POST /echo/task for task train/5 was not recorded" in task.body.decode()
        assert f"orsbench proxy {source} --record FILE" in task.body.decode() and "--tasks train:5" in task.body.decode()
        listing = client.tasks("echo", "train")
        assert "the task list of split 'train'" in (miss_of(listing) or "")
        # As recorded: the env's own refusals, byte for byte.
        assert (client.task("echo", "train", 10_000).status, client.task("echo", "train", 10_000).body) == (400, b'{"detail":"Invalid index"}')
        assert client.num_tasks("echo", "no-such-split").body == b'{"detail":"Invalid split"}'
        sid = client.new_session()
        assert client.create(sid, env_name="echo", split="train", index=0).status == 200
        miss = client.call("echo", sid, "echo", {"text": "never said"})
        said = miss_of(miss) or ""
        assert "no recording answers call #1 echo" in said and "--tasks train:0" in said and "orsbench proxy" in said
        wrong = client.call("echo", sid, "echo", {"text": 5})  # the recorded schema says string
        assert b'"reason":"input_validation"' in wrong.body and miss_of(wrong) is None
        client.delete(sid)


def test_check_on_the_replay_gives_the_live_verdict(recorded, ors_server_factory) -> None:
    live_server = ors_server_factory("echo")
    replay = ors_server_factory("cassette", params={"path": str(recorded[0])})
    live = run_checks(live_server.url, Options(env="echo", fuzz=0))
    replayed = run_checks(replay.url, Options(env="echo", fuzz=0))
    assert (replayed.exit_code, replayed.verdict) == (live.exit_code, live.verdict)
    by_id = {r.id: r for r in live.results}
    unrecorded = [r for r in replayed.results if "cassette did not record" in r.message]
    assert unrecorded and all(r.status is Status.SKIP for r in unrecorded)
    assert "dataset.tasks_list" in {r.id for r in unrecorded}
    judged = [r for r in replayed.results if r.status in (Status.PASS, Status.FAIL)]
    disagree = [f"{r.id}: replay {r.status.value}, live {by_id[r.id].status.value}" for r in judged if by_id[r.id].status is not r.status and by_id[r.id].status in (Status.PASS, Status.FAIL)]
    assert not disagree, disagree
    for check_id in ("discovery.tools_listing", "call.input_validation_ok_false"):
        assert by_id[check_id].status is Status.PASS
        assert replayed.result(check_id).status is Status.PASS, replayed.result(check_id).message


def test_tools_come_from_task_tools_when_the_listing_was_never_asked(ors_server_factory, tmp_path) -> None:
    """A client that asks only /task_tools (never GET /tools) still leaves a replay with a tool listing."""
    live = ors_server_factory("echo")
    recorder = CassetteRecorder(live.url, "test")
    with RecordingWireClient(live.url, recorder) as client:
        assert client.num_tasks("echo", "train").status == 200
        sid = client.new_session()
        client.create(sid, env_name="echo", split="train", index=0)
        client.task_tools("echo", sid)
        client.call("echo", sid, "echo", {"text": "x"})
        client.delete(sid)
    path = tmp_path / "c.json"
    data = recorder.save(path)
    assert data["environments"]["echo"]["inferred"] == ["splits", "tools"]
    replay = ors_server_factory("cassette", params={"path": str(path)})
    with WireClient(replay.url) as client:
        assert [t["name"] for t in client.tools("echo").json()["tools"]] == ["echo"]
    report = run_checks(replay.url, Options(env="echo", fuzz=0), only=["discovery.tools_listing"])
    assert report.result("discovery.tools_listing").status is Status.PASS
