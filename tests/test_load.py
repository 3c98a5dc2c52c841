"""The load tools run whole, correct episodes and count every failure; nothing here asserts a timing.

Covers the locustfile (``orsbench/load.py``: custom arguments, the embedded
server, failures for broken streams), the episode plan, the asyncio driver,
the floor app, the /proc readers and the ``orsbench bench`` runner — each run
bounded to a few seconds or a few episodes.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from orsbench import protocol
from orsbench.bench import EpisodeFailure, PlanError, discover, drive, example_input
from orsbench.bench.driver import percentile
from orsbench.bench.episode import check_sid_echo, check_stream_status, session_id, tool_output
from orsbench.bench.locust_run import locustfile, run_locust, steady_rate
from orsbench.bench.procstat import tree_cpu_seconds, tree_rss_bytes
from orsbench.bench.options import BenchOptions
from orsbench.bench.runner import run_bench
from orsbench.cli import main as cli_main
from orsbench.servers.engine import uuid4_hex, uuid4_str
from orsbench.servers.launch import serve
from orsbench.servers.state import TaskRecord, TaskRegistry
from orsbench.wire.sse import parse

LOCUST_ENV = {**os.environ, protocol.ENV_DISABLE_UPDATE_CHECK: "1"}


@pytest.fixture(scope="module")
def echo(ors_server_factory):
    return ors_server_factory("echo")


def stats_delta(before: dict, after: dict, key: str) -> int:
    return after["requests"].get(key, 0) - before["requests"].get(key, 0)


def run_locust_cli(
    *args: str, seconds: int = 3, timeout: float = 90, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], list[dict], str]:
    """``locust -f orsbench/load.py --headless ...`` bounded by ``-t`` and a wall-clock timeout.

    Returns the process, the ``--json-file`` stats entries and the ``--csv`` failures table.
    """
    with tempfile.TemporaryDirectory(prefix="orsbench-test-locust-") as tmp:
        out = Path(tmp) / "run"
        cmd = [
            sys.executable, "-m", "locust", "-f", locustfile(), "--headless", "-u", "3", "-r", "30", "-t", f"{seconds}s",
            "--stop-timeout", "5", "--json-file", str(out), "--csv", str(out), "--loglevel", "INFO", *args,
        ]  # fmt: skip
        done = subprocess.run(
            cmd, check=False, env={**LOCUST_ENV, **(env or {})}, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
        stats_path, failures_path = Path(f"{out}.json"), Path(f"{out}_failures.csv")
        entries = json.loads(stats_path.read_text()) if stats_path.exists() else []
        failures = failures_path.read_text() if failures_path.exists() else ""
    return done, entries, failures


def entry(entries: list[dict], method: str, name: str) -> dict:
    found = [e for e in entries if e["method"] == method and e["name"] == name]
    assert found, f"no Locust stats entry {method} {name!r}; have {[(e['method'], e['name']) for e in entries]}"
    return found[0]


# -- the locustfile --------------------------------------------------------------
CUSTOM_FLAGS = ("--ors-env", "--ors-split", "--ors-calls", "--ors-think-time", "--ors-tool", "--ors-args", "--ors-scenario")


def python(*args: str) -> subprocess.CompletedProcess[str]:
    # Locust monkey-patches the interpreter (gevent) on import, so it only ever runs in a subprocess here.
    return subprocess.run([sys.executable, *args], check=False, env=LOCUST_ENV, capture_output=True, text=True, timeout=60)


def test_custom_arguments_are_in_the_locust_parser_and_its_web_ui():
    done = python("-c", "import orsbench.load; from locust.argument_parser import get_parser; "
                        "print(sorted(get_parser().args_included_in_web_ui))")  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    for flag in CUSTOM_FLAGS:
        assert flag[2:].replace("-", "_") in done.stdout, f"{flag} is not offered in the web UI"


def test_python_m_orsbench_load_help_lists_the_custom_arguments():
    done = python("-m", "orsbench.load", "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    for flag in CUSTOM_FLAGS:
        assert flag in done.stdout, f"{flag} missing from python -m orsbench.load --help"


@pytest.mark.xfail(
    strict=True,
    reason="locust 2.47 prints --help before it imports the locustfile, so arguments added through "
    "events.init_command_line_parser never appear in `locust -f FILE --help` (locustio/locust#2917)",
)
def test_locust_help_lists_the_custom_arguments():
    done = python("-m", "locust", "-f", locustfile(), "--help")
    assert done.returncode == 0
    assert "--ors-calls" in done.stdout


def test_locust_without_host_runs_episodes_on_an_embedded_mock_and_stops_it():
    done, entries, failures = run_locust_cli("--exit-code-on-error", "1", "--ors-calls", "2")
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    assert failures.count("\n") <= 1, failures  # the header line only
    episodes = entry(entries, "ORS", "episode")
    assert episodes["num_requests"] > 0 and episodes["num_failures"] == 0
    # Locust's own entries for every stage, and our SSE events: time to task_id and to end.
    for method, name in [("POST", "create_session"), ("POST", "create"), ("GET", "prompt"), ("GET", "task_tools"),
                         ("POST", "call"), ("POST", "delete"), ("POST", "delete_session"),
                         ("SSE", "create_session task_id"), ("SSE", "create_session end"),
                         ("SSE", "call task_id"), ("SSE", "call end")]:  # fmt: skip
        assert entry(entries, method, name)["num_failures"] == 0
    # Two calls per finished episode (an episode cut off at the time limit may have made fewer).
    assert entry(entries, "SSE", "call end")["num_requests"] >= 2 * episodes["num_requests"]
    match = re.search(r"embedded mock server for 'echo' at (http://127\.0\.0\.1:\d+) \(pid (\d+)\)", log)
    assert match, f"the embedded server was not announced:\n{log[-3000:]}"
    pid = int(match.group(2))
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower(), (
        "the embedded server outlived Locust"
    )


def test_locust_counts_a_truncated_call_stream_as_a_failure(ors_server_factory):
    broken = ors_server_factory("echo", faults=("call-end-missing",))
    before = broken.stats()
    # The one-tool episode: the player learns nothing on a server whose every call is cut (that is exit 2, below).
    done, entries, failures = run_locust_cli("--host", broken.url, "--ors-tool", "echo", "--exit-code-on-error", "1", seconds=2)
    assert done.returncode == 1, "a failed episode must fail the run under --exit-code-on-error 1"
    episodes = entry(entries, "ORS", "episode")
    assert episodes["num_failures"] == episodes["num_requests"] > 0
    assert entry(entries, "SSE", "call end")["num_failures"] > 0
    assert "truncated stream" in failures and "without an end event" in failures, failures
    # Failed episodes still delete their sessions.
    after = broken.stats()
    assert after["active_sessions"] == before["active_sessions"]


def test_locust_sends_the_key_from_the_environment(ors_server_factory):
    """A server that wants a key: every request of every episode carries $ORSBENCH_API_KEY (as every front end reads it)."""
    key = "sk-locust-KEY-0007"
    keyed = ors_server_factory("echo", api_key=key)
    done, entries, failures = run_locust_cli("--host", keyed.url, "--exit-code-on-error", "1", seconds=2, env={"ORSBENCH_API_KEY": key})
    assert done.returncode == 0, failures + done.stderr[-2000:]
    episodes = entry(entries, "ORS", "episode")
    assert episodes["num_requests"] > 0 and episodes["num_failures"] == 0
    assert key not in done.stdout + done.stderr + failures


def test_locust_reports_bad_tool_arguments_with_the_reason(echo):
    done, entries, failures = run_locust_cli(
        "--host", echo.url, "--ors-args", '{"wrong": 1}', "--exit-code-on-error", "1", seconds=2
    )
    assert done.returncode == 1
    episodes = entry(entries, "ORS", "episode")
    assert episodes["num_failures"] == episodes["num_requests"] > 0
    assert "input_validation" in failures, failures


def test_run_locust_measures_the_episode_rate_against_a_host(echo):
    plan = discover(echo.url)
    result = run_locust(echo.url, plan, users=2, seconds=2)
    assert result.exit_code == 0, result.log_tail
    assert result.episodes > 0 and result.failures == 0 and result.rate > 0


def test_steady_rate_leaves_out_the_first_and_last_second():
    per_second = {"100": 5, "101": 50, "102": 60, "103": 7}
    assert steady_rate(per_second, {"102": 10}) == (50 + 50) / 2
    assert steady_rate({}, {}) == 0.0


# -- the episode plan ------------------------------------------------------------------
def test_example_input_fills_required_fields_from_the_schema():
    schema = {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "n": {"type": "integer", "minimum": 2},
            "mode": {"enum": ["fast", "slow"]},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "inner": {"$ref": "#/$defs/Inner"},
            "optional": {"type": "string"},
        },
        "required": ["text", "n", "mode", "tags", "inner"],
        "$defs": {"Inner": {"type": "object", "properties": {"flag": {"type": "boolean"}}, "required": ["flag"]}},
    }
    assert example_input(schema) == {"text": "orsbench", "n": 2, "mode": "fast", "tags": ["orsbench"], "inner": {"flag": False}}
    assert example_input(None) == {}


def test_discover_derives_a_working_plan_from_the_server(echo):
    plan = discover(echo.url, calls=2)
    assert (plan.env, plan.split, plan.tool, plan.tool_input, plan.calls) == ("echo", "train", "echo", {"text": "orsbench"}, 2)
    assert plan.num_tasks == 48 and plan.index(49) == 1
    with pytest.raises(PlanError, match="no split 'nope'"):
        discover(echo.url, split="nope")
    with pytest.raises(PlanError, match="at least 1"):
        discover(echo.url, calls=0)


# -- how answers are judged --------------------------------------------------------
def test_episode_checks_name_the_stage_and_what_came():
    ok = parse(
        b'event: task_id\r\ndata: t1\r\n\r\nevent: end\r\ndata: {"ok":true,"output":{"blocks":[],"finished":false}}\r\n\r\n'
    )
    assert tool_output(ok)["finished"] is False
    cases = {
        b"event: task_id\r\ndata: t1\r\n\r\n": "truncated stream",
        b"event: task_id\r\ndata: t1\r\n\r\nevent: error\r\ndata: boom\r\n\r\n": "error event: boom",
        b'event: task_id\r\ndata: t1\r\n\r\nevent: end\r\ndata: {"ok":false,"error":"x","reason":"not_found"}\r\n\r\n': "not_found",
        b"event: task_id\r\ndata: t1\r\n\r\nevent: end\r\ndata: {nope\r\n\r\n": "not JSON",
        b"event: error\r\ndata: unknown task_id\r\n\r\n": "no task_id event",
    }
    for raw, message in cases.items():
        with pytest.raises(EpisodeFailure, match=message) as info:
            tool_output(parse(raw))
        assert str(info.value).startswith("call: ")
    with pytest.raises(EpisodeFailure, match="without an end event"):
        session_id(parse(b"event: task_id\r\ndata: s1\r\n\r\n"))
    with pytest.raises(EpisodeFailure, match="HTTP 404"):
        check_sid_echo("delete", 404, b'{"detail":"x"}', "s1")
    with pytest.raises(EpisodeFailure, match="expected"):
        check_sid_echo("create", 200, b'{"sid":"other"}', "s1")
    with pytest.raises(EpisodeFailure, match="content-type"):
        check_stream_status("call", 200, "application/json")


# -- the driver --------------------------------------------------------------------
def test_percentiles_are_nearest_rank():
    values = [float(v) for v in range(100, 0, -1)]
    assert [percentile(values, p) for p in (50, 95, 99, 100)] == [50.0, 95.0, 99.0, 100.0]
    assert percentile([7.0], 99) == 7.0 and percentile([], 50) == 0.0


def test_driver_runs_exactly_the_episodes_asked_and_leaves_no_session(echo):
    plan = discover(echo.url, calls=3)
    before = echo.stats()
    result = drive(echo.url, plan, concurrency=4, duration=30, max_episodes=12)
    after = echo.stats()
    assert (result.episodes, result.failures) == (12, 0), result.failure_kinds
    assert len(result.latencies) == 12 and 0 < result.percentile(50) <= result.percentile(99)
    assert after["active_sessions"] == before["active_sessions"]
    assert after["sessions_created"] - before["sessions_created"] == 12
    assert after["calls"]["echo"] - before["calls"].get("echo", 0) == 36
    for route in (
        "POST /create_session",
        "POST /create",
        "GET /{env}/prompt",
        "GET /{env}/task_tools",
        "POST /delete",
        "POST /delete_session",
    ):
        assert stats_delta(before, after, route) == 12, route


def test_driver_stops_calling_once_the_episode_finished(echo):
    # Task 0 of the train split wants "hello": episode 0 finishes on its first call, the others never do.
    plan = discover(echo.url, tool_input={"text": "hello"}, calls=3)
    before = echo.stats()
    result = drive(echo.url, plan, concurrency=1, duration=30, max_episodes=4)
    after = echo.stats()
    assert (result.episodes, result.failures) == (4, 0)
    assert after["calls"]["echo"] - before["calls"].get("echo", 0) == 1 + 3 * 3


def test_driver_counts_failed_episodes_with_the_reason_and_cleans_up(echo):
    plan = discover(echo.url, tool="nope", tool_input={})
    before = echo.stats()
    result = drive(echo.url, plan, concurrency=2, duration=30, max_episodes=6)
    assert (result.episodes, result.failures) == (0, 6)
    [(message, count)] = result.failure_kinds.items()
    assert count == 6 and message.startswith("task_tools: ") and "'nope' is not listed" in message
    assert echo.stats()["active_sessions"] == before["active_sessions"]


def test_driver_reports_truncated_streams(ors_server_factory):
    broken = ors_server_factory("echo", faults=("call-end-missing",))
    result = drive(broken.url, discover(broken.url), concurrency=2, duration=30, max_episodes=4)
    assert result.failures == 4 and result.episodes == 0
    assert all("truncated stream" in message for message in result.failure_kinds)


def test_driver_is_bounded_by_time():
    with serve("slow", params={"setup": 0, "long_call": 0.3}) as slow:
        plan = discover(slow.url, tool="wait")
        started = time.monotonic()
        result = drive(slow.url, plan, concurrency=2, duration=0.5)
        assert time.monotonic() - started < 5
        assert result.episodes + result.failures <= 2 * (0.5 / 0.3 + 1)


# -- the floor and the /proc readers ------------------------------------------------
def test_floor_answers_a_whole_episode_through_the_launcher():
    with serve("echo", impl="floor") as floor:
        plan = discover(floor.url, calls=2)
        result = drive(floor.url, plan, concurrency=2, duration=30, max_episodes=5)
        assert (result.episodes, result.failures) == (5, 0), result.failure_kinds
        assert floor.stats()["impl"] == "floor"


def test_proc_readers_see_cpu_time_and_memory():
    before = tree_cpu_seconds(os.getpid())
    assert before is not None and tree_rss_bytes(os.getpid()) > 1 << 20
    deadline = time.process_time() + 0.1
    while time.process_time() < deadline:
        pass
    assert tree_cpu_seconds(os.getpid()) >= before + 0.05
    assert tree_cpu_seconds(2**22 + 12345) is None and tree_rss_bytes(2**22 + 12345) is None


# -- orsbench bench ----------------------------------------------------------------------
def test_bench_runner_measures_each_server_in_alternating_windows():
    lines: list[str] = []
    options = BenchOptions(impls=("mock", "floor"), concurrency=2, window_seconds=5, rounds=2, warmup_seconds=0, max_episodes_per_window=8)
    report = run_bench("echo", options, progress=lines.append)
    for impl in ("mock", "floor"):
        figures = report.servers[impl]
        assert (figures.driver.episodes, figures.driver.failures) == (16, 0)
        assert [w["round"] for w in figures.windows] == [1, 2]
        assert figures.cpu_seconds is not None and figures.rss_bytes
    assert report.servers["mock"].active_sessions_after == 0
    rounds = [line.split(":")[0] for line in lines if line.startswith("round")]
    assert rounds == ["round 1 mock", "round 1 floor", "round 2 mock", "round 2 floor"]
    data = json.loads(report.to_json())
    assert set(data["ratios"]["mock/floor"]) == {"throughput", "cpu_per_episode"}
    assert data["servers"]["mock"]["episodes"] == 16 and "p99" in data["servers"]["mock"]["latency_ms"]
    assert "mock/floor: throughput" in report.render()


def test_bench_cli_writes_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    code = cli_main(
        ["bench", "--impl", "mock", "--impl", "floor", "--window", "5", "--rounds", "1", "--warmup", "0",
         "--max-episodes", "4", "--concurrency", "2", "--calls", "2", "--json", str(out), "-q"]
    )  # fmt: skip
    assert code == 0
    data = json.loads(out.read_text())
    assert set(data["servers"]) == {"mock", "floor"} and data["servers"]["mock"]["failures"] == 0
    assert "calls=2" in data["plan"]
    assert "round 1" not in capsys.readouterr().err  # -q: no progress lines
    with pytest.raises(SystemExit) as exc:  # a usage error, as argparse's own
        cli_main(["bench", "--args", "[1]", "-q"])
    assert exc.value.code == 2 and "must be a JSON object" in capsys.readouterr().err


# -- the engine's hot path keeps its behaviour ------------------------------------------
def test_task_registry_resumes_finished_results_for_linger_then_forgets_them():
    async def scenario() -> None:
        registry = TaskRegistry(linger=0.2)
        loop = asyncio.get_running_loop()
        registry.add_result("sync", "end", '{"ok":true}')
        running, cancelled = loop.create_future(), loop.create_future()
        registry.add("async", TaskRecord(running))
        registry.add("never-ends", TaskRecord(loop.create_future()))
        registry.add("cancelled", TaskRecord(cancelled))
        assert (len(registry), registry.running) == (4, 3)
        assert registry.get("sync").future.result() == ("end", '{"ok":true}')
        assert registry.get("async").future is running and not running.done()
        running.set_result(("error", "boom"))
        registry.completed("async")
        cancelled.cancel()
        registry.completed("cancelled")
        assert registry.get("async").future.result() == ("error", "boom")
        assert registry.get("cancelled").future.cancelled()
        assert registry.running == 1
        await asyncio.sleep(0.3)
        assert [registry.get(t) for t in ("sync", "async", "cancelled")] == [None, None, None]
        assert registry.get("never-ends") is not None  # a running task is never evicted
        assert (len(registry), registry.running) == (1, 1)

    asyncio.run(scenario())


def test_engine_ids_have_the_uuid4_format():
    for _ in range(200):
        task_id, sid = uuid4_hex(), uuid4_str()
        assert uuid.UUID(hex=task_id).hex == task_id and uuid.UUID(hex=task_id).version == 4
        assert str(uuid.UUID(sid)) == sid and uuid.UUID(sid).variant == uuid.RFC_4122
