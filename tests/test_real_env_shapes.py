"""Shapes of real third-party environments on which `orsbench clients URL` used to give a wrong diagnosis.

Each test serves a small environment of the same shape as one measured in BENCHMARKS.md ("clients URL on real
third-party environments") and asserts what a user must read there. The other shapes of that run are tested where
their fix lives: a game dealt in ``get_prompt`` (tests/test_isolation_own_state.py, ``PromptDealt``), an environment
whose every call raises (tests/test_one_verdict.py), a signed step reward past the player's budget
(tests/test_benchflow.py), a missing ``env_name`` (tests/test_one_verdict.py).
"""

from __future__ import annotations

import pytest

from orsbench.cli import main
from orsbench.servers.launch import start
from orsbench.servers.user_app import AppTarget

pytest.importorskip("openreward")


def test_a_create_slower_than_the_timeout_is_said_as_a_slow_setup_not_a_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    """zebra's shape: the puzzle is generated in __init__, so /create answers after seconds. Too short a --timeout is a
    usage error naming the fix (raise --timeout), never "/create refused a session (missing --secret?)"."""
    server = start(AppTarget.parse("tests/envs/slow_init.py:SlowInit"), env={"ORSBENCH_TEST_INIT_SECONDS": "4"})
    try:
        with pytest.raises(SystemExit) as exited:
            main(["clients", server.url, "--clients", "openreward", "--timeout", "1", "-q"])
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert "did not answer within 1 s" in err and "raise --timeout" in err and "missing --secret" not in err, err
        assert main(["clients", server.url, "--clients", "openreward", "--timeout", "30", "-q"]) == 0
        assert "openreward  works" in capsys.readouterr().out
    finally:
        server.stop()


def test_check_says_a_create_slower_than_the_timeout_is_a_slow_setup_naming_the_flag() -> None:
    """The same shape under ``orsbench check``: ``session.create`` fails (a trainer's client with that timeout would
    too), and the finding names ``--timeout`` and says why, instead of a bare transport error."""
    from orsbench.checks import Options, Status, run_checks

    server = start(AppTarget.parse("tests/envs/slow_init.py:SlowInit"), env={"ORSBENCH_TEST_INIT_SECONDS": "3"})
    try:
        report = run_checks(server.url, Options(timeout=1.0, fuzz=0), only=["session.create"])
        result = next(r for r in report.results if r.id == "session.create")
        assert result.status is Status.FAIL, result
        assert "took longer than --timeout 1 s" in result.message and "longer --timeout" in result.message, result.message
    finally:
        server.stop()
