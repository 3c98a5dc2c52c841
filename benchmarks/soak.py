"""Soak: many thousand whole episodes against one mock server, bounded, watched per thousand.

    python benchmarks/soak.py                          # sparse-reward, 10 x 1,000 episodes, 32 at a time
    python benchmarks/soak.py --thousands 3 --json soak.json

Each episode is ``create_session → create → prompt → task_tools → 3 × call →
delete → delete_session`` (the load driver of :mod:`orsbench.bench`, which
checks every answer). After every thousand episodes the script reads the
server's resident memory (its whole process tree, from ``/proc``) and its
``/_orsbench/stats``. Targets (issue 7): no failed episode, no 5xx, every
session created is deleted and ``active_sessions`` is back to 0, and RSS after
the last thousand within 10 % of RSS after the first thousand.

Why ``--linger 5`` by default: the protocol keeps every finished tool-call
result resumable by ``task_id`` for 60 s, so at a few hundred episodes a
second a run shorter than a minute holds *every* result it produced and RSS
climbs by that protocol state alone (about 1 MiB per thousand episodes of
three calls). With a 5 s window the held results reach their steady state in
the first thousand, and growth after it can only be a leak. ``--linger 60``
shows the protocol's own figure.

Bounded twice: each thousand stops starting episodes after ``--max-seconds``,
and the driver cancels anything still running a read timeout later. Exits 1
when a target is missed, 2 when RSS cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from orsbench.bench import discover, drive
from orsbench.bench.procstat import tree_rss_bytes
from orsbench.config import ServerConfig
from orsbench.servers.launch import serve

MIB = 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="sparse-reward")
    parser.add_argument("--thousands", type=int, default=10, help="episodes in thousands (default 10)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--calls", type=int, default=3, help="tool calls per episode (default 3)")
    parser.add_argument("--limit-pct", type=float, default=10.0, help="allowed RSS growth, first to last thousand (default 10)")
    parser.add_argument(
        "--linger", type=float, default=5.0, help="seconds finished results stay resumable (default 5; the protocol's is 60)"
    )
    parser.add_argument("--max-seconds", type=float, default=120.0, help="time bound per thousand (default 120)")
    parser.add_argument("--json", dest="json_path", help="write the figures here as JSON")
    args = parser.parse_args()

    rows: list[dict[str, Any]] = []
    failure_kinds: dict[str, int] = {}
    started = time.perf_counter()
    with serve(args.scenario, config=ServerConfig(linger=args.linger)) as server:
        plan = discover(server.url, calls=args.calls)
        print(f"soak: {args.thousands} x 1,000 episodes, {args.concurrency} at a time, {plan.describe()}", flush=True)
        rss_start = tree_rss_bytes(server.pid)
        for thousand in range(1, args.thousands + 1):
            result = drive(server.url, plan, concurrency=args.concurrency, duration=args.max_seconds, max_episodes=1000)
            rss = tree_rss_bytes(server.pid)
            stats = server.stats()
            for kind, n in result.failure_kinds.items():
                failure_kinds[kind] = failure_kinds.get(kind, 0) + n
            row = {
                "thousand": thousand,
                "episodes": result.episodes,
                "failures": result.failures,
                "episodes_per_s": round(result.rate, 1),
                "p99_ms": round(result.percentile(99) * 1000, 1),
                "rss_mib": round(rss / MIB, 2) if rss is not None else None,
                "active_sessions": stats["active_sessions"],
                "tasks_tracked": stats["tasks_tracked"],
            }
            rows.append(row)
            print("  " + "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
        stats = server.stats()
    elapsed = time.perf_counter() - started

    if rss_start is None or any(r["rss_mib"] is None for r in rows):
        print("cannot read RSS from /proc on this system", file=sys.stderr)
        return 2
    first, last = rows[0]["rss_mib"], rows[-1]["rss_mib"]
    growth = (last - first) / first * 100
    server_errors = {code: n for code, n in stats["statuses"].items() if int(code) >= 500}
    client_errors = {code: n for code, n in stats["statuses"].items() if 400 <= int(code) < 500}
    episodes = sum(r["episodes"] for r in rows)
    figures = {
        "scenario": args.scenario,
        "concurrency": args.concurrency,
        "calls_per_episode": args.calls,
        "linger_s": args.linger,
        "episodes": episodes,
        "failed_episodes": sum(r["failures"] for r in rows),
        "failure_kinds": failure_kinds,
        "server_5xx": server_errors,
        "server_4xx": client_errors,
        "sessions_created": stats["sessions_created"],
        "sessions_deleted": stats["sessions_deleted"],
        "sessions_reaped": stats["sessions_reaped"],
        "active_sessions_after": stats["active_sessions"],
        "rss_start_mib": round(rss_start / MIB, 2),
        "rss_after_first_thousand_mib": first,
        "rss_after_last_thousand_mib": last,
        "rss_growth_pct": round(growth, 2),
        "seconds": round(elapsed, 1),
        "per_thousand": rows,
    }
    if args.json_path:
        with open(args.json_path, "w") as fh:
            json.dump(figures, fh, indent=2)
    misses = []
    if figures["failed_episodes"] or episodes != args.thousands * 1000:
        misses.append(f"{figures['failed_episodes']} failed episodes, {episodes} completed: {failure_kinds}")
    if server_errors or client_errors:
        misses.append(f"error statuses: {server_errors | client_errors}")
    if figures["active_sessions_after"] != 0 or stats["sessions_created"] != stats["sessions_deleted"]:
        misses.append(
            f"sessions: {stats['sessions_created']} created, {stats['sessions_deleted']} deleted, {stats['active_sessions']} active"
        )
    if growth > args.limit_pct:
        misses.append(f"RSS grew {growth:.1f}% (limit {args.limit_pct:g}%)")
    print(
        f"soak: {episodes} episodes in {elapsed:.0f}s, {figures['failed_episodes']} failed, 5xx {server_errors or 0}, "
        f"active sessions after {figures['active_sessions_after']}; RSS {first:.1f} MiB after the first thousand -> "
        f"{last:.1f} MiB after the last: {growth:+.1f}% (limit {args.limit_pct:g}%) -> "
        + ("OK" if not misses else "MISSED: " + "; ".join(misses))
    )
    return 0 if not misses else 1


if __name__ == "__main__":
    sys.exit(main())
