"""The proxy's passive grader keeps bounded evidence and gives the same verdicts (``--evidence-limit``).

No servers: synthetic echo traffic (:mod:`tests.passive_traffic`) is fed to
:class:`~orsbench.checks.passive.PassiveGrader` directly.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable

from orsbench import protocol
from orsbench.checks.model import Status
from orsbench.checks.passive import PassiveGrader
from orsbench.checks.runner import Report
from orsbench.reports import TerminalReporter, render_markdown
from orsbench.reports.html import render_check
from orsbench.wire.evidence import Exchange
from tests.passive_traffic import call, create, exchange, output, traffic

#: Named first-of-a-kind exchanges a grader may keep besides its limit (every ``_first`` name, generously).
NAMED = 80


def grade(exchanges: Iterable[Exchange], limit: int | None) -> tuple[PassiveGrader, Report]:
    grader = PassiveGrader("http://127.0.0.1:9", limit=limit)
    for ex in exchanges:
        grader(ex)
    return grader, grader.report()


def mixed_traffic(episodes: int) -> list[Exchange]:
    """Echo episodes plus what the folded checks count besides: 4xx answers with a detail, a refused unknown sid."""
    out = list(traffic(episodes))
    past_end = {"split": "train", "index": 99}
    for n in range(0, len(out), 37):
        out.insert(n, exchange("POST", protocol.env_path("echo", protocol.TASK), past_end, status=422, answer={"detail": "out of range"}))
    out.append(exchange("POST", protocol.PING, sid="never-created", status=404, answer={"detail": "unknown session"}))
    return out


def test_a_tiny_limit_gives_every_check_the_same_status_and_message_as_no_limit():
    feed = mixed_traffic(300)
    bounded_grader, bounded = grade(feed, limit=5)
    _, unbounded = grade(feed, limit=None)
    assert bounded.folded > 1000 and unbounded.folded == 0
    assert bounded.exchanges == unbounded.exchanges == len(feed)
    assert [(r.id, r.status, r.message) for r in bounded.results] == [(r.id, r.status, r.message) for r in unbounded.results]
    passing = {r.id for r in bounded.results if r.status is Status.PASS}
    assert {"http.json_content_type", "http.no_server_errors", "http.error_detail", "call.end_event", "reward.well_formed"} <= passing
    assert f"{len(feed)} exchange(s), no 5xx" == bounded.result("http.no_server_errors").message


def test_reports_under_the_limit_say_nothing_of_folding_and_folded_ones_say_how_much():
    feed = list(traffic(20))
    _, under = grade(feed, limit=1000)
    assert "evidence" not in under.summary() and "folded" not in render_check(under)
    _, over = grade(feed, limit=5)
    assert over.summary()["evidence"] == {"kept": over.exchanges - over.folded, "folded": over.folded}
    assert f"{over.folded:,} folded into counts" in render_check(over)
    assert json.loads(json.dumps(over.to_json()))["summary"]["evidence"]["folded"] == over.folded
    assert "folded" not in render_markdown(under) and f"({over.folded:,} folded into counts)" in render_markdown(over)
    for report, says in ((under, False), (over, True)):
        screen = io.StringIO()
        TerminalReporter(screen, quiet=True).finish(report)
        assert (f"({report.folded:,} folded into counts)" in screen.getvalue()) is says, screen.getvalue()


def test_stored_evidence_stays_bounded_however_much_traffic_flows():
    limit = 100
    grader = PassiveGrader("http://127.0.0.1:9", limit=limit)
    fed = 0
    for ex in traffic(5000):
        grader(ex)
        fed += 1
        assert len(grader.evidence.exchanges) <= limit + NAMED
    assert fed == 25002
    assert len(grader.facts["fresh_calls"]) <= limit + NAMED
    assert grader.report().exchanges == fed


def test_a_failure_arriving_after_the_limit_still_fails_with_its_exchange_as_evidence():
    feed = list(traffic(200))
    crash = exchange("GET", protocol.env_path("echo", protocol.TOOLS), status=500, answer={"detail": "boom"})
    prompt = protocol.env_path("echo", protocol.PROMPT)
    mislabelled = exchange("POST", prompt, sid="sid-3", answer=[{"type": "text", "text": "x"}], headers={"content-type": "text/plain"})
    late = create("late")
    bool_reward = call("late", "late-task", "hi", output("hi", True, False))
    _, report = grade([*feed, crash, mislabelled, late, bool_reward, *traffic(50)], limit=10)
    assert report.folded > 900
    for check_id, culprit in (("http.no_server_errors", crash), ("http.json_content_type", mislabelled), ("reward.well_formed", bool_reward)):
        result = report.result(check_id)
        assert result.status is Status.FAIL, (check_id, result.message)
        assert any(e["body"] == culprit.body.decode() for e in result.evidence), check_id


def test_a_result_that_is_no_run_tool_output_past_the_limit_fails_end_json_and_breaks_nothing():
    feed = list(traffic(50))
    late = create("late")
    broken = [call("late", f"bad-{n}", "hi", {"ok": True, "output": "not an object"}) for n in range(5)]
    _, report = grade([*feed, late, *broken, *traffic(20)], limit=10)
    result = report.result("call.end_json")
    assert result.status is Status.FAIL and 'ok:true without an "output" object' in result.message
    assert len(result.evidence) == 3
