"""How long ``orsbench check`` takes on the SDK test environments (tests/envs/), fuzz on and off.

    python benchmarks/check_user_envs.py                 # every environment, --timeout 3
    python benchmarks/check_user_envs.py --timeout 5 --fuzz 50 --json check_user_envs.json

Each environment is served once (``launch.start(AppTarget.parse("tests/envs/FILE.py:Class"))``,
forked from the preloaded zygote), then checked twice against the running
server: with the default fuzz and with ``--no-fuzz``. The time is the check's
own (probes + grading; server start excluded), which is what the issue's
"about 20 s for a fast local env" bounds. Prints a Markdown table with the
verdict and the finding of each run, and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from orsbench.bench.procstat import loadavg
from orsbench.checks import Options, Status, run_checks
from orsbench.servers import launch
from orsbench.servers.user_app import AppTarget

ENVS = (
    "always_raises.py:AlwaysRaises",
    "boundary_raises.py:BoundaryRaises",
    "nonascii_raises.py:NonAsciiRaises",
    "hangs_on_long.py:HangsOnLong",
    "second_tool_empty.py:SecondToolEmpty",
    "empty_answer_wins.py:EmptyAnswerWins",
    "leaked_answer.py:LeakedAnswer",
    "random_reward.py:RandomReward",
    "never_finishes.py:NeverFinishes",
    "validator_gated.py:ValidatorGated",
    "long_game.py:LongGame",
    "json_scorers.py:JsonObjectScorer",
    "json_scorers.py:JsonArrayScorer",
    "json_scorers.py:NumberStringScorer",
    "command_game.py:CommandGame",
    "multi_tool_lab.py:MultiToolLab",
    "stochastic_mdp.py:StochasticMdp",
)


def _finding(report) -> str:
    flagged = [r for r in report.results if r.status in (Status.FAIL, Status.WARN) and r.id.startswith(("tool.", "quality.", "call.episode"))]
    return ", ".join(f"{r.id} {r.status.value}" for r in flagged) or "–"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--timeout", type=float, default=3.0)
    parser.add_argument("--fuzz", type=int, default=Options.fuzz)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    launch.use_zygote(True)
    rows = []
    print(f"load average before: {loadavg()}", file=sys.stderr)
    for target in ENVS:
        with launch.serve(AppTarget.parse(f"tests/envs/{target}")) as server:
            row: dict = {"env": target}
            for label, fuzz in (("fuzz", args.fuzz), ("no_fuzz", 0)):
                started = time.monotonic()
                report = run_checks(server.url, Options(env=server.env_name, timeout=args.timeout, fuzz=fuzz))
                row[label] = {
                    "seconds": round(time.monotonic() - started, 2),
                    "exit": report.exit_code,
                    "requests": report.exchanges,
                    "finding": _finding(report),
                }
            rows.append(row)
            print(f"{target}: {row['fuzz']['seconds']} s / {row['no_fuzz']['seconds']} s", file=sys.stderr)
    load = loadavg()
    print("| environment | fuzz on: s (exit, requests) | fuzz off: s (exit, requests) | flagged (fuzz on) |")
    print("|---|---|---|---|")
    for row in rows:
        on, off = row["fuzz"], row["no_fuzz"]
        print(
            f"| `{row['env']}` | {on['seconds']} ({on['exit']}, {on['requests']}) | "
            f"{off['seconds']} ({off['exit']}, {off['requests']}) | {on['finding']} |"
        )
    print(f"\nload average after: {' '.join(load)}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": rows, "loadavg": load, "timeout": args.timeout, "fuzz": args.fuzz, "cpus": os.cpu_count()}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
