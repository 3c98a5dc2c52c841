"""How long ``orsbench check-client`` takes over every case with a fast correct client (target: within 60 s).

    python benchmarks/check_client_speed.py                  # --jobs 4, the reference adapter
    python benchmarks/check_client_speed.py --jobs 2 --json check_client_speed.json

Measures, side by side in one run:

* **end to end** — ``orsbench check-client --client-cmd <reference adapter> --jobs N -q`` as a subprocess,
  the command a user types: interpreter, every case server, every client run, grading, reports;
* **per case** — from an in-process run of :func:`orsbench.clientcheck.check_client`: the client's own
  time (its command, start to exit) and the overhead orsbench adds around it (serving the case,
  stopping the server, reading its request log, grading): ``wall - client``.

The client is the reference adapter run as a file (it imports httpx, not orsbench). Prints the
figures and exits 1 when a run did not pass or the end-to-end wall time misses the target.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from _common import spread
from orsbench.clientcheck import cases, check_client
from orsbench.clientcheck.reference import command
from orsbench.servers import launch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=4, help="cases played at once (default 4)")
    parser.add_argument("--target", type=float, default=60.0, help="end-to-end target in seconds (default 60)")
    parser.add_argument("--json", dest="json_path", help="write the figures here as JSON")
    args = parser.parse_args()
    client = command()
    load_before = os.getloadavg()[0]

    argv = [sys.executable, "-m", "orsbench", "check-client", "--client-cmd", client, "--jobs", str(args.jobs), "-q"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    begin = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    end_to_end = time.perf_counter() - begin
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-2000:], file=sys.stderr)

    launch.use_zygote()
    with launch.serve("echo"):  # the zygote starts once per process: warm it, so each case pays a fork
        pass
    per_case: list[dict[str, float | str]] = []

    def on_case(run, results) -> None:  # type: ignore[no-untyped-def]
        per_case.append({"case": run.case.name, "client_s": run.duration_s, "wall_s": run.wall_s, "overhead_s": run.wall_s - run.duration_s})

    selected = cases()
    begin = time.perf_counter()
    report = check_client(client, selected, jobs=args.jobs, on_case=on_case)
    in_process = time.perf_counter() - begin
    overheads = [float(c["overhead_s"]) for c in per_case]
    figures = {
        "cases": len(selected),
        "jobs": args.jobs,
        "load_average_before": round(load_before, 2),
        "end_to_end_s": round(end_to_end, 2),
        "end_to_end_exit": done.returncode,
        "end_to_end_cpu_s": round(cpu, 2),
        "in_process_s": round(in_process, 2),
        "in_process_exit": report.exit_code,
        "client_s": spread([float(c["client_s"]) for c in per_case]),
        "overhead_s": spread(overheads),
        "slowest_cases": sorted(per_case, key=lambda c: -float(c["wall_s"]))[:4],
    }
    print(json.dumps(figures, indent=2, default=lambda v: round(v, 2) if isinstance(v, float) else v))
    print(f"end to end {end_to_end:.1f} s for {len(selected)} cases ({end_to_end / args.target:.0%} of the {args.target:g} s target); "
          f"orsbench's overhead per case: median {figures['overhead_s']['median']:.2f} s")
    if args.json_path:
        with open(args.json_path, "w") as handle:
            json.dump(figures, handle, indent=2, default=str)
    return 0 if done.returncode == 0 and report.exit_code == 0 and end_to_end <= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
