"""One headless Locust process (``orsbench/load.py``) against a URL, and its episode rate.

``orsbench bench`` runs it against the same mock the driver measured, so the
report can say how far a single Locust process gets compared with the driver.
Locust runs as a subprocess with a wall-clock bound; its figures come from
its ``--json-file`` statistics, entry ``ORS episode``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from orsbench import protocol
from orsbench.bench.plan import EpisodePlan


@dataclass
class LocustResult:
    """Episode figures of one Locust run."""

    users: int
    seconds: float
    episodes: int = 0
    failures: int = 0
    #: Episodes per second over the steady part of the run (first and last second left out).
    rate: float = 0.0
    exit_code: int | None = None
    #: Episode latency percentiles in ms, ``{"p50": .., "p95": .., "p99": ..}``, from Locust's own histogram
    #: (nearest rank, as the driver's; Locust keeps times above 100 ms to two significant digits).
    latency_ms: dict[str, float] = field(default_factory=dict)
    #: Successful episodes whose last call answered ``finished: true`` (Locust's ``ORS finished`` entry).
    finished: int = 0
    #: Episodes per replica (``ORS replica <name>`` entries).
    replicas: dict[str, int] = field(default_factory=dict)
    #: Failure messages Locust recorded: ``"<name>: <error>"`` → occurrences.
    errors: dict[str, int] = field(default_factory=dict)
    log_tail: str = ""


def locustfile() -> str:
    """Path of ``orsbench/load.py``."""
    return str(Path(__file__).resolve().parent.parent / "load.py")


def run_locust(
    url: str, plan: EpisodePlan, *, users: int = 32, seconds: float = 10.0, timeout: float | None = None
) -> LocustResult:
    """Run ``locust -f orsbench/load.py --headless`` for ``seconds`` against ``url`` (one process)."""
    workdir = Path(tempfile.mkdtemp(prefix="orsbench-locust-"))
    stats = workdir / "stats"
    cmd = [
        sys.executable, "-m", "locust", "-f", locustfile(), "--headless", "--host", url,
        "-u", str(users), "-r", str(max(users, 1) * 10), "-t", f"{max(1, round(seconds))}s",
        "--stop-timeout", "5", "--json-file", str(stats), "--only-summary", "--loglevel", "WARNING",
        "--ors-env", plan.env, "--ors-split", plan.split, "--ors-think-time", str(plan.think_time),
        *_episode_flags(plan),
    ]  # fmt: skip
    env = {**os.environ, protocol.ENV_DISABLE_UPDATE_CHECK: "1"}
    result = LocustResult(users, seconds)
    try:
        done = subprocess.run(
            cmd, check=False, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout or seconds + 60
        )
        result.exit_code = done.returncode
        result.log_tail = (done.stdout + done.stderr)[-3000:]
    except subprocess.TimeoutExpired as exc:
        result.log_tail = f"locust did not finish within {exc.timeout:g}s"
        return result
    path = Path(f"{stats}.json")
    if not path.exists():
        return result
    for entry in json.loads(path.read_text()):
        if entry.get("name") == "episode" and entry.get("method") == "ORS":
            result.episodes = int(entry["num_requests"]) - int(entry["num_failures"])
            result.failures = int(entry["num_failures"])
            result.rate = steady_rate(entry.get("num_reqs_per_sec", {}), entry.get("num_fail_per_sec", {}))
            times = entry.get("response_times", {})
            result.latency_ms = {f"p{p}": histogram_percentile(times, p) for p in (50, 95, 99)}
        elif entry.get("name") == "finished" and entry.get("method") == "ORS":
            result.finished = int(entry["num_requests"])
        elif str(entry.get("name", "")).startswith("replica ") and entry.get("method") == "ORS":
            result.replicas[str(entry["name"])[len("replica ") :]] = int(entry["num_requests"])
        elif entry.get("num_failures"):
            result.errors[f"{entry.get('method')} {entry.get('name')}"] = int(entry["num_failures"])
    return result


def _episode_flags(plan: EpisodePlan) -> list[str]:
    """The flags that make Locust play ``plan``'s very episode: its learned script and task, or its one tool."""
    if plan.script:
        return ["--ors-script", json.dumps([[tool, value] for tool, value in plan.script]), "--ors-task", str(plan.task_index or 0)]
    return ["--ors-tool", plan.tool, "--ors-args", json.dumps(plan.tool_input), "--ors-calls", str(plan.calls)]


def histogram_percentile(times: dict[str, int], p: float) -> float:
    """Nearest-rank percentile of Locust's ``response_times`` histogram (``{ms: count}``); 0 when empty."""
    buckets = sorted((float(ms), int(n)) for ms, n in times.items())
    total = sum(n for _, n in buckets)
    if not total:
        return 0.0
    rank = min(total, max(1, math.ceil(p / 100 * total)))
    seen = 0
    for ms, n in buckets:
        seen += n
        if seen >= rank:
            return ms
    return buckets[-1][0]


def steady_rate(per_second: dict[str, int], failed_per_second: dict[str, int]) -> float:
    """Mean successful episodes/s over whole seconds, without the first and last (ramp-up, shutdown)."""
    seconds = sorted(int(s) for s in per_second)
    if not seconds:
        return 0.0
    if len(seconds) > 2:
        seconds = seconds[1:-1]
    ok = [per_second.get(str(s), 0) - failed_per_second.get(str(s), 0) for s in seconds]
    span = seconds[-1] - seconds[0] + 1
    return sum(ok) / span
