"""Soak: whole episodes against one mock server for a fixed time, telling a leak from a full window.

    python benchmarks/soak.py                          # 10 minutes, 30 s windows, sparse-reward, 32 at a time
    python benchmarks/soak.py --minutes 3 --json soak.json
    python benchmarks/soak.py --quick                  # ~12 s, for CI and tests
    python benchmarks/soak.py --quick --fault memory-leak   # a planted leak: must exit 1

Each episode is ``create_session → create → prompt → task_tools → 3 × call →
delete → delete_session`` (the load driver of :mod:`orsbench.bench`, which
checks every answer). Episodes run back to back in windows of ``--window``
seconds for ``--minutes``; after each window the script reads the server's
RSS (its whole process tree, from ``/proc``) and ``/_orsbench/stats``.

Why windows and not "first thousand vs last thousand": the protocol keeps
every finished tool-call result resumable by ``task_id`` for ``linger``
seconds, so RSS *must* climb until that resume window is full — at a few
hundred episodes a second it holds thousands of results, up to the registry's
cap. That growth is the protocol's state, not a leak. The soak therefore only
compares **steady-state windows**: those that start after ``linger`` seconds
of load, when the registry evicts as fast as it adds. From the first steady
window to the last, RSS may grow at most ``--limit-pct``; a real leak grows
with every episode and fails. The report also gives the bytes each held
result costs (RSS above the idle server over ``tasks_tracked``) and what the
registry would cost at its cap.

Other targets: no failed episode, no 4xx/5xx, every session created is deleted
and ``active_sessions`` is back to 0. Exits 1 when a target is missed, 2 when
RSS cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from scipy import stats as scistats

from orsbench.bench import discover, drive
from orsbench.bench.procstat import tree_rss_bytes
from orsbench.config import ServerConfig
from orsbench.servers.launch import serve
from orsbench.servers.state import TaskRegistry

MIB = 2**20


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="sparse-reward")
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to run (default 10)")
    parser.add_argument("--window", type=float, default=30.0, help="seconds per measured window (default 30)")
    parser.add_argument("--quick", action="store_true", help="CI size: 12 s of 1.5 s windows with a 1 s resume window")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--calls", type=int, default=3, help="tool calls per episode (default 3)")
    parser.add_argument(
        "--limit-pct", type=float, default=10.0, help="allowed RSS growth from the first to the last steady window (default 10)"
    )
    parser.add_argument(
        "--linger", type=float, default=5.0, help="seconds finished results stay resumable (default 5; the protocol's is 60)"
    )
    parser.add_argument("--fault", action="append", default=[], help="fault profile for the server (e.g. memory-leak)")
    parser.add_argument("--json", dest="json_path", help="write the figures here as JSON")
    args = parser.parse_args(argv)
    if args.quick:
        args.minutes, args.window, args.linger = 0.2, 1.5, 1.0
    if args.minutes <= 0 or args.window <= 0 or args.linger < 0:
        parser.error("--minutes and --window must be positive, --linger at least 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows: list[dict[str, Any]] = []
    failure_kinds: dict[str, int] = {}
    cap = TaskRegistry(args.linger).cap
    started = time.perf_counter()
    deadline = started + args.minutes * 60
    config = ServerConfig(linger=args.linger, faults=tuple(args.fault))
    with serve(args.scenario, config=config) as server:
        plan = discover(server.url, calls=args.calls)
        print(
            f"soak: {args.minutes:g} min in {args.window:g}s windows, {args.concurrency} at a time, "
            f"resume window {args.linger:g}s, {plan.describe()}",
            flush=True,
        )
        rss_idle = tree_rss_bytes(server.pid)
        load_start = time.perf_counter()
        window_no = 0
        while True:
            window_no += 1
            length = min(args.window, max(0.5, deadline - time.perf_counter()))
            result = drive(server.url, plan, concurrency=args.concurrency, duration=length)
            rss = tree_rss_bytes(server.pid)
            stats = server.stats()
            for kind, n in result.failure_kinds.items():
                failure_kinds[kind] = failure_kinds.get(kind, 0) + n
            elapsed = time.perf_counter() - load_start
            row = {
                "window": window_no,
                "t_s": round(elapsed, 1),
                "episodes": result.episodes,
                "failures": result.failures,
                "episodes_per_s": round(result.rate, 1),
                "rss_mib": round(rss / MIB, 2) if rss is not None else None,
                "active_sessions": stats["active_sessions"],
                "tasks_tracked": stats["tasks_tracked"],
                # Steady once the window started after the resume window had filled.
                "steady": elapsed - length >= args.linger,
            }
            rows.append(row)
            print("  " + "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
            if time.perf_counter() >= deadline:
                break
        stats = server.stats()
    elapsed = time.perf_counter() - started

    if rss_idle is None or any(r["rss_mib"] is None for r in rows):
        print("cannot read RSS from /proc on this system", file=sys.stderr)
        return 2
    steady = [r for r in rows if r["steady"]]
    figures = summarise(args, rows, steady, stats, failure_kinds, rss_idle, cap, elapsed)
    if args.json_path:
        with open(args.json_path, "w") as fh:
            json.dump(figures, fh, indent=2)
    misses = verdict(args, figures, stats)
    growth = figures["steady_rss_growth_pct"]
    per_result = figures["bytes_per_held_result"]
    print(
        f"soak: {figures['episodes']} episodes in {elapsed:.0f}s, {figures['failed_episodes']} failed, "
        f"5xx {figures['server_5xx'] or 0}, active sessions after {figures['active_sessions_after']}; "
        f"{len(steady)} steady windows: RSS {figures['rss_first_steady_mib']} -> {figures['rss_last_steady_mib']} MiB "
        f"({_pct(growth)}, limit {args.limit_pct:g}%, slope {figures['steady_rss_slope_kib_per_s']} KiB/s); "
        f"{figures['tasks_tracked_steady']} results held (cap {cap:,}), ~{per_result} bytes each "
        f"-> ~{figures['rss_at_cap_mib']} MiB at the cap -> " + ("OK" if not misses else "MISSED: " + "; ".join(misses))
    )
    return 0 if not misses else 1


def summarise(
    args: argparse.Namespace,
    rows: list[dict[str, Any]],
    steady: list[dict[str, Any]],
    stats: dict[str, Any],
    failure_kinds: dict[str, int],
    rss_idle: int,
    cap: int,
    elapsed: float,
) -> dict[str, Any]:
    first = steady[0]["rss_mib"] if steady else None
    last = steady[-1]["rss_mib"] if steady else None
    growth = (last - first) / first * 100 if first and last else None
    slope = None
    if len(steady) >= 3:
        fit = scistats.linregress([r["t_s"] for r in steady], [r["rss_mib"] * 1024 for r in steady])
        slope = round(fit.slope, 1)
    held = round(sum(r["tasks_tracked"] for r in steady) / len(steady)) if steady else None
    above_idle = (sum(r["rss_mib"] for r in steady) / len(steady) * MIB - rss_idle) if steady else None
    per_result = round(above_idle / held) if above_idle is not None and held else None
    return {
        "scenario": args.scenario,
        "minutes": args.minutes,
        "window_s": args.window,
        "concurrency": args.concurrency,
        "calls_per_episode": args.calls,
        "linger_s": args.linger,
        "faults": args.fault,
        "episodes": sum(r["episodes"] for r in rows),
        "failed_episodes": sum(r["failures"] for r in rows),
        "failure_kinds": failure_kinds,
        "server_5xx": {c: n for c, n in stats["statuses"].items() if int(c) >= 500},
        "server_4xx": {c: n for c, n in stats["statuses"].items() if 400 <= int(c) < 500},
        "sessions_created": stats["sessions_created"],
        "sessions_deleted": stats["sessions_deleted"],
        "active_sessions_after": stats["active_sessions"],
        "rss_idle_mib": round(rss_idle / MIB, 2),
        "steady_windows": len(steady),
        "rss_first_steady_mib": first,
        "rss_last_steady_mib": last,
        "steady_rss_growth_pct": None if growth is None else round(growth, 2),
        "steady_rss_slope_kib_per_s": slope,
        "tasks_tracked_steady": held,
        "registry_cap": cap,
        "bytes_per_held_result": per_result,
        "rss_at_cap_mib": round((rss_idle + per_result * cap) / MIB, 1) if per_result else None,
        "seconds": round(elapsed, 1),
        "windows": rows,
    }


def verdict(args: argparse.Namespace, figures: dict[str, Any], stats: dict[str, Any]) -> list[str]:
    misses = []
    if figures["failed_episodes"] or not figures["episodes"]:
        misses.append(f"{figures['failed_episodes']} failed episodes of {figures['episodes']}: {figures['failure_kinds']}")
    if figures["server_5xx"] or figures["server_4xx"]:
        misses.append(f"error statuses: {figures['server_5xx'] | figures['server_4xx']}")
    if figures["active_sessions_after"] != 0 or stats["sessions_created"] != stats["sessions_deleted"]:
        misses.append(
            f"sessions: {stats['sessions_created']} created, {stats['sessions_deleted']} deleted, {stats['active_sessions']} active"
        )
    if figures["steady_windows"] < 2:
        misses.append(f"only {figures['steady_windows']} steady windows: run longer than the resume window ({args.linger:g}s)")
    elif figures["steady_rss_growth_pct"] is not None and figures["steady_rss_growth_pct"] > args.limit_pct:
        misses.append(f"RSS grew {figures['steady_rss_growth_pct']:.1f}% over the steady windows (limit {args.limit_pct:g}%): a leak")
    return misses


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1f}%"


if __name__ == "__main__":
    sys.exit(main())
