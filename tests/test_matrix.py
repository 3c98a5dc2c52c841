"""``orsbench matrix``: the JSON contract, a reduced live matrix (CI), and docs/compatibility.md in sync."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orsbench.cli import main
from orsbench.clients import cells as C
from orsbench.clients import matrix as M
from orsbench.clients.targets import CLIENT_TARGETS
from orsbench.reports import clients as report

DOC = Path(__file__).parent.parent / "docs" / "compatibility.md"


def test_compatibility_doc_is_the_generated_matrix() -> None:
    """Regenerate with ``orsbench matrix --predicted --markdown docs/compatibility.md``."""
    clients, servers = CLIENT_TARGETS.names(), C.servers()
    expected = report.matrix_markdown(M.predicted(C.plan(clients, servers), clients, servers))
    assert DOC.read_text() == expected, "run: orsbench matrix --predicted --markdown docs/compatibility.md"


def test_server_axis_comes_from_the_implementations_registry() -> None:
    from orsbench.servers.implementations import ors_servers

    assert C.servers() == ors_servers()
    assert {cell.server for cell in C.plan()} == set(C.servers())


def test_every_client_defect_lists_under_the_clients_it_reaches() -> None:
    result = M.predicted(C.plan(), CLIENT_TARGETS.names(), C.servers()).to_json()
    for row in result["cells"]:
        listed = {d["id"] for d in result["clients"][row["client"]]["defects"]}
        listed |= {d["id"] for d in result["server_defects"][row["server"]]}
        assert set(row["defects"]) <= listed, row


@pytest.mark.parametrize(
    "argv", [["--clients", "nope"], ["--servers", "floor"], ["--profiles", "bogus"], ["--jobs", "0"], ["--parallel", "0"], ["--budget", "0"]]
)
def test_unknown_names_are_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["matrix", *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "orsbench matrix: error:" in err and "Traceback" not in err


def test_reduced_matrix_runs_and_keeps_the_json_contract(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The CI matrix: two clients on the mock, two scenarios' worth of cells plus two profiles; every verdict as predicted."""
    out, md = tmp_path / "m.json", tmp_path / "m.md"
    code = main(
        ["matrix", "--clients", "openreward,ors", "--servers", "mock", "--profiles", "none,tool-raises",
         "--json", str(out), "--markdown", str(md), "--budget", "240"]
    )
    assert code == 0
    result = json.loads(out.read_text())
    assert set(result) >= {"clients", "servers", "cells"}
    assert result["servers"] == ["mock"]
    for name in ("openreward", "ors"):
        info = result["clients"][name]
        assert info["version"] and all(set(d) >= {"id", "summary"} for d in info["defects"])
    assert len(result["cells"]) == 2 * len(C.plan(["openreward"], ["mock"], ["none", "tool-raises"]))
    for row in result["cells"]:
        cell = C.Cell(row["client"], row["server"], row["scenario"], row["profile"])
        assert row["verdict"] == C.predicted(cell), row
    assert "[1/" in capsys.readouterr().err, "progress lines"
    assert md.read_text().startswith("# Client compatibility")


@pytest.mark.parametrize(("client", "case"), [("openreward", "echo"), ("trl", "sparse-reward+setup-failure")])
def test_a_builtin_adapter_through_check_client_gets_the_matrix_verdict(client: str, case: str) -> None:
    """One grading path: ``python -m orsbench.clients.adapter NAME`` run by check-client's runner (a subprocess,
    not the matrix's fork) and graded by the same checks gives the verdict the matrix predicts for that cell."""
    pytest.importorskip("trl")
    from orsbench.clientcheck import get_case, grade, run_case
    from orsbench.clientcheck.judgement import judge

    run = run_case(f"python -m orsbench.clients.adapter {client}", get_case(case), timeout=180)
    results = grade(run)
    profile = case.split("+", 1)[1] if "+" in case else None
    cell = C.Cell(client, "mock", case.split("+", 1)[0], profile)
    judgement = judge(run, results)
    assert judgement.verdict == C.predicted(cell), [(r.id, r.status, r.message) for r in results]
    # the rules the one verdict record says were broken (a missing env_name on the default environment is a warning)
    assert set(judgement.rules) == set(C.rule_defects(cell)), (judgement.rules, [(r.id, r.status) for r in results])


def test_what_a_forked_client_prints_stays_with_its_outcome(capfd: pytest.CaptureFixture[str]) -> None:
    """A matrix plays hundreds of episodes: the clients' own warnings must not spill onto its terminal.

    The child's stdout and stderr go to a file; the outcome keeps their tail (as check-client keeps a command's).
    """
    import sys

    from orsbench.clientcheck.episodes import script
    from orsbench.clients.run import ClientRun
    from orsbench.config import ServerConfig
    from orsbench.servers.launch import serve

    def chatty() -> None:
        print("marker on stdout from the client", flush=True)
        print("marker on stderr from the client", file=sys.stderr, flush=True)

    with serve("echo", config=ServerConfig(request_log=True)) as server:
        capfd.readouterr()
        outcome = ClientRun("openreward", server, script("echo"), 60, prepare=chatty).wait()
    seen = capfd.readouterr()
    assert outcome.survived, outcome.describe()
    assert "marker on stdout from the client" in outcome.output and "marker on stderr from the client" in outcome.output
    assert "marker" not in seen.out and "marker" not in seen.err


def test_play_waits_for_an_episode_longer_than_the_stop_grace() -> None:
    """``play()`` (and ``ClientRun(...).finish()``) wait for the client: finishing at once SIGTERMed every
    episode that took longer than the 1 s grace (seen: inspect killed -9 at 1.1 s on echo)."""
    from orsbench.clientcheck.episodes import Script, script
    from orsbench.clientcheck.process import GRACE_S
    from orsbench.clients.run import play
    from orsbench.config import ServerConfig
    from orsbench.servers.launch import serve

    [step] = script("echo").steps
    slow = Script("echo", (type(step)(step.tool, step.args, step.expect, pause_s=GRACE_S + 1.0),))
    with serve("echo", config=ServerConfig(request_log=True)) as server:
        outcome = play("openreward", server, slow, 60)
    assert outcome.survived and outcome.elapsed > GRACE_S + 1.0, outcome.describe()
