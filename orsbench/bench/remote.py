"""``orsbench bench --url``: episodes per second on any ORS server on this machine.

The same driver and the same episode as the side-by-side bench
(:mod:`orsbench.bench.runner`), aimed at a URL instead of servers orsbench
starts. With ``--server-pid`` the report adds the server's CPU time per episode
and its resident memory, read from ``/proc`` for that process and its
children; without it, throughput and latency only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import httpx

from orsbench import protocol
from orsbench.bench.driver import drive
from orsbench.bench.plan import discover
from orsbench.bench.procstat import loadavg, machine_facts, tree_cpu_seconds, tree_rss_bytes
from orsbench.bench.runner import BenchReport, ServerFigures, record_window
from orsbench.bench.target import LoadTarget


def run_url_bench(
    target: LoadTarget,
    *,
    concurrency: int = 32,
    window_seconds: float = 5.0,
    rounds: int = 2,
    warmup_seconds: float = 1.0,
    calls: int = 1,
    think_time: float = 0.0,
    tool: str | None = None,
    tool_input: dict[str, Any] | None = None,
    split: str | None = None,
    max_episodes_per_window: int | None = None,
    progress: Callable[[str], None] = lambda _line: None,
    secrets: Mapping[str, str] | None = None,
    api_key: str | None = None,
) -> BenchReport:
    """Measure ``target`` in ``rounds`` windows of ``window_seconds``; CPU and RSS when its PID is known (sent ``api_key``)."""
    loadavg_before = loadavg()
    plan = discover(target.url, split=split, tool=tool, tool_input=tool_input, calls=calls, think_time=think_time, secrets=secrets, api_key=api_key)
    progress(f"episode: {plan.describe()}")
    if warmup_seconds > 0:
        warm = drive(target.url, plan, concurrency=concurrency, duration=warmup_seconds, api_key=api_key)
        progress(f"warm-up: {warm.episodes} episodes, {warm.failures} failures")
    figures = ServerFigures(target.name, target.url, cpu_seconds=0.0 if target.pid else None)
    for round_no in range(1, rounds + 1):
        before = tree_cpu_seconds(target.pid) if target.pid else None
        result = drive(target.url, plan, concurrency=concurrency, duration=window_seconds, max_episodes=max_episodes_per_window, api_key=api_key)
        after = tree_cpu_seconds(target.pid) if target.pid else None
        cpu = after - before if before is not None and after is not None else None
        record_window(figures, round_no, result, cpu, f"round {round_no}", progress)
    figures.rss_bytes = tree_rss_bytes(target.pid) if target.pid else None
    try:
        headers = {protocol.API_KEY_HEADER: api_key} if api_key else None
        response = httpx.get(target.url + protocol.STATS, timeout=10, headers=headers)
        value = response.json().get("active_sessions") if response.status_code == 200 else None
        figures.active_sessions_after = value if isinstance(value, int) else None
    except (httpx.HTTPError, ValueError, AttributeError):
        figures.active_sessions_after = None
    machine = machine_facts(loadavg_before, server_pid=target.pid)
    return BenchReport("(url)", plan.describe(), concurrency, window_seconds, rounds, {target.name: figures}, machine=machine)
