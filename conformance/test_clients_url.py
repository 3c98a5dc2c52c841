"""``orsbench clients URL`` on every built-in scenario: no false failure for a client where it works (issue 34).

Each scenario is served by the mock engine and played by ``orsbench clients URL`` with every installed client
target, the reference adapter and the JavaScript adapter (``examples/adapters/adapter.mjs``, where Node.js 18+ is
on PATH). Every row of a client the pinned defects predict to work there reads ``works`` or names the pinned upstream defect
that explains it on the player's episode (which may differ from the scenario's script: a wrong try rewarded 0.0
before the win); both adapters, which follow every rule, read ``works`` everywhere.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from orsbench.clientcheck.episodes import scenarios
from orsbench.clientcheck.reference import command as reference_command
from orsbench.clientcheck.results import NOT_INSTALLED
from orsbench.clients import cells as C
from orsbench.clients import live
from orsbench.clients.targets import CLIENT_TARGETS
from orsbench.scenarios import suite_params
from orsbench.servers.launch import start
from orsbench.verdict import Verdict

ADAPTER = Path(__file__).resolve().parents[1] / "examples" / "adapters" / "adapter.mjs"


def _node() -> str | None:
    node = shutil.which("node")
    if node is None:
        return None
    major = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip().lstrip("v").split(".")[0]
    return node if major.isdigit() and int(major) >= 18 else None


def _commands() -> list[str]:
    node = _node()
    return [reference_command()] + ([shlex.join([node, str(ADAPTER)])] if node else [])


@pytest.mark.parametrize("scenario", scenarios())
def test_every_client_works_on_the_scenario_where_it_works(scenario: str) -> None:
    server = start(scenario, params=suite_params(scenario))
    try:
        result = live.play_on_url(server.url, commands=_commands(), timeout=90)
    finally:
        server.stop()
    assert result.episode.calls >= 1, result.notes
    wrong = []
    for row in result.rows:
        if row.verdict == NOT_INSTALLED:
            continue
        shown = f"{row.client}: {row.words} — {row.why} (problems {row.problems}, defects {[d.id for d in row.defects]})"
        if row.command is not None:
            if row.verdict is not Verdict.WORKS:  # the adapters keep every rule
                wrong.append(shown)
            continue
        if C.predicted(C.Cell(row.client, "mock", scenario)) is not Verdict.WORKS:
            continue  # a pinned defect strikes on the scenario's own script: the matrix's conformance tests pin it
        if row.verdict is not Verdict.WORKS and not row.defects:
            # Not "works" on the player's episode: only where a pinned upstream defect explains it, named in the row
            # (the player's episode may differ from the scenario's script: a wrong try rewarded 0.0 before the win).
            wrong.append(shown)
    assert not wrong, "\n".join(wrong)
    assert {row.client for row in result.rows} >= {name for name in CLIENT_TARGETS.names()}
