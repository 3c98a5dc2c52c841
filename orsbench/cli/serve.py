"""``orsbench serve SCENARIO``: serve a scenario until stopped."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from orsbench.config import ServerConfig
from orsbench.scenarios import REGISTRY, get_scenario
from orsbench.servers.app import IMPLEMENTATIONS, build_app, effective_config, serve_forever, write_ready_file

#: Read when neither --api-key nor a launcher's config gives a key: a key in the
#: environment does not show in ``ps`` output the way a command-line flag does.
API_KEY_ENV = "ORSBENCH_API_KEY"

#: CLI flag → ServerConfig field, for the knobs settable one by one.
KNOBS: dict[str, tuple[str, type, str]] = {
    "--ttl": ("ttl", float, "seconds without a request or ping before a session is reaped (default 900)"),
    "--ping-interval": ("ping_interval", float, "seconds between ': ping' keep-alive comments on a running call (default 10)"),
    "--latency": ("latency", float, "extra seconds every tool call takes (default 0)"),
    "--setup-delay": ("setup_delay", float, "extra seconds every session's setup() takes (default 0)"),
    "--setup-wait": ("setup_wait_timeout", float, "seconds /prompt and /call wait for setup before 503 starting (default 25)"),
    "--chunk-size": ("chunk_size", int, "characters per SSE chunk event (default 4096)"),
    "--linger": ("linger", float, "seconds a finished call stays resumable by task_id (default 60)"),
    "--max-body": ("max_body", int, "largest request body in bytes; larger gets 413 (default 1 MiB)"),
    "--reaper-interval": ("reaper_interval", float, "seconds between reaper sweeps (default min(5, ttl/4))"),
    "--seed": ("seed", int, "seed for fault profiles (default 0)"),
}


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
    parser.add_argument("scenario", choices=sorted(REGISTRY), metavar="SCENARIO", help=f"one of: {', '.join(REGISTRY)}")
    parser.add_argument("--impl", choices=IMPLEMENTATIONS, default="mock", help="mock engine, openreward SDK twin, ors-sdk twin, or floor (a constant-answer baseline for `orsbench bench`; not a real server) (default mock)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; anything else is reachable from outside)")
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one (default 0)")
    for flag, (field, kind, text) in KNOBS.items():
        parser.add_argument(flag, dest=field, type=kind, default=None, help=text)
    parser.add_argument("--api-key", dest="api_key", default=None, help=f"require this key (X-API-Key or Bearer) on every route but /health (default: ${API_KEY_ENV} if set)")
    parser.add_argument("--fault", dest="faults", action="append", default=None, metavar="NAME[,NAME]", help="apply fault profiles (see docs)")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="scenario parameter (see `orsbench scenarios -v`)")
    parser.add_argument("--access-log", action="store_true", help="log one line per request to stderr")
    parser.add_argument("--config-json", help=argparse.SUPPRESS)
    parser.add_argument("--ready-file", help=argparse.SUPPRESS)
    parser.set_defaults(func=run)


def config_from_args(args: argparse.Namespace) -> tuple[ServerConfig, set[str]]:
    """Build the config: --config-json first, then individual flags on top. Returns the explicit fields."""
    config = ServerConfig.from_json(args.config_json) if args.config_json else ServerConfig()
    explicit: set[str] = set()
    if args.config_json:
        explicit |= {k for k, v in ServerConfig.from_json(args.config_json).__dict__.items() if v != getattr(ServerConfig(), k)}
    changes: dict[str, Any] = {}
    for field, _kind, _text in KNOBS.values():
        value = getattr(args, field)
        if value is not None:
            changes[field] = value
    if args.api_key is not None:
        changes["api_key"] = args.api_key
    elif not args.config_json and os.environ.get(API_KEY_ENV):
        changes["api_key"] = os.environ[API_KEY_ENV]
    if args.faults:
        changes["faults"] = tuple(n.strip() for item in args.faults for n in item.split(",") if n.strip())
    if args.access_log:
        changes["access_log"] = True
    params = dict(config.params)
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"orsbench serve: --param needs KEY=VALUE, got {item!r}")
        params[key.strip()] = value
    changes["params"] = params
    explicit |= set(changes)
    return config.replace(**changes), explicit


def run(args: argparse.Namespace) -> int:
    config, explicit = config_from_args(args)
    try:
        scenario = get_scenario(args.scenario, **config.params)
    except ValueError as exc:
        print(f"orsbench serve: {exc}", file=sys.stderr)
        return 2
    config = effective_config(scenario, config, explicit)
    try:
        app = build_app([scenario], config, args.impl)
    except ValueError as exc:  # an unknown fault, a knob the SDK twin lacks, ...
        print(f"orsbench serve: {exc}", file=sys.stderr)
        return 2

    def on_ready(url: str) -> None:
        print(f"orsbench: serving {scenario.name} ({args.impl}) at {url} — env name {scenario.name!r}; Ctrl-C stops", flush=True)
        if args.ready_file:
            write_ready_file(args.ready_file)(url)

    serve_forever(app, host=args.host, port=args.port, on_ready=on_ready)
    return 0
