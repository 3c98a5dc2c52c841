"""Measure the CPU profile against its budget: wall time and peak RSS, one scenario at a time.

``python -m training_smoke.bench`` runs ``python -m training_smoke --profile cpu``
in a fresh process per scenario (cold: ``--no-cache``, so the tiny model is
built and warmed up inside the measurement) and samples the resident memory of
that process and of its whole tree (the ORS server is a child) every 50 ms.
It also reports the CPU seconds used and the load average at the start: on a
shared machine wall time says as much about the neighbours as about the run.
It prints one JSON object and exits 1 when a run fails or exceeds the budget.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

SCENARIOS = ("echo", "sparse-reward", "task-tool")
MAX_WALL_S = 120.0
MAX_RSS_MB = 2048.0


def measure(
    scenario: str,
    *,
    cold: bool = True,
    extra: Sequence[str] = (),
    interval: float = 0.05,
    profile: str = "cpu",
    keep: Path | None = None,
) -> dict:
    """Run one smoke in a subprocess; return its wall time, peak RSS (process and tree) and verdict.

    ``keep``: write the run's JSON summary (and reward curve) there instead of a temporary directory.
    """
    import psutil

    with tempfile.TemporaryDirectory(prefix="orsbench-bench-") as tmp:
        output = keep or Path(tmp) / "summary.json"
        log = Path(tmp) / "stderr.log"
        cmd = [sys.executable, "-m", "training_smoke", "--profile", profile, "--scenario", scenario, "--output", str(output)]
        cmd += ["--no-cache"] if cold else []
        cmd += list(extra)
        peak_main = peak_tree = 0
        load_before = os.getloadavg()[0]
        cpu_before = _children_cpu_s()
        start = time.perf_counter()
        with open(log, "wb") as err:
            proc = psutil.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
            while proc.poll() is None:
                try:
                    main = proc.memory_info().rss
                    tree = main + sum(_rss(c) for c in proc.children(recursive=True))
                except psutil.NoSuchProcess:
                    break
                peak_main, peak_tree = max(peak_main, main), max(peak_tree, tree)
                time.sleep(interval)
            returncode = proc.wait()
        wall = time.perf_counter() - start
        cpu = _children_cpu_s() - cpu_before
        summary = json.loads(output.read_text()) if output.exists() else {}
        result = {
            "scenario": scenario,
            "cold": cold,
            "returncode": returncode,
            "wall_s": round(wall, 2),
            # CPU seconds of the run and its server: unlike wall time, barely moved by other load on the machine.
            "cpu_s": round(cpu, 2),
            "load_avg_1m_at_start": round(load_before, 2),
            "peak_rss_mb": round(peak_main / 2**20, 1),
            "peak_tree_rss_mb": round(peak_tree / 2**20, 1),
            "passed": bool(summary.get("passed")),
            "failures": summary.get("failures", []),
            "tool_calls": summary.get("tool_calls"),
            "phases_s": summary.get("wall_s"),
            "summary": summary,
        }
        if returncode != 0:
            result["stderr_tail"] = log.read_text(errors="replace")[-3000:]
        return result


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _rss(process) -> int:
    import psutil

    try:
        return process.memory_info().rss
    except psutil.NoSuchProcess:
        return 0


def over_budget(result: dict, max_wall_s: float, max_rss_mb: float) -> list[str]:
    problems = []
    if result["wall_s"] > max_wall_s:
        problems.append(f"{result['scenario']}: wall {result['wall_s']} s > budget {max_wall_s} s")
    if result["peak_tree_rss_mb"] > max_rss_mb:
        problems.append(f"{result['scenario']}: peak RSS {result['peak_tree_rss_mb']} MB > budget {max_rss_mb} MB")
    if not result["passed"]:
        problems.append(f"{result['scenario']}: smoke failed: {result['failures'] or result.get('stderr_tail', '')[-500:]}")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m training_smoke.bench",
        description="Wall time and peak RSS of the CPU training smoke, per scenario, against the budget.",
    )
    parser.add_argument("--scenario", action="append", choices=SCENARIOS, help="repeatable; default: all three")
    parser.add_argument("--warm", action="store_true", help="reuse the cached tiny model and warm-up (default: cold)")
    parser.add_argument("--max-wall", type=float, default=MAX_WALL_S, help=f"budget in seconds (default {MAX_WALL_S:g})")
    parser.add_argument("--max-rss-mb", type=float, default=MAX_RSS_MB, help=f"budget in MB (default {MAX_RSS_MB:g})")
    args, extra = parser.parse_known_args(argv)
    results = [measure(s, cold=not args.warm, extra=extra) for s in args.scenario or SCENARIOS]
    for result in results:
        result.pop("summary")
    problems = [p for r in results for p in over_budget(r, args.max_wall, args.max_rss_mb)]
    print(
        json.dumps(
            {"budget": {"wall_s": args.max_wall, "rss_mb": args.max_rss_mb}, "runs": results, "problems": problems}, indent=2
        )
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
