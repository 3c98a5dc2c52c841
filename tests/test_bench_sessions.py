"""Held sessions (``orsbench bench --sessions``), ``--url`` targets and the keep-alive clock.

Every run is small (50 sessions, held 1 s) and bounded; nothing asserts a
timing beyond what the protocol promises (a keep-alive at least every
interval). The figures at scale are in BENCHMARKS.md, produced by the same
command.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orsbench.bench.driver import DriverResult
from orsbench.bench.hold import duration_arg
from orsbench.bench.options import BenchOptions
from orsbench.bench.runner import BenchReport, ServerFigures
from orsbench.bench.sessions import holdable_impls, run_held_bench
from orsbench.bench.target import TargetError, local_target
from orsbench.cli import main as cli_main
from orsbench.config import ServerConfig
from orsbench.servers.implementations import IMPLEMENTATIONS
from orsbench.servers.keepalive import KeepaliveClock
from orsbench.servers.launch import serve

PING = 0.25


def _held(path) -> dict:
    return json.loads(path.read_text())


def assert_clean(figures: dict, sessions: int) -> None:
    assert figures["errors"] == 0, figures["error_kinds"]
    assert figures["sessions_ok"] == sessions
    assert figures["sessions_left"] == 0
    assert figures["streaming"] == sessions
    # A stream is never silent for much longer than the keep-alive interval (slack for a busy machine).
    assert 0 < figures["max_keepalive_gap_s"] < PING * 4 + 1
    assert figures["ttfb_ms"]["p99"] > 0
    assert figures["driver"]["cpu_s"] > 0


def test_held_sessions_mock_via_cli(tmp_path, capsys):
    out = tmp_path / "held.json"
    code = cli_main(
        ["bench", "--sessions", "50", "--hold", "1", "--ping-interval", str(PING), "--impl", "mock", "-q", "--json", str(out)]
    )
    assert code == 0
    report = _held(out)
    assert report["mode"] == "sessions" and set(report["servers"]) == {"mock"}
    mock = report["servers"]["mock"]
    assert_clean(mock, 50)
    assert mock["timed_calls"] is True
    assert mock["rss_kib_per_session"] is not None and mock["cpu_us_per_session"] > 0
    assert "KiB/sess" in capsys.readouterr().out


@pytest.mark.parametrize("impl", [i for i in holdable_impls() if i != "mock"])
def test_held_sessions_other_servers(impl):
    report = run_held_bench(50, BenchOptions(hold=1.0, impls=(impl,), ping_interval=PING, hold_warmup=5))
    assert set(report.servers) == {impl}
    assert_clean(report.servers[impl].as_dict(), 50)
    assert not report.failed


def test_held_sessions_against_a_url_with_its_pid(tmp_path):
    config = ServerConfig(ping_interval=PING)
    with serve("slow", config=config, params={"setup": 0.0}) as server:
        out = tmp_path / "url.json"
        code = cli_main(
            ["bench", "--sessions", "50", "--hold", "1", "--url", server.url, "--server-pid", str(server.pid), "-q", "--json", str(out)]
        )
        stats = server.stats()
    assert code == 0
    figures = _held(out)["servers"]["url"]
    assert_clean(figures, 50)
    # The tool was picked from the schema: slow's wait(seconds), timed by the driver.
    assert figures["timed_calls"] is True
    assert figures["server_rss_kib"]["held"] is not None and figures["cpu_us_per_session"] is not None
    assert stats["active_sessions"] == 0 and stats["sessions_deleted"] >= 50


def test_episode_bench_against_a_url(tmp_path, echo_server):
    out = tmp_path / "episodes.json"
    args = ["bench", "--url", echo_server.url, "--server-pid", str(echo_server.pid), "--window", "1", "--rounds", "1"]
    code = cli_main([*args, "--warmup", "0", "-c", "4", "--max-episodes", "40", "-q", "--json", str(out)])
    assert code == 0
    url = json.loads(out.read_text())["servers"]["url"]
    assert url["episodes"] > 0 and url["failures"] == 0
    assert url["server_cpu_us_per_episode"] is not None and url["server_rss_mib"] > 0
    assert url["active_sessions_after"] == 0


@pytest.fixture(scope="module")
def echo_server():
    with serve("echo") as server:
        yield server


@pytest.mark.parametrize(
    "args",
    [
        ["--url", "http://10.1.2.3:8000"],
        ["--url", "http://example.com"],
        ["--url", "ftp://127.0.0.1/"],
        ["--sessions", "5", "--url", "http://192.168.0.1:80"],
        ["--sessions", "5", "--impl", "floor"],
        ["--sessions", "0"],
        ["--url", "http://127.0.0.1:9", "--impl", "mock"],
        ["--server-pid", "1"],
    ],
)
def test_bad_targets_are_usage_errors(args, capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["bench", *args])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.strip().splitlines()[-1].startswith("orsbench bench: error:") and "Traceback" not in err


def test_local_target_accepts_loopback_only():
    for url in ("http://127.0.0.1:8000", "http://localhost:1", "http://[::1]:8000/"):
        assert local_target(url).url == url.rstrip("/")
    with pytest.raises(TargetError, match="not on this machine"):
        local_target("http://8.8.8.8:80")
    with pytest.raises(TargetError, match="not a running process"):
        local_target("http://127.0.0.1:1", pid=2**22 + 12345)


def test_holdable_impls_come_from_the_registry():
    assert holdable_impls() == tuple(i for i in IMPLEMENTATIONS if i != "floor")
    assert "mock" in holdable_impls()


def test_duration_arg_reads_the_schema():
    assert duration_arg({"properties": {"seconds": {"anyOf": [{"type": "number"}, {"type": "null"}]}}}) == "seconds"
    assert duration_arg({"properties": {"seconds": {"type": "string"}}}) is None
    assert duration_arg(None) is None


def test_driver_at_a_core_limit_is_reported():
    busy = ServerFigures("mock", "http://127.0.0.1:1", driver=DriverResult(episodes=10, elapsed=1.0, driver_cpu=0.97))
    calm = ServerFigures("sdk", "http://127.0.0.1:2", driver=DriverResult(episodes=10, elapsed=1.0, driver_cpu=0.2))
    report = BenchReport("echo", "plan", 4, 1.0, 1, {"mock": busy, "sdk": calm})
    text = report.render()
    assert "WARNING: the driver used 97% of a core while measuring mock" in text
    assert "measuring sdk" not in text
    assert report.as_dict()["servers"]["mock"]["driver_saturated"] is True


def test_keepalive_clock_wakes_on_done_and_never_pings_early():
    async def scenario() -> tuple[list[bool], float, bool]:
        loop = asyncio.get_running_loop()
        clock = KeepaliveClock(0.2)
        never: asyncio.Future[None] = loop.create_future()
        started = loop.time()
        first = await clock.wait(never)  # nothing finishes: a keep-alive is due
        waited = loop.time() - started
        soon: asyncio.Future[None] = loop.create_future()
        loop.call_later(0.02, soon.set_result, None)
        second = await clock.wait(soon)  # the tool finishes first
        return [first, second], waited, never.cancelled()

    results, waited, cancelled = asyncio.run(scenario())
    assert results == [False, True]
    assert 0.2 <= waited < 0.2 + 0.5
    assert not cancelled


# -- the soak tells a leak from a full resume window ------------------------------------------
SOAK = Path(__file__).resolve().parent.parent / "benchmarks" / "soak.py"


def _soak(tmp_path, *extra: str) -> tuple[int, dict, str]:
    out = tmp_path / "soak.json"
    env = {**os.environ, "OPENREWARD_DISABLE_UPDATE_CHECK": "1"}
    done = subprocess.run(
        [sys.executable, str(SOAK), "--quick", "--json", str(out), *extra],
        capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return done.returncode, json.loads(out.read_text()), done.stdout + done.stderr


def test_quick_soak_passes_with_a_full_resume_window(tmp_path):
    code, figures, log = _soak(tmp_path)
    assert code == 0, log
    assert figures["steady_windows"] >= 2 and figures["failed_episodes"] == 0
    # The window really is full: results are held, each costs bytes, and the cap is reported beside them.
    assert figures["tasks_tracked_steady"] > 0 and figures["bytes_per_held_result"] is not None
    assert figures["registry_cap"] == 200_000


def test_quick_soak_fails_on_a_planted_leak(tmp_path):
    code, figures, log = _soak(tmp_path, "--fault", "memory-leak")
    assert code == 1, log
    assert "a leak" in log and figures["steady_rss_growth_pct"] > 10


# -- locust: GRPO-shaped groups, and distributed runs --------------------------------------
def _locust(tmp_path, *args: str, seconds: int = 3) -> tuple[int, dict[str, dict], str]:
    from orsbench.bench.locust_run import locustfile

    out = tmp_path / "locust"
    cmd = [
        sys.executable, "-m", "locust", "-f", locustfile(), "--headless", "-t", f"{seconds}s", "--stop-timeout", "5",
        "--json-file", str(out), "--only-summary", "--loglevel", "WARNING", *args,
    ]  # fmt: skip
    env = {**os.environ, "OPENREWARD_DISABLE_UPDATE_CHECK": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL, cwd=tmp_path)
    path = Path(f"{out}.json")
    entries = {f"{e['method']} {e['name']}": e for e in json.loads(path.read_text())} if path.exists() else {}
    return done.returncode, entries, (done.stdout + done.stderr)[-3000:]


def test_locust_grpo_groups_start_and_delete_together(tmp_path):
    code, entries, log = _locust(tmp_path, "-u", "6", "-r", "6", "--ors-shape", "grpo", "--ors-group", "3", "--ors-calls", "2")
    assert code == 0, log
    episodes, makespan = entries["ORS episode"], entries["ORS grpo group makespan"]
    assert episodes["num_requests"] > 0 and episodes["num_failures"] == 0
    assert {"ORS grpo group 0 makespan", "ORS grpo group 1 makespan"} <= set(entries)
    # One makespan per group step: every step is G episodes.
    assert abs(episodes["num_requests"] - 3 * makespan["num_requests"]) <= 6
    # Every member created the group's task, so delete-together held: no session is left on the server.
    assert entries["POST delete"]["num_failures"] == 0


@pytest.mark.slow  # starts a Locust master and workers (20 s); the single-process Locust runs stay in CI
def test_locust_distributed_master_and_workers(tmp_path):
    code, entries, log = _locust(tmp_path, "-u", "4", "-r", "4", "--processes", "2", seconds=4)
    assert code == 0, log
    episode = entries["ORS episode"]
    assert episode["num_requests"] > 0 and episode["num_failures"] == 0, log
    assert not any(e["num_failures"] for e in entries.values()), log


# -- the lean session bookkeeping keeps the reference's per-tool serialisation -----------------
def _session():
    from orsbench.scenarios import get_scenario
    from orsbench.scenarios.base import Episode
    from orsbench.servers.state import Session

    scenario = get_scenario("slow")
    return Session("sid", scenario, Episode(scenario, {"steps": 1}), {})


def test_calls_of_one_tool_run_one_at_a_time_and_leave_no_lock_behind():
    async def scenario() -> tuple[list[str], object, tuple[str, ...]]:
        session = _session()
        order: list[str] = []

        async def call(label: str, tool: str) -> None:
            await session.enter_tool(tool)
            try:
                order.append(f"start {label}")
                await asyncio.sleep(0.02)
                order.append(f"end {label}")
            finally:
                session.exit_tool(tool)

        await asyncio.gather(call("a", "wait"), call("b", "wait"), call("c", "wait"), call("x", "step"))
        return order, session.locks, session.in_flight

    order, locks, in_flight = asyncio.run(scenario())
    waits = [o for o in order if o[-1] in "abc"]
    assert waits == ["start a", "end a", "start b", "end b", "start c", "end c"]
    # Another tool is not held up by them.
    assert order.index("start x") < order.index("end a")
    assert locks is None and in_flight == ()


def test_a_cancelled_waiter_does_not_wedge_the_tool():
    async def scenario() -> tuple[list[str], object, tuple[str, ...]]:
        session = _session()
        order: list[str] = []

        async def call(label: str) -> None:
            await session.enter_tool("wait")
            try:
                order.append(label)
                await asyncio.sleep(0.02)
            finally:
                session.exit_tool("wait")

        first = asyncio.ensure_future(call("a"))
        await asyncio.sleep(0)
        second = asyncio.ensure_future(call("b"))
        await asyncio.sleep(0)
        second.cancel()
        await asyncio.gather(first, second, return_exceptions=True)
        await call("c")  # runs at once: nothing left locked
        return order, session.locks, session.in_flight

    order, locks, in_flight = asyncio.run(scenario())
    assert order == ["a", "c"]
    assert locks is None and in_flight == ()


def test_plot_held_draws_a_sweep_and_refuses_other_reports(tmp_path):
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "plot_held.py"

    def report(n: int, errors: int) -> Path:
        figures = {"sessions": n, "errors": errors, "sessions_left": 0, "rss_kib_per_session": 10.0 + n / 1000, "cpu_us_per_session": 400.0}
        path = tmp_path / f"held-{n}.json"
        path.write_text(json.dumps({"mode": "sessions", "servers": {"mock": figures, "sdk": {**figures, "rss_kib_per_session": 60.0}}}))
        return path

    paths = [str(report(100, 0)), str(report(1000, 0)), str(report(10000, 3))]
    out = tmp_path / "held.png"
    done = subprocess.run([sys.executable, str(script), *paths, "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    other = tmp_path / "bench.json"
    other.write_text(json.dumps({"servers": {}}))
    refused = subprocess.run([sys.executable, str(script), str(other)], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "not an orsbench bench --sessions report" in refused.stderr


# -- 503 + Retry-After: an env still starting is waited out, as a client would ---------------------
def test_retry_after_reads_delta_seconds_and_dates_and_only_on_503():
    from datetime import UTC, datetime, timedelta
    from email.utils import format_datetime

    from orsbench.bench.episode import MAX_RETRY_AFTER_S, retry_after

    assert retry_after(503, {"Retry-After": "2"}) == 2.0
    assert retry_after(503, {"Retry-After": " 0 "}) == 0.0
    assert retry_after(503, {"Retry-After": "3600"}) == MAX_RETRY_AFTER_S  # capped: a load run stays bounded
    soon = format_datetime(datetime.now(UTC) + timedelta(seconds=5), usegmt=True)
    assert 3.0 <= retry_after(503, {"Retry-After": soon}) <= 5.0
    assert retry_after(503, {}) is None  # a bare 503 is an error, not a wait
    assert retry_after(503, {"Retry-After": "soon"}) is None
    assert retry_after(502, {"Retry-After": "1"}) is None
    assert retry_after(429, {"Retry-After": "1"}) is None


def _starting_slow(setup: float):
    """``slow`` whose setup outlasts the readiness wait: each session's first /call (and /prompt)
    answers 503 with ``X-Backend-State: starting`` and ``Retry-After: 2`` until its setup is done."""
    return serve("slow", config=ServerConfig(ping_interval=PING, setup_wait_timeout=0.3), params={"setup": setup})


def test_held_sessions_wait_out_503_retry_after_instead_of_counting_errors():
    from orsbench.bench.hold import run_hold
    from orsbench.bench.plan import discover

    with _starting_slow(setup=2.5) as server:
        plan = discover(server.url, tool="wait", tool_input={})
        result = run_hold(server.url, plan, 10, hold=0.5)
        stats = server.stats()
    assert result.errors == 0, result.error_kinds
    assert result.sessions_ok == 10 and result.streaming == 10
    assert result.retried >= 1  # the 503s came, and were ridden out
    assert result.as_dict()["retried_503"] == result.retried
    assert stats["active_sessions"] == 0


def test_a_503_that_outlasts_the_budget_is_still_an_error():
    from orsbench.bench.hold import run_hold
    from orsbench.bench.plan import discover

    with _starting_slow(setup=60.0) as server:
        plan = discover(server.url, tool="wait", tool_input={})
        result = run_hold(server.url, plan, 2, hold=0.2, read_timeout=3.0)
    assert result.retried >= 1
    assert result.errors == 2 and result.sessions_ok == 0
    assert all("HTTP 503" in kind for kind in result.error_kinds), result.error_kinds


def test_episode_driver_waits_out_503_retry_after():
    from orsbench.bench.driver import drive
    from orsbench.bench.plan import discover

    with _starting_slow(setup=1.5) as server:
        plan = discover(server.url, tool="wait", tool_input={"seconds": 0.05})
        result = drive(server.url, plan, concurrency=2, duration=1.0, max_episodes=2)
    assert result.failures == 0, result.failure_kinds
    assert result.episodes == 2 and result.retried >= 1
