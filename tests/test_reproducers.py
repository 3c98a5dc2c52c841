"""Every failing check's ``curl`` reproducer shows the failure again, against the broken server it came from.

"Shows" is judged by the check itself: the reproducer runs in ``bash``, its
HTTP answers are parsed back into exchanges, they replace the exchanges the
run recorded, and the same check, graded on that evidence, fails again. A
reproducer that sent the wrong request, lost the session or mangled a body
would not.

The sample is the broken servers the issue lists (JSON routes and event
streams, with and without a session), all served by one violation-router
process.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess

import pytest

from orsbench.checks import Options, Status, load_checks, run_checks
from orsbench.checks.model import evidence_summaries
from orsbench.servers.faults.violations import ROUTER_PREFIX
from orsbench.wire.evidence import Exchange
from orsbench.wire.reproduce import MAX_EVIDENCE, reproducer, steps
from orsbench.wire.sse import parse

from tests.test_check_violations import ISSUE_LIST

pytestmark = pytest.mark.skipif(shutil.which("curl") is None or shutil.which("bash") is None, reason="needs curl and bash")


@pytest.fixture(scope="module")
def router(ors_server_factory):
    return ors_server_factory("echo", faults=("violation-router",))


def answers(output: bytes, sent: list[Exchange]) -> list[Exchange]:
    """The ``curl -i`` answers in ``output``, one per request sent, as exchanges."""
    blocks = output.split(b"HTTP/1.1 ")[1:]
    assert len(blocks) == len(sent), output.decode(errors="replace")[:2000]
    out = []
    for block, request in zip(blocks, sent):
        head, _, body = block.partition(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines)}
        if body.endswith(b"\n") and not body.endswith(b"\n\n"):  # the `; echo` between requests
            body = body[:-1]
        exchange = Exchange(request.method, request.url, request.request_headers, request.request_body)
        exchange.status, exchange.headers, exchange.body = int(status_line.split()[0]), headers, body
        if exchange.is_sse:
            exchange.sse = parse(body)
        out.append(exchange)
    return out


def shown_by(result, ev) -> list[Exchange]:
    """The exchanges a check showed when it was graded (found in the run's history by their report summaries)."""
    return [next(ex for ex in ev.history if evidence_summaries([ex])[0] == item) for item in result.evidence[:MAX_EVIDENCE]]


def replay(script: str, shown: list[Exchange], ev) -> dict[int, Exchange]:
    """Run a reproducer; its answers, keyed by the identity of the recorded exchange each one re-sends."""
    sent, _ = steps(shown, ev.history)
    run = subprocess.run(["bash", "-c", script], capture_output=True, timeout=60)
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    return dict(zip(map(id, sent), answers(run.stdout, sent)))


@pytest.mark.parametrize("fault", sorted(ISSUE_LIST))
def test_each_reproducer_shows_its_failure_again(fault, router):
    report = run_checks(router.url + ROUTER_PREFIX + fault, Options(env="echo", fuzz=0, timeout=10))
    ev = report.evidence
    assert ev is not None
    failing = [r for r in report.results if r.status is Status.FAIL and r.evidence]
    assert ISSUE_LIST[fault] in {r.id for r in failing}
    for result in failing:
        assert result.reproduce, result.id
        shown = shown_by(result, ev)
        script = reproducer(shown, ev.history)
        assert script is not None and result.reproduce.endswith(script)
        replayed = replay(result.reproduce, shown, ev)
        for original in shown:
            again_seen = replayed[id(original)]
            assert again_seen.status == original.status, (result.id, again_seen.body[:300])
            if original.sse is not None:
                assert [e.event for e in again_seen.sse.events] == [e.event for e in original.sse.events], result.id
        assert regrade(result.id, ev, replayed).status is Status.FAIL, (result.id, result.reproduce)


def regrade(check_id: str, ev, replayed: dict[int, Exchange]):
    """The check graded again, with the exchanges the reproducer re-sent in place of the recorded ones."""
    again = dataclasses.replace(ev, exchanges={k: replayed.get(id(v), v) for k, v in ev.exchanges.items()})
    return load_checks()[check_id].fn(again)


def test_the_same_reproducer_against_a_healthy_server_passes(router):
    """The control: the judgement above can tell a broken answer from a right one.

    The router serves a healthy engine at its root, so the reproducer of
    ``ping-after-delete-200`` with the fault's prefix taken out of ``BASE``
    talks to a server that deletes sessions properly, and the check passes.
    """
    fault = "ping-after-delete-200"
    report = run_checks(router.url + ROUTER_PREFIX + fault, Options(env="echo", fuzz=0, timeout=10))
    ev = report.evidence
    result = report.result(ISSUE_LIST[fault])
    assert result.status is Status.FAIL and result.reproduce
    healthy = result.reproduce.replace(ROUTER_PREFIX + fault, "")
    replayed = replay(healthy, shown_by(result, ev), ev)
    assert regrade(result.id, ev, replayed).status is Status.PASS



def test_a_reproducer_replays_against_BASE_from_the_environment_and_deletes_its_sessions(ors_server_factory):
    """Issue 27: after ``--serve``/``--app`` the server a run checked is gone, and a replay must leave no session open.

    The run checks a server orsbench started and stopped (as ``--serve`` does); the reproducer is
    replayed with ``BASE`` pointing at another server broken the same way: the failure shows there,
    and every session the script opened is deleted when it ends.
    """
    from orsbench.config import ServerConfig
    from orsbench.servers.launch import start

    gone = start("echo", config=ServerConfig(faults=("reward-bool",)))
    try:
        report = run_checks(gone.url, Options(fuzz=0, timeout=10), only=["reward.well_formed"])
    finally:
        gone.stop()
    script = report.result("reward.well_formed").reproduce
    assert script is not None and "/create" in script and gone.url in script  # the default is the run's server

    other = ors_server_factory("echo", faults=("reward-bool",))
    before = other.stats()
    run = subprocess.run(["sh", "-c", script], capture_output=True, timeout=90, env={**os.environ, "BASE": other.url})
    after = other.stats()
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    assert b'"reward":true' in run.stdout or b'"reward":false' in run.stdout, run.stdout[-600:]  # the finding, again
    created = after["sessions_created"] - before["sessions_created"]
    assert created >= 1 and after["sessions_deleted"] - before["sessions_deleted"] == created
    assert after["active_sessions"] == before["active_sessions"]
