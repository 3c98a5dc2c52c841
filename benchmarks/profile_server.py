"""Profile a served scenario's hot path with cProfile while the episode driver loads it.

    python benchmarks/profile_server.py --impl mock --duration 8 --top 30

The server runs as ``orsbench serve`` (the launcher's own command line) under
``python -m cProfile``; it is stopped with SIGINT so uvicorn shuts down cleanly
and cProfile writes its stats, which are printed sorted by own time.
"""

from __future__ import annotations

import argparse
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from orsbench import protocol
from orsbench.bench import discover, drive
from orsbench.servers.app import IMPLEMENTATIONS
from orsbench.servers.launch import command


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="echo")
    parser.add_argument("--impl", default="mock", choices=IMPLEMENTATIONS)
    parser.add_argument("--duration", type=float, default=8.0, help="seconds of load (default 8)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--calls", type=int, default=1)
    parser.add_argument("--top", type=int, default=30, help="rows to print (default 30)")
    parser.add_argument("--sort", default="tottime", help="pstats sort key (default tottime)")
    parser.add_argument("--out", help="keep the .prof file here")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="orsbench-profile-"))
    prof = Path(args.out) if args.out else workdir / "server.prof"
    ready = workdir / "url"
    cmd = command(args.scenario, impl=args.impl, ready_file=str(ready))
    cmd[1:1] = ["-m", "cProfile", "-o", str(prof)]
    env = {**os.environ, protocol.ENV_DISABLE_UPDATE_CHECK: "1"}
    process = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                print("server did not start", file=sys.stderr)
                return 1
            time.sleep(0.05)
        url = ready.read_text().strip()
        plan = discover(url, calls=args.calls)
        result = drive(url, plan, concurrency=args.concurrency, duration=args.duration)
        print(f"{result.episodes} episodes, {result.failures} failures, {result.rate:.0f}/s (profiled: slower than real)")
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    if not prof.exists():
        print("no profile written", file=sys.stderr)
        return 1
    pstats.Stats(str(prof)).sort_stats(args.sort).print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
