"""Held sessions beyond one process: mock replicas behind nginx, driven by Locust in distributed mode.

    python benchmarks/held_distributed.py                                   # 50,000 sessions, 4 replicas, 4 workers
    python benchmarks/held_distributed.py --sessions 5000 --hold 30 --json held.json
    python benchmarks/held_distributed.py --netns --sessions 5000           # the same across network namespaces

What a trainer's fleet does to a deployment between turns: many sessions open at
once, each kept alive by its client's ``POST /ping`` every 10 s (the reference
client's cadence, ``--ping-every``). Here:

* **replicas** — ``--replicas`` mock servers (``echo``; TTL an hour, so a slow
  ping is never a reaped session), started by :mod:`orsbench.servers.launch`;
* **balancer** — Debian's nginx, its config in a temporary directory, routing
  every request of a session by ``hash $http_x_session_id consistent`` (the
  affinity a deployment needs), ``proxy_buffering off``, and naming the replica
  that answered in ``X-ORSBench-Replica`` (its upstream address) so the Locust file
  counts sessions per replica;
* **load** — ``locust -f orsbench/load.py --ors-shape held``: one master and
  ``--workers`` worker processes; each user opens ``--per-user`` sessions
  (``create_session``, ``create``, ``prompt``) and pings each at the cadence
  over its one keep-alive connection, until the run ends, then closes them.
  Sessions spread over worker processes (no process nears the 20,000-fd limit).

The server side (replicas and nginx) runs in a child process that writes a
snapshot of every replica and nginx every ``--every`` s (RSS and CPU from
``/proc``, ``active_sessions`` and ``pings`` from ``/_orsbench/stats``), so the
same code measures in one network namespace or in its own.

``--netns``: the model of a multi-host run. The script creates network
namespaces ``orsb-srv`` (replicas and nginx), ``orsb-m`` (the Locust master) and
``orsb-w1..N`` (workers), each with its own address on a private bridge that
lives in one more namespace, ``orsb-hub`` (10.77.0.0/24: nothing outside these
namespaces is reachable from them, the host's own namespace is untouched), runs
each part with ``ip netns exec``, and deletes every namespace afterwards. Needs
root (CAP_NET_ADMIN).

Figures: sessions opened and held (Σ ``active_sessions``), memory per session per
replica (RSS held − RSS before, over that replica's sessions), server CPU per
ping (Σ replicas' CPU over the held window / Σ pings they answered in it), nginx
CPU per ping, the Locust workers' CPU per ping, pings per second against the
cadence's ask, ping latency p50/p99 and lateness p99 (Locust's ``ORS ping late``:
a driver or server that cannot keep the cadence), errors. The machine is shared:
the load average is printed beside the figures, and when memory runs short
(``--min-free-gib``) the run stops opening sessions and reports what it held.

Bounded: Locust's ``-t`` and a wall-clock limit; every process is stopped by its PID,
nginx by its master's; the namespaces are deleted in a ``finally``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from orsbench import protocol  # noqa: E402
from orsbench.bench.locust_run import histogram_percentile, locustfile  # noqa: E402
from orsbench.bench.procstat import loadavg, tree_cpu_seconds, tree_rss_bytes  # noqa: E402

HUB, SERVER_NS, MASTER_NS = "orsb-hub", "orsb-srv", "orsb-m"
SUBNET = "10.77.0"
SERVER_ADDR, MASTER_ADDR = f"{SUBNET}.2", f"{SUBNET}.3"

# ------------------------------------------------------------------------------------------ server side
def server_side(args: argparse.Namespace) -> int:
    """Replicas and nginx; a snapshot line every ``--every`` s into ``control/snapshots.jsonl`` until ``control/stop``."""
    import httpx

    from orsbench.config import ServerConfig
    from orsbench.servers.launch import start
    from orsbench.servers.replicas import start_nginx

    # SIGTERM (the parent's last resort, or `timeout`) still runs the finally below: replicas and nginx stop by PID.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    control = Path(args.control)
    listen = args.listen
    replicas = []
    nginx = None
    try:
        config = ServerConfig(ttl=3600.0)
        for _ in range(args.replicas):
            replicas.append(start("echo", impl="mock", config=config))
        # The one nginx configuration of orsbench (session hash, streams unbuffered), tuned for many held connections;
        # replicas started without a name are named in X-ORSBench-Replica by their address.
        nginx = start_nginx(
            [urlsplit(r.url).port or 0 for r in replicas], host=listen, workers=args.nginx_workers, connections=16000,
            keepalive=256, timeout_s=120.0, request_buffering=False, name_upstream=True, timeout=20.0,
        )  # fmt: skip
        url = nginx.url
        ready = {"url": url, "nginx_pid": nginx.pid, "replicas": {r.url.split("//")[1]: r.pid for r in replicas}}
        (control / "ready.tmp").write_text(json.dumps(ready))
        (control / "ready.tmp").rename(control / "ready.json")  # whole, or not there yet
        with open(control / "snapshots.jsonl", "a") as out, httpx.Client(timeout=5) as client:
            while not (control / "stop").exists():
                snap: dict[str, Any] = {"t": time.time(), "replicas": {}, "loadavg": loadavg()}
                for r in replicas:
                    try:
                        stats = client.get(r.url + "/_orsbench/stats").json()
                    except (httpx.HTTPError, ValueError):
                        stats = {}
                    snap["replicas"][r.url.split("//")[1]] = {
                        "rss_kib": (tree_rss_bytes(r.pid) or 0) // 1024,
                        "cpu_s": tree_cpu_seconds(r.pid),
                        "active": stats.get("active_sessions"),
                        "pings": stats.get("pings"),
                    }
                snap["nginx"] = {"rss_kib": (tree_rss_bytes(nginx.pid) or 0) // 1024, "cpu_s": tree_cpu_seconds(nginx.pid)}
                out.write(json.dumps(snap) + "\n")
                out.flush()
                time.sleep(args.every)
    finally:
        if nginx is not None:
            nginx.stop(10)
        for r in replicas:
            r.stop()
    return 0


# ------------------------------------------------------------------------------------------ namespaces
def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def netns_up(workers: int) -> dict[str, str]:
    """The namespaces, a bridge in the hub and a veth into each; ``{namespace: address}``."""
    names = {SERVER_NS: SERVER_ADDR, MASTER_NS: MASTER_ADDR}
    names.update({f"orsb-w{k}": f"{SUBNET}.{10 + k}" for k in range(1, workers + 1)})
    sh("ip", "netns", "add", HUB)
    sh("ip", "-n", HUB, "link", "add", "br0", "type", "bridge")
    sh("ip", "-n", HUB, "link", "set", "br0", "up")
    sh("ip", "-n", HUB, "link", "set", "lo", "up")
    for n, (ns, addr) in enumerate(names.items()):
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", HUB, "link", "add", f"h{n}", "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "-n", HUB, "link", "set", f"h{n}", "master", "br0")
        sh("ip", "-n", HUB, "link", "set", f"h{n}", "up")
        sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    return names


def netns_down(workers: int) -> None:
    for ns in [HUB, SERVER_NS, MASTER_NS, *(f"orsb-w{k}" for k in range(1, workers + 1))]:
        subprocess.run(["ip", "netns", "del", ns], check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def in_ns(ns: str | None, cmd: list[str]) -> list[str]:
    return ["ip", "netns", "exec", ns, *cmd] if ns else cmd


# ------------------------------------------------------------------------------------------ the run
def snapshots(control: Path) -> list[dict[str, Any]]:
    path = control / "snapshots.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def active(snap: dict[str, Any]) -> int:
    return sum(r.get("active") or 0 for r in snap["replicas"].values())


def mem_available_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    return 0.0


def run(args: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), protocol.ENV_DISABLE_UPDATE_CHECK: "1"}
    # A worker starved of CPU by a busy machine can be minutes late to its first heartbeat: drop none for that.
    env.setdefault("ORSBENCH_LOCUST_HEARTBEAT_LIVENESS", "300")
    control = Path(tempfile.mkdtemp(prefix="orsbench-held-"))
    processes: list[subprocess.Popen[bytes]] = []
    users = -(-args.sessions // args.per_user)
    out: dict[str, Any] = {"sessions_asked": args.sessions, "replicas": args.replicas, "workers": args.workers,
                           "per_user": args.per_user, "users": users, "ping_every_s": args.ping_every,
                           "hold_s": args.hold, "netns": args.netns, "loadavg_before": loadavg()}  # fmt: skip
    try:
        if args.netns:
            netns_down(args.workers)
            netns_up(args.workers)
        listen = SERVER_ADDR if args.netns else "127.0.0.1"
        master_host = MASTER_ADDR if args.netns else "127.0.0.1"
        side = [sys.executable, __file__, "--server-side", "--control", str(control), "--listen", listen,
                "--replicas", str(args.replicas), "--nginx-workers", str(args.nginx_workers), "--every", str(args.every)]  # fmt: skip
        processes.append(subprocess.Popen(in_ns(SERVER_NS if args.netns else None, side), env=env, stdin=subprocess.DEVNULL))
        deadline = time.monotonic() + 120
        while not (control / "ready.json").exists():
            if processes[0].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server side did not start")
            time.sleep(0.2)
        ready = json.loads((control / "ready.json").read_text())
        print(f"replicas and nginx up: {ready['url']}", file=sys.stderr)
        while not snapshots(control):
            time.sleep(0.2)
        base = snapshots(control)[-1]
        stats = control / "locust"
        ramp_s = args.ramp or max(30.0, args.sessions / 400)
        run_time = int(max(4 * ramp_s, ramp_s + 120) + args.hold + 2 * args.ping_every + 60)
        common = ["-f", locustfile(), "--ors-shape", "held", "--ors-sessions-per-user", str(args.per_user),
                  "--ors-ping-interval", str(args.ping_every), "--loglevel", "INFO"]  # fmt: skip
        port = 5557 + os.getpid() % 1000
        master = [sys.executable, "-m", "locust", *common, "--master", "--headless", "--expect-workers", str(args.workers),
                  "--master-bind-host", master_host, "--master-bind-port", str(port), "--host", ready["url"],
                  "-u", str(users), "-r", f"{users / ramp_s:.2f}", "-t", f"{run_time}s", "--stop-timeout", "120",
                  "--json-file", str(stats), "--only-summary"]  # fmt: skip
        processes.append(subprocess.Popen(in_ns(MASTER_NS if args.netns else None, master), env=env, stdin=subprocess.DEVNULL,
                                          stdout=open(control / "master.log", "wb"), stderr=subprocess.STDOUT))  # fmt: skip
        workers = []
        for k in range(1, args.workers + 1):
            # --host on a worker too: it discovers before the spawn (a busy worker would miss heartbeats).
            cmd = [sys.executable, "-m", "locust", *common, "--worker", "--master-host", master_host, "--master-port", str(port),
                   "--host", ready["url"], "--stop-timeout", "120"]  # fmt: skip
            p = subprocess.Popen(in_ns(f"orsb-w{k}" if args.netns else None, cmd), env=env, stdin=subprocess.DEVNULL,
                                 stdout=open(control / f"worker{k}.log", "wb"), stderr=subprocess.STDOUT)  # fmt: skip
            processes.append(p)
            workers.append(p)
        # Opening: until every session is held, the ramp's time is up, or memory runs short.
        started = time.monotonic()
        stop_reason = ""
        while True:
            time.sleep(args.every)
            snap = snapshots(control)[-1]
            print(f"  {time.monotonic() - started:5.0f}s: {active(snap)} sessions held, MemAvailable {mem_available_gib():.1f} GiB",
                  file=sys.stderr, flush=True)  # fmt: skip
            if active(snap) >= args.sessions:
                stop_reason = "every session opened"
                break
            if mem_available_gib() < args.min_free_gib:
                stop_reason = f"memory: under {args.min_free_gib:g} GiB available"
                break
            if time.monotonic() - started > max(4 * ramp_s, ramp_s + 120) or processes[1].poll() is not None:
                stop_reason = "the ramp's time ran out"
                break
        out["open_stopped"] = stop_reason
        out["open_s"] = round(time.monotonic() - started, 1)
        # Every held session pinged at least once, then the measured window.
        time.sleep(args.ping_every)
        held = snapshots(control)[-1]
        cpu_workers0 = sum(tree_cpu_seconds(p.pid) or 0.0 for p in workers)
        time.sleep(args.hold)
        end = snapshots(control)[-1]
        cpu_workers1 = sum(tree_cpu_seconds(p.pid) or 0.0 for p in workers)
        out.update(figures(base, held, end, cpu_workers1 - cpu_workers0, args))
        # Stop Locust: the master tells the workers; their users close the sessions they hold.
        processes[1].send_signal(signal.SIGTERM)
        try:
            processes[1].wait(180)
        except subprocess.TimeoutExpired:
            processes[1].kill()
        for p in workers:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
        time.sleep(args.every * 2)
        out["sessions_left"] = active(snapshots(control)[-1])
        out["locust"] = locust_figures(Path(f"{stats}.json"))
        out["loadavg_after"] = loadavg()
    finally:
        (control / "stop").touch()
        for p in processes[1:]:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        if processes:
            try:
                processes[0].wait(60)  # the server side stops its replicas and nginx itself
            except subprocess.TimeoutExpired:
                processes[0].send_signal(signal.SIGTERM)
        for p in processes:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        if args.netns:
            netns_down(args.workers)
        if not args.keep:
            shutil.rmtree(control, ignore_errors=True)
    return out


def figures(base: dict[str, Any], held: dict[str, Any], end: dict[str, Any], worker_cpu: float, args: argparse.Namespace) -> dict[str, Any]:
    """Memory per session per replica, CPU per ping (replicas, nginx, Locust workers), pings/s against the ask."""
    per_replica = {}
    pings = cpu = 0.0
    for name, r in held["replicas"].items():
        b, e = base["replicas"][name], end["replicas"][name]
        sessions = r.get("active") or 0
        per_replica[name] = {
            "sessions": sessions,
            "rss_mib": round(r["rss_kib"] / 1024, 1),
            "kib_per_session": round((r["rss_kib"] - b["rss_kib"]) / sessions, 2) if sessions else None,
        }
        pings += (e.get("pings") or 0) - (r.get("pings") or 0)
        cpu += (e["cpu_s"] or 0) - (r["cpu_s"] or 0)
    window = end["t"] - held["t"]
    nginx_cpu = (end["nginx"]["cpu_s"] or 0) - (held["nginx"]["cpu_s"] or 0)
    sessions = active(held)
    return {
        "sessions_held": sessions,
        "per_replica": per_replica,
        "window_s": round(window, 1),
        "pings_in_window": int(pings),
        "pings_per_s": round(pings / window, 1) if window else None,
        "pings_per_s_asked": round(sessions / args.ping_every, 1),
        "server_cpu_us_per_ping": round(cpu / pings * 1e6, 1) if pings else None,
        "server_cores": round(cpu / window, 2) if window else None,
        "nginx_cpu_us_per_ping": round(nginx_cpu / pings * 1e6, 1) if pings else None,
        "nginx_rss_mib": round(held["nginx"]["rss_kib"] / 1024, 1),
        "locust_workers_cpu_us_per_ping": round(worker_cpu / pings * 1e6, 1) if pings else None,
    }


def locust_figures(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"error": "no Locust statistics (see the master's log with --keep)"}
    entries = {(e["method"], e["name"]): e for e in json.loads(path.read_text())}
    out: dict[str, Any] = {"failures": {f"{m} {n}": e["num_failures"] for (m, n), e in entries.items() if e["num_failures"]}}
    for key, label in ((("POST", "ping"), "ping"), (("ORS", "ping late"), "ping_late"), (("ORS", "open held"), "open")):
        e = entries.get(key)
        if e:
            times = e.get("response_times", {})
            out[label] = {
                "count": e["num_requests"],
                "failures": e["num_failures"],
                "p50_ms": histogram_percentile(times, 50),
                "p99_ms": histogram_percentile(times, 99),
            }
    out["replicas"] = {n[len("replica "):]: e["num_requests"] for (m, n), e in entries.items() if m == "ORS" and n.startswith("replica ")}
    return out


def render(out: dict[str, Any]) -> str:
    lo = out.get("locust", {})
    lines = [
        f"held sessions across {out['replicas']} mock replicas behind nginx, Locust 1 master + {out['workers']} workers"
        f"{' in their own network namespaces' if out['netns'] else ''}: {out.get('sessions_held')} of {out['sessions_asked']} held "
        f"({out.get('open_stopped')}, {out.get('open_s')} s to open), pinged every {out['ping_every_s']:g} s",
        f"load average before {out['loadavg_before']}, after {out.get('loadavg_after')} (a shared machine)",
        f"pings/s {out.get('pings_per_s')} (the cadence asks {out.get('pings_per_s_asked')}); server CPU/ping "
        f"{out.get('server_cpu_us_per_ping')} µs ({out.get('server_cores')} cores); nginx CPU/ping {out.get('nginx_cpu_us_per_ping')} µs; "
        f"Locust workers CPU/ping {out.get('locust_workers_cpu_us_per_ping')} µs",
        f"ping p50/p99 {lo.get('ping', {}).get('p50_ms')}/{lo.get('ping', {}).get('p99_ms')} ms; late p50/p99 "
        f"{lo.get('ping_late', {}).get('p50_ms')}/{lo.get('ping_late', {}).get('p99_ms')} ms; failures {lo.get('failures')}; "
        f"sessions left after the run {out.get('sessions_left')}",
    ]
    for name, r in out.get("per_replica", {}).items():
        lines.append(f"  replica {name}: {r['sessions']} sessions, RSS {r['rss_mib']} MiB, {r['kib_per_session']} KiB/session")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=50_000)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4, help="Locust worker processes")
    parser.add_argument("--per-user", type=int, default=50, help="sessions each Locust user holds over its one connection")
    parser.add_argument("--ping-every", type=float, default=protocol.PING_INTERVAL_S)
    parser.add_argument("--hold", type=float, default=60.0, help="seconds of the measured window, every session held")
    parser.add_argument("--ramp", type=float, default=None, help="seconds to open every session (default sessions / 400)")
    parser.add_argument("--nginx-workers", type=int, default=2)
    parser.add_argument("--every", type=float, default=2.0, help="seconds between snapshots")
    parser.add_argument("--min-free-gib", type=float, default=4.0, help="stop opening when less memory than this is available")
    parser.add_argument("--netns", action="store_true", help="master, workers and servers each in a network namespace")
    parser.add_argument("--json", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the control folder (logs, snapshots)")
    # The server side (run by the script itself, in its namespace with --netns).
    parser.add_argument("--server-side", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--control", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--listen", default="127.0.0.1", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.server_side:
        return server_side(args)
    out = run(args)
    print(render(out))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0 if out.get("sessions_held") and not out.get("locust", {}).get("failures") else 1


if __name__ == "__main__":
    sys.exit(main())
