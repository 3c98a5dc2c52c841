"""One headless Locust process (``orsbench/load.py``) against a URL, and its episode rate.

``orsbench bench`` runs it against the same mock the driver measured, so the
report can say how far a single Locust process gets compared with the driver.
Locust runs as a subprocess with a wall-clock bound; its figures come from
its ``--json-file`` statistics, entry ``ORS episode``.
"""

from __future__ import annotations

import json
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
        "--ors-env", plan.env, "--ors-split", plan.split, "--ors-tool", plan.tool,
        "--ors-args", json.dumps(plan.tool_input), "--ors-calls", str(plan.calls), "--ors-think-time", str(plan.think_time),
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
        elif entry.get("num_failures"):
            result.errors[f"{entry.get('method')} {entry.get('name')}"] = int(entry["num_failures"])
    return result


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
