"""``orsbench proxy --grade-sample F``: a fraction of whole sessions graded, and the report says how many.

Sessions, not exchanges: a check judges a session as a whole (its ``/create`` before its calls, its
``/delete``), so a sample of exchanges would make correct clients fail. The sample is decided by a hash
of the session id, the same way for every request of the session and its ``/create_session``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from orsbench import protocol
from orsbench.bench import discover, drive
from orsbench.servers.launch import serve, start_proxy
from orsbench.wire.evidence import Exchange
from orsbench.wire.sample import SessionSample
from orsbench.wire.sse import parse


def _create_session(sid: str) -> Exchange:
    exchange = Exchange("POST", "http://127.0.0.1:9" + protocol.CREATE_SESSION, {}, b"", status=200)
    exchange.sse = parse(f"event: {protocol.EVENT_TASK_ID}\ndata: {sid}\n\n".encode())
    return exchange


def test_a_session_is_in_or_out_whole_decided_by_its_id():
    sample = SessionSample(0.3)
    sids = [f"sid-{n}" for n in range(2000)]
    taken = [sid for sid in sids if sample(_create_session(sid), protocol.CREATE_SESSION)]
    assert sample.sessions_seen == 2000 and sample.sessions_graded == len(taken)
    assert 450 < len(taken) < 750, len(taken)  # about 30 %
    for sid in sids[:50]:  # each later request of the session: the same decision as its /create_session
        call = Exchange("POST", "http://127.0.0.1:9/echo/call", {protocol.SESSION_HEADER.lower(): sid}, b"{}", status=200)
        assert sample(call, "/echo/call") is (sid in taken) and sample.starting(call) is (sid in taken)
    assert sample.sessions_seen == 2000, "only /create_session counts a session"
    discovery = Exchange("GET", "http://127.0.0.1:9/list_environments", {}, b"", status=200)
    assert sample(discovery, "/list_environments"), "requests in no session are always graded"
    assert SessionSample(1.0).takes("anything")
    with pytest.raises(ValueError, match="fraction"):
        SessionSample(0.0)


@pytest.mark.parametrize("value", ["0", "1.5", "x"])
def test_a_bad_fraction_is_a_usage_error(value):
    done = subprocess.run(
        [sys.executable, "-m", "orsbench", "proxy", "http://127.0.0.1:9", "--grade-sample", value],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "--grade-sample" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_the_proxy_grades_a_sample_of_whole_sessions_and_says_how_many(tmp_path):
    episodes = 60
    with serve("echo") as upstream:
        proxy = start_proxy(upstream.url, grade_sample=0.25, json_report=tmp_path / "proxy.json")
        try:
            result = drive(proxy.url, discover(proxy.url, calls=2), concurrency=4, duration=120, max_episodes=episodes)
        finally:
            proxy.stop()
    assert result.episodes == episodes and result.failures == 0
    report = json.loads((tmp_path / "proxy.json").read_text())
    sampled = report["summary"]["sampled"]
    assert sampled["fraction"] == 0.25 and sampled["sessions_seen"] == episodes
    assert 0 < sampled["sessions_graded"] < episodes, sampled
    checks = {c["id"]: c for c in report["checks"]}
    # Whole sessions: each graded one was seen from /create_session to /delete_session, so a correct client passes.
    assert checks["client.session_deleted"]["measured"]["sessions"] == sampled["sessions_graded"]
    assert [c["id"] for c in report["checks"] if c["status"] in ("fail", "error")] == []
