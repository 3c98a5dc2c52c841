"""``orsbench check``'s gameplay and fuzz flags: --fuzz N, --no-fuzz, --tasks, --strict."""

from __future__ import annotations

import json

import pytest

from orsbench.cli import main


def test_strict_passes_echo_whose_unprovokable_checks_are_not_applicable(capsys) -> None:
    # echo has no slow tool: call.resume_running and call.keepalive_interval have nothing to judge there, which
    # is no gap in coverage (n/a), so --strict passes a correct server (a required check that could have run
    # and did not still fails it: tests/test_user_envs.py, never_finishes).
    code = main(["check", "--scenario", "echo", "--no-fuzz", "--tasks", "0,-1", "--json", "-"])
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    statuses = {c["id"]: c["status"] for c in report["checks"]}
    assert code == 0 and report["summary"]["required_not_run"] == []
    assert statuses["call.resume_running"] == statuses["call.keepalive_interval"] == "n/a"
    assert statuses["isolation.ping_during_call"] == "n/a"  # no echo call lasts long enough to ping during it
    not_applicable = sum(1 for status in statuses.values() if status == "n/a")
    assert "did not run" not in captured.err and f"{not_applicable} not applicable" in captured.err
    assert report["options"]["fuzz"] == 0 and report["options"]["tasks"] == [0, -1]
    assert main(["check", "--scenario", "echo", "--no-fuzz", "--strict", "-q"]) == 0


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
