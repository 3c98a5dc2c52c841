"""What several benchmark scripts share: one definition each, imported as ``from _common import …``.

The scripts run as files (``python benchmarks/x.py``), so this folder is first on ``sys.path`` and this module
imports by its name; it is not part of the installed package (the figures it helps make are the scripts').

* :func:`spread` — min, median and max of repeated timings, as every ``*_speed.py`` prints them;
* :func:`end_to_end` — ``orsbench check`` as a user types it, with and without one group, runs alternated;
* :func:`emit` — the figures as JSON on stdout, and into ``--json`` when given;
* :func:`start_plain_nginx` — nginx as a plain reverse proxy in front of one server, for the proxy benchmarks.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from urllib.parse import urlsplit

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
