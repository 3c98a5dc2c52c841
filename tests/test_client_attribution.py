"""Requests of many clients at once, each filed under its own session (issue 26 item 3).

A flat log mixes a trainer's sessions: a ``/create_session`` that session B sends 20 ms after
session A's 503 looks like A retrying too soon. These tests show the trap is real (grading the
log as one client fails ``client.retry_after``), and that attribution by session id and by
connection (``orsbench/clientcheck/attribution.py``) gives no false failure — on made-up traffic,
and on the real traffic of 64 sessions at once against a mock answering 25 % of requests 5xx,
with one connection per session (TRL's topology) and with one shared pool.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from orsbench import protocol
from orsbench.checks.model import Status
from orsbench.clientcheck.attribution import Attributor, Episode
from orsbench.clientcheck.checks import Context, retry_after
from orsbench.clientcheck.live import grade_episode, traffic_checks
from orsbench.clientcheck.traffic import Seen, from_log, group
from orsbench.config import ServerConfig
from orsbench.scenarios import get_scenario
from orsbench.servers.launch import serve
from orsbench.wire.evidence import Exchange
from orsbench.wire.sse import parse

SESSION = protocol.SESSION_HEADER.lower()


def seen(path: str, peer: str, at: float, status: int, *, sid: str | None = None, hands_out: str | None = None) -> Seen:
    """A request as a live grader sees it; a 503 carries Retry-After: 1; ``hands_out``: the sid a /create_session gave."""
    body = f"event: task_id\ndata: {hands_out}\n\nevent: end\ndata: \n\n".encode() if hands_out else b"{}"
    headers = {"retry-after": "1"} if status == 503 else {}
    if hands_out:
        headers["content-type"] = "text/event-stream"
    exchange = Exchange("POST", path, {SESSION: sid} if sid else {}, b"", status, headers, body, started_at=at, elapsed=0.005, peer=peer)
    if hands_out:
        exchange.sse = parse(body)
    return Seen(exchange, path, True, None, sid)


def ended(requests: list[Seen]) -> list[Episode]:
    """Feed ``requests`` (each told at its start and at its end, in time order) and close; the episodes that ended."""
    out: list[Episode] = []
    attributor = Attributor(out.append)
    events = sorted(
        [(r.exchange.started_at, 0, r) for r in requests] + [(r.exchange.started_at + r.exchange.elapsed, 1, r) for r in requests],
        key=lambda e: (e[0], e[1]),
    )
    for _, kind, request in events:
        if kind == 0:
            attributor.started(request.exchange.peer, request.exchange.started_at, request.path)
        else:
            attributor.seen(request)
    attributor.close()
    return out


def session(sid: str, peer: str, at: float) -> list[Seen]:
    """One short session: its sid handed out, opened and deleted."""
    return [
        seen(protocol.CREATE_SESSION, peer, at, 200, hands_out=sid),
        seen(protocol.CREATE, peer, at + 0.01, 200, sid=sid),
        seen(protocol.DELETE, peer, at + 0.02, 200, sid=sid),
    ]


def retry_verdicts(episodes: list[Episode]) -> dict[str, Status]:
    verdicts = {}
    for episode in episodes:
        outcome = retry_after(Context(None, episode.traffic()))
        if outcome is not None:
            verdicts[episode.key] = outcome.status
    return verdicts


def test_another_sessions_first_request_on_its_own_connection_is_no_retry():
    """TRL's topology: a client per session. B's /create_session 20 ms after A's 503 is B's, on B's connection."""
    traffic = [
        seen(protocol.CREATE_SESSION, "127.0.0.1:1001", 10.0, 503),
        *session("B", "127.0.0.1:1002", 10.02),
        *session("A", "127.0.0.1:1001", 11.1),
    ]
    flat = retry_after(Context(None, group(sorted(traffic, key=lambda s: s.exchange.started_at))))
    assert flat is not None and flat.status is Status.FAIL  # the trap: as one client, B's request is A's early retry
    episodes = ended(traffic)
    assert {e.key: e.ended for e in episodes} == {"B": "deleted", "A": "deleted"}
    assert Status.FAIL not in retry_verdicts(episodes).values()


def test_one_client_retrying_too_soon_still_fails():
    """A quiet host: the refused /create_session and the one 50 ms later on the same connection are one client's."""
    traffic = [seen(protocol.CREATE_SESSION, "127.0.0.1:1001", 10.0, 503), *session("A", "127.0.0.1:1001", 10.05)]
    episodes = ended(traffic)
    assert [len(e.requests) for e in episodes] == [4]
    assert retry_verdicts(episodes) == {"A": Status.FAIL}


def test_a_pool_handing_a_refused_requests_connection_to_another_session_is_no_retry():
    """A shared pool: B's first request takes the connection A's 503 came on, while C works on another one."""
    traffic = [
        seen(protocol.PING, "127.0.0.1:1003", 9.99, 200, sid="C"),
        seen(protocol.CREATE_SESSION, "127.0.0.1:1001", 10.0, 503),
        seen(protocol.PING, "127.0.0.1:1003", 10.01, 200, sid="C"),
        *session("B", "127.0.0.1:1001", 10.02),
        *session("A", "127.0.0.1:1003", 11.1),
    ]
    episodes = ended(traffic)
    assert Status.FAIL not in retry_verdicts(episodes).values()
    assert sum(e.unattributed for e in episodes) == 1  # A's 503: whose it was cannot be told, so it is nobody's retry


def test_a_client_woken_from_its_own_retry_after_taking_a_refused_connection_is_no_retry():
    """Sessions woken one by one from the same ``Retry-After: 1`` take turns on a quiet host: Y's second 503 on
    :1001, then X (its own 503 still waiting on :1002) gets :1001 next — nobody else was sending, yet it is X's."""
    traffic = [
        seen(protocol.CREATE_SESSION, "127.0.0.1:1002", 10.0, 503),  # X
        seen(protocol.CREATE_SESSION, "127.0.0.1:1001", 10.001, 503),  # Y
        seen(protocol.CREATE_SESSION, "127.0.0.1:1001", 11.001, 503),  # Y again, after its Retry-After
        *session("X", "127.0.0.1:1001", 11.007),
        *session("Y", "127.0.0.1:1002", 12.01),
    ]
    episodes = ended(traffic)
    assert Status.FAIL not in retry_verdicts(episodes).values()
    assert sum(e.unattributed for e in episodes) == 3


def test_another_open_session_makes_a_refused_connection_nobodys():
    """C is mid-episode on :1003 when A's /create_session is refused on :1001 and B's comes next on it: B's."""
    traffic = [
        seen(protocol.CREATE_SESSION, "127.0.0.1:1003", 9.0, 200, hands_out="C"),
        seen(protocol.CREATE, "127.0.0.1:1003", 9.01, 200, sid="C"),
        seen(protocol.CREATE_SESSION, "127.0.0.1:1001", 10.0, 503),
        *session("B", "127.0.0.1:1001", 10.006),
        seen(protocol.DELETE, "127.0.0.1:1003", 10.5, 200, sid="C"),
    ]
    episodes = ended(traffic)
    assert Status.FAIL not in retry_verdicts(episodes).values()
    assert {e.key: e.unattributed for e in episodes} == {"B": 1, "C": 0}


def test_sessions_left_open_are_graded_at_exit_and_refused_connections_alone():
    traffic = [
        seen(protocol.CREATE_SESSION, "127.0.0.1:1001", 10.0, 200, hands_out="A"),
        seen(protocol.CREATE, "127.0.0.1:1001", 10.01, 200, sid="A"),
        seen(protocol.CREATE_SESSION, "127.0.0.2:2001", 10.0, 402),  # another host, never given a session
    ]
    episodes = {e.key: e for e in ended(traffic)}
    assert episodes["A"].ended == "still open at exit"
    assert episodes["connection 127.0.0.2:2001"].sid is None
    results = {r.id: r for r in grade_episode(episodes["A"], traffic_checks())}
    assert results["client.session_deleted"].status is Status.FAIL


# -- real traffic: 64 sessions at once against a flaky server ----------------------------------------------
SESSIONS = 64
ATTEMPTS = 8


async def _request(http: httpx.AsyncClient, method: str, path: str, sid: str | None = None, **kwargs) -> httpx.Response:
    """One request, retried on 429/5xx after the Retry-After it carried (a correct client)."""
    headers = {protocol.SESSION_HEADER: sid} if sid else {}
    for _ in range(ATTEMPTS):
        response = await http.request(method, path, headers=headers, **kwargs)
        if response.status_code not in (429, 502, 503, 504):
            return response
        await asyncio.sleep(float(response.headers.get("retry-after", "1")))
    raise AssertionError(f"{method} {path} still failing after {ATTEMPTS} attempts")


async def _episode(http: httpx.AsyncClient, target: str) -> None:
    created = await _request(http, "POST", protocol.CREATE_SESSION)
    sid = parse(created.content).first(protocol.EVENT_TASK_ID).data
    await _request(http, "POST", protocol.CREATE, sid, json={"env_name": "echo", "split": "train", "index": 0})
    await _request(http, "GET", "/echo/prompt", sid)
    await _request(http, "POST", "/echo/call", sid, json={"name": "echo", "input": {"text": target}})
    await _request(http, "POST", protocol.DELETE, sid)


async def _trainer(url: str, pooled: bool) -> None:
    target = get_scenario("echo").list_tasks("train")[0]["target"]
    timeout = httpx.Timeout(30.0)
    if pooled:
        async with httpx.AsyncClient(base_url=url, timeout=timeout) as http:
            await asyncio.gather(*(_episode(http, target) for _ in range(SESSIONS)))
        return
    # verify=False: plain http on loopback; each client would otherwise load the CA bundle (~0.2 s)
    clients = [httpx.AsyncClient(base_url=url, timeout=timeout, verify=False) for _ in range(SESSIONS)]
    try:
        await asyncio.gather(*(_episode(http, target) for http in clients))
    finally:
        await asyncio.gather(*(http.aclose() for http in clients))


@pytest.mark.parametrize("pooled", [False, True], ids=["client-per-session", "one-pool"])
def test_64_sessions_at_once_through_a_flaky_server_get_no_false_retry_after(pooled):
    with serve("echo", config=ServerConfig(faults=("flaky-5xx",), seed=3, request_log=True)) as server:
        asyncio.run(asyncio.wait_for(_trainer(server.url, pooled), 120))
        entries = httpx.get(server.url + protocol.REQUEST_LOG, timeout=30).json()["entries"]
    assert all(e["peer"] and e["peer"].startswith("127.0.0.1:") for e in entries)
    requests = from_log(entries)
    refused = [s for s in requests if s.exchange.status in (502, 503, 504)]
    assert refused, "the flaky server refused nothing: nothing was tested"
    flat = retry_after(Context(None, group(requests)))
    assert flat is not None and flat.status is Status.FAIL, "as one client the log shows no early retry: the trap was not set"
    episodes = ended(requests)
    sessions = [e for e in episodes if e.sid]
    assert len(sessions) == SESSIONS and all(e.ended == "deleted" for e in sessions)
    verdicts = {}
    for episode in episodes:
        for result in grade_episode(episode, traffic_checks()):
            verdicts.setdefault(result.id, []).append((episode.key, result.status, result.message))
    failing = [v for results in verdicts.values() for v in results if v[1] in (Status.FAIL, Status.ERROR)]
    assert failing == []
    judged = [v for v in verdicts["client.retry_after"] if v[1] is Status.PASS]
    assert judged, "no session met a Retry-After: the rule was never exercised"


def test_a_session_waiting_on_its_own_request_is_not_ended_as_idle():
    """Under load a ``/create`` can take longer than ``idle_s`` to answer: the session is busy, not
    "never opened" (hosted mode at 1,000 sessions lost 41 sessions' verdicts this way)."""
    out: list[Episode] = []
    attributor = Attributor(out.append, idle_s=10.0)
    handed = seen(protocol.CREATE_SESSION, "127.0.0.1:1", 0.0, 200, hands_out="s1")
    attributor.started("127.0.0.1:1", 0.0, protocol.CREATE_SESSION)
    attributor.seen(handed)
    create = seen(protocol.CREATE, "127.0.0.1:1", 1.0, 200, sid="s1")
    attributor.started("127.0.0.1:1", 1.0, protocol.CREATE, "s1")
    attributor.sweep(30.0)  # 29 s since the last answer, the /create still in flight
    assert out == [] and "s1" in attributor.open
    create.exchange.elapsed = 30.0
    attributor.seen(create)
    attributor.sweep(32.0)
    assert out == [] and attributor.open["s1"].opened  # opened, and its /create filed under it


def test_a_session_handed_out_waits_unopened_s_for_its_create():
    """Under load a client can take longer than ``idle_s`` between ``/create_session`` and ``/create`` (hosted mode at
    1,000 sessions, 50 at once, ended 58 sessions so): ``unopened_s`` gives such a session longer before "never opened"."""
    out: list[Episode] = []
    attributor = Attributor(out.append, idle_s=5.0, unopened_s=30.0)
    attributor.started("127.0.0.1:1", 0.0, protocol.CREATE_SESSION)
    attributor.seen(seen(protocol.CREATE_SESSION, "127.0.0.1:1", 0.0, 200, hands_out="s1"))
    attributor.sweep(20.0)
    assert out == [] and "s1" in attributor.open
    attributor.sweep(31.0)
    assert [(e.sid, e.ended) for e in out] == [("s1", "never opened")]
