"""Memory the proxy's passive grader keeps per exchange, with and without ``--evidence-limit``.

Feeds the same synthetic echo traffic (``tests/passive_traffic.py``: create, prompt, two calls,
delete per episode) to :class:`~orsbench.checks.passive.PassiveGrader` bounded and unbounded,
side by side in one run, and prints what tracemalloc says each holds once the traffic is
through, per exchange, with the CPU time per exchange (observing and one final grading, under tracemalloc) and whether the two reports agree
check by check (status and message). No server: this is the grader's share of the proxy.

    python benchmarks/passive_memory.py [--exchanges 200000] [--limit 20000]
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orsbench.checks.passive import PassiveGrader  # noqa: E402
from orsbench.config import DEFAULT_EVIDENCE_LIMIT  # noqa: E402
from tests.passive_traffic import traffic  # noqa: E402

EXCHANGES_PER_EPISODE = 5


def feed(exchanges: int, limit: int | None) -> dict[str, Any]:
    """Grade ``exchanges`` synthetic exchanges; what the grader holds afterwards, and the report."""
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    grader = PassiveGrader("http://127.0.0.1:9", limit=limit)
    cpu = time.process_time()
    half = 0
    for n, ex in enumerate(traffic(exchanges // EXCHANGES_PER_EPISODE)):
        grader(ex)
        if n == exchanges // 2:
            half = tracemalloc.get_traced_memory()[0] - before
        if n % 50_000 == 0:
            print(f"  limit {limit or 'none'}: {n:,} exchanges", file=sys.stderr, flush=True)
    held = tracemalloc.get_traced_memory()[0] - before
    report = grader.report()  # grading is part of the cost: unbounded, the checks judge every exchange here
    cpu = time.process_time() - cpu
    tracemalloc.stop()
    return {
        "fed": report.exchanges,
        "kept": len(grader.evidence.exchanges),
        "held_mib": held / 2**20,
        "bytes_per_exchange": held / report.exchanges,
        # Growth over the second half of the traffic: what each further request costs once past the limit.
        "growth_per_exchange": (held - half) / (report.exchanges - exchanges // 2),
        "cpu_us_per_exchange": cpu / report.exchanges * 1e6,
        "verdicts": [(r.id, r.status.value, r.message) for r in report.results],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exchanges", type=int, default=200_000, help="exchanges to feed each grader (default 200,000)")
    parser.add_argument("--limit", type=int, default=DEFAULT_EVIDENCE_LIMIT, help=f"the bounded grader's limit (default {DEFAULT_EVIDENCE_LIMIT:,})")
    args = parser.parse_args()
    bounded, unbounded = feed(args.exchanges, args.limit), feed(args.exchanges, None)
    print(f"{'':28}{'no limit':>14}{f'limit {args.limit:,}':>16}{'ratio':>8}")
    rows = (
        ("fed", "exchanges graded"),
        ("kept", "exchanges kept"),
        ("held_mib", "MiB held (tracemalloc)"),
        ("bytes_per_exchange", "bytes held per exchange"),
        ("growth_per_exchange", "growth per exchange, 2nd half"),
        ("cpu_us_per_exchange", "CPU µs per exchange, graded"),
    )
    for key, label in rows:
        a, b = unbounded[key], bounded[key]
        print(f"{label:28}{a:>14,.1f}{b:>16,.1f}{(b / a if a else 0):>8.3f}")
    same = bounded["verdicts"] == unbounded["verdicts"]
    print(f"reports agree check by check (status and message): {same} ({len(bounded['verdicts'])} checks)")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
