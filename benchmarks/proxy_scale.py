"""The proxy at trainer scale: what ``orsbench proxy`` costs next to the mock it sits in front of, and next to nginx.

    python benchmarks/proxy_scale.py                                  # 500 held sessions, 2 x 5 s of echo episodes
    python benchmarks/proxy_scale.py --sessions 1000 --hold 10 --json proxy-scale.json
    python benchmarks/proxy_scale.py --no-nginx                       # without the nginx side (no nginx installed)

Two measurements, each side by side in one run, each reading every process's own
CPU time (user+sys) and resident memory from ``/proc``:

* **held sessions** — the ``slow`` mock (``setup=0``, keep-alives every
  ``--ping-interval`` s) holds ``--sessions`` sessions, each inside one
  streaming ``wait`` call held open together for ``--hold`` s (the driver of
  ``orsbench bench --sessions``), first straight to the mock, then through
  ``orsbench proxy`` (passive grading on, as a trainer would run it). Per held
  session: the mock's CPU and RSS alone; the mock's and the proxy's through the
  proxy; the ratio proxy / mock.
* **echo episodes** — the ``echo`` mock and a proxy in front of it; the episode
  driver of ``orsbench bench`` (``--concurrency`` concurrent episodes,
  create_session → create → prompt → task_tools → call → delete →
  delete_session) alternates direct and proxied windows of ``--window`` s, so a
  neighbour's burst hits both alike. Per request: the mock's CPU alone, the
  mock's and the proxy's through the proxy, and the ratio proxy / mock.

Each measurement also runs through **nginx** as a plain reverse proxy in front of the same
mock (Debian's nginx, one worker process as the orsbench proxy is one process; ``proxy_buffering
off``, HTTP/1.1 keep-alive to the upstream, access log off; its config in a temporary directory,
bound to 127.0.0.1, stopped by its PID): the orsbench proxy's CPU and memory per held session and
per request over nginx's. The orsbench proxy grades both ends as it forwards: the server checks and
every client session's client checks.

Targets: issue 19, the proxy's CPU per held session <= 3x the mock's, per proxied request <= 2x;
issue 26, with client grading on, <= 2x nginx's per held session and <= 2.5x per request. The load average is printed beside the figures: on a shared machine
compare the ratios of one run, never absolute figures across runs. Bounded: the
held runs by the driver's own time bounds, the episode windows by ``--window`` and
``--max-episodes``; every server started here is stopped by its PID.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orsbench import protocol
from orsbench.bench.driver import drive
from orsbench.bench.hold import DURATION_ARG, run_hold
from orsbench.bench.plan import discover
from orsbench.bench.procstat import loadavg, tree_cpu_seconds, tree_rss_bytes
from orsbench.config import ServerConfig
from orsbench.servers.launch import RunningServer, serve, start_proxy

from _common import start_plain_nginx

@dataclass
class Reading:
    """CPU seconds and RSS KiB of each watched process at each named instant."""

    cpu: dict[str, dict[str, float]] = field(default_factory=dict)
    rss: dict[str, dict[str, int]] = field(default_factory=dict)

    def take(self, phase: str, pids: dict[str, int]) -> None:
        for name, pid in pids.items():
            self.cpu.setdefault(name, {})[phase] = tree_cpu_seconds(pid) or 0.0
            self.rss.setdefault(name, {})[phase] = (tree_rss_bytes(pid) or 0) // 1024

    def cpu_between(self, name: str, start: str, end: str) -> float:
        return self.cpu[name][end] - self.cpu[name][start]

    def rss_between(self, name: str, start: str, end: str) -> int:
        return self.rss[name][end] - self.rss[name][start]


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if b > 0 else None


#: A side of a measurement: a name, and the front the clients talk to (None: straight to the mock).
Fronts = dict[str, Any]


def held(mock: RunningServer, fronts: Fronts, sessions: int, hold: float, warmup: int) -> dict[str, Any]:
    """Held sessions straight to the mock, then through each front; per-session CPU and RSS of each process."""
    out: dict[str, Any] = {"sessions": sessions, "hold_s": hold}
    for side, front in {"direct": None, **fronts}.items():
        url = mock.url if front is None else front.url
        plan = discover(url, tool="wait", tool_input={})
        if warmup:
            run_hold(url, plan, warmup, hold=0.2, timed_arg=DURATION_ARG)
        pids = {"mock": mock.pid} if front is None else {"mock": mock.pid, "front": front.pid}
        reading = Reading()
        result = run_hold(url, plan, sessions, hold=hold, timed_arg=DURATION_ARG, probe=lambda p: reading.take(p, pids))
        n = max(1, result.opened)
        figures: dict[str, Any] = {
            "ok": result.sessions_ok,
            "errors": result.errors,
            "error_kinds": dict(result.error_kinds),
            "held_all_s": round(result.held_all_s, 2),
            "max_keepalive_gap_s": round(result.max_gap_s, 2),
        }
        for name in pids:
            figures[name] = {
                "cpu_us_per_session": round(reading.cpu_between(name, "baseline", "closed") / n * 1e6, 1),
                "kib_per_session": round(reading.rss_between(name, "baseline", "held") / max(1, result.streaming), 2),
                "rss_kib": reading.rss[name],
            }
        out[side] = figures
    mock_alone = out["direct"]["mock"]["cpu_us_per_session"]
    out["ratios"] = {}
    if "proxy" in out:
        spent = out["proxy"]["front"]["cpu_us_per_session"]
        out["ratios"] |= {
            "proxy_cpu_per_session_over_mock_alone": _ratio(spent, mock_alone),
            "proxy_cpu_per_session_over_mock_behind": _ratio(spent, out["proxy"]["mock"]["cpu_us_per_session"]),
            "proxy_kib_per_session_over_mock_alone": _ratio(out["proxy"]["front"]["kib_per_session"], out["direct"]["mock"]["kib_per_session"]),
        }
        if "nginx" in out:
            out["ratios"] |= {
                "proxy_cpu_per_session_over_nginx": _ratio(spent, out["nginx"]["front"]["cpu_us_per_session"]),
                "proxy_kib_per_session_over_nginx": _ratio(out["proxy"]["front"]["kib_per_session"], out["nginx"]["front"]["kib_per_session"]),
            }
    return out


def episodes(mock: RunningServer, fronts: Fronts, concurrency: int, window: float, rounds: int, max_episodes: int) -> dict[str, Any]:
    """Echo episodes in alternating direct / proxied / nginx windows; CPU per request of the mock and of each front."""
    sides = {"direct": None, **fronts}
    plans = {side: discover(mock.url if front is None else front.url) for side, front in sides.items()}
    requests_per_episode = 6 + plans["direct"].calls
    totals = {side: {"episodes": 0, "failures": 0, "seconds": 0.0, "mock_cpu": 0.0, "front_cpu": 0.0, "failure_kinds": {}} for side in sides}
    rss: dict[str, dict[str, int]] = {name: {} for name in ("mock", *fronts)}
    pids = {"mock": mock.pid, **{name: front.pid for name, front in fronts.items()}}
    for name, pid in pids.items():
        rss[name]["before"] = (tree_rss_bytes(pid) or 0) // 1024
    for side, plan in plans.items():  # warm-up: connections, caches
        drive(mock.url if sides[side] is None else sides[side].url, plan, concurrency=concurrency, duration=1.0)
    for _ in range(rounds):
        for side, plan in plans.items():
            front = sides[side]
            mock0 = tree_cpu_seconds(mock.pid) or 0.0
            front0 = (tree_cpu_seconds(front.pid) or 0.0) if front is not None else 0.0
            url = mock.url if front is None else front.url
            result = drive(url, plan, concurrency=concurrency, duration=window, max_episodes=max_episodes)
            t = totals[side]
            t["mock_cpu"] += (tree_cpu_seconds(mock.pid) or 0.0) - mock0
            if front is not None:
                t["front_cpu"] += (tree_cpu_seconds(front.pid) or 0.0) - front0
            t["episodes"] += result.episodes
            t["failures"] += result.failures
            t["seconds"] += result.elapsed
            for kind, count in result.failure_kinds.items():
                t["failure_kinds"][kind] = t["failure_kinds"].get(kind, 0) + count
    for name, pid in pids.items():
        rss[name]["after"] = (tree_rss_bytes(pid) or 0) // 1024
    out: dict[str, Any] = {"concurrency": concurrency, "requests_per_episode": requests_per_episode, "rss_kib": rss}
    for side, t in totals.items():
        requests = max(1, t["episodes"] * requests_per_episode)
        out[side] = {
            "episodes": t["episodes"],
            "failures": t["failures"],
            "failure_kinds": t["failure_kinds"],
            "episodes_per_s": round(t["episodes"] / t["seconds"], 1) if t["seconds"] else 0.0,
            "mock_cpu_us_per_request": round(t["mock_cpu"] / requests * 1e6, 1),
        }
        if sides[side] is not None:
            out[side]["front_cpu_us_per_request"] = round(t["front_cpu"] / requests * 1e6, 1)
    out["ratios"] = {}
    if "proxy" in out:
        spent = out["proxy"]["front_cpu_us_per_request"]
        out["ratios"] |= {
            "proxy_cpu_per_request_over_mock_alone": _ratio(spent, out["direct"]["mock_cpu_us_per_request"]),
            "proxy_cpu_per_request_over_mock_behind": _ratio(spent, out["proxy"]["mock_cpu_us_per_request"]),
        }
        if "nginx" in out:
            out["ratios"]["proxy_cpu_per_request_over_nginx"] = _ratio(spent, out["nginx"]["front_cpu_us_per_request"])
    return out


def render(report: dict[str, Any]) -> str:
    lines = [f"load average before {report['loadavg_before']}, after {report['loadavg_after']}"]
    h = report.get("held")
    if h:
        lines += [
            "",
            f"held sessions: {h['sessions']} per side, held {h['hold_s']:g}s, keep-alives every {report['ping_interval_s']:g}s",
            f"{'side':<8} {'ok':>6} {'errors':>6} {'process':<7} {'CPU µs/sess':>11} {'KiB/sess':>9}",
        ]
        for side in [k for k in ("direct", "proxy", "nginx") if k in h]:
            for name in ("mock", "front"):
                if name in h[side]:
                    f = h[side][name]
                    shown = side if name == "front" else name
                    lines.append(
                        f"{side:<8} {h[side]['ok']:>6} {h[side]['errors']:>6} {shown:<7} "
                        f"{f['cpu_us_per_session']:>11.0f} {f['kib_per_session']:>9.1f}"
                    )
        lines += [f"  {k}: {v}x" for k, v in h["ratios"].items()]
    e = report.get("episodes")
    if e:
        lines += [
            "",
            f"echo episodes: {e['concurrency']} concurrent, {e['requests_per_episode']} requests each",
            f"{'side':<8} {'episodes':>8} {'fail':>5} {'ep/s':>7} {'mock CPU µs/req':>15} {'front CPU µs/req':>16}",
        ]
        for side in [k for k in ("direct", "proxy", "nginx") if k in e]:
            f = e[side]
            lines.append(
                f"{side:<8} {f['episodes']:>8} {f['failures']:>5} {f['episodes_per_s']:>7.1f} "
                f"{f['mock_cpu_us_per_request']:>15.0f} {f.get('front_cpu_us_per_request', 0):>16.0f}"
            )
        lines += [f"  {k}: {v}x" for k, v in e["ratios"].items()]
        lines.append("  RSS KiB before -> after: " + ", ".join(f"{n} {r['before']}->{r['after']}" for n, r in e["rss_kib"].items()))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=500, help="held sessions per side (default 500; 0 skips)")
    parser.add_argument("--hold", type=float, default=10.0, help="seconds all streams are held open together (default 10)")
    parser.add_argument("--ping-interval", type=float, default=5.0, help="the slow mock's keep-alive cadence (default 5 s)")
    parser.add_argument("--warmup", type=int, default=20, help="held sessions per side before measuring (default 20)")
    parser.add_argument("--window", type=float, default=5.0, help="seconds per echo window (default 5; 0 skips)")
    parser.add_argument("--rounds", type=int, default=2, help="echo windows per side (default 2)")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent echo episodes (default 16)")
    parser.add_argument("--max-episodes", type=int, default=5000, help="at most this many episodes per window")
    parser.add_argument("--no-nginx", dest="nginx", action="store_false", help="leave out the nginx side (nginx not installed)")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    if args.sessions < 0 or args.hold <= 0 or args.window < 0 or args.rounds < 1 or args.concurrency < 1:
        parser.error("--sessions/--window must be >= 0, --hold > 0, --rounds and --concurrency >= 1")

    report: dict[str, Any] = {"loadavg_before": loadavg(), "ping_interval_s": args.ping_interval}

    def fronts_of(mock: RunningServer) -> Fronts:
        fronts: Fronts = {"proxy": start_proxy(mock.url)}
        if args.nginx:
            fronts["nginx"] = start_plain_nginx(mock.url)
        return fronts

    if args.sessions:
        config = ServerConfig(ping_interval=args.ping_interval, ttl=max(protocol.SESSION_TTL_S, args.hold * 4))
        with serve("slow", config=config, params={"setup": 0.0}) as mock:
            fronts = fronts_of(mock)
            try:
                report["held"] = held(mock, fronts, args.sessions, args.hold, args.warmup)
            finally:
                for front in fronts.values():
                    front.stop()
    if args.window:
        with serve("echo") as mock:
            fronts = fronts_of(mock)
            try:
                report["episodes"] = episodes(mock, fronts, args.concurrency, args.window, args.rounds, args.max_episodes)
            finally:
                for front in fronts.values():
                    front.stop()
    report["loadavg_after"] = loadavg()
    print(render(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    failed = any(
        report.get(k, {}).get(side, {}).get(f, 0) for k, f in (("held", "errors"), ("episodes", "failures")) for side in ("direct", "proxy", "nginx")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
