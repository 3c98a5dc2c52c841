"""One verdict you can trust (issue 34): one record of a client's run, the same from every front end.

* one client on one case through every front end that can run it — ``check-client --client-cmd``, hosted, the
  proxy, the matrix, ``orsbench clients URL`` — gets ONE verdict, and the same rules listed beside it;
* the false verdicts of the last wave, each shown false no more: ``recover`` with every check passing works; a
  client that stops after 1 call of several without env_name does not; hosted mode never passes
  ``client.script_followed`` on 0 calls nor shows a pass for a report it never got; the proxy holds a missing
  ``env_name`` as ``clients URL`` does (a warning naming the pinned defect, not exit 1); a defect is named only
  where its check failed; an empty player episode is said once ("nothing to replay"), not blamed on each client.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from orsbench.clientcheck import check_client, get_case
from orsbench.clientcheck.cases import Case
from orsbench.clientcheck.hosted import CASES_PATH
from orsbench.clientcheck.reference import command as reference_command
from orsbench.clients.targets import CLIENT_TARGETS
from orsbench.config import ServerConfig
from orsbench.servers.launch import serve, start, start_hosted, start_proxy
from orsbench.verdict import Finding, Judgement, Verdict

from test_check_client import SLACK_S, faulty  # noqa: E402  (tests/ is on sys.path)

#: Seconds a hosted run may take to end by itself once its client is done.
END_S = 60.0


def _play(entry: dict[str, Any], url: str, command: str, *, post: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``command`` under the adapter contract for a case (``entry``: its manifest entry), pointed at ``url``;
    ``post``: the hosted case URL its contract lines are then posted to."""
    with tempfile.TemporaryDirectory() as tmp:
        script, out = Path(tmp, "script.json"), Path(tmp, "out.jsonl")
        script.write_text(json.dumps(entry["script"]))
        out.touch()
        env = {
            **os.environ,
            "ORSBENCH_URL": url, "ORSBENCH_ENV": entry["env"], "ORSBENCH_SPLIT": entry["split"], "ORSBENCH_INDEX": str(entry["index"]),
            "ORSBENCH_SCRIPT": str(script), "ORSBENCH_OUT": str(out), "ORSBENCH_SECRETS": json.dumps(entry["secrets"]),
            "OPENREWARD_API_URL": url, "OPENREWARD_SESSION_URL": url, "OPENREWARD_API_KEY": "unused",
            "OPENREWARD_DISABLE_UPDATE_CHECK": "1", "HF_HUB_OFFLINE": "1", "INSPECT_LOG_DIR": str(Path(tmp, "logs")),
        }  # fmt: skip
        done = subprocess.run(command, shell=True, env=env, capture_output=True, text=True, timeout=SLACK_S)
        if post is not None:
            posted = httpx.post(post + "/_orsbench/out", content=out.read_text(), timeout=30)
            assert posted.status_code == 200, posted.text
    return done


def _entry(case: Case, env: str) -> dict[str, Any]:
    return {"script": case.script.contract_json(), "env": env, "split": case.split, "index": case.index, "secrets": dict(case.secrets)}


# -- the front ends, each giving the one judgement's JSON ---------------------------------------------------
def via_check_client(command: str, case: str) -> dict[str, Any]:
    report = check_client(command, [get_case(case)], timeout=SLACK_S)
    [judged] = report.cases
    return judged.to_json()


def via_hosted(command: str, case: str, tmp: Path, *, post: bool = True, deadline: float = SLACK_S, strict: bool = False) -> tuple[int, dict[str, Any]]:
    path = tmp / "hosted.json"
    server = start_hosted([case], deadline=deadline, json_report=path, strict=strict)
    try:
        [entry] = httpx.get(server.url + CASES_PATH, timeout=30).json()
        _play(entry, entry["url"], command, post=entry["url"] if post else None)
        code = server.process.wait(END_S + deadline)
    finally:
        server.stop()
    return code, json.loads(path.read_text())


def via_proxy(command: str, case: str, tmp: Path) -> dict[str, Any]:
    chosen = get_case(case)
    path = tmp / "proxy.json"
    with serve(chosen.scenario, config=chosen.config(), params=dict(chosen.params)) as upstream:
        proxy = start_proxy(upstream.url, json_report=path)
        try:
            _play(_entry(chosen, upstream.env_name), proxy.url, command)
        finally:
            proxy.stop()
    return json.loads(path.read_text())


def via_clients_url(scenario: str, *, command: str | None = None, target: str | None = None) -> Any:
    from orsbench.clients import live

    server = start(scenario)
    try:
        result = live.play_on_url(server.url, clients=[target] if target else [], commands=[command] if command else [], timeout=60)
    finally:
        server.stop()
    [row] = result.rows
    return row


def via_matrix(target: str, scenario: str) -> Any:
    from orsbench.clientcheck.episodes import script
    from orsbench.clients import cells as C
    from orsbench.clients.matrix import cell_result
    from orsbench.clients.run import ClientRun

    with serve(scenario, config=ServerConfig(request_log=True)) as server:
        outcome = ClientRun(target, server, script(scenario), 60).finish()
    return cell_result(C.Cell(target, "mock", scenario), outcome.verdict, outcome)


# -- one client, one case, every front end: one verdict -------------------------------------------------------
@pytest.mark.skipif(not CLIENT_TARGETS["openreward"].installed, reason="the openreward SDK is not installed")
def test_the_openreward_sdk_on_echo_gets_one_verdict_from_every_front_end(tmp_path):
    """The SDK opens its session by name (no env_name): a rule broken beside the verdict, never a different word."""
    command = f"{sys.executable} -m orsbench.clients.adapter openreward"
    direct = via_check_client(command, "echo")
    code, hosted = via_hosted(command, "echo", tmp_path)
    proxied = via_proxy(command, "echo", tmp_path)
    row = via_clients_url("echo", target="openreward")
    cell = via_matrix("openreward", "echo")
    [hosted_case], [proxied_case] = hosted["cases"], proxied["cases"]
    words = {
        "check-client": direct["words"],
        "hosted": hosted_case["words"],
        "proxy": proxied_case["words"],
        "clients URL": str(row.verdict),
        "matrix": cell.words,
    }
    assert set(words.values()) == {"works"}, words
    # The same rule, listed beside the verdict everywhere, and pinned where the front end knows the client.
    for rules in (direct["rules"], hosted_case["rules"], proxied_case["rules"], list(row.rules), cell.rules):
        assert "client.env_name" in rules, words
    assert row.rules["client.env_name"] == "env-name-not-sent" and cell.rule_defects["client.env_name"] == "env-name-not-sent"
    assert code == 0 and proxied["exit_code"] == 0  # one rule: a warning where the default environment is the case's
    env_name = next(c for c in proxied["checks"] if c["id"] == "client.env_name")
    assert env_name["status"] == "warn" and "env-name-not-sent" in env_name["message"], env_name


def test_a_client_that_leaves_its_session_open_fails_silently_from_every_front_end(tmp_path):
    command = faulty("no-delete")
    direct = via_check_client(command, "echo")
    _, hosted = via_hosted(command, "echo", tmp_path, deadline=8)
    proxied = via_proxy(command, "echo", tmp_path)
    row = via_clients_url("echo", command=command)
    words = {
        "check-client": direct["words"],
        "hosted": hosted["cases"][0]["words"],
        "proxy": proxied["cases"][0]["words"],
        "clients URL": row.words,
    }
    assert set(words.values()) == {"fails silently"}, words
    for problems in (direct["problems"], hosted["cases"][0]["problems"], proxied["cases"][0]["problems"], row.problems):
        assert problems[0].startswith("client.session_deleted: "), problems


def test_the_reference_client_works_from_every_front_end_that_runs_a_command(tmp_path):
    command = reference_command()
    direct = via_check_client(command, "echo")
    code, hosted = via_hosted(command, "echo", tmp_path)
    proxied = via_proxy(command, "echo", tmp_path)
    row = via_clients_url("echo", command=command)
    assert [direct["words"], hosted["cases"][0]["words"], proxied["cases"][0]["words"], row.words] == ["works"] * 4
    assert code == 0 and proxied["exit_code"] == 0 and not direct["rules"] and not row.rules
    assert hosted["cases"][0]["unseen"] is None and proxied["cases"][0]["unseen"].startswith("judged from its traffic alone")


# -- the false verdicts, each shown false no more ---------------------------------------------------------------
def test_recover_with_every_check_passing_works():
    """The client reports the refused first call and plays on to the winning one: what a correct client does."""
    report = check_client(reference_command(), [get_case("recover")], timeout=SLACK_S)
    assert not [r for r in report.results if r.status.value in ("fail", "error", "warn")], report.results
    [judged] = report.cases
    assert (judged.words, judged.error, judged.because) == ("works", None, None), judged


def test_a_client_stopping_after_one_call_without_env_name_does_not_work():
    """Completion is judged whether or not a rule failed: it used to be skipped whenever client.env_name failed."""
    report = check_client(faulty("drop-env-name-stop-early"), [get_case("sparse-reward")], timeout=SLACK_S)
    [judged] = report.cases
    assert judged.verdict is not Verdict.WORKS, judged
    assert judged.problems[0].check == "client.episode_completed" and "client.env_name" in judged.rules, judged
    assert "stopped after 1 of" in judged.problems[0].message, judged


def test_hosted_never_passes_script_followed_on_no_call(tmp_path):
    """A client that gave up at its first 429 made none of the scripted calls: not a pass, and not "works"."""
    _, report = via_hosted(faulty("give-up"), "sparse-reward+rate-limit", tmp_path, post=False, deadline=8)
    followed = next(c for c in report["checks"] if c["id"].startswith("client.script_followed["))
    assert followed["status"] != "pass", followed
    [judged] = report["cases"]
    assert judged["verdict"] != "works" and judged["unseen"].startswith("the client posted no report"), judged
    assert "scripted call(s) in a case a correct client plays to its end" in " ".join(judged["problems"]), judged


def test_hosted_never_shows_a_pass_for_a_report_the_client_did_not_post(tmp_path):
    """A client that took ``true`` for a reward and posted nothing: its report's checks are skips that say so (and
    --strict fails on them), never green rows."""
    code, report = via_hosted(faulty("bool-reward"), "echo+reward-bool", tmp_path, post=False, deadline=8, strict=True)
    reward = next(c for c in report["checks"] if c["id"].startswith("client.reward_as_sent["))
    assert reward["status"] == "skip" and "the client posted no report" in reward["message"], reward
    assert not [c for c in report["checks"] if c["id"].startswith(("client.text_verbatim", "client.episode_completed")) and c["status"] == "pass"]
    assert code == 1  # --strict: a required check not judged


def test_a_missing_env_name_is_held_by_one_rule_with_one_exit_code_on_every_front_end(tmp_path):
    """Where the server's default environment is the one the case plays (echo), a /create without env_name is the same
    episode: a warning naming the pinned defect, exit 0, from check-client, hosted, the proxy and `clients URL` alike.
    Where the default is another environment (two-envs), the episode ran in the wrong one: a failure, exit 1."""
    command = faulty("drop-env-name")
    for case, status, exit_code in (("echo", "warn", 0), ("two-envs", "fail", 1)):
        direct = check_client(command, [get_case(case)], timeout=SLACK_S)
        code, hosted = via_hosted(command, case, tmp_path)
        statuses = {direct.result(f"client.env_name[{case}]").status.value, next(c["status"] for c in hosted["checks"] if c["id"] == f"client.env_name[{case}]")}
        assert statuses == {status} and (direct.exit_code, code) == (exit_code, exit_code), (case, statuses, direct.exit_code, code)
        if status == "warn":
            assert "pinned upstream defects that do this: env-name-not-sent" in direct.result(f"client.env_name[{case}]").message
            assert direct.cases[0].words == "works" and direct.cases[0].rules == ("client.env_name",), direct.cases[0]


def test_the_proxy_holds_a_missing_env_name_as_clients_url_does(tmp_path):
    report = via_proxy(faulty("drop-env-name"), "echo", tmp_path)
    env_name = next(c for c in report["checks"] if c["id"] == "client.env_name")
    assert env_name["status"] == "warn" and "pinned upstream defects that do this: env-name-not-sent" in env_name["message"], env_name
    assert report["exit_code"] == 0, [(c["id"], c["status"]) for c in report["checks"] if c["status"] == "fail"]
    [judged] = report["cases"]
    assert judged["words"] == "works" and judged["rules"] == ["client.env_name"], judged
    row = via_clients_url("echo", command=faulty("drop-env-name"))
    assert row.words == "works" and list(row.rules) == ["client.env_name"]


def test_a_defect_is_named_only_where_its_check_failed():
    """chunk-lstrip is predicted wherever a long spaced result may be chunked; a run names it only where the text
    the client showed differed (client.text_verbatim), not where another check of the same effect failed."""
    from orsbench.clients.live import named_defects
    from orsbench.upstream import defects as D

    cell = D.CellFacts(client="openreward", server="url", scenario="x", spaced_long_result=True)
    assert "chunk-lstrip" in [d.id for d in D.shown_in(cell)]
    other = Judgement(Verdict.FAILS_SILENTLY, problems=(Finding("client.reward_as_sent", "reward sent 0.0, reported null"),))
    assert "chunk-lstrip" not in [d.id for d in named_defects(other, cell, hung=False)]
    shown = Judgement(Verdict.FAILS_SILENTLY, problems=(Finding("client.text_verbatim", "the text differs at character 4096"),))
    assert "chunk-lstrip" in [d.id for d in named_defects(shown, cell, hung=False)]


def test_an_empty_player_episode_is_nothing_to_replay_not_a_failing_client():
    """Every call of the player's episode failed on the server: no client is judged on "0 of 0 calls"."""
    from orsbench.clients import live
    from orsbench.clientcheck.results import NOT_PLAYED

    server = start("echo", config=ServerConfig(faults=("call-end-missing",)))
    try:
        result = live.play_on_url(server.url, clients=[], commands=[reference_command()], timeout=30)
    finally:
        server.stop()
    [row] = result.rows
    assert row.verdict == NOT_PLAYED and row.why.startswith("nothing to replay"), row
    assert result.notes and result.notes[0].startswith("nothing to replay"), result.notes


def test_an_environment_whose_every_call_raises_is_named_in_the_one_note():
    """A real GSM8K environment (math_verify's signal.alarm in the SDK's worker thread) raised on every call: nothing
    to replay, and the note names the environment's own error, so the user reads whose it is."""
    from orsbench.clients import live
    from orsbench.clientcheck.results import NOT_PLAYED
    from orsbench.servers.user_app import AppTarget

    server = start(AppTarget.parse("tests/envs/always_raises.py:AlwaysRaises"))
    try:
        result = live.play_on_url(server.url, clients=[], commands=[reference_command()], timeout=30)
    finally:
        server.stop()
    [row] = result.rows
    assert row.verdict == NOT_PLAYED and row.why.startswith("nothing to replay"), row
    assert "the environment's own error: submit(" in row.why and "grader crashed" in row.why, row.why


def test_one_record_no_strings_parsed_back():
    """The verdict travels typed: findings are (check, message), failed checks are read from them, never split."""
    judged = Judgement(
        Verdict.FAILS_CLEARLY,
        problems=(Finding("client.episode_completed", "stopped: see client.x: y"),),
        rules=("client.env_name",),
        error="ToolFailed: boom",
    )
    assert judged.failed_checks == ["client.episode_completed", "client.env_name"]
    assert judged.because == "ToolFailed: boom" and not judged.right and judged.words == "fails clearly"
    assert Judgement(Verdict.FAILS_CLEARLY, Verdict.FAILS_CLEARLY).words == "fails clearly (right)"
    assert Judgement(Verdict.WORKS).right and Judgement(Verdict.WORKS).words == "works"


def test_every_client_failing_on_the_same_environment_error_names_the_environment():
    """The player's second call raised (``tool-raises``) and was left out of the replay; every client's second call
    raises in turn: the note says it is the environment's error, once, instead of two failing clients."""
    from orsbench.clients import live
    from orsbench.scenarios import suite_params

    server = start("sparse-reward", config=ServerConfig(faults=("tool-raises",)), params=suite_params("sparse-reward"))
    try:
        result = live.play_on_url(server.url, clients=[], commands=[reference_command(), reference_command()], timeout=30)
    finally:
        server.stop()
    assert [row.words for row in result.rows] == ["fails clearly", "fails clearly"], result.rows
    [note] = result.notes
    assert note.startswith("every client failed on the same error of the environment: ") and "failed on the server" in note, note
