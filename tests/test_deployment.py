"""Deployments (issue 35): the ``deployment.*`` checks against real balancers, ``serve --replicas N``, and a
compressed event stream read as clients read it.

Each planted balancer mistake (``--balancer-fault``) fails its own ``deployment.*`` check with its evidence;
three replicas behind a correct nginx pass every check, and so does the built-in router that stands in where
nginx is absent. The nginx tests run our own nginx process (never the system service) and skip where nginx
is not installed (``.ci/run`` installs it).
"""

from __future__ import annotations

import dataclasses
import gzip
import subprocess
import sys
import time

import httpx
import pytest

from orsbench import protocol
from orsbench.checks import Options, Status, load_checks
from orsbench.checks.deployment import DEPLOYMENT_CHECKS, affinity
from orsbench.checks.deployment_probe import Deployment, Trail
from orsbench.checks.evidence import Evidence
from orsbench.checks.runner import run_checks
from orsbench.servers import replicas
from orsbench.servers.fronts import BALANCER_FAULTS
from orsbench.servers.balancer import HashRing
from orsbench.wire.client import WireClient
from orsbench.wire.evidence import Exchange

load_checks()

needs_nginx = pytest.mark.skipif(replicas.nginx_path() is None, reason="nginx is not installed (apt-get install nginx-light)")
DEPLOYMENT = ["deployment.*"]
#: A slow tool that sends nothing for 6 s (keep-alives every 10 s, the reference's; set, so the slow scenario's own
#: 0.25 s does not replace it): what an idle timeout of 4 s cuts.
SILENT_6S = {"scenario": "slow", "params": {"long_call": 6, "setup": 0}, "ping_interval": 10.0}
#: A 2 s tool with keep-alives every 0.25 s: a stream that is not buffered shows its task_id 2 s before its end.
SLOW_2S = {"scenario": "slow", "params": {"long_call": 2, "setup": 0}}
ECHO = {"scenario": "echo"}

#: fault → (the server it is planted in front of, the check it fails, words its message shows).
PLANTED = {
    "round-robin": (ECHO, "deployment.affinity", "reach different replicas"),
    "idle-timeout": (SILENT_6S, "deployment.stream_idle_timeout", "about the same time, shorter than the server's keep-alive"),
    "buffering": (SLOW_2S, "deployment.streams_unbuffered", "buffered in front"),
    "dead-replica": (ECHO, "deployment.backend_errors", "failing backend"),
    "body-limit": (ECHO, "deployment.body_size", "a body limit in front"),
    "html-errors": (ECHO, "deployment.front_answers", "HTML page"),
    "gzip-stream": (ECHO, "deployment.stream_compression", "Content-Encoding: gzip"),
}


def _serve(factory, fault: str | None, front: str, n: int = 2):  # type: ignore[no-untyped-def]
    where = dict(PLANTED[fault][0]) if fault else dict(ECHO)
    scenario = where.pop("scenario")
    faults = (fault,) if fault else ()
    # One replica beside a dead one: every session hashed to the dead one fails, half of them.
    return factory(scenario, replicas=1 if fault == "dead-replica" else n, balancer_faults=faults, balancer=front, **where)


def _options(fault: str | None) -> Options:
    # More sessions where the mistake shows per session (a dead replica takes only the sessions hashed to it).
    return Options(sessions=8 if fault == "dead-replica" else 3, timeout=20)


# -- real nginx ------------------------------------------------------------------------------------------------
@needs_nginx
def test_three_replicas_behind_nginx_pass_every_check(ors_server_factory):
    server = ors_server_factory("echo", replicas=3, balancer="nginx")
    report = run_checks(server.url, Options(timeout=20))
    failed = [r.id for r in report.results if r.status is Status.FAIL]
    assert failed == [] and report.exit_code == 0, [(r.id, r.message) for r in report.results if r.status is Status.FAIL]
    for check_id in DEPLOYMENT_CHECKS:
        assert report.result(check_id).status in (Status.PASS, Status.NOT_APPLICABLE), report.result(check_id).message
    assert report.result("deployment.affinity").status is Status.PASS
    assert report.result("deployment.body_size").status is Status.PASS


@needs_nginx
@pytest.mark.parametrize("fault", list(PLANTED))
def test_each_planted_mistake_fails_its_check_behind_nginx(ors_server_factory, fault):
    server = _serve(ors_server_factory, fault, "nginx")
    report = run_checks(server.url, _options(fault), only=DEPLOYMENT)
    _, check_id, words = PLANTED[fault]
    result = report.result(check_id)
    assert result.status is Status.FAIL, (fault, result.status, result.message)
    assert "the deployment in front of the server, not the environment's code" in result.message
    assert words in result.message and result.evidence, result.message
    assert "nginx" in result.remediation and "Envoy" in result.remediation


@needs_nginx
def test_nginx_config_plants_each_mistake_and_only_it(tmp_path):
    good = replicas.nginx_config(tmp_path, ("127.0.0.1", 8080), [9001, 9002])
    assert "hash $http_x_session_id consistent;" in good and "proxy_buffering off;" in good
    assert "proxy_read_timeout 3600s;" in good and "client_max_body_size 64m;" in good and "gzip off;" in good
    planted = {
        "round-robin": ("hash $http_x_session_id", False),
        "idle-timeout": ("proxy_read_timeout 4s;", True),
        "buffering": ("proxy_ignore_headers X-Accel-Buffering;", True),
        "dead-replica": ("server 127.0.0.1:9999 max_fails=0;", True),
        "body-limit": ("client_max_body_size 1m;", True),
        "html-errors": ("proxy_intercept_errors on;", True),
        "gzip-stream": ("gzip_types text/event-stream", True),
    }
    assert set(planted) == set(BALANCER_FAULTS)
    for fault, (text, present) in planted.items():
        config = replicas.nginx_config(tmp_path, ("127.0.0.1", 8080), [9001, 9002], (fault,), dead_port=9999)
        assert (text in config) is present, fault
        assert (text in good) is not present, fault


# -- the built-in router ---------------------------------------------------------------------------------------
def test_the_builtin_router_passes_the_deployment_checks(ors_server_factory):
    server = ors_server_factory("echo", replicas=3, balancer="builtin")
    report = run_checks(server.url, Options(timeout=20), only=DEPLOYMENT)
    for check_id in DEPLOYMENT_CHECKS:
        assert report.result(check_id).status in (Status.PASS, Status.NOT_APPLICABLE), (check_id, report.result(check_id).message)
    # Every replica answers, each naming itself.
    names = {httpx.get(server.url + protocol.HEALTH).headers.get(protocol.REPLICA_HEADER) for _ in range(6)}
    assert names == {"r0", "r1", "r2"}


@pytest.mark.parametrize("fault", ["round-robin", "idle-timeout", "buffering", "html-errors", "gzip-stream"])
def test_the_builtin_router_plants_the_same_mistakes(ors_server_factory, fault):
    server = _serve(ors_server_factory, fault, "builtin")
    report = run_checks(server.url, _options(fault), only=DEPLOYMENT)
    _, check_id, words = PLANTED[fault]
    result = report.result(check_id)
    assert result.status is Status.FAIL and words in result.message, (fault, result.status, result.message)


def test_without_nginx_the_builtin_router_is_used_and_said(monkeypatch):
    monkeypatch.setattr(replicas, "nginx_path", lambda: None)
    assert replicas.pick_front("auto") == ("builtin", None)
    with pytest.raises(ValueError, match="nginx is not installed"):
        replicas.pick_front("nginx")


def test_the_hash_ring_keeps_a_session_on_one_replica_and_spreads_them():
    ring = HashRing(3)
    sids = [f"session-{i}" for i in range(600)]
    assert [ring.member(s) for s in sids] == [ring.member(s) for s in sids]
    spread = [sum(ring.member(s) == m for s in sids) for m in range(3)]
    assert min(spread) > 120, spread
    # A fourth replica moves only the sessions it takes (consistent hashing), never one between the old three.
    bigger = HashRing(4)
    assert all(bigger.member(s) in (ring.member(s), 3) for s in sids)


def test_a_rolling_restart_loses_the_rolled_replicas_sessions(ors_server_factory):
    server = ors_server_factory("echo", replicas=2, restart_every=1.5, balancer="builtin")
    with WireClient(server.url, timeout=10) as client:
        sids = []
        for _ in range(8):
            sid = client.new_session()
            assert client.create(sid, env_name="echo", split="train", index=0).status == 200
            sids.append(sid)
        time.sleep(4.0)  # a replica rolled at least once by now
        pings = [client.ping(sid).status for sid in sids]
        # Sessions of a replica stopped by SIGTERM are gone: "not found" on the replica that answers for it (the
        # router tries the next one while it restarts, as nginx does), never a 502.
        assert 404 in pings and 502 not in pings, pings
        assert client.health().status == 200


def test_a_balancer_fault_without_replicas_is_a_usage_error():
    run = subprocess.run(
        [sys.executable, "-m", "orsbench", "serve", "echo", "--balancer-fault", "round-robin"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 2 and "need --replicas N" in run.stderr


def test_the_fixture_refuses_replicas_for_an_app(ors_server_factory):
    with pytest.raises(TypeError, match="replicas= serves a scenario"):
        ors_server_factory(cmd="python -m x --port {port}", replicas=2)
    with pytest.raises(TypeError, match="unknown balancer fault"):
        ors_server_factory("echo", replicas=2, balancer_faults=("no-such",))


# -- a compressed stream is decoded, never misread ---------------------------------------------------------------
def test_a_gzipped_event_stream_is_decoded_and_its_encoding_reported():
    events = b"event: task_id\ndata: t-1\n\n: ping\n\nevent: end\ndata: {\"ok\": true, \"output\": {\"blocks\": []}}\n\n"

    def answer(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream", "content-encoding": "gzip"}
        return httpx.Response(200, headers=headers, content=gzip.compress(events))

    with WireClient("http://127.0.0.1:9", transport=httpx.MockTransport(answer)) as client:
        exchange = client.call("echo", "s", "echo", {})
    assert exchange.content_encoding == "gzip"
    assert exchange.task_id == "t-1" and exchange.result() == {"ok": True, "output": {"blocks": []}}
    assert exchange.body == events


def test_a_gzipped_stream_through_a_front_passes_the_protocol_checks(ors_server_factory):
    """The issue's false failures: gzip on text/event-stream failed framing, task_id and end checks."""
    server = _serve(ors_server_factory, "gzip-stream", "builtin")
    report = run_checks(server.url, Options(timeout=20, fuzz=0), only=["call.*", "deployment.stream_compression"])
    failed = {r.id: r.message for r in report.results if r.status is Status.FAIL}
    assert set(failed) == {"deployment.stream_compression"}, failed
    assert report.result("call.first_event_task_id").status is Status.PASS
    assert report.result("call.end_event").status is Status.PASS


# -- affinity is told apart from a TTL or a server that forgets -------------------------------------------------
def _trail(*statuses: int) -> Trail:
    steps = []
    for i, status in enumerate(statuses):
        exchange = Exchange("GET", "http://127.0.0.1:9/echo/prompt", {protocol.SESSION_HEADER: "s"}, b"", status=status, body=b"{}")
        exchange.started_at = float(i)
        steps.append((f"deployment.affinity.0.{i}", "prompt", exchange))
    return Trail("s", steps, span=float(len(statuses)))


def _graded(*trails: Trail, ttl: float | None = None):  # type: ignore[no-untyped-def]
    ev = Evidence("http://127.0.0.1:9", Options(ttl=ttl))
    ev.facts.deployment = Deployment(trails=list(trails))
    return affinity(ev)


def test_a_session_found_again_after_not_found_is_routing():
    outcome = _graded(_trail(200, 200, 404, 200))
    assert outcome.status is Status.FAIL and "reach different replicas" in outcome.message


def test_a_session_lost_for_good_is_not_called_routing():
    outcome = _graded(_trail(200, 200, 404, 404))
    assert outcome.status is Status.WARN and "not requests spread over replicas" in outcome.message
    reaped = _graded(_trail(200, 200, 404, 404), ttl=1.0)
    assert reaped.status is Status.PASS and "TTL" in reaped.message
    assert _graded(_trail(200, 200, 200)).status is Status.PASS


def test_the_large_body_reproducer_makes_its_padding_instead_of_spelling_it():
    from orsbench.wire.reproduce import _curl

    body = '{"name": "echo", "input": {"text": "a\'b", "orsbench_padding": "' + "x" * 2_000_000 + '"}}'
    exchange = Exchange("POST", "http://127.0.0.1:9/echo/call", {"Content-Type": "application/json"}, body.encode())
    command = _curl(exchange, {}, api_key=False)
    assert len(command) < 500, command[:600]
    word = command.split("--data-binary ", 1)[1]
    made = subprocess.run(["sh", "-c", f"printf %s {word}"], capture_output=True, text=True, timeout=30, check=True).stdout
    assert made == body


# -- answers from something in front, and a failing backend, on evidence made in memory ----------------------------
def _answered(status: int, body: bytes, content_type: str = "application/json", server: str = "uvicorn") -> Exchange:
    return Exchange("GET", "http://127.0.0.1:9/echo/prompt", {}, b"", status=status, body=body, headers={"content-type": content_type, "server": server})


def test_a_server_header_that_changes_is_two_deployments_mixed():
    from orsbench.checks.deployment import front_answers

    ev = Evidence("http://127.0.0.1:9", Options())
    ev.record("a", _answered(200, b"{}"))
    assert front_answers(ev).status is Status.PASS
    ev.record("b", _answered(200, b"{}", server="gunicorn"))
    outcome = front_answers(ev)
    assert outcome.status is Status.FAIL and "Server header changes" in outcome.message


def test_the_servers_own_503_starting_is_no_failing_backend():
    from orsbench.checks.deployment import backend_errors

    ev = Evidence("http://127.0.0.1:9", Options())
    ev.record("starting", _answered(503, b'{"detail": "starting"}'))
    ev.record("plain", _answered(404, b'{"detail": "Session not found"}'))
    assert backend_errors(ev).status is Status.PASS
    ev.record("gateway", _answered(503, b"<html>Service Unavailable</html>", "text/html", "nginx"))
    outcome = backend_errors(ev)
    assert outcome.status is Status.FAIL and "failing backend" in outcome.message and outcome.evidence


# -- every process of a deployment goes with it ---------------------------------------------------------------------
def _children(pid: int) -> list[int]:
    run = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True, check=False)
    return [int(p) for p in run.stdout.split()]


def _alive(pids: list[int]) -> list[int]:
    import os

    return [p for p in pids if os.path.exists(f"/proc/{p}")]


@pytest.mark.parametrize("front", ["builtin", pytest.param("nginx", marks=needs_nginx)])
def test_stopping_a_deployment_stops_its_replicas_and_front(front):
    from orsbench.servers.launch import Deployment, start

    server = start("echo", deployment=Deployment(2, front=front))
    kids = _children(server.pid)
    assert len(kids) == (3 if front == "nginx" else 2), kids  # the replicas, and nginx's master
    server.stop()
    deadline = time.monotonic() + 5
    while _alive(kids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _alive(kids) == []


@pytest.mark.parametrize("front", ["builtin", pytest.param("nginx", marks=needs_nginx)])
def test_replicas_and_nginx_leave_when_their_deployment_is_killed(front):
    from orsbench.servers.launch import Deployment, start

    server = start("echo", deployment=Deployment(2, front=front))
    kids = _children(server.pid)
    server.process.kill()  # no chance to stop them: each replica sees its parent gone
    deadline = time.monotonic() + 10
    while _alive(kids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert kids and _alive(kids) == []


# -- a balancer without affinity: routing first, its consequences not judged -------------------------------------
#: The session and call checks a round-robin front made fail on a correct server (issue 35: 7 of them, "nothing
#: says routing"); each must now read "not judged", naming deployment.affinity.
SCATTERED = ("call.resume_by_task_id", "call.unknown_tool_ok_false", "session.use_after_delete_404")


@pytest.mark.parametrize("front", ["builtin", pytest.param("nginx", marks=needs_nginx)])
def test_round_robin_fails_only_affinity_and_its_consequences_are_not_judged(ors_server_factory, front):
    server = _serve(ors_server_factory, "round-robin", front, n=3)
    report = run_checks(server.url, Options(timeout=20))
    failed = [r.id for r in report.results if r.status in (Status.FAIL, Status.WARN)]
    assert [f for f in failed if f != "quality.answer_leak"] == ["deployment.affinity"], failed  # echo leaks its target
    voided = [r for r in report.results if r.depends_on == "deployment.affinity"]
    assert voided and all(r.status is Status.SKIP for r in voided)
    assert all(r.message.startswith("not judged: requests of one session reach different replicas (deployment.affinity)") for r in voided)
    assert {r.id for r in voided} >= set(SCATTERED), sorted(r.id for r in voided)
    # Listed before every check it voids, and a required one skipped so is a gap --strict fails.
    ids = [r.id for r in report.results]
    assert all(ids.index("deployment.affinity") < ids.index(r.id) for r in voided)
    assert report.exit_code == 1 and report.ids(Status.FAIL) == ["deployment.affinity"]
    assert {item["id"] for item in report.required_not_run()} & set(SCATTERED)


def test_a_failure_without_sessions_stays_a_failure_after_affinity_fails():
    """Only findings on sessions' requests are voided: an answer to a sessionless request is the server's own."""
    from orsbench.checks.registry import CHECKS
    from orsbench.checks.runner import grade
    from orsbench.checks.model import CheckOutcome, CheckResult, Severity

    ev = Evidence("http://127.0.0.1:9", Options())
    affinity_failed = CheckResult("deployment.affinity", "", Status.FAIL, Severity.REQUIRED, "", None, [], "", "")
    sessionless = Exchange("GET", "http://127.0.0.1:9/health", {}, b"", status=500, body=b"boom")
    of_a_session = Exchange("GET", "http://127.0.0.1:9/echo/prompt", {protocol.SESSION_HEADER: "s"}, b"", status=404, body=b"{}")
    check = CHECKS.get("session.prompt")
    for shown, expected in ((sessionless, Status.FAIL), (of_a_session, Status.SKIP)):
        plain = dataclasses.replace(check, fn=lambda ev, shown=shown: CheckOutcome(Status.FAIL, "seen", None, [shown]))
        result = grade(plain, ev, {"deployment.affinity": affinity_failed})
        assert result.status is expected, (shown.url, result.status, result.message)
    passing = dataclasses.replace(check, fn=lambda ev: CheckOutcome(Status.PASS, "ok"))
    assert grade(passing, ev, {"deployment.affinity": affinity_failed}).status is Status.PASS


# -- a server that answers a lost session 400, not 404 -----------------------------------------------------------
def _lost_400(i: int, status: int) -> Exchange:
    body = b'{"detail": "Active environment not found"}' if status == 400 else b"[]"
    exchange = Exchange("GET", "http://127.0.0.1:9/echo/prompt", {protocol.SESSION_HEADER: "s"}, b"", status=status, body=body)
    exchange.started_at = float(i)
    return exchange


def test_a_lost_session_answered_400_is_not_found_when_the_server_says_so_for_unknown_sessions():
    from orsbench.checks.deployment_probe import lost_answer, session_found

    unknown = Exchange("GET", "http://127.0.0.1:9/echo/prompt", {protocol.SESSION_HEADER: "never"}, b"", status=400,
                       body=b'{"detail": "Active environment not found"}')  # fmt: skip
    learned = lost_answer(unknown)
    assert learned == (400, '{"detail": "Active environment not found"}')
    assert session_found(_lost_400(0, 400), learned) is False
    # A 400 that says something else (an input refused) is the session found; and without learning, 400 tells nothing.
    refused = Exchange("GET", "http://127.0.0.1:9/echo/prompt", {protocol.SESSION_HEADER: "s"}, b"", status=400, body=b'{"detail": "bad input"}')
    assert session_found(refused, learned) is True and session_found(_lost_400(0, 400)) is True
    trail = Trail("s", [(f"deployment.affinity.0.{i}", "prompt", _lost_400(i, st)) for i, st in enumerate((200, 400, 200))], span=3.0)
    assert _graded(trail).status is Status.PASS  # what the check saw before: a 400 read as "found"
    trail.lost = {"prompt": learned}
    outcome = _graded(trail)
    assert outcome.status is Status.FAIL and "reach different replicas" in outcome.message


HANDMADE = [sys.executable, "tests/envs/sessions_handmade_server.py", "--lost-status", "400", "--port"]


def _handmade(port: int) -> subprocess.Popen[bytes]:
    from orsbench.servers import launch

    process = subprocess.Popen([*HANDMADE, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not launch.healthy(f"http://127.0.0.1:{port}"):
        assert process.poll() is None and time.monotonic() < deadline, "the handmade server did not start"
        time.sleep(0.1)
    return process


@needs_nginx
def test_a_server_answering_lost_sessions_400_is_caught_behind_round_robin_and_passes_alone():
    from orsbench.servers import launch

    ports = [launch.free_port(), launch.free_port()]
    servers = [_handmade(p) for p in ports]
    nginx = None
    try:
        alone = run_checks(f"http://127.0.0.1:{ports[0]}", Options(timeout=20), only=["deployment.affinity"])
        assert alone.result("deployment.affinity").status is Status.PASS, alone.result("deployment.affinity").message
        nginx = replicas.start_nginx(ports, faults=("round-robin",))
        report = run_checks(nginx.url, Options(timeout=20), only=["deployment.affinity"])
        result = report.result("deployment.affinity")
        assert result.status is Status.FAIL and "reach different replicas" in result.message, result.message
        assert " 400" in result.message  # the trail shows the server's own "not found"
        trails = report.evidence.facts.deployment.trails
        assert trails[0].lost["prompt"][0] == 400
    finally:
        if nginx is not None:
            nginx.stop()
        for process in servers:
            process.terminate()
            process.wait(10)


# -- the fixture keeps a knob set to its default ------------------------------------------------------------------
def test_a_knob_set_to_its_default_is_not_replaced_by_the_scenarios_own(ors_server_factory):
    """ping_interval=10.0 is ServerConfig's default; the slow scenario's own default (0.25 s) used to win."""
    server = ors_server_factory("slow", params={"long_call": 1, "setup": 0}, ping_interval=10.0)
    assert server.stats()["config"]["ping_interval"] == 10.0
    plain = ors_server_factory("slow", params={"long_call": 1, "setup": 0})
    assert plain.stats()["config"]["ping_interval"] == 0.25


# -- a slow setup() is not a buffered stream ------------------------------------------------------------------
def test_a_server_holding_calls_through_a_slow_setup_is_no_buffering_in_front():
    """The SDK holds a call while the session's setup() runs, then sends task_id and end together: timed from the
    send, that read as a stream buffered in front (a text adventure with 9 s of setup, served directly, failed
    deployment.streams_unbuffered). The probe now waits the setup out before it times a call."""
    from orsbench.servers import launch
    from orsbench.servers.user_app import AppTarget

    env = {"ORSBENCH_TEST_SETUP_SECONDS": "2"}
    with launch.serve(AppTarget.parse("tests/envs/text_adventure.py:TextAdventure"), env=env) as server:
        report = run_checks(server.url, Options(env=server.env_name, timeout=20, fuzz=0), only=["deployment.streams_unbuffered"])
    result = report.result("deployment.streams_unbuffered")
    assert result.status is Status.NOT_APPLICABLE, (result.status, result.message)  # its tool answers in milliseconds
    assert result.measured["command"]["end_s"] < 1.0, result.measured
