"""``orsbench bench --url``: episodes per second on any ORS server on this machine.

The same driver and the same episode as the side-by-side bench
(:mod:`orsbench.bench.runner`), aimed at a URL instead of servers orsbench
starts. With ``--server-pid`` the report adds the server's CPU time per episode
and its resident memory, read from ``/proc`` for that process and its
children; without it, throughput and latency only.
"""

from __future__ import annotations

from collections.abc import Callable

from orsbench.bench.driver import drive
from orsbench.bench.options import BenchOptions
from orsbench.bench.plan import resolve_plan
from orsbench.bench.procstat import loadavg, machine_facts, tree_cpu_seconds, tree_rss_bytes
from orsbench.bench.report import sessions_left
from orsbench.bench.runner import BenchReport, ServerFigures, record_window
from orsbench.bench.target import LoadTarget


def run_url_bench(
    target: LoadTarget,
    options: BenchOptions = BenchOptions(),
    *,
    progress: Callable[[str], None] = lambda _line: None,
) -> BenchReport:
    """Measure ``target`` in ``options.rounds`` windows of ``options.window_seconds``; CPU and RSS when its PID is
    known (sent ``options.api_key``)."""
    o = options
    concurrency, window_seconds, rounds, warmup_seconds = o.concurrency, o.window_seconds, o.rounds, o.warmup_seconds
    max_episodes_per_window, api_key = o.max_episodes_per_window, o.api_key
    loadavg_before = loadavg()
    plan = resolve_plan(
        target.url, env=o.env, split=o.split, tool=o.tool, tool_input=o.tool_input, calls=o.calls, think_time=o.think_time,
        secrets=o.secrets, api_key=api_key,
    )  # fmt: skip
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
    figures.active_sessions_after = sessions_left(target.url, api_key)
    machine = machine_facts(loadavg_before, server_pid=target.pid)
    return BenchReport("(url)", plan.describe(), concurrency, window_seconds, rounds, {target.name: figures}, machine=machine)
