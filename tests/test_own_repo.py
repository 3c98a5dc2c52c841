"""orsbench in a user's own repository (issue 37, item 2).

``pytest --ors-url URL`` from a directory with no tests of its own collects one item per check;
``orsbench.check(..., baseline=PATH)`` reads the file; ``-q`` prints only findings and the summary;
every usage error names its subcommand.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import orsbench
from orsbench.checks import BaselineError, load_checks
from orsbench.cli import SUBCOMMANDS, main
from tests.needs import needs

ROOT = Path(__file__).resolve().parents[1]


def _pytest_in(directory: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENREWARD_DISABLE_UPDATE_CHECK": "1"}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:xdist", *argv]
    return subprocess.run(command, cwd=directory, env=env, capture_output=True, text=True, timeout=300)


def _outcomes(summary: str) -> dict[str, int]:
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", summary)}


def test_pytest_ors_url_collects_one_item_per_check_in_an_empty_directory(tmp_path: Path, ors_server_factory) -> None:
    """Before: "no tests ran", exit 5, no word why. Now every check is an item, named after it."""
    server = ors_server_factory("echo")
    done = _pytest_in(tmp_path, "-v", "--ors-url", server.url, "--ors-env", "echo")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    ids = list(load_checks())
    collected = re.findall(r"test_ors_check\[([^\]]+)\] (?:PASSED|SKIPPED)", done.stdout)
    assert sorted(set(collected)) == sorted(ids), set(ids) ^ set(collected)
    counts = _outcomes(done.stdout.strip().splitlines()[-1])
    assert counts.get("passed", 0) + counts.get("skipped", 0) == len(ids) and counts.get("passed", 0) > len(ids) // 2, counts


def test_pytest_ors_url_fails_the_item_of_the_rule_a_server_breaks(tmp_path: Path, ors_server_factory) -> None:
    """The items are honest: a server that breaks a required rule fails exactly that rule's item, with its fix."""
    server = ors_server_factory("echo", faults=("reward-bool",))
    done = _pytest_in(tmp_path, "-q", "--ors-url", server.url, "-k", "reward.well_formed")
    assert done.returncode == 1, done.stdout[-3000:]
    assert "FAILED" in done.stdout and "fix:" in done.stdout and "orsbench explain" in done.stdout


def test_pytest_with_paths_adds_the_checks_beside_them(tmp_path: Path, ors_server_factory) -> None:
    (tmp_path / "test_mine.py").write_text("def test_mine():\n    assert True\n")
    server = ors_server_factory("echo")
    done = _pytest_in(tmp_path, "-q", "test_mine.py", "--ors-url", server.url, "-k", "mine or discovery")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "test_mine.py" in done.stdout or "1 passed" not in done.stdout
    assert _outcomes(done.stdout.strip().splitlines()[-1])["passed"] >= 2


# -- orsbench.check(baseline=PATH) --------------------------------------------------------------------------------
def test_check_takes_a_baseline_path(tmp_path: Path) -> None:
    """Before: ``AttributeError: 'str' object has no attribute 'source'``."""
    path = tmp_path / "expected-failures.yaml"
    path.write_text("expected_failures:\n  - id: quality.answer_leak\n    reason: echo's prompt is its answer\n")
    report = orsbench.check("echo", baseline=str(path), only=["quality.answer_leak"])
    result = report.result("quality.answer_leak")
    assert result.baseline == "expected", result
    assert orsbench.check("echo", baseline=path, only=["quality.answer_leak"]).result("quality.answer_leak").baseline == "expected"


@pytest.mark.parametrize(
    ("text", "needle"),
    [(None, "cannot read"), ("expected_failures:\n  - no.such_check\n", "'no.such_check' is not a check id"), ("[: x", "not valid YAML")],
)
def test_a_bad_baseline_path_is_a_value_error_before_anything_starts(tmp_path: Path, text: str | None, needle: str) -> None:
    path = tmp_path / "baseline.yaml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(BaselineError, match=re.escape(needle)) as exc:
        orsbench.check("http://127.0.0.1:9", baseline=path)  # nothing listens there: the baseline is read first
    assert isinstance(exc.value, ValueError) and str(path) in str(exc.value)
    with pytest.raises(TypeError, match="path of its YAML file"):
        orsbench.check("http://127.0.0.1:9", baseline=42)


# -- -q ---------------------------------------------------------------------------------------------------------
def test_quiet_prints_only_findings_and_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ``-q`` still printed every N/A and SKIP line."""
    code = main(["check", "--scenario", "echo", "-q"])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert not [line for line in lines if re.match(r"(PASS|SKIP|N/A)\s", line)], out
    assert any(line.startswith("WARN ") and "quality.answer_leak" in line for line in lines), out  # a finding stays
    assert re.search(r"\d+ passed, \d+ failed, \d+ warned, \d+ skipped", out) and "verdict: PASS" in out
    assert not [line for line in lines if line.startswith("── ")], out  # no probe progress


# -- usage errors ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [name for name in SUBCOMMANDS.names() if name != "load"])  # load: Locust's (below)
def test_every_usage_error_names_its_subcommand(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Before: an unknown flag of ``bench`` said ``orsbench: error:`` (argparse's top parser)."""
    with pytest.raises(SystemExit) as exc:
        main([command, "--no-such-flag"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err
    assert f"orsbench {command}: error:" in err.strip().splitlines()[-1], err


def test_an_unknown_flag_names_the_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--nope", "extra"])
    assert capsys.readouterr().err.strip().splitlines()[-1] == "orsbench bench: error: unrecognized arguments: --nope extra"
    with pytest.raises(SystemExit):
        main(["--nope"])
    assert capsys.readouterr().err.strip().endswith("orsbench: error: unrecognized arguments: --nope")


# -- orsbench load: Locust from any directory ------------------------------------------------------------------------
@needs("load")
def test_orsbench_load_runs_locust_from_any_directory(tmp_path: Path) -> None:
    """``locust -f orsbench/load.py`` names a path only a checkout's root has; ``orsbench load`` finds the locustfile
    wherever orsbench is installed and hands Locust every argument (an embedded echo mock here: no --host)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENREWARD_DISABLE_UPDATE_CHECK": "1"}
    argv = [sys.executable, "-m", "orsbench", "load", "--headless", "-u", "2", "-r", "2", "-t", "2s", "--only-summary", "--ors-calls", "2"]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    [episodes] = [line for line in done.stderr.splitlines() if re.match(r"\s*ORS\s+episode\s", line)][:1]
    assert int(episodes.split()[2]) > 0 and "Traceback" not in done.stderr, episodes  # requests, and none failed
    assert re.search(r"Aggregated\s+\d+\s+0\(0\.00%\)", done.stderr), done.stderr[-2000:]
    wrong = subprocess.run([*argv[:4], "--no-such-flag"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert wrong.returncode == 2 and "orsbench load: error: unrecognized arguments: --no-such-flag" in wrong.stderr, wrong.stderr[-2000:]


def test_ors_url_beside_ors_client_cmd_runs_both_packaged_modules(tmp_path: Path, ors_server_factory) -> None:
    """No paths, both options: the client cases and the server checks, not one replacing the other (collected only)."""
    from orsbench.clientcheck.reference import command

    server = ors_server_factory("echo")
    done = _pytest_in(tmp_path, "--collect-only", "-q", "--ors-url", server.url, "--ors-client-cmd", command(), "--ors-client-cases", "echo")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "test_client_case[echo]" in done.stdout and "test_ors_check[discovery.health]" in done.stdout
