"""``orsbench bench``: episodes/s and server CPU per episode, mock vs SDK twin vs floor."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orsbench.cli import subcommand, types
from orsbench.extras import require
from orsbench.scenarios import SCENARIOS
from orsbench.servers.implementations import IMPLEMENTATIONS, benched_by_default


@subcommand("bench")
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
    parser.add_argument("--scenario", default="echo", choices=sorted(SCENARIOS), help="scenario to serve (default echo)")
    parser.add_argument(
        "--impl", dest="impls", action="append", choices=IMPLEMENTATIONS.names(), default=None,
        help=f"server(s) to measure, repeatable (default: {', '.join(benched_by_default())})",
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
    held = parser.add_argument_group(
        "held sessions and your own server",
        "--sessions N switches to held-session mode: N sessions, each inside one long streaming tool call "
        "(the slow scenario's wait() on the servers orsbench starts), held --hold seconds, then deleted; it "
        "reports memory and CPU per held session, errors, sessions left, the longest keep-alive gap and the p99 "
        "time to first byte. --url measures a server of yours on this machine instead of starting any.",
    )
    held.add_argument("--sessions", type=int, default=None, metavar="N", help="hold N sessions at once (held-session mode)")
    held.add_argument("--hold", type=float, default=10.0, metavar="S", help="seconds every stream is held open together (default 10)")
    held.add_argument(
        "--ping-interval", type=float, default=5.0, metavar="S",
        help="keep-alive interval of the servers started for --sessions (default 5; the protocol's is 10)",
    )  # fmt: skip
    held.add_argument(
        "--ramp", type=int, default=128, metavar="K",
        help="with --sessions: opens, call starts and deletes in flight at once (default 128)",
    )  # fmt: skip
    held.add_argument(
        "--url", default=None,
        help="measure the ORS server at this URL (127.0.0.1, localhost or [::1] only) instead of starting servers",
    )  # fmt: skip
    held.add_argument(
        "--server-pid", type=int, default=None, metavar="PID",
        help="with --url: the server's process id, to report its CPU time and memory from /proc",
    )  # fmt: skip
    types.add_secret_arguments(held)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    require("load", "the load benchmark")
    for name in args.impls or benched_by_default():
        IMPLEMENTATIONS.get(name).require(f"measuring {name} (leave it out: name the others with --impl)")
    from orsbench.bench.runner import run_bench

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
    if args.sessions is not None or args.url is not None or args.server_pid is not None:
        return _run_held_or_url(args, tool_input, progress)
    report = run_bench(
        args.scenario,
        impls=tuple(dict.fromkeys(args.impls)) if args.impls else benched_by_default(),
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


def _usage(message: str) -> int:
    print(f"orsbench bench: {message}", file=sys.stderr)
    return 2


def _run_held_or_url(
    args: argparse.Namespace, tool_input: dict[str, Any] | None, progress: Callable[[str], None]
) -> int:
    """``--sessions N`` (held sessions, started servers or ``--url``) and ``--url`` alone (episodes/s)."""
    from orsbench.bench.target import TargetError, local_target

    if args.url is not None and args.impls:
        return _usage("--url measures your server; --impl starts orsbench's own: pass one or the other")
    if args.server_pid is not None and args.url is None:
        return _usage("--server-pid needs --url (the servers orsbench starts are measured without it)")
    secrets = types.secrets_of(args)
    if secrets and args.url is None:
        return _usage("--secret/--secrets-file need --url (the servers orsbench starts need no secrets)")
    target = None
    if args.url is not None:
        try:
            target = local_target(args.url, args.server_pid)
        except TargetError as exc:
            return _usage(str(exc))
    if args.sessions is None:
        from orsbench.bench.remote import run_url_bench

        assert target is not None
        report = run_url_bench(
            target, concurrency=args.concurrency, window_seconds=args.window, rounds=args.rounds, warmup_seconds=args.warmup,
            calls=args.calls, think_time=args.think_time, tool=args.tool, tool_input=tool_input, split=args.split,
            max_episodes_per_window=args.max_episodes, progress=progress, secrets=secrets,
        )  # fmt: skip
        _emit(args, report)
        return 1 if any(f.driver.failures for f in report.servers.values()) else 0
    from orsbench.bench.sessions import run_held_bench

    if args.sessions < 1 or args.hold < 0 or args.ramp < 1 or args.ping_interval <= 0:
        return _usage("--sessions and --ramp must be at least 1, --hold at least 0, --ping-interval positive")
    impls = tuple(dict.fromkeys(args.impls)) if args.impls else None
    cannot_hold = [name for name in impls or () if not IMPLEMENTATIONS.get(name).holds_sessions]
    if cannot_hold:
        return _usage(f"{', '.join(sorted(cannot_hold))} cannot hold a session; choose ORS servers with --impl")
    held = run_held_bench(
        args.sessions, hold=args.hold, impls=impls, target=target, ping_interval=args.ping_interval, ramp_concurrency=args.ramp,
        tool=args.tool, tool_input=tool_input, split=args.split, progress=progress, secrets=secrets,
    )  # fmt: skip
    _emit(args, held)
    return 1 if held.failed or not held.servers else 0


def _emit(args: argparse.Namespace, report: Any) -> None:
    """The table (and ``--json`` file), or only the JSON with ``--json -``."""
    if args.json_path == "-":
        print(report.to_json())
        return
    print(report.render())
    if args.json_path:
        Path(args.json_path).write_text(report.to_json() + "\n")
