"""What the deployment group adds to ``orsbench check`` at its default settings (issue 35: at most 10 s on echo).

    python benchmarks/deployment_speed.py                 # 5 alternated runs of each, echo on the mock
    python benchmarks/deployment_speed.py --runs 3 --json deployment_speed.json

Measures, side by side in one run (runs alternated, so a change in the machine's load falls on both sides):

* **end to end** — ``orsbench check --scenario echo`` as a user types it, against the same command with every
  check but the ``deployment.*`` group (``--only '[!d]*,d[!e]*'``; both its probes are leaves, so the run
  skips it): the difference is what the group adds;
* **checks only** — ``run_checks`` against one running mock with and without the group, the deployment
  probes' own time and requests (``affinity`` and ``deployment``, as ``check`` prints them), and the server's CPU over each run (from /proc);
* **behind nginx** — the probe's own time against ``serve echo --replicas 3`` (where nginx is installed).

Exits 1 when the group adds more than the bound or a run did not pass.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from _common import emit, end_to_end, group_figures, group_runs, spread
from orsbench.checks import Options, run_checks
from orsbench.servers.launch import Deployment, start
from orsbench.servers.replicas import nginx_path


WITHOUT = "[!d]*,d[!e]*"  # every check id but deployment.* (discovery and dataset start with "di", "da")
#: The group's two probes: ``affinity`` (before the session probe) and ``deployment`` (after the call probe).
PROBES = ("affinity", "deployment")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", default="echo")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--bound", type=float, default=10.0, help="most seconds the group may add (default 10)")
    parser.add_argument("--json", dest="json_path", help="write the figures here as JSON")
    args = parser.parse_args()

    e2e, codes = end_to_end(args.scenario, WITHOUT, args.runs)
    server = start(args.scenario)
    try:
        measured = group_runs(server, WITHOUT.split(","), args.runs, PROBES)
    finally:
        server.stop()
    codes += measured.codes

    behind: dict[str, object] = {"nginx": nginx_path() is not None}
    if nginx_path() is not None:
        front = start(args.scenario, deployment=Deployment(3, front="nginx"))
        try:
            seen: list[float] = []
            for _ in range(args.runs):
                timed = {}
                report = run_checks(front.url, Options(env=front.env_name), only=["deployment.*"], on_probe=lambda p, s, n: timed.__setitem__(p, (s, n)))
                seen.append(sum(timed[p][0] for p in PROBES))
                codes.append(report.exit_code)
            behind["deployment_probe_s"] = spread(seen)
        finally:
            front.stop()

    figures = group_figures(args.scenario, WITHOUT, args.runs, e2e, measured)
    added = statistics.median(e2e["with"]) - statistics.median(e2e["without"])  # unrounded, against --bound
    figures |= {
        "deployment_probe_s": spread(measured.probe_s),
        "deployment_probe_requests": measured.probe_requests,
        "behind_nginx_3_replicas": behind,
        "bound_s": args.bound,
        "all_passed": all(c == 0 for c in codes),
    }
    emit(figures, args.json_path)
    return 0 if figures["all_passed"] and added <= args.bound else 1


if __name__ == "__main__":
    sys.exit(main())
