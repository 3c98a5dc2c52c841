"""What ``orsbench proxy`` adds: request latency (p50/p99) and CPU per episode, against going direct.

    python benchmarks/proxy_overhead.py                   # echo mock, 200 episodes each way
    python benchmarks/proxy_overhead.py --episodes 500 --json proxy.json

One client plays whole episodes one after another (create_session, create,
prompt, a miss and a hit on ``echo``, delete: 6 requests), first straight to
the upstream, then through the proxy, alternating in blocks of 20 so that a
change in machine load hits both alike. Latency is per request, from the
client. CPU is read from ``/proc`` for the upstream and the proxy processes
(user+sys, whole process trees) over each phase, divided by the episodes:
the proxy's own CPU per episode is its cost; the upstream's should not change.
Bounded: at most ``--episodes`` per side and ``--max-seconds`` in all.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from orsbench.bench.procstat import loadavg, tree_cpu_seconds
from orsbench.servers.launch import serve, start_proxy
from orsbench.wire import WireClient

BLOCK = 20


def episode(client: WireClient, env: str, target: str, latencies: list[float]) -> None:
    def timed(exchange):
        latencies.append(exchange.elapsed)
        if exchange.status != 200:
            raise RuntimeError(f"{exchange.method} {exchange.url} answered {exchange.status}")
        return exchange

    sid = timed(client.create_session()).task_id
    timed(client.create(sid, split="train", index=0))
    timed(client.prompt(env, sid))
    timed(client.call(env, sid, "echo", {"text": "nope"}))
    timed(client.call(env, sid, "echo", {"text": target}))
    timed(client.delete(sid))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=200, help="episodes each way (default 200)")
    parser.add_argument("--max-seconds", type=float, default=300, help="stop after this long in all (default 300)")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()

    load_before = loadavg()
    with serve("echo") as upstream:
        proxy = start_proxy(upstream.url)
        try:
            target = "hello"  # echo train[0]
            lat = {"direct": [], "proxy": []}
            cpu = {"direct": {"upstream": 0.0, "proxy": 0.0}, "proxy": {"upstream": 0.0, "proxy": 0.0}}
            done = {"direct": 0, "proxy": 0}
            clients = {"direct": WireClient(upstream.url), "proxy": WireClient(proxy.url)}
            for client in clients.values():  # warm up: connections, caches
                for _ in range(5):
                    episode(client, "echo", target, [])
            started = time.monotonic()
            while min(done.values()) < args.episodes and time.monotonic() - started < args.max_seconds:
                for side, client in clients.items():
                    up0, px0 = tree_cpu_seconds(upstream.pid) or 0.0, tree_cpu_seconds(proxy.pid) or 0.0
                    n = min(BLOCK, args.episodes - done[side])
                    for _ in range(n):
                        episode(client, "echo", target, lat[side])
                    cpu[side]["upstream"] += (tree_cpu_seconds(upstream.pid) or 0.0) - up0
                    cpu[side]["proxy"] += (tree_cpu_seconds(proxy.pid) or 0.0) - px0
                    done[side] += n
            for client in clients.values():
                client.close()
        finally:
            proxy.stop()
    load_after = loadavg()
    result = {
        "episodes": done,
        "requests_per_episode": 6,
        "latency_ms": {
            side: {
                "p50": round(percentile(v, 0.5) * 1000, 3),
                "p99": round(percentile(v, 0.99) * 1000, 3),
                "mean": round(statistics.fmean(v) * 1000, 3),
            }
            for side, v in lat.items()
        },
        "cpu_ms_per_episode": {
            side: {k: round(v * 1000 / max(1, done[side]), 3) for k, v in parts.items()} for side, parts in cpu.items()
        },
        "loadavg_before": load_before,
        "loadavg_after": load_after,
    }
    added = {q: round(result["latency_ms"]["proxy"][q] - result["latency_ms"]["direct"][q], 3) for q in ("p50", "p99")}
    result["added_latency_ms"] = added
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
