"""``orsbench serve SCENARIO``: serve a scenario until stopped."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from orsbench.cli import flags, subcommand, types
from orsbench.config import ServerConfig, effective_config, read_config_file
from orsbench.scenarios import SCENARIOS, get_scenario
from orsbench.servers.app import BindError, announce_ready, build_app, serve_forever
from orsbench.servers.implementations import IMPLEMENTATIONS
from orsbench.servers.fronts import BALANCER_FAULTS

#: Read when neither --api-key nor a launcher's config gives a key: a key in the
#: environment does not show in ``ps`` output the way a command-line flag does.
API_KEY_ENV = flags.API_KEY_ENV

#: CLI flag → ServerConfig field, for the knobs settable one by one.
KNOBS: dict[str, tuple[str, Callable[[str], Any], str]] = {
    "--ttl": ("ttl", types.positive(float), "seconds without a request or ping before a session is reaped (default 900)"),
    "--ping-interval": ("ping_interval", types.positive(float), "seconds between ': ping' keep-alive comments on a running call (default 10)"),
    "--latency": ("latency", types.non_negative(float), "extra seconds every tool call takes (default 0)"),
    "--setup-delay": ("setup_delay", types.non_negative(float), "extra seconds every session's setup() takes (default 0)"),
    "--setup-wait": ("setup_wait_timeout", types.positive(float), "seconds /prompt and /call wait for setup before 503 starting (default 25)"),
    "--chunk-size": ("chunk_size", types.positive(int), "characters per SSE chunk event (default 4096)"),
    "--linger": ("linger", types.non_negative(float), "seconds a finished call stays resumable by task_id (default 60)"),
    "--max-body": ("max_body", types.positive(int), "largest request body in bytes; larger gets 413 (default 1 MiB)"),
    "--reaper-interval": ("reaper_interval", types.positive(float), "seconds between reaper sweeps (default min(5, ttl/4))"),
    "--seed": ("seed", int, "seed for fault profiles (default 0)"),
}


@subcommand("serve")
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="serve a scenario (mock engine or SDK twin) until stopped",
        description="Serve a scenario over ORS and print the URL it listens on. "
        "The mock engine (--impl mock) is orsbench's own fast, configurable server; "
        "--impl sdk serves the same scenario with the real openreward SDK Server, "
        "--impl ors-sdk with ors-sdk's Server (no 503 starting, no finish latch: see the README). "
        "Binds 127.0.0.1 on a free port unless told otherwise.",
        epilog="example: orsbench serve slow --ttl 3 --param long_call=20 --ping-interval 1",
    )
    parser.add_argument("scenario", nargs="?", choices=sorted(SCENARIOS), metavar="SCENARIO", help=f"one of: {', '.join(SCENARIOS)} (omit with --cassette)")
    parser.add_argument(
        "--scenario", dest="scenario_flag", choices=sorted(SCENARIOS), metavar="SCENARIO", default=None,
        help="the same as the positional SCENARIO (the spelling of check and bench)",
    )  # fmt: skip
    parser.add_argument("--cassette", metavar="FILE", default=None, help="replay a cassette recorded by `orsbench record` or `orsbench proxy --record` (offline; docs/cassettes.md)")
    parser.add_argument("--on-miss", choices=("error", "nearest"), default=None, help="with --cassette: a call no recording matches answers ok:false (error, default) or the closest recorded call's answer (nearest)")
    impls = "; ".join(f"{i.name}: {i.summary}" for i in IMPLEMENTATIONS.values())
    parser.add_argument("--impl", choices=IMPLEMENTATIONS.names(), default="mock", help=f"{impls} (default mock)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; anything else is reachable from outside)")
    parser.add_argument("--port", type=types.port, default=0, help="port to bind; 0 picks a free one (default 0)")
    for flag, (field, kind, text) in KNOBS.items():
        parser.add_argument(flag, dest=field, type=kind, default=None, help=text)
    parser.add_argument("--api-key", dest="api_key", default=None, help=f"require this key (X-API-Key or Bearer) on every route but /health (default: ${API_KEY_ENV} if set)")
    parser.add_argument("--fault", dest="faults", type=types.fault_names, action="extend", default=None, metavar="NAME[,NAME]", help="apply fault profiles (see docs)")
    parser.add_argument("--param", type=types.param, action="append", default=[], metavar="KEY=VALUE", help="scenario parameter (see `orsbench scenarios -v`)")
    parser.add_argument("--access-log", action="store_true", help="log one line per request to stderr")
    deploy = parser.add_argument_group("a deployment: replicas behind a balancer (docs/deployments.md)")
    deploy.add_argument(
        "--replicas", type=types.positive(int), default=None, metavar="N",
        help="serve N replicas behind nginx (session-hash affinity on X-Session-ID), or the built-in hashing router "
        "where nginx is not installed; every answer names its replica in X-ORSBench-Replica",
    )  # fmt: skip
    deploy.add_argument(
        "--balancer", choices=("auto", "nginx", "builtin"), default="auto",
        help="with --replicas: the front (auto: nginx when installed, else the built-in router; default auto)",
    )  # fmt: skip
    deploy.add_argument(
        "--balancer-fault", dest="balancer_faults", action="append", default=[], metavar="NAME",
        choices=list(BALANCER_FAULTS),
        help="with --replicas: plant a deployment mistake (repeatable): "
        + "; ".join(f"{name}: {text}" for name, text in BALANCER_FAULTS.items()),
    )  # fmt: skip
    deploy.add_argument(
        "--restart-every", type=types.positive(float), default=None, metavar="S",
        help="with --replicas: every S seconds restart one replica in turn (SIGTERM: its sessions are lost), a rolling deploy",
    )  # fmt: skip
    parser.add_argument("--config-json", help=argparse.SUPPRESS)
    parser.add_argument("--config-file", help=argparse.SUPPRESS)  # how the launcher passes a config (API key included): 0600
    parser.add_argument("--ready-file", help=argparse.SUPPRESS)
    parser.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> tuple[ServerConfig, set[str]]:
    """Build the config: --config-json first, then individual flags on top. Returns the explicit fields."""
    given = read_config_file(args.config_file) if args.config_file else args.config_json
    config = ServerConfig.from_json(given) if given else ServerConfig()
    explicit: set[str] = set(config.explicit)
    if given:
        explicit |= {k for k, v in config.__dict__.items() if v != getattr(ServerConfig(), k)}
    changes: dict[str, Any] = {}
    for field, _kind, _text in KNOBS.values():
        value = getattr(args, field)
        if value is not None:
            changes[field] = value
    if args.api_key is not None:
        changes["api_key"] = args.api_key
    elif not given and os.environ.get(API_KEY_ENV):
        changes["api_key"] = os.environ[API_KEY_ENV]
    if args.faults:
        changes["faults"] = tuple(args.faults)
    if args.access_log:
        changes["access_log"] = True
    changes["params"] = {**config.params, **dict(args.param)}
    explicit |= set(changes)
    return config.replace(**changes), explicit


def run(args: argparse.Namespace) -> int:
    if args.scenario_flag is not None:
        if args.scenario not in (None, args.scenario_flag):
            raise flags.UsageError(f"give the scenario once: {args.scenario!r} or --scenario {args.scenario_flag!r}")
        args.scenario = args.scenario_flag
    if args.cassette is not None:
        if args.scenario not in (None, "cassette"):
            raise flags.UsageError(f"give a SCENARIO or --cassette FILE, not both (got {args.scenario!r})")
        args.scenario = "cassette"
        args.param = [*args.param, ("path", args.cassette)] + ([("on_miss", args.on_miss)] if args.on_miss else [])
    elif args.scenario is None:
        raise flags.UsageError("name a SCENARIO (see `orsbench scenarios`) or give --cassette FILE")
    elif args.on_miss is not None:
        raise flags.UsageError("--on-miss applies to --cassette only")
    if args.replicas is None and (args.balancer_faults or args.restart_every or args.balancer != "auto"):
        raise flags.UsageError("--balancer, --balancer-fault and --restart-every need --replicas N")
    IMPLEMENTATIONS.get(args.impl).require()  # a missing extra is a usage error before anything is built
    config, explicit = config_from_args(args)
    try:
        scenario = get_scenario(args.scenario, **config.params)
    except ValueError as exc:  # a bad parameter, an unreadable cassette: the message names it
        raise flags.UsageError(str(exc)) from None
    config = effective_config(scenario, config, explicit)
    try:
        app = build_app([scenario], config, args.impl)
    except ValueError as exc:  # an unknown fault, a knob the SDK twin lacks, ...
        raise flags.UsageError(str(exc)) from None

    from orsbench.servers.replicas import exit_with_parent

    exit_with_parent()  # a replica of `serve --replicas` leaves with its deployment
    if args.replicas is not None:  # each replica keeps what was set on purpose (a scenario's defaults never override it)
        return _deployment(args, scenario.name, config.replace(explicit=tuple(sorted(explicit))))
    on_ready = announce_ready(
        lambda url: f"orsbench: serving {scenario.name} ({args.impl}) at {url} — env name {scenario.name!r}; Ctrl-C stops",
        args.ready_file,
    )

    try:
        serve_forever(app, host=args.host, port=args.port, on_ready=on_ready)
    except BindError as exc:
        raise flags.UsageError(f"{exc} (choose another --port, or 0 for a free one)") from None
    return 0


def _deployment(args: argparse.Namespace, name: str, config: ServerConfig) -> int:
    """``--replicas N``: the replicas and their front, in the foreground until stopped."""
    from orsbench.servers.app import write_ready_file
    from orsbench.servers.replicas import pick_front, serve_deployment

    if not IMPLEMENTATIONS.get(args.impl).holds_sessions:
        raise flags.UsageError(f"--replicas: --impl {args.impl} holds no sessions to route")
    try:
        pick_front(args.balancer)
    except ValueError as exc:
        raise flags.UsageError(str(exc)) from None

    def ready(url: str, front: str) -> None:
        faults = f"; planted: {', '.join(args.balancer_faults)}" if args.balancer_faults else ""
        rolling = f"; one replica restarted every {args.restart_every:g} s" if args.restart_every else ""
        print(
            f"orsbench: serving {name} ({args.impl}) as {args.replicas} replica(s) behind {front} at {url}{faults}{rolling} "
            f"— env name {name!r}; Ctrl-C stops",
            flush=True,
        )
        if args.ready_file:
            write_ready_file(args.ready_file)(url)

    try:
        serve_deployment(
            name, args.replicas, impl=args.impl, config=config, faults=args.balancer_faults, restart_every=args.restart_every,
            front=args.balancer, host=args.host, port=args.port, on_ready=ready,
        )  # fmt: skip
    except BindError as exc:
        raise flags.UsageError(f"{exc} (choose another --port, or 0 for a free one)") from None
    return 0
