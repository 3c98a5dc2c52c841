"""``orsbench proxy``: transparent, grading, fault-injecting.

* transparent: the differential transcripts of every scenario through the proxy
  equal the direct ones, on the mock engine and on the SDK twin; event streams
  pass unbuffered (keep-alives arrive while the call runs) and a stream the
  upstream cuts is cut for the client too;
* grading: real clients' traffic (the openreward SDK and TRL's
  ``OpenRewardSpec``) through the proxy is graded by the checker's checks;
  each violation in :data:`VIOLATION_SUBSET` is flagged by the check naming its
  rule (the full sweep over all 61 is ``slow``), and the fault-free baseline
  is flagged by nothing;
* faults: each HTTP fault profile injected by the proxy gives the client the
  outcome the mock engine gives when it injects the same profile.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from orsbench.checks import Options, run_checks
from orsbench.checks import CHECKS
from orsbench.config import ServerConfig
from orsbench.servers.faults import http_fault_names
from orsbench.servers.faults.violations import VIOLATIONS
from orsbench.servers.launch import RunningServer, start, start_proxy
from orsbench.wire import WireClient

from test_differential import PARAMS, SCRIPTS, transcript  # noqa: E402  (tests/ is on sys.path)

pytest.importorskip("openreward")

_FORK = multiprocessing.get_context("fork")
ProxyFactory = Callable[..., RunningServer]


@pytest.fixture(scope="module")
def proxy_factory() -> Iterator[ProxyFactory]:
    """``proxy(upstream_url, **start_proxy kwargs)`` → a running proxy, shared within the module."""
    running: dict[str, RunningServer] = {}

    def get(upstream: str, **kwargs: Any) -> RunningServer:
        key = json.dumps([upstream, kwargs], sort_keys=True, default=str)
        if key not in running or not running[key].alive():
            running[key] = start_proxy(upstream, **kwargs)
        return running[key]

    yield get
    for server in running.values():
        server.stop()


# -- transparency -------------------------------------------------------------------------------
@pytest.mark.parametrize("impl", ["mock", "sdk"])
@pytest.mark.parametrize("scenario", list(SCRIPTS))
def test_transcripts_through_the_proxy_equal_the_direct_ones(ors_server_factory, proxy_factory, scenario, impl):
    # Two identical servers of this test's own (`seed` only seeds faults; there are none): some scripts create
    # fixed session ids (broken-session), so a script can be played once per server, and the plugin shares a
    # server with every other test that asks for the same one.
    upstream = ors_server_factory(scenario, impl=impl, params=PARAMS.get(scenario), seed=101)
    direct = transcript(upstream, scenario)
    twin = ors_server_factory(scenario, impl=impl, params=PARAMS.get(scenario), seed=102)
    through = transcript(proxy_factory(twin.url), scenario)
    assert list(through) == list(direct)
    for label, want in direct.items():
        assert through[label] == want, f"step {label} differs"


def test_event_streams_pass_unbuffered_with_their_keepalives(ors_server_factory, proxy_factory):
    upstream = ors_server_factory("slow", params={"setup": 0.0}, ping_interval=0.2)
    proxy = proxy_factory(upstream.url)
    with WireClient(proxy.url) as client:
        sid = client.new_session()
        client.create(sid, split="train", index=0)
        call = client.call("slow", sid, "wait", {"seconds": 1.2})
        client.delete(sid)
    assert call.sse is not None and call.sse.names() == ["task_id", "end"]
    first = call.sse.events[0].at - call.started_at
    pings = [c.at - call.started_at for c in call.sse.comments]
    assert first < 0.6, f"task_id arrived only after {first:.2f}s: the stream was buffered"
    assert len(pings) >= 3 and pings[0] < 0.7 and pings[-1] - pings[0] > 0.5, pings
    assert b"\r\n: ping - " in call.body  # comments pass through as the upstream framed them


def test_a_stream_the_upstream_cuts_is_cut_for_the_client_and_resumes(ors_server_factory, proxy_factory):
    upstream = ors_server_factory("echo", faults=("stream-drop",))
    proxy = proxy_factory(upstream.url)
    with WireClient(proxy.url) as client:
        sid = client.new_session()
        client.create(sid, split="train", index=0)
        cut = client.call("echo", sid, "echo", {"text": "hello"})
        assert cut.error is not None and cut.task_id and "end" not in cut.sse.names()
        resumed = client.call("echo", sid, "echo", {"text": "hello"}, task_id=cut.task_id)
        assert resumed.sse.names() == ["task_id", "end"] and resumed.result()["ok"] is True
        client.delete(sid)


def test_an_unreachable_upstream_is_a_502_with_a_detail():
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    import asyncio

    import httpx

    from orsbench.servers.proxy import ProxyApp

    async def go() -> httpx.Response:
        app = ProxyApp(f"http://127.0.0.1:{port}")
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as client:
                return await client.get("/echo/tools")
        finally:
            await app.aclose()

    response = asyncio.run(go())
    assert response.status_code == 502
    assert "did not answer" in response.json()["detail"]


# -- reports --------------------------------------------------------------------------------------
def test_live_report_and_reports_written_on_sigterm(ors_server_factory, tmp_path):
    upstream = ors_server_factory("echo")
    proxy = start_proxy(upstream.url, json_report=tmp_path / "r.json", junit_report=tmp_path / "r.xml")
    try:
        active = run_checks(proxy.url, Options(timeout=10))
        assert active.exit_code == 0  # the checker itself, through the proxy, still passes
        with WireClient(proxy.url) as client:
            live = json.loads(client.request("GET", "/_orsbench/report").body)
    finally:
        proxy.stop()
    written = json.loads((tmp_path / "r.json").read_text())
    assert "<testsuite" in (tmp_path / "r.xml").read_text()
    for report in (live, written):
        by_id = {c["id"]: c for c in report["checks"] if not c["id"].startswith("client.")}
        assert list(by_id) == [r.id for r in active.results]  # the same checks, same ids
        assert all(c["status"] not in ("fail", "error") for c in by_id.values())
        # The checker is a client too, and breaks two client rules on purpose: a /create without env_name
        # (the default environment, §1.2) and calls after finished (the latch, §5). The proxy says so — the first
        # as `orsbench clients URL` does, a warning beside the verdict (issue 34).
        clients = {c["id"]: c for c in report["checks"] if c["id"].startswith("client.")}
        failing = {i for i, c in clients.items() if c["status"] in ("fail", "error")}
        assert failing == {"client.stops_at_finished"}, failing
        assert clients["client.env_name"]["status"] == "warn", clients["client.env_name"]
        judged = {i for i, c in by_id.items() if c["status"] == "pass"}
        assert {"discovery.tools_listing", "session.create", "call.end_event", "reward.well_formed"} <= judged
        for check_id, check in by_id.items():
            if CHECKS[check_id].passive is None:
                assert check["status"] == "skip" and "needs a probe no client sends" in check["message"]
    assert written["summary"]["pass"] >= 40


def test_engine_only_faults_are_refused_by_the_proxy_with_a_usage_error():
    done = subprocess.run(
        [sys.executable, "-m", "orsbench", "proxy", "http://127.0.0.1:9", "--fault", "tool-raises"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "changes the mock engine itself" in done.stderr and "Traceback" not in done.stderr


# -- passive grading of real clients' traffic ----------------------------------------------------
def _play(url: str) -> None:
    """One echo episode with the openreward SDK, then one with TRL's OpenRewardSpec (errors swallowed)."""
    os.environ.update({"OPENREWARD_API_URL": url, "OPENREWARD_SESSION_URL": url, "OPENREWARD_DISABLE_UPDATE_CHECK": "1"})
    from openreward.api._session import ping as sdk_ping

    sdk_ping.ping_thread.__init__()  # a forked copy of the parent's ping thread state drives nothing
    try:
        import openreward

        env = openreward.OpenReward(api_key="test").environments.get("echo", variant="echo", base_url=url)
        target = env.get_task("train", 0).task_spec["target"]
        with env.session(split="train", index=0) as session:
            session.get_prompt()
            session.list_tools()
            session.call_tool("echo", {"text": "nope"})
            session.call_tool("echo", {"text": target})
    except BaseException:  # noqa: BLE001 - a broken server may break the client; the traffic is the point
        traceback.print_exc()
    try:
        from trl.experimental.openreward import OpenRewardSpec

        spec = OpenRewardSpec(url, env_name="echo", num_tasks=2)
        row = spec.train_dataset[0]
        rollout = spec.environment_factory()
        rollout.reset(**row)
        try:
            rollout.echo(text="wrong")
            rollout.echo(text=row["target"])
        finally:
            rollout._close()
    except BaseException:  # noqa: BLE001
        traceback.print_exc()


def drive_clients(url: str, deadline: float = 15.0) -> None:
    """Play :func:`_play` in a forked child; kill it at ``deadline`` (a broken server may hang a client)."""
    child = _FORK.Process(target=_play, args=(url,), daemon=True)
    child.start()
    child.join(deadline)
    if child.is_alive():
        child.kill()
        child.join(5)


def passive_report(upstream: RunningServer, **options: Any) -> dict[str, Any]:
    proxy = start_proxy(upstream.url, **options)
    try:
        drive_clients(proxy.url)
        with WireClient(proxy.url) as client:
            return json.loads(client.request("GET", "/_orsbench/report").body)
    finally:
        proxy.stop()


#: Violations whose rule an SDK or TRL episode exercises (the full list: test_every_violation_..., slow).
VIOLATION_SUBSET = (
    "reward-bool",
    "finished-not-bool",
    "call-end-missing",
    "end-not-json",
    "call-content-type-json",
    "output-blocks-invalid",
    "sse-mixed-line-endings",
    "prompt-not-blocks",
)


def server_statuses(report: dict[str, Any]) -> dict[str, str]:
    """The server checks' statuses (the client checks beside them judge the clients: the SDK's pinned
    defects show there — tests/test_proxy_clients.py)."""
    return {c["id"]: c["status"] for c in report["checks"] if not c["id"].startswith("client.")}


def test_real_clients_traffic_without_faults_is_flagged_by_nothing(ors_server_factory):
    report = passive_report(ors_server_factory("echo"))
    statuses = server_statuses(report)
    assert [i for i, s in statuses.items() if s in ("fail", "error")] == []
    assert {"session.create", "session.prompt", "call.end_event", "reward.well_formed", "call.episode_finishes"} <= {
        i for i, s in statuses.items() if s == "pass"
    }


def test_real_clients_traffic_folded_past_a_tiny_evidence_limit_is_flagged_by_nothing(ors_server_factory):
    """--evidence-limit 2: most calls are folded into counts, and the verdicts are those of the default run."""
    report = passive_report(ors_server_factory("echo"), evidence_limit=2)
    statuses = server_statuses(report)
    assert report["summary"]["evidence"]["folded"] > 0
    assert [i for i, s in statuses.items() if s in ("fail", "error")] == []
    assert {"call.end_event", "reward.well_formed", "http.no_server_errors", "call.episode_finishes"} <= {
        i for i, s in statuses.items() if s == "pass"
    }


def _assert_flagged(name: str, report: dict[str, Any], *, must_be_exercised: bool) -> None:
    violation = VIOLATIONS[name]
    # The server's checks only: a client that meets a broken server may break a client rule in turn
    # (stop early, leave its session open); the client checks judge that, not the violation.
    by_id = {c["id"]: c for c in report["checks"] if not c["id"].startswith("client.")}
    failing = {i for i, c in by_id.items() if c["status"] == "fail"}
    for check_id in violation.breaks:
        status = by_id[check_id]["status"]
        if must_be_exercised:
            assert check_id in failing, (name, check_id, by_id[check_id]["message"])
        else:
            assert status in ("fail", "skip"), (name, check_id, by_id[check_id]["message"])
    assert failing <= set(violation.breaks) | set(violation.also) | _CASCADE, (name, failing)


#: Checks a violation may take down with it when clients react to it (an unexpected answer makes them stop early).
_CASCADE: set[str] = set()


@pytest.mark.parametrize("name", VIOLATION_SUBSET)
def test_violations_are_flagged_passively_from_real_clients_traffic(ors_server_factory, name):
    upstream = ors_server_factory(VIOLATIONS[name].scenario, faults=(name,))
    _assert_flagged(name, passive_report(upstream), must_be_exercised=True)


@pytest.mark.parametrize("name", ["reward-bool", "sse-mixed-line-endings", "call-content-type-json"])
def test_violations_are_flagged_passively_past_a_tiny_evidence_limit(ors_server_factory, name):
    """Calls past --evidence-limit are judged on arrival: an offending one is kept, so the check still fails."""
    upstream = ors_server_factory(VIOLATIONS[name].scenario, faults=(name,))
    _assert_flagged(name, passive_report(upstream, evidence_limit=1), must_be_exercised=True)


#: Every violation whose rule one SDK and one TRL episode on echo exercise (22 of 61, measured); the
#: others break rules such traffic never touches (unknown tools, resumes, TTLs, malformed bodies, long
#: calls, the slow scenario), where the passive verdict must be a skip, never a pass.
EXERCISED_BY_CLIENTS = frozenset(
    {
        "health-not-json", "tools-listing-bare-array", "tools-optional-fields-missing", "tool-schema-invalid",
        "tool-names-duplicated", "json-as-text-plain", "num-tasks-string", "create-session-json",
        "create-answers-wrong-sid", "ping-never-finds-session", "delete-500", "create-session-same-id",
        "task-tools-omit-shared", "prompt-not-blocks", "call-content-type-json", "task-id-event-missing",
        "call-end-missing", "end-not-json", "sse-mixed-line-endings", "output-blocks-invalid", "reward-bool",
        "finished-not-bool",
    }
)


def test_the_subset_is_exercised_by_real_clients():
    assert set(VIOLATION_SUBSET) <= EXERCISED_BY_CLIENTS <= set(VIOLATIONS)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in VIOLATIONS if n not in VIOLATION_SUBSET])
def test_every_violation_is_flagged_whenever_its_rule_is_exercised(ors_server_factory, name):
    upstream = ors_server_factory(VIOLATIONS[name].scenario, faults=(name,))
    _assert_flagged(name, passive_report(upstream), must_be_exercised=name in EXERCISED_BY_CLIENTS)


# -- faults injected by the proxy: the robustness table holds -------------------------------------
@pytest.fixture(scope="module")
def robustness():
    return pytest.importorskip("conformance.test_client_robustness")


# TRL's OpenRewardSpec drives the openreward SDK: the trl row covers the SDK's path too, so the openreward row is slow
@pytest.mark.parametrize("client", [pytest.param("openreward", marks=pytest.mark.slow), "trl"])
@pytest.mark.parametrize("case", ["latency-jitter", "flaky-5xx", "rate-limit", "stream-drop", "stream-stall", "stream-no-end"])
def test_a_fault_injected_by_the_proxy_gives_the_engines_client_outcome(robustness, case, client):
    spec = robustness.CASES[case]
    knobs = dict(spec.config)
    assert set(spec.faults) <= set(http_fault_names())
    engine = start(robustness.ENV, config=spec.server_config())
    upstream = start(robustness.ENV, config=ServerConfig(request_log=True, **{k: v for k, v in knobs.items() if k != "seed"}))
    proxy = start_proxy(
        upstream.url, faults=spec.faults, seed=knobs.get("seed", 0), ping_interval=knobs.get("ping_interval", 10.0)
    )
    try:
        direct = robustness.run_client(client, engine, spec.plan)
        through = robustness.run_client(client, proxy, spec.plan)
    finally:
        for server in (proxy, upstream, engine):
            server.stop()
    assert (through.survived, through.hung, through.reward, through.finished) == (
        direct.survived,
        direct.hung,
        direct.reward,
        direct.finished,
    ), f"engine: {direct.describe()}\nproxy: {through.describe()}"
    assert through.calls == direct.calls, "each tool ran as often behind the proxy as on the faulty engine"
    assert (through.error is None) == (direct.error is None), f"{direct.error!r} vs {through.error!r}"
    if direct.error is not None:
        assert direct.error.split(":")[0] == through.error.split(":")[0]


def test_api_keys_never_reach_the_proxys_report_or_cassette(tmp_path):
    key = "sk-proxy-SECRET-key-4567"
    with serve_with_key(key) as upstream:
        proxy = start_proxy(upstream.url, record=tmp_path / "c.json", json_report=tmp_path / "r.json")
        try:
            report = run_checks(proxy.url, Options(timeout=10, api_key=key))
            assert report.exit_code == 0
            with WireClient(proxy.url, api_key=key) as client:
                live = client.request("GET", "/_orsbench/report").body.decode()
        finally:
            proxy.stop()
    for text in (live, (tmp_path / "r.json").read_text(), (tmp_path / "c.json").read_text()):
        assert key not in text
    assert "<redacted>" in live  # the header is shown as there, its value is not


def serve_with_key(key: str):
    from orsbench.servers.launch import serve

    return serve("echo", config=ServerConfig(api_key=key))


def test_sessions_opened_before_the_proxy_started_are_graded_and_unknown_sids_judged(ors_server_factory):
    upstream = ors_server_factory("echo")
    with WireClient(upstream.url) as direct:
        sid = direct.new_session()
        assert direct.create(sid, split="train", index=0).status == 200
    proxy = start_proxy(upstream.url)
    try:
        with WireClient(proxy.url) as client:
            assert client.call("echo", sid, "echo", {"text": "hello"}).result()["ok"] is True  # mid-episode
            client.prompt("echo", "orsbench-never-created")
            client.delete(sid)
            report = json.loads(client.request("GET", "/_orsbench/report").body)
    finally:
        proxy.stop()
    by_id = {c["id"]: c for c in report["checks"]}
    assert by_id["call.end_event"]["status"] == "pass", by_id["call.end_event"]["message"]
    assert by_id["reward.well_formed"]["status"] == "pass"
    assert by_id["session.unknown_sid_404"]["status"] == "pass", by_id["session.unknown_sid_404"]["message"]
    assert [i for i, c in by_id.items() if c["status"] in ("fail", "error")] == []
