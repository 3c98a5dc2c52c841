"""platoon 0.4.0 as a client target: its Python 3.12 environment, its warm fork server, and what it does on the wire.

The environment is built on first use (:meth:`~orsbench.clients.interpreters.Venv.ensure`; ``.ci/run`` builds it
before the suite); where this machine has no Python 3.12 the live tests skip, saying so. The matrix cells and
their pinned defects are in ``conformance/test_clients.py``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from orsbench.clients import interpreters
from orsbench.clients.interpreters import Command, Venv, WarmServer
from orsbench.clients.targets import CLIENT_TARGETS
from orsbench.upstream import defects as D
from orsbench.verdict import Verdict

PLATOON = CLIENT_TARGETS["platoon"]


@pytest.fixture(scope="module")
def platoon_ready() -> None:
    assert PLATOON.command is not None
    if (why := PLATOON.command.venv.ensure()) is not None:
        pytest.skip(f"platoon is not played here: {why}")


def test_the_record_names_a_command_in_a_python_312_venv() -> None:
    command = PLATOON.command
    assert command is not None and command.venv.python == "3.12"
    assert PLATOON.version == "0.4.0"  # the pin, whether or not the environment is built here
    assert (interpreters.COMMANDS / command.script).is_file()
    assert command.argv[0] == str(command.venv.interpreter)


def test_every_targets_environment_is_one_the_build_command_builds() -> None:
    """``python -m orsbench.clients.interpreters build`` builds :data:`~orsbench.clients.interpreters.VENVS` (no import of the targets)."""
    used = {t.command.venv for t in CLIENT_TARGETS.values() if t.command is not None}
    assert used and used <= set(interpreters.VENVS)


def test_a_missing_python_is_a_stated_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(interpreters.VENVS_VARIABLE, str(tmp_path))
    monkeypatch.setattr(interpreters, "find_python", lambda version: None)
    venv = Venv("nowhere", "3.99", packages=("x==1",))
    assert not venv.ready
    assert venv.ensure() == "no Python 3.99 on this machine (python3.99 not on PATH, none under ~/.pyenv)"
    target = type(PLATOON)("t", "x", "t", command=Command(venv, "platoon_ors.py"))
    assert not target.installed and "no Python 3.99" in target.install_hint


def test_a_built_environment_is_ready_only_with_its_own_pins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(interpreters.VENVS_VARIABLE, str(tmp_path))
    venv = Venv("v", "3.12", packages=("a==1",))
    (venv.path / "bin").mkdir(parents=True)
    venv.interpreter.symlink_to(sys.executable)
    (venv.path / interpreters.MARKER).write_text(json.dumps(venv.spec))
    assert venv.ready
    assert not Venv("v", "3.12", packages=("a==2",)).ready  # a changed pin rebuilds it


def test_the_fork_server_runs_the_adapter_per_connection(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The fork server (run here by this Python: it imports nothing of orsbench) hands each episode the adapter's exit status."""
    monkeypatch.setenv(interpreters.VENVS_VARIABLE, str(tmp_path))
    venv = Venv("this", "3", packages=())
    (venv.path / "bin").mkdir(parents=True)
    venv.interpreter.symlink_to(sys.executable)
    server = WarmServer.start(venv, "platoon_ors.py", ())
    try:
        err = tmp_path / "err.txt"
        with err.open("w") as sink:
            # No contract variables: the adapter's usage error (exit 2), written to the episode's own stderr.
            assert server.play({"PATH": os.environ.get("PATH", "")}, stdout=sink.fileno(), stderr=sink.fileno()) == 2
        assert "ORSBENCH_URL, ORSBENCH_ENV, ORSBENCH_SCRIPT, ORSBENCH_OUT not set" in err.read_text()
    finally:
        server.stop()
    assert not server.alive


def _check_client(cases: str) -> dict[str, str]:
    """``orsbench check-client`` on platoon's built-in adapter: ``{check id[case]: status}``.

    A cold start (a fresh Python 3.12 importing openreward) takes seconds, more on a busy machine: 60 s a case.
    """
    from orsbench.cli import main

    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"platoon-{os.getpid()}-{cases.replace(',', '_')}.json"
    code = main(["check-client", "--cmd", f"{sys.executable} -m orsbench.clients.adapter platoon", "--cases", cases, "--timeout", "60", "--json", str(out)])
    report = json.loads(out.read_text())
    out.unlink()
    assert code in (0, 1), code
    return {r["id"]: r["status"] for r in report["checks"]}


@pytest.fixture(scope="module")
def echo_checks(platoon_ready: None) -> dict[str, str]:
    return _check_client("echo,sparse-reward+tool-raises")


def test_check_client_passes_platoon_on_echo_but_the_env_name_rule(echo_checks: dict[str, str]) -> None:
    failed = sorted(k for k, v in echo_checks.items() if v in ("fail", "error") and k.endswith("[echo]"))
    assert failed == [] and echo_checks["client.env_name[echo]"] == "warn", (failed, echo_checks["client.env_name[echo]"])


@D.DEFECTS["env-name-not-sent"].mark()
def test_platoon_names_the_environment_on_create(echo_checks: dict[str, str]) -> None:
    assert echo_checks["client.env_name[echo]"] == "pass"


def test_a_raising_tool_is_an_error_result_platoon_reports(echo_checks: dict[str, str]) -> None:
    case = "[sparse-reward+tool-raises]"
    assert echo_checks["client.failure_as_error" + case] == "pass"
    assert echo_checks["client.tool_runs" + case] == "pass"


def test_matrix_url_trains_on_the_finishing_reward_its_profile_predicts(platoon_ready: None) -> None:
    """The checker's player loses sparse-reward (reward -1.0 on the finishing call): platoon trains on exactly that."""
    from orsbench.clients import live
    from orsbench.servers.launch import start

    server = start("sparse-reward")
    try:
        result = live.play_on_url(server.url, clients=["platoon"], timeout=60)
    finally:
        server.stop()
    row = result.rows[0]
    assert row.consumer == f"episode reward {result.episode.reward!r}", row
    assert row.consumer_confirmed and row.verdict == Verdict.WORKS and row.trains, row
