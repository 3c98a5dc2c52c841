"""``orsbench proxy`` over many episodes: is its memory flat, and what does it cost the server it fronts?

    python benchmarks/proxy_soak.py                              # 10 minutes, 30 s windows, echo, 16 at a time
    python benchmarks/proxy_soak.py --episodes 100000 --minutes 60 --json soak.json
    python benchmarks/proxy_soak.py --minutes 2 --grade-sample 0.1

One mock ``echo`` server and one ``orsbench proxy`` in front of it (each a process of its own,
stopped by its PID); the episode driver of ``orsbench bench`` (create_session, create, prompt, tools,
``--calls`` calls, delete, delete_session) runs through the proxy back to back in windows of
``--window`` seconds until ``--episodes`` episodes or ``--minutes`` minutes, whichever comes first.
After each window: the proxy's RSS and CPU time and the server's CPU time (``/proc``, each process
tree). Printed: RSS at the start and end, its slope over the second half of the run (KiB per 1,000
episodes, by least squares: the growth a longer run would add), and the proxy's CPU per episode as a
share of the server's own — the cost a user weighs the proxy in.

Why the second half: the passive grader keeps ``--evidence-limit`` exchanges as evidence
(20,000 by default, about 3,000 echo episodes) before it folds later ones into counts, so RSS must
climb until that window is full; what matters is that it stops climbing.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orsbench.bench import discover, drive  # noqa: E402
from orsbench.bench.procstat import loadavg, tree_cpu_seconds, tree_rss_bytes  # noqa: E402
from orsbench.config import ServerConfig  # noqa: E402
from orsbench.servers.launch import serve, start_proxy  # noqa: E402


def slope(xs: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of ``ys`` over ``xs`` (None with fewer than two points)."""
    if len(xs) < 2:
        return None
    from scipy.stats import linregress

    return float(linregress(xs, ys).slope)


def run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"args": vars(args), "loadavg_before": loadavg(), "windows": []}
    with serve("echo", config=ServerConfig()) as server:
        options: dict[str, Any] = {}
        if args.evidence_limit is not None:
            options["evidence_limit"] = args.evidence_limit
        if args.grade_sample is not None:
            options["grade_sample"] = args.grade_sample
        proxy = start_proxy(server.url, **options)
        try:
            plan = discover(proxy.url, calls=args.calls)
            drive(proxy.url, plan, concurrency=args.concurrency, duration=1.0)  # warm: connections, first imports
            time.sleep(0.5)
            start = {"rss": tree_rss_bytes(proxy.pid), "proxy_cpu": tree_cpu_seconds(proxy.pid), "server_cpu": tree_cpu_seconds(server.pid)}
            out["rss_kib_start"] = (start["rss"] or 0) // 1024
            episodes = failures = 0
            began = time.monotonic()
            while episodes < args.episodes and time.monotonic() - began < args.minutes * 60:
                result = drive(proxy.url, plan, concurrency=args.concurrency, duration=args.window)
                episodes += result.episodes
                failures += result.failures
                window = {
                    "t_s": round(time.monotonic() - began, 1),
                    "episodes": episodes,
                    "rss_kib": (tree_rss_bytes(proxy.pid) or 0) // 1024,
                    "proxy_cpu_s": round((tree_cpu_seconds(proxy.pid) or 0) - (start["proxy_cpu"] or 0), 3),
                    "server_cpu_s": round((tree_cpu_seconds(server.pid) or 0) - (start["server_cpu"] or 0), 3),
                }
                out["windows"].append(window)
                print(
                    f"  {window['t_s']:>7.1f} s  {episodes:>8,} episodes  proxy RSS {window['rss_kib']:,} KiB  "
                    f"CPU proxy {window['proxy_cpu_s']:.1f} s, server {window['server_cpu_s']:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
            report = _live_report(proxy.url)
        finally:
            proxy.process.send_signal(signal.SIGTERM)
            try:
                proxy.process.wait(60)
            except subprocess.TimeoutExpired:
                proxy.stop()
    windows = out["windows"]
    last = windows[-1] if windows else {"episodes": 0, "rss_kib": out["rss_kib_start"], "proxy_cpu_s": 0, "server_cpu_s": 0}
    half = [w for w in windows if w["episodes"] >= last["episodes"] / 2]
    per_ep = slope([w["episodes"] for w in half], [w["rss_kib"] for w in half])
    out.update(
        episodes=last["episodes"],
        failures=failures,
        rss_kib_end=last["rss_kib"],
        kib_per_1000_episodes_second_half=None if per_ep is None else round(per_ep * 1000, 2),
        proxy_cpu_us_per_episode=round(last["proxy_cpu_s"] / max(1, last["episodes"]) * 1e6, 1),
        server_cpu_us_per_episode=round(last["server_cpu_s"] / max(1, last["episodes"]) * 1e6, 1),
        proxy_share_of_server_cpu=round(last["proxy_cpu_s"] / last["server_cpu_s"], 3) if last["server_cpu_s"] else None,
        loadavg_after=loadavg(),
        report=report,
    )
    return out


def _live_report(url: str) -> dict[str, Any]:
    import httpx

    doc = httpx.get(url + "/_orsbench/report", timeout=120).json()
    return {k: doc.get(k) for k in ("exchanges", "folded", "summary", "grading")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=100_000, help="stop after this many episodes (default 100,000)")
    parser.add_argument("--minutes", type=float, default=10.0, help="or after this long (default 10)")
    parser.add_argument("--window", type=float, default=30.0, help="seconds between readings (default 30)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--calls", type=int, default=1, help="tool calls per episode (default 1)")
    parser.add_argument("--evidence-limit", type=int, default=None, help="the proxy's --evidence-limit (default: its own)")
    parser.add_argument("--grade-sample", type=float, default=None, help="the proxy's --grade-sample (default: grade every session)")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    out = run(args)
    print(f"load average before {out['loadavg_before']}, after {out['loadavg_after']}")
    print(f"{out['episodes']:,} episodes ({out['failures']} failed) through the proxy")
    print(f"proxy RSS KiB: start {out['rss_kib_start']:,}, end {out['rss_kib_end']:,}; "
          f"slope over the second half {out['kib_per_1000_episodes_second_half']} KiB per 1,000 episodes")
    print(f"CPU per episode: proxy {out['proxy_cpu_us_per_episode']} µs, server {out['server_cpu_us_per_episode']} µs "
          f"(the proxy is {out['proxy_share_of_server_cpu']}x the server's own)")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0 if not out["failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
