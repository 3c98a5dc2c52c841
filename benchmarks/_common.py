"""What several benchmark scripts share: one definition each, imported as ``from _common import …``.

The scripts run as files (``python benchmarks/x.py``), so this folder is first on ``sys.path`` and this module
imports by its name; it is not part of the installed package (the figures it helps make are the scripts').

* :func:`spread` — min, median and max of repeated timings, as every ``*_speed.py`` prints them;
* :func:`end_to_end` — ``orsbench check`` as a user types it, with and without one group, runs alternated;
* :func:`group_runs` and :func:`group_figures` — ``run_checks`` with and without a group on one server, and the
  figures every group benchmark prints first;
* :func:`emit` — the figures as JSON on stdout, and into ``--json`` when given;
* :func:`start_plain_nginx` — nginx as a plain reverse proxy in front of one server, for the proxy benchmarks.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from orsbench.bench.procstat import tree_cpu_seconds
from orsbench.checks import Options, run_checks
from orsbench.servers.launch import RunningServer
from orsbench.servers.replicas import Nginx, start_nginx


def spread(values: list[float]) -> dict[str, float]:
    """``{"min", "median", "max"}`` of ``values``, rounded to the millisecond."""
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3), "max": round(max(values), 3)}


def end_to_end(scenario: str, without: str, runs: int) -> tuple[dict[str, list[float]], list[int]]:
    """``orsbench check --scenario S -q`` as a user types it, with and without a group (``--only WITHOUT``), runs
    alternated so a change in the machine's load falls on both sides: the seconds of each side, and every exit code."""
    base = [sys.executable, "-m", "orsbench", "check", "--scenario", scenario, "-q"]
    e2e: dict[str, list[float]] = {"with": [], "without": []}
    codes: list[int] = []
    for _ in range(runs):
        for side, extra in (("with", []), ("without", ["--only", without])):
            begin = time.perf_counter()
            done = subprocess.run([*base, *extra], capture_output=True, text=True, check=False)
            e2e[side].append(time.perf_counter() - begin)
            codes.append(done.returncode)
            if done.returncode != 0:
                print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
    return e2e, codes


@dataclass
class GroupRuns:
    """``run_checks`` with and without a group against one running server: each side's seconds and server CPU (from
    /proc), its requests, every exit code, and the group's probes' own seconds and requests (the "with" side)."""

    checks: dict[str, list[float]] = field(default_factory=lambda: {"with": [], "without": []})
    cpu: dict[str, list[float]] = field(default_factory=lambda: {"with": [], "without": []})
    requests: dict[str, int] = field(default_factory=dict)
    codes: list[int] = field(default_factory=list)
    probe_s: list[float] = field(default_factory=list)
    probe_requests: int = 0


def group_runs(server: RunningServer, without: list[str], runs: int, probes: Sequence[str], *,
               each_run: Callable[[], None] | None = None) -> GroupRuns:  # fmt: skip
    """Both sides ``runs`` times, alternated (a change in the machine's load falls on both); ``each_run`` after
    each pair (a script's own extra measurement, interleaved the same way)."""
    out = GroupRuns()
    for _ in range(runs):
        for side, only in (("with", None), ("without", without)):
            timed: dict[str, tuple[float, int]] = {}
            before = tree_cpu_seconds(server.pid) or 0.0
            begin = time.perf_counter()
            report = run_checks(server.url, Options(env=server.env_name), only=only, on_probe=lambda p, s, n: timed.__setitem__(p, (s, n)))
            out.checks[side].append(time.perf_counter() - begin)
            out.cpu[side].append((tree_cpu_seconds(server.pid) or 0.0) - before)
            out.requests[side] = report.exchanges
            out.codes.append(report.exit_code)
            if side == "with":
                out.probe_s.append(sum(timed[p][0] for p in probes))
                out.probe_requests = sum(timed[p][1] for p in probes)
        if each_run is not None:
            each_run()
    return out


def group_figures(scenario: str, without: str, runs: int, e2e: dict[str, list[float]], measured: GroupRuns) -> dict[str, object]:
    """The figures every group benchmark prints first: the command, end to end, checks only and server CPU per side."""
    return {
        "command": f"orsbench check --scenario {scenario} -q",
        "without": f"--only '{without}'",
        "runs": runs,
        "load_average": round(os.getloadavg()[0], 1),
        "end_to_end_s": {side: spread(v) for side, v in e2e.items()},
        "group_adds_end_to_end_s": round(statistics.median(e2e["with"]) - statistics.median(e2e["without"]), 3),
        "checks_only_s": {side: spread(v) for side, v in measured.checks.items()},
        "server_cpu_s": {side: spread(v) for side, v in measured.cpu.items()},
    }


def emit(figures: dict[str, object], json_path: str | None) -> None:
    """Print ``figures`` as JSON, and write them to ``json_path`` too when one is given."""
    print(json.dumps(figures, indent=2))
    if json_path:
        with open(json_path, "w") as fh:
            json.dump(figures, fh, indent=2)


def start_plain_nginx(upstream: str) -> Nginx:
    """Debian's nginx as a plain reverse proxy to ``upstream`` on 127.0.0.1: orsbench's one nginx configuration
    (:func:`orsbench.servers.replicas.nginx_config`) with one worker, as the orsbench proxy is one process, tuned for
    thousands of held streams. Stopped (and its folder removed) by ``.stop()``."""
    return start_nginx([urlsplit(upstream).port or 0], connections=16384, keepalive=4096, request_buffering=False)
