"""``orsbench bench``: episodes/s and server CPU per episode, mock vs SDK twin vs floor."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from orsbench.cli import types
from orsbench.extras import require
from orsbench.scenarios import REGISTRY
from orsbench.servers.app import IMPLEMENTATIONS


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="measure episodes/s and server CPU per episode: mock engine vs SDK twin vs bare floor",
        description="Start the mock engine, the SDK twin and a constant-answer floor for one scenario (all on "
        "127.0.0.1), drive whole ORS episodes against them in alternating windows with one asyncio driver, and "
        "print episodes/s, p50/p95/p99 episode latency and server CPU (user+sys of the process tree) per episode, "
        "with the ratios mock/sdk and mock/floor. Optionally also runs one headless Locust process against the "
        "mock and reports its rate as a ratio to the driver's. See docs/load.md.",
        epilog="example: orsbench bench --concurrency 32 --window 5 --rounds 2 --locust 10 --json bench.json",
    )
    parser.add_argument("--scenario", default="echo", choices=sorted(REGISTRY), help="scenario to serve (default echo)")
    parser.add_argument(
        "--impl", dest="impls", action="append", choices=IMPLEMENTATIONS, default=None,
        help="server(s) to measure, repeatable (default: mock, sdk, floor)",
    )  # fmt: skip
    parser.add_argument("--concurrency", "-c", type=types.positive(int), default=32, help="concurrent episodes (default 32)")
    parser.add_argument("--window", type=types.positive(float), default=5.0, help="seconds per measured window (default 5)")
    parser.add_argument("--rounds", type=types.positive(int), default=2, help="windows per server, alternating between servers (default 2)")
    parser.add_argument("--warmup", type=types.non_negative(float), default=1.0, help="seconds of unmeasured load per server first (default 1)")
    parser.add_argument("--max-episodes", type=types.positive(int), default=None, help="also stop a window after this many episodes")
    parser.add_argument("--calls", type=types.positive(int), default=1, help="tool calls per episode (default 1)")
    parser.add_argument("--think-time", type=types.non_negative(float), default=0.0, help="seconds before create, prompt and each call (default 0)")
    parser.add_argument("--tool", default=None, help="tool to call (default: the first tool)")
    parser.add_argument("--args", dest="tool_args", default=None, help="tool input as a JSON object (default: from its schema)")
    parser.add_argument("--split", default=None, help="split to draw tasks from (default: the first train split)")
    parser.add_argument("--param", type=types.param, action="append", default=[], metavar="KEY=VALUE", help="scenario parameter")
    parser.add_argument(
        "--locust",
        type=types.non_negative(float),
        default=0.0,
        metavar="SECONDS",
        help="also run one headless Locust process this long against the mock (default 0: off)",
    )
    parser.add_argument("--locust-users", type=types.positive(int), default=None, help="Locust users (default: --concurrency)")
    parser.add_argument(
        "--json", dest="json_path", type=types.output_file, default=None, metavar="PATH", help="also write the figures as JSON ('-' for stdout)"
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    require("load", "the load benchmark")
    if "sdk" in (args.impls or ("sdk",)):
        require("sdk", "measuring the SDK twin (leave it out with --impl mock --impl floor)")
    from orsbench.bench.runner import DEFAULT_IMPLS, run_bench

    tool_input = None
    if args.tool_args:
        try:
            tool_input = json.loads(args.tool_args)
        except ValueError as exc:
            print(f"orsbench bench: --args is not JSON: {exc}", file=sys.stderr)
            return 2
        if not isinstance(tool_input, dict):
            print("orsbench bench: --args must be a JSON object", file=sys.stderr)
            return 2
    params = dict(args.param)
    progress = (lambda line: None) if args.quiet else (lambda line: print(f"  {line}", file=sys.stderr, flush=True))
    report = run_bench(
        args.scenario,
        impls=tuple(dict.fromkeys(args.impls)) if args.impls else DEFAULT_IMPLS,
        concurrency=args.concurrency,
        window_seconds=args.window,
        rounds=args.rounds,
        warmup_seconds=args.warmup,
        calls=args.calls,
        think_time=args.think_time,
        tool=args.tool,
        tool_input=tool_input,
        split=args.split,
        params=params or None,
        locust_seconds=args.locust,
        locust_users=args.locust_users,
        max_episodes_per_window=args.max_episodes,
        progress=progress,
    )
    if args.json_path == "-":
        print(report.to_json())
    else:
        print(report.render())
        if args.json_path:
            Path(args.json_path).write_text(report.to_json() + "\n")
    failed = any(f.driver.failures for f in report.servers.values())
    return 1 if failed else 0
