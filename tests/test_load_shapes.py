"""Load as a trainer makes it: the learned episode (reward path included) played alike by bench and Locust,
held sessions on any environment, ramp to the knee, GRPO burst–idle, and ``--fail-under``.

Every run is bounded to a few seconds or a few episodes; no assertion is a speed target (a lower bound on
an episode's length is the think time it must contain, nothing the machine's load can break).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from orsbench.bench import thresholds
from orsbench.bench.driver import DriverResult, drive
from orsbench.bench.locust_run import histogram_percentile, run_locust
from orsbench.bench.options import BenchOptions
from orsbench.bench.pinged import run_pinged_bench
from orsbench.bench.plan import CALL, CREATE, PROMPT, THINK, discover, learned_plan
from orsbench.bench.shapes import bursts, knee, ramp
from orsbench.bench.target import LoadTarget
from orsbench.cli import main as cli_main

from tests.test_load import entry, run_locust_cli


@pytest.fixture(scope="module")
def echo_server(ors_server_factory):
    return ors_server_factory("echo")


@pytest.fixture(scope="module")
def sparse(ors_server_factory):
    """reveal(position) answers reward null; only submit(total) is rewarded and finishes: a two-call reward path."""
    return ors_server_factory("sparse-reward")


def calls_made(before: dict, after: dict) -> dict[str, int]:
    return {tool: after["calls"].get(tool, 0) - before["calls"].get(tool, 0) for tool in after["calls"]}


def test_the_learned_episode_reaches_the_reward_path(sparse):
    plan = learned_plan(sparse.url)
    tools = [tool for tool, _ in plan.script]
    assert tools[-1] == "submit" and "reveal" in tools, plan.describe()
    assert plan.learned_finished and plan.task_index is not None
    assert plan.index(0) == plan.index(7) == plan.task_index  # every episode plays the task the script was learned on


def test_bench_and_locust_play_the_same_learned_episode_reward_path_included(sparse):
    plan = learned_plan(sparse.url)
    per_episode = {tool: sum(1 for t, _ in plan.script if t == tool) for tool, _ in plan.script}

    before = sparse.stats()
    result = drive(sparse.url, plan, concurrency=2, duration=30, max_episodes=6)
    middle = sparse.stats()
    assert (result.episodes, result.failures) == (6, 0), dict(result.failure_kinds)
    assert result.finished == 6 and len(result.rewards) == 6  # the reward path, every episode
    assert calls_made(before, middle) == {tool: n * 6 for tool, n in per_episode.items()}

    locust = run_locust(sparse.url, plan, users=2, seconds=2)
    after = sparse.stats()
    assert locust.exit_code == 0 and locust.episodes > 0 and locust.failures == 0, locust.log_tail
    assert locust.finished == locust.episodes  # Locust's ``ORS finished``: the same reward path
    made = calls_made(middle, after)
    # The same calls per episode (an episode cut off when Locust stopped may have made fewer: at most one per user).
    for tool, n in per_episode.items():
        assert n * locust.episodes <= made[tool] <= n * (locust.episodes + 2), (tool, made, locust.episodes)
    assert set(locust.latency_ms) == {"p50", "p95", "p99"} and locust.latency_ms["p50"] > 0


def test_one_episode_model_thinks_before_create_prompt_and_each_call(echo_server):
    plan = discover(echo_server.url, calls=2, think_time=0.25)
    actions = plan.actions()
    stages = [stage for stage, _ in actions]
    # A think right before create, before prompt and before each call: four for two calls.
    assert stages.count(THINK) == 4
    for stage in (CREATE, PROMPT):
        assert stages[stages.index(stage) - 1] == THINK
    assert all(stages[i - 1] == THINK for i, s in enumerate(stages) if s == CALL)
    # Both front ends walk it: an episode lasts at least its four thinks in each (the echo never finishes on 'orsbench').
    result = drive(echo_server.url, plan, concurrency=2, duration=30, max_episodes=2)
    assert result.episodes == 2 and min(result.latencies) >= 4 * 0.25
    locust = run_locust(echo_server.url, plan, users=2, seconds=3)
    assert locust.episodes > 0 and locust.latency_ms["p50"] >= 4 * 250, locust.latency_ms


def test_locust_histogram_percentiles_are_nearest_rank():
    times = {"10": 50, "20": 49, "300": 1}
    assert histogram_percentile(times, 50) == 10.0
    assert histogram_percentile(times, 99) == 20.0
    assert histogram_percentile(times, 100) == 300.0
    assert histogram_percentile({}, 50) == 0.0


def test_held_sessions_by_ping_on_an_environment_with_no_seconds_tool(ors_server_factory):
    server = ors_server_factory("pick")  # pick(door): no tool takes 'seconds'
    before = server.stats()
    report = run_pinged_bench(
        12, [LoadTarget(server.url, server.pid, "pick")], BenchOptions(hold=1.6, ramp_concurrency=4), interval=0.4
    )
    after = server.stats()
    figures = report.servers["pick"]
    r = figures.result
    assert (r.opened, r.closed, r.errors) == (12, 12, 0), dict(r.error_kinds)
    # Every session pinged at the cadence: about hold / interval pings each (the first right after opening).
    assert 12 * 3 <= r.pings <= 12 * 5, r.pings
    assert after["pings"] - before["pings"] == r.pings
    assert figures.sessions_left == 0 and not report.failed
    assert figures.cpu_us_per_ping is not None and figures.rss_kib_per_session is not None
    assert "pinged every 0.4s" in report.render()


def test_bench_cli_holds_sessions_of_your_app_by_ping(tmp_path, capsys):
    out = tmp_path / "held.json"
    code = cli_main([
        "bench", "--app", "tests/envs/long_game.py:LongGame", "--sessions", "5", "--hold", "1", "--ping-every", "0.3",
        "--json", str(out), "-q", "--fail-under", "ok=100",
    ])  # fmt: skip
    assert code == 0, capsys.readouterr()
    data = json.loads(out.read_text())
    assert data["mode"] == "sessions-pinged"
    app = data["servers"]["app"]
    assert app["opened"] == 5 and app["errors"] == 0 and app["pings"] >= 10


def test_knee_is_the_largest_concurrency_before_the_first_window_under_99_percent():
    def window(ok: int, failed: int) -> DriverResult:
        return DriverResult(episodes=ok, failures=failed)

    steps = [(1, window(100, 0)), (2, window(199, 1)), (4, window(90, 10)), (8, window(100, 0))]
    assert knee(steps) == 2  # 4 fell under 99 %; 8 after it does not count
    assert knee([(1, window(9, 1))]) is None
    assert knee(steps[:2], threshold=1.0) == 1


def test_ramp_to_the_knee_on_a_tiny_bound(echo_server):
    plan = discover(echo_server.url)
    result = ramp(echo_server.url, plan, max_concurrency=3, window=0.4)
    assert [c for c, _ in result.steps] == [1, 2]  # 4 would pass the bound of 3
    assert result.knee == 2 and "bound" in result.stopped
    assert all(r.episodes > 0 and r.failures == 0 for _, r in result.steps)


def test_ramp_stops_at_the_first_window_that_fails(ors_server_factory):
    broken = ors_server_factory("echo", faults=("call-end-missing",))
    result = ramp(broken.url, discover(broken.url, tool="echo", tool_input={"text": "x"}), max_concurrency=64, window=0.3)
    assert [c for c, _ in result.steps] == [1] and result.knee is None


def test_grpo_burst_idle_times_groups_and_steps(sparse):
    plan = learned_plan(sparse.url)
    before = sparse.stats()
    result = bursts(sparse.url, plan, batch=2, group=3, rounds=2, idle=0.2)
    after = sparse.stats()
    assert (result.episodes.episodes, result.episodes.failures, result.episodes.finished) == (12, 0, 12)
    assert after["sessions_created"] - before["sessions_created"] == 12
    assert len(result.group_makespans) == 4 and len(result.step_makespans) == 2
    # A step's makespan is its slowest group's; every group's is at least its slowest episode's start-to-end.
    assert max(result.group_makespans[:2]) == result.step_makespans[0]
    assert max(result.group_makespans[2:]) == result.step_makespans[1]
    assert "group makespan p50" in result.render()


def test_fail_under_exits_non_zero_and_names_the_figure(capsys):
    code = cli_main(["bench", "--shape", "ramp", "--max-concurrency", "2", "--window", "0.3", "-q", "--fail-under", "knee=64"])
    out = capsys.readouterr()
    assert code == 1
    assert "knee 2 is under --fail-under knee=64" in out.out + out.err
    code = cli_main(["bench", "--shape", "burst", "--batch", "1", "--group", "2", "--rounds", "1", "-q", "--fail-under", "ok=100", "--fail-under", "finished=100"])
    assert code == 0, capsys.readouterr()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--fail-under", "speed=3"], "METRIC one of"),
        (["--fail-under", "knee=3"], "does not measure it"),
        (["--sessions", "3", "--shape", "ramp"], "pass one or the other"),
        (["--app", "x.py:X", "--url", "http://127.0.0.1:1"], "give one server of yours"),
    ],
)
def test_bench_usage_errors(args, message, capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["bench", *args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_threshold_check_reports_each_server_below_its_floor():
    limits = [thresholds.parse("ok=99"), thresholds.parse("rate=10")]
    figures = {"mock": {"ok": 100.0, "rate": 50.0}, "sdk": {"ok": 98.0, "rate": 50.0}}
    assert thresholds.check(limits, figures) == ["sdk: ok 98 is under --fail-under ok=99"]


def test_locust_holds_sessions_by_ping_and_closes_them(ors_server_factory):
    server = ors_server_factory("pick")
    before = server.stats()
    done, entries, failures = run_locust_cli(
        "--host", server.url, "--ors-shape", "held", "--ors-sessions-per-user", "4", "--ors-ping-interval", "0.5",
        "--exit-code-on-error", "1", seconds=3,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    after = server.stats()
    assert entry(entries, "ORS", "open held")["num_requests"] == 12  # 3 users x 4 sessions
    pings = entry(entries, "POST", "ping")
    assert pings["num_requests"] >= 12 and pings["num_failures"] == 0
    assert after["pings"] - before["pings"] == pings["num_requests"]
    assert after["active_sessions"] == before["active_sessions"]  # every held session closed when Locust stopped


@pytest.mark.skipif(not (shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")), reason="nginx is not installed (.ci/run installs it)")
def test_episodes_per_replica_behind_nginx_with_session_affinity(tmp_path):
    """Two mock replicas behind nginx (hash on X-Session-ID, X-ORSBench-Replica from the upstream): the spread is counted."""
    control = tmp_path / "control"
    control.mkdir()
    side = subprocess.Popen(
        [sys.executable, "benchmarks/held_distributed.py", "--server-side", "--control", str(control), "--replicas", "2", "--every", "0.5"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not (control / "ready.json").exists():
            assert side.poll() is None and time.monotonic() < deadline, side.stderr.read().decode() if side.stderr else ""
            time.sleep(0.2)
        ready = json.loads((control / "ready.json").read_text())
        plan = discover(ready["url"], tool="echo", tool_input={"text": "x"})
        result = drive(ready["url"], plan, concurrency=4, duration=60, max_episodes=24)
        assert (result.episodes, result.failures) == (24, 0), dict(result.failure_kinds)
        assert set(result.replicas) <= set(ready["replicas"]) and sum(result.replicas.values()) == 24
        assert result.split_sessions == 0  # affinity: every answer of a session from the replica that created it
    finally:
        (control / "stop").touch()
        try:
            side.wait(30)
        except subprocess.TimeoutExpired:
            side.kill()
