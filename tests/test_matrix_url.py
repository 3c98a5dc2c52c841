"""``orsbench clients URL`` (was ``matrix --url``): live verdicts on a served scenario equal what the matrix predicts for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orsbench.cli import main
from orsbench.clientcheck.results import LiveRow
from orsbench.clients import cells as C
from orsbench.clients.targets import CLIENT_TARGETS
from orsbench.servers.launch import start

CLIENTS = [name for name in ("openreward", "ors") if CLIENT_TARGETS[name].installed]


@pytest.mark.parametrize(("scenario", "impl"), [("echo", "mock"), ("pick", "mock"), ("echo", "sdk"), ("echo", "ors-sdk")])
def test_live_verdicts_match_the_prediction(scenario: str, impl: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not CLIENTS:
        pytest.skip("neither the openreward SDK nor ors-sdk is installed")
    server = start(scenario, impl=impl)
    try:
        out = tmp_path / "m.json"
        md = tmp_path / "m.md"
        code = main(["clients", server.url, "--clients", ",".join(CLIENTS), "--timeout", "60",
                     "--secret", "OPENAI_API_KEY=s3cr3t-value", "--json", str(out), "--markdown", str(md)])
    finally:
        server.stop()
    printed = capsys.readouterr()
    assert code == 0, printed.err
    result = json.loads(out.read_text())
    assert result["episode"]["calls"] >= 1 and result["episode"]["finished"] is True
    rows = {row["client"]: row for row in result["rows"]}
    assert sorted(rows) == sorted(CLIENTS)
    for client, row in rows.items():
        predicted = C.predicted(C.Cell(client, impl, scenario))
        assert row["verdict"] == predicted, (client, row, predicted)  # the matrix's words, the same judgement
        assert row["verdict"] == "works" and row["trains"] is None  # neither is the trainer target
        assert row["client"] in printed.out
    # The secret went to the adapters by environment: it is in no output orsbench wrote.
    for text in (out.read_text(), md.read_text(), printed.out, printed.err):
        assert "s3cr3t-value" not in text
    assert "| openreward |" in md.read_text() or "openreward" not in CLIENTS


@pytest.mark.skipif(not CLIENT_TARGETS["openreward"].installed, reason="the openreward SDK is not installed")
def test_a_client_error_is_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    """The openreward SDK refuses a secret name it has no allowed domains for (its design: secrets only go to
    known hosts unless given as (value, domains)); the row says so in the SDK's own words."""
    server = start("echo")
    try:
        code = main(["clients", server.url, "--clients", "openreward", "--secret", "MY_ENV_KEY=s3cr3t-value"])
    finally:
        server.stop()
    printed = capsys.readouterr()
    assert code == 1  # a client asked about failed: the CI step goes red (--fail-on's default)
    assert "orsbench clients: exit 1: openreward (fails clearly)" in printed.err
    assert "openreward  fails clearly — because ValueError: Secret key 'MY_ENV_KEY' is not in WELL_KNOWN_SECRETS" in printed.out
    assert "s3cr3t-value" not in printed.out + printed.err


@pytest.mark.skipif(not CLIENT_TARGETS["inspect"].installed, reason="inspect-openreward is not installed")
def test_a_predicted_failure_fails_live_and_names_the_pinned_defect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """inspect-openreward reads a split by list_tasks() only (the matrix predicts it fails on an index-only
    environment): so it does live, through ``inspect eval`` on the scripted model, and the row names the pinned
    upstream defect behind it — in every output — so the environment is not blamed (first hour: the row said
    "fails — because ..." and nothing else)."""
    out, md, html = tmp_path / "c.json", tmp_path / "c.md", tmp_path / "c.html"
    server = start("schema-zoo-index")
    try:
        code = main(["clients", server.url, "--clients", "inspect", "--timeout", "60", "--json", str(out), "--markdown", str(md), "--html", str(html),
                     "--fail-on", "hangs,fails-silently"])  # fmt: skip
    finally:
        server.stop()
    printed = capsys.readouterr()
    assert code == 0, printed.err  # a clear failure, which --fail-on leaves out
    [row] = json.loads(out.read_text())["rows"]
    assert C.predicted(C.Cell("inspect", "mock", "schema-zoo-index")) == "fails clearly"
    assert row["verdict"] == "fails clearly" and "list_tasks" in row["why"], row
    assert [d["id"] for d in row["defects"]] == ["inspect-list-tasks-only"], row
    # the pin names the package and the file and line that do it (issue 34)
    assert "pinned upstream defect: inspect-list-tasks-only (inspect-openreward 0.3.0, inspect_openreward/_dataset.py:35:" in printed.out
    assert "`inspect-list-tasks-only` — inspect-openreward 0.3.0, inspect_openreward/_dataset.py:35:" in md.read_text()
    assert "<code>inspect-list-tasks-only</code>" in html.read_text()


@pytest.mark.skipif(not CLIENT_TARGETS["ors"].installed, reason="ors-sdk is not installed")
def test_matrix_url_still_works_for_a_release_with_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    server = start("echo")
    try:
        code = main(["matrix", "--url", server.url, "--clients", "ors", "--timeout", "60"])
    finally:
        server.stop()
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "orsbench matrix --url URL is deprecated" in printed.err and "orsbench clients URL" in printed.err
    assert printed.out.startswith("ors         works — reward 1.0"), printed.out


def test_not_installed_is_listed_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from orsbench.clients import live

    missing = next((n for n in CLIENT_TARGETS.names() if not CLIENT_TARGETS[n].installed), None)
    if missing is None:
        pytest.skip("every client target is installed here")
    server = start("echo")
    try:
        result = live.play_on_url(server.url, clients=[missing], timeout=10)
    finally:
        server.stop()
    assert result.rows[0].verdict == "not installed"


def test_the_one_judgement_names_the_difference() -> None:
    """A client that showed the model another text, or another reward, than the server answered fails silently,
    naming the call; one that reported an error fails clearly with its own words — the judgement every view uses."""
    from orsbench.clientcheck.cases import Case
    from orsbench.clientcheck.contract import OutFile, parse_line
    from orsbench.clientcheck.episodes import Script, Step
    from orsbench.clientcheck.judgement import judge
    from orsbench.clientcheck.runner import CaseRun

    def run(expect: str, reward: float, *lines: dict, exit_code: int = 0) -> CaseRun:
        script = Script("url", (Step("echo", {"text": "hello"}, expect),), reward=reward)
        out = OutFile([parse_line(n, json.dumps(line)) for n, line in enumerate(lines, 1)], 1, True)
        return CaseRun(Case("url", "", "yours"), script, "adapter", exit_code=exit_code, out=out)

    line = {"tool": "echo", "text": "hello", "reward": 1.0, "finished": True}
    assert judge(run("hello", 1.0, line), []).verdict == "works"
    silent = judge(run(" hello", 1.0, line), [])
    assert silent.verdict == "fails silently" and "echo returned 'hello', the scenario answers ' hello'" in silent.because
    silent = judge(run("hello", 0.5, line), [])
    assert silent.verdict == "fails silently" and "last reward is 1.0" in silent.because
    clear = judge(run("hello", 1.0, {"error": "ToolFailed: boom\nmore", "stage": "call"}, exit_code=1), [])
    assert (clear.verdict, clear.because) == ("fails clearly", "ToolFailed: boom")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["clients", "http://192.0.2.1:8000"], "not on this machine"),
        (["clients", "ftp://127.0.0.1:8000"], "expected an http(s) URL like http://127.0.0.1:8000"),
        (["clients", "http://127.0.0.1:9", "--clients", "nope"], "unknown client 'nope'"),
        (["clients"], "the following arguments are required: URL"),
        (["matrix", "--url", "http://192.0.2.1:8000"], "not on this machine"),
        (["matrix", "--url", "ftp://127.0.0.1:8000"], "expected an http(s) URL like http://127.0.0.1:8000"),
        (["matrix", "--url", "http://127.0.0.1:9", "--clients", "nope"], "unknown client 'nope'"),
        (["matrix", "--url", "http://127.0.0.1:9", "--servers", "mock"], "leave out --servers"),
        (["matrix", "--secret", "K=V"], "need --url"),
        (["matrix", "--api-key", "k"], "need --url"),
    ],
)
def test_usage_errors(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and needle in err and "Traceback" not in err


# -- your own client beside the installed ones (--client-cmd) ----------------------------------------------
FAULTY = Path(__file__).parent / "clients" / "faulty.py"


def test_adapter_commands_get_rows_and_the_html_page_shows_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--client-cmd`` plays check-client-style adapters: the reference adapter evaluates, a crashing one fails with its error."""
    import shlex
    import sys

    from orsbench.clientcheck.reference import command as reference_command

    crash = shlex.join([sys.executable, str(FAULTY), "crash"])
    html, out = tmp_path / "m.html", tmp_path / "m.json"
    server = start("echo")
    try:
        code = main(["clients", server.url, "--clients", "ors", "--client-cmd", reference_command(), "--client-cmd", crash,
                     "--secret", "OPENAI_API_KEY=s3cr3t-value", "--timeout", "60", "--json", str(out), "--html", str(html)])
    finally:
        server.stop()
    printed = capsys.readouterr()
    assert code == 1, printed.err  # the crashing command failed: only it is named
    assert "exit 1: cmd 2 (fails clearly)" in printed.err
    rows = {row["client"]: row for row in json.loads(out.read_text())["rows"]}
    assert list(rows) == ["ors", "cmd 1", "cmd 2"]
    assert rows["cmd 1"]["verdict"] == "works" and rows["cmd 1"]["command"] == reference_command(), rows["cmd 1"]
    # It crashed (exit 1, nothing reported): a clear failure, in its own words (the crash is the one fault named).
    assert rows["cmd 2"]["verdict"] == "fails clearly" and "the client fell over" in rows["cmd 2"]["why"], rows["cmd 2"]
    assert f"command: {crash}" in printed.out
    page = html.read_text()
    assert "cmd 2" in page and "the client fell over" in page and 'class="cell s-warn"' in page and 'class="cell s-pass"' in page
    assert "<script" not in page
    for text in (page, out.read_text(), printed.out, printed.err):
        assert "s3cr3t-value" not in text


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["matrix", "--client-cmd", "python a.py"], "--client-cmd needs --url"),
        (["matrix", "--url", "http://127.0.0.1:9", "--client-cmd", "python a.py {secrets}"], "secrets never go on a command line"),
        (["clients", "http://127.0.0.1:9", "--client-cmd", "python a.py {secrets}"], "secrets never go on a command line"),
        (["clients", "http://127.0.0.1:9", "--client-cmd", "pyhton a.py"], "'pyhton' is not found"),
        (["matrix", "--url", "http://127.0.0.1:9", "--client-cmd", "  "], "--client-cmd is empty"),
        (["matrix", "--url", "http://127.0.0.1:9", "--client-cmd", "pyhton a.py"], "'pyhton' is not found"),
        (["matrix", "--cmd", "python a.py"], "--client-cmd needs --url"),  # the old spelling, for a release
    ],
)
def test_adapter_command_usage_errors(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and needle in err and "Traceback" not in err


def _row(client: str, verdict: str, trains: bool | None = None) -> LiveRow:
    from orsbench.verdict import Verdict

    known = {str(v): v for v in Verdict}
    return LiveRow(client, "1.0", known.get(verdict, verdict), "why", trains=trains)


def test_fail_on_chooses_which_verdicts_fail_the_run() -> None:
    """``orsbench clients`` exits 1 when a row has a verdict ``--fail-on`` names; the default is every failure."""
    from orsbench.cli.clients import DEFAULT_FAIL_ON, failing

    rows = [_row("a", "works"), _row("b", "fails clearly"), _row("c", "hangs"), _row("t", "works", trains=False), _row("n", "not installed")]
    assert [r.client for r in failing(rows, DEFAULT_FAIL_ON)] == ["b", "c"]
    assert [r.client for r in failing(rows, ["hangs"])] == ["c"]
    assert [r.client for r in failing(rows, ["would-not-train", "not-installed"])] == ["t", "n"]
    assert failing(rows, ["none"]) == [] and failing([_row("a", "works"), _row("t", "works", trains=True)], DEFAULT_FAIL_ON) == []


def test_fail_on_refuses_an_unknown_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["clients", "http://127.0.0.1:9", "--fail-on", "broken"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "orsbench clients: error: argument --fail-on: unknown verdict 'broken'" in err
