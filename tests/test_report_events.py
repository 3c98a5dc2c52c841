"""One run, one event stream, a handler per format: every format tells the same outcomes.

The run is real (``orsbench check`` on echo whose rewards are booleans: passes, a required
failure, a warning, skips, checks that are not applicable); its events are recorded once and fed
to the terminal, JSON, JUnit, Markdown and HTML handlers. Each check's outcome and the counts are
read back out of every format and compared. The terminal renders each check's line while the run
still goes (progress), and the file handlers write the same bytes the renderers always wrote.
"""

from __future__ import annotations

import io
import json
import re
import threading
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from orsbench.checks import Options, run_checks
from orsbench.checks.model import Severity, Status
from orsbench.reports import TerminalReporter, junit_xml, render_check, render_markdown
from orsbench.reports import html as html_report
from orsbench.reports.events import (
    CaseFinished,
    CheckFinished,
    Event,
    EventStream,
    Handler,
    ProbeFinished,
    Recorder,
    RunFinished,
    RunStarted,
    SessionGraded,
    replay,
)
from orsbench.reports.handlers import FileHandler, file_handlers
from orsbench.reports.html import anchor
from orsbench.reports.json_report import dumps
from orsbench.verdict import Judgement, Verdict

TITLE = "orsbench check"


class Progress:
    """A handler after the terminal: what the terminal had printed when each event reached it."""

    def __init__(self, screen: io.StringIO) -> None:
        self.screen = screen
        self.seen: list[tuple[Event, str]] = []

    def handle(self, event: Event) -> None:
        self.seen.append((event, self.screen.getvalue()))

    def shutdown(self) -> None:
        pass


@pytest.fixture(scope="module")
def run(ors_server_factory):
    """One real run, streamed to a recorder, the terminal and a spy on the terminal's screen as it went."""
    server = ors_server_factory("echo", faults=("reward-bool",))
    recorder, screen = Recorder(), io.StringIO()
    progress = Progress(screen)
    with EventStream([recorder, TerminalReporter(screen, colour=False), progress], command=TITLE) as stream:
        options = Options(fuzz=0, timeout=10, env=server.env_name)
        stream.on_start(server.url, options)
        report = run_checks(server.url, options, on_probe=stream.on_probe, on_result=stream.on_result)
        stream.finish(report)
    assert recorder.closed
    return recorder.events, screen.getvalue(), progress.seen


@pytest.fixture(scope="module")
def formats(run, tmp_path_factory):
    """The recorded stream fed again to a terminal and to every file handler: each format's text."""
    events, _, _ = run
    folder = tmp_path_factory.mktemp("formats")
    screen = io.StringIO()
    paths = {name: folder / f"report.{name}" for name in ("json", "junit", "html", "markdown")}
    handlers = file_handlers(paths, title=TITLE)
    replay(events, [TerminalReporter(screen, colour=False), *handlers])
    assert all(h.written for h in handlers)
    return {"terminal": screen.getvalue(), **{name: path.read_bytes().decode("utf-8") for name, path in paths.items()}}


def _results(events: list[Event]):
    return [e.result for e in events if isinstance(e, CheckFinished)]


def _bucket(status: str, severity: str) -> str:
    """The outcome every format can say: passed, failed (blocking), warned (a finding that passes CI), skipped."""
    if status == "fail" and severity == Severity.REQUIRED.value:
        return "failed"
    if status in ("fail", "warn"):
        return "warned"
    if status in ("skip", "n/a"):
        return "skipped"
    return {"pass": "passed", "error": "error"}[status]


# -- each format read back --------------------------------------------------------------------
def _terminal_outcomes(text: str) -> dict[str, str]:
    """``LABEL severity id message`` lines → id: outcome."""
    labels = {"PASS": "pass", "FAIL": "fail", "WARN": "warn", "SKIP": "skip", "N/A": "n/a", "ERROR": "error"}
    out = {}
    for line in text.splitlines():
        match = re.match(r"^(PASS|FAIL|WARN|SKIP|N/A|ERROR)\s+(required|recommended|advisory)\s+(\S+)", line)
        if match:
            out[match[3]] = _bucket(labels[match[1]], match[2])
    return out


def _junit_outcomes(text: str) -> dict[str, str]:
    """A testcase's child says it: failure (blocking), error, skipped; none (a pass, or a finding that passes CI)."""
    out = {}
    for case in ET.fromstring(text.split("\n", 1)[1]).iter("testcase"):
        kinds = {child.tag for child in case} - {"system-out"}
        out[case.get("name")] = {"failure": "failed", "error": "error", "skipped": "skipped"}.get(next(iter(kinds), ""), "passed")
    return out


def _html_outcomes(text: str, ids: list[str]) -> dict[str, str]:
    """Each check's ``<details class="check s-STYLE" id="check-ID">``: its style is its label's colour."""
    out = {}
    for check_id in ids:
        match = re.search(rf'<details class="check s-(\w+)" id="{re.escape(anchor(check_id))}"', text)
        assert match, f"{check_id} has no block in the page"
        out[check_id] = match[1]
    return out


def test_every_format_tells_each_checks_outcome_alike(run, formats):
    events, _, _ = run
    results = _results(events)
    expected = {r.id: _bucket(r.status.value, r.severity.value) for r in results}
    assert set(expected.values()) >= {"passed", "failed", "warned", "skipped"}, "the run shows every kind of outcome"

    assert _terminal_outcomes(formats["terminal"]) == expected
    document = json.loads(formats["json"])
    assert {c["id"]: _bucket(c["status"], c["severity"]) for c in document["checks"]} == expected
    # JUnit turns only a blocking failure red and says a finding that passes CI in system-out: a warning passes there.
    junit = _junit_outcomes(formats["junit"])
    assert junit == {i: "passed" if o == "warned" else o for i, o in expected.items()}
    # The page colours each check by its label: a failed recommended check is a warning, a skip and n/a are grey.
    style = {"failed": "fail", "warned": "warn", "skipped": "skip", "passed": "pass", "error": "error"}
    assert _html_outcomes(formats["html"], list(expected)) == {i: style[o] for i, o in expected.items()}
    # The Markdown summary has a row per finding (a failure or a warning) and none for the rest.
    rows = {i: label for label, i in re.findall(r"^\| \S+ (FAIL|WARN|ERROR) \| `([^`]+)` \|", formats["markdown"], re.M)}
    assert set(rows) == {i for i, o in expected.items() if o in ("failed", "warned")}
    assert {i for i, label in rows.items() if label == "FAIL"} >= {i for i, o in expected.items() if o == "failed"}


def test_every_format_counts_alike(run, formats):
    events, _, _ = run
    results = _results(events)
    counts = Counter(r.status.value for r in results)
    n = {"pass": counts["pass"], "fail": counts["fail"], "warn": counts["warn"], "skip": counts["skip"], "n/a": counts["n/a"]}
    assert all(n.values()), n
    line = f"{n['pass']} passed, {n['fail']} failed, {n['warn']} warned, {n['skip']} skipped, {n['n/a']} not applicable"
    assert line in formats["terminal"]
    summary = json.loads(formats["json"])["summary"]
    assert {k: summary[k] for k in n} == n and summary["total"] == len(results)
    markdown = f"**{n['pass']}** passed · **{n['fail']}** failed · **{n['warn']}** warned · **{n['skip']}** skipped · **{n['n/a']}** not applicable"
    assert markdown in formats["markdown"]
    head = formats["html"][: formats["html"].index("<h2>")]
    for word, key in (("passed", "pass"), ("failed", "fail"), ("warned", "warn"), ("skipped", "skip"), ("not applicable", "n/a")):
        assert f"{n[key]} {word}" in head, word
    suite = ET.fromstring(formats["junit"].split("\n", 1)[1]).find("testsuite")
    blocking = sum(1 for r in results if r.blocking)
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == (
        str(len(results)),
        str(blocking),
        str(n["skip"] + n["n/a"]),
    )


def test_the_file_handlers_write_what_the_renderers_always_wrote(run, formats, monkeypatch):
    events, _, _ = run
    report = next(e.report for e in events if isinstance(e, RunFinished))
    assert formats["json"] == dumps(report) + "\n"
    assert formats["junit"] == junit_xml(report) + "\n"
    assert formats["markdown"] == render_markdown(report, title=TITLE)
    stamp = re.search(r"generated ([^<]+?)(?:<| ·)", formats["html"])
    assert stamp, "the page says when it was made"
    monkeypatch.setattr(html_report, "_now", lambda: stamp[1])
    assert formats["html"] == render_check(report, title=TITLE) + "\n"


def test_the_terminal_prints_each_check_before_the_run_finishes(run):
    events, screen, seen = run
    finished_at = next(i for i, (event, _) in enumerate(seen) if isinstance(event, RunFinished))
    checks = [(i, event.result, shown) for i, (event, shown) in enumerate(seen) if isinstance(event, CheckFinished)]
    assert checks and all(i < finished_at for i, _, _ in checks)
    for _, result, shown in checks:
        assert re.search(rf"^\S+\s+{result.severity.value}\s+{re.escape(result.id)} ", shown, re.M), result.id
        assert "verdict:" not in shown and " checks, " not in shown, "no summary before the run ends"
    first = checks[0][2]
    assert first.startswith(f"{TITLE} ") and "── discovery" in first, "the header and the probe's line come first"
    # The summary is the terminal's answer to RunFinished (the spy, after it, sees it there), and only to it.
    assert "verdict:" not in seen[finished_at - 1][1] and "verdict: FAIL (exit 1)" in seen[finished_at][1] == screen
    probes = [e for e in events if isinstance(e, ProbeFinished)]
    assert probes and all(f"── {p.probe:<10} {p.requests:>3} request(s)" in screen for p in probes)


# -- the stream itself ---------------------------------------------------------------------
class Slow:
    """A handler that notices two events handled at once (the stream hands them one at a time)."""

    def __init__(self) -> None:
        self.inside = 0
        self.overlaps = 0
        self.count = 0

    def handle(self, event: Event) -> None:
        self.inside += 1
        if self.inside > 1:
            self.overlaps += 1
        time.sleep(0.001)
        self.count += 1
        self.inside -= 1

    def shutdown(self) -> None:
        pass


def test_events_from_many_threads_reach_a_handler_one_at_a_time():
    slow = Slow()
    stream = EventStream([slow])
    threads = [threading.Thread(target=lambda: [stream.on_probe("p", 0.0, 1) for _ in range(20)]) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (slow.count, slow.overlaps) == (80, 0)


class Broken(Recorder):
    def shutdown(self) -> None:
        super().shutdown()
        raise OSError("disk full")


def test_every_handler_is_shut_down_even_when_one_fails():
    first, after = Broken(), Recorder()
    with pytest.raises(OSError, match="disk full"):
        with EventStream([first, after]):
            pass
    assert first.closed and after.closed


def test_a_run_that_ends_early_writes_no_report(tmp_path: Path):
    handler = FileHandler("json", tmp_path / "r.json", lambda report: "{}")
    replay([RunStarted(TITLE, "http://127.0.0.1:1"), ProbeFinished("discovery", 0.1, 2)], [handler])
    assert not handler.written and not (tmp_path / "r.json").exists()


def test_handlers_are_handlers(tmp_path: Path):
    assert isinstance(TerminalReporter(io.StringIO()), Handler)
    assert all(isinstance(h, Handler) for h in file_handlers({"json": tmp_path / "a", "html": None}, title=TITLE))
    assert [h.format for h in file_handlers({"markdown": "-", "json": "x"}, title=TITLE)] == ["markdown", "json"]
    with pytest.raises(ValueError, match="no report format yaml: the formats are json, junit, html, markdown"):
        file_handlers({"yaml": "x"}, title=TITLE)


# -- a client run's events, as the terminal says them ----------------------------------------
def test_a_case_line_says_the_cases_one_verdict():
    screen = io.StringIO()
    works = Judgement(Verdict.WORKS, subject="echo")
    replay(
        [
            RunStarted("orsbench check-client", "python adapter.py", cases=2, jobs=2),
            CaseFinished("echo", 0, None, 1.5, 7, works),
            CaseFinished("slow-setup", None, "deadline", 20.0, 3, None, server_error="the case server did not start"),
        ],
        [TerminalReporter(screen, colour=False)],
    )
    lines = screen.getvalue().splitlines()
    assert lines[0] == "orsbench check-client python adapter.py  (2 case(s), 2 at a time)"
    assert lines[1] == f"── echo: {works.words} (exit 0)   7 request(s) in  1.50 s"
    assert lines[2] == "── slow-setup (exit None, stopped for deadline)   3 request(s) in 20.00 s"
    assert lines[3] == "      case server failed: the case server did not start"


def test_a_hosted_session_line_names_its_failed_checks():
    from orsbench.checks.model import CheckResult

    failed = CheckResult("client.tool_runs", "t", Status.FAIL, Severity.REQUIRED, "no", None, [], "", "§12")
    screen = io.StringIO()
    TerminalReporter(screen, colour=False).handle(SessionGraded("echo", "session 1", "deleted", (failed,), 0.5, 4))
    assert screen.getvalue() == "── echo: session 1 (deleted) — FAIL client.tool_runs   4 request(s) in  0.50 s\n"


def test_a_usage_error_is_said_once_on_stderr(capsys):
    from orsbench.checks.runner import Report

    report = Report("http://127.0.0.1:1", Options(), usage_error="no environment 'nosuch': the server has echo")
    screen = io.StringIO()
    replay([RunStarted(TITLE, report.target), RunFinished(report)], [TerminalReporter(screen, colour=False)])
    assert capsys.readouterr().err == "orsbench check: error: no environment 'nosuch': the server has echo\n"
    assert "verdict" not in screen.getvalue()


# -- from Python --------------------------------------------------------------------------
def test_orsbench_check_feeds_the_handlers_it_is_given(tmp_path: Path):
    import orsbench

    screen, recorder, seen = io.StringIO(), Recorder(), []
    junit = tmp_path / "junit.xml"
    report = orsbench.check(
        "echo",
        only=["discovery.*"],
        fuzz=0,
        on_result=seen.append,
        handlers=[TerminalReporter(screen, colour=False), recorder, *file_handlers({"junit": junit}, title=TITLE)],
    )
    assert recorder.closed and isinstance(recorder.events[0], RunStarted) and recorder.events[-1] == RunFinished(report)
    assert [e.result for e in recorder.events if isinstance(e, CheckFinished)] == report.results == seen
    assert report.results and f"{len(report.results)} passed, 0 failed" in screen.getvalue()
    assert junit.read_bytes().decode() == junit_xml(report) + "\n"
