"""Where ``orsbench proxy``'s CPU per request goes: its front, the server grader, the client grader — beside nginx.

    python benchmarks/proxy_costs.py                     # 2 rounds of 4 s windows per variant
    python benchmarks/proxy_costs.py --window 5 --rounds 3 --json proxy-costs.json

``benchmarks/proxy_scale.py`` measures the proxy as users run it. This splits that figure: the
same :class:`~orsbench.servers.proxy.ProxyApp` in front of the same ``echo`` mock, started once per
variant (a child process each, stopped by its PID),

* ``asgi-bare`` / ``socket-bare`` — forwarding only (no observer), under uvicorn and on the
  socket-level front (``orsbench/servers/proxy_server.py``);
* ``socket-server`` — with the server checks' passive grader;
* ``socket-client`` — with the client checks' grader (sessions attributed, graded as they end);
* ``socket-both`` — both graders: what ``orsbench proxy`` runs;
* ``nginx`` — Debian's nginx as a plain reverse proxy (``proxy_scale.Nginx``);
* ``floor`` — the floor of any proxy written on this stack: a bare uvloop byte forwarder (one upstream
  connection per client connection, bytes passed on as they come, no HTTP parsing, no evidence): what
  Python on uvloop costs before the proxy does any work of its own;

and the episode driver of ``orsbench bench`` (16 concurrent echo episodes, 7 requests each) runs
through each in turn, window after window, so a neighbour's burst hits all alike. Per variant:
CPU µs per request (user+sys of the process tree, ``/proc``) and the ratio to nginx; CPU µs per
episode beside the upstream server's own over the same window (it serves only that variant's
traffic then), and their ratio: the share the proxy adds to the server's CPU. ``--impl sdk`` puts
the openreward SDK's own ``Server`` (the reference) upstream instead of the mock. Inside the
children the observers' own time is summed too (process time around each call), so the graders'
share is also read directly.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

VARIANTS = ("nginx", "floor", "asgi-bare", "socket-bare", "socket-server", "socket-client", "socket-both")


def serve_floor(upstream: str, ready: str) -> None:
    """In the child: the ``floor`` variant, a bare byte forwarder on uvloop, until SIGINT/SIGTERM."""
    import asyncio

    import uvloop

    from orsbench.servers.app import bind, write_ready_file

    host, port = upstream.removeprefix("http://").rsplit(":", 1)

    class Upstream(asyncio.Protocol):
        def __init__(self, client: Client) -> None:
            self.client = client

        def data_received(self, data: bytes) -> None:
            self.client.transport.write(data)

        def connection_lost(self, exc: Exception | None) -> None:
            self.client.transport.close()

    class Client(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            self.transport, self.pending, self.upstream = transport, [], None
            asyncio.get_running_loop().create_task(self.connect())

        async def connect(self) -> None:
            self.upstream, _ = await asyncio.get_running_loop().create_connection(lambda: Upstream(self), host, int(port))
            self.upstream.write(b"".join(self.pending))

        def data_received(self, data: bytes) -> None:
            if self.upstream is None:
                self.pending.append(data)
            else:
                self.upstream.write(data)

        def connection_lost(self, exc: Exception | None) -> None:
            if self.upstream is not None:
                self.upstream.close()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        sock = bind("127.0.0.1", 0)
        server = await loop.create_server(Client, sock=sock, backlog=2048)
        write_ready_file(ready)(f"http://127.0.0.1:{sock.getsockname()[1]}")
        await stop.wait()
        server.close()

    uvloop.run(main())


def serve_variant(upstream: str, ready: str, variant: str, costs: str) -> None:
    """In the child: the proxy with the variant's observers, timing each; their time per request to ``costs`` at exit."""
    if variant == "floor":
        serve_floor(upstream, ready)
        return
    from orsbench.clientcheck.proxy_grading import ProxyGrading
    from orsbench.servers.app import serve_forever, write_ready_file
    from orsbench.servers.proxy import ProxyApp
    from orsbench.servers.proxy_server import ProxyServer
    from orsbench.wire.observe import Observer, Observing, Wrapping

    front, grading = variant.split("-")
    spent = {"server": 0.0, "client": 0.0, "requests": 0}

    class Timed(Wrapping):
        """An observer timing another's halves (process time), as ``orsbench proxy`` plugs the graders in."""

        def __init__(self, name: str, observer: Observer) -> None:
            super().__init__([observer])
            self.name = name

        def started(self, exchange: Any, path: str) -> None:
            began = time.process_time()
            self.observers.started(exchange, path)
            spent[self.name] += time.process_time() - began

        def ended(self, exchange: Any, path: str) -> None:
            began = time.process_time()
            self.observers.ended(exchange, path)
            spent[self.name] += time.process_time() - began

    class Count(Observing):
        def ended(self, exchange: Any, path: str) -> None:
            spent["requests"] += 1

    graders = ProxyGrading(upstream)  # the proxy's own two graders, each timed where the variant has it
    observers: list[Any] = [Count()]
    if grading in ("server", "both"):
        observers.append(Timed("server", graders.server))
    if grading in ("client", "both"):
        observers.append(Timed("client", graders.clients))

    def write_costs() -> None:
        n = max(1, spent["requests"])
        Path(costs).write_text(json.dumps({k: round(spent[k] / n * 1e6, 1) for k in ("server", "client")}))

    app = ProxyApp(upstream, observers=observers, on_shutdown=[write_costs])
    if front == "socket":
        ProxyServer(app).run(on_ready=write_ready_file(ready))
    else:
        serve_forever(app, on_ready=write_ready_file(ready))


def measure(variants: list[str], window: float, rounds: int, concurrency: int, impl: str = "mock") -> dict[str, Any]:
    from orsbench.bench.driver import drive
    from orsbench.bench.plan import discover
    from orsbench.bench.procstat import loadavg, tree_cpu_seconds
    from orsbench.servers.launch import serve

    sys.path.insert(0, str(Path(__file__).parent))
    from _common import start_plain_nginx

    out: dict[str, Any] = {"loadavg_before": loadavg(), "window_s": window, "rounds": rounds, "concurrency": concurrency, "upstream": impl}
    tmp = tempfile.mkdtemp(prefix="orsbench-costs-")
    with serve("echo", impl=impl) as mock:
        running: dict[str, Any] = {}
        try:
            for variant in variants:
                if variant == "nginx":
                    nginx = start_plain_nginx(mock.url)
                    running[variant] = (nginx, nginx.url, nginx.pid)
                    continue
                ready = os.path.join(tmp, f"{variant}.url")
                child = subprocess.Popen(
                    [sys.executable, __file__, "--serve", mock.url, ready, variant, os.path.join(tmp, f"{variant}.json")],
                    stderr=subprocess.DEVNULL,
                )
                deadline = time.monotonic() + 60
                while not os.path.exists(ready):
                    if child.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"{variant} did not start")
                    time.sleep(0.05)
                running[variant] = (child, Path(ready).read_text().strip(), child.pid)
            plans = {v: discover(url) for v, (_, url, _) in running.items()}
            for v, (_, url, _) in running.items():  # warm-up
                drive(url, plans[v], concurrency=concurrency, duration=1.0)
            totals = {v: {"cpu": 0.0, "server_cpu": 0.0, "episodes": 0, "failures": 0} for v in running}
            for _ in range(rounds):
                for v, (_, url, pid) in running.items():
                    before = tree_cpu_seconds(pid) or 0.0
                    server_before = tree_cpu_seconds(mock.pid) or 0.0  # the upstream serves only this variant's traffic now
                    result = drive(url, plans[v], concurrency=concurrency, duration=window, max_episodes=5000)
                    totals[v]["cpu"] += (tree_cpu_seconds(pid) or 0.0) - before
                    totals[v]["server_cpu"] += (tree_cpu_seconds(mock.pid) or 0.0) - server_before
                    totals[v]["episodes"] += result.episodes
                    totals[v]["failures"] += result.failures
        finally:
            for v, (handle, _, _) in running.items():
                if v == "nginx":
                    handle.stop()
                else:
                    handle.send_signal(signal.SIGINT)
                    try:
                        handle.wait(30)
                    except subprocess.TimeoutExpired:
                        handle.kill()
                        handle.wait(5)
    for v, t in totals.items():
        requests = max(1, t["episodes"] * (6 + plans[v].calls))
        figures: dict[str, Any] = {"episodes": t["episodes"], "failures": t["failures"], "cpu_us_per_request": round(t["cpu"] / requests * 1e6, 1)}
        episodes = max(1, t["episodes"])
        # The cost in the units a user weighs it in: the proxy's CPU per episode over the upstream server's own.
        figures["cpu_us_per_episode"] = round(t["cpu"] / episodes * 1e6, 1)
        figures["server_cpu_us_per_episode"] = round(t["server_cpu"] / episodes * 1e6, 1)
        figures["share_of_server_cpu"] = round(t["cpu"] / t["server_cpu"], 3) if t["server_cpu"] else None
        costs = Path(tmp, f"{v}.json")
        if costs.exists():
            figures["observers_us_per_request"] = json.loads(costs.read_text())
        out[v] = figures
    if "nginx" in out:
        for v in running:
            out[v]["over_nginx"] = round(out[v]["cpu_us_per_request"] / max(0.1, out["nginx"]["cpu_us_per_request"]), 2)
    out["loadavg_after"] = loadavg()
    return out


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve_variant(*sys.argv[2:6])
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--window", type=float, default=4.0, help="seconds per window (default 4)")
    parser.add_argument("--rounds", type=int, default=2, help="windows per variant (default 2)")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent echo episodes (default 16)")
    parser.add_argument("--impl", default="mock", help="the upstream echo server: mock (default) or sdk (the openreward SDK's own Server)")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or args.window <= 0 or args.rounds < 1:
        parser.error(f"unknown variant(s) {unknown}" if unknown else "--window must be > 0 and --rounds >= 1")
    out = measure(variants, args.window, args.rounds, args.concurrency, args.impl)
    print(f"load average before {out['loadavg_before']}, after {out['loadavg_after']}; upstream: echo on {args.impl}")
    print(f"{'variant':<15} {'episodes':>8} {'fail':>5} {'CPU µs/req':>11} {'x nginx':>8} {'µs/episode':>11} {'server µs/ep':>12} {'x server':>9}  observers µs/req")
    for v in variants:
        f = out[v]
        print(
            f"{v:<15} {f['episodes']:>8} {f['failures']:>5} {f['cpu_us_per_request']:>11.1f} {f.get('over_nginx', 0):>8} "
            f"{f['cpu_us_per_episode']:>11.1f} {f['server_cpu_us_per_episode']:>12.1f} {f['share_of_server_cpu']!s:>9}  {f.get('observers_us_per_request', '')}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 1 if any(out[v]["failures"] for v in variants) else 0


if __name__ == "__main__":
    sys.exit(main())
