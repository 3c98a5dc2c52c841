"""conformance/background.py: wire checks run in a process of their own, their report read back as the tests grade it."""

from __future__ import annotations

import time
from pathlib import Path

from conformance import background
from orsbench.checks import CheckResult, load_checks

ROOT = Path(__file__).resolve().parents[1]


def test_a_background_check_writes_the_report_the_wire_tests_grade(tmp_path: Path) -> None:
    processes = background.launch(tmp_path, ROOT, scenarios=("echo",))
    try:
        report = background.read(background.report_path(tmp_path, "echo"), timeout=120)
        processes[0].wait(30)  # the report is written last: the process ends on its own
    finally:
        background.stop(processes)
    assert report.reason is None
    assert set(report.results) == set(load_checks())  # every check, each as the in-process run grades it
    result = report.result("discovery.health")
    assert isinstance(result, CheckResult) and result.status.value == "pass", result
    assert [p.returncode for p in processes] == [0]
    assert not list(tmp_path.glob("*.part"))  # written whole, by a rename


def test_a_result_reads_back_as_it_was_written() -> None:
    from orsbench.checks import Severity, Status

    result = CheckResult("x.y", "a title", Status.FAIL, Severity.REQUIRED, "why", {"n": 1}, [], "fix it", "§1", baseline="expected")
    assert CheckResult.from_json(result.to_json()) == result


def test_a_report_that_never_comes_is_a_reason_naming_it(tmp_path: Path) -> None:
    (tmp_path / "wire-checks-echo.log").write_text("Traceback: the server did not start\n")
    started = time.monotonic()
    report = background.read(background.report_path(tmp_path, "echo"), timeout=0.5)
    assert time.monotonic() - started < 5
    assert report.results == {} and report.reason is not None
    assert "wire-checks-echo.json" in report.reason and "the server did not start" in report.reason
