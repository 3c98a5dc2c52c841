"""The stateful explorer (``orsbench check --explore N``): random interleavings of sessions, checked every step.

* on a correct server it breaks no rule, and it is seeded: the same seed takes the same steps;
* on a server whose sessions leak it finds the leak, shrinks it to a short interleaving, and that
  interleaving's reproducer breaks the same rule again when replayed;
* its examples database is kept where the user says; the checks fold in what it found.
"""

from __future__ import annotations

import dataclasses
import subprocess

import pytest

from orsbench.checks import Options, Status, run_checks
from orsbench.checks.evidence import Evidence
from orsbench.checks.isolation import interleaved_tasks
from orsbench.checks.scenes import Explored, Found, Isolation, Scene, judge
from orsbench.cli import main
from orsbench.servers.faults.violations import ROUTER_PREFIX
from orsbench.wire.evidence import Exchange
from orsbench.wire.reproduce import reproducer

from tests.test_isolation_reproducers import answered, replay


def _explore(url: str, seed: int, steps: int = 30, **options) -> Isolation:
    report = run_checks(
        url, Options(env="echo", fuzz=0, explore=steps, explore_seed=seed, play_seconds=90, **options), only=["isolation.interleaved_tasks"]
    )
    facts = report.evidence.facts.isolation
    assert facts.explored is not None and report.ids(Status.ERROR) == []
    return facts


def test_on_a_correct_server_the_explorer_breaks_nothing_and_the_seed_fixes_its_steps(ors_server_factory):
    server = ors_server_factory("echo")
    first, again, other = (_explore(server.url, seed).explored for seed in (5, 5, 6))
    assert first.found == [] and again.found == [] and other.found == []
    assert first.steps >= 30 or first.stopped, (first.steps, first.stopped)
    assert first.trail == again.trail and first.trail != other.trail


def test_a_leak_is_found_shrunk_and_replayed(ors_server_factory, tmp_path):
    router = ors_server_factory("echo", faults=("violation-router",))
    url = router.url + ROUTER_PREFIX + "newest-task-serves-all"
    facts = _explore(url, seed=1, steps=60, explore_db=str(tmp_path / "db"))
    explored = facts.explored
    found = explored.of("isolation.interleaved_tasks") or explored.of("isolation.concurrent_calls_own_task")
    assert found is not None, explored
    assert 3 <= len(found.program) <= 10, found.program  # at least: two sessions on two tasks, then a request
    assert any(p.startswith("create") for p in found.program) and found.scene is not None
    assert any((tmp_path / "db").rglob("*")), "hypothesis' examples database was not kept where asked"
    script = reproducer(found.evidence, sequence=found.replay, note=found.message)
    blocks = replay(script)
    assert len(blocks) == len(found.scene.steps)
    again = dataclasses.replace(
        found.scene, steps=[dataclasses.replace(s, exchange=answered(b, s.exchange)) for s, (_, b) in zip(found.scene.steps, blocks)]
    )
    assert judge(again, facts.controls, 30.0), script  # the replayed interleaving breaks a rule again


def test_what_the_explorer_found_fails_the_check_its_rule_belongs_to():
    shown = Exchange("GET", "http://127.0.0.1:9/echo/prompt", {"X-Session-ID": "a"}, b"", status=200, body=b"[]")
    found = Found("isolation.interleaved_tasks", "session A was shown task 5's prompt", [shown], [shown], ["create A on task 0", "create B on task 5", "prompt A"])
    ev = Evidence("http://127.0.0.1:9", Options(explore=10))
    ev.facts.isolation = Isolation(
        scenes={"interleaved": Scene("interleaved", skip="tasks look alike", inapplicable=True)},
        explored=Explored(seed=3, budget=10, steps=10, examples=2, found=[found]),
    )
    outcome = interleaved_tasks(ev)
    assert outcome.status is Status.FAIL and "after 3 steps (create A on task 0; create B on task 5; prompt A)" in outcome.message
    assert outcome.replay == [shown] and outcome.measured["seed"] == 3
    ev.facts.isolation.explored = Explored(seed=3, budget=10, steps=10, examples=2)
    assert interleaved_tasks(ev).status is Status.NOT_APPLICABLE  # nothing found: the scene's own verdict stands


def test_the_explore_flags(tmp_path, capsys):
    a_file = tmp_path / "f"
    a_file.write_text("")
    with pytest.raises(SystemExit) as stop:
        main(["check", "--scenario", "echo", "--explore", "5", "--explore-db", str(a_file)])
    assert stop.value.code == 2 and "is a file; give a folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main(["check", "--scenario", "echo", "--explore", "-1"])
    assert stop.value.code == 2
    done = subprocess.run(["orsbench", "check", "--help"], capture_output=True, text=True)
    assert "--explore N" in done.stdout and "--explore-seed" in done.stdout and "--explore-db DIR" in done.stdout
