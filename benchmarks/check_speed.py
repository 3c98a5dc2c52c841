"""How long ``orsbench check --scenario echo`` takes, end to end (target: within 5 s).

    python benchmarks/check_speed.py                 # 5 runs of the command, plus the parts
    python benchmarks/check_speed.py --runs 10 --scenario slow --json check_speed.json

Measures, side by side in one run:

* **end to end** — the command a user types, as a subprocess: interpreter and
  import, starting the embedded mock, all checks, stopping it;
* **checks only** — ``run_checks`` against an already running mock (the probes
  and the grading, what ``orsbench check URL`` costs beyond start-up);
* **server start** — ``launch.start`` until ``/health`` answers.

Prints min / median / max of each and the end-to-end median as a share of the
target. Exits 1 when the median misses the target or a run did not pass.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from _common import spread
from orsbench.checks import Options, run_checks
from orsbench.servers.implementations import ors_servers
from orsbench.servers.launch import start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="echo")
    parser.add_argument("--impl", default="mock", choices=ors_servers())
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--target", type=float, default=5.0, help="end-to-end target in seconds (default 5)")
    parser.add_argument("--json", dest="json_path", help="write the figures here as JSON")
    args = parser.parse_args()

    command = [sys.executable, "-m", "orsbench", "check", "--scenario", args.scenario, "--impl", args.impl, "-q"]
    end_to_end: list[float] = []
    codes: list[int] = []
    for _ in range(args.runs):
        begin = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        end_to_end.append(time.perf_counter() - begin)
        codes.append(done.returncode)
        if done.returncode != 0:
            print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)

    starts: list[float] = []
    checks: list[float] = []
    requests = 0
    for _ in range(args.runs):
        begin = time.perf_counter()
        server = start(args.scenario, impl=args.impl)
        starts.append(time.perf_counter() - begin)
        try:
            begin = time.perf_counter()
            report = run_checks(server.url, Options(env=server.env_name))
            checks.append(time.perf_counter() - begin)
            requests = report.exchanges
            codes.append(report.exit_code)
        finally:
            server.stop()

    figures = {
        "command": " ".join(["orsbench", *command[3:]]),
        "runs": args.runs,
        "end_to_end_s": spread(end_to_end),
        "checks_only_s": spread(checks),
        "server_start_s": spread(starts),
        "requests_per_run": requests,
        "target_s": args.target,
        "median_vs_target": round(statistics.median(end_to_end) / args.target, 3),
        "exit_codes": sorted(set(codes)),
    }
    width = max(len(k) for k in ("end to end", "checks only", "server start"))
    print(f"{figures['command']}  ({args.runs} runs, {requests} requests per check run)")
    for label, key in (("end to end", "end_to_end_s"), ("checks only", "checks_only_s"), ("server start", "server_start_s")):
        s = figures[key]
        print(f"  {label:<{width}}  min {s['min']:6.3f} s  median {s['median']:6.3f} s  max {s['max']:6.3f} s")
    print(f"  end-to-end median = {figures['median_vs_target']:.2f} × the {args.target:g} s target")
    if args.json_path:
        with open(args.json_path, "w") as handle:
            json.dump(figures, handle, indent=2)
    ok = statistics.median(end_to_end) <= args.target and set(codes) == {0}
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
