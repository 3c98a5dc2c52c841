"""The server's own traceback in a finding (issue 27), unit by unit: reading a started server's output
(orsbench/servers/output.py) and picking the traceback a finding shows (orsbench.api.ServerOutput).

The end-to-end version — `orsbench check --scenario/--app/--server-cmd` against a tool that raises —
is ``test_a_tool_that_raises_shows_the_servers_own_traceback_in_the_finding`` in tests/test_check_cli.py.
"""

from __future__ import annotations

from pathlib import Path

from orsbench.api import ServerOutput
from orsbench.checks import Severity, Status
from orsbench.checks.model import CheckResult
from orsbench.servers.output import TRACEBACK_LINES, OutputWindow, exception_line, tracebacks

RAISED = """INFO:     127.0.0.1:5000 - "POST /echo/call HTTP/1.1" 200 OK
tool 'submit' raised:
Traceback (most recent call last):
  File "env.py", line 12, in submit
    raise RuntimeError("grader crashed")
RuntimeError: grader crashed
INFO:     127.0.0.1:5001 - "POST /echo/delete HTTP/1.1" 200 OK
"""

CHAINED = """ERROR:    Exception in ASGI application
Traceback (most recent call last):
  File "env.py", line 3, in parse
    return int(text)
ValueError: invalid literal for int() with base 10: 'x'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "env.py", line 8, in submit
    raise KeyError("answer")
KeyError: 'answer'
INFO:     after
"""


def test_a_traceback_is_cut_from_the_log_lines_around_it() -> None:
    (found,) = tracebacks(RAISED)
    assert found.startswith("Traceback (most recent call last):") and found.endswith("RuntimeError: grader crashed")
    assert "INFO" not in found and exception_line(found) == "RuntimeError: grader crashed"


def test_a_chained_traceback_is_kept_whole_and_ends_with_what_was_raised() -> None:
    (found,) = tracebacks(CHAINED)
    assert "ValueError: invalid literal" in found and "During handling" in found
    assert exception_line(found) == "KeyError: 'answer'" and "after" not in found


def test_a_long_traceback_keeps_its_head_and_its_tail() -> None:
    frames = "".join(f'  File "deep.py", line {n}, in f\n    f()\n' for n in range(60))
    (found,) = tracebacks(f"Traceback (most recent call last):\n{frames}RecursionError: too deep\n")
    lines = found.splitlines()
    assert len(lines) == TRACEBACK_LINES and lines[0].startswith("Traceback") and lines[-1] == "RecursionError: too deep"
    elided = next(line for line in lines if "lines) ..." in line)
    assert elided.strip() == f"... ({120 + 2 - (TRACEBACK_LINES - 1)} lines) ..."


def test_the_window_reads_only_what_was_written_since_the_last_look(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("Traceback (most recent call last):\n  x\nOSError: at start-up\n")
    window = OutputWindow(log)
    window.next()
    assert window.next_tracebacks() == []
    with log.open("a") as f:
        f.write(RAISED)
    assert [exception_line(t) for t in window.next_tracebacks()] == ["RuntimeError: grader crashed"]
    assert window.next_tracebacks() == [] and len(window.seen) == 1
    assert OutputWindow(tmp_path / "missing.log").next() == ""


def _result(message: str, status: Status = Status.FAIL, evidence: dict | None = None) -> CheckResult:
    return CheckResult(
        "tool.no_crash_on_valid_input", "t", status, Severity.REQUIRED, message, None, [evidence] if evidence else [], "", "§5"
    )


def _output(tmp_path: Path, text: str) -> tuple[ServerOutput, list[CheckResult]]:
    log = tmp_path / "server.log"
    log.write_text("")
    reported: list[CheckResult] = []
    output = ServerOutput(log, None, reported.append)
    log.write_text(text)
    output.on_probe("fuzz", 0.1, 3)
    return output, reported


def test_a_finding_gets_the_traceback_whose_message_it_shows(tmp_path: Path) -> None:
    output, reported = _output(tmp_path, RAISED + CHAINED)
    output.on_result(_result("submit({}) raised (fuzz): SSE error event: grader crashed"))
    (finding,) = reported
    assert finding.server is not None and [exception_line(t) for t in finding.server["tracebacks"]] == ["RuntimeError: grader crashed"]


def test_a_5xx_gets_the_probes_tracebacks_and_an_unrelated_finding_none(tmp_path: Path) -> None:
    output, reported = _output(tmp_path, CHAINED)
    output.on_result(_result("POST /echo/call answered 500", evidence={"status": 500, "body": "Internal Server Error"}))
    output.on_result(_result("the prompt is empty"))
    output.on_result(_result("grader crashed", status=Status.PASS))
    assert [exception_line(t) for t in reported[0].server["tracebacks"]] == ["KeyError: 'answer'"]
    assert reported[1].server is None and reported[2].server is None
