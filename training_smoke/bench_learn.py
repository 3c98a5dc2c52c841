"""The learn profile's power: the clean run and every sabotage, over several seeds, as a table.

``python -m training_smoke.bench_learn [--seeds 0 1 2] [--sabotage NAME ...] [--jobs 2] --out DIR``
runs ``python -m training_smoke --profile learn`` once per (seed, condition) in
a fresh process (``training_smoke.bench.measure``: wall time, CPU seconds, peak
RSS of the process tree, the load average at its start), keeps every run's
JSON and reward curve under DIR, and prints a Markdown table (delta and p per
seed) plus one JSON line per run. Exit 1 when a clean run did not learn, a
sabotage was not detected (it learned), or a clean run broke the budget
(6 min wall, 2 GB).

``--jobs 2`` runs two at a time (each with one torch thread): on a shared
2-core machine that halves the wall time of the whole table, and each run's
own wall time grows; the table says which.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from training_smoke.bench import measure
from training_smoke.sabotage import SABOTAGES

MAX_WALL_S = 360.0
MAX_RSS_MB = 2048.0
CLEAN = "clean"


def run_one(seed: int, condition: str, out: Path, scenario: str) -> dict:
    extra = ["--seed", str(seed)] + ([] if condition == CLEAN else ["--sabotage", condition])
    result = measure(scenario, cold=False, extra=extra, profile="learn", keep=out / f"{condition}-seed{seed}.json")
    learning = result.pop("summary").get("learning") or {}
    result.update(seed=seed, condition=condition, learning=learning)
    result.pop("failures", None)
    return result


def table(results: list[dict], concurrent: bool = False) -> str:
    """Markdown, one row per run. With concurrent runs the CPU column is left out: ``RUSAGE_CHILDREN``
    (what ``measure`` reads) then mixes the runs that ended while another was being measured."""
    rows = [
        "| condition | seed | delta | p | learned | expected | wall | CPU | peak RSS (tree) | load avg at start |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(results, key=lambda r: (r["condition"] != CLEAN, r["condition"], r["seed"])):
        ln = r["learning"]
        expected = ln.get("learned") is (r["condition"] == CLEAN)
        rows.append(
            f"| {r['condition']} | {r['seed']} | {_num(ln.get('delta'), '+.2f')} | {_num(ln.get('p_value'), '.2g')} | "
            f"{ln.get('learned')} | {'yes' if expected else '**NO**'} | {r['wall_s']:.0f} s | "
            f"{'—' if concurrent else format(r['cpu_s'], '.0f') + ' s'} | "
            f"{r['peak_tree_rss_mb']:.0f} MB | {r['load_avg_1m_at_start']} |"
        )
    return "\n".join(rows)


def _num(value: object, spec: str) -> str:
    return format(value, spec) if isinstance(value, (int, float)) else "—"


def problems(results: list[dict]) -> list[str]:
    out = []
    for r in results:
        learned = r["learning"].get("learned")
        name = f"{r['condition']} seed {r['seed']}"
        if r["condition"] == CLEAN:
            if not learned:
                out.append(f"{name}: did not learn ({r['learning'].get('reason') or r.get('stderr_tail', '')[-300:]})")
            if r["wall_s"] > MAX_WALL_S or r["peak_tree_rss_mb"] > MAX_RSS_MB:
                out.append(f"{name}: over budget ({r['wall_s']} s, {r['peak_tree_rss_mb']} MB)")
        elif learned:
            out.append(f"{name}: the sabotage was not detected (learned: true)")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training_smoke.bench_learn", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--sabotage", action="append", choices=sorted(SABOTAGES), help="repeatable; default: every one")
    parser.add_argument("--no-clean", action="store_true", help="run only the sabotages")
    parser.add_argument("--scenario", default="pick")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (default 1)")
    parser.add_argument("--out", type=Path, required=True, help="directory for every run's JSON and PNG")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    conditions = ([] if args.no_clean else [CLEAN]) + (args.sabotage or list(SABOTAGES))
    jobs = [(seed, c) for c in conditions for seed in args.seeds]
    os.environ.setdefault("OMP_NUM_THREADS", "1" if args.jobs > 1 else "2")
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(run_one, seed, c, args.out, args.scenario) for seed, c in jobs]
        results = []
        for future in futures:
            results.append(future.result())
            r = results[-1]
            print(json.dumps({k: r[k] for k in ("condition", "seed", "wall_s", "cpu_s", "peak_tree_rss_mb", "load_avg_1m_at_start", "learning")}), flush=True)
    print(table(results, concurrent=args.jobs > 1))
    found = problems(results)
    for p in found:
        print(f"bench_learn: {p}", file=sys.stderr)
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
