"""Fault profiles: each does what its name says, on the wire, and they compose.

Each test drives one profile with the raw client (or a streaming httpx read
where a stream is cut) and checks the server-side effect in
``/_orsbench/stats``. How *clients* cope with the same profiles is pinned in
``conformance/test_client_robustness.py``. Times are scaled down through the
ServerConfig knobs the profiles honour (``ping_interval``, ``ttl``,
``setup_delay``), never by editing the profiles.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from orsbench import protocol
from orsbench.cli import build_parser
from orsbench.cli.serve import config_from_args
from orsbench.config import ServerConfig
from orsbench.scenarios import get_scenario
from orsbench.scenarios.sparse_reward import digits
from orsbench.servers.app import build_app
from orsbench.servers.engine import Engine
from orsbench.servers.faults import FAULTS, apply_faults
from orsbench.servers.faults import profiles as P
from orsbench.servers.launch import RunningServer
from orsbench.wire import SSEStream, WireClient

ENV = "sparse-reward"
TASK0 = get_scenario(ENV).list_tasks("train")[0]  # two hidden digits
ServerFactory = Callable[..., RunningServer]


def profiles() -> dict[str, Any]:
    return {name: f for name, f in FAULTS.items() if f.kind == "profile"}


# -- registry ---------------------------------------------------------------------------
def test_at_least_eight_named_profiles_with_summaries() -> None:
    found = profiles()
    assert len(found) >= 8, sorted(found)
    for name, entry in found.items():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name), name
        assert len(entry.summary) > 20, f"{name}: summary {entry.summary!r} says too little"


def test_every_profile_builds_alone_and_all_compose() -> None:
    scenario = get_scenario(ENV)
    for name in profiles():
        assert build_app([scenario], ServerConfig(faults=(name,))) is not None
    engine = Engine([scenario], ServerConfig())
    app = apply_faults(engine, tuple(profiles()), seed=3)
    assert app is not engine  # the middlewares wrap it


def test_unknown_profile_is_refused_with_the_known_names() -> None:
    with pytest.raises(ValueError, match="unknown fault 'nope'.*stream-drop"):
        build_app([get_scenario(ENV)], ServerConfig(faults=("nope",)))


def test_cli_accepts_comma_separated_and_repeated_faults() -> None:
    args = build_parser().parse_args(["serve", ENV, "--fault", "latency-jitter,tool-raises", "--fault", "restart"])
    config, _explicit = config_from_args(args)
    assert config.faults == ("latency-jitter", "tool-raises", "restart")


def test_parameters_follow_the_config_knobs() -> None:
    def applied(name: str, **config: Any) -> ServerConfig:
        engine = Engine([get_scenario(ENV)], ServerConfig(**config))
        apply_faults(engine, (name,), seed=0)
        return engine.config

    assert applied("short-ttl").ttl == P.SHORT_TTL_S
    assert applied("short-ttl", ttl=1.0).ttl == 1.0  # a shorter --ttl wins
    assert applied("slow-setup").setup_delay == P.SLOW_SETUP_S
    assert applied("slow-setup", setup_delay=1.5).setup_delay == 1.5
    assert applied("slow-setup").setup_wait_timeout == P.SLOW_SETUP_WAIT_S
    assert applied("setup-failure").setup_delay == P.SETUP_FAILURE_AFTER_S


# -- in-process: seeded randomness --------------------------------------------------------
async def _statuses(faults: tuple[str, ...], seed: int, n: int, path: str) -> list[httpx.Response]:
    app = build_app([get_scenario(ENV)], ServerConfig(faults=faults, seed=seed))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://orsbench") as client:
        return [await client.get(path) for _ in range(n)]


def statuses(faults: tuple[str, ...], seed: int, n: int = 200, path: str = f"/{ENV}/tools") -> list[int]:
    return [r.status_code for r in asyncio.run(_statuses(faults, seed, n, path))]


@pytest.mark.parametrize(("name", "codes"), [("flaky-5xx", {502, 503, 504}), ("rate-limit", {429})])
def test_error_profiles_are_seeded_bounded_and_say_retry_after(name: str, codes: set[int]) -> None:
    responses = asyncio.run(_statuses((name,), 7, 200, f"/{ENV}/tools"))
    seen = [r.status_code for r in responses]
    injected = [r for r in responses if r.status_code != 200]
    assert {r.status_code for r in injected} <= codes and injected, seen
    assert 0.12 < len(injected) / len(seen) < 0.38, f"{len(injected)} of {len(seen)} injected, expected about {P.ERROR_RATE:.0%}"
    longest = max(len(run) for run in re.findall(r"x+", "".join("x" if s != 200 else "." for s in seen)))
    assert longest <= P.MAX_BURST, f"{longest} injected errors in a row"
    for response in injected:
        assert response.headers[protocol.RETRY_AFTER_HEADER] == str(P.RETRY_AFTER_S)
        assert name in response.json()["detail"]
    assert statuses((name,), 7) == seen, "same seed, same requests: same answers"
    assert statuses((name,), 8) != seen, "another seed: other answers"
    assert set(statuses((name,), 7, 60, protocol.HEALTH)) == {200}, "/health is never faulted"


def test_a_retried_request_meets_at_most_two_refusals_in_a_row_whatever_passes_beside_it() -> None:
    """The promise is per attempt of a request: a heartbeat passing between a client's retries does not start
    the count again, nor does the redirect of a bare path draw again once its first leg is let through —
    platoon, whose env calls all take the 308, once met a third 5xx on one call."""

    async def play() -> list[int]:
        app = build_app([get_scenario(ENV)], ServerConfig(faults=("flaky-5xx",), seed=7))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://orsbench", follow_redirects=True) as client:
            mine = []
            for _ in range(300):
                mine.append((await client.get("/tools")).status_code)  # 308 to /{ENV}/tools
                await client.get(f"/{ENV}/splits")  # someone else's request between each try
            return mine

    mine = asyncio.run(play())
    assert 200 in mine
    runs = re.findall(r"x+", "".join("x" if s >= 500 else "." for s in mine))
    assert runs and max(len(run) for run in runs) <= P.MAX_BURST, f"{max(len(r) for r in runs)} refusals of one request in a row"


def test_latency_jitter_waits_the_seeded_amount() -> None:
    async def timed() -> list[float]:
        app = build_app([get_scenario(ENV)], ServerConfig(faults=("latency-jitter",), seed=5))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://orsbench") as client:
            out = []
            for _ in range(8):
                start = time.monotonic()
                assert (await client.get(f"/{ENV}/splits")).status_code == 200
                out.append(time.monotonic() - start)
            return out

    # The profile's own stream: Random(seed * 1000 + index) mixed by name, as apply_faults seeds it.
    schedule = P._own_rng("latency-jitter", random.Random(5 * 1000 + 0))
    expected = [schedule.uniform(P.LATENCY_MIN_S, P.LATENCY_MAX_S) for _ in range(8)]
    measured = asyncio.run(timed())
    assert all(m >= e - 0.002 for m, e in zip(measured, expected)), (measured, expected)
    assert max(expected) - min(expected) > 0.03, "the delays vary"


# -- over the wire ---------------------------------------------------------------------------
@dataclass
class Cut:
    """A /call stream read as far as it went."""

    stream: SSEStream
    error: str | None
    elapsed: float

    @property
    def task_id(self) -> str | None:
        first = self.stream.first(protocol.EVENT_TASK_ID)
        return first.data if first else None

    def end(self) -> str | None:
        last = self.stream.first(protocol.EVENT_END)
        return last.data if last else None


def stream_call(server: RunningServer, sid: str, body: dict[str, Any], *, read_timeout: float = 10.0, env: str = ENV) -> Cut:
    """POST /call with the wire client, which keeps whatever arrived even when the stream is cut or goes silent."""
    with WireClient(server.url) as client:
        ex = client.request(
            "POST", protocol.env_path(env, protocol.CALL), sid=sid, json_body=body, stream=True, read_timeout=read_timeout
        )
    assert ex.status == 200, ex.body
    error = ex.error.split(":", 1)[0] if ex.error else None  # the transport error's type name
    return Cut(ex.sse or SSEStream(), error, ex.elapsed)


def session(client: WireClient, index: int = 0) -> str:
    sid = client.new_session()
    assert client.create(sid, split="train", index=index).status == 200
    return sid


def reveal(position: int) -> dict[str, Any]:
    return {"name": "reveal", "input": {"position": position}}


def calls(server: RunningServer) -> dict[str, int]:
    return dict(server.stats()["calls"])


def test_slow_setup_answers_503_starting_then_serves(ors_server_factory: ServerFactory) -> None:
    server = ors_server_factory(ENV, faults=("slow-setup",), setup_delay=1.0)
    with WireClient(server.url) as client:
        sid = session(client)
        early = client.prompt(ENV, sid)
        assert early.status == 503, early.summary()
        assert early.headers[protocol.BACKEND_STATE_HEADER.lower()] == protocol.BACKEND_STARTING
        assert early.headers["retry-after"] == str(protocol.STARTING_RETRY_AFTER_S)
        assert early.json()["detail"] == protocol.DETAIL_STARTING
        time.sleep(1.0)
        assert client.prompt(ENV, sid).status == 200


def test_setup_failure_is_a_sticky_500_until_delete(ors_server_factory: ServerFactory) -> None:
    server = ors_server_factory(ENV, faults=("setup-failure",))
    with WireClient(server.url) as client:
        sid = session(client)
        time.sleep(P.SETUP_FAILURE_AFTER_S + 0.1)
        for exchange in (
            client.prompt(ENV, sid),
            client.call(ENV, sid, "reveal", {"position": 0}),
            client.task_tools(ENV, sid),
            client.prompt(ENV, sid),
        ):
            assert exchange.status == 500, exchange.summary()
            assert exchange.json()["detail"] == "SetupFailed: environment setup failed (orsbench fault profile setup-failure)"
        assert client.ping(sid).status == 200, "the session exists; only its setup failed"
        assert client.delete(sid).status == 200
        assert client.ping(sid).status == 404


@pytest.mark.parametrize("tool", ["fast", "running"])
def test_stream_drop_cuts_after_task_id_and_resume_delivers_once(ors_server_factory: ServerFactory, tool: str) -> None:
    if tool == "fast":  # a synchronous tool: done before the first byte
        server, env, body, index = ors_server_factory(ENV, faults=("stream-drop",)), ENV, reveal(0), 0
    else:  # a tool still running when the stream is cut; the resume waits for it
        server, env, body, index = (
            ors_server_factory("slow", faults=("stream-drop",), params={"setup": 0}),
            "slow",
            {"name": "wait", "input": {"seconds": 0.6}},
            0,
        )
    with WireClient(server.url) as client:
        sid = session(client, index)
        before = calls(server)
        cut = stream_call(server, sid, body, env=env)
        assert cut.error == "RemoteProtocolError", f"expected the connection cut mid-response, got {cut}"
        assert cut.stream.names() == [protocol.EVENT_TASK_ID] and cut.task_id
        resumed = stream_call(server, sid, {**body, "task_id": cut.task_id}, env=env)
        assert resumed.error is None and resumed.task_id == cut.task_id
        assert resumed.end() is not None and '"ok":true' in resumed.end(), resumed
        after = calls(server)
        assert after.get(body["name"], 0) - before.get(body["name"], 0) == 1, "the tool ran exactly once"


def test_stream_stall_is_silent_past_the_read_timeout_and_resume_works(ors_server_factory: ServerFactory) -> None:
    server = ors_server_factory(ENV, faults=("stream-stall",), ping_interval=0.25)
    stall = P.STALL_PING_INTERVALS * 0.25
    with WireClient(server.url) as client:
        sid = session(client)
        timed_out = stream_call(server, sid, reveal(0), read_timeout=stall / 2)
        assert timed_out.error == "ReadTimeout" and timed_out.stream.names() == [protocol.EVENT_TASK_ID]
        resumed = stream_call(server, sid, {**reveal(0), "task_id": timed_out.task_id}, read_timeout=stall / 2)
        assert resumed.error is None and resumed.end() is not None
        patient = stream_call(server, sid, reveal(1), read_timeout=stall * 3)
        assert patient.error is None and patient.end() is not None
        assert patient.elapsed >= stall - 0.05, patient.elapsed
        assert patient.stream.comments == [], "a stalled stream sends no keep-alives"


def test_stream_no_end_closes_cleanly_without_end_even_on_resume(ors_server_factory: ServerFactory) -> None:
    server = ors_server_factory(ENV, faults=("stream-no-end",))
    with WireClient(server.url) as client:
        sid = session(client)
        before = calls(server)
        first = stream_call(server, sid, reveal(0))
        assert first.error is None and first.stream.incomplete is None
        assert first.stream.names() == [protocol.EVENT_TASK_ID]
        for _ in range(3):
            again = stream_call(server, sid, {**reveal(0), "task_id": first.task_id})
            assert again.error is None and again.stream.names() == [protocol.EVENT_TASK_ID]
        assert calls(server).get("reveal", 0) - before.get("reveal", 0) == 1, "resumes never re-run the tool"


def test_short_ttl_reaps_idle_sessions_and_spares_pinged_ones(ors_server_factory: ServerFactory) -> None:
    server = ors_server_factory(ENV, faults=("short-ttl",), ttl=1.0)
    with WireClient(server.url) as client:
        idle, pinged = session(client), session(client)
        reaped_before = server.stats()["sessions_reaped"]
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            assert client.ping(pinged).status == 200
            time.sleep(0.3)
        assert client.ping(idle).status == 404
        assert client.call(ENV, idle, "reveal", {"position": 0}).status == 404
        assert client.call(ENV, pinged, "reveal", {"position": 0}).status == 200
        assert server.stats()["sessions_reaped"] - reaped_before >= 1


def test_tool_raises_on_the_second_call_and_the_session_lives_on(ors_server_factory: ServerFactory) -> None:
    server = ors_server_factory(ENV, faults=("tool-raises",))
    with WireClient(server.url) as client:
        sid = session(client)
        answers = [client.call(ENV, sid, "reveal", {"position": p}) for p in (0, 1, 1)]
        assert [a.sse.names() for a in answers] == [["task_id", "end"], ["task_id", "error"], ["task_id", "end"]]
        assert answers[1].sse.first("error").data == "tool 'reveal' raised: injected failure (orsbench fault profile tool-raises)"
        assert server.stats()["call_errors"].get("reveal", 0) >= 1


def test_restart_loses_every_session_after_a_502_window(ors_server_factory: ServerFactory) -> None:
    server = ors_server_factory(ENV, faults=("restart",))
    with WireClient(server.url) as client:
        bystander, sid = session(client), session(client)
        assert client.call(ENV, sid, "reveal", {"position": 0}).status == 200
        crashed = client.call(ENV, sid, "reveal", {"position": 1})
        assert crashed.status == 502 and "restarting" in crashed.json()["detail"]
        assert client.prompt(ENV, bystander).status == 502, "still down"
        time.sleep(P.RESTART_DOWN_S + 0.1)
        for lost in (sid, bystander):
            assert client.ping(lost).status == 404
            assert client.prompt(ENV, lost).json()["detail"] == protocol.DETAIL_NOT_FOUND_SESSION
        fresh = session(client)
        assert client.call(ENV, fresh, "reveal", {"position": 0}).status == 200
        assert server.stats()["active_sessions"] == 1


def test_profiles_compose_latency_tool_raises_and_stream_drop(ors_server_factory: ServerFactory) -> None:
    server = ors_server_factory(ENV, faults=("latency-jitter", "tool-raises", "stream-drop"))
    with WireClient(server.url) as client:
        sid = session(client)
        outcomes = []
        for position in (0, 1):
            cut = stream_call(server, sid, reveal(position))
            assert cut.error == "RemoteProtocolError" and cut.task_id, cut
            assert cut.elapsed >= P.LATENCY_MIN_S
            outcomes.append(stream_call(server, sid, {**reveal(position), "task_id": cut.task_id}).stream.names())
        assert outcomes == [["task_id", "end"], ["task_id", "error"]]
        requests = server.stats()["requests"]
        assert requests["fault stream-drop"] >= 2 and requests["fault tool-raises"] >= 1


@pytest.mark.ors_server(ENV, faults=("tool-raises",))
def test_the_pytest_fixture_takes_faults(ors_server: RunningServer) -> None:
    assert ors_server.stats()["config"]["faults"] == ["tool-raises"]
    with WireClient(ors_server.url) as client:
        sid = session(client)
        total = sum(digits(TASK0))
        names = [
            client.call(ENV, sid, "submit" if i else "reveal", {"total": total} if i else {"position": 0}).sse.names()
            for i in (0, 1)
        ]
        assert names == [["task_id", "end"], ["task_id", "error"]]
