"""``orsbench check``'s gameplay and fuzz flags: --fuzz N, --no-fuzz, --tasks, --strict."""

from __future__ import annotations

import json

import pytest

from orsbench.cli import main


def test_strict_fails_on_required_checks_that_did_not_run(capsys) -> None:
    # echo has no slow tool, so call.resume_running and call.keepalive_interval cannot run.
    code = main(["check", "--scenario", "echo", "--no-fuzz", "--tasks", "0,-1", "--json", "-"])
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    not_run = {item["id"]: item["why"] for item in report["summary"]["required_not_run"]}
    assert code == 0 and "call.resume_running" in not_run and all(not_run.values())
    assert "required check(s) did not run; --strict fails on them" in captured.err
    assert report["options"]["fuzz"] == 0 and report["options"]["tasks"] == [0, -1]
    assert main(["check", "--scenario", "echo", "--no-fuzz", "--strict", "-q"]) == 1
    assert "(--strict)" in capsys.readouterr().out


def test_fuzz_count_is_used(capsys) -> None:
    assert main(["check", "--scenario", "echo", "--fuzz", "3", "--json", "-", "--only", "tool.*"]) == 0
    report = json.loads(capsys.readouterr().out)
    result = next(c for c in report["checks"] if c["id"] == "tool.no_crash_on_valid_input")
    assert result["measured"]["fuzz"]["echo"]["calls"] <= 3


@pytest.mark.parametrize("argv", [["--fuzz", "-1"], ["--fuzz", "many"], ["--tasks", "first"], ["--tasks", ","]])
def test_bad_play_flags_are_usage_errors(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["check", "--scenario", "echo", *argv])
    assert exit_info.value.code == 2
    assert argv[0] in capsys.readouterr().err


def test_without_the_fuzz_packages_the_boundaries_still_run_and_the_report_says_so(tmp_path) -> None:
    from tests.test_install import base_install  # the base install: extras' packages unimportable

    done = base_install(tmp_path, "check", "--scenario", "echo", "--json", "-", "--only", "tool.*")
    assert done.returncode == 0, done.stderr[-2000:]
    result = next(c for c in json.loads(done.stdout)["checks"] if c["id"] == "tool.no_crash_on_valid_input")
    assert result["status"] == "pass" and 'boundary inputs only: pip install "orsbench[conformance]"' in result["message"]
