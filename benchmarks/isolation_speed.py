"""What the session-isolation group adds to ``orsbench check``, and what the stateful explorer costs per 100 steps.

    python benchmarks/isolation_speed.py                  # 5 alternated runs of each, echo on the mock
    python benchmarks/isolation_speed.py --runs 3 --explore 200 --json isolation_speed.json

Measures, side by side in one run (runs alternated, so a change in the machine's load falls on both sides):

* **end to end** — ``orsbench check --scenario echo`` as a user types it, against the same command with
  ``--only '[!i]*'`` (every check but the ``isolation.*`` group; the isolation probe is a leaf, so the run skips
  it): the difference is what the group adds, the issue's bound is 10 s;
* **checks only** — ``run_checks`` against one running mock, with and without the group, and the isolation
  probe's own time and requests (as ``check -v`` prints them); the server's CPU time over each run (from /proc);
* **explorer** — ``--explore N`` against ``--explore 0`` on the group alone: seconds per 100 steps.

Exits 1 when the group adds more than the bound or a run did not pass.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from _common import emit, end_to_end, group_figures, group_runs, spread
from orsbench.checks import Options, run_checks
from orsbench.servers.launch import start

WITHOUT = "[!i]*"  # every check id but isolation.* (no other group starts with "i")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="echo")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--explore", type=int, default=100, help="explorer steps per run (default 100)")
    parser.add_argument("--bound", type=float, default=10.0, help="most seconds the group may add (default 10)")
    parser.add_argument("--json", dest="json_path", help="write the figures here as JSON")
    args = parser.parse_args()

    e2e, codes = end_to_end(args.scenario, WITHOUT, args.runs)
    explore_s: list[float] = []
    plain_s: list[float] = []
    steps = 0
    server = start(args.scenario)

    def explorer() -> None:  # the group alone, then with the explorer: after each pair, as before
        nonlocal steps
        for explore, into in ((0, plain_s), (args.explore, explore_s)):
            begin = time.perf_counter()
            report = run_checks(server.url, Options(env=server.env_name, fuzz=0, explore=explore), only=["isolation.*"])
            into.append(time.perf_counter() - begin)
            codes.append(report.exit_code)
            if explore:
                steps = report.evidence.facts.isolation.explored.steps

    try:
        measured = group_runs(server, [WITHOUT], args.runs, ("isolation",), each_run=explorer)
    finally:
        server.stop()
    codes += measured.codes

    per_100 = (statistics.median(explore_s) - statistics.median(plain_s)) / max(steps, 1) * 100
    figures = group_figures(args.scenario, WITHOUT, args.runs, e2e, measured)
    added = statistics.median(e2e["with"]) - statistics.median(e2e["without"])  # unrounded, against --bound
    figures |= {
        "requests": measured.requests,
        "isolation_probe_s": spread(measured.probe_s),
        "isolation_probe_requests": measured.probe_requests,
        "explorer": {
            "steps": steps,
            "group_alone_s": spread(plain_s),
            "group_with_explorer_s": spread(explore_s),
            "seconds_per_100_steps": round(per_100, 3),
        },
        "bound_s": args.bound,
        "all_passed": all(c == 0 for c in codes),
    }
    emit(figures, args.json_path)
    return 0 if figures["all_passed"] and added <= args.bound else 1


if __name__ == "__main__":
    sys.exit(main())
