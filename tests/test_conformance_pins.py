"""conformance/pins.py: a pinned cell that fails as pinned is reported in one line; every other outcome is pytest's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FULL = "ExceptionChainRepr"  # pytest's formatted traceback (with the source of each frame)

CONFTEST = '''
import json, os
from conformance.pins import pytest_runtest_makereport  # the hook under test

def pytest_runtest_logreport(report):
    with open(os.environ["PINS_LOG"], "a") as log:
        log.write(json.dumps({
            "test": report.nodeid.split("::")[-1], "when": report.when, "outcome": report.outcome,
            "wasxfail": getattr(report, "wasxfail", None), "kind": type(report.longrepr).__name__,
            "text": str(report.longrepr) if report.longrepr is not None else None,
        }) + "\\n")
'''

TESTS = '''
import pytest

def check(value):
    assert value == "works", f"the client said {value}"

@pytest.mark.xfail(strict=True, reason="[some-defect] pinned")
def test_pinned():
    print("captured")
    check("breaks")

@pytest.mark.xfail(True, strict=True, reason="conditional")
def test_conditional():
    check("breaks")

@pytest.mark.xfail(raises=ValueError, strict=True, reason="raises")
def test_raises():
    raise ValueError("named")

@pytest.mark.xfail(strict=True, reason="wrong exception")
def test_pinned_but_skips():
    pytest.skip("no interpreter")

@pytest.mark.xfail(strict=True, reason="fixed upstream")
def test_pinned_passes():
    check("works")

def test_plain_failure():
    check("breaks")
'''


def _run(tmp_path: Path, *args: str) -> dict[str, dict[str, Any]]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_cells.py").write_text(TESTS)
    log = tmp_path / "reports.jsonl"
    log.unlink(missing_ok=True)
    env = {**os.environ, "PINS_LOG": str(log), "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [sys.executable, "-m", "pytest", str(tmp_path), "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "--rootdir", str(tmp_path), *args],
        cwd=tmp_path, env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    reports = [json.loads(line) for line in log.read_text().splitlines()]
    return {r["test"]: r for r in reports if r["when"] == "call" or (r["when"] == "setup" and r["outcome"] != "passed")}


def test_a_pinned_failure_is_one_line_and_every_other_outcome_is_pytests_own(tmp_path: Path) -> None:
    calls = _run(tmp_path)
    pinned = calls["test_pinned"]
    assert (pinned["outcome"], pinned["wasxfail"], pinned["kind"]) == ("skipped", "[some-defect] pinned", "str")
    assert pinned["text"].startswith(f"{tmp_path / 'test_cells.py'}:5: AssertionError: the client said breaks"), pinned["text"]
    assert "def check" not in pinned["text"]  # no source: that is the traceback it does without

    for name in ("test_conditional", "test_raises"):  # pytest weighs a condition or `raises`: its full report
        assert calls[name]["outcome"] == "skipped" and calls[name]["wasxfail"], calls[name]
        assert calls[name]["kind"] == FULL and "def test_" in calls[name]["text"], calls[name]
    assert calls["test_plain_failure"]["outcome"] == "failed"
    assert calls["test_plain_failure"]["kind"] == FULL and "def check" in calls["test_plain_failure"]["text"]
    assert calls["test_pinned_passes"]["outcome"] == "failed"  # strict: a pin that passes fails the run
    assert (calls["test_pinned_but_skips"]["outcome"], calls["test_pinned_but_skips"]["kind"]) == ("skipped", "tuple")


@pytest.mark.parametrize("flag", ["--xfail-tb", "--runxfail"])
def test_asking_for_a_pins_traceback_gets_the_full_one(tmp_path: Path, flag: str) -> None:
    pinned = _run(tmp_path, flag)["test_pinned"]
    assert pinned["kind"] == FULL and "def check" in pinned["text"], pinned
    assert pinned["outcome"] == ("skipped" if flag == "--xfail-tb" else "failed")
