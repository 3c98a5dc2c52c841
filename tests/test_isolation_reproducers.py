"""Every multi-session reproducer shows its defect again, against the broken server it came from.

A finding that involves several sessions is replayed with all of their requests in the order sent — the
other session's ``/delete`` included, requests that met sent together, the run's pauses kept — and its
sessions are deleted at the end (docs/protocol.md §15.8). "Shows" is judged the way the finding was:
the script runs in bash, its answers are parsed back into exchanges, they take the place of the ones
the run recorded, and the rules of §15 (:func:`orsbench.checks.scenes.judge`) find a problem of the
same kind again. The few findings that are not a scene's (ids, a ping's wait, an idle clock) are read
from the script's own output.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess

import pytest

from orsbench.checks import Options, Status, run_checks
from orsbench.checks.scenes import judge, through_batch
from orsbench.servers.faults.violations import ROUTER_PREFIX, VIOLATIONS
from orsbench.wire.evidence import Exchange
from orsbench.wire.sse import parse

pytestmark = pytest.mark.skipif(shutil.which("curl") is None or shutil.which("bash") is None, reason="needs curl and bash")

#: The scene each scene check reads, and which of its problems the check reports (as the check picks them).
SCENE_OF = {
    "isolation.interleaved_tasks": ("interleaved", lambda scene, p: True),
    "isolation.same_task_fresh": ("same_task", lambda scene, p: p.step < scene.measured["deleted_at"]),
    "isolation.delete_leaves_other": ("same_task", lambda scene, p: scene.measured["deleted_at"] < p.step < scene.measured["recreated_at"]),
    "isolation.recreated_sid_fresh": ("same_task", lambda scene, p: p.session == "C2"),
    "isolation.resume_own_result": ("resume", lambda scene, p: p.kind == "resume"),
    "isolation.concurrent_calls_own_task": ("concurrent_calls", lambda scene, p: True),
}
ISOLATION = sorted(n for n, v in VIOLATIONS.items() if v.breaks[0].startswith("isolation."))


@pytest.fixture(scope="module")
def router(ors_server_factory):
    return ors_server_factory("echo", faults=("violation-router",))


def replay(script: str) -> list[tuple[str, bytes]]:
    """Run a reproducer; its output cut at the ``### n:`` markers: ``[(marker line, what followed)]``."""
    done = subprocess.run(["bash"], input=script.encode(), capture_output=True, timeout=120, env={**os.environ})
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    blocks = re.split(rb"^(### \d+: [^\n]*)\n", done.stdout, flags=re.M)[1:]
    return [(blocks[i].decode(), blocks[i + 1]) for i in range(0, len(blocks), 2)]


def answered(block: bytes, sent: Exchange) -> Exchange:
    """One ``curl -i`` answer in the output, as an exchange for the request that was sent."""
    exchange = Exchange(sent.method, sent.url, sent.request_headers, sent.request_body)
    head, _, body = block[block.index(b"HTTP/1.1 ") :].partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    exchange.status = int(status_line.split()[1])
    exchange.headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines)}
    took = re.search(rb"\n\(took ([0-9.]+) s\)\n", body)
    if took is not None:
        exchange.elapsed = float(took.group(1))
        body = body[: took.start()]
    exchange.body = body
    if exchange.is_sse:
        exchange.sse = parse(body)
    return exchange


def took(block: bytes) -> float:
    return float(re.search(rb"\(took ([0-9.]+) s\)", block).group(1))


#: Checks whose defect is a race between calls sent at once: the replay breaks the same rule of the same scene, but
#: which call it lands on (a wrong answer, or a finish that belonged to another session) can differ from the run.
RACES = {"isolation.concurrent_calls_own_task"}


@pytest.mark.parametrize("name", ISOLATION)
def test_the_reproducer_of_each_isolation_defect_shows_it_again(name, router):
    violation = VIOLATIONS[name]
    report = run_checks(router.url + ROUTER_PREFIX + name, Options(env=violation.scenario, fuzz=0, tasks=(0, -1)))
    check_id = violation.breaks[0]
    result = report.result(check_id)
    assert result.status is Status.FAIL, result.message
    script = result.reproduce
    assert script and "### 1:" in script, script
    if '"$BASE"/create ' in script:
        assert "trap '" in script  # every session the script opens is deleted however it ends
    blocks = replay(script)
    facts = report.evidence.facts
    if check_id in SCENE_OF:
        scene_name, pick = SCENE_OF[check_id]
        scene = facts.isolation.scenes[scene_name]
        first = next(p for p in judge(scene, facts.isolation.controls, 30.0) if pick(scene, p))
        steps = scene.steps[: through_batch(scene, first.step) + 1]
        assert len(blocks) == len(steps), [m for m, _ in blocks]
        again = dataclasses.replace(
            scene, steps=[dataclasses.replace(s, exchange=answered(b, s.exchange)) for s, (_, b) in zip(steps, blocks)]
        )
        kinds = {p.kind for p in judge(again, facts.isolation.controls, 30.0) if pick(again, p)}
        if check_id in RACES:  # which call of the batch gets another session's answer is the race's to decide
            assert kinds, (first.message, script)
        else:
            assert first.kind in kinds, (first.message, kinds, script)
    elif check_id == "isolation.concurrent_create_distinct":
        ids = [answered(b, Exchange("POST", "", {}, b"")).task_id for _, b in blocks]
        assert len(ids) == 8 and len(set(ids)) < 8, ids
    elif check_id == "isolation.ping_during_call":
        ping = next(b for m, b in blocks if m.split()[3].endswith("/ping"))
        call = next(b for m, b in blocks if m.split()[3].endswith("/call"))
        assert took(ping) > 0.3 and took(call) > 0.6, script  # the ping waited for the 0.8 s call
    elif check_id == "isolation.ttl_per_session":
        pings = [answered(b, Exchange("POST", "", {}, b"")).status for m, b in blocks if m.split()[3].endswith("/ping")]
        assert pings[-1] == 404 and 200 in pings[-3:-1], pings  # alive while the other was pinged, reaped after
    else:
        pytest.fail(f"no way to read {check_id}'s reproducer")


def test_a_script_keeps_the_runs_pauses_and_sends_together_what_met(router):
    report = run_checks(router.url + ROUTER_PREFIX + "session-ids-racy", Options(env="echo", fuzz=0))
    script = report.result("isolation.concurrent_create_distinct").reproduce
    assert script.count("&\n") >= 8 and "\nwait\n" in script and 'rm -rf "$OUT_DIR"' in script
    report = run_checks(router.url + ROUTER_PREFIX + "idle-clock-server-wide", Options(env="echo", fuzz=0))
    assert "# the run waited here" in report.result("isolation.ttl_per_session").reproduce
