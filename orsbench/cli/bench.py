"""``orsbench bench``: episodes/s and server CPU per episode, mock vs SDK twin vs floor."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from orsbench.bench.options import BenchOptions
from orsbench.cli import flags, reporting, subcommand, types
from orsbench.extras import require
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
    flags.add_scenario(parser, default="echo", help="scenario served by every server started (default echo)")
    parser.add_argument(
        "--impl", dest="impls", action="append", choices=IMPLEMENTATIONS.names(), default=None,
        help=f"server(s) to measure, repeatable (default: {', '.join(benched_by_default())})",
    )  # fmt: skip
    parser.add_argument(
        "--concurrency", "-c", type=types.positive(int), default=32,
        help="concurrent episodes: the load measured, not orsbench's own parallelism (default 32)",
    )  # fmt: skip
    parser.add_argument("--window", type=types.positive(float), default=5.0, help="seconds per measured window (default 5)")
    parser.add_argument("--rounds", type=types.positive(int), default=2, help="windows per server, alternating between servers (default 2)")
    parser.add_argument("--warmup", type=types.non_negative(float), default=1.0, help="seconds of unmeasured load per server first (default 1)")
    parser.add_argument("--max-episodes", type=types.positive(int), default=None, help="also stop a window after this many episodes")
    parser.add_argument("--calls", type=types.positive(int), default=1, help="tool calls per episode (default 1)")
    parser.add_argument("--think-time", type=types.non_negative(float), default=0.0, help="seconds before create, prompt and each call (default 0)")
    parser.add_argument("--tool", default=None, help="tool to call (default: the first tool)")
    parser.add_argument("--args", dest="tool_args", type=types.json_object, default=None, help="tool input as a JSON object (default: from its schema)")
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
    reporting.add_report_arguments(
        parser,
        formats=("json",),
        helps={"json": "also write the figures as JSON"},
        verbose_help="also print the machine the figures come from: cores, Python, load average before and after",
        quiet_help="no progress lines",
    )
    held = parser.add_argument_group(
        "held sessions and your own server",
        "--sessions N switches to held-session mode: N sessions, each inside one long streaming tool call "
        "(the slow scenario's wait() on the servers orsbench starts), held --hold seconds, then deleted; it "
        "reports memory and CPU per held session, errors, sessions left, the longest keep-alive gap and the p99 "
        "time to first byte. --url measures a server of yours on this machine instead of starting any.",
    )
    held.add_argument("--sessions", type=types.positive(int), default=None, metavar="N", help="hold N sessions at once (held-session mode)")
    held.add_argument(
        "--hold", type=types.non_negative(float), default=10.0, metavar="S", help="seconds every stream is held open together (default 10)"
    )
    held.add_argument(
        "--ping-interval", type=types.positive(float), default=5.0, metavar="S",
        help="keep-alive interval of the servers started for --sessions (default 5; the protocol's is 10)",
    )  # fmt: skip
    held.add_argument(
        "--ramp", type=types.positive(int), default=128, metavar="K",
        help="with --sessions: opens, call starts and deletes in flight at once (default 128)",
    )  # fmt: skip
    held.add_argument(
        "--url", type=types.http_url, default=None,
        help="measure the ORS server at this URL (127.0.0.1, localhost or [::1] only) instead of starting servers",
    )  # fmt: skip
    held.add_argument(
        "--server-pid", type=int, default=None, metavar="PID",
        help="with --url: the server's process id, to report its CPU time and memory from /proc",
    )  # fmt: skip
    flags.add_api_key(held, help="with --url: send this X-API-Key to your server")
    types.add_secret_arguments(held)
    flags.after_parse(parser, _flags_agree)
    parser.set_defaults(func=run)


def _flags_agree(args: argparse.Namespace) -> None:
    if args.url is not None and args.impls:
        raise flags.UsageError("--url measures your server; --impl starts orsbench's own: pass one or the other")
    if args.server_pid is not None and args.url is None:
        raise flags.UsageError("--server-pid needs --url (the servers orsbench starts are measured without it)")
    if (types.secrets_of(args) or args.api_key is not None) and args.url is None:
        raise flags.UsageError("--secret/--secrets-file/--api-key need --url (the servers orsbench starts need none)")


def run(args: argparse.Namespace) -> int:
    require("load", "the load benchmark")
    for name in args.impls or benched_by_default():
        IMPLEMENTATIONS.get(name).require(f"measuring {name} (leave it out: name the others with --impl)")
    from orsbench.bench.runner import run_bench

    progress = (lambda line: None) if args.quiet else (lambda line: print(f"  {line}", file=sys.stderr, flush=True))
    if args.sessions is not None or args.url is not None or args.server_pid is not None:
        return _run_held_or_url(args, progress)
    options = options_of(args)
    report = run_bench(args.scenario, replace(options, impls=options.impls or benched_by_default()), progress=progress)
    _emit(args, report)
    failed = any(f.driver.failures for f in report.servers.values())
    return 1 if failed else 0


def options_of(args: argparse.Namespace) -> BenchOptions:
    """The one options object of a bench run, from its flags (the key and secrets only for ``--url``)."""
    mine = args.url is not None
    return BenchOptions(
        calls=args.calls,
        think_time=args.think_time,
        tool=args.tool,
        tool_input=args.tool_args,
        split=args.split,
        secrets=types.secrets_of(args),
        api_key=flags.api_key_of(args) if mine else None,
        concurrency=args.concurrency,
        window_seconds=args.window,
        rounds=args.rounds,
        warmup_seconds=args.warmup,
        max_episodes_per_window=args.max_episodes,
        impls=tuple(dict.fromkeys(args.impls)) if args.impls else None,
        params=dict(args.param) or None,
        locust_seconds=args.locust,
        locust_users=args.locust_users,
        hold=args.hold,
        ping_interval=args.ping_interval,
        ramp_concurrency=args.ramp,
    )


def _run_held_or_url(args: argparse.Namespace, progress: Callable[[str], None]) -> int:
    """``--sessions N`` (held sessions, started servers or ``--url``) and ``--url`` alone (episodes/s)."""
    from orsbench.bench.target import TargetError, local_target

    options = options_of(args)
    target = None
    if args.url is not None:
        try:
            target = local_target(args.url, args.server_pid)
        except TargetError as exc:
            raise flags.UsageError(str(exc)) from None
    if args.sessions is None:
        from orsbench.bench.remote import run_url_bench

        assert target is not None
        report = run_url_bench(target, options, progress=progress)
        _emit(args, report)
        return 1 if any(f.driver.failures for f in report.servers.values()) else 0
    from orsbench.bench.sessions import run_held_bench

    cannot_hold = [name for name in options.impls or () if not IMPLEMENTATIONS.get(name).holds_sessions]
    if cannot_hold:
        raise flags.UsageError(f"{', '.join(sorted(cannot_hold))} cannot hold a session; choose ORS servers with --impl")
    held = run_held_bench(args.sessions, options, target=target, progress=progress)
    _emit(args, held)
    return 1 if held.failed or not held.servers else 0


def _emit(args: argparse.Namespace, report: Any) -> None:
    """The table for people (on stderr when ``--json -`` takes stdout), and the ``--json`` report."""
    out = reporting.people(args)
    print(report.render(), file=out)
    if args.verbose and report.machine:
        print(_machine(report.machine), file=out)
    if args.json:
        reporting.write_text(args.json, report.to_json())


def _machine(facts: dict[str, Any]) -> str:
    """``-v``: the machine behind the figures (a loaded machine explains a slow figure)."""
    shown = ", ".join(f"{key} {value}" for key, value in facts.items() if value is not None)
    return f"machine: {shown}"
