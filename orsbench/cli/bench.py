"""``orsbench bench``: episodes/s and server CPU per episode, mock vs SDK twin vs floor."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from orsbench import protocol
from orsbench.bench import thresholds
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
        epilog="examples:\n"
        "  orsbench bench --concurrency 32 --window 5 --rounds 2 --locust 10 --json bench.json\n"
        "  orsbench bench --app my_env.py:MyEnv --shape ramp --fail-under knee=32\n"
        "  orsbench bench --server-cmd 'python my_env.py --port {port}' --shape burst --batch 8 --group 8 --idle 10\n"
        "  orsbench bench --url http://127.0.0.1:8000 --sessions 2000 --held-by ping --hold 60",
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
    parser.add_argument(
        "--calls", type=types.positive(int), default=None,
        help="the one-tool episode: this many calls of --tool (default its first) per episode, tasks round-robin "
        "(default: play the episode the checker's player learns on the server, reward path included)",
    )  # fmt: skip
    parser.add_argument("--think-time", type=types.non_negative(float), default=0.0, help="seconds before create, prompt and each call (default 0)")
    parser.add_argument("--tool", default=None, help="the one-tool episode: call this tool (default: the learned episode)")
    parser.add_argument(
        "--args", dest="tool_args", type=types.json_object, default=None,
        help="the one-tool episode: the tool's input as a JSON object (default: from its schema)",
    )  # fmt: skip
    parser.add_argument("--env", default=None, help="environment to load (default: the server's first)")
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
    shapes = parser.add_argument_group(
        "shapes of load",
        "--shape windows (default): episodes/s in alternating windows at --concurrency. --shape ramp: windows at "
        "concurrency 1, 2, 4, ... up to --max-concurrency, to the knee (the largest concurrency with >= 99 %% of "
        "episodes ok). --shape burst: a GRPO trainer's steps: --batch x --group episodes at once (a group's members "
        "on one task), then --idle seconds of nothing (the weight update), --rounds times; group makespan p50/p99.",
    )
    shapes.add_argument("--shape", choices=("windows", "ramp", "burst"), default="windows", help="the shape of load (default windows)")
    shapes.add_argument(
        "--max-concurrency", type=types.positive(int), default=256, metavar="N", help="--shape ramp: the ramp's bound (default 256)"
    )
    shapes.add_argument("--batch", type=types.positive(int), default=8, metavar="B", help="--shape burst: prompts per step (default 8)")
    shapes.add_argument("--group", type=types.positive(int), default=4, metavar="G", help="--shape burst: rollouts per prompt (default 4)")
    shapes.add_argument(
        "--idle", type=types.non_negative(float), default=5.0, metavar="S", help="--shape burst: seconds idle between steps (default 5)"
    )
    shapes.add_argument(
        "--fail-under", type=thresholds.parse, action="append", default=[], metavar="METRIC=VALUE",
        help="exit 1 when a figure of any server measured is below VALUE (repeatable): "
        + "; ".join(f"{k}: {v}" for k, v in thresholds.METRICS.items()).replace("%", "%%"),
    )  # fmt: skip
    reporting.add_report_arguments(
        parser,
        formats=("json",),
        helps={"json": "also write the figures as JSON"},
        verbose_help="also print the machine the figures come from: cores, Python, load average before and after",
        quiet_help="no progress lines",
    )
    held = parser.add_argument_group(
        "held sessions and your own server",
        "--sessions N switches to held-session mode: N sessions held --hold seconds, then deleted — pinged every 10 s "
        "(--held-by ping: any environment, as the reference client keeps a session alive) or each inside one long "
        "streaming call (--held-by call: a tool taking 'seconds', the slow scenario's wait() on the servers orsbench "
        "starts); it reports memory per held session, server CPU per ping or per session, errors, sessions left and "
        "latency. --url measures a server of yours on this machine; --app and --server-cmd start one, measure it and "
        "stop it.",
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
        "--held-by", choices=("auto", "call", "ping"), default="auto",
        help="with --sessions: ping = sessions open and pinged every 10 s (the reference client's cadence), any "
        "environment; call = each inside one long streaming call of a tool taking 'seconds'; auto (default): call on "
        "the servers orsbench starts (the slow scenario) and where your server has such a tool, else ping",
    )  # fmt: skip
    held.add_argument(
        "--ping-every", type=types.positive(float), default=protocol.PING_INTERVAL_S, metavar="S",
        help=f"--held-by ping: seconds between two pings of one session (default {protocol.PING_INTERVAL_S:g}, the reference client's)",
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
    flags.add_app(held, help="serve your openreward Environment class(es) on 127.0.0.1 with the SDK Server, measure it, stop it")
    flags.add_server_cmd(
        held,
        help='any command that starts your ORS server, measured and stopped by orsbench; {port} is replaced by a free '
        'port, e.g. "python my_env.py --port {port}" (split like a shell line, run without a shell)',
    )
    held.add_argument(
        "--wait", type=types.positive(float), default=60.0, metavar="S",
        help="with --app/--server-cmd: how long the server may take to answer /health (default 60)",
    )  # fmt: skip
    flags.add_api_key(held, help="with --url: send this X-API-Key to your server")
    types.add_secret_arguments(held)
    flags.after_parse(parser, _flags_agree)
    parser.set_defaults(func=run)


def _yours(args: argparse.Namespace) -> str | None:
    """The flag naming a server of the user's (``--url``, ``--app``, ``--server-cmd``), or None."""
    given = [flag for flag, value in (("--url", args.url), ("--app", args.app), ("--server-cmd", args.server_cmd)) if value]
    if len(given) > 1:
        raise flags.UsageError(f"give one server of yours: {' and '.join(given)} both name one")
    return given[0] if given else None


def _flags_agree(args: argparse.Namespace) -> None:
    yours = _yours(args)
    if yours and args.impls:
        raise flags.UsageError(f"{yours} measures your server; --impl starts orsbench's own: pass one or the other")
    if args.server_pid is not None and args.url is None:
        raise flags.UsageError("--server-pid needs --url (the servers orsbench starts, --app and --server-cmd are measured without it)")
    if (types.secrets_of(args) or args.api_key is not None) and not yours:
        raise flags.UsageError("--secret/--secrets-file/--api-key need --url, --app or --server-cmd (the servers orsbench starts need none)")
    if args.sessions is not None and args.shape != "windows":
        raise flags.UsageError(f"--shape {args.shape} measures episodes; --sessions holds sessions: pass one or the other")
    if args.locust and (yours or args.shape != "windows"):
        raise flags.UsageError("--locust runs beside the side-by-side windows on orsbench's mock: leave out --url/--app/--server-cmd and --shape")
    measured = {"windows": ("ok", "rate", "finished"), "ramp": ("ok", "rate", "finished", "knee"), "burst": ("ok", "rate", "finished")}
    names = ("ok", "rate") if args.sessions is not None else measured[args.shape]
    if missing := thresholds.unmeasured(args.fail_under, names):
        raise flags.UsageError(f"--fail-under {', '.join(missing)}: this mode does not measure it (it measures {', '.join(names)})")


def run(args: argparse.Namespace) -> int:
    require("load", "the load benchmark")
    for name in args.impls or benched_by_default():
        IMPLEMENTATIONS.get(name).require(f"measuring {name} (leave it out: name the others with --impl)")
    progress = (lambda line: None) if args.quiet else (lambda line: print(f"  {line}", file=sys.stderr, flush=True))
    from orsbench.bench.plan import PlanError
    from orsbench.servers.launch import ServerStartError

    try:
        with _your_server(args, progress) as target:
            report = _measure(args, target, progress)
    except PlanError as exc:
        print(f"orsbench bench: cannot load-test: {exc}", file=sys.stderr)
        return 2
    except ServerStartError as exc:
        print(f"orsbench bench: the server did not start: {exc}", file=sys.stderr)
        return 2
    _emit(args, report)
    missed = thresholds.check(args.fail_under, report.ci_figures())
    for line in missed:
        print(f"FAIL --fail-under: {line}", file=reporting.people(args))
    return 1 if missed or _failed(report) else 0


def _failed(report: Any) -> bool:
    failed = getattr(report, "failed", None)
    if failed is not None:
        return bool(failed)
    return any(f.driver.failures for f in report.servers.values()) or not report.servers


@contextlib.contextmanager
def _your_server(args: argparse.Namespace, progress: Callable[[str], None]) -> Iterator[Any]:
    """The user's server as a load target: ``--url`` as given, ``--app``/``--server-cmd`` started here and stopped."""
    from orsbench.bench.target import LoadTarget, TargetError, local_target

    if args.url is not None:
        try:
            yield local_target(args.url, args.server_pid)
        except TargetError as exc:
            raise flags.UsageError(str(exc)) from None
        return
    if args.app is None and args.server_cmd is None:
        yield None
        return
    from orsbench.servers.launch import start, start_command
    from orsbench.servers.user_app import AppTarget

    if args.app is not None:
        try:
            app = AppTarget.parse(args.app)
        except ValueError as exc:
            raise flags.UsageError(str(exc)) from None
        progress(f"serving {args.app} ...")
        server = start(app, timeout=args.wait)
        name = "app"
    else:
        try:
            server = start_command(args.server_cmd, wait=args.wait)
        except ValueError as exc:
            raise flags.UsageError(f"--server-cmd: {exc}") from None
        name = "cmd"
    try:
        progress(f"{name}: {server.url} (pid {server.pid})")
        yield LoadTarget(server.url, server.pid, name)
    finally:
        server.stop()


def _measure(args: argparse.Namespace, target: Any, progress: Callable[[str], None]) -> Any:
    """The report of the mode the flags name: held sessions, a shape, or episodes/s."""
    options = options_of(args)
    if args.sessions is not None:
        return _held(args, options, target, progress)
    if args.shape != "windows":
        return _shape(args, options, target, progress)
    if target is not None:
        from orsbench.bench.remote import run_url_bench

        return run_url_bench(target, options, progress=progress)
    from orsbench.bench.runner import run_bench

    return run_bench(args.scenario, replace(options, impls=options.impls or benched_by_default()), progress=progress)


def _held(args: argparse.Namespace, options: BenchOptions, target: Any, progress: Callable[[str], None]) -> Any:
    """``--sessions N``: pinged (any environment) or each in a long call (a tool taking ``seconds``)."""
    from orsbench.bench.sessions import hold_plan, holdable_impls, run_held_bench

    cannot_hold = [name for name in options.impls or () if not IMPLEMENTATIONS.get(name).holds_sessions]
    if cannot_hold:
        raise flags.UsageError(f"{', '.join(sorted(cannot_hold))} cannot hold a session; choose ORS servers with --impl")
    by = args.held_by
    if by == "auto":
        if target is None:
            by = "call"
        else:
            _plan, timed = hold_plan(target.url, env=args.env, split=args.split, tool=args.tool, tool_input=args.tool_args,
                                     secrets=options.secrets, api_key=options.api_key)  # fmt: skip
            by = "call" if timed else "ping"
            progress(f"holding sessions by {by}" + ("" if timed else ": no tool takes 'seconds'"))
    if by == "call":
        return run_held_bench(args.sessions, options, target=target, progress=progress)
    from orsbench.bench.pinged import run_pinged_bench

    with _started(args.scenario, options.impls or holdable_impls(), target, progress) as targets:
        return run_pinged_bench(args.sessions, targets, options, interval=args.ping_every, progress=progress)


def _shape(args: argparse.Namespace, options: BenchOptions, target: Any, progress: Callable[[str], None]) -> Any:
    """``--shape ramp|burst`` on the user's server or on each server orsbench starts (default: the mock)."""
    from orsbench.bench.plan import resolve_plan
    from orsbench.bench.procstat import loadavg, machine_facts
    from orsbench.bench.shapes import ShapeReport, bursts, ramp

    before = loadavg()
    o = options
    results: dict[str, Any] = {}
    described = ""
    with _started(args.scenario, options.impls or ("mock",), target, progress) as targets:
        for each in targets:
            plan = resolve_plan(
                each.url, env=o.env, split=o.split, tool=o.tool, tool_input=o.tool_input, calls=o.calls,
                think_time=o.think_time, api_key=o.api_key, secrets=o.secrets,
            )  # fmt: skip
            described = plan.describe()
            progress(f"{each.name}: episode: {described}")
            say = (lambda name: lambda line: progress(f"{name}: {line}"))(each.name)
            if args.shape == "ramp":
                results[each.name] = ramp(
                    each.url, plan, max_concurrency=args.max_concurrency, window=args.window, api_key=o.api_key, progress=say
                )
            else:
                results[each.name] = bursts(
                    each.url, plan, batch=args.batch, group=args.group, rounds=args.rounds, idle=args.idle, api_key=o.api_key,
                    progress=say,
                )  # fmt: skip
    return ShapeReport(args.shape, described, results, machine_facts(before))


@contextlib.contextmanager
def _started(scenario: str, impls: Any, target: Any, progress: Callable[[str], None]) -> Iterator[list[Any]]:
    """``[target]`` when the user named a server, else each of ``impls`` serving ``scenario``, stopped afterwards."""
    if target is not None:
        yield [target]
        return
    from orsbench.bench.target import LoadTarget
    from orsbench.servers.launch import start

    servers = []
    try:
        for impl in impls:
            progress(f"starting {impl} server for {scenario} ...")
            servers.append(start(scenario, impl=impl))
        yield [LoadTarget(s.url, s.pid, s.impl) for s in servers]
    finally:
        for server in servers:
            server.stop()


def options_of(args: argparse.Namespace) -> BenchOptions:
    """The one options object of a bench run, from its flags (the key and secrets only for ``--url``)."""
    mine = _yours(args) is not None
    return BenchOptions(
        env=args.env,
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
        held_by=args.held_by,
    )


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
