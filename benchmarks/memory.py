"""Mock server memory under sustained load: RSS after 1,000 vs 10,000 episodes.

    python benchmarks/memory.py                     # echo, 32 concurrent, 1,000 then 10,000 episodes
    python benchmarks/memory.py --impl sdk --json memory.json

The target (issue 5): RSS of the mock server's process tree after 10,000
episodes within 10 % of its RSS after the first 1,000, and ``active_sessions``
back to 0 when the run ends. Finished tool-call results are kept ``linger``
(60 s) for resume by ``task_id`` — protocol behaviour — so every result of this
run is still held at the second sample; the figure shows how small they are.
Exits 1 when a target is missed or an episode failed.
"""

from __future__ import annotations

import argparse
import json
import sys

from orsbench.bench import discover, drive
from orsbench.bench.procstat import tree_rss_bytes
from orsbench.servers.app import IMPLEMENTATIONS
from orsbench.servers.launch import serve


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="echo")
    parser.add_argument("--impl", default="mock", choices=IMPLEMENTATIONS)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--first", type=int, default=1000, help="episodes before the first sample (default 1000)")
    parser.add_argument("--total", type=int, default=10000, help="episodes before the second sample (default 10000)")
    parser.add_argument("--calls", type=int, default=1)
    parser.add_argument("--limit-pct", type=float, default=10.0, help="allowed RSS growth in percent (default 10)")
    parser.add_argument("--max-seconds", type=float, default=120.0, help="time bound per phase (default 120)")
    parser.add_argument("--json", dest="json_path", help="write the figures here as JSON")
    args = parser.parse_args()

    with serve(args.scenario, impl=args.impl) as server:
        plan = discover(server.url, calls=args.calls)
        rss0 = tree_rss_bytes(server.pid)
        first = drive(server.url, plan, concurrency=args.concurrency, duration=args.max_seconds, max_episodes=args.first)
        rss1 = tree_rss_bytes(server.pid)
        rest = drive(
            server.url, plan, concurrency=args.concurrency, duration=args.max_seconds, max_episodes=args.total - args.first
        )
        rss2 = tree_rss_bytes(server.pid)
        stats = server.stats()
    if rss0 is None or rss1 is None or rss2 is None:
        print("cannot read RSS from /proc on this system", file=sys.stderr)
        return 2
    episodes = first.episodes + rest.episodes
    growth = (rss2 - rss1) / rss1 * 100
    figures = {
        "impl": args.impl,
        "scenario": args.scenario,
        "concurrency": args.concurrency,
        "episodes": episodes,
        "failures": first.failures + rest.failures,
        "rss_start_mib": round(rss0 / 2**20, 2),
        f"rss_after_{first.episodes}_mib": round(rss1 / 2**20, 2),
        f"rss_after_{episodes}_mib": round(rss2 / 2**20, 2),
        "growth_pct": round(growth, 2),
        "bytes_per_episode_after_first": round((rss2 - rss1) / max(1, rest.episodes), 1),
        "active_sessions_after": stats.get("active_sessions"),
        "tasks_tracked_after": stats.get("tasks_tracked"),
    }
    print(json.dumps(figures, indent=2))
    if args.json_path:
        with open(args.json_path, "w") as fh:
            json.dump(figures, fh, indent=2)
    ok = (
        growth <= args.limit_pct
        and figures["active_sessions_after"] in (0, None)
        and figures["failures"] == 0
        and episodes == args.total
    )
    print(
        f"RSS {rss1 / 2**20:.1f} MiB after {first.episodes} episodes -> {rss2 / 2**20:.1f} MiB after {episodes}: "
        f"{growth:+.1f}% (limit {args.limit_pct:g}%); active sessions after: {figures['active_sessions_after']} -> "
        + ("OK" if ok else "TARGET MISSED")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
