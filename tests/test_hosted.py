"""``orsbench check-client --hosted``: every case at once under its own URL, graded as clients play them.

* the reference client, played by hand (a loop over the manifest, four cases at once), passes every case;
* each faulty client (``tests/clients/faulty.py``) fails exactly the check naming its rule;
* several episodes of one case at once (a GRPO group) are graded each on its own;
* a case nobody played is a skip that says so (a failure with ``--strict``);
* the manifest, the contract-line route and a port per case, in process.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from orsbench import protocol
from orsbench.cli import main
from orsbench.clientcheck import get_case
from orsbench.clientcheck.hosted import CASES_PATH, HostedServer
from orsbench.clientcheck.reference import command as reference_command
from orsbench.servers.launch import RunningServer, start_hosted

from test_check_client import SLACK_S, TRAFFIC_RULE_BROKEN, faulty  # noqa: E402  (tests/ is on sys.path)

#: Seconds a hosted run may take to end by itself once its clients are done (sweeps, the idle end, the grace).
END_S = 60.0


def play(entry: dict[str, Any], command: str, *, post_lines: bool = True) -> subprocess.CompletedProcess[str]:
    """Play one manifest entry by hand: the contract's variables from the manifest, then (optionally) the lines posted back."""
    with tempfile.TemporaryDirectory() as tmp:
        script, out = Path(tmp, "script.json"), Path(tmp, "out.jsonl")
        script.write_text(json.dumps(entry["script"]))
        out.touch()
        env = {
            **os.environ,
            "ORSBENCH_URL": entry["url"],
            "ORSBENCH_ENV": entry["env"],
            "ORSBENCH_SPLIT": entry["split"],
            "ORSBENCH_INDEX": str(entry["index"]),
            "ORSBENCH_SCRIPT": str(script),
            "ORSBENCH_OUT": str(out),
            "ORSBENCH_SECRETS": json.dumps(entry["secrets"]),
            "ORSBENCH_RUNS": str(entry["runs"]),
            "ORSBENCH_EPISODES": str(entry["episodes"]),
        }
        done = subprocess.run(command, shell=True, env=env, capture_output=True, text=True, timeout=SLACK_S)
        # Lines are posted per session (X-Session-ID); a process of several runs or episodes has several, which this hand-played
        # adapter does not know: its runs are graded from their traffic alone.
        if post_lines and entry["runs"] == entry["episodes"] == 1:
            posted = httpx.post(entry["url"] + "/_orsbench/out", content=out.read_text(), timeout=30)
            assert posted.status_code == 200, posted.text
    return done


def manifest(server: RunningServer) -> list[dict[str, Any]]:
    return httpx.get(server.url + CASES_PATH, timeout=30).json()


def finished(server: RunningServer, report: Path) -> tuple[int, dict[str, Any]]:
    """Wait for the run to end by itself; its exit code and JSON report."""
    try:
        code = server.process.wait(END_S)
    finally:
        server.stop()
    return code, json.loads(report.read_text())


def failing(report: dict[str, Any]) -> set[str]:
    return {c["id"] for c in report["checks"] if c["status"] in ("fail", "error")}


def test_the_reference_client_played_by_hand_passes_every_hosted_case(tmp_path):
    report_path = tmp_path / "hosted.json"
    server = start_hosted(deadline=SLACK_S, json_report=report_path)
    entries = manifest(server)
    assert {"case", "url", "env", "split", "index", "script", "secrets", "deadline_s"} <= set(entries[0])
    with ThreadPoolExecutor(4) as pool:  # several cases at once
        list(pool.map(lambda entry: play(entry, reference_command()), entries))
    code, report = finished(server, report_path)
    assert code == 0, [(c["id"], c["message"]) for c in report["checks"] if c["status"] != "pass"]
    graded = {c["id"].split("[")[1].rstrip("]") for c in report["checks"]}
    assert graded == {e["case"] for e in entries}
    assert not [c for c in report["checks"] if "nobody played" in c["message"]]
    judged = {c["id"].split("[")[0] for c in report["checks"]}
    # the traffic's checks and, with the lines posted, the report's
    assert {"client.retry_after", "client.resume_by_task_id", "client.tool_runs", "client.text_verbatim", "client.episode_completed"} <= judged


@pytest.mark.parametrize(
    "fault, case, check",
    TRAFFIC_RULE_BROKEN,
)
def test_a_faulty_client_fails_exactly_the_check_naming_its_rule(tmp_path, fault, case, check):
    report_path = tmp_path / "hosted.json"
    server = start_hosted([case], deadline=8, json_report=report_path)
    play(manifest(server)[0], faulty(fault), post_lines=False)
    code, report = finished(server, report_path)
    assert code == 1 and failing(report) == {f"{check}[{case}]"}, [(c["id"], c["status"], c["message"]) for c in report["checks"]]


def test_a_grpo_group_plays_one_case_four_times_at_once_each_session_graded(tmp_path):
    report_path = tmp_path / "hosted.json"
    server = start_hosted(["sparse-reward+flaky-5xx"], deadline=SLACK_S, json_report=report_path)
    entry = manifest(server)[0]
    with ThreadPoolExecutor(4) as pool:
        done = list(pool.map(lambda _: play(entry, reference_command(), post_lines=False), range(4)))
    assert [d.returncode for d in done] == [0, 0, 0, 0]
    code, report = finished(server, report_path)
    assert code == 0, [(c["id"], c["message"]) for c in report["checks"] if c["status"] != "pass"]
    deleted = next(c for c in report["checks"] if c["id"] == "client.session_deleted[sparse-reward+flaky-5xx]")
    assert deleted["measured"]["sessions"] == 4 and deleted["measured"]["pass"] == 4


def test_a_case_nobody_played_is_a_skip_that_says_so_and_fails_with_strict(tmp_path):
    for strict, expected in ((False, 0), (True, 1)):
        report_path = tmp_path / f"hosted-{strict}.json"
        server = start_hosted(["echo", "pick"], duration=12, json_report=report_path, strict=strict)
        play(next(e for e in manifest(server) if e["case"] == "echo"), reference_command())
        if strict:  # the run also ends on SIGTERM (a trainer's job stopped), with the same report
            server.process.send_signal(signal.SIGTERM)
        code, report = finished(server, report_path)
        assert code == expected
        unplayed = [c for c in report["checks"] if c["id"].endswith("[pick]")]
        assert unplayed and all(c["status"] == "skip" and "nobody played this case" in c["message"] for c in unplayed)
        assert all(c["status"] == "pass" for c in report["checks"] if c["id"].endswith("[echo]"))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["check-client", "--hosted", "--client-cmd", "x"], "give --hosted or --client-cmd, not both"),
        (["check-client", "--client-cmd", "x", "--duration", "5"], "belong to --hosted"),
        (["check-client", "--hosted", "--cases", "nope"], "unknown client case 'nope'"),
    ],
)
def test_usage_errors_exit_2_naming_the_fix(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


# -- in process: routes and prefixes ------------------------------------------------------------------------
async def _in_process(cases: list, body) -> Any:  # type: ignore[no-untyped-def]
    server = HostedServer([get_case(c) if isinstance(c, str) else c for c in cases])
    inbox: asyncio.Queue = asyncio.Queue()
    outbox: asyncio.Queue = asyncio.Queue()
    lifespan = asyncio.create_task(server({"type": "lifespan"}, inbox.get, outbox.put))
    await inbox.put({"type": "lifespan.startup"})
    assert (await outbox.get())["type"] == "lifespan.startup.complete"
    server.assign("hosted", [9000 + i for i in range(len(cases) + 1)])  # the manifest's port, then a port per case
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=server), base_url="http://hosted:9001") as http:
            return await body(server, http)
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        await outbox.get()
        await lifespan


def test_each_case_is_served_on_its_own_port():
    async def body(server: HostedServer, http: httpx.AsyncClient) -> None:
        listed = (await http.get("http://hosted:9000" + CASES_PATH)).json()
        assert [(e["case"], e["url"]) for e in listed] == [("echo", "http://hosted:9001"), ("two-envs", "http://hosted:9002")]
        assert (await http.get("http://hosted:9001/echo/tools")).json()["tools"][0]["name"] == "echo"
        assert (await http.get("http://hosted:9002/list_environments")).json() == ["two-envs-decoy", "two-envs"]
        moved = await http.get("http://hosted:9001/tools")  # no environment: 308 to the case's default one
        assert moved.status_code == 308 and moved.headers["location"] == "/echo/tools"
        assert (await http.get("http://hosted:9000/health")).status_code == 200
        elsewhere = await http.get("http://hosted:9000/echo/tools")
        assert elsewhere.status_code == 404 and CASES_PATH in elsewhere.json()["detail"]

    asyncio.run(_in_process(["echo", "two-envs"], body))


def test_contract_lines_name_their_session_when_a_case_has_several():
    async def body(server: HostedServer, http: httpx.AsyncClient) -> None:
        sids = []
        for _ in range(2):
            created = await http.post("/create_session")
            sids.append(created.text.split("data: ")[1].split()[0])
            await http.post("/create", headers={protocol.SESSION_HEADER: sids[-1]}, json={"env_name": "echo", "split": "train", "index": 0})
        line = '{"tool": "echo", "text": "x", "reward": null, "finished": false}'
        bare = await http.post("/_orsbench/out", content=line)
        assert bare.status_code == 400 and protocol.SESSION_HEADER in bare.json()["detail"]
        stranger = await http.post("/_orsbench/out", content=line, headers={protocol.SESSION_HEADER: "nobody"})
        assert stranger.status_code == 404
        named = await http.post("/_orsbench/out", content=line, headers={protocol.SESSION_HEADER: sids[0]})
        assert named.status_code == 200 and named.json() == {"session": sids[0], "lines": 1}
        assert (await http.get("/_orsbench/out")).status_code == 405
        report = (await http.get("/_orsbench/report")).json()
        assert {c["id"] for c in report["checks"]} >= {"client.env_name[echo]", "client.out_valid[echo]"}

    asyncio.run(_in_process(["echo"], body))


def test_a_session_the_engines_reaper_takes_ends_there_and_was_never_deleted():
    import dataclasses

    case = dataclasses.replace(get_case("echo"), knobs=(("ttl", 0.3), ("reaper_interval", 0.05)))

    async def body(server: HostedServer, http: httpx.AsyncClient) -> None:
        created = await http.post("/create_session")
        sid = created.text.split("data: ")[1].split()[0]
        await http.post("/create", headers={protocol.SESSION_HEADER: sid}, json={"env_name": "echo", "split": "train", "index": 0})
        await asyncio.sleep(1.5)  # the TTL, the reaper, a sweep
        graded = server.cases["echo"].graded
        assert [g.ended for g in graded] == ["reaped by the server, idle past its 0.3 s TTL"]
        deleted = next(r for r in graded[0].results if r.id == "client.session_deleted")
        assert deleted.status.value == "fail"

    asyncio.run(_in_process([case], body))


def test_sessions_a_check_could_not_judge_are_counted_with_the_reason():
    """Issue 37: under load 41 of 1,000 sessions got no verdict from three checks and nothing said so. A session
    that never sent ``/create`` gives the checks reading it nothing to judge: counted per check, with why."""

    async def body(server: HostedServer, http: httpx.AsyncClient) -> None:
        entry = (await http.get("http://hosted:9000" + CASES_PATH)).json()[0]
        full = (await http.post("/create_session")).text.split("data: ")[1].split()[0]
        headers = {protocol.SESSION_HEADER: full}
        await http.post("/create", headers=headers, json={"env_name": "echo", "split": entry["split"], "index": entry["index"]})
        await http.get("/echo/prompt", headers=headers)
        for call in entry["script"]["calls"]:
            await http.post("/echo/call", headers=headers, json={"name": call["tool"], "input": call["input"]})
        await http.post("/delete", headers=headers)
        bare = (await http.post("/create_session")).text.split("data: ")[1].split()[0]
        await http.post("/delete", headers={protocol.SESSION_HEADER: bare})  # never sent /create
        await asyncio.sleep(0.1)
        hosted = server.cases["echo"]
        assert len(hosted.graded) == 2
        ungraded = hosted.ungraded()
        assert ungraded, "the session without /create got a verdict from every check that judged the full one"
        for check_id, missing in ungraded.items():
            assert missing["sessions"] == 1 and sum(missing["why"].values()) == 1, (check_id, missing)
            (why,) = missing["why"]
            assert "nothing the check reads (the session ended: deleted)" in why or "not judged" in why, why
        summary = server.summary()["echo"]
        assert summary["sessions"] == 2 and summary["ungraded"] == ungraded
        report = {r.id: r for r in server.report(final=True).results}
        for check_id in ungraded:
            result = report[f"{check_id}[echo]"]
            assert result.measured["not_judged"] == 1 and "1 of 2 sessions not judged" in result.message, result.message

    asyncio.run(_in_process(["echo"], body))
