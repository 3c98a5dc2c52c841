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
