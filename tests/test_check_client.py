"""``orsbench check-client``: the reference client passes every case; each faulty client fails its one check.

The faulty clients (``tests/clients/faulty.py``) are the reference adapter
with one rule broken each; four more hang, crash, flood the server or write
garbage. Each must get a clear verdict for its case, and none may stall a run.
"""

from __future__ import annotations

import base64
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from orsbench import protocol
from orsbench.checks.model import Status
from orsbench.cli import main
from orsbench.clientcheck import cases, check_client, get_case, grade, run_case, runner
from orsbench.clientcheck.contract import expand, parse_line
from orsbench.clientcheck.reference import command as reference_command
from orsbench.config import ServerConfig
from orsbench.servers.launch import serve

FAULTY = Path(__file__).parent / "clients" / "faulty.py"
#: Deadline for clients that end by themselves: generous, so a busy machine does not turn slowness into a hang.
SLACK_S = 90.0


def faulty(fault: str) -> str:
    return shlex.join([sys.executable, str(FAULTY), fault])


def failing(results) -> set[str]:  # type: ignore[no-untyped-def]
    return {r.id for r in results if r.status in (Status.FAIL, Status.ERROR)}


# -- the contract ------------------------------------------------------------------------------


def test_placeholders_are_shell_quoted_and_other_braces_left_alone():
    values = {"ORSBENCH_URL": "http://127.0.0.1:1", "ORSBENCH_ENV": "my env", "ORSBENCH_SPLIT": "train",
              "ORSBENCH_INDEX": "0", "ORSBENCH_SCRIPT": "/t/s.json", "ORSBENCH_OUT": "/t/o; rm -rf /"}  # fmt: skip
    assert expand("c --env {env} --out {out} {port} ${HOME} '{\"a\": 1}'", values) == (
        "c --env 'my env' --out '/t/o; rm -rf /' {port} ${HOME} '{\"a\": 1}'"
    )


@pytest.mark.parametrize(
    "raw, problem",
    [
        ('{"tool": "t", "text": "x", "reward": true, "finished": true}', '"reward" is true'),
        ('{"tool": "t", "text": "x", "reward": null}', '"finished" is missing'),
        ('{"tool": "t", "text": 3, "reward": 1, "finished": false}', '"text" is missing or not a string'),
        ('{"tool": "t", "text": "x", "finished": false}', '"reward" is missing'),
        ("[1]", "a JSON list"),
        ("OK", "not JSON"),
    ],
)
def test_a_line_breaking_the_contract_says_how(raw, problem):
    line = parse_line(1, raw)
    assert not line.valid and any(problem in p for p in line.problems), line.problems


def test_valid_lines():
    assert parse_line(1, '{"tool": "t", "text": "", "reward": null, "finished": false, "extra": 1}').valid
    assert parse_line(2, '{"error": "boom"}').is_error


# -- the request log -----------------------------------------------------------------------------


def test_the_request_log_keeps_secret_names_never_values():
    header = base64.b64encode(json.dumps({"TOKEN": {"value": "s3cr3t-value"}}).encode()).decode()
    with serve("echo", config=ServerConfig(request_log=True)) as server:
        sid = httpx.post(server.url + protocol.CREATE_SESSION).text.split("data: ")[1].split("\r\n")[0]
        created = httpx.post(
            server.url + protocol.CREATE,
            headers={protocol.SESSION_HEADER: sid, protocol.SECRETS_HEADER: header, protocol.API_KEY_HEADER: "key-value"},
            json={"env_name": "echo", "split": "train", "index": 0},
        )
        assert created.status_code == 200
        text = httpx.get(server.url + protocol.REQUEST_LOG).text
    log = json.loads(text)
    create = next(e for e in log["entries"] if e["path"] == protocol.CREATE)
    assert create["secret_names"] == ["TOKEN"] and create["status"] == 200 and create["complete"]
    assert "s3cr3t-value" not in text and header not in text and "key-value" not in text
    assert log["total"] == 2


# -- the reference client --------------------------------------------------------------------------


def test_the_reference_client_passes_every_case():
    report = check_client(reference_command(), cases(), timeout=SLACK_S, jobs=2)
    assert report.exit_code == 0, [(r.id, r.message) for r in report.results if r.status is not Status.PASS]
    assert not [r for r in report.results if r.status is not Status.PASS]
    judged = {r.id.split("[")[0] for r in report.results}
    assert {"client.resume_by_task_id", "client.retry_after", "client.no_4xx_retry", "client.failure_as_error"} <= judged
    assert {"client.secret_not_on_cmdline", "client.deletes_on_sigterm"} <= judged


# -- one broken rule, one failing check -------------------------------------------------------------


#: (faulty client, case, the one check it fails): each broken rule fails exactly the check that names it.
#: Faulty clients whose one broken rule a check reading only the traffic names: the same table grades them in hosted
#: mode (tests/test_hosted.py) and through the proxy (tests/test_proxy_clients.py) — (faulty client, case, check).
TRAFFIC_RULE_BROKEN = [
    ("no-delete", "echo", "client.session_deleted"),
    ("retry-4xx", "echo+missing-task", "client.no_4xx_retry"),
    ("ignore-retry-after", "sparse-reward+rate-limit", "client.retry_after"),
    ("no-resume", "sparse-reward+stream-drop", "client.resume_by_task_id"),
    # a missing env_name fails where the server's default environment is another one (on echo it is a warning)
    ("drop-env-name", "two-envs", "client.env_name"),
    ("call-after-finished", "echo", "client.stops_at_finished"),
    ("no-secrets", "secrets", "client.secrets"),
]

ONE_RULE_BROKEN = [
    ("no-resume", "sparse-reward+stream-drop", "client.resume_by_task_id"),
    ("strip-chunks", "schema-zoo", "client.text_verbatim"),
    ("retry-4xx", "echo+missing-task", "client.no_4xx_retry"),
    ("ignore-retry-after", "sparse-reward+rate-limit", "client.retry_after"),
    ("no-delete", "echo", "client.session_deleted"),
    ("call-after-finished", "echo", "client.stops_at_finished"),
    ("skip-first-call", "sparse-reward", "client.script_followed"),
    ("bool-reward", "echo+reward-bool", "client.reward_as_sent"),
    ("error-as-text", "sparse-reward+tool-raises", "client.failure_as_error"),
    ("garbage", "sparse-reward", "client.out_valid"),
    # the hazard cases (docs/protocol.md §13)
    ("rerun-uncut", "sparse-reward+cut-before-task-id", "client.tool_runs"),
    ("stop-on-refusal", "recover", "client.episode_completed"),
    ("no-secrets", "secrets", "client.secrets"),
    ("first-block-only", "images", "client.text_verbatim"),
    ("drop-env-name", "two-envs", "client.env_name"),
    ("retry-4xx", "sparse-reward+credits-402", "client.no_4xx_retry"),
    # given the server's URL alone, a client that looks for the SDK's variable instead finds no server
    ("sdk-url-only", "sparse-reward+url-only", "client.episode_completed"),
    # the hazards of docs/protocol.md §13.9+
    ("drop-nulls", "schema-edges", "client.script_followed"),
    ("clamp-rewards", "reward-range", "client.reward_as_sent"),
    ("null-as-zero", "reward-range", "client.reward_as_sent"),
    ("nan-as-null", "sparse-reward+reward-nan", "client.reward_as_sent"),
    # §13.12: a refused listing taken for an empty one, or retried; §13.13: the status read from the error text
    ("empty-on-402", "sparse-reward+credits-402-discovery", "client.failure_as_error"),
    ("retry-listing-402", "sparse-reward+credits-402-discovery", "client.no_4xx_retry"),
    ("status-from-text", "sparse-reward+rate-limit-400", "client.episode_completed"),
    ("status-from-text", "sparse-reward+missing-task-429", "client.no_4xx_retry"),
    # the script goes on past finished; the model's finishing reply carries one more call (§13.14)
    ("plays-every-call", "sparse-reward+script-past-finished", "client.stops_at_finished"),
    ("whole-reply", "sparse-reward+finish-mid-reply", "client.stops_at_finished"),
    ("stale-finished", "sparse-reward+two-runs", "client.session_per_run"),
    ("mean-over-scored", "pick+second-setup-fails", "client.aggregate_counts_failures"),
    # docs/protocol.md §14.4: the client's process tree is read while the secrets case runs
    ("secret-on-argv", "secrets", "client.secret_not_on_cmdline"),
]


#: What else a broken rule does to the episode, judged on its own: completion is judged whether or not a rule failed
#: (issue 34) — without its secret the environment refuses the session, so the episode is not played.
CONSEQUENCES = {("no-secrets", "secrets"): {"client.episode_completed"}}


@pytest.mark.parametrize("fault, case, check", ONE_RULE_BROKEN)
def test_a_faulty_client_fails_exactly_the_check_naming_its_rule(fault, case, check):
    results = grade(run_case(faulty(fault), get_case(case), timeout=SLACK_S))
    assert failing(results) == {check, *CONSEQUENCES.get((fault, case), ())}, [(r.id, r.status.value, r.message) for r in results]
    found = next(r for r in results if r.id == check)
    assert found.spec.startswith(("docs/protocol.md §12.", "docs/protocol.md §13.", "docs/protocol.md §14.")) and found.remediation
    if fault == "no-resume":  # the evidence: the cut stream, then the fresh call the client sent instead of a resume
        assert len(found.evidence) == 2 and "task_id" not in found.evidence[1]["request_body"], found.evidence
    if fault == "strip-chunks":  # the evidence is shown around the first difference, not cut exactly where the texts part
        diff = found.measured["difference"]
        assert diff["at"] == found.measured["first_difference"] > 0 and len(diff["before"]) == min(80, diff["at"])
        assert diff["expected"] != diff["actual"] and diff["expected"][0] != diff["actual"][0]
        assert "after '" in found.message and "the environment sent '" in found.message and "the client returned '" in found.message


@pytest.mark.parametrize("variant, convention", [("episode-reward-sum", "sum"), ("episode-reward-last", "last non-null")])
def test_the_report_names_the_reward_convention_a_client_used(variant, convention):
    results = grade(run_case(faulty(variant), get_case("dense-reward"), timeout=SLACK_S))
    assert not failing(results)
    found = next(r for r in results if r.id == "client.reward_convention")
    assert found.measured["convention"] == convention and found.measured["sum"] != found.measured["last non-null"]


def test_a_client_that_reads_a_refused_listing_and_reports_it_is_right():
    """§13.12: under credits-402-discovery a correct client that reads a listing ends on the 402, reported (and is right);
    the reference client, which reads none, plays on (test_the_reference_client_passes_every_case)."""
    from orsbench.clientcheck.judgement import judge

    run = run_case(faulty("reads-listings"), get_case("sparse-reward+credits-402-discovery"), timeout=SLACK_S)
    results = grade(run)
    assert not failing(results), [(r.id, r.status.value, r.message) for r in results]
    judgement = judge(run, results)
    assert judgement.right and judgement.words == "fails clearly (right)" and "402" in (judgement.error or "")
    assert next(r for r in results if r.id == "client.failure_as_error").status is Status.PASS


def test_an_episode_reward_of_neither_convention_is_warned():
    results = grade(run_case(faulty("episode-reward-mean"), get_case("dense-reward"), timeout=SLACK_S))
    found = next(r for r in results if r.id == "client.reward_convention")
    assert found.status is Status.WARN and "neither the sum" in found.message, found.message


#: Client checks shown failing by a process that misbehaves (the tests below: hang, crash, flood) and the
#: warning above, beside those ONE_RULE_BROKEN shows.
SHOWN_ELSEWHERE = {
    "client.exits_in_time",
    "client.exit_status",
    "client.request_budget",
    "client.reward_convention",
    "client.deletes_on_sigterm",  # a recommended check: it warns (test_a_client_ended_mid_call_...)
}


def test_every_client_check_is_shown_to_fail_somewhere():
    """Issue 24: a check that no test can make fail is no check."""
    from orsbench.clientcheck.checks import CLIENT_CHECKS

    shown = {check for _, _, check in ONE_RULE_BROKEN} | SHOWN_ELSEWHERE
    assert set(CLIENT_CHECKS.load().names()) - shown == set(), "give each a faulty client in tests/clients/faulty.py"


def test_the_made_up_secret_reaches_the_environment_and_no_report(tmp_path):
    report = check_client(reference_command(), [get_case("secrets")], timeout=SLACK_S)
    assert report.exit_code == 0 and report.result("client.secrets[secrets]").status is Status.PASS
    secret = dict(get_case("secrets").secrets)
    text = json.dumps(report.to_json(), default=str)
    assert secret and not any(value in text for value in secret.values())


def test_the_command_line_check_is_skipped_where_no_proc_can_be_read(monkeypatch):
    """Linux's /proc only: elsewhere client.secret_not_on_cmdline says why it did not judge, never a pass."""
    from types import SimpleNamespace

    from orsbench.clientcheck import proctree
    from orsbench.clientcheck.checks import secret_not_on_cmdline

    monkeypatch.setattr(proctree, "UNAVAILABLE", "command lines are read from Linux's /proc; this is darwin")
    watch = proctree.ArgvWatch(1, {"TOKEN": "a-made-up-value"})
    watch.sample(force=True)
    outcome = secret_not_on_cmdline(SimpleNamespace(run=SimpleNamespace(argv=watch.seen())))
    assert outcome.status is Status.SKIP and "darwin" in outcome.message and watch.seen().samples == 0


@pytest.mark.parametrize("fault, killed", [("die-on-sigterm", False), ("ignore-sigterm", True)])
def test_a_client_ended_mid_call_is_graded_on_the_session_it_left(fault, killed):
    """docs/protocol.md §13.17: SIGTERM while the held call is in flight, SIGKILL 3 s later; the session left open is
    a warning (a client cannot clean up after SIGKILL; the server's TTL reaps it), listed beside the verdict."""
    from orsbench.clientcheck.judgement import judge

    run = run_case(faulty(fault), get_case("sparse-reward+sigterm-mid-call"), timeout=SLACK_S)
    results = grade(run)
    assert not failing(results), [(r.id, r.status.value, r.message) for r in results]
    found = next(r for r in results if r.id == "client.deletes_on_sigterm")
    assert found.status is Status.WARN and found.measured["left_open"] == 1 and found.measured["killed"] is killed, found.message
    assert "TTL" in found.message and "(reveal) got no answer" in found.message
    assert run.terminated is not None and (run.terminated.exited_after_s is None) is killed
    judgement = judge(run, results)
    assert judgement.words == "fails clearly (right)" and judgement.rules == ("client.deletes_on_sigterm",)


def test_a_hanging_client_is_stopped_at_its_deadline():
    began = time.monotonic()
    run = run_case(faulty("hang"), get_case("echo"), timeout=3)
    assert time.monotonic() - began < 3 + 60  # the deadline, the grace period, a server start and stop: not the hour it sleeps
    assert run.stopped_for == "deadline" and run.exit_code != 0 and 3 <= run.duration_s < 3 + 10
    assert failing(grade(run)) == {"client.exits_in_time"}


def test_a_crashing_client_is_a_crash_not_a_report():
    run = run_case(faulty("crash"), get_case("echo"), timeout=SLACK_S)
    results = grade(run)
    assert failing(results) == {"client.exit_status"}
    assert "the client fell over" in next(r for r in results if r.id == "client.exit_status").message


def test_a_flooding_client_is_stopped_as_a_request_storm(monkeypatch):
    monkeypatch.setattr(runner, "STORM_LIMIT", 150)
    run = run_case(faulty("flood"), get_case("echo"), timeout=SLACK_S)
    assert run.stopped_for == "request storm" and run.duration_s < SLACK_S
    assert failing(grade(run)) == {"client.exits_in_time", "client.request_budget"}


# -- the command line and pytest ---------------------------------------------------------------------


def test_the_cli_reports_a_faulty_client_with_exit_1_and_names_the_case(tmp_path, capsys):
    out = tmp_path / "report.json"
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    argv = ["check-client", "--client-cmd", faulty("drop-env-name"), "--cases", "two-envs", "--timeout", str(SLACK_S)]
    code = main([*argv, "--json", str(out), "--junit", str(tmp_path / "j.xml"), "--html", str(html), "--markdown", str(md)])
    assert code == 1
    assert 'id="check-client-env_name-two-envs" open' in html.read_text()  # the same report model, the same page
    assert "orsbench check-client: FAIL" in md.read_text() and "`client.env_name[two-envs]`" in md.read_text()
    report = json.loads(out.read_text())
    assert report["summary"]["failed_required"] == ["client.env_name[two-envs]"]
    assert 'name="client.env_name[two-envs]"' in (tmp_path / "j.xml").read_text()
    assert "client.env_name" in capsys.readouterr().out


def test_the_verdict_offers_no_flag_check_client_lacks(tmp_path, capsys):
    """A crash leaves the checks after it unjudged; the reports say so without pointing at a --strict it has not."""
    html = tmp_path / "r.html"
    assert main(["check-client", "--client-cmd", faulty("crash"), "--cases", "echo", "--timeout", str(SLACK_S), "--html", str(html)]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    verdict = out[-1]
    # The verdict leads with the crash (issue 27); the checks it left unjudged are listed above it.
    assert verdict.startswith("verdict: FAIL (exit 1) — client.exit_status (echo) failed: exited with status"), verdict
    assert any(line.startswith("required checks that did not run (") for line in out)
    assert "--strict" not in verdict
    page = html.read_text()
    assert "Required checks that did not run" in page and "--strict" not in page


def test_a_client_finding_carries_the_clients_error_line_and_stderr_tail(tmp_path, capsys):
    """Issue 27: ``client.episode_completed`` failed with no evidence; now every report shows the client's own words."""
    argv = ["check-client", "--client-cmd", faulty("give-up"), "--cases", "sparse-reward+rate-limit", "--timeout", str(SLACK_S), "-v"]
    html, junit, out = tmp_path / "r.html", tmp_path / "j.xml", tmp_path / "r.json"
    assert main([*argv, "--html", str(html), "--junit", str(junit), "--json", str(out)]) == 1
    terminal = capsys.readouterr().out
    found = next(c for c in json.loads(out.read_text())["checks"] if c["id"] == "client.episode_completed[sparse-reward+rate-limit]")
    assert found["status"] == "fail"
    # The message names the refused request and the client's error line; the evidence is the 429 itself.
    assert "(its last request, POST /create_session, was answered 429)" in found["message"]
    assert "the client reported: could not open the session: POST /create_session answered 429" in found["message"]
    assert found["evidence"] and found["evidence"][0]["status"] == 429
    client = found["client"]
    assert client["exit_code"] == 1 and client["errors"][0].startswith("could not open the session: POST /create_session answered 429")
    assert "give-up client: not retrying, giving up on this episode" in client["stderr_tail"]
    assert "client: exited 1; reported: could not open the session" in terminal
    assert "stderr| give-up client: not retrying, giving up on this episode" in terminal
    assert "give-up client: not retrying, giving up on this episode" in html.read_text()
    assert "client stderr (tail):\ngive-up client: POST /create_session answered 429" in junit.read_text()
    assert all("client" not in c for c in json.loads(out.read_text())["checks"] if c["status"] == "pass")


def test_a_clients_stderr_loses_the_cases_secret_before_it_reaches_a_finding():
    case = get_case("secrets")
    value = dict(case.secrets)[next(iter(dict(case.secrets)))]
    run = runner.CaseRun(case, case.script, "x", exit_code=1, stderr=f"Traceback ...\nKeyError: bad secret {value!r}\n")
    said = run.client_evidence()
    assert said is not None and value not in json.dumps(said) and "KeyError: bad secret" in said["stderr_tail"]
    assert runner.CaseRun(case, case.script, "x").client_evidence() is None  # no process ran: nothing to show


# -- docs/clients.md is enough to write a client (issue 27) ------------------------------------------------
CLIENTS_MD = Path(__file__).resolve().parents[1] / "docs" / "clients.md"


def _wire_section() -> tuple[str, str]:
    """docs/clients.md's wire summary (prose) and the client written from it (the code block)."""
    text = CLIENTS_MD.read_text()
    prose = text.split("## The wire in one page")[1].split("<!-- wire-client:start -->")[0]
    block = text.split("<!-- wire-client:start -->")[1].split("<!-- wire-client:end -->")[0]
    return prose, block.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_wire_summary_names_everything_a_client_sends_and_reads():
    prose, code = _wire_section()
    for constant in (protocol.CREATE_SESSION, protocol.CREATE, protocol.DELETE, f"/{{env}}/{protocol.PROMPT}", f"/{{env}}/{protocol.CALL}",
                     protocol.SESSION_HEADER, protocol.SECRETS_HEADER, protocol.RETRY_AFTER_HEADER, protocol.BACKEND_STATE_HEADER,
                     f"`{protocol.EVENT_TASK_ID}`", f"`{protocol.EVENT_CHUNK}`", f"`{protocol.EVENT_END}`", f"`{protocol.EVENT_ERROR}`",
                     '"task_id"', "4096", "Retry-After", "finished: true", "docs/protocol.md"):  # fmt: skip
        assert constant in prose, constant
    imports = set()
    for line in code.splitlines():
        if line.startswith("import "):
            imports |= {name.strip().split(".")[0] for name in line[len("import ") :].split(",")}
        elif line.startswith("from "):
            imports.add(line.split()[1].split(".")[0])
    assert imports == {"base64", "json", "math", "os", "sys", "time", "httpx"}, imports  # the standard library and httpx: no orsbench


def test_a_client_written_from_docs_clients_md_alone_passes_check_client(tmp_path):
    """The block is the summary made code: a client that knows only the page passes the cases that test each rule."""
    _, code = _wire_section()
    client = tmp_path / "client.py"
    client.write_text(code)
    picked = ["echo", "schema-zoo", "sparse-reward+stream-drop", "sparse-reward+rate-limit", "sparse-reward+cut-before-task-id",
              "echo+missing-task", "echo+reward-bool", "sparse-reward+tool-raises", "recover", "secrets"]  # fmt: skip
    report = check_client(shlex.join([sys.executable, str(client)]), [get_case(name) for name in picked], timeout=SLACK_S, jobs=2)
    assert report.exit_code == 0, [(r.id, r.message) for r in report.results if r.status is not Status.PASS]
    assert {r.id.split("[")[1].rstrip("]") for r in report.results} == set(picked)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["check-client"], "give the client command"),
        (["check-client", "--client-cmd", "x", "--cases", "nope"], "unknown client case 'nope'"),
        (["check-client", "--client-cmd", "x --token {secrets}"], "secrets never go on a command line"),
        (["check-client", "--client-cmd", "x", "--timeout", "0"], "must be greater than 0"),
    ],
)
def test_usage_errors_exit_2_naming_the_fix(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.slow  # two nested pytest sessions (~100 s under load); the cases themselves are graded by the tests above
def test_pytest_runs_each_case_as_a_test(tmp_path):
    def pytest_run(cmd: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                "--ors-client-cmd", cmd, "--ors-client-cases", "echo", "--ors-client-timeout", str(SLACK_S)]  # fmt: skip
        return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)

    good = pytest_run(reference_command())
    assert good.returncode == 0 and "1 passed" in good.stdout, good.stdout[-2000:]
    bad = pytest_run(faulty("no-delete"))
    assert bad.returncode == 1 and "client.session_deleted" in bad.stdout and "test_client_case[echo]" in bad.stdout


# -- a retry is the same request again ---------------------------------------------------------------


def _ping(sid: str, started: float, status: int) -> dict:
    headers = {"retry-after": "1"} if status == 503 else {}
    return {
        "method": "POST", "path": protocol.PING, "request_headers": {protocol.SESSION_HEADER.lower(): sid},
        "status": status, "headers": headers, "started_at": started, "ended_at": started + 0.001,
    }


@pytest.mark.parametrize(
    "second_sid, verdict",
    [("B", Status.PASS), ("A", Status.FAIL)],
    ids=["another-session-is-no-retry", "same-session-too-soon"],
)
def test_retry_after_judges_only_the_same_request_sent_again(second_sid: str, verdict: Status) -> None:
    """Seen under load with TRL: session B's ping 20 ms after session A's 503 was counted as A's early retry."""
    from orsbench.clientcheck.checks import Context, retry_after
    from orsbench.clientcheck.traffic import from_log, group

    traffic = group(from_log([_ping("A", 10.0, 503), _ping(second_sid, 10.02, 200), _ping("A", 11.2, 200)]))
    outcome = retry_after(Context(run=None, traffic=traffic))  # type: ignore[arg-type]
    assert outcome is not None and outcome.status is verdict, outcome


def test_retry_after_with_no_retry_is_a_skip_not_a_pass() -> None:
    """Issue 27: a client that never sent the request again was graded as having waited out Retry-After.
    Nothing was retried, so nothing was exercised: a skip that says so, never a pass."""
    from orsbench.clientcheck.checks import Context, retry_after
    from orsbench.clientcheck.traffic import from_log, group

    traffic = group(from_log([_ping("A", 10.0, 503), _ping("B", 10.5, 200)]))
    outcome = retry_after(Context(run=None, traffic=traffic))  # type: ignore[arg-type]
    assert outcome is not None and outcome.status is Status.SKIP, outcome
    assert "never sent the request again" in outcome.message


# -- a command the shell cannot run is the user's usage error, not a client bug (issue 27) -----------------------
@pytest.mark.parametrize(
    ("command", "fragment"),
    [
        ("pyhton my_adapter.py", "'pyhton' is not found on PATH (/bin/sh would exit 127)"),
        ("ORSBENCH_X=1 pyhton my_adapter.py", "'pyhton' is not found"),
        ("./no/such/adapter.sh", "'./no/such/adapter.sh' does not exist (/bin/sh would exit 127)"),
        ("{not_executable}", "is not executable (/bin/sh would exit 126)"),
    ],
)
def test_a_command_that_does_not_exist_or_cannot_run_is_a_usage_error(command, fragment, tmp_path, capsys):
    script = tmp_path / "adapter.sh"
    script.write_text("#!/bin/sh\nexit 0\n")  # no x bit
    started = time.monotonic()
    with pytest.raises(SystemExit) as exc:
        main(["check-client", "--client-cmd", command.replace("{not_executable}", str(script)), "--cases", "echo"])
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert fragment in err.strip().splitlines()[-1] and "Traceback" not in err
    assert time.monotonic() - started < 10  # said before any case server starts


def test_a_program_the_command_runs_that_is_missing_is_found_out_by_running_and_is_a_usage_error(capsys):
    """The shell finds ``sh``, but the program *it* runs is missing (exit 127, no request): exit 2 naming the
    command and the shell's own line — never graded as a client that fails every check (exit 1)."""
    command = "sh -c 'pyhton my_adapter.py'"
    with pytest.raises(SystemExit) as exc:
        main(["check-client", "--client-cmd", command, "--cases", "echo,pick"])
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]
    assert exc.value.code == 2, err
    assert "exited 127 before any request" in line and "pyhton" in line and repr(command) in line
    assert "verdict: FAIL" not in err


def test_the_url_only_case_takes_the_sdk_urls_out_of_the_clients_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Given the URL alone, a client cannot find the server by the SDK's variables, not even ones orsbench inherited."""
    monkeypatch.setenv(protocol.ENV_SESSION_URL, "http://127.0.0.1:9")
    shows = 'printf "%s|%s|%s" "${OPENREWARD_SESSION_URL-unset}" "${OPENREWARD_API_URL-unset}" "${ORSBENCH_URL:+given}" >&2; exit 3'
    url_only = run_case(shows, get_case("sparse-reward+url-only"), timeout=SLACK_S)
    assert url_only.stderr.strip() == "unset|unset|given", url_only.stderr
    usual = run_case(shows, get_case("sparse-reward"), timeout=SLACK_S)
    assert usual.stderr.strip() == f"{usual.url}|{usual.url}|given", usual.stderr


def test_the_sigterm_is_timed_when_it_is_sent_not_before_the_stats_that_called_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call that began while the stats were read (the one that moved the counter) began before the SIGTERM:
    timed before the read, ``sigterm_at`` made it look begun after, and ``held_calls`` left it to be judged as given up."""
    seen: list[float] = []

    def slow_stats(_server: object) -> dict[str, object]:
        time.sleep(0.05)  # the read under load; the held call starts meanwhile
        seen.append(time.monotonic())
        return {"requests": {"fault sigterm-mid-call": 1}}

    class Process:
        pid = 0

        def __init__(self) -> None:
            self.signals: list[int] = []

        def poll(self) -> None:
            return None

        def signal_group(self, sig: int) -> None:
            self.signals.append(sig)

    class Server:
        class config:
            ttl = 60.0

    monkeypatch.setattr(runner, "_stats", slow_stats)
    case = runner.RunningCase.__new__(runner.RunningCase)  # the watch alone: no launch, no server
    case.terminated, case.stopped_for, case.argv, case.process, case.server = None, None, None, Process(), Server()
    case.started, case.deadline, case._next_look = time.monotonic(), 60.0, 0.0
    case.terminate_on, case._terminate_from = "fault sigterm-mid-call", 0
    assert case.done() is False
    assert case.process.signals == [runner.signal.SIGTERM]
    assert case.terminated is not None and case.terminated.sigterm_at >= seen[0]
