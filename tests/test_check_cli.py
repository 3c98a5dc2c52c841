"""``orsbench check``: exit codes 0/1/2/3, report files, --only, --list, the expected-failures baseline."""

from __future__ import annotations

import dataclasses
import json
import shlex
import socket
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from orsbench.checks import CHECKS, load_checks
from orsbench.cli import main
from orsbench.servers.faults.violations import ROUTER_PREFIX
from tests.needs import needs

BASELINE = Path(__file__).parent.parent / "fixtures" / "expected-failures" / "reward-bool.yaml"


@pytest.fixture(scope="module")
def echo(ors_server_factory):
    return ors_server_factory("echo")


@pytest.fixture(scope="module")
def router(ors_server_factory):
    return ors_server_factory("echo", faults=("violation-router",))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_echo_passes_and_writes_json_and_junit(tmp_path, capsys):
    json_path, junit_path = tmp_path / "report.json", tmp_path / "junit.xml"
    code = main(["check", "--scenario", "echo", "--json", str(json_path), "--junit", str(junit_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "── discovery" in out and "verdict: PASS (exit 0)" in out
    report = json.loads(json_path.read_text())
    assert report["passed"] is True and report["target"].startswith("http://127.0.0.1:")
    assert len(report["checks"]) == len(load_checks())
    suite = ET.parse(junit_path).getroot().find("testsuite")
    assert suite.get("failures") == "0" and int(suite.get("tests")) == len(load_checks())


def test_serve_with_a_violation_fails_with_exit_1(capsys):
    code = main(["check", "--scenario", "echo", "--fault", "reward-bool", "-q"])
    out = capsys.readouterr().out
    assert code == 1
    assert "reward.well_formed" in out and "is a bool" in out
    # Issue 27: the verdict leads with what failed, not with the checks the mock cannot provoke.
    verdict = out.strip().splitlines()[-1]
    assert verdict.startswith("verdict: FAIL (exit 1) — reward.well_formed failed: reward "), verdict
    assert "did not run" not in verdict


def test_required_failure_against_a_url_exits_1_and_junit_has_the_failure(router, tmp_path, capsys):
    junit_path = tmp_path / "junit.xml"
    # env_name left out of /task answers: the openreward client raises KeyError (required since issue 10).
    code = main(["check", router.url + ROUTER_PREFIX + "env-name-missing", "--env", "echo", "--junit", str(junit_path)])
    assert code == 1
    failures = [c for c in ET.parse(junit_path).getroot().iter("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failures] == ["dataset.env_name_echo"]


def test_ok_false_without_reason_is_recommended_not_blocking(router, capsys):
    # The openreward client infers a missing reason from the error text, so it copes: exit 0, reported.
    code = main(["check", router.url + ROUTER_PREFIX + "reason-missing", "--env", "echo", "--no-fuzz"])
    assert code == 0
    assert "call.error_reason" in capsys.readouterr().out


def test_unreachable_target_exits_2(capsys):
    code = main(["check", f"http://127.0.0.1:{_closed_port()}", "--json", "-"])
    captured = capsys.readouterr()
    assert code == 2
    assert "cannot reach" in captured.err  # with --json - the table goes to stderr ...
    report = json.loads(captured.out)  # ... and stdout is the JSON report alone
    assert report["verdict"] == "unreachable" and report["passed"] is False and report["checks"] == []


def test_a_server_that_is_not_ors_exits_2(router, capsys):
    # Every path under an unknown violation name answers 404: an HTTP server, but not an ORS one.
    code = main(["check", router.url + ROUTER_PREFIX + "no-such-violation"])
    assert code == 2
    out = capsys.readouterr().out
    assert "is not an ORS server" in out and "verdict: NOT-ORS (exit 2)" in out and "UNREACHABLE" not in out


def test_a_plain_http_server_is_not_ors_not_unreachable(tmp_path, capsys):
    """A web server that answers every request (here Python's own, serving a folder) is reachable: its verdict
    is NOT-ORS, in the terminal, the JSON, the JUnit and the Markdown — never UNREACHABLE."""
    import functools
    import http.server
    import threading

    (tmp_path / "index.html").write_text("<h1>my blog</h1>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        junit, markdown = tmp_path / "j.xml", tmp_path / "s.md"
        code = main(["check", url, "--json", "-", "--junit", str(junit), "--markdown", str(markdown)])
    finally:
        server.shutdown()
        server.server_close()
    captured = capsys.readouterr()
    assert code == 2
    report = json.loads(captured.out)
    assert report["verdict"] == "not-ors" and "is not an ORS server" in report["reason"] and "GET /health answered 404" in report["reason"]
    assert "verdict: NOT-ORS (exit 2)" in captured.err and "UNREACHABLE" not in captured.err
    error = ET.parse(junit).getroot().find(".//error")
    assert error is not None and error.get("type") == "not-ors"
    assert "NOT-ORS" in markdown.read_text()


def test_internal_error_exits_3(echo, capsys):
    def broken(ev):
        raise RuntimeError("bug in a check")

    with CHECKS.replaced(dataclasses.replace(CHECKS["discovery.splits"], fn=broken)):
        code = main(["check", echo.url, "--only", "discovery.*"])
    assert code == 3
    assert "bug in a check" in capsys.readouterr().out


def test_expected_failure_in_baseline_exits_0(router, capsys):
    code = main(["check", router.url + ROUTER_PREFIX + "reward-bool", "--env", "echo", "--expected-failures", str(BASELINE)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "XFAIL" in out and "expected failures (baseline)" in out


def test_stale_baseline_entry_exits_1(echo, tmp_path, capsys):
    json_path = tmp_path / "r.json"
    code = main(["check", echo.url, "--only", "reward.*,call.*", "--expected-failures", str(BASELINE), "--json", str(json_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert "STALE" in out and "remove it from" in out
    report = json.loads(json_path.read_text())
    assert report["summary"]["stale"] == ["reward.well_formed"]


def test_only_selects_by_glob(echo, tmp_path, capsys):
    json_path = tmp_path / "r.json"
    assert main(["check", echo.url, "--only", "dataset.*", "--only", "discovery.health", "--json", str(json_path)]) == 0
    ids = [c["id"] for c in json.loads(json_path.read_text())["checks"]]
    assert ids and set(ids) == {i for i in load_checks() if i.startswith("dataset.")} | {"discovery.health"}


def test_list_prints_every_check_with_its_severity(capsys):
    assert main(["check", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(load_checks())
    assert any(line.startswith("required") and "call.chunk_reassembly" in line for line in lines)


@pytest.mark.parametrize(
    "argv",
    [
        ["check"],
        ["check", "http://127.0.0.1:1", "--scenario", "echo"],
        ["check", "http://127.0.0.1:1", "--only", "nothing.matches*"],
        ["check", "http://127.0.0.1:1", "--expected-failures", "/nonexistent.yaml"],
        ["check", "--scenario", "echo", "--fault", "no-such-fault"],
    ],
    ids=["no-target", "two-targets", "only-matches-nothing", "missing-baseline", "unknown-fault"],
)
def test_usage_errors_exit_2_before_contacting_anything(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2


# -- the server's own traceback beside the finding (issue 27) -----------------------------------------------
@pytest.mark.parametrize(
    ("target", "raised"),
    [
        (["--scenario", "echo", "--fault", "tool-raises-on-non-ascii"], "UnicodeEncodeError: 'ascii' codec"),
        pytest.param(["--app", "tests/envs/always_raises.py:AlwaysRaises"], "RuntimeError: grader crashed", marks=needs("sdk")),
        (
            # this interpreter, not whichever `python` is first on PATH (the core run on 3.12 has no orsbench there)
            ["--server-cmd", f"{shlex.quote(sys.executable)} -m orsbench serve echo --port {{port}} --fault tool-raises-on-non-ascii"],
            "UnicodeEncodeError: 'ascii' codec",
        ),
    ],
    ids=["serve", "app", "cmd"],
)
def test_a_tool_that_raises_shows_the_servers_own_traceback_in_the_finding(target, raised, capsys):
    """The wire shows only the error event's text; a server orsbench started wrote where it raised (its stderr)."""
    code = main(["check", *target, "--only", "tool.no_crash_on_valid_input", "--json", "-", "-v", "--timeout", "5"])
    captured = capsys.readouterr()
    assert code == 1
    finding = next(c for c in json.loads(captured.out)["checks"] if c["id"] == "tool.no_crash_on_valid_input")
    traceback = finding["server"]["tracebacks"][0]
    assert traceback.startswith("Traceback (most recent call last):") and raised in traceback.splitlines()[-1]
    assert f"server: {raised}" in captured.err  # -v shows it under the finding


def test_a_passing_check_and_a_url_target_carry_no_server_output(echo, capsys):
    assert main(["check", echo.url, "--only", "tool.*", "--json", "-"]) == 0
    assert all("server" not in c for c in json.loads(capsys.readouterr().out)["checks"])
